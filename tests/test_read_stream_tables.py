"""CSV and JSON-lines logs stream into bounded columns, and streaming changes no answer.

- Read in chunks of a few hundred bytes (a quoted field, a CRLF, a torn line cut across chunks) a
  table reads as it does in one chunk: the same steps, values, logged masks, notes and meta, on
  tables written by real writers (Lightning's CSVLogger, the csv module, Python's json with its NaN
  literals) and on the awkward ones (text cells, ragged rows, nested dicts, a key first seen late,
  string-first and mixed-type columns).
- A table longer than the store holds is thinned: the rows held stay under a bound while it is
  read, its first NaN step is kept, and a note says so.
"""

from __future__ import annotations

import csv
import json
import math
from pathlib import Path

import numpy as np
import pytest

from lossdoctor.records import Thinning
from lossdoctor.sources import load_path, tabular
from test_read_stream import same_run

N = 1500


def _curve(n: int = N, seed: int = 0):
    rng = np.random.default_rng(seed)
    s = np.arange(n)
    loss = 2 * np.exp(-s / (n / 3)) + 1 + 0.04 * rng.standard_normal(n)
    gn = 0.8 + 0.1 * np.abs(rng.standard_normal(n))  # half-normal noise, as grad norms have
    return s.tolist(), loss.tolist(), gn.tolist()


def _lightning(d: Path) -> Path:
    from lightning.pytorch.loggers import CSVLogger

    log = CSVLogger(str(d), name="lightning_logs")
    s, loss, _ = _curve()
    for i, v in zip(s, loss):  # rows as a LightningModule logs them: loss per step, lr every 10, val at 500
        log.log_metrics({"train_loss": v, "epoch": i // 500}, step=i)
        if i % 10 == 0:
            log.log_metrics({"lr-AdamW": 1e-3 * (1 - i / N)}, step=i)
        if i % 500 == 499:
            log.log_metrics({"val_loss": v + 0.1, "epoch": i // 500}, step=i)
    log.save()
    return Path(log.log_dir) / "metrics.csv"


def _csv_writer(d: Path, name: str, kind: str) -> Path:
    s, loss, gn = _curve()
    p = d / name
    with open(p, "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["step", "loss", "grad_norm", "note"])
        for i, v, g in zip(s, loss, gn):
            if kind == "quoted":
                w.writerow([i, v, g, 'a, "b"\nc' if i % 37 == 0 else "x"])
            elif kind == "text":
                w.writerow([i, "oops" if i % 97 == 0 else v, "" if i % 3 else g, ""])
            elif kind == "ragged":
                w.writerow([i, v] + ([g, "x", "extra"] if i % 5 == 0 else [] if i % 5 == 1 else [g, "x"]))
            else:
                w.writerow([i, "nan" if i > 0.9 * N else v, g, 1])
    return p


def _jsonl(d: Path, name: str, kind: str) -> Path:
    s, loss, gn = _curve()
    rows = []
    for i, v, g in zip(s, loss, gn):
        if kind == "nan":
            rows.append({"step": i, "loss": v if i < 0.9 * N else math.nan, "grad_norm": math.inf if i == N - 3 else g})
        elif kind == "nested":
            rows.append({"step": i, "train": {"loss": v, "lr": 1e-3}, **({"eval_loss": v} if i % 400 == 399 else {})})
        elif kind == "strings":
            rows.append({"step": str(i), "loss": "NaN" if i == 0 else f"{v}", "grad_norm": None if i % 4 else g})
        else:  # mixed types: a list lr, a text loss now and then, NaN late
            rows.append(
                {
                    "step": i,
                    "loss": "n/a" if i % 300 == 7 else (v if i < 0.9 * N else math.nan),
                    "lr": [1e-3] if i % 2 else 1e-3,
                }
            )
    p = d / name
    p.write_text("".join(json.dumps(r) + "\n" for r in rows) + ('{"step": 99' if kind != "nested" else ""))
    return p


def _in_small_chunks(path: Path, monkeypatch):
    whole = load_path(path)
    monkeypatch.setattr(tabular, "CSV_CHUNK", 257)
    monkeypatch.setattr(tabular, "JSONL_CHUNK", 257)
    monkeypatch.setattr(tabular, "_CSV_BATCH", 5)
    chunked = load_path(path)
    assert len(whole) == len(chunked) == 1
    same_run(whole[0], chunked[0])
    return chunked[0]


def test_lightning_csv_reads_the_same_in_small_chunks(tmp_path, monkeypatch):
    run = _in_small_chunks(_lightning(tmp_path), monkeypatch)
    assert run.source == "lightning_csv" and run.has("lr") and run.meta["columns"]["loss"] == "train_loss"
    assert int(run.logged("loss").sum()) == N


@pytest.mark.parametrize("kind", ["dense", "quoted", "text", "ragged"])
def test_csv_reads_the_same_in_small_chunks(tmp_path, monkeypatch, kind):
    run = _in_small_chunks(_csv_writer(tmp_path, f"{kind}.csv", kind), monkeypatch)
    keys = [getattr(n, "key", None) for n in run.notes]
    if kind == "dense":  # a dense table's "nan" cells are logged NaNs
        first = np.nonzero(run.logged("loss") & np.isnan(run.col("loss")))[0][0]
        assert run.steps[first] == math.floor(0.9 * N) + 1
    if kind == "text":
        assert "source.not_numbers" in keys
        assert int(run.logged("grad_norm").sum()) == len(range(0, N, 3))
    if kind == "ragged":
        assert "source.ragged_rows" in keys


@pytest.mark.parametrize("kind", ["nan", "nested", "strings", "mixed"])
def test_jsonl_reads_the_same_in_small_chunks(tmp_path, monkeypatch, kind):
    run = _in_small_chunks(_jsonl(tmp_path, f"{kind}.jsonl", kind), monkeypatch)
    keys = [getattr(n, "key", None) for n in run.notes]
    assert ("source.unreadable_lines" in keys) == (kind != "nested")
    if kind == "nan":
        assert run.steps[np.nonzero(run.logged("loss") & np.isnan(run.col("loss")))[0][0]] == math.ceil(0.9 * N)
        assert np.isinf(run.col("grad_norm")[N - 3])
    if kind == "nested":
        assert run.has("lr") and "loss" in run.meta["columns"]


_SMALL = Thinning(max_rows=4096, head=256, tail=256, window=64, context=16, nonfinite_keep=64)


@pytest.mark.parametrize("fmt", ["csv", "jsonl"])
def test_a_long_table_is_thinned_in_bounded_memory(tmp_path, monkeypatch, fmt):
    """60,000 rows through a store that holds 4,096: the rows held never pass the bound (the noisy
    grad norm's outliers' neighbours included), the first NaN loss is kept, a note says so."""
    n = 60_000
    s, loss, gn = _curve(n, seed=3)
    nan_at = int(0.9 * n)
    p = tmp_path / f"long.{fmt}"
    if fmt == "csv":
        p.write_text(
            "step,loss,grad_norm\n"
            + "".join(f"{i},{'nan' if i >= nan_at else v},{g}\n" for i, v, g in zip(s, loss, gn))
        )
    else:
        p.write_text(
            "".join(
                json.dumps({"step": i, "loss": math.nan if i >= nan_at else v, "grad_norm": g}) + "\n"
                for i, v, g in zip(s, loss, gn)
            )
        )
    monkeypatch.setattr(tabular, "CSV_CHUNK", 64 << 10)
    monkeypatch.setattr(tabular, "JSONL_CHUNK", 64 << 10)
    held: list[int] = []
    real_thin = tabular.TableColumns.append

    def append(self, m, cols):
        real_thin(self, m, cols)
        held.append(self.store.n)

    monkeypatch.setattr(tabular.TableColumns, "append", append)
    run = (tabular.read_csv(p, rules=_SMALL) if fmt == "csv" else tabular.read_jsonl(p, rules=_SMALL))[0]
    chunk_rows = max(np.diff([0] + held))  # a chunk is appended before the store thins
    assert max(held) <= _SMALL.max_rows + chunk_rows
    assert len(run) < n // 4
    assert run.meta["thinned"]["rows"] == n
    assert "source.thinned" in [getattr(x, "key", None) for x in run.notes]
    first = np.nonzero(run.logged("loss") & np.isnan(run.col("loss")))[0][0]
    assert run.steps[first] == nan_at


_CELLS = ["0", "1", "17", "2.5", "-0.0", "1e-05", "1E5", "3.3050000000000002", "nan", "-3", "1e-330", "5e-324"]
_ODD_CELLS = ["-0", "inf", "-inf", "+1", "1.", ".5", "1e999", "18446744073709551617", "00", "nan1", "1e-0", " 2", ""]


@pytest.mark.parametrize("seed", range(40))
def test_dense_csv_cells_parsed_by_json_are_what_loadtxt_reads(seed):
    """A dense comma table's numbers parsed by JSON (`tabular._json_rows`) are, cell for cell, what
    `np.loadtxt` reads (NaN, the sign of a zero, subnormals, infinities), and a table JSON cannot read
    the same way (a `-0`, an odd spelling, a row of another width) is left to `np.loadtxt`."""
    rng = np.random.default_rng(seed)
    width = int(rng.integers(1, 5))
    cells = _CELLS + (_ODD_CELLS if seed % 4 == 1 else ["-0"] if seed % 4 == 3 else [])
    rows = [[str(rng.choice(cells)) for _ in range(width)] for _ in range(int(rng.integers(1, 60)))]
    if seed % 5 == 4 and width > 1:
        rows[len(rows) // 2].pop()  # a row of another width
    body = "\n".join(",".join(r) for r in rows) + ("\n" if seed % 3 else "")
    lines = body.count("\n") + (0 if body.endswith("\n") else 1)
    keep = list(range(width))[::-1][: max(1, width - 1)]
    try:
        want = np.loadtxt(__import__("io").StringIO(body), delimiter=",", dtype=np.float64, ndmin=2, usecols=keep)
    except ValueError:
        want = None
    got = tabular._json_rows(body, width, lines)
    if got is not None:
        assert want is not None
        got = got[:, keep]
        assert np.array_equal(got, want, equal_nan=True) and np.array_equal(np.signbit(got), np.signbit(want))
    if seed % 2 == 0 and seed % 5 != 4:
        assert got is not None  # plain JSON-spelled cells take the JSON path
