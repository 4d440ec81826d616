"""Symptoms first, at any length (issue 25), long logs: a visible fault in a realistic long log
(100-5,000 logged points, with warm-up, cosine decay, heavy-tailed batch noise, eval lines, tqdm
redraws, resumes) is a warning or critical finding at its step; a healthy look-alike stays clean.

The logs are generated (tests/long_logs.py) and read by the real readers from files, then diagnosed
by the engine: the path `lossdoctor diagnose train.log` takes. A few direct cases pin each long-log
mechanism's edge: a step up that stays, one that is too small or comes back, a slow rise dated
where it turned, a loss that goes to exactly 0 mid-run."""

from __future__ import annotations

import math

import numpy as np
import pytest

from long_logs import FAULTS, LongCase, faulty_cases, healthy_cases
from lossdoctor.detectors.engine import diagnose_runs
from lossdoctor.detectors.quantities import Quantities
from lossdoctor.detectors.symptoms import LIMITS, symptoms_of, turn_of
from lossdoctor.records import from_columns
from lossdoctor.sources import load_path

#: seeds 0-5 were measured (the report's figure: no miss left); seed 3 held the last one (an HF
#: log whose swings no spike rule caught: now the oscillation symptom's)
SEEDS = (0, 1, 3)
#: a finding's step may sit this many logged rows from the onset
ROWS_OFF = 3
#: a slow trend's turn is dated to a share of the log's rows, not to a row: under 3% heavy-tailed
#: noise a climb of x3 over a thousand rows rises 0.1% per row, and no method can place its first
#: row closer than a few percent of the log (the two-line fit lands within 1-3%)
TREND_SHARE = {"slow_divergence": 0.04}
#: generated cases the detectors still miss, by name (strict: a fix flips them to a failure)
KNOWN_MISSES: set[str] = set()


def _alarms(report):
    return [f for f in report.findings if f.severity in ("warning", "critical")]


def _show(report):
    return [(f.rule, f.cause, f.symptom, f.severity, f.step) for f in report.findings]


def _read(case: LongCase, tmp_path):
    path = tmp_path / case.file
    path.write_text(case.text)
    runs = load_path(str(path))
    return runs, diagnose_runs(runs)


def _param(cases: list[LongCase]):
    return [
        pytest.param(
            c, id=c.name, marks=[pytest.mark.xfail(strict=True, reason="known miss")] if c.name in KNOWN_MISSES else []
        )
        for c in cases
    ]


FAULTY = [c for s in SEEDS for c in faulty_cases(s)]
HEALTHY = [c for s in SEEDS for c in healthy_cases(s)]


@pytest.mark.parametrize("case", _param(FAULTY))
def test_a_visible_fault_in_a_long_log_is_an_alarm_at_its_step(case, tmp_path):
    runs, report = _read(case, tmp_path)
    alarms = _alarms(report)
    assert alarms and report.status != "inconclusive", _show(report)
    assert alarms[0].symptom in FAULTS[case.kind][1], _show(report)
    steps = [int(s) for s in runs[0].steps]
    i = int(np.searchsorted(steps, case.onset_step))
    off = max(ROWS_OFF, int(TREND_SHARE.get(case.kind, 0.0) * len(steps)))
    lo, hi = steps[max(0, i - off)], steps[min(len(steps) - 1, i + off)]
    assert any(f.step is not None and lo <= f.step <= hi for f in alarms), (case.onset_step, lo, hi, _show(report))


@pytest.mark.parametrize("case", _param(HEALTHY))
def test_a_healthy_long_log_stays_clean(case, tmp_path):
    _, report = _read(case, tmp_path)
    assert not _alarms(report), _show(report)


def test_the_generator_covers_every_kind_format_and_length():
    assert KNOWN_MISSES <= {c.name for c in FAULTY + HEALTHY}  # a stale name would hide nothing
    assert {c.kind for c in FAULTY} == set(FAULTS)
    assert {c.kind for c in HEALTHY} == {
        "pretrain",
        "finetune_low",
        "sgdr",
        "label_smoothing",
        "curriculum",
        "resumed",
        "gan",
    }
    assert {c.name.split("-")[1] for c in FAULTY} == {"hf", "nanogpt", "megatron", "lightning", "pipes", "jsonl"}
    lengths = [int(c.name.rsplit("-n", 1)[1]) for c in FAULTY + HEALTHY]
    assert min(lengths) < 200 and max(lengths) > 3000
    # the console's noise is in the text: tqdm redraws, eval lines, a resumed range of steps
    hf = next(c for c in HEALTHY if c.name.startswith("healthy_resumed-hf"))
    assert "\r" in hf.text and "eval_loss" in hf.text and "Resuming training" in hf.text


# ------------------------------------------------------------------ each mechanism's edge


def _noisy(rng: np.random.Generator, n: int, rel: float = 0.03) -> np.ndarray:
    return np.exp(rel * np.clip(rng.standard_t(3, n), -6, 6) / math.sqrt(3))


def _syms(loss: np.ndarray, every: int = 10) -> dict:
    run = from_columns([every * (k + 1) for k in range(loss.size)], {"loss": [float(v) for v in loss]})
    return {s.kind: s for s in symptoms_of(Quantities(run))}


@pytest.mark.parametrize("seed", range(4))
def test_a_step_up_that_stays_is_dated_at_the_step(seed):
    rng = np.random.default_rng(seed)
    loss = 2.0 * _noisy(rng, 1500)
    loss[900:] *= 1.6  # x1.6: no point of it is a x2 jump over its baseline
    sym = _syms(loss)["jump_stayed"]
    assert sym.data.get("shift") is True and abs(sym.row - 900) <= 1
    assert sym.data["ratio"] == pytest.approx(1.6, rel=0.05)


@pytest.mark.parametrize("seed", range(4))
def test_a_small_step_or_one_that_comes_back_is_no_level_shift(seed):
    rng = np.random.default_rng(seed)
    small = 2.0 * _noisy(rng, 1500)
    small[900:] *= 1.3  # below `diverged`: a curriculum's designed step (the log says so) looks like this
    assert LIMITS.diverged > 1.3
    assert "jump_stayed" not in _syms(small) and "rise" not in _syms(small)
    back = 2.0 * _noisy(rng, 1500)
    back[900:1000] *= 1.8  # an SGDR restart's bump, or a bad stretch of data, that the run recovers from
    assert "jump_stayed" not in _syms(back) and "rise" not in _syms(back)


def test_a_slow_rise_is_dated_where_it_turned_not_half_way():
    rng = np.random.default_rng(3)
    n, on = 3000, 1200
    loss = 2.0 * _noisy(rng, n)
    loss[on:] *= np.exp(math.log(3.0) * np.arange(n - on) / (n - on))
    sym = _syms(loss)["rise"]
    assert abs(sym.row - on) <= 0.03 * n, sym.row
    # the fit alone, on the noiseless curve: the knee exactly
    clean = np.ones(n)
    clean[on:] = np.exp(np.arange(n - on) / 500)
    block = -(-n // LIMITS.turn_points)  # the fit's block of points
    assert abs(turn_of(clean, 1.0, n - 1) - on) <= 2 * block


def test_a_loss_exactly_zero_from_mid_run_on_is_zero_loss_and_a_converged_one_is_not():
    rng = np.random.default_rng(0)
    loss = 2.0 * _noisy(rng, 800)
    loss[500:] = 0.0
    sym = _syms(loss)["zero"]
    assert sym.row == 500 and sym.data["n"] == 300
    # the same zeros while the logged gradient norm stays up: a logging filter's zeros, not the loss
    run = from_columns(list(range(10, 8010, 10)), {"loss": [float(v) for v in loss], "grad_norm": [0.8] * 800})
    assert "zero" not in {s.kind for s in symptoms_of(Quantities(run))}
    # a loss that converged towards 0 and printed 0.0 at its end: the run done, not broken
    done = np.round(0.5 * np.exp(-np.arange(800) / 40), 4)
    assert "zero" not in _syms(done)


def test_a_heavy_tailed_first_descent_is_no_crest_of_an_oscillation():
    # a long log falls from ~6 to ~1.8 (single draws up to 10% above its first loss on the way),
    # then rises slowly to ~4: the early descent is not "the loss had been there before"
    rng = np.random.default_rng(1)
    n = 4000
    k = np.arange(n)
    loss = (1.8 + 4.4 * np.exp(-k / 150)) * _noisy(rng, n)
    loss[1 + rng.integers(0, 60, 3)] = 6.2 * 1.11  # three lucky draws above 1.1x the first loss
    loss[2000:] *= np.exp(math.log(2.3) * np.arange(n - 2000) / (n - 2000))
    assert "rise" in _syms(loss)


def test_a_loss_that_starts_swinging_is_an_oscillation_and_one_that_always_swung_is_not():
    rng = np.random.default_rng(2)
    n, on = 600, 300
    loss = 2.0 * _noisy(rng, n)
    loss[on:] *= np.exp(0.9 * (0.5 + 0.5 * np.sin(2 * np.pi * np.arange(n - on) / 6)))
    sym = _syms(loss)["oscillation"]
    assert abs(sym.row - on) <= 3 and sym.data["swing"] > 1.2
    # a GAN's generator loss swings like that from its first print: no change of regime
    gan = 2.0 * _noisy(rng, n) * np.exp(0.9 * (0.5 + 0.5 * np.sin(2 * np.pi * np.arange(n) / 6)))
    assert "oscillation" not in _syms(gan)
    # and a run whose batch noise grows 5x as its loss falls stays under osc_min
    grow = (1.0 + 4.0 * np.exp(-np.arange(n) / 100)) * np.exp(np.linspace(0.01, 0.05, n) * rng.standard_normal(n))
    assert "oscillation" not in _syms(grow)
