"""Symptoms first, at any length (issue 25): a visible fault in a short log (1-30 points) is a
warning or critical finding at its step, whatever the log's length; a healthy short log stays clean.

The logs are generated (tests/short_logs.py: seeded curves printed the way common trainers print
them) and read by the real readers from files, then diagnosed by the engine: the path `lossdoctor
diagnose train.log` takes. A few direct cases pin each mechanism's edge: three points are enough
for a climb, an oscillation's crest is no divergence, an epoch-level loss that does not fall is a
plateau while one that falls is not, a signed objective is judged by no ratio."""

from __future__ import annotations

import math

import numpy as np
import pytest

from lossdoctor.detectors.engine import diagnose_runs
from lossdoctor.detectors.quantities import Quantities
from lossdoctor.detectors.symptoms import LIMITS, symptoms_of
from lossdoctor.records import from_columns
from lossdoctor.sources import load_path
from short_logs import Case, faulty_cases, healthy_cases

SEEDS = (0, 1, 2)
#: the symptoms a fault's first alarm may name (a triple at the very last point may still come back:
#: a spike; identical values at a level the run names no K for: a stall or a plateau)
EXPECTED = {
    "triple": {"divergence", "spike"},
    "blowup": {"divergence"},
    "rise": {"divergence"},
    "nan": {"nonfinite"},
    "chance": {"plateau"},
    "zero": {"zero_loss"},
    "constant": {"stall", "plateau"},
    "absurd": {"divergence"},
    "epoch_flat": {"plateau"},
    "epoch_flat_mid": {"plateau"},
    "stuck": {"stall", "plateau"},
}
#: a finding's step may sit this many logged rows from the onset (the corpus scorer's window: a
#: curve rule dates a divergence where its climb began, a row or two before the generator's onset)
ROWS_OFF = 2


def _alarms(report):
    return [f for f in report.findings if f.severity in ("warning", "critical")]


def _read(case: Case, tmp_path):
    path = tmp_path / case.file
    path.write_text(case.text)
    runs = load_path(str(path))
    return runs, diagnose_runs(runs)


def _show(report):
    return [(f.rule, f.cause, f.symptom, f.severity, f.step) for f in report.findings]


FAULTY = [c for s in SEEDS for c in faulty_cases(s)]
HEALTHY = [c for s in SEEDS for c in healthy_cases(s)]


@pytest.mark.parametrize("case", FAULTY, ids=[c.name for c in FAULTY])
def test_a_visible_fault_in_a_short_log_is_an_alarm_at_its_step(case, tmp_path):
    runs, report = _read(case, tmp_path)
    alarms = _alarms(report)
    assert alarms and report.status != "inconclusive", (case.text[:400], _show(report))
    assert alarms[0].symptom in EXPECTED[case.fault], _show(report)
    steps = [int(s) for s in runs[0].steps]
    lo = steps[max(0, case.onset_row - ROWS_OFF)]
    hi = steps[min(len(steps) - 1, case.onset_row + ROWS_OFF)]
    assert any(f.step is not None and lo <= f.step <= hi for f in alarms), (steps, case.onset_row, _show(report))


@pytest.mark.parametrize("case", HEALTHY, ids=[c.name for c in HEALTHY])
def test_a_healthy_short_log_stays_clean(case, tmp_path):
    _, report = _read(case, tmp_path)
    assert not _alarms(report), (case.text[:400], _show(report))


def test_the_generator_covers_every_fault_and_format_at_short_lengths():
    names = {c.name.split("-")[0] for c in FAULTY}
    assert names == set(EXPECTED)
    assert {c.name.split("-")[1] for c in FAULTY} >= {
        "hf_dicts",
        "nanogpt",
        "pipes",
        "jsonl",
        "mnist",
        "keras",
        "plain_epoch",
        "plain_epoch_mid",
    }
    lengths = [c.text.count("\n") for c in FAULTY if c.file == "train.log" and "keras" not in c.name]
    assert min(lengths) <= 3 and max(lengths) <= 30


# ------------------------------------------------------------------ each mechanism's edge


def _kinds(steps, loss, **meta):
    run = from_columns(steps, {"loss": loss}, meta=meta) if meta else from_columns(steps, {"loss": loss})
    return {s.kind: s for s in symptoms_of(Quantities(run))}


def test_three_points_are_enough_for_a_climb_of_x3_over_two_intervals():
    sym = _kinds([100, 200, 300], [2.4054, 4.3399, 9.2296])["jump_stayed"]
    assert sym.data["climb"] is True and sym.step == 200
    assert sym.data["ratio"] == pytest.approx(9.2296 / 2.4054)


def test_a_climb_that_comes_back_or_stays_in_its_noise_is_no_climb():
    # the same x3.8 over two intervals, then back to where it began: not a loss that rose and stayed
    assert "jump_stayed" not in _kinds([1, 2, 3, 4, 5], [2.4, 4.3, 9.2, 2.3, 2.2])
    # two rises of x1.5 (x2.25 in all) are below climb_ratio
    assert LIMITS.climb_ratio > 2.25
    assert "jump_stayed" not in _kinds([10, 20, 30], [2.0, 3.0, 4.5])


def test_an_oscillations_crest_is_no_divergence():
    # a GAN's generator loss, up and down by design; it ends on a crest like the one at its start
    loss = [0.923, 1.259, 1.399, 1.228, 0.933, 0.611, 0.587, 0.808, 1.164, 1.377]
    r = diagnose_runs([from_columns(list(range(10, 110, 10)), {"loss": loss})])
    assert not _alarms(r), _show(r)
    # the same end after a loss that fell and never came back up before: a rise
    fell = [2.3, 1.6, 1.1, 0.8, 0.62, 0.6, 0.59, 0.8, 1.16, 1.38]
    assert "rise" in _kinds(list(range(10, 110, 10)), fell)


@pytest.mark.parametrize("k", [2, 10, 400])
def test_three_points_at_ln_k_over_hundreds_of_steps_are_a_chance_plateau(k):
    c = math.log(k)
    sym = _kinds([100, 200, 300], [c * 1.001, c * 0.999, c * 1.0005])["chance"]
    assert sym.data["k"] == k and sym.step == 100


def test_a_healthy_start_at_ln_k_is_no_plateau():
    # the first steps of a classifier sit at ln 10 before they fall: 4 steps are a start, not a plateau
    c = math.log(10)
    assert "chance" not in _kinds([0, 1, 2, 3], [c * 1.001, c, c * 0.999, c * 0.998])


def test_an_epoch_log_that_does_not_fall_is_a_plateau_and_one_that_falls_is_not(tmp_path):
    flat = [2.7459, 2.7256, 2.7413, 2.7498, 2.7306, 2.7501]
    path = tmp_path / "train.log"
    path.write_text("".join(f"epoch {e + 1} loss = {v}\n" for e, v in enumerate(flat)))
    r = diagnose_runs(load_path(str(path)))
    f = next(f for f in _alarms(r) if f.rule == "differential.epoch_flat")
    assert f.symptom == "plateau" and f.severity == "warning" and f.step == 1
    assert [getattr(m, "key", None) for m in f.evidence][0] == "diff.what.epoch_flat"
    falling = [2.31, 1.62, 1.21, 0.95, 0.81, 0.74]
    path.write_text("".join(f"epoch {e + 1} loss = {v}\n" for e, v in enumerate(falling)))
    assert not _alarms(diagnose_runs(load_path(str(path))))


def test_a_mid_run_epoch_excerpt_needs_ten_flat_epochs(tmp_path):
    rng = np.random.default_rng(4)
    flat = 10.3 * np.exp(0.006 * rng.standard_normal(12))
    path = tmp_path / "train.log"
    for n, want in ((LIMITS.epoch_long - 2, False), (12, True)):
        path.write_text("".join(f"epoch {844 + e} loss = {v:.5f}\n" for e, v in enumerate(flat[:n])))
        run = load_path(str(path))[0]
        assert run.meta.get("steps_from") == "epoch"
        assert ("epoch_flat" in {s.kind for s in symptoms_of(Quantities(run))}) is want


def test_a_signed_objective_has_no_early_jump():
    # an RL policy loss around 0: 0.0024 -> 0.0145 is no "x6 jump of the first updates"
    loss = [
        0.00235,
        0.014458,
        0.005596,
        -0.01681,
        0.030258,
        0.014446,
        0.01021,
        0.020479,
        0.021484,
        -0.008373,
        0.01881,
        -0.003181,
        0.004,
        -0.012,
        0.02,
        0.001,
        -0.004,
        0.011,
        0.006,
    ]
    r = diagnose_runs([from_columns([640 * i for i in range(len(loss))], {"loss": loss})])
    assert not _alarms(r), _show(r)


def _mid_run_excerpt(rng: np.random.Generator, n: int, noise: float) -> list[float]:
    """Per-print losses of a detector-style total (the sum of a few component losses) from the
    middle of a long run: flat around a level with `noise` log-space scatter from print to print,
    drawn within 2 sigma (a first print 3 sigma below all the rest is, from the log alone, a step up
    from it: no rule can tell the two apart, so the look-alike does not draw one)."""
    level = float(rng.uniform(0.4, 0.9))
    return [round(float(v), 6) for v in level * np.exp(noise * np.clip(rng.standard_normal(n), -2, 2))]


def _mid_run_text(loss: list[float], first: int = 59448, every: int = 5) -> str:
    """pytorch/examples-style `Train Epoch: E [i/n (p%)]\\tLoss: X` lines with the trainer's own
    iteration printed under each (a paste from epoch 4 on, the run's start not shown)."""
    return "".join(
        f"Train Epoch: 4 [{49920 + 40 * k}/141886 ({35 + k // 50}%)]\tLoss: {v:.6f}\n"
        f"grad_norm: {4.5 + 0.3 * (k % 3):.4f} iteration: {first + every * k}\n"
        for k, v in enumerate(loss)
    )


def _rise_or_not(loss: list[float], tmp_path) -> tuple[bool, list]:
    path = tmp_path / "train.log"
    path.write_text(_mid_run_text(loss))
    report = diagnose_runs(load_path(str(path)))
    return any(f.symptom == "divergence" for f in _alarms(report)), _show(report)


@pytest.mark.parametrize("seed", range(20))
def test_a_noisy_mid_run_excerpt_is_judged_by_its_own_noise(seed, tmp_path):
    # healthy: 7-10 prints of a flat loss with ~30% scatter between prints (issue 25: a healthy
    # excerpt flagged lr_too_high/divergence from one lucky low draw to an end 1.6x above it)
    rng = np.random.default_rng(seed)
    flat = _mid_run_excerpt(rng, int(rng.integers(7, 11)), 0.3)
    flagged, shown = _rise_or_not(flat, tmp_path)
    assert not flagged, (flat, shown)
    # the fault twin: the same kind of excerpt whose loss then climbs x2 per print over its last four
    # prints (a trend, far beyond its own scatter): still a divergence
    quiet = _mid_run_excerpt(rng, 6, 0.1)
    climb = quiet + [quiet[-1] * 2.0**i for i in range(1, 5)]
    flagged, shown = _rise_or_not(climb, tmp_path)
    assert flagged, (climb, shown)


def test_the_noise_bar_is_the_robust_spread_of_the_log_differences():
    from lossdoctor.detectors.symptoms import point_noise

    # a steady climb (every difference the same) has no spread: no noise to clear
    assert point_noise(np.array([1.0, 2.0, 4.0, 8.0, 16.0])) == pytest.approx(0.0, abs=1e-12)
    # one step up that stays is one outlier among the differences: the noise stays the small scatter's
    step = np.array([1.0, 1.01, 0.99, 1.0, 3.0, 3.03, 2.97, 3.0])
    assert point_noise(step) < 0.02
    # a descent then a rise, measured from the turn on: the rise's steady steps, not the V, are its noise
    v = np.array([2.3, 1.6, 1.1, 0.8, 0.62, 0.6, 0.59, 0.8, 1.16, 1.38])
    assert math.log(1.27 / 0.6) >= LIMITS.rise_z * point_noise(v[5:])
    # and a rise within the scatter of the excerpt the dev split flagged (its best window's middle is
    # its second print) does not clear rise_z sigmas
    radiant = np.array([0.326567, 0.806502, 0.517228, 0.772954, 0.901844, 0.904489, 0.746246])
    assert math.log(0.8254 / 0.5172) < LIMITS.rise_z * point_noise(radiant[1:])


# ------------------------------------------------------------------ a loss that stops changing


def _keys(f) -> list:
    return [getattr(m, "key", None) for m in f.evidence]


def test_a_loss_that_moves_then_prints_one_value_is_a_stall_at_the_first_equal_point():
    # Keras epoch means: 1.9112, then 1.9105 on every later epoch (the outputs went constant)
    loss = [1.9112] + [1.9105] * 9
    sym = _kinds([100 * (i + 1) for i in range(10)], loss)["stuck"]
    assert sym.step == 200 and sym.data["n"] == 9 and sym.data["level"] == 1.9105
    r = diagnose_runs([from_columns([100 * (i + 1) for i in range(10)], {"loss": loss})])
    [f] = _alarms(r)
    assert (f.symptom, f.severity, f.step, f.rule) == ("stall", "warning", 200, "differential.stuck")
    assert "diff.ev.froze_after_moving" in _keys(f)
    # three equal prints after one that differed by 79 units of the last digit are enough
    assert "stuck" in _kinds([1, 2, 3, 4], [5.7178, 5.7257, 5.7257, 5.7257])
    # two are not
    assert "stuck" not in _kinds([1, 2, 3, 4], [5.7178, 5.7190, 5.7257, 5.7257])


def test_a_running_mean_that_settles_below_its_last_digit_is_no_stall():
    # a progress bar's epoch mean late in the epoch moves by a unit of the 4th decimal between redraws:
    # three equal prints are what rounding makes of it
    loss = [0.0542, 0.0536, 0.0531, 0.0528, 0.0526, 0.0525, 0.0524, 0.0523, 0.0523, 0.0523]
    assert "stuck" not in _kinds(list(range(100, 1100, 100)), loss)
    # the same three equal prints after steps of 30-80 units are no rounding
    moving = [0.0842, 0.0776, 0.0731, 0.0658, 0.0523, 0.0523, 0.0523]
    assert "stuck" in _kinds(list(range(100, 800, 100)), moving)


def test_a_loss_frozen_at_ln_k_after_a_jump_is_a_chance_plateau_beside_the_divergence():
    # the per-batch loss of a segmentation net: 0.09, a jump, then exactly ln 2 on every batch
    loss = [0.09, 0.3945, 0.3875, 0.6931, 0.6931, 0.6931, 0.6931, 0.6931]
    steps = list(range(947, 955))
    sym = _kinds(steps, loss)["chance"]
    assert sym.data["k"] == 2 and sym.step == 950 and sym.data["tail"] is True
    r = diagnose_runs([from_columns(steps, {"loss": loss})])
    symptoms = {f.symptom: f for f in _alarms(r)}
    assert {"divergence", "plateau"} <= set(symptoms), _show(r)
    assert symptoms["plateau"].step == 950 and symptoms["plateau"].cause == "lr_too_high"


def test_a_loss_equal_to_fp32_precision_on_every_batch_is_a_constant_loss():
    # a hinge loss printed with 17 digits: 25.600017, 25.600010 ... one number computed in fp32
    loss = [
        25.600017547607422,
        25.60001564025879,
        25.600017547607422,
        25.600017547607422,
        25.600013732910156,
        25.60000991821289,
        25.600013732910156,
    ]
    sym = _kinds(list(range(12400, 13100, 100)), loss)["constant"]
    assert sym.step == 12400 and sym.data["n"] == 7
    # a loss that moves in its 4th significant digit is no constant
    assert "constant" not in _kinds(list(range(12400, 13100, 100)), [v + 0.01 * (i % 3) for i, v in enumerate(loss)])


def test_a_constant_negative_loss_is_the_wrong_loss_first():
    # binary cross-entropy on class indices 0-9: a saturated output pins the loss below 0
    loss = [-55.0254] + [-55.0284] * 6
    r = diagnose_runs([from_columns([40199 * (i + 1) for i in range(7)], {"loss": loss})])
    [f] = _alarms(r)
    assert (f.cause, f.symptom, f.step) == ("wrong_loss", "stall", 80398)
    assert "diff.ev.negative" in _keys(f)


def test_a_loss_of_exactly_zero_from_the_runs_first_steps_needs_two_points():
    sym = _kinds([46, 92], [0.0, 0.0])["zero"]
    assert sym.step == 46
    # mid-run, two zeros are a converged loss printed to few digits
    assert "zero" not in _kinds([46000, 46046], [0.0, 0.0])
    # a start that printed a loss first is not "zero from the start"
    assert "zero" not in _kinds([46, 92], [0.3, 0.0])


def test_a_loss_at_ln_k_to_its_third_decimal_mid_run_is_a_chance_plateau_and_at_the_start_is_not():
    # per-batch losses at ln(1000) = 6.9078 in an ImageNet run's epoch 11
    loss = [6.9076, 6.9091, 6.9048, 6.9069, 6.9074, 6.9080, 6.9067, 6.9071, 6.9045]
    sym = _kinds(list(range(111383, 111392)), loss)["chance"]
    assert sym.data["k"] == 1000
    # the same nine points at the run's first steps are a model that has not learnt yet
    assert "chance" not in _kinds(list(range(1, 10)), loss)


# ------------------------------------------------------------------ a jump judged by the log's own noise


def test_a_jump_against_a_smooth_trend_is_a_spike_with_one_point_before_it():
    # an NMT cost averaged over 2,000 updates: falls 8-15% per print, rises 27% once, comes back
    cost = [5.20175, 6.59609, 6.29689, 5.85168, 5.25473, 4.57148, 3.89088]
    steps = list(range(14000, 28000, 2000))
    sym = _kinds(steps, cost)["spike"]
    assert sym.step == 16000 and sym.data["recovered"] is True
    [f] = _alarms(diagnose_runs([from_columns(steps, {"loss": cost})]))
    assert (f.symptom, f.step) == ("spike", 16000)
    # a recovered one-off gets no LR cut
    assert not any(x.kind in ("lr", "lr_range") or getattr(x.text, "key", "").endswith("lower_lr") for x in f.fixes)
    # at a run's start the loss rises and falls with its warm-up: no trend to break yet
    dino = [7.69836, 9.55839, 8.00192, 6.87829, 6.25286, 5.57406, 5.03105, 4.85569]
    assert not _alarms(diagnose_runs([from_columns(list(range(8)), {"loss": dino})]))


def test_single_batch_losses_that_swing_x4_more_than_once_are_noise():
    # fairseq's per-batch loss of a sound run (its running mean falls 0.96 -> 0.86)
    loss = [0.73, 0.73, 2.99, 0.66, 3.33, 0.56, 0.52, 0.78, 0.57, 0.38]
    steps = [119122, 120122, 121122, 122122, 123122, 124345, 125345, 126345, 127345, 128345]
    r = diagnose_runs([from_columns(steps, {"loss": loss})])
    assert not _alarms(r), _show(r)
    # one such swing in a calm log is a spike
    once = [0.73, 0.71, 2.99, 0.66, 0.69, 0.56, 0.62, 0.6, 0.57, 0.58]
    assert "spike" in _kinds(steps, once)


def test_a_climb_whose_rise_is_one_interval_is_left_to_the_jump_rules():
    # +25%, +5%, then x4 in one interval, back near the start one point later: a hard batch
    loss = [1.021571, 1.027246, 4.266449, 0.860662, 1.07448, 1.12876, 4.595565, 1.120292]
    assert "jump_stayed" not in _kinds(list(range(1, 9)), loss)
    # a climb step after step stays one: 2.1 -> 4.0 -> 7.2
    assert _kinds([100, 200, 300, 400], [2.0, 2.1, 4.0, 7.2])["jump_stayed"].data["climb"] is True


def _meter_excerpt(values, first_step):
    text = "".join(
        f"Epoch: [0][{first_step + i}/8448]\tTime 1.323 (23.411)\tLoss {v:.4f} ({0.75 - 0.01 * i:.4f})\n"
        for i, v in enumerate(values)
    )
    return text


@pytest.mark.parametrize("first_step", [6, 120])
def test_a_low_first_batch_after_the_start_is_no_start_to_have_jumped_from(tmp_path, first_step):
    """An ImageNet-example meter log cut at step 6 (or 120): one low batch, 0.169, then 0.49-0.84, the
    running average falling: the first point is not the loss before any update, and with fewer than
    three points before the x5 batch no baseline says it jumped: no alarm. From step 0 the first
    point is the init's loss, and the same values are a jump over it."""
    values = [0.1689, 0.4874, 0.8373, 0.5244, 0.5639, 0.5341]
    p = tmp_path / "train.log"
    p.write_text(_meter_excerpt(values, first_step))
    report = diagnose_runs(load_path(p))
    assert not [f for f in report.findings if f.severity in ("warning", "critical")], [
        (f.cause, f.step) for f in report.findings
    ]
    p.write_text(_meter_excerpt(values, 0))
    started = diagnose_runs(load_path(p))
    alarm = next(f for f in started.findings if f.severity in ("warning", "critical"))
    assert alarm.cause == "lr_too_high" and alarm.evidence[0].key == "lr.high.jumped"


def _sym_kinds(steps, cols, meta=None) -> set[str]:
    return {s.kind for s in symptoms_of(Quantities(from_columns(steps, cols, meta=meta or {})))}


def test_a_five_epoch_climb_whose_top_is_its_last_point_is_a_creep_when_the_accuracy_falls_with_it():
    """Five epoch means rising at every epoch (1.104 -> 1.237) with the training accuracy falling at
    every one: without the top point (the last) four points still rise in order and the accuracy says
    the same, so it is a creep; the same climb with an accuracy that does not fall stays at the 1% bar
    the five points alone cannot pass without their top."""
    steps = [250_000, 300_000, 350_000, 400_000, 450_000]  # an excerpt from epoch 5 on, 50,000 samples an epoch
    loss = [1.1043, 1.1402, 1.1855, 1.2136, 1.2371]
    falling = [0.6293, 0.6204, 0.6111, 0.6026, 0.5952]
    assert "creep" in _sym_kinds(steps, {"loss": loss, "accuracy": falling})
    assert "creep" not in _sym_kinds(steps, {"loss": loss, "accuracy": [0.62, 0.63, 0.61, 0.64, 0.62]})
    assert "creep" not in _sym_kinds(steps, {"loss": loss})


def test_a_tiny_lr_that_climbs_at_every_row_of_a_short_log_is_a_warm_up_not_a_too_low_lr():
    """An HF run's first eight logged steps at a linear warm-up from 2.5e-8: tiny by design; the same
    loss at a constant 1e-7, or a climb over more than `span_steps` steps, is a too-low LR."""
    loss = [0.2065, 0.2161, 0.2513, 0.2632, 0.2231, 0.2124, 0.2633, 0.2363]
    steps = list(range(1, 9))
    assert "lr_tiny" not in _sym_kinds(steps, {"loss": loss, "lr": [2.5e-8 * k for k in steps]})
    assert "lr_tiny" in _sym_kinds(steps, {"loss": loss, "lr": [1e-7] * 8})
    long = [s * LIMITS.span_steps for s in steps]
    assert "lr_tiny" in _sym_kinds(long, {"loss": loss, "lr": [2.5e-8 * k for k in steps]})


def test_one_print_at_caffes_clamp_ceiling_is_a_cross_entropy_out_of_range():
    """Caffe's SoftmaxWithLoss prints 87.3365 (-ln FLT_MIN) when the true class's probability
    underflowed: one such print names the loss a cross-entropy, above any vocabulary's range, so a
    paste cut to its last line is an alarm whose evidence names the clamp; 87.1 from a loss of another
    kind is no symptom."""
    kinds = _sym_kinds([20480, 20500], {"loss": [math.nan, 87.3365], "lr": [1e-4, 1e-4]})
    assert "absurd" in kinds
    r = diagnose_runs([from_columns([20480, 20500], {"loss": [math.nan, 87.3365], "lr": [1e-4, 1e-4]})])
    assert r.findings and r.findings[0].severity in ("warning", "critical")
    assert any(getattr(e, "key", "") == "diff.ev.clamped" for f in r.findings for e in f.evidence)
    assert "absurd" not in _sym_kinds([20480, 20500], {"loss": [math.nan, 87.1], "lr": [1e-4, 1e-4]})


def test_one_signed_point_out_of_all_the_others_is_a_spike_with_no_history_before_it():
    """WaveGlow's negative log-likelihood cut to four prints, -4.32, 4191.68, -2.41, -2.91: one point
    before the jump is no history, but the other three, before and after it, are its level; 4191 is a
    spike the run came back from (its own sentence); the same point opening the log is a run coming down."""
    r = diagnose_runs([from_columns([78600, 78620, 78640, 78660], {"loss": [-4.3225, 4191.6836, -2.4086, -2.9081]})])
    f = r.findings[0]
    assert (f.symptom, f.step, f.severity) == ("spike", 78620, "warning")
    assert any(getattr(e, "key", "") == "diff.what.signed_one_out" for e in f.evidence)
    assert "spike" not in _sym_kinds([78600, 78620, 78640, 78660], {"loss": [4191.6836, -4.3225, -2.4086, -2.9081]})


def test_a_flat_loss_print_while_the_accuracy_climbs_is_no_too_low_lr(tmp_path):
    """fairseq prints its loss to three decimals (0.264 -> 0.261 over ten prints) at an LR below 2e-6
    while its accuracy climbs 27.4 -> 36.4: the model learns, so no flat-loss finding; the same prints
    with the accuracy flat are the too-low LR."""
    head = "[2022-06-06 09:18:01,393][fairseq.trainer][INFO] - begin training epoch 1\n"
    line = (
        '[2022-06-06 09:18:44,886][train_inner][INFO] - {{"epoch": 1, "loss": "{x}", "accuracy": "{a}", '
        '"num_updates": "{s}", "lr": "{lr:.3e}", "gnorm": "{g}"}}\n'
    )
    loss = (0.264, 0.264, 0.263, 0.262, 0.262, 0.261, 0.262, 0.261, 0.261, 0.261)
    gn = (0.149, 0.14, 0.138, 0.14, 0.139, 0.137, 0.134, 0.133, 0.135, 0.131)
    lrs = [1.099e-6 + 1e-7 * k for k in range(10)]

    def causes(acc, name):
        rows = zip(range(200, 2001, 200), loss, acc, lrs, gn)
        p = tmp_path / name
        p.write_text(head + "".join(line.format(s=s, x=x, a=a, lr=lr, g=g) for s, x, a, lr, g in rows))
        return {f.cause for f in diagnose_runs(load_path(p)).findings if f.severity != "info"}

    assert "lr_too_low" not in causes((27.4, 27.8, 29.0, 29.6, 31.1, 32.5, 32.8, 34.7, 36.6, 36.4), "climbs.log")
    assert "lr_too_low" in causes((27.4, 27.1, 27.5, 27.3, 27.4, 27.2, 27.6, 27.3, 27.4, 27.5), "flat.log")


def test_an_lr_still_climbing_into_the_usual_range_at_a_pastes_end_is_a_warm_up_under_way(tmp_path):
    """OpenNMT's Noam schedule printed to step 5000 of an 8000-step warm-up: the LR rises at every print
    to 6.2e-4, which is where warm-ups go; a pasted excerpt need not end with its run, so that is no
    warm-up that never ends. One that stays below every usual peak (1e-7 -> 5e-6) still is."""
    line = "[2020-06-01 10:00:00,000 INFO] Step {s}/100000; acc:  {a:.2f}; ppl: 99.0; xent: {x:.2f}; lr: {lr:.8f}\n"

    def text(top):
        return "".join(line.format(s=100 * k, a=4 + 0.6 * k, x=7.4 - 0.08 * k, lr=top * k / 50) for k in range(1, 51))

    for name, top, expect in (("noam.log", 6.2e-4, False), ("tiny.log", 5e-6, True)):
        p = tmp_path / name
        p.write_text(text(top))
        found = {f.cause for f in diagnose_runs(load_path(p)).findings}
        assert ("lr_schedule_error" in found) == expect, (name, found)


def test_a_jump_over_two_points_must_clear_their_own_spread():
    """C3D's single-batch Caffe losses 0.00697, 3.7e-5, then 0.0189: the two before it already differ
    x190, so 0.0189 (x2.7 over the larger) is the log's noise, not a jump; 8.5, 5.3, then 322 still is."""
    c3d = [0.00696523, 3.70235e-05, 0.0188635, 0.0098978, 0.039086, 0.0021823, 0.0851032, 0.00216, 0.00296]
    steps = list(range(20020, 20020 + 20 * len(c3d), 20))
    assert not {"jump_stayed", "spike"} & _sym_kinds(steps, {"loss": c3d})
    assert {"jump_stayed", "spike"} & _sym_kinds([1000, 1100, 1200, 1300], {"loss": [8.5, 5.3, 322.0, 310.0]})


def test_a_healthy_signed_loss_has_no_one_point_spike():
    """A flow's NLL falling from -2.1 to -4.6 with its batch noise, and one with a point out by a few
    times the others' spread (-4.0 among -2.5 ... -3.1): no point is out of all the others by the signed
    bars, so no spike: the one-point rule stays silent on a healthy run."""
    g = np.random.default_rng(0)
    falling = [-2.1 - 0.1 * k + 0.05 * g.standard_normal() for k in range(25)]
    assert not {"spike", "jump_stayed"} & _sym_kinds(list(range(0, 2500, 100)), {"loss": falling})
    mild = [-2.5, -2.7, -4.0, -2.9, -3.1]
    assert not {"spike", "jump_stayed"} & _sym_kinds([100, 200, 300, 400, 500], {"loss": mild})
    assert not {"spike", "jump_stayed"} & _sym_kinds(
        [100, 200, 300, 400, 500], {"loss": [-2.5, -2.7, -1.9, -2.9, -3.1]}
    )


def test_a_huge_jump_over_a_few_noisy_points_is_out_of_them():
    """PaddleDetection's YOLOv3 per-batch losses 5438, 12576, 6576, 2886, then 149794: four points
    swinging x4 give a MAD too wide for the z bar, but x25 their median and x12 their largest (more
    than their own x4 range) is out of them; the same four then 20000 (x1.6 their largest) is not."""
    steps = [194, 195, 196, 197, 198]
    noisy = [5438.83, 12576.75, 6576.63, 2886.73]
    assert {"jump_stayed", "spike"} & _sym_kinds(steps, {"loss": noisy + [149794.53]})
    assert not {"jump_stayed", "spike"} & _sym_kinds(steps, {"loss": noisy + [20000.0]})


def test_a_loss_moving_only_in_its_sixth_digit_over_hundreds_of_steps_is_constant():
    """PaddleNLP's 1535.61987, 1535.61963, 1535.63367 over 100 steps: equal to five significant digits
    where a loss that learns moves its 4th-5th, so a constant loss; the same values with the 4th digit
    moving (1535.62, 1534.91, 1536.30) are not, nor the first ones over 20 steps."""
    steps = [700, 750, 800]
    assert "constant" in _sym_kinds(steps, {"loss": [1535.61987, 1535.61963, 1535.63367]})
    assert "constant" not in _sym_kinds(steps, {"loss": [1535.62, 1534.91, 1536.30]})
    assert "constant" not in _sym_kinds([700, 710, 720], {"loss": [1535.61987, 1535.61963, 1535.63367]})
