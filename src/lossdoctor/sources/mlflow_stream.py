"""MLflow metrics merged by step as they are read, into one bounded store.

Why: each MLflow metric is its own series (a file store's `metrics/<name>` file, a SQLite store's
rows of one key), and read whole, every metric's steps and values and then the columns aligned on
their steps grew with the run's length, whatever the thinning the CSV and JSON-lines tables get.
Here the chosen metrics (one per records column) are read a chunk at a time each and merged as
they go: the points of every metric up to the smallest step any unfinished metric has reached are
put on the union of their steps (`columns.aligned`, as the whole read puts them) and appended to a
`records.StepColumns`, which past `Thinning.max_rows` rows thins the middle of the run by the rules
the other streamed readers use (the head and the tail kept, every non-finite loss or grad norm
point's neighbours and the first `nonfinite_keep` of them, outliers such as a spike, the rare rows).
Below that bound nothing is dropped and the columns are those the whole read gave.

A metric this merge cannot take in order raises `NotStreamable`, and the caller reads the run whole
as before: a step that does not increase in logging order (a step logged twice, a restarted run,
`log_metric` without `step=`), a damaged or unparsable line (its note names the line), a SQLite
store without steps or with negative ones (renumbered in the whole read).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import numpy as np

from ..records import THINNING, StepColumns, Thinning
from .columns import aligned

#: one chunk of one metric: (steps, values), in logging order
Chunk = tuple[np.ndarray, np.ndarray]

#: rows of a SQLite metric fetched at a time (measured: ~2 MB of Python tuples, a few ms a fetch)
DB_CHUNK = 1 << 16


class NotStreamable(Exception):
    """This metric cannot be merged while it is read: the run is read whole instead."""


class _Feed:
    """One metric's chunks and the points of them not yet merged (at most one chunk's worth)."""

    def __init__(self, chunks: Iterator[Chunk]) -> None:
        self.chunks = chunks
        self.steps = np.zeros(0, dtype=np.int64)
        self.values = np.zeros(0)
        self.done = False
        self.last: int | None = None  # the last step read
        self.count = 0  # points read

    def fill(self) -> None:
        """Read chunks until one holds a point or none is left; steps must strictly increase."""
        while not self.steps.size and not self.done:
            nxt = next(self.chunks, None)
            if nxt is None:
                self.done = True
                return
            s, v = nxt
            if not s.size:
                continue
            if (s[1:] <= s[:-1]).any() or (self.last is not None and s[0] <= self.last):
                raise NotStreamable
            self.steps, self.values = s, v
            self.last = int(s[-1])
            self.count += int(s.size)

    def take(self, bound: int) -> Chunk:
        """The points held with a step at most `bound` (removed from the feed)."""
        k = int(np.searchsorted(self.steps, bound, side="right"))
        out = self.steps[:k], self.values[:k]
        self.steps, self.values = self.steps[k:], self.values[k:]
        return out


def merge(feeds: dict[str, Iterator[Chunk]], rules: Thinning = THINNING) -> tuple[StepColumns, dict[str, int]]:
    """column -> its metric's chunks => the store of the columns on the union of their steps, and
    how many points each metric had. Every point up to the smallest last step held by a metric not
    yet finished is merged at once: later points of every metric come after it, so the chunks'
    unions, one after the other, are the union of the whole series."""
    fs = {col: _Feed(it) for col, it in feeds.items()}
    store = StepColumns((), rules)
    try:
        while True:
            for f in fs.values():
                f.fill()
            held = [f for f in fs.values() if f.steps.size]
            if not held:
                break
            ends = [int(f.steps[-1]) for f in held if not f.done]
            bound = min(ends) if ends else max(int(f.steps[-1]) for f in held)
            taken = {col: f.take(bound) for col, f in fs.items() if f.steps.size}
            steps, cols, logged = aligned({col: t for col, t in taken.items() if t[0].size})
            store.append_arrays(steps.astype(np.float64), cols, logged=logged)
            del taken, cols, logged
    finally:
        for it in feeds.values():
            close = getattr(it, "close", None)
            if close is not None:
                close()  # a generator holding a file or a cursor left unfinished
    return store, {col: f.count for col, f in fs.items()}


def db_chunks(con: Any, query: str, args: tuple[Any, ...], convert: Any) -> Iterator[Chunk]:
    """A SQLite metric's rows (step, value, is_nan), `DB_CHUNK` at a time, as (steps, values) by
    `convert` (the whole read's conversion of the rows); a negative step is not streamed."""
    cur = con.execute(query, args)
    try:
        while True:
            rows = cur.fetchmany(DB_CHUNK)
            if not rows:
                return
            steps, values = convert(rows)
            if steps.size and (steps < 0).any():
                raise NotStreamable
            yield steps, values
    finally:
        cur.close()
