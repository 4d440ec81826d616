"""`lossdoctor.localize`: first non-finite op, layer and samples of one batch, on real models."""

from __future__ import annotations

import random

import numpy as np
import pytest
import torch
from torch import nn

import lossdoctor
from msgs import has
from triage_models import (
    DIM,
    MLP,
    TinyLM,
    ce_loss,
    classification_batches,
    lm_batches,
    lm_loss,
    mse_loss,
    regression_batches,
)


@pytest.fixture(autouse=True)
def _seed():
    torch.manual_seed(0)


def _param_bytes(model: nn.Module) -> list[bytes]:
    return [
        p.detach().contiguous().view(-1).view(torch.uint8).numpy().tobytes()
        for p in list(model.parameters()) + list(model.buffers())
    ]


def test_all_padding_sequence_is_attention_softmax_and_the_model_is_untouched():
    model = TinyLM()
    batch = lm_batches(1)[0]
    batch["attention_mask"][3] = 0
    # gradients the caller already had must survive (same tensor objects, same values)
    lm_loss(model, lm_batches(1, seed=9)[0]).backward()
    grads = {n: p.grad for n, p in model.named_parameters()}
    grad_vals = {n: g.clone() for n, g in grads.items()}
    before = _param_bytes(model)
    rng = (torch.get_rng_state(), random.getstate(), np.random.get_state()[1].copy())

    loc = lossdoctor.localize(model, batch, lm_loss)

    assert loc.cause == "attention_overflow"
    assert loc.op == "aten._softmax"
    assert loc.layer == "attn"
    assert loc.samples == [3]
    assert loc.phase == "forward"
    assert loc.trace.forward is not None and loc.trace.forward.module_type == "SelfAttention"
    assert has(loc.evidence, "triage.attn.masked_rows"), [m.data() for m in loc.evidence]  # a sequence all padding
    assert _param_bytes(model) == before
    for n, p in model.named_parameters():
        assert p.grad is grads[n] and torch.equal(p.grad, grad_vals[n])
    assert torch.equal(torch.get_rng_state(), rng[0]) and random.getstate() == rng[1]
    assert np.array_equal(np.random.get_state()[1], rng[2])
    f = loc.finding(step=7)
    assert f is not None and f.to_dict()["op"] == "aten._softmax" and f.step == 7


def test_softmax_without_max_subtraction_overflows_in_exp():
    model = TinyLM(manual_softmax=True)
    with torch.no_grad():
        model.emb.weight[VOCAB_HOT].mul_(60.0)  # one token with a huge embedding: logits ~1e4
        model.attn.qkv.weight[DIM : 2 * DIM] = model.attn.qkv.weight[:DIM]  # k = q: q.k = |q|^2 > 0
        model.attn.qkv.bias[DIM : 2 * DIM] = model.attn.qkv.bias[:DIM]
    batch = lm_batches(1)[0]
    for b in range(batch["input_ids"].shape[0]):  # only sample 2 uses that token
        batch["input_ids"][b][batch["input_ids"][b] == VOCAB_HOT] = 0
    batch["input_ids"][2, :] = VOCAB_HOT

    loc = lossdoctor.localize(model, batch, lm_loss)

    assert loc.op == "aten.exp"
    assert loc.layer == "attn"
    assert loc.cause == "attention_overflow"
    assert loc.samples == [2]
    assert loc.trace.forward.kind == "overflow"
    assert has(loc.evidence, "triage.attn.exp"), [m.data() for m in loc.evidence]  # no row maximum subtracted


VOCAB_HOT = 23


def test_nan_in_one_feature_of_one_sample_is_nonfinite_data():
    model = MLP()
    x, y = classification_batches(1)[0]
    x[5, 2] = float("nan")
    loc = lossdoctor.localize(model, (x, y), ce_loss)
    assert loc.cause == "nonfinite_data"
    assert loc.samples == [5]
    assert loc.layer == "fc1" and loc.op == "aten.addmm"
    assert loc.batch_nonfinite == {"0": [5]}
    assert loc.sample_search is not None and loc.sample_search.samples == [5]


def test_inf_target_is_that_sample():
    model = MLP()
    x, y = regression_batches(1)[0]
    y[1, 0] = float("inf")
    loc = lossdoctor.localize(model, [x, y], mse_loss)
    assert loc.cause == "nonfinite_data"
    assert loc.samples == [1]
    assert loc.op == "aten.mse_loss" and loc.layer is None  # the loss reads the bad target first
    assert loc.trace.forward.kind == "data"


def test_fp16_autocast_activation_overflow_names_the_op_and_layer():
    model = MLP()
    with torch.no_grad():
        model.fc2.weight.mul_(1000.0)
    x, y = classification_batches(1)[0]
    x[4] *= 200.0  # fc2 output ~1e5 > 65504 for this sample only (~1e3 for the others)

    def loss_fn(m, b):
        with torch.autocast("cpu", dtype=torch.float16):
            return ce_loss(m, b)

    loc = lossdoctor.localize(model, (x, y), loss_fn)
    assert loc.cause == "activation_overflow"
    assert loc.layer == "fc2"
    assert loc.op == "aten.addmm"
    assert loc.samples == [4]
    ev = loc.trace.forward
    assert ev.kind == "overflow" and ev.outputs[0].dtype == "float16" and ev.outputs[0].inf > 0
    assert any("float16" in e for e in loc.evidence)


class _NormFeature(nn.Module):
    """Appends the L2 norm of its input: sqrt has an infinite derivative at 0."""

    def forward(self, h: torch.Tensor) -> torch.Tensor:
        return torch.cat([h, torch.sqrt((h * h).sum(-1, keepdim=True))], dim=-1)


def test_backward_only_fault_is_found_in_backward_with_its_module():
    model = nn.Sequential(nn.Linear(6, 6, bias=False), _NormFeature(), nn.Linear(7, 3))
    x, y = classification_batches(1)[0]
    x[6] = 0.0
    loc = lossdoctor.localize(model, (x, y), ce_loss)
    assert loc.trace.forward is None and not loc.trace.grads_finite
    assert loc.phase == "backward"
    assert loc.cause == "grad_explosion"
    assert loc.layer == "1"
    assert loc.trace.backward.forward_op == "aten.sqrt"
    assert loc.samples == [6]


def test_a_healthy_batch_finds_nothing():
    model = TinyLM()
    loc = lossdoctor.localize(model, lm_batches(1)[0], lm_loss)
    assert not loc.found and loc.cause is None and loc.op is None
    assert loc.trace.ops["forward"] > 10 and loc.trace.ops["backward"] > 10
    assert "stayed finite" in str(loc)


class CausalExpSoftmax(nn.Module):
    """Attention weights as exp(s)/sum(exp(s)) after a causal mask of -inf: the mask's -inf is
    in every input of exp, so only a position-by-position check sees exp make +inf of a finite
    score."""

    def __init__(self) -> None:
        super().__init__()
        self.q = nn.Linear(8, 8)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        s = self.q(x) @ x.transpose(1, 2)
        t = s.shape[-1]
        s = s.masked_fill(~torch.ones(t, t, dtype=torch.bool).tril(), float("-inf"))
        e = torch.exp(s)
        return (e / e.sum(-1, keepdim=True)) @ x


def test_exp_overflow_beside_a_causal_mask_is_the_origin_not_the_division():
    torch.manual_seed(0)
    model = CausalExpSoftmax()
    x = torch.randn(4, 6, 8)
    x[1] *= 40.0  # sample 1's scores reach thousands: exp overflows fp32

    loc = lossdoctor.localize(model, x, lambda m, b: m(b).pow(2).mean())

    assert loc.op == "aten.exp"
    assert loc.trace.forward.kind == "overflow"
    assert loc.samples == [1]
