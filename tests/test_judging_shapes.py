"""Symptoms of short and smooth logs, judged from what the log shows (issue 25's second batch of
fresh logs): each rule is checked on generated curves, printed the way trainers print them and read
by the real readers, against look-alikes that must stay quiet.

- a loss of exactly 0 while gradients flow is no empty label mask (GRPO logs 0 by design); a loss that
  falls to exactly 0 in one interval with no gradient left is one, at any length;
- a flat loss at the binary cross-entropy of a 1/K base rate is a binary loss on a K-class target
  (wrong_loss), not a frozen model;
- a short log of the run's first steps whose loss rises strongly is a divergence already;
- epoch means that creep up a few percent, steadily, are a divergence; noisy per-batch losses that
  move as much are not;
- a V traced point by point names gradients that are never zeroed beside a too-large LR, and says that
  the log does not separate them.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from lossdoctor.detectors.differential import BCE_KS
from msgs import find, has
from text_judging import alarms, diagnose_text, show

SEEDS = range(12)


def _h(k: int) -> float:
    """The binary entropy of 1/k: the mean binary cross-entropy of k one-hot columns at their base rate."""
    return -(1 / k) * math.log(1 / k) - (1 - 1 / k) * math.log(1 - 1 / k)


_diagnose, _alarms, _show = diagnose_text, alarms, show


def _hf(loss, gn, lr, epoch0: float = 0.0, per: float = 0.02) -> str:
    """transformers' printed log dicts (no step)."""
    return "".join(
        repr(
            {
                "loss": round(float(v), 4),
                "grad_norm": float(g),
                "learning_rate": float(f"{a:.4e}"),
                "epoch": round(epoch0 + per * (k + 1), 2),
            }
        )
        + "\n"
        for k, (v, g, a) in enumerate(zip(loss, gn, lr))
    )


def _pipes(steps, loss, gn, lr) -> str:
    return "".join(
        f"step {s} | loss {v:.4f} | lr {a:.2e} | grad_norm {g:.3e}\n" for s, v, g, a in zip(steps, loss, gn, lr)
    )


# ------------------------------------------------------------------ a loss of exactly 0


@pytest.mark.parametrize("seed", SEEDS)
@pytest.mark.parametrize("fmt", ["hf", "pipes"])
def test_zeros_while_gradients_flow_are_no_zero_loss(tmp_path, seed, fmt):
    rng = np.random.default_rng(seed)
    n = int(rng.integers(2, 40))
    gn = float(rng.uniform(0.005, 1.0)) * np.exp(0.2 * rng.standard_normal(n))
    lr = np.full(n, 1e-6)
    text = (
        _hf(np.zeros(n), gn, lr, epoch0=float(rng.uniform(0, 2)))
        if fmt == "hf"
        else _pipes([10 * (k + 1) for k in range(n)], np.zeros(n), gn, lr)
    )
    _, report = _diagnose(tmp_path, text)
    assert not [f for f in report.findings if f.symptom == "zero_loss"], _show(report)


@pytest.mark.parametrize("seed", SEEDS)
@pytest.mark.parametrize("fmt", ["hf", "pipes"])
def test_a_fall_to_exactly_zero_with_no_gradient_left_is_a_zero_loss_at_any_length(tmp_path, seed, fmt):
    rng = np.random.default_rng(100 + seed)
    before, zeros = int(rng.integers(1, 6)), int(rng.integers(1, 4))
    loss = np.concatenate(
        [np.geomspace(float(rng.uniform(1.0, 3.0)), float(rng.uniform(0.3, 0.9)), before), np.zeros(zeros)]
    )
    gn = np.concatenate([np.full(before, float(rng.uniform(1e-5, 2.0))), rng.uniform(0, 5e-5, zeros)])
    lr = np.full(loss.size, 1e-5)
    steps = [8 * (k + 1) for k in range(loss.size)]
    runs, report = _diagnose(tmp_path, _hf(loss, gn, lr) if fmt == "hf" else _pipes(steps, loss, gn, lr))
    zero = [f for f in _alarms(report) if f.symptom == "zero_loss"]
    assert zero and zero[0].severity == "critical", _show(report)
    assert zero[0].step == int(runs[0].steps[before]), (runs[0].steps, _show(report))


def test_a_loss_that_converged_to_a_printed_zero_is_no_zero_loss(tmp_path):
    loss = np.array([0.9, 0.2, 0.03, 0.004, 0.0006, 0.0])
    gn = np.array([1.0, 0.3, 0.05, 0.005, 5e-4, 2e-5])
    _, report = _diagnose(tmp_path, _pipes(list(range(10, 70, 10)), loss, gn, np.full(6, 1e-3)))
    assert not [f for f in report.findings if f.symptom == "zero_loss"], _show(report)


# ------------------------------------------------------------------ a binary loss on a K-class target


@pytest.mark.parametrize("k", [k for k in BCE_KS if _h(k) >= 0.1])  # (a four-digit print of a smaller one
# reads back with three significant digits: too coarse to call it constant)
def test_a_flat_loss_at_the_binary_entropy_of_a_class_prior_is_the_wrong_loss(tmp_path, k):
    n = 3 + k % 7
    level = round(_h(k), 4)
    text = "".join(f"step {s} | loss {level:.4f}\n" for s in range(100, 100 * (n + 1), 100))
    _, report = _diagnose(tmp_path, text)
    alarms = _alarms(report)
    assert alarms and alarms[0].cause == "wrong_loss", _show(report)
    assert has(alarms[0].evidence, "diff.ev.bce_base_rate", k=k)


@pytest.mark.parametrize("seed", SEEDS)
def test_a_flat_loss_at_another_level_stays_a_frozen_model(tmp_path, seed):
    rng = np.random.default_rng(200 + seed)
    while True:
        level = round(float(rng.uniform(0.3, 4.0)), 4)
        if all(abs(level - _h(k)) > 0.01 * _h(k) for k in BCE_KS):
            break
    text = "".join(f"step {s} | loss {level:.4f}\n" for s in range(100, 1100, 100))
    _, report = _diagnose(tmp_path, text)
    assert not [f for f in report.findings if f.cause == "wrong_loss"], _show(report)


# ------------------------------------------------------------------ a short rising start


@pytest.mark.parametrize("seed", SEEDS)
def test_a_short_start_that_rises_strongly_is_a_divergence(tmp_path, seed):
    rng = np.random.default_rng(300 + seed)
    n = int(rng.integers(5, 8))
    x0 = float(rng.uniform(0.5, 3.0))
    loss = x0 * np.geomspace(1.0, float(rng.uniform(1.6, 3.0)), n) * np.exp(0.02 * rng.standard_normal(n))
    loss[0] = x0
    text = "".join(f"Epoch 0 | iter {k + 1} step {k + 1} | loss train: {v:.3f}, val: n/a\n" for k, v in enumerate(loss))
    _, report = _diagnose(tmp_path, text)
    div = [f for f in _alarms(report) if f.symptom == "divergence"]
    assert div and min(f.step for f in div) < n, _show(report)  # dated before its last point


@pytest.mark.parametrize("seed", SEEDS)
def test_a_short_start_that_falls_or_rises_while_the_lr_warms_up_is_not(tmp_path, seed):
    rng = np.random.default_rng(400 + seed)
    n = int(rng.integers(5, 8))
    x0 = float(rng.uniform(0.5, 3.0))
    falling = x0 * np.geomspace(1.0, 0.6, n) * np.exp(0.02 * rng.standard_normal(n))
    steps = list(range(1, n + 1))
    gn = np.ones(n)
    _, report = _diagnose(tmp_path, _pipes(steps, falling, gn, np.full(n, 1e-4)))
    assert not [f for f in report.findings if f.rule == "differential.rising_start"], _show(report)
    rising = x0 * np.geomspace(1.0, 1.8, n)
    _, report = _diagnose(tmp_path, _pipes(steps, rising, gn, np.geomspace(1e-6, 1e-4, n)))
    assert not [f for f in report.findings if f.rule == "differential.rising_start"], _show(report)


# ------------------------------------------------------------------ a creep of epoch means


def _epochs(loss, e0: int = 91) -> str:
    return "".join(f"epoch {e0 + k} loss = {v:.4f}\n" for k, v in enumerate(loss))


@pytest.mark.parametrize("seed", SEEDS)
def test_epoch_means_that_creep_up_steadily_are_a_divergence(tmp_path, seed):
    rng = np.random.default_rng(500 + seed)
    n = int(rng.integers(8, 16))
    level = float(rng.uniform(0.3, 3.0))
    creep = np.geomspace(1.0, float(rng.uniform(1.05, 1.35)), n) * np.exp(0.003 * rng.standard_normal(n))
    _, report = _diagnose(tmp_path, _epochs(level * creep))
    div = [f for f in _alarms(report) if f.symptom == "divergence"]
    assert div and div[0].severity == "warning", _show(report)


@pytest.mark.parametrize("seed", SEEDS)
def test_epoch_means_that_fall_or_wander_and_noisy_batches_that_rise_as_much_are_no_creep(tmp_path, seed):
    rng = np.random.default_rng(600 + seed)
    n = int(rng.integers(8, 16))
    level = float(rng.uniform(0.3, 3.0))
    for loss in (
        level * np.geomspace(1.0, 0.9, n) * np.exp(0.003 * rng.standard_normal(n)),
        level * np.exp(0.005 * rng.standard_normal(n)),
    ):
        _, report = _diagnose(tmp_path, _epochs(loss))
        assert not [f for f in report.findings if f.rule == "differential.creep"], _show(report)
    m = int(rng.integers(30, 200))
    batches = level * np.geomspace(1.0, 1.05, m) * np.exp(0.1 * rng.standard_normal(m))
    _, report = _diagnose(tmp_path, _pipes(list(range(1000, 1000 + 10 * m, 10)), batches, np.ones(m), np.full(m, 1e-4)))
    assert not [f for f in report.findings if f.rule == "differential.creep"], _show(report)


# ------------------------------------------------------------------ a V: summed gradients or the LR


@pytest.mark.parametrize("seed", SEEDS)
def test_a_smooth_v_names_gradients_never_zeroed_beside_the_lr_and_says_nothing_separates_them(tmp_path, seed):
    rng = np.random.default_rng(700 + seed)
    down, up = int(rng.integers(4, 8)), int(rng.integers(4, 8))
    start, best = float(rng.uniform(0.8, 3.0)), float(rng.uniform(0.02, 0.2))
    loss = np.concatenate(
        [
            np.geomspace(start, best, down + 1),
            best + (start * 0.9 - best) * np.linspace(0, 1, up + 1)[1:] ** float(rng.uniform(0.8, 1.2)),
        ]
    )
    text = "".join(f"loss: {v:.4f}  error: 0.5\n" for v in loss)
    _, report = _diagnose(tmp_path, text)
    div = [f for f in _alarms(report) if f.symptom == "divergence"]
    assert div, _show(report)
    ranked = find(div[0].evidence, "diff.ranked")
    assert {ranked.values["first"], ranked.values["second"]} == {"lr_too_high", "grad_not_zeroed"}
    assert has(div[0].evidence, "diff.unseparated")
    assert has(div[0].evidence, "diff.separate")


def _basicsr(it0: int, g_pix, d) -> str:
    return "".join(
        f"2022-09-26 16:29:11,822 INFO: [train..][epoch:  0, iter:  {it0 + 10 * i:,}, lr:(2.000e-04,)] "
        f"[eta: 6 days, 20:45:25, time (data): 0.676 (0.005)] l_g_pix: {g:.4f} l_p_8: 22.9456 "
        f"l_p_256: 3470.1577 l_g_gan: {g / 3:.4f} l_d: {x:.4f} real_score: 5.5069 fake_score: -1.2\n"
        for i, (g, x) in enumerate(zip(g_pix, d))
    )


@pytest.mark.parametrize("seed", range(4))
def test_a_gan_term_at_an_absurd_size_is_a_divergence_where_no_training_loss_is_read(tmp_path, seed):
    """Two adversaries' losses: no training loss is read, yet a generator term at 1e24 and beyond
    is a blow-up (no term of a sane loss prints a million), and one thousands of iterations into
    the run is no bad init."""
    rng = np.random.default_rng(seed)
    g = 10.0 ** (24 + np.cumsum(rng.uniform(0.5, 2.0, 3)))
    runs, report = _diagnose(tmp_path, _basicsr(25390, g, rng.uniform(0.001, 0.01, 3)))
    assert not runs[0].has("loss") and runs[0].meta.get("adversaries")
    first = _alarms(report)[0]
    assert (first.severity, first.symptom, first.step) == ("critical", "divergence", 25390)
    assert first.cause != "bad_init"
    assert not has(first.evidence, "diff.ranked", second="bad_init")


@pytest.mark.parametrize("seed", range(4))
def test_gan_terms_in_their_hundreds_are_no_finding(tmp_path, seed):
    rng = np.random.default_rng(seed)
    g = rng.uniform(50, 400, 8)
    runs, report = _diagnose(tmp_path, _basicsr(25390, g, rng.uniform(0.1, 0.7, 8)))
    assert not _alarms(report), _show(report)
    # no training loss was read (two adversaries'), so the loss checks did not run: no "healthy"
    assert not runs[0].has("loss") and report.status == "inconclusive"


def _iters(loss, it0: int, every: int = 100, epoch: int = 1) -> str:
    return "".join(
        f"[INFO: 2021-08-03 09:40:15,669] Epoch: {epoch}/300, Iter: {it0 + i * every}/8007, loss: {x:.4f}, lr: [0.0001]\n"
        for i, x in enumerate(loss)
    )


@pytest.mark.parametrize("seed", range(6))
def test_a_start_flat_a_little_above_ln_k_is_chance(tmp_path, seed):
    """A model at its init prints ln K plus half its logits' variance: ImageNet's first iterations
    at 6.95-6.97 (ln 1000 = 6.908), flat, are a model that has learnt nothing yet."""
    rng = np.random.default_rng(seed)
    loss = math.log(1000) * 1.007 + rng.normal(0, 0.004, 9)
    _, report = _diagnose(tmp_path, _iters(loss, 100))
    first = _alarms(report)[0]
    assert (first.severity, first.symptom, first.step) == ("warning", "plateau", 100)
    assert has(first.evidence, "diff.what.chance", k=1000)


@pytest.mark.parametrize("seed", range(6))
def test_a_level_above_ln_k_mid_run_or_a_falling_start_is_no_chance(tmp_path, seed):
    rng = np.random.default_rng(seed)
    mid = math.log(1000) * 1.007 + rng.normal(0, 0.004, 9)
    _, report = _diagnose(tmp_path, _iters(mid, 4000, epoch=12))
    assert not _alarms(report), _show(report)
    falling = 6.97 - 0.04 * np.arange(9) + rng.normal(0, 0.004, 9)
    _, report = _diagnose(tmp_path, _iters(falling, 100))
    assert not _alarms(report), _show(report)
