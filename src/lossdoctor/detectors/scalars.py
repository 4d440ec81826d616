"""Evidence from the scalars people already log (loss, grad norm, LR), scaled to how much log there is.

The other detectors need tens to hundreds of points before their statistics mean anything. A user
who pastes six lines of a log still deserves the answer those six lines support: a gradient norm
that grew x4000 in five steps while the loss doubled is an explosion at any length, a loss that sits
at exactly ln(100) at every step learns nothing, a flat loss at LR 1e-6 is the LR. And where the log
cannot support a verdict, `coverage` says so (status `inconclusive`) instead of `healthy`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from ..findings import Finding, Fix, FixLike, as_fixes
from ..messages import Msg
from ..records import Run
from .base import detector
from .gradients import already_clipped_fix, clip_in_place
from .learning_rate import shows_run_start
from .loss_shape import is_spike, robust_sigma, spike_fixes
from .lr_advice import cut_evidence, lr_beyond_usual, measure_fix, withheld
from .lr_usual import judge_lr, with_lr_evidence
from .quantities import Quantities

#: fewer finite loss points than this: the length-hungry checks (spikes 40, late divergence 20,
#: plateaus 100) did not run, and the report says so
SHORT_LOG = 50
#: class counts whose ln is a common chance level (binary .. LLM vocabularies; 101, 365, 400, 600:
#: UCF101/Food-101, Places365, Kinetics-400/600)
COMMON_K = (
    2,
    3,
    4,
    5,
    6,
    8,
    10,
    16,
    20,
    32,
    64,
    100,
    101,
    128,
    200,
    256,
    365,
    400,
    600,
    1000,
    1024,
    10000,
    21128,
    30522,
    32000,
    32128,
    32768,
    49152,
    50257,
    50304,
    65024,  # Falcon
    65536,
    100277,
    128256,
    151936,
    152064,
    250002,
    256000,
)
#: an LR this small makes an Adam-family step ~1e-6 of a unit weight: nothing moves in a short run
TINY_LR = 1e-5


#: a progress bar may redraw the same values for a while between refreshes late in a run (the
#: Colab-era Lightning bar, logging every 50 steps by default): identical bar values over fewer
#: consecutive steps than this, past the run's first this many steps, are no frozen model
BAR_CADENCE = 50


def bar_redraw(run: Run, q: Quantities, n: int) -> bool:
    """The n finite losses are progress-bar points past the run's first BAR_CADENCE steps,
    consecutive and over fewer than BAR_CADENCE steps: what a bar may redraw between refreshes. (At
    the run's start the first updates move the loss most: identical values there are no redraw.)"""
    lf = q.finite_loss
    if lf.size == 0:
        return False
    span = int(q.steps[lf[-1]] - q.steps[lf[0]])
    return (
        run.meta.get("framework") == "tqdm"
        and span < BAR_CADENCE
        and span <= 2 * max(1, n - 1)
        and int(q.steps[lf[0]]) >= BAR_CADENCE
    )


def chance_level(run: Run, level: float) -> tuple[float, str | Msg] | None:
    """The chance-level loss `level` sits at: the run's own (`chance_loss` in its meta) or ln K of a
    common class count K, within 0.2%. None when it matches neither."""
    chance = run.meta.get("chance_loss")
    cands: list[tuple[float, str | Msg]] = []
    if isinstance(chance, (int, float)) and chance > 0:
        cands.append((float(chance), Msg("scalars.flat.run_chance")))
    cands += [(math.log(k), f"ln({k})") for k in COMMON_K]
    for c, name in cands:
        if abs(level - c) <= 0.002 * c + 1e-4:
            return c, name
    return None


#: what one saturated sample costs, as a range: a binary cross-entropy clamps log(p). Keras clips p to
#: [1e-7, 1 - 1e-7] in float32, where 1 - 1e-7 rounds to 1 - 2^-23 (a 1 predicted for a 0 costs -ln 2^-23 =
#: 15.9424, a 0 predicted for a 1 costs -ln 1e-7 = 16.1181: the classic `loss: 15.9424`); torch's BCELoss
#: clamps log p at -100 on either side
SATURATED_COSTS = ((-math.log(2.0**-23), -math.log(1e-7)), (100.0, 100.0))
#: the level matches (1 - accuracy) x a clamp within this share: both are printed to 4 digits
CLAMP_SHARE_TOL = 2e-3
#: logged points of one accuracy the identity needs (one could be a coincidence of digits)
CLAMP_SHARE_POINTS = 2


def clamped_share(run: Run, q: Quantities, level: float) -> Msg | None:
    """The flat `level` is (1 - accuracy) x what a saturated sample costs (`SATURATED_COSTS`) at a constant
    accuracy: every sample's output sits at exactly 1 (or 0), so each sample of the other class pays the
    clamp and the rest nothing. A softmax over one output unit (always 1) gives it from the first step:
    4.4380 = 0.2753 x 16.1181 beside accuracy 0.7247."""
    if not level > 0 or not run.has("accuracy"):
        return None
    acc = run.col("accuracy")[q.finite_loss]
    acc = acc[np.isfinite(acc)]
    if acc.size < CLAMP_SHARE_POINTS or float(np.ptp(acc)) != 0.0 or not 0 < float(acc[0]) < 1:
        return None
    share = 1.0 - float(acc[0])
    cost = level / share
    return clamped_share_msg(level, share, cost) if saturated_cost(np.array([cost])).all() else None


def saturated_cost(cost: np.ndarray) -> np.ndarray:
    """Which of `cost` (a loss over its error rate: what each wrong sample cost) is one saturated sample's
    cost (`SATURATED_COSTS`), within `CLAMP_SHARE_TOL` (both numbers are printed to 4 digits)."""
    return np.logical_or.reduce(
        [(cost >= lo * (1 - CLAMP_SHARE_TOL)) & (cost <= hi * (1 + CLAMP_SHARE_TOL)) for lo, hi in SATURATED_COSTS]
    )


def clamped_share_msg(level: float, share: float, cost: float) -> Msg:
    """The identity as printed: the digits show it (4.438 = 0.2753 x 16.1181)."""
    return Msg("diff.ev.clamped_share", level=f"{level:.6g}", share=f"{share:.6g}", clamp=f"{cost:.6g}")


def _at_chance(level: float, chance: float, name: str | Msg) -> Msg:
    if getattr(name, "key", None) == "scalars.flat.run_chance":  # the run's own: no formula to name
        return Msg("scalars.flat.chance_run", level=level, chance=chance)
    return Msg("scalars.flat.chance", level=level, name=name, chance=chance)


def _lr_reached(q: Quantities, rows: np.ndarray) -> tuple[float | None, bool]:
    """The largest LR logged on `rows` (a warm-up's tiny first LRs are not the LR the run uses),
    and whether it is still climbing (last >= 1.5x first: a warm-up, too early to judge a plateau)."""
    lr = q.lr[rows]
    lr = lr[np.isfinite(lr)]
    if not lr.size:
        return None, False
    return float(lr.max()), bool(lr[-1] >= 1.5 * lr[0] and lr[-1] > 0)


#: LR x gradient norm at or below this is an SGD step that moves the whole model by ~nothing
TINY_SGD_STEP = 2e-5


def _median_se(a: np.ndarray, b: np.ndarray) -> float:
    """Standard error of the difference of two medians (robust: from the MADs), so that a flat
    but noisy loss (small batches, regression) is not read as falling."""

    def one(x: np.ndarray) -> float:
        mad = float(np.median(np.abs(x - np.median(x))))
        return 1.2533 * 1.4826 * mad / math.sqrt(max(1, x.size))

    return math.hypot(one(a), one(b))


def _tiny_sgd_step(run: Run, q: Quantities, lf: np.ndarray, lr: float | None, gn: np.ndarray) -> float | None:
    """LR x median gradient norm when it is at most TINY_SGD_STEP on a log that covers the run's
    start (>= 10 gradient norms), unless the optimizer is known to be Adam-like (whose step does not
    scale with the gradient). None otherwise."""
    if lr is None or lr <= 0 or gn.size < 10 or q.adam_like:
        return None
    if int(q.steps[lf[0]]) > 0.05 * max(1, int(q.steps[lf[-1]])) or not shows_run_start(run, q):
        # a log that starts mid-run (by its steps, or by the epoch its reader saw at its start, where
        # its steps are line numbers): its flat stretch may follow a fall it does not show, and its
        # LR may be a schedule's decayed end
        return None
    step = lr * float(np.median(gn))
    return step if 0 < step <= TINY_SGD_STEP else None  # a zero gradient is another story


#: a training accuracy whose last third's median is at least this much above its first third's (relative),
#: and by more than 3 standard errors of the two medians, climbs: the model learns (fairseq's accuracy
#: 27.4 -> 36.4 over ten prints while its loss printed 0.264 -> 0.261)
ACC_CLIMB = 0.1
#: ... over at least this many accuracy points, and by this many standard errors of the two medians
ACC_POINTS = 10
ACC_SE = 3.0


def _accuracy_climbs(run: Run, rows: np.ndarray) -> bool:
    """The training accuracy logged on `rows` climbs over them (`ACC_CLIMB`)."""
    if not run.has("accuracy"):
        return False
    a = run.col("accuracy")[rows]
    a = a[np.isfinite(a)]
    if a.size < ACC_POINTS:
        return False
    first, last, se = _thirds(a)
    return first > 0 and last >= (1 + ACC_CLIMB) * first and last - first > ACC_SE * se


def _thirds(x: np.ndarray) -> tuple[float, float, float]:
    """(median of the first third, of the last third, standard error of their difference: `_median_se`),
    thirds of at least two points: how a flat loss and a climbing accuracy are told from their noise."""
    k = max(2, x.size // 3)
    return float(np.median(x[:k])), float(np.median(x[-k:])), _median_se(x[:k], x[-k:])


@detector("flat_loss", needs=("loss",))
@with_lr_evidence
def flat_loss(run: Run, q: Quantities) -> list[Finding]:
    """The loss does not move from the start, judged on as few as 10 points when the log says why:
    an LR of 0 (the schedule), a tiny LR (<= 1e-5 at its largest, an SGD step LR x grad norm
    <= 2e-5, or an LR far below what is usual for the optimizer the run's configuration names:
    too low), a gradient norm of exactly 0 or a loss exactly constant across batches (the weights
    do not change), or a loss at exactly chance for >= 30 points (learns nothing; then a ranked
    differential, since labels unrelated to their inputs and an update that does not reach the
    weights fit alike; an LR far above what is usual for the named optimizer ranks first).

    A flat loss with none of these is left to the `inconclusive` verdict on a short log (a few
    flat points are also how a healthy run starts) and to `noisy_data` on a long one; so are long
    logs (>= 100 points) unless the LR is tiny (or, at chance, far above usual), which `noisy_data`
    would misread as noisy labels. Silent when the loss falls >= 3% from the first third to the
    last and by more than 3 standard errors of the medians (batch noise is not a fall), and when
    it converged to <= 5% of its start."""
    lf = q.finite_loss
    n = lf.size
    if n < 10 or q.first_bad is not None:
        return []
    x = q.loss[lf]
    first, last, se = _thirds(x)
    se = se if n >= 30 else 0.0
    if first <= 0 or (last < 0.97 * first and first - last > 3 * se) or last <= 0.05 * q.loss_start:
        return []  # it fell, or it converged (to <= 5% of its start) within the first third
    if _accuracy_climbs(run, lf):
        return []  # the model gets better at its task while the loss's print hardly moves: it learns
    f = _flat_facts(run, q, lf, x)
    if f.lr == 0 and not shows_run_start(run, q):
        return []  # a schedule's end: its LR reached 0, nothing moves by design (`learning_rate.lr_schedule_error`)
    s0 = int(q.steps[lf[0]])
    ev: list[str] = [Msg("scalars.flat.what", n=int(n), s0=s0, s1=int(q.steps[lf[-1]]), first=first, last=last)]
    if last < 0.97 * first:
        ev.append(Msg("scalars.flat.noise", first=first, last=last, se=se))
    if f.chance:
        ev.append(_at_chance(f.level, *f.chance))
    if f.constant:
        ev.append(Msg("scalars.flat.constant", spread=f.spread))
    if n >= 100 and not (f.tiny_lr or f.no_update or (f.chance and f.verdict == "high")):
        return []
    judged = _flat_cause(f, int(n))
    if judged is None:
        return []
    cause, conf, said, fixes = judged
    return [
        Finding(
            cause=cause,
            symptom="plateau" if f.chance or f.constant else "slow_convergence",
            severity="warning",
            confidence=conf,
            step=s0,
            evidence=ev + said,
            fixes=as_fixes(fixes),
        )
    ]


def _tiny_at_its_peak(run: Run, q: Quantities, lr: float | None) -> bool:
    """The largest LR logged is at most TINY_LR, in a log that shows the run's start or whose
    configured LR is that small too. An excerpt from late in a run (epoch 148 at LR 1e-5) shows a
    schedule's tail: its peak came before the excerpt, and a flat loss there is what decay does."""
    if lr is None or not 0 < lr <= TINY_LR:
        return False
    configured = run.meta.get("config_lr")
    tiny_config = isinstance(configured, (int, float)) and 0 < configured <= TINY_LR
    return shows_run_start(run, q) or bool(tiny_config)


@dataclass
class _Flat:
    """What a flat loss's log says about why it is flat (see `flat_loss`)."""

    lr: float | None  # the largest LR logged
    warming: bool  # the LR is still climbing
    gn: np.ndarray  # the finite gradient norms
    step: float | None  # an SGD step LR x grad norm that moves nothing (`_tiny_sgd_step`)
    verdict: str | None  # the LR against what is usual for the optimizer ("low" / "usual" / "high")
    tiny_lr: bool
    level: float  # the median loss
    spread: float
    constant: bool  # exactly the same loss at every step
    chance: tuple[float, str | Msg] | None  # the chance level the loss sits at, and its name
    clamped_share: Msg | None  # the level is (1 - accuracy) x a cross-entropy clamp (`clamped_share`)
    zero_grad: bool
    measured: int  # steps where watch measured the update size or the parameter norm
    no_update: bool  # and the weights never changed


def _flat_facts(run: Run, q: Quantities, lf: np.ndarray, x: np.ndarray) -> _Flat:
    """The facts `_flat_cause` weighs, read from the rows `lf` of finite losses `x`."""
    lr, warming = _lr_reached(q, lf)
    gn = q.grad_norm[lf]
    gn = gn[np.isfinite(gn)]
    step = _tiny_sgd_step(run, q, lf, lr, gn)
    judged = judge_lr(run, q, lr)
    verdict = judged[0] if judged else None
    tiny_lr = _tiny_at_its_peak(run, q, lr) or step is not None or verdict == "low"
    level = float(np.median(x))
    spread = float(np.max(x) - np.min(x))
    chance = chance_level(run, level) if float(np.max(np.abs(x - level))) <= 0.02 * level else None
    ur = run.col("update_ratio")[lf]
    ur = ur[np.isfinite(ur)]
    pn = run.col("param_norm")[lf]
    pn = pn[np.isfinite(pn)]
    # watch measured it: the weights never changed (an update ratio of 0, or a parameter norm that
    # is the same to the last bit at every step)
    no_update = (ur.size >= 5 and float(np.max(ur)) == 0.0) or (
        pn.size >= 5 and float(np.ptp(pn)) == 0.0 and float(pn[0]) > 0
    )
    return _Flat(
        lr=lr,
        warming=warming,
        gn=gn,
        step=step,
        verdict=verdict,
        tiny_lr=tiny_lr,
        level=level,
        spread=spread,
        constant=spread <= 1e-4 * max(level, 1e-3) and not bar_redraw(run, q, x.size),
        chance=chance,
        clamped_share=clamped_share(run, q, level) if spread == 0 else None,
        zero_grad=gn.size >= 3 and float(np.max(gn)) <= 1e-8,
        measured=int(max(ur.size, pn.size)),
        no_update=no_update,
    )


def _flat_cause(f: _Flat, n: int) -> tuple[str, float, list[str], list[str]] | None:
    """(cause, confidence, the evidence that names it, the fixes) for a flat loss, the first rule
    that fits in order of how directly the log shows it; None when none fits."""
    return _flat_update_cause(f, n) or _flat_shape_cause(f, n)


_FlatCause = tuple[str, float, list[str], list[str]]


def _flat_update_cause(f: _Flat, n: int) -> _FlatCause | None:
    """The rules that read the update itself (an LR of 0, no update measured, an LR too small to
    move the weights): the most direct evidence a flat loss can have."""
    lr = f.lr
    at_most_tiny = lr is not None and lr <= TINY_LR
    if lr is not None and lr == 0:
        return "lr_schedule_error", 0.8, [Msg("scalars.flat.lr_zero")], [Msg("scalars.flat.fix_lr_zero")]
    if f.no_update:
        g = float(np.median(f.gn)) if f.gn.size else Msg("scalars.word.unknown")
        return (
            "frozen_model",
            0.85,
            [Msg("scalars.flat.no_update", k=f.measured, g=g)],
            [Msg("scalars.flat.fix_rebuild_optimizer")],
        )
    if f.tiny_lr and f.step is not None and not at_most_tiny:
        return (
            "lr_too_low",
            0.6,
            [Msg("scalars.flat.tiny_step", step=f.step, lr=lr, g=float(np.median(f.gn)))],
            [Msg("scalars.flat.fix_raise_sgd", lr=lr)],
        )
    if f.tiny_lr and f.verdict == "low" and not at_most_tiny:
        # with_lr_evidence adds the sentence that says so
        return "lr_too_low", 0.6, [], [Msg("scalars.flat.fix_raise_usual", lr=lr)]
    if f.tiny_lr:
        return "lr_too_low", 0.75, [Msg("scalars.flat.tiny_lr", lr=lr, n=n)], [Msg("scalars.flat.fix_raise", lr=lr)]
    return None


def _flat_shape_cause(f: _Flat, n: int) -> _FlatCause | None:
    """The rules that read the flat loss's shape (no gradient, a constant to the last digit, a level
    at chance): each a ranked differential, since the shape alone rarely tells the causes apart."""
    labels, frozen = Msg("scalars.alt.labels"), Msg("scalars.alt.frozen")
    low = Msg(
        "scalars.alt.lr_low",
        lr=Msg("scalars.alt.lr_value", lr=f.lr) if f.lr is not None else Msg("scalars.alt.lr_unlogged"),
    )
    tell = Msg("scalars.flat.tell")
    overfit = Msg("scalars.fix.overfit")
    watch = Msg("scalars.fix.watch_update_size")
    if f.zero_grad:
        return (
            "frozen_model",
            0.6,
            [Msg("scalars.flat.zero_grad", k=int(f.gn.size))],
            [Msg("scalars.flat.fix_requires_grad"), overfit],
        )
    if f.clamped_share is not None:
        return (
            "wrong_loss",
            0.6,
            [
                f.clamped_share,
                Msg("scalars.flat.ranked", a=Msg("scalars.alt.saturated"), b=frozen, c=labels, tell=tell),
            ],
            [Msg("scalars.flat.fix_binary_output"), overfit],
        )
    if f.constant:
        # unrelated labels still let the model learn their frequencies: the loss would wander
        # across batches, not repeat to the last digit
        return "frozen_model", 0.5, [Msg("scalars.flat.ranked", a=frozen, b=low, c=labels, tell=tell)], [overfit, watch]
    if f.chance and n >= 30 and not f.warming and f.verdict == "high":
        # the LR is far above what is usual for the run's optimizer: first steps that large
        # saturate a model at chance (with_lr_evidence adds the sentence that says so)
        return (
            "lr_too_high",
            0.5,
            [Msg("scalars.flat.ranked_lr_high", a=labels, b=frozen)],
            [Msg("scalars.fix.lower_lr_warmup"), overfit],
        )
    if f.chance and n >= 30 and not f.warming:
        return (
            "noisy_data",
            0.4,
            [Msg("scalars.flat.equal", a=labels, b=frozen, c=low, tell=tell)],
            [watch, overfit, Msg("scalars.fix.audit_labels")],
        )
    return None


#: finite steps a run must have trained before a non-finite step counts as sudden
SUDDEN_AFTER = 20


@detector("sudden_nonfinite", needs=("loss",))
def sudden_nonfinite(run: Run, q: Quantities) -> list[Finding]:
    """A run that trained normally goes non-finite from one step to the next with no sign before
    it: >= 20 finite steps, then a NaN/Inf loss or gradient norm while the last 5 losses before it
    stayed in their range (giving back < 20% of the progress made, < 1.5x the recent median), the
    last 3 gradient norms stayed < 5x their recent median or below the largest norm seen before
    (a converged model's norms jump x10 from one batch to the next near 1e-6), and the LR did not
    jump. A too-high LR
    diverges first and an explosion builds up over steps; what breaks one step without warning is
    most often the batch of that step. Named `nonfinite_data` at a confidence that says it is the
    likeliest of three (the evidence lists them and the one look that separates them). Silent on a
    run `watch` recorded (its direct evidence names the cause), and when the gradient norm is
    exactly 0 at that step (a mean over zero supervised tokens, which
    `label_mask_empty` names)."""
    i = q.first_bad
    if i is None or _has_direct_evidence(run):
        return []
    lf = q.finite_loss[q.finite_loss < i]
    if lf.size < SUDDEN_AFTER:
        return []
    gn = q.grad_norm
    if run.has("grad_norm") and np.isfinite(gn[i]) and gn[i] == 0:
        return []
    x = q.loss[lf]
    recent, tail = x[-25:-5] if x.size >= 25 else x[:-5], x[-5:]
    base = float(np.median(recent))
    start = q.loss_start
    progress = max(start - base, 0.0)
    worst = float(np.max(tail))
    if worst > max(1.5 * base, base + 0.2 * progress, float(np.max(recent))):
        return []  # the loss was rising: divergence, which the LR and explosion rules date
    ev: list[str] = [
        Msg("scalars.sudden_nan.what", step=int(q.steps[i]), n=int(lf.size)),
        Msg("scalars.sudden_nan.loss_calm", loss=float(x[-1]), med=base),
    ]
    g = gn[:i][np.isfinite(gn[:i])]
    conf = 0.45
    if g.size >= 10:
        g_med, g_last = float(np.median(g[-25:-3])), float(np.max(g[-3:]))
        if g_med > 0 and g_last >= 5 * g_med and g_last > float(np.max(g[:-3])):
            return []  # a gradient surge beyond anything seen before: the explosion rules' story
        ev.insert(1, Msg("scalars.sudden_nan.grad_calm", g=float(g[-1]), med=g_med))
        conf = 0.5
    lr = q.lr[: i + 1]
    lr_rows = np.flatnonzero(np.isfinite(lr))
    if lr_rows.size >= 2 and lr[lr_rows[-2]] > 0 and lr[lr_rows[-1]] >= 1.5 * lr[lr_rows[-2]]:
        return []  # the LR jumped at that step: the schedule's story
    s = int(q.steps[i])
    ev.append(Msg("scalars.sudden_nan.differential", step=s))
    return [
        Finding(
            cause="nonfinite_data",
            symptom="nonfinite",
            severity="critical",
            confidence=conf,
            step=s,
            batch=s,
            evidence=ev,
            fixes=as_fixes([Msg("scalars.sudden_nan.fix_batch", step=s), Msg("scalars.sudden_nan.fix_watch")]),
        )
    ]


def _has_direct_evidence(run: Run) -> bool:
    """The run holds what `watch` records where a NaN enters (the batch's non-finite samples, the
    first module whose output went non-finite): the direct detectors name the cause from those,
    and an inference from the curve's calm must not outrank them."""
    return bool(
        run.event("fwd_first_nonfinite")
        or run.event("batch_nonfinite_detail")
        or run.event("bwd_first_nonfinite")
        or _has_watch_records(run)
    )


#: a fall of the loss from its first third to its last this many standard errors of the log's own
#: point-to-point scatter is a loss that moved, not one that stands still: a model nothing steps
#: stays within 1 (the zoo's optimizer on a stale copy: -0.6 to 0.7); an unscaled regression that
#: learns its mean slowly fell 22% by step 50, 6.8 of them, within the [0.75, 1.33] band
ACCUMULATING_STILL_Z = 3.0


def _fell_beyond_noise(x: np.ndarray, k: int) -> bool:
    """The loss's last third (median) fell from its first by more than `ACCUMULATING_STILL_Z`
    standard errors of its point-to-point scatter in log space (the robust sigma of the
    differences, over the k points each median stands on)."""
    if (x <= 0).any() or k <= 1:
        return False
    d = np.diff(np.log(x))
    sigma = 1.4826 * float(np.median(np.abs(d - np.median(d))))
    if sigma <= 0:
        return False
    drop = math.log(float(np.median(x[:k])) / float(np.median(x[-k:])))
    se = sigma * math.sqrt(2.0 / k)  # of the difference of two medians of k points each
    return drop > ACCUMULATING_STILL_Z * se


@detector("accumulating_grads", needs=("loss", "grad_norm"))
def accumulating_grads(run: Run, q: Quantities) -> list[Finding]:
    """Gradients that add up from step to step while the loss stands still: the gradient norm grows
    in proportion to the step (correlation >= 0.97, the last sixth's median >= 3x the first's,
    every sixth above the one before) and the loss's last third is within [0.75, 1.33]x its first
    third. That is .grad summing because zero_grad clears other parameters than those the loss
    is computed from (an optimizer holding another copy of the model): nothing is stepped. A
    healthy run's gradient norm may drift up, but not linearly 3x while the loss stays put."""
    if q.first_bad is not None:
        return []
    rows = np.flatnonzero(np.isfinite(q.grad_norm) & np.isfinite(q.loss) & q.loss_logged)
    if rows.size < 30:
        return []
    g, x = q.grad_norm[rows], q.loss[rows]
    sixths = [float(np.median(c)) for c in np.array_split(g, 6)]
    if sixths[0] <= 0 or sixths[-1] < 3 * sixths[0] or any(b <= a for a, b in zip(sixths, sixths[1:])):
        return []
    corr = float(np.corrcoef(q.steps[rows].astype(float), g)[0, 1])
    k = rows.size // 3
    first, last = float(np.median(x[:k])), float(np.median(x[-k:]))
    if corr < 0.97 or first <= 0 or not 0.75 * first <= last <= 1.33 * first:
        return []
    if _fell_beyond_noise(x, k):
        return []  # the loss moved: the weights are stepped, whatever the norm does
    return [
        Finding(
            cause="frozen_model",
            symptom="plateau",
            severity="warning",
            confidence=0.75,
            step=int(q.steps[rows[0]]),
            evidence=[
                Msg("scalars.accumulating.what", g0=sixths[0], g1=sixths[-1], ratio=sixths[-1] / sixths[0], corr=corr),
                Msg("scalars.accumulating.loss", first=first, last=last),
                Msg("scalars.accumulating.why"),
            ],
            # every parameter in the optimizer: what a replay's `unfreeze` applies, so a
            # probe tries it from a snapshot
            fixes=[Fix.unfreeze(Msg("scalars.accumulating.fix_optimizer"))],
        )
    ]


def progress_kind(x: np.ndarray) -> tuple[str, float, float]:
    """How a loss curve is moving: ("nothing" | "slowly" | "converged" | "learning", total fall as a
    share of the first third's median, the last third's fall as a share of the first third's fall).

    nothing: no fall beyond the batch noise. slowly: it falls beyond the noise, by < 30% in all,
    and as fast at the end as at the start (the last third's fall >= half the first third's: no
    bend). stalled: it fell by < 30% and then bent flat. converged: it fell by >= 30% and the last
    third no longer falls beyond its noise. Judged on thirds' medians, so >= 30 points."""
    k = x.size // 3
    a, b, c = x[:k], x[k : 2 * k], x[-k:]
    ma, mb, mc = float(np.median(a)), float(np.median(b)), float(np.median(c))
    if ma <= 0:
        return "learning", 0.0, 0.0
    total = (ma - mc) / ma
    if ma - mc <= 3 * _median_se(a, c) or mc >= 0.97 * ma:
        return "nothing", total, 0.0
    early, late = ma - mb, mb - mc
    bend = late / early if early > 0 else 1.0
    if total < 0.3:
        return ("slowly" if bend >= 0.5 else "stalled"), total, bend
    if late <= 3 * _median_se(b, c):
        return "converged", total, bend
    return "learning", total, bend


@detector("slow_learning", needs=("loss", "lr"))
@with_lr_evidence
def slow_learning(run: Run, q: Quantities) -> list[Finding]:
    """The loss learns slowly (see `progress_kind`: falling beyond its noise but < 30% in all, with
    or without a bend) at an LR that explains it: <= 1e-5, an SGD step LR x grad norm <= 2e-5, or
    far below what is usual for the optimizer the run's configuration names. A falling loss at an
    ordinary LR is a run to train longer, not a fault; >= 50 points, no non-finite step."""
    lf = q.finite_loss
    if lf.size < 50 or q.first_bad is not None:
        return []
    x = q.loss[lf]
    kind, total, bend = progress_kind(x)
    if kind not in ("slowly", "stalled"):
        return []
    lr, warming = _lr_reached(q, lf)
    if lr is None or warming:
        return []
    gn = q.grad_norm[lf]
    gn = gn[np.isfinite(gn)]
    step = _tiny_sgd_step(run, q, lf, lr, gn)
    judged = judge_lr(run, q, lr)
    if not (0 < lr <= TINY_LR or step is not None or (judged and judged[0] == "low")):
        return []
    n_steps = int(q.steps[lf[-1]] - q.steps[lf[0]]) or 1
    ev: list[str] = [
        Msg(
            "scalars.slow.what" if kind == "slowly" else "scalars.slow.stalled",
            total=total,
            n=int(lf.size),
            steps=n_steps,
            bend=bend,
        )
    ]
    if step is not None:
        ev.append(Msg("scalars.flat.tiny_step", step=step, lr=lr, g=float(np.median(gn))))
    elif 0 < lr <= TINY_LR:
        ev.append(Msg("scalars.slow.tiny_lr", lr=lr))
    return [
        Finding(
            cause="lr_too_low",
            symptom="slow_convergence",
            severity="warning",
            confidence=0.6,
            step=int(q.steps[lf[0]]),
            evidence=ev,
            fixes=as_fixes([Msg("scalars.flat.fix_raise_usual", lr=lr)]),
        )
    ]


@detector("skipped_updates", needs=("loss", "grad_norm"))
def skipped_updates(run: Run, q: Quantities) -> list[Finding]:
    """Several non-finite gradient norms while every loss stays finite: those updates were skipped
    (see `Quantities.survived_nonfinite_grads`), not a run gone non-finite. Recurring skips say the
    gradients overflow now and then (fp16 loss scaling, or one op that overflows on some batches)
    and cost those steps. Info when rare (< 5% of the logged steps and fewer than 5), a warning
    when they recur more, and a stall when most steps were skipped (no update reached the weights,
    so the loss cannot fall). Named `loss_scale_collapse`, the cause whose steps "keep being
    skipped", at a confidence that says the log does not show the scale."""
    rows = q.survived_nonfinite_grads
    if rows.size < 2:
        return []
    logged = int(run.logged("grad_norm").sum())
    frac = rows.size / max(1, logged)
    s0, s1 = int(q.steps[rows[0]]), int(q.steps[rows[-1]])
    ev: list[str] = [
        Msg("scalars.skipped.what", k=int(rows.size), n=logged, first=s0, last=s1),
        Msg("scalars.skipped.why"),
    ]
    fixes: list[FixLike] = [Msg("scalars.skipped.fix_scale"), Msg("scalars.skipped.fix_find")]
    if frac >= 0.5:
        ev.append(Msg("scalars.skipped.most", frac=frac))
        severity, symptom, conf = "warning", "stall", 0.5
    elif frac >= 0.05 or rows.size >= 5:
        severity, symptom, conf = "warning", "skipped_steps", 0.45
    else:
        severity, symptom, conf = "info", "skipped_steps", 0.4
    return [
        Finding(
            cause="loss_scale_collapse",
            symptom=symptom,
            severity=severity,
            confidence=conf,
            step=s0,
            evidence=ev,
            fixes=as_fixes(fixes),
        )
    ]


@detector("grad_surge", needs=("loss", "grad_norm"))
def grad_surge(run: Run, q: Quantities) -> list[Finding]:
    """A gradient norm that grows >= 100x within 10 logged points and stays up (median since >= 30x)
    while the loss rises >= 1.5x its best and back to >= 0.9x its start: an explosion in a 6-line log as in a long one. (The long-log rule of `grad_explosion`
    needs 40 points and a sustained late median; this one runs below that.) Silent on non-finite runs (the non-finite
    detectors date those) and when the LR itself jumped or climbed over the window, which
    `lr_rise_divergence` explains. A surge whose norm and loss are both back by the log's end is one
    the run survived (`_surge_came_back`: a spike, `_transient_surge`); the LR cut of one that is
    not back stands only on `lr_advice.cut_evidence` (a cut slows every later step)."""
    if q.first_bad is not None:
        return []
    gn = q.grad_norm
    rows = np.flatnonzero(np.isfinite(gn) & np.isfinite(q.loss) & q.loss_logged)
    if rows.size < 4 or rows.size >= 40:
        return []  # from 40 points on, grad_explosion's sustained-growth rule judges
    g = gn[rows]
    loss = q.loss[rows]
    transient = None
    for j in range(1, rows.size):
        lo = max(0, j - 10)
        g0 = float(np.min(g[lo:j]))
        if g0 <= 0 or g[j] < 100 * g0:
            continue
        i0 = lo + int(np.argmin(g[lo:j]))
        best = float(np.min(loss[: j + 1]))
        tail = loss[j:]
        # the loss gave back (nearly) all progress, and the norm stayed up: one noisy batch of a
        # converged model (loss 1e-4 -> 1, norm 1e-3 -> 3 for a step) is neither
        if best <= 0 or float(np.max(tail)) < max(1.5 * best, 0.9 * q.loss_start) or float(np.median(g[j:])) < 30 * g0:
            if (
                transient is None
                and g[j] >= TRANSIENT_SURGE * g0
                and g[j] >= TRANSIENT_OVER_LEVEL * float(np.median(g[lo:j]))
            ):
                transient = (i0, j)
            continue
        lr = q.lr[rows]
        if np.isfinite(lr[i0]) and np.isfinite(lr[j]) and lr[i0] > 0 and lr[j] >= 3 * lr[i0]:
            return []  # the LR rose with it: the schedule's story
        if _surge_came_back(g, loss, i0):
            return _transient_surge(q, rows, g, (i0, j), loss_rose=(best, float(np.max(tail)), float(loss[-1])))
        return [_surge_finding(run, q, rows, (i0, j), best)]
    return _transient_surge(q, rows, g, transient) if transient else []


def _surge_finding(run: Run, q: Quantities, rows: np.ndarray, at: tuple[int, int], best: float) -> Finding:
    """The explosion `grad_surge` found: the norm rose from row `at[0]` to row `at[1]` (of `rows`)
    and stayed up while the loss rose from its `best`. Clip at the largest healthy norm; cut the
    LR only on `lr_advice.cut_evidence`."""
    i0, j = at
    g, lr = q.grad_norm[rows], q.lr[rows]
    tail = q.loss[rows][j:]
    s0, s1 = int(q.steps[rows[i0]]), int(q.steps[rows[j]])
    peak_g = float(np.max(g[j:]))
    rose = dict(g0=float(g[i0]), s0=s0, g1=float(g[j]), s1=s1, x=float(g[j] / g[i0]), k=s1 - s0)
    ev: list[str] = [
        Msg("scalars.surge.rose_peak", **rose, peak=peak_g)
        if peak_g > 1.5 * float(g[j])
        else Msg("scalars.surge.rose", **rose),
        Msg("scalars.surge.loss_rose", best=best, top=float(np.max(tail))),
    ]
    if rows.size < SHORT_LOG:
        ev.append(Msg("scalars.surge.short_log", n=int(rows.size)))
    healthy = g[: i0 + 1]
    clip = float(np.max(healthy)) if healthy.size else float(g[i0])
    fixes: list[FixLike] = [
        _surge_clip_fix(q, "scalars.surge.fix_clip", clip),
        Fix.lr(Msg("scalars.surge.fix_lr", lr=float(lr[j])), factor=1 / 3)
        if np.isfinite(lr[j])
        else Msg("scalars.surge.fix_lr_qk"),
    ]
    held, why = cut_evidence(run, q, int(rows[i0 + 1]))
    if held is None:  # the loss's rise does not hold (`lr_advice`): clip and measure, cut nothing
        ev.append(withheld(why))
        fixes = [fixes[0], measure_fix(s0)]
    return Finding(
        cause="grad_explosion",
        symptom="divergence",
        severity="critical",
        confidence=0.8,
        step=s0 if s1 - s0 <= 1 else int(q.steps[rows[i0 + 1]]),
        evidence=ev,
        fixes=as_fixes(fixes),
    )


def _surge_clip_fix(q: Quantities, key: str, healthy_max: float) -> Fix:
    """Clip at the largest healthy norm (at least 1.0), or, when the run already clips (its
    metadata's max_grad_norm), say so and at what instead of suggesting it again."""
    clip = clip_in_place(q.run)
    if clip is not None:
        return already_clipped_fix(clip)
    return Fix.clip(Msg(key, max_norm=max(healthy_max, 1.0)), max_norm=max(healthy_max, 1.0))


#: a gradient norm this many times its recent minimum is an explosion even when the run recovered
TRANSIENT_SURGE = 1000.0
#: ... and this many times its recent median: the minimum alone can be one step's outlier low (a
#: last batch of one sample that the model already fits: norm 0.002 among 1-3), and a norm back at
#: the run's usual level is no surge; the long-log rule (`grad_explosion`, from 40 points on) reads
#: sustained medians and never names such a step, so `watch` judging a 25-step log must not either
#: (a real spike leaves its level far behind: BLOOM-176B's 0.24 -> 960)
TRANSIENT_OVER_LEVEL = 30.0
#: a surge is over when the log's last norm is back within this factor of its level before (an order
#: of magnitude: `GradientLimits.prelude_growth`'s growth the other way) ...
SURGE_BACK_NORM = 10.0
#: ... and its last loss within this factor of the median loss before it (`short_spike`'s recovery)
SURGE_BACK_LOSS = 1.3


def _surge_came_back(g: np.ndarray, loss: np.ndarray, i0: int) -> bool:
    """The log's last gradient norm and loss are back near their levels before the surge that began
    after row `i0`: the run survived it (BLOOM-176B's norm 0.24 -> 960 -> 0.2 with the loss 2.2 ->
    5.1 -> 2.2 went on unchanged); a surge that is still up at the end of the log has not."""
    before = loss[: i0 + 1]
    return bool(
        g[-1] <= SURGE_BACK_NORM * float(g[i0]) and float(loss[-1]) <= SURGE_BACK_LOSS * float(np.median(before))
    )


def _transient_surge(
    q: Quantities,
    rows: np.ndarray,
    g: np.ndarray,
    where: tuple[int, int],
    loss_rose: tuple[float, float, float] | None = None,
) -> list[Finding]:
    """A gradient norm that jumped >= 1000x and came back while the loss did not diverge, or one
    that jumped >= 100x with the loss and both came back by the log's end (`loss_rose`: the loss's
    best before, its top and its last): a gradient explosion the run survived (a guard skipped it,
    or clipping and Adam absorbed it). Not `healthy` -- the next one may not be survived -- but only
    a warning (a spike), and the fix is clipping at the healthy norm, which cannot make a run worse;
    no LR cut for a survived event."""
    i0, j = where
    s0, s1 = int(q.steps[rows[i0]]), int(q.steps[rows[j]])
    peak = float(np.max(g[j:]))
    clip = float(np.max(g[: i0 + 1]))
    jump = dict(g0=float(g[i0]), s0=s0, g1=float(g[j]), s1=s1, x=peak / float(g[i0]), back=float(g[-1]))
    ev: list[str] = [
        Msg("scalars.surge.jumped_peak", **jump, peak=peak)
        if peak > 1.5 * float(g[j])
        else Msg("scalars.surge.jumped", **jump),
        Msg("scalars.surge.survived")
        if loss_rose is None
        else Msg("scalars.surge.loss_came_back", best=loss_rose[0], top=loss_rose[1], back=loss_rose[2]),
    ]
    fixes: list[FixLike] = [
        _surge_clip_fix(q, "scalars.surge.fix_clip_before", clip),
        Msg("scalars.surge.fix_find_batch"),
    ]
    return [
        Finding(
            cause="grad_explosion",
            symptom="spike",
            severity="warning",
            confidence=0.6,
            step=int(q.steps[rows[j]]),
            evidence=ev,
            fixes=as_fixes(fixes),
        )
    ]


#: the rule of `lr_rise_divergence`'s finding: the divergence it dates explains the later "spikes"
#: (engine.arbitrate reads it)
RUNAWAY_LR = "scalars.runaway_lr"
#: the runaway rule reads a loss that improved as the LR climbed, then turned: its best at most this
#: share of its first print (a fine-tune's loss that rises over a warm-up's first updates never
#: improved, and a schedule past its best LR is not what that shows; rule of thumb, untuned)
RUNAWAY_FELL = 0.9


@detector("lr_rise_divergence", needs=("loss", "lr"))
@with_lr_evidence
def lr_rise_divergence(run: Run, q: Quantities) -> list[Finding]:
    """The loss diverges while the LR is still climbing: the LR rose >= 10x over the run (a warm-up
    with no end, a peak LR far too high, a range test left on) and the loss ends >= 1.5x its best
    (or goes non-finite) after the LR passed the level where it was best, having improved first
    (its best <= RUNAWAY_FELL x its first print). The fix is the schedule or its peak, not clipping
    a "spike". Named `lr_too_high` (the peak the schedule reached), with
    the LR's trajectory as its evidence and `RUNAWAY_LR` as its rule."""
    lf = q.finite_loss
    if lf.size < 5:
        return []
    lr = q.lr
    rows = np.flatnonzero(np.isfinite(lr) & (lr > 0))
    if rows.size < 5:
        return []
    x = q.loss[lf]
    b = int(np.argmin(x))
    best = float(x[b])
    if best > RUNAWAY_FELL * float(x[0]):
        return []  # it never improved as the LR climbed: a warm-up's first updates, not a range run past its best
    end = q.first_bad if q.first_bad is not None else int(lf[-1])
    after = lf[lf > lf[b]]
    diverged = q.first_bad is not None or (
        after.size >= 2 and best > 0 and float(np.median(q.loss[after[-max(2, after.size // 3) :]])) >= 1.5 * best
    )
    if not diverged:
        return []
    lr_rows = rows[rows <= end]
    if lr_rows.size < 5:
        return []
    lr0, lr_end = float(lr[lr_rows[0]]), float(lr[lr_rows[-1]])
    mono = float(np.mean(np.diff(lr[lr_rows]) >= 0))
    if lr_end < 10 * lr0 or mono < 0.9:
        return []
    # the LR was still rising where the loss turned: not a warm-up that ended long before
    turn = int(lf[b])
    tail_lr = lr[rows[(rows >= turn) & (rows <= end)]]
    if tail_lr.size < 2 or float(tail_lr[-1]) < 1.5 * float(tail_lr[0]):
        return []
    return [_runaway_finding(q, lr_rows, turn, best, after)]


def _runaway_finding(q: Quantities, lr_rows: np.ndarray, turn: int, best: float, after: np.ndarray) -> Finding:
    """The runaway `lr_rise_divergence` found: the LR climbed over `lr_rows` and the loss turned at
    row `turn` from its `best` (then rose over the rows `after`, or went non-finite). The fix caps
    the peak at a third of the LR where the loss was best."""
    lr = q.lr
    lr0, lr_end = float(lr[lr_rows[0]]), float(lr[lr_rows[-1]])
    lr_best = float(lr[turn]) if np.isfinite(lr[turn]) else lr0
    s_turn = int(q.steps[turn])
    best_at = dict(best=best, s=s_turn, lr=lr_best)
    ev: list[str] = [
        Msg(
            "scalars.runaway.rose",
            x=lr_end / lr0,
            lr0=lr0,
            s0=int(q.steps[lr_rows[0]]),
            lr1=lr_end,
            s1=int(q.steps[lr_rows[-1]]),
        ),
        Msg("scalars.runaway.best_nan", **best_at, bad=q.first_bad_step)
        if q.first_bad is not None
        else Msg("scalars.runaway.best_rose", **best_at, top=float(np.max(q.loss[after]))),
    ]
    # 0.8: below a gradient explosion seen overflowing (0.85), which the LR trajectory then backs
    return Finding(
        cause="lr_too_high",
        symptom="divergence",
        severity="critical",
        confidence=0.8,
        step=s_turn,
        evidence=ev,
        rule=RUNAWAY_LR,
        fixes=as_fixes(
            [
                Fix.lr(Msg("scalars.runaway.fix_cap", lr=lr_best, to=lr_best / 3), to=lr_best / 3, now=lr_best),
                Msg("scalars.runaway.fix_range_test"),
            ]
        ),
    )


def _short_spike_hits(q: Quantities, x: np.ndarray) -> list[tuple[int, float]]:
    """(point, baseline) of every point of the short log `x` that is a spike against the median of
    the 5 before it (`is_spike` in log space) and >= 2x the largest of them."""
    lx = np.log(x)
    hits = []
    for j in range(4, x.size):
        prev = lx[max(0, j - 5) : j]
        med = float(np.median(prev))
        sigma = float(robust_sigma(np.median(np.abs(prev - med))))
        z = (lx[j] - med) / sigma
        # five points say little about the noise: the spike must also clear their range (2x their
        # largest), or a small batch's heavy-tailed loss (MSE on 16 rows) reads as one
        if lx[j] - float(np.max(prev)) >= math.log(2) and bool(
            is_spike(z, math.exp(lx[j] - med), math.exp(med), x[j], min(q.loss_start, float(x[0])))
        ):
            hits.append((j, math.exp(med)))
    return hits


@detector("short_spike", needs=("loss",))
def short_spike(run: Run, q: Quantities) -> list[Finding]:
    """Spikes in a log too short for `loss_spike` (10-39 points): the same rule (> 8 robust sigmas
    in log space, >= 2x the baseline, giving back >= 20% of the progress made) against the median
    of the 5 points before, and >= 2x the largest of them (five points estimate the noise poorly);
    recovered when a later point comes back below 1.3x that baseline."""
    lf = q.finite_loss
    n = lf.size
    if n < 10 or n >= 40:
        return []
    x = q.loss[lf]
    if (x <= 0).any():
        return []
    hits = _short_spike_hits(q, x)
    if not hits:
        return []
    # consecutive spiking points are one incident
    incidents = [hits[0]]
    for h in hits[1:]:
        if h[0] - incidents[-1][0] > 3:
            incidents.append(h)
    j, base = incidents[0]
    s = int(q.steps[lf[j]])
    after = x[j + 1 :]
    recovered = after.size > 0 and bool((after < 1.3 * base).any())
    ev: list[str] = [
        Msg("scalars.spike.jumped", loss=float(x[j]), s=s, x=float(x[j]) / base, base=base),
        Msg(
            "scalars.spike.came_back"
            if recovered
            else "scalars.spike.not_back"
            if after.size
            else "scalars.spike.last_point"
        ),
    ]
    if len(incidents) > 1:
        ev.append(Msg("scalars.spike.separate", k=len(incidents), n=int(n)))
    elif recovered:
        ev.append(Msg("scalars.spike.one_off"))
    ev.append(Msg("scalars.spike.short_log", n=int(n)))
    return [
        Finding(
            cause="loss_spike",
            symptom="spike" if recovered else "divergence",
            severity="warning" if recovered else "critical",
            confidence=0.6,
            step=s,
            batch=s,
            evidence=ev,
            fixes=as_fixes(
                spike_fixes(
                    s, recovered=recovered, recurring=len(incidents) > 1, lr_high=lr_beyond_usual(run, q) is not None
                )
            ),
        )
    ]


@detector("lr_collapse", needs=("loss", "lr"))
def lr_collapse(run: Run, q: Quantities) -> list[Finding]:
    """The LR fell to < 1e-4 of its peak in the first 90% of the run (a decay stepped per batch
    instead of per epoch, a step size counted in the wrong unit) and the loss has not moved since
    (beyond its batch-to-batch noise). A schedule meant to end at 0 gets there at the very end
    (cosine and linear decays are above 1e-4 of the peak until the last ~1% of steps), and a
    converged loss (<= 5% of its start) has nothing left to learn."""
    lf = q.finite_loss
    lr = q.lr
    rows = np.flatnonzero(np.isfinite(lr))
    if lf.size < 20 or rows.size < 20 or q.first_bad is not None:
        return []
    x = lr[rows]
    peak_i = int(np.argmax(x))
    peak = float(x[peak_i])
    low = np.flatnonzero((x < 1e-4 * peak) & (np.arange(x.size) > peak_i))
    if peak <= 0 or not low.size:
        return []
    c = int(rows[low[0]])
    if c > 0.9 * q.n:
        return []
    loss = q.loss
    at = lf[(lf >= c)]
    if at.size < 10:
        return []
    k = max(3, at.size // 3)
    then, last = float(np.median(loss[at[:k]])), float(np.median(loss[at[-k:]]))
    se = _median_se(loss[at[:k]], loss[at[-k:]])
    if (last < 0.97 * then and then - last > 3 * se) or last <= 0.05 * q.loss_start:
        return []
    s = int(q.steps[c])
    total = int(q.steps[-1]) + 1
    return [
        Finding(
            cause="lr_schedule_error",
            symptom="stall",
            severity="warning",
            confidence=0.75,
            step=s,
            evidence=[
                Msg(
                    "scalars.lr_collapse.fell",
                    peak=peak,
                    lr=float(lr[c]),
                    s=s,
                    x=float(lr[c]) / peak,
                    pct=100 * s / total,
                    total=total,
                    end=float(x[-1]),
                ),
                Msg("scalars.lr_collapse.since", then=then, last=last),
            ],
            fixes=as_fixes([Msg("scalars.lr_collapse.fix_cadence"), Msg("scalars.lr_collapse.fix_decay")]),
        )
    ]


#: robust sigmas (log space) of the later losses the first steps' mean must clear to be a jump
#: that made the loss worse (a 15%-noisy small-batch loss puts one draw in three 1.3x off its median)
JUMP_HEAD_Z = 3.0


def _robust_z(v: float, rest: np.ndarray) -> float:
    """How many robust sigmas (log space, floor 0.02) v sits above the median of `rest` (all > 0)."""
    lr = np.log(rest)
    med = float(np.median(lr))
    sigma = max(1.4826 * float(np.median(np.abs(lr - med))), 0.02)
    return (math.log(v) - med) / sigma if v > 0 else -math.inf


@detector("jump_then_stuck", needs=("loss",))
@with_lr_evidence
def jump_then_stuck(run: Run, q: Quantities) -> list[Finding]:
    """The first updates make the loss worse (>= 1.4x the first loss within 3 steps, the 3 steps'
    mean >= 1.3x both the first loss and the later median, above the later p95) and the run
    never gets below where it started (last third's median >= 0.95x the first loss, >= 20 points):
    the steps are too large from the start (on a log that shows the run's start: `shows_run_start`).
    The LR's size is weighed against what is usual for the optimizer families when the log has it."""
    lf = q.finite_loss
    if lf.size < 20 or q.first_bad is not None or not shows_run_start(run, q):
        return []
    x = q.loss[lf]
    x0 = float(x[0])
    if x0 <= 0 or bool((x < 0).any()):
        return []  # a signed objective (an RL policy loss around 0): a ratio to its first value means nothing
    head = x[1:4]
    j = int(np.argmax(head)) + 1
    k = max(3, x.size // 3)
    last = float(np.median(x[-k:]))
    if float(x[j]) < 1.4 * x0 or last < 0.95 * x0:
        return []
    # the jump stands out of the run's own noise: the first steps as a whole sit well above both the
    # first loss and the rest of the run (a noisy loss whose first draw was low is not a jump)
    rest = x[4:]
    if float(np.mean(head)) < 1.3 * max(x0, float(np.median(rest))) or float(x[j]) < np.percentile(rest, 95):
        return []
    if (rest > 0).all() and _robust_z(float(np.mean(head)), rest) < JUMP_HEAD_Z:
        return []  # within the rest's own spread (small noisy batches, a GAN's oscillating losses)
    s = int(q.steps[lf[j]])
    ev: list[str] = [
        Msg("scalars.jump.worse", x0=x0, s0=int(q.steps[lf[0]]), xj=float(x[j]), s=s),
        Msg("scalars.jump.never_below", n=int(x.size), last=last),
    ]
    lr, _ = _lr_reached(q, lf)
    fixes: list[FixLike] = [Msg("scalars.jump.fix")]
    guess = lr is not None and lr >= 1e-2 and judge_lr(run, q, lr) is None
    if lr is not None and lr > 0:
        # the optimizer unknown: say what an LR this size would mean for the common one (when the
        # run names its optimizer, `with_lr_evidence` says what is usual for that one instead)
        ev.append(Msg("scalars.jump.lr_adam_guess" if guess else "scalars.alt.lr_value", lr=lr))
        fixes = [
            Fix.lr(
                Msg("scalars.jump.fix_lr_adam_guess" if guess else "scalars.jump.fix_lr", lr=lr, to=lr / 10),
                to=lr / 10,
                now=lr,
            )
        ]
    held, why = cut_evidence(run, q, int(lf[j]))
    if held is None:  # the rise does not hold (`lr_advice`): name it, measure the LR, cut nothing
        ev.append(withheld(why))
        fixes = [measure_fix(s)]
    return [
        Finding(
            cause="lr_too_high",
            symptom="plateau",
            severity="warning",
            confidence=0.6,
            step=s,
            evidence=ev,
            fixes=as_fixes(fixes),
        )
    ]


def _has_watch_records(run: Run) -> bool:
    return (run.layers is not None and len(run.layers.steps) > 0) or run.has("update_ratio") or run.has("param_norm")


def coverage(run: Run, q: Quantities, findings: list[Finding]) -> tuple[bool, list[str]]:
    """Whether the log let the checks that matter run (False: the report is `inconclusive` unless
    something was found), and notes that say what was missing and the cheapest way to get it.

    A log with fewer than 3 finite loss points supports no verdict. A short one (< 50) supports
    `healthy` only when the loss clearly fell (>= 3% from the first third to the last): a loss
    that neither fell nor tripped a rule may be learning slowly or not at all, and a few points
    cannot tell which. A run recorded by `watch` (update sizes, per-layer statistics) is judged
    on those records at any length."""
    if not run.has("loss"):
        # no training loss read (a GAN's two adversaries, a metric the reader could not name): the
        # loss checks did not run, so nothing found is no "healthy" unless watch measured the run
        return _has_watch_records(run), []
    n = int(q.finite_loss.size)
    alarms = any(f.severity in ("warning", "critical") for f in findings)
    notes: list[str] = []
    if n >= SHORT_LOG:
        return True, notes
    what = _short_log_what(run, n)
    ways = Msg("scalars.coverage.cheap_ways")
    # a run recorded by watch measured what a short curve cannot show (update sizes, per-layer
    # gradients, the batch itself): its checks ran, whatever the curve's length
    measured = _has_watch_records(run)
    if alarms:
        notes.append(Msg("scalars.coverage.short_alarm", what=what, ways=ways))
        return True, notes
    if n < 3 and not measured:
        notes.append(Msg("scalars.coverage.too_few", what=what, ways=ways))
        return False, notes
    x = q.loss[q.finite_loss]
    k = max(1, n // 3)
    fell = n >= 3 and float(np.median(x[-k:])) < 0.97 * float(np.median(x[:k]))
    if fell or measured:
        notes.append(
            Msg("scalars.coverage.short_fell" if fell else "scalars.coverage.short_measured", what=what, ways=ways)
        )
        return True, notes
    notes.append(
        Msg(
            "scalars.coverage.not_fell",
            what=what,
            first=float(np.median(x[:k])),
            last=float(np.median(x[-k:])),
            ways=ways,
        )
    )
    return False, notes


def _short_log_what(run: Run, n: int) -> Msg:
    """What a log of `n` finite loss points (< SHORT_LOG) let the checks do, and what it lacks."""
    hungry = (
        (Msg("scalars.check.late_divergence"), 20),
        (Msg("scalars.check.spike"), 40),
        (Msg("scalars.check.plateau"), 100),
    )
    skipped = [Msg("scalars.coverage.check", name=name, need=need) for name, need in hungry if n < need]
    missing = [
        m
        for has, m in (
            (run.has("grad_norm"), Msg("scalars.coverage.no_grad_norm")),
            (run.has("lr"), Msg("scalars.coverage.no_lr")),
        )
        if not has
    ]
    pts = Msg("scalars.coverage.point") if n == 1 else Msg("scalars.coverage.points")
    if not missing:
        return Msg("scalars.coverage.what", n=n, pts=pts, skipped=skipped)
    either = missing[0] if len(missing) == 1 else Msg("scalars.coverage.either", a=missing[0], b=missing[1])
    return Msg("scalars.coverage.what_missing", n=n, pts=pts, skipped=skipped, missing=either)
