"""Overhead of the framework callbacks: the same training with and without LossDoctorCallback.

HF `Trainer` and `lightning.Trainer` train a GPT-2 built from a config (6 layers, n_embd 256,
vocab 8192) on 8x128-token steps made of 2 micro-batches of 4 (gradient accumulation, so the
callbacks' micro-batch path is exercised), on CPU. The two variants run in alternating chunks
in one process (interleaved, so machine load hits both alike); a step's time is the interval
between consecutive `on_*_batch_end`/`on_step_end` calls of a timing callback registered last
(so it includes the lossdoctor callback's own work); the first steps of each chunk are warm-up
and dropped. Prints the median step time of each variant and their ratio. For reference, "watch
loop" runs the same steps in a hand-written loop with and without `lossdoctor.watch`: the core
monitor's cost, which the callbacks carry too.

    python benchmarks/callbacks.py [--framework hf|lightning|loop|both|all] [--chunks 6] [--steps 12]
                                   [--threads 2] [--layers 6] [--embd 256]
"""

from __future__ import annotations

import argparse
import logging
import statistics
import sys
import tempfile
import time
import warnings
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))

import torch  # noqa: E402

SEQ, MICRO, ACCUM, VOCAB = 128, 4, 2, 8192
WARMUP = 6  # steps 0-4 are the monitor's always-sampled start: not the steady state


LAYERS, EMBD = 6, 256


def gpt2():
    from transformers import GPT2Config, GPT2LMHeadModel

    torch.manual_seed(0)
    cfg = GPT2Config(
        n_layer=LAYERS, n_embd=EMBD, n_head=4, vocab_size=VOCAB, n_positions=SEQ, bos_token_id=0, eos_token_id=0
    )
    return GPT2LMHeadModel(cfg)


class Tokens(torch.utils.data.Dataset):
    def __len__(self) -> int:
        return 100_000

    def __getitem__(self, i: int) -> dict:
        g = torch.Generator().manual_seed(i)
        ids = torch.randint(0, VOCAB, (SEQ,), generator=g)
        return {"input_ids": ids, "attention_mask": torch.ones(SEQ, dtype=torch.long), "labels": ids.clone()}


# --- HF Trainer ---------------------------------------------------------------------------------
def hf_chunk(model, steps: int, watched: bool, tmp: str) -> list[float]:
    from transformers import Trainer, TrainerCallback, TrainingArguments

    from lossdoctor.integrations.transformers import LossDoctorCallback

    times: list[float] = []

    class Timer(TrainerCallback):
        last = None

        def on_step_end(self, args, state, control, **kw):
            now = time.perf_counter()
            if self.last is not None:
                times.append(now - self.last)
            self.last = now

    cbs = [LossDoctorCallback(log_dir=Path(tmp) / f"hf-{time.time_ns()}", alerts=False)] if watched else []
    args = TrainingArguments(
        output_dir=tmp,
        per_device_train_batch_size=MICRO,
        gradient_accumulation_steps=ACCUM,
        max_steps=steps,
        learning_rate=1e-4,
        save_strategy="no",
        report_to=[],
        use_cpu=True,
        disable_tqdm=True,
        logging_steps=10_000,
        dataloader_num_workers=0,
    )
    Trainer(model=model, args=args, train_dataset=Tokens(), callbacks=[*cbs, Timer()]).train()
    return times[WARMUP:]


# --- Lightning ----------------------------------------------------------------------------------
def lightning_chunk(model, steps: int, watched: bool, tmp: str) -> list[float]:
    import lightning as L

    from lossdoctor.integrations.lightning import LossDoctorCallback

    times: list[float] = []

    class Module(L.LightningModule):
        def __init__(self) -> None:
            super().__init__()
            self.model = model

        def training_step(self, batch, batch_idx):
            return self.model(**batch).loss

        def configure_optimizers(self):
            return torch.optim.AdamW(self.parameters(), lr=1e-4)

    class Timer(L.Callback):
        last = None

        def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx):
            if (batch_idx + 1) % ACCUM:
                return
            now = time.perf_counter()
            if self.last is not None:
                times.append(now - self.last)
            self.last = now

    cbs = [LossDoctorCallback(log_dir=Path(tmp) / f"pl-{time.time_ns()}", alerts=False)] if watched else []
    dl = torch.utils.data.DataLoader(Tokens(), batch_size=MICRO)
    trainer = L.Trainer(
        max_steps=steps,
        accelerator="cpu",
        devices=1,
        logger=False,
        enable_checkpointing=False,
        enable_progress_bar=False,
        enable_model_summary=False,
        accumulate_grad_batches=ACCUM,
        gradient_clip_val=1.0,
        num_sanity_val_steps=0,
        callbacks=[*cbs, Timer()],
    )
    trainer.fit(Module(), dl)
    return times[WARMUP:]


# --- the core monitor in a plain loop, for reference ------------------------------------------------
def loop_chunk(model, steps: int, watched: bool, tmp: str) -> list[float]:
    """The same steps written by hand, `lossdoctor.watch` or not: what the core monitor costs, so
    the callbacks' own share can be read off."""
    import lossdoctor

    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    data = Tokens()
    mon = lossdoctor.watch(model, opt, log_dir=Path(tmp) / f"loop-{time.time_ns()}", alerts=False) if watched else None
    times: list[float] = []
    last = None
    for step in range(steps):
        for m in range(ACCUM):
            rows = [data[(step * ACCUM + m) * MICRO + i] for i in range(MICRO)]
            batch = {k: torch.stack([r[k] for r in rows]) for k in rows[0]}
            loss = model(**batch).loss / ACCUM
            loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        opt.zero_grad()
        if mon is not None:
            mon.step(loss, batch=batch)
        now = time.perf_counter()
        if last is not None:
            times.append(now - last)
        last = now
    if mon is not None:
        mon.close()
    return times[WARMUP:]


def measure(name: str, chunk, chunks: int, steps: int) -> tuple[float, float, float]:
    """Chunks alternate plain/watched (ABBA...); each adjacent pair gives a ratio of medians, so
    slow drifts in machine load cancel; the median of the pair ratios is the figure."""
    model = gpt2()
    plain: list[float] = []
    watched: list[float] = []
    pairs: list[float] = []
    with tempfile.TemporaryDirectory() as tmp:
        for c in range(chunks):
            order = (False, True) if c % 2 == 0 else (True, False)
            got = {}
            for w in order:
                got[w] = chunk(model, steps, w, tmp)
                (watched if w else plain).extend(got[w])
            pairs.append(statistics.median(got[True]) / statistics.median(got[False]))
    p, w = statistics.median(plain), statistics.median(watched)
    r = statistics.median(pairs)
    print(
        f"{name:10s} plain {p * 1e3:8.1f} ms/step   watched {w * 1e3:8.1f} ms/step   "
        f"ratio of medians {w / p:.3f}   median of {len(pairs)} paired-chunk ratios {r:.3f} "
        f"(range {min(pairs):.3f}-{max(pairs):.3f}; {len(plain)} + {len(watched)} steps)",
        flush=True,
    )
    return p, w, r


def main() -> None:
    global LAYERS, EMBD
    ap = argparse.ArgumentParser()
    ap.add_argument("--framework", choices=("hf", "lightning", "loop", "both", "all"), default="all")
    ap.add_argument("--chunks", type=int, default=6)
    ap.add_argument("--steps", type=int, default=12)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--layers", type=int, default=LAYERS)
    ap.add_argument("--embd", type=int, default=EMBD)
    a = ap.parse_args()
    LAYERS, EMBD = a.layers, a.embd
    torch.set_num_threads(a.threads)
    warnings.filterwarnings("ignore")
    logging.getLogger("lightning").setLevel(logging.ERROR)
    logging.getLogger("lightning.pytorch").setLevel(logging.ERROR)
    import transformers

    transformers.logging.set_verbosity_error()
    print(
        f"GPT-2 {LAYERS}x{EMBD}, vocab {VOCAB}, {ACCUM} micro-batches of {MICRO}x{SEQ} tokens per step, "
        f"CPU, {a.threads} threads, {a.chunks} interleaved chunks of {a.steps} steps"
    )
    if a.framework in ("loop", "all"):
        measure("watch loop", loop_chunk, a.chunks, a.steps)
    if a.framework in ("hf", "both", "all"):
        measure("HF Trainer", hf_chunk, a.chunks, a.steps)
    if a.framework in ("lightning", "both", "all"):
        measure("Lightning", lightning_chunk, a.chunks, a.steps)


if __name__ == "__main__":
    main()
