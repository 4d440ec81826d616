"""What the framework callbacks (HF `Trainer`, Lightning) share: opening a monitor on what the
trainer set up, closing one optimizer step, the diagnosis, and never letting lossdoctor stop the
user's training. Framework-free: each callback subclasses its framework's base class and this
mixin (which has no `__init__`, so the framework's own initialisation is untouched).
"""

from __future__ import annotations

import atexit
import logging
import weakref
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch

from ..messages import Msg
from .microbatch import MicroBatchProbe

log = logging.getLogger("lossdoctor")

#: callbacks whose monitor is open. A trainer that stops on an exception (Ctrl-C) never calls
#: on_train_end, so their hooks stay on the model: the next callback that starts on the same model
#: closes them first (`_close_orphans`), and whatever is still open is closed at interpreter exit.
_OPEN: weakref.WeakSet[WatchingCallback] = weakref.WeakSet()


def _close_orphans(model: torch.nn.Module, keep: WatchingCallback | None = None) -> None:
    """Close every other callback's monitor still open on `model` (its run was interrupted)."""
    for cb in list(_OPEN):
        if cb is keep:
            continue
        watched = cb._watched() if cb._watched is not None else None
        if watched is model:
            log.warning("%s", Msg("integrations.orphan_closed"))
            cb._close_guarded()


@atexit.register
def _close_all() -> None:
    for cb in list(_OPEN):
        cb._close_guarded()


def _watch_target(model: torch.nn.Module, wrapped: Any) -> Any:
    """What to watch: the DDP wrapper (gradients before and after the all-reduce), the DeepSpeed
    engine (its global norm, loss scale, skipped steps) or the FSDP1 root (its flat parameters),
    when the trainer wrapped the model in one of them; else the model. Apart from `_open` to keep
    it short."""
    from ..signals.distributed import is_fsdp1
    from .deepspeed import is_deepspeed_engine

    wrapping = (
        isinstance(wrapped, torch.nn.parallel.DistributedDataParallel)
        or is_deepspeed_engine(wrapped)
        or (isinstance(wrapped, torch.nn.Module) and is_fsdp1(wrapped))
    )
    return wrapped if wrapping else model


def _record_framework(mon: Any, framework: dict[str, Any]) -> None:
    """Put the trainer's settings where the rest reads them: the run's metadata (with its gradient
    clip where the log readers put it, so the detectors read it there) and preflight's context
    (fix texts name the trainer's own options). Apart from `_open` to keep it short."""
    mon.meta["framework"] = framework
    clip = framework.get("max_grad_norm", framework.get("gradient_clip_val"))
    if isinstance(clip, (int, float)) and not isinstance(clip, bool) and clip > 0:
        mon.meta["max_grad_norm"] = clip
    mon.writer.write_meta(mon.meta)
    if mon.preflight is not None:
        mon.preflight.ctx.trainer = framework


class WatchingCallback:
    """Mixin: `_init_watching` in the callback's `__init__`, `_start_guarded` when training starts,
    `_end_step` after every optimizer step, `_finish` when it ends."""

    monitor: Any
    probe: MicroBatchProbe | None

    def _init_watching(
        self,
        log_dir: str | Path | None,
        task: str | None,
        replay_fn: Callable[[torch.nn.Module, Any], torch.Tensor] | None,
        watch_options: dict[str, Any],
    ) -> None:
        self.log_dir = log_dir
        self.task = task
        self.replay_fn = replay_fn
        self.watch_options = watch_options
        self.monitor = None
        self.probe = None
        self._runs = 0
        self._watched: Any = None  # weak reference to the model the open monitor watches

    def _close_guarded(self) -> None:
        try:
            self._finish()
        except Exception as e:  # never the user's problem
            log.debug("lossdoctor: closing a monitor failed: %s", e)

    def _start_guarded(self, start: Callable[..., None], *args: Any) -> None:
        self._finish()
        try:
            start(*args)
        except Exception as e:  # never stop the user's training
            log.warning("%s", Msg("integrations.cannot_start", error=f"{type(e).__name__}: {e}"))
            self._finish()

    def _open(
        self,
        model: torch.nn.Module,
        wrapped: Any,
        optimizer: Any,
        scaler: Any,
        scheduler: Any,
        framework: dict[str, Any],
        *,
        task: str | None = None,
        tokenizer: Any = None,
        **probe_options: Any,
    ) -> Any:
        """Watch the run (the DDP wrapper when there is one, so gradients are measured before and
        after the all-reduce), a run directory per training run, the micro-batch probe added.

        `task` and `tokenizer` are what the trainer knows (an `SFTTrainer` is SFT, its processing
        class is the tokenizer): used when the user gave none, so the checks that need them run
        with the callback added as the README shows it. `framework` goes into the run's metadata
        and to preflight (fix texts name the trainer's own options)."""
        from .entry import watch

        target = _watch_target(model, wrapped)
        _close_orphans(model, keep=self)  # hooks a run interrupted by an exception left on the model
        log_dir = self.log_dir
        self._runs += 1
        if log_dir is not None and self._runs > 1:  # training started again: a run directory each
            log_dir = f"{log_dir}-{self._runs}"
        options = dict(self.watch_options)
        if tokenizer is not None and options.get("tokenizer") is None:
            options["tokenizer"] = tokenizer
        mon = watch(
            target,
            optimizer,
            scaler=scaler,
            scheduler=scheduler,
            log_dir=log_dir,
            task=self.task if self.task is not None else task,
            replay_fn=self.replay_fn,
            **options,
        )
        self.monitor = mon
        _record_framework(mon, framework)
        self.probe = MicroBatchProbe(mon, **probe_options)
        mon.add_probe(self.probe)
        mon.tracer.idle = True  # until the first step begins
        self._watched = weakref.ref(model)
        _OPEN.add(self)
        return mon

    def _begin_step(self) -> None:
        """Drop the forwards that ran since the last step (evaluation) from the module trace."""
        if self.monitor is not None and self.probe is not None:
            self.monitor.tracer.reset()
            self.monitor.tracer.idle = False
            self.probe.reset()
            self.probe.idle = False

    def _end_step(self) -> None:
        """One optimizer step done: its micro-batches joined into the step's batch, recorded."""
        if self.monitor is None or self.probe is None:
            return
        try:
            batch = self.probe.step_batch()
        except Exception as e:
            batch = None
            self.monitor.disable("micro-batches", e)
        self.monitor.step(self.probe.last_loss(), batch=batch)
        # until the next step begins no training forward runs (evaluation, or an exception ended
        # the run): nothing is traced or kept, so an interrupted run's hooks grow no buffer
        self.monitor.tracer.idle = True
        if self.probe is not None:
            self.probe.idle = True

    def diagnose(self) -> Any:
        """The diagnosis of the last (or current) training run."""
        if self.monitor is None:
            raise RuntimeError("LossDoctorCallback has not watched a run yet")
        return self.monitor.diagnose()

    def _finish(self) -> None:
        _OPEN.discard(self)
        self._watched = None
        if self.monitor is not None and not self.monitor.closed:
            self.monitor.close()
        self.probe = None
