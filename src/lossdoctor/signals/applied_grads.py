"""The gradient the optimizer applies, against the one backward made: clipping at a tiny max_norm.

`clip_grad_norm_(params, max_norm)` between `backward` and `optimizer.step()` is a function call
the monitor cannot see. What it does is visible, though: the gradient norm at the optimizer's step
(its pre-hook) is min(1, max_norm / norm) times the norm at the end of backward (`grad_norm`). On
sampled steps only (steps 0-4 and every `layer_every`-th), the pre-hook takes the total L2 norm
of the gradients as they are then (`_foreach_norm`, one pass over the gradients, into the step's
one copy): `grad_norm_applied`. A threshold set far below the gradient norm (1e-3 for a norm of
~1) clips every step and divides every update by the same large factor; the step is then
max_norm x LR whatever the gradient.
"""

from __future__ import annotations

from typing import Any

import torch

from .grouped_norms import plan_for
from .optimizer import unwrap_optimizer
from .safe_reads import foreach_norm_any
from .sharding import local

_PLAIN = {torch.Tensor}


class AppliedGradProbe:
    """See the module docstring; follows `signals.probe.Probe`."""

    name = "AppliedGradProbe"

    def __init__(self, optimizer: Any) -> None:
        self.opt = unwrap_optimizer(optimizer)
        self.enabled = True
        self.sampled = False
        self.error: BaseException | None = None
        self._norm: torch.Tensor | None = None
        self._plan: Any = None  # the grouped norm plan of the optimizer's parameters; False: none
        self._handles = [self.opt.register_step_pre_hook(self._pre)]

    def _pre(self, opt: Any, args: Any, kwargs: Any) -> None:
        if not (self.enabled and self.sampled) or self._norm is not None:
            return
        try:
            fast = self._grouped()
            if fast is not None:
                self._norm = fast
                return
            grads = [
                local(p.grad).detach()
                for g in self.opt.param_groups
                for p in g["params"]
                if p.grad is not None and not p.grad.is_sparse
            ]
            by_dev: dict[Any, list[torch.Tensor]] = {}
            for t in grads:
                by_dev.setdefault((t.device, t.dtype), []).append(t)
            if not by_dev:
                return
            with torch.no_grad():
                parts = [torch.stack(foreach_norm_any(ts)) for ts in by_dev.values()]  # fp32: fp16 norms overflow
                dev = parts[0].device
                self._norm = torch.linalg.vector_norm(torch.cat([p.to(dev) for p in parts]))
        except Exception as e:  # never break the user's optimizer step
            self.enabled, self.error = False, e

    def _grouped(self) -> torch.Tensor | None:
        """The total norm from the stacked per-shape norms (`grouped_norms`) when every parameter
        has a plain dense CPU gradient: no per-parameter Python on a model of many tensors."""
        if self._plan is False:
            return None
        params = [p for g in self.opt.param_groups for p in g["params"]]
        grads = [p.grad for p in params]
        # one C-level pass of `type` (None, a DTensor: per tensor); the stacks check the rest (see
        # `GradProbe._grouped`)
        if not grads or set(map(type, grads)) != _PLAIN or grads[0].device.type != "cpu":
            return None
        try:
            if self._plan is None or self._plan.n != len(grads):
                self._plan = plan_for(params) or False
            if not self._plan:
                return None
            with torch.no_grad():
                return torch.linalg.vector_norm(self._plan.norms(grads))
        except (RuntimeError, ValueError, TypeError):  # a parameter replaced since: per tensor from now on
            self._plan = False
            return None

    def reset(self) -> None:
        self._norm = None

    def flush(self, packer: Any, step: Any = None) -> dict[str, Any] | None:
        norm, self._norm = self._norm, None
        if norm is None or not self.enabled:
            return None
        packer.add("grad_norm_applied", norm)
        return {}

    def interpret(self, values: dict[str, Any], ctx: dict[str, Any] | None, rec: dict[str, Any]) -> None:
        if ctx is not None and "grad_norm_applied" in values:
            rec["grad_norm_applied"] = float(values["grad_norm_applied"][0])

    def remove(self) -> None:
        for h in self._handles:
            h.remove()
        self._handles.clear()
