"""The diagnosis engine: run every applicable detector, separate cause from consequence, order.

The same function serves the live monitor (called on the history so far) and `lossdoctor diagnose`
(called on a log), which is what makes `mon.diagnose()` equal to the CLI's answer.
"""

from __future__ import annotations

import logging
import warnings
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..findings import Finding, Report, importance_key
from ..messages import Msg, not_in, unique
from ..records import Run
from . import REGISTRY, load_all
from .incident_merge import merge_incidents
from .probes import apply_probes, withdrawn_notes
from .quantities import Quantities
from .scalars import RUNAWAY_LR

log = logging.getLogger("lossdoctor")


@dataclass(frozen=True)
class ArbitrationLimits:
    #: below this confidence a finding at the first non-finite step is a guess (the curve's calm
    #: before a NaN: `sudden_nonfinite`, 0.45-0.5): it cannot outrank an observation of the op, the
    #: layer or the samples (a live incident's 0.8-0.95), however direct its cause's name; the
    #: curve-shape `noisy_data` (0.45) below it goes when anything else is wrong
    guess: float = 0.5
    #: a divergence that begins up to this many steps before a loss spike is the spike's aftermath
    #: (a divergence's onset may be dated a few points before the spike that began it; rule of
    #: thumb, untuned)
    spike_lead: int = 5


ARBITRATION = ArbitrationLimits()

#: Causes that name a non-finite value's origin directly (an observation, not a trend), most
#: direct first: when two findings describe the same first non-finite step, the earlier in this
#: list is the cause and the other its consequence.
DIRECTNESS = (
    "nonfinite_data",
    "label_mask_empty",
    "attention_overflow",
    "nondeterministic_fault",
    "activation_overflow",
    "loss_scale_collapse",
    "bad_init",
    "lr_too_high",
    "grad_explosion",
    "loss_spike",
)

#: A finding of the key's cause (warning or critical) explains findings of these causes: they are
#: what the key's fault looks like from another angle, so they are dropped.
EXPLAINS: dict[str, tuple[str, ...]] = {
    "label_mask_empty": (
        "vanishing_gradient",
        "lr_too_low",
        "precision_stall",
        "noisy_data",
        "loss_spike",
        "grad_explosion",
    ),
    "vanishing_gradient": ("lr_too_low", "noisy_data"),
    "precision_stall": ("lr_too_low", "noisy_data"),
    "loss_scale_collapse": ("lr_too_low", "noisy_data", "precision_stall"),
    "lr_too_high": ("noisy_data",),
    "bad_init": ("noisy_data", "lr_too_high"),
    "nonfinite_data": ("noisy_data",),
    "grad_accum_normalization": ("bad_init",),  # a loss k x chance is a sum, not confident logits
    # a forward pass that overflows makes every step's gradients inf: the scaler backs off forever,
    # and no scale can fix it (the loss_scale_collapse finding says so, the overflow is the cause)
    "activation_overflow": ("loss_scale_collapse",),
    "attention_overflow": ("loss_scale_collapse",),
    # gradients summed over every step look like an LR that keeps growing: the LR findings, the
    # explosion and the spikes are that sum seen from the loss and the gradient norm
    "grad_not_zeroed": (
        "lr_too_high",
        "lr_too_low",
        "lr_schedule_error",
        "grad_explosion",
        "loss_spike",
        "noisy_data",
        "frozen_model",
    ),
    # a loss saturated at its floor reads as a plateau: too little LR, noisy labels, a stall
    # a model that fits one class after another: the jumps at the class changes are not spikes of
    # bad data or of the LR, and the curve is not noisy labels
    "unshuffled_data": ("noisy_data", "loss_spike", "lr_too_high"),
    # a loss near 0 from copying is not an empty mask, a prompt leak or an overfit
    "labels_not_shifted": ("label_mask_leak", "label_mask_empty", "noisy_data", "bad_init"),
    "loss_broadcast": ("noisy_data", "lr_too_low", "vanishing_gradient", "frozen_model"),
    "grad_clip_too_tight": ("lr_too_low", "noisy_data", "vanishing_gradient", "frozen_model", "precision_stall"),
    "softmax_before_loss": ("noisy_data", "lr_too_low", "vanishing_gradient", "precision_stall", "frozen_model"),
    # an MSE of class indices starts at E[y^2] (far above any cross-entropy's chance) and fits
    # poorly: neither is bad init, noisy labels or a slow LR
    "wrong_loss": ("bad_init", "noisy_data", "lr_too_low", "loss_broadcast"),
    # labels unrelated to their inputs are the extreme of mismatched labels
    "labels_misaligned": ("noisy_data",),
}


def misuse_note(run: Run) -> str | None:
    """`mon.step` called without an optimizer step in between: said as a misuse of the monitor
    (those records are not skipped steps, so no detector reads them as a loss-scale collapse)."""
    if not run.has("no_optimizer_step"):
        return None
    idle = np.nan_to_num(run.col("no_optimizer_step")) > 0
    if not idle.any():
        return None
    steps = run.steps[idle]
    return Msg("engine.misuse_no_optimizer_step", idle=int(idle.sum()), n=len(run), step=int(steps[0]))


def rule_name(d: Any) -> str:
    """The rule id of a detector that names none itself: its module and its name
    (`gradients.grad_explosion`)."""
    return f"{getattr(d.fn, '__module__', '').rsplit('.', 1)[-1]}.{d.name}"


def is_runaway(f: Finding) -> bool:
    """The finding of `lr_rise_divergence` (by its rule): the divergence while the LR still climbs."""
    return f.rule == RUNAWAY_LR and f.cause == "lr_too_high" and f.symptom == "divergence"


def detect(run: Run, q: Quantities | None = None) -> tuple[list[Finding], list[str]]:
    """All findings of one run (one rank), plus notes on checks that could not run. `q`: the run's
    quantities, when the caller needs them too (computed once)."""
    load_all()
    q = q if q is not None else Quantities(run)
    notes: list[str] = []
    findings = _run_detectors(run, q, notes)
    misuse = misuse_note(run)
    if misuse:
        notes.append(misuse)
    survived = q.survived_nonfinite_grad
    if survived is not None:
        notes.append(Msg("engine.skipped_update", step=int(q.steps[survived])))
    if run.preflight:  # findings of the preflight checks, joined with the detectors' of the same cause
        findings = _join_preflight(findings, run, q, notes)
    findings = apply_probes(findings, run, notes)  # what the LR probe measured: confirms or withdraws
    findings = merge_incidents(findings, run)
    _differential(run, q, findings, notes)  # after the preflight's and the incidents' findings joined
    _say_clamped(q, findings)
    return _nonfinite_explained(run, q, findings), notes


def _say_clamped(q: Quantities, findings: list[Finding]) -> None:
    """A loss at a clamp's ceiling (Caffe's 87.3365) is said on every alarm it belongs to (dated at or
    before it), whichever rule made the alarm: the printed number is the clamp's, not a measurement."""
    from .differential import clamped

    hit = clamped(q)
    if hit is None:
        return
    row, msg = hit
    step = int(q.steps[row])
    for f in findings:
        keys = [getattr(m, "key", None) for m in f.evidence]
        if f.severity in ("warning", "critical") and (f.step is None or f.step <= step) and msg.key not in keys:
            f.evidence.append(msg)


def _run_detectors(run: Run, q: Quantities, notes: list[str]) -> list[Finding]:
    """Every registered detector that can run on `run`, each finding filed under its rank and rule;
    a detector that cannot run leaves a note with its hint, one that fails a note with its error."""
    findings: list[Finding] = []
    for d in REGISTRY:
        if not d.can_run(run):
            if d.hint:
                notes.append(Msg("engine.not_checked", name=d.name, hint=d.hint))
            continue
        try:
            # NaN/Inf are data here, not accidents: numpy's warnings about them would only be noise
            with np.errstate(all="ignore"), warnings.catch_warnings():
                warnings.simplefilter("ignore", RuntimeWarning)
                found = d.fn(run, q)
        except Exception as e:  # a detector bug must not hide the other findings
            log.debug("detector %s failed", d.name, exc_info=True)
            notes.append(Msg("engine.internal_error", name=d.name, error=f"{type(e).__name__}: {e}"))
            continue
        for f in found:
            if f.rank is None:
                f.rank = run.rank
            if f.rule is None:  # a detector's one rule: named after it
                f.rule = rule_name(d)
        findings.extend(found)
    return findings


def _join_preflight(findings: list[Finding], run: Run, q: Quantities, notes: list[str]) -> list[Finding]:
    """The preflight checks' findings joined with the detectors' of the same cause; a configuration
    that predicted the NaN is dated by the first non-finite step."""
    from .merge import merge_findings

    findings = merge_findings(findings, run.preflight, rank=run.rank, notes=notes)
    if q.first_bad_step is not None:
        for f in findings:
            if f.step is None and f.symptom == "nonfinite" and f.severity == "critical":
                f.step = q.first_bad_step
    return findings


def _nonfinite_explained(run: Run, q: Quantities, findings: list[Finding]) -> list[Finding]:
    """The arbitrated findings; a run that went non-finite is never "healthy" nor a mere warning,
    however little the log says. Judged after arbitration, so that a cause which explained away the
    only critical finding (bad_init dropping an early lr_too_high jump) cannot leave the NaN
    unexplained."""
    kept = arbitrate(findings)
    s = q.first_bad_step

    def explained(fs: list[Finding]) -> bool:  # a critical finding dated at or before the first NaN
        return any(f.severity == "critical" and f.step is not None and s is not None and f.step <= s for f in fs)

    if s is None or explained(kept):
        return kept
    from .gradients import unexplained_nonfinite

    with np.errstate(all="ignore"), warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        net = unexplained_nonfinite(run, q)
    for f in net:  # filed under its rank like every other finding (many ranks: where it began)
        f.rank = run.rank if f.rank is None else f.rank
    # arbitrated with the rest (later non-finite findings are its consequences), and kept even
    # if another cause would explain it away
    kept = arbitrate(findings + net)
    if not explained(kept):
        kept = sorted(kept + net, key=importance_key)
    return kept


def _differential(run: Run, q: Quantities, findings: list[Finding], notes: list[str]) -> None:
    """The symptoms' differential (detectors/differential.py), in place: the curve-only default
    causes weighed again, and a finding for every visible symptom no detector's alarm shows."""
    from .differential import fill_gaps, reconsider
    from .log_events import apply_events
    from .probes import withdrawn_causes

    try:
        with np.errstate(all="ignore"), warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)
            findings[:] = reconsider(run, q, findings)
            withdrawn = withdrawn_causes(run)  # the LR probe measured it wrong: never brought back
            for new in fill_gaps(run, q, findings):
                if new.cause not in withdrawn:
                    _join_same_cause(findings, new)
            apply_events(run, q, findings, notes)  # what the log's text events add
    except Exception as e:  # its failure must not hide the other findings
        log.debug("the differential failed", exc_info=True)
        notes.append(Msg("engine.internal_error", name="differential", error=f"{type(e).__name__}: {e}"))


def _join_same_cause(findings: list[Finding], new: Finding) -> None:
    """A differential finding whose cause a finding of the same rank already names joins it (one
    cause, one finding): the stronger severity and confidence, its evidence appended. Unless that
    finding is dated and does not show the new one's symptom (`COVERS`): then the symptom stays a
    finding of its own with its own step (a NaN after the divergence the LR finding dates, a loss
    frozen at chance after a jump), even where one cause explains both: the user looks for each
    where it happened. (An undated finding, a preflight check's prediction, takes the symptom in.)"""
    from .differential import COVERS

    same = next(
        (
            f
            for f in findings
            if f.cause == new.cause
            and f.rank == new.rank
            and (f.step is None or f.symptom in COVERS.get(new.symptom, (new.symptom,)))
        ),
        None,
    )
    if same is None:
        findings.append(new)
        return
    if new.severity_rank > same.severity_rank:
        same.severity = new.severity
    if (
        new.symptom in COVERS.get(same.symptom, (same.symptom,))
        and new.step is not None
        and same.step is not None
        and new.step < same.step
    ):
        same.step = new.step  # the same symptom seen where it began (a step up before its first big point)
    same.confidence = max(same.confidence, new.confidence)
    same.evidence.extend(not_in(new.evidence, same.evidence))


def arbitrate(findings: list[Finding]) -> list[Finding]:
    """Keep causes, drop consequences, order by importance.

    1. Once training went non-finite, every later non-finite finding is a consequence of the first
       one (NaN weights make NaN activations everywhere).
    2. At the first non-finite step, the most direct explanation wins (DIRECTNESS): NaN in the
       batch beats the gradient explosion it caused; but a guess (confidence < ARBITRATION.guess) never
       beats an observation, and the winner keeps the op/layer/samples the others saw.
    3. A cause drops the findings it explains (EXPLAINS), e.g. an all-masked label batch explains
       the "vanishing" zero gradient; a loss spike explains the divergence that follows it.
    4. `noisy_data` guessed from the curve's shape is a diagnosis of last resort: dropped when
       anything else is wrong (noisy data seen directly, e.g. by the preflight checks, stays).
    """
    keep = _first_nonfinite_only(findings)
    # an overflow explains only once it happened (a near-overflow warning explains nothing yet)
    present = {
        f.cause
        for f in keep
        if f.severity != "info"
        and not (f.cause in ("activation_overflow", "attention_overflow") and f.symptom != "nonfinite")
    }
    explained = {c for cause in present for c in EXPLAINS.get(cause, ())}
    spikes = [f.step for f in keep if f.cause == "loss_spike" and f.step is not None]
    keep = [f for f in keep if f.cause not in explained or (f.cause == "lr_too_high" and f.symptom == "nonfinite")]
    runaway = [f.step for f in keep if is_runaway(f) and f.step is not None]
    if runaway:  # a "spike" while the LR is still climbing is the schedule's divergence, not a spike
        keep = [f for f in keep if not (f.cause == "loss_spike" and f.step is not None and f.step >= min(runaway))]
        spikes = [f.step for f in keep if f.cause == "loss_spike" and f.step is not None]
    if spikes:  # the divergence that follows a spike is the spike's aftermath
        keep = [
            f
            for f in keep
            if not (
                f.cause == "lr_too_high"
                and f.symptom == "divergence"
                and not is_runaway(f)
                and f.step is not None
                and f.step >= min(spikes) - ARBITRATION.spike_lead
            )
        ]
    if any(f.cause != "noisy_data" and f.severity != "info" for f in keep):
        # the curve-shape guess (low confidence) goes; direct observations of bad data stay
        keep = [f for f in keep if not (f.cause == "noisy_data" and f.confidence < ARBITRATION.guess)]
    keep = _dedupe(keep)
    keep.sort(key=importance_key)
    return keep


def _first_nonfinite_only(findings: list[Finding]) -> list[Finding]:
    """`arbitrate`'s rules 1 and 2: the non-finite findings after the first non-finite step go; at
    that step the most direct one (`_onset_key`) stays over the others of its rank and is lent the
    place they saw. Apart from `arbitrate` to keep it short."""
    nonfinite = [f for f in findings if f.symptom == "nonfinite" and f.severity == "critical" and f.step is not None]
    keep = list(findings)
    if nonfinite:
        onset = min(f.step for f in nonfinite if f.step is not None)
        at_onset = [f for f in nonfinite if f.step == onset]
        winner = min(at_onset, key=_onset_key)
        _lend_place(winner, [f for f in at_onset if f is not winner and f.rank == winner.rank])
        keep = [
            f
            for f in keep
            if not (
                f.symptom == "nonfinite"
                and f.step is not None
                and (f.step > onset or (f.step == onset and f is not winner and f.rank == winner.rank))
            )
        ]
    return keep


#: below this confidence a finding is a guess (`ArbitrationLimits.guess`)


def _onset_key(f: Finding) -> tuple:
    """Evidence first (a guess below ARBITRATION.guess ranks after every observation), then how direct the
    cause is (DIRECTNESS), then confidence."""
    return (f.confidence < ARBITRATION.guess, _direct_rank(f), -f.confidence)


def _lend_place(winner: Finding, others: list[Finding]) -> None:
    """The winner keeps the op, layer and samples the losers at its step saw (a live incident's
    op is not lost because another finding of the same step won); an op only with its layer."""
    for f in sorted(others, key=lambda f: -f.confidence):
        same_place = winner.layer is None or f.layer is None or winner.layer == f.layer
        if winner.layer is None and f.layer is not None:
            winner.layer = f.layer
        if winner.op is None and f.op is not None and same_place:
            winner.op = f.op
        if winner.samples is None and f.samples is not None:
            winner.samples, winner.batch = f.samples, f.batch if winner.batch is None else winner.batch


def _direct_rank(f: Finding) -> int:
    return DIRECTNESS.index(f.cause) if f.cause in DIRECTNESS else len(DIRECTNESS)


def _dedupe(findings: Iterable[Finding]) -> list[Finding]:
    """One finding per cause, step, layer and rank: the most important, with the evidence the
    others saw appended (two detectors naming one cause from different signals, e.g. the
    optimizer's parameter count and the gradient norm that grows while nothing steps, are
    stronger together; the loser's evidence is not lost)."""
    seen: dict[tuple, Finding] = {}
    for f in findings:
        key = (f.cause, f.step, f.layer, f.rank)
        if key not in seen:
            seen[key] = f
            continue
        win, lose = (f, seen[key]) if importance_key(f) < importance_key(seen[key]) else (seen[key], f)
        win.evidence.extend(not_in(lose.evidence, win.evidence))
        seen[key] = win
    return list(seen.values())


def merge_ranks(per_rank: list[list[Finding]]) -> list[Finding]:
    """One finding per cause across ranks: the one that began first (earliest step; on a tie the
    one whose evidence is local to its rank wins, which the detectors encode as higher confidence).
    The other ranks are named in the evidence."""
    by_cause: dict[tuple[str, str | None], list[Finding]] = {}
    for fs in per_rank:
        for f in fs:
            by_cause.setdefault((f.cause, f.symptom), []).append(f)
    out = []
    for group in by_cause.values():
        group.sort(
            key=lambda f: (
                f.step if f.step is not None else float("inf"),
                -f.confidence,
                f.rank if f.rank is not None else 0,
            )
        )
        first = group[0]
        others = sorted({g.rank for g in group[1:] if g.rank is not None and g.rank != first.rank})
        if others:
            from .ranks import ranges

            first.evidence.append(Msg("distributed.also_on_ranks", ranks=ranges(others)))
        out.append(first)
    return out


#: notes of the live monitor saying that one of its parts did not run (read from the run directory)
PART_OFF = frozenset({"monitor.disabled"})


def diagnose_runs(runs: list[Run], *, source: str | None = None) -> Report:
    """Diagnose one run (possibly several ranks) into a Report."""
    from .scalars import coverage

    per_rank: list[list[Finding]] = []
    notes: list[str] = []
    judged: list[bool] = []
    for run in runs:
        q = Quantities(run)
        f, n = detect(run, q)
        withdrawn_notes(run, f, n, EXPLAINS)  # what `watch` announced and the end does not hold, and why
        per_rank.append(f)
        notes.extend(run.notes)  # what was read from where, before what could not be checked
        ok, cov = coverage(run, q, f)
        # a part of the live monitor that switched itself off did not check what it feeds: the run
        # is not called healthy on the checks that remain (its note says which part)
        judged.append(ok and not any(getattr(x, "key", None) in PART_OFF for x in run.notes))
        notes.extend(cov)
        notes.extend(n)
    if runs:
        from .ranks import drop_echoes

        per_rank = drop_echoes(runs, per_rank, notes)
    findings = per_rank[0] if len(per_rank) == 1 else arbitrate(merge_ranks(per_rank))
    from .ties import mark_ties

    mark_ties(findings)  # two causes the evidence does not tell apart: each finding names the other
    steps = max((len(r) for r in runs), default=0)
    notes = unique(notes)  # same note from every rank once
    # "healthy" means the checks the log allows ran and passed: a log too short to judge says so
    return Report(
        findings=findings,
        steps=steps,
        notes=notes,
        source=source or (runs[0].source if runs else None),
        inconclusive=bool(runs) and not any(judged),
    )
