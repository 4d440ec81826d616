"""Per-parameter gradient norms, captured when backward ends: before clipping, before the
optimizer consumes them, whatever the loop does with `zero_grad` afterwards.

A post-accumulate-grad hook on the parameters (every one up to `HOOKED_PARAMS`, an evenly spaced
subset beyond) queues one callback on the autograd engine; the callback runs once when the
backward pass finishes and takes all per-parameter L2 norms with a single `torch._foreach_norm`
(one pass over the gradients, in fp32 so fp16 gradients do not overflow the norm; on CPU, a few
stacked kernels, `grouped_norms`). Under a GradScaler the gradients are still scaled at that point, so the scale
in effect is captured with them and divided out on the host. With gradient accumulation the last
backward of the step wins: its gradients are the accumulated ones; `backwards` counts the backward
passes of the step (the number of micro-batches), and `should_capture` (set by integrations that
know which micro-batch is the last, e.g. Accelerate's `sync_gradients`) skips the norms of the
others. Sharded gradients (FSDP2 DTensors) are measured on this rank's shard; `listeners` get the
norms of every capture (the distributed probe combines the shards), and `arm()` queues a capture
for gradients that never pass through autograd's accumulation (FSDP2 assigns its shards itself).
On sampled steps the probe also takes every parameter's norm (the per-layer `param_norm` row).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any, cast

import numpy as np
import torch
from torch import nn

from .grouped_norms import plan_for
from .safe_reads import foreach_norm_any, uninitialized
from .sharding import local, local_list

#: Parameters that carry the hook queueing the capture: all of them up to this many, else an evenly
#: spaced subset of about this many. One reached by a backward is enough (the capture takes every
#: parameter's gradient at the end of that backward); the hook is a Python call per parameter and
#: backward (~1 us on CPU: ~10 ms a step on a model of 10,000 tensors, benchmarks/many_params.py).
#: A backward that reaches none of the hooked parameters is captured at `mon.step` instead (after
#: the optimizer step), as gradients made without autograd's accumulation are.
HOOKED_PARAMS = 1024


def hooked_subset(params: list[Any], limit: int = HOOKED_PARAMS) -> list[Any]:
    """The parameters that get the capture hook (see `HOOKED_PARAMS`)."""
    return params if len(params) <= limit else params[:: math.ceil(len(params) / limit)]


def foreach_norm_fp32(grads: list[torch.Tensor]) -> list[torch.Tensor]:
    """Per-tensor L2 norms in fp32 with one fused call (fp16 norms overflow, bf16 ones are coarse)."""
    return foreach_norm_any(grads)  # float64 and complex gradients too


def foreach_norm_wide(grads: list[torch.Tensor]) -> list[torch.Tensor]:
    """Per-tensor L2 norms that tell a non-finite gradient from a huge finite one. On CPU they are
    accumulated in float64, where the norm of finite fp32 values cannot overflow (fp32's largest
    value squared is ~1e77): an fp32 norm of a gradient of 1e20s is inf although every value is
    finite, and the run was then said to have non-finite gradients one step early, a step whose
    replay could not reproduce them (called nondeterministic). On other devices the fp32 norms are
    kept: a float64 reduction may leave the fused kernel there, and an overflowing norm is rare."""
    if grads and grads[0].device.type == "cpu" and all(g.dtype in _WIDENED for g in grads):
        try:
            return list(torch._foreach_norm(grads, 2, dtype=torch.float64))
        except (TypeError, RuntimeError):
            pass
    return foreach_norm_fp32(grads)


_WIDENED = (torch.float32, torch.float16, torch.bfloat16, torch.float64)
_PLAIN = {torch.Tensor}  # the type of every gradient the grouped path reads


class GradProbe:
    """The built-in probe of gradient (and, on sampled steps, parameter) norms; see `signals.probe`."""

    name = "GradProbe"

    def __init__(self, model: nn.Module, module_names: list[str], scale_fn: Callable[[], torch.Tensor | None]) -> None:
        module_pos = {n: i for i, n in enumerate(module_names)}
        self.n_modules = len(module_names)
        self.names: list[str] = []
        self.params: list[nn.Parameter] = []
        self.owner: list[int] = []  # index of the module that owns each parameter
        for name, p in model.named_parameters():
            if not p.requires_grad:
                continue
            self.names.append(name)
            self.params.append(p)
            mod = name.rsplit(".", 1)[0] if "." in name else "<model>"
            self.owner.append(module_pos.get(mod, module_pos.get("<model>", 0)))
        self._scale_fn = scale_fn
        self._queued = False
        self.enabled = True
        self.error: BaseException | None = None
        self._captured: tuple[list[int], Any, torch.Tensor | None] | None = None
        self.fresh = False  # a capture happened since the last flush
        self.backwards = 0  # backward passes since the last flush (micro-batches of the step)
        self.should_capture: Callable[[], bool] | None = None
        #: called with (parameter indices, their norms) at every capture
        self.listeners: list[Callable[[Any, list[torch.Tensor]], None]] = []
        self._handles = []
        self._lazy: list[nn.Parameter] = []  # a lazy module's parameters, hooked once materialised
        if hasattr(torch.Tensor, "register_post_accumulate_grad_hook"):
            self._hook_params(hooked_subset(self.params))
            if self._lazy:
                self._handles.append(model.register_forward_hook(self._hook_materialised))
        self._owners = np.asarray(self.owner, dtype=np.int64)  # module of each parameter, for the host side
        #: the grouped norm plan of the parameters (`grouped_norms`), made at the first capture on
        #: CPU (lazy parameters have their shapes then); False: none applies, per-tensor norms
        self._plan: Any = None
        self._all_idx = np.arange(len(self.params))  # grad_idx when every parameter has a gradient

    def _hook_params(self, params: list[nn.Parameter]) -> None:
        self._lazy = []
        for p in params:
            if uninitialized(p):
                self._lazy.append(p)  # no hook can be put on it before its first forward
            else:
                self._handles.append(p.register_post_accumulate_grad_hook(self.arm))

    def _hook_materialised(self, *_: Any) -> None:
        """After a forward (the root's hook): hook the lazy parameters it materialised."""
        if self._lazy and not torch.compiler.is_compiling():
            try:
                self._hook_params(self._lazy)
            except Exception as e:
                self._fail(e)

    def arm(self, p: torch.Tensor | None = None) -> None:
        """Queue one capture at the end of the running backward: the hook on every parameter, and
        what probes call whose gradients do not pass through autograd's accumulation (FSDP2's
        sharded parameters). Several calls in one backward queue one capture."""
        if self._queued or not self.enabled:
            return
        try:  # runs inside the user's loss.backward(): nothing may escape
            self._queued = True
            torch.autograd.Variable._execution_engine.queue_callback(self._capture)
        except Exception as e:
            self._queued = False
            self._fail(e)

    def _capture(self) -> None:
        try:  # runs at the end of the user's loss.backward(): nothing may escape
            self._queued = False
            if not self.enabled:
                return
            self.backwards += 1
            if self.should_capture is None or self.should_capture():
                self.capture()
        except Exception as e:
            self._fail(e)

    def _fail(self, e: BaseException) -> None:
        """Disable the capture and remember why; the monitor logs it once at the next step."""
        self.enabled = False
        if self.error is None:
            self.error = e

    def capture(self) -> None:
        """Take per-parameter norms of the gradients as they are now."""
        idx: Any = self._all_idx
        kept: Any = self._grouped()
        if kept is None:
            idx, grads = self._current_grads()
            if not grads:
                return
            norms = foreach_norm_wide(grads)
            # one tensor kept until the step is collected, not one per parameter (see the tracer's
            # slots: small tensors alive across the optimizer step fragment the heap); a model spread
            # over several devices keeps its list
            try:
                kept = torch.stack(norms)
            except RuntimeError:
                kept = norms
        scale = self._scale_fn()
        for listener in self.listeners:  # the stacked norms: a listener need not stack them again
            listener(idx, kept)
        self._captured = (idx, kept, None if scale is None else scale.detach().clone())
        self.fresh = True

    def _grouped(self) -> torch.Tensor | None:
        """Every parameter's gradient norm (float64) in a few stacked kernels, when every parameter
        has a plain CPU gradient (`grouped_norms`); None: use the per-tensor path.

        The only check in Python is one pass of `type` (C-level `map`): a gradient that is None or a
        tensor subclass (a DTensor shard) takes the per-tensor path this step. The stacks check the
        rest in C++ (a device, shape or sparse layout that does not fit the plan raises: per tensor
        from then on). A per-gradient check of its layout and `requires_grad` in Python cost ~2 ms a
        step on 10,000 tensors; a gradient that requires grad (`create_graph=True`) is read under
        `no_grad`, as the per-tensor path reads its detached copy."""
        if self._plan is False or not self.params:
            return None
        grads = [p.grad for p in self.params]
        if set(map(type, grads)) != _PLAIN:
            return None
        try:
            if self._plan is None:
                self._plan = plan_for(self.params) or False
            if not self._plan:
                return None
            with torch.no_grad():
                return self._plan.norms(grads)
        except (RuntimeError, ValueError, TypeError):  # a parameter replaced since: per tensor from now on
            self._plan = False
            return None

    def _grouped_param_norms(self) -> torch.Tensor | None:
        """Every parameter's norm (float32) by the gradients' plan, made at a capture; None: the
        per-tensor path (no plan, or a parameter that no longer fits it)."""
        if not self._plan or self.params[0].device.type != "cpu":
            return None
        try:
            with torch.no_grad():
                return self._plan.norms(self.params, dtype=torch.float32)
        except (RuntimeError, ValueError, TypeError):
            return None

    def _current_grads(self) -> tuple[Any, list[torch.Tensor]]:
        """Indices and (local, detached) gradients of the parameters that have a dense gradient.

        The common case -- every parameter has a dense, unsharded gradient -- is one list
        comprehension and one check: a model with 10,000 parameter tensors pays ~1 ms here, not
        the ~25 ms of a per-parameter loop with its branches (benchmarks/many_params.py)."""
        grads = [p.grad for p in self.params]
        if all(type(g) is torch.Tensor and g.layout is torch.strided and not g.requires_grad for g in grads):
            # no detach needed: nothing records a graph through them; and none is None (checked just above)
            return self._all_idx, cast(list[torch.Tensor], grads)
        idx, kept = [], []
        for i, g in enumerate(grads):
            if g is not None and not g.is_sparse:
                idx.append(i)
                kept.append(local(g.detach()))
        return idx, kept

    def flush(self, packer: Any, step: Any = None) -> dict[str, Any]:
        if step is not None and step.sampled:
            norms: torch.Tensor | list[torch.Tensor] | None = self._grouped_param_norms()
            params = local_list(self.params) if norms is None else None
            if params:
                with torch.no_grad():
                    norms = foreach_norm_any(params)
            if norms is not None:
                packer.add("param_norm_pp", norms)
        if not self.fresh and self.enabled:
            try:
                self.capture()  # no hook fired (grads from autograd.grad, replaced params...)
            except Exception as e:
                self._fail(e)
        ctx: dict[str, Any] = {"grad_idx": None, "backwards": self.backwards}
        self.backwards = 0
        if self.fresh and self._captured is not None:
            idx, norms, scale = self._captured
            packer.add("param_grad_norm", norms)
            if isinstance(norms, torch.Tensor) and norms.dtype == torch.float64:
                # the packer sends float32, where a huge finite norm reads inf: say which were not finite
                packer.add("param_grad_bad", (~torch.isfinite(norms)).to(torch.float32))
            if scale is not None:
                packer.add("grad_scale", scale)
            ctx["grad_idx"] = idx
        self.fresh = False
        self._captured = None
        return ctx

    def interpret(self, values: dict[str, np.ndarray], ctx: dict[str, Any], rec: Any) -> None:
        """Host side: the total gradient norm (the loss scale divided out), which parameters went
        non-finite, the total parameter norm; per module, both norms into `rec.layers`."""
        if ctx.get("grad_idx") is not None and "param_grad_norm" in values:
            norms = values["param_grad_norm"].astype(np.float64)
            if "grad_scale" in values:
                norms = norms / float(values["grad_scale"][0])
            idx = np.asarray(ctx["grad_idx"])
            with np.errstate(over="ignore", invalid="ignore"):
                rec["grad_norm"] = float(np.sqrt(np.sum(norms * norms)))
            bad = values["param_grad_bad"] > 0 if "param_grad_bad" in values else ~np.isfinite(norms)
            rec["grad_nonfinite"] = int(bad.sum())
            if bad.any():
                rec["nonfinite_params"] = [self.names[i] for i in idx[bad][:8]]
            rec.layers["param_grad_norm"] = per_module_norm(self.n_modules, self._owners[idx], norms)
        if "param_norm_pp" in values:
            pn = values["param_norm_pp"].astype(np.float64)
            rec["param_norm"] = float(np.sqrt(np.sum(pn * pn)))
            rec.layers["param_norm"] = per_module_norm(self.n_modules, self._owners, pn)
        if ctx.get("backwards"):
            rec["accum_steps"] = ctx["backwards"]

    def remove(self) -> None:
        for h in self._handles:
            h.remove()
        self._handles.clear()


def per_module_norm(n_modules: int, owners: np.ndarray, norms: np.ndarray) -> np.ndarray:
    """L2 norm per owning module of per-parameter norms, in the per-layer convention (the
    tracer's): inf marks a non-finite value, NaN a module without parameters (not measured)."""
    sq = np.zeros(n_modules)
    with np.errstate(over="ignore", invalid="ignore"):
        np.add.at(sq, owners, norms * norms)
        out = np.sqrt(sq)
    has = np.zeros(n_modules, dtype=bool)
    has[owners] = True
    return np.where(has, np.where(np.isfinite(out), out, np.inf), np.nan)
