"""The run directory that `watch` writes and `lossdoctor diagnose` reads.

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

Why float32 rows for the per-layer data: it is a dense (sampled step x module x stat) matrix, and a
raw append-only matrix is the most compact form (4 bytes a value, no per-row keys), is append-safe
(a torn last row is simply dropped on read), needs only numpy to read (`np.fromfile`, then slice a
column per module), and loads a million values in milliseconds. Parquet would need pyarrow (100+ MB)
and writes its footer at close, so a killed run would leave an unreadable file; JSON would be
5-10x larger and slow to parse.
"""

from __future__ import annotations

import io
import os
from pathlib import Path
from typing import Any

import numpy as np
import orjson

from .records import LayerStats, Run, make_run
from .sources.files import open_regular, read_bytes

META = "meta.json"
STEPS = "steps.jsonl"
LAYERS_SCHEMA = "layers.json"
LAYERS = "layers.f32"
FINDINGS = "findings.jsonl"
PREFLIGHT = "preflight.jsonl"
INCIDENTS = "incidents"
PROBES = "probes"

_DUMP_OPTS = orjson.OPT_SERIALIZE_NUMPY | orjson.OPT_NON_STR_KEYS


def _dumps(obj: Any) -> bytes:
    """orjson writes NaN/Inf as null; we keep them as the strings 'nan'/'inf' so a NaN loss stays
    a NaN loss (records.to_float parses them back)."""
    return orjson.dumps(_encode_nonfinite(obj), option=_DUMP_OPTS)


def _encode_nonfinite(obj: Any) -> Any:
    if isinstance(obj, float):
        if obj != obj:
            return "nan"
        if obj in (float("inf"), float("-inf")):
            return "inf" if obj > 0 else "-inf"
        return obj
    if isinstance(obj, dict):
        return {k: _encode_nonfinite(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_encode_nonfinite(v) for v in obj]
    return obj


class RunLogWriter:
    """Appends one run's records to its directory. Every write is flushed: the log is the evidence
    of a crash, so it must survive the crash."""

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = Path(path)
        self.path.mkdir(parents=True, exist_ok=True)
        self._steps = open(self.path / STEPS, "ab")
        self._findings = open(self.path / FINDINGS, "ab")
        self._layers: io.BufferedWriter | None = None
        self._preflight: io.BufferedWriter | None = None
        self._layer_width = 0

    def write_meta(self, meta: dict[str, Any]) -> None:
        meta = {k: v for k, v in meta.items() if k != "incidents"}  # they have their own files
        tmp = self.path / (META + ".tmp")
        tmp.write_bytes(orjson.dumps(_encode_nonfinite(meta), option=_DUMP_OPTS | orjson.OPT_INDENT_2))
        os.replace(tmp, self.path / META)

    def write_incident(self, name: str, record: dict[str, Any], folder: str = INCIDENTS) -> None:
        """One triage record, `incidents/<name>.json` (or `probes/<name>.json`: an LR probe's
        record, triage/lr_probe.py), written atomically."""
        d = self.path / folder
        d.mkdir(exist_ok=True)
        tmp = d / (name + ".json.tmp")
        tmp.write_bytes(orjson.dumps(_encode_nonfinite(record), option=_DUMP_OPTS | orjson.OPT_INDENT_2))
        os.replace(tmp, d / (name + ".json"))

    def append_step(self, record: dict[str, Any]) -> None:
        self._steps.write(_dumps(record) + b"\n")
        self._steps.flush()

    def start_layers(self, modules: list[str], stats: list[str], types: list[str] | None = None) -> None:
        schema = {"modules": modules, "types": types or [], "stats": stats,
                  "row": ["step"] + [f"{s}[module]" for s in stats]}
        (self.path / LAYERS_SCHEMA).write_bytes(orjson.dumps(schema))
        self._layers = open(self.path / LAYERS, "ab")
        self._layer_width = 1 + len(stats) * len(modules)

    def append_layers(self, step: int, values: np.ndarray) -> None:
        """`values` has shape (n_stats, n_modules)."""
        if self._layers is None:
            return
        row = np.empty(self._layer_width, dtype="<f4")
        row[0] = step
        row[1:] = np.asarray(values, dtype=np.float32).ravel()
        self._layers.write(row.tobytes())
        self._layers.flush()

    def append_finding(self, finding: dict[str, Any]) -> None:
        self._findings.write(_dumps(finding) + b"\n")
        self._findings.flush()

    def append_preflight(self, finding: dict[str, Any]) -> None:
        if self._preflight is None:
            self._preflight = open(self.path / PREFLIGHT, "ab")
        self._preflight.write(_dumps(finding) + b"\n")
        self._preflight.flush()

    def close(self) -> None:
        for f in (self._steps, self._findings, self._layers, self._preflight):
            if f is not None and not f.closed:
                f.close()


def is_run_dir(path: Path) -> bool:
    """A lossdoctor run directory: meta.json or steps.jsonl here, or in rank-N sub-directories."""
    if not path.is_dir():
        return False
    if (path / META).exists() or (path / STEPS).exists():
        return True
    return any((d / STEPS).exists() for d in path.glob("rank-*"))


def rank_dirs(path: Path) -> list[Path]:
    ranks = sorted((d for d in path.glob("rank-*") if (d / STEPS).exists()),
                   key=lambda d: int(d.name.split("-", 1)[1]) if d.name.split("-", 1)[1].isdigit() else 0)
    return ranks or [path]


def read_run_dir(path: str | os.PathLike[str]) -> list[Run]:
    """Read every rank of a run directory. A torn last line or row (the writer was killed) is
    dropped with a note, never an error. Above `rank_screen.FULL_READ` ranks, every rank is
    screened and only the ranks that tell the story are read in full (see `sources.rank_screen`)."""
    root = Path(path)
    dirs = rank_dirs(root)
    from .sources import rank_screen

    if len(dirs) <= rank_screen.FULL_READ:
        return [_read_one(d) for d in dirs]
    # many ranks: a byte screen of every rank, a full read of the few that tell the story
    chosen, info = rank_screen.choose(rank_screen.screen(dirs))
    runs = [_read_one(d) for d in chosen]
    for run in runs:
        run.meta["rank_screen"] = info
    return runs


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
                obj = orjson.loads(line)
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
            meta = orjson.loads(read_bytes(d / META))
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
    incidents = load_incidents(d) or [r for r in (old if isinstance(old, list) else []) if isinstance(r, dict)]
    run = make_run(rows, meta=meta, source="lossdoctor", rank=rank)
    run.incidents = incidents + load_incidents(d, PROBES)  # the LR probe's records: level "probe"
    run.notes.extend(notes)
    monitor_notes = meta.get("monitor_notes") if isinstance(meta, dict) else None
    if isinstance(monitor_notes, list):  # what the live monitor could not record, and why
        run.notes.extend(f"live monitor: {n}" for n in monitor_notes if isinstance(n, str))
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
        schema = orjson.loads(read_bytes(d / LAYERS_SCHEMA))
        modules, stats = list(schema["modules"]), list(schema["stats"])
        if not all(isinstance(x, str) for x in modules + stats) or not modules or not stats:
            raise TypeError("module and stat names must be strings")
    except (orjson.JSONDecodeError, KeyError, TypeError):
        notes.append(f"{LAYERS_SCHEMA} is unreadable; per-layer statistics ignored")
        return None
    width = 1 + len(stats) * len(modules)
    data = read_bytes(d / LAYERS)
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
    if not np.isfinite(steps).all() or (np.abs(steps) >= 2.0 ** 31).any():
        notes.append(f"{LAYERS}: rows with a step that is not a number dropped")
        ok = np.isfinite(steps) & (np.abs(steps) < 2.0 ** 31)
        m, values, steps = m[ok], values[ok], steps[ok]
    return LayerStats(steps=steps.astype(np.int64), modules=modules,
                      stats={s: values[:, i, :] for i, s in enumerate(stats)},
                      types=list(types) if len(types) == len(modules) else [])


def load_incidents(path: str | os.PathLike[str], folder: str = INCIDENTS) -> list[dict[str, Any]]:
    """Incident records written by triage (or, from `probes/`, the LR probe's), oldest first."""
    d = Path(path) / folder
    if not d.is_dir():
        return []
    out = []
    for f in sorted(d.glob("*.json")):
        try:
            rec = orjson.loads(read_bytes(f))
        except orjson.JSONDecodeError:
            continue
        if isinstance(rec, dict):  # a record is an object; its findings a list (checked on use)
            out.append(rec)
    return out
