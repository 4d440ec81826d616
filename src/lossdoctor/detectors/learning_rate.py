"""Learning rate: too high (jumps, divergence, oscillation), too low (crawl), schedule mistakes.

The update/parameter ratio ||dW||/||W|| (DeepDiagnosis: healthy ~1e-3, outside [1e-5, 0.1] is a
problem) turns "the loss looks odd" into a number the fix can be computed from:
lr_new = lr * 1e-3 / ratio.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from ..findings import Finding, Fix, as_fixes
from ..messages import Msg
from ..records import Run
from ..sources.metadata import optimizer_family
from .base import detector, finest_print, round_sig
from .gradients import clip_in_place
from .lr_advice import cut_evidence, measure_fix, point_noise, withheld
from .lr_usual import judge_lr, peak_lr, with_lr_evidence
from .quantities import Quantities

HEALTHY_RATIO = 1e-3
#: the factors of the current LR to try when it is too high / too low and no replay measured
#: better: the LR range test's usual span around a bad LR (fastai `lr_find`, Smith 2017: the
#: best LR sits within ~10x of where the loss stops falling); a range, never a point
LR_RANGE_DOWN = (0.1, 1 / 3)
LR_RANGE_UP = (3.0, 10.0)
#: ||dW||/||W|| of one step that only a far too large LR produces (healthy first steps: < 0.1)
BLOWN_RATIO = 0.5


def _adam(q: Quantities) -> bool:
    """An Adam-family optimizer (Adam, AdamW, LAMB...): its update is normalised per element."""
    return optimizer_family(q.optimizer) == "adam"


def _lr_at(q: Quantities, i: int) -> float | None:
    lr = q.lr[: i + 1]
    lr = lr[np.isfinite(lr)]
    return float(lr[-1]) if lr.size else None


def _peak_by(q: Quantities, i: int) -> tuple[float, int] | None:
    """(the highest LR the run had used up to row i, its row): the LR a user set (`learning_rate`)
    once a warm-up has reached it; the row where it was first reached."""
    lr = q.lr[: i + 1]
    ok = np.flatnonzero(np.isfinite(lr) & (lr > 0))
    if not ok.size:
        return None
    j = int(ok[np.argmax(lr[ok])])
    return float(lr[j]), j


def _ratio_at(run: Run, a: int, b: int, lr: float | None) -> float | None:
    """The update/param ratio at LR `lr`, from rows [a, b): each row's ratio per unit of the LR it
    used (an update is LR x direction for SGD and Adam alike), times `lr`; so ratios measured during
    a warm-up are not read as the peak LR's. The plain median when the LR was not logged."""
    r = run.col("update_ratio")[a:b]
    x = run.col("lr")[a:b] if run.has("lr") else np.full(r.shape, np.nan)
    ok = np.isfinite(r) & (r > 0) & np.isfinite(x) & (x > 0)
    if lr is not None and ok.sum() >= 1:
        return float(np.median(r[ok] / x[ok])) * lr
    return _ratio_median(run, a, b)


def _ratio_median(run: Run, a: int, b: int) -> float | None:
    r = run.col("update_ratio")[a:b]
    r = r[np.isfinite(r) & (r > 0)]
    return float(np.median(r)) if r.size else None


def _suggest_lr(
    lr: float | None, ratio: float | None, fallback_factor: float, raise_: bool = False, adam: bool = False
) -> Fix:
    """The LR to use: the one that brings the update ratio to ~1e-3 when it was measured, else the
    current one times `fallback_factor`; said as "raise" for a too-low LR, "set" otherwise.
    Under an Adam-family optimizer the ratio says nothing about the LR's quality (its update is
    ~lr x sign per element by construction, so the ratio is ~lr / the weights' scale): there the
    fix is a range to try (LR_RANGE), never a point; the LR probe (triage/lr_probe.py) replaces it
    with the LR a replay measured to be better, when one can run."""
    if lr is None:
        return Fix.lr(Msg("lr.fix.lower_by", x=1 / fallback_factor), factor=fallback_factor)
    if adam:
        lo, hi = LR_RANGE_UP if raise_ else LR_RANGE_DOWN
        lo, hi = round_sig(lr * lo, 2), round_sig(lr * hi, 2)
        return Fix.lr_range(
            Msg("lr.fix.range_up" if raise_ else "lr.fix.range", lo=lo, hi=hi, now=lr), lo=lo, hi=hi, now=lr
        )
    if ratio:
        new = round_sig(lr * HEALTHY_RATIO / ratio, 1)
        return Fix.lr(
            Msg("lr.fix.raise_ratio", lr=new, now=lr, ratio=ratio)
            if raise_
            else Msg("lr.fix.set_ratio", lr=new, now=lr, ratio=ratio),
            to=new,
            now=lr,
        )
    new = round_sig(lr * fallback_factor, 1)
    return Fix.lr(Msg("lr.fix.raise", lr=new, now=lr) if raise_ else Msg("lr.fix.set", lr=new, now=lr), to=new, now=lr)


@detector("lr_too_high", needs=("loss",))
@with_lr_evidence
def lr_too_high(run: Run, q: Quantities) -> list[Finding]:
    """Loss jumps or diverges from the start, or oscillates with huge updates.

    (a) early jump: a loss in the first 10 steps >= 3x the starting loss that does not come back
        (median of the next steps >= 1.5x start) or comes with an update ratio > 0.03;
    (b) divergence from the start: non-finite within the first 50 steps (or 10% of the run) with
        the loss never below 0.8x its start;
    (c) divergence later: the last fifth's median >= 2x the best fifth and >= 1.5x the first;
    (d) oscillation: median update ratio > 0.1 and no progress;
    (e) an update half as large as the weights (ratio >= 0.5; healthy first steps stay below 0.1)
        in the first steps, and no progress since.
    Suppressed: (b) when the update ratio was recorded and stayed small (< 0.05) up to the blow-up:
    weights that did not move much did not diverge because of the LR (that is grad_explosion's
    or the architecture's story, e.g. an unstable recurrence).
    Suppressed: a run whose loss improves overall (noise is not divergence) for (c)/(d).
    Suppressed: (b) on a log that does not begin where the run began (`shows_run_start`); there (a)
    needs a level shift.
    (f) for any optimizer whose usual LR range is known (the Adam family above all, where the update
        ratio cannot judge the LR): an LR beyond the usual range (lr_usual.py) whose run shows it,
        activations that grew >= 30x and a loss that kept >= half of its first level (OVERSHOOT).
        A warning: the LR probe (triage/lr_probe.py) confirms it by replay or withdraws it.
    The rules are tried in this order: (b), (a), then on >= 20 points (c), (e), (d), (f).
    (a), (b) and (c) read the curve alone: their LR cut stands only on evidence that holds
    (`lr_advice.cut_evidence`), else they name the symptom with a measurement (`_as_certain`);
    (d), (e) and (f) rest on measured update sizes and the LR's usual range.
    """
    if q.finite_loss.size < 3:
        return []
    short = q.finite_loss.size < 20
    found = _nonfinite_from_start(run, q) or _early_jump(run, q) or ([] if short else _late_divergence(run, q))
    if found or short:
        return [_as_certain(run, q, f) for f in found]
    return _blown_update(run, q) or _oscillation(run, q) or _above_usual_and_growing(run, q)


#: the confidence of a curve rule's LR finding whose cut is withheld: the symptom is certain, the
#: LR one candidate among several (the differential's `UNSEPARATED_CONF` is 0.4, the weakest curve
#: rule's 0.5)
UNCERTAIN_LR = 0.5


def _as_certain(run: Run, q: Quantities, f: Finding) -> Finding:
    """The finding as its evidence supports it: its LR cut when the curve's evidence holds (a rise
    that held, a NaN after a climb, an LR beyond the usual range), else a warning (a NaN stays
    critical) whose fix is the measurement that tells, with the reason no cut is advised."""
    nonfinite = f.symptom == "nonfinite"
    row = q.first_bad if nonfinite and q.first_bad is not None else int(np.searchsorted(q.steps, f.step or 0))
    held, why = cut_evidence(run, q, row, nonfinite)
    if held is not None:
        return f
    f.evidence.append(withheld(why))
    f.fixes = as_fixes([measure_fix(int(f.step) if f.step is not None else int(q.steps[row]))])
    f.confidence = min(f.confidence, UNCERTAIN_LR)
    if not nonfinite:
        f.severity = "warning"
    return f


def _first_loss_ref(q: Quantities) -> tuple[float, float]:
    """(the loss before any update, the reference start: the lower of it and the early median,
    which may already hold the blow-up)."""
    first_loss = float(q.loss[q.finite_loss[0]])
    return first_loss, min(q.loss_start, first_loss)


def shows_run_start(run: Run, q: Quantities) -> bool:
    """Whether the log begins where the run began: rule (b), "never improved from the start", needs
    it; rule (a), "jumped over its first loss", asks more of an excerpt that does not.
    An excerpt pasted from mid-run does not: an HF console paste whose first epoch is >= 1, or a
    first logged step more than 50 steps and two logging intervals after step 0."""
    first_epoch = run.meta.get("first_epoch")
    if isinstance(first_epoch, (int, float)) and first_epoch >= 1:
        return False
    s0 = float(q.steps[0]) if q.n else 0.0
    if run.meta.get("steps_from") == "epoch":
        return s0 <= 1  # rows at their epoch: from epoch 0 or 1, or from later on
    iv = run.meta.get("log_interval")
    iv = iv if isinstance(iv, (int, float)) and iv >= 1 else 1
    return not (s0 > 50 and s0 > 2 * iv)


def _nonfinite_from_start(run: Run, q: Quantities) -> list[Finding]:
    """(b) non-finite within the first 50 steps (or 10% of the run), never below 0.8x the start."""
    if q.first_bad is None or q.first_bad > max(50, q.n // 10) or not shows_run_start(run, q):
        return []
    loss, lf = q.loss, q.finite_loss
    _, ref0 = _first_loss_ref(q)
    pre = loss[: q.first_bad]
    pre = pre[np.isfinite(pre)]
    ur_pre = run.col("update_ratio")[: q.first_bad]
    ur_pre = ur_pre[np.isfinite(ur_pre)]
    small_updates = ur_pre.size >= 3 and float(ur_pre.max()) < 0.05
    if not (pre.size >= 1 and float(pre.min()) >= 0.8 * ref0) or small_updates or _explained_nonfinite(run, q):
        return []
    s = q.first_bad_step
    ev: list[str] = [Msg("lr.high.never_improved", best=float(pre.min()), start=ref0, s=s)]
    # the onset is where the divergence began (the loss rising from the first updates on), not
    # where it finally overflowed
    rising = lf[(lf >= 1) & (lf < q.first_bad)]
    rising = rising[loss[rising] >= 1.5 * ref0]
    if rising.size and ref0 > 0 and _rose_out_of_noise(loss[lf[(lf >= rising[0]) & (lf < q.first_bad)]], ref0):
        r0 = int(rising[0])
        ev.append(Msg("lr.high.already_rising", s=int(q.steps[r0]), loss=float(loss[r0]), x=float(loss[r0]) / ref0))
        s = int(q.steps[r0])
    gn = q.grad_norm[: q.first_bad]
    gn = gn[np.isfinite(gn)]
    if gn.size >= 2 and gn[-1] > 10 * gn[0]:
        ev.append(Msg("lr.high.grad_grew", a=float(gn[0]), b=float(gn[-1]), n=q.first_bad))
    ratio_early = _ratio_median(run, 0, min(q.n, 20))
    if ratio_early:
        ev.append(Msg("lr.high.ratio", r=ratio_early))
    lr, more = _lr_reached(q, max(q.first_bad, 5))
    return [
        Finding(
            cause="lr_too_high",
            symptom="nonfinite",
            severity="critical",
            confidence=0.8,
            step=int(q.steps[0] if s is None else s),
            evidence=ev + more,
            fixes=as_fixes(
                [_suggest_lr(lr, _ratio_at(run, 0, min(q.n, 20), lr), 0.1, adam=_adam(q)), _warmup_fix(run, q)]
            ),
        )
    ]


#: robust sigmas of the log's own point noise the level after a rise's first point must clear over the
#: first loss to date the finding there (`lr_advice.LrAdviceLimits.hold_z`'s bar)
ONSET_Z = 3.0


def _rose_out_of_noise(after: np.ndarray, ref0: float) -> bool:
    """The losses from a rise's first point to the NaN sit above the first loss `ref0` by more than
    ONSET_Z x their own point-to-point noise (`lr_advice.point_noise`; with too few points to
    measure it, any rise counts): micro-batch losses of one optimizer step that swing x2-x7 around
    a lucky low first draw (litgpt's 0.53, 1.55, 2.33, 1.14, 3.67, 1.13 before any update) are no
    rise to date a divergence from."""
    if after.size == 0 or (after <= 0).any():
        return True
    rise = math.log(float(np.median(after)) / ref0)
    return rise >= ONSET_Z * point_noise(after) * math.sqrt(1 + 1 / after.size)


def _lr_reached(q: Quantities, i: int) -> tuple[float | None, list[str]]:
    """The LR a fix starts from: the highest the run had used by row i (the peak of a warm-up that
    reached it), and the evidence naming it and the step that first used it."""
    peak = _peak_by(q, min(q.n - 1, i))
    if peak is None:
        return _lr_at(q, min(q.n - 1, i)), []
    lr, j = peak
    return lr, [Msg("lr.high.peak_at", lr=lr, s=int(q.steps[j]))]


def _early_jump(run: Run, q: Quantities) -> list[Finding]:
    """(a) a loss in the first 10 steps >= 3x the first that stays up, comes with big updates, or
    runs into a non-finite step within 20 steps. On a mid-run excerpt (`shows_run_start` false) the
    first loss is one noisy batch of a trained model, not the loss before any update, and 3x of a
    low fine-tuning loss (0.06 -> 0.19) is within its batch-to-batch spread: there the jump counts
    only as a level shift, every later loss of the window staying >= 3x the first (1.70 -> 10-12)."""
    loss, lf = q.loss, q.finite_loss
    first_loss, _ = _first_loss_ref(q)
    head = lf[lf < min(q.n, 11)]
    if head.size < 3 or first_loss <= 0 or bool((loss[lf] < 0).any()):
        # a signed objective (an RL policy loss around 0): a ratio to its first value means nothing;
        # an exact 0 is not a sign (a Trainer logs 0 once its loss overflowed)
        return []
    jump_rows = head[1:][loss[head[1:]] >= 3 * first_loss]
    if not jump_rows.size:
        return []
    j = int(jump_rows[0])
    before = float(np.median(loss[lf[lf < j]]))
    after = lf[(lf > j) & (lf <= j + 20)]
    stays = after.size >= 3 and float(np.median(loss[after])) >= 1.5 * max(first_loss, before)
    if not shows_run_start(run, q) and not (after.size >= 3 and float(loss[after].min()) >= 3 * first_loss):
        return []
    if int(q.steps[lf[0]]) > 1 and int(np.sum(lf < j)) < FIRST_JUMP_BASE and _stays_below(loss[after], first_loss):
        return []  # (see FIRST_JUMP_BASE)
    ratio_j = _ratio_median(run, 0, j + 2)
    if not (stays or (ratio_j is not None and ratio_j > 0.03) or (q.first_bad is not None and q.first_bad <= j + 20)):
        return []
    s = int(q.steps[j])
    ev: list[str] = [Msg("lr.high.jumped", a=first_loss, b=float(loss[j]), s=s)]
    onset = _climb_onset(q, j, first_loss)
    if onset < j:
        ev.append(
            Msg(
                "lr.high.already_rising",
                s=int(q.steps[onset]),
                loss=float(loss[onset]),
                x=float(loss[onset]) / first_loss,
            )
        )
    if stays:
        ev.append(Msg("lr.high.stayed", m=float(np.median(loss[after])), n=int(after.size)))
    if ratio_j:
        ev.append(Msg("lr.high.ratio", r=ratio_j))
    lr, more = _lr_reached(q, max(j, 5))
    return [
        Finding(
            cause="lr_too_high",
            symptom="divergence",
            severity="critical",
            confidence=0.8,
            step=int(q.steps[onset]),
            evidence=ev + more,
            fixes=as_fixes([_suggest_lr(lr, _ratio_at(run, 0, j + 2, lr), 0.1, adam=_adam(q)), _warmup_fix(run, q)]),
        )
    ]


#: logged points before the jump that make a baseline when the log starts after step 1: there its
#: first point is one batch among others, not the loss before any update, and a low draw (a depth
#: net's 0.169, then 0.49-0.84 at steps 6-11) is no start to have jumped 3x from; the jump and climb
#: symptoms judge such a log against its own noise
FIRST_JUMP_BASE = 3
#: ... unless the loss after the jump stays this many times above that first point: no low draw
#: explains a fine-tune's 1.70 followed by 10-12 (a blown-up LM at its vocabulary's chance level)
FIRST_JUMP_FAR = 5.0


def _stays_below(after: np.ndarray, first: float) -> bool:
    """The loss after the jump (its median) is under FIRST_JUMP_FAR x the first point."""
    return after.size == 0 or float(np.median(after)) < FIRST_JUMP_FAR * first


def _climb_onset(q: Quantities, j: int, first_loss: float) -> int:
    """The row where the climb that reached row j began: walking back over the finite rows while
    the loss stays >= 1.5x the first. The finding is dated there, where training went wrong, not at
    the row where the loss first crossed 3x."""
    lf = q.finite_loss
    rows = lf[(lf >= 1) & (lf <= j)]
    onset = j
    for r in rows[::-1][1:]:
        if q.loss[r] < 1.5 * first_loss:
            break
        onset = int(r)
    return onset


def _fifths(q: Quantities) -> tuple[float, float, float]:
    """(median of the first fifth, of the last fifth, lowest median of the five fifths)."""
    loss, lf = q.loss, q.finite_loss
    k = max(3, lf.size // 5)
    fifths = [float(np.median(loss[c])) for c in np.array_split(lf, 5) if c.size]
    return float(np.median(loss[lf[:k]])), float(np.median(loss[lf[-k:]])), min(fifths)


def _late_divergence(run: Run, q: Quantities) -> list[Finding]:
    """(c) the last fifth's median >= 2x the best fifth's and >= 1.5x the first's, no NaN: judged on
    block medians so noise around a tiny best loss is not a rise. On a log that shows the run's start
    the loss fell first (`_fell_first`): one that rose from the run's first print never improved,
    which the differential's no-fall symptom weighs (an objective growing from 0 rises so by
    design); an excerpt may begin at its best."""
    first, last, best = _fifths(q)
    if not (best > 0 and last >= 2 * best and last >= 1.5 * first and q.first_bad is None):
        return []
    if shows_run_start(run, q) and not _fell_first(q.loss[q.finite_loss]):
        return []
    i = _divergence_onset(q.loss, q.finite_loss, best)
    s = int(q.steps[i])
    ratio = _ratio_median(run, max(0, i - 20), i + 1)
    return [
        Finding(
            cause="lr_too_high",
            symptom="divergence",
            severity="critical",
            confidence=0.65,
            step=s,
            evidence=[Msg("lr.high.fell_then_rose", best=best, last=last, x=last / best, s=s)],
            fixes=[_suggest_lr(_lr_at(q, i), ratio, 0.3, adam=_adam(q))],
        )
    ]


#: a loss fell first when its lowest block median is at most this share of its first block's
#: (blocks of `_divergence_onset`'s size; rule of thumb, untuned)
FELL_FIRST = 0.9


def _fell_first(x: np.ndarray) -> bool:
    """The lowest median of blocks of max(5, n/20) points is not the first block's, and is at most
    FELL_FIRST of it: the loss improved before anything else happened."""
    w = max(5, x.size // 20)
    nb = x.size // w
    if not nb:
        return False
    med = np.median(x[: nb * w].reshape(nb, w), axis=1)
    b = int(np.argmin(med))
    return b > 0 and float(med[b]) <= FELL_FIRST * float(med[0])


def _blown_update(run: Run, q: Quantities) -> list[Finding]:
    """(e) the first updates replaced the weights: an update half as large as the weights themselves
    (||dW|| >= 0.5 ||W||) does not happen in a healthy run (its first steps stay below 0.1), and a
    model hit that hard sits near chance afterwards (saturated activations) without any NaN."""
    first_loss, ref0 = _first_loss_ref(q)
    _, last, _ = _fifths(q)
    ur_all = run.col("update_ratio")
    ur = ur_all[: min(q.n, 25)]
    ur = ur[np.isfinite(ur)]
    if not (ur.size and float(ur.max()) >= BLOWN_RATIO and last >= 0.8 * ref0):
        return []
    i = int(np.flatnonzero(np.isfinite(ur_all) & (ur_all >= BLOWN_RATIO))[0])
    s = int(q.steps[i])
    ev: list[str] = [
        Msg("lr.high.blown", s=s, r=float(ur.max())),
        Msg("lr.high.not_improved_since", start=first_loss, last=last),
    ]
    chance = run.meta.get("chance_loss")
    if isinstance(chance, (int, float)) and chance > 0 and last >= 0.9 * chance:
        ev.append(Msg("lr.high.at_chance", c=float(chance)))
    act = run.col("act_absmax")
    if np.isfinite(act[:1]).any() and np.isfinite(act).any() and float(np.nanmax(act)) > 100 * float(act[0]):
        ev.append(Msg("lr.high.activations_grew", a=float(act[0]), b=float(np.nanmax(act))))
    return [
        Finding(
            cause="lr_too_high",
            symptom="plateau",
            severity="critical",
            confidence=0.8,
            step=s,
            evidence=ev,
            fixes=as_fixes([_suggest_lr(_lr_at(q, i), float(ur.max()), 0.01, adam=_adam(q)), _warmup_fix(run, q)]),
        )
    ]


def _oscillation(run: Run, q: Quantities) -> list[Finding]:
    """(d) a median update ratio > 0.1 (DeepDiagnosis' upper bound) and no progress."""
    first, last, _ = _fifths(q)
    ratio_all = _ratio_median(run, 0, q.n)
    if ratio_all is None or ratio_all <= 0.1 or last < 0.9 * first:
        return []
    return [
        Finding(
            cause="lr_too_high",
            symptom="oscillation",
            severity="warning",
            confidence=0.6,
            step=int(q.steps[q.finite_loss[0]]),
            evidence=[Msg("lr.high.ratio_median", r=ratio_all), Msg("lr.high.not_improving", first=first, last=last)],
            fixes=[_suggest_lr(_lr_at(q, q.n - 1), ratio_all, 0.1, adam=_adam(q))],
        )
    ]


@dataclass(frozen=True)
class Overshoot:
    """Rule (f): an LR above the usual range that the run shows to be too high."""

    #: the largest activation over the first step's: ~2-4x at the best LR, 127x at 10x the best
    #: (tuning on the dev split: the 3-layer GPT loop of tests/lr_kit.py, in-sample)
    act_growth: float = 30.0
    #: the last fifth's median loss at least this share of the first fifth's (the best LR keeps
    #: ~15%, 10x the best ~68%; same loop, in-sample)
    loss_left: float = 0.5


OVERSHOOT = Overshoot()


def _above_usual_and_growing(run: Run, q: Quantities) -> list[Finding]:
    """(f) the LR is beyond the usual range, the activations grew and the loss stays high."""
    lr = peak_lr(run, q)
    judged = judge_lr(run, q, lr)
    if judged is None or judged[0] != "high" or not run.has("act_absmax"):
        return []
    act = run.col("act_absmax")
    ok = np.flatnonzero(np.isfinite(act) & (act > 0))
    if ok.size < 5:
        return []
    a0, amax = float(act[ok[0]]), float(np.max(act[ok]))
    first, last, _ = _fifths(q)
    if amax < OVERSHOOT.act_growth * a0 or not (first > 0 and last >= OVERSHOOT.loss_left * first):
        return []
    s = int(q.steps[q.finite_loss[0]])
    return [
        Finding(
            cause="lr_too_high",
            symptom="slow_convergence",
            severity="warning",
            confidence=0.55,
            step=s,
            evidence=[
                judged[1],
                Msg("lr.high.activations_grew", a=a0, b=amax),
                Msg("lr.high.loss_stays", first=first, last=last),
            ],
            fixes=[_suggest_lr(lr, None, 0.1, adam=True)],
        )
    ]


def _explained_nonfinite(run: Run, q: Quantities) -> bool:
    """The first non-finite step has a direct explanation (bad data, an attention row, an
    overflowing activation, an empty label mask): then it is not the learning rate."""
    s = q.first_bad_step
    if s is None or q.first_bad is None:
        return False
    if run.event("batch_nonfinite_detail").get(s) is not None:
        return True
    if any(st <= s for st in run.event("batch_nonfinite_detail")):
        return True
    fi = run.col("label_ignored_frac")
    if np.isfinite(fi).any() and float(np.nanmax(fi[: q.first_bad + 1])) >= 1.0:
        return True
    fwd = run.event("fwd_first_nonfinite").get(s)
    if fwd and q.first_bad <= 1:
        return True  # broken on the first step: before any update, so not the LR
    return False


def _divergence_onset(loss: np.ndarray, lf: np.ndarray, best: float) -> int:
    """The first row past the margin in the first block (after the best block) whose median gave
    back a real share of the progress made (> best + max(0.5*best, 10% of start-best)) and after
    which no block comes back below half that margin. Relative-only thresholds would fire on noise around a loss of 1e-4."""
    x = loss[lf]
    w = max(5, x.size // 20)
    nb = x.size // w
    med = np.array([np.median(x[b * w : (b + 1) * w]) for b in range(nb)])
    b_best = int(np.argmin(med))
    margin = max(0.5 * med[b_best], 0.1 * (med[0] - med[b_best]))
    for b in range(b_best + 1, nb):
        if med[b] > med[b_best] + margin and (med[b:] > med[b_best] + 0.5 * margin).all():
            # the first row of the unbroken run of rows past that margin that reaches into this block:
            # a block is 5+ rows, and a climb that began at the fourth row of the block before (too
            # few to move that block's median) or at the third of this one began there
            past = x > med[b_best] + margin
            i = b * w + (int(np.argmax(past[b * w : (b + 1) * w])) if past[b * w : (b + 1) * w].any() else 0)
            while i > 0 and past[i - 1] and past[i]:
                i -= 1
            return int(lf[i])
    return int(lf[min(x.size - 1, (b_best + 1) * w)])


def _warmup_fix(run: Run, q: Quantities) -> Msg:
    lr = q.lr[np.isfinite(q.lr)]
    if lr.size >= 3 and lr[0] >= 0.9 * lr.max():
        return Msg("lr.fix.warmup_from_peak")
    clip = clip_in_place(run)
    if clip is not None:
        return Msg("lr.fix_warmup_already_clipped", max_norm=clip)
    return Msg("lr.fix.warmup_clip")


@detector("lr_too_low", needs=("loss", "update_ratio"), hint=Msg("hint.update_ratio"))
@with_lr_evidence
def lr_too_low(run: Run, q: Quantities) -> list[Finding]:
    """Updates are tiny and the loss crawls: median update ratio < 1e-5 (DeepDiagnosis' lower
    bound) over >= 50 steps with the loss down by less than 30%. Suppressed when low-precision
    weights are frozen (that is precision_stall: the LR is fine, the dtype eats the update), and
    when the loss already fell to <= 5% of its start (a converged model's updates are tiny)."""
    lf = q.finite_loss
    if lf.size < 50:
        return []
    ratio = _ratio_median(run, min(5, q.n - 1), q.n)
    if ratio is None or ratio >= 1e-5:
        return []
    ff = run.col("frozen_frac")
    if np.isfinite(ff).any() and float(np.nanmedian(ff)) > 0.3:
        return []
    k = max(3, lf.size // 5)
    first = float(np.median(q.loss[lf[:k]]))
    last = float(np.median(q.loss[lf[-k:]]))
    if last < 0.7 * first or (q.loss_start > 0 and last <= 0.05 * q.loss_start):
        return []
    lr = _lr_at(q, q.n - 1)
    new = _suggest_lr(lr, ratio, 10.0, raise_=True, adam=_adam(q))
    return [
        Finding(
            cause="lr_too_low",
            symptom="slow_convergence",
            severity="warning",
            confidence=0.75,
            step=int(q.steps[lf[0]]),
            evidence=[Msg("lr.low.ratio_median", r=ratio), Msg("lr.low.crawl", first=first, last=last, n=int(lf.size))],
            fixes=[new],
        )
    ]


@detector("lr_schedule_error", needs=("lr",), hint=Msg("hint.lr"))
def lr_schedule_error(run: Run, q: Quantities) -> list[Finding]:
    """The schedule is not what was meant.

    - warm-up stepped per epoch: the LR rises in >= 3 jumps spaced >= 5 steps apart with flat
      stretches in between (a per-step warm-up rises every step);
    - cosine period shorter than the run: after decaying below half its peak the LR climbs back
      above half the peak (suppressed for schedulers that restart on purpose);
    - an LR that rises >= 10x in one step after warm-up began (a drop is a normal step decay);
    - LR stuck at 0 for 10+ steps after the first.
    An LR of 0 throughout is critical in a log that shows the run's start; in a late excerpt it is
    a schedule's end (silent).
    The last two are reported only when neither of the first two was.
    """
    idx = np.flatnonzero(np.isfinite(q.lr))
    if idx.size < 10:
        return []
    x = q.lr[idx]
    if float(x.max()) <= 0:
        if _another_group_trains(run):  # the first group at LR 0 only: loop_wiring.param_group_lr_zero
            return []
        if zero_lr_explained(run, q, float(q.steps[idx[-1]])):
            return []
        return [
            Finding(
                cause="lr_schedule_error",
                symptom="stall",
                severity="critical",
                confidence=0.9,
                step=int(q.steps[idx[0]]),
                evidence=[Msg("lr.schedule.all_zero")],
                fixes=as_fixes([Msg("lr.schedule.fix_all_zero")]),
            )
        ]
    out = _staircase_warmup(run, q, idx, x) + _cosine_restart(run, q, idx, x)
    # an LR back at its peak in one step is what a warm restart (SGDR) or a cycle does on purpose
    cyclic = restarts_on_purpose(run) or _periodic_restarts(q, idx, x)
    return out or ([] if cyclic else _one_step_rise(q, idx, x)) or _stuck_at_zero(q, idx, x)


#: an LR printed as 0 on every row while the loss's last third is at most this share of its first
#: third is a small LR rounded by the print (`"train_lr": "0.000"` beside losses falling 2.0 -> 1.2):
#: at an LR of 0 nothing moves, so a loss that learns says the LR is not 0
LR_ZERO_LEARNS = 0.9
#: ... judged on at least this many finite loss points (a first, a middle and a last third)
LR_ZERO_POINTS = 3


def zero_lr_explained(run: Run, q: Quantities, last_step: float) -> bool:
    """An LR of 0 on every logged row that is no fault, for the detector and the symptom alike:
    - an excerpt from past the run's start: what a schedule decaying to 0 (linear or trapezoidal to
      zero, a cosine to 0, a WSD cool-down) prints over its last steps, and what a fixed-decimals
      print of its small final LR rounds to;
    - a log that ends within the warm-up the text names (`Set warmup steps = 86135`): a warm-up from 0
      printed with a few decimals shows 0 for its first steps;
    - a loss that learns (`loss_learns`): the weights moved, so the LR is a small one the print rounded."""
    return not shows_run_start(run, q) or _in_warmup(run, last_step) or loss_learns(q)


def _in_warmup(run: Run, last_step: float) -> bool:
    w = run.meta.get("warmup_steps")
    return isinstance(w, (int, float)) and not isinstance(w, bool) and last_step < w


def loss_learns(q: Quantities) -> bool:
    """The finite loss's last third is at most `LR_ZERO_LEARNS` of its first third (>= `LR_ZERO_POINTS`
    positive points)."""
    x = q.loss[q.finite_loss]
    if x.size < LR_ZERO_POINTS or (x <= 0).any():
        return False
    k = max(1, x.size // LR_ZERO_POINTS)
    return float(np.median(x[-k:])) <= LR_ZERO_LEARNS * float(np.median(x[:k]))


def restarts_on_purpose(run: Run) -> bool:
    """The run's scheduler (meta.json) restarts or cycles the LR by design
    (CosineAnnealingWarmRestarts, CyclicLR, OneCycleLR)."""
    return cycles_by_design(str((run.meta.get("scheduler") or {}).get("class") or ""))


def cycles_by_design(scheduler_class: str) -> bool:
    """A scheduler class whose LR restarts or cycles on purpose, by its name (the live trigger
    reads it from the scheduler object, the detectors from meta.json)."""
    name = scheduler_class.lower()
    return any(k in name for k in ("restart", "cyclic", "onecycle", "cycle"))


def _staircase_warmup(run: Run, q: Quantities, idx: np.ndarray, x: np.ndarray) -> list[Finding]:
    """Within the initial rising phase (up to the first real decrease), >= 3 rises with flat
    stretches of >= 3 logged rows and >= 5 steps between them: a warm-up stepped per epoch. (A log
    every N steps of a per-step warm-up changes at every logged row, which is not a staircase.)"""
    peak = float(x.max())
    dec = np.flatnonzero(x < 0.99 * np.maximum.accumulate(x))
    rise = x[: dec[0] if dec.size else x.size]
    if rise.size < 10:
        return []
    ch = np.flatnonzero(np.diff(rise) > 1e-12 * peak)
    if ch.size < 3:
        return []
    gaps = np.diff(ch)
    steps_gap = np.diff(q.steps[idx][ch])
    if gaps.size < 2 or np.median(gaps) < 3 or np.median(steps_gap) < 5 or _rounding_steps(run, rise, ch):
        return []
    s = int(q.steps[idx[ch[0] + 1]])
    k = int(np.median(steps_gap))
    return [
        Finding(
            cause="lr_schedule_error",
            symptom="slow_convergence",
            severity="warning",
            confidence=0.75,
            step=s,
            evidence=[
                Msg("lr.schedule.staircase", n=int(ch.size), k=k, a=float(rise[ch[0]]), b=float(rise[ch[0] + 1]), s=s)
            ],
            fixes=as_fixes([Msg("lr.schedule.fix_staircase")]),
        )
    ]


def _rounding_steps(run: Run, rise: np.ndarray, ch: np.ndarray) -> bool:
    """Every rise of the staircase is one unit of the prints' last digit (`lr=1e-06`, `2e-06`, ...
    from a log that rounds the LR to 6 decimals): a per-step ramp printed that coarsely shows the
    same flat stretches, so the stairs may be the print's, not the scheduler's. The unit is the
    finest print's (a round value such as 5e-05 prints shorter than the rounding). Only printed text
    rounds: the values watch, TensorBoard or a JSON state recorded are the scheduler's own."""
    if run.source not in PRINTED_SOURCES:
        return False
    up = rise[rise > 0]
    unit = finest_print(up) if up.size else 0.0
    jumps = np.diff(rise)[ch]
    return unit > 0 and bool((jumps <= STAIR_ROUNDING * unit).all())


#: a rise up to this many units of the print's last digit is within what rounding a ramp shows
STAIR_ROUNDING = 1.01
#: the sources whose values were read from a console's printed text (sources/stdout.py names a
#: console by its framework where that is Megatron or DeepSpeed; sources/any_text.py)
PRINTED_SOURCES = ("console", "text", "megatron", "deepspeed")


def _cosine_restart(run: Run, q: Quantities, idx: np.ndarray, x: np.ndarray) -> list[Finding]:
    """After falling below half of the peak so far, the LR climbs back above half of it: a cosine
    period shorter than the run (silent for schedulers that restart or cycle on purpose)."""
    if restarts_on_purpose(run) or _periodic_restarts(q, idx, x):
        return []
    running_peak = np.maximum.accumulate(x)
    dropped = np.flatnonzero(x < 0.5 * running_peak)
    if not dropped.size:
        return []
    d0 = int(dropped[0])
    tail = x[d0:]
    run_min = np.minimum.accumulate(tail)
    climb = np.flatnonzero((tail >= 0.5 * running_peak[d0:]) & (tail > 2 * run_min + 1e-30))
    if not climb.size:
        return []
    j = d0 + int(climb[0])
    tmin = d0 + int(np.argmin(x[d0 : j + 1]))
    first_peak = int(np.argmax(x[:d0])) if d0 > 0 else 0
    s_min, s = int(q.steps[idx[tmin]]), int(q.steps[idx[j]])
    period = s_min - int(q.steps[idx[first_peak]])
    total = int(q.steps[idx[-1]]) + 1
    return [
        Finding(
            cause="lr_schedule_error",
            symptom="divergence",
            severity="warning",
            confidence=0.8,
            step=s,
            evidence=[
                Msg(
                    "lr.schedule.cosine_restart",
                    peak=float(running_peak[d0]),
                    low=float(x[tmin]),
                    s_min=s_min,
                    back=float(x[j]),
                    s=s,
                    period=period,
                    total=total,
                )
            ],
            fixes=as_fixes([Msg("lr.schedule.fix_cosine", total=total)]),
        )
    ]


def _periodic_restarts(q: Quantities, idx: np.ndarray, x: np.ndarray) -> bool:
    """Warm restarts read from the LR alone (a log without the scheduler's name): the LR jumps from
    below half its peak back to the peak in one logged row, at least twice, at regular steps (equal
    periods, or periods that grow by a constant factor: SGDR's T_mult). A cosine period shorter than
    the run climbs back gradually instead."""
    peak = np.maximum.accumulate(x)
    jumps = np.flatnonzero((x[1:] >= 0.9 * peak[:-1]) & (x[:-1] < 0.5 * peak[:-1])) + 1
    if jumps.size < 2:
        return False
    at = np.concatenate([[q.steps[idx[0]]], q.steps[idx[jumps]]]).astype(float)
    periods = np.diff(at)
    if np.any(periods <= 0):
        return False
    equal = np.ptp(periods) <= 0.1 * periods.mean()
    ratios = periods[1:] / periods[:-1]
    geometric = ratios.size >= 1 and np.ptp(ratios) <= 0.1 * ratios.mean() and ratios.mean() > 1
    return bool(equal or geometric)


def _one_step_rise(q: Quantities, idx: np.ndarray, x: np.ndarray) -> list[Finding]:
    """The LR rose >= 10x in one step, after the first step (a drop is a normal step decay)."""
    if x.size < 3:
        return []
    prev, cur = x[1:-1], x[2:]
    with np.errstate(divide="ignore", invalid="ignore"):
        r = np.where(prev > 0, cur / prev, 1.0)
    big = np.flatnonzero(r >= 10)
    if not big.size:
        return []
    j = int(big[0]) + 2
    s = int(q.steps[idx[j]])
    return [
        Finding(
            cause="lr_schedule_error",
            symptom="spike",
            severity="warning",
            confidence=0.7,
            step=s,
            evidence=[Msg("lr.schedule.one_step_rise", x=float(r[big[0]]), a=float(x[j - 1]), b=float(x[j]), s=s)],
            fixes=as_fixes([Msg("lr.schedule.fix_one_step_rise")]),
        )
    ]


def _stuck_at_zero(q: Quantities, idx: np.ndarray, x: np.ndarray) -> list[Finding]:
    """The LR is exactly 0 at >= 10 logged steps after the first (its peak was above 0)."""
    zero = np.flatnonzero(x[1:] == 0)
    if zero.size < 10:
        return []
    s = int(q.steps[idx[zero[0] + 1]])
    return [
        Finding(
            cause="lr_schedule_error",
            symptom="stall",
            severity="warning",
            confidence=0.7,
            step=s,
            evidence=[Msg("lr.schedule.stuck_zero", n=int(zero.size), s=s)],
            fixes=as_fixes([Msg("lr.schedule.fix_stuck_zero")]),
        )
    ]


def _another_group_trains(run: Run) -> bool:
    """The `lr` column is the first param group's: True when another group's LR is above 0 at some
    step (`lr_groups`), so the run as a whole is not at LR 0."""
    ev = run.events.get("lr_groups") or {}
    return any(
        isinstance(v, (list, tuple)) and any(isinstance(a, (int, float)) and a > 0 for a in v[1:]) for v in ev.values()
    )
