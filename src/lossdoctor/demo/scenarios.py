"""Small, real training runs with realistic faults, watched by lossdoctor.

`lossdoctor demo --fault NAME` runs one of these; the test suite runs them all and checks the
diagnosis. Each trains a real torch model with a real optimizer on synthetic data made in code
(nothing is downloaded), injecting the fault the way it happens in practice.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
from torch import nn
from torch.nn import functional as F

from ..live.monitor import watch


@dataclass(frozen=True)
class Scenario:
    name: str
    description: str
    #: acceptable causes for the primary diagnosis; empty = a healthy run (no warning/critical)
    expect: tuple[str, ...]
    fn: Callable[[Path, int, bool], None]


SCENARIOS: dict[str, Scenario] = {}


def scenario(name: str, description: str, expect: tuple[str, ...] = ()) -> Callable:
    def register(fn: Callable[[Path, int, bool], None]) -> Callable:
        SCENARIOS[name] = Scenario(name, description, expect, fn)
        return fn

    return register


_OPTIONS: dict[str, Any] = {}  # watch options for the scenario being run (set by run_scenario)


def run_scenario(name: str, log_dir: str | Path, seed: int = 0, alerts: bool = False, replay: bool = False) -> Path:
    """Train scenario `name` into `log_dir`. With `replay`, the loops hand `watch` a `replay_fn`,
    so an incident is replayed and localised down to the operation and the sample."""
    if name not in SCENARIOS:
        raise KeyError(name)
    torch.manual_seed(seed)
    log_dir = Path(log_dir)
    _OPTIONS.clear()
    _OPTIONS["replay"] = replay
    try:
        SCENARIOS[name].fn(log_dir, seed, alerts)
    finally:
        _OPTIONS.clear()
    return log_dir


# --- models and data ----------------------------------------------------------------------------
def mlp(d_in: int, d_hidden: int, d_out: int, depth: int = 2, act: type[nn.Module] = nn.ReLU) -> nn.Sequential:
    layers: list[nn.Module] = []
    d = d_in
    for _ in range(depth):
        layers += [nn.Linear(d, d_hidden), act()]
        d = d_hidden
    layers.append(nn.Linear(d, d_out))
    return nn.Sequential(*layers)


class RegressionData:
    """y = a smooth nonlinear function of x plus noise; unit-scale features."""

    def __init__(self, d_in: int = 16, noise: float = 0.1, seed: int = 0) -> None:
        g = torch.Generator().manual_seed(seed + 1000)
        self.w = torch.randn(d_in, 1, generator=g) / math.sqrt(d_in)
        self.noise = noise
        self.g = torch.Generator().manual_seed(seed)
        self.d_in = d_in

    def batch(self, n: int) -> tuple[torch.Tensor, torch.Tensor]:
        x = torch.randn(n, self.d_in, generator=self.g)
        y = torch.sin(2 * x @ self.w) + self.noise * torch.randn(n, 1, generator=self.g)
        return x, y


class BlobData:
    """Gaussian blobs, one per class: learnable classification."""

    def __init__(self, d_in: int = 16, classes: int = 4, seed: int = 0, spread: float = 1.0) -> None:
        g = torch.Generator().manual_seed(seed + 2000)
        self.centers = torch.randn(classes, d_in, generator=g) * 2.0
        self.spread = spread
        self.classes = classes
        self.g = torch.Generator().manual_seed(seed)

    def batch(self, n: int) -> tuple[torch.Tensor, torch.Tensor]:
        y = torch.randint(0, self.classes, (n,), generator=self.g)
        x = self.centers[y] + self.spread * torch.randn(n, self.centers.shape[1], generator=self.g)
        return x, y


class TinyAttentionClassifier(nn.Module):
    """Embedding -> hand-written multi-head self-attention (masked_fill with -inf, the common way)
    -> mean pool -> linear. A sequence that is all padding makes its softmax rows NaN."""

    def __init__(self, vocab: int = 64, d: int = 32, heads: int = 4, classes: int = 4) -> None:
        super().__init__()
        self.embed = nn.Embedding(vocab, d)
        self.attn = SelfAttention(d, heads)
        self.norm = nn.LayerNorm(d)
        self.head = nn.Linear(d, classes)

    def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor) -> torch.Tensor:
        h = self.embed(input_ids)
        h = self.norm(h + self.attn(h, attention_mask))
        m = attention_mask.unsqueeze(-1).to(h.dtype)
        return self.head((h * m).sum(1) / m.sum(1).clamp(min=1))


class SelfAttention(nn.Module):
    def __init__(self, d: int, heads: int) -> None:
        super().__init__()
        self.qkv = nn.Linear(d, 3 * d)
        self.proj = nn.Linear(d, d)
        self.heads = heads

    def forward(self, x: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        b, t, d = x.shape
        q, k, v = self.qkv(x).view(b, t, 3, self.heads, d // self.heads).permute(2, 0, 3, 1, 4)
        scores = q @ k.transpose(-1, -2) / math.sqrt(d // self.heads)
        scores = scores.masked_fill(mask[:, None, None, :] == 0, float("-inf"))
        att = scores.softmax(-1)
        return self.proj((att @ v).transpose(1, 2).reshape(b, t, d))


def token_batch(g: torch.Generator, n: int, t: int, vocab: int, classes: int = 4) -> dict[str, torch.Tensor]:
    """Sequences whose class is decided by which token dominates; random padding at the end."""
    y = torch.randint(0, classes, (n,), generator=g)
    ids = torch.randint(classes, vocab, (n, t), generator=g)
    ids[:, : t // 2] = y[:, None]  # the class token repeated: learnable
    lengths = torch.randint(t // 2 + 1, t + 1, (n,), generator=g)
    mask = (torch.arange(t)[None, :] < lengths[:, None]).long()
    perm = torch.argsort(torch.rand(n, t, generator=g), dim=1)
    ids = torch.gather(ids, 1, perm)
    ids = ids * mask
    return {"input_ids": ids, "attention_mask": mask, "labels": y}


def gpt2(n_layer: int = 2, n_embd: int = 64, vocab: int = 256, std: float | None = None) -> nn.Module:
    from transformers import GPT2Config, GPT2LMHeadModel
    from transformers.utils import logging as hf_logging

    hf_logging.set_verbosity_error()
    cfg = GPT2Config(
        n_layer=n_layer,
        n_embd=n_embd,
        n_head=4,
        vocab_size=vocab,
        n_positions=64,
        bos_token_id=0,
        eos_token_id=0,
        resid_pdrop=0.0,
        embd_pdrop=0.0,
        attn_pdrop=0.0,
    )
    if std is not None:
        cfg.initializer_range = std
    return GPT2LMHeadModel(cfg)


def lm_batch(g: torch.Generator, n: int, t: int, vocab: int) -> dict[str, torch.Tensor]:
    """Learnable token sequences: each sequence repeats a short random pattern."""
    period = 4
    pat = torch.randint(1, vocab, (n, period), generator=g)
    ids = pat.repeat(1, t // period + 1)[:, :t]
    return {"input_ids": ids, "labels": ids.clone()}


def _loop(
    model: nn.Module,
    opt: torch.optim.Optimizer,
    steps: int,
    batch_fn: Callable[[int], Any],
    loss_fn: Callable[[nn.Module, Any], torch.Tensor],
    log_dir: Path,
    alerts: bool,
    *,
    scheduler: Any = None,
    scaler: Any = None,
    task: str | None = None,
    autocast: torch.dtype | None = None,
    clip: float | None = None,
    **watch_opts: Any,
) -> None:
    """The plain training loop every scenario shares: forward, backward, step, mon.step."""

    def replay_fn(m: nn.Module, b: Any) -> torch.Tensor:
        with torch.autocast("cpu", dtype=autocast, enabled=autocast is not None):
            return loss_fn(m, b)

    if _OPTIONS.get("replay"):
        watch_opts.setdefault("replay_fn", replay_fn)
    with watch(
        model, opt, scaler=scaler, scheduler=scheduler, log_dir=log_dir, task=task, alerts=alerts, **watch_opts
    ) as mon:
        for i in range(steps):
            batch = batch_fn(i)
            opt.zero_grad(set_to_none=True)
            with torch.autocast("cpu", dtype=autocast, enabled=autocast is not None):
                loss = loss_fn(model, batch)
            if scaler is not None:
                scaler.scale(loss).backward()
                if clip:
                    scaler.unscale_(opt)
                    nn.utils.clip_grad_norm_(model.parameters(), clip)
                scaler.step(opt)
                scaler.update()
            else:
                loss.backward()
                if clip:
                    nn.utils.clip_grad_norm_(model.parameters(), clip)
                opt.step()
            if scheduler is not None:
                scheduler.step()
            mon.step(loss, batch=batch)


def _mse(model: nn.Module, b: Any) -> torch.Tensor:
    x, y = b
    return F.mse_loss(model(x).float(), y)


def _ce(model: nn.Module, b: Any) -> torch.Tensor:
    x, y = b
    return F.cross_entropy(model(x).float(), y)


def _attn_ce(model: nn.Module, b: dict[str, torch.Tensor]) -> torch.Tensor:
    return F.cross_entropy(model(b["input_ids"], b["attention_mask"]).float(), b["labels"])


def _lm(model: nn.Module, b: dict[str, torch.Tensor]) -> torch.Tensor:
    return model(**b).loss


# --- healthy controls -----------------------------------------------------------------------------
@scenario("healthy-regression", "MLP regression, Adam 1e-3, noisy batches of 8")
def healthy_regression(log_dir: Path, seed: int, alerts: bool) -> None:
    data = RegressionData(seed=seed)
    model = mlp(16, 64, 1)
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    _loop(model, opt, 200, lambda i: data.batch(8), _mse, log_dir, alerts, task="regression")


@scenario("healthy-classifier", "MLP classifier, SGD momentum 0.05, step LR decay x0.1 at step 150")
def healthy_classifier(log_dir: Path, seed: int, alerts: bool) -> None:
    data = BlobData(seed=seed, spread=1.5)
    model = mlp(16, 64, 4)
    opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    sched = torch.optim.lr_scheduler.StepLR(opt, step_size=150, gamma=0.1)
    _loop(model, opt, 250, lambda i: data.batch(16), _ce, log_dir, alerts, scheduler=sched, task="classification")


@scenario("healthy-gpt2", "GPT-2 (2 layers) from config, AdamW with warm-up + cosine over the run")
def healthy_gpt2(log_dir: Path, seed: int, alerts: bool) -> None:
    model = gpt2()
    opt = torch.optim.AdamW(model.parameters(), lr=3e-3, weight_decay=0.01)
    steps, warm = 80, 8
    sched = torch.optim.lr_scheduler.LambdaLR(
        opt, lambda s: min(1.0, (s + 1) / warm) * 0.5 * (1 + math.cos(math.pi * min(s, steps) / steps))
    )
    g = torch.Generator().manual_seed(seed)
    _loop(model, opt, steps, lambda i: lm_batch(g, 8, 32, 256), _lm, log_dir, alerts, scheduler=sched, task="pretrain")


@scenario("healthy-fp16", "MLP classifier under fp16 autocast with GradScaler (normal back-offs at start)")
def healthy_fp16(log_dir: Path, seed: int, alerts: bool) -> None:
    data = BlobData(seed=seed)
    model = mlp(16, 64, 4)
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    scaler = torch.amp.GradScaler("cpu", init_scale=2.0**24, growth_interval=50)
    _loop(
        model,
        opt,
        150,
        lambda i: data.batch(16),
        _ce,
        log_dir,
        alerts,
        scaler=scaler,
        autocast=torch.float16,
        task="classification",
    )


@scenario("healthy-attention", "hand-written attention classifier with padding, Adam 3e-3")
def healthy_attention(log_dir: Path, seed: int, alerts: bool) -> None:
    model = TinyAttentionClassifier()
    opt = torch.optim.Adam(model.parameters(), lr=3e-3)
    g = torch.Generator().manual_seed(seed)
    _loop(model, opt, 120, lambda i: token_batch(g, 16, 12, 64), _attn_ce, log_dir, alerts, task="classification")


# --- faults ----------------------------------------------------------------------------------------
@scenario("nan-data", "a NaN in one feature of one sample at step 60 (bad decoding)", ("nonfinite_data",))
def nan_data(log_dir: Path, seed: int, alerts: bool) -> None:
    data = RegressionData(seed=seed)
    model = mlp(16, 64, 1)
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)

    def batch(i: int) -> Any:
        x, y = data.batch(8)
        if i == 60:
            x[5, 3] = float("nan")
        return x, y

    _loop(model, opt, 80, batch, _mse, log_dir, alerts, task="regression")


@scenario(
    "grad-explosion",
    "LR warm-up that keeps rising to 3.0 (SGD, no clipping): grads blow up",
    ("grad_explosion", "lr_too_high"),
)
def grad_explosion(log_dir: Path, seed: int, alerts: bool) -> None:
    data = RegressionData(seed=seed)
    model = mlp(16, 64, 1)
    opt = torch.optim.SGD(model.parameters(), lr=1e-2)
    sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda s: 1.05**s)
    _loop(model, opt, 200, lambda i: data.batch(16), _mse, log_dir, alerts, scheduler=sched, task="regression")


@scenario("lr-too-high", "GPT-2 with AdamW at lr 0.5 (meant 5e-4): the loss jumps at once", ("lr_too_high",))
def lr_too_high(log_dir: Path, seed: int, alerts: bool) -> None:
    model = gpt2()
    opt = torch.optim.AdamW(model.parameters(), lr=0.5)
    g = torch.Generator().manual_seed(seed)
    _loop(model, opt, 40, lambda i: lm_batch(g, 8, 32, 256), _lm, log_dir, alerts, task="pretrain")


@scenario("lr-too-low", "MLP classifier with SGD at lr 1e-5: the loss crawls", ("lr_too_low",))
def lr_too_low(log_dir: Path, seed: int, alerts: bool) -> None:
    data = BlobData(seed=seed)
    model = mlp(16, 64, 4)
    opt = torch.optim.SGD(model.parameters(), lr=1e-5)
    _loop(model, opt, 120, lambda i: data.batch(16), _ce, log_dir, alerts, task="classification")


@scenario(
    "fp16-overflow",
    "fp16 autocast + GradScaler on unnormalised features (x1e5): every step overflows and the loss scale collapses",
    ("loss_scale_collapse", "activation_overflow"),
)
def fp16_overflow(log_dir: Path, seed: int, alerts: bool) -> None:
    data = BlobData(seed=seed)
    model = mlp(16, 64, 4)
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    scaler = torch.amp.GradScaler("cpu")

    def batch(i: int) -> Any:
        x, y = data.batch(16)
        return x * 1e5, y

    _loop(model, opt, 60, batch, _ce, log_dir, alerts, scaler=scaler, autocast=torch.float16, task="classification")


class SquaredReLU(nn.Module):
    """relu(x)^2 (Primer): squares magnitudes, so fp16's 65504 is reached from activations of 256."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.relu(x).square()


@scenario(
    "fp16-activation-overflow",
    "fp16 autocast, MLP with squared-ReLU activations on features of scale 8: a hidden layer passes fp16's 65504",
    ("activation_overflow", "bad_init"),
)
def fp16_activation_overflow(log_dir: Path, seed: int, alerts: bool) -> None:
    data = BlobData(seed=seed)
    model = nn.Sequential(nn.Linear(16, 64), SquaredReLU(), nn.Linear(64, 64), SquaredReLU(), nn.Linear(64, 4))
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)

    def batch(i: int) -> Any:
        x, y = data.batch(16)
        return x * 8.0, y

    _loop(model, opt, 30, batch, _ce, log_dir, alerts, autocast=torch.float16, task="classification")


@scenario("bf16-stall", "bf16 parameters with Adam at lr 1e-5: updates round away", ("precision_stall",))
def bf16_stall(log_dir: Path, seed: int, alerts: bool) -> None:
    data = BlobData(seed=seed)
    model = mlp(16, 64, 4).to(torch.bfloat16)
    opt = torch.optim.Adam(model.parameters(), lr=1e-5)

    def batch(i: int) -> Any:
        x, y = data.batch(16)
        return x.to(torch.bfloat16), y

    _loop(model, opt, 60, batch, _ce, log_dir, alerts, task="classification")


@scenario("labels-all-masked", "GPT-2 SFT batches whose labels are all -100 (collator bug)", ("label_mask_empty",))
def labels_all_masked(log_dir: Path, seed: int, alerts: bool) -> None:
    model = gpt2()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    g = torch.Generator().manual_seed(seed)

    def batch(i: int) -> Any:
        b = lm_batch(g, 8, 32, 256)
        b["labels"][:] = -100
        return b

    _loop(model, opt, 20, batch, _lm, log_dir, alerts, task="sft")


@scenario(
    "attention-padding",
    "attention classifier; at step 50 one sequence is all padding (masked_fill -inf, softmax of a fully masked row)",
    ("attention_overflow",),
)
def attention_padding(log_dir: Path, seed: int, alerts: bool) -> None:
    model = TinyAttentionClassifier()
    opt = torch.optim.Adam(model.parameters(), lr=3e-3)
    g = torch.Generator().manual_seed(seed)

    def batch(i: int) -> Any:
        b = token_batch(g, 16, 12, 64)
        if i == 50:
            b["attention_mask"][7] = 0
            b["input_ids"][7] = 0
        return b

    _loop(model, opt, 70, batch, _attn_ce, log_dir, alerts, task="classification")


@scenario("bad-init", "GPT-2 initialised with std 1.0 instead of 0.02", ("bad_init",))
def bad_init(log_dir: Path, seed: int, alerts: bool) -> None:
    model = gpt2(std=1.0)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    g = torch.Generator().manual_seed(seed)
    _loop(model, opt, 20, lambda i: lm_batch(g, 8, 32, 256), _lm, log_dir, alerts, task="pretrain")


@scenario("vanishing", "12-layer sigmoid MLP without residuals or normalisation, SGD", ("vanishing_gradient",))
def vanishing(log_dir: Path, seed: int, alerts: bool) -> None:
    data = BlobData(seed=seed)
    model = mlp(16, 32, 4, depth=12, act=nn.Sigmoid)
    opt = torch.optim.SGD(model.parameters(), lr=0.05)
    _loop(model, opt, 120, lambda i: data.batch(16), _ce, log_dir, alerts, task="classification")


@scenario(
    "loss-spike",
    "classifier trains well; at step 300 a corrupted batch (shuffled labels, features x20) arrives",
    ("loss_spike", "nonfinite_data"),
)
def loss_spike(log_dir: Path, seed: int, alerts: bool) -> None:
    data = BlobData(seed=seed)
    model = mlp(16, 64, 4)
    opt = torch.optim.Adam(model.parameters(), lr=3e-3)

    def batch(i: int) -> Any:
        x, y = data.batch(32)
        if i == 300:
            x = x[torch.randperm(x.shape[0])] * 20.0
        return x, y

    _loop(model, opt, 340, batch, _ce, log_dir, alerts, task="classification")


@scenario(
    "cosine-too-short", "CosineAnnealingLR(T_max=50) on a 200-step run: the LR climbs back up", ("lr_schedule_error",)
)
def cosine_too_short(log_dir: Path, seed: int, alerts: bool) -> None:
    data = BlobData(seed=seed, spread=1.5)
    model = mlp(16, 64, 4)
    opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    sched = torch.optim.lr_scheduler.CosineAnnealingLR(opt, T_max=50)
    _loop(model, opt, 200, lambda i: data.batch(16), _ce, log_dir, alerts, scheduler=sched, task="classification")


@scenario(
    "warmup-per-epoch",
    "linear warm-up LambdaLR stepped once per 25-step epoch instead of per step",
    ("lr_schedule_error",),
)
def warmup_per_epoch(log_dir: Path, seed: int, alerts: bool) -> None:
    data = BlobData(seed=seed, spread=1.5)
    model = mlp(16, 64, 4)
    opt = torch.optim.AdamW(model.parameters(), lr=3e-3)
    sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda s: min(1.0, (s + 1) / 100))
    with watch(model, opt, scheduler=sched, log_dir=log_dir, task="classification", alerts=alerts) as mon:
        for i in range(200):
            x, y = data.batch(16)
            opt.zero_grad()
            loss = F.cross_entropy(model(x), y)
            loss.backward()
            opt.step()
            if (i + 1) % 25 == 0:
                sched.step()  # the bug: per epoch
            mon.step(loss, batch=(x, y))


DEFAULT_FAULT = "attention-padding"
