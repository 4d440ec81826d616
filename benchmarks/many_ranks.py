#!/usr/bin/env python3
"""A run directory of many ranks diagnosed by the CLI: 512 ranks x 10,000 steps; target: seconds.

Writes what `lossdoctor.watch` writes under data-parallel training (`rank-N/meta.json`,
`steps.jsonl` with the records the DDP/DeepSpeed probes add, `layers.f32` every 10th step): every
rank trains the same weights on its own batches (loss and the local gradient norm differ per rank,
the reduced gradient norm is the same), and at step `--nan-step` rank `--nan-rank` gets a NaN
sample: from then on every rank's reduced gradient is NaN, and from the next step every rank's
loss. Then `lossdoctor diagnose DIR --format json` runs in a fresh process (median of --repeat,
import time included), and the answer is checked: `nonfinite_data` on the NaN rank at that step,
the other ranks named once, in ranges.

    python benchmarks/many_ranks.py [--ranks 512] [--steps 10000] [--repeat 3] [--keep DIR]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
SRC = ROOT / "src"
MODULES = [f"h.{i}.{part}" for i in range(4) for part in ("attn", "mlp", "ln")] + ["lm_head"]
STATS = ["act_absmax", "act_rms", "grad_absmax", "param_grad_norm", "param_norm"]


def _fmt(x: float) -> str:
    return json.dumps(float(x)) if np.isfinite(x) else '"nan"'


def write_rank(d: Path, rank: int, world: int, steps: int, nan_rank: int, nan_step: int, reduced: np.ndarray) -> None:
    d.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(rank + 1)
    s = np.arange(steps)
    loss = 2.0 * np.exp(-s / (steps / 4)) + 1.2 + 0.05 * rng.standard_normal(steps)
    local = np.nan_to_num(reduced, nan=1.0) * (1.0 + 0.3 * rng.standard_normal(steps) ** 2)  # own batch
    loss[nan_step + 1 :] = np.nan  # NaN weights after the NaN update, on every rank
    local[nan_step + 1 :] = np.nan
    if rank == nan_rank:
        loss[nan_step] = np.nan
        local[nan_step] = np.nan
    meta = {
        "format": "lossdoctor.run/1",
        "rank": rank,
        "world_size": world,
        "layer_every": 10,
        "distributed": {"kind": "ddp", "comm_hook": True, "grad_norm": "all-reduced"},
        "closed": True,
        "steps": steps,
    }
    (d / "meta.json").write_text(json.dumps(meta))
    lines = []
    for i in range(steps):
        bad = rank == nan_rank and i == nan_step
        rec = (
            f'{{"step":{i},"time":{i * 0.05:.4f},"loss":{_fmt(loss[i])},"skipped":0,"lr":0.0003,'
            f'"wd":0.1,"grad_norm":{_fmt(reduced[i])},"grad_norm_local":{_fmt(local[i])},'
            f'"grad_nonfinite":{0 if np.isfinite(local[i]) else 48},"batch_size":8,'
            f'"batch_nonfinite":{1 if bad else 0},"act_absmax":{3.0 + rng.random():.4f},'
            f'"act_absmax_layer":"h.3.mlp","accum_steps":1'
        )
        if i % 10 == 0:
            rec += f',"param_norm":{120.0 + i * 1e-3:.4f},"update_ratio":{1e-3 * (1 + 0.1 * rng.random()):.6g}'
        if bad:
            rec += ',"batch_nonfinite_detail":{"input_ids":[5]}'
        lines.append(rec + "}\n")
    (d / "steps.jsonl").write_text("".join(lines))
    (d / "layers.json").write_text(
        json.dumps({"modules": MODULES, "types": [], "stats": STATS, "row": ["step"] + [f"{x}[module]" for x in STATS]})
    )
    sampled = s[s % 10 == 0]
    rows = np.abs(rng.standard_normal((len(sampled), 1 + len(STATS) * len(MODULES)))).astype("<f4")
    rows[:, 0] = sampled
    rows[sampled > nan_step, 1:] = np.nan
    rows.tofile(d / "layers.f32")


def write_run(root: Path, ranks: int, steps: int, nan_rank: int, nan_step: int) -> None:
    rng = np.random.default_rng(0)
    reduced = 0.9 + 0.1 * np.abs(rng.standard_normal(steps))
    reduced[nan_step:] = np.nan
    for r in range(ranks):
        write_rank(root / f"rank-{r}", r, ranks, steps, nan_rank, nan_step, reduced)


def time_cli(path: Path, repeat: int) -> tuple[float, dict]:
    env = dict(os.environ, PYTHONPATH=str(SRC))
    times, out = [], {}
    for _ in range(repeat):
        t0 = time.perf_counter()
        p = subprocess.run(
            [sys.executable, "-m", "lossdoctor", "diagnose", str(path), "--format", "json"],
            capture_output=True,
            text=True,
            env=env,
        )
        times.append(time.perf_counter() - t0)
        if p.returncode != 0:
            raise SystemExit(f"diagnose failed ({p.returncode}): {p.stderr.strip()[-500:]}")
        out = json.loads(p.stdout)
    return statistics.median(times), out


def phases(path: Path) -> dict[str, float]:
    """Read and diagnose in-process, timed apart (which phase a slowdown is in)."""
    sys.path.insert(0, str(SRC))
    from lossdoctor.detectors.engine import diagnose_runs
    from lossdoctor.sources import load_path

    t0 = time.perf_counter()
    runs = load_path(str(path))
    t1 = time.perf_counter()
    diagnose_runs(runs)
    t2 = time.perf_counter()
    return {"read": t1 - t0, "diagnose": t2 - t1}


def write_docs(args: argparse.Namespace, size: int, median: float, ph: dict[str, float], report: dict) -> None:
    sys.path.insert(0, str(ROOT))
    from benchmarks import docs

    f = report["findings"][0]
    body = "\n".join(
        [
            "## Run directories of many ranks",
            "",
            docs.provenance(docs.command_line()),
            "",
            f"A synthetic data-parallel run directory as `watch` writes it: {args.ranks} `rank-N/` directories of "
            f"{args.steps:,} steps each ({size / 2**20:.0f} MiB of `steps.jsonl` and `layers.f32`); rank "
            f"{args.nan_rank} gets a NaN sample at step {args.nan_step:,}, after which every rank's reduced "
            "gradient and then every rank's loss is NaN. Above 16 ranks every rank's log is screened as bytes "
            "for locally non-finite values and only the ranks that tell the story are read in full "
            "(`sources/rank_screen.py`).",
            "",
            "| measure | value |",
            "|---|---|",
            f"| `lossdoctor diagnose DIR --format json`, fresh process, median of {args.repeat} | {median:.2f} s |",
            f"| in process: screen + read | {ph['read']:.2f} s |",
            f"| in process: diagnose | {ph['diagnose']:.2f} s |",
            f"| primary finding | `{f['cause']}` at step {f['step']} on rank {f['rank']} |",
            f"| findings in the report | {len(report['findings'])} |",
            "",
            "The primary finding's evidence names the other ranks once, in ranges:",
            "",
            *[f"- {e}" for e in f["evidence"]],
        ]
    )
    docs.write_section("many-ranks", body)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--ranks", type=int, default=512)
    ap.add_argument("--steps", type=int, default=10_000)
    ap.add_argument("--nan-rank", type=int, default=137)
    ap.add_argument("--nan-step", type=int, default=7_000)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--keep", type=Path, help="write the run directory here and keep it")
    ap.add_argument("--docs", action="store_true", help="write the numbers into docs/benchmarks.md")
    args = ap.parse_args()
    tmp = None
    root = args.keep
    if root is None:
        tmp = tempfile.mkdtemp(prefix="ld-ranks-")
        root = Path(tmp)
    try:
        t0 = time.perf_counter()
        if not (root / "rank-0" / "steps.jsonl").exists():
            write_run(root, args.ranks, args.steps, args.nan_rank, args.nan_step)
        size = sum(f.stat().st_size for f in root.rglob("*") if f.is_file())
        print(
            f"wrote {args.ranks} ranks x {args.steps} steps ({size / 2**20:.0f} MiB) "
            f"in {time.perf_counter() - t0:.1f} s"
        )
        median, report = time_cli(root, args.repeat)
        f = report["findings"][0]
        ok = (f["cause"], f["rank"], f["step"]) == ("nonfinite_data", args.nan_rank, args.nan_step)
        longest = max(len(e) for g in report["findings"] for e in g["evidence"])
        ph = phases(root)
        lines = [
            f"wrote {args.ranks} ranks x {args.steps} steps ({size / 2**20:.0f} MiB)",
            f"diagnose (CLI, fresh process, median of {args.repeat}): {median:.2f} s",
            "in-process phases: " + ", ".join(f"{k} {v:.2f} s" for k, v in ph.items()),
            f"primary: {f['cause']} at step {f['step']} on rank {f['rank']} ({'right' if ok else 'WRONG'}); "
            f"{len(report['findings'])} finding(s), longest evidence line {longest} characters",
        ]
        print("\n".join(lines[1:]))
        for e in f["evidence"]:
            print(f"  - {e}")
        if args.docs:
            write_docs(args, size, median, ph, report)
        if not ok:
            raise SystemExit(1)
    finally:
        if tmp is not None:
            shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
