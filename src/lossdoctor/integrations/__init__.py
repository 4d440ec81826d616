"""Where people train: framework callbacks and many ranks.

- `lossdoctor.integrations.transformers.LossDoctorCallback`: Hugging Face `Trainer` (and TRL's
  trainers built on it);
- `lossdoctor.integrations.lightning.LossDoctorCallback`: `lightning.Trainer`;
- Accelerate needs no callback: `lossdoctor.watch` on the prepared model and optimizer (see the
  docs' integrations page); `accelerate` only reads its gradient-sync flag;
- `entry`: `lossdoctor.watch` itself (a model and its optimizer, or a DeepSpeed engine, which
  `deepspeed` watches: ZeRO 0-3, DeepSpeed's global norm, loss scale and skipped steps);
- `microbatch`: the micro-batches of a step (loss, its backward weight, the joined batch);
- `distributed`, `launch`, `accelerate`: names kept for the DDP / FSDP2 / FSDP1 probes, the run
  directory every rank agrees on, and the gradient-sync flag, which the monitor uses by itself and
  which therefore live below it, in `lossdoctor.signals`.

Each module imports its framework lazily, so importing this package costs nothing.
"""
