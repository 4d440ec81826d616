"""Synthetic, learnable tasks generated in code (nothing is downloaded).

Each task is a `Task` whose `batch(step)` is a pure function of (seed, step): the same step always
yields the same batch, so a replay of step k sees exactly the batch that step k saw, and a fault
injected "at step k" is a property of the data stream, as it is in a real corrupted shard.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import torch

PAD, BOS, SEP, EOS = 0, 1, 2, 3


def gen(seed: int, step: int, salt: int = 0) -> torch.Generator:
    return torch.Generator().manual_seed(seed * 1_000_003 + step * 7919 + salt)


@dataclass
class Regression:
    """y = tanh(x W1) w2 + noise, x ~ N(0, 1): a smooth target with a noise floor of `noise**2`."""

    seed: int
    d_in: int = 16
    batch_size: int = 32
    noise: float = 0.1
    w1: torch.Tensor = field(init=False)
    w2: torch.Tensor = field(init=False)

    def __post_init__(self) -> None:
        g = gen(self.seed, -1)
        self.w1 = torch.randn(self.d_in, 32, generator=g) / math.sqrt(self.d_in)
        self.w2 = torch.randn(32, 1, generator=g) / math.sqrt(32)

    def batch(self, step: int, batch_size: int | None = None) -> tuple[torch.Tensor, torch.Tensor]:
        g = gen(self.seed, step)
        x = torch.randn(batch_size or self.batch_size, self.d_in, generator=g)
        y = torch.tanh(x @ self.w1) @ self.w2 + self.noise * torch.randn(x.shape[0], 1, generator=g)
        return x, y


@dataclass
class Blobs:
    """Gaussian class clusters: `n_classes` centres in `d_in` dimensions, unit noise."""

    seed: int
    d_in: int = 32
    n_classes: int = 10
    batch_size: int = 32
    spread: float = 1.0
    centres: torch.Tensor = field(init=False)

    def __post_init__(self) -> None:
        self.centres = torch.randn(self.n_classes, self.d_in, generator=gen(self.seed, -1)) * self.spread

    def batch(self, step: int, batch_size: int | None = None) -> tuple[torch.Tensor, torch.Tensor]:
        g = gen(self.seed, step)
        y = torch.randint(0, self.n_classes, (batch_size or self.batch_size,), generator=g)
        x = self.centres[y] + torch.randn(y.shape[0], self.d_in, generator=g)
        return x, y


@dataclass
class Squares:
    """12x12 grey images: class c has a bright 3x3 square in quadrant c, plus noise."""

    seed: int
    batch_size: int = 32
    n_classes: int = 4
    noise: float = 0.5

    def batch(self, step: int, batch_size: int | None = None) -> tuple[torch.Tensor, torch.Tensor]:
        g = gen(self.seed, step)
        n = batch_size or self.batch_size
        y = torch.randint(0, self.n_classes, (n,), generator=g)
        x = self.noise * torch.randn(n, 1, 12, 12, generator=g)
        oy = torch.randint(0, 3, (n,), generator=g)
        ox = torch.randint(0, 3, (n,), generator=g)
        for i in range(n):
            r, c = divmod(int(y[i]), 2)
            r0, c0 = 6 * r + int(oy[i]), 6 * c + int(ox[i])
            x[i, 0, r0 : r0 + 3, c0 : c0 + 3] += 2.0
        return x, y


@dataclass
class Sequences:
    """Sequences of `d_in` channels; the class is the channel with the largest sum over time."""

    seed: int
    d_in: int = 4
    length: int = 20
    batch_size: int = 32

    def batch(self, step: int, batch_size: int | None = None) -> tuple[torch.Tensor, torch.Tensor]:
        g = gen(self.seed, step)
        n = batch_size or self.batch_size
        y = torch.randint(0, self.d_in, (n,), generator=g)
        x = torch.randn(n, self.length, self.d_in, generator=g)
        x[torch.arange(n), :, y] += 0.5
        return x, y


@dataclass
class MarkovLM:
    """Language-model pre-training data: token sequences from a sparse random Markov chain, so the
    loss falls from ln(vocab) towards the chain's entropy."""

    seed: int
    vocab: int = 64
    length: int = 32
    batch_size: int = 8
    trans: torch.Tensor = field(init=False)

    def __post_init__(self) -> None:
        g = gen(self.seed, -1)
        logits = torch.randn(self.vocab, self.vocab, generator=g) * 3.0
        self.trans = torch.softmax(logits, dim=-1)

    def tokens(self, step: int, batch_size: int | None = None) -> torch.Tensor:
        g = gen(self.seed, step)
        n = batch_size or self.batch_size
        ids = torch.empty(n, self.length, dtype=torch.long)
        ids[:, 0] = torch.randint(4, self.vocab, (n,), generator=g)
        for t in range(1, self.length):
            ids[:, t] = torch.multinomial(self.trans[ids[:, t - 1]], 1, generator=g).squeeze(1)
        return ids

    def batch(self, step: int, batch_size: int | None = None) -> dict[str, torch.Tensor]:
        ids = self.tokens(step, batch_size)
        return {"input_ids": ids, "attention_mask": torch.ones_like(ids), "labels": ids.clone()}


@dataclass
class SFT:
    """Instruction tuning: `[BOS] prompt [SEP] response [EOS] pad...`; the response counts on from
    the prompt's last token (t+1, t+2, t+3). A correct collator masks the prompt and the padding
    with -100 in `labels`.

    `mask_prompt=False` is the classic leak (labels = input_ids); `mask_padding=False` supervises
    the padding too (labels copied from input_ids after padding, never set to -100); `max_len`
    truncation of a long prompt leaves a sample with no supervised token at all.
    """

    seed: int
    vocab: int = 64
    max_len: int = 24
    batch_size: int = 8
    mask_prompt: bool = True
    mask_padding: bool = True
    prompt_len: tuple[int, int] = (4, 8)

    def sample(self, g: torch.Generator, prompt_len: int) -> tuple[list[int], int]:
        prompt = torch.randint(4, self.vocab - 3, (prompt_len,), generator=g).tolist()
        response = [prompt[-1] + k for k in (1, 2, 3)]
        return [BOS] + prompt + [SEP] + response + [EOS], prompt_len + 2

    def collate(self, seqs: list[tuple[list[int], int]]) -> dict[str, torch.Tensor]:
        n = len(seqs)
        ids = torch.full((n, self.max_len), PAD, dtype=torch.long)
        mask = torch.zeros(n, self.max_len, dtype=torch.long)
        labels = torch.full((n, self.max_len), -100, dtype=torch.long)
        for i, (seq, n_prompt) in enumerate(seqs):
            seq = seq[: self.max_len]  # truncation, as a tokenizer with max_length does
            ids[i, : len(seq)] = torch.tensor(seq)
            mask[i, : len(seq)] = 1
            start = 0 if not self.mask_prompt else min(n_prompt, len(seq))
            labels[i, start : len(seq)] = ids[i, start : len(seq)]
            if not self.mask_padding:
                labels[i, len(seq) :] = PAD
        return {"input_ids": ids, "attention_mask": mask, "labels": labels}

    def batch(
        self, step: int, batch_size: int | None = None, prompt_len: tuple[int, int] | None = None
    ) -> dict[str, torch.Tensor]:
        g = gen(self.seed, step)
        lo, hi = prompt_len or self.prompt_len
        n = batch_size or self.batch_size
        lens = torch.randint(lo, hi + 1, (n,), generator=g).tolist()
        return self.collate([self.sample(g, k) for k in lens])


def lm_loss(logits: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
    """Next-token cross-entropy with the HF convention: shift by one, ignore -100."""
    return torch.nn.functional.cross_entropy(
        logits[:, :-1].reshape(-1, logits.shape[-1]).float(), labels[:, 1:].reshape(-1), ignore_index=-100
    )


def clone_batch(batch: Any) -> Any:
    if isinstance(batch, torch.Tensor):
        return batch.clone()
    if isinstance(batch, dict):
        return {k: clone_batch(v) for k, v in batch.items()}
    if isinstance(batch, (tuple, list)):
        return type(batch)(clone_batch(v) for v in batch)
    return batch
