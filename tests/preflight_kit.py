"""Real pieces for the preflight tests: a byte-level BPE tokenizer trained here with a ChatML chat
template, SFT batches built with it (masked right, not masked, fully masked), a tiny GPT-2 and a
small training loop that can run under `lossdoctor.watch`."""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

import torch

CHATML = (
    "{% for message in messages %}<|im_start|>{{ message['role'] }}\n{{ message['content'] }}<|im_end|>\n"
    "{% endfor %}{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)

QA = [
    ("what is two plus two", "two plus two is four"),
    ("name a colour of the sky", "the sky is blue"),
    ("what do cats say", "cats say meow"),
    ("how many legs has a dog", "a dog has four legs"),
    ("what is the capital of france", "the capital of france is paris"),
    ("is water wet", "yes water is wet"),
    ("what comes after monday", "tuesday comes after monday"),
    ("say hello", "hello there friend"),
]


@functools.lru_cache(maxsize=1)
def chat_tokenizer() -> Any:
    """A byte-level BPE trained on the Q/A text, wrapped as a transformers fast tokenizer."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    specials = ["<pad>", "<|im_start|>", "<|im_end|>"]
    trainer = trainers.BpeTrainer(
        vocab_size=300,
        special_tokens=specials,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    corpus = [f"user\n{q}\nassistant\n{a}\n" for q, a in QA] * 4
    tok.train_from_iterator(corpus, trainer)
    return PreTrainedTokenizerFast(
        tokenizer_object=tok, pad_token="<pad>", eos_token="<|im_end|>", bos_token="<|im_start|>", chat_template=CHATML
    )


def sft_batch(mask: str = "right", n: int = 4, start: int = 0) -> dict[str, torch.Tensor]:
    """A padded SFT batch. mask: 'right' (prompt and padding -100), 'none' (labels = input_ids,
    padding -100), 'all' (every label -100)."""
    tok = chat_tokenizer()
    rows, prompt_lens = [], []
    for i in range(n):
        q, a = QA[(start + i) % len(QA)]
        conv = [{"role": "user", "content": q}, {"role": "assistant", "content": a}]
        full = tok.apply_chat_template(conv, tokenize=False)
        prompt = tok.apply_chat_template(conv[:1], tokenize=False, add_generation_prompt=True)
        rows.append(tok.encode(full, add_special_tokens=False))
        prompt_lens.append(len(tok.encode(prompt, add_special_tokens=False)))
    width = max(len(r) for r in rows)
    ids = torch.full((n, width), tok.pad_token_id, dtype=torch.long)
    att = torch.zeros((n, width), dtype=torch.long)
    labels = torch.full((n, width), -100, dtype=torch.long)
    for i, (r, p) in enumerate(zip(rows, prompt_lens)):
        ids[i, : len(r)] = torch.tensor(r)
        att[i, : len(r)] = 1
        if mask == "right":
            labels[i, p : len(r)] = torch.tensor(r[p:])
        elif mask == "none":
            labels[i, : len(r)] = torch.tensor(r)
    return {"input_ids": ids, "attention_mask": att, "labels": labels}


def tiny_gpt2(initializer_range: float = 0.02, seed: int = 0, **kw: Any) -> Any:
    from transformers import GPT2Config, GPT2LMHeadModel

    tok = chat_tokenizer()
    torch.manual_seed(seed)
    kw = {"n_layer": 2, **kw}
    cfg = GPT2Config(
        vocab_size=len(tok),
        n_positions=64,
        n_embd=32,
        n_head=2,
        initializer_range=initializer_range,
        eos_token_id=tok.eos_token_id,
        bos_token_id=tok.bos_token_id,
        pad_token_id=tok.pad_token_id,
        **kw,
    )
    return GPT2LMHeadModel(cfg)


def train(
    model: torch.nn.Module,
    optimizer: torch.optim.Optimizer,
    batches: list[Any],
    steps: int,
    *,
    loss_fn: Callable[[torch.nn.Module, Any], torch.Tensor] | None = None,
    scheduler: Any = None,
    scheduler_every: int = 1,
    scaler: Any = None,
    autocast: torch.dtype | None = None,
    mon: Any = None,
) -> list[float]:
    """A plain training loop; returns the losses. `mon.step` is called when a monitor is given."""
    loss_fn = loss_fn or (lambda m, b: m(**b).loss)
    losses = []
    for step in range(steps):
        batch = batches[step % len(batches)]
        optimizer.zero_grad(set_to_none=True)
        if autocast is not None:
            with torch.autocast("cpu", dtype=autocast):
                loss = loss_fn(model, batch)
        else:
            loss = loss_fn(model, batch)
        if scaler is not None:
            scaler.scale(loss).backward()
            scaler.step(optimizer)
            scaler.update()
        else:
            loss.backward()
            optimizer.step()
        if scheduler is not None and (step + 1) % scheduler_every == 0:
            scheduler.step()
        losses.append(float(loss.detach().float()))
        if mon is not None:
            mon.step(loss, batch=batch)
    return losses


def regression_problem(seed: int = 0, n_batches: int = 4) -> tuple[torch.nn.Module, list[Any], Callable]:
    """A small MLP regression with fixed batches: cheap enough to run hundreds of steps."""
    g = torch.Generator().manual_seed(seed)
    w = torch.randn(8, 1, generator=g)
    batches = []
    for _ in range(n_batches):
        x = torch.randn(16, 8, generator=g)
        batches.append((x, x @ w + 0.1 * torch.randn(16, 1, generator=g)))
    torch.manual_seed(seed)
    model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.Tanh(), torch.nn.Linear(16, 1))

    def loss_fn(m: torch.nn.Module, b: Any) -> torch.Tensor:
        return torch.nn.functional.mse_loss(m(b[0]), b[1])

    return model, batches, loss_fn
