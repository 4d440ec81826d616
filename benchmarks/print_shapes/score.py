"""Print statements from other people's training scripts, rendered and read back.

The logs people paste are made by the print and logging statements of their training scripts.
`statements.json` holds such statements copied from public repositories (each entry names its
repository and file), each rewritten once as a `str.format` template over a fixed set of roles
(`step`, `epoch`, `loss`, `lr`, ...). This benchmark renders every template as a 60-line log with
made-up numbers, twice (a healthy curve, and the same curve going NaN at line 45), writes it to a
file and reads it with `load_path` (what `lossdoctor diagnose FILE` does), then judges:

- **read**: the training loss series read back is the printed one, value for value, in order
  (the step loss where the statement prints one, else the loss tensor, else the running average);
- **NaN found**: on the NaN variant, the first non-finite loss is read at line 45 and the report
  has a critical finding;
- **healthy clean**: on the healthy variant, no warning or critical finding.

Statements split dev/test by their repository, with the corpus's rule
(`benchmarks/real_logs/split.py`): tune the reader on dev, report test.

    python -m benchmarks.print_shapes.score [--split dev|test|both] [--misses] [--baseline COMMIT] [--docs]

No code from the statements runs: only the templates are formatted, with this file's own numbers,
and only fields named in ROLES are allowed.
"""

from __future__ import annotations

import argparse
import json
import math
import string
import subprocess
import sys
import tarfile
import tempfile
from dataclasses import dataclass
from io import BytesIO
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parents[2]
HERE = Path(__file__).resolve().parent
STATEMENTS = HERE / "statements.json"

#: lines per rendered log, and the line (0-based) from which the NaN variant prints nan
LINES = 60
NAN_FROM = 45
#: the training-loss roles, in the order a reader should prefer them (the value the step printed
#: before its running average)
LOSS_ROLES = ("loss", "loss_tensor", "avg_loss")
ROLES = frozenset(
    """step total_steps epoch epochs batch batches samples total_samples percent loss avg_loss
    loss_tensor loss_a loss_b loss_c ppl val_loss lr acc val_acc grad_norm loss_scale time clock
    speed asctime levelname name x1 x2 x3""".split()
)


def fields(template: str) -> list[tuple[str, str]]:
    """(role, format spec) of every replacement field in a str.format template."""
    out = []
    for _, name, spec, _ in string.Formatter().parse(template):
        if name is not None:
            out.append((name, spec or ""))
    return out


def check(entry: dict[str, Any]) -> str | None:
    """Why an entry cannot be rendered (an unknown role, no training loss), or None."""
    names = {n for n, _ in fields(entry["template"] + (entry.get("prefix") or ""))}
    unknown = sorted(n for n in names if n not in ROLES)
    if unknown:
        return f"unknown roles {unknown}"
    if not any(r in names for r in LOSS_ROLES):
        return "no training loss printed (components or perplexity only)"
    return None


class _Tensor:
    """A 0-d tensor's repr as torch prints it on a GPU with autograd (four decimals)."""

    def __init__(self, v: float) -> None:
        self.v = v

    def __format__(self, spec: str) -> str:
        return f"tensor({self.v:.4f}, device='cuda:0', grad_fn=<NllLossBackward0>)"


def curve(seed: int, nan: bool) -> dict[str, list[Any]]:
    """Every role's value on each of LINES lines: a loss falling from ~2.3 to ~0.4 with batch noise,
    counters for each `per`, and the rest; with `nan`, the losses are NaN from NAN_FROM on."""
    rng = np.random.default_rng(seed)
    i = np.arange(LINES)
    loss = 0.4 + 1.9 * np.exp(-i / 15) + np.abs(rng.normal(0, 0.03, LINES))
    if nan:
        loss[NAN_FROM:] = np.nan
    epoch_of = i // 20
    avg = np.array([loss[epoch_of == epoch_of[k]][: k % 20 + 1].mean() for k in i])
    v: dict[str, list[Any]] = {
        "loss": [float(x) for x in loss],
        "avg_loss": [float(x) for x in avg],
        "loss_tensor": [_Tensor(float(x)) for x in loss],
        "loss_a": [float(0.6 * x) for x in loss],
        "loss_b": [float(0.4 * x) for x in loss],
        "loss_c": [float(0.1 * x) for x in loss],
        "ppl": [float(math.exp(x)) if math.isfinite(x) else float("nan") for x in loss],
        "val_loss": [float(x + 0.1) for x in loss],
        "lr": [float(3e-4 * (0.5 + 0.5 * math.cos(math.pi * k / LINES))) for k in i],
        "acc": [float(min(0.99, max(0.0, 1 - x / 2.5))) if math.isfinite(x) else 0.1 for x in loss],
        "grad_norm": [float(x) for x in 1.5 + np.abs(rng.normal(0, 0.2, LINES))],
        "loss_scale": [65536.0] * LINES,
        "time": [float(x) for x in 0.25 + np.abs(rng.normal(0, 0.01, LINES))],
        "clock": [f"0:{(k * 7) // 60:02d}:{(k * 7) % 60:02d}" for k in i],
        "speed": [float(x) for x in 1234.5 + rng.normal(0, 10, LINES)],
        "asctime": [f"2024-05-01 12:{k // 60:02d}:{k % 60:02d},{(k * 37) % 1000:03d}" for k in i],
        "levelname": ["INFO"] * LINES,
        "name": ["train"] * LINES,
        "x1": [float(x) for x in rng.uniform(0, 1, LINES)],
        "x2": [float(x) for x in rng.uniform(10, 100, LINES)],
        "x3": [int(x) for x in rng.integers(1, 1000, LINES)],
    }
    v["val_acc"] = [a - 0.02 for a in v["acc"]]
    return v


def counters(per: str) -> dict[str, list[Any]]:
    """The counters of each line: a global step every 10 steps, batches within 3 epochs, or epochs."""
    i = np.arange(LINES)
    if per == "epoch":
        ep = i + 1
        return {
            "epoch": list(ep),
            "epochs": [LINES] * LINES,
            "step": list(ep * 100),
            "total_steps": [LINES * 100] * LINES,
            "batch": [100] * LINES,
            "batches": [100] * LINES,
            "samples": list(ep * 3200),
            "total_samples": [LINES * 3200] * LINES,
            "percent": [100.0] * LINES,
        }
    step = (i + 1) * 10
    ep = i // 20 + 1 if per == "batch" else step * 0 + 1
    batch = (i % 20 + 1) * 10 if per == "batch" else step
    return {
        "step": list(step),
        "total_steps": [LINES * 10] * LINES,
        "epoch": list(ep),
        "epochs": [3] * LINES,
        "batch": list(batch),
        "batches": [200] * LINES,
        "samples": list(step * 32),
        "total_samples": [LINES * 320] * LINES,
        "percent": [float(b) / 2 for b in batch],
    }


def render(entry: dict[str, Any], nan: bool, seed: int) -> tuple[str, list[float]]:
    """The log text, and the training loss as printed on each line (the truth)."""
    v = curve(seed, nan) | counters(entry.get("per", "step"))
    tpl = (entry.get("prefix") or "") + entry["template"]
    names = {n: s for n, s in fields(tpl)}
    role = next(r for r in LOSS_ROLES if r in names)
    lines, truth = [], []
    for k in range(LINES):
        row = {r: v[r][k] for r in ROLES if r in names}
        row = {r: (int(x) if isinstance(x, np.integer) else x) for r, x in row.items()}
        for r in ("x1", "x2", "x3"):  # an extra number printed as an integer (a count, an id)
            if r in row and names[r].endswith(tuple("dxXob")):
                row[r] = int(abs(row[r]) * 100) if isinstance(row[r], float) else row[r]
        lines.append(tpl.format(**row))
        x = row[role]
        printed = format(x, names[role]) if role != "loss_tensor" else f"{x.v:.4f}"
        truth.append(float(printed.strip().rstrip("%")) if printed.strip().lower() != "nan" else float("nan"))
    return "\n".join(lines) + "\n", truth


@dataclass
class Result:
    repo: str
    split: str
    read: bool
    why: str
    nan_found: bool | None = None
    healthy_clean: bool | None = None


def _read_loss(path: Path) -> tuple[list[float] | None, str, list[Any]]:
    from lossdoctor.sources import SourceError, load_path

    try:
        runs = load_path(path)
    except SourceError as exc:
        return None, "refused: " + str(exc).split(": ", 1)[-1][:80], []
    run = max(runs, key=len)
    if not run.has("loss"):
        return None, "no training loss read", runs
    order = np.argsort(run.steps, kind="stable")
    col = np.asarray(run.col("loss"), float)[order]
    logged = np.asarray(run.logged("loss"))[order]
    return [float(x) for x in col[logged]], "", runs


def _same(read: list[float], truth: list[float]) -> str:
    """'' when the series are the same value for value, else what differs first."""
    if len(read) != len(truth):
        return f"{len(read)} losses read, {len(truth)} printed"
    for k, (a, b) in enumerate(zip(read, truth)):
        if math.isnan(b) and math.isnan(a):
            continue
        if not (abs(a - b) <= 1e-6 + 1e-4 * abs(b)):
            return f"line {k}: read {a:g}, printed {b:g}"
    return ""


def judge(entry: dict[str, Any], seed: int, tmp: Path) -> Result:
    from benchmarks.real_logs.split import split_of
    from lossdoctor.detectors.engine import diagnose_runs

    repo = entry["repo"].lower()
    res = Result(repo, split_of(repo), False, "")
    for nan in (False, True):
        text, truth = render(entry, nan, seed)
        path = tmp / f"{'nan' if nan else 'ok'}.log"
        path.write_text(text, encoding="utf-8")
        read, why, runs = _read_loss(path)
        why = why or _same(read or [], truth)
        if not nan:
            res.read, res.why = not why, why
        status = diagnose_runs(runs).to_dict() if runs else None
        alarm = bool(status and status["status"] in ("warning", "critical"))
        if nan:
            first = next((k for k, x in enumerate(read or []) if not math.isfinite(x)), None)
            res.nan_found = first == NAN_FROM and bool(status and status["status"] == "critical")
        else:
            res.healthy_clean = runs != [] and not alarm
    return res


def run_all(split: str) -> list[Result]:
    entries = json.loads(STATEMENTS.read_text(encoding="utf-8"))
    out = []
    with tempfile.TemporaryDirectory() as d:
        for k, e in enumerate(entries):
            bad = check(e)
            if bad:
                continue
            r = judge(e, seed=k, tmp=Path(d))
            if split in ("both", r.split):
                out.append(r)
    return out


def totals(rs: list[Result]) -> dict[str, int]:
    return {
        "statements": len(rs),
        "repositories": len({r.repo for r in rs}),
        "read": sum(r.read for r in rs),
        "refused": sum(r.why.startswith("refused") for r in rs),
        "nan_found": sum(bool(r.nan_found) for r in rs),
        "healthy_clean": sum(bool(r.healthy_clean) for r in rs),
    }


def summary(t: dict[str, int]) -> str:
    n = t["statements"]
    return (
        f"{n} statements from {t['repositories']} repositories: loss read exactly {t['read']}/{n}, "
        f"refused {t['refused']}, NaN found at its line {t['nan_found']}/{n}, healthy clean {t['healthy_clean']}/{n}"
    )


def by_split(rs: list[Result]) -> dict[str, dict[str, int]]:
    return {sp: totals([r for r in rs if r.split == sp]) for sp in ("dev", "test")}


def _baseline(commit: str) -> dict[str, dict[str, int]]:
    """The same statements read by the sources of `commit` (`git archive`), in a fresh process."""
    with tempfile.TemporaryDirectory() as d:
        blob = subprocess.run(["git", "archive", commit, "src"], cwd=ROOT, capture_output=True, check=True).stdout
        with tarfile.open(fileobj=BytesIO(blob)) as t:
            t.extractall(d, filter="data")
        p = subprocess.run(
            [
                sys.executable,
                "-m",
                "benchmarks.print_shapes.score",
                "--json",
                "--src",
                str(Path(d) / "src"),
                "--statements",
                str(STATEMENTS),
            ],
            cwd=ROOT,
            capture_output=True,
            text=True,
            timeout=1200,
        )
    if p.returncode != 0:
        raise SystemExit(f"baseline run failed: {p.stderr[-2000:]}")
    return json.loads(p.stdout.strip().splitlines()[-1])


def table(results: dict[str, dict[str, dict[str, int]]]) -> str:
    rows = [
        "| sources | split | statements (repositories) | loss read exactly | refused | NaN found at its line | healthy clean |",
        "|---|---|---|---|---|---|---|",
    ]
    for label, res in results.items():
        for sp, t in res.items():
            n = t["statements"]
            rows.append(
                f"| {label} | {sp} | {n} ({t['repositories']}) | {t['read']}/{n} | {t['refused']} | "
                f"{t['nan_found']}/{n} | {t['healthy_clean']}/{n} |"
            )
    return "\n".join(rows)


DOC_TEXT = """The logs people paste are printed by their training scripts. `benchmarks/print_shapes/statements.json`
holds {total} print and logging statements copied from {repos} public repositories' training scripts (plain
PyTorch loops, TF/Keras custom loops, JAX, MXNet, Paddle, MindSpore; tutorials, research code, LLM trainers;
each entry names its repository and file; `benchmarks/print_shapes/README.md` says how they were gathered),
each rewritten once as a template over named roles (`step`, `epoch`, `loss`, `lr`, ...). Every template with a
training loss is rendered as a 60-line log with made-up numbers, twice (a healthy falling curve; the same curve
NaN from line 45 on), and read by `load_path` (what `lossdoctor diagnose FILE` does): *read exactly* = the
training loss read back value for value in order (the step's value where the statement prints one, else its
running average); *NaN found* = the first non-finite loss read at line 45 and a critical finding; *healthy
clean* = no warning or critical finding on the healthy curve. Statements that print only components or a
perplexity are left out. Split by repository with the real-log corpus's rule: the reader was changed while
looking at **dev** misses only (in-sample); **test** is held out. The statements were gathered after the
reader's earlier changes and never looked at before the baseline below was measured."""


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--split", default="both", choices=("dev", "test", "both"))
    ap.add_argument("--misses", action="store_true", help="list the dev misses (never the test ones)")
    ap.add_argument("--baseline", help="a commit whose reader reads the same statements, shown beside")
    ap.add_argument("--docs", action="store_true", help="write the section of docs/benchmarks.md")
    ap.add_argument("--json", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--src", default=str(ROOT / "src"), help=argparse.SUPPRESS)
    ap.add_argument("--statements", help="another statements file of the same shape (a new batch, measured alone)")
    args = ap.parse_args(argv)
    sys.path[:0] = [args.src, str(ROOT)]
    if args.statements:
        global STATEMENTS
        STATEMENTS = Path(args.statements).resolve()
    rs = run_all(args.split)
    res = by_split(rs)
    if args.json:
        print(json.dumps(res))
        return 0
    for sp, t in res.items():
        if t["statements"]:
            print(f"{sp}: {summary(t)}")
    if args.misses:
        for r in rs:
            if r.split == "dev" and not (r.read and r.nan_found and r.healthy_clean):
                print(f"  {r.repo:40s} read={r.read} nan={r.nan_found} clean={r.healthy_clean} {r.why}")
    results = {"this checkout": res}
    if args.baseline:
        results[f"commit {args.baseline}"] = _baseline(args.baseline)
        print(table(results))
    if args.docs:
        from benchmarks.docs import command_line, provenance, write_section

        entries = json.loads(STATEMENTS.read_text(encoding="utf-8"))
        text = DOC_TEXT.format(total=len(entries), repos=len({e["repo"].lower() for e in entries}))
        body = "## Print statements from training scripts\n\n" + provenance(command_line()) + "\n\n" + text
        write_section("print-shapes", body + "\n\n" + table(results))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
