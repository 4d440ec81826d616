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

Labels equal to the inputs, not shifted: a causal LM trained to predict the token at its own
position (cross-entropy of `logits` against `input_ids` with no shift) learns to copy its input.
When the forward received `input_ids` (B, T) and its output is (B, T, V), the same pass also
gives the share of positions whose argmax is the input token itself: `out_copy_frac` (a model
predicting the next token copies only where a token repeats).

Train/eval mode: a model with dropout or BatchNorm whose training forward runs in eval mode
(`model.eval()` for a validation pass, and no `model.train()` after it) trains without dropout and
normalises with running statistics. The root module's `training` flag at the step's first
forward with gradients on is a host attribute: `train_mode` (1/0) at every step, recorded only for
models that have such modules. BatchNorm layers put in eval on purpose (frozen statistics) leave
the root in train mode and read 1. For models with BatchNorm, `bn_train` counts the BatchNorm
layers in train mode at that forward (a host attribute of each): with the batch size, a BatchNorm
that normalises a batch of one sample (the last, incomplete batch of an epoch).

A (B, 1) output is measured too (its min and max): a model ending in `sigmoid` whose probability
goes to `BCEWithLogitsLoss` has every output in [0, 1] and a loss that cannot go below
-ln sigmoid(1) = 0.313. Against a (B,) floating target of the same batch (the first 1-D floating
tensor of B values, on the output's device), the MSE two ways: sample by sample
(`mse_elementwise`) and over the (B, B) broadcast that `F.mse_loss((B, 1), (B,))` computes
(`mse_broadcast`, from centred moments: mean((o - mean y)^2) + the targets' variance). The loss the user
passed is one of the two, or neither (another loss): the detector reads which, instead of guessing
from the loss level, which a slowly learning regression shares with a broadcast one.

A model whose own forward never runs (a Lightning `training_step` that calls `self.net(x)`, a
wrapper that holds the network as an attribute) gives the root's hook nothing. After a step in
which the root's forward did not run, the probe watches the root's direct children for one step,
and then measures the output of the last one called whose output is a floating tensor (a loss
module's scalar and a child called with gradients off are passed over): the head, or the one network
the step called. A plain loop, whose root always runs, gets no hook on its children.
"""

from __future__ import annotations

from typing import Any

import torch
from torch import nn

from .batch import walk_batch
from .sharding import local
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
        self._mode: bool | None = None  # the root's `training` at the step's first forward
        self._shape: tuple[int, int] | None = None  # (dim, size of the last dim) of the output
        self._head: torch.Tensor | None = None  # a (B, 1) output at a sampled step, for the MSE forms
        self.mode_modules = sum(
            1
            for m in model.modules()
            if isinstance(m, (nn.modules.dropout._DropoutNd, nn.modules.batchnorm._BatchNorm))
        )
        self._bns = [m for m in model.modules() if isinstance(m, nn.modules.batchnorm._BatchNorm)]
        self._bn_train: int | None = None  # BatchNorm layers in train mode at the step's first forward
        self._root = model
        self._ran = False  # a watched forward (the root's, or its stand-in's) ran in this step
        self._scouting: list[Any] = []  # hooks on the root's children while the stand-in is looked for
        self._last_child: nn.Module | None = None  # the last child called with a floating output
        self.stand_in: nn.Module | None = None  # the child measured in the root's place
        self._handles = [model.register_forward_hook(self._hook, with_kwargs=True)]

    def _hook(self, module: nn.Module, args: Any, kwargs: Any, out: Any) -> None:
        if torch.is_grad_enabled():
            self._ran = True  # inside a compiled forward too (dynamo replays the store): no scouting then
        if compiling() or not self.enabled or not torch.is_grad_enabled():
            return
        if self._mode is None:
            self._mode = bool(module.training)
            self._bn_train = sum(1 for m in self._bns if m.training) if self._bns else None
        if not self.sampled or self._stats is not None or self._shape is not None:
            return
        try:
            t = first_float_tensor(out)
            if t is not None and t.dim() >= 1:
                self._shape = (int(t.dim()), int(t.shape[-1]))  # a (B, 1) output against (B,) targets
            if t is None or t.dim() < 2 or t.shape[-1] < 1:
                return  # (B, 1) is measured too: a sigmoid output fed to BCEWithLogitsLoss
            d = local(t.detach())
            if tuple(d.shape) != tuple(t.shape):
                return  # a tensor-parallel head's shard of the classes: its rows are not distributions
            if d.dim() == 2 and d.shape[-1] == 1 and not d.is_complex():
                self._head = d  # a reference, no copy: read at the step's flush against the target
            with torch.no_grad():
                if d.is_complex():  # a complex output is measured by its magnitudes (no order on C)
                    d = d.abs()
                mn, mx = torch.aminmax(d)
                dev = (d.sum(-1, dtype=torch.float32) - 1.0).abs().amax()  # no fp32 copy of the logits
                ids = _input_ids(args, kwargs)
                copy = (
                    (d.argmax(-1) == ids).float().mean()
                    if ids is not None and d.dim() == 3 and tuple(ids.shape) == tuple(d.shape[:2])
                    else torch.full((), -1.0, device=d.device)
                )
                self._stats = torch.stack([mn.float(), mx.float(), dev, copy.to(dev.device)])
            self._classes = int(t.shape[-1])
        except Exception as e:  # never break the user's forward
            self.enabled, self.error = False, e

    def reset(self) -> None:
        self._stats, self._classes, self._mode, self._shape = None, None, None, None
        self._bn_train, self._head = None, None

    def _scout(self, module: nn.Module, args: Any, out: Any) -> None:
        """While looking for the stand-in: remember the last child called with a floating output."""
        if compiling() or not self.enabled or not torch.is_grad_enabled():
            return
        t = first_float_tensor(out)
        if t is not None and t.dim() >= 1 and not isinstance(module, nn.modules.loss._Loss):
            self._last_child = module

    def _find_stand_in(self) -> None:
        """At a step's end: when the root's forward did not run, watch its children for a step;
        after that step, measure the last child it called (module docstring)."""
        if self.stand_in is not None or not self.enabled:
            return
        if self._scouting:
            for h in self._scouting:
                h.remove()
            self._handles = [h for h in self._handles if h not in self._scouting]
            self._scouting = []
            if self._last_child is not None and not self._ran:
                self.stand_in = self._last_child
                self._handles.append(self.stand_in.register_forward_hook(self._hook, with_kwargs=True))
            return
        if not self._ran:
            self._scouting = [c.register_forward_hook(self._scout) for c in self._root.children()]
            self._handles.extend(self._scouting)

    def flush(self, packer: Any, step: Any = None) -> dict[str, Any] | None:
        stats, k, mode, shape, bn = self._stats, self._classes, self._mode, self._shape, self._bn_train
        head = self._head
        self._find_stand_in()
        self._ran = False
        self.reset()
        if not self.enabled:
            return None
        if stats is not None:
            packer.add("out_stats", stats)
        forms = _mse_forms(head, getattr(step, "batch", None)) if head is not None else None
        if forms is not None:
            packer.add("mse_forms", forms)
        return {"classes": k, "mode": mode if self.mode_modules else None, "shape": shape, "bn_train": bn}

    def interpret(self, values: dict[str, Any], ctx: dict[str, Any] | None, rec: dict[str, Any]) -> None:
        if ctx and ctx["mode"] is not None:
            rec["train_mode"] = int(ctx["mode"])
        if ctx and ctx.get("bn_train") is not None:
            rec["bn_train"] = int(ctx["bn_train"])
        if ctx and ctx["shape"] is not None:
            rec["out_rank"], rec["out_last_dim"] = ctx["shape"]
        if "mse_forms" in values:
            rec["mse_elementwise"], rec["mse_broadcast"] = (float(v) for v in values["mse_forms"][:2])
        if not ctx or "out_stats" not in values:
            return
        mn, mx, dev, copy = (float(v) for v in values["out_stats"][:4])
        rec["out_min"], rec["out_max"], rec["out_rowsum_dev"] = mn, mx, dev
        rec["out_classes"] = ctx["classes"]
        if copy >= 0:
            rec["out_copy_frac"] = copy

    def remove(self) -> None:
        for h in self._handles:
            h.remove()
        self._handles.clear()


def _mse_forms(head: torch.Tensor, batch: Any) -> torch.Tensor | None:
    """[elementwise, broadcast] MSE of the (B, 1) output `head` against the batch's first 1-D
    floating tensor of B values on the same device (None without one): two device scalars, no sync."""
    if batch is None:
        return None
    try:
        n = int(head.shape[0])
        y = next(
            (
                t
                for _, t in walk_batch(batch).items
                if t.dim() == 1
                and t.shape[0] == n
                and n >= 4
                and t.is_floating_point()
                and not t.is_complex()
                and t.device == head.device
            ),
            None,
        )
        if y is None:
            return None
        with torch.no_grad():
            o, yf = head.reshape(-1).float(), y.detach().float()
            elementwise = ((o - yf) ** 2).mean()
            ym = yf.mean()  # E_ij (o_i - y_j)^2 = E_i (o_i - mean y)^2 + E_j (y_j - mean y)^2, centred: no cancellation
            broadcast = ((o - ym) ** 2).mean() + ((yf - ym) ** 2).mean()
            return torch.stack([elementwise, broadcast])
    except Exception:  # a batch this cannot read costs these two numbers, never the probe's others
        return None


def _input_ids(args: Any, kwargs: Any) -> torch.Tensor | None:
    """The token ids the forward received: `input_ids=` or the first positional argument, when it is
    an integer (B, T) tensor."""
    t = kwargs.get("input_ids") if isinstance(kwargs, dict) else None
    if t is None and args:
        t = args[0]
    if isinstance(t, torch.Tensor) and t.dim() == 2 and not t.is_floating_point() and t.dtype != torch.bool:
        return t
    return None
