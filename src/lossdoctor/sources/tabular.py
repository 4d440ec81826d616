"""Generic CSV and JSONL logs with common column names, and the table -> Run mapping other readers
(Lightning's metrics.csv, W&B exports and histories) share.

CSV: parsed by numpy's C reader (`np.loadtxt`) when the table is dense and numeric (a million
rows in about a second), else by the standard library's `csv` module, which copes with sparse rows
(Lightning writes one row per logging call), quoted fields and stray text. JSONL: `orjson` parses
the whole file as one array in a single call when it can; lines it cannot parse (NaN literals,
which orjson rejects but Python's `json` writes) go through the standard `json` module; lines
neither can read (a torn last line) are counted and skipped with a note.
"""

from __future__ import annotations

import csv
import io
import itertools
import json
import operator
import re
from pathlib import Path
from typing import Any

import numpy as np
import orjson

from ..messages import Msg
from ..records import Run, from_columns, to_float
from .columns import SIGNAL_NAMES, column_for, map_names, step_number, step_rank
from .files import head, json_array_prefix, looks_binary, read_bytes, text_head
from .registry import SourceError, reader

#: columns whose absence is worth a note (the detectors say more precisely what they skip)
_KEY_SIGNALS = ("loss", "grad_norm", "lr", "scale")


# --- shared: a parsed table -> Run ----------------------------------------------------------

def parse_str_column(values: list[str] | np.ndarray) -> tuple[np.ndarray, np.ndarray, int]:
    """(floats, logged mask, count of cells that are text, not numbers). Empty cells are "not
    logged"; 'nan'/'inf' are logged non-finite values (the failure we look for)."""
    a = np.asarray(values, dtype=str)
    a = np.char.strip(a)
    empty = a == ""
    try:
        vals = np.where(empty, "nan", a).astype(np.float64)
        return vals, ~empty, 0
    except ValueError:
        pass
    vals = np.array([to_float(x) for x in a.tolist()], dtype=np.float64)
    says_nan = np.isin(np.char.lower(a), ["nan", "-nan", "+nan", "null", "none"])
    text = ~empty & np.isnan(vals) & ~says_nan
    logged = ~empty & ~text
    return vals, logged, int(text.sum())


def table_run(names: list[str], columns: dict[str, Any], *, source: str, what: str,
              meta: dict[str, Any] | None = None, notes: list[str] | None = None,
              logged: dict[str, np.ndarray] | None = None, nrows: int | None = None) -> Run:
    """Map a table's named columns onto a Run. `columns[name]` is a float array (with `logged[name]`
    its mask), a list of strings (CSV cells) or a list of Python values (JSON)."""
    notes = list(notes or [])
    mapping = map_names(names)
    if not mapping.used:
        shown = ", ".join(repr(n) for n in names[:12]) + (" ..." if len(names) > 12 else "")
        raise SourceError(f"{what}: no training metric found among its columns ({shown}); "
                          "expected names like loss, grad_norm, lr or loss_scale")
    masks: dict[str, np.ndarray] = {}
    cols: dict[str, Any] = {}
    for col, name in mapping.used.items():
        v = columns[name]
        if logged is not None and name in logged:
            cols[col], masks[col] = v, logged[name]
        elif isinstance(v, np.ndarray) and v.dtype.kind == "U" or (isinstance(v, list) and v and
                                                                    isinstance(v[0], str)):
            vals, mask, bad = parse_str_column(v)
            if bad:
                notes.append(Msg("source.not_numbers", name=repr(name), n=bad))
            cols[col], masks[col] = vals, mask
        elif isinstance(v, list):
            fast = _json_column(v)
            if fast is None:
                cols[col] = v  # mixed types: records.from_columns parses value by value
            else:
                cols[col], masks[col] = fast
        else:
            cols[col] = v
    n = nrows if nrows is not None else len(next(iter(columns.values())))
    if mapping.step is not None:
        sv = columns[mapping.step]
        if isinstance(sv, np.ndarray) and sv.dtype.kind == "f":
            steps = sv
        elif isinstance(sv, list) and sv and isinstance(sv[0], str) or (
                isinstance(sv, np.ndarray) and sv.dtype.kind == "U"):
            steps = parse_str_column(sv)[0]
        else:
            try:
                steps = np.array(sv, dtype=np.float64)  # plain numbers (None -> NaN)
                if steps.shape != (len(sv),):
                    raise ValueError("not one step per row")
            except (TypeError, ValueError, OverflowError):
                steps = np.array([step_number(x) for x in sv], dtype=np.float64)
        missing = int(np.isnan(steps).sum())
        if missing == len(steps):
            notes.append(Msg("source.step_column_empty", column=repr(mapping.step)))
            steps = np.arange(n, dtype=np.float64)
        elif missing:
            # a row without a step number (e.g. a Lightning epoch-end row) belongs to the step before
            steps = _fill_forward(steps)
    else:
        steps = np.arange(n, dtype=np.float64)
        notes.append(Msg("source.no_step_column"))
    notes.insert(0, Msg("source.read_columns", what=what, columns=mapping.describe()))
    absent = [SIGNAL_NAMES[c] for c in _KEY_SIGNALS if c not in mapping.used]
    if absent:
        notes.insert(1, Msg("source.not_in_log", signals=absent))
    run = from_columns(steps, cols, meta=meta, source=source, logged=masks)
    run.meta.setdefault("columns", dict(mapping.used))
    run.notes.extend(notes)
    return run


def _json_column(v: list[Any]) -> tuple[np.ndarray, np.ndarray] | None:
    """(floats, logged mask) of a column of JSON values in C loops, or None for mixed types.
    None is "not logged"; numbers, bools and "NaN"/"inf" strings convert directly."""
    try:
        vals = np.array(v, dtype=np.float64)
    except (TypeError, ValueError, OverflowError):  # OverflowError: an integer beyond float range
        return None
    if vals.shape != (len(v),):
        return None
    mask = np.fromiter(map(operator.is_not, v, itertools.repeat(None)), dtype=bool, count=len(v))
    return vals, mask


def _fill_forward(steps: np.ndarray) -> np.ndarray:
    idx = np.where(~np.isnan(steps), np.arange(len(steps)), 0)
    np.maximum.accumulate(idx, out=idx)
    out = steps[idx]
    return out


# --- CSV ------------------------------------------------------------------------------------

#: a line longer than this is no training log's header or row: refused before it is split (a
#: 12.5M-field line would take tens of seconds and gigabytes to split into fields)
MAX_LINE_BYTES = 4 << 20
#: columns past this many are ignored, with a note (a wider table is a per-parameter dump; mapping a
#: million names took most of a minute)
MAX_COLUMNS = 65_536


def read_csv_table(path: Path) -> tuple[list[str], dict[str, Any], dict[str, np.ndarray], list[str], int]:
    """(column names, columns, logged masks, notes, rows). Raises SourceError on non-CSV input.
    Only the columns that can feed a signal or the step axis are kept (`columns` holds those);
    `names` lists them all, for the messages."""
    if looks_binary(head(path, 65536)):  # checked before the whole file is read
        raise SourceError(f"{path}: binary data, not a CSV file")
    raw = read_bytes(path)
    longest = _longest_line(raw)
    if longest > MAX_LINE_BYTES:
        raise SourceError(f"{path}: a line of {longest / (1 << 20):.0f} MB; not a CSV training log "
                          f"(lines are read up to {MAX_LINE_BYTES >> 20} MB)")
    text = raw.decode("utf-8", errors="replace").lstrip("\ufeff")
    del raw
    first_nl = text.find("\n")
    header_line = text if first_nl < 0 else text[:first_nl]
    delim = max(",\t;", key=header_line.count)
    if header_line.count(delim) == 0 and first_nl < 0:
        raise SourceError(f"{path}: not a CSV table (one line, no delimiter)")
    try:
        names = next(csv.reader([header_line.rstrip("\r")], delimiter=delim))
    except (csv.Error, StopIteration) as e:
        raise SourceError(f"{path}: malformed CSV header") from e
    notes: list[str] = []
    fields = len(names)  # a row of a table wider than MAX_COLUMNS still has this many
    if len(names) > MAX_COLUMNS:
        notes.append(Msg("source.too_many_columns", name=path.name, n=len(names) - MAX_COLUMNS, max=MAX_COLUMNS))
        names = names[:MAX_COLUMNS]
    names = [n.strip() for n in names]
    if len(set(names)) != len(names):
        names = _dedupe_names(names)
    keep = _wanted_columns(names)
    body = text[first_nl + 1:] if first_nl >= 0 else ""
    del text
    fast = _loadtxt(body, delim, fields, keep)
    if fast is not None:
        cols = {names[i]: fast[:, j] for j, i in enumerate(keep)}
        # dense: every cell was written, so a NaN here is a logged NaN (the failure), not a gap
        logged = {n: np.ones(fast.shape[0], dtype=bool) for n in cols}
        return names, cols, logged, notes, fast.shape[0]
    width = len(names)
    kept: list[list[str]] = [[] for _ in keep]
    nrows = ragged = 0
    try:
        for r in csv.reader(io.StringIO(body, newline=""), delimiter=delim):
            if not r:
                continue
            nrows += 1
            if len(r) != fields:
                ragged += 1
            if len(r) < width:
                r = r + [""] * (width - len(r))
            for out, i in zip(kept, keep):
                out.append(r[i])
    except csv.Error as e:
        raise SourceError(f"{path}: malformed CSV ({e})".splitlines()[0]) from e
    if ragged:
        notes.append(Msg("source.ragged_rows", name=path.name, n=ragged))
    return names, {names[i]: out for out, i in zip(kept, keep)}, {}, notes, nrows


def _longest_line(raw: bytes) -> int:
    """Length in bytes of the longest line, in one vectorised pass."""
    nl = np.flatnonzero(np.frombuffer(raw, dtype=np.uint8) == 10)
    return int(np.diff(nl, prepend=-1, append=len(raw)).max()) - 1 if raw else 0


def _wanted_columns(names: list[str]) -> list[int]:
    """Indices of the columns that can feed a signal or the step axis (a W&B export's
    `<run> - <metric>` columns by their metric), so a wide table's other columns are never kept."""
    out = []
    for i, n in enumerate(names):
        m = _WANDB_RUN_COL.match(n)
        if column_for(n) or step_rank(n) is not None or (m and column_for(m["metric"])):
            out.append(i)
    return out


def _loadtxt(body: str, delim: str, width: int, keep: list[int]) -> np.ndarray | None:
    """The dense numeric fast path (columns `keep` only), or None when the table is not dense and
    numeric (empty cells, text, rows of another width)."""
    if not body.strip() or not keep:
        return None
    if (delim + delim in body or "\n" + delim in body or delim + "\n" in body or delim + "\r" in body
            or body.startswith(delim)):
        return None  # empty cells: sparse table, take the general path
    lines = body.count("\n") + (0 if body.endswith("\n") else 1)
    if body.count(delim) != lines * (width - 1):
        return None  # rows of another width, blank lines or quoted delimiters: the general path
    try:
        a = np.loadtxt(io.StringIO(body), delimiter=delim, dtype=np.float64, ndmin=2, quotechar='"',
                       usecols=keep)
    except ValueError:
        return None
    if a.shape[1] != len(keep):
        return None
    return a


def _dedupe_names(names: list[str]) -> list[str]:
    seen: dict[str, int] = {}
    out = []
    for n in names:
        k = seen.get(n, 0)
        out.append(n if k == 0 else f"{n}.{k}")
        seen[n] = k + 1
    return out


_WANDB_RUN_COL = re.compile(r"^(?P<run>.+?) - (?P<metric>.+)$")


def wandb_export_names(names: list[str]) -> tuple[list[str], dict[str, str], list[str]]:
    """W&B's "Export panel data as CSV" names columns `<run name> - <metric>` (plus `__MIN`/`__MAX`
    envelopes). Keep the first run's columns, renamed to the metric; say which runs were left out."""
    runs: list[str] = []
    rename: dict[str, str] = {}
    for n in names:
        m = _WANDB_RUN_COL.match(n)
        if m:
            if m["run"] not in runs:
                runs.append(m["run"])
            if m["run"] == runs[0] and not n.endswith(("__MIN", "__MAX")):
                rename[n] = m["metric"]
    notes: list[str] = []
    if len(runs) > 1:
        notes.append(Msg("source.wandb_export_runs", n=len(runs), name=repr(runs[0])))
    return [rename.get(n, n) for n in names], rename, notes


def is_wandb_export(names: list[str]) -> bool:
    return any(_WANDB_RUN_COL.match(n) for n in names) and any(
        n in ("Step", "_step") or n.lower().endswith("step") for n in names)


def read_csv(path: Path, *, source: str = "csv", what: str | None = None,
             meta: dict[str, Any] | None = None) -> list[Run]:
    names, cols, logged, notes, nrows = read_csv_table(path)
    if nrows == 0:
        raise SourceError(f"{path}: the CSV file has a header but no rows")
    if is_wandb_export(names):
        new_names, rename, more = wandb_export_names(names)
        cols = {rename.get(k, k): v for k, v in cols.items()}
        logged = {rename.get(k, k): v for k, v in logged.items()}
        keep = [n for n, old in zip(new_names, names) if old in rename or _WANDB_RUN_COL.match(old) is None]
        names = keep
        notes.extend(more)
        source = "wandb_csv"
    return [table_run(names, cols, source=source, what=what or path.name, meta=meta, notes=notes,
                      logged=logged or None, nrows=nrows)]


def _sniff_csv(p: Path) -> bool:
    if not p.is_file():
        return False
    if p.suffix.lower() in (".csv", ".tsv"):
        return True  # even binary: read_csv then says what is wrong with it
    t = text_head(p, 8192)
    if t is None:
        return False
    line = t.lstrip("\ufeff").split("\n", 1)[0]
    if line.lstrip().startswith(("{", "[")):
        return False
    return any(line.count(d) >= 1 for d in ",\t") and any(
        map_names([c.strip() for c in re.split(r"[,\t]", line)]).used.values())


@reader("CSV log", _sniff_csv, priority=90)
def read_csv_reader(path: Path) -> list[Run]:
    return read_csv(path)


# --- JSONL / JSON ---------------------------------------------------------------------------

def parse_jsonl(raw: bytes, name: str) -> tuple[list[dict[str, Any]], list[str]]:
    """Rows of a JSON-lines file; unreadable lines are skipped with a note."""
    notes: list[str] = []
    # fast path: the whole file as one JSON array, parsed by one orjson call (one copy of the
    # file: the newline -> comma replace; the brackets go in place)
    head4k = raw[:4096]
    start = len(head4k) - len(head4k.lstrip())
    joined = bytearray(b"[")
    joined += raw[start:] if start else raw
    end = len(joined)
    while end > 1 and joined[end - 1] in b" \t\r\n":
        end -= 1
    del joined[end:]
    joined += b"]"
    joined = joined.replace(b"\n", b",")
    if b"NaN" in joined or b"Infinity" in joined:
        # Python's json writes NaN/Infinity literals, which orjson rejects: quote them ("NaN" reads
        # back as a logged NaN). A literal inside a string breaks its line; the per-line path
        # below then reads the file.
        if b"-Infinity" in joined:
            joined = joined.replace(b"-Infinity", b'"-inf"')
        if b"Infinity" in joined:
            joined = joined.replace(b"Infinity", b'"inf"')
        if b"NaN" in joined:
            joined = joined.replace(b"NaN", b'"NaN"')
    try:
        rows = orjson.loads(joined)
        return [r for r in rows if isinstance(r, dict)], notes
    except orjson.JSONDecodeError:
        pass
    lines = [ln for ln in raw.splitlines() if ln.strip()]
    rows = []
    bad = 0
    for ln in lines:
        try:
            obj = orjson.loads(ln)
        except orjson.JSONDecodeError:
            try:
                obj = json.loads(ln)  # NaN / Infinity literals, as Python's json writes them
            except (ValueError, RecursionError):  # RecursionError: thousands of nested brackets
                bad += 1
                continue
        if isinstance(obj, dict):
            rows.append(obj)
    if bad:
        where = Msg("source.the_last_line") if bad == 1 and lines and _unparsable(lines[-1]) else \
            Msg("source.n_lines", n=bad)
        notes.append(Msg("source.unreadable_lines", name=name, where=where))
    return rows, notes


def _unparsable(line: bytes) -> bool:
    try:
        json.loads(line)
        return False
    except (ValueError, RecursionError):
        return True


def flatten(row: dict[str, Any]) -> dict[str, Any]:
    """{"train": {"loss": 1}} -> {"train/loss": 1}: nested logging dicts, one level."""
    out: dict[str, Any] = {}
    for k, v in row.items():
        if isinstance(v, dict):
            for k2, v2 in v.items():
                out[f"{k}/{k2}"] = v2
        else:
            out[k] = v
    return out


def _column(rows: list[dict[str, Any]], key: str) -> list[Any]:
    try:
        return [r[key] for r in rows]  # the common case: every row has the key
    except KeyError:
        return [r.get(key) for r in rows]


def rows_run(rows: list[dict[str, Any]], *, source: str, what: str, meta: dict[str, Any] | None = None,
             notes: list[str] | None = None) -> Run:
    """Rows of dicts (JSONL, W&B history) -> Run, vectorised per chosen column."""
    if rows and any(isinstance(v, dict) for v in rows[0].values()):
        rows = [flatten(r) for r in rows]
    names = dict.fromkeys(itertools.chain.from_iterable(rows))  # every key, first-seen order, in C
    name_list = [str(n) for n in names]
    mapping = map_names(name_list)
    wanted = set(mapping.used.values()) | ({mapping.step} if mapping.step else set())
    cols = {n: _column(rows, n) for n in name_list if n in wanted}
    if not cols:
        cols = {name_list[0]: []} if name_list else {"": []}
    return table_run(name_list, cols, source=source, what=what, meta=meta, notes=notes,
                     nrows=len(rows))


def parse_json_array(raw: bytes, path: Path) -> tuple[list[dict[str, Any]], list[str]]:
    """Rows of a file holding one JSON array of objects. A file cut or damaged mid-way is read
    entry by entry up to the damage, with a note (a run killed while rewriting its log)."""
    text = raw.decode("utf-8", errors="replace")
    try:
        data = json.loads(text)
    except RecursionError as e:
        raise SourceError(f"{path}: JSON nested too deeply to be a training log") from e
    except ValueError:
        return _json_array_prefix(text, path)
    if not isinstance(data, list):
        raise SourceError(f"{path}: not a JSON array or JSON lines")
    return [r for r in data if isinstance(r, dict)], []


def _json_array_prefix(text: str, path: Path) -> tuple[list[dict[str, Any]], list[str]]:
    rows, entries, pos = json_array_prefix(text, text.index("["))
    if not entries:
        raise SourceError(f"{path}: not valid JSON, and no complete entry before the damage")
    return rows, [Msg("source.json_truncated", name=path.name, pos=pos, n=entries)]


def read_jsonl(path: Path, *, source: str = "jsonl") -> list[Run]:
    if looks_binary(head(path, 65536)):  # checked before the whole file is read
        raise SourceError(f"{path}: binary data, not a JSON-lines file")
    raw = read_bytes(path)
    if raw[:4096].lstrip().startswith(b"["):
        rows, notes = parse_json_array(raw, path)
    else:
        rows, notes = parse_jsonl(raw, path.name)
    if not rows:
        raise SourceError(f"{path}: no JSON objects with training metrics in this file")
    return [rows_run(rows, source=source, what=path.name, notes=notes)]


def _sniff_jsonl(p: Path) -> bool:
    if not p.is_file():
        return False
    data = head(p, 8192)
    if looks_binary(data):
        return False
    s = data.lstrip()
    if p.suffix.lower() in (".jsonl", ".ndjson"):
        return True
    if p.suffix.lower() == ".json" and s.startswith(b"["):
        return True
    return s.startswith(b"{") and b"\n" in s.rstrip()


@reader("JSON-lines log", _sniff_jsonl, priority=91)
def read_jsonl_reader(path: Path) -> list[Run]:
    return read_jsonl(path)
