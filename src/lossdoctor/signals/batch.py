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

from typing import Any, Iterator

import torch

from .packing import POSITION_KEY, examples_of, per_example_sum

IGNORE_INDEX = -100
LABEL_KEYS = ("labels", "label", "label_ids", "targets", "target", "y")


def iter_tensors(batch: Any, prefix: str = "", depth: int = 0) -> Iterator[tuple[str, torch.Tensor]]:
    """(key, tensor) pairs of a batch: a tensor, a dict / BatchEncoding, a tuple/list, a dataclass."""
    if isinstance(batch, torch.Tensor):
        yield (prefix or "batch"), batch
        return
    if depth > 3 or batch is None:
        return
    try:
        items = _children(batch)
    except Exception:
        # a value that cannot be looked into (a property or __getattr__ that raises): only its own
        # checks are lost, the rest of the batch is checked
        return
    for k, v in items:
        yield from iter_tensors(v, f"{prefix}.{k}" if prefix else str(k), depth + 1)


def _children(batch: Any) -> list[tuple[Any, Any]]:
    """(key, value) pairs of a container; [] for anything else."""
    if hasattr(batch, "items") and callable(batch.items):
        return list(batch.items())
    if isinstance(batch, (tuple, list)):
        return [(str(i), x) for i, x in enumerate(batch)]
    if hasattr(batch, "__dataclass_fields__"):
        return [(k, getattr(batch, k)) for k in batch.__dataclass_fields__]
    return []


class BatchProbe:
    """The built-in probe of the batch passed to `mon.step` (see `signals.probe`). A batch it
    cannot read switches it off alone: only the batch checks are lost."""

    name = "batch checks"

    def __init__(self) -> None:
        self.enabled = True

    def flush(self, packer: Any, step: Any) -> dict[str, Any] | None:
        if not self.enabled:
            return None
        return self.flush_batch(step.batch, packer)

    def interpret(self, values: dict[str, Any], ctx: dict[str, Any], rec: dict[str, Any]) -> None:
        rec.update(interpret(values, ctx))

    def remove(self) -> None:
        pass  # no hooks

    def flush_batch(self, batch: Any, packer: Any) -> dict[str, Any]:
        ctx: dict[str, Any] = {"float_keys": [], "label_key": None, "mask_key": None, "size": None}
        if batch is None or not self.enabled:
            return ctx
        with torch.no_grad():
            for key, t in iter_tensors(batch):
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
                elif t.dim() == 1 and t.dtype not in (torch.bool, torch.uint8) and t.shape[0] >= 4 \
                        and "class_key" not in ctx:
                    # class labels (B,): is the batch a single class? (data ordered by class)
                    packer.add("class_single", torch.stack([(t == t[0]).all().float(), t[0].float()]))
                    ctx["class_key"] = key
                elif last == "attention_mask" and ctx["mask_key"] is None:
                    packer.add("mask_tokens_per_sample", t.detach().reshape(t.shape[0], -1).sum(dim=1))
                    ctx["mask_key"] = key
                elif last == POSITION_KEY and t.dim() == 2 and "packed_shape" not in ctx:
                    ctx["packed_shape"] = tuple(t.shape)
                    ctx["position_ids"] = t
            if "packed_shape" in ctx:
                _flush_packed(batch, ctx, packer)
        return ctx


def _flush_packed(batch: Any, ctx: dict[str, Any], packer: Any) -> None:
    """Per-token masks of a batch with `position_ids`, for the per-example reading: where examples
    begin, which labels are ignored, which tokens of a floating input are non-finite."""
    shape = ctx["packed_shape"]
    packer.add("packed_starts", ctx.pop("position_ids").detach() == 0)
    ctx["packed_floats"] = []
    for key, t in iter_tensors(batch):
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
        empty = np.flatnonzero(tok <= 0)
        if empty.size:
            rec["mask_empty_sample_ids"] = [int(i) for i in empty[:32]]
    if ctx.get("target_key") and "target_var" in values:
        rec["target_var"] = float(values["target_var"][0])
    if ctx.get("class_key") and "class_single" in values:
        single, first = values["class_single"][:2]
        rec["batch_one_class"] = int(single > 0.5)
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
            rec["label_empty_examples"] = {"n": len(empty), "of": len(real),
                                           "at": [e.to_dict() for e in empty[:32]]}
    bad: list[dict[str, Any]] = []
    for key in ctx.get("packed_floats", []):
        hits = per_example_sum(examples, values[f"packed_nonfinite:{key}"].reshape(shape) > 0.5)
        bad += [{"key": key, **e.to_dict()} for e, n in zip(examples, hits) if n > 0]
    if bad:
        rec["batch_nonfinite_examples"] = bad[:32]
    return rec
