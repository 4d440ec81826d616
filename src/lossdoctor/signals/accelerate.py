"""Accelerate's gradient-sync flag (`watch` needs nothing else of Accelerate; see the docs'
integrations page): with `accelerator.accumulate(...)` the
shared gradient state says which micro-batch's backward completes the step, so the gradient norms
of the others (about to be overwritten by accumulation) are not taken.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any


def sync_gradients_flag(optimizer: Any) -> Callable[[], bool] | None:
    """For an Accelerate-prepared optimizer: a function telling whether the running backward is
    the step's last (`GradientState.sync_gradients`); None for any other optimizer."""
    if type(optimizer).__name__ != "AcceleratedOptimizer":
        return None
    state = getattr(optimizer, "gradient_state", None)
    if state is None or not hasattr(state, "sync_gradients"):
        return None
    return lambda: bool(state.sync_gradients)
