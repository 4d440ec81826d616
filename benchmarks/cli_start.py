"""Start-up time of the offline CLI: `lossdoctor diagnose --help` must not import torch.

Runs `python -m lossdoctor diagnose --help` and a bare `python -c pass` alternately (interleaved,
so machine load affects both alike) and prints medians. Target: < 0.5 s.

    python benchmarks/cli_start.py [--runs 15]
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

SRC = Path(__file__).resolve().parents[1] / "src"


def timed(cmd: list[str], env: dict[str, str]) -> float:
    t = time.perf_counter()
    subprocess.run(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=True)
    return time.perf_counter() - t


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=15)
    args = ap.parse_args()
    env = dict(os.environ, PYTHONPATH=str(SRC))
    cli = [sys.executable, "-m", "lossdoctor", "diagnose", "--help"]
    bare = [sys.executable, "-c", "pass"]
    probe = subprocess.run(
        [
            sys.executable,
            "-c",
            "import sys, runpy; sys.argv=['lossdoctor','diagnose','--help'];"
            "\ntry:\n  runpy.run_module('lossdoctor', run_name='__main__')\nexcept SystemExit: pass\n"
            "print('torch' in sys.modules)",
        ],
        env=env,
        capture_output=True,
        text=True,
    )
    a, b = [], []
    timed(cli, env)
    for _ in range(args.runs):
        a.append(timed(cli, env))
        b.append(timed(bare, env))
    print(
        f"lossdoctor diagnose --help: median {statistics.median(a):.3f} s "
        f"(min {min(a):.3f}, max {max(a):.3f}); bare python: median {statistics.median(b):.3f} s; "
        f"torch imported: {probe.stdout.strip().splitlines()[-1] if probe.stdout.strip() else '?'}"
    )


if __name__ == "__main__":
    main()
