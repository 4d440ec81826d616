"""`lossdoctor run` when nothing in the process can be hooked: the command's console is the evidence.

The commands here are real subprocesses that never import torch (what a JAX script or a compiled
trainer looks like to the hooks). Their output must reach the terminal unchanged, be copied to
`console.log`, and be diagnosed from there, live and at the end."""

from __future__ import annotations

import os
import pty
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path

import pytest

from conftest import cli_env, run_cli
from lossdoctor.cli.console_tee import CONSOLE_FILE, Tee
from lossdoctor.cli.console_watch import ConsoleWatch, LiveConsoleLimits, console_runs, recorded_steps
from lossdoctor.detectors.engine import diagnose_runs

NO_TORCH_TRAINER = textwrap.dedent("""
    import sys, time
    print("stdout is a terminal:", sys.stdout.isatty(), flush=True)
    loss, nan_at = 2.3, int(sys.argv[1])
    pause = float(sys.argv[2]) if len(sys.argv) > 2 else 0.0
    for step in range(1, 61):
        loss = loss * 0.97 if step < nan_at else float("nan")
        print(f"step {step} | loss {loss:.4f} | lr 3.0e-04", flush=True)
        time.sleep(pause)
    print("finished", file=sys.stderr, flush=True)
    sys.exit(3)
""")


def script(tmp_path: Path) -> Path:
    p = tmp_path / "train_no_torch.py"
    p.write_text(NO_TORCH_TRAINER)
    return p


def test_unhooked_command_is_diagnosed_from_its_console(tmp_path):
    p = run_cli(
        "run", "--log-dir", "runs/c", "--", sys.executable, str(script(tmp_path)), "40", cwd=tmp_path, timeout=120
    )
    assert p.returncode == 3, p.stderr  # the script's own exit code
    lines = p.stdout.splitlines()
    assert lines[0] == "stdout is a terminal: False" and lines[-1] == "step 60 | loss nan | lr 3.0e-04"
    assert len(lines) == 61  # every line passed through once
    assert "finished" in p.stderr  # the script's stderr too
    log_dir = tmp_path / "runs" / "c"
    assert not recorded_steps(log_dir)
    copy = (log_dir / CONSOLE_FILE).read_text()
    assert copy.count("| loss ") == 60 and "finished" in copy
    runs = console_runs(log_dir)
    assert runs and runs[0].notes[0].key == "cli.run.from_console"
    top = diagnose_runs(runs).findings[0]
    assert (top.symptom, top.severity, top.step) == ("nonfinite", "critical", 40)
    assert top.cause in p.stderr and str(log_dir.relative_to(tmp_path) / CONSOLE_FILE) in p.stderr


def test_a_command_that_prints_no_numbers_says_nothing_was_recorded(tmp_path):
    p = run_cli("run", "--log-dir", "runs/e", "--", sys.executable, "-c", "print('hello')", cwd=tmp_path)
    assert p.returncode == 0 and p.stdout == "hello\n"
    assert console_runs(tmp_path / "runs" / "e") is None
    assert "console.log" in p.stderr and "Traceback" not in p.stderr


def test_a_terminal_stays_a_terminal_for_the_command(tmp_path):
    """Run under a pseudo-terminal: the command sees a terminal (progress bars behave), and the
    bytes reach it and the copy without newline translation added on the way."""
    master, slave = pty.openpty()
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "lossdoctor",
            "run",
            "--no-alerts",
            "--log-dir",
            "runs/t",
            "--",
            sys.executable,
            str(script(tmp_path)),
            "100",
        ],
        cwd=tmp_path,
        env=cli_env(),
        stdout=slave,
        stderr=subprocess.PIPE,
    )
    os.close(slave)
    seen = bytearray()
    while True:
        try:
            chunk = os.read(master, 65536)
        except OSError:
            break
        if not chunk:
            break
        seen += chunk
    proc.communicate(timeout=120)
    os.close(master)
    assert proc.returncode == 3
    assert b"stdout is a terminal: True" in seen
    copy = (tmp_path / "runs" / "t" / CONSOLE_FILE).read_bytes()
    assert copy.startswith(b"stdout is a terminal: True\n") and b"\r\n" not in copy


def test_the_live_watch_alerts_once_while_the_command_runs(tmp_path, capsys):
    """A real child writes through the tee; the watch re-reads the copy every 0.2 s and prints the
    NaN's alert once, before the command has finished."""
    log_dir = tmp_path / "live"
    tee = Tee(log_dir / CONSOLE_FILE)
    tee.start()
    proc = subprocess.Popen(
        [sys.executable, str(script(tmp_path)), "20", "0.05"],
        stdout=tee.child_fds["stdout"],
        stderr=tee.child_fds["stderr"],
    )
    tee.after_spawn()
    watch = ConsoleWatch(log_dir, limits=LiveConsoleLimits(interval_s=0.2, min_bytes=1))
    alerted_while_running = False
    while proc.poll() is None:
        watch.poll()
        if "nonfinite" in capsys.readouterr().err:
            alerted_while_running = True
        time.sleep(0.05)
    tee.finish()
    watch.poll()
    assert alerted_while_running
    assert capsys.readouterr().err.count("nonfinite") == 0  # said once, not again


def test_the_watch_stands_down_once_the_hooks_record(tmp_path):
    log_dir = tmp_path / "hooked"
    log_dir.mkdir()
    (log_dir / CONSOLE_FILE).write_text("".join(f"step {i} | loss nan\n" for i in range(50)))
    (log_dir / "rank-0").mkdir()
    (log_dir / "rank-0" / "steps.jsonl").write_text('{"step": 0, "loss": 1.0}\n')
    watch = ConsoleWatch(log_dir, limits=LiveConsoleLimits(interval_s=0.0, min_bytes=1))
    watch.poll()
    assert watch._done and recorded_steps(log_dir)


def test_a_full_copy_stops_at_its_limit_and_the_output_still_flows(tmp_path, monkeypatch):
    import lossdoctor.cli.console_tee as tee_mod

    monkeypatch.setattr(tee_mod, "MAX_COPY_BYTES", 1000)
    tee = Tee(tmp_path / CONSOLE_FILE)
    tee.start()
    read_back = bytearray()
    r, w = os.pipe()
    # our side of the copy writes into a pipe read here, standing in for the terminal
    stand_in = os.fdopen(w, "wb")
    tee._parent_fds = [(tee._parent_fds[0][0], stand_in), tee._parent_fds[1]]
    reader = threading.Thread(target=lambda: [read_back.extend(c) for c in iter_read(r)])
    reader.start()
    proc = subprocess.Popen(
        [sys.executable, "-c", "print('x' * 99)\nfor i in range(50): print('y' * 99)"],
        stdout=tee.child_fds["stdout"],
        stderr=tee.child_fds["stderr"],
    )
    tee.after_spawn()
    proc.wait(timeout=60)
    tee.finish()
    stand_in.close()  # the terminal's stand-in: its reader sees the end
    reader.join(10)
    assert len(read_back) == 51 * 100  # all of it reached the terminal
    kept = (tmp_path / CONSOLE_FILE).read_bytes()
    assert kept.startswith(b"x" * 99) and b"size limit" in kept and len(kept) < 1200


def iter_read(fd: int):
    while chunk := os.read(fd, 65536):
        yield chunk
    os.close(fd)


@pytest.mark.slow
def test_live_alert_reaches_the_terminal_under_lossdoctor_run(tmp_path):
    """End to end at the real interval: the NaN at step 20 is announced while the script runs on
    for ~10 more seconds, then the final diagnosis follows."""
    p = run_cli(
        "run",
        "--log-dir",
        "runs/l",
        "--",
        sys.executable,
        str(script(tmp_path)),
        "20",
        "0.25",
        cwd=tmp_path,
        timeout=180,
    )
    assert p.returncode == 3
    alert = next(
        (i for i, line in enumerate(p.stderr.splitlines()) if line.startswith("lossdoctor: ") and "nonfinite" in line),
        None,
    )
    report = next(i for i, line in enumerate(p.stderr.splitlines()) if line.startswith("lossdoctor - "))
    assert alert is not None and alert < report, p.stderr
