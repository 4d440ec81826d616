"""Rules added while tuning on the generated variants' dev split (benchmarks/zoo/generated.py),
each on a log written by a real torch loop and on a short or hand-written one, fault and healthy.

- a run that trained and goes non-finite with no sign before it: the batch of that step;
- gradients that add up step after step while the loss stands still: nothing is stepped;
- a flat loss whose fall is inside the batch noise, and a flat loss at an SGD step of ~nothing;
- an LR decayed to nothing before 90% of the run, even when the loss had settled;
- a spike of 1.5-2x that gives back all the progress, and no "spike" in a run that never trained.
"""

from __future__ import annotations

import copy
import csv
import math

import torch
from torch import nn
from torch.nn import functional as F

from lossdoctor import diagnose
from msgs import has, keys
from test_scalar_reasoning import _alarms, _guarded_loop, _write  # the same CSV writer and alarm filter


def _show(report):
    return [(f.cause, f.severity, f.step, f.evidence[:2]) for f in report.findings]


def _loop(
    path,
    *,
    steps,
    opt="adam",
    lr=1e-3,
    sched=None,
    nan_at=None,
    stale=False,
    task="blobs",
    noise=1.0,
    batch=32,
    x_scale=1.0,
    seed=0,
):
    """A real training loop (an MLP on Gaussian blobs, or on a noisy regression) logging step, loss,
    grad_norm (before any clipping) and lr, one row per step, as a user's own logger would.

    `nan_at`: one input value of that step's batch is NaN. `stale`: the optimizer holds a copy of
    the model (built before a reload), so the trained model is never stepped."""
    torch.manual_seed(seed)
    g = torch.Generator().manual_seed(seed)
    d_in, k = 16, 10
    centers = torch.randn(k, d_in, generator=g) * 2
    w_true = torch.randn(d_in, 1, generator=g)
    model = nn.Sequential(nn.Linear(d_in, 64), nn.ReLU(), nn.Linear(64, k if task == "blobs" else 1))
    held = copy.deepcopy(model) if stale else model
    o = (
        torch.optim.SGD(held.parameters(), lr=lr, momentum=0.9)
        if opt == "sgd"
        else torch.optim.Adam(held.parameters(), lr=lr)
    )
    s = sched(o) if sched else None
    rows = []
    for step in range(steps):
        if task == "blobs":
            y = torch.randint(0, k, (batch,), generator=g)
            x = centers[y] + torch.randn(batch, d_in, generator=g)
        else:
            x = torch.randn(batch, d_in, generator=g)
            y = torch.tanh(x @ w_true) + noise * torch.randn(batch, 1, generator=g)
        x = x * x_scale
        if step == nan_at:
            x[3, 5] = float("nan")
        out = model(x)
        loss = F.cross_entropy(out, y) if task == "blobs" else F.mse_loss(out, y)
        o.zero_grad()
        loss.backward()
        gn = torch.nn.utils.clip_grad_norm_(model.parameters(), 1e12)
        o.step()
        rows.append((step, loss.item(), gn.item(), o.param_groups[0]["lr"]))
        if s is not None:
            s.step()
    return _write(path, rows)


# --- non-finite with no sign before it -------------------------------------------------------------


def test_nan_after_healthy_training_with_no_sign_is_the_batch(tmp_path):
    r = diagnose(_loop(tmp_path / "log.csv", steps=90, nan_at=60))
    f = r.findings[0]
    assert (f.cause, f.step, f.severity) == ("nonfinite_data", 60, "critical"), _show(r)
    assert has(f.evidence, "scalars.sudden_nan.what", step=60, n=60), keys(f.evidence)
    assert has(f.evidence, "scalars.sudden_nan.differential")  # the batch first of three causes
    assert (f.fixes[0].key, f.fixes[0].values["step"]) == ("scalars.sudden_nan.fix_batch", 60)
    assert 0.4 <= f.confidence <= 0.55  # the likeliest of three, said as such


def test_nan_after_a_converged_run_with_noisy_tiny_grad_norms_is_still_the_batch(tmp_path):
    # a converged model's gradient norms jump x10 from batch to batch near 1e-6: not a build-up
    rows = [
        (i, 2.0 * math.exp(-i / 5) + 1e-7, 1.0 * math.exp(-i / 5) * (10 if i % 7 == 0 else 1), 0.05) for i in range(40)
    ]
    rows.append((40, float("nan"), float("nan"), 0.05))
    r = diagnose(_write(tmp_path / "log.csv", rows))
    assert (r.findings[0].cause, r.findings[0].step) == ("nonfinite_data", 40), _show(r)


def test_nan_after_a_diverging_loss_is_not_called_the_batch(tmp_path):
    # SGD far too fast: the loss and grad norm climb for steps before the NaN
    r = diagnose(_loop(tmp_path / "log.csv", steps=60, opt="sgd", lr=3.0, task="regression"))
    assert r.status == "critical", _show(r)
    assert r.findings[0].cause != "nonfinite_data" or not has(r.findings[0].evidence, "scalars.sudden_nan.what"), _show(
        r
    )


def test_short_log_nan_with_a_zero_grad_norm_stays_an_empty_label_mask(tmp_path):
    rows = [(i, 3.0 - 0.03 * i, 0.8, 1e-3) for i in range(25)] + [(25, float("nan"), 0.0, 1e-3)]
    r = diagnose(_write(tmp_path / "log.csv", rows))
    assert r.findings[0].cause == "label_mask_empty", _show(r)
    assert not any(has(f.evidence, "scalars.sudden_nan.what") for f in r.findings)


def test_short_log_nan_after_few_steps_is_not_judged_sudden(tmp_path):
    rows = [(i, 3.0 - 0.05 * i, 0.8, 1e-3) for i in range(10)] + [(10, float("nan"), float("nan"), 1e-3)]
    r = diagnose(_write(tmp_path / "log.csv", rows))
    assert r.status == "critical"  # the safety net still names it
    assert not any(has(f.evidence, "scalars.sudden_nan.what") for f in r.findings), _show(r)


# --- gradients that add up -------------------------------------------------------------------------


def test_optimizer_on_a_stale_copy_gradients_add_up_is_frozen_model(tmp_path):
    r = diagnose(_loop(tmp_path / "log.csv", steps=120, stale=True, task="regression", noise=0.3))
    f = _alarms(r)[0]
    assert f.cause == "frozen_model", _show(r)
    assert has(f.evidence, "scalars.accumulating.what") and has(f.evidence, "scalars.accumulating.loss"), keys(
        f.evidence
    )
    assert f.fixes[0].key == "scalars.accumulating.fix_optimizer"  # build it from the model that is trained


def test_healthy_loops_have_no_accumulating_gradients(tmp_path):
    for i, kw in enumerate(
        [dict(task="regression", noise=0.3), dict(task="blobs"), dict(opt="sgd", lr=0.02, task="blobs", batch=4)]
    ):
        r = diagnose(_loop(tmp_path / f"log{i}.csv", steps=150, **kw))
        assert not any(f.cause == "frozen_model" for f in r.findings), (kw, _show(r))
        assert r.status == "healthy", (kw, _show(r))


def test_short_log_of_growing_gradients_is_not_judged(tmp_path):
    rows = [(i, 0.5 + 0.01 * math.sin(i), 1.0 + i, 1e-3) for i in range(20)]
    r = diagnose(_write(tmp_path / "log.csv", rows))
    assert not any(has(f.evidence, "scalars.accumulating.what") for f in r.findings), _show(r)


# --- flat within the noise, tiny SGD steps ---------------------------------------------------------


def test_flat_noisy_regression_at_a_tiny_lr_is_lr_too_low(tmp_path):
    # batch 8, noise 1.0: the thirds' medians differ by a few % by chance; that is not a fall
    r = diagnose(_loop(tmp_path / "log.csv", steps=150, lr=1e-6, task="regression", noise=1.0, batch=8))
    f = _alarms(r)[0]
    assert f.cause == "lr_too_low", _show(r)


def test_flat_loss_at_a_tiny_sgd_step_is_lr_too_low(tmp_path):
    # inputs scaled down (x0.1): a gradient norm ~0.7, so LR x norm ~1e-5 at LR 1.5e-5
    r = diagnose(_loop(tmp_path / "log.csv", steps=150, opt="sgd", lr=1.5e-5, x_scale=0.1))
    f = _alarms(r)[0]
    assert f.cause == "lr_too_low", _show(r)
    assert has(f.evidence, "scalars.flat.tiny_step", lr=1.5e-5), keys(f.evidence)
    assert f.fixes[0].key.startswith("scalars.flat.fix_raise"), keys(f.fixes)  # raise the learning rate


def test_ordinary_sgd_on_a_noisy_task_is_not_a_tiny_step(tmp_path):
    r = diagnose(_loop(tmp_path / "log.csv", steps=150, opt="sgd", lr=0.02, task="regression", noise=1.0, batch=8))
    assert not any(f.cause == "lr_too_low" for f in r.findings), _show(r)


def test_short_hand_written_log_flat_at_a_tiny_sgd_step(tmp_path):
    rows = [(i, 1.386 + 0.004 * math.sin(i * 2.3), 0.9 + 0.05 * math.cos(i), 1.2e-5) for i in range(40)]
    r = diagnose(_write(tmp_path / "log.csv", rows))
    assert _alarms(r)[0].cause == "lr_too_low", _show(r)
    # the same curve at an ordinary LR is not the LR's fault
    rows = [(i, 1.386 + 0.004 * math.sin(i * 2.3), 0.9 + 0.05 * math.cos(i), 1e-2) for i in range(40)]
    r = diagnose(_write(tmp_path / "log2.csv", rows))
    assert not any(f.cause == "lr_too_low" for f in r.findings), _show(r)


# --- an LR gone before the end ---------------------------------------------------------------------


def test_step_lr_stepped_per_batch_is_the_schedule_even_late_in_the_run(tmp_path):
    # StepLR(step_size=20, gamma=0.1) stepped per batch: below 1e-4 of the peak at step 100 of 160
    r = diagnose(
        _loop(
            tmp_path / "log.csv",
            steps=160,
            opt="sgd",
            lr=0.02,
            task="regression",
            noise=0.5,
            sched=lambda o: torch.optim.lr_scheduler.StepLR(o, step_size=20, gamma=0.1),
        )
    )
    f = _alarms(r)[0]
    assert (f.cause, f.symptom) == ("lr_schedule_error", "stall"), _show(r)
    assert f.step == 100


def test_cosine_to_zero_at_the_end_is_not_a_collapse(tmp_path):
    r = diagnose(
        _loop(
            tmp_path / "log.csv",
            steps=160,
            opt="sgd",
            lr=0.02,
            task="regression",
            noise=0.5,
            sched=lambda o: torch.optim.lr_scheduler.CosineAnnealingLR(o, T_max=159),
        )
    )
    assert r.status == "healthy", _show(r)


# --- spikes ----------------------------------------------------------------------------------------


def _lm_like(n=220, spike_at=None, spike=4.8, seed=0, floor=2.6):
    """A loss falling 4.3 -> `floor` with batch noise of a few %, as a small LM's does."""
    g = torch.Generator().manual_seed(seed)
    noise = torch.randn(n, generator=g) * 0.04
    rows = [(i, (floor + (4.3 - floor) * math.exp(-i / 40)) * math.exp(float(noise[i])), 0.7, 1.5e-3) for i in range(n)]
    if spike_at is not None:
        rows[spike_at] = (spike_at, spike, 1.1, 1.5e-3)
    return rows


def test_a_jump_under_2x_that_gives_back_all_progress_is_a_spike(tmp_path):
    r = diagnose(_write(tmp_path / "log.csv", _lm_like(spike_at=154)))
    f = _alarms(r)[0]
    assert (f.cause, f.step, f.severity) == ("loss_spike", 154, "warning"), _show(r)
    assert not [x for x in f.fixes if x.kind in ("lr", "lr_range")], keys(f.fixes)


def test_the_same_curve_without_the_batch_is_quiet(tmp_path):
    for seed in range(3):
        r = diagnose(_write(tmp_path / f"log{seed}.csv", _lm_like(seed=seed)))
        assert r.status == "healthy", _show(r)


def test_a_jump_that_gives_back_little_progress_is_not_a_spike(tmp_path):
    # x1.6 of a loss that fell 4.3 -> 1.0 gives back ~20% of the progress: not half, and below 2x
    r = diagnose(_write(tmp_path / "log.csv", _lm_like(spike_at=154, spike=1.6, floor=1.0)))
    assert not any(f.cause == "loss_spike" for f in r.findings), _show(r)


def test_no_spike_in_a_run_that_never_trained_below_its_first_loss(tmp_path):
    # AdamW at LR 0.48 (a generated variant's real run): the first update blew the loss up to 479,
    # then it sat at ~1.43, never below its first loss 1.49; a later 2x bump is not a spike
    # "after training well"
    rows = [(0, 1.49, 0.3, 0.48), (1, 479.0, 60.0, 0.48), (2, 40.0, 9.0, 0.48), (3, 3.0, 2.0, 0.48)]
    g = torch.Generator().manual_seed(0)
    rows += [(i, 1.43 * math.exp(0.01 * float(torch.randn(1, generator=g))), 0.25, 0.48) for i in range(4, 160)]
    rows[24] = (24, 2.85, 6.8, 0.48)
    r = diagnose(_write(tmp_path / "log.csv", rows))
    assert not any(f.cause == "loss_spike" for f in r.findings), _show(r)
    assert _alarms(r)[0].cause == "lr_too_high", _show(r)


# --- updates skipped again and again ---------------------------------------------------------------


def _guarded(path, *, bad_steps, guard=True, steps=60):
    """The scalar-reasoning tests' guarded loop with sqrt(0) added at each of `bad_steps`."""
    return _guarded_loop(path, guard=guard, steps=steps, bad_steps=bad_steps)


def test_recurring_skipped_updates_are_a_warning_not_a_nonfinite_run(tmp_path):
    r = diagnose(_guarded(tmp_path / "log.csv", bad_steps=(5, 20, 35, 50)))
    f = r.findings[0]
    assert (f.cause, f.symptom, f.severity) == ("loss_scale_collapse", "skipped_steps", "warning"), _show(r)
    assert r.status == "warning" and f.step == 5
    assert (f.evidence[0].key, f.evidence[0].values["k"], f.evidence[0].values["n"]) == ("scalars.skipped.what", 4, 60)
    assert f.evidence[1].key == "scalars.skipped.why"  # those updates were skipped
    assert not any(x.severity == "critical" for x in r.findings)


def test_recurring_nan_gradients_that_reach_the_weights_are_critical(tmp_path):
    r = diagnose(_guarded(tmp_path / "log.csv", bad_steps=(5, 20), guard=False))
    assert r.status == "critical" and r.findings[0].step == 5, _show(r)
    assert not any(f.cause == "loss_scale_collapse" for f in r.findings)


def test_rare_skipped_updates_are_said_without_an_alarm(tmp_path):
    r = diagnose(_guarded(tmp_path / "log.csv", bad_steps=(5, 70), steps=120))
    skipped = [f for f in r.findings if f.cause == "loss_scale_collapse"]
    assert skipped and skipped[0].severity == "info", _show(r)
    assert r.status == "healthy" and not _alarms(r)


def test_short_log_where_every_update_was_skipped_is_a_stall(tmp_path):
    # six HF-style rows: grad_norm nan at every one, the loss finite and flat
    rows = [(i + 1, 7.14 + 0.01 * math.sin(i), float("nan"), 2.7e-5) for i in range(6)]
    r = diagnose(_write(tmp_path / "log.csv", rows))
    f = r.findings[0]
    assert (f.cause, f.symptom, f.severity) == ("loss_scale_collapse", "stall", "warning"), _show(r)
    assert has(f.evidence, "scalars.skipped.most", frac=1.0), [m.data() for m in f.evidence]


def test_nan_gradients_up_to_the_end_of_the_log_stay_a_nonfinite_run(tmp_path):
    # healthy rows, then the gradient norm NaN at the last two: the log may stop before its loss does
    rows = [(i, 2.7 - 0.02 * i, 3.0, 2e-4) for i in range(4)] + [
        (4, 2.51, float("nan"), 2e-4),
        (5, 2.46, float("nan"), 2e-4),
    ]
    r = diagnose(_write(tmp_path / "log.csv", rows))
    assert r.status == "critical", _show(r)
    assert not any(f.cause == "loss_scale_collapse" for f in r.findings)


# --- learns slowly / converged / learns nothing ----------------------------------------------------


def test_a_loss_that_learns_slowly_at_a_tiny_lr_is_lr_too_low(tmp_path):
    r = diagnose(_loop(tmp_path / "log.csv", steps=200, lr=1e-5))
    f = _alarms(r)[0]
    assert (f.cause, f.symptom) == ("lr_too_low", "slow_convergence"), _show(r)
    assert f.evidence[0].key in ("scalars.slow.what", "scalars.slow.stalled"), keys(f.evidence)


def test_progress_kinds_on_real_loops(tmp_path):
    import numpy as np

    from lossdoctor.detectors.scalars import progress_kind

    def kind(**kw):
        p = _loop(tmp_path / "k.csv", **kw)
        with open(p) as fh:
            return progress_kind(np.array([float(r["loss"]) for r in csv.DictReader(fh)]))[0]

    assert kind(steps=200, lr=3e-3) in ("converged", "learning")  # falls > 30%, then bends flat
    assert kind(steps=200, lr=1e-5) == "slowly"
    assert kind(steps=200, lr=1e-8) == "nothing"


def test_a_healthy_loop_that_converged_raises_nothing(tmp_path):
    r = diagnose(_loop(tmp_path / "log.csv", steps=200, lr=3e-3))
    assert r.status == "healthy", _show(r)


def test_slow_learning_needs_fifty_points(tmp_path):
    rows = [(i, 2.3 - 0.002 * i + 0.003 * math.sin(i * 2.1), 1.0, 5e-6) for i in range(40)]
    r = diagnose(_write(tmp_path / "log.csv", rows))
    assert not any(has(f.evidence, "scalars.slow.what") for f in r.findings), _show(r)
