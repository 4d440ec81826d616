"""The incident flow: what triage does with one incident, from its trigger to its record.

1. confirm (`trigger.py`, before this flow runs): the step record says the loss or a gradient
   went non-finite (a GradScaler's own overflow skips are not incidents), or the loss spiked far
   above its recent level;
2. rewind: restore the last snapshot before that step on a scratch copy of the model, and replay
   the recorded batches up to it; the replayed losses are checked against the logged ones;
3. reproduce: does the failing step fail again? If the replay was faithful and it does not, the
   fault is not in the data or the numerics (`nondeterministic_fault`);
4. narrow: the failing step again under the op tracer: the first op (forward, then backward) whose
   output went non-finite, its module and what went in and out;
5. isolate: bisect the batch for the sample(s) that break the step;
6. batch vs state: does this batch break an earlier healthy state? does the state before the
   failing step break on other recent batches?
7. the record (`IncidentRecord`, which `Triage` writes as `incidents/step-N.json`) with the evidence
   and the finding(s); the engine merges them into the diagnosis. Then the policy: report (nothing
   else), raise (`Triage`), or skip (here: roll the user's model back to the state before the bad
   batch when its update already damaged it).

Without `replay_fn` (or without a snapshot before the step) the record carries the layer-level
answer the live flags give, and says what replay would add. On a pipeline stage, steps 2-5 are
that stage's alone (`stage_flow.py`).

Everything runs on copies; the user's model, optimizer, gradients and RNG are left bit-identical
(the `report` and `raise` policies never change them).
"""

from __future__ import annotations

import logging
import math
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager, nullcontext
from typing import Any

import torch

from ..detectors.gradients import clip_threshold
from ..findings import Finding, Fix, as_fixes
from ..messages import Msg, identity, not_in, round_sig
from . import batches as B
from .explain import live_findings, nondeterministic_finding, replay_finding, spike_finding, verdict, verdict_sentence
from .host import TriageHost
from .localize import Preserve, localize_on
from .record import IncidentRecord
from .replay import BatchTrial, replay, scalar_loss, try_batch
from .ring import SnapshotRing, StepEntry
from .samples import per_sample_outliers
from .stage_flow import StageFlow
from .state import (
    InplaceGuard,
    RngState,
    Snapshot,
    SnapshotLoadError,
    SnapshotTaker,
    load_model_state,
    restore_scaler,
    scratch_workspace,
)

log = logging.getLogger("lossdoctor")

#: the step record's flags an incident record keeps (its `live`)
LIVE_KEYS = (
    "loss",
    "grad_norm",
    "grad_nonfinite",
    "skipped",
    "scale",
    "fwd_first_nonfinite",
    "bwd_first_nonfinite",
    "nonfinite_params",
    "batch_nonfinite_detail",
    "mask_empty_sample_ids",
    "label_empty_sample_ids",
    "label_tokens",
    "act_absmax",
    "act_absmax_layer",
    "act_range_frac",
)
#: GradScaler's default initial scale (2**16), what the fix for a scale set too high suggests
DEFAULT_SCALE = 2.0**16


class IncidentFlow:
    """Runs the flow on one incident at a time (steps 2-7 of the module docstring) on a scratch
    workspace; the skip policy's roll-back is the one thing it does to the user's objects.
    `owner`: the triage whose hooks (the skip guard's) reach it, kept out of the workspace's copy."""

    def __init__(
        self,
        host: TriageHost,
        replay_fn: Callable | None,
        ring: SnapshotRing | None,
        guard: Any,
        owner: Any,
        *,
        policy: str,
        inplace: bool,
        skipped_steps: set[int],
    ) -> None:
        self.host = host
        self.replay_fn = replay_fn
        self.ring = ring
        self.guard = guard
        self.owner = owner
        self.policy = policy
        self.inplace = inplace
        self.skipped_steps = skipped_steps  # the skip policy's (shared with the triage)
        self.model = host.model
        self.optimizer = host.optimizer
        self.scaler = host.scaler

    def run(self, step: int, trig: dict[str, Any], rec: dict[str, Any]) -> IncidentRecord:
        """The flow on the incident `trig` started at `step` (`rec`: its step record): the record, with
        its findings. Never raises: a failure of the flow is in the record, with the live answer."""
        t0 = time.perf_counter()
        record = IncidentRecord(
            step=step,
            trigger=trig["kind"],
            rank=self.host.rank,
            policy=self.policy,
            live={k: rec[k] for k in LIVE_KEYS if k in rec},
        )
        if trig["kind"] == "loss_spike":
            record.spike = {k: v for k, v in trig.items() if k != "kind"}
        if trig["kind"] == "scale_collapse":
            record.scale = {k: v for k, v in trig.items() if k != "kind"}
        rng = RngState.capture()
        findings: list[Finding] = []
        try:
            if self.replay_fn is None:  # (DeepSpeed ZeRO / FSDP1 say why replay cannot run there)
                record.notes.append(self.host.replay_refused() or Msg("triage.note.no_replay_fn"))
            elif self.ring is None:
                record.notes.append(Msg("triage.note.snapshots_off"))
            else:
                if self.ring.notes:
                    record.notes.extend(self.ring.notes)
                if self.ring.tape is not None:  # a pipeline stage: replayed alone (stage_flow.py)
                    findings = StageFlow(self.host, self.ring, self.workspace).run(step, trig, rec, record)
                elif trig["kind"] == "scale_collapse":
                    findings = self._scale_flow(step, trig, rec, record)
                else:
                    findings = self._replay_flow(step, trig, rec, record)
        except Exception as e:  # triage must never take the training down
            log.warning("%s", Msg("triage.log.failed", step=step, error=f"{type(e).__name__}: {e}"))
            record.error = f"{type(e).__name__}: {e}"
            if isinstance(e, SnapshotLoadError):
                record.notes.append(e.args[0] if e.args and isinstance(e.args[0], Msg) else str(e))
            if "out of memory" in str(e).lower() and not self.inplace:
                record.notes.append(Msg("triage.note.scratch_oom"))
            findings = []
        finally:
            rng.restore()
            if self.ring is not None:
                self.ring.paused = False
        if not findings:
            record.level = "live"
            findings = live_findings(step, trig, rec, record.notes)
        elif record.level == "live":
            record.level = "replay"
        if self.scaler is not None and getattr(self.scaler, "is_enabled", lambda: True)():
            _has_scaler(findings)
        record.findings = [f.to_dict() for f in findings]
        record.seconds = round(time.perf_counter() - t0, 4)
        return record

    def workspace(self) -> Any:
        if self.inplace:
            return self._inplace_workspace()
        # the monitor's own parts and triage's: their hooks are stripped from the copy, and the
        # copy must not duplicate them (bound-method hooks reach them)
        tape = self.ring.tape if self.ring is not None else None
        parts = [p for p in (*self.host.hooked, self.ring, tape, self.guard) if p is not None]
        ids = {h.id for part in parts for h in getattr(part, "_handles", []) if hasattr(h, "id")}
        keep = tuple(parts) + (self.owner, *self.host.shared)
        return nullcontext(scratch_workspace(self.model, self.optimizer, self.scaler, ids, keep))

    @contextmanager
    def _inplace_workspace(self) -> Iterator[Any]:
        """In-place triage: the monitor's own hooks on the user's model must not record the replay."""
        with self.host.paused(), InplaceGuard(self.model, self.optimizer, self.scaler) as ws:
            yield ws

    def _replay_flow(
        self, step: int, trig: dict[str, Any], rec: dict[str, Any], record: IncidentRecord
    ) -> list[Finding]:
        """Rewind to the snapshot before `step`, replay up to it, and when the failing step fails
        again: localise it (op and module, or the samples of a spike), then batch vs state."""
        assert self.ring is not None and self.replay_fn is not None
        fn = self.replay_fn
        snap = self.ring.snapshot_for(step)
        if snap is None:
            record.notes.append(Msg("triage.note.no_snapshot", step=step, every=self.ring.every))
            return []
        entries = [self.ring.entries.get(s) for s in range(snap.step, step + 1)]
        target = entries[-1]
        spike = trig["kind"] == "loss_spike"

        def bad(p: BatchTrial) -> bool:
            return p.loss >= trig["threshold"] if spike else p.nonfinite

        self.ring.paused = True
        saved_state: Snapshot | None = None
        with self.workspace() as ws:
            t = time.perf_counter()
            rep = replay(ws, snap, entries, fn, step)
            record.replay = rep.to_dict()
            record.time("replay_s", time.perf_counter() - t)
            exact = rep.reached
            reproduced = self._reproduce(ws, step, rep, target, bad, record)
            if reproduced is False:
                if rep.faithful:
                    return [nondeterministic_finding(step, trig, rep, rec)]
                record.notes.append(Msg("triage.note.diverged", step=rep.diverged_at))
                return []
            if reproduced is None:
                return []
            assert target is not None  # the failing step was reproduced from its recorded entry
            loc, search = self._localize(ws, target, spike, rec, record)
            if self.policy == "skip" and exact and rep.faithful:
                saved_state = SnapshotTaker(ws.model, ws.optimizer, ws.scaler, None).take(step)
            t = time.perf_counter()
            bvs = self._batch_vs_state(ws, snap, step, entries, bad, exact)
            record.batch_vs_state = bvs
            record.time("batch_vs_state_s", time.perf_counter() - t)
        if spike:
            findings = [spike_finding(step, trig, rep, search, bvs, rec)]
        else:
            assert loc is not None
            findings = [replay_finding(step, trig, rep, loc, bvs, exact, live=rec)]
        record.level = "replay"
        if bvs.get("verdict") == "state":
            _lead_with_state(findings, step, bvs, record, _current_lr(self.optimizer), clip_threshold(self.host.meta))
        if not spike:
            _eps_first(findings, self.optimizer)
        if self.policy == "skip":
            record.action = self._maybe_rollback(step, trig, bvs, saved_state, record)
        return findings

    def _reproduce(
        self,
        ws: Any,
        step: int,
        rep: Any,
        target: StepEntry | None,
        bad: Callable[[BatchTrial], bool],
        record: IncidentRecord,
    ) -> bool | None:
        """Does the failing step fail again after the replay? True, False, or None (cannot tell)."""
        assert self.ring is not None and self.replay_fn is not None
        if rep.reached:
            reproduced = bad(rep.target_trial) if rep.target_trial else None
        elif target is not None and target.kept:
            # some batch before the target was not kept: try the failing batch on the state
            # the replay got to (an approximation of the state before the failing step)
            p = try_batch(ws, target.device_batch(), self.replay_fn, rng=target.rng)
            reproduced = True if bad(p) else None
            gap = self.ring.entries.get(rep.stopped_at) if rep.stopped_at is not None else None
            why = rep.error or Msg("triage.note.batch_of", step=rep.stopped_at, why=_why_missing(gap))
            record.notes.append(Msg("triage.note.approximated", why=why, step=step, at=rep.stopped_at))
        else:
            reproduced = None
            record.notes.append(Msg("triage.note.not_replayable", step=step, why=_why_missing(target)))
        record.reproducible = reproduced
        return reproduced

    def _localize(
        self, ws: Any, target: StepEntry, spike: bool, rec: dict[str, Any], record: IncidentRecord
    ) -> tuple[Any, Any]:
        """The failing step again, traced: the first non-finite op (a NaN/Inf), or the samples
        that make the loss spike. Returns (localization, sample search), one of them None."""
        fn = self.replay_fn
        assert fn is not None
        batch_t = target.device_batch()
        n = B.batch_size(batch_t)
        loc = search = None
        t = time.perf_counter()
        with Preserve(ws.model) as keep:
            if spike:
                search = (
                    per_sample_outliers(batch_t, n or 1, lambda sub: _loss_only(ws, sub, fn, target, keep))
                    if n
                    else None
                )
                record.samples = search.to_dict() if search else None
            else:
                loc = localize_on(ws.model, batch_t, fn, rng=target.rng, live=rec, preserve=keep)
                record.localization = loc.to_dict()
        record.time("localize_s", time.perf_counter() - t)
        return loc, search

    def _scale_flow(
        self, step: int, trig: dict[str, Any], rec: dict[str, Any], record: IncidentRecord
    ) -> list[Finding]:
        """A GradScaler that skips step after step: trace this step's forward and backward without
        the loss scale. Skipped steps leave the weights as they were, so the current state is the
        state of the step; no replay is needed. If the unscaled gradients are non-finite too, the
        op that makes them so is the cause no scale can fix; if they are finite, the scale itself
        overflows them (the detectors say that from the scale's curve)."""
        assert self.ring is not None and self.replay_fn is not None
        entry = self.ring.entries.get(step)
        if entry is None or not entry.kept:
            record.notes.append(Msg("triage.note.no_op_answer", step=step, why=_why_missing(entry)))
            return []
        self.ring.paused = True
        t = time.perf_counter()
        with self.workspace() as ws, Preserve(ws.model) as keep:
            loc = localize_on(
                ws.model,
                entry.device_batch(),
                self.replay_fn,
                rng=entry.rng,
                live=rec,
                find_samples=False,
                preserve=keep,
            )
        record.localization = loc.to_dict()
        record.time("localize_s", time.perf_counter() - t)
        first, n = int(trig["first"]), int(trig["streak"])
        record.level = "replay"
        if not loc.found:
            record.notes.append(Msg("triage.note.scale_overflows", step=step))
            return [self._scale_finding(first, n, step)]
        back = loc.trace.backward if loc.phase == "backward" else None
        op = back.forward_op if back is not None and back.forward_op else loc.op
        ev = [Msg("triage.scale.traced", n=n, first=first, step=step), *loc.evidence]
        fixes = [f for f in loc.fixes if getattr(f, "kind", None) != "add_scaler"]  # it has a scaler
        return [
            Finding(
                rule="triage.scale_traced",
                cause="loss_scale_collapse",
                symptom="skipped_steps",
                severity="critical",
                confidence=0.9,
                step=first,
                batch=step,
                layer=loc.layer,
                op=op,
                evidence=ev,
                fixes=as_fixes(fixes),
                code=loc.code,
            )
        ]

    def _scale_finding(self, first: int, n: int, step: int) -> Finding:
        """Without the loss scale the step is finite: the scale overflows the fp16 gradients. A scale
        still far above GradScaler's default after the back-offs is an initial scale set too high
        (the back-off ends by itself: the skipped steps are lost updates); a default scale that
        keeps falling is a collapse. The fix: start at the default scale, with the run's interval."""
        scale = float(self.scaler.get_scale()) if self.scaler is not None else math.nan
        interval = int(self.scaler.get_growth_interval()) if self.scaler is not None else 2000
        high = math.isfinite(scale) and scale > DEFAULT_SCALE
        ev: list[str] = [Msg("triage.scale.finite_unscaled", n=n, first=first, step=step, scale=scale)]
        gi = max(interval, 2000)
        said = Msg("triage.scale.fix_init_scale", init_scale=DEFAULT_SCALE, growth_interval=gi, scale=scale)
        fixes = [Fix.scaler(said, init_scale=DEFAULT_SCALE, growth_interval=gi)]
        return Finding(
            rule="triage.scale_collapse",
            cause="loss_scale_collapse",
            symptom="skipped_steps",
            severity="warning" if high else "critical",
            confidence=0.8 if high else 0.7,
            step=first,
            batch=step,
            evidence=ev,
            fixes=fixes,
        )

    def _batch_vs_state(
        self,
        ws: Any,
        snap: Snapshot,
        step: int,
        entries: list[StepEntry | None],
        bad: Callable[[BatchTrial], bool],
        exact: bool,
    ) -> dict[str, Any]:
        fn = self.replay_fn
        target = entries[-1]
        assert target is not None and fn is not None and self.ring is not None
        out: dict[str, Any] = {"state_step": step if exact else None}
        others = [e for e in reversed(entries[:-1]) if e is not None and e.kept][:3]
        res = []
        for e in others:
            p = try_batch(ws, e.device_batch(), fn, rng=e.rng)
            res.append({"step": e.step, "loss": p.loss, "bad": bad(p)})
        out["other_batches"] = res
        state_breaks = any(r["bad"] for r in res) if res else None
        healthy = snap if snap.step < step else self.ring.snapshot_for(step, before=True)
        batch_breaks = None
        if healthy is not None:
            ws.load(healthy)
            p = try_batch(ws, target.device_batch(), fn, rng=target.rng)
            batch_breaks = bad(p)
            out["healthy_state_step"] = healthy.step
            out["batch_on_healthy_state"] = {"loss": p.loss, "bad": batch_breaks}
        out["state_breaks_other_batches"] = state_breaks
        out["batch_breaks_healthy_state"] = batch_breaks
        out["verdict"] = verdict(batch_breaks, state_breaks)
        return out

    def _maybe_rollback(
        self, step: int, trig: dict[str, Any], bvs: dict[str, Any], saved: Snapshot | None, record: IncidentRecord
    ) -> str:
        """Skip policy: if the failing step's update already reached the user's weights, put the
        state before that step back (the bad batch is skipped)."""
        params = [p.detach() for p in self.model.parameters()]
        # float64: a norm past fp32's range is still a finite state, not a damaged one
        damaged = bool(params) and not bool(
            torch.isfinite(torch.stack(list(torch._foreach_norm(params, 2, dtype=torch.float64)))).all()
        )
        if trig["kind"] == "loss_spike" and bvs.get("verdict") in ("batch", "combination"):
            damaged = True
        if not damaged:
            return "skipped" if step in self.skipped_steps else "none"
        if saved is None:
            record.notes.append(Msg("triage.note.no_rollback"))
            return "none"
        load_model_state(self.model, saved.model_state())
        self.optimizer.load_state_dict(saved.optimizer_state())
        if saved.scaler:
            restore_scaler(self.scaler, saved.scaler)
        if self.ring is not None and step in self.ring.entries:
            e = self.ring.entries[step]
            e.stepped, e.skipped_by_policy = False, True
        later = self.host.step() - step
        dropped = Msg("triage.note.dropped_after", n=later) if later > 0 else ""
        record.notes.append(Msg("triage.note.rolled_back", step=step, dropped=dropped))
        log.warning("%s", Msg("triage.log.rolled_back", step=step))
        return "rolled_back"


def _lead_with_state(
    findings: list[Finding],
    step: int,
    bvs: dict[str, Any],
    record: IncidentRecord,
    lr: float | None,
    clip: float | None = None,
) -> None:
    """The state was already bad: the op is where it overflowed, the samples are all of them, and
    the batch-vs-state sentence comes first. The fixes of a state that went bad come first too:
    clipping (unless the run already clips at 1.0 or tighter: `clip`, its max_grad_norm), and a
    lower LR (both changes of training state a replay can check)."""
    record.level = "replay-state"
    state_fixes: list[Fix] = (
        [] if clip is not None and clip <= 1.0 else [Fix.clip(Msg("triage.state.fix_clip", max_norm=1.0), max_norm=1.0)]
    )
    if lr is not None and lr > 0:
        to = float(round_sig(lr / 3, 2))
        state_fixes.append(Fix.lr(Msg("triage.state.fix_lower_lr", lr=lr, to=to), to=to, now=lr))
    for f in findings:
        f.samples = None
        f.fixes = not_in(state_fixes, f.fixes) + list(f.fixes)
        vs = verdict_sentence(step, bvs)
        at = (
            next((i for i, e in enumerate(f.evidence) if identity(e) == identity(vs)), None) if vs is not None else None
        )
        if at is not None:  # the verdict is among the evidence: it goes first
            f.evidence.insert(0, f.evidence.pop(at))


def eps_underflow(optimizer: Any) -> tuple[float, str, float] | None:
    """(eps, dtype, an eps that survives) when an optimizer's eps is below the smallest normal
    number of the dtype its second moment is kept in (fp16: 6.1e-5): sqrt(v) + eps is then 0 where
    v underflowed to 0, and the update m / 0 is inf or NaN. None when the eps is safe."""
    for group in getattr(optimizer, "param_groups", []):
        eps = group.get("eps")
        if not isinstance(eps, float) or eps <= 0:
            continue
        for p in group.get("params", []):
            state = optimizer.state.get(p, {}) if hasattr(optimizer, "state") else {}
            t = next((v for k, v in state.items() if "sq" in k and isinstance(v, torch.Tensor)), p)
            if isinstance(t, torch.Tensor) and t.is_floating_point() and eps < torch.finfo(t.dtype).tiny:
                tiny = torch.finfo(t.dtype).tiny
                return eps, str(t.dtype).replace("torch.", ""), 10.0 ** math.ceil(math.log10(tiny))
    return None


def _eps_first(findings: list[Finding], optimizer: Any) -> None:
    """An optimizer eps that rounds to 0 in its state's dtype: said, and its fix put first."""
    found = eps_underflow(optimizer)
    if found is None:
        return
    eps, dtype, safe = found
    for f in findings:
        f.evidence.append(Msg("triage.state.eps_underflows", eps=eps, dtype=dtype))
        f.fixes.insert(0, Fix.adam_eps(Msg("triage.state.fix_eps", eps=safe, now=eps, dtype=dtype), eps=safe))


def _current_lr(optimizer: Any) -> float | None:
    """The LR of the optimizer's first group now (None when it has none)."""
    groups = getattr(optimizer, "param_groups", None) or [{}]
    lr = groups[0].get("lr")
    return float(lr) if isinstance(lr, (int, float)) and not isinstance(lr, bool) else None


def _loss_only(ws: Any, sub: Any, fn: Callable, entry: StepEntry, keep: Preserve) -> float:
    try:
        if entry.rng is not None:
            entry.rng.apply()
        with torch.no_grad():
            loss = scalar_loss(fn(ws.model, sub))
        return float(loss.detach().float())
    finally:
        keep.reset()


def _has_scaler(findings: list[Finding]) -> None:
    """A run that has a GradScaler is never told to add one: its "use a GradScaler" fixes go, and
    the clipping fix is said without it."""
    for f in findings:
        fixes = [x for x in f.fixes if getattr(x, "kind", None) != "add_scaler"]
        f.fixes = [
            Fix.clip(Msg("triage.backward.fix_clip_scaled"), max_norm=1.0)
            if getattr(x, "key", None) == "triage.backward.fix_clip"
            else x
            for x in fixes
        ]


def _why_missing(e: StepEntry | None) -> Msg:
    if e is None:
        return Msg("triage.missing.not_in_ring")
    if e.fingerprint:
        return Msg("triage.missing.over_budget", fingerprint=str(e.fingerprint))
    return Msg("triage.missing.not_passed")
