"""Verified fixes: try each fix from the snapshot before telling the user it works.

An expert who has found the cause restores the checkpoint, applies the fix and checks that the run
gets past the bad step. This module does that with what the snapshot ring recorded: from the
earliest kept snapshot before the incident, the recorded steps are replayed through the incident
step and a window after it (bounded by the batches the ring still holds), on the triage workspace
(a scratch copy, or the user's model restored bit for bit), once without a fix and once per
candidate fix. A fix is *verified* when its replay is finite from the incident step to the end of
the window, the incident does not come back (no NaN/Inf, no spike), and the loss at the end of the
window is at or below its level before the incident.

Which fixes a replay can try: a change of training state (the LR scaled to the suggested value,
`clip_grad_norm_` at the suggested `max_norm`, both applied from the snapshot on, as they would be
after restoring that checkpoint) or of the data (the offending samples dropped from the batch of
the incident step, or that batch skipped). A fix that is a change of code is marked "not verifiable
by replay" with the reason. State fixes replace the replay's emulation of the loop's own clipping
(that factor was read from the logged trajectory, which a fixed run leaves).

The unfixed replay is the control: while it agrees with the logged losses before the incident the
replay is faithful; if it diverges from the log, or the incident step does not fail again, no
verdict is given and the result says why.
"""

from __future__ import annotations

import math
import resource
import time
from dataclasses import dataclass, field
from typing import Any, Callable

import torch

from ..findings import Finding
from ..messages import Msg
from . import batches as B
from .replay import ReplayFn, _emulate_clipping, _flat_params, grads_finite, losses_agree, scalar_loss
from .ring import SnapshotRing, StepEntry
from .state import Snapshot, Workspace, state_nbytes

#: steps replayed after the incident step
WINDOW = 20
#: replayed steps (all replays of one incident together) verification may spend
BUDGET = 400
#: "loss decreasing": the loss at the end of the window is at most this much above its level before
#: the incident
RECOVERY_TOL = 1.05
#: the end of the window is the mean of its last few losses (one noisy batch does not decide)
TAIL = 5

#: fix kinds a replay can apply
STATE_FIXES = ("clip", "lr")
DATA_FIXES = ("drop_samples", "skip_batch")
#: fix sentences (their message keys) that are one of the kinds above
_CLIP_KEYS = ("triage.backward.fix_clip", "triage.param.fix", "triage.spike.fix_state")
_SKIP_KEYS = ("triage.spike.fix_skip", "triage.labels.fix")
_DROP_KEYS = ("triage.data.fix", "triage.spike.fix_inspect")


@dataclass
class Fix:
    """One candidate fix. `index` is its position in the finding's `fixes` (None for a fix the
    caller asked for)."""

    kind: str                      # "clip" | "lr" | "drop_samples" | "skip_batch" | "code"
    index: int | None = None
    max_norm: float | None = None
    lr: float | None = None        # the suggested LR
    lr_now: float | None = None    # the LR the suggestion starts from (else: the recorded one)
    samples: list[int] | None = None
    reason: Msg | None = None      # why a code change cannot be replayed

    def describe(self, step: int) -> Msg:
        if self.kind == "clip":
            return Msg("verify.fix.clip", max_norm=float(self.max_norm or 0.0))
        if self.kind == "lr":
            return Msg("verify.fix.lr", lr=float(self.lr or 0.0))
        if self.kind == "drop_samples":
            return Msg("verify.fix.drop", ids=[int(i) for i in self.samples or []], step=step)
        if self.kind == "skip_batch":
            return Msg("verify.fix.skip", step=step)
        return Msg("verify.fix.code")

    def key(self) -> tuple:
        return (self.kind, self.max_norm, self.lr, tuple(self.samples or ()))


def candidate_fixes(finding: Finding) -> list[Fix]:
    """The fixes of a finding, each as something a replay can apply or as a code change."""
    out = []
    for i, text in enumerate(finding.fixes):
        key = getattr(text, "key", None)
        values = getattr(text, "values", {}) or {}
        if isinstance(values.get("max_norm"), (int, float)):
            out.append(Fix("clip", i, max_norm=float(values["max_norm"])))
        elif key is not None and "lr" in key and isinstance(values.get("to"), (int, float)):
            lr = values.get("lr")
            out.append(Fix("lr", i, lr=float(values["to"]), lr_now=float(lr) if isinstance(lr, (int, float)) else None))
        elif key in _CLIP_KEYS:
            out.append(Fix("clip", i, max_norm=1.0))  # those sentences say clip_grad_norm_(..., 1.0)
        elif key in _DROP_KEYS and finding.samples:
            out.append(Fix("drop_samples", i, samples=list(finding.samples)))
        elif key in _SKIP_KEYS:
            out.append(Fix("skip_batch", i))
        elif key is None:  # a plain sentence: its numbers are not data, so what to replay is unknown
            out.append(Fix("code", i, reason=Msg("verify.reason.plain")))
        else:
            out.append(Fix("code", i, reason=Msg("verify.reason.code")))
    return out


# --- one replay ---------------------------------------------------------------------------------

@dataclass
class Trajectory:
    """The losses of one replay, and where it first failed from the incident step on."""

    losses: dict[int, float] = field(default_factory=dict)
    first_bad: int | None = None
    end: int | None = None            # the last step replayed
    error: str | None = None

    def tail(self, start: int) -> float | None:
        xs = [v for s, v in sorted(self.losses.items()) if s >= start][-TAIL:]
        return sum(xs) / len(xs) if xs and all(math.isfinite(x) for x in xs) else None


@dataclass
class Plan:
    """What every replay of one incident shares."""

    ws: Workspace
    snap: Snapshot
    entries: dict[int, StepEntry]
    fn: ReplayFn
    step: int                         # the incident step
    end: int                          # the last step of the window
    bad: Callable[[float, bool], bool]  # (loss, gradients finite) -> the incident again


def _hparams(entry: StepEntry, fix: Fix | None) -> list[dict[str, Any]] | None:
    if entry.hparams is None or fix is None or fix.kind != "lr" or not fix.lr:
        return entry.hparams
    out = []
    for hp in entry.hparams:
        hp = dict(hp)
        if isinstance(hp.get("lr"), (int, float)) and hp["lr"] > 0:
            base = fix.lr_now or entry.hparams[0].get("lr") or hp["lr"]
            hp["lr"] = hp["lr"] * fix.lr / base   # the schedule keeps its shape, scaled
        out.append(hp)
    return out


def _batch(plan: Plan, e: StepEntry, fix: Fix | None) -> Any:
    batch = e.device_batch()
    if fix is not None and fix.kind == "drop_samples" and e.step == plan.step:
        n = B.batch_size(batch)
        drop = set(fix.samples or [])
        keep = [i for i in range(n or 0) if i not in drop]
        batch = B.select_samples(batch, keep, n) if n and keep else None
    return batch


def run_replay(plan: Plan, fix: Fix | None) -> Trajectory:
    """Replay snap.step .. plan.end with `fix` applied; stops early where a batch was not kept."""
    ws, tr = plan.ws, Trajectory()
    ws.load(plan.snap)
    params = _flat_params(ws.optimizer)
    for step in range(plan.snap.step, plan.end + 1):
        e = plan.entries.get(step)
        if e is None or not e.kept:
            break
        batch = _batch(plan, e, fix)
        if batch is None or (fix is not None and fix.kind == "skip_batch" and step == plan.step):
            tr.end = step
            continue  # the batch is skipped: no forward, no update
        ws.zero_grad()
        if e.rng is not None:
            e.rng.apply()
        loss = scalar_loss(plan.fn(ws.model, batch))
        value = float(loss.detach().float())
        if not loss.requires_grad:
            tr.error = f"replay_fn returned a loss without gradient at step {step}"
            break
        scaler = ws.scaler
        (scaler.scale(loss) if scaler is not None else loss).backward()
        if scaler is not None:
            scaler.unscale_(ws.optimizer)  # plain gradients: clipping and the finiteness check see them
        # a GradScaler skips the steps whose gradients overflow and backs off: its own business, not
        # the incident again (as for the trigger); without one, a non-finite gradient is
        finite = grads_finite(params) if step >= plan.step and scaler is None else True
        if step >= plan.step and tr.first_bad is None and plan.bad(value, finite):
            tr.first_bad = step
        if e.stepped or scaler is not None:
            _step(plan, e, fix, params, exact=fix is None or (fix.kind in DATA_FIXES and step < plan.step))
        ws.zero_grad()
        tr.losses[step] = value
        tr.end = step
    return tr


def _step(plan: Plan, e: StepEntry, fix: Fix | None, params: list[torch.Tensor], exact: bool) -> None:
    ws = plan.ws
    hp = _hparams(e, fix)
    if hp:
        for g, h in zip(ws.optimizer.param_groups, hp):
            g.update(h)
    if exact:
        _emulate_clipping(e, params)
    if fix is not None and fix.kind == "clip" and fix.max_norm:
        torch.nn.utils.clip_grad_norm_([p for p in params if p.grad is not None], fix.max_norm)
    if ws.scaler is None:
        ws.optimizer.step()
    else:
        if not e.skipped_by_policy:
            ws.scaler.step(ws.optimizer)
        ws.scaler.update()


# --- verdicts -----------------------------------------------------------------------------------

def _outcome(tr: Trajectory, step: int) -> Msg:
    """What a replay did from the incident step on, in a few words."""
    if tr.first_bad is not None:
        loss = tr.losses.get(tr.first_bad, math.nan)
        if not math.isfinite(loss):
            return Msg("verify.outcome.nonfinite", loss=loss, step=tr.first_bad)
        return Msg("verify.outcome.bad", loss=loss, step=tr.first_bad)
    after = tr.tail(step)
    n = (tr.end or step) - step
    return Msg("verify.outcome.loss_after", loss=after if after is not None else math.nan, n=n)


def judge(fix: Fix, tr: Trajectory, unfixed: Trajectory, plan: Plan, before: float | None) -> dict[str, Any]:
    """The verdict of one fix, with its numbers and its sentence."""
    step = plan.step
    name = fix.describe(step)
    n = (tr.end or step) - step
    after = tr.tail(step + 1) if n > 0 else tr.tail(step)
    ref = before if before is not None else next((v for s, v in sorted(tr.losses.items()) if s >= step), None)
    nonfinite = any(not math.isfinite(v) for s, v in tr.losses.items() if s >= step)
    recovered = after is not None and ref is not None and math.isfinite(ref) and after <= RECOVERY_TOL * ref
    unfixed_says = _outcome(unfixed, step)
    if tr.error:
        verdict, sentence = "not_checked", Msg("verify.error", fix=name, error=tr.error)
    elif tr.first_bad is None and not nonfinite and recovered:
        verdict = "verified"
        sentence = Msg("verify.verified", fix=name, step=step, loss=float(after or 0.0), n=n,
                       unfixed=unfixed_says) if n > 0 else \
            Msg("verify.verified_at", fix=name, step=step, loss=float(after or 0.0), unfixed=unfixed_says)
    else:
        verdict = "did_not_help"
        what = _outcome(tr, step) if tr.first_bad is not None or nonfinite or after is None else \
            Msg("verify.outcome.not_recovered", loss=float(after), n=n, before=float(ref or math.nan))
        sentence = Msg("verify.did_not_help", fix=name, what=what, unfixed=unfixed_says)
    return {"fix": fix.index, "kind": fix.kind, "verdict": verdict, "sentence": sentence, "step": step,
            "steps_after": n, "loss_after": after, "loss_before": ref, "first_bad": tr.first_bad,
            "unfixed_first_bad": unfixed.first_bad, "unfixed_loss_after": unfixed.tail(step + 1) if n > 0 else None,
            **_fix_values(fix)}


def _fix_values(fix: Fix) -> dict[str, Any]:
    d: dict[str, Any] = {}
    if fix.max_norm is not None:
        d["max_norm"] = fix.max_norm
    if fix.lr is not None:
        d["lr"] = fix.lr
    if fix.samples is not None:
        d["samples"] = list(fix.samples)
    return d


def unverifiable(fix: Fix, step: int, reason: Msg) -> dict[str, Any]:
    verdict = "not_verifiable" if fix.kind == "code" else "not_checked"
    key = "verify.not_verifiable" if fix.kind == "code" else "verify.not_checked"
    return {"fix": fix.index, "kind": fix.kind, "verdict": verdict, "step": step,
            "sentence": Msg(key, fix=fix.describe(step), reason=reason), **_fix_values(fix)}


# --- one incident ---------------------------------------------------------------------------------

def choose_snapshot(ring: SnapshotRing, step: int, earliest: bool = True) -> Snapshot | None:
    """With `earliest`, the earliest snapshot at or before `step` from which every batch up to it
    was kept (a state fix gets the most steps to act, as restoring an earlier checkpoint would);
    else, or failing that, the latest (a data fix acts at the incident step: fewer steps to replay)."""
    for snap in ring.snapshots if earliest else []:
        if snap.step <= step and all(ring.entries.get(s) is not None and ring.entries[s].kept
                                     for s in range(snap.step, step + 1)):
            return snap
    return ring.snapshot_for(step)


def window_end(ring: SnapshotRing, step: int, window: int) -> int:
    """The last step of the window: `window` steps after the incident, or the last kept batch."""
    end = step
    while end < step + window and ring.entries.get(end + 1) is not None and ring.entries[end + 1].kept:
        end += 1
    return end


@dataclass
class Cost:
    seconds: float = 0.0
    steps: int = 0
    budget: int = BUDGET
    peak_rss_growth_mib: float = 0.0
    cuda_peak_growth_mib: float | None = None
    workspace_mib: float | None = None

    def to_dict(self) -> dict[str, Any]:
        return {"seconds": round(self.seconds, 4), "steps_replayed": self.steps, "budget_steps": self.budget,
                "peak_rss_growth_mib": round(self.peak_rss_growth_mib, 2),
                "cuda_peak_growth_mib": None if self.cuda_peak_growth_mib is None else
                round(self.cuda_peak_growth_mib, 2),
                "workspace_mib": None if self.workspace_mib is None else round(self.workspace_mib, 3)}


class Meter:
    """Time and memory of verification: the growth of the process's peak resident memory (host)
    and of the CUDA allocator's peak (0 when verification stayed under the peak training reached;
    the allocator's peak is not reset, so the user's own statistics are left alone)."""

    def __init__(self) -> None:
        self.t0 = time.perf_counter()
        self.rss0 = _peak_rss_mib()
        self.cuda0 = _cuda_peak_mib()

    def finish(self, cost: Cost) -> Cost:
        cost.seconds = time.perf_counter() - self.t0
        cost.peak_rss_growth_mib = max(0.0, _peak_rss_mib() - self.rss0)
        if self.cuda0 is not None:
            cost.cuda_peak_growth_mib = max(0.0, (_cuda_peak_mib() or 0.0) - self.cuda0)
        return cost


def _peak_rss_mib() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0  # KiB on Linux


def _cuda_peak_mib() -> float | None:
    if torch.cuda.is_available() and torch.cuda.is_initialized():
        return torch.cuda.max_memory_allocated() / 2**20
    return None


def bad_rule(record: dict[str, Any]) -> Callable[[float, bool], bool]:
    """The incident again: a non-finite loss or gradient, and for a spike the loss over its threshold."""
    spike = record.get("spike") if record.get("trigger") == "loss_spike" else None
    threshold = float(spike["threshold"]) if isinstance(spike, dict) and "threshold" in spike else None

    def bad(loss: float, finite: bool) -> bool:
        if not math.isfinite(loss) or not finite:
            return True
        return threshold is not None and loss >= threshold

    return bad


def check_control(plan: Plan, unfixed: Trajectory) -> Msg | None:
    """Why no verdict can be given: the unfixed replay left the log before the incident, or the
    incident step does not fail again (None: the replay is faithful and reproduces it)."""
    for s in range(plan.snap.step, plan.step):
        e = plan.entries.get(s)
        if s not in unfixed.losses:
            return Msg("verify.stopped", step=s, incident=plan.step)
        if e is not None and losses_agree(e.loss, unfixed.losses[s]) is False:
            return Msg("verify.diverged", step=s, logged=float(e.loss if e.loss is not None else math.nan),
                       replayed=unfixed.losses[s])
    if unfixed.error:
        return Msg("verify.replay_error", error=unfixed.error)
    if unfixed.first_bad != plan.step:
        return Msg("verify.not_reproduced", step=plan.step)
    return None


def verify_incident(plan: Plan, fixes: list[tuple[Finding | None, Fix]], record: dict[str, Any],
                    budget: int = BUDGET) -> dict[str, Any]:
    """Replay unfixed and with each fix; the verdicts, the control's status and the cost."""
    meter = Meter()
    cost = Cost(budget=budget)
    per_run = plan.end - plan.snap.step + 1
    out: dict[str, Any] = {"step": plan.step, "from_step": plan.snap.step, "to_step": plan.end,
                           "window": plan.end - plan.step, "checks": []}
    if per_run > budget:
        out["status"], out["note"] = "over_budget", Msg("verify.budget_small", n=per_run, budget=budget)
        return {**out, "cost": meter.finish(cost).to_dict()}
    unfixed = run_replay(plan, None)
    cost.steps += per_run
    cost.workspace_mib = state_nbytes(plan.ws.model, plan.ws.optimizer) / 2**20  # optimizer state loaded now
    out["unfixed"] = {"losses": [[s, v] for s, v in sorted(unfixed.losses.items())], "first_bad": unfixed.first_bad}
    why = check_control(plan, unfixed)
    if why is not None:
        out["status"], out["note"] = ("diverged" if why.key == "verify.diverged" else "no_verdict"), why
        return {**out, "cost": meter.finish(cost).to_dict()}
    before = _level_before(plan)
    seen: dict[tuple, dict[str, Any]] = {}
    for finding, fix in fixes:
        check = _check_one(plan, fix, unfixed, before, seen, cost)
        out["checks"].append({"cause": finding.cause if finding is not None else None, **check})
    out["status"] = "checked"
    out["cost"] = meter.finish(cost).to_dict()
    return out


def _check_one(plan: Plan, fix: Fix, unfixed: Trajectory, before: float | None, seen: dict[tuple, dict[str, Any]],
               cost: Cost) -> dict[str, Any]:
    if fix.kind == "code":
        return unverifiable(fix, plan.step, fix.reason or Msg("verify.reason.code"))
    if fix.kind == "drop_samples" and not fix.samples:
        return unverifiable(fix, plan.step, Msg("verify.reason.no_samples"))
    if fix.key() in seen:  # the same fix suggested by two findings: replayed once
        return {**seen[fix.key()], "fix": fix.index}
    per_run = plan.end - plan.snap.step + 1
    if cost.steps + per_run > cost.budget:
        return unverifiable(fix, plan.step, Msg("verify.reason.budget", budget=cost.budget))
    tr = run_replay(plan, fix)
    cost.steps += per_run
    seen[fix.key()] = check = judge(fix, tr, unfixed, plan, before)
    return check


def _level_before(plan: Plan) -> float | None:
    """The loss level before the incident: the median of the logged losses since the snapshot."""
    xs = sorted(e.loss for s in range(plan.snap.step, plan.step)
                if (e := plan.entries.get(s)) is not None and e.loss is not None and math.isfinite(e.loss))
    return xs[len(xs) // 2] if xs else None


def order_checks(checks: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Verified first, then not helping, then what could not be checked (stable within each)."""
    rank = {"verified": 0, "did_not_help": 1, "not_checked": 2, "not_verifiable": 3}
    return sorted(checks, key=lambda c: rank.get(c.get("verdict", ""), 4))


def _plain(v: Any) -> Any:
    """JSON-safe numbers: a non-finite float is null (the sentence says NaN/inf)."""
    if isinstance(v, float) and not math.isfinite(v):
        return None
    return v


def check_json(check: dict[str, Any]) -> dict[str, Any]:
    """A check as the JSON contract has it: the sentence in English, its data next to it."""
    out = {k: _plain(v) for k, v in check.items() if k != "cause"}
    s = check.get("sentence")
    out["sentence_data"] = s.data() if isinstance(s, Msg) else None
    return out


def result_json(result: dict[str, Any]) -> dict[str, Any]:
    out = dict(result)
    out["checks"] = order_checks([{**check_json(c), "cause": c.get("cause")} for c in result.get("checks", [])])
    note = result.get("note")
    if isinstance(note, Msg):
        out["note_data"] = note.data()
    return out
