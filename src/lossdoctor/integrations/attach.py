"""Watching an unmodified training script from inside its process (`lossdoctor run`).

`lossdoctor run -- python train.py` starts the script with `LOSSDOCTOR_ATTACH=1` and this package's
bootstrap directory first on `PYTHONPATH`; its `sitecustomize` calls `install()` before the script
runs. Nothing is imported then: when `torch` has been imported (by the script), torch's global hooks
are added, and the rest follows from what the script does:

- the optimizer: the first one whose `step()` runs (torch's global optimizer step hooks);
- the model: of the modules called with gradients enabled, the one holding most of that
  optimizer's parameters, the first called (the outermost) among equals (a global forward
  pre-hook, removed once the model is known);
- the loss: the scalar tensor the last `backward()` before the step started from;
- the batch: the model's forward inputs of the step (a tensor, or the keyword arguments);
- a `GradScaler` that scales the loss: the loss recorded is the one before `scale()`, the scaler is
  given to `watch`, and a step is recorded after `scaler.update()` (a step it skipped too);
- an LR scheduler: the last one made on that optimizer (its `__init__` is wrapped) goes to `watch`;
- `lossdoctor.watch(model, optimizer)` is opened before the first backward when the process holds
  one optimizer (else at the first optimizer step), and `mon.step(loss, batch)` runs after every
  step of that optimizer (so step 0's forward is not traced).

A DeepSpeed engine (`-- deepspeed script.py`) is watched through its own `forward`, `backward` and
`step` instead (`integrations.attach_deepspeed`): under ZeRO the optimizer that steps holds flat
partitions, not the model's parameters.

A script that calls `lossdoctor.watch` itself keeps its own monitor (its optimizer is not watched
again). An HF `Trainer`'s `train()` (a Lightning `Trainer`'s `fit()`) gets lossdoctor's callback for that
framework added instead (unless the script added one), and
the global hooks record nothing while it runs: one recording per step. At interpreter exit (a
normal end, an exception, Ctrl-C) the monitors are closed; the `lossdoctor run` process then reads
the run directory and prints the diagnosis. Any failure here is a note on stderr and the script
runs on: the hooks only read, so training is bit-identical to the unwatched run.

The environment (set by `lossdoctor run`, or by hand for a launcher it cannot wrap):
`LOSSDOCTOR_ATTACH=1` switches it on, `LOSSDOCTOR_LOG_DIR` is the run directory,
`LOSSDOCTOR_WATCH` a JSON object of `watch` options.
"""

from __future__ import annotations

import atexit
import functools
import importlib.abc
import json
import os
import sys
import warnings
import weakref
from collections.abc import Callable
from typing import Any

from ..messages import render
from .attach_deepspeed import ENGINE_MODULE, EngineHooks

ENV_SWITCH = "LOSSDOCTOR_ATTACH"
ENV_LOG_DIR = "LOSSDOCTOR_LOG_DIR"
ENV_OPTIONS = "LOSSDOCTOR_WATCH"


def note(key: str, **values: Any) -> None:
    """One line on stderr: what the attach machinery could not do (the script runs on)."""
    try:
        print(render(key, values, _lang()), file=sys.stderr, flush=True)
    except Exception:
        pass


def _lang() -> str:
    from ..messages import locale_lang

    return locale_lang()


class _AfterLoader(importlib.abc.Loader):
    """A module's own loader, then a callback on the executed module."""

    def __init__(self, inner: Any, then: Callable[[Any], None]) -> None:
        self.inner, self.then = inner, then

    def create_module(self, spec: Any) -> Any:
        return self.inner.create_module(spec)

    def exec_module(self, module: Any) -> None:
        self.inner.exec_module(module)
        try:
            self.then(module)
        except Exception as e:
            note("integrations.attach.failed", part=module.__name__, error=f"{type(e).__name__}: {e}")

    def __getattr__(self, name: str) -> Any:  # get_source, get_resource_reader... of the real loader
        return getattr(self.inner, name)


class AfterImport(importlib.abc.MetaPathFinder):
    """Calls `hooks[name](module)` once the module `name` has been imported (by anyone)."""

    def __init__(self, hooks: dict[str, Callable[[Any], None]]) -> None:
        self.hooks = dict(hooks)

    def find_spec(self, name: str, path: Any, target: Any = None) -> Any:
        then = self.hooks.pop(name, None)
        if then is None:
            return None
        for finder in sys.meta_path:
            if finder is self or not hasattr(finder, "find_spec"):
                continue
            spec = finder.find_spec(name, path, target)
            if spec is not None:
                if spec.loader is not None and hasattr(spec.loader, "exec_module"):
                    spec.loader = _AfterLoader(spec.loader, then)
                return spec
        return None


class Attach:
    """The hooks' state in one training process."""

    def __init__(self, log_dir: str | None, options: dict[str, Any]) -> None:
        self.log_dir = log_dir
        self.options = options
        self.optimizer: Any = None
        self.monitor: Any = None
        self.callbacks: list[Any] = []  # framework callbacks added (closed at exit if still open)
        self.framework = 0  # > 0 while a framework's callback records the steps
        self.tried = False
        self.early_tried = False
        self.loss: Any = None
        self.batch: Any = None
        self.called: dict[int, tuple[Any, int]] = {}  # id -> (weakref to a module called, order)
        self.handles: list[Any] = []
        self.model_handle: Any = None
        self.scaler: Any = None  # a GradScaler seen scaling a loss: steps are recorded after its update()
        self.scaled: Any = None  # (weakref to the scaled loss, the loss before scaling)
        self.own_watch = False  # True while this module opens its monitor
        self.schedulers: dict[int, Any] = {}  # id(optimizer) -> weakref to its (last made) LR scheduler
        self.user_watched: set[int] = set()  # ids of optimizers the script watches itself
        self.deepspeed = EngineHooks(self, note)  # a DeepSpeed engine's methods (attach_deepspeed.py)

    # --- torch imported ----------------------------------------------------------------------
    def on_torch(self, torch: Any) -> None:
        from torch.nn.modules.module import register_module_forward_pre_hook
        from torch.optim.optimizer import (
            register_optimizer_step_post_hook,
            register_optimizer_step_pre_hook,
        )

        self.handles += [
            register_optimizer_step_pre_hook(self._pre),
            register_optimizer_step_post_hook(self._post),
            register_module_forward_pre_hook(self._called),
        ]
        self._wrap_backward(torch)
        self._wrap_scaler(torch.amp.grad_scaler.GradScaler)
        self._wrap_scheduler(torch.optim.lr_scheduler.LRScheduler)

    def _wrap_scheduler(self, scheduler_cls: Any) -> None:
        """An LR scheduler made on an optimizer: the last one made is given to `watch` with it."""
        init = scheduler_cls.__init__
        seen = self.schedulers

        @functools.wraps(init)
        def watched_init(scheduler: Any, optimizer: Any, *args: Any, **kwargs: Any) -> None:
            init(scheduler, optimizer, *args, **kwargs)
            try:
                seen[id(optimizer)] = weakref.ref(scheduler)
            except Exception:
                pass

        scheduler_cls.__init__ = watched_init

    def _wrap_backward(self, torch: Any) -> None:
        seen = self._seen_loss
        tensor_backward = torch.Tensor.backward

        @functools.wraps(tensor_backward)
        def backward(tensor: Any, *args: Any, **kwargs: Any) -> Any:
            seen(tensor)
            return tensor_backward(tensor, *args, **kwargs)

        torch.Tensor.backward = backward
        autograd_backward = torch.autograd.backward

        @functools.wraps(autograd_backward)
        def autograd(tensors: Any, *args: Any, **kwargs: Any) -> Any:
            seen(tensors)
            return autograd_backward(tensors, *args, **kwargs)

        torch.autograd.backward = autograd

    def _wrap_scaler(self, scaler_cls: Any) -> None:
        """A GradScaler: the loss is the one before `scale()`, the monitor opens at its `step()`
        (which may skip the optimizer's) and a step is recorded after its `update()`, skipped or not."""
        scale, step, update = scaler_cls.scale, scaler_cls.step, scaler_cls.update

        @functools.wraps(scale)
        def watched_scale(scaler: Any, outputs: Any, *args: Any, **kwargs: Any) -> Any:
            out = scale(scaler, outputs, *args, **kwargs)
            self._seen_scale(scaler, outputs, out)
            return out

        @functools.wraps(step)
        def watched_step(scaler: Any, optimizer: Any, *args: Any, **kwargs: Any) -> Any:
            if scaler is self.scaler and not self.tried and not self.framework:
                self._pre(optimizer, args, kwargs)
            return step(scaler, optimizer, *args, **kwargs)

        @functools.wraps(update)
        def watched_update(scaler: Any, *args: Any, **kwargs: Any) -> Any:
            out = update(scaler, *args, **kwargs)
            if scaler is self.scaler and not self.framework:
                self._record()
            return out

        scaler_cls.scale, scaler_cls.step, scaler_cls.update = watched_scale, watched_step, watched_update

    def _seen_scale(self, scaler: Any, outputs: Any, out: Any) -> None:
        try:
            if self.framework or self.optimizer is False or getattr(outputs, "numel", lambda: 0)() != 1:
                return
            if self.scaler is None and self.monitor is None:
                self.scaler = scaler
            if scaler is self.scaler:
                self.scaled = (weakref.ref(out), outputs.detach())
        except Exception:
            pass

    def _seen_loss(self, tensor: Any) -> None:
        try:
            if self.framework or self.optimizer is False:
                return
            if isinstance(tensor, (list, tuple)) and len(tensor) == 1:
                tensor = tensor[0]
            if self.scaled is not None and self.scaled[0]() is tensor:
                self.loss = self.scaled[1]
            elif getattr(tensor, "numel", None) is not None and tensor.numel() == 1:
                self.loss = tensor.detach()
        except Exception:
            pass
        if self.deepspeed.seen and not self.framework:  # DeepSpeed's torch-style `loss.backward()`
            self.deepspeed.start()
            return
        if not self.tried and not self.framework and not self.early_tried:
            self.early_tried = True  # one look: the object scan is not repeated at every backward
            self._start_early()

    def _start_early(self) -> None:
        """Before the first backward: when the process holds one optimizer, and a module called
        holds its parameters, the monitor opens now, so step 0's gradients are measured as they
        are made (else it opens at the first optimizer step)."""
        try:
            import gc

            import torch

            with warnings.catch_warnings():  # isinstance on every live object touches deprecated
                warnings.simplefilter("ignore")  # module attributes (torch.distributed.reduce_op...)
                optimizers = [o for o in gc.get_objects() if isinstance(o, torch.optim.Optimizer)]
            if len(optimizers) != 1 or self.find_model(optimizers[0]) is None:
                return
        except Exception:
            return
        self._pre(optimizers[0], (), {})

    def _called(self, module: Any, inputs: Any) -> None:
        try:
            import torch

            if self.framework or not torch.is_grad_enabled() or id(module) in self.called:
                return
            self.called[id(module)] = (weakref.ref(module), len(self.called))
        except Exception:
            pass

    def _model_inputs(self, module: Any, args: Any, kwargs: Any) -> None:
        try:
            import torch

            if torch.is_grad_enabled() and not self.framework:
                self.batch = (
                    args[0]
                    if len(args) == 1 and not kwargs
                    else (dict(kwargs) if not args else (*args, *kwargs.values()))
                )
        except Exception:
            pass

    # --- an optimizer step -------------------------------------------------------------------
    def _pre(self, optimizer: Any, args: Any, kwargs: Any) -> None:
        if self.framework or self.tried or self.deepspeed.seen:  # a DeepSpeed engine is watched by its methods
            return
        self.tried = True
        try:
            self._start(optimizer)
        except Exception as e:
            note("integrations.attach.failed", part="watch", error=f"{type(e).__name__}: {e}")
            self.optimizer = False
        finally:
            self._drop_module_hook()

    def _post(self, optimizer: Any, args: Any, kwargs: Any) -> None:
        if optimizer is self.optimizer and self.scaler is None and not self.framework:
            self._record()

    def _record(self) -> None:
        if self.monitor is None:
            return
        loss, batch, self.loss, self.batch = self.loss, self.batch, None, None
        try:
            self.monitor.step(loss, batch=batch)
        except Exception as e:
            from ..triage.incident import TrainingIncident

            if isinstance(e, TrainingIncident):  # on_incident="raise": the user asked for it
                raise
            note("integrations.attach.failed", part="step", error=f"{type(e).__name__}: {e}")

    def _start(self, optimizer: Any) -> None:
        from .entry import watch

        model = self.find_model(optimizer)
        if model is None:
            note("integrations.attach.no_model")
            self.optimizer = False
            return
        self.optimizer = optimizer
        self.model_handle = model.register_forward_pre_hook(self._model_inputs, with_kwargs=True)
        if id(optimizer) in self.user_watched:  # the script calls lossdoctor.watch itself: that one records
            self.optimizer = False
            return
        self.own_watch = True
        ref = self.schedulers.get(id(optimizer))
        scheduler = ref() if ref is not None else None
        try:
            self.monitor = watch(
                model, optimizer, scaler=self.scaler, scheduler=scheduler, log_dir=self.log_dir, **self.options
            )
        finally:
            self.own_watch = False
        self.monitor.meta["attached"] = {
            "model": type(model).__name__,
            "optimizer": type(optimizer).__name__,
            "scaler": type(self.scaler).__name__ if self.scaler is not None else None,
            "scheduler": type(scheduler).__name__ if scheduler is not None else None,
        }
        self.monitor.writer.write_meta(self.monitor.meta)

    def find_model(self, optimizer: Any) -> Any:
        """The module called with gradients that holds most of the optimizer's parameters (the
        first called among equals: a wrapper before what it wraps)."""
        params = {id(p) for group in optimizer.param_groups for p in group["params"]}
        best, best_key = None, None
        for ref, order in self.called.values():
            module = ref()
            if module is None:
                continue
            overlap = sum(1 for p in module.parameters() if id(p) in params)
            if overlap and (best_key is None or (overlap, -order) > best_key):
                best, best_key = module, (overlap, -order)
        return best

    def _drop_module_hook(self) -> None:
        self.called.clear()
        if len(self.handles) == 3:
            self.handles.pop().remove()

    def on_monitor(self, module: Any) -> None:
        """The script's own `lossdoctor.watch(model, optimizer)`: its optimizer is not watched again."""
        init = module.Monitor.__init__

        @functools.wraps(init)
        def watched_init(monitor: Any, model: Any, optimizer: Any, *args: Any, **kwargs: Any) -> None:
            if not self.own_watch:
                self.user_watched.add(id(optimizer))
                self.user_watched.add(id(getattr(optimizer, "optimizer", optimizer)))
            init(monitor, model, optimizer, *args, **kwargs)

        module.Monitor.__init__ = watched_init

    # --- frameworks ----------------------------------------------------------------------------
    def on_deepspeed(self, module: Any) -> None:
        self.deepspeed.install(module.DeepSpeedEngine)

    def on_transformers(self, module: Any) -> None:
        self._wrap_entry(module.Trainer, "train", self._add_hf_callback)

    def on_lightning(self, module: Any) -> None:
        self._wrap_entry(module.Trainer, "fit", self._add_lightning_callback)

    def _wrap_entry(self, trainer_cls: Any, name: str, add: Callable[[Any], None]) -> None:
        """`trainer_cls.name` (the call that trains) adds the framework's callback first, and the
        global hooks record nothing while it runs."""
        entry = getattr(trainer_cls, name)

        @functools.wraps(entry)
        def watched(trainer: Any, *args: Any, **kwargs: Any) -> Any:
            if not self.framework:
                add(trainer)
            self.framework += 1
            try:
                return entry(trainer, *args, **kwargs)
            finally:
                self.framework -= 1

        setattr(trainer_cls, name, watched)

    def _add_lightning_callback(self, trainer: Any) -> None:
        try:
            from .lightning import LossDoctorCallback

            if any(isinstance(cb, LossDoctorCallback) for cb in trainer.callbacks):
                return
            cb = LossDoctorCallback(log_dir=self.log_dir, **self.options)
            trainer.callbacks.append(cb)
            self.callbacks.append(cb)
        except Exception as e:
            note("integrations.attach.failed", part="lightning", error=f"{type(e).__name__}: {e}")

    def _add_hf_callback(self, trainer: Any) -> None:
        try:
            from .transformers import LossDoctorCallback

            if any(isinstance(cb, LossDoctorCallback) for cb in trainer.callback_handler.callbacks):
                return  # the script added its own: that one records
            cb = LossDoctorCallback(log_dir=self.log_dir, **self.options)
            trainer.add_callback(cb)
            self.callbacks.append(cb)
        except Exception as e:
            note("integrations.attach.failed", part="transformers", error=f"{type(e).__name__}: {e}")

    # --- exit ----------------------------------------------------------------------------------
    def close(self) -> None:
        for cb in self.callbacks:
            try:
                cb._finish()
            except Exception as e:
                note("integrations.attach.failed", part="close", error=f"{type(e).__name__}: {e}")
        if self.monitor is not None:
            try:
                self.monitor.close()
            except Exception as e:
                note("integrations.attach.failed", part="close", error=f"{type(e).__name__}: {e}")


_STATE: Attach | None = None


def install() -> Attach | None:
    """Called by the bootstrap's `sitecustomize` at interpreter start when `LOSSDOCTOR_ATTACH=1`.
    Imports nothing: the hooks go in when the script imports torch (and transformers)."""
    global _STATE
    if _STATE is not None:
        return _STATE
    try:
        options = json.loads(os.environ.get(ENV_OPTIONS) or "{}")
        if not isinstance(options, dict):
            raise ValueError(f"{ENV_OPTIONS} is not a JSON object")
    except ValueError as e:
        note("integrations.attach.failed", part=ENV_OPTIONS, error=str(e))
        options = {}
    state = Attach(os.environ.get(ENV_LOG_DIR) or None, options)
    sys.meta_path.insert(
        0,
        AfterImport(
            {
                "torch": state.on_torch,
                "transformers.trainer": state.on_transformers,
                "lightning.pytorch.trainer.trainer": state.on_lightning,
                "lossdoctor.live.monitor": state.on_monitor,
                ENGINE_MODULE: state.on_deepspeed,
            }
        ),
    )
    atexit.register(state.close)
    _STATE = state
    return state
