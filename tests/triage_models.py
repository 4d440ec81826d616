"""Small real models and a plain training loop for the triage tests (imported by test_triage_*.py).

Each model is a few thousand parameters so a test trains it for ten steps in well under a second.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import torch
from torch import nn
from torch.nn import functional as F

VOCAB, DIM, SEQ = 24, 16, 8


class SelfAttention(nn.Module):
    """Single-head attention with a key-padding mask applied as -inf (the classic NaN trap when a
    sequence is all padding). `manual_softmax` computes softmax as exp/sum without subtracting the
    row max."""

    def __init__(self, dim: int = DIM, manual_softmax: bool = False, dropout: float = 0.0) -> None:
        super().__init__()
        self.qkv = nn.Linear(dim, 3 * dim)
        self.proj = nn.Linear(dim, dim)
        self.drop = nn.Dropout(dropout)
        self.manual_softmax = manual_softmax

    def forward(self, x: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        q, k, v = self.qkv(x).chunk(3, dim=-1)
        scores = q @ k.transpose(1, 2) / math.sqrt(x.shape[-1])
        scores = scores.masked_fill(~mask[:, None, :].bool(), float("-inf"))
        if self.manual_softmax:
            e = torch.exp(scores)
            att = e / e.sum(dim=-1, keepdim=True)
        else:
            att = torch.softmax(scores, dim=-1)
        return self.proj(self.drop(att) @ v)


class TinyLM(nn.Module):
    def __init__(self, manual_softmax: bool = False, dropout: float = 0.0) -> None:
        super().__init__()
        self.emb = nn.Embedding(VOCAB, DIM)
        self.attn = SelfAttention(manual_softmax=manual_softmax, dropout=dropout)
        self.norm = nn.LayerNorm(DIM)
        self.head = nn.Linear(DIM, VOCAB)

    def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor) -> torch.Tensor:
        h = self.emb(input_ids)
        h = h + self.attn(h, attention_mask)
        return self.head(self.norm(h))


def lm_loss(model: nn.Module, batch: dict[str, torch.Tensor]) -> torch.Tensor:
    logits = model(batch["input_ids"], batch["attention_mask"])
    return F.cross_entropy(logits.flatten(0, 1), batch["labels"].flatten())


def lm_batches(n: int, size: int = 6, seed: int = 1) -> list[dict[str, torch.Tensor]]:
    g = torch.Generator().manual_seed(seed)
    out = []
    for _ in range(n):
        ids = torch.randint(0, VOCAB, (size, SEQ), generator=g)
        out.append(
            {
                "input_ids": ids,
                "attention_mask": torch.ones(size, SEQ, dtype=torch.long),
                "labels": ids.roll(-1, dims=1),
            }
        )
    return out


class FlakyNaN(nn.Module):
    """Injects a NaN the first time it runs after being armed, never again: a transient fault
    (what a bit flip or a race looks like from the outside)."""

    def __init__(self) -> None:
        super().__init__()
        self.armed = False

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.armed:
            self.armed = False
            x = x.clone()
            x.view(-1)[0] = float("nan")
        return x


class MLP(nn.Module):
    def __init__(self, d_in: int = 6, hidden: int = 32, d_out: int = 3, flaky: bool = False) -> None:
        super().__init__()
        self.fc1 = nn.Linear(d_in, hidden)
        self.act = nn.GELU()
        self.fc2 = nn.Linear(hidden, hidden)
        self.flaky = FlakyNaN() if flaky else None
        self.out = nn.Linear(hidden, d_out)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.act(self.fc1(x))
        h = self.act(self.fc2(h))
        if self.flaky is not None:
            h = self.flaky(h)
        return self.out(h)


def mse_loss(model: nn.Module, batch: tuple[torch.Tensor, torch.Tensor]) -> torch.Tensor:
    x, y = batch
    return F.mse_loss(model(x), y)


def ce_loss(model: nn.Module, batch: tuple[torch.Tensor, torch.Tensor]) -> torch.Tensor:
    x, y = batch
    return F.cross_entropy(model(x), y)


def regression_batches(
    n: int, size: int = 8, d_in: int = 6, d_out: int = 3, seed: int = 2
) -> list[tuple[torch.Tensor, torch.Tensor]]:
    g = torch.Generator().manual_seed(seed)
    w = torch.randn(d_in, d_out, generator=g)
    out = []
    for _ in range(n):
        x = torch.randn(size, d_in, generator=g)
        out.append((x, x @ w + 0.1 * torch.randn(size, d_out, generator=g)))
    return out


def classification_batches(
    n: int, size: int = 8, d_in: int = 6, classes: int = 3, seed: int = 3
) -> list[tuple[torch.Tensor, torch.Tensor]]:
    g = torch.Generator().manual_seed(seed)
    centers = 2 * torch.randn(classes, d_in, generator=g)
    out = []
    for _ in range(n):
        y = torch.randint(0, classes, (size,), generator=g)
        out.append((centers[y] + torch.randn(size, d_in, generator=g), y))
    return out


def train(
    model: nn.Module,
    opt: torch.optim.Optimizer,
    batches: list[Any],
    loss_fn: Callable[[nn.Module, Any], torch.Tensor],
    mon: Any = None,
    *,
    clip: float | None = None,
    before_step: Callable[[int], None] | None = None,
    scaler: Any = None,
    autocast: torch.dtype | None = None,
) -> list[float]:
    """A plain training loop: forward, backward, (clip), step, `mon.step(loss, batch=batch)`."""
    losses = []
    for i, b in enumerate(batches):
        if before_step is not None:
            before_step(i)
        opt.zero_grad()
        if autocast is not None:
            with torch.autocast("cpu", dtype=autocast):
                loss = loss_fn(model, b)
        else:
            loss = loss_fn(model, b)
        if scaler is not None:
            scaler.scale(loss).backward()
            scaler.unscale_(opt)
            if clip is not None:
                torch.nn.utils.clip_grad_norm_(model.parameters(), clip)
            scaler.step(opt)
            scaler.update()
        else:
            loss.backward()
            if clip is not None:
                torch.nn.utils.clip_grad_norm_(model.parameters(), clip)
            opt.step()
        if mon is not None:
            mon.step(loss, batch=b)
        losses.append(float(loss.detach()))
    return losses


def state_bytes(model: nn.Module, opt: torch.optim.Optimizer) -> list[bytes]:
    """Every parameter, buffer and optimizer-state tensor as raw bytes (bit-identity checks)."""
    out = [
        t.detach().contiguous().view(-1).view(torch.uint8).numpy().tobytes()
        for t in list(model.parameters()) + list(model.buffers())
    ]
    for st in opt.state.values():
        for k in sorted(st):
            v = st[k]
            if isinstance(v, torch.Tensor):
                out.append(v.detach().contiguous().view(-1).view(torch.uint8).numpy().tobytes())
            else:
                out.append(repr(v).encode())
    return out


class PairDistance(nn.Module):
    """Euclidean distances between every pair of embeddings via sqrt of squared distances: the
    diagonal is sqrt(0), whose derivative is infinite. The forward pass is finite, the gradient
    is NaN at any loss scale: a GradScaler skips every step."""

    def __init__(self, d_in: int = 6, d: int = 8) -> None:
        super().__init__()
        self.embed = nn.Linear(d_in, d)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        e = self.embed(x)
        return ((e[:, None, :] - e[None, :, :]) ** 2).sum(-1).sqrt()
