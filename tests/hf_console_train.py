"""Run a real Hugging Face Trainer (GPT-2 from a config, CPU) with its console progress bar on, so a
test can capture what a user's terminal or `nohup.out` holds: tqdm bars with `\\r`, the logged dicts
printed by the Trainer's ProgressCallback, the final `train_runtime` dict.

    python hf_console_train.py OUT_DIR LR OPTIM MAX_GRAD_NORM MAX_STEPS LOGGING_STEPS [EVAL_STEPS]
"""

from __future__ import annotations

import sys


def main(out: str, lr: float, optim: str, max_grad_norm: float, max_steps: int, logging_steps: int,
         eval_steps: int = 0) -> None:
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
    args = TrainingArguments(output_dir=out, max_steps=max_steps, per_device_train_batch_size=8,
                             learning_rate=lr, optim=optim, max_grad_norm=max_grad_norm,
                             lr_scheduler_type="constant", logging_steps=logging_steps,
                             save_strategy="steps", save_steps=max_steps, report_to=[], use_cpu=True, disable_tqdm=False,
                             **extra)
    Trainer(model=model, args=args, train_dataset=Data(), eval_dataset=Data() if eval_steps else None).train()


if __name__ == "__main__":
    a = sys.argv[1:]
    main(a[0], float(a[1]), a[2], float(a[3]), int(a[4]), int(a[5]), int(a[6]) if len(a) > 6 else 0)
