"""The differential moves the way the evidence points (detectors/differential.py).

Generated logs: the same NaN, drawn over seeds and history lengths, with and without one piece of
evidence (fp16 seen in the config / a falling loss scale / overflow lines / a model known to
overflow; a loss rising before it; the LR against its usual range; a grad-norm blow-up right after
the warm-up). Each test compares the ranked shares of the two logs: the causes the evidence points
to gain, the ones it points away from lose. Assertions are on cause names, shares, message keys."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest

from lossdoctor.detectors.differential import (
    ALWAYS,
    DEV,
    DEV_NAN_CAUSES,
    FP16_CAUSES,
    SOURCES,
    TABLES,
    UNSEPARATED_CONF,
    finding_for,
    rank,
)
from lossdoctor.detectors.engine import diagnose_runs
from lossdoctor.detectors.quantities import Quantities
from lossdoctor.detectors.symptoms import symptoms_of
from lossdoctor.records import Run, from_columns

MANIFEST = Path(__file__).resolve().parents[1] / "benchmarks" / "real_logs" / "manifest.json"
NAN = float("nan")
#: steps start here: past the "first 50 updates" and "before any update" evidence, which these tests leave out
START = 400


def _calm(seed: int, n: int, level: float = 2.0, rel: float = 0.03) -> list[float]:
    g = np.random.default_rng(seed)
    return [level * (1 - 0.2 * i / n) * math.exp(rel * g.standard_normal()) for i in range(n)]


def _nan_log(
    seed: int,
    calm: int,
    *,
    loss_tail: list[float] | None = None,
    meta: dict | None = None,
    cols: dict | None = None,
    events: dict | None = None,
) -> Run:
    """`calm` noisy finite points (loss, grad norm, a constant LR), an optional tail, then a NaN."""
    loss = _calm(seed, calm) + list(loss_tail or []) + [NAN]
    n = len(loss)
    base = {"loss": loss, "grad_norm": _calm(seed + 100, n - 1, level=0.8, rel=0.1) + [NAN], "lr": [2e-4] * n}
    base.update({k: v for k, v in (cols or {}).items()})
    return from_columns(range(START, START + n), base, meta=meta, events=events)


def _nan_symptom(run: Run):
    q = Quantities(run)
    return q, next(s for s in symptoms_of(q) if s.kind == "nonfinite")


def _shares(run: Run) -> dict[str, float]:
    q, sym = _nan_symptom(run)
    return dict(rank(run, q, sym, "nonfinite").causes)


def _leader(run: Run) -> str:
    q, sym = _nan_symptom(run)
    return rank(run, q, sym, "nonfinite").leader


def _fp16(shares: dict[str, float]) -> float:
    return sum(shares.get(c, 0.0) for c in FP16_CAUSES)


def _keys(f) -> list[str | None]:
    return [getattr(m, "key", None) for m in f.evidence]


def _fix_keys(f) -> list[str | None]:
    return [getattr(m, "key", None) for m in f.fixes]


CASES = [(seed, calm) for seed in (0, 1, 2) for calm in (12, 40)]


# ------------------------------------------------------------------ precision


def _scale_falls(n: int) -> list[float]:
    """Held at 2^16, then halved on each of the last 7 finite rows (an fp16 scaler backing off)."""
    return [65536.0] * (n - 8) + [65536.0 / 2**k for k in range(1, 8)] + [512.0]


def _overflow_lines(first: int, last: int) -> dict:
    return {
        "text_events": {
            s: [{"kind": "overflow", "line": s, "text": "OVERFLOW! Skipping step."}] for s in range(first, last)
        }
    }


FP16_EVIDENCE = {
    "config": lambda n: {"meta": {"precision": "fp16"}},
    "scale_fell": lambda n: {"cols": {"scale": _scale_falls(n)}},
    "overflow_lines": lambda n: {"events": _overflow_lines(START + n - 7, START + n - 1)},
    "model": lambda n: {"meta": {"model_type": "gemma"}},
}


@pytest.mark.parametrize("seed,calm", CASES)
@pytest.mark.parametrize("evidence", sorted(FP16_EVIDENCE))
def test_fp16_evidence_moves_the_same_nan_towards_the_fp16_causes(seed, calm, evidence):
    base = _shares(_nan_log(seed, calm))
    with_it = _shares(_nan_log(seed, calm, **FP16_EVIDENCE[evidence](calm + 1)))
    assert _fp16(with_it) > _fp16(base), (evidence, base, with_it)
    assert with_it["nonfinite_data"] < base["nonfinite_data"], (evidence, base, with_it)


@pytest.mark.parametrize("seed,calm", CASES)
def test_a_collapsing_loss_scale_puts_an_fp16_cause_first(seed, calm):
    run = _nan_log(seed, calm, cols={"scale": _scale_falls(calm + 1)})
    assert _leader(run) in FP16_CAUSES, _shares(run)


@pytest.mark.parametrize("seed,calm", CASES)
def test_bf16_in_the_config_moves_the_same_nan_away_from_the_fp16_causes(seed, calm):
    base = _shares(_nan_log(seed, calm))
    bf16 = _shares(_nan_log(seed, calm, meta={"precision": "bf16"}))
    assert _fp16(bf16) < _fp16(base) and bf16["nonfinite_data"] > base["nonfinite_data"], (base, bf16)


# ------------------------------------------------------------------ the loss before the NaN


@pytest.mark.parametrize("seed,calm", CASES)
def test_a_loss_rising_for_several_points_before_the_nan_moves_it_to_the_lr(seed, calm):
    level = _calm(seed, calm)[-1]
    rising = [level * 1.35**k for k in range(1, 7)]
    base = _shares(_nan_log(seed, calm))
    rose = _nan_log(seed, calm, loss_tail=rising)
    shares = _shares(rose)
    assert shares["lr_too_high"] > base["lr_too_high"] and shares["nonfinite_data"] < base["nonfinite_data"]
    assert _leader(rose) == "lr_too_high", shares


@pytest.mark.parametrize("seed", (0, 1, 2))
def test_a_nan_out_of_a_long_calm_run_ranks_the_batch_over_the_lr(seed):
    run = _nan_log(seed, 40, meta={"precision": "bf16"})
    shares = _shares(run)
    assert shares["nonfinite_data"] > shares["lr_too_high"] and _leader(run) == "nonfinite_data", shares


# ------------------------------------------------------------------ the LR against its usual range


@pytest.mark.parametrize("seed,calm", CASES)
def test_an_lr_far_above_the_usual_range_moves_the_nan_to_the_lr_and_a_usual_one_away(seed, calm):
    def with_lr(lr, optimizer):
        meta = {"optimizer": optimizer} if optimizer else None
        return _shares(_nan_log(seed, calm, meta=meta, cols={"lr": [lr] * (calm + 1)}))

    unknown = with_lr(3e-4, None)  # the optimizer not said: the LR is not judged
    usual = with_lr(3e-4, "AdamW")
    high = with_lr(0.05, "AdamW")  # > 3x the 1e-3 end of Adam's usual range
    assert high["lr_too_high"] > unknown["lr_too_high"] > usual["lr_too_high"], (high, unknown, usual)
    assert high["nonfinite_data"] < unknown["nonfinite_data"], (high, unknown)


# ------------------------------------------------------------------ a grad-norm blow-up: the LR or an explosion


def _blowup_log(seed: int, *, warmup: int, calm_after: int) -> Run:
    """A linear warm-up over `warmup` rows to 1e-3 (none when 0), `calm_after` calm rows at the peak,
    then the grad norm doubles for 6 rows and the loss goes NaN."""
    n_calm = warmup + calm_after
    lr = [1e-3 * (i + 1) / warmup if i < warmup else 1e-3 for i in range(n_calm + 7)]
    gn = _calm(seed + 7, n_calm, level=0.8, rel=0.1)
    gn += [gn[-1] * 2.2**k for k in range(1, 7)] + [NAN]
    loss = _calm(seed, n_calm) + _calm(seed + 1, 6, level=1.6) + [NAN]
    return from_columns(range(START, START + len(loss)), {"loss": loss, "grad_norm": gn, "lr": lr})


@pytest.mark.parametrize("seed", (0, 1, 2, 3))
def test_a_grad_blowup_right_after_the_warmup_is_the_lr_and_without_a_warmup_an_explosion(seed):
    at_peak = _blowup_log(seed, warmup=20, calm_after=1)
    constant = _blowup_log(seed, warmup=0, calm_after=30)
    long_after = _blowup_log(seed, warmup=10, calm_after=60)
    q, sym = _nan_symptom(at_peak)
    r = rank(at_peak, q, sym, "nonfinite")
    assert "grad_rose_at_peak" in r.present and r.leader == "lr_too_high", (r.causes, list(r.present))
    for run in (constant, long_after):
        q, sym = _nan_symptom(run)
        r = rank(run, q, sym, "nonfinite")
        assert "grad_rose_at_peak" not in r.present and r.leader == "grad_explosion", (r.causes, list(r.present))


# ------------------------------------------------------------------ when it broke, and in which framework


@pytest.mark.parametrize("seed", (0, 1, 2))
def test_a_nan_in_the_runs_first_hundred_updates_leans_to_the_lr_and_a_late_one_away_from_it(seed):
    early = from_columns([60], {"loss": [NAN]})
    q, sym = _nan_symptom(early)
    r = rank(early, q, sym, "nonfinite")
    assert r.leader == "lr_too_high" and "early" in r.present, (r.causes, list(r.present))
    # the same NaN after thousands of calm steps: the LR is no longer the first suspect
    late = from_columns(range(18000, 18000 + 31), {"loss": _calm(seed, 30) + [NAN]})
    q, sym = _nan_symptom(late)
    r = rank(late, q, sym, "nonfinite")
    assert r.leader != "lr_too_high" and "late" in r.present, (r.causes, list(r.present))


@pytest.mark.parametrize("seed,calm", CASES)
def test_a_framework_that_trains_in_fp32_by_default_moves_the_nan_away_from_the_fp16_causes(seed, calm):
    base = _shares(_nan_log(seed, calm))
    keras = _shares(_nan_log(seed, calm, meta={"framework": "keras"}))
    assert _fp16(keras) < _fp16(base), (base, keras)
    # unless the log shows fp16 itself
    shown = _shares(_nan_log(seed, calm, meta={"framework": "keras", "precision": "fp16"}))
    assert _fp16(shown) > _fp16(keras), (keras, shown)


def test_a_nan_after_a_blow_up_is_its_own_finding_at_its_step_beside_the_divergence():
    # per-iteration losses of a detector at a too-large LR: 39 -> 1.4e6, NaN from iteration 7
    loss = [39.6567, 22.2189, 68.6095, 1266.86, 332.03, 1.43618e06, NAN, NAN, NAN, NAN]
    r = diagnose_runs([from_columns(range(1, 11), {"loss": loss})])
    nan = [f for f in r.findings if f.symptom == "nonfinite" and f.severity == "critical"]
    assert [f.step for f in nan] == [7], [(f.cause, f.symptom, f.step) for f in r.findings]
    assert nan[0].cause == "lr_too_high"
    assert any(f.symptom == "divergence" and f.step is not None and f.step < 7 for f in r.findings)


def test_a_loss_scale_at_zero_with_the_loss_nan_is_a_critical_nan_not_a_skipped_step():
    run = from_columns(
        [2750, 2800, 2850],
        {"loss": [44.1258, 43.0147, NAN], "scale": [12800.0, 12800.0, 0.0]},
        meta={"precision": "fp16"},
    )
    r = diagnose_runs([run])
    f = r.findings[0]
    assert (f.severity, f.symptom, f.step) == ("critical", "nonfinite", 2850), [
        (g.cause, g.symptom) for g in r.findings
    ]
    assert f.cause in FP16_CAUSES
    # a healthy scaler backing off once at the last row (scale >= 1) is still its own business
    ok = from_columns(
        [2750, 2800, 2850],
        {"loss": [44.1258, 43.0147, NAN], "scale": [65536.0, 65536.0, 32768.0]},
        meta={"precision": "fp16"},
    )
    assert not any(g.symptom == "nonfinite" for g in diagnose_runs([ok]).findings)


def test_a_loss_scale_below_one_from_its_first_print_is_not_said_to_have_fallen():
    """A log whose every print has the scale at 0.062 shows no fall: the finding says the scale is
    below 1 from its first print (its own key), not that it "fell from 0.062 to 0.062"; a scale that
    did fall in the log keeps the fall's sentence."""
    keys = lambda run: {getattr(e, "key", None) for f in diagnose_runs([run]).findings for e in f.evidence}  # noqa: E731
    low = from_columns([190, 290, 389], {"loss": [14.35, 13.69, 13.14], "scale": [0.0625, 0.0625, 0.0625]})
    assert "diff.what.scale_low" in keys(low)
    assert "diff.what.scale_collapse" not in keys(low)
    fell = from_columns([190, 290, 389], {"loss": [14.35, 13.69, 13.14], "scale": [0.5, 0.0625, 0.0625]})
    assert "diff.what.scale_collapse" in keys(fell)


# ------------------------------------------------------------------ a divergence from the first updates


def test_a_loss_that_rises_from_the_first_epoch_on_is_the_lr_and_at_a_tiny_lr_it_is_not():
    # fastai's documented too-high LR: train loss 38 -> 377 -> 839 over three epochs
    run = from_columns([0, 1, 2], {"loss": [38.2141, 377.146, 839.393]}, meta={"steps_from": "epoch"})
    q = Quantities(run)
    sym = next(s for s in symptoms_of(q) if s.kind == "jump_stayed")
    r = rank(run, q, sym, "divergence")
    assert r.leader == "lr_too_high" and {"first_updates", "kept_rising"} <= set(r.present), (r.causes, list(r.present))
    # the same jump at an LR of 2e-9 (a fine-tune's first warm-up step) is not the step size
    tiny = from_columns([1, 2], {"loss": [2.27581, 11.0545], "lr": [1.212e-09, 2.424e-09]})
    q = Quantities(tiny)
    sym = next(s for s in symptoms_of(q) if s.kind == "jump_stayed")
    assert rank(tiny, q, sym, "divergence").leader != "lr_too_high"


# ------------------------------------------------------------------ certainty: said, and followed by the advice


def test_a_nan_the_log_says_nothing_about_is_critical_unseparated_and_gets_only_measurements():
    run = from_columns([18544, 18545], {"loss": [0.2606, NAN]})
    q, sym = _nan_symptom(run)
    f = finding_for(run, q, sym)
    assert f.severity == "critical" and f.confidence <= UNSEPARATED_CONF, (f.severity, f.confidence)
    assert "diff.unseparated" in _keys(f) and "diff.ranked" in _keys(f)
    assert set(_fix_keys(f)) <= {"diff.fix.measure", "diff.fix.rerun", "diff.fix.log_more"}, _fix_keys(f)


@pytest.mark.parametrize("seed", (0, 1))
def test_strong_evidence_separates_the_causes_and_brings_the_leaders_fix(seed):
    level = _calm(seed, 30)[-1]
    run = _nan_log(
        seed,
        30,
        loss_tail=[level * 1.4**k for k in range(1, 8)],
        meta={"optimizer": "AdamW", "precision": "bf16"},
        cols={"lr": [0.05] * 38},
    )
    q, sym = _nan_symptom(run)
    f = finding_for(run, q, sym)
    assert f.cause == "lr_too_high" and "diff.unseparated" not in _keys(f), (f.cause, _keys(f))
    assert f.confidence > UNSEPARATED_CONF and "diff.fix.lower_lr" in _fix_keys(f), (f.confidence, _fix_keys(f))


def test_every_grad_norm_nan_while_the_loss_moves_is_a_critical_nan_and_while_it_is_flat_skipped_updates():
    moving = from_columns(
        [10, 20, 30], {"loss": [1.70, 1.35, 1.15], "grad_norm": [NAN] * 3, "lr": [1.3e-6, 2.7e-6, 4e-6]}
    )
    flat = from_columns(
        [10, 20, 30], {"loss": [7.13, 7.15, 7.14], "grad_norm": [NAN] * 3, "lr": [2.7e-5, 2.7e-5, 2.7e-5]}
    )
    f = diagnose_runs([moving]).findings[0]
    assert f.severity == "critical" and f.symptom == "nonfinite" and f.step == 10, (f.cause, f.symptom)
    assert _keys(f)[0] == "diff.what.nonfinite_grad" and f.cause != "nonfinite_data", (f.cause, _keys(f))
    g = diagnose_runs([flat]).findings[0]
    assert g.symptom != "nonfinite" and g.cause == "loss_scale_collapse", (g.cause, g.symptom)


# ------------------------------------------------------------------ the tables name their sources


def _dev_files() -> set[str]:
    return {e["file"] for e in json.loads(MANIFEST.read_text(encoding="utf-8")) if e.get("split") == "dev"}


def test_every_row_names_its_source_and_the_fitted_ones_name_dev_logs_only():
    dev = _dev_files()
    for name, rows in TABLES.items():
        for r in rows:
            if r.source.startswith(DEV):
                files = [f.strip() for f in r.source[len(DEV) :].split(",")]
                assert files and set(files) <= dev, (name, r)
            else:
                assert r.source in SOURCES, (name, r)
    assert {f for files in DEV_NAN_CAUSES.values() for f in files} <= dev
    # the NaN priors are ordered as the dev threads' counts are
    prior = {r.cause: r.weight for r in TABLES["nonfinite"] if r.evidence == ALWAYS}
    count = {c: len(files) for c, files in DEV_NAN_CAUSES.items()}
    by_count = sorted(prior, key=lambda c: -count[c])
    assert [prior[c] for c in by_count] == sorted(prior.values(), reverse=True), (prior, count)


def _detector_print(nan_prints: int, all_terms: bool = False) -> Run:
    """A two-stage detector's print every 100 iterations from iteration 0: the total loss and its
    terms; from iteration 100 on the box term (or every term) is NaN, the total with it."""
    n = 1 + nan_prints
    loss = [6.71] + [NAN] * nan_prints
    events: dict = {"loss_components": {}}
    for k in range(n):
        bad = k >= 1
        events["loss_components"][100 * k] = {
            "rpn_cls": NAN if bad and all_terms else 0.72 - 0.05 * k,
            "rpn_box": NAN if bad else 1.71,
            "rcnn_cls": NAN if bad and all_terms else 4.28 - 0.6 * k,
        }
    return from_columns([100 * k for k in range(n)], {"loss": loss, "lr": [1e-3] * n}, events=events)


@pytest.mark.parametrize("nan_prints", [2, 5])
def test_a_term_that_stays_nan_while_the_others_train_on_ranks_the_data_over_the_lr(nan_prints):
    # the box term NaN on every print from iteration 100 while the classification terms keep falling:
    # the weights are finite, so that term's own input (its box targets) is what breaks; two prints a
    # hundred iterations apart already show the weights survived the first NaN (a thread's
    # `rpn_box: nan` at 100 and 200 with the classification terms finite: wrong samples, it found)
    run = _detector_print(nan_prints)
    assert _leader(run) == "nonfinite_data", _shares(run)
    (f,) = [f for f in diagnose_runs([run]).findings if f.symptom == "nonfinite"]
    assert f.cause == "nonfinite_data" and "diff.ev.term_stays" in _keys(f), _keys(f)
    # one print of it is no pattern yet, and every term NaN is weights gone NaN: no such evidence
    for twin in (_detector_print(1), _detector_print(5, all_terms=True)):
        q, sym = _nan_symptom(twin)
        assert "term_stays" not in rank(twin, q, sym, "nonfinite").present
