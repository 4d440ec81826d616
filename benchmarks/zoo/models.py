"""The zoo's model families, small enough that a run takes seconds on one CPU core.

Every model is an ordinary `nn.Module` (or a transformers model built from a config), with the
knobs a real bug flips exposed as constructor arguments: no 1/sqrt(d) in attention, a softmax
written without max-subtraction, a residual branch without 1/sqrt(N) scaling, sigmoid instead of
ReLU. The fault is then injected the way it happens in practice: by configuration, not by patching
the monitor's view of the run.
"""

from __future__ import annotations

import math

import torch
from torch import nn

from lossdoctor.demo.scenarios import mlp


class MLP(nn.Module):
    """Plain feed-forward net: `net.0` is the first Linear, activations in between."""

    def __init__(self, d_in: int, d_out: int, hidden: int = 64, depth: int = 2, act: type[nn.Module] = nn.ReLU) -> None:
        super().__init__()
        self.net = mlp(d_in, hidden, d_out, depth, act)  # the demo's builder: same layer names

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.net(x)


class ResBlock(nn.Module):
    def __init__(self, d: int, branch_scale: float) -> None:
        super().__init__()
        self.fc1 = nn.Linear(d, 2 * d)
        self.act = nn.GELU()
        self.fc2 = nn.Linear(2 * d, d)
        self.branch_scale = branch_scale

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x + self.branch_scale * self.fc2(self.act(self.fc1(x)))


class ResMLP(nn.Module):
    """Deep residual MLP without normalisation: whether the residual stream stays bounded
    depends entirely on the branch scaling (GPT-2 scales the output projection by 1/sqrt(2N))."""

    def __init__(self, d_in: int, d_out: int, d: int = 64, n_blocks: int = 16, residual_scaling: bool = True) -> None:
        super().__init__()
        self.inp = nn.Linear(d_in, d)
        scale = 1.0 / math.sqrt(n_blocks) if residual_scaling else 1.0
        self.blocks = nn.ModuleList(ResBlock(d, scale) for _ in range(n_blocks))
        self.head = nn.Linear(d, d_out)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.inp(x)
        for b in self.blocks:
            h = b(h)
        return self.head(h)


class CNN(nn.Module):
    def __init__(self, n_classes: int = 4, channels: int = 8) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(1, channels, 3, padding=1)
        self.conv2 = nn.Conv2d(channels, 2 * channels, 3, padding=1)
        self.pool = nn.MaxPool2d(2)
        self.act = nn.ReLU()
        self.fc = nn.Linear(2 * channels * 3 * 3, n_classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.pool(self.act(self.conv1(x)))
        x = self.pool(self.act(self.conv2(x)))
        return self.fc(x.flatten(1))


class SeqClassifier(nn.Module):
    """LSTM or plain RNN over a sequence, classify from the last hidden state."""

    def __init__(
        self, d_in: int, n_classes: int, hidden: int = 32, cell: str = "lstm", nonlinearity: str = "tanh"
    ) -> None:
        super().__init__()
        if cell == "lstm":
            self.rnn: nn.Module = nn.LSTM(d_in, hidden, batch_first=True)
        else:
            self.rnn = nn.RNN(d_in, hidden, batch_first=True, nonlinearity=nonlinearity)
        self.head = nn.Linear(hidden, n_classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out, _ = self.rnn(x)
        return self.head(out[:, -1])


class Attention(nn.Module):
    """Hand-written causal self-attention with an optional padding mask.

    `scaled=False` drops the 1/sqrt(d_head); `safe_softmax=False` writes softmax as exp/sum without
    subtracting the row max, which overflows as soon as a logit passes ~88 (fp32) or ~11 (fp16).
    """

    def __init__(self, d: int, heads: int, *, scaled: bool = True, safe_softmax: bool = True) -> None:
        super().__init__()
        self.heads, self.dh = heads, d // heads
        self.qkv = nn.Linear(d, 3 * d)
        self.proj = nn.Linear(d, d)
        self.scaled, self.safe_softmax = scaled, safe_softmax

    def forward(self, x: torch.Tensor, mask: torch.Tensor | None = None) -> torch.Tensor:
        b, t, d = x.shape
        q, k, v = self.qkv(x).view(b, t, 3, self.heads, self.dh).permute(2, 0, 3, 1, 4)
        s = q @ k.transpose(-1, -2)
        if self.scaled:
            s = s / math.sqrt(self.dh)
        causal = torch.ones(t, t, dtype=torch.bool, device=x.device).tril()
        s = s.masked_fill(~causal, float("-inf"))
        if mask is not None:
            s = s.masked_fill(mask[:, None, None, :] == 0, float("-inf"))
        if self.safe_softmax:
            a = torch.softmax(s, dim=-1)
        else:
            e = torch.exp(s)
            a = e / e.sum(dim=-1, keepdim=True)
        y = (a @ v).transpose(1, 2).reshape(b, t, d)
        return self.proj(y)


class Block(nn.Module):
    def __init__(self, d: int, heads: int, *, pre_ln: bool = True, **attn_kw: bool) -> None:
        super().__init__()
        self.ln1 = nn.LayerNorm(d)
        self.attn = Attention(d, heads, **attn_kw)
        self.ln2 = nn.LayerNorm(d)
        self.mlp = nn.Sequential(nn.Linear(d, 4 * d), nn.GELU(), nn.Linear(4 * d, d))
        self.pre_ln = pre_ln

    def forward(self, x: torch.Tensor, mask: torch.Tensor | None = None) -> torch.Tensor:
        if self.pre_ln:
            x = x + self.attn(self.ln1(x), mask)
            return x + self.mlp(self.ln2(x))
        x = self.ln1(x + self.attn(x, mask))  # post-LN: the original Transformer, needs warm-up
        return self.ln2(x + self.mlp(x))


class TinyTransformer(nn.Module):
    """Decoder-only LM written by hand (the attention code users write themselves)."""

    def __init__(
        self,
        vocab: int = 64,
        d: int = 32,
        heads: int = 2,
        n_layer: int = 2,
        max_len: int = 32,
        *,
        pre_ln: bool = True,
        **attn_kw: bool,
    ) -> None:
        super().__init__()
        self.tok = nn.Embedding(vocab, d)
        self.pos = nn.Embedding(max_len, d)
        self.blocks = nn.ModuleList(Block(d, heads, pre_ln=pre_ln, **attn_kw) for _ in range(n_layer))
        self.ln_f = nn.LayerNorm(d)
        self.head = nn.Linear(d, vocab)

    def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor | None = None) -> torch.Tensor:
        t = input_ids.shape[1]
        h = self.tok(input_ids) + self.pos(torch.arange(t, device=input_ids.device))
        for blk in self.blocks:
            h = blk(h, attention_mask)
        return self.head(self.ln_f(h))


def gpt2(
    vocab: int = 64, n_embd: int = 32, n_layer: int = 2, n_head: int = 2, n_positions: int = 32, **config_kw: float
) -> nn.Module:
    """A transformers GPT-2 built from a config (no download), eager attention."""
    from transformers import GPT2Config, GPT2LMHeadModel
    from transformers.utils import logging as hf_logging

    hf_logging.set_verbosity_error()  # a benchmark's output is its tables
    cfg = GPT2Config(
        vocab_size=vocab,
        n_embd=n_embd,
        n_layer=n_layer,
        n_head=n_head,
        n_positions=n_positions,
        bos_token_id=1,
        eos_token_id=3,
        pad_token_id=0,
        resid_pdrop=0.0,
        embd_pdrop=0.0,
        attn_pdrop=0.0,
        **config_kw,
    )
    cfg._attn_implementation = "eager"
    return GPT2LMHeadModel(cfg)


class NaNOnce(nn.Module):
    """Wraps a module and turns its output into NaN on exactly one call: a transient fault (a bit
    flip, a race in a custom kernel) that replaying the same batch from the same state does not
    reproduce."""

    def __init__(self, inner: nn.Module, at_call: int) -> None:
        super().__init__()
        self.inner = inner
        self.at_call = at_call
        self.calls = 0

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = self.inner(x)
        self.calls += 1
        if self.calls - 1 == self.at_call:
            y = y.clone()
            y[0, ..., 0] = float("nan")
        return y
