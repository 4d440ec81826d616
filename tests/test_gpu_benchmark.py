"""benchmarks/gpu.py is ready for the day a GPU is lent: it skips cleanly without CUDA and its whole
measuring path (variants, interleaved chunks, ratios, the table) runs on a tiny model on the CPU."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def _run(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, str(ROOT / "benchmarks" / "gpu.py"), *args],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=ROOT,
    )


def test_without_cuda_it_says_so_and_exits_0() -> None:
    torch = pytest.importorskip("torch")
    if torch.cuda.is_available():
        pytest.skip("CUDA is here: the benchmark would run for real")
    p = _run("--no-docs")
    assert p.returncode == 0, p.stderr
    assert "no CUDA device" in p.stdout and "Traceback" not in p.stderr


def test_smoke_run_measures_plain_and_watch(tmp_path: Path) -> None:
    out = tmp_path / "gpu.json"
    p = _run("--smoke", "--no-compile", "--rounds", "2", "--steps", "1", "--warmup", "1", "--json", str(out))
    assert p.returncode == 0, p.stderr[-2000:]
    res = json.loads(out.read_text())["tiny"]
    assert set(res["variants"]) == {"plain", "watch"}
    assert res["variants"]["plain"]["ratio"] == 1.0
    assert res["variants"]["watch"]["median_ms"] > 0 and res["variants"]["watch"]["syncs_per_step"] is None
    assert "| watch |" in p.stdout
