"""Diagnoses from a user's own scalar log (step, loss, grad_norm, lr in a CSV), written by a real
training loop: what `lossdoctor diagnose` can say without `watch`."""

from __future__ import annotations

import csv
import json

import torch
from torch import nn
from torch.nn import functional as F

from conftest import run_cli


def _train_to_csv(path, fault: str, steps: int = 12) -> None:
    torch.manual_seed(0)
    model = nn.Sequential(nn.Embedding(32, 16), nn.Linear(16, 32))
    opt = torch.optim.AdamW(model.parameters(), lr=1e-2)
    with open(path, "w", newline="") as fh:
        w = csv.writer(fh)
        w.writerow(["step", "loss", "grad_norm", "lr"])
        for step in range(steps):
            ids = torch.randint(0, 32, (4, 8))
            labels = ids.clone()
            if step == 5 and fault == "empty_labels":
                labels[:] = -100  # every response truncated away
            if step == 5 and fault == "nan_input":
                with torch.no_grad():
                    model[0].weight[ids[0, 0]] = float("nan")  # a NaN row hit by this batch
            logits = model(ids)
            loss = F.cross_entropy(logits.view(-1, 32), labels.view(-1), ignore_index=-100)
            opt.zero_grad()
            loss.backward()
            gn = torch.nn.utils.clip_grad_norm_(model.parameters(), 1e9)
            if torch.isfinite(loss):
                opt.step()
            elif fault == "nan_input":
                with torch.no_grad():  # the user repairs the row and goes on
                    model[0].weight[ids[0, 0]] = 0.0
            w.writerow([step, float(loss), float(gn), 1e-2])


def _diagnose(path):
    p = run_cli("diagnose", path, "--format", "json")
    assert p.returncode == 0, p.stderr
    return json.loads(p.stdout)


def test_nan_loss_with_zero_gradient_is_an_empty_label_mask(tmp_path):
    _train_to_csv(tmp_path / "log.csv", "empty_labels")
    doc = _diagnose(tmp_path / "log.csv")
    f = doc["findings"][0]
    assert (f["cause"], f["step"], f["severity"]) == ("label_mask_empty", 5, "critical"), doc["findings"]


def test_nan_loss_with_nan_gradient_is_not_an_empty_label_mask(tmp_path):
    _train_to_csv(tmp_path / "log.csv", "nan_input")
    doc = _diagnose(tmp_path / "log.csv")
    assert doc["status"] == "critical"
    assert not any(f["cause"] == "label_mask_empty" for f in doc["findings"]), doc["findings"]
    assert doc["findings"][0]["step"] == 5


def test_the_same_loop_without_a_fault_is_healthy(tmp_path):
    _train_to_csv(tmp_path / "log.csv", "none")
    doc = _diagnose(tmp_path / "log.csv")
    assert doc["status"] == "healthy" and doc["findings"] == [], doc["findings"]
