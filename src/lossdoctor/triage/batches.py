"""Batches as trees of tensors: copy to the host and back, select samples, size, fingerprint.

A batch is whatever the training loop passes to `mon.step(loss, batch=...)`: a tensor, a dict or
`BatchEncoding`, a tuple/list/namedtuple, a dataclass, nested a few levels. Triage needs to keep a
copy of it (the loop may reuse or free the original), move it back to the model's device for
replay, and cut it down to a subset of samples (indices along the first dimension) to find which
sample breaks the step. Leaves that are not tensors are kept as they are.
"""

from __future__ import annotations

import copy
import dataclasses
import hashlib
from collections.abc import Callable, Sequence
from typing import Any

import torch

from ..messages import Msg
from ..signals.batch import WalkLimits, walk_batch
from ..signals.safe_reads import unreadable

MAX_DEPTH = 6
#: how much of a batch triage looks at before copying it (one bounded pass each step): a batch
#: beyond it is not kept (never copied nor walked in full, so a step's cost does not grow with the
#: container: benchmarks/batch_walk.py); the batch checks' limits, over the copy's nesting depth
KEEP = WalkLimits(max_visits=256, max_tensors=64, max_depth=MAX_DEPTH, skip_scalar_lists=False)


def map_tensors(batch: Any, fn: Callable[[torch.Tensor], Any], depth: int = 0) -> Any:
    """The same structure with every tensor leaf replaced by `fn(tensor)`. A value that cannot be
    looked into (a property or `__getattr__` that raises) is kept as it is, a leaf: only its own
    tensors are missed. Errors of `fn` itself are not hidden."""
    if isinstance(batch, torch.Tensor):
        return fn(batch)
    if depth > MAX_DEPTH or batch is None or isinstance(batch, (str, bytes, int, float, bool)):
        return batch
    kind, items = _container(batch)
    if kind is None:
        return batch
    if kind == "mapping":
        out = copy.copy(batch)  # keeps the mapping type (OrderedDict, BatchEncoding's UserDict...)
        for k, v in items:
            out[k] = map_tensors(v, fn, depth + 1)
        return out
    mapped = [map_tensors(v, fn, depth + 1) for _, v in items]
    if kind == "namedtuple":
        return type(batch)(*mapped)
    if kind == "tuple":
        return type(batch)(mapped)
    if kind == "list":
        return mapped
    return dataclasses.replace(batch, **{k: v for (k, _), v in zip(items, mapped)})


def _container(batch: Any) -> tuple[str | None, list[tuple[Any, Any]]]:
    """What kind of container `batch` is and its (key, value) items; (None, []) for a leaf or for a
    value whose attributes raise when looked at."""
    try:
        if isinstance(batch, dict) or (
            hasattr(batch, "items") and hasattr(batch, "__setitem__") and callable(batch.items)
        ):
            return "mapping", list(batch.items())
        if isinstance(batch, tuple):
            return ("namedtuple" if hasattr(batch, "_fields") else "tuple"), list(enumerate(batch))
        if isinstance(batch, list):
            return "list", list(enumerate(batch))
        if dataclasses.is_dataclass(batch) and not isinstance(batch, type):
            return "dataclass", [(f.name, getattr(batch, f.name)) for f in dataclasses.fields(batch) if f.init]
    except Exception:
        pass
    return None, []


def unkeepable(batch: Any) -> Msg | None:
    """Why triage must not copy this batch (too wide a container, or a tensor whose values cannot be
    copied: meta, DTensor...), or None. Costs at most `KEEP.max_visits` elements."""
    walk = walk_batch(batch, KEEP)
    if walk.cut:
        return Msg("triage.ring.batch_too_wide", visits=KEEP.max_visits, tensors=KEEP.max_tensors)
    for key, t in walk.items:
        why = unreadable(t, complex_ok=True)
        if why is not None and why not in ("sparse", "nested"):  # those copy as they are
            return Msg("triage.ring.batch_unreadable", key=key, kind=why)
    return None


def tensors(batch: Any) -> list[torch.Tensor]:
    out: list[torch.Tensor] = []

    def add(t: torch.Tensor) -> torch.Tensor:
        out.append(t)
        return t

    map_tensors(batch, add)
    return out


def named_tensors(batch: Any) -> list[tuple[str, torch.Tensor]]:
    """(key, tensor) in traversal order, with the keys `signals.batch.iter_tensors` uses."""
    return walk_batch(batch).items


def batch_size(batch: Any) -> int | None:
    """The size of the first dimension shared by the batch's tensors: the most common one, on a tie
    the first tensor's (the input comes first in almost every batch)."""
    sizes: dict[int, int] = {}  # insertion order = traversal order
    for t in tensors(batch):
        if t.dim() >= 1:
            sizes[int(t.shape[0])] = sizes.get(int(t.shape[0]), 0) + 1
    if not sizes:
        return None
    top = max(sizes.values())
    return next(n for n, c in sizes.items() if c == top)


def select_samples(batch: Any, idx: Sequence[int], size: int | None = None) -> Any:
    """The batch restricted to samples `idx`: every tensor whose first dimension is the batch size
    is indexed along it; other leaves (scalars, a shared mask, lengths) are kept whole."""
    n = batch_size(batch) if size is None else size
    if n is None:
        return batch
    index_cache: dict[torch.device, torch.Tensor] = {}

    def pick(t: torch.Tensor) -> torch.Tensor:
        if t.dim() == 0 or int(t.shape[0]) != n:
            return t
        ix = index_cache.get(t.device)
        if ix is None:
            ix = index_cache[t.device] = torch.as_tensor(list(idx), dtype=torch.long, device=t.device)
        return t.index_select(0, ix)

    return map_tensors(batch, pick)


def nbytes(batch: Any) -> int:
    return sum(t.numel() * t.element_size() for t in tensors(batch))


def to_host(batch: Any) -> Any:
    """A host copy of the batch that the training loop cannot change afterwards. Device tensors go
    to the host (asynchronously on CUDA, into pinned memory; `Stored.ready()` waits for it)."""

    def copy_one(t: torch.Tensor) -> torch.Tensor:
        t = t.detach()
        if t.device.type == "cuda":
            buf = torch.empty(t.shape, dtype=t.dtype, pin_memory=True)
            buf.copy_(t, non_blocking=True)
            return buf
        return t.to("cpu", copy=True)

    return map_tensors(batch, copy_one)


def devices(batch: Any) -> list[torch.device]:
    return [t.device for t in tensors(batch)]


def to_devices(batch: Any, devs: list[torch.device]) -> Any:
    """Move a host copy back to the devices its tensors came from (same traversal order)."""
    it = iter(devs)

    def move(t: torch.Tensor) -> torch.Tensor:
        d = next(it, None)
        return t if d is None or t.device == d else t.to(d)

    return map_tensors(batch, move)


def fingerprint(batch: Any) -> str:
    """A short content hash of the batch (shapes, dtypes and bytes of every tensor), so that a
    batch that was not kept can still be recognised in the data pipeline. Device tensors are hashed
    from a checksum computed on the device (no copy of the data)."""
    h = hashlib.blake2b(digest_size=8)
    for key, t in named_tensors(batch):
        h.update(f"{key}:{tuple(t.shape)}:{t.dtype}".encode())
        t = t.detach()
        if t.device.type == "cpu":
            h.update(t.contiguous().view(-1).view(torch.uint8).numpy().tobytes() if t.numel() else b"")
        else:
            s = t.double() if t.is_floating_point() else t.long().double()
            h.update(torch.stack([s.sum(), (s * s).sum()]).cpu().numpy().tobytes())
    return h.hexdigest()
