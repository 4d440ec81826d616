"""Is the model's output already a probability distribution? (softmax before a softmax-applying loss)

`nn.CrossEntropyLoss` applies log-softmax itself; a model that ends in `nn.Softmax` (or returns
`softmax(logits)`) and is trained with it sees its probabilities squashed a second time: the loss
saturates far above zero (with K classes it cannot go below ln(1 + (K-1)/e), 1.46 for 10 classes
against a chance level of 2.30) and reads as a converged run or noisy labels (Karpathy's and
Tobin's lists; one of the forums' recurring threads).

Measured on the model's own output (the root module's forward hook: the tensor itself, or the
first floating tensor of a tuple / HF ModelOutput, the logits), at the first forward of a sampled
step only: `aminmax` and the largest deviation of a row's sum from 1 along the last dimension,
three numbers into the step's one copy (no host sync). The record gets `out_min`, `out_max`,
`out_rowsum_dev` and `out_classes` (the size of the last dimension).
"""

from __future__ import annotations

from typing import Any

import torch
from torch import nn

from .tracer import compiling, first_float_tensor


class OutputProbe:
    """See the module docstring; follows `signals.probe.Probe`."""

    name = "OutputProbe"

    def __init__(self, model: nn.Module) -> None:
        self.enabled = True
        self.sampled = False
        self.error: BaseException | None = None
        self._stats: torch.Tensor | None = None
        self._classes: int | None = None
        self._handles = [model.register_forward_hook(self._hook)]

    def _hook(self, module: nn.Module, args: Any, out: Any) -> None:
        if compiling() or not (self.enabled and self.sampled) or self._stats is not None \
                or not torch.is_grad_enabled():
            return
        try:
            t = first_float_tensor(out)
            if t is None or t.dim() < 2 or t.shape[-1] < 2:
                return
            with torch.no_grad():
                d = t.detach()
                mn, mx = torch.aminmax(d)
                dev = (d.float().sum(-1) - 1.0).abs().amax()
                self._stats = torch.stack([mn.float(), mx.float(), dev])
            self._classes = int(t.shape[-1])
        except Exception as e:  # never break the user's forward
            self.enabled, self.error = False, e

    def reset(self) -> None:
        self._stats, self._classes = None, None

    def flush(self, packer: Any, step: Any = None) -> dict[str, Any] | None:
        stats, k = self._stats, self._classes
        self.reset()
        if stats is None or not self.enabled:
            return None
        packer.add("out_stats", stats)
        return {"classes": k}

    def interpret(self, values: dict[str, Any], ctx: dict[str, Any] | None, rec: dict[str, Any]) -> None:
        if not ctx or "out_stats" not in values:
            return
        mn, mx, dev = (float(v) for v in values["out_stats"][:3])
        rec["out_min"], rec["out_max"], rec["out_rowsum_dev"] = mn, mx, dev
        rec["out_classes"] = ctx["classes"]

    def remove(self) -> None:
        for h in self._handles:
            h.remove()
        self._handles.clear()
