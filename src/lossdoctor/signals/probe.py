"""One interface for everything the monitor measures at a step: the built-in probes (module
tracer, gradient norms, optimizer, batch) and the add-on probes integrations bring (micro-batch
losses, the data-parallel reduction) are the same kind of object, and the monitor loops over one
list of them, as Cockpit's `track` loops over quantities that share `should_compute / compute /
output`.

A step is measured in two halves, because the numbers live on the device and are read back once:

- `flush(packer, step)`, inside `mon.step`: hand this step's device tensors to the `Packer` (they
  reach the host in the step's one copy) and return a small host-side context for `interpret`.
  A probe that has nothing to say this step (switched off) returns None;
- `interpret(values, ctx, rec)`, when the copy has arrived (at once on CPU, a step or two later on
  CUDA): read the host arrays in `values` and add fields to the step record `rec`; per-module rows
  (the sampled-step `layers.f32` matrix) go into `rec.layers`.

A probe that measures *during* the step (in forward/backward/optimizer hooks) and does more work
on sampled steps has a `sampled` attribute the monitor sets before the step starts. `remove()`
takes its hooks off. A probe that raises is switched off alone (a note says so); training goes on.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Protocol

import numpy as np

from .readout import Packer


@dataclass(frozen=True)
class StepInputs:
    """What one `mon.step` call knows when it flushes the probes."""

    step: int
    time: float  # seconds since `watch`
    sampled: bool  # per-layer detail is taken at this step
    batch: Any = None  # the batch passed to `mon.step` (None when not passed)


class StepRecord(dict):
    """One step record being built (the JSON line of steps.jsonl), plus `layers`: the per-module
    arrays of this step (stat name -> one value per traced module), written to layers.f32 at sampled
    steps and at incident steps. A plain dict to every probe that only adds fields."""

    __slots__ = ("layers",)

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.layers: dict[str, np.ndarray] = {}


class Probe(Protocol):
    """See the module docstring. `name` is how notes and warnings call it."""

    name: str
    enabled: bool

    def flush(self, packer: Packer, step: StepInputs) -> Any: ...

    def interpret(self, values: dict[str, np.ndarray], ctx: Any, rec: StepRecord) -> None: ...

    def remove(self) -> None: ...


def probe_name(probe: Any) -> str:
    return getattr(probe, "name", None) or type(probe).__name__
