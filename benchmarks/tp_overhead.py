#!/usr/bin/env python3
"""Overhead of `lossdoctor.watch` on a tensor-parallel run against the same run without it.

One process by default (a 1-rank mesh: every parameter a DTensor, every DTensor dispatch and the
monitor's per-step all-reduce run, without a second process contending for the cores), or
`--world 2` ranks (gloo on CPU, one torch thread each); an MLP of residual blocks whose up projections are
`ColwiseParallel` and down projections `RowwiseParallel` (`parallelize_module`, DTensor), AdamW,
`clip_grad_norm_` over the mesh. Rounds alternate a chunk of plain steps and a chunk of watched
steps on the same model (a monitor is started before its chunk and closed after it, both outside
the timing), so both see the same machine load; ratio = median over rounds of (watched chunk /
plain chunk), timed on rank 0 (the ranks wait for each other in every row-parallel all-reduce).

    python benchmarks/tp_overhead.py [--world 1] [--rounds 5] [--steps 10] [--blocks 4] [--width 256] [--docs]
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))
sys.path.insert(0, str(ROOT))
from benchmarks.chunked_ranks import Ratios, load_average, run_ranks  # noqa: E402


def _model(blocks: int, width: int):
    from torch import nn

    class Block(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.up = nn.Linear(width, 4 * width)
            self.act = nn.GELU()
            self.down = nn.Linear(4 * width, width)

        def forward(self, x):
            return x + self.down(self.act(self.up(x)))

    return nn.Sequential(*[Block() for _ in range(blocks)])


def _worker(rank: int, world: int, port: int, out: str, args: dict) -> None:
    os.environ.update(
        {
            "MASTER_ADDR": "127.0.0.1",
            "MASTER_PORT": str(port),
            "RANK": str(rank),
            "LOCAL_RANK": str(rank),
            "WORLD_SIZE": str(world),
            "LOCAL_WORLD_SIZE": str(world),
        }
    )
    import torch
    import torch.distributed as dist
    from torch import nn
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.tensor.parallel import ColwiseParallel, RowwiseParallel, parallelize_module

    import lossdoctor

    torch.set_num_threads(1)
    dist.init_process_group("gloo", rank=rank, world_size=world)
    mesh = init_device_mesh("cpu", (world,), mesh_dim_names=("tp",))
    torch.manual_seed(0)
    model = _model(args["blocks"], args["width"])
    n_params = sum(p.numel() for p in model.parameters())
    plan = {f"{i}.up": ColwiseParallel() for i in range(args["blocks"])}
    plan.update({f"{i}.down": RowwiseParallel() for i in range(args["blocks"])})
    model = parallelize_module(model, mesh, plan)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    gen = torch.Generator().manual_seed(0)  # the same batches on both TP ranks

    def chunk(mon) -> float:
        t0 = time.perf_counter()
        for _ in range(args["steps"]):
            x = torch.randn(args["batch"], args["width"], generator=gen)
            loss = nn.functional.mse_loss(model(x), x)
            loss.backward()
            # clip_grad_norm_ of a mix of DTensor and plain gradients raises: the grads here are all
            # DTensors except none (every Linear is split), so it runs over the mesh
            nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            opt.step()
            opt.zero_grad()
            if mon is not None:
                mon.step(loss, batch={"x": x})
        return time.perf_counter() - t0

    for _ in range(3):  # warm-up, untimed
        chunk(None)
    plain, watched = [], []
    for r in range(args["rounds"]):
        plain.append(chunk(None))
        mon = lossdoctor.watch(model, opt, log_dir=Path(out) / f"ld-{r}", alerts=False)
        watched.append(chunk(mon))
        mon.close()
    if rank == 0:
        Path(out, "result.json").write_text(json.dumps({"plain": plain, "watched": watched, "params": n_params}))
    dist.destroy_process_group()


def measure(args: argparse.Namespace) -> dict:
    opts = {"rounds": args.rounds, "steps": args.steps, "blocks": args.blocks, "width": args.width, "batch": args.batch}
    return run_ranks(_worker, args.world, opts, "ld-tp-overhead-")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--world", type=int, default=1, help="ranks (1: one process)")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--steps", type=int, default=10)
    ap.add_argument("--blocks", type=int, default=4)
    ap.add_argument("--width", type=int, default=256)
    ap.add_argument("--batch", type=int, default=64)
    ap.add_argument("--docs", action="store_true", help="write the numbers into docs/benchmarks.md")
    args = ap.parse_args()
    load_before = load_average()
    t0 = time.perf_counter()
    res = measure(args)
    wall = time.perf_counter() - t0
    r = Ratios(res, args.steps)
    lines = r.lines(
        f"MLP {res['params'] / 1e6:.1f}M params, tensor parallel over {args.world} rank(s), batch {args.batch}"
    )
    print("\n".join(lines))
    if args.docs:
        sys.path.insert(0, str(ROOT))
        from benchmarks import docs

        body = "\n".join(
            [
                "## Overhead under tensor parallel",
                "",
                docs.provenance(docs.command_line())
                + f" Load average before the run: {load_before}. Took {wall:.0f} s.",
                "",
                f"An MLP of {args.blocks} residual blocks ({res['params'] / 1e6:.1f}M params, width {args.width}, "
                f"hidden {4 * args.width}), up projections `ColwiseParallel`, down projections `RowwiseParallel` "
                f"(`parallelize_module`), batch {args.batch} rows, AdamW, `clip_grad_norm_` over the mesh, "
                + (
                    "one process (a 1-rank mesh, gloo; one torch thread: the monitor's one cross-rank all-reduce per step costs nothing there, so this understates its cost on real ranks; `--world 2` measures it). "
                    if args.world == 1
                    else f"{args.world} ranks (gloo on CPU, one torch thread each). "
                )
                + f"{args.rounds} rounds, each a chunk of {args.steps} plain steps then {args.steps} watched steps on the "
                "same model (the monitor started before and closed after its chunk, outside the timing); timed on "
                "rank 0. Ratio = median over rounds of watched / plain. The machine is shared: the load average says "
                "how busy it was.",
                "",
                "| variant | ms/step (median) | ratio | per-round range |",
                "|---|---|---|---|",
                f"| plain | {r.ms('plain'):.1f} | 1.00× | 1.00–1.00 |",
                f"| watch(model, opt) | {r.ms('watched'):.1f} | {r.median:.2f}× | "
                f"{min(r.ratios):.2f}–{max(r.ratios):.2f} |",
            ]
        )
        docs.write_section("tp-overhead", body)


if __name__ == "__main__":
    main()
