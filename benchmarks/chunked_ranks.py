"""What the multi-rank overhead benchmarks share (tp_overhead, pp_overhead, deepspeed_overhead):
starting the ranks and collecting rank 0's timings, and the summary they print.

Each benchmark's `_worker(rank, world, port, out, opts)` times interleaved chunks of plain and
watched steps and writes `{"plain": [...], "watched": [...], "params": N}` to `out/result.json`
on rank 0. The ratio is the median over rounds of watched / plain (paired: both chunks of a round
saw the same load).
"""

from __future__ import annotations

import json
import os
import socket
import statistics
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def run_ranks(worker: Callable[..., None], world: int, opts: dict[str, Any], prefix: str) -> dict[str, Any]:
    """`worker` on `world` ranks (in this process for one), and rank 0's result."""
    import torch.multiprocessing as mp

    port = free_port()
    with tempfile.TemporaryDirectory(prefix=prefix) as tmp:
        if world == 1:
            worker(0, 1, port, tmp, opts)
        else:
            mp.spawn(worker, args=(world, port, tmp, opts), nprocs=world, join=True)
        return json.loads(Path(tmp, "result.json").read_text())


def load_average() -> str:
    return " / ".join(f"{x:.2f}" for x in os.getloadavg())


class Ratios:
    """The per-round ratios and per-step times of a result, and the three lines printed."""

    def __init__(self, res: dict[str, Any], steps: int) -> None:
        self.res, self.steps = res, steps
        self.ratios = [w / p for p, w in zip(res["plain"], res["watched"])]
        self.median = statistics.median(self.ratios)

    def ms(self, variant: str) -> float:
        return 1000 * statistics.median(self.res[variant]) / self.steps

    def lines(self, head: str) -> list[str]:
        return [
            head,
            f"plain: {self.ms('plain'):.1f} ms/step, watched: {self.ms('watched'):.1f} ms/step",
            f"ratio (median of {len(self.ratios)} rounds): {self.median:.3f}x "
            f"(per-round {min(self.ratios):.3f}-{max(self.ratios):.3f})",
        ]
