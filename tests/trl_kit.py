"""A tiny TRL fine-tuning set-up built in code (nothing downloaded): a word-level tokenizer trained
on the text itself, with a chat template that marks the assistant's turns (`{% generation %}`, so
TRL's `assistant_only_loss=True` works), a GPT-2 built from a config, and conversations with long
prompts and short answers. The trainer gets lossdoctor's callback exactly as the README shows it.
"""

from __future__ import annotations

import random

CHAT_TEMPLATE = (
    "{% for m in messages %}{% if m['role'] == 'user' %}<|user|> {{ m['content'] }} <|end|> "
    "{% else %}<|assistant|> {% generation %}{{ m['content'] }} <|end|>{% endgeneration %} {% endif %}{% endfor %}"
    "{% if add_generation_prompt %}<|assistant|> {% endif %}"
)
SPECIALS = ["<unk>", "<pad>", "<eos>", "<|user|>", "<|assistant|>", "<|end|>"]
WORDS = "the cat dog sat ran on a mat log red big small fast slow why how what is are".split()


def tokenizer(texts: list[str]):
    """Word-level, trained here; the chat markers are single special tokens."""
    from tokenizers import Tokenizer, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    tok = Tokenizer(models.WordLevel(unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.Whitespace()
    tok.train_from_iterator(texts, trainers.WordLevelTrainer(special_tokens=SPECIALS))
    out = PreTrainedTokenizerFast(
        tokenizer_object=tok,
        unk_token="<unk>",
        pad_token="<pad>",
        eos_token="<|end|>",
        additional_special_tokens=SPECIALS[3:],
    )
    out.chat_template = CHAT_TEMPLATE
    return out


def conversations(n: int, prompt_words: tuple[int, int] = (14, 22), answer_words: tuple[int, int] = (3, 6)):
    rng = random.Random(0)

    def say(lo_hi: tuple[int, int]) -> str:
        return " ".join(rng.choice(WORDS) for _ in range(rng.randint(*lo_hi)))

    return [
        [{"role": "user", "content": say(prompt_words)}, {"role": "assistant", "content": say(answer_words)}]
        for _ in range(n)
    ]


def gpt2(tok, positions: int = 64):
    import torch
    from transformers import GPT2Config, GPT2LMHeadModel

    torch.manual_seed(0)
    return GPT2LMHeadModel(
        GPT2Config(
            n_layer=2,
            n_embd=64,
            n_head=4,
            vocab_size=len(tok),
            n_positions=positions,
            pad_token_id=tok.pad_token_id,
            eos_token_id=tok.eos_token_id,
            bos_token_id=tok.eos_token_id,
        )
    )


def sft(
    out_dir,
    *,
    steps: int = 6,
    lr: float = 1e-3,
    callback=None,
    n: int = 64,
    max_length: int = 64,
    lr_scheduler_type: str = "linear",
    warmup_steps: int = 1,
    **config,
):
    """Train TRL's SFTTrainer on the conversations; returns the trainer."""
    import torch
    from datasets import Dataset
    from trl import SFTConfig, SFTTrainer

    torch.set_num_threads(1)
    convs = conversations(n)
    tok = tokenizer([m["content"] for c in convs for m in c])
    args = SFTConfig(
        output_dir=str(out_dir),
        max_steps=steps,
        per_device_train_batch_size=8,
        learning_rate=lr,
        lr_scheduler_type=lr_scheduler_type,
        warmup_steps=warmup_steps,
        logging_steps=1,
        max_length=max_length,
        save_strategy="no",
        report_to=[],
        use_cpu=True,
        disable_tqdm=True,
        dataloader_num_workers=0,
        seed=0,
        **config,
    )
    trainer = SFTTrainer(
        model=gpt2(tok, max_length),
        args=args,
        train_dataset=Dataset.from_dict({"messages": convs}),
        processing_class=tok,
        callbacks=[callback] if callback is not None else None,
    )
    trainer.train()
    return trainer


def dpo(out_dir, *, steps: int = 4, lr: float = 1e-4, callback=None, n: int = 32, max_length: int = 64, **config):
    """Train TRL's DPOTrainer on prompt/chosen/rejected text (the reference model a copy of the
    policy: TRL would load it again from the hub by name); returns the trainer."""
    import torch
    from datasets import Dataset
    from trl import DPOConfig, DPOTrainer

    torch.set_num_threads(1)
    rng = random.Random(1)

    def say(k: int) -> str:
        return " ".join(rng.choice(WORDS) for _ in range(k))

    rows = {
        "prompt": [say(8) for _ in range(n)],
        "chosen": [say(4) for _ in range(n)],
        "rejected": [say(4) for _ in range(n)],
    }
    tok = tokenizer(rows["prompt"] + rows["chosen"] + rows["rejected"])
    args = DPOConfig(
        output_dir=str(out_dir),
        max_steps=steps,
        per_device_train_batch_size=4,
        learning_rate=lr,
        logging_steps=1,
        max_length=max_length,
        save_strategy="no",
        report_to=[],
        use_cpu=True,
        disable_tqdm=True,
        dataloader_num_workers=0,
        seed=0,
        **config,
    )
    import copy

    model = gpt2(tok, max_length)
    trainer = DPOTrainer(
        model=model,
        ref_model=copy.deepcopy(model).eval(),
        args=args,
        train_dataset=Dataset.from_dict(rows),
        processing_class=tok,
        callbacks=[callback] if callback is not None else None,
    )
    trainer.train()
    return trainer


def conversations_some_too_long(n: int, every: int = 4, max_length: int = 64):
    """Conversations where every `every`-th prompt alone is longer than `max_length` tokens: truncated
    to max_length, such an example keeps no token of its answer (its labels are all -100 when only
    the answer is trained on)."""
    convs = conversations(n)
    long = conversations(n, prompt_words=(max_length + 6, max_length + 12))
    return [long[i] if i % every == every - 1 else c for i, c in enumerate(convs)]


def sft_on(
    out_dir,
    convs,
    *,
    steps: int = 6,
    lr: float = 1e-3,
    callback=None,
    max_length: int = 64,
    batch_size: int = 8,
    **config,
):
    """`sft` on the given conversations (same model, tokenizer and settings); returns the trainer."""
    import torch
    from datasets import Dataset
    from trl import SFTConfig, SFTTrainer

    torch.set_num_threads(1)
    tok = tokenizer([m["content"] for c in convs for m in c])
    args = SFTConfig(
        output_dir=str(out_dir),
        max_steps=steps,
        per_device_train_batch_size=batch_size,
        learning_rate=lr,
        lr_scheduler_type="linear",
        warmup_steps=1,
        logging_steps=1,
        max_length=max_length,
        save_strategy="no",
        report_to=[],
        use_cpu=True,
        disable_tqdm=True,
        dataloader_num_workers=0,
        seed=0,
        **config,
    )
    trainer = SFTTrainer(
        model=gpt2(tok, max_length),
        args=args,
        train_dataset=Dataset.from_dict({"messages": convs}),
        processing_class=tok,
        callbacks=[callback] if callback is not None else None,
    )
    trainer.train()
    return trainer


def _pairs(n: int, prompt_words: int = 8, answer_words: int = 4) -> dict[str, list[str]]:
    """prompt/chosen/rejected rows of random words, drawn as `dpo` draws them."""
    rng = random.Random(1)

    def say(k: int) -> str:
        return " ".join(rng.choice(WORDS) for _ in range(k))

    return {
        "prompt": [say(prompt_words) for _ in range(n)],
        "chosen": [say(answer_words) for _ in range(n)],
        "rejected": [say(answer_words) for _ in range(n)],
    }


def _common(out_dir, steps: int, lr: float, max_length: int) -> dict:
    """The arguments every preference run here shares (a caller's own config overrides them)."""
    return dict(
        output_dir=str(out_dir),
        max_steps=steps,
        per_device_train_batch_size=4,
        learning_rate=lr,
        logging_steps=1,
        max_length=max_length,
        save_strategy="no",
        report_to=[],
        use_cpu=True,
        disable_tqdm=True,
        dataloader_num_workers=0,
        seed=0,
    )


def orpo(
    out_dir,
    *,
    steps: int = 8,
    lr: float = 1e-4,
    callback=None,
    n: int = 32,
    max_length: int = 64,
    long_prompt_every: int = 0,
    **config,
):
    """Train TRL's ORPOTrainer (trl.experimental in TRL 1.x: no reference model) on the `dpo`
    pairs; returns the trainer. `long_prompt_every=k`: every k-th prompt is 4x longer (32 words),
    which a small `max_length` truncates to an empty completion."""
    import torch
    from datasets import Dataset
    from trl.experimental.orpo import ORPOConfig, ORPOTrainer

    torch.set_num_threads(1)
    rows = _pairs(n)
    if long_prompt_every:
        rows["prompt"] = [
            (p + " ") * 4 if i % long_prompt_every == long_prompt_every - 1 else p for i, p in enumerate(rows["prompt"])
        ]
        rows["prompt"] = [p.strip() for p in rows["prompt"]]
    tok = tokenizer(rows["prompt"] + rows["chosen"] + rows["rejected"])
    args = ORPOConfig(**{**_common(out_dir, steps, lr, max_length), **config})
    # positions for a whole long prompt: ORPO keeps the prompt and truncates the answer
    trainer = ORPOTrainer(
        model=gpt2(tok, max(max_length, 64)),
        args=args,
        train_dataset=Dataset.from_dict(rows),
        processing_class=tok,
        callbacks=[callback] if callback is not None else None,
    )
    trainer.train()
    return trainer


def kto(out_dir, *, steps: int = 8, lr: float = 1e-4, callback=None, n: int = 32, max_length: int = 64, **config):
    """Train TRL's KTOTrainer on unpaired prompt/completion/label rows (the `dpo` pairs split into
    a desirable and an undesirable row each); returns the trainer."""
    import copy

    import torch
    from datasets import Dataset
    from trl import KTOConfig, KTOTrainer

    torch.set_num_threads(1)
    pairs = _pairs(n)
    rows = {
        "prompt": pairs["prompt"] * 2,
        "completion": pairs["chosen"] + pairs["rejected"],
        "label": [True] * n + [False] * n,
    }
    tok = tokenizer(pairs["prompt"] + pairs["chosen"] + pairs["rejected"])
    args = KTOConfig(**{**_common(out_dir, steps, lr, max_length), **config})
    model = gpt2(tok, max_length)
    trainer = KTOTrainer(
        model=model,
        ref_model=copy.deepcopy(model).eval(),
        args=args,
        train_dataset=Dataset.from_dict(rows),
        processing_class=tok,
        callbacks=[callback] if callback is not None else None,
    )
    trainer.train()
    return trainer
