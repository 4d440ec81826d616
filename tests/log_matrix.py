"""The format x fault x interleaving matrix of training logs (issue 25, "logs from anywhere").

A reader bug lives in a combination: a print format, a fault curve, and what else the console
printed between the lines (DeepSpeed's OVERFLOW lines, warnings, evaluation lines, tqdm redraws,
checkpoint lines, a traceback, rank prefixes, timestamps, a Markdown quote or fence, Windows line
endings, a cut, an epoch counter that restarts the step). This module writes such logs with their
truth; `benchmarks/log_matrix.py` reports the rates and `tests/test_log_matrix.py` holds them.

- `FORMATS`: one step's values printed the way a widely used tool prints them (each renderer cites
  the tool; the shapes are those of tests/test_format_gallery.py and the readers' docstrings), and
  which columns it shows (loss always; lr, grad_norm, the loss scale, an evaluation loss);
- `CURVES`: a fault laid on a run (or none), with its truth: the symptoms an alarm may name and the
  logged rows it may be dated at;
- `INTERLEAVINGS`: what a console adds around the rows;
- `cases(seed)`: a deterministic, covering sample (each format x fault with two interleavings, a
  third of them stacked with a second interleaving); `judge(case)` reads the file the way
  `lossdoctor diagnose FILE` does and says whether the reading and the verdict hold.

The truth of a value is what the renderer printed (`float` of its text), so a rounding is never a
misreading. A format whose text does not carry the tool's step in full (no counter, a batch counter
that restarts each epoch) is checked `ordered`: the values in order at increasing steps.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path

import numpy as np

EXACT, ORDERED = "exact", "ordered"
ALARM = ("warning", "critical")


# ------------------------------------------------------------------ one row of a run


@dataclass(frozen=True)
class Row:
    """One logged row: its index, the trainer's step, what the format prints as its counter, and
    the run's values at that step."""

    k: int
    step: int
    n: int
    total: int  # the run's planned steps (what `{step}/{total}` counters print)
    loss: float
    lr: float
    grad_norm: float
    scale: float
    skipped: int  # 1 when the scale was cut at this row (an overflow, the step skipped)
    skipped_total: int = 0  # the skipped steps so far (DeepSpeed's running count)
    epoch: int = 1  # 1-based
    batch: int = 0  # the counter within the epoch (1-based); 0 when the format's epochs are rows
    per_epoch: int = 0  # batches in an epoch
    eval_loss: float | None = None  # an evaluation the format prints on the row's own line


Shown = dict[str, float]


def _f(text: str) -> float:
    return float(text)


def _repr(v: float, nd: int = 4) -> str:
    """A Python float as `print` shows it after `round(v, nd)`: `nan`, `inf`, `2.3102`, `12345678.0`."""
    return repr(round(v, nd)) if math.isfinite(v) else repr(v)


# ------------------------------------------------------------------ renderers (one per tool)


def r_hf_dicts(r: Row) -> tuple[str, Shown]:
    """transformers PrinterCallback: `print(logs)` of the Trainer's dict; no step in the text."""
    lo, g, lr = _repr(r.loss), _repr(r.grad_norm, 6), repr(float(f"{r.lr:.3e}"))
    return (
        f"{{'loss': {lo}, 'grad_norm': {g}, 'learning_rate': {lr}, 'epoch': {r.step / r.total * 3:.2f}}}\n",
        {"loss": _f(lo), "grad_norm": _f(g), "lr": _f(lr)},
    )


def e_hf_dicts(r: Row, v: float) -> str:
    return (
        f"{{'eval_loss': {_repr(v)}, 'eval_runtime': 10.12, 'eval_samples_per_second': 98.8, "
        f"'eval_steps_per_second': 3.1, 'epoch': {r.step / r.total * 3:.2f}}}\n"
    )


def _bar(s: int, total: int, desc: str = "", post: str = "") -> str:
    """tqdm's bar at counter `s` of `total` (the unicode blocks it draws by default)."""
    frac = s / total
    full = int(frac * 10)
    bar = "\u2588" * full + (" " * (10 - full))
    rate = f"{1.9 + (s % 7) / 10:.2f}it/s"
    left = f"{desc}: " if desc else ""
    return f"{left}{int(100 * frac):3d}%|{bar}| {s}/{total} [{s // 60:02d}:{s % 60:02d}<{(total - s) // 60:02d}:00, {rate}{post}]"


def r_hf_tqdm(r: Row) -> tuple[str, Shown]:
    """The Trainer at a terminal: the bar moves to the step, `tqdm.write` clears it, prints the dict,
    and redraws the bar (llama-factory, TRL and most fine-tuning scripts print this)."""
    text, shown = r_hf_dicts(r)
    prev = max(0, r.step - 1)
    return (
        "\r"
        + _bar(prev, r.total)
        + "\r"
        + _bar(r.step, r.total)
        + "\r"
        + " " * 60
        + "\r"
        + text
        + "\r"
        + _bar(r.step, r.total),
        shown,
    )


def r_keras2_bar(r: Row) -> tuple[str, Shown]:
    """Keras 2 Progbar at the end of an epoch: `Epoch 3/50` then `100/100 [====] - 2s 15ms/step - loss: ...`."""
    lo = f"{r.loss:.4f}"
    val = f" - val_loss: {r.eval_loss:.4f}" if r.eval_loss is not None else ""
    return (
        f"Epoch {r.step}/{r.total}\n100/100 [==============================] - 2s 15ms/step - loss: {lo}"
        f" - accuracy: 0.5123{val}\n",
        {"loss": _f(lo)},
    )


def r_keras_verbose2(r: Row) -> tuple[str, Shown]:
    """Keras `fit(verbose=2)`: `Epoch 3/50` then `100/100 - 2s - 15ms/step - loss: 0.4123`."""
    lo = f"{r.loss:.4f}"
    val = f" - val_loss: {r.eval_loss:.4f}" if r.eval_loss is not None else ""
    return f"Epoch {r.step}/{r.total}\n100/100 - 2s - 15ms/step - loss: {lo}{val}\n", {"loss": _f(lo)}


def r_lightning_bar(r: Row) -> tuple[str, Shown]:
    """Lightning's TQDMProgressBar: `Epoch 0:  20%|##| 20/100 [..., v_num=3, train_loss_step=2.310]`,
    redrawn with `\\r` within the epoch (one epoch in view: the counter is the step)."""
    lo = f"{r.loss:.3f}"
    post = f", v_num=3, train_loss_step={lo}"
    return "\r" + _bar(r.step, r.total, "Epoch 0", post), {"loss": _f(lo)}


def r_nanogpt(r: Row) -> tuple[str, Shown]:
    """karpathy/nanoGPT train.py: `iter {iter_num}: loss {lossf:.4f}, time ..ms, mfu ..%`."""
    lo = f"{r.loss:.4f}"
    return f"iter {r.step}: loss {lo}, time 120.50ms, mfu 38.12%\n", {"loss": _f(lo)}


def e_nanogpt(r: Row, v: float) -> str:
    """nanoGPT's evaluation: `step N: train loss X, val loss Y` (an estimate, never the step's loss)."""
    return f"step {r.step}: train loss {v * 0.97:.4f}, val loss {v:.4f}\n"


def r_megatron(r: Row) -> tuple[str, Shown]:
    """Megatron-LM training_log: the iteration line with its loss scale and skipped counts."""
    lo, g, sc, lr = f"{r.loss:.6E}", f"{r.grad_norm:.3f}", f"{r.scale:.1f}", f"{r.lr:.6E}"
    return (
        f" iteration {r.step:8d}/{r.total:8d} | consumed samples: {r.step * 512:12d} | elapsed time per iteration "
        f"(ms): 501.2 | learning rate: {lr} | global batch size:   512 | lm loss: {lo} | loss scale: {sc} | "
        f"grad norm: {g} | number of skipped iterations: {r.skipped:3d} | number of nan iterations: "
        f"{int(not math.isfinite(r.loss)):3d} |\n",
        {"loss": _f(lo), "grad_norm": _f(g), "scale": _f(sc), "lr": _f(lr)},
    )


def e_megatron(r: Row, v: float) -> str:
    return (
        "-" * 100 + f"\n validation loss at iteration {r.step} | lm loss value: {v:.6E} | lm loss PPL: "
        f"{math.exp(min(v, 50)):.6E} | \n" + "-" * 100 + "\n"
    )


def r_deepspeed(r: Row) -> tuple[str, Shown]:
    """DeepSpeed's `[Rank 0] step=N, skipped=K, lr=[...]` every steps_per_print, and the script's loss line."""
    lr = f"{r.lr:.6e}"
    return (
        f"[2024-05-01 12:{r.k // 60 % 60:02d}:{r.k % 60:02d},123] [INFO] [logging.py:96:log_dist] [Rank 0] "
        f"step={r.step}, skipped={r.skipped_total}, lr=[{lr}], mom=[(0.9, 0.95)]\n"
        f"Epoch 0 step {r.step} loss {_repr(r.loss)}\n",
        {"loss": _f(_repr(r.loss)), "lr": _f(lr)},
    )


def r_deepspeed_chat(r: Row) -> tuple[str, Shown]:
    """DeepSpeed-Chat's training script: `Epoch: 0, Step: N, Rank: 0, loss = X`."""
    return f"Epoch: 0, Step: {r.step}, Rank: 0, loss = {_repr(r.loss, 6)}\n", {"loss": _f(_repr(r.loss, 6))}


def r_fairseq(r: Row) -> tuple[str, Shown]:
    """fairseq SimpleProgressBar: `epoch 001:  100 / 1000 loss=9.123, ..., num_updates=100, lr=..., gnorm=...,
    loss_scale=128, ...`."""
    lo, g, sc, lr = f"{r.loss:.3f}", f"{r.grad_norm:.3f}", f"{r.scale:g}", f"{r.lr:g}"
    return (
        f"2021-03-01 10:{r.k // 60 % 60:02d}:{r.k % 60:02d} | INFO | train_inner | epoch 001:  {r.step:6d} / "
        f"{r.total} loss={lo}, nll_loss=8.9, ppl=478.2, wps=12000, ups=3.2, wpb=3800, bsz=128, "
        f"num_updates={r.step}, lr={lr}, gnorm={g}, loss_scale={sc}, train_wall=31, gb_free=10, wall=40\n",
        {"loss": _f(lo), "grad_norm": _f(g), "scale": _f(sc), "lr": _f(lr)},
    )


def e_fairseq(r: Row, v: float) -> str:
    return (
        f"2021-03-01 10:00:00 | INFO | valid | epoch 001 | valid on 'valid' subset | loss {v:.3f} | nll_loss 8.1 | "
        f"ppl 275 | wps 30000 | wpb 3000 | bsz 100 | num_updates {r.step}\n"
    )


def r_mmengine_iter(r: Row) -> tuple[str, Shown]:
    """mmengine LogProcessor, iteration-based: `Iter(train) [  50/80000]  lr: ...  loss: ...`."""
    lo, g, lr = f"{r.loss:.4f}", f"{r.grad_norm:.4f}", f"{r.lr:.4e}"
    return (
        f"06/01 12:{r.k // 60 % 60:02d}:{r.k % 60:02d} - mmengine - INFO - Iter(train) [{r.step:5d}/{r.total}]  "
        f"lr: {lr}  eta: 1 day, 2:00:00  time: 0.5120  data_time: 0.0110  memory: 3000  grad_norm: {g}  "
        f"loss: {lo}  decode.loss_ce: 1.2000  aux.loss_ce: 0.5000\n",
        {"loss": _f(lo), "grad_norm": _f(g), "lr": _f(lr)},
    )


def e_mmengine(r: Row, v: float) -> str:
    return (
        "06/01 12:00:00 - mmengine - INFO - Iter(val) [500/500]    aAcc: 80.1200  mIoU: 40.1200  mAcc: 50.3400  "
        "data_time: 0.0100  time: 0.1200\n"
    )


def r_mmengine_epoch(r: Row) -> tuple[str, Shown]:
    """mmengine LogProcessor, epoch-based: `Epoch(train)  [2][ 50/500]  lr: ...  loss: ...` (the batch
    counter restarts each epoch)."""
    lo, lr = f"{r.loss:.4f}", f"{r.lr:.4e}"
    return (
        f"06/01 12:{r.k // 60 % 60:02d}:{r.k % 60:02d} - mmengine - INFO - Epoch(train)  [{r.epoch}][{r.batch:3d}/"
        f"{r.per_epoch}]  lr: {lr}  eta: 1:00:00  time: 0.5120  data_time: 0.0110  memory: 3000  loss: {lo}  "
        f"loss_cls: 0.9123  loss_bbox: 0.4012\n",
        {"loss": _f(lo), "lr": _f(lr)},
    )


def r_detectron2(r: Row) -> tuple[str, Shown]:
    """detectron2 CommonMetricPrinter: ` eta: ...  iter: 19  total_loss: 2.1  loss_cls: ...  lr: ...`."""
    lo, lr = f"{r.loss:.4g}", f"{r.lr:.6g}"
    return (
        f"[06/01 12:{r.k // 60 % 60:02d}:{r.k % 60:02d} d2.utils.events]:  eta: 0:10:00  iter: {r.step}  "
        f"total_loss: {lo}  loss_cls: 0.9  loss_box_reg: 0.5  loss_rpn_cls: 0.05  loss_rpn_loc: 0.05  "
        f"time: 0.4123  data_time: 0.0112  lr: {lr}  max_mem: 3000M\n",
        {"loss": _f(lo), "lr": _f(lr)},
    )


_YOLO_HEAD = ("\n" + "%11s" * 7) % ("Epoch", "GPU_mem", "box_loss", "cls_loss", "dfl_loss", "Instances", "Size") + "\n"


def r_yolo(r: Row) -> tuple[str, Shown]:
    """ultralytics: each epoch prints its header, the bar's last draw `  3/100  2.1G  1.234  2.345  1.111  25  640:
    100%|...` (the loss is box + cls + dfl), then the validation bar and its `all` row."""
    parts = [f"{r.loss * w:.4g}" for w in (0.3, 0.5, 0.2)]
    line = (
        ("%11s" * 2) % (f"{r.step}/{r.total}", "2.1G") + "".join(f"{p:>11s}" for p in parts) + f"{25:11.4g}{640:11.4g}"
    )
    val = ("%22s" + "%11s" * 6) % ("Class", "Images", "Instances", "Box(P", "R", "mAP50", "mAP50-95)")
    val += ": 100%|\u2588\u2588\u2588\u2588\u2588\u2588\u2588\u2588\u2588\u2588| 4/4 [00:01<00:00,  3.5it/s]\n"
    val += ("%22s" + "%11i" * 2 + "%11.3g" * 4) % ("all", 128, 929, 0.642, 0.532, 0.601, 0.441) + "\n"
    bar = ": 100%|\u2588\u2588\u2588\u2588\u2588\u2588\u2588\u2588\u2588\u2588| 8/8 [00:02<00:00,  3.1it/s]\n"
    return _YOLO_HEAD + line + bar + val, {"loss": sum(_f(p) for p in parts)}


def r_timm(r: Row) -> tuple[str, Shown]:
    """timm train.py: `Train: 3 [  50/1251 (  4%)]  Loss: 2.31 (2.36)  Time: ...  LR: 1.000e-04  Data: ...`."""
    lo, lr = f"{r.loss:#.3g}", f"{r.lr:.3e}"
    return (
        f"Train: {r.epoch - 1} [{r.batch:>4d}/{r.per_epoch} ({100 * r.batch / r.per_epoch:>3.0f}%)]  Loss: {lo} "
        f"({r.loss * 1.02:#.3g})  Time: 0.312s,  820.51/s  (0.401s,  638.20/s)  LR: {lr}  Data: 0.011 (0.020)\n",
        {"loss": _f(lo), "lr": _f(lr)},
    )


def e_timm(r: Row, v: float) -> str:
    return (
        f"Test: [   0/196]  Time: 0.912 (0.912)  Loss:  {v:6.3f} ({v:6.3f})  Acc@1:  60.000 ( 60.000)  "
        f"Acc@5:  80.000 ( 80.000)\n"
    )


def r_imagenet(r: Row) -> tuple[str, Shown]:
    """pytorch/examples imagenet ProgressMeter: `Epoch: [0][  10/5005]\\tTime ...\\tLoss 6.9078e+00 (6.9100e+00)`."""
    lo = f"{r.loss:.4e}"
    return (
        f"Epoch: [{r.epoch - 1}][{r.batch:4d}/{r.per_epoch}]\tTime  0.257 ( 0.560)\tData  0.001 ( 0.284)\tLoss {lo} "
        f"({r.loss * 1.02:.4e})\tAcc@1   0.00 (  0.14)\tAcc@5   0.78 (  0.62)\n",
        {"loss": _f(lo)},
    )


def r_plain_epoch(r: Row) -> tuple[str, Shown]:
    """A small project's print: `print(f"epoch {epoch} loss = {loss}")`."""
    return f"epoch {r.step} loss = {_repr(r.loss, 6)}\n", {"loss": _f(_repr(r.loss, 6))}


def r_tutorial(r: Row) -> tuple[str, Shown]:
    """yunjey/pytorch-tutorial: `Epoch [1/5], Step [100/600], Loss: 0.2310` (the step restarts each epoch)."""
    lo = f"{r.loss:.4f}"
    return f"Epoch [{r.epoch}/{(r.total - 1) // r.per_epoch + 1}], Step [{r.batch}/{r.per_epoch}], Loss: {lo}\n", {
        "loss": _f(lo)
    }


def r_logging(r: Row) -> tuple[str, Shown]:
    """Python logging with its default-ish format: `2024-05-01 12:00:03,123 - __main__ - INFO - Step 100:
    loss=2.3102, lr=3.00e-04, grad_norm=1.234`."""
    lo, lr, g = f"{r.loss:.4f}", f"{r.lr:.2e}", f"{r.grad_norm:.3f}"
    return (
        f"2024-05-01 12:{r.k // 60 % 60:02d}:{r.k % 60:02d},123 - __main__ - INFO - Step {r.step}: loss={lo}, "
        f"lr={lr}, grad_norm={g}\n",
        {"loss": _f(lo), "lr": _f(lr), "grad_norm": _f(g)},
    )


def e_logging(r: Row, v: float) -> str:
    return f"2024-05-01 12:00:00,123 - __main__ - INFO - Evaluation at step {r.step}: val_loss={v:.4f}, accuracy=0.51\n"


def r_md_table(r: Row) -> tuple[str, Shown]:
    """The Trainer's notebook table pasted as Markdown: `| Step | Training Loss | Validation Loss |`."""
    lo = f"{r.loss:.6f}"
    if r.eval_loss is None:
        head = "| Step | Training Loss |\n|---|---|\n" if r.k == 0 else ""
        return head + f"| {r.step} | {lo} |\n", {"loss": _f(lo)}
    head = "| Step | Training Loss | Validation Loss |\n|---|---|---|\n" if r.k == 0 else ""
    return head + f"| {r.step} | {lo} | {r.eval_loss:.6f} |\n", {"loss": _f(lo)}


def r_tab_table(r: Row) -> tuple[str, Shown]:
    """The same table copied out of a rendered notebook: cells separated by tabs."""
    lo = f"{r.loss:.6f}"
    if r.eval_loss is None:
        head = "Step\tTraining Loss\n" if r.k == 0 else ""
        return head + f"{r.step}\t{lo}\n", {"loss": _f(lo)}
    head = "Step\tTraining Loss\tValidation Loss\n" if r.k == 0 else ""
    return head + f"{r.step}\t{lo}\t{r.eval_loss:.6f}\n", {"loss": _f(lo)}


def r_kv(r: Row) -> tuple[str, Shown]:
    """key=value prints: `step=100 loss=2.31020 lr=3.000e-04 grad_norm=1.2340`."""
    lo, lr, g = f"{r.loss:.5f}", f"{r.lr:.3e}", f"{r.grad_norm:.4f}"
    return f"step={r.step} loss={lo} lr={lr} grad_norm={g}\n", {"loss": _f(lo), "lr": _f(lr), "grad_norm": _f(g)}


def _json_num(v: float) -> str:
    return json.dumps(round(v, 6) if math.isfinite(v) else v)


def r_jsonl(r: Row) -> tuple[str, Shown]:
    """One JSON object per logged step (a metrics.jsonl, or json.dumps printed to the console)."""
    lo, lr, g = _json_num(r.loss), _json_num(r.lr), _json_num(r.grad_norm)
    return (
        f'{{"step": {r.step}, "loss": {lo}, "lr": {lr}, "grad_norm": {g}}}\n',
        {"loss": float(json.loads(lo)), "lr": float(json.loads(lr)), "grad_norm": float(json.loads(g))},
    )


def e_jsonl(r: Row, v: float) -> str:
    return f'{{"step": {r.step}, "eval_loss": {_json_num(v)}, "eval_accuracy": 0.51}}\n'


def r_csv(r: Row) -> tuple[str, Shown]:
    """A metrics CSV: `step,loss,lr,grad_norm`."""
    lo, lr, g = _repr(r.loss, 6), f"{r.lr:.6g}", _repr(r.grad_norm, 6)
    head = "step,loss,lr,grad_norm\n" if r.k == 0 else ""
    return head + f"{r.step},{lo},{lr},{g}\n", {"loss": _f(lo), "lr": _f(lr), "grad_norm": _f(g)}


def r_chinese_iter(r: Row) -> tuple[str, Shown]:
    """A Chinese-labelled print: `迭代次数: 100, 损失: 2.3102, 梯度范数: 1.234`."""
    lo, g = _repr(r.loss), _repr(r.grad_norm, 3)
    return f"迭代次数: {r.step}, 损失: {lo}, 梯度范数: {g}\n", {"loss": _f(lo), "grad_norm": _f(g)}


def r_chinese_epoch(r: Row) -> tuple[str, Shown]:
    """`第 3 个epoch, 训练损失: 0.4100, 学习率: 0.001` (one line per epoch)."""
    lo = f"{r.loss:.4f}"
    val = f", 验证损失: {r.eval_loss:.4f}" if r.eval_loss is not None else ""
    return f"第 {r.step} 个epoch, 训练损失: {lo}{val}, 学习率: 0.001\n", {"loss": _f(lo)}


def r_litgpt(r: Row) -> tuple[str, Shown]:
    """litgpt finetune: `Epoch 1 | iter 4 step 2 | loss train: 2.140, val: n/a | iter time: 123.45 ms (step)`."""
    lo = f"{r.loss:.3f}"
    val = "n/a" if r.eval_loss is None else f"{r.eval_loss:.3f}"
    return (
        f"Epoch 1 | iter {2 * r.step} step {r.step} | loss train: {lo}, val: {val} | iter time: 123.45 ms (step) "
        f"remaining time: 0:10:00\n",
        {"loss": _f(lo)},
    )


def r_llmc(r: Row) -> tuple[str, Shown]:
    """karpathy/llm.c: `step    1/74 | train loss 2.310200 | norm 1.2340 | lr 1.00e-05 | 1200.00 ms | ...`."""
    lo, g, lr = f"{r.loss:7.6f}", f"{r.grad_norm:6.4f}", f"{r.lr:.2e}"
    return (
        f"step {r.step:4d}/{r.total} | train loss {lo} | norm {g} | lr {lr} | 1200.00 ms | 40.1% bf16 MFU | "
        f"4000 tok/s\n",
        {"loss": _f(lo), "grad_norm": _f(g), "lr": _f(lr)},
    )


def e_llmc(r: Row, v: float) -> str:
    return f"val loss {v:f}\n"


def r_paddleocr(r: Row) -> tuple[str, Shown]:
    """PaddleOCR program.train: `epoch: [1/500], global_step: 10, lr: 0.001000, loss: 2.345678, ...`."""
    lo, lr = f"{r.loss:.6f}", f"{r.lr:.6f}"
    return (
        f"[2022/01/01 12:{r.k // 60 % 60:02d}:{r.k % 60:02d}] ppocr INFO: epoch: [1/500], global_step: {r.step}, "
        f"lr: {lr}, loss: {lo}, loss_shrink_maps: 1.200000, loss_threshold_maps: 0.500000, loss_binary_maps: "
        f"0.300000, avg_reader_cost: 0.01000 s, avg_batch_cost: 0.50000 s, avg_samples: 8.0, ips: 16.00000 "
        f"samples/s, eta: 1 day, 2:00:00\n",
        {"loss": _f(lo), "lr": _f(lr)},
    )


def e_paddleocr(r: Row, v: float) -> str:
    return "[2022/01/01 12:00:00] ppocr INFO: cur metric, precision: 0.5012, recall: 0.4123, hmean: 0.4523, fps: 20.1\n"


@dataclass(frozen=True)
class Format:
    """A tool's print: its renderer, the columns it shows, how its steps are checked, its file."""

    name: str
    row: Callable[[Row], tuple[str, Shown]]
    steps: str = EXACT
    file: str = "train.log"
    #: `text`: a console or paste (every interleaving); `file`: a metrics file a program wrote
    #: (only what happens to a file: Windows line endings, a cut end); `table`: a pasted table
    #: (quoted, fenced, Windows line endings, a cut end)
    kind: str = "text"
    eval_line: Callable[[Row, float], str] | None = None
    #: prints the evaluation loss on the row's own line (Keras' `val_loss`, the notebook tables)
    eval_inline: bool = False
    #: the tool prints its evaluation before the row of the same step (nanoGPT evaluates at the top of the loop)
    eval_before: bool = False
    #: the evaluation loss the reader should keep apart as `eval_loss` (its values, in order)
    eval_read: bool = False
    #: its lines are epochs (the step is the epoch: 1, 2, 3...)
    epochs: bool = False
    #: it prints a batch counter that restarts each epoch (`per_epoch` batches)
    batched: bool = False
    #: a generic counter the `epoch_restart` interleaving may restart each epoch under `Epoch k` headers
    restartable: bool = False


FORMATS: dict[str, Format] = {
    f.name: f
    for f in (
        Format("hf_dicts", r_hf_dicts, ORDERED, eval_line=e_hf_dicts, eval_read=True),
        Format("hf_tqdm", r_hf_tqdm, EXACT, eval_line=e_hf_dicts, eval_read=True),
        Format("keras2_bar", r_keras2_bar, ORDERED, eval_inline=True, eval_read=True, epochs=True),
        Format("keras_verbose2", r_keras_verbose2, ORDERED, eval_inline=True, eval_read=True, epochs=True),
        Format("lightning_bar", r_lightning_bar, EXACT),
        Format("nanogpt", r_nanogpt, EXACT, eval_line=e_nanogpt, eval_read=True, restartable=True, eval_before=True),
        Format("megatron", r_megatron, EXACT, eval_line=e_megatron, eval_read=True),
        Format("deepspeed", r_deepspeed, EXACT),
        Format("deepspeed_chat", r_deepspeed_chat, EXACT),
        Format("fairseq", r_fairseq, EXACT, eval_line=e_fairseq),
        Format("mmengine_iter", r_mmengine_iter, EXACT, eval_line=e_mmengine),
        Format("mmengine_epoch", r_mmengine_epoch, ORDERED, eval_line=e_mmengine, batched=True),
        Format("detectron2", r_detectron2, EXACT),
        Format("yolo", r_yolo, ORDERED, epochs=True),
        Format("timm", r_timm, ORDERED, eval_line=e_timm, batched=True),
        Format("imagenet", r_imagenet, ORDERED, batched=True),
        Format("plain_epoch", r_plain_epoch, EXACT, epochs=True),
        Format("tutorial", r_tutorial, ORDERED, batched=True),
        Format("logging", r_logging, EXACT, eval_line=e_logging, restartable=True),
        Format("md_table", r_md_table, EXACT, kind="table", eval_inline=True, eval_read=True),
        Format("tab_table", r_tab_table, EXACT, kind="table", eval_inline=True, eval_read=True),
        Format("kv", r_kv, EXACT, restartable=True),
        Format("jsonl_file", r_jsonl, EXACT, file="metrics.jsonl", kind="file"),
        Format("jsonl_console", r_jsonl, EXACT, eval_line=e_jsonl, eval_read=True),
        Format("csv", r_csv, EXACT, file="metrics.csv", kind="file"),
        Format("chinese_iter", r_chinese_iter, EXACT, restartable=True),
        Format("chinese_epoch", r_chinese_epoch, EXACT, eval_inline=True, eval_read=True, epochs=True),
        Format("litgpt", r_litgpt, ORDERED, eval_inline=True),
        Format("llmc", r_llmc, EXACT, eval_line=e_llmc, eval_read=True),
        Format("paddleocr", r_paddleocr, EXACT, eval_line=e_paddleocr),
    )
}


# ------------------------------------------------------------------ fault curves


@dataclass(frozen=True)
class Curve:
    """A run's values at its logged rows and the truth of its fault."""

    loss: np.ndarray
    lr: np.ndarray
    grad_norm: np.ndarray
    scale: np.ndarray
    symptoms: frozenset[str]  # empty: healthy (no warning or critical finding)
    window: tuple[int, int] | None = None  # the rows an alarm may be dated at (inclusive)
    late: bool = False  # an excerpt from late in a long run (its steps start far from 0)


def _noise(rng: np.random.Generator, n: int, rel: float) -> np.ndarray:
    return np.exp(rel * rng.standard_normal(n))


def _base(rng: np.random.Generator, n: int) -> dict[str, np.ndarray]:
    """A sound fp16 run: a loss falling from `start` towards a floor with batch noise, a warm-up then
    cosine LR, a grad norm around 1, and a loss scale that settles after the usual two overflows of
    the first steps (65536 -> 16384)."""
    t = np.arange(n) / max(1, n - 1)
    start = float(rng.uniform(2.0, 6.0))
    floor = start * float(rng.uniform(0.2, 0.5))
    loss = (floor + (start - floor) * np.exp(-3.0 * t)) * _noise(rng, n, 0.02)
    warm = max(1, n // 10)
    k = np.arange(n)
    peak = float(rng.choice([1e-4, 3e-4, 1e-3]))
    lr = np.where(
        k < warm, peak * (k + 1) / warm, 0.1 * peak + 0.45 * peak * (1 + np.cos(np.pi * (k - warm) / max(1, n - warm)))
    )
    gn = (0.6 + 0.8 * np.exp(-2.0 * t)) * _noise(rng, n, 0.1)
    scale = np.full(n, 16384.0)
    scale[0], scale[1] = 65536.0, 32768.0
    return {"loss": loss, "lr": lr, "grad_norm": gn, "scale": scale}


def _onset(rng: np.random.Generator, n: int) -> int:
    return int(rng.integers(max(8, int(0.4 * n)), max(9, int(0.75 * n))))


def c_healthy(rng: np.random.Generator, n: int) -> Curve:
    """A healthy run from its start: the loss falls with noise."""
    return Curve(**_base(rng, n), symptoms=frozenset())


def c_healthy_late(rng: np.random.Generator, n: int, epochs: bool = False) -> Curve:
    """An excerpt from late in a long run: flat-ish at a level no chance level names, still falling
    by ~2% over the excerpt (by 0.4% a pass when its rows are epochs: a converging run still learns
    something each pass over its data), a small decaying LR."""
    d = _base(rng, n)
    level = float(rng.uniform(0.9, 2.1))
    trend = np.exp(-0.004 * np.arange(n)) if epochs else np.linspace(1.0, 0.98, n)
    d["loss"] = level * trend * _noise(rng, n, 0.0015 if epochs else 0.015)
    d["lr"] = np.linspace(3e-5, 2e-5, n)
    d["grad_norm"] = 0.3 * _noise(rng, n, 0.1)
    d["scale"] = np.full(n, 16384.0)
    return Curve(**d, symptoms=frozenset(), late=True)


def c_nan(rng: np.random.Generator, n: int) -> Curve:
    """Healthy, then NaN loss and grad norm from row k on."""
    d = _base(rng, n)
    k = _onset(rng, n)
    d["loss"][k:] = np.nan
    d["grad_norm"][k:] = np.nan
    return Curve(**d, symptoms=frozenset({"nonfinite"}), window=(k - 1, k + 1))


def c_inf_nan(rng: np.random.Generator, n: int) -> Curve:
    """Healthy, then one inf loss at row k and NaN after it."""
    d = _base(rng, n)
    k = _onset(rng, n)
    d["loss"][k] = np.inf
    d["loss"][k + 1 :] = np.nan
    d["grad_norm"][k:] = np.nan
    return Curve(**d, symptoms=frozenset({"nonfinite"}), window=(k - 1, k + 1))


def c_divergence(rng: np.random.Generator, n: int) -> Curve:
    """Healthy, then the loss multiplies by 2.5-4 each row from k until past 1e6, and stays up."""
    d = _base(rng, n)
    k = _onset(rng, n)
    f = float(rng.uniform(2.5, 4.0))
    x = d["loss"]
    for i in range(k, n):
        x[i] = x[i - 1] * (f if x[i - 1] < 1e7 else float(rng.uniform(0.9, 1.2)))
    d["grad_norm"][k:] *= np.cumprod(np.full(n - k, f))
    cross = k + int(np.argmax(x[k:] > 10 * x[k - 1]))
    return Curve(**d, symptoms=frozenset({"divergence", "nonfinite"}), window=(k - 1, cross + 1))


def c_spike_recovers(rng: np.random.Generator, n: int) -> Curve:
    """Healthy, one row at x5-10, the next back on the curve."""
    d = _base(rng, n)
    k = _onset(rng, n)
    d["loss"][k] *= float(rng.uniform(5.0, 10.0))
    return Curve(**d, symptoms=frozenset({"spike"}), window=(k - 1, k + 1))


def c_spike_stays(rng: np.random.Generator, n: int) -> Curve:
    """Healthy, then the loss jumps x4-8 at row k and stays up (a level shift the run never undoes)."""
    d = _base(rng, n)
    k = _onset(rng, n)
    d["loss"][k:] *= float(rng.uniform(4.0, 8.0))
    return Curve(**d, symptoms=frozenset({"spike", "divergence"}), window=(k - 1, k + 1))


def c_plateau_ln10(rng: np.random.Generator, n: int) -> Curve:
    """A 10-class classifier that never learns: ln 10 from the first row, with a model's tiny noise."""
    d = _base(rng, n)
    d["loss"] = math.log(10) * (1 + 0.0005 * rng.standard_normal(n))
    return Curve(**d, symptoms=frozenset({"plateau", "stall"}), window=(0, 1))


def c_zero(rng: np.random.Generator, n: int) -> Curve:
    """A loss of exactly 0 from the first row (a masked-out label, a loss on nothing): no gradient
    either, since a 0 while gradients flow is a healthy shape (GRPO with beta = 0 prints 0)."""
    d = _base(rng, n)
    d["loss"] = np.zeros(n)
    d["grad_norm"] = np.zeros(n)
    return Curve(**d, symptoms=frozenset({"zero_loss"}), window=(0, 1))


def c_fp16_overflow(rng: np.random.Generator, n: int) -> Curve:
    """An fp16 run whose loss scale halves at every row from k (each step overflows and is skipped;
    the loss stays where it was, the grad norm is inf), then the loss is NaN from k + m on."""
    d = _base(rng, n)
    k = _onset(rng, n)
    m = int(rng.integers(3, 7))
    for i in range(k, n):
        d["scale"][i] = d["scale"][i - 1] / 2
    d["loss"][k : k + m] = d["loss"][k - 1] * _noise(rng, len(d["loss"][k : k + m]), 0.005)
    d["loss"][k + m :] = np.nan
    d["grad_norm"][k:] = np.inf
    return Curve(**d, symptoms=frozenset({"nonfinite", "skipped_steps"}), window=(k - 1, min(n - 1, k + m + 1)))


def c_grad_explosion(rng: np.random.Generator, n: int) -> Curve:
    """The grad norm grows x2-3 per row from k for m rows, the loss creeps up on the last two, then
    loss and grad norm are NaN."""
    d = _base(rng, n)
    k = _onset(rng, n)
    m = int(rng.integers(4, 8))
    f = float(rng.uniform(2.0, 3.0))
    end = min(n - 3, k + m)  # two NaN rows at least: a cut end still shows one
    d["grad_norm"][k:end] *= f ** np.arange(1, end - k + 1)
    d["loss"][end - 2 : end] *= np.array([1.3, 1.8])
    d["loss"][end:] = np.nan
    d["grad_norm"][end:] = np.nan
    return Curve(**d, symptoms=frozenset({"nonfinite", "divergence"}), window=(k - 1, end + 1))


CURVES: dict[str, Callable[..., Curve]] = {
    "healthy": c_healthy,
    "healthy_late": c_healthy_late,
    "nan": c_nan,
    "inf_nan": c_inf_nan,
    "divergence": c_divergence,
    "spike_recovers": c_spike_recovers,
    "spike_stays": c_spike_stays,
    "plateau_ln10": c_plateau_ln10,
    "zero": c_zero,
    "fp16_overflow": c_fp16_overflow,
    "grad_explosion": c_grad_explosion,
}


# ------------------------------------------------------------------ interleavings


@dataclass
class Piece:
    """A chunk of the log and the row it prints (None: something else the console printed)."""

    text: str
    row: int | None = None
    eval_row: int | None = None  # the row whose evaluation this line prints


_WARNINGS = (
    "/opt/conda/lib/python3.10/site-packages/torch/optim/lr_scheduler.py:139: UserWarning: Detected call of "
    "`lr_scheduler.step()` before `optimizer.step()`. In PyTorch 1.1.0 and later, you should call them in the opposite "
    'order.\n  warnings.warn("Detected call of `lr_scheduler.step()` before `optimizer.step()`. "\n',
    "[W reducer.cpp:1300] Warning: find_unused_parameters=True was specified in DDP constructor, but did not find any "
    "unused parameters in the forward pass. (function operator())\n",
    "/usr/local/lib/python3.10/dist-packages/torch/utils/checkpoint.py:429: UserWarning: torch.utils.checkpoint: please "
    "pass in use_reentrant=True or use_reentrant=False explicitly.\n  warnings.warn(\n",
    "WARNING:tensorflow:Callback method `on_train_batch_end` is slow compared to the batch time (batch time: 0.0123s vs "
    "`on_train_batch_end` time: 0.0456s). Check your callbacks.\n",
)

_TRACEBACK = (
    "Traceback (most recent call last):\n"
    '  File "/home/user/project/train.py", line 212, in <module>\n'
    "    main()\n"
    '  File "/home/user/project/train.py", line 187, in main\n'
    "    for step, batch in enumerate(loader, start=1):\n"
    '  File "/opt/conda/lib/python3.10/site-packages/torch/utils/data/dataloader.py", line 1133, in _try_get_data\n'
    "    raise RuntimeError(f'DataLoader worker (pid(s) {pids_str}) exited unexpectedly') from e\n"
    "RuntimeError: DataLoader worker (pid(s) 48213) exited unexpectedly\n"
)


def _overflow_line(prev: float, cur: float, k: int) -> str:
    return (
        f"[2024-05-01 12:{k // 60 % 60:02d}:{k % 60:02d},456] [INFO] [loss_scaler.py:183:update_scale] "
        f"[deepspeed] OVERFLOW! Rank 0 Skipping step. Attempted loss scale: {int(prev)}, reducing to {cur:g}\n"
    )


def _ckpt_lines(r: Row, j: int) -> str:
    """What a save prints, in four tools' words (the Trainer, Lightning's ModelCheckpoint, Keras'
    ModelCheckpoint, a script's own print)."""
    return (
        f"Saving model checkpoint to ./output/checkpoint-{r.step}\nConfiguration saved in ./output/checkpoint-{r.step}"
        f"/config.json\nModel weights saved in ./output/checkpoint-{r.step}/model.safetensors\n",
        f"Epoch 0, global step {r.step}: 'val_loss' reached {r.loss * 1.1:0.5f} (best {r.loss * 1.1:0.5f}), saving model "
        f"to '/ckpt/epoch=0-step={r.step}.ckpt' as top 1\n",
        f"\nEpoch {r.k + 1}: loss improved from {r.loss * 1.05:.5f} to {r.loss:.5f}, saving model to model.keras\n",
        f"saved checkpoint to checkpoints/ckpt_{r.step:06d}.pt (took 2.31 s)\n",
    )[j % 4]


@dataclass(frozen=True)
class Interleaving:
    name: str
    kinds: frozenset[str] = frozenset({"text"})  # the format kinds it applies to
    needs: str = ""  # a Format flag it needs ("restartable", "nohead")


INTERLEAVINGS: dict[str, Interleaving] = {
    i.name: i
    for i in (
        Interleaving("none", frozenset({"text", "file", "table"})),
        Interleaving("overflow"),  # DeepSpeed's OVERFLOW line before each row whose loss scale was cut
        Interleaving("warnings"),  # Python / c10 / TF warnings between rows
        Interleaving("eval"),  # the tool's evaluation print every fifth of the run
        Interleaving("tqdm"),  # the training loop's bar redrawn before each row, the print glued after it
        Interleaving("checkpoint"),  # save lines every fourth of the run
        Interleaving("traceback"),  # the run ended by a traceback
        Interleaving("rank_prefix"),  # torchrun's `[default0]:` before each line
        Interleaving("srun_prefix"),  # `srun -l`'s `0: ` before each line
        Interleaving("timestamps"),  # `kubectl logs --timestamps` / docker: an ISO time before each line
        Interleaving("md_quote", frozenset({"text", "table"})),  # pasted as a Markdown quote, `> ` each line
        Interleaving("fence", frozenset({"text", "table"})),  # pasted in a code fence with words around it
        Interleaving("crlf", frozenset({"text", "file", "table"})),  # Windows line endings
        Interleaving("cut_tail", frozenset({"text", "file", "table"})),  # cut in the middle of its last row
        Interleaving("cut_head", frozenset({"text"}), needs="nohead"),  # starts in the middle of its first row
        Interleaving("epoch_restart", needs="restartable"),  # `Epoch k` headers; the counter restarts each epoch
    )
}


def applicable(fmt: Format) -> list[str]:
    out = []
    for name, i in INTERLEAVINGS.items():
        if fmt.kind not in i.kinds:
            continue
        if i.needs == "restartable" and not fmt.restartable:
            continue
        if i.needs == "nohead" and fmt.name in ("yolo", "keras2_bar", "keras_verbose2"):
            continue  # their first row carries the header the rest are read by
        if name == "eval" and not (fmt.eval_line or fmt.eval_inline):
            continue
        out.append(name)
    return out


# ------------------------------------------------------------------ a case


@dataclass
class Case:
    name: str
    fmt: str
    curve: str
    inter: tuple[str, ...]
    text: str
    file: str
    steps_mode: str
    truth: list[tuple[int, Shown]]  # (the printed step, the values shown) for each row
    optional: set[int] = field(default_factory=set)  # rows a cut may have taken (unchecked)
    eval_truth: list[float] = field(default_factory=list)
    symptoms: frozenset[str] = frozenset()
    window: tuple[int, int] | None = None


def _rows(fmt: Format, cv: Curve, rng: np.random.Generator, n: int, restart: bool) -> list[Row]:
    if fmt.epochs:  # a late excerpt of an epoch log starts at a late epoch
        every, first = 1, (1 if not cv.late else int(rng.integers(40, 200)))
    else:
        every = int(rng.choice([1, 5, 10, 50]))
        first = every if not cv.late else every * int(rng.integers(400, 2000))
    steps = [first + every * k for k in range(n)]
    total = steps[-1] + every * int(rng.integers(0, 5)) if fmt.epochs else steps[-1] + every * int(rng.integers(1, 50))
    per = 0
    if fmt.batched or restart:
        per = max(2, n // int(rng.integers(3, 6))) * every
    rows = []
    cuts = np.concatenate([[0], np.cumsum(cv.scale[1:] < cv.scale[:-1])])
    for k, s in enumerate(steps):
        epoch, batch = (1, 0) if not per else ((s - 1) // per + 1, (s - 1) % per + 1)
        rows.append(
            Row(
                k=k,
                step=s,
                n=n,
                total=total,
                loss=float(cv.loss[k]),
                lr=float(cv.lr[k]),
                grad_norm=float(cv.grad_norm[k]),
                scale=float(cv.scale[k]),
                skipped=int(k > 0 and cv.scale[k] < cv.scale[k - 1]),
                skipped_total=int(cuts[k]),
                epoch=epoch,
                batch=batch,
                per_epoch=per,
            )
        )
    return rows


def _eval_rows(n: int) -> set[int]:
    return {k for k in range(n) if (k + 1) % max(2, n // 5) == 0}


def _with_eval(fmt: Format, rows: list[Row], rng: np.random.Generator) -> tuple[list[Row], dict[int, float]]:
    evals: dict[int, float] = {}
    at = set(range(len(rows))) if fmt.eval_inline else _eval_rows(len(rows))
    for k in sorted(at):
        v = rows[k].loss * 1.1 + 0.05 if math.isfinite(rows[k].loss) else float("nan")
        evals[k] = round(v, 4)
    if fmt.eval_inline:
        rows = [replace(r, eval_loss=evals[r.k]) for r in rows]
    return rows, evals


def render(
    fmt: Format, cv: Curve, inter: tuple[str, ...], rng: np.random.Generator, n: int
) -> tuple[str, list[tuple[int, Shown]], set[int], list[float]]:
    """The log's text, the truth per row, the rows a cut may have taken, the evaluation losses."""
    restart = "epoch_restart" in inter
    rows = _rows(fmt, cv, rng, n, restart)
    evals: dict[int, float] = {}
    if "eval" in inter:
        rows, evals = _with_eval(fmt, rows, rng)
    pieces: list[Piece] = []
    truth: list[tuple[int, Shown]] = []
    warn_at = set(int(x) for x in rng.choice(n, size=min(n, 4), replace=False))
    ckpt_every = max(2, n // 4)
    for r in rows:
        if "overflow" in inter and r.skipped:
            pieces.append(Piece(_overflow_line(float(cv.scale[r.k - 1]), r.scale, r.k)))
        if restart and r.batch == 1:
            pieces.append(Piece(f"Epoch {r.epoch}/{(rows[-1].epoch)}\n"))
        if "tqdm" in inter:
            s = r.batch if (restart or fmt.batched) else r.step
            tot = r.per_epoch if (restart or fmt.batched) else r.total
            pieces.append(Piece("\r" + _bar(max(0, s - 1), tot) + "\r" + _bar(s, tot)))
        has_eval = "eval" in inter and r.k in evals and fmt.eval_line is not None and not fmt.eval_inline
        if has_eval and fmt.eval_before:
            pieces.append(Piece(fmt.eval_line(r, evals[r.k]), eval_row=r.k))
        printed = replace(r, step=r.batch) if restart else r
        text, shown = fmt.row(printed)
        pieces.append(Piece(text, r.k))
        truth.append((r.step, shown))
        if has_eval and not fmt.eval_before:
            pieces.append(Piece(fmt.eval_line(r, evals[r.k]), eval_row=r.k))
        if "warnings" in inter and r.k in warn_at:
            pieces.append(Piece(_WARNINGS[r.k % len(_WARNINGS)]))
        if "checkpoint" in inter and (r.k + 1) % ckpt_every == 0:
            pieces.append(Piece(_ckpt_lines(r, (r.k + 1) // ckpt_every)))
    if pieces and not pieces[-1].text.endswith("\n"):
        pieces[-1].text += "\n"
    if "traceback" in inter:
        pieces.append(Piece(_TRACEBACK))
    optional: set[int] = set()
    if "cut_tail" in inter:
        pieces, optional = _cut_tail(pieces, optional)
    if "cut_head" in inter:
        pieces, optional = _cut_head(pieces, optional)
    text = "".join(p.text for p in pieces)
    text = _wrap(text, inter, rng)
    # the evaluations the text still holds: a cut took the lines after its row, and a cut row's own
    eval_rows = (
        sorted(k for k in evals if k not in optional)
        if fmt.eval_inline
        else sorted(p.eval_row for p in pieces if p.eval_row is not None)
    )
    eval_truth = [evals[k] for k in eval_rows] if fmt.eval_read and "eval" in inter else []
    return text, truth, optional, eval_truth


def _cut_tail(pieces: list[Piece], optional: set[int]) -> tuple[list[Piece], set[int]]:
    """Cut in the middle of the last row's text: what follows it is lost, that row may or may not read."""
    last = max(i for i, p in enumerate(pieces) if p.row is not None)
    p = pieces[last]
    body = p.text.rstrip("\n")
    pieces = pieces[:last] + [Piece(body[: max(1, len(body) // 2)], p.row)]
    return pieces, optional | {p.row}


def _cut_head(pieces: list[Piece], optional: set[int]) -> tuple[list[Piece], set[int]]:
    """Start in the middle of the first row's text (an excerpt copied from a scroll)."""
    first = min(i for i, p in enumerate(pieces) if p.row is not None)
    p = pieces[first]
    lines = p.text.split("\n")
    lines[0] = lines[0][len(lines[0]) // 2 :]
    return [Piece("\n".join(lines), p.row)] + pieces[first + 1 :], optional | {p.row}


def _prefix_lines(text: str, prefix: Callable[[int], str]) -> str:
    lines = text.split("\n")
    out = [prefix(i) + ln if (ln or i < len(lines) - 1) else ln for i, ln in enumerate(lines)]
    return "\n".join(out)


def _wrap(text: str, inter: tuple[str, ...], rng: np.random.Generator) -> str:
    """The per-line and whole-text interleavings, in the order they happen to a log: a launcher's
    prefixes as it is written, then the paste's quote or fence, then the line endings."""
    if "rank_prefix" in inter:
        text = _prefix_lines(text, lambda i: "[default0]:")
    if "srun_prefix" in inter:
        text = _prefix_lines(text, lambda i: "0: ")
    if "timestamps" in inter:
        text = _prefix_lines(
            text, lambda i: f"2024-05-01T12:{i // 3600 % 60:02d}:{i // 60 % 60:02d}.{i % 60:02d}1234Z "
        )
    if "md_quote" in inter:
        text = _prefix_lines(text, lambda i: "> ")
    if "fence" in inter:
        text = "Here is the log of my run:\n\n```\n" + text + "```\n\nAny idea what is going on?\n"
    if "crlf" in inter:
        text = text.replace("\n", "\r\n")
    return text


def make_case(fmt_name: str, curve_name: str, inter: tuple[str, ...], seed: int) -> Case:
    fmt = FORMATS[fmt_name]
    rng = np.random.default_rng([seed, len(fmt_name), sum(map(ord, fmt_name + curve_name + "+".join(inter)))])
    n = int(rng.choice([24, 40, 80, 150]))
    cv = (
        CURVES[curve_name](rng, n, epochs=True)
        if fmt.epochs and curve_name == "healthy_late"
        else CURVES[curve_name](rng, n)
    )
    text, truth, optional, eval_truth = render(fmt, cv, inter, rng, n)
    mode = ORDERED if "epoch_restart" in inter else fmt.steps
    return Case(
        name=f"{fmt_name}/{curve_name}/{'+'.join(inter)}/{seed}",
        fmt=fmt_name,
        curve=curve_name,
        inter=inter,
        text=text,
        file=fmt.file,
        steps_mode=mode,
        truth=truth,
        optional=optional,
        eval_truth=eval_truth,
        symptoms=cv.symptoms,
        window=cv.window,
    )


def cases(seed: int = 0, per_pair: int = 2, stack: float = 1 / 3, formats: list[str] | None = None) -> list[Case]:
    """A covering sample: each format x curve with `per_pair` interleavings taken in rotation over the
    format's applicable ones (so each format meets each of its interleavings), a `stack` share of them
    with a second interleaving drawn at random (seeded)."""
    rng = np.random.default_rng(seed)
    out = []
    for fi, fname in enumerate(formats or FORMATS):
        app = applicable(FORMATS[fname])
        for ci, cname in enumerate(CURVES):
            for j in range(per_pair):
                first = app[(ci + fi + j * (len(app) // 2 or 1)) % len(app)]
                inter = (first,)
                if rng.random() < stack:
                    second = str(rng.choice([a for a in app if a != first and a != "none"] or ["none"]))
                    if second != "none":
                        inter = tuple(sorted({first, second} - {"none"}))
                out.append(make_case(fname, cname, inter, seed))
    return out


def full_product(seed: int = 0) -> list[Case]:
    return [make_case(f, c, (i,), seed) for f in FORMATS for c in CURVES for i in applicable(FORMATS[f])]


# ------------------------------------------------------------------ judging


@dataclass
class Result:
    case: Case
    read_ok: bool
    read_why: str
    verdict_ok: bool
    verdict_why: str
    status: str = ""
    findings: list[tuple] = field(default_factory=list)


def _same(a: float, b: float) -> bool:
    if math.isnan(a) or math.isnan(b):
        return math.isnan(a) and math.isnan(b)
    if math.isinf(a) or math.isinf(b):
        return a == b
    return abs(a - b) <= 1e-6 * max(1.0, abs(b))


def _series(run, col: str) -> list[tuple[int, float]]:
    if col not in run.cols:
        return []
    lg = run.logged(col)
    return [(int(s), float(v)) for s, v in zip(run.steps[lg], run.cols[col][lg])]


def _loss_rows(case: Case, run) -> tuple[list[int] | None, str]:
    """The reader's step of each truth row (None: the reading of the loss does not hold), and why."""
    got = _series(run, "loss")
    want = [(i, s, v["loss"]) for i, (s, v) in enumerate(case.truth)]
    if case.steps_mode == EXACT:
        by = dict(got)
        req = [(i, s, v) for i, s, v in want if i not in case.optional]
        extra = set(by) - {s for _, s, _ in want}
        if extra:
            return None, f"loss at steps not printed: {sorted(extra)[:4]}"
        for i, s, v in req:
            if s not in by:
                return None, f"row {i}: no loss at step {s}"
            if not _same(by[s], v):
                return None, f"row {i}: loss {by[s]!r} at step {s}, printed {v!r}"
        return [s for _, s, _ in want], ""
    steps = [s for s, _ in got]
    if any(b <= a for a, b in zip(steps, steps[1:])):
        return None, "steps not increasing"
    vals = [v for _, v in got]
    req = [v for i, _, v in want if i not in case.optional]
    head = 0 in case.optional and len(vals) > len(req)  # the cut first row was read too
    tail = (len(want) - 1) in case.optional and len(vals) > len(req) + head
    body = vals[int(head) : len(vals) - int(tail)]
    if len(body) != len(req):
        return None, f"{len(vals)} loss values read, {len(req)} printed"
    for i, (a, b) in enumerate(zip(body, req)):
        if not _same(a, b):
            return None, f"value {i}: loss {a!r}, printed {b!r}"
    mapped = steps if (head or 0 not in case.optional) else steps[:1] + steps
    return (mapped + mapped[-1:] * len(want))[: len(want)], ""


def _check_others(case: Case, run, row_steps: list[int]) -> str:
    for col in ("lr", "grad_norm", "scale"):
        if not any(col in v for _, v in case.truth):
            continue
        by = dict(_series(run, col))
        for i, (_, v) in enumerate(case.truth):
            if i in case.optional or col not in v:
                continue
            s = row_steps[i]
            if s not in by:
                return f"row {i}: no {col} at step {s}"
            if not _same(by[s], v[col]):
                return f"row {i}: {col} {by[s]!r} at step {s}, printed {v[col]!r}"
    if case.eval_truth:
        got = [v for _, v in _series(run, "eval_loss")]
        extra = len(got) - len(case.eval_truth)  # the cut row's own evaluation may be read or not
        if extra not in ((0, 1) if case.optional else (0,)) or not all(
            _same(a, b) for a, b in zip(got, case.eval_truth)
        ):
            return f"eval_loss {got[:4]}... ({len(got)}), printed {case.eval_truth[:4]}... ({len(case.eval_truth)})"
    return ""


def _verdict(case: Case, report, row_steps: list[int]) -> tuple[bool, str]:
    alarms = [f for f in report.findings if f.severity in ALARM]
    if not case.symptoms:
        if alarms:
            f = alarms[0]
            return False, f"false alarm: {f.symptom}/{f.cause} at {f.step}"
        return True, ""
    if not alarms:
        return False, f"no alarm (status {report.status})"
    lo_row, hi_row = case.window or (0, len(row_steps) - 1)
    hi_row += sum(1 for i in case.optional if i <= hi_row)  # a row the cut took is no row to date it by
    lo = row_steps[max(0, lo_row)]
    hi = row_steps[min(len(row_steps) - 1, hi_row)]
    for f in alarms[:2]:
        if f.symptom in case.symptoms and f.step is not None and lo <= f.step <= hi:
            return True, ""
    f = alarms[0]
    return False, f"first alarm {f.symptom}/{f.cause} at {f.step}; want {sorted(case.symptoms)} in [{lo}, {hi}]"


def judge(case: Case, tmp: Path) -> Result:
    """Read the case's file the way `lossdoctor diagnose FILE` does and judge the reading and the verdict."""
    from lossdoctor.detectors.engine import diagnose_runs
    from lossdoctor.sources import load_path

    path = tmp / case.file
    path.write_bytes(case.text.encode("utf-8"))
    try:
        runs = load_path(str(path))
    except Exception as e:  # noqa: BLE001 - a refusal is a result here
        return Result(case, False, f"refused: {type(e).__name__}: {str(e)[:120]}", False, "not read")
    run = runs[0]
    row_steps, why = _loss_rows(case, run)
    read_ok = row_steps is not None
    if row_steps is not None:
        why = _check_others(case, run, row_steps)
        read_ok = not why
    else:  # judge the verdict on the steps the reader gave the rows it has, in order
        row_steps = [s for s, _ in _series(run, "loss")] or [0]
        row_steps = (row_steps + [row_steps[-1]] * len(case.truth))[: len(case.truth)]
    report = diagnose_runs(runs)
    ok, vwhy = _verdict(case, report, row_steps)
    return Result(
        case,
        read_ok,
        why,
        ok,
        vwhy,
        report.status,
        [(f.symptom, f.cause, f.severity, f.step) for f in report.findings[:3]],
    )
