"""The training-loop bugs of the public troubleshooting lists (Karpathy, "A Recipe for Training
Neural Networks", 2019; Tobin, "Troubleshooting Deep Neural Networks", 2019; the PyTorch and HF
forums), named for what they are rather than by their symptom.

Every threshold below was set while looking at the zoo scenario (benchmarks/zoo) that then scores
its rule: the zoo's figures for these causes are in-sample ("measured default" means measured
there), and no held-out variant of these faults exists yet.

Gradients never zeroed (`grad_not_zeroed`). Signal: `grad_stale` (signals/stale_grads.py), 1 when
the first backward of a step found a non-zero `.grad` left from before. A loop that never calls
`zero_grad` has it at every step after the first; its loss curve alone looks like an LR that is
too high (the accumulated gradient grows with the step), which is why the LR detectors' findings
are explained by this one (the engine's EXPLAINS). Gradient accumulation done on purpose adds
into its own micro-batches only: the probe looks at the first backward after an optimizer step.

Softmax before a softmax-applying loss (`softmax_before_loss`). Signals: `out_min`, `out_max`,
`out_rowsum_dev`, `out_classes` (signals/output_probs.py), the model's output at sampled steps.
When every measured output is a probability distribution over K >= 2 classes (values in [0, 1],
rows summing to 1) and the loss never went below ln(1 + (K-1)/e), the floor of a cross-entropy
that applies its own softmax to probabilities (the best a one-hot p can do: logits 1 and 0), the
loss is saturated there, not converged. The same model trained on purpose with `nll_loss(log p)`
goes below that floor and is left alone; so is label smoothing (logits, not probabilities).

Parameters frozen by mistake (`frozen_model`). Signals: the run's metadata (`model.params`,
`model.trainable_params`, the optimizer groups' `n_params`) and a loss that does not learn. When
almost none of the model is trainable (`requires_grad=False` left on the backbone and the head
too), or the optimizer was given a small subset of the trainable parameters, and the loss does not
fall beyond its noise, the weights that would fit the data never move. A frozen backbone with a
trained head done on purpose is left alone: its loss falls.

A schedule in the wrong units (`lr_schedule_error`): a warm-up sized in tokens, samples or
micro-batches while the scheduler is stepped per optimizer step never ends: the LR rises at every
step of the run and is still rising at the last one. With the peak LR the optimizer was built with
(`initial_lr`, which torch schedulers record), the warm-up's length at that rate is estimated and
set against the run's. One-cycle and warm restarts fall again and are left alone. A schedule planned
far longer than the run (`OneCycleLR(total_steps=...)` or `CosineAnnealingLR(T_max=...)` counted in
samples or micro-batches, 10x the run or more) is judged at the run's end from meta.json: the class,
its planned length and how many times it was stepped (a one-cycle's LR never leaves its warm-up,
a cosine never decays; live, the run's length is not known yet).

Data not shuffled (`unshuffled_data`), ordered by length too (`batch_tokens_mean`, the batch's
mean tokens per sample from its attention mask: a sorted dataset read in order makes it rise at
every step for a whole epoch). Signals: `batch_one_class`, `batch_class` (the batch probe:
is every class label of the batch the same?). When most batches hold a single class and that class
changes along the run, the data is ordered by class: the model fits one class, then the next, and
the loss jumps at each change (where the hidden fault's spike was). Shuffled batches of 4+ from
several classes are rarely single-class (10 classes, batch 4: 0.1%; 2 classes, batch 4: 12.5%).

Labels equal to the inputs, not shifted (`labels_not_shifted`). Signal: `out_copy_frac` (the
model's argmax equals its own input token) at the end of the run, with a loss far below chance
(ln V, from the run's metadata or the output's last dimension). A masked LM copies its unmasked
positions too, but its loss (on the masked ones) stays far from 0; an LM whose loss shifts (the
HF models do it inside) predicts the next token and copies only where tokens repeat.

Eval mode during training (`eval_mode_training`). Signal: `train_mode`, the root module's
`training` flag at each step's first forward with gradients, recorded for models that have dropout
or BatchNorm. Most steps in eval mode: `model.eval()` was left on (typically after a validation
pass). A validation pass itself runs without gradients and is not a step; BatchNorm frozen on
purpose leaves the root in train mode.

A loss whose shapes broadcast (`loss_broadcast`). Signals: `out_rank`/`out_last_dim` (the model's
output is (B, 1)), `target_var` (the batch holds a (B,) floating target, and its variance). An MSE
of (B, 1) against (B,) broadcasts to (B, B): it scores every prediction against every target, is
never below the targets' variance, and the best the model can do is predict their mean. So: a
(B, 1) output, a (B,) target, and a loss that stays at the targets' variance or above. The same
model whose loss squeezes the output learns below it and is left alone. Where the monitor measured
both MSEs (`mse_elementwise`, `mse_broadcast`: signals/output_probs.py), the loss is compared with
each instead: the broadcast one is the bug, measured; the elementwise one is a model that is slow to
learn (its loss sits at the targets' variance too, for a while), left alone; neither (another loss)
falls back to the level rule. What the model learned (the level, the covariance) is read only from
steps past the densely sampled start, so `watch` at step 25 does not judge "the end" from the
first steps and announce what the end withdraws: until there are enough such steps the rule waits;
and where the loss is an MSE the two cannot yet be told apart, a loss far above the targets'
variance (a mean not yet learned, which any model has at first) is no sign either way.

Clipping at a tiny max_norm (`grad_clip_too_tight`). Signals: `grad_norm` (end of backward) and
`grad_norm_applied` (at the optimizer's step, after clipping; sampled steps). When the gradient the
optimizer applies is a small, constant fraction of the one backward made at nearly every sampled
step, a threshold far below the gradient norm clips every step. For SGD-family optimizers every
update shrinks by that factor; Adam's update is invariant to a constant scale of the gradient, so
there it is left alone. A threshold that clips only the occasional spike (1.0 on a norm of ~0.5)
is what clipping is for.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from ..findings import Finding, Fix, FixLike, as_fixes
from ..messages import Msg
from ..records import Run
from .base import detector
from .learning_rate import PRINTED_SOURCES
from .quantities import Quantities
from .scalars import progress_kind


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
    #: positive gradient norms needed to quote that growth
    norm_min_points: int = 4


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
    return [
        Finding(
            cause="grad_not_zeroed",
            symptom=_symptom(q),
            severity=severity,
            confidence=conf,
            step=first,
            evidence=evidence,
            fixes=as_fixes([Msg("bugs.stale.fix"), Msg("bugs.stale.lr_not_the_fix")]),
        )
    ]


def _norm_growth(run: Run, q: Quantities) -> Msg | None:
    if not run.has("grad_norm"):
        return None
    gn = run.col("grad_norm")
    ok = np.flatnonzero(np.isfinite(gn) & (gn > 0))
    if ok.size < STALE.norm_min_points or not q.finite_loss.size:
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


@dataclass(frozen=True)
class SoftmaxLossThresholds:
    #: measured outputs needed (sampled steps: the first 5 and every layer_every-th)
    min_measured: int = 3
    #: share of them that must be distributions (every one is, for a model ending in Softmax)
    share: float = 0.8
    #: |row sum - 1| of a distribution: float32 softmax rows sum to 1 within ~1e-6; bf16 ~1e-2
    rowsum_tol: float = 2e-2
    #: how far below the floor ln(1 + (K-1)/e) the loss may go and still be saturated there
    #: (batch noise on the zoo's 32-sample batches is ~0.01; measured default)
    below_floor: float = 0.02
    #: the loss must have come within this share of the way from chance down to the floor: a run
    #: still at chance is saturated at chance, whatever the loss (measured on the zoo scenario: 0.9+)
    progress: float = 0.5
    #: slack on [0, 1] for an output to count as a probability (float32 rounding of a softmax)
    prob_tol: float = 1e-6


SOFTMAX = SoftmaxLossThresholds()


@detector("softmax_before_loss", needs=("out_rowsum_dev", "out_min", "out_max", "out_classes"))
def softmax_before_loss(run: Run, q: Quantities) -> list[Finding]:
    dev, lo, hi, k = (run.col(c) for c in ("out_rowsum_dev", "out_min", "out_max", "out_classes"))
    idx = np.flatnonzero(np.isfinite(dev) & np.isfinite(lo) & np.isfinite(hi) & np.isfinite(k))
    if idx.size < SOFTMAX.min_measured or not q.finite_loss.size:
        return []
    dist = (
        (lo[idx] >= -SOFTMAX.prob_tol)
        & (hi[idx] <= 1 + SOFTMAX.prob_tol)
        & (dev[idx] <= SOFTMAX.rowsum_tol)
        & (k[idx] >= 2)
    )
    if dist.mean() < SOFTMAX.share:
        return []
    classes = int(np.median(k[idx][dist]))
    floor, chance = math.log(1 + (classes - 1) / math.e), math.log(classes)
    y = q.loss[q.finite_loss]
    best, end = float(np.min(y)), float(np.median(y[-max(1, y.size // 5) :]))
    if best < floor - SOFTMAX.below_floor or end > floor + (1 - SOFTMAX.progress) * (chance - floor):
        return []
    evidence: list[str] = [
        Msg(
            "bugs.softmax.outputs",
            n=int(dist.sum()),
            of=int(idx.size),
            k=classes,
            lo=float(np.min(lo[idx][dist])),
            hi=float(np.max(hi[idx][dist])),
            dev=float(np.max(dev[idx][dist])),
        ),
        Msg("bugs.softmax.floor", floor=floor, k=classes, chance=chance, best=best, end=end),
    ]
    return [
        Finding(
            cause="softmax_before_loss",
            symptom="plateau",
            severity="warning",
            confidence=0.9,
            step=int(run.steps[idx[0]]),
            evidence=evidence,
            fixes=as_fixes([Msg("bugs.softmax.fix"), Msg("bugs.softmax.fix_nll")]),
        )
    ]


@dataclass(frozen=True)
class FrozenThresholds:
    #: trainable share of the model's parameters below which "almost all frozen" (the reported
    #: hidden fault: 4 of 2,276 = 0.2%; a linear probe on a frozen backbone is ~1-10%)
    trainable_share: float = 0.01
    #: share of the trainable parameters the optimizer holds below which it was given a subset
    optimizer_share: float = 0.5
    #: loss points needed to say it does not learn (`progress_kind` judges thirds of the curve)
    min_points: int = 30


FROZEN = FrozenThresholds()


@detector("frozen_by_mistake", needs=("loss",))
def frozen_by_mistake(run: Run, q: Quantities) -> list[Finding]:
    model = run.meta.get("model") if isinstance(run.meta, dict) else None
    groups = (run.meta.get("optimizer") or {}).get("groups") if isinstance(run.meta, dict) else None
    if not isinstance(model, dict):
        return []
    total, trainable = model.get("params"), model.get("trainable_params")
    if not (isinstance(total, int) and isinstance(trainable, int) and total > 0):
        return []
    in_opt = sum(g.get("n_params", 0) for g in groups if isinstance(g, dict)) if isinstance(groups, list) else None
    lf = q.finite_loss
    if lf.size < FROZEN.min_points or q.first_bad_step is not None:
        return []
    kind, fall, _ = progress_kind(q.loss[lf])
    if kind not in ("nothing", "slowly", "stalled"):
        return []
    evidence: list[str] = []
    fixes: list[FixLike] = []
    if trainable / total < FROZEN.trainable_share:
        evidence.append(Msg("bugs.frozen.few_trainable", trainable=trainable, total=total, pct=100 * trainable / total))
        fixes.append(Fix.unfreeze(Msg("bugs.frozen.fix_requires_grad")))
    if isinstance(in_opt, int) and trainable > 0 and in_opt < FROZEN.optimizer_share * trainable:
        evidence.append(Msg("bugs.frozen.optimizer_subset", n=in_opt, trainable=trainable))
        # the same change to a replay as unfreezing ("train every parameter"): the first fix
        # carries it (a probe tries it from a snapshot), a second stays words
        fixes.append(Msg("bugs.frozen.fix_optimizer") if fixes else Fix.unfreeze(Msg("bugs.frozen.fix_optimizer")))
    if not evidence:
        return []
    y = q.loss[lf]
    evidence.append(Msg("bugs.frozen.loss_flat", first=float(y[0]), last=float(y[-1]), pct=100 * max(0.0, fall)))
    return [
        Finding(
            cause="frozen_model",
            symptom="plateau",
            severity="warning",
            confidence=0.8,
            step=int(run.steps[lf[0]]),
            evidence=evidence,
            fixes=as_fixes(fixes),
        )
    ]


@dataclass(frozen=True)
class EndlessWarmupThresholds:
    #: logged LR points needed (a short smoke test inside its warm-up is not judged)
    min_points: int = 50
    #: rise over the run, last over first LR: a linear warm-up of W steps seen for N steps rises
    #: N-fold; 3x keeps a run whose warm-up merely ends late out (measured default)
    rise: float = 3.0
    #: the last tenth of the run still rises by at least this share of the total rise
    still_rising: float = 0.05
    #: a step down by more than this share of the last LR is a fall (float noise of a logged LR
    #: is far below it): a schedule that ends its warm-up
    fall_tol: float = 1e-9
    #: in printed text (an excerpt, whose end need not be the run's), an LR that has climbed to this is a
    #: warm-up on its way to an ordinary peak (OpenNMT's Noam schedule at 6.2e-4 by step 5000 of 8000), not
    #: one that never ends: the lowest usual peak of the Adam family (`lr_usual.USUAL_LR`)
    usual_peak: float = 1e-5


WARMUP = EndlessWarmupThresholds()


@detector("endless_warmup", needs=("lr",))
def endless_warmup(run: Run, q: Quantities) -> list[Finding]:
    idx = np.flatnonzero(np.isfinite(q.lr))
    if idx.size < WARMUP.min_points:
        return []
    x = q.lr[idx]
    lo, hi = float(x[0]), float(x[-1])
    if lo <= 0 or hi < WARMUP.rise * lo:
        return []
    if np.any(np.diff(x) < -WARMUP.fall_tol * hi):  # it fell somewhere: a schedule that ends its warm-up
        return []
    tenth = x[int(0.9 * x.size)]
    if hi - tenth < WARMUP.still_rising * (hi - lo):
        return []
    n = int(q.steps[idx[-1]]) + 1
    if n <= _configured_warmup(run):  # a warm-up still running as configured (seen live, or a log cut early)
        return []
    if run.source in PRINTED_SOURCES and hi >= WARMUP.usual_peak:
        return []  # a pasted excerpt need not end with its run: an LR climbing into the usual range is a warm-up
    if _planned_longer_live(run, n):
        return []
    evidence: list[str] = [Msg("bugs.warmup.never_ends", a=lo, b=hi, n=n)]
    peak = _initial_lr(run)
    slope = (hi - lo) / max(1, int(q.steps[idx[-1]] - q.steps[idx[0]]))
    if peak is not None and peak > hi and slope > 0:
        would = int(round(int(q.steps[idx[0]]) + (peak - lo) / slope))
        evidence.append(Msg("bugs.warmup.would_reach", peak=peak, step=would, n=n, x=would / n))
    # the LR held at the peak the optimizer was built with (as a warm-up that ended would): what a
    # replay from a snapshot can try; without a known peak the fix stays words
    units = Msg("bugs.warmup.fix_units")
    first = Fix.lr(units, to=peak) if peak is not None and peak > hi else units
    return [
        Finding(
            cause="lr_schedule_error",
            symptom="slow_convergence",
            severity="warning",
            confidence=0.8,
            step=int(q.steps[idx[0]]),
            evidence=evidence,
            fixes=as_fixes([first, Msg("bugs.warmup.fix_hf")]),
        )
    ]


def _planned_longer_live(run: Run, n: int) -> bool:
    """Live (the run not closed yet), a scheduler with a planned length longer than the steps seen
    (OneCycleLR's `total_steps`): its warm-up, a share of that plan, may still be running as
    configured. Once the run is closed, its own length judges: an LR still rising at its last step
    is a warm-up that never ended, whatever the plan said."""
    meta = run.meta if isinstance(run.meta, dict) else {}
    sched = meta.get("scheduler")
    total = sched.get("total_steps") if isinstance(sched, dict) else None
    if meta.get("closed") or not isinstance(total, (int, float)) or isinstance(total, bool):
        return False
    return n < total


def _configured_warmup(run: Run) -> int:
    """The warm-up steps the run's configuration asked for (the HF Trainer's `warmup_steps`, or
    `warmup_ratio` of `max_steps`), 0 when not known."""
    meta = run.meta if isinstance(run.meta, dict) else {}
    fw = fw if isinstance(fw := meta.get("framework"), dict) else {}
    cfg = {**(st if isinstance(st := meta.get("settings"), dict) else {}), **fw}
    steps, ratio, total = cfg.get("warmup_steps"), cfg.get("warmup_ratio"), cfg.get("max_steps")
    if isinstance(steps, (int, float)) and not isinstance(steps, bool) and steps > 0:
        return int(steps)
    if isinstance(ratio, (int, float)) and isinstance(total, (int, float)) and ratio > 0 and total > 0:
        return int(ratio * total)
    return 0


def _initial_lr(run: Run) -> float | None:
    groups = (run.meta.get("optimizer") or {}).get("groups") if isinstance(run.meta, dict) else None
    if not isinstance(groups, list) or not groups or not isinstance(groups[0], dict):
        return None
    v = groups[0].get("initial_lr")
    return float(v) if isinstance(v, (int, float)) and v > 0 else None


@dataclass(frozen=True)
class PlannedTooLongThresholds:
    #: scheduler steps the run must have taken (a smoke test of a few steps is not judged)
    min_steps: int = 50
    #: the planned length over the steps the scheduler took, from which the plan was counted in
    #: other units (samples, tokens, micro-batches: a batch of 32 or 8 accumulated micro-batches
    #: give 32x or 8x): at a tenth of its plan, a one-cycle has not left its warm-up (30% of the
    #: plan) and a cosine has decayed by 2.5% of its range (chosen, not tuned)
    ratio: float = 10.0


PLANNED = PlannedTooLongThresholds()

#: the schedulers whose state records the length they were planned for, and under which name
PLANNED_LENGTH = {
    "OneCycleLR": "total_steps",
    "CosineAnnealingLR": "T_max",
    "LinearLR": "total_iters",
    "PolynomialLR": "total_iters",
    # a LambdaLR's plan is in its closure: the monitor probed it at close for the step where its
    # factor first falls to a tenth of its peak (`preflight.schedule.lambda_plan`)
    "LambdaLR": "decays_by",
}
#: the argument the fix names for each class, where it differs from the state's key (HF's
#: get_*_schedule_with_warmup build the LambdaLRs people use)
FIX_ARG = {"LambdaLR": "num_training_steps"}


def _planned_length(run: Run) -> tuple[str, str, int, int] | None:
    """At the run's end: (class, argument, planned length, times stepped) of a scheduler planned
    for `PLANNED.ratio` times the steps it took or more; None otherwise (live, unknown class)."""
    meta = run.meta if isinstance(run.meta, dict) else {}
    sched = meta.get("scheduler")
    if not meta.get("closed") or not isinstance(sched, dict):
        return None
    cls = str(sched.get("class") or "")
    arg = PLANNED_LENGTH.get(cls)
    planned = _count(sched.get(arg)) if arg else None
    n = _count(sched.get("stepped", meta.get("steps")))
    if planned is None or n is None or n < PLANNED.min_steps or planned < PLANNED.ratio * n:
        return None
    return cls, str(arg), planned, n


def _count(v: object) -> int | None:
    return int(v) if isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v) else None


@detector("schedule_planned_too_long", needs=("loss",))
def schedule_planned_too_long(run: Run, q: Quantities) -> list[Finding]:
    """A OneCycleLR or a cosine sized in samples, tokens or micro-batches, judged at the run's end
    (meta.json: the class, its planned length, how many times it was stepped): a one-cycle's LR
    never leaves its warm-up, a cosine never decays. Live, the run's length is not known yet."""
    got = _planned_length(run)
    if got is None:
        return []
    cls, arg, planned, n = got
    length = Msg("bugs.planned.length", cls=cls, arg=arg, planned=planned, n=n, pct=100 * n / planned)
    if arg == "decays_by":
        at_end = float((run.meta.get("scheduler") or {}).get("at_end", 1.0))
        length = Msg("bugs.planned.lambda", planned=planned, n=n, ratio=planned / n, at_end=100 * at_end)
    evidence: list[str] = [length]
    idx = np.flatnonzero(np.isfinite(q.lr))
    if idx.size > 1:  # a first and a last LR to quote
        key = "bugs.planned.warmup" if cls == "OneCycleLR" else "bugs.planned.no_decay"
        evidence.append(Msg(key, a=float(q.lr[idx[0]]), b=float(q.lr[idx[-1]])))
    # a one-cycle held in its warm-up trains at a 25th of its peak; a cosine that never decays stops
    # improving at the noise floor of its peak LR
    return [
        Finding(
            cause="lr_schedule_error",
            symptom="slow_convergence" if cls == "OneCycleLR" else "plateau",
            severity="warning",
            confidence=0.8,
            step=int(q.steps[idx[0]]) if idx.size else int(run.steps[0]),
            evidence=evidence,
            fixes=as_fixes(
                [Msg("bugs.planned.fix_units", arg=FIX_ARG.get(cls, arg), n=n), Msg("bugs.planned.fix_early")]
            ),
        )
    ]


@dataclass(frozen=True)
class UnshuffledThresholds:
    #: batches with class labels needed
    min_batches: int = 10
    #: share of them that hold one class (ordered data: all but none; shuffled, 2 classes and
    #: batch 4: 12.5%)
    share: float = 0.8
    #: a loss jump at a class change quoted as evidence: loss over the median of the 5 steps before
    jump: float = 1.5


UNSHUFFLED = UnshuffledThresholds()


@detector("unshuffled_data", needs=("batch_one_class",))
def unshuffled_data(run: Run, q: Quantities) -> list[Finding]:
    one = run.col("batch_one_class")
    idx = np.flatnonzero(np.isfinite(one))
    if idx.size < UNSHUFFLED.min_batches or one[idx].mean() < UNSHUFFLED.share or not run.has("batch_class"):
        return []
    cls = run.col("batch_class")
    single = idx[(one[idx] > 0.5) & np.isfinite(cls[idx])]
    change = single[1:][cls[single[1:]] != cls[single[:-1]]]
    if not change.size:
        return []
    n_classes = int(np.unique(cls[single]).size)
    evidence: list[str] = [
        Msg(
            "bugs.unshuffled.batches",
            n=int((one[idx] > 0.5).sum()),
            of=int(idx.size),
            k=n_classes,
            changes=int(change.size),
            first=int(run.steps[change[0]]),
        )
    ]
    jump = _worst_jump(q, change)
    if jump is not None:
        evidence.append(jump[1])
    return [
        Finding(
            cause="unshuffled_data",
            symptom="spike" if jump is not None else "oscillation",
            severity="warning",
            confidence=0.9,
            step=int(run.steps[jump[0] if jump is not None else change[0]]),
            evidence=evidence,
            fixes=as_fixes([Msg("bugs.unshuffled.fix"), Msg("bugs.unshuffled.fix_hf")]),
        )
    ]


@dataclass(frozen=True)
class ByLengthThresholds:
    #: consecutive steps whose batch mean length never turns back: transformers' LengthGroupedSampler
    #: sorts within mega-batches of 50 batches (a deliberate run of <= 50, then a jump); shuffled
    #: batches turn back every other step (a run of 64 by chance: 2^-63)
    min_run: int = 64
    #: and the lengths grow (or shrink) this much along it: fixed-length or packed batches tie
    #: at every step, which is no order
    min_ratio: float = 1.5


BY_LENGTH = ByLengthThresholds()


def _monotone_run(x: np.ndarray) -> tuple[int, int, int]:
    """(start, end, direction +1/-1) of the longest stretch of x that never turns back (ties allowed)."""
    d = np.sign(np.diff(x))
    best = (0, 0, 1)
    for sign in (1, -1):
        start = 0
        for i, v in enumerate(d.tolist()):
            if v == -sign:
                start = i + 1
            elif i + 1 - start > best[1] - best[0]:
                best = (start, i + 1, sign)
    return best


@detector("unshuffled_by_length", needs=("batch_tokens_mean",))
def unshuffled_by_length(run: Run, q: Quantities) -> list[Finding]:
    """Batches whose mean length rises (or falls) at every step for `min_run` steps: a dataset
    sorted by length and read in order (the DataLoader without shuffle=True)."""
    tok = run.col("batch_tokens_mean")
    idx = np.flatnonzero(np.isfinite(tok) & (tok > 0))
    if idx.size < BY_LENGTH.min_run:
        return []
    a, b, sign = _monotone_run(tok[idx])
    lo, hi = sorted((float(tok[idx[a]]), float(tok[idx[b]])))
    if b - a + 1 < BY_LENGTH.min_run or hi < BY_LENGTH.min_ratio * lo:
        return []
    first = int(run.steps[idx[a]])
    key = "bugs.unshuffled.by_length.rises" if sign > 0 else "bugs.unshuffled.by_length.falls"
    evidence: list[str] = [Msg(key, n=int(b - a + 1), first=first, lo=lo, hi=hi)]
    return [
        Finding(
            cause="unshuffled_data",
            symptom="slow_convergence",
            severity="warning",
            confidence=0.9,
            step=first,
            evidence=evidence,
            fixes=as_fixes([Msg("bugs.unshuffled.fix_length")]),
        )
    ]


def _worst_jump(q: Quantities, change: np.ndarray) -> tuple[int, Msg] | None:
    """The largest loss jump at a class change (row, sentence), when one is above UNSHUFFLED.jump."""
    best = None
    for i in change:
        before = q.loss[max(0, i - 5) : i]
        before = before[np.isfinite(before)]
        if not before.size or not np.isfinite(q.loss[i]) or np.median(before) <= 0:
            continue
        x = float(q.loss[i] / np.median(before))
        if x >= UNSHUFFLED.jump and (best is None or x > best[0]):
            best = (x, int(i), float(np.median(before)))
    if best is None:
        return None
    x, i, base = best
    return i, Msg("bugs.unshuffled.jump", s=int(q.steps[i]), loss=float(q.loss[i]), x=x, base=base)


@dataclass(frozen=True)
class CopyThresholds:
    #: measured steps needed (sampled steps) and how many of the last ones are judged
    min_measured: int = 3
    last: int = 3
    #: share of positions predicted as their own input (a trained copier: ~1; a next-token model:
    #: the repeat rate of its data, 1-2% on the zoo's Markov chains; measured default)
    copy: float = 0.8
    #: the loss at the end, as a share of chance ln V (a copier ends near 0)
    below_chance: float = 0.1


COPY = CopyThresholds()


@detector("labels_not_shifted", needs=("out_copy_frac", "loss"))
def labels_not_shifted(run: Run, q: Quantities) -> list[Finding]:
    c = run.col("out_copy_frac")
    idx = np.flatnonzero(np.isfinite(c))
    if idx.size < COPY.min_measured or not q.finite_loss.size:
        return []
    frac = float(np.median(c[idx[-COPY.last :]]))
    chance = run.meta.get("chance_loss") if isinstance(run.meta, dict) else None
    if not isinstance(chance, (int, float)) or chance <= 0:
        k = run.col("out_classes") if run.has("out_classes") else None
        kk = k[np.isfinite(k)] if k is not None else np.array([])
        chance = math.log(float(np.median(kk))) if kk.size and np.median(kk) > 1 else None
    y = q.loss[q.finite_loss]
    end = float(np.median(y[-max(1, y.size // 10) :]))
    if frac < COPY.copy or chance is None or end > COPY.below_chance * chance:
        return []
    evidence: list[str] = [
        Msg("bugs.copy.frac", pct=100 * frac, step=int(run.steps[idx[-1]])),
        Msg("bugs.copy.loss", end=end, chance=float(chance), pct=100 * end / chance),
    ]
    return [
        Finding(
            cause="labels_not_shifted",
            symptom="zero_loss",
            severity="critical",
            confidence=0.9,
            step=int(run.steps[idx[0]]),
            evidence=evidence,
            fixes=as_fixes([Msg("bugs.copy.fix_shift"), Msg("bugs.copy.fix_hf")]),
        )
    ]


@dataclass(frozen=True)
class EvalModeThresholds:
    #: steps with the flag needed, and the share of them in eval mode (a loop that forgot
    #: model.train() after its first validation pass is in eval mode from then on)
    min_steps: int = 10
    share: float = 0.5


EVAL_MODE = EvalModeThresholds()


@detector("eval_mode_training", needs=("train_mode",))
def eval_mode_training(run: Run, q: Quantities) -> list[Finding]:
    m = run.col("train_mode")
    idx = np.flatnonzero(np.isfinite(m))
    if idx.size < EVAL_MODE.min_steps:
        return []
    ev = idx[m[idx] < 0.5]
    if ev.size < EVAL_MODE.share * idx.size:
        return []
    first = int(run.steps[ev[0]])
    return [
        Finding(
            cause="eval_mode_training",
            symptom="slow_convergence",
            severity="warning",
            confidence=0.9,
            step=first,
            evidence=[Msg("bugs.eval.seen", n=int(ev.size), of=int(idx.size), first=first)],
            fixes=as_fixes([Msg("bugs.eval.fix")]),
        )
    ]


@dataclass(frozen=True)
class BroadcastThresholds:
    #: steps with output shape and target variance needed
    min_steps: int = 5
    #: the loss over the targets' variance at the end: a broadcast MSE is >= 1 (it is Var(y) plus
    #: the predictions' spread around the mean); a model that learns ends far below (measured on
    #: the zoo's regression: < 0.1)
    ratio: float = 0.8
    #: relative distance within which the reported loss is one of the two measured MSEs: both are
    #: computed in fp32 from the same output and target, so a mean loss agrees with its own to ~1e-7
    same_loss: float = 1e-4
    #: and the other MSE at least this far away, relatively, or the two cannot be told apart: they
    #: differ by 2 Cov(prediction, target), zero for a model that has not learned at all and for the
    #: broadcast bug alike (its gradient does not correlate the two); a model learning through the
    #: elementwise loss is 4e-4 to 1e-1 away from the broadcast one within tens of steps (measured on
    #: tests/test_loop_bugs.py's regressions, targets' mean 0 to 50). Any value above `same_loss`
    #: cannot mistake one for the other (only the loss's own MSE agrees with it to float precision);
    #: a larger one only leaves more runs to the level rule
    apart: float = 3e-4
    #: the elementwise MSE over the broadcast one below which the predictions follow their own
    #: targets: the two differ by 2 Cov(prediction, target), which a broadcast loss's gradient never
    #: builds (the bug keeps them within `apart`), so a model whose output tracks its targets this
    #: well learned through a loss that pairs them, whatever that loss is (a BCE on a (B, 1) head
    #: squeezed in the loop: 0.2-0.35 by the end; the zoo's broadcast runs stay at ~1.0)
    learned: float = 0.8
    #: the first step whose sampled MSEs and loss level are read as what the model learned: the
    #: monitor samples steps 0-4 densely, before any model has learned anything, so a run judged
    #: at step 25 would read "the end" from its first steps (the zoo's squeezed heads: elementwise
    #: over broadcast MSE 0.93 over steps 2-20, 0.45-0.77 over steps 10-50; an unscaled target's
    #: loss 100x its variance, the mean not yet learned). What the loss *is* (one MSE to float
    #: precision) is a fact of its shapes at any step and is read from every sample
    settled: int = 10
    #: where the loss is one of the two MSEs but they are too close to say which (a model that has
    #: learned nothing yet, or the bug), the loss over the targets' variance above which the level
    #: rule waits: a broadcast MSE is Var(y) + Var(pred) + (mean error)^2 and its gradient learns
    #: the mean first, the one thing it can (the zoo's broadcast runs: 0.97-1.2 from step 0); far
    #: above, the loss is an unlearned mean, which every model carries at first (an unscaled target
    #: squeezed in the loop: 20-100x for 50 steps while the MSEs cannot yet be told apart)
    undecided_ceiling: float = 4.0


BROADCAST = BroadcastThresholds()


def _tracks_targets(run: Run, idx: np.ndarray) -> bool | None:
    """The predictions follow their own targets at the sampled steps: the median elementwise MSE is
    `learned` times the broadcast one or less (a loss that is neither MSE can still be told apart
    this way, since only a loss that pairs prediction and target builds the covariance). None: the
    MSEs were measured, but on too few steps past the start to say yet (the covariance is learned);
    False also where they were never measured (the level rule alone decides then)."""
    e, b = run.col("mse_elementwise")[idx], run.col("mse_broadcast")[idx]
    ok = np.isfinite(e) & np.isfinite(b) & (b > 0)
    if not ok.any():
        return False
    ok &= run.steps[idx] >= BROADCAST.settled
    if int(ok.sum()) < BROADCAST.min_steps:
        return None
    return bool(np.median(e[ok]) <= BROADCAST.learned * np.median(b[ok]))


def _which_mse(run: Run, q: Quantities, idx: np.ndarray) -> tuple[str, dict[str, float]] | None:
    """ "broadcast" or "elementwise": which measured MSE the reported loss is at the sampled steps
    (their median relative distances), with the medians for the evidence; "undecided" when the loss
    is one of them but the other is too close to say which (no covariance either way yet); None
    when unmeasured or neither (another loss, a weighted sum)."""
    e, b = run.col("mse_elementwise")[idx], run.col("mse_broadcast")[idx]
    ok = np.isfinite(e) & np.isfinite(b) & (np.abs(q.loss[idx]) > 0)
    if int(ok.sum()) < BROADCAST.min_steps:
        return None
    loss = q.loss[idx][ok]
    de, db = np.median(np.abs(e[ok] - loss) / np.abs(loss)), np.median(np.abs(b[ok] - loss) / np.abs(loss))
    medians = {
        "loss": float(np.median(loss)),
        "elementwise": float(np.median(e[ok])),
        "broadcast": float(np.median(b[ok])),
        "n": int(ok.sum()),
    }
    for kind, near, far in (("broadcast", db, de), ("elementwise", de, db)):
        if near <= BROADCAST.same_loss and far >= BROADCAST.apart:
            return kind, medians
    if min(de, db) <= BROADCAST.same_loss:
        return "undecided", medians  # the loss is one of them, the other too close to say which
    return None


@detector("loss_broadcast", needs=("out_last_dim", "target_var", "loss"))
def loss_broadcast(run: Run, q: Quantities) -> list[Finding]:
    rank, last, var = run.col("out_rank"), run.col("out_last_dim"), run.col("target_var")
    idx = np.flatnonzero(np.isfinite(rank) & np.isfinite(last) & np.isfinite(var) & (var > 0) & np.isfinite(q.loss))
    if idx.size < BROADCAST.min_steps or not np.all((rank[idx] == 2) & (last[idx] == 1)):
        return []
    tail = idx[-max(1, idx.size // 3) :]
    measured = _which_mse(run, q, idx[-max(BROADCAST.min_steps, idx.size // 3) :])
    if measured is not None and measured[0] == "elementwise":
        return []  # the loss is the sample-by-sample MSE, learning: the shapes do not broadcast in it
    decided = measured is not None and measured[0] == "broadcast"
    if not decided:
        settled = idx[run.steps[idx] >= BROADCAST.settled]
        tracks = _tracks_targets(run, settled[-max(BROADCAST.min_steps, settled.size // 3) :])
        if tracks is None or tracks:  # not yet known (held: the end may show it learned), or it does
            return []  # another loss (a BCE, a weighted sum) that pairs each prediction with its target
    r = float(np.median(q.loss[tail] / var[tail]))
    if not decided and (r < BROADCAST.ratio or (measured is not None and r > BROADCAST.undecided_ceiling)):
        return []  # below the floor; or an MSE far above it, the mean not learned yet: no sign either way
    evidence: list[str] = [Msg("bugs.broadcast.shapes")]
    if decided and measured is not None:
        evidence.append(Msg("bugs.broadcast.measured", **measured[1]))
    evidence.append(
        Msg("bugs.broadcast.floor", loss=float(np.median(q.loss[tail])), var=float(np.median(var[tail])), r=r)
    )
    return [
        Finding(
            cause="loss_broadcast",
            symptom="plateau",
            severity="warning",
            confidence=0.95 if decided else 0.85,
            step=int(run.steps[idx[0]]),
            evidence=evidence,
            fixes=as_fixes([Msg("bugs.broadcast.fix")]),
        )
    ]


@dataclass(frozen=True)
class ClipThresholds:
    #: sampled steps needed
    min_steps: int = 5
    #: applied / backward norm below which the clip is "tiny": every update divided by 20 or more
    #: (a max_norm of 1.0 on a norm of ~0.5-5 gives 1 or 0.2-1; measured default)
    factor: float = 0.05
    #: share of sampled steps clipped that hard
    share: float = 0.8


CLIP = ClipThresholds()
#: layouts whose optimizer sees this rank's shard of each gradient (DDP's is the reduced whole; a pipeline
#: stage's optimizer sees its own stage's parameters only)
SHARDED = ("fsdp2", "tp", "fsdp1", "deepspeed", "pp")
_ADAPTIVE = ("adam", "adafactor", "rmsprop", "adagrad", "adadelta", "lion", "lamb", "sophia", "shampoo")


@detector("grad_clip_too_tight", needs=("grad_norm_applied", "grad_norm"))
def grad_clip_too_tight(run: Run, q: Quantities) -> list[Finding]:
    opt = q.optimizer  # (a string or {"class": ...} in meta.json)
    if not opt or any(a in opt for a in _ADAPTIVE):
        return []
    # the applied norm is this rank's shard (FSDP2, TP): compared with this rank's norm then, not
    # the total over ranks (which reads as clipping by ~sqrt(world size))
    dist = run.meta.get("distributed") if isinstance(run.meta, dict) else None
    sharded = isinstance(dist, dict) and dist.get("kind") in SHARDED and run.has("grad_norm_local")
    ap, gn = run.col("grad_norm_applied"), run.col("grad_norm_local" if sharded else "grad_norm")
    idx = np.flatnonzero(np.isfinite(ap) & np.isfinite(gn) & (gn > 0))
    if idx.size < CLIP.min_steps:
        return []
    ratio = ap[idx] / gn[idx]
    tight = ratio < CLIP.factor
    if tight.mean() < CLIP.share:
        return []
    max_norm = float(np.median(ap[idx][tight]))
    p95 = float(np.percentile(gn[idx], 95))
    evidence: list[str] = [
        Msg(
            "bugs.clip.tight",
            n=int(tight.sum()),
            of=int(idx.size),
            applied=max_norm,
            norm=float(np.median(gn[idx])),
            x=float(1 / np.median(ratio)),
        )
    ]
    return [
        Finding(
            cause="grad_clip_too_tight",
            symptom="slow_convergence",
            severity="warning",
            confidence=0.85,
            step=int(run.steps[idx[0]]),
            evidence=evidence,
            fixes=[Fix.clip(Msg("bugs.clip.fix", p95=p95, now=max_norm), max_norm=p95)],
        )
    ]
