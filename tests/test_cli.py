"""The command line contract: exit codes, one-line errors, JSON output, a torch-free offline path."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from conftest import cli_env, run_cli
from lossdoctor.demo.scenarios import run_scenario


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    root = tmp_path_factory.mktemp("runs")
    return {name: run_scenario(name, root / name) for name in ("healthy-classifier", "nan-data", "warmup-per-epoch")}


def _one_line_error(p: subprocess.CompletedProcess) -> None:
    assert p.returncode == 2, (p.returncode, p.stdout, p.stderr)
    lines = [x for x in p.stderr.splitlines() if x.strip()]
    assert len(lines) == 1, p.stderr
    assert "Traceback" not in p.stderr


def test_missing_path(tmp_path):
    _one_line_error(run_cli("diagnose", tmp_path / "nope"))


def test_empty_dir(tmp_path):
    _one_line_error(run_cli("diagnose", tmp_path))


def test_empty_and_corrupt_run_dir(tmp_path):
    (tmp_path / "steps.jsonl").write_bytes(b"")
    _one_line_error(run_cli("diagnose", tmp_path))
    (tmp_path / "steps.jsonl").write_bytes(b'\x00\xff\x13garbage\n{"step": \n')
    _one_line_error(run_cli("diagnose", tmp_path))


def test_usage_errors():
    _one_line_error(run_cli("diagnose"))
    _one_line_error(run_cli("diagnose", ".", "--format", "pdf"))
    _one_line_error(run_cli("frobnicate"))


def test_json_output_and_exit_codes(runs, tmp_path):
    p = run_cli("diagnose", runs["nan-data"], "--format", "json")
    assert p.returncode == 0, p.stderr
    doc = json.loads(p.stdout)
    assert doc["schema"] == "lossdoctor.report/1" and doc["status"] == "critical"
    assert doc["findings"][0]["cause"] == "nonfinite_data" and doc["findings"][0]["samples"] == [5]
    assert run_cli("diagnose", runs["nan-data"], "--fail-on", "critical").returncode == 1
    assert run_cli("diagnose", runs["warmup-per-epoch"], "--fail-on", "critical").returncode == 0
    assert run_cli("diagnose", runs["warmup-per-epoch"], "--fail-on", "warning").returncode == 1
    assert run_cli("diagnose", runs["healthy-classifier"], "--fail-on", "warning").returncode == 0
    out = tmp_path / "r.json"
    assert run_cli("diagnose", runs["nan-data"], "--format", "json", "-o", out).returncode == 0
    assert json.loads(out.read_text()) == doc


def test_text_report_is_plain_when_piped(runs):
    p = run_cli("diagnose", runs["nan-data"])
    assert p.returncode == 0
    assert "nonfinite_data" in p.stdout and "\x1b[" not in p.stdout


def test_offline_path_never_imports_torch(runs):
    code = (
        "import sys; from lossdoctor.cli.main import main; "
        f"rc = main(['diagnose', {str(runs['nan-data'])!r}, '--format', 'json']); "
        "assert 'torch' not in sys.modules, 'torch imported'; sys.exit(rc)"
    )
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=cli_env())
    assert p.returncode == 0, p.stderr
    p = subprocess.run(
        [sys.executable, "-c", "import sys, lossdoctor; assert 'torch' not in sys.modules"],
        capture_output=True,
        text=True,
        env=cli_env(),
    )
    assert p.returncode == 0, p.stderr


def test_demo_lists_and_runs(tmp_path):
    p = run_cli("demo", "--fault", "list")
    assert p.returncode == 0 and "attention-padding" in p.stdout and "(default)" in p.stdout
    _one_line_error(run_cli("demo", "--fault", "nope"))
    p = run_cli("demo", "--log-dir", tmp_path / "demo", "--format", "json", timeout=120)
    assert p.returncode == 0, p.stderr
    doc = json.loads(p.stdout)
    assert doc["findings"][0]["cause"] == "attention_overflow"
    again = run_cli("diagnose", tmp_path / "demo", "--format", "json")
    assert json.loads(again.stdout) == doc
