"""What `watch` costs on a GPU: GPT-2 124M and 350M on CUDA, plain against `watch`, eager and
under `torch.compile`, with the host synchronisations each variant adds.

    python benchmarks/gpu.py                       # CUDA: 124m and 350m, bf16 autocast; writes docs
    python benchmarks/gpu.py --sizes 124m --no-docs --rounds 3
    python benchmarks/gpu.py --smoke               # any machine: a tiny model on the CPU, no docs
                                                   # (checks that the script runs; not a figure)

Without CUDA (and without --smoke) it prints why and exits 0, so it can sit in any checkout and
be run the day a GPU is there.

Method (as benchmarks/overhead.py, in one process): eager variants share one model and optimizer
and run in interleaved chunks (round r runs every variant once, the order rotated each round);
each chunk installs its instrumentation, runs untimed warm-up steps, times `--steps` training
steps with a `torch.cuda.synchronize()` at both ends, then removes it. The compiled variants are
two identical models built from the same seed, one compiled plain and one compiled under `watch`
(installing and removing hooks on a compiled model would recompile it), alternating per round.
Reported per variant: median step time, and the ratio = median over rounds of the paired ratio
against its own baseline (eager plain for `watch`, compiled plain for `watch+compile`).

Host syncs: every step of every variant runs once more under `torch.cuda.set_sync_debug_mode("warn")`
and the synchronising calls it warns about are counted (per step, minus the baseline's). The
monitor's promise is 0 added syncs per step: its readout copies to pinned memory and reads the
values a step later.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
import warnings
from pathlib import Path
from typing import Any

if __package__ in (None, ""):  # run as a script: make `benchmarks` importable
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
import benchmarks  # noqa: E402,F401  (puts this checkout's src/ first)
from benchmarks import docs  # noqa: E402

#: GPT-2 small and medium (the 124M/350M of the GPT-2 paper's table 2), and a tiny model for --smoke
SIZES: dict[str, dict[str, int]] = {
    "124m": {"n_layer": 12, "n_embd": 768, "n_head": 12, "vocab_size": 50257},
    "350m": {"n_layer": 24, "n_embd": 1024, "n_head": 16, "vocab_size": 50257},
    "tiny": {"n_layer": 2, "n_embd": 64, "n_head": 4, "vocab_size": 512},
}
#: tokens per step on the GPU: 8 sequences of 1024 (GPT-2's context), nanoGPT's micro-batch shape
GPU_BATCH, GPU_SEQ = 8, 1024
SMOKE_BATCH, SMOKE_SEQ = 2, 32


def build(size: str, device: str, batch: int, seq: int) -> tuple[Any, Any, dict[str, Any]]:
    import torch
    from transformers import GPT2Config, GPT2LMHeadModel
    from transformers.utils import logging as hf_logging

    hf_logging.set_verbosity_error()
    torch.manual_seed(0)
    cfg = GPT2Config(n_positions=seq, resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0, **SIZES[size])
    model = GPT2LMHeadModel(cfg).to(device)
    fused = device == "cuda"
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4, fused=fused)
    g = torch.Generator().manual_seed(0)
    ids = torch.randint(0, cfg.vocab_size, (batch, seq), generator=g).to(device)
    return model, opt, {"input_ids": ids, "labels": ids}


class Runner:
    """One model trained one way: `step()` is a full training step (and `mon.step` when watched)."""

    def __init__(
        self,
        model: Any,
        opt: Any,
        batch: dict[str, Any],
        device: str,
        *,
        watched: bool,
        compiled: bool,
        amp: bool,
        workdir: str,
    ) -> None:
        import torch

        self.model, self.opt, self.batch, self.device = model, opt, batch, device
        self.watched, self.amp, self.workdir = watched, amp and device == "cuda", workdir
        self.mon: Any = None
        self.forward = torch.compile(model) if compiled else model

    def install(self) -> None:
        if self.watched and self.mon is None:
            import lossdoctor

            self.mon = lossdoctor.watch(self.model, self.opt, log_dir=tempfile.mkdtemp(dir=self.workdir), alerts=False)

    def remove(self) -> None:
        if self.mon is not None:
            self.mon.close()
            self.mon = None

    def step(self) -> None:
        import torch

        self.opt.zero_grad(set_to_none=True)
        with torch.autocast(self.device, dtype=torch.bfloat16, enabled=self.amp):
            loss = self.forward(**self.batch).loss
        loss.backward()
        self.opt.step()
        if self.mon is not None:
            self.mon.step(loss, batch=self.batch)


def sync(device: str) -> None:
    if device == "cuda":
        import torch

        torch.cuda.synchronize()


def chunk(r: Runner, steps: int, warmup: int, keep_installed: bool) -> float:
    """Seconds per timed step of one chunk."""
    r.install()
    try:
        for _ in range(warmup):
            r.step()
        sync(r.device)
        t0 = time.perf_counter()
        for _ in range(steps):
            r.step()
        sync(r.device)
        return (time.perf_counter() - t0) / steps
    finally:
        if not keep_installed:
            r.remove()


def count_syncs(r: Runner, steps: int) -> float | None:
    """Synchronising CUDA calls per step (None off CUDA, where nothing synchronises)."""
    if r.device != "cuda":
        return None
    import torch

    r.install()
    r.step()
    torch.cuda.synchronize()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        torch.cuda.set_sync_debug_mode("warn")
        try:
            for _ in range(steps):
                r.step()
        finally:
            torch.cuda.set_sync_debug_mode("default")
    return sum(1 for w in caught if "synchroniz" in str(w.message).lower()) / steps


def measure(size: str, args: argparse.Namespace, device: str, workdir: str) -> dict[str, Any]:
    batch, seq = (SMOKE_BATCH, SMOKE_SEQ) if args.smoke else (GPU_BATCH, GPU_SEQ)
    model, opt, data = build(size, device, batch, seq)
    runners = {
        "plain": Runner(model, opt, data, device, watched=False, compiled=False, amp=args.amp, workdir=workdir),
        "watch": Runner(model, opt, data, device, watched=True, compiled=False, amp=args.amp, workdir=workdir),
    }
    if args.compile:
        for name, watched in (("plain+compile", False), ("watch+compile", True)):
            m, o, d = build(size, device, batch, seq)
            runners[name] = Runner(m, o, d, device, watched=watched, compiled=True, amp=args.amp, workdir=workdir)
    times: dict[str, list[float]] = {v: [] for v in runners}
    for name, r in runners.items():  # compile, allocate and warm every variant once, untimed
        chunk(r, 1, 2, keep_installed="compile" in name)
    names = list(runners)
    for rnd in range(args.rounds):
        order = names[rnd % len(names) :] + names[: rnd % len(names)]
        for name in order:
            times[name].append(chunk(runners[name], args.steps, args.warmup, keep_installed="compile" in name))
        print(
            f"  {size} round {rnd + 1}/{args.rounds}: " + ", ".join(f"{v} {times[v][-1] * 1e3:.1f} ms" for v in names),
            flush=True,
        )
    baseline = {"plain": "plain", "watch": "plain", "plain+compile": "plain+compile", "watch+compile": "plain+compile"}
    out: dict[str, Any] = {
        "params": sum(p.numel() for p in model.parameters()),
        "tokens_per_step": batch * seq,
        "variants": {},
    }
    for name, r in runners.items():
        base = times[baseline[name]]
        ratios = [t / b for t, b in zip(times[name], base)]
        out["variants"][name] = {
            "median_ms": statistics.median(times[name]) * 1e3,
            "ratio": statistics.median(ratios),
            "ratio_min": min(ratios),
            "ratio_max": max(ratios),
            "syncs_per_step": count_syncs(r, args.sync_steps),
        }
        r.remove()
    return out


def render(results: dict[str, Any], args: argparse.Namespace, device_name: str) -> str:
    lines = ["## Overhead on a GPU", "", docs.provenance(docs.command_line()) + f" Device: {device_name}.", ""]
    for size, res in results.items():
        precision = "bf16 autocast" if args.amp and not args.smoke else "fp32"
        lines += [
            f"### GPT-2 {res['params'] / 1e6:.1f}M params ({size}, {res['tokens_per_step']} tokens a step, "
            f"{precision})",
            "",
            "| variant | median step | ratio (against) | range | host syncs / step |",
            "|---|---|---|---|---|",
        ]
        for name, v in res["variants"].items():
            against = "compiled plain" if "compile" in name else "eager plain"
            syncs = "n/a" if v["syncs_per_step"] is None else f"{v['syncs_per_step']:.1f}"
            lines.append(
                f"| {name} | {v['median_ms']:.1f} ms | {v['ratio']:.3f}x ({against}) | "
                f"{v['ratio_min']:.3f}–{v['ratio_max']:.3f} | {syncs} |"
            )
        lines.append("")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", default="124m,350m", help="comma-separated: 124m, 350m")
    ap.add_argument("--rounds", type=int, default=8)
    ap.add_argument("--steps", type=int, default=10, help="timed steps per chunk")
    ap.add_argument("--warmup", type=int, default=3, help="untimed steps per chunk")
    ap.add_argument("--sync-steps", type=int, default=5, help="steps counted for host syncs")
    ap.add_argument("--no-compile", dest="compile", action="store_false", help="eager variants only")
    ap.add_argument("--fp32", dest="amp", action="store_false", help="no bf16 autocast")
    ap.add_argument("--smoke", action="store_true", help="tiny model on the CPU: checks the script, no figures")
    ap.add_argument("--no-docs", dest="write_docs", action="store_false")
    ap.add_argument("--json", type=Path, help="also write the results here")
    args = ap.parse_args(argv)

    import torch

    if args.smoke:
        device, sizes, args.write_docs = "cpu", ["tiny"], False
        torch.set_num_threads(1)
    elif not torch.cuda.is_available():
        print("benchmarks/gpu.py: no CUDA device here: skipped (use --smoke to check the script on the CPU)")
        return 0
    else:
        device, sizes = "cuda", [s.strip() for s in args.sizes.split(",") if s.strip()]
        unknown = [s for s in sizes if s not in SIZES or s == "tiny"]
        if unknown:
            ap.error(f"unknown size(s) {', '.join(unknown)}: choose from 124m, 350m")
    device_name = torch.cuda.get_device_name(0) if device == "cuda" else "CPU (smoke test)"
    with tempfile.TemporaryDirectory() as workdir:
        results = {s: measure(s, args, device, workdir) for s in sizes}
    text = render(results, args, device_name)
    print(text)
    if args.json:
        args.json.write_text(json.dumps(results, indent=1))
    if args.write_docs:
        print(f"wrote {docs.write_section('overhead-gpu', text)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
