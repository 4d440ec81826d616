"""Generic CSV and JSONL logs with common column names."""

from __future__ import annotations

import csv
import json
import math

import numpy as np
import pytest

import logfaults
from conftest import run_cli
from lossdoctor.detectors.engine import diagnose_runs
from lossdoctor.sources import load_path
from lossdoctor.sources.columns import column_for, map_names
from msgs import has


def write_csv(path, curve: dict, names: dict[str, str]) -> None:
    with open(path, "w", newline="") as f:
        w = csv.writer(f)
        keys = [k for k in names if k in curve]
        w.writerow([names[k] for k in keys])
        for i in range(len(curve["step"])):
            w.writerow([int(curve[k][i]) if k == "step" else repr(float(curve[k][i])) for k in keys])


def write_jsonl(path, curve: dict, names: dict[str, str]) -> None:
    with open(path, "w") as f:
        for i in range(len(curve["step"])):
            # Python's json writes NaN/Infinity literals, as most training scripts' loggers do
            f.write(
                json.dumps(
                    {names[k]: (int(v[i]) if k == "step" else float(v[i])) for k, v in curve.items() if k in names}
                )
                + "\n"
            )


CSV_NAMES = {
    "step": "iteration",
    "loss": "train_loss",
    "grad_norm": "grad_norm",
    "lr": "learning_rate",
    "scale": "loss_scale",
    "skipped": "skipped",
}
JSONL_NAMES = {
    "step": "global_step",
    "loss": "loss",
    "grad_norm": "gradient_norm",
    "lr": "lr",
    "scale": "scale",
    "skipped": "overflow",
}


@pytest.mark.parametrize("name", list(logfaults.CURVES))
def test_csv_curves(tmp_path, name):
    curve = logfaults.CURVES[name]()
    p = tmp_path / "log.csv"
    write_csv(p, curve, CSV_NAMES)
    runs = load_path(p)
    assert runs[0].source == "csv" and len(runs[0]) == len(curve["step"])
    logfaults.check(diagnose_runs(runs), name)


@pytest.mark.parametrize("name", list(logfaults.CURVES))
def test_jsonl_curves(tmp_path, name):
    curve = logfaults.CURVES[name]()
    p = tmp_path / "metrics.jsonl"
    write_jsonl(p, curve, JSONL_NAMES)
    runs = load_path(p)
    assert runs[0].source == "jsonl"
    np.testing.assert_allclose(runs[0].cols["loss"], curve["loss"], equal_nan=True)
    logfaults.check(diagnose_runs(runs), name)


def test_column_names():
    assert column_for("train/loss") == ("loss", 1)
    assert column_for("loss")[0] == "loss" and column_for("lm loss")[0] == "loss"
    # an evaluation's loss is its own column, never the training loss; other evaluation metrics are not read
    assert column_for("eval/loss") == ("eval_loss", 0) and column_for("val_loss") == ("eval_loss", 0)
    assert column_for("eval_accuracy") is None and column_for("eval_runtime") is None
    assert column_for("lr-AdamW")[0] == "lr" and column_for("lr-AdamW-momentum") is None
    assert column_for("grad_2.0_norm_total")[0] == "grad_norm"
    assert column_for("train/loss__MAX") is None and column_for("lm loss vs samples") is None
    m = map_names(["epoch", "train_loss_epoch", "train_loss_step", "_step", "global_step"])
    assert m.used["loss"] == "train_loss_step" and m.step == "global_step"


def test_nan_strings_and_mixed_types_are_a_partial_read(tmp_path):
    p = tmp_path / "log.csv"
    rows = ["step,loss,lr"] + [f"{i},{2.0 - 0.01 * i},0.001" for i in range(40)]
    rows[11] = "10,oops,0.001"  # text in a numeric column: ignored, with a note
    rows[21] = "20,NaN,0.001"  # a logged NaN: kept as the failure it is
    rows.append("40,1.5")  # a short row
    p.write_text("\n".join(rows) + "\n")
    run = load_path(p)[0]
    i10, i20 = list(run.steps).index(10), list(run.steps).index(20)
    assert not run.logged("loss")[i10] and run.logged("loss")[i20] and math.isnan(run.cols["loss"][i20])
    assert has(run.notes, "source.not_numbers"), [getattr(m, "key", m) for m in run.notes]
    proc = run_cli("diagnose", p)
    assert proc.returncode == 0 and "warning" in proc.stderr and "Traceback" not in proc.stderr


def test_jsonl_torn_last_line_and_nested(tmp_path):
    p = tmp_path / "log.jsonl"
    lines = [json.dumps({"step": i, "train": {"loss": 2.0 - 0.01 * i}}) for i in range(30)]
    p.write_text("\n".join(lines) + '\n{"step": 30, "train": {"lo')
    run = load_path(p)[0]
    assert len(run) == 30 and run.meta["columns"]["loss"] == "train/loss"
    assert has(run.notes, "source.the_last_line"), [getattr(m, "key", m) for m in run.notes]


def test_no_step_column(tmp_path):
    p = tmp_path / "loss.csv"
    p.write_text("loss\n" + "\n".join(str(3 - 0.01 * i) for i in range(50)) + "\n")
    run = load_path(p)[0]
    assert list(run.steps[:3]) == [0, 1, 2]
    assert has(run.notes, "source.no_step_column")


def test_every_10_steps_still_diagnosed(tmp_path):
    curve = logfaults.grad_explosion()
    sub = {k: v[::10] for k, v in curve.items()}
    p = tmp_path / "every10.csv"
    write_csv(p, sub, CSV_NAMES)
    runs = load_path(p)
    assert runs[0].meta["log_interval"] == 10
    assert has(runs[0].notes, "source.coarse_sampled", n=10), [getattr(m, "key", m) for m in runs[0].notes]
    logfaults.check(diagnose_runs(runs), "grad_explosion")


@pytest.mark.parametrize("every,cols", [(50, ("step", "loss", "grad_norm", "lr")), (1, ("step", "loss"))])
def test_nan_loss_is_never_healthy(tmp_path, every, cols):
    curve = logfaults.grad_explosion()
    sub = {k: curve[k][::every] for k in cols}
    p = tmp_path / "log.csv"
    write_csv(p, sub, CSV_NAMES)
    report = diagnose_runs(load_path(p))
    assert report.status == "critical"
    assert report.primary.step == (200 if every == 50 else 190)


@pytest.mark.parametrize("valid_first", [False, True])
def test_jsonl_rows_without_the_quoted_loss_log_no_nan(tmp_path, valid_first):
    """fairseq's JSON lines: train rows print numbers quoted ("loss": "3.097"), valid rows have no
    "loss" key at all; a valid row's missing loss is not logged, while a printed "nan" is."""
    rows = []
    for epoch, loss in ((25, "3.097"), (26, "3.095"), (27, "3.092")):
        train = {"epoch": epoch, "loss": loss, "lr": 0.00019, "gnorm": "0.19", "loss_scale": "4"}
        valid = {"epoch": epoch, "valid_loss": 3.1, "valid_ppl": "2.50"}
        rows += [valid, train] if valid_first else [train, valid]
    rows.append({"epoch": 28, "loss": "nan", "lr": 0.00018, "gnorm": "0.19", "loss_scale": "4"})
    path = tmp_path / "fairseq.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    run = load_path(path)[0]
    loss, logged = run.col("loss"), run.logged("loss")
    assert logged.sum() == 4 and logged[-1] and np.isnan(loss[-1])  # the printed "nan" is a logged NaN
    assert sorted(loss[logged][:3].tolist()) == [3.092, 3.095, 3.097]


@pytest.mark.parametrize("array", [False, True])
def test_mmcv_log_json_leaves_val_rows_out_and_counts_iterations_on_across_epochs(tmp_path, array):
    """mmcv/mmengine's `*.log.json`: `{"mode": "train", "epoch": 21, "iter": 90, ..., "loss": ...}` per
    logging interval, `{"mode": "val", "epoch": 21, "iter": 19, ...}` after each evaluation (its loss is
    the evaluation's), the iteration counted within its epoch."""
    rows = [{"mode": "train", "epoch": 21, "iter": i, "lr": 0.00045, "loss": 0.4 - 0.001 * i} for i in (90, 100, 110)]
    rows.append({"mode": "val", "epoch": 21, "iter": 19, "lr": 0.00045, "accuracy_top-1": 87.7})
    rows.append({"mode": "val", "epoch": 21, "iter": 19, "lr": 0.00045, "loss": 0.47507})
    rows += [{"mode": "train", "epoch": 22, "iter": i, "lr": 0.00045, "loss": 0.3 - 0.001 * i} for i in (10, 20)]
    p = tmp_path / ("log.json" if array else "20240101.log.json")
    p.write_text(json.dumps(rows) if array else "".join(json.dumps(r) + "\n" for r in rows))
    run = load_path(p)[0]
    lg = run.logged("loss")
    got = dict(zip(run.steps[lg].tolist(), run.col("loss")[lg].tolist()))
    assert list(got) == sorted(got) and len(got) == 5 and 0.47507 not in got.values()
    assert [round(v, 5) for v in got.values()] == [0.31, 0.3, 0.29, 0.29, 0.28]
    assert list(got)[3] > 110  # epoch 22's iteration 10 comes after epoch 21's 110
    assert any(getattr(n, "key", None) == "source.eval_rows" and n.values["n"] == 2 for n in run.notes)


def test_a_step_column_that_goes_back_within_an_epoch_is_left_as_printed(tmp_path):
    rows = [{"epoch": 1, "step": s, "loss": 1.0 / (s + 1)} for s in (10, 20, 30, 5, 15)]  # a resume mid-epoch
    p = tmp_path / "m.jsonl"
    p.write_text("".join(json.dumps(r) + "\n" for r in rows))
    run = load_path(p)[0]
    assert sorted(run.steps.tolist()) == [5, 10, 15, 20, 30]


@pytest.mark.parametrize("kind", ["jsonl", "csv"])
def test_a_table_of_loss_parts_and_no_total_is_read_as_their_sum(tmp_path, kind):
    """ALBEF/BLIP/TCL write `log.txt` as JSON lines of `train_loss_ita`, `train_loss_itm`,
    `train_loss_mlm` (strings of 3 decimals) and no total: the training loss is their sum, said in a
    note; a validation part is not one of them."""
    rows = [
        {
            "train_lr": "0.000",
            "train_loss_mlm": f"{2.0 - 0.1 * e:.3f}",
            "train_loss_ita": f"{2.3 - 0.05 * e:.3f}",
            "train_loss_itm": f"{0.45 - 0.01 * e:.3f}",
            "val_loss_itm": "0.500",
            "epoch": e,
        }
        for e in range(6)
    ]
    if kind == "jsonl":
        p = tmp_path / "log.txt.jsonl"
        p.write_text("".join(json.dumps(r) + "\n" for r in rows))
    else:
        p = tmp_path / "log.csv"
        keys = list(rows[0])
        p.write_text(",".join(keys) + "\n" + "".join(",".join(str(r[k]) for k in keys) + "\n" for r in rows))
    run = load_path(p)[0]
    want = [float(r["train_loss_mlm"]) + float(r["train_loss_ita"]) + float(r["train_loss_itm"]) for r in rows]
    np.testing.assert_allclose(run.col("loss"), want, rtol=1e-9)
    assert run.meta["loss_key"] == "train_loss_mlm + train_loss_ita + train_loss_itm"
    assert any(getattr(n, "key", None) == "text.loss_summed" for n in run.notes)
    # each part is kept at its epoch, as the text reader keeps a line's loss terms
    comps = run.events["loss_components"]
    assert sorted(comps) == list(range(6))
    assert comps[5] == {"train_loss_mlm": 1.5, "train_loss_ita": 2.05, "train_loss_itm": 0.4}
