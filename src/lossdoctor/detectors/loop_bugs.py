"""The training-loop bugs of the public troubleshooting lists (Karpathy, "A Recipe for Training
Neural Networks", 2019; Tobin, "Troubleshooting Deep Neural Networks", 2019; the PyTorch and HF
forums), named for what they are rather than by their symptom.

Gradients never zeroed (`grad_not_zeroed`). Signal: `grad_stale` (signals/stale_grads.py), 1 when
the first backward of a step found a non-zero `.grad` left from before. A loop that never calls
`zero_grad` has it at every step after the first; its loss curve alone looks like an LR that is
too high (the accumulated gradient grows with the step), which is why the LR detectors' findings
are explained by this one (the engine's EXPLAINS). Gradient accumulation done on purpose adds
into its own micro-batches only: the probe looks at the first backward after an optimizer step.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..findings import Finding
from ..messages import Msg
from ..records import Run
from .base import detector
from .quantities import Quantities


@dataclass(frozen=True)
class StaleGradThresholds:
    #: measured steps needed before a verdict (step 0 always reads zero: nothing came before it);
    #: the same minimum the other per-step detectors use (measured default)
    min_steps: int = 3
    #: share of measured steps (after the first) with a gradient left in `.grad` for the bug that
    #: never zeroes: it reads 1.0 there, and 0 on every healthy loop the tests and the zoo run
    #: (measured default); a zero_grad on every other step reads 0.5, a warning below
    never: float = 0.8
    #: share for "zeroed on some steps only" (a zero_grad under a condition): a warning
    partly: float = 0.2
    #: gradient-norm growth, last over first measured step, quoted as evidence (sums of k gradients
    #: grow ~k-fold when they point the same way; measured on the zoo's scenario)
    norm_growth: float = 2.0


STALE = StaleGradThresholds()


@detector("grad_not_zeroed", needs=("grad_stale",))
def grad_not_zeroed(run: Run, q: Quantities) -> list[Finding]:
    g = run.col("grad_stale")
    idx = np.flatnonzero(np.isfinite(g))
    if idx.size and g[idx[0]] == 0:
        idx = idx[1:]  # the first measured step had nothing before it
    if idx.size < STALE.min_steps:
        return []
    stale = idx[g[idx] > 0.5]
    frac = stale.size / idx.size
    if frac < STALE.partly:
        return []
    first = int(run.steps[stale[0]])
    if frac >= STALE.never:
        evidence: list[str] = [Msg("bugs.stale.seen", n=int(stale.size), of=int(idx.size), first=first)]
        severity, conf = "critical", 0.95
    else:
        evidence = [Msg("bugs.stale.partly", n=int(stale.size), of=int(idx.size))]
        severity, conf = "warning", 0.7
    growth = _norm_growth(run, q)
    if growth is not None:
        evidence.append(growth)
    return [Finding(cause="grad_not_zeroed", symptom=_symptom(q), severity=severity, confidence=conf,
                    step=first, evidence=evidence,
                    fixes=[Msg("bugs.stale.fix"), Msg("bugs.stale.lr_not_the_fix")])]


def _norm_growth(run: Run, q: Quantities) -> Msg | None:
    if not run.has("grad_norm"):
        return None
    gn = run.col("grad_norm")
    ok = np.flatnonzero(np.isfinite(gn) & (gn > 0))
    if ok.size < 4 or not q.finite_loss.size:
        return None
    a, b = float(gn[ok[0]]), float(gn[ok[-1]])
    if b < STALE.norm_growth * a:
        return None
    la, lb = float(q.loss[q.finite_loss[0]]), float(q.loss[q.finite_loss[-1]])
    return Msg("bugs.stale.norm_grows", a=a, b=b, la=la, lb=lb)


def _symptom(q: Quantities) -> str:
    """What the summed gradients did to the loss: it went non-finite or ended above where it
    started (divergence), or it swings (oscillation)."""
    if q.first_bad_step is not None or not q.finite_loss.size:
        return "divergence"
    y = q.loss[q.finite_loss]
    k = max(1, y.size // 4)
    return "divergence" if np.median(y[-k:]) > np.median(y[:k]) else "oscillation"
