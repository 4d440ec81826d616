"""Training stdout of Megatron-LM / GPT-NeoX / Megatron-DeepSpeed and DeepSpeed, read in one pass.

The line formats are in `megatron.py` and `deepspeed.py`. A Megatron-DeepSpeed log holds both
kinds (Megatron's iteration lines and DeepSpeed's overflow lines), so they are merged by step.

Interval counts become per-step-compatible columns: `skipped` is the *fraction* of the interval's
iterations that were skipped (0/1 on a per-step log, the same meaning), and the raw counts stay in
`skipped_in_interval` / `nan_in_interval` for the report.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import numpy as np

from ..records import Run, from_columns
from . import SourceError, reader
from . import deepspeed as ds
from . import megatron as mg
from .files import head, looks_binary

_SNIFF_BYTES = 8 << 20
_ANY = re.compile(rb"\biteration\s+\d+\s*/\s*\d+\s*\|.*loss|\bstep=\d+,\s*skipped=\d+|"
                  rb"Attempted loss scale:|Grad overflow on iteration")


def _sniff(p: Path) -> bool:
    if not p.is_file():
        return False
    data = head(p, _SNIFF_BYTES)
    if looks_binary(data[:65536]):
        return False
    # literal pre-check (a fast byte scan) before the regular expression over 8 MB
    if not any(m in data for m in (b"iteration", b"step=", b"Attempted loss scale", b"Grad overflow")):
        return False
    return _ANY.search(data) is not None


def parse(lines, notes: list[str]) -> tuple[list[dict[str, Any]], dict[str, Any], dict[str, int]]:
    """(rows, Megatron args, counts of each kind of line)."""
    rows: list[dict[str, Any]] = []
    args: dict[str, Any] = {}
    counts = {"megatron": 0, "ds_step": 0, "ds_overflow": 0, "grad_overflow": 0}
    in_args = False
    last_marker = -1
    since_marker = 0
    prev_skipped_total = 0
    placed_guess = False
    for line in lines:
        if in_args:
            if mg.ARGS_END.search(line):
                in_args = False
                continue
            kv = mg.parse_arg(line)
            if kv:
                args.setdefault(kv[0], kv[1])
                continue
        elif mg.ARGS_START.search(line):
            in_args = True
            continue
        row = mg.parse_iteration(line)
        if row is not None:
            counts["megatron"] += 1
            rows.append(row)
            last_marker, since_marker = row["step"], 0
            continue
        row = ds.parse_step(line)
        if row is not None:
            counts["ds_step"] += 1
            total = row.pop("skipped_total")
            row["skipped_in_interval"] = max(0, total - prev_skipped_total)
            prev_skipped_total = total
            rows.append(row)
            last_marker, since_marker = row["step"], 0
            continue
        it = ds.parse_grad_overflow(line)
        if it is not None:
            counts["grad_overflow"] += 1
            rows.append({"step": it, "skipped": 1.0})
            last_marker, since_marker = it, 0
            continue
        ov = ds.parse_overflow(line)
        if ov is not None:
            counts["ds_overflow"] += 1
            attempted, reduced = ov
            if rows and rows[-1].get("skipped") == 1.0 and rows[-1]["step"] == last_marker + since_marker \
                    and "scale" not in rows[-1] and since_marker == 0:
                rows[-1]["scale"] = reduced  # the "Grad overflow on iteration N" line just before
                continue
            since_marker += 1
            step = last_marker + since_marker
            placed_guess = True
            if since_marker == 1 and np.isfinite(attempted):
                rows.append({"step": step - 1, "scale": attempted, "_weak": True})
            rows.append({"step": step, "scale": reduced, "skipped": 1.0})
    if placed_guess:
        notes.append("DeepSpeed prints no step with an OVERFLOW line: overflows were placed on the "
                      "steps right after the last step=/iteration line")
    return rows, args, counts


def rows_to_run(rows: list[dict[str, Any]], args: dict[str, Any], counts: dict[str, int], what: str,
                notes: list[str]) -> Run:
    # a scale guessed from "Attempted loss scale" must not overwrite a logged one at that step
    logged_scale_steps = {r["step"] for r in rows if "scale" in r and not r.get("_weak")}
    rows = [r for r in rows if not (r.get("_weak") and r["step"] in logged_scale_steps)]
    rows.sort(key=lambda r: r["step"])
    steps = np.array([r["step"] for r in rows], dtype=np.float64)
    meta: dict[str, Any] = {"framework": "megatron" if counts["megatron"] else "deepspeed"}
    meta.update(mg.args_meta(args))
    if args:
        meta["args"] = {k: v for k, v in args.items() if isinstance(v, (int, float, str, bool))}
    if counts["megatron"]:
        meta["loss_is_interval_mean"] = True
    names = ("loss", "lr", "scale", "grad_norm", "param_norm", "skipped", "batch_size",
             "skipped_in_interval", "nan_in_interval")
    cols: dict[str, np.ndarray] = {}
    logged: dict[str, np.ndarray] = {}
    for name in names:
        present = np.array([name in r for r in rows])
        if present.any():
            cols[name] = np.array([float(r.get(name, np.nan)) for r in rows])
            logged[name] = present
    if "skipped_in_interval" in cols:
        interval = np.diff(steps, prepend=steps[0] - float(meta.get("log_interval", 1) or 1))
        interval = np.maximum(interval, 1.0)
        frac = np.clip(cols["skipped_in_interval"] / interval, 0.0, 1.0)
        lg = logged["skipped_in_interval"]
        base = cols.get("skipped", np.full(len(rows), np.nan))
        cols["skipped"] = np.where(lg & np.isnan(base), frac, base)
        logged["skipped"] = logged.get("skipped", np.zeros(len(rows), dtype=bool)) | lg
    if "loss" not in cols and "scale" not in cols:
        raise SourceError(f"{what}: found {sum(counts.values())} DeepSpeed/Megatron line(s) but no loss "
                          "or loss scale in them")
    kinds = [f"{n} {k}" for k, n in (("Megatron iteration lines", counts["megatron"]),
                                    ("DeepSpeed step= lines", counts["ds_step"]),
                                    ("DeepSpeed OVERFLOW lines", counts["ds_overflow"]),
                                    ("Grad overflow lines", counts["grad_overflow"])) if n]
    notes.insert(0, f"{what}: read {', '.join(kinds)}")
    absent = [n for c, n in (("loss", "the training loss"), ("grad_norm", "the gradient norm"),
                             ("scale", "the loss scale")) if c not in cols]
    if absent:
        notes.insert(1, f"not in this log: {', '.join(absent)}")
    run = from_columns(steps, cols, meta=meta, source=meta["framework"], logged=logged)
    run.notes.extend(notes)
    return run


@reader("Megatron/DeepSpeed log", _sniff, priority=80)
def read(path: Path) -> list[Run]:
    notes: list[str] = []
    with open(path, encoding="utf-8", errors="replace") as f:
        rows, args, counts = parse(f, notes)
    if not rows:
        raise SourceError(f"{path}: no Megatron iteration or DeepSpeed step lines")
    return [rows_to_run(rows, args, counts, path.name, notes)]
