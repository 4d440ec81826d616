"""The snapshot ring: enough of the recent past to replay it.

Every `every` steps a `Snapshot` of the training state; for every step since the oldest snapshot,
a `StepEntry` with what replaying that step needs and the training loop does not keep:

- the batch, copied to the host (the loop reuses or frees its own);
- the torch RNG state at the start of the step's forward (so dropout draws the same masks, whatever
  the data pipeline consumed between steps);
- the hyper-parameters each parameter group had when the optimizer stepped (so an LR scheduler
  need not be replayed) and whether the optimizer stepped at all (a GradScaler or a skip policy
  may have skipped it);
- the norms of a few gradients as the optimizer saw them, which reveal the factor of gradient
  clipping done by the training loop (replay divides it back in; see `replay.py`).

Memory is bounded by `budget` bytes for snapshots and batches together. Snapshots get the room
first (two if they fit, else one, else none: triage then falls back to the live flags). Batches
fill what is left; when the next batch does not fit, the oldest kept batches are replaced by
fingerprints (a short content hash), and a batch that alone exceeds the budget is fingerprinted
at once. A step whose batch was fingerprinted cannot be replayed; the incident record says so.

On a pipeline stage (`tape`, `stage_tape.py`) the step's entry keeps the stage's own micro-batches
(its inputs and the gradients its outputs received) instead of the batch given to `mon.step`: the
schedule, not the loop, feeds the stage. Their bytes are bounded by `stage_tape.tape_limit` (on the
host, what the snapshots leave of the budget); the oldest steps' tapes are dropped first.
"""

from __future__ import annotations

import logging
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
from torch import nn

from ..messages import Msg, holds
from ..signals.gradients import foreach_norm_fp32
from ..signals.tracer import compiling
from . import batches as B
from .stage_tape import StageStep, StageTape, tape_limit
from .state import Snapshot, SnapshotTaker, StepRng, save_snapshot, state_nbytes

log = logging.getLogger("lossdoctor")

#: parameter-group settings an LR / momentum scheduler changes, recorded per optimizer step
HPARAMS = ("lr", "momentum", "betas", "weight_decay")
#: how many gradients the clipping probe looks at
N_PROBE = 4


def default_budget() -> int:
    """A quarter of physical memory, at most 8 GiB."""
    try:
        phys = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError, AttributeError):
        phys = 8 << 30
    return int(min(8 << 30, phys // 4))


@dataclass
class StepEntry:
    step: int
    batch: Any = None  # host copy, or None when only the fingerprint was kept
    devices: list[torch.device] | None = None
    fingerprint: str | None = None
    nbytes: int = 0
    rng: StepRng | None = None
    hparams: list[dict[str, Any]] | None = None
    probe: torch.Tensor | None = None  # grad norms of params `probe_idx` at the optimizer step
    probe_idx: list[int] | None = None
    stepped: bool = False
    skipped_by_policy: bool = False
    loss: float | None = None  # the logged loss, filled in when the record is read back
    event: Any = None  # CUDA event of the asynchronous copy of the batch
    stage: StageStep | None = None  # a pipeline stage's micro-batches (the ring's `tape`)

    @property
    def kept(self) -> bool:
        return self.batch is not None

    def ready(self) -> None:
        """Wait for the batch's device-to-host copy (only before reading it on the host)."""
        if self.event is not None:
            self.event.synchronize()
            self.event = None

    def device_batch(self) -> Any:
        return B.to_devices(self.batch, self.devices or [])  # stream-ordered after the copy


class SnapshotRing:
    def __init__(
        self,
        model: nn.Module,
        optimizer: torch.optim.Optimizer,
        scaler: Any,
        scheduler: Any,
        *,
        every: int,
        mode: str = "memory",
        budget: int | None = None,
        directory: Path | None = None,
    ) -> None:
        if mode not in ("memory", "disk", "off"):
            raise ValueError(f"snapshot must be 'memory', 'disk' or 'off', not {mode!r}")
        self.model = model
        self.optimizer = optimizer
        self.every = max(1, int(every))
        self.mode = mode
        self.budget = default_budget() if budget is None else int(budget)
        self.directory = directory
        self.taker = SnapshotTaker(model, optimizer, scaler, scheduler)
        self.snapshots: list[Snapshot] = []
        self.entries: dict[int, StepEntry] = {}
        self.keep = 2
        self.notes: list[str] = []  # budget decisions, said once, copied into incident records
        self.paused = False  # triage is replaying: the hooks must not record
        self.enabled = mode != "off"
        self.error: BaseException | None = None
        self._pending = StepEntry(step=-1)
        self._params = [p for g in optimizer.param_groups for p in g["params"]]
        self._device = next((p.device for p in self._params), None)
        self._batch_bytes = 0
        self._tape_bytes = 0
        #: a pipeline stage's tape (`stage_tape.py`): set by triage on a stage, None elsewhere
        self.tape: StageTape | None = None
        self._probe_idx: list[int] | None = None
        self._handles = []
        if self.enabled:
            self._handles.append(optimizer.register_step_pre_hook(self._on_optimizer_step))
            self._handles.append(model.register_forward_pre_hook(self._on_forward))

    # --- hooks (every step; cheap: a 5 KB RNG copy, a few host floats, 4 gradient norms) --------
    def _on_forward(self, module: nn.Module, args: Any) -> None:
        if compiling() or self.paused or not self.enabled or self._pending.rng is not None:
            return
        try:
            self._pending.rng = StepRng.capture(self._device)
        except Exception as e:
            self._fail(e)

    def _on_optimizer_step(self, opt: Any, args: Any, kwargs: Any) -> None:
        if self.paused or not self.enabled:
            return
        try:
            e = self._pending
            e.stepped = True
            e.hparams = [
                {k: g[k] for k in HPARAMS if k in g and not isinstance(g[k], torch.Tensor)} for g in opt.param_groups
            ]
            pick = self._probe_idx
            if pick is None or any(self._params[i].grad is None for i in pick):
                pick = self._probe_idx = self._choose_probe()
            if pick:
                e.probe = torch.stack(foreach_norm_fp32([self._params[i].grad.detach() for i in pick]))
                e.probe_idx = pick
        except Exception as ex:
            self._fail(ex)

    def _choose_probe(self) -> list[int]:
        """Up to N_PROBE parameters with dense gradients, spread over the model (chosen once: the
        per-step hook then looks at these few, not at every parameter)."""
        idx = [i for i, p in enumerate(self._params) if p.grad is not None and not p.grad.is_sparse]
        if not idx:
            return []
        return sorted({idx[int(j * (len(idx) - 1) / max(1, N_PROBE - 1))] for j in range(min(N_PROBE, len(idx)))})

    def mark_skipped(self) -> None:
        """The skip policy kept the optimizer from stepping this step."""
        self._pending.stepped = False
        self._pending.skipped_by_policy = True

    # --- per step ---------------------------------------------------------------------------
    def record(self, step: int, batch: Any) -> None:
        """Close the step: keep its batch (or its fingerprint) with what the hooks recorded."""
        e, self._pending = self._pending, StepEntry(step=-1)
        stage = self.tape.take() if self.tape is not None else None  # (taken even when not kept)
        if not self.enabled:
            return
        e.step = step
        if self.tape is not None:  # a pipeline stage: its own inputs, not the loop's batch
            self._keep_stage(e, stage)
            self.entries[step] = e
            return
        unkept = B.unkeepable(batch) if batch is not None else None
        if unkept is not None:
            self._note(unkept)  # only replay of this step is lost
        elif batch is not None:
            size = B.nbytes(batch)
            room = self.budget - self.snapshot_bytes()
            if size > room:
                e.fingerprint = B.fingerprint(batch)
                self._note(
                    Msg(
                        "triage.ring.batch_too_big",
                        mib=size / 2**20,
                        budget=self.budget / 2**20,
                        snapshots=self.snapshot_bytes() / 2**20,
                    )
                )
            else:
                self._make_room(room - size)
                e.batch = B.to_host(batch)
                e.devices = B.devices(batch)
                if any(d.type == "cuda" for d in e.devices):
                    e.event = torch.cuda.Event()
                    e.event.record()
                e.nbytes = size
                self._batch_bytes += size
        self.entries[step] = e

    def tape_limit(self) -> int:
        return tape_limit(self._device, self.budget - self.snapshot_bytes() - self._batch_bytes)

    def _keep_stage(self, e: StepEntry, stage: StageStep | None) -> None:
        """Keep the stage's micro-batches of this step, dropping the oldest steps' to make room."""
        assert self.tape is not None
        limit = self.tape_limit()
        self.tape.limit = limit
        if self.tape.over:
            self.tape.over = False
            self._note(Msg("triage.ring.stage_too_big", budget=limit / 2**20))
        if stage is None:
            return
        if stage.nbytes > limit:
            self._note(Msg("triage.ring.stage_too_big", budget=limit / 2**20))
            return
        self._drop_stages(limit - stage.nbytes)
        e.stage = stage
        self._tape_bytes += stage.nbytes

    def _drop_stages(self, limit: int) -> None:
        """Drop the oldest steps' stage records until the kept ones take at most `limit` bytes."""
        for s in sorted(self.entries):
            if self._tape_bytes <= limit:
                return
            e = self.entries[s]
            if e.stage is not None:
                self._tape_bytes -= e.stage.nbytes
                e.stage = None
                self._note(Msg("triage.ring.stage_dropped", budget=limit / 2**20))

    def _make_room(self, limit: int) -> None:
        """Fingerprint the oldest kept batches until the kept ones take at most `limit` bytes."""
        for s in sorted(self.entries):
            if self._batch_bytes <= limit:
                return
            e = self.entries[s]
            if e.batch is not None:
                e.ready()
                e.fingerprint = B.fingerprint(e.batch)
                e.batch = None
                self._batch_bytes -= e.nbytes
                self._note(Msg("triage.ring.fingerprinted", budget=self.budget / 2**20))

    def observe_loss(self, step: int, loss: Any) -> None:
        e = self.entries.get(step)
        if e is not None and isinstance(loss, (int, float)):
            e.loss = float(loss)

    def maybe_snapshot(self, next_step: int, healthy: bool = True) -> None:
        """Take the snapshot that starts step `next_step`, if it is one of the every-K steps."""
        if not self.enabled or not healthy or next_step % self.every != 0:
            return
        self.snapshot(next_step)

    def snapshot(self, base: int) -> None:
        try:
            need = state_nbytes(self.model, self.optimizer)
            if self.mode == "memory":
                self.keep = 2 if 2 * need <= self.budget else 1
                if need > self.budget:
                    self.enabled = False
                    self._note(Msg("triage.ring.state_too_big", mib=need / 2**20, budget=self.budget / 2**20))
                    self.drop()
                    return
                if self.keep == 1 and len(self.snapshots) == 2:
                    self.snapshots.pop(0)
            reuse = None
            if len(self.snapshots) >= self.keep:
                old = self.snapshots.pop(0)
                reuse = old if self.mode == "memory" else None
                if old.path:
                    _unlink(old.path)
            snap = self.taker.take(base, reuse=reuse)
            if self.mode == "disk":
                assert self.directory is not None
                self.directory.mkdir(parents=True, exist_ok=True)
                if self.directory.is_symlink():  # planted: snapshots are never written through a link
                    raise OSError(f"{self.directory} is a symlink; disk snapshots are not written through it")
                snap = save_snapshot(snap, str(self.directory / f"snapshot-{base:08d}.pt"))
            self.snapshots.append(snap)
            oldest = self.snapshots[0].step
            for s in [s for s in self.entries if s < oldest]:
                e = self.entries.pop(s)
                if e.batch is not None:
                    self._batch_bytes -= e.nbytes
                if e.stage is not None:
                    self._tape_bytes -= e.stage.nbytes
            room = self.budget - self.snapshot_bytes()
            if self._batch_bytes > room:
                self._make_room(room)
            if self.tape is not None and self._tape_bytes > self.tape_limit():
                self._drop_stages(self.tape_limit())
        except Exception as e:
            self._fail(e)

    # --- queries ------------------------------------------------------------------------------
    def snapshot_bytes(self) -> int:
        return sum(s.nbytes() for s in self.snapshots)

    def batch_bytes(self) -> int:
        return self._batch_bytes

    def tape_bytes(self) -> int:
        return self._tape_bytes

    def snapshot_for(self, step: int, before: bool = False) -> Snapshot | None:
        """The latest snapshot taken at or before `step` (strictly before with `before`)."""
        ok = [s for s in self.snapshots if (s.step < step if before else s.step <= step)]
        return ok[-1] if ok else None

    def _note(self, msg: str) -> None:
        if not holds(self.notes, msg):
            self.notes.append(msg)
            log.warning("%s", Msg("triage.log.ring_note", note=msg))

    def _fail(self, e: BaseException) -> None:
        if self.error is None:
            self.error = e
            log.warning("%s", Msg("triage.log.ring_disabled", error=f"{type(e).__name__}: {e}"))
        self.enabled = False
        if self.tape is not None:
            self.tape.enabled = False
            self.tape.reset()

    def drop(self) -> None:
        for s in self.snapshots:
            if s.path:
                _unlink(s.path)
        self.snapshots.clear()
        self.entries.clear()
        self._batch_bytes = self._tape_bytes = 0
        if self.tape is not None:
            self.tape.reset()

    def remove(self) -> None:
        for h in self._handles:
            h.remove()
        self._handles.clear()
        if self.tape is not None:
            self.tape.remove()


def _unlink(path: str) -> None:
    try:
        os.unlink(path)
    except OSError:
        pass
