"""`on_incident="skip"`: keep a non-finite gradient from reaching the weights.

An optimizer step pre-hook cannot cancel the step, and zeroing the gradients is not skipping
(Adam would still apply its momentum and weight decay, and count the step). What every torch
optimizer (and the usual third-party ones) does skip is a parameter whose `.grad` is None: it
gets no update, no state change, no step count. So when a gradient is non-finite, the pre-hook
sets every `.grad` to None for the duration of the step, and the post-hook puts the same
gradient tensors back, so the loop sees its gradients unchanged afterwards. This is what
GradScaler does on overflow, for runs without a GradScaler (with one, the scaler already skips
before this hook would run).

Cost: one fused norm over the gradients and one host read per optimizer step (a device sync on
GPU), which is why the policy is opt-in. An optimizer whose `step(closure)` recomputes the
gradients (LBFGS) is not covered.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

import torch

from ..messages import Msg

log = logging.getLogger("lossdoctor")


class SkipGuard:
    def __init__(
        self, optimizer: torch.optim.Optimizer, on_skip: Callable[[], None], after_skip: Callable[[], None]
    ) -> None:
        self.opt = optimizer
        self.on_skip = on_skip
        self.after_skip = after_skip
        self.enabled = True
        self.skipped = 0
        self._stash: list[tuple[torch.Tensor, torch.Tensor | None]] | None = None
        self._handles = [optimizer.register_step_pre_hook(self._pre), optimizer.register_step_post_hook(self._post)]

    def _pre(self, opt: Any, args: Any, kwargs: Any) -> None:
        if not self.enabled:
            return
        try:
            from .replay import grads_finite

            params = [p for g in opt.param_groups for p in g["params"] if p.grad is not None]
            if not params or grads_finite(params):
                return
            self._stash = [(p, p.grad) for p in params]
            for p in params:
                p.grad = None
            self.skipped += 1
            self.on_skip()
        except Exception as e:  # a failed check must not change the user's step
            if self._stash is not None:
                for p, g in self._stash:
                    p.grad = g
                self._stash = None
            self.enabled = False
            log.warning("%s", Msg("triage.log.skip_disabled", error=f"{type(e).__name__}: {e}"))

    def _post(self, opt: Any, args: Any, kwargs: Any) -> None:
        if self._stash is None:
            return
        for p, g in self._stash:
            p.grad = g
        self._stash = None
        try:
            self.after_skip()
        except Exception:
            pass

    def remove(self) -> None:
        for h in self._handles:
            h.remove()
        self._handles.clear()
