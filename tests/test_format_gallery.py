"""The format gallery: training text as the tools print it, read by `lossdoctor diagnose`.

Each case is a short log written the way one tool's print code writes it (the tool and its source
file are cited beside each writer), with the truth: the training loss at each step and, where the
tool prints them, the evaluation loss, gradient norm, LR and loss scale. One parametrized test
loads each through `lossdoctor.sources.load_path` (the same path as `lossdoctor diagnose FILE`) and
asserts that exactly those values are read at exactly those steps: so an evaluation, validation or
test loss, a component loss (loss_cls, aux, z-loss, a GAN's d_loss/g_loss) or a meter's running
average never becomes the training loss (its values would differ from the truth).

A truth is `{step: value}`, or `ORDERED` and a list of values where the tool's step is not in the
text in full (a batch counter that restarts each epoch and an epoch numbered from 0 or 1, a line with
no counter): the values must then be read in that order at strictly increasing steps.

`python -m pytest -q tests/test_format_gallery.py` prints the figure in docs/benchmarks.md.
"""

from __future__ import annotations

import itertools
import json
import math

import pytest

from lossdoctor.sources import load_path

ORDERED = "ordered"
NAN = float("nan")
L = [2.3102, 2.2531, 2.1987, 2.1402, 2.0876]  # a falling training loss
V = [2.5001, 2.4502, 2.4013]  # an evaluation loss: never the training loss
G = [1.234, 1.111, 0.987, 0.912, 0.876]  # gradient norms
CASES: list[dict] = []


def case(name, text, loss, file="train.log", **other):
    CASES.append({"name": name, "text": text, "file": file, "loss": loss, **other})


# --- Hugging Face ------------------------------------------------------------------------------
# transformers/trainer_callback.py PrinterCallback/ProgressCallback.on_log: `print(logs)` of the
# dict Trainer._maybe_log_save_evaluate builds ({'loss', 'grad_norm', 'learning_rate', 'epoch'}); the
# step is not printed (numbered in order); evaluate() logs {'eval_loss', 'eval_runtime', ..., 'epoch'}
case(
    "hf_trainer_console_dicts",
    "".join(
        f"{{'loss': {v}, 'grad_norm': {g}, 'learning_rate': 5e-05, 'epoch': {0.1 * (k + 1):.2f}}}\n"
        for k, (v, g) in enumerate(zip(L[:4], G))
    )
    + "{'eval_loss': 2.5001, 'eval_runtime': 10.1, 'eval_samples_per_second': 99.0, 'epoch': 0.4}\n",
    {1: L[0], 2: L[1], 3: L[2], 4: L[3]},
    grad_norm={1: G[0], 2: G[1], 3: G[2], 4: G[3]},
)

# transformers/utils/notebook.py NotebookTrainingTracker: the HTML table `| Step | Training Loss |
# Validation Loss |`, pasted into an issue as Markdown
case(
    "hf_notebook_markdown_table",
    "| Step | Training Loss | Validation Loss |\n|---|---|---|\n"
    + "".join(f"| {s} | {v} | {e} |\n" for s, v, e in zip((500, 1000, 1500), L, V)),
    {500: L[0], 1000: L[1], 1500: L[2]},
    eval_loss={500: V[0], 1000: V[1], 1500: V[2]},
)

# the same table copied out of a rendered notebook: cells separated by tabs, `No log` before the
# first logging step (nothing logged at epoch 1: no value, not a NaN)
case(
    "hf_notebook_tab_table",
    "Epoch\tTraining Loss\tValidation Loss\tAccuracy\n"
    "1\tNo log\t2.500100\t0.410000\n2\t2.253100\t2.450200\t0.520000\n3\t2.198700\t2.401300\t0.550000\n",
    {2: L[1], 3: L[2]},
    eval_loss={1: V[0], 2: V[1], 3: V[2]},
)

# --- Lightning ----------------------------------------------------------------------------------
# lightning/pytorch/callbacks/progress/tqdm_progress.py: `Epoch {current_epoch}:` bars; postfix from
# get_metrics (v_num, the prog_bar metrics); the bar's counter is the batch within the epoch


def lightning_bar(epoch, batch, total, **post):
    pct = int(100 * batch / total)
    return (
        f"Epoch {epoch}: {pct:3d}%|#####     | {batch}/{total} [00:02<00:03, 17.30it/s, "
        + ", ".join(f"{k}={v}" for k, v in post.items())
        + "]"
    )


case(
    "lightning_bar_train_loss_step",
    "\n".join(lightning_bar(0, b, 100, v_num=3, train_loss_step=v) for b, v in zip((20, 40, 60), L)) + "\n",
    {20: L[0], 40: L[1], 60: L[2]},
)

# NeMo's bar (nemo/utils/callbacks: the Lightning bar with `reduced_train_loss` and `global_step`)
case(
    "nemo_bar_reduced_train_loss",
    "\n".join(
        f"Epoch 0: :  {b // 10:2d}%|#  | {b}/1000 [01:00<09:00, reduced_train_loss={v:.3f}, "
        f"global_step={b - 1}.0, consumed_samples={b * 128}.0, train_step_timing in s=0.512]"
        for b, v in zip((100, 200, 300), L)
    )
    + "\n",
    {99: round(L[0], 3), 199: round(L[1], 3), 299: round(L[2], 3)},
)

# --- Keras -----------------------------------------------------------------------------------------
# keras/src/utils/progbar.py (verbose=2 / end of epoch): `Epoch 1/10` then `100/100 - 2s - 15ms/step -
# loss: 0.4123 - val_loss: 0.3900`
case(
    "keras_epoch_lines_val_loss",
    "".join(
        f"Epoch {e}/10\n100/100 - 2s - 15ms/step - accuracy: 0.8{e} - loss: {v:.4f} - val_accuracy: 0.8{e}"
        f" - val_loss: {w:.4f}\n"
        for e, v, w in zip((1, 2, 3), L, V)
    ),
    (ORDERED, [round(v, 4) for v in L[:3]]),
    eval_loss=(ORDERED, [round(v, 4) for v in V]),
)

# Keras 1 (keras/utils/generic_utils.py Progbar, 2015): `Epoch 1` then `60000/60000 [====] - 5s - loss: X`
case(
    "keras1_epoch_bar",
    "".join(
        f"Epoch {e}\n60000/60000 [==============================] - 5s - loss: {v:.4f}\n"
        for e, v in zip((1, 2, 3, 4), L)
    ),
    (ORDERED, [round(v, 4) for v in L[:4]]),
)

# --- fairseq ----------------------------------------------------------------------------------
# fairseq/logging/progress_bar.py SimpleProgressBar.print: `epoch 001:    100 / 1000 loss=9.123, ...,
# num_updates=100, lr=..., gnorm=..., loss_scale=...`; valid: `valid on 'valid' subset | loss 8.5 | ...`
case(
    "fairseq_train_inner_and_valid",
    "".join(
        f"2021-03-01 10:00:{k:02d} | INFO | train_inner | epoch 001:    {s} / 1000 loss={v}, nll_loss=8.9, "
        f"ppl=478.2, wps=12000, ups=3.2, wpb=3800, bsz=128, num_updates={s}, lr=1.25e-05, gnorm={g}, "
        f"loss_scale=128, train_wall=31, gb_free=10, wall=40\n"
        for k, (s, v, g) in enumerate(zip((100, 200, 300), L, G))
    )
    + "2021-03-01 10:01:00 | INFO | valid | epoch 001 | valid on 'valid' subset | loss 2.5001 | nll_loss 8.1 | "
    "ppl 275 | wps 30000 | wpb 3000 | bsz 100 | num_updates 300\n",
    {100: L[0], 200: L[1], 300: L[2]},
    grad_norm={100: G[0], 200: G[1], 300: G[2]},
    scale={100: 128.0, 200: 128.0, 300: 128.0},
)

# --- OpenMMLab ----------------------------------------------------------------------------------
# mmcv/runner/hooks/logger/text.py TextLoggerHook._log_info: `Epoch [1][50/500]\tlr: 1.000e-02, eta: ...,
# time: ..., loss_rpn_cls: ..., loss_cls: ..., loss: ..., grad_norm: ...` (one epoch in view)
case(
    "mmcv_epoch_iter_components",
    "".join(
        f"2021-06-01 12:00:{k:02d},000 - mmdet - INFO - Epoch [1][{i}/500]\tlr: 1.000e-02, eta: 1:00:00, "
        f"time: 0.512, data_time: 0.011, memory: 3000, loss_rpn_cls: 0.0512, loss_rpn_bbox: 0.0213, "
        f"loss_cls: 0.9123, acc: 80.1234, loss_bbox: 0.4012, loss: {v}, grad_norm: {g}\n"
        for k, (i, v, g) in enumerate(zip((50, 100, 150), L, G))
    ),
    (ORDERED, L[:3]),
    grad_norm=(ORDERED, G[:3]),
    lr=(ORDERED, [0.01] * 3),
)  # mmcv counts epochs from 1

# mmengine/runner/log_processor.py: `Epoch(train)  [1][ 50/500]  lr: 1.0000e-02  eta: ...  loss: ...`
case(
    "mmengine_epoch_train",
    "".join(
        f"06/01 12:00:{k:02d} - mmengine - INFO - Epoch(train)  [1][{i:3d}/500]  lr: 1.0000e-02  "
        f"eta: 1:00:00  time: 0.5120  data_time: 0.0110  memory: 3000  grad_norm: {g:.4f}  loss: {v:.4f}  "
        f"loss_cls: 0.9123  loss_bbox: 0.4012\n"
        for k, (i, v, g) in enumerate(zip((50, 100, 150), L, G))
    ),
    (ORDERED, [round(v, 4) for v in L[:3]]),
    grad_norm=(ORDERED, [round(v, 4) for v in G[:3]]),
)

# mmengine iteration-based: `Iter(train) [  50/80000]  lr: ...  loss: ...`, and `Iter(val)` lines
case(
    "mmengine_iter_train",
    "".join(
        f"06/01 12:00:{k:02d} - mmengine - INFO - Iter(train) [{i:5d}/80000]  lr: 1.0000e-02  eta: 1 day, "
        f"2:00:00  time: 0.5120  data_time: 0.0110  memory: 3000  loss: {v:.4f}  decode.loss_ce: 1.2000  "
        f"aux.loss_ce: 0.5000\n"
        for k, (i, v) in enumerate(zip((50, 100, 150), L))
    ),
    {50: round(L[0], 4), 100: round(L[1], 4), 150: round(L[2], 4)},
)

# --- detectron2 -------------------------------------------------------------------------------
# detectron2/utils/events.py CommonMetricPrinter.write: ` eta: ...  iter: 19  total_loss: 2.1
# loss_cls: ...  time: ...  lr: ...  max_mem: 3000M`
case(
    "detectron2_events",
    "".join(
        f"[06/01 12:00:{k:02d} d2.utils.events]:  eta: 0:10:00  iter: {i}  total_loss: {v}  loss_cls: 0.9  "
        f"loss_box_reg: 0.5  loss_mask: 0.6  loss_rpn_cls: 0.05  loss_rpn_loc: 0.05  time: 0.4123  "
        f"data_time: 0.0112  lr: 0.00019981  max_mem: 3000M\n"
        for k, (i, v) in enumerate(zip((19, 39, 59), L))
    ),
    {19: L[0], 39: L[1], 59: L[2]},
    lr={19: 0.00019981, 39: 0.00019981, 59: 0.00019981},
)

# --- YOLO ----------------------------------------------------------------------------------------
# ultralytics/models/yolo/detect/train.py progress_string: `('\n' + '%11s' * (4 + len(self.loss_names)))
# % ('Epoch', 'GPU_mem', *self.loss_names, 'Instances', 'Size')`; the bar described by `('%11s' * 2 +
# '%11.4g' * (2 + n)) % (f'{epoch + 1}/{self.epochs}', mem, *losses, instances, size)`: the loss is
# box_loss + cls_loss + dfl_loss
_U = [(1.234, 2.345, 1.111), (1.201, 2.1, 1.1), (1.15, 1.9, 1.05)]
case(
    "ultralytics_epoch_table",
    ("\n" + "%11s" * 7) % ("Epoch", "GPU_mem", "box_loss", "cls_loss", "dfl_loss", "Instances", "Size")
    + "\n"
    + "".join(
        ("%11s" * 2 + "%11.4g" * 5) % (f"{e}/100", "2.1G", *u, 25, 640)
        + ": 100%|##########| 8/8 [00:02<00:00,  3.1it/s]\n"
        for e, u in zip((1, 2, 3), _U)
    ),
    {1: sum(_U[0]), 2: sum(_U[1]), 3: sum(_U[2])},
)

# YOLOX yolox/core/trainer.py after_iter: `epoch: 1/300, iter: 10/1833, mem: 5000Mb, iter_time: 0.5s,
# ..., total_loss: 15.2, iou_loss: ..., lr: 1.000e-05, size: 640, ETA: ...`
case(
    "yolox_trainer",
    "".join(
        f"2021-07-01 12:00:{k:02d} | INFO     | yolox.core.trainer:247 - epoch: 1/300, iter: {i}/1833, "
        f"mem: 5000Mb, iter_time: 0.512s, data_time: 0.011s, total_loss: {v:.1f}, iou_loss: 4.1, l1_loss: 0.0, "
        f"conf_loss: 8.0, cls_loss: 3.1, lr: 1.000e-05, size: 640, ETA: 3 days, 1:00:00\n"
        for k, (i, v) in enumerate(zip((10, 20, 30), (15.2, 14.9, 14.1)))
    ),
    {10: 15.2, 20: 14.9, 30: 14.1},
)

# --- vision classification ---------------------------------------------------------------------
# timm train.py train_one_epoch: `Train: {} [{:>4d}/{} ({:>3.0f}%)]  Loss: {loss.val:#.3g} ({loss.avg:#.3g})
# Time: ...  LR: {lr:.3e}  Data: ...`; validate(): `Test: [{:>4d}/{}]  ...  Loss: {loss.val:>7.3f} ({loss.avg:>6.3f})`
case(
    "timm_train_and_test",
    "".join(
        f"Train: 3 [{i:>4d}/1251 ({100 * i / 1251:>3.0f}%)]  Loss: {v:#.3g} ({v + 0.05:#.3g})  "
        f"Time: 0.312s,  820.51/s  (0.401s,  638.20/s)  LR: 1.000e-04  Data: 0.011 (0.020)\n"
        for i, v in zip((50, 100, 150), L)
    )
    + "Test: [   0/196]  Time: 0.912 (0.912)  Loss:   2.501 ( 2.501)  Acc@1:  60.000 ( 60.000)\n"
    "Test: [  50/196]  Time: 0.112 (0.200)  Loss:   2.450 ( 2.470)  Acc@1:  61.000 ( 60.500)\n",
    # the console reader joins the epoch and the batch counter into one increasing step
    # (3 x 1251 + batch + 1): the values and their spacing are what is checked
    {3804: 2.31, 3854: 2.25, 3904: 2.20},
    lr={3804: 1e-4, 3854: 1e-4, 3904: 1e-4},
)

# pytorch/examples imagenet/main.py ProgressMeter.display: `Epoch: [0][  10/5005]\tTime  0.257 ( 0.560)\t...
# Loss 6.9078e+00 (6.9100e+00)\tAcc@1   0.00 (  0.14)`: the value, never the running average
case(
    "imagenet_average_meter",
    "".join(
        f"Epoch: [0][{i:4d}/5005]\tTime  0.257 ( 0.560)\tData  0.001 ( 0.284)\tLoss {v:.4e} ({v + 0.1:.4e})\t"
        f"Acc@1   0.00 (  0.14)\tAcc@5   0.78 (  0.62)\n"
        for i, v in zip((10, 20, 30), L)
    ),
    {10: float(f"{L[0]:.4e}"), 20: float(f"{L[1]:.4e}"), 30: float(f"{L[2]:.4e}")},
)

# DETR/DeiT util/misc.py MetricLogger.log_every: `Epoch: [0]  [  10/7329]  eta: ...  lr: 0.000100
# class_error: ...  loss: 30.1234 (31.2000)  loss_ce: ...  time: ...  data: ...  max mem: 5000`
case(
    "detr_metric_logger",
    "".join(
        f"Epoch: [0]  [{i:4d}/7329]  eta: 1 day, 2:03:04  lr: 0.000100  class_error: 100.00  "
        f"loss: {v:.4f} ({v + 1:.4f})  loss_ce: 4.2000 (4.3000)  loss_bbox: 3.1000 (3.2000)  "
        f"time: 0.5123  data: 0.0112  max mem: 5000\n"
        for i, v in zip((10, 20, 30), L)
    ),
    {10: round(L[0], 4), 20: round(L[1], 4), 30: round(L[2], 4)},
)

# pytorch/examples mnist/main.py train(): `'Train Epoch: {} [{}/{} ({:.0f}%)]\tLoss: {:.6f}'` (the counter
# is samples seen within the epoch), test(): `'\nTest set: Average loss: {:.4f}, Accuracy: ...'`
case(
    "pytorch_mnist_example",
    "".join(
        f"Train Epoch: {e} [{n}/60000 ({100 * n / 60000:.0f}%)]\tLoss: {v:.6f}\n"
        for e, n, v in ((1, 0, L[0]), (1, 640, L[1]), (1, 1280, L[2]))
    )
    + "\nTest set: Average loss: 2.5001, Accuracy: 9012/10000 (90%)\n\n"
    + "".join(
        f"Train Epoch: 2 [{n}/60000 ({100 * n / 60000:.0f}%)]\tLoss: {v:.6f}\n" for n, v in ((0, L[3]), (640, L[4]))
    ),
    (ORDERED, [round(v, 6) for v in L]),
)

# pytorch/tutorials beginner cifar10_tutorial.py: `print(f'[{epoch + 1}, {i + 1:5d}] loss: {running_loss /
# 2000:.3f}')` (a batch counter that restarts each epoch)
case(
    "pytorch_cifar_tutorial",
    "".join(
        f"[{e}, {i:5d}] loss: {v:.3f}\n"
        for e, i, v in ((1, 2000, L[0]), (1, 4000, L[1]), (1, 6000, L[2]), (2, 2000, L[3]), (2, 4000, L[4]))
    ),
    (ORDERED, [round(v, 3) for v in L]),
)

# yunjey/pytorch-tutorial: `print('Epoch [{}/{}], Step [{}/{}], Loss: {:.4f}'.format(epoch+1, num_epochs,
# i+1, total_step, loss.item()))`
case(
    "pytorch_tutorial_epoch_step",
    "".join(
        f"Epoch [{e}/5], Step [{i}/600], Loss: {v:.4f}\n"
        for e, i, v in ((1, 100, L[0]), (1, 200, L[1]), (1, 300, L[2]))
    ),
    {100: round(L[0], 4), 200: round(L[1], 4), 300: round(L[2], 4)},
)

# pytorch/ignite examples/mnist/mnist.py: `f"Epoch[{engine.state.epoch}] Iteration[{iter}/{len(train_loader)}]
# Loss: {engine.state.output:.2f}"` and the evaluators' `Validation Results - Epoch: {} Avg accuracy: ...
# Avg loss: ...` (also `Training Results -`: an evaluation over the training set, not a step's loss)
case(
    "ignite_mnist",
    "".join(f"Epoch[1] Iteration[{i}/469] Loss: {v:.2f}\n" for i, v in zip((100, 200, 300), L))
    + "Training Results - Epoch: 1  Avg accuracy: 0.91 Avg loss: 0.30\n"
    "Validation Results - Epoch: 1  Avg accuracy: 0.90 Avg loss: 2.50\n",
    (ORDERED, [2.31, 2.25, 2.2]),
)

# --- reinforcement learning ---------------------------------------------------------------------
# stable_baselines3/common/logger.py HumanOutputFormat.write: `| key | value |` lines between dashes,
# `tag/` section lines, keys indented under them


def sb3_block(values):
    rows = []
    for tag in sorted({k.split("/")[0] for k in values}):
        rows.append((tag + "/", ""))
        rows.extend(
            ("    " + k.split("/", 1)[1], f"{v:<8.3g}" if isinstance(v, float) else str(v))
            for k, v in sorted(values.items())
            if k.startswith(tag + "/")
        )
    kw, vw = max(len(k) for k, _ in rows), max(len(v) for _, v in rows)
    dashes = "-" * (kw + vw + 7)
    return "\n".join([dashes] + [f"| {k:<{kw}} | {v:<{vw}} |" for k, v in rows] + [dashes]) + "\n"


case(
    "sb3_logger_blocks",
    "".join(
        sb3_block(
            {
                "time/iterations": it,
                "time/total_timesteps": it * 2048,
                "train/loss": v,
                "train/value_loss": 3.0,
                "train/learning_rate": 0.0003,
                "rollout/ep_rew_mean": 20.5,
            }
        )
        for it, v in zip((1, 2, 3), (0.0512, 0.0483, 0.0451))
    ),
    {1: 0.0512, 2: 0.0483, 3: 0.0451},
)  # at time/iterations, as tests/test_sources_general.py reads SB3

# openai/guided-diffusion guided_diffusion/logger.py HumanOutputFormat.writekvs: `| key | value |` between
# dashes, `%-8.3g` values, keys sorted (grad_norm, lg_loss_scale, loss, mse, param_norm, samples, step)
case(
    "guided_diffusion_logger",
    "".join(
        "-" * 27
        + "\n"
        + "".join(
            f"| {k:<13} | {v:<7} |\n"
            for k, v in (
                ("grad_norm", f"{g:<8.3g}"),
                ("lg_loss_scale", f"{20.0:<8.3g}"),
                ("loss", f"{v:<8.3g}"),
                ("mse", f"{v:<8.3g}"),
                ("param_norm", f"{310.0:<8.3g}"),
                ("samples", f"{s * 64:<8.3g}"),
                ("step", f"{s:<8.3g}"),
            )
        )
        + "-" * 27
        + "\n"
        for s, v, g in zip((100, 200, 300), (0.0512, 0.0483, 0.0451), G)
    ),
    {100: 0.0512, 200: 0.0483, 300: 0.0451},
    grad_norm={100: 1.23, 200: 1.11, 300: 0.987},
)

# --- language models ---------------------------------------------------------------------------
# karpathy/nanoGPT train.py: `print(f"iter {iter_num}: loss {lossf:.4f}, time {dt*1000:.2f}ms, mfu
# {running_mfu*100:.2f}%")`; every eval_interval: `print(f"step {iter_num}: train loss {losses['train']:.4f},
# val loss {losses['val']:.4f}")` (an estimate over eval batches, not the step's loss)
case(
    "nanogpt_iter_and_eval",
    "step 0: train loss 2.6001, val loss 2.5001\n"
    + "".join(f"iter {i}: loss {v:.4f}, time 120.50ms, mfu 38.12%\n" for i, v in zip((0, 10, 20, 30), L)),
    {0: round(L[0], 4), 10: round(L[1], 4), 20: round(L[2], 4), 30: round(L[3], 4)},
    eval_loss={0: 2.5001},
)

# karpathy/llm.c train_gpt2.cu: `printf0("step %4d/%d | train loss %7.6f | norm %6.4f | lr %.2e | %.2f ms |
# ...")`; `printf0("val loss %f\n", val_loss)`
case(
    "llm_c_steps",
    "".join(
        f"step {s:4d}/74 | train loss {v:7.6f} | norm {g:6.4f} | lr 1.00e-05 | 1200.00 ms | 40.1% bf16 MFU | "
        f"4000 tok/s\n"
        for s, v, g in zip((1, 2, 3), L, G)
    ),
    {1: L[0], 2: L[1], 3: L[2]},
    grad_norm={1: G[0], 2: G[1], 3: G[2]},
)

# NVIDIA/Megatron-LM megatron/training/training.py training_log: ` iteration      100/  500000 | consumed
# samples: ... | learning rate: 1.500000E-04 | global batch size: ... | lm loss: 7.123456E+00 | loss scale:
# 65536.0 | grad norm: 1.234 | number of skipped iterations:   0 | number of nan iterations:   0 |`
case(
    "megatron_iteration",
    "".join(
        f" [2023-06-01 12:00:{k:02d}] iteration {s:8d}/  500000 | consumed samples: {s * 512:12d} | elapsed "
        f"time per iteration (ms): 500.1 | learning rate: 1.500000E-04 | global batch size:   512 | lm loss: "
        f"{v:.6E} | loss scale: 65536.0 | grad norm: {g:.3f} | number of skipped iterations:   0 | number of "
        f"nan iterations:   0 |\n"
        for k, (s, v, g) in enumerate(zip((100, 200, 300), L, G))
    ),
    {100: L[0], 200: L[1], 300: L[2]},
    grad_norm={100: 1.234, 200: 1.111, 300: 0.987},
    scale={100: 65536.0, 200: 65536.0, 300: 65536.0},
)

# Megatron forks that print `| name value |` with no colon (CPM-2's finetune script: `epoch   0/ 10 | global
# iteration       20/    3402 | learning rate 3e-06 | lm loss 7.72363 | loss scale 512.0 |`), and the same
# fields spelled in other orders and cases: each a field of the iteration line, colon or not
case(
    "megatron_fork_fields_without_colons",
    "".join(
        f"epoch   0/ 3 | global iteration {s:8d}/    900 | learning rate 2e-05 | lm loss {v:g} | loss scale {sc} |\n"
        for s, v, sc in zip((10, 20, 30), L, (1024.0, 1024.0, 2048.0))
    ),
    {10: L[0], 20: L[1], 30: L[2]},
    lr={10: 2e-05, 20: 2e-05, 30: 2e-05},
    scale={10: 1024.0, 20: 1024.0, 30: 2048.0},
)
case(
    "megatron_iteration_mixed_colons",
    "".join(
        f" iteration {s:6d}/ 1000 | consumed samples {s * 64} | Learning Rate 1.0E-04 | LM Loss {v:.5E} | "
        f"grad norm: {g} | loss scale 1.0 |\n"
        for s, v, g in zip((100, 200, 300), L, G)
    ),
    {100: L[0], 200: L[1], 300: L[2]},
    grad_norm={100: G[0], 200: G[1], 300: G[2]},
    lr={100: 1e-4, 200: 1e-4, 300: 1e-4},
)

# a line of component losses with no total (DAFormer's mmseg line: `decode.loss_seg`, `src.loss_imnet_feat_dist`,
# `mix.decode.loss_seg`) whose ETA field changes shape as the run goes (`eta: 1 day, 0:29:42` -> `eta: 23:54:54`):
# one training line; the loss is the sum of its parts on every row, the reshaped one included
_PARTS = [(0.812, 0.101), (0.744, 0.097), (0.701, 0.090), (0.655, 0.088)]
case(
    "mm_components_eta_loses_its_day",
    "".join(
        f"2022-05-07 17:0{k}:57,696 - mmseg - INFO - Iter [{s}/40000]\tlr: 1.9e-06, eta: {eta}, time: 2.207, "
        f"data_time: 0.029, memory: 9801, decode.loss_seg: {a}, decode.acc_seg: 32.26, aux.loss_seg: {b}\n"
        for k, (s, eta, (a, b)) in enumerate(
            zip((50, 100, 150, 200), ("1 day, 0:29:42", "1 day, 0:08:59", "23:59:44", "23:54:54"), _PARTS)
        )
    ),
    {s: a + b for s, (a, b) in zip((50, 100, 150, 200), _PARTS)},
)
# the same, a detectron2-style line whose `eta:` is printed without its day once under a day
case(
    "detectron_style_components_eta_reshaped",
    "".join(
        f"[07/01 10:0{k}:00 d2.utils.events]:  eta: {eta}  iter: {s}  loss_cls: {a}  loss_box_reg: {b}  lr: "
        f"0.02  max_mem: 4011M\n"
        for k, (s, eta, (a, b)) in enumerate(zip((19, 39, 59), ("1 day, 2:03:04", "23:10:00", "22:59:59"), _PARTS))
    ),
    {s: a + b for s, (a, b) in zip((19, 39, 59), _PARTS)},
)

# rows of unnamed columns whose total is the printed sum of the parts before it: YOLOv7's results.txt (train.py:
# `f.write(s + '%10.4g' * 7 % results + '\n')`, s = the bar's description: epoch `0/149`, memory `13.6G`, box,
# obj, cls, total, labels, img_size; then P, R, mAP@.5, mAP@.5:.95, val box/obj/cls), a script's comma-separated
# `epoch, part, part, total, acc` print, and a space-separated `step l1 l2 l3 sum` one
_P3 = [(0.04854, 0.00671, 0.0135), (0.02125, 0.003635, 0.00429), (0.01919, 0.003306, 0.002792)]
case(
    "yolov7_results_txt_unnamed_total",
    "".join(
        ("%10s" * 2 + "%10.4g" * 6) % (f"{e}/149", "13.6G", *p, float(f"{sum(p):.4g}"), 17 - e, 640)
        + "%10.4g" * 7 % (0.19 + e / 10, 0.3, 0.17, 0.08, 0.059, 0.0092, 0.0136)
        + "\n"
        for e, p in enumerate(_P3)
    ),
    {e: float(f"{sum(p):.4g}") for e, p in enumerate(_P3)},
)
case(
    "unnamed_comma_columns_with_total",
    "".join(f"{e}, {a:.4f}, {b:.4f}, {a + b:.4f}, {0.5 + e / 10:.3f}\n" for e, (a, b, _) in enumerate(_P3, start=1)),
    {e: round(a + b, 4) for e, (a, b, _) in enumerate(_P3, start=1)},
)
case(
    "unnamed_space_columns_sum_last",
    "".join(f"{s} {a:.5f} {b:.5f} {c:.5f} {a + b + c:.5f}\n" for s, (a, b, c) in zip((100, 200, 300), _P3)),
    {s: round(a + b + c, 5) for s, (a, b, c) in zip((100, 200, 300), _P3)},
)

# pytorch/tutorials char_rnn_classification_tutorial: `print('%d %d%% (%s) %.4f %s / %s %s' % (iter, iter / n_iters *
# 100, timeSince(start), loss, line, guess, correct))`, timeSince `'%dm %ds'`: a sample's name and the guess after the
# loss make every line's words differ; the seq2seq tutorial's `'%s (%d %d%%) %.4f' % (timeSince(start, iter /
# n_iters), iter, iter / n_iters * 100, print_loss_avg)` puts two durations before the counter; a script that ends its
# named loss line with a generated sample
_SAMPLES = [
    ("Kovacs / Czech", "✓"),
    ("Moreau / Dutch", "✗ (French)"),
    ("Sato / Japanese", "✓"),
    ("Ivanov / Polish", "✗ (Russian)"),
]
case(
    "char_rnn_tutorial_free_text_tail",
    "".join(
        f"{i} {i // 1000}% ({k}m {7 * k + 3}s) {v:.4f} {name} {mark}\n"
        for k, (i, v, (name, mark)) in enumerate(zip((1000, 2000, 3000, 4000), L, _SAMPLES))
    ),
    {1000: round(L[0], 4), 2000: round(L[1], 4), 3000: round(L[2], 4), 4000: round(L[3], 4)},
)
case(
    "seq2seq_tutorial_durations_before_counter",
    "".join(
        f"{k}m {9 * k + 5}s (- {40 - k}m 2s) ({i} {i // 750}%) {v:.4f}\n"
        for k, (i, v) in enumerate(zip((5000, 10000, 15000, 20000), L))
    ),
    {5000: round(L[0], 4), 10000: round(L[1], 4), 15000: round(L[2], 4), 20000: round(L[3], 4)},
)
case(
    "named_loss_line_ending_with_a_sample",
    "".join(
        f"epoch 1 iter {i} loss {v:.4f} >> sample: {text}\n"
        for i, v, text in zip((10, 20, 30, 40), L, ("the cat sat", "a dog ran off", "then the sun", "we went"))
    ),
    {10: round(L[0], 4), 20: round(L[1], 4), 30: round(L[2], 4), 40: round(L[3], 4)},
)

# Julia: Flux's model-zoo MNIST `@show loss(X, Y)` and `@show accuracy(m, X, labels, 0:9)` (Tracker printed the loss
# as `param(0.0913)`, Zygote as a bare number), and a REPL's `mse(model, data): 0.25`: the called function names the
# value, whatever numbers its arguments hold; the accuracy line is no loss
case(
    "julia_show_call_tracked_param",
    "".join(f"loss(x, y) = param({v})\naccuracy(m, x, label, 0.0:9) = 0.{k + 4}1\n" for k, v in enumerate(L[:4])),
    (ORDERED, L[:4]),
)
case(
    "julia_show_call_bare_value",
    "".join(f"accuracy(m, X, labels, 0:9) = 0.{k + 2}8\nloss(X, Y) = {v}\n" for k, v in enumerate(L[:4])),
    (ORDERED, L[:4]),
)
case(
    "repl_call_colon_value",
    "".join(f"epoch {e}: mse(model, batch_{e}): {v}\n" for e, v in zip((1, 2, 3), L)),
    {1: L[0], 2: L[1], 3: L[2]},
)

# a from-scratch network's `print("Error: ", error)` under an epoch banner (the objective a script names `error`), and
# a line that names it after its epoch; `top-1 error` is no loss name
case(
    "scratch_net_error_under_epoch_banner",
    "".join(f"== EPOCH: {e} / 4 ==\nError:  {v}\n" for e, v in zip((1, 2, 3, 4), L)),
    (ORDERED, L[:4]),
)
case(
    "scratch_net_epoch_error_line",
    "".join(f"epoch {e} error {v} top-1 error 0.{e}5\n" for e, v in zip((1, 2, 3), L)),
    {1: L[0], 2: L[1], 3: L[2]},
)

# Chinese tutorials' counters: `训练次数：{}, Loss：{}` (the PyTorch tutorial most Chinese courses follow: the number of
# training steps so far), `训练步数` and `训练次数` with a Chinese loss word; the test set's `整体测试集上的Loss` is an evaluation
case(
    "chinese_train_count_loss",
    "".join(f"训练次数：{s}, Loss：{v}\n" for s, v in zip((100, 200, 300), L)) + f"整体测试集上的Loss: {V[0]}\n",
    {100: L[0], 200: L[1], 300: L[2]},
    eval_loss={300: V[0]},
)
case(
    "chinese_train_steps_loss_word",
    "".join(f"第 1 轮，训练步数 {s}，训练损失 {v}\n" for s, v in zip((50, 100, 150), L)),
    {50: L[0], 100: L[1], 150: L[2]},
)

# GAN losses named by a loss dict's prefix or with a numbered discriminator: BasicSR's MessageLogger (`[epoch:  1, iter:
# 12,000, lr:(1.000e-04,)] [eta: ..., time (data): ...] l_g_pix: 1.2e-02 ... out_d_real: ...`, its `l_` terms, its
# discriminator's outputs no loss), AdaptSegNet's `print('iter = {0:8d}/{1:8d}, loss_seg1 = {2:.3f} loss_adv1 = {3:.3f},
# loss_D1 = {4:.3f} ...')` and a script's `loss_G=..., loss_D=...`: two adversaries' parts, kept, none the loss
case(
    "basicsr_gan_l_terms",
    "".join(
        f"2024-01-01 10:00:0{k},000 INFO: [train..][epoch:  1, iter:  {s:,}, lr:(1.000e-04,)] [eta: 2 days, 1:00:00, "
        f"time (data): 0.412 (0.003)] l_g_pix: {a:.4e} l_g_gan: {b:.4e} l_d_real: 0.6{k} out_d_real: 2.{k} "
        f"l_d_fake: 0.7{k} out_d_fake: -1.{k}\n"
        for k, (s, (a, b, _)) in enumerate(zip((12000, 12100, 12200), _P3))
    ),
    None,
    components={
        12000: {"l_g_pix": float(f"{_P3[0][0]:.4e}"), "l_d_real": 0.60},
        12200: {"l_g_gan": float(f"{_P3[2][1]:.4e}"), "l_d_fake": 0.72},
    },
)
case(
    "adaptseg_numbered_discriminators",
    "".join(
        f"iter = {s:8d}/  250000, loss_seg1 = {a:.3f} loss_adv1 = 0.{k}01, loss_D1 = 0.69{k} loss_seg2 = {b:.3f} "
        f"loss_adv2 = 0.0{k}2 loss_D2 = 0.68{k}\n"
        for k, (s, (a, b, _)) in enumerate(zip((10, 20, 30), _P3))
    ),
    None,
    components={10: {"loss_seg1": round(_P3[0][0], 3), "loss_d1": 0.69}, 30: {"loss_d2": 0.682}},
)
case(
    "gan_loss_g_loss_d_equals",
    "".join(
        f"[{e}/{s}] loss_G={a:.4f}, loss_D={b:.4f}\n" for e, (s, (a, b, _)) in enumerate(zip((100, 200, 300), _P3))
    ),
    None,
    components={(ORDERED, "loss_g"): [round(a, 4) for a, _, _ in _P3]},
)

# the Informer family (Informer2020, Autoformer, Time-Series-Library exp_long_term_forecasting.py): `print("Epoch: {0},
# Steps: {1} | Train Loss: {2:.7f} Vali Loss: {3:.7f} Test Loss: {4:.7f}".format(epoch + 1, train_steps, ...))`, where
# `train_steps = len(train_loader)` is the same count every epoch (no step) and `Vali` is its validation; a script's
# `epoch 3 | batches 120 | train_loss ... | vali_loss ...` the same way
case(
    "informer_epoch_steps_count_vali",
    "".join(
        f"Epoch: {e}, Steps: 569 | Train Loss: {v:.7f} Vali Loss: {w:.7f} Test Loss: {w + 0.02:.7f}\n"
        for e, v, w in zip((1, 2, 3), L, V)
    ),
    {1: L[0], 2: L[1], 3: L[2]},
    eval_loss={1: V[0], 2: V[1], 3: V[2]},
)
case(
    "epoch_line_constant_batch_count",
    "".join(
        f"epoch {e} | batches 120 | train_loss {v} | vali_loss {w}\n" for e, v, w in zip((1, 2, 3, 4), L, V + [2.39])
    ),
    {1: L[0], 2: L[1], 3: L[2], 4: L[3]},
    eval_loss={1: V[0], 2: V[1], 3: V[2], 4: 2.39},
)

# names abbreviated with a dot: prime-rl's trainer line (`Step {step} | Time: ... | Loss: ... | Grad. Norm: ... | LR:
# ...`), `Avg. Loss` and `Val. Loss` a script prints: the dot ends no sentence, the name is whole
case(
    "prime_rl_grad_dot_norm",
    "".join(
        f"Step {s} | Time: 3.2{s}s | Loss: {v:.4f} | Grad. Norm: {g:.4f} | LR: 1.00e-05\n"
        for s, v, g in zip((1, 2, 3), L, G)
    ),
    {1: round(L[0], 4), 2: round(L[1], 4), 3: round(L[2], 4)},
    grad_norm={1: G[0], 2: G[1], 3: G[2]},
)
case(
    "avg_dot_loss_val_dot_loss",
    "".join(f"[{e}/10] Avg. Loss: {v} Val. Loss: {w} Tot. time 12s\n" for e, v, w in zip((1, 2, 3), L, V)),
    {1: L[0], 2: L[1], 3: L[2]},
    eval_loss={1: V[0], 2: V[1], 3: V[2]},
)

# pytorch/torchtitan torchtitan/train.py: `f"{color.red}step: {step:2}  {color.green}loss: {loss:7.4f}
# {color.yellow}memory: {gib:5.2f}GiB({pct:.2f}%)  {color.blue}tps: {round(tps):,}  {color.magenta}mfu: ..."`
case(
    "torchtitan_step",
    "".join(
        f"[rank0]:2024-05-01 12:00:{k:02d},000 - root - INFO - \033[31mstep: {s:2}  \033[32mloss: {v:7.4f}  "
        f"\033[33mmemory: 30.12GiB(38.01%)  \033[34mtps: 4,012  \033[35mmfu: 40.12%\033[39m\n"
        for k, (s, v) in enumerate(zip((10, 20, 30), L))
    ),
    {10: round(L[0], 4), 20: round(L[1], 4), 30: round(L[2], 4)},
)

# huggingface/nanotron logging: `iteration: 10 / 100 | consumed_tokens: 40K | ... | lm_loss: 10.1 | lr: ... |
# grad_norm: ...` (numbers with K/M suffixes)
case(
    "nanotron_iteration",
    "".join(
        f"12/01/2023 12:00:{k:02d} [INFO|DP=0|PP=0|TP=0]: iteration: {s} / 100 | consumed_tokens: {s * 4}K | "
        f"elapsed_time_per_iteration_ms: 500 | tokens_per_sec: 8K | global_batch_size: 64 | lm_loss: {v:.4f} | "
        f"lr: 0.0003 | model_tflops_per_gpu: 100 | grad_norm: {g:.3f}\n"
        for k, (s, v, g) in enumerate(zip((10, 20, 30), L, G))
    ),
    {10: round(L[0], 4), 20: round(L[1], 4), 30: round(L[2], 4)},
    grad_norm={10: 1.234, 20: 1.111, 30: 0.987},
)

# google/maxtext MaxText/train.py: `max_logging.log(f"completed step: {step}, seconds: {...:.3f}, TFLOP/s/device:
# {...:.3f}, Tokens/s/device: {...:.3f}, total_weights: {...}, loss: {...:.3f}")`
case(
    "maxtext_completed_step",
    "".join(
        f"completed step: {s}, seconds: 1.234, TFLOP/s/device: 100.123, Tokens/s/device: 2000.456, "
        f"total_weights: 4096, loss: {v:.3f}\n"
        for s, v in zip((1, 2, 3, 4), L)
    ),
    {1: 2.31, 2: 2.253, 3: 2.199, 4: 2.14},
)

# google/CommonLoopUtils clu/metric_writers/logging_writer.py write_scalars: `logging.info("[%d] %s", step,
# ", ".join(f"{k}={v}" ...))` under absl's `I0601 12:00:00.123456 140000 logging_writer.py:48]` prefix
case(
    "clu_logging_writer",
    "".join(
        f"I0601 12:00:{k:02d}.123456 140235 logging_writer.py:48] [{s}] learning_rate={1e-3}, loss={v}, "
        f"timing/steps_per_sec=5.1\n"
        for k, (s, v) in enumerate(zip((100, 200, 300), L))
    ),
    {100: L[0], 200: L[1], 300: L[2]},
    lr={100: 1e-3, 200: 1e-3, 300: 1e-3},
)

# OpenNMT/OpenNMT-py onmt/utils/statistics.py Statistics.output: `("Step %s; acc: %6.2f; ppl: %5.2f; xent:
# %4.2f; lr: %7.5f; %3.0f/%3.0f tok/s; %6.0f sec") % (step_fmt, ...)` with step_fmt `%2d/%5d`; validation
# through `logger.info('Validation perplexity: %g' % ...)`
case(
    "opennmt_statistics",
    "".join(
        f"[2023-01-01 12:00:{k:02d},000 INFO] Step {s:2d}/100000; acc: {10.5 + k:6.2f}; ppl: {2000.1:5.2f}; "
        f"xent: {v:4.2f}; lr: {1e-4:7.5f}; {5000:3.0f}/{6000:3.0f} tok/s; {60 * (k + 1):6.0f} sec\n"
        for k, (s, v) in enumerate(zip((100, 200, 300), L))
    )
    + "[2023-01-01 12:01:00,000 INFO] Validation perplexity: 12.1\n[2023-01-01 12:01:00,000 INFO] "
    "Validation accuracy: 45.2\n",
    {100: 2.31, 200: 2.25, 300: 2.2},
    lr={100: 1e-4, 200: 1e-4, 300: 1e-4},
)

# --- speech / sequence -----------------------------------------------------------------------
# k2-fsa/icefall egs/librispeech/ASR/*/train.py: `f"Epoch {params.cur_epoch}, batch {batch_idx}, loss[{loss_info}],
# tot_loss[{tot_loss}], batch size: {batch_size}, lr: {cur_lr:.2e}"` with MetricsTracker's `loss=..., over N
# frames.`: loss[...] is the batch, tot_loss[...] the running average
case(
    "icefall_loss_and_tot_loss",
    "".join(
        f"2022-01-01 12:00:{k:02d},000 INFO [train.py:700] Epoch 1, batch {b}, loss[loss={v:.4g}, over "
        f"5000.00 frames. ], tot_loss[loss={v + 0.2:.4g}, over 500000.00 frames. ], batch size: 50, lr: 1.00e-03\n"
        for k, (b, v) in enumerate(zip((50, 100, 150), L))
    ),
    {50: 2.31, 100: 2.253, 150: 2.199},
    lr={50: 1e-3, 100: 1e-3, 150: 1e-3},
)

# flairNLP/flair flair/trainers/trainer.py: `f"epoch {epoch} - iter {batch_no + 1}/{total_number_of_batches} -
# loss {intermittent_loss:.8f} - time (sec): ... - samples/sec: ... - lr: {lr:.6f}"`, then `DEV : loss
# {dev_loss} - f1-score (micro avg)  0.5`
case(
    "flair_epoch_iter",
    "".join(
        f"2021-01-01 12:00:{k:02d},000 epoch 1 - iter {i}/100 - loss {v:.8f} - time (sec): 1.23 - "
        f"samples/sec: 100.00 - lr: 0.100000\n"
        for k, (i, v) in enumerate(zip((10, 20, 30), L))
    )
    + "2021-01-01 12:01:00,000 DEV : loss 2.50010000 - f1-score (micro avg)  0.5000\n",
    {10: L[0], 20: L[1], 30: L[2]},
    eval_loss={30: V[0]},
    lr={10: 0.1, 20: 0.1, 30: 0.1},
)

# speechbrain/utils/train_logger.py FileTrainLogger.log_stats: `epoch: 1, lr: 1.00e+00 - train loss: 2.31 -
# valid loss: 2.50, valid error: 0.50`
case(
    "speechbrain_train_logger",
    "".join(
        f"epoch: {e}, lr: 1.00e+00 - train loss: {v:.2f} - valid loss: {w:.2f}, valid error: 5.00e-01\n"
        for e, v, w in zip((1, 2, 3), L, V)
    ),
    {1: 2.31, 2: 2.25, 3: 2.2},
    eval_loss={1: 2.5, 2: 2.45, 3: 2.4},
)

# --- PaddlePaddle / MXNet / Caffe / TF ---------------------------------------------------------
# PaddleOCR ppocr/utils/... program.train: `epoch: [1/500], global_step: 10, lr: 0.001000, loss: 2.345678,
# loss_shrink_maps: ..., avg_reader_cost: 0.01 s, avg_batch_cost: 0.5 s, avg_samples: 8.0, ips: 16.0 samples/s`
case(
    "paddleocr_global_step",
    "".join(
        f"[2022/01/01 12:00:{k:02d}] ppocr INFO: epoch: [1/500], global_step: {s}, lr: 0.001000, loss: {v:.6f}, "
        f"loss_shrink_maps: 1.200000, loss_threshold_maps: 0.500000, loss_binary_maps: 0.300000, "
        f"avg_reader_cost: 0.01000 s, avg_batch_cost: 0.50000 s, avg_samples: 8.0, ips: 16.00000 samples/s, "
        f"eta: 1 day, 2:00:00\n"
        for k, (s, v) in enumerate(zip((10, 20, 30), L))
    ),
    {10: round(L[0], 6), 20: round(L[1], 6), 30: round(L[2], 6)},
    lr={10: 1e-3, 20: 1e-3, 30: 1e-3},
)

# PaddleSeg paddleseg/core/train.py: `"[TRAIN] epoch: {}, iter: {}/{}, loss: {:.4f}, lr: {:.6f}, batch_cost:
# {:.4f}, reader_cost: {:.5f}, ips: {:.4f} samples/sec | ETA {}"`: iter counts over all epochs
case(
    "paddleseg_train",
    "".join(
        f"2022-01-01 12:00:{k:02d} [INFO]\t[TRAIN] epoch: {e}, iter: {i}/1000, loss: {v:.4f}, lr: 0.010000, "
        f"batch_cost: 0.5000, reader_cost: 0.01000, ips: 16.0000 samples/sec | ETA 01:00:00\n"
        for k, (e, i, v) in enumerate(((1, 10, L[0]), (1, 20, L[1]), (2, 30, L[2]), (2, 40, L[3])))
    ),
    {10: 2.3102, 20: 2.2531, 30: 2.1987, 40: 2.1402},
)

# MXNet python/mxnet/callback.py Speedometer: `'Epoch[%d] Batch [%d]\tSpeed: %.2f samples/sec\t%s=%f'`
case(
    "mxnet_speedometer",
    "".join(
        f"INFO:root:Epoch[0] Batch [{b}]\tSpeed: 1000.00 samples/sec\taccuracy=0.123000\tcross-entropy={v:f}\n"
        for b, v in zip((20, 40, 60), L)
    ),
    {20: L[0], 40: L[1], 60: L[2]},
)

# BVLC/caffe src/caffe/solver.cpp Solver::Step: `LOG(INFO) << "Iteration " << iter_ << ", loss = " <<
# smoothed_loss_`, `"    Train net output #" << j << ": " << output_name << " = " << value`, and
# Solver::Test's `"    Test net output #" ... loss = ... (* 1 = ... loss)`; sgd_solver.cpp `Iteration N, lr = X`
case(
    "caffe_solver",
    "".join(
        f"I0601 12:00:{k:02d}.000000  1234 solver.cpp:228] Iteration {s}, loss = {v}\n"
        f"I0601 12:00:{k:02d}.000000  1234 solver.cpp:244]     Train net output #0: loss = {v} (* 1 = {v} loss)\n"
        f"I0601 12:00:{k:02d}.000000  1234 sgd_solver.cpp:106] Iteration {s}, lr = 0.01\n"
        for k, (s, v) in enumerate(zip((100, 200, 300), L))
    )
    + "I0601 12:01:00.000000  1234 solver.cpp:397]     Test net output #0: accuracy = 0.5\n"
    "I0601 12:01:00.000000  1234 solver.cpp:397]     Test net output #1: loss = 2.5001 (* 1 = 2.5001 loss)\n",
    {100: L[0], 200: L[1], 300: L[2]},
    lr={100: 0.01, 200: 0.01, 300: 0.01},
)

# tensorflow/python/training/basic_session_run_hooks.py LoggingTensorHook (Estimator): `loss = 2.3, step = 100
# (10.0 sec)`; estimator.py `Saving dict for global step 1000: accuracy = 0.9, global_step = 1000, loss = 0.35`
case(
    "tf_estimator",
    "INFO:tensorflow:loss = 2.3102, step = 1\n"
    + "".join(
        f"INFO:tensorflow:global_step/sec: 10.5\nINFO:tensorflow:loss = {v}, step = {s} (9.524 sec)\n"
        for s, v in zip((101, 201), L[1:3])
    )
    + "INFO:tensorflow:Saving dict for global step 201: accuracy = 0.9, global_step = 201, loss = 2.5001\n",
    {1: L[0], 101: L[1], 201: L[2]},
    eval_loss={201: V[0]},
)

# --- plain prints of small projects -------------------------------------------------------------
case(
    "plain_epoch_loss_equals",
    "".join(f"epoch {e} loss = {v}\n" for e, v in zip((1, 2, 3), L)),
    {1: L[0], 2: L[1], 3: L[2]},
)
case(
    "plain_iteration_colon_losses",
    "".join(f"iteration : {i}, losses : {v}\n" for i, v in zip((0, 20, 40), L)),
    {0: L[0], 20: L[1], 40: L[2]},
)
case(
    "plain_step_bars_tr_loss",
    "".join(f"Step: {s} || Tr.Loss: {v} || Val.Loss: 2.9 || lr: 0.0001\n" for s, v in zip((40, 80, 120), L)),
    {40: L[0], 80: L[1], 120: L[2]},
)
case(
    "plain_pipes_step_loss_lr_gnorm",
    "".join(
        f"step {s} | loss {v:.4f} | lr 3.00e-04 | grad_norm {g:.3f} | 12.3 ms/step\n"
        for s, v, g in zip((10, 20, 30), L, G)
    ),
    {10: round(L[0], 4), 20: round(L[1], 4), 30: round(L[2], 4)},
    grad_norm={10: 1.234, 20: 1.111, 30: 0.987},
    lr={10: 3e-4, 20: 3e-4, 30: 3e-4},
)
case(
    "plain_it_loss",
    "".join(f"it {i} loss {v}\n" for i, v in zip((100, 200, 300), L)),
    {100: L[0], 200: L[1], 300: L[2]},
)
case(
    "plain_global_step_equals",
    "".join(f"global_step={s}, loss={v}, learning_rate=0.0001\n" for s, v in zip((5, 10, 15), L)),
    {5: L[0], 10: L[1], 15: L[2]},
    lr={5: 1e-4, 10: 1e-4, 15: 1e-4},
)
case(
    "plain_iter_of_total",
    "".join(f"Iter {i}/5000 loss: {v} lr: 0.0001\n" for i, v in zip((100, 200, 300), L)),
    {100: L[0], 200: L[1], 300: L[2]},
)
case("plain_no_counter_numbered", "".join(f"train loss: {v}\n" for v in L[:4]), {1: L[0], 2: L[1], 3: L[2], 4: L[3]})
# DeepSpeed-Chat training/step1_supervised_finetuning/main.py: `print(f"Epoch: {epoch}, Step: {step}, Rank: ...,
# loss = {loss}")`
case(
    "deepspeed_chat_epoch_step_rank",
    "".join(f"Epoch: 0, Step: {s}, Rank: 0, loss = {v}\n" for s, v in zip((10, 20, 30), L)),
    {10: L[0], 20: L[1], 30: L[2]},
)
# pytorch/torchtune recipes: the tqdm description `f"{curr_epoch + 1}|{self.global_step}|Loss: {loss_to_log}"`
case(
    "torchtune_bar_description",
    "".join(f"1|{s}|Loss: {v}: {s}%|#    | {s}/100 [00:10<01:30,  1.00s/it]\n" for s, v in zip((10, 20, 30), L)),
    {10: L[0], 20: L[1], 30: L[2]},
)
# a tqdm bar with a postfix set by `bar.set_postfix(loss=..., lr=...)`
case(
    "tqdm_postfix_loss",
    "".join(
        f"train:  {s // 10:2d}%|#    | {s}/1000 [00:10<01:30,  9.90it/s, loss={v:.3f}, lr=1e-4]\n"
        for s, v in zip((100, 200, 300), L)
    ),
    {100: 2.31, 200: 2.253, 300: 2.199},
)
# a training loop printing the loss tensor itself: `print(f"step {step} loss {loss}")` of a CUDA tensor
case(
    "plain_tensor_repr",
    "".join(
        f"step {s} loss tensor({v:.4f}, device='cuda:0', grad_fn=<NllLossBackward0>)\n" for s, v in zip((1, 2, 3), L)
    ),
    {1: round(L[0], 4), 2: round(L[1], 4), 3: round(L[2], 4)},
)
# numpy 2's repr of a scalar: `print(f"epoch {e} loss {np.mean(losses)!r}")`
case(
    "plain_np_float32_repr",
    "".join(f"epoch {e} loss np.float32({v})\n" for e, v in zip((1, 2, 3), L)),
    {1: L[0], 2: L[1], 3: L[2]},
)
# `print(f"step: {step} losses: {loss_dict}")` of a dict of tensors with no total: the loss is their sum
case(
    "loss_dict_dump",
    "".join(
        f"step: {s} losses: {{'loss_ce': tensor({c:.4f}, device='cuda:0'), 'loss_bbox': tensor(0.5000, "
        f"device='cuda:0')}}\n"
        for s, c in zip((10, 20, 30), (1.2, 1.1, 1.0))
    ),
    {10: 1.7, 20: 1.6, 30: 1.5},
)
# eriklindernoren/PyTorch-GAN implementations/gan/gan.py: `"[Epoch %d/%d] [Batch %d/%d] [D loss: %f] [G loss:
# %f]"`: two adversaries, no training loss (never d_loss or g_loss, never their sum)
case(
    "pytorch_gan_d_and_g",
    "".join(
        f"[Epoch 0/200] [Batch {b}/938] [D loss: {d:f}] [G loss: {g:f}]\n"
        for b, d, g in ((10, 0.69, 0.71), (20, 0.65, 0.8), (30, 0.6, 0.9))
    ),
    None,
)
# quoted numbers: a JSON-ish dict printed with `json.dumps(stats)` where the values are strings (Detectron's
# json_stats writes `"loss": "2.3102"`)
case(
    "quoted_numbers_json_stats",
    "".join(
        f'json_stats: {{"eta": "1 day, 2:03:04", "iter": {s}, "loss": "{v}", "lr": "0.010000", "time": "0.512"}}\n'
        for s, v in zip((20, 40, 60), L)
    ),
    {20: L[0], 40: L[1], 60: L[2]},
    lr={20: 0.01, 40: 0.01, 60: 0.01},
)
# Time-Series-Library exp/exp_long_term_forecasting.py: `"\titers: {0}, epoch: {1} | loss: {2:.7f}"`, the
# epoch's `"Epoch: {0}, Steps: {1} | Train Loss: {2:.7f} Vali Loss: {3:.7f} Test Loss: {4:.7f}"`
case(
    "tslib_iters_epoch",
    "".join(
        f"\titers: {i}, epoch: 1 | loss: {v:.7f}\n\tspeed: 0.1234s/iter; left time: 123.4567s\n"
        for i, v in zip((100, 200, 300), L)
    )
    + "Epoch: 1 cost time: 40.123\nEpoch: 1, Steps: 312 | Train Loss: 2.2000000 Vali Loss: 2.5001000 "
    "Test Loss: 2.6000000\n",
    {100: L[0], 200: L[1], 300: L[2]},
)

# --- structured text ----------------------------------------------------------------------------
case(
    "jsonl_steps",
    "".join(f'{{"step": {s}, "loss": {v}, "lr": 0.0003, "grad_norm": {g}}}\n' for s, v, g in zip((1, 2, 3), L, G)),
    {1: L[0], 2: L[1], 3: L[2]},
    file="metrics.jsonl",
    grad_norm={1: G[0], 2: G[1], 3: G[2]},
)
case(
    "csv_steps",
    "step,loss,val_loss,lr\n" + "".join(f"{s},{v},{w},0.001\n" for s, v, w in zip((1, 2, 3), L, V)),
    {1: L[0], 2: L[1], 3: L[2]},
    file="metrics.csv",
    eval_loss={1: V[0], 2: V[1], 3: V[2]},
)
case(
    "whitespace_aligned_table",
    "step      loss        lr          grad_norm\n"
    + "".join(f"{s:<10d}{v:<12.4f}{3e-4:<12.2e}{g:<10.3f}\n" for s, v, g in zip((10, 20, 30), L, G)),
    {10: round(L[0], 4), 20: round(L[1], 4), 30: round(L[2], 4)},
    grad_norm={10: 1.234, 20: 1.111, 30: 0.987},
)


# --- more examples and libraries -----------------------------------------------------------------
# pytorch/examples word_language_model/main.py train(): `'| epoch {:3d} | {:5d}/{:5d} batches | lr {:02.2f} |
# ms/batch {:5.2f} | loss {:5.2f} | ppl {:8.2f}'` (epochs from 1); after each epoch `'| end of epoch {:3d} |
# time: {:5.2f}s | valid loss {:5.2f} | valid ppl {:8.2f}'`
case(
    "pytorch_word_language_model",
    "".join(
        f"| epoch {e:3d} | {b:5d}/{2983:5d} batches | lr {20:02.2f} | ms/batch {45.21:5.2f} | loss {v:5.2f} | "
        f"ppl {math.exp(v):8.2f}\n"
        for e, b, v in ((1, 200, 7.31), (1, 400, 6.52), (1, 600, 6.21))
    )
    + "-" * 89
    + "\n| end of epoch   1 | time: 150.30s | valid loss  5.56 | valid ppl   260.20\n"
    + "-" * 89
    + "\n"
    + "".join(
        f"| epoch {2:3d} | {b:5d}/{2983:5d} batches | lr {20:02.2f} | ms/batch {45.21:5.2f} | loss {v:5.2f} | "
        f"ppl {math.exp(v):8.2f}\n"
        for b, v in ((200, 5.9), (400, 5.81))
    ),
    {200: 7.31, 400: 6.52, 600: 6.21, 3183: 5.9, 3383: 5.81},
    eval_loss={600: 5.56},
)

# tensorflow/docs tutorials (transformer.ipynb): `print(f'Epoch {epoch + 1} Batch {batch} Loss
# {train_loss.result():.4f} Accuracy {train_accuracy.result():.4f}')` (one epoch in view)
case(
    "tf_tutorial_epoch_batch",
    "".join(f"Epoch 1 Batch {b} Loss {v:.4f} Accuracy 0.{b // 50:04d}\n" for b, v in zip((0, 50, 100, 150), L)),
    {0: round(L[0], 4), 50: round(L[1], 4), 100: round(L[2], 4), 150: round(L[3], 4)},
)

# google/flax examples/mnist/train.py: `logging.info('epoch:% 3d, train_loss: %.4f, train_accuracy: %.2f,
# test_loss: %.4f, test_accuracy: %.2f', ...)` under absl's prefix
case(
    "flax_mnist_epochs",
    "".join(
        f"I0601 12:00:{e:02d}.123456 139872 train.py:148] epoch:{e: 3d}, train_loss: {v:.4f}, train_accuracy: "
        f"{90 + e:.2f}, test_loss: {w:.4f}, test_accuracy: {89 + e:.2f}\n"
        for e, v, w in zip((1, 2, 3), L, V)
    ),
    {1: round(L[0], 4), 2: round(L[1], 4), 3: round(L[2], 4)},
    eval_loss={1: V[0], 2: V[1], 3: V[2]},
)

# dmlc/xgboost python-package callback.py EvaluationMonitor: `[0]\ttrain-logloss:0.61234\teval-logloss:0.62345`
case(
    "xgboost_evaluation_monitor",
    "".join(
        f"[{i}]\ttrain-logloss:{v:.5f}\teval-logloss:{w:.5f}\n"
        for i, v, w in zip((0, 1, 2), (0.61234, 0.54321, 0.49876), (0.62345, 0.5601, 0.5234))
    ),
    {0: 0.61234, 1: 0.54321, 2: 0.49876},
    eval_loss={0: 0.62345, 1: 0.5601, 2: 0.5234},
)

# scikit-learn neural_network/_multilayer_perceptron.py: `print("Iteration %d, loss = %.8f" % (self.n_iter_, loss))`
case(
    "sklearn_mlp_verbose",
    "".join(f"Iteration {i}, loss = {v:.8f}\n" for i, v in zip((1, 2, 3, 4), L))
    + "Training loss did not improve more than tol=0.000100 for 10 consecutive epochs. Stopping.\n",
    {1: L[0], 2: L[1], 3: L[2], 4: L[3]},
)

# keras/src/callbacks/model_checkpoint.py: `f"\nEpoch {epoch + 1}: {self.monitor} improved from {best:.5f} to
# {current:.5f}, saving model to {filepath}"` between the epoch lines: neither a training nor a new eval point
case(
    "keras_with_model_checkpoint",
    "".join(
        f"Epoch {e}/10\n100/100 - 2s - 15ms/step - loss: {v:.4f}\n\nEpoch {e}: loss improved from "
        f"{9.9 if e == 1 else L[e - 2]:.5f} to {v:.5f}, saving model to model.keras\n"
        for e, v in zip((1, 2, 3), L)
    ),
    (ORDERED, [round(v, 4) for v in L[:3]]),
)

# Lightning ModelCheckpoint (callbacks/model_checkpoint.py `_update_best_and_save`): `f"Epoch {epoch:d}, global
# step {step:d}: {self.monitor!r} reached {current:0.5f} (best {best:0.5f}), saving model to ..."`
case(
    "lightning_bar_with_checkpoint_lines",
    "\n".join(
        lightning_bar(e, 100, 100, v_num=3, train_loss=v) + f"\nEpoch {e}, global step {100 * (e + 1)}: "
        f"'val_loss' reached {w:0.5f} (best {w:0.5f}), saving model to 'ckpt/epoch={e}.ckpt' as top 1"
        for e, v, w in zip((0, 1, 2), L, V)
    )
    + "\n",
    (ORDERED, L[:3]),
)

# two ranks printing the same line (torchrun without a rank filter): rank 0's value is kept at each step
case(
    "two_ranks_interleaved",
    "".join(f"[rank{r}]: step {s} loss {v + r / 100:.4f}\n" for s, v in zip((10, 20, 30), L) for r in (0, 1)),
    {10: round(L[0], 4), 20: round(L[1], 4), 30: round(L[2], 4)},
    xfail="the console reader (sources/stdout.py) keeps the last rank's value at a step printed twice",
)

# DeepSpeed's own step lines (deepspeed/runtime/engine.py `_report_progress`: `step={}, skipped={}, lr={}, mom={}`)
# among the training script's prints: the script's loss is the training loss
case(
    "deepspeed_steps_and_script_loss",
    "".join(
        f"[2023-06-01 12:00:{k:02d},000] [INFO] [logging.py:96:log_dist] [Rank 0] step={s}, skipped=0, "
        f"lr=[0.0001], mom=[(0.9, 0.95)]\nEpoch 0 step {s} loss {v}\n"
        for k, (s, v) in enumerate(zip((10, 20, 30), L))
    ),
    {10: L[0], 20: L[1], 30: L[2]},
)

# TensorBoard-style tags printed as they are logged (`writer.add_scalar("Loss/train", ...)` and a `print(f"Step
# {step}: " + ", ".join(f"{tag}={value}" ...))`): the split after the metric's name
case(
    "tensorboard_tags_printed",
    "".join(f"Step {s}: Loss/train={v}, Loss/val={w}, lr=0.001\n" for s, v, w in zip((100, 200, 300), L, V)),
    {100: L[0], 200: L[1], 300: L[2]},
    eval_loss={100: V[0], 200: V[1], 300: V[2]},
    lr={100: 1e-3, 200: 1e-3, 300: 1e-3},
)

# facebookresearch/dlrm dlrm_s_pytorch.py: `"Finished {} it {}/{} of epoch {}, {:.2f} ms/it,".format(str_run_type,
# j + 1, nbatches, k, gT) + " loss {:.6f}".format(gL)`
case(
    "dlrm_finished_training_it",
    "".join(
        f"Finished training it {i}/5000 of epoch 0, 10.52 ms/it, loss {v:.6f}, accuracy 0.000 %\n"
        for i, v in zip((100, 200, 300), L)
    ),
    {100: round(L[0], 6), 200: round(L[1], 6), 300: round(L[2], 6)},
)

# dmlc/gluon-nlp and gluon-cv scripts: `logger.info('[Epoch {} Batch {}/{}] loss={:.4f}, lr={:.7f}, acc={:.3f}'...)`
# (epochs from 0)
case(
    "gluon_epoch_batch",
    "".join(
        f"[Epoch {e} Batch {b}/500] loss={v:.4f}, lr=0.0010000, acc=0.500\n"
        for e, b, v in ((0, 100, L[0]), (0, 200, L[1]), (1, 100, L[2]))
    ),
    (ORDERED, [round(v, 4) for v in L[:3]]),
)

# a record over two lines: the MNIST example's train line (a sample count within the epoch), then the script's
# own `print(f"grad_norm: {gn:.4f} iteration: {it}")`: the iteration is the step of both
case(
    "two_line_record_iteration_below",
    "".join(
        f"Train Epoch: 4 [{n}/141886 ({100 * n / 141886:.0f}%)]\tLoss: {v:.6f}\ngrad_norm: {g:.4f} iteration: {it}\n"
        for n, v, g, it in zip((49920, 49960, 50000), L, G, (59448, 59453, 59458))
    ),
    {59448: round(L[0], 6), 59453: round(L[1], 6), 59458: round(L[2], 6)},
    grad_norm={59448: round(G[0], 4), 59453: round(G[1], 4), 59458: round(G[2], 4)},
)


# --- one line, several shapes -------------------------------------------------------------------
# DETR's MetricLogger as the ETA runs down: `eta: 1 day, 2:03:04` then `eta: 23:59:10` (str(timedelta)), the
# same training line with a number fewer
case(
    "metric_logger_eta_loses_its_day",
    "".join(
        f"Epoch: [0]  [{i:4d}/7329]  eta: {eta}  lr: 0.000100  loss: {v:.4f} ({v + 1:.4f})  "
        f"time: 0.5123  data: 0.0112  max mem: 5000\n"
        for i, eta, v in (
            (10, "1 day, 0:01:04", L[0]),
            (20, "23:59:10", L[1]),
            (30, "23:58:02", L[2]),
            (40, "23:57:00", L[3]),
        )
    ),
    {10: round(L[0], 4), 20: round(L[1], 4), 30: round(L[2], 4), 40: round(L[3], 4)},
)

# tqdm's rate flips from `s/it` to `it/s` when the loop speeds up (tqdm/std.py format_meter), and a postfix
# that gains a key once it is set
case(
    "tqdm_rate_unit_flips",
    f"train:  10%|#    | 100/1000 [01:40<15:00,  1.00s/it, loss={L[0]:.3f}]\n"
    f"train:  20%|##   | 200/1000 [02:30<10:00,  1.33it/s, loss={L[1]:.3f}]\n"
    f"train:  30%|###  | 300/1000 [03:10<08:00,  2.50it/s, loss={L[2]:.3f}, lr=1e-4]\n",
    {100: 2.31, 200: 2.253, 300: 2.199},
)


# --- more tools, and the phrasings people print ---------------------------------------------------
# Written from each tool's print code as remembered (the line format cited beside it), with variants
# (fields added or reordered, evaluation lines interleaved) that a reader fitted to one log would miss.

# AlexeyAB/darknet src/detector.c train_detector: `printf("\n %d: %f, %f avg loss, %f rate, %lf seconds, %d
# images, %f hours left\n", iteration, loss, avg_loss, ...)`: the name comes after the number; the first
# number after the counter is the batch's loss, `avg loss` its running average
case(
    "darknet_avg_loss",
    "".join(
        f" Region 82 Avg IOU: 0.512345, Class: 0.498765, Obj: 0.456789, No Obj: 0.004567, .5R: 0.5, .75R: 0.1, "
        f" count: 8\n {i}: {v:f}, {v + 0.4:f} avg loss, 0.000010 rate, 2.361061 seconds, {64 * i} images, "
        f"-1.000000 hours left\nLoaded: 0.000040 seconds\n"
        for i, v in zip((1, 2, 3, 4), L)
    ),
    {1: round(L[0], 6), 2: round(L[1], 6), 3: round(L[2], 6), 4: round(L[3], 6)},
)

# tensorflow/models research/slim (tf.contrib.slim learning.train_step): `'global step %d: loss = %.4f (%.3f
# sec/step)'`
case(
    "tf_slim_global_step",
    "".join(f"INFO:tensorflow:global step {s}: loss = {v:.4f} (0.512 sec/step)\n" for s, v in zip((10, 20, 30), L)),
    {10: round(L[0], 4), 20: round(L[1], 4), 30: round(L[2], 4)},
)

# PaddlePaddle paddle/hapi/progressbar.py (Model.fit, verbose=2): `Epoch 1/2` then `step  10/938 - loss: 2.3102
# - acc: 0.1234 - 12ms/step`; evaluate() prints `Eval begin...`, step lines of the same shape, `Eval samples:`
case(
    "paddle_hapi_fit_with_eval",
    "The loss value printed in the log is the current step, and the metric is the average value of previous steps.\n"
    + "".join(
        f"Epoch {e}/2\n"
        + "".join(f"step {s:3d}/938 - loss: {v:.4f} - acc: 0.{s:04d} - 12ms/step\n" for s, v in steps)
        + f"Eval begin...\nstep  50/157 - loss: {w + 0.01:.4f} - acc: 0.5000 - 5ms/step\n"
        f"step 157/157 - loss: {w:.4f} - acc: 0.5100 - 5ms/step\nEval samples: 10000\n"
        for e, steps, w in ((1, ((100, L[0]), (200, L[1])), V[0]), (2, ((100, L[2]), (200, L[3])), V[1]))
    ),
    (ORDERED, [round(v, 4) for v in L[:4]]),
)

# PaddlePaddle fluid book examples: `print("Pass %d, Batch %d, Cost %f, Acc %f" % (pass_id, batch_id, cost, acc))`
# and `print("Test with Pass %d, Loss %f, Acc %f" % ...)`: a pass is an epoch, the cost is the loss
case(
    "paddle_fluid_pass_batch_cost",
    "".join(
        f"Pass {p}, Batch {b}, Cost {v:f}, Acc 0.500000\n"
        for p, b, v in ((0, 0, L[0]), (0, 100, L[1]), (0, 200, L[2]), (1, 0, L[3]), (1, 100, L[4]))
    )
    + "Test with Pass 1, Loss 2.500100, Acc 0.600000\n",
    (ORDERED, [round(v, 6) for v in L]),
)

# espnet/espnet2/train/reporter.py log_message: `f"{epoch}epoch:{key}:{start}-{end}batch: " + ", ".join(f"{k}={v}")`
# (the counter's name glued after it); loss_ctc and loss_att are components of loss
case(
    "espnet2_reporter",
    "".join(
        f"[host] 2022-01-01 12:00:{k:02d},000 (trainer:720) INFO: 1epoch:train:{b - 99}-{b}batch: "
        f"iter_time=1.234e-04, forward_time=0.123, loss_ctc=120.500, loss_att={v * 30:.3f}, acc=0.101, "
        f"loss={v * 40:.3f}, backward_time=0.100, optim_step_time=0.010, optim0_lr0=1.000e-05, train_time=1.200\n"
        for k, (b, v) in enumerate(zip((100, 200, 300), L))
    ),
    (ORDERED, [round(v * 40, 3) for v in L[:3]]),
    lr=(ORDERED, [1e-5] * 3),
)


# ray-project/ray rllib `print(pretty_print(result))` each iteration: a YAML dump, nested sections (`info:`,
# `learner:`) with no value, text values, the learner's `total_loss`, `training_iteration` at the end
def rllib_result(it, total):
    return (
        f"agent_timesteps_total: {4000 * it}\ncustom_metrics: {{}}\ndate: 2023-06-01_12-00-0{it}\n"
        f"done: false\nepisode_len_mean: {20.5 + it}\nepisode_reward_mean: {20.5 + it}\nhostname: node-1\n"
        f"info:\n  learner:\n    default_policy:\n      learner_stats:\n        cur_kl_coeff: 0.2\n"
        f"        cur_lr: 5.0e-05\n        entropy: 0.69\n        kl: 0.01\n        policy_loss: -0.0123\n"
        f"        total_loss: {total}\n        vf_loss: 9.5\n  num_steps_trained: {4000 * it}\n"
        f"iterations_since_restore: {it}\nnode_ip: 10.0.0.1\ntime_this_iter_s: 5.1\ntimesteps_total: {4000 * it}\n"
        f"training_iteration: {it}\ntrial_id: default\n\n"
    )


case(
    "rllib_pretty_print",
    "".join(rllib_result(it, v) for it, v in zip((1, 2, 3), (9.51, 9.12, 8.77))),
    {1: 9.51, 2: 9.12, 3: 8.77},
)

# intel-analytics/BigDL optim/DistriOptimizer.scala: `s"$header Trained $batchSize records in $time seconds.
# Throughput is $t records/second. Loss is $loss. ..."` with the header `[Epoch 1 1024/60000][Iteration 8][Wall
# Clock 5.1s]`: `key is v` phrasing
case(
    "bigdl_distri_optimizer",
    "".join(
        f"2019-01-01 12:00:{k:02d} INFO  DistriOptimizer$:430 - [Epoch 1 {128 * i}/60000][Iteration {i}][Wall "
        f"Clock {0.5 * i:.1f}s] Trained 128 records in 0.5 seconds. Throughput is 256.0 records/second. Loss is "
        f"{v}. Sequential1234 hyper parameters: Current learning rate is 0.01. Current dampening is 0.0.\n"
        for k, (i, v) in enumerate(zip((8, 9, 10), L))
    ),
    {8: L[0], 9: L[1], 10: L[2]},
)

# google-research/t5x through CLU's logging writer: `[1000] accuracy=..., cross_ent_loss=..., learning_rate=...,
# loss=..., z_loss=...` (keys sorted: the total after its components)
case(
    "t5x_clu_summary",
    "".join(
        f"I0601 12:00:{k:02d}.000000 140000 logging_writer.py:48] [{s}] accuracy=0.41, cross_ent_loss={v - 0.01}, "
        f"cross_ent_loss_per_all_target_tokens=0.0001, learning_rate=0.001, loss={v}, timing/seconds=12.3, "
        f"z_loss=0.01\n"
        for k, (s, v) in enumerate(zip((1000, 2000, 3000), L))
    ),
    {1000: L[0], 2000: L[1], 3000: L[2]},
    lr={1000: 1e-3, 2000: 1e-3, 3000: 1e-3},
)

# google/flax examples (older mnist/imagenet): `logging.info('train epoch: %d, loss: %.4f, accuracy: %.2f', ...)`
# and `logging.info('eval epoch: %d, loss: %.4f, accuracy: %.2f', ...)`: the eval line has the train line's shape
case(
    "flax_train_and_eval_epoch_lines",
    "".join(
        f"I0601 12:00:{e:02d}.000000 140000 train.py:120] train epoch: {e}, loss: {v:.4f}, accuracy: {90 + e:.2f}\n"
        f"I0601 12:00:{e:02d}.500000 140000 train.py:130] eval epoch: {e}, loss: {w:.4f}, accuracy: {89 + e:.2f}\n"
        for e, v, w in zip((1, 2, 3), L, V)
    ),
    {1: round(L[0], 4), 2: round(L[1], 4), 3: round(L[2], 4)},
    eval_loss={1: V[0], 2: V[1], 3: V[2]},
)

# Lightning RichProgressBar (callbacks/progress/rich_progress.py) as it stays on screen after each epoch:
# `Epoch 0/9  ━━━━━ 100/100 0:00:05 • 0:00:00 20.00it/s v_num: 0 train_loss: 2.310 val_loss: 2.500`
case(
    "lightning_rich_bar",
    "".join(
        f"Epoch {e}/9  {'━' * 30} 100/100 0:00:05 • 0:00:00 20.00it/s v_num: 0 train_loss: {v:.3f} val_loss: {w:.3f}\n"
        for e, v, w in zip((0, 1, 2), L, V)
    ),
    (ORDERED, [round(v, 3) for v in L[:3]]),
    eval_loss=(ORDERED, [round(v, 3) for v in V]),
)

# tqdm.notebook / tqdm.auto in Jupyter, copied out of the output cell: the widget's text, block characters
case(
    "tqdm_notebook_copied",
    "".join(
        f"Epoch {e}: 100%|██████████| 938/938 [00:15<00:00, 60.12it/s, loss={v:.4f}, acc=0.9{e}]\n"
        for e, v in zip((1, 2, 3), L)
    ),
    (ORDERED, [round(v, 4) for v in L[:3]]),
)  # the bar's counter within the epoch: the step is not in full

# plain prints of small projects, the shapes people write by hand
case(
    "plain_epoch_colon_comma",
    "".join(f"Epoch: {e}, Loss: {v:.4f}, Val Loss: {w:.4f}\n" for e, v, w in zip((1, 2, 3), L, V)),
    {1: round(L[0], 4), 2: round(L[1], 4), 3: round(L[2], 4)},
    eval_loss={1: V[0], 2: V[1], 3: V[2]},
)
case(
    "plain_loss_at_epoch_is",
    "".join(f"loss at epoch {e} is {v}\n" for e, v in zip((1, 2, 3), L)),
    {1: L[0], 2: L[1], 3: L[2]},
)
case(
    "plain_arrow_and_call",
    "".join(f"step {s} -> loss {v} | grad_norm({g})\n" for s, v, g in zip((5, 10, 15), L, G)),
    {5: L[0], 10: L[1], 15: L[2]},
    grad_norm={5: G[0], 10: G[1], 15: G[2]},
)
case(
    "plain_bracket_epoch_iteration",
    "".join(f"[Epoch {e}][Iteration {i}] loss: {v}\n" for e, i, v in ((1, 120, L[0]), (1, 240, L[1]), (2, 360, L[2]))),
    {120: L[0], 240: L[1], 360: L[2]},
)
case(
    "plain_leading_counter_colon",
    "".join(f"{i}: loss {v}\n" for i, v in zip((120, 240, 360), L)),
    {120: L[0], 240: L[1], 360: L[2]},
)
case(
    "plain_leading_number_column",
    "".join(f"{i} loss: {v} lr: 0.001\n" for i, v in zip((100, 200, 300), L)),
    {100: L[0], 200: L[1], 300: L[2]},
    lr={100: 1e-3, 200: 1e-3, 300: 1e-3},
)
case(
    "plain_parenthesised_counter",
    "".join(f"Batch({s}/1000) loss={v} lr=0.001\n" for s, v in zip((40, 80, 120), L)),
    {40: L[0], 80: L[1], 120: L[2]},
)
case(
    "plain_parenthesised_bare_counter",
    "".join(f"({s}/1000) loss: {v}\n" for s, v in zip((40, 80, 120), L)),
    {40: L[0], 80: L[1], 120: L[2]},
)
case(
    "plain_nonfinite_words",
    "".join(f"step {s} loss {v}\n" for s, v in ((1, "2.31"), (2, "2.3e+26"), (3, "Infinity"), (4, "-inf"), (5, "NaN"))),
    {1: 2.31, 2: 2.3e26, 3: math.inf, 4: -math.inf, 5: NAN},
)
case(
    "plain_quoted_values",
    "".join(f"step={s} loss='{v}' lr='0.001'\n" for s, v in zip((1, 2, 3), L)),
    {1: L[0], 2: L[1], 3: L[2]},
)
case(
    "plain_train_val_lines_interleaved",
    "".join(f"epoch {e} step {s} train loss {v:.4f}\n" for e, s, v in ((1, 100, L[0]), (1, 200, L[1])))
    + "epoch 1 step 200 val loss 2.5001\n"
    + "".join(f"epoch {e} step {s} train loss {v:.4f}\n" for e, s, v in ((2, 300, L[2]), (2, 400, L[3])))
    + "epoch 2 step 400 val loss 2.4502\n",
    {100: round(L[0], 4), 200: round(L[1], 4), 300: round(L[2], 4), 400: round(L[3], 4)},
    eval_loss={200: V[0], 400: V[1]},
)
# a val line with the train line's words, told apart only by the mode line before it
case(
    "plain_validation_section_same_shape",
    "".join(
        f"Training...\nstep {s}: loss {v:.4f}\nstep {s + 50}: loss {u:.4f}\nValidating...\nstep {s + 50}: loss "
        f"{w:.4f}\n"
        for s, v, u, w in ((50, L[0], L[1], V[0]), (150, L[2], L[3], V[1]))
    ),
    {50: round(L[0], 4), 100: round(L[1], 4), 150: round(L[2], 4), 200: round(L[3], 4)},
)
# an evaluation section whose result line has its own shape: the section ends there, the training rows after
# it are training rows again
case(
    "plain_eval_marker_then_own_result_line",
    "".join(f"step {s} loss {v}\n" for s, v in zip((10, 20), L))
    + "Evaluating...\neval loss 2.5001 acc 0.5\n"
    + "".join(f"step {s} loss {v}\n" for s, v in zip((30, 40), L[2:])),
    {10: L[0], 20: L[1], 30: L[2], 40: L[3]},
    eval_loss={20: V[0]},
)
# a VAE's loss with its reconstruction and KL terms: the total, not a component
case(
    "vae_loss_recon_kl",
    "".join(
        f"Epoch {e} [{b}/469] loss: {v * 50:.2f} recon: {v * 45:.2f} kl: {v * 5:.2f}\n"
        for e, b, v in ((1, 100, L[0]), (1, 200, L[1]), (1, 300, L[2]))
    ),
    {100: round(L[0] * 50, 2), 200: round(L[1] * 50, 2), 300: round(L[2] * 50, 2)},
)
# a GAN printed with `d_loss=` / `g_loss=` pairs beside a step: two adversaries, no training loss
case(
    "gan_d_loss_g_loss_pairs",
    "".join(
        f"step {s}: d_loss={d:.4f} g_loss={g:.4f} d_acc=0.5\n"
        for s, d, g in ((100, 0.69, 0.71), (200, 0.65, 0.8), (300, 0.6, 0.9))
    ),
    None,
)
# a Python dict dump per step with CUDA tensors, a NaN among them
case(
    "dict_repr_tensor_nan",
    "".join(
        f"{{'step': {s}, 'loss': tensor({v}, device='cuda:0', grad_fn=<AddBackward0>), 'loss_cls': "
        f"tensor(0.9, device='cuda:0', grad_fn=<NllLossBackward0>), 'lr': 0.0001}}\n"
        for s, v in ((10, L[0]), (20, L[1]), (30, "nan"))
    ),
    {10: L[0], 20: L[1], 30: NAN},
    lr={10: 1e-4, 20: 1e-4, 30: 1e-4},
)
# JSON objects printed to the console (`print(json.dumps(stats))`), nested splits
case(
    "json_lines_in_console_nested",
    "".join(
        f'{{"epoch": {e}, "train": {{"loss": {v}, "acc": 0.5}}, "val": {{"loss": {w}, "acc": 0.6}}}}\n'
        for e, v, w in zip((1, 2, 3), L, V)
    ),
    {1: L[0], 2: L[1], 3: L[2]},
    eval_loss={1: V[0], 2: V[1], 3: V[2]},
)
# an ASCII box table (prettytable / tabulate's `grid` and `psql` styles)
case(
    "ascii_box_table",
    "+------+--------+----------+\n| step |  loss  | val_loss |\n+------+--------+----------+\n"
    + "".join(f"| {s:4d} | {v:.4f} | {w:.4f}   |\n" for s, v, w in zip((10, 20, 30), L, V))
    + "+------+--------+----------+\n",
    {10: round(L[0], 4), 20: round(L[1], 4), 30: round(L[2], 4)},
    eval_loss={10: V[0], 20: V[1], 30: V[2]},
)
# a Markdown table with alignment colons and an epoch column, pasted from a README or issue
case(
    "markdown_table_aligned",
    "| Epoch | Step | Train Loss | Eval Loss |\n|:-----:|-----:|-----------:|----------:|\n"
    + "".join(f"| {e} | {s} | {v} | {w} |\n" for e, s, v, w in zip((1, 2, 3), (500, 1000, 1500), L, V)),
    {500: L[0], 1000: L[1], 1500: L[2]},
    eval_loss={500: V[0], 1000: V[1], 1500: V[2]},
)
# whitespace-aligned columns with no step column: rows in order
case(
    "whitespace_table_no_step",
    "epoch   train_loss   valid_loss   accuracy   time\n"
    + "".join(f"{e:<8d}{v:<13.6f}{w:<13.6f}{0.5:<11.6f}00:12\n" for e, v, w in zip((0, 1, 2), L, V)),
    (ORDERED, [round(v, 6) for v in L[:3]]),
    eval_loss=(ORDERED, [round(v, 6) for v in V]),
)

# the same table as fastai's notebook shows it, copied as text: names and values separated by one space
case(
    "single_space_table_with_time",
    "epoch train_loss valid_loss accuracy time\n"
    + "".join(f"{e} {v:.6f} {w:.6f} 0.500000 00:0{e + 5}\n" for e, v, w in zip((0, 1, 2), L, V)),
    {0: round(L[0], 6), 1: round(L[1], 6), 2: round(L[2], 6)},
    eval_loss={0: round(V[0], 6), 1: round(V[1], 6), 2: round(V[2], 6)},
)
# a Markdown metrics table with a rule row of `--` and a `train` column: True rows train, False rows evaluate
case(
    "markdown_table_train_flag_rows",
    "accuracy | loss | epoch | train | time\n-- | -- | -- | -- | --\n"
    + "".join(
        f"0.81 | {v} | {e} | True | 00:21\n0.85 | {w} | {e} | False | 00:01\n" for e, v, w in zip((0, 1, 2), L, V)
    ),
    {0: L[0], 1: L[1], 2: L[2]},
    eval_loss={0: V[0], 1: V[1], 2: V[2]},
)

# --- Chinese-language prints -------------------------------------------------------------------
case("chinese_round_loss", "".join(f"第{e}轮 损失: {v}\n" for e, v in zip((1, 2, 3), L)), {1: L[0], 2: L[1], 3: L[2]})
case(
    "chinese_epoch_train_val",
    "".join(
        f"第 {e} 个epoch, 训练损失: {v:.4f}, 验证损失: {w:.4f}, 学习率: 0.001\n" for e, v, w in zip((1, 2, 3), L, V)
    ),
    {1: round(L[0], 4), 2: round(L[1], 4), 3: round(L[2], 4)},
    eval_loss={1: V[0], 2: V[1], 3: V[2]},
    lr={1: 1e-3, 2: 1e-3, 3: 1e-3},
)
case(
    "chinese_iteration_loss",
    "".join(f"迭代次数: {i}, 损失: {v}, 梯度范数: {g}\n" for i, v, g in zip((100, 200, 300), L, G)),
    {100: L[0], 200: L[1], 300: L[2]},
    grad_norm={100: G[0], 200: G[1], 300: G[2]},
)
case(
    "chinese_step_full_width_colon",
    "".join(f"步数：{s}，损失：{v}\n" for s, v in zip((10, 20, 30), L)),
    {10: L[0], 20: L[1], 30: L[2]},
)
# --- variants of the shapes above: fields added or reordered, evaluation lines interleaved -------------------------
# mmengine with its validation loop's lines between the training ones (`Epoch(val) [1][ 50/500]` and the
# summary `Epoch(val) [1][500/500]  accuracy/top1: ...`)
case(
    "mmengine_train_with_val_lines",
    "".join(
        f"06/01 12:00:{k:02d} - mmengine - INFO - Epoch(train)  [{e}][{i:3d}/500]  lr: 1.0000e-02  eta: 1:00:00  "
        f"time: 0.5120  data_time: 0.0110  memory: 3000  loss: {v:.4f}  loss_cls: 0.9123\n"
        + (
            f"06/01 12:01:{k:02d} - mmengine - INFO - Epoch(val)  [{e}][ 50/100]    eta: 0:00:10  time: 0.1000  "
            f"data_time: 0.0100  memory: 800  loss: {w:.4f}\n"
            if i == 500
            else ""
        )
        for k, (e, i, v, w) in enumerate(
            ((1, 250, L[0], 0), (1, 500, L[1], V[0]), (2, 250, L[2], 0), (2, 500, L[3], V[1]))
        )
    ),
    (ORDERED, [round(v, 4) for v in L[:4]]),
)
# detectron2 with an `eta` dropped once the run ends and `max_mem` appearing late: the same series
case(
    "detectron2_fields_come_and_go",
    "".join(
        f"[06/01 12:00:{k:02d} d2.utils.events]:  {eta}iter: {i}  total_loss: {v}  loss_cls: 0.9  loss_box_reg: 0.5  "
        f"time: 0.4123  data_time: 0.0112  lr: 0.0002{mem}\n"
        for k, (i, v, eta, mem) in enumerate(
            (
                (19, L[0], "eta: 0:10:00  ", ""),
                (39, L[1], "eta: 0:05:00  ", "  max_mem: 3000M"),
                (59, L[2], "", "  max_mem: 3000M"),
            )
        )
    ),
    {19: L[0], 39: L[1], 59: L[2]},
    lr={19: 2e-4, 39: 2e-4, 59: 2e-4},
)
# fairseq's train_inner with keys in another order (a plugin's extra meters before `loss`)
case(
    "fairseq_reordered_keys",
    "".join(
        f"2021-03-01 10:00:{k:02d} | INFO | train_inner | epoch 001:    {s} / 1000 num_updates={s}, lr=1.25e-05, "
        f"gnorm={g}, wps=12000, loss={v}, nll_loss=8.9, ppl=478.2, loss_scale=64\n"
        for k, (s, v, g) in enumerate(zip((100, 200, 300), L, G))
    ),
    {100: L[0], 200: L[1], 300: L[2]},
    grad_norm={100: G[0], 200: G[1], 300: G[2]},
)
# a plain print with the validation loss on its own line right after each epoch's training line
case(
    "plain_epoch_train_then_val_line",
    "".join(
        f"Epoch {e}/3 - train_loss: {v:.4f} - train_acc: 0.5\nEpoch {e}/3 - val_loss: {w:.4f} - val_acc: 0.6\n"
        for e, v, w in zip((1, 2, 3), L, V)
    ),
    (ORDERED, [round(v, 4) for v in L[:3]]),
    eval_loss=(ORDERED, V),
)
# the HF notebook table with its evaluation columns holding more metrics, steps every 50
case(
    "hf_notebook_table_more_metrics",
    "| Step | Training Loss | Validation Loss | Accuracy | F1 | Runtime | Samples Per Second |\n"
    "|---|---|---|---|---|---|---|\n"
    + "".join(f"| {s} | {v:.6f} | {w:.6f} | 0.5 | 0.4 | 10.1 | 99.0 |\n" for s, v, w in zip((50, 100, 150), L, V)),
    {50: round(L[0], 6), 100: round(L[1], 6), 150: round(L[2], 6)},
    eval_loss={50: V[0], 100: V[1], 150: V[2]},
)
# the ImageNet example's meters with a validation pass (`Test: [ 10/196]` lines of the same meter shape) between
# epochs
case(
    "imagenet_average_meter_with_test_lines",
    "".join(
        f"Epoch: [{e}][{i:4d}/5005]\tTime  0.257 ( 0.560)\tData  0.001 ( 0.284)\tLoss {v:.4e} ({v + 0.1:.4e})\t"
        f"Acc@1   0.00 (  0.14)\n"
        for e, i, v in ((0, 10, L[0]), (0, 20, L[1]))
    )
    + "".join(
        f"Test: [{i:3d}/196]\tTime  0.100 ( 0.120)\tLoss {w:.4e} ({w:.4e})\tAcc@1  10.00 ( 10.00)\n"
        for i, w in ((10, V[0]), (20, V[1]))
    )
    + "".join(
        f"Epoch: [{e}][{i:4d}/5005]\tTime  0.257 ( 0.560)\tData  0.001 ( 0.284)\tLoss {v:.4e} ({v + 0.1:.4e})\t"
        f"Acc@1   0.00 (  0.14)\n"
        for e, i, v in ((1, 10, L[2]), (1, 20, L[3]))
    ),
    (ORDERED, [float(f"{v:.4e}") for v in L[:4]]),
)
# YOLOv5's epoch table row followed by its validation rows (`Class Images Labels P R mAP`), the header
# printed again at each epoch (train.py: `LOGGER.info(('\n' + '%10s' * 7) % ('Epoch', ...))` inside the epoch loop)
case(
    "yolov5_table_with_val_rows",
    "".join(
        f"\n     Epoch   gpu_mem       box       obj       cls    labels  img_size\n      {e}/99     2.64G   {b:.5f}   0.02000   0.01000         4       416: 100%|##########| 7/7 "
        f"[00:15<00:00,  2.27s/it]\n               Class     Images     Labels          P          R     "
        f"mAP@.5 mAP@.5:.95: 100%|##########| 1/1 [00:01<00:00,  1.30s/it]\n                 all         14"
        f"         20      0.5        0.4        0.3        0.2\n"
        for e, b in ((0, 0.1), (1, 0.09), (2, 0.08))
    ),
    # the loss is box + obj + cls
    (ORDERED, [0.13, 0.12, 0.11]),
)
# the same with the header printed once (a fork that moved it out of the loop): the table resumes after the
# validation lines
case(
    "table_resumed_after_other_lines",
    "     Epoch   gpu_mem       box       obj       cls    labels  img_size\n"
    + "".join(
        f"      {e}/99     2.64G   {b:.5f}   0.02000   0.01000         4       416: 100%|##########| 7/7 "
        f"[00:15<00:00,  2.27s/it]\n               Class     Images     Labels          P          R     "
        f"mAP@.5 mAP@.5:.95: 100%|##########| 1/1 [00:01<00:00,  1.30s/it]\n                 all         14"
        f"         20      0.5        0.4        0.3        0.2\n"
        for e, b in ((0, 0.1), (1, 0.09), (2, 0.08))
    ),
    (ORDERED, [0.13, 0.12, 0.11]),
)

# a detector-style print of its parts and their total, `print('Epoch {} train Loc Loss: {:.4f} Cls Loss:
# {:.4f} Tot Loss: {:.4f} Accu :{:.4f}'.format(...))` (WLASL's I3D/TGCN train loops): the total is `Tot
# Loss`, never the first `Loss`
case(
    "parts_then_tot_loss",
    "".join(
        f"Epoch {e} train Loc Loss: {v - 0.1:.4f} Cls Loss: {v + 0.1:.4f} Tot Loss: {v:.4f} Accu :0.{e}000\n"
        for e, v in zip(range(1, 5), L)
    ),
    (ORDERED, [round(v, 4) for v in L[:4]]),
)

# pytorch-CycleGAN-and-pix2pix util/visualizer.py print_current_losses: `'(epoch: %d, iters: %d, time: %.3f,
# data: %.3f) ' % ...` then `'%s: %.3f ' % (k, v)` per loss (cycle_gan_model's loss_names D_A, G_A, cycle_A,
# idt_A, D_B...): two adversaries' parts, cycle and identity terms among them; no training loss
case(
    "cyclegan_loss_log_parts",
    "".join(
        f"(epoch: 1, iters: {i}, time: 0.5{k}1, data: 0.00{k}) D_A: {0.2 + k / 100:.3f} G_A: {0.3 + k / 50:.3f} "
        f"cycle_A: {2.0 - k / 10:.3f} idt_A: {1.0 - k / 20:.3f} D_B: 0.250 G_B: 0.420 cycle_B: {2.2 - k / 10:.3f} "
        f"idt_B: 1.100 \n"
        for k, i in enumerate((100, 200, 300))
    ),
    None,
    components={100: {"d_a": 0.2, "cycle_a": 2.0, "idt_b": 1.1}, 300: {"g_a": 0.34, "cycle_b": 2.0}},
)
# the PyTorch DCGAN tutorial (examples/dcgan/main.py): `'[%d/%d][%d/%d] Loss_D: %.4f Loss_G: %.4f D(x): %.4f
# D(G(z)): %.4f / %.4f'`: the side named after the loss; never summed, and D(x) is no loss
case(
    "dcgan_loss_d_loss_g",
    "".join(
        f"[0/25][{i}/782] Loss_D: {d:.4f} Loss_G: {g:.4f} D(x): 0.5{i} D(G(z)): 0.4{i} / 0.3{i}\n"
        for i, d, g in ((1, 1.3, 2.1), (2, 1.1, 2.6), (3, 0.9, 3.2))
    ),
    None,
    components={1: {"loss_d": 1.3, "loss_g": 2.1}, 3: {"loss_d": 0.9, "loss_g": 3.2}},
)
# a GAN's losses printed in one bracketed group per side (`"[Epoch %d/%d] [Batch %d/%d] [G - gan: %.3f, rec:
# %.3f] [D - real: %.3f, fake: %.3f]"`), pasted with the newline between the last two records lost and
# Markdown bold typed around two values
case(
    "gan_side_groups_pasted",
    "".join(
        f"[Epoch 2/5] [Batch {b}/90] [G - gan: {g:.3f}, rec: 0.15{b // 10}] [D - real: 0.4{b // 10}0, fake: 0.020]\n"
        for b, g in ((10, 6.1), (20, 6.2))
    )
    + "[Epoch 2/5] [Batch 30/90] [G - gan: **6.300**, rec: 0.153] [D - real: 0.430, fake: 0.020]"
    + "[Epoch 2/5] [Batch 40/90] [G - gan: 6.400, rec: 0.154] [D - real: **0.440**, fake: 0.020]\n",
    None,
    components={(ORDERED, "gan"): [6.1, 6.2, 6.3, 6.4], (ORDERED, "real"): [0.41, 0.42, 0.43, 0.44]},
)

# pjreddie/darknet examples/detector.c train_detector: `printf("%ld: %f, %f avg, %f rate, %lf seconds, %d
# images\n", get_current_batch(net), loss, avg_loss, get_current_rate(net), ...)` after the `Region %d Avg IOU:
# %f, Class: %f, ...` lines, seen through pm2's log view, which tags each line `ID|NAME | ` (padded): the
# loss is the number `avg` averages (a guess, no name says so), `rate` the LR
case(
    "darknet_pjreddie_behind_pm2",
    "".join(
        f"0|yolo     | Region 82 Avg IOU: -nan, Class: -nan, Obj: -nan, No Obj: 0.000001, .5R: -nan, .75R: -nan,  count: 0\n"
        f"0|yolo     | Region 94 Avg IOU: 0.86{k}, Class: 0.999, Obj: 0.998, No Obj: 0.008, .5R: 1.0, .75R: 1.0,  count: 3{k}\n"
        f"0|yolo     | {s}: {v:.6f}, {v + 0.1:.6f} avg, 0.001000 rate, 3.99 seconds, {s * 64} images\n"
        f"0|yolo     | Loaded: 0.000031 seconds\n"
        for k, (s, v) in enumerate(zip((501, 502, 503), L))
    ),
    {501: round(L[0], 6), 502: round(L[1], 6), 503: round(L[2], 6)},
    lr={501: 0.001, 502: 0.001, 503: 0.001},
)
# docker compose's `docker compose logs`: `SERVICE-N  | ` in front of every line of a container (compose v1
# wrote `SERVICE_N`), around AlexeyAB/darknet's detector.c `printf("\n %d: %f, %f avg loss, %f rate, %lf
# seconds, %d images, %f hours left\n", ...)`: its leading counter is the step once the tag is gone
case(
    "darknet_alexeyab_behind_docker_compose",
    "".join(
        f"trainer-1  |  {s}: {v:.6f}, {v + 0.1:.6f} avg loss, 0.001000 rate, 2.1 seconds, {s * 64} images, 9.5 hours left\n"
        for s, v in zip((10, 20, 30), L)
    ),
    {10: round(L[0], 6), 20: round(L[1], 6), 30: round(L[2], 6)},
    lr={10: 0.001, 20: 0.001, 30: 0.001},
)

# a training script's own CSV written row by row with no header, `csv.writer(f).writerow([step, loss,
# avg_loss])` (Tacotron-2's step, loss and running average, cut out of its log): the first column counts
# up, so it is the step; the loss is the first column after it (a guess, said in a note)
case(
    "csv_no_header_step_loss_avg",
    "".join(f"{s},{v:.5f},{v + 0.05:.5f}\n" for s, v in zip((12250, 12251, 12252, 12253), L)),
    {12250: round(L[0], 5), 12251: round(L[1], 5), 12252: round(L[2], 5), 12253: round(L[3], 5)},
    file="train.csv",
)

# GluonTS's MXNet Trainer (gluonts/mx/trainer/_base.py): a tqdm bar with `avg_epoch_loss` rounded to 3 digits,
# then `logger.info("Epoch[%d] Evaluation metric '%s'=%f", epoch_no, ("" if is_training else "validation_") +
# "epoch_loss", lv)`: the named epoch loss (full precision) is the training loss, `validation_epoch_loss` the
# evaluation's, however the phrase in front of both reads
case(
    "gluonts_epoch_loss_beside_bar",
    "".join(
        f"100%|██████████| 50/50 [00:10<00:00,  4.95it/s, epoch={e + 1}/100, avg_epoch_loss={v:.3f}]\n"
        f"2020-05-19 18:29:27,221 : INFO : Epoch[{e}] Elapsed time 10.823 seconds\n"
        f"2020-05-19 18:29:27,223 : INFO : Epoch[{e}] Evaluation metric 'epoch_loss'={v:.6f}\n"
        f"2020-05-19 18:29:28,223 : INFO : Epoch[{e}] Evaluation metric 'validation_epoch_loss'={w:.6f}\n"
        for e, (v, w) in enumerate(zip(L, V))
    ),
    {0: L[0], 1: L[1], 2: L[2]},
    eval_loss={0: V[0], 1: V[1], 2: V[2]},
)

# kohya-ss sd-scripts train_network.py: `accelerator.print(f"\\nepoch {epoch+1}/{num_train_epochs}")` and a
# tqdm bar `desc="steps"` with `set_postfix(avr_loss=...)`: `steps:  22%|███   | 176/800 [...]`; the bar's
# percentage follows the word `steps`, the step is `176/800`
case(
    "kohya_steps_bar_percent",
    "".join(
        f"epoch {e}/50\nsteps:  {p}%|{'█' * (p // 2)}{' ' * (50 - p // 2)}| {s}/800 [00:46<02:44,  3.79it/s, avr_loss={v}]\n"
        for e, p, s, v in zip((11, 12, 13, 14), (22, 24, 26, 28), (176, 192, 208, 224), L)
    ),
    {176: L[0], 192: L[1], 208: L[2], 224: L[3]},
)

# Megatron-LM's training_log (`' iteration {:8d}/{:8d} |'`, `' elapsed time per iteration (ms): {:.1f} |'`, ...,
# `' lm loss: {:.6E} |'`, `' grad norm: {:.3f} |'`, `' number of skipped iterations: {:3d} |'`, `' number of nan
# iterations: {:3d} |'`) as a narrow terminal or a chat paste wraps it: every piece ends with `|`, the pieces
# are one line again
case(
    "megatron_iteration_wrapped",
    "".join(
        f" iteration {s:8d}/     500 | consumed samples: {s * 256} | elapsed time per iteration (ms): 812.5 |\n"
        f" learning rate: 1.500000E-04 | global batch size:   256 | lm loss: {v:.6E} |\n"
        f" loss scale: 1.0 | grad norm: {g:.3f} | number of skipped iterations:   0 |\n"
        f" number of nan iterations:   0 |\n"
        for s, v, g in zip((10, 20, 30), L, G)
    ),
    {10: L[0], 20: L[1], 30: L[2]},
    grad_norm={10: G[0], 20: G[1], 30: G[2]},
)

# rsl_rl/runners/on_policy_runner.py `log`: a `#` rule, `Learning iteration {it}/{tot_iter}` centred, then
# `f"{'Value function loss:':>{pad}} {mean_value_loss:.4f}"` and `Surrogate loss` lines: PPO prints no total, the
# loss read is the sum of its two terms (said in a note), both kept as components
case(
    "rsl_rl_ppo_block",
    "".join(
        "#" * 80
        + "\n"
        + f" Learning iteration {it}/1500 ".center(80)
        + "\n\n"
        + f"{'Computation:':>35} 14963 steps/s (collection: 6.407s, learning 0.163s)\n"
        + f"{'Value function loss:':>35} {v:.4f}\n{'Surrogate loss:':>35} {-0.0100:.4f}\n"
        + f"{'Mean action noise std:':>35} 0.56\n{'Mean reward:':>35} 25.66\n"
        + "-" * 80
        + "\n"
        + f"{'Total timesteps:':>35} {it * 4096}\n"
        for it, v in ((101, 0.31), (102, 0.42), (103, 0.25))
    ),
    {101: 0.30, 102: 0.41, 103: 0.24},
)

# DeiT's and timm-style main.py: `log_stats = {**{f'train_{k}': v ...}, **{f'test_{k}': v ...}, 'epoch': epoch,
# 'n_parameters': n_parameters}` written `json.dumps(log_stats) + "\n"` to `log.txt`, once per epoch, the test
# keys only on evaluation epochs: no step is named, the epoch is the step
case(
    "deit_log_txt_json_epochs",
    "".join(
        json.dumps(
            {
                "train_lr": 0.0009,
                "train_loss": v,
                **({"test_loss": 1.47, "test_acc1": 67.5} if e % 2 else {}),
                "epoch": e,
                "n_parameters": 5717416,
            }
        )
        + "\n"
        for e, v in zip(range(49, 53), L)
    ),
    {49: L[0], 50: L[1], 51: L[2], 52: L[3]},
    file="log.txt",
    lr={49: 0.0009, 50: 0.0009, 51: 0.0009, 52: 0.0009},
)
# the same per-epoch JSON lines with a fractional epoch (`{'loss': ..., 'epoch': 0.25}` as a Trainer's logs are
# dumped): no step axis, the rows are numbered in order
case(
    "json_lines_fractional_epoch",
    "".join(json.dumps({"loss": v, "epoch": 0.25 * (k + 1)}) + "\n" for k, v in enumerate(L[:3])),
    (ORDERED, L[:3]),
    file="metrics.jsonl",
)

# --- breadth: tools outside the corpus, each written from its print code --------------------------------------
# mindspore/train/callback/_loss.py LossMonitor.step_end: `print("epoch: %s step: %s, loss is %s" % (cur_epoch_num,
# cur_step_in_epoch, loss), flush=True)`; TimeMonitor: `epoch time: ... ms, per step time: ... ms`
case(
    "mindspore_loss_monitor",
    "".join(f"epoch: 1 step: {s}, loss is {v}\n" for s, v in zip((100, 200, 300), L))
    + "epoch time: 61234.567 ms, per step time: 204.115 ms\n",
    {100: L[0], 200: L[1], 300: L[2]},
)
# mindspore model_zoo resnet src/callback LossCallBack: `"epoch: [{:3d}/{:3d}], step:[{:5d}/{:5d}], loss:[{:5.3f}/{:5.3f}],
# time:[{:5.3f}], lr:[{:5.3f}]"`: the current loss, then the epoch's running average
case(
    "mindspore_zoo_loss_callback",
    "".join(
        f"epoch: [  1/ 90], step:[{s:5d}/ 5004], loss:[{v:5.3f}/{v + 0.1:5.3f}], time:[123.456], lr:[0.100]\n"
        for s, v in zip((100, 200, 300), L)
    ),
    {100: round(L[0], 3), 200: round(L[1], 3), 300: round(L[2], 3)},
    lr={100: 0.1, 200: 0.1, 300: 0.1},
)
# Oneflow-Inc/libai libai/utils/events.py CommonMetricPrinter: `" {eta}iteration: {iter}/{max_iter}  consumed_samples:
# {n}  {losses}  {time}{data_time} tpt: ... samples/s  lr: {lr:.2e}  {memory}"`, losses `total_loss: 2.310`
case(
    "oneflow_libai_metric_printer",
    "".join(
        f"[12/04 10:00:{k:02d} lb.utils.events]:  eta: 1:00:00  iteration: {s}/10000  consumed_samples: {s * 32}  "
        f"total_loss: {v:.4f}  time: 0.5123 s/iter  data_time: 0.0101 s/iter total_throughput: 62.46 samples/s  "
        f"lr: 1.00e-04  \n"
        for k, (s, v) in enumerate(zip((99, 199, 299), L))
    ),
    {99: round(L[0], 4), 199: round(L[1], 4), 299: round(L[2], 4)},
    lr={99: 1e-4, 199: 1e-4, 299: 1e-4},
)
# MegEngine/Models official/vision/classification/resnet/train.py: `logging.info("Epoch %d Step %d, LR %.4f, %s %s %s",
# ...)` of AverageMeters printed `"{name} {val:.3f} ({avg:.3f})"`: the value, then the average (never the average)
case(
    "megengine_meters",
    "".join(
        f"Epoch 0 Step {s}, LR 0.1000, Loss {v:.3f} ({v + 0.2:.3f}) Acc@1 10.000 (9.800) Acc@5 50.000 (49.000)\n"
        for s, v in zip((100, 200, 300), L)
    ),
    {100: round(L[0], 3), 200: round(L[1], 3), 300: round(L[2], 3)},
)
# chainer/training/extensions/print_report.py PrintReport: a header of the entries, each cell left-aligned in
# `len(name) + 2` columns; `validation/main/loss` is the evaluator's
case(
    "chainer_print_report",
    "epoch       main/loss   validation/main/loss  main/accuracy  validation/main/accuracy  elapsed_time\n"
    + "".join(
        f"{e:<12d}{v:<12.6f}{w:<22.6f}{0.4 + e / 10:<15.6f}{0.4 + e / 10:<26.6f}{5.1 * e:<12.4f}\n"
        for e, v, w in zip((1, 2, 3), L, V)
    ),
    {1: round(L[0], 6), 2: round(L[1], 6), 3: round(L[2], 6)},
    eval_loss={1: V[0], 2: V[1], 3: V[2]},
)
# cntk/logging/progress_print.py ProgressPrinter.update_with_trainer: `" Minibatch[{:4d}-{:4d}]: loss = {:0.6f} * {:d},
# metric = {:0.2f}% * {:d};"`: the step is the range's end
case(
    "cntk_progress_printer",
    "Learning rate per minibatch: 0.01\n"
    + "".join(
        f" Minibatch[{a:4d}-{b:4d}]: loss = {v:0.6f} * 6400, metric = {85 - 5 * k:0.2f}% * 6400;\n"
        for k, (a, b, v) in enumerate(zip((1, 101, 201), (100, 200, 300), L))
    ),
    {100: round(L[0], 6), 200: round(L[1], 6), 300: round(L[2], 6)},
)
# Lasagne/examples/mnist.py: `print("Epoch {} of {} took {:.3f}s".format(...))`, then `"  training loss:\t\t{:.6f}"`,
# `"  validation loss:\t\t{:.6f}"`, `"  validation accuracy:\t\t{:.2f} %"`: a record of four lines per epoch
case(
    "lasagne_mnist_epoch_block",
    "".join(
        f"Epoch {e} of 500 took 10.123s\n  training loss:\t\t{v:.6f}\n  validation loss:\t\t{w:.6f}\n"
        f"  validation accuracy:\t\t{80 + e:.2f} %\n"
        for e, v, w in zip((1, 2, 3), L, V)
    ),
    {1: round(L[0], 6), 2: round(L[1], 6), 3: round(L[2], 6)},
    eval_loss={1: V[0], 2: V[1], 3: V[2]},
)
# karpathy/char-rnn train.lua (Torch7): `print(string.format("%d/%d (epoch %.3f), train_loss = %6.8f, grad/param
# norm = %6.4e, time/batch = %.4fs", i, iterations, epoch, train_loss, grad_params:norm() / params:norm(), time))`
case(
    "torch7_char_rnn",
    "".join(
        f"{i}/21150 (epoch {i / 423:.3f}), train_loss = {v:6.8f}, grad/param norm = 1.2340e-01, time/batch = 0.1234s\n"
        for i, v in zip((100, 200, 300), L)
    )
    + "evaluating loss over split index 2\n",
    {100: L[0], 200: L[1], 300: L[2]},
)
# scikit-learn linear_model/_sgd_fast.pyx: `print("-- Epoch %d" % (epoch + 1))`, `print("Norm: %.2f, NNZs: %d, Bias:
# %.6f, T: %d, Avg. loss: %f" % ...)`, `print("Total training time: %.2f seconds." % ...)`
case(
    "sklearn_sgd_verbose",
    "".join(
        f"-- Epoch {e}\nNorm: {10 + e:.2f}, NNZs: 20, Bias: -0.12{e}000, T: {1000 * e}, Avg. loss: {v:f}\n"
        f"Total training time: 0.0{e} seconds.\n"
        for e, v in zip((1, 2, 3), L)
    ),
    {1: round(L[0], 6), 2: round(L[1], 6), 3: round(L[2], 6)},
)
# catboost/libs/logging (the learn/test/best console line): `0:\tlearn: 0.6812345\ttest: 0.6823456\tbest: 0.6823456
# (0)\ttotal: 52.3ms\tremaining: 52.2s`, every `verbose` iterations and the last
case(
    "catboost_verbose",
    "Learning rate set to 0.05\n"
    + "".join(
        f"{i}:\tlearn: {v:.7f}\ttest: {w:.7f}\tbest: {w:.7f} ({i})\ttotal: {52 + i}ms\tremaining: 52.2s\n"
        for i, v, w in zip((0, 100, 200), (0.6812345, 0.5123456, 0.4567891), (0.6823456, 0.5234567, 0.4789123))
    )
    + "\nbestTest = 0.4789123\nbestIteration = 200\n",
    {0: 0.6812345, 100: 0.5123456, 200: 0.4567891},
    eval_loss={0: 0.6823456, 100: 0.5234567, 200: 0.4789123},
)
# microsoft/LightGBM python-package callback.py log_evaluation: `"[%d]\t%s" % (env.iteration + 1, "\t".join(
# "%s's %s: %g" ...))`, the training set named `training`, a validation set `valid_1`
case(
    "lightgbm_log_evaluation",
    "[LightGBM] [Info] Number of positive: 500, number of negative: 500\n"
    "[LightGBM] [Info] Total Bins 1234\n"
    + "".join(
        f"[{i}]\ttraining's binary_logloss: {v:g}\tvalid_1's binary_logloss: {w:g}\n"
        for i, v, w in zip((10, 20, 30), (0.612345, 0.543211, 0.498761), (0.623451, 0.560112, 0.523413))
    ),
    {10: 0.612345, 20: 0.543211, 30: 0.498761},
    eval_loss={10: 0.623451, 20: 0.560112, 30: 0.523413},
)
# fastai v1 basic_train.py Recorder: `epoch  train_loss  valid_loss  accuracy  time` (v1.0.5x prints epochs from 1),
# then `Total time: 01:03` after fit
case(
    "fastai_v1_table",
    "epoch     train_loss  valid_loss  accuracy  time    \n"
    + "".join(f"{e:<10d}{v:<12.6f}{w:<12.6f}{0.4 + e / 10:<10.6f}00:21   \n" for e, v, w in zip((1, 2, 3), L, V))
    + "Total time: 01:03\n",
    {1: round(L[0], 6), 2: round(L[1], 6), 3: round(L[2], 6)},
    eval_loss={1: V[0], 2: V[1], 3: V[2]},
)
# catalyst/callbacks/... ConsoleLogger.log_metrics: `f"{loader_key} ({epoch}/{num_epochs}) " + " | ".join(f"{k}: {v}")`
# for each loader at the end of its epoch
case(
    "catalyst_console_logger",
    "".join(
        f"train ({e}/3) accuracy01: 0.8{e} | loss: {v} | lr: 0.02 | momentum: 0.9\n"
        f"valid ({e}/3) accuracy01: 0.8{e} | loss: {w}\n"
        for e, v, w in zip((1, 2, 3), L, V)
    ),
    {1: L[0], 2: L[1], 3: L[2]},
    eval_loss={1: V[0], 2: V[1], 3: V[2]},
)
# GRAAL-Research/poutyne callbacks/progress.py ProgressionCallback.on_epoch_end: `"Epoch: {:d}/{:d} Train steps: {:d}
# Val steps: {:d} {:.2f}s loss: {:f} ... val_loss: {:f}"`
case(
    "poutyne_progression",
    "".join(
        f"Epoch: {e}/5 Train steps: 938 Val steps: 157 12.34s loss: {v:f} acc: 90.12 val_loss: {w:f} val_acc: 91.00\n"
        for e, v, w in zip((1, 2, 3), L, V)
    ),
    {1: round(L[0], 6), 2: round(L[1], 6), 3: round(L[2], 6)},
    eval_loss={1: V[0], 2: V[1], 3: V[2]},
)
# skorch/callbacks/logging.py PrintLog: a tabulate table (`tablefmt='simple'`), right-aligned, dashed rule
case(
    "skorch_print_log",
    "  epoch    train_loss    valid_acc    valid_loss     dur\n-------  ------------  -----------  ------------  ------\n"
    + "".join(f"{e:>7d}  {v:>12.4f}  {0.4 + e / 10:>11.4f}  {w:>12.4f}  0.5123\n" for e, v, w in zip((1, 2, 3), L, V)),
    {1: round(L[0], 4), 2: round(L[1], 4), 3: round(L[2], 4)},
    eval_loss={1: V[0], 2: V[1], 3: V[2]},
)
# keras 3 src/utils/progbar.py (verbose=1, the bar of `━`), behind TensorFlow's own start-up lines
case(
    "keras3_bar_behind_tf_noise",
    "2024-06-01 12:00:00.123456: I tensorflow/core/platform/cpu_feature_guard.cc:210] This TensorFlow binary is "
    "optimized to use available CPU instructions.\n"
    + "".join(
        f"Epoch {e}/10\n\x1b[1m938/938\x1b[0m \x1b[32m━━━━━━━━━━━━━━━━━━━━\x1b[0m\x1b[37m\x1b[0m \x1b[1m3s\x1b[0m "
        f"3ms/step - accuracy: 0.8{e} - loss: {v:.4f} - val_accuracy: 0.8{e} - val_loss: {w:.4f}\n"
        for e, v, w in zip((1, 2, 3), L, V)
    ),
    (ORDERED, [round(v, 4) for v in L[:3]]),
    eval_loss=(ORDERED, [round(v, 4) for v in V]),
)
# tensorflow/docs quickstart/advanced.ipynb: `print(f'Epoch {epoch + 1}, Loss: {train_loss.result()}, Accuracy:
# {train_accuracy.result() * 100}, Test Loss: {test_loss.result()}, Test Accuracy: {test_accuracy.result() * 100}')`
case(
    "tf2_custom_loop_test_loss",
    "".join(
        f"Epoch {e}, Loss: {v}, Accuracy: {90 + e}.12345, Test Loss: {w}, Test Accuracy: {89 + e}.5\n"
        for e, v, w in zip((1, 2, 3), L, V)
    ),
    {1: L[0], 2: L[1], 3: L[2]},
    eval_loss={1: V[0], 2: V[1], 3: V[2]},
)
# haiku examples (transformer/train.py): `logging.info({'step': step, 'loss': float(loss)})` under absl's prefix
case(
    "haiku_absl_dict",
    "".join(
        f"I1204 10:00:0{k}.123456 140234 train.py:120] {{'step': {s}, 'loss': {v}, 'steps_per_sec': 12.3}}\n"
        for k, (s, v) in enumerate(zip((0, 100, 200), L))
    ),
    {0: L[0], 100: L[1], 200: L[2]},
)
# marian-nmt src/training/scheduler.h: `"Ep. {} : Up. {} : Sen. {} : Cost {:.8f} * {} @ {} after {} : Time {:.2f}s :
# {:.2f} words/s : gNorm {:.4f} : L.r. {:.4e}"`; validation `[valid] Ep. 1 : Up. 5000 : ce-mean-words : 4.123 : new best`
case(
    "marian_updates",
    "".join(
        f"[2024-01-01 12:00:0{k}] Ep. 1 : Up. {u} : Sen. {u * 64:,} : Cost {v:.8f} * 1,234,567 @ 12,345 after "
        f"{u * 12345:,} : Time 120.12s : 10234.56 words/s : gNorm {g:.4f} : L.r. 3.0000e-04\n"
        for k, (u, v, g) in enumerate(zip((1000, 2000, 3000), L, G))
    )
    + "[2024-01-01 12:00:09] [valid] Ep. 1 : Up. 3000 : ce-mean-words : 2.5001 : new best\n",
    {1000: round(L[0], 8), 2000: round(L[1], 8), 3000: round(L[2], 8)},
    grad_norm={1000: G[0], 2000: G[1], 3000: G[2]},
    lr={1000: 3e-4, 2000: 3e-4, 3000: 3e-4},
)
# PaddlePaddle/PaddleNLP paddlenlp/trainer/trainer_callback.py ProgressCallback / the logger: `loss: ..., learning_rate:
# ..., global_step: ..., ... interval_samples_per_second: ..., epoch: ...` under `[time] [    INFO] - `
case(
    "paddlenlp_trainer_logs",
    "".join(
        f"[2024-01-01 12:00:0{k},123] [    INFO] - loss: {v:.8f}, learning_rate: 5e-05, global_step: {s}, "
        f"current_memory_allocated: 1.2, current_memory_reserved: 2.3, interval_runtime: 1.2, "
        f"interval_samples_per_second: 13.3, interval_steps_per_second: 0.8, epoch: 0.0{k + 1}\n"
        for k, (s, v) in enumerate(zip((10, 20, 30), L))
    ),
    {10: round(L[0], 8), 20: round(L[1], 8), 30: round(L[2], 8)},
    lr={10: 5e-5, 20: 5e-5, 30: 5e-5},
)
# PaddlePaddle/PaddleDetection ppdet/engine/callbacks.py LogPrinter: `'Epoch: [{}] [{' + space_fmt + '}/{}] learning_rate:
# {lr:.6f} {meters} eta: {eta} batch_cost: {btime} data_cost: {dtime} ips: {ips:.4f} images/s'`, one epoch in view
case(
    "paddledet_log_printer",
    "".join(
        f"[01/01 12:00:0{k}] ppdet.engine INFO: Epoch: [0] [{b:4d}/7329] learning_rate: 0.000100 loss_cls: 0.5123 "
        f"loss_bbox: 0.3012 loss: {v:.6f} eta: 1 day, 0:00:00 batch_cost: 0.5123 data_cost: 0.0101 ips: 15.6 images/s\n"
        for k, (b, v) in enumerate(zip((20, 40, 60), L))
    ),
    {20: round(L[0], 6), 40: round(L[1], 6), 60: round(L[2], 6)},
    lr={20: 1e-4, 40: 1e-4, 60: 1e-4},
)
# hiyouga/LLaMA-Factory (and Axolotl) run the HF Trainer: its tqdm bar redrawn with `\r`, the log dict printed
# between redraws (with `num_input_tokens_seen`); no step in the dict
case(
    "llama_factory_bar_then_dict",
    "".join(
        f"\r  {s}%|#         | {s}/100 [00:{s:02d}<01:00,  1.00s/it]\r                                         \r"
        f"{{'loss': {v}, 'grad_norm': {g}, 'learning_rate': 4.9e-05, 'epoch': 0.{s // 10}, "
        f"'num_input_tokens_seen': {s * 4096}}}\n"
        for s, v, g in zip((10, 20, 30), L, G)
    ),
    (ORDERED, L[:3]),
    grad_norm=(ORDERED, G[:3]),
)
# modelscope/ms-swift: the `Train:` bar, then the log dict with `'global_step/max_steps': '10/100'`
case(
    "swift_train_bar_dict",
    "".join(
        f"Train:  {s}%|#   | {s}/100 [00:{s:02d}<01:00,  1.66it/s]{{'loss': {v}, 'acc': 0.55, 'grad_norm': {g}, "
        f"'learning_rate': 9.9e-05, 'memory(GiB)': 20.1, 'train_speed(iter/s)': 1.66, 'epoch': 0.{s // 10}, "
        f"'global_step/max_steps': '{s}/100', 'percentage': '{s}.00%', 'elapsed_time': '1m', "
        f"'remaining_time': '9m'}}\n"
        for s, v, g in zip((10, 20, 30), L, G)
    ),
    {10: L[0], 20: L[1], 30: L[2]},
    grad_norm={10: G[0], 20: G[1], 30: G[2]},
)
# OpenRLHF openrlhf/trainer/sft_trainer.py: `logs_dict = {"gpt_loss": ..., "lr": ...}; logs_dict["loss_mean"] =
# loss_mean; step_bar.set_postfix(logs_dict)`: the step's loss beside a running mean (never the mean)
case(
    "openrlhf_sft_postfix",
    "".join(
        f"Train step of epoch 0:  {s}%|#  | {s}/100 [00:{s:02d}<01:30,  1.00s/it, gpt_loss={v:.3f}, lr=5e-6, "
        f"loss_mean={v + 0.1:.3f}]\n"
        for s, v in zip((10, 20, 30), L)
    ),
    {10: round(L[0], 3), 20: round(L[1], 3), 30: round(L[2], 3)},
)
# volcengine/verl verl/utils/tracking.py (console backend) for the SFT trainer: `f"step:{step} - " + " - ".join(
# f"{k}:{v:.3f}")`, train and val keys apart
case(
    "verl_sft_console",
    "".join(f"step:{s} - train/loss:{v:.3f} - train/lr(1e-3):0.010\n" for s, v in zip((10, 20, 30), L))
    + "step:30 - val/loss:2.500\n",
    {10: round(L[0], 3), 20: round(L[1], 3), 30: round(L[2], 3)},
    eval_loss={30: 2.5},
)
# huggingface/diffusers examples/text_to_image/train_text_to_image.py: `logs = {"step_loss": ..., "lr": ...};
# progress_bar.set_postfix(**logs)` (tqdm sorts the keys and writes floats `{:5.3g}`), the bar named `Steps`
case(
    "diffusers_steps_postfix",
    "".join(
        f"\rSteps:  {s // 10}%|#   | {s}/1000 [00:{s // 10:02d}<09:00,  1.66it/s, lr=1e-5, step_loss={v:.3g}]"
        for s, v in zip((100, 200, 300), (0.123, 0.0987, 0.154))
    )
    + "\n",
    {100: 0.123, 200: 0.0987, 300: 0.154},
)
# Nerogar/OneTrainer modules/trainer/GenericTrainer.py: `step_tqdm.set_postfix({'loss': loss, 'smooth loss':
# smooth_loss})`: the raw loss beside an exponential average (never the average)
case(
    "onetrainer_smooth_loss",
    "".join(
        f"step:  {s}%|#   | {s}/100 [00:{s:02d}<01:00,  1.66it/s, loss={v:.4f}, smooth loss={v + 0.02:.4f}]\n"
        for s, v in zip((10, 20, 30), (0.1234, 0.0987, 0.1543))
    ),
    {10: 0.1234, 20: 0.0987, 30: 0.1543},
)
# facebookresearch/fastText src/fasttext.cc printInfo: `"\rProgress: " << 100*progress << "% words/sec/thread: " <<
# wst << " lr: " << lr << " avg.loss: " << loss << " ETA: ..."`: redrawn with `\r`; the only loss is the running one
case(
    "fasttext_progress",
    "Read 0M words\nNumber of words:  12345\nNumber of labels: 10\n"
    + "".join(
        f"\rProgress: {p:5.1f}% words/sec/thread:  123456 lr:  {0.1 * (1 - p / 100):.6f} avg.loss:  {v:.6f} "
        f"ETA:   0h 0m{9 - k:2d}s"
        for k, (p, v) in enumerate(zip((10.0, 20.0, 30.0), L))
    )
    + "\n",
    (ORDERED, [round(v, 6) for v in L[:3]]),
)
# allenai/allennlp training/callbacks/console_logger.py: per epoch, `"%s |  %s"`-aligned `Training |  Validation`
# rows, one per metric, under the logger's prefix; `Epoch 0/9` from the trainer
case(
    "allennlp_metric_table",
    "".join(
        f"2021-01-01 12:00:0{e} - INFO - allennlp.training.gradient_descent_trainer - Epoch {e}/9\n"
        f"2021-01-01 12:00:0{e} - INFO - allennlp.training.callbacks.console_logger -                        "
        f"Training |  Validation\n"
        f"2021-01-01 12:00:0{e} - INFO - allennlp.training.callbacks.console_logger - accuracy           |     "
        f"0.8{e}0  |     0.7{e}0\n"
        f"2021-01-01 12:00:0{e} - INFO - allennlp.training.callbacks.console_logger - loss               |     "
        f"{v:.3f}  |     {w:.3f}\n"
        for e, v, w in zip((0, 1, 2), L, V)
    ),
    {0: round(L[0], 3), 1: round(L[1], 3), 2: round(L[2], 3)},
    eval_loss={0: round(V[0], 3), 1: round(V[1], 3), 2: round(V[2], 3)},
    xfail="a transposed table (a row per metric, a column per phase) is not read: no eval_loss",
)
# explosion/spaCy spacy/training/loggers.py console_logger: a wasabi table `E  #  LOSS NER  ENTS_F  ENTS_P  ENTS_R
# SCORE`, the step in `#`, the loss summed since the last evaluation
case(
    "spacy_train_table",
    "=========================== Training pipeline ===========================\n"
    "E    #       LOSS NER  ENTS_F  ENTS_P  ENTS_R  SCORE \n---  ------  --------  ------  ------  ------  ------\n"
    + "".join(
        f"{e:>3d}  {s:>6d}  {v:>8.2f}  {f:>6.2f}  {f:>6.2f}  {f:>6.2f}    {f / 100:.2f}\n"
        for e, s, v, f in ((0, 0, 49.33, 0.0), (0, 200, 1234.56, 45.12), (1, 400, 987.65, 60.34))
    ),
    {0: 49.33, 200: 1234.56, 400: 987.65},
)
# FluxML (Julia): `@info "Epoch $epoch" loss=train_loss acc=acc` printed by the ConsoleLogger as a box of lines
case(
    "julia_flux_info_block",
    "".join(f"┌ Info: Epoch {e}\n│   loss = {v}\n└   acc = 0.{40 + e}\n" for e, v in zip((1, 2, 3), L)),
    {1: L[0], 2: L[1], 3: L[2]},
)
# mlverse/luz (R torch) R/callbacks.R luz_callback_progress: `Epoch 1/10` then `Train metrics: Loss: 2.3102 - Acc:
# 0.41` and `Valid metrics: Loss: ...`
case(
    "r_luz_epoch_metrics",
    "".join(
        f"Epoch {e}/10\nTrain metrics: Loss: {v:.4f} - Acc: 0.4{e}\nValid metrics: Loss: {w:.4f} - Acc: 0.4{e}\n"
        for e, v, w in zip((1, 2, 3), L, V)
    ),
    {1: round(L[0], 4), 2: round(L[1], 4), 3: round(L[2], 4)},
    eval_loss={1: V[0], 2: V[1], 3: V[2]},
)
# karpathy/minGPT projects/chargpt: `print(f"iter_dt {trainer.iter_dt * 1000:.2f}ms; iter {trainer.iter_num}: train
# loss {trainer.loss.item():.5f}")`
case(
    "mingpt_iter_dt",
    "".join(
        f"iter_dt {12.34 + k:.2f}ms; iter {i}: train loss {v:.5f}\n" for k, (i, v) in enumerate(zip((0, 10, 20), L))
    ),
    {0: round(L[0], 5), 10: round(L[1], 5), 20: round(L[2], 5)},
)
# karpathy/llama2.c train.py: `print(f"{iter_num} | loss {lossf:.4f} | lr {lr:e} | {dt*1000:.2f}ms | mfu {mfu*100:.2f}%")`
case(
    "llama2c_pipes",
    "".join(f"{i} | loss {v:.4f} | lr {5e-4:e} | 1234.56ms | mfu 12.34%\n" for i, v in zip((10, 20, 30), L)),
    {10: round(L[0], 4), 20: round(L[1], 4), 30: round(L[2], 4)},
    lr={10: 5e-4, 20: 5e-4, 30: 5e-4},
)
# EleutherAI/gpt-neox megatron/logging.py training_log: ` samples/sec: ... | iteration {:8d}/{:8d} | elapsed time per
# iteration (ms): ... | learning rate: {:.3E} | approx flops per GPU: ... | lm_loss: {:.6E} | loss scale: {:.1f} |
# number of skipped iterations: {:3d} | number of nan iterations: {:3d} |`
case(
    "gpt_neox_training_log",
    "".join(
        f" samples/sec: 12.345 | iteration {i:8d}/  320000 | elapsed time per iteration (ms): 1234.5 | "
        f"learning rate: 6.000E-05 | approx flops per GPU: 123.4TFLOPS | lm_loss: {v:.6E} | loss scale: 65536.0 | "
        f"number of skipped iterations:   0 | number of nan iterations:   0 |\n"
        for i, v in zip((100, 200, 300), L)
    ),
    {100: float(f"{L[0]:.6E}"), 200: float(f"{L[1]:.6E}"), 300: float(f"{L[2]:.6E}")},
    lr={100: 6e-5, 200: 6e-5, 300: 6e-5},
    scale={100: 65536.0, 200: 65536.0, 300: 65536.0},
)
# pyg-team/pytorch_geometric examples/gcn.py: `log(Epoch=epoch, Loss=loss, Train=train_acc, Val=val_acc, Test=test_acc)`
# printed `Epoch: 001, Loss: 2.3102, Train: 0.4100, Val: 0.4000, Test: 0.3900` (Train/Val/Test are accuracies)
case(
    "pyg_epoch_loss_accuracies",
    "".join(
        f"Epoch: {e:03d}, Loss: {v:.4f}, Train: 0.{40 + e}00, Val: 0.{39 + e}00, Test: 0.{38 + e}00\n"
        for e, v in zip((1, 2, 3), L)
    ),
    {1: round(L[0], 4), 2: round(L[1], 4), 3: round(L[2], 4)},
)
# dmlc/dgl examples/pytorch/gcn/train.py: `print("Epoch {:05d} | Loss {:.4f} | Accuracy {:.4f} ".format(...))`
case(
    "dgl_epoch_pipes",
    "".join(f"Epoch {e:05d} | Loss {v:.4f} | Accuracy 0.{40 + e}00 \n" for e, v in zip((0, 1, 2), L)),
    {0: round(L[0], 4), 1: round(L[1], 4), 2: round(L[2], 4)},
)
# tensorflow/models (TF1) mnist fully_connected_feed.py: `print('Step %d: loss = %.2f (%.3f sec)' % ...)`, then the
# evaluation's `Training Data Eval:` / `Num examples: ... Precision @ 1: ...`
case(
    "tf1_fully_connected_feed",
    "".join(f"Step {s}: loss = {v:.2f} (0.003 sec)\n" for s, v in zip((0, 100, 200), L))
    + "Training Data Eval:\n  Num examples: 55000  Num correct: 49000  Precision @ 1: 0.8909\n",
    {0: 2.31, 100: 2.25, 200: 2.2},
)
# tensorflow/models (TF1) tutorials/image/cifar10/cifar10_train.py: `'%s: step %d, loss = %.2f (%.1f examples/sec;
# %.3f sec/batch)'` with `datetime.now()` first
case(
    "tf1_cifar10_train",
    "".join(
        f"2016-01-01 12:00:0{k}.123456: step {s}, loss = {v:.2f} (1234.5 examples/sec; 0.104 sec/batch)\n"
        for k, (s, v) in enumerate(zip((10, 20, 30), L))
    ),
    {10: 2.31, 20: 2.25, 30: 2.2},
)
# PaddlePaddle/PaddleOCR-style console line with the reader/batch costs after the loss (tools/program.py train:
# `'{}: {}'`-joined stats)
case(
    "paddleocr_reader_costs",
    "".join(
        f"[2024/01/01 12:00:0{k}] ppocr INFO: epoch: [1/500], global_step: {s}, lr: 0.001000, loss: {v:.6f}, "
        f"avg_reader_cost: 0.01234 s, avg_batch_cost: 0.51234 s, avg_samples: 16.0, ips: 31.2 samples/s, "
        f"eta: 1 day, 2:03:04\n"
        for k, (s, v) in enumerate(zip((10, 20, 30), L))
    ),
    {10: round(L[0], 6), 20: round(L[1], 6), 30: round(L[2], 6)},
    lr={10: 1e-3, 20: 1e-3, 30: 1e-3},
)

# --- Chinese-language prints of common Chinese projects -------------------------------------------------------------
case(
    "chinese_training_round_current_loss",
    "".join(f"训练轮次: {e}/10, 当前损失: {v:.4f}, 学习率: 0.0010\n" for e, v in zip((1, 2, 3), L)),
    {1: round(L[0], 4), 2: round(L[1], 4), 3: round(L[2], 4)},
    lr={1: 1e-3, 2: 1e-3, 3: 1e-3},
)
case(
    "chinese_epoch_step_loss_is",
    "".join(f"第 1 个 epoch 第 {s} 步, 损失为 {v:.4f}\n" for s, v in zip((100, 200, 300), L))
    + "第 1 个 epoch 结束, 验证集损失为 2.5001\n",
    {100: round(L[0], 4), 200: round(L[1], 4), 300: round(L[2], 4)},
)
case(
    "chinese_iter_train_loss_val_loss",
    "".join(f"[迭代 {s}] 训练损失={v:.4f} 耗时 0.51秒\n" for s, v in zip((50, 100, 150), L))
    + "[迭代 150] 验证损失=2.5001\n",
    {50: round(L[0], 4), 100: round(L[1], 4), 150: round(L[2], 4)},
    eval_loss={150: V[0]},
)

# --- non-finite values written the tools' own ways ---------------------------------------------------------------
# Caffe on glibc prints a NaN with its sign: `Iteration 300, loss = -nan`
case(
    "caffe_minus_nan",
    "".join(
        f"I0601 12:00:0{k}.123456  1234 solver.cpp:218] Iteration {i} (1.2 iter/s, 8.3s/10 iters), loss = {v}\n"
        f"I0601 12:00:0{k}.123457  1234 solver.cpp:237]     Train net output #0: loss = {v} (* 1 = {v} loss)\n"
        for k, (i, v) in enumerate(((100, "2.3102"), (200, "2.2531"), (300, "-nan")))
    ),
    {100: 2.3102, 200: 2.2531, 300: NAN},
)
# MSVC's printf writes infinity `1.#INF` and NaN `-1.#IND` (a C++ trainer on Windows)
case(
    "msvc_printf_nonfinite",
    "".join(f"step {s} loss {v}\n" for s, v in ((10, "2.3102"), (20, "2.2531"), (30, "1.#INF"), (40, "-1.#IND"))),
    {10: 2.3102, 20: 2.2531, 30: math.inf, 40: NAN},
)
# deeplearning4j ScoreIterationListener: `"Score at iteration {} is {}"` (Java writes `NaN`, `Infinity`)
case(
    "dl4j_score_iteration_nan",
    "".join(
        f"12:00:0{k}.123 [main] INFO  o.d.o.l.ScoreIterationListener - Score at iteration {i} is {v}\n"
        for k, (i, v) in enumerate(((10, "2.3102"), (20, "2.2531"), (30, "Infinity"), (40, "NaN")))
    ),
    {10: 2.3102, 20: 2.2531, 30: math.inf, 40: NAN},
)
# Keras once the loss is NaN: `loss: nan` and an accuracy shown `nan` beside it
case(
    "keras_epoch_nan_loss",
    "".join(
        f"Epoch {e}/10\n100/100 [==============================] - 2s 15ms/step - loss: {v} - accuracy: {a}\n"
        for e, v, a in ((1, "2.3102", "0.4100"), (2, "2.2531", "0.5200"), (3, "nan", "nan"))
    ),
    (ORDERED, [2.3102, 2.2531, NAN]),
)
# the HF Trainer's dict once the gradient overflows: `'grad_norm': nan`, then the loss `0.0` with `inf` beside it
# (`logging_nan_inf_filter` logs an all-NaN interval as 0.0: read as the NaN it stands for)
case(
    "hf_dict_grad_norm_nan",
    "".join(
        f"{{'loss': {v}, 'grad_norm': {g}, 'learning_rate': 5e-05, 'epoch': 0.{k + 1}}}\n"
        for k, (v, g) in enumerate(((2.3102, 1.234), (2.2531, "nan"), (0.0, "inf")))
    ),
    (ORDERED, [2.3102, 2.2531, NAN]),
    grad_norm=(ORDERED, [1.234, NAN, math.inf]),
)
# a percentage gone NaN beside the loss: `acc: nan%` must not take the loss's place
case(
    "plain_nan_percent_beside_loss",
    "".join(
        f"[epoch {e}] loss: {v} | acc: {a}%\n"
        for e, v, a in ((1, "2.3102", "41.00"), (2, "2.2531", "52.00"), (3, "nan", "nan"))
    ),
    {1: 2.3102, 2: 2.2531, 3: NAN},
)


# --- issue 25: shapes of tools the real logs showed, each from its print code ---------------------------------------
# pjreddie darknet examples/classifier.c train_classifier: `printf("%ld, %.3f: %f, %f avg, %f rate, %lf seconds, %ld
# images\n", get_current_batch(net), (float)(*net->seen)/N, loss, avg_loss, get_current_rate(net), ..., *net->seen)`
case(
    "darknet_classifier_batch_epoch",
    "".join(
        f"{b}, {b * 128 / 1281167:.3f}: {v:f}, {v + 0.05:f} avg, 0.081346 rate, 0.385639 seconds, {b * 128} images\n"
        for b, v in zip((40245, 40246, 40247, 40248), L)
    ),
    {40245: round(L[0], 6), 40246: round(L[1], 6), 40247: round(L[2], 6), 40248: round(L[3], 6)},
)
# soumith/imagenet-multiGPU.torch train.lua: `print(('Epoch: [%d][%d/%d]\tTime %.3f Err %.4f Top1-%%: %.2f LR %.0e
# DataLoadingTime %.3f'):format(epoch, batchNumber, opt.epochSize, ...))`: `Err` is the criterion's loss
case(
    "torch7_imagenet_err",
    "".join(
        f"Epoch: [2][{b}/10000]\tTime 0.675 Err {v:.4f} Top1-%: 1.56 LR 1e-02 DataLoadingTime 0.015\n"
        for b, v in zip((1, 2, 3, 4), L)
    ),
    (ORDERED, [round(v, 4) for v in L[:4]]),
)
# dbolya/yolact train.py: `print(('[%3d] %7d ||' + (' %s: %.3f |' * len(loss_labels)) + ' T: %.3f || ETA: %s ||
# timer: %.3f') % tuple([epoch, iteration] + loss_labels + [total, eta_str, elapsed]))`, T the sum of the parts
_YOLACT = [(5.495, 3.668, 6.919, 1.564), (5.514, 3.519, 6.986, 1.640), (5.534, 3.423, 7.028, 1.677)]
case(
    "yolact_parts_and_total_t",
    "".join(
        f"[{1:3d}] {it:7d} || B: {b:.3f} | C: {c:.3f} | M: {m:.3f} | S: {s_:.3f} | T: {b + c + m + s_:.3f} || "
        f"ETA: 197 days, 23:50:39 || timer: 0.298\n"
        for it, (b, c, m, s_) in zip((1440, 1450, 1460), _YOLACT)
    ),
    {it: round(sum(p), 3) for it, p in zip((1440, 1450, 1460), _YOLACT)},
)
# fartashf/vsepp train.py: `'Epoch: [{0}][{1}/{2}]\t{e_log}\tTime {batch_time.val:.3f} ({batch_time.avg:.3f})\t'`,
# e_log from LogCollector (`Eit` the global iteration, `lr`, `Le` the loss, two spaces between): no name says loss
case(
    "vsepp_log_collector",
    "".join(
        f"Epoch: [5][{i}/2266]\tEit {11330 + i}  lr 0.0002  Le {v:.4f} ({v + 0.01:.4f})\tTime 0.900 (0.910)\t"
        f"Data 0.039 (0.040)\t\n"
        for i, v in zip((1069, 1169, 1269, 1369), L)
    ),
    {12399: round(L[0], 4), 12499: round(L[1], 4), 12599: round(L[2], 4), 12699: round(L[3], 4)},
)
# glample/tagger train.py: `print "Starting epoch %i..." % epoch` and `print "%i, cost average: %f" % (i,
# np.mean(epoch_costs[-50:]))`, i counted from 0 again in each epoch (`enumerate(np.random.permutation(...))`)
case(
    "glample_tagger_cost_average",
    "Starting epoch 0...\n"
    + "".join(f"{i}, cost average: {v:f}\n" for i, v in zip((50, 100), L[:2]))
    + "Starting epoch 1...\n"
    + "".join(f"{i}, cost average: {v:f}\n" for i, v in zip((50, 100), L[2:4])),
    (ORDERED, [round(v, 6) for v in L[:4]]),
)
# a script's `print(step, loss)`: two bare numbers a line, the step first
case(
    "plain_print_step_loss_pairs",
    "".join(f"{s} {v}\n" for s, v in zip((76930, 76940, 76950, 76960), L)) + "Saving the model\n",
    {76930: L[0], 76940: L[1], 76950: L[2], 76960: L[3]},
)
# a loop whose batch counter starts again each epoch and prints no epoch: the steps go on from the epoch before
case(
    "plain_batch_counter_restarts_unnumbered_epochs",
    "".join(f"[batch {b}] loss: {v}\n" for b, v in zip((100, 200, 100, 200), L)),
    (ORDERED, L[:4]),
)
# microsoft/LightGBM src/boosting/gbdt.cpp OutputMetric (the CLI, `[LightGBM] [Info]` before each line):
# `"Iteration:" << iter << ", training " << name << " : " << score`, then `", valid_" << i + 1 << " " << name`
case(
    "lightgbm_cli_iteration_lines",
    "[LightGBM] [Info] Total Bins 6132\n"
    + "".join(
        f"[LightGBM] [Info] Iteration:{i}, training l2 : {v:g}\n[LightGBM] [Info] Iteration:{i}, valid_1 l2 : {w:g}\n"
        for i, v, w in zip((1, 2, 3), (0.612345, 0.543211, 0.498761), (0.623451, 0.560112, 0.523413))
    ),
    {1: 0.612345, 2: 0.543211, 3: 0.498761},
    eval_loss={1: 0.623451, 2: 0.560112, 3: 0.523413},
)
# LightGBM python-package log_evaluation with `valid_names=["train", "valid"]`: `[10]\ttrain's l2: 0.5\tvalid's l2: 0.6`
case(
    "lightgbm_named_sets_l2",
    "".join(
        f"[{i}]\ttrain's l2: {v:g}\tvalid's l2: {w:g}\n"
        for i, v, w in zip((10, 20, 30), (0.612345, 0.543211, 0.498761), (0.623451, 0.560112, 0.523413))
    ),
    {10: 0.612345, 20: 0.543211, 30: 0.498761},
    eval_loss={10: 0.623451, 20: 0.560112, 30: 0.523413},
)
# dmlc/xgboost include/xgboost/logging.h BaseLogger: `log_stream_ << "[" << HumanDate() << "] "` in front of what the
# CLI's LOG(CONSOLE) prints, the evaluation line `[0]\ttrain-rmse:17.41\ttest-rmse:17.62`
case(
    "xgboost_cli_time_prefix",
    "".join(
        f"[10:32:1{i}] [{i}]\ttrain-rmse:{v:.5f}\ttest-rmse:{w:.5f}\n"
        for i, v, w in zip((0, 1, 2), (17.41234, 12.34567, 9.87654), (17.62345, 12.5678, 10.12345))
    ),
    {0: 17.41234, 1: 12.34567, 2: 9.87654},
    eval_loss={0: 17.62345, 1: 12.5678, 2: 10.12345},
)
# VowpalWabbit core/src/shared_data.cc print_update: the header over two lines (`average  since  example ...` /
# `loss  last  counter ...`), a row each time the example counter doubles; past the first pass with a holdout set,
# the row is the holdout loss and ends with ` h`
case(
    "vowpal_wabbit_progress_with_holdout",
    "Num weight bits = 18\nlearning rate = 0.5\n"
    "average  since         example        example  current  current  current\n"
    "loss     last          counter         weight    label  predict features\n"
    + "".join(
        f"{v:.6f} {v - 0.01:.6f} {n:12d} {n:14.1f} {1.0:8.4f} {0.25:8.4f} {15:8d}\n" for n, v in zip((1, 2, 4, 8), L)
    )
    + "".join(
        f"{w:.6f} {w - 0.01:.6f} {n:12d} {n:14.1f} {1.0:8.4f} {0.25:8.4f} {15:8d} h\n" for n, w in zip((16, 32), V)
    )
    + "\nfinished run\nnumber of examples per pass = 12\npasses used = 3\naverage loss = 2.401300 h\n",
    {1: round(L[0], 6), 2: round(L[1], 6), 4: round(L[2], 6), 8: round(L[3], 6)},
    eval_loss={16: V[0], 32: V[1]},
)
# nolearn lasagne/handlers.py PrintLog: `tabulate([info], headers="keys", floatfmt='.5f')`, the header and its rule
# printed with the first epoch only, `dur` a duration with its unit (`0.05s`)
case(
    "nolearn_print_log",
    "  epoch    train loss    valid loss    train/val    valid acc  dur\n"
    "-------  ------------  ------------  -----------  -----------  -----\n"
    + "".join(
        f"{e:7d}  {v:12.5f}  {w:12.5f}  {v / w:11.5f}  {0.5:11.5f}  0.0{e}s\n" for e, v, w in zip((1, 2, 3), L, V)
    ),
    {1: round(L[0], 5), 2: round(L[1], 5), 3: round(L[2], 5)},
    eval_loss={1: V[0], 2: V[1], 3: V[2]},
)
# the same table in tabulate's `pipe` format (a Markdown table)
case(
    "nolearn_print_log_pipe",
    "|   epoch |   train loss |   valid loss |   train/val |   valid acc | dur   |\n"
    "|--------:|-------------:|-------------:|------------:|------------:|:------|\n"
    + "".join(
        f"| {e:7d} | {v:12.5f} | {w:12.5f} | {v / w:11.5f} | {0.5:11.5f} | 0.0{e}s |\n"
        for e, v, w in zip((1, 2, 3), L, V)
    ),
    {1: round(L[0], 5), 2: round(L[1], 5), 3: round(L[2], 5)},
    eval_loss={1: V[0], 2: V[1], 3: V[2]},
)
# scikit-learn ensemble/_gb.py VerboseReporter: `("%10s " + "%16s " * (n - 1)) % ("Iter", "Train Loss",
# "Remaining Time")`, rows `{iter:>10d} {train_score:>16.4f} {remaining_time:>16s}` (`0.35s`, `1.20m`)
case(
    "sklearn_gradient_boosting_verbose",
    "      Iter       Train Loss   Remaining Time \n"
    + "".join(f"{i:>10d} {v:>16.4f} {t:>16s}\n" for i, v, t in zip((1, 2, 3), L, ("1.20m", "55.31s", "0.35s"))),
    {1: round(L[0], 4), 2: round(L[1], 4), 3: round(L[2], 4)},
)
# tf.keras 2.x callbacks: LearningRateScheduler `print('\nEpoch %05d: LearningRateScheduler setting learning rate to
# %s.' % (epoch + 1, lr))` and ReduceLROnPlateau `'\nEpoch %05d: ReduceLROnPlateau reducing learning rate to %s.'`
# between the `Epoch N/M` header and the bar
case(
    "keras2_lr_scheduler_lines",
    "".join(
        f"Epoch {e}/20\n\nEpoch {e:05d}: LearningRateScheduler setting learning rate to 0.003.\n"
        f"60000/60000 [==============================] - 17s 279us/step - loss: {v:.4f} - acc: 0.8625 - "
        f"val_loss: {w:.4f} - val_acc: 0.9831\n"
        for e, v, w in zip((1, 2, 3), L, V)
    )
    + "\nEpoch 00003: ReduceLROnPlateau reducing learning rate to 0.0005000000237487257.\n",
    (ORDERED, [round(v, 4) for v in L[:3]]),
    eval_loss=(ORDERED, [round(w, 4) for w in V]),
)
# keras.utils.generic_utils.Progbar in a script's own loop (Keras 1), no `Epoch N/M` header: `progbar.add(batch_size,
# values=[("train loss", loss)])`, one finished bar per epoch (its count may pass the target)
case(
    "keras1_progbar_no_epoch_header",
    "".join(
        f"215424/215375 [==============================] - {418 + e}s - train loss: {v:.4f}     \n"
        for e, v in enumerate(L[:4])
    ),
    (ORDERED, [round(v, 4) for v in L[:4]]),
)
# NVIDIA/tacotron2 train.py: `print("Train loss {} {:.6f} Grad Norm {:.6f} {:.2f}s/it".format(iteration,
# reduced_loss, grad_norm, duration))` and validate(): `print("Validation loss {}: {:9f}  ".format(iteration, val_loss))`
case(
    "tacotron2_train_and_validation_loss",
    "Epoch: 0\n"
    + "".join(f"Train loss {i} {v:.6f} Grad Norm {g:.6f} 0.45s/it\n" for i, v, g in zip((0, 1, 2), L, G))
    + f"Validation loss 2: {V[0]:9f}  \nSaving model and optimizer state at iteration 2 to outdir/checkpoint_2\n"
    + "".join(f"Train loss {i} {v:.6f} Grad Norm {g:.6f} 0.45s/it\n" for i, v, g in zip((3, 4), L[3:], G[3:]))
    + f"Validation loss 4: {V[1]:9f}  \n",
    dict(zip(range(5), L)),
    eval_loss={2: V[0], 4: V[1]},
    grad_norm=dict(zip(range(5), G)),
)
# huggingface/trl DPOTrainer's logged dict (printed by the Trainer): the loss beside rewards/logps/logits per side
case(
    "trl_dpo_console_dicts",
    "".join(
        f"{{'loss': {v}, 'grad_norm': {g}, 'learning_rate': 5e-07, 'rewards/chosen': 0.0{k}, "
        f"'rewards/rejected': -0.0{k}, 'rewards/accuracies': 0.5, 'rewards/margins': 0.0{2 * k}, 'logps/chosen': "
        f"-120.5, 'logps/rejected': -130.2, 'logits/chosen': -2.1, 'logits/rejected': -2.2, 'epoch': 0.0{k + 1}}}\n"
        for k, (v, g) in enumerate(zip(L[:3], G))
    ),
    {1: L[0], 2: L[1], 3: L[2]},
    grad_norm={1: G[0], 2: G[1], 3: G[2]},
)
# huggingface/trl GRPOTrainer's logged dict: the loss (near 0 at the start, by design), rewards and the KL beside it
case(
    "trl_grpo_console_dicts",
    "".join(
        f"{{'loss': {v}, 'grad_norm': {g}, 'learning_rate': 1e-06, 'completion_length': 120.5, "
        f"'rewards/accuracy_reward': 0.2{k}, 'reward': 0.2{k}, 'reward_std': 0.31, 'kl': 0.00{k + 1}, "
        f"'epoch': 0.0{k + 1}}}\n"
        for k, (v, g) in enumerate(zip((0.0, 0.0001, 0.0003), G))
    ),
    {1: 0.0, 2: 0.0001, 3: 0.0003},
    grad_norm={1: G[0], 2: G[1], 3: G[2]},
    reward={1: 0.20, 2: 0.21, 3: 0.22},
)

# RL fine-tuning's reward, printed the ways other RL trainers print it: a PPO script's own `|` line (the policy
# loss below 0 by design, `mean_reward`), a notebook's table with a `reward` column beside `Training Loss`, JSON
# lines whose `rewards/mean` is the reward and `rewards/format` one reward function's term (not the reward)
R = [0.412, 0.455, 0.498, 0.531]
case(
    "ppo_script_pipe_line_mean_reward",
    "".join(
        f"step {s} | policy_loss {v} | mean_reward {r} | kl 0.00{k + 2} | lr 1e-06\n"
        for k, (s, v, r) in enumerate(zip((10, 20, 30), (-0.0123, -0.0311, 0.0042), R))
    ),
    {10: -0.0123, 20: -0.0311, 30: 0.0042},
    reward={10: R[0], 20: R[1], 30: R[2]},
)
case(
    "rl_notebook_table_reward_column",
    "| Step | Training Loss | reward | reward_std | kl |\n|---|---|---|---|---|\n"
    + "".join(f"| {s} | {v} | {r} | 0.2{k} | 0.00{k + 1} |\n" for k, (s, v, r) in enumerate(zip((5, 10, 15), L, R))),
    {5: L[0], 10: L[1], 15: L[2]},
    file="train.md",
    reward={5: R[0], 10: R[1], 15: R[2]},
)
case(
    "rl_jsonl_rewards_mean",
    "".join(
        json.dumps({"step": s, "loss": v, "rewards/format": 1.0, "rewards/mean": r, "lr": 1e-6}) + "\n"
        for s, v, r in zip((1, 2, 3), (0.011, -0.004, 0.002), R)
    ),
    {1: 0.011, 2: -0.004, 3: 0.002},
    file="metrics.jsonl",
    reward={1: R[0], 2: R[1], 3: R[2]},
)
# DPO metrics printed by a script with its step in front (`print(f"step {step}: {metrics}")` of TRL's names) and in a
# `|`-separated line: `rewards/chosen` is the preference column wherever it is printed
case(
    "dpo_step_labelled_dicts",
    "".join(
        f"step {s}: {{'loss': {v}, 'rewards/chosen': {c}, 'rewards/rejected': -{c}, 'rewards/accuracies': 0.6}}\n"
        for s, v, c in zip((10, 20, 30), (0.6931, 0.6512, 0.6044), (0.01, 0.05, 0.12))
    ),
    {10: 0.6931, 20: 0.6512, 30: 0.6044},
    rewards_chosen={10: 0.01, 20: 0.05, 30: 0.12},
)
case(
    "dpo_pipe_line_rewards_chosen",
    "".join(
        f"it {s} | dpo loss {v} | rewards/chosen {c} | rewards/margins {2 * c}\n"
        for s, v, c in zip((10, 20, 30), (0.6931, 0.6512, 0.6044), (0.01, 0.05, 0.12))
    ),
    {10: 0.6931, 20: 0.6512, 30: 0.6044},
    rewards_chosen={10: 0.01, 20: 0.05, 30: 0.12},
)
# a script that prints its training steps and, once an epoch, a validation line naming the epoch only: the
# validation loss is dated by the training step printed before it, not by the epoch number
case(
    "plain_validation_named_by_epoch_between_steps",
    "".join(f"step {s} loss {v}\n" for s, v in zip((100, 200), L[:2]))
    + f"Epoch 1 validation loss: {V[0]}\n"
    + "".join(f"step {s} loss {v}\n" for s, v in zip((300, 400), L[2:4]))
    + f"Epoch 2 validation loss: {V[1]}\n",
    {100: L[0], 200: L[1], 300: L[2], 400: L[3]},
    eval_loss={200: V[0], 400: V[1]},
)

# WongKinYiu/yolov7 train.py: the header `('%10s' * 8) % ('Epoch', 'gpu_mem', 'box', 'obj', 'cls', 'total', 'labels',
# 'img_size')`, the bar's description `('%10s' * 2 + '%10.4g' * 6) % ('%g/%g' % (epoch, epochs - 1), mem, *mloss, ...)`:
# `total` is the printed sum of the parts, the loss (not a sum recomputed from the rounded parts)
_Y7 = [(0.07012, 0.02845, 0.03012), (0.06534, 0.02712, 0.02801), (0.06101, 0.02633, 0.02579)]
case(
    "yolov7_epoch_table_total",
    ("%10s" * 8) % ("Epoch", "gpu_mem", "box", "obj", "cls", "total", "labels", "img_size")
    + "\n"
    + "".join(
        ("%10s" * 2 + "%10.4g" * 6) % (f"{e}/299", "4.52G", *p, sum(p), 45, 640)
        + ": 100%|##########| 92/92 [00:45<00:00,  2.01it/s]\n"
        for e, p in enumerate(_Y7)
    ),
    {e: float(f"{sum(p):.4g}") for e, p in enumerate(_Y7)},
)
# google/paxml trainer_lib.py: `logging.info('step_i: %d, training loss: %s', step_i, loss)` then the weighted
# scalars, under absl's `I0812 10:00:00.123456 140123 trainer_lib.py:123]` prefix
case(
    "pax_step_i_training_loss",
    "".join(
        f"I0812 10:00:0{k}.123456 140123 trainer_lib.py:123] step_i: {s}, training loss: {v}\n"
        f"I0812 10:00:0{k}.123457 140123 trainer_lib.py:124] weighted_scalars: {{'log_pplx': (Array({v + 0.1:.4f}, "
        f"dtype=float32), Array(8192., dtype=float32)), 'fraction_of_correct_next_step_preds': (Array(0.41, "
        f"dtype=float32), Array(8192., dtype=float32))}}\n"
        for k, (s, v) in enumerate(zip((99, 199, 299), L))
    ),
    {99: L[0], 199: L[1], 299: L[2]},
)
# facebookresearch/fairseq2 metrics/recorders/_log.py LogMetricRecorder: `"{title} Metrics (step {step_nr})"` then
# `" | ".join(f"{display_name}: {formatted}")`, floats `f"{f:g}"`, seconds `12s` (the logger's prefix left out)
case(
    "fairseq2_log_metric_recorder",
    "".join(
        f"Train Metrics (step {s}) - Loss: {v:g} | NLL Loss: {v - 0.01:g} | Gradient Norm: {g:g} | Learning Rate: "
        f"0.0001 | Elapsed Time: 12s | Wall Time: 1{k}s\n"
        for k, (s, v, g) in enumerate(zip((10, 20, 30), L, G))
    )
    + f"Validation Metrics (step 30) - Loss: {V[0]:g} | NLL Loss: {V[0] - 0.01:g} | Elapsed Time: 3s\n",
    {10: L[0], 20: L[1], 30: L[2]},
    eval_loss={30: V[0]},
    grad_norm={10: G[0], 20: G[1], 30: G[2]},
)

# Lightning-AI/litgpt finetune/lora.py and pretrain.py: `fabric.print(f"Epoch {metrics['epoch'] + 1} | iter
# {metrics['iter']} step {metrics['step']} | loss train: {metrics['loss']:.3f}, val: {val_loss} | iter time: ...
# ms{' (step)' if not is_accumulating else ''} remaining time: {timedelta(...)}")`, `val: n/a` before the first
# evaluation, then the last one repeated
case(
    "litgpt_epoch_iter_step_loss_train",
    "".join(
        f"Epoch 1 | iter {i} step {i // 2} | loss train: {v:.3f}, val: {w} | iter time: 123.45 ms"
        f"{' (step)' if i % 2 == 0 else ''} remaining time: 0:10:0{i}\n"
        for i, v, w in zip((1, 2, 3, 4), L, ("n/a", "n/a", "2.500", "2.500"))
    ),
    (ORDERED, [round(v, 3) for v in L[:4]]),
)

# keras/src/callbacks/history.py History: `self.history.setdefault(k, []).append(v)` per epoch, so
# `print(history.history)` is a dict of lists (`val_` twins from validation_data); `json.dump(history.history, f)`
# writes the same as JSON. One row per epoch, counted from 1 as Keras's `Epoch 1/5` does
case(
    "keras_history_dict_printed",
    str({"loss": L[:3], "accuracy": [0.41, 0.52, 0.55], "val_loss": V, "val_accuracy": [0.4, 0.5, 0.53]}) + "\n",
    {1: L[0], 2: L[1], 3: L[2]},
    file="out.txt",
    eval_loss={1: V[0], 2: V[1], 3: V[2]},
)
case(
    "keras_history_json",
    json.dumps({"loss": L[:3], "val_loss": V}),
    {1: L[0], 2: L[1], 3: L[2]},
    file="history.json",
    eval_loss={1: V[0], 2: V[1], 3: V[2]},
)


# --- the test ----------------------------------------------------------------------------------


def _at(run, col):
    if not run.has(col) and col not in run.cols:
        return {}
    lg = run.logged(col)
    return {int(s): float(v) for s, v in zip(run.steps[lg], run.cols[col][lg])}


def _check(got, want, col):
    if isinstance(want, tuple) and want[0] == ORDERED:
        steps = sorted(got)
        assert all(b > a for a, b in zip(steps, steps[1:]))
        vals = [got[s] for s in steps]
        assert len(vals) == len(want[1]), (col, got, want)
        for a, b in zip(vals, want[1]):
            assert (math.isnan(a) and math.isnan(b)) or a == pytest.approx(b, rel=1e-6), (col, got, want)
        return
    assert set(got) == set(want), (col, got, want)
    for s, b in want.items():
        a = got[s]
        assert (math.isnan(a) and math.isnan(b)) or a == pytest.approx(b, rel=1e-6), (col, s, a, b)


def read_case(c, tmp_path):
    p = tmp_path / c["file"]
    p.write_text(c["text"])
    runs = load_path(p)
    assert len(runs) == 1
    return runs[0]


@pytest.mark.parametrize(
    "c",
    [pytest.param(c, marks=pytest.mark.xfail(reason=c["xfail"], strict=True)) if c.get("xfail") else c for c in CASES],
    ids=[c["name"] for c in CASES],
)
def test_the_gallery_reads_each_tool_as_it_prints(c, tmp_path):
    run = read_case(c, tmp_path)
    if c["loss"] is None:  # two adversaries: no training loss, both kept as components
        assert not run.has("loss") or not run.logged("loss").any()
        by_step = run.events.get("loss_components", {})
        comps = {k for v in by_step.values() for k in v}
        assert len(comps) >= 2
        _check_components(by_step, c.get("components", {}))
        return
    _check(_at(run, "loss"), c["loss"], "loss")
    for col in ("eval_loss", "grad_norm", "lr", "scale", "reward", "rewards_chosen"):
        if col in c:
            _check(_at(run, col), c[col], col)


def _check_components(by_step, want):
    """`{step: {name: value}}` read at those steps, or `{(ORDERED, name): [values]}` in step order."""
    for key, values in want.items():
        if isinstance(key, tuple):
            got = [by_step[s][key[1]] for s in sorted(by_step) if key[1] in by_step[s]]
            assert got == pytest.approx(values, rel=1e-6), (key, got)
            continue
        for name, v in values.items():
            assert by_step[key][name] == pytest.approx(v, rel=1e-6), (key, name, by_step.get(key))


def test_the_gallery_has_forty_shapes():
    assert len(CASES) >= 40 and len({c["name"] for c in CASES}) == len(CASES)


# --- the phrasing grid: every way of saying a value, a counter and a name, crossed ---------------------------
_SAYS = ["{k}: {v}", "{k} = {v}", "{k}={v}", "{k} {v}", "{k} is {v}", "{k} -> {v}", "{k}({v})"]
_COUNTERS = [
    "step {s}",
    "Step: {s}",
    "iter {s}",
    "[{s}/1000]",
    "Iteration {s},",
    "{s}:",
    "it {s}",
    "global_step={s}",
    "Epoch 1 Batch [{s}]",
    "({s}/1000)",
    "Batch({s}/1000)",
    "step {s}/1000",
    "[Epoch 1][Iteration {s}]",
]
_VALUES = ["{x}", "tensor({x}, device='cuda:0', grad_fn=<AddBackward0>)", "'{x}'", "np.float32({x})"]


@pytest.mark.parametrize("counter", _COUNTERS)
def test_every_phrasing_of_value_counter_and_name_reads(counter, tmp_path):
    """The readers' rules are general, not one per tool: each counter phrasing crossed with each way of
    saying a value, each value wrapper and three names of the training loss, with an LR and a
    validation loss on the same line, reads the training loss at its steps and the validation loss
    apart (never in its place)."""
    steps = [40, 80, 120, 160]
    failed = []
    for say, wrap, name in itertools.product(_SAYS, _VALUES, ["loss", "train_loss", "Train Loss"]):
        text = "".join(
            " ".join(
                [
                    counter.format(s=s),
                    say.format(k=name, v=wrap.format(x=x)),
                    say.format(k="lr", v=wrap.format(x=0.001)),
                    say.format(k="val_loss", v=wrap.format(x=2.9)),
                ]
            )
            + "\n"
            for s, x in zip(steps, L)
        )
        p = tmp_path / "train.log"
        p.write_text(text)
        run = load_path(p)[0]
        if _at(run, "loss") != dict(zip(steps, L[:4])) or set(_at(run, "eval_loss").values()) - {2.9}:
            failed.append(text.splitlines()[0])
    assert not failed, failed[:5]


def _mutations(text: str, rng) -> list[str]:
    """Ways a pasted log arrives broken: cut anywhere, characters lost or doubled, lines shuffled,
    digits turned into letters, a binary-ish burst, one line repeated many times."""
    n = len(text)
    out = [text[: rng.randrange(n + 1)], text[rng.randrange(n + 1) :]]
    chars = list(text)
    for _ in range(min(len(chars), max(1, n // 20))):
        del chars[rng.randrange(len(chars))]
    out.append("".join(chars))
    lines = text.splitlines()
    rng.shuffle(lines)
    out.append("\n".join(lines))
    out.append("".join(c if not c.isdigit() or rng.random() < 0.7 else rng.choice("xO.-e") for c in text))
    out.append(text[: n // 2] + "\x1b[2K\r\t{[(\"'" * 5 + text[n // 2 :])
    out.append((lines[0] + "\n") * 200 if lines else "\n")
    return out


@pytest.mark.parametrize("c", CASES, ids=[c["name"] for c in CASES])
def test_broken_gallery_text_reads_or_is_refused_in_one_line(c, tmp_path):
    """The general reader on every mutation of each shape: a reading, or a SourceError of one line
    that says what it looked for; never another exception."""
    import random

    from lossdoctor.sources import SourceError, any_text

    rng = random.Random(c["name"])
    for k, text in enumerate(_mutations(c["text"], rng)):
        p = tmp_path / f"m{k}.log"
        p.write_text(text)
        for read in (any_text.read, load_path) if k < 2 else (any_text.read,):
            try:
                runs = read(p)
            except SourceError as e:
                msg = str(e)
                assert "\n" not in msg
                assert read is load_path or "looked for" in msg
            else:
                assert runs and all(len(r) > 0 for r in runs)


@pytest.mark.parametrize("name", ["plain_validation_section_same_shape", "plain_eval_marker_then_own_result_line"])
def test_the_general_reader_keeps_an_evaluation_section_apart(name, tmp_path):
    """The general reader alone (what reads a text no named reader knows) on the evaluation sections:
    a training-shaped line after `Validating...` is the evaluation's, and the section ends at a line
    of another shape."""
    from lossdoctor.sources import any_text

    c = next(c for c in CASES if c["name"] == name)
    p = tmp_path / c["file"]
    p.write_text(c["text"])
    run = any_text.read(p)[0]
    _check(_at(run, "loss"), c["loss"], "loss")
    assert sorted(_at(run, "eval_loss").values()) == sorted({V[0], V[1]} if "same_shape" in name else {V[0]})


def test_a_weak_console_reading_gives_way_to_the_general_readers(tmp_path):
    """icefall's lines: the console reader numbers them in order (no step it knows), the general
    reader finds `batch N`: its reading is kept (sources/text_choice.py). nanoGPT's lines, which the
    console reader reads at their `iter`, keep the console reading."""
    by_name = {c["name"]: c for c in CASES}
    run = read_case(by_name["icefall_loss_and_tot_loss"], tmp_path)
    assert run.meta["format"] == "training text" and sorted(_at(run, "loss")) == [50, 100, 150]
    run = read_case(by_name["nanogpt_iter_and_eval"], tmp_path)
    assert run.meta["format"] == "console log"
