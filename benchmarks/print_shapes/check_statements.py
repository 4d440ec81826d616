#!/usr/bin/env python3
"""Checks `statements.json`: every entry has its fields, and every template (and prefix) formats with
typed values for each role, so a template the lead renders cannot fail on a name or a format spec.

    python benchmarks/print_shapes/check_statements.py [benchmarks/print_shapes/statements.json]

Counters are ints, values floats, clock/asctime/levelname/name/loss_tensor strings; a counter
without an integer spec must also render from a float (scripts print `epoch + 1.0` or a float step).
Exit code 1 with one line per bad entry.
"""

from __future__ import annotations

import json
import string
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
COUNTERS = {"step", "total_steps", "epoch", "epochs", "batch", "batches", "samples", "total_samples"}
VALUES = {
    "percent", "loss", "avg_loss", "loss_a", "loss_b", "loss_c", "ppl", "val_loss", "lr", "acc", "val_acc",
    "grad_norm", "loss_scale", "time", "speed", "x1", "x2", "x3",
}  # fmt: skip
TEXTS = {
    "loss_tensor": "tensor(0.6931, device='cuda:0', grad_fn=<NllLossBackward0>)",
    "clock": "0:01:23",
    "asctime": "2024-01-01 12:00:00,000",
    "levelname": "INFO",
    "name": "__main__",
}
ROLES = COUNTERS | VALUES | set(TEXTS)
REQUIRED = {"repo", "path", "source", "template", "per", "prefix", "lang"}
INT_SPECS = tuple("dxXob")


def _fields(template: str) -> list[tuple[str, str]]:
    return [(f, spec or "") for _, f, spec, _ in string.Formatter().parse(template) if f is not None]


def template_errors(template: str) -> list[str]:
    """Why `template` would not render: unknown or positional fields, or a spec its role's type fails."""
    fields = _fields(template)
    unknown = sorted({f for f, _ in fields if f not in ROLES})
    if unknown:
        return [f"unknown fields {unknown}"]
    values: dict[str, object] = {k: 7 for k in COUNTERS} | {k: 0.123456 for k in VALUES} | TEXTS
    for f, spec in fields:
        if f in ("x1", "x2", "x3") and spec.endswith(INT_SPECS):
            values[f] = 3  # an integer-valued extra number (a session id, a count)
    errors = []
    try:
        template.format(**values)
    except (ValueError, TypeError, KeyError, IndexError) as ex:
        errors.append(f"format: {ex!r}")
    for f, spec in fields:
        if f in COUNTERS and not spec.endswith(INT_SPECS):
            try:
                ("{%s:%s}" % (f, spec)).format(**{f: 7.0})  # noqa: UP031 (builds a format template)
            except ValueError as ex:
                errors.append(f"{f} from a float: {ex!r}")
    return errors


def entry_errors(entry: dict) -> list[str]:
    errors = []
    if not REQUIRED <= set(entry) or set(entry) - REQUIRED - {"notes"}:
        errors.append(f"keys {sorted(entry)}")
        return errors
    if entry["per"] not in ("step", "batch", "epoch"):
        errors.append(f"per {entry['per']!r}")
    if entry["lang"] not in ("en", "zh"):
        errors.append(f"lang {entry['lang']!r}")
    if len(entry["source"]) > 300:
        errors.append("source over 300 characters")
    if entry["repo"].count("/") != 1:
        errors.append(f"repo {entry['repo']!r}")
    errors += template_errors(entry["template"])
    if entry["prefix"] is not None:
        errors += [f"prefix {e}" for e in template_errors(entry["prefix"])]
    return errors


def main(argv: list[str]) -> int:
    path = Path(argv[0]) if argv else HERE / "statements.json"
    entries = json.loads(path.read_text(encoding="utf-8"))
    bad = 0
    per_repo: dict[str, int] = {}
    for i, entry in enumerate(entries):
        per_repo[entry.get("repo", "")] = per_repo.get(entry.get("repo", ""), 0) + 1
        errors = entry_errors(entry)
        if errors:
            bad += 1
            print(f"{i} {entry.get('repo')} {entry.get('path')}: {'; '.join(errors)}")
    over = {r: n for r, n in per_repo.items() if n > 2}
    if over:
        bad += 1
        print(f"more than 2 entries from one repository: {over}")
    print(f"{len(entries)} entries, {len(per_repo)} repositories, {bad} bad")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
