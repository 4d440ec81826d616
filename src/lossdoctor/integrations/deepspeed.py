"""DeepSpeed: `lossdoctor.watch(engine)` on a `DeepSpeedEngine`, ZeRO stages 0 to 3.

The engine owns the step: it scales the loss (fp16), reduces and partitions the gradients, checks
them for overflow, clips them and steps the optimizer on this rank's partition. The monitor watches
the user's model inside it (`engine.module`) as it watches any model (loss, batch checks,
activations, the LR and update statistics of the optimizer that does the work) and reads the rest
from DeepSpeed itself, never from a guess:

- `grad_norm`: DeepSpeed's own global gradient norm of the step (`engine.get_global_grad_norm()`),
  before clipping, unscaled, combined over every rank's partition by DeepSpeed. Where DeepSpeed
  keeps none (ZeRO-0 without fp16/bf16) it is not recorded; `grad_norm_local` still is.
- `grad_norm_local`, `grad_nonfinite`, `nonfinite_params`: this rank's own gradient, measured in a
  tensor hook on every parameter as autograd produces it, before DeepSpeed reduces or partitions
  it (under ZeRO-2/3 the gradient leaves the parameter right after). Local evidence: the run
  directory can say on which rank a NaN began without any collective of lossdoctor's own.
- `scale` and `skipped`: DeepSpeed's dynamic loss scale (fp16) and its own overflow check, read
  from the engine's counter of skipped steps (DeepSpeed's hysteresis may skip a step without
  lowering the scale, so the scale alone cannot say it).

The training loop calls `mon.step(loss, batch=batch)` after every `engine.step()`; with gradient
accumulation DeepSpeed steps the optimizer only at the boundary, and the calls in between are
micro-steps: their losses are averaged and their batches joined into the step's.

Triage under ZeRO: replay needs the training step redone from a snapshot, and under ZeRO 1-3 the
optimizer state is partitioned across ranks (and under ZeRO-3 the parameters too), so a rank alone
cannot redo a step, and a replay on one rank would issue DeepSpeed's collectives that its peers
never join. Replay is therefore not run (said in the run's notes); the live localisation (first
non-finite layer forward and backward, the batch check) is rank-local and works at every stage.
"""

from __future__ import annotations

import logging
from typing import Any

import torch

from ..messages import Msg
from ..signals.local_grads import LocalGradProbe
from ..signals.probe import StepInputs, StepRecord

log = logging.getLogger("lossdoctor")


def is_deepspeed_engine(obj: Any) -> bool:
    """A DeepSpeed engine, recognised by class name (no import of deepspeed needed)."""
    return any(c.__name__ == "DeepSpeedEngine" for c in type(obj).__mro__)


def zero_stage(engine: Any) -> int:
    try:
        return int(engine.zero_optimization_stage())
    except Exception:
        return 0


def watch_engine(engine: Any, optimizer: Any = None, **kwargs: Any) -> Any:
    """`lossdoctor.watch` for a DeepSpeed engine: the monitor on `engine.module` and the optimizer
    DeepSpeed steps, plus the DeepSpeed probe. Options as for `watch`."""
    from ..live.monitor import Monitor

    stage = zero_stage(engine)
    if kwargs.get("on_incident") == "skip":
        raise ValueError(
            "on_incident='skip' is not supported on a DeepSpeed engine: the engine steps "
            "the optimizer itself; use 'report' or 'raise'"
        )
    replay_fn = kwargs.pop("replay_fn", None)
    notes: list[str] = []
    refused = Msg("distributed.replay_skipped_zero", stage=stage) if stage >= 1 else None
    if replay_fn is not None and refused is not None:
        notes.append(refused)
        replay_fn = None
    opt = optimizer if optimizer is not None else engine.optimizer
    if kwargs.get("scheduler") is None and getattr(engine, "lr_scheduler", None) is not None:
        kwargs["scheduler"] = engine.lr_scheduler
    mon = Monitor(engine.module, opt, replay_fn=replay_fn, **kwargs)
    mon.notes.extend(notes)
    mon.replay_refused = refused
    try:
        probe = DeepSpeedProbe(engine, mon, stage)
        mon.add_probe(probe)
        mon.step_filter = probe.step_filter
        mon.meta["distributed"] = probe.describe()
        if notes:
            mon.meta["monitor_notes"] = list(mon.notes)
        mon.writer.write_meta(mon.meta)
    except Exception as e:  # measure less, never stop the training
        mon.disable("DeepSpeed probe", e)
    return mon


def _host_scale(engine: Any) -> float | None:
    """DeepSpeed's current fp16 loss scale (a host float in its optimizers), None without fp16."""
    try:
        if not engine.fp16_enabled():
            return None
    except Exception:
        return None
    opt = engine.optimizer
    for name in ("loss_scale", "cur_scale"):
        v = getattr(opt, name, None)
        if isinstance(v, (int, float)):
            return float(v)
        if isinstance(v, torch.Tensor) and v.numel() == 1:
            return float(v.item()) if v.device.type == "cpu" else None
    scaler = getattr(opt, "loss_scaler", None)
    v = getattr(scaler, "cur_scale", None)
    return float(v) if isinstance(v, (int, float)) else None


class DeepSpeedProbe:
    """The DeepSpeed signals of one step (see the module docstring): a probe of the monitor
    (`lossdoctor.signals.probe`), plus `step_filter`, which the monitor calls first in `mon.step`."""

    name = "DeepSpeedProbe"

    def __init__(self, engine: Any, monitor: Any, stage: int) -> None:
        self.engine = engine
        self.monitor = monitor
        self.stage = stage
        self.enabled = True
        self._skipped_seen = int(getattr(engine, "skipped_steps", 0) or 0)
        self._global_seen = int(getattr(engine, "global_steps", 0) or 0)
        self._micro_losses: list[Any] = []
        self._micro_batches: list[Any] = []
        self._calls = 0  # mon.step calls since the last recorded step
        self.local = LocalGradProbe(
            [(n, p) for n, p in engine.module.named_parameters() if p.requires_grad],
            scale_fn=lambda: _host_scale(engine),
            tag="ds_local",
        )
        if stage >= 3:
            # ZeRO-3 keeps only this rank's partition of each parameter between forwards: the
            # monitor's parameter norms would read empty tensors, and the gradients never stay on
            # the parameters. Both come from this probe and DeepSpeed instead.
            monitor.grads.remove()
            monitor.grads.enabled = False
            monitor.grads.params = []

    def describe(self) -> dict[str, Any]:
        return {
            "kind": "deepspeed",
            "zero_stage": self.stage,
            "local_grads": True,
            "grad_norm": "DeepSpeed's global norm (all ranks, before clipping)",
            "grad_norm_local": "this rank's own gradient, before DeepSpeed reduces it",
        }

    # --- micro-steps --------------------------------------------------------------------------
    def step_filter(self, loss: Any, batch: Any) -> tuple[Any, Any] | None:
        """Called by `mon.step` before anything else: None for a micro-step (the engine did not
        reach its accumulation boundary since the last call), else the step's loss and batch."""
        if not self.enabled:
            return loss, batch
        try:
            if isinstance(loss, torch.Tensor):
                self._micro_losses.append(loss.detach().float().mean())
            elif loss is not None:
                self._micro_losses.append(float(loss))
            if batch is not None:
                self._micro_batches.append(batch)
            self._calls += 1
            steps = int(self.engine.global_steps)
            if steps == self._global_seen and self._calls < self._accumulation():
                return None
            # a boundary; or more calls than micro-batches per step without one (mon.step called
            # before engine.step): recorded, so the misuse shows instead of an empty log
            self._global_seen = steps
            self._calls = 0
            losses, batches = self._micro_losses, self._micro_batches
            self._micro_losses, self._micro_batches = [], []
            return _mean_loss(losses, loss), _joined(batches, batch)
        except Exception as e:
            self._fail(e)
            return loss, batch

    def _accumulation(self) -> int:
        try:
            return max(1, int(self.engine.gradient_accumulation_steps()))
        except Exception:
            return 1

    # --- the monitor's probe interface ---------------------------------------------------------
    def flush(self, packer: Any, step: StepInputs) -> dict[str, Any] | None:
        if not self.enabled:
            return None
        ctx: dict[str, Any] = {"local": self.local.flush(packer, step)}
        norm = self.engine.get_global_grad_norm()
        if isinstance(norm, torch.Tensor) and norm.numel() == 1:
            packer.add("ds_grad_norm", norm.detach().float().reshape(1))
            ctx["norm"] = "packed"
        elif isinstance(norm, (int, float)):
            ctx["norm"] = float(norm)
        ctx["scale"] = _host_scale(self.engine)
        skipped = int(getattr(self.engine, "skipped_steps", 0) or 0)
        ctx["skipped"] = skipped > self._skipped_seen
        self._skipped_seen = skipped
        if ctx["skipped"]:  # DeepSpeed's overflow check skipped it: not a misuse of mon.step
            self.monitor.engine_skips.add(step.step)
        return ctx

    def interpret(self, values: dict[str, Any], ctx: dict[str, Any], rec: StepRecord) -> None:
        self.local.interpret(values, ctx["local"], rec)
        rec.pop("grad_norm", None)  # the monitor's own total is local (or empty) under the engine
        if ctx.get("norm") == "packed":
            rec["grad_norm"] = float(values["ds_grad_norm"][0])
        elif isinstance(ctx.get("norm"), float):
            rec["grad_norm"] = ctx["norm"]
        if ctx["scale"] is not None:
            rec["scale"] = ctx["scale"]
        rec.pop("no_optimizer_step", None)
        rec["skipped"] = 1 if ctx["skipped"] else 0
        if self.stage >= 3:
            rec.pop("param_norm", None)

    def _fail(self, e: BaseException) -> None:
        self.enabled = False
        log.warning("%s", Msg("distributed.deepspeed_disabled", error=f"{type(e).__name__}: {e}"))

    def remove(self) -> None:
        self.enabled = False
        self.local.remove()
        if getattr(self.monitor, "step_filter", None) == self.step_filter:
            self.monitor.step_filter = None


def _mean_loss(losses: list[Any], last: Any) -> Any:
    if not losses:
        return last
    if len(losses) == 1:
        return losses[0]
    if all(isinstance(x, torch.Tensor) for x in losses):
        return torch.stack(losses).mean()
    return sum(float(x) for x in losses) / len(losses)


def _joined(batches: list[Any], last: Any) -> Any:
    if len(batches) <= 1:
        return batches[0] if batches else last
    from .microbatch import join_batches

    try:
        return join_batches(batches)
    except Exception:
        return last
