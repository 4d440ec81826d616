"""The micro-batches of one optimizer step, as a framework's training loop fed them to the model.

Framework callbacks are called per step, not per forward, and are not always handed the inputs;
gradient accumulation runs several forwards per step. This probe collects, for each training
forward (grad enabled), the batch and the loss the model returned, plus the weight that loss got
in backward (a hook on the loss tensor receives d(objective)/d(loss); divided by the loss scale
when a GradScaler is in effect). At the step's end it gives the monitor

- `loss`: the per-item mean loss of the step, reconstructed from the micro-batch losses whatever
  their normalisation (per micro-batch mean, or summed and divided by the step's item count
  `num_items_in_batch` as the HF Trainer does), weighted by each micro-batch's label count;
- `loss_weight`: (objective actually differentiated) / (that per-item mean). 1 when the step
  optimises the mean over its items; k when k micro-batch means were summed without dividing by k
  (the gradient-accumulation normalisation bug, transformers PR #34191); 1/k when divided twice.
  The objective is measured on the loss the trainer backpropagates when the callback can see it
  (`observe_objective`: what the HF Trainer's `compute_loss` returned, which TRL computes itself
  from the model's log-probs), else on the model's own loss;
- the step's batch: the micro-batches joined along the first dimension (padded like a collator
  would: labels with -100, everything else with 0), so sample indices count across the step.

All of it stays on the device until the monitor's one copy per step.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import torch

from ..messages import Msg
from ..signals.batch import IGNORE_INDEX, LABEL_KEYS
from ..signals.optimizer import scaler_scale

#: keyword arguments of a forward call that are loss bookkeeping (HF), not batch data
LOSS_KWARGS = ("num_items_in_batch",)


@dataclass
class MicroBatch:
    batch: Any
    loss: torch.Tensor | None  # detached
    weight: list = field(default_factory=lambda: [None])  # filled by the loss's backward hook
    n_items: torch.Tensor | None = None  # supervised label positions of this micro-batch
    num_items: Any = None  # the step's item count the model was told to divide by, if any
    tracked: bool = False  # the model's loss was part of the autograd graph (a hook was put on it)


def find_labels(batch: Any, shift: bool = False) -> torch.Tensor | None:
    """The label positions a loss is computed over (what `num_items_in_batch` counts)."""
    if isinstance(batch, dict):
        pre = batch.get("shift_labels")
        if isinstance(pre, torch.Tensor):
            return pre
        for k in LABEL_KEYS:
            v = batch.get(k)
            if isinstance(v, torch.Tensor) and not v.is_floating_point():
                return v[..., 1:] if shift and v.dim() >= 2 else v
    return None


def model_loss(out: Any) -> torch.Tensor | None:
    """The loss a model returned: `outputs.loss` (HF ModelOutput / dict), or a scalar tensor."""
    if isinstance(out, torch.Tensor):
        return out if out.is_floating_point() and out.dim() == 0 else None
    loss = None
    if isinstance(out, dict) or hasattr(out, "keys"):
        try:
            loss = out.get("loss") if hasattr(out, "get") else None
        except Exception:
            loss = None
    elif isinstance(out, (tuple, list)) and out and isinstance(out[0], torch.Tensor) and out[0].dim() == 0:
        loss = out[0]
    return loss if isinstance(loss, torch.Tensor) and loss.is_floating_point() else None


@dataclass(frozen=True)
class MicroBatchLimits:
    #: micro-batches (and trainer losses) kept per step: above any real gradient accumulation
    #: (HF/Lightning runs use 1-64, measured default); forwards beyond it, with no step to flush
    #: them (an interrupted trainer's hooks), are not kept: memory stays bounded
    max_items: int = 1024


MICRO = MicroBatchLimits()


class MicroBatchProbe:
    """A monitor probe (see `Monitor.add_probe`) fed by `observe` once per training forward."""

    name = "MicroBatchProbe"  # how the monitor's notes call it (its class name, as before it had one)

    def __init__(self, monitor: Any, *, shift_labels: bool = False) -> None:
        self.monitor = monitor
        #: a causal LM predicts label[i+1] at position i: position 0 of each row is never counted
        self.shift_labels = shift_labels
        self.enabled = True
        #: set by the callbacks between steps (after a step ended, before the next began): not kept
        self.idle = False
        self.max_items = MICRO.max_items
        self.items: list[MicroBatch] = []
        #: steps whose model loss had a gradient hook that never fired, and steps whose did
        self.unweighted_steps = 0
        self.weighted_steps = 0
        #: the losses the trainer returned for backward this step (value, weight slot, the item
        #: count it was handed): set by
        #: `observe_objective`, which only a callback that sees the trainer's loss calls
        self.objective: list[tuple[torch.Tensor, list, Any]] = []

    # --- per forward ----------------------------------------------------------------------------
    def observe(self, batch: Any, loss: torch.Tensor | None, num_items: Any = None) -> None:
        if not self.enabled or self.idle or len(self.items) >= self.max_items:
            return
        try:
            item = MicroBatch(batch=batch, loss=None, num_items=num_items)
            if loss is not None:
                # a copy: the trainer may scale its loss in place afterwards (HF + DeepSpeed does)
                item.loss = loss.detach().clone()
                if loss.requires_grad:
                    loss.register_hook(self._weight_hook(item.weight))
                    item.tracked = True
            labels = find_labels(batch, self.shift_labels)
            if labels is not None:
                item.n_items = (labels.detach() != IGNORE_INDEX).sum()
            self.items.append(item)
        except Exception as e:
            self._fail(e)

    def observe_objective(self, loss: Any, num_items: Any = None) -> None:
        """The loss a trainer is about to backpropagate (the HF Trainer's `compute_loss` return:
        TRL's own loss, or the model's). Its gradient says how much of it the objective holds, so
        the step's objective is sum(weight * loss) over these, whatever the model returned.
        `num_items` is the item count the trainer passed to `compute_loss` (every rank's, with
        `average_tokens_across_devices`): what a loss it computes itself is divided by."""
        if not self.enabled or self.idle or len(self.objective) >= self.max_items:
            return
        try:
            if isinstance(loss, (tuple, list)) and loss:
                loss = loss[0]
            if not (
                isinstance(loss, torch.Tensor)
                and loss.is_floating_point()
                and loss.requires_grad
                and torch.is_grad_enabled()
            ):
                return
            slot: list = [None]
            loss.register_hook(self._weight_hook(slot))
            self.objective.append((loss.detach().clone(), slot, num_items))
        except Exception as e:
            self._fail(e)

    def _weight_hook(self, slot: list):
        def hook(grad: torch.Tensor) -> None:
            try:
                w = grad.detach().float()
                s = scaler_scale(self.monitor.scaler)
                slot[0] = w / s.float() if s is not None else w
            except Exception as e:
                self._fail(e)

        return hook

    def _backward_elsewhere(self) -> None:
        """The model returned a loss, but backward never reached it: the trainer differentiates a
        loss it computes itself (TRL's SFT/DPO trainers), so the weight of the model's loss in the
        objective, hence the accumulation-normalisation check, cannot be measured. Said once (after
        two such steps and none with a weight), in the run's notes, rather than left silent."""
        self.unweighted_steps += 1
        if self.unweighted_steps != 2 or self.weighted_steps:
            return
        mon = self.monitor
        trainer = (mon.meta.get("framework") or {}).get("trainer") if isinstance(mon.meta, dict) else None
        mon.notes.append(Msg("integrations.loss_not_backpropagated", trainer=str(trainer or "Trainer")))
        mon.meta["monitor_notes"] = list(mon.notes)
        mon.writer.write_meta(mon.meta)

    def _fail(self, e: BaseException) -> None:
        self.enabled = False
        self.items = []
        self.monitor.disable("micro-batches", e)

    def reset(self) -> None:
        self.items = []
        self.objective = []

    # --- per step -------------------------------------------------------------------------------
    def last_loss(self) -> torch.Tensor | None:
        """The latest micro-batch loss (detached): handed to `mon.step` so the monitor's checks of
        the loss tensor itself (its dtype) see it; the record's loss is the step's mean."""
        for m in reversed(self.items):
            if m.loss is not None:
                return m.loss
        return None

    def step_batch(self) -> Any:
        """The step's batch: the only micro-batch, or all of them joined along dim 0."""
        batches = [m.batch for m in self.items if m.batch is not None]
        if not batches:
            return None
        if len(batches) == 1:
            return batches[0]
        try:
            return join_batches(batches)
        except Exception:
            return batches[-1]

    def flush(self, packer: Any, step: Any = None) -> dict[str, Any] | None:
        if not self.enabled:
            return None
        items, self.items = self.items, []
        objective, self.objective = self.objective, []
        losses = [m for m in items if m.loss is not None]
        ctx: dict[str, Any] = {"k": len(losses), "weights": False, "n_items": False, "num_items": False}
        if not losses:
            return ctx
        with torch.no_grad():
            packer.add("mb_loss", torch.stack([m.loss.float().mean() for m in losses if m.loss is not None]))
            ctx["weights"] = self._pack_objective(packer, objective, losses)
            ctx["objective"] = bool(ctx["weights"] and objective)
            if all(m.n_items is not None for m in losses):
                packer.add("mb_items", torch.stack([m.n_items.float() for m in losses if m.n_items is not None]))
                ctx["n_items"] = True
            if all(m.num_items is not None for m in losses):
                if any(isinstance(m.num_items, torch.Tensor) for m in losses):
                    packer.add(
                        "mb_num_items",
                        [
                            torch.as_tensor(m.num_items, dtype=torch.float32, device=m.loss.device).reshape(-1)[0]
                            for m in losses
                            if m.loss is not None
                        ],
                    )
                else:  # host numbers stay on the host: no copy to the device and back
                    ctx["num_items_host"] = [float(m.num_items) for m in losses]
                ctx["num_items"] = True
        return ctx

    def _pack_objective(self, packer: Any, objective: list, losses: list[MicroBatch]) -> bool:
        """Put the step's objective, sum(d objective / d loss * loss), in the packer: over the
        losses the trainer returned for backward when there were any, else over the model's."""
        if objective:
            if not all(slot[0] is not None for _, slot, _ in objective):
                return False  # that loss never reached backward: nothing to say about its weight
            if len(objective) != len(losses):  # not one backpropagated loss per model forward
                self._backward_elsewhere()
                return False
            dev = next(m.loss.device for m in losses if m.loss is not None)  # (losses[0]'s)
            packer.add("mb_wloss", torch.stack([(slot[0] * v.float()).sum().to(dev) for v, slot, _ in objective]))
            packer.add("mb_obj", torch.stack([v.float().sum().to(dev) for v, _, _ in objective]))
            if all(num is not None for _, _, num in objective):
                packer.add(
                    "mb_obj_num",
                    torch.stack(
                        [
                            torch.as_tensor(num, dtype=torch.float32, device=dev).reshape(-1)[0]
                            for _, _, num in objective
                        ]
                    ),
                )
            return True
        if all(m.weight[0] is not None for m in losses):
            packer.add(
                "mb_wloss", torch.stack([(m.weight[0] * m.loss.float()).sum() for m in losses if m.loss is not None])
            )
            self.weighted_steps += 1
            return True
        if all(m.tracked and m.weight[0] is None for m in losses):
            self._backward_elsewhere()
        return False

    def interpret(self, values: dict[str, Any], ctx: dict[str, Any], rec: dict[str, Any]) -> None:
        import numpy as np

        if not ctx.get("k"):
            return
        loss = values["mb_loss"].astype(np.float64)
        with np.errstate(all="ignore"):
            if ctx["n_items"] and ctx["num_items"]:
                # each loss is sum/N with N the step's item count: per-item mean = sum / own items
                n = values["mb_items"].astype(np.float64)
                num = np.asarray(ctx["num_items_host"]) if "num_items_host" in ctx else values["mb_num_items"]
                mean = float(np.sum(loss * num) / np.sum(n))
            elif ctx["n_items"] and not ctx["num_items"]:
                n = values["mb_items"].astype(np.float64)
                mean = float(np.sum(loss * n) / np.sum(n)) if np.sum(n) > 0 else float(np.mean(loss))
            else:
                mean = float(np.mean(loss))
            rec["loss"] = mean
            if ctx.get("objective"):
                if not objective_is_model_loss(
                    values["mb_obj"],
                    loss,
                    values.get("mb_items"),
                    self._world_size(),
                    num_items=values.get("mb_obj_num"),
                ):
                    self._backward_elsewhere()
                    return
                self.weighted_steps += 1
            if ctx["weights"] and np.isfinite(mean) and mean != 0:
                w = float(np.sum(values["mb_wloss"]) / mean)
                if np.isfinite(w):
                    rec["loss_weight"] = round(w, 4)

    def _world_size(self) -> int:
        """The processes the trainer's loss is multiplied by (the HF Trainer and TRL multiply it by
        the number of processes when `num_items_in_batch` counts every rank's tokens)."""
        meta = self.monitor.meta if isinstance(self.monitor.meta, dict) else {}
        ws = (meta.get("framework") or {}).get("world_size")
        return int(ws) if isinstance(ws, int) and ws > 1 else 1

    def remove(self) -> None:
        self.enabled = False
        self.items = []
        self.objective = []


def objective_is_model_loss(
    obj: Any, loss: Any, n_items: Any = None, world_size: int = 1, tol: float = 0.02, num_items: Any = None
) -> bool:
    """Whether each backpropagated loss is the model's loss of the same micro-batch up to a
    normalisation (itself, 1/k, or own items / the step's items, as TRL's sum over tokens divided
    by `num_items_in_batch` is, and that over k; any of them times the number of processes, which
    DDP's gradient averaging divides away again): only then is (objective / per-item mean) the
    accumulation weight. A DPO loss, or one with an auxiliary term, is not; its weight would be
    meaningless."""
    import numpy as np

    obj, loss = np.asarray(obj, dtype=np.float64), np.asarray(loss, dtype=np.float64)
    k = loss.size
    if obj.size != k or not (np.isfinite(obj).all() and np.isfinite(loss).all()) or (loss == 0).any():
        return False
    ratio = obj / loss
    candidates = [np.ones(k), np.full(k, 1.0 / k)]
    if n_items is not None:
        n = np.asarray(n_items, dtype=np.float64)
        if n.sum() > 0:
            candidates += [n / n.sum(), n / (n.sum() * k)]
        num = np.asarray(num_items, dtype=np.float64) if num_items is not None else None
        if num is not None and num.shape == n.shape and (num > 0).all():
            candidates.append(n / num)  # own items over the count the trainer divided by
    scales = (1, world_size) if world_size > 1 else (1,)
    return any(bool(np.all(np.abs(ratio - c * w) <= tol * np.abs(c * w))) for c in candidates for w in scales)


def join_batches(batches: list[Any]) -> Any:
    """Micro-batches (dicts of tensors, or tensors, or tuples of them) joined along dim 0; trailing
    dims padded to the longest like a padding collator (labels -100, anything else 0)."""
    first = batches[0]
    if isinstance(first, torch.Tensor):
        return _cat([b for b in batches], pad=0)
    if isinstance(first, dict):
        out = {}
        for k, v in first.items():
            vals = [b.get(k) for b in batches]
            if isinstance(v, torch.Tensor) and all(isinstance(x, torch.Tensor) for x in vals) and v.dim() > 0:
                out[k] = _cat(vals, pad=IGNORE_INDEX if k in LABEL_KEYS and not v.is_floating_point() else 0)
        return out
    if isinstance(first, (tuple, list)):
        cols = list(zip(*batches))
        return [_cat(list(c), pad=0) if isinstance(c[0], torch.Tensor) and c[0].dim() > 0 else c[-1] for c in cols]
    raise TypeError(f"cannot join batches of type {type(first).__name__}")


def _cat(ts: list[torch.Tensor], pad: int | float) -> torch.Tensor:
    ts = [t.detach() for t in ts]
    if all(t.shape[1:] == ts[0].shape[1:] for t in ts):
        return torch.cat(ts)
    nd = ts[0].dim()
    if any(t.dim() != nd for t in ts):
        raise ValueError("micro-batches differ in rank")
    size = [max(t.shape[d] for t in ts) for d in range(1, nd)]
    padded = []
    for t in ts:
        if list(t.shape[1:]) != size:
            p = t.new_full((t.shape[0], *size), pad)
            p[(slice(None),) + tuple(slice(0, s) for s in t.shape[1:])] = t
            t = p
        padded.append(t)
    return torch.cat(padded)
