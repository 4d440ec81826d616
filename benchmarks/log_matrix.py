#!/usr/bin/env python3
"""The format x fault x interleaving matrix (`tests/log_matrix.py`): how often `lossdoctor diagnose FILE`
reads a generated log exactly (read rate) and gives the right verdict (the fault's symptom among the
first two alarms, dated within one logged row of its window; a healthy log: no warning or critical
finding), per format, per fault and per interleaving, and the failing combinations.

    python benchmarks/log_matrix.py [--seed 0] [--per-pair 2] [--full] [--fails 40] [--json OUT] [--src DIR]

`--src DIR` reads with the sources in DIR (e.g. `git worktree add /tmp/base main` and `--src /tmp/base/src`):
the same matrix, an older reader.

In-sample for the reader changes made while it was built (issue 25); the logs are generated, not real.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
#: `--src DIR` (first on the command line) reads with another checkout's sources (a baseline)
_SRC = sys.argv[sys.argv.index("--src") + 1] if "--src" in sys.argv else str(ROOT / "src")
sys.path[:0] = [_SRC, str(ROOT / "tests"), str(ROOT)]

import log_matrix as lm  # noqa: E402


def run(cases: list[lm.Case]) -> list[lm.Result]:
    out = []
    with tempfile.TemporaryDirectory() as d:
        for k, c in enumerate(cases):
            sub = Path(d) / str(k)
            sub.mkdir()
            out.append(lm.judge(c, sub))
    return out


def table(results: list[lm.Result], key, title: str) -> str:
    by: dict[str, list[lm.Result]] = defaultdict(list)
    for r in results:
        for k in key(r):
            by[k].append(r)
    rows = [f"| {title} | cases | read | verdict |", "|---|---|---|---|"]
    for k in sorted(by):
        rs = by[k]
        rows.append(f"| {k} | {len(rs)} | {sum(r.read_ok for r in rs)} | {sum(r.verdict_ok for r in rs)} |")
    return "\n".join(rows)


def summary(results: list[lm.Result]) -> dict:
    def rates(key):
        by: dict[str, list[int]] = defaultdict(lambda: [0, 0, 0])
        for r in results:
            for k in key(r):
                by[k][0] += 1
                by[k][1] += r.read_ok
                by[k][2] += r.verdict_ok
        return dict(sorted(by.items()))

    return {
        "cases": len(results),
        "read": sum(r.read_ok for r in results),
        "verdict": sum(r.verdict_ok for r in results),
        "format": rates(lambda r: [r.case.fmt]),
        "fault": rates(lambda r: [r.case.curve]),
        "interleaving": rates(lambda r: list(r.case.inter)),
        "failing": {r.case.name: [r.read_why, r.verdict_why] for r in results if not (r.read_ok and r.verdict_ok)},
    }


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--per-pair", type=int, default=2)
    ap.add_argument("--full", action="store_true", help="every format x fault x single interleaving")
    ap.add_argument("--fails", type=int, default=40, help="how many failing combinations to print")
    ap.add_argument("--format", action="append", help="only these formats")
    ap.add_argument("--json", help="write the summary as JSON here")
    ap.add_argument("--src", help="read with the lossdoctor sources of this directory (a baseline checkout's src/)")
    args = ap.parse_args()
    cases = lm.full_product(args.seed) if args.full else lm.cases(args.seed, args.per_pair, formats=args.format)
    if args.format and args.full:
        cases = [c for c in cases if c.fmt in args.format]
    t0 = time.perf_counter()
    results = run(cases)
    dt = time.perf_counter() - t0
    n = len(results)
    read, ok = sum(r.read_ok for r in results), sum(r.verdict_ok for r in results)
    import lossdoctor

    where = "" if args.src is None else f", sources {Path(lossdoctor.__file__).parents[1]}"
    print(
        f"log matrix: {n} cases (seed {args.seed}{', full product' if args.full else ''}{where}), {dt:.1f} s: "
        f"read {read}/{n} ({100 * read / n:.0f}%), verdict {ok}/{n} ({100 * ok / n:.0f}%)\n"
    )
    print(table(results, lambda r: [r.case.fmt], "format") + "\n")
    print(table(results, lambda r: [r.case.curve], "fault") + "\n")
    print(table(results, lambda r: list(r.case.inter), "interleaving") + "\n")
    bad = [r for r in results if not (r.read_ok and r.verdict_ok)]
    print(f"failing combinations: {len(bad)}")
    for r in bad[: args.fails]:
        print(
            f"- {r.case.name}: "
            + "; ".join(x for x in (r.read_why, r.verdict_why) if x)
            + f"  [{r.status}: {r.findings[:2]}]"
        )
    if args.json:
        Path(args.json).write_text(json.dumps(summary(results), indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
