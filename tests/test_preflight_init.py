"""Init checks: a GPT-2 initialised with std 1.0 against the default one, before training and
live; and `check` leaves the model, its buffers, gradients and the RNGs as they were."""

from __future__ import annotations

import math
import random

import numpy as np
import pytest
import torch
from torch import nn

import lossdoctor
from msgs import find, has
from preflight_kit import chat_tokenizer, sft_batch, tiny_gpt2, train


def _batches():
    return [sft_batch("right"), sft_batch("right", start=4)]


def test_gpt2_with_std_1_is_bad_init():
    model = tiny_gpt2(initializer_range=1.0)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    report = lossdoctor.check(model, opt, batches=_batches(), task="sft", tokenizer=chat_tokenizer())
    f = report.primary
    assert f.cause == "bad_init" and f.severity in ("warning", "critical")
    assert f.layer == "transformer.h.0.attn.c_attn"
    w = model.transformer.h[0].attn.c_attn.weight
    hot = find(f.evidence, "pinit.hot_weights")
    assert hot.values["std"] == pytest.approx(float(w.detach().std()), rel=1e-2) and hot.values["fan_in"] == 32, (
        hot.data()
    )
    assert has(f.evidence, "pinit.rms_grows"), [m.data() for m in f.evidence]
    # the initial loss it reports is the model's own, compared with ln(vocab)
    with torch.no_grad():
        loss = float(model(**_batches()[0]).loss)
    initial = find(f.evidence, "pinit.initial_loss").values
    vocab = len(chat_tokenizer())
    assert initial["loss"] == pytest.approx(loss, rel=1e-4), initial
    assert initial["classes"] == vocab and initial["chance"] == pytest.approx(math.log(vocab)), initial
    assert loss > math.log(vocab) + 5
    assert has(f.fixes[:1], "pinit.how_hf")  # config.initializer_range=0.02, then model.init_weights()


def test_default_gpt2_init_is_silent():
    model = tiny_gpt2()
    report = lossdoctor.check(
        model,
        torch.optim.AdamW(model.parameters(), lr=1e-3),
        batches=_batches(),
        task="sft",
        tokenizer=chat_tokenizer(),
    )
    assert report.findings == [], [f.to_dict() for f in report.findings]


@pytest.mark.parametrize("std", [0.02, 1.0])
def test_one_layer_gpt2_is_judged_by_its_block_not_inside_its_branches(std):
    """A one-block transformer: GPT-2's scaled-down projections inside the residual branch are not
    a signal vanishing through depth (its default init is silent); a std-1 init still is bad_init."""
    model = tiny_gpt2(initializer_range=std, n_layer=1)
    report = lossdoctor.check(
        model,
        torch.optim.AdamW(model.parameters(), lr=1e-3),
        batches=_batches(),
        task="sft",
        tokenizer=chat_tokenizer(),
    )
    if std == 0.02:
        assert report.findings == [], [f.to_dict() for f in report.findings]
    else:
        assert report.primary.cause == "bad_init"


def test_bad_init_caught_live_and_default_init_silent(tmp_path):
    for std, expect in ((1.0, "bad_init"), (0.02, None)):
        model = tiny_gpt2(initializer_range=std)
        opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
        with lossdoctor.watch(model, opt, log_dir=tmp_path / str(std), task="sft", alerts=False) as mon:
            train(model, opt, _batches(), 6, mon=mon)
        report = mon.diagnose()
        if expect is None:
            assert report.status == "healthy", [f.to_dict() for f in report.findings]
        else:
            f = report.primary
            assert f.cause == expect
            assert has(f.evidence, "pinit.rms_grows"), [m.data() for m in f.evidence]


def test_deep_relu_mlp_with_tiny_init_vanishes():
    torch.manual_seed(0)
    layers = []
    for _ in range(8):
        lin = nn.Linear(32, 32)
        nn.init.normal_(lin.weight, std=0.01)  # gain 0.01*sqrt(32) = 0.06 per layer
        nn.init.zeros_(lin.bias)
        layers += [lin, nn.ReLU()]
    model = nn.Sequential(*layers, nn.Linear(32, 4))
    x, y = torch.randn(64, 32), torch.randint(0, 4, (64,))
    f = lossdoctor.check(model, batches=(x, y), task="classification").primary
    assert f.cause == "bad_init" and f.severity == "warning"
    assert has(f.evidence[:1], "pinit.rms_shrinks", last="14"), f.evidence[0].data()


def test_check_leaves_model_rng_and_grads_alone():
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(8, 16), nn.BatchNorm1d(16), nn.Dropout(0.5), nn.Linear(16, 3))
    model.train()
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    x, y = torch.randn(32, 8) * 3 + 1, torch.randint(0, 3, (32,))
    state = {k: v.clone() for k, v in model.state_dict().items()}
    rng = (torch.get_rng_state(), random.getstate(), np.random.get_state()[1].copy())
    lossdoctor.check(model, opt, batches=[(x, y)], task="classification")
    for k, v in model.state_dict().items():  # BatchNorm running stats included
        assert torch.equal(v, state[k]), k
    assert all(p.grad is None for p in model.parameters())
    assert model.training
    assert torch.equal(torch.get_rng_state(), rng[0])
    assert random.getstate() == rng[1]
    assert np.array_equal(np.random.get_state()[1], rng[2])
    assert not model._forward_hooks and not model[0]._forward_hooks
