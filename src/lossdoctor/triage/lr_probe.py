"""The LR probe: an LR range test done on the user's own run, from a snapshot.

fastai's `lr_find` and Lightning's `Tuner.lr_find` answer "which LR?" by training a few steps at
each candidate; this does the same on what the snapshot ring recorded: from a snapshot, the run's
own recorded batches are replayed on the triage workspace (a scratch copy, never the user's model
or optimizer) at the recorded LR (the control, which must agree with the logged losses) and at
x1/3 and x1/10 of it (x3 and x10 when the LR is suspected too low), the schedule's shape kept.
A finding of a plateau or slow convergence whose fixes change the training state (the LR or the
LR a schedule never reached, a clipping threshold, the parameters left frozen) gets the same
treatment with its own fixes: each becomes verified or did-not-help, with both losses.

The losses are compared on the window's second half (the same batches for every trial). A trial
*beats* the recorded LR when its mean loss there is at most `BEAT` times the control's. The
result is a probe record (`probes/probe-<cause>.json`, level "probe") that the engine reads back
(`detectors/probes.py`): a beaten LR confirms the finding and becomes its fix, with the measured
losses side by side; when nothing beat the recorded LR the finding is withdrawn, and the report
says so with the same losses. The probe never suggests an LR it did not measure to be better.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from ..detectors.fix_kinds import Candidate, candidate_fixes
from ..findings import Finding, Fix
from ..messages import Msg
from . import verify as V
from .replay import losses_agree
from .ring import SnapshotRing
from .state import state_nbytes

FORMAT = "lossdoctor.probe/1"


@dataclass(frozen=True)
class ProbeSettings:
    """How much the LR probe replays, and what counts as better."""

    #: steps replayed per trial after the snapshot (fastai's lr_find runs ~100 iterations over a
    #: whole range; three LRs need far fewer each): measured default, the 3-layer GPT loop
    window: int = 40
    #: a trial needs at least this many replayable steps to say anything
    min_steps: int = 12
    #: a trial beats the recorded LR at <= 0.95x its mean loss on the window's second half (the
    #: batch-to-batch noise of that mean is a few % on the dev loops: measured default)
    beat: float = 0.95
    #: factors of the recorded LR tried when it is too high / too low (LR range test spans)
    down: tuple[float, ...] = (1 / 3, 1 / 10)
    up: tuple[float, ...] = (3.0, 10.0)
    #: probes per run (each finding's cause once)
    max_probes: int = 3


SETTINGS = ProbeSettings()
#: symptoms of a finding whose state fixes a probe tries (incidents have their own verification)
SLOW = ("plateau", "slow_convergence", "stall", "oscillation", "divergence")
#: the fix kinds of such a finding a probe replays: the LR (a schedule's too), a clipping threshold,
#: every parameter trained (a frozen model)
PROBED = ("lr", "clip", "unfreeze")


def probe_plan(finding: Finding) -> list[Candidate]:
    """The trials a finding asks for: the LR factors for an LR finding, else its own state fixes
    (LR, clipping); empty when a probe has nothing to try."""
    if finding.symptom == "nonfinite":
        return []
    if finding.cause == "lr_too_high":
        return [Candidate(Fix("lr", lr_factor=x)) for x in SETTINGS.down]
    if finding.cause == "lr_too_low":
        return [Candidate(Fix("lr", lr_factor=x)) for x in SETTINGS.up]
    if finding.symptom not in SLOW:
        return []
    return [f for f in candidate_fixes(finding) if f.kind in PROBED]


def start_snapshot(ring: SnapshotRing) -> Any:
    """The earliest snapshot with at least `min_steps` recorded batches after it."""
    for snap in ring.snapshots:
        if (
            V.window_end(ring, snap.step, SETTINGS.window) - snap.step + 1 >= SETTINGS.min_steps
            and ring.entries.get(snap.step) is not None
            and ring.entries[snap.step].kept
        ):
            return snap
    return None


def _second_half(tr: V.Trajectory, start: int, end: int) -> float | None:
    mid = start + (end - start + 1) // 2
    xs = [v for s, v in tr.losses.items() if s >= mid]
    if not xs or (tr.end or start) < end:
        return None
    return sum(xs) / len(xs) if all(math.isfinite(x) for x in xs) else math.inf


def _control_note(plan: V.Plan, unfixed: V.Trajectory) -> Msg | None:
    if unfixed.error:
        return Msg("verify.replay_error", error=unfixed.error)
    for s in range(plan.snap.step, plan.end + 1):
        e = plan.entries.get(s)
        if s not in unfixed.losses:
            return Msg("probe.stopped", step=s)
        if e is not None and losses_agree(e.loss, unfixed.losses[s]) is False:
            return Msg(
                "verify.diverged",
                step=s,
                logged=float(e.loss if e.loss is not None else math.nan),
                replayed=unfixed.losses[s],
            )
    return None


def _lr_of(plan: V.Plan, fix: Candidate | None) -> float | None:
    e = plan.entries.get(plan.snap.step)
    hp = V._hparams(e, fix) if e is not None else None
    lr = hp[0].get("lr") if hp else None
    return float(lr) if isinstance(lr, (int, float)) else None


def run_probe(plan: V.Plan, finding: Finding, trials: list[Candidate]) -> dict[str, Any]:
    """Replay the control and each trial; the record's "probe" part (losses, verdicts, cost)."""
    meter, cost = V.Meter(), V.Cost(budget=(len(trials) + 1) * (plan.end - plan.snap.step + 1))
    start, end = plan.snap.step, plan.end
    out: dict[str, Any] = {"from_step": start, "to_step": end, "trials": []}
    unfixed = V.run_replay(plan, None)
    cost.steps += end - start + 1
    cost.workspace_mib = state_nbytes(plan.ws.model, plan.ws.optimizer) / 2**20
    base = _second_half(unfixed, start, end)
    note = _control_note(plan, unfixed)
    out["control"] = {"lr": _lr_of(plan, None), "loss": _plain(base)}
    if note is not None or base is None:
        out["status"], out["note"] = "no_verdict", note or Msg("probe.stopped", step=unfixed.end or start)
        out["cost"] = meter.finish(cost).to_dict()
        return out
    for fix in trials:
        tr = V.run_replay(plan, fix)
        cost.steps += end - start + 1
        loss = _second_half(tr, start, end)
        beat = loss is not None and math.isfinite(loss) and loss <= SETTINGS.beat * base
        out["trials"].append(
            {
                "kind": fix.kind,
                "index": fix.index,
                **fix.values(),
                "lr": _lr_of(plan, fix) if fix.kind == "lr" else None,
                "loss": _plain(loss),
                "verdict": "verified" if beat else "did_not_help",
            }
        )
    out["status"] = "checked"
    out["cost"] = meter.finish(cost).to_dict()
    return out


def _plain(x: float | None) -> float | None:
    return x if x is not None and math.isfinite(x) else None


def no_probe_record(finding: Finding, reason: Msg) -> dict[str, Any]:
    """The record of a probe that could not run (no replay_fn, no snapshot...): it says why."""
    return {
        "format": FORMAT,
        "level": "probe",
        "trigger": "probe",
        "step": finding.step,
        "cause": finding.cause,
        "symptom": finding.symptom,
        "findings": [],
        "probe": {"status": "no_probe", "note": reason, "note_data": reason.data(), "trials": []},
    }


def probe_record(finding: Finding, probe: dict[str, Any]) -> dict[str, Any]:
    note = probe.get("note")
    if isinstance(note, Msg):
        probe["note_data"] = note.data()
    return {
        "format": FORMAT,
        "level": "probe",
        "trigger": "probe",
        "step": finding.step,
        "cause": finding.cause,
        "symptom": finding.symptom,
        "findings": [],
        "probe": probe,
        "finding": finding.to_dict(),
    }
