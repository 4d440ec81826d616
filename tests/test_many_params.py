"""Models with many modules and parameter tensors: the monitor's per-step work stays bounded (the
tracer hooks a subset past its limit and says so; the optimizer probe reads a sample of tensors),
and the per-layer detectors stay linear in the number of modules."""

from __future__ import annotations

import numpy as np
import torch
from torch import nn

import lossdoctor
from lossdoctor.detectors.gradients import _param_modules
from lossdoctor.records import LayerStats, from_columns
from lossdoctor.signals.optimizer import TENSOR_BUDGET, OptimizerProbe
from lossdoctor.signals.tracer import TRACE_MODULE_LIMIT, ModuleTracer, traced_subset


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
    assert note.values == {"traced": len(tracer.traced), "modules": n_modules}
    notes = mon.diagnose().notes  # written to the run directory with the monitor's other notes
    assert any(str(note) in str(n) for n in notes)


def test_the_optimizer_probe_reads_a_bounded_sample_of_tensors() -> None:
    params = [nn.Parameter(torch.randn(3)) for _ in range(4 * TENSOR_BUDGET)]
    probe = OptimizerProbe(torch.optim.Adam(params, lr=1e-3))
    chosen = probe._sampled_params()
    assert TENSOR_BUDGET // 2 <= len(chosen) <= TENSOR_BUDGET
    small = OptimizerProbe(torch.optim.Adam(params[:10], lr=1e-3))
    assert len(small._sampled_params()) == 10
    probe.remove()
    small.remove()


def test_vanishing_gradient_leaf_search_keeps_the_leaves_of_many_modules() -> None:
    n = 4000
    names = ["<model>"] + [f"blocks.{i}" for i in range(n)] + [f"blocks.{i}.fc" for i in range(n)]
    g = np.ones((3, len(names)), dtype=np.float32)
    layers = LayerStats(steps=np.arange(3), modules=names, types=["Linear"] * len(names),
                        stats={"param_grad_norm": g})
    run = from_columns(np.arange(3), {"loss": [1.0, 1.0, 1.0]})
    run.layers = layers
    leafish, _ = _param_modules(run)
    assert [names[i] for i in leafish] == [f"blocks.{i}.fc" for i in range(n)]
