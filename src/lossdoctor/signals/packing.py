"""Packed rows: several training examples laid end to end in one row of the batch.

Packing (TRL's `SFTConfig(packing=True)`, `padding_free=True`, most pre-training loaders) puts many
examples into one row; TRL's padding-free collator even flattens the whole batch into a single row.
"Sample 0" then names a row that holds a dozen examples, and a check per row is wrong: a row can
hold some supervised tokens while one of its examples has none. What the user can act on is the
example, so the rows are cut into examples where the trainer says one begins:

- `position_ids` fall back to 0 (every packing collator restarts positions per example, so that
  attention and rotary positions stay per example);
- else `cu_seq_lens_q` / `cu_seq_lens_k` (the cumulative lengths of the flattened examples that
  TRL and flash-attention's varlen kernels take) for a batch of one row.

A row is only "packed" when it holds two examples of two tokens or more: right padding with
position 0 makes one-token pieces at the end of a row, which are not examples.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

#: keys a batch carries the example boundaries under (TRL, flash-attention's varlen kernels)
POSITION_KEY = "position_ids"
CU_SEQ_KEYS = ("cu_seq_lens_q", "cu_seq_lens_k", "cu_seqlens")


@dataclass(frozen=True)
class Example:
    """One example inside a packed row: its row, its index in the row, its tokens [start, end)."""

    row: int
    index: int
    start: int
    end: int

    @property
    def length(self) -> int:
        return self.end - self.start

    def to_dict(self) -> dict[str, int]:
        return {"row": self.row, "example": self.index, "start": self.start, "end": self.end}


def starts_from_positions(position_ids: np.ndarray) -> np.ndarray:
    """(rows, tokens) bool: where an example begins (position 0, and the first token of a row)."""
    pos = np.asarray(position_ids).reshape(position_ids.shape[0], -1)
    starts = pos == 0
    if starts.shape[1]:
        starts[:, 0] = True
    return starts


def starts_from_cu_seq_lens(cu: np.ndarray, tokens: int) -> np.ndarray | None:
    """(1, tokens) starts from cumulative example lengths; None when they do not fit the row."""
    cu = np.asarray(cu).reshape(-1).astype(np.int64)
    if cu.size < 2 or cu[0] != 0 or (np.diff(cu) < 0).any() or cu[-1] > tokens:
        return None
    starts = np.zeros((1, tokens), dtype=bool)
    starts[0, cu[:-1][cu[:-1] < tokens]] = True
    if tokens:
        starts[0, 0] = True
    return starts


def examples_of(starts: np.ndarray) -> list[Example] | None:
    """The examples of every row, or None when no row holds two examples (nothing is packed)."""
    out: list[Example] = []
    packed = False
    for r in range(starts.shape[0]):
        begin = np.flatnonzero(starts[r])
        ends = np.append(begin[1:], starts.shape[1])
        lengths = ends - begin
        if int((lengths >= 2).sum()) >= 2:
            packed = True
        out += [Example(r, k, int(a), int(b)) for k, (a, b) in enumerate(zip(begin, ends))]
    return out if packed else None


def packed_examples(batch: dict[str, Any]) -> list[Example] | None:
    """The examples of a batch's packed rows from its `position_ids` or `cu_seq_lens_*` (numpy or
    CPU tensors), or None when the batch is not packed."""
    pos = batch.get(POSITION_KEY)
    if pos is not None and getattr(pos, "ndim", 0) == 2:
        return examples_of(starts_from_positions(_numpy(pos)))
    ids = batch.get("input_ids")
    for key in CU_SEQ_KEYS:
        cu = batch.get(key)
        if cu is not None and ids is not None and getattr(ids, "ndim", 0) == 2 and ids.shape[0] == 1:
            starts = starts_from_cu_seq_lens(_numpy(cu), int(ids.shape[1]))
            return examples_of(starts) if starts is not None else None
    return None


def per_example_sum(examples: list[Example], per_token: np.ndarray) -> np.ndarray:
    """Sum of a (rows, tokens) array over each example's tokens."""
    flat = np.asarray(per_token).reshape(per_token.shape[0], -1)
    cums = np.concatenate([np.zeros((flat.shape[0], 1)), np.cumsum(flat, axis=1, dtype=np.float64)], axis=1)
    return np.asarray([cums[e.row, e.end] - cums[e.row, e.start] for e in examples])


def _numpy(t: Any) -> np.ndarray:
    if hasattr(t, "detach"):
        t = t.detach().to("cpu")
        return t.numpy() if not t.is_floating_point() else t.float().numpy()
    return np.asarray(t)
