#!/usr/bin/env python3
"""A 1,000,000-step scalar log diagnosed end to end by the CLI; target: under 5 s.

Writes the same healthy-then-exploding curve (loss, grad_norm, lr, loss_scale) as CSV and as
JSONL, runs `lossdoctor diagnose FILE --format json` in a fresh process for each (median of
--repeat runs, so import time counts as it does for a user), and prints a per-phase breakdown
measured in-process (read, detect, render) so a slow phase can be named.

    python benchmarks/diagnose_1m.py [--steps 1000000] [--repeat 3] [--html]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
SRC = ROOT / "src"


def curve(n: int, seed: int = 0) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    s = np.arange(n)
    loss = 2.2 * np.exp(-s / (n / 3)) + 1.1 + 0.04 * rng.standard_normal(n)
    gn = 0.8 + 0.1 * np.abs(rng.standard_normal(n))
    onset = int(n * 0.9)
    gn[onset:] *= 1.5 ** np.minimum(s[onset:] - onset, 60)
    loss[onset + 40 :] = np.nan
    gn[onset + 40 :] = np.nan
    lr = np.full(n, 3e-4)
    scale = np.full(n, 65536.0)
    return {"step": s, "loss": loss, "grad_norm": gn, "lr": lr, "loss_scale": scale}


def write_csv(path: Path, c: dict[str, np.ndarray]) -> None:
    keys = list(c)
    table = np.column_stack([c[k] for k in keys])
    np.savetxt(path, table, delimiter=",", header=",".join(keys), comments="", fmt=["%d"] + ["%.6g"] * (len(keys) - 1))


def write_jsonl(path: Path, c: dict[str, np.ndarray]) -> None:
    keys = list(c)
    with open(path, "w") as f:
        cols = [c[k].tolist() for k in keys]
        for row in zip(*cols):
            f.write(json.dumps(dict(zip(keys, row))) + "\n")  # NaN literals, as Python loggers write


def write_console(path: Path, c: dict[str, np.ndarray]) -> None:
    """nanoGPT's console line (`print(f"iter {iter_num}: loss {lossf:.4f}, time {dt*1000:.2f}ms, mfu
    {running_mfu*100:.2f}%")`, train.py), one per step: what the console reader reads today."""
    with open(path, "w") as f:
        for s, loss in zip(c["step"].tolist(), c["loss"].tolist()):
            f.write(f"iter {s}: loss {loss:.4f}, time 120.50ms, mfu 38.12%\n")


def write_meter(path: Path, c: dict[str, np.ndarray]) -> None:
    """The ImageNet example's AverageMeter line (pytorch/examples imagenet/main.py, ProgressMeter),
    one per step: no named reader matches it, the general reader reads it."""
    per_epoch = 5005
    with open(path, "w") as f:
        for s, loss in zip(c["step"].tolist(), c["loss"].tolist()):
            e, b = divmod(s, per_epoch)
            f.write(
                f"Epoch: [{e}][{b:4d}/{per_epoch}]\tTime  0.257 ( 0.560)\tData  0.001 ( 0.284)\t"
                f"Loss {loss:.4e} ({loss:.4e})\tAcc@1   0.00 (  0.14)\tAcc@5   0.78 (  0.62)\n"
            )


def time_cli(path: Path, repeat: int, fmt: str) -> tuple[float, dict]:
    env = dict(os.environ, PYTHONPATH=str(SRC))
    times = []
    doc: dict = {}
    for _ in range(repeat):
        t = time.perf_counter()
        p = subprocess.run(
            [sys.executable, "-m", "lossdoctor", "diagnose", str(path), "--format", fmt],
            capture_output=True,
            text=True,
            env=env,
        )
        times.append(time.perf_counter() - t)
        if p.returncode != 0:
            raise SystemExit(f"CLI failed: {p.stderr}")
        if fmt == "json":
            doc = json.loads(p.stdout)
    return statistics.median(times), doc


def phases(path: Path) -> dict[str, float]:
    sys.path.insert(0, str(SRC))
    from lossdoctor.detectors.engine import diagnose_runs
    from lossdoctor.report import render
    from lossdoctor.sources import load_path

    out = {}
    t = time.perf_counter()
    runs = load_path(path)
    out["read"] = time.perf_counter() - t
    t = time.perf_counter()
    report = diagnose_runs(runs)
    out["detect"] = time.perf_counter() - t
    t = time.perf_counter()
    render(report, "json")
    out["render json"] = time.perf_counter() - t
    t = time.perf_counter()
    render(report, "html", runs=runs)
    out["render html"] = time.perf_counter() - t
    return out


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--steps", type=int, default=1_000_000)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument(
        "--console",
        action="store_true",
        help="also a console log (nanoGPT lines) and a meter log (ImageNet example lines)",
    )
    ap.add_argument("--only-console", action="store_true", help="only the console and meter logs")
    ap.add_argument("--profile", action="store_true", help="cProfile the detect phase (top 15)")
    args = ap.parse_args()
    c = curve(args.steps)
    with tempfile.TemporaryDirectory() as d:
        files: dict[str, Path] = {}
        if not args.only_console:
            files = {"csv": Path(d) / "log.csv", "jsonl": Path(d) / "log.jsonl"}
            write_csv(files["csv"], c)
            write_jsonl(files["jsonl"], c)
        if args.console or args.only_console:
            files["console"], files["meter"] = Path(d) / "train.log", Path(d) / "meter.log"
            write_console(files["console"], c)
            write_meter(files["meter"], c)
        print(f"{args.steps:,} steps; " + ", ".join(f"{k} {p.stat().st_size / 1e6:.0f} MB" for k, p in files.items()))
        worst = 0.0
        for kind, path in files.items():
            t, doc = time_cli(path, args.repeat, "json")
            worst = max(worst, t)
            first = doc["findings"][0] if doc["findings"] else {}
            print(
                f"{kind:7s} CLI end to end (median of {args.repeat}): {t:.2f} s -> "
                f"{first.get('cause')} at step {first.get('step')}"
            )
            ph = phases(path)
            print("      in-process: " + ", ".join(f"{k} {v:.2f} s" for k, v in ph.items()))
        if args.profile:
            import cProfile
            import pstats

            from lossdoctor.detectors.engine import diagnose_runs
            from lossdoctor.sources import load_path

            runs = load_path(next(iter(files.values())))
            prof = cProfile.Profile()
            prof.enable()
            diagnose_runs(runs)
            prof.disable()
            pstats.Stats(prof).sort_stats("cumulative").print_stats(15)
    target = 15 if (args.console or args.only_console) else 5  # console text: ~10 s today
    print(f"worst end-to-end: {worst:.2f} s (target < {target} s): {'OK' if worst < target else 'TOO SLOW'}")
    return 0 if worst < target else 1


if __name__ == "__main__":
    sys.exit(main())
