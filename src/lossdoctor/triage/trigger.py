"""When a step record starts an incident: the confirm step of the incident flow.

A non-finite loss, non-finite gradients or parameters (a GradScaler's own overflow skips are not
incidents), a GradScaler that skipped SCALE_STREAK steps in a row on a finite forward pass, or a
loss spike far above its recent level (`SpikeWatch`, the streaming form of the detectors' rule).
A spike within `RESTART_STEPS` of an LR rise made by a scheduler that restarts on purpose
(CosineAnnealingWarmRestarts, CyclicLR) is what the restart does, not an incident: SGDR's loss jumps
at each restart where the LR goes from ~0 back to its peak. Torch-free: it reads the step records only.
"""

from __future__ import annotations

import math
from collections import deque
from typing import Any

import numpy as np

from ..detectors.learning_rate import cycles_by_design
from ..detectors.loss_shape import is_spike, robust_sigma, spike_window

#: consecutive GradScaler skips that start an incident: more than a healthy start-up back-off
#: (init_scale 2**16: a few steps; 2**24: ~8)
SCALE_STREAK = 12
#: steps after an LR rise within which a spike is the rise's doing: the record's LR is the one its
#: update used, so the loss the rise first shows is the next record's (2 leaves one step of slack)
RESTART_STEPS = 2
#: LR over the step before it that counts as a restart: SGDR goes from eta_min (~0) back to the peak
#: in one step (x1000 in a T_0 cycle); a cosine's or a warm-up's step-to-step change is < 1.1x
RESTART_RISE = 2.0


class SpikeWatch:
    """Streaming version of the loss-spike rule of `detectors.loss_shape`: against the median of
    the last w losses (w = n/20 clamped to [10, 100], as there), a log-space robust z > 8, at least
    2x that median, after the run has trained (median below 0.9x the starting loss), giving back at
    least a fifth of the progress, and more than twice any earlier excursion."""

    def __init__(self, window: int = 100, min_history: int = 40) -> None:
        self.hist: deque[float] = deque(maxlen=window)
        self.n = 0
        self.min_history = min_history
        self.start: list[float] = []
        self.max_excursion = 1.0

    def _baseline(self) -> tuple[float, float]:
        lx = np.log(np.asarray(list(self.hist)[-spike_window(self.n) :]))
        med = float(np.median(lx))
        return med, robust_sigma(float(np.median(np.abs(lx - med))))

    def check(self, loss: float) -> dict[str, float] | None:
        if not (math.isfinite(loss) and loss > 0) or self.n < self.min_history:
            return None
        med, sigma = self._baseline()
        base = math.exp(med)
        start = float(np.median(self.start))
        z = (math.log(loss) - med) / sigma
        ratio = loss / base
        if is_spike(z, ratio, base, loss, start) and ratio > 2 * self.max_excursion:
            return {"median": base, "z": z, "ratio": ratio, "threshold": base + 0.5 * (loss - base)}
        return None

    def add(self, loss: float) -> None:
        if not (math.isfinite(loss) and loss > 0):
            return
        if len(self.start) < 5:
            self.start.append(loss)
        if self.n >= self.min_history:
            self.max_excursion = max(self.max_excursion, loss / math.exp(self._baseline()[0]))
        self.hist.append(loss)
        self.n += 1


def _nonfinite(x: Any) -> bool:
    return isinstance(x, float) and not math.isfinite(x)


class IncidentTrigger:
    """Reads every step record in order and says which one starts an incident (`check`); a step
    that starts none feeds the spike rule's history (`healthy`)."""

    def __init__(self, has_scaler: bool, scheduler: Any = None) -> None:
        self.has_scaler = has_scaler
        self.spikes = SpikeWatch()
        self._scaler_streak = 0  # consecutive steps the GradScaler skipped
        #: the scheduler restarts the LR on purpose (its class's name says so)
        self.cyclic = scheduler is not None and cycles_by_design(type(scheduler).__name__)
        self._lrs: deque[float] = deque(maxlen=RESTART_STEPS + 1)  # the last records' LRs

    def check(self, rec: dict[str, Any], skipped_by_policy: set[int], first: bool) -> dict[str, Any] | None:
        """The trigger this step record starts an incident with ({"kind": ...} and its numbers), or
        None. `skipped_by_policy`: the steps the skip policy skipped (not the scaler's skips);
        `first`: no incident was recorded yet (a scale collapse is looked for only then)."""
        step = int(rec["step"])
        loss = rec.get("loss")
        restarted = self._restart_before(rec.get("lr"))
        skipped = bool(rec.get("skipped")) and step not in skipped_by_policy
        self._scaler_streak = self._scaler_streak + 1 if skipped and self.has_scaler else 0
        if _nonfinite(loss):
            return {"kind": "nonfinite_loss"}
        if (rec.get("grad_nonfinite") or rec.get("nonfinite_params")) and not skipped:
            return {"kind": "nonfinite_grad"}
        if self._scaler_streak == SCALE_STREAK and first and not rec.get("fwd_first_nonfinite"):
            # the scaler has backed off SCALE_STREAK times in a row on a finite forward pass: more
            # than its start-up back-off, so look for the op that makes the gradients non-finite
            return {"kind": "scale_collapse", "streak": SCALE_STREAK, "first": step - SCALE_STREAK + 1}
        if isinstance(loss, float) and not skipped:
            spike = self.spikes.check(loss)
            if spike is not None and not restarted:
                return {"kind": "loss_spike", **spike}
        return None

    def _restart_before(self, lr: Any) -> bool:
        """A scheduler that restarts on purpose raised the LR `RESTART_RISE`x or more within the
        last `RESTART_STEPS` records before this one (this record's LR joins the history)."""
        prev = list(self._lrs)
        if isinstance(lr, float | int) and math.isfinite(lr):
            self._lrs.append(float(lr))
        if not self.cyclic:
            return False
        return any(b > 0 and a >= RESTART_RISE * b for b, a in zip(prev, prev[1:], strict=False))

    def healthy(self, rec: dict[str, Any]) -> None:
        """A step that started no incident: its loss joins the spike rule's history."""
        loss = rec.get("loss")
        if isinstance(loss, float) and not rec.get("skipped"):
            self.spikes.add(loss)
