"""The incident flow inside `watch`: replay from the snapshot ring, reproduce, localise to op and
sample, batch vs state, the incident record, and its merge into the diagnosis."""

from __future__ import annotations

import json
import random

import numpy as np
import pytest
import torch

import lossdoctor
from conftest import run_cli
from msgs import has
from triage_models import (
    MLP,
    PairDistance,
    TinyLM,
    ce_loss,
    classification_batches,
    lm_batches,
    lm_loss,
    mse_loss,
    regression_batches,
    train,
)


@pytest.fixture(autouse=True)
def _seed():
    torch.manual_seed(0)


def _incidents(path):
    d = path / "incidents"
    return [json.loads(f.read_text()) for f in sorted(d.glob("*.json"))] if d.is_dir() else []


def _padding_run(tmp_path, **watch_kw):
    model = TinyLM(dropout=0.1)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-2)
    batches = lm_batches(10)
    batches[6]["attention_mask"][3] = 0
    mon = lossdoctor.watch(model, opt, log_dir=tmp_path, alerts=False, snapshot_every=4, **watch_kw)
    train(model, opt, batches, lm_loss, mon, clip=0.5)
    mon.close()
    return mon


def test_all_padding_sequence_is_replayed_localised_and_merged_into_the_diagnosis(tmp_path):
    mon = _padding_run(tmp_path, replay_fn=lm_loss)
    [rec] = _incidents(tmp_path)
    assert rec["step"] == 6 and rec["trigger"] == "nonfinite_loss" and rec["level"] == "replay"
    # replay from the snapshot of step 4 with dropout and clipping reproduces the logged losses exactly
    assert rec["replay"]["from_step"] == 4 and rec["replay"]["faithful"] and rec["reproducible"] is True
    assert [s["agree"] for s in rec["replay"]["losses"]] == [True, True, True]
    assert any(s.get("clip_factor") for s in rec["replay"]["losses"])
    assert rec["batch_vs_state"]["verdict"] == "batch"
    f = rec["findings"][0]
    assert (f["cause"], f["op"], f["layer"], f["samples"], f["step"]) == (
        "attention_overflow",
        "aten._softmax",
        "attn",
        [3],
        6,
    )
    assert rec["localization"]["trace"]["forward"]["module_type"] == "SelfAttention"

    report = mon.diagnose()
    top = report.findings[0]
    assert (top.cause, top.op, top.samples) == ("attention_overflow", "aten._softmax", [3])
    cli = run_cli("diagnose", tmp_path, "--format", "json")
    assert cli.returncode == 0, cli.stderr
    assert json.loads(cli.stdout)["findings"] == report.to_dict()["findings"]


def test_without_replay_fn_the_record_is_layer_level_and_says_what_replay_adds(tmp_path):
    mon = _padding_run(tmp_path)
    [rec] = _incidents(tmp_path)
    assert rec["level"] == "live" and "replay" not in rec
    f = rec["findings"][0]
    assert f["layer"] == "attn" and f["op"] is None
    assert any("replay_fn" in e for e in f["evidence"])
    top = mon.diagnose().findings[0]
    assert top.cause == "attention_overflow" and top.layer == "attn"
    assert any("replay_fn" in e for e in top.evidence)


def test_a_transient_nan_does_not_reproduce_and_is_a_nondeterministic_fault(tmp_path):
    model = MLP(flaky=True)
    opt = torch.optim.Adam(model.parameters(), lr=1e-2)
    mon = lossdoctor.watch(model, opt, log_dir=tmp_path, alerts=False, replay_fn=ce_loss, snapshot_every=4)

    def arm(i: int) -> None:
        if i == 6:
            model.flaky.armed = True

    train(model, opt, classification_batches(9), ce_loss, mon, clip=1.0, before_step=arm)
    mon.close()
    [rec] = _incidents(tmp_path)
    assert rec["step"] == 6 and rec["reproducible"] is False and rec["replay"]["faithful"]
    assert rec["findings"][0]["cause"] == "nondeterministic_fault"
    top = mon.diagnose().findings[0]
    assert top.cause == "nondeterministic_fault" and top.step == 6
    assert has(top.evidence, "triage.nondet.not_data"), [m.data() for m in top.evidence]


def test_nan_in_one_feature_of_one_sample_is_nonfinite_data_with_that_sample(tmp_path):
    model = MLP()
    opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    batches = classification_batches(8)
    batches[5][0][2, 1] = float("nan")
    mon = lossdoctor.watch(model, opt, log_dir=tmp_path, alerts=False, replay_fn=ce_loss, snapshot_every=3)
    train(model, opt, batches, ce_loss, mon)
    mon.close()
    [rec] = _incidents(tmp_path)
    f = rec["findings"][0]
    assert (f["cause"], f["samples"], f["layer"], f["op"]) == ("nonfinite_data", [2], "fc1", "aten.addmm")
    assert rec["localization"]["sample_search"]["samples"] == [2]
    assert rec["batch_vs_state"]["verdict"] == "batch"
    assert mon.diagnose().findings[0].samples == [2]


def test_inf_target_is_that_sample(tmp_path):
    model = MLP()
    opt = torch.optim.Adam(model.parameters(), lr=1e-2)
    batches = regression_batches(6)
    batches[4][1][6, 2] = float("inf")
    mon = lossdoctor.watch(model, opt, log_dir=tmp_path, alerts=False, replay_fn=mse_loss, snapshot_every=2)
    train(model, opt, batches, mse_loss, mon)
    mon.close()
    [rec] = _incidents(tmp_path)
    f = rec["findings"][0]
    assert (f["cause"], f["samples"], f["op"], f["layer"]) == ("nonfinite_data", [6], "aten.mse_loss", None)


def test_fp16_autocast_overflow_with_grad_scaler_names_the_op_and_layer(tmp_path):
    model = MLP()
    with torch.no_grad():
        model.fc2.weight.mul_(1000.0)
    opt = torch.optim.SGD(model.parameters(), lr=1e-6)
    scaler = torch.amp.GradScaler("cpu")
    batches = classification_batches(7)
    batches[5][0][4] *= 200.0  # fc2's fp16 output of this sample goes beyond 65504

    def replay(m, b):
        with torch.autocast("cpu", dtype=torch.float16):
            return ce_loss(m, b)

    mon = lossdoctor.watch(
        model, opt, scaler=scaler, log_dir=tmp_path, alerts=False, replay_fn=replay, snapshot_every=4
    )
    train(model, opt, batches, ce_loss, mon, scaler=scaler, autocast=torch.float16)
    mon.close()
    [rec] = _incidents(tmp_path)  # the scaler's own overflow skips before step 5 are not incidents
    assert rec["step"] == 5 and rec["reproducible"] is True and rec["replay"]["faithful"]
    f = rec["findings"][0]
    assert (f["cause"], f["layer"], f["op"], f["samples"]) == ("activation_overflow", "fc2", "aten.addmm", [4])
    assert rec["localization"]["trace"]["forward"]["outputs"][0]["dtype"] == "float16"


def _rng_state():
    return torch.get_rng_state(), random.getstate(), np.random.get_state()[1].copy()


def _rng_equal(a, b) -> bool:
    return torch.equal(a[0], b[0]) and a[1] == b[1] and np.array_equal(a[2], b[2])


def _padding_training(mon_kw, tmp_path, fault=True):
    from triage_models import state_bytes

    torch.manual_seed(0)
    random.seed(0)
    np.random.seed(0)
    model = TinyLM(dropout=0.1)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-2)
    batches = lm_batches(9)
    if fault:
        batches[5]["attention_mask"][1] = 0
    mon = (
        lossdoctor.watch(model, opt, log_dir=tmp_path, alerts=False, snapshot_every=3, **mon_kw)
        if mon_kw is not None
        else None
    )
    train(model, opt, batches, lm_loss, mon, clip=1.0)
    if mon is not None:
        mon.close()
    return state_bytes(model, opt), _rng_state()


def test_report_incident_leaves_model_optimizer_and_rng_bit_identical(tmp_path):
    plain_state, plain_rng = _padding_training(None, tmp_path / "plain")
    state, rng = _padding_training({"replay_fn": lm_loss}, tmp_path / "watched")
    assert len(_incidents(tmp_path / "watched")) == 1  # the incident did run
    assert state == plain_state
    assert _rng_equal(rng, plain_rng)


@pytest.mark.parametrize("policy", ["report", "raise", "skip"])
def test_policies_never_change_a_healthy_run(tmp_path, policy):
    plain_state, plain_rng = _padding_training(None, tmp_path / "plain", fault=False)
    state, rng = _padding_training({"replay_fn": lm_loss, "on_incident": policy}, tmp_path / "w", fault=False)
    assert _incidents(tmp_path / "w") == []
    assert state == plain_state and _rng_equal(rng, plain_rng)


def test_raise_policy_raises_after_recording(tmp_path):
    model = TinyLM()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-2)
    batches = lm_batches(8)
    batches[4]["attention_mask"][2] = 0
    mon = lossdoctor.watch(
        model, opt, log_dir=tmp_path, alerts=False, replay_fn=lm_loss, snapshot_every=4, on_incident="raise"
    )
    with pytest.raises(lossdoctor.TrainingIncident) as exc:
        train(model, opt, batches, lm_loss, mon)
    assert mon.step_idx == 5 and "attention_overflow" in str(exc.value) and "aten._softmax" in str(exc.value)
    assert exc.value.findings[0].samples == [2]
    assert _incidents(tmp_path)[0]["step"] == 4
    mon.close()


def _skip_run(log_dir, batches, make_opt, loss_fn, *, bad: int, snapshot_every: int, watch: bool):
    """The MLP trained on `batches`: under watch(on_incident="skip"), or unwatched with the
    optimizer step of batch `bad` left out by hand (the reference the skip policy must equal)."""
    torch.manual_seed(0)
    model = MLP()
    opt = make_opt(model)
    mon = (
        lossdoctor.watch(
            model,
            opt,
            log_dir=log_dir,
            alerts=False,
            replay_fn=loss_fn,
            snapshot_every=snapshot_every,
            on_incident="skip",
        )
        if watch
        else None
    )
    for i, b in enumerate(batches):
        opt.zero_grad()
        loss = loss_fn(model, b)
        loss.backward()
        if watch or i != bad:
            opt.step()
        if mon is not None:
            mon.step(loss, batch=b)
    if mon is not None:
        mon.close()
    return model, opt, mon


def test_skip_policy_skips_the_nonfinite_step_exactly(tmp_path):
    """With on_incident='skip' the run equals one whose loop never stepped on the bad batch."""
    from triage_models import state_bytes

    batches = classification_batches(9)
    batches[5][0][3, 0] = float("nan")

    def run(watch: bool):
        return _skip_run(
            tmp_path / str(watch),
            batches,
            lambda m: torch.optim.AdamW(m.parameters(), lr=1e-2),
            ce_loss,
            bad=5,
            snapshot_every=4,
            watch=watch,
        )[:2]

    model, opt = run(True)
    ref_model, ref_opt = run(False)
    assert state_bytes(model, opt) == state_bytes(ref_model, ref_opt)
    assert all(torch.isfinite(p).all() for p in model.parameters())
    [rec] = _incidents(tmp_path / "True")
    assert rec["action"] == "skipped" and rec["findings"][0]["cause"] == "nonfinite_data"
    steps = [json.loads(x) for x in (tmp_path / "True" / "steps.jsonl").read_text().splitlines()]
    assert [s["skipped"] for s in steps] == [0, 0, 0, 0, 0, 1, 0, 0, 0]


def test_loss_spike_is_replayed_to_its_sample_and_skip_rolls_it_back(tmp_path):
    """A finite but absurd target makes the loss spike; triage names the sample, and the skip policy
    puts the weights back to before that step (the run then equals one that skipped the batch)."""
    from triage_models import state_bytes

    batches = regression_batches(60, size=8)
    batches[50] = (batches[50][0], batches[50][1].clone())
    batches[50][1][3] = 300.0

    def run(watch: bool):
        return _skip_run(
            tmp_path / str(watch),
            batches,
            lambda m: torch.optim.Adam(m.parameters(), lr=3e-3),
            mse_loss,
            bad=50,
            snapshot_every=8,
            watch=watch,
        )

    model, opt, mon = run(True)
    [rec] = _incidents(tmp_path / "True")
    assert rec["trigger"] == "loss_spike" and rec["step"] == 50 and rec["reproducible"] is True
    assert rec["samples"]["samples"] == [3]
    assert rec["findings"][0]["cause"] == "loss_spike" and rec["findings"][0]["samples"] == [3]
    assert rec["action"] == "rolled_back"
    ref_model, ref_opt, _ = run(False)
    assert state_bytes(model, opt) == state_bytes(ref_model, ref_opt)
    top = [f for f in mon.diagnose().findings if f.cause == "loss_spike"][0]
    assert top.samples == [3] and top.step == 50


@pytest.mark.parametrize("name", ["grad-explosion", "labels-all-masked"])
def test_replay_keeps_the_demo_fault_diagnosis(tmp_path, monkeypatch, name):
    """With replay_fn, the demo's fault runs keep an acceptable primary cause: an exploded state
    lends its op to the gradient-explosion finding instead of replacing it."""
    import lossdoctor.demo.scenarios as S

    loop = S._loop

    def with_replay(model, opt, steps, batch_fn, loss_fn, log_dir, alerts, **kw):
        kw.setdefault("replay_fn", loss_fn)
        return loop(model, opt, steps, batch_fn, loss_fn, log_dir, alerts, **kw)

    monkeypatch.setattr(S, "_loop", with_replay)
    S.run_scenario(name, tmp_path)
    [rec] = _incidents(tmp_path)
    report = lossdoctor.diagnose(str(tmp_path))
    top = report.findings[0]
    assert top.cause in S.SCENARIOS[name].expect
    if top.cause == "label_mask_empty":  # the batch probe names the samples without a supervised token
        assert top.samples == list(range(len(top.samples))) and len(top.samples) > 1
    else:
        assert top.samples is None
    assert any(e.startswith(("forward op", "backward op")) for e in top.evidence)  # the op-level evidence
    if name == "grad-explosion":
        assert rec["level"] == "replay-state" and rec["batch_vs_state"]["verdict"] == "state"
        assert has(top.evidence, "triage.bvs.state"), [m.data() for m in top.evidence]


def _contrastive(m, b):
    x, y = b
    d = m(x).float()
    same = (y[:, None] == y[None, :]).float()
    return (same * d**2 + (1 - same) * torch.relu(1.0 - d) ** 2).mean()


@pytest.mark.parametrize("fault", [True, False])
def test_a_scaler_that_skips_every_step_is_traced_to_the_backward_op(tmp_path, fault):
    model = PairDistance()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    scaler = torch.amp.GradScaler("cpu")
    loss_fn = _contrastive if fault else ce_loss
    if not fault:
        model = MLP()
        opt = torch.optim.AdamW(model.parameters(), lr=1e-3)

    def replay(m, b):
        with torch.autocast("cpu", dtype=torch.float16):
            return loss_fn(m, b)

    mon = lossdoctor.watch(model, opt, scaler=scaler, log_dir=tmp_path, alerts=False, replay_fn=replay)
    train(model, opt, classification_batches(20), loss_fn, mon, scaler=scaler, autocast=torch.float16)
    mon.close()
    report = mon.diagnose()
    if not fault:  # a healthy fp16 run: the scaler's start-up back-offs are not an incident
        assert _incidents(tmp_path) == [] and report.status == "healthy", report.findings
        return
    [rec] = _incidents(tmp_path)
    assert rec["trigger"] == "scale_collapse" and rec["step"] == 11
    f = report.findings[0]
    assert (f.cause, f.layer, f.op) == ("loss_scale_collapse", "<model>", "aten.sqrt")
    assert any("SqrtBackward0" in e for e in f.evidence)
