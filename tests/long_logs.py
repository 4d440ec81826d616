"""Long training logs (100-5,000 logged points), faulty and healthy, with the noise of real
training, printed the way the readers' formats print them, for tests/test_long_logs.py.

A curve is drawn from a seeded generator: a warm-up then a cosine LR, a loss that falls from its
start towards a floor, per-batch noise that is heavy-tailed (Student's t, 3 degrees of freedom:
small batches throw the odd 3-5 sigma draw), a gradient norm with its own noise. A fault is laid
on top at an onset row after warm-up; a healthy look-alike is a shape people see in sound runs
(a planned LR restart, a GAN's swinging losses, a floor well above 0, a resumed run that logs a
stretch of steps twice, a designed step up of the sequence length said in the log). Formats add
what the console adds: eval lines, tqdm redraws (`\\r`), a resume's repeated step range.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

Curve = dict[str, np.ndarray]


@dataclass(frozen=True)
class LongCase:
    """One generated log: its text, file name, and the trainer step where the fault begins."""

    name: str
    kind: str
    text: str
    file: str
    fault: bool
    onset_step: int | None


# ------------------------------------------------------------------ the run underneath


def _lr(n: int, peak: float, warm: int) -> np.ndarray:
    k = np.arange(n)
    cos = 0.1 * peak + 0.45 * peak * (1 + np.cos(np.pi * np.clip(k - warm, 0, None) / max(1, n - warm)))
    return np.where(k < warm, peak * (k + 1) / warm, cos)


def _noise(rng: np.random.Generator, n: int, rel: float) -> np.ndarray:
    """Multiplicative per-batch noise with heavy tails (t with 3 dof, clipped at 6 sigma)."""
    return np.exp(rel * np.clip(rng.standard_t(3, n), -6, 6) / math.sqrt(3))


def base_run(rng: np.random.Generator, n: int, start: float, floor: float, rel: float = 0.03) -> Curve:
    """A sound run: LR warm-up (5% of the rows) then cosine; the loss falls from `start` towards
    `floor` (faster while the LR is high), with heavy-tailed noise; the grad norm falls from ~2 to ~0.5."""
    warm = max(3, n // 20)
    lr = _lr(n, float(rng.choice([1e-4, 3e-4, 6e-4])), warm)
    progress = np.cumsum(lr) / np.sum(lr)
    trend = floor + (start - floor) * np.exp(-6 * progress)
    gn = (0.5 + 1.5 * np.exp(-4 * progress)) * _noise(rng, n, 0.15)
    # a model at init predicts near-uniformly: its loss (ln V) barely varies from batch to batch;
    # the batch noise grows as the model starts to tell easy batches from hard ones
    spread = 0.2 + 0.8 * np.minimum(1.0, 4 * progress)
    return {
        "loss": trend * np.exp(spread * np.log(_noise(rng, n, rel))),
        "trend": trend,
        "lr": lr,
        "grad_norm": gn,
        "scale": np.full(n, 65536.0),
        "skipped": np.zeros(n),
    }


def _warm_end(n: int) -> int:
    return max(3, n // 20)


def _onset(rng: np.random.Generator, n: int) -> int:
    """An onset row well after warm-up and well before the end."""
    return int(rng.integers(max(_warm_end(n) + 10, n // 4), max(_warm_end(n) + 11, (3 * n) // 4)))


# ------------------------------------------------------------------ faults: curve -> onset row


def f_slow_divergence(rng, c: Curve) -> int:
    """After warm-up the loss turns up and keeps rising, slowly, under its noise (x2.5-4 by the
    end). Its onset is where the noiseless curve turns up (the falling trend meets the rising one:
    what the log can show), not where the rise was switched on."""
    n = c["loss"].size
    on = _onset(rng, n)
    rate = math.log(float(rng.uniform(2.5, 4.0))) / (n - on)
    up = np.exp(rate * np.arange(n - on))
    c["loss"][on:] *= up
    return on + int(np.argmin(c["trend"][on:] * up))


def f_spike_recovers(rng, c: Curve) -> int:
    """One logged point x5-20 its level, the next back at it."""
    on = _onset(rng, c["loss"].size)
    c["loss"][on] *= float(rng.uniform(5, 20))
    return on


def f_spike_stays(rng, c: Curve) -> int:
    """A jump of x4-8 that never comes back: the loss stays up, with its noise."""
    on = _onset(rng, c["loss"].size)
    c["loss"][on:] *= float(rng.uniform(4, 8))
    return on


def f_level_shift(rng, c: Curve) -> int:
    """The loss steps up x1.5-2.5 and stays on the new level (no sentence in the log says why)."""
    on = _onset(rng, c["loss"].size)
    c["loss"][on:] *= float(rng.uniform(1.5, 2.5))
    return on


def f_nan_after_grad(rng, c: Curve) -> int:
    """The grad norm grows x1.15 per step for 50 steps, then the loss is NaN to the end."""
    n = c["loss"].size
    on = max(_onset(rng, n), 60)
    c["grad_norm"][on - 50 : on] *= 1.15 ** np.arange(50)
    c["loss"][on:] = np.nan
    c["grad_norm"][on:] = np.nan
    return on


def f_nan_sudden(rng, c: Curve) -> int:
    """NaN out of the blue: nothing grew before it."""
    on = _onset(rng, c["loss"].size)
    c["loss"][on:] = np.nan
    return on


def f_scale_collapse(rng, c: Curve) -> int:
    """The fp16 loss scale halves at every step from 65536 down to below 1, each step skipped; the
    loss stops moving (no update is applied)."""
    n = c["loss"].size
    on = _onset(rng, n)
    k = np.arange(n - on)
    c["scale"][on:] = 65536.0 / 2.0 ** np.minimum(k + 1, 24)
    c["skipped"][on:] = 1.0
    c["loss"][on:] = c["loss"][on - 1] * _noise(rng, n - on, 0.01)
    return on


def f_chance_llm(rng, c: Curve) -> int:
    """An LLM's loss at ln V from the first point to the last (a vocabulary of 32000 .. 151936)."""
    v = int(rng.choice([32000, 50257, 128256, 151936]))
    c["loss"][:] = math.log(v) * _noise(rng, c["loss"].size, 0.002)
    return 0


def f_chance_classes(rng, c: Curve) -> int:
    """A K-class classifier stuck at ln K from the start."""
    k = int(rng.choice([10, 100, 1000]))
    c["loss"][:] = math.log(k) * _noise(rng, c["loss"].size, 0.003)
    return 0


def f_oscillation(rng, c: Curve) -> int:
    """After warm-up the loss swings x2-3 up and down every few rows and no longer falls."""
    n = c["loss"].size
    on = _onset(rng, n)
    period = int(rng.integers(4, 9))
    amp = math.log(float(rng.uniform(2.0, 3.0)))
    c["loss"][on:] = (
        c["loss"][on - 1]
        * np.exp(amp * (0.5 + 0.5 * np.sin(2 * np.pi * np.arange(n - on) / period)))
        * _noise(rng, n - on, 0.03)
    )
    return on


def f_zero(rng, c: Curve) -> int:
    """The loss is exactly 0 from some step on (an empty label mask, a bug in the loss): its
    gradient is exactly 0 too."""
    on = _onset(rng, c["loss"].size)
    c["loss"][on:] = 0.0
    c["grad_norm"][on:] = 0.0
    return on


def f_lr_zero(rng, c: Curve) -> int:
    """The LR is 0 from some step on (a scheduler bug): the loss stops falling and sits in its noise."""
    n = c["loss"].size
    on = _onset(rng, n)
    c["lr"][on:] = 0.0
    c["loss"][on:] = float(np.median(c["loss"][on - 5 : on])) * _noise(rng, n - on, 0.03)
    return on


def f_grad_jump(rng, c: Curve) -> int:
    """The grad norm jumps x100 and stays up while the loss holds its course."""
    on = _onset(rng, c["loss"].size)
    c["grad_norm"][on:] *= 100.0
    return on


#: fault -> (curve maker, the symptoms its first alarm at the onset may name)
FAULTS: dict[str, tuple[Callable[..., int], set[str]]] = {
    "slow_divergence": (f_slow_divergence, {"divergence"}),
    "spike_recovers": (f_spike_recovers, {"spike"}),
    "spike_stays": (f_spike_stays, {"divergence", "spike"}),
    "level_shift": (f_level_shift, {"divergence", "spike"}),
    "nan_after_grad": (f_nan_after_grad, {"nonfinite", "spike", "divergence"}),
    "nan_sudden": (f_nan_sudden, {"nonfinite"}),
    "scale_collapse": (f_scale_collapse, {"skipped_steps", "nonfinite", "stall"}),
    "chance_llm": (f_chance_llm, {"plateau"}),
    "chance_classes": (f_chance_classes, {"plateau"}),
    "oscillation": (f_oscillation, {"oscillation", "divergence", "spike"}),
    "zero_loss": (f_zero, {"zero_loss"}),
    "lr_zero": (f_lr_zero, {"stall", "plateau", "slow_convergence"}),
    "grad_jump": (f_grad_jump, {"spike", "divergence"}),
}


# ------------------------------------------------------------------ healthy look-alikes


def h_pretrain(rng, c: Curve) -> None:
    """A normal LLM pretrain: from ~11 down towards 2.5-3.5 (what base_run draws for it)."""


def h_finetune_low(rng, c: Curve) -> None:
    """A fine-tune starting low (0.8-1.5) and falling a little, with its batch noise."""
    n = c["loss"].size
    c["loss"][:] = float(rng.uniform(0.8, 1.5)) * np.linspace(1.0, 0.85, n) * _noise(rng, n, 0.08)


def h_sgdr(rng, c: Curve) -> None:
    """SGDR: the LR restarts to its peak every cycle; the loss bumps up a little (x1.1-1.2) at each
    restart and falls lower than before by the cycle's end."""
    n = c["loss"].size
    cycle = n // int(rng.integers(3, 5))
    k = np.arange(n)
    pos = k % cycle
    peak = float(np.max(c["lr"]))
    c["lr"][:] = 0.5 * peak * (1 + np.cos(np.pi * pos / cycle))
    trend = 3.0 * np.exp(-2.0 * k / n) + 1.0
    bump = 1.0 + float(rng.uniform(0.1, 0.2)) * np.exp(-pos / (0.1 * cycle)) * (k >= cycle)
    c["loss"][:] = trend * bump * _noise(rng, n, 0.03)


def h_label_smoothing(rng, c: Curve) -> None:
    """Label smoothing: the CE falls onto a floor well above 0 (1.5-2.5) and stays there, noisy."""
    n = c["loss"].size
    floor = float(rng.uniform(1.5, 2.5))
    c["loss"][:] = (floor + 3.0 * np.exp(-8 * np.arange(n) / n)) * _noise(rng, n, 0.02)


def h_curriculum(rng, c: Curve) -> int:
    """A sequence-length curriculum: at one step the length doubles, said in the log, and the loss
    steps up x1.15-1.3 (longer contexts) before falling on. Returns the row of the step up."""
    n = c["loss"].size
    on = _onset(rng, n)
    c["loss"][on:] *= float(rng.uniform(1.15, 1.3))
    return on


def h_gan(rng, c: Curve) -> None:
    """A GAN: the discriminator's loss swings around ln 4 / 2 and the generator's around 1-3, up and
    down by design, for the whole run (the format prints both, `D loss` and `G loss`)."""
    n = c["loss"].size
    k = np.arange(n)
    c["d_loss"] = 0.69 * np.exp(0.3 * np.sin(k * rng.uniform(0.05, 0.3))) * _noise(rng, n, 0.15)
    c["loss"][:] = (
        float(rng.uniform(1.0, 3.0)) * np.exp(0.4 * np.sin(k * rng.uniform(0.05, 0.3) + 1.0)) * _noise(rng, n, 0.15)
    )


def h_resumed(rng, c: Curve) -> None:
    """A resumed run: the format repeats a stretch of steps (written by `resume`)."""


#: healthy kind -> (curve maker, start, floor, noise)
HEALTHY: dict[str, tuple[Callable[..., object], float, float, float]] = {
    "pretrain": (h_pretrain, 11.0, 3.0, 0.03),
    "finetune_low": (h_finetune_low, 1.2, 0.9, 0.08),
    "sgdr": (h_sgdr, 4.0, 1.0, 0.03),
    "label_smoothing": (h_label_smoothing, 5.0, 2.0, 0.02),
    "curriculum": (h_curriculum, 11.0, 3.0, 0.03),
    "resumed": (h_resumed, 11.0, 3.0, 0.03),
    "gan": (h_gan, 1.0, 1.0, 0.1),
}


# ------------------------------------------------------------------ formats

Printer = Callable[[list[int], Curve, "np.random.Generator", dict[int, str]], str]


def _recent(c: Curve, k: int) -> float:
    """The median of the last few finite losses up to row k (what an eval near it would print)."""
    w = c["loss"][max(0, k - 5) : k + 1]
    w = w[np.isfinite(w)]
    return float(np.median(w)) if w.size else float("nan")


def _f(v: float, digits: int = 4) -> str:
    if not math.isfinite(v):
        return "nan" if math.isnan(v) else "inf"
    return f"{v:.{digits}f}"


def _hf(steps, c, rng, notes) -> str:
    """transformers' console: tqdm redraws (`\\r`), the log dict every step, an eval dict every 10%."""
    total, out = steps[-1], []
    every_eval = max(1, len(steps) // 10)
    for k, s in enumerate(steps):
        out.append(f"\r{100 * s // total:3d}%|#         | {s}/{total} [00:10<01:00,  5.00it/s]")
        if k in notes:
            out.append("\n" + notes[k] + "\n")
        d = {
            "loss": round(float(c["loss"][k]), 4),
            "grad_norm": round(float(c["grad_norm"][k]), 4),
            "learning_rate": float(f"{c['lr'][k]:.3e}"),
            "epoch": round(3.0 * (k + 1) / len(steps), 2),
        }
        out.append("\n" + repr(d).replace("nan", "nan") + "\n")
        if k % every_eval == every_eval - 1:
            ev = {"eval_loss": round(_recent(c, k) * 1.05, 4), "eval_runtime": 12.3, "epoch": d["epoch"]}
            out.append(repr(ev) + "\n")
    return "".join(out)


def _nanogpt(steps, c, rng, notes) -> str:
    """nanoGPT: `iter N: loss X, time ..ms, mfu ..%`, `step N: train loss X, val loss Y` every 10%."""
    out = []
    every_eval = max(1, len(steps) // 10)
    for k, s in enumerate(steps):
        if k in notes:
            out.append(notes[k] + "\n")
        if k % every_eval == 0:
            v = _recent(c, k)
            out.append(f"step {s}: train loss {_f(v)}, val loss {_f(v * 1.03)}\n")
        out.append(f"iter {s}: loss {_f(float(c['loss'][k]))}, time 120.50ms, mfu 38.12%\n")
    return "".join(out)


def _megatron(steps, c, rng, notes) -> str:
    """Megatron-LM's training_log line (loss scale, grad norm, skipped and nan counters per interval)."""
    out, total = [], steps[-1]
    for k, s in enumerate(steps):
        if k in notes:
            out.append(notes[k] + "\n")
        loss = float(c["loss"][k])
        lm = f"{loss:.6E}" if math.isfinite(loss) else "nan"
        nan_it = 0 if math.isfinite(loss) else 1
        out.append(
            f" iteration {s:8d}/{total:8d} | consumed samples: {s * 256:12d} | elapsed time per "
            f"iteration (ms): 500.1 | learning rate: {c['lr'][k]:.6E} | global batch size:   256 | "
            f"lm loss: {lm} | loss scale: {c['scale'][k]:.1f} | grad norm: {_f(float(c['grad_norm'][k]), 3)} | "
            f"number of skipped iterations: {int(c['skipped'][k]):3d} | number of nan iterations: {nan_it:3d} |\n"
        )
    return "".join(out)


def _lightning_csv(steps, c, rng, notes) -> str:
    """Lightning's CSVLogger metrics.csv: the LR monitor's row and the train row apart, val rows."""
    rows = ["epoch,lr-AdamW,step,train_loss,val_loss"]
    every_eval = max(1, len(steps) // 10)
    per_epoch = max(1, len(steps) // 5)
    for k, s in enumerate(steps):
        e = k // per_epoch
        rows.append(f"{e},{c['lr'][k]:.6g},{s},,")
        rows.append(f"{e},,{s},{_f(float(c['loss'][k]), 6)},")
        if k % every_eval == every_eval - 1:
            rows.append(f"{e},,{s},,{_f(_recent(c, k) * 1.04, 6)}")
    return "\n".join(rows) + "\n"


def _pipes(steps, c, rng, notes) -> str:
    """A small project's print: `step 10 | loss 2.3102 | lr 3.00e-04 | grad_norm 1.234`."""
    out = []
    for k, s in enumerate(steps):
        if k in notes:
            out.append(notes[k] + "\n")
        out.append(
            f"step {s} | loss {_f(float(c['loss'][k]))} | lr {c['lr'][k]:.2e} | "
            f"grad_norm {_f(float(c['grad_norm'][k]), 3)}\n"
        )
    return "".join(out)


def _jsonl(steps, c, rng, notes) -> str:
    """One JSON object per step (loss, lr, grad_norm, the loss scale), an eval object every 10%."""
    out = []
    every_eval = max(1, len(steps) // 10)
    for k, s in enumerate(steps):
        loss = float(c["loss"][k])
        rec = {
            "step": s,
            "loss": round(loss, 5) if math.isfinite(loss) else "NaN",
            "lr": float(f"{c['lr'][k]:.4e}"),
            "grad_norm": round(float(c["grad_norm"][k]), 4),
            "loss_scale": float(c["scale"][k]),
        }
        if k in notes:
            rec["note"] = notes[k]
        out.append(json.dumps(rec).replace('"NaN"', "NaN") + "\n")
        if k % every_eval == every_eval - 1:
            out.append(json.dumps({"step": s, "eval_loss": round(_recent(c, k), 5)}) + "\n")
    return "".join(out)


def _pipes_gan(steps, c, rng, notes) -> str:
    """A GAN's own print: `step 10 | loss_D 0.6812 | loss_G 1.2345`."""
    return "".join(f"step {s} | loss_D {c['d_loss'][k]:.4f} | loss_G {c['loss'][k]:.4f}\n" for k, s in enumerate(steps))


def _gan(steps, c, rng, notes) -> str:
    """PyTorch-GAN's print: `[Epoch 3/200] [Batch 120/938] [D loss: 0.6812] [G loss: 1.2345]`."""
    per = 938
    return "".join(
        f"[Epoch {s // per}/200] [Batch {s % per}/{per}] [D loss: {c['d_loss'][k]:.6f}] [G loss: {c['loss'][k]:.6f}]\n"
        for k, s in enumerate(steps)
    )


#: formats of the run kinds that print their own series (not drawn for the other kinds)
OWN_FORMATS = ("gan", "pipes_gan")
FORMATS: dict[str, tuple[Printer, str]] = {
    "hf": (_hf, "train.log"),
    "nanogpt": (_nanogpt, "train.log"),
    "megatron": (_megatron, "train.log"),
    "lightning": (_lightning_csv, "metrics.csv"),
    "pipes": (_pipes, "train.log"),
    "jsonl": (_jsonl, "metrics.jsonl"),
    "gan": (_gan, "train.log"),
    "pipes_gan": (_pipes_gan, "train.log"),
}
#: formats that print the loss scale and skipped steps (the scale collapse needs one)
SCALE_FORMATS = ("megatron", "jsonl")
#: formats that print a grad norm
GRAD_FORMATS = ("hf", "megatron", "pipes", "jsonl")
#: formats that print the LR
LR_FORMATS = ("hf", "megatron", "lightning", "pipes", "jsonl")
#: formats that print a sentence between the rows (the curriculum's note, a resume line)
NOTE_FORMATS = ("hf", "nanogpt", "megatron", "pipes")


def formats_for(kind: str) -> tuple[str, ...]:
    if kind == "scale_collapse":
        return SCALE_FORMATS
    if kind in ("grad_jump", "nan_after_grad"):
        return GRAD_FORMATS
    if kind == "lr_zero":
        return LR_FORMATS
    if kind in ("curriculum", "resumed"):
        return NOTE_FORMATS
    if kind == "gan":
        return ("gan", "pipes_gan")
    return tuple(f for f in FORMATS if f not in OWN_FORMATS)


def _resume(steps: list[int], c: Curve, rng, notes: dict[int, str]) -> tuple[list[int], Curve]:
    """Cut the log at a row, go back to a checkpoint 5-15% of the rows earlier, and log that
    range again (same steps, a fresh draw of the same noise): what a resumed run's log holds."""
    n = len(steps)
    cut = int(rng.integers(n // 3, (2 * n) // 3))
    back = int(rng.integers(max(2, n // 20), max(3, n // 7)))
    idx = list(range(cut)) + list(range(cut - back, n))
    new = {k: v[idx].copy() for k, v in c.items()}
    new["loss"][cut:] *= _noise(rng, len(idx) - cut, 0.02)
    notes[cut] = f"Resuming training from checkpoint-{steps[cut - back - 1]} (global step {steps[cut - back - 1]})"
    return [steps[i] for i in idx], new


def _steps(rng: np.random.Generator, n: int) -> list[int]:
    every = int(rng.choice([1, 10, 50]))
    return [every * (k + 1) for k in range(n)]


def _length(rng: np.random.Generator, lo: int, hi: int) -> int:
    """A length drawn log-uniformly in [lo, hi]."""
    return int(round(math.exp(rng.uniform(math.log(lo), math.log(hi)))))


def faulty_cases(seed: int, per: int = 1, lo: int = 100, hi: int = 5000) -> list[LongCase]:
    rng = np.random.default_rng(seed)
    out = []
    for kind, (fn, _) in FAULTS.items():
        for fmt in formats_for(kind):
            for k in range(per):
                n = _length(rng, lo, hi)
                c = base_run(
                    rng, n, float(rng.uniform(6.0, 11.0)), float(rng.uniform(1.5, 3.5)), float(rng.uniform(0.02, 0.08))
                )
                on = int(fn(rng, c))
                steps = _steps(rng, n)
                printer, file = FORMATS[fmt]
                out.append(
                    LongCase(f"{kind}-{fmt}-{seed}-{k}-n{n}", kind, printer(steps, c, rng, {}), file, True, steps[on])
                )
    return out


def healthy_cases(seed: int, per: int = 1, lo: int = 100, hi: int = 5000) -> list[LongCase]:
    rng = np.random.default_rng(seed + 1000)
    out = []
    for kind, (fn, start, floor, rel) in HEALTHY.items():
        for fmt in formats_for(kind):
            for k in range(per):
                n = _length(rng, lo, hi)
                c = base_run(rng, n, start, floor, rel * float(rng.uniform(0.7, 2.5)))
                on = fn(rng, c)
                steps = _steps(rng, n)
                notes: dict[int, str] = {}
                if kind == "curriculum" and isinstance(on, int):
                    notes[on] = f"curriculum: increasing sequence length from 512 to 1024 at step {steps[on]}"
                if kind == "resumed":
                    steps, c = _resume(steps, c, rng, notes)
                printer, file = FORMATS[fmt]
                out.append(
                    LongCase(
                        f"healthy_{kind}-{fmt}-{seed}-{k}-n{n}", kind, printer(steps, c, rng, notes), file, False, None
                    )
                )
    return out
