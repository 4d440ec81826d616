"""Lightning CSVLogger + LearningRateMonitor: metrics.csv written by a real Lightning Trainer
(sparse rows: the LR monitor and self.log write separate rows), read and diagnosed."""

from __future__ import annotations

import json

import numpy as np
import pytest

import lightning_kit
from conftest import run_cli
from lossdoctor.detectors.engine import diagnose_runs
from lossdoctor.sources import load_path


def _fit(root, lr: float, steps: int = 40) -> None:
    from lightning.pytorch.loggers import CSVLogger

    lightning_kit.fit(CSVLogger(str(root)), lr=lr, steps=steps)


@pytest.fixture(scope="module")
def pl_runs(tmp_path_factory):
    root = tmp_path_factory.mktemp("pl")
    _fit(root / "healthy", lr=0.01)
    _fit(root / "too_high", lr=1.0)  # the loss jumps at step 2 and diverges
    return root


def test_sparse_rows_merged(pl_runs):
    csv = pl_runs / "healthy" / "lightning_logs" / "version_0" / "metrics.csv"
    header = csv.read_text().splitlines()[0].split(",")
    assert "lr-SGD" in header and "train_loss" in header
    run = load_path(csv)[0]
    assert run.source == "lightning_csv" and len(run) == 40
    assert run.logged("loss").all() and run.logged("lr").all()  # two rows per step, one record
    assert np.allclose(run.cols["lr"], 0.01)
    assert run.meta["columns"] == {"loss": "train_loss", "lr": "lr-SGD"}


def test_healthy_lightning(pl_runs):
    runs = load_path(pl_runs / "healthy")  # the Trainer's root dir
    report = diagnose_runs(runs)
    assert report.status == "healthy", [(f.cause, f.evidence) for f in report.findings]
    assert any("grad_norm" in n for n in runs[0].notes)  # says how to log the gradient norm


def test_lr_too_high_lightning(pl_runs):
    p = run_cli("diagnose", pl_runs / "too_high" / "lightning_logs", "--format", "json")
    assert p.returncode == 0, p.stderr
    doc = json.loads(p.stdout)
    assert doc["findings"] and doc["findings"][0]["cause"] == "lr_too_high", doc["findings"]
    assert doc["findings"][0]["step"] in (1, 2)  # the loss is 2.6x its start at step 1, 60x at step 2
