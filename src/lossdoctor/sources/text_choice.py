"""Which text reader's reading of a log to keep: the named console/CSV/JSON-lines readers take a text
first; where their reading is weak (lines numbered in order because no step was found, lines left
unread, no loss), the general reader (`any_text`) reads the same text too, and the better reading is
kept. Better is decided on what each reading holds, in this order: a training loss (or the reason
there is none: two adversaries' losses); steps from the log's own counters rather than line
numbers; more loss points; more series. A tie keeps the named reader's reading.

The general reader reads only texts the named readers read weakly, so a log they read well costs
nothing more (`benchmarks/diagnose_1m.py --only-console`), and only texts up to MAX_COMPARED_BYTES."""

from __future__ import annotations

from pathlib import Path

from ..records import Run
from .registry import SourceError

#: readers whose reading of a text is always compared (a tab- or comma-separated text can be a table
#: with cells the CSV reader drops, such as a notebook's `No log`)
_ALWAYS = frozenset({"CSV log"})


#: a text larger than this keeps the named reader's reading: a second read would add ~10 s per million
#: lines (the general reader's pace on the ImageNet meter lines of `benchmarks/diagnose_1m.py`)
MAX_COMPARED_BYTES = 32 << 20


def weak(name: str, runs: list[Run]) -> bool:
    if len(runs) != 1:
        return False
    run = runs[0]
    # rows not at the log's steps, or lines left unread (the readers' meta says so)
    return (
        name in _ALWAYS
        or not run.has("loss")
        or run.meta.get("steps_from", "log") != "log"
        or bool(run.meta.get("lines_unread"))
        or bool(run.meta.get("steps_collapsed"))
    )


def score(run: Run) -> tuple[bool, bool, int, int]:
    has = run.has("loss") or bool(run.meta.get("adversaries"))  # a GAN's two losses: no training loss, said why
    n = int(run.logged("loss").sum()) if has else 0
    return has, run.meta.get("steps_from", "log") != "numbered", n, sum(1 for c in run.cols if run.has(c))


def better_of(name: str, path: Path, runs: list[Run]) -> list[Run]:
    """`runs` as the named reader `name` read them, or the general reader's reading when it is better."""
    if not weak(name, runs) or path.stat().st_size > MAX_COMPARED_BYTES or runs[0].meta.get("node_copies"):
        return runs  # (a reading that found each node's copy of a record knows more than a count of lines)
    from . import any_text

    try:
        general = any_text.read(path)
    except SourceError:
        return runs
    if score(general[0]) <= score(runs[0]):
        return runs
    general[0].meta["format"] = "training text"  # the reader that read it, not the one that sniffed it
    return general
