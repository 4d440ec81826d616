#!/usr/bin/env python3
"""Overhead of `lossdoctor.watch` on a pipeline-parallel run against the same run without it.

One process by default (a 1-stage pipeline over a 1-rank gloo group: the schedule's micro-batches,
the stage's placeholder metadata pass and the monitor's per-step all-reduce over the pipeline group
all run, without a second process contending for the cores), or `--world 2` stages (gloo on CPU, one
torch thread each, the residual blocks split evenly). An MLP of residual blocks, trained by torch's
`ScheduleGPipe` (`torch.distributed.pipelining`, 4 micro-batches a step, the loss on the last
stage), AdamW. Every rank calls `watch(stage, opt)` on its `PipelineStage`. Rounds alternate a chunk
of plain steps and a chunk of watched steps on the same model (a monitor is started before its
chunk and closed after it, both outside the timing), so both see the same machine load; ratio =
median over rounds of (watched chunk / plain chunk), timed on rank 0.

    python benchmarks/pp_overhead.py [--world 1] [--rounds 5] [--steps 10] [--blocks 4] [--width 256] [--docs]
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


def _stage_model(blocks: int, width: int, stage: int, stages: int):
    from torch import nn

    class Block(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.up = nn.Linear(width, 4 * width)
            self.act = nn.GELU()
            self.down = nn.Linear(4 * width, width)

        def forward(self, x):
            return x + self.down(self.act(self.up(x)))

    per = blocks // stages
    return nn.Sequential(*[Block() for _ in range(per)])


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
    from torch.distributed.pipelining import PipelineStage, ScheduleGPipe

    import lossdoctor

    torch.set_num_threads(1)
    dist.init_process_group("gloo", rank=rank, world_size=world)
    torch.manual_seed(rank)
    model = _stage_model(args["blocks"], args["width"], rank, world)
    n_params = sum(p.numel() for p in model.parameters())
    stage = PipelineStage(model, rank, world, torch.device("cpu"))
    schedule = ScheduleGPipe(stage, n_microbatches=4, loss_fn=nn.functional.mse_loss)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    gen = torch.Generator().manual_seed(0)  # the same batches on every stage

    def chunk(mon) -> float:
        t0 = time.perf_counter()
        for _ in range(args["steps"]):
            x = torch.randn(args["batch"], args["width"], generator=gen)
            losses: list = []
            if world == 1:
                schedule.step(x, target=x, losses=losses)
            elif rank == 0:
                schedule.step(x)
            else:
                schedule.step(target=x, losses=losses)
            opt.step()
            opt.zero_grad()
            if mon is not None:
                mon.step(torch.stack(losses).mean() if losses else None, batch={"x": x})
        return time.perf_counter() - t0

    for _ in range(3):  # warm-up, untimed (the first step runs the stage's metadata pass)
        chunk(None)
    plain, watched = [], []
    for r in range(args["rounds"]):
        plain.append(chunk(None))
        mon = lossdoctor.watch(stage, opt, log_dir=Path(out) / f"ld-{r}", alerts=False)
        watched.append(chunk(mon))
        mon.close()
    totals = [None] * world
    dist.all_gather_object(totals, n_params)
    if rank == 0:
        Path(out, "result.json").write_text(json.dumps({"plain": plain, "watched": watched, "params": sum(totals)}))
    dist.destroy_process_group()


def measure(args: argparse.Namespace) -> dict:
    opts = {"rounds": args.rounds, "steps": args.steps, "blocks": args.blocks, "width": args.width, "batch": args.batch}
    return run_ranks(_worker, args.world, opts, "ld-pp-overhead-")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--world", type=int, default=1, help="stages, one per rank (1: one process)")
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
    lines = r.lines(f"MLP {res['params'] / 1e6:.1f}M params, pipeline of {args.world} stage(s), batch {args.batch}")
    print("\n".join(lines))
    if args.docs:
        sys.path.insert(0, str(ROOT))
        from benchmarks import docs

        body = "\n".join(
            [
                "## Overhead under pipeline parallel",
                "",
                docs.provenance(docs.command_line())
                + f" Load average before the run: {load_before}. Took {wall:.0f} s.",
                "",
                f"An MLP of {args.blocks} residual blocks ({res['params'] / 1e6:.1f}M params, width {args.width}, "
                f"hidden {4 * args.width}) trained by torch's `ScheduleGPipe` (`torch.distributed.pipelining`, 4 "
                f"micro-batches of {args.batch // 4} rows a step, MSE loss on the last stage), AdamW, every rank "
                "`watch(stage, opt)` on its `PipelineStage`; "
                + (
                    "one process (a 1-stage pipeline over a 1-rank gloo group; one torch thread: the monitor's one "
                    "all-reduce per step over the pipeline group costs nothing there, and no stage waits for another, "
                    "so this understates the cost on real stages; `--world 2` measures them). "
                    if args.world == 1
                    else f"{args.world} stages, one per rank (gloo on CPU, one torch thread each). "
                )
                + f"{args.rounds} rounds, each a chunk of {args.steps} plain steps then {args.steps} watched steps on the "
                "same model (the monitor started before and closed after its chunk, outside the timing); timed on "
                "rank 0. Ratio = median over rounds of watched / plain. The machine is shared: the load average says "
                "how busy it was.",
                "",
                "| variant | ms/step (median) | ratio | per-round range |",
                "|---|---|---|---|",
                f"| plain | {r.ms('plain'):.1f} | 1.00× | 1.00–1.00 |",
                f"| watch(stage, opt) | {r.ms('watched'):.1f} | {r.median:.2f}× | "
                f"{min(r.ratios):.2f}–{max(r.ratios):.2f} |",
            ]
        )
        docs.write_section("pp-overhead", body)


if __name__ == "__main__":
    main()
