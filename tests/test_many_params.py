"""Models with many modules and parameter tensors: the monitor's per-step work stays bounded (the
tracer hooks a subset past its limit and says so; the optimizer probe reads a sample of tensors),
and the per-layer detectors stay linear in the number of modules."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch
from torch import nn

import lossdoctor
from lossdoctor.detectors.gradients import _param_modules
from lossdoctor.records import LayerStats, from_columns
from lossdoctor.signals.optimizer import TENSOR_BUDGET, OptimizerProbe
from lossdoctor.signals.readout import Packer
from lossdoctor.signals.tracer import (
    EVERY_STEP_MODULE_LIMIT,
    TRACE_MODULE_LIMIT,
    ModuleTracer,
    every_step_subset,
    traced_subset,
)


def _stack(blocks: int) -> nn.Module:
    return nn.Sequential(*[nn.Sequential(nn.Linear(8, 8), nn.Tanh()) for _ in range(blocks)], nn.Linear(8, 1))


def test_traced_subset_keeps_all_up_to_the_limit_and_spreads_beyond() -> None:
    assert traced_subset(10, head=None, limit=16) == list(range(10))
    sub = traced_subset(5000, head=4999, limit=1024)
    assert len(sub) <= 1024 + 2 and sub[0] == 0 and 4999 in sub
    gaps = np.diff(sub[:-1])
    assert gaps.max() == gaps.min()  # evenly spaced


def test_a_model_past_the_limit_is_hooked_on_a_subset_and_a_note_says_so(tmp_path) -> None:
    torch.manual_seed(0)
    model = _stack(TRACE_MODULE_LIMIT // 2 + 10)  # 3 modules a block: past the limit
    n_modules = sum(1 for _ in model.modules())
    tracer = ModuleTracer(model)
    hooked = sum(len(m._forward_hooks) for m in model.modules())
    tracer.remove()
    assert n_modules > TRACE_MODULE_LIMIT and hooked == len(tracer.traced) <= TRACE_MODULE_LIMIT + 2

    opt = torch.optim.SGD(model.parameters(), lr=1e-2)
    mon = lossdoctor.watch(model, opt, log_dir=tmp_path / "run", alerts=False)
    x, y = torch.randn(4, 8), torch.randn(4, 1)
    for _ in range(3):
        opt.zero_grad()
        loss = ((model(x) - y) ** 2).mean()
        loss.backward()
        opt.step()
        mon.step(loss)
    mon.close()
    (note,) = [n for n in mon.notes if getattr(n, "key", "") == "tracer.subset"]
    assert note.values == {"traced": len(tracer.traced), "modules": n_modules, "every_step": sum(tracer.every_step)}
    assert EVERY_STEP_MODULE_LIMIT // 2 <= note.values["every_step"] <= EVERY_STEP_MODULE_LIMIT + 2
    notes = mon.diagnose().notes  # written to the run directory with the monitor's other notes
    assert any(str(note) in str(n) for n in notes)


def test_every_step_subset_is_all_modules_up_to_the_limit_and_a_spread_of_the_traced_beyond() -> None:
    assert every_step_subset(list(range(10)), 10, head=None) == list(range(10))
    traced = traced_subset(5000, head=4999)
    every = every_step_subset(traced, 5000, head=4999)
    assert set(every) <= set(traced) and 0 in every and 4999 in every
    assert EVERY_STEP_MODULE_LIMIT // 2 <= len(every) <= EVERY_STEP_MODULE_LIMIT + 2


def _records(model: nn.Module, tracer: ModuleTracer, sampled: bool) -> set[int]:
    tracer.sampled = sampled
    loss = model(torch.randn(4, 8)).pow(2).mean()
    loss.backward()
    fwd, bwd = set(tracer.ev_module), set(tracer.bw_module)
    tracer.flush(Packer())
    return fwd | bwd


def test_past_the_limit_only_the_every_step_modules_record_between_sampled_steps() -> None:
    torch.manual_seed(0)
    model = _stack(TRACE_MODULE_LIMIT // 2 + 10)
    tracer = ModuleTracer(model)
    every = {i for i, on in enumerate(tracer.every_step) if on}
    quiet = _records(model, tracer, sampled=False)
    busy = _records(model, tracer, sampled=True)
    tracer.remove()
    assert 0 in quiet and quiet <= every and len(quiet) >= len(every) // 2
    assert busy <= set(tracer.traced) and len(busy - every) >= len(tracer.traced) // 2
    small = _stack(20)  # under the limit: every module records at every step (as it did before)
    tracer = ModuleTracer(small)
    assert all(tracer.every_step) and _records(small, tracer, sampled=False) >= {0, *range(1, 60, 3)}
    tracer.remove()


def test_a_nan_made_between_every_step_modules_is_caught_at_an_unsampled_step(tmp_path) -> None:
    torch.manual_seed(0)
    model = _stack(TRACE_MODULE_LIMIT // 2 + 10)
    opt = torch.optim.SGD(model.parameters(), lr=1e-3)
    mon = lossdoctor.watch(model, opt, log_dir=tmp_path / "run", alerts=False)
    names = mon.tracer.names
    quiet = [i for i in mon.tracer.traced if not mon.tracer.every_step[i] and names[i].endswith(".0")]
    bad = quiet[len(quiet) // 2]  # a traced Linear that records on sampled steps only
    x, y = torch.randn(4, 8), torch.randn(4, 1)
    for step in range(8):
        if step == 7:  # not sampled (steps 0-4 and every 10th are)
            with torch.no_grad():
                mon.tracer.modules[bad].weight[0, 0] = float("nan")
        opt.zero_grad()
        loss = ((model(x) - y) ** 2).mean()
        loss.backward()
        opt.step()
        mon.step(loss)
    mon.close()
    rows = [json.loads(line) for line in (tmp_path / "run" / "steps.jsonl").read_text().splitlines()]
    (row,) = [r for r in rows if r.get("step") == 7]
    first = row["fwd_first_nonfinite"]
    assert names.index(first["module"]) > bad  # the next module that records there
    assert row["grad_nonfinite"] > 0 and row["loss"] == "nan"  # (the run log writes NaN as "nan")
    assert all("fwd_first_nonfinite" not in r for r in rows if r.get("step", 99) < 7)


def test_past_the_hook_limit_the_gradients_are_still_captured_when_each_backward_ends(tmp_path) -> None:
    """A subset of the parameters carries the capture hook; the capture still reads every gradient
    at the end of backward: before a clipping that follows it, once per micro-batch counted."""
    from lossdoctor.signals.gradients import HOOKED_PARAMS

    torch.manual_seed(0)
    model = _stack(HOOKED_PARAMS // 2 + 100)  # 2 tensors a block: past the limit
    params = list(model.parameters())
    opt = torch.optim.SGD(params, lr=1e-3)
    mon = lossdoctor.watch(model, opt, log_dir=tmp_path / "run", alerts=False)
    hooked = sum(len(getattr(p, "_post_accumulate_grad_hooks", None) or {}) for p in params)
    assert len(params) > HOOKED_PARAMS and 0 < hooked <= HOOKED_PARAMS
    x, y = torch.randn(4, 8), torch.randn(4, 1)
    before = []
    for _ in range(3):
        opt.zero_grad()
        for half in (x[:2], x[2:]):  # two micro-batches
            loss = ((model(half) - y[:2]) ** 2).mean()
            loss.backward()
        before.append(float(torch.stack([p.grad.double().norm() for p in params]).norm()))
        torch.nn.utils.clip_grad_norm_(params, 1e-3)
        opt.step()
        mon.step(loss)
    mon.close()
    rows = [json.loads(line) for line in (tmp_path / "run" / "steps.jsonl").read_text().splitlines()]
    assert [r["accum_steps"] for r in rows] == [2, 2, 2]
    assert [r["grad_norm"] for r in rows] == pytest.approx(before, rel=1e-5)
    assert all(r["grad_norm_applied"] == pytest.approx(1e-3, rel=1e-3) for r in rows)  # the clipped ones


def test_the_optimizer_probe_reads_a_bounded_sample_of_tensors() -> None:
    params = [nn.Parameter(torch.randn(3)) for _ in range(4 * TENSOR_BUDGET)]
    probe = OptimizerProbe(torch.optim.Adam(params, lr=1e-3))
    chosen = probe._sampled_params()
    assert TENSOR_BUDGET // 2 <= len(chosen) <= TENSOR_BUDGET
    small = OptimizerProbe(torch.optim.Adam(params[:10], lr=1e-3))
    assert len(small._sampled_params()) == 10
    probe.remove()
    small.remove()


def _update_stats(dtype: torch.dtype) -> dict[str, float]:
    from lossdoctor.signals.readout import _assemble

    torch.manual_seed(0)
    model = _stack(60).to(dtype)  # 122 tensors of 4 shapes
    opt = torch.optim.Adam(model.parameters(), lr=1e-2)
    probe = OptimizerProbe(opt)
    probe.sampled = True
    x = torch.randn(4, 8, dtype=dtype)
    for _ in range(2):
        opt.zero_grad()
        model(x).float().pow(2).mean().backward()
        opt.step()
    packer = Packer()
    ctx = probe.flush(packer)
    probe.remove()
    arrays = {dev: t.numpy() for dev, t in packer.pack().items()}
    return {k: float(_assemble(arrays, packer.layout[k])[0]) for k in ctx["opt_stats"]}


def test_the_update_statistics_from_stacks_match_the_per_tensor_ones(monkeypatch) -> None:
    """Past `GROUP_MIN` sampled tensors on CPU the optimizer probe copies and compares them as one
    stack per shape: the same sums as the per-tensor `_foreach` path (also in bf16, where entries
    that did not move are counted)."""
    import lossdoctor.signals.optimizer as optimizer

    for dtype in (torch.float32, torch.bfloat16):
        stacked = _update_stats(dtype)
        monkeypatch.setattr(optimizer, "GROUP_MIN", 10**9)
        per_tensor = _update_stats(dtype)
        monkeypatch.undo()
        assert set(stacked) == set(per_tensor) >= {"delta_sq", "param_sq", "eps_above_n"}
        if dtype == torch.bfloat16:
            assert {"lowp_frozen", "lowp_moving"} <= set(stacked) and stacked["lowp_moving"] > 0
        for k in stacked:
            assert stacked[k] == pytest.approx(per_tensor[k], rel=1e-5), k


def test_vanishing_gradient_leaf_search_keeps_the_leaves_of_many_modules() -> None:
    n = 4000
    names = ["<model>"] + [f"blocks.{i}" for i in range(n)] + [f"blocks.{i}.fc" for i in range(n)]
    g = np.ones((3, len(names)), dtype=np.float32)
    layers = LayerStats(steps=np.arange(3), modules=names, types=["Linear"] * len(names), stats={"param_grad_norm": g})
    run = from_columns(np.arange(3), {"loss": [1.0, 1.0, 1.0]})
    run.layers = layers
    leafish, _ = _param_modules(run)
    assert [names[i] for i in leafish] == [f"blocks.{i}.fc" for i in range(n)]


def _train_watched(model: nn.Module, tmp_path, steps: int = 3):
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    mon = lossdoctor.watch(model, opt, log_dir=tmp_path / "run", alerts=False)
    g = torch.Generator().manual_seed(0)
    x, y = torch.randn(4, 8, generator=g), torch.randn(4, 1, generator=g)
    expected, expected_params = [], []
    for _ in range(steps):
        opt.zero_grad(set_to_none=True)
        loss = ((model(x) - y) ** 2).mean()
        loss.backward()
        expected.append(torch.stack([p.grad.double().norm() for p in model.parameters()]))
        opt.step()
        expected_params.append(
            float(torch.stack([p.detach().double().norm() for p in model.parameters()]).pow(2).sum().sqrt())
        )
        mon.step(loss)
    mon.close()
    return mon, expected, expected_params


def test_many_small_gradients_are_normed_by_shape_group_and_match_the_per_tensor_norms(tmp_path) -> None:
    from lossdoctor.signals.grouped_norms import GroupedNorms

    torch.manual_seed(0)
    model = _stack(60)  # 122 tensors of 4 shapes: past GroupLimits.min_tensors
    mon, expected, expected_params = _train_watched(model, tmp_path, steps=3)
    assert isinstance(mon.grads._plan, GroupedNorms) and len(mon.grads._plan.chunks) == 4
    rows = [r for r in map(json.loads, (tmp_path / "run" / "steps.jsonl").read_text().splitlines()) if "grad_norm" in r]
    assert len(rows) == 3
    for s in range(3):
        assert rows[s]["grad_nonfinite"] == 0
        total = float(expected[s].pow(2).sum().sqrt())
        assert abs(rows[s]["grad_norm"] - total) <= 1e-6 * total
        # steps 0-4 are sampled: the applied gradient (no clipping: the same) and the parameter norm
        assert abs(rows[s]["grad_norm_applied"] - total) <= 1e-5 * total
        assert abs(rows[s]["param_norm"] - expected_params[s]) <= 1e-5 * expected_params[s]
    assert isinstance(mon.applied._plan, GroupedNorms)


def test_a_parameter_replaced_by_another_shape_falls_back_to_per_tensor_norms(tmp_path) -> None:
    from lossdoctor.signals.grouped_norms import plan_for

    torch.manual_seed(0)
    model = _stack(60)
    params = list(model.parameters())
    plan = plan_for(params)
    grads = [torch.randn_like(p) for p in params]
    assert torch.equal(
        plan.norms(grads), torch.stack([torch.linalg.vector_norm(g, dtype=torch.float64) for g in grads])
    )
    grads[4][0, 0], grads[7][1] = float("nan"), float("inf")  # a (8, 8) weight and an (8,) bias
    norms = plan.norms(grads)
    assert norms[4].isnan() and norms[7].isinf() and int(torch.isfinite(norms).sum()) == len(grads) - 2
    grads[0] = torch.randn(3, 3)  # one of a group of (8, 8) tensors: does not fit the plan
    try:
        plan.norms(grads)
        raise AssertionError("a tensor of another shape must not be normed by the plan")
    except RuntimeError:
        pass
    assert plan_for(params[:10]) is None  # few tensors: the per-tensor path
