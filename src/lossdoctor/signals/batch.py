"""What was in the batch: non-finite values per sample, input magnitude, label masking.

For each floating tensor of the batch one `aminmax` along all but the first dimension gives every
sample's min and max, hence both "sample 3 holds a NaN" and the input magnitude. Integer `labels`
give the fraction of ignored positions (-100) and the samples with no supervised position; an
`attention_mask` gives the samples that are all padding (the classic softmax-of-all-masked NaN).

A batch of packed rows (`position_ids` that restart at 0 inside a row, see `packing`) is also read
per example: where each example begins, its supervised labels and its non-finite values, so an
all-masked or NaN example is named by its row, its index in the row and its tokens.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import torch

from ..messages import Msg
from .packing import POSITION_KEY, examples_of, per_example_sum
from .safe_reads import real_view, unreadable

IGNORE_INDEX = -100
LABEL_KEYS = ("labels", "label", "label_ids", "targets", "target", "y")


@dataclass(frozen=True)
class WalkLimits:
    """How much of a batch one walk looks at: per-step cost must not grow with the container.
    Measured (benchmarks/batch_walk.py): an unbounded walk took 124 ms a step on a 1,000-key dict
    and 234 ms on a 100,000-int list (issue 27)."""

    #: container elements (keys, items, fields) looked at per walk, all levels together: a real
    #: batch has a handful of entries (HF: input_ids, attention_mask, labels...), 256 is far above
    max_visits: int = 256
    #: tensors taken per walk: each costs a reduction and a packer entry every step
    max_tensors: int = 64
    #: nesting levels looked into (a dict of dicts of tuples)
    max_depth: int = 3
    #: a list or tuple whose item is a plain value (str, number, None) is taken as a list of such
    #: values and not read further: 512 raw texts ahead of `input_ids` do not use up the budget
    #: (triage's copy needs every element and does not skip: `triage.batches.KEEP`)
    skip_scalar_lists: bool = True


WALK = WalkLimits()


@dataclass
class BatchWalk:
    """The result of one bounded walk: the (key, tensor) pairs in traversal order, how many
    container elements were looked at, and whether the limits cut the walk short."""

    items: list[tuple[str, torch.Tensor]] = field(default_factory=list)
    visited: int = 0
    cut: bool = False


def _names_targets(key: str, last: str) -> bool:
    """A 1-D tensor that holds class targets: named so (`labels`, `y`...) or the target of an
    `(x, y)` batch (a tuple item after the first). A `task_id`, `lengths` or `seq_len` is uniform
    per batch on purpose (bucketing, one task a batch) and is never read as the class."""
    return last in LABEL_KEYS or (key.isdigit() and key != "0")


def walk_batch(batch: Any, limits: WalkLimits | None = None) -> BatchWalk:
    """One bounded pass over a batch: a tensor, a dict / BatchEncoding, a tuple/list, a dataclass.
    At most `limits.max_visits` container elements are looked at and `limits.max_tensors` tensors
    kept, whatever the size of the containers (their items are read lazily, never copied)."""
    walk = BatchWalk()
    _walk(batch, "", 0, walk, limits or WALK)
    return walk


def _walk(batch: Any, prefix: str, depth: int, walk: BatchWalk, limits: WalkLimits) -> None:
    if isinstance(batch, torch.Tensor):
        if len(walk.items) >= limits.max_tensors:
            walk.cut = True
            return
        walk.items.append(((prefix or "batch"), batch))
        return
    if depth > limits.max_depth or batch is None or isinstance(batch, (str, bytes, int, float, bool)):
        return
    sequence = isinstance(batch, (tuple, list))
    try:
        for k, v in _children(batch):
            if walk.visited >= limits.max_visits or len(walk.items) >= limits.max_tensors:
                walk.cut = True
                return
            walk.visited += 1
            if v is None or isinstance(v, (str, bytes, int, float, bool)):
                if sequence and limits.skip_scalar_lists:
                    return  # a list of plain values holds no tensor
                continue  # a plain leaf: nothing to look into
            _walk(v, f"{prefix}.{k}" if prefix else str(k), depth + 1, walk, limits)
    except Exception:
        # a value that cannot be looked into (a property or __getattr__ that raises): only its own
        # checks are lost, the rest of the batch is checked
        return


def iter_tensors(batch: Any, prefix: str = "", depth: int = 0) -> Iterator[tuple[str, torch.Tensor]]:
    """(key, tensor) pairs of a batch, bounded by `WALK` (see `walk_batch`)."""
    if prefix or depth:
        walk = BatchWalk()
        _walk(batch, prefix, depth, walk, WALK)  # (the module's limits, read at each call)
    else:
        walk = walk_batch(batch)
    yield from walk.items


def _children(batch: Any) -> Iterator[tuple[Any, Any]]:
    """(key, value) pairs of a container, read lazily; nothing for anything else."""
    if hasattr(batch, "items") and callable(batch.items):
        return iter(batch.items())
    if isinstance(batch, (tuple, list)):
        return ((str(i), x) for i, x in enumerate(batch))
    if hasattr(batch, "__dataclass_fields__"):
        return ((k, getattr(batch, k)) for k in batch.__dataclass_fields__)
    return iter(())


class BatchProbe:
    """The built-in probe of the batch passed to `mon.step` (see `signals.probe`). A batch it
    cannot read switches it off alone: only the batch checks are lost."""

    name = "batch checks"

    def __init__(self) -> None:
        self.enabled = True
        #: what the checks could not read, said once each (the monitor points it at its notes)
        self.notes: list[str] = []
        self._said: set[str] = set()

    def flush(self, packer: Any, step: Any) -> dict[str, Any] | None:
        if not self.enabled:
            return None
        return self.flush_batch(step.batch, packer)

    def interpret(self, values: dict[str, Any], ctx: dict[str, Any], rec: dict[str, Any]) -> None:
        rec.update(interpret(values, ctx))

    def remove(self) -> None:
        pass  # no hooks

    def note_once(self, what: str, msg: str) -> None:
        if what not in self._said:
            self._said.add(what)
            self.notes.append(msg)

    def readable(self, walk: BatchWalk) -> list[tuple[str, torch.Tensor]]:
        """The walk's tensors whose values can be read; the others (meta, sparse, nested, DTensor,
        quantized) cost only their own checks, said once per kind."""
        if walk.cut:
            self.note_once("cut", Msg("batch.walk_capped", visits=WALK.max_visits, tensors=WALK.max_tensors))
        out = []
        for key, t in walk.items:
            why = unreadable(t, complex_ok=True)
            if why is None:  # a complex input is checked through its real and imaginary parts
                out.append((key, real_view(t)))
            else:
                self.note_once(why, Msg("batch.tensor_skipped", key=key, kind=why))
        return out

    def flush_batch(self, batch: Any, packer: Any) -> dict[str, Any]:
        ctx: dict[str, Any] = {"float_keys": [], "label_key": None, "mask_key": None, "size": None}
        if batch is None or not self.enabled:
            return ctx
        pairs = self.readable(walk_batch(batch))  # one bounded pass over the batch
        with torch.no_grad():
            for key, t in pairs:
                if t.dim() == 0 or t.numel() == 0:
                    continue
                if ctx["size"] is None:
                    ctx["size"] = int(t.shape[0])
                last = key.rsplit(".", 1)[-1]
                if t.is_floating_point():
                    if t.dim() == 1 and t.shape[0] >= 4 and "target_key" not in ctx:
                        # a (B,) regression target: its variance is the floor of a broadcast MSE
                        packer.add("target_var", t.detach().float().var())
                        ctx["target_key"] = key
                    mn, mx = torch.aminmax(t.detach().reshape(t.shape[0], -1), dim=1)
                    packer.add(f"batch_min:{key}", mn)
                    packer.add(f"batch_max:{key}", mx)
                    ctx["float_keys"].append(key)
                elif last in LABEL_KEYS and ctx["label_key"] is None and t.dim() >= 2:
                    ign = (t.detach() == IGNORE_INDEX).reshape(t.shape[0], -1)
                    packer.add("label_ignored_per_sample", ign.sum(dim=1))
                    ctx["label_key"] = key
                    ctx["label_positions"] = int(ign.shape[1])
                elif (
                    t.dim() == 1
                    and t.dtype not in (torch.bool, torch.uint8)
                    and t.shape[0] >= 4
                    and "class_key" not in ctx
                    and _names_targets(key, last)
                ):
                    # class labels (B,): is the batch a single class? (data ordered by class)
                    # and their range and variance: class indices fed to a one-output head
                    tf = t.detach().float()
                    same = (t == t[0]).all().float()
                    packer.add("class_single", torch.stack([same, tf[0], tf.max(), tf.var(), tf.min()]))
                    ctx["class_key"] = key
                elif last == "attention_mask" and ctx["mask_key"] is None:
                    packer.add("mask_tokens_per_sample", t.detach().reshape(t.shape[0], -1).sum(dim=1))
                    ctx["mask_key"] = key
                elif last == POSITION_KEY and t.dim() == 2 and "packed_shape" not in ctx:
                    ctx["packed_shape"] = tuple(t.shape)
                    ctx["position_ids"] = t
            if "packed_shape" in ctx:
                _flush_packed(pairs, ctx, packer)
            _flush_pad_labels(pairs, ctx, packer)
        return ctx


def _flush_pad_labels(pairs: list[tuple[str, torch.Tensor]], ctx: dict[str, Any], packer: Any) -> None:
    """[padding positions supervised, padding positions] of a batch with both `labels` (B, T) and an
    `attention_mask` of the same shape: a collator that copies input_ids to labels without setting
    the padding to -100 trains the model to predict padding (two device scalars, no sync)."""
    if not ctx.get("label_key") or not ctx.get("mask_key"):
        return
    found = dict(pairs)
    labels, mask = found.get(ctx["label_key"]), found.get(ctx["mask_key"])
    if labels is None or mask is None or tuple(labels.shape) != tuple(mask.shape) or labels.dim() != 2:
        return
    pad = mask.detach() == 0
    packer.add("label_pad", torch.stack([(pad & (labels.detach() != IGNORE_INDEX)).sum(), pad.sum()]))
    ctx["label_pad"] = True


def _flush_packed(pairs: list[tuple[str, torch.Tensor]], ctx: dict[str, Any], packer: Any) -> None:
    """Per-token masks of a batch with `position_ids`, for the per-example reading: where examples
    begin, which labels are ignored, which tokens of a floating input are non-finite."""
    shape = ctx["packed_shape"]
    packer.add("packed_starts", ctx.pop("position_ids").detach() == 0)
    ctx["packed_floats"] = []
    for key, t in pairs:
        if tuple(t.shape[:2]) != shape or t.dim() < 2:
            continue
        if key == ctx["label_key"]:
            packer.add("packed_label_ignored", t.detach() == IGNORE_INDEX)
            ctx["packed_labels"] = True
        elif key in ctx["float_keys"]:
            bad = ~torch.isfinite(t.detach().reshape(shape[0], shape[1], -1)).all(dim=2)
            packer.add(f"packed_nonfinite:{key}", bad)
            ctx["packed_floats"].append(key)


def interpret(values: dict[str, Any], ctx: dict[str, Any]) -> dict[str, Any]:
    import numpy as np

    rec: dict[str, Any] = {}
    if ctx.get("size") is not None:
        rec["batch_size"] = ctx["size"]
    detail: dict[str, list[int]] = {}
    absmax = None
    for key in ctx.get("float_keys", []):
        mn = values[f"batch_min:{key}"].astype(np.float64)
        mx = values[f"batch_max:{key}"].astype(np.float64)
        bad = ~(np.isfinite(mn) & np.isfinite(mx))
        if bad.any():
            detail[key] = [int(i) for i in np.flatnonzero(bad)[:32]]
        good = ~bad
        if good.any():
            a = float(np.max(np.maximum(-mn[good], mx[good])))
            absmax = a if absmax is None else max(absmax, a)
    if ctx.get("size") is not None:
        # a batch was seen: with no floating tensor it cannot hold NaN, which is a "checked: 0"
        rec["input_absmax"] = absmax
        nbad = set()
        for v in detail.values():
            nbad.update(v)
        rec["batch_nonfinite"] = len(nbad)
        if detail:
            rec["batch_nonfinite_detail"] = detail
    if ctx.get("label_key"):
        ign = values["label_ignored_per_sample"].astype(np.int64)
        pos = ctx["label_positions"]
        rec["label_ignored_frac"] = float(ign.sum() / max(1, ign.size * pos))
        rec["label_tokens"] = int(ign.size * pos - ign.sum())
        empty = np.flatnonzero(ign >= pos)
        rec["label_empty_samples"] = int(empty.size)
        if empty.size:
            rec["label_empty_sample_ids"] = [int(i) for i in empty[:32]]
    if ctx.get("mask_key"):
        tok = values["mask_tokens_per_sample"]
        if tok.size:
            rec["batch_tokens_mean"] = float(tok.mean())  # data ordered by length: this rises step after step
        empty = np.flatnonzero(tok <= 0)
        if empty.size:
            rec["mask_empty_sample_ids"] = [int(i) for i in empty[:32]]
    if ctx.get("label_pad") and "label_pad" in values:
        rec["pad_supervised"], rec["pad_positions"] = (int(v) for v in values["label_pad"][:2])
    if ctx.get("target_key") and "target_var" in values:
        rec["target_var"] = float(values["target_var"][0])
    if ctx.get("class_key") and "class_single" in values:
        single, first, top, var, low = values["class_single"][:5]
        rec["batch_one_class"] = int(single > 0.5)
        rec["class_max"], rec["class_var"], rec["class_min"] = int(top), float(var), int(low)
        if single > 0.5:
            rec["batch_class"] = int(first)
    if ctx.get("packed_shape"):
        rec.update(interpret_packed(values, ctx))
    return rec


def interpret_packed(values: dict[str, Any], ctx: dict[str, Any]) -> dict[str, Any]:
    """Host side of a packed batch: how many examples its rows hold, the examples with no
    supervised label, the examples holding a non-finite value (one-token pieces, right padding,
    are not examples)."""
    shape = ctx["packed_shape"]
    examples = examples_of(values["packed_starts"].reshape(shape) > 0.5)
    if not examples:
        return {}
    real = [e for e in examples if e.length >= 2]
    rec: dict[str, Any] = {"packed_examples": len(real)}
    if ctx.get("packed_labels"):
        supervised = per_example_sum(real, values["packed_label_ignored"].reshape(shape) < 0.5)
        empty = [e for e, n in zip(real, supervised) if n == 0]
        if empty:
            rec["label_empty_examples"] = {"n": len(empty), "of": len(real), "at": [e.to_dict() for e in empty[:32]]}
    bad: list[dict[str, Any]] = []
    for key in ctx.get("packed_floats", []):
        hits = per_example_sum(examples, values[f"packed_nonfinite:{key}"].reshape(shape) > 0.5)
        bad += [{"key": key, **e.to_dict()} for e, n in zip(examples, hits) if n > 0]
    if bad:
        rec["batch_nonfinite_examples"] = bad[:32]
    return rec
