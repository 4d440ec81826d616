"""Op-level tracing: the first operation, forward or backward, whose output went non-finite.

A `TorchDispatchMode` sees every aten operation below autograd, in forward and in backward (the
same mechanism as torch's `FlopCounterMode`). For each operation that computes new values (views
are skipped) one `aminmax` per floating output gives the non-finite flag and the magnitude. An
operation is the *origin* of a non-finite value when

- its output holds NaN and none of its tensor inputs does (softmax of a row that is all -inf,
  0/0, sqrt of a negative), or
- its output holds +-inf and every input, tensor or scalar, is finite (exp or a matmul that
  overflowed its dtype, log of 0), or
- it is the first to consume a non-finite batch tensor or parameter (the data or the state was
  already bad).

An infinity that was put there on purpose (`masked_fill(mask, -inf)`) is not an origin: its
scalar argument is already infinite, and the ops that carry it along only propagate it.

Where an op runs: forward ops take the innermost module on a stack kept by forward pre/post hooks.
Backward ops are attributed through the autograd graph: each forward op's autograd node has a
sequence number (read with `torch._C._autograd._get_sequence_nr()` while the op is dispatched,
since the node is created just before), and the backward engine exposes the node it is running
(`torch._C._current_autograd_node()`), whose sequence number leads back to the forward module.

Where in the user's code: like `detect_anomaly`'s forward traceback, each forward op records the
innermost Python frame outside torch and lossdoctor (file, line, function: one walk up the frame
stack, no source read); a backward op is given the frame of the forward op its autograd node
belongs to.

This is for triage, not the hot path: one host read per traced op.
"""

from __future__ import annotations

import math
import os
import sys
import sysconfig
from dataclasses import dataclass, field
from types import FrameType
from typing import Any

import torch
from torch import nn
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_flatten

from ..messages import Msg
from ..signals.safe_reads import float_like, real_view
from ..signals.tracer import dtype_max

#: operations whose non-finite output from finite inputs is a domain error, not an overflow
DOMAIN_OPS = frozenset(
    {
        "log",
        "log2",
        "log10",
        "log1p",
        "sqrt",
        "rsqrt",
        "reciprocal",
        "div",
        "pow",
        "acos",
        "asin",
        "atanh",
        "acosh",
        "xlogy",
        "special_xlogy",
        "logit",
        "atan2",
        "fmod",
        "remainder",
        "digamma",
        "lgamma",
        "polygamma",
        "erfinv",
        "nll_loss_forward",
        "nll_loss",
        "nll_loss2d_forward",
        "binary_cross_entropy",
        "mse_loss_backward",
        "_softmax_backward_data",
        "norm",
        "linalg_vector_norm",
        "var",
        "std",
        "var_mean",
        "std_mean",
    }
)
SOFTMAX_OPS = frozenset(
    {
        "_softmax",
        "softmax",
        "_log_softmax",
        "log_softmax",
        "_safe_softmax",
        "_scaled_dot_product_attention_math",
        "_scaled_dot_product_flash_attention",
        "_scaled_dot_product_efficient_attention",
        "_scaled_dot_product_flash_attention_for_cpu",
        "_scaled_dot_product_cudnn_attention",
    }
)
LOSS_OPS = frozenset(
    {
        "nll_loss_forward",
        "nll_loss",
        "nll_loss2d_forward",
        "nll_loss_nd",
        "cross_entropy_loss",
        "mse_loss",
        "l1_loss",
        "smooth_l1_loss",
        "huber_loss",
        "binary_cross_entropy",
        "binary_cross_entropy_with_logits",
        "kl_div",
    }
)
_SKIP = frozenset({"detach", "alias", "lift_fresh", "_to_copy_meta"})
#: frames inside these folders are not the user's code: torch, lossdoctor, and the environment's
#: console scripts (the launchers pip writes for `lossdoctor`, `torchrun`...: a model built inside
#: lossdoctor, as `lossdoctor demo`'s, would else be located at the launcher's `<module>` line)
_LIBRARY_DIRS = (
    os.path.dirname(os.path.abspath(torch.__file__)) + os.sep,
    os.path.dirname(os.path.dirname(os.path.abspath(__file__))) + os.sep,
    os.path.abspath(sysconfig.get_path("scripts")) + os.sep,
)


def user_frame(depth: int = 1) -> dict[str, Any] | None:
    """The innermost frame outside torch and lossdoctor: `{"file", "line", "function"}` (None when
    every frame is library code)."""
    f: FrameType | None = sys._getframe(depth)
    while f is not None:
        name = f.f_code.co_filename
        if not name.startswith(_LIBRARY_DIRS) and not name.startswith("<frozen"):
            return {"file": name, "line": int(f.f_lineno), "function": f.f_code.co_name}
        f = f.f_back
    return None


def op_name(func: Any) -> str:
    """`aten._softmax.default` -> `aten._softmax`."""
    try:
        return f"{func.namespace}.{func._opname}"
    except AttributeError:
        return str(func).rsplit(".", 1)[0]


def base_name(op: str) -> str:
    """`aten.add_` -> `add` (the op without namespace and in-place suffix)."""
    n = op.split(".", 1)[-1]
    return n[:-1] if n.endswith("_") and not n.endswith("__") else n


@dataclass
class TensorStats:
    shape: list[int]
    dtype: str
    min: float | None
    max: float | None
    absmax: float | None
    nan: int
    inf: int
    source: str | None = None  # "batch:<key>" or "param:<name>" when the tensor is one of those

    def to_dict(self) -> dict[str, Any]:
        return {k: v for k, v in self.__dict__.items() if v is not None}


def tensor_stats(t: torch.Tensor, source: str | None = None) -> TensorStats:
    """Finite min/max/absmax and NaN/Inf counts (a few passes; only for the ops we report)."""
    d = real_view(t.detach())  # a complex tensor: its real and imaginary parts
    with torch.no_grad():
        if not d.is_floating_point():
            d = d.float()
        nan = int(torch.isnan(d).sum())
        inf = int(torch.isinf(d).sum())
        fin = d[torch.isfinite(d)] if (nan or inf) else d.reshape(-1)
        mn_f: float | None
        mx_f: float | None
        amax: float | None
        if fin.numel():
            mn, mx = torch.aminmax(fin.float())
            mn_f, mx_f = float(mn), float(mx)
            amax = max(abs(mn_f), abs(mx_f))
        else:
            mn_f = mx_f = amax = None
    return TensorStats(
        shape=list(t.shape),
        dtype=str(t.dtype).replace("torch.", ""),
        min=mn_f,
        max=mx_f,
        absmax=amax,
        nan=nan,
        inf=inf,
        source=source,
    )


def _fresh_nonfinite(args: tuple, kwargs: dict, outs: list[torch.Tensor]) -> bool:
    """Some output element is non-finite where every input element it comes from is finite.

    Position by position, for inputs that broadcast to the output's shape (element-wise ops): the
    -inf a causal mask put into attention scores does not hide the +inf that `exp` makes of a
    large finite score beside it. No verdict (False) when a scalar argument is itself non-finite
    (a mask fill) or no input lines up with the output (reductions, matmuls)."""
    flat, _ = tree_flatten((args, kwargs))
    if any(isinstance(x, float) and not math.isfinite(x) for x in flat):
        return False
    ins = [t for t in flat if isinstance(t, torch.Tensor) and float_like(t)]
    with torch.no_grad():
        for o in outs:
            lined = []
            for t in ins:
                try:
                    lined.append(torch.broadcast_to(t.detach(), o.shape))
                except RuntimeError:
                    continue
            if not lined:
                continue
            fresh = ~torch.isfinite(o.detach())
            for t in lined:
                fresh &= torch.isfinite(t)
            if bool(fresh.any()):
                return True
    return False


def _minmax(ts: list[torch.Tensor]) -> list[list[float]]:
    """[min, max] of each tensor, read to the host at once (NaN propagates, Inf shows)."""
    return torch.stack([torch.stack(torch.aminmax(real_view(t.detach()))).float() for t in ts]).tolist()


def _storage_key(t: torch.Tensor) -> int | None:
    try:
        return t.untyped_storage().data_ptr()
    except Exception:
        return None


@dataclass
class OpEvent:
    """The origin op of a phase (or the first near-overflow op), with what it saw."""

    phase: str
    index: int  # position among the checked ops of its phase
    op: str  # aten.<name>
    module: str | None  # qualified module name; None outside the model (loss code)
    module_type: str | None
    kind: str  # nan | overflow | domain | data | param | near_overflow
    inputs: list[TensorStats] = field(default_factory=list)
    outputs: list[TensorStats] = field(default_factory=list)
    scalars: dict[str, Any] = field(default_factory=dict)
    samples: list[int] | None = None  # rows (first dim = batch) of the output that went bad
    node: str | None = None  # backward: the autograd node running it
    forward_op: str | None = None  # backward: the forward op that node belongs to
    code: dict[str, Any] | None = None  # the user's frame of the (forward) op: {"file", "line", "function"}

    def to_dict(self) -> dict[str, Any]:
        d = {k: v for k, v in self.__dict__.items() if v is not None and k not in ("inputs", "outputs")}
        d["inputs"] = [s.to_dict() for s in self.inputs]
        d["outputs"] = [s.to_dict() for s in self.outputs]
        return d

    def describe(self) -> Msg:
        """One evidence sentence: op, where, what came in, what came out."""
        node = Msg("triage.op.node", node=self.node) if self.phase == "backward" and self.node else ""
        where = (
            Msg("triage.op.in", module=self.module, node=node) if self.module else Msg("triage.op.outside", node=node)
        )
        scalars = Msg("triage.op.scalars", args=str(self.scalars)) if self.scalars else ""
        phase = Msg(f"word.{self.phase}")  # forward / backward, in the report's language
        return Msg(
            "triage.op.describe",
            phase=phase,
            op=self.op,
            where=where,
            what=Msg(f"triage.op.{self.kind}"),
            ins=_joined([_fmt_stats(s) for s in self.inputs[:3]]),
            outs=_joined([_fmt_stats(s) for s in self.outputs[:2]]),
            scalars=scalars,
        )


def _joined(parts: list[Msg]) -> Msg | str:
    """Parts joined with '; ' (a list value would be joined with ', ')."""
    if not parts:
        return ""
    if len(parts) == 1:
        return parts[0]
    return Msg("triage.op.then", first=parts[0], rest=_joined(parts[1:]))


def _fmt_stats(s: TensorStats) -> Msg:
    rng = Msg("triage.op.no_finite") if s.absmax is None else Msg("triage.op.range", lo=s.min, hi=s.max)
    counts = ([Msg("triage.op.nan_count", n=s.nan)] if s.nan else []) + (
        [Msg("triage.op.inf_count", n=s.inf)] if s.inf else []
    )
    return Msg(
        "triage.op.stats",
        dtype=s.dtype,
        shape=str(list(s.shape)),  # notation: [4, 8] in any language
        src=f" {s.source}" if s.source else "",
        rng=rng,
        bad=Msg("triage.op.counts", counts=counts) if counts else "",
    )


class OpTracer(TorchDispatchMode):
    """Finds the origin op of non-finite values in forward and in backward (see module docstring).

    `leaves` maps tensor storages to names ("batch:x", "param:fc.weight") so that an op reading
    a non-finite batch tensor or parameter is reported as such; `batch_size` lets the tracer name
    the rows of a bad output.
    """

    def __init__(
        self, model: nn.Module | None, *, leaves: dict[int, str] | None = None, batch_size: int | None = None
    ) -> None:
        super().__init__()
        self.model = model
        self.leaves = leaves or {}
        self.batch_size = batch_size
        self.origin: dict[str, OpEvent | None] = {"forward": None, "backward": None}
        self.near: dict[str, OpEvent | None] = {"forward": None, "backward": None}
        self.checked = {"forward": 0, "backward": 0}
        self.ops = {"forward": 0, "backward": 0}
        self.error: BaseException | None = None
        self._stack: list[str] = []
        self._seq_module: dict[int, tuple[str | None, str, dict[str, Any] | None]] = {}
        self._types: dict[str, str] = {}
        self._param_owner: dict[int, str] = {}
        self._handles: list[Any] = []

    # --- module attribution --------------------------------------------------------------------
    def __enter__(self) -> OpTracer:
        if self.model is not None:
            for name, m in self.model.named_modules():
                name = name or "<model>"
                self._types[name] = type(m).__name__
                self._handles.append(m.register_forward_pre_hook(self._push(name)))
                self._handles.append(m.register_forward_hook(self._pop(name), always_call=True))
            for name, p in self.model.named_parameters():
                self._param_owner[id(p)] = name.rsplit(".", 1)[0] if "." in name else "<model>"
        return super().__enter__()

    def _leaf(self, t: torch.Tensor) -> str | None:
        """The name of the batch tensor or parameter `t` is stored in, if it is one."""
        key = _storage_key(t)
        return None if key is None else self.leaves.get(key)

    def __exit__(self, *exc: Any) -> None:
        try:
            super().__exit__(*exc)
        finally:
            for h in self._handles:
                h.remove()
            self._handles.clear()

    def _push(self, name: str):
        def pre(module: nn.Module, args: Any) -> None:
            self._stack.append(name)

        return pre

    def _pop(self, name: str):
        def post(module: nn.Module, args: Any, out: Any) -> None:
            if self._stack and self._stack[-1] == name:
                self._stack.pop()
            elif name in self._stack:
                del self._stack[len(self._stack) - 1 - self._stack[::-1].index(name) :]

        return post

    def _where(self, phase: str) -> tuple[str | None, str | None, str | None, dict[str, Any] | None]:
        """(module, autograd node name, forward op, the user's frame) of the op being dispatched."""
        if phase == "forward":
            return (self._stack[-1] if self._stack else None), None, None, user_frame(2)
        node = torch._C._current_autograd_node()
        if node is None:
            return None, None, None, None
        name = node.name()
        var = getattr(node, "variable", None)
        if var is not None:  # AccumulateGrad: the parameter's owner
            return self._param_owner.get(id(var)), name, None, None
        mod, fop, code = self._seq_module.get(node._sequence_nr(), (None, None, None))
        return mod, name, fop, code

    # --- dispatch ------------------------------------------------------------------------------
    def __torch_dispatch__(self, func: Any, types: Any, args: tuple = (), kwargs: dict | None = None) -> Any:
        kwargs = kwargs or {}
        if self.error is not None:
            return func(*args, **kwargs)
        phase = "backward" if torch._C._current_graph_task_id() != -1 else "forward"
        name = op_name(func)
        try:
            if phase == "forward":
                seq = torch._C._autograd._get_sequence_nr() - 1
                if seq not in self._seq_module:
                    self._seq_module[seq] = (self._stack[-1] if self._stack else None, name, user_frame(2))
            pre = None
            if self.origin[phase] is None and getattr(func, "_schema", None) is not None and func._schema.is_mutable:
                pre = self._input_flags(args, kwargs)
        except Exception as e:  # tracing must never change what the model computes
            self.error = e
            return func(*args, **kwargs)
        out = func(*args, **kwargs)
        self.ops[phase] += 1
        if self.origin[phase] is not None or getattr(func, "is_view", False) or base_name(name) in _SKIP:
            return out
        try:
            self._check(phase, func, name, args, kwargs, out, pre)
        except Exception as e:
            self.error = e
        return out

    def _float_outputs(self, out: Any) -> list[torch.Tensor]:
        flat, _ = tree_flatten(out)
        return [t for t in flat if isinstance(t, torch.Tensor) and float_like(t) and t.numel() > 0]

    def _input_flags(self, args: tuple, kwargs: dict) -> tuple[bool, bool, list[str]]:
        """(some tensor input holds NaN, some input (tensor or scalar) is non-finite,
        names of non-finite leaf inputs)."""
        flat, _ = tree_flatten((args, kwargs))
        ts = [t for t in flat if isinstance(t, torch.Tensor) and float_like(t) and t.numel() > 0]
        has_nan = has_nonfinite = False
        bad_leaves: list[str] = []
        if ts:
            mm = _minmax(ts)
            for t, (mn, mx) in zip(ts, mm):
                if math.isnan(mn) or math.isnan(mx):
                    has_nan = True
                if not (math.isfinite(mn) and math.isfinite(mx)):
                    has_nonfinite = True
                    leaf = self._leaf(t)
                    if leaf is not None:
                        bad_leaves.append(leaf)
        for x in flat:
            if isinstance(x, float) and not math.isfinite(x):
                has_nonfinite = True
        return has_nan, has_nonfinite, bad_leaves

    def _check(
        self,
        phase: str,
        func: Any,
        name: str,
        args: tuple,
        kwargs: dict,
        out: Any,
        pre: tuple[bool, bool, list[str]] | None,
    ) -> None:
        outs = self._float_outputs(out)
        if not outs:
            return
        self.checked[phase] += 1
        mm = _minmax(outs)
        out_nan = any(math.isnan(a) or math.isnan(b) for a, b in mm)
        out_bad = out_nan or any(not (math.isfinite(a) and math.isfinite(b)) for a, b in mm)
        if not out_bad:
            if self.near[phase] is None:
                for t, (a, b) in zip(outs, mm):
                    if t.dtype in (torch.float16, torch.bfloat16) and max(abs(a), abs(b)) >= 0.5 * dtype_max(t.dtype):
                        self.near[phase] = self._event(phase, "near_overflow", name, args, kwargs, outs)
                        break
            return
        in_nan, in_nonfinite, bad_leaves = pre if pre is not None else self._input_flags(args, kwargs)
        kind = None
        if bad_leaves:
            kind = "data" if any(b.startswith("batch:") for b in bad_leaves) else "param"
        elif out_nan and not in_nan:
            kind = "nan"
        elif not out_nan and not in_nonfinite:
            kind = "overflow"
        elif not out_nan and _fresh_nonfinite(args, kwargs, outs):
            kind = "overflow"  # e.g. exp overflowing to +inf next to the -inf of a causal mask
        if kind in ("nan", "overflow") and base_name(name) in DOMAIN_OPS:
            kind = "domain"
        if kind is not None:
            self.origin[phase] = self._event(phase, kind, name, args, kwargs, outs)

    def _event(self, phase: str, kind: str, name: str, args: tuple, kwargs: dict, outs: list[torch.Tensor]) -> OpEvent:
        module, node, fop, code = self._where(phase)
        flat, _ = tree_flatten((args, kwargs))
        inputs = [tensor_stats(t, self._leaf(t)) for t in flat if isinstance(t, torch.Tensor) and t.numel() > 0][:6]
        scalars = {f"arg{i}": x for i, x in enumerate(flat) if isinstance(x, float) and not math.isfinite(x)}
        ev = OpEvent(
            phase=phase,
            index=self.checked[phase] - 1,
            op=name,
            module=module,
            module_type=self._types.get(module) if module else None,
            kind=kind,
            inputs=inputs,
            outputs=[tensor_stats(t) for t in outs[:3]],
            scalars={k: str(v) for k, v in scalars.items()},
            node=node,
            forward_op=fop,
            code=code,
        )
        o = outs[0]
        if kind != "near_overflow" and self.batch_size and o.dim() >= 1 and int(o.shape[0]) == self.batch_size:
            with torch.no_grad():
                rows = (~torch.isfinite(o.detach())).reshape(o.shape[0], -1).any(dim=1)
                ev.samples = [int(i) for i in torch.nonzero(rows).flatten().tolist()[:32]]
        return ev


def leaf_names(model: nn.Module | None, batch: Any) -> dict[int, str]:
    """Storage -> "param:<name>" / "batch:<key>" for the op tracer."""
    from .batches import named_tensors

    out: dict[int, str] = {}
    if model is not None:
        for n, p in model.named_parameters():
            k = _storage_key(p)
            if k is not None:
                out[k] = f"param:{n}"
    for key, t in named_tensors(batch):
        k = _storage_key(t)
        if k is not None and float_like(t):
            out[k] = f"batch:{key}"
    return out
