"""One pipeline stage replayed alone, in one process: the stage's tape (`triage/stage_tape.py`), its
bound in the ring, the replay from a snapshot and the localisation of the failing micro-batch
(`triage/stage_flow.py`). A stage here is a real module trained the way a pipeline schedule trains
it: one forward per micro-batch, a backward from the gradient its outputs receive (made up here for
what the next stage would send back), the gradients divided by the number of micro-batches, one
optimizer step. The torchrun tests (`test_integrations_pp.py`) run the same on a real schedule."""

from __future__ import annotations

import math
from contextlib import nullcontext
from types import SimpleNamespace

import pytest
import torch
from torch import nn

from lossdoctor.signals.pipeline import StageInfo
from lossdoctor.triage.record import IncidentRecord
from lossdoctor.triage.ring import SnapshotRing
from lossdoctor.triage.stage_flow import StageFlow, localise_step, replay_stage
from lossdoctor.triage.state import scratch_workspace
from msgs import has

MICRO, SIZE, DIM = 4, 3, 6


class Stage(nn.Module):
    """A later stage: it receives activations, and a per-sample temperature as a keyword input."""

    def __init__(self) -> None:
        super().__init__()
        self.body = nn.Sequential(nn.Linear(DIM, 16), nn.GELU(), nn.Linear(16, DIM))
        self.temper = Temper()

    def forward(self, h: torch.Tensor, temperature: torch.Tensor) -> torch.Tensor:
        return self.temper(self.body(h), temperature)


class Temper(nn.Module):
    def forward(self, x: torch.Tensor, t: torch.Tensor) -> torch.Tensor:
        return x / t


def micro_batches(step: int, bad: tuple[int, int, int] | None = None) -> list[tuple[torch.Tensor, torch.Tensor]]:
    """The step's micro-batches: (received activations, temperatures); `bad` = (step, micro-batch,
    sample) whose temperature is 0."""
    g = torch.Generator().manual_seed(step)
    out = []
    for k in range(MICRO):
        h = torch.randn(SIZE, DIM, generator=g)
        t = 1.0 + torch.rand(SIZE, 1, generator=g)
        if bad is not None and bad[:2] == (step, k):
            t[bad[2]] = 0.0
        out.append((h, t))
    return out


def train_stage(
    model: nn.Module,
    opt: torch.optim.Optimizer,
    ring: SnapshotRing,
    steps: int,
    bad: tuple[int, int, int] | None = None,
) -> None:
    """The schedule's way: per micro-batch a forward and a backward from the output gradient (the
    next stage's, made up: a fixed function of the step), then the gradients / MICRO, one step."""
    for step in range(steps):
        opt.zero_grad()
        for k, (h, t) in enumerate(micro_batches(step, bad)):
            recv = h.clone().requires_grad_()  # what a stage receives: a leaf that wants its gradient
            out = model(recv, temperature=t)
            grad = torch.full_like(out, 0.01 * (k + 1))
            torch.autograd.backward([out], [grad])
            h.add_(1.0)  # the stage reuses its receive buffer: the tape must have copied it
        ring.tape.scaled(MICRO)
        for p in model.parameters():
            p.grad.div_(MICRO)
        opt.step()
        ring.record(step, None)
        ring.maybe_snapshot(step + 1)


def stage_ring(model: nn.Module, opt: torch.optim.Optimizer, budget: int | None = None) -> SnapshotRing:
    from lossdoctor.triage.stage_tape import StageTape

    ring = SnapshotRing(model, opt, None, None, every=50, budget=budget)
    ring.tape = StageTape(model, torch.device("cpu"), paused=lambda: ring.paused)
    ring.snapshot(0)
    return ring


def workspace(model: nn.Module, opt: torch.optim.Optimizer, ring: SnapshotRing):
    ids = {h.id for part in (ring, ring.tape) for h in part._handles}
    return lambda: nullcontext(scratch_workspace(model, opt, None, ids, (ring, ring.tape)))


def test_tape_keeps_copies_of_each_micro_batch_and_the_gradient_its_output_received():
    torch.manual_seed(0)
    model = Stage()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-2)
    ring = stage_ring(model, opt)
    with torch.no_grad():  # a forward-only pass (an evaluation) is not one of the step's micro-batches
        model(*micro_batches(7)[0])
    train_stage(model, opt, ring, 1)
    tape = ring.entries[0].stage
    assert tape is not None and len(tape.micro) == MICRO and tape.scale == MICRO
    for k, ((h, t), mb) in enumerate(zip(micro_batches(0), tape.micro)):
        assert torch.equal(mb.args[0], h) and torch.equal(mb.kwargs["temperature"], t)  # before the buffer reuse
        assert not mb.args[0].requires_grad and mb.size == SIZE
        assert torch.equal(mb.grads[0], torch.full((SIZE, DIM), 0.01 * (k + 1)))
        assert mb.out_norm is not None and math.isfinite(float(mb.out_norm))
    assert ring.tape_bytes() == tape.nbytes > 0 and ring.entries[0].batch is None


def test_stage_replayed_from_the_snapshot_names_the_micro_batch_layer_and_op():
    torch.manual_seed(0)
    model = Stage()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-2)
    ring = stage_ring(model, opt)
    train_stage(model, opt, ring, 5, bad=(4, 2, 1))
    before = [p.detach().clone() for p in model.parameters()]
    with workspace(model, opt, ring)() as ws:
        rep = replay_stage(ws, ring.snapshot_for(4), [ring.entries[s] for s in range(4)], 4)
        found = localise_step(ws.model, ring.entries[4].stage)
    assert rep.reached and rep.faithful and rep.max_rel_dev() == 0.0 and len(rep.steps) == 4
    assert [s.micro for s in rep.steps] == [MICRO] * 4
    assert found is not None
    loc, at = found
    assert (loc.layer, loc.op) == ("temper", "aten.div")
    assert (at.micro, at.first, at.local, at.samples) == (2, 2 * SIZE, [1], [2 * SIZE + 1])
    # the user's stage untouched, bit for bit (NaN since the failing step's update)
    assert all(
        torch.equal(p.view(torch.int32), q.detach().view(torch.int32)) for p, q in zip(before, model.parameters())
    )


def stage_flow(ring: SnapshotRing, model: nn.Module, opt: torch.optim.Optimizer, index: int = 1, n: int = 2):
    info = StageInfo(index=index, n_stages=n, group=None, group_size=n, group_rank=index)
    return StageFlow(SimpleNamespace(stage=info), ring, workspace(model, opt, ring))


def record(step: int) -> IncidentRecord:
    return IncidentRecord(step=step, trigger="nonfinite_loss", rank=1, policy="report", live={})


def test_a_step_whose_tape_was_dropped_makes_the_replay_an_approximation():
    torch.manual_seed(0)
    model = Stage()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-2)
    ring = stage_ring(model, opt)
    train_stage(model, opt, ring, 5, bad=(4, 2, 1))
    ring.entries[2].stage = None  # as the bound does to the oldest steps
    rec = record(4)
    [f] = stage_flow(ring, model, opt).run(
        4, {"kind": "nonfinite_loss"}, {"fwd_first_nonfinite": {"layer": "temper"}}, rec
    )
    assert rec.replay["stopped_at"] == 2 and not rec.replay["reached"]
    assert has(rec.notes, "triage.stage.approximated", step=4, at=2)
    assert (f.layer, f.op, f.samples) == ("temper", "aten.div", [2 * SIZE + 1])
    assert has(f.evidence, "triage.stage.replayed_approx", stage=1, step=4, at=2)
    assert has(f.evidence, "triage.stage.micro_batch", micro=2, n=MICRO, first=2 * SIZE, last=3 * SIZE - 1)
    assert has(f.evidence, "triage.stage.isolated") and not has(f.evidence, "triage.samples.isolated")


@pytest.mark.parametrize(
    "index, spoil, key",
    [
        (0, True, "triage.stage.bwd_from_next"),
        (1, True, "triage.stage.bwd_from_loss"),
        (0, False, "triage.stage.bwd_own"),
    ],
)
def test_a_fault_that_came_in_the_backward_is_not_replayed_and_says_where(index, spoil, key):
    torch.manual_seed(0)
    model = Stage()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-2)
    ring = stage_ring(model, opt)
    train_stage(model, opt, ring, 3)
    if spoil:
        ring.entries[2].stage.micro[1].grads[0][0, 0] = float("nan")
    rec = record(2)
    out = stage_flow(ring, model, opt, index=index).run(2, {"kind": "nonfinite_grad"}, {}, rec)
    assert out == [] and rec.replay is None
    assert has(rec.notes, key, stage=index, step=2, **({"micro": 1} if spoil else {}))


def test_a_spike_is_judged_on_the_loss_and_not_replayed_on_one_stage():
    torch.manual_seed(0)
    model = Stage()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-2)
    ring = stage_ring(model, opt)
    train_stage(model, opt, ring, 2)
    rec = record(1)
    assert stage_flow(ring, model, opt).run(1, {"kind": "loss_spike"}, {}, rec) == []
    assert has(rec.notes, "triage.stage.not_nonfinite", stage=1, trigger="loss_spike")


def test_the_tape_stays_within_the_budget_and_says_so():
    def run(budget: int | None, steps: int) -> SnapshotRing:
        torch.manual_seed(0)
        model = Stage()
        opt = torch.optim.AdamW(model.parameters(), lr=1e-2)
        ring = stage_ring(model, opt, budget=budget)
        train_stage(model, opt, ring, steps)
        return ring

    free = run(None, 1)
    one_step, snapshots = free.entries[0].stage.nbytes, free.snapshot_bytes()
    ring = run(snapshots + int(2.5 * one_step), 6)  # room for the snapshot and two and a half steps
    kept = [s for s, e in sorted(ring.entries.items()) if e.stage is not None]
    assert kept == [4, 5] and ring.tape_bytes() == 2 * one_step <= ring.tape_limit()
    assert has(ring.notes, "triage.ring.stage_dropped")
    tight = run(snapshots + one_step // 2, 2)  # not even one step fits: none is kept, said once
    assert all(e.stage is None for e in tight.entries.values()) and tight.tape_bytes() == 0
    assert has(tight.notes, "triage.ring.stage_too_big")


SHARDED_STAGE = """
import json, os, sys, torch, torch.distributed as dist
from torch import nn
from torch.distributed.device_mesh import init_device_mesh
from torch.distributed.tensor.parallel import ColwiseParallel, parallelize_module
from lossdoctor.signals.pipeline import StageInfo, refuse_pp_replay

dist.init_process_group("gloo")
fn = lambda m, b: m(b).sum()
stage = StageInfo(index=1, n_stages=2, group=None, group_size=1, group_rank=0)
plain = nn.Sequential(nn.Linear(4, 4))
sharded = parallelize_module(nn.Sequential(nn.Linear(4, 4)), init_device_mesh("cpu", (1,)), {"0": ColwiseParallel()})
out = {}
for name, model in (("plain", plain), ("sharded", sharded)):
    kept, why = refuse_pp_replay(model, stage, fn)
    out[name] = [kept is fn, getattr(why, "key", None)]
print(json.dumps(out))
dist.destroy_process_group()
"""


@pytest.mark.slow
def test_a_stage_sharded_by_tensor_parallel_keeps_the_refusal():
    """A stage whose parameters are DTensors (PP x TP) is not replayed on one rank; a plain stage is."""
    import json
    import subprocess
    import sys

    from conftest import cli_env
    from dist_workers import free_port

    env = {
        **cli_env(),
        "RANK": "0",
        "WORLD_SIZE": "1",
        "LOCAL_RANK": "0",
        "MASTER_ADDR": "127.0.0.1",
        "MASTER_PORT": str(free_port()),
    }
    p = subprocess.run([sys.executable, "-c", SHARDED_STAGE], capture_output=True, text=True, timeout=120, env=env)
    assert p.returncode == 0, p.stderr[-2000:]
    out = json.loads(p.stdout.strip().splitlines()[-1])
    assert out == {"plain": [True, None], "sharded": [False, "distributed.replay_skipped_pp_sharded"]}
