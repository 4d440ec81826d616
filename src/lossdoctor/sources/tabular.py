"""Generic CSV and JSONL logs with common column names, and the table -> Run mapping other readers
(Lightning's metrics.csv, W&B exports and histories) share.

Both stream: the file is read in chunks cut at a newline, each chunk turned into float columns at
once (`table_stream`: a bounded store, thinned past `Thinning.max_rows` rows), so memory does not
grow with the file. CSV: a chunk is parsed by numpy's C reader (`np.loadtxt`) when it is dense and
numeric, else (and from there on: a quoted field may span lines) by the standard library's `csv`
module, which copes with sparse rows (Lightning writes one row per logging call), quoted fields and
stray text. JSONL: `orjson` parses a chunk as one array in a single call when it can; lines it
cannot parse (NaN literals, which orjson rejects but Python's `json` writes) go through the
standard `json` module; lines neither can read (a torn last line) are counted and skipped with a
note. A file holding one JSON array is read whole.
"""

from __future__ import annotations

import csv
import io
import itertools
import json
import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import orjson

from ..messages import Msg
from ..records import THINNING, Run, Thinning, from_columns
from .columns import (
    SIGNAL_NAMES,
    column_for,
    epoch_steps,
    is_epoch_axis,
    is_loss_part,
    map_names,
    step_number,
    step_rank,
    trains,
)
from .files import (
    MAX_WHOLE_READ,
    head,
    json_array_prefix,
    line_chunks,
    looks_binary,
    open_regular,
    read_bytes,
    text_head,
)
from .registry import SourceError, reader
from .table_stream import JsonColumns, TableColumns, column, evaluation_row, flatten, json_column, parse_str_column

__all__ = [
    "parse_str_column",
    "flatten",
    "table_run",
    "read_csv_table",
    "read_csv",
    "read_headerless_csv",
    "read_jsonl",
    "parse_jsonl",
    "rows_run",
    "wandb_export_names",
    "is_wandb_export",
    "CsvTable",
]

#: columns whose absence is worth a note (the detectors say more precisely what they skip)
_KEY_SIGNALS = ("loss", "grad_norm", "lr", "scale")


# --- shared: a parsed table -> Run ----------------------------------------------------------


def table_run(
    names: list[str],
    columns: dict[str, Any],
    *,
    source: str,
    what: str,
    meta: dict[str, Any] | None = None,
    notes: list[str] | None = None,
    logged: dict[str, np.ndarray] | None = None,
    nrows: int | None = None,
    text_cells: dict[str, int] | None = None,
    rows_at: np.ndarray | None = None,
    step_values: dict[str, np.ndarray] | None = None,
) -> Run:
    """Map a table's named columns onto a Run. `columns[name]` is a float array (with `logged[name]`
    its mask, and `text_cells[name]` how many of its cells were text), a list of strings (CSV cells)
    or a list of Python values (JSON). A streamed table passes `rows_at` (each row's index in the
    file: the step of a table without one, when thinned) and `step_values` (a step column's numbers,
    read as steps, where the same name also feeds a metric)."""
    notes = list(notes or [])
    mapping = map_names(names)
    parts = loss_parts(names) if "loss" not in mapping.used else []
    if not trains(mapping.used) and not parts:
        shown = ", ".join(repr(n) for n in names[:12]) + (" ..." if len(names) > 12 else "")
        raise SourceError(
            f"{what}: no training metric found among its columns ({shown}); "
            "expected names like loss, grad_norm, lr or loss_scale"
        )
    cols, masks = _metric_columns(mapping.used, columns, notes, logged=logged, text_cells=text_cells)
    summed = _sum_parts(parts, columns, cols, masks, logged=logged, text_cells=text_cells) if parts else None
    if summed is not None:
        meta = {**(meta or {}), "loss_key": " + ".join(parts), "loss_guessed": False}
        notes.append(Msg("text.loss_summed", keys=parts, n=int(masks["loss"].sum())))
    n = nrows if nrows is not None else len(next(iter(columns.values())))
    row_index = rows_at if rows_at is not None else np.arange(n, dtype=np.float64)
    if mapping.step is not None:
        sv = step_values[mapping.step] if step_values and mapping.step in step_values else columns[mapping.step]
        steps = _step_axis(mapping.step, _step_numbers(sv), row_index, notes)
        steps = _counted_on_epochs(mapping.step, steps, columns, step_values, notes)
    else:
        steps = row_index
        notes.append(Msg("source.no_step_column"))
    notes.insert(0, Msg("source.read_columns", what=what, columns=mapping.describe()))
    absent = [SIGNAL_NAMES[c] for c in _KEY_SIGNALS if c not in mapping.used]
    if absent:
        notes.insert(1, Msg("source.not_in_log", signals=absent))
    if steps is row_index:  # the rows' steps are their order, as the console reader's numbered rows are
        meta = {**(meta or {}), "steps_from": "numbered"}
    elif mapping.step is not None and is_epoch_axis(mapping.step):
        meta = {**(meta or {}), "steps_from": "epoch"}  # an epoch number is the step, as the text readers say
    run = from_columns(steps, cols, meta=meta, source=source, logged=masks)
    run.meta.setdefault("columns", dict(mapping.used))
    run.notes.extend(notes)
    if summed is not None:
        run.events["loss_components"] = _parts_at(steps, parts, summed)
    return run


def _parts_at(
    steps: np.ndarray, parts: list[str], arrays: list[tuple[np.ndarray, np.ndarray]]
) -> dict[Any, dict[str, float]]:
    """{step: {part: value}} of the parts a summed loss was added from, kept as the text reader keeps a
    line's loss terms (the name in lower case): which term went NaN or grew is read from them."""
    out: dict[Any, dict[str, float]] = {}
    for i, s in enumerate(steps.tolist()):
        row = {p.lower(): float(a[i]) for p, (a, shown) in zip(parts, arrays) if shown[i]}
        if row:
            out[int(s) if float(s).is_integer() else s] = row
    return out


#: most columns a total is summed over (a detection loss has 3 to 6 parts)
MAX_PARTS = 8


def loss_parts(names: list[str]) -> list[str]:
    """The columns that are parts of a training loss no column totals (ALBEF/BLIP/TCL's `log.txt`:
    `train_loss_mlm`, `train_loss_ita`, `train_loss_itm`, no `train_loss`): two to `MAX_PARTS` of them."""
    parts = [n for n in names if is_loss_part(n)]
    return parts if 2 <= len(parts) <= MAX_PARTS else []


def _sum_parts(
    parts: list[str],
    columns: dict[str, Any],
    cols: dict[str, Any],
    masks: dict[str, np.ndarray],
    *,
    logged: dict[str, np.ndarray] | None,
    text_cells: dict[str, int] | None,
) -> list[tuple[np.ndarray, np.ndarray]] | None:
    """Put the parts' sum, on the rows where every part is logged, in `cols["loss"]` (as the text
    reader sums a detector's loss terms) and return each part's values and where it was logged; None when
    a part is not a column of numbers."""
    if any(p not in columns for p in parts):  # a reader that kept only its signals' columns
        return None
    got, got_masks = _metric_columns({p: p for p in parts}, columns, [], logged=logged, text_cells=text_cells)
    if not all(isinstance(got[p], np.ndarray) and got[p].dtype.kind == "f" for p in parts):
        return None
    arrays = [np.asarray(got[p], dtype=np.float64) for p in parts]
    shown = [got_masks.get(p, np.ones(a.shape, dtype=bool)) for p, a in zip(parts, arrays)]
    mask = np.logical_and.reduce(shown)
    if not mask.any():
        return None
    cols["loss"], masks["loss"] = np.where(mask, np.sum(arrays, axis=0), np.nan), mask
    return list(zip(arrays, shown))


def _is_text(v: Any) -> bool:
    """A column of strings: CSV cells, as a numpy unicode array or a list."""
    return (isinstance(v, np.ndarray) and v.dtype.kind == "U") or (
        isinstance(v, list) and bool(v) and isinstance(v[0], str)
    )


def _metric_columns(
    used: dict[str, str],
    columns: dict[str, Any],
    notes: list[Any],
    *,
    logged: dict[str, np.ndarray] | None,
    text_cells: dict[str, int] | None,
) -> tuple[dict[str, Any], dict[str, np.ndarray]]:
    """The signals' columns (`used`: signal -> the table's name) as floats with their logged masks,
    whatever form the table holds them in; a column with text among its numbers gets a note."""
    masks: dict[str, np.ndarray] = {}
    cols: dict[str, Any] = {}
    for col, name in used.items():
        v = columns[name]
        if logged is not None and name in logged:
            cols[col], masks[col] = v, logged[name]
            if text_cells and text_cells.get(name):
                notes.append(Msg("source.not_numbers", name=repr(name), n=text_cells[name]))
        elif _is_text(v):
            vals, mask, bad = parse_str_column(v)
            if bad:
                notes.append(Msg("source.not_numbers", name=repr(name), n=bad))
            cols[col], masks[col] = vals, mask
        elif isinstance(v, list):
            fast = json_column(v)
            if fast is None:
                cols[col] = v  # mixed types: records.from_columns parses value by value
            else:
                cols[col], masks[col] = fast
        else:
            cols[col] = v
    return cols, masks


def _step_numbers(sv: Any) -> np.ndarray:
    """A step column as floats (NaN where a row has none): floats as they are, text parsed, plain
    numbers converted, anything else read value by value."""
    if isinstance(sv, np.ndarray) and sv.dtype.kind == "f":
        return sv
    if _is_text(sv):
        return parse_str_column(sv)[0]
    try:
        steps = np.array(sv, dtype=np.float64)  # plain numbers (None -> NaN)
        if steps.shape != (len(sv),):
            raise ValueError("not one step per row")
        return steps
    except (TypeError, ValueError, OverflowError):
        return np.array([step_number(x) for x in sv], dtype=np.float64)


def _step_axis(name: str, steps: np.ndarray, row_index: np.ndarray, notes: list[Any]) -> np.ndarray:
    """The run's step axis from the column `name`: an epoch column only when it counts whole epochs,
    the row index when the column is empty, and a row without a step belongs to the step before."""
    missing = int(np.isnan(steps).sum())
    if is_epoch_axis(name) and not epoch_steps(steps):
        notes.append(Msg("source.no_step_column"))  # fractional or repeated epochs: no step axis
        return row_index
    if is_epoch_axis(name):
        notes.append(Msg("text.epoch_is_step", n=len(steps)))
    elif missing == len(steps):
        notes.append(Msg("source.step_column_empty", column=repr(name)))
        return row_index
    elif missing:
        # a row without a step number (e.g. a Lightning epoch-end row) belongs to the step before
        return _fill_forward(steps)
    return steps


def _counted_on_epochs(
    name: str, steps: np.ndarray, columns: dict[str, Any], step_values: dict[str, np.ndarray] | None, notes: list[Any]
) -> np.ndarray:
    """A step column that starts again where an epoch column moves on (mmcv's `log.json`: `"epoch": 22,
    "iter": 10` after `"epoch": 21, "iter": 150`: the iteration within its epoch) counted on from the
    epochs before, as the text readers do. Only when every restart is an epoch's start: a counter that
    goes back within an epoch (a second run appended, a resume) is left as printed."""
    if is_epoch_axis(name):
        return steps
    epoch_name = next((n for n in (step_values or columns) if is_epoch_axis(n) and n != name), None)
    if epoch_name is None:
        return steps
    ev = step_values[epoch_name] if step_values and epoch_name in step_values else columns[epoch_name]
    epochs = _step_numbers(ev)
    back = np.flatnonzero(np.diff(steps) < 0) + 1
    if not back.size or len(epochs) != len(steps) or not np.all(epochs[back] > epochs[back - 1]):
        return steps
    from .text_slots import counted_on

    notes.append(Msg("source.counted_on_epochs", column=repr(name), epoch=repr(epoch_name)))
    return counted_on(steps)


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


#: chunks a CSV or JSONL file is read in (a chunk's parsed columns are dropped before the next)
CSV_CHUNK = 8 << 20
JSONL_CHUNK = 4 << 20
#: rows of a sparse table parsed at a time by the `csv` module
_CSV_BATCH = 65_536


@dataclass
class CsvTable:
    """A CSV table read: every column's name (`names`, for the messages), the columns that can feed
    a signal or the step axis as floats (`cols`, by name) with their logged masks, the notes, the
    rows read, the text cells per column, each held row's index in the file, and the thinning."""

    names: list[str]
    cols: dict[str, np.ndarray]
    logged: dict[str, np.ndarray]
    notes: list[str]
    nrows: int
    text_cells: dict[str, int]
    rows_at: np.ndarray
    thinned: dict[str, int] | None


def read_csv_table(path: Path, rules: Thinning = THINNING) -> CsvTable:
    """The table of a CSV file, streamed. Raises SourceError on non-CSV input. Only the columns that
    can feed a signal or the step axis are kept; `names` lists them all, for the messages."""
    if looks_binary(head(path, 65536)):  # checked before the file is read
        raise SourceError(f"{path}: binary data, not a CSV file")
    with open_regular(path) as f:
        texts = _csv_texts(path, line_chunks(f, CSV_CHUNK, MAX_LINE_BYTES, drop_cut_last=True))
        text = next(texts, "").lstrip("\ufeff")
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
        table = TableColumns(rules, roles=_csv_roles(names))
        body = text[first_nl + 1 :] if first_nl >= 0 else ""
        del text
        nrows, ragged = _csv_body(itertools.chain([body], texts), path, delim, fields, names, keep, table)
    if ragged:
        notes.append(Msg("source.ragged_rows", name=path.name, n=ragged))
    cols, logged = table.columns(names[i] for i in keep)
    return CsvTable(names, cols, logged, notes, nrows, table.text_cells, table.rows_at(), table.thinned())


def _csv_texts(path: Path, chunks: Iterator[bytes]) -> Iterator[str]:
    """The chunks decoded (a chunk ends at a newline: no character is cut), each checked for a line
    no training log has before it is split into fields."""
    for raw in chunks:
        if _longest_line(raw) > MAX_LINE_BYTES:
            longest = _longest_line_in(path)
            raise SourceError(
                f"{path}: a line of {longest / (1 << 20):.0f} MB; not a CSV training log "
                f"(lines are read up to {MAX_LINE_BYTES >> 20} MB)"
            )
        yield raw.decode("utf-8", errors="replace")


def _csv_body(
    texts: Iterator[str], path: Path, delim: str, fields: int, names: list[str], keep: list[int], table: TableColumns
) -> tuple[int, int]:
    """Read the rows into `table`: dense numeric chunks by `np.loadtxt`, from the first chunk that is
    not one on by the `csv` module (a quoted field may run into the next chunk). (rows, ragged rows)."""
    nrows = 0
    for body in texts:
        if not body:
            continue
        fast = _loadtxt(body, delim, fields, keep)
        if fast is None:
            more, ragged = _csv_rows(itertools.chain([body], texts), path, delim, fields, names, keep, table)
            return nrows + more, ragged
        # dense: every cell was written, so a NaN here is a logged NaN (the failure), not a gap
        every = np.ones(fast.shape[0], dtype=bool)
        table.append(fast.shape[0], {names[i]: (fast[:, j], every) for j, i in enumerate(keep)})
        nrows += fast.shape[0]
    return nrows, 0


def _csv_rows(
    texts: Iterator[str], path: Path, delim: str, fields: int, names: list[str], keep: list[int], table: TableColumns
) -> tuple[int, int]:
    """The `csv` module's reading of the rest, a batch of rows at a time. (rows, ragged rows)."""
    width = len(names)
    reader_ = csv.reader(itertools.chain.from_iterable(io.StringIO(t, newline="") for t in texts), delimiter=delim)
    nrows = ragged = 0
    try:
        while True:
            raw = list(itertools.islice(reader_, _CSV_BATCH))
            if not raw:
                break
            batch = [r for r in raw if r]
            nrows += len(batch)
            short = False
            for r in batch:
                if len(r) != fields:
                    ragged += 1
                    short = short or len(r) < width
            if short:
                batch = [r + [""] * (width - len(r)) if len(r) < width else r for r in batch]
            cols = {}
            for i in keep:
                vals, mask, bad = parse_str_column([r[i] for r in batch])
                cols[names[i]] = (vals, mask)
                table.count_text(names[i], bad)
            table.append(len(batch), cols)
    except csv.Error as e:
        raise SourceError(f"{path}: malformed CSV ({e})".splitlines()[0]) from e
    return nrows, ragged


def _longest_line(raw: bytes) -> int:
    """Length in bytes of the longest line, in one vectorised pass."""
    nl = np.flatnonzero(np.frombuffer(raw, dtype=np.uint8) == 10)
    return int(np.diff(nl, prepend=-1, append=len(raw)).max()) - 1 if raw else 0


def _longest_line_in(path: Path) -> int:
    """`_longest_line` of a whole file, read in blocks (what the refusal says)."""
    longest, pos, last_nl = 0, 0, -1
    with open_regular(path) as f:
        while block := f.read(CSV_CHUNK):
            nl = np.flatnonzero(np.frombuffer(block, dtype=np.uint8) == 10) + pos
            if nl.size:
                longest = max(longest, int(np.diff(nl, prepend=last_nl).max()) - 1)
                last_nl = int(nl[-1])
            pos += len(block)
    return max(longest, pos - last_nl - 1)


def _csv_roles(names: list[str]) -> dict[str, str]:
    """{signal: column name} for the store's thinning (a W&B export's by its first run's metrics)."""
    if is_wandb_export(names):
        new, rename, _ = wandb_export_names(names)
        back = {v: k for k, v in rename.items()}
        return {col: back.get(n, n) for col, n in map_names([n for n in new if n in back]).used.items()}
    return dict(map_names(names).used)


def _wanted_columns(names: list[str]) -> list[int]:
    """Indices of the columns that can feed a signal or the step axis (a W&B export's
    `<run> - <metric>` columns by their metric), so a wide table's other columns are never kept."""
    out = []
    for i, n in enumerate(names):
        m = _WANDB_RUN_COL.match(n)
        if (
            column_for(n)
            or is_loss_part(n)
            or step_rank(n) is not None
            or is_epoch_axis(n)
            or (m and column_for(m["metric"]))
        ):
            out.append(i)
    return out


def _loadtxt(body: str, delim: str, width: int, keep: list[int]) -> np.ndarray | None:
    """The dense numeric fast path (columns `keep` only), or None when the table is not dense and
    numeric (empty cells, text, rows of another width)."""
    if not body.strip() or not keep:
        return None
    if (
        delim + delim in body
        or "\n" + delim in body
        or delim + "\n" in body
        or delim + "\r" in body
        or body.startswith(delim)
    ):
        return None  # empty cells: sparse table, take the general path
    lines = body.count("\n") + (0 if body.endswith("\n") else 1)
    if body.count(delim) != lines * (width - 1):
        return None  # rows of another width, blank lines or quoted delimiters: the general path
    if delim == "," and (whole := _json_rows(body, width, lines)) is not None:
        return whole[:, keep]
    try:
        a = np.loadtxt(io.StringIO(body), delimiter=delim, dtype=np.float64, ndmin=2, quotechar='"', usecols=keep)
    except ValueError:
        return None
    if a.shape[1] != len(keep):
        return None
    return a


#: a cell spelled with the characters of JSON numbers and `nan` (after `nan` -> `null`, what JSON reads
#: of it is a number or that null)
_JSON_CELL = r"[-+.0-9eEan]++"
#: characters of a table parsed by one orjson call
_JSON_PIECE = 1 << 20


def _json_rows(body: str, width: int, lines: int) -> np.ndarray | None:
    """(lines, width) floats of a comma table whose every row has `width` cells of JSON-spelled numbers,
    parsed by orjson (a piece of about `_JSON_PIECE` characters a call, so the Python floats it makes
    stay few): correctly rounded, the doubles `np.loadtxt` reads, in about two thirds of its time.
    None for any other body (and one with a `-0` cell: JSON reads the integer 0, where `np.loadtxt`
    reads -0.0), which `np.loadtxt` then reads."""
    row = _JSON_CELL + rf"(?:,{_JSON_CELL}){{{width - 1}}}"
    if "-0," in body or "-0\n" in body or body.endswith("-0"):
        return None
    if not re.fullmatch(rf"(?:{row}\n)*+(?:{row})?", body):
        return None
    parts = []
    start = 0
    while start < len(body):
        end = body.find("\n", start + _JSON_PIECE)
        end = len(body) if end < 0 else end + 1
        piece = body[start:end].rstrip("\n").replace("\n", ",").replace("nan", "null")
        try:
            parts.append(np.array(orjson.loads("[" + piece + "]"), np.float64))
        except (orjson.JSONDecodeError, TypeError, ValueError, OverflowError):
            return None
        start = end
    a = np.concatenate(parts) if parts else np.zeros(0)
    return a.reshape(lines, width) if a.ndim == 1 and a.size == lines * width else None


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
        n in ("Step", "_step") or n.lower().endswith("step") for n in names
    )


#: a cell of a headerless table: a plain number (a header cell is a name)
_NUMBER_CELL = re.compile(r"^\s*[-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?\s*$|^\s*[-+]?(?:nan|inf)\s*$", re.IGNORECASE)


def _headerless_delimiter(path: Path) -> str | None:
    """The delimiter of a table whose first line is already a row of numbers (no header: `12250,0.741,0.733`,
    a trainer's own CSV or one cut out of a log); None when the first line names its columns."""
    t = text_head(path, 8192)
    if t is None:
        return None
    first = t.lstrip("\ufeff").split("\n", 1)[0].strip()
    delim = max(",\t;", key=first.count)
    cells = first.split(delim)
    return delim if len(cells) >= 2 and all(_NUMBER_CELL.match(c) for c in cells) else None


def _cell_value(c: str) -> float:
    try:
        return float(c)
    except ValueError:
        return float("nan")


def read_headerless_csv(
    path: Path, delim: str, *, source: str = "csv", what: str | None = None, meta: dict[str, Any] | None = None
) -> list[Run]:
    """A table of numbers with no header. Nothing names its columns, so the reading follows the order
    such tables are written in (`step, loss[, more]`: Tacotron-2's `step,loss,avg_loss` lines): a first
    column of strictly increasing integers is the step, the first column after it the training loss,
    said as a guess in the notes; the other columns have no name the reader could trust and are not read."""
    with open_regular(path) as f:
        text = io.TextIOWrapper(f, encoding="utf-8", errors="replace")
        rows = [[_cell_value(c) for c in line.strip().lstrip("\ufeff").split(delim)] for line in text if line.strip()]
    width = len(rows[0])
    table = np.array([r for r in rows if len(r) == width], dtype=np.float64)
    first = table[:, 0]
    is_step = bool(np.all(np.isfinite(first)) and np.all(first == np.round(first)) and np.all(np.diff(first) > 0))
    steps = first if is_step else np.arange(len(table), dtype=np.float64)
    j = 1 if is_step else 0
    key = f"column {j + 1}"
    run = from_columns(
        steps, {"loss": table[:, j]}, meta={**(meta or {}), "loss_key": key, "loss_guessed": True}, source=source
    )
    name = what or path.name
    run.notes.extend(
        [
            Msg("source.no_header", what=name, n=len(table), width=width),
            Msg("source.no_step_column") if not is_step else Msg("source.first_column_step"),
            Msg("text.loss_guessed", key=key),
        ]
    )
    return [run]


def read_csv(
    path: Path,
    *,
    source: str = "csv",
    what: str | None = None,
    meta: dict[str, Any] | None = None,
    rules: Thinning = THINNING,
) -> list[Run]:
    delim = _headerless_delimiter(path)
    if delim is not None:
        return read_headerless_csv(path, delim, source=source, what=what, meta=meta)
    t = read_csv_table(path, rules)
    names, cols, logged, notes, text_cells = t.names, t.cols, t.logged, t.notes, t.text_cells
    if t.nrows == 0:
        raise SourceError(f"{path}: the CSV file has a header but no rows")
    if is_wandb_export(names):
        new_names, rename, more = wandb_export_names(names)
        cols = {rename.get(k, k): v for k, v in cols.items()}
        logged = {rename.get(k, k): v for k, v in logged.items()}
        text_cells = {rename.get(k, k): v for k, v in text_cells.items()}
        keep = [n for n, old in zip(new_names, names) if old in rename or _WANDB_RUN_COL.match(old) is None]
        names = keep
        notes.extend(more)
        source = "wandb_csv"
    run = table_run(
        names,
        cols,
        source=source,
        what=what or path.name,
        meta=meta,
        notes=notes,
        logged=logged,
        nrows=len(t.rows_at),
        text_cells=text_cells,
        rows_at=t.rows_at,
    )
    thinned_note(run, t.thinned)
    return [run]


def thinned_note(run: Run, thinned: dict[str, int] | None) -> None:
    """Say that a streamed table was thinned, and by how much (as the console reader says it)."""
    if thinned:
        run.meta["thinned"] = thinned
        run.notes.append(Msg("source.thinned", n=thinned["rows"], kept=thinned["kept"], stride=thinned["stride"]))


def _sniff_csv(p: Path) -> bool:
    if not p.is_file():
        return False
    if p.suffix.lower() in (".csv", ".tsv"):
        return True  # even binary: read_csv then says what is wrong with it
    t = text_head(p, 8192)
    if t is None:
        return False
    lines = t.lstrip("\ufeff").split("\n")
    line = lines[0]
    if line.lstrip().startswith(("{", "[")):
        return False
    if not any(line.count(d) >= 1 for d in ",\t"):
        return False
    return trains(map_names([c.strip() for c in re.split(r"[,\t]", line)]).used) or _numeric_rows_under(lines)


#: rows under a header of names that make a text a table of numbers, whatever the file's name says
_NUMERIC_ROWS = 2
_NAME = re.compile(r"[A-Za-z_][\w./-]*")


def _numeric_rows_under(lines: list[str]) -> bool:
    """A header of names and, under it, rows of numbers with as many comma-separated fields (a Lightning `metrics.csv`
    saved as `.txt` whose columns, `train_disc_loss` and `train_gen_loss`, name no training column
    alone): a CSV whatever the file's suffix."""
    # (commas only: a tab- or space-aligned table of numbers under its header is the general text
    # reader's, which keeps the columns no training name maps as components)
    names = [c.strip() for c in lines[0].split(",")]
    if len(names) < 2 or not all(_NAME.fullmatch(n) for n in names):
        return False
    rows = [r for r in lines[1 : 1 + 2 * _NUMERIC_ROWS] if r.strip()][:_NUMERIC_ROWS]
    return len(rows) == _NUMERIC_ROWS and all(_numbers(r.split(","), len(names)) for r in rows)


def _numbers(cells: list[str], width: int) -> bool:
    """`width` cells, each a number (`_NUMBER_CELL`) or empty (a sparse row), not all empty."""
    filled = [c for c in cells if c.strip()]
    return len(cells) == width and bool(filled) and all(_NUMBER_CELL.match(c) for c in filled)


@reader("CSV log", _sniff_csv, priority=90)
def read_csv_reader(path: Path) -> list[Run]:
    return read_csv(path)


# --- JSONL / JSON ---------------------------------------------------------------------------


def parse_jsonl(raw: bytes, name: str) -> tuple[list[dict[str, Any]], list[str]]:
    """Rows of a JSON-lines file read whole (a W&B history); unreadable lines are skipped with a note."""
    rows, bad, last_bad = _parse_chunk(raw)
    return rows, _unreadable_note(name, bad, bool(last_bad))


def _unreadable_note(name: str, bad: int, last_bad: bool) -> list[str]:
    if not bad:
        return []
    where = Msg("source.the_last_line") if bad == 1 and last_bad else Msg("source.n_lines", n=bad)
    return [Msg("source.unreadable_lines", name=name, where=where)]


def _parse_chunk(raw: bytes) -> tuple[list[dict[str, Any]], int, bool | None]:
    """(the dict rows of whole JSON lines, how many lines neither parser reads, whether the last
    non-blank line is one of those: None when there is no such line)."""
    # fast path: the lines as one JSON array, parsed by one orjson call (one copy of the data: the
    # newline -> comma replace; the brackets go in place)
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
        # below then reads the chunk.
        if b"-Infinity" in joined:
            joined = joined.replace(b"-Infinity", b'"-inf"')
        if b"Infinity" in joined:
            joined = joined.replace(b"Infinity", b'"inf"')
        if b"NaN" in joined:
            joined = joined.replace(b"NaN", b'"NaN"')
    try:
        rows = orjson.loads(joined)
        return [r for r in rows if isinstance(r, dict)], 0, (None if len(joined) == 2 else False)
    except orjson.JSONDecodeError:
        pass
    return _parse_lines([ln for ln in raw.splitlines() if ln.strip()])


def _parse_lines(lines: list[bytes]) -> tuple[list[dict[str, Any]], int, bool | None]:
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
    return rows, bad, (_unparsable(lines[-1]) if bad and lines else (False if lines else None))


def _unparsable(line: bytes) -> bool:
    try:
        json.loads(line)
        return False
    except (ValueError, RecursionError):
        return True


def rows_run(
    rows: list[dict[str, Any]],
    *,
    source: str,
    what: str,
    meta: dict[str, Any] | None = None,
    notes: list[str] | None = None,
) -> Run:
    """Rows of dicts (JSONL, W&B history) -> Run, vectorised per chosen column; rows an evaluation
    wrote (`"mode": "val"`) are left out, as the streamed JSON-lines reading leaves them."""
    kept = [r for r in rows if not evaluation_row(r)]
    if len(kept) < len(rows):
        notes = [*(notes or []), Msg("source.eval_rows", n=len(rows) - len(kept))]
        rows = kept or rows
    if rows and any(isinstance(v, dict) for v in rows[0].values()):
        rows = [flatten(r) for r in rows]
    names = dict.fromkeys(itertools.chain.from_iterable(rows))  # every key, first-seen order, in C
    name_list = [str(n) for n in names]
    mapping = map_names(name_list)
    wanted = set(mapping.used.values()) | ({mapping.step} if mapping.step else set())
    wanted |= {n for n in name_list if is_epoch_axis(n)}  # an iteration within its epoch is counted on
    cols = {n: column(rows, n) for n in name_list if n in wanted}
    if not cols:
        cols = {name_list[0]: []} if name_list else {"": []}
    return table_run(name_list, cols, source=source, what=what, meta=meta, notes=notes, nrows=len(rows))


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


def read_jsonl(path: Path, *, source: str = "jsonl", rules: Thinning = THINNING) -> list[Run]:
    if looks_binary(head(path, 65536)):  # checked before the file is read
        raise SourceError(f"{path}: binary data, not a JSON-lines file")
    if head(path, 4096).lstrip().startswith(b"["):  # one JSON array: read whole
        rows, notes = parse_json_array(read_bytes(path), path)
        if not rows:
            raise SourceError(f"{path}: no JSON objects with training metrics in this file")
        return [rows_run(rows, source=source, what=path.name, notes=notes)]
    table = JsonColumns(rules)
    bad, last_bad = 0, False
    with open_regular(path) as f:
        for raw in line_chunks(f, JSONL_CHUNK, MAX_WHOLE_READ):
            rows, n_bad, last = _parse_chunk(raw)
            bad += n_bad
            last_bad = last_bad if last is None else last
            table.add(rows)
            del rows
    if not table.nrows:
        raise SourceError(f"{path}: no JSON objects with training metrics in this file")
    vals, logged, steps = table.columns()
    rows_at = table.table.rows_at()
    cols: dict[str, Any] = {**steps, **vals}
    run = table_run(
        list(table.names),
        cols,
        source=source,
        what=path.name,
        notes=_unreadable_note(path.name, bad, last_bad)
        + ([Msg("source.eval_rows", n=table.eval_rows)] if table.eval_rows else []),
        logged=logged,
        nrows=len(rows_at),
        text_cells=table.table.text_cells,
        rows_at=rows_at,
        step_values=steps,
    )
    thinned_note(run, table.table.thinned())
    return [run]


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
