"""Hugging Face Trainer logs: trainer_state.json written by a real Trainer on a GPT-2 built from a
config (1 layer, 32 wide, CPU, 30 steps), read back and diagnosed."""

from __future__ import annotations

import json

import numpy as np
import pytest

from conftest import run_cli
from hf_console_train import train
from lossdoctor.detectors.engine import diagnose_runs
from lossdoctor.sources import load_path
from msgs import has


@pytest.fixture(scope="module")
def hf_runs(tmp_path_factory):
    root = tmp_path_factory.mktemp("hf")
    # healthy: AdamW at 1e-3 with the default clipping
    train(root / "healthy", lr=1e-3, optim="adamw_torch", max_grad_norm=1.0)
    # faulty: plain SGD at lr=2 without clipping: the gradient norm grows ~2 -> 1e7, then NaN
    # (also logged by the Trainer's own TensorBoard callback)
    train(root / "explode", lr=2.0, optim="sgd", max_grad_norm=0.0, report_to=("tensorboard",))
    return root


def test_healthy_trainer_state(hf_runs):
    runs = load_path(hf_runs / "healthy")  # the output dir: found in checkpoint-30/
    run = runs[0]
    assert run.source == "hf_trainer" and len(run) == 30
    assert run.steps[0] == 1 and run.steps[-1] == 30
    assert np.isfinite(run.cols["loss"]).all() and run.cols["loss"][-1] < run.cols["loss"][0]
    assert run.has("grad_norm") and run.has("lr") and not run.has("scale")
    assert run.meta["log_interval"] == 1 and run.meta["format"] == "Hugging Face trainer_state.json"
    report = diagnose_runs(runs)
    assert report.status == "healthy", [(f.cause, f.evidence) for f in report.findings]


def test_exploding_trainer_state(hf_runs):
    state = hf_runs / "explode" / "checkpoint-30" / "trainer_state.json"
    run = load_path(state)[0]
    gn = run.cols["grad_norm"]
    first_bad = int(np.flatnonzero(~np.isfinite(gn))[0])
    assert first_bad > 5 and np.nanmax(gn[:first_bad]) > 1e4
    # the Trainer logs an all-NaN interval's loss as 0.0: read back as NaN, with a note
    assert np.isnan(run.cols["loss"][first_bad]) and run.logged("loss")[first_bad]
    assert any("logging_nan_inf_filter" in n for n in run.notes)
    p = run_cli("diagnose", state, "--format", "json")
    assert p.returncode == 0, p.stderr
    doc = json.loads(p.stdout)
    assert doc["status"] == "critical"
    assert doc["findings"][0]["cause"] == "grad_explosion", doc["findings"]
    assert doc["findings"][0]["step"] == int(run.steps[first_bad])
    assert doc["source"] == "hf_trainer"


def test_every_n_steps_log_still_diagnosed(hf_runs):
    """HF logs every 500 steps by default; here every 3rd of 30 steps, from the same run's log."""
    state = json.loads((hf_runs / "explode" / "checkpoint-30" / "trainer_state.json").read_text())
    state["log_history"] = [e for e in state["log_history"] if e.get("step", 0) % 3 == 0]
    state["logging_steps"] = 3
    p = hf_runs / "sparse" / "trainer_state.json"
    p.parent.mkdir()
    p.write_text(json.dumps(state))
    runs = load_path(p)
    assert runs[0].meta["log_interval"] == 3
    report = diagnose_runs(runs)
    # SGD at lr 2.0 without clipping: every third point shows a loss that never improved and rose
    # from the first logged steps (the LR), the full log shows the gradient norm's growth too
    assert report.primary is not None and report.primary.cause in ("grad_explosion", "lr_too_high")
    assert report.primary.severity == "critical"


def test_coarse_log_says_so(hf_runs):
    state = json.loads((hf_runs / "healthy" / "checkpoint-30" / "trainer_state.json").read_text())
    for e in state["log_history"]:
        if "step" in e:
            e["step"] *= 500  # as if logging_steps=500
    state["logging_steps"] = 500
    p = hf_runs / "coarse.json"
    p.write_text(json.dumps(state))
    run = load_path(p)[0]
    assert run.meta["log_interval"] == 500
    assert has(run.notes, "source.coarse_averaged", n=500), [getattr(m, "key", m) for m in run.notes]


def test_truncated_trainer_state_is_a_partial_read(hf_runs, tmp_path):
    text = (hf_runs / "explode" / "checkpoint-30" / "trainer_state.json").read_text()
    cut = text[: text.index('"step": 12') + 20]
    p = tmp_path / "trainer_state.json"
    p.write_text(cut)
    run = load_path(p)[0]
    assert 10 <= len(run) <= 12 and run.steps[-1] <= 12
    assert any("truncated" in n for n in run.notes)
    proc = run_cli("diagnose", p)
    assert proc.returncode == 0 and "warning" in proc.stderr and "truncated" in proc.stderr
    assert "Traceback" not in proc.stderr


def test_trainer_tensorboard_callback_log(hf_runs):
    """The same exploding run as written by the Trainer's TensorBoard callback."""
    events = list((hf_runs / "explode").rglob("events.out.tfevents.*"))
    assert events, "the Trainer wrote no TensorBoard events"
    runs = load_path(events[0].parent)
    assert runs[0].source == "tensorboard" and runs[0].meta["tags"]["grad_norm"] == "train/grad_norm"
    report = diagnose_runs(runs)
    # SGD at lr 2.0 without clipping: every third point shows a loss that never improved and rose
    # from the first logged steps (the LR), the full log shows the gradient norm's growth too
    assert report.primary is not None and report.primary.cause in ("grad_explosion", "lr_too_high")
    assert report.primary.severity == "critical"
