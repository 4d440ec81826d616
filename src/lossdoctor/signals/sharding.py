"""Sharded tensors: measure the part this rank holds.

Under FSDP2 parameters and gradients are DTensors. An operation that mixes a DTensor with a plain
tensor fails, and one on DTensors alone may issue a collective; the monitor's statistics are
per-rank quantities combined explicitly (see `lossdoctor.signals.distributed`), so every
probe measures a DTensor's local shard.
"""

from __future__ import annotations

from typing import Any


def local(t: Any) -> Any:
    """A DTensor's local shard; any other tensor unchanged."""
    to_local = getattr(t, "to_local", None)
    return to_local() if to_local is not None else t


def local_list(ts: list[Any]) -> list[Any]:
    return [local(t) for t in ts]


def holds_data(t: Any) -> bool:
    """Whether a tensor's storage holds its elements. FSDP1 (`FullyShardedDataParallel` with flat
    parameters) leaves each module's `weight` as a view of the flat parameter whose storage it
    frees between forwards: the view keeps its shape, and reading it reads freed memory (a
    segfault, not an exception). Anything that cannot be checked counts as holding its data."""
    try:
        t = local(t)
        if t.numel() == 0:
            return True
        extent = sum((n - 1) * s for n, s in zip(t.shape, t.stride()) if n > 0) + 1
        return t.untyped_storage().nbytes() >= (t.storage_offset() + extent) * t.element_size()
    except Exception:
        return True
