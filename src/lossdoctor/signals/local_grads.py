"""This rank's own gradient, before the data-parallel reduction: the local evidence of where a NaN began.

DeepSpeed ZeRO and FSDP1 take a gradient off the parameter as soon as autograd has produced it
(into a reduction bucket, or a reduce-scatter into this rank's shard), so by the end of backward
the gradient left on this rank is the reduced one, or none. A tensor hook on each parameter that
autograd accumulates into (under FSDP1 its flat parameters) sees the gradient first: it takes its
squared L2 norm there (one small kernel, kept on the device; no host sync), summed over the
micro-batches of the step. The monitor's one copy per step brings them to the host, where they give

- `grad_norm_local`: the norm of this rank's gradient (one micro-batch per step; with several their
  norms do not add up to the norm of the accumulated gradient, so none is recorded);
- `grad_nonfinite`, `nonfinite_params`: how many parameters' local gradients held NaN/Inf, and which.

Nothing here is a collective: a run directory's ranks are compared offline.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Callable
from typing import Any

import torch

from ..messages import Msg
from .safe_reads import norm_fp32

log = logging.getLogger("lossdoctor")


class LocalGradProbe:
    """A probe (`lossdoctor.signals.probe`) over `(name, tensor)` autograd leaves. `scale_fn` gives
    the loss scale the gradients carry (host float, None for none)."""

    name = "LocalGradProbe"

    def __init__(
        self,
        named: list[tuple[str, torch.Tensor]],
        scale_fn: Callable[[], float | None] | None = None,
        tag: str = "local",
    ) -> None:
        self.enabled = True
        self.tag = tag
        self.names = [n for n, _ in named]
        self._sq: list[torch.Tensor | None] = [None] * len(named)
        self._scale_fn = scale_fn
        self._in_backward = False
        self._backwards = 0
        self._scale: float | None = None
        self._handles = [t.register_hook(self._hook(i)) for i, (_, t) in enumerate(named)]

    def _hook(self, i: int):
        def hook(grad: torch.Tensor) -> None:
            if not self.enabled:
                return
            try:  # runs inside the user's backward: nothing may escape
                if not self._in_backward:
                    self._in_backward = True
                    self._backwards += 1
                    self._scale = self._scale_fn() if self._scale_fn is not None else None
                    torch.autograd.Variable._execution_engine.queue_callback(self._backward_done)
                n = norm_fp32(grad.detach()).square()
                prev = self._sq[i]
                self._sq[i] = n if prev is None else prev + n
            except Exception as e:
                self._fail(e)

        return hook

    def _backward_done(self) -> None:
        self._in_backward = False

    def flush(self, packer: Any, step: Any = None) -> dict[str, Any] | None:
        if not self.enabled:  # switched off (its own hook failed, or the monitor's step did)
            self._sq = [None] * len(self._sq)
            self._backwards = 0
            return None
        idx = [i for i, t in enumerate(self._sq) if t is not None]
        ctx: dict[str, Any] = {"idx": idx or None, "backwards": self._backwards, "scale": self._scale}
        if idx:
            packer.add(f"{self.tag}_grad_sq", [self._sq[i] for i in idx])
        self._sq = [None] * len(self._sq)
        self._backwards = 0
        return ctx

    def interpret(self, values: dict[str, Any], ctx: dict[str, Any] | None, rec: dict[str, Any]) -> None:
        key = f"{self.tag}_grad_sq"
        if ctx is None or ctx["idx"] is None or key not in values:
            return
        sq = values[key].astype("float64")
        bad = ~(sq < math.inf)  # NaN and inf
        rec["grad_nonfinite"] = int(bad.sum())
        if bad.any():
            rec["nonfinite_params"] = [self.names[ctx["idx"][j]] for j in range(len(sq)) if bad[j]][:8]
        else:  # any the monitor named were the reduced gradient's, not this rank's
            rec.pop("nonfinite_params", None)
        if ctx["backwards"] == 1:
            total = float(sq.sum())
            rec["grad_norm_local"] = math.sqrt(total) / (ctx["scale"] or 1.0) if total == total else math.nan

    def _fail(self, e: BaseException) -> None:
        self.enabled = False
        log.warning("%s", Msg("distributed.local_grads_disabled", error=f"{type(e).__name__}: {e}"))

    def remove(self) -> None:
        self.enabled = False
        for h in self._handles:
            h.remove()
        self._handles.clear()
