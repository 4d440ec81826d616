"""MLflow metrics are merged by step as they are read, into bounded columns, and that changes no answer.

- A run shorter than the store holds, read in chunks of a few lines (file store) or rows (SQLite),
  is the run the whole read gives: steps, values, logged masks, notes and meta, on stores written by
  the real `mlflow` writer with metrics at their own steps (an eval loss every 25 steps, an LR every
  3), a NaN and an Inf.
- A metric longer than the store holds is thinned: the rows held stay under a bound while it is
  read, the first NaN step and the spike are kept, a note says so, and the detectors' first finding
  is the whole read's.
"""

from __future__ import annotations

import math
import sqlite3
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from lossdoctor.detectors.engine import diagnose_runs
from lossdoctor.records import StepColumns, Thinning
from lossdoctor.sources import load_path, mlflow_store, mlflow_stream
from msgs import has
from test_read_stream import same_run
from test_sources_mlflow import (  # noqa: F401  (fixtures)
    METRIC_LINES,
    assert_same_parse,
    block_size,
    empty_db,
    tracking,
    whole_metric_file,
)

mlflow = pytest.importorskip("mlflow")

_SMALL = Thinning(max_rows=4096, head=256, tail=256, window=64, context=16, nonfinite_keep=64)


def _log(n: int, *, nan_at: int, spike: int | None = None, inf_at: int | None = None, sparse: bool = True):
    """The points of a run: (key, value, timestamp, step); the loss NaN from `nan_at` on."""
    rng = np.random.default_rng(0)
    s = np.arange(n)
    loss = 2 * np.exp(-s / (n / 3)) + 1 + 0.04 * rng.standard_normal(n)
    gn = 0.8 + 0.1 * np.abs(rng.standard_normal(n))
    if spike is not None:
        loss[spike] = 50.0
    loss[nan_at:] = math.nan
    if inf_at is not None:
        gn[inf_at] = math.inf
    pts = []
    for i in range(n):
        ts = 1_700_000_000_000 + 100 * i
        pts += [("train/loss", float(loss[i]), ts, i), ("train/grad_norm", float(gn[i]), ts, i)]
        if not sparse or i % 3 == 0:
            pts.append(("learning_rate", 1e-3, ts, i))
        if sparse and i % 25 == 24:
            pts.append(("eval_loss", 1.5, ts, i))
    return pts


def _write(tmp_path: Path, tracking, store: str, pts) -> Path:  # noqa: F811
    """The points through the real writer's `log_batch` (MLflow's batch limit: 1,000)."""
    from mlflow.entities import Metric

    uri = f"file:{tmp_path}/mlruns" if store == "file" else f"sqlite:///{tmp_path}/mlflow.db"
    tracking(uri)
    with mlflow.start_run() as active:
        client = mlflow.MlflowClient()
        metrics = [Metric(k, v, t, s) for k, v, t, s in pts]
        for a in range(0, len(metrics), 1000):
            client.log_batch(active.info.run_id, metrics=metrics[a : a + 1000])
        mlflow.log_params({"learning_rate": 1e-3, "optimizer": "AdamW"})
    return tmp_path / ("mlruns" if store == "file" else "mlflow.db")


def _whole(monkeypatch, path: Path):
    """The run as the whole read (the reading before streaming) gives it."""
    with monkeypatch.context() as m:
        m.setattr(mlflow_store, "_streamed", lambda *a: None)
        return load_path(path)[0]


def _streamed_only(m) -> None:
    def whole(*a):
        raise AssertionError("read whole, not streamed")

    m.setattr(mlflow_store, "_read_file_series", whole)
    m.setattr(mlflow_store, "_read_db_series", whole)


@pytest.mark.parametrize("store", ["file", "sqlite"])
def test_a_short_run_streamed_in_small_chunks_is_the_whole_read(tmp_path, tracking, monkeypatch, store):  # noqa: F811
    path = _write(tmp_path, tracking, store, _log(400, nan_at=350, inf_at=200))
    whole = _whole(monkeypatch, path)
    with monkeypatch.context() as m:
        _streamed_only(m)
        m.setattr(mlflow_store, "_BLOCK", 200)  # a file store's metric in blocks of a few lines
        m.setattr(mlflow_stream, "DB_CHUNK", 7)  # a SQLite metric 7 rows at a time
        streamed = load_path(path)[0]
    same_run(streamed, whole)
    assert len(streamed) == 400 and "thinned" not in streamed.meta
    assert streamed.meta["columns"] == {
        "loss": "train/loss",
        "grad_norm": "train/grad_norm",
        "lr": "learning_rate",
        "eval_loss": "eval_loss",
    }
    assert np.isinf(streamed.cols["grad_norm"][200]) and np.isnan(streamed.cols["loss"][350])
    assert streamed.logged("eval_loss").sum() == 16 and streamed.logged("lr").sum() == 134


@pytest.mark.parametrize("store", ["file", "sqlite"])
def test_damage_and_unstepped_notes_are_the_whole_reads(tmp_path, tracking, monkeypatch, store):  # noqa: F811
    """The whole read read every metric and said so of each: a torn last line of a merged metric
    (read up to it, in its last block), a damaged line of a metric not merged, one logged without a
    step. The streamed read says the same, and reads the torn metric without a whole read."""
    pts = _log(400, nan_at=400)
    pts += [("train_loss", 2.0 - 0.1 * i, 1_700_000_000_000 + i, 0) for i in range(5)]  # no step=: all at 0
    pts += [("train_lr", 1e-3, 1_700_000_000_000 + i, i) for i in range(6)]
    path = _write(tmp_path, tracking, store, pts)
    if store == "file":
        metrics = next(path.glob("*/*/metrics"))
        with open(metrics / "train/grad_norm", "a") as f:
            f.write("1700000099999 0.5")  # torn mid-write
        text = (metrics / "train_lr").read_text().splitlines(keepends=True)
        (metrics / "train_lr").write_text("".join(text[:3]) + "garbage\n" + "".join(text[3:]))
    monkeypatch.setattr(mlflow_store, "STREAM_BLOCK", 300)
    whole = _whole(monkeypatch, path)
    with monkeypatch.context() as m:
        _streamed_only(m)
        streamed = load_path(path)[0]
    same_run(streamed, whole)
    assert streamed.meta["columns"]["loss"] == "train/loss"
    assert has(streamed.notes, "source.mlflow_unstepped", name="'train_loss'", step=0)
    if store == "file":
        assert has(streamed.notes, "source.mlflow_stopped", name="'train/grad_norm'", line=401, n=400)
        assert has(streamed.notes, "source.mlflow_stopped", name="'train_lr'", line=4, n=3)


def test_a_step_logged_twice_is_read_whole(tmp_path, tracking, monkeypatch):  # noqa: F811
    """A restarted run logs steps again: the merge cannot take it in order, the whole read keeps
    the value logged last, as before."""
    pts = _log(60, nan_at=60, sparse=False)
    pts += [(k, v + 1, t + 10_000, s) for k, v, t, s in pts if s >= 40]
    path = _write(tmp_path, tracking, "file", pts)
    calls = []
    real = mlflow_store._read_file_series
    monkeypatch.setattr(mlflow_store, "_read_file_series", lambda *a: calls.append(1) or real(*a))
    run = load_path(path)[0]
    assert calls and len(run) == 60 and run.cols["lr"][50] == 1e-3 + 1


def _long_file_store(tmp_path: Path, tracking, pts, head: int) -> Path:  # noqa: F811
    """The first `head` steps through the real writer, the rest appended in the line format it wrote
    (checked against its lines): the file store opens the file once per point (~170 us), so 60,000
    steps through it would take a minute."""
    first = [p for p in pts if p[3] < head]
    path = _write(tmp_path, tracking, "file", first)
    metrics = next(path.glob("*/*/metrics"))
    for key in ("train/loss", "train/grad_norm", "learning_rate"):
        mine = [f"{t} {v!r} {s}\n" for k, v, t, s in pts if k == key]
        assert (metrics / key).read_text() == "".join(mine[:head])
        with open(metrics / key, "a") as f:
            f.write("".join(mine[head:]))
    return path


def _long_sqlite(tmp_path: Path, tracking, pts, head: int) -> Path:  # noqa: F811
    """The first `head` steps through the real writer, the rest inserted as rows the way it stores
    them (checked against its rows; a NaN as 0 with `is_nan`, as
    `test_sqlite_nan_and_inf_match_mlflows_own_reader` checks): its `log_batch` takes 1,000 points
    a call, and 180,000 points through it would take minutes."""
    path = _write(tmp_path, tracking, "sqlite", [p for p in pts if p[3] < head])
    con = sqlite3.connect(path)
    (run_id,) = con.execute("SELECT run_uuid FROM runs").fetchone()

    def row(k, v, t, s):
        return (k, 0.0 if math.isnan(v) else v, t, run_id, s, int(math.isnan(v)))

    cols = "key, value, timestamp, run_uuid, step, is_nan"
    stored = con.execute(f"SELECT {cols} FROM metrics ORDER BY step, key").fetchall()
    assert stored == sorted((row(*p) for p in pts if p[3] < head), key=lambda r: (r[4], r[0]))
    con.executemany(f"INSERT INTO metrics ({cols}) VALUES (?, ?, ?, ?, ?, ?)", [row(*p) for p in pts if p[3] >= head])
    con.commit()
    con.close()
    return path


@pytest.mark.parametrize("store", ["file", "sqlite"])
def test_a_long_metric_is_thinned_in_bounded_memory(tmp_path, tracking, monkeypatch, store):  # noqa: F811
    """60,000 steps through a store that holds 4,096: the rows held never pass the bound, the first
    NaN loss and the spike are kept, a note says so, the first finding is the whole read's."""
    n, spike, nan_at = 60_000, 30_000, 54_000
    pts = _log(n, nan_at=nan_at, spike=spike, sparse=False)
    path = (_long_file_store if store == "file" else _long_sqlite)(tmp_path, tracking, pts, head=1500)
    held: list[int] = []

    class Spy(StepColumns):
        def append_arrays(self, steps, *a, **k):
            super().append_arrays(steps, *a, **k)
            held.append(self.n)

    whole = load_path(path)[0]  # the default store holds 60,000 steps whole
    assert "thinned" not in whole.meta and len(whole) == n
    with monkeypatch.context() as m:
        _streamed_only(m)
        m.setattr(mlflow_stream, "StepColumns", Spy)
        thin = mlflow_store.read(path, rules=_SMALL)[0]
    assert max(held) <= _SMALL.max_rows + max(np.diff([0] + held))  # a chunk is appended before the store thins
    assert len(thin) < n // 4 and thin.meta["thinned"]["rows"] == n
    assert has(thin.notes, "source.thinned", n=n)
    assert thin.meta["log_interval"] == 1  # the run's own interval, not the thinned gaps
    bad = thin.steps[thin.logged("loss") & np.isnan(thin.col("loss"))]
    assert int(bad[0]) == nan_at
    assert thin.col("loss")[thin.steps == spike][0] == 50.0
    assert thin.logged("lr")[thin.steps == nan_at][0]  # every column at the kept steps
    first_thin, first_whole = diagnose_runs([thin]).findings[0], diagnose_runs([whole]).findings[0]
    assert (first_thin.cause, first_thin.step) == (first_whole.cause, first_whole.step)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    METRIC_LINES,
    st.booleans(),
    st.integers(8, 300),
)
@example(["1 2.5 0", "2 2.0 1", "3 1.5 2", "4 1.5"], False, 16)  # torn last line in a later block
@example(["1 2.5 0", "2 2.0 1.0", "3 1.5 2", "4 1.5"], False, 16)  # a step `int` does not read, then damage
@example(["0 0 0", "0 1700000000100 0"], False, 8)  # a last line longer than a block, cut by it
@example(["0 0 0", "0 1700000000100"], False, 8)  # ... and damaged
def test_a_metric_file_streamed_by_blocks_is_read_as_whole(tmp_path, lines, newline_at_end, block):
    """A metric file's chunks (`metric_file_chunks`, damage in a later block read line by line) are,
    put together, what the whole file's parse gives: the same steps, values (NaN, the sign of a
    zero), notes; where they cannot be (`NotStreamable`), the file is read whole."""
    path, want, whole_notes = whole_metric_file(tmp_path, lines, newline_at_end)
    notes: list[str] = []
    try:
        with block_size("STREAM_BLOCK", block):
            parts = list(mlflow_store.metric_file_chunks(path, "loss", notes))
    except mlflow_stream.NotStreamable:
        return
    got = [np.concatenate([p[i] for p in parts] or [np.zeros(0)]) for i in (0, 1)]
    assert_same_parse(got, want, notes, whole_notes)
    if lines[:3] == ["1 2.5 0", "2 2.0 1", "3 1.5 2"] and lines[3:] == ["4 1.5"]:
        assert len(parts) > 1 and notes  # the torn line read in its block, not the file whole
