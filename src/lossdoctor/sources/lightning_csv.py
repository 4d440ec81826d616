"""Lightning `CSVLogger`: `metrics.csv`, or a `lightning_logs/version_N/` directory (or its parent).

The CSVLogger writes one row per logging call with the union of all columns seen, so rows are
sparse: `LearningRateMonitor` writes `lr-<Optimizer>` on one row and `self.log("train_loss", ...)`
another row at the same `step`. The table reader merges rows by step (each column keeps its value
at that step). `*_epoch` aggregates are used only when no per-step column exists. Several
`version_N` directories are several runs: the highest N is read and the others named in a note.
"""

from __future__ import annotations

from pathlib import Path

from ..messages import Msg
from ..records import Run
from .files import numbered, walk
from .registry import SourceError, reader
from .tabular import read_csv

METRICS = "metrics.csv"


def _candidates(d: Path) -> list[Path]:
    return walk(d, lambda n: n == METRICS, max_depth=3)


def _sniff(p: Path) -> bool:
    if p.is_file():
        return p.name == METRICS
    return bool(_candidates(p))


@reader("Lightning metrics.csv", _sniff, priority=20)
def read(path: Path) -> list[Run]:
    notes: list[str] = []
    if path.is_dir():
        found = _candidates(path)
        if not found:
            raise SourceError(f"{path}: no {METRICS} here")
        f = max(found, key=lambda c: (numbered(c.parent, r"version_(\d+)"), c.stat().st_mtime))
        if len(found) > 1:
            notes.append(Msg("source.lightning_runs", n=len(found), chosen=str(f.parent.relative_to(path))))
    else:
        f = path
    runs = read_csv(f, source="lightning_csv", what=f"{f.parent.name}/{f.name}", meta={"framework": "lightning"})
    for r in runs:
        r.notes.extend(notes)
        if not r.has("grad_norm"):
            r.notes.append(Msg("source.lightning_log_grad_norm"))
    return runs
