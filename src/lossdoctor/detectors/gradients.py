"""Gradient magnitude: explosion (growth to overflow) and vanishing (early layers starve)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..findings import Finding, Fix, FixLike, as_fixes
from ..messages import Msg
from ..records import Run
from .base import detector, round_sig
from .quantities import Quantities, percentile


@dataclass(frozen=True)
class GradientLimits:
    #: the clipping fix skips this share of the steps before the fault (the first norms are
    #: transient) but keeps at least `clip_min_window` of them (rule of thumb, untuned)
    clip_skip_share: float = 0.05
    clip_min_window: int = 10
    #: finite norms needed to read a percentile (fewer is no distribution)
    clip_min_points: int = 3
    #: norms above this many times the window's median are a growth phase, not the healthy
    #: distribution the suggested max_norm comes from (rule of thumb, untuned)
    clip_healthy_over_median: float = 5
    #: percentile of the healthy norms a suggested max_norm sits at (clips the tail only)
    clip_percentile: float = 95
    #: a suggestion below this share of the clip already in place is worth making ("clip
    #: tighter"); above it, tightening changes little (rule of thumb, untuned)
    tighter_clip_share: float = 0.5
    #: finite norms needed before the explosion detector judges anything
    explosion_min_points: int = 6
    #: the early median: the first fifth of the finite norms, between 3 and 20 of them
    early_min: int = 3
    early_max: int = 20
    #: steps before the first non-finite step whose peak is compared with the early median
    prelude_steps: int = 25
    #: a peak this many times the early median before the overflow: the norm grew into it
    #: (an order of magnitude; measured default on the zoo's explosion scenarios)
    prelude_growth: float = 10
    #: the loss never fell below this share of its start ...
    never_improved_share: float = 0.8
    #: ... and it blew up within this many steps (or the first tenth of the run): the learning
    #: rate, not an explosion, so the explosion finding's confidence drops
    never_improved_steps: int = 50
    #: finite norms needed for the finite (no overflow) explosion case
    sustained_min_points: int = 40
    #: the late median (last fifth, at least this many norms) ...
    late_min: int = 5
    #: ... this many times the early median and above `sustained_floor` in absolute terms:
    #: sustained growth (rule of thumb, untuned; measured silent on the zoo's healthy controls)
    sustained_growth: float = 50
    sustained_floor: float = 10
    #: finite losses needed to say whether the loss improved
    loss_min_points: int = 10
    #: a late loss below this share of the early one is progress: growth is then no fault
    improved_share: float = 0.9
    #: sampled steps with finite per-layer gradients needed for the vanishing check
    vanishing_min_rows: int = 3
    #: leaf layers with gradients needed to compare the first with the last
    vanishing_min_layers: int = 3
    #: first/last layer gradient ratio and first-layer norm below which early layers starve
    #: (AUTOTRAINER's vanishing-gradient rule)
    vanishing_ratio: float = 1e-3
    vanishing_first: float = 1e-4
    #: last layers' norm below this: every gradient is ~zero, a different fault (labels)
    all_zero: float = 1e-8
    #: a late loss below this share of the early one: still learning well, deep nets with small
    #: early-layer gradients can be fine (rule of thumb, untuned)
    vanishing_improved_share: float = 0.7
    #: safety net: finite norms needed to compare the last with the median before it
    net_min_points: int = 2
    #: safety net: the last norm this many times the median of those before it: it grew into
    #: the overflow (an order of magnitude, as `prelude_growth`)
    net_grad_growth: float = 10
    #: safety net: the loss's tail this many times its median: it rose into the overflow, the
    #: learning rate (the corpus scorer's divergence ratio; rule of thumb)
    net_loss_rise: float = 1.5


LIMITS = GradientLimits()


def clip_in_place(run: Run) -> float | None:
    """The gradient-clipping threshold the run already uses (`max_grad_norm` in its metadata: the
    HF Trainer's, Lightning's gradient_clip_val, Megatron's clip_grad), None when it does not clip;
    a fix must not tell a run to clip at 1.0 when it already does."""
    return clip_threshold(run.meta)


def clip_threshold(meta: dict) -> float | None:
    """`max_grad_norm` of a run's metadata as a threshold, None when it does not clip (live triage
    reads the monitor's metadata with it)."""
    v = meta.get("max_grad_norm")
    if isinstance(v, (int, float)) and not isinstance(v, bool) and 0 < v < float("inf"):
        return float(v)
    return None


def clip_fix(q: Quantities, end: int) -> Fix | None:
    """`max_norm` from this run's own healthy history: the `clip_percentile` of the gradient norm
    over the steps before things went wrong (skipping the first `clip_skip_share` of them, where
    norms are transient; `GradientLimits` holds the numbers)."""
    gn = q.grad_norm[:end]
    start = min(int(LIMITS.clip_skip_share * end), max(0, end - LIMITS.clip_min_window))
    window = gn[start:end]
    window = window[np.isfinite(window)]
    if window.size < LIMITS.clip_min_points:
        return None
    # the healthy distribution only: a growth phase inside the window would lift the p95 to the
    # very values that blew up
    med = float(np.median(window))
    healthy = window[window <= LIMITS.clip_healthy_over_median * med] if med > 0 else window
    p95 = round_sig(
        percentile(healthy if healthy.size >= LIMITS.clip_min_points else window, LIMITS.clip_percentile), 2
    )
    a, b = int(q.steps[start]), int(q.steps[max(start, end - 1)])
    clip = clip_in_place(q.run)
    if clip is not None:
        return already_clipped_fix(clip, p95, a, b)
    return Fix.clip(Msg("grad.fix_clip", max_norm=p95, first=a, last=b), max_norm=p95)


def already_clipped_fix(
    clip: float, suggested: float | None = None, first: int | None = None, last: int | None = None
) -> Fix:
    """The clipping fix for a run that already clips at `clip`: a threshold well below it from the
    run's own healthy norms when there is one, else that clipping is in place and what to do
    instead (the norms the detectors read are measured before clipping)."""
    if (
        suggested is not None
        and first is not None
        and last is not None
        and suggested < LIMITS.tighter_clip_share * clip
    ):
        return Fix.clip(
            Msg("grad.fix_clip_tighter", clip=clip, max_norm=suggested, first=first, last=last), max_norm=suggested
        )
    return Fix.code(Msg("grad.fix_already_clipped", clip=clip))


@detector("grad_explosion", needs=("grad_norm",), hint=Msg("hint.grad_norm"))
def grad_explosion(run: Run, q: Quantities) -> list[Finding]:
    """The gradient norm grows by orders of magnitude, then overflows (or keeps growing).

    Non-finite case: the norm in the `prelude_steps` before the first non-finite step peaks
    `prelude_growth` times the early median. Finite case (warning): the late median is
    `sustained_growth` times the early median, above `sustained_floor`, and the loss is no better
    than early on. A run whose loss never improved before blowing up early gets a lower confidence
    (that is the learning rate, `lr_too_high`); skipped steps of a GradScaler run are ignored
    (overflow there is the scaler's normal probing). The numbers are `GradientLimits`' fields.
    """
    gn = np.where(q.skipped, np.nan, q.grad_norm)
    fin = np.flatnonzero(np.isfinite(gn[: q.healthy_end]))
    if fin.size < LIMITS.explosion_min_points:
        return []
    early = gn[fin[: max(LIMITS.early_min, min(LIMITS.early_max, fin.size // 5))]]
    base = float(np.median(early))
    if q.first_bad is not None:
        return _explosion_before_nonfinite(run, q, gn, base)
    return _sustained_growth(q, gn, fin, base)


def _explosion_before_nonfinite(run: Run, q: Quantities, gn: np.ndarray, base: float) -> list[Finding]:
    """Critical: the norm peaked `prelude_growth` times its early median `base` in the
    `prelude_steps` before the first non-finite step."""
    end = q.healthy_end
    lo = max(0, end - LIMITS.prelude_steps)
    recent = gn[lo:end]
    recent = recent[np.isfinite(recent)]
    if recent.size == 0 or base <= 0:
        return []
    peak = float(recent.max())
    if peak < LIMITS.prelude_growth * base:
        return []
    s = int(q.steps[q.first_bad])  # the first non-finite step
    ev: list[str] = [Msg("grad.rose_then_nonfinite", start=base, peak=peak, first=int(q.steps[lo]), last=s - 1, step=s)]
    bad_params = run.event("nonfinite_params").get(s)
    if bad_params:
        ev.append(Msg("grad.first_nonfinite_params", params=[str(n) for n in bad_params[:4]]))
    fixes: list[FixLike] = [f for f in [clip_fix(q, max(1, lo)), _lower_lr_fix(q, end)] if f]
    bwd = run.event("bwd_first_nonfinite").get(s)
    layer = bwd.get("layer") if isinstance(bwd, dict) else None
    return [
        Finding(
            cause="grad_explosion",
            symptom="nonfinite",
            severity="critical",
            confidence=0.6 if _never_improved(q, end) else 0.85,
            step=s,
            batch=s,
            layer=layer,
            evidence=ev,
            fixes=as_fixes(fixes),
        )
    ]


def _lower_lr_fix(q: Quantities, end: int) -> Fix | None:
    """A third of the LR logged at the last healthy row, when the run logs a finite one."""
    if not q.run.has("lr"):
        return None
    lr = q.lr[end - 1]
    if not np.isfinite(lr):
        return None
    to = float(round_sig(lr / 3, 2))
    return Fix.lr(Msg("grad.fix_lower_lr", lr=float(lr), to=to), to=to, now=float(lr))


def _never_improved(q: Quantities, end: int) -> bool:
    """The loss never got below `never_improved_share` of its start before blowing up early: that
    is the learning rate (lr_too_high), so the explosion is less sure."""
    pre = q.loss[:end]
    pre = pre[np.isfinite(pre)]
    return bool(
        pre.size > 0
        and float(pre.min()) >= LIMITS.never_improved_share * q.loss_start
        and end <= max(LIMITS.never_improved_steps, q.n // 10)
    )


def _sustained_growth(q: Quantities, gn: np.ndarray, fin: np.ndarray, base: float) -> list[Finding]:
    """Warning: the late median norm is `sustained_growth` times the early one `base` (and above
    `sustained_floor`) while the loss made no progress."""
    n = fin.size
    if n < LIMITS.sustained_min_points:
        return []
    late = gn[fin[-max(LIMITS.late_min, n // 5) :]]
    late_med = float(np.median(late))
    if base <= 0 or late_med < LIMITS.sustained_growth * base or late_med < LIMITS.sustained_floor:
        return []
    loss = q.loss
    lf = q.finite_loss
    if lf.size >= LIMITS.loss_min_points:
        l_early = float(np.median(loss[lf[: max(3, lf.size // 5)]]))
        l_late = float(np.median(loss[lf[-max(3, lf.size // 5) :]]))
        if l_late < LIMITS.improved_share * l_early:
            return []
    i0 = fin[-max(LIMITS.late_min, n // 5)]
    s = int(q.steps[i0])
    fixes = [f for f in [clip_fix(q, int(fin[max(LIMITS.late_min, n // 5)]))] if f]
    return [
        Finding(
            cause="grad_explosion",
            symptom="divergence",
            severity="warning",
            confidence=0.6,
            step=s,
            evidence=[Msg("grad.median_rose", start=base, end=late_med, step=s, ratio=late_med / base)],
            fixes=as_fixes(fixes),
        )
    ]


def _param_modules(run: Run) -> tuple[list[int], np.ndarray] | None:
    """Indices of modules that own parameters, and their per-step parameter-gradient norms."""
    L = run.layers
    if L is None or "param_grad_norm" not in L.stats:
        return None
    g = L.stats["param_grad_norm"].astype(np.float64)
    if g.shape[0] == 0:
        return None
    has = np.isfinite(g).any(axis=0)
    idx = [i for i in np.flatnonzero(has) if not (L.types and ("Norm" in L.types[i] or "Embedding" in L.types[i]))]
    # skip containers: keep modules that are not a prefix of another parametrised module (the
    # prefixes of every name collected once: a pairwise test is quadratic, 8 s at 2,500 modules)
    names = [L.modules[i] for i in idx]
    parents = {n[:k] for n in names for k in range(len(n)) if n[k] == "."}
    leafish = [int(i) for i, n in zip(idx, names) if n not in parents and n != "<model>"]
    if len(leafish) < LIMITS.vanishing_min_layers:
        return None
    return leafish, g


@detector("vanishing_gradient", needs=("layers",), hint=Msg("hint.layers"))
def vanishing_gradient(run: Run, q: Quantities) -> list[Finding]:
    """Early layers get ~nothing (AUTOTRAINER: ||g_first|| / ||g_last|| below `vanishing_ratio`
    and ||g_first|| below `vanishing_first`, medians over sampled steps; `GradientLimits`). Needs the per-layer gradient norms only `watch` records.
    Suppressed when the loss is still improving well (deep nets with small early-layer gradients
    can be fine), and on non-finite steps."""
    pm = _param_modules(run)
    L = run.layers
    if pm is None or L is None:
        return []
    idx, g = pm
    ok_rows = np.all(np.isfinite(g[:, idx]) | np.isnan(g[:, idx]), axis=1) & np.isfinite(g[:, idx]).all(axis=1)
    if ok_rows.sum() < LIMITS.vanishing_min_rows:
        return []
    gg = g[ok_rows][:, idx]
    k = max(1, len(idx) // 5)
    first = np.median(gg[:, :k], axis=1)
    last = np.median(gg[:, -k:], axis=1)
    ratio = float(np.median(first / np.maximum(last, 1e-30)))
    g_first = float(np.median(first))
    if (
        not (ratio < LIMITS.vanishing_ratio and g_first < LIMITS.vanishing_first)
        or float(np.median(last)) < LIMITS.all_zero
    ):
        return []  # (all-zero gradients are a different fault: nothing to learn from, see labels)
    lf = q.finite_loss
    if lf.size >= LIMITS.loss_min_points:
        l0 = float(np.median(q.loss[lf[:5]]))
        l1 = float(np.median(q.loss[lf[-5:]]))
        if l1 < LIMITS.vanishing_improved_share * l0:
            return []
    first_name = L.modules[idx[0]]
    last_name = L.modules[idx[-1]]
    s = int(L.steps[np.flatnonzero(ok_rows)[0]])
    return [
        Finding(
            cause="vanishing_gradient",
            symptom="plateau",
            severity="warning",
            confidence=0.8,
            step=s,
            layer=first_name,
            evidence=[
                Msg(
                    "grad.vanishing", first=first_name, grad=g_first, ratio=ratio, last=last_name, n=int(ok_rows.sum())
                ),
                Msg("common.loss_not_improving"),
            ],
            fixes=as_fixes([Msg("grad.fix_vanishing_architecture"), Msg("grad.fix_shallower")]),
        )
    ]


def unexplained_nonfinite(run: Run, q: Quantities) -> list[Finding]:
    """Safety net: a run whose loss or gradients went non-finite is never reported healthy.

    When the log is too sparse or too poor for the specific detectors (a loss column only, one
    point every 50 steps), this names the most likely cause from what the curve shows, with low
    confidence, and says what to log to know. The engine calls it only when no detector explained
    the first non-finite step with a critical finding.
    """
    if q.first_bad is None:
        return []
    i = q.first_bad
    s = q.first_bad_step
    ev: list[str] = [Msg("grad.went_nonfinite", step=s)]
    cause, conf, said = _likely_cause(q, i)
    ev.append(said)
    interval = run.meta.get("log_interval")
    if isinstance(interval, (int, float)) and interval > 1:
        ev.append(Msg("grad.log_too_coarse", n=int(interval)))
    fixes: list[FixLike] = [Msg("grad.fix_log_every_step")]
    c = clip_fix(q, i)
    if c:
        fixes.insert(0, c)
    return [
        Finding(
            cause=cause,
            symptom="nonfinite",
            severity="critical",
            confidence=conf,
            step=s,
            batch=s,
            evidence=ev,
            fixes=as_fixes(fixes),
            rule="gradients.unexplained_nonfinite",
        )
    ]


def _likely_cause(q: Quantities, i: int) -> tuple[str, float, str]:
    """`unexplained_nonfinite`'s guess from the curve before row `i` (the first non-finite one):
    non-finite data (before any update, or a healthy curve whose forward then broke), a gradient
    explosion (the norm rose just before, or a sudden blow-up), a too-high LR (the loss rose
    first); with its confidence and the sentence that says why. Apart from it to keep it short."""
    pre = q.loss[:i]
    fin = np.flatnonzero(np.isfinite(pre))
    gn = q.grad_norm[:i]
    gfin = gn[np.isfinite(gn)]
    if i == 0 or fin.size == 0:
        cause, conf = "nonfinite_data", 0.3
        said = Msg("grad.before_any_update")
    elif (
        gfin.size >= LIMITS.net_min_points
        and float(np.median(gfin)) > 0
        and gfin[-1] >= LIMITS.net_grad_growth * float(np.median(gfin))
    ):
        cause, conf = "grad_explosion", 0.5
        said = Msg("grad.rose_just_before", grad=float(gfin[-1]), ratio=float(gfin[-1] / np.median(gfin)))
    else:
        tail = pre[fin[-max(2, min(10, fin.size // 4)) :]]
        base = float(np.median(pre[fin]))
        if tail.size and base > 0 and float(tail.max()) >= LIMITS.net_loss_rise * base:
            cause, conf = "lr_too_high", 0.4
            said = Msg(
                "grad.loss_rose_just_before", loss=float(tail.max()), ratio=float(tail.max()) / base, median=base
            )
        elif not np.isfinite(q.loss[i]) and q.loss_logged[i]:
            # the step's own forward pass broke on weights that a healthy update had just produced:
            # explosions build up over steps, a bad batch breaks the very step that uses it
            cause, conf = "nonfinite_data", 0.3
            seen = Msg("grad.seen_curve_and_grad") if gfin.size else Msg("grad.seen_curve")
            said = Msg("grad.healthy_then_forward_broke", seen=seen)
        else:
            cause, conf = "grad_explosion", 0.3
            said = Msg("grad.sudden_blow_up")
    return cause, conf, said
