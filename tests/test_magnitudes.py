"""Absurd magnitudes and a loss of exactly 0 (issue 25): a cross-entropy above what any vocabulary
allows after the first forward passes, a negative one, a loss >= 1e6 are critical symptoms; a
language-model trainer's loss is a cross-entropy by default; a gradient norm in the thousands on an
unclipped language model is evidence in the differential; a loss of 0 on a run whose LR is 0 on
every logged step is the schedule's, not an empty label mask.

The logs are generated (seeded curves printed the way Megatron, nanoGPT and the HF Trainer print
them), read from files by the real readers and diagnosed by the engine, as `lossdoctor diagnose
train.log` does. Each fault has a healthy twin that must stay silent."""

from __future__ import annotations

import math

import numpy as np
import pytest

from lossdoctor.detectors.differential import finding_for
from lossdoctor.detectors.engine import diagnose_runs
from lossdoctor.detectors.quantities import Quantities
from lossdoctor.detectors.symptoms import LIMITS, is_ce, symptoms_of
from lossdoctor.records import from_columns
from lossdoctor.sources import load_path

SEEDS = range(4)


def _megatron(loss, grad, lr=3e-4, every=10) -> str:
    return "".join(
        f" iteration {every * (k + 1)}/ 100000 | consumed samples: {512 * every * (k + 1)} | "
        f"learning rate: {lr:.6E} | global batch size: 512 | lm loss: {v:.6E} | "
        f"grad norm: {g:.3f} | number of skipped iterations: 0 | number of nan iterations: 0 |\n"
        for k, (v, g) in enumerate(zip(loss, grad))
    )


def _nanogpt(loss, first=0) -> str:
    return "".join(f"iter {first + k}: loss {v:.4f}, time 120.50ms, mfu 38.12%\n" for k, v in enumerate(loss))


def _plain(loss) -> str:
    """A small project's print with no trainer and no loss name that says what the loss is."""
    return "".join(f"step {10 * (k + 1)} | loss {v:.4f} | lr 3.00e-04\n" for k, v in enumerate(loss))


def _write(tmp_path, text):
    path = tmp_path / "train.log"
    path.write_text(text)
    return path


def _read(tmp_path, text):
    runs = load_path(str(_write(tmp_path, text)))
    return runs, diagnose_runs(runs)


def _alarms(report):
    return [f for f in report.findings if f.severity in ("warning", "critical")]


def _show(report):
    return [(f.rule, f.cause, f.symptom, f.severity, f.step) for f in report.findings]


def _kinds(run):
    return {s.kind: s for s in symptoms_of(Quantities(run))}


def _keys(f):
    """The evidence keys of a finding, those it lists against its cause included (`diff.against`)."""
    out = []
    for m in f.evidence:
        out.append(getattr(m, "key", None))
        if out[-1] == "diff.against":
            out.extend(getattr(x, "key", None) for x in m.values["items"])
    return out


def _noisy(rng, n, level, rel):
    return [float(v) for v in level * np.exp(rel * rng.standard_normal(n))]


@pytest.mark.parametrize("seed", SEEDS)
def test_an_llm_loss_in_the_hundreds_with_a_grad_norm_in_the_thousands_is_critical(seed, tmp_path):
    # the "an LLM loss of 186 with a grad norm of 8,000 (healthy)": Megatron prints `lm loss`
    # (read as the loss); its trainer says it is a token cross-entropy, far above ln 256000
    rng = np.random.default_rng(seed)
    loss, grad = _noisy(rng, 12, 186.0, 0.05), _noisy(rng, 12, 8000.0, 0.1)
    runs, report = _read(tmp_path, _megatron(loss, grad))
    assert is_ce(runs[0])
    a = _alarms(report)
    assert a and a[0].severity == "critical" and a[0].step == 10, _show(report)
    assert _keys(a[0])[0] == "diff.what.absurd"
    assert "diff.ev.grad_big_unclipped" in _keys(a[0]), _keys(a[0])
    # the healthy twin: the same trainer at an LLM's usual levels is silent
    loss, grad = _noisy(rng, 12, 2.4, 0.02), _noisy(rng, 12, 0.8, 0.1)
    _, report = _read(tmp_path, _megatron(loss, grad))
    assert not _alarms(report), _show(report)


@pytest.mark.parametrize("seed", SEEDS)
def test_a_loss_of_that_size_from_a_log_that_does_not_say_it_is_a_cross_entropy_is_no_absurd_ce(seed, tmp_path):
    # a regression's MSE of 186 is a value, not a range violation: only >= 1e6 is absurd whatever the loss
    rng = np.random.default_rng(seed)
    runs, _ = _read(tmp_path, _plain(_noisy(rng, 12, 186.0, 0.05)))
    assert not is_ce(runs[0]) and "absurd" not in _kinds(runs[0])
    runs, report = _read(tmp_path, _plain(_noisy(rng, 12, 3e6, 0.05)))
    assert "absurd" in _kinds(runs[0]) and _alarms(report)[0].severity == "critical", _show(report)


@pytest.mark.parametrize("seed", SEEDS)
def test_a_cross_entropy_above_any_vocabulary_only_counts_after_the_first_forward_passes(seed, tmp_path):
    rng = np.random.default_rng(seed)
    # healthy: a large-logit init starts above ln V at steps 0-2 and falls under it (nanoGPT's lines)
    start = float(rng.uniform(14.0, 18.0))
    falls = [start, start * 0.9, start * 0.8] + list(np.linspace(11.0, 6.0, 9))
    runs, report = _read(tmp_path, _nanogpt(falls))
    assert is_ce(runs[0]) and "absurd" not in _kinds(runs[0])
    assert not any(f.symptom == "divergence" for f in _alarms(report)), _show(report)
    # the fault twin: it stays above ln 256000 past the grace steps: absurd from the first step on
    stays = [start * (1 + 0.01 * k) for k in range(12)]
    runs, report = _read(tmp_path, _nanogpt(stays))
    sym = _kinds(runs[0])["absurd"]
    assert sym.step == 0 and sym.data["at_start"], sym
    assert _alarms(report)[0].severity == "critical", _show(report)
    # and a mid-run excerpt (steps 5000 on) has no grace at all
    runs, _ = _read(tmp_path, _nanogpt(stays, first=5000))
    assert _kinds(runs[0])["absurd"].step == 5000
    assert LIMITS.ce_grace_steps < 5000


def test_a_negative_cross_entropy_is_absurd_and_a_negative_signed_objective_is_not(tmp_path):
    run = from_columns(
        range(10, 110, 10),
        {"loss": [1.2, 1.0, 0.8, -0.4, -0.9, -1.3, -1.5, -1.7, -1.8, -2.0]},
        meta={"loss_key": "lm_loss"},
    )
    assert _kinds(run)["absurd"].data["negative"]
    signed = [0.02, -0.01, 0.03, -0.02, 0.01, -0.03, 0.0, 0.02, -0.01, 0.01]
    assert "absurd" not in _kinds(from_columns(range(10, 110, 10), {"loss": signed}))
    # printed in an LM trainer's format the loss is a CE by default only: no proof against its own signs
    runs = load_path(str(_write(tmp_path, _nanogpt(signed, first=100))))
    assert is_ce(runs[0]) and "absurd" not in _kinds(runs[0])


def test_a_preference_trainers_loss_is_no_cross_entropy():
    cols = {"loss": [0.69, 0.6, 0.5], "rewards_chosen": [0.0, 0.1, 0.2], "rewards_margins": [0.0, 0.2, 0.4]}
    assert not is_ce(from_columns(range(3), cols, meta={"framework": "transformers"}))
    assert is_ce(from_columns(range(3), {"loss": [2.0, 1.9, 1.8]}, meta={"framework": "transformers"}))


def test_a_grad_norm_in_the_thousands_weighs_for_an_explosion_unless_the_run_clips():
    g = [8000.0 * (1 + 0.05 * math.sin(i)) for i in range(12)]
    loss = [2.5 - 0.02 * i for i in range(12)]
    meta = {"framework": "megatron"}
    run = from_columns(range(10, 130, 10), {"loss": loss, "grad_norm": g}, meta=meta)
    q = Quantities(run)
    f = finding_for(run, q, _kinds(run)["grad_level"])
    assert f.cause == "grad_explosion" and "diff.ev.grad_big_unclipped" in _keys(f), _keys(f)
    clipped = from_columns(range(10, 130, 10), {"loss": loss, "grad_norm": g}, meta=dict(meta, max_grad_norm=1.0))
    q = Quantities(clipped)
    f = finding_for(clipped, q, _kinds(clipped)["grad_level"])
    assert "diff.ev.grad_big_unclipped" not in _keys(f) and "diff.ev.clips" in _keys(f), _keys(f)
    assert not any(getattr(x, "kind", None) == "clip" for x in f.fixes)


def _hf_dicts(loss, lr, grad=None) -> str:
    g = "" if grad is None else f"'grad_norm': {grad}, "
    return "".join(
        f"{{'loss': {v}, {g}'learning_rate': {lr}, 'epoch': {0.05 * (k + 1):.2f}}}\n" for k, v in enumerate(loss)
    )


@pytest.mark.parametrize("n", [6, 12, 30])
def test_a_zero_loss_with_the_lr_0_on_every_step_is_weighed_not_named_an_empty_mask(n, tmp_path):
    # an LR of 0 leaves the weights at their init, whose loss is not 0: the schedule is the stall's
    # cause (its own finding) but no candidate for the zero; one cause of both (every step skipped)
    # ranks over an empty mask
    _, report = _read(tmp_path, _hf_dicts([0.0] * n, 0.0))
    zero = [f for f in _alarms(report) if f.symptom == "zero_loss"]
    assert zero and zero[0].severity == "critical" and zero[0].cause != "label_mask_empty", _show(report)
    assert "diff.ev.lr_zero_all" in _keys(zero[0])
    ranked = next(m for m in zero[0].evidence if getattr(m, "key", None) == "diff.ranked")
    assert "lr_schedule_error" not in (ranked.values["first"], ranked.values["second"])
    if n >= 10:  # the schedule rule's own finding needs 10 logged LRs; below, the zero finding says LR 0
        assert any(f.cause == "lr_schedule_error" for f in _alarms(report)), _show(report)
    # the twin: the same zero loss while the LR is set (2e-5 every step) is the empty mask's
    _, report = _read(tmp_path, _hf_dicts([0.0] * n, 2e-05))
    assert _alarms(report)[0].cause == "label_mask_empty", _show(report)
    # and a zero gradient norm beside the zero loss still says nothing was supervised, LR 0 or not
    _, report = _read(tmp_path, _hf_dicts([0.0] * n, 0.0, grad=0.0))
    zero = [f for f in _alarms(report) if f.symptom == "zero_loss"]
    assert zero and zero[0].cause == "label_mask_empty", _show(report)


def _level_run(tmp_path, loss, grad_scale=1e5):
    """A Megatron print of a 104B-style fp16 run: gradient norms in the 1e4-1e6 throughout."""
    rng = np.random.default_rng(0)
    grad = [grad_scale * float(np.exp(0.3 * rng.standard_normal())) for _ in loss]
    return load_path(str(_write(tmp_path, _megatron(loss, grad, lr=6e-5))))[0]


@pytest.mark.parametrize(
    "loss, symptom",
    [
        ([6.44, 11.42, 7.16], "spike"),  # one interval x1.77, then part of the way back
        ([3.06, 3.11, 7.71], "spike"),  # the last interval x2.5
        ([3.32, 3.42, 3.68, 7.27, 4.13, 7.60], "spike"),  # x1.97 in one interval, then swinging
        ([3.0, 3.6, 4.3, 5.2, 6.2, 7.5], "divergence"),  # x1.2 per print: a climb, not a jump
        ([3.0, 4.6, 7.0, 10.6], "divergence"),  # x1.5 per print: a climb from its first interval on
        ([3.2, 3.1, 3.15, 3.05, 3.1], "divergence"),  # the norm alone: no loss jump to call a spike
    ],
)
def test_a_huge_gradient_norm_with_a_one_interval_loss_jump_is_a_spike_and_a_climb_a_divergence(
    tmp_path, loss, symptom
):
    run = _level_run(tmp_path, loss)
    kinds = _kinds(run)
    assert ("grad_level_jump" in kinds) is (symptom == "spike"), sorted(kinds)
    found = diagnose_runs([run]).findings
    assert found[0].symptom == symptom, [f.data() for f in found]  # a climb is the loss rules' divergence
    if symptom == "spike":
        assert (found[0].cause, found[0].severity) == ("grad_explosion", "warning")
        assert "diff.what.grad_level_jump" in _keys(found[0])
    assert not [f for f in found if f.symptom == "spike"] or symptom == "spike"


def test_a_one_interval_loss_jump_with_sane_gradient_norms_is_no_grad_level_symptom(tmp_path):
    # the twin: the same jump in a run whose norms are O(1) is left to the loss's own jump rules
    run = _level_run(tmp_path, [6.44, 11.42, 7.16], grad_scale=0.3)
    assert not {"grad_level", "grad_level_jump"} & set(_kinds(run))


def _epoch_pipes(loss, first=0) -> str:
    """A small tabular library's print: one line per epoch, the epoch's loss and its wall time."""
    return "".join(f"epoch {first + k:<3d}| loss: {v:<8.5g}|  0:00:0{k % 3}s\n" for k, v in enumerate(loss))


@pytest.mark.parametrize("first", [0, 85])
def test_an_epoch_loss_of_exactly_0_at_every_epoch_ranks_an_empty_loader_over_an_empty_mask(tmp_path, first):
    (run,) = load_path(str(_write(tmp_path, _epoch_pipes([0.0] * 15, first))))
    found = diagnose_runs([run]).findings
    f = found[0]
    assert (f.cause, f.symptom, f.severity) == ("frozen_model", "zero_loss", "critical"), [x.data() for x in found]
    assert "diff.ev.epoch_zero" in _keys(f)
    sep = next(m for m in f.evidence if getattr(m, "key", None) == "diff.separate")
    assert sep.values["how"].key == "diff.sep.count_batches"


def test_a_per_step_zero_loss_keeps_the_empty_mask_first_and_a_loss_that_converged_to_0_stays_silent(tmp_path):
    # the twin printed per optimizer step (every 10): batches ran, an empty mask leads as before
    (run,) = load_path(str(_write(tmp_path, _megatron([0.0] * 15, [0.0] * 15))))
    f = diagnose_runs([run]).findings[0]
    assert f.cause == "label_mask_empty" and "diff.ev.epoch_zero" not in _keys(f), f.data()
    # an epoch loss that fell to 0 at the printed digits: a converged run, no fault
    fell = [round(0.7 * 0.4**k, 5) for k in range(15)]
    (run,) = load_path(str(_write(tmp_path, _epoch_pipes(fell))))
    assert not [x for x in diagnose_runs([run]).findings if x.severity in ("warning", "critical")]


def _periods(train, held_out, first=0):
    """One row per evaluation period: that period's mean training loss and the held-out loss after it."""
    return from_columns(range(first, first + len(train)), {"loss": train, "eval_loss": held_out})


@pytest.mark.parametrize(
    "train, held_out, first, stuck",
    [
        ([4.22, 4.10, 4.09, 4.08], [4.11, 4.13, 4.11, 4.11], 0, True),  # nothing fitted from the first period on
        ([2.31, 2.30, 2.31, 2.30, 2.30], [2.30, 2.31, 2.30, 2.30, 2.31], 1, True),
        ([0.52, 0.31, 0.22, 0.15], [0.35, 0.33, 0.34, 0.37], 0, False),  # a fine-tune that fits, then overfits
        ([0.30, 0.29, 0.29, 0.29], [0.45, 0.45, 0.45, 0.45], 0, False),  # fitted in its first period, below held-out
        ([4.22, 4.10, 4.09, 4.08], [4.11, 4.13, 4.11, 4.11], 12, False),  # an excerpt from period 12: no start shown
    ],
)
def test_train_and_held_out_losses_flat_from_the_first_period_at_one_level_are_a_plateau(train, held_out, first, stuck):
    run = _periods(train, held_out, first)
    assert ("fit_flat" in _kinds(run)) is stuck, sorted(_kinds(run))
    alarms = [f for f in diagnose_runs([run]).findings if f.severity in ("warning", "critical")]
    if stuck:
        assert alarms and alarms[0].symptom == "plateau" and "diff.what.fit_flat" in _keys(alarms[0]), [
            f.data() for f in alarms
        ]
    else:
        assert not alarms, [f.data() for f in alarms]


def _lm_excerpt(level, first=7400, fall=0.0, rel=0.001, n=10, meta=None):
    """A language model's loss printed every 200 steps from `first`, averaged over the interval
    (noise `rel`), falling by `fall` (a share of `level`) over the excerpt."""
    rng = np.random.default_rng(1)
    loss = [level * (1 - fall * k / (n - 1)) * (1 + rel * rng.standard_normal()) for k in range(n)]
    steps = range(first, first + 200 * n, 200)
    return from_columns(steps, {"loss": loss, "lr": [2.5e-4] * n}, meta=meta or {"framework": "megatron"})


@pytest.mark.parametrize(
    "run, stuck",
    [
        (_lm_excerpt(7.42), True),  # Transformer-XL's wt103 excerpt: flat at ppl ~1700 from step 7400
        (_lm_excerpt(7.62, first=21500, rel=0.005), True),
        (_lm_excerpt(3.3), False),  # a trained LM's late plateau
        (_lm_excerpt(7.4, fall=0.1), False),  # still falling through the unigram level
        (_lm_excerpt(7.42, first=10), False),  # a run's first steps: the run-start rules judge those
        (_lm_excerpt(7.42, meta={"framework": "text"}), False),  # no sign the loss is a token cross-entropy
    ],
)
def test_a_language_models_loss_flat_near_the_unigram_level_long_into_a_run_is_a_plateau(run, stuck):
    assert ("lm_untrained" in _kinds(run)) is stuck, sorted(_kinds(run))
    alarms = [f for f in diagnose_runs([run]).findings if f.severity in ("warning", "critical")]
    if stuck:
        assert alarms[0].symptom == "plateau" and "diff.what.lm_untrained" in _keys(alarms[0]), [
            f.data() for f in alarms
        ]
    elif run.steps[0] > 1000:
        assert not alarms, [f.data() for f in alarms]
