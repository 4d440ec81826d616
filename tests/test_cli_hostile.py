"""`diagnose` against hostile and unlucky input: special files, numbers and nesting no parser
expects, records of the wrong type, giant lines, cut files, closed pipes, full disks, and text
meant to ping people when a report is pasted into GitHub. Each case ends in a report (exit 0) or
one line on stderr (exit 2): never a traceback, never a hang.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import numpy as np
import pytest

import logfaults
from conftest import cli_env, run_cli
from lossdoctor.cli.main import INTERNAL_ERROR, main
from lossdoctor.findings import Finding
from lossdoctor.live.runlog import RunLogWriter
from lossdoctor.report.markdown import md_escape
from lossdoctor.sources.rundir import INCIDENTS, META, PREFLIGHT, STEPS

#: a hang shows as a TimeoutExpired (the test fails) long before pytest's own timeout
HANG = 30


def one_line_error(p: subprocess.CompletedProcess) -> str:
    assert p.returncode == 2, (p.returncode, p.stdout[-500:], p.stderr[-2000:])
    lines = [x for x in p.stderr.splitlines() if x.strip()]
    assert len(lines) == 1 and "Traceback" not in p.stderr, p.stderr[-2000:]
    assert INTERNAL_ERROR not in lines[0], lines[0]  # a reader's own message, not the last defence's
    return lines[0]


def report_ok(p: subprocess.CompletedProcess) -> dict:
    assert p.returncode == 0, (p.returncode, p.stderr[-2000:])
    assert "Traceback" not in p.stderr and INTERNAL_ERROR not in p.stderr, p.stderr
    return json.loads(p.stdout)


def run_dir(path, n: int = 60) -> None:
    """A run directory as `watch` writes it (the real writer), healthy curve."""
    curve = logfaults.healthy(n)
    w = RunLogWriter(path)
    w.write_meta({"rank": 0, "task": "classification"})
    for i in range(n):
        w.append_step(
            {
                "step": int(curve["step"][i]),
                "loss": float(curve["loss"][i]),
                "grad_norm": float(curve["grad_norm"][i]),
                "lr": float(curve["lr"][i]),
            }
        )
    w.close()


def jsonl_lines(n: int = 60) -> list[str]:
    curve = logfaults.healthy(n)
    return [json.dumps({"step": int(curve["step"][i]), "loss": float(curve["loss"][i])}) for i in range(n)]


# --- special files: refused, never waited on ---------------------------------------------------


@pytest.mark.timeout(120)
def test_fifo_path_is_refused(tmp_path):
    fifo = tmp_path / "log.csv"
    os.mkfifo(fifo)
    assert "FIFO" in one_line_error(run_cli("diagnose", fifo, timeout=HANG))


@pytest.mark.timeout(120)
@pytest.mark.parametrize("name", [STEPS, META, PREFLIGHT, "findings.jsonl"])
def test_fifo_inside_a_run_dir_is_refused(tmp_path, name):
    run_dir(tmp_path)
    (tmp_path / name).unlink(missing_ok=True)
    os.mkfifo(tmp_path / name)
    line = one_line_error(run_cli("diagnose", tmp_path, timeout=HANG))
    assert name in line and "not a regular file" in line


@pytest.mark.timeout(120)
def test_incident_fifo_and_device_named_like_a_log(tmp_path):
    run_dir(tmp_path / "run")
    (tmp_path / "run" / INCIDENTS).mkdir()
    os.mkfifo(tmp_path / "run" / INCIDENTS / "step-5.json")
    assert "not a regular file" in one_line_error(run_cli("diagnose", tmp_path / "run", timeout=HANG))
    if os.path.exists("/dev/zero"):  # endless: read_bytes would fill the memory
        (tmp_path / "zero.csv").symlink_to("/dev/zero")
        assert "device" in one_line_error(run_cli("diagnose", tmp_path / "zero.csv", timeout=HANG))


# --- numbers, types and nesting no reader expected ---------------------------------------------

HUGE = "9" * 400


def test_huge_integer_loss_in_jsonl_reads_as_infinite(tmp_path):
    p = tmp_path / "log.jsonl"
    lines = jsonl_lines()
    lines[40] = f'{{"step": 40, "loss": {HUGE}}}'
    p.write_text("\n".join(lines) + "\n")
    doc = report_ok(run_cli("diagnose", p, "--format", "json", timeout=HANG))
    assert doc["status"] == "critical" and doc["findings"][0]["step"] == 40  # inf loss at step 40


def test_huge_integer_step_is_dropped(tmp_path):
    p = tmp_path / "log.jsonl"
    lines = jsonl_lines()
    lines[10] = f'{{"step": {HUGE}, "loss": 2.0}}'
    p.write_text("\n".join(lines) + "\n")
    assert report_ok(run_cli("diagnose", p, "--format", "json", timeout=HANG))["steps"] == 59


def test_huge_integer_in_trainer_state(tmp_path):
    history = [{"step": i + 1, "loss": 2.0 - 0.01 * i, "grad_norm": 1.0, "learning_rate": 1e-4} for i in range(40)]
    text = json.dumps({"global_step": 40, "logging_steps": 1, "log_history": history})
    text = text.replace('"loss": 1.8', f'"loss": {HUGE}', 1).replace('"logging_steps": 1', f'"logging_steps": {HUGE}')
    p = tmp_path / "trainer_state.json"
    p.write_text(text)
    doc = report_ok(run_cli("diagnose", p, "--format", "json", timeout=HANG))
    assert doc["steps"] == 40


@pytest.mark.parametrize(
    "fmt,key,value", [("html", "clip_grad", HUGE), ("json", "clip_grad", HUGE), ("json", "log_interval", "1e999")]
)
def test_huge_setting_in_a_megatron_log(tmp_path, fmt, key, value):
    """Found by the fuzz test: a 400-digit `clip_grad` reached the HTML chart's float(), an
    infinite `log_interval` the note's int()."""
    import re

    from test_sources_megatron import megatron_log

    text = re.sub(rf"({key} \.+ )\S+", lambda m: m.group(1) + value, megatron_log(logfaults.scale_collapse()))
    p = tmp_path / "train.log"
    p.write_text(text)
    proc = run_cli("diagnose", p, "--format", fmt, "-o", tmp_path / f"r.{fmt}", timeout=HANG)
    assert proc.returncode == 0 and not proc.stderr.strip(), proc.stderr
    if fmt == "json":
        doc = json.loads((tmp_path / "r.json").read_text())
        assert doc["findings"][0]["cause"] == "loss_scale_collapse"
        assert key == "log_interval" or any("beyond any float" in n for n in doc["notes"])


@pytest.mark.parametrize("name", ["log.jsonl", "log.json", "trainer_state.json"])
def test_deep_nesting_is_refused(tmp_path, name):
    p = tmp_path / name
    p.write_text('{"log_history": ' + "[" * 100_000 if name == "trainer_state.json" else "[" * 100_000)
    assert "nested" in one_line_error(run_cli("diagnose", p, timeout=HANG))


def test_deep_nesting_inside_one_jsonl_line_is_skipped(tmp_path):
    p = tmp_path / "log.jsonl"
    lines = jsonl_lines()
    lines[5] = '{"step": 5, "loss": ' + "[" * 5000 + "]" * 5000 + "}"
    lines[6] = '{"step": 6, "loss": ' + "[" * 100_000
    p.write_text("\n".join(lines) + "\n")
    p2 = run_cli("diagnose", p, "--format", "json", timeout=HANG)
    assert report_ok(p2)["steps"] == 58 and "skipped 2 line(s)" in p2.stderr


def test_meta_json_holding_a_list(tmp_path):
    run_dir(tmp_path)
    (tmp_path / META).write_text("[1, 2, 3]")
    doc = report_ok(run_cli("diagnose", tmp_path, "--format", "json", timeout=HANG))
    assert any("holds no JSON object" in n for n in doc["notes"])


@pytest.mark.parametrize(
    "record",
    [
        {"findings": 5},
        {"findings": [5, "x", None]},
        [1, 2],
        {"level": ["replay"], "findings": []},
        {
            "findings": [
                {
                    "cause": "lr_too_high",
                    "symptom": "divergence",
                    "severity": "critical",
                    "confidence": 0.9,
                    "step": {"a": 1},
                }
            ]
        },
    ],
)
def test_incident_record_of_the_wrong_shape(tmp_path, record):
    run_dir(tmp_path)
    RunLogWriter(tmp_path).write_incident("step-5", record) if isinstance(record, dict) else (
        (tmp_path / INCIDENTS).mkdir() or (tmp_path / INCIDENTS / "step-5.json").write_text(json.dumps(record))
    )
    doc = report_ok(run_cli("diagnose", tmp_path, "--format", "json", timeout=HANG))
    assert all(f["step"] is None or isinstance(f["step"], int) for f in doc["findings"])


def test_preflight_finding_with_a_string_step_never_reaches_the_report(tmp_path):
    run_dir(tmp_path)
    w = RunLogWriter(tmp_path)
    payload = "<img src=x onerror=alert(1)>"
    w.append_preflight(
        {
            "cause": "lr_too_high",
            "symptom": "divergence",
            "severity": "critical",
            "confidence": 0.9,
            "step": payload,
            "evidence": ["e"],
            "fixes": ["f"],
        }
    )
    w.close()
    p = run_cli("diagnose", tmp_path, "--format", "md", timeout=HANG)
    assert p.returncode == 0 and "Traceback" not in p.stderr, p.stderr
    assert "<img" not in p.stdout and "skipped an unreadable finding" in p.stdout


def test_finding_fields_are_type_checked():
    base = dict(cause="lr_too_high", symptom="divergence", severity="critical", confidence=0.9)
    assert Finding(**base, step=np.int64(7), samples=[np.int32(1)]).to_dict()["step"] == 7
    assert type(Finding(**base, step=12.0).step) is int
    for bad in (
        {"step": "<b>3</b>"},
        {"step": 1.5},
        {"step": True},
        {"step": float("inf")},
        {"step": 10**400},
        {"layer": 5},
        {"evidence": "not a list"},
        {"fixes": [1]},
        {"samples": "0,1"},
        {"confidence": "high"},
        {"rank": [0]},
    ):
        with pytest.raises(ValueError):
            Finding(**{**base, **bad})


# --- giant CSV lines and headers: bounded ---------------------------------------------------------


@pytest.mark.timeout(120)
def test_million_column_header_is_refused_fast(tmp_path):
    p = tmp_path / "wide.csv"
    p.write_text(",".join(f"c{i}" for i in range(1_000_000)) + "\n" + ",".join(["1"] * 1_000_000) + "\n")
    assert "a line of" in one_line_error(run_cli("diagnose", p, timeout=HANG))


@pytest.mark.timeout(120)
def test_single_line_of_12m_fields_is_refused_fast(tmp_path):
    p = tmp_path / "one.csv"
    p.write_bytes(b",".join([b"1.5"] * 12_500_000))
    assert "a line of" in one_line_error(run_cli("diagnose", p, timeout=HANG))


@pytest.mark.timeout(120)
def test_wide_table_reads_its_first_65536_columns(tmp_path):
    """A million one-letter columns (2 MB lines, under the line cap): the signals are read, the
    columns past the cap are ignored with a note; no name normalised a million times."""
    n = 1_000_000
    rows = ["step,loss," + ",".join(["x"] * n)]
    rows += [f"{s},{2.0 - 0.01 * s}," + ",".join(["1"] * n) for s in range(5)]
    p = tmp_path / "wide.csv"
    p.write_text("\n".join(rows) + "\n")
    doc = report_ok(run_cli("diagnose", p, "--format", "json", timeout=HANG))
    assert doc["steps"] == 5 and any("columns past the 65536th were ignored" in x for x in doc["notes"])


# --- a JSON array cut mid-way: read up to the damage -------------------------------------------


def test_json_array_cut_midway_is_read_up_to_the_damage(tmp_path):
    curve = logfaults.grad_explosion()
    rows = [
        {"step": int(s), "loss": float(v), "grad_norm": float(g)}
        for s, v, g in zip(curve["step"], curve["loss"], curve["grad_norm"])
    ]
    text = json.dumps(rows, indent=1)
    p = tmp_path / "metrics.json"
    p.write_text(text[: text.index('"step": 201,')])  # cut inside the entry of step 201
    proc = run_cli("diagnose", p, "--format", "json", timeout=HANG)
    doc = report_ok(proc)
    assert doc["steps"] == 201 and "warning" in proc.stderr and "truncated" in proc.stderr
    assert doc["findings"][0]["cause"] == "grad_explosion"


# --- the command line itself --------------------------------------------------------------------


def test_bare_command_says_what_to_type():
    line = one_line_error(run_cli(timeout=HANG))
    assert "diagnose" in line


def _healthy_csv(tmp_path):
    p = tmp_path / "log.csv"
    curve = logfaults.healthy()
    p.write_text("step,loss\n" + "".join(f"{int(s)},{float(v)!r}\n" for s, v in zip(curve["step"], curve["loss"])))
    return p


def test_closed_pipe_is_one_sensible_line(tmp_path):
    p = subprocess.Popen(
        [sys.executable, "-m", "lossdoctor", "diagnose", str(_healthy_csv(tmp_path))],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=cli_env(),
    )
    p.stdout.close()  # `| head -c0`: the reader is gone before the report is written
    err = p.stderr.read().decode()
    assert p.wait(timeout=HANG) == 2
    lines = err.strip().splitlines()
    assert len(lines) == 1 and "None" not in err and "pipe" in lines[0], err


@pytest.mark.skipif(not os.path.exists("/dev/full"), reason="no /dev/full on this system")
@pytest.mark.parametrize("to_stdout", [True, False])
def test_full_disk_is_one_sensible_line(tmp_path, to_stdout):
    log = _healthy_csv(tmp_path)
    if to_stdout:
        with open("/dev/full", "w") as full:
            p = subprocess.run(
                [sys.executable, "-m", "lossdoctor", "diagnose", str(log)],
                stdout=full,
                stderr=subprocess.PIPE,
                text=True,
                env=cli_env(),
                timeout=HANG,
            )
    else:
        p = run_cli("diagnose", log, "-o", "/dev/full", timeout=HANG)
    assert p.returncode == 2
    lines = p.stderr.strip().splitlines()
    assert len(lines) == 1 and "None" not in p.stderr and "No space left" in lines[0], p.stderr


def test_last_line_of_defence(tmp_path, monkeypatch, capsys):
    """An error no reader foresaw (injected here into the engine) is one line and exit 2;
    LOSSDOCTOR_DEBUG=1 adds the traceback."""
    import lossdoctor.detectors.engine as engine

    def broken(runs):
        raise RuntimeError("injected\nsecond line")

    monkeypatch.setattr(engine, "diagnose_runs", broken)
    monkeypatch.delenv("LOSSDOCTOR_DEBUG", raising=False)
    log = _healthy_csv(tmp_path)
    assert main(["diagnose", str(log)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith(INTERNAL_ERROR) and "RuntimeError: injected" in err
    monkeypatch.setenv("LOSSDOCTOR_DEBUG", "1")
    assert main(["diagnose", str(log)]) == 2
    err = capsys.readouterr().err
    assert "Traceback" in err and "broken" in err and err.rstrip().splitlines()[-1].startswith(INTERNAL_ERROR)


# --- Markdown pasted into GitHub: no pings, no links, no markup ---------------------------------


def test_md_escape_neutralises_mentions_and_references():
    out = md_escape("@octocat @org/team fixes #123 and GH-4, see a/b#5; C# and #define stay")
    for ref in ("@octocat", "@org", "#123", "GH-4", "#5"):
        assert ref not in out
    assert "@\u200doctocat" in out and "#\u200d123" in out and "C# and #define stay" in out


def test_md_report_from_a_wandb_export_pings_nobody(tmp_path):
    curve = logfaults.healthy()
    runs = ["@octocat fixes #42", "@hubot"]
    cols = ["Step"] + [f"{r} - train/loss" for r in runs]
    lines = [",".join(f'"{c}"' for c in cols)]
    lines += [f"{int(s)},{float(v)!r},{float(v)!r}" for s, v in zip(curve["step"], curve["loss"])]
    p = tmp_path / "wandb_export.csv"
    p.write_text("\n".join(lines) + "\n")
    proc = run_cli("diagnose", p, "--format", "md", timeout=HANG)
    assert proc.returncode == 0, proc.stderr
    assert "octocat" in proc.stdout  # the run is named...
    assert "@octocat" not in proc.stdout and "#42" not in proc.stdout and "@hubot" not in proc.stdout
