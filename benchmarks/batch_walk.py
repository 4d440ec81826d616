"""What a wide batch container costs `mon.step`: the bounded batch walk against the same walk with
its caps lifted, side by side in one process.

    python benchmarks/batch_walk.py              # 3 rounds, 30 timed steps per variant and batch
    python benchmarks/batch_walk.py --rounds 1 --steps 10

Method: one small MLP (4 -> 8 -> 1, SGD) and one `watch` (with a replay function, so triage's
snapshot ring copies batches) per variant and batch; every step trains, then times `mon.step`
alone. Batches: a 2-tensor dict (the usual case), a 1,000-key dict of tensors, a list of 100,000
ints (the batch checks stop at the first plain value; triage's copy check does not), and a list
of 100,000 one-key dicts. Variants: `capped` (the defaults: `signals.batch.WALK`, `triage.batches.KEEP`) and
`uncapped` (both limits set to 10**9, no list skipped: every element walked, as before issue 27's
fix). Rounds
interleave the variants. Reported: median `mon.step` time in ms and the ratio to the small batch
of the same variant; the capped/uncapped ratio per batch.
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from collections.abc import Callable
from typing import Any

import torch
from torch import nn

import lossdoctor
import lossdoctor.signals.batch as SB
import lossdoctor.triage.batches as TB

BATCHES: dict[str, Callable[[torch.Tensor, torch.Tensor], Any]] = {
    "2-tensor dict": lambda x, y: {"x": x, "y": y},
    "1,000-key dict": lambda x, y: {"x": x, "y": y, **{f"k{i}": torch.tensor([i]) for i in range(1000)}},
    "100,000-int list": lambda x, y: [x, y, *range(100_000)],
    "100,000-dict list": lambda x, y: [x, y, *WIDE],
}
HUGE = 10**9
WIDE = [{"i": i} for i in range(100_000)]  # a list the walk must look into (not plain values)


def _replay(m: nn.Module, b: Any) -> torch.Tensor:
    x, y = (b["x"], b["y"]) if isinstance(b, dict) else (b[0], b[1])
    return (m(x) - y).pow(2).mean()


def time_steps(make: Callable[[torch.Tensor, torch.Tensor], Any], steps: int) -> float:
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(4, 8), nn.Tanh(), nn.Linear(8, 1))
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    times = []
    with tempfile.TemporaryDirectory() as d:
        mon = lossdoctor.watch(model, opt, log_dir=d, replay_fn=_replay, alerts=False)
        for s in range(steps + 5):
            x, y = torch.randn(8, 4), torch.randn(8, 1)
            loss = (model(x) - y).pow(2).mean()
            opt.zero_grad()
            loss.backward()
            opt.step()
            batch = make(x, y)
            t = time.perf_counter()
            mon.step(loss, batch=batch)
            if s >= 5:
                times.append(time.perf_counter() - t)
        mon.close()
    return statistics.median(times) * 1000


def set_caps(capped: bool) -> None:
    if capped:
        SB.WALK, TB.KEEP = DEFAULT_WALK, DEFAULT_KEEP
    else:
        SB.WALK = SB.WalkLimits(max_visits=HUGE, max_tensors=HUGE, max_depth=SB.WALK.max_depth, skip_scalar_lists=False)
        TB.KEEP = SB.WalkLimits(max_visits=HUGE, max_tensors=HUGE, max_depth=TB.KEEP.max_depth, skip_scalar_lists=False)


DEFAULT_WALK, DEFAULT_KEEP = SB.WALK, TB.KEEP


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--steps", type=int, default=30)
    args = ap.parse_args()
    torch.set_num_threads(1)
    res: dict[tuple[str, str], list[float]] = {}
    for r in range(args.rounds):
        order = ["capped", "uncapped"] if r % 2 == 0 else ["uncapped", "capped"]
        for variant in order:
            set_caps(variant == "capped")
            for name, make in BATCHES.items():
                res.setdefault((variant, name), []).append(time_steps(make, args.steps))
    set_caps(True)
    med = {k: statistics.median(v) for k, v in res.items()}
    print(f"mon.step, median ms over {args.rounds} rounds x {args.steps} steps (torch threads 1)")
    print(f"{'batch':<18} {'capped ms':>10} {'x small':>8} {'uncapped ms':>12} {'x small':>8} {'uncapped/capped':>16}")
    for name in BATCHES:
        c, u = med[("capped", name)], med[("uncapped", name)]
        cs, us = med[("capped", "2-tensor dict")], med[("uncapped", "2-tensor dict")]
        print(f"{name:<18} {c:>10.2f} {c / cs:>8.2f} {u:>12.2f} {u / us:>8.2f} {u / c:>16.1f}")


if __name__ == "__main__":
    main()
