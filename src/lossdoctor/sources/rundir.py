"""Reader for lossdoctor's own run directory (written by `watch`)."""

from __future__ import annotations

from pathlib import Path

from ..records import Run
from ..runlog import is_run_dir, read_run_dir
from .registry import reader


@reader("lossdoctor run directory", lambda p: is_run_dir(p), priority=0)
def read(path: Path) -> list[Run]:
    return read_run_dir(path)
