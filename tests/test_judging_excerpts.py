"""Symptoms seen in a pasted excerpt, however short (issue 25, item 2: "at any length"), measured by
cutting the dev split's logs into tail and middle excerpts: each rule is checked on generated
curves printed the way trainers print them and read by the real readers, against look-alikes that
must stay quiet.

- a loss that rises across a whole excerpt of five to seven prints, more orderly than noise allows
  (the exact Kendall tail, p <= 1%), rose;
- a jump of x40 over two or three prints is a jump whatever the rest of a mid-run excerpt swings;
- one absurd print (1e14) between in-range ones, back at the level before it, is a spike, not a
  divergence;
- a component printed NaN on every row while another falls never reached the weights: it is left
  out of the summed loss, with a note, and raises no alarm.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from lossdoctor.detectors.symptoms import COMMON_K, rise_p_value
from msgs import has
from text_judging import alarms, diagnose_text, show


def _steps(step0: int, every: int, loss) -> str:
    """`step N | loss X | lr Y` lines, as many small training scripts print them."""
    return "".join(f"step {step0 + every * i} | loss {x:.4f} | lr 0.0001\n" for i, x in enumerate(loss))


def _off_chance(rng) -> float:
    """A loss level at least 3% away from every common class count's ln K (a flat run there is at chance)."""
    while True:
        v = float(rng.uniform(0.5, 40))
        if all(abs(v - math.log(k)) > 0.03 * math.log(k) for k in COMMON_K):
            return v


# ------------------------------------------------------------------ the exact rise test


def test_rise_p_value_is_the_exact_kendall_tail():
    assert rise_p_value(np.arange(5.0)) == pytest.approx(1 / math.factorial(5))
    # one pair out of order among six: (1 + 5) orderings of 720 are at least that rising
    assert rise_p_value(np.array([1.0, 3.0, 2.0, 4.0, 5.0, 6.0])) == pytest.approx(6 / 720)
    assert rise_p_value(np.arange(5.0)[::-1]) == 1.0
    assert rise_p_value(np.array([2.0, 2.0, 2.0, 2.0, 2.0])) == 1.0  # ties count against a rise


# ------------------------------------------------------------------ a short excerpt that rises


@pytest.mark.parametrize("seed", range(6))
def test_an_excerpt_rising_at_every_print_rose(tmp_path, seed):
    rng = np.random.default_rng(seed)
    n = int(rng.integers(5, 8))
    start = float(rng.uniform(0.5, 40))
    rise = float(rng.uniform(1.1, 1.45))  # below `diverged`: the whole log is the creep
    loss = start * np.exp(np.linspace(0, math.log(rise), n) + rng.normal(0, 0.002, n))
    loss = np.maximum.accumulate(loss * np.linspace(1, 1.0001, n))  # at every print
    _, report = diagnose_text(tmp_path, _steps(4500, 100, loss))
    first = alarms(report)[0]
    assert (first.severity, first.symptom) == ("warning", "divergence"), show(report)
    assert first.step == 4600  # from its second print: the first step up


@pytest.mark.parametrize("seed", range(6))
def test_a_short_excerpt_that_wobbles_or_barely_rises_is_no_rise(tmp_path, seed):
    rng = np.random.default_rng(seed)
    n = int(rng.integers(5, 8))
    level = _off_chance(rng)
    noisy = level * np.exp(rng.normal(0, 0.05, n))  # noise around a level: no orderly rise
    order = np.argsort(noisy)
    noisy[order[-1]], noisy[order[0]] = noisy[order[0]], noisy[order[-1]]  # never sorted by chance
    _, report = diagnose_text(tmp_path, _steps(4500, 100, noisy))
    assert not alarms(report), show(report)
    tiny = level * (1 + 0.004 * np.arange(n))  # +0.4% a print: under `creep_min` over the excerpt
    _, report = diagnose_text(tmp_path, _steps(4500, 100, tiny))
    assert not alarms(report), show(report)


# ------------------------------------------------------------------ a large jump mid-run


@pytest.mark.parametrize("seed", range(4))
def test_a_forty_fold_jump_is_a_jump_whatever_the_excerpt_swings_after_it(tmp_path, seed):
    rng = np.random.default_rng(seed)
    before = rng.uniform(5, 9, 2)
    # swinging as wildly after it, never back near the start (8.5, 5.3, 322, 22, 131, 4977, 156)
    after = float(np.max(before)) * np.array([2.5, 15.0, 580.0, 18.0]) * rng.uniform(0.8, 1.2, 4)
    loss = np.concatenate([before, [float(np.max(before)) * 40], after])
    _, report = diagnose_text(tmp_path, _steps(20000, 50, loss))
    first = alarms(report)[0]
    assert first.symptom == "divergence" and first.step == 20100, show(report)


# ------------------------------------------------------------------ one absurd print between sane ones


@pytest.mark.parametrize("seed", range(4))
def test_one_absurd_print_between_sane_ones_is_a_spike(tmp_path, seed):
    rng = np.random.default_rng(seed)
    level = float(rng.uniform(0.1, 2))
    loss = [level, 10 ** rng.uniform(7, 15), level * float(rng.uniform(0.9, 1.1))]
    _, report = diagnose_text(tmp_path, _steps(59668, 51, loss))
    first = alarms(report)[0]
    assert (first.symptom, first.cause, first.step) == ("spike", "loss_spike", 59719), show(report)
    assert not [x for x in first.fixes if "lower_lr" in str(getattr(x.text, "key", ""))]


def test_an_absurd_print_the_loss_does_not_come_back_from_is_no_spike(tmp_path):
    _, report = diagnose_text(tmp_path, _steps(59668, 51, [0.26, 3e14, 5.0, 6.0]))
    assert alarms(report)[0].symptom == "divergence", show(report)


# ------------------------------------------------------------------ a term outside the optimised sum


def _mmseg(seg, dist) -> str:
    """mmseg's iteration lines with the meters on a second, wrapped line and no total printed."""
    out = []
    for i, (a, b) in enumerate(zip(seg, dist)):
        out.append(f"2022-02-19 08:15:52,120 - mmseg - INFO - Iter [{50 * (i + 1)}/40000]  lr: 1.958e-06, time: 2.4,\n")
        out.append(
            f" decode.loss_seg: {a:.4f}, decode.acc_seg: 40.1, src.loss_feat_dist: {b}, mix.loss_seg: {a / 2:.4f}\n"
        )
    return "".join(out)


@pytest.mark.parametrize("seed", range(3))
def test_a_term_nan_on_every_row_while_the_others_fall_is_outside_the_sum(tmp_path, seed):
    rng = np.random.default_rng(seed)
    n = int(rng.integers(3, 9))
    seg = np.geomspace(2.7, float(rng.uniform(0.8, 1.6)), n)
    runs, report = diagnose_text(tmp_path, _mmseg(seg, ["nan"] * n))
    assert not alarms(report), show(report)
    assert has(runs[0].notes, "text.term_outside_sum", keys=["src.loss_feat_dist"], n=n)
    assert runs[0].col("loss")[-1] == pytest.approx(seg[-1] * 1.5, abs=1e-3)


def test_a_term_nan_while_nothing_falls_or_from_a_later_row_is_an_alarm(tmp_path):
    flat = np.full(5, 2.7)  # a scaler skipping every step keeps the weights finite: nothing trains
    _, report = diagnose_text(tmp_path, _mmseg(flat, ["nan"] * 5))
    assert alarms(report)[0].symptom == "nonfinite", show(report)
    seg = np.geomspace(2.7, 1.2, 6)
    _, report = diagnose_text(tmp_path, _mmseg(seg, ["0.31", "0.30", "nan", "nan", "nan", "nan"]))
    assert alarms(report)[0].symptom == "nonfinite", show(report)


# ------------------------------------------------------------------ a paste of bare numbers


def test_a_text_of_one_number_per_line_is_read_as_the_loss_with_a_note(tmp_path):
    values = [2.3286, 2.0444, 1.9303, 1.9836, 1.6704, 1.4758, 1.3922, 1.3101]
    runs, report = diagnose_text(tmp_path, "".join(f"{v}\n" for v in values))
    assert runs[0].col("loss").tolist() == values
    assert has(runs[0].notes, "text.loss_guessed", key="number per line")
    assert not alarms(report), show(report)
    spiked = values[:4] + [1934.05] + values[4:]
    _, report = diagnose_text(tmp_path, "".join(f"{v}\n" for v in spiked))
    assert alarms(report)[0].symptom == "spike", show(report)


def test_bare_numbers_among_other_lines_are_no_loss(tmp_path):
    text = "".join(f"Downloading shard {i}\nsaved checkpoint to ckpt_{i}.pt\n{1000 + 7 * i}\n" for i in range(6))
    (tmp_path / "train.log").write_text(text)
    from lossdoctor.sources import SourceError, load_path

    with pytest.raises(SourceError):
        load_path(tmp_path / "train.log")


# ------------------------------------------------------------------ a NaN the running average shows


def _metric_logger(rows) -> str:
    """maskrcnn-benchmark's MetricLogger lines: each meter's window median, then its global average."""
    return "".join(
        f"2020-12-28 12:37:42,998 fcos_core.trainer INFO: eta: 7 days, 6:12:21  iter: {it}  loss: {v:.4f} ({a})  "
        f"loss_cls: {v * 0.9:.4f} ({a})  time: 3.3760 (3.4849)  lr: 0.003333  max mem: 9314\n"
        for it, v, a in rows
    )


def test_a_nan_running_average_beside_a_finite_loss_is_a_nan_at_that_step(tmp_path):
    rows = [(20, 13.86, "14.0002"), (40, 23.37, "nan")]
    runs, report = diagnose_text(tmp_path, _metric_logger(rows))
    first = alarms(report)[0]
    assert (first.severity, first.symptom, first.step) == ("critical", "nonfinite", 40), show(report)
    rows += [(60, float("nan"), "nan"), (80, float("nan"), "nan")]
    _, report = diagnose_text(tmp_path, _metric_logger(rows))
    assert (alarms(report)[0].symptom, alarms(report)[0].step) == ("nonfinite", 40), show(report)


def test_finite_running_averages_raise_nothing(tmp_path):
    rows = [(20 * i, 14.0 * 0.97**i, f"{14.2 * 0.975**i:.4f}") for i in range(1, 9)]
    _, report = diagnose_text(tmp_path, _metric_logger(rows))
    assert not alarms(report), show(report)
