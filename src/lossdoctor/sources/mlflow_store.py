"""MLflow local tracking stores: the `mlruns/` file store and the SQLite store (`mlflow.db`).

Both are read without the `mlflow` package (it is slow to import, pulls in a web stack, and would
migrate an older `mlflow.db` in place before reading it):

- File store: `mlruns/<experiment_id>/<run_id>/` with `meta.yaml`, `params/<name>` (the value as
  text), `tags/<name>` and `metrics/<name>`, one line per logged value: `<timestamp ms> <value>
  <step>`. A name with `/` (`train/loss`) is a sub-folder. Values are Python float text, so `nan`,
  `inf` and `-inf` appear as such. The layout is MLflow's FileStore, unchanged since MLflow 1.0
  (0.x lines had no step). MLflow >= 3.7 writes it only with `MLFLOW_ALLOW_FILE_STORE=true`, but
  older runs and that opt-out keep it alive.
- SQLite store: the tables `runs` (run_uuid, name, status, start_time, lifecycle_stage,
  experiment_id), `metrics` (key, value, timestamp, run_uuid, step, is_nan), `params` (key, value,
  run_uuid) and `experiments`, stable since MLflow 1.x. It is opened read-only with the standard
  `sqlite3` module. MLflow's SQL store cannot hold NaN or Inf: a NaN is stored as 0 with
  `is_nan = 1`, and +/-Inf as +/-1.7976931348623157e308 (the largest double); both are turned back.

lossdoctor's `Run` is one rank of one training, so one MLflow run is read: a run directory when
given one, else the newest active run (by start time) that logged a training metric; the others
are named in a note. Params (`learning_rate`, `max_grad_norm`, `optim`/`optimizer`, `fp16`...,
which HF Trainer's MLflowCallback logs from its TrainingArguments) go into `meta` the way W&B's
config does.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import numpy as np
import orjson

from ..messages import Msg
from ..records import THINNING, Run, StepColumns, Thinning, from_columns
from .columns import SIGNAL_NAMES, aligned, column_for, trains
from .files import MAX_WHOLE_READ, head, line_chunks, open_regular, read_bytes, walk
from .hf_trainer import restore_filtered_nan
from .mlflow_stream import Chunk, NotStreamable, db_chunks, merge
from .registry import SourceError, reader
from .stdout import interval_before_thinning
from .tabular import thinned_note

#: the most read of a file store's small files (meta.yaml, a param or a tag: MLflow caps a param's
#: value at 6,000 characters)
SMALL_FILE = 64 << 10

SQLITE_MAGIC = b"SQLite format 3\x00"
DB_NAMES = ("mlflow.db",)
#: MLflow's SQL store writes +/-Inf as the largest double
_DBL_MAX = 1.7976931348623157e308


def uri_path(arg: str | os.PathLike[str]) -> str | os.PathLike[str]:
    """A tracking URI as MLflow spells it (`sqlite:///mlflow.db`, `sqlite:////abs/mlflow.db`,
    `file:///abs/mlruns`, `file:./mlruns`) -> the local path; anything else unchanged."""
    s = str(arg)
    if s.startswith("sqlite:///"):
        return s[len("sqlite:///") :]
    if s.startswith("file://"):
        return s[len("file://") :] or "/"
    if s.startswith("file:"):
        return s[len("file:") :]
    return arg


# --- finding runs ---------------------------------------------------------------------------


def _is_run_dir(d: Path) -> bool:
    return (d / "meta.yaml").is_file() and (d / "metrics").is_dir()


def _is_sqlite(p: Path) -> bool:
    return p.is_file() and head(p, 16) == SQLITE_MAGIC


def _db_in(d: Path) -> Path | None:
    for name in DB_NAMES:
        if _is_sqlite(d / name):
            return d / name
    return None


def _run_dirs(p: Path) -> list[Path]:
    """Run directories of the file store at or under `p` (the run, its experiment, `mlruns/` or
    the folder holding `mlruns/`), deleted runs (`.trash`) left out."""
    if _is_run_dir(p):
        return [p]
    metas = walk(p, lambda n: n == "meta.yaml", max_depth=3)
    return [
        m.parent
        for m in metas
        if _is_run_dir(m.parent) and ".trash" not in m.parts and m.parent.parent.name not in ("models", "traces")
    ]  # MLflow 3's logged models, traces


def _sniff(p: Path) -> bool:
    if p.is_file():
        return _is_sqlite(p)  # no other reader takes SQLite: claimed, so a wrong one gets a clear error
    if _db_in(p) is not None or bool(_run_dirs(p)):
        return True
    # an mlruns folder without runs: claimed, so the error says so
    return p.name == "mlruns" or (p / ".trash").is_dir() or "experiment_id" in _yaml_fields(p / "meta.yaml")


# --- the file store -------------------------------------------------------------------------


def _yaml_fields(path: Path) -> dict[str, str]:
    """The flat `key: value` lines of MLflow's meta.yaml (no YAML library needed: the file is
    written by MLflow as one scalar per line; quotes around ids are removed)."""
    out: dict[str, str] = {}
    try:
        text = head(path, SMALL_FILE).decode("utf-8", errors="replace")
    except (OSError, SourceError):
        return out
    for line in text.splitlines():
        m = re.match(r"^([A-Za-z_]+):\s*(.*?)\s*$", line)
        if m:
            out[m.group(1)] = m.group(2).strip("'\"")
    return out


#: a metric file as MLflow writes it: `<timestamp> <value> <step>` lines, one space apart
_WELL_FORMED = re.compile(r"(?:\S+ \S+ \S+\n)*(?:\S+ \S+ \S+\n?)?")


#: a block of lines of three tokens whose characters are those of JSON numbers and `nan` (no other
#: word can be spelled: after `nan` -> `null`, what JSON reads of them is a number or that null)
_TOKEN = rb"[-+.0-9eEan]++"
_JSONISH = re.compile(
    rb"(?:"
    + _TOKEN
    + rb" "
    + _TOKEN
    + rb" "
    + _TOKEN
    + rb"\n)*+(?:"
    + _TOKEN
    + rb" "
    + _TOKEN
    + rb" "
    + _TOKEN
    + rb")?"
)
#: a metric file is read in blocks of about this many bytes, each cut after a line: what a read
#: holds is the parsed arrays and one block's text, not the whole file's text and its split
_BLOCK = 4 << 20
#: the block of a metric file merged with the others' (`metric_file_chunks`): each metric being
#: merged holds one, and parsing one takes ~15x its size for a moment
STREAM_BLOCK = 1 << 20


def read_metric_file(path: Path, name: str, notes: list[str]) -> tuple[np.ndarray, np.ndarray]:
    """`parse_metric_file` of the file at `path`, block by block: a file whose every block has the
    common shape (`_common`) is the concatenation of their arrays, which is what the whole file's
    vectorised parse gives (its shape and its checks hold line by line). Any other file (a damaged
    line, a line longer than a block, a file over the size cap) is read whole, as before."""
    steps: list[np.ndarray] = []
    values: list[np.ndarray] = []
    with open_regular(path) as f:
        if os.fstat(f.fileno()).st_size <= MAX_WHOLE_READ:
            read, open_line = 0, False
            for block in line_chunks(f, _BLOCK, _BLOCK):
                read += len(block)
                parsed = None if open_line or read > MAX_WHOLE_READ else _block(block)
                if parsed is None:
                    break
                steps.append(parsed[0])
                values.append(parsed[1])
                open_line = not block.endswith(b"\n")  # only the last block may end inside a line
            else:
                if steps:
                    return np.concatenate(steps), np.concatenate(values)
    return parse_metric_file(read_bytes(path), name, notes)


def metric_file_chunks(path: Path, name: str, notes: list[str]) -> Iterator[Chunk]:
    """A metric file's (steps, values), block by block (`_block`), whatever the file's size. A later
    block with a damaged line (a run killed mid-write) is read up to it by the whole read's line by
    line parse, with its note, where every line before is spelled as that parse reads it
    (`_int_spelled`); any other block of another shape (the first, a line longer than a block) is
    `NotStreamable`: the whole read reads the file."""
    with open_regular(path) as f:
        lines = points = offset = 0
        blocks = line_chunks(f, STREAM_BLOCK, STREAM_BLOCK)
        block = next(blocks, None)
        while block is not None:
            following = next(blocks, None)
            if following is not None and not block.endswith(b"\n"):
                raise NotStreamable  # a line longer than a block, cut: the whole read reads it
            parsed = _block(block)
            if parsed is None:
                if not lines or not _int_spelled(path, offset):
                    raise NotStreamable
                yield _parse_lines(block.decode("utf-8", "replace"), name, notes, width=3, line0=lines, n0=points)
                return
            lines += block.count(b"\n")
            points += parsed[0].size
            offset += len(block)
            yield parsed
            block = following


#: lines whose timestamp and step are whole numbers spelled as `int` reads them
_INT_LINES = re.compile(rb"(?:[-+]?[0-9]+ [^ \n]+ [-+]?[0-9]+\n)*")


def _int_spelled(path: Path, size: int) -> bool:
    """Whether the first `size` bytes of a metric file (whole lines) are lines the whole read's line
    by line parse reads as `_block` read them (it reads a timestamp or a step such as `5.0` as
    damage), read again block by block."""
    with open_regular(path) as f:
        for block in line_chunks(f, STREAM_BLOCK, STREAM_BLOCK):
            if size <= 0:
                break
            if not _INT_LINES.fullmatch(block[:size]):
                return False
            size -= len(block)
    return True


def _block(block: bytes) -> tuple[np.ndarray, np.ndarray] | None:
    """`_common` of a block of a metric file. A block of JSON-spelled numbers (`_JSONISH`) is parsed by
    orjson in one call (correctly rounded: the doubles `float()` and numpy's parse of the text read,
    in a third of the time, without a string object per number); any other block, or one a token of
    which JSON does not read, as `_common` parses it."""
    # JSON reads `-0` as the integer 0, where `float("-0")` is -0.0: such a block is read as text
    negative_zero = b"-0 " in block or b"-0\n" in block or block.endswith(b"-0")
    if block and not negative_zero and _JSONISH.fullmatch(block):
        try:
            # the tokens one space or one line feed apart (`_JSONISH`): those become the commas
            body = block.rstrip(b"\n").replace(b" ", b",").replace(b"\n", b",").replace(b"nan", b"null")
            parsed = orjson.loads(b"[" + body + b"]")
            a = np.array(parsed, dtype=np.float64)
        except (orjson.JSONDecodeError, TypeError, ValueError, OverflowError):
            a = None
        if a is not None and a.size % 3 == 0 and a.ndim == 1:
            return _checked(a.reshape(-1, 3))
    return _common(block.decode("utf-8", "replace"))


def _common(text: str) -> tuple[np.ndarray, np.ndarray] | None:
    """(steps, values) of metric-file text of the common shape (`_WELL_FORMED`, numbers Python reads,
    finite timestamps, whole steps), parsed in one vectorised call; None for any other text."""
    if not (text and _WELL_FORMED.fullmatch(text)):
        return None
    try:
        return _checked(np.array(text.split(), dtype=np.float64).reshape(-1, 3))
    except ValueError:
        return None


def _checked(a: np.ndarray) -> tuple[np.ndarray, np.ndarray] | None:
    """(steps, values) of parsed (timestamp, value, step) rows when the timestamps are finite and the
    steps whole numbers under 2**62, else None."""
    st = a[:, 2]
    if np.isfinite(a[:, 0]).all() and (np.abs(st) < 2.0**62).all() and (st == np.round(st)).all():
        return st.astype(np.int64), a[:, 1]
    return None


def parse_metric_file(data: bytes, name: str, notes: list[str]) -> tuple[np.ndarray, np.ndarray]:
    """(steps, values) of one metric file, in file order. A damaged line ends the read there with
    a note (a run killed mid-write tears the last line)."""
    text = data.decode("utf-8", errors="replace")
    common = _common(text)  # the common case, vectorised
    if common is not None:
        return common
    return _parse_lines(text, name, notes)


def _parse_lines(
    text: str, name: str, notes: list[str], *, width: int = 0, line0: int = 0, n0: int = 0
) -> tuple[np.ndarray, np.ndarray]:
    """`parse_metric_file`'s line by line read, of a whole file or (`metric_file_chunks`) of a block
    after `line0` lines and `n0` points of one with `width` fields a line."""
    steps: list[int] = []
    values: list[float] = []
    # fields per line, fixed by the first line: 3, or 2 in MLflow 0.x files (no step)
    for i, line in enumerate(text.splitlines(), line0 + 1):
        parts = line.split()
        if not parts:
            continue
        width = width or len(parts)
        try:
            if len(parts) == width and width in (2, 3):
                int(parts[0])
                step = int(parts[2]) if width == 3 else len(steps)
                if abs(step) < 2**62:
                    values.append(float(parts[1]))
                    steps.append(step)
                    continue
        except ValueError:
            pass
        notes.append(
            Msg("source.mlflow_stopped", name=repr(name), line=i, text=repr(line.strip()[:60]), n=n0 + len(values))
        )
        break
    s = np.asarray(steps, dtype=np.int64)
    if width == 2 and s.size:
        notes.append(Msg("source.mlflow_no_steps", name=repr(name)))
    return s, np.asarray(values, dtype=np.float64)


def _metric_names(run_dir: Path) -> list[str]:
    root = run_dir / "metrics"
    return sorted(f.relative_to(root).as_posix() for f in walk(root, lambda n: True, max_depth=6))


def _read_text_dir(d: Path) -> dict[str, str]:
    if not d.is_dir():
        return {}
    out = {}
    for f in walk(d, lambda n: True, max_depth=6)[:2000]:
        try:
            out[f.relative_to(d).as_posix()] = head(f, SMALL_FILE).decode("utf-8", errors="replace").strip()
        except (OSError, SourceError):
            continue
    return out


def _file_run_info(run_dir: Path) -> dict[str, Any]:
    y = _yaml_fields(run_dir / "meta.yaml")
    tags = _read_text_dir(run_dir / "tags")
    return {
        "id": y.get("run_id") or run_dir.name,
        "name": y.get("run_name") or tags.get("mlflow.runName"),
        "experiment": y.get("experiment_id") or run_dir.parent.name,
        "start": _int(y.get("start_time")),
        "status": _FILE_STATUS.get(y.get("status", ""), None),
        "deleted": y.get("lifecycle_stage") == "deleted",
        "metrics": _metric_names(run_dir),
        "dir": run_dir,
    }


#: MLflow's RunStatus enum as the file store writes it in meta.yaml
_FILE_STATUS = {"1": "RUNNING", "2": "SCHEDULED", "3": "FINISHED", "4": "FAILED", "5": "KILLED"}


def _int(s: Any) -> int | None:
    try:
        return int(s)
    except (TypeError, ValueError):
        return None


def _read_file_series(info: dict[str, Any], notes: list[str]) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    root = info["dir"] / "metrics"
    return {name: read_metric_file(root / name, name, notes) for name in _wanted(info["metrics"])}


def _stream_files(info: dict[str, Any], notes: list[str], rules: Thinning) -> Streamed | None:
    """`_streamed` of a file store's run: each metric file read by blocks."""
    root = info["dir"] / "metrics"
    names = _wanted(info["metrics"])
    filled = set()
    for name in names:
        try:
            if (root / name).stat().st_size:
                filled.add(name)
        except OSError:
            pass

    def others(name: str, mine: list[str]) -> list[str]:
        return _scan_metric_file(root / name, name, mine)

    return _streamed(
        names, filled, lambda name, mine: metric_file_chunks(root / name, name, mine), others, notes, rules
    )


def _scan_metric_file(path: Path, name: str, notes: list[str]) -> list[str]:
    """A metric not merged read through for what the whole read said of it (it read every metric):
    its damage notes into `notes`, and returned, its note that it was logged without a step."""
    mine: list[str] = []
    first, same, n = None, True, 0
    try:
        for s, _ in metric_file_chunks(path, name, mine):
            if s.size:
                first = int(s[0]) if first is None else first
                same = same and bool((s == first).all())
                n += s.size
    except NotStreamable:  # the whole read of this one metric (a damaged first line...)
        mine = []
        s, _ = read_metric_file(path, name, mine)
        first, n = (int(s[0]) if s.size else None), s.size
        same = bool((s == first).all()) if s.size else True
    notes.extend(mine)
    return [Msg("source.mlflow_unstepped", name=repr(name), step=first)] if n > 1 and same else []


# --- the SQLite store -----------------------------------------------------------------------


class _Store:
    """A read-only view of an MLflow SQLite store that leaves nothing beside it.

    SQLite opened read-only still makes `-wal` and `-shm` files next to a WAL-mode database (and
    leaves them). So the file is opened `immutable=1` (no lock, no journal, nothing written); when a
    `-wal` file with committed pages is already there (a writer is running, or was killed before
    its checkpoint), immutable mode would not see those pages, so the database and its WAL are
    copied to a temporary folder and the copy is read (removed on close)."""

    def __init__(self, path: Path) -> None:
        import sqlite3

        self._tmp = None
        wal = path.with_name(path.name + "-wal")
        try:
            has_wal = wal.is_file() and wal.stat().st_size > 0
        except OSError:
            has_wal = False
        if has_wal:
            import shutil
            import tempfile

            self._tmp = tempfile.TemporaryDirectory(prefix="lossdoctor-mlflow-")
            copy = Path(self._tmp.name) / "mlflow.db"
            shutil.copyfile(path, copy)
            shutil.copyfile(wal, copy.with_name("mlflow.db-wal"))
            uri = f"{copy.as_uri()}"
        else:
            uri = f"{path.resolve().as_uri()}?mode=ro&immutable=1"
        try:
            self.con = sqlite3.connect(uri, uri=True)
        except BaseException:
            self.close()
            raise

    def execute(self, *args):
        return self.con.execute(*args)

    def close(self) -> None:
        con = getattr(self, "con", None)
        if con is not None:
            con.close()
        if self._tmp is not None:
            self._tmp.cleanup()
            self._tmp = None


def _connect(path: Path) -> _Store:
    try:
        import sqlite3
    except ImportError as e:  # a Python built without it
        raise SourceError(
            f"{path}: reading an MLflow SQLite store needs Python's sqlite3 module, which this Python was built without"
        ) from e
    try:
        return _Store(path)
    except (sqlite3.Error, OSError) as e:
        raise SourceError(f"{path}: cannot open the SQLite database ({e})") from e


def _sqlite_tables(path: Path) -> set[str]:
    import sqlite3

    try:
        con = _connect(path)
        try:
            return {r[0] for r in con.execute("SELECT name FROM sqlite_master WHERE type='table'")}
        finally:
            con.close()
    except (sqlite3.Error, SourceError):
        return set()


def _columns(con, table: str) -> set[str]:
    return {r[1] for r in con.execute(f"PRAGMA table_info({table})")}


def _db_runs(con) -> list[dict[str, Any]]:
    have = _columns(con, "runs")
    pick = [c for c in ("run_uuid", "name", "status", "start_time", "lifecycle_stage", "experiment_id") if c in have]
    rows = [dict(zip(pick, r)) for r in con.execute(f"SELECT {', '.join(pick)} FROM runs")]
    keys: dict[str, list[str]] = {}
    for run_id, key in con.execute("SELECT DISTINCT run_uuid, key FROM metrics"):
        keys.setdefault(run_id, []).append(key)
    return [
        {
            "id": r["run_uuid"],
            "name": r.get("name"),
            "experiment": r.get("experiment_id"),
            "start": _int(r.get("start_time")),
            "status": r.get("status"),
            "deleted": r.get("lifecycle_stage") == "deleted",
            "metrics": sorted(keys.get(r["run_uuid"], [])),
        }
        for r in rows
    ]


#: a metric's rows in the order MLflow logged them (`{step}`, `{nan}`: the columns, or constants
#: for an older schema without them)
_DB_QUERY = "SELECT {step}, value, {nan} FROM metrics WHERE run_uuid = ? AND key = ? ORDER BY timestamp, rowid"


def _db_query(con) -> str:
    have = _columns(con, "metrics")
    return _DB_QUERY.format(step="step" if "step" in have else "-1", nan="is_nan" if "is_nan" in have else "0")


def _db_rows(rows: list[tuple]) -> tuple[np.ndarray, np.ndarray]:
    """(steps, values) of (step, value, is_nan) rows: a NaN and +/-Inf turned back (module docstring)."""
    a = np.array(rows, dtype=np.float64).reshape(-1, 3)
    vals = np.where(a[:, 2] > 0, np.nan, a[:, 1])
    vals = np.where(np.abs(vals) >= _DBL_MAX, np.copysign(np.inf, vals), vals)
    return a[:, 0].astype(np.int64), vals


def _read_db_series(con, info: dict[str, Any]) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    query = _db_query(con)
    series = {}
    for name in _wanted(info["metrics"]):
        steps, vals = _db_rows(con.execute(query, (info["id"], name)).fetchall())
        if steps.size and (steps < 0).all():
            steps = np.arange(steps.size, dtype=np.int64)
        series[name] = (steps, vals)
    return series


def _stream_db(con, info: dict[str, Any], notes: list[str], rules: Thinning) -> Streamed | None:
    """`_streamed` of a SQLite store's run: each metric's rows fetched a chunk at a time."""
    query = _db_query(con)
    step = "step" if "step" in _columns(con, "metrics") else "-1"

    def chunks(name: str, mine: list[str]) -> Iterator[Chunk]:
        return db_chunks(con, query, (info["id"], name), _db_rows)

    def others(name: str, mine: list[str]) -> list[str]:
        n, lo, hi = con.execute(
            f"SELECT COUNT(*), MIN({step}), MAX({step}) FROM metrics WHERE run_uuid = ? AND key = ?", (info["id"], name)
        ).fetchone()
        if n > 1 and lo == hi and hi >= 0:  # all negative: numbered in order by the whole read
            return [Msg("source.mlflow_unstepped", name=repr(name), step=int(lo))]
        return []

    names = _wanted(info["metrics"])
    return _streamed(names, set(names), chunks, others, notes, rules)


def _db_params(con, info: dict[str, Any]) -> dict[str, str]:
    if "params" not in {r[0] for r in con.execute("SELECT name FROM sqlite_master WHERE type='table'")}:
        return {}
    return {k: str(v) for k, v in con.execute("SELECT key, value FROM params WHERE run_uuid = ?", (info["id"],))}


# --- shared: choosing a run, params, building the Run ---------------------------------------


def _wanted(names: list[str]) -> list[str]:
    """The metric names worth reading: those that map to a records column."""
    return [n for n in names if column_for(n) is not None]


def _select(runs: list[dict[str, Any]], where: str, want: str) -> dict[str, Any]:
    """The run `want` names: its id, a prefix of the id, or its name (`--run`)."""
    hits = [r for r in runs if str(r["id"]) == want] or [
        r for r in runs if str(r["id"]).startswith(want) or r.get("name") == want
    ]
    if len(hits) == 1:
        return hits[0]
    known = ", ".join(_label(r) for r in sorted(runs, key=lambda r: -(r["start"] or 0))[:5])
    if not hits:
        raise SourceError(f"{where}: no MLflow run with id or name {want!r} (runs here: {known or 'none'})")
    raise SourceError(f"{where}: {len(hits)} MLflow runs match {want!r}; give more of the id (runs: {known})")


def _choose(runs: list[dict[str, Any]], where: str, want: str | None = None) -> tuple[dict[str, Any], list[str]]:
    if want is not None:
        return _select(runs, where, want), []
    live = [r for r in runs if not r["deleted"]]
    if not live:
        hint = (
            " (only deleted ones)"
            if runs
            else "; with the SQLite store the metrics are in mlflow.db, not mlruns/: point at that"
            if Path(where).name == "mlruns"
            else ""
        )
        raise SourceError(f"{where}: no MLflow runs here{hint}")
    with_metrics = [r for r in live if r["metrics"]]
    if not with_metrics:
        raise SourceError(f"{where}: the {len(live)} MLflow run(s) here logged no metrics")
    training = [r for r in with_metrics if _wanted(r["metrics"])] or with_metrics
    chosen = max(training, key=lambda r: (r["start"] or 0, str(r["id"])))
    notes: list[str] = []
    if len(live) > 1:
        others = [_label(r) for r in sorted(live, key=lambda r: -(r["start"] or 0)) if r is not chosen]
        shown = ", ".join(others[:5]) + (" ..." if len(others) > 5 else "")
        hint = Msg("source.mlflow_hint_dir") if "dir" in chosen else Msg("source.mlflow_hint_select")
        notes.append(Msg("source.mlflow_runs", n=len(live), chosen=_label(chosen), others=shown, hint=hint))
    return chosen, notes


def _label(r: dict[str, Any]) -> str:
    name = f" '{r['name']}'" if r.get("name") else ""
    return f"{r['experiment']}/{r['id']}{name}"


def _param_value(s: str) -> Any:
    t = s.strip()
    if t in ("True", "true"):
        return True
    if t in ("False", "false"):
        return False
    try:
        return int(t)
    except ValueError:
        pass
    try:
        return float(t)
    except ValueError:
        return t


#: params (HF TrainingArguments, Lightning hparams, common scripts) the detectors and report use
_PARAM_META = {
    "max_grad_norm": "max_grad_norm",
    "gradient_clip_val": "max_grad_norm",
    "clip_grad": "max_grad_norm",
    "grad_clip": "max_grad_norm",
    "logging_steps": "log_interval",
    "learning_rate": "config_lr",
    "lr": "config_lr",
    "fp16": "fp16",
    "bf16": "bf16",
}
_OPTIMIZER_KEYS = ("optimizer", "optim", "optimizer_name", "optimizer_type", "optimizer_class")
_GROUP_KEYS = {
    "lr": ("learning_rate", "lr"),
    "eps": ("adam_epsilon", "eps", "adam_eps", "epsilon"),
    "weight_decay": ("weight_decay", "wd"),
}


def _number(v: Any) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool)


def params_meta(raw: dict[str, str]) -> dict[str, Any]:
    params = {k: _param_value(v) for k, v in list(raw.items())[:2000]}
    meta: dict[str, Any] = {}
    for k, m in _PARAM_META.items():
        v = params.get(k)
        if _number(v) if m not in ("fp16", "bf16") else isinstance(v, bool):
            meta.setdefault(m, v)
    opt = next((params[k] for k in _OPTIMIZER_KEYS if isinstance(params.get(k), str)), None)
    if opt:
        group = {}
        for g, keys in _GROUP_KEYS.items():
            v = next((params[k] for k in keys if _number(params.get(k))), None)
            if v is not None:
                group[g] = v
        meta["optimizer"] = {"class": opt, "groups": [group], "from": "mlflow params"}
    if {"logging_steps", "optim", "logging_nan_inf_filter"} <= params.keys():
        meta["framework"] = "transformers"  # HF Trainer's MLflowCallback logs TrainingArguments
        meta["loss_is_interval_mean"] = True
    if params:
        meta["config"] = dict(list(params.items())[:200])
    return meta


#: the notes about one metric's values (`name`: its repr), quoted when that metric is why nothing was read
_METRIC_NOTES = ("source.mlflow_stopped", "source.mlflow_no_steps", "source.mlflow_unstepped")


def _best(counts: dict[str, int]) -> dict[str, str]:
    """records column -> the best-ranked metric name with points for it (as TensorBoard tags)."""
    best: dict[str, tuple[int, str]] = {}
    for name, n in counts.items():
        hit = column_for(name)
        if hit is None or not n:
            continue
        col, rank = hit
        if col not in best or (rank, name) < best[col]:
            best[col] = (rank, name)
    return {col: name for col, (_, name) in best.items()}


def series_run(
    series: dict[str, tuple[np.ndarray, np.ndarray]],
    *,
    what: str,
    notes: list[str],
    meta: dict[str, Any],
    logged_names: list[str],
) -> Run:
    """metric name -> (steps, values) -> a Run, the best-ranked name per column."""
    best = _best({name: s.size for name, (s, _) in series.items()})
    if not trains(best):
        _no_training_metric(series, what, notes, logged_names)
    all_steps, cols, logged = aligned({col: series[name] for col, name in best.items()})
    return _columns_run(all_steps, cols, logged, best, what=what, notes=notes, meta=meta)


def _no_training_metric(series: dict[str, tuple], what: str, notes: list[str], logged_names: list[str]) -> None:
    """Raise the error that says why no training metric was read: an empty one, or none by name."""
    empty = [n for n, (st, _) in series.items() if st.size == 0]
    if empty:
        why = next(
            (
                n
                for n in notes
                if isinstance(n, Msg) and n.key in _METRIC_NOTES and n.values.get("name") == repr(empty[0])
            ),
            "",
        )
        raise SourceError(
            f"{what}: the MLflow metric {empty[0]!r} holds no readable value" + (f" ({why})" if why else "")
        )
    raise SourceError(
        f"{what}: no training metric among the MLflow metrics "
        f"({', '.join(repr(n) for n in logged_names[:12]) or 'none'}"
        f"{' ...' if len(logged_names) > 12 else ''}); expected names like loss, "
        "train_loss, grad_norm, learning_rate or loss_scale"
    )


def _columns_run(
    steps: np.ndarray,
    cols: dict[str, np.ndarray],
    logged: dict[str, np.ndarray],
    best: dict[str, str],
    *,
    what: str,
    notes: list[str],
    meta: dict[str, Any],
) -> Run:
    used = ", ".join(f"{col} <- {name!r}" for col, name in sorted(best.items()))
    notes.insert(0, Msg("source.mlflow_read", what=what, used=used))
    absent = [SIGNAL_NAMES[c] for c in ("loss", "grad_norm", "lr", "scale") if c not in best]
    if absent:
        notes.insert(1, Msg("source.not_in_log", signals=absent))
    meta = {**meta, "columns": dict(best)}
    run = from_columns(steps, cols, meta=meta, source="mlflow", logged=logged)
    run.notes.extend(notes)
    return run


#: what a streamed read gives: the store of the chosen columns and column -> metric name
Streamed = tuple[StepColumns, dict[str, str]]


def _streamed(
    names: list[str],
    filled: set[str],
    chunks: Callable[[str, list[str]], Iterator[Chunk]],
    others: Callable[[str, list[str]], list[str]],
    notes: list[str],
    rules: Thinning,
) -> Streamed | None:
    """The chosen metrics (of `names`, those in `filled` hold points) merged as they are read
    (`chunks(name, its notes)`, `mlflow_stream.merge`), or None where the run must be read whole
    (`NotStreamable`; no training metric, an empty one: the whole read's error). The notes are the
    whole read's: of every metric in name order (`others`: those of a metric not merged, its damage
    into the list given, its unstepped note returned), then the unstepped ones."""
    best = _best({name: int(name in filled) for name in names})
    if not trains(best):
        return None
    mine: dict[str, list[str]] = {name: [] for name in names}
    try:
        store, counts = merge({col: chunks(name, mine[name]) for col, name in best.items()}, rules)
    except NotStreamable:
        return None
    if not all(counts.values()):
        return None
    merged = set(best.values())
    unstepped = [m for name in names if name not in merged for m in others(name, mine[name])]
    notes.extend(m for name in names for m in mine[name])
    notes.extend(unstepped)
    return store, best


def store_run(got: Streamed, *, what: str, notes: list[str], meta: dict[str, Any]) -> Run:
    """The Run of a streamed read, with the note that it was thinned (as the tables say it)."""
    st, best = got
    cols = {col: st.view(col).copy() for col in best}
    logged = {col: st.logged(col).copy() for col in best}
    run = _columns_run(st.step[: st.n].copy(), cols, logged, best, what=what, notes=notes, meta=meta)
    if st.thinned:
        run.meta.setdefault("log_interval", interval_before_thinning(st))  # not the thinned gaps
        thinned_note(run, {"rows": st.total, "kept": st.n, "stride": st.stride})
    return run


def _number_unstepped(series: dict[str, tuple[np.ndarray, np.ndarray]], notes: list[str]) -> None:
    """`mlflow.log_metric("loss", v)` without `step=` files every value at step 0: such a metric
    is numbered in logging order instead (what the MLflow UI shows against time)."""
    for name, (steps, values) in series.items():
        if steps.size > 1 and (steps == steps[0]).all():
            series[name] = (np.arange(steps.size, dtype=np.int64), values)
            notes.append(Msg("source.mlflow_unstepped", name=repr(name), step=int(steps[0])))


def _status_note(info: dict[str, Any]) -> list[str]:
    st = info.get("status")
    if st in ("FAILED", "KILLED"):
        return [Msg("source.mlflow_status", status=st)]
    if st == "RUNNING":
        return [Msg("source.mlflow_running")]
    return []


#: a run's metrics as read: merged into a store (`Streamed`), or metric name -> (steps, values)
Metrics = Streamed | dict[str, tuple[np.ndarray, np.ndarray]]
#: (run info, notes, params, what, its metrics) of the run chosen in a store
Read = tuple[dict[str, Any], list[str], dict[str, str], Any, Metrics]


def _read_db(db: Path, path: Path, select: str | None, rules: Thinning) -> Read:
    """`Read` of the chosen run of a SQLite store."""
    import sqlite3

    tables = _sqlite_tables(db)
    if not {"metrics", "runs"} <= tables:
        if not tables:
            raise SourceError(f"{db}: cannot read this SQLite database (damaged, cut short or locked)")
        raise SourceError(
            f"{db}: a SQLite database without MLflow's runs and metrics tables, not an MLflow tracking store"
        )
    con = _connect(db)
    try:
        info, notes = _choose(_db_runs(con), str(path), select)
        params = _db_params(con, info)
        got: Metrics | None = _stream_db(con, info, notes, rules)
        if got is None:
            got = _read_db_series(con, info)
    except sqlite3.Error as e:
        raise SourceError(f"{db}: not a readable MLflow database ({e})".splitlines()[0]) from e
    finally:
        con.close()
    what = Msg("source.mlflow_db_run", db=db.name, id=str(info["id"]))
    if path.is_dir() and _run_dirs(path):
        notes.append(Msg("source.mlflow_also_file_store", db=db.name))
    return info, notes, params, what, got


def _read_files(path: Path, select: str | None, rules: Thinning) -> Read:
    """`Read` of the chosen run of a file store."""
    info, notes = _choose([_file_run_info(d) for d in _run_dirs(path)], str(path), select)
    params = _read_text_dir(info["dir"] / "params")
    got: Metrics | None = _stream_files(info, notes, rules)
    if got is None:
        got = _read_file_series(info, notes)
    return info, notes, params, Msg("source.mlflow_run", id=str(info["id"])), got


@reader("MLflow tracking store", _sniff, priority=35)
def read(path: Path, select: str | None = None, rules: Thinning = THINNING) -> list[Run]:
    """`select`: the id (or a prefix of it) or the name of the run to read, else the newest. The
    metrics are merged as they are read and thinned past `rules.max_rows` steps (`mlflow_stream`);
    a run that cannot be is read whole."""
    db = path if path.is_file() else _db_in(path)
    info, notes, params, what, got = (
        _read_db(db, path, select, rules) if db is not None else _read_files(path, select, rules)
    )
    meta = {
        "framework": "mlflow",
        **params_meta(params),
        "mlflow": {k: info.get(k) for k in ("id", "name", "experiment", "status")},
    }
    if isinstance(got, dict):
        _number_unstepped(got, notes)
        run = series_run(got, what=what, notes=notes + _status_note(info), meta=meta, logged_names=info["metrics"])
    else:
        run = store_run(got, what=what, notes=notes + _status_note(info), meta=meta)
    if meta.get("framework") == "transformers":
        restore_filtered_nan(run)
    return [run]
