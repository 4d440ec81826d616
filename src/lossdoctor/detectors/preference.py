"""Preference training (DPO, ORPO, KTO, CPO through TRL): the failures its own scalars show.

TRL logs, next to the loss, the implicit rewards (`rewards/chosen`, `rewards/rejected`: beta x the
policy/reference log-ratio of the chosen and rejected completions; ORPO: beta x the policy's own
log-probs), their difference (`rewards/margins`), the fraction of pairs ranked right
(`rewards/accuracies`) and the summed log-probs (`logps/chosen`, `logps/rejected`). Read together
they say what the loss curve cannot: a DPO loss that falls nicely while the chosen answers become
less likely, or one that reaches 0 because the policy ran away from the reference.

Four signatures, each from these scalars alone (live and offline alike):
- chosen and rejected rewards both falling, the chosen far more than the margin gained
  (likelihood displacement);
- margins growing without bound with the accuracy saturated at 1.0 (over-optimisation: LR too
  high or beta too small);
- `logps` NaN or -inf while the run was otherwise fine: a completion with no supervised token
  (truncated away), whose mean log-prob is 0/0;
- a DPO loss that never leaves ln 2 = 0.693 with margins at 0: nothing is learned (LR 0, frozen
  weights, or the reference is the policy).
The thresholds (`PreferenceLimits`) were set on the tiny TRL runs of tests/test_trl_preference.py
(in-sample): no held-out preference logs are scored yet.
The fixes name the options of the TRL version that ran (`meta.framework.trl_version`), since
TRL 1.0 removed `rpo_alpha` and `max_prompt_length` from `DPOConfig`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..findings import Finding, FixLike, as_fixes
from ..messages import Msg, round_sig
from ..records import Run
from .base import detector
from .quantities import Quantities

LN2 = math.log(2.0)
#: the columns TRL's preference trainers fill (`sources.columns.PREFERENCE_COLUMNS`)
PREFERENCE = (
    "rewards_chosen",
    "rewards_rejected",
    "rewards_margins",
    "rewards_accuracies",
    "logps_chosen",
    "logps_rejected",
)


@dataclass(frozen=True)
class PreferenceLimits:
    """Every value here was set on the tiny TRL runs of tests/test_trl_preference.py (in-sample)."""

    #: fewest logged points a trend is judged on
    min_points: int = 6
    #: the end of a trend: its last quarter, at least this many points
    tail_min: int = 3
    #: a mean accuracy this high over the tail: every pair ranked right, saturated
    saturated_accuracy: float = 0.99
    #: end margins this large are over-optimised (a lower bar with the accuracy saturated)
    runaway_margin_saturated: float = 5.0
    runaway_margin: float = 10.0
    #: still growing: the end margin exceeds the middle one by this much, or this share of it
    growth_min: float = 2.0
    growth_share: float = 0.25
    #: the window of each end of a reward trend: a quarter of the points, at least this many
    ends_min: int = 2
    #: the chosen reward fell by this many times the margin gained (gains below
    #: `gain_floor` count as that): likelihood displacement
    displacement_ratio: float = 2.0
    gain_floor: float = 0.5
    #: a DPO loss stuck at ln 2 needs this many points, each within `ln2_tolerance` of it, and
    #: margins within `zero_margin` of 0
    stuck_min_points: int = 8
    ln2_tolerance: float = 0.01
    zero_margin: float = 0.05
    #: beta below this is multiplied by `beta_raise` (capped at 1); above it doubled
    beta_cap: float = 1.0
    beta_raise: float = 5
    #: a last gradient norm this many times the earlier median: a divergence reached the
    #: log-probs (an order of magnitude, as the gradient detectors' growth test)
    grad_blew_up: float = 10


LIMITS = PreferenceLimits()
#: fewest logged points a trend is judged on (`PreferenceLimits.min_points`)
MIN_POINTS = LIMITS.min_points


@detector("preference", needs_any=PREFERENCE)
def preference(run: Run, q: Quantities) -> list[Finding]:
    """Every preference-training signature the run's scalars show (see the module docstring)."""
    out: list[Finding] = []
    for rule in (_nonfinite_logps, _logps_zero, _overoptimised, _displaced, _stuck_at_ln2):
        if rule is _stuck_at_ln2 and any(f.cause == "label_mask_empty" for f in out):
            continue  # log-probs of exactly 0: no supervised token, which keeps any weights at ln 2
        f = rule(run)
        if f is not None:
            out.append(f)
    return out


# --- the four signatures ----------------------------------------------------------------------------


def _nonfinite_logps(run: Run) -> Finding | None:
    """`logps/chosen` or `logps/rejected` NaN/-inf at a step where nothing else had gone wrong
    before: an empty completion (0 supervised tokens after truncation), not a divergence."""
    bad = np.zeros(len(run), dtype=bool)
    for col in ("logps_chosen", "logps_rejected"):
        bad |= run.logged(col) & ~np.isfinite(run.col(col))
    if not bad.any():
        return None
    i = int(np.argmax(bad))
    loss = run.col("loss")
    if (run.logged("loss")[:i] & ~np.isfinite(loss[:i])).any():
        return None  # the run was already non-finite: the log-probs are its consequence
    if _grad_norm_blew_up(run, i):
        return None  # a divergence reached the log-probs: the gradient detectors name it
    fw = _framework(run)
    prior = loss[:i][np.isfinite(loss[:i])]
    ev: list[str] = [
        Msg(
            "pref.logps_nonfinite",
            step=int(run.steps[i]),
            chosen=float(run.col("logps_chosen")[i]),
            rejected=float(run.col("logps_rejected")[i]),
        )
    ]
    if prior.size:
        ev.append(Msg("pref.loss_was_finite", loss=float(prior[-1])))
    ev.append(Msg("pref.logps_nonfinite_why"))
    return Finding(
        cause="label_mask_empty",
        symptom="nonfinite",
        severity="critical",
        confidence=0.75,
        step=int(run.steps[i]),
        evidence=ev,
        fixes=as_fixes(_truncation_fixes(fw)),
    )


def _logps_zero(run: Run) -> Finding | None:
    """`logps/chosen` and `logps/rejected` exactly 0.0 at every logged step, with the loss at ln 2
    (within `ln2_tolerance`), at any length: a summed log-prob of exactly 0 is a completion of
    probability 1, which no real completion has; it is a sum over no token at all (every label
    masked: the prompt fills max_length, or the collator masks the answers). Policy and reference then
    agree by construction, the rewards are 0 and the loss sits at ln 2 whatever the weights do."""
    steps, loss = _finite(run, "loss")
    _, lc = _finite(run, "logps_chosen")
    _, lr_ = _finite(run, "logps_rejected")
    if not (loss.size and lc.size and lr_.size) or float(np.max(np.abs(loss - LN2))) >= LIMITS.ln2_tolerance:
        return None
    if float(np.max(np.abs(lc))) != 0.0 or float(np.max(np.abs(lr_))) != 0.0:
        return None
    ev: list[str] = [
        Msg("pref.logps_exactly_zero", n=int(min(lc.size, lr_.size)), first=int(steps[0]), last=int(steps[-1])),
        Msg(
            "pref.loss_at_ln2",
            n=int(loss.size),
            first=int(steps[0]),
            last=int(steps[-1]),
            lo=float(np.min(loss)),
            hi=float(np.max(loss)),
        ),
        Msg("pref.logps_zero_why"),
    ]
    return Finding(
        cause="label_mask_empty",
        symptom="plateau",
        severity="critical",
        confidence=0.75,
        step=int(steps[0]),
        evidence=ev,
        fixes=as_fixes(_truncation_fixes(_framework(run))),
    )


def _overoptimised(run: Run) -> Finding | None:
    """Margins still growing at the end with the accuracy saturated: the policy separates the
    pairs by moving ever further from the reference, the loss heading to 0."""
    steps, m = _finite(run, "rewards_margins")
    if m.size < MIN_POINTS:
        return None
    tail = max(LIMITS.tail_min, m.size // 4)
    m_end = float(np.median(m[-tail:]))
    m_mid = float(np.median(m[m.size // 4 : m.size // 2 + 1]))
    _, acc = _finite(run, "rewards_accuracies")
    saturated = acc.size >= tail and float(np.mean(acc[-tail:])) >= LIMITS.saturated_accuracy
    runaway = LIMITS.runaway_margin_saturated if saturated else LIMITS.runaway_margin
    if m_end < runaway or (acc.size >= tail and not saturated):
        return None
    if not m_end >= m_mid + max(LIMITS.growth_min, LIMITS.growth_share * abs(m_mid)):
        return None  # large but no longer growing: a margin the data allows, not a runaway
    onset = int(steps[int(np.argmax(m >= min(LIMITS.runaway_margin_saturated, m_end / 2)))])
    ev: list[str] = [
        Msg("pref.margins_grow", first=int(steps[0]), last=int(steps[-1]), mid=m_mid, end=m_end, peak=float(np.max(m)))
    ]
    if saturated:
        ev.append(Msg("pref.accuracy_saturated", n=tail, acc=float(np.mean(acc[-tail:]))))
    loss = run.col("loss")[run.logged("loss") & np.isfinite(run.col("loss"))]
    if loss.size >= tail:
        ev.append(Msg("pref.loss_near_zero", loss=float(np.median(loss[-tail:]))))
    fw = _framework(run)
    fixes: list[FixLike] = [_lower_lr_fix(run, fw), _beta_fix(fw), Msg("pref.fix_ipo")]
    fixes.append(Msg("pref.fix_stop_early", step=onset))
    return Finding(
        cause="reward_overoptimization",
        symptom="divergence",
        severity="warning",
        confidence=0.7,
        step=onset,
        evidence=ev,
        fixes=as_fixes(fixes),
    )


def _displaced(run: Run) -> Finding | None:
    """Chosen and rejected rewards both falling, the chosen by far more than the margin gained:
    the policy makes the preferred answers less likely too (likelihood displacement)."""
    c, r, steps = _paired(run, "rewards_chosen", "rewards_rejected")
    if c.size < MIN_POINTS:
        return None
    k = max(LIMITS.ends_min, c.size // 4)
    dc = float(np.median(c[-k:]) - np.median(c[:k]))
    dr = float(np.median(r[-k:]) - np.median(r[:k]))
    gained = dc - dr
    if not (dc < 0 and dr < 0 and -dc > LIMITS.displacement_ratio * max(gained, LIMITS.gain_floor)):
        return None
    # dated where the chosen reward fell past half its fall for good
    half = float(np.median(c[:k])) + dc / 2
    above = np.nonzero(c > half)[0]
    i = int(above[-1]) + 1 if above.size else 0
    step = int(steps[min(i, c.size - 1)])
    ev: list[str] = [
        Msg(
            "pref.both_rewards_fall",
            first=int(steps[0]),
            last=int(steps[-1]),
            c0=float(np.median(c[:k])),
            c1=float(np.median(c[-k:])),
            r0=float(np.median(r[:k])),
            r1=float(np.median(r[-k:])),
            gained=gained,
        )
    ]
    _, lc = _finite(run, "logps_chosen")
    if lc.size >= 2 * k:
        ev.append(Msg("pref.chosen_logps_fall", a=float(np.median(lc[:k])), b=float(np.median(lc[-k:]))))
    ev.append(Msg("pref.displacement_why"))
    fw = _framework(run)
    return Finding(
        cause="likelihood_displacement",
        symptom="divergence",
        severity="warning",
        confidence=0.65,
        step=step,
        evidence=ev,
        fixes=as_fixes([_nll_fix(fw), _lower_lr_fix(run, fw)]),
    )


def _stuck_at_ln2(run: Run) -> Finding | None:
    """A DPO (sigmoid) loss within `ln2_tolerance` of ln 2 at every logged step, margins at 0: the policy's
    log-ratios never left the reference's. Exactly-zero rewards (or a zero LR) mean the weights
    never changed; tiny non-zero ones an LR too small to matter."""
    steps, loss = _finite(run, "loss")
    if loss.size < LIMITS.stuck_min_points or float(np.max(np.abs(loss - LN2))) >= LIMITS.ln2_tolerance:
        return None
    _, m = _finite(run, "rewards_margins")
    if m.size and float(np.max(np.abs(m))) >= LIMITS.zero_margin:
        return None
    rewards = np.concatenate([_finite(run, "rewards_chosen")[1], _finite(run, "rewards_rejected")[1]])
    if not (rewards.size or m.size):
        return None
    _, lr = _finite(run, "lr")
    lr_max = float(np.max(lr)) if lr.size else None
    ev: list[str] = [
        Msg(
            "pref.loss_at_ln2",
            n=int(loss.size),
            first=int(steps[0]),
            last=int(steps[-1]),
            lo=float(np.min(loss)),
            hi=float(np.max(loss)),
        )
    ]
    zero_rewards = bool(rewards.size) and float(np.max(np.abs(rewards))) == 0.0
    frozen = zero_rewards or lr_max == 0.0
    if zero_rewards:
        ev.append(Msg("pref.rewards_exactly_zero", n=int(rewards.size // 2 or rewards.size)))
    elif m.size:
        ev.append(Msg("pref.margins_tiny", m=float(np.max(np.abs(m)))))
    if frozen:
        fixes: list[FixLike] = []
        if lr_max == 0.0:
            ev.append(Msg("pref.lr_zero"))
            fixes.append(Msg("pref.fix_lr_zero"))
        fixes.append(Msg("pref.fix_frozen"))
        return Finding(
            cause="frozen_model",
            symptom="plateau",
            severity="critical",
            confidence=0.8,
            step=int(steps[0]),
            evidence=ev,
            fixes=as_fixes(fixes),
        )
    fixes = [
        Msg("pref.fix_raise_lr", lr=lr_max, new=round_sig(lr_max * 10)) if lr_max else Msg("pref.fix_raise_lr_unknown"),
        Msg("pref.fix_frozen"),
    ]
    # DPO's loss at ln 2 with zero margins says more than a flat loss does: it wins the tie
    return Finding(
        cause="lr_too_low",
        symptom="plateau",
        severity="warning",
        confidence=0.8,
        step=int(steps[0]),
        evidence=ev,
        fixes=as_fixes(fixes),
    )


# --- fixes in the words of the TRL that ran ------------------------------------------------------------


def _truncation_fixes(fw: dict[str, Any]) -> list[FixLike]:
    version = _trl_version(fw)
    max_length = fw.get("max_length")
    length = (
        Msg("pref.fix_max_length", n=int(max_length), new=int(max_length) * 2)
        if isinstance(max_length, int) and not isinstance(max_length, bool) and max_length > 0
        else Msg("pref.fix_max_length_unknown")
    )
    fixes: list[FixLike] = [length]
    if version is not None and version < (1, 0):
        fixes.append(Msg("pref.fix_prompt_length_old"))
    fixes.append(Msg("pref.fix_drop_empty"))
    return fixes


def _nll_fix(fw: dict[str, Any]) -> Msg:
    """An NLL term on the chosen answers (RPO): TRL 1.x combines loss types, older TRL had
    `rpo_alpha`; without a version both are named with theirs."""
    version = _trl_version(fw)
    if version is None:
        return Msg("pref.fix_nll_any")
    text = str(fw.get("trl_version"))
    if version < (1, 0):
        return Msg("pref.fix_nll_rpo_alpha", version=text)
    return Msg("pref.fix_nll_loss_type", version=text)


def _lower_lr_fix(run: Run, fw: dict[str, Any]) -> Msg:
    _, lr = _finite(run, "lr")
    peak = float(np.max(lr)) if lr.size else fw.get("learning_rate")
    if isinstance(peak, (int, float)) and not isinstance(peak, bool) and peak > 0:
        return Msg("pref.fix_lower_lr", lr=float(peak), new=round_sig(float(peak) / 10))
    return Msg("pref.fix_lower_lr_unknown")


def _beta_fix(fw: dict[str, Any]) -> Msg:
    beta = fw.get("beta")
    if isinstance(beta, (int, float)) and not isinstance(beta, bool) and beta > 0:
        raised = min(float(beta) * LIMITS.beta_raise, LIMITS.beta_cap) if beta < LIMITS.beta_cap else float(beta) * 2
        return Msg("pref.fix_raise_beta", beta=float(beta), new=round_sig(raised))
    return Msg("pref.fix_raise_beta_unknown")


# --- helpers ---------------------------------------------------------------------------------------------


def _framework(run: Run) -> dict[str, Any]:
    fw = run.meta.get("framework")
    return fw if isinstance(fw, dict) else {}


def _trl_version(fw: dict[str, Any]) -> tuple[int, ...] | None:
    text = fw.get("trl_version")
    if not isinstance(text, str):
        return None
    parts = []
    for piece in text.split(".")[:3]:
        digits = "".join(ch for ch in piece if ch.isdigit()) if piece[:1].isdigit() else ""
        parts.append(int(digits) if digits else 0)
    return tuple(parts)


def _finite(run: Run, col: str) -> tuple[np.ndarray, np.ndarray]:
    """(steps, values) where the column was logged and finite."""
    v = run.col(col)
    keep = run.logged(col) & np.isfinite(v)
    return run.steps[keep], v[keep]


def _paired(run: Run, a: str, b: str) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Two columns at the rows where both are logged and finite, and those rows' steps."""
    va, vb = run.col(a), run.col(b)
    keep = run.logged(a) & run.logged(b) & np.isfinite(va) & np.isfinite(vb)
    return va[keep], vb[keep], run.steps[keep]


def _grad_norm_blew_up(run: Run, i: int) -> bool:
    """The gradient norm just before row i was `grad_blew_up` times its earlier median, or non-finite."""
    g = run.col("grad_norm")[: i + 1]
    lg = run.logged("grad_norm")[: i + 1]
    g = g[lg]
    if g.size < 2:
        return False
    before = g[:-1]
    if not np.isfinite(before).all():
        return True
    last = float(before[-1])
    base = float(np.median(before[:-1])) if before.size > 1 else last
    return base > 0 and last > LIMITS.grad_blew_up * base
