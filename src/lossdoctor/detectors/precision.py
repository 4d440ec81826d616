"""Low-precision traps: fp16 loss scaling out of control, updates below the weights' resolution,
an eps-dominated Adam, a loss computed in bf16."""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from ..findings import Finding, Fix, FixLike, as_fixes
from ..messages import Msg
from ..records import Run
from .base import detector
from .gradients import clip_in_place
from .log_events import events_of
from .quantities import Quantities


@dataclass(frozen=True)
class PrecisionLimits:
    #: rows needed before skipped steps are judged at all
    skip_min_rows: int = 5
    #: the tail judged for ongoing skips: the last tenth of the run, at least this many rows
    #: (and the tail share is read only from this many rows on)
    tail_rows: int = 20
    #: consecutive skipped steps that are no GradScaler probing: it backs off once per overflow
    #: and finds its level in a few steps (rule of thumb; silent on the zoo's fp16 controls)
    long_streak: int = 10
    #: share of the tail skipped: the scaler never recovers, the collapse is ongoing
    ongoing_tail_share: float = 0.5
    #: streaks this close (in rows) are one collapse when dating its onset
    onset_gap: int = 3
    #: a median input absmax above this is unnormalised data (normalised inputs sit near 1;
    #: rule of thumb, untuned)
    unnormalised_input: float = 1e3
    #: an initial scale above 2^24 is absurd (GradScaler's default is 2^16; the skips at the start
    #: are then its backing off)
    absurd_init_scale: float = 2.0**24
    #: the init_scale the fix suggests: GradScaler's default
    default_init_scale: float = 2.0**16
    #: frozen_frac samples needed (from more than this many, the first is dropped: step 0 moves
    #: every weight from its init)
    frozen_min_samples: int = 2
    #: median share of low-precision entries that did not move despite a gradient: a warning at
    #: half, critical at 90% (rule of thumb, untuned)
    frozen_share: float = 0.5
    frozen_critical: float = 0.9
    #: eps_dominated samples needed, and the median share of Adam's second-moment entries under
    #: (10 eps)^2 that makes eps the update's denominator (rule of thumb, untuned)
    eps_min_samples: int = 3
    eps_dominated_share: float = 0.9
    #: the eps the fix suggests (small enough never to dominate a bf16 second moment)
    suggested_eps: float = 1e-12
    #: losses needed to judge a stall, and the late/early median ratio above which it stalled
    stall_min_points: int = 10
    stalled_share: float = 0.9
    #: losses on the bf16 grid needed, and the share on it that says the loss is computed in bf16
    #: (a fp32 loss lands on that grid by chance 1/128 of the time)
    bf16_min_losses: int = 20
    bf16_on_grid_share: float = 0.9
    #: a log's rounding (half a unit of its 4th decimal) the grid must be this many times coarser
    #: than to be trusted, so rounded logs cannot fake it
    log_rounding: float = 5e-5
    grid_over_rounding: float = 10
    #: relative tolerance of "on the grid" (fp32 noise of the division)
    grid_rel_tol: float = 1e-7


LIMITS = PrecisionLimits()


def _runs_of_true(mask: np.ndarray) -> list[tuple[int, int]]:
    """[start, end) of each run of consecutive True values."""
    if not mask.any():
        return []
    m = np.concatenate([[False], mask, [False]]).astype(np.int8)
    d = np.diff(m)
    return list(zip(np.flatnonzero(d == 1), np.flatnonzero(d == -1)))


@dataclass
class SkipPattern:
    """Where and how long the optimizer steps were skipped (row indices into the run)."""

    streaks: list[tuple[int, int]]
    longest: tuple[int, int]
    below_one: bool
    long_streak: bool
    ongoing: bool
    #: row where the collapse began
    start: int

    @property
    def longest_len(self) -> int:
        return int(self.longest[1] - self.longest[0])


@detector("loss_scale_collapse", needs_any=("scale", "skipped"), hint=Msg("hint.loss_scale"))
def loss_scale_collapse(run: Run, q: Quantities) -> list[Finding]:
    """The fp16 loss scale keeps falling and steps keep being skipped: no progress.

    Fires when the scale drops below 1, when `long_streak` consecutive steps are skipped, or when
    `ongoing_tail_share` of the last `tail_rows`+ steps were skipped. Suppressed: the normal few
    back-offs while GradScaler finds its level at the start (a shorter streak that ends), and the
    single back-off every growth interval (numbers: `PrecisionLimits`). A long streak at the start that ends (an absurd init_scale) is a warning.
    """
    if not (run.has("scale") or run.has("skipped")):
        return []
    scale = run.col("scale")
    fin_scale = scale[np.isfinite(scale)]
    pattern = _skip_pattern(q, fin_scale)
    if pattern is None:
        return []
    s = int(q.steps[pattern.start])
    ev, fixes, layer = _collapse_evidence(run, q, pattern, fin_scale, s)
    if not pattern.ongoing and not pattern.below_one:
        backing_off = _ended_streak(run, pattern, fin_scale, ev)
        if backing_off:  # the scale was absurd, not the gradients: no step-size fix for an overflow they never made
            fixes = [f for f in fixes if getattr(f, "key", None) not in _GRADIENT_OVERFLOW_FIXES]
        fixes = backing_off + fixes
        return [
            Finding(
                cause="loss_scale_collapse",
                symptom="skipped_steps",
                severity="warning",
                confidence=0.7,
                step=s,
                layer=layer,
                evidence=ev,
                fixes=as_fixes(fixes),
            )
        ]
    return [
        Finding(
            cause="loss_scale_collapse",
            symptom="skipped_steps",
            severity="critical",
            confidence=0.9,
            step=s,
            layer=layer,
            evidence=ev,
            fixes=as_fixes(fixes),
        )
    ]


def _collapse_evidence(
    run: Run, q: Quantities, pattern: SkipPattern, fin_scale: np.ndarray, s: int
) -> tuple[list[str], list[FixLike], str | None]:
    """A loss-scale collapse's evidence and fixes: how far the scale fell, the skipped steps and
    the longest streak, what overflowed (its layer, the third value), the scaler's floor, inputs
    not normalised. Apart from `loss_scale_collapse` to keep it short."""
    ev: list[str] = []
    if fin_scale.size:
        ev.append(Msg("precision.scale_fell", start=float(fin_scale[0]), end=float(fin_scale.min())))
    lo, hi = pattern.longest
    ev.append(
        Msg(
            "precision.skipped_steps",
            skipped=int(q.skipped.sum()),
            n=q.n,
            longest=pattern.longest_len,
            first=int(q.steps[lo]),
            last=int(q.steps[hi - 1]),
        )
    )
    fixes: list[FixLike] = []
    streak_end = int(q.steps[min(q.n - 1, hi if not pattern.ongoing else q.n - 1)])
    layer = _overflow_source(run, s, streak_end, ev, fixes)
    floor = _scale_floor(run)
    if floor is not None:
        ev.append(floor[1])
    _unnormalised_inputs(run, ev, fixes)
    return ev, fixes, layer


def _scale_floor(run: Run) -> tuple[int, Msg] | None:
    """(step, sentence) of the first line saying the loss scaler reached its minimum scale (fairseq's
    `FloatingPointError: Minimum loss scale reached (0.0001)`, DeepSpeed's `Current loss scale already
    at minimum`): the run stopped there, every step overflowing whatever the scale."""
    hits = events_of(run, ("loss_scale_min",))
    if not hits:
        return None
    step, e = hits[0]
    scale = e.get("scale")
    return step, Msg("precision.scale_floor", scale="?" if scale is None else scale, step=step, text=e.get("text", ""))


@detector("loss_scale_floor", needs=("text_events",))
def loss_scale_floor(run: Run, q: Quantities) -> list[Finding]:
    """The log says the loss scaler reached its minimum scale: a loss-scale collapse by the
    framework's own word, dated at the first overflow line of the streak before it (else at the
    line), when the scale and skip columns do not already show it (`loss_scale_collapse`)."""
    floor = _scale_floor(run)
    if floor is None or ((run.has("scale") or run.has("skipped")) and loss_scale_collapse(run, q)):
        return []
    step, said = floor
    ev: list[str] = [said]
    overflows = [s for s, _ in events_of(run, ("overflow",), step)]
    if overflows:
        ev.append(Msg("precision.overflow_lines", n=len(overflows), first=overflows[0]))
    clip = clip_in_place(run)
    fixes: list[FixLike] = [
        Msg("precision.fix_gradients_overflow_fp16_clipped", clip=clip)
        if clip is not None
        else Msg("precision.fix_gradients_overflow_fp16")
    ]
    return [
        Finding(
            cause="loss_scale_collapse",
            symptom="skipped_steps",
            severity="critical",
            confidence=0.85,
            step=overflows[0] if overflows else step,
            evidence=ev,
            fixes=as_fixes(fixes),
        )
    ]


def _skip_pattern(q: Quantities, fin_scale: np.ndarray) -> SkipPattern | None:
    """The skipped steps, when they amount to a collapse (see `loss_scale_collapse`); None when
    they are GradScaler's normal probing."""
    skipped = q.skipped
    if not skipped.any() or q.n < LIMITS.skip_min_rows:
        return None
    streaks = _runs_of_true(skipped)
    longest = max(streaks, key=lambda r: r[1] - r[0])
    tail = skipped[-max(LIMITS.tail_rows, q.n // 10) :]
    tail_frac = float(tail.mean()) if q.n >= LIMITS.tail_rows else 0.0
    below_one = fin_scale.size > 0 and float(fin_scale.min()) < 1.0
    long_streak = longest[1] - longest[0] >= LIMITS.long_streak
    if not (below_one or long_streak or tail_frac >= LIMITS.ongoing_tail_share):
        return None
    ongoing = tail_frac >= LIMITS.ongoing_tail_share or (long_streak and longest[1] == q.n)
    start = longest[0] if long_streak else int(np.flatnonzero(skipped)[0])
    if ongoing:
        # onset: the start of the last streak of skips that reaches the end (allowing short gaps)
        start = streaks[-1][0]
        for a, b in reversed(streaks[:-1]):
            if start - b <= LIMITS.onset_gap:
                start = a
            else:
                break
    return SkipPattern(
        streaks=streaks,
        longest=longest,
        below_one=below_one,
        long_streak=long_streak,
        ongoing=ongoing,
        start=int(start),
    )


def _overflow_source(run: Run, s: int, streak_end: int, ev: list[str], fixes: list[FixLike]) -> str | None:
    """Where the overflow that makes the scaler skip comes from, when the monitor saw it: the
    forward pass (no scale helps), or an op inside a module's backward. Adds the evidence and the
    fixes; returns the layer to name."""
    fwd = run.event("fwd_first_nonfinite")
    fwd_in = [st for st in fwd if s <= st <= streak_end]
    if fwd_in:
        e = fwd[min(fwd_in)]
        layer = e.get("layer")
        ev.append(Msg("precision.forward_overflows", layer=layer, value=e.get("value")))
        fixes.append(Fix.fp32(Msg("precision.fix_layer_out_of_fp16", layer=layer), module=layer))
        return layer
    layer = None
    bwd = run.event("bwd_first_nonfinite")
    bwd_in = [st for st in bwd if s <= st <= streak_end]
    if bwd_in:
        e = bwd[min(bwd_in)]
        layer, after = e.get("layer"), e.get("after")
        if after:
            ev.append(Msg("precision.backward_goes_bad_inside", after=after, layer=layer))
            fixes.append(Msg("precision.fix_guard_backward_op", after=after))
            layer = after
        else:
            ev.append(Msg("precision.backward_overflows_at", layer=layer))
    clip = clip_in_place(run)
    fixes.append(
        Msg("precision.fix_gradients_overflow_fp16_clipped", clip=clip)
        if clip is not None
        else Msg("precision.fix_gradients_overflow_fp16")
    )
    return layer


def _power_of_2(x: float) -> str:
    """`2^32` for 4294967296.0, else the number as `%g` prints it."""
    return f"2^{int(math.log2(x))}" if x > 0 and math.log2(x).is_integer() else f"{x:g}"


def _deepspeed_overflows(run: Run) -> bool:
    """The log's overflow lines are DeepSpeed's loss scaler's (the reader's `scaler` of the event)."""
    return any(e.get("scaler") == "deepspeed" for _, e in events_of(run, ("overflow",)))


#: the fixes for gradients that overflow fp16 at a working scale (a lower LR, clipping, bf16)
_GRADIENT_OVERFLOW_FIXES = ("precision.fix_gradients_overflow_fp16", "precision.fix_gradients_overflow_fp16_clipped")


def _unnormalised_inputs(run: Run, ev: list[str], fixes: list[FixLike]) -> None:
    """Inputs far beyond unit scale overflow fp16 in the first layer: said first among the fixes."""
    ia = run.col("input_absmax")
    if np.isfinite(ia).any() and float(np.nanmedian(ia)) > LIMITS.unnormalised_input:
        ev.append(Msg("precision.inputs_unnormalised", absmax=float(np.nanmedian(ia))))
        fixes.insert(0, Msg("precision.fix_normalise_inputs"))


def _ended_streak(run: Run, pattern: SkipPattern, fin_scale: np.ndarray, ev: list[str]) -> list[FixLike]:
    """A streak that ended (a warning): GradScaler backing off from an absurd initial scale, or
    lost updates. Adds the evidence; returns the fixes to put first."""
    init = float((run.meta.get("scaler", {}) or {}).get("init_scale", float("nan")))
    s0 = float(fin_scale[0]) if fin_scale.size else float("nan")
    if (init > LIMITS.absurd_init_scale or s0 > LIMITS.absurd_init_scale) and pattern.longest[0] <= 1:
        ev.append(Msg("precision.streak_ended_backing_off"))
        configured = init if init == init else s0
        # DeepSpeed's scaler is set in its config (`initial_scale_power`, 2^32 in its older defaults)
        key = "precision.fix_initial_scale_power" if _deepspeed_overflows(run) else "precision.fix_init_scale"
        power = int(math.log2(LIMITS.default_init_scale))
        said = Msg(
            key,
            init_scale=LIMITS.default_init_scale,
            power=power,
            configured=configured,
            started=_power_of_2(configured),
        )
        return [Fix.scaler(said, init_scale=LIMITS.default_init_scale)]
    ev.append(Msg("precision.streak_ended_lost_updates"))
    return []


@detector("precision_stall", needs_any=("frozen_frac", "eps_dominated", "loss"))
def precision_stall(run: Run, q: Quantities) -> list[Finding]:
    """Updates below the resolution of the weights' dtype (bf16 keeps ~8 bits: relative updates
    under ~2^-8 round away), an eps-dominated Adam, or a loss computed in bf16.

    Frozen weights: median `frozen_frac` of `frozen_share` over sampled steps (that share of the
    low-precision entries with a non-zero gradient did not move). Eps: `eps_dominated_share` of
    Adam's second-moment entries under (10 eps)^2 with a loss that stalls. bf16 loss:
    `bf16_on_grid_share` of at least `bf16_min_losses` losses exactly on the bf16 grid
    2^(floor(log2 L) - 7); values are checked only where the grid is `grid_over_rounding` times
    coarser than the log's rounding, so rounded logs cannot fake it (numbers: `PrecisionLimits`).
    """
    found = [_frozen_weights(run, q), _eps_dominated(run, q), _bf16_loss(q)]
    return [f for f in found if f is not None]


def _frozen_weights(run: Run, q: Quantities) -> Finding | None:
    """`precision_stall`'s frozen weights (one helper per cause, to keep each short)."""
    ff = run.col("frozen_frac")
    ffv = ff[np.isfinite(ff)]
    if ffv.size < LIMITS.frozen_min_samples:
        return None
    med = float(np.median(ffv[1:] if ffv.size > LIMITS.frozen_min_samples else ffv))
    if not med >= LIMITS.frozen_share:
        return None
    i = int(np.flatnonzero(np.isfinite(ff))[0])
    dtypes = (run.meta.get("model") or {}).get("param_dtypes", {})
    lr = q.lr[np.isfinite(q.lr)]
    ev: list[str] = [Msg("precision.frozen_entries", pct=med * 100, n=int(ffv.size))]
    if dtypes:
        ev.append(Msg("precision.param_dtypes", dtypes=str(dtypes)))
    if lr.size:
        ev.append(Msg("precision.below_bf16_resolution", lr=float(lr[-1])))
    return Finding(
        cause="precision_stall",
        symptom="stall",
        severity="critical" if med >= LIMITS.frozen_critical else "warning",
        confidence=0.85,
        step=int(q.steps[i]),
        evidence=ev,
        fixes=as_fixes([Msg("precision.fix_fp32_master_weights"), Msg("precision.fix_stochastic_rounding")]),
    )


def _eps_dominated(run: Run, q: Quantities) -> Finding | None:
    """`precision_stall`'s eps-dominated Adam with a loss that stalls."""
    ed = run.col("eps_dominated")
    edv = ed[np.isfinite(ed)]
    if not (edv.size >= LIMITS.eps_min_samples and float(np.median(edv)) >= LIMITS.eps_dominated_share and _stalled(q)):
        return None
    i = int(np.flatnonzero(np.isfinite(ed))[0])
    eps = _adam_eps(run)
    return Finding(
        cause="precision_stall",
        symptom="stall",
        severity="warning",
        confidence=0.6,
        step=int(q.steps[i]),
        evidence=[
            Msg("precision.eps_dominated", pct=float(np.median(edv)) * 100, eps=eps if eps else None),
            Msg("common.loss_not_improving"),
        ],
        fixes=[Fix.adam_eps(Msg("precision.fix_eps", eps=LIMITS.suggested_eps), eps=LIMITS.suggested_eps)],
    )


def _bf16_loss(q: Quantities) -> Finding | None:
    """`precision_stall`'s loss computed in bf16 (its values on the bf16 grid)."""
    grid = _bf16_loss_fraction(q)
    if not (grid is not None and grid[0] >= LIMITS.bf16_on_grid_share):
        return None
    # a bf16 loss is a plateau's cause only where the loss stalls: one that falls (a bf16 LLM
    # speedrun's 11.6 -> 4.0) trains through the coarse grid, and the grid alone is a note
    return Finding(
        cause="precision_stall",
        symptom="plateau",
        severity="warning" if _stalled(q) else "info",
        confidence=0.75,
        step=int(q.steps[q.finite_loss[0]]),
        evidence=[Msg("precision.bf16_loss_grid", on=grid[1], n=grid[2])],
        fixes=as_fixes([Msg("precision.fix_loss_in_fp32")]),
    )


def _adam_eps(run: Run) -> float | None:
    groups = (run.meta.get("optimizer") or {}).get("groups") or [{}]
    e = groups[0].get("eps") if groups else None
    return float(e) if isinstance(e, (int, float)) else None


def _stalled(q: Quantities) -> bool:
    lf = q.finite_loss
    if lf.size < LIMITS.stall_min_points:
        return False
    k = max(3, lf.size // 5)
    return float(np.median(q.loss[lf[-k:]])) > LIMITS.stalled_share * float(np.median(q.loss[lf[:k]]))


def _bf16_loss_fraction(q: Quantities) -> tuple[float, int, int] | None:
    x = q.loss[q.finite_loss]
    x = x[x > 0]
    if x.size < LIMITS.bf16_min_losses:
        return None
    e = np.floor(np.log2(x))
    g = np.exp2(e - 7)
    # a log rounded to d decimals moves a value by up to 0.5e-d; only trust coarser grids
    usable = g > LIMITS.grid_over_rounding * LIMITS.log_rounding
    if usable.sum() < LIMITS.bf16_min_losses:
        return None
    xs, gs = x[usable], g[usable]
    r = xs / gs
    on = np.abs(r - np.round(r)) * gs <= np.maximum(LIMITS.grid_rel_tol * xs, LIMITS.log_rounding)
    return float(on.mean()), int(on.sum()), int(on.size)
