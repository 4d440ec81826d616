"""Rules from the ninth batch of fresh real logs (issue 25), checked on generated logs printed the
way trainers print them and read by the real readers, beside look-alikes that must still fire:

- a warm-up whose printed LR rises one unit of its last digit at a time (`lr=1e-06`, `2e-06`: a log
  that rounds the LR) may be a per-step ramp: no staircase; the same stairs printed exactly are one;
- a flat loss at LR 1e-5 in an excerpt from late in a run (epoch 148) is a schedule's tail, not an LR
  too low; the same flat loss at that LR from the run's first step is one;
- a character error rate that got better and then went back to 1.000 (every output wrong) on the
  last half of the log, the loss flat there, is a collapse at any length; one that starts at 1.000
  and falls, or touches 1.000 only at the end, is not;
- an epoch summary that says the loss is NaN (`Mean Training loss : nan`) beside a progress bar
  whose running loss stays finite is the run's NaN.
"""

from __future__ import annotations

import pytest

from text_judging import alarms, diagnose_text, show

WARMUP_STEPS, RUN_STEPS, EVERY = 400, 600, 2


def _lr_lines(lr_of, fmt_lr) -> str:
    lines = []
    for step in range(EVERY, RUN_STEPS + 1, EVERY):
        loss = 8.0 / (1 + step / 50) + 0.4 + 0.01 * ((step * 7919) % 13)
        lines.append(
            f"[TRAIN] Epoch=1/9, Step={step}/{RUN_STEPS}, loss={loss:.6f}, lr={fmt_lr(lr_of(step))}, time=0.6s"
        )
    return "\n".join(lines) + "\n"


@pytest.mark.parametrize("peak", [2e-5, 6e-5, 3e-4])
def test_a_per_step_warm_up_printed_rounded_is_no_staircase(tmp_path, peak):
    text = _lr_lines(lambda s: peak * min(1.0, s / WARMUP_STEPS), lambda v: repr(round(v, 6)))
    _, report = diagnose_text(tmp_path, text)
    assert not [f for f in report.findings if f.cause == "lr_schedule_error"], show(report)


def test_a_warm_up_stepped_every_50_steps_printed_exactly_is_a_staircase(tmp_path):
    text = _lr_lines(lambda s: 1e-4 * min(1.0, (s // 50 + 1) * 50 / WARMUP_STEPS), repr)
    _, report = diagnose_text(tmp_path, text)
    stairs = [f for f in report.findings if f.cause == "lr_schedule_error"]
    assert stairs and stairs[0].evidence[0].key == "lr.schedule.staircase", show(report)
    assert stairs[0].evidence[0].values["k"] == 50


def _bar_epochs(nan_from: int | None) -> str:
    out = []
    for epoch in range(1, 7):
        running = 2.0 / epoch + 0.05
        out.append(f"Epoch {epoch}: 100%|##########| 266/266 [00:42<00:00,  6.22it/s, loss={running:.3g}]")
        out.append(f"Training time for one epoch: {42.1 + epoch / 10} seconds")
        mean = "nan" if nan_from is not None and epoch >= nan_from else f"{running * 1.1:.6f}"
        out.append(f"Mean Training loss : {mean}")
    return "\n".join(out) + "\n"


def test_an_epoch_summary_that_says_the_loss_is_nan_is_the_runs_nan(tmp_path):
    _, report = diagnose_text(tmp_path, _bar_epochs(nan_from=4))
    top = alarms(report)
    assert top and top[0].symptom == "nonfinite" and top[0].severity == "critical", show(report)


def test_the_same_summaries_finite_are_no_nan(tmp_path):
    _, report = diagnose_text(tmp_path, _bar_epochs(nan_from=None))
    assert not [f for f in report.findings if f.symptom == "nonfinite"], show(report)


def _flat_at(epoch: int, lr: float) -> str:
    lines = []
    for i in range(16):
        step = 20 * i
        loss = 4.59 + 0.04 * (((i * 7) % 5) - 2)
        lines.append(
            f"[05/11 09:{10 + i}:00] ppdet.engine INFO: Epoch: [{epoch}] [{step}/800] learning_rate: {lr:.6f} "
            f"loss_xy: 0.81 loss_wh: 0.52 loss: {loss:.6f} eta: 0:10:{10 + i}"
        )
    return "\n".join(lines) + "\n"


def test_a_flat_loss_at_a_small_lr_late_in_a_run_is_a_schedules_tail(tmp_path):
    _, report = diagnose_text(tmp_path, _flat_at(148, 1e-5))
    assert not [f for f in report.findings if f.cause == "lr_too_low"], show(report)


def test_the_same_flat_loss_from_the_runs_first_step_is_an_lr_too_low(tmp_path):
    _, report = diagnose_text(tmp_path, _flat_at(0, 1e-5))
    low = [f for f in alarms(report) if f.cause == "lr_too_low"]
    assert low, show(report)


def _asr(cers: list[float], losses: list[float]) -> str:
    return "".join(
        f"Step: {i:03d} || Tr.Loss: {loss:.6f}  Val.Loss: {loss + 0.02:.6f} || Tr.CER: {c:.3f}  Val.CER: {c:.3f}\n"
        for i, (c, loss) in enumerate(zip(cers, losses))
    )


def test_an_error_rate_back_at_its_worst_after_it_got_better_is_a_collapse(tmp_path):
    text = _asr([0.977, 0.928, 0.917, 1.0, 1.0, 1.0, 1.0, 1.0], [3.13, 2.91, 2.95, 3.327, 3.323, 3.324, 3.325, 3.321])
    _, report = diagnose_text(tmp_path, text)
    top = alarms(report)
    assert top and top[0].symptom == "plateau" and top[0].step == 3, show(report)
    assert any(e.key == "diff.ev.collapsed" and e.values["best"] == 0.917 for e in top[0].evidence), show(report)


@pytest.mark.parametrize(
    "cers",
    [
        [1.0, 1.0, 1.0, 0.98, 0.95, 0.91, 0.86, 0.80],  # a run's start: at its worst, then better
        [0.977, 0.928, 0.917, 0.91, 0.90, 0.93, 1.0, 1.0],  # back at 1.000 on two prints only
    ],
)
def test_an_error_rate_that_starts_at_its_worst_or_touches_it_at_the_end_is_no_collapse(tmp_path, cers):
    losses = [3.13, 2.91, 2.95, 2.90, 2.88, 2.86, 2.87, 2.85]
    _, report = diagnose_text(tmp_path, _asr(cers, losses))
    assert not [f for f in report.findings if any(e.key == "diff.ev.collapsed" for e in f.evidence)], show(report)
    assert not [f for f in alarms(report) if f.symptom == "plateau" and f.step in (3, 6)], show(report)


def test_a_results_table_s_no_log_cells_are_not_a_nan_loss(tmp_path):
    """The HF Trainer's model-card table prints `No log` in the training-loss column until its first
    logging step: nothing was logged there, not a NaN; the losses it does print are read."""
    rows = [("No log", 1.0, 12, 1.2625), ("No log", 2.0, 24, 1.0992), ("0.9312", 3.0, 36, 1.0656)]
    text = "| Training Loss | Epoch | Step | Validation Loss |\n|:-------------:|:-----:|:----:|:---------------:|\n"
    text += "".join(f"| {a:<13} | {e} | {s} | {v} |\n" for a, e, s, v in rows)
    runs, report = diagnose_text(tmp_path, text, name="README.md")
    run = runs[0]
    assert run.logged("loss").sum() == 1 and run.col("loss")[run.logged("loss")].tolist() == [0.9312]
    assert run.logged("eval_loss").sum() == 3
    assert not [f for f in report.findings if f.symptom == "nonfinite"], show(report)


@pytest.mark.parametrize("falls", [True, False])
def test_an_lr_printed_as_zero_beside_a_loss_that_learns_is_a_rounded_lr(tmp_path, falls):
    """`lr: 0.000` on every line from the run's start: with the loss falling 2.0 -> 1.2 the weights
    moved, so the LR is a small one the print rounded, not 0; with the loss flat it is an LR of 0."""
    lines = []
    for step in range(1, 9):
        loss = 2.0 / (1 + 0.1 * step) if falls else 2.0 + 0.001 * (step % 2)
        lines.append(f"step {step} lr: 0.000 loss: {loss:.4f}")
    _, report = diagnose_text(tmp_path, "\n".join(lines) + "\n")
    zero = [f for f in report.findings if f.cause == "lr_schedule_error"]
    assert bool(zero) is not falls, show(report)


def _epochs(train: list[float], val: list[float]) -> str:
    out = []
    for e, (t, v) in enumerate(zip(train, val)):
        out += [f"Epoch {e}", "Current learning rate: 0.01", f"train_loss {t:.4f}", f"val_loss {v:.4f}"]
    return "\n".join(out) + "\n"


def test_a_jump_the_validation_loss_makes_too_is_a_divergence_in_three_epochs(tmp_path):
    """nnU-Net's epoch blocks: train 0.36, 0.12, 0.60 while validation went 0.33, 0.48, 3.64: one
    event measured twice, at the log's last point: no sign of a way back."""
    _, report = diagnose_text(tmp_path, _epochs([0.3602, 0.1213, 0.5986], [0.3339, 0.4789, 3.6355]))
    top = alarms(report)
    assert top and top[0].symptom == "divergence" and top[0].step == 2, show(report)


@pytest.mark.parametrize(
    "train,val",
    [
        ([0.3602, 0.1213, 0.5986], [0.3339, 0.3289, 0.3155]),  # the training loss alone: one noisy epoch
        ([0.3602, 0.2213, 0.1986], [0.3339, 0.4789, 3.6355]),  # the validation loss alone: no training jump
    ],
)
def test_a_jump_of_one_loss_alone_in_three_epochs_is_not(tmp_path, train, val):
    _, report = diagnose_text(tmp_path, _epochs(train, val))
    assert not [f for f in alarms(report) if f.symptom in ("divergence", "spike")], show(report)


def test_one_bump_near_the_end_of_a_flat_log_is_no_creep(tmp_path):
    """GLM-4's dicts: a flat loss with one bump of +30% two points from the end (a gradient spike it
    came back from): the rise a median of two sees is that one point, not a creep of the log."""
    losses = [0.094, 0.1019, 0.0922, 0.0894, 0.0928, 0.0949, 0.0946, 0.1045, 0.1246, 0.0988]
    text = "".join(
        f"{{'loss': {v}, 'grad_norm': {3.5 if i != 7 else 237.6}, 'learning_rate': 0.0005, 'epoch': 0.03}}\n"
        for i, v in enumerate(losses)
    )
    _, report = diagnose_text(tmp_path, text)
    assert not [f for f in alarms(report) if f.symptom == "divergence"], show(report)


def test_a_creep_over_the_whole_excerpt_still_is_one(tmp_path):
    losses = [0.0922 * (1 + 0.02 * i) + 0.001 * (i % 2) for i in range(12)]
    text = "".join(
        f"{{'loss': {v:.4f}, 'learning_rate': 0.0005, 'epoch': {1 + i / 100:.2f}}}\n" for i, v in enumerate(losses)
    )
    _, report = diagnose_text(tmp_path, text)
    assert [f for f in alarms(report) if f.symptom == "divergence"], show(report)


def test_an_lr_printed_as_zero_on_a_long_log_that_learns_is_no_schedule_error(tmp_path):
    """The same judgement on the detector's long form (>= 10 rows: `learning_rate.lr_schedule_error`)
    as on the short one: a loss that falls says the LR is not 0."""
    lines = [f"step {s} lr: 0.000 loss: {2.0 / (1 + 0.1 * s):.4f}" for s in range(1, 15)]
    _, report = diagnose_text(tmp_path, "\n".join(lines) + "\n")
    assert not [f for f in report.findings if f.cause == "lr_schedule_error"], show(report)
    flat = [f"step {s} lr: 0.000 loss: {2.0 + 0.001 * (s % 2):.4f}" for s in range(1, 15)]
    _, report = diagnose_text(tmp_path, "\n".join(flat) + "\n", name="flat.log")
    assert [f for f in alarms(report) if f.cause == "lr_schedule_error"], show(report)
