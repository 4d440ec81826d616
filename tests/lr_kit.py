"""A nanoGPT-style loop for the LR tests: a 3-layer GPT (pre-LN, hand-written causal attention),
AdamW (betas 0.9/0.95, weight decay 0.1), no warm-up, on a learnable language (each token a fixed
function of the two before it, 16 symbols: chance ln 16 = 2.77). Each run is ~40k parameters and
a few seconds on one CPU thread."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import torch
from torch.nn import functional as F

from benchmarks.zoo.models import TinyTransformer

VOCAB, SEQ, BATCH = 16, 16, 8


def batches(n: int, seed: int = 1) -> list[torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    table = torch.randint(0, VOCAB, (VOCAB, VOCAB), generator=torch.Generator().manual_seed(123))
    out = []
    for _ in range(n):
        x = torch.zeros(BATCH, SEQ + 1, dtype=torch.long)
        x[:, :2] = torch.randint(0, VOCAB, (BATCH, 2), generator=g)
        for t in range(2, SEQ + 1):
            x[:, t] = table[x[:, t - 2], x[:, t - 1]]
        out.append(x)
    return out


def loss_fn(model: torch.nn.Module, b: torch.Tensor) -> torch.Tensor:
    return F.cross_entropy(model(b[:, :-1]).reshape(-1, VOCAB), b[:, 1:].reshape(-1))


def train(
    lr: float, steps: int = 300, log_dir: Path | None = None, replay: bool = True, **watch_kw: Any
) -> tuple[list[float], Any]:
    """(the losses, the monitor's `diagnose()` before close, or None when `log_dir` is None)."""
    import lossdoctor

    torch.set_num_threads(1)  # also when a module-scoped fixture runs before conftest's
    torch.manual_seed(0)
    model = TinyTransformer(vocab=VOCAB, d=32, heads=2, n_layer=3, max_len=SEQ)
    opt = torch.optim.AdamW(model.parameters(), lr=lr, weight_decay=0.1, betas=(0.9, 0.95))
    mon = (
        None
        if log_dir is None
        else lossdoctor.watch(
            model,
            opt,
            log_dir=log_dir,
            task="pretrain",
            replay_fn=loss_fn if replay else None,
            alerts=False,
            **watch_kw,
        )
    )
    losses = []
    for b in batches(steps):
        loss = loss_fn(model, b)
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(float(loss.detach()))
        if mon is not None:
            mon.step(loss, batch=b)
    if mon is None:
        return losses, None
    report = mon.diagnose()
    mon.close()
    return losses, report


def final_loss(losses: list[float]) -> float:
    return sum(losses[-20:]) / 20
