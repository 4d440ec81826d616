"""Sources: read a run directory or a foreign training log into `Run` records.

`load_path(path)` auto-detects the format. Every reader returns a list of `Run` (one per rank) and
raises `SourceError` with one clear sentence for input it cannot use; the CLI turns that into
exit code 2.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Callable

from ..records import Run


class SourceError(Exception):
    """Bad or unsupported input: the message is one line meant for the user."""


#: (name, sniff(path) -> bool, read(path) -> list[Run]); tried in order.
READERS: list[tuple[str, Callable[[Path], bool], Callable[[Path], list[Run]]]] = []


def reader(name: str, sniff: Callable[[Path], bool]) -> Callable:
    def register(fn: Callable[[Path], list[Run]]) -> Callable[[Path], list[Run]]:
        READERS.append((name, sniff, fn))
        return fn

    return register


def _load_readers() -> None:
    from . import rundir  # noqa: F401  (registers itself)


def load_path(path: str | os.PathLike[str]) -> list[Run]:
    p = Path(path)
    if not p.exists():
        raise SourceError(f"{p}: no such file or directory")
    _load_readers()
    for name, sniff, read in READERS:
        try:
            ok = sniff(p)
        except OSError:
            ok = False
        if ok:
            runs = read(p)
            if not runs or all(len(r) == 0 for r in runs):
                raise SourceError(f"{p}: the {name} log holds no training steps")
            return runs
    if p.is_dir():
        raise SourceError(f"{p}: no known training log in this directory")
    raise SourceError(f"{p}: not a log format lossdoctor knows")
