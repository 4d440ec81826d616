"""Triage, as the monitor owns it: the snapshot ring, the skip guard, and three parts.

    trigger.py       IncidentTrigger: which step record starts an incident
    flow.py          IncidentFlow: replay, reproduce, localise, batch vs state -> the IncidentRecord
    fix_verifier.py  FixVerifier: the incident's fixes replayed once the window after it is recorded
    stage_flow.py    StageFlow: on a pipeline stage, that stage replayed alone (its tape: stage_tape.py)

`Triage` feeds them the step records in order, writes each record to `incidents/step-N.json`,
applies the policy (report, raise: `TrainingIncident`, skip: the guard), and schedules the LR probe
(`lr_probe.py`) of an announced LR or plateau finding.

Everything runs on copies; the user's model, optimizer, gradients and RNG are left bit-identical
(the `report` and `raise` policies never change them).
"""

from __future__ import annotations

import logging
import math
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..findings import Finding
from ..messages import Msg
from .fix_verifier import FixVerifier
from .flow import IncidentFlow
from .host import TriageHost
from .record import IncidentRecord
from .ring import SnapshotRing
from .stage_tape import StageTape
from .state import RngState
from .trigger import IncidentTrigger

if TYPE_CHECKING:
    from .policy import SkipGuard

log = logging.getLogger("lossdoctor")


class TrainingIncident(RuntimeError):
    """Raised by `mon.step` under `on_incident="raise"`, after the incident has been triaged and
    recorded. `.record` is the incident record; `.findings` its findings."""

    def __init__(self, message: str, record: dict[str, Any]) -> None:
        super().__init__(message)
        self.record = record
        self.findings = [Finding.from_dict(f) for f in record.get("findings", [])]


class Triage:
    """Owned by the Monitor: the ring, the skip guard, the trigger, the flow and the fix verifier. It
    sees the monitor only through a `TriageHost` (the training objects, the run log, the step, three
    services)."""

    def __init__(
        self,
        host: TriageHost,
        replay_fn: Callable | None,
        *,
        on_incident: str = "report",
        snapshot_every: int = 50,
        snapshot: str = "memory",
        snapshot_budget: int | None = None,
        inplace: bool = False,
        max_incidents: int = 3,
        verify: bool = True,
        verify_window: int = 20,
        verify_budget: int = 400,
    ) -> None:
        self.host = host
        self.replay_fn = replay_fn
        self.policy = on_incident
        self.max_incidents = max_incidents
        self.model = host.model
        self.optimizer = host.optimizer
        self.records: list[IncidentRecord] = []
        self.episode = False
        self.trigger = IncidentTrigger(has_scaler=host.scaler is not None, scheduler=host.scheduler)
        self.skipped_steps: set[int] = set()
        self.enabled = True
        self._pending: TrainingIncident | None = None
        self.verify_on = verify
        self._to_probe: list[Finding] = []  # live findings whose fixes the LR probe will try (lr_probe.py)
        self._probed: set[str] = set()  # causes probed (or asked for) once already
        self.probe_records: list[dict[str, Any]] = []  # the live engine reads them (monitor shares the list)
        self.ring: SnapshotRing | None = None
        #: a pipeline stage's tape (its micro-batches' inputs and output gradients), in the ring
        self.tape: StageTape | None = None
        self.guard: SkipGuard | None = None  # on_incident="skip" only
        self._install(host, replay_fn, on_incident, snapshot_every, snapshot, snapshot_budget)
        self.flow = IncidentFlow(
            host,
            replay_fn,
            self.ring,
            self.guard,
            self,
            policy=on_incident,
            inplace=inplace,
            skipped_steps=self.skipped_steps,
        )
        self.verifier = FixVerifier(
            host, self.ring, replay_fn, self.flow.workspace, window=verify_window, budget=verify_budget
        )
        self._describe(host, replay_fn, on_incident, snapshot, snapshot_every)

    def _install(
        self,
        host: TriageHost,
        replay_fn: Callable | None,
        on_incident: str,
        snapshot_every: int,
        snapshot: str,
        snapshot_budget: int | None,
    ) -> None:
        """The snapshot ring (with a replay function), a pipeline stage's tape, the skip guard; on
        any failure what was installed is removed before it is raised. Apart from `__init__` to
        keep it short."""
        try:
            if replay_fn is not None and snapshot != "off":
                self.ring = SnapshotRing(
                    self.model,
                    self.optimizer,
                    host.scaler,
                    host.scheduler,
                    every=snapshot_every,
                    mode=snapshot,
                    budget=snapshot_budget,
                    directory=Path(host.run_dir) / "snapshots",
                )
                if host.stage is not None:  # one stage is replayed alone: no loss of its own to verify
                    ring = self.ring
                    obj = host.stage.obj  # its `has_backward` is off while `schedule.eval()` runs
                    self.tape = ring.tape = StageTape(
                        self.model,
                        ring._device,
                        paused=lambda: ring.paused,
                        trains=lambda: bool(getattr(obj, "has_backward", True)),
                    )
                    self.verify_on = False
                self.ring.snapshot(0)
                if self.tape is not None:
                    self.tape.limit = self.ring.tape_limit()  # the first step is bounded too
            if on_incident == "skip":
                from .policy import SkipGuard

                self.guard = SkipGuard(self.optimizer, self._on_skip, self._after_skip)
        except BaseException:
            _run_all(self._removals())  # the monitor cannot reach a triage it never got: its hooks go here
            raise

    def _describe(
        self, host: TriageHost, replay_fn: Callable | None, on_incident: str, snapshot: str, snapshot_every: int
    ) -> None:
        """The run's metadata says how incidents are triaged (policy, replay, snapshots). Apart from
        `__init__` to keep it short."""
        host.meta["triage"] = {
            "policy": on_incident,
            "replay": replay_fn is not None,
            "snapshot": snapshot if self.ring else "off",
            "snapshot_every": snapshot_every,
            "budget": self.ring.budget if self.ring else None,
        }
        if self.tape is not None:
            host.meta["triage"]["replay"] = "stage"  # this stage alone, on its recorded micro-batches

    # --- called by the monitor ------------------------------------------------------------------
    def begin_step(self, step: int, batch: Any) -> None:
        if self.ring is not None and self.enabled:
            try:
                self.ring.record(step, batch)
            except Exception as e:
                self._disable(e)

    def observe(self, rec: dict[str, Any]) -> None:
        """Every step record, in order, before the live engine sees it."""
        if not self.enabled:
            return
        try:
            self._observe(rec)
        except Exception as e:
            self._disable(e)

    def end_step(self, step: int) -> None:
        if self.ring is not None and self.enabled:
            try:
                self.verifier.due(step, self.episode)
                self._probe_due(step)
                self.ring.maybe_snapshot(step + 1, healthy=not self.episode)
            except Exception as e:
                self._disable(e)

    def _verify_pending(self) -> None:
        self.verifier.run_pending(lambda: self.enabled)

    def take_pending(self) -> TrainingIncident | None:
        p, self._pending = self._pending, None
        return p

    def close(self) -> None:
        """Check the fixes and run the probes still waiting, then remove the hooks and the snapshots,
        each on its own; the first failure is raised after all were tried (the monitor logs it and
        goes on closing)."""
        pending = [self._verify_pending, self.probe_pending] if self.ring is not None else []
        _run_all(pending + self._removals())

    def _removals(self) -> list[Callable[[], None]]:
        out = [self.ring.remove, self.ring.drop] if self.ring is not None else []
        if self.guard is not None:
            out.append(self.guard.remove)
        return out

    def verify_fixes(
        self, record: IncidentRecord, others: list[Finding] | None = None, extra: tuple[Any, ...] = ()
    ) -> dict[str, Any]:
        """Replay the incident of `record` unfixed and with each fix of its findings, of `others`
        (the diagnosis's) and of `extra` (`findings.Fix`, e.g. `Fix("clip", max_norm=1.0)`); see
        `FixVerifier.verify_fixes`."""
        if self.tape is not None:  # a pipeline stage: a fix is judged on the loss, which needs every stage
            return {
                "step": record.step,
                "status": "no_replay",
                "checks": [],
                "note": Msg("triage.stage.no_verify", stage=self.host.stage.index),
            }
        return self.verifier.verify_fixes(record, others, extra)

    # --- the LR probe (lr_probe.py) -----------------------------------------------------------------
    def request_probe(self, finding: Finding) -> None:
        """A live finding was announced: try its fixes from a snapshot once enough steps are
        recorded (once per cause); without replay, a record says that no probe could run."""
        from . import lr_probe as P

        if (
            not self.enabled
            or finding.cause in self._probed
            or len(self._probed) >= P.SETTINGS.max_probes
            or not P.probe_plan(finding)
        ):
            return
        self._probed.add(finding.cause)
        if self.tape is not None:  # a pipeline stage: the loss an LR is judged on needs every stage
            self._keep_probe(
                finding, P.no_probe_record(finding, Msg("triage.stage.no_probe", stage=self.host.stage.index))
            )
            return
        if self.replay_fn is None or self.ring is None:
            why = self.host.replay_refused() or Msg(
                "triage.note.no_replay_fn" if self.replay_fn is None else "triage.note.snapshots_off"
            )
            self._keep_probe(finding, P.no_probe_record(finding, why))
            return
        self._to_probe.append(Finding.from_dict(finding.to_dict()))

    def _probe_due(self, step: int) -> None:
        """Probe once the window after the start snapshot is recorded, or sooner when the next
        snapshot would drop that snapshot."""
        from . import lr_probe as P

        assert self.ring is not None
        for f in list(self._to_probe):
            snap = P.start_snapshot(self.ring)
            if snap is None:
                continue
            evicts = (
                (step + 1) % self.ring.every == 0
                and not self.episode
                and len(self.ring.snapshots) >= self.ring.keep
                and snap is self.ring.snapshots[0]
            )
            if step >= snap.step + P.SETTINGS.window or evicts:
                self._to_probe.remove(f)
                self._probe_safely(f)

    def probe_pending(self) -> None:
        """Run the probes still waiting (at close, and before `mon.diagnose()` reads the log)."""
        while self._to_probe and self.enabled and self.ring is not None:
            self._probe_safely(self._to_probe.pop(0))

    def _probe_safely(self, finding: Finding) -> None:
        from . import lr_probe as P

        try:
            record = self._probe(finding)
        except Exception as e:  # the probe must never take the training down
            log.warning("%s", Msg("verify.log.failed", step=int(finding.step or 0), error=f"{type(e).__name__}: {e}"))
            record = P.no_probe_record(finding, Msg("verify.replay_error", error=f"{type(e).__name__}: {e}"))
        self._keep_probe(finding, record)

    def _keep_probe(self, finding: Finding, record: dict[str, Any]) -> None:
        """The probe's record in `probes/`, and in the records the live engine reads (so what it
        announces next already knows the verdict)."""
        self.host.writer.write_incident(f"probe-{finding.cause}", record, folder="probes")
        self.probe_records.append(record)

    def _probe(self, finding: Finding) -> dict[str, Any]:
        from . import lr_probe as P
        from . import verify as V

        assert self.ring is not None and self.replay_fn is not None
        snap = P.start_snapshot(self.ring)
        if snap is None:
            return P.no_probe_record(
                finding, Msg("triage.note.no_snapshot", step=int(finding.step or 0), every=self.ring.every)
            )
        rng = RngState.capture()
        self.ring.paused = True
        try:
            with self.flow.workspace() as ws:
                end = V.window_end(self.ring, snap.step, P.SETTINGS.window)
                plan = V.Plan(
                    ws,
                    snap,
                    dict(self.ring.entries),
                    self.replay_fn,
                    snap.step,
                    end,
                    lambda loss, finite, skips: not math.isfinite(loss) or not finite,
                )
                return P.probe_record(finding, P.run_probe(plan, finding, P.probe_plan(finding)))
        finally:
            rng.restore()
            self.ring.paused = False

    # --- skip policy --------------------------------------------------------------------------
    def _on_skip(self) -> None:
        self.skipped_steps.add(self.host.step())
        if self.ring is not None:
            self.ring.mark_skipped()

    def _after_skip(self) -> None:
        self.host.mark_skipped()  # the step record says "skipped", as for a GradScaler skip

    def _observe(self, rec: dict[str, Any]) -> None:
        step = int(rec["step"])
        if self.ring is not None:
            self.ring.observe_loss(step, rec.get("loss"))
        trig = self.trigger.check(rec, self.skipped_steps, first=not self.records)
        if trig is None:
            self.episode = False
            self.trigger.healthy(rec)
            return
        if self.episode or len(self.records) >= self.max_incidents:
            return
        self.episode = True
        record = self.flow.run(step, trig, rec)
        self.records.append(record)
        shared = record.publish()
        self.host.incidents.append(shared)
        self.host.writer.write_incident(f"step-{step:08d}", shared)
        if self.verify_on and record.level.startswith("replay"):
            self.verifier.queue(record)  # checked once the window after it is recorded (end_step)
        if self.policy == "raise":
            f = record.findings[0] if record.findings else None
            what = (
                f"{f['cause']} at step {step}"
                + (f", {f['layer']}" if f.get("layer") else "")
                + (f", {f['op']}" if f.get("op") else "")
                if f
                else f"incident at step {step}"
            )
            self._pending = TrainingIncident(
                f"lossdoctor: training incident: {what} (record: incidents/step-{step:08d}.json)", shared
            )

    def _disable(self, e: BaseException) -> None:
        self.enabled = False
        log.warning("%s", Msg("triage.log.disabled", error=f"{type(e).__name__}: {e}"))


def _run_all(steps: list[Callable[[], None]]) -> None:
    """Each step, whatever the others did; then the first failure, if any."""
    error: BaseException | None = None
    for fn in steps:
        try:
            fn()
        except Exception as e:
            error = error or e
    if error is not None:
        raise error
