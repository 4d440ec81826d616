"""What `watch` costs on a model with many parameter tensors (large MoE and many-adapter models have
thousands): the per-step ratio against the plain loop, side by side in one process.

    python benchmarks/many_params.py                       # 1,000 and 10,000 tensors; writes docs
    python benchmarks/many_params.py --tensors 10000 --rounds 4 --no-docs
    python benchmarks/many_params.py --warmup 3 --steps 6      # a young run: 2 of 6 timed steps sampled
    python benchmarks/many_params.py --tensors 10000 --profile   # where watch's time goes (cProfile)
    python benchmarks/many_params.py --tensors 10000 --gc --steps 100   # the garbage collector's share

Two shapes of model, both residual stacks of small blocks whose tensor count grows with depth while
each tensor stays small, so per-tensor costs (hooks, Python loops, per-tensor kernels) dominate:
`adapters`, blocks of a LoRA-style pair and a LayerNorm (down 64x4, up 4x64, norm weight and bias:
4 tensors and 2 modules a block: many modules too), and `experts`, MoE-style blocks of 16 expert
matrices and an output matrix held in one module (17 tensors a module). AdamW with its default
foreach implementation; batches of 8x64 features; one torch thread.

Method: as benchmarks/overhead.py: one model and optimizer per size, plain and watch in
interleaved chunks (the order flips every round), `--warmup` untimed warm-up steps (default 5: past
the first five steps of a run, which are all sampled) then `--steps` timed ones per chunk (default
10, of which watch samples one, as it does 1 step in 10 of a run), a fresh `watch` per chunk. Before
the timed steps of every chunk, plain or watched, the garbage collector runs once: a full
collection on these models takes ~0.2 s (tens of thousands of tensors and optimizer-state objects
to traverse), and whether one falls inside a chunk of 6-10 steps otherwise depends on what the
previous chunk (or the `watch` construction) left behind, not on the step being timed. Reported:
the median chunk step time of each, and the median, min and max of the per-round ratios
watch/plain (wall time), and the same for CPU time.
"""

from __future__ import annotations

import argparse
import gc
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

if __package__ in (None, ""):  # run as a script: make `benchmarks` importable
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
import benchmarks  # noqa: E402,F401  (puts this checkout's src/ first)
from benchmarks import docs  # noqa: E402

WIDTH, RANK, BATCH = 64, 4, 8
TENSORS_PER_BLOCK = 4


EXPERTS = 16  # tensors per block of the "experts" shape


def build(n_tensors: int, shape: str = "adapters") -> tuple[Any, Any, Any]:
    import torch
    from torch import nn

    class Experts(nn.Module):
        """MoE-style: one module holding many small expert matrices (few modules, many tensors)."""

        def __init__(self) -> None:
            super().__init__()
            self.experts = nn.ParameterList([nn.Parameter(torch.randn(WIDTH, RANK) * 0.02) for _ in range(EXPERTS)])
            self.out = nn.Parameter(torch.zeros(RANK, WIDTH))

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return x + torch.stack([x @ w for w in self.experts]).mean(0) @ self.out

    class Adapter(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.down = nn.Parameter(torch.randn(WIDTH, RANK) * 0.02)
            self.up = nn.Parameter(torch.zeros(RANK, WIDTH))
            self.norm = nn.LayerNorm(WIDTH)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return x + self.norm(x) @ self.down @ self.up

    torch.manual_seed(0)
    block, per_block = (Adapter, TENSORS_PER_BLOCK) if shape == "adapters" else (Experts, EXPERTS + 1)
    model = nn.Sequential(*[block() for _ in range(max(1, n_tensors // per_block))], nn.Linear(WIDTH, 1))
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    g = torch.Generator().manual_seed(0)
    batch = (torch.randn(BATCH, WIDTH, generator=g), torch.randn(BATCH, 1, generator=g))
    return model, opt, batch


def step(model: Any, opt: Any, batch: Any, mon: Any, hold: int = 0) -> None:
    """One training step; `hold` small objects (empty lists) are kept from the forward to the end of
    the step, as a loop's own bookkeeping (a metrics dict, a logger's record) keeps a few: see
    `--hold`."""
    x, y = batch
    opt.zero_grad(set_to_none=True)
    held = [[] for _ in range(hold)]  # noqa: F841  (alive until the step returns)
    loss = ((model(x) - y) ** 2).mean()
    loss.backward()
    opt.step()
    if mon is not None:
        mon.step(loss, batch={"x": x, "y": y})


def chunk(
    model: Any, opt: Any, batch: Any, watched: bool, steps: int, workdir: str, warmup: int = 5, hold: int = 0
) -> tuple[float, float]:
    import lossdoctor

    mon = lossdoctor.watch(model, opt, log_dir=tempfile.mkdtemp(dir=workdir), alerts=False) if watched else None
    try:
        for _ in range(warmup):
            step(model, opt, batch, mon, hold)
        gc.collect()
        t0, c0 = time.perf_counter(), time.process_time()
        for _ in range(steps):
            step(model, opt, batch, mon, hold)
        return (time.perf_counter() - t0) / steps, (time.process_time() - c0) / steps
    finally:
        if mon is not None:
            mon.close()


def measure(
    n_tensors: int, shape: str, rounds: int, steps: int, workdir: str, warmup: int = 5, hold: int = 0
) -> dict[str, Any]:
    model, opt, batch = build(n_tensors, shape)
    modules = sum(1 for _ in model.modules())
    real = sum(1 for _ in model.parameters())
    wall: dict[bool, list[float]] = {False: [], True: []}
    cpu: dict[bool, list[float]] = {False: [], True: []}
    chunk(model, opt, batch, False, 2, workdir, warmup, hold)
    for r in range(rounds):
        for watched in (False, True) if r % 2 == 0 else (True, False):
            w, c = chunk(model, opt, batch, watched, steps, workdir, warmup, hold)
            wall[watched].append(w)
            cpu[watched].append(c)
        print(
            f"  {shape}: {real} tensors round {r + 1}/{rounds}: plain {wall[False][-1] * 1e3:.1f} ms, "
            f"watch {wall[True][-1] * 1e3:.1f} ms",
            flush=True,
        )
    ratios = [w / p for w, p in zip(wall[True], wall[False])]
    cpu_ratios = [w / p for w, p in zip(cpu[True], cpu[False])]
    return {
        "tensors": real,
        "shape": shape,
        "modules": modules,
        "plain_ms": statistics.median(wall[False]) * 1e3,
        "watch_ms": statistics.median(wall[True]) * 1e3,
        "ratio": statistics.median(ratios),
        "ratio_min": min(ratios),
        "ratio_max": max(ratios),
        "cpu_ratio": statistics.median(cpu_ratios),
    }


def profile(n_tensors: int, steps: int, workdir: str) -> None:
    import cProfile
    import pstats

    import lossdoctor

    model, opt, batch = build(n_tensors)
    mon = lossdoctor.watch(model, opt, log_dir=tempfile.mkdtemp(dir=workdir), alerts=False)
    for _ in range(3):
        step(model, opt, batch, mon)
    pr = cProfile.Profile(time.process_time)
    pr.enable()
    for _ in range(steps):
        step(model, opt, batch, mon)
    pr.disable()
    mon.close()
    pstats.Stats(pr).sort_stats("tottime").print_stats(25)


class GcClock:
    """Collections and time of the garbage collector per generation, while `on` (a `gc.callbacks`
    entry): cProfile charges a collection to whatever call allocated last, so it does not show."""

    def __init__(self) -> None:
        self.on = False
        self.count = [0, 0, 0]
        self.ms = [0.0, 0.0, 0.0]
        self._t0 = 0.0

    def __call__(self, phase: str, info: dict[str, Any]) -> None:
        if not self.on:
            return
        if phase == "start":
            self._t0 = time.perf_counter()
            return
        g = info["generation"]
        self.count[g] += 1
        self.ms[g] += (time.perf_counter() - self._t0) * 1e3


def gc_report(
    n_tensors: int, shape: str, steps: int, rounds: int, workdir: str, warmup: int = 5, hold: int = 0
) -> None:
    """The garbage collector's work per step, plain and watched (interleaved rounds of `steps`
    steps after a full collection): full collections traverse every tracked object of the process
    (~0.2-0.5 s on these models), so how often they come is part of what a step costs.

    What sets that rate is how many objects survive a young-generation collection (CPython runs a
    full one once those exceed a quarter of the long-lived ones), and so when in the step the young
    collections land: during the forward or backward pass thousands of activations or gradients
    are alive and survive. A few hundred more tracked objects alive through a step move them there:
    the plain loop of the 10,002-tensor adapters model, measured over 40 steps, promotes ~4,700
    objects a step and runs 1 full collection; with 505 empty lists kept alive from its forward to
    the end of its step (as many objects as watch's gradient hooks on module outputs keep: a hook
    dict and a `grad_fn` object each), ~9,700 and 3. Reading every `.grad` after the backward
    changes neither.

    Why so few objects matter: a young (gen-1) collection comes every 11th collection, every
    11 x 700 = 7,700 net allocations. This bare loop's forward allocates 7,511 tracked objects (its
    activations), just under that period, so its gen-1 collections all fall in the optimizer step and
    none in the forward: its activations are never promoted. Any loop whose step keeps ~200 more
    objects alive through the forward loses that luck, watched or not: with `--hold 300`, in the
    benchmark's 10-step chunk after a collection, the plain loop promotes ~151k objects and runs a
    full collection, as `watch` (~143k) does; without it, ~98k (none) against ~128k (one)."""
    import lossdoctor

    model, opt, batch = build(n_tensors, shape)
    clock = GcClock()
    gc.callbacks.append(clock)
    try:
        for r in range(rounds):
            for watched in (False, True) if r % 2 == 0 else (True, False):
                mon = (
                    lossdoctor.watch(model, opt, log_dir=tempfile.mkdtemp(dir=workdir), alerts=False)
                    if watched
                    else None
                )
                for _ in range(warmup):
                    step(model, opt, batch, mon, hold)
                gc.collect()
                clock.count, clock.ms, clock.on = [0, 0, 0], [0.0, 0.0, 0.0], True
                t0 = time.perf_counter()
                for _ in range(steps):
                    step(model, opt, batch, mon, hold)
                wall = (time.perf_counter() - t0) * 1e3 / steps
                clock.on = False
                if mon is not None:
                    mon.close()
                per = ", ".join(f"gen{g} {clock.count[g]} ({clock.ms[g] / steps:.1f} ms/step)" for g in range(3))
                print(f"{shape} {'watch' if watched else 'plain'}: {wall:.1f} ms/step; collections {per}", flush=True)
    finally:
        gc.callbacks.remove(clock)


def sampled_steps(warmup: int, steps: int, layer_every: int = 10) -> int:
    """How many of a chunk's timed steps `watch` samples (steps 0-4 and every `layer_every`-th)."""
    return sum(1 for s in range(warmup, warmup + steps) if s < 5 or s % layer_every == 0)


def render(results: list[dict[str, Any]], warmup: int, steps: int, hold: int = 0) -> str:
    young = (
        " A young run's first five steps are all sampled: timing them overstates the steady-state cost."
        if warmup < 5
        else ""
    )
    young += (
        f" Each step, plain or watched, keeps {hold} empty lists from its forward to its end (`--hold`), as a "
        "loop's own bookkeeping keeps a few objects: the garbage collector's young collections then fall "
        "where they would in such a loop, not where this bare loop's happen to miss its forward (see `gc_report`)."
        if hold
        else ""
    )
    lines = [
        "## Overhead with many parameter tensors",
        "",
        docs.provenance(docs.command_line()) + " One torch thread; wall-time ratios are medians of "
        f"per-round pairs (in-process, interleaved). A fresh `watch` per chunk: {warmup} untimed steps, "
        f"then {steps} timed ones, of which watch samples {sampled_steps(warmup, steps)} (per-layer "
        f"statistics; a run samples 1 step in 10).{young} The garbage collector runs once before the "
        "timed steps of every chunk, plain or watched (a full collection on these models takes ~0.2 s: "
        "left to chance, it lands in one chunk or another).",
        "",
        "| model | parameter tensors | modules | plain step | watch step | ratio (min–max) | CPU-time ratio |",
        "|---|---|---|---|---|---|---|",
    ]
    for r in results:
        lines.append(
            f"| {r['shape']} | {r['tensors']:,} | {r['modules']:,} | {r['plain_ms']:.1f} ms | {r['watch_ms']:.1f} ms | "
            f"{r['ratio']:.3f}x ({r['ratio_min']:.3f}–{r['ratio_max']:.3f}) | {r['cpu_ratio']:.3f}x |"
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--tensors", default="1000,10000", help="comma-separated parameter-tensor counts")
    ap.add_argument(
        "--shapes",
        default="adapters,experts",
        help="adapters: a block of 4 tensors per module pair; experts: 17 tensors per module",
    )
    ap.add_argument("--rounds", type=int, default=8)
    ap.add_argument("--steps", type=int, default=10)
    ap.add_argument("--warmup", type=int, default=5, help="untimed steps per chunk (steps 0-4 are all sampled)")
    ap.add_argument(
        "--hold",
        type=int,
        default=0,
        help="small objects each step (plain and watched) keeps from its forward to its end, as a real "
        "loop's bookkeeping does: moves the garbage collector off the plain loop's lucky phase",
    )
    ap.add_argument("--profile", action="store_true")
    ap.add_argument("--gc", action="store_true", help="count the garbage collector's collections and time per step")
    ap.add_argument("--no-docs", dest="write_docs", action="store_false")
    args = ap.parse_args(argv)

    import torch

    torch.set_num_threads(1)
    counts = [int(s) for s in args.tensors.split(",") if s.strip()]
    with tempfile.TemporaryDirectory() as workdir:
        if args.profile:
            profile(counts[-1], args.steps, workdir)
            return 0
        if args.gc:
            for shape in args.shapes.split(","):
                gc_report(counts[-1], shape, args.steps, args.rounds, workdir, args.warmup, args.hold)
            return 0
        results = [
            measure(n, shape, args.rounds, args.steps, workdir, args.warmup, args.hold)
            for shape in args.shapes.split(",")
            for n in counts
        ]
    text = render(results, args.warmup, args.steps, args.hold)
    print(text)
    if args.write_docs:
        print(f"wrote {docs.write_section('many-params', text)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
