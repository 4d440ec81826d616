"""Short training logs (1-30 points), faulty and healthy, printed the way common trainers print
them, for the symptom tests (tests/test_short_logs.py).

A curve is a list of losses (and what else the format prints); a format turns it into the text a
console shows. Every curve is drawn from a seeded generator, so a case is reproducible by its name
and seed. The faulty curves carry the shapes real short logs show (issue 25): a loss that triples
over two logged intervals, one that goes from 1.1 to 5e26, a NaN after one finite point, a loss
flat at ln K, exactly 0 or exactly constant, >= 1e6, a monotonic rise over four points, an
epoch-level log that does not fall, a loss that moves and then prints one value to the last digit. The healthy ones are what a short log of a sound run looks
like: a few epochs of a falling loss, noisy per-batch losses, a dip and a recovery of a few
percent, a fine-tune that starts low and stays flat-ish with noise, a GAN's oscillating component
losses, an RL run's policy loss around 0, a progress bar's running mean that settles below its
print's last digit, single-batch losses with two hard batches at x4.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

Curve = dict[str, list[float]]


@dataclass(frozen=True)
class Case:
    """One generated log: its text, where the fault begins (the logged row; None when healthy)."""

    name: str
    text: str
    fault: str | None
    onset_row: int | None
    steps: list[int] = field(default_factory=list)
    file: str = "train.log"


# ------------------------------------------------------------------ formats (what a console prints)


def _hf_dicts(steps: list[int], c: Curve, epochs: bool) -> str:
    """transformers' PrinterCallback: `print(logs)` of the Trainer's log dict (steps not printed)."""
    n = len(steps)
    return "".join(
        f"{{'loss': {_num(v)}, 'grad_norm': {g:.4f}, 'learning_rate': {lr:.3e}, 'epoch': {e:.2f}}}\n"
        for v, g, lr, e in zip(
            c["loss"], c["grad_norm"], c["lr"], [(k + 1) * (1.0 if epochs else 3.0 / n) for k in range(n)]
        )
    )


def _nanogpt(steps: list[int], c: Curve, epochs: bool) -> str:
    """nanoGPT's train.py: `iter {iter_num}: loss {lossf:.4f}, time {dt*1000:.2f}ms, mfu ...`."""
    return "".join(f"iter {s}: loss {_num(v, 4)}, time 120.50ms, mfu 38.12%\n" for s, v in zip(steps, c["loss"]))


def _pipes(steps: list[int], c: Curve, epochs: bool) -> str:
    """A small project's print: `step 10 | loss 2.3102 | lr 3.00e-04 | grad_norm 1.234`."""
    return "".join(
        f"step {s} | loss {_num(v, 4)} | lr {lr:.2e} | grad_norm {g:.3f}\n"
        for s, v, lr, g in zip(steps, c["loss"], c["lr"], c["grad_norm"])
    )


def _plain_epoch(steps: list[int], c: Curve, epochs: bool) -> str:
    """`print(f"epoch {epoch} loss = {loss}")`: one line per epoch."""
    return "".join(f"epoch {k + 1} loss = {_num(v)}\n" for k, v in enumerate(c["loss"]))


def _plain_epoch_mid(steps: list[int], c: Curve, epochs: bool) -> str:
    """The same print, pasted from the middle of a long run (epoch 91 on)."""
    return "".join(f"epoch {k + 91} loss = {_num(v)}\n" for k, v in enumerate(c["loss"]))


def _keras(steps: list[int], c: Curve, epochs: bool) -> str:
    """Keras' progbar at verbose=2: `Epoch 1/10` then `100/100 - 2s - 15ms/step - loss: 0.4123`."""
    n = len(steps)
    return "".join(
        f"Epoch {k + 1}/{n}\n100/100 - 2s - 15ms/step - loss: {_num(v, 4)}\n" for k, v in enumerate(c["loss"])
    )


def _jsonl(steps: list[int], c: Curve, epochs: bool) -> str:
    """One JSON object per logged step."""
    return "".join(
        f'{{"step": {s}, "loss": {_json(v)}, "lr": {lr:.3e}}}\n' for s, v, lr in zip(steps, c["loss"], c["lr"])
    )


def _mnist(steps: list[int], c: Curve, epochs: bool) -> str:
    """pytorch/examples mnist: `Train Epoch: 1 [640/60000 (1%)]\tLoss: 2.253100`."""
    per = 6
    return "".join(
        f"Train Epoch: {k // per + 1} [{(k % per) * 640}/60000 ({(k % per) * 640 / 600:.0f}%)]\tLoss: {_num(v, 6)}\n"
        for k, v in enumerate(c["loss"])
    )


def _num(v: float, digits: int | None = None) -> str:
    """A loss the way Python prints it: `nan`, `inf`, or its digits (fixed-point when asked)."""
    if not math.isfinite(v):
        return "nan" if math.isnan(v) else ("inf" if v > 0 else "-inf")
    if digits is None or abs(v) >= 1e6:
        return repr(round(v, 6)) if abs(v) < 1e6 else f"{v:.4e}"
    return f"{v:.{digits}f}"


def _json(v: float) -> str:
    return _num(v) if math.isfinite(v) else ("NaN" if math.isnan(v) else "Infinity")


#: format name -> (printer, file name, whether its lines are epochs)
FORMATS: dict[str, tuple[Callable[[list[int], Curve, bool], str], str, bool]] = {
    "hf_dicts": (_hf_dicts, "train.log", False),
    "nanogpt": (_nanogpt, "train.log", False),
    "pipes": (_pipes, "train.log", False),
    "jsonl": (_jsonl, "metrics.jsonl", False),
    "mnist": (_mnist, "train.log", False),
    "plain_epoch": (_plain_epoch, "train.log", True),
    "plain_epoch_mid": (_plain_epoch_mid, "train.log", True),
    "keras": (_keras, "train.log", True),
}
STEP_FORMATS = ("hf_dicts", "nanogpt", "pipes", "jsonl", "mnist")
#: the formats every step-level fault is printed in
EPOCH_FORMATS = ("plain_epoch", "keras")
MID_FORMATS = ("plain_epoch_mid",)
#: the formats whose reader says its steps are epochs (Keras' lines are read as the batch counter's
#: steps, so a flat Keras log is judged as a step-level one)
EPOCH_ONLY = ("plain_epoch",)


# ------------------------------------------------------------------ curves


def _noise(rng: np.random.Generator, n: int, rel: float) -> np.ndarray:
    return np.exp(rel * rng.standard_normal(n))


def _falling(rng: np.random.Generator, n: int, start: float, end: float, rel: float) -> np.ndarray:
    """A loss falling from `start` towards `end` (exponentially), with multiplicative noise."""
    t = np.arange(n) / max(1, n - 1)
    return (end + (start - end) * np.exp(-3 * t)) * _noise(rng, n, rel)


def _extras(rng: np.random.Generator, loss: np.ndarray, lr: float = 3e-4) -> Curve:
    """The loss with an LR and a gradient norm beside it; a loss of exactly 0 (an empty label mask)
    has a gradient of exactly 0 (as tests/long_logs.py's zero fault)."""
    n = loss.size
    gn = 1.2 * _noise(rng, n, 0.1)
    gn[loss == 0.0] = 0.0
    return {"loss": [float(v) for v in loss], "lr": [lr] * n, "grad_norm": [float(v) for v in gn]}


def f_triple(rng: np.random.Generator, n: int) -> tuple[np.ndarray, int]:
    """A calm loss, then x3 over two logged intervals (the last two points; n >= 3)."""
    base = _falling(rng, n, 2.4, 2.0, 0.01)
    on = n - 2
    base[on] = base[on - 1] * rng.uniform(1.6, 1.9)
    base[on + 1] = base[on - 1] * rng.uniform(3.0, 4.0)
    return base, on


def f_blowup(rng: np.random.Generator, n: int) -> tuple[np.ndarray, int]:
    """A loss near 1.1, then orders of magnitude up to ~5e26 (n >= 2)."""
    base = _falling(rng, n, 1.15, 1.05, 0.01)
    on = max(1, n - 3)
    for i, e in enumerate(range(on, n)):
        base[e] = 10.0 ** (26.7 - 8 * (n - 1 - e)) if i else 10.0 ** rng.uniform(4, 8)
    base[-1] = 5e26
    return base, on


def f_nan(rng: np.random.Generator, n: int) -> tuple[np.ndarray, int]:
    """Finite losses, then NaN from row n-1 on (n >= 2: one finite point at least)."""
    base = _falling(rng, n, 2.3, 2.1, 0.01)
    base[-1] = float(rng.choice([float("nan"), float("inf")]))
    return base, n - 1


def f_chance(rng: np.random.Generator, n: int) -> tuple[np.ndarray, int]:
    """A loss at ln K (a K-class softmax guessing uniformly), with a model's tiny noise (n >= 3)."""
    k = int(rng.choice([2, 10, 100, 1000, 400, 50257]))
    return math.log(k) * (1 + 0.001 * rng.standard_normal(n)), 0


def f_zero(rng: np.random.Generator, n: int) -> tuple[np.ndarray, int]:
    return np.zeros(n), 0


def f_constant(rng: np.random.Generator, n: int) -> tuple[np.ndarray, int]:
    return np.full(n, round(float(rng.uniform(0.3, 4.0)), 4)), 0


def f_absurd(rng: np.random.Generator, n: int) -> tuple[np.ndarray, int]:
    """A loss of millions from the first point (n >= 1)."""
    return 10.0 ** rng.uniform(6.2, 9) * _noise(rng, n, 0.05), 0


def f_rise(rng: np.random.Generator, n: int) -> tuple[np.ndarray, int]:
    """A loss that rises at every logged point over the last 4, by x4 or more in all (n >= 4)."""
    base = _falling(rng, n, 1.0, 0.8, 0.01)
    on = n - 4
    factor = rng.uniform(1.6, 2.2)
    for i in range(1, 4):
        base[on + i] = base[on] * factor**i
    return base, on + 1


def f_epoch_flat(rng: np.random.Generator, n: int) -> tuple[np.ndarray, int]:
    """An epoch-level loss that does not fall over 5-10 epochs (noise of ~0.5% around a level)."""
    x = float(rng.uniform(0.4, 3.0)) * _noise(rng, n, 0.005)
    k = max(1, n // 3)
    if np.median(x[-k:]) < np.median(x[:k]):
        x = x[::-1].copy()  # noise that happened to fall: the same points, read the other way, do not
    return x, 0


FAULTS: dict[str, tuple[Callable[[np.random.Generator, int], tuple[np.ndarray, int]], int, int]] = {
    # name -> (curve, fewest points, most points)
    "triple": (f_triple, 3, 30),
    "blowup": (f_blowup, 2, 20),
    "nan": (f_nan, 2, 20),
    "chance": (f_chance, 3, 12),
    "zero": (f_zero, 3, 20),
    "constant": (f_constant, 3, 20),
    "absurd": (f_absurd, 1, 10),
    "rise": (f_rise, 4, 20),
}


def f_stuck(rng: np.random.Generator, n: int) -> tuple[np.ndarray, int]:
    """A loss that falls with batch noise, then prints one value to the last digit on its last
    3-6 points (the network's outputs went constant; n >= 4: one moving point at least)."""
    k = int(rng.integers(3, min(6, n - 1) + 1))
    x = _falling(rng, n, float(rng.uniform(1.5, 3.0)), float(rng.uniform(0.5, 1.2)), 0.03)
    x[n - k :] = round(float(x[n - k - 1]) * float(rng.uniform(0.97, 1.03)), 4)
    return x, n - k


EPOCH_FAULTS = {"epoch_flat": (f_epoch_flat, 5, 10)}
#: faults of an excerpt from the middle of a run (ten or more epochs: the start is not shown)
MID_FAULTS = {"epoch_flat_mid": (f_epoch_flat, 10, 14)}
#: faults added after the ones above (drawn after them, so the earlier cases keep their draws),
#: printed in every format but the mid-run one
LATER_FAULTS = {"stuck": (f_stuck, 4, 20)}


def h_epochs(rng: np.random.Generator, n: int) -> np.ndarray:
    """A few epochs of a normally falling loss."""
    return _falling(rng, n, float(rng.uniform(0.8, 2.5)), float(rng.uniform(0.1, 0.5)), 0.02)


def h_noisy_batches(rng: np.random.Generator, n: int) -> np.ndarray:
    """Per-batch losses of a small batch: 15% noise with an occasional 1.6x draw, falling slowly."""
    x = _falling(rng, n, 2.2, 1.6, 0.15)
    heavy = rng.random(n) < 0.1
    x[heavy] *= 1.6
    return x


def h_dip_recover(rng: np.random.Generator, n: int) -> np.ndarray:
    """A loss that dips, comes back up by a few percent, and falls on."""
    x = _falling(rng, n, 1.3, 0.9, 0.01)
    mid = n // 2
    x[mid : mid + 2] *= 1.0 + rng.uniform(0.03, 0.08)
    return x


def h_finetune(rng: np.random.Generator, n: int) -> np.ndarray:
    """A fine-tune whose loss starts low and stays flat-ish with noise."""
    return float(rng.uniform(0.2, 0.6)) * _noise(rng, n, 0.06) * np.linspace(1.0, 0.97, n)


def h_rl_policy(rng: np.random.Generator, n: int) -> np.ndarray:
    """An RL run's policy loss: around 0, of either sign (a surrogate objective, not a loss that falls)."""
    return 0.02 * rng.standard_normal(n)


def h_gan(rng: np.random.Generator, n: int) -> np.ndarray:
    """A GAN's generator loss, oscillating by design around ~1 (+-40%)."""
    return 1.0 + 0.4 * np.sin(np.arange(n) * rng.uniform(0.8, 2.0)) + 0.05 * rng.standard_normal(n)


def h_from_chance(rng: np.random.Generator, n: int) -> np.ndarray:
    """A classifier that starts at ln K and learns: it leaves ln K from its second logged point."""
    c = math.log(int(rng.choice([2, 10, 100, 1000])))
    return _falling(rng, n, c, 0.3 * c, 0.01)


def h_llm_start(rng: np.random.Generator, n: int) -> np.ndarray:
    """A language model's first logged steps: from above ln V (~10.9) down fast, then slower."""
    return _falling(rng, n, float(rng.uniform(10.9, 11.5)), float(rng.uniform(3.0, 5.0)), 0.01)


def h_running_mean(rng: np.random.Generator, n: int) -> np.ndarray:
    """What a progress bar prints: the mean of the epoch's batch losses so far (30% batch noise), every
    10-200 batches; late in the epoch it moves by a unit of the fourth decimal or less between prints
    and may print one value several times."""
    every = int(rng.choice([10, 50, 200]))
    level = float(rng.uniform(0.05, 2.0))
    b = _falling(rng, n * every, 1.5 * level, level, 0.3)  # a run's first epoch: its batch losses fall
    return (np.cumsum(b) / np.arange(1, b.size + 1))[every - 1 :: every]


def h_batch_swings(rng: np.random.Generator, n: int) -> np.ndarray:
    """Single-batch losses of a converged model (fairseq's per-batch `loss=`): 10% noise around a
    level, and twice a hard batch at x3.5-4.5 that the next batch does not repeat."""
    x = float(rng.uniform(0.4, 1.2)) * _noise(rng, n, 0.1)
    a = int(rng.integers(2, n // 2))
    b = int(rng.integers(a + 2, n - 1))
    for i in (a, b):
        x[i] *= float(rng.uniform(3.5, 4.5))
    return x


def h_epochs_late(rng: np.random.Generator, n: int) -> np.ndarray:
    """Ten-odd epochs late in a long run: a converging loss that still falls a little each pass."""
    level = float(rng.uniform(0.2, 2.0))
    return level * np.exp(-0.004 * np.arange(n)) * _noise(rng, n, 0.0005)


HEALTHY: dict[str, tuple[Callable[[np.random.Generator, int], np.ndarray], int, int]] = {
    "from_chance": (h_from_chance, 3, 20),
    "llm_start": (h_llm_start, 3, 20),
    "epochs": (h_epochs, 3, 10),
    "noisy_batches": (h_noisy_batches, 8, 30),
    "dip_recover": (h_dip_recover, 5, 20),
    "finetune": (h_finetune, 3, 30),
    "rl_policy": (h_rl_policy, 5, 30),
    "gan": (h_gan, 5, 30),
}


#: logging intervals a fault's log is drawn with (a loss at ln K over its first 20 steps is a
#: healthy start, not a plateau: the chance cases span >= 100 steps)
EVERY = (1, 5, 10, 50, 100)
FAULT_EVERY = {"chance": (50, 100)}
#: the fewest points a fault needs in a format whose steps are line numbers (the HF Trainer's dicts
#: print no step: six points at ln K, not three, before the steps are known to be many)
NUMBERED_FEWEST = {"chance": 6}


def _steps(rng: np.random.Generator, n: int, every_from: tuple[int, ...] = EVERY) -> list[int]:
    every = int(rng.choice(every_from))
    first = int(rng.choice([0, every]))
    return [first + every * k for k in range(n)]


def _case(
    name: str, fmt: str, loss: np.ndarray, rng: np.random.Generator, fault: str | None, onset: int | None
) -> Case:
    printer, file, epochs = FORMATS[fmt]
    steps = _steps(rng, loss.size, FAULT_EVERY.get(fault or "", EVERY))
    text = printer(steps, _extras(rng, loss), epochs)
    return Case(name=name, text=text, fault=fault, onset_row=onset, steps=steps, file=file)


def faulty_cases(seed: int, per: int = 2) -> list[Case]:
    """`per` cases of each fault in each format (seeded), lengths drawn in the fault's range."""
    rng = np.random.default_rng(seed)
    out = []
    for fault, (fn, lo, hi) in {**FAULTS, **EPOCH_FAULTS, **MID_FAULTS, **LATER_FAULTS}.items():
        fmts = (
            EPOCH_ONLY
            if fault in EPOCH_FAULTS
            else MID_FORMATS
            if fault in MID_FAULTS
            else tuple(f for f in FORMATS if f not in MID_FORMATS)
        )
        for fmt in fmts:
            for k in range(per):
                fewest = NUMBERED_FEWEST.get(fault, lo) if fmt == "hf_dicts" else lo
                n = int(rng.integers(fewest, max(fewest, hi) + 1))
                loss, on = fn(rng, n)
                out.append(_case(f"{fault}-{fmt}-{seed}-{k}-n{n}", fmt, loss, rng, fault, on))
    return out


def healthy_cases(seed: int, per: int = 2) -> list[Case]:
    rng = np.random.default_rng(seed + 1000)
    out = []
    later = {"running_mean": (h_running_mean, 8, 30), "batch_swings": (h_batch_swings, 8, 12)}
    for kind, (fn, lo, hi) in {**HEALTHY, "epochs_late": (h_epochs_late, 10, 14), **later}.items():
        fmts = EPOCH_FORMATS if kind == "epochs" else MID_FORMATS if kind == "epochs_late" else STEP_FORMATS
        for fmt in fmts:
            for k in range(per):
                n = int(rng.integers(lo, hi + 1))
                out.append(_case(f"healthy_{kind}-{fmt}-{seed}-{k}-n{n}", fmt, fn(rng, n), rng, None, None))
    return out
