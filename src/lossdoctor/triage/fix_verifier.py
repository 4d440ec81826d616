"""The fix verifier: when the fixes of a replayed incident are checked, and where the verdicts go.

An incident whose flow replayed it is queued; its fixes (its findings', the live engine's other
findings', and any the user names through `mon.verify_fixes`) are replayed from the snapshot once
the window after the incident is recorded, or sooner when the next snapshot would drop the one its
replay starts from. How a fix is replayed and judged is `triage.verify`; this module writes the
result into the incident record (`verification`, and `fix_checks` on each finding) and its file.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from ..detectors.fix_kinds import Candidate
from ..findings import Finding
from ..messages import Msg
from .host import TriageHost
from .record import IncidentRecord
from .ring import SnapshotRing
from .state import RngState

log = logging.getLogger("lossdoctor")


class FixVerifier:
    """The replayed incidents whose fixes are still to be checked, and the checking of them.
    `workspace`: a context for a scratch copy of the training objects (the flow's)."""

    def __init__(
        self,
        host: TriageHost,
        ring: SnapshotRing | None,
        replay_fn: Callable | None,
        workspace: Callable[[], Any],
        *,
        window: int,
        budget: int,
    ) -> None:
        self.host = host
        self.ring = ring
        self.replay_fn = replay_fn
        self.workspace = workspace
        self.verify_window, self.verify_budget = window, budget
        self.queued: list[IncidentRecord] = []  # replayed incidents whose fixes are not checked yet

    def queue(self, record: IncidentRecord) -> None:
        """Check `record`'s fixes once the window after it is recorded (`due`)."""
        self.queued.append(record)

    def verify_fixes(
        self, record: IncidentRecord, others: list[Finding] | None = None, extra: tuple[Any, ...] = ()
    ) -> dict[str, Any]:
        """Replay the incident of `record` unfixed and with each fix of its findings, of `others`
        (the diagnosis's) and of `extra` (`findings.Fix`, e.g. `Fix("clip", max_norm=1.0)`). The result
        goes into the record (and its file); each finding gets its `fix_checks`. Never touches the user's objects."""
        from . import verify as V

        if record in self.queued:
            self.queued.remove(record)
        own = [Finding.from_dict(d) for d in record.findings]
        findings = own + list(others or [])
        pairs: list[tuple[Finding | None, Candidate]] = [(f, fix) for f in findings for fix in V.candidate_fixes(f)]
        pairs += [(None, V.candidate(fx)) for fx in extra]  # a fix of no finding
        result = self._verify_run(record, pairs)
        if result["status"] == "no_replay" and isinstance(record.verification, dict):
            return record.verification  # checked while the snapshot was there: that answer stands
        checks = result.get("checks", [])
        for f in findings:
            f.fix_checks = None
        for i, (fixed, _) in enumerate(pairs):
            if i < len(checks) and fixed is not None:
                fixed.fix_checks = V.order_checks((fixed.fix_checks or []) + [V.check_json(checks[i])])
        for f in findings:
            V.order_by_verdict(f)  # verified fixes first, those that did not help last
        result = V.result_json(result)
        result["findings"] = [f.to_dict() for f in findings[len(own) :] if f.fix_checks]
        record.verification = result
        record.findings = [f.to_dict() for f in own]
        self.host.writer.write_incident(f"step-{record.step:08d}", record.publish())
        return result

    def _verify_run(self, record: IncidentRecord, pairs: list[tuple[Any, Any]]) -> dict[str, Any]:
        from . import verify as V

        step = record.step
        state = any(fix.kind in V.STATE_FIXES for _, fix in pairs)
        snap = V.choose_snapshot(self.ring, step, earliest=state) if self.ring is not None else None
        if self.replay_fn is None or self.ring is None or snap is None:
            return {"step": step, "status": "no_replay", "checks": [], "note": Msg("verify.no_replay", step=step)}
        rng = RngState.capture()
        self.ring.paused = True
        try:
            with self.workspace() as ws:
                plan = V.Plan(
                    ws,
                    snap,
                    dict(self.ring.entries),
                    self.replay_fn,
                    step,
                    V.window_end(self.ring, step, self.verify_window),
                    V.bad_rule(record.to_dict()),
                )
                return V.verify_incident(plan, pairs, record.to_dict(), budget=self.verify_budget)
        finally:
            rng.restore()
            self.ring.paused = False

    def due(self, step: int, episode: bool) -> None:
        """Check the fixes of a replayed incident once its window is recorded, or sooner when the
        next snapshot would drop the one its replay starts from."""
        assert self.ring is not None
        from .verify import choose_snapshot

        for rec in list(self.queued):
            s = rec.step
            snap = choose_snapshot(self.ring, s, earliest=_state_fixes(rec))
            evicts = (
                (step + 1) % self.ring.every == 0
                and not episode
                and snap is not None
                and len(self.ring.snapshots) >= self.ring.keep
                and snap is self.ring.snapshots[0]
            )
            if step >= s + self.verify_window or evicts:
                self.queued.remove(rec)
                self._verify_safely(rec)

    def run_pending(self, enabled: Callable[[], bool]) -> None:
        """Check the fixes still waiting (at close), while triage is `enabled`."""
        while self.queued and enabled():
            self._verify_safely(self.queued.pop(0))

    def _verify_safely(self, rec: IncidentRecord) -> None:
        try:
            self.verify_fixes(rec, self._live_findings(rec))
        except Exception as e:  # verification must never take the training down
            rec.verification = {"status": "error", "error": f"{type(e).__name__}: {e}"}
            rec.publish()  # what the monitor and the live engine hold says so (the file is not rewritten)
            log.warning("%s", Msg("verify.log.failed", step=rec.step, error=f"{type(e).__name__}: {e}"))

    def _live_findings(self, rec: IncidentRecord) -> list[Finding]:
        """Copies of the live engine's findings other than the incident's own (same cause and step):
        verification writes verdicts into the findings it checks, never into the engine's."""
        own = {(d.get("cause"), d.get("step")) for d in rec.findings if isinstance(d, dict)}
        return [Finding.from_dict(f.to_dict()) for f in self.host.findings() if (f.cause, f.step) not in own]


def _state_fixes(rec: IncidentRecord) -> bool:
    """The record's findings suggest a change of training state (their replay starts earlier)."""
    from .verify import STATE_FIXES, candidate_fixes

    fs = [Finding.from_dict(d) for d in rec.findings]
    return any(fx.kind in STATE_FIXES for f in fs for fx in candidate_fixes(f))
