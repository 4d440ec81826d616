"""`lossdoctor.watch`: one entry point for a model and its optimizer, or a DeepSpeed engine.

A DeepSpeed engine brings its own optimizer, loss scaling and micro-steps, so it is watched through
`integrations.deepspeed` (which sits above the monitor); anything else goes to `monitor.watch`. The
package facade's `watch` and the framework callbacks call this one, so `watch(engine)` and
`watch(model, optimizer)` work wherever a model is watched.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Any

from ..live.monitor import Monitor
from ..live.monitor import watch as watch_model
from .deepspeed import is_deepspeed_engine, watch_engine
from .sinks import attach_sinks, check_sink_options


def watch(
    model: Any,
    optimizer: Any = None,
    scaler: Any = None,
    scheduler: Any = None,
    log_dir: str | os.PathLike[str] | None = None,
    task: str | None = None,
    replay_fn: Callable[[Any, Any], Any] | None = None,
    **options: Any,
) -> Monitor:
    """Start watching a training run. See `Monitor` for the options. `model` may be a DeepSpeed
    engine (`watch(engine)`): see `lossdoctor.integrations.deepspeed`.

    Where the findings go besides stderr and the run directory (`lossdoctor.integrations.sinks`):
    `on_finding=fn` is called `fn(finding, step)` for each live alert and each final finding at
    close; the run's TensorBoard (`tensorboard=writer`), active W&B run and active MLflow run get them
    too, unless `sinks=False`."""
    on_finding = options.pop("on_finding", None)
    sinks = options.pop("sinks", True)
    tensorboard = options.pop("tensorboard", None)
    check_sink_options(on_finding, sinks, tensorboard)
    if is_deepspeed_engine(model):
        mon = watch_engine(
            model,
            optimizer,
            scaler=scaler,
            scheduler=scheduler,
            log_dir=log_dir,
            task=task,
            replay_fn=replay_fn,
            **options,
        )
    else:
        mon = watch_model(
            model,
            optimizer,
            scaler=scaler,
            scheduler=scheduler,
            log_dir=log_dir,
            task=task,
            replay_fn=replay_fn,
            **options,
        )
    try:
        attach_sinks(mon, on_finding, sinks, tensorboard)
    except Exception as e:  # never the user's problem: the run is watched without them
        mon.disable("sinks", e)
    return mon
