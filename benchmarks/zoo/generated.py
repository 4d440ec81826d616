"""Randomised variants of each fault family: a held-out measure for the detectors.

The hand-written zoo (`scenarios.py`) is in-sample: the thresholds were tuned while looking at its
misses. Here each fault family is a recipe with its knobs drawn at random per variant -- model
size, optimizer, learning rate, batch size, data task, schedule, where and how hard the fault hits,
seed -- so a rule that only fits the hand-written runs shows up as a miss.

The split is fixed by the variant's id, decided before any result was seen: a variant is in the
test split when the first byte of sha256(id) is odd, in dev when it is even. Detector thresholds
are tuned on dev only; test is run to report, never to tune.

Families: the faults whose signature is in the scalars a user logs (loss, grad norm, LR, loss
scale). Faults that live in activations, dtypes or label layouts (bad init, vanishing gradients,
attention/activation overflow, precision stalls, a leaking label mask, a transient kernel fault)
are not generated: their evidence is in the run directory `watch` writes, which the hand-written
zoo measures.
"""

from __future__ import annotations

import copy
import hashlib
import math
import random
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn

from .data import Blobs, MarkovLM, Regression, Sequences, Squares
from .harness import FIRST_NONFINITE, Scenario, Setup
from .models import CNN, MLP, SeqClassifier, TinyTransformer
from .scenarios import mse, warmup_cosine, xent  # the hand-written zoo's
from .scenarios import tiny_lm as lm

#: variants per fault family and healthy controls; part of the benchmark's definition (changing
#: them changes which ids exist, not which split an id is in)
PER_FAMILY = 12
HEALTHY = 30


def split_of(variant_id: str) -> str:
    """`test` when the first byte of sha256(id) is odd, else `dev` (fixed before any result)."""
    return "test" if hashlib.sha256(variant_id.encode()).digest()[0] % 2 else "dev"


# --- the base run a fault is injected into ---------------------------------------------------------


@dataclass
class Base:
    """A healthy training set-up: data, a fresh model (via `make_model`), a loss, a sane LR per
    optimizer family. Faults are injected by changing one thing about it."""

    kind: str  # regression, classification, image, sequence, lm
    data: Any
    make_model: Callable[[], nn.Module]
    loss_fn: Callable[[nn.Module, Any], torch.Tensor]
    task: str  # watch's task: regression, classification, pretrain
    family: str  # mlp, cnn, lstm, attention
    batch_size: int
    describe: str


def make_base(rng: random.Random, seed: int, kinds: tuple[str, ...] = ()) -> Base:
    kind = rng.choice(kinds or ("regression", "classification", "image", "sequence", "lm"))
    if kind == "regression":
        d_in, bs = rng.choice((8, 16, 32)), rng.choice((16, 32, 64))
        hidden, depth = rng.choice((32, 64, 128)), rng.choice((2, 3))
        data = Regression(seed, d_in=d_in, batch_size=bs, noise=rng.choice((0.05, 0.1, 0.3)))
        return Base(
            kind,
            data,
            lambda: MLP(d_in, 1, hidden=hidden, depth=depth),
            mse,
            "regression",
            "mlp",
            bs,
            f"MLP {d_in}-{hidden}x{depth}-1 regression, batch {bs}",
        )
    if kind == "classification":
        d_in, k, bs = rng.choice((16, 32)), rng.choice((4, 10, 20)), rng.choice((16, 32, 64))
        hidden, depth = rng.choice((32, 64, 128)), rng.choice((2, 3))
        data = Blobs(seed, d_in=d_in, n_classes=k, batch_size=bs, spread=rng.choice((1.0, 1.5, 2.0)))
        return Base(
            kind,
            data,
            lambda: MLP(d_in, k, hidden=hidden, depth=depth),
            xent,
            "classification",
            "mlp",
            bs,
            f"MLP {d_in}-{hidden}x{depth}-{k} classification, batch {bs}",
        )
    if kind == "image":
        ch, bs = rng.choice((4, 8, 16)), rng.choice((16, 32))
        data = Squares(seed, batch_size=bs, noise=rng.choice((0.3, 0.5, 0.8)))
        return Base(
            kind,
            data,
            lambda: CNN(channels=ch),
            xent,
            "classification",
            "cnn",
            bs,
            f"CNN {ch} channels, 4 classes, batch {bs}",
        )
    if kind == "sequence":
        hidden, bs, length = rng.choice((16, 32)), rng.choice((16, 32)), rng.choice((10, 20))
        data = Sequences(seed, length=length, batch_size=bs)
        return Base(
            kind,
            data,
            lambda: SeqClassifier(4, 4, hidden=hidden),
            xent,
            "classification",
            "lstm",
            bs,
            f"LSTM {hidden} over {length} steps, batch {bs}",
        )
    d, n_layer, bs = rng.choice((32, 48)), rng.choice((1, 2)), rng.choice((4, 8))
    data = MarkovLM(seed, batch_size=bs)
    return Base(
        "lm",
        data,
        lambda: TinyTransformer(d=d, n_layer=n_layer),
        lm,
        "pretrain",
        "attention",
        bs,
        f"decoder LM d={d} x{n_layer} layers, batch {bs}",
    )


OPTIMIZERS = ("SGD", "Adam", "AdamW")


def sane_lr(rng: random.Random, opt: str, kind: str) -> float:
    """A learning rate an expert would call ordinary for this optimizer and task."""
    if opt == "SGD":
        return 10 ** rng.uniform(math.log10(0.01), math.log10(0.05 if kind in ("regression", "sequence") else 0.1))
    return 10 ** rng.uniform(math.log10(5e-4), math.log10(3e-3))


def pick_optimizer(rng: random.Random, kind: str) -> str:
    return rng.choice(("Adam", "AdamW")) if kind == "lm" else rng.choice(OPTIMIZERS)


def make_opt(name: str, params: Any, lr: float) -> torch.optim.Optimizer:
    if name == "SGD":
        return torch.optim.SGD(params, lr=lr, momentum=0.9)
    if name == "Adam":
        return torch.optim.Adam(params, lr=lr)
    return torch.optim.AdamW(params, lr=lr, weight_decay=0.01)


# --- variants ------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Variant:
    id: str
    fault_family: str  # the family it was drawn from ("healthy" for controls)
    seed: int
    scenario: Scenario

    @property
    def split(self) -> str:
        return split_of(self.id)


#: fault family -> recipe(rng, seed) -> (Scenario fields, build)
FAMILIES: dict[str, Callable[[random.Random, int, str], Scenario]] = {}


def family(name: str) -> Callable[[Callable[[random.Random, int, str], Scenario]], Any]:
    def register(fn: Callable[[random.Random, int, str], Scenario]) -> Any:
        FAMILIES[name] = fn
        return fn

    return register


def _scenario(
    vid: str,
    base: Base,
    opt: str,
    build: Callable[[int], Setup],
    causes: set[str],
    fault: str,
    onset: int | str | None = None,
    precision: str = "fp32",
) -> Scenario:
    return Scenario(
        name=vid,
        build=build,
        family=base.family,
        optimizer=opt,
        precision=precision,
        task=base.task,
        causes=frozenset(causes),
        fault=f"{fault} [{base.describe}]",
        onset=onset,
    )


@family("lr_too_high")
def _lr_too_high(rng: random.Random, seed: int, vid: str) -> Scenario:
    base = make_base(rng, seed)
    opt = pick_optimizer(rng, base.kind)
    factor = 10 ** rng.uniform(2.0, 2.7)
    lr = sane_lr(rng, opt, base.kind) * factor
    steps = rng.choice((120, 160, 200))

    def build(s: int) -> Setup:
        m = base.make_model()
        return Setup(m, make_opt(opt, m.parameters(), lr), base.data.batch, base.loss_fn, steps=steps)

    causes = {"lr_too_high"} | ({"grad_explosion"} if opt == "SGD" else set())
    return _scenario(vid, base, opt, build, causes, f"{opt} LR {lr:.3g}, {factor:.0f}x an ordinary one", onset=1)


@family("lr_too_low")
def _lr_too_low(rng: random.Random, seed: int, vid: str) -> Scenario:
    base = make_base(rng, seed)
    opt = pick_optimizer(rng, base.kind)
    factor = 10 ** rng.uniform(-4.0, -3.0)
    lr = sane_lr(rng, opt, base.kind) * factor
    steps = rng.choice((150, 200, 240))

    def build(s: int) -> Setup:
        m = base.make_model()
        return Setup(m, make_opt(opt, m.parameters(), lr), base.data.batch, base.loss_fn, steps=steps)

    return _scenario(vid, base, opt, build, {"lr_too_low"}, f"{opt} LR {lr:.3g}, 1/{1 / factor:.0f} of an ordinary one")


@family("lr_schedule_error")
def _lr_schedule_error(rng: random.Random, seed: int, vid: str) -> Scenario:
    base = make_base(rng, seed)
    opt = pick_optimizer(rng, base.kind)
    lr = sane_lr(rng, opt, base.kind)
    steps = rng.choice((160, 200, 240))
    how = rng.choice(("step_per_batch", "exp_per_batch", "cosine_short", "warmup_per_epoch"))
    step_size, gamma = rng.choice((5, 10, 20)), rng.choice((0.1, 0.2))
    exp_gamma = rng.uniform(0.8, 0.9)
    t_max = rng.choice((20, 30, 40))
    warm, epoch = rng.choice((100, 200, 400)), rng.choice((20, 40))

    def build(s: int) -> Setup:
        m = base.make_model()
        o = make_opt(opt, m.parameters(), lr)
        every = 1
        if how == "step_per_batch":
            sched: Any = torch.optim.lr_scheduler.StepLR(o, step_size=step_size, gamma=gamma)
        elif how == "exp_per_batch":
            sched = torch.optim.lr_scheduler.ExponentialLR(o, gamma=exp_gamma)
        elif how == "cosine_short":
            sched = torch.optim.lr_scheduler.CosineAnnealingLR(o, T_max=t_max)
        else:
            sched = torch.optim.lr_scheduler.LambdaLR(o, lambda k: min(1.0, (k + 1) / warm))
            every = epoch
        return Setup(m, o, base.data.batch, base.loss_fn, steps=steps, scheduler=sched, sched_every=every)

    fault = {
        "step_per_batch": f"StepLR(step_size={step_size}, gamma={gamma}) meant per epoch, stepped per batch",
        "exp_per_batch": f"ExponentialLR(gamma={exp_gamma:.2f}) meant per epoch, stepped per batch",
        "cosine_short": f"CosineAnnealingLR(T_max={t_max}) on a {steps}-step run",
        "warmup_per_epoch": f"a {warm}-step warm-up stepped once every {epoch} batches",
    }[how]
    causes = {"lr_schedule_error"} | ({"lr_too_low"} if how != "cosine_short" else set())
    return _scenario(vid, base, opt, build, causes, f"{opt} LR {lr:.3g}: {fault}")


@family("nonfinite_data")
def _nonfinite_data(rng: random.Random, seed: int, vid: str) -> Scenario:
    base = make_base(rng, seed, ("regression", "classification", "image", "sequence"))
    opt = pick_optimizer(rng, base.kind)
    lr = sane_lr(rng, opt, base.kind)
    steps = rng.choice((100, 140, 180))
    at, row = rng.randint(20, steps - 30), rng.randrange(base.batch_size)
    value = rng.choice((float("nan"), float("inf")))
    in_target = base.kind == "regression" and rng.random() < 0.5

    def batches(step: int) -> Any:
        x, y = base.data.batch(step)
        if step == at:
            if in_target:
                y[row, 0] = value
            else:
                x[row].view(-1)[rng_index(seed, x[row].numel())] = value
        return x, y

    def build(s: int) -> Setup:
        m = base.make_model()
        return Setup(m, make_opt(opt, m.parameters(), lr), batches, base.loss_fn, steps=steps)

    where = "target" if in_target else "input"
    return _scenario(
        vid, base, opt, build, {"nonfinite_data"}, f"a {value} in the {where} of batch {at}, sample {row}", onset=at
    )


def rng_index(seed: int, n: int) -> int:
    return random.Random(seed).randrange(n)


@family("loss_spike")
def _loss_spike(rng: random.Random, seed: int, vid: str) -> Scenario:
    base = make_base(rng, seed)
    opt = rng.choice(("Adam", "AdamW"))
    lr = sane_lr(rng, opt, base.kind)
    steps = rng.choice((180, 220, 260))
    at = int(steps * rng.uniform(0.6, 0.85))
    rows = rng.sample(range(base.batch_size), max(1, base.batch_size // rng.choice((2, 4, 8))))
    mult = rng.uniform(20, 60)

    def batches(step: int) -> Any:
        b = base.data.batch(step)
        if step != at:
            return b
        if base.kind == "lm":
            g = torch.Generator().manual_seed(seed + 999)
            ids = torch.randint(4, base.data.vocab, b["input_ids"].shape, generator=g)
            return {"input_ids": ids, "attention_mask": torch.ones_like(ids), "labels": ids.clone()}
        x, y = b
        g = torch.Generator().manual_seed(seed + 999)
        x[rows] = mult * torch.randn(x[rows].shape, generator=g)  # rows of garbage from a broken shard
        return x, y

    def build(s: int) -> Setup:
        m = base.make_model()
        return Setup(m, make_opt(opt, m.parameters(), lr), batches, base.loss_fn, steps=steps)

    if base.kind == "lm":
        causes, fault = {"loss_spike", "noisy_data"}, f"batch {at} is random tokens (a binary file in the corpus)"
    else:
        causes, fault = (
            {"loss_spike", "nonfinite_data"},
            f"{len(rows)} rows of batch {at} are garbage of scale {mult:.0f}",
        )
    return _scenario(vid, base, opt, build, causes, fault, onset=at)


@family("grad_explosion")
def _grad_explosion(rng: random.Random, seed: int, vid: str) -> Scenario:
    how = rng.choice(("relu_rnn", "raw_features"))
    steps = rng.choice((120, 150))
    if how == "relu_rnn":
        length, hidden, gain = rng.choice((30, 40, 50)), rng.choice((32, 64)), rng.uniform(1.15, 1.35)
        lr = rng.uniform(0.05, 0.2)
        data = Sequences(seed, length=length)
        base = Base(
            "sequence",
            data,
            lambda: None,
            xent,
            "classification",
            "rnn",
            32,  # type: ignore[arg-type]
            f"ReLU RNN {hidden} over {length} steps",
        )

        def build(s: int) -> Setup:
            m = SeqClassifier(4, 4, hidden=hidden, cell="rnn", nonlinearity="relu")
            with torch.no_grad():
                nn.init.orthogonal_(m.rnn.weight_hh_l0, gain=gain)
            return Setup(m, make_opt("SGD", m.parameters(), lr), data.batch, xent, steps=steps)

        return _scenario(
            vid,
            base,
            "SGD",
            build,
            {"grad_explosion", "bad_init"},
            f"recurrent matrix with gain {gain:.2f}, SGD LR {lr:.3g}, no clipping",
            onset=FIRST_NONFINITE,
        )
    base = make_base(rng, seed, ("regression",))
    cols, mult = rng.choice((1, 2, 3)), 10 ** rng.uniform(2.5, 3.5)
    lr = sane_lr(rng, "SGD", base.kind)

    def batches(step: int) -> Any:
        x, y = base.data.batch(step)
        x[:, :cols] = x[:, :cols] * mult + 5 * mult
        return x, y

    def build2(s: int) -> Setup:
        m = base.make_model()
        return Setup(m, make_opt("SGD", m.parameters(), lr), batches, base.loss_fn, steps=steps)

    return _scenario(
        vid,
        base,
        "SGD",
        build2,
        {"grad_explosion", "lr_too_high", "nonfinite_data"},
        f"{cols} feature column(s) left in raw units (x{mult:.0f}), SGD LR {lr:.3g}",
        onset=1,
    )


@family("label_mask_empty")
def _label_mask_empty(rng: random.Random, seed: int, vid: str) -> Scenario:
    base = make_base(rng, seed, ("lm",))
    opt = pick_optimizer(rng, "lm")
    lr = sane_lr(rng, opt, "lm")
    steps = rng.choice((60, 80, 100))
    every = rng.random() < 0.5
    at = rng.randint(20, steps - 20)

    def batches(step: int) -> Any:
        b = base.data.batch(step)
        if every or step == at:
            b["labels"] = torch.full_like(b["labels"], -100)
        return b

    def build(s: int) -> Setup:
        m = base.make_model()
        return Setup(m, make_opt(opt, m.parameters(), lr), batches, base.loss_fn, steps=steps)

    fault = (
        "every label is -100 (the collator masks the response too)"
        if every
        else f"batch {at} has no supervised token (every label -100)"
    )
    base.task = "sft"
    return _scenario(vid, base, opt, build, {"label_mask_empty"}, fault, onset=0 if every else at)


@family("loss_scale_collapse")
def _loss_scale_collapse(rng: random.Random, seed: int, vid: str) -> Scenario:
    bs, weight = rng.choice((1024, 2048, 4096)), 10 ** rng.uniform(2.5, 4)
    hidden, steps = rng.choice((32, 64)), rng.choice((60, 80))
    opt = rng.choice(("Adam", "AdamW"))
    lr = sane_lr(rng, opt, "regression")
    data = Regression(seed, batch_size=bs)
    base = Base(
        "regression",
        data,
        lambda: None,
        mse,
        "regression",
        "mlp",
        bs,  # type: ignore[arg-type]
        f"MLP 16-{hidden}-1, batch {bs}, fp16 autocast + GradScaler",
    )

    def loss(model: nn.Module, batch: Any) -> torch.Tensor:
        x, y = batch
        return weight * F.mse_loss(model(x).float(), y, reduction="sum")

    def build(s: int) -> Setup:
        m = MLP(16, 1, hidden=hidden)
        return Setup(
            m,
            make_opt(opt, m.parameters(), lr),
            data.batch,
            loss,
            steps=steps,
            autocast=torch.float16,
            scaler=torch.amp.GradScaler("cpu"),
        )

    return _scenario(
        vid,
        base,
        opt,
        build,
        {"loss_scale_collapse"},
        f"MSE reduction='sum' x {weight:.0f} under fp16: the GradScaler backs off below 1",
        precision="fp16-amp",
    )


@family("frozen_model")
def _frozen_model(rng: random.Random, seed: int, vid: str) -> Scenario:
    base = make_base(rng, seed)
    opt = pick_optimizer(rng, base.kind)
    lr = sane_lr(rng, opt, base.kind)
    steps = rng.choice((120, 160, 200))

    def build(s: int) -> Setup:
        model = base.make_model()
        stale = copy.deepcopy(model)  # e.g. the optimizer was built before a checkpoint reload
        return Setup(model, make_opt(opt, stale.parameters(), lr), base.data.batch, base.loss_fn, steps=steps)

    return _scenario(
        vid,
        base,
        opt,
        build,
        {"frozen_model"},
        "the optimizer holds a copy's parameters: the trained model never changes",
    )


@family("noisy_data")
def _noisy_data(rng: random.Random, seed: int, vid: str) -> Scenario:
    base = make_base(rng, seed, ("classification", "image", "sequence"))
    opt = pick_optimizer(rng, base.kind)
    lr = sane_lr(rng, opt, base.kind)
    steps = rng.choice((200, 240))
    how = rng.choice(("noise", "misaligned"))
    p = rng.uniform(0.6, 0.9)
    k = getattr(base.data, "n_classes", None) or getattr(base.data, "d_in", 4)

    def batches(step: int) -> Any:
        x, y = base.data.batch(step)
        if how == "misaligned":
            return x, base.data.batch(step + 1)[1]
        g = torch.Generator().manual_seed(seed * 31 + step)
        noisy = torch.rand(y.shape, generator=g) < p
        return x, torch.where(noisy, torch.randint(0, k, y.shape, generator=g), y)

    def build(s: int) -> Setup:
        m = base.make_model()
        return Setup(m, make_opt(opt, m.parameters(), lr), batches, base.loss_fn, steps=steps)

    fault = (
        f"{p:.0%} of labels replaced at random"
        if how == "noise"
        else "labels taken from the next batch (an off-by-one in a zipped loader)"
    )
    return _scenario(vid, base, opt, build, {"noisy_data"}, fault)


def _healthy(rng: random.Random, seed: int, vid: str) -> Scenario:
    base = make_base(rng, seed)
    opt = pick_optimizer(rng, base.kind)
    lr = sane_lr(rng, opt, base.kind)
    steps = rng.choice((120, 160, 200, 240))
    sched_kind = rng.choice(("none", "none", "warmup_cosine", "step_per_epoch"))
    clip = rng.choice((None, None, 1.0))
    epoch = rng.choice((50, 80))

    def build(s: int) -> Setup:
        m = base.make_model()
        o = make_opt(opt, m.parameters(), lr)
        sched, every = None, 1
        if sched_kind == "warmup_cosine":
            sched = warmup_cosine(o, max(5, steps // 10), steps)
        elif sched_kind == "step_per_epoch":
            sched, every = torch.optim.lr_scheduler.StepLR(o, step_size=1, gamma=0.3), epoch
        return Setup(m, o, base.data.batch, base.loss_fn, steps=steps, scheduler=sched, sched_every=every, clip=clip)

    fault = f"none: {opt} LR {lr:.3g}, schedule {sched_kind}" + (f", clip {clip}" if clip else "")
    return _scenario(vid, base, opt, build, set(), fault)


#: a corrupted batch whose loss is below this multiple of the 10 losses before it did not make a
#: spike: the model absorbed it, and no log could show a fault that did not happen
SPIKE_VISIBLE = 1.5


def fault_visible(v: Variant, steps: list[dict[str, Any]]) -> bool:
    """Whether the injected fault showed in the loop's own losses (judged on what the training loop
    passed to `mon.step`, not on any diagnosis). Only the loss_spike family can be absorbed
    silently (a few garbage rows in a large batch); every other family always counts."""
    if v.fault_family != "loss_spike" or not isinstance(v.scenario.onset, int):
        return True
    at = v.scenario.onset
    loss = {int(r["step"]): r.get("loss") for r in steps if "step" in r}
    before = [
        float(loss[k])
        for k in range(at - 10, at)
        if isinstance(loss.get(k), (int, float)) and math.isfinite(float(loss[k]))
    ]
    hit = loss.get(at)
    if not before or not isinstance(hit, (int, float)):
        return True
    return not math.isfinite(float(hit)) or float(hit) >= SPIKE_VISIBLE * sorted(before)[len(before) // 2]


def variants() -> dict[str, Variant]:
    """Every variant, in a fixed order; a pure function of the ids (the same on every machine)."""
    out: dict[str, Variant] = {}
    recipes = [(name, fn, PER_FAMILY) for name, fn in FAMILIES.items()] + [("healthy", _healthy, HEALTHY)]
    for name, fn, count in recipes:
        for i in range(count):
            vid = f"{name}-{i:02d}"
            rng = random.Random(vid)
            seed = rng.randrange(1_000_000)
            out[vid] = Variant(vid, name, seed, fn(rng, seed, vid))
    return out
