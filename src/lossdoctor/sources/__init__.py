"""Sources: read a run directory or a foreign training log into `Run` records.

`load_path(path)` auto-detects the format. Every reader returns a list of `Run` (one per rank) and
raises `SourceError` with one clear sentence for input it cannot use; the CLI turns that into
exit code 2. A reader that could read only part of a file (a truncated JSON, a torn last line)
returns what it read and says so in `run.notes`.

After a reader returns, `load_path` adds what every format shares: `meta["format"]`,
`meta["path"]`, `meta["log_interval"]` (the typical gap between logged loss points) and a note when
the log is too sparse to localise a fault to a step.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

import numpy as np

from ..messages import Msg
from ..records import Run
from .registry import READERS, NoReader, SourceError, reader  # noqa: F401  (the readers' registry, re-exported)

_loaded = False


def _load_readers() -> None:
    """Import the readers (they register themselves with a priority: the most specific formats
    first, the generic CSV/JSONL last)."""
    global _loaded
    if _loaded:
        return
    from . import (
        any_text,  # noqa: F401  (the general reader of training text: tried last; and named arrays)
        hf_trainer,  # noqa: F401
        lightning_csv,  # noqa: F401
        mlflow_store,  # noqa: F401
        parallel_logs,  # noqa: F401  (TP/PP consoles: which rank's metric lines are read)
        rundir,  # noqa: F401
        stdout,  # noqa: F401
        tabular,  # noqa: F401
        tensorboard,  # noqa: F401
        wandb,  # noqa: F401
        wandb_panels,  # noqa: F401
    )

    _loaded = True


#: short names for `--format-in` -> the registered reader's name
FORMAT_NAMES = {
    "console": "console log",
    "stdout": "console log",
    "text": "console log",
    "hf-console": "console log",
    "tqdm": "console log",
    "megatron": "console log",
    "deepspeed": "console log",
    "nanogpt": "console log",
    "litgpt": "console log",
    "mlx-lm": "console log",
    "torchtitan": "console log",
    "trainer-state": "Hugging Face trainer_state.json",
    "tensorboard": "TensorBoard event file",
    "csv": "CSV log",
    "jsonl": "JSON-lines log",
    "lightning": "Lightning metrics.csv",
    "wandb": "W&B run",
    "wandb-panels": "W&B panel exports",
    "rundir": "lossdoctor run directory",
    "any-text": "training text",
    "general": "training text",
}


def reader_names() -> list[str]:
    return sorted(FORMAT_NAMES)


#: readers that hold several runs and can read the one `select` names (`diagnose --run`)
SELECTABLE = ("MLflow tracking store", "lossdoctor run directory")


def load_path(path: str | os.PathLike[str], fmt: str | None = None, select: str | None = None) -> list[Run]:
    """Read `path` with the first reader whose sniff accepts it, or with the reader `fmt` names
    (a key of FORMAT_NAMES or a registered reader's name), sniff skipped. `select` names one run
    of a store that holds several (its id or name)."""
    from .loss_kind import loss_from_perplexity, read_evidence
    from .mlflow_store import uri_path

    p = Path(uri_path(path))  # MLflow's tracking URIs (sqlite:///mlflow.db, file:./mlruns) as paths
    _check_input(p)
    _load_readers()
    forced = _forced_reader(fmt)
    for name, sniff, read in READERS:
        if forced is not None and name != forced:
            continue
        try:
            ok = forced is not None or sniff(p)
        except SourceError:
            raise  # a special file inside a directory: say so rather than try the next format
        except (OSError, ValueError, UnicodeDecodeError, RecursionError):
            ok = False
        if ok:
            if select is not None and name not in SELECTABLE:
                raise SourceError(f"{p}: --run selects a run in an MLflow store or a run directory; this is a {name}")
            runs = _read_with(name, read, p, select, forced=forced is not None)
            if not runs or all(len(r) == 0 for r in runs):
                raise SourceError(f"{p}: the {name} holds no training steps")
            ce_from = read_evidence(p)
            for run in runs:
                loss_from_perplexity(run)
                finish(run, name, p)
                if ce_from is not None:
                    run.meta.setdefault("ce_from", ce_from)
            return runs
    raise _no_reader(p)


def _check_input(p: Path) -> None:
    """Refuse, before any reader runs, a path that is missing, empty or a special file (a FIFO,
    device or socket would block or never end)."""
    if not p.exists():
        raise SourceError(f"{p}: no such file or directory")
    from .files import check_kind

    check_kind(p, p.stat())
    if p.is_file() and p.stat().st_size == 0:
        raise SourceError(f"{p}: the file is empty")


def _forced_reader(fmt: str | None) -> str | None:
    """The registered reader's name `--format-in fmt` asks for (None: sniff), or a refusal."""
    if fmt is None:
        return None
    forced = FORMAT_NAMES.get(fmt.lower(), fmt)
    if forced not in {n for n, _, _ in READERS}:
        raise SourceError(f"unknown input format {fmt!r} (known: {', '.join(reader_names())})")
    return forced


def _read_with(name: str, read: Callable[..., list[Run]], p: Path, select: str | None, *, forced: bool) -> list[Run]:
    """Run one reader on `p`; its failures become one SourceError line. A text file a text reader
    sniffed but could not read, or read weakly, gets the general text reader's reading instead
    (not for a forced format or a file named as a table)."""
    text_fallback = not forced and name in _TEXT_FALLBACK and p.is_file() and p.suffix.lower() not in _NAMED_TABLES
    try:
        runs = read(p) if select is None else read(p, select)
    except SourceError:
        if not text_fallback:
            raise
        return _general_or_raise(p)  # a text the reader sniffed (console lines, a JSON config
        # printed at the top) but holding no series it knows: the general reader tries it
    except RecursionError as e:
        raise SourceError(f"{p}: cannot read this {name} (nested too deeply)") from e
    except MemoryError as e:
        raise SourceError(f"{p}: cannot read this {name} (out of memory)") from e
    except (OSError, ValueError, UnicodeDecodeError, KeyError, TypeError, IndexError, OverflowError) as e:
        raise SourceError(f"{p}: cannot read this {name} ({type(e).__name__}: {e})".splitlines()[0][:300]) from e
    if text_fallback:
        from .text_choice import better_of

        runs = better_of(name, p, runs)  # a weak reading: the general reader's, when better
    return runs


def _no_reader(p: Path) -> SourceError:
    """The error for a path no reader accepted: a directory, binary data, or text with no
    training log lines in it."""
    if p.is_dir():
        return NoReader(
            f"{p}: no known training log in this directory (looked for a lossdoctor run "
            "directory, trainer_state.json, TensorBoard events, metrics.csv, a W&B run, "
            "an MLflow store, console logs, CSV or JSONL)"
        )
    from .files import head, looks_binary

    if looks_binary(head(p, 65536)):
        return SourceError(
            f"{p}: binary data, not a log format lossdoctor knows (supported: "
            "trainer_state.json, TensorBoard events, metrics.csv, W&B runs and CSV exports, "
            "MLflow stores, console logs, CSV, JSONL)"
        )
    from .stdout import LOOKED_FOR

    return SourceError(
        f"{p}: not a log format lossdoctor knows: no training log lines in this text "
        f"(looked for {LOOKED_FOR}; also reads trainer_state.json, TensorBoard, W&B, MLflow, "
        "CSV, JSONL)"
    )


#: readers whose refusal of a text file (not named .csv/.json...) lets the general text reader try it,
#: and whose weak reading of one is compared with the general reader's (sources/text_choice.py)
_TEXT_FALLBACK = ("console log", "CSV log", "JSON-lines log")
_NAMED_TABLES = (".csv", ".tsv", ".json", ".jsonl", ".ndjson")


def _general_or_raise(p: Path) -> list[Run]:
    """The general text reader's runs for a file the console reader sniffed but could not read; the
    console reader's error when the general reader finds no series either."""
    import sys

    from . import any_text

    error = sys.exc_info()[1]
    try:
        return any_text.read(p)
    except SourceError:
        if error is None:
            raise
        raise error from None


#: sampling coarser than this many steps per logged loss point gets a note
COARSE_INTERVAL = 10


def finish(run: Run, name: str, path: Path) -> None:
    """Facts every format shares, computed once here rather than in each reader."""
    dropped = _drop_huge_ints(run.meta)
    if dropped:
        run.notes.append(Msg("source.huge_ints", n=dropped))
    run.meta.setdefault("format", name)
    run.meta.setdefault("path", str(path))
    from .metadata import apply as config_from_files  # optimizer, peak LR, task from the run's config

    config_from_files(run, path)
    iv = run.meta.get("log_interval")
    if iv is not None and not (isinstance(iv, (int, float)) and not isinstance(iv, bool) and 1 <= iv < 1 << 31):
        del run.meta["log_interval"]  # a log's own setting that is no step count (inf, 0, "x")
    interval = log_interval(run)
    if interval is not None:
        run.meta.setdefault("log_interval", interval)
    iv = run.meta.get("log_interval")
    if isinstance(iv, (int, float)) and iv >= COARSE_INTERVAL:
        averaged = run.meta.get("loss_is_interval_mean")
        run.notes.append(Msg("source.coarse_averaged" if averaged else "source.coarse_sampled", n=int(iv)))


def _drop_huge_ints(d: dict, depth: int = 0) -> int:
    """Remove integers beyond 2^63 from the run's settings (a `clip_grad` of 400 digits in a log):
    every later `float(v)` of them would raise OverflowError. Returns how many were removed."""
    n = 0
    for k, v in list(d.items()):
        if isinstance(v, int) and not isinstance(v, bool) and abs(v) >= 1 << 63:
            del d[k]
            n += 1
        elif isinstance(v, dict) and depth < 4:
            n += _drop_huge_ints(v, depth + 1)
    return n


def log_interval(run: Run) -> int | None:
    """The typical gap between logged loss points (median), or None when fewer than 3 points."""
    name = "loss" if run.has("loss") else next((c for c in run.cols if run.has(c)), None)
    if name is None:
        return None
    steps = run.steps[run.logged(name)]
    if steps.size < 3:
        return None
    return int(max(1, np.median(np.diff(steps))))
