"""Whether a log's evidence is strong enough to advise cutting the learning rate.

A cut slows every later step of the run, so a user who follows one on a run that was training is
worse off than one who was told nothing. Healthy runs show many curves a rule that reads the loss
alone takes for a too-large step: the first updates of a fine-tune raise the loss while the LR
warms up, a running mean started at 0 climbs over its first prints, an LR restart or a resume
without the optimizer's state or a data-mix change makes a bump the run then trains down again, a
reinforcement-learning objective grows by design. A cut is advised only on evidence that holds
(`cut_evidence`):

- the loss rose and kept rising: at the log's end it is still `hold_ratio` x or more its level
  before the rise, has kept `keep_share` of its rise to the peak (it did not train back down), and
  the rise stands `hold_z` sigmas out of the log's own point-to-point noise, and it ended above
  `tiny_end`; or it blew up (`blown_ratio` x its level before, or `blown`), however it ended;
- a NaN/Inf came at the end of a climb (the last finite losses `nan_climb` x their level before, or
  blown up to `blown`);
- the LR is far above what is usual for the optimizer the run names (`lr_usual.judge_lr`).

Without any of these the rule that saw the symptom still names it, as a warning (a NaN stays
critical: it is one), with the LR as a candidate and a measurement that tells (`measure_fix`):
re-run from before the onset at a third of the LR beside the current one.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from ..findings import Fix
from ..messages import Msg
from ..records import Run
from .lr_usual import above_every_family, judge_lr, peak_lr
from .quantities import Quantities


@dataclass(frozen=True)
class LrAdviceLimits:
    #: the loss at the log's end at least this many times its level before the rise: the spike
    #: rule's 2x (`SymptomLimits.spike_ratio`, where people call a loss diverging); a warm-up bump,
    #: an LR restart or a curriculum step in healthy runs reach x1.1-1.8 before the run trains
    #: them down (tests/healthy_shapes.py)
    hold_ratio: float = 2.0
    #: ... keeping at least this share of its rise to the peak (log space): a loss that came back
    #: down most of the way is training again (rule of thumb, untuned)
    keep_share: float = 0.5
    #: ... and the rise (log of end over the level before) clears this many standard errors of the
    #: difference of the two levels, from the point-to-point noise of the points from the onset on
    #: (`symptoms.rise_z`'s bar; a level of one point carries that point's whole noise)
    hold_z: float = 3.0
    #: the peak is the highest median of blocks of this share of the points after the onset (a
    #: peak is a stretch of the log, not one heavy-tailed draw)
    peak_block_share: float = 0.1
    #: a rise that ends below this level has not undone what the model learnt: weights a step too
    #: large blew up print losses back near the init's (ln 2 = 0.69 for the smallest classifier, ~1
    #: for a standardised regression); an objective near 0 by design (an RL loss, a KL penalty) or
    #: a converged loss's noise moves down there (rule of thumb, untuned)
    tiny_end: float = 0.05
    #: points before the onset whose median is the level the rise is measured from
    base_points: int = 5
    #: ... unless the last this many of them fall at every print (a trend, not noise): then the last
    #: one is that level (the median of a descent of 15 -> 1.4 sits far above where the rise began)
    descent_points: int = 3
    #: point-to-point differences needed to measure the noise (`SymptomLimits.noise_diffs`)
    noise_diffs: int = 3
    #: a NaN/Inf ends a climb when the highest of the last finite losses before it (up to
    #: `nan_tail` of them) is this many times the median of the ones before those
    #: (`SymptomLimits.diverged`'s 1.5)
    nan_climb: float = 1.5
    nan_tail: int = 3
    #: ... or is at least this large: weights blown up over steps (`differential.BLOWN_UP`)
    blown: float = 1e4
    #: a rise whose highest point reached this many times its level before blew the weights up,
    #: however the log ends (`differential.BLOWN_UP_RATIO`): healthy bumps reach x1.1-2
    blown_ratio: float = 100.0
    #: ... to a loss at least this large: a converged loss near 0.001-0.01 throws single batches
    #: x50-x300 (to 0.1-3) and trains on; a blow-up takes the loss past any trained model's (a
    #: cross-entropy of 100 is beyond every vocabulary's ln V; the zoo's Adam at LR 0.3 went
    #: 0.14 -> 194 and 1.2 -> 9.5e4)
    blown_floor: float = 100.0
    #: a rise from the log's first print, its lowest, that covers at least this share of its height
    #: in the first half of its points (each step adding less than the one before) fills up like an
    #: average started at 0 or an objective growing from 0 (a KL to a reference); a blow-up grows
    #: faster as it goes (fastai's 38 -> 377 -> 839: 42% in the first half)
    fill_share: float = 0.6
    #: ... from a first print at most this share of its peak: an average's first print holds
    #: 1 - beta^k of the loss (0.41 for beta 0.9 printed every 5 steps, 0.05 for 0.99 every 5)
    fill_from: float = 0.4
    #: ... rising gradually: no one interval carries more than this share of the height (a jump that
    #: then holds is no filling up: litgpt's 1.70 -> 11.46 -> 11.75 put 94% in its first interval)
    fill_step_share: float = 0.5
    #: ... over at least this many intervals
    fill_intervals: int = 3


LIMITS = LrAdviceLimits()


def lr_beyond_usual(run: Run, q: Quantities) -> Msg | None:
    """The sentence saying the run's peak LR is far above what is usual for its optimizer (or, when
    the log does not name one, for every common optimizer), or None."""
    lr = peak_lr(run, q)
    judged = judge_lr(run, q, lr)
    if judged is not None:
        return judged[1] if judged[0] == "high" else None
    return above_every_family(lr)


def cut_evidence(run: Run, q: Quantities, row: int, nonfinite: bool = False) -> tuple[Msg | None, Msg]:
    """(the evidence that holds for an LR cut, or None; why a cut is withheld when it is None) for
    a symptom that began at row `row` (for a NaN: the first non-finite row)."""
    high = lr_beyond_usual(run, q)
    if high is not None:
        return high, high
    if nonfinite:
        return nan_after_climb(q, row)
    return held_rise(q, row)


def _finite_before(q: Quantities, row: int) -> np.ndarray:
    lf = q.finite_loss
    return q.loss[lf[lf < row]]


def nan_after_climb(q: Quantities, row: int, lim: LrAdviceLimits = LIMITS) -> tuple[Msg | None, Msg]:
    """A NaN/Inf at `row` after a climb: the last finite losses rose `nan_climb` x over the ones
    before them, or grew to `blown`."""
    x = _finite_before(q, row)
    if x.size == 0:
        return None, Msg("lr.advice.nan_first")
    top = float(np.max(np.abs(x[-lim.nan_tail :])))
    if top >= lim.blown:
        return Msg("lr.advice.nan_blown", loss=top), Msg("lr.advice.nan_blown", loss=top)
    m = min(lim.nan_tail, x.size // 2)
    if m == 0:
        return None, Msg("lr.advice.nan_calm", last=float(x[-1]), base=float(x[0]))
    base = float(np.median(np.abs(x[:-m])))
    top = float(np.max(np.abs(x[-m:])))
    if base > 0 and top >= lim.nan_climb * base:
        return Msg("lr.advice.nan_climb", top=top, base=base), Msg("lr.advice.nan_climb", top=top, base=base)
    return None, Msg("lr.advice.nan_calm", last=top, base=base)


def held_rise(q: Quantities, row: int, lim: LrAdviceLimits = LIMITS) -> tuple[Msg | None, Msg]:
    """A rise that began at `row` and held to the log's end: see the module docstring."""
    lf = q.finite_loss[q.finite_loss < q.healthy_end]
    x = q.loss[lf]
    i = int(np.searchsorted(lf, row))
    if x.size == 0 or i >= x.size or (x[max(0, i - 1) :] <= 0).any():
        return None, Msg("lr.advice.unmeasured")
    before = x[max(0, i - lim.base_points) : i] if i > 0 else x[:1]
    base, base_n = float(np.median(before)), before.size
    if _descent_len(before) >= lim.descent_points:
        # a descent, not a level: the rise began where it ended (15 -> 1.4, then up), one point
        base, base_n = float(before[-1]), 1
    after = x[i:]
    k = max(1, min(3, after.size // 4))
    end = float(np.median(after[-k:]))
    w = max(1, int(after.size * lim.peak_block_share))
    nb = max(1, after.size // w)
    peak = max(float(np.max(np.median(after[: nb * w].reshape(nb, w), axis=1))), end)
    rise, top = math.log(end / base), math.log(peak / base)
    noise = point_noise(after)
    data = dict(base=base, end=end, peak=peak, x=end / base, step=int(q.steps[lf[i]]))
    high = float(np.max(after))
    if (high >= lim.blown_ratio * base and high >= lim.blown_floor) or high >= lim.blown:
        return Msg("lr.advice.blown", top=high, **data), Msg("lr.advice.blown", top=high, **data)
    if top > 0 and rise < lim.keep_share * top:
        return None, Msg("lr.advice.fell_again", **data)
    if end < lim.tiny_end:
        return None, Msg("lr.advice.tiny", **data, level=lim.tiny_end)
    if fills_up(x[: i + 1 + int(np.argmax(after))]):
        return None, Msg("lr.advice.fills_up", first=float(x[0]), **data)
    if rise < math.log(lim.hold_ratio):
        return None, Msg("lr.advice.small_rise", **data, need=lim.hold_ratio)
    se = noise * math.sqrt(1 / base_n + 1 / k)  # the level before and the end are medians of few points (or one)
    if rise < lim.hold_z * se:
        return None, Msg("lr.advice.in_noise", **data, z=rise / se)
    return Msg("lr.advice.held", **data), Msg("lr.advice.held", **data)


def _descent_len(x: np.ndarray) -> int:
    """How many of the last points of x fall at every print (the last one counted; 0 for none)."""
    d = np.diff(x)
    up = np.flatnonzero(d >= 0)
    return int(x.size - (up[-1] + 1)) if up.size else int(x.size)


def point_noise(x: np.ndarray, lim: LrAdviceLimits = LIMITS) -> float:
    """The noise of one point, in log space: the robust sigma of the point-to-point differences of
    ln x over sqrt 2 (as `symptoms.point_noise`); 0 with fewer than `noise_diffs` differences."""
    if x.size <= lim.noise_diffs:
        return 0.0
    d = np.diff(np.log(x))
    return float(1.4826 * np.median(np.abs(d - np.median(d)))) / math.sqrt(2)


def fills_up(x: np.ndarray, lim: LrAdviceLimits = LIMITS) -> bool:
    """The points `x` (the log's first print to the rise's peak) rise gradually from the first,
    which is their lowest and at most `fill_from` of the last, covering `fill_share` of the height
    in the first half of the points: a running mean or a growing objective filling up, not a blow-up."""
    if x.size < lim.fill_intervals + 1 or float(x[0]) > lim.fill_from * float(x[-1]) or float(np.min(x)) < float(x[0]):
        return False
    height = float(x[-1]) - float(x[0])
    if float(np.max(np.diff(x))) > lim.fill_step_share * height:
        return False
    mid = float(np.median(x[(x.size - 1) // 2 : (x.size + 2) // 2]))
    return mid - float(x[0]) >= lim.fill_share * height


def measure_fix(step: int) -> Fix:
    """The measurement that says whether the LR is the cause, instead of a cut."""
    return Fix("measure", None, Msg("lr.fix.measure_first", step=step))


def withheld(why: Msg) -> Msg:
    """The evidence line that says why no cut is advised."""
    return Msg("lr.advice.withheld", why=why)
