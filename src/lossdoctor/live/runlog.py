"""The run-log writer: `watch` appends each step, finding and incident to its run directory.

The layout, its file names and the reader are in `sources.rundir` (the offline half reads what
this writes, and must not import the live half). Here: appending every record so that a kill -9
loses at most the one being written, and `claim_run_dir`, which picks a reused `log_dir`'s
`version_N/`.

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

from ..messages import Msg
from ..sources.confined import ConfinedDir, Refused
from ..sources.rundir import FINDINGS, INCIDENTS, LAYERS, LAYERS_SCHEMA, META, PREFLIGHT, STEPS, VERSION_PREFIX

log = logging.getLogger("lossdoctor")

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

    def __init__(
        self,
        path: str | os.PathLike[str],
        directory: ConfinedDir | None = None,
        notes: list[str] | None = None,
        inert: bool = False,
    ) -> None:
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
        schema = {
            "modules": modules,
            "types": types or [],
            "stats": stats,
            "row": ["step"] + [f"{s}[module]" for s in stats],
        }
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
#: the most `version_N/` directories one `log_dir` may hold
MAX_VERSIONS = 100_000


def claim_run_dir(root: str | os.PathLike[str], launch: str | None, rank: int | None = None) -> tuple[ConfinedDir, str]:
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
