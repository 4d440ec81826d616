"""Gradient accumulation normalisation (transformers PR #34191 and its follow-ups).

With k micro-batches per optimizer step the step should optimise the mean loss over all of its
items. Two classic bugs break that: the micro-batch means are summed without dividing by k (the
loss and the gradient grow k-fold with the number of micro-batches: what a custom `compute_loss`
that ignores `num_items_in_batch` does under a Trainer that then skips its own division), or the
loss is divided twice (1/k). With Adam the update barely changes, but clipping, weight decay and
the logged loss do; with SGD the step size is off by k.

Signals:
- `loss_weight` (written by the framework callbacks): the objective actually differentiated
  divided by the per-item mean loss, measured from the gradient each micro-batch's loss received.
  Healthy runs sit at 1 (per-rank token imbalance under DDP moves single steps by ~20%; the
  median over steps is used).
- without it: the first losses of a run from scratch against the chance level ln(V) (meta
  `chance_loss`): a start near k x chance with k = `accum_steps` says the logged loss is a sum of
  k micro-batch means.

Suppressions (numbers: `AccumulationLimits`): fewer than `min_steps` measured steps; a median
weight within [1/`weight_band`, `weight_band`]; the chance-level check only with k >= 2, a first
loss at k x chance within `k_tolerance`, and a run whose meta names a chance level. A bad_init finding on the same run is this one seen from the other side (the engine's
EXPLAINS drops it): the logits are not too confident, the loss is a sum.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..findings import Finding, FixLike, as_fixes
from ..messages import Msg
from ..records import Run
from .base import detector
from .quantities import Quantities


@dataclass(frozen=True)
class AccumulationLimits:
    #: measured micro-batch weights needed before a verdict
    min_steps: int = 3
    #: healthy runs sit at weight 1; per-rank token imbalance under DDP moves single steps by ~20%
    #: (see the module docstring): a median within [1/1.5, 1.5] is that with slack (rule of thumb)
    weight_band: float = 1.5
    #: a median weight within 20% of k (or 1/k): summed (or divided twice), said in the evidence
    k_match: float = 0.2
    #: share of steps off the band above which the confidence is high
    mostly_off: float = 0.8
    #: the chance-level check: the first loss at least this many times chance ...
    min_chance_ratio: float = 1.5
    #: ... and within this share of k x chance
    k_tolerance: float = 0.25


LIMITS = AccumulationLimits()
LOW, HIGH = 1 / LIMITS.weight_band, LIMITS.weight_band


@detector("accumulation_normalization", needs_any=("loss_weight", "accum_steps"), hint=Msg("hint.accumulation"))
def accumulation_normalization(run: Run, q: Quantities) -> list[Finding]:
    if run.has("loss_weight"):
        return _from_weights(run)
    return _from_chance_level(run, q)


def _modal_k(run: Run) -> int | None:
    k = run.col("accum_steps")
    k = k[np.isfinite(k) & (k > 0)]
    if not k.size:
        return None
    vals, counts = np.unique(k.astype(np.int64), return_counts=True)
    return int(vals[np.argmax(counts)])


def _from_weights(run: Run) -> list[Finding]:
    w = run.col("loss_weight")
    ok = np.isfinite(w) & (w > 0)
    if ok.sum() < LIMITS.min_steps:
        return []
    med = float(np.median(w[ok]))
    if LOW <= med <= HIGH:
        return []
    off = ok & ((w < LOW) | (w > HIGH))
    first = int(np.flatnonzero(off)[0])
    k = _modal_k(run)
    frac = float(off.sum() / ok.sum())
    evidence: list[str] = [Msg("accum.weight", weight=med, n=int(ok.sum()), frac=frac)]
    if k and k > 1:
        if abs(med / k - 1) < LIMITS.k_match:
            evidence.append(Msg("accum.summed", k=k))
        elif abs(med * k - 1) < LIMITS.k_match:
            evidence.append(Msg("accum.divided_twice", k=k))
    fixes = _fixes(med, k)
    return [
        Finding(
            cause="grad_accum_normalization",
            symptom=_symptom(med),
            severity="warning",
            confidence=0.85 if frac > LIMITS.mostly_off else 0.6,
            step=int(run.steps[first]),
            evidence=evidence,
            fixes=as_fixes(fixes),
        )
    ]


def _from_chance_level(run: Run, q: Quantities) -> list[Finding]:
    chance = run.meta.get("chance_loss")
    k = _modal_k(run)
    if not chance or not k or k < 2 or not q.finite_loss.size:
        return []
    first = int(q.finite_loss[0])
    start = float(q.loss[first])  # the first step is taken at the initial weights: chance level
    ratio = start / float(chance)
    if ratio < LIMITS.min_chance_ratio or abs(ratio / k - 1) > LIMITS.k_tolerance:
        return []
    evidence: list[str] = [Msg("accum.starts_at_k_chance", start=start, ratio=ratio, chance=float(chance), k=k)]
    return [
        Finding(
            cause="grad_accum_normalization",
            symptom=_symptom(float(k)),
            severity="warning",
            confidence=0.55,
            step=int(run.steps[first]),
            evidence=evidence,
            fixes=as_fixes(_fixes(float(k), k)),
        )
    ]


def _symptom(weight: float) -> str:
    """What a mis-scaled objective does to training: a k-times loss is a k-times step size (the
    loss swings), a loss divided twice a k-times smaller one (the loss crawls)."""
    return "oscillation" if weight > 1 else "slow_convergence"


def _fixes(weight: float, k: int | None) -> list[FixLike]:
    kk = k if k and k > 1 else "k"
    if weight > 1:
        return [Msg("accum.fix_divide", k=kk), Msg("accum.fix_hf_trainer")]
    return [Msg("accum.fix_divide_once", k=kk)]
