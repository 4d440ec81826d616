"""A folder of W&B panel exports: one CSV per chart, as W&B's "Export panel data" writes them
(`Step,<run> - <metric>,<run> - <metric>__MIN,<run> - <metric>__MAX`), read as one run: each file's
metric (of the first run it names, as the single-file CSV reader does) on the union of their steps.

A folder is taken only when every CSV directly in it is such an export (at most `MAX_FILES`), so a
folder of other tables is left to the other readers."""

from __future__ import annotations

import csv
import os
from pathlib import Path
from typing import Any

import numpy as np

from ..records import Run
from .files import text_head
from .registry import SourceError, reader
from .tabular import is_wandb_export, parse_str_column, read_csv_table, table_run, wandb_export_names

#: the most CSV files a panel folder is read from (one per chart: a workspace has tens)
MAX_FILES = 200


def _header(path: Path) -> list[str] | None:
    t = text_head(path, 8192)
    if t is None:
        return None
    line = t.lstrip("\ufeff").split("\n", 1)[0].rstrip("\r")
    try:
        return [n.strip() for n in next(csv.reader([line]))]
    except (csv.Error, StopIteration):
        return None


def panel_files(folder: Path) -> list[Path]:
    """The folder's CSV files when there are some and every one is a W&B panel export, else []."""
    if not folder.is_dir():
        return []
    try:
        entries = sorted((e for e in os.scandir(folder) if e.name.lower().endswith(".csv")), key=lambda e: e.name)
    except OSError:
        return []
    if not entries or len(entries) > MAX_FILES:
        return []
    out = []
    for e in entries:
        if not e.is_file(follow_symlinks=False):
            return []
        names = _header(Path(e.path))
        if names is None or not is_wandb_export(names):
            return []
        out.append(Path(e.path))
    return out


def _floats(v: Any, mask: np.ndarray | None) -> tuple[np.ndarray, np.ndarray]:
    if isinstance(v, np.ndarray) and v.dtype.kind == "f":
        return v, (np.ones(len(v), dtype=bool) if mask is None else mask)
    vals, m, _ = parse_str_column(v)
    return vals, m


def _step_name(names: list[str]) -> str | None:
    return next((n for n in names if n in ("Step", "_step")), None) or next(
        (n for n in names if n.lower().endswith("step")), None
    )


def _series(path: Path) -> tuple[dict[str, tuple[np.ndarray, np.ndarray, np.ndarray]], list[str]]:
    """metric -> (steps, values, logged) of one export file, and its notes."""
    t = read_csv_table(path)
    names, cols, logged, notes, nrows = t.names, t.cols, t.logged, t.notes, t.nrows
    step = _step_name(names)
    if nrows == 0 or step is None or step not in cols:
        return {}, notes
    steps, smask = _floats(cols[step], logged.get(step))
    _, rename, more = wandb_export_names(names)
    out = {}
    for old, metric in rename.items():
        if old in cols:
            vals, mask = _floats(cols[old], logged.get(old))
            ok = smask & np.isfinite(steps)
            out[metric] = (steps[ok], vals[ok], mask[ok])
    return out, notes + more


@reader("W&B panel exports", lambda p: bool(panel_files(p)), priority=40)
def read(path: Path) -> list[Run]:
    series: dict[str, tuple[np.ndarray, np.ndarray, np.ndarray]] = {}
    notes: list[str] = []
    for f in panel_files(path):
        found, more = _series(f)
        notes.extend(more)
        for metric, s in found.items():
            series.setdefault(metric, s)  # a metric in two files: the first file's
    if not series:
        raise SourceError(f"{path}: the W&B panel exports hold no step column with values")
    union = np.unique(np.concatenate([s[0] for s in series.values()]))
    cols: dict[str, Any] = {"Step": union}
    masks: dict[str, np.ndarray] = {"Step": np.ones(len(union), dtype=bool)}
    for metric, (steps, vals, mask) in series.items():
        col, m = np.full(len(union), np.nan), np.zeros(len(union), dtype=bool)
        idx = np.searchsorted(union, steps)
        col[idx], m[idx] = vals, mask
        cols[metric], masks[metric] = col, m
    return [
        table_run(list(cols), cols, source="wandb_csv", what=path.name, notes=notes, logged=masks, nrows=len(union))
    ]
