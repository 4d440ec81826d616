"""Run directories of many ranks: which ranks to read in full.

Under data parallelism every rank trains the same weights; what differs between ranks is local:
each rank's batches, its loss, its own gradient before the reduction. So a run of 512 ranks has
one training story told 512 times, and at most a few ranks where something began. Reading and
diagnosing every rank costs minutes (512 x 10,000 JSON records) and says the same thing 512 times.

Above `FULL_READ` ranks the directory is screened first: every rank's `steps.jsonl` is searched as
bytes for the markers of a local non-finite value (a "nan"/"inf" value, a non-zero non-finite
count, a first-non-finite event), and only the lines that hold one are parsed, to find the rank's
local onset (the same rule as `detectors.ranks.local_onset`). That is a memory scan, not a parse:
about a millisecond per rank. Then the ranks where non-finite values began first are read in
full, with the first and last rank as the run's representatives; the others' onsets go into the
run's metadata so the report can say where each rank stood without repeating their findings.
"""

from __future__ import annotations

import math
import re
from pathlib import Path
from typing import Any

import orjson

from ..records import to_float
from .files import read_bytes
from .registry import SourceError

#: at most this many ranks: every one is read in full (nothing to gain from a screen)
FULL_READ = 16
#: ranks read in full among those where non-finite values began at the earliest step
MAX_ORIGINS = 8

# the run log writes NaN/Inf as the strings "nan"/"inf"/"-inf" (a bare NaN literal is no JSON: the
# reader drops such a line, and so does the screen)
_LITERALS = (b'"nan"', b'inf"', b"first_nonfinite", b"nonfinite_detail")
_COUNT = re.compile(rb'nonfinite":\s*[1-9]')
_EVENTS = ("batch_nonfinite_detail", "fwd_first_nonfinite", "bwd_first_nonfinite")


def local_grads(meta: dict[str, Any]) -> bool:
    """Same rule as `detectors.ranks`: gradient flags measured before the ranks' reduction."""
    d = meta.get("distributed") if isinstance(meta, dict) else None
    return isinstance(d, dict) and (d.get("kind") == "ddp" or d.get("local_grads") is True)


def locally_bad(rec: dict[str, Any], grads_are_local: bool) -> bool:
    """One step record: did a value measured on this rank alone go non-finite?"""
    if "loss" in rec and rec["loss"] is not None and not math.isfinite(to_float(rec["loss"])):
        return True
    if to_float(rec.get("batch_nonfinite")) > 0:
        return True
    if any(rec.get(k) for k in _EVENTS):
        return True
    if grads_are_local:
        if "grad_norm_local" in rec:
            v = rec["grad_norm_local"]
            return v is not None and not math.isfinite(to_float(v))
        return to_float(rec.get("grad_nonfinite")) > 0
    return False


def screen_onset(data: bytes, grads_are_local: bool) -> int | None:
    """The first step of a `steps.jsonl` (as bytes) whose local signals went non-finite, parsing
    only the lines that carry a non-finite marker."""
    nxt = {m: data.find(m) for m in _LITERALS}
    count_pos = _search(data, 0)
    start = 0
    while True:
        for m, p in nxt.items():
            if 0 <= p < start:
                nxt[m] = p = data.find(m, start)
        if 0 <= count_pos < start:
            count_pos = _search(data, start)
        hits = [p for p in (*nxt.values(), count_pos) if p >= 0]
        if not hits:
            return None
        pos = min(hits)
        a = data.rfind(b"\n", 0, pos) + 1
        b = data.find(b"\n", pos)
        b = len(data) if b < 0 else b
        try:
            rec = orjson.loads(data[a:b])
        except orjson.JSONDecodeError:
            rec = None
        if isinstance(rec, dict) and locally_bad(rec, grads_are_local):
            step = to_float(rec.get("step"))
            if math.isfinite(step):
                return int(step)
        start = b + 1


def _search(data: bytes, start: int) -> int:
    m = _COUNT.search(data, start)
    return m.start() if m else -1


def screen(dirs: list[Path]) -> list[tuple[Path, int | None, dict[str, Any]]]:
    """(directory, local onset, meta) of every rank directory."""
    out = []
    for d in dirs:
        meta: dict[str, Any] = {}
        try:
            meta = orjson.loads(read_bytes(d / "meta.json"))
        except (OSError, SourceError, orjson.JSONDecodeError):
            pass
        meta = meta if isinstance(meta, dict) else {}
        try:
            onset = screen_onset(read_bytes(d / "steps.jsonl"), local_grads(meta))
        except (OSError, SourceError):
            onset = None
        out.append((d, onset, meta))
    return out


def choose(screened: list[tuple[Path, int | None, dict[str, Any]]]) -> tuple[list[Path], dict[str, Any]]:
    """The rank directories to read in full, and what the screen found about every rank (for the
    run's metadata: `{"ranks": [every rank], "onsets": {rank: step}, "read": [ranks]}`)."""
    rank_of = {d: _rank(d, meta, i) for i, (d, _, meta) in enumerate(screened)}
    onsets = {rank_of[d]: o for d, o, _ in screened if o is not None}
    chosen = [screened[0][0], screened[-1][0]]
    if onsets:
        first = min(onsets.values())
        chosen += [d for d, o, _ in screened if o == first][:MAX_ORIGINS]
    chosen = sorted(set(chosen), key=lambda d: rank_of[d])
    info = {"ranks": sorted(rank_of.values()), "onsets": onsets, "read": [rank_of[d] for d in chosen]}
    return chosen, info


def _rank(d: Path, meta: dict[str, Any], i: int) -> int:
    r = meta.get("rank")
    if isinstance(r, int) and not isinstance(r, bool):
        return r
    tail = d.name.split("-", 1)[-1]
    return int(tail) if tail.isdigit() else i
