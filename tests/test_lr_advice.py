"""An LR cut follows certainty (issue 25): a healthy run is never told to lower its learning rate.

Healthy logs of the shapes that look like a too-large step to a rule that reads the curve alone
(tests/healthy_shapes.py: a warm-up's first updates, a running mean started at 0, small batches,
reinforcement-learning objectives, LR restarts, a resume, staged LRs, a data-mix change, a
validation loss read as the training loss, a KL weight annealed from 0, excerpts) are printed in
the formats people paste, read by the real readers and diagnosed: no finding on any of them may
advise a cut, and none is a critical `lr_too_high`. The LR faults keep theirs where the log's
evidence holds (a rise that held, a blow-up, a NaN after a climb, an LR beyond every usual range);
where it does not, the finding names the symptom with the LR as a candidate and the measurement.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from benchmarks.real_logs.score import harmful_fixes, lr_at
from healthy_shapes import SHAPES, HealthyCase, formats_for, healthy_cases
from lossdoctor.detectors.engine import diagnose_runs
from lossdoctor.detectors.lr_advice import LIMITS, cut_evidence, fills_up, held_rise, nan_after_climb
from lossdoctor.detectors.quantities import Quantities
from lossdoctor.findings import as_fix
from lossdoctor.records import from_columns
from lossdoctor.sources import load_path
from msgs import has
from short_logs import faulty_cases as short_faulty

SEEDS = (0, 1, 2)
HEALTHY = [c for s in SEEDS for c in healthy_cases(s)]


def _cuts(finding, run) -> bool:
    """A fix of the finding lowers the LR: by its numbers (an LR below the one it starts from, a
    factor under 1, a range below the current LR) or, for a sentence, as the corpus scorer reads it."""
    for x in finding.fixes:
        fix = as_fix(x)
        p = fix.params
        if fix.kind == "lr" and (
            (p.get("lr") is not None and p.get("lr_now") is not None and p["lr"] < p["lr_now"])
            or (p.get("lr_factor") is not None and p["lr_factor"] < 1)
        ):
            return True
        if fix.kind == "lr_range" and p.get("hi") is not None and p.get("lr_now") is not None and p["hi"] < p["lr_now"]:
            return True
    report = {"findings": [finding.to_dict()]}
    return bool(harmful_fixes(report, "healthy", None, lambda s: lr_at(run, s)))


def _read(case: HealthyCase, tmp_path):
    path = tmp_path / case.file
    path.write_text(case.text)
    runs = load_path(str(path))
    return runs, diagnose_runs(runs)


def _show(report):
    return [(f.rule, f.cause, f.symptom, f.severity, f.step) for f in report.findings]


@pytest.mark.parametrize("case", HEALTHY, ids=[c.name for c in HEALTHY])
def test_no_healthy_shape_is_told_to_lower_its_lr(case, tmp_path):
    runs, report = _read(case, tmp_path)
    run = max(runs, key=len)
    assert not [f for f in report.findings if _cuts(f, run)], (case.text[:300], _show(report))
    assert not [f for f in report.findings if f.cause == "lr_too_high" and f.severity == "critical"], _show(report)


def test_the_healthy_generator_covers_every_shape_in_its_formats():
    assert {c.shape for c in HEALTHY} == set(SHAPES)
    for shape in SHAPES:
        assert {c.fmt for c in HEALTHY if c.shape == shape} == set(formats_for(shape))
    assert len(HEALTHY) >= 400
    lengths = [c.text.count("\n") for c in HEALTHY if c.fmt == "pipes"]
    assert min(lengths) <= 10 and max(lengths) >= 300


# ------------------------------------------------------------------ the faults keep their cut

#: short-log faults whose curve holds an LR cut when the LR leads: x1e26 blow-ups, a rise at
#: every point to x4+, a climb of x3 to the last point
HELD_FAULTS = ("blowup", "rise", "triple")
FAULTY = [c for s in SEEDS for c in short_faulty(s) if c.name.split("-")[0] in HELD_FAULTS]


@pytest.mark.parametrize("case", FAULTY, ids=[c.name for c in FAULTY])
def test_a_fault_whose_rise_holds_keeps_its_lr_cut_when_the_lr_leads(case, tmp_path):
    path = tmp_path / case.file
    path.write_text(case.text)
    runs = load_path(str(path))
    report = diagnose_runs(runs)
    lr = [f for f in report.findings if f.cause == "lr_too_high" and f.symptom == "divergence"]
    for f in lr:
        assert f.severity == "critical", _show(report)
        assert not has(f.evidence, "lr.advice.withheld"), _show(report)


def _q(loss, steps=None, **cols):
    steps = list(range(1, len(loss) + 1)) if steps is None else steps
    return Quantities(from_columns(steps, {"loss": loss, **cols}))


def test_a_rise_that_held_is_evidence_and_one_the_run_trained_down_is_not():
    # the LSTM at SGD LR 20 of the zoo: x30 in four steps, back to x10 by the end: still held
    lstm = [1.38, 2.11, 4.6, 10.96, 16.1, 38.1, 33.4, 20.6, 26.7, 34.2, 27.5, 20.2] + [15.0] * 10
    held, _ = held_rise(_q(lstm), 1)
    assert held is not None and held.key in ("lr.advice.held", "lr.advice.blown")
    # a resume without the optimizer's state: x1.8 for a while, then trained below where it was
    bump = [2.0, 1.9, 1.85, 1.8, 3.2, 3.0, 2.6, 2.2, 1.9, 1.7, 1.6, 1.55, 1.5]
    held, why = held_rise(_q(bump), 4)
    assert held is None and why.key == "lr.advice.fell_again"
    # a step up of x1.6 that stays: a symptom, but under the x2 a step too large leaves
    shift = [2.0, 1.98, 1.97, 1.96, 3.1, 3.15, 3.12, 3.14, 3.13, 3.15]
    held, why = held_rise(_q(shift), 4)
    assert held is None and why.key == "lr.advice.small_rise"
    assert why.values["need"] == LIMITS.hold_ratio


def test_a_rise_inside_the_logs_own_noise_or_below_any_init_level_is_no_evidence():
    rng = np.random.default_rng(3)
    noisy = list(np.exp(0.6 * rng.standard_normal(30)))
    noisy[0] = 0.15  # one lucky first draw
    held, why = held_rise(_q(noisy), 1)
    assert held is None and why.key == "lr.advice.in_noise"
    # a converged loss near 0.002 whose hard batches reach x100-x200: no blow-up, and it trains on
    converged = [0.003, 0.002, 0.0025, 0.4, 0.002, 0.0021, 0.3, 0.0019, 0.002, 0.0018]
    assert held_rise(_q(converged), 3)[0] is None
    tiny = [0.002, 0.004, 0.009, 0.015, 0.02, 0.025, 0.03]  # a KL penalty growing from ~0
    held, why = held_rise(_q(tiny), 1)
    assert held is None and why.key in ("lr.advice.tiny", "lr.advice.fills_up")
    assert LIMITS.tiny_end < math.log(2)


def test_a_rise_after_a_descent_is_weighed_against_the_noise_of_the_one_point_it_is_measured_from():
    # a descent 15 -> 1.4, then x2.5 in noise of ~0.2 per point (log space): the level before is one
    # point, which carries a whole point's noise; with the five points' 1/5 the rise stood 4.4 sigmas out
    after = [3.612, 3.386, 4.108, 3.593, 3.061, 3.831, 4.849, 4.435, 2.935, 2.551, 2.995, 3.536]
    held, why = held_rise(_q([15.0, 8.0, 4.0, 2.2, 1.4] + after), 5)
    assert held is None and why.key == "lr.advice.in_noise", why
    assert why.values["base"] == 1.4 and why.values["z"] < LIMITS.hold_z


def test_an_average_filling_up_from_zero_is_no_blow_up_and_fastais_table_is():
    beta, avg, ema = 0.95, 0.0, []
    for v in [2.3] * 60:
        avg = beta * avg + (1 - beta) * v
        ema.append(avg)
    assert fills_up(np.array(ema[4::5]))
    assert not fills_up(np.array([38.2141, 377.1455, 839.3929]))  # grows faster as it goes
    assert not fills_up(np.array([1.70, 11.46, 11.75, 11.5, 12.19]))  # a jump, then held


def test_a_nan_after_a_climb_is_evidence_and_one_out_of_a_calm_run_is_not():
    climb = [2.3, 2.1, 2.0, 1.9, 3.5, 9.0, float("nan")]
    assert nan_after_climb(_q(climb), 6)[0] is not None
    calm = [2.3, 2.1, 2.0, 1.9, 1.85, 1.8, float("nan")]
    held, why = nan_after_climb(_q(calm), 6)
    assert held is None and why.key == "lr.advice.nan_calm"


def test_an_lr_far_above_every_usual_range_holds_whatever_the_curve():
    flat = [2.3, 2.4, 2.35, 2.38, 2.36, 2.37]
    q = _q(flat, lr=[20.0] * 6)
    held, _ = cut_evidence(q.run, q, 1)
    assert held is not None and held.key == "lr_usual.high_any"
    q = _q(flat, lr=[3e-4] * 6)
    assert cut_evidence(q.run, q, 1)[0] is None


def test_a_withheld_cut_is_a_warning_with_the_measurement(tmp_path):
    # the early-jump rule's shape (x3 at the first update, up for 20 steps), then the run trains the
    # loss well below its start
    loss = [1.0, 3.2] + list(np.linspace(3.0, 2.6, 20)) + list(np.geomspace(2.4, 0.6, 15))
    path = tmp_path / "train.log"
    path.write_text("".join(f"step {k + 1} | loss {v:.4f}\n" for k, v in enumerate(loss)))
    report = diagnose_runs(load_path(str(path)))
    lr = [f for f in report.findings if f.cause == "lr_too_high"]
    assert lr and all(f.severity == "warning" for f in lr), _show(report)
    f = lr[0]
    assert has(f.evidence, "lr.advice.withheld")
    assert [as_fix(x).kind for x in f.fixes] == ["measure"]
    assert as_fix(f.fixes[0]).key == "lr.fix.measure_first"


@pytest.mark.parametrize(
    "loss, rising",
    [
        # per-micro-batch losses of one optimizer step around a lucky low first draw, then NaN: no rise to date
        ([0.53, 1.55, 2.33, 1.14, 1.30, 3.67, 1.13, 1.12] + [math.nan] * 7, False),
        # a steady climb from the first updates on: the divergence began where the loss first rose
        ([0.53, 0.56, 0.9, 1.4, 2.2, 3.5, 5.6, 9.0] + [math.nan] * 7, True),
    ],
)
def test_a_nan_from_the_start_is_dated_at_a_rise_only_when_the_rise_clears_the_logs_noise(loss, rising):
    run = from_columns(range(len(loss)), {"loss": loss})
    (f,) = [f for f in diagnose_runs([run]).findings if f.symptom == "nonfinite"]
    assert f.severity == "critical"
    if rising:
        assert has(f.evidence, "lr.high.already_rising") and f.step < 8, f.data()
    else:
        assert f.step == 8 and not has(f.evidence, "lr.high.already_rising"), f.data()
