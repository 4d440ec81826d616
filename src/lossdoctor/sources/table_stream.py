"""CSV and JSON-lines tables read chunk by chunk into bounded columns.

Why: a metrics CSV or a JSONL history of a long run is hundreds of megabytes or more; read whole, as
a list of string cells or a dict per row, it took gigabytes (591 MB of memory for a 91 MB CSV). Here
each chunk of the file (cut at a newline: `files.line_chunks`) becomes float columns with their
logged masks at once, appended to a `records.StepColumns` store, which thins the middle of a table
longer than it holds (`Thinning.max_rows`); what a chunk was parsed into is dropped before the next
one is read. The values and masks are those the whole-file reading gave: every conversion is the
same function applied to a chunk of the rows instead of all of them, and where the old reading
decided by the whole column (a JSON column with one value that is no number reads every NaN as it
reads a mixed column; a column whose first value is a string reads as CSV text cells), the decision
is kept per column and applied to every chunk.
"""

from __future__ import annotations

import itertools
import operator
from collections.abc import Iterable
from typing import Any

import numpy as np

from ..records import THINNING, StepColumns, Thinning, to_float
from .columns import column_for, is_epoch_axis, is_loss_part, map_names, step_number, step_rank

#: the series a step-axis candidate's values are kept under (its name may also be a metric's)
_STEP_SERIES = "\x00step\x00"


# --- value conversions: a list of cells or JSON values -> (floats, logged mask) --------------


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


def json_column(v: list[Any]) -> tuple[np.ndarray, np.ndarray] | None:
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


def mixed_column(v: list[Any]) -> tuple[np.ndarray, np.ndarray]:
    """(floats, logged mask) of a column of values of mixed types, value by value, as
    `records.from_columns` reads one: None, unparsable text and a NaN that is no 'nan' string are
    "not logged"."""
    vals = np.array([to_float(x) for x in v], dtype=np.float64)
    mask = np.array([x is not None and (not np.isnan(f) or _says_nan(x)) for x, f in zip(v, vals)], dtype=bool)
    return vals, mask


def _says_nan(x: Any) -> bool:
    return isinstance(x, str) and x.strip().lower() in ("nan", "-nan", "+nan")


def step_values(v: list[Any]) -> np.ndarray:
    """A JSON step column's numbers (NaN where none): plain numbers in one C call, else value by
    value (`"done/total"` strings, lists)."""
    try:
        steps = np.array(v, dtype=np.float64)  # plain numbers (None -> NaN)
        if steps.shape == (len(v),):
            return steps
    except (TypeError, ValueError, OverflowError):
        pass
    return np.array([step_number(x) for x in v], dtype=np.float64)


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


def column(rows: list[dict[str, Any]], key: str) -> list[Any]:
    try:
        return [r[key] for r in rows]  # the common case: every row has the key
    except KeyError:
        return [r.get(key) for r in rows]


# --- the store ----------------------------------------------------------------------------------


class TableColumns:
    """A table's columns, by the log's own names, in a bounded store: `append` a chunk's float
    columns and masks; `text_cells` counts the cells that were text, not numbers, per column."""

    def __init__(self, rules: Thinning = THINNING, roles: dict[str, str] | None = None) -> None:
        self.store = StepColumns((), rules, roles=roles)
        self.text_cells: dict[str, int] = {}

    def append(self, m: int, cols: dict[str, tuple[np.ndarray, np.ndarray]]) -> None:
        if m:
            self.store.append_arrays(
                np.full(m, np.nan), {k: v for k, (v, _) in cols.items()}, logged={k: lg for k, (_, lg) in cols.items()}
            )

    def count_text(self, name: str, n: int) -> None:
        if n:
            self.text_cells[name] = self.text_cells.get(name, 0) + n

    def columns(self, names: Iterable[str]) -> tuple[dict[str, np.ndarray], dict[str, np.ndarray]]:
        """(values, logged masks) of the rows held, for `names` (a name never stored: not logged)."""
        st, names = self.store, list(names)
        return {n: st.view(n).copy() for n in names}, {n: st.logged(n).copy() for n in names}

    def rows_at(self) -> np.ndarray:
        """Each held row's index in the table (0, 1, 2... unless thinned)."""
        return self.store.ordinal[: self.store.n].astype(np.float64)

    def thinned(self) -> dict[str, int] | None:
        st = self.store
        return {"rows": st.total, "kept": st.n, "stride": st.stride} if st.thinned else None


#: the keys that say which phase wrote a row (mmcv/mmengine's `log.json`: `"mode": "train"` or `"val"`)
_MODE_KEYS = ("mode", "phase", "split")
_EVAL_MODES = frozenset({"val", "valid", "validation", "eval", "evaluation", "test"})


def evaluation_row(r: dict[str, Any]) -> bool:
    """A row an evaluation wrote (its phase key says so): its `loss` is the evaluation's, its `iter`
    the evaluation's batches; not a training step."""
    for k in _MODE_KEYS:
        v = r.get(k)
        if isinstance(v, str) and v.strip().lower() in _EVAL_MODES:
            return True
    return False


class JsonColumns:
    """JSON rows (dicts), a chunk at a time, into a `TableColumns`: the columns a records column or
    the step axis may be read from (the mapping is chosen when every name is known), each converted
    as the whole-file reading converted it (see the module docstring)."""

    def __init__(self, rules: Thinning = THINNING) -> None:
        self.table = TableColumns(rules)
        self.names: dict[str, None] = {}  # every key, first-seen order
        self.metric_keys: list[str] = []
        self.step_keys: list[str] = []
        self.nrows = 0
        self._flatten: bool | None = None
        self._first: dict[str, Any] | None = None  # the table's first row: its string values decide
        self._first_strings: set[str] = set()  # the columns whose first value is a string
        self.mixed: set[str] = set()  # columns with a value of no number type somewhere
        self._unlogged_if_mixed: dict[str, list[np.ndarray]] = {}
        self.eval_rows = 0  # rows an evaluation wrote (`"mode": "val"`), left out

    def add(self, rows: list[dict[str, Any]]) -> None:
        if rows and any(k in rows[0] or k in rows[-1] for k in _MODE_KEYS):
            kept = [r for r in rows if not evaluation_row(r)]
            self.eval_rows += len(rows) - len(kept)
            rows = kept
        if not rows:
            return
        if self._flatten is None:  # decided by the table's first row, as the whole-file reading did
            self._flatten = any(isinstance(v, dict) for v in rows[0].values())
        if self._flatten:
            rows = [flatten(r) for r in rows]
        if self._first is None:
            self._first = rows[0]
        seen = dict.fromkeys(itertools.chain.from_iterable(rows))  # every key of the chunk, in C
        self._learn_names(seen)
        cols: dict[str, tuple[np.ndarray, np.ndarray]] = {}
        for k in self.metric_keys:
            if k in seen or k in self._first_strings:  # else not logged in this chunk
                cols[k] = self._metric(k, column(rows, k), rows)
        for k in self.step_keys:
            v = column(rows, k)
            vals = parse_str_column(v)[0] if k in self._first_strings else step_values(v)
            cols[_STEP_SERIES + k] = (vals, np.ones(len(rows), dtype=bool))
        self.table.append(len(rows), cols)
        self.nrows += len(rows)

    def _learn_names(self, seen: dict[str, None]) -> None:
        new = [str(n) for n in seen if n not in self.names]
        if not new:
            return
        self.names.update(dict.fromkeys(new))
        self.metric_keys += [n for n in new if column_for(n) is not None or is_loss_part(n)]
        self.step_keys += [n for n in new if step_rank(n) is not None or is_epoch_axis(n)]
        first = self._first or {}
        self._first_strings = {k for k in self.metric_keys + self.step_keys if isinstance(first.get(k), str)}
        self.table.store.roles = dict(map_names(self.metric_keys).used)  # what thinning judges

    def _metric(self, k: str, v: list[Any], rows: list[dict[str, Any]]) -> tuple[np.ndarray, np.ndarray]:
        if k in self._first_strings:  # read as CSV text cells (None as "None": a logged NaN)
            vals, mask, bad = parse_str_column(v)
            self.table.count_text(k, bad)
            if None in v:  # a row without the key logged nothing (fairseq's valid rows beside its
                # train rows of quoted numbers), where a null it printed is a logged NaN
                mask &= np.fromiter((k in r for r in rows), dtype=bool, count=len(rows))
            return vals, mask
        fast = json_column(v)
        if fast is None:
            self.mixed.add(k)
            return mixed_column(v)
        vals, mask = fast
        odd = np.nonzero(mask & np.isnan(vals))[0]
        if odd.size:  # a NaN a mixed column reads as not logged: remembered in case this one is mixed
            flip = [i for i in odd.tolist() if not _says_nan(v[i])]
            if flip:
                start = self.table.store.total
                self._unlogged_if_mixed.setdefault(k, []).append(np.asarray(flip, dtype=np.int64) + start)
        return vals, mask

    def columns(self) -> tuple[dict[str, np.ndarray], dict[str, np.ndarray], dict[str, np.ndarray]]:
        """(metric values, their logged masks, step candidates' values) of the rows held."""
        vals, logged = self.table.columns(self.metric_keys)
        st = self.table.store
        for k in self.mixed & set(self._unlogged_if_mixed):
            ords = np.concatenate(self._unlogged_if_mixed[k])
            pos = np.searchsorted(st.ordinal[: st.n], ords)
            held = pos < st.n
            pos = pos[held][st.ordinal[pos[held]] == ords[held]]
            logged[k][pos] = False
        steps = {k: st.view(_STEP_SERIES + k).copy() for k in self.step_keys}
        return vals, logged, steps
