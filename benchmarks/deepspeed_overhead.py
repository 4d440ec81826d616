#!/usr/bin/env python3
"""Overhead of `lossdoctor.watch(engine)` on a DeepSpeed ZeRO-2 run against the same run without it.

Two ranks (DeepSpeed's CPU accelerator, gloo; one torch thread each), a transformers GPT-2 built from
a config, AdamW, ZeRO-2, gradient clipping. Rounds alternate a chunk of plain steps and a chunk of
watched steps on the same engine (a monitor is started before its chunk and closed after it, both
outside the timing), so both see the same machine load; ratio = median over rounds of (watched
chunk / plain chunk), timed on rank 0 (the ranks wait for each other in every step's reduction).

    python benchmarks/deepspeed_overhead.py [--rounds 5] [--steps 10] [--layers 2] [--embd 128] [--docs]
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


def _worker(rank: int, world: int, port: int, out: str, args: dict) -> None:
    os.environ.update(
        {
            "MASTER_ADDR": "127.0.0.1",
            "MASTER_PORT": str(port),
            "RANK": str(rank),
            "LOCAL_RANK": str(rank),
            "WORLD_SIZE": str(world),
            "LOCAL_WORLD_SIZE": str(world),
            "DS_ACCELERATOR": "cpu",
        }
    )
    import torch

    torch.set_num_threads(1)
    import deepspeed
    from transformers import GPT2Config, GPT2LMHeadModel

    import lossdoctor

    deepspeed.init_distributed(dist_backend="gloo")
    torch.manual_seed(0)
    cfg = GPT2Config(
        n_layer=args["layers"],
        n_embd=args["embd"],
        n_head=4,
        vocab_size=512,
        n_positions=args["seq"],
        bos_token_id=0,
        eos_token_id=0,
    )
    model = GPT2LMHeadModel(cfg)
    n_params = sum(p.numel() for p in model.parameters())
    ds = {
        "train_micro_batch_size_per_gpu": args["batch"],
        "gradient_accumulation_steps": 1,
        "optimizer": {"type": "AdamW", "params": {"lr": 3e-4, "torch_adam": True}},
        "gradient_clipping": 1.0,
        "zero_optimization": {"stage": 2},
        "steps_per_print": 10**6,
    }
    engine, _, _, _ = deepspeed.initialize(model=model, model_parameters=model.parameters(), config=ds)
    gen = torch.Generator().manual_seed(rank)

    def batch():
        ids = torch.randint(0, 512, (args["batch"], args["seq"]), generator=gen)
        return {"input_ids": ids, "labels": ids}

    def chunk(mon) -> float:
        t0 = time.perf_counter()
        for _ in range(args["steps"]):
            b = batch()
            loss = engine(**b).loss
            engine.backward(loss)
            engine.step()
            if mon is not None:
                mon.step(loss, batch=b)
        return time.perf_counter() - t0

    for _ in range(3):  # warm-up, untimed
        chunk(None)
    plain, watched = [], []
    for r in range(args["rounds"]):
        plain.append(chunk(None))
        mon = lossdoctor.watch(engine, log_dir=Path(out) / f"ld-{r}", alerts=False)
        watched.append(chunk(mon))
        mon.close()
    if rank == 0:
        Path(out, "result.json").write_text(json.dumps({"plain": plain, "watched": watched, "params": n_params}))


def measure(args: argparse.Namespace) -> dict:
    opts = {
        "rounds": args.rounds,
        "steps": args.steps,
        "layers": args.layers,
        "embd": args.embd,
        "seq": args.seq,
        "batch": args.batch,
    }
    return run_ranks(_worker, 2, opts, "ld-ds-overhead-")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--steps", type=int, default=10)
    ap.add_argument("--layers", type=int, default=2)
    ap.add_argument("--embd", type=int, default=128)
    ap.add_argument("--seq", type=int, default=64)
    ap.add_argument("--batch", type=int, default=8)
    ap.add_argument("--docs", action="store_true", help="write the numbers into docs/benchmarks.md")
    args = ap.parse_args()
    load_before = load_average()
    t0 = time.perf_counter()
    res = measure(args)
    wall = time.perf_counter() - t0
    r = Ratios(res, args.steps)
    lines = r.lines(
        f"GPT-2 {res['params'] / 1e6:.1f}M params, ZeRO-2 over 2 ranks, batch {args.batch}x{args.seq} per rank"
    )
    print("\n".join(lines))
    if args.docs:
        sys.path.insert(0, str(ROOT))
        from benchmarks import docs

        body = "\n".join(
            [
                "## Overhead under DeepSpeed ZeRO-2",
                "",
                docs.provenance(docs.command_line())
                + f" Load average before the run: {load_before}. Took {wall:.0f} s.",
                "",
                f"transformers GPT-2 built from a config ({res['params'] / 1e6:.1f}M params, {args.layers} layers, "
                f"width {args.embd}), batch {args.batch}×{args.seq} tokens per rank, AdamW, ZeRO-2 with gradient "
                "clipping, two ranks on DeepSpeed's CPU accelerator (gloo, one torch thread each). "
                f"{args.rounds} rounds, each a chunk of {args.steps} plain steps then {args.steps} watched steps on the "
                "same engine (the monitor started before and closed after its chunk, outside the timing); timed on "
                "rank 0. Ratio = median over rounds of watched / plain.",
                "",
                "| variant | ms/step (median) | ratio | per-round range |",
                "|---|---|---|---|",
                f"| plain | {r.ms('plain'):.1f} | 1.00× | 1.00–1.00 |",
                f"| watch(engine) | {r.ms('watched'):.1f} | {r.median:.2f}× | "
                f"{min(r.ratios):.2f}–{max(r.ratios):.2f} |",
            ]
        )
        docs.write_section("deepspeed-overhead", body)


if __name__ == "__main__":
    main()
