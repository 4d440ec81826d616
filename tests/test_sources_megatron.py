"""Megatron-LM / GPT-NeoX / Megatron-DeepSpeed stdout and DeepSpeed's own lines: small fixtures
in the exact line formats those frameworks print, each fault curve diagnosed."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest

import logfaults
from conftest import run_cli
from lossdoctor.detectors.engine import diagnose_runs
from lossdoctor.sources import load_path
from msgs import has

ARGS = """------------------------ arguments ------------------------
  bf16 ............................................ False
  clip_grad ....................................... 1.0
  fp16 ............................................ True
  log_interval .................................... 1
  lr .............................................. 0.0003
  train_iters ..................................... 300
-------------------- end of arguments ---------------------
> building GPT model ...
"""


def _e(v: float) -> str:
    return "nan" if math.isnan(v) else f"{v:.6E}"


def megatron_log(curve: dict, *, neox: bool = False) -> str:
    """Megatron-LM `training_log` lines (NeoX: `lm_loss`, no grad norm field name change)."""
    out = [ARGS]
    n = len(curve["step"])
    for i in range(n):
        it = int(curve["step"][i]) + 1
        skipped = int(curve.get("skipped", np.zeros(n))[i])
        fields = [
            f" [2024-05-01 10:00:{i % 60:02d}] iteration {it:8d}/{n:8d}",
            f" consumed samples: {it * 512:12d}",
            " elapsed time per iteration (ms): 1234.5",
            f" learning rate: {_e(float(curve.get('lr', np.full(n, 3e-4))[i]))}",
            " global batch size:   512",
            f" {'lm_loss' if neox else 'lm loss'}: {_e(float(curve['loss'][i]))}",
            f" loss scale: {float(curve.get('scale', np.full(n, 1.0))[i]):.1f}",
        ]
        g = float(curve["grad_norm"][i])
        if not skipped and math.isfinite(g):  # Megatron prints no grad norm on a skipped iteration
            fields.append(f" grad norm: {g:.3f}")
        fields += [
            " num zeros: 0.0",
            f" number of skipped iterations: {skipped:3d}",
            f" number of nan iterations: {int(math.isnan(float(curve['loss'][i]))):3d}",
            "",
        ]
        out.append(" |".join(fields))
    return "\n".join(out) + "\n"


def deepspeed_log(curve: dict, steps_per_print: int = 10) -> str:
    """DeepSpeed's engine lines: OVERFLOW on every skipped step, step=/skipped= every N steps."""
    out = ["[2024-05-01 10:00:00,000] [INFO] [logging.py:96:log_dist] [Rank 0] DeepSpeed info: version=0.14.0"]
    total_skipped = 0
    prev_scale = 65536.0
    for i, s in enumerate(curve["step"]):
        s = int(s) + 1
        if curve["skipped"][i]:
            total_skipped += 1
            new = float(curve["scale"][i])
            out.append(
                f"[2024-05-01 10:00:01,000] [INFO] [loss_scaler.py:183:update_scale] [deepspeed] "
                f"OVERFLOW! Rank 0 Skipping step. Attempted loss scale: {prev_scale:g}, reducing to {new:g}"
            )
            prev_scale = new
        if s % steps_per_print == 0:
            lr = 3e-4
            out.append(
                f"[2024-05-01 10:00:02,000] [INFO] [logging.py:96:log_dist] [Rank 0] step={s}, "
                f"skipped={total_skipped}, lr=[{lr}, {lr}], mom=[(0.9, 0.999), (0.9, 0.999)]"
            )
    return "\n".join(out) + "\n"


@pytest.mark.parametrize("name", list(logfaults.CURVES))
def test_megatron_curves(tmp_path, name):
    curve = logfaults.CURVES[name]()
    p = tmp_path / "train.log"
    p.write_text(megatron_log(curve))
    runs = load_path(p)
    run = runs[0]
    assert run.source == "megatron" and len(run) == len(curve["step"])
    assert run.meta["max_grad_norm"] == 1.0 and run.meta["fp16"] is True
    assert run.meta["args"]["train_iters"] == 300
    np.testing.assert_allclose(run.cols["loss"], curve["loss"], rtol=1e-5, equal_nan=True)
    logfaults.check(diagnose_runs(runs), name)


def test_neox_lines(tmp_path):
    p = tmp_path / "neox.txt"
    p.write_text(megatron_log(logfaults.grad_explosion(), neox=True))
    doc = json.loads(run_cli("diagnose", p, "--format", "json").stdout)
    logfaults.check(doc, "grad_explosion")


def test_megatron_log_interval_averages(tmp_path):
    """log_interval=10: one line per 10 iterations with interval counts of skipped iterations."""
    curve = logfaults.scale_collapse()
    idx = np.arange(9, 300, 10)
    sub = {k: v[idx] for k, v in curve.items()}
    sk = curve["skipped"].reshape(-1, 10).sum(axis=1)
    sub["skipped"] = sk
    text = megatron_log(sub).replace(
        "log_interval .................................... 1", "log_interval .................................... 10"
    )
    p = tmp_path / "train.log"
    p.write_text(text)
    run = load_path(p)[0]
    assert run.meta["log_interval"] == 10
    assert run.cols["skipped_in_interval"].max() == 10
    assert run.cols["skipped"].max() == pytest.approx(1.0)  # every iteration of the interval skipped
    assert has(run.notes, "source.coarse_averaged", n=10), [getattr(m, "key", m) for m in run.notes]
    logfaults.check(diagnose_runs([run]), "scale_collapse")


def test_deepspeed_overflow_lines(tmp_path):
    curve = logfaults.scale_collapse()
    p = tmp_path / "ds.log"
    p.write_text(deepspeed_log(curve))
    run = load_path(p)[0]
    assert run.source == "deepspeed"
    assert np.nanmin(run.cols["scale"]) == 0.0625 and np.nanmax(run.cols["scale"]) == 65536
    assert any("OVERFLOW" in n for n in run.notes)
    report = diagnose_runs([run])
    assert report.primary is not None and report.primary.cause == "loss_scale_collapse"


def test_megatron_deepspeed_mixed(tmp_path):
    """Megatron-DeepSpeed prints both: iteration lines and DeepSpeed's OVERFLOW lines."""
    curve = logfaults.scale_collapse()
    mg = megatron_log(curve).splitlines()
    ds = [ln for ln in deepspeed_log(curve).splitlines() if "OVERFLOW" in ln]
    p = tmp_path / "mds.log"
    p.write_text("\n".join(mg[:150] + ds[:3] + mg[150:]) + "\n")
    run = load_path(p)[0]
    assert run.meta["framework"] == "megatron" and run.has("loss") and run.has("scale")
    logfaults.check(diagnose_runs([run]), "scale_collapse")


@pytest.mark.parametrize(
    "line,expected",
    [
        (
            "[2024-05-01 10:00:01,000] [INFO] [loss_scaler.py:183:update_scale] [deepspeed] OVERFLOW! Rank 0 "
            "Skipping step. Attempted loss scale: 65536, reducing to 32768",
            (65536.0, 32768.0),
        ),
        (
            "[deepspeed] fp16 dynamic loss scale overflow! Skipping step. Attempted loss scale: 4294967296, "
            "reducing to 2147483648",
            (4294967296.0, 2147483648.0),
        ),
        (
            "[INFO] [stage_1_and_2.py:1769:step] [deepspeed] OVERFLOW! Rank 3 Skipping step. Attempted loss "
            "scale: 1.0, reducing to 1.0",
            (1.0, 1.0),
        ),
        ("iteration 10 | loss 2.3", None),
    ],
)
def test_deepspeed_overflow_line_variants(line, expected):
    from lossdoctor.sources.deepspeed import parse_overflow

    assert parse_overflow(line) == expected


def test_grad_overflow_names_its_step(tmp_path):
    lines = ["[Rank 0] step=10, skipped=0, lr=[0.001], mom=[(0.9, 0.999)]"]
    for it, (a, b) in zip((13, 14, 15), ((65536, 32768), (32768, 16384), (16384, 8192))):
        lines.append(f"Grad overflow on iteration {it}")
        lines.append(f"[deepspeed] OVERFLOW! Rank 0 Skipping step. Attempted loss scale: {a}, reducing to {b}")
    lines.append("[Rank 0] step=20, skipped=3, lr=[0.001], mom=[(0.9, 0.999)]")
    p = tmp_path / "ds.log"
    p.write_text("\n".join(lines) + "\n")
    run = load_path(p)[0]
    steps = list(run.steps)
    for it, scale in ((13, 32768), (14, 16384), (15, 8192)):
        i = steps.index(it)
        assert run.cols["skipped"][i] == 1.0 and run.cols["scale"][i] == scale
    assert run.cols["skipped_in_interval"][steps.index(20)] == 3
    assert not has(run.notes, "console.deepspeed_overflow_placed")  # the steps were named exactly
