"""The readers' registry: `SourceError` and `@reader(...)`. A module of its own so that each
reader imports it, and the package (`load_path`, which imports the readers when first used) is
imported by no reader: no import cycle between the package and its readers."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from ..records import Run


class SourceError(Exception):
    """Bad or unsupported input: the message is one line meant for the user."""


class NoReader(SourceError):
    """A directory no reader takes (it may still hold several runs, one per sub-folder)."""


#: (name, sniff(path) -> bool, read(path) -> list[Run]); tried in order of priority.
READERS: list[tuple[str, Callable[[Path], bool], Callable[..., list[Run]]]] = []  # read(path[, select])
_PRIORITY: dict[str, int] = {}


def reader(name: str, sniff: Callable[[Path], bool], *, priority: int = 50) -> Callable:
    """Register a reader. Lower `priority` is tried first: specific formats (a file name or a magic
    header) before generic ones (any CSV, any JSON lines), which register with 90."""

    def register(fn: Callable[[Path], list[Run]]) -> Callable[[Path], list[Run]]:
        READERS.append((name, sniff, fn))
        _PRIORITY[name] = priority
        READERS.sort(key=lambda r: _PRIORITY.get(r[0], 50))
        return fn

    return register
