"""Worker processes for the DeepSpeed tests: the real `deepspeed` package on CPU (its CPU accelerator,
gloo), two ranks started with `torch.multiprocessing.spawn`. A module of its own so that spawn can
import the functions in the child processes.

One spawn runs every scenario in turn (DeepSpeed's start-up, not the training, is what costs time):
ZeRO-2 and ZeRO-3 with a NaN sample on rank 1, a healthy ZeRO-2 run with gradient accumulation,
and an fp16 ZeRO-2 run on unnormalised features.

fp16 on CPU: DeepSpeed's CPU accelerator reports fp16 as unsupported unless oneDNN has fp16 kernels
for this CPU (it refuses the config at `initialize`). The fp16 scenario overrides that one capability
answer; everything else (DeepSpeed's fp16 ZeRO optimizer, its dynamic loss scaler and overflow check,
torch's fp16 CPU kernels) is the real code.
"""

from __future__ import annotations

import json
from pathlib import Path

import torch
from torch import nn

from dist_workers import rank_env, tiny_gpt2_rows

NAN_RANK, NAN_STEP = 1, 3
NAN_STEPS = 6
HEALTHY_STEPS, HEALTHY_ACCUM = 60, 2
FP16_STEPS = 14


def _setup(rank: int, world: int, port: int) -> None:
    rank_env(rank, world, port, DS_ACCELERATOR="cpu")
    import deepspeed

    deepspeed.init_distributed(dist_backend="gloo")


def mlp(act: type[nn.Module] = nn.Tanh) -> nn.Module:
    torch.manual_seed(0)  # the same initial weights on every rank
    return nn.Sequential(nn.Linear(8, 32), act(), nn.Linear(32, 32), act(), nn.Linear(32, 1))


def batch(rank: int, step: int, nan: bool = True) -> dict[str, torch.Tensor]:
    g = torch.Generator().manual_seed(100 * rank + step)
    x = torch.randn(4, 8, generator=g)
    if nan and rank == NAN_RANK and step == NAN_STEP:
        x[2, 5] = float("nan")
    return {"x": x, "y": x[:, :1] * 2.0}


def local_grad_norm(rank: int, step: int) -> float:
    """The gradient norm of rank `rank`'s own batch at the initial weights, without DeepSpeed."""
    model = mlp()
    b = batch(rank, step)
    nn.functional.mse_loss(model(b["x"]), b["y"]).backward()
    return float(torch.linalg.vector_norm(torch.stack([p.grad.norm() for p in model.parameters()])))


def averaged_grad_norm(world: int, step: int) -> float:
    """The norm of the ranks' averaged gradient at the initial weights (what ZeRO reduces to)."""
    grads = []
    for r in range(world):
        model = mlp()
        b = batch(r, step)
        nn.functional.mse_loss(model(b["x"]), b["y"]).backward()
        grads.append(torch.cat([p.grad.reshape(-1) for p in model.parameters()]))
    return float(torch.stack(grads).mean(0).norm())


def _config(stage: int, **extra) -> dict:
    return {
        "train_micro_batch_size_per_gpu": 4,
        "gradient_accumulation_steps": 1,
        "optimizer": {"type": "AdamW", "params": {"lr": 1e-3, "torch_adam": True}},
        "gradient_clipping": 1.0,
        "zero_optimization": {"stage": stage},
        "steps_per_print": 10**6,
        **extra,
    }


def _nan_run(rank: int, stage: int, out: Path) -> dict:
    """A NaN sample on rank NAN_RANK; a replay_fn passed (refused under ZeRO 1-3, with a note)."""
    import deepspeed

    import lossdoctor

    model = mlp()
    engine, opt, _, _ = deepspeed.initialize(model=model, model_parameters=model.parameters(), config=_config(stage))
    try:
        lossdoctor.watch(engine, on_incident="skip")
        refused = None
    except ValueError as e:
        refused = str(e)
    mon = lossdoctor.watch(
        engine,
        log_dir=out / f"zero{stage}",
        alerts=False,
        replay_fn=lambda m, b: nn.functional.mse_loss(m(b["x"]), b["y"]),
    )
    ds_norms = []
    for step in range(NAN_STEPS):
        b = batch(rank, step)
        loss = nn.functional.mse_loss(engine(b["x"]), b["y"])
        engine.backward(loss)
        engine.step()
        mon.step(loss, batch=b)
        n = engine.get_global_grad_norm()
        ds_norms.append(float(n) if n is not None else None)
    mon.close()
    return {"ds_norms": ds_norms, "log_dir": str(out / f"zero{stage}"), "skip_refused": refused}


def _healthy_run(rank: int, out: Path) -> dict:
    """ZeRO-2, gradient accumulation over 2 micro-batches, `watch(engine, optimizer)` and
    `mon.step` after every `engine.step()` (the micro-steps included)."""
    import deepspeed

    import lossdoctor

    model = mlp()
    cfg = _config(2, gradient_accumulation_steps=HEALTHY_ACCUM)
    cfg["optimizer"]["params"]["lr"] = 3e-3
    engine, opt, _, _ = deepspeed.initialize(model=model, model_parameters=model.parameters(), config=cfg)
    mon = lossdoctor.watch(engine, opt, log_dir=out / "healthy", alerts=False)
    micro = []
    for i in range(HEALTHY_STEPS * HEALTHY_ACCUM):
        b = batch(rank, 1000 + i, nan=False)
        loss = nn.functional.mse_loss(engine(b["x"]), b["y"])
        engine.backward(loss)
        engine.step()
        mon.step(loss, batch=b)
        micro.append(float(loss))
    mon.close()
    return {"micro_losses": micro, "global_steps": engine.global_steps}


def _fp16_run(rank: int, out: Path) -> dict:
    """fp16 ZeRO-2 with DeepSpeed's dynamic loss scale; features in the thousands (finite in fp16)
    make gradients that overflow fp16 at every scale."""
    import deepspeed
    from deepspeed.accelerator import get_accelerator

    import lossdoctor

    get_accelerator().is_fp16_supported = lambda: True  # see the module docstring
    model = mlp(nn.ReLU)
    cfg = _config(2, fp16={"enabled": True, "initial_scale_power": 16, "hysteresis": 1})
    engine, opt, _, _ = deepspeed.initialize(model=model, model_parameters=model.parameters(), config=cfg)
    mon = lossdoctor.watch(engine, log_dir=out / "fp16", alerts=False)
    scales, skipped = [], []
    for step in range(FP16_STEPS):
        b = batch(rank, 2000 + step, nan=False)
        x = (b["x"] * 5000).half()
        loss = nn.functional.mse_loss(engine(x).float(), b["y"] * 5000)
        engine.backward(loss)
        engine.step()
        mon.step(loss, batch={"x": x})
        scales.append(float(engine.optimizer.loss_scale))
        skipped.append(int(engine.skipped_steps))
    mon.close()
    return {"scales": scales, "skipped": skipped}


def _bf16_run(rank: int, out: Path) -> dict:
    """bf16 ZeRO-2 (DeepSpeed's bf16 path: no loss scale), healthy."""
    import deepspeed

    import lossdoctor

    model = mlp()
    cfg = _config(2, bf16={"enabled": True})
    engine, opt, _, _ = deepspeed.initialize(model=model, model_parameters=model.parameters(), config=cfg)
    mon = lossdoctor.watch(engine, log_dir=out / "bf16", alerts=False)
    norms = []
    for step in range(NAN_STEPS):
        b = batch(rank, 3000 + step, nan=False)
        loss = nn.functional.mse_loss(engine(b["x"].bfloat16()).float(), b["y"])
        engine.backward(loss)
        engine.step()
        mon.step(loss, batch=b)
        norms.append(float(engine.get_global_grad_norm()))
    mon.close()
    return {"ds_norms": norms}


def zero_worker(rank: int, world: int, port: int, out: str) -> None:
    _setup(rank, world, port)
    root = Path(out)
    res = {"local_ref": local_grad_norm(rank, 0), "avg_ref": averaged_grad_norm(world, 0)}
    for stage in (0, 1, 2, 3):
        res[f"zero{stage}"] = _nan_run(rank, stage, root)
    res["healthy"] = _healthy_run(rank, root)
    res["bf16"] = _bf16_run(rank, root)
    res["fp16"] = _fp16_run(rank, root)
    (root / f"rank{rank}.json").write_text(json.dumps(res))


def hf_worker(rank: int, world: int, port: int, out: str) -> None:
    """The HF Trainer with a DeepSpeed ZeRO-2 config on CPU (Accelerate's DeepSpeed plugin, gloo),
    two micro-batches per step, the callback on every rank."""
    rank_env(rank, world, port, DS_ACCELERATOR="cpu")
    from transformers import Trainer, TrainingArguments

    from lossdoctor.integrations.transformers import LossDoctorCallback

    model, rows = tiny_gpt2_rows()
    cb = LossDoctorCallback(log_dir=Path(out) / "ld", alerts=False)
    ds = {
        "train_micro_batch_size_per_gpu": "auto",
        "gradient_accumulation_steps": "auto",
        "train_batch_size": "auto",
        "gradient_clipping": "auto",
        "zero_optimization": {"stage": 2},
        "steps_per_print": 10**6,
    }
    args = TrainingArguments(
        output_dir=str(Path(out) / "out"),
        per_device_train_batch_size=4,
        max_steps=4,
        gradient_accumulation_steps=2,
        logging_steps=1,
        save_strategy="no",
        report_to=[],
        use_cpu=True,
        deepspeed=ds,
        ddp_backend="gloo",
        disable_tqdm=True,
    )
    trainer = Trainer(model=model, args=args, train_dataset=rows, callbacks=[cb])
    trainer.train()
    logged = [h for h in trainer.state.log_history if "grad_norm" in h]
    Path(out, f"rank{rank}.json").write_text(
        json.dumps(
            {
                "ref": [h["grad_norm"] for h in logged],
                "loss": [h["loss"] for h in logged],
                "wrapped": type(trainer.model_wrapped).__name__,
            }
        )
    )
