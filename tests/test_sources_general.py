"""The general reader of training text (`sources/any_text.py`) and the text events every text reader
files (`sources/text_events.py`).

Where the printing tool runs here, it prints the text: real torch tensors and numpy scalars in a
dict, as a training script's `print(...)` shows them. Where it does not (stable-baselines3, the
ImageNet example, fastai, notebooks, DeepSpeed, apex, TRL's collator warning), the lines are
written by a copy of the tool's print statement, cited at each writer.
"""

from __future__ import annotations

import io
import json
import math

import numpy as np
import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from conftest import run_cli
from lossdoctor.records import TEXT_EVENT_KINDS
from lossdoctor.sources import SourceError, any_text, load_path
from msgs import has


def _read(tmp_path, text, name="train.log"):
    p = tmp_path / name
    p.write_text(text)
    runs = load_path(p)
    assert len(runs) == 1
    return runs[0]


def _at(run, col):
    """{step: value} of the points logged in `col` (NaN kept)."""
    lg = run.logged(col)
    return {int(s): float(v) for s, v in zip(run.steps[lg], run.cols[col][lg])}


def _same(a, b):
    assert a.keys() == b.keys(), (a, b)
    for k in a:
        assert (math.isnan(a[k]) and math.isnan(b[k])) or a[k] == pytest.approx(b[k]), (k, a[k], b[k])


# --- writers copied from the tools' sources ---------------------------------------------------


class AverageMeter:
    """pytorch/examples imagenet/main.py `AverageMeter`: `__str__` is
    `'{name} {val' + fmt + '} ({avg' + fmt + '})'`."""

    def __init__(self, name, fmt=":f"):
        self.name, self.fmt, self.val, self.sum, self.count = name, fmt, 0.0, 0.0, 0

    def update(self, val, n=1):
        self.val, self.sum, self.count = val, self.sum + val * n, self.count + n
        self.avg = self.sum / self.count

    def __str__(self):
        return ("{name} {val" + self.fmt + "} ({avg" + self.fmt + "})").format(**self.__dict__)


def progress_line(num_batches, meters, prefix, batch):
    """imagenet/main.py `ProgressMeter.display`: `'\\t'.join([prefix + batch_fmtstr.format(batch)] +
    [str(meter) for meter in meters])` with `batch_fmtstr = '[{:' + str(num_digits) + 'd}/' + fmt + ']'`."""
    num_digits = len(str(num_batches // 1))
    fmt = "{:" + str(num_digits) + "d}"
    return "\t".join(
        [prefix + ("[" + fmt + "/" + fmt.format(num_batches) + "]").format(batch)] + [str(m) for m in meters]
    )


def sb3_block(values):
    """stable-baselines3 common/logger.py `HumanOutputFormat.write`: keys grouped by their `tag/`
    section (the section printed as its own line, its keys indented by 4 spaces), floats as
    `f"{value:<8.3g}"`, a dashed line of the table's width above and below."""
    key2str, tag = {}, None
    for key, value in sorted(values.items()):
        if "/" in key:
            t, short = key.split("/", 1)
            if t != tag:
                key2str[t + "/"] = ""
                tag = t
            key = "    " + short
        key2str[key] = f"{value:<8.3g}" if isinstance(value, float) else str(value)
    kw = max(map(len, key2str))
    vw = max(map(len, key2str.values()))
    dashes = "-" * (kw + vw + 7)
    lines = [dashes]
    for k, v in key2str.items():
        lines.append(f"| {k}{' ' * (kw - len(k))} | {v}{' ' * (vw - len(v))} |")
    lines.append(dashes)
    return "\n".join(lines) + "\n"


def fastprogress_table(names, rows):
    """fastprogress `ConsoleProgressBar.write(line, table=True)` (what fastai's `learn.fit` prints in
    a terminal): the header's cells joined by two spaces, each row's cells padded to its header's width."""
    out = ["  ".join(names)]
    widths = [len(n) for n in names]
    for r in rows:
        out.append("  ".join(c + " " * (w - len(c)) for c, w in zip(r, widths)))
    return "\n".join(out) + "\n"


# --- one test per shape ---------------------------------------------------------------------


def test_notebook_markdown_table_keeps_train_and_validation_apart(tmp_path):
    """The Trainer's notebook table (transformers utils/notebook.py: columns `Step`, `Training Loss`,
    `Validation Loss`; `No log` before the first logged training loss) pasted as Markdown."""
    text = (
        "Training in Colab:\n\n| Step | Training Loss | Validation Loss |\n|------|---------------|----------------|\n"
        "| 50 | No log | 2.612 |\n| 100 | 2.401000 | 2.350000 |\n| 150 | 2.101000 | 2.512000 |\n| 200 | nan | nan |\n"
    )
    run = _read(tmp_path, text, "notebook.md")
    assert run.meta["format"] == "training text" and run.meta["loss_key"] == "Training Loss"
    assert run.meta["loss_guessed"] is False
    # `No log` is no value (not logged at step 50); the row's `nan` is a NaN the run printed
    _same(_at(run, "loss"), {100: 2.401, 150: 2.101, 200: math.nan})
    _same(_at(run, "eval_loss"), {50: 2.612, 100: 2.35, 150: 2.512, 200: math.nan})


def test_ascii_box_and_whitespace_aligned_tables(tmp_path):
    box = (
        "+------+--------+--------+\n| step |  loss  |  acc   |\n+------+--------+--------+\n"
        + "".join(f"| {s:4d} | {2.0 - s / 100:.4f} | {0.1 + s / 1000:.4f} |\n" for s in (10, 20, 30))
        + "+------+--------+--------+\n"
    )
    run = _read(tmp_path, box, "box.txt")
    _same(_at(run, "loss"), {10: 1.9, 20: 1.8, 30: 1.7})
    rows = [[str(e), f"{1.0 - e / 10:.6f}", f"{1.1 - e / 20:.6f}", f"{0.5 + e / 20:.6f}", "00:12"] for e in range(4)]
    run = _read(
        tmp_path, fastprogress_table(["epoch", "train_loss", "valid_loss", "accuracy", "time"], rows), "fastai.txt"
    )
    assert run.meta["loss_key"] == "train_loss"
    _same(_at(run, "loss"), {0: 1.0, 1: 0.9, 2: 0.8, 3: 0.7})
    _same(_at(run, "eval_loss"), {0: 1.1, 1: 1.05, 2: 1.0, 3: 0.95})


def test_sb3_key_value_blocks(tmp_path):
    blocks = sb3_block({"time/fps": 1234, "time/iterations": 1, "time/total_timesteps": 2048})
    for it, (loss, value_loss) in enumerate([(0.41, 5.2), (0.39, 5.0), (float("nan"), 4.1)], start=2):
        blocks += sb3_block(
            {
                "time/fps": 900,
                "time/iterations": it,
                "time/total_timesteps": 2048 * it,
                "train/loss": loss,
                "train/value_loss": value_loss,
                "train/entropy_loss": -0.686,
                "train/learning_rate": 0.0003,
                "train/n_updates": 10 * (it - 1),
            }
        )
    run = _read(tmp_path, "Using cpu device\n" + blocks)
    assert run.meta["loss_key"] == "train/loss"
    _same(_at(run, "loss"), {2: 0.41, 3: 0.39, 4: math.nan})
    comps = run.events["loss_components"]
    assert sorted(comps) == [2, 3, 4] and comps[3]["train/value_loss"] == pytest.approx(5.0)
    assert "loss" not in {k.rsplit("/", 1)[-1] for k in comps[2]}  # the total is not a component
    assert _at(run, "lr")[4] == pytest.approx(3e-4)


def test_imagenet_meter_line_takes_the_value_not_the_average(tmp_path):
    batch_time, data_time = AverageMeter("Time", ":6.3f"), AverageMeter("Data", ":6.3f")
    losses, top1, top5 = AverageMeter("Loss", ":.4e"), AverageMeter("Acc@1", ":6.2f"), AverageMeter("Acc@5", ":6.2f")
    meters = [batch_time, data_time, losses, top1, top5]
    train = [6.9079, 6.9012, 7.5012, 9.25]
    lines, expect = [], {}
    for i, loss in enumerate(train):
        for m, v in zip(meters, (0.257, 0.001, loss, 0.0, 0.78)):
            m.update(v)
        lines.append(progress_line(5005, meters, "Epoch: [1]", i * 10))
        expect[5005 + i * 10] = loss
    val = AverageMeter("Loss", ":.4e")
    val.update(6.8)  # validation prints `Test: ` lines shaped like the training lines
    lines.append(progress_line(196, [batch_time, val, top1, top5], "Test: ", 0))
    run = _read(tmp_path, "\n".join(lines) + "\n")
    assert run.meta["loss_key"] == "Loss"
    _same(_at(run, "loss"), expect)  # the current values, never the running averages
    assert losses.avg != pytest.approx(train[-1])
    _same(_at(run, "eval_loss"), {5005 + 30: 6.8})  # at the training step it followed, not step 0


def test_dict_dumps_of_real_tensors_and_numpy_scalars(tmp_path):
    torch.manual_seed(0)
    model = torch.nn.Linear(4, 3)
    x, y = torch.randn(8, 4), torch.randint(0, 3, (8,))
    out = io.StringIO()
    expect, cls = {}, {}
    for it in range(0, 60, 20):
        logits = model(x)
        if it == 40:
            logits = logits * float("nan")
        loss_cls = torch.nn.functional.cross_entropy(logits, y)
        loss_reg = (model.weight**2).sum() * 0.01
        loss = loss_cls + loss_reg
        print(
            f"iteration : {it}, losses : ",
            {"loss": loss, "loss_dict": {"loss_cls": loss_cls, "loss_reg": loss_reg}},
            file=out,
        )  # a detection repo's print of its loss dict: `tensor(1.1, grad_fn=<AddBackward0>)`
        expect[it], cls[it] = float(loss), float(loss_cls)
    text = out.getvalue()
    assert "tensor(" in text and "grad_fn=<AddBackward0>" in text
    run = _read(tmp_path, text)
    _same(_at(run, "loss"), {k: float(f"{v:.4f}") if v == v else v for k, v in expect.items()})
    comps = run.events["loss_components"]
    assert math.isnan(comps[40]["loss_cls"]) and comps[0]["loss_cls"] == pytest.approx(cls[0], abs=1e-4)
    # numpy 2 prints its scalars as `np.float32(2.3)`; quoted values as the Trainer's newer dicts do
    np_text = "".join(f"step {s}: {{'loss': {np.float32(2.5 - s / 100)!r}, 'lr': '{3e-4}'}}\n" for s in (10, 20, 30))
    assert "np.float32(" in np_text
    run = _read(tmp_path, np_text, "np.log")
    _same(_at(run, "loss"), {10: 2.4, 20: 2.3, 30: 2.2})
    assert _at(run, "lr")[20] == pytest.approx(3e-4)


@pytest.mark.parametrize(
    "lines, key, expect",
    [
        (["epoch 1 loss = 0.91", "epoch 2 loss = 0.61", "epoch 3 loss = 0.41"], "loss", {1: 0.91, 2: 0.61, 3: 0.41}),
        (
            [f"iteration : {i}, losses : {v}" for i, v in ((0, 2.31), (20, 2.2), (40, 2.1))],
            "losses",
            {0: 2.31, 20: 2.2, 40: 2.1},
        ),
        (
            [
                f"Step: {s} || Tr.Loss: {v} || Val.Loss: 2.9 || lr: 0.0001"
                for s, v in ((40, 2.1), (80, 1.9), (120, 1.7))
            ],
            "Tr.Loss",
            {40: 2.1, 80: 1.9, 120: 1.7},
        ),
        (
            [f"[{e}/100] loss: {v} acc: 0.9" for e, v in ((1, 0.41), (2, 0.38), (3, 0.35))],
            "loss",
            {1: 0.41, 2: 0.38, 3: 0.35},
        ),
        # a benchmark harness's own format (a two-word label, `=`, a unit glued to a number, no step at all)
        (
            [f"[bench] run-A | tokens/s 1200.5 | train loss = {v} | mem 12.3GB" for v in (3.2, 3.1, 3.0, 2.9)],
            "train loss",
            {1: 3.2, 2: 3.1, 3: 3.0, 4: 2.9},
        ),
    ],
)
def test_plain_prints_of_small_projects(tmp_path, lines, key, expect):
    run = _read(tmp_path, "\n".join(lines) + "\n")
    _same(_at(run, "loss"), expect)
    if run.meta["format"] == "training text":
        assert run.meta["loss_key"] == key


def test_eval_printed_like_the_train_line_never_overwrites_it(tmp_path):
    """The same words and step for both: only the evaluation word before the loss tells them apart
    (read by the console reader, which takes these lines first)."""
    text = (
        "Epoch 3, step 100, loss 2.3100\nEpoch 3, step 100, validation: loss 2.9000\n"
        "Epoch 3, step 200, loss 2.2000\n[eval] Epoch 3, step 200, loss 2.8000\n"
    )
    run = _read(tmp_path, text)
    _same(_at(run, "loss"), {100: 2.31, 200: 2.2})
    _same(_at(run, "eval_loss"), {100: 2.9, 200: 2.8})


def test_only_components_means_their_sum_with_a_note(tmp_path):
    """No total printed: the loss is the sum of the components on the line that holds them all
    (detectron2's and mmdetection's `losses = sum(loss_dict.values())`), each component kept."""
    text = "".join(f"[{e}/10] loss_cls {0.9 - e / 10:.2f} loss_bbox {0.5:.2f}\n" for e in range(1, 5))
    run = _read(tmp_path, text)
    assert run.meta["loss_guessed"] is False and run.meta["loss_key"] == "loss_cls + loss_bbox"
    assert any(getattr(n, "key", "") == "text.loss_summed" for n in run.notes)
    _same(_at(run, "loss"), {e: round(0.9 - e / 10, 2) + 0.5 for e in range(1, 5)})
    assert {k for v in run.events["loss_components"].values() for k in v} == {"loss_cls", "loss_bbox"}


def test_two_adversaries_are_not_summed(tmp_path):
    """A GAN's `d_loss` and `g_loss` (keras-GAN's `%d [D loss: %f] [G loss: %f]`-style line with
    names): neither is the training loss and their sum is none, so both are components, said in a note."""
    text = "".join(f"[Epoch {e}/10] d_loss: {0.7 - e / 100:.3f} g_loss: {1.2 + e / 50:.3f}\n" for e in range(1, 6))
    run = _read(tmp_path, text)
    assert not run.has("loss") and "loss_key" not in run.meta
    note = next(n for n in run.notes if getattr(n, "key", "") == "text.adversaries")
    assert note.values["keys"] == ["d_loss", "g_loss"]
    comps = _components_at(run)
    assert sorted(comps) == [1, 2, 3, 4, 5] and comps[5]["g_loss"] == pytest.approx(1.3)


MUSIKA_BAR = (
    "Epoch {e}/250: 100%|████████| 9375/9375 [07:11<00:00, 21.73it/s, DR={dr}, DF={df}, G={g}, GP={gp}, "
    "LR=0.0001, TIME=0.0615]\n"
)
TUNIT_LINE = "Epoch: [{e}/200] [500/1000] MODE[ONLYCLS] Avg Loss: D[{d:.2f}] G[{g:.2f}] C[{c:.2f}]\n"


def test_adversaries_named_by_their_letters_are_a_gan_line(tmp_path):
    """A GAN script printing its networks by capital letters in a tqdm postfix (musika's `DR=`, `DF=`:
    the discriminator on real and fake, `G=`, `GP=` its penalty): the letters name the two sides, every
    value is a component, none is summed into a loss; a NaN component stays NaN."""
    rows = [(713.0, 2.5, 1.25, 21600.0), (690.0, 2.25, 1.5, 20100.0), (701.0, math.nan, math.nan, 19800.0)]
    text = "".join(MUSIKA_BAR.format(e=e, dr=dr, df=df, g=g, gp=gp) for e, (dr, df, g, gp) in enumerate(rows, 39))
    run = _read(tmp_path, text)
    assert not run.has("loss")
    note = next(n for n in run.notes if getattr(n, "key", "") == "text.adversaries")
    assert sorted(note.values["keys"]) == ["DF", "DR", "G", "GP"]
    comps = [c for _, c in sorted(_components_at(run).items())]
    assert [c["dr"] for c in comps] == [713.0, 690.0, 701.0] and comps[1]["gp"] == 20100.0
    assert math.isnan(comps[2]["g"]) and math.isnan(comps[2]["df"]) and comps[0]["g"] == 1.25


def test_a_third_network_letter_beside_d_and_g_is_one_more_component(tmp_path):
    """TUNIT's `D[x] G[x] C[x]` (C: its guiding network): all three kept apart, no loss made of them."""
    vals = [(0.71, 1.95, 2.61), (0.66, 2.05, 2.4), (0.62, 2.1, 2.2)]
    text = "".join(TUNIT_LINE.format(e=e, d=d, g=g, c=c) for e, (d, g, c) in enumerate(vals, 10))
    run = _read(tmp_path, text)
    assert not run.has("loss")
    comps = [c for _, c in sorted(_components_at(run).items())]
    assert [(c["d"], c["g"], c["c"]) for c in comps] == vals


def test_lower_case_letter_names_are_no_adversaries(tmp_path):
    """`dr` and `g` written as words (a drop rate, a gain) say nothing of a GAN: the line's loss is read."""
    text = "".join(f"step {s} loss {2.0 - s / 10:.2f} dr {0.1:.2f} g {s / 3:.3f}\n" for s in range(1, 6))
    run = _read(tmp_path, text)
    assert "adversaries" not in run.meta
    _same(_at(run, "loss"), {s: round(2.0 - s / 10, 2) for s in range(1, 6)})


def _tabular_dump(blocks, clock=True):
    """rlpyt's `logger.dump_tabular` (rllab's tabular logger): one `key    value` per line between rules,
    each line after the logger's clock and a bar."""
    out = []
    for k, (it, loss, score) in enumerate(blocks):
        stamp = f"2020-12-08 21:{40 + k:02d}:50.{116393 + k:06d}  | " if clock else ""
        rows = [("Iteration", f"{it}"), ("CumTime (s)", f"{12.5 * (k + 1):.1f}"), ("GameScore/Average", f"{score}")]
        rows += [("loss/Average", f"{loss}"), ("loss/Std", "0.05"), ("loss/Min", "0.01"), ("loss/Max", "0.9")]
        out.append(stamp + "-" * 29 + "  " + "-" * 10)
        out += [f"{stamp}{key:<32}{v}" for key, v in rows]
        out.append(stamp + "-" * 29 + "  " + "-" * 10)
    return "\n".join(out) + "\n"


@pytest.mark.parametrize("clock", [True, False])
def test_a_tabular_key_value_dump_is_one_record_per_block(tmp_path, clock):
    """Keys and values set apart by spaces, one pair a line: each block one row at its `Iteration`; the
    loss is `loss/Average` (the interval's mean), never its `Std`, `Min` or `Max`; a NaN is read."""
    blocks = [(1000, 0.3125, -5.3), (2000, 0.25, -4.5), (3000, "nan", -4.0)]
    run = _read(tmp_path, _tabular_dump(blocks, clock))
    _same(_at(run, "loss"), {1000: 0.3125, 2000: 0.25, 3000: math.nan})


def test_an_aligned_line_alone_is_no_record(tmp_path):
    """One `key    value` line between others is a line of its own shape, as before."""
    text = "".join(f"step {s}  loss {3.0 - s / 10:.2f}\nthroughput     {100 + s}\n" for s in range(1, 6))
    run = _read(tmp_path, text)
    _same(_at(run, "loss"), {s: round(3.0 - s / 10, 2) for s in range(1, 6)})


def test_names_under_a_losses_heading_are_components_summed_into_the_loss(tmp_path):
    """Hopenet's `Losses: Yaw #, Pitch #, Roll #` (no total printed; its backward runs on all three):
    the names after the heading are the loss's parts, their sum the loss, each kept; a bare print of
    one of them between the lines changes nothing."""
    vals = [(161.4367, 180.8725, 41.3196), (124.8338, 489.4776, 246.7312), (147.8351, 60.821, 62.392)]
    text = "".join(
        f"Epoch [1/25], Iter [{100 * (i + 1)}/1912] Losses: Yaw {y:.4f}, Pitch {p:.4f}, Roll {r:.4f}\n{y:.9f}\n"
        for i, (y, p, r) in enumerate(vals)
    )
    run = _read(tmp_path, text)
    assert any(getattr(n, "key", "") == "text.loss_summed" for n in run.notes)
    _same(_at(run, "loss"), {100 * (i + 1): sum(v) for i, v in enumerate(vals)})
    comps = _components_at(run)
    assert [(c["yaw"], c["pitch"], c["roll"]) for _, c in sorted(comps.items())] == vals


def test_a_loss_printed_after_its_colon_is_no_heading(tmp_path):
    """`loss: 2.31, acc 0.5, lr 0.001`: the value follows the colon; nothing after it is a part."""
    text = "".join(f"iter {s} loss: {3.0 - s / 10:.2f}, acc {s / 10:.2f}, lr 0.001\n" for s in range(1, 6))
    run = _read(tmp_path, text)
    assert not run.events.get("loss_components")
    _same(_at(run, "loss"), {s: round(3.0 - s / 10, 2) for s in range(1, 6)})


# --- events ---------------------------------------------------------------------------------


def test_events_land_at_their_step_in_the_general_reader(tmp_path):
    """apex's overflow line (`Gradient overflow.  Skipping step, loss scaler 0 reducing loss scale to
    32768.0`, apex/amp/scaler.py), TRL's completion-only collator warning (`This instance will be
    ignored in loss calculation.`), the tokenizer's truncation warning, torch's OOM and the NCCL
    watchdog, HF Trainer's resume line."""
    lines = []
    for e in range(1, 7):
        lines.append(f"[{e}/100] loss: {1.0 - e / 20:.2f} acc: 0.5")
        if e == 2:
            lines.append("Gradient overflow.  Skipping step, loss scaler 0 reducing loss scale to 32768.0")
        if e == 3:
            lines.append(
                "UserWarning: Could not find response key `### Answer:` in the following instance: "
                "abc. This instance will be ignored in loss calculation. Note, if this happens often, "
                "consider increasing the `max_seq_length`."
            )
            lines.append(
                "Token indices sequence length is longer than the specified maximum sequence length for "
                "this model (1200 > 1024). Running this sequence through the model will result in "
                "indexing errors"
            )
        if e == 4:
            lines.append("torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 20.00 MiB.")
            lines.append(
                "[E ProcessGroupNCCL.cpp:475] [Rank 1] Watchdog caught collective operation timeout: "
                "WorkNCCL(SeqNum=5, OpType=ALLREDUCE) ran for 1800000 milliseconds before timing out."
            )
        if e == 5:
            lines.append("  Continuing training from checkpoint, will skip to saved global_step")
    run = _read(tmp_path, "\n".join(lines) + "\n")
    ev = run.events["text_events"]
    kinds = {s: sorted(e["kind"] for e in v) for s, v in ev.items()}
    assert kinds == {2: ["overflow"], 3: ["labels_ignored", "truncation"], 4: ["nccl_error", "oom"], 5: ["resume"]}
    assert all(e["kind"] in TEXT_EVENT_KINDS and len(e["text"]) <= 120 for v in ev.values() for e in v)
    # the skipped step is the one after the row read before the overflow line (apex prints it during
    # the step it skips, before that step's own line), as the console reader places DeepSpeed's
    assert _at(run, "scale") == {2: 32768.0} and _at(run, "skipped") == {3: 1.0}
    assert run.meta["precision"] == "fp16"  # a loss scale is fp16
    assert _at(run, "loss")[6] == pytest.approx(0.7)  # event lines are no rows


def test_deepspeed_counters_and_hysteresis_overflows_become_events(tmp_path):
    """DeepSpeed's `steps_per_print` line (`step={}, skipped={}, lr={}, mom={}`, runtime/engine.py) and
    its overflow line with hysteresis (runtime/fp16/loss_scaler.py: `[deepspeed] OVERFLOW! Rank {} Skipping
    step. Attempted loss scale: {}, but hysteresis is {}. Reducing hysteresis to {}`), read by the console
    reader beside the Trainer's dicts."""
    lines = []
    for s in range(10, 70, 10):
        lines.append(f"{{'loss': {2.0 - s / 100:.4f}, 'learning_rate': 0.0001, 'epoch': {s / 100}}}")
        skipped = max(0, (s - 30) // 10)
        lines.append(f"[Rank 0] step={s}, skipped={skipped}, lr=[0.0001], mom=[(0.9, 0.999)]")
        if s >= 40:
            lines.append(
                "[deepspeed] OVERFLOW! Rank 0 Skipping step. Attempted loss scale: 1, but hysteresis is 2. "
                "Reducing hysteresis to 1"
            )
    run = _read(tmp_path, "\n".join(lines) + "\n")
    ev = run.events["text_events"]
    overflow_steps = sorted(s for s, v in ev.items() for e in v if e["kind"] == "overflow")
    assert overflow_steps[0] == 40 and len(overflow_steps) >= 3
    assert run.meta["precision"] == "fp16" and np.nansum(run.col("skipped")) > 0
    assert np.all(run.col("scale")[run.logged("scale")] == 1.0)


def test_nan_warning_in_a_console_log(tmp_path):
    text = (
        "iter 1: loss 2.3000, time 10.0ms\niter 2: loss 2.2000, time 10.0ms\n"
        "Warning: NaN or Inf found in input tensor.\niter 3: loss nan, time 10.0ms\n--fp16 was set\n"
    )
    run = _read(tmp_path, text)
    assert [e["kind"] for e in run.events["text_events"][2]] == ["nonfinite_warning"]
    assert run.meta["precision"] == "fp16"


# --- refusals and fuzz ----------------------------------------------------------------------


@pytest.mark.parametrize(
    "content",
    ["hello world\nno numbers here\n", "version 1.2.3 released on 2024-01-02\n", "Epoch 1 done. Accuracy 93%\n" * 4],
)
def test_text_with_no_series_exits_2_saying_what_was_looked_for(tmp_path, content):
    p = tmp_path / "notes.txt"
    p.write_text(content)
    r = run_cli("diagnose", p)
    assert r.returncode == 2 and len(r.stderr.strip().splitlines()) == 1
    assert "looked for" in r.stderr and "line template" in r.stderr and "Traceback" not in r.stderr


_TOKENS = st.sampled_from(
    [
        "loss",
        "Loss",
        "val",
        "| ",
        " |",
        "epoch",
        "step",
        ":",
        "=",
        "(",
        ")",
        "[",
        "]",
        "/",
        "tensor(",
        "nan",
        "inf",
        "-",
        "---",
        "\t",
        "  ",
        "\n",
        "\r",
        "1",
        "2.5",
        "1e400",
        "'",
        "{",
        "}",
        "OVERFLOW!",
        "loss scale: ",
        "9" * 40,
        "é",
        "\x1b[31m",
    ]
)


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.one_of(_TOKENS, st.text(max_size=8)), max_size=200))
def test_the_general_reader_never_raises_on_arbitrary_text(parts):
    text = "".join(parts)
    try:
        run = any_text.build(any_text.parse(text.splitlines()), "fuzz.txt")
    except SourceError:
        return
    assert len(run) > 0


def test_component_losses_in_key_value_lines_are_kept_apart(tmp_path):
    """A MoE trainer's line: the total `loss` with its router `aux_loss` and `z_loss` beside it
    (console reader)."""
    text = "".join(
        f"epoch 1 | step {s} | loss {2.4 - s / 100:.2f} | aux_loss {0.01 * s / 10:.3f} | z_loss 0.001\n"
        for s in (10, 20, 30)
    )
    run = _read(tmp_path, text)
    _same(_at(run, "loss"), {10: 2.3, 20: 2.2, 30: 2.1})
    assert run.events["loss_components"][20] == {"aux_loss": pytest.approx(0.02), "z_loss": pytest.approx(0.001)}


def test_a_real_tensor_printed_in_a_line_is_its_number(tmp_path):
    """`print(f"Epoch {e} loss:", loss)` with a real torch loss: `tensor(2.3012, grad_fn=<...>)`;
    the NaN epoch is a value, not a warning."""
    torch.manual_seed(0)
    model = torch.nn.Linear(3, 2)
    x, y = torch.randn(4, 3), torch.tensor([0, 1, 0, 1])
    lines, expect = [], {}
    for e in range(1, 4):
        loss = torch.nn.functional.cross_entropy(model(x) * (float("nan") if e == 3 else 1.0), y)
        lines.append(f"Epoch {e} loss: {loss!s}")  # print(..., loss) shows str(loss)
        expect[e] = float(f"{float(loss):.4f}") if e < 3 else math.nan
    assert "grad_fn=<NllLossBackward0>" in lines[0]
    run = _read(tmp_path, "\n".join(lines) + "\n")
    _same(_at(run, "loss"), expect)
    assert "text_events" not in run.events


@pytest.mark.parametrize(
    "config_line, meta",
    [
        ("TrainingArguments(bf16=True, fp16=False, learning_rate=2e-05)", {"precision": "bf16"}),
        ('{"fp16": {"enabled": true, "loss_scale": 0}}', {"precision": "fp16"}),
        ("not using fp16 because the GPU has no tensor cores", {}),
        (
            "model = AutoModelForSequenceClassification.from_pretrained(name, num_labels=10)",
            {"task_hint": "classification", "n_classes": 10},
        ),
        ("GPTConfig(n_layer=12, vocab_size=50304, block_size=1024)", {"vocab_size": 50304}),
    ],
)
def test_the_text_says_precision_task_and_size(tmp_path, config_line, meta):
    text = config_line + "\n" + "".join(f"[{e}/100] loss: {1.0 - e / 20:.2f} acc: 0.5\n" for e in range(1, 5))
    run = _read(tmp_path, text)
    got = {k: run.meta[k] for k in ("precision", "task_hint", "n_classes", "vocab_size") if k in run.meta}
    assert got == meta


@pytest.mark.parametrize(
    "lines, expect",
    [
        # the PyTorch tutorials' `print(f'Epoch [{epoch+1}/{num_epochs}], Step [{i+1}/{total_step}], Loss: {loss.item():.4f}')`
        (
            [
                f"Epoch [{e}/10], Step [{s}/600], Loss: {v}"
                for e, s, v in ((1, 100, 1.9), (1, 200, 1.8), (2, 100, 1.7), (2, 200, 1.6))
            ],
            {100: 1.9, 200: 1.8, 700: 1.7, 800: 1.6},
        ),
        # pytorch/examples mnist/main.py: `'Train Epoch: {} [{}/{} ({:.0f}%)]\tLoss: {:.6f}'` (samples within the epoch;
        # `for epoch in range(1, args.epochs + 1)`: a bare epoch number counts from 1)
        (
            [
                f"Train Epoch: {e} [{n}/60000 ({100 * n / 60000:.0f}%)]\tLoss: {v:.6f}"
                for e, n, v in ((1, 0, 2.3), (1, 640, 2.2), (2, 0, 2.1), (2, 640, 2.0))
            ],
            {0: 2.3, 640: 2.2, 60000: 2.1, 60640: 2.0},
        ),
        # the ImageNet example's `Epoch: [{}]` (`for epoch in range(args.start_epoch, args.epochs)`: from 0)
        (
            [
                f"Epoch: [{e}][{i:4d}/5005]\tLoss {v:.4e} ({v:.4e})"
                for e, i, v in ((0, 10, 6.9), (0, 20, 6.8), (1, 10, 6.7))
            ],
            {10: 6.9, 20: 6.8, 5015: 6.7},
        ),
        # PaddleSeg's `[TRAIN] epoch: {}, iter: {}/{}`: the iteration counts on across epochs and is the step
        (
            [
                f"[TRAIN] epoch: {e}, iter: {i}/1000, loss: {v:.4f}"
                for e, i, v in ((1, 10, 2.3), (1, 20, 2.2), (2, 30, 2.1))
            ],
            {10: 2.3, 20: 2.2, 30: 2.1},
        ),
    ],
)
def test_a_counter_within_the_epoch_counts_on_from_the_epochs_before(tmp_path, lines, expect):
    run = _read(tmp_path, "\n".join(lines) + "\n")
    _same(_at(run, "loss"), expect)


# --- logs that print their loss once, records one pair a line, tables of other tools ----------


def _components_at(run):
    return run.events.get("loss_components", {})


def test_detectron2_loss_dict_of_real_tensors_is_the_summed_loss_at_its_iteration(tmp_path):
    """detectron2/engine/train_loop.py `_write_metrics`: `raise FloatingPointError(f"Loss became
    infinite or NaN at iteration={cur_iter}!\\nloss_dict = {metrics_dict}")`, the dict holding the
    model's real loss tensors (printed with their grad_fn)."""
    w = torch.ones(1, requires_grad=True)
    loss_dict = {"loss_cls": (w * float("nan")).sum(), "loss_box_reg": (w * 0.2576).sum()}
    text = f"FloatingPointError: Loss became infinite or NaN at iteration=27!\nloss_dict = {loss_dict}\n"
    assert "grad_fn=" in text
    run = _read(tmp_path, text)
    assert math.isnan(_at(run, "loss")[27])
    assert run.meta["loss_key"] == "loss_cls + loss_box_reg"
    comp = _components_at(run)[27]
    assert math.isnan(comp["loss_cls"]) and comp["loss_box_reg"] == pytest.approx(0.2576)
    assert any(getattr(n, "key", "") == "text.loss_summed" for n in run.notes)


def test_pretty_printed_dicts_are_one_row_each_at_their_iter(tmp_path):
    """Detectron's training stats (detectron/utils/training_stats.py `GetStats`: iter, eta, loss,
    lr, the loss_* components...) printed with `pprint.pprint`: one `'key': value,` pair a line, the
    eta a quoted string."""
    import pprint

    text = ""
    for it, loss in ((119980, 0.571), (120000, 0.562384)):
        stats = {
            "accuracy_cls": 0.92,
            "eta": "1 day, 13:30:44",
            "iter": it,
            "loss": loss,
            "loss_bbox": 0.107,
            "loss_cls": 0.243,
            "lr": 0.01,
            "mb_qsize": 64,
            "mem": 6407,
            "time": 0.56,
        }
        text += pprint.pformat(stats, width=40) + "\n"
    assert text.count("\n") > 10
    run = _read(tmp_path, text)
    _same(_at(run, "loss"), {119980: 0.571, 120000: 0.562384})
    _same(_at(run, "lr"), {119980: 0.01, 120000: 0.01})
    assert _components_at(run)[120000]["loss_cls"] == pytest.approx(0.243)


def _rsl_rl_block(it, total, value_loss, surrogate):
    """rsl_rl/runners/on_policy_runner.py `log`: a `#` rule, `Learning iteration {it}/{tot_iter}`
    centred, then `f"{'Value function loss:':>{pad}} {mean_value_loss:.4f}"` lines (pad 35)."""
    pad, width = 35, 80
    head = f" \033[1m Learning iteration {it}/{total} \033[0m "
    lines = [
        "#" * width,
        head.center(width, " "),
        "",
        f"{'Computation:':>{pad}} 14963 steps/s (collection: 6.407s, learning 0.163s)",
        f"{'Value function loss:':>{pad}} {value_loss:.4f}",
        f"{'Surrogate loss:':>{pad}} {surrogate:.4f}",
        f"{'Mean action noise std:':>{pad}} {0.56:.2f}",
        f"{'Mean reward:':>{pad}} {25.66:.2f}",
        f"{'Mean episode length:':>{pad}} {1000.0:.2f}",
        "-" * width,
        f"{'Total timesteps:':>{pad}} {it * 4096}",
        f"{'Iteration time:':>{pad}} 6.57s",
    ]
    return "\n".join(lines) + "\n"


def test_rsl_rl_blocks_are_rows_at_their_learning_iteration(tmp_path):
    text = "".join(_rsl_rl_block(it, 10000, v, -0.01) for it, v in ((8389, 0.31), (8390, 0.42), (8391, float("inf"))))
    run = _read(tmp_path, text)
    comp = _components_at(run)
    assert set(comp) == {8389, 8390, 8391}
    assert comp[8390]["value_function_loss"] == pytest.approx(0.42) and math.isinf(comp[8391]["value_function_loss"])
    # no total is printed: PPO's loss is made of its value and surrogate terms, their sum is the loss read
    assert run.meta["loss_key"] == "Value function loss + Surrogate loss"
    assert _at(run, "loss")[8390] == pytest.approx(0.41) and math.isinf(_at(run, "loss")[8391])


def _rsl_rl5_block(it, total, value_loss, surrogate, reward=None, header=True):
    """rsl_rl 5.x's `log`: the same centred header, then `Mean value loss:`, `Mean surrogate loss:`,
    `Mean entropy loss:` lines; `Mean reward:` and `Mean episode length:` only once an episode ended."""
    pad, width = 40, 80
    lines = ["#" * width, f"Learning iteration {it}/{total}".center(width), ""] if header else []
    lines += [f"{'Collection time:':>{pad}} 0.102s", f"{'Mean value loss:':>{pad}} {value_loss:.4f}"]
    lines += [f"{'Mean surrogate loss:':>{pad}} {surrogate:.4f}", f"{'Mean entropy loss:':>{pad}} {1.3:.4f}"]
    if reward is not None:
        lines += [f"{'Mean reward:':>{pad}} {reward:.2f}", f"{'Mean episode length:':>{pad}} {22.67:.2f}"]
    lines += [f"{'Mean action std:':>{pad}} 0.88", "-" * width, f"{'Iteration time:':>{pad}} 0.16s"]
    return "\n".join(lines) + "\n"


def test_rsl_rl_records_with_a_key_more_and_a_block_cut_before_its_header(tmp_path):
    """A paste that starts inside iteration 0's block (no header above it), then blocks that print
    `Mean reward` once episodes end: one series, the cut block one step before the first header, and
    every block's loss the sum of its terms."""
    text = _rsl_rl5_block(0, 10, 19.741, -0.0013, header=False)
    text += "".join(_rsl_rl5_block(it, 10, v, -0.0076, reward=-4.08) for it, v in ((1, 19.6685), (2, 18.5)))
    run = _read(tmp_path, text)
    comp = _components_at(run)
    assert sorted(comp) == [0, 1, 2] and comp[1]["value_loss"] == pytest.approx(19.6685)
    _same(_at(run, "loss"), {0: 19.741 - 0.0013 + 1.3, 1: 19.6685 - 0.0076 + 1.3, 2: 18.5 - 0.0076 + 1.3})


def test_llama_recipes_key_value_summary_is_one_row(tmp_path):
    """llama_recipes/finetuning.py: `[print(f'Key: {k}, Value: {v}') for k, v in results.items()]`,
    results from train_utils.py `train` (avg_train_prep, avg_train_loss, avg_eval_prep, avg_eval_loss)."""
    results = {
        "avg_train_prep": float("nan"),
        "avg_train_loss": float("nan"),
        "avg_eval_prep": float("nan"),
        "avg_eval_loss": float("inf"),
        "avg_epoch_time": 812.5,
    }
    text = "".join(f"Key: {k}, Value: {v}\n" for k, v in results.items())
    run = _read(tmp_path, text)
    assert run.meta["loss_key"] == "avg_train_loss" and run.meta["eval_loss_key"] == "avg_eval_loss"
    assert [math.isnan(v) for v in _at(run, "loss").values()] == [True]
    assert [math.isinf(v) for v in _at(run, "eval_loss").values()] == [True]


def test_yolov5_epoch_table_under_its_header_sums_box_obj_cls(tmp_path):
    """yolov5/train.py: header `('\\n' + '%10s' * 7) % ('Epoch', 'gpu_mem', 'box', 'obj', 'cls',
    'labels', 'img_size')`, each epoch's bar described by `('%10s' * 2 + '%10.4g' * 5) %
    (f'{epoch}/{epochs - 1}', mem, *mloss, targets.shape[0], imgs.shape[-1])` with `mem =
    f'{...:.3g}G'`, tqdm's bar after it."""
    text = ("\n" + "%10s" * 7) % ("Epoch", "gpu_mem", "box", "obj", "cls", "labels", "img_size") + "\n"
    losses = {0: (0.1182, 0.05734, 0.0301), 1: (0.1051, 0.05512, 0.0288), 2: (float("nan"),) * 3}
    for epoch, mloss in losses.items():
        desc = ("%10s" * 2 + "%10.4g" * 5) % (f"{epoch}/99", f"{2.64:.3g}G", *mloss, 4, 416)
        text += desc + ": 100%|██████████| 7/7 [00:15<00:00,  2.27s/it]\n"
    run = _read(tmp_path, text)
    loss = _at(run, "loss")
    assert loss[0] == pytest.approx(sum(losses[0])) and loss[1] == pytest.approx(sum(losses[1]))
    assert math.isnan(loss[2]) and math.isnan(_components_at(run)[2]["box"])
    assert _components_at(run)[1]["obj"] == pytest.approx(0.05512)


def test_mxnet_speedometer_tab_separated_metrics(tmp_path):
    """mxnet/callback.py `Speedometer`: `msg = 'Epoch[%d] Batch [%d]\\tSpeed: %.2f samples/sec';
    msg += '\\t%s=%f' * len(name_value)` logged through `logging.info` (root logger's `INFO:root:`)."""
    text = ""
    for batch, (ce, l1) in zip((10, 20, 30), ((4.200497, 0.816728), (3.9, 0.8), (3.7, 0.77))):
        msg = "Epoch[%d] Batch [%d]\tSpeed: %.2f samples/sec" + "\t%s=%f" * 2
        text += "INFO:root:" + msg % (0, batch, 3.22, "CrossEntropy", ce, "SmoothL1", l1) + "\n"
    run = _read(tmp_path, text)
    comp = _components_at(run)
    assert comp[10]["crossentropy"] == pytest.approx(4.200497) and comp[30]["smoothl1"] == pytest.approx(0.77)
    _same(_at(run, "loss"), {10: 4.200497 + 0.816728, 20: 4.7, 30: 4.47})


def test_printed_tensors_alone_are_a_guessed_loss_numbered_in_order(tmp_path):
    """A training loop's `print(loss.detach().float())`: the real tensor printed, one a line; the same
    values printed as bare numbers, a text of nothing else, are a guessed loss too (issue 25: refuse
    only text that holds no numeric series)."""
    values = [3.2207, float("nan"), float("nan"), 2.9]
    buf = io.StringIO()
    for v in values:
        print(torch.tensor(v), file=buf)
    text = buf.getvalue()
    assert text.startswith("tensor(3.2207)")
    run = _read(tmp_path, text)
    _same(_at(run, "loss"), {i + 1: float(torch.tensor(v)) for i, v in enumerate(values)})
    keys = {getattr(n, "key", "") for n in run.notes}
    assert {"text.loss_guessed", "text.numbered"} <= keys
    bare = load_path(_write(tmp_path, "".join(f"{v}\n" for v in values)))[0]
    _same(_at(bare, "loss"), {i + 1: v for i, v in enumerate(values)})
    assert "text.loss_guessed" in {getattr(n, "key", "") for n in bare.notes}


def _write(tmp_path, text, name="numbers.log"):
    p = tmp_path / name
    p.write_text(text)
    return p


def test_apex_overflow_lines_alone_are_rows_with_their_scale(tmp_path):
    """apex/amp/scaler.py `update_scale`: `maybe_print(("Gradient overflow.  Skipping step, loss scaler
    {} reducing loss scale to {}").format(self._scaler_id, self._loss_scale))`, halving each time."""
    scales = [32768.0 / 2**k for k in range(17)]
    text = "".join(f"Gradient overflow.  Skipping step, loss scaler 0 reducing loss scale to {s}\n" for s in scales)
    run = _read(tmp_path, text)
    _same(_at(run, "scale"), {k + 1: s for k, s in enumerate(scales)})
    assert int((run.col("skipped") == 1).sum()) == 17


def test_the_error_line_alone_is_a_nan_at_the_step_it_names(tmp_path):
    """detectron2/engine/train_loop.py `_write_metrics`: `raise FloatingPointError(f"Loss became
    infinite or NaN at iteration={cur_iter}!\nloss_dict = {metrics_dict}")`: pasted without its dict,
    the one line is the symptom and names its step; refusing it would hide the NaN the user saw."""
    run = _read(tmp_path, "FloatingPointError: Loss became infinite or NaN at iteration=27!\n")
    assert list(run.steps) == [27.0] and math.isnan(run.cols["loss"][0]) and run.logged("loss").all()
    r = run_cli("diagnose", tmp_path / "train.log", "--format", "json")
    first = json.loads(r.stdout)["findings"][0]
    assert r.returncode != 2 and (first["symptom"], first["severity"], first["step"]) == ("nonfinite", "critical", 27)


def test_kohya_bar_avr_loss_is_the_loss(tmp_path):
    """kohya sd-scripts train_network.py: `progress_bar = tqdm(..., desc="steps")`,
    `progress_bar.set_postfix(**{"avr_loss": avr_loss})`: the real tqdm's last bar line."""
    from tqdm import tqdm

    buf = io.StringIO()
    bar = tqdm(total=3300, desc="steps", file=buf, ascii=False, mininterval=0)
    for v in (0.12, 0.11, float("nan")):
        bar.set_postfix(avr_loss=v)
        bar.update(1100)
    bar.close()
    last = buf.getvalue().replace("\r", "\n").strip().splitlines()[-1]
    run = _read(tmp_path, last + "\n")
    assert run.meta["loss_key"] == "avr_loss" and run.meta["loss_guessed"] is False
    assert math.isnan(list(_at(run, "loss").values())[-1])


class _SmoothedValue:
    """torchvision references/detection/utils.py `SmoothedValue` (DETR/DeiT copy it): `__str__` is
    `self.fmt.format(median=..., avg=..., global_avg=..., max=..., value=...)`."""

    def __init__(self, fmt="{value:.4f} ({global_avg:.4f})"):
        self.fmt, self.values = fmt, []

    def update(self, v):
        self.values.append(v)

    def __str__(self):
        v = self.values
        return self.fmt.format(
            median=float(np.median(v[-20:])),
            avg=float(np.mean(v[-20:])),
            global_avg=sum(v) / len(v),
            max=max(v),
            value=v[-1],
        )


def _metric_logger_line(header, i, n, meters):
    """torchvision `MetricLogger.log_every`: `"  ".join([header, "[{0" + space_fmt + "}/{1}]", "eta:
    {eta}", "{meters}", "time: {time}", "data: {data}", "max mem: {memory:.0f}"])`, meters joined
    by `"  "` as `f"{name}: {meter}"`."""
    space_fmt = ":" + str(len(str(n))) + "d"
    msg = "  ".join(
        [
            header,
            "[{0" + space_fmt + "}/{1}]",
            "eta: {eta}",
            "{meters}",
            "time: {time}",
            "data: {data}",
            "max mem: {memory:.0f}",
        ]
    )
    return msg.format(
        i,
        n,
        eta="2 days, 11:26:42",
        meters="  ".join(f"{k}: {m}" for k, m in meters.items()),
        time="0.5012 (0.5210)",
        data="0.0002 (0.0101)",
        memory=26869.0,
    )


@pytest.mark.parametrize("header", ["Epoch: [1]", ""])
def test_metric_logger_lines_read_the_value_not_the_average_at_epoch_and_batch(tmp_path, header):
    lr, loss, ce = (_SmoothedValue("{value:.6f}"), _SmoothedValue(), _SmoothedValue())
    lines, want = [], {}
    for i, v in ((0, 2.9), (10, 2.5), (20, 2.2)):
        lr.update(1e-4), loss.update(v), ce.update(v / 3)
        lines.append(_metric_logger_line(header, i, 5004, {"lr": lr, "loss": loss, "loss_ce": ce}))
        want[(5004 if header else 0) + i] = v
    run = _read(tmp_path, "\n".join(lines) + "\n")
    _same(_at(run, "loss"), want)
    assert set(_at(run, "lr")) == set(want)


def test_lightning_bar_batch_train_loss_beats_the_smoothed_loss(tmp_path):
    """Lightning 1.x's progress bar: `loss=` is `fit_loop.running_loss.mean()` (the last 20 batches),
    `train_loss=` the batch's value logged with `self.log(..., prog_bar=True)`; the real tqdm bar."""
    from tqdm import tqdm

    buf = io.StringIO()
    bar = tqdm(total=870, desc="Epoch 1", file=buf, mininterval=0, unit="batch")
    batch = [0.61, 0.535, 0.48]
    for k, v in enumerate(batch):
        bar.update(290)
        bar.set_postfix(loss=round(float(np.mean(batch[: k + 1])) - 0.05, 3), train_loss=v, v_num=2)
    bar.close()
    last = buf.getvalue().replace("\r", "\n").strip().splitlines()[-1]
    assert "loss=" in last and "train_loss=0.48" in last
    run = _read(tmp_path, last + "\n")
    assert list(_at(run, "loss").values()) == [pytest.approx(0.48)]


def test_tf_estimator_evaluation_dict_is_not_the_training_loss(tmp_path):
    """TensorFlow estimator.py `_write_dict_to_summary`: `logging.info('Saving dict for global step %d:
    %s', current_global_step, _dict_to_str(dictionary))` (`', '.join('%s = %s' % (k, v) ...)`), its
    `loss` an evaluation's; the training line from `LoggingTensorHook`: `'%s (%.3f sec)' %
    (', '.join(stats), elapsed)`."""
    lines = []
    for step, train, ev in ((1000, 0.05528491, 3.3700151), (2000, 0.041, 3.1)):
        lines.append(
            "INFO:tensorflow:"
            + "%s (%.3f sec)" % (", ".join(["global_steps = %s" % step, "loss = %s" % train]), 1202.815)
        )
        d = {"eval_loss": ev / 600, "global_step": step, "loss": ev}
        lines.append(
            "INFO:tensorflow:Saving dict for global step %d: %s"
            % (step, ", ".join("%s = %s" % (k, v) for k, v in sorted(d.items())))
        )
    run = _read(tmp_path, "\n".join(lines) + "\n")
    _same(_at(run, "loss"), {1000: 0.05528491, 2000: 0.041})


def test_neural_monkey_train_xent_is_the_loss(tmp_path):
    """Neural Monkey's training log: `%Y-%m-%d %H:%M:%S: ` then `name: value` per evaluator joined
    by four spaces (`target/runtime_xent`, `target/train_xent`, `target/BLEU-4`)."""
    vals = [7.31, 7.15, 7.17, 6.97]
    text = "".join(
        f"2016-12-02 02:0{i}:49: target/runtime_xent: {v:.4g}    target/train_xent: {v:.4g}    target/BLEU-4: 0.08\n"
        for i, v in enumerate(vals)
    )
    run = _read(tmp_path, text)
    assert run.meta["loss_key"] == "target/train_xent"
    assert list(_at(run, "loss").values()) == pytest.approx(vals)


def test_a_partial_loss_dict_nan_is_a_nonfinite_event_at_its_iteration():
    """A loss_dict that holds only some of the components seen (a model returning a subset), after
    lines with a printed total: no sum is taken, the training loss stays the printed total, and the
    NaN component is a `nonfinite_warning` event at the iteration the error names. The dict is
    detectron2's `FloatingPointError` (train_loop.py) of real tensors; the lines before it are the
    general reader's (detectron2's own printer is the console reader's), fed to it directly."""
    lines = [
        f"it {it} | total_loss {1.2 - it / 100:.3f} | loss_cls 0.500 | loss_box_reg {0.7 - it / 100:.3f} | "
        f"loss_rpn_cls 0.100"
        for it in (19, 20)
    ]
    w = torch.ones(1, requires_grad=True)
    loss_dict = {"loss_cls": (w * float("nan")).sum(), "loss_box_reg": (w * 0.2576).sum()}
    lines += f"FloatingPointError: Loss became infinite or NaN at iteration=27!\nloss_dict = {loss_dict}".splitlines()
    run = any_text.build(any_text.parse(lines), "train.log")
    assert run.meta["loss_key"] == "total_loss"
    _same(_at(run, "loss"), {19: 1.01, 20: 1.0})
    assert math.isnan(_components_at(run)[27]["loss_cls"])
    kinds = [e["kind"] for e in run.events["text_events"].get(27, [])]
    assert kinds.count("nonfinite_warning") == 1


def test_a_training_line_that_carries_an_event_cue_is_still_a_row(tmp_path):
    """A cue word inside the repeated training line (`truncated`, `loss_scale:`) made every row an
    event: the log was refused and its NaN never seen. The line is a row first, its event kept."""
    import math

    from lossdoctor.sources import load_path

    lines = [f"> {i} | xent {('nan' if i >= 150 else f'{2.0 - i / 200:.4f}')} | truncated 2" for i in range(199)]
    p = tmp_path / "train.log"
    p.write_text("\n".join(lines) + "\n")
    (run,) = load_path(p)
    loss = run.col("loss")  # the rows in reading order (`> i` names no step)
    assert len(loss) == 199 and loss[10] == 1.95 and math.isnan(loss[150]) and not math.isnan(loss[149])
    assert any(e["kind"] == "truncation" for evs in run.event("text_events").values() for e in evs)
    scaled = tmp_path / "scaled.log"
    scaled.write_text("".join(f"step {i} loss {3.0 - i / 100:.2f} loss_scale: 65536\n" for i in range(30)))
    (run,) = load_path(scaled)
    assert run.col("loss")[0] == 3.0 and len(run.steps) == 30 and run.meta.get("loss_key") != "loss_scale"


# --- issue 25: the rules a reader applies when no name says loss, and where they must not fire ------------------


def test_a_number_that_sums_the_named_numbers_beside_it_is_the_total(tmp_path):
    """No name says loss: the number equal to the sum of the named numbers before it on every row
    (within their rounding) is the total, they its components (the note says so)."""
    parts = [(0.512, 0.331, 1.204), (0.498, 0.329, 1.187), (0.471, 0.318, 1.166)]
    text = "".join(
        f"it {i} | B: {b:.3f} | C: {c:.3f} | M: {m:.3f} | T: {b + c + m:.3f} | timer: 0.31\n"
        for i, (b, c, m) in zip((10, 20, 30), parts)
    )
    run = _read(tmp_path, text)
    _same(_at(run, "loss"), {10: round(sum(parts[0]), 3), 20: round(sum(parts[1]), 3), 30: round(sum(parts[2]), 3)})
    assert run.events["loss_components"][10] == {"b": 0.512, "c": 0.331, "m": 1.204}
    assert any(getattr(n, "key", None) == "text.total_of_parts" and n.values["key"] == "T" for n in run.notes)


def test_a_count_beside_the_parts_is_no_total(tmp_path):
    """DeepSpeed-Chat's `ppo_ep: 1` stands right before its losses: a whole number is no sum of them,
    however the rounding is counted; the actor's loss is the training loss (the critic is another
    model: its loss is kept apart, `test_an_rl_policy_loss_is_the_loss_and_its_critic_a_component`)."""
    rows = [(0.0253, 0.2144), (0.1915, 0.3261), (-0.1837, 0.2259)]
    text = "".join(
        f"epoch: 0|step: {s}|ppo_ep: 1|act_loss: {a}|cri_loss: {c}|unsuper_loss: 0.0\n"
        for s, (a, c) in zip((259, 260, 261), rows)
    )
    run = _read(tmp_path, text)
    assert run.meta["loss_key"] == "act_loss"
    _same(_at(run, "loss"), {s: a for s, (a, _) in zip((259, 260, 261), rows)})


def test_the_one_metric_left_is_taken_only_when_it_is_one_and_it_moves(tmp_path):
    """VSE++'s `Eit 12400  lr 0.0002  Le 25.6000`: `Le` is what is left once counters, the LR and
    timings are known, so it is the loss (a guess, noted). Two unknown metrics, or one that never
    changes (a setting such as a momentum), leave the loss unread."""
    one = "".join(
        f"Epoch: [5][{i}/2266]\tEit {11330 + i}  lr 0.0002  Le {v}\tTime 0.9 (0.9)\n"
        for i, v in zip((1069, 1169, 1269), (25.61, 25.58, 25.62))
    )
    run = _read(tmp_path, one)
    assert run.meta["loss_key"] == "Le" and run.meta["loss_guessed"]
    _same(_at(run, "loss"), {12399: 25.61, 12499: 25.58, 12599: 25.62})
    two = one.replace("\tTime", "  Lr2 0.5\tTime").replace("Lr2 0.5", "Lx {}")
    two = "".join(line.replace("{}", str(0.1 * k)) for k, line in enumerate(two.splitlines(keepends=True)))
    assert not _read(tmp_path, two).has("loss")
    setting = "".join(f"step={s}, skipped=0, lr=[0.001], mom=[(0.9, 0.999)]\n" for s in (10, 20, 30))
    assert not _read(tmp_path, setting).has("loss")


def test_a_metric_word_names_a_loss_only_as_a_sets_metric(tmp_path):
    """`train-rmse`, `training's l2` and `valid_1's binary_logloss` are an objective on a set; a reward
    term whose name ends like one (`Episode_Reward/lin_vel_z_l2`) is not, and is never the loss."""
    text = "".join(f"[{i}]\ttraining's l2: {v}\tvalid_1's l2: {w}\n" for i, v, w in ((1, 0.61, 0.62), (2, 0.54, 0.56)))
    run = _read(tmp_path, text)
    _same(_at(run, "loss"), {1: 0.61, 2: 0.54})
    _same(_at(run, "eval_loss"), {1: 0.62, 2: 0.56})
    block = (
        "Learning iteration 10/100\nValue function loss: 0.51\nSurrogate loss: 0.01\n"
        "Episode_Reward/lin_vel_z_l2: -0.0483\nEpisode_Reward/dof_acc_l2: -0.18\n"
    )
    run = _read(tmp_path, block)
    assert "l2" not in run.meta.get("loss_key", "")


def test_unnamed_numbers_are_read_only_behind_a_counter_that_counts_up(tmp_path):
    """`print(step, loss)`: two bare numbers, the first counting up, are the step and a guessed loss; a
    table of measurements whose first column does not count up stays unread."""
    run = _read(tmp_path, "".join(f"{s} {v}\n" for s, v in ((100, 2.31), (110, 2.25), (120, "nan"))))
    _same(_at(run, "loss"), {100: 2.31, 110: 2.25, 120: math.nan})
    assert run.meta["loss_guessed"]
    with pytest.raises(SourceError):
        _read(tmp_path, "".join(f"{x} {y}\n" for x, y in ((3, 0.5), (1, 0.7), (2, 0.2), (5, 0.9))))


def test_an_epoch_column_before_the_counter_leaves_the_loss_first_after_it(tmp_path):
    """Chainer's PrintReport rows pasted without their header (`epoch iteration main/loss accuracy lr`):
    the epoch's whole numbers before the iteration counter are no value, the first number after the
    counter is the guessed loss; a print with more unnamed values than a training line's few stays unread."""
    rows = (
        (1, 3100, 5.86994, 0.0215, 9.7e-05),
        (2, 3200, 5.84037, 0.0232, 9.8e-05),
        (2, 3300, 5.83626, 0.0228, 9.8e-05),
    )
    run = _read(tmp_path, "".join(f"{e:<12}{i:<12}{v:<12}{a:<12}{lr}\n" for e, i, v, a, lr in rows))
    _same(_at(run, "loss"), {3100: 5.86994, 3200: 5.84037, 3300: 5.83626})
    assert run.meta["loss_guessed"]
    wide = "".join(f"{i} {i * 100} {v} 0.5 0.6 0.7 0.8\n" for i, v in ((1, 2.5), (2, 2.4), (3, 2.3)))
    with pytest.raises(SourceError):
        _read(tmp_path, wide)
    back = "".join(f"{e} {i} {v}\n" for e, i, v in ((2, 100, 2.5), (1, 200, 2.4), (3, 300, 2.3)))
    with pytest.raises(SourceError):
        _read(tmp_path, back)  # a first column that goes down is no epoch


def test_a_loss_on_another_line_than_the_chosen_one_is_kept_as_a_component(tmp_path):
    """A GAN script prints the discriminator's `DLoss` on its counter line and the generator's
    `L_total` on the next: the total is the training loss, and `DLoss` is kept apart as a component
    (never overwriting it), so its NaN at the first iteration is a non-finite event there."""
    block = "Epoch: 00 Iteration: {i:08d}/00100000 DLoss:{d} Reg:{d}\nL_total:{t}, L_gan:12.0000, Lx:8.2094\n"
    rows = ((1, "nan", 61.4591), (2, "6.0000", 62.4823), (3, "6.0000", 61.8670))
    run = _read(tmp_path, "".join(block.format(i=i, d=d, t=t) for i, d, t in rows))
    assert run.meta["loss_key"] == "L_total"
    comps = run.events["loss_components"]
    dloss = [comps[s]["dloss"] for s in sorted(comps) if "dloss" in comps[s]]
    assert math.isnan(dloss[0]) and dloss[1:] == [6.0, 6.0]
    assert np.isfinite(run.col("loss")).all()
    kinds = [e["kind"] for items in run.events["text_events"].values() for e in items]
    assert "nonfinite_warning" in kinds


def test_a_metric_class_named_for_a_cross_entropy_is_the_loss_even_on_one_line(tmp_path):
    """Composer prints its training metric by class (`metrics/train/LanguageCrossEntropy: nan`): a
    one-word name ending in CrossEntropy is the objective, so a paste cut at its first NaN line is read
    with that NaN beside the other metric line, not refused; a name that merely holds it is not."""
    text = "[metric][batch=0]: time/epoch: 2365 \n[metric][batch=0]: metrics/train/LanguageCrossEntropy: nan \n"
    run = _read(tmp_path, text)
    assert run.meta["loss_key"].endswith("LanguageCrossEntropy")
    assert np.isnan(run.col("loss")).all()
    from lossdoctor.sources.text_slots import _metric_named

    assert _metric_named("tokencrossentropy") and not _metric_named("crossentropy_weight_decay")


def test_a_step_0_print_of_the_first_batch_over_the_whole_interval_is_no_loss(tmp_path):
    """`cur_loss = total_loss / log_interval` printed at batch 0 (sentiment-discovery's `loss 5.54E-02 |
    ppl 1.06` before `loss 4.13E+00` at batch 100, falling from there): kept as printed, judged as no
    loss, so the run is no 'jump at step 100'; a first value the next is as many times above but that
    the loss never comes back under (Graph WaveNet's 11.5 -> 377 and up) is a real jump."""
    from lossdoctor.detectors.engine import diagnose_runs

    line = "| epoch   1 | {b:5d}/ 1930 batches | lr 5.00E-04 | loss {v} | ppl 1.00\n"
    vals = ("5.54E-02", "4.13E+00", "2.85E+00", "2.66E+00", "2.54E+00", "2.46E+00", "2.39E+00")
    run = _read(tmp_path, "".join(line.format(b=100 * i, v=v) for i, v in enumerate(vals)))
    assert run.meta["partial_interval_steps"] == [0]
    assert _at(run, "loss")[0] == pytest.approx(0.0554)  # the row is the print, as the source shows it
    assert not [f for f in diagnose_runs([run]).findings if f.severity in ("warning", "critical")]
    up = ("11.5344", "377.55", "352.2685", "376.2829", "415.7277", "427.45", "403.1333")
    jumped = _read(tmp_path, "".join(line.format(b=50 * i, v=v) for i, v in enumerate(up)))
    assert "partial_interval_steps" not in jumped.meta
    assert any(f.severity in ("warning", "critical") for f in diagnose_runs([jumped]).findings)


def test_the_number_after_a_slash_is_never_the_epoch_the_word_after_it_names(tmp_path):
    """tensorpack's end-of-epoch bar `|####| 100.00%, 109326/0 sec. train epoch 1, iter 10000/10000, loss
    0.089837`: the `0` after the slash is a total the words after it seem to name; the epoch is the 1
    after `epoch`, so the four epochs' losses sit at 10000, 20000, 30000, 40000, not all at 10000."""
    line = "|####################| 100.00%, {s}/0 sec. train epoch {e}, iter 10000/10000, loss {v}, 0.09 batches/sec.\n"
    rows = ((109326, 1, 0.089837), (108851, 2, 0.030459), (108510, 3, 0.030714), (108276, 4, 0.038624))
    run = _read(tmp_path, "".join(line.format(s=s, e=e, v=v) for s, e, v in rows))
    _same(_at(run, "loss"), {10000: 0.089837, 20000: 0.030459, 30000: 0.030714, 40000: 0.038624})


def test_a_progress_bar_of_any_fill_is_one_line_shape(tmp_path):
    """MonoCon's `| Progress [###   ][18.10%] | LR 0.000499 | Loss   6.9193 (  6.7222) |`: the bar's fill
    grows with the progress, and each length is still the same line, so the nine prints are nine
    losses (their values, not the running averages), not nine shapes of one print each."""
    fills = (1, 3, 5, 7, 10, 12, 14, 16, 18)
    vals = (6.0029, 6.9193, 7.5817, 6.245, 6.1504, 6.37, 6.2909, 6.9409, 5.5986)
    text = "==== Epoch  20 / 200 ====\n" + "".join(
        f"| Progress [{'#' * k}{' ' * (20 - k)}][{5.4 * k:5.2f}%] | LR 0.0005 | Loss   {v:.4f} (  6.7000) |\n"
        for k, v in zip(fills, vals)
    )
    run = _read(tmp_path, text)
    assert [round(float(v), 4) for v in run.col("loss")[run.logged("loss")]] == list(vals)


def test_a_csv_of_numbers_under_a_header_is_read_as_csv_whatever_its_suffix(tmp_path):
    """A Lightning `metrics.csv` committed as `.txt`, its columns a GAN's two losses (no training name
    alone): a header of names over comma-separated numbers is a CSV, read as one (the NaNs from step 0
    kept), where the text readers found no series; a comma-separated sentence is no table."""
    text = "step,epoch,train_disc_loss,train_gen_loss\n0,0,1.6e+24,nan\n1,0,nan,nan\n2,0,nan,nan\n"
    run = _read(tmp_path, text, name="metrics.txt")
    assert run.meta["format"] == "CSV log"
    from lossdoctor.sources.tabular import _numeric_rows_under

    assert not _numeric_rows_under(["loss went up, then down", "1,2", "3,4"])


def test_openpcdets_accumulated_iteration_is_the_step(tmp_path):
    """OpenPCDet prints `epoch: 4/120, acc_iter=1100, cur_iter=15/271`: `acc_iter` counts the iterations
    over every epoch, the global step (the epoch and the within-epoch counter are not)."""
    line = "2022-10-23 03:18:58,579   INFO  epoch: {e}/120, acc_iter={a}, cur_iter={c}/271, batch_size=4, loss={v}, lr=0.00035\n"
    rows = ((3, 1084, 270, 5.0307), (4, 1085, 0, 4.1177), (4, 1100, 15, 4.7449), (4, 1150, 65, 4.2571))
    bars = "epochs:   3%|▎         | 4/120 [09:51<4:40:33, 145.12s/it]\ntrain:   0%|          | 0/271 [00:00<?, ?it/s]"
    text = line.format(e=3, a=1084, c=270, v=5.0307) + bars  # the next epoch's bar glued to its first line
    run = _read(tmp_path, text + "".join(line.format(e=e, a=a, c=c, v=v) for e, a, c, v in rows[1:]))
    _same(_at(run, "loss"), {1084: 5.0307, 1085: 4.1177, 1100: 4.7449, 1150: 4.2571})


def test_a_copula_takes_none_of_the_three_words_of_a_name(tmp_path):
    """PaddleVideo's PredNet prints `avg loss so far is 0.1097`: the `is` joins the name to its value, so
    the name's three words are `loss so far` (a loss), not `so far`; a name the three words already make
    known stays as it is (`Current learning rate is 0.01` is the LR)."""
    line = "Epoch 0, Step {s}, total used time {t} (s), avg loss so far is {v}. Current learning rate is 0.01\n"
    rows = ((25, 0.1097), (50, 0.0823), (75, 0.0705), (100, 0.0648))
    evaluation = "Epoch 0, val loss is 0.0477195605635643, val mse is 0.024224352091550827.\n"
    run = _read(tmp_path, "".join(line.format(s=s, t=0.28 * s, v=v) for s, v in rows) + evaluation)
    _same(_at(run, "loss"), dict(rows))  # (named `so far`, no loss: the time was taken for it)
    _same(_at(run, "lr"), {s: 0.01 for s, _ in rows})


def test_a_learned_prefix_is_stripped_after_a_markdown_quote_on_the_first_line(tmp_path):
    """A paste quoted on its first line only (`> 21-08-10 11:12:37.463 - INFO: <epoch:193, iter: 505,000,
    ...> l_pix: 7.5744e-03`, GitHub's lazy continuation quotes the rest): the logging prefix the lines
    repeat is stripped behind the `> ` too, so the first line is a row like the others."""
    line = "21-08-10 11:{m:02d}:37.463 - INFO: <epoch:193, iter: {i}, lr:5.000e-05, , time:51.837> l_pix: {v}\n"
    values = ("7.5744e-03", "7.7541e-03", "8.7734e-03", "7.4574e-03", "7.7654e-03", "9.4102e-03")
    rows = tuple((505000 + 100 * k, v) for k, v in enumerate(values))  # (enough lines to learn the prefix from)
    text = "".join(line.format(m=k, i=f"{i:,}", v=v) for k, (i, v) in enumerate(rows))
    run = _read(tmp_path, "> " + text)
    _same(_at(run, "loss"), {i: float(v) for i, v in rows})


def test_nan_placeholders_in_a_table_read_without_its_header_are_empty_cells(tmp_path):
    """An excerpt of casanovo's `_log_history` table cut below its header: `120000  nan  0.512935`,
    `133760  0.596518  nan`: the guessed loss is `nan` exactly where the other unnamed column has a
    value, so those cells are empty, not a NaN loss; a loss that stays `nan` is one."""
    from lossdoctor.detectors.engine import diagnose_runs

    rows = (
        (120000, "nan", "0.512935"),
        (133760, "0.596518", "nan"),
        (140000, "nan", "0.459005"),
        (160000, "0.55", "nan"),
    )
    run = _read(tmp_path, "".join(f"{s}\t{a}\t{b}\t\n" for s, a, b in rows))
    _same(_at(run, "loss"), {133760: 0.596518, 160000: 0.55})
    assert not [f for f in diagnose_runs([run]).findings if f.symptom == "nonfinite"]
    stays = ((120000, "0.6", "0.51"), (133760, "0.59", "nan"), (140000, "nan", "0.45"), (160000, "nan", "nan"))
    kept = _read(tmp_path, "".join(f"{s}\t{a}\t{b}\t\n" for s, a, b in stays))
    assert math.isnan(_at(kept, "loss")[160000])


def test_a_count_and_its_unit_between_a_name_and_its_value_name_the_count_only():
    """CTR-GCN's `Mean test loss of 8 batches: 0.567`: the 8 counts batches, the 0.567 is the test loss
    (it was read as an evaluation loss of 8)."""
    from lossdoctor.sources.text_slots import NUMBER, slot_names

    text = "Mean test loss of 8 batches: 0.5670568151399493."
    assert slot_names(text, [m.span() for m in NUMBER.finditer(text)]) == ["batches", "test loss"]
    plain = "loss of the model: 0.5"  # no count between: nothing moves
    assert slot_names(plain, [m.span() for m in NUMBER.finditer(plain)]) == ["of the model"]


def test_a_table_cell_holding_a_list_of_numbers_is_their_sum(tmp_path):
    """DeepXDE prints one loss per term of its objective in brackets under a header of names pasted
    with an opening backtick: `0   [5.47e+03]   [6.44e+03]   [1.00e+00]`; a cell's list is the total
    (its sum), and the `[nan]` rows are the run's NaN from step 2000."""
    text = (
        "`Step      Train loss              Test loss               Test metric\n"
        "0         [5.00e+03, 4.70e+02]    [6.44e+03, 1.00e+00]    [1.00e+00]\n"
        "1000      [5.47e+03, 1.00e+00]    [6.44e+03, 2.00e+00]    [1.00e+00]\n"
        "2000      [nan, nan]              [nan, nan]              [nan]\n"
        "3000      [nan, nan]              [nan, nan]              [nan]\n"
    )
    run = _read(tmp_path, text, name="train.md")
    _same(_at(run, "loss"), {0: 5470.0, 1000: 5471.0, 2000: math.nan, 3000: math.nan})


def test_all_loss_beside_its_parts_is_the_total(tmp_path):
    """MTCNN prints `det loss: 0.68, bbox loss: 0.045, all_loss: 0.70`: `all_loss` is the weighted sum,
    the training loss, in the console reader and the general reader alike."""
    from lossdoctor.sources.text_slots import total_rank

    line = "2022-11-21 19:27:39.088521 : Epoch: 1, Step: {s}, accuracy: 0.8, det loss: {d}, bbox loss: 0.04, all_loss: {a}, lr:0.01\n"
    rows = ((0, 0.6803, 0.7027), (200, 0.2714, 0.2827), (400, 0.2250, 0.2366))
    run = _read(tmp_path, "".join(line.format(s=s, d=d, a=a) for s, d, a in rows))
    _same(_at(run, "loss"), {s: a for s, _, a in rows})
    assert total_rank("all_loss") < total_rank("det loss")


def test_a_loss_printed_once_after_each_run_of_finer_prints_is_their_summary(tmp_path):
    """A GCN script prints `iter:0020 loss_train: 2.1153` every 20 iterations and, after each epoch,
    `this epoch:` / `loss= 1.5874 accuracy= 0.5614`: the plain name `loss` ranks first, but its rows close
    each run of the finer ones, so those are the training loss (it was read as five epoch means)."""
    text = ""
    for epoch in range(3):
        for k in range(1, 5):
            text += f"[2022-06-26 21:43:42,483]iter:{20 * k:04d} loss_train: {2.0 - 0.3 * epoch - 0.05 * k:.4f} acc_train: 0.5 time: 0.1659s\n"
        text += f"[2022-06-26 21:44:04,145]this epoch:\nloss= {1.9 - 0.3 * epoch:.4f} accuracy= 0.56\n"
    run = _read(tmp_path, text)
    assert run.logged("loss").sum() == 12
    assert run.meta["loss_key"] == "loss_train"


def test_a_batch_counter_that_starts_again_is_counted_on_and_a_resume_is_not(tmp_path):
    """A counter back at its beginning (a new epoch nobody numbered) goes on from the last step;
    one that goes back to a middle value (a resume from a checkpoint) is left as printed."""
    run = _read(tmp_path, "".join(f"iter {i} loss {v}\n" for i, v in ((10, 2.3), (20, 2.2), (10, 2.1), (20, 2.0))))
    _same(_at(run, "loss"), {10: 2.3, 20: 2.2, 30: 2.1, 40: 2.0})
    resumed = "".join(f"iter {i} loss {v}\n" for i, v in ((100, 2.3), (200, 2.2), (300, 2.1), (150, 2.15), (250, 2.05)))
    assert sorted(_at(_read(tmp_path, resumed), "loss")) == [100, 150, 200, 250, 300]


def test_an_rl_reward_is_read_beside_the_loss_and_a_reward_term_is_not(tmp_path):
    """RL fine-tuning's reward (`reward`, `rewards/mean`, verl's `critic/rewards/mean`) is its own
    column in every reader; a reward function's own term (`rewards/format_reward`) and the spread
    (`reward_std`) are not the reward, and no reward is ever the loss."""
    from lossdoctor.sources.columns import column_for

    assert column_for("reward")[0] == column_for("critic/rewards/mean")[0] == column_for("rewards/mean")[0] == "reward"
    assert column_for("rewards/format_reward") is None and column_for("reward_std") is None
    dicts = "".join(
        f"{{'loss': {v}, 'rewards/format_reward': 1.0, 'reward': {r}, 'reward_std': 0.4, 'epoch': 0.{k}}}\n"
        for k, (v, r) in enumerate(((0.0, 0.61), (-0.02, 0.66), (0.01, 0.7)), 1)
    )
    run = _read(tmp_path, dicts)
    assert list(run.cols["reward"][run.logged("reward")]) == [0.61, 0.66, 0.7]
    assert list(run.cols["loss"][run.logged("loss")]) == [0.0, -0.02, 0.01]
    lines = "".join(f"Episode {e} reward: {r} step {s}\n" for e, s, r in ((1, 10, 0.5), (2, 20, 0.7), (3, 30, 0.9)))
    run = _read(tmp_path, lines)  # a reward and no loss: the reward read, no loss taken for it
    assert not run.has("loss") and _at(run, "reward") == {10: 0.5, 20: 0.7, 30: 0.9}


@pytest.mark.parametrize(
    "line",
    [
        "Epoch: 1/1, Iteration: {s}/5000, Training Loss: {v}",
        "[rank{r}] step {s} | loss {v:.4f}",
        "it={s} objective {v} (rank {r})",
    ],
)
def test_a_steps_late_copy_from_another_rank_is_no_restart(tmp_path, line):
    """Every rank prints each step; one rank's copy of step 1 arrives after another's step 2. The
    counter did not start again: the steps stay 1, 2, 3 (a counter back at its beginning that then
    goes on from there is still counted on: `test_a_batch_counter_that_starts_again...`)."""
    order = [(0, 1), (1, 1), (2, 1), (0, 2), (3, 1), (1, 2), (2, 2), (3, 2), (0, 3), (1, 3), (2, 3), (3, 3)]
    loss = {1: 2.5, 2: 2.25, 3: 2.0}
    run = _read(tmp_path, "".join(line.format(r=r, s=s, v=loss[s]) + "\n" for r, s in order))
    assert sorted(set(run.steps.tolist())) == [1, 2, 3]
    _same(_at(run, "loss"), loss)


@pytest.mark.parametrize("glue", ["", "]"])
def test_two_records_glued_after_a_value_are_read_apart(tmp_path, glue):
    """Two processes writing one terminal lose a newline: `... Training Loss: nanEpoch: 1/1, Iteration: 2/...`.
    The general reader splits where the line's opening words start again right after a value (or a
    bracket), so both records are read."""
    rec = "Epoch: 1/1, Iteration: {s}/900, Training Loss: {v}" + glue
    lines = [rec.format(s=1, v=2.5) + rec.format(s=2, v="nan"), rec.format(s=3, v=2.1), rec.format(s=4, v=2.0)]
    p = tmp_path / "glued.log"
    p.write_text("\n".join(lines) + "\n")
    run = any_text.read(p)[0]
    _same(_at(run, "loss"), {1: 2.5, 2: math.nan, 3: 2.1, 4: 2.0})


@pytest.mark.parametrize(
    "fmt",
    [
        "iter: {s:>9,}, lr: 0.0002, loss: {v}",
        "step={s:,} tokens={t:,} loss={v}",
        "[step: {s:,}] loss: {v} | seen: {t:,}",
    ],
)
def test_a_number_with_thousands_separators_is_one_number(tmp_path, fmt):
    """`25,390` after a name's `:` or `=` is twenty-five thousand (BasicSR's `iter:  25,390,`, OLMo's
    `total_tokens=1,048,576`); a comma list (`1,200,0.5`) is not one number."""
    rows = [(25390, 2.31), (25400, 2.25), (1002000, 2.19)]
    run = _read(tmp_path, "".join(fmt.format(s=s, t=s * 4096, v=v) + "\n" for s, v in rows))
    _same(_at(run, "loss"), dict(rows))
    from lossdoctor.sources.text_slots import whole_numbers

    assert whole_numbers("x=1,200,0.5") == "x=1,200,0.5" and whole_numbers("a: 1,2") == "a: 1,2"


@pytest.mark.parametrize("names", [("CrossEntropyLoss", "Perplexity"), ("MSELoss", "RMSE"), ("NLLLoss", "ppl")])
def test_a_loss_named_by_its_criterion_class_is_the_loss(tmp_path, names):
    """A loss printed under its criterion's class name (`nn.CrossEntropyLoss`: OLMo's
    `train/CrossEntropyLoss`, `type(criterion).__name__`) is the training loss, not a part of one,
    and beats a derived metric beside it (perplexity); two criteria on one line are parts."""
    crit, other = names
    rows = [(1, 4.1, 60.3), (2, 3.2, 24.5), (3, 2.9, 18.1)]
    run = _read(tmp_path, "".join(f"epoch {e} train/{crit}={v} train/{other}={p}\n" for e, v, p in rows))
    _same(_at(run, "loss"), {e: v for e, v, _ in rows})
    two = "".join(f"step {s} DiceLoss: {a} BCEWithLogitsLoss: {b}\n" for s, a, b in ((1, 0.5, 0.25), (2, 0.4, 0.125)))
    run = _read(tmp_path, two)
    _same(_at(run, "loss"), {1: 0.75, 2: 0.525})
    assert run.meta["loss_key"] == "DiceLoss + BCEWithLogitsLoss"


_HEADED_RECORDS = [
    # OLMo-like: a logger's header naming the step, then indented name=value lines
    (
        "2024-08-06 10:00:0{k}.5 host-77:0  trainer.loop:412  INFO    [step={s}/5000,epoch=0]\n"
        "    optim/total_grad_norm={g}\n    train/CrossEntropyLoss={v}\n    train/Perplexity={p}\n",
        "train/CrossEntropyLoss",
    ),
    # Coqui-like: a header with the time and two counters, then `| > name: value  (average)` lines
    (
        " --> TIME: 2024-03-18 13:3{k}:18 -- STEP: {s}/496 -- GLOBAL_STEP: {s}\n     | > loss: {v}  (2.9)\n"
        "     | > grad_norm: {g}  (1.1)\n     | > current_lr: 0.0001 \n",
        "loss",
    ),
    # another trainer's: `==> step N (when)` then `  * name = value`
    ("==> step {s} (2024-01-01 10:0{k}:00)\n  * objective = {v}\n  * grad norm = {g}\n", "objective"),
]


@pytest.mark.parametrize("block,key", _HEADED_RECORDS)
def test_records_under_a_header_that_names_the_step_take_that_step(tmp_path, block, key):
    """A record printed one `name: value` a line under a header line that names the step and else
    only when it was printed: the record is that step's, whatever keys each block holds (the last
    block below is cut short: a key less is the same series)."""
    rows = [(10, 3.1, 5.5, 22.2), (20, 2.7, 4.4, 14.9), (30, 2.5, 3.3, 12.2)]
    text = "".join(block.format(k=k, s=s, v=v, g=g, p=p) for k, (s, v, g, p) in enumerate(rows))
    text = text[: text.rfind("\n", 0, len(text) - 1) + 1]  # the log ends before the last line of the last block
    run = _read(tmp_path, text)
    _same(_at(run, "loss"), {s: v for s, v, _, _ in rows})
    assert run.meta["loss_key"] == key and run.meta["steps_from"] == "log"
    assert {10: 5.5, 20: 4.4}.items() <= _at(run, "grad_norm").items() <= {10: 5.5, 20: 4.4, 30: 3.3}.items()


_RL_LINES = [
    # verl's console logger: `step:N - key:value - ...`, the actor's and the critic's metrics by section
    (
        "step:{s} - actor/pg_loss:{p} - actor/kl_loss:0.001 - actor/entropy_loss:0.{k}3 - critic/vf_loss:{c} - "
        "critic/score/mean:0.4{k} - response_length/mean:212.{k}",
        "actor/pg_loss",
    ),
    # OpenRLHF-style postfix of a PPO trainer's bar: the policy's and the critic's losses, the reward, the KL
    ("Train step {s}: policy_loss={p}, critic_loss={c}, reward=0.4{k}, kl=0.00{k}, lr=1e-06", "policy_loss"),
    # DeepSpeed-Chat's step-3 print: `act_loss`, `cri_loss` and the unsupervised loss
    ("epoch: 0|step: {s}|ppo_ep: 1|act_loss: {p}|cri_loss: {c}|unsuper_loss: 0.0", "act_loss"),
]


@pytest.mark.parametrize("line,key", _RL_LINES)
def test_an_rl_policy_loss_is_the_loss_and_its_critic_a_component(tmp_path, line, key):
    """With no total printed, an RL trainer's policy loss (`actor/pg_loss`, `policy_loss`, `act_loss`) is
    the training loss, near 0 or below it by design; the critic's loss (another model) and the KL and
    entropy terms are kept as components, never summed into it. A GAN's adversaries stay two."""
    rows = [(5, -0.012, 0.52), (6, 0.031, 0.48), (7, "nan", 0.47)]
    run = _read(tmp_path, "".join(line.format(s=s, p=p, c=c, k=k) + "\n" for k, (s, p, c) in enumerate(rows)))
    assert run.meta["loss_key"] == key
    _same(_at(run, "loss"), {5: -0.012, 6: 0.031, 7: math.nan})
    comps = run.events["loss_components"]
    assert any(v == 0.48 for v in comps[6].values())  # the critic's loss, kept
    assert has(run.notes, "text.policy_loss", key=key)


@pytest.mark.parametrize(
    "line",
    [
        # PaddleOCR's tools/program.py: `'{}: {:x<6f}'.format(k, v)` for each metric, joined with `, `
        "epoch: [3/1000], global_step: {s}, lr: 0.000010, acc: 0.72, loss: {v}, avg_reader_cost: 0.01 s",
        # the same fill in a line the general reader takes apart
        "[train] it {s} | objective {v} | seen 1280 samples",
    ],
)
def test_a_nan_padded_by_a_fill_character_is_a_nan(tmp_path, line):
    """Python's format with a fill character (`{:x<6f}`) pads a value shorter than its width: NaN
    prints `nanxxx`, -inf `-infxx` (a finite value has six decimals and is never padded). Both are
    the non-finite values they spell, never a word that hides the fault."""
    vals = [2.769068, 2.762494, float("nan"), 2.75, float("-inf")]
    text = "".join(line.format(s=144 + i, v=f"{v:x<6f}") + "\n" for i, v in enumerate(vals))
    assert "nanxxx" in text and "-infxx" in text
    run = _read(tmp_path, text)
    _same(_at(run, "loss"), {144 + i: v for i, v in enumerate(vals)})


def test_a_clocks_seconds_are_not_named_by_the_word_after_them(tmp_path):
    """semseg-style trainers print the time left as a clock (`Remain 80:39:57 Loss 1.0328`): its
    minutes and seconds have no name in front of them, and the `Loss` after them names the loss,
    never the clock's seconds (hours past 23 included)."""
    line = (
        "INFO train.py line 249] Epoch: [1/100][{s}/2976] Data 0.001 (0.004) Batch 0.935 (0.982) "
        "Remain {h}:{m:02d}:{sec:02d} Loss {v} Main Loss {v} Accuracy 0.5974.\n"
    )
    vals = [1.0328, 0.9971, float("nan")]
    text = "".join(line.format(s=100 * (i + 1), h=80 - i, m=39 - i, sec=57 - 7 * i, v=v) for i, v in enumerate(vals))
    run = _read(tmp_path, text)
    assert run.meta["loss_key"] == "Loss"
    _same(_at(run, "loss"), {100 * (i + 1): v for i, v in enumerate(vals)})


def test_a_tuple_of_values_after_a_tuple_of_names_takes_their_names(tmp_path):
    """A script prints an epoch's extremes and average as tuples (`print("train loss (min, avg, max):",
    (lo, avg, hi))`): the average is the training loss, the extremes are no loss; the validation
    line's average is the evaluation loss. A NaN average is read as the NaN it is."""
    out = io.StringIO()
    epochs = [(-0.276, 4.1, 1152.61, 3.9), (0.5, 3.2, 7.4, 3.3), (0.0, float("nan"), float("inf"), float("nan"))]
    for e, (lo, avg, hi, val) in enumerate(epochs, 1):
        print(f"Epochs:[{e}]/[25]", file=out)
        print("train loss (min, avg, max):", (lo, avg, hi), file=out)
        print("validation loss (min, avg, max):", (lo, val, hi), file=out)
    run = _read(tmp_path, out.getvalue())
    assert run.meta["loss_key"] == "train loss" and run.meta["eval_loss_key"] == "validation loss"
    loss = list(_at(run, "loss").values())
    assert loss[:2] == [4.1, 3.2] and math.isnan(loss[2]) and len(loss) == 3


def test_a_loss_whose_name_the_other_losses_extend_is_their_head(tmp_path):
    """PSENet's train.py logs `batch_loss` beside `batch_loss_c` and `batch_loss_s` (its text and kernel
    parts): no total's name is printed, but the name the others extend is the loss the script
    computed, read as printed and never summed with its own parts."""
    line = (
        "2019-07-19 02:41:13 INFO      train.py: [0/600], [{s}/2174], step: {s}, 4.418 samples/sec, "
        "batch_loss: {a:.4f}, batch_loss_c: {b:.4f}, batch_loss_s: {c:.4f}, time:9.0540, lr:0.0001\n"
    )
    rows = [(10, 0.95, 0.7, 0.25), (20, 0.91, 0.66, 0.25), (30, 0.88, 0.64, 0.24)]
    run = _read(tmp_path, "".join(line.format(s=s, a=a, b=b, c=c) for s, a, b, c in rows))
    assert run.meta["loss_key"] == "batch_loss" and not run.meta["loss_guessed"]
    _same(_at(run, "loss"), {s: a for s, a, _, _ in rows})


def test_a_word_between_two_numbers_names_the_one_after_it_and_cv_is_an_evaluation(tmp_path):
    """WeTTS's and WeNet's executors print `Epoch 1 [TRAIN] progress 10/2754 loss 0.66 ...` and, for the
    cross-validation pass, `Epoch 0 [CV] progress 290/341 loss nan ...`: `loss` names the number after it,
    never the batch total before it, and the `[CV]` lines are the evaluation's, not training rows."""
    train = "Epoch {e} [TRAIN] progress {s}/2754 loss {v} polyphone_loss 0.45 polyphone_acc 0.89 prosody_loss {v} prosody_acc 0.74\n"
    cv = "Epoch {e} [CV] progress {s}/341 loss {v} polyphone_loss 1.02 polyphone_acc 0.71 prosody_loss {v} prosody_acc 0.70\n"
    text = "".join(cv.format(e=0, s=s, v=v) for s, v in ((290, "nan"), (300, "0.93"), (310, "0.91")))
    text += "Epoch 1/10...\n" + "".join(
        train.format(e=1, s=s, v=v) for s, v in ((0, "0.610886"), (10, "0.666556"), (20, "nan"))
    )
    run = _read(tmp_path, text)
    assert run.meta["loss_key"] == "loss" and run.meta["eval_loss_key"] == "loss"
    _same(_at(run, "loss"), {0: 0.610886, 10: 0.666556, 20: math.nan})


def test_a_bracketed_evaluation_section_ends_at_the_next_bracketed_label(tmp_path):
    """Landmark attention's trainer prints `0/1400 [train] loss=nan [val] loss=nan, pp=nan, acc=0.0009
    [time per itr] 1183.48ms [lr] 0.00041`: the `[val]` section ends at the next label in brackets, so
    the learning rate after it is the run's, not the evaluation's."""
    line = "0/{s} [train] loss={v} [val] loss={v}, pp=371.43, acc=0.185491 [time per itr] 1403.69ms [lr] {lr}\n"
    rows = [(200, "5.945", 0.00003), (400, "5.655", 0.00005), (600, "nan", 0.0001)]
    run = _read(tmp_path, "".join(line.format(s=s, v=v, lr=f"{lr:.5f}") for s, v, lr in rows))
    _same(_at(run, "lr"), {s: lr for s, _, lr in rows})
    _same(_at(run, "loss"), {200: 5.945, 400: 5.655, 600: math.nan})
    assert run.meta["eval_loss_key"] == "loss"


def test_the_total_after_a_loss_label_is_the_loss(tmp_path):
    """pytorch-yolo2's region_loss.py prints `'%d: nGT %d, recall %d, proposals %d, loss: x %f, y %f, w %f,
    h %f, conf %f, cls %f, total %f'`: the numbers after the `loss:` label are the loss's parts and
    their `total` is the loss (its float32 sum is not the printed parts' sum to their digits)."""
    fmt = "%d: nGT %d, recall %d, proposals %d, loss: x %f, y %f, w %f, h %f, conf %f, cls %f, total %f\n"
    rows = [(64, 27.03, 1711906.125), (80, 23.9, 310.5), (96, 21.0, float("nan"))]
    text = "".join(fmt % (seen, 42, 1, 35613, x, 28.6, 1.5, 2.5, 30.2, 108.1, total) for seen, x, total in rows)
    text += "coord_mask: tensor(27.0292, device='cuda:0')\n" * 2
    run = _read(tmp_path, text)
    assert run.meta["loss_key"] == "total loss" and not run.meta["loss_guessed"]
    _same(_at(run, "loss"), {seen: total for seen, _, total in rows})


def test_a_step_timing_is_no_loss_and_its_nan_with_a_unit_is_read(tmp_path):
    """modded-nanogpt prints `step:{step}/{n} val_loss:{v:.4f} train_time:{t:.0f}ms step_avg:{a:.2f}ms`,
    whose first line has no average yet (`step_avg:nanms`): that line is a row like the others, and a
    step's timing is never taken for the training loss."""
    line = "step:{s}/1480 val_loss:{v:.4f} train_time:{t:.0f}ms step_avg:{a:.2f}ms\n"
    rows = [
        (0, 7.7109, 0, float("nan")),
        (125, 4.3719, 29736, 258.57),
        (250, 3.9992, 62563, 260.68),
        (375, 3.8241, 96107, 263.31),
    ]
    run = _read(tmp_path, "".join(line.format(s=s, v=v, t=t, a=a) for s, v, t, a in rows))
    assert "nanms" in (tmp_path / "train.log").read_text()
    assert "loss" not in run.cols and run.meta["eval_loss_key"] == "val_loss"
    _same(_at(run, "eval_loss"), {s: v for s, v, _, _ in rows})


def test_a_loss_named_a_total_beats_a_metric_named_loss(tmp_path):
    """HiFi-GAN's train.py prints `'Steps : {:d}, Gen Loss Total : {:4.3f}, Mel-Spec. Error : {:4.3f}, s/b :
    {:4.3f}'`: the generator's total is the loss it steps on; the mel error (a metric's name) is not."""
    fmt = "Steps : {:d}, Gen Loss Total : {:4.3f}, Mel-Spec. Error : {:4.3f}, s/b : {:4.3f}\n"
    rows = [(1380, 77.188, 1.468), (1385, 75.907, 1.452), (1390, 70.489, 1.303)]
    run = _read(tmp_path, "".join(fmt.format(s, g, m, 1.16) for s, g, m in rows))
    assert run.meta["loss_key"] == "Gen Loss Total" and not run.meta["loss_guessed"]
    _same(_at(run, "loss"), {s: g for s, g, _ in rows})


def test_an_epoch_line_under_a_loguru_prefix_padded_with_spaces_dates_the_rows_after_it(tmp_path):
    """loguru's default format (`{time} | {level: <8} | {name}:{function}:{line} - {message}`) with the
    dash padded by an extra space in a paste: the prefix is still cut, so the `epoch=N` line alone dates
    the `train_loss=...` row after it, as the lines printed with one space do."""
    head = "2019-11-22 15:36:56.690 | INFO     | bert_sentiment.train:train:{n}{pad}- "
    text = ""
    for e, (tr, va) in ((1, (0.0481, 0.0378)), (2, (0.0312, 0.041)), (29, (0.001, 0.0916))):
        text += head.format(n=86, pad="  " if e == 1 else " ") + f"epoch={e}\n"
        text += head.format(n=88, pad=" ") + f"train_loss={tr:.4f}, val_loss={va:.4f}, test_loss=0.0370\n"
    run = _read(tmp_path, text)
    _same(_at(run, "loss"), {1: 0.0481, 2: 0.0312, 29: 0.001})


def _terminal(stream: str) -> str:
    """What a terminal shows of a stream: `\\r` goes back to the line's start and the next print
    overwrites it in place, leaving the tail of a longer line (what a paste of the screen holds)."""
    shown = []
    for line in stream.split("\n"):
        screen = ""
        for part in line.split("\r"):
            screen = part + screen[len(part) :]
        shown.append(screen)
    return "\n".join(shown)


def test_a_record_value_overwritten_in_place_keeps_its_number(tmp_path):
    """A Keras callback prints `Epoch    :  7` / `LOSS     :  29.43734` one pair a line while a data
    generator draws `Generating train data 10/10` with `\\r`: the terminal shows `Epoch    :  7ain data
    10/10`. The number before the bar's tail is still the epoch, and its loss row is read."""
    stream = ""
    for e, loss in ((5, "24.569025"), (6, "20.572273"), (7, "29.43734"), (8, "nan")):
        gen = "".join(f"Generating train data {k}/10\r" for k in (2, 4, 6, 8, 10)) if e == 7 else ""
        stream += f"called epoch end, epoch num:  {e - 1}\n{gen}Epoch    :  {e}\nLOSS     :  {loss}\n\n"
    text = _terminal(stream)
    assert "Epoch    :  7ain data 10/10" in text
    run = _read(tmp_path, text)
    _same(_at(run, "loss"), {5: 24.569025, 6: 20.572273, 7: 29.43734, 8: math.nan})


def test_wenet_batch_lines_of_several_ranks_read_rank_zero_at_its_batch(tmp_path):
    """WeNet's executor logs `'TRAIN Batch {}/{} loss {:.6f} '.format(epoch, batch_idx, loss)`, the loss
    parts, then `'lr {:.8f} rank {}'.format(lr, rank)`, each rank printing each step: `4/203700` is the
    epoch and the batch (its second number moves, so it is no total), and the lowest rank's lines are read."""
    out = []
    for batch in (203700, 203800, 203900):
        for rank in (0, 2, 1) if batch != 203800 else (2, 1, 0):
            loss = 12.0 + batch / 1e5 + rank
            msg = f"TRAIN Batch 4/{batch} loss {loss:.6f} loss_att {loss - 1:.6f} loss_ctc {loss + 3:.6f} lr {0.00032621:.8f} rank {rank}"
            out.append(f"2023-01-30 18:47:07,107 DEBUG {msg}")
    run = _read(tmp_path, "\n".join(out) + "\n")
    _same(_at(run, "loss"), {b: 12.0 + b / 1e5 for b in (203700, 203800, 203900)})
    assert has(run.notes, "text.one_rank", n=3)


def test_a_loss_named_like_a_part_that_sums_the_others_is_the_total_not_summed_again(tmp_path):
    """ICSRec prints `rec_avg_loss`, `icl_avg_loss` and their sum `joint_avg_loss` as string values in
    a dict: the joint one is the loss the script steps on; adding it to its parts would double it."""
    rows = []
    for epoch, (rec, icl) in enumerate([(7.7207, 2.6909), (7.6877, 2.6886), (7.6589, 2.6870)], start=22):
        d = {"epoch": epoch, "rec_avg_loss": f"{rec:.4f}", "icl_avg_loss": f"{icl:.4f}"}
        d["joint_avg_loss"] = f"{rec + icl:.4f}"
        rows.append(str(d))
        rows.append(str({"Epoch": epoch, "HIT@5": "0.0428", "NDCG@5": "0.0300"}))
    run = _read(tmp_path, "\n".join(rows) + "\n")
    _same(_at(run, "loss"), {22: 10.4116, 23: 10.3763, 24: 10.3459})
    assert run.meta["loss_key"] == "joint_avg_loss"


def test_a_bare_loss_beside_a_train_loss_is_the_other_loss(tmp_path):
    """DeepICF prints its test loss bare and its training loss named (`loss = 0.2525 [54.1s] train_loss =
    0.3235`): the named one is the training loss, the bare one is kept as the evaluation's."""
    text = "".join(
        f"Epoch {e} [153.6s + 600.3s]: HR = 0.5296, NDCG = 0.2971, loss = {t:.4f} [54.1s] train_loss = {tr:.4f} [184.5s]\n"
        for e, (t, tr) in enumerate([(0.2525, 0.3235), (0.2550, 0.2908), (0.2763, 0.2734), (0.2468, 0.2640)])
    )
    run = _read(tmp_path, text)
    _same(_at(run, "loss"), {0: 0.3235, 1: 0.2908, 2: 0.2734, 3: 0.2640})
    _same(_at(run, "eval_loss"), {0: 0.2525, 1: 0.2550, 2: 0.2763, 3: 0.2468})


def test_a_total_step_that_grows_every_line_is_the_step_and_a_planned_total_is_not(tmp_path):
    """InsightFace-TF's `epoch 0, total_step 90180, total loss is 15.06 , ...`: a `total` step count that
    grows on every line is the steps taken so far; `total_steps 1000` printed alike on every line is the plan."""
    losses = [15.06, 15.34, 14.04, 17.67, float("nan")]
    text = "".join(
        f"epoch 0, total_step {90180 + 20 * i}, total loss is {v:.2f} , inference loss is {v - 6.77:.2f}, "
        f"weight deacy loss is 6.77, training accuracy is 0.312500, time 124.800 samples/sec\n"
        for i, v in enumerate(losses)
    )
    run = _read(tmp_path, text)
    _same(_at(run, "loss"), {90180 + 20 * i: v for i, v in enumerate(losses)})
    planned = "".join(f"iter {i + 1}, total_steps 1000, loss {2.0 - 0.1 * i:.2f}\n" for i in range(5))
    run = _read(tmp_path, planned, name="planned.log")
    assert sorted(_at(run, "loss")) == [1, 2, 3, 4, 5]


@pytest.mark.parametrize("stays_nan", [False, True])
def test_nan_cells_of_a_table_that_alternates_train_and_valid_rows_are_empty_cells(tmp_path, stays_nan):
    """casanovo's `_log_history` table prints a validation row with `nan` under `Train loss` and a
    training row with `nan` under `Valid loss`: each `nan` sits where the other column has a value, and
    both are finite again later. Those are empty cells; a training loss that goes NaN and stays NaN is
    the run's, whatever the other column."""
    prefix = "2024-08-19 13:28:48,101 INFO [casanovo/MainProcess] model._log_history : "
    rows = [(20000, "nan", "1.594399"), (33440, "1.816622", "nan"), (40000, "nan", "1.010075")]
    rows += [(66880, "nan" if stays_nan else "0.945725", "nan"), (80000, "nan", "0.643513")]
    rows += [(100320, "nan" if stays_nan else "0.712074", "nan")]
    text = prefix + "Step\tTrain loss\tValid loss\t\n" + "".join(f"{prefix}{s}\t{a}\t{b}\n" for s, a, b in rows)
    run = _read(tmp_path, text)
    if stays_nan:
        assert math.isnan(_at(run, "loss")[66880]) and math.isnan(_at(run, "loss")[100320])
        return
    _same(_at(run, "loss"), {33440: 1.816622, 66880: 0.945725, 100320: 0.712074})
    _same(_at(run, "eval_loss"), {20000: 1.594399, 40000: 1.010075, 80000: 0.643513})
    out = run_cli("diagnose", tmp_path / "train.log", "--format", "json")
    report = json.loads(out.stdout)
    assert report["status"] != "critical"
    assert any(n["key"] == "text.nan_placeholders" for n in report.get("notes_data", [])), report.get("notes_data")


@pytest.mark.parametrize(
    "line",
    [
        "Epoch {e}. Current Loss: {v}.",  # MXNet Gluon tutorials: a sentence ends right after the number
        "Epoch: {e}/3... Step: {s}... Loss: {v}... Val Loss: {v}",  # Udacity's notebooks
        "For batch {s}, loss is {v:>7}.",  # a Keras callback's print, right-aligned
    ],
)
def test_a_nan_that_ends_a_sentence_is_read_where_its_number_was(tmp_path, line):
    values = ["2.3102", "2.2531", "2.1044", "nan", "nan"]
    text = "".join(line.format(e=i + 1, s=10 * (i + 1), v=v) + "\n" for i, v in enumerate(values))
    run = _read(tmp_path, text)
    got = [v for _, v in sorted(_at(run, "loss").items())]
    assert got[:3] == [2.3102, 2.2531, 2.1044] and all(math.isnan(v) for v in got[3:]) and len(got) == 5


def test_a_meters_current_value_is_the_loss_not_its_average(tmp_path):
    """Speech-Transformer: `Epoch 1 | Iter 10 | Average Loss 2.326 | Current Loss 2.326479 | 0.2 ms/batch`."""
    pairs = [(2.326, 2.326479), (2.257, 2.187191), (2.201, 2.089553)]
    text = "".join(
        f"Epoch 1 | Iter {10 * (i + 1)} | Average Loss {a:.3f} | Current Loss {c:.6f} | 0.2 ms/batch\n"
        for i, (a, c) in enumerate(pairs)
    )
    run = _read(tmp_path, text)
    _same(_at(run, "loss"), {10 * (i + 1): c for i, (_, c) in enumerate(pairs)})


def test_the_keras_guides_custom_loop_print_names_its_value_by_the_words_before_at_step(tmp_path):
    """keras.io's "Writing a training loop from scratch": `print("Training loss (for one batch) at step
    %d: %.4f" % (step, float(loss_value)))`."""
    values = [2.3612, 2.2541, 2.1007, float("nan")]
    text = "".join("Training loss (for one batch) at step %d: %.4f\n" % (200 * i, v) for i, v in enumerate(values))
    run = _read(tmp_path, text)
    _same(_at(run, "loss"), {200 * i: v for i, v in enumerate(values)})


def test_a_count_inside_the_remark_before_at_step_is_no_counter(tmp_path):
    """The same guide in its torch backend prints `Training loss (for 1 batch) at step 100: 8.9801`: the
    1 inside the parenthesised remark is part of the remark, so the value still takes the name in
    front of the counters and the step is the step's."""
    values = [59.2206, 8.9801, 5.2990, 3.6978]
    text = "".join(
        "Training loss (for 1 batch) at step %d: %.4f\nSeen so far: %d samples\n" % (100 * i, v, 32 + 3200 * i)
        for i, v in enumerate(values)
    )
    run = _read(tmp_path, text)
    _same(_at(run, "loss"), {100 * i: v for i, v in enumerate(values)})


def test_a_tf_print_of_a_cross_entropy_abbreviation_is_the_loss(tmp_path):
    """TF1's `tf.Print(ce, [ce], "CrossE")` through glog: `I tensorflow/core/kernels/logging_ops.cc:64]
    CrossE[472.02966]`, one line per step and no step number: `CrossE` is a cross-entropy's name."""
    values = [472.02966, 475.11697, 1418.6655, 1546.3833, float("nan")]
    text = "".join(
        f"I tensorflow/core/kernels/logging_ops.cc:64] CrossE[{'nan' if math.isnan(v) else v}]\n" for v in values
    )
    run = _read(tmp_path, text)
    got = run.col("loss")[np.argsort(run.steps)]
    assert got[:4].tolist() == values[:4] and math.isnan(got[4])


def test_up_to_batch_is_the_step_counter_of_the_keras_guides_callback(tmp_path):
    """keras.io's callbacks guide: `Up to batch 3, the average loss is  250.62.`, the batch counting from
    0 again each epoch: `batch` after `to` is the step, continued across the epochs."""
    epochs = ([29.25, 485.36, 330.94, 250.62], [5.10, 4.80, 4.96, 4.96])
    text = "".join(
        "".join(f"Up to batch {b}, the average loss is {v:7.2f}.\n" for b, v in enumerate(vals))
        + f"The average loss for epoch {e} is {vals[-1]:7.2f} and mean absolute error is    6.01.\n"
        for e, vals in enumerate(epochs)
    )
    run = _read(tmp_path, text)
    assert run.meta["steps_from"] == "log"
    _same(_at(run, "loss"), {i: v for i, v in enumerate(epochs[0] + epochs[1])})


def test_a_yolov5_results_txt_without_header_reads_its_total_loss_by_epoch(tmp_path):
    """YOLOv5 writes results.txt with no header: `epoch/last`, GPU memory, box, obj, cls, total, labels,
    image size, P, R, mAP@.5, mAP@.5:.95, val box, obj, cls. The printed total is the loss, by epoch."""
    rows = [
        (0, 0.09854, 0.09318, 0.1917, 0.09176),
        (1, 0.09296, 0.1009, 0.1939, 0.0922),
        (2, 0.0913, 0.1026, 0.1939, 0.0968),
    ]
    text = "".join(
        f"{f'{e}/29':>10}{'1.93G':>10}{b:>10.4g}{o:>10.4g}{0:>10}{t:>10.4g}{37:>10}{416:>10}"
        f"{0.048:>10.4g}{0.015:>10.4g}{0.0076:>10.4g}{0.0014:>10.4g}{v:>10.4g}{0.055:>10.4g}{0:>10}\n"
        for e, b, o, t, v in rows
    )
    run = _read(tmp_path, text, name="results.txt")
    _same(_at(run, "loss"), {e: t for e, _, _, t, _ in rows})


def test_a_loggers_channel_glued_by_a_hyphen_says_evaluation(tmp_path):
    """FastEstimator prints `FastEstimator-Train: step: 1400; ce: 0.15;` and, after each epoch,
    `FastEstimator-Eval: step: 1875; epoch: 1; accuracy: 0.98; ce: 0.042;`: the `-Eval:` channel makes
    its `ce` the evaluation loss, kept apart from the training loss."""
    train = [(1400, 0.1516164), (1500, 0.066313066), (1600, 0.1330988), (1700, 0.0854), (1800, 0.0245)]
    lines = [f"FastEstimator-Train: step: {s}; ce: {v}; steps/sec: 73.41;" for s, v in train]
    lines.insert(3, "FastEstimator-Eval: step: 1600; epoch: 1; accuracy: 0.9874; ce: 0.042314235; since_best: 0;")
    lines.append("FastEstimator-Eval: step: 1800; epoch: 2; accuracy: 0.9896; ce: 0.0345; since_best: 0;")
    run = _read(tmp_path, "\n".join(lines) + "\n")
    _same(_at(run, "loss"), dict(train))
    _same(_at(run, "eval_loss"), {1600: 0.042314235, 1800: 0.0345})
    # a run named `mi-test` in a logger's name is no evaluation channel: its losses are the training's
    named = [f"INFO:mi-test:loss_disc={v:.3f}, loss_gen={v + 0.3:.3f}, loss_mel={24 - v:.3f}" for _, v in train]
    run = _read(tmp_path, "\n".join(named) + "\n", name="rvc.log")
    assert not run.has("eval_loss") and run.has("loss")


def test_the_steps_losses_are_the_series_and_an_epochs_average_of_them_is_not(tmp_path):
    """MONAI's tutorials print each step's `train_loss` (`1/16, train_loss: 0.1162 step time: 0.94`) and,
    after the epoch, `epoch 14 average loss: 0.2148`: the steps' values are the training loss, the
    average a summary (a name that says average only wins over as many lines)."""
    rng = np.random.default_rng(0)
    lines, want, step = [], {}, 0
    for epoch in (14, 15):
        lines.append(f"epoch {epoch}/300")
        vals = [float(f"{v:.4f}") for v in 0.2 + 0.05 * rng.standard_normal(16)]
        for i, v in enumerate(vals, 1):
            lines.append(f"{i}/16, train_loss: {v:.4f} step time: 0.9368")
            step += 1
            want[step] = v
        lines.append(f"epoch {epoch} average loss: {sum(vals) / 16:.4f}")
        lines.append("current epoch: 14 current mean dice: 0.7842 best mean dice: 0.9092 at epoch: 12")
    run = _read(tmp_path, "\n".join(lines) + "\n")
    got = [v for _, v in sorted(_at(run, "loss").items())]
    assert got == [want[k] for k in sorted(want)]


def test_a_counter_repeated_over_records_is_no_step_and_each_record_is_read(tmp_path):
    """pytorch-beginner prints `[epoch/epochs] Loss: ..., Acc: ...` every 300 batches: the epoch repeats
    on lines whose numbers differ, so each line is a record, read in order (not one per epoch)."""
    rng = np.random.default_rng(1)
    vals = [round(float(v), 6) for v in 2.3 - 0.02 * np.arange(12) + 0.01 * rng.standard_normal(12)]
    text = "".join(f"[{1 + i // 4}/3] Loss: {v:.6f}, Acc: {0.1 + 0.01 * i:.6f}\n" for i, v in enumerate(vals))
    run = _read(tmp_path, text)
    assert [v for _, v in sorted(_at(run, "loss").items())] == vals


def test_a_value_with_a_unit_glued_to_it_is_no_unnamed_loss(tmp_path):
    """YOLOv5's classifier bar description `      1/3    0.946G        2.31`: GPU memory, then the loss."""
    vals = [2.31, 2.26, 2.2, 2.15, 2.09, 2.01]
    text = "".join(f"{1 + i // 2:>7}/3{0.9 + 0.01 * i:>9.3g}G{v:>12.3g}\n" for i, v in enumerate(vals))
    run = _read(tmp_path, text)
    assert [v for _, v in sorted(_at(run, "loss").items())] == vals


def test_a_value_named_before_its_counters_with_in_epoch(tmp_path):
    """SASRec: `print("loss in epoch {} iteration {}: {}".format(epoch, step, loss.item()))`."""
    vals = [2.315075128868984, 2.1963016366446575, 2.0912, float("nan")]
    text = "".join(f"loss in epoch 1 iteration {10 * (i + 1)}: {v}\n" for i, v in enumerate(vals))
    run = _read(tmp_path, text)
    _same(_at(run, "loss"), {10 * (i + 1): v for i, v in enumerate(vals)})


@pytest.mark.parametrize("warmup", [86135, 0])
def test_an_lr_printed_0_within_the_warm_up_the_text_names_is_no_schedule_error(tmp_path, warmup):
    """VideoMAE prints `Set warmup steps = 86135`, then MetricLogger lines with `lr: 0.000000` (a
    warm-up from 0 with six decimals): its first steps are no LR stuck at 0. With no warm-up named, an
    LR of 0 on every row from the run's start is still the schedule that never started."""
    head = f"Set warmup steps = {warmup}\n" if warmup else ""
    text = head + "".join(
        f"Epoch: [0]  [{s:>5}/17227]  eta: 14:30:57  lr: 0.000000  min_lr: 0.000000  loss: {v:.4f} ({v:.4f})  "
        f"grad_norm: 3.1 (3.1)  time: 0.98  data: 0.01  max mem: 9000\n"
        for s, v in ((0, 5.9916), (10, 5.9916), (20, 5.9916), (30, 5.9916))
    )
    p = tmp_path / "log.txt"
    p.write_text(text)
    run = load_path(p)[0]
    assert run.meta.get("warmup_steps") == (warmup or None)
    report = json.loads(run_cli("diagnose", p, "--format", "json").stdout)
    causes = [f["cause"] for f in report["findings"] if f["severity"] in ("warning", "critical")]
    assert ("lr_schedule_error" in causes) == (not warmup), causes


@pytest.mark.parametrize("heading", ["Round {r}", ">> ROUND {r}"])
def test_a_federated_round_heading_dates_the_metric_lines_under_it(tmp_path, heading):
    """TensorFlow Federated's tutorials print `Round 0`, then `Train metrics: loss=nan, accuracy=0.347`;
    FL client-selection code `>> ROUND 0` then its client lines: the round is the step, from 0."""
    text = "".join(
        heading.format(r=r) + f"\n\tTrain metrics: loss={v}, accuracy=0.347\n"
        for r, v in enumerate(["nan", "0.947", "0.946", "0.946"])
    )
    run = _read(tmp_path, text)
    _same(_at(run, "loss"), {0: float("nan"), 1: 0.947, 2: 0.946, 3: 0.946})


def test_a_total_loss_written_as_one_word_beats_its_criterion_part(tmp_path):
    """An OCR trainer's `[0/100][step:2050]  Totalloss:51.620 CTCloss: 51.392 L2loss: 0.228 lr: ...`."""
    rows = [(2050, 51.620, 51.392), (2100, 51.156, 50.930), (2150, float("nan"), float("nan"))]
    text = "".join(
        f"[0/100][step:{s}]  Totalloss:{t:.3f} CTCloss: {c:.3f} L2loss: 0.228 lr: 0.000600 batchTime: 0.59 s\n"
        for s, t, c in rows
    )
    run = _read(tmp_path, text)
    _same(_at(run, "loss"), {s: t for s, t, _ in rows})


def test_a_logging_level_before_a_message_is_no_part_of_its_name(tmp_path):
    """FuxiCTR logs `2022-01-24 13:22:26,561 P834 INFO Train loss: 0.461620` once an epoch, after its
    validation `[Metrics] AUC: 0.804410 - logloss: 0.447085`: the training loss is the one named so."""
    text = ""
    for e, (val, tr) in enumerate([(0.447085, 0.461620), (0.444616, 0.456468), (0.444031, 0.455156)], 1):
        text += f"2022-01-24 13:22:26,208 P834 INFO [Metrics] AUC: 0.80{e} - logloss: {val:.6f}\n"
        text += f"2022-01-24 13:22:26,561 P834 INFO Train loss: {tr:.6f}\n"
        text += f"2022-01-24 13:22:26,561 P834 INFO ************ Epoch={e} end ************\n"
    run = _read(tmp_path, text)
    assert [v for _, v in sorted(_at(run, "loss").items())] == [0.461620, 0.456468, 0.455156]


def test_tr_is_train_in_a_metric_name():
    """`Tr.Loss`, `tr_acc`, `Tr.CER` (speech and seq2seq scripts abbreviate train to tr): the train
    loss, accuracy and error rate; `Val.CER` stays an evaluation's."""
    from lossdoctor.sources.columns import column_for

    assert [column_for(n)[0] for n in ("Tr.Loss", "tr_loss", "tr_acc", "Tr.CER", "Tr.WER")] == [
        "loss",
        "loss",
        "accuracy",
        "error_rate",
        "error_rate",
    ]
    assert column_for("Val.CER") is None and column_for("trace") is None


def test_a_counter_glued_to_its_number_is_the_step(tmp_path):
    """`print(f"Epoch{e} Iter{i} --- total_loss: ...")` behind a tqdm bar: `Iter3` is the counter 3,
    so every line is one row at its step; a file name's `epoch10` is no counter."""
    bars = ["  0%|          | 0/8 [00:00<?, ?it/s]"] + [
        f" {12 * i}%|#         | {i}/8 [00:0{i}<00:14,  2.01s/it]" for i in range(1, 8)
    ]
    text = "".join(
        f"{bar}Epoch0 Iter{i} --- total_loss: {1.5 - 0.1 * i:.4f}, cls_loss: 0.5, reg_loss: {0.6 + i:.4f}\n"
        for i, bar in enumerate(bars)
    )
    p = tmp_path / "train.log"
    p.write_text(text + "100%|##########| 8/8 [00:10<00:00,  1.25s/it]Saving model_epoch10.pth\n")
    run = load_path(p)[0]
    assert list(run.steps) == list(range(8))
    np.testing.assert_allclose(run.col("loss"), [1.5 - 0.1 * i for i in range(8)])


def test_a_sentence_that_ends_with_loss_names_the_loss(tmp_path):
    """KotlinDL's `Training batch 28 ends with loss NaN.`: the number is the loss at batch 28, taken
    over a stepless `Batch stat: { lossValue: ... }` line printed beside it."""
    lines = []
    for b in range(5):
        v = 2.5 - 0.1 * b if b < 3 else float("nan")
        lines += [
            f"Training batch {b + 28} begins.",
            f"21:49:4{b}.436 [main] DEBUG api.keras.Sequential - Batch stat: {{ lossValue: {v} metricValue: 0.09 }}",
            f"Training batch {b + 28} ends with loss {'NaN' if v != v else v}.",
        ]
    p = tmp_path / "kotlin.log"
    p.write_text("\n".join(lines) + "\n")
    run = load_path(p)[0]
    assert list(run.steps) == list(range(28, 33)) and run.meta["loss_key"] == "loss"
    np.testing.assert_allclose(run.col("loss"), [2.5, 2.4, 2.3, np.nan, np.nan])


def test_a_whitespace_table_row_whose_last_cell_is_blank_is_still_a_row(tmp_path):
    """scikit-learn's boosting `verbose=1` table stops printing `Remaining Time` once the loss is
    too wide for its column: those rows keep their step and loss (the time is not logged there)."""
    head = "      Iter       Train Loss   Remaining Time \n"
    rows = [f"{i:10d} {5000.0 * 3**i:16.4f} {22.5 - i:11.2f}s\n" for i in range(1, 11)]
    rows += [f"{i:10d} {1.0710570621852775e60:.4f}            \n" for i in range(11, 14)]
    p = tmp_path / "gbc.txt"
    p.write_text(head + "".join(rows))
    run = load_path(p)[0]
    assert list(run.steps) == list(range(1, 14))
    assert run.col("loss")[-1] == pytest.approx(1.0710570621852775e60)


def test_a_decimal_comma_after_a_name_is_a_decimal_point(tmp_path):
    """A .NET program in a European locale prints `Error:0,403222760807917` (Encog's XOR example): the
    comma is the decimal point, so the error falls 0.403 -> 0.0005 and is never 0; a thousands group
    after a name (`iter: 25,390`) stays one whole number."""
    errors = ["0,403222760807917", "0,326979855722731", "0,00152763617214056", "0,000498892283437333"]
    text = "".join(f"Epoch #{e} Error:{v}\n" for e, v in zip((1, 2, 42, 43), errors))
    run = _read(tmp_path, text)
    _same(
        _at(run, "loss"),
        {1: 0.403222760807917, 2: 0.326979855722731, 42: 0.00152763617214056, 43: 0.000498892283437333},
    )
    grouped = "".join(f"iter: {s}, loss: {v}\n" for s, v in (("25,390", 2.5), ("25,400", 2.4), ("25,410", 2.3)))
    _same(_at(_read(tmp_path, grouped, "grouped.log"), "loss"), {25390: 2.5, 25400: 2.4, 25410: 2.3})


def _lcurve(steps, val: bool, quoted: bool) -> str:
    """DeePMD-kit's `lcurve.out`, as its trainer writes it: a `#` comment header of names (`print_header`:
    `"# %5s" % "step"`, then `"%11s"` per metric, `rmse_val` before `rmse_trn` when a validation set
    is given) and right-aligned rows (`"%7d"` for the step, `"%11.2e"` per metric, `"%8.1e"` for lr)."""
    names = ["rmse_val", "rmse_trn", "rmse_e_val", "rmse_e_trn"] if val else ["rmse_trn", "rmse_e_trn"]
    out = ["# %5s   " % "step" + "".join("%11s " % n for n in names) + "  %8s   " % "lr"]
    for i, s in enumerate(steps):
        trn, ev = 30.0 / (1 + i), 0.6 / (1 + i)
        cells = [trn * 1.1, trn, ev * 1.2, ev] if val else [trn, ev]
        out.append("%7d   " % s + "".join("%11.2e " % c for c in cells) + "  %8.1e" % 1e-3)
    text = "\n".join(out)
    return f'" {text}"\n' if quoted else text + "\n"


@pytest.mark.parametrize("val,quoted", [(True, False), (False, False), (False, True)])
def test_a_comment_header_names_the_step_column(tmp_path, val, quoted):
    """A table whose header is a `#` comment line (DeePMD-kit's `lcurve.out`, maybe pasted in quotes):
    its first name, `step`, is the rows' first cell, so the steps are that column's (0, 100, ...),
    not row numbers; the training set's metric (`rmse_trn`, set named after the metric) is the loss,
    the validation set's (`rmse_val`) an evaluation loss, the energy part (`rmse_e_trn`) neither."""
    steps = list(range(0, 1000, 100))
    run = _read(tmp_path, _lcurve(steps, val, quoted), "lcurve.out")
    assert list(run.steps) == steps
    _same(_at(run, "loss"), {s: float("%.2e" % (30.0 / (1 + i))) for i, s in enumerate(steps)})
    assert run.meta["loss_key"] == "rmse_trn"
    if val:
        _same(_at(run, "eval_loss"), {s: float("%.2e" % (33.0 / (1 + i))) for i, s in enumerate(steps)})


def _mmcv_iter_line(it: int, vals: dict[str, float]) -> str:
    """mmcv 2.x TextLoggerHook._log_info for an IterBasedRunner: `Iter [i/max]\\tlr: ..., eta: ..., time: ...,
    data_time: ..., memory: ..., ` then the model's log_vars as `name: %.4f`, behind the logging prefix."""
    head = f"2024-09-10 10:11:04,258 - mmdet - INFO - Iter [{it}/15000]\tlr: 4.653e-05, eta: 2:21:23, "
    head += "time: 0.569, data_time: 0.015, memory: 10185, "
    return head + ", ".join(f"{k}: {v:.4f}" for k, v in vals.items()) + "\n"


def test_a_total_printed_after_named_losses_is_the_loss(tmp_path):
    """A model whose loss dict names its parts `cls`, `reg`, `d0.cls`, ..., `trans_loss` and their sum
    `total` (a map-detection head on mmdet 2.x): `total` is the loss, not `trans_loss`, the only part
    whose name says loss."""
    want = {}
    lines = []
    for i, it in enumerate(range(100, 1100, 100)):
        parts = {"cls": 2.0 - 0.1 * i, "reg": 8.0 - 0.5 * i, "d0.cls": 1.7, "d0.reg": 5.4, "trans_loss": 0.37 / (1 + i)}
        total = round(sum(parts.values()), 4)
        want[it] = total
        lines.append(_mmcv_iter_line(it, {**parts, "total": total, "grad_norm": 100.0 - i}))
    run = _read(tmp_path, "".join(lines))
    _same(_at(run, "loss"), want)
    assert _at(run, "grad_norm")[100] == pytest.approx(100.0)


def test_a_named_training_loss_printed_once_in_a_cut_record_is_the_loss(tmp_path):
    """CornerNet's train.py prints each displayed iteration as `training loss at iteration {}: {}` then
    `focal loss at iteration {}:    {}`, `pull loss ...`, `push loss ...`, `regr loss ...` (and
    `validation loss at iteration {}: {}` every val_iter). A paste that starts inside one record shows
    the training loss once less than its parts: the loss is still the training loss, at its iteration,
    never the focal loss (a part) nor the validation loss."""
    parts = ("focal", "pull", "push", "regr")
    out = [f"{p} loss at iteration 30995:    {0.3 + k:.16g}\n" for k, p in enumerate(parts)]
    out.append("training loss at iteration 31000: 7.482662200927734\n")
    out += [f"{p} loss at iteration 31000:    {0.2 + k:.16g}\n" for k, p in enumerate(parts)]
    out.append("validation loss at iteration 31000: 8.355660438537598\n")
    run = _read(tmp_path, "".join(out))
    _same(_at(run, "loss"), {31000: 7.482662200927734})
    _same(_at(run, "eval_loss"), {31000: 8.355660438537598})
    assert run.meta["loss_key"] == "training loss"


@pytest.mark.parametrize("sep", ["\t", " "])
def test_a_rate_unit_is_no_part_of_the_next_metric_name(tmp_path, sep):
    """MXNet 0.x's Speedometer: `logging.info('Epoch[%d] Batch [%d]\\tSpeed: %.2f samples/sec\\tTrain-%s=%f', ...)`
    per metric, then the epoch's `Epoch[%d] Train-%s=%f` (an auto-reset metric, NaN at the epoch's end);
    pasted with the tabs as spaces too. `samples/sec` is the speed's unit: the batch rows' metric is
    `Train-CrossEntropy`, their value the loss at each batch."""
    out = []
    want = {}
    for b in range(20, 220, 20):
        ce, l1 = 1.0 / (1 + b / 20), 2.0 / (1 + b / 20)
        want[b] = round(ce, 6)
        for name, v in (("CrossEntropy", ce), ("SmoothL1", l1)):
            out.append(f"Epoch[0] Batch [{b}]{sep}Speed: 6.44 samples/sec{sep}Train-{name}={v:f}\n")
    out += ["Epoch[0] Train-CrossEntropy=nan\n", "Epoch[0] Train-SmoothL1=nan\n"]
    run = _read(tmp_path, "".join(out))
    assert run.meta["loss_key"] == "Train-CrossEntropy"
    _same({s: v for s, v in _at(run, "loss").items() if s in want}, want)


def test_camelcase_loss_parts_are_summed_into_the_loss(tmp_path):
    """GluonCV's train_yolo3.py: `logger.info('[Epoch {}][Batch {}], LR: {:.2E}, Speed: {:.3f} samples/sec,
    {}={:.3f}, {}={:.3f}, {}={:.3f}, {}={:.3f}'.format(..., *name1, *loss1, ...))` with the metrics
    `ObjLoss`, `BoxCenterLoss`, `BoxScaleLoss`, `ClassLoss`, the four losses it steps on and no total: each
    is a part (kept as a component), the loss is their sum; a `TotalLoss` beside parts stays the loss."""
    names = ("ObjLoss", "BoxCenterLoss", "BoxScaleLoss", "ClassLoss")
    lines, want = [], {}
    for b in range(99, 1099, 100):
        vals = [33.0 - b / 1000, 15.6 - b / 2000, 7.6 - b / 4000, 21.5 - b / 1000]
        want[b] = sum(round(v, 3) for v in vals)
        cells = ", ".join(f"{n}={v:.3f}" for n, v in zip(names, vals))
        lines.append(f"INFO:root:[Epoch 3][Batch {b}], LR: 2.80E-04, Speed: 28.997 samples/sec, {cells}\n")
    run = _read(tmp_path, "".join(lines))
    _same(_at(run, "loss"), want)
    assert run.events["loss_components"][99]["objloss"] == pytest.approx(32.901)
    total = "".join(
        f"[Batch {b}] TotalLoss={3.0 - b / 1000:.3f}, ObjLoss={1.0:.3f}, ClassLoss={2.0 - b / 1000:.3f}\n"
        for b in range(0, 1000, 100)
    )
    _same(_at(_read(tmp_path, total, "total.log"), "loss"), {b: round(3.0 - b / 1000, 3) for b in range(0, 1000, 100)})


def test_fann_current_error_is_the_loss(tmp_path):
    """FANN's fann_train_on_data prints `printf("Max epochs %8d. Desired error: %.10f.\\n", ...)`, then every
    epochs_between_reports `printf("Epochs     %8d. Current error: %.10f. Bit fail %d.\\n", i, MSE, bit_fail)`:
    the current error (the epoch's MSE) is the loss at that epoch; the desired error is no row of it."""
    errors = {1: 0.3613613844, 10: 0.2489670813, 20: 0.170314014, 30: 0.09267658, 40: 0.0035322148, 69: 1.738e-07}
    text = "Max epochs %8d. Desired error: %.10f.\n" % (500000, 0.001)
    text += "".join("Epochs     %8d. Current error: %.10f. Bit fail %d.\n" % (e, v, 4) for e, v in errors.items())
    run = _read(tmp_path, text)
    _same(_at(run, "loss"), errors)


@pytest.mark.parametrize("sep", ["\t", "  "])
def test_spacy_v2_itn_column_is_the_step_from_0(tmp_path, sep):
    """spaCy v2's `spacy train` prints `Itn.\\tDep Loss\\tNER Loss\\tUAS\\tNER P.\\tNER R.\\tNER F.\\tTag %\\tToken %\\t
    CPU WPS\\tGPU WPS` (v2.0, tabs; later aligned with spaces), then one row per iteration, `itn` from 0:
    `Itn.` names the step column, so the steps are 0, 1, ... as printed, not the rows' order from 1."""
    head = sep.join(["Itn.", "Dep Loss", "NER Loss", "UAS", "NER P.", "NER R.", "NER F.", "Tag %", "Token %"])
    rows = [
        sep.join([str(i), f"{9.0 / (i + 1):.3f}", f"{30.0 / (i + 1):.3f}", "0.000", "5.882", "40.000", "10.256"])
        + sep
        + sep.join(["100.000", "100.000"])
        for i in range(5)
    ]
    run = _read(tmp_path, "\n".join([head, *rows]) + "\n")
    assert list(run.steps) == [0, 1, 2, 3, 4]
    assert run.logged("loss").sum() == 5


def test_the_source_line_a_python_warning_echoes_is_no_record(tmp_path):
    """Python's `warnings` module prints `run.py:198: UserWarning: ...` and, indented under it, the warned
    source line (`  t_loss += loss.data[0]`, PyTorch 0.4's 0-dim indexing): code, not a value named
    `loss.data`; the script's own `[epoch, iter] RMSE: X` prints are the loss."""
    import warnings

    out = []
    for i, v in enumerate([8.0848995, 4.1, 2.5, float("nan"), float("nan")]):
        out.append(
            warnings.formatwarning(
                "invalid index of a 0-dim tensor. This will be an error in PyTorch 0.5.",
                UserWarning,
                "run.py",
                198,
                "    t_loss += loss.data[0]\n",
            )
        )
        out.append(f"[0, {i * 1000:5d}] RMSE: {v}\n")
    run = _read(tmp_path, "".join(out))
    assert run.meta["loss_key"] == "RMSE"
    got = run.col("loss")[run.logged("loss")].tolist()
    assert got[:3] == [8.0848995, 4.1, 2.5] and all(math.isnan(v) for v in got[3:]) and len(got) == 5


def test_a_counter_one_past_its_printed_total_is_still_the_counter(tmp_path):
    """MONAI's tutorials print `print(f"{step}/{len(train_ds) // train_loader.batch_size}, train_loss:
    {loss.item():.4f}")`: with a partial last batch the last step is one past the printed total (979
    images in batches of 4: `245/244`). The batches' losses are the loss, step by step across epochs,
    not the `epoch N average loss` lines."""
    n_ds, bs, epochs = 979, 4, 2
    out, want = [], []
    for e in range(epochs):
        out += ["-" * 10 + "\n", f"epoch {e + 1}/{epochs}\n"]
        for step in range(1, -(-n_ds // bs) + 1):
            v = round(1.0 - 0.001 * (e * 245 + step), 4)
            want.append(v)
            out.append(f"{step}/{n_ds // bs}, train_loss: {v:.4f}\n")
        out.append(f"epoch {e + 1} average loss: {sum(want[-245:]) / 245:.4f}\n")
    run = _read(tmp_path, "".join(out))
    lg = run.logged("loss")
    assert run.col("loss")[lg].tolist() == pytest.approx(want)
    assert np.all(np.diff(run.steps[lg]) > 0) and run.meta.get("steps_from") != "numbered"


def test_a_markdown_table_row_with_a_bold_cell_and_an_emoji_is_still_a_row(tmp_path):
    """A results table typed in Markdown marks the best validation accuracy so far in bold and puts a
    pictograph after it (`| 80 | 1.9254 | 72.19% | 1.1072 | **74.04%** ✅ |`): the row is a row like the
    others, its losses read."""
    head = "| Epoch | Train Loss | Train Acc | Val Loss | Val Acc |\n|-------|-----------|-----------|----------|---------|\n"
    marks = ["", "", " ✅", " 🎯", " ⭐", " 🏆\ufe0f"]
    rows, want, want_val = [], {}, {}
    for e in range(1, 13):
        loss, val = round(6.0 - 0.3 * e, 4), round(5.0 - 0.25 * e, 4)
        want[e], want_val[e] = loss, val
        mark = marks[e % len(marks)]
        acc = f"**{10 + e:.2f}%**{mark}" if mark else f"{10 + e:.2f}%"
        rows.append(f"| {e} | {loss:.4f} | {5 + e:.2f}% | {val:.4f} | {acc} |\n")
    run = _read(tmp_path, head + "".join(rows), "results.md")
    _same(_at(run, "loss"), want)
    _same(_at(run, "eval_loss"), want_val)


def _yolox_lines(losses, iters, blank_first=False, width=120):
    """YOLOX's trainer lines through loguru (`{time} | INFO     | yolox.core.trainer:253 - epoch: e/300, iter:
    i/N, ..., total_loss: X, ..., cls_loss: C, lr: ..., size: ..., ETA: ...`), each wrapped by a terminal of
    `width` columns after its last name that fits (`cls_loss:` on the line, its value on the next)."""
    out = []
    for k, ((epoch, it), loss) in enumerate(losses.items()):
        head = f"2023-08-10 08:54:{10 + k:02d} | INFO     | yolox.core.trainer:253 - "
        if k == 0 and blank_first:
            head = " " * (len(head) - 2) + "- "  # the front of the line blanked by a redraw
        body = (
            f"epoch: {epoch}/300, iter: {it}/{iters}, mem: 2956Mb, iter_time: 0.771s, data_time: 0.001s, "
            f"total_loss: {loss}, iou_loss: 2.4, l1_loss: 0.0, conf_loss: 2.0, cls_loss: 1.1, lr: 4.340e-04, "
            "size: 640, ETA: 0:46:06"
        )
        cut = body.index("cls_loss:") + len("cls_loss:")
        out += [head + body[:cut], body[cut + 1 :]]
    return "\n".join(out) + "\n"


@pytest.mark.parametrize("blank_first", [False, True])
def test_a_line_a_terminal_wrapped_after_a_name_is_read_whole(tmp_path, blank_first):
    """A record's line wrapped by the terminal right after a name (YOLOX's `..., conf_loss: 2.0, cls_loss:`
    then `1.1, lr: 4.340e-04, ...`): the two pieces are one line, so each epoch's line is a row (the
    first one too where a redraw blanked its logger's prefix)."""
    losses = {(1, 10): 5.5, (2, 10): 4.8, (3, 10): 5.0, (4, 10): 4.4}
    run = _read(tmp_path, _yolox_lines(losses, 12, blank_first))
    assert list(run.cols["loss"][run.logged("loss")]) == list(losses.values())
    assert list(run.cols["lr"][run.logged("lr")]) == [4.34e-4] * 4
    assert list(run.steps) == [10, 22, 34, 46]  # iteration 10 of each epoch of 12


@pytest.mark.parametrize("lost", [3, 6])
def test_the_first_line_cut_at_its_start_is_read_with_the_lines_after_it(tmp_path, lost):
    """An excerpt whose first line lost its start (ctrNet's `print("  epoch %d step %d lr %g logloss %g
    gN %.2f, %s" % ...)`, pasted from `poch 0 step 100 ...`): that line's loss is read at its step, as
    the first row of the lines of its shape."""
    losses = {100 * (k + 1): round(0.365111 / (k + 1) ** 0.5, 6) for k in range(8)}
    lines = [
        "  epoch %d step %d lr %g logloss %g gN %.2f, %s" % (0, s, 0.001, v, 0.56 / (k + 1), "Wed Jul  3 17:12:50 2019")
        for k, (s, v) in enumerate(losses.items())
    ]
    lines[0] = lines[0][lost:]
    run = _read(tmp_path, "\n".join(lines) + "\n")
    assert _at(run, "loss") == losses


def test_a_line_wrapped_between_its_fields_is_one_row(tmp_path):
    """arcface_torch's `logging.info("Speed %.2f samples/sec   Loss %.4f   LearningRate %.6f   Epoch: %d   Global
    Step: %d   Fp16 Grad Scale: %2.f   Required: %1.f hours")` behind `Training: <time>-`, its first line wrapped
    by the paste after `LearningRate 0.001000   `: the two pieces are that step's row in the general reader's
    reading (the one kept for the corpus's all-NaN log of this shape)."""
    losses = {20: 45.1, 30: 44.3, 40: float("nan"), 50: float("nan")}
    lines = []
    for k, (s, v) in enumerate(losses.items()):
        head = "Training: 2023-03-14 09:08:%02d,293-Speed %.2f samples/sec   Loss %.4f   LearningRate %.6f   " % (
            40 + k,
            2178.4 + k,
            v,
            0.001,
        )
        tail = "Epoch: %d   Global Step: %d   Fp16 Grad Scale: %2.f   Required: %1.f hours" % (0, s, 0, 194 - k)
        lines += [head, tail] if k == 0 else [head + tail]
    p = tmp_path / "train.log"
    p.write_text("\n".join(lines) + "\n")
    (run,) = any_text.read(p)
    _same(_at(run, "loss"), losses)


def test_the_batch_value_beside_a_global_average_is_the_loss(tmp_path):
    """Kaldi's PyTorch chain recipe logs `Process %d/%d(%f%%) global average objf: %f over %f frames, current
    batch average objf: %f over %d frames, epoch %d`: no name says loss, and of the two objectives the
    current batch's is the step's own value, the global one its average over the run so far."""
    batch = {0: -1.19589, 100: -0.457086, 200: -0.338968, 300: -0.261345, 400: -0.242083, 500: -0.22}
    lines, total, frames = [], 0.0, 0.0
    for s, v in batch.items():
        total, frames = total + v * 6400, frames + 6400
        lines.append(
            "2020-01-31 16:17:23,536 INFO [train.py:102] Process %d/3161(%f%%) global average objf: %f over %.1f "
            "frames, current batch average objf: %f over %d frames, epoch 0"
            % (s, 100 * s / 3161, total / frames, frames, v, 6400)
        )
    run = _read(tmp_path, "\n".join(lines) + "\n")
    assert _at(run, "loss") == batch


@pytest.mark.parametrize(
    "line",
    [
        "Losses: " + " ".join(f"{v:g}" for v in (161.9, 160.99, 160.988, 160.076, 159.159, 157.314)),
        "losses: " + str([161.9, 160.99, 160.988, 160.076, 159.159, 157.314]),
    ],
)
def test_every_steps_loss_printed_on_one_line_is_a_row_each(tmp_path, line):
    """cu2rec's CUDA test prints `Losses:` and every iteration's loss after it on one line (`printf("%g ",
    losses[i])`); a script's `print("losses:", losses)` prints a list: one loss per step, in order."""
    run = _read(tmp_path, "Testing training loop...\n" + line + "\n")
    assert list(run.cols["loss"][run.logged("loss")]) == [161.9, 160.99, 160.988, 160.076, 159.159, 157.314]


def test_a_number_written_as_words_is_not_logged_on_that_row(tmp_path):
    """VideoChat2's MetricLogger prints `image-loss: No data` on a step with no image batch, a number
    elsewhere: that line is a row of the others' shape with image-loss not logged there, so its step and
    its video loss are read, and the loss logged on every row is the one taken (no name says which)."""
    video = {0: 3.1493, 10: 2.9, 20: 2.7, 30: float("nan"), 40: float("nan")}
    lines = []
    for s, v in video.items():
        image = "No data" if s == 0 else f"{2.5 - s / 100:.4f}"
        lines.append(
            f"2024-06-05T14:28:35 | utils.basic_utils: Train Epoch: [0]  [{s:>6}/153075]  eta: 3 days, 5:05:00  "
            f"lr: 0.000003  image-loss: {image}  video-loss: {v:.4f}  time: 1.8130  data: 0.0076  max mem: 66172 "
            "res mem: 75440"
        )
    run = _read(tmp_path, "\n".join(lines) + "\n")
    _same(_at(run, "loss"), video)


def test_a_meters_running_average_turning_nan_beside_a_finite_value_dates_the_nan(tmp_path):
    """maskrcnn-benchmark prints a window's median and the global average of each term: `loss: 5.6908
    (nan)` at iter 20 says a step since the last print went NaN, before `loss: nan (nan)` at iter 40.
    The dev corpus's paste of it (its lines wrapped mid-word, read by the general text reader) dates
    the NaN at 20; the same paste with that average finite dates it at 40."""
    from pathlib import Path

    from lossdoctor.detectors.engine import diagnose_runs

    real = (
        Path(__file__).parent.parent
        / "benchmarks/real_logs/maskrcnn_benchmark_trainer_median_avg_nan_unfrozen_backbone_lr.log"
    )
    text = real.read_text(encoding="utf-8")

    def nan_step(t):
        p = tmp_path / "mrcnn.log"
        p.write_text(t, encoding="utf-8")
        [f] = [f for f in diagnose_runs(load_path(p)).findings if f.symptom == "nonfinite"]
        return f.step

    assert nan_step(text) == 20
    assert nan_step(text.replace("loss: 5.6908 (nan)", "loss: 5.6908 (5.8965)", 1)) == 40


def _linear_sgd(outputs: int):
    """A seeded linear regressor, its SGD and a batch: the real loop behind the print shapes below."""
    torch.manual_seed(0)
    model = torch.nn.Linear(4, outputs)
    return model, torch.optim.SGD(model.parameters(), lr=0.05), torch.randn(64, 4), torch.randn(64, outputs)


def test_a_quoted_name_with_digits_is_no_part_of_the_records_shape(tmp_path):
    """Demucs's summary dicts name the best EMA copy (`'Bname': 'ema_epoch_0'`, then `'ema_batch_1'`): a
    quoted name is no metric and no word of the line's shape, so every epoch is one record; a quoted
    number stays a value and a quoted word without digits (`'phase': 'valid'`) still keeps its lines apart."""
    model, opt, x, y = _linear_sgd(1)
    out, expect = io.StringIO(), {}
    for epoch in range(1, 7):
        loss = torch.nn.functional.mse_loss(model(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        best = f"ema_{'epoch' if epoch == 1 else 'batch'}_{epoch % 2}"
        row = {"Epoch": epoch, "Loss": round(float(loss), 4), "Bname": best, "lr": "5e-2", "phase": "train"}
        print(row, file=out)
        print({**row, "Loss": round(float(loss) * 1.1, 4), "phase": "valid"}, file=out)
        expect[epoch] = round(float(loss), 4)
    run = _read(tmp_path, out.getvalue())
    _same(_at(run, "loss"), expect)
    assert _at(run, "lr")[3] == pytest.approx(0.05)


@pytest.mark.parametrize(
    "form, digits, steps_from",
    [
        ("Epoch {e}: {v:.5f}, Time is {t:.2f}s", 5, "epoch"),  # ner_with_dependency's print of its epoch loss
        ("Iteration {s}: {v:.4f}", 4, "log"),
        ("Epoch {e}/10 - {v:.4f}", 4, "epoch"),
    ],
)
def test_an_unnamed_value_after_a_named_counter_is_the_loss_guessed(tmp_path, form, digits, steps_from):
    """A counter named by its word and one unnamed number after it: a small script's loss, read with a
    note that it was guessed; beside a named metric (`acc 0.9`) or as a whole count it is not."""
    model, opt, x, y = _linear_sgd(1)
    lines, expect = [], {}
    for e in range(1, 9):
        loss = torch.nn.functional.mse_loss(model(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        lines.append(form.format(e=e, s=e * 100, v=float(loss), t=370 + e * 1.3))
        expect[e if steps_from == "epoch" else e * 100] = round(float(loss), digits)
    run = _read(tmp_path, "\n".join(lines) + "\n")
    assert run.meta["steps_from"] == steps_from
    _same(_at(run, "loss"), expect)
    assert "text.loss_guessed" in [getattr(n, "key", None) for n in run.notes]
    named = _read(tmp_path, "".join(f"Epoch {e}: {2.5 - e / 10:.4f} acc 0.9{e}\n" for e in range(1, 9)), "named.log")
    counts = _read(tmp_path, "".join(f"Epoch {e}: {1200 + e} samples\n" for e in range(1, 9)), "counts.log")
    assert not named.has("loss") and not counts.has("loss")


def test_a_rate_unit_glued_to_a_number_is_no_part_of_the_next_name(tmp_path):
    """Hand4Whole's `speed: 0.72(0.65s r0.07)s/itr 0.70h/epoch loss_smpl_pose: 0.3386`: `h/epoch` is the
    unit of 0.70, so the component after it is `loss_smpl_pose`, summed into the loss with its siblings."""
    model, opt, x, y = _linear_sgd(2)
    lines, pose = [], {}
    for it in range(26, 32):
        out = model(x)
        l_pose, l_shape = ((out[:, 0] - y[:, 0]) ** 2).mean(), ((out[:, 1] - y[:, 1]) ** 2).mean()
        opt.zero_grad()
        (l_pose + l_shape).backward()
        opt.step()
        lines.append(
            f"09-24 22:50:{it:02d} Epoch 0/7 itr {it}/3489: lr: 0.0001 speed: 0.72(0.65s r0.07)s/itr "
            f"0.70h/epoch loss_smpl_pose: {float(l_pose):.4f} loss_smpl_shape: {float(l_shape):.4f}"
        )
        pose[it] = round(float(l_pose), 4)
    run = _read(tmp_path, "\n".join(lines) + "\n")
    comps = run.events["loss_components"]
    assert {s: c["loss_smpl_pose"] for s, c in comps.items()} == pose


def _gan_losses(steps):
    """(generator, discriminator) losses of a real tiny GAN's first steps."""
    torch.manual_seed(0)
    g, d = torch.nn.Linear(2, 2), torch.nn.Sequential(torch.nn.Linear(2, 1))
    og, od = torch.optim.Adam(g.parameters(), 1e-2), torch.optim.Adam(d.parameters(), 1e-2)
    bce = torch.nn.functional.binary_cross_entropy_with_logits
    out = []
    for _ in range(steps):
        real, fake = torch.randn(16, 2) + 3, g(torch.randn(16, 2))
        ld = bce(d(real), torch.ones(16, 1)) + bce(d(fake.detach()), torch.zeros(16, 1))
        od.zero_grad()
        ld.backward()
        od.step()
        lg = bce(d(fake), torch.ones(16, 1))
        og.zero_grad()
        lg.backward()
        og.step()
        out.append((float(lg), float(ld)))
    return out


def test_names_listed_before_their_values_name_each_value(tmp_path):
    """A DCGAN script's `generator loss | discriminator loss : 3.7583103 | 0.9910032 - batch took 2.1 s.`:
    each value takes the name in its place, the two adversaries are kept as components, and the batch's
    timing is none of their parts."""
    losses = _gan_losses(4)
    text = "".join(
        f"     Batch {i + 1}/170 generator loss | discriminator loss : {lg:.7f} | {ld:.8f} - batch took 2.{i}1966 s.\n"
        for i, (lg, ld) in enumerate(losses)
    )
    run = _read(tmp_path, text)
    comps = run.events["loss_components"]
    assert [c["generator_loss"] for c in comps.values()] == [round(lg, 7) for lg, _ in losses]
    assert [c["discriminator_loss"] for c in comps.values()] == [round(ld, 8) for _, ld in losses]
    assert not any("batch_took" in c for c in comps.values())
