"""Flat logs judged from what the log itself shows, at any length (issue 25: "Inconclusive on a visible
fault is a miss"), each on generated logs in the shape trainers print, against look-alikes that must stay
quiet:

- a handful of loss values coming back exactly, again and again, is the same batches through weights that
  do not change; noisy losses printed to four decimals, or coarse prints that collide by chance, are not;
- two prints identical to the fifth digit at ln V, hundreds of steps apart, are a model still at uniform
  guessing; two close together, or at no chance level, are no verdict;
- a DPO log whose summed log-probs are exactly 0 with the loss at ln 2 is a sum over no supervised token,
  at any length;
- an excerpt from deep in a run (epoch 95 on) with one high point early in it is no "the first updates
  made the loss worse".
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from msgs import all_keys, find
from text_judging import alarms, diagnose_text, show

SEEDS = range(12)


_diagnose, _alarms, _show = diagnose_text, alarms, show


def _pipes(steps, loss, digits: int = 4) -> str:
    return "".join(f"step {s} | loss {v:.{digits}f} | lr 2.00e-04\n" for s, v in zip(steps, loss))


# ------------------------------------------------------------------ the same few values again and again


@pytest.mark.parametrize("seed", SEEDS)
def test_a_few_loss_values_cycling_are_the_same_batches_through_unchanged_weights(tmp_path, seed):
    rng = np.random.default_rng(seed)
    pool = np.round(rng.normal(3.5, 0.25, int(rng.integers(4, 8))), 4)
    n = int(rng.integers(16, 40))
    loss = [float(rng.choice(pool))]
    while len(loss) < n:  # no value twice in a row (a tail of equal prints is `_stuck_tail`'s)
        v = float(rng.choice(pool))
        if v != loss[-1]:
            loss.append(v)
    steps = list(range(200, 200 + 2 * n, 2))
    _, report = _diagnose(tmp_path, _pipes(steps, loss))
    alarms = _alarms(report)
    assert alarms and alarms[0].symptom == "stall" and alarms[0].cause == "frozen_model", _show(report)
    # a block of them recurring in order is `_repeats`'s; single values coming back, `_recurring`'s
    assert {"diff.what.recur", "diff.what.repeat"} & all_keys(alarms[0].evidence), _show(report)
    assert find(alarms[0].evidence, "diff.ev.repeats")


@pytest.mark.parametrize("seed", SEEDS)
def test_single_values_coming_back_out_of_order_are_enough(tmp_path, seed):
    rng = np.random.default_rng(20 + seed)
    a, b, c = np.round(rng.normal(3.5, 0.25, 3), 4)
    loss = [a, b, a, c, b, c] * int(rng.integers(2, 5))  # no four distinct values in a row: no block recurs
    _, report = _diagnose(tmp_path, _pipes(list(range(100, 100 + 2 * len(loss), 2)), loss))
    alarms = _alarms(report)
    assert alarms and alarms[0].cause == "frozen_model", _show(report)
    what = find(alarms[0].evidence, "diff.what.recur")
    assert what.values["n"] == len(loss) - 3 and what.values["first"] == 100 and what.values["again"] == 104


@pytest.mark.parametrize("seed", SEEDS)
@pytest.mark.parametrize("digits", [4, 2])
def test_noisy_losses_that_collide_only_as_often_as_their_print_allows_are_not_cycling(tmp_path, seed, digits):
    rng = np.random.default_rng(50 + seed)
    n = int(rng.integers(16, 60))
    loss = 3.5 * np.exp(-0.002 * np.arange(n)) + rng.normal(0, 0.2, n)
    _, report = _diagnose(tmp_path, _pipes(list(range(200, 200 + 2 * n, 2)), loss, digits))
    assert not [f for f in report.findings if f.rule == "differential.recur"], _show(report)


# ------------------------------------------------------------------ two identical prints at ln V


@pytest.mark.parametrize("vocab", [32000, 50257, 65024, 128256])
def test_two_identical_prints_at_ln_v_hundreds_of_steps_apart_are_a_chance_plateau(tmp_path, vocab):
    level = round(math.log(vocab), 4)
    text = f"iter 1: loss {level:.4f}, time: 900.00ms\niter 500: loss {level:.4f}, time: 880.00ms\n"
    _, report = _diagnose(tmp_path, text)
    alarms = _alarms(report)
    assert alarms and alarms[0].symptom == "plateau", _show(report)
    assert find(alarms[0].evidence, "diff.what.chance").values["k"] == vocab


@pytest.mark.parametrize(
    "a,b,level",
    [(1, 20, math.log(50257)), (1, 500, 7.1234), (1, 500, round(math.log(50257), 1))],
    ids=["close_together", "no_chance_level", "coarse_print"],
)
def test_two_identical_prints_close_together_or_off_chance_or_coarse_are_no_verdict(tmp_path, a, b, level):
    text = f"iter {a}: loss {level:.4f}, time: 900.00ms\niter {b}: loss {level:.4f}, time: 880.00ms\n"
    if level == round(level, 1):
        text = f"iter {a}: loss {level:.1f}, time: 900.00ms\niter {b}: loss {level:.1f}, time: 880.00ms\n"
    _, report = _diagnose(tmp_path, text)
    assert not [f for f in report.findings if f.symptom == "plateau"], _show(report)


# ------------------------------------------------------------------ DPO log-probs of exactly 0


def _dpo(loss, logps, epoch0: float) -> str:
    return "".join(
        repr(
            {
                "loss": v,
                "learning_rate": 5e-07,
                "rewards/chosen": 0.0,
                "rewards/rejected": 0.0,
                "rewards/accuracies": 0.0,
                "rewards/margins": 0.0,
                "logps/rejected": lp[0],
                "logps/chosen": lp[1],
                "epoch": round(epoch0 + 0.01 * k, 2),
            }
        )
        + "\n"
        for k, (v, lp) in enumerate(zip(loss, logps))
    )


@pytest.mark.parametrize("n", [1, 2, 5, 12])
def test_dpo_logps_of_exactly_zero_at_ln2_are_a_sum_over_no_supervised_token(tmp_path, n):
    text = _dpo([0.6931] * n, [(0.0, 0.0)] * n, epoch0=0.3)
    _, report = _diagnose(tmp_path, text)
    alarms = _alarms(report)
    assert alarms and alarms[0].cause == "label_mask_empty" and alarms[0].symptom == "plateau", _show(report)
    assert find(alarms[0].evidence, "pref.logps_exactly_zero").values["n"] == n
    # the weights are no suspect: any weights give a sum over no token of 0
    assert not [f for f in report.findings if f.rule == "preference.preference" and f.cause == "frozen_model"]


def test_dpo_logps_of_real_completions_are_no_empty_mask(tmp_path):
    text = _dpo([0.6931, 0.6925], [(-93.46, -76.77), (-96.18, -74.36)], epoch0=0.3)
    _, report = _diagnose(tmp_path, text)
    assert not [f for f in report.findings if f.cause == "label_mask_empty"], _show(report)


# ------------------------------------------------------------------ a mid-run excerpt's early high point


@pytest.mark.parametrize("seed", SEEDS)
def test_an_excerpt_from_deep_in_a_run_has_no_first_updates_to_blame(tmp_path, seed):
    rng = np.random.default_rng(300 + seed)
    n = int(rng.integers(25, 60))
    loss = 1.5e-5 * np.exp(0.3 * rng.standard_normal(n))
    loss[int(rng.integers(1, 4))] = 1.1e-4
    e0 = int(rng.integers(60, 200))
    text = "```\n" + "".join(f"epoch: {e0 + k}; loss: {v:.8f}\n" for k, v in enumerate(loss)) + "```\n"
    _, report = _diagnose(tmp_path, text, "notes.md")
    assert not [f for f in report.findings if f.rule == "scalars.jump_then_stuck"], _show(report)


# ------------------------------------------------------------------ one step from a sane loss to 0


def _steps_gn(steps, loss, gn) -> str:
    return "".join(f"step {s} | loss {v!r} | grad_norm {g!r}\n" for s, v, g in zip(steps, loss, gn))


@pytest.mark.parametrize("seed", SEEDS)
def test_one_step_from_a_sane_loss_to_about_zero_then_zero_is_a_zero_loss(tmp_path, seed):
    rng = np.random.default_rng(400 + seed)
    head = [
        float(v) for v in np.geomspace(float(rng.uniform(3, 12)), float(rng.uniform(0.5, 2.5)), int(rng.integers(1, 5)))
    ]
    tiny = [float(rng.uniform(1e-8, 1e-5)) for _ in range(int(rng.integers(0, 3)))]
    loss = [round(v, 4) for v in head] + tiny + [0.0] * int(rng.integers(1, 3))
    gn = [float(rng.uniform(1, 200)) for _ in head] + [float(rng.uniform(1e-8, 1e-6)) for _ in loss[len(head) :]]
    steps = list(range(1, len(loss) + 1))
    _, report = _diagnose(tmp_path, _steps_gn(steps, loss, gn))
    zero = [f for f in _alarms(report) if f.symptom == "zero_loss"]
    assert zero and zero[0].severity == "critical" and zero[0].step == len(head) + 1, _show(report)


@pytest.mark.parametrize("every", [50, 100])
def test_a_fall_to_about_zero_over_many_steps_is_no_one_step_collapse(tmp_path, every):
    loss, gn = [2.0, 1e-6, 0.0], [3.0, 1e-5, 1e-7]
    _, report = _diagnose(tmp_path, _steps_gn([every, 2 * every, 3 * every], loss, gn))
    assert not [f for f in report.findings if f.symptom == "zero_loss"], _show(report)
