"""One pipeline stage's incident, replayed on that stage alone.

Under pipeline parallel (`watch(stage, opt, replay_fn=...)` on a `torch.distributed.pipelining`
stage) the loss needs every stage, so the single-process flow (`flow.py`: replay the loss from a
snapshot) cannot run on one rank: the other ranks are not replaying with it. What one stage can
replay alone is its own part, from what its tape recorded (`stage_tape.py`: each micro-batch's
inputs, RNG, output norm and the gradient its outputs received):

1. only an incident that began in this stage's forward is replayed (its step record names a first
   non-finite forward layer). One that came in the backward is said in a note: the gradient the
   stage received was already non-finite (it began after this stage: the next stage, or the loss),
   or it was finite (this stage's own backward; one stage's replay runs its forward only);
2. rewind: the last snapshot before the step on a scratch copy of the stage's module and
   optimizer; every step up to the failing one replayed micro-batch by micro-batch (forward on the
   recorded inputs and RNG, backward from the recorded output gradients, the schedule's gradient
   scaling, the optimizer step with the recorded hyper-parameters and clipping factor); each
   micro-batch's output norm is compared with the recorded one: the replay is faithful while they
   agree. A step whose tape was not kept stops the replay; the failing step's inputs then run on
   the weights reached (an approximation, said in a note);
3. reproduce and narrow: the failing step's micro-batches forward, one by one, until one goes
   non-finite; that one under the op tracer (`localize_on`, forward only): the first op, its layer,
   and the samples of the micro-batch that break it (bisection), which are also named in the step's
   batch (micro-batches are consecutive slices of it: the schedule's default split);
4. the finding names the stage, the micro-batch, the layer, the op and the samples; a faithful
   replay whose forward stays finite is a nondeterministic fault, as in the single-process flow.

No collective runs and no other stage is involved; the user's module, optimizer and RNG are left
bit-identical (the replay runs on a scratch copy, or in place under the same guard as `flow.py`).
"""

from __future__ import annotations

import inspect
import math
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import torch
from torch import nn

from ..findings import Finding
from ..messages import Msg
from . import batches as B
from .explain import stage_finding, stage_nondeterministic_finding
from .host import TriageHost
from .localize import Localization, Preserve, localize_on
from .record import IncidentRecord
from .replay import RTOL, flat_params, losses_agree, optimizer_step
from .ring import SnapshotRing, StepEntry
from .stage_tape import MicroBatch, StageStep, output_tensors
from .state import Snapshot, Workspace

#: the triggers one stage can replay: a non-finite value (a spike or a scale collapse is judged on
#: the loss, which needs every stage)
NONFINITE = ("nonfinite_loss", "nonfinite_grad")


@dataclass
class StageStepReplay:
    step: int
    micro: int
    agree: bool | None
    #: the largest relative difference between a micro-batch's replayed and recorded output norm
    deviation: float
    clip: float | None = None

    def to_dict(self) -> dict[str, Any]:
        d: dict[str, Any] = {
            "step": self.step,
            "micro_batches": self.micro,
            "agree": self.agree,
            "deviation": self.deviation,
        }
        if self.clip is not None:
            d["clip_factor"] = self.clip
        return d


@dataclass
class StageReplay:
    """How far the stage's replay got (`steps`: the steps before the failing one)."""

    start: int
    target: int
    steps: list[StageStepReplay] = field(default_factory=list)
    reached: bool = False
    stopped_at: int | None = None

    @property
    def diverged_at(self) -> int | None:
        return next((s.step for s in self.steps if s.agree is False), None)

    @property
    def faithful(self) -> bool:
        return self.diverged_at is None

    def max_rel_dev(self) -> float:
        devs = [s.deviation for s in self.steps if math.isfinite(s.deviation)]
        return max(devs) if devs else 0.0

    def to_dict(self) -> dict[str, Any]:
        return {
            "from_step": self.start,
            "to_step": self.target,
            "steps_replayed": len(self.steps),
            "reached": self.reached,
            "stopped_at": self.stopped_at,
            "faithful": self.faithful,
            "diverged_at": self.diverged_at,
            "max_rel_deviation": self.max_rel_dev(),
            "compared": "output_norm",
            "steps": [s.to_dict() for s in self.steps],
        }


@dataclass
class MicroBatchAt:
    """Where in the failing step the replay found the fault."""

    micro: int  # the micro-batch (in the order the schedule ran the forwards)
    micro_batches: int  # how many the step had
    first: int  # its first sample in the step's batch
    size: int | None  # its samples
    local: list[int] | None = None  # the samples that break it, counted in the micro-batch
    samples: list[int] | None = None  # the same, counted in the step's batch

    def to_dict(self) -> dict[str, Any]:
        return {
            "micro_batch": self.micro,
            "micro_batches": self.micro_batches,
            "first_sample": self.first,
            "micro_batch_size": self.size,
            "micro_batch_samples": self.local,
            "step_samples": self.samples,
        }


# --- running one micro-batch -----------------------------------------------------------------------


def _arg_names(model: nn.Module, n: int, taken: set[str]) -> list[str]:
    """Names for the stage's first `n` positional inputs: the forward's parameter names (what the
    evidence calls them), `input<i>` where the signature does not say."""
    try:
        params = [
            p
            for p in inspect.signature(model.forward).parameters.values()
            if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)
        ]
    except (TypeError, ValueError):
        params = []
    names = [params[i].name if i < len(params) else f"input{i}" for i in range(n)]
    if len(set(names)) < n or taken & set(names):
        names = [f"input{i}" for i in range(n)]
    return names


def micro_batch(model: nn.Module, mb: MicroBatch) -> tuple[dict[str, Any], int]:
    """The micro-batch's inputs as one batch (positional inputs first, by name, then the keyword
    ones), fresh copies (the recorded ones are never handed to the model), and how many of them are
    positional."""
    names = _arg_names(model, len(mb.args), set(mb.kwargs))
    batch = {**dict(zip(names, mb.args)), **mb.kwargs}
    return B.map_tensors(batch, lambda t: t.clone()), len(mb.args)


def call_stage(model: nn.Module, batch: dict[str, Any], n_pos: int) -> Any:
    items = list(batch.items())
    return model(*[v for _, v in items[:n_pos]], **dict(items[n_pos:]))


def _finite(out: Any) -> bool:
    return all(bool(torch.isfinite(t).all()) for t in output_tensors(out) if t.is_floating_point())


def forward_only(n_pos: int) -> Callable[[nn.Module, Any], torch.Tensor]:
    """A "loss" for `localize_on` that runs the stage's forward only: 0 when every output is finite,
    NaN otherwise (made without an op the tracer would take for the origin)."""

    def fn(model: nn.Module, batch: Any) -> torch.Tensor:
        with torch.no_grad():
            out = call_stage(model, batch, n_pos)
        return torch.tensor(0.0 if _finite(out) else math.nan)

    return fn


def _compare(recorded: torch.Tensor | None, out: Any) -> tuple[bool | None, float]:
    """Does the replayed output's norm agree with the recorded one, and by how much do they differ."""
    floats = [t.detach() for t in output_tensors(out) if t.is_floating_point() and t.numel()]
    if recorded is None or not floats:
        return None, 0.0
    with torch.no_grad():
        now = float(torch.stack([t.float().norm() for t in floats]).norm())
    then = float(recorded)
    dev = abs(now - then) / max(abs(then), 1e-12) if math.isfinite(now) and math.isfinite(then) else 0.0
    return losses_agree(then, now, RTOL), dev


# --- the replay --------------------------------------------------------------------------------


def replay_stage(ws: Workspace, snap: Snapshot, entries: list[StepEntry | None], target: int) -> StageReplay:
    """Restore `snap` and replay the stage's steps snap.step .. target-1 from their tapes, so the
    workspace ends in the state the failing step started from (or as near as the tapes allow)."""
    res = StageReplay(start=snap.step, target=target)
    ws.load(snap)
    params = flat_params(ws.optimizer)
    for step in range(snap.step, target):
        e = entries[step - snap.step] if step - snap.step < len(entries) else None
        if e is None or e.stage is None:
            res.stopped_at = step
            return res
        res.steps.append(_replay_step(ws, e, e.stage, params))
    res.reached = True
    return res


def _replay_step(ws: Workspace, e: StepEntry, tape: StageStep, params: list[torch.Tensor]) -> StageStepReplay:
    """One step of the stage: each micro-batch forward and backward (from the gradient its outputs
    received), the schedule's scaling of the gradients, the recorded optimizer step."""
    ws.zero_grad()
    agree: list[bool | None] = []
    dev = 0.0
    for mb in tape.micro:
        batch, n_pos = micro_batch(ws.model, mb)
        if mb.rng is not None:
            mb.rng.apply()
        out = call_stage(ws.model, batch, n_pos)
        ok, d = _compare(mb.out_norm, out)
        agree.append(ok)
        dev = max(dev, d)
        pairs = [(o, g) for o, g in zip(output_tensors(out), mb.grads) if g is not None and o.requires_grad]
        if pairs:
            torch.autograd.backward([o for o, _ in pairs], [g for _, g in pairs])
    if tape.scale is not None and tape.scale != 1.0:
        with torch.no_grad():
            for p in ws.params():
                if p.grad is not None:
                    p.grad.div_(tape.scale)
    clip = optimizer_step(ws, e, params)
    ws.zero_grad()
    verdict = False if False in agree else (True if True in agree else None)
    return StageStepReplay(e.step, len(tape.micro), verdict, dev, clip)


def first_bad_micro_batch(model: nn.Module, tape: StageStep, keep: Preserve) -> int | None:
    """The first micro-batch whose forward goes non-finite on the model's state, or None."""
    for k, mb in enumerate(tape.micro):
        batch, n_pos = micro_batch(model, mb)
        if mb.rng is not None:
            mb.rng.apply()
        try:
            with torch.no_grad():
                bad = not _finite(call_stage(model, batch, n_pos))
        finally:
            keep.reset()
        if bad:
            return k
    return None


def localise_step(model: nn.Module, tape: StageStep) -> tuple[Localization, MicroBatchAt] | None:
    """The failing step's first non-finite micro-batch under the op tracer, or None when every
    micro-batch's forward stays finite. The model's gradients, buffers and RNG are put back."""
    with Preserve(model) as keep:
        k = first_bad_micro_batch(model, tape, keep)
        if k is None:
            return None
        mb = tape.micro[k]
        batch, n_pos = micro_batch(model, mb)
        loc = localize_on(model, batch, forward_only(n_pos), rng=mb.rng, live={}, preserve=keep)
    sizes = [m.size or 0 for m in tape.micro]
    at = MicroBatchAt(
        micro=k,
        micro_batches=len(tape.micro),
        first=sum(sizes[:k]),
        size=mb.size,
        local=list(loc.samples) if loc.samples else None,
    )
    if at.local is not None:
        at.samples = [at.first + i for i in at.local]
    return loc, at


# --- the flow ----------------------------------------------------------------------------------


class StageFlow:
    """The incident flow of a pipeline stage (the module docstring), run by `IncidentFlow` when the
    ring has a stage tape. `workspace()`: the scratch copy (or the in-place guard) to replay on."""

    def __init__(self, host: TriageHost, ring: SnapshotRing, workspace: Callable[[], Any]) -> None:
        self.host = host
        self.ring = ring
        self.workspace = workspace

    def run(self, step: int, trig: dict[str, Any], rec: dict[str, Any], record: IncidentRecord) -> list[Finding]:
        """The findings of the stage's replay ([] with a note saying why there is none)."""
        why = self._refusal(step, trig, rec)
        if why is not None:
            record.notes.append(why)
            return []
        snap = self.ring.snapshot_for(step)
        target = self.ring.entries.get(step)
        if snap is None:
            record.notes.append(Msg("triage.note.no_snapshot", step=step, every=self.ring.every))
            return []
        if target is None or target.stage is None:
            record.notes.append(Msg("triage.stage.not_kept", step=step))
            return []
        self.ring.paused = True
        with self.workspace() as ws:
            t = time.perf_counter()
            rep = replay_stage(ws, snap, [self.ring.entries.get(s) for s in range(snap.step, step)], step)
            record.replay = rep.to_dict()
            record.time("replay_s", time.perf_counter() - t)
            t = time.perf_counter()
            found = localise_step(ws.model, target.stage)
            record.time("localize_s", time.perf_counter() - t)
        return self._verdict(step, trig, rec, record, rep, found)

    def _verdict(
        self,
        step: int,
        trig: dict[str, Any],
        rec: dict[str, Any],
        record: IncidentRecord,
        rep: StageReplay,
        found: tuple[Localization, MicroBatchAt] | None,
    ) -> list[Finding]:
        stage = self.host.stage
        if not rep.reached:
            record.notes.append(Msg("triage.stage.approximated", step=step, at=rep.stopped_at))
        if found is None:
            record.reproducible = False if rep.reached else None
            if rep.reached and rep.faithful:
                return [stage_nondeterministic_finding(step, trig, rep, rec, stage, len(self._micro(step)))]
            if not rep.faithful:
                record.notes.append(Msg("triage.stage.diverged", step=rep.diverged_at))
            return []
        loc, at = found
        record.reproducible = True
        record.localization = {**loc.to_dict(), **at.to_dict()}
        record.level = "replay"
        return [stage_finding(step, rep, loc, at, stage)]

    def _micro(self, step: int) -> list[MicroBatch]:
        e = self.ring.entries.get(step)
        return e.stage.micro if e is not None and e.stage is not None else []

    def _refusal(self, step: int, trig: dict[str, Any], rec: dict[str, Any]) -> Msg | None:
        """Why this incident is not replayed on the stage, or None: a trigger judged on the loss,
        or a fault that came in the backward (what the recorded gradients say of where it began)."""
        stage = self.host.stage
        if trig["kind"] not in NONFINITE:
            return Msg("triage.stage.not_nonfinite", stage=stage.index, trigger=trig["kind"])
        if rec.get("fwd_first_nonfinite"):
            return None
        micro = self._micro(step)
        if not micro:
            return Msg("triage.stage.bwd_only", stage=stage.index, step=step)
        bad = next(
            (
                k
                for k, mb in enumerate(micro)
                if any(g is not None and not bool(torch.isfinite(g).all()) for g in mb.grads)
            ),
            None,
        )
        if bad is None:
            return Msg("triage.stage.bwd_own", stage=stage.index, step=step)
        if stage.last:
            return Msg("triage.stage.bwd_from_loss", stage=stage.index, step=step, micro=bad)
        return Msg("triage.stage.bwd_from_next", stage=stage.index, step=step, next=stage.index + 1, micro=bad)
