"""The tracer writes its statistics into slots made once, not into new tensors every step, and
the slots grow (without mixing up steps or modules) when a model has more events than they hold."""

from __future__ import annotations

import json

import pytest
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


def _packed(tracer, names):
    """What `flush` hands the packer, as host arrays, and the per-event views stacked beforehand."""
    from lossdoctor.signals.readout import Packer, _assemble

    expected = {"fwd_min": tracer.ev_min, "fwd_max": tracer.ev_max, "bwd_min": tracer.bw_min, "bwd_max": tracer.bw_max}
    expected = {k: torch.stack([t.float() for t in v]).numpy().copy() for k, v in expected.items()}
    packer = Packer()
    tracer.flush(packer)
    arrays = {dev: t.numpy() for dev, t in packer.pack().items()}
    return {k: _assemble(arrays, packer.layout[k]) for k in names}, expected


def test_the_step_statistics_leave_the_slots_in_one_gather_equal_to_the_per_event_values():
    """An aliased container (the root returns its last child's tensor) and a vouched-for wide linear
    layer (zeros): the events are not in slot order, and one gather of the slot buffer still gives
    each event its own values; past the buffer's capacity (a second buffer) the stack does."""
    from lossdoctor.signals.readout import Packer
    from lossdoctor.signals.tracer import ZERO_SLOT, ModuleTracer

    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(4, 256), nn.Tanh(), nn.Linear(256, 4))
    tracer = ModuleTracer(model)
    names = ("fwd_min", "fwd_max", "bwd_min", "bwd_max")
    for _ in range(2):
        model(torch.randn(64, 4)).square().mean().backward()
        assert ZERO_SLOT in tracer.ev_slot and tracer.ev_slot[-1] == tracer.ev_slot[-2] and tracer._one_buf
        got, expected = _packed(tracer, names)
        for k in names:
            assert got[k].tolist() == expected[k].tolist()
    tracer.remove()
    deep = _deep(150)  # ~600 events: the slots grow during the first step
    tracer = ModuleTracer(deep)
    deep(torch.randn(4, 8)).square().mean().backward()
    assert not tracer._one_buf
    got, expected = _packed(tracer, names)
    for k in names:
        assert got[k].tolist() == expected[k].tolist()
    for _ in range(2):  # (it grows twice: 256, 512, 1,024 slots) then one buffer holds a step, in slot order
        tracer.flush(Packer())
        deep(torch.randn(4, 8)).square().mean().backward()
    assert tracer._one_buf
    got, expected = _packed(tracer, names)
    for k in names:
        assert got[k].tolist() == expected[k].tolist()
    tracer.remove()


def _rms_row(tracer, model, x):
    """One sampled step through the tracer and the real packer: the per-module `act_rms` row."""
    from lossdoctor.signals.probe import StepRecord
    from lossdoctor.signals.readout import Packer

    tracer.sampled = True
    model(x).sum().backward()
    packer = Packer()
    ctx = tracer.flush(packer)
    flat = packer.pack()[torch.device("cpu")].numpy()
    values = {name: flat[a:b] for name, [(_, a, b, _)] in packer.layout.items()}
    rec = StepRecord(step=0)
    tracer.interpret(values, ctx, rec)
    return rec.layers["act_rms"]


def test_sampled_rms_from_the_norm_slots_is_each_output_rms():
    """The sampled step's RMS is written as a norm into a slot reused every step and divided by
    sqrt(numel) on the host: it equals each module's output RMS, in fp32, bf16 and float64 (the
    latter without a slot), step after step."""
    from lossdoctor.signals.tracer import ModuleTracer

    for dtype in (torch.float32, torch.bfloat16, torch.float64):
        torch.manual_seed(0)
        model = nn.Sequential(nn.Linear(8, 16), nn.Tanh(), nn.Linear(16, 4)).to(dtype)
        tracer = ModuleTracer(model)
        for scale in (1.0, 3.0):
            x = torch.randn(5, 8, dtype=dtype) * scale
            with torch.no_grad():
                h = model[0](x)
                outs = [model(x), h, model[1](h), model(x)]  # <model>, 0, 1, 2 (root: its last child's)
            want = [float(torch.linalg.vector_norm(o.float()) / o.numel() ** 0.5) for o in outs]
            got = _rms_row(tracer, model, x)
            assert got.tolist() == pytest.approx(want, rel=1e-5), dtype
        slots = tracer._rms_slots.get(torch.device("cpu"))
        assert (slots is None) == (dtype == torch.float64)
        tracer.remove()
