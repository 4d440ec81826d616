"""Where in the user's code: on replay, the first bad op carries the file and line of the innermost
frame outside torch and lossdoctor (as `detect_anomaly`'s forward traceback does)."""

from __future__ import annotations

import json
from importlib import resources

import pytest
import torch
from torch import nn
from torch.nn import functional as F

import lossdoctor
from conftest import run_cli
from triage_models import train

HERE = __file__


def _line_of(marker: str) -> int:
    with open(HERE, encoding="utf-8") as fh:
        return next(i for i, line in enumerate(fh, 1) if marker in line and "_line_of" not in line)


class LogFeature(nn.Module):
    """A classifier with a hand-written log feature: log of the first input column plus an offset.
    A sample whose first column is below -1 makes the log's argument negative: NaN."""

    def __init__(self) -> None:
        super().__init__()
        self.fc = nn.Linear(7, 3)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        feat = torch.log(x[:, :1] + 1.0)  # the bad op
        return self.fc(torch.cat([x, feat], dim=1))


def _loss(model: nn.Module, batch) -> torch.Tensor:
    x, y = batch
    return F.cross_entropy(model(x), y)


def _batches(n: int, bad_step: int, bad_sample: int):
    g = torch.Generator().manual_seed(5)
    out = []
    for i in range(n):
        x = torch.rand(8, 6, generator=g)  # in [0, 1): log(x + 1) is finite
        y = torch.randint(0, 3, (8,), generator=g)
        if i == bad_step:
            x[bad_sample, 0] = -3.0  # log(-2) = NaN
        out.append((x, y))
    return out


def test_localize_names_the_file_and_line_of_the_log_of_a_negative_value():
    torch.manual_seed(0)
    model = LogFeature()
    [batch] = _batches(1, 0, 4)
    loc = lossdoctor.localize(model, batch, _loss)
    assert loc.op == "aten.log"
    assert loc.code == {"file": HERE, "line": _line_of("# the bad op"), "function": "forward"}
    assert loc.finding(step=0).to_dict()["code"]["line"] == _line_of("# the bad op")


def test_a_healthy_batch_has_no_code_location():
    torch.manual_seed(0)
    [batch] = _batches(1, -1, 0)
    loc = lossdoctor.localize(LogFeature(), batch, _loss)
    assert not loc.found and loc.code is None


def test_watch_replays_the_incident_and_the_report_names_the_users_line(tmp_path):
    torch.manual_seed(0)
    model = LogFeature()
    opt = torch.optim.SGD(model.parameters(), lr=0.05)
    mon = lossdoctor.watch(model, opt, log_dir=tmp_path, alerts=False, replay_fn=_loss, snapshot_every=3)
    train(model, opt, _batches(8, 5, 2), _loss, mon)
    mon.close()
    line = _line_of("# the bad op")
    top = mon.diagnose().findings[0]
    assert (top.step, top.op, top.samples) == (5, "aten.log", [2])
    assert top.code == {"file": HERE, "line": line, "function": "forward"}

    out = run_cli("diagnose", tmp_path, "--format", "json")
    assert out.returncode == 0, out.stderr
    report = json.loads(out.stdout)
    jsonschema = pytest.importorskip("jsonschema")
    schema = json.loads(resources.files("lossdoctor").joinpath("schema/report.schema.json").read_text())
    jsonschema.validate(report, schema)
    f = report["findings"][0]
    assert f["code"] == {"file": HERE, "line": line, "function": "forward"}

    text = run_cli("diagnose", tmp_path, "--lang", "en")
    assert f"{HERE}:{line}" in text.stdout


def test_a_finding_without_a_traced_op_has_no_code_key():
    f = lossdoctor.Finding(cause="lr_too_high", symptom="divergence", severity="warning", confidence=0.5)
    assert "code" not in f.to_dict()
    with pytest.raises(ValueError):
        lossdoctor.Finding(
            cause="lr_too_high", symptom="divergence", severity="warning", confidence=0.5, code={"line": 3}
        )


class PairDist(nn.Module):
    """Distances by sqrt of squared differences: sqrt(0) on the diagonal has an infinite
    derivative, so the forward pass is finite and the backward pass is NaN."""

    def __init__(self) -> None:
        super().__init__()
        self.embed = nn.Linear(6, 8)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        e = self.embed(x)
        return ((e[:, None, :] - e[None, :, :]) ** 2).sum(-1).sqrt()  # the backward op's forward


def test_a_backward_op_names_the_line_of_its_forward_op():
    torch.manual_seed(0)
    x = torch.randn(5, 6)
    loc = lossdoctor.localize(PairDist(), (x, None), lambda m, b: m(b[0]).mean())
    assert loc.phase == "backward"
    assert loc.code == {"file": HERE, "line": _line_of("# the backward op's forward"), "function": "forward"}


def test_a_console_script_launcher_is_not_the_users_code():
    """A frame in the environment's scripts folder (pip's generated `lossdoctor`/`torchrun`
    launchers) is skipped like torch's own: with only a launcher outside the libraries there is no
    user frame, and a user's frame under a launcher is still found."""
    import os
    import sysconfig

    from lossdoctor.triage.optrace import user_frame

    launcher = os.path.join(sysconfig.get_path("scripts"), "some-launcher")
    scope: dict = {"user_frame": user_frame}
    exec(compile("def call(f):\n    return f()\n", launcher, "exec"), scope)
    assert scope["call"](lambda: user_frame(1))["file"] == HERE  # the lambda here is the user's frame
    inner: dict = {"user_frame": user_frame}
    exec(compile("def probe():\n    return user_frame(1)\n", launcher, "exec"), inner)
    got = scope["call"](inner["probe"])
    assert got is None or got["file"] != launcher, got
