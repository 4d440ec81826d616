"""What watching a training step costs: default `lossdoctor.watch` against the plain loop and the
tools people use today, on transformers GPT-2 models built from configs.

    python benchmarks/overhead.py                  # CPU, 2 threads, ~1M and ~10M params; writes docs
    python benchmarks/overhead.py --sizes 1m --rounds 3 --no-docs   # quick look
    python benchmarks/overhead.py --profile        # where watch's time goes (torch profiler)

Method: one process, one model and optimizer per size; the variants run in interleaved chunks
(round r runs every variant once, in an order rotated each round, so drift and the neighbours'
load hit every variant alike). A chunk installs the variant's instrumentation, runs 5 untimed
warm-up steps, times 10 training steps (zero_grad, forward, backward, optimizer step, and the
variant's per-step call; watch samples per-layer detail on 1 step in 10, so a chunk holds one
such step), then removes it. Reported: the median chunk step time, the ratio = median over rounds
of the paired ratio (the variant's chunk / the plain chunk of the same round), the min–max of
those ratios, the ratio of the fastest chunks, and the ratio of process CPU time. Peak memory is measured separately, one fresh
process per variant (RSS sampled every ms on CPU, `max_memory_allocated` on CUDA), above what the
process held before its first training step.

Between processes the ratio moves more than within one (a process keeps the heap layout it
started with, and on CPU the plain loop spends ~15% of its step in page faults: glibc returns the
82 MB logits-sized buffers to the kernel and faults them in again at every step, a cost that moves
with every other allocation). `--spread N` measures plain against watch in N fresh processes, with
glibc's default allocator and with one that keeps its memory (MALLOC_MMAP_MAX_=0, a trim threshold
of 1 TiB: no page faults after warm-up), which leaves the monitor's own compute.

A new `watch` is created per chunk, so its timed steps are those of a young run: the live engine
runs every 10 steps then (every ~2% of the run later on) — this overstates its steady-state cost.

Variants:
  plain           the loop alone
  watch           `lossdoctor.watch(model, optimizer)` with its defaults, `mon.step(loss, batch=...)`
  anomaly         `torch.autograd.detect_anomaly(check_nan=True)` around forward and backward
  hf-debug        `transformers.debug_utils.DebugUnderflowOverflow(model)` (forward hooks)
  naive-hooks     a forward hook per module taking 5 stats of the output with `.item()` each,
                  and a tensor hook on each output taking 2 stats of its gradient the same way
"""

from __future__ import annotations

import argparse
import contextlib
import json
import math
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

if __package__ in (None, ""):  # run as a script: make `benchmarks` importable
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
import benchmarks  # noqa: E402,F401  (puts this checkout's src/ first)
from benchmarks import docs  # noqa: E402

SIZES: dict[str, dict[str, int]] = {
    # ~0.9M and ~9.8M parameters; 10m is issue 2's reference (6 layers, n_embd 256)
    "1m": {"n_layer": 2, "n_embd": 128, "n_head": 4, "vocab_size": 4096},
    "10m": {"n_layer": 6, "n_embd": 256, "n_head": 8, "vocab_size": 20000},
    "124m": {"n_layer": 12, "n_embd": 768, "n_head": 12, "vocab_size": 50257},  # GPU only
}
BATCH, SEQ = 8, 128
VARIANTS = ("plain", "watch", "anomaly", "hf-debug", "naive-hooks")


def build(size: str, device: str):
    import torch
    from transformers import GPT2Config, GPT2LMHeadModel
    from transformers.utils import logging as hf_logging

    hf_logging.set_verbosity_error()
    torch.manual_seed(0)
    cfg = GPT2Config(n_positions=SEQ, resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0, **SIZES[size])
    cfg._attn_implementation = "eager"
    model = GPT2LMHeadModel(cfg).to(device)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    g = torch.Generator().manual_seed(0)
    ids = torch.randint(0, cfg.vocab_size, (BATCH, SEQ), generator=g).to(device)
    batch = {"input_ids": ids, "attention_mask": torch.ones_like(ids), "labels": ids}
    return model, opt, batch


# --- variants: install() -> (per-step context, per-step call, remove) ----------------------------


class Variant:
    def __init__(self, model: Any, opt: Any, workdir: Path) -> None:
        self.model, self.opt, self.workdir = model, opt, workdir

    def install(self) -> None: ...
    def context(self) -> contextlib.AbstractContextManager:
        return contextlib.nullcontext()

    def after_step(self, loss: Any, batch: Any) -> None: ...
    def remove(self) -> None: ...


class Plain(Variant):
    pass


class Watch(Variant):
    def install(self) -> None:
        import lossdoctor

        self.mon = lossdoctor.watch(self.model, self.opt, log_dir=tempfile.mkdtemp(dir=self.workdir), alerts=False)

    def after_step(self, loss: Any, batch: Any) -> None:
        self.mon.step(loss, batch=batch)

    def remove(self) -> None:
        self.mon.close()


class Anomaly(Variant):
    def context(self) -> contextlib.AbstractContextManager:
        import torch

        return torch.autograd.detect_anomaly(check_nan=True)


class HFDebug(Variant):
    def install(self) -> None:
        from transformers.debug_utils import DebugUnderflowOverflow

        self.dbg = DebugUnderflowOverflow(self.model)

    def remove(self) -> None:
        # DebugUnderflowOverflow keeps no hook handles: clear the forward hooks it added (the model
        # has no others in this benchmark)
        for m in self.model.modules():
            m._forward_hooks.clear()


class NaiveHooks(Variant):
    """What people write by hand: a hook per module, a Python float per statistic."""

    def install(self) -> None:
        import torch

        self.stats: list[tuple[float, ...]] = []
        self.handles = []

        def on_grad(g: torch.Tensor) -> None:
            self.stats.append((g.abs().max().item(), torch.isnan(g).any().item()))

        def fwd(module: Any, args: Any, out: Any) -> None:
            t = out[0] if isinstance(out, (tuple, list)) else getattr(out, "logits", out)
            if not isinstance(t, torch.Tensor) or not t.is_floating_point():
                return
            d = t.detach()
            self.stats.append(
                (
                    d.min().item(),
                    d.max().item(),
                    d.float().mean().item(),
                    d.float().std().item(),
                    torch.isnan(d).any().item(),
                )
            )
            if t.requires_grad:
                t.register_hook(on_grad)

        for m in self.model.modules():
            self.handles.append(m.register_forward_hook(fwd))

    def after_step(self, loss: Any, batch: Any) -> None:
        self.stats.clear()

    def remove(self) -> None:
        for h in self.handles:
            h.remove()


CLASSES: dict[str, type[Variant]] = {
    "plain": Plain,
    "watch": Watch,
    "anomaly": Anomaly,
    "hf-debug": HFDebug,
    "naive-hooks": NaiveHooks,
}


def train_step(model: Any, opt: Any, batch: Any, v: Variant) -> Any:
    opt.zero_grad(set_to_none=True)
    with v.context():
        loss = model(**batch).loss
        loss.backward()
    opt.step()
    v.after_step(loss, batch)
    return loss


def sync(device: str) -> None:
    if device == "cuda":
        import torch

        torch.cuda.synchronize()


def chunk(model: Any, opt: Any, batch: Any, v: Variant, steps: int, warmup: int, device: str) -> tuple[float, float]:
    """Mean wall-clock and process-CPU seconds per timed step of one chunk. CPU time is the less
    noisy of the two on a shared machine (time spent waiting for a core is not in it)."""
    v.install()
    try:
        for _ in range(warmup):
            train_step(model, opt, batch, v)
        sync(device)
        t0, c0 = time.perf_counter(), time.process_time()
        for _ in range(steps):
            train_step(model, opt, batch, v)
        sync(device)
        return (time.perf_counter() - t0) / steps, (time.process_time() - c0) / steps
    finally:
        v.remove()


def measure(
    size: str, variants: list[str], rounds: int, steps: int, warmup: int, device: str, log: Callable[[str], None]
) -> dict[str, Any]:
    model, opt, batch = build(size, device)
    n_params = sum(p.numel() for p in model.parameters())
    times: dict[str, list[float]] = {v: [] for v in variants}
    cpu: dict[str, list[float]] = {v: [] for v in variants}
    with tempfile.TemporaryDirectory() as tmp:
        objs = {v: CLASSES[v](model, opt, Path(tmp)) for v in variants}
        chunk(model, opt, batch, objs["plain"], 2, 1, device)  # allocator and kernels warm
        for r in range(rounds):
            order = variants[r % len(variants) :] + variants[: r % len(variants)]
            for v in order:
                wall, proc = chunk(model, opt, batch, objs[v], steps, warmup, device)
                times[v].append(wall)
                cpu[v].append(proc)
            log(f"  {size} round {r + 1}/{rounds}: " + ", ".join(f"{v} {times[v][-1] * 1e3:.0f} ms" for v in variants))
    base = statistics.median(times["plain"])
    base_cpu = statistics.median(cpu["plain"])
    out: dict[str, Any] = {"params": n_params, "variants": {}}
    for v in variants:
        per_round = [t / p for t, p in zip(times[v], times["plain"])]
        out["variants"][v] = {
            "median_ms": statistics.median(times[v]) * 1e3,
            "ratio": statistics.median(per_round),
            "ratio_of_medians": statistics.median(times[v]) / base,
            "ratio_min": min(per_round),
            "ratio_max": max(per_round),
            "cpu_ratio": statistics.median(cpu[v]) / base_cpu if base_cpu > 0 else math.nan,
            "best_ratio": min(times[v]) / min(times["plain"]),
            "wall_ms": [t * 1e3 for t in times[v]],
            "cpu_ms": [t * 1e3 for t in cpu[v]],
        }
    return out


# --- peak memory: one fresh process per variant --------------------------------------------------


class RSSSampler:
    """Peak resident set size while a block runs, sampled every millisecond from /proc (the CPU
    allocator has no peak counter; ru_maxrss would be the import spike of transformers)."""

    def __init__(self) -> None:
        import threading

        self.page = os.sysconf("SC_PAGE_SIZE")
        self.peak = self.rss()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def rss(self) -> int:
        with open("/proc/self/statm") as f:
            return int(f.read().split()[1]) * self.page

    def _run(self) -> None:
        while not self._stop.is_set():
            self.peak = max(self.peak, self.rss())
            time.sleep(0.001)

    def __enter__(self) -> RSSSampler:
        self._thread.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self._stop.set()
        self._thread.join()
        self.peak = max(self.peak, self.rss())


def peak_memory_child(size: str, variant: str, steps: int, device: str) -> None:
    """Entry point of the child process: run `steps` steps, print the peak memory above the
    memory held before training (model, batch, imports) as JSON."""
    import torch

    torch.set_num_threads(int(os.environ.get("OVERHEAD_THREADS", "2")))
    model, opt, batch = build(size, device)
    with tempfile.TemporaryDirectory() as tmp:
        v = CLASSES[variant](model, opt, Path(tmp))
        if device == "cuda":
            torch.cuda.synchronize()
            base = torch.cuda.memory_allocated()
            torch.cuda.reset_peak_memory_stats()
            v.install()
            for _ in range(steps):
                train_step(model, opt, batch, v)
            sync(device)
            peak = torch.cuda.max_memory_allocated() - base
        else:
            with RSSSampler() as rs:
                base = rs.peak
                v.install()
                for _ in range(steps):
                    train_step(model, opt, batch, v)
            peak = rs.peak - base
        v.remove()
    print(json.dumps({"peak_mb": peak / 2**20}))


def peak_memory(size: str, variant: str, steps: int, device: str, threads: int) -> float | None:
    env = dict(os.environ, OVERHEAD_THREADS=str(threads))
    r = subprocess.run(
        [sys.executable, str(Path(__file__).resolve()), "--_memory-child", size, variant, str(steps), device],
        capture_output=True,
        text=True,
        env=env,
        timeout=900,
    )
    for line in r.stdout.splitlines()[::-1]:
        try:
            return float(json.loads(line)["peak_mb"])
        except (ValueError, KeyError, TypeError):
            continue
    print(f"  memory of {variant} on {size} failed: {r.stderr.strip()[-300:]}", file=sys.stderr)
    return None


# --- CUDA: count host synchronisations --------------------------------------------------------------


def count_syncs(size: str, variant: str, steps: int) -> float:
    """Synchronising CUDA calls per step, counted with torch.cuda.set_sync_debug_mode('warn')."""
    import warnings

    import torch

    model, opt, batch = build(size, "cuda")
    with tempfile.TemporaryDirectory() as tmp:
        v = CLASSES[variant](model, opt, Path(tmp))
        v.install()
        for _ in range(2):
            train_step(model, opt, batch, v)
        torch.cuda.synchronize()
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            torch.cuda.set_sync_debug_mode("warn")
            try:
                for _ in range(steps):
                    train_step(model, opt, batch, v)
            finally:
                torch.cuda.set_sync_debug_mode("default")
        v.remove()
    return sum(1 for w in caught if "synchroniz" in str(w.message).lower()) / steps


# --- profile: where watch's time goes ----------------------------------------------------------------


class WatchWithout(Watch):
    """`watch` with one part switched off, to attribute its cost (ablation)."""

    part = ""

    def install(self) -> None:
        super().install()
        m = self.mon
        if self.part == "tracer":
            m.tracer.enabled = False
        elif self.part == "grads":
            m.grads.enabled = False
        elif self.part == "optimizer":
            m.opt_probe.enabled = False
        elif self.part == "batch":
            m.batch_probe.enabled = False
        elif self.part == "live":
            m.live.evaluate = lambda: m.live.report  # the engine never runs

    def after_step(self, loss: Any, batch: Any) -> None:
        self.mon.step(loss, batch=None if self.part == "batch" else batch)


ABLATIONS = ("tracer", "grads", "optimizer", "batch", "live")
for _part in ABLATIONS:
    CLASSES[f"watch-no-{_part}"] = type(f"WatchNo{_part.title()}", (WatchWithout,), {"part": _part})


def _op_profile(model: Any, opt: Any, batch: Any, v: Variant, steps: int) -> dict[str, tuple[float, int]]:
    """Self CPU seconds and call count per operator over `steps` steps of variant `v`."""
    from torch.profiler import ProfilerActivity, profile

    v.install()
    try:
        for _ in range(6):  # past watch's always-sampled first steps, as in a timed chunk
            train_step(model, opt, batch, v)
        with profile(activities=[ProfilerActivity.CPU]) as prof:
            for _ in range(steps):
                train_step(model, opt, batch, v)
    finally:
        v.remove()
    return {e.key: (e.self_cpu_time_total / 1e6, e.count) for e in prof.key_averages()}


def profile_watch(size: str, steps: int) -> str:
    """Where watch's time goes. Python level: cProfile (CPU time) of lossdoctor's own functions
    over watched steps. Operator level: torch profiler self-CPU time per operator, watched steps
    minus the same number of plain steps (what watch adds, operator by operator), and the largest
    tensors the tracer reads (its cost is a pass over every module output and output gradient)."""
    import cProfile
    import io
    import pstats

    model, opt, batch = build(size, "cpu")
    out = []
    with tempfile.TemporaryDirectory() as tmp:
        v = Watch(model, opt, Path(tmp))
        v.install()
        for _ in range(6):
            train_step(model, opt, batch, v)
        pr = cProfile.Profile(time.process_time)  # CPU time: robust to a busy machine
        pr.enable()
        for _ in range(steps):
            train_step(model, opt, batch, v)
        pr.disable()
        v.remove()
        buf = io.StringIO()
        pstats.Stats(pr, stream=buf).sort_stats("cumulative").print_stats("lossdoctor", 25)
        out.append(f"cProfile (CPU time) of {steps} watched steps, lossdoctor functions:\n" + buf.getvalue())

        plain = _op_profile(model, opt, batch, Plain(model, opt, Path(tmp)), steps)
        watched = _op_profile(model, opt, batch, Watch(model, opt, Path(tmp)), steps)
    total_plain = sum(t for t, _ in plain.values())
    rows = []
    for op in set(plain) | set(watched):
        tp, cp = plain.get(op, (0.0, 0))
        tw, cw = watched.get(op, (0.0, 0))
        rows.append((tw - tp, op, tp, tw, cp, cw))
    rows.sort(reverse=True)
    lines = [
        f"torch profiler, self CPU per operator over {steps} steps: watched minus plain "
        f"(plain total {total_plain:.2f} s, watched total {sum(t for t, _ in watched.values()):.2f} s)",
        f"{'operator':40s} {'+s':>8s} {'% of plain':>10s} {'plain s':>8s} {'watch s':>8s} {'calls':>12s}",
    ]
    for d, op, tp, tw, cp, cw in rows[:15]:
        lines.append(f"{op:40s} {d:8.3f} {100 * d / total_plain:9.1f}% {tp:8.3f} {tw:8.3f} {cp:>5d}->{cw:<6d}")
    out.append("\n".join(lines))

    import torch

    from lossdoctor.signals.tracer import first_float_tensor

    outs: list[tuple[str, torch.Tensor]] = []
    hooks = [
        m.register_forward_hook(lambda m, a, o, n=n: outs.append((n or "<model>", first_float_tensor(o))))
        for n, m in model.named_modules()
    ]
    with torch.no_grad():
        model(**batch)
    for h in hooks:
        h.remove()
    cost = []
    for name, t in outs:
        if t is None:
            continue
        ts = []
        torch.aminmax(t)
        for _ in range(7):
            c0 = time.perf_counter()
            torch.aminmax(t)
            ts.append(time.perf_counter() - c0)
        cost.append((min(ts), t.numel(), name))  # the minimum: the uncontended time
    total = sum(c for c, _, _ in cost)
    cost.sort(reverse=True)
    out.append(
        f"aminmax of each module's forward output, alone (min of 7 timings; the backward "
        f"hook does the same on its gradient): all {len(cost)} outputs {total * 1e3:.1f} ms per "
        f"forward; largest: "
        + ", ".join(f"{n} {k / 1e6:.2f}M el. {c * 1e3:.1f} ms ({100 * c / total:.0f}%)" for c, k, n in cost[:6])
    )
    return "\n\n".join(out)


# --- spread: the plain/watch ratio in fresh processes --------------------------------------------------

#: glibc keeps every freed block (no mmap, no trimming): no page faults once the heap has grown
STEADY_ALLOCATOR = {"MALLOC_MMAP_MAX_": "0", "MALLOC_TRIM_THRESHOLD_": str(1 << 40)}


def ratio_child(size: str, rounds: int, steps: int, warmup: int) -> None:
    """Entry point of a spread child: one interleaved plain/watch measurement, printed as JSON."""
    import torch

    torch.set_num_threads(int(os.environ.get("OVERHEAD_THREADS", "2")))
    res = measure(size, ["plain", "watch"], rounds, steps, warmup, "cpu", lambda msg: None)
    w = res["variants"]["watch"]
    print(
        json.dumps(
            {
                "ratio": w["ratio"],
                "min": w["ratio_min"],
                "max": w["ratio_max"],
                "plain_ms": res["variants"]["plain"]["median_ms"],
                "watch_ms": w["median_ms"],
            }
        )
    )


def spread(
    size: str, processes: int, args: argparse.Namespace, log: Callable[[str], None]
) -> dict[str, list[dict[str, float]]]:
    """`processes` fresh processes per allocator, the two allocators alternating so that both see
    the same drift of the machine."""
    out: dict[str, list[dict[str, float]]] = {"default": [], "steady": []}
    for i in range(processes):
        for name in ("default", "steady"):
            env = dict(os.environ, OVERHEAD_THREADS=str(args.threads))
            if name == "steady":
                env.update(STEADY_ALLOCATOR)
            r = subprocess.run(
                [
                    sys.executable,
                    str(Path(__file__).resolve()),
                    "--_ratio-child",
                    size,
                    str(args.rounds),
                    str(args.steps),
                    str(args.warmup),
                ],
                capture_output=True,
                text=True,
                env=env,
                timeout=3600,
            )
            try:
                res = json.loads(r.stdout.strip().splitlines()[-1])
            except (ValueError, IndexError):
                log(f"  spread process failed: {r.stderr.strip()[-300:]}")
                continue
            out[name].append(res)
            log(f"  {size} process {i + 1}/{processes}, {name} allocator: watch/plain {res['ratio']:.3f}")
    return out


def render_spread(
    size: str, res: dict[str, list[dict[str, float]]], args: argparse.Namespace, wall: float, load_before: str
) -> str:
    from benchmarks.zoo.report import table

    rows = []
    for name, runs in res.items():
        for i, r in enumerate(runs):
            rows.append(
                [
                    name,
                    str(i + 1),
                    f"{r['plain_ms']:.1f}",
                    f"{r['watch_ms']:.1f}",
                    f"{r['ratio']:.3f}×",
                    f"{r['min']:.3f}–{r['max']:.3f}",
                ]
            )
    summary = []
    for name, runs in res.items():
        if runs:
            ratios = sorted(r["ratio"] for r in runs)
            summary.append(
                f"{name} allocator: median {statistics.median(ratios):.3f}× over {len(runs)} "
                f"processes ({ratios[0]:.3f}–{ratios[-1]:.3f})"
            )
    return "\n\n".join(
        [
            "## Overhead across processes",
            docs.provenance(docs.command_line()) + f" Load average before the run: {load_before}. Took {wall:.0f} s.",
            f"`watch` against the plain loop on the {size} GPT-2 (batch {BATCH}×{SEQ}, CPU, {args.threads} threads), "
            f"measured as in the table above ({args.rounds} interleaved rounds of {args.steps} timed steps in one "
            "process), repeated in fresh processes. *default*: glibc as it comes. *steady*: glibc told to keep "
            "the memory it frees (`MALLOC_MMAP_MAX_=0`, `MALLOC_TRIM_THRESHOLD_=2^40`), so that no step pays "
            "page faults: the plain loop gets faster, and what remains of the ratio is the monitor's own work.",
            table(
                [
                    "allocator",
                    "process",
                    "plain ms/step",
                    "watch ms/step",
                    "ratio (median of rounds)",
                    "per-round range",
                ],
                rows,
            ),
            "; ".join(summary) + ".",
        ]
    )


# --- report ------------------------------------------------------------------------------------------


def render(results: dict[str, Any], args: argparse.Namespace, wall: float, load_before: str) -> str:
    from benchmarks.zoo.report import table

    dev = results["device"]
    title = "## Overhead" if not args.ablate else "## Overhead, part by part"
    parts = [
        title,
        docs.provenance(docs.command_line()) + f" Load average before the run: {load_before}. Took {wall:.0f} s.",
        f"transformers GPT-2 built from configs, batch {BATCH}×{SEQ} tokens, AdamW, "
        f"{'CPU with ' + str(args.threads) + ' threads' if dev == 'cpu' else 'CUDA'}; {args.rounds} "
        f"interleaved rounds of {args.steps} timed steps per variant (after {args.warmup} untimed). "
        "Ratio = the median over rounds of (variant's chunk / plain's chunk in the same round), "
        "paired so that both saw the same load; the range is the min–max of those per-round ratios; best-chunk ratio = the variant's fastest chunk / the plain loop's fastest "
        "(the least disturbed by other processes); the CPU-time ratio is the median ratio with the "
        "process's CPU time instead of wall time. Peak memory: one fresh process per variant running "
        f"{args.mem_steps} steps; the peak above what the process held before the first step "
        f"({'resident set size sampled every ms' if dev == 'cpu' else 'torch.cuda.max_memory_allocated'}),"
        " i.e. activations, gradients, optimizer state and the instrumentation's own buffers.",
    ]
    for size, res in results["sizes"].items():
        rows = []
        for v, r in res["variants"].items():
            mem = res.get("memory", {}).get(v)
            base_mem = res.get("memory", {}).get("plain")
            rows.append(
                [
                    v,
                    f"{r['median_ms']:.1f}",
                    f"{r['ratio']:.2f}×",
                    f"{r['ratio_min']:.2f}–{r['ratio_max']:.2f}",
                    f"{r['best_ratio']:.2f}×",
                    f"{r['cpu_ratio']:.2f}×",
                    "–" if mem is None else f"{mem:.0f}",
                    "–" if mem is None or base_mem is None else f"{mem - base_mem:+.0f}",
                ]
                + ([f"{res['syncs'][v]:.1f}"] if "syncs" in res else [])
            )
        head = [
            "variant",
            "ms/step (median)",
            "ratio",
            "per-round range",
            "best-chunk ratio",
            "CPU-time ratio",
            "peak training MB",
            "Δ vs plain MB",
        ] + (["syncs/step"] if "syncs" in res else [])
        parts += [f"### GPT-2 {res['params'] / 1e6:.1f}M params ({size}, {dev})", table(head, rows)]
        again, first = res.get("memory_plain_again"), res.get("memory", {}).get("plain")
        if again is not None and first is not None:
            parts.append(
                f"Memory noise floor: the plain run measured twice in two fresh processes gave "
                f"{first:.0f} and {again:.0f} MB."
            )
    target = "≤ 1.05× on CPU" if dev == "cpu" else "≤ 1.03× and no per-module synchronisation on CUDA"
    parts.append(f"Target for the default `watch`: {target}.")
    if args.ablate:
        parts.append(
            "Each `watch-no-X` row is the default `watch` with one part switched off: the tracer "
            "(per-module forward/backward statistics), grads (per-parameter gradient norms), "
            "optimizer (LR, update ratio, eps dominance), batch (per-sample NaN/label checks), "
            "live (the detection engine during training). Its ratio's drop from `watch`'s is "
            "that part's cost, within the per-round noise."
        )
    return "\n\n".join(parts)


def main(argv: list[str] | None = None) -> int:
    if argv is None and len(sys.argv) > 1 and sys.argv[1] == "--_memory-child":
        peak_memory_child(sys.argv[2], sys.argv[3], int(sys.argv[4]), sys.argv[5])
        return 0
    if argv is None and len(sys.argv) > 1 and sys.argv[1] == "--_ratio-child":
        ratio_child(sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5]))
        return 0
    ap = argparse.ArgumentParser(
        prog="python benchmarks/overhead.py", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument(
        "--sizes", default=None, help="comma list of 1m,10m,124m (default: 1m,10m on CPU, plus 124m on CUDA)"
    )
    ap.add_argument("--variants", default=",".join(VARIANTS))
    ap.add_argument("--device", choices=("cpu", "cuda", "auto"), default="auto")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument(
        "--steps", type=int, default=10, help="timed steps per chunk (10: one of them is one of watch's sampled steps)"
    )
    ap.add_argument(
        "--warmup", type=int, default=5, help="untimed steps per chunk (5: past watch's always-sampled first steps)"
    )
    ap.add_argument("--mem-steps", type=int, default=12)
    ap.add_argument("--no-memory", action="store_true")
    ap.add_argument("--profile", action="store_true", help="print a profile of watch and exit")
    ap.add_argument(
        "--ablate",
        action="store_true",
        help="time watch with each of its parts switched off (tracer, grads, optimizer, "
        "batch, live) instead of the peers",
    )
    ap.add_argument(
        "--spread",
        type=int,
        default=0,
        metavar="N",
        help="plain vs watch on the first size in N fresh processes per allocator (glibc as it "
        "comes, and one that keeps freed memory) instead of the peers",
    )
    ap.add_argument("--docs", type=Path, default=None, help="markdown file to write (default docs/benchmarks.md)")
    ap.add_argument("--no-docs", action="store_true")
    ap.add_argument("--json", type=Path, default=None, help="also write the raw results here")
    args = ap.parse_args(argv)

    import torch

    torch.set_num_threads(args.threads)
    device = ("cuda" if torch.cuda.is_available() else "cpu") if args.device == "auto" else args.device
    sizes = args.sizes.split(",") if args.sizes else (["1m", "10m"] + (["124m"] if device == "cuda" else []))
    variants = [v for v in args.variants.split(",") if v in CLASSES]
    if args.ablate:  # where watch's cost goes: its own section of the docs, no memory runs
        variants = ["plain", "watch"] + [f"watch-no-{p}" for p in ABLATIONS]
        args.no_memory = True
    if "plain" not in variants:
        variants.insert(0, "plain")
    if args.profile:
        for s in sizes:
            print(f"== watch on {s}\n{profile_watch(s, args.steps)}")
        return 0

    def log(msg: str) -> None:
        print(msg, file=sys.stderr, flush=True)

    load_before = " / ".join(f"{x:.2f}" for x in os.getloadavg())
    t0 = time.perf_counter()
    if args.spread:
        if device != "cpu":
            log("--spread measures the CPU allocator; run it with --device cpu")
            return 2
        res = spread(sizes[0], args.spread, args, log)
        text = render_spread(sizes[0], res, args, time.perf_counter() - t0, load_before)
        print(text)
        if args.json:
            args.json.write_text(json.dumps(res, indent=1))
        if not args.no_docs:
            docs.write_section("overhead-spread", text, args.docs or docs.DOC)
        return 0
    results: dict[str, Any] = {"device": device, "sizes": {}}
    for s in sizes:
        res = measure(s, variants, args.rounds, args.steps, args.warmup, device, log)
        if not args.no_memory:
            res["memory"] = {v: peak_memory(s, v, args.mem_steps, device, args.threads) for v in variants}
            # the same plain run again: how far two identical processes differ (the noise floor)
            res["memory_plain_again"] = peak_memory(s, "plain", args.mem_steps, device, args.threads)
        if device == "cuda":
            res["syncs"] = {v: count_syncs(s, v, args.steps) for v in variants}
        results["sizes"][s] = res
    wall = time.perf_counter() - t0
    text = render(results, args, wall, load_before)
    print(text)
    if args.json:
        args.json.write_text(json.dumps(results, indent=1))
    if not args.no_docs:
        target = args.docs or docs.DOC
        section = "overhead-ablation" if args.ablate else "overhead" if device == "cpu" else "overhead-gpu"
        docs.write_section(section, text, target)
        log(f"wrote {target}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
