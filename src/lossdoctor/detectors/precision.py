"""Low-precision traps: fp16 loss scaling out of control, updates below the weights' resolution,
an eps-dominated Adam, a loss computed in bf16."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..findings import Finding, Fix, FixLike, as_fixes
from ..messages import Msg
from ..records import Run
from .base import detector
from .gradients import clip_in_place
from .log_events import events_of
from .quantities import Quantities


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

    Fires when the scale drops below 1, when >= 10 consecutive steps are skipped, or when half of
    the last 20+ steps were skipped. Suppressed: the normal few back-offs while GradScaler finds
    its level at the start (a streak < 10 that ends), and the single back-off every growth
    interval. A long streak at the start that ends (an absurd init_scale) is a warning.
    """
    if not (run.has("scale") or run.has("skipped")):
        return []
    scale = run.col("scale")
    fin_scale = scale[np.isfinite(scale)]
    pattern = _skip_pattern(q, fin_scale)
    if pattern is None:
        return []
    s = int(q.steps[pattern.start])
    ev: list[str] = []
    if fin_scale.size:
        ev.append(Msg("precision.scale_fell", start=float(fin_scale[0]), end=float(fin_scale.min())))
    lo, hi = pattern.longest
    ev.append(Msg("precision.skipped_steps", skipped=int(q.skipped.sum()), n=q.n, longest=pattern.longest_len,
                  first=int(q.steps[lo]), last=int(q.steps[hi - 1])))
    fixes: list[FixLike] = []
    streak_end = int(q.steps[min(q.n - 1, hi if not pattern.ongoing else q.n - 1)])
    layer = _overflow_source(run, s, streak_end, ev, fixes)
    floor = _scale_floor(run)
    if floor is not None:
        ev.append(floor[1])
    _unnormalised_inputs(run, ev, fixes)
    if not pattern.ongoing and not pattern.below_one:
        fixes = _ended_streak(run, pattern, fin_scale, ev) + fixes
        return [Finding(cause="loss_scale_collapse", symptom="skipped_steps", severity="warning",
                        confidence=0.7, step=s, layer=layer, evidence=ev, fixes=as_fixes(fixes))]
    return [Finding(cause="loss_scale_collapse", symptom="skipped_steps", severity="critical",
                    confidence=0.9, step=s, layer=layer, evidence=ev, fixes=as_fixes(fixes))]


def _scale_floor(run: Run) -> tuple[int, Msg] | None:
    """(step, sentence) of the first line saying the loss scaler reached its minimum scale (fairseq's
    `FloatingPointError: Minimum loss scale reached (0.0001)`, DeepSpeed's `Current loss scale already
    at minimum`): the run stopped there, every step overflowing whatever the scale."""
    hits = events_of(run, ("loss_scale_min",))
    if not hits:
        return None
    step, e = hits[0]
    scale = e.get("scale")
    return step, Msg("precision.scale_floor", scale="?" if scale is None else scale, step=step,
                     text=e.get("text", ""))


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
    fixes: list[FixLike] = [Msg("precision.fix_gradients_overflow_fp16_clipped", clip=clip) if clip is not None
                        else Msg("precision.fix_gradients_overflow_fp16")]
    return [Finding(cause="loss_scale_collapse", symptom="skipped_steps", severity="critical", confidence=0.85,
                    step=overflows[0] if overflows else step, evidence=ev, fixes=as_fixes(fixes))]


def _skip_pattern(q: Quantities, fin_scale: np.ndarray) -> SkipPattern | None:
    """The skipped steps, when they amount to a collapse (see `loss_scale_collapse`); None when
    they are GradScaler's normal probing."""
    skipped = q.skipped
    if not skipped.any() or q.n < 5:
        return None
    streaks = _runs_of_true(skipped)
    longest = max(streaks, key=lambda r: r[1] - r[0])
    tail = skipped[-max(20, q.n // 10):]
    tail_frac = float(tail.mean()) if q.n >= 20 else 0.0
    below_one = fin_scale.size > 0 and float(fin_scale.min()) < 1.0
    long_streak = longest[1] - longest[0] >= 10
    if not (below_one or long_streak or tail_frac >= 0.5):
        return None
    ongoing = tail_frac >= 0.5 or (long_streak and longest[1] == q.n)
    start = longest[0] if long_streak else int(np.flatnonzero(skipped)[0])
    if ongoing:
        # onset: the start of the last streak of skips that reaches the end (allowing short gaps)
        start = streaks[-1][0]
        for a, b in reversed(streaks[:-1]):
            if start - b <= 3:
                start = a
            else:
                break
    return SkipPattern(streaks=streaks, longest=longest, below_one=below_one, long_streak=long_streak,
                       ongoing=ongoing, start=int(start))


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
    fixes.append(Msg("precision.fix_gradients_overflow_fp16_clipped", clip=clip) if clip is not None
                 else Msg("precision.fix_gradients_overflow_fp16"))
    return layer


def _unnormalised_inputs(run: Run, ev: list[str], fixes: list[FixLike]) -> None:
    """Inputs far beyond unit scale overflow fp16 in the first layer: said first among the fixes."""
    ia = run.col("input_absmax")
    if np.isfinite(ia).any() and float(np.nanmedian(ia)) > 1e3:
        ev.append(Msg("precision.inputs_unnormalised", absmax=float(np.nanmedian(ia))))
        fixes.insert(0, Msg("precision.fix_normalise_inputs"))


def _ended_streak(run: Run, pattern: SkipPattern, fin_scale: np.ndarray, ev: list[str]) -> list[FixLike]:
    """A streak that ended (a warning): GradScaler backing off from an absurd initial scale, or
    lost updates. Adds the evidence; returns the fixes to put first."""
    init = float((run.meta.get("scaler", {}) or {}).get("init_scale", float("nan")))
    s0 = float(fin_scale[0]) if fin_scale.size else float("nan")
    if (init > 2.0**24 or s0 > 2.0**24) and pattern.longest[0] <= 1:
        ev.append(Msg("precision.streak_ended_backing_off"))
        return [Fix.scaler(Msg("precision.fix_init_scale", init_scale=2.0**16, configured=init if init == init else s0),
                           init_scale=2.0**16)]
    ev.append(Msg("precision.streak_ended_lost_updates"))
    return []


@detector("precision_stall", needs_any=("frozen_frac", "eps_dominated", "loss"))
def precision_stall(run: Run, q: Quantities) -> list[Finding]:
    """Updates below the resolution of the weights' dtype (bf16 keeps ~8 bits: relative updates
    under ~2^-8 round away), an eps-dominated Adam, or a loss computed in bf16.

    Frozen weights: median `frozen_frac` >= 0.5 over sampled steps (half of the low-precision
    entries with a non-zero gradient did not move). Eps: >= 90% of Adam's second-moment entries
    under (10 eps)^2 with a loss that stalls. bf16 loss: >= 90% of >= 20 losses exactly on the bf16
    grid 2^(floor(log2 L) - 7); values are checked only where the grid is 10x coarser than the
    log's rounding, so rounded logs cannot fake it.
    """
    out: list[Finding] = []
    ff = run.col("frozen_frac")
    ffv = ff[np.isfinite(ff)]
    if ffv.size >= 2:
        med = float(np.median(ffv[1:] if ffv.size > 2 else ffv))
        if med >= 0.5:
            i = int(np.flatnonzero(np.isfinite(ff))[0])
            dtypes = (run.meta.get("model") or {}).get("param_dtypes", {})
            lr = q.lr[np.isfinite(q.lr)]
            ev: list[str] = [Msg("precision.frozen_entries", pct=med * 100, n=int(ffv.size))]
            if dtypes:
                ev.append(Msg("precision.param_dtypes", dtypes=str(dtypes)))
            if lr.size:
                ev.append(Msg("precision.below_bf16_resolution", lr=float(lr[-1])))
            out.append(Finding(
                cause="precision_stall", symptom="stall", severity="critical" if med >= 0.9 else "warning",
                confidence=0.85, step=int(q.steps[i]), evidence=ev,
                fixes=as_fixes([Msg("precision.fix_fp32_master_weights"), Msg("precision.fix_stochastic_rounding")])))
    ed = run.col("eps_dominated")
    edv = ed[np.isfinite(ed)]
    if edv.size >= 3 and float(np.median(edv)) >= 0.9 and _stalled(q):
        i = int(np.flatnonzero(np.isfinite(ed))[0])
        eps = _adam_eps(run)
        out.append(Finding(
            cause="precision_stall", symptom="stall", severity="warning", confidence=0.6,
            step=int(q.steps[i]),
            evidence=[Msg("precision.eps_dominated", pct=float(np.median(edv)) * 100, eps=eps if eps else None),
                      Msg("common.loss_not_improving")],
            fixes=[Fix.adam_eps(Msg("precision.fix_eps", eps=1e-12), eps=1e-12)]))
    grid = _bf16_loss_fraction(q)
    if grid is not None and grid[0] >= 0.9:
        out.append(Finding(
            cause="precision_stall", symptom="plateau", severity="warning", confidence=0.75,
            step=int(q.steps[q.finite_loss[0]]),
            evidence=[Msg("precision.bf16_loss_grid", on=grid[1], n=grid[2])],
            fixes=as_fixes([Msg("precision.fix_loss_in_fp32")])))
    return out


def _adam_eps(run: Run) -> float | None:
    groups = ((run.meta.get("optimizer") or {}).get("groups") or [{}])
    e = groups[0].get("eps") if groups else None
    return float(e) if isinstance(e, (int, float)) else None


def _stalled(q: Quantities) -> bool:
    lf = q.finite_loss
    if lf.size < 10:
        return False
    k = max(3, lf.size // 5)
    return float(np.median(q.loss[lf[-k:]])) > 0.9 * float(np.median(q.loss[lf[:k]]))


def _bf16_loss_fraction(q: Quantities) -> tuple[float, int, int] | None:
    x = q.loss[q.finite_loss]
    x = x[x > 0]
    if x.size < 20:
        return None
    e = np.floor(np.log2(x))
    g = np.exp2(e - 7)
    # a log rounded to d decimals moves a value by up to 0.5e-d; only trust coarser grids
    usable = g > 10 * 5e-5
    if usable.sum() < 20:
        return None
    xs, gs = x[usable], g[usable]
    r = xs / gs
    on = np.abs(r - np.round(r)) * gs <= np.maximum(1e-7 * xs, 5e-5)
    return float(on.mean()), int(on.sum()), int(on.size)
