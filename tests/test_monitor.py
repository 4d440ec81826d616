"""The live monitor's signals are right, cheap to keep, and never disturb training."""

from __future__ import annotations

import json
import logging
import math
import os
import signal
import subprocess
import sys
import textwrap

import pytest
import torch
from torch import nn
from torch.nn import functional as F

import lossdoctor
from conftest import cli_env, run_cli
from lossdoctor.sources.rundir import read_run_dir


def _mlp(seed=0):
    torch.manual_seed(seed)
    return nn.Sequential(nn.Linear(8, 32), nn.ReLU(), nn.Linear(32, 3))


def _batch(i, n=6):
    g = torch.Generator().manual_seed(i)
    return torch.randn(n, 8, generator=g), torch.randint(0, 3, (n,), generator=g)


def _steps(d):
    return [json.loads(x) for x in (d / "steps.jsonl").read_text().splitlines()]


def _train_watched(model, opt, log_dir, steps):
    """The plain loop under `watch`: zero_grad, forward, backward, step, mon.step."""
    with lossdoctor.watch(model, opt, log_dir=log_dir, alerts=False) as mon:
        for i in range(steps):
            x, y = _batch(i)
            opt.zero_grad()
            loss = F.cross_entropy(model(x), y)
            loss.backward()
            opt.step()
            mon.step(loss, batch=(x, y))
    return mon


def test_grad_norm_is_before_clipping_and_zero_grad_anywhere(tmp_path):
    """Grad stats come from the end of backward: before clip_grad_norm_, and whether the loop
    zeroes gradients before backward or right after the step."""
    model = _mlp()
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    pre_clip = []
    with lossdoctor.watch(model, opt, log_dir=tmp_path, alerts=False) as mon:
        for i in range(6):
            x, y = _batch(i)
            loss = F.cross_entropy(model(x), y)
            loss.backward()
            pre_clip.append(float(nn.utils.clip_grad_norm_(model.parameters(), max_norm=1e-3)))
            opt.step()
            opt.zero_grad(set_to_none=True)  # before mon.step: grads are gone by now
            mon.step(loss, batch=(x, y))
    recs = _steps(tmp_path)
    assert len(recs) == 6
    for r, ref in zip(recs, pre_clip):
        assert r["grad_norm"] == pytest.approx(ref, rel=1e-5)
        assert r["grad_norm"] > 1e-3  # not the clipped value
        assert r["skipped"] == 0


def test_gradient_accumulation_one_record_per_optimizer_step(tmp_path):
    model = _mlp()
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    ref = []
    with lossdoctor.watch(model, opt, log_dir=tmp_path, alerts=False) as mon:
        for i in range(4):
            opt.zero_grad()
            for k in range(3):
                x, y = _batch(10 * i + k)
                (F.cross_entropy(model(x), y) / 3).backward()
            ref.append(math.sqrt(sum(float(p.grad.norm()) ** 2 for p in model.parameters())))
            opt.step()
            mon.step()
    recs = _steps(tmp_path)
    assert [r["step"] for r in recs] == [0, 1, 2, 3]
    assert [r["grad_norm"] for r in recs] == pytest.approx(ref, rel=1e-5)


def test_scaler_lr_and_batch_signals(tmp_path):
    model = _mlp()
    opt = torch.optim.AdamW(
        [{"params": model[0].parameters(), "lr": 1e-3}, {"params": model[2].parameters(), "lr": 1e-2}], weight_decay=0.1
    )
    sched = torch.optim.lr_scheduler.StepLR(opt, step_size=2, gamma=0.5)
    scaler = torch.amp.GradScaler("cpu", init_scale=2.0**30)
    scales, lrs = [], []
    with lossdoctor.watch(model, opt, scaler=scaler, scheduler=sched, log_dir=tmp_path, alerts=False) as mon:
        for i in range(8):
            x, y = _batch(i)
            if i == 5:
                x[4, 2] = float("inf")
            batch = {"x": x, "labels": torch.stack([y.clone(), torch.full_like(y, -100)], 1)}
            opt.zero_grad()
            with torch.autocast("cpu", dtype=torch.float16):
                loss = F.cross_entropy(model(batch["x"]).float(), y)
            scaler.scale(loss).backward()
            scaler.step(opt)
            scaler.update()
            sched.step()
            scales.append(scaler.get_scale())
            lrs.append(opt.param_groups[0]["lr"])
            mon.step(loss, batch=batch)
    recs = _steps(tmp_path)
    assert [r["scale"] for r in recs] == scales
    backoffs = [int(b < a) for a, b in zip([2.0**30] + scales, scales)]
    assert [r["skipped"] for r in recs] == backoffs  # a skipped step is exactly a back-off
    assert [r["lr"] for r in recs] == pytest.approx(lrs)
    assert recs[0]["lr_groups"] == pytest.approx([1e-3, 1e-2])
    assert all(r["wd"] == pytest.approx(0.1) for r in recs)
    assert recs[5]["batch_nonfinite_detail"] == {"x": [4]} and recs[5]["batch_nonfinite"] == 1
    assert all(r["label_ignored_frac"] == pytest.approx(0.5) for r in recs)
    assert recs[0]["label_empty_samples"] == 0


def test_update_ratio_matches_a_manual_measurement(tmp_path):
    model = _mlp()
    opt = torch.optim.Adam(model.parameters(), lr=1e-2)
    manual = []
    with lossdoctor.watch(model, opt, log_dir=tmp_path, alerts=False, layer_every=1) as mon:
        for i in range(3):
            x, y = _batch(i)
            opt.zero_grad()
            F.cross_entropy(model(x), y).backward()
            before = [p.detach().clone() for p in model.parameters()]
            opt.step()
            d = math.sqrt(sum(float((p - b).norm()) ** 2 for p, b in zip(model.parameters(), before)))
            w = math.sqrt(sum(float(p.norm()) ** 2 for p in model.parameters()))
            manual.append(d / w)
            mon.step()
    recs = _steps(tmp_path)
    assert [r["update_ratio"] for r in recs] == pytest.approx(manual, rel=1e-4)
    assert all(0 <= r["eps_dominated"] <= 1 for r in recs)


def test_update_ratio_and_eps_fraction_from_a_sample_of_a_model_over_budget(tmp_path):
    """Past `update_budget` entries the ratios come from every k-th entry of every tensor; they
    must still match the whole-model measurement (a few percent for a ~20x smaller sample)."""
    torch.manual_seed(0)
    # a LayerNorm (weights of 1.0 in a short tensor) skews the ratio if short tensors are over-sampled
    model = nn.Sequential(
        nn.Linear(64, 256), nn.LayerNorm(256), nn.ReLU(), nn.Linear(256, 64), nn.ReLU(), nn.Linear(64, 3)
    )
    n_params = sum(p.numel() for p in model.parameters())
    opt = torch.optim.Adam(model.parameters(), lr=1e-3, eps=1e-4)
    manual, eps_manual = [], []
    with lossdoctor.watch(
        model, opt, log_dir=tmp_path, alerts=False, layer_every=1, update_budget=n_params // 20
    ) as mon:
        assert mon.opt_probe.stride >= 21 and mon.opt_probe.stride % 2 == 1
        for i in range(4):
            g = torch.Generator().manual_seed(i)
            x, y = torch.randn(32, 64, generator=g), torch.randint(0, 3, (32,), generator=g)
            opt.zero_grad()
            F.cross_entropy(model(x), y).backward()
            before = [p.detach().clone() for p in model.parameters()]
            opt.step()
            d = math.sqrt(sum(float((p.detach() - b).norm()) ** 2 for p, b in zip(model.parameters(), before)))
            w = math.sqrt(sum(float(p.detach().norm()) ** 2 for p in model.parameters()))
            manual.append(d / w)
            v = torch.cat([opt.state[p]["exp_avg_sq"].reshape(-1) for p in model.parameters()])
            thresh = (10 * 1e-4) ** 2 * (1 - 0.999 ** (i + 1))
            eps_manual.append(float((v <= thresh).float().mean()))
            mon.step()
    recs = _steps(tmp_path)
    assert [r["update_ratio"] for r in recs] == pytest.approx(manual, rel=0.05)
    assert [r["eps_dominated"] for r in recs] == pytest.approx(eps_manual, abs=0.03)
    assert 0.05 < min(eps_manual) and max(eps_manual) < 0.8  # neither all nor none: the sample estimates


def test_first_nonfinite_module_in_forward_and_backward(tmp_path):
    class Blow(nn.Module):
        def forward(self, x):
            return (x - x) / (x - x)  # 0/0 = NaN from a finite input

    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(4, 4), nn.Tanh(), Blow(), nn.Linear(4, 1))
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    with lossdoctor.watch(model, opt, log_dir=tmp_path, alerts=False) as mon:
        x = torch.randn(3, 4)
        loss = model(x).pow(2).mean()
        loss.backward()
        opt.step()
        mon.step(loss, batch=x)
    r = _steps(tmp_path)[0]
    assert r["fwd_first_nonfinite"]["layer"] == "2"
    assert r["fwd_first_nonfinite"]["value"] == "nan"
    assert r["bwd_first_nonfinite"]["layer"] == "3"  # the loss end of the graph comes first
    assert r["grad_nonfinite"] == 4 and r["loss"] == "nan"  # NaN stays NaN in the log


def test_watch_does_not_change_training(tmp_path):
    """Same seed, same data: parameters bit-identical with and without the monitor."""

    def train(watched):
        model = _mlp(seed=3)
        opt = torch.optim.AdamW(model.parameters(), lr=1e-2)
        mon = (
            lossdoctor.watch(model, opt, log_dir=tmp_path / f"w{watched}", alerts=False, layer_every=1)
            if watched
            else None
        )
        for i in range(12):
            x, y = _batch(i)
            opt.zero_grad()
            loss = F.cross_entropy(model(x), y)
            loss.backward()
            opt.step()
            if mon:
                mon.step(loss, batch=(x, y))
        if mon:
            mon.close()
        return [p.detach().clone() for p in model.parameters()], opt.state_dict()

    (a, sa), (b, sb) = train(False), train(True)
    assert all(torch.equal(x, y) for x, y in zip(a, b))
    for k in sa["state"]:
        for n in ("exp_avg", "exp_avg_sq"):
            assert torch.equal(sa["state"][k][n], sb["state"][k][n])


def test_internal_failure_is_logged_once_and_training_goes_on(tmp_path, caplog, monkeypatch):
    from lossdoctor.signals import tracer

    def broken(self, i, kind, t):
        raise RuntimeError("simulated monitor bug")

    monkeypatch.setattr(tracer.ModuleTracer, "_record", broken)
    model = _mlp()
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    with caplog.at_level(logging.WARNING, logger="lossdoctor"):
        _train_watched(model, opt, tmp_path, 5)
    msgs = [r.getMessage() for r in caplog.records if "disabled" in r.getMessage()]
    assert len(msgs) == 1 and "simulated monitor bug" in msgs[0]
    recs = _steps(tmp_path)
    assert len(recs) == 5 and all("grad_norm" in r for r in recs)  # the other parts kept working


def test_alerts_once_per_incident_with_rearm(tmp_path, capfd):
    """NaN data on every step from 30 on is one incident: one alert, not one per step."""
    model = _mlp()
    opt = torch.optim.SGD(model.parameters(), lr=0.05)
    with lossdoctor.watch(model, opt, log_dir=tmp_path, alerts=True) as mon:
        for i in range(60):
            x, y = _batch(i)
            if i >= 30:
                x[0, 0] = float("nan")
            opt.zero_grad()
            loss = F.cross_entropy(model(x), y)
            loss.backward()
            opt.step()
            mon.step(loss, batch=(x, y))
    err = capfd.readouterr().err
    alerts = [line for line in err.splitlines() if line.startswith("lossdoctor: CRITICAL nonfinite_data")]
    assert len(alerts) == 1, err
    live = [json.loads(x) for x in (tmp_path / "findings.jsonl").read_text().splitlines()]
    assert [f["cause"] for f in live].count("nonfinite_data") == 1


def test_step_record_size_budget_gpt2(tmp_path):
    from lossdoctor.demo.scenarios import run_scenario

    d = run_scenario("healthy-gpt2", tmp_path / "g")
    size = (d / "steps.jsonl").stat().st_size
    n = len(_steps(d))
    assert size / n <= 2048, size / n
    run = read_run_dir(d)[0]
    assert run.layers is not None and run.layers.stats["act_absmax"].shape[1] == len(run.layers.modules)
    # per-layer rows only at sampled steps: 0-4 and every 10th
    assert list(run.layers.steps[:7]) == [0, 1, 2, 3, 4, 10, 20]


def test_kill_9_loses_at_most_the_step_being_written(tmp_path):
    script = textwrap.dedent(f"""
        import sys, time, torch
        from torch import nn
        import lossdoctor
        torch.manual_seed(0)
        m = nn.Linear(4, 1)
        opt = torch.optim.SGD(m.parameters(), lr=0.01)
        mon = lossdoctor.watch(m, opt, log_dir={str(tmp_path / "run")!r}, alerts=False)
        for i in range(10**6):
            x = torch.randn(8, 4)
            loss = m(x).pow(2).mean()
            opt.zero_grad(); loss.backward(); opt.step()
            mon.step(loss, batch=x)
            print(i, flush=True)
    """)
    p = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True, env=cli_env())
    done = -1
    for line in p.stdout:
        done = int(line)
        if done >= 40:
            break
    os.kill(p.pid, signal.SIGKILL)
    p.wait()
    recs = []
    for line in (tmp_path / "run" / "steps.jsonl").read_text().splitlines():
        try:
            recs.append(json.loads(line))
        except json.JSONDecodeError:
            pass
    assert len(recs) >= done + 1  # every step printed as done was on disk
    res = run_cli("diagnose", tmp_path / "run", "--format", "json")
    assert res.returncode == 0, res.stderr
    assert json.loads(res.stdout)["steps"] >= done + 1


def test_mon_diagnose_equals_cli(tmp_path):
    model = _mlp()
    opt = torch.optim.SGD(model.parameters(), lr=0.05)
    mon = lossdoctor.watch(model, opt, log_dir=tmp_path, alerts=False)
    for i in range(40):
        x, y = _batch(i)
        if i == 20:
            x[1, 1] = float("nan")
        opt.zero_grad()
        loss = F.cross_entropy(model(x), y)
        loss.backward()
        opt.step()
        mon.step(loss, batch=(x, y))
    live = mon.diagnose().to_dict()  # before close: flushed
    mon.close()
    cli = json.loads(run_cli("diagnose", tmp_path, "--format", "json").stdout)
    assert live["findings"] == cli["findings"] and live["status"] == cli["status"] == "critical"


def test_alert_rearms_for_a_new_incident(tmp_path, capfd):
    """A bad value in an unused batch key at steps 20 and 200: two incidents, two alerts."""
    model = _mlp()
    opt = torch.optim.SGD(model.parameters(), lr=0.05)
    with lossdoctor.watch(model, opt, log_dir=tmp_path, alerts=True) as mon:
        for i in range(240):
            x, y = _batch(i)
            aux = torch.zeros(x.shape[0], 2)
            if i in (20, 21, 200):
                aux[3, 1] = float("inf")
            opt.zero_grad()
            loss = F.cross_entropy(model(x), y)
            loss.backward()
            opt.step()
            mon.step(loss, batch={"x": x, "aux": aux, "y": y})
    err = capfd.readouterr().err
    alerts = [line for line in err.splitlines() if "nonfinite_data" in line]
    assert len(alerts) == 2, err
    assert "step 20" in alerts[0] and "step 200" in alerts[1] and "WARNING" in alerts[0]


def test_evaluation_passes_between_steps_are_not_recorded(tmp_path):
    """A validation forward under no_grad that goes NaN must not be blamed on training."""
    model = _mlp()
    opt = torch.optim.SGD(model.parameters(), lr=0.05)
    with lossdoctor.watch(model, opt, log_dir=tmp_path, alerts=False) as mon:
        for i in range(3):
            x, y = _batch(i)
            opt.zero_grad()
            loss = F.cross_entropy(model(x), y)
            loss.backward()
            opt.step()
            with torch.no_grad():
                model(torch.full((2, 8), float("nan")))
            mon.step(loss, batch=(x, y))
    recs = _steps(tmp_path)
    assert not any("fwd_first_nonfinite" in r for r in recs)


def test_live_engine_failure_keeps_the_log(tmp_path, caplog, monkeypatch):
    from lossdoctor.live import diagnoser

    def broken(self):
        raise ValueError("engine bug")

    monkeypatch.setattr(diagnoser.LiveDiagnoser, "evaluate", broken)
    model = _mlp()
    opt = torch.optim.SGD(model.parameters(), lr=0.05)
    with caplog.at_level(logging.WARNING, logger="lossdoctor"):
        _train_watched(model, opt, tmp_path, 15)
    assert sum("engine bug" in r.getMessage() for r in caplog.records) == 1
    recs = _steps(tmp_path)
    assert len(recs) == 15 and all("grad_norm" in r and "act_absmax" in r for r in recs)
