"""What `watch` costs on a torch.compile'd model (inductor, CPU), next to the same in eager mode.

    python benchmarks/compile_overhead.py              # compiled, 12 rounds
    python benchmarks/compile_overhead.py --eager      # the same loop without torch.compile

Two identical GPT-2 models built from a config (2 layers, n_embd 128, vocab 4096; batches of
4x64 tokens), one trained plain and one under `watch`, both compiled the same way; after 6
warm-up steps each (compilation included), rounds of 10 steps alternate between them (the order
flips every round). Per step: process CPU time (one torch thread: less sensitive than wall time to
other jobs on a shared machine) and wall time. Reported: median step of each, and the median and
range of the per-round ratios watch/plain.

On a compiled model the monitor's module hooks are traced away (see docs/integrations.md), so the
cost left is `mon.step` itself (one packed copy, the gradient norms, the optimizer probe, the
batch checks, the step record and the live engine's schedule).
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

if __package__ in (None, ""):  # run as a script: make `benchmarks` importable
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
import benchmarks  # noqa: E402,F401  (puts this checkout's src/ first)


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=12)
    ap.add_argument("--eager", action="store_true", help="do not compile (the reference)")
    args = ap.parse_args(argv)

    import torch

    import lossdoctor
    from lossdoctor.demo.scenarios import gpt2

    torch.set_num_threads(1)
    compile_fn = (lambda m: m) if args.eager else torch.compile

    def make():
        torch.manual_seed(0)
        m = gpt2(n_layer=2, n_embd=128, vocab=4096)
        return m, torch.optim.AdamW(m.parameters(), lr=1e-4)

    g = torch.Generator().manual_seed(0)
    batches = [torch.randint(0, 4096, (4, 64), generator=g) for _ in range(8)]
    plain_model, plain_opt = make()
    plain = compile_fn(plain_model)
    watched_model, watched_opt = make()
    mon = lossdoctor.watch(watched_model, watched_opt, log_dir=tempfile.mkdtemp(), alerts=False)
    watched = compile_fn(watched_model)

    def step(model, opt, ids, monitor=None):
        opt.zero_grad(set_to_none=True)
        loss = model(input_ids=ids, labels=ids).loss
        loss.backward()
        opt.step()
        if monitor is not None:
            monitor.step(loss, batch={"input_ids": ids, "labels": ids})

    t = time.perf_counter()
    for i in range(6):
        step(plain, plain_opt, batches[i % 8])
        step(watched, watched_opt, batches[i % 8], mon)
    print(f"warm-up (compilation included): {time.perf_counter() - t:.1f} s")
    cpu = {"plain": [], "watch": []}
    wall = {"plain": [], "watch": []}
    ratios = []
    for r in range(args.rounds):
        med = {}
        for name in ("plain", "watch") if r % 2 == 0 else ("watch", "plain"):
            ts = []
            for i in range(10):
                ids = batches[(r * 10 + i) % 8]
                c0, w0 = time.process_time(), time.perf_counter()
                if name == "plain":
                    step(plain, plain_opt, ids)
                else:
                    step(watched, watched_opt, ids, mon)
                ts.append(time.process_time() - c0)
                wall[name].append(time.perf_counter() - w0)
            med[name] = statistics.median(ts)
            cpu[name].append(med[name])
        ratios.append(med["watch"] / med["plain"])
    mon.close()
    mode = "eager" if args.eager else "compiled (inductor)"
    print(
        f"{mode}: CPU time plain {statistics.median(cpu['plain']) * 1e3:.1f} ms/step, watch "
        f"{statistics.median(cpu['watch']) * 1e3:.1f} ms/step; ratio median {statistics.median(ratios):.3f} "
        f"(rounds {min(ratios):.3f}-{max(ratios):.3f}, {args.rounds} rounds); wall plain "
        f"{statistics.median(wall['plain']) * 1e3:.1f} ms, watch {statistics.median(wall['watch']) * 1e3:.1f} ms"
    )


if __name__ == "__main__":
    main()
