"""Jumps, divergence and non-finite gradients judged against the log's own noise (issue 25, items 2
and 3, on the fourth batch of fresh logs): each rule is checked on generated curves printed the way
trainers print them and read by the real readers, against look-alikes that must stay quiet.

- an excerpt that opens on a loss of 1e14 and is back in range at the next prints shows a spike the
  run came back from, not weights that were never sane;
- a loss at or below 0 (a negative log-likelihood) jumps in its own units, not in ratios;
- a loss that fell far and climbs back at every print to the end diverged, however short the log;
- a gradient norm non-finite at every logged step past the loss scaler's search, under a flat finite
  loss, is a run whose every update was thrown away: critical, and no bad batch.
"""

from __future__ import annotations

import numpy as np
import pytest

from msgs import has
from text_judging import alarms, diagnose_text, show

_diagnose, _alarms, _show = diagnose_text, alarms, show


def _slim(step0: int, loss) -> str:
    """TF-Slim's `global step N: loss = X (T sec/step)` lines."""
    return "".join(
        f"INFO:tensorflow:global step {step0 + i}: loss = {x:.4f} ({1.1 + 0.1 * (i % 3):.3f} sec/step)\n"
        for i, x in enumerate(loss)
    )


# ------------------------------------------------------------------ an absurd opening that came back


@pytest.mark.parametrize("seed", range(6))
def test_an_excerpt_opening_on_an_absurd_loss_that_came_back_is_a_spike(tmp_path, seed):
    rng = np.random.default_rng(seed)
    k = int(rng.integers(1, 4))
    huge = 10.0 ** rng.uniform(7, 15, k)
    after = rng.uniform(0.05, 1.2, int(rng.integers(3, 12)))
    _, report = _diagnose(tmp_path, _slim(360, np.concatenate([huge, after])))
    first = _alarms(report)[0]
    assert (first.severity, first.symptom, first.step, first.cause) == ("warning", "spike", 360, "loss_spike"), _show(
        report
    )
    assert has(first.evidence, "diff.what.spike_opening", step=360, after=after.size)
    assert not {"lr"} & {x.kind for x in first.fixes}  # no LR cut for a spike the run came back from
    assert not [x for x in first.fixes if "lower_lr" in str(getattr(x.text, "key", ""))]


@pytest.mark.parametrize("seed", range(4))
def test_an_absurd_loss_that_stays_or_opens_a_short_tail_is_no_spike(tmp_path, seed):
    rng = np.random.default_rng(seed)
    stays = 10.0 ** rng.uniform(7, 15, 8)
    _, report = _diagnose(tmp_path, _slim(360, stays))
    assert _alarms(report)[0].symptom == "divergence", _show(report)
    short = np.concatenate([10.0 ** rng.uniform(7, 15, 2), rng.uniform(0.05, 1.2, 2)])
    _, report = _diagnose(tmp_path, _slim(360, short))
    assert _alarms(report)[0].symptom == "divergence", _show(report)


# ------------------------------------------------------------------ a negative log-likelihood's jump


def _nll(it0: int, loss) -> str:
    """WaveGlow's train.py: `{iteration}:\\t{loss:.9f}`."""
    return "".join(f"{it0 + i}:\t{x:.9f}\n" for i, x in enumerate(loss))


@pytest.mark.parametrize("seed", range(8))
def test_a_negative_loss_that_jumps_far_beyond_its_noise_is_a_spike(tmp_path, seed):
    """Ratios mean nothing below 0: the jump is judged in the loss's own units, against the spread
    and the size of the points before it; one point out is a spike whether or not the run came back
    to its level (it says where the loss sat after)."""
    rng = np.random.default_rng(seed)
    before, after = int(rng.integers(3, 25)), int(rng.integers(0, 15))
    level = -float(rng.uniform(1, 8))
    pre = level + rng.normal(0, 0.1, before)
    post = float(rng.choice([level, level + 4.0])) + rng.normal(0, 0.1, after)
    peak = float(10.0 ** rng.uniform(2, 5))
    runs, report = _diagnose(tmp_path, _nll(1000, np.concatenate([pre, [peak], post])))
    first = _alarms(report)[0]
    assert (first.severity, first.symptom, first.step) == ("warning", "spike", 1000 + before), _show(report)
    assert has(first.evidence, "diff.what.signed_jump", step=1000 + before, before=min(before, 20))
    assert not [x for x in first.fixes if x.kind == "lr" or "lower_lr" in str(getattr(x.text, "key", ""))]


@pytest.mark.parametrize("seed", range(8))
def test_a_noisy_negative_loss_and_one_that_rises_to_a_new_level_are_no_spike(tmp_path, seed):
    rng = np.random.default_rng(50 + seed)
    n = int(rng.integers(5, 60))
    noisy = -float(rng.uniform(1, 8)) + rng.standard_t(2, n) * 0.3
    _, report = _diagnose(tmp_path, _nll(1000, noisy))
    assert not [f for f in _alarms(report) if f.symptom == "spike"], _show(report)
    # an objective that crosses 0 with heavy tails (an RL policy loss): its swings are its own
    crossing = rng.standard_t(1.5, n) * 0.05
    _, report = _diagnose(tmp_path, _nll(1000, crossing))
    assert not [f for f in _alarms(report) if f.symptom == "spike"], _show(report)
    k = int(rng.integers(3, 10))
    up = np.concatenate([-5 + rng.normal(0, 0.1, k), 300 + rng.normal(0, 5, 6)])
    _, report = _diagnose(tmp_path, _nll(1000, up))
    first = _alarms(report)[0]
    assert (first.symptom, first.step) == ("divergence", 1000 + k), _show(report)


# ------------------------------------------------------------------ a fall, then a climb back


def _eq(steps, loss, gn) -> str:
    """`step=N  loss=X  gnorm=G` trajectory lines, aligned with spaces."""
    return "".join(f"step={s:<4d} loss={v:<6.2f} gnorm={g:.1f}\n" for s, v, g in zip(steps, loss, gn))


@pytest.mark.parametrize("seed", range(8))
def test_a_loss_that_fell_far_and_climbs_back_at_every_print_is_a_divergence(tmp_path, seed):
    """Three rising prints after a fall of 5-15x, giving back most of it: a divergence however short
    the log (the fall's own spread must not hide the climb)."""
    rng = np.random.default_rng(seed)
    down, up = int(rng.integers(3, 8)), int(rng.integers(3, 6))
    start, best = float(rng.uniform(8, 16)), float(rng.uniform(0.8, 2.0))
    fall = np.geomspace(start, best, down) * np.exp(rng.normal(0, 0.05, down))
    fall[-1] = best
    fall[1] = fall[0] * 1.05  # noisy first prints (a fall at every print and a climb at every print is a V,
    # which gradients never zeroed make as well: the differential leaves that tie open)
    # the first print of the climb carries most of it (the run left its best abruptly), then it goes on up
    climb = best * float(rng.uniform(2.5, 4.0)) * np.cumprod(rng.uniform(1.1, 1.4, up))
    loss = np.concatenate([fall, climb])
    steps = [1 + 55 * k for k in range(loss.size)]
    gn = rng.uniform(5, 20, loss.size)
    _, report = _diagnose(tmp_path, _eq(steps, loss, gn))
    first = _alarms(report)[0]
    assert (first.severity, first.symptom, first.cause) == ("critical", "divergence", "lr_too_high"), _show(report)
    # the rise is measured from where the descent ended, not from the median of the descent
    assert "diff.fix.lower_lr" in {getattr(x.text, "key", None) for x in first.fixes}
    assert first.step in steps[down : down + 2]  # where the climb began (the smoother rule dates its knee)
    assert has(first.evidence, "diff.what.rise")


@pytest.mark.parametrize("seed", range(8))
def test_a_fall_that_flattens_or_a_small_late_rise_is_no_divergence(tmp_path, seed):
    rng = np.random.default_rng(70 + seed)
    down = int(rng.integers(4, 10))
    fall = np.geomspace(10.0, 1.0, down) * np.exp(rng.normal(0, 0.05, down))
    fall = np.minimum.accumulate(fall)
    # three rising prints, but giving back far less than half of the fall (in log space)
    small = fall[-1] * np.array([1.05, 1.15, 1.3])
    steps = [1 + 55 * k for k in range(down + 3)]
    _, report = _diagnose(tmp_path, _eq(steps, np.concatenate([fall, small]), rng.uniform(5, 20, down + 3)))
    assert not [f for f in _alarms(report) if f.symptom == "divergence"], _show(report)
    # a fall that flattens at its lowest, noisy: no print-after-print climb
    flat = fall[-1] * np.exp(np.abs(rng.normal(0, 0.05, 4)))
    steps = [1 + 55 * k for k in range(down + 4)]
    _, report = _diagnose(tmp_path, _eq(steps, np.concatenate([fall, flat]), rng.uniform(5, 20, down + 4)))
    assert not [f for f in _alarms(report) if f.symptom == "divergence"], _show(report)


# ------------------------------------------------------------------ every update thrown away


def _hf_nan(loss, epoch0: float, per: float) -> str:
    """transformers' printed log dicts with a NaN gradient norm on every line (no step)."""
    return "".join(
        repr(
            {
                "loss": round(float(v), 4),
                "grad_norm": float("nan"),
                "learning_rate": 1e-4,
                "epoch": round(epoch0 + per * k, 2),
            }
        )
        + "\n"
        for k, v in enumerate(loss)
    )


@pytest.mark.parametrize("seed", range(6))
def test_a_nan_gradient_at_every_step_past_the_scalers_search_under_a_flat_loss_is_critical(tmp_path, seed):
    rng = np.random.default_rng(seed)
    n = int(rng.integers(4, 12))
    loss = float(rng.uniform(0.6, 8.0)) * np.exp(rng.normal(0, 0.015, n))
    _, report = _diagnose(tmp_path, _hf_nan(loss, float(rng.uniform(0.03, 2.5)), 0.003))
    first = _alarms(report)[0]
    assert (first.severity, first.symptom, first.step) == ("critical", "nonfinite", 1), _show(report)
    assert first.cause in ("loss_scale_collapse", "activation_overflow")
    assert has(first.evidence, "diff.ev.all_skipped", n=n)


@pytest.mark.parametrize("seed", range(6))
def test_nan_gradients_over_the_first_steps_of_an_fp16_run_are_the_scalers_search(tmp_path, seed):
    """The scaler halves its scale from 2^16 at each overflowing step: the first few logged steps of
    a run logged every step may all be NaN; that is no dead run (the skipped-steps warning tells it)."""
    rng = np.random.default_rng(20 + seed)
    n = int(rng.integers(2, 8))
    loss = float(rng.uniform(0.6, 8.0)) * np.exp(rng.normal(0, 0.015, n))
    _, report = _diagnose(tmp_path, _hf_nan(loss, 0.0, 0.001))
    assert not [f for f in report.findings if f.severity == "critical"], _show(report)
