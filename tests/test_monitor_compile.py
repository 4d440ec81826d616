"""A compiled model trains under `watch` exactly as it trains compiled without it.

torch.compile traces module hooks into the compiled graph. The monitor's hooks return at once
while dynamo traces them (nothing of theirs is guarded on, nothing recompiles); what hooks outside
the model see (loss, gradients, optimizer, batch) is still recorded.
"""

from __future__ import annotations

import json

import pytest
import torch
from torch import nn
from torch.nn import functional as F

import lossdoctor

pytest.importorskip("torch._dynamo")


def _mlp():
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(8, 16), nn.GELU(), nn.Linear(16, 16), nn.ReLU(), nn.Linear(16, 3))


def _batches(n=8):
    out = []
    for i in range(n):
        g = torch.Generator().manual_seed(i)
        out.append((torch.randn(6, 8, generator=g), torch.randint(0, 3, (6,), generator=g)))
    return out


def _train(order: str, log_dir):
    """order: "plain" (compiled, no monitor), "compile_first" (watch the compiled module) or
    "watch_first" (compile after watch). Recompiling is an error: the monitor must not cause one."""
    import torch._dynamo

    torch._dynamo.reset()
    model = _mlp()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-2)
    mon = None
    if order == "watch_first":
        mon = lossdoctor.watch(model, opt, log_dir=log_dir, alerts=False)
    compiled = torch.compile(model)  # the default backend: inductor
    if order == "compile_first":
        mon = lossdoctor.watch(compiled, opt, log_dir=log_dir, alerts=False)
    losses = []
    with torch._dynamo.config.patch(error_on_recompile=True):
        for x, y in _batches():  # past step 5: sampled and unsampled steps alternate
            opt.zero_grad()
            loss = F.cross_entropy(compiled(x), y)
            loss.backward()
            opt.step()
            if mon is not None:
                mon.step(loss, batch=(x, y))
            losses.append(loss.detach().clone())
    if mon is not None:
        mon.close()
    params = [p.detach().clone() for p in model.parameters()]
    hooks = sum(len(m._forward_hooks) + len(m._forward_pre_hooks) for m in model.modules())
    return torch.stack(losses), params, hooks


def test_compiled_model_trains_bit_identically_with_and_without_watch(tmp_path):
    ref_losses, ref_params, _ = _train("plain", None)
    for order in ("compile_first", "watch_first"):
        losses, params, hooks = _train(order, tmp_path / order)
        assert torch.equal(losses, ref_losses), order
        assert all(torch.equal(a, b) for a, b in zip(params, ref_params)), order
        assert hooks == 0, order  # close() removed every hook
        recs = [json.loads(x) for x in (tmp_path / order / "steps.jsonl").read_text().splitlines()]
        assert [r["step"] for r in recs] == list(range(8))
        assert [r["loss"] for r in recs] == pytest.approx(ref_losses.tolist())
        # what hooks outside the compiled forward see is still there
        assert all(r["grad_norm"] > 0 and r["grad_nonfinite"] == 0 and r["batch_size"] == 6 for r in recs)
        assert all("update_ratio" in r for r in recs[:5])
        # per-module forward statistics of a compiled module are not recorded (documented)
        assert not any("act_absmax" in r for r in recs)
