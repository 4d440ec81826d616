"""Symptoms at any length, judged against the log's own noise (detectors/symptoms.py), and the
differential's evidence for the causes behind them (detectors/differential.py).

Each symptom fires on a short and on a long log and stays silent on healthy ones of both lengths.
The faulty logs carry the numbers of failures seen in real logs (a loss flat at exactly ln 10, three
points exactly 1.0, an epoch whose losses repeat the last one's, a loss that never leaves its first
value, "Loss is nan, stopping training" after the last line); the healthy ones are real torch
training loops (noisy small batches with ordinary spikes, a plateau at the end of training, a loss
that starts at chance and falls) and files written the way the trainers print them, read by the
real readers."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from torch import nn
from torch.nn import functional as F

from lossdoctor.detectors.differential import finding_for
from lossdoctor.detectors.engine import diagnose_runs
from lossdoctor.detectors.quantities import Quantities
from lossdoctor.detectors.symptoms import symptoms_of
from lossdoctor.records import from_columns
from lossdoctor.sources import load_path


def _alarms(report):
    return [f for f in report.findings if f.severity in ("warning", "critical")]


def _keys(f):
    return [getattr(m, "key", None) for m in f.evidence]


def _kinds(run):
    return [s.kind for s in symptoms_of(Quantities(run))]


def _show(report):
    return [(f.cause, f.symptom, f.severity, f.step, _keys(f)[:4]) for f in report.findings]


def _noisy(n, level, rel=0.02, seed=0):
    g = np.random.default_rng(seed)
    return [level * math.exp(rel * g.standard_normal()) for _ in range(n)]


def _diagnose(steps, cols, **kw):
    return diagnose_runs([from_columns(steps, cols, **kw)])


def _symptom_finding(report, what):
    """The alarm whose first sentence is the symptom `what` (a `diff.what.*` key)."""
    return next((f for f in _alarms(report) if _keys(f)[:1] == [what]), None)


# ------------------------------------------------------------------ exactly constant


@pytest.mark.parametrize("n,level,start", [(3, 1.0, 172), (40, 0.8731, 0)])
def test_identical_losses_are_a_stall_at_their_first_step(n, level, start):
    steps = [start + 9 * i for i in range(n)]
    r = _diagnose(steps, {"loss": [level] * n, "lr": [1e-4] * n})
    f = next((f for f in _alarms(r) if f.symptom in ("stall", "plateau")), None)
    assert f is not None and f.severity == "warning" and f.step == start, _show(r)
    assert f.cause == "frozen_model", _show(r)
    assert r.status != "inconclusive"


def test_two_prints_at_caffes_clamp_are_a_constant_loss():
    """Caffe prints 87.3365 (-ln FLT_MIN) when the true class's probability underflowed: two prints
    of it are a loss pinned at a clamp, where two prints of any other equal value are too few."""
    pinned = from_columns([55900, 56000], {"loss": [87.3365, 87.3365]})
    assert [(s.kind, s.step) for s in symptoms_of(Quantities(pinned)) if s.kind == "constant"] == [("constant", 55900)]
    assert "constant" not in _kinds(from_columns([55900, 56000], {"loss": [2.3466, 2.3466]}))


def test_coarsely_printed_identical_losses_are_no_symptom():
    # "loss 0.12" three times: two significant digits cannot show a 1% fall
    run = from_columns([100, 110, 120], {"loss": [0.12, 0.12, 0.12]})
    assert "constant" not in _kinds(run)


def test_a_short_print_after_fine_ones_of_its_column_is_an_exact_value():
    """R's deepboost prints `error: 0.321375`, then `error: 0.5` nine times: a printer that shows six
    digits drops an exact 0.5's zeros, so the tail is stuck to the last digit; a fixed four decimals
    (HF's 1.1406, then 0.0001 five times) shows no finer digit than the tail's own: no symptom."""
    stuck = from_columns(range(1, 11), {"loss": [0.321375] + [0.5] * 9})
    assert [(s.kind, s.step, s.data["level"]) for s in symptoms_of(Quantities(stuck)) if s.kind == "stuck"] == [
        ("stuck", 2, 0.5)
    ]
    rounded = from_columns([50, 100, 150, 200, 250, 300], {"loss": [1.1406, 0.0003] + [0.0001] * 4})
    assert "stuck" not in _kinds(rounded)


@pytest.mark.parametrize("n", [4, 30])
def test_identical_losses_at_ln_k_are_a_chance_plateau_naming_k(n):
    r = _diagnose([10 * i for i in range(n)], {"loss": [2.3026] * n})
    f = next((f for f in _alarms(r) if f.symptom == "plateau"), None)
    assert f is not None and f.severity == "warning" and f.step == 0, _show(r)
    # the differential's sentence (any length), or the flat-loss rule's (>= 10 points) that it defers to
    chance = next(m for m in f.evidence if m.key in ("diff.what.chance", "scalars.flat.chance"))
    assert chance.values.get("k") == 10 or chance.values.get("name") == "ln(10)", chance.values
    assert {"diff.ev.constant", "scalars.flat.constant"} & set(_keys(f))


def test_a_loss_that_starts_at_chance_and_falls_is_no_plateau():
    for seed in range(2):
        cols = _train(12, seed=seed, batch=64)
        assert abs(cols["loss"][0] - math.log(4)) < 0.3  # a 4-class classifier starts near ln 4
        r = _diagnose(range(12), cols)
        assert not [f for f in _alarms(r) if str(_keys(f)[0]).startswith("diff.")], _show(r)


# ------------------------------------------------------------------ losses that recur exactly


def test_an_epoch_whose_losses_repeat_the_last_ones_is_a_frozen_model_short():
    epoch = [0.9741, 1.3742, 1.239, 0.967, 1.0386, 1.1681, 1.224, 0.961]
    r = _diagnose(range(14), {"loss": epoch + epoch[:6]})
    f = _symptom_finding(r, "diff.what.repeat")
    assert f is not None and f.symptom == "stall" and f.step == 8 and f.cause == "frozen_model", _show(r)
    assert "diff.ev.repeats" in _keys(f)
    assert f.evidence[0].values["first"] == 0 and f.evidence[0].values["again"] == 8


def test_an_epoch_whose_losses_repeat_the_last_ones_is_a_frozen_model_long():
    epoch = [round(v, 4) for v in _noisy(50, 2.1, rel=0.1, seed=7)]
    r = _diagnose(range(150), {"loss": epoch * 3, "lr": [3e-4] * 150})
    f = _symptom_finding(r, "diff.what.repeat")
    assert f is not None and f.step == 50 and f.cause == "frozen_model", _show(r)


def test_a_resumed_run_printing_its_steps_again_is_no_repeat():
    # the same step numbers logged twice (a restart from a checkpoint): one row per step, no recurrence
    loss = [round(v, 4) for v in _noisy(20, 1.7, rel=0.05, seed=3)]
    run = from_columns(list(range(20)) + list(range(10, 20)), {"loss": loss + loss[10:]})
    assert "repeat" not in _kinds(run)


# ------------------------------------------------------------------ a loss that never leaves its start


def _hump(n):
    g = np.random.default_rng(n)
    return [round(0.46 + 0.09 * math.sin(math.pi * i / n) + 0.01 * abs(g.standard_normal()), 2) for i in range(n)]


#: a thread's "the loss starts low and hardly changes" (rising, then back down: no creep to the end)
THREAD_NO_FALL = [0.46, 0.47, 0.48, 0.48, 0.5, 0.5, 0.54, 0.53, 0.55, 0.52, 0.49]


@pytest.mark.parametrize("loss", [THREAD_NO_FALL, _hump(60)], ids=["thread_11", "hump_60"])
def test_a_loss_that_never_falls_below_its_first_value_is_a_plateau(loss):
    n = len(loss)
    r = _diagnose([5 * i for i in range(n)], {"loss": loss})
    f = _symptom_finding(r, "diff.what.no_fall")
    assert f is not None and f.symptom == "plateau" and f.severity == "warning" and f.step == 0, _show(r)
    ranked = f.evidence[_keys(f).index("diff.ranked")]
    assert ranked.values["second"]  # the cause is uncertain: the runner-up is named
    assert f.confidence <= 0.6


@pytest.mark.parametrize("n", [11, 40])
def test_a_loss_that_rises_from_its_first_value_to_its_end_is_a_creep_from_the_start(n):
    """Never below its first point and rising, orderly, to the end (0.176 -> 0.198 over 19 epochs): the
    loss goes the wrong way from the run's start, a divergence dated at the first point above it."""
    g = np.random.default_rng(n)
    loss = [0.176] + [0.176 * (1 + 0.12 * i / n) * (1 + 0.015 * abs(g.standard_normal())) for i in range(1, n)]
    r = _diagnose(list(range(n)), {"loss": loss})
    f = _symptom_finding(r, "diff.what.creep")
    assert f is not None and f.symptom == "divergence" and f.severity == "warning" and f.step == 1, _show(r)
    assert f.evidence[0].values["best"] == 0.176 and f.evidence[0].values["ratio"] >= 1.08
    assert "no_fall" not in _kinds(from_columns(list(range(n)), {"loss": loss}))


def test_an_excerpt_from_mid_run_that_does_not_fall_is_no_stuck_start():
    # lines of epochs 25-27 of an LM printed without a step: the reader numbers the lines
    loss = [4.02, 4.05, 4.09, 4.03, 4.10, 4.12, 4.08, 4.15, 4.13, 4.18]
    run = from_columns(range(1, 11), {"loss": loss})
    assert "creep" in _kinds(run)  # as if line 1 were the run's first step: a creep from it...
    run.notes.append(_numbered_note(len(loss)))  # what the console reader says, in words
    run.meta["steps_from"] = "numbered"  # and as data, which the detectors read
    kinds = _kinds(run)
    assert "no_fall" not in kinds and "creep" not in kinds  # ...but the reader says the steps are line numbers


def _numbered_note(n):
    from lossdoctor.messages import Msg

    return Msg("console.numbered", n=n)


# ------------------------------------------------------------------ non-finite the log only reports


def test_a_nan_line_after_the_last_logged_loss_is_critical_at_its_step(tmp_path):
    p = tmp_path / "train.log"
    p.write_text(
        "[11:41:33.534863] Epoch: [8]  [ 200/2293]  eta: 1:52:52  lr: 0.000004  loss: 0.2606 (0.2654)  "
        "time: 3.0808  data: 0.0002  max mem: 32637\n"
        "[11:41:59.064379] Loss is nan, stopping training\n",
        encoding="utf-8",
    )
    r = diagnose_runs(load_path(p))
    f = next((f for f in _alarms(r) if f.symptom == "nonfinite"), None)
    assert f is not None and f.severity == "critical", _show(r)
    assert _keys(f)[0] == "diff.what.nonfinite_text"
    assert f.step >= 18000  # the step the NaN line was placed at, past the last logged row
    assert f.cause != "lr_too_high"  # an LR of 4e-6 blows no weights up
    assert r.status == "critical"


def test_a_component_loss_printed_as_inf_is_critical():
    run = from_columns(
        [8391], {"loss": [0.0123]}, events={"loss_components": {8391: {"value_function_loss": float("inf")}}}
    )
    r = diagnose_runs([run])
    f = next((f for f in _alarms(r) if f.symptom == "nonfinite"), None)
    assert f is not None and f.severity == "critical" and f.step == 8391, _show(r)
    assert f.evidence[0].key == "diff.what.nonfinite_component"
    assert f.evidence[0].values["name"] == "value_function_loss"


# ------------------------------------------------------------------ the differential of a NaN


def test_nans_between_finite_losses_at_the_old_level_rank_a_forward_overflow_above_the_lr():
    loss = [
        5.6332,
        5.3049,
        5.9116,
        5.7517,
        5.6231,
        float("nan"),
        5.0968,
        float("nan"),
        5.8938,
        6.1305,
        5.9105,
        5.4063,
        5.2371,
        float("nan"),
        float("nan"),
        5.4602,
        float("nan"),
        5.5166,
        5.0093,
        float("nan"),
    ]
    r = _diagnose(range(1, 21), {"loss": loss, "lr": [2e-4] * 20})
    f = next(f for f in _alarms(r) if f.symptom == "nonfinite")
    assert f.cause in ("activation_overflow", "nonfinite_data"), _show(r)
    assert "diff.ev.intermittent" in _keys(f), _keys(f)


def test_a_loss_swinging_before_its_nan_ranks_the_lr_first():
    loss = [1.1089, 1.537, 0.8661, 1.3271, 1.2003] + [float("nan")] * 5
    r = _diagnose(range(1, 11), {"loss": loss})
    f = next(f for f in _alarms(r) if f.symptom == "nonfinite")
    assert f.cause == "lr_too_high" and f.step == 6, _show(r)
    assert "diff.ev.unsteady" in _keys(f)


def test_a_first_logged_nan_at_step_27_is_not_before_any_update():
    run = from_columns([27], {"loss": [float("nan")]})
    q = Quantities(run)
    f = finding_for(run, q, next(s for s in symptoms_of(q) if s.kind == "nonfinite"))
    assert "diff.ev.at_start" not in _keys(f)
    assert f.severity == "critical" and f.step == 27 and f.confidence <= 0.5
    assert "diff.separate" in _keys(f)  # the measurement that would tell the two leaders apart
    run = from_columns([0], {"loss": [float("nan")]})
    q = Quantities(run)
    f = finding_for(run, q, next(s for s in symptoms_of(q) if s.kind == "nonfinite"))
    assert "diff.ev.at_start" in _keys(f) and f.cause == "nonfinite_data"


def test_a_nan_after_a_short_fall_is_not_a_confident_lr_without_an_lr():
    r = _diagnose([0, 10, 20, 30], {"loss": [2.3, 2.1, 1.9, float("nan")]})
    f = next(f for f in _alarms(r) if f.symptom == "nonfinite")
    assert f.severity == "critical" and f.step == 30, _show(r)
    assert f.confidence < 0.8 and "diff.ranked" in _keys(f), _show(r)


def test_an_absurd_loss_after_sane_ones_is_no_bad_init():
    r = _diagnose(range(4), {"loss": [1.1, 1.0, 0.95, 5e26]})
    f = next(f for f in _alarms(r) if f.symptom == "divergence")
    assert f.severity == "critical" and f.step == 3 and f.cause != "bad_init", _show(r)
    assert "diff.ev.after_sane" in _keys(f)


# ------------------------------------------------------------------ healthy runs stay quiet


def _train(steps, *, batch=64, lr=0.05, seed=0):
    """A real 4-class classifier on separable data under SGD; the columns a user's logger keeps."""
    torch.manual_seed(seed)
    w = torch.randn(16, 4)
    model = nn.Sequential(nn.Linear(16, 32), nn.ReLU(), nn.Linear(32, 4))
    o = torch.optim.SGD(model.parameters(), lr=lr, momentum=0.9)
    cols = {"loss": [], "grad_norm": [], "lr": []}
    for _ in range(steps):
        x = torch.randn(batch, 16)
        y = (x @ w).argmax(1)
        loss = F.cross_entropy(model(x), y)
        o.zero_grad()
        loss.backward()
        gn = torch.nn.utils.clip_grad_norm_(model.parameters(), 1e9)
        o.step()
        cols["loss"].append(float(loss.detach()))
        cols["grad_norm"].append(float(gn))
        cols["lr"].append(o.param_groups[0]["lr"])
    return cols


def _diff_alarms(report):
    return [(f.cause, f.symptom, f.step, _keys(f)[:1]) for f in _alarms(report) if str(_keys(f)[0]).startswith("diff.")]


@pytest.mark.parametrize("steps,batch", [(8, 16), (300, 4)])
def test_noisy_healthy_runs_of_both_lengths_have_no_symptom(steps, batch):
    for seed in range(2):
        cols = _train(steps, batch=batch, seed=seed)
        r = _diagnose(range(steps), {k: [round(v, 4) for v in c] for k, c in cols.items()})
        assert not _diff_alarms(r), (steps, seed, _diff_alarms(r))


@pytest.mark.parametrize("tail", [6, 40])
def test_a_healthy_plateau_at_the_end_of_training_has_no_symptom(tail):
    cols = _train(400, batch=64, lr=0.05, seed=1)
    keep = slice(400 - tail, 400)  # an excerpt pasted from the end of a converged run
    r = _diagnose(range(400 - tail, 400), {k: [round(v, 4) for v in c[keep]] for k, c in cols.items()})
    assert not _diff_alarms(r), _diff_alarms(r)


def test_a_late_progress_bar_redrawing_its_value_is_no_frozen_model(tmp_path):
    p = tmp_path / "bar.txt"
    p.write_text(
        "".join(
            f"Epoch 0:  97% {s}/1702 [13:00<00:24,  2.11it/s, loss=0.158, v_num=0, train_loss=0.149]\n"
            for s in range(1651, 1665)
        ),
        encoding="utf-8",
    )
    r = diagnose_runs(load_path(p))
    assert not _alarms(r), _show(r)
    # the same bar at the run's start: the first updates move the loss, identical values are no redraw
    p.write_text(
        "".join(
            f"Epoch 0:   0%|          | {s}/1793507 [00:02<611:40:05,  0.81it/s, v_num=12, train_loss=10.90]\n"
            for s in range(1, 7)
        ),
        encoding="utf-8",
    )
    r = diagnose_runs(load_path(p))
    assert any(f.symptom in ("stall", "plateau") for f in _alarms(r)), _show(r)


# ------------------------------------------------------------------ a climb over two intervals


def test_a_loss_tripling_over_two_logged_intervals_is_a_divergence_from_its_first_raised_point():
    r = _diagnose([0, 10, 20, 30, 40, 50], {"loss": [1.2, 1.1, 1.05, 1.0, 2.0, 3.1]})
    f = next((f for f in _alarms(r) if f.symptom == "divergence"), None)
    assert f is not None and f.severity == "critical" and f.step == 40, _show(r)
    assert _keys(f)[0] == "diff.what.climb" and "diff.ev.sudden" not in _keys(f)
    assert "diff.ranked" in _keys(f)  # no LR in the log: the cause is ranked, the runner-up named


def test_a_last_point_that_jumps_alone_stays_a_spike():
    r = _diagnose(range(6), {"loss": [1.2, 1.1, 1.05, 1.0, 1.02, 3.1]})
    f = next((f for f in _alarms(r) if f.step == 5), None)
    assert f is not None and f.symptom == "spike", _show(r)


def test_identical_losses_off_the_configured_chance_level_are_still_constant():
    # a 10-class config, a loss stuck at exactly 0.6931 (not ln 10): constant, not hidden as "chance"
    run = from_columns([0, 10, 20, 30], {"loss": [0.6931] * 4}, meta={"n_classes": 10})
    assert "constant" in _kinds(run) and "chance" not in _kinds(run)
    run = from_columns([0, 10, 20], {"loss": [-1.5234] * 3})  # a negative NLL stuck exactly
    assert "constant" in _kinds(run)


def test_a_nan_from_the_very_first_update_of_a_calm_start_ranks_the_optimizers_arithmetic():
    # Adam on fp16 weights: eps is 0 in fp16, the first update is 0/0 (the zoo's mlp_fp16_adam_eps, scalars only)
    n = 11
    r = _diagnose(
        range(n),
        {
            "loss": [0.2589] + [float("nan")] * (n - 1),
            "grad_norm": [0.3776] + [float("nan")] * (n - 1),
            "lr": [1e-3] * n,
        },
    )
    f = next(f for f in _alarms(r) if f.symptom == "nonfinite")
    assert f.severity == "critical" and f.step == 1, _show(r)
    assert f.cause == "precision_stall" and "diff.ev.first_update" in _keys(f), _show(r)
    # a NaN later in a run is no first update
    r = _diagnose(range(40), {"loss": _noisy(30, 1.2, seed=2) + [float("nan")] * 10, "lr": [1e-3] * 40})
    f = next(f for f in _alarms(r) if f.symptom == "nonfinite")
    assert "diff.ev.first_update" not in _keys(f)


def test_a_nan_after_a_first_step_that_had_already_exploded_is_no_optimizer_arithmetic():
    # unnormalised regression features (the zoo's mlp_unnormalised_features): step 0 already at 1.7e6
    r = _diagnose(
        range(4),
        {
            "loss": [64075.9, 2.6e32, float("inf"), float("nan")],
            "grad_norm": [1.66e6, 1.36e29, float("nan"), float("nan")],
            "lr": [0.05] * 4,
        },
    )
    f = next(f for f in _alarms(r) if f.symptom == "nonfinite")
    assert f.cause != "precision_stall" and "diff.ev.first_update" not in _keys(f), _show(r)


#: the zoo's healthy_mlp_sgd_batch4_noisy (seed 1), its per-step losses from step 140 to 239, as
#: `watch` recorded them (3 digits): converged batches of 4 scatter over five decades
BATCH4_CONVERGED = [
    0.000591,
    0.00138,
    0.00215,
    0.00028,
    0.224,
    0.147,
    0.00121,
    0.191,
    0.103,
    0.00173,
    0.000472,
    0.0257,
    0.00234,
    0.000782,
    7.39e-05,
    0.056,
    0.00124,
    0.000461,
    0.187,
    0.0763,
    0.000816,
    6.74e-05,
    0.00797,
    0.204,
    0.000976,
    0.253,
    0.00342,
    0.0662,
    0.000188,
    0.000786,
    0.533,
    0.00373,
    8.49e-06,
    1.11,
    0.111,
    0.246,
    0.00663,
    0.00106,
    0.000152,
    0.0101,
    0.00131,
    5.11e-05,
    0.0165,
    0.000255,
    0.00296,
    0.00198,
    0.00231,
    0.0105,
    0.0348,
    0.249,
    0.00437,
    0.00883,
    0.0331,
    0.55,
    0.000291,
    0.216,
    0.000162,
    0.000428,
    4.25e-05,
    0.114,
    0.974,
    0.000196,
    0.13,
    0.00243,
    0.089,
    0.604,
    0.00679,
    0.014,
    0.00595,
    9.38e-05,
    0.128,
    5.87e-05,
    0.0141,
    4.83e-05,
    0.0313,
    0.0143,
    0.0557,
    0.0383,
    0.044,
    0.000248,
    0.415,
    0.000563,
    0.053,
    4.62e-05,
    1.68,
    0.0216,
    0.00304,
    0.00994,
    0.000233,
    0.00495,
    1.42,
    0.000686,
    0.000188,
    0.0012,
    0.000946,
    0.000879,
    0.0126,
    0.000441,
    1.26,
    2.64e-05,
]


def test_windows_of_a_heavy_tailed_converged_loss_are_no_level_shift():
    """Two 5-point windows of that run differ by x400 by chance (steps 209-213 against 214-218:
    their own MADs say ~0.9 in ln), but not by five standard errors of a window-median difference
    under the points' noise around them: no step up at any length of the history (the live engine
    judges every prefix; it announced one at step 214, which the final report withdrew)."""
    start = [2.3 * math.exp(-i / 30) for i in range(140)]
    loss = start + BATCH4_CONVERGED
    for end in range(150, len(loss) + 1, 2):
        run = from_columns(range(end), {"loss": loss[:end]})
        assert not [s for s in symptoms_of(Quantities(run)) if s.data.get("shift")], end


def test_a_step_up_of_a_calm_long_log_is_still_a_level_shift():
    """The same rule keeps a calm log's step up: 1% noise about 0.50, then about 1.0 from step 300."""
    g = np.random.default_rng(0)
    loss = [0.5 * math.exp(0.01 * g.standard_normal()) for _ in range(300)]
    loss += [1.0 * math.exp(0.01 * g.standard_normal()) for _ in range(200)]
    syms = [s for s in symptoms_of(Quantities(from_columns(range(500), {"loss": loss}))) if s.kind == "jump_stayed"]
    assert syms and abs(syms[0].step - 300) <= 2, [(s.kind, s.step, s.data) for s in syms]


def test_a_rise_over_four_noisy_batches_is_no_jump_by_their_mad_alone():
    """MONAI's per-batch segmentation loss, 0.116, 0.122, 0.108, 0.212, then 0.338: 11 sigmas of its
    four by their MAD, but not twice their largest, and the step into it (x1.6) is like the log's
    other steps: no jump. The same four points before a x3 jump over their largest still jump."""
    noisy = [0.1162, 0.1221, 0.1084, 0.2122, 0.3382, 0.3024, 0.1587, 0.2373]
    run = from_columns(range(1, 9), {"loss": noisy})
    assert not [s for s in symptoms_of(Quantities(run)) if s.kind in ("spike", "jump_stayed")]
    jumped = noisy[:4] + [0.64, 0.66, 0.63, 0.65]
    syms = [s for s in symptoms_of(Quantities(from_columns(range(1, 9), {"loss": jumped})))]
    assert [(s.kind, s.step) for s in syms if s.kind in ("spike", "jump_stayed")] == [("jump_stayed", 5)]


def test_a_step_up_after_the_first_point_that_holds_beyond_its_noise_is_a_jump():
    """GoogLeNet's pass 1: 3.836 at batch 72, then 6.540, 6.484 ... 6.369 within 1%: x1.7 over the first
    point, under every jump bar for one point before it, but 50 of the later points' own noise
    sigmas: the loss stepped up and stayed. The same shape in noisy batches (0.169, then 0.49-0.84)
    and a tail stuck to the last digit (deepboost's 0.5s: a stuck loss) are not this step."""
    steady = [3.83627, 6.53986, 6.48425, 6.45244, 6.45208, 6.40190, 6.41929, 6.36903]
    syms = symptoms_of(Quantities(from_columns(range(1, 9), {"loss": steady})))
    assert [(s.kind, s.step) for s in syms if s.kind == "jump_stayed"] == [("jump_stayed", 2)]
    noisy = [0.1689, 0.4874, 0.8373, 0.5244, 0.5639, 0.5341]
    stuck = [0.321375] + [0.5] * 9
    for loss in (noisy, stuck):
        run = from_columns(range(1, len(loss) + 1), {"loss": loss})
        assert "jump_stayed" not in _kinds(run), loss


def _keras_epochs(train, val, lr=None):
    rows = []
    for e, (t, v) in enumerate(zip(train, val), 1):
        extra = f" - learning_rate: {lr[e - 1]:.4e}" if lr else ""
        rows.append(
            f"Epoch {e}/{len(train)}\n1539/1539 [==============================] - 3s - loss: {t:.4f} - val_loss: {v:.4f}{extra}\n"
        )
    return "".join(rows)


def test_an_evaluation_loss_frozen_to_the_digit_while_training_moves_is_a_plateau(tmp_path):
    """facenet's triplet net: val_loss 0.2000 (its margin) at every epoch while the training loss goes
    0.1927 -> 0.1775: the outputs on held-out data no longer change. Not when the value is a repeated
    display of the last validation (NeMo's `val_loss: 4.106` on each iteration line), nor when the LR
    was cut to a hundredth of its peak (ReduceLROnPlateau's tail)."""
    train = [0.1927, 0.1902, 0.1872, 0.1844, 0.1820, 0.1794, 0.1777, 0.1775]
    p = tmp_path / "train.log"
    p.write_text(_keras_epochs(train, [0.2] * 8))
    run = load_path(p)[0]
    syms = [(s.kind, s.data["level"], s.data["n"]) for s in symptoms_of(Quantities(run)) if s.kind == "eval_constant"]
    assert syms == [("eval_constant", 0.2, 8)]
    f = next(f for f in diagnose_runs([run]).findings if f.severity == "warning")
    assert f.symptom == "plateau" and _keys(f)[0] == "diff.what.eval_constant" and f.cause != "frozen_model"
    settled = [0.30, 0.25, 0.21] + [0.2] * 5
    p.write_text(_keras_epochs(train, settled, lr=[1e-3, 1e-3, 1e-3, 1e-5, 1e-6, 5e-7, 2.4e-7, 2.4e-7]))
    assert "eval_constant" not in _kinds(load_path(p)[0])
    line = "Training epoch 0, iteration {i}/149 | lr: 3e-05 | global_step: {i} | reduced_train_loss: {t} | val_loss: 4.106\n"
    p.write_text("".join(line.format(i=120 + k, t=t) for k, t in enumerate([1.233, 1.288, 1.333, 1.245, 1.375, 1.34])))
    assert "eval_constant" not in _kinds(load_path(p)[0])


def test_a_frozen_evaluation_loss_while_a_scheduler_cuts_the_lr_is_its_tail(tmp_path):
    """Keras's ReduceLROnPlateau halving the LR 7.8e-6 -> 2.4e-7 while val_loss sits at 0.1523: the
    scheduler reacting to a converged run, not outputs that stopped responding."""
    train = [0.1555, 0.1567, 0.1554, 0.1549, 0.1551, 0.1548, 0.1552, 0.1550]
    p = tmp_path / "train.log"
    lr = [3.125e-05, 1.5625e-05, 7.8125e-06, 3.9063e-06, 1.9531e-06, 9.7656e-07, 4.8828e-07, 2.4414e-07]
    p.write_text(_keras_epochs(train, [0.1525, 0.1524] + [0.1523] * 6, lr=lr))
    assert "eval_constant" not in _kinds(load_path(p)[0])


def test_an_lr_printed_as_zero_in_an_excerpt_from_epoch_4_is_no_schedule_error(tmp_path):
    """ALBEF/TCL's log.txt rows at their epoch, `"train_lr": "0.000"` (three decimals of a small LR) from
    epoch 4 on, the summed loss falling 3.38 -> 3.26: an excerpt from past the run's start, not a
    schedule that never started."""
    row = '{{"train_lr": "0.000", "train_loss_mlm": "{a}", "train_loss_ita": "{b}", "train_loss_itm": "0.28", "epoch": {e}}}\n'
    parts = [(1.236, 1.857), (1.214, 1.825), (1.193, 1.797), (1.181, 1.779)]
    p = tmp_path / "log.jsonl"
    p.write_text("".join(row.format(a=a, b=b, e=e) for e, (a, b) in enumerate(parts, 4)))
    run = load_path(p)[0]
    assert run.meta["steps_from"] == "epoch"
    assert not [f for f in diagnose_runs([run]).findings if f.cause == "lr_schedule_error"]


@pytest.mark.parametrize("acc,clamp", [(0.7247, 16.1181), (0.9, 100.0)])
def test_a_constant_loss_at_the_other_class_share_of_a_bce_clamp_is_a_wrong_loss(acc, clamp):
    """Keras's `loss: 4.4380 - acc: 0.7247` every epoch: 4.4380 = 0.2753 x 16.1181 (-ln 1e-7), every
    output at exactly 1 (a softmax over one unit); torch's BCELoss clamps at 100 the same way."""
    level = round((1 - acc) * clamp, 4)
    r = _diagnose(range(1, 14), {"loss": [level] * 13, "accuracy": [acc] * 13})
    f = next(f for f in _alarms(r))
    assert f.cause == "wrong_loss" and "diff.ev.clamped_share" in _keys(f), _show(r)


def test_a_constant_loss_beside_an_accuracy_that_does_not_make_the_identity_is_no_wrong_loss():
    """The same constant 4.4380 beside accuracy 0.70 (0.30 x 16.1181 = 4.835): no clamp identity, so no
    wrong_loss from it (the constant loss is still a stall, ranked as before)."""
    r = _diagnose(range(1, 14), {"loss": [4.438] * 13, "accuracy": [0.70] * 13})
    assert all(f.cause != "wrong_loss" and "diff.ev.clamped_share" not in _keys(f) for f in r.findings), _show(r)


def _bce_bar(saturate: bool, batches: int = 8):
    """A Keras-style bar's rows (running mean loss, running mean accuracy after each batch) of a real
    binary classifier; `saturate`: a ReLU output clipped to [1e-7, 1 - 1e-7] as Keras clips it before
    its cross-entropy (large logits: every output at a clip), else a sigmoid with sane logits."""
    torch.manual_seed(0)
    model = nn.Linear(8, 1)
    rows, total, right, seen = [], 0.0, 0.0, 0
    for _ in range(batches):
        x = torch.randn(64, 8)
        y = ((x[:, 0] + 0.5 * torch.randn(64)) > 0).float()
        z = model(x).squeeze(-1)
        p = torch.clamp(F.relu(z * 1e3), 1e-7, 1 - 1e-7) if saturate else torch.sigmoid(z)
        loss = F.binary_cross_entropy(p, y)
        total, right, seen = total + float(loss) * 64, right + float(((p > 0.5).float() == y).sum()), seen + 64
        rows.append((total / seen, right / seen))
    return rows


def test_a_loss_that_is_each_rows_error_rate_times_the_clamp_is_saturated_outputs(tmp_path):
    """Saturated outputs pay the clip (15.9424 or 16.1181) on every wrong sample and nothing on the right
    ones: each printed loss is (1 - accuracy) x about 16 while both move over the bar's batches. A plateau
    of wrong_loss first; the same classifier with sane sigmoid outputs gets no such symptom."""
    rows = _bce_bar(saturate=True)
    # each wrong sample costs -ln 2^-23 = 15.9424 (a 1 for a 0: float32's 1 - 1e-7) or -ln 1e-7 = 16.1181
    assert len({round(a, 4) for _, a in rows}) > 2 and all(15.94 <= v / (1 - a) <= 16.12 for v, a in rows)
    line = "{k}/8 [==============================] - loss: {v:.4f} - accuracy: {a:.4f}\n"
    p = tmp_path / "train.log"
    p.write_text("".join(line.format(k=k + 1, v=v, a=a) for k, (v, a) in enumerate(rows)))
    (run,) = load_path(p)
    assert "saturated" in [s.kind for s in symptoms_of(Quantities(run))]
    first = [f for f in diagnose_runs([run]).findings if f.severity in ("warning", "critical")][0]
    assert first.cause == "wrong_loss" and first.symptom == "plateau"
    sane = tmp_path / "sane.log"
    sane.write_text("".join(line.format(k=k + 1, v=v, a=a) for k, (v, a) in enumerate(_bce_bar(saturate=False))))
    (run,) = load_path(sane)
    assert "saturated" not in [s.kind for s in symptoms_of(Quantities(run))]
