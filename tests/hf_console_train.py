"""A real Hugging Face Trainer (GPT-2 from a config: 1 layer, 32 wide, CPU) on a tiny periodic
sequence task, shared by the tests that read what the Trainer writes: trainer_state.json, the
MLflow and TensorBoard callbacks' stores, and (run as a script) the console a user's terminal or
`nohup.out` holds: tqdm bars with `\\r`, the logged dicts printed by the Trainer's ProgressCallback,
the final `train_runtime` dict.

    python hf_console_train.py OUT_DIR LR OPTIM MAX_GRAD_NORM MAX_STEPS LOGGING_STEPS [EVAL_STEPS]
"""

from __future__ import annotations

import sys
from typing import Any


def train(
    out: str,
    *,
    lr: float,
    optim: str,
    max_grad_norm: float,
    max_steps: int = 30,
    logging_steps: int = 1,
    eval_steps: int = 0,
    report_to: tuple[str, ...] = (),
    save: bool = True,
    tqdm: bool = False,
) -> Any:
    """Train and return the Trainer. Healthy: AdamW at 1e-3 with clipping; exploding: SGD at lr=2
    without clipping (the gradient norm grows ~2 -> 1e7, then NaN)."""
    import torch
    from transformers import GPT2Config, GPT2LMHeadModel, Trainer, TrainingArguments

    torch.manual_seed(0)
    torch.set_num_threads(1)
    vocab = 64
    model = GPT2LMHeadModel(GPT2Config(n_layer=1, n_embd=32, n_head=2, vocab_size=vocab, n_positions=32))
    g = torch.Generator().manual_seed(0)
    base = torch.arange(16) % 8
    seqs = [(base + torch.randint(0, 8, (1,), generator=g)) % vocab for _ in range(64)]

    class Data(torch.utils.data.Dataset):
        def __len__(self):
            return len(seqs)

        def __getitem__(self, i):
            return {"input_ids": seqs[i], "labels": seqs[i]}

    extra = {"eval_strategy": "steps", "eval_steps": eval_steps} if eval_steps else {}
    saving = {"save_strategy": "steps", "save_steps": max_steps} if save else {"save_strategy": "no"}
    args = TrainingArguments(
        output_dir=str(out),
        max_steps=max_steps,
        per_device_train_batch_size=8,
        learning_rate=lr,
        optim=optim,
        max_grad_norm=max_grad_norm,
        lr_scheduler_type="constant",
        logging_steps=logging_steps,
        report_to=list(report_to),
        use_cpu=True,
        disable_tqdm=not tqdm,
        **saving,
        **extra,
    )
    trainer = Trainer(model=model, args=args, train_dataset=Data(), eval_dataset=Data() if eval_steps else None)
    trainer.train()
    return trainer


if __name__ == "__main__":
    a = sys.argv[1:]
    train(
        a[0],
        lr=float(a[1]),
        optim=a[2],
        max_grad_norm=float(a[3]),
        max_steps=int(a[4]),
        logging_steps=int(a[5]),
        eval_steps=int(a[6]) if len(a) > 6 else 0,
        tqdm=True,
    )
