"""Preflight inside `lossdoctor.watch`: the same checks, without calling `check`.

When:
- at `watch(...)`: the configuration (weights vs fan-in, GradScaler settings, Adam eps in the state
  dtype, bf16 update resolution); hooks for the first forward pass are installed;
- at the first `mon.step`: activation growth through depth and the autocast dtype of that first
  forward, the dtype of the loss;
- on the first `max_batches` batches: label mask and data checks, per batch, then over all of them;
- `set_total_steps(n)` (for integrations that know the plan, e.g. a Trainer's max_steps): the LR
  schedule simulated over the run.

Findings go to `preflight.jsonl` in the run directory and to the live engine, which announces them
like any other finding and folds them into the detectors' findings of the same cause. After the
first batches the per-step cost is one attribute test. Any internal error disables preflight,
is logged once, and never reaches the training loop.
"""

from __future__ import annotations

import logging
import math
from typing import Any

import torch

from ..findings import Finding
from .common import BatchView, Context, unwrap_model
from .data import DataCheck
from .init import ActivationProbe, init_findings, unread_note, weight_stats
from .labels import LabelCheck
from .mixed_precision import config_findings, fp16_without_scaler, loss_dtype_finding, param_dtypes, scaler_config
from .schedule import schedule_findings

log = logging.getLogger("lossdoctor")


class PreflightWatch:
    def __init__(self, monitor: Any, *, max_batches: int = 8) -> None:
        self.mon = monitor
        self.max_batches = max_batches
        self.ctx = Context(
            model=monitor.model,
            optimizer=monitor.optimizer,
            scheduler=monitor.scheduler,
            scaler=monitor.scaler,
            task=monitor.task,
            live=True,
            tokenizer=getattr(getattr(monitor, "options", None), "tokenizer", None),
        )
        self.enabled = True
        self.batches = 0
        self.finished = False
        self.first_done = False
        model = unwrap_model(monitor.model)
        self.stats = weight_stats(model)
        note = unread_note(model)
        if note is not None and isinstance(getattr(monitor, "notes", None), list):
            monitor.notes.append(note)
        self.probe = ActivationProbe(model)
        try:
            self.labels = LabelCheck(self.ctx)
            self.data = DataCheck(self.ctx)
            self._emit(config_findings(self.ctx))
        except BaseException:
            self.probe.remove()  # start_preflight drops this object: leave no hook behind
            raise

    # --- called by the monitor ----------------------------------------------------------------
    def observe(self, step: int, loss: Any, batch: Any) -> None:
        """Evidence of one optimizer iteration; a no-op once the first batches are checked."""
        if not self.enabled or self.finished:
            return
        try:
            if not self.first_done:
                self._first(step, loss)
            if batch is not None and self.batches < self.max_batches:
                view = BatchView.parse(batch, step)
                self._emit(self.labels.add(view) + self.data.add(view))
                self.batches += 1
            if self.batches >= self.max_batches:
                self._finish()
        except Exception as e:
            self._disable(e)

    def set_total_steps(self, total_steps: int, *, interval: str = "step", steps_per_epoch: int | None = None) -> None:
        """Simulate the LR schedule over the planned run (integrations call this when they know it)."""
        if not self.enabled:
            return
        try:
            self.ctx.total_steps = int(total_steps)
            self.ctx.scheduler_interval = interval
            self.ctx.steps_per_epoch = steps_per_epoch
            self._emit(schedule_findings(self.ctx))
        except Exception as e:
            self._disable(e)

    def close(self) -> None:
        try:
            if self.enabled and not self.finished:
                if not self.first_done:
                    self._first(None, None)
                self._finish()
        except Exception as e:
            self._disable(e)
        finally:
            self.probe.remove()

    # --- internals ------------------------------------------------------------------------------
    def _first(self, step: int | None, loss: Any) -> None:
        """The first forward is done: judge the init on it and the precision it ran in."""
        self.first_done = True
        # the probe removed its hooks after the first forward; if it never saw one (a compiled
        # model: hooks are traced away), its hooks stay as no-ops until close, because removing a
        # hook from a compiled module makes torch.compile recompile it
        self.probe.done = True
        self._emit(init_findings(self.ctx, self.stats, self.probe.growth(), None, None))
        autocast = self.probe.autocast
        if (
            autocast == torch.float16
            and scaler_config(self.ctx.scaler) is None
            and not param_dtypes(self.ctx.model).get(torch.float16)
        ):
            self._emit([fp16_without_scaler(self.ctx, autocast)])
        if isinstance(loss, torch.Tensor):
            value = float(loss.detach().float().mean()) if loss.dtype in (torch.bfloat16, torch.float16) else None
            f = loss_dtype_finding(
                self.ctx, loss.dtype, value if value is None or math.isfinite(value) else None, batch=step
            )
            if f is not None:
                self._emit([f])

    def _finish(self) -> None:
        self.finished = True
        self._emit(self.labels.finish() + self.data.finish())

    def _emit(self, findings: list[Finding]) -> None:
        for f in findings:
            d = f.to_dict()
            self.mon.writer.append_preflight(d)
            self.mon.live.preflight.append(d)

    def _disable(self, e: BaseException) -> None:
        self.enabled = False
        self.probe.remove()
        log.warning("lossdoctor: preflight disabled after an internal error: %s: %s", type(e).__name__, e)


def start_preflight(monitor: Any) -> PreflightWatch | None:
    """The monitor's preflight, or None (logged) when it cannot start: training goes on."""
    try:
        return PreflightWatch(monitor)
    except Exception as e:
        log.warning("lossdoctor: preflight disabled after an internal error: %s: %s", type(e).__name__, e)
        return None
