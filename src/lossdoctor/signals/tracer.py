"""Forward and backward statistics of every module, in execution order, every step.

For each module call the forward hook computes `aminmax` of the output (one pass, no temporary:
NaN propagates into min/max and Inf shows as +-inf, so the same two numbers give the non-finite
flag and max |x|) and hangs a tensor hook on the output that does the same for its gradient in
backward. Leaf modules whose input was not the previous module's output (say `c_proj` after a
functional softmax) also get their input checked, so a NaN made by code between modules is
attributed to the module whose forward made it. On sampled steps the RMS of each output is added.

Wide linear layers on CPU (an LM head: 20,000 logits per token from 256 inputs) are not scanned
between sampled steps; their outputs are vouched for instead. Forward: y = x W^T + b is finite when
x, W and b are, and |y| <= max|x| * in_features * max|W| + max|b| stays below a quarter of y's
dtype range -- three small reductions (the weight's once per optimizer step) instead of a pass over
the logits; when the bound does not hold, the output is scanned as any other. Backward: a
non-finite gradient at the output makes the input's gradient (grad_y W) non-finite, whatever W
holds, so the output gradient is scanned only when the input's gradient turns out non-finite (then
the two tell whether it went bad at the output or in the layer's backward). Each decision reads a
number on the host, which on CPU is no device synchronisation; on GPU these layers are scanned.

The results are written into preallocated slots (views of one buffer per device and dtype, made
once and reused every step), so a step allocates nothing per module: small tensors kept alive from
the forward pass to the end of the step would otherwise be scattered between the activations and
fragment the heap the large buffers come from. `flush` hands them to the Packer, once per step: as
one slice or one gather of that buffer when the step's statistics are all in it, not a stack of
one 0-d view per event.
"""

from __future__ import annotations

import math
import weakref
from dataclasses import dataclass
from typing import Any

import torch
from torch import nn

from ..messages import Msg, holds
from .safe_reads import norm_fp32, real_view, stored_attr
from .sharding import local

#: dtypes whose L2 norm accumulates into an fp32 slot (`ModuleTracer._norm`)
_SLOT_NORM = (torch.float32, torch.float16, torch.bfloat16)
OUTPUT, INPUT, VOUCHED = 0, 1, 2  # VOUCHED: finite by a bound, not scanned (no max |x| known)
#: an event's slot (`ModuleTracer.ev_slot`): its statistics are zeros (vouched for), or not in a slot
ZERO_SLOT, NOT_POOLED = -1, -2


@dataclass(frozen=True)
class TraceLimits:
    """How much one step's trace may hold. A step is one forward per micro-batch; forwards with
    no `mon.step` to flush them (a trainer interrupted by an exception, a loop that never calls
    step) must not grow the trace without bound (issue 27: ~9 events a forward, for ever)."""

    #: forwards' worth of events (two a module: input and output) kept per step: above the
    #: gradient accumulation of real runs (measured default; HF/Lightning runs use 1-64)
    forwards_per_step: int = 256
    #: and never fewer events than this (small models)
    min_events: int = 16384


TRACE = TraceLimits()

#: Element-wise modules that cannot turn finite values into NaN/Inf (nor finite gradients into
#: non-finite ones). Between sampled steps their outputs are not scanned: when their input is the
#: output just checked, their output is vouched for by it. This saves a pass over the largest
#: activations (the MLP's 4x-wide hidden layer) at no loss of attribution.
PASSTHROUGH = (
    nn.Dropout,
    nn.Dropout1d,
    nn.Dropout2d,
    nn.Dropout3d,
    nn.AlphaDropout,
    nn.Identity,
    nn.ReLU,
    nn.ReLU6,
    nn.LeakyReLU,
    nn.GELU,
    nn.SiLU,
    nn.Tanh,
    nn.Sigmoid,
    nn.Hardtanh,
    nn.Softsign,
    nn.ELU,
    nn.Mish,
)


#: Above this many modules the per-module hooks go on an evenly spaced subset of them (the root and
#: the output head always). Why: a hooked module call costs ~5-10 us of host Python (the hook and
#: torch's slow call path) whatever it computes; on a 10,000-tensor adapter stack (5,000 modules) the
#: hooks alone added ~30% to a CPU step (benchmarks/many_params.py). The subset still sees every
#: non-finite value that propagates forward (it reaches the next traced module); triage's replay of
#: an incident step traces every module, so the first bad layer is named exactly there.
TRACE_MODULE_LIMIT = 1024

#: Past `TRACE_MODULE_LIMIT` modules, the traced modules that also record between sampled steps
#: (evenly spaced among them, plus the root and the output head); the others' hooks return at once
#: then (~2-3 us a call, torch's hooked call path). Why: a recording module costs ~30-45 us of host
#: time a step on CPU (forward and gradient hooks, two statistics kernels), ~45 ms for 1,024 of them,
#: 7% of a step of a 10,000-tensor adapter stack (benchmarks/many_params.py). A non-finite value
#: still shows at the next recording module, and the loss and every gradient are checked every step;
#: sampled steps (per-layer rows) and replayed incidents trace as before.
EVERY_STEP_MODULE_LIMIT = 256


def traced_subset(n_modules: int, head: int | None, limit: int = TRACE_MODULE_LIMIT) -> list[int]:
    """Indices (in `named_modules` order) of the modules that get hooks: all of them up to `limit`,
    else every k-th one, plus the root and the output head."""
    if n_modules <= limit:
        return list(range(n_modules))
    keep = set(range(0, n_modules, math.ceil(n_modules / limit)))
    keep.add(0)
    if head is not None:
        keep.add(head)
    return sorted(keep)


def every_step_subset(
    traced: list[int], n_modules: int, head: int | None, limit: int = EVERY_STEP_MODULE_LIMIT
) -> list[int]:
    """Of the traced modules, those that record at every step: all of them when every module is
    traced, else every k-th traced one (about `limit`), plus the root and the output head."""
    if len(traced) >= n_modules:
        return list(traced)
    keep = set(traced[:: max(1, math.ceil(len(traced) / limit))])
    keep.add(0)
    if head is not None:
        keep.add(head)
    return sorted(keep)


def _not_compiling() -> bool:  # torch < 2.3 has no torch.compiler.is_compiling
    return False


#: True while torch.compile (dynamo) traces the code that calls it.
#:
#: Every module and tensor hook of the monitor returns at once when this is true. Hooks on a
#: compiled module run inside dynamo's trace, and a hook that reads or appends to the tracer's
#: per-step lists makes dynamo guard on them (`len(self.ev_max) == 9`, `self.ev_rms[0]`): the
#: lists change every step, so every step recompiles, and the recompile limit is hit within a
#: few steps. Dynamo folds this call to a constant, so the traced hook is empty and guards on
#: nothing of ours: the compiled graph is the one the model compiles to without the monitor.
#: The price: per-module statistics of a compiled module are not recorded (see the README).
#: Bound to torch's own function, not wrapped: it is called by every hook of every module.
compiling = getattr(getattr(torch, "compiler", None), "is_compiling", _not_compiling)


def is_passthrough(m: nn.Module) -> bool:
    if isinstance(m, PASSTHROUGH):
        return True
    name = type(m).__name__  # transformers' activation classes (NewGELUActivation, ...)
    return len(m._modules) == 0 and (name.endswith("Activation") or name in ("GELUTanh", "QuickGELU"))


#: what a model returns that is its loss or the loss's per-token parts, not an activation: HF's
#: `loss`/`aux_loss`, and the outputs of TRL's fused LM head (per-token log-probabilities, entropy,
#: ...: computed from the last hidden state without calling the head as a module)
LOSS_OUTPUTS = frozenset({"log_probs", "logps", "entropy", "label_mask", "is_top1", "mean_logits", "log_sum_sq_probs"})


def first_float_tensor(obj: Any, depth: int = 0) -> torch.Tensor | None:
    """The main tensor of a module's output: itself, or the first floating tensor in a tuple, list
    or dict (HF returns tuples and ModelOutput dicts). A scalar is a loss, not an activation (HF
    puts the loss first: `(loss, logits, ...)`), and so are a dict's loss entries (`LOSS_OUTPUTS`):
    the model's loss is never reported as its largest activation."""
    if isinstance(obj, torch.Tensor):
        return obj if (obj.is_floating_point() or obj.is_complex()) and obj.dim() > 0 and obj.numel() > 0 else None
    if depth > 2:
        return None
    if isinstance(obj, (tuple, list)):
        items = obj
    elif isinstance(obj, dict):
        items = [v for k, v in obj.items() if not (isinstance(k, str) and ("loss" in k or k in LOSS_OUTPUTS))]
    else:
        return None
    for x in items:
        t = first_float_tensor(x, depth + 1)
        if t is not None:
            return t
    return None


def linear_layer(m: nn.Module) -> bool:
    """Exactly `nn.Linear` or transformers' `Conv1D` (y = x W + b): modules whose output can be
    bounded from their input and weight. Subclasses are left out: quantised and adapter layers
    (bitsandbytes, LoRA) compute with something other than their `weight`."""
    if type(m) is nn.Linear:
        return True
    return type(m).__name__ == "Conv1D" and type(m).__module__.startswith("transformers")


_DTYPE_MAX: dict[torch.dtype, float] = {}


def dtype_max(dtype: torch.dtype) -> float:
    v = _DTYPE_MAX.get(dtype)
    if v is None:
        v = _DTYPE_MAX[dtype] = (
            float(torch.finfo(dtype).max) if dtype.is_floating_point or dtype.is_complex else math.inf
        )
    return v


class SlotPool:
    """Preallocated 0-d views of one buffer per row (of one device and dtype), handed out one a
    call and all free again once the packer has copied them (`release`). Why: a statistic written
    into a view made once keeps no new tensor alive from the forward pass to the step's flush, so
    the hooks leave nothing of their own between the activations (heap fragmentation) nor among the
    garbage collector's young objects. When a step needs more, the pool is remade twice as large;
    the views already handed out this step keep the old buffer alive until the flush. The last
    column of the buffer holds zeros (`ZERO_SLOT`). The views are kept per row, not as one tuple per
    slot: every object the pool holds is traversed by each full collection of the user's process."""

    __slots__ = ("buf", "rows", "used")

    def __init__(self) -> None:
        self.buf: torch.Tensor | None = None
        self.rows: tuple[list[torch.Tensor], ...] = ()
        self.used = 0

    def take(self, n_rows: int, dtype: torch.dtype, device: torch.device) -> int:
        """The index of a free slot (in every row), growing the buffer when all are taken."""
        cap = len(self.rows[0]) if self.rows else 0
        if self.used == cap:
            cap = 2 * cap if cap else 256
            buf = torch.empty(n_rows, cap + 1, dtype=dtype, device=device)
            buf[:, cap] = 0
            self.buf = buf
            self.rows = tuple([row[k] for k in range(cap)] for row in buf)
        k = self.used
        self.used += 1
        return k

    def release(self) -> None:
        self.used = 0


class ModuleTracer:
    """The built-in probe of module outputs and output gradients (see `signals.probe`)."""

    name = "ModuleTracer"

    def __init__(self, model: nn.Module, *, check_inputs: bool = True) -> None:
        self.names: list[str] = []
        self.modules: list[nn.Module] = []
        for name, m in model.named_modules():
            self.names.append(name or "<model>")
            self.modules.append(m)
        self.parents = parent_index(self.names)
        self.head = _output_head(model, self.modules)
        #: sentences for the run's notes (the monitor shares its list): what the trace could not see
        self.notes: list[Any] = []
        self.is_leaf = [len(m._modules) == 0 for m in self.modules]
        self.passthrough = [is_passthrough(m) for m in self.modules]
        self.linear = [linear_layer(m) for m in self.modules]
        self.check_inputs = check_inputs
        self.sampled = False  # set by the monitor: also compute RMS this step
        self.enabled = True
        #: True between steps where an integration knows no training step runs (after the HF
        #: Trainer's on_step_end, before its next on_step_begin): forwards then are not traced
        self.idle = False
        #: events one step may hold (`TraceLimits`); past it the step's later forwards are not traced
        self.traced = traced_subset(len(self.modules), self.head)  # the modules that get hooks
        #: per module: it records at every step; the other traced ones on sampled steps only
        self.every_step = [False] * len(self.modules)
        for i in every_step_subset(self.traced, len(self.modules), self.head):
            self.every_step[i] = True
        self._capped = False
        self.max_events = max(TRACE.min_events, TRACE.forwards_per_step * 2 * len(self.traced))
        self.error: BaseException | None = None  # first internal error; the part is disabled then
        self._handles: list[Any] = []
        #: per module: ((version, data_ptr) of its weight, max |W|): once per optimizer step
        self._weight_absmax: list[tuple[tuple[int, int], float] | None] = [None] * len(self.modules)
        self._zero = torch.zeros(())  # stats of a vouched-for event: finite, not measured
        #: (device, dtype) -> the (min, max) slots (two rows)
        self._slots: dict[tuple[torch.device, torch.dtype], SlotPool] = {}
        #: device -> the fp32 slots of the sampled steps' norms (one row)
        self._rms_slots: dict[torch.device, SlotPool] = {}
        self.reset()
        #: one gradient hook per traced module, made once: a forward call only attaches it to its output
        self._bwd_hooks: dict[int, Any] = {i: self._make_bwd(i) for i in self.traced}
        for i in self.traced:
            m = self.modules[i]
            self._handles.append(m.register_forward_hook(self._make_fwd(i)))
            if check_inputs and self.is_leaf[i] and not self.passthrough[i]:
                self._handles.append(m.register_forward_pre_hook(self._make_pre(i)))

    def reset(self) -> None:
        """Forget the step's events. The lists are made once and emptied here, not made anew every
        step: `flush` hands their contents on as arrays, so nothing of a step's bookkeeping
        outlives it as new container objects: every container alive across steps is traversed by each
        full collection of the user's process."""
        if not hasattr(self, "ev_module"):
            self._new_lists()
        for events in self._lists:
            events.clear()
        self._buf: torch.Tensor | None = None
        self._one_buf = True
        self._slot = NOT_POOLED  # the slot the last `_aminmax` wrote
        self._last_out: torch.Tensor | None = None
        self._last_out_ev = (-1, -1)  # (event index, rms index) of the last recorded output
        #: the last scanned tensor and gradient with their slots, so that the bound and the deferred
        #: check read a tensor another event has just scanned instead of scanning it again (the
        #: gradient weakly: it must not outlive its use in backward)
        self._last_rec: tuple[torch.Tensor, torch.Tensor, torch.Tensor] | None = None
        self._last_grad: tuple[Any, torch.Tensor, torch.Tensor] | None = None

    def _new_lists(self) -> None:
        """The per-step event lists, made once (`reset` empties them)."""
        #: forward events in order: module index, kind (OUTPUT/INPUT), dtype max
        self.ev_module: list[int] = []
        self.ev_kind: list[int] = []
        self.ev_dtype_max: list[float] = []
        self.ev_min: list[torch.Tensor] = []
        self.ev_max: list[torch.Tensor] = []
        self.ev_rms: list[torch.Tensor] = []
        #: sqrt(numel) of each `ev_rms` entry: the norm is divided by it on the host
        self.ev_rms_root: list[float] = []
        #: each event's column in the step's slot buffer (`ZERO_SLOT`, `NOT_POOLED`), so that `flush`
        #: reads them with one slice or gather; `_buf`: that buffer, `_one_buf`: no other was used
        self.ev_slot: list[int] = []
        self.bw_slot: list[int] = []
        #: backward events in the order gradients arrived
        self.bw_module: list[int] = []
        self.bw_kind: list[int] = []
        self.bw_min: list[torch.Tensor] = []
        self.bw_max: list[torch.Tensor] = []
        #: output gradients of vouched-for linear layers awaiting their input's gradient:
        #: [gradient or None, its backward event index]
        self._deferred: list[list[Any]] = []
        self._lists: tuple[list[Any], ...] = (
            self.ev_module,
            self.ev_kind,
            self.ev_dtype_max,
            self.ev_min,
            self.ev_max,
            self.ev_rms,
            self.ev_rms_root,
            self.ev_slot,
            self.bw_slot,
            self.bw_module,
            self.bw_kind,
            self.bw_min,
            self.bw_max,
            self._deferred,
        )

    # --- hooks (hot path: no host sync and no allocation; the CPU-only bound reads host numbers) --
    def _aminmax(self, d: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """aminmax of `d` written into the next free preallocated slot of its device and dtype."""
        if type(d) is not torch.Tensor:
            d = local(d)  # a DTensor: this rank's shard, no collective and a plain result
        if type(d) is not torch.Tensor:  # another tensor subclass: its own result type
            self._slot = NOT_POOLED
            return torch.aminmax(d)
        pool = self._slots.get((d.device, d.dtype))
        if pool is None:
            pool = self._slots[(d.device, d.dtype)] = SlotPool()
        k = pool.take(2, d.dtype, d.device)
        if self._buf is None:
            self._buf = pool.buf
        elif self._buf is not pool.buf:
            self._one_buf = False
        self._slot = k
        return torch.aminmax(d, out=(pool.rows[0][k], pool.rows[1][k]))

    def _norm(self, d: torch.Tensor) -> torch.Tensor:
        """L2 norm of `d` in fp32, written into the next free fp32 slot of its device (as `_aminmax`:
        a sampled step keeps no new tensor per module alive until the flush); float64 and complex
        tensors, whose norm is not fp32, get a tensor of their own."""
        if d.dtype not in _SLOT_NORM:
            return norm_fp32(d)
        pool = self._rms_slots.get(d.device)
        if pool is None:
            pool = self._rms_slots[d.device] = SlotPool()
        k = pool.take(1, torch.float32, d.device)
        return torch.linalg.vector_norm(d, dtype=torch.float32, out=pool.rows[0][k])

    def _event(self, i: int, kind: int, dmax: float, mn: torch.Tensor, mx: torch.Tensor, slot: int) -> None:
        self.ev_slot.append(slot)
        self.ev_module.append(i)
        self.ev_kind.append(kind)
        self.ev_dtype_max.append(dmax)
        self.ev_min.append(mn)
        self.ev_max.append(mx)

    def _bw_event(self, i: int, kind: int, mn: torch.Tensor, mx: torch.Tensor, slot: int) -> int:
        self.bw_slot.append(slot)
        self.bw_module.append(i)
        self.bw_kind.append(kind)
        self.bw_min.append(mn)
        self.bw_max.append(mx)
        return len(self.bw_min) - 1

    def _record(self, i: int, kind: int, t: torch.Tensor) -> None:
        d = local(t.detach())
        mn, mx = self._aminmax(real_view(d))
        self._event(i, kind, dtype_max(d.dtype), mn, mx, self._slot)
        self._last_rec = (t, mn, mx)
        if self.sampled and kind == OUTPUT:
            self.ev_rms.append(self._norm(d))
            self.ev_rms_root.append(math.sqrt(d.numel()))

    def _alias(self, i: int) -> None:
        k, r = self._last_out_ev
        self._event(i, self.ev_kind[k], self.ev_dtype_max[k], self.ev_min[k], self.ev_max[k], self.ev_slot[k])
        if self.sampled and r >= 0:
            self.ev_rms.append(self.ev_rms[r])
            self.ev_rms_root.append(self.ev_rms_root[r])

    def _full(self) -> bool:
        """The step's trace holds `max_events`: said once, nothing more recorded until the flush
        (backward events come only from traced forwards: bounded with them)."""
        if not self._capped:  # said once a run: a flag, not a scan of the notes at every module call
            self._capped = True
            self.notes.append(Msg("tracer.events_capped", events=self.max_events))
        return True

    def _fail(self, e: BaseException) -> None:
        """Never let the monitor break the user's forward/backward: disable and remember."""
        self.enabled = False
        self.error = e

    def _make_pre(self, i: int):
        def pre(module: nn.Module, args: tuple) -> None:
            if (
                compiling()
                or not (self.every_step[i] or self.sampled)
                or not self.enabled
                or self.idle
                or not args
                or not torch.is_grad_enabled()
                or (len(self.ev_module) >= self.max_events and self._full())
            ):
                return
            try:
                t = first_float_tensor(args[0])
                if t is not None and t is not self._last_out:
                    self._record(i, INPUT, t)
            except Exception as e:
                self._fail(e)

        return pre

    def _make_fwd(self, i: int):
        def fwd(module: nn.Module, args: tuple, out: Any) -> None:
            # evaluation passes (no_grad) between training steps are not part of the step; between
            # sampled steps a model of many modules records on a subset (`EVERY_STEP_MODULE_LIMIT`)
            if (
                compiling()
                or not (self.every_step[i] or self.sampled)
                or not self.enabled
                or self.idle
                or not torch.is_grad_enabled()
                or (len(self.ev_module) >= self.max_events and self._full())
            ):
                return
            try:
                t = first_float_tensor(out)
                if t is None:
                    return
                if self.passthrough[i] and not self.sampled and args and first_float_tensor(args[0]) is self._last_out:
                    self._last_out = t  # vouched for by its checked input
                    return
                if t is self._last_out:
                    # a container returning its last child's tensor (Sequential, an MLP block):
                    # same values, so reuse the child's stats instead of another pass, and let
                    # the child's gradient hook speak for both
                    self._alias(i)
                    return
                x = first_float_tensor(args[0]) if args and self.linear[i] and not self.sampled else None
                if x is not None and self._vouch_linear(i, module, x, t):
                    self._record_vouched(i, t)
                    if t.requires_grad and x.requires_grad and x.grad_fn is not None:
                        self._defer_bwd(i, t, x)  # (a leaf x would collect a hook per step)
                    elif t.requires_grad:
                        t.register_hook(self._bwd_hooks[i])
                    return
                self._record(i, OUTPUT, t)
                self._last_out = t
                self._last_out_ev = (len(self.ev_min) - 1, len(self.ev_rms) - 1)
                if t.requires_grad:
                    t.register_hook(self._bwd_hooks[i])
            except Exception as e:
                self._fail(e)

        return fwd

    def _make_bwd(self, i: int):
        def bwd(grad: torch.Tensor) -> None:
            if compiling() or not self.enabled or grad is None:
                return
            try:
                mn, mx = self._aminmax(real_view(grad.detach()))  # max |g| is taken on the host
                self._bw_event(i, OUTPUT, mn, mx, self._slot)
                self._last_grad = (weakref.ref(grad), mn, mx)
            except Exception as e:
                self._fail(e)

        return bwd

    # --- wide linear layers on CPU: vouched for by a bound instead of a pass over the output -----
    def _vouch_linear(self, i: int, module: nn.Module, x: torch.Tensor, y: torch.Tensor) -> bool:
        """True when y = linear(x) is provably finite and well inside its dtype's range, and proving
        it reads at most half the bytes a scan of y would."""
        w = stored_attr(module, "weight")  # a parametrized weight is computed on access: not read
        b = stored_attr(module, "bias")
        if (
            y.device.type != "cpu"
            or x.device.type != "cpu"
            or type(w) not in (nn.Parameter, torch.Tensor)
            or w.dim() != 2
            or not w.is_floating_point()
            or y.numel() < 2 * (w.numel() + x.numel())
        ):
            return False
        limit = dtype_max(y.dtype) / 4
        key = (w._version, w.data_ptr())
        cached = self._weight_absmax[i]
        if cached is None or cached[0] != key:
            cached = self._weight_absmax[i] = (key, _host_absmax(w))
        w_max = cached[1]
        last = self._last_rec  # x is usually the tensor scanned just before (its producer's output)
        x_max = _host_absmax(x, (last[1], last[2]) if last is not None and last[0] is x else None)
        b_max = _host_absmax(b) if isinstance(b, torch.Tensor) and b.numel() else 0.0
        # every factor finite (NaN fails the comparisons) and representable in y's dtype (autocast
        # casts x, W and b to it), and the bound on |y| well inside the range
        bound = x_max * x.shape[-1] * w_max + b_max
        return max(w_max, x_max, b_max) <= limit and bound <= limit

    def _record_vouched(self, i: int, t: torch.Tensor) -> None:
        self._event(i, VOUCHED, dtype_max(t.dtype), self._zero, self._zero, ZERO_SLOT)
        self._last_out = t
        self._last_out_ev = (len(self.ev_min) - 1, -1)

    def _defer_bwd(self, i: int, y: torch.Tensor, x: torch.Tensor) -> None:
        """Check y's gradient only if x's gradient (computed from it) comes out non-finite."""
        cell: list[Any] = [None, -1]
        self._deferred.append(cell)

        def at_output(grad: torch.Tensor) -> None:
            if not self.enabled or grad is None:
                return
            try:
                cell[0], cell[1] = grad.detach(), self._bw_event(i, VOUCHED, self._zero, self._zero, ZERO_SLOT)
            except Exception as e:
                self._fail(e)

        def at_input(grad: torch.Tensor) -> None:
            if not self.enabled or cell[0] is None:
                return
            try:
                last = self._last_grad  # usually just scanned by the hook of x's producer
                known = (last[1], last[2]) if last is not None and last[0]() is grad else None
                if grad is None or not math.isfinite(_host_absmax(grad, known)):
                    self._scan_deferred(cell)
                cell[0] = None  # vouched for: non-finite values at y would have reached x's gradient
            except Exception as e:
                self._fail(e)

        y.register_hook(at_output)
        x.register_hook(at_input)

    def _scan_deferred(self, cell: list[Any]) -> None:
        g, k = cell
        if g is None:
            return
        self.bw_min[k], self.bw_max[k] = self._aminmax(g)
        self.bw_slot[k] = self._slot
        self.bw_kind[k] = OUTPUT
        cell[0] = None

    # --- per step -----------------------------------------------------------------------------
    def flush(self, packer: Any, step: Any = None) -> dict[str, Any]:
        """Hand this step's tensors to the packer; return the host-side layout for `interpret`."""
        for cell in self._deferred:  # an input whose gradient never came: scan the output's now
            self._scan_deferred(cell)
        import numpy as np

        ctx = {  # copies: the lists are emptied and refilled by the next step
            "ev_module": np.array(self.ev_module, dtype=np.int64),
            "ev_kind": np.array(self.ev_kind, dtype=np.int8),
            "ev_dtype_max": np.array(self.ev_dtype_max, dtype=np.float64),
            "bw_module": np.array(self.bw_module, dtype=np.int64),
            "bw_kind": np.array(self.bw_kind, dtype=np.int8),
            "rms": bool(self.ev_rms),
            "rms_root": np.array(self.ev_rms_root, dtype=np.float64),
        }
        if self.ev_min:
            self._pack(packer, "fwd", self.ev_min, self.ev_max, self.ev_slot)
        if self.ev_rms:
            packer.add("fwd_rms", self.ev_rms)
        if self.bw_max:
            self._pack(packer, "bwd", self.bw_min, self.bw_max, self.bw_slot)
        for pool in (*self._slots.values(), *self._rms_slots.values()):  # copied by the packer: free again
            pool.release()
        self.reset()
        return ctx

    def _pack(
        self, packer: Any, prefix: str, mins: list[torch.Tensor], maxs: list[torch.Tensor], slots: list[int]
    ) -> None:
        """`<prefix>_min` / `_max` into the packer: when every statistic of the step is in one slot
        buffer, its columns in one copy (a slice; on CPU, a gather when the events are not in slot
        order: aliases, vouched-for zeros); else a stack of the 0-d views (a device op per event,
        ~1 us of host time each: 5-10 ms a step on 1,000 traced modules)."""
        buf, n = self._buf, len(slots)
        first = slots[0]
        if buf is None or not self._one_buf or NOT_POOLED in slots:
            both = None
        elif first >= 0 and slots == list(range(first, first + n)):
            both = buf[:, first : first + n].clone()
        elif buf.device.type == "cpu":
            idx = torch.tensor(slots, dtype=torch.long)
            both = buf.index_select(1, idx.masked_fill_(idx == ZERO_SLOT, buf.shape[1] - 1))
        else:
            both = None
        packer.add(prefix + "_min", mins if both is None else both[0])
        packer.add(prefix + "_max", maxs if both is None else both[1])

    def interpret(self, values: dict[str, Any], ctx: dict[str, Any], rec: Any) -> None:
        """Host side: the record's activation fields, the per-module rows into `rec.layers`."""
        fields, per = interpret(self.names, self.parents, values, ctx, self.passthrough)
        rec.update(fields)
        rec.layers.update(per)
        import numpy as np

        ev_module = np.asarray(ctx["ev_module"])
        if self.head is not None and ev_module.size and not (ev_module == self.head).any():
            self._note_head_bypassed()
        if len(self.traced) < len(self.modules):
            note = Msg(
                "tracer.subset", traced=len(self.traced), modules=len(self.modules), every_step=sum(self.every_step)
            )
            if not holds(self.notes, note):
                self.notes.append(note)

    def _note_head_bypassed(self) -> None:
        """The model ran but its output head did not, as a module: the loss was computed from the
        last hidden state by other code (TRL's fused LM head, a chunked cross-entropy), so the
        logits were never made and cannot be traced."""
        if self.head is None:
            return
        note = Msg("tracer.head_bypassed", head=self.names[self.head])
        if not holds(self.notes, note):
            self.notes.append(note)

    def remove(self) -> None:
        for h in self._handles:
            h.remove()
        self._handles.clear()
        self.reset()


def _output_head(model: nn.Module, modules: list[nn.Module]) -> int | None:
    """Index of the model's output head (HF's `get_output_embeddings()`, e.g. `lm_head`), if any."""
    try:
        get = getattr(model, "get_output_embeddings", None)
        head = get() if callable(get) else None
    except Exception:
        return None
    for i, m in enumerate(modules):
        if m is head:
            return i
    return None


def parent_index(names: list[str]) -> list[int]:
    """Index of each module's parent in `names` (-1 for the root)."""
    pos = {n: i for i, n in enumerate(names)}
    out = []
    for n in names:
        p = n.rsplit(".", 1)[0] if "." in n else "<model>"
        out.append(pos.get(p, -1) if n != "<model>" else -1)
    return out


def interpret(
    names: list[str],
    parents: list[int],
    values: dict[str, Any],
    ctx: dict[str, Any],
    passthrough: list[bool] | None = None,
) -> tuple[dict[str, Any], dict[str, Any]]:
    """Host side of one step: record fields and per-module arrays (max over repeated calls).

    The first non-finite forward value is attributed to the module whose own code produced it: a
    leaf whose output went bad from a good input, a container whose children all stayed finite, or,
    when a leaf's *input* is already bad, the parent that computed that input between modules.
    """
    rec: dict[str, Any] = {}
    per: dict[str, Any] = {}
    _interpret_forward(names, parents, values, ctx, passthrough, rec, per)
    _interpret_backward(names, values, ctx, rec, per)
    return rec, per


def _host_absmax(t: torch.Tensor, known: tuple[torch.Tensor, torch.Tensor] | None = None) -> float:
    """max |t| as a Python float (NaN if any NaN, inf if any inf), from its aminmax when `known`,
    else from a scan; CPU tensors only."""
    mn, mx = known if known is not None else torch.aminmax(t.detach())
    return float(_absmax(float(mn), float(mx)))


def _interpret_forward(
    names: list[str],
    parents: list[int],
    values: dict[str, Any],
    ctx: dict[str, Any],
    passthrough: list[bool] | None,
    rec: dict[str, Any],
    per: dict[str, Any],
) -> None:
    """`interpret`'s forward half, into `rec` and `per`: the largest activation, the first
    non-finite forward value and the module that made it, the per-module maxima. Apart from
    `interpret` to keep it short."""
    import numpy as np

    n_mod = len(names)
    ev_module = np.asarray(ctx["ev_module"], dtype=np.int64)
    if ev_module.size and "fwd_min" in values:
        fmin, fmax = values["fwd_min"].astype(np.float64), values["fwd_max"].astype(np.float64)
        kind = np.asarray(ctx["ev_kind"])
        absmax = _absmax(fmin, fmax)
        bad = ~(np.isfinite(fmin) & np.isfinite(fmax))
        out_ev = kind == OUTPUT
        finite_abs = np.where(bad, -np.inf, absmax)
        if out_ev.any():
            k = int(np.argmax(np.where(out_ev, finite_abs, -np.inf)))
            rec["act_absmax"] = float(finite_abs[k]) if np.isfinite(finite_abs[k]) else None
            rec["act_absmax_layer"] = names[ev_module[k]]
            frac = np.where(out_ev, absmax / np.asarray(ctx["ev_dtype_max"]), 0.0)
            rec["act_range_frac"] = float(np.nanmax(frac)) if np.isfinite(frac).any() else float("inf")
        if bad.any():
            j = int(np.argmax(bad))
            m = int(ev_module[j])
            where = "input" if kind[j] == INPUT else "output"
            # a bad input, or a bad output of a module that cannot make one (dropout, ReLU...),
            # was made by the code around it: its parent's forward
            made_outside = where == "input" or bool(passthrough and passthrough[m])
            layer = names[parents[m]] if made_outside and parents[m] >= 0 else names[m]
            value = "nan" if (np.isnan(fmin[j]) or np.isnan(fmax[j])) else "inf"
            rec["fwd_first_nonfinite"] = {
                "layer": layer,
                "module": names[m],
                "where": where,
                "value": value,
                "index": j,
                "of": int(ev_module.size),
            }
        # per module: inf marks a non-finite output, NaN a module that did not run or was vouched
        # for (finite, not measured)
        per["act_absmax"] = _per_module_max(n_mod, ev_module[out_ev], np.where(bad, np.inf, absmax)[out_ev])
        if ctx.get("rms") and "fwd_rms" in values:
            rms = values["fwd_rms"].astype(np.float64)
            if ctx.get("rms_root") is not None:  # the norms, divided into RMS here
                rms = rms / np.asarray(ctx["rms_root"], dtype=np.float64)
            per["act_rms"] = _per_module_max(n_mod, ev_module[out_ev], np.where(np.isfinite(rms), rms, np.inf))


def _interpret_backward(
    names: list[str], values: dict[str, Any], ctx: dict[str, Any], rec: dict[str, Any], per: dict[str, Any]
) -> None:
    """`interpret`'s backward half, into `rec` and `per`: the first non-finite gradient (and the
    module whose backward made it), the per-module gradient maxima. Apart from `interpret` to keep
    it short."""
    import numpy as np

    n_mod = len(names)
    bw_module = np.asarray(ctx["bw_module"], dtype=np.int64)
    if bw_module.size and "bwd_max" in values:
        bmax = _absmax(values["bwd_min"].astype(np.float64), values["bwd_max"].astype(np.float64))
        bad = ~np.isfinite(bmax)
        if bad.any():
            j = int(np.argmax(bad))
            rec["bwd_first_nonfinite"] = {"layer": names[bw_module[j]], "index": j, "of": int(bw_module.size)}
            if j > 0:
                # the gradient was still finite at the output of the module before it in backward
                # order: it went bad in that module's backward (the consumer of `layer`'s output)
                rec["bwd_first_nonfinite"]["after"] = names[bw_module[j - 1]]
        measured = np.asarray(ctx["bw_kind"]) == OUTPUT
        per["grad_absmax"] = _per_module_max(n_mod, bw_module[measured], np.where(bad, np.inf, bmax)[measured])


def _absmax(mn: Any, mx: Any) -> Any:
    """max |x| from aminmax's two numbers; NaN propagates, an Inf stays Inf."""
    import numpy as np

    with np.errstate(invalid="ignore"):
        return np.maximum(-mn, mx)


def _per_module_max(n_mod: int, modules: Any, values: Any) -> Any:
    import numpy as np

    out = np.full(n_mod, -np.inf)
    np.maximum.at(out, modules, values)
    out[out == -np.inf] = np.nan
    return out
