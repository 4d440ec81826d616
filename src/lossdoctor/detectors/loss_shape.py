"""The shape of the loss curve: spikes after training well, and a plateau high above where clean
data would go (noisy labels)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from ..findings import Finding, FixLike, as_fixes
from ..messages import Msg
from ..records import Run
from .base import detector
from .gradients import clip_fix
from .learning_rate import shows_run_start
from .lr_advice import held_rise, lr_beyond_usual, withheld
from .quantities import Quantities, trailing_baseline


@dataclass(frozen=True)
class LossShapeLimits:
    #: the spike rule's trailing baseline: ~1/20 of the run, within these bounds (rule of thumb)
    window_share: int = 20
    window_min: int = 10
    window_max: int = 100
    #: MAD -> standard deviation for a normal distribution (the textbook constant), and a floor
    #: so a flat log-loss has a finite z
    mad_to_sigma: float = 1.4826
    sigma_floor: float = 1e-3
    #: robust sigmas (log space) over the trailing median: a spike (tuned on the zoo's healthy
    #: controls: heavy-tailed small-batch losses reach z ~5)
    spike_z: float = 8
    #: ... and this many times the trailing median (a 2x jump is where people call it a spike)
    spike_ratio: float = 2
    #: a smaller jump (this many times) counts when it gives back this share of all the progress
    #: (an LM at 2.6 from 4.3 that sees random tokens jumps to 4.8: less than 2x, all its progress)
    small_spike_ratio: float = 1.5
    small_spike_give_back: float = 0.5
    #: the run has trained: its baseline is below this share of the start
    trained_share: float = 0.9
    #: and a spike gives back at least this share of the progress made (a 100x jump of a loss at
    #: 1e-4 is nothing in substance; measured on the zoo's healthy controls)
    give_back: float = 0.2
    #: the skip-window fix starts this many steps before the spike
    skip_before: int = 20
    #: finite losses needed for the spike rule (two baseline windows and some)
    spike_min_points: int = 40
    #: a spike's log excursion must exceed this many times the largest before it (so heavy-tailed
    #: noise adapts its own threshold; tuned on the zoo's small-batch controls)
    over_prior_excursion: float = 2
    #: steps after the spike looked at for a recovery, and the level it must come back below
    #: (times the baseline)
    recovery_steps: int = 50
    recovered_ratio: float = 1.3
    #: at most this many spike findings per run (the rest are counted in the evidence)
    max_incidents: int = 5
    #: prior points needed for the input/grad medians the evidence compares with
    min_prior_inputs: int = 3
    min_prior_grads: int = 5
    #: an input absmax this many times its recent median: an outlier batch (rule of thumb)
    outlier_input: float = 10
    #: an LR this many times the step before: the LR changed at the spike
    lr_jump: float = 1.5
    #: a gradient norm this many times its recent median: a grad-norm surge (rule of thumb)
    grad_surge: float = 5
    #: noisy_data: finite losses needed (a plateau needs a long log)
    plateau_min_points: int = 100
    #: the end median over the last tenth (at least this many points)
    end_min_points: int = 5
    #: the end still at this share of the start: the loss stalled high
    stalled_high_share: float = 0.75
    #: the end at this share of the chance level: the model learned nothing beyond the label
    #: frequencies
    at_chance_share: float = 0.9
    #: the second half improved by less than 3% (5% at chance: a creep there is no learning)
    stalled_mid_share: float = 0.97
    stalled_mid_share_at_chance: float = 0.95
    #: gradient norms needed, and the late/early ratio that says the optimizer keeps pushing
    plateau_min_grads: int = 20
    grad_stays_share: float = 0.5
    #: a median update ratio below this is no healthy update (Karpathy's ~1e-3 rule of thumb,
    #: with a decade of slack)
    min_update_ratio: float = 1e-4


LIMITS = LossShapeLimits()


def spike_window(n: int) -> int:
    """Steps in the trailing baseline of the spike rule: 1/`window_share` of the run, within
    [`window_min`, `window_max`] (`LossShapeLimits`)."""
    return int(min(LIMITS.window_max, max(LIMITS.window_min, n // LIMITS.window_share)))


def robust_sigma(mad: Any) -> Any:
    """Standard deviation from the median absolute deviation of log-losses (plus a floor)."""
    return LIMITS.mad_to_sigma * mad + LIMITS.sigma_floor


def is_spike(z: Any, ratio: Any, base: Any, loss: Any, start: Any) -> Any:
    """The spike rule, shared with the streaming version the incident flow runs (floats or arrays):
    a robust z above `spike_z` in log space and `spike_ratio` times the trailing median, in a run
    that has trained (median below `trained_share` of its start), giving back `give_back` of the
    progress made: heavy-tailed noise around a loss of 1e-4 (one hard sample in a small batch) is
    100x in ratio but nothing in substance. A smaller jump (`small_spike_ratio`) counts when it
    gives back `small_spike_give_back` of all the progress made (numbers: `LossShapeLimits`)."""
    L = LIMITS
    return (
        (z > L.spike_z)
        & (
            (ratio >= L.spike_ratio)
            | ((ratio >= L.small_spike_ratio) & ((loss - base) >= L.small_spike_give_back * (start - base)))
        )
        & (base < L.trained_share * start)
        & ((loss - base) >= L.give_back * (start - base))
    )


def spike_fixes(step: int, *, recovered: bool, recurring: bool, lr_high: bool = False) -> list[FixLike]:
    """The fix that fits the spike. A one-off that recovered is a data window the model could not
    digest: skip it (PaLM and OLMo rewind to a checkpoint before the spike and skip the batches
    around it); cutting the LR would slow the whole run for one bad window, so it is never advised.
    Recurring spikes are the optimiser's instability: QK-layernorm, z-loss, and a lower peak LR when
    the LR is far above what is usual for the optimizer (`lr_high`); otherwise the LR's part is
    measured (the window replayed at half the LR), not cut: small batches' heavy-tailed losses
    spike and come back again and again in runs that train (`lr_advice`)."""
    skip = Msg("spike.fix.skip_window", step=step, first=max(0, step - LIMITS.skip_before))
    if recurring:
        return [Msg("spike.fix.recurring") if lr_high else Msg("spike.fix.recurring_measure", step=step), skip]
    if recovered:
        return [skip]
    return [skip, Msg("spike.fix.if_again")]


@detector("loss_spike", needs=("loss",))
def loss_spike(run: Run, q: Quantities) -> list[Finding]:
    """The loss suddenly rises far above its recent level after training well, without NaN.

    A spike is a finite loss that passes `is_spike` against the trailing block and exceeds
    `over_prior_excursion` times the largest excursion seen in the blocks before it, in log space
    (so heavy-tailed small-batch noise adapts its own threshold). Critical when the loss does not
    come back below `recovered_ratio` times the baseline within `recovery_steps` (numbers:
    `LossShapeLimits`). The evidence says what coincided with it: an
    outlier batch, an LR change, a grad-norm surge.
    """
    lf = q.finite_loss
    if lf.size < LIMITS.spike_min_points:
        return []
    x = q.loss[lf]
    if (x <= 0).any():
        return []
    lx = np.log(x)
    w = spike_window(lf.size)
    med, mad = trailing_baseline(lx, w)
    sigma = robust_sigma(mad)
    z = (lx - med) / sigma
    ratio = np.exp(lx - med)
    # the largest excursion so far (in the blocks before this one, skipping the first), as a ratio
    ex = np.exp(lx - np.where(np.isfinite(med), med, lx))
    nb = lx.size // w
    block_max = np.array([np.nanmax(ex[b * w : (b + 1) * w]) for b in range(nb)] + [np.nan])
    block_max[0] = np.nan
    upto = np.fmax.accumulate(np.nan_to_num(block_max, nan=-np.inf))  # max over blocks 0..b
    prior_max = np.full(lx.size, np.nan)
    for b in range(2, nb + 1):
        lo, hi = b * w, min((b + 1) * w, lx.size)
        prior_max[lo:hi] = upto[b - 1] if np.isfinite(upto[b - 1]) else np.nan
    # "trained" is judged against the first loss too: a run whose first updates blew the loss up
    # has a high median start, and a baseline below it is not progress
    start = min(q.loss_start, float(x[0]))
    cond = np.isfinite(z) & is_spike(z, ratio, np.exp(med), x, start)
    # the excursion must be more than twice the largest before it, measured in log space like z
    # (x1.78 after excursions of x1.15 stands out; x3 after excursions of x1.9 does not)
    prior_log = np.log(np.maximum(np.nan_to_num(prior_max, nan=1.0), 1.0))
    cond &= ~(np.isfinite(prior_max) & (lx - med <= LIMITS.over_prior_excursion * prior_log))
    hits = np.flatnonzero(cond)
    if hits.size == 0:
        return []
    # one finding per incident: a new incident starts w clean steps after the last spike
    groups: list[list[int]] = []
    for h in hits:
        if groups and h - groups[-1][-1] <= w:
            groups[-1].append(int(h))
        else:
            groups.append([int(h)])
    # a "spike" that runs into the first non-finite step is the beginning of that blow-up, which
    # the non-finite detectors report (with this rise as their evidence)
    if q.first_bad is not None:
        groups = [g for g in groups if not (0 <= q.first_bad - int(lf[g[0]]) <= w)]
    return [_spike_finding(run, q, lf, x, med, z, w, g, len(groups)) for g in groups[: LIMITS.max_incidents]]


def _spike_finding(
    run: Run,
    q: Quantities,
    lf: np.ndarray,
    x: np.ndarray,
    med: np.ndarray,
    z: np.ndarray,
    w: int,
    group: list[int],
    n_incidents: int,
) -> Finding:
    j = group[0]
    i = int(lf[j])
    s = int(q.steps[i])
    base = float(np.exp(med[j]))
    peak = float(x[j])
    after = x[j + 1 : j + 1 + LIMITS.recovery_steps]
    recovered = after.size > 0 and bool((after < LIMITS.recovered_ratio * base).any())
    ev: list[str] = [Msg("spike.jumped", peak=peak, s=s, x=peak / base, base=base, w=w, z=float(z[j]))]
    ev.append(Msg("spike.came_back_50") if recovered else Msg("scalars.spike.not_back"))
    if len(group) > 1:
        ev.append(Msg("spike.steps_in_incident", n=len(group)))
    if n_incidents > 1:
        ev.append(Msg("spike.incidents", n=n_incidents))
    one_off = recovered and n_incidents == 1
    fixes = _spike_context(run, q, i, w, ev, clip=not one_off)
    # a jump that did not come back is a divergence only while the rise holds (`lr_advice.held_rise`):
    # a run that trains its loss down again at the new level (a data-mix change, a resume) needs no LR
    # cut if it spikes again, and is a warning
    held = recovered or held_rise(q, i)[0] is not None
    if not held:
        ev.append(withheld(held_rise(q, i)[1]))
    fixes += spike_fixes(
        s, recovered=recovered or not held, recurring=n_incidents > 1, lr_high=lr_beyond_usual(run, q) is not None
    )
    if one_off:
        ev.append(Msg("scalars.spike.one_off"))
    return Finding(
        cause="loss_spike",
        symptom="spike" if recovered else "divergence",
        severity="warning" if recovered or not held else "critical",
        confidence=0.7,
        step=s,
        batch=s,
        evidence=ev,
        fixes=as_fixes(fixes),
    )


def _spike_context(run: Run, q: Quantities, i: int, w: int, ev: list[str], clip: bool) -> list[FixLike]:
    """What stood out at the spike's row against the `w` rows before it (an outlier batch, an LR
    that jumped, a gradient that surged), added to `ev`; the fixes that follow from it. Kept apart
    from the spike's own shape so each reads on its own."""
    s = int(q.steps[i])
    fixes: list[FixLike] = []
    ia = run.col("input_absmax")
    if np.isfinite(ia[i]) and np.isfinite(ia[max(0, i - w) : i]).sum() >= LIMITS.min_prior_inputs:
        m = float(np.nanmedian(ia[max(0, i - w) : i]))
        if ia[i] > LIMITS.outlier_input * m:
            ev.append(Msg("spike.outlier_batch", s=s, a=float(ia[i]), m=m))
            fixes.append(Msg("spike.fix.outlier_batch", s=s))
    lr = q.lr
    if np.isfinite(lr[i]) and i > 0 and np.isfinite(lr[i - 1]) and lr[i - 1] > 0 and lr[i] / lr[i - 1] > LIMITS.lr_jump:
        ev.append(Msg("spike.lr_changed", a=float(lr[i - 1]), b=float(lr[i])))
    gn = q.grad_norm
    if np.isfinite(gn[max(0, i - w) : i]).sum() >= LIMITS.min_prior_grads and np.isfinite(gn[i]):
        g = gn[max(0, i - w) : i]
        g = g[np.isfinite(g)]
        gm = float(np.median(g))
        if gn[i] > LIMITS.grad_surge * gm:
            ev.append(Msg("spike.grad_surged", g=float(gn[i]), x=float(gn[i]) / gm))
        c = clip_fix(q, i)
        if c and clip:
            fixes.append(c)
    return fixes


def _chance_evidence(chance: Any, at_chance: bool, end: float, ur: np.ndarray) -> list[str]:
    """What the chance level adds to a stall's evidence: the loss sits at it (with the update size
    when logged, else the alternatives that fit as well), or what it is."""
    if not isinstance(chance, (int, float)):
        return []
    if not at_chance:
        return [Msg("noisy.chance", c=float(chance))]
    at = dict(pct=end / float(chance) * 100, c=float(chance))
    if ur.size:
        return [Msg("noisy.at_chance_moving", **at, r=float(np.median(ur)))]
    # without the update size, the chance-level alternatives fit as well
    return [Msg("noisy.at_chance", **at), Msg("noisy.at_chance_alternatives")]


def _stall_began(x: np.ndarray, end: float, k: int, share: float) -> int:
    """Where a stalled loss stopped falling: the start of the first block of `k` points after the
    last block whose median is above what the stall allows (`end / share`); 0 for a loss that never
    fell (a model at chance from its first step stalled there, not at the log's middle)."""
    starts = np.arange(0, x.size - k + 1, k)
    above = [i for i in starts if float(np.median(x[i : i + k])) > end / share]
    return int(above[-1]) + k if above else 0


def _stall_evidence(
    n: int, levels: tuple[float, float, float], grads: tuple[float, float], ur: np.ndarray
) -> list[str]:
    """What a stall's finding says first: where the loss stopped (from its `start`, `mid` and `end`
    levels over `n` points, with the gain of its second half) and, when the gradient norm stayed at
    its early level, that too (the model is pushed as hard as at its start and cannot fit)."""
    start, mid, end = levels
    g0, g1 = grads
    gain = (1 - end / mid) * 100
    plateau = dict(n=int(n), end=end, pct=end / start * 100, start=start)
    ev: list[str] = [
        Msg("noisy.plateau_gain", **plateau, gain=gain) if gain > 0 else Msg("noisy.plateau_flat", **plateau)
    ]
    if g1 >= LIMITS.grad_stays_share * g0:
        ev.append(Msg("noisy.grad_stays", g=g1, x=g1 / g0))
    return ev


def _grad_levels(q: Quantities, lf: np.ndarray) -> tuple[float, float] | None:
    """The gradient norm's median over the first and the last tenth of the finite-loss rows (at
    least `end_min_points` each): whether the model is still pushed as hard as at its start. None
    with fewer than `plateau_min_grads` norms logged."""
    gn = q.grad_norm[lf]
    g = gn[np.isfinite(gn)]
    if g.size < LIMITS.plateau_min_grads:
        return None
    k = max(LIMITS.end_min_points, g.size // 10)
    return float(np.median(g[:k])), float(np.median(g[-k:]))


@detector("noisy_data", needs=("loss", "grad_norm"))
def noisy_data(run: Run, q: Quantities) -> list[Finding]:
    """The loss stalls high while the optimizer keeps moving: noisy or mismatched labels.

    Fires when, over `plateau_min_points` steps, the loss stopped (second half improves less than
    `stalled_mid_share` allows) at `stalled_high_share` of its start, updates are healthy (update
    ratio above `min_update_ratio` when known), and either
    - the gradient norm stays at `grad_stays_share` of its early level (the model is pushed hard
      but cannot fit), or
    - the loss sits at `at_chance_share` of the chance level (ln classes) while the weights keep
      moving: the
      model learned nothing beyond the label frequencies, which is what labels that do not belong
      to their inputs (shuffled, misaligned by one batch, mostly random) look like. Its gradients
      shrink once it predicts the marginal, so the first test misses this case; a second half
      that improves a little more (`stalled_mid_share_at_chance`) still counts as stalled there.
    (Numbers: `LossShapeLimits`.)
    Low confidence by nature (capacity limits look similar): dropped when anything else is found.
    """
    lf = q.finite_loss
    if lf.size < LIMITS.plateau_min_points or q.first_bad is not None:
        return []
    x = q.loss[lf]
    h = x.size // 2
    k = max(LIMITS.end_min_points, x.size // 10)
    start = q.loss_start
    mid = float(np.median(x[h - k // 2 : h + k // 2]))
    end = float(np.median(x[-k:]))
    chance = run.meta.get("chance_loss")
    at_chance = isinstance(chance, (int, float)) and chance > 0 and end >= LIMITS.at_chance_share * float(chance)
    # at the chance level a creep of a few percent is not learning: allow 5% there, 3% elsewhere
    stalled_mid = LIMITS.stalled_mid_share_at_chance if at_chance else LIMITS.stalled_mid_share
    if start <= 0 or end < LIMITS.stalled_high_share * start or end < stalled_mid * mid:
        return []
    if not at_chance and not shows_run_start(run, q):
        return []  # an excerpt from mid-run: its first loss is no start to have stalled near
    levels = _grad_levels(q, lf)
    if levels is None:
        return []
    g0, g1 = levels
    if g0 <= 0 or mid <= 0 or (g1 < LIMITS.grad_stays_share * g0 and not at_chance):
        return []  # no gradient at all is not a data problem (masked labels, a frozen model)
    ur = run.col("update_ratio")
    ur = ur[np.isfinite(ur)]
    if ur.size and float(np.median(ur)) < LIMITS.min_update_ratio:
        return []
    ev = _stall_evidence(x.size, (start, mid, end), (g0, g1), ur) + _chance_evidence(chance, at_chance, end, ur)
    began = min(h, _stall_began(x, end, k, stalled_mid))
    return [
        Finding(
            cause="noisy_data",
            symptom="plateau",
            severity="warning",
            confidence=0.45,
            step=int(q.steps[lf[began]]),
            evidence=ev,
            fixes=as_fixes([Msg("noisy.fix.audit"), Msg("noisy.fix.smoothing")]),
        )
    ]
