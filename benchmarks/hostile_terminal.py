"""The terminal and odd names, counted: `python benchmarks/hostile_terminal.py [--src SRC]`.

Runs `python -m lossdoctor` of the checkout whose `src/` is SRC (default: this one) on
- five hostile logs (console, CSV, TensorBoard by SummaryWriter, trainer_state.json by TrainerState,
  a run directory by RunLogWriter) holding OSC 0/8, CSI 2J, BEL, BS, CR, DEL, U+009B and U+202E in
  their names, values and file names: `diagnose` on a real pty (the colour report) and in md/html,
  and `verify` on a pty; it counts the raw control characters, OSC sequences and clear-screens that
  reach the terminal or the document (SGR colour codes are the report's own and not counted);
- a CSV log and a run directory named b"...\\xff\\xfe": diagnose (4 formats) and verify (3), to
  stdout and to `-o` files so named, under three locales (72 runs): how many end in a traceback or
  an internal error;
- JSON nested 1,000 deep in an incident record's verification and a finding's `fix_checks`
  (run directory, preflight.jsonl): diagnose and verify `--format json`: how many end in an
  internal error.

To measure an older commit: `git archive COMMIT src | tar -x -C /tmp/old` and `--src /tmp/old/src`.
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import re
import select
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np

SRC = Path(__file__).resolve().parents[1] / "src"
PAYLOAD = "\x1b]0;pwned\x07\x1b]8;;http://evil.example/\x07link\x1b]8;;\x07\x1b[2J\x07\x08\r\x7f\u009b2J\u202e"
NAME = PAYLOAD.replace("/", "_")
UNSAFE = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u061c\u200e\u200f\u2028\u2029\u202a-\u202e\u2066-\u2069]")
SGR = re.compile(r"\x1b\[[0-9;]*m")


def _curve(n: int = 60):
    s = np.arange(n)
    return s, 2.2 * np.exp(-s / 30) + 1.1, np.full(n, 3e-4)


def build(d: Path) -> dict[str, Path]:
    """The hostile logs, written by the real writers (this checkout's run-directory writer)."""
    from torch.utils.tensorboard import SummaryWriter
    from transformers import TrainerState

    from lossdoctor.live.runlog import RunLogWriter

    s, loss, lr = _curve()
    out = {}
    lines = [f"{PAYLOAD} starting"]
    for i in s:
        lines += [str({"loss": round(float(loss[i]), 4), "learning_rate": float(lr[i]), "epoch": i / 60}), PAYLOAD]
    out["console"] = d / f"console{NAME}.log"
    out["console"].write_text("\n".join(lines) + "\n")
    out["csv"] = d / f"train{NAME}.csv"
    with open(out["csv"], "w", newline="") as f:
        w = csv.writer(f)
        text = PAYLOAD.replace("\r", "").replace(";", "")
        w.writerow(["step", "loss", "lr", text])
        w.writerows([i, loss[i], lr[i], text] for i in s)
    out["tensorboard"] = d / f"tb{NAME}"
    sw = SummaryWriter(str(out["tensorboard"]))
    for i in s:
        sw.add_scalar("train/loss", float(loss[i]), int(i))
        sw.add_scalar(f"train/{PAYLOAD}", 1.0, int(i))
    sw.close()
    st = TrainerState()
    st.log_history = [
        {"step": int(i) + 1, "loss": float(loss[i]), "learning_rate": float(lr[i]), PAYLOAD: 1} for i in s
    ]
    (d / f"hf{NAME}").mkdir()
    out["trainer_state"] = d / f"hf{NAME}" / "trainer_state.json"
    st.save_to_json(str(out["trainer_state"]))
    out["run_dir"] = d / f"run{NAME}"
    w = RunLogWriter(out["run_dir"])
    w.write_meta({"rank": 0, "monitor_notes": [PAYLOAD]})
    w.start_layers([f"h.0.{PAYLOAD}"], ["act_absmax"])
    for i in s:
        w.append_step({"step": int(i), "loss": float(loss[i]), "lr": float(lr[i])})
        w.append_layers(int(i), np.ones((1, 1)))
    w.append_preflight(
        {
            "cause": "lr_too_high",
            "symptom": "divergence",
            "severity": "warning",
            "confidence": 0.9,
            "layer": PAYLOAD,
            "op": PAYLOAD,
            "evidence": [PAYLOAD],
            "fixes": [PAYLOAD],
        }
    )
    w.write_incident(
        "step-5",
        {
            "step": 5,
            "trigger": PAYLOAD,
            "findings": [],
            "verification": {
                "status": PAYLOAD,
                "note": PAYLOAD,
                "checks": [{"fix": None, "verdict": "verified", "sentence": PAYLOAD}],
            },
        },
    )
    w.close()
    return out


def env(src: Path, **extra: str) -> dict[str, str]:
    e = {k: v for k, v in os.environ.items() if k not in ("NO_COLOR", "LC_ALL", "PYTHONIOENCODING")}
    return {**e, "PYTHONPATH": str(src), "TERM": "xterm-256color", "LANG": "C.UTF-8", **extra}


def on_pty(src: Path, *args) -> str:
    master, slave = os.openpty()
    p = subprocess.Popen(
        [sys.executable, "-m", "lossdoctor", *args], stdin=slave, stdout=slave, stderr=slave, env=env(src)
    )
    os.close(slave)
    out = bytearray()
    while select.select([master], [], [], 120)[0]:
        try:
            chunk = os.read(master, 1 << 16)
        except OSError:
            break
        if not chunk:
            break
        out += chunk
    os.close(master)
    p.wait()
    return out.decode("utf-8", "replace").replace("\r\n", "\n")


def counts(text: str) -> tuple[int, int, int]:
    """(raw control characters, OSC sequences, clear-screens) once SGR colour codes are set aside."""
    plain = SGR.sub("", text)
    return len(UNSAFE.findall(plain)), plain.count("\x1b]"), plain.count("\x1b[2J") + plain.count("\x9b2J")


def terminal(src: Path, logs: dict[str, Path]) -> None:
    total = [0, 0, 0]
    for kind, path in logs.items():
        runs = [("pty text", on_pty(src, "diagnose", path))]
        for fmt in ("md", "html"):
            p = subprocess.run(
                [sys.executable, "-m", "lossdoctor", "diagnose", path, "--format", fmt],
                capture_output=True,
                text=True,
                env=env(src),
            )
            runs.append((fmt, p.stdout + p.stderr))
        if kind == "run_dir":
            runs.append(("pty verify", on_pty(src, "verify", path)))
        for what, text in runs:
            c = counts(text)
            total = [a + b for a, b in zip(total, c)]
            print(f"  {kind:14s} {what:10s} raw control characters {c[0]:4d}, OSC {c[1]:3d}, clear-screens {c[2]:3d}")
    print(f"  total: raw control characters {total[0]}, OSC sequences {total[1]}, clear-screens {total[2]}")


def names(src: Path, d: Path) -> None:
    from lossdoctor.live.runlog import RunLogWriter

    b = os.fsencode(d)
    s, loss, lr = _curve()
    log = os.path.join(b, b"run\xff\xfe.csv")
    with open(log, "w", newline="") as f:
        csv.writer(f).writerows([["step", "loss", "lr"]] + [[i, loss[i], lr[i]] for i in s])
    rd = os.path.join(b, b"rd\xff\xfe")
    w = RunLogWriter(os.fsdecode(rd))
    for i in s:
        w.append_step({"step": int(i), "loss": float(loss[i])})
    w.write_incident(
        "step-5",
        {
            "step": 5,
            "findings": [],
            "verification": {"status": "done", "checks": [{"fix": None, "verdict": "verified"}]},
        },
    )
    w.close()
    locales = {
        "C.UTF-8": {},
        "C.UTF-8 + PYTHONIOENCODING=utf-8:strict": {"LC_ALL": "C.UTF-8", "PYTHONIOENCODING": "utf-8:strict"},
        "C": {"LC_ALL": "C"},
    }
    bad = n = 0
    for extra in locales.values():
        for cmd, path, fmts in (
            ("diagnose", log, ("text", "json", "md", "html")),
            ("diagnose", rd, ("text", "json", "md", "html")),
            ("verify", rd, ("text", "json", "md")),
        ):
            for fmt in fmts:
                for o in ([], ["-o", os.path.join(b, b"out\xff\xfe." + fmt.encode())]):
                    p = subprocess.run(
                        [sys.executable, "-m", "lossdoctor", cmd, path, "--format", fmt, *o],
                        capture_output=True,
                        env=env(src, **extra),
                    )
                    n += 1
                    bad += p.returncode != 0 or b"internal error" in p.stderr or b"Traceback" in p.stderr
    print(f"  {bad} of {n} runs ended in an internal error or a traceback")


def deep(src: Path, d: Path) -> None:
    from lossdoctor.live.runlog import RunLogWriter

    nest = "[" * 1000 + "]" * 1000
    rd = d / "deep"
    w = RunLogWriter(rd)
    for i in range(60):
        w.append_step({"step": i, "loss": 2.0 - i / 100})
    w.close()
    (rd / "incidents").mkdir()
    (rd / "incidents" / "step-5.json").write_text(
        '{"step": 5, "findings": [], "verification": {"status": "done", "cost": '
        + nest
        + ', "checks": [{"fix": null, "verdict": "verified", "v": '
        + nest
        + "}]}}"
    )
    (rd / "preflight.jsonl").write_text(
        json.dumps(
            {
                "cause": "lr_too_high",
                "symptom": "divergence",
                "severity": "warning",
                "confidence": 0.5,
                "evidence": ["e"],
                "fixes": ["f"],
            }
        )[:-1]
        + ', "fix_checks": [{"fix": 0, "x": '
        + nest
        + "}]}\n"
    )
    bad = 0
    for cmd in ("diagnose", "verify"):
        p = subprocess.run(
            [sys.executable, "-m", "lossdoctor", cmd, rd, "--format", "json"],
            capture_output=True,
            text=True,
            env=env(src),
        )
        bad += "internal error" in p.stderr or "Traceback" in p.stderr
    print(f"  {bad} of 2 runs (diagnose and verify --format json) ended in an internal error")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--src", type=Path, default=SRC, help="the src/ folder of the checkout to measure")
    src = ap.parse_args().src.resolve()
    sys.path.insert(0, str(SRC))  # the writers of the inputs are this checkout's
    with tempfile.TemporaryDirectory() as tmp:
        d = Path(tmp)
        print(f"lossdoctor from {src}")
        print("control characters from logs:")
        terminal(src, build(d))
        print("file names that are not UTF-8:")
        names(src, d)
        print("JSON nested 1,000 deep:")
        deep(src, d)


if __name__ == "__main__":
    main()
