"""lossdoctor's own run directory: its layout, and the reader of it (`watch` writes it through
`live.runlog.RunLogWriter`; `lossdoctor diagnose` reads it here).

Layout (one directory per run; under torch.distributed one `rank-N/` sub-directory per rank)::

    meta.json        run metadata: model summary, optimizer/scaler/scheduler config, dtypes,
                     versions, task; rewritten at close with "closed": true
    steps.jsonl      one JSON object per optimizer step (records.COLUMNS / records.EVENTS keys),
                     flushed every step, so a kill -9 loses at most the step being written
    layers.json      schema of layers.f32: module names and stat names
    layers.f32       per-module stats at sampled steps, little-endian float32 rows of
                     [step, stat_0[module_0..module_M-1], stat_1[...], ...]
    findings.jsonl   findings raised live, in the order they were raised
    preflight.jsonl  findings of the preflight checks run inside watch (configuration, first batches)
    incidents/       triage records of incidents (replay, localisation)
    probes/          LR probe records (triage/lr_probe.py): the LRs tried from a snapshot and their losses

Why the per-layer data are raw float32 rows: see `live.runlog`, which writes them.

A directory used as `log_dir` by several runs keeps the first run in itself ("version_0") and each
later one in `version_N/` (`live.runlog.claim_run_dir`): the newest is read, with a note naming the
others; `select` (`diagnose --run version_0`, or just `0`) reads another. Two runs are never mixed.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import numpy as np
import orjson

from ..findings import restore_messages
from ..messages import JSON_LIMITS, Msg, cap_depth, holds
from ..records import LayerStats, Run, make_run
from . import rank_screen
from .files import open_regular, read_bytes
from .registry import SourceError, reader

META = "meta.json"
STEPS = "steps.jsonl"
LAYERS_SCHEMA = "layers.json"
LAYERS = "layers.f32"
FINDINGS = "findings.jsonl"
PREFLIGHT = "preflight.jsonl"
INCIDENTS = "incidents"
PROBES = "probes"

#: the largest layers.f32 read (4 GiB: 50,000 sampled steps of 5 stats x 4,000 modules)
MAX_LAYERS_BYTES = 4 << 30
#: a run directory used again keeps each new run in `version_N/` (N from 1; the first run is the
#: directory itself, "version_0")
VERSION_PREFIX = "version_"


def run_versions(root: Path) -> list[tuple[str, Path]]:
    """The runs a directory holds, oldest first: ("version_0", root) when the directory itself holds
    one, then each `version_N/` that does (links not followed)."""
    out = [(f"{VERSION_PREFIX}0", root)] if _is_single_run(root) else []
    found = []
    try:
        entries = list(os.scandir(root))
    except OSError:
        return out
    for e in entries:
        num = e.name[len(VERSION_PREFIX) :]
        if e.name.startswith(VERSION_PREFIX) and num.isdigit() and int(num) > 0 and len(num) < 10:
            try:
                if e.is_dir(follow_symlinks=False) and _is_single_run(Path(e.path)):
                    found.append((int(num), e.name, Path(e.path)))
            except OSError:
                continue
    return out + [(name, p) for _, name, p in sorted(found)]


def _is_single_run(path: Path) -> bool:
    if (path / META).exists() or (path / STEPS).exists():
        return True
    return any((d / STEPS).exists() for d in path.glob("rank-*"))


def is_run_dir(path: Path) -> bool:
    """A lossdoctor run directory: meta.json or steps.jsonl here, or in rank-N sub-directories, or
    runs in version_N/ sub-directories."""
    if not path.is_dir():
        return False
    return bool(run_versions(path))


def rank_dirs(path: Path) -> list[Path]:
    ranks = sorted(
        (d for d in path.glob("rank-*") if (d / STEPS).exists()),
        key=lambda d: int(d.name.split("-", 1)[1]) if d.name.split("-", 1)[1].isdigit() else 0,
    )
    return ranks or [path]


def read_run_dir(path: str | os.PathLike[str]) -> list[Run]:
    """Read every rank of a run directory. A torn last line or row (the writer was killed) is
    dropped with a note, never an error. Above `rank_screen.FULL_READ` ranks, every rank is
    screened and only the ranks that tell the story are read in full (see `sources.rank_screen`)."""
    root = Path(path)
    dirs = rank_dirs(root)
    if len(dirs) <= rank_screen.FULL_READ:
        return [_read_one(d) for d in dirs]
    # many ranks: a byte screen of every rank, a full read of the few that tell the story
    chosen, info = rank_screen.choose(rank_screen.screen(dirs))
    runs = [_read_one(d) for d in chosen]
    for run in runs:
        run.meta["rank_screen"] = info
    return runs


def _loads(data: bytes, name: str, notes: list[str]) -> Any:
    """One JSON document of the run directory, its nesting cut at `JSON_LIMITS.max_depth` (a note
    says so), so no report, listing or walk of it ever recurses without bound."""
    obj = orjson.loads(data)
    if data.count(b"[") + data.count(b"{") <= JSON_LIMITS.max_depth:
        return obj  # too few brackets to be too deep: no walk (every step record)
    obj, cut = cap_depth(obj)
    if cut:
        note = Msg("source.json_too_deep", name=name, limit=JSON_LIMITS.max_depth)
        if not holds(notes, note):
            notes.append(note)
    return obj


def _read_jsonl(path: Path, notes: list[str]) -> list[dict[str, Any]]:
    if not path.exists():
        return []
    out = []
    bad = 0
    with open_regular(path) as f:  # a FIFO named steps.jsonl is refused, not waited on
        for line in f:
            line = line.strip()
            if not line:
                continue
            try:
                obj = _loads(line, path.name, notes)
            except orjson.JSONDecodeError:
                bad += 1
                continue
            if isinstance(obj, dict):
                out.append(obj)
    if bad:
        notes.append(f"{path.name}: skipped {bad} unreadable line(s) (a run killed mid-write leaves one)")
    return out


def _read_one(d: Path) -> Run:
    notes: list[str] = []
    meta: dict[str, Any] = {}
    if (d / META).exists():
        try:
            meta = _loads(read_bytes(d / META), f"{d.name}/{META}", notes)
        except orjson.JSONDecodeError:
            notes.append(f"{d.name}/{META} is unreadable; run metadata ignored")
        if not isinstance(meta, dict):
            notes.append(f"{d.name}/{META} holds no JSON object; run metadata ignored")
            meta = {}
    rows = _read_jsonl(d / STEPS, notes)
    rank = meta.get("rank")
    if not isinstance(rank, int) or isinstance(rank, bool) or not 0 <= rank < 1 << 31:
        rank = None
    # incident records have their own files; a run directory of an older version may hold them
    # in meta.json instead
    old = meta.pop("incidents", None)
    incidents = load_incidents(d, notes) or [r for r in (old if isinstance(old, list) else []) if isinstance(r, dict)]
    run = make_run(rows, meta=meta, source="lossdoctor", rank=rank)
    run.incidents = incidents + load_incidents(d, notes, folder=PROBES)  # the LR probe's records: level "probe"
    run.notes.extend(notes)
    monitor_notes = meta.get("monitor_notes") if isinstance(meta, dict) else None
    if isinstance(monitor_notes, list):  # what the live monitor could not record, and why
        # a note written with its message data reads back as that message (its key and values)
        restored = restore_messages(monitor_notes, meta.get("monitor_notes_data"))
        run.notes.extend(n if isinstance(n, Msg) else f"live monitor: {n}" for n in restored if isinstance(n, str))
    run.live_findings = _read_jsonl(d / FINDINGS, notes)
    run.preflight = read_preflight(d, run.notes)
    run.layers = _read_layers(d, run.notes)
    return run


def read_preflight(d: Path, notes: list[str] | None = None) -> list[dict[str, Any]]:
    """The preflight findings of one rank's directory (contract dicts), oldest first."""
    return _read_jsonl(d / PREFLIGHT, notes if notes is not None else [])


def _read_layers(d: Path, notes: list[str]) -> LayerStats | None:
    if not (d / LAYERS_SCHEMA).exists() or not (d / LAYERS).exists():
        return None
    try:
        schema = _loads(read_bytes(d / LAYERS_SCHEMA), LAYERS_SCHEMA, notes)
        modules, stats = list(schema["modules"]), list(schema["stats"])
        if not all(isinstance(x, str) for x in modules + stats) or not modules or not stats:
            raise TypeError("module and stat names must be strings")
    except (orjson.JSONDecodeError, KeyError, TypeError):
        notes.append(f"{LAYERS_SCHEMA} is unreadable; per-layer statistics ignored")
        return None
    width = 1 + len(stats) * len(modules)
    try:
        data = read_bytes(d / LAYERS, limit=MAX_LAYERS_BYTES)
    except SourceError as e:  # larger than the cap: the run is read without its per-layer file
        notes.append(f"{LAYERS}: not read ({e})")
        return None
    raw = np.frombuffer(data[: len(data) // 4 * 4], dtype="<f4")
    n = raw.size // width
    if len(data) % (4 * width):
        notes.append(f"{LAYERS}: dropped a torn last row")
    m = raw[: n * width].reshape(n, width)
    values = m[:, 1:].reshape(n, len(stats), len(modules))
    types = schema.get("types") or []
    if not isinstance(types, list) or not all(isinstance(t, str) for t in types):
        types = []
    steps = m[:, 0]
    if not np.isfinite(steps).all() or (np.abs(steps) >= 2.0**31).any():
        notes.append(f"{LAYERS}: rows with a step that is not a number dropped")
        ok = np.isfinite(steps) & (np.abs(steps) < 2.0**31)
        m, values, steps = m[ok], values[ok], steps[ok]
    return LayerStats(
        steps=steps.astype(np.int64),
        modules=modules,
        stats={s: values[:, i, :] for i, s in enumerate(stats)},
        types=list(types) if len(types) == len(modules) else [],
    )


def load_incidents(
    path: str | os.PathLike[str], notes: list[str] | None = None, folder: str = INCIDENTS
) -> list[dict[str, Any]]:
    """Incident records written by triage (or, from `probes/`, the LR probe's), oldest first
    (nesting cut as `_loads` does; the note, if any, goes to `notes`)."""
    d = Path(path) / folder
    if not d.is_dir():
        return []

    out = []
    notes = notes if notes is not None else []
    for f in sorted(d.glob("*.json")):
        try:
            rec = _loads(read_bytes(f), f"{folder}/{f.name}", notes)
        except orjson.JSONDecodeError as e:  # torn, damaged, or nested beyond orjson's 1,024 levels
            notes.append(Msg("source.record_unreadable", name=f"{folder}/{f.name}", error=str(e)))
            continue
        if isinstance(rec, dict):  # a record is an object; its findings a list (checked on use)
            out.append(rec)
    return out


def choose_version(path: Path, select: str | None = None) -> tuple[Path, str, list[str]]:
    """(the directory of the chosen run, its name, notes): the newest, or the one `select` names."""
    versions = run_versions(path)
    if not versions:
        return path, f"{VERSION_PREFIX}0", []
    names = [n for n, _ in versions]
    if select is None:
        name, d = versions[-1]
        notes: list[str] = (
            [Msg("source.rundir_versions", path=str(path), n=len(versions), names=", ".join(names), chosen=name)]
            if len(versions) > 1
            else []
        )
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
