"""The scenarios: faulty runs, each with its acceptable causes, and healthy controls.

Faults are injected the way they happen in practice (the fault families in the project's
references): a mistyped learning rate, a scheduler stepped at the wrong cadence, a data pipeline
that lets a NaN or an unscaled column through, a collator that masks the wrong tokens, an init or
an architecture detail copied wrong, an fp16 corner. Nothing patches lossdoctor's view of a run.

Ground truth conventions:
- `causes`: every diagnosis an expert would accept as leading to a working fix;
- `onset`: the first step whose recorded loss is affected (a fault present from the start shows
  in the loss of step 1, the first one computed after an update; a bad batch at step k in the loss
  of step k); `first_nonfinite` where the failure builds up and the first NaN is the event;
- `layers` / `ops` / `samples`: where the fault physically is, when it has such a place.
"""

from __future__ import annotations

import math
import warnings
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn

from .data import SFT, Blobs, MarkovLM, Regression, Sequences, Squares, gen, lm_loss
from .harness import FIRST_NONFINITE, Setup, scenario
from .models import CNN, MLP, NaNOnce, ResMLP, SeqClassifier, TinyTransformer, gpt2

# --- losses ------------------------------------------------------------------------------------


def mse(model: nn.Module, batch: Any) -> torch.Tensor:
    x, y = batch
    return F.mse_loss(model(x).float(), y)


def xent(model: nn.Module, batch: Any) -> torch.Tensor:
    x, y = batch
    return F.cross_entropy(model(x).float(), y)


def hf_loss(model: nn.Module, batch: Any) -> torch.Tensor:
    return model(**batch).loss


def tiny_lm(model: nn.Module, batch: Any) -> torch.Tensor:
    return lm_loss(model(batch["input_ids"], batch.get("attention_mask")), batch["labels"])


def adamw(model: nn.Module, lr: float, **kw: Any) -> torch.optim.Optimizer:
    return torch.optim.AdamW(model.parameters(), lr=lr, **kw)


def sgd(model: nn.Module, lr: float, momentum: float = 0.9) -> torch.optim.Optimizer:
    return torch.optim.SGD(model.parameters(), lr=lr, momentum=momentum)


def warmup_cosine(opt: torch.optim.Optimizer, warmup: int, total: int) -> torch.optim.lr_scheduler.LambdaLR:
    def f(step: int) -> float:
        if step < warmup:
            return (step + 1) / warmup
        return 0.5 * (1 + math.cos(math.pi * min(1.0, (step - warmup) / max(1, total - warmup))))

    return torch.optim.lr_scheduler.LambdaLR(opt, f)


# =============================================================================================
# Learning rate and schedule
# =============================================================================================


@scenario(
    "mlp_sgd_lr_x100",
    family="mlp",
    optimizer="SGD",
    precision="fp32",
    task="regression",
    causes={"lr_too_high", "grad_explosion"},
    onset=1,
    ci=True,
    fault="SGD learning rate typed 100x too large (5.0 instead of 0.05)",
)
def _(seed: int) -> Setup:
    data = Regression(seed)
    model = MLP(16, 1)
    return Setup(model, sgd(model, 5.0), data.batch, mse, steps=120)


@scenario(
    "gpt2_adamw_lr_x100",
    family="gpt2",
    optimizer="AdamW",
    precision="fp32",
    task="pretrain",
    causes={"lr_too_high"},
    onset=1,
    ci=True,
    fault="AdamW learning rate 0.3 instead of 3e-3 on a transformers GPT-2",
)
def _(seed: int) -> Setup:
    data = MarkovLM(seed)
    model = gpt2()
    return Setup(model, adamw(model, 0.3), data.batch, hf_loss, steps=120)


@scenario(
    "lstm_sgd_lr_x100",
    family="lstm",
    optimizer="SGD",
    precision="fp32",
    task="classification",
    causes={"lr_too_high", "grad_explosion"},
    onset=1,
    fault="SGD learning rate 20 instead of 0.2 on an LSTM, no clipping",
)
def _(seed: int) -> Setup:
    data = Sequences(seed)
    model = SeqClassifier(4, 4)
    return Setup(model, sgd(model, 20.0), data.batch, xent, steps=120)


@scenario(
    "cnn_adam_lr_scaled_for_big_batch",
    family="cnn",
    optimizer="Adam",
    precision="fp32",
    task="classification",
    causes={"lr_too_high", "lr_schedule_error"},
    onset=1,
    fault="Adam LR linearly scaled for a global batch of 4096 (x128) while the real batch is 32",
)
def _(seed: int) -> Setup:
    data = Squares(seed, noise=1.1)
    model = CNN()
    return Setup(model, torch.optim.Adam(model.parameters(), lr=1e-3 * 128), data.batch, xent, steps=120)


@scenario(
    "mlp_grad_accum_unnormalised",
    family="mlp",
    optimizer="SGD",
    precision="fp32",
    task="classification",
    causes={"grad_accum_normalization", "lr_too_high", "grad_explosion"},
    onset=1,
    fault="8 micro-batches accumulated without dividing the loss by 8 (LR tuned for the mean)",
)
def _(seed: int) -> Setup:
    data = Blobs(seed, spread=3.0)
    model = MLP(32, 10, hidden=64)

    def micro(step: int) -> list:
        return [data.batch(step * 8 + i, batch_size=8) for i in range(8)]

    return Setup(model, sgd(model, 1.0, momentum=0.9), micro, xent, steps=100, accum=8)


# vanishing_gradient is acceptable here: the first layers of a post-LN stack get ~1e-3 of the last
# layers' gradient (Xiong et al. 2020), and its fix, pre-LN, trains this model at this LR without
# warm-up (checked: loss 4.4 -> 2.0 in 150 steps, seeds 0 and 1).
@scenario(
    "attn_postln_no_warmup",
    family="attention",
    optimizer="Adam",
    precision="fp32",
    task="pretrain",
    causes={"lr_schedule_error", "lr_too_high", "vanishing_gradient"},
    fault="6-layer post-LN transformer at its peak LR 3e-2 from step 0: the 30-step warm-up was left out, it sticks near chance",
)
def _(seed: int) -> Setup:
    data = MarkovLM(seed)
    model = TinyTransformer(pre_ln=False, n_layer=6)
    return Setup(model, torch.optim.Adam(model.parameters(), lr=3e-2), data.batch, tiny_lm, steps=150)


@scenario(
    "gpt2_warmup_stepped_per_epoch",
    family="gpt2",
    optimizer="AdamW",
    precision="fp32",
    task="pretrain",
    causes={"lr_schedule_error", "lr_too_low"},
    fault="a 100-step linear warm-up scheduler stepped once per epoch (40 batches): LR stays at 1-4% of its 3e-3 target",
)
def _(seed: int) -> Setup:
    data = MarkovLM(seed)
    model = gpt2()
    opt = adamw(model, 3e-3)
    sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda s: min(1.0, (s + 1) / 100))
    return Setup(model, opt, data.batch, hf_loss, steps=160, scheduler=sched, sched_every=40)


@scenario(
    "cnn_steplr_stepped_per_batch",
    family="cnn",
    optimizer="SGD",
    precision="fp32",
    task="classification",
    causes={"lr_schedule_error", "lr_too_low"},
    fault="StepLR(step_size=10, gamma=0.1) meant per epoch, stepped every batch: LR is 1e-12 by step 110",
)
def _(seed: int) -> Setup:
    data = Squares(seed)
    model = CNN()
    opt = sgd(model, 0.02)
    sched = torch.optim.lr_scheduler.StepLR(opt, step_size=10, gamma=0.1)
    return Setup(model, opt, data.batch, xent, steps=200, scheduler=sched)


@scenario(
    "mlp_cosine_tmax_too_short",
    family="mlp",
    optimizer="AdamW",
    precision="fp32",
    task="classification",
    causes={"lr_schedule_error"},
    fault="CosineAnnealingLR(T_max=30) on a 240-step run: LR hits 0 at step 30, then climbs back",
)
def _(seed: int) -> Setup:
    data = Blobs(seed)
    model = MLP(32, 10)
    opt = adamw(model, 3e-3)
    sched = torch.optim.lr_scheduler.CosineAnnealingLR(opt, T_max=30)
    return Setup(model, opt, data.batch, xent, steps=240, scheduler=sched)


@scenario(
    "mlp_sgd_lr_too_low",
    family="mlp",
    optimizer="SGD",
    precision="fp32",
    task="classification",
    causes={"lr_too_low"},
    ci=True,
    fault="SGD learning rate 1e-5 (meant 1e-1): the loss crawls",
)
def _(seed: int) -> Setup:
    data = Blobs(seed)
    model = MLP(32, 10)
    return Setup(model, sgd(model, 1e-5), data.batch, xent, steps=200)


@scenario(
    "gpt2_adafactor_lr_too_low",
    family="gpt2",
    optimizer="Adafactor",
    precision="fp32",
    task="pretrain",
    causes={"lr_too_low"},
    fault="torch Adafactor with lr=1e-6 (meant 1e-2)",
)
def _(seed: int) -> Setup:
    data = MarkovLM(seed)
    model = gpt2()
    return Setup(model, torch.optim.Adafactor(model.parameters(), lr=1e-6), data.batch, hf_loss, steps=150)


@scenario(
    "mlp_optimizer_on_stale_model",
    family="mlp",
    optimizer="Adam",
    precision="fp32",
    task="classification",
    causes={"frozen_model"},
    fault="the model is re-created after the optimizer was built: the optimizer steps the old "
    "model's parameters, the trained one never changes",
)
def _(seed: int) -> Setup:
    data = Blobs(seed)
    stale = MLP(32, 10)
    opt = torch.optim.Adam(stale.parameters(), lr=1e-3)
    model = MLP(32, 10)  # e.g. reloaded from a checkpoint after the optimizer was made
    return Setup(model, opt, data.batch, xent, steps=150)


# =============================================================================================
# Data
# =============================================================================================


@scenario(
    "mlp_nan_in_features",
    family="mlp",
    optimizer="Adam",
    precision="fp32",
    task="regression",
    causes={"nonfinite_data"},
    onset=60,
    samples=(3,),
    ci=True,
    fault="a row with a NaN feature (failed parse) reaches the model in batch 60, sample 3",
)
def _(seed: int) -> Setup:
    data = Regression(seed)
    model = MLP(16, 1)

    def batches(step: int):
        x, y = data.batch(step)
        if step == 60:
            x[3, 5] = float("nan")
        return x, y

    return Setup(model, torch.optim.Adam(model.parameters(), lr=1e-3), batches, mse, steps=100)


@scenario(
    "mlp_inf_in_target",
    family="mlp",
    optimizer="SGD",
    precision="fp32",
    task="regression",
    causes={"nonfinite_data"},
    onset=80,
    samples=(5,),
    fault="a target of +inf (division by zero in the label pipeline) in batch 80, sample 5",
)
def _(seed: int) -> Setup:
    data = Regression(seed)
    model = MLP(16, 1)

    def batches(step: int):
        x, y = data.batch(step)
        if step == 80:
            y[5, 0] = float("inf")
        return x, y

    return Setup(model, sgd(model, 0.05), batches, mse, steps=120)


@scenario(
    "cnn_nan_image",
    family="cnn",
    optimizer="SGD",
    precision="fp32",
    task="classification",
    causes={"nonfinite_data"},
    onset=50,
    samples=(2,),
    fault="a corrupt image decodes to NaN pixels: batch 50, sample 2",
)
def _(seed: int) -> Setup:
    data = Squares(seed)
    model = CNN()

    def batches(step: int):
        x, y = data.batch(step)
        if step == 50:
            x[2, 0, 4:8, 4:8] = float("nan")
        return x, y

    return Setup(model, sgd(model, 0.05), batches, xent, steps=90, replay=True)


@scenario(
    "mlp_unnormalised_features",
    family="mlp",
    optimizer="SGD",
    precision="fp32",
    task="regression",
    causes={"nonfinite_data", "lr_too_high", "grad_explosion"},
    onset=1,
    fault="three columns left in raw units (x1000) by a forgotten StandardScaler",
)
def _(seed: int) -> Setup:
    data = Regression(seed)
    model = MLP(16, 1)

    def batches(step: int):
        x, y = data.batch(step)
        x[:, :3] = x[:, :3] * 1000.0 + 5000.0
        return x, y

    return Setup(model, sgd(model, 0.05), batches, mse, steps=100)


@scenario(
    "mlp_label_noise",
    family="mlp",
    optimizer="Adam",
    precision="fp32",
    task="classification",
    causes={"noisy_data"},
    fault="80% of labels replaced by random classes (a broken annotation merge)",
)
def _(seed: int) -> Setup:
    data = Blobs(seed)
    model = MLP(32, 10)

    def batches(step: int):
        x, y = data.batch(step)
        g = torch.Generator().manual_seed(seed * 31 + step)
        noisy = torch.rand(y.shape, generator=g) < 0.8
        y = torch.where(noisy, torch.randint(0, 10, y.shape, generator=g), y)
        return x, y

    return Setup(model, torch.optim.Adam(model.parameters(), lr=1e-3), batches, xent, steps=240)


@scenario(
    "cnn_labels_misaligned",
    family="cnn",
    optimizer="SGD",
    precision="fp32",
    task="classification",
    causes={"noisy_data", "labels_misaligned"},
    fault="images and labels come from different batches (an off-by-one in a zipped loader)",
)
def _(seed: int) -> Setup:
    data = Squares(seed)
    model = CNN()

    def batches(step: int):
        x, _ = data.batch(step)
        _, y = data.batch(step + 1)
        return x, y

    return Setup(model, sgd(model, 0.05), batches, xent, steps=200)


@scenario(
    "mlp_loss_spike_corrupted_batch",
    family="mlp",
    optimizer="Adam",
    precision="fp32",
    task="regression",
    causes={"loss_spike", "nonfinite_data"},
    onset=200,
    samples=(1, 4, 9, 12),
    fault="late in training (step 200 of 240) four rows of one batch come from a shard written in other units (x30)",
)
def _(seed: int) -> Setup:
    data = Regression(seed)
    model = MLP(16, 1)

    def batches(step: int):
        x, y = data.batch(step)
        if step == 200:
            x[[1, 4, 9, 12]] *= 30.0
        return x, y

    return Setup(model, torch.optim.Adam(model.parameters(), lr=3e-3), batches, mse, steps=240, replay=True)


@scenario(
    "gpt2_corrupted_shard_spike",
    family="gpt2",
    optimizer="AdamW",
    precision="fp32",
    task="pretrain",
    causes={"loss_spike", "noisy_data"},
    onset=150,
    fault="at step 150 of 180 a batch of random tokens (a binary file that slipped into the corpus)",
)
def _(seed: int) -> Setup:
    data = MarkovLM(seed)
    model = gpt2()

    def batches(step: int):
        b = data.batch(step)
        if step == 150:
            g = torch.Generator().manual_seed(seed + 999)
            ids = torch.randint(4, data.vocab, b["input_ids"].shape, generator=g)
            b = {"input_ids": ids, "attention_mask": torch.ones_like(ids), "labels": ids.clone()}
        return b

    return Setup(model, adamw(model, 3e-3), batches, hf_loss, steps=180)


# =============================================================================================
# SFT label masks
# =============================================================================================


@scenario(
    "gpt2_sft_all_labels_masked",
    family="gpt2",
    optimizer="AdamW",
    precision="fp32",
    task="sft",
    causes={"label_mask_empty"},
    onset=0,
    ci=True,
    fault="the collator masks the response as well as the prompt: every label is -100",
)
def _(seed: int) -> Setup:
    data = SFT(seed)
    model = gpt2()

    def batches(step: int):
        b = data.batch(step)
        b["labels"] = torch.full_like(b["labels"], -100)
        return b

    return Setup(model, adamw(model, 1e-3), batches, hf_loss, steps=60)


@scenario(
    "gpt2_sft_truncated_batch",
    family="gpt2",
    optimizer="AdamW",
    precision="fp32",
    task="sft",
    causes={"label_mask_empty"},
    onset=40,
    samples=tuple(range(8)),
    fault="batch 40 holds only long prompts: max_length truncation cuts every response, no label left",
)
def _(seed: int) -> Setup:
    data = SFT(seed)
    model = gpt2()

    def batches(step: int):
        if step == 40:
            return data.batch(step, prompt_len=(22, 30))
        return data.batch(step)

    return Setup(model, adamw(model, 1e-3), batches, hf_loss, steps=80, replay=True)


@scenario(
    "gpt2_sft_prompt_not_masked",
    family="gpt2",
    optimizer="AdamW",
    precision="fp32",
    task="sft",
    causes={"label_mask_leak"},
    fault="labels = input_ids: the prompt is supervised too (the model learns to copy its input)",
)
def _(seed: int) -> Setup:
    data = SFT(seed, mask_prompt=False)
    model = gpt2()
    return Setup(model, adamw(model, 1e-3), data.batch, hf_loss, steps=120)


# =============================================================================================
# Initialisation and architecture
# =============================================================================================


@scenario(
    "mlp_init_std_1",
    family="mlp",
    optimizer="SGD",
    precision="fp32",
    task="classification",
    causes={"bad_init"},
    onset=0,
    fault="weights initialised with nn.init.normal_(std=1.0) on 256-wide layers",
)
def _(seed: int) -> Setup:
    data = Blobs(seed)
    model = MLP(32, 10, hidden=256, depth=3)
    for m in model.modules():
        if isinstance(m, nn.Linear):
            nn.init.normal_(m.weight, std=1.0)
    return Setup(model, sgd(model, 1e-3), data.batch, xent, steps=100)


@scenario(
    "gpt2_initializer_range_1",
    family="gpt2",
    optimizer="AdamW",
    precision="fp32",
    task="pretrain",
    causes={"bad_init"},
    onset=0,
    fault="GPT2Config(initializer_range=1.0) instead of 0.02",
)
def _(seed: int) -> Setup:
    data = MarkovLM(seed)
    model = gpt2(initializer_range=1.0)
    return Setup(model, adamw(model, 1e-3), data.batch, hf_loss, steps=100)


def _lecun(model: nn.Module) -> None:
    for m in model.modules():
        if isinstance(m, nn.Linear):
            nn.init.normal_(m.weight, std=1.0 / math.sqrt(m.in_features))
            nn.init.zeros_(m.bias)


@scenario(
    "resmlp_no_residual_scaling",
    family="mlp",
    optimizer="Adam",
    precision="fp32",
    task="regression",
    causes={"bad_init"},
    onset=0,
    fault="48 residual blocks, variance-preserving init, no 1/sqrt(N) branch scaling, no norm: the stream grows 1.4x a block",
)
def _(seed: int) -> Setup:
    data = Regression(seed)
    model = ResMLP(16, 1, d=32, n_blocks=48, residual_scaling=False)
    _lecun(model)
    return Setup(model, torch.optim.Adam(model.parameters(), lr=1e-3), data.batch, mse, steps=80)


@scenario(
    "mlp_deep_sigmoid_vanishing",
    family="mlp",
    optimizer="SGD",
    precision="fp32",
    task="classification",
    causes={"vanishing_gradient"},
    layers=("net.0", "net.2"),
    ci=True,
    fault="16 sigmoid layers without residuals or normalisation",
)
def _(seed: int) -> Setup:
    data = Blobs(seed)
    model = MLP(32, 10, hidden=32, depth=16, act=nn.Sigmoid)
    return Setup(model, sgd(model, 0.05), data.batch, xent, steps=150)


@scenario(
    "rnn_relu_exploding",
    family="rnn",
    optimizer="SGD",
    precision="fp32",
    task="classification",
    causes={"grad_explosion", "bad_init"},
    onset=FIRST_NONFINITE,
    fault="ReLU RNN over 40 steps, recurrent matrix initialised with gain 1.2, no gradient clipping",
)
def _(seed: int) -> Setup:
    data = Sequences(seed, length=40)
    model = SeqClassifier(4, 4, hidden=32, cell="rnn", nonlinearity="relu")
    with torch.no_grad():
        nn.init.orthogonal_(model.rnn.weight_hh_l0, gain=1.2)
    return Setup(model, sgd(model, 0.1), data.batch, xent, steps=150)


# =============================================================================================
# Attention
# =============================================================================================


@scenario(
    "attn_empty_document",
    family="attention",
    optimizer="AdamW",
    precision="fp32",
    task="pretrain",
    causes={"attention_overflow"},
    onset=30,
    samples=(5,),
    layers=("blocks.0.attn",),
    ops=("softmax",),
    ci=True,
    fault="an empty document in batch 30 (sample 5) is all padding: its attention rows are all -inf, softmax gives NaN",
)
def _(seed: int) -> Setup:
    data = MarkovLM(seed)
    model = TinyTransformer()

    def batches(step: int):
        b = data.batch(step)
        mask = b["attention_mask"]
        mask[:, 28:] = 0  # ordinary right padding
        if step == 30:
            mask[5] = 0
        b["labels"] = b["input_ids"].masked_fill(mask == 0, -100)
        return b

    return Setup(model, adamw(model, 3e-3), batches, tiny_lm, steps=60, replay=True)


@scenario(
    "attn_naive_softmax_fp16",
    family="attention",
    optimizer="AdamW",
    precision="fp16-amp",
    task="pretrain",
    causes={"attention_overflow", "activation_overflow"},
    onset=FIRST_NONFINITE,
    layers=("blocks.0.attn", "blocks.1.attn"),
    ops=("exp",),
    fault="softmax written as exp(s)/sum(exp(s)) without max-subtraction or 1/sqrt(d), under fp16 autocast",
)
def _(seed: int) -> Setup:
    data = MarkovLM(seed)
    model = TinyTransformer(d=64, heads=1, scaled=False, safe_softmax=False)
    return Setup(
        model,
        adamw(model, 3e-3),
        data.batch,
        tiny_lm,
        steps=60,
        autocast=torch.float16,
        scaler=torch.amp.GradScaler("cpu"),
        replay=True,
    )


# =============================================================================================
# Precision
# =============================================================================================


class SumPool(nn.Module):
    """Sum over the sequence (a mean-pool written as a sum): fine in fp32, beyond 65504 in fp16."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x.sum(dim=1)


class PoolNet(nn.Module):
    def __init__(self, d_in: int, n_classes: int, d: int = 32) -> None:
        super().__init__()
        self.embed = nn.Linear(d_in, d)
        self.pool = SumPool()
        self.head = nn.Linear(d, n_classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(self.pool(self.embed(x)))


@scenario(
    "fp16_sum_pool_overflow",
    family="mlp",
    optimizer="Adam",
    precision="fp16-amp",
    task="classification",
    causes={"activation_overflow"},
    onset=0,
    layers=("pool",),
    fault="sequence pooled with sum instead of mean over 2048 positions of raw 0-255 features, fp16 autocast",
)
def _(seed: int) -> Setup:
    data = Sequences(seed, length=2048, batch_size=8)
    model = PoolNet(4, 4)

    def batches(step: int):
        x, y = data.batch(step)
        return (x * 40 + 128).clamp(0, 255), y

    return Setup(
        model,
        torch.optim.Adam(model.parameters(), lr=1e-3),
        batches,
        xent,
        steps=80,
        autocast=torch.float16,
        scaler=torch.amp.GradScaler("cpu"),
        replay=True,
    )


@scenario(
    "fp16_loss_sum_scale_collapse",
    family="mlp",
    optimizer="AdamW",
    precision="fp16-amp",
    task="regression",
    causes={"loss_scale_collapse"},
    fault="MSE with reduction='sum' over a 4096-row batch times a 1e3 loss weight under fp16: the GradScaler backs off below 1",
)
def _(seed: int) -> Setup:
    data = Regression(seed, batch_size=4096)
    model = MLP(16, 1, hidden=64)

    def loss(model: nn.Module, batch: Any) -> torch.Tensor:
        x, y = batch
        return 1e3 * F.mse_loss(model(x).float(), y, reduction="sum")

    return Setup(
        model,
        adamw(model, 1e-3),
        data.batch,
        loss,
        steps=80,
        autocast=torch.float16,
        scaler=torch.amp.GradScaler("cpu"),
    )


class PairDistance(nn.Module):
    """Euclidean distance between every pair of embeddings, written with a bare sqrt: its
    gradient at distance 0 (each sample with itself) is 0 * inf = NaN, at every loss scale."""

    def forward(self, e: torch.Tensor) -> torch.Tensor:
        return torch.sqrt(((e[:, None, :] - e[None, :, :]) ** 2).sum(-1))


class MetricNet(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.embed = MLP(16, 8, hidden=32)
        self.dist = PairDistance()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.dist(self.embed(x))


def contrastive(model: nn.Module, batch: Any) -> torch.Tensor:
    x, y = batch
    d = model(x).float()
    same = (y[:, None] == y[None, :]).float()
    return (same * d**2 + (1 - same) * F.relu(1.0 - d) ** 2).mean()


@scenario(
    "fp16_pairwise_sqrt_scale_collapse",
    family="mlp",
    optimizer="AdamW",
    precision="fp16-amp",
    task="regression",
    causes={"loss_scale_collapse"},
    onset=0,
    layers=("dist",),
    ops=("sqrt",),
    fault="contrastive loss on torch.sqrt of squared distances: NaN gradient on the diagonal at any scale; GradScaler skips every step and the scale falls to 0",
)
def _(seed: int) -> Setup:
    data = Blobs(seed, d_in=16, n_classes=4)
    model = MetricNet()
    return Setup(
        model,
        adamw(model, 1e-3),
        data.batch,
        contrastive,
        steps=80,
        autocast=torch.float16,
        scaler=torch.amp.GradScaler("cpu"),
        replay=True,
    )


@scenario(
    "mlp_bf16_params_sgd_stall",
    family="mlp",
    optimizer="SGD",
    precision="bf16",
    task="regression",
    causes={"precision_stall", "lr_too_low"},
    fault="pure bf16 parameters with SGD lr 1e-3: most updates fall below bf16 resolution and round away",
)
def _(seed: int) -> Setup:
    data = Regression(seed)
    model = MLP(16, 1).to(torch.bfloat16)

    def loss(model: nn.Module, batch: Any) -> torch.Tensor:
        x, y = batch
        return F.mse_loss(model(x.to(torch.bfloat16)).float(), y)

    return Setup(model, sgd(model, 1e-3, momentum=0.0), data.batch, loss, steps=200)


@scenario(
    "mlp_fp16_adam_eps",
    family="mlp",
    optimizer="Adam",
    precision="fp16",
    task="regression",
    causes={"precision_stall"},
    onset=1,
    fault="model.half() trained with Adam(eps=1e-8): eps is 0 in fp16 and tiny gradients give 0/0",
)
def _(seed: int) -> Setup:
    data = Regression(seed)
    model = MLP(16, 1).half()

    def loss(model: nn.Module, batch: Any) -> torch.Tensor:
        x, y = batch
        return F.mse_loss(model(x.half()).float(), y)

    return Setup(model, torch.optim.Adam(model.parameters(), lr=1e-3, eps=1e-8), data.batch, loss, steps=60)


# =============================================================================================
# Training-loop bugs (Karpathy's and Tobin's lists, the forums' recurring threads)
# =============================================================================================


@scenario(
    "mlp_sgd_grad_never_zeroed",
    family="mlp",
    optimizer="SGD",
    precision="fp32",
    task="classification",
    causes={"grad_not_zeroed"},
    onset=1,
    ci=True,
    fault="the loop never calls optimizer.zero_grad(): every step adds its gradient to all the previous ones",
)
def _(seed: int) -> Setup:
    data = Blobs(seed)
    model = MLP(32, 10)
    return Setup(model, sgd(model, 0.02), data.batch, xent, steps=100, zero_grad=False)


@scenario(
    "healthy_mlp_grad_accum_on_purpose",
    family="mlp",
    optimizer="SGD",
    precision="fp32",
    task="classification",
    ci=True,
    fault="none: 4 micro-batches accumulated into each step on purpose (loss / 4, zero_grad once per step)",
)
def _(seed: int) -> Setup:
    data = Blobs(seed)
    model = MLP(32, 10)

    def micro(step: int) -> list:
        return [data.batch(step * 4 + i, batch_size=8) for i in range(4)]

    return Setup(model, sgd(model, 0.02), micro, lambda m, b: xent(m, b) / 4, steps=100, accum=4)


@scenario(
    "mlp_softmax_before_cross_entropy",
    family="mlp",
    optimizer="Adam",
    precision="fp32",
    task="classification",
    causes={"softmax_before_loss"},
    onset=1,
    ci=True,
    fault="the model ends in nn.Softmax and its probabilities go to F.cross_entropy, which applies its own softmax",
)
def _(seed: int) -> Setup:
    data = Blobs(seed)
    model = nn.Sequential(MLP(32, 10), nn.Softmax(dim=-1))
    return Setup(model, torch.optim.Adam(model.parameters(), lr=3e-3), data.batch, xent, steps=120)


def _nll_of_probs(model: nn.Module, batch: Any) -> torch.Tensor:
    x, y = batch
    return F.nll_loss(model(x).clamp_min(1e-12).log(), y)


@scenario(
    "healthy_mlp_softmax_output_nll",
    family="mlp",
    optimizer="Adam",
    precision="fp32",
    task="classification",
    ci=True,
    fault="none: the model ends in nn.Softmax on purpose and the loss is nll_loss(log p)",
)
def _(seed: int) -> Setup:
    data = Blobs(seed)
    model = nn.Sequential(MLP(32, 10), nn.Softmax(dim=-1))
    return Setup(model, torch.optim.Adam(model.parameters(), lr=3e-3), data.batch, _nll_of_probs, steps=120)


def _smoothed(model: nn.Module, batch: Any) -> torch.Tensor:
    x, y = batch
    return F.cross_entropy(model(x).float(), y, label_smoothing=0.2)


@scenario(
    "healthy_mlp_label_smoothing_floor",
    family="mlp",
    optimizer="Adam",
    precision="fp32",
    task="classification",
    fault="none: cross-entropy with label_smoothing=0.2: the loss levels off at the smoothing's floor, far above 0",
)
def _(seed: int) -> Setup:
    data = Blobs(seed)
    model = MLP(32, 10)
    return Setup(model, torch.optim.Adam(model.parameters(), lr=3e-3), data.batch, _smoothed, steps=120)


@scenario(
    "mlp_frozen_by_mistake",
    family="mlp",
    optimizer="Adam",
    precision="fp32",
    task="classification",
    causes={"frozen_model"},
    onset=1,
    ci=True,
    fault="requires_grad=False left on every parameter but the output bias: 10 trainable of 6,922",
)
def _(seed: int) -> Setup:
    data = Blobs(seed)
    model = MLP(32, 10)
    for p in model.parameters():
        p.requires_grad_(False)
    model.net[-1].bias.requires_grad_(True)
    opt = torch.optim.Adam([p for p in model.parameters() if p.requires_grad], lr=3e-3)
    return Setup(model, opt, data.batch, xent, steps=120)


@scenario(
    "healthy_mlp_frozen_backbone_head",
    family="mlp",
    optimizer="Adam",
    precision="fp32",
    task="classification",
    ci=True,
    fault="none: the backbone frozen on purpose, the output layer (650 of 6,922 parameters) trained",
)
def _(seed: int) -> Setup:
    data = Blobs(seed)
    model = MLP(32, 10)
    for p in model.parameters():
        p.requires_grad_(False)
    for p in model.net[-1].parameters():
        p.requires_grad_(True)
    opt = torch.optim.Adam([p for p in model.parameters() if p.requires_grad], lr=3e-3)
    return Setup(model, opt, data.batch, xent, steps=120)


@scenario(
    "mlp_warmup_in_samples",
    family="mlp",
    optimizer="AdamW",
    precision="fp32",
    task="classification",
    causes={"lr_schedule_error", "lr_too_low"},
    onset=1,
    ci=True,
    fault="a 100-step warm-up sized in samples (100 x 32 = 3,200) while the scheduler steps per optimizer "
    "step: over the 120-step run the LR only rises, to 1/27 of its peak",
)
def _(seed: int) -> Setup:
    data = Blobs(seed)
    model = MLP(32, 10)
    opt = adamw(model, 3e-3)
    return Setup(model, opt, data.batch, xent, steps=120, scheduler=warmup_cosine(opt, 3200, 12000))


@scenario(
    "healthy_mlp_one_cycle",
    family="mlp",
    optimizer="AdamW",
    precision="fp32",
    task="classification",
    ci=True,
    fault="none: OneCycleLR over the 120 steps (the LR rises for 30% of the run, then anneals)",
)
def _(seed: int) -> Setup:
    data = Blobs(seed)
    model = MLP(32, 10)
    opt = adamw(model, 3e-3)
    sched = torch.optim.lr_scheduler.OneCycleLR(opt, max_lr=3e-3, total_steps=120)
    return Setup(model, opt, data.batch, xent, steps=120, scheduler=sched)


@scenario(
    "mlp_one_cycle_planned_50x",
    family="mlp",
    optimizer="AdamW",
    precision="fp32",
    task="classification",
    causes={"lr_schedule_error", "lr_too_low"},
    onset=1,
    ci=True,
    fault="OneCycleLR(total_steps=6000) on a 120-step run (the plan counted in samples, not optimizer "
    "steps): the LR stays in the one-cycle's warm-up, near max_lr / 25, for the whole run",
)
def _(seed: int) -> Setup:
    data = Blobs(seed)
    model = MLP(32, 10)
    opt = adamw(model, 3e-3)
    sched = torch.optim.lr_scheduler.OneCycleLR(opt, max_lr=3e-3, total_steps=50 * 120)
    return Setup(model, opt, data.batch, xent, steps=120, scheduler=sched)


@scenario(
    "mlp_cosine_planned_50x",
    family="mlp",
    optimizer="SGD",
    precision="fp32",
    task="classification",
    causes={"lr_schedule_error"},
    onset=1,
    ci=True,
    fault="CosineAnnealingLR(T_max=8000) on a 160-step run (T_max counted in samples): the LR never decays",
)
def _(seed: int) -> Setup:
    data = Blobs(seed)
    model = MLP(32, 10)
    opt = sgd(model, 0.05)
    sched = torch.optim.lr_scheduler.CosineAnnealingLR(opt, T_max=50 * 160)
    return Setup(model, opt, data.batch, xent, steps=160, scheduler=sched)


def warmup_linear(opt: torch.optim.Optimizer, warmup: int, total: int) -> torch.optim.lr_scheduler.LambdaLR:
    """HF's get_linear_schedule_with_warmup, written out: its length lives in the lambda's closure."""
    return torch.optim.lr_scheduler.LambdaLR(
        opt, lambda s: s / warmup if s < warmup else max(0.0, (total - s) / max(1, total - warmup))
    )


@scenario(
    "mlp_hf_linear_planned_in_samples",
    family="mlp",
    optimizer="AdamW",
    precision="fp32",
    task="classification",
    causes={"lr_schedule_error"},
    onset=1,
    ci=True,
    fault="an HF-style linear warm-up/decay LambdaLR with num_training_steps counted in samples (32 x 120) "
    "on a 120-step run: past its 10-step warm-up the LR never decays (97% of its peak at the end)",
)
def _(seed: int) -> Setup:
    data = Blobs(seed)
    model = MLP(32, 10)
    opt = adamw(model, 3e-3)
    return Setup(model, opt, data.batch, xent, steps=120, scheduler=warmup_linear(opt, 10, 32 * 120))


@scenario(
    "healthy_mlp_hf_linear_sized_right",
    family="mlp",
    optimizer="AdamW",
    precision="fp32",
    task="classification",
    ci=True,
    fault="none: the same HF-style linear warm-up/decay LambdaLR with num_training_steps=120 over the "
    "120-step run: the LR decays to 0 at the last step",
)
def _(seed: int) -> Setup:
    data = Blobs(seed)
    model = MLP(32, 10)
    opt = adamw(model, 3e-3)
    return Setup(model, opt, data.batch, xent, steps=120, scheduler=warmup_linear(opt, 10, 120))


@scenario(
    "healthy_mlp_cosine_sized_right",
    family="mlp",
    optimizer="SGD",
    precision="fp32",
    task="classification",
    ci=True,
    fault="none: CosineAnnealingLR(T_max=160) over the 160-step run: the LR decays to 0 at the last step",
)
def _(seed: int) -> Setup:
    data = Blobs(seed)
    model = MLP(32, 10)
    opt = sgd(model, 0.05)
    sched = torch.optim.lr_scheduler.CosineAnnealingLR(opt, T_max=160)
    return Setup(model, opt, data.batch, xent, steps=160, scheduler=sched)


@scenario(
    "healthy_mlp_sgdr_restarts",
    family="mlp",
    optimizer="SGD",
    precision="fp32",
    task="classification",
    ci=True,
    fault="none: CosineAnnealingWarmRestarts(T_0=30): the LR restarts at its peak every 30 steps on purpose",
)
def _(seed: int) -> Setup:
    data = Blobs(seed)
    model = MLP(32, 10)
    opt = sgd(model, 0.05)
    sched = torch.optim.lr_scheduler.CosineAnnealingWarmRestarts(opt, T_0=30)
    return Setup(model, opt, data.batch, xent, steps=120, scheduler=sched)


@scenario(
    "mlp_data_sorted_by_class",
    family="mlp",
    optimizer="Adam",
    precision="fp32",
    task="classification",
    causes={"unshuffled_data"},
    onset=12,
    ci=True,
    fault="the dataset is sorted by class and not shuffled: 12 batches of class 0, then 12 of class 1, ...",
)
def _(seed: int) -> Setup:
    data = Blobs(seed)
    model = MLP(32, 10)

    def batches(step: int):
        x, y = data.batch(step)
        c = (step // 12) % 10
        return x - data.centres[y] + data.centres[c], torch.full_like(y, c)

    return Setup(model, torch.optim.Adam(model.parameters(), lr=3e-3), batches, xent, steps=120)


@scenario(
    "healthy_mlp_binary_batch4",
    family="mlp",
    optimizer="Adam",
    precision="fp32",
    task="classification",
    fault="none: a shuffled two-class problem in batches of 4, so one batch in eight holds a single class",
)
def _(seed: int) -> Setup:
    data = Blobs(seed, n_classes=2, batch_size=4, spread=2.0)
    model = MLP(32, 2)
    return Setup(model, torch.optim.Adam(model.parameters(), lr=1e-3), data.batch, xent, steps=120)


def _lm_no_shift(model: nn.Module, batch: Any) -> torch.Tensor:
    logits = model(batch["input_ids"], batch.get("attention_mask"))
    return F.cross_entropy(logits.reshape(-1, logits.shape[-1]).float(), batch["input_ids"].reshape(-1))


@scenario(
    "attn_labels_not_shifted",
    family="attention",
    optimizer="AdamW",
    precision="fp32",
    task="pretrain",
    causes={"labels_not_shifted"},
    onset=1,
    ci=True,
    fault="the LM loss compares the logits at position t with input_ids[t] (labels = inputs, no shift): it learns to copy",
)
def _(seed: int) -> Setup:
    data = MarkovLM(seed)
    model = TinyTransformer()
    return Setup(model, adamw(model, 3e-3), data.batch, _lm_no_shift, steps=100)


def _bn_dropout_mlp() -> nn.Module:
    return nn.Sequential(nn.Linear(32, 64), nn.BatchNorm1d(64), nn.ReLU(), nn.Dropout(0.3), nn.Linear(64, 10))


@scenario(
    "mlp_trained_in_eval_mode",
    family="mlp",
    optimizer="Adam",
    precision="fp32",
    task="classification",
    causes={"eval_mode_training"},
    onset=1,
    ci=True,
    fault="model.eval() was called (for a validation pass) and model.train() never after: dropout off, "
    "BatchNorm on running statistics",
)
def _(seed: int) -> Setup:
    data = Blobs(seed)
    model = _bn_dropout_mlp().eval()
    return Setup(model, torch.optim.Adam(model.parameters(), lr=3e-3), data.batch, xent, steps=80)


@scenario(
    "healthy_mlp_frozen_batchnorm",
    family="mlp",
    optimizer="Adam",
    precision="fp32",
    task="classification",
    ci=True,
    fault="none: the model trains in train mode with its BatchNorm layer frozen (eval) on purpose",
)
def _(seed: int) -> Setup:
    data = Blobs(seed)
    model = _bn_dropout_mlp().train()
    model[1].eval()
    return Setup(model, torch.optim.Adam(model.parameters(), lr=3e-3), data.batch, xent, steps=80)


def _regression_1d(seed: int):
    data = Regression(seed)

    def batches(step: int):
        x, y = data.batch(step)
        return x, y.reshape(-1)  # a (B,) target, as a Dataset of scalars yields it

    return batches


def _mse_broadcast(model: nn.Module, batch: Any) -> torch.Tensor:
    x, y = batch
    with warnings.catch_warnings():  # torch warns about the broadcast; the user did not look
        warnings.simplefilter("ignore", UserWarning)
        return F.mse_loss(model(x), y)


@scenario(
    "mlp_mse_shapes_broadcast",
    family="mlp",
    optimizer="Adam",
    precision="fp32",
    task="regression",
    causes={"loss_broadcast"},
    onset=1,
    ci=True,
    fault="F.mse_loss of a (B, 1) prediction against a (B,) target: broadcast to (B, B), only the mean is learned",
)
def _(seed: int) -> Setup:
    model = MLP(16, 1)
    return Setup(model, torch.optim.Adam(model.parameters(), lr=3e-3), _regression_1d(seed), _mse_broadcast, steps=80)


@scenario(
    "healthy_mlp_mse_squeezed",
    family="mlp",
    optimizer="Adam",
    precision="fp32",
    task="regression",
    ci=True,
    fault="none: the same (B, 1) head and (B,) target, the prediction squeezed before the MSE",
)
def _(seed: int) -> Setup:
    model = MLP(16, 1)
    return Setup(
        model,
        torch.optim.Adam(model.parameters(), lr=3e-3),
        _regression_1d(seed),
        lambda m, b: F.mse_loss(m(b[0]).squeeze(-1), b[1]),
        steps=80,
    )


def _overlapping_binary(seed: int):
    """Two overlapping clusters (the best BCE is ~0.4, as most real binary tasks), the label a (B,)
    float 0/1 target, as a Dataset of scalars yields it for BCEWithLogitsLoss."""
    data = Blobs(seed, n_classes=2, spread=0.25)

    def batches(step: int):
        x, y = data.batch(step)
        return x, y.float()

    return batches


@scenario(
    "healthy_mlp_bce_overlapping_squeezed",
    family="mlp",
    optimizer="Adam",
    precision="fp32",
    task="classification",
    fault="none: a (B, 1) logit squeezed into BCEWithLogitsLoss against a (B,) float target on overlapping "
    "classes: the loss stays near 0.4, above the targets' variance, as a broadcast MSE's does",
)
def _(seed: int) -> Setup:
    model = MLP(32, 1)
    return Setup(
        model,
        torch.optim.Adam(model.parameters(), lr=3e-3),
        _overlapping_binary(seed),
        lambda m, b: F.binary_cross_entropy_with_logits(m(b[0]).squeeze(-1), b[1]),
        steps=80,
    )


def _regression_1d_unscaled(seed: int):
    """The (B,) target in raw units (x4, +20: a price or a count nobody standardised): a model is
    still learning its mean after 150 steps, its loss at or above the targets' variance, as a
    broadcast MSE's is, while its predictions already follow the targets."""
    one_d = _regression_1d(seed)

    def batches(step: int):
        x, y = one_d(step)
        return x, 4.0 * y + 20.0

    return batches


@scenario(
    "healthy_mlp_mse_squeezed_slow_start",
    family="mlp",
    optimizer="Adam",
    precision="fp32",
    task="regression",
    ci=True,
    fault="none: a (B, 1) head squeezed against an unscaled (B,) target (mean 20): after 150 steps the loss "
    "is still 1.5-3.5x the targets' variance, as a broadcast one stays, but the predictions follow the targets",
)
def _(seed: int) -> Setup:
    model = MLP(16, 1)
    return Setup(
        model,
        torch.optim.Adam(model.parameters(), lr=1e-3),
        _regression_1d_unscaled(seed),
        lambda m, b: F.mse_loss(m(b[0]).squeeze(-1), b[1]),
        steps=150,
    )


def _cross_entropy_one_output(model: nn.Module, batch: Any) -> torch.Tensor:
    x, y = batch
    return F.cross_entropy(model(x), y.unsqueeze(-1))  # (B, 1) logits, (B, 1) "probabilities": always 0


@scenario(
    "mlp_cross_entropy_one_output",
    family="mlp",
    optimizer="Adam",
    precision="fp32",
    task="regression",
    causes={"wrong_loss"},
    onset=0,
    ci=True,
    fault="F.cross_entropy of a (B, 1) regression head against the (B,) target unsqueezed: log-softmax of "
    "one logit is 0, the loss is exactly 0 at every step and nothing trains",
)
def _(seed: int) -> Setup:
    model = MLP(16, 1)
    return Setup(
        model, torch.optim.Adam(model.parameters(), lr=3e-3), _regression_1d(seed), _cross_entropy_one_output, steps=60
    )


def _sft_in_order(seed: int, steps: int, order: str):
    """SFT samples of prompts 2 to 16 tokens long, one epoch of `steps` batches, read in `order`:
    "sorted" by length (a dataset sorted on disk, no shuffle) or "grouped" by transformers' own
    LengthGroupedSampler (sorted within random mega-batches of 50 batches: group_by_length=True)."""
    data = SFT(seed)
    g = gen(seed, -2)
    n = steps * data.batch_size
    samples = [data.sample(g, int(k)) for k in torch.randint(2, 17, (n,), generator=g).tolist()]
    lengths = [len(seq) for seq, _ in samples]
    if order == "sorted":
        perm = sorted(range(n), key=lambda i: lengths[i])
    else:
        from transformers.trainer_pt_utils import LengthGroupedSampler

        perm = list(LengthGroupedSampler(data.batch_size, lengths=lengths, generator=g))

    def batches(step: int):
        rows = perm[step * data.batch_size : (step + 1) * data.batch_size]
        return data.collate([samples[i] for i in rows])

    return batches


@scenario(
    "gpt2_sft_sorted_by_length",
    family="gpt2",
    optimizer="AdamW",
    precision="fp32",
    task="sft",
    causes={"unshuffled_data"},
    onset=0,
    ci=True,
    fault="the SFT dataset is sorted by length and read in order (no shuffle): short prompts first, long last",
)
def _(seed: int) -> Setup:
    model = gpt2()
    return Setup(model, adamw(model, 1e-3), _sft_in_order(seed, 80, "sorted"), hf_loss, steps=80)


@scenario(
    "healthy_gpt2_sft_length_grouped",
    family="gpt2",
    optimizer="AdamW",
    precision="fp32",
    task="sft",
    ci=True,
    fault="none: the same data through transformers' LengthGroupedSampler (group_by_length=True)",
)
def _(seed: int) -> Setup:
    model = gpt2()
    return Setup(model, adamw(model, 1e-3), _sft_in_order(seed, 80, "grouped"), hf_loss, steps=80)


@scenario(
    "gpt2_sft_padding_supervised",
    family="gpt2",
    optimizer="AdamW",
    precision="fp32",
    task="sft",
    causes={"label_mask_leak"},
    onset=0,
    ci=True,
    fault="the collator pads the labels with the pad token instead of -100: the padding is supervised",
)
def _(seed: int) -> Setup:
    model = gpt2()
    return Setup(model, adamw(model, 1e-3), SFT(seed, mask_padding=False).batch, hf_loss, steps=60)


@scenario(
    "mlp_sgd_clip_tiny_max_norm",
    family="mlp",
    optimizer="SGD",
    precision="fp32",
    task="classification",
    causes={"grad_clip_too_tight", "lr_too_low"},
    onset=1,
    ci=True,
    fault="clip_grad_norm_(max_norm=1e-3) on gradients of norm ~1: every SGD update divided by ~1000",
)
def _(seed: int) -> Setup:
    data = Blobs(seed)
    model = MLP(32, 10)
    return Setup(model, sgd(model, 0.05), data.batch, xent, steps=100, clip=1e-3)


@scenario(
    "healthy_mlp_sgd_clip_1",
    family="mlp",
    optimizer="SGD",
    precision="fp32",
    task="classification",
    ci=True,
    fault="none: SGD with clip_grad_norm_(max_norm=1.0) on gradients of norm ~0.5-1.2: it clips the occasional larger one",
)
def _(seed: int) -> Setup:
    data = Blobs(seed)
    model = MLP(32, 10)
    return Setup(model, sgd(model, 0.05), data.batch, xent, steps=100, clip=1.0)


# =============================================================================================
# Transient faults
# =============================================================================================


@scenario(
    "attn_transient_nan",
    family="attention",
    optimizer="AdamW",
    precision="fp16-amp",
    task="pretrain",
    causes={"nondeterministic_fault"},
    onset=40,
    layers=("blocks.1.mlp",),
    fault="one forward of blocks.1.mlp returns a NaN once (a flaky kernel / bit flip); replaying the batch is clean",
    ci=True,
)
def _(seed: int) -> Setup:
    data = MarkovLM(seed)
    model = TinyTransformer()
    model.blocks[1].mlp = NaNOnce(model.blocks[1].mlp, at_call=40)
    return Setup(
        model,
        adamw(model, 3e-3),
        data.batch,
        tiny_lm,
        steps=80,
        autocast=torch.float16,
        scaler=torch.amp.GradScaler("cpu"),
        replay=True,
    )


# =============================================================================================
# Healthy controls
# =============================================================================================


@scenario(
    "healthy_mlp_regression_adam",
    family="mlp",
    optimizer="Adam",
    precision="fp32",
    task="regression",
    fault="none: converges to the data's noise floor and plateaus there",
    ci=True,
)
def _(seed: int) -> Setup:
    data = Regression(seed)
    model = MLP(16, 1)
    return Setup(model, torch.optim.Adam(model.parameters(), lr=3e-3), data.batch, mse, steps=240)


@scenario(
    "healthy_mlp_sgd_batch4_noisy",
    family="mlp",
    optimizer="SGD",
    precision="fp32",
    task="classification",
    fault="none: batch size 4, so the loss is very noisy",
    ci=True,
)
def _(seed: int) -> Setup:
    data = Blobs(seed, batch_size=4)
    model = MLP(32, 10)
    return Setup(model, sgd(model, 0.02), data.batch, xent, steps=240)


@scenario(
    "healthy_cnn_steplr_per_epoch",
    family="cnn",
    optimizer="SGD",
    precision="fp32",
    task="classification",
    fault="none: StepLR(gamma=0.1) stepped per epoch of 60 batches: LR decay plateaus",
)
def _(seed: int) -> Setup:
    data = Squares(seed)
    model = CNN()
    opt = sgd(model, 0.05)
    sched = torch.optim.lr_scheduler.StepLR(opt, step_size=1, gamma=0.1)
    return Setup(model, opt, data.batch, xent, steps=200, scheduler=sched, sched_every=60)


@scenario(
    "healthy_gpt2_warmup_cosine",
    family="gpt2",
    optimizer="AdamW",
    precision="fp32",
    task="pretrain",
    fault="none: linear warm-up over 20 steps, cosine decay to 0 at the last step",
    ci=True,
)
def _(seed: int) -> Setup:
    data = MarkovLM(seed)
    model = gpt2()
    opt = adamw(model, 3e-3, weight_decay=0.01)
    return Setup(model, opt, data.batch, hf_loss, steps=160, scheduler=warmup_cosine(opt, 20, 160))


@scenario(
    "healthy_mlp_fp16_gradscaler",
    family="mlp",
    optimizer="Adam",
    precision="fp16-amp",
    task="classification",
    fault="none: fp16 autocast, GradScaler starting at 2^24: it backs off a handful of times in the first steps, then holds",
    ci=True,
)
def _(seed: int) -> Setup:
    data = Blobs(seed, batch_size=64)
    model = MLP(32, 10, hidden=128)
    return Setup(
        model,
        torch.optim.Adam(model.parameters(), lr=1e-3),
        data.batch,
        xent,
        steps=200,
        autocast=torch.float16,
        scaler=torch.amp.GradScaler("cpu", init_scale=2.0**24),
    )


@scenario(
    "healthy_gpt2_sft_masked",
    family="gpt2",
    optimizer="AdamW",
    precision="fp32",
    task="sft",
    fault="none: prompt and padding masked with -100, response supervised",
    ci=True,
)
def _(seed: int) -> Setup:
    data = SFT(seed)
    model = gpt2()
    opt = adamw(model, 3e-3)
    return Setup(model, opt, data.batch, hf_loss, steps=160, scheduler=warmup_cosine(opt, 10, 160))


@scenario(
    "healthy_lstm_adam_clipped",
    family="lstm",
    optimizer="Adam",
    precision="fp32",
    task="classification",
    fault="none: LSTM, Adam, clip_grad_norm_(1.0)",
)
def _(seed: int) -> Setup:
    data = Sequences(seed)
    model = SeqClassifier(4, 4)
    return Setup(model, torch.optim.Adam(model.parameters(), lr=3e-3), data.batch, xent, steps=200, clip=1.0)


@scenario(
    "healthy_attn_bf16_params",
    family="attention",
    optimizer="AdamW",
    precision="bf16",
    task="pretrain",
    fault="none: hand-written attention with bf16 parameters and padded batches",
)
def _(seed: int) -> Setup:
    data = MarkovLM(seed)
    model = TinyTransformer().to(torch.bfloat16)

    def batches(step: int):
        b = data.batch(step)
        b["attention_mask"][:, 26:] = 0
        b["labels"] = b["input_ids"].masked_fill(b["attention_mask"] == 0, -100)
        return b

    return Setup(model, adamw(model, 3e-3), batches, tiny_lm, steps=150)


@scenario(
    "healthy_attn_postln_warmup",
    family="attention",
    optimizer="Adam",
    precision="fp32",
    task="pretrain",
    fault="none: the 6-layer post-LN transformer at peak LR 3e-2 with a 30-step warm-up and cosine decay",
)
def _(seed: int) -> Setup:
    data = MarkovLM(seed)
    model = TinyTransformer(pre_ln=False, n_layer=6)
    opt = torch.optim.Adam(model.parameters(), lr=3e-2)
    return Setup(model, opt, data.batch, tiny_lm, steps=150, scheduler=warmup_cosine(opt, 30, 150))


@scenario(
    "healthy_cnn_adafactor",
    family="cnn",
    optimizer="Adafactor",
    precision="fp32",
    task="classification",
    fault="none: torch.optim.Adafactor at its default LR",
)
def _(seed: int) -> Setup:
    data = Squares(seed)
    model = CNN()
    return Setup(model, torch.optim.Adafactor(model.parameters()), data.batch, xent, steps=150)


@scenario(
    "healthy_resmlp_scaled",
    family="mlp",
    optimizer="Adam",
    precision="fp32",
    task="regression",
    fault="none: the 48-block residual MLP with 1/sqrt(N) branch scaling",
)
def _(seed: int) -> Setup:
    data = Regression(seed)
    model = ResMLP(16, 1, d=32, n_blocks=48, residual_scaling=True)
    _lecun(model)
    return Setup(model, torch.optim.Adam(model.parameters(), lr=1e-3), data.batch, mse, steps=80)
