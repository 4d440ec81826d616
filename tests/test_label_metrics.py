"""The label metrics a log prints beside its loss (a training accuracy, an error rate such as WER) and
the symptom they make visible: the metric at its worst while the loss does not fall.

The logs are written here in the shapes the tools print (a key-value print, a percentage, timm's
meter line, Keras's bar, Hugging Face's dicts, a CSV with train and validation columns), with a loss
that is noisy and flat at a level no chance rule knows, so only the metric tells the plateau apart
from a mid-run excerpt of a healthy run.
"""

from __future__ import annotations

import numpy as np
import pytest

from lossdoctor.detectors.engine import diagnose_runs
from lossdoctor.detectors.quantities import Quantities
from lossdoctor.detectors.symptoms import symptoms_of
from lossdoctor.sources import load_path

RULE = "differential.metric_worst"


def _read(tmp_path, text: str, name: str = "train.log"):
    p = tmp_path / name
    p.write_text(text)
    runs = load_path(p)
    return runs[0] if isinstance(runs, list) else runs


def _noisy(level: float, n: int, seed: int = 0, sd: float = 0.01) -> list[float]:
    """A loss flat at `level` with multiplicative batch noise of `sd`."""
    rng = np.random.default_rng(seed)
    return (level * np.exp(rng.normal(0, sd, n))).round(4).tolist()


@pytest.mark.parametrize(
    ("line", "col", "value"),
    [
        ("step {s} | loss: {l:.4f} | acc: 0.5000 | lr 1e-3", "accuracy", 0.5),
        ("epoch 2 iter {s} loss={l:.4f} accuracy=50.00%", "accuracy", 50.0),
        ("Train epoch: 3 [{s}/9000]\tAccuracy: 49.75%\tLoss: {l:.6f}", "accuracy", 49.75),
        # the ImageNet example's ProgressMeter line (`Acc@1` as a percentage, its average in parentheses)
        (
            "Epoch: [3][{s:4d}/5005]\tTime  0.312 ( 0.320)\tLoss {l:.4e} ({l:.4e})\tAcc@1  10.00 ( 10.00)\t"
            "Acc@5  50.00 ( 50.00)",
            "accuracy",
            10.0,
        ),
        ("step: {s}, loss: {l:.4f}, wer: 1.0, cer 0.98", "error_rate", 1.0),
        ("Iter : {s}/6672 - Iter loss : {l:.4f} - Iter acc: 0.0000 - Num correct: 0", "accuracy", 0.0),
        ("{{'loss': {l:.4f}, 'learning_rate': 0.0001, 'wer': 1.0, 'step': {s}}}", "error_rate", 1.0),
    ],
)
def test_label_metric_read_beside_the_loss(tmp_path, line, col, value):
    loss = _noisy(1.7, 6)
    run = _read(tmp_path, "".join(line.format(s=100 * (i + 1), l=v) + "\n" for i, v in enumerate(loss)))
    assert run.has(col), sorted(run.cols)
    assert np.allclose(run.col(col), value)
    assert np.allclose(run.col("loss"), loss)  # the metric is never taken for the loss


@pytest.mark.parametrize("name", ["acc", "accuracy"])
def test_keras_bar_keeps_train_accuracy_apart_from_validation(tmp_path, name):
    loss = _noisy(1.7, 5)
    text = "".join(
        f"Epoch {i + 1}/5\n100/100 [==============================] - 2s 20ms/step - loss: {v:.4f} - "
        f"{name}: 0.5000 - val_loss: 1.6000 - val_{name}: 0.9100\n"
        for i, v in enumerate(loss)
    )
    run = _read(tmp_path, text)
    assert np.allclose(run.col("accuracy"), 0.5) and np.allclose(run.col("loss"), loss)


def test_csv_train_acc_is_the_accuracy_and_val_acc_is_not(tmp_path):
    loss = _noisy(1.7, 6)
    rows = "".join(f"{10 * i},{v},0.25,0.91\n" for i, v in enumerate(loss))
    run = _read(tmp_path, "step,train_loss,train_acc,val_acc\n" + rows, "metrics.csv")
    assert np.allclose(run.col("accuracy"), 0.25) and np.allclose(run.col("loss"), loss)


def _kinds(run):
    return {s.kind: s for s in symptoms_of(Quantities(run))}


def _finding(run):
    found = [f for f in diagnose_runs([run]).findings if f.rule == RULE]
    return found[0] if found else None


def _what(f):
    return next(m for m in f.evidence if getattr(m, "key", "") == "diff.what.metric_worst")


def test_wer_at_one_with_a_flat_loss_is_a_plateau(tmp_path):
    """Three rows of a notebook table: WER 1.0 throughout, the loss flat at 5.1 (no chance level)."""
    text = "Step | Training Loss | Validation Loss | Wer\n-- | -- | -- | --\n"
    text += "".join(f"{400 * (i + 1)} | {v:.6f} | 4.5 | 1.000000\n" for i, v in enumerate([5.0632, 5.1152, 5.1192]))
    f = _finding(_read(tmp_path, text, "table.md"))
    assert f is not None and f.severity == "warning" and f.symptom == "plateau"
    vals = _what(f).values
    assert vals["metric"] == "error_rate" and vals["n"] == 3 and vals["first"] == 1.0 and vals["step"] == 400


def test_binary_accuracy_at_half_printed_as_percent(tmp_path):
    """A binary classifier at 50% (printed as a percentage) with its loss at 0.722, above ln 2."""
    loss = _noisy(0.722, 8, sd=0.0005)
    acc = [49.44, 49.81, 50.66, 49.22, 50.1, 49.9, 50.4, 49.6]
    text = "".join(
        f"INFO Train epoch: 17 [{200 * (i + 1)}/1600]\tAccuracy: {a:.2f}%\tLoss: {v:.6f}\n"
        for i, (a, v) in enumerate(zip(acc, loss))
    )
    f = _finding(_read(tmp_path, text))
    assert f is not None and f.severity == "warning"
    vals = _what(f).values
    assert vals["metric"] == "accuracy" and vals["n"] == 8 and abs(vals["first"] - 0.4944) < 1e-9


def test_zero_accuracy_while_the_loss_falls_only_to_chance(tmp_path):
    """Accuracy 0 while the loss falls from an absurd start to ln 1000: uniform guessing, not learning."""
    loss = [27.8, 33.7, 16.5, 9.6, 12.1, 8.57, 8.25, 6.98, 6.94]
    acc = [0, 0, 0, 0, 0, 0, 0.0052, 0.0052, 0.0]
    text = "".join(
        f"Epoch : 1/20 - Iter : {6519 + i}/6672 - Iter loss : {v:.4f} - Iter acc: {a:.4f}\n"
        for i, (v, a) in enumerate(zip(loss, acc))
    )
    f = _finding(_read(tmp_path, text))
    assert f is not None and _what(f).values["metric"] == "accuracy"


@pytest.mark.parametrize(
    ("acc", "loss"),
    [
        ([0.5, 0.55, 0.62, 0.7, 0.76, 0.81], _noisy(0.7, 6)),  # starts at chance and rises
        ([0.5] * 6, [0.74, 0.66, 0.6, 0.55, 0.5, 0.46]),  # at chance but the loss falls
        ([0.91, 0.92, 0.91, 0.92, 0.91, 0.92], _noisy(0.25, 6)),  # a mid-run excerpt at a good accuracy
        ([0.5, 0.51, 0.49, 0.5, 0.5, 0.51], _noisy(1.5, 6)),  # 50% of a many-class task: not binary chance
        ([0.0] * 6, _noisy(0.031, 6)),  # a regression's meaningless accuracy of 0 (Keras prints it too)
        # a run's first steps: the loss falls to ln 10 on its way down, the accuracy still at 1/10
        ([0.1, 0.1, 0.11, 0.1, 0.1, 0.11], [3.2, 2.9, 2.6, 2.4, 2.3075, 2.305]),
    ],
)
def test_healthy_look_alikes_stay_silent(tmp_path, acc, loss):
    text = "".join(f"step {100 * (i + 1)} | loss: {v:.4f} | acc: {a:.4f}\n" for i, (a, v) in enumerate(zip(acc, loss)))
    run = _read(tmp_path, text)
    assert run.has("accuracy")
    assert "metric_worst" not in {s.kind for s in symptoms_of(Quantities(run))}
    assert _finding(run) is None


def test_error_rate_that_falls_below_one_stays_silent(tmp_path):
    loss = _noisy(3.0, 5)
    text = "".join(
        f"{{'loss': {v:.4f}, 'wer': {w}, 'step': {500 * (i + 1)}}}\n"
        for i, (v, w) in enumerate(zip(loss, [1.0, 1.0, 0.97, 0.8, 0.6]))
    )
    run = _read(tmp_path, text)
    assert run.has("error_rate") and _finding(run) is None


def test_preference_pairs_at_half_stay_silent(tmp_path):
    """mlx-lm's preference trainer prints the pairs' `Accuracy` with its rewards: 0.5 with the loss at
    ln 2 is where DPO starts, no label chance; the same lines without the rewards fire."""
    loss = _noisy(0.70, 8, sd=0.003)
    acc = [0.5, 0.49, 0.51, 0.5, 0.5, 0.49, 0.51, 0.5]

    def text(rewards: str) -> str:
        return "".join(
            f"Iter {50 * (i + 1)}: Train loss {v:.4f},{rewards} Accuracy {a:.3f}, Learning Rate 1.000e-05\n"
            for i, (v, a) in enumerate(zip(loss, acc))
        )

    pref = _read(tmp_path, text(" Chosen reward -0.206, Rejected reward -0.227, Margin 0.021,"))
    assert pref.has("accuracy") and "metric_worst" not in _kinds(pref) and _finding(pref) is None
    plain = _read(tmp_path, text(""), "plain.log")
    assert _kinds(plain)["metric_worst"].data["k"] == 2
