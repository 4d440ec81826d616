"""A loss spike at a warm restart is what the restart does: SGDR (CosineAnnealingWarmRestarts)
brings the LR from ~0 back to its peak in one step and the loss jumps with it. The live trigger
leaves that jump alone when the run's scheduler restarts on purpose, and still opens an incident
for a spike elsewhere in the same run (a corrupted batch)."""

from __future__ import annotations

import json

import pytest
import torch
from torch import nn
from torch.nn import functional as F

import lossdoctor

STEPS, T0 = 256, 60


def _run(tmp_path, bad_step: int | None):
    torch.manual_seed(0)
    g = torch.Generator().manual_seed(0)
    x = torch.randn(4096, 8, generator=g)
    y = x[:, 0] * 2 + torch.sin(x[:, 1] * 2) + x[:, 2] * x[:, 3] - 0.5 * x[:, 4] ** 2
    y = y + 0.1 * torch.randn(4096, generator=g)
    loader = torch.utils.data.DataLoader(torch.utils.data.TensorDataset(x, y), batch_size=64, shuffle=True)
    model = nn.Sequential(nn.Linear(8, 64), nn.Tanh(), nn.Linear(64, 64), nn.Tanh(), nn.Linear(64, 1))
    opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    sched = torch.optim.lr_scheduler.CosineAnnealingWarmRestarts(opt, T_0=T0)
    mon = lossdoctor.watch(model, opt, scheduler=sched, log_dir=tmp_path, alerts=False)
    batches = [b for _ in range(STEPS // len(loader)) for b in loader]
    for step, (xb, yb) in enumerate(batches):
        if step == bad_step:
            yb = yb * 30  # a batch whose targets were not scaled like the rest
        opt.zero_grad()
        loss = F.mse_loss(model(xb).squeeze(1), yb)
        loss.backward()
        opt.step()
        sched.step()
        mon.step(loss, batch=(xb, yb))
    mon.close()
    rows = [json.loads(line) for line in (tmp_path / "steps.jsonl").read_text().splitlines()]
    return mon.diagnose(), rows


def _jump_after_restart(rows: list[dict]) -> float:
    """The largest loss right after a restart over the median of the ten steps before it."""
    losses = [r["loss"] for r in rows]
    jumps = []
    for s in range(T0, STEPS - 2, T0):
        before = sorted(losses[s - 10 : s])[5]
        jumps.append(max(losses[s + 1 : s + 3]) / before)
    return max(jumps)


@pytest.mark.parametrize("bad_step", [None, 215])
def test_a_spike_at_a_warm_restart_is_no_incident_and_one_elsewhere_is(tmp_path, bad_step):
    rep, rows = _run(tmp_path, bad_step)
    assert _jump_after_restart(rows) >= 5  # the restart did spike the loss: the rule was put to the test
    spikes = [f for f in rep.findings if f.cause == "loss_spike"]
    if bad_step is None:
        assert not spikes and rep.status == "healthy", [(f.cause, f.step, f.evidence) for f in rep.findings]
        assert not (tmp_path / "incidents").exists() or not list((tmp_path / "incidents").iterdir())
        return
    assert spikes and spikes[0].step == bad_step
    assert [p.name for p in (tmp_path / "incidents").iterdir()] == [f"step-{bad_step:08d}.json"]  # the live incident
