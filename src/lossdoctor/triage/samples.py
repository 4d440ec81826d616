"""Which samples of a batch break the step.

Non-finite incidents: bisection. A predicate says whether a sub-batch still makes the loss or a
gradient non-finite; the batch is halved, each bad half halved again, down to single samples
(k bad samples of n cost about 2k·log2(n) probes). When neither half of a bad set is bad on its
own, the samples only fail together (a batch statistic such as BatchNorm); that set is reported.
A model that cannot run fewer than `min_group` samples (BatchNorm in train mode refuses one) is
probed with sub-batches padded by samples already known to be good, so a single candidate is still
tested, in a batch the model accepts.

Loss spikes: the loss of every sample on its own, and the samples far above the others.

Packed rows (`position_ids` restarting inside a row; TRL's padding-free collator flattens a whole
batch into one row): the bisection runs over the examples inside the rows instead. A probe is the
chosen examples laid end to end in one row, their own `position_ids` kept and the boundaries
(`cu_seq_lens_*`, `seq_idx`) rebuilt, which is the layout the padding-free collator itself makes.
The answer names the rows (`samples`) and the examples in them.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch

from ..messages import Msg
from ..signals.packing import CU_SEQ_KEYS, Example, packed_examples
from .batches import map_tensors, select_samples

MAX_PROBES = 64
MAX_PER_SAMPLE = 256


@dataclass
class SampleSearch:
    samples: list[int] | None
    method: str
    probes: int = 0
    together: bool = False  # the samples fail only as a group
    losses: dict[int, float] = field(default_factory=dict)  # spike: per-sample loss of the top ones
    median: float | None = None  # spike: median per-sample loss
    size: int | None = None  # samples in the batch
    note: str | None = None
    min_group: int = 1  # fewest samples per probe (2: padded with known-good samples)
    examples: list[dict[str, Any]] | None = None  # packed rows: the examples found inside them

    def to_dict(self) -> dict[str, Any]:
        d: dict[str, Any] = {"samples": self.samples, "method": self.method, "probes": self.probes}
        if self.together:
            d["together"] = True
        if self.losses:
            d["losses"] = {str(k): v for k, v in self.losses.items()}
            d["median_loss"] = self.median
        if self.note:
            d["note"] = self.note
        if self.min_group > 1:
            d["min_group"] = self.min_group
        if self.examples is not None:
            d["examples"] = [dict(e) for e in self.examples]
        return d


def padded_note(why: str, k: int) -> Msg:
    return Msg("triage.samples.padded", why=why, k=k)


class _Prober:
    """Probes sub-batches for `bisect`, padding a set smaller than `res.min_group` with samples
    known to be good (`good`, filled as halves test good)."""

    def __init__(
        self,
        batch: Any,
        size: int,
        bad: Callable[[Any], bool],
        why: str,
        select: Callable[[Any, list[int], int], Any],
        res: SampleSearch,
    ) -> None:
        self.batch, self.size, self.bad, self.why, self.select, self.res = batch, size, bad, why, select, res
        self.good: list[int] = []

    def run(self, idx: list[int]) -> bool:
        self.res.probes += 1
        return self.bad(self.select(self.batch, idx, self.size))

    def test(self, idx: list[int]) -> bool | None:
        """None: this set cannot be probed (too few known-good samples to pad it with). A probe of
        one sample that raises makes every later set of one padded to two."""
        res = self.res
        if len(idx) < res.min_group:
            pad = [i for i in self.good if i not in idx][: res.min_group - len(idx)]
            if len(idx) + len(pad) < res.min_group:
                return None
            return self.run(idx + pad)
        try:
            return self.run(idx)
        except Exception as e:
            if len(idx) >= 2:
                raise
            res.min_group, why_now = 2, f"{type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}"
            res.note = padded_note(self.why or why_now, 2)
            return self.test(idx)


def bisect(
    batch: Any,
    size: int,
    bad: Callable[[Any], bool],
    max_probes: int = MAX_PROBES,
    min_group: int = 1,
    why: str = "",
    select: Callable[[Any, list[int], int], Any] = select_samples,
) -> SampleSearch:
    """Smallest sets of samples that are bad on their own (`bad(sub_batch)`), by halving.

    With `min_group` > 1, or as soon as a probe of fewer samples raises, a sub-batch smaller than
    `min_group` is padded with samples from halves that tested good (they add nothing bad); a set
    that cannot be padded yet is reported whole."""
    res = SampleSearch(samples=None, method="bisection", size=size, min_group=max(1, min_group))
    found, together = _halve(_Prober(batch, size, bad, why, select, res), max_probes)
    res.samples = sorted(found)
    res.together = together
    if res.min_group > 1 and res.note is None:
        res.note = padded_note(why, res.min_group)
    if together:
        res.note = Msg(
            "triage.samples.only_together", more=Msg("triage.samples.and", note=res.note) if res.note else ""
        )
    return res


def _halve(prober: _Prober, max_probes: int) -> tuple[list[int], bool]:
    """The halving itself: the samples found bad (a single sample, a set whose halves are fine
    alone, or a set left untested), and whether some were bad only together."""
    res = prober.res
    found: list[int] = []
    together = False
    stack = [list(range(prober.size))]
    while stack:
        idx = stack.pop()
        if len(idx) == 1:
            found.extend(idx)
            continue
        if res.probes + 2 > max_probes:
            found.extend(idx)
            res.note = Msg("triage.samples.stopped", probes=res.probes)
            continue
        mid = len(idx) // 2
        halves = [idx[:mid], idx[mid:]]
        verdicts = [prober.test(h) for h in halves]
        if None in verdicts:  # too few known-good samples to test these alone: report them
            found.extend(idx)
            continue
        for h, v in zip(halves, verdicts):
            if not v:
                prober.good.extend(h)
        bad_halves = [h for h, v in zip(halves, verdicts) if v]
        if not bad_halves:
            found.extend(idx)
            together = True
            continue
        stack.extend(reversed(bad_halves))
    return found, together


def per_sample_outliers(batch: Any, size: int, loss_of: Callable[[Any], float]) -> SampleSearch:
    """Loss of each sample alone; the outliers are the samples far above the others' median. In
    packed rows, the loss of each example alone (`per_example_outliers`)."""
    examples = packed_examples(batch) if hasattr(batch, "get") else None
    units = [e for e in examples if e.length >= 2] if examples else []
    if len(units) > 1:
        return per_example_outliers(batch, units, loss_of)
    return _outliers(size, lambda i: select_samples(batch, [i], size), loss_of)


def per_example_outliers(batch: Any, units: list[Example], loss_of: Callable[[Any], float]) -> SampleSearch:
    """The loss of each example of the packed rows on its own: `samples` are the rows holding the
    outliers, `examples` the outlier examples (or, when none stands out, the highest) with their loss."""
    res = _outliers(len(units), lambda i: select_examples(batch, [units[i]]), loss_of)
    res.method = "per-example loss (packed rows)"
    named = res.samples if res.samples is not None else list(res.losses)[:4]
    res.examples = [{**units[i].to_dict(), "loss": res.losses.get(i, math.nan)} for i in named]
    if res.samples is not None:
        res.samples = sorted({units[i].row for i in res.samples})
    return res


def _outliers(size: int, pick: Callable[[int], Any], loss_of: Callable[[Any], float]) -> SampleSearch:
    res = SampleSearch(samples=None, method="per-sample loss", size=size)
    if size > MAX_PER_SAMPLE:
        res.note = Msg("triage.samples.too_many", size=size, limit=MAX_PER_SAMPLE)
        return res
    losses = []
    for i in range(size):
        res.probes += 1
        try:
            losses.append(loss_of(pick(i)))
        except Exception as e:
            if i > 0:
                raise
            # one sample alone is refused (BatchNorm in train mode): a per-sample loss does not exist
            res.note = Msg(
                "triage.samples.no_single", error=f"{type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}"
            )
            return res
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
        res.note = Msg("triage.samples.none_stands_out")
    return res


def bisect_examples(
    batch: Any, examples: list[Example], bad: Callable[[Any], bool], max_probes: int = MAX_PROBES
) -> SampleSearch:
    """`bisect` over the examples of packed rows (one-token pieces, right padding, left out):
    `samples` are the rows that hold the bad examples, `examples` the examples themselves."""
    units = [e for e in examples if e.length >= 2]
    res = bisect(
        batch,
        len(units),
        bad,
        max_probes=max_probes,
        select=lambda b, idx, _n: select_examples(b, [units[i] for i in idx]),
    )
    res.method = "bisection over packed examples"
    if res.samples is not None:
        found = [units[i] for i in res.samples]
        res.samples = sorted({e.row for e in found})
        res.examples = [e.to_dict() for e in found]
    return res


def examples_named(search: SampleSearch) -> Msg:
    """The sentence naming the examples a bisection over packed rows found."""
    ex = search.examples or []
    return Msg(
        "triage.samples.packed_examples",
        n=len(ex),
        probes=search.probes,
        examples=[
            Msg("triage.samples.row_example", row=e["row"], example=e["example"], start=e["start"], end=e["end"])
            for e in ex[:4]
        ],
    )


def select_examples(batch: Any, chosen: list[Example]) -> Any:
    """The chosen examples of a packed batch end to end in one row: every (rows, tokens, ...)
    tensor is cut and concatenated, `cu_seq_lens_*` and `seq_idx` are rebuilt for the new row."""
    if not chosen or not hasattr(batch, "get"):
        return batch
    pos = batch.get("position_ids")
    if pos is None or pos.dim() != 2:
        return batch
    shape = tuple(pos.shape)
    lengths = torch.tensor([e.length for e in chosen])
    rebuilt: dict[int, Any] = {}
    for key in CU_SEQ_KEYS:
        t = batch.get(key)
        if isinstance(t, torch.Tensor):
            rebuilt[id(t)] = torch.cat([lengths.new_zeros(1), lengths.cumsum(0)]).to(t.dtype).to(t.device)
    seq = batch.get("seq_idx")
    if isinstance(seq, torch.Tensor):
        rebuilt[id(seq)] = (
            torch.repeat_interleave(torch.arange(len(chosen)), lengths)[None].to(seq.dtype).to(seq.device)
        )

    def pick(t: torch.Tensor) -> torch.Tensor:
        if id(t) in rebuilt:
            return rebuilt[id(t)]
        if t.dim() < 2 or tuple(t.shape[:2]) != shape:
            return t
        return torch.cat([t[e.row, e.start : e.end] for e in chosen], dim=0).unsqueeze(0)

    return map_tensors(batch, pick)
