"""Healthy training logs of the shapes that look like a too-high LR or a divergence to a rule that
reads the curve alone, printed the way common trainers print them, for tests/test_lr_advice.py.

Every one of them is a run that trains: a user who lowers its LR because a tool said so slows a
good run. The shapes are what sound runs show in real logs (issue 25's healthy threads and the
trainers' documented behaviour):

- the first steps rise while the LR warms up (a fine-tune's loss climbs x1.1-2 over its first
  updates, then falls below its start), and a paste of those first steps that ends at the bump;
- a loss printed as a running mean: an exponential moving average started at 0 without its bias
  correction climbs from ~0 to the loss over its first prints; an epoch's mean so far restarts at
  every epoch;
- single small-batch losses: heavy-tailed, with the odd x4-x8 hard batch;
- reinforcement-learning losses: a policy loss around 0 of either sign, GRPO's loss of exactly 0
  (importance ratio 1, centred advantages) with a gradient that is not 0, GRPO's beta x KL that
  starts at exactly 0 and grows as the policy leaves its reference;
- LR restarts (SGDR), a resume without the optimizer's state, staged LRs (step decays, a second
  stage at a higher LR), a curriculum or data-mix change (a step up, then the loss falls again);
- a validation loss read as the training loss (it falls, then creeps up as the model overfits);
- a VAE whose KL weight is annealed from 0 (the total rises while the weight grows);
- an excerpt from the middle of a run (no step printed, or epochs far from the first), and one of a
  fine-tune that has fit its data (a loss near 0.001-0.01 whose hard batches jump x50-x300).

A case is reproducible from its name (shape, format, seed, index).
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

Curve = dict[str, np.ndarray]


@dataclass(frozen=True)
class Shape:
    """One drawn healthy run: its columns, its trainer steps, and the epoch its first line is in."""

    curve: Curve
    steps: list[int]
    first_epoch: float = 0.0
    epochs: bool = False  # one point per epoch


@dataclass(frozen=True)
class HealthyCase:
    name: str
    shape: str
    fmt: str
    text: str
    file: str


def _noise(rng: np.random.Generator, n: int, rel: float) -> np.ndarray:
    return np.exp(rel * rng.standard_normal(n))


def _heavy(rng: np.random.Generator, n: int, rel: float) -> np.ndarray:
    """Heavy-tailed multiplicative noise (Student's t, 3 dof, clipped at 6 sigma)."""
    return np.exp(rel * np.clip(rng.standard_t(3, n), -6, 6) / math.sqrt(3))


def _decay(n: int, start: float, floor: float, speed: float = 3.0) -> np.ndarray:
    t = np.arange(n) / max(1, n - 1)
    return floor + (start - floor) * np.exp(-speed * t)


def _warmup_lr(rng: np.random.Generator, n: int, warm: int) -> np.ndarray:
    peak = float(rng.choice([2e-5, 5e-5, 1e-4, 3e-4, 1e-3]))
    k = np.arange(n)
    after = 0.1 * peak + 0.9 * peak * 0.5 * (1 + np.cos(np.pi * np.clip(k - warm, 0, None) / max(1, n - warm)))
    return np.where(k < warm, peak * (k + 1) / warm, after)


def _steps(rng: np.random.Generator, n: int, first: int | None = None) -> list[int]:
    every = int(rng.choice([1, 5, 10, 50]))
    s0 = every if first is None else first
    return [s0 + every * k for k in range(n)]


def _grad(rng: np.random.Generator, loss: np.ndarray, scale: float = 1.0) -> np.ndarray:
    """A gradient norm that follows the loss's level loosely, with its own noise."""
    rel = loss / max(float(np.median(np.abs(loss))), 1e-9)
    return scale * np.clip(np.abs(rel), 0.2, 5.0) ** 0.5 * _noise(rng, loss.size, 0.15)


def _curve(loss: np.ndarray, lr: np.ndarray, gn: np.ndarray) -> Curve:
    return {"loss": loss, "lr": lr, "grad_norm": gn}


# ------------------------------------------------------------------ shapes


def s_warmup_bump(rng: np.random.Generator, n: int) -> Shape:
    """The loss climbs x1.1-2 over the warm-up's first updates (a fine-tune meeting its new data at a
    rising LR), or a few percent (an LLM starting near ln V), peaks by the warm-up's end, then falls
    well below where it started. The gradient norm rises with the bump."""
    warm = max(2, int(n * rng.uniform(0.05, 0.2)))
    lr = _warmup_lr(rng, n, warm)
    llm = bool(rng.random() < 0.5)
    start = float(rng.uniform(6.0, 11.0) if llm else rng.uniform(0.6, 3.0))
    k = np.arange(n)
    peak_at = max(1, int(warm * rng.uniform(0.5, 1.5)))
    # an LLM's first loss is near ln V already: its first updates raise it by a few percent only
    b = float(rng.uniform(1.02, 1.15) if llm else rng.uniform(1.1, 2.0))
    bump = 1 + (b - 1) * np.exp(-(((k - peak_at) / max(1.0, 0.6 * peak_at)) ** 2))
    trend = _decay(n, 1.0, float(rng.uniform(0.2, 0.6)), speed=float(rng.uniform(2.0, 5.0)))
    trend = np.where(k <= peak_at, 1.0, trend / trend[min(peak_at, n - 1)])
    loss = start * bump * trend * _noise(rng, n, float(rng.uniform(0.01, 0.05)))
    loss[0] = start
    return Shape(_curve(loss, lr, _grad(rng, bump * trend, float(rng.uniform(0.5, 3.0)))), _steps(rng, n, first=1))


def s_warmup_start(rng: np.random.Generator, n: int) -> Shape:
    """The first 5-30 logged steps of such a run, pasted before the loss came back down: it rises
    x1.1-1.8 over the warm-up's first updates while the LR climbs, and the log ends at or just
    after the top of the bump."""
    total = n + int(rng.integers(0, 3))
    lr = _warmup_lr(rng, total, max(total, 10))[:n]
    start = float(rng.uniform(0.6, 3.0))
    b = float(rng.uniform(1.1, 1.8))
    k = np.arange(n)
    loss = (
        start
        * (1 + (b - 1) * np.sin(0.5 * np.pi * np.clip(k / max(1, n - 2), 0, 1)))
        * _noise(rng, n, float(rng.uniform(0.005, 0.03)))
    )
    loss[0] = start
    return Shape(_curve(loss, lr, _grad(rng, loss, float(rng.uniform(0.5, 3.0)))), _steps(rng, n, first=1))


def s_ema_from_zero(rng: np.random.Generator, n: int) -> Shape:
    """A hand-written loop's smoothed loss: `avg = 0.98 * avg + 0.02 * loss` from avg = 0 with no
    bias correction, printed every few steps: it climbs from near 0 to the loss over its first
    prints, then falls with it."""
    every = int(rng.choice([5, 10, 20]))
    beta = float(rng.choice([0.9, 0.95, 0.98, 0.99]))
    raw = _decay(n * every, float(rng.uniform(1.0, 5.0)), float(rng.uniform(0.1, 0.8))) * _noise(rng, n * every, 0.2)
    avg, out = 0.0, []
    for v in raw:
        avg = beta * avg + (1 - beta) * v
        out.append(avg)
    loss = np.array(out)[every - 1 :: every]
    lr = np.full(n, float(rng.choice([1e-4, 3e-4, 1e-3])))
    return Shape(_curve(loss, lr, _grad(rng, raw[every - 1 :: every])), [every * (k + 1) for k in range(n)])


def s_epoch_running_mean(rng: np.random.Generator, n: int) -> Shape:
    """A progress bar's mean of the epoch so far, printed every m batches and restarted at every
    epoch: the first print of an epoch is the mean of a few noisy batches."""
    m = int(rng.integers(3, 8))  # prints per epoch
    per = int(rng.choice([5, 20, 50]))  # batches between prints
    epochs = max(2, -(-n // m))
    raw = _decay(epochs * m * per, float(rng.uniform(1.0, 3.0)), float(rng.uniform(0.1, 0.5))) * _heavy(
        rng, epochs * m * per, 0.4
    )
    out = []
    for e in range(epochs):
        b = raw[e * m * per : (e + 1) * m * per]
        out.extend((np.cumsum(b) / np.arange(1, b.size + 1))[per - 1 :: per])
    loss = np.array(out[:n])
    lr = np.full(loss.size, 1e-3)
    return Shape(_curve(loss, lr, _grad(rng, loss)), [per * (k + 1) for k in range(loss.size)])


def s_small_batches(rng: np.random.Generator, n: int) -> Shape:
    """Single-batch losses of a small batch (1-8 samples): heavy-tailed noise of 30-70% around a
    slowly falling level, and the odd hard batch at x4-x8."""
    loss = _decay(n, float(rng.uniform(0.5, 3.0)), float(rng.uniform(0.2, 0.4)) * 2.0) * _heavy(
        rng, n, float(rng.uniform(0.3, 0.7))
    )
    hard = rng.random(n) < 0.03
    loss[hard] *= rng.uniform(4.0, 8.0, int(hard.sum()))
    loss = np.minimum(loss, 12.0)  # a batch's mean cross-entropy stays under ln V
    lr = np.full(n, float(rng.choice([1e-4, 1e-3, 1e-2])))
    return Shape(_curve(loss, lr, _grad(rng, loss)), _steps(rng, n))


def s_policy_signed(rng: np.random.Generator, n: int) -> Shape:
    """A PPO/GRPO policy loss: a surrogate objective around 0 of either sign (or mostly negative),
    that does not fall as a loss does."""
    centre = float(rng.choice([0.0, -0.02, -0.1, 0.01]))
    loss = centre + float(rng.uniform(0.005, 0.05)) * rng.standard_normal(n)
    lr = np.full(n, float(rng.choice([1e-6, 3e-6, 1e-5])))
    gn = float(rng.uniform(0.05, 2.0)) * _noise(rng, n, 0.3)
    return Shape(_curve(loss, lr, gn), _steps(rng, n))


def s_grpo_zero(rng: np.random.Generator, n: int) -> Shape:
    """GRPO with one iteration per batch and beta = 0: the logged loss is exactly 0 (the importance
    ratio is 1 and the advantages are centred) while its gradient is not, so grad_norm is not 0."""
    lr = np.linspace(7e-6, 6e-6, n)
    gn = float(rng.uniform(0.03, 0.5)) * _noise(rng, n, 0.15)
    return Shape(_curve(np.zeros(n), lr, gn), _steps(rng, n))


def s_grpo_kl(rng: np.random.Generator, n: int) -> Shape:
    """GRPO with beta > 0: the loss is beta x the KL to the reference, exactly 0 at the first step (the
    policy is the reference) and growing as the policy moves away; the objective, not an error."""
    beta = float(rng.choice([0.01, 0.04, 0.1]))
    k = np.arange(n)
    kl = float(rng.uniform(0.02, 0.3)) * (1 - np.exp(-k / max(2.0, n * rng.uniform(0.2, 0.6)))) * _noise(rng, n, 0.1)
    loss = np.round(beta * kl, 4)
    lr = np.full(n, 1e-6)
    gn = float(rng.uniform(0.05, 0.5)) * _noise(rng, n, 0.2)
    return Shape(_curve(loss, lr, gn), _steps(rng, n, first=1))


def s_sgdr(rng: np.random.Generator, n: int) -> Shape:
    """Warm restarts: the LR jumps back to its peak every cycle and the loss bumps up x1.1-1.5 for a
    while, then falls lower than before by the cycle's end."""
    cycles = int(rng.integers(2, 5))
    cycle = max(3, n // cycles)
    k = np.arange(n)
    pos = k % cycle
    peak = float(rng.choice([1e-3, 3e-3, 1e-1]))
    lr = 0.5 * peak * (1 + np.cos(np.pi * pos / cycle))
    bump = 1 + float(rng.uniform(0.1, 0.5)) * np.exp(-pos / max(1.0, 0.15 * cycle)) * (k >= cycle)
    loss = (
        _decay(n, float(rng.uniform(1.5, 4.0)), float(rng.uniform(0.2, 0.6)))
        * bump
        * _noise(rng, n, float(rng.uniform(0.01, 0.04)))
    )
    return Shape(_curve(loss, lr, _grad(rng, loss)), _steps(rng, n))


def s_resume_fresh_optimizer(rng: np.random.Generator, n: int) -> Shape:
    """A run resumed from a checkpoint without its optimizer's state: Adam's moments start again, the
    loss jumps x1.3-2.5 for a few steps and comes back within 5-20% of the log."""
    at = int(n * rng.uniform(0.3, 0.7))
    k = np.arange(n)
    width = max(1.0, n * rng.uniform(0.03, 0.1))
    bump = 1 + float(rng.uniform(0.3, 1.5)) * np.exp(-np.clip(k - at, 0, None) / width) * (k >= at)
    loss = (
        _decay(n, float(rng.uniform(1.5, 4.0)), float(rng.uniform(0.3, 0.8)))
        * bump
        * _noise(rng, n, float(rng.uniform(0.01, 0.05)))
    )
    lr = np.full(n, float(rng.choice([1e-4, 3e-4])))
    return Shape(_curve(loss, lr, _grad(rng, loss)), _steps(rng, n))


def s_staged_lr(rng: np.random.Generator, n: int) -> Shape:
    """Staged LRs: step decays (x0.1 at fixed epochs: the loss drops at each), or a second stage at a
    higher LR (an unfrozen backbone: the loss bumps x1.1-1.4, then falls on)."""
    k = np.arange(n)
    base = float(rng.choice([1e-3, 1e-2, 1e-1]))
    loss = _decay(n, float(rng.uniform(1.0, 3.0)), float(rng.uniform(0.3, 0.7)))
    if rng.random() < 0.5:
        cuts = sorted(rng.choice(np.arange(n // 4, n - 2), size=2, replace=False))
        lr = base * np.where(k < cuts[0], 1.0, np.where(k < cuts[1], 0.1, 0.01))
        for c in cuts:
            loss[c:] *= float(rng.uniform(0.7, 0.9))
    else:
        at = int(n * rng.uniform(0.3, 0.6))
        lr = np.where(k < at, base * 0.1, base)
        loss = loss * (
            1 + float(rng.uniform(0.1, 0.4)) * np.exp(-np.clip(k - at, 0, None) / max(1.0, 0.1 * n)) * (k >= at)
        )
    loss = loss * _noise(rng, n, float(rng.uniform(0.01, 0.04)))
    return Shape(_curve(loss, lr, _grad(rng, loss)), _steps(rng, n))


def s_curriculum(rng: np.random.Generator, n: int) -> Shape:
    """A curriculum or data-mix change: at one step the data gets harder (longer sequences, a new
    source) and the loss steps up x1.2-1.8, then falls again at the new level."""
    at = int(n * rng.uniform(0.3, 0.7))
    k = np.arange(n)
    loss = _decay(n, float(rng.uniform(3.0, 8.0)), float(rng.uniform(1.0, 2.0)))
    up = float(rng.uniform(1.2, 1.8))
    after = up * loss[at] * (0.6 + 0.4 * np.exp(-3.0 * (k - at) / max(1, n - at)))
    loss = np.where(k < at, loss, np.maximum(after, loss)) * _noise(rng, n, float(rng.uniform(0.01, 0.04)))
    lr = np.full(n, float(rng.choice([1e-4, 3e-4, 6e-4])))
    return Shape(_curve(loss, lr, _grad(rng, loss)), _steps(rng, n))


def s_eval_overfit(rng: np.random.Generator, n: int) -> Shape:
    """A validation loss read as the training loss, one point per epoch: it falls, bottoms out at
    30-60% of the run, and creeps up x1.1-1.5 by the end as the model overfits (a smooth curve: it is
    measured on the same held-out set every epoch)."""
    k = np.arange(n)
    bottom = max(2, int(n * rng.uniform(0.3, 0.6)))
    low = float(rng.uniform(0.2, 1.0))
    start = low * float(rng.uniform(2.0, 4.0))
    rise = float(rng.uniform(1.1, 1.5))
    fall = low + (start - low) * (1 - k / bottom) ** 2
    up = low * (1 + (rise - 1) * (np.clip(k - bottom, 0, None) / max(1, n - 1 - bottom)) ** 1.3)
    loss = np.where(k <= bottom, fall, up) * _noise(rng, n, 0.005)
    lr = np.full(n, 1e-3)
    return Shape(_curve(loss, lr, _grad(rng, loss)), list(range(1, n + 1)), epochs=True)


def s_kl_anneal(rng: np.random.Generator, n: int) -> Shape:
    """A VAE whose KL weight is annealed from 0 to 1 over the first 20-40% of the run: the
    reconstruction falls while the weighted KL grows, the total rises x1.2-1.8, then falls slowly."""
    k = np.arange(n)
    ramp = max(2, int(n * rng.uniform(0.2, 0.4)))
    w = np.clip(k / ramp, 0, 1)
    recon = _decay(n, float(rng.uniform(1.0, 2.0)), float(rng.uniform(0.3, 0.5)), speed=5.0)
    kl = float(rng.uniform(0.5, 1.2)) * _decay(n, 1.0, 0.6, speed=1.5)
    loss = (recon + w * kl) * _noise(rng, n, 0.01)
    lr = np.full(n, 1e-3)
    return Shape(_curve(loss, lr, _grad(rng, loss)), _steps(rng, n))


def s_converged_near_zero(rng: np.random.Generator, n: int) -> Shape:
    """A fine-tune that has fit its data: the loss sits at 1e-3 to 1e-2 and the odd hard batch
    throws x50-x300 (0.1-1), which the next batch does not repeat."""
    level = float(10 ** rng.uniform(-3, -2))
    loss = level * _heavy(rng, n, 0.3)
    hard = rng.random(n) < 0.05
    hard[int(rng.integers(1, n))] = True
    loss[hard] *= rng.uniform(50.0, 300.0, int(hard.sum()))
    lr = np.full(n, float(rng.choice([1e-5, 2e-5, 1e-4])))
    return Shape(
        _curve(loss, lr, _grad(rng, loss)),
        _steps(rng, n, first=int(rng.choice([500, 3000]))),
        first_epoch=float(rng.uniform(1.0, 5.0)),
    )


def s_excerpt(rng: np.random.Generator, n: int) -> Shape:
    """An excerpt from the middle of a long run: a loss near its floor, batch noise of 3-15%, falling
    a little or not at all; its first printed step far from the run's start (or, when the format
    prints none, the lines numbered from 1 and the epoch already past 1)."""
    level = float(rng.uniform(0.3, 3.0))
    loss = level * np.linspace(1.0, float(rng.uniform(0.9, 1.0)), n) * _heavy(rng, n, float(rng.uniform(0.03, 0.15)))
    lr = np.full(n, float(rng.choice([1e-5, 1e-4, 3e-4])))
    first = int(rng.choice([1500, 12000, 250000]))
    return Shape(
        _curve(loss, lr, _grad(rng, loss)), _steps(rng, n, first=first), first_epoch=float(rng.uniform(1.5, 20.0))
    )


#: shape -> (maker, fewest points, most points)
SHAPES: dict[str, tuple[Callable[[np.random.Generator, int], Shape], int, int]] = {
    "warmup_bump": (s_warmup_bump, 8, 400),
    "warmup_start": (s_warmup_start, 5, 30),
    "ema_from_zero": (s_ema_from_zero, 10, 300),
    "epoch_running_mean": (s_epoch_running_mean, 10, 200),
    "small_batches": (s_small_batches, 10, 400),
    "policy_signed": (s_policy_signed, 5, 200),
    "grpo_zero": (s_grpo_zero, 3, 60),
    "grpo_kl": (s_grpo_kl, 5, 200),
    "sgdr": (s_sgdr, 30, 600),
    "resume_fresh_optimizer": (s_resume_fresh_optimizer, 40, 600),
    "staged_lr": (s_staged_lr, 30, 400),
    "curriculum": (s_curriculum, 30, 600),
    "eval_overfit": (s_eval_overfit, 8, 80),
    "kl_anneal": (s_kl_anneal, 20, 400),
    "excerpt": (s_excerpt, 5, 200),
    "converged_near_zero": (s_converged_near_zero, 10, 300),
}


# ------------------------------------------------------------------ formats


def _f(v: float, digits: int = 4) -> str:
    if not math.isfinite(v):
        return "nan"
    return f"{v:.{digits}f}" if abs(v) >= 10**-digits or v == 0 else f"{v:.4e}"


def p_hf(sh: Shape) -> str:
    """transformers' PrinterCallback: the log dict, no step; the epoch goes on from `first_epoch`."""
    c, n = sh.curve, len(sh.steps)
    span = float(max(1.0, 3.0 * n / 100))
    return "".join(
        repr(
            {
                "loss": round(float(c["loss"][k]), 4),
                "grad_norm": round(float(c["grad_norm"][k]), 4),
                "learning_rate": float(f"{c['lr'][k]:.4e}"),
                "epoch": round(sh.first_epoch + span * (k + 1) / n, 2),
            }
        )
        + "\n"
        for k in range(n)
    )


def p_pipes(sh: Shape) -> str:
    c = sh.curve
    return "".join(
        f"step {s} | loss {_f(float(c['loss'][k]))} | lr {c['lr'][k]:.2e} | "
        f"grad_norm {_f(float(c['grad_norm'][k]), 3)}\n"
        for k, s in enumerate(sh.steps)
    )


def p_jsonl(sh: Shape) -> str:
    c = sh.curve
    return "".join(
        json.dumps({"step": s, "loss": round(float(c["loss"][k]), 6), "lr": float(f"{c['lr'][k]:.4e}")}) + "\n"
        for k, s in enumerate(sh.steps)
    )


def p_nanogpt(sh: Shape) -> str:
    c = sh.curve
    return "".join(
        f"iter {s}: loss {_f(float(c['loss'][k]))}, time 120.50ms, mfu 38.12%\n" for k, s in enumerate(sh.steps)
    )


def p_epoch(sh: Shape) -> str:
    """`print(f"epoch {epoch} loss = {loss}")`, from the epoch the excerpt starts in."""
    e0 = int(sh.first_epoch) + 1
    return "".join(f"epoch {e0 + k} loss = {float(v):.6g}\n" for k, v in enumerate(sh.curve["loss"]))


def p_keras(sh: Shape) -> str:
    """Keras' progbar at verbose=2, one line per epoch."""
    n = len(sh.steps)
    e0 = int(sh.first_epoch)
    return "".join(
        f"Epoch {e0 + k + 1}/{e0 + n}\n100/100 - 2s - 15ms/step - loss: {_f(float(v))}\n"
        for k, v in enumerate(sh.curve["loss"])
    )


def p_bare(sh: Shape) -> str:
    """A bare `print("train loss:", loss)` per logged step: no step, no epoch."""
    return "".join(f"train loss: {float(v):.5f}\n" for v in sh.curve["loss"])


#: format -> (printer, file name)
FORMATS: dict[str, tuple[Callable[[Shape], str], str]] = {
    "hf": (p_hf, "train.log"),
    "pipes": (p_pipes, "train.log"),
    "jsonl": (p_jsonl, "metrics.jsonl"),
    "nanogpt": (p_nanogpt, "train.log"),
    "epoch": (p_epoch, "train.log"),
    "keras": (p_keras, "train.log"),
    "bare": (p_bare, "train.log"),
}
#: the formats of a shape whose points are epochs
EPOCH_FORMATS = ("epoch", "keras")
STEP_FORMATS = ("hf", "pipes", "jsonl", "nanogpt", "bare")
#: shapes printed in the epoch formats too (a short log of them reads alike per epoch)
BOTH = ("warmup_bump", "small_batches", "excerpt", "kl_anneal")
#: shapes only a trainer's dict prints as they are (GRPO's zero with its grad norm)
HF_ONLY = ("grpo_zero", "grpo_kl")


def formats_for(shape: str) -> tuple[str, ...]:
    if shape in HF_ONLY:
        return ("hf", "pipes")
    if shape == "eval_overfit":
        return EPOCH_FORMATS
    return STEP_FORMATS + (EPOCH_FORMATS if shape in BOTH else ())


def _length(rng: np.random.Generator, lo: int, hi: int) -> int:
    return int(round(math.exp(rng.uniform(math.log(lo), math.log(hi)))))


def healthy_cases(seed: int, per: int = 2, only: tuple[str, ...] | None = None) -> list[HealthyCase]:
    """`per` cases of every shape in each of its formats, lengths drawn log-uniformly in its range."""
    rng = np.random.default_rng(seed + 7000)
    out = []
    for shape, (fn, lo, hi) in SHAPES.items():
        for fmt in formats_for(shape):
            for k in range(per):
                n = _length(rng, lo, hi)
                sh = fn(rng, n)
                if only is not None and shape not in only:
                    continue
                printer, file = FORMATS[fmt]
                out.append(HealthyCase(f"{shape}-{fmt}-{seed}-{k}-n{n}", shape, fmt, printer(sh), file))
    return out
