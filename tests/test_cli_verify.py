"""`lossdoctor verify RUN_DIR` on real run directories: each incident's fixes with their verdicts,
numbers and cost, in text, Markdown and JSON, English and Chinese; exit codes; bad input is one
line on stderr and exit 2, never a traceback."""

from __future__ import annotations

import json

import pytest
import torch

import lossdoctor
from conftest import run_cli
from latin_check import document_english
from test_triage_verify import _nan_data_run
from triage_models import MLP, mse_loss, regression_batches, train


@pytest.fixture(scope="module")
def nan_dir(tmp_path_factory):
    torch.manual_seed(0)
    d = tmp_path_factory.mktemp("nan_data")
    _nan_data_run(d).close()
    return d


def _explosion(d, **kw):
    torch.manual_seed(0)
    model = MLP()
    opt = torch.optim.SGD(model.parameters(), lr=0.05)
    batches = regression_batches(30)
    x, y = batches[14]
    batches[14] = (x * 300.0, y * 300.0)
    mon = lossdoctor.watch(model, opt, log_dir=d, alerts=False, snapshot_every=5, **kw)
    train(model, opt, batches, mse_loss, mon)
    mon.close()
    return d


@pytest.fixture(scope="module")
def diverged_dir(tmp_path_factory):
    """replay_fn is not the loop's loss: verification runs and gives no verdict."""
    return _explosion(tmp_path_factory.mktemp("diverged"), replay_fn=lambda m, b: 1.5 * mse_loss(m, b))


def _one_line_error(p, *words):
    assert p.returncode == 2, (p.stdout, p.stderr)
    lines = p.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("lossdoctor: "), p.stderr
    assert "Traceback" not in p.stderr and "internal error" not in p.stderr and p.stdout == ""
    assert all(w in lines[0] for w in words), lines[0]


def test_json_lists_each_incidents_fixes_with_verdicts_numbers_and_cost(nan_dir):
    p = run_cli("verify", nan_dir, "--format", "json")
    assert p.returncode == 0, p.stderr
    d = json.loads(p.stdout)
    [inc] = d["incidents"]
    assert inc["step"] == 14 and inc["status"] == "checked" and inc["verified"] is True
    record = json.loads((nan_dir / "incidents" / "step-00000014.json").read_text())
    assert inc["from_step"] == record["verification"]["from_step"]
    assert inc["cost"] == record["verification"]["cost"] and inc["cost"]["steps_replayed"] > 0
    assert inc["summary"].startswith("fixes replayed from step 10 to 34: 1 verified")
    assert inc["summary_data"]["key"] == "report.verification.summary"
    drop = next(f for f in inc["fixes"] if f["cause"] == "nonfinite_data")
    assert drop["verdict"] == "verified" and drop["kind"] == "drop_samples" and drop["samples"] == [3]
    assert drop["fix_text"].startswith("drop or repair those samples") and drop["steps_after"] == 20
    assert drop["sentence"].startswith("verified: with sample(s) 3 dropped from the batch of step 14")
    assert drop["sentence_data"]["key"] == "verify.verified" and drop["loss_after"] < drop["loss_before"]


def test_text_and_markdown_in_english_and_chinese(nan_dir):
    en = run_cli("verify", nan_dir, "--lang", "en")
    assert en.returncode == 0, en.stderr
    lines = en.stdout.splitlines()
    i = next(k for k, s in enumerate(lines) if s.startswith("- nonfinite_data: drop or repair those samples"))
    assert lines[i + 1].startswith(
        "  - ✅ verified: with sample(s) 3 dropped from the batch of step 14 the replay passes step 14 and the loss is"
    )
    assert any(s.startswith("incident at step 14 (nonfinite_loss)") for s in lines)
    assert any(
        s.startswith("- fixes replayed from step 10 to 34: 1 verified") and "replayed steps (budget 400)" in s
        for s in lines
    ), en.stdout
    zh = run_cli("verify", nan_dir, "--lang", "zh", "--format", "markdown")
    assert zh.returncode == 0, zh.stderr
    assert "### 第 14 步的事故" in zh.stdout and "✅ 已验证：采用「从第 14 步的 batch 中去掉样本 3」" in zh.stdout
    assert "开销：" in zh.stdout and "重放" in zh.stdout
    assert document_english(zh.stdout.replace(str(nan_dir), "")) == [], zh.stdout


def test_fail_on_unverified_and_a_run_without_a_verdict(nan_dir, diverged_dir, tmp_path):
    assert run_cli("verify", nan_dir, "--fail-on", "unverified").returncode == 0
    p = run_cli("verify", diverged_dir, "--fail-on", "unverified")
    assert p.returncode == 1, p.stderr
    assert "no fix was checked" in p.stdout and "no verdict: the replay diverges from the log at step" in p.stdout
    assert run_cli("verify", diverged_dir).returncode == 0  # shown, and no --fail-on
    out = tmp_path / "v.json"
    p = run_cli("verify", diverged_dir, "--format", "json", "-o", out)
    assert p.returncode == 0 and p.stdout == ""
    [inc] = json.loads(out.read_text())["incidents"]
    assert inc["status"] == "diverged" and inc["fixes"] == [] and inc["verified"] is False
    assert inc["note_data"]["key"] == "verify.diverged"


def test_bad_input_is_one_line_and_exit_2(tmp_path):
    _one_line_error(run_cli("verify", tmp_path / "missing"), "no such directory")
    _one_line_error(run_cli("verify", tmp_path), "not a lossdoctor run directory")
    f = tmp_path / "file.txt"
    f.write_text("x")
    _one_line_error(run_cli("verify", f), "no such directory")


def test_a_run_directory_without_incidents_exits_0_and_without_verification_2(tmp_path):
    torch.manual_seed(0)
    model = MLP()
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    with lossdoctor.watch(model, opt, log_dir=tmp_path / "healthy", alerts=False) as mon:
        train(model, opt, regression_batches(12), mse_loss, mon)
    ok = run_cli("verify", tmp_path / "healthy")  # nothing to verify is an answer: exit 0, said so
    assert ok.returncode == 0 and ok.stderr == "", ok.stderr
    assert "no incidents" in ok.stdout and "no fix to verify" in ok.stdout
    off = _explosion(tmp_path / "off", replay_fn=mse_loss, verify=False)
    _one_line_error(run_cli("verify", off), "holds a verification", "mon.verify_fixes()")
    zh = run_cli("verify", off, "--lang", "zh")
    _one_line_error(zh, "没有验证结果")


def test_damaged_records_never_show_a_traceback(nan_dir, tmp_path):
    import shutil

    d = tmp_path / "run"
    shutil.copytree(nan_dir, d)
    rec = d / "incidents" / "step-00000014.json"
    data = json.loads(rec.read_text())
    data["findings"] = 5
    data["verification"]["checks"] = "x"
    data["verification"]["findings"] = [{"cause": "no_such_cause"}]
    data["verification"]["cost"] = [1]
    (d / "incidents" / "step-00000020.json").write_text("{not json")
    rec.write_text(json.dumps(data))
    p = run_cli("verify", d, "--format", "json")
    assert p.returncode == 0, p.stderr
    [inc] = json.loads(p.stdout)["incidents"]
    assert inc["fixes"] == [] and inc["cost"] is None
    rec.write_text(json.dumps({"step": 14, "verification": "yes"}))
    _one_line_error(run_cli("verify", d), "holds a verification")


def test_the_help_says_what_re_running_needs():
    p = run_cli("verify", "--help")
    assert p.returncode == 0
    text = " ".join(p.stdout.split())
    assert "snapshots and the recorded batches" in text and "mon.verify_fixes()" in text


def test_verify_never_imports_torch(nan_dir):
    import subprocess
    import sys

    from conftest import cli_env

    code = (
        "import contextlib, io, sys\nfrom lossdoctor.cli.main import main\n"
        "with contextlib.redirect_stdout(io.StringIO()):\n"
        f"    rc = main(['verify', {str(nan_dir)!r}, '--format', 'md'])\n"
        "print(rc, 'torch' in sys.modules)"
    )
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=cli_env(), timeout=120)
    assert p.stdout.split() == ["0", "False"], p.stdout + p.stderr
