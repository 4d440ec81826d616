"""Step records and the run log: round trips, logged NaN vs not logged, torn writes."""

from __future__ import annotations

import numpy as np

from lossdoctor.live.runlog import RunLogWriter
from lossdoctor.records import from_columns, make_run, text_number, to_float
from lossdoctor.sources.rundir import read_run_dir


def test_make_run_sorts_merges_and_remembers_logged_nan():
    r = make_run(
        [
            {"step": 2, "loss": 1.0},
            {"step": 1, "loss": "nan", "lr": None},
            {"step": 2, "grad_norm": 3},
            {"loss": 5.0},
            {"step": 3, "loss": "oops"},
        ]
    )
    assert list(r.steps) == [1, 2, 3]
    assert np.isnan(r.col("loss")[0]) and r.logged("loss")[0]  # a NaN loss was logged
    assert not r.logged("lr").any() and not r.has("lr")
    assert r.col("grad_norm")[1] == 3 and r.col("loss")[1] == 1.0
    assert not r.logged("loss")[2]  # an unparsable value is not a logged NaN


def test_from_columns_last_value_wins_and_is_vectorised():
    n = 200_000
    steps = np.arange(n) % (n // 2)  # every step twice
    loss = np.arange(n, dtype=float)
    r = from_columns(steps, {"loss": loss})
    assert len(r) == n // 2 and r.col("loss")[0] == n // 2  # the second occurrence


def test_run_log_round_trip_and_torn_tail(tmp_path):
    w = RunLogWriter(tmp_path)
    w.write_meta({"task": "sft", "chance_loss": float("nan")})
    w.start_layers(["a", "b"], ["act_absmax", "grad_absmax"], ["Linear", "ReLU"])
    for s in range(3):
        w.append_step(
            {
                "step": s,
                "loss": [1.0, float("inf"), float("nan")][s],
                "fwd_first_nonfinite": {"layer": "a"} if s == 2 else None,
            }
        )
        w.append_layers(s, np.array([[s, 1.0], [2.0, np.inf]]))
    w.append_finding({"cause": "loss_spike"})
    w.close()
    with open(tmp_path / "steps.jsonl", "ab") as f:
        f.write(b'{"step": 3, "lo')  # killed mid-write
    with open(tmp_path / "layers.f32", "ab") as f:
        f.write(b"\x00\x00")
    (run,) = read_run_dir(tmp_path)
    assert list(run.steps) == [0, 1, 2]
    assert run.col("loss")[1] == np.inf and np.isnan(run.col("loss")[2]) and run.logged("loss").all()
    assert run.event("fwd_first_nonfinite") == {2: {"layer": "a"}}
    assert run.meta["task"] == "sft"
    assert run.layers.types == ["Linear", "ReLU"]
    assert run.layers.stats["act_absmax"][:, 0].tolist() == [0, 1, 2]
    assert np.isinf(run.layers.stats["grad_absmax"][0, 1])
    assert run.live_findings == [{"cause": "loss_spike"}]
    assert any("unreadable" in n for n in run.notes) and any("torn" in n for n in run.notes)


def test_msvc_nonfinite_spellings_read_as_the_values_they_stand_for():
    """A C++ trainer built with MSVC prints `1.#INF`, `-1.#INF`, `-1.#IND`, `1.#QNAN`: an infinity with
    its sign, or a NaN; a plain number and a word that is no number read as before."""
    assert text_number("1.#INF") == np.inf and text_number("-1.#INF") == -np.inf
    assert all(np.isnan(text_number(s)) for s in ("-1.#IND", "1.#QNAN", "1.#SNAN", "abc", "1.#"))
    assert text_number("2.5e-3") == 2.5e-3 and to_float(" 1.#INF ") == np.inf
