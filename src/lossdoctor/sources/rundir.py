"""Reader for lossdoctor's own run directory (written by `watch`).

A directory used as `log_dir` by several runs keeps the first run in itself ("version_0") and each
later one in `version_N/` (`runlog.claim_run_dir`): the newest is read, with a note naming the
others; `select` (`diagnose --run version_0`, or just `0`) reads another. Two runs are never mixed.
"""

from __future__ import annotations

from pathlib import Path

from ..messages import Msg
from ..records import Run
from ..runlog import VERSION_PREFIX, is_run_dir, read_run_dir, run_versions
from .registry import SourceError, reader


def choose_version(path: Path, select: str | None = None) -> tuple[Path, str, list[str]]:
    """(the directory of the chosen run, its name, notes): the newest, or the one `select` names."""
    versions = run_versions(path)
    if not versions:
        return path, f"{VERSION_PREFIX}0", []
    names = [n for n, _ in versions]
    if select is None:
        name, d = versions[-1]
        notes: list[str] = [Msg("source.rundir_versions", path=str(path), n=len(versions), names=", ".join(names),
                                chosen=name)] if len(versions) > 1 else []
        return d, name, notes
    want = select if select.startswith(VERSION_PREFIX) else f"{VERSION_PREFIX}{select}"
    for name, d in versions:
        if name == want:
            return d, name, []
    raise SourceError(Msg("source.rundir_no_version", path=str(path), want=select, names=", ".join(names)))


@reader("lossdoctor run directory", lambda p: is_run_dir(p), priority=0)
def read(path: Path, select: str | None = None) -> list[Run]:
    d, name, notes = choose_version(path, select)
    runs = read_run_dir(d)
    for run in runs:
        run.notes[:0] = notes
        if d != path:
            run.meta["run_version"] = name
    return runs
