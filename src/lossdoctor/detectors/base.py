"""The detector interface: a pure function from a `Run` (and its shared quantities) to findings.

Detectors register themselves with `@detector(...)`, declaring which signals they need. The engine
skips a detector whose signals the run lacks and reports that as a note ("log X to enable"), so a
foreign log with only a loss column still gets every check that a loss column allows.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from ..findings import Finding
from ..messages import fmt, round_sig  # noqa: F401  (re-exported: detectors format numbers with them)
from ..records import Run
from .quantities import Quantities

DetectorFn = Callable[[Run, Quantities], list[Finding]]


@dataclass(frozen=True)
class Detector:
    name: str
    fn: DetectorFn
    #: every one of these signals must be logged (a column or an event name)
    needs: tuple[str, ...] = ()
    #: at least one of these must be logged (empty: no such requirement)
    needs_any: tuple[str, ...] = ()
    #: what to log to enable the check, said when it is skipped
    hint: str = ""

    def can_run(self, run: Run) -> bool:
        if not all(_has(run, s) for s in self.needs):
            return False
        return not self.needs_any or any(_has(run, s) for s in self.needs_any)


def _has(run: Run, signal: str) -> bool:
    """A column/event name, or "layers" for the per-layer statistics only `watch` records."""
    if signal == "layers":
        return run.layers is not None and len(run.layers.steps) > 0
    return run.has(signal)


REGISTRY: list[Detector] = []


def detector(
    name: str, *, needs: tuple[str, ...] = (), needs_any: tuple[str, ...] = (), hint: str = ""
) -> Callable[[DetectorFn], DetectorFn]:
    def register(fn: DetectorFn) -> DetectorFn:
        REGISTRY.append(Detector(name=name, fn=fn, needs=needs, needs_any=needs_any, hint=hint))
        return fn

    return register


def finest_print(values: Any) -> float:
    """The finest last-digit step among the nonzero `values` (`print_resolution`): one printer's
    resolution, judged by the digits it shows anywhere (0.5 beside 0.321375 is an exact 0.5); inf
    when none is nonzero."""
    return min((print_resolution(float(v)) for v in values if v != 0), default=math.inf)


def print_resolution(v: float) -> float:
    """The step of the last printed digit of v (0.1 for 10.9, 1e-4 for 2.3457, 1e-6 for 1e-06): how
    far apart two prints of a value can be told, whatever moved in between."""
    s = f"{v:.10g}"
    if "e" in s:
        mant, exp = s.split("e")
        dec = len(mant.split(".")[1]) if "." in mant else 0
        return 10.0 ** (int(exp) - dec)
    return 10.0 ** -(len(s.split(".")[1]) if "." in s else 0)
