"""Precision checks on real mixed-precision training: bf16 weights that Adam cannot move at a
small LR (the fp32 twin learns), fp16 autocast with GradScaler(init_scale=2**60), fp16 without a
scaler, and Adam's eps in fp16 state."""

from __future__ import annotations

import copy

import numpy as np
import pytest
import torch
from torch import nn
from torch.nn import functional as F

import lossdoctor
from lossdoctor.sources.rundir import read_run_dir
from msgs import find, has
from preflight_kit import train

LR = 1e-5


def _classifier(seed=0):
    torch.manual_seed(seed)
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(64, 16, generator=g)
    y = x[:, :4].argmax(dim=1)
    model = nn.Sequential(nn.Linear(16, 64), nn.ReLU(), nn.Linear(64, 64), nn.ReLU(), nn.Linear(64, 4))
    return model, (x, y)


def _loss(m, b):
    x, y = b
    return F.cross_entropy(m(x.to(next(m.parameters()).dtype)), y)


def _only(report, cause):
    return [f for f in report.findings if f.cause == cause]


@pytest.fixture(scope="module")
def twins():
    """The same classifier in fp32 and in bf16, each trained 40 steps with Adam at lr=1e-5."""
    base, batch = _classifier()
    out = {}
    for dtype in (torch.float32, torch.bfloat16):
        model = copy.deepcopy(base).to(dtype)
        before = [p.detach().clone() for p in model.parameters()]
        opt = torch.optim.Adam(model.parameters(), lr=LR)
        report = lossdoctor.check(model, opt, batches=[batch], task="classification")
        losses = train(model, opt, [batch], 40, loss_fn=_loss)
        moved = sum(int((p.detach() != b).sum()) for p, b in zip(model.parameters(), before))
        total = sum(p.numel() for p in model.parameters())
        out[dtype] = (report, losses, moved / total)
    return out


def test_fp32_twin_learns_and_is_silent(twins):
    report, losses, moved = twins[torch.float32]
    assert losses[-1] < losses[0] - 1e-3
    assert moved > 0.9  # all but the weights of dead ReLU units
    assert report.findings == [], [f.to_dict() for f in report.findings]


def test_bf16_twin_does_not_learn_and_check_says_why(twins):
    report, losses, moved = twins[torch.bfloat16]
    assert losses[-1] == losses[0]  # the same bf16 loss after 40 steps
    assert moved < 0.1  # over 90% of the bf16 weights never changed
    [f] = _only(report, "precision_stall")
    away = find(f.evidence, "pprec.updates_round_away")
    assert (away.values["lr"], away.values["dtype"], away.values["bits"]) == (LR, "bfloat16", 8), away.data()
    assert has([away], "pprec.how_adam")  # Adam's first update is ~lr per entry
    frozen = float(away.values["pct"].rstrip("%"))
    assert frozen / 100 == pytest.approx(1 - moved, abs=0.05)  # the prediction matches what happened
    assert find(f.evidence, "pprec.loss_dtype_grid").values["dtype"] == "bfloat16"  # the custom head's cross-entropy
    assert (f.fixes[0].key, f.fixes[0].values["dtype"]) == ("pprec.fix_master_weights", "bfloat16")


def test_bf16_stall_caught_live(tmp_path):
    base, batch = _classifier()
    model = base.to(torch.bfloat16)
    opt = torch.optim.Adam(model.parameters(), lr=LR)
    with lossdoctor.watch(model, opt, log_dir=tmp_path, task="classification", alerts=False) as mon:
        train(model, opt, [batch], 30, loss_fn=_loss, mon=mon)
    [f] = _only(mon.diagnose(), "precision_stall")
    assert f.severity in ("warning", "critical")
    assert find(f.evidence, "pprec.updates_round_away").values["dtype"] == "bfloat16", [m.data() for m in f.evidence]


def _fp16_run(scaler, steps, mon=None):
    model, batch = _classifier()
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    train(model, opt, [batch], steps, loss_fn=_loss, scaler=scaler, autocast=torch.float16, mon=mon)
    return model, opt


def test_gradscaler_init_scale_2_60(tmp_path):
    model, batch = _classifier()
    scaler = torch.amp.GradScaler("cpu", init_scale=2.0**60)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    [f] = _only(lossdoctor.check(model, opt, batches=[batch], scaler=scaler), "loss_scale_collapse")
    huge = f.evidence[0]
    assert (huge.key, huge.values["start"], huge.values["skipped"]) == ("pprec.init_scale_huge", "2^60", 44), (
        huge.data()
    )
    assert f.fixes[0].key in ("pprec.fix_init_scale", "pprec.fix_init_scale_default"), f.fixes[0].data()
    # what really happens: fp16 autocast on CPU, 50 steps, most of them skipped at first
    scaler = torch.amp.GradScaler("cpu", init_scale=2.0**60)
    with lossdoctor.watch(model, opt, scaler=scaler, log_dir=tmp_path, alerts=False) as mon:
        train(model, opt, [batch], 50, loss_fn=_loss, scaler=scaler, autocast=torch.float16, mon=mon)
    skipped = int(np.nansum(read_run_dir(tmp_path)[0].col("skipped")))
    assert abs(skipped - 44) <= 8, skipped  # the estimate in the evidence is what happened
    assert scaler.get_scale() == 2.0 ** (60 - skipped)
    [f] = _only(mon.diagnose(), "loss_scale_collapse")
    assert has(f.evidence, "pprec.init_scale_huge", start="2^60"), [m.data() for m in f.evidence]


def test_fp16_autocast_without_scaler_caught_live(tmp_path):
    model, batch = _classifier()
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    with lossdoctor.watch(model, opt, log_dir=tmp_path, alerts=False) as mon:
        train(model, opt, [batch], 5, loss_fn=_loss, autocast=torch.float16, mon=mon)
    [f] = _only(mon.diagnose(), "precision_stall")
    no_scaler = f.evidence[0]
    assert (
        no_scaler.key == "pprec.no_scaler"
        and has([no_scaler], "pprec.fp16_autocast")
        and has([no_scaler], "pprec.scaler_absent")
    ), no_scaler.data()
    # with a sane GradScaler the same run is silent
    model, batch = _classifier()
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    scaler = torch.amp.GradScaler("cpu")
    with lossdoctor.watch(model, opt, scaler=scaler, log_dir=tmp_path / "ok", alerts=False) as mon:
        train(model, opt, [batch], 5, loss_fn=_loss, scaler=scaler, autocast=torch.float16, mon=mon)
    assert mon.diagnose().status == "healthy", [f.to_dict() for f in mon.diagnose().findings]


def test_adam_eps_is_zero_in_fp16_state():
    model, (x, y) = _classifier()
    model = model.half()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3, eps=1e-8)
    report = lossdoctor.check(model, opt, batches=[(x.half(), y)], scaler=torch.amp.GradScaler("cpu"))
    f = report.primary
    assert (f.cause, f.severity, f.symptom) == ("precision_stall", "critical", "nonfinite")
    assert has(f.evidence[:1], "pprec.eps_underflows", eps=1e-8, dtype="float16"), f.evidence[0].data()
    # the NaN it predicts: one step with gradients small enough to underflow v
    (model(x.half()).float().square().mean() * 1e-6).backward()
    opt.step()
    assert not all(bool(p.isfinite().all()) for p in model.parameters())
