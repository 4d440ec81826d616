#!/usr/bin/env python3
"""How fast the readers read, and in how much memory, beside a bare regex pass over the same file.

Generates, in a temporary directory deleted afterwards, one input per format and size:

- console: nanoGPT's line (`print(f"iter {iter_num}: loss {lossf:.4f}, time {dt*1000:.2f}ms, mfu
  {running_mfu*100:.2f}%")`, nanoGPT train.py), one per step;
- hf-tqdm: the Hugging Face Trainer's console with its progress bar on: tqdm redraws the bar with
  `\\r` (`tqdm.format_meter`, the real formatter) and `tqdm.write` clears it, prints the log dict
  (`{'loss': ..., 'grad_norm': ..., 'learning_rate': ..., 'epoch': ...}`) and redraws it;
- csv, jsonl: one row per step (step, loss, grad_norm, lr, loss_scale);
- tensorboard: a real `torch.utils.tensorboard.SummaryWriter` (scalars loss, grad_norm, lr);
- mlflow: a real MLflow file store (`mlflow.store.tracking.file_store.FileStore`): the experiment,
  the run and the first 1,000 steps of each metric logged through it (`log_batch`); the rest of each
  `metrics/<name>` file appended in the line format the store wrote (`timestamp value step`, checked
  against those first lines: the store opens the file once per point, ~170 us, so a million steps
  through it would take minutes).

Every curve is healthy, then explodes to NaN at 90% of the run (so the answer can be checked: the
first non-finite step), with one loss spike at 50%.

For each input, in a fresh subprocess (so peak memory is the reader's own: `VmHWM`), it times
`sources.load_path` (the read; with `--diagnose` the detectors too), a bare regex pass (`for line in
f: rx.search(line)` with a pattern for a number after `loss`) over the same bytes, and for CSV and
JSONL the bare standard-library pass of the format (`for row in csv.reader(f)`, `for line in f:
json.loads(line)`), and prints MB/s, peak MB and the ratios read / pass side by side.

    python benchmarks/read_speed.py [--sizes 10MB,100MB,1GB:console+csv] [--formats console,hf-tqdm,...]
                                    [--before COMMIT] [--docs]

Times are wall and CPU (`time.process_time` of the child: on a machine whose cores are shared with
other jobs, the CPU time is what the reading costs; the wall time is what this run waited). MB/s and
the ratios are taken on CPU time.

The default (10 MB of each format) runs in under two minutes on a 2-core machine.
"""

from __future__ import annotations

import argparse
import json
import math
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
SRC = ROOT / "src"
FORMATS = ("console", "hf-tqdm", "csv", "jsonl", "tensorboard", "mlflow")
#: bytes per step of each generator (measured), to size an input from a target size
_BYTES_PER_STEP = {"console": 50, "hf-tqdm": 280, "csv": 40, "jsonl": 120, "tensorboard": 150, "mlflow": 80}
#: the binary formats are written by their real writers, which are slow: capped at this many steps
_MAX_STEPS = {"tensorboard": 300_000, "mlflow": 1_000_000}
#: the slow writers (the real TensorBoard writer, the MLflow store's line format) are not run past this size
_MAX_BYTES = {"tensorboard": 200_000_000, "mlflow": 200_000_000}
#: the bare standard-library pass each format is also compared with (beside the regex pass)
_BASELINE = {"csv": "csv.reader", "jsonl": "json.loads"}


_BLOCK = 100_000
#: the two logs of the issue's first measurement: 1M nanoGPT lines (52 MB), a 300k-step HF Trainer
#: console with its progress bar
REFERENCE = (("console", 1_000_000), ("hf-tqdm", 300_000))


def curve(n: int, a: int = 0, b: int | None = None, seed: int = 0) -> dict[str, np.ndarray]:
    """Steps a+1..b of an n-step curve (the whole run by default), generated block by block so a
    1 GB log never sits in memory: healthy, one spike at 50%, a blow-up to NaN at 90% + 40 steps."""
    b = n if b is None else b
    rng = np.random.default_rng([seed, a])
    i = np.arange(a, b)
    s = i + 1
    loss = 2.2 * np.exp(-s / (n / 3)) + 1.1 + 0.04 * rng.standard_normal(b - a)
    gn = 0.8 + 0.1 * np.abs(rng.standard_normal(b - a))
    loss[i == n // 2] *= 4.0  # one spike
    onset = int(n * 0.9)
    gn = np.where(i >= onset, gn * 1.5 ** np.minimum(np.maximum(i - onset, 0), 60), gn)
    loss[i >= onset + 40] = np.nan
    gn[i >= onset + 40] = np.nan
    return {"step": s, "loss": loss, "grad_norm": gn, "lr": np.full(b - a, 3e-4), "loss_scale": np.full(b - a, 65536.0)}


def blocks(n: int):
    for a in range(0, n, _BLOCK):
        yield curve(n, a, min(n, a + _BLOCK))


def write_console(path: Path, n: int) -> None:
    with open(path, "w") as f:
        for c in blocks(n):
            f.write(
                "".join(
                    f"iter {s}: loss {v:.4f}, time 120.50ms, mfu 38.12%\n"
                    for s, v in zip(c["step"].tolist(), c["loss"].tolist())
                )
            )


def write_hf_tqdm(path: Path, n: int) -> None:
    """What `python train.py > log 2>&1` holds for an HF Trainer with logging_steps=1: per step the bar
    redrawn (tqdm's own formatter), then cleared for the log dict, then redrawn."""
    from tqdm import tqdm

    with open(path, "w") as f:
        f.write("***** Running training *****\n  Num examples = 1,000,000\n")
        for c in blocks(n):
            out = []
            for s, v, g, lr in zip(c["step"].tolist(), c["loss"].tolist(), c["grad_norm"].tolist(), c["lr"].tolist()):
                bar = tqdm.format_meter(s, n, elapsed=s / 9.0)
                out.append(
                    f"\r{bar}\r{' ' * len(bar)}\r{{'loss': {v:.4f}, 'grad_norm': {g:.6g}, "
                    f"'learning_rate': {lr:.1e}, 'epoch': {s / n:.2f}}}\n\r{bar}"
                )
            f.write("".join(out))
        f.write("\n")


def write_csv(path: Path, n: int) -> None:
    with open(path, "w") as f:
        f.write("step,loss,grad_norm,lr,loss_scale\n")
        for c in blocks(n):
            np.savetxt(f, np.column_stack([c[k] for k in c]), delimiter=",", fmt=["%d"] + ["%.6g"] * 4)


def write_jsonl(path: Path, n: int) -> None:
    with open(path, "w") as f:
        for c in blocks(n):
            keys = list(c)
            f.write("".join(json.dumps(dict(zip(keys, row))) + "\n" for row in zip(*(c[k].tolist() for k in keys))))


def write_tensorboard(path: Path, n: int) -> Path:
    from torch.utils.tensorboard import SummaryWriter

    w = SummaryWriter(str(path), max_queue=100_000, flush_secs=3600)
    for c in blocks(n):
        for s, v, g, lr in zip(c["step"].tolist(), c["loss"].tolist(), c["grad_norm"].tolist(), c["lr"].tolist()):
            w.add_scalar("train/loss", v, s)
            w.add_scalar("train/grad_norm", g, s)
            w.add_scalar("train/learning_rate", lr, s)
    w.close()
    return path


def write_mlflow(path: Path, n: int) -> Path:
    """A real MLflow file store: experiment, run and the first steps through `FileStore`, the rest of
    each metric file appended in the line format it wrote (checked against its first lines)."""
    import os

    os.environ.setdefault("MLFLOW_ALLOW_FILE_STORE", "true")  # the file store is in maintenance mode
    from mlflow.entities import Metric
    from mlflow.store.tracking.file_store import FileStore

    store = FileStore(str(path))
    run = store.create_run(
        store.create_experiment("bench"), user_id="bench", start_time=1700000000000, tags=[], run_name="bench"
    )
    metrics = Path(run.info.artifact_uri.removeprefix("file://")).parent / "metrics"
    first = min(n, 1000)
    for name, key in (("loss", "loss"), ("grad_norm", "grad_norm"), ("lr", "learning_rate")):
        head = curve(n, 0, first)
        ts = (1700000000000 + head["step"] * 100).tolist()
        store.log_batch(
            run.info.run_id,
            metrics=[Metric(key, v, t, s) for t, v, s in zip(ts, head[name].tolist(), head["step"].tolist())],
            params=[],
            tags=[],
        )
        if (metrics / key).read_text() != _mlflow_lines(head, name):
            raise SystemExit("the MLflow file store's metric line format is not the one this benchmark appends")
        with open(metrics / key, "a") as f:
            for a in range(first, n, _BLOCK):
                f.write(_mlflow_lines(curve(n, a, min(n, a + _BLOCK)), name))
    return path


def _mlflow_lines(c: dict[str, np.ndarray], name: str) -> str:
    ts = 1700000000000 + c["step"] * 100
    return "".join(f"{t} {v!r} {s}\n" for t, v, s in zip(ts.tolist(), c[name].tolist(), c["step"].tolist()))


def generate(fmt: str, target_bytes: int, where: Path, steps: int | None = None) -> tuple[Path, int]:
    if steps is None:
        steps = max(1000, target_bytes // _BYTES_PER_STEP[fmt])
        steps = min(steps, _MAX_STEPS.get(fmt, steps))
    if fmt == "console":
        p = where / "train.log"
        write_console(p, steps)
    elif fmt == "hf-tqdm":
        p = where / "hf_console.out"
        write_hf_tqdm(p, steps)
    elif fmt == "csv":
        p = where / "log.csv"
        write_csv(p, steps)
    elif fmt == "jsonl":
        p = where / "log.jsonl"
        write_jsonl(p, steps)
    elif fmt == "tensorboard":
        p = write_tensorboard(where / "tb", steps)
    else:
        p = write_mlflow(where / "mlruns", steps)
    return p, steps


def size_of(p: Path) -> int:
    if p.is_file():
        return p.stat().st_size
    return sum(f.stat().st_size for f in p.rglob("*") if f.is_file())


# --- measured in a fresh process ---------------------------------------------------------------

_CHILD = r"""
import json, re, resource, sys, time
from pathlib import Path
sys.path.insert(0, sys.argv[1])
path, what = Path(sys.argv[2]), sys.argv[3]
out = {}
if what == "csv.reader":
    import csv
    t, c = time.perf_counter(), time.process_time()
    with open(path, newline="", encoding="utf-8", errors="replace") as f:
        out["rows"] = sum(1 for _ in csv.reader(f))
    out["s"], out["cpu"] = time.perf_counter() - t, time.process_time() - c
elif what == "json.loads":
    t, c = time.perf_counter(), time.process_time()
    n = 0
    with open(path, "rb") as f:
        for line in f:
            if line.strip():
                json.loads(line)
                n += 1
    out["s"], out["cpu"] = time.perf_counter() - t, time.process_time() - c
elif what == "regex":
    rx = re.compile(r"loss\W+(\d+\.\d+|nan)")
    files = [path] if path.is_file() else sorted(f for f in path.rglob("*") if f.is_file())
    t, c = time.perf_counter(), time.process_time()
    n = 0
    for fp in files:
        with open(fp, encoding="utf-8", errors="replace") as f:
            for line in f:
                if rx.search(line):
                    n += 1
    out["s"], out["cpu"] = time.perf_counter() - t, time.process_time() - c
else:
    t, c = time.perf_counter(), time.process_time()
    from lossdoctor.sources import _load_readers, load_path
    _load_readers()  # the reader modules, imported on the first load_path: start-up, not reading
    out["import_s"] = time.perf_counter() - t
    t, c = time.perf_counter(), time.process_time()
    runs = load_path(path)
    out["s"], out["cpu"] = time.perf_counter() - t, time.process_time() - c
    run = runs[0]
    import numpy as np
    loss = run.col("loss")
    bad = np.nonzero(run.logged("loss") & ~np.isfinite(loss))[0]
    out["first_nonfinite"] = int(run.steps[bad[0]]) if bad.size else None
    out["rows"] = len(run)
    out["thinned"] = run.meta.get("thinned")
    if what == "diagnose":
        from lossdoctor.detectors.engine import diagnose_runs
        rep = diagnose_runs(runs)
        f0 = rep.findings[0] if rep.findings else None
        out["first"] = [f0.cause, f0.step] if f0 is not None else None
        out["s_all"] = time.perf_counter() - t
# VmHWM: this process's peak resident memory since its exec (ru_maxrss would carry the forking
# parent's peak over the exec on Linux)
hwm = [l for l in open("/proc/self/status") if l.startswith("VmHWM:")]
out["peak_mb"] = (int(hwm[0].split()[1]) if hwm else resource.getrusage(resource.RUSAGE_SELF).ru_maxrss) / 1024
print(json.dumps(out))
"""


def measure(path: Path, what: str, src: Path = SRC) -> dict:
    p = subprocess.run(
        [sys.executable, "-c", _CHILD, str(src), str(path), what], capture_output=True, text=True, timeout=3600
    )
    if p.returncode != 0:
        raise SystemExit(f"{what} of {path} failed: {p.stderr.strip().splitlines()[-1:]}")
    return json.loads(p.stdout.strip().splitlines()[-1])


def best_of(
    path: Path, what: str, repeat: int, baseline: str | None, before: Path | None = None
) -> tuple[dict, dict, dict | None, dict | None]:
    """The fastest of `repeat` reads, regex passes, (CSV, JSONL) bare format passes and (`before`)
    reads by an earlier version of the package, taken in turn (a shared machine's load moves between
    runs; the fastest is the least disturbed, and each kind sees the same load)."""
    rds, rxs, bls, bfs = [], [], [], []
    for _ in range(max(1, repeat)):
        rds.append(measure(path, what))
        rxs.append(measure(path, "regex"))
        if baseline:
            bls.append(measure(path, baseline))
        if before is not None:
            bfs.append(measure(path, what, before))
    rd = min(rds, key=lambda r: r["cpu"])
    rd["peak_mb"] = max(r["peak_mb"] for r in rds)
    bf = None
    if bfs:
        bf = min(bfs, key=lambda r: r["cpu"])
        bf["peak_mb"] = max(r["peak_mb"] for r in bfs)
    return rd, min(rxs, key=lambda r: r["cpu"]), (min(bls, key=lambda r: r["cpu"]) if bls else None), bf


def extract_src(ref: str, where: Path) -> Path:
    """The package's `src/` as of git commit `ref`, extracted under `where` (for `--before`)."""
    archive = subprocess.run(["git", "-C", str(ROOT), "archive", ref, "src"], capture_output=True, check=True).stdout
    subprocess.run(["tar", "-x", "-C", str(where)], input=archive, check=True)
    return where / "src"


def parse_size(s: str) -> int:
    s = s.strip().upper()
    for unit, mult in (("GB", 10**9), ("MB", 10**6), ("KB", 10**3)):
        if s.endswith(unit):
            return int(float(s[: -len(unit)]) * mult)
    return int(s)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument(
        "--sizes",
        default="10MB",
        help="comma-separated target sizes, each optionally with its own formats (`1GB:console+csv`); "
        "default 10MB: a quick run",
    )
    ap.add_argument("--formats", default=",".join(FORMATS))
    ap.add_argument(
        "--reference",
        action="store_true",
        help="first the two reference logs: 1M nanoGPT lines, a 300k-step HF Trainer console",
    )
    ap.add_argument("--diagnose", action="store_true", help="also time `diagnose` (read + detectors) per input")
    ap.add_argument(
        "--repeat",
        type=int,
        default=3,
        help="reads and regex passes per input under 500 MB (the fastest is shown; one above)",
    )
    ap.add_argument("--docs", action="store_true", help="write the table into docs/benchmarks.md")
    ap.add_argument("--tmp", default=None, help="where to generate the inputs (a temporary directory under it)")
    ap.add_argument(
        "--before",
        default=None,
        metavar="COMMIT",
        help="also read every input with the package as of this git commit, in turn with the others "
        "(before/after under the same load)",
    )
    args = ap.parse_args()
    formats = [f for f in args.formats.split(",") if f.strip()]
    sized = [
        (parse_size(s.split(":")[0]), s.split(":")[1].split("+") if ":" in s else formats)
        for s in args.sizes.split(",")
        if s.strip()
    ]
    jobs: list[tuple[str, int, int | None]] = [(f, 0, n) for f, n in REFERENCE] if args.reference else []
    jobs += [(f, size, None) for size, fmts in sized for f in fmts if size <= _MAX_BYTES.get(f, size)]
    header = (
        "| input | size | steps | read (wall) | read (CPU) | MB/s (CPU) | peak MB | regex pass (CPU) | read / regex "
        "| format pass (CPU) | read / format | import | rows kept | first non-finite step |"
        + (" read + diagnose | first finding |" if args.diagnose else "")
        + (f" read at {args.before} (CPU) | its MB/s, peak MB | now / then |" if args.before else "")
    )
    before = (
        extract_src(args.before, Path(tempfile.mkdtemp(prefix="ld-before-", dir=args.tmp))) if args.before else None
    )
    lines = [header, "|" + "---|" * (header.count("|") - 1)]
    print(header)
    for fmt, size, nsteps in jobs:
        d = Path(tempfile.mkdtemp(prefix="ld-read-", dir=args.tmp))
        try:
            path, steps = generate(fmt, size, d, nsteps)
            mb = size_of(path) / 1e6
            big = size_of(path) >= 500e6
            rd, rx, bl, bf = best_of(
                path,
                "diagnose" if args.diagnose else "read",
                1 if big else args.repeat,
                _BASELINE.get(fmt),
                None if big else before,
            )
        finally:
            shutil.rmtree(d, ignore_errors=True)
        expect = int(math.floor(steps * 0.9)) + 40 + 1
        row = (
            f"| {fmt} | {mb:,.0f} MB | {steps:,} | {rd['s']:.2f} s | {rd['cpu']:.2f} s | {mb / rd['cpu']:,.0f} | "
            f"{rd['peak_mb']:,.0f} | {rx['cpu']:.2f} s | {rd['cpu'] / rx['cpu']:.2f}x | "
            + (f"{_BASELINE[fmt]} {bl['cpu']:.2f} s | {rd['cpu'] / bl['cpu']:.2f}x | " if bl else "– | – | ")
            + f"{rd['import_s']:.2f} s | "
            f"{rd['rows']:,}"
            f"{' (thinned)' if rd.get('thinned') else ''} | {rd['first_nonfinite']}"
            f"{'' if rd['first_nonfinite'] == expect else f' (expected {expect})'} |"
        )
        if args.diagnose:
            row += f" {rd['s_all']:.2f} s | {rd.get('first')} |"
        if bf is not None:
            row += f" {bf['cpu']:.2f} s | {mb / bf['cpu']:,.0f}, {bf['peak_mb']:,.0f} | {rd['cpu'] / bf['cpu']:.2f}x |"
        elif before is not None:
            row += " – | – | – |"
        print(row, flush=True)
        lines.append(row)
    if before is not None:
        shutil.rmtree(before.parent, ignore_errors=True)
    if args.docs:
        sys.path.insert(0, str(ROOT))
        from benchmarks import docs

        body = "\n".join(
            [
                "## Read speed",
                "",
                docs.provenance(docs.command_line()),
                "",
                "Each input is generated (see `benchmarks/read_speed.py`), read in a fresh process by "
                "`sources.load_path` (*read*: its wall and CPU time, imports apart in *import*; MB/s and the ratios on "
                "CPU time, which a machine shared with other jobs inflates far less than wall time; "
                "*peak MB*: the process's "
                "peak resident memory, `VmHWM`, interpreter and imports included), and a bare regex "
                "pass (`for line in open(path): rx.search(line)`, a pattern for the number after `loss`) "
                "reads the same bytes in another fresh process, and for CSV and JSONL so does the bare "
                "standard-library pass of the format (*format pass*: `for row in csv.reader(f)`, `for line "
                "in f: json.loads(line)`); each is the fastest of `--repeat` runs "
                "taken in turn (one for an input over 500 MB). The curve is healthy, spikes once at "
                "50% and goes NaN at 90% + 40 steps: *first non-finite step* is where the read columns "
                "put the first NaN loss (it must be the generated one). Synthetic inputs: these are "
                "speeds, not accuracies.",
                "",
                *lines,
            ]
        )
        docs.write_section("read-speed", body)
    return 0


if __name__ == "__main__":
    sys.exit(main())
