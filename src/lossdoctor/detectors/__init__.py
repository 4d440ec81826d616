"""Detectors: pure reasoning over step records -> findings.

Each module holds the detectors of one family and registers them on import; `load_all` imports
them all. Add a detector by adding a module to `FAMILIES`.
"""

from __future__ import annotations

import importlib

from .base import REGISTRY, Detector, detector

FAMILIES = (
    "nonfinite",
    "gradients",
    "precision",
    "learning_rate",
    "label_mask",
    "loss_shape",
    "bad_init",
    "accumulation",
    "scalars",
    "preference",
    "loop_bugs",
    "loop_wiring",
)

_loaded = False


def load_all() -> None:
    global _loaded
    if _loaded:
        return
    for name in FAMILIES:
        importlib.import_module(f"{__name__}.{name}")
    _loaded = True


__all__ = ["REGISTRY", "Detector", "detector", "load_all"]
