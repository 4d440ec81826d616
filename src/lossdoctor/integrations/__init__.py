"""Where people train: framework callbacks and many ranks.

- `lossdoctor.integrations.transformers.LossDoctorCallback`: Hugging Face `Trainer` (and TRL's
  trainers built on it);
- `lossdoctor.integrations.lightning.LossDoctorCallback`: `lightning.Trainer`;
- Accelerate needs no callback: `lossdoctor.watch` on the prepared model and optimizer (see the
  docs' integrations page); `accelerate` only reads its gradient-sync flag;
- `microbatch`: the micro-batches of a step (loss, its backward weight, the joined batch);
- `distributed`: DDP / FSDP2 probes the monitor attaches by itself under `torch.distributed`;
- `launch`: the run directory every rank agrees on without a collective.

Each module imports its framework lazily, so importing this package costs nothing.
"""
