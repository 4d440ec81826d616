"""Verified fixes: try each fix from the snapshot before telling the user it works.

An expert who has found the cause restores the checkpoint, applies the fix and checks that the run
gets past the bad step. This module does that with what the snapshot ring recorded: from the
earliest kept snapshot before the incident, the recorded steps are replayed through the incident
step and a window after it (bounded by the batches the ring still holds), on the triage workspace
(a scratch copy, or the user's model restored bit for bit), once without a fix and once per
candidate fix. A fix is *verified* when its replay is finite from the incident step to the end of
the window, the incident does not come back (no NaN/Inf, no spike), and the loss at the end of the
window is at or below its level before the incident.

Which fixes a replay can try (each fix's kind and numbers, `findings.Fix`; detectors/fix_kinds.py
makes them candidates, with their place in the finding): a
change of training state (the LR scaled to the suggested value, `clip_grad_norm_` at the suggested
`max_norm`, a fresh GradScaler with the suggested `init_scale`/`growth_interval`, the optimizer's
`eps`, one module run in fp32 with autocast off for it and its inputs cast to float32, every
parameter trained (frozen ones unfrozen, those the optimizer lacks given to it); all applied
from the snapshot on, as they would be after restoring that checkpoint) or of the data (the
offending samples dropped from the batch of the incident step, or that batch skipped). A fix that
is a change of code is marked "not verifiable by replay" with the reason. State fixes replace the
replay's emulation of the loop's own clipping (that factor was read from the logged trajectory,
which a fixed run leaves).

For a loss-scale collapse the incident is the GradScaler skipping as many steps in a row as it did
when the incident fired: a replay with a fix that does the same again did not help.

The unfixed replay is the control: while it agrees with the logged losses before the incident the
replay is faithful; if it diverges from the log, or the incident step does not fail again, no
verdict is given and the result says why.
"""

from __future__ import annotations

import math
import resource
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

import torch

# re-exported (`X as X`): triage/fix_verifier.py reads them as `verify.candidate_fixes` and so on
from ..detectors.fix_kinds import DATA_FIXES, Candidate
from ..detectors.fix_kinds import STATE_FIXES as STATE_FIXES
from ..detectors.fix_kinds import candidate as candidate
from ..detectors.fix_kinds import candidate_fixes as candidate_fixes
from ..detectors.fix_kinds import order_by_verdict as order_by_verdict
from ..findings import (
    Finding,
    Fix,  # noqa: F401  (re-exported: the fixes `mon.verify_fixes(fixes=...)` takes)
)
from ..messages import Msg
from . import batches as B
from .replay import ReplayFn, _emulate_clipping, flat_params, grads_finite, losses_agree, scalar_loss
from .ring import SnapshotRing, StepEntry
from .state import Snapshot, Workspace, state_nbytes
from .trigger import SCALE_STREAK  # the fallback for records written before the streak was recorded

#: steps replayed after the incident step
WINDOW = 20
#: replayed steps (all replays of one incident together) verification may spend
BUDGET = 400
#: "loss decreasing": the loss at the end of the window is at most this much above its level before
#: the incident
RECOVERY_TOL = 1.05
#: the end of the window is the mean of its last few losses (one noisy batch does not decide)
TAIL = 5


# --- one replay ---------------------------------------------------------------------------------


@dataclass
class Trajectory:
    """The losses of one replay, and where it first failed from the incident step on."""

    losses: dict[int, float] = field(default_factory=dict)
    first_bad: int | None = None
    skips_at_bad: int = 0  # the scaler's skips in a row at first_bad
    end: int | None = None  # the last step replayed
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
    step: int  # the incident step
    end: int  # the last step of the window
    #: (loss, gradients finite or left to a GradScaler, the scaler's skips in a row) -> the incident again
    bad: Callable[[float, bool, int], bool]


def _hparams(entry: StepEntry, fix: Candidate | None) -> list[dict[str, Any]] | None:
    if entry.hparams is None or fix is None or fix.kind != "lr" or not (fix.lr or fix.lr_factor):
        return entry.hparams
    out = []
    for hp in entry.hparams:
        hp = dict(hp)
        if isinstance(hp.get("lr"), (int, float)) and hp["lr"] > 0:
            if fix.lr:
                base = fix.lr_now or entry.hparams[0].get("lr") or hp["lr"]
                hp["lr"] = hp["lr"] * fix.lr / base  # the schedule keeps its shape, scaled
            else:
                hp["lr"] = hp["lr"] * float(fix.lr_factor or 1.0)
        out.append(hp)
    return out


def _batch(plan: Plan, e: StepEntry, fix: Candidate | None) -> Any:
    batch = e.device_batch()
    if fix is not None and fix.kind == "drop_samples" and e.step == plan.step:
        n = B.batch_size(batch)
        drop = set(fix.samples or [])
        keep = [i for i in range(n or 0) if i not in drop]
        batch = B.select_samples(batch, keep, n) if n and keep else None
    return batch


def find_module(model: torch.nn.Module, name: str) -> torch.nn.Module | None:
    """The module a finding names (its qualified name in the model), or None."""
    return dict(model.named_modules()).get(name)


def _float32(x: Any) -> Any:
    if isinstance(x, torch.Tensor) and x.is_floating_point() and x.dtype != torch.float32:
        return x.float()
    if isinstance(x, (list, tuple)):
        return type(x)(_float32(v) for v in x)
    if isinstance(x, dict):
        return {k: _float32(v) for k, v in x.items()}
    return x


@contextmanager
def fp32_forward(module: torch.nn.Module) -> Iterator[None]:
    """Run `module` in fp32 for the replay: its forward under autocast disabled, on float32
    inputs, as the user would write it. Only this object's `forward` attribute is set, and put back
    afterwards (the class and every other module are left alone)."""
    had = "forward" in module.__dict__
    old = module.__dict__.get("forward")
    orig = module.forward
    device = next((t.device.type for t in (*module.parameters(), *module.buffers())), "cpu")

    def forward(*args: Any, **kwargs: Any) -> Any:
        with torch.autocast(device_type=device, enabled=False):
            return orig(*_float32(args), **_float32(kwargs))

    module.forward = forward
    try:
        yield
    finally:
        if had:
            module.__dict__["forward"] = old  # the instance's own attribute, as it was
        else:
            del module.forward


def fresh_scaler(ws: Workspace, fix: Candidate) -> Any:
    """The GradScaler the fix asks for, as a restart from the snapshot would build it: the run's
    own settings (or the defaults) with the suggested init_scale / growth_interval."""
    from torch.amp import GradScaler

    old = ws.scaler
    device = next((p.device.type for p in ws.model.parameters()), "cpu")
    kw: dict[str, Any] = {}
    if old is not None:
        kw = {
            "growth_factor": old.get_growth_factor(),
            "backoff_factor": old.get_backoff_factor(),
            "growth_interval": old.get_growth_interval(),
            "init_scale": old.get_scale() if old.is_enabled() else 2.0**16,
        }
    if fix.init_scale is not None:
        kw["init_scale"] = fix.init_scale
    if fix.growth_interval is not None:
        kw["growth_interval"] = fix.growth_interval
    return GradScaler(device, **kw)


def run_replay(plan: Plan, fix: Candidate | None) -> Trajectory:
    """Replay snap.step .. plan.end with `fix` applied; stops early where a batch was not kept."""
    plan.ws.load(plan.snap)
    if fix is not None and fix.kind == "fp32_module":
        module = find_module(plan.ws.model, fix.module or "")
        if module is None:
            return Trajectory(error=f"no module {fix.module!r} in the model")
        with fp32_forward(module):
            return _replay_steps(plan, fix, plan.ws.scaler)
    if fix is not None and fix.kind == "unfreeze":
        with every_parameter_trained(plan.ws):
            return _replay_steps(plan, fix, plan.ws.scaler)
    scaler = fresh_scaler(plan.ws, fix) if fix is not None and fix.kind == "scaler" else plan.ws.scaler
    return _replay_steps(plan, fix, scaler)


@contextmanager
def every_parameter_trained(ws: Workspace) -> Iterator[None]:
    """The `unfreeze` fix for the replay: every floating-point parameter of the workspace's model
    requires grad, and those its optimizer lacks train in one added group (the first group's
    settings; its LR follows that group's recorded schedule, see `_step`). Put back afterwards:
    the flags, the group and its state, so the next replay (and a workspace that is the user's own
    model, restored in place) starts from the run as it was."""
    model, opt = ws.model, ws.optimizer
    frozen = [p for p in model.parameters() if p.is_floating_point() and not p.requires_grad]
    held = {id(p) for g in opt.param_groups for p in g["params"]}
    missing = [p for p in dict.fromkeys(model.parameters()) if p.is_floating_point() and id(p) not in held]
    for p in frozen:
        p.requires_grad_(True)
    added = bool(missing)
    if added:
        opt.add_param_group({**{k: v for k, v in opt.param_groups[0].items() if k != "params"}, "params": missing})
    try:
        yield
    finally:
        if added:
            opt.param_groups.pop()
            for p in missing:
                opt.state.pop(p, None)
        for p in frozen:
            p.grad = None
            p.requires_grad_(False)


def _replay_steps(plan: Plan, fix: Candidate | None, scaler: Any) -> Trajectory:
    ws, tr = plan.ws, Trajectory()
    params = flat_params(ws.optimizer)
    skips = 0  # the scaler's skips in a row
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
        (scaler.scale(loss) if scaler is not None else loss).backward()
        if scaler is not None:
            scaler.unscale_(ws.optimizer)  # plain gradients: clipping and the finiteness check see them
        finite = grads_finite(params) if step >= plan.step or scaler is not None else True
        skips = skips + 1 if scaler is not None and not finite and not e.skipped_by_policy else 0
        # a GradScaler skips the steps whose gradients overflow and backs off: its own business
        # (unless it does so step after step: `skips`), not the incident again; without one, a
        # non-finite gradient is
        if step >= plan.step and tr.first_bad is None and plan.bad(value, finite or scaler is not None, skips):
            tr.first_bad, tr.skips_at_bad = step, skips
        if e.stepped or scaler is not None:
            _step(plan, e, fix, params, scaler, exact=fix is None or (fix.kind in DATA_FIXES and step < plan.step))
        ws.zero_grad()
        tr.losses[step] = value
        tr.end = step
    return tr


def _step(
    plan: Plan, e: StepEntry, fix: Candidate | None, params: list[torch.Tensor], scaler: Any, exact: bool
) -> None:
    ws = plan.ws
    hp = _hparams(e, fix)
    if hp:
        for g, h in zip(ws.optimizer.param_groups, hp):
            g.update(h)
        for g in ws.optimizer.param_groups[len(hp) :]:  # a group the `unfreeze` fix added: the first's LR
            if "lr" in hp[0]:
                g["lr"] = hp[0]["lr"]
    if fix is not None and fix.kind == "adam_eps" and fix.eps is not None:
        for g in ws.optimizer.param_groups:
            if "eps" in g:
                g["eps"] = fix.eps
    if exact:
        _emulate_clipping(e, params)
    if fix is not None and fix.kind == "clip" and fix.max_norm:
        torch.nn.utils.clip_grad_norm_([p for p in params if p.grad is not None], fix.max_norm)
    if scaler is None:
        ws.optimizer.step()
    else:
        if not e.skipped_by_policy:
            scaler.step(ws.optimizer)
        scaler.update()


# --- verdicts -----------------------------------------------------------------------------------


def _outcome(tr: Trajectory, step: int) -> Msg:
    """What a replay did from the incident step on, in a few words."""
    if tr.first_bad is not None:
        loss = tr.losses.get(tr.first_bad, math.nan)
        if not math.isfinite(loss):
            return Msg("verify.outcome.nonfinite", loss=loss, step=tr.first_bad)
        if tr.skips_at_bad > 1:  # a loss-scale collapse again
            return Msg("verify.outcome.skips", n=tr.skips_at_bad, step=tr.first_bad)
        return Msg("verify.outcome.bad", loss=loss, step=tr.first_bad)
    after = tr.tail(step)
    n = (tr.end or step) - step
    return Msg("verify.outcome.loss_after", loss=after if after is not None else math.nan, n=n)


def judge(fix: Candidate, tr: Trajectory, unfixed: Trajectory, plan: Plan, before: float | None) -> dict[str, Any]:
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
        sentence = (
            Msg("verify.verified", fix=name, step=step, loss=float(after or 0.0), n=n, unfixed=unfixed_says)
            if n > 0
            else Msg("verify.verified_at", fix=name, step=step, loss=float(after or 0.0), unfixed=unfixed_says)
        )
    else:
        verdict = "did_not_help"
        what = (
            _outcome(tr, step)
            if tr.first_bad is not None or nonfinite or after is None
            else Msg("verify.outcome.not_recovered", loss=float(after), n=n, before=float(ref or math.nan))
        )
        sentence = Msg("verify.did_not_help", fix=name, what=what, unfixed=unfixed_says)
    return {
        "fix": fix.index,
        "kind": fix.kind,
        "verdict": verdict,
        "sentence": sentence,
        "step": step,
        "steps_after": n,
        "loss_after": after,
        "loss_before": ref,
        "first_bad": tr.first_bad,
        "unfixed_first_bad": unfixed.first_bad,
        "unfixed_loss_after": unfixed.tail(step + 1) if n > 0 else None,
        **_fix_values(fix),
    }


def _fix_values(fix: Candidate) -> dict[str, Any]:
    return fix.values()


def unverifiable(fix: Candidate, step: int, reason: Msg) -> dict[str, Any]:
    verdict = "not_verifiable" if fix.kind == "code" else "not_checked"
    key = "verify.not_verifiable" if fix.kind == "code" else "verify.not_checked"
    return {
        "fix": fix.index,
        "kind": fix.kind,
        "verdict": verdict,
        "step": step,
        "sentence": Msg(key, fix=fix.describe(step), reason=reason),
        **_fix_values(fix),
    }


# --- one incident ---------------------------------------------------------------------------------


def choose_snapshot(ring: SnapshotRing, step: int, earliest: bool = True) -> Snapshot | None:
    """With `earliest`, the earliest snapshot at or before `step` from which every batch up to it
    was kept (a state fix gets the most steps to act, as restoring an earlier checkpoint would);
    else, or failing that, the latest (a data fix acts at the incident step: fewer steps to replay)."""
    for snap in ring.snapshots if earliest else []:
        if snap.step <= step and all(
            ring.entries.get(s) is not None and ring.entries[s].kept for s in range(snap.step, step + 1)
        ):
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
        return {
            "seconds": round(self.seconds, 4),
            "steps_replayed": self.steps,
            "budget_steps": self.budget,
            "peak_rss_growth_mib": round(self.peak_rss_growth_mib, 2),
            "cuda_peak_growth_mib": None if self.cuda_peak_growth_mib is None else round(self.cuda_peak_growth_mib, 2),
            "workspace_mib": None if self.workspace_mib is None else round(self.workspace_mib, 3),
        }


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


def bad_rule(record: dict[str, Any]) -> Callable[[float, bool, int], bool]:
    """The incident again: a non-finite loss or gradient; for a spike, the loss over its threshold;
    for a loss-scale collapse, the GradScaler skipping as many steps in a row as it did then."""
    spike = record.get("spike") if record.get("trigger") == "loss_spike" else None
    threshold = float(spike["threshold"]) if isinstance(spike, dict) and "threshold" in spike else None
    scale = sc if isinstance(sc := record.get("scale"), dict) else {}
    streak = int(scale.get("streak", SCALE_STREAK)) if record.get("trigger") == "scale_collapse" else None

    def bad(loss: float, finite: bool, skips: int = 0) -> bool:
        if not math.isfinite(loss) or not finite:
            return True
        if streak is not None and skips >= streak:
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
            return Msg(
                "verify.diverged",
                step=s,
                logged=float(e.loss if e.loss is not None else math.nan),
                replayed=unfixed.losses[s],
            )
    if unfixed.error:
        return Msg("verify.replay_error", error=unfixed.error)
    if unfixed.first_bad != plan.step:
        return Msg("verify.not_reproduced", step=plan.step)
    return None


def verify_incident(
    plan: Plan, fixes: list[tuple[Finding | None, Candidate]], record: dict[str, Any], budget: int = BUDGET
) -> dict[str, Any]:
    """Replay unfixed and with each fix; the verdicts, the control's status and the cost."""
    meter = Meter()
    cost = Cost(budget=budget)
    per_run = plan.end - plan.snap.step + 1
    out: dict[str, Any] = {
        "step": plan.step,
        "from_step": plan.snap.step,
        "to_step": plan.end,
        "window": plan.end - plan.step,
        "checks": [],
    }
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


def _check_one(
    plan: Plan, fix: Candidate, unfixed: Trajectory, before: float | None, seen: dict[tuple, dict[str, Any]], cost: Cost
) -> dict[str, Any]:
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
    xs = sorted(
        e.loss
        for s in range(plan.snap.step, plan.step)
        if (e := plan.entries.get(s)) is not None and e.loss is not None and math.isfinite(e.loss)
    )
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
