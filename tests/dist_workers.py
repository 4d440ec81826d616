"""Worker processes for the torch.distributed tests (gloo on CPU). A module of its own so that
`torch.multiprocessing.spawn` can import the functions in the child processes."""

from __future__ import annotations

import json
import os
from pathlib import Path

import torch
import torch.distributed as dist
from torch import nn

STEPS = 6


def free_port() -> int:
    """A TCP port free now on this host, for one test's process group."""
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def rank_env(rank: int, world: int, port: int, **more: str) -> None:
    """The environment a launcher (torchrun, Accelerate, deepspeed) gives each rank."""
    os.environ.update(
        {
            "MASTER_ADDR": "127.0.0.1",
            "MASTER_PORT": str(port),
            "RANK": str(rank),
            "LOCAL_RANK": str(rank),
            "WORLD_SIZE": str(world),
            "LOCAL_WORLD_SIZE": str(world),
            **more,
        }
    )
    torch.set_num_threads(1)


def tiny_gpt2_rows() -> tuple[nn.Module, torch.utils.data.Dataset]:
    """A 1-layer GPT-2 from a config (same weights on every rank) and 64 random token rows."""
    from transformers import GPT2Config, GPT2LMHeadModel

    class Rows(torch.utils.data.Dataset):
        def __len__(self):
            return 64

        def __getitem__(self, i):
            ids = torch.randint(0, 64, (16,), generator=torch.Generator().manual_seed(i))
            return {"input_ids": ids, "labels": ids.clone()}

    torch.manual_seed(0)
    model = GPT2LMHeadModel(
        GPT2Config(n_layer=1, n_embd=32, n_head=2, vocab_size=64, n_positions=16, bos_token_id=0, eos_token_id=0)
    )
    return model, Rows()


def _setup(rank: int, world: int, port: int) -> None:
    os.environ["MASTER_ADDR"] = "127.0.0.1"
    os.environ["MASTER_PORT"] = str(port)
    torch.set_num_threads(1)
    dist.init_process_group("gloo", rank=rank, world_size=world)


def _mlp() -> nn.Module:
    torch.manual_seed(0)  # the same initial weights on every rank
    return nn.Sequential(nn.Linear(8, 32), nn.Tanh(), nn.Linear(32, 32), nn.Tanh(), nn.Linear(32, 1))


def _batch(rank: int, step: int, nan_rank: int, nan_step: int) -> dict[str, torch.Tensor]:
    g = torch.Generator().manual_seed(100 * rank + step)
    x = torch.randn(4, 8, generator=g)
    if rank == nan_rank and step == nan_step:
        x[2, 5] = float("nan")
    return {"x": x, "y": x[:, :1] * 2.0}


def ddp_worker(rank: int, world: int, port: int, out: str, nan_rank: int, nan_step: int) -> None:
    """DDP over gloo; `watch` with the default log_dir (run from `out`); a user comm hook
    registered after `watch` (it must still run); rank `nan_rank` gets a NaN sample."""
    _setup(rank, world, port)
    os.chdir(out)
    from torch.distributed.algorithms.ddp_comm_hooks.default_hooks import allreduce_hook

    import lossdoctor

    ddp = nn.parallel.DistributedDataParallel(_mlp())
    opt = torch.optim.SGD(ddp.parameters(), lr=0.01)
    mon = lossdoctor.watch(ddp, opt, alerts=False)
    calls = [0]

    def user_hook(state, bucket):
        calls[0] += 1
        return allreduce_hook(state, bucket)

    ddp.register_comm_hook(dist.group.WORLD, user_hook)
    ref = []
    for step in range(STEPS):
        b = _batch(rank, step, nan_rank, nan_step)
        loss = nn.functional.mse_loss(ddp(b["x"]), b["y"])
        loss.backward()
        ref.append(float(nn.utils.clip_grad_norm_(ddp.parameters(), 1e6)))
        opt.step()
        opt.zero_grad()
        mon.step(loss, batch=b)
    mon.close()
    Path(out, f"rank{rank}.json").write_text(
        json.dumps({"ref": ref, "hook_calls": calls[0], "log_dir": str(Path(out) / mon.log_dir)})
    )
    dist.destroy_process_group()


def break_step_record(mon) -> None:
    """An internal error in the step record from now on (injected): the monitor disables itself on
    that rank, and must not leave the other ranks waiting in its per-step all-reduce. (An
    unreadable batch no longer does this: it costs only the batch checks.)"""

    def broken(loss, batch):
        raise RuntimeError("injected: step record failed")

    mon._collect = broken


FAIL_STEP = 4


def fsdp_worker(rank: int, world: int, port: int, out: str, nan_rank: int, nan_step: int) -> None:
    """FSDP2 (`fully_shard`) over gloo: each rank holds half of every gradient. Rank `nan_rank`
    gets a NaN sample at `nan_step`, and its monitor fails at FAIL_STEP."""
    _setup(rank, world, port)
    from torch.distributed.fsdp import fully_shard

    import lossdoctor

    model = _mlp()
    for layer in model:
        if isinstance(layer, nn.Linear):
            fully_shard(layer)
    fully_shard(model)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    mon = lossdoctor.watch(model, opt, log_dir=Path(out) / "ld", alerts=False)
    ref = []
    for step in range(STEPS):
        b = _batch(rank, step, nan_rank, nan_step)
        loss = nn.functional.mse_loss(model(b["x"]), b["y"])
        loss.backward()
        total = nn.utils.clip_grad_norm_(model.parameters(), 1e6)
        ref.append(float(total.full_tensor() if hasattr(total, "full_tensor") else total))
        opt.step()
        opt.zero_grad()
        if rank == nan_rank and step == FAIL_STEP:
            break_step_record(mon)
        mon.step(loss, batch=b)
    mon.close()
    Path(out, f"rank{rank}.json").write_text(json.dumps({"ref": ref}))
    dist.destroy_process_group()


def hf_ddp_worker(rank: int, world: int, port: int, out: str, nan_rank: int, nan_step: int) -> None:
    """HF Trainer under DDP (Accelerate's multi-CPU mode, gloo), the callback on every rank."""
    rank_env(rank, world, port)
    from transformers import Trainer, TrainingArguments

    from lossdoctor.integrations.transformers import LossDoctorCallback

    model, rows = tiny_gpt2_rows()
    cb = LossDoctorCallback(log_dir=Path(out) / "ld", alerts=False)
    args = TrainingArguments(
        output_dir=str(Path(out) / "out"),
        per_device_train_batch_size=4,
        max_steps=4,
        logging_steps=1,
        save_strategy="no",
        report_to=[],
        use_cpu=True,
        ddp_backend="gloo",
        disable_tqdm=True,
    )
    trainer = Trainer(model=model, args=args, train_dataset=rows, callbacks=[cb])
    trainer.train()
    logged = [h["grad_norm"] for h in trainer.state.log_history if "grad_norm" in h]
    Path(out, f"rank{rank}.json").write_text(
        json.dumps({"ref": logged, "wrapped": type(trainer.model_wrapped).__name__})
    )
    if dist.is_initialized():
        dist.destroy_process_group()


def fsdp1_worker(rank: int, world: int, port: int, out: str, nan_rank: int, nan_step: int) -> None:
    """FSDP1 (`FullyShardedDataParallel`, flat parameters, each Linear wrapped) over gloo on CPU;
    `watch` with a replay_fn (refused: a one-rank replay would wait in FSDP's all-gathers). Rank
    `nan_rank` gets a NaN sample at `nan_step`."""
    _setup(rank, world, port)
    from torch.distributed.fsdp import FullyShardedDataParallel as FSDP
    from torch.distributed.fsdp.wrap import ModuleWrapPolicy

    import lossdoctor

    model = FSDP(_mlp(), auto_wrap_policy=ModuleWrapPolicy({nn.Linear}), device_id=torch.device("cpu"))
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    mon = lossdoctor.watch(
        model,
        opt,
        log_dir=Path(out) / "ld",
        alerts=False,
        replay_fn=lambda m, b: nn.functional.mse_loss(m(b["x"]), b["y"]),
    )
    ref = []
    for step in range(STEPS):
        b = _batch(rank, step, nan_rank, nan_step)
        loss = nn.functional.mse_loss(model(b["x"]), b["y"])
        loss.backward()
        ref.append(float(model.clip_grad_norm_(1e6)))
        opt.step()
        opt.zero_grad()
        mon.step(loss, batch=b)
    mon.close()
    Path(out, f"rank{rank}.json").write_text(json.dumps({"ref": ref}))
    dist.destroy_process_group()
