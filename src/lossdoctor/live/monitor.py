"""`lossdoctor.watch`: the live monitor.

Signals (on the device) -> one packed copy per step -> a step record -> the run log and the live
engine. The training loop calls `mon.step(loss, batch=batch)` once per optimizer iteration, after
the optimizer step; everything else happens in hooks the monitor installs and removes.

Rules it keeps: no `.item()` or host sync per module or parameter; the user's model, optimizer,
RNG and gradients are never modified; an internal error disables the part that failed, is logged
once, and never reaches the training loop.
"""

from __future__ import annotations

import atexit
import logging
import math
import os
import time
import uuid
import weakref
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch import nn

from ..findings import Finding, Report, messages_data
from ..messages import Msg
from ..preflight.schedule import lambda_plan, unwrap_scheduler
from ..preflight.watch import start_preflight
from ..records import LayerStats
from ..signals.accelerate import sync_gradients_flag
from ..signals.applied_grads import AppliedGradProbe
from ..signals.batch import BatchProbe
from ..signals.describe import describe_run
from ..signals.distributed import distributed_probe, refuse_tp_replay, unwrap_data_parallel
from ..signals.fsdp1 import refuse_replay
from ..signals.gradients import GradProbe
from ..signals.launch import shared_run_name
from ..signals.optimizer import OptimizerProbe, scaler_scale, unwrap_optimizer
from ..signals.output_probs import OutputProbe
from ..signals.pipeline import defers_capture, hook_stage, pipeline_probe, refuse_pp_replay, split_stage
from ..signals.probe import Probe, StepInputs, StepRecord, probe_name
from ..signals.readout import Packer, Readout
from ..signals.stale_grads import StaleGradProbe
from ..signals.tracer import ModuleTracer
from ..sources.confined import ConfinedDir
from ..sources.rundir import VERSION_PREFIX
from ..triage.host import TriageHost
from ..triage.incident import Triage
from .diagnoser import LiveDiagnoser, write_alert
from .options import WatchOptions
from .runlog import RunLogWriter, claim_run_dir

log = logging.getLogger("lossdoctor")

#: per-module statistics written to layers.f32 at sampled steps, in this order
LAYER_STATS = ("act_absmax", "act_rms", "grad_absmax", "param_grad_norm", "param_norm")


#: monitors not closed yet: closed at interpreter exit (a loop that ended on an exception never
#: called close: its run log is completed and its hooks removed)
_OPEN_MONITORS: weakref.WeakSet[Monitor] = weakref.WeakSet()


@atexit.register
def _close_open_monitors() -> None:
    for mon in list(_OPEN_MONITORS):
        try:
            mon.close()
        except Exception:  # at exit: nothing may be raised
            pass


def default_log_dir(world_size: int = 1) -> Path:
    """A new directory per run; with several ranks the same one on every rank (derived from the
    launcher's environment, so the ranks agree without a collective)."""
    name = shared_run_name() if world_size > 1 else None
    return Path("lossdoctor_runs") / (name or datetime.now().strftime("%Y%m%d-%H%M%S-%f"))


#: monitors this process made under torch.distributed (every rank makes the same sequence)
_RANKED_WATCHES = [0]


def run_launch(world_size: int) -> str | None:
    """The name every rank of this run shares, or, for one process, a name of its own; None when
    the ranks cannot agree on one (see `runlog.claim_run_dir`). Under torch.distributed the first
    rank to ask puts a fresh name in the process group's key-value store (`compare_set`: no
    collective, no wait for the other ranks) and every rank reads it back, so two launches from one
    parent process (`mp.spawn` twice) and two `watch` calls in one launch never share a name;
    without a store, the launcher's environment (`signals.launch`)."""
    if world_size <= 1:
        return uuid.uuid4().hex
    _RANKED_WATCHES[0] += 1
    try:
        import torch.distributed as dist

        store = dist.distributed_c10d._get_default_store()
        key = f"lossdoctor/run-dir/{_RANKED_WATCHES[0]}"
        return store.compare_set(key, "", uuid.uuid4().hex).decode()
    except Exception:  # no default store (a process group made without one), an old torch
        return shared_run_name()


def open_run_log(run_dir: Path, slot: ConfinedDir, ranked: bool, notes: list[str]) -> RunLogWriter:
    """The run log writer in `run_dir` (`slot`, or its `rank-N/`); a refused `rank-N/` (a link)
    leaves a writer that writes nothing and says so in `notes`."""
    d: ConfinedDir | None = slot
    if ranked:
        try:
            d = slot.sub(run_dir.name)
        except OSError as e:
            d = None
            notes.append(Msg("monitor.path_refused", path=run_dir.name, error=str(e.strerror or e)))
            log.warning("lossdoctor: %s", notes[-1])
        finally:
            slot.close()
    return RunLogWriter(run_dir, d, notes, inert=d is None)


def _dist_rank() -> tuple[int | None, int]:
    try:
        import torch.distributed as dist

        if dist.is_available() and dist.is_initialized():
            return dist.get_rank(), dist.get_world_size()
    except Exception:
        pass
    return None, 1


@dataclass
class FlushedStep:
    """One step between `mon.step` and its read-back: what the step was given, the loss when it
    came as a host number, and each probe with the context its `flush` returned."""

    inputs: StepInputs
    host_loss: float | None
    probes: list[tuple[Probe, Any]]


class Monitor:
    """Watches one model + optimizer. Create it with `lossdoctor.watch(...)`.

    Options (keyword arguments, gathered and checked as a `lossdoctor.live.options.WatchOptions`):
      layer_every     per-layer statistics every N steps (and at the first 5; default 10)
      check_inputs    also check the inputs of leaf modules that did not come from the previous module
      alerts          print a line on stderr when the live engine finds something new (through
                      `tqdm.write` while a tqdm bar is shown)
      update_budget   entries of the parameters read for the update ratio on sampled steps
      tokenizer       the tokenizer the batches were made with (its chat template tells the SFT label-mask
                      checks where the prompt ends; it decodes the evidence)
    Where findings go besides stderr and the run directory
    (taken by `lossdoctor.watch`, see `lossdoctor.integrations.sinks`):
      on_finding      fn(finding, step) for each live alert and each final finding at close
      sinks           False: not into the run's TensorBoard / W&B / MLflow (default True)
      tensorboard     the run's `SummaryWriter`
    Incident triage options (see `lossdoctor.triage`):
      on_incident     "report" (default: record and alert, training untouched), "raise" (mon.step raises
                      `lossdoctor.TrainingIncident` after the incident is recorded) or "skip" (optimizer steps
                      with non-finite gradients are skipped; a damaged state is rolled back, bad batch skipped)
      snapshot_every  K: a snapshot of model/optimizer/scaler/scheduler/RNG every K steps (with replay_fn)
      snapshot        "memory" (default), "disk" (under the run directory) or "off"
      snapshot_budget bytes of host memory for snapshots and recorded batches (default: 1/4 of RAM, at most
                      8 GiB); beyond it batches are kept as fingerprints only (on a pipeline stage it
                      bounds its recorded micro-batches too: `lossdoctor.triage.stage_tape`)
      triage_inplace  replay on the user's model (restored bit for bit afterwards) instead of a scratch copy
      max_incidents   incidents triaged per run (the first step of each non-finite episode)
      verify          replay each fix of a replayed incident from the snapshot and record its verdict
                      (default True; the incident record's "verification")
      verify_window   steps replayed after the incident step (default 20, bounded by the recorded batches)
      verify_budget   replayed steps all the replays of one incident may take together (default 400)

    Each step, every probe in `probes` (the built-in tracer, gradient, optimizer and batch probes,
    then the add-on probes of integrations; see `lossdoctor.signals.probe`) hands its device tensors
    to one packer; when the step's one copy reaches the host, each probe adds its fields to the step
    record, which goes to the run log, to triage and to the live engine.
    """

    def __init__(
        self,
        model: nn.Module,
        optimizer: Any,
        scaler: Any = None,
        scheduler: Any = None,
        log_dir: str | os.PathLike[str] | None = None,
        task: str | None = None,
        replay_fn: Callable[[nn.Module, Any], torch.Tensor] | None = None,
        **options: Any,
    ) -> None:
        self.options = opts = WatchOptions(**options)
        #: a pipeline stage (`watch(stage, opt)` on a `PipelineStage`): its module is what is watched
        model, self.stage = split_stage(model)
        self.model = model
        self.optimizer = unwrap_optimizer(optimizer)
        self.scaler = scaler
        self.scheduler = scheduler
        self.task = task
        self.replay_fn = replay_fn
        self.layer_every = opts.layer_every
        self.rank, self.world_size = _dist_rank()
        slot = self._claim_run_dir(log_dir)
        self._init_state()
        self.writer = open_run_log(self.run_dir, slot, self.world_size > 1, self.notes)
        try:
            self._install(model, optimizer, opts)
        except BaseException:
            # a watch() that raises must leave nothing behind: no hook on the model or the
            # optimizer, no tracer collecting every step with nobody to flush it
            self._teardown()
            self.closed = True
            raise
        _OPEN_MONITORS.add(self)
        # where to look afterwards: one line, once, on rank 0 (a new version folder was named already)
        if opts.alerts and not self.rank and self.version == VERSION_PREFIX + "0":
            write_alert(Msg("monitor.run_dir", path=str(self.run_dir)).render(_alert_lang()))

    def _claim_run_dir(self, log_dir: str | os.PathLike[str] | None) -> ConfinedDir:
        """This run's own directory: `log_dir` itself, or a fresh `version_N/` inside it when it
        already holds a run (two runs are never mixed); a rank of several writes in `rank-N/`."""
        root = Path(log_dir) if log_dir is not None else default_log_dir(self.world_size)
        #: the directory the user named; this run's own is `log_dir` (itself, or a fresh
        #: `version_N/` inside it when it already holds a run: two runs are never mixed)
        self.root = root
        if log_dir is None:  # a fresh name per launch (`default_log_dir`): never holds another run
            slot, self.version = ConfinedDir.open_root(root), VERSION_PREFIX + "0"
        else:
            slot, self.version = claim_run_dir(root, run_launch(self.world_size), self.rank)
        self.log_dir = slot.path
        self.run_dir = slot.path / f"rank-{self.rank}" if self.world_size > 1 else slot.path
        if self.version != VERSION_PREFIX + "0" and not self.rank:
            log.warning("lossdoctor: %s", Msg("monitor.new_version", root=str(root), path=str(slot.path)))
        return slot

    def _init_state(self) -> None:
        """The run's state before its first step: counters, the probes' list, incidents, notes, sinks."""
        self.step_idx = 0
        self.closed = False
        #: what is measured each step: the built-in probes, then those integrations add (`add_probe`)
        self.probes: list[Probe] = []
        #: incident records of this run (written to incidents/ by triage; read by the live engine)
        self.incidents: list[dict[str, Any]] = []
        self._t0 = time.perf_counter()
        self._warned: set[str] = set()
        self._last_scale: float | None = None  # the loss scale of the previous step record
        #: set by an integration whose engine runs micro-steps (DeepSpeed): `(loss, batch)` -> None
        #: for a call that is not an optimizer step, else the step's loss and batch
        self.step_filter: Callable[[Any, Any], tuple[Any, Any] | None] | None = None
        #: steps a training engine reported skipped by its own overflow check (DeepSpeed)
        self.engine_skips: set[int] = set()
        #: why replay cannot run on this model (DeepSpeed ZeRO 1-3, FSDP1), said in incident records
        self.replay_refused: Msg | None = None

        #: what the monitor could not do (internal errors): written to meta.json, read back as notes
        self.notes: list[str] = []
        #: listeners told of each live alert (`alert(finding, step)`) and, at close, of the final
        #: report (`final(report, step)`): `on_finding` and the run's TensorBoard/W&B/MLflow
        #: (`integrations.sinks`, attached by `lossdoctor.watch`)
        self.sinks: list[Any] = []

    def _install(self, model: nn.Module, optimizer: Any, opts: WatchOptions) -> None:
        """Everything `watch` installs, in order; `_teardown` removes whatever of it exists."""
        wrapper, model = model, unwrap_data_parallel(model)  # names as the user's model has them
        self.model = model  # replay runs the bare model: a DDP forward without backward would stall DDP
        self._add_probes(model, optimizer, opts)
        self.readout = Readout()
        self.meta = self._describe(
            model,
            self.scaler,
            self.scheduler,
            self.task,
            {
                "rank": self.rank,
                "world_size": self.world_size,
                "layer_every": self.layer_every,
                "started": time.time(),
                "replay": self.replay_fn is not None,
            },
        )
        self.writer.write_meta(self.meta)
        self.writer.start_layers(self.tracer.names, list(LAYER_STATS), [type(m).__name__ for m in self.tracer.modules])
        self._layer_steps: list[int] = []
        self._layer_rows: list[np.ndarray] = []
        self.live = LiveDiagnoser(
            self.meta, rank=self.rank, alerts=opts.alerts, on_finding=self._record_finding, layers_fn=self._layer_stats
        )
        self.live.incidents = self.incidents
        self._set_sampled(self._is_sampled(0))
        if self.world_size > 1 or self.stage is not None:  # (a 1-stage pipeline: its group of one)
            self._attach_distributed(wrapper)
        self.preflight = start_preflight(self)  # config now, first forward and batches later; never raises
        # incident triage (snapshot ring, replay, op-level localisation, on_incident policy)
        self.triage = Triage(
            self._triage_host(),
            self.replay_fn,
            on_incident=opts.on_incident,
            snapshot_every=opts.snapshot_every,
            snapshot=opts.snapshot,
            snapshot_budget=opts.snapshot_budget,
            inplace=opts.triage_inplace,
            max_incidents=opts.max_incidents,
            verify=opts.verify,
            verify_window=opts.verify_window,
            verify_budget=opts.verify_budget,
        )
        self.live.probes = self.triage.probe_records  # what the LR probe measured, for the next evaluations
        if self.stage is not None and self.stage.obj is not None:
            pf, tape = self.preflight, self.triage.tape
            self._unhook_stage = hook_stage(
                self.stage,
                [*self.probes, pf, getattr(pf, "probe", None), tape],
                self._recapture,
                on_scale=tape.scaled if tape is not None else None,
            )
            if self.grads.should_capture is None and defers_capture(self.stage):
                self.grads.should_capture = _never  # one capture per step, after the schedule's last backward

    def _add_probes(self, model: nn.Module, optimizer: Any, opts: WatchOptions) -> None:
        """The per-step probes on the bare model and the optimizer, appended to `self.probes` in
        this order: the first of `_install`'s steps, apart from it to keep `_install` short."""
        self.tracer = ModuleTracer(model, check_inputs=opts.check_inputs)
        self.tracer.notes = self.notes  # what the trace cannot see goes into the run's notes
        self.probes.append(self.tracer)
        self.grads = GradProbe(model, self.tracer.names, self._scale)
        self.probes.append(self.grads)
        self.grads.should_capture = sync_gradients_flag(optimizer)  # skip non-final micro-batches
        self.opt_probe = OptimizerProbe(self.optimizer, budget=opts.update_budget)
        self.probes.append(self.opt_probe)
        self.batch_probe = BatchProbe()
        self.batch_probe.notes = self.notes  # what the batch checks could not read, said once
        self.probes.append(self.batch_probe)
        self.stale = StaleGradProbe(self.optimizer)  # gradients never zeroed
        self.probes.append(self.stale)
        self.outputs = OutputProbe(model)  # probabilities fed to a softmax-applying loss
        self.probes.append(self.outputs)
        self.applied = AppliedGradProbe(self.optimizer)  # clipping at a tiny max_norm
        self.probes.append(self.applied)

    def _attach_distributed(self, wrapper: nn.Module) -> None:
        """The probe of how gradients cross ranks (DDP's all-reduce, FSDP2's shards), if any; the
        layout goes into the run metadata."""
        if self.stage is not None:
            probe: Any = pipeline_probe(wrapper, self.grads, self.stage)
        else:
            probe = distributed_probe(wrapper, self.grads, self._scale, self.world_size)
        if probe is not None:
            self.add_probe(probe)
            self.meta["distributed"] = probe.describe()
        if self.stage is not None:  # the stage, whatever measured the gradient norm
            self.meta.setdefault("distributed", {"kind": "pp"}).update(self.stage.describe())
        if "distributed" in self.meta:
            self.writer.write_meta(self.meta)

    def _recapture(self) -> None:
        """The gradient norms again (a pipeline schedule rescaled the accumulated gradients after the
        last backward); inside the user's schedule step, so nothing may escape."""
        try:
            if self.grads.enabled and (self.grads.fresh or self.grads.backwards):
                self.grads.capture()
        except Exception as e:
            self.grads._fail(e)

    def _triage_host(self) -> TriageHost:
        pf = self.preflight
        # every probe so far (an add-on one, such as a pipeline stage's, may hook the model too)
        hooked = [p for p in (*self.probes, pf, getattr(pf, "probe", None)) if p is not None]
        return TriageHost(
            model=self.model,
            optimizer=self.optimizer,
            scaler=self.scaler,
            scheduler=self.scheduler,
            run_dir=self.run_dir,
            rank=self.rank,
            writer=self.writer,
            meta=self.meta,
            incidents=self.incidents,
            step=lambda: self.step_idx,
            paused=self.paused,
            mark_skipped=self.opt_probe.mark_skipped,
            hooked=hooked,
            shared=(self, self.writer, self.live),
            replay_refused=lambda: self.replay_refused,
            findings=lambda: self.findings,
            stage=self.stage if self.stage is not None and self.stage.n_stages > 1 else None,
        )

    # --- public API ---------------------------------------------------------------------------
    def step(self, loss: Any = None, batch: Any = None) -> None:
        """Record one optimizer iteration. Call after `optimizer.step()` / `scaler.update()`."""
        if self.step_filter is not None and not self.closed:
            kept = self.step_filter(loss, batch)
            if kept is None:  # a micro-step of the engine's gradient accumulation
                return
            loss, batch = kept
        if not self.closed:
            for probe in self.probes:  # collectives: on every rank at every step, even a disabled one
                presync = getattr(probe, "presync", None)
                if presync is not None:
                    presync()
        if self.closed or "step" in self._warned:
            self.step_idx += 1
            return
        if self.preflight is not None:
            self.preflight.observe(self.step_idx, loss, batch)
        try:
            self.triage.begin_step(self.step_idx, batch)
            self._collect(loss, batch)
            self._drain(wait=False)
            self.triage.end_step(self.step_idx)
        except Exception as e:  # the training loop never sees the monitor's failure
            self.disable("step", e)
        self.step_idx += 1
        self._set_sampled(self._is_sampled(self.step_idx))
        incident = self.triage.take_pending()  # on_incident="raise"
        if incident is not None:
            raise incident

    def add_probe(self, probe: Probe) -> None:
        """Add a probe run at every step after the built-in ones (the interface:
        `lossdoctor.signals.probe`). Integrations use it for signals only they can see (micro-batch
        losses, the data-parallel reduction); a probe with `presync()` has it called on every rank
        at every step, before anything else (collectives)."""
        self.probes.append(probe)
        triage = getattr(self, "triage", None)
        if triage is not None:  # a scratch copy of the model for replay leaves its hooks out
            triage.host.hooked.append(probe)

    @contextmanager
    def paused(self) -> Iterator[None]:
        """The monitor's hooks on the model record nothing inside (triage replaying on the user's
        model); the tracer and gradient capture are switched back as they were afterwards."""
        parts: tuple[Probe, ...] = (self.tracer, self.grads, self.stale, self.outputs, self.applied)
        state = [p.enabled for p in parts]
        for p in parts:
            p.enabled = False
        try:
            yield
        finally:
            for p, on in zip(parts, state):
                p.enabled = on
            for p in (self.tracer, self.stale, self.outputs, self.applied):
                p.reset()

    def close(self) -> None:
        if self.closed:
            return
        try:
            if self.preflight is not None:
                self.preflight.close()
            self._drain(wait=True)
            # closed before the last evaluation: the rules judged at the run's end (a schedule
            # planned far longer than the run) speak live too, as `diagnose` of the directory will
            self.meta.update({"closed": True, "steps": self.step_idx, "finished": time.time()})
            self._note_scheduler_steps()
            if "live diagnosis" not in self._warned:
                self.live.evaluate()
            self._tell_sinks("final", self.live.report)
            self.writer.write_meta(self.meta)
        except Exception as e:
            self.disable("close", e)
        finally:
            self._teardown()
            self.closed = True
            _OPEN_MONITORS.discard(self)

    def _note_scheduler_steps(self) -> None:
        """How many times the scheduler was stepped (`last_epoch`), into meta.json at close: the
        length the schedule was planned for is set against it, not against the optimizer steps
        (a scheduler stepped per epoch is planned in epochs)."""
        sched = self.meta.get("scheduler")
        n = getattr(unwrap_scheduler(self.scheduler), "last_epoch", None)
        if isinstance(sched, dict) and isinstance(n, int) and not isinstance(n, bool):
            sched["stepped"] = n
            plan = lambda_plan(self.scheduler, n)  # a LambdaLR's length hides in its closure
            if plan is not None:
                sched.update(plan)

    def _teardown(self) -> None:
        """Remove every hook and close every file, each on its own: one that fails does not keep
        the others (the run log above all) from being closed. Safe on a half-built monitor."""
        steps: list[tuple[str, Callable[[], None]]] = [(probe_name(p), p.remove) for p in getattr(self, "probes", [])]
        pf = getattr(self, "preflight", None)
        if pf is not None:
            steps.append(("preflight", pf.probe.remove))
        unhook = getattr(self, "_unhook_stage", None)
        if unhook is not None:
            steps.append(("pipeline stage", unhook))
        triage = getattr(self, "triage", None)
        if triage is not None:
            steps.append(("triage", triage.close))
        for part, fn in steps:
            try:
                fn()
            except Exception as e:
                self.disable(part, e)
        meta = getattr(self, "meta", None)
        if meta is not None and self.notes:
            try:
                meta["monitor_notes"] = list(self.notes)
                meta["monitor_notes_data"] = messages_data(self.notes)
                self.writer.write_meta(meta)
            except Exception:
                pass
        try:
            self.writer.close()
        except Exception as e:
            self.disable("run log", e)

    def diagnose(self) -> Report:
        """The diagnosis of the run so far: the same as `lossdoctor diagnose <log_dir>`. Never
        raises: when the run log cannot be read (say the monitor was disabled before writing a
        step), the report has no findings and a note that says what failed."""
        try:
            if not self.closed:
                self._drain(wait=True)
                self.triage.probe_pending()  # what `watch` announced is tried before it is judged
        except Exception as e:
            self.disable("step", e)
        from ..detectors.engine import diagnose_runs
        from ..sources import load_path

        try:
            return diagnose_runs(load_path(self.root, select=self.version))
        except Exception as e:
            why = [Msg("monitor.parts_disabled", notes="; ".join(self.notes))] if self.notes else []
            return Report(
                findings=[],
                steps=self.step_idx,
                source=str(self.log_dir),
                inconclusive=True,
                notes=[Msg("monitor.unreadable", path=str(self.log_dir), error=f"{type(e).__name__}: {e}"), *why],
            )

    def verify_fixes(self, fixes: tuple[Any, ...] = ()) -> list[dict[str, Any]]:
        """Check the fixes of each replayed incident by replaying them from the snapshot: the
        incident's findings and the diagnosis's (`mon.diagnose()`), plus `fixes`
        (`lossdoctor.Fix`, e.g. `Fix("clip", max_norm=1.0)`). One result per incident (verdicts under "checks", the
        cost, or a "note" saying why there is no verdict), also written into its incident record."""
        try:
            self._drain(wait=True)
            report = self.diagnose()
        except Exception as e:
            self.disable("verify", e)
            return []
        out = []
        for rec in [r for r in self.triage.records if r.level.startswith("replay")]:
            own = [Finding.from_dict(d) for d in rec.findings]
            seen = {(f.cause, f.step) for f in own}
            others = [f for f in report.findings if (f.cause, f.step) not in seen]
            try:
                out.append(self.triage.verify_fixes(rec, others, tuple(fixes)))
            except Exception as e:  # never the user's problem
                self.disable("verify", e)
        return out

    @property
    def findings(self) -> list[Finding]:
        """Findings of the live engine's latest evaluation."""
        return list(self.live.report.findings) if self.live.report else []

    def __enter__(self) -> Monitor:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    # --- collection -----------------------------------------------------------------------------
    def _scale(self) -> torch.Tensor | None:
        """The loss scale in effect (the GradScaler's scale tensor), None without one."""
        return scaler_scale(self.scaler)

    def _is_sampled(self, step: int) -> bool:
        return step < 5 or step % self.layer_every == 0

    def _set_sampled(self, on: bool) -> None:
        """Before a step starts: probes that measure during it (in hooks) do more when sampled."""
        self._sampled = on
        for probe in self.probes:
            if hasattr(probe, "sampled"):
                probe.sampled = on

    def _collect(self, loss: Any, batch: Any) -> None:
        """Device side of one step: the loss, the loss scale and every probe's tensors into one
        packer, submitted for the step's one copy to the host."""
        packer = Packer()
        inputs = StepInputs(step=self.step_idx, time=time.perf_counter() - self._t0, sampled=self._sampled, batch=batch)
        host_loss = None
        if isinstance(loss, torch.Tensor):
            packer.add("loss", loss.detach().float().mean().reshape(1))
        elif loss is not None:
            host_loss = float(loss)
        scale = self._scale()
        if scale is not None:
            packer.add("scale", scale)
        flushed: list[tuple[Probe, Any]] = []
        for probe in self.probes:
            try:
                ctx = probe.flush(packer, inputs)
            except Exception as e:  # a probe that fails costs its own signals only
                self._disable_probe(probe, e)
                continue
            if ctx is not None:
                flushed.append((probe, ctx))
        for probe in self.probes:  # failures inside hooks, remembered by the probe
            error = getattr(probe, "error", None)
            if error is not None and probe_name(probe) not in self._warned:
                self.disable(probe_name(probe), error)
        self.readout.submit(packer, FlushedStep(inputs, host_loss, flushed))

    def _drain(self, wait: bool) -> None:
        for values, flushed in self.readout.ready(wait=wait):
            rec, layers = self._interpret(values, flushed)
            self.writer.append_step(rec)
            if flushed.inputs.sampled or _incident(rec):
                self._write_layers(rec["step"], layers)
            self.triage.observe(rec)  # before the live engine, so it sees the incident record
            if "live diagnosis" not in self._warned:
                try:
                    self.live.observe(rec)
                except Exception as e:  # the log keeps being written; offline diagnose still works
                    self.disable("live diagnosis", e)

    def _interpret(
        self, values: dict[str, np.ndarray], flushed: FlushedStep
    ) -> tuple[dict[str, Any], dict[str, np.ndarray]]:
        """Host side of one step: the step record (None values dropped) and its per-module rows."""
        inputs = flushed.inputs
        rec = StepRecord(step=inputs.step, time=round(inputs.time, 4))
        if "loss" in values:
            rec["loss"] = float(values["loss"][0])
        elif flushed.host_loss is not None:
            rec["loss"] = flushed.host_loss
        if "scale" in values:
            rec["scale"] = float(values["scale"][0])
        for probe, ctx in flushed.probes:
            try:
                probe.interpret(values, ctx, rec)
            except Exception as e:
                self._disable_probe(probe, e)
        self._account_skip(rec)
        return {k: v for k, v in rec.items() if v is not None}, rec.layers

    def _account_skip(self, rec: dict[str, Any]) -> None:
        """The optimizer did not step since the previous `mon.step`: a skipped step, or a misuse
        (`mon.step` called without an optimizer step), recorded as `no_optimizer_step`."""
        if rec.get("skipped") and not self._skip_explained(rec["step"], rec.get("scale")):
            rec["skipped"] = 0  # not a skipped step: mon.step was called without one
            rec["no_optimizer_step"] = 1
            self._warn_misuse(rec["step"])
        if "scale" in rec:
            self._last_scale = rec["scale"]

    def _skip_explained(self, step: int, scale: float | None) -> bool:
        """The optimizer did not step since the previous `mon.step`: was it skipped (a GradScaler
        that found inf gradients, which always backs its scale off; the skip policy), or was
        `mon.step` called without an optimizer step (twice per step, per micro-batch)?"""
        if step in self.triage.skipped_steps or step in self.engine_skips:
            return True
        if scale is None:
            return False  # no (enabled) GradScaler: nothing skips the optimizer on its own
        last = self._last_scale
        return last is None or not (scale >= last)

    def _warn_misuse(self, step: int) -> None:
        if "misuse" in self._warned:
            return
        self._warned.add("misuse")
        log.warning("%s", Msg("monitor.misuse", step=int(step)))

    def _write_layers(self, step: int, per: dict[str, np.ndarray]) -> None:
        n = len(self.tracer.names)
        mat = np.full((len(LAYER_STATS), n), np.nan, dtype=np.float32)
        for i, name in enumerate(LAYER_STATS):
            if name in per:
                mat[i] = per[name]
        self.writer.append_layers(step, mat)
        self._layer_steps.append(step)
        self._layer_rows.append(mat)

    def _layer_stats(self) -> LayerStats | None:
        """The per-layer rows written so far, for the live engine (same data as layers.f32)."""
        if not self._layer_rows:
            return None
        m = np.stack(self._layer_rows)
        return LayerStats(
            steps=np.asarray(self._layer_steps, dtype=np.int64),
            modules=self.tracer.names,
            stats={s: m[:, i, :] for i, s in enumerate(LAYER_STATS)},
            types=[type(x).__name__ for x in self.tracer.modules],
        )

    def _describe(
        self, model: nn.Module, scaler: Any, scheduler: Any, task: str | None, extra: dict[str, Any]
    ) -> dict[str, Any]:
        """The run's metadata; a model or optimizer that cannot be described (a property that
        raises...) costs the description, not the run."""
        try:
            return describe_run(model, self.optimizer, scaler, scheduler, task, extra)
        except Exception as e:
            self.disable("run description", e)
            return {"format": "lossdoctor.run/1", "task": task, **extra}

    def _record_finding(self, f: Finding) -> None:
        self.writer.append_finding(f.to_dict())
        self.triage.request_probe(f)  # an LR or plateau finding: its fixes tried from a snapshot
        self._tell_sinks("alert", f)

    def _tell_sinks(self, event: str, what: Any) -> None:
        """Each listener in `sinks` is told (`alert` / `final`) with the last recorded step; one that
        fails is noted once (`disable`), never raised into training."""
        if what is None or not self.sinks:
            return
        steps = self.live.history.steps
        step = int(steps[-1]) if len(steps) else 0
        for sink in self.sinks:
            try:
                getattr(sink, event)(what, step)
            except Exception as e:
                self.disable("sinks", e)

    def _disable_probe(self, probe: Any, e: BaseException) -> None:
        probe.enabled = False
        self.disable(probe_name(probe), e)

    def disable(self, part: str, e: BaseException) -> None:
        """Log once and switch the failing part off; training goes on untouched. Integrations call
        it for their own parts (`part` names it in the warning and in the run's notes)."""
        if part in self._warned:
            return
        self._warned.add(part)
        log.warning("lossdoctor: %s disabled after an internal error: %s: %s", part, type(e).__name__, e)
        self.notes.append(Msg("monitor.disabled", part=part, error=f"{type(e).__name__}: {e}"))
        if part == "step":
            for probe in self.probes:
                probe.enabled = False


def _never() -> bool:
    return False


def _alert_lang() -> str:
    from .diagnoser import alert_language

    return alert_language()


def _incident(rec: dict[str, Any]) -> bool:
    loss = rec.get("loss")
    return (isinstance(loss, float) and not math.isfinite(loss)) or bool(
        rec.get("fwd_first_nonfinite") or rec.get("bwd_first_nonfinite") or rec.get("grad_nonfinite")
    )


def watch(
    model: nn.Module,
    optimizer: Any = None,
    scaler: Any = None,
    scheduler: Any = None,
    log_dir: str | os.PathLike[str] | None = None,
    task: str | None = None,
    replay_fn: Callable[[nn.Module, Any], torch.Tensor] | None = None,
    **options: Any,
) -> Monitor:
    """Start watching a training run on a model and its optimizer. See `Monitor` for the options.
    (`lossdoctor.watch` also takes a DeepSpeed engine: `lossdoctor.integrations.entry.watch`.)"""
    if optimizer is None:
        raise TypeError("watch(model, optimizer): the optimizer is needed (only a DeepSpeed engine brings its own)")
    given = replay_fn is not None
    inner, stage = split_stage(model)  # a PipelineStage: its module
    replay_fn, why = refuse_replay(inner, replay_fn)  # FSDP1: a one-rank replay would hang
    if why is None:
        replay_fn, why = refuse_tp_replay(unwrap_data_parallel(inner), replay_fn)  # and tensor parallel
    if why is None:
        replay_fn, why = refuse_pp_replay(inner, stage, replay_fn)  # and a sharded pipeline stage
    mon = Monitor(
        model, optimizer, scaler=scaler, scheduler=scheduler, log_dir=log_dir, task=task, replay_fn=replay_fn, **options
    )
    if why:
        mon.replay_refused = why
        if given:
            mon.notes.append(why)
    return mon
