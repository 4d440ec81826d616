"""Weights & Biases run directories: an offline (or unsynced) run's `run-<id>.wandb`, the `wandb/`
folder holding such runs, and the `files/wandb-history.jsonl` of old (< 0.10) client versions.
(W&B's CSV export of a panel is read by the CSV reader: it recognises `<run> - <metric>` columns.)

What the offline client writes: `wandb/offline-run-<date>_<time>-<id>/` with `run-<id>.wandb`, a
transaction log in LevelDB's log format (32 KiB blocks of records, each with a CRC-32, a length and a
FULL/FIRST/MIDDLE/LAST type, after a 7-byte `:W&B` header) whose records are protobuf `Record`
messages: `history` records carry one `wandb.log` call each (items of key + JSON value, `_step`),
`config` records the run config. `files/` holds only requirements/metadata until the run is synced.

Current clients (>= 0.19) no longer ship a Python reader for this file (the Go core reads it), so
the framing is decoded here (a few lines, checked against each record's CRC); the records
themselves are decoded with the client's own protobuf classes (`wandb.proto.wandb_internal_pb2`), so
field layout follows whichever wandb version is installed. Reading a `.wandb` file therefore needs
the `wandb` package, which whoever wrote the run has.
"""

from __future__ import annotations

import json
import struct
import zlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from ..messages import Msg
from ..records import Run
from .files import head, read_bytes, walk
from .registry import SourceError, reader
from .tabular import parse_jsonl, rows_run

_IDENT = b":W&B"
_HEADER = 7
_BLOCK = 32768
_FULL, _FIRST, _MIDDLE, _LAST = 1, 2, 3, 4
_TYPE_CRC = [zlib.crc32(bytes([t])) for t in range(5)]
HISTORY_JSONL = "wandb-history.jsonl"


def _is_wandb_file(name: str) -> bool:
    return name.endswith(".wandb") or name == HISTORY_JSONL


def _sniff(p: Path) -> bool:
    if p.is_file():
        if p.name == HISTORY_JSONL:
            return True
        if p.suffix == ".wandb":
            return head(p, 4) == _IDENT
        return False
    return bool(walk(p, _is_wandb_file, max_depth=3))


def iter_records(data: bytes, notes: list[str], name: str) -> Iterator[bytes]:
    """Payloads of the LevelDB-log records in `data`; stops with a note at a torn or corrupt one."""
    if data[:4] != _IDENT:
        raise SourceError(f"{name}: not a W&B transaction log (no :W&B header)")
    pos = _HEADER
    pending: bytearray | None = None
    n = len(data)
    while pos + _HEADER <= n:
        room = _BLOCK - pos % _BLOCK
        if room < _HEADER:  # block trailer: zero padding
            pos += room
            continue
        crc, length, kind = struct.unpack_from("<IHB", data, pos)
        if kind == 0 and length == 0:  # pre-allocated zeros: end of this block's data
            pos += room
            continue
        end = pos + _HEADER + length
        if kind not in (_FULL, _FIRST, _MIDDLE, _LAST) or length > room - _HEADER or end > n:
            notes.append(Msg("source.wandb_torn", name=name, pos=pos))
            return
        payload = data[pos + _HEADER : end]
        if zlib.crc32(payload, _TYPE_CRC[kind]) & 0xFFFFFFFF != crc:
            notes.append(Msg("source.wandb_bad_checksum", name=name, pos=pos))
            return
        pos = end
        if kind == _FULL:
            pending = None
            yield payload
        elif kind == _FIRST:
            pending = bytearray(payload)
        elif pending is not None:
            pending += payload
            if kind == _LAST:
                yield bytes(pending)
                pending = None
    if pending is not None or (pos < n and any(data[pos:])):
        # the file ends inside a record: a chain of fragments with no last one, or part of a header
        notes.append(Msg("source.wandb_torn", name=name, pos=pos))


def _json_value(s: str) -> Any:
    try:
        return json.loads(s)  # the standard module reads NaN / Infinity, which W&B writes
    except ValueError:
        return None


def read_wandb_file(path: Path) -> tuple[list[dict[str, Any]], dict[str, Any], list[str]]:
    """(history rows, config, notes) of one `.wandb` transaction log."""
    try:
        from wandb.proto import wandb_internal_pb2 as pb
    except ImportError as e:
        raise SourceError(f"{path}: reading a W&B run file needs the wandb package (pip install wandb)") from e
    notes: list[str] = []
    rows: list[dict[str, Any]] = []
    config: dict[str, Any] = {}
    if head(path, len(_IDENT)) != _IDENT:  # checked before the whole file is read
        raise SourceError(f"{path.name}: not a W&B transaction log (no :W&B header)")
    for payload in iter_records(read_bytes(path), notes, path.name):
        rec = pb.Record()
        try:
            rec.ParseFromString(payload)
        except Exception:  # noqa: BLE001 - protobuf's DecodeError; a record we cannot use
            continue
        kind = rec.WhichOneof("record_type")
        if kind == "history":
            row: dict[str, Any] = {}
            for item in rec.history.item:
                key = "/".join(item.nested_key) if item.nested_key else item.key
                row[key] = _json_value(item.value_json)
            if "_step" not in row and rec.history.HasField("step"):
                row["_step"] = rec.history.step.num
            rows.append(row)
        elif kind in ("config", "run"):  # the initial config travels in the run record
            updates = rec.config.update if kind == "config" else rec.run.config.update
            for item in updates:
                key = "/".join(item.nested_key) if item.nested_key else item.key
                v = _json_value(item.value_json)
                if isinstance(v, dict) and "value" in v:  # config values are stored as {"value": x}
                    v = v["value"]
                if isinstance(v, (int, float, str, bool)) or v is None:
                    config[key] = v
    return rows, config, notes


def _pick_run(p: Path) -> tuple[Path, list[str]]:
    if p.is_file():
        return p, []
    found = walk(p, _is_wandb_file, max_depth=3)
    if not found:
        raise SourceError(f"{p}: no W&B run here")
    chosen = max(found, key=lambda f: (f.stat().st_mtime, f.name))
    notes: list[str] = []
    if len(found) > 1:
        notes.append(Msg("source.wandb_runs", n=len(found), chosen=str(chosen.relative_to(p))))
    return chosen, notes


#: W&B config keys (HF Trainer and common scripts put theirs there) that the detectors can use
_CONFIG_META = {
    "max_grad_norm": "max_grad_norm",
    "gradient_clip_val": "max_grad_norm",
    "clip_grad": "max_grad_norm",
    "logging_steps": "log_interval",
    "learning_rate": "config_lr",
    "fp16": "fp16",
    "bf16": "bf16",
}


@reader("W&B run", _sniff, priority=40)
def read(path: Path) -> list[Run]:
    f, notes = _pick_run(path)
    if f.name == HISTORY_JSONL:
        rows, more = parse_jsonl(read_bytes(f), f.name)
        config: dict[str, Any] = {}
    else:
        rows, config, more = read_wandb_file(f)
    notes.extend(more)
    if not rows:
        raise SourceError(f"{f}: the W&B run holds no logged history")
    meta: dict[str, Any] = {"framework": "wandb"}
    for k, m in _CONFIG_META.items():
        v = config.get(k)
        if isinstance(v, (int, float)) and not isinstance(v, bool) or isinstance(v, bool):
            meta.setdefault(m, v)
    if config:
        meta["config"] = dict(list(config.items())[:200])
    return [rows_run(rows, source="wandb", what=f.name, meta=meta, notes=notes)]
