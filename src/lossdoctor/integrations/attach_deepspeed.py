"""`lossdoctor run` on a DeepSpeed script (`-- deepspeed script.py`): the engine is what is watched.

Under ZeRO the torch optimizer that steps holds flat partitions of the parameters, not the
model's own, so the global hooks of `integrations.attach` cannot find a model from it (and the
loss they would see is the one DeepSpeed scaled). A script trains through the engine instead, so
the engine's own methods say everything, without a guess:

- `DeepSpeedEngine.__init__`: an engine made outside a framework's `train()` (an HF Trainer under
  a `deepspeed` config has its own callback) switches the process to this path: the optimizer
  hooks stop looking for a model;
- `forward(*inputs, **kwargs)`: the batch (as `integrations.attach` takes a model's inputs), and
  the engine that trains: the one whose forward ran last before a backward;
- `backward(loss)`: the loss, as the script computed it (before DeepSpeed divides it by the
  accumulation steps or scales it for fp16); `lossdoctor.watch(engine)` opens before the first
  one, so step 0's gradients are measured as autograd makes them. DeepSpeed's torch-style
  `loss.backward()` is seen by `integrations.attach`'s backward hook, which calls `start` too;
- `step()`: `mon.step(loss, batch)` after each call; `watch(engine)` joins the micro-steps
  between accumulation boundaries into the optimizer step.

While one of these runs, the global hooks record nothing (`Attach.framework`), so the optimizer
step inside `engine.step()` and the scaled loss's backward inside `engine.backward()` are not
taken for the script's. A pipeline engine (`PipelineEngine`, trained by `train_batch()`, which
calls these methods itself on its micro-batches) is not watched this way: a note says so.
"""

from __future__ import annotations

import functools
import weakref
from collections.abc import Callable
from typing import Any

ENGINE_MODULE = "deepspeed.runtime.engine"


def is_pipeline_engine(engine: Any) -> bool:
    return bool(getattr(engine, "pipeline_parallelism", False)) or hasattr(engine, "train_batch")


class EngineHooks:
    """The wrapped `DeepSpeedEngine` methods of one process, on the `Attach` state `state`;
    `note(key, **values)` is attach's one line on stderr (passed in: attach imports this module)."""

    def __init__(self, state: Any, note: Callable[..., None]) -> None:
        self.state = state
        self.note = note
        self.seen = False  # an engine was made outside a framework: the optimizer hooks stand aside
        self.last: Any = None  # weakref to the engine whose forward ran last
        self.engine: Any = None  # the engine watched (strong: it lives as long as the run)
        self.pipeline_noted = False

    def install(self, engine_cls: Any) -> None:
        engine_cls.__init__ = self._around(engine_cls.__init__, after=self._made)
        engine_cls.forward = self._around(engine_cls.forward, before=self._forward)
        engine_cls.backward = self._around(engine_cls.backward, before=self._backward)
        engine_cls.step = self._around(engine_cls.step, after=self._stepped)

    def _around(
        self,
        method: Callable[..., Any],
        before: Callable[..., None] | None = None,
        after: Callable[[Any], None] | None = None,
    ) -> Callable[..., Any]:
        """`method`, with `before(engine, args, kwargs)` and `after(engine)` outside any framework's
        run, and the global hooks idle while it runs."""
        state = self.state

        @functools.wraps(method)
        def wrapped(engine: Any, *args: Any, **kwargs: Any) -> Any:
            outside = not state.framework
            if outside and before is not None:
                self._safely(before, engine, args, kwargs)
            state.framework += 1
            try:
                out = method(engine, *args, **kwargs)
            finally:
                state.framework -= 1
            if outside and after is not None:
                self._safely(after, engine)
            return out

        return wrapped

    def _safely(self, fn: Callable[..., None], *args: Any) -> None:
        try:
            fn(*args)
        except Exception as e:
            self.note("integrations.attach.failed", part="deepspeed", error=f"{type(e).__name__}: {e}")

    # --- the engine's calls ----------------------------------------------------------------
    def _made(self, engine: Any) -> None:
        self.seen = True

    def _forward(self, engine: Any, args: Any, kwargs: Any) -> None:
        import torch

        if not torch.is_grad_enabled() or (self.engine is not None and engine is not self.engine):
            return
        self.last = weakref.ref(engine)
        self.state.batch = (
            args[0] if len(args) == 1 and not kwargs else (dict(kwargs) if not args else (*args, *kwargs.values()))
        )

    def _backward(self, engine: Any, args: Any, kwargs: Any) -> None:
        loss = args[0] if args else kwargs.get("loss")
        self.start(engine)
        if engine is self.engine and getattr(loss, "numel", lambda: 0)() == 1:
            self.state.loss = loss.detach()

    def _stepped(self, engine: Any) -> None:
        if engine is self.engine:
            self.state._record()

    # --- opening the monitor -----------------------------------------------------------------
    def start(self, engine: Any = None) -> None:
        """`watch(engine)` before the first backward of the engine that trains (the one given, or
        the one whose forward ran last); once per process, as `Attach._pre`."""
        state = self.state
        if state.tried:
            return
        engine = engine if engine is not None else (self.last() if self.last is not None else None)
        if engine is None:
            return
        state.tried = True
        state._drop_module_hook()
        if is_pipeline_engine(engine):
            self._note_pipeline()
            return
        if id(engine.optimizer) in state.user_watched:  # the script called lossdoctor.watch(engine)
            return
        self.engine = engine
        self._safely(self._open, engine)

    def _open(self, engine: Any) -> None:
        from .entry import watch

        state = self.state
        state.own_watch = True
        try:
            state.monitor = watch(engine, log_dir=state.log_dir, **state.options)
        finally:
            state.own_watch = False
        scheduler = getattr(engine, "lr_scheduler", None)
        state.monitor.meta["attached"] = {
            "model": type(engine.module).__name__,
            "optimizer": type(engine.optimizer).__name__,
            "scaler": None,
            "scheduler": type(scheduler).__name__ if scheduler is not None else None,
            "engine": type(engine).__name__,
        }
        state.monitor.writer.write_meta(state.monitor.meta)

    def _note_pipeline(self) -> None:
        if not self.pipeline_noted:
            self.pipeline_noted = True
            self.note("integrations.attach.pipeline_engine")
