"""The console reader streams into columns in bounded memory, and its fast path changes no answer.

- The fast path (`sources/console_fast.py`: learned line shapes read in bulk, bare tqdm bars and
  learned log-dict shapes without the general patterns) gives the same Run as the line parser alone,
  on generated nanoGPT and Hugging Face Trainer consoles (the real tqdm formatter) and on every
  dev-split log of the real-log corpus that the console reader reads.
- A log longer than the store holds is thinned (`records.StepColumns`): it keeps its first
  non-finite step and its spike step, says so in a note, and the detectors name the same first bad
  step as on the whole log; the column arrays stay under a bound while the log is read.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from lossdoctor.detectors.engine import diagnose_runs
from lossdoctor.records import StepColumns, Thinning
from lossdoctor.sources import console_fast, load_path, stdout

CORPUS = Path(__file__).resolve().parents[1] / "benchmarks" / "real_logs"


def _curve(n: int, seed: int = 0, spike: int | None = None, nan_at: int | None = None):
    rng = np.random.default_rng(seed)
    s = np.arange(1, n + 1)
    loss = 2.2 * np.exp(-s / (n / 3)) + 1.1 + 0.04 * rng.standard_normal(n)
    gn = 0.8 + 0.1 * np.abs(rng.standard_normal(n))
    if spike is not None:
        loss[spike - 1] *= 4.0
    if nan_at is not None:
        loss[nan_at - 1 :] = np.nan
        gn[nan_at - 1 :] = np.nan
    return s, loss, gn


def _nanogpt(path: Path, n: int, **kw) -> Path:
    """nanoGPT's line (train.py: `print(f"iter {iter_num}: loss {lossf:.4f}, time {dt*1000:.2f}ms, mfu
    {running_mfu*100:.2f}%")`)."""
    s, loss, _ = _curve(n, **kw)
    rng = np.random.default_rng(1)
    dt = 100 + 50 * rng.random(n)
    path.write_text(
        "".join(
            f"iter {i}: loss {v:.4f}, time {t:.2f}ms, mfu {38 + t / 100:.2f}%\n"
            for i, v, t in zip(s.tolist(), loss.tolist(), dt.tolist())
        )
    )
    return path


def _hf_console(path: Path, n: int, **kw) -> Path:
    """The HF Trainer's console with its progress bar (tqdm's own `format_meter`): the bar redrawn,
    cleared by `tqdm.write` for the log dict (logging_steps=1), redrawn; some banner lines first."""
    from tqdm import tqdm

    s, loss, gn = _curve(n, **kw)
    out = ["***** Running training *****\n", "  Num examples = 1,000\n"]
    for i, v, g in zip(s.tolist(), loss.tolist(), gn.tolist()):
        bar = tqdm.format_meter(i, n, elapsed=i / 9.0)
        out.append(
            f"\r{bar}\r{' ' * len(bar)}\r{{'loss': {v:.4f}, 'grad_norm': {g:.6g}, "
            f"'learning_rate': {3e-4 * (1 - i / n):.4e}, 'epoch': {i / n:.2f}}}\n\r{bar}"
        )
    path.write_text("".join(out) + "\n{'train_runtime': 12.5, 'train_loss': 1.5, 'epoch': 1.0}\n")
    return path


def same_run(a, b) -> None:
    """Two readings of one file are the same run: steps, columns, logged masks, notes, events, meta."""
    assert np.array_equal(a.steps, b.steps)
    assert sorted(a.cols) == sorted(b.cols)
    for k in a.cols:
        np.testing.assert_array_equal(a.cols[k], b.cols[k], err_msg=k)
        np.testing.assert_array_equal(a.logged(k), b.logged(k), err_msg=k)
    assert [getattr(n, "key", n) for n in a.notes] == [getattr(n, "key", n) for n in b.notes]
    assert list(map(str, a.notes)) == list(map(str, b.notes))
    assert repr(a.events) == repr(b.events)
    assert {k: v for k, v in a.meta.items()} == {k: v for k, v in b.meta.items()}
    assert a.source == b.source


def _both(path: Path, monkeypatch):
    monkeypatch.setattr(console_fast, "FAST", False)
    slow = load_path(path)
    monkeypatch.setattr(console_fast, "FAST", True)
    fast = load_path(path)
    assert len(slow) == len(fast)
    for a, b in zip(slow, fast):
        same_run(a, b)
    return fast


def test_fast_path_reads_a_nanogpt_console_as_the_line_parser(tmp_path, monkeypatch):
    p = _nanogpt(tmp_path / "train.log", 60_000, spike=30_000, nan_at=50_000)
    run = _both(p, monkeypatch)[0]
    assert len(run) == 60_000 and run.meta["framework"] == "nanoGPT"
    bad = run.steps[run.logged("loss") & ~np.isfinite(run.col("loss"))]
    assert int(bad[0]) == 50_000


def test_fast_path_reads_an_hf_console_with_tqdm_redraws_as_the_line_parser(tmp_path, monkeypatch):
    p = _hf_console(tmp_path / "hf.out", 3_000, nan_at=2_500)
    run = _both(p, monkeypatch)[0]
    assert run.meta["framework"] == "transformers" and len(run) == 3_000
    assert int(run.steps[0]) == 1 and int(run.steps[-1]) == 3_000  # each dict at the bar drawn after it
    assert np.isnan(run.col("loss")[run.steps == 2_500][0]) and np.isfinite(run.col("loss")[run.steps == 2_499][0])


def test_fast_path_survives_mixed_lines_and_chunk_edges(tmp_path, monkeypatch):
    """Learned lines between other lines (a warning, an eval line, a prefixed line, CRLF), over more
    than one read chunk: the same rows, notes and events either way."""
    s, loss, _ = _curve(40_000, nan_at=39_000)
    lines = []
    for i, v in zip(s.tolist(), loss.tolist()):
        lines.append(f"iter {i}: loss {v:.4f}, time 120.50ms, mfu 38.12%" + ("\r\n" if i % 7 == 0 else "\n"))
        if i % 997 == 0:
            lines.append(f"step {i}: train loss {v:.4f}, val loss {v + 0.1:.4f}\n")
        if i % 1500 == 0:
            lines.append("WARNING: gradient overflow detected, skipping step, reducing loss scale to 1024\n")
        if i % 2500 == 0:
            lines.append(f"[rank0]: iter {i}: loss {v:.4f}, time 99.00ms, mfu 1.00%\n")
    (tmp_path / "mixed.log").write_text("".join(lines))
    run = _both(tmp_path / "mixed.log", monkeypatch)[0]
    assert run.has("eval_loss") and "text_events" in run.events


def _console_dev_logs() -> list[str]:
    entries = json.loads((CORPUS / "manifest.json").read_text(encoding="utf-8"))
    return [e["file"] for e in entries if e.get("split") == "dev"]


@pytest.mark.slow
def test_fast_path_reads_the_dev_corpus_as_the_line_parser(monkeypatch):
    """Every dev-split real log: the same Run (or the same refusal) with the fast path on and off."""
    from lossdoctor.sources import SourceError

    compared = 0
    for name in _console_dev_logs():
        path = CORPUS / name
        out = []
        for on in (False, True):
            monkeypatch.setattr(console_fast, "FAST", on)
            try:
                out.append(load_path(path))
            except SourceError as e:
                out.append(str(e))
        if isinstance(out[0], str) or isinstance(out[1], str):
            assert out[0] == out[1], name
            continue
        for a, b in zip(*out):
            same_run(a, b)
        compared += 1
    assert compared >= 50


def _read_with(path: Path, rules: Thinning):
    p = stdout.ConsoleParser(rules)
    with open(path, "rb") as f:
        console_fast.feed_stream(f, p)
    p.finish()
    return p, stdout.rows_to_run(p, path.name)


@pytest.mark.parametrize("fast", [True, False])
def test_a_thinned_long_log_keeps_its_first_nonfinite_step_and_its_spike(tmp_path, monkeypatch, fast):
    monkeypatch.setattr(console_fast, "FAST", fast)
    n, spike, nan_at = 200_000, 90_001, 170_001
    path = _nanogpt(tmp_path / "long.log", n, spike=spike, nan_at=nan_at)
    rules = Thinning(max_rows=20_000, head=2_000, tail=2_000)
    p, thin = _read_with(path, rules)
    whole = load_path(path)[0]  # the default store holds 200k rows whole
    assert "thinned" not in whole.meta and len(whole) == n
    assert thin.meta["thinned"]["rows"] == n and len(thin) < 30_000
    assert any(getattr(m, "key", "") == "source.thinned" for m in thin.notes)
    assert thin.meta["log_interval"] == 1  # the log's own interval, not the thinned gaps
    bad = thin.steps[thin.logged("loss") & ~np.isfinite(thin.col("loss"))]
    assert int(bad[0]) == nan_at
    assert spike in set(thin.steps.tolist())
    assert thin.col("loss")[thin.steps == spike][0] == whole.col("loss")[whole.steps == spike][0]
    # the detectors' first bad step is the same on the thinned and on the whole log
    rep_thin, rep_whole = diagnose_runs([thin]), diagnose_runs([whole])
    first = {f.cause: f.step for f in rep_whole.findings}
    assert rep_thin.findings[0].cause == rep_whole.findings[0].cause
    assert rep_thin.findings[0].step == rep_whole.findings[0].step == nan_at
    assert first.get("loss_spike") == spike
    assert {f.cause: f.step for f in rep_thin.findings}.get("loss_spike") == spike
    # bounded memory: the column arrays never held more than the thinned rows' worth
    per_row = 8 + 8 + 1 + 1 + (8 + 1) * 1  # step, ordinal, how, flags, one series (loss)
    assert p.store.peak_nbytes <= 2 * (rules.max_rows + 1024) * per_row * 1.2
    assert len(p.rows) <= 2 * stdout._KEEP_RECENT


def test_store_thinning_is_deterministic_and_keeps_what_is_rare():
    rules = Thinning(max_rows=4_000, head=500, tail=500, window=64)
    st = StepColumns(("loss", "eval_loss"), rules)
    steps = np.arange(50_000, dtype=np.float64)
    loss = np.ones(50_000) + 0.001 * np.sin(steps)
    loss[20_000] = 50.0  # an outlier
    for a in range(0, 50_000, 3_333):  # appended in uneven batches
        st.append_arrays(steps[a : a + 3_333], {"loss": loss[a : a + 3_333]})
    st.append_rows([{"step": 50_000, "eval_loss": 2.0}])
    kept = set(st.step[: st.n].astype(int).tolist())
    assert st.thinned > 40_000 and st.n <= rules.max_rows
    assert 20_000 in kept and 50_000 in kept and set(range(500)) <= kept and set(range(49_600, 50_001)) <= kept
    middle = [s for s in kept if 5_000 < s < 15_000]
    assert middle and all(s % st.stride == 0 for s in middle)
    assert st.logged("eval_loss")[st.step[: st.n] == 50_000].all()


class _Recorder:
    """A parser that keeps the segments it is fed (and learns nothing: no bulk)."""

    templates: list = []

    def __init__(self) -> None:
        self.segs: list[str] = []

    def feed(self, seg: str) -> None:
        self.segs.append(seg)

    def can_bulk(self) -> bool:
        return False

    def cycles(self) -> list:
        return []


def test_the_fast_path_cuts_segments_as_console_text_does(tmp_path):
    """`console_fast.feed_stream` hands the parser the segments `console_text.segments` makes: split
    at `\\r`, `\\n` and `\\r\\n` (also across a read chunk), bad UTF-8 as U+FFFD, an over-long segment cut
    to MAX_SEGMENT characters, a last line without a newline."""
    import io

    from lossdoctor.sources.console_text import segments

    parts = [
        b"iter 1: loss 2.0\r\n",
        b"\xff\xfe bad bytes \xe2\x82\n",
        b"x" * (3 << 20) + b"\n",
        "caf\u00e9 \u2588\u2588 ok\r".encode(),
        b"y" * 70_000 + b"\r\n",
        b"\r\r\n\n",
        b"a" * ((1 << 16) - 7) + b"\r",
        b"\nafter a cut separator\n",
        "\u00e9".encode() * 40_000 + b"\n",
        b"last line without newline",
    ]
    data = b"".join(parts)
    rec = _Recorder()
    console_fast.feed_stream(io.BytesIO(data), rec)
    assert rec.segs == list(segments(io.BytesIO(data)))


def test_bulk_numbers_are_the_floats_python_reads():
    """The bulk reads' number parser (orjson for what JSON can spell, numpy's text parser for the rest)
    gives, token for token, the double `float()` gives: random doubles at full precision, the printf
    formats logs use, large integers, and the spellings JSON has not (nan, inf, a leading + or zero, `1.`)."""
    rng = np.random.default_rng(7)
    bits = rng.integers(0, 2**63, 20_000, dtype=np.int64).view(np.float64)
    doubles = [repr(float(x)) for x in bits if np.isfinite(x)]
    loss = rng.random(20_000) * 10
    common = [f"{v:.4f}" for v in loss] + [f"{v:.6g}" for v in loss * 1e-4] + [f"{v:.3e}" for v in loss * 1e20]
    ints = [str(int(v)) for v in rng.integers(0, 2**62, 5_000)] + ["18446744073709551615", "0"]
    for tokens in (doubles, common, ints, common[:50] + ["nan", "inf", "-inf", "+1.5", "007", "1.", "NaN"]):
        got = console_fast.numbers([t.encode() for t in tokens], len(tokens))
        want = np.array([float(t) for t in tokens])
        np.testing.assert_array_equal(got, want)
        assert np.array_equal(np.signbit(got), np.signbit(want))


def test_segment_count_counts_crlf_once():
    """`console_fast._segments_in` (the line count a bulk read adds: `\\r`, `\\n` and `\\r\\n` one
    separator each, `\\r\\n` pairs found at the line feeds) gives the count of three `bytes.count`s, on
    random mixes of separators, over any span (a pair cut by the span's start or end is no pair)."""
    rng = np.random.default_rng(3)
    for _ in range(300):
        data = bytes(rng.choice(np.frombuffer(b"a\r\n", np.uint8), int(rng.integers(0, 200))).tolist())
        a = int(rng.integers(0, len(data) + 1))
        b = int(rng.integers(a, len(data) + 1))
        want = data.count(b"\r", a, b) + data.count(b"\n", a, b) - data.count(b"\r\n", a, b)
        assert console_fast._segments_in(data, a, b) == want, (data, a, b)


def test_fast_path_reads_trainer_cycles_of_every_redraw_shape(tmp_path, monkeypatch):
    """The Trainer's log dicts with the bar redrawn in every way a cycle admits (no bar after the first,
    blank segments before or after the next bar, several redraws, a counter that moves back, tabs,
    CRLF and lone CR separators), over several read chunks, with stretches that have no redraw at
    all: the same Run as the line parser alone."""
    from tqdm import tqdm

    rng = np.random.default_rng(5)
    n = 20_000
    s, loss, gn = _curve(n, nan_at=19_500)
    blank = " " * 60
    out = ["***** Running training *****\n"]
    for i, v, g in zip(s.tolist(), loss.tolist(), gn.tolist()):
        sep = "\r\n" if rng.random() < 0.1 else "\n"
        out.append(f"{{'loss': {v:.4f}, 'grad_norm': {g:.6g}, 'learning_rate': 3.0e-04, 'epoch': {i / n:.2f}}}{sep}")
        if rng.random() < 0.2:
            out.append(blank + "\r")
        out.append(tqdm.format_meter(i, n, elapsed=i / 9.0) + "\r")
        quiet = 1_000 <= i < 17_000  # no redraw (more than a read chunk): each cycle's only bar is its first
        for _ in range(0 if quiet else int(rng.integers(0, 4))):
            pick = rng.random()
            if pick < 0.4:
                out.append(tqdm.format_meter(i + 1, n, elapsed=i / 9.0) + "\r")
            elif pick < 0.5:
                out.append("\t" + tqdm.format_meter(max(1, i - 1), n, elapsed=i / 9.0) + " \r")
            else:
                out.append(blank + ("\r\n" if pick > 0.95 else "\r"))
    (tmp_path / "hf.out").write_text("".join(out) + "\n")
    run = _both(tmp_path / "hf.out", monkeypatch)[0]
    assert len(run) == n and int(run.steps[-1]) == n
