"""One device-to-host copy per step.

Every probe leaves its statistics as small tensors on the device where they were computed. At the
end of a step the `Packer` concatenates them into one flat float32 tensor per device and the
`Readout` copies it to the host once: synchronously on CPU (there is nothing to wait for), and on
CUDA asynchronously into pinned memory, read back at a later step once its event has completed, so
the monitor never adds a host synchronisation to the training loop.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch


@dataclass
class Packer:
    """Collects a step's statistics; `name` -> one or more device segments plus, for lists of
    mixed dtypes, the positions each segment fills (re-assembled on the host, not the device)."""

    parts: dict[torch.device, list[torch.Tensor]] = field(default_factory=dict)
    layout: dict[str, list[tuple[torch.device, int, int, np.ndarray | None]]] = field(default_factory=dict)
    _offsets: dict[torch.device, int] = field(default_factory=dict)

    def add(self, name: str, t: torch.Tensor | list[torch.Tensor] | None) -> None:
        """Add a tensor (any shape, flattened) or a list of 0-d tensors under `name`."""
        if t is None:
            return
        if isinstance(t, torch.Tensor):
            self._segment(name, t.detach().reshape(-1), None)
            return
        if not t:
            return
        stacked = _stack_one_device(t)
        if stacked is not None:
            # the common case: one stack of the 0-d statistics, no per-element work in Python; a
            # copy even of one (the tracer's statistics are views of slots it reuses at the next step)
            self._segment(name, stacked, None)
            return
        groups: dict[tuple[torch.dtype, torch.device], list[int]] = {}
        for i, x in enumerate(t):
            groups.setdefault((x.dtype, x.device), []).append(i)
        for idx in groups.values():
            seg = torch.stack([t[i].detach().reshape(()) for i in idx])
            self._segment(name, seg, None if len(groups) == 1 else np.asarray(idx))

    def _segment(self, name: str, t: torch.Tensor, positions: np.ndarray | None) -> None:
        if t.dtype != torch.float32:
            t = t.float()
        dev = t.device
        start = self._offsets.get(dev, 0)
        self.parts.setdefault(dev, []).append(t)
        self._offsets[dev] = start + t.numel()
        self.layout.setdefault(name, []).append((dev, start, start + t.numel(), positions))

    def pack(self) -> dict[torch.device, torch.Tensor]:
        return {dev: torch.cat(ts) if len(ts) > 1 else ts[0] for dev, ts in self.parts.items()}


def _stack_one_device(t: list[torch.Tensor]) -> torch.Tensor | None:
    """The 0-d tensors of `t` as one real tensor when they share a device, else None. The stack
    itself checks the devices (and raises on a mix) in C++: a Python check of each element's dtype
    and device cost ~1 us an element, 10 ms a step for the tracer's ~5,000 statistics on a model of
    1,000 traced modules (benchmarks/many_params.py). Mixed floating dtypes are promoted by the
    stack, which is exact (fp16/bf16 into fp32, fp32 into fp64) and then sent as float32 like any
    segment; a complex result would lose its imaginary part there: the per-dtype path is used."""
    try:
        s = torch.stack(t).detach()
    except (RuntimeError, TypeError):
        return None
    return None if s.is_complex() else s


def _assemble(
    arrays: dict[torch.device, np.ndarray], segments: list[tuple[torch.device, int, int, np.ndarray | None]]
) -> np.ndarray:
    if len(segments) == 1 and segments[0][3] is None:
        dev, a, b, _ = segments[0]
        return arrays[dev][a:b]
    n = sum(b - a for _, a, b, _ in segments)
    out = np.empty(n, dtype=np.float32)
    pos = 0
    for dev, a, b, positions in segments:
        if positions is None:
            out[pos : pos + b - a] = arrays[dev][a:b]
            pos += b - a
        else:
            out[positions] = arrays[dev][a:b]
    return out


@dataclass
class _Pending:
    host: dict[torch.device, torch.Tensor]
    event: Any
    layout: dict[str, list[tuple[torch.device, int, int, np.ndarray | None]]]
    context: Any


class Readout:
    """Queue of packed step statistics on their way to the host."""

    def __init__(self) -> None:
        self._pending: list[_Pending] = []

    def submit(self, packer: Packer, context: Any) -> None:
        packed = packer.pack()
        host: dict[torch.device, torch.Tensor] = {}
        event = None
        for dev, t in packed.items():
            if dev.type == "cuda":
                buf = torch.empty(t.shape, dtype=t.dtype, pin_memory=True)
                buf.copy_(t, non_blocking=True)
                host[dev] = buf
                event = torch.cuda.Event()
                event.record(torch.cuda.current_stream(dev))
            else:
                host[dev] = t.to("cpu") if dev.type != "cpu" else t
        self._pending.append(_Pending(host, event, dict(packer.layout), context))

    def ready(self, wait: bool = False) -> list[tuple[dict[str, np.ndarray], Any]]:
        """Results whose copy has completed, in submission order (all of them when `wait`)."""
        out = []
        while self._pending:
            p = self._pending[0]
            if p.event is not None and not wait and not p.event.query():
                break
            if p.event is not None:
                p.event.synchronize()
            self._pending.pop(0)
            arrays = {dev: t.numpy() for dev, t in p.host.items()}
            values = {name: _assemble(arrays, segs) for name, segs in p.layout.items()}
            out.append((values, p.context))
        return out
