"""Gradients never zeroed, seen directly: the gradient a step's backward adds to is not zero.

A loop that forgets `optimizer.zero_grad()` sums every step's gradient into `.grad`: the update is
the running sum of all past gradients (Karpathy's and Tobin's bug lists, the forums' most common
thread). The loss curve shows
only a symptom (it swings, or it diverges like an LR that keeps growing); the cause is visible in
one place: when the first backward of a step reaches a parameter, that parameter's `.grad` still
holds the previous step's gradient.

How it is measured, cheaply: a tensor hook on a few parameters (the smallest trainable ones, so
reading them costs nothing) fires when the backward has computed their gradient and before it is
accumulated into `.grad`. On the first firing after each optimizer step (the first micro-batch
of the next step: gradient accumulation adds to its own micro-batches on purpose, and is not
looked at) the hook takes `.grad` as it is then: None (zeroed with `set_to_none=True`, the
default: known on the host, no device work) or a tensor, whose `abs().amax()` is handed to the
step's one copy (no host sync). The record's `grad_stale` is 1 when some hooked parameter held a
non-zero gradient there, 0 when every one was None or zero; absent when no backward reached them.

Loops that zero at other places are fine: the HF Trainer zeroes after the step, Lightning between
the forward and the backward; either way `.grad` is empty when the backward reaches it.
"""

from __future__ import annotations

from typing import Any

import torch

from .optimizer import unwrap_optimizer
from .safe_reads import uninitialized

#: how many parameters are hooked (the smallest trainable ones)
HOOKED = 3


class StaleGradProbe:
    """See the module docstring; follows `signals.probe.Probe`."""

    name = "StaleGradProbe"

    def __init__(self, optimizer: Any, k: int = HOOKED) -> None:
        self.opt = unwrap_optimizer(optimizer)
        self.enabled = True
        self.error: BaseException | None = None
        groups = getattr(self.opt, "param_groups", None) or []
        params = [
            p
            for g in groups
            for p in g.get("params", [])
            if isinstance(p, torch.Tensor) and p.requires_grad and not uninitialized(p)
        ]  # lazy: no size yet
        seen: set[int] = set()
        picked = []
        for p in sorted(params, key=lambda t: t.numel()):
            if id(p) not in seen:
                seen.add(id(p))
                picked.append(p)
            if len(picked) >= k:
                break
        self._armed = [True] * len(picked)
        self._host: list[bool] = []  # observations known on the host (grad None)
        self._dev: list[torch.Tensor] = []  # abs().amax() of a gradient that was there
        self._handles: list[Any] = []
        try:
            for i, p in enumerate(picked):
                self._handles.append(p.register_hook(self._hook(i, p)))
            self._handles.append(self.opt.register_step_post_hook(self._rearm))
        except Exception as e:  # a parameter or optimizer that takes no hooks: this check is off
            self.remove()
            self.enabled, self.error = False, e

    def _hook(self, i: int, p: torch.Tensor):
        def hook(grad: torch.Tensor) -> None:
            if not (self.enabled and self._armed[i]):
                return
            self._armed[i] = False
            try:
                g = p.grad
                if g is None:
                    self._host.append(False)
                else:
                    self._dev.append(g.detach().abs().amax().float())
            except Exception as e:  # never break the user's backward
                self.enabled, self.error = False, e

        return hook

    def _rearm(self, *args: Any) -> None:
        self._armed = [True] * len(self._armed)

    def reset(self) -> None:
        """Forget what was seen (after a replay on the user's model) and wait for the next step."""
        self._host, self._dev = [], []
        self._rearm()

    def flush(self, packer: Any, step: Any = None) -> dict[str, Any] | None:
        if not self.enabled:
            return None
        host, dev = self._host, self._dev
        self._host, self._dev = [], []
        if dev:
            packer.add("stale_grad_absmax", torch.stack(dev).amax() if len(dev) > 1 else dev[0])
        return {"seen": bool(host or dev), "dev": bool(dev)}

    def interpret(self, values: dict[str, Any], ctx: dict[str, Any] | None, rec: dict[str, Any]) -> None:
        if not ctx or not ctx["seen"]:
            return
        stale = False
        if ctx["dev"] and "stale_grad_absmax" in values:
            v = float(values["stale_grad_absmax"][0])
            stale = v > 0 or v != v  # a NaN left in .grad is not zero either
        rec["grad_stale"] = 1 if stale else 0

    def remove(self) -> None:
        for h in self._handles:
            h.remove()
        self._handles.clear()
