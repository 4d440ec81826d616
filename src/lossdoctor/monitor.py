"""`lossdoctor.watch`: the live monitor.

Signals (on the device) -> one packed copy per step -> a step record -> the run log and the live
engine. The training loop calls `mon.step(loss, batch=batch)` once per optimizer iteration, after
the optimizer step; everything else happens in hooks the monitor installs and removes.

Rules it keeps: no `.item()` or host sync per module or parameter; the user's model, optimizer,
RNG and gradients are never modified; an internal error disables the part that failed, is logged
once, and never reaches the training loop.
"""

from __future__ import annotations

import logging
import math
import os
import time
from datetime import datetime
from pathlib import Path
from typing import Any, Callable

import numpy as np
import torch
from torch import nn

from .findings import Finding, Report
from .live import LiveDiagnoser
from .preflight.watch import start_preflight
from .records import LayerStats
from .runlog import RunLogWriter
from .signals import batch as batch_signals
from .signals import tracer as tracer_signals
from .signals.batch import BatchProbe
from .signals.describe import describe_run
from .signals.gradients import GradProbe
from .signals.optimizer import OptimizerProbe, scaler_scale, unwrap_optimizer
from .signals.readout import Packer, Readout
from .signals.sharding import local_list
from .signals.tracer import ModuleTracer, parent_index

log = logging.getLogger("lossdoctor")

#: per-module statistics written to layers.f32 at sampled steps, in this order
LAYER_STATS = ("act_absmax", "act_rms", "grad_absmax", "param_grad_norm", "param_norm")


def default_log_dir(world_size: int = 1) -> Path:
    """A new directory per run; with several ranks the same one on every rank (derived from the
    launcher's environment, so the ranks agree without a collective)."""
    from .integrations.launch import shared_run_name

    name = shared_run_name() if world_size > 1 else None
    return Path("lossdoctor_runs") / (name or datetime.now().strftime("%Y%m%d-%H%M%S-%f"))


def _dist_rank() -> tuple[int | None, int]:
    try:
        import torch.distributed as dist

        if dist.is_available() and dist.is_initialized():
            return dist.get_rank(), dist.get_world_size()
    except Exception:
        pass
    return None, 1


class Monitor:
    """Watches one model + optimizer. Create it with `lossdoctor.watch(...)`.

    Incident triage options (see `lossdoctor.triage`):
      on_incident     "report" (default: record and alert, training untouched), "raise" (mon.step raises
                      `lossdoctor.TrainingIncident` after the incident is recorded) or "skip" (optimizer steps
                      with non-finite gradients are skipped; a damaged state is rolled back, bad batch skipped)
      snapshot_every  K: a snapshot of model/optimizer/scaler/scheduler/RNG every K steps (with replay_fn)
      snapshot        "memory" (default), "disk" (under the run directory) or "off"
      snapshot_budget bytes of host memory for snapshots and recorded batches (default: 1/4 of RAM, at most
                      8 GiB); beyond it batches are kept as fingerprints only
      triage_inplace  replay on the user's model (restored bit for bit afterwards) instead of a scratch copy
      max_incidents   incidents triaged per run (the first step of each non-finite episode)
    """

    def __init__(self, model: nn.Module, optimizer: Any, scaler: Any = None, scheduler: Any = None,
                 log_dir: str | os.PathLike[str] | None = None, task: str | None = None,
                 replay_fn: Callable[[nn.Module, Any], torch.Tensor] | None = None, *,
                 layer_every: int = 10, check_inputs: bool = True, alerts: bool = True,
                 update_budget: int = 1 << 20, on_incident: str = "report", snapshot_every: int = 50,
                 snapshot: str = "memory", snapshot_budget: int | None = None, triage_inplace: bool = False,
                 max_incidents: int = 3) -> None:
        from .triage.incident import check_options

        check_options(on_incident, snapshot, snapshot_every)
        self.model = model
        self.optimizer = unwrap_optimizer(optimizer)
        self.scaler = scaler
        self.scheduler = scheduler
        self.task = task
        self.replay_fn = replay_fn
        self.layer_every = max(1, int(layer_every))
        self.rank, self.world_size = _dist_rank()
        root = Path(log_dir) if log_dir is not None else default_log_dir(self.world_size)
        self.log_dir = root
        self.run_dir = root / f"rank-{self.rank}" if self.world_size > 1 else root
        self.step_idx = 0
        self.closed = False
        #: extra probes added by integrations (`add_probe`), run after the built-in ones
        self.probes: list[Any] = []
        self._t0 = time.perf_counter()
        self._warned: set[str] = set()
        self._last_scale: float | None = None  # the loss scale of the previous step record
        #: set by an integration whose engine runs micro-steps (DeepSpeed): `(loss, batch)` -> None
        #: for a call that is not an optimizer step, else the step's loss and batch
        self.step_filter: Callable[[Any, Any], tuple[Any, Any] | None] | None = None
        #: steps a training engine reported skipped by its own overflow check (DeepSpeed)
        self.engine_skips: set[int] = set()
        #: why replay cannot run on this model (DeepSpeed ZeRO 1-3, FSDP1), said in incident records
        self.replay_refused: str | None = None

        #: what the monitor could not do (internal errors): written to meta.json, read back as notes
        self.notes: list[str] = []
        self.writer = RunLogWriter(self.run_dir)
        try:
            self._install(model, optimizer, scaler, scheduler, task, replay_fn, check_inputs=check_inputs,
                          update_budget=update_budget, alerts=alerts, on_incident=on_incident,
                          snapshot_every=snapshot_every, snapshot=snapshot, snapshot_budget=snapshot_budget,
                          triage_inplace=triage_inplace, max_incidents=max_incidents)
        except BaseException:
            # a watch() that raises must leave nothing behind: no hook on the model or the
            # optimizer, no tracer collecting every step with nobody to flush it
            self._teardown()
            self.closed = True
            raise

    def _install(self, model: nn.Module, optimizer: Any, scaler: Any, scheduler: Any, task: str | None,
                 replay_fn: Any, *, check_inputs: bool, update_budget: int, alerts: bool, on_incident: str,
                 snapshot_every: int, snapshot: str, snapshot_budget: int | None, triage_inplace: bool,
                 max_incidents: int) -> None:
        """Everything `watch` installs, in order; `_teardown` removes whatever of it exists."""
        from .integrations.distributed import attach_distributed, unwrap_data_parallel

        wrapper, model = model, unwrap_data_parallel(model)  # names as the user's model has them
        self.model = model  # replay runs the bare model: a DDP forward without backward would stall DDP
        self.tracer = ModuleTracer(model, check_inputs=check_inputs)
        self.parents = parent_index(self.tracer.names)
        self.grads = GradProbe(model, self.tracer.names, lambda: scaler_scale(self.scaler))
        self._owners = np.asarray(self.grads.owner, dtype=np.int64)  # module of each parameter, for the host side
        from .integrations.accelerate import sync_gradients_flag

        self.grads.should_capture = sync_gradients_flag(optimizer)  # skip non-final micro-batches
        self.opt_probe = OptimizerProbe(self.optimizer, budget=update_budget)
        self.batch_probe = BatchProbe()
        self.readout = Readout()
        self.meta = self._describe(model, scaler, scheduler, task,
                                   {"rank": self.rank, "world_size": self.world_size,
                                    "layer_every": self.layer_every, "started": time.time(),
                                    "replay": replay_fn is not None})
        self.writer.write_meta(self.meta)
        self.writer.start_layers(self.tracer.names, list(LAYER_STATS),
                                 [type(m).__name__ for m in self.tracer.modules])
        self._layer_steps: list[int] = []
        self._layer_rows: list[np.ndarray] = []
        self.live = LiveDiagnoser(self.meta, rank=self.rank, alerts=alerts,
                                  on_finding=self._record_finding, layers_fn=self._layer_stats)
        self._set_sampled(self._is_sampled(0))
        if self.world_size > 1:
            attach_distributed(self, wrapper)
        self.preflight = start_preflight(self)  # config now, first forward and batches later; never raises
        # incident triage (snapshot ring, replay, op-level localisation, on_incident policy)
        from .triage.incident import Triage

        self.triage = Triage(self, replay_fn, on_incident=on_incident, snapshot_every=snapshot_every,
                             snapshot=snapshot, snapshot_budget=snapshot_budget, inplace=triage_inplace,
                             max_incidents=max_incidents)

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
            self._disable("step", e)
        self.step_idx += 1
        self._set_sampled(self._is_sampled(self.step_idx))
        incident = self.triage.take_pending()  # on_incident="raise"
        if incident is not None:
            raise incident

    def add_probe(self, probe: Any) -> None:
        """Add a probe run at every step after the built-in ones. A probe has `enabled`,
        `flush(packer) -> ctx` (hand device tensors to the packer), `interpret(values, ctx, rec)`
        (host side: add fields to the step record) and `remove()`. Integrations use it for signals
        only they can see (micro-batch losses, the data-parallel reduction)."""
        self.probes.append(probe)

    def close(self) -> None:
        if self.closed:
            return
        try:
            if self.preflight is not None:
                self.preflight.close()
            self._drain(wait=True)
            if "live diagnosis" not in self._warned:
                self.live.evaluate()
            self.meta.update({"closed": True, "steps": self.step_idx, "finished": time.time()})
            self.writer.write_meta(self.meta)
        except Exception as e:
            self._disable("close", e)
        finally:
            self._teardown()
            self.closed = True

    def _teardown(self) -> None:
        """Remove every hook and close every file, each on its own: one that fails does not keep
        the others (the run log above all) from being closed. Safe on a half-built monitor."""
        parts = [getattr(self, name, None) for name in ("tracer", "grads", "opt_probe")]
        steps: list[tuple[str, Callable[[], None]]] = [
            (type(p).__name__, p.remove) for p in parts if p is not None]
        steps += [(type(p).__name__, p.remove) for p in getattr(self, "probes", [])]
        pf = getattr(self, "preflight", None)
        if pf is not None:
            steps.append(("preflight", pf.probe.remove))
        triage = getattr(self, "triage", None)
        if triage is not None:
            steps.append(("triage", triage.close))
        for part, fn in steps:
            try:
                fn()
            except Exception as e:
                self._disable(part, e)
        meta = getattr(self, "meta", None)
        if meta is not None and self.notes:
            try:
                meta["monitor_notes"] = list(self.notes)
                self.writer.write_meta(meta)
            except Exception:
                pass
        try:
            self.writer.close()
        except Exception as e:
            self._disable("run log", e)

    def diagnose(self) -> Report:
        """The diagnosis of the run so far: the same as `lossdoctor diagnose <log_dir>`. Never
        raises: when the run log cannot be read (say the monitor was disabled before writing a
        step), the report has no findings and a note that says what failed."""
        try:
            if not self.closed:
                self._drain(wait=True)
        except Exception as e:
            self._disable("step", e)
        from .sources import load_path
        from .detectors.engine import diagnose_runs

        try:
            return diagnose_runs(load_path(self.log_dir))
        except Exception as e:
            why = [f"the monitor's own parts were disabled: {'; '.join(self.notes)}"] if self.notes else []
            return Report(findings=[], steps=self.step_idx, source=str(self.log_dir), inconclusive=True,
                          notes=[f"no diagnosis: the run log in {self.log_dir} could not be read "
                                 f"({type(e).__name__}: {e})", *why])

    @property
    def findings(self) -> list[Finding]:
        """Findings of the live engine's latest evaluation."""
        return list(self.live.report.findings) if self.live.report else []

    def __enter__(self) -> Monitor:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    # --- collection -----------------------------------------------------------------------------
    def _is_sampled(self, step: int) -> bool:
        return step < 5 or step % self.layer_every == 0

    def _set_sampled(self, on: bool) -> None:
        self._sampled = on
        self.tracer.sampled = on
        self.opt_probe.sampled = on

    def _collect(self, loss: Any, batch: Any) -> None:
        packer = Packer()
        ctx: dict[str, Any] = {"step": self.step_idx, "time": time.perf_counter() - self._t0,
                               "sampled": self._sampled}
        if isinstance(loss, torch.Tensor):
            packer.add("loss", loss.detach().float().mean().reshape(1))
        elif loss is not None:
            ctx["loss"] = float(loss)
        scale = scaler_scale(self.scaler)
        if scale is not None:
            packer.add("scale", scale)
        ctx["tracer"] = self.tracer.flush(packer)
        ctx["grads"] = self.grads.flush(packer)
        ctx["opt"] = self.opt_probe.flush(packer)
        ctx["batch"] = {}
        if self.batch_probe.enabled:
            try:
                ctx["batch"] = self.batch_probe.flush(batch, packer)
            except Exception as e:  # a batch the checks cannot read costs the batch checks only
                self.batch_probe.enabled = False
                self._disable("batch checks", e)
        if self._sampled:
            params = local_list(self.grads.params)
            if params:
                with torch.no_grad():
                    packer.add("param_norm_pp", list(torch._foreach_norm(params, 2, dtype=torch.float32)))
        ctx["probes"] = []
        for probe in self.probes:
            if probe.enabled:
                try:
                    ctx["probes"].append((probe, probe.flush(packer)))
                except Exception as e:
                    self._disable_probe(probe, e)
        for part in (self.tracer, self.grads, self.opt_probe):
            if getattr(part, "error", None) is not None and type(part).__name__ not in self._warned:
                self._disable(type(part).__name__, part.error)
        self.readout.submit(packer, ctx)

    def _drain(self, wait: bool) -> None:
        for values, ctx in self.readout.ready(wait=wait):
            rec, per_module = self._interpret(values, ctx)
            self.writer.append_step(rec)
            if ctx["sampled"] or _incident(rec):
                self._write_layers(rec["step"], per_module)
            self.triage.observe(rec)  # before the live engine, so it sees the incident record
            if "live diagnosis" not in self._warned:
                try:
                    self.live.observe(rec)
                except Exception as e:  # the log keeps being written; offline diagnose still works
                    self._disable("live diagnosis", e)

    def _interpret(self, values: dict[str, np.ndarray], ctx: dict[str, Any]) -> tuple[dict, dict]:
        rec: dict[str, Any] = {"step": ctx["step"], "time": round(ctx["time"], 4)}
        if "loss" in values:
            rec["loss"] = float(values["loss"][0])
        elif "loss" in ctx:
            rec["loss"] = ctx["loss"]
        if "scale" in values:
            rec["scale"] = float(values["scale"][0])
        opt = ctx["opt"]
        rec["skipped"] = 0 if opt["stepped"] else 1
        if not opt["stepped"] and not self._skip_explained(ctx["step"], rec.get("scale")):
            rec["skipped"] = 0  # not a skipped step: mon.step was called without one
            rec["no_optimizer_step"] = 1
            self._warn_misuse(ctx["step"])
        if "scale" in rec:
            self._last_scale = rec["scale"]
        lrs = [x for x in opt["lrs"]]
        rec["lr"] = lrs[0] if lrs else None
        rec["wd"] = opt["wds"][0] if opt["wds"] else None
        if len(set(lrs)) > 1:
            rec["lr_groups"] = lrs
        if "delta_sq" in values and "param_sq" in values:
            d, p = float(values["delta_sq"][0]), float(values["param_sq"][0])
            rec["update_ratio"] = math.sqrt(d / p) if p > 0 and math.isfinite(d) else None
        if "lowp_frozen" in values and "lowp_moving" in values:
            moving = float(values["lowp_moving"][0])
            rec["frozen_frac"] = float(values["lowp_frozen"][0]) / moving if moving > 0 else None
        if "eps_above_n" in values and opt.get("eps_total"):
            rec["eps_dominated"] = 1.0 - float(values["eps_above_n"][0]) / opt["eps_total"]

        per: dict[str, np.ndarray] = {}
        g = ctx["grads"]
        if g.get("grad_idx") is not None and "param_grad_norm" in values:
            norms = values["param_grad_norm"].astype(np.float64)
            if "grad_scale" in values:
                norms = norms / float(values["grad_scale"][0])
            idx = np.asarray(g["grad_idx"])
            with np.errstate(over="ignore", invalid="ignore"):
                rec["grad_norm"] = float(np.sqrt(np.sum(norms * norms)))
            bad = ~np.isfinite(norms)
            rec["grad_nonfinite"] = int(bad.sum())
            if bad.any():
                rec["nonfinite_params"] = [self.grads.names[i] for i in idx[bad][:8]]
            per["param_grad_norm"] = _per_module_norm(len(self.tracer.names), self._owners[idx], norms)
        if "param_norm_pp" in values:
            pn = values["param_norm_pp"].astype(np.float64)
            rec["param_norm"] = float(np.sqrt(np.sum(pn * pn)))
            per["param_norm"] = _per_module_norm(len(self.tracer.names), self._owners, pn)

        trec, tper = tracer_signals.interpret(self.tracer.names, self.parents, values, ctx["tracer"],
                                              self.tracer.passthrough)
        rec.update(trec)
        per.update(tper)
        rec.update(batch_signals.interpret(values, ctx["batch"]))
        if g.get("backwards"):
            rec["accum_steps"] = g["backwards"]
        for probe, pctx in ctx.get("probes", ()):
            try:
                probe.interpret(values, pctx, rec)
            except Exception as e:
                self._disable_probe(probe, e)
        return {k: v for k, v in rec.items() if v is not None}, per

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
        log.warning("lossdoctor: mon.step was called at step %d without an optimizer step since the previous "
                    "call; call it once per optimizer step, after optimizer.step() (with gradient "
                    "accumulation: after the last micro-batch). Such calls are recorded as "
                    "no_optimizer_step, not as skipped steps", step)

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
        return LayerStats(steps=np.asarray(self._layer_steps, dtype=np.int64), modules=self.tracer.names,
                          stats={s: m[:, i, :] for i, s in enumerate(LAYER_STATS)},
                          types=[type(x).__name__ for x in self.tracer.modules])

    def _describe(self, model: nn.Module, scaler: Any, scheduler: Any, task: str | None,
                  extra: dict[str, Any]) -> dict[str, Any]:
        """The run's metadata; a model or optimizer that cannot be described (a property that
        raises...) costs the description, not the run."""
        try:
            return describe_run(model, self.optimizer, scaler, scheduler, task, extra)
        except Exception as e:
            self._disable("run description", e)
            return {"format": "lossdoctor.run/1", "task": task, **extra}

    def _record_finding(self, f: Finding) -> None:
        self.writer.append_finding(f.to_dict())

    def _disable_probe(self, probe: Any, e: BaseException) -> None:
        probe.enabled = False
        self._disable(type(probe).__name__, e)

    def _disable(self, part: str, e: BaseException) -> None:
        """Log once and switch the failing part off; training goes on untouched."""
        if part in self._warned:
            return
        self._warned.add(part)
        log.warning("lossdoctor: %s disabled after an internal error: %s: %s", part, type(e).__name__, e)
        self.notes.append(f"{part} disabled after an internal error ({type(e).__name__}: {e}); "
                          "training went on unchanged")
        if part == "step":
            self.tracer.enabled = False
            self.grads.enabled = False
            self.opt_probe.enabled = False
            self.batch_probe.enabled = False
            for probe in self.probes:
                probe.enabled = False


def _per_module_norm(n_modules: int, owners: np.ndarray, norms: np.ndarray) -> np.ndarray:
    """L2 norm per owning module of per-parameter norms, in the per-layer convention (the
    tracer's): inf marks a non-finite value, NaN a module without parameters (not measured)."""
    sq = np.zeros(n_modules)
    with np.errstate(over="ignore", invalid="ignore"):
        np.add.at(sq, owners, norms * norms)
        out = np.sqrt(sq)
    has = np.zeros(n_modules, dtype=bool)
    has[owners] = True
    return np.where(has, np.where(np.isfinite(out), out, np.inf), np.nan)


def _incident(rec: dict[str, Any]) -> bool:
    loss = rec.get("loss")
    return (isinstance(loss, float) and not math.isfinite(loss)) or bool(
        rec.get("fwd_first_nonfinite") or rec.get("bwd_first_nonfinite") or rec.get("grad_nonfinite"))


def watch(model: nn.Module, optimizer: Any = None, scaler: Any = None, scheduler: Any = None,
          log_dir: str | os.PathLike[str] | None = None, task: str | None = None,
          replay_fn: Callable[[nn.Module, Any], torch.Tensor] | None = None, **options: Any) -> Monitor:
    """Start watching a training run. See `Monitor` for the options. `model` may be a DeepSpeed
    engine (`watch(engine)`): see `lossdoctor.integrations.deepspeed`."""
    from .integrations.deepspeed import is_deepspeed_engine, watch_engine

    if is_deepspeed_engine(model):
        return watch_engine(model, optimizer, scaler=scaler, scheduler=scheduler, log_dir=log_dir, task=task,
                            replay_fn=replay_fn, **options)
    if optimizer is None:
        raise TypeError("watch(model, optimizer): the optimizer is needed (only a DeepSpeed engine brings its own)")
    from .integrations.fsdp1 import refuse_replay

    given = replay_fn is not None
    replay_fn, why = refuse_replay(model, replay_fn)
    mon = Monitor(model, optimizer, scaler=scaler, scheduler=scheduler, log_dir=log_dir, task=task,
                  replay_fn=replay_fn, **options)
    if why:
        mon.replay_refused = why
        if given:
            mon.notes.append(why)
    return mon
