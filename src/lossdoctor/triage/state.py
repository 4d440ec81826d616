"""Training state: capture it cheaply, restore it exactly, and work on a copy that is not the user's.

A `Snapshot` holds the model's parameters and buffers, the optimizer's state, the GradScaler's
scale and growth tracker, the scheduler's state and every RNG (torch CPU and CUDA, Python's
`random`, NumPy). The tensors are copied with one fused `_foreach_copy_` into buffers allocated
once and reused (pinned host memory for a CUDA model, so the copy does not block the training
loop), which is what keeps a snapshot every K steps within a few percent of the step time.

A `Workspace` is where triage replays steps: by default a scratch copy of the model (hooks of the
monitor stripped), an optimizer and a scaler bound to that copy, so the user's objects are never
touched. For models too large to copy, `inplace=True` uses the user's own objects and puts every
bit back afterwards.
"""

from __future__ import annotations

import copy
import logging
import os
import random
from collections import OrderedDict, defaultdict
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch
from torch import nn

from ..messages import Msg

log = logging.getLogger("lossdoctor")

_HOOK_DICTS = (
    "_forward_hooks",
    "_forward_pre_hooks",
    "_backward_hooks",
    "_backward_pre_hooks",
    "_forward_hooks_with_kwargs",
    "_forward_pre_hooks_with_kwargs",
    "_forward_hooks_always_called",
    "_state_dict_hooks",
    "_state_dict_pre_hooks",
    "_load_state_dict_pre_hooks",
    "_load_state_dict_post_hooks",
)


# --- RNG ---------------------------------------------------------------------------------------


@dataclass
class RngState:
    torch_cpu: torch.Tensor
    cuda: list[torch.Tensor] | None
    python: Any
    numpy: Any

    @classmethod
    def capture(cls) -> RngState:
        cuda = None
        if torch.cuda.is_available() and torch.cuda.is_initialized():
            cuda = torch.cuda.get_rng_state_all()
        return cls(torch.get_rng_state(), cuda, random.getstate(), np.random.get_state())

    def restore(self) -> None:
        torch.set_rng_state(self.torch_cpu)
        if self.cuda is not None:
            torch.cuda.set_rng_state_all(self.cuda)
        random.setstate(self.python)
        np.random.set_state(self.numpy)


@dataclass
class StepRng:
    """The torch generators at the start of one step's forward (dropout draws from them)."""

    cpu: torch.Tensor
    cuda: torch.Tensor | None = None
    cuda_index: int | None = None

    @classmethod
    def capture(cls, device: torch.device | None) -> StepRng:
        if device is not None and device.type == "cuda":
            idx = device.index if device.index is not None else torch.cuda.current_device()
            return cls(torch.get_rng_state(), torch.cuda.get_rng_state(idx), idx)
        return cls(torch.get_rng_state())

    def apply(self) -> None:
        torch.set_rng_state(self.cpu)
        if self.cuda is not None:
            torch.cuda.set_rng_state(self.cuda, "cuda" if self.cuda_index is None else self.cuda_index)


# --- snapshots ---------------------------------------------------------------------------------


def _flatten(obj: Any, out: list[torch.Tensor]) -> Any:
    """Replace every tensor in a nested structure by its position in `out`."""
    if isinstance(obj, torch.Tensor):
        out.append(obj)
        return _Slot(len(out) - 1)
    if isinstance(obj, dict):
        return {k: _flatten(v, out) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return type(obj)(_flatten(v, out) for v in obj)
    return copy.deepcopy(obj)


def _unflatten(obj: Any, tensors: list[torch.Tensor]) -> Any:
    if isinstance(obj, _Slot):
        return tensors[obj.i]
    if isinstance(obj, dict):
        return {k: _unflatten(v, tensors) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return type(obj)(_unflatten(v, tensors) for v in obj)
    return obj


@dataclass(frozen=True)
class _Slot:
    i: int


@dataclass
class Snapshot:
    """The training state before step `step` (taken at the end of step `step - 1`)."""

    step: int
    names: list[str]  # model parameter and buffer names, in `tensors` order
    n_model: int  # tensors[:n_model] are the model's, the rest the optimizer's
    tensors: list[torch.Tensor]  # host (or pinned) copies
    opt_struct: Any  # optimizer.state_dict() with tensors replaced by slots
    scaler: dict[str, torch.Tensor] | None
    scheduler: Any
    rng: RngState
    event: Any = None  # CUDA event of the asynchronous copy
    path: str | None = None  # on disk instead of in memory
    _nbytes: int | None = field(default=None, repr=False, compare=False)

    def ready(self) -> None:
        if self.event is not None:
            self.event.synchronize()
            self.event = None

    def nbytes(self) -> int:
        """Host bytes held. Fixed once taken, and the ring reads it at every step: summed once."""
        if self._nbytes is None:
            self._nbytes = sum(t.numel() * t.element_size() for t in self.tensors)
        return self._nbytes

    def model_state(self) -> dict[str, torch.Tensor]:
        self.ready()
        return dict(zip(self.names, self.tensors[: self.n_model]))

    def optimizer_state(self) -> dict[str, Any]:
        """A fresh copy: `Optimizer.load_state_dict` keeps tensors that are already on the right
        device and dtype as they are (and steps them in place later), so the snapshot's own buffers
        must never be handed to it."""
        self.ready()
        return _unflatten(self.opt_struct, [t.clone() for t in self.tensors[self.n_model :]])


def model_tensors(model: nn.Module) -> tuple[list[str], list[torch.Tensor]]:
    names, ts = [], []
    for n, p in model.named_parameters():
        names.append(n)
        ts.append(p.detach())
    for n, b in model.named_buffers():
        names.append(n)
        ts.append(b.detach())
    return names, ts


def state_nbytes(model: nn.Module, optimizer: Any) -> int:
    """Bytes a snapshot of this model and optimizer takes (optimizer state as it is now)."""
    _, ts = model_tensors(model)
    n = sum(t.numel() * t.element_size() for t in ts)
    for st in optimizer.state.values():
        for v in st.values():
            if isinstance(v, torch.Tensor):
                n += v.numel() * v.element_size()
    return n


class SnapshotTaker:
    """Takes snapshots into reusable host buffers (one set per ring slot)."""

    def __init__(self, model: nn.Module, optimizer: Any, scaler: Any, scheduler: Any) -> None:
        self.model = model
        self.optimizer = optimizer
        self.scaler = scaler
        self.scheduler = scheduler

    def take(self, step: int, reuse: Snapshot | None = None) -> Snapshot:
        names, src = model_tensors(self.model)
        n_model = len(src)
        opt_tensors: list[torch.Tensor] = []
        opt_struct = _flatten(self.optimizer.state_dict(), opt_tensors)
        src = src + [t.detach() for t in opt_tensors]
        dst = _buffers_like(src, reuse.tensors if reuse is not None else None)
        event = None
        with torch.no_grad():
            _copy_all(dst, src)
        if any(t.device.type == "cuda" for t in src):
            event = torch.cuda.Event()
            event.record()
        scaler = scaler_state(self.scaler)
        sched = None
        if self.scheduler is not None:
            try:
                sched = copy.deepcopy(self.scheduler.state_dict())
            except Exception:  # a scheduler holding something un-copyable: not needed for replay
                sched = None
        return Snapshot(
            step=step,
            names=names,
            n_model=n_model,
            tensors=dst,
            opt_struct=opt_struct,
            scaler=scaler,
            scheduler=sched,
            rng=RngState.capture(),
            event=event,
        )


def _buffers_like(src: list[torch.Tensor], old: list[torch.Tensor] | None) -> list[torch.Tensor]:
    if (
        old is not None
        and len(old) == len(src)
        and all(o.shape == s.shape and o.dtype == s.dtype for o, s in zip(old, src))
    ):
        return old
    out = []
    for s in src:
        pin = s.device.type == "cuda"
        out.append(torch.empty(s.shape, dtype=s.dtype, pin_memory=pin))
    return out


def _copy_all(dst: list[torch.Tensor], src: list[torch.Tensor]) -> None:
    """One fused copy per (device, dtype) group; non-blocking into pinned memory."""
    if not dst:
        return
    try:
        torch._foreach_copy_(dst, src, non_blocking=True)
    except (RuntimeError, TypeError, AttributeError):
        for d, s in zip(dst, src):
            d.copy_(s, non_blocking=True)


class SnapshotLoadError(RuntimeError):
    """A snapshot file that is not the one the ring wrote (replaced, truncated, planted)."""


def save_snapshot(snap: Snapshot, path: str) -> Snapshot:
    """Move a snapshot's tensors to disk. The file holds the step and a list of tensors only, so
    that it loads with `torch.load(weights_only=True)`, which runs no code from the file; the
    structure (names, optimizer layout, scaler, scheduler, RNG: small) stays in memory."""
    snap.ready()
    try:
        os.unlink(path)  # an older file of this name, or a planted link: removed, never followed
    except FileNotFoundError:
        pass
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0)
    with os.fdopen(os.open(path, flags, 0o600), "wb") as f:
        torch.save({"step": snap.step, "tensors": snap.tensors}, f)
    return Snapshot(
        step=snap.step,
        names=snap.names,
        n_model=snap.n_model,
        tensors=[],
        opt_struct=snap.opt_struct,
        scaler=snap.scaler,
        scheduler=snap.scheduler,
        rng=snap.rng,
        path=path,
        _nbytes=0,
    )


def load_snapshot(snap: Snapshot) -> Snapshot:
    """The snapshot with its tensors read back from disk. `weights_only=True`: a file planted in
    the run directory is refused, never executed; so is one whose contents do not match."""
    if snap.path is None:
        return snap
    try:
        d = torch.load(snap.path, map_location="cpu", weights_only=True)
    except Exception as e:
        raise SnapshotLoadError(
            Msg(
                "triage.snapshot.unloadable",
                path=str(snap.path),
                error=f"{type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}",
            )
        ) from None
    n_opt = len(_slots(snap.opt_struct))
    tensors = d.get("tensors") if isinstance(d, dict) else None
    if not (
        isinstance(tensors, list)
        and all(isinstance(t, torch.Tensor) for t in tensors)
        and len(tensors) == snap.n_model + n_opt
        and d.get("step") == snap.step
    ):
        raise SnapshotLoadError(Msg("triage.snapshot.foreign", path=str(snap.path), step=snap.step))
    return Snapshot(
        step=snap.step,
        names=snap.names,
        n_model=snap.n_model,
        tensors=tensors,
        opt_struct=snap.opt_struct,
        scaler=snap.scaler,
        scheduler=snap.scheduler,
        rng=snap.rng,
    )


def _slots(obj: Any) -> list[_Slot]:
    """The tensor slots of a flattened structure (how many optimizer tensors a snapshot holds)."""
    if isinstance(obj, _Slot):
        return [obj]
    if isinstance(obj, dict):
        return [s for v in obj.values() for s in _slots(v)]
    if isinstance(obj, (list, tuple)):
        return [s for v in obj for s in _slots(v)]
    return []


# --- restoring and copying -------------------------------------------------------------------


def load_model_state(model: nn.Module, state: dict[str, torch.Tensor]) -> None:
    """Copy values into the model's own tensors (same objects; bit-exact)."""
    names, ts = model_tensors(model)
    with torch.no_grad():
        for n, t in zip(names, ts):
            src = state.get(n)
            if src is not None:
                t.copy_(src)


def clone_optimizer(opt: torch.optim.Optimizer, param_map: dict[int, torch.Tensor]) -> torch.optim.Optimizer:
    """An optimizer of the same class and settings over other parameters, with no hooks and no
    state (load one with `load_state_dict`). Instance attributes are kept, except what binds the
    copy to the original: hooks, and a `step` wrapped by an LR scheduler (it would step the
    user's optimizer)."""
    new = object.__new__(type(opt))
    new.__dict__.update(opt.__dict__)
    for k, v in list(new.__dict__.items()):
        if "hooks" in k and isinstance(v, dict):
            new.__dict__[k] = OrderedDict()
    new.__dict__.pop("step", None)
    new.__dict__.pop("zero_grad", None)
    missing = [p for g in opt.param_groups for p in g["params"] if id(p) not in param_map]
    if missing:
        raise ValueError(
            f"the optimizer holds {len(missing)} tensor(s) that are not parameters of the watched "
            "model: triage cannot replay its steps"
        )
    new.param_groups = [{**g, "params": [param_map[id(p)] for p in g["params"]]} for g in opt.param_groups]
    new.state = defaultdict(dict)
    new.defaults = dict(opt.defaults)
    return new


def scaler_state(scaler: Any) -> dict[str, torch.Tensor] | None:
    """A GradScaler's running state (scale and growth tracker) as device copies, no host sync;
    None before the scaler initialised itself lazily."""
    if scaler is None or getattr(scaler, "_scale", None) is None:
        return None
    state = {"_scale": scaler._scale.detach().clone()}
    gt = getattr(scaler, "_growth_tracker", None)
    if isinstance(gt, torch.Tensor):
        state["_growth_tracker"] = gt.detach().clone()
    return state


def restore_scaler(scaler: Any, state: dict[str, torch.Tensor] | None) -> None:
    """Put a `scaler_state` back; an empty one means "not initialised yet": lazily again."""
    if scaler is None:
        return
    if state:
        for k, v in state.items():
            setattr(scaler, k, v.detach().clone())
    elif hasattr(scaler, "_scale"):
        scaler._scale = None
        scaler._growth_tracker = None


def clone_scaler(scaler: Any, state: dict[str, torch.Tensor] | None) -> Any:
    """A GradScaler with the same settings and the snapshot's scale (no host sync)."""
    if scaler is None:
        return None
    new = object.__new__(type(scaler))
    new.__dict__.update(scaler.__dict__)
    try:
        from torch.amp.grad_scaler import _refresh_per_optimizer_state
    except ImportError:  # older torch
        from torch.cuda.amp.grad_scaler import _refresh_per_optimizer_state  # type: ignore[no-redef, attr-defined]  # (torch < 2.3 only)
    new._per_optimizer_states = defaultdict(_refresh_per_optimizer_state)
    restore_scaler(new, state or scaler_state(scaler))
    return new


def strip_hooks(model: nn.Module, hook_ids: set[int]) -> None:
    """Remove the monitor's hooks (by handle id) from a deep copy of the user's model."""
    if not hook_ids:
        return
    for m in model.modules():
        for attr in _HOOK_DICTS:
            d = getattr(m, attr, None)
            if isinstance(d, dict):
                for i in list(d):
                    if i in hook_ids:
                        del d[i]


@dataclass
class Workspace:
    """Model, optimizer and scaler that triage may run and step."""

    model: nn.Module
    optimizer: torch.optim.Optimizer
    scaler: Any
    _restore: list[Any] = field(default_factory=list)

    def load(self, snap: Snapshot) -> None:
        snap = load_snapshot(snap)
        load_model_state(self.model, snap.model_state())
        self.optimizer.load_state_dict(snap.optimizer_state())
        restore_scaler(self.scaler, snap.scaler)
        self.zero_grad()

    def zero_grad(self) -> None:
        for p in self.model.parameters():
            p.grad = None

    def params(self) -> Iterator[torch.Tensor]:
        return (p for p in self.model.parameters() if p.requires_grad)


def scratch_workspace(
    model: nn.Module, optimizer: torch.optim.Optimizer, scaler: Any, hook_ids: set[int], keep: tuple[Any, ...] = ()
) -> Workspace:
    """A deep copy of the model (without the monitor's hooks), with its own optimizer and scaler.

    `keep` are objects the copy must not duplicate (the monitor's parts, reachable through the
    bound methods its hooks are): deepcopy's memo maps them to themselves, and their hooks are then
    removed from the copy by handle id."""
    grads = [(p, p.grad) for p in model.parameters()]
    for p, _ in grads:  # grads are not part of a copy's state (and may be large)
        p.grad = None
    memo: dict[int, Any] = {id(o): o for o in keep}
    memo[id(optimizer)] = optimizer
    try:
        scratch = copy.deepcopy(model, memo)
    finally:
        for p, g in grads:
            p.grad = g
    strip_hooks(scratch, hook_ids)
    pmap: dict[int, torch.Tensor] = {}
    for (_, p), (_, q) in zip(
        model.named_parameters(remove_duplicate=False), scratch.named_parameters(remove_duplicate=False)
    ):
        pmap[id(p)] = q
    opt = clone_optimizer(optimizer, pmap)
    return Workspace(scratch, opt, clone_scaler(scaler, None))


class InplaceGuard:
    """Uses the user's model for triage and restores it bit for bit: parameter and buffer values
    and the gradients (the same tensor objects). The optimizer and scaler used for the replay are
    clones, so the user's optimizer state and loss scale are never touched."""

    def __init__(self, model: nn.Module, optimizer: torch.optim.Optimizer, scaler: Any) -> None:
        self.model, self.optimizer, self.scaler = model, optimizer, scaler

    def __enter__(self) -> Workspace:
        _, ts = model_tensors(self.model)
        self._values = [t.detach().to("cpu", copy=True) for t in ts]  # host: the model is too big to copy
        self._grads = [(p, p.grad) for p in self.model.parameters()]
        for p, _ in self._grads:
            p.grad = None
        pmap: dict[int, torch.Tensor] = {id(p): p for p in self.model.parameters()}
        opt = clone_optimizer(self.optimizer, pmap)
        return Workspace(self.model, opt, clone_scaler(self.scaler, None))

    def __exit__(self, *exc: Any) -> None:
        _, ts = model_tensors(self.model)
        with torch.no_grad():
            for t, v in zip(ts, self._values):
                t.copy_(v)
        for p, g in self._grads:
            p.grad = g
