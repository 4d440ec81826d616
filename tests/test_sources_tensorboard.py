"""TensorBoard event files written by torch.utils.tensorboard.SummaryWriter, read without
TensorFlow, each fault curve diagnosed."""

from __future__ import annotations

import json
import os
import time

import numpy as np
import pytest

import logfaults
from conftest import run_cli
from lossdoctor.detectors.engine import diagnose_runs
from lossdoctor.sources import load_path
from msgs import find, has

#: how HF's TensorBoard callback names the scalars (Megatron's names in the second test)
HF_TAGS = {
    "loss": "train/loss",
    "grad_norm": "train/grad_norm",
    "lr": "train/learning_rate",
    "scale": "train/loss_scale",
    "skipped": "train/skipped",
}
MEGATRON_TAGS = {
    "loss": "lm loss",
    "grad_norm": "grad-norm",
    "lr": "learning-rate",
    "scale": "loss-scale",
    "skipped": "skipped-train-iterations",
}


def write_tb(d, curve: dict, tags: dict[str, str]) -> None:
    from torch.utils.tensorboard import SummaryWriter

    w = SummaryWriter(str(d))
    for i, step in enumerate(curve["step"]):
        for col, tag in tags.items():
            if col in curve:
                w.add_scalar(tag, float(curve[col][i]), int(step))
        w.add_scalar("eval/loss", 9.0, int(step))  # must never be taken for the training loss
    w.close()


@pytest.mark.parametrize("name", list(logfaults.CURVES))
def test_summarywriter_curves(tmp_path, name):
    curve = logfaults.CURVES[name]()
    write_tb(tmp_path / "runs" / "run1", curve, HF_TAGS)
    runs = load_path(tmp_path)  # the parent dir: found by searching
    run = runs[0]
    assert run.source == "tensorboard" and len(run) == len(curve["step"])
    np.testing.assert_allclose(run.cols["loss"], curve["loss"].astype(np.float32), rtol=1e-6, equal_nan=True)
    assert run.meta["tags"]["loss"] == "train/loss"
    assert any("train/loss" in n for n in run.notes)
    logfaults.check(diagnose_runs(runs), name)


def test_megatron_tags_via_cli(tmp_path):
    write_tb(tmp_path, logfaults.scale_collapse(), MEGATRON_TAGS)
    p = run_cli("diagnose", tmp_path, "--format", "json")
    assert p.returncode == 0, p.stderr
    doc = json.loads(p.stdout)
    logfaults.check(doc, "scale_collapse")
    assert any("'loss-scale'" in n for n in doc["notes"])


def test_newest_of_several_runs_and_missing_signals(tmp_path):
    from torch.utils.tensorboard import SummaryWriter

    old = SummaryWriter(str(tmp_path / "old"))
    for i in range(20):
        old.add_scalar("loss", 5.0, i)
    old.close()
    t = time.time() - 100
    for f in (tmp_path / "old").iterdir():
        os.utime(f, (t, t))
    new = SummaryWriter(str(tmp_path / "new"))
    for i in range(30):
        new.add_scalar("train_loss", 3.0 - 0.05 * i, i)
    new.close()
    run = load_path(tmp_path)[0]
    assert len(run) == 30 and run.cols["loss"][0] == pytest.approx(3.0)
    runs = find(run.notes, "source.tb_runs")
    assert runs.values["n"] == 2 and "old" in runs.values["others"], runs.data()
    assert has(run.notes, "source.not_in_log"), [getattr(m, "key", m) for m in run.notes]
    report = diagnose_runs([run])
    assert has(report.notes, "engine.not_checked", name="grad_explosion")


def test_event_file_without_training_metrics(tmp_path):
    from torch.utils.tensorboard import SummaryWriter

    w = SummaryWriter(str(tmp_path))
    w.add_scalar("eval/accuracy", 0.5, 1)
    w.close()
    p = run_cli("diagnose", tmp_path)
    assert p.returncode == 2 and "no training metric" in p.stderr and "Traceback" not in p.stderr


def test_torn_event_file_is_a_partial_read(tmp_path):
    write_tb(tmp_path / "run", logfaults.healthy(), HF_TAGS)
    f = next((tmp_path / "run").glob("events.out.tfevents.*"))
    data = f.read_bytes()
    f.write_bytes(data[: len(data) // 2 + 7])  # cut inside a record, as a killed writer leaves it
    run = load_path(f)[0]
    assert 50 < len(run) < 300
    assert has(run.notes, "source.tb_torn"), [getattr(m, "key", m) for m in run.notes]
    p = run_cli("diagnose", f)
    assert p.returncode == 0 and "warning" in p.stderr and "Traceback" not in p.stderr
