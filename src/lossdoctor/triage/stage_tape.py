"""A pipeline stage's tape: what replaying that one stage needs and the schedule does not keep.

Under pipeline parallel (`torch.distributed.pipelining`) a stage's module runs once per
micro-batch inside `schedule.step`, on inputs that exist only during that step: the first stage's
are the micro-batches the schedule cut the batch into, a later stage's are the activations the
stage before sent it (received into buffers the stage reuses at the next step). Its backward starts
from the gradient its outputs receive: the one the next stage sends back, or, on the last stage,
the loss's. So that one stage can be replayed alone, with no collective and no other stage, the
tape keeps for each micro-batch of each step:

- detached copies of the stage module's positional and keyword inputs, on their device (a forward
  pre-hook on the stage's module);
- the torch RNG state at the start of that micro-batch's forward (dropout draws the same masks);
- the L2 norm of its outputs (a device scalar, read only when a replay compares against it);
- the gradient each output received in the backward (a hook on each output tensor);

and per step the factor the schedule divided the accumulated gradients by (`scale_grads`).

Nothing is read to the host while training: the copies and the norm are kernels queued on the
stage's stream. The ring (`ring.py`) holds one `StageStep` per recorded step and bounds their bytes
(`tape_limit`): the oldest steps' tapes are dropped first, with a note; a step whose tape alone is
over the bound is not kept. The monitor's hooks are off during the schedule's placeholder passes,
and so is the tape (`enabled`, `reset`); a forward-only pass (`schedule.eval()`, or under
`torch.no_grad()`) is not recorded.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import torch
from torch import nn

from ..signals.gradients import foreach_norm_fp32
from ..signals.tracer import compiling
from . import batches as B
from .state import StepRng


@dataclass(frozen=True)
class TapeLimits:
    #: share of an accelerator's memory the tape may hold (its copies stay on the stage's device,
    #: where a pipeline stage is short of room for activations already): rule of thumb, untuned
    device_share: float = 0.05


LIMITS = TapeLimits()


def tape_limit(device: torch.device | None, host_room: int) -> int:
    """Bytes the tape may hold: on the host, what the ring's budget leaves after the snapshots; on
    an accelerator, `LIMITS.device_share` of its memory, and never more than the ring's budget."""
    if device is None or device.type != "cuda":
        return max(0, int(host_room))
    try:
        total = torch.cuda.get_device_properties(device).total_memory
    except Exception:  # no properties to read: the host bound alone
        return max(0, int(host_room))
    return max(0, int(min(host_room, LIMITS.device_share * total)))


@dataclass
class MicroBatch:
    """One forward (and backward) of the stage's module, as the schedule ran it."""

    args: tuple[Any, ...]
    kwargs: dict[str, Any]
    rng: StepRng | None
    #: the L2 norm of the stage's floating outputs (float32 device scalar), None until the forward ends
    out_norm: torch.Tensor | None = None
    #: the gradient each output tensor received (in output order; None where none came)
    grads: list[torch.Tensor | None] = field(default_factory=list)
    nbytes: int = 0

    @property
    def size(self) -> int | None:
        """How many samples it holds (the first dimension its input tensors share)."""
        return B.batch_size((self.args, self.kwargs))


@dataclass
class StageStep:
    """The micro-batches of one step, in the order the schedule ran their forwards."""

    micro: list[MicroBatch] = field(default_factory=list)
    #: what the schedule divided the accumulated gradients by (`scale_grads`), None when it did not say
    scale: float | None = None
    #: a micro-batch was not recorded in full (over the bound, or a tensor it could not copy)
    incomplete: bool = False

    @property
    def nbytes(self) -> int:
        return sum(m.nbytes for m in self.micro)


def _copy(t: torch.Tensor) -> torch.Tensor:
    return t.detach().clone()


def output_tensors(out: Any) -> list[torch.Tensor]:
    """The tensors of a module's output, in traversal order (the order the gradients are kept in)."""
    return B.tensors(out)


class StageTape:
    """Records the stage module's micro-batches (see the module docstring); `take()` hands the
    step's record to the ring when `mon.step` closes the step."""

    def __init__(
        self,
        module: nn.Module,
        device: torch.device | None,
        paused: Callable[[], bool] = lambda: False,
        trains: Callable[[], bool] = lambda: True,
    ) -> None:
        self.module = module
        self.device = device
        self.enabled = True
        self.paused = paused  # triage is replaying (on the user's model): nothing is recorded
        #: the schedule runs a training step (not `schedule.eval()`, a forward-only pass): only its
        #: micro-batches belong to the step `mon.step` records
        self.trains = trains
        self.limit: int | None = None  # bytes one step may take (set by the ring from its budget)
        self.over = False  # a step was over the bound (the ring says so once)
        self._step = StageStep()
        self._current: MicroBatch | None = None
        self._handles = [
            module.register_forward_pre_hook(self._on_forward, with_kwargs=True),
            module.register_forward_hook(self._on_output),
        ]

    def _active(self) -> bool:
        return self.enabled and not self.paused() and not compiling() and torch.is_grad_enabled() and self.trains()

    def _on_forward(self, module: nn.Module, args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
        self._current = None
        if not self._active() or self._step.incomplete:
            return
        if B.unkeepable((args, kwargs)) is not None:
            self._drop_step()
            return
        size = B.nbytes((args, kwargs))
        if self.limit is not None and self._step.nbytes + 2 * size > self.limit:
            self.over = True  # its inputs and output gradients would not fit: the step is not kept
            self._drop_step()
            return
        mb = MicroBatch(
            args=B.map_tensors(args, _copy),
            kwargs=B.map_tensors(kwargs, _copy),
            rng=StepRng.capture(self.device),
            nbytes=size,
        )
        self._step.micro.append(mb)
        self._current = mb

    def _on_output(self, module: nn.Module, args: Any, out: Any) -> None:
        mb, self._current = self._current, None
        if mb is None or not self._active():
            return
        outs = output_tensors(out)
        mb.grads = [None] * len(outs)
        floats = [t.detach() for t in outs if t.is_floating_point() and t.numel()]
        if floats:
            with torch.no_grad():
                mb.out_norm = torch.stack(foreach_norm_fp32(floats)).norm()
        for i, t in enumerate(outs):
            if t.requires_grad:
                t.register_hook(self._grad_hook(mb, i))

    def _grad_hook(self, mb: MicroBatch, i: int) -> Any:
        def keep(grad: torch.Tensor) -> None:
            if self.enabled and not self.paused() and mb.grads[i] is None:
                mb.grads[i] = _copy(grad)
                mb.nbytes += grad.numel() * grad.element_size()

        return keep

    def scaled(self, factor: Any) -> None:
        """The schedule divided the step's accumulated gradients by `factor` (`scale_grads`)."""
        if self._active() and isinstance(factor, (int, float)) and not isinstance(factor, bool):
            self._step.scale = float(factor)

    def _drop_step(self) -> None:
        self._step = StageStep(incomplete=True)
        self._current = None

    def take(self) -> StageStep | None:
        """The step's record (None when nothing complete was recorded), and a fresh one begun."""
        step, self._step, self._current = self._step, StageStep(), None
        return step if step.micro and not step.incomplete else None

    def reset(self) -> None:
        """Forget what the current step recorded (the schedule's placeholder pass ran)."""
        self._step, self._current = StageStep(), None

    def remove(self) -> None:
        for h in self._handles:
            h.remove()
        self._handles.clear()
