"""A tensor-parallel worker for the TP tests, launched with torchrun (gloo on CPU): an MLP whose
two Linear layers are split with `ColwiseParallel` / `RowwiseParallel` (`parallelize_module`),
watched on every rank. Arguments: OUT NAN_RANK NAN_STEP [DP] (NAN_RANK -1: a healthy run).

- DP 1 (default): a 1-D mesh ("tp",) over every rank.
- DP 2: torchtitan's 2-D layout, a ("dp", "tp") mesh: TP inside each row, FSDP2 (`fully_shard`)
  across the rows; each dp rank gets its own batch, the TP ranks of a row the same one.

The NaN is put into the input of rank NAN_RANK's shard of the second (row-parallel) layer (the
output of `up`, by a forward hook on that rank only), so only that rank's local activations are
non-finite before the all-reduce in `down` mixes them. Each rank writes rankN.json:
clip_grad_norm_'s total per step, the monitor's warnings, the preflight's weight statistics and
the torch.distributed collectives issued while training."""

from __future__ import annotations

import json
import logging
import sys
from pathlib import Path

import torch
import torch.distributed as dist
from torch import nn

STEPS = 20


class MLP(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.up = nn.Linear(8, 32)
        self.act = nn.Tanh()
        self.down = nn.Linear(32, 8)
        self.head = nn.Linear(8, 1)  # not split: replicated on every TP rank

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(self.down(self.act(self.up(x))))


def build(world: int, dp: int) -> tuple[nn.Module, int]:
    """The parallelized model and this rank's data-parallel index."""
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.tensor import DTensor, Replicate, distribute_module
    from torch.distributed.tensor.parallel import ColwiseParallel, RowwiseParallel, parallelize_module

    if dp > 1:
        mesh = init_device_mesh("cpu", (dp, world // dp), mesh_dim_names=("dp", "tp"))
        tp = mesh["tp"]
    else:
        mesh = tp = init_device_mesh("cpu", (world,), mesh_dim_names=("tp",))
    torch.manual_seed(0)  # the same full weights on every rank before they are split
    model = parallelize_module(MLP(), tp, {"up": ColwiseParallel(), "down": RowwiseParallel()})
    # the head replicated as DTensors (as torchtitan replicates its norms), so that every
    # parameter is a DTensor and clip_grad_norm_ computes the mesh's total
    distribute_module(
        model.head,
        tp,
        input_fn=lambda mod, args, m: tuple(DTensor.from_local(a, m, [Replicate()]) for a in args),
        output_fn=lambda mod, out, m: out.to_local(),
    )
    if dp == 1:
        return model, 0
    from torch.distributed.fsdp import fully_shard

    for layer in (model.up, model.down, model.head):
        fully_shard(layer, mesh=mesh["dp"])
    fully_shard(model, mesh=mesh["dp"])
    return model, mesh.get_coordinate()[0]


def count_collectives() -> dict[str, int]:
    """Counts torch.distributed's all-reduce and all-gathers from now on (they still run)."""
    calls = {"all_reduce": 0, "all_gather": 0}

    def counted(name: str, fn):
        def call(*args, **kwargs):
            calls[name] += 1
            return fn(*args, **kwargs)

        return call

    dist.all_reduce = counted("all_reduce", dist.all_reduce)
    dist.all_gather = counted("all_gather", dist.all_gather)
    dist.all_gather_into_tensor = counted("all_gather", dist.all_gather_into_tensor)
    return calls


def main() -> None:
    out, nan_rank, nan_step = Path(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3])
    dp = int(sys.argv[4]) if len(sys.argv) > 4 else 1
    torch.set_num_threads(1)
    dist.init_process_group("gloo")
    rank, world = dist.get_rank(), dist.get_world_size()
    import lossdoctor
    from lossdoctor.preflight.init import weight_stats

    model, dp_rank = build(world, dp)
    state = {"step": -1}

    def poison(module: nn.Module, args: tuple, out: torch.Tensor) -> torch.Tensor | None:
        # `up` is column-parallel: its output here is this rank's shard of the hidden units (the
        # input of this rank's shard of the row-parallel `down`); hooked after parallelize's own
        # output hook (which makes it a plain local tensor), before watch's
        if state["step"] == nan_step and rank == nan_rank:
            out = out.clone()
            out[1, 3] = float("nan")
            return out
        return None

    model.up.register_forward_hook(poison)
    opt = torch.optim.SGD(model.parameters(), lr=0.05)
    warnings: list[str] = []

    class Keep(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            if record.levelno >= logging.WARNING:
                warnings.append(record.getMessage())

    logging.getLogger("lossdoctor").addHandler(Keep())
    stats = {s["layer"]: s["rms"] for s in weight_stats(model)}  # preflight's init check, on the shards
    calls = count_collectives()
    # a replay_fn, refused (a one-rank replay would wait in the forward's collectives)
    mon = lossdoctor.watch(
        model, opt, log_dir=out / "ld", alerts=False, replay_fn=lambda m, b: nn.functional.mse_loss(m(b["x"]), b["y"])
    )
    ref = []
    for step in range(STEPS):
        state["step"] = step
        g = torch.Generator().manual_seed(1000 * dp_rank + step)  # the same batch on the TP ranks of a row
        x = torch.randn(32, 8, generator=g)
        y = x[:, :1] * 0.5
        loss = nn.functional.mse_loss(model(x), y)
        loss.backward()
        total = nn.utils.clip_grad_norm_(model.parameters(), 1e6)
        ref.append(float(total.full_tensor() if hasattr(total, "full_tensor") else total))
        opt.step()
        opt.zero_grad()
        mon.step(loss, batch={"x": x, "y": y})
    mon.close()
    (out / f"rank{rank}.json").write_text(
        json.dumps({"ref": ref, "warnings": warnings, "weight_rms": stats, "calls": calls})
    )
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
