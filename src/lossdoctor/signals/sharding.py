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
