"""`lossdoctor.watch`: one entry point for a model and its optimizer, or a DeepSpeed engine.

A DeepSpeed engine brings its own optimizer, loss scaling and micro-steps, so it is watched through
`integrations.deepspeed` (which sits above the monitor); anything else goes to `monitor.watch`. The
package facade's `watch` and the framework callbacks call this one, so `watch(engine)` and
`watch(model, optimizer)` work wherever a model is watched.
"""

from __future__ import annotations

import os
from typing import Any, Callable

from ..monitor import Monitor
from ..monitor import watch as watch_model
from .deepspeed import is_deepspeed_engine, watch_engine


def watch(model: Any, optimizer: Any = None, scaler: Any = None, scheduler: Any = None,
          log_dir: str | os.PathLike[str] | None = None, task: str | None = None,
          replay_fn: Callable[[Any, Any], Any] | None = None, **options: Any) -> Monitor:
    """Start watching a training run. See `Monitor` for the options. `model` may be a DeepSpeed
    engine (`watch(engine)`): see `lossdoctor.integrations.deepspeed`."""
    if is_deepspeed_engine(model):
        return watch_engine(model, optimizer, scaler=scaler, scheduler=scheduler, log_dir=log_dir, task=task,
                            replay_fn=replay_fn, **options)
    return watch_model(model, optimizer, scaler=scaler, scheduler=scheduler, log_dir=log_dir, task=task,
                       replay_fn=replay_fn, **options)
