"""The tracer writes its statistics into slots made once, not into new tensors every step, and
the slots grow (without mixing up steps or modules) when a model has more events than they hold."""

from __future__ import annotations

import json

import torch
from torch import nn

import lossdoctor


class Blow(nn.Module):
    """Finite until `armed`, then 0/0."""

    armed = False

    def forward(self, x):
        return (x - x) / (x - x) if self.armed else x * 1.0


def _deep(n: int) -> nn.Sequential:
    torch.manual_seed(0)
    layers: list[nn.Module] = []
    for _ in range(n):
        layers += [nn.Linear(8, 8), nn.LayerNorm(8)]
    layers.insert(2 * n - 3, Blow())  # a few modules before the end
    return nn.Sequential(*layers)


def test_statistics_reuse_the_same_slots_every_step(tmp_path):
    model = _deep(4)
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    seen = []
    with lossdoctor.watch(model, opt, log_dir=tmp_path, alerts=False) as mon:
        for _ in range(8):
            opt.zero_grad()
            loss = model(torch.randn(4, 8)).square().mean()
            loss.backward()
            opt.step()
            seen.append(([id(t) for t in mon.tracer.ev_min], [id(t) for t in mon.tracer.bw_max]))
            mon.step(loss)
    assert seen[6] == seen[7] and len(seen[7][0]) > 8  # same slot objects, step after step


def test_slots_grow_past_their_first_capacity(tmp_path):
    """150 Linear+LayerNorm pairs: ~300 forward and ~300 backward events a step, more than the
    256 slots made at first. The first NaN is still found in the right module, at the right step."""
    model = _deep(150)
    blow = next(m for m in model if isinstance(m, Blow))
    name = next(n for n, m in model.named_children() if m is blow)
    opt = torch.optim.SGD(model.parameters(), lr=0.0)
    with lossdoctor.watch(model, opt, log_dir=tmp_path, alerts=False) as mon:
        for i in range(7):
            blow.armed = i == 6
            opt.zero_grad()
            loss = model(torch.randn(4, 8)).square().mean()
            loss.backward()
            opt.step()
            n_events = len(mon.tracer.ev_min)
            mon.step(loss)
    assert n_events > 256
    steps = [json.loads(x) for x in (tmp_path / "steps.jsonl").read_text().splitlines()]
    assert all("fwd_first_nonfinite" not in r for r in steps[:6])
    assert steps[6]["fwd_first_nonfinite"]["layer"] == name
    assert steps[5]["act_absmax"] > 0
