"""Which samples of a batch break the step.

Non-finite incidents: bisection. A predicate says whether a sub-batch still makes the loss or a
gradient non-finite; the batch is halved, each bad half halved again, down to single samples
(k bad samples of n cost about 2k·log2(n) probes). When neither half of a bad set is bad on its
own, the samples only fail together (a batch statistic such as BatchNorm); that set is reported.

Loss spikes: the loss of every sample on its own, and the samples far above the others.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Callable

import numpy as np

from .batches import select_samples

MAX_PROBES = 64
MAX_PER_SAMPLE = 256


@dataclass
class SampleSearch:
    samples: list[int] | None
    method: str
    probes: int = 0
    together: bool = False         # the samples fail only as a group
    losses: dict[int, float] = field(default_factory=dict)  # spike: per-sample loss of the top ones
    median: float | None = None    # spike: median per-sample loss
    size: int | None = None        # samples in the batch
    note: str | None = None

    def to_dict(self) -> dict[str, Any]:
        d: dict[str, Any] = {"samples": self.samples, "method": self.method, "probes": self.probes}
        if self.together:
            d["together"] = True
        if self.losses:
            d["losses"] = {str(k): v for k, v in self.losses.items()}
            d["median_loss"] = self.median
        if self.note:
            d["note"] = self.note
        return d


def bisect(batch: Any, size: int, bad: Callable[[Any], bool], max_probes: int = MAX_PROBES) -> SampleSearch:
    """Smallest sets of samples that are bad on their own (`bad(sub_batch)`), by halving."""
    res = SampleSearch(samples=None, method="bisection", size=size)
    found: list[int] = []
    together = False

    def test(idx: list[int]) -> bool:
        res.probes += 1
        return bad(select_samples(batch, idx, size))

    stack = [list(range(size))]
    while stack:
        idx = stack.pop()
        if len(idx) == 1:
            found.extend(idx)
            continue
        if res.probes + 2 > max_probes:
            found.extend(idx)
            res.note = f"stopped after {res.probes} probes; the remaining candidates are listed"
            continue
        mid = len(idx) // 2
        halves = [idx[:mid], idx[mid:]]
        bad_halves = [h for h in halves if test(h)]
        if not bad_halves:
            found.extend(idx)
            together = True
            continue
        stack.extend(reversed(bad_halves))
    res.samples = sorted(found)
    res.together = together
    if together:
        res.note = ("these samples make the step non-finite only together (no smaller subset does): "
                    "a statistic over the batch (BatchNorm, a loss normalised by the batch) is involved")
    return res


def per_sample_outliers(batch: Any, size: int, loss_of: Callable[[Any], float]) -> SampleSearch:
    """Loss of each sample alone; the outliers are the samples far above the others' median."""
    res = SampleSearch(samples=None, method="per-sample loss", size=size)
    if size > MAX_PER_SAMPLE:
        res.note = f"batch of {size} samples: per-sample losses not computed (limit {MAX_PER_SAMPLE})"
        return res
    losses = []
    for i in range(size):
        res.probes += 1
        losses.append(loss_of(select_samples(batch, [i], size)))
    x = np.asarray(losses, dtype=np.float64)
    fin = np.isfinite(x)
    if not fin.any():
        res.samples = list(range(size))
        return res
    med = float(np.median(x[fin]))
    mad = float(np.median(np.abs(x[fin] - med))) * 1.4826
    thresh = max(med + 6 * mad, 2 * med if med > 0 else med + 1e-6)
    out = [i for i in range(size) if not math.isfinite(x[i]) or x[i] > thresh]
    order = sorted(range(size), key=lambda i: -x[i] if math.isfinite(x[i]) else -math.inf)
    res.samples = sorted(out) if out else None
    res.losses = {i: float(x[i]) for i in order[:8]}
    res.median = med
    if not out:
        res.note = "no sample stands out: the whole batch is harder than usual, or the state is the problem"
    return res
