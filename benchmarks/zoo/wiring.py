"""Zoo scenarios of the loop's wiring: what goes into the loss, and which parameters the optimizer
moves (issue 26's common training bugs). Each fault is written the way it is written by mistake,
and each has a healthy look-alike: the same set-up done on purpose.

- inputs and labels drawn in different orders (a shuffled index applied to the inputs only);
- a sigmoid before `BCEWithLogitsLoss` (the binary twin of softmax before `CrossEntropyLoss`);
- the wrong loss for the task: an MSE (or BCE) of a one-output head against class indices, with and
  without the task hint;
- a param group at LR 0 (a `backbone_lr` left at its default of 0);
- BatchNorm trained on the last, one-sample batch of every epoch;
- gradient accumulation whose loop never zeroes the gradients.
"""

from __future__ import annotations

from typing import Any

import torch
import torch.nn.functional as F
from torch import nn

from .data import Blobs, Squares, gen
from .harness import Setup, scenario
from .models import MLP
from .scenarios import xent

# --- inputs and labels in different orders ------------------------------------------------------


@scenario(
    "mlp_inputs_shuffled_apart_from_labels",
    family="mlp",
    optimizer="Adam",
    precision="fp32",
    task="classification",
    causes={"labels_misaligned", "noisy_data"},
    onset=1,
    ci=True,
    fault="the inputs of each batch are indexed by a shuffled permutation and the labels are not "
    "(x = x[perm]; y stays): labels unrelated to their inputs, the loss sits at chance",
)
def _(seed: int) -> Setup:
    data = Blobs(seed)
    model = MLP(32, 10)

    def batches(step: int):
        x, y = data.batch(step)
        perm = torch.randperm(x.shape[0], generator=gen(seed, step, salt=17))
        return x[perm], y

    return Setup(model, torch.optim.Adam(model.parameters(), lr=3e-3), batches, xent, steps=160)


@scenario(
    "healthy_mlp_overlapping_classes",
    family="mlp",
    optimizer="Adam",
    precision="fp32",
    task="classification",
    ci=True,
    fault="none: ten heavily overlapping classes (centres 0.3 apart in units of the noise): the loss "
    "falls only a little below chance, and it does fall",
)
def _(seed: int) -> Setup:
    data = Blobs(seed, spread=0.3)
    model = MLP(32, 10)
    return Setup(model, torch.optim.Adam(model.parameters(), lr=3e-3), data.batch, xent, steps=160)


# --- sigmoid before BCEWithLogitsLoss -----------------------------------------------------------


def _binary_model() -> nn.Module:
    return nn.Sequential(MLP(32, 1), nn.Sigmoid())


def _bce_logits_of_probs(model: nn.Module, batch: Any) -> torch.Tensor:
    x, y = batch
    return F.binary_cross_entropy_with_logits(model(x).squeeze(-1), y.float())


def _bce_of_probs(model: nn.Module, batch: Any) -> torch.Tensor:
    x, y = batch
    return F.binary_cross_entropy(model(x).squeeze(-1), y.float())


@scenario(
    "mlp_sigmoid_before_bce_with_logits",
    family="mlp",
    optimizer="Adam",
    precision="fp32",
    task="classification",
    causes={"softmax_before_loss"},
    onset=1,
    ci=True,
    fault="the binary classifier ends in nn.Sigmoid and its probability goes to "
    "BCEWithLogitsLoss, which applies its own sigmoid: the loss cannot go below 0.313",
)
def _(seed: int) -> Setup:
    data = Blobs(seed, n_classes=2, spread=1.5)
    model = _binary_model()
    return Setup(model, torch.optim.Adam(model.parameters(), lr=3e-3), data.batch, _bce_logits_of_probs, steps=120)


@scenario(
    "healthy_mlp_sigmoid_output_bce",
    family="mlp",
    optimizer="Adam",
    precision="fp32",
    task="classification",
    ci=True,
    fault="none: the binary classifier ends in nn.Sigmoid on purpose and the loss is "
    "F.binary_cross_entropy of the probability",
)
def _(seed: int) -> Setup:
    data = Blobs(seed, n_classes=2, spread=1.5)
    model = _binary_model()
    return Setup(model, torch.optim.Adam(model.parameters(), lr=3e-3), data.batch, _bce_of_probs, steps=120)


# --- the wrong loss for the task -----------------------------------------------------------------


def _mse_on_indices(model: nn.Module, batch: Any) -> torch.Tensor:
    x, y = batch
    return F.mse_loss(model(x).squeeze(-1), y.float())


@scenario(
    "mlp_mse_on_class_indices",
    family="mlp",
    optimizer="Adam",
    precision="fp32",
    task="classification",
    causes={"wrong_loss"},
    onset=1,
    ci=True,
    fault="a 10-class problem trained as a regression: a one-output head and F.mse_loss against the "
    "class index (y.float()), as if class 7 were 'more' than class 3",
)
def _(seed: int) -> Setup:
    data = Blobs(seed)
    model = MLP(32, 1)
    return Setup(model, torch.optim.Adam(model.parameters(), lr=3e-3), data.batch, _mse_on_indices, steps=160)


class Counts:
    """A count to predict (0..9: how many of nine features are positive), an ordinal integer target
    learned by regression on purpose."""

    def __init__(self, seed: int) -> None:
        self.seed = seed

    def batch(self, step: int) -> tuple[torch.Tensor, torch.Tensor]:
        x = torch.randn(32, 16, generator=gen(self.seed, step))
        return x, (x[:, :9] > 0).sum(dim=1)


@scenario(
    "healthy_mlp_mse_on_counts",
    family="mlp",
    optimizer="Adam",
    precision="fp32",
    task="regression",
    ci=True,
    fault="none: an integer count (0-9) predicted by a one-output head with MSE on purpose: an ordinal "
    "target, which the regression learns",
)
def _(seed: int) -> Setup:
    model = MLP(16, 1)
    return Setup(model, torch.optim.Adam(model.parameters(), lr=3e-3), Counts(seed).batch, _mse_on_indices, steps=160)


def _mse_module_on_ids(model: nn.Module, batch: Any) -> torch.Tensor:
    x, y = batch
    return nn.MSELoss()(model(x).squeeze(), y.float())


@scenario(
    "mlp_mse_on_class_ids_no_task_hint",
    family="mlp",
    optimizer="Adam",
    precision="fp32",
    task="classification",
    causes={"wrong_loss"},
    onset=1,
    ci=True,
    fault="a 10-class problem trained as a regression, as a user writes it: nn.MSELoss()(model(x).squeeze(), "
    "y.float()) on a one-output head, and watch is not told the task; the loss falls well below the labels' "
    "variance, rounded predictions stay wrong for about half the samples",
)
def _(seed: int) -> Setup:
    data = Blobs(seed)
    model = MLP(32, 1)
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    return Setup(model, opt, data.batch, _mse_module_on_ids, steps=200, task_hint=False)


@scenario(
    "healthy_mlp_mse_on_counts_no_task_hint",
    family="mlp",
    optimizer="Adam",
    precision="fp32",
    task="regression",
    ci=True,
    fault="none: the integer count 0-9 regressed with MSE on purpose, and watch is not told the task: a "
    "binomial-like count, narrower than ten balanced classes, which the regression learns",
)
def _(seed: int) -> Setup:
    model = MLP(16, 1)
    opt = torch.optim.Adam(model.parameters(), lr=3e-3)
    return Setup(model, opt, Counts(seed).batch, _mse_module_on_ids, steps=160, task_hint=False)


class WideCounts:
    """A count with more than 20 distinct values (how many of 30 noisy features are positive), an
    integer target regressed on purpose; the features carry it only partly, so the fit stays loose."""

    def __init__(self, seed: int) -> None:
        self.seed = seed

    def batch(self, step: int) -> tuple[torch.Tensor, torch.Tensor]:
        g = gen(self.seed, step)
        z = torch.randn(32, 30, generator=g)
        return z + 0.7 * torch.randn(32, 30, generator=g), (z > 0).sum(dim=1)


@scenario(
    "healthy_mlp_mse_on_wide_counts_no_task_hint",
    family="mlp",
    optimizer="Adam",
    precision="fp32",
    task="regression",
    ci=True,
    fault="none: an integer count with more than 20 distinct values regressed with MSE on purpose from noisy "
    "features, and watch is not told the task",
)
def _(seed: int) -> Setup:
    model = MLP(30, 1)
    opt = torch.optim.Adam(model.parameters(), lr=3e-3)
    return Setup(model, opt, WideCounts(seed).batch, _mse_module_on_ids, steps=160, task_hint=False)


# --- a param group at LR 0 ----------------------------------------------------------------------


def _split_groups(model: MLP, body_lr: float, head_lr: float) -> list[dict[str, Any]]:
    head = list(model.net[-1].parameters())
    body = [p for p in model.parameters() if all(p is not h for h in head)]
    return [{"params": body, "lr": body_lr}, {"params": head, "lr": head_lr}]


@scenario(
    "mlp_param_group_lr_zero",
    family="mlp",
    optimizer="Adam",
    precision="fp32",
    task="classification",
    causes={"frozen_model"},
    onset=1,
    ci=True,
    fault="discriminative LRs with backbone_lr left at its default 0: the optimizer's first param "
    "group (6,272 of 6,922 parameters) never moves, only the output layer learns",
)
def _(seed: int) -> Setup:
    data = Blobs(seed, spread=0.5)
    model = MLP(32, 10)
    return Setup(model, torch.optim.Adam(_split_groups(model, 0.0, 3e-3)), data.batch, xent, steps=160)


@scenario(
    "healthy_mlp_discriminative_lr_warmup",
    family="mlp",
    optimizer="Adam",
    precision="fp32",
    task="classification",
    ci=True,
    fault="none: discriminative LRs on purpose (backbone 3e-4, head 3e-3), both warmed up from LR 0 over 20 steps",
)
def _(seed: int) -> Setup:
    data = Blobs(seed, spread=0.5)
    model = MLP(32, 10)
    opt = torch.optim.Adam(_split_groups(model, 3e-4, 3e-3))
    sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda s: min(1.0, s / 20))
    return Setup(model, opt, data.batch, xent, steps=160, scheduler=sched)


# --- BatchNorm over a batch of one ---------------------------------------------------------------


class BNCNN(nn.Module):
    """The zoo's CNN with BatchNorm after each convolution (or GroupNorm, which has no batch statistics)."""

    def __init__(self, norm: str = "batch") -> None:
        super().__init__()

        def nrm(c: int) -> nn.Module:
            return nn.BatchNorm2d(c) if norm == "batch" else nn.GroupNorm(4, c)

        self.features = nn.Sequential(
            nn.Conv2d(1, 8, 3, padding=1),
            nrm(8),
            nn.ReLU(),
            nn.MaxPool2d(2),
            nn.Conv2d(8, 16, 3, padding=1),
            nrm(16),
            nn.ReLU(),
            nn.MaxPool2d(2),
        )
        self.head = nn.Linear(16 * 3 * 3, 4)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(self.features(x).flatten(1))


def _epochs_with_a_last_batch_of_one(data: Squares, per_epoch: int):
    """A dataset of (per_epoch - 1) x 16 + 1 images in batches of 16 without drop_last: every epoch
    ends with a batch of one image."""

    def batches(step: int):
        if step % per_epoch == per_epoch - 1:
            return data.batch(step, batch_size=1)
        return data.batch(step, batch_size=16)

    return batches


@scenario(
    "cnn_batchnorm_last_batch_of_one",
    family="cnn",
    optimizer="SGD",
    precision="fp32",
    task="classification",
    causes={"batchnorm_batch_of_one"},
    onset=9,
    ci=True,
    fault="a dataset of 145 images in batches of 16 without drop_last: every 10th batch holds one image, "
    "and BatchNorm normalises it with that one image's statistics",
)
def _(seed: int) -> Setup:
    data = Squares(seed, noise=1.5)
    model = BNCNN("batch")
    opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    return Setup(model, opt, _epochs_with_a_last_batch_of_one(data, 10), xent, steps=120)


@scenario(
    "healthy_cnn_groupnorm_last_batch_of_one",
    family="cnn",
    optimizer="SGD",
    precision="fp32",
    task="classification",
    ci=True,
    fault="none: the same data and loader (a last batch of one image each epoch), normalised with "
    "GroupNorm, which has no batch statistics",
)
def _(seed: int) -> Setup:
    data = Squares(seed, noise=1.5)
    model = BNCNN("group")
    opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    return Setup(model, opt, _epochs_with_a_last_batch_of_one(data, 10), xent, steps=120)


# --- gradient accumulation that never zeroes ----------------------------------------------------


@scenario(
    "mlp_grad_accum_never_zeroed",
    family="mlp",
    optimizer="SGD",
    precision="fp32",
    task="classification",
    causes={"grad_not_zeroed"},
    onset=1,
    ci=True,
    fault="4 micro-batches accumulated into each step (loss / 4), and optimizer.zero_grad() never called: "
    "every step adds its accumulated gradient to all the previous steps' (the look-alike is "
    "healthy_mlp_grad_accum_on_purpose)",
)
def _(seed: int) -> Setup:
    data = Blobs(seed)
    model = MLP(32, 10)

    def micro(step: int) -> list:
        return [data.batch(step * 4 + i, batch_size=8) for i in range(4)]

    return Setup(
        model,
        torch.optim.SGD(model.parameters(), lr=0.02, momentum=0.9),
        micro,
        lambda m, b: xent(m, b) / 4,
        steps=100,
        accum=4,
        zero_grad=False,
    )
