"""Series printed as named arrays (`sources/named_arrays.py`): a history dict printed or dumped once at
the end, each array a series and its positions the rows. The histories come from real training loops
(torch models and optimizers); the text is what `print`, `repr` and `json.dump` make of them."""

from __future__ import annotations

import json
import math

import pytest
import torch

from conftest import run_cli
from lossdoctor.sources import load_path
from msgs import keys


def _history(epochs=6, lr=0.1, seed=0):
    """A Keras-style history of a real torch classifier: per-epoch train and validation loss/accuracy."""
    torch.manual_seed(seed)
    x, y = torch.randn(256, 8), torch.randint(0, 3, (256,))
    y = (x[:, 0] > 0).long() + (x[:, 1] > 0.5).long()
    xv, yv = x[:64], y[:64]
    model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Linear(16, 3))
    opt = torch.optim.SGD(model.parameters(), lr=lr)
    hist = {"loss": [], "accuracy": [], "val_loss": [], "val_accuracy": []}
    for _ in range(epochs):
        for i in range(0, 256, 32):
            loss = torch.nn.functional.cross_entropy(model(x[i : i + 32]), y[i : i + 32])
            opt.zero_grad()
            loss.backward()
            opt.step()
        with torch.no_grad():
            for prefix, (a, b) in (("", (x, y)), ("val_", (xv, yv))):
                out = model(a)
                hist[prefix + "loss"].append(float(torch.nn.functional.cross_entropy(out, b)))
                hist[prefix + "accuracy"].append(float((out.argmax(1) == b).float().mean()))
    return hist


def _values(run, col):
    lg = run.logged(col)
    return [float(v) for v in run.cols[col][lg]]


@pytest.mark.parametrize("dump", ["repr", "json"])
def test_a_history_dict_reads_as_epochs_with_validation_apart(tmp_path, dump):
    hist = _history()
    p = tmp_path / ("history.json" if dump == "json" else "out.txt")
    if dump == "json":  # a dict written with the validation first: the training loss is still the loss
        hist = {"val_loss": hist["val_loss"], "val_accuracy": hist["val_accuracy"], **hist}
    p.write_text(json.dumps(hist) if dump == "json" else f"{hist}\n")  # print(history.history)
    (run,) = load_path(p)
    assert _values(run, "loss") == pytest.approx(hist["loss"])
    assert run.steps.tolist() == [1.0, 2.0, 3.0, 4.0, 5.0, 6.0]  # the val_ twin: one row per epoch
    assert run.meta["steps_from"] == "epoch"
    assert _values(run, "eval_loss") == pytest.approx(hist["val_loss"])  # never in the training loss
    assert keys(run.notes)[0] == "text.named_arrays"
    assert run.notes[0].values["n"] == 6 and "val_loss" in run.notes[0].values["names"]


def test_a_list_of_real_tensors_printed_once_is_the_loss_per_row(tmp_path):
    torch.manual_seed(0)
    w = torch.zeros(4, requires_grad=True)
    x, y = torch.randn(32, 4), torch.randn(32)
    losses = []
    for _ in range(5):
        loss = ((x @ w - y) ** 2).mean()
        loss.backward()
        with torch.no_grad():
            w -= 0.1 * w.grad
            w.grad.zero_()
        losses.append(loss.detach())
    text = f"training done\nlosses = {losses}\n"  # `[tensor(1.23), tensor(1.19), ...]`
    assert "tensor(" in text
    p = tmp_path / "train.log"
    p.write_text(text)
    (run,) = load_path(p)
    assert _values(run, "loss") == pytest.approx([float(v) for v in losses], abs=1e-4)
    assert run.meta["steps_from"] == "numbered"


def test_a_sweep_of_nested_histories_reads_its_first_run(tmp_path):
    """A course notebook's LR sweep, `{lr: {'costs': [...]}}`: the first rate's costs, not every rate's
    spliced into one series; the rising one is a divergence."""
    costs = {"0.03": [0.6931, 0.6047, 0.6728, 1.4914, 5.9799], "0.01": [0.6931, 0.6512, 0.6240, 0.6051, 0.5902]}
    text = "{" + ",\n ".join(f"'{k}': {{'costs': {v},\n  'learning_rate': {k}}}" for k, v in costs.items()) + "}\n"
    p = tmp_path / "sweep.txt"
    p.write_text(text)
    (run,) = load_path(p)
    assert _values(run, "loss") == pytest.approx(costs["0.03"])
    report = json.loads(run_cli("diagnose", p, "--format", "json").stdout)
    assert report["findings"][0]["symptom"] == "divergence" and report["findings"][0]["severity"] == "critical"


def test_a_log_with_step_lines_keeps_them_over_a_list_it_prints(tmp_path):
    """Step lines read well stay the reading: a list printed among them (the betas, a milestone list)
    is no series of its own."""
    lines = [f"step {s} loss {2.5 - s / 100:.4f}" for s in range(10, 110, 10)]
    lines.insert(2, "milestones = [30, 60, 90]")
    lines.insert(5, "losses so far: [2.4, 2.3, 2.2]")
    p = tmp_path / "train.log"
    p.write_text("\n".join(lines) + "\n")
    (run,) = load_path(p)
    assert run.steps.tolist()[:3] == [10.0, 20.0, 30.0]
    assert _values(run, "loss")[-1] == pytest.approx(1.5)


def test_a_config_of_number_lists_is_no_history(tmp_path):
    """Arrays of settings with no loss among them are not read as a run (the reader names what it wanted)."""
    p = tmp_path / "config.json"
    p.write_text(json.dumps({"milestones": [30, 60, 90], "betas": [0.9, 0.999], "sizes": [32, 64, 128]}))
    done = run_cli("diagnose", p)
    assert done.returncode == 2 and len(done.stderr.strip().splitlines()) == 1 and "Traceback" not in done.stderr


def test_nan_in_a_history_is_the_loss_going_nan(tmp_path):
    hist = _history(epochs=5)
    hist["loss"][3:] = [math.nan, math.nan]
    p = tmp_path / "out.txt"
    p.write_text(f"{hist}\n")  # Python prints NaN as `nan`
    (run,) = load_path(p)
    v = _values(run, "loss")
    assert math.isnan(v[3]) and not math.isnan(v[2])


def test_nested_and_unclosed_arrays_are_no_series(tmp_path):
    """A matrix (`'weights': [[...], [...]]`) is skipped, an array that never closes ends the search, and a
    text of many openings with one closing at its end is read in one pass (no answer, a one-line refusal)."""
    from lossdoctor.sources.named_arrays import find

    assert find("{'loss': [0.7, 0.6, 0.5], 'm': [[1, 2], [3, 4]], 'val_loss': [0.8, nan, 0.6]}") == {
        "loss": [0.7, 0.6, 0.5],
        "val_loss": [0.8, pytest.approx(float("nan"), nan_ok=True), 0.6],
    }
    assert find("loss: [0.7, 0.6, 0.5") == {}
    p = tmp_path / "hostile.txt"
    p.write_text("loss: [" * 100000 + "]\n")
    done = run_cli("diagnose", p)
    assert done.returncode == 2 and "Traceback" not in done.stderr


def test_a_history_of_two_epochs_reads_by_its_twins_and_a_pair_of_settings_does_not(tmp_path):
    """Two values are a series only as one of a history's twins (`loss` beside `val_loss` of its length,
    Keras after two epochs: here both NaN); Adam's betas beside a short loss are no series."""
    hist = _history(epochs=2)
    hist["loss"] = [float("nan"), float("nan")]
    p = tmp_path / "out.txt"
    p.write_text(f"{hist}\n")
    (run,) = load_path(p)
    assert run.steps.tolist() == [1.0, 2.0] and all(math.isnan(v) for v in _values(run, "loss"))
    assert _values(run, "accuracy") == pytest.approx(hist["accuracy"])
    from lossdoctor.sources.named_arrays import find

    assert find("{'betas': [0.9, 0.999], 'loss': [0.5, 0.4]}") == {}
