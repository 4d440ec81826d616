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

import logging
import os
from pathlib import Path
from typing import IO, Any

import numpy as np
import orjson

from .findings import restore_messages
from .messages import Msg
from .records import LayerStats, Run, make_run
from .sources.confined import ConfinedDir, Refused
from .sources.files import open_regular, read_bytes

log = logging.getLogger("lossdoctor")

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

_DUMP_OPTS = orjson.OPT_SERIALIZE_NUMPY | orjson.OPT_NON_STR_KEYS


def _dumps(obj: Any) -> bytes:
    """orjson writes NaN/Inf as null; we keep them as the strings 'nan'/'inf' so a NaN loss stays
    a NaN loss (records.to_float parses them back)."""
    return orjson.dumps(_encode_nonfinite(obj), option=_DUMP_OPTS)


def _utf8(s: str) -> str:
    """A string orjson can write: the undecodable bytes of a path that is not UTF-8 (os.fsdecode's
    surrogates, as in a log_dir named b"run\xff") become the visible escape `\xff`."""
    if s.isascii():
        return s
    try:
        s.encode("utf-8")
        return s
    except UnicodeEncodeError:
        return s.encode("utf-8", "surrogateescape").decode("utf-8", "backslashreplace")


def _encode_nonfinite(obj: Any) -> Any:
    if isinstance(obj, str):
        return _utf8(obj)
    if isinstance(obj, float):
        if obj != obj:
            return "nan"
        if obj in (float("inf"), float("-inf")):
            return "inf" if obj > 0 else "-inf"
        return obj
    if isinstance(obj, dict):
        return {_utf8(k) if isinstance(k, str) else k: _encode_nonfinite(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_encode_nonfinite(v) for v in obj]
    return obj


class RunLogWriter:
    """Appends one run's records to its directory. Every write is flushed: the log is the evidence
    of a crash, so it must survive the crash.

    Every file is opened inside the directory without following links (`sources.confined`): a
    symlink or hard link planted under a name the log uses is refused with a note (in `notes`, the
    monitor's), that file is not written, and the other files are."""

    def __init__(self, path: str | os.PathLike[str], directory: ConfinedDir | None = None,
                 notes: list[str] | None = None, inert: bool = False) -> None:
        self.path = Path(path)
        #: what could not be written and why (the monitor passes its own list)
        self.notes: list[str] = [] if notes is None else notes
        self._refused: set[str] = set()
        self._dir = None if inert else directory if directory is not None else ConfinedDir.open_root(self.path)
        self._steps = self._append_file(STEPS)
        self._findings = self._append_file(FINDINGS)
        self._layers: IO[bytes] | None = None
        self._preflight: IO[bytes] | None = None
        self._layer_width = 0

    def _refuse(self, name: str, e: OSError) -> None:
        if name in self._refused:
            return
        self._refused.add(name)

        note = Msg("monitor.path_refused", path=name, error=str(e.strerror or e))
        self.notes.append(note)
        log.warning("lossdoctor: %s", note)

    def _append_file(self, name: str) -> IO[bytes] | None:
        if self._dir is None:
            return None
        try:
            return self._dir.open_append(name)
        except OSError as e:
            self._refuse(name, e)
            return None

    def _replace(self, d: ConfinedDir | None, name: str, data: bytes, shown: str) -> None:
        if d is None:
            return
        reopened = d.fd < 0  # meta.json written again after close: the directory opened once more
        if reopened:
            d = ConfinedDir.open_root(self.path)
        try:
            d.replace(name, data)
        except Refused as e:
            self._refuse(shown, e)
        finally:
            if reopened:
                d.close()

    def write_meta(self, meta: dict[str, Any]) -> None:
        meta = {k: v for k, v in meta.items() if k != "incidents"}  # they have their own files
        data = orjson.dumps(_encode_nonfinite(meta), option=_DUMP_OPTS | orjson.OPT_INDENT_2)
        self._replace(self._dir, META, data, META)

    def write_incident(self, name: str, record: dict[str, Any], folder: str = INCIDENTS) -> None:
        """One triage record, `incidents/<name>.json` (or `probes/<name>.json`: an LR probe's
        record, triage/lr_probe.py), written atomically."""
        if self._dir is None:
            return
        base = self._dir if self._dir.fd >= 0 else ConfinedDir.open_root(self.path)  # after close
        try:
            d = base.sub(folder)
        except Refused as e:
            self._refuse(folder, e)
            return
        finally:
            if base is not self._dir:
                base.close()
        try:
            data = orjson.dumps(_encode_nonfinite(record), option=_DUMP_OPTS | orjson.OPT_INDENT_2)
            self._replace(d, name + ".json", data, f"{folder}/{name}.json")
        finally:
            d.close()

    def append_step(self, record: dict[str, Any]) -> None:
        if self._steps is None:
            return
        self._steps.write(_dumps(record) + b"\n")
        self._steps.flush()

    def start_layers(self, modules: list[str], stats: list[str], types: list[str] | None = None) -> None:
        schema = {"modules": modules, "types": types or [], "stats": stats,
                  "row": ["step"] + [f"{s}[module]" for s in stats]}
        self._replace(self._dir, LAYERS_SCHEMA, orjson.dumps(schema), LAYERS_SCHEMA)
        self._layers = self._append_file(LAYERS)
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
        if self._findings is None:
            return
        self._findings.write(_dumps(finding) + b"\n")
        self._findings.flush()

    def append_preflight(self, finding: dict[str, Any]) -> None:
        if self._preflight is None:
            if PREFLIGHT in self._refused:
                return
            self._preflight = self._append_file(PREFLIGHT)
            if self._preflight is None:
                return
        self._preflight.write(_dumps(finding) + b"\n")
        self._preflight.flush()

    def subdir(self, name: str) -> ConfinedDir | None:
        """A folder of this run's directory (disk snapshots), or None (noted) when it is a link."""
        if self._dir is None:
            return None
        try:
            return self._dir.sub(name)
        except OSError as e:
            self._refuse(name, e)
            return None

    def close(self) -> None:
        for f in (self._steps, self._findings, self._layers, self._preflight):
            if f is not None and not f.closed:
                f.close()
        if self._dir is not None:
            self._dir.close()


#: the file in a run directory that names the launch writing it (`claim_run_dir`)
CLAIM = ".lossdoctor-run"
#: a run directory used again keeps each new run in `version_N/` (N from 1; the first run is the
#: directory itself, "version_0")
VERSION_PREFIX = "version_"
MAX_VERSIONS = 100_000


def claim_run_dir(root: str | os.PathLike[str], launch: str | None,
                  rank: int | None = None) -> tuple[ConfinedDir, str]:
    """The directory this run writes: `root` when it holds no run yet, else the first
    `root/version_N/` that is free, or the one the other ranks of the same launch took. A run claims
    its directory by linking a `.lossdoctor-run` file naming `launch` into it (atomic: of two launches racing,
    one wins; ranks of one launch agree on its name, see `signals.launch`). With no launch name the
    ranks share none, and each rank takes the first directory where its `rank-N/` is absent.
    Returns the open directory and its version name (`version_0` for `root` itself)."""
    top = ConfinedDir.open_root(root)
    for n in range(MAX_VERSIONS):
        if n == 0:
            slot = top
        else:
            try:
                slot = top.sub(f"{VERSION_PREFIX}{n}")
            except Refused:
                continue  # a link planted as version_N: never written through, skipped
        if _take(slot, launch, rank, first=n == 0):
            if slot is not top:
                top.close()
            return slot, f"{VERSION_PREFIX}{n}"
        if slot is not top:
            slot.close()
    top.close()
    raise OSError(f"{root}: {MAX_VERSIONS} runs already; use another log_dir")


def _take(slot: ConfinedDir, launch: str | None, rank: int | None, first: bool) -> bool:
    claim = _claim_of(slot)
    if claim is not None:
        return launch is not None and claim == launch
    if launch is None:
        return not (slot.lexists(f"rank-{rank}") if rank is not None else _holds_run(slot, first))
    if _holds_run(slot, first):
        return False  # a run written before claims existed
    tmp = f".{CLAIM}.{os.getpid()}.{id(slot)}.tmp"
    try:
        with slot.create_new(tmp) as f:
            f.write(orjson.dumps({"launch": launch, "pid": os.getpid()}))
        try:
            os.link(tmp, CLAIM, src_dir_fd=slot.fd, dst_dir_fd=slot.fd, follow_symlinks=False)
        except FileExistsError:
            pass
    except OSError:
        return False
    finally:
        slot.unlink(tmp)
    return _claim_of(slot) == launch


def _claim_of(slot: ConfinedDir) -> str | None:
    data = slot.read_small(CLAIM)
    if data is None:
        return None
    try:
        obj = orjson.loads(data)
    except orjson.JSONDecodeError:
        return ""  # a claim file of no launch: taken
    return str(obj.get("launch", "")) if isinstance(obj, dict) else ""


def _holds_run(slot: ConfinedDir, first: bool) -> bool:
    """A run was written here: meta.json, steps.jsonl or rank-* (a link counts); for the directory
    the user named, also any version_N/ (later runs)."""
    if slot.lexists(META) or slot.lexists(STEPS):
        return True
    try:
        names = os.listdir(slot.fd)
    except OSError:
        return True
    return any(n.startswith("rank-") or (first and n.startswith(VERSION_PREFIX)) for n in names)


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
        num = e.name[len(VERSION_PREFIX):]
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


def _loads(data: bytes, name: str, notes: list[str]) -> Any:
    """One JSON document of the run directory, its nesting cut at `JSON_LIMITS.max_depth` (a note
    says so), so no report, listing or walk of it ever recurses without bound."""
    from .messages import JSON_LIMITS, Msg, cap_depth

    obj = orjson.loads(data)
    if data.count(b"[") + data.count(b"{") <= JSON_LIMITS.max_depth:
        return obj  # too few brackets to be too deep: no walk (every step record)
    obj, cut = cap_depth(obj)
    if cut:
        note = Msg("source.json_too_deep", name=name, limit=JSON_LIMITS.max_depth)
        if note not in notes:
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
    from .sources.registry import SourceError

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
    if not np.isfinite(steps).all() or (np.abs(steps) >= 2.0 ** 31).any():
        notes.append(f"{LAYERS}: rows with a step that is not a number dropped")
        ok = np.isfinite(steps) & (np.abs(steps) < 2.0 ** 31)
        m, values, steps = m[ok], values[ok], steps[ok]
    return LayerStats(steps=steps.astype(np.int64), modules=modules,
                      stats={s: values[:, i, :] for i, s in enumerate(stats)},
                      types=list(types) if len(types) == len(modules) else [])


def load_incidents(path: str | os.PathLike[str], notes: list[str] | None = None,
                   folder: str = INCIDENTS) -> list[dict[str, Any]]:
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
