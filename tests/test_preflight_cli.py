"""`lossdoctor check --config FILE[:FUNCTION]`, as a user runs it: formats, exit codes, one-line
errors; and preflight findings joined with the detectors' in the engine."""

from __future__ import annotations

import json
import textwrap

import pytest

from conftest import run_cli
from lossdoctor.cli.main import main
from lossdoctor.detectors.merge import merge_findings
from lossdoctor.findings import Finding

SETUP = textwrap.dedent("""
    import torch
    from torch.optim.lr_scheduler import CosineAnnealingLR

    print("building the model")  # must not end up in the JSON on stdout

    def lossdoctor_setup():
        torch.manual_seed(0)
        model = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.ReLU(), torch.nn.Linear(8, 2))
        opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
        x, y = torch.randn(16, 4), torch.randint(0, 2, (16,))
        return {"model": model, "optimizer": opt, "scheduler": CosineAnnealingLR(opt, T_max=%s),
                "batches": [(x, y)], "total_steps": 1000, "task": "classification"}

    def broken():
        raise RuntimeError("no GPU here\\nsecond line")

    def not_a_dict():
        return [1, 2]

    def typo():
        return {"model": None, "totl_steps": 3}
""")


def _write(tmp_path, t_max=1000):
    path = tmp_path / "setup.py"
    path.write_text(SETUP % t_max)
    return path


def test_check_config_json_as_a_user_runs_it(tmp_path):
    path = _write(tmp_path, t_max=100)
    out = run_cli("check", "--config", path, "--format", "json", "--fail-on", "warning")
    assert out.returncode == 1, out.stderr  # a warning, and --fail-on warning
    report = json.loads(out.stdout)  # one JSON object: the setup's print went to stderr
    assert report["schema"] == "lossdoctor.report/1" and report["status"] == "warning"
    assert report["findings"][0]["cause"] == "lr_schedule_error"
    assert "T_max=1000" in report["findings"][0]["fixes"][-1]
    assert "building the model" in out.stderr


def test_check_config_text_healthy_and_overrides(tmp_path, capsys):
    path = str(_write(tmp_path))
    assert main(["check", "--config", path, "--fail-on", "warning"]) == 0
    assert "status: HEALTHY" in capsys.readouterr().out
    # --total-steps overrides the config: a 1000-step cosine in a 3000-step run climbs again
    assert main(["check", "--config", path, "--total-steps", "3000", "--format", "json"]) == 0
    assert json.loads(capsys.readouterr().out)["findings"][0]["cause"] == "lr_schedule_error"


def test_bad_config_from_a_shell_is_one_line_and_exit_2(tmp_path):
    _write(tmp_path)
    out = run_cli("check", "--config", "setup.py:broken", cwd=tmp_path)
    assert out.returncode == 2 and out.stdout == ""
    assert out.stderr.splitlines()[-1] == "lossdoctor: setup.py: broken() raised RuntimeError: no GPU here"
    assert "Traceback" not in out.stderr


@pytest.mark.parametrize(
    "spec,message",
    [
        ("missing.py", "lossdoctor: missing.py: no such file"),
        ("setup.py:nothing", "lossdoctor: setup.py: defines no function nothing() returning the objects to check"),
        ("setup.py:not_a_dict", "lossdoctor: setup.py: not_a_dict() must return a dict of check arguments"),
        ("setup.py:typo", "lossdoctor: setup.py: typo() returned unknown argument(s) totl_steps"),
    ],
)
def test_bad_config_is_exit_2(tmp_path, monkeypatch, capsys, spec, message):
    _write(tmp_path)
    monkeypatch.chdir(tmp_path)
    assert main(["check", "--config", spec]) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    assert captured.err.splitlines()[-1].startswith(message)


def test_preflight_findings_fold_into_the_detectors_findings():
    series = Finding(
        cause="loss_scale_collapse",
        symptom="skipped_steps",
        severity="warning",
        confidence=0.7,
        step=12,
        evidence=["the scale fell from 2^60 to 2^20"],
        fixes=["fix A"],
    )
    pre = [
        Finding(
            cause="loss_scale_collapse",
            symptom="skipped_steps",
            severity="critical",
            confidence=0.9,
            evidence=["GradScaler backoff_factor=1.0"],
            fixes=["fix B"],
        ).to_dict(),
        Finding(
            cause="bad_init",
            symptom="slow_convergence",
            severity="warning",
            confidence=0.8,
            layer="h.0",
            evidence=["gain 8"],
        ).to_dict(),
        {"cause": "not_a_cause", "symptom": "stall", "severity": "info", "confidence": 1},
    ]
    notes: list[str] = []
    out = merge_findings([series], pre, rank=0, notes=notes)
    assert [f.cause for f in out] == ["loss_scale_collapse", "bad_init"]
    merged = out[0]
    assert merged is series and merged.step == 12
    assert merged.severity == "critical"  # the more severe one leads
    assert merged.evidence == ["GradScaler backoff_factor=1.0", "the scale fell from 2^60 to 2^20"]
    assert merged.fixes == ["fix B", "fix A"]
    assert out[1].rank == 0 and out[1].layer == "h.0"
    assert len(notes) == 1 and "unreadable" in notes[0]
