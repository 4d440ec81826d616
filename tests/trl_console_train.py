"""Run TRL's real `SFTTrainer` (a tiny GPT-2 from a config, a tokenizer trained here, text made in
code; CPU) with its console progress bar on, so a test can capture what a user's terminal holds:
tqdm bars with `\\r` and the dicts TRL prints, which carry TRL's own keys (`entropy`, `num_tokens`,
`mean_token_accuracy`) beside the Trainer's.

    python trl_console_train.py OUT_DIR LR OPTIM MAX_GRAD_NORM MAX_STEPS LOGGING_STEPS
"""

from __future__ import annotations

import sys


def _tokenizer(texts: list[str]):
    """A word-level tokenizer trained on the texts themselves: nothing is downloaded."""
    from tokenizers import Tokenizer, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    tok = Tokenizer(models.WordLevel(unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.Whitespace()
    tok.train_from_iterator(texts, trainers.WordLevelTrainer(special_tokens=["<unk>", "<pad>", "<eos>"]))
    return PreTrainedTokenizerFast(tokenizer_object=tok, unk_token="<unk>", pad_token="<pad>", eos_token="<eos>")


def main(out: str, lr: float, optim: str, max_grad_norm: float, max_steps: int, logging_steps: int) -> None:
    import random

    import torch
    from datasets import Dataset
    from transformers import GPT2Config, GPT2LMHeadModel
    from trl import SFTConfig, SFTTrainer

    torch.manual_seed(0)
    torch.set_num_threads(1)
    rng = random.Random(0)
    words = "the cat dog sat ran on a mat log red big small fast slow".split()
    texts = [" ".join(rng.choice(words) for _ in range(rng.randint(6, 14))) for _ in range(96)]
    tokenizer = _tokenizer(texts)
    model = GPT2LMHeadModel(
        GPT2Config(
            n_layer=1,
            n_embd=32,
            n_head=2,
            vocab_size=len(tokenizer),
            n_positions=32,
            pad_token_id=tokenizer.pad_token_id,
            eos_token_id=tokenizer.eos_token_id,
            bos_token_id=tokenizer.eos_token_id,
        )
    )
    args = SFTConfig(
        output_dir=out,
        max_steps=max_steps,
        per_device_train_batch_size=8,
        learning_rate=lr,
        optim=optim,
        max_grad_norm=max_grad_norm,
        lr_scheduler_type="constant",
        logging_steps=logging_steps,
        max_length=32,
        save_strategy="steps",
        save_steps=max_steps,
        report_to=[],
        use_cpu=True,
        disable_tqdm=False,
        dataloader_num_workers=0,
        seed=0,
    )
    SFTTrainer(
        model=model, args=args, train_dataset=Dataset.from_dict({"text": texts}), processing_class=tokenizer
    ).train()


if __name__ == "__main__":
    a = sys.argv[1:]
    main(a[0], float(a[1]), a[2], float(a[3]), int(a[4]), int(a[5]))
