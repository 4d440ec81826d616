"""Optimizer, scheduler and GradScaler signals.

Every step: the LR and weight decay of each parameter group (host floats, free), whether the
optimizer actually stepped (a step pre-hook; GradScaler skips `optimizer.step()` on overflow), and
the loss scale (the scaler's scale tensor, read with the step's one copy, never `.item()`).

On sampled steps only, because they cost a copy of the parameters: the update/parameter ratio
||dW||/||W|| (DeepDiagnosis: healthy ~1e-3, outside [1e-5, 0.1] is a problem), the fraction of
low-precision parameters that did not change although their gradient was non-zero (updates below
bf16/fp16 resolution), and for Adam-family optimizers the fraction of second-moment entries with
sqrt(v_hat) < 10*eps, where the update is eps-dominated. All three are ratios over entries, so a
sample estimates them: beyond `budget` elements every parameter is read with one odd stride
(every k-th entry of every tensor; odd, so that power-of-two rows do not alias onto a few columns).
A whole-model copy on every sampled step cost a 10M-parameter GPT-2 22 ms on CPU, more than the rest
of the step's statistics together; its 1M-entry sample costs 8 ms and put the ratio within 1% of the
whole-model one. (Blocks of contiguous entries would touch fewer cache lines than a stride, but a
tensor shorter than a block period is then over-sampled: LayerNorm weights of 1.0 skewed the ratio
by 27% on that GPT-2.) Beyond `TENSOR_BUDGET` parameter tensors only every k-th tensor is read on a
sampled step: each one read costs a few microseconds of host Python and a kernel launch or three,
which on a 10,000-tensor model made a sampled step ~0.7 s longer (benchmarks/many_params.py).
"""

from __future__ import annotations

import math
from typing import Any

import torch

from .safe_reads import foreach_norm_any, known_numel
from .sharding import local

#: the most parameter tensors a sampled step reads (every k-th one beyond it, in parameter-group
#: order); the ratios are over entries, so a systematic sample of tensors estimates them as the
#: entry stride does. 512 keeps a sampled step's host work under ~5 ms on CPU.
TENSOR_BUDGET = 512

#: sampled tensors on CPU from which the update is measured with one stack per shape (a copy and a
#: few kernels per shape) instead of `_foreach_*` calls, which on CPU run one kernel per tensor
#: (~3-4 us each: ~8 ms a sampled step for 512 tensors, benchmarks/many_params.py); below it the
#: fused calls are as cheap (measured default, as `grouped_norms.GroupLimits.min_tensors`)
GROUP_MIN = 64


def unwrap_optimizer(opt: Any) -> torch.optim.Optimizer:
    """The torch optimizer inside Accelerate / Lightning / DeepSpeed-style wrappers."""
    # Accelerate's AcceleratedOptimizer subclasses torch.optim.Optimizer but is only a shell: its
    # hooks never fire, so unwrap as long as there is an `.optimizer` inside
    for _ in range(5):
        inner = getattr(opt, "optimizer", None)
        if (
            inner is None
            or inner is opt
            or not (isinstance(inner, torch.optim.Optimizer) or hasattr(inner, "optimizer"))
        ):
            break
        opt = inner
    return opt


def scaler_scale(scaler: Any) -> torch.Tensor | None:
    if scaler is None or not getattr(scaler, "is_enabled", lambda: True)():
        return None
    s = getattr(scaler, "_scale", None)
    return s if isinstance(s, torch.Tensor) else None


class OptimizerProbe:
    """The built-in probe of the optimizer (see `signals.probe`): LR, weight decay, whether it
    stepped, and on sampled steps the update ratio, frozen low-precision entries, eps dominance."""

    name = "OptimizerProbe"

    def __init__(self, optimizer: Any, budget: int = 1 << 20) -> None:
        self.opt = unwrap_optimizer(optimizer)
        self.budget = budget
        self.sampled = False
        self.enabled = True
        self.error: BaseException | None = None
        self.stepped = False
        #: the sampled views, their copy before the step (one per tensor, or one stack per shape
        #: group), and those groups (None: per tensor)
        self._snapshot: tuple[list[torch.Tensor], Any, list[list[int]] | None] | None = None
        self._grads: list[torch.Tensor] = []
        self._stats: dict[str, list[torch.Tensor]] = {}
        self._eps_total = 0
        #: each group's LR as the step read it (taken when it starts): a scheduler stepped after the
        #: optimizer, as the HF Trainer's and most loops' are, has already moved to the next LR when
        #: the monitor records the step
        self._step_lrs: list[Any] | None = None
        self._selection: list[tuple[dict[str, Any], Any]] = []
        self._selection_key: tuple[int, ...] | None = None
        self.stride = self._choose_stride()
        self._handles = [self.opt.register_step_pre_hook(self._pre), self.opt.register_step_post_hook(self._post)]

    def _choose_stride(self) -> int:
        """1 (every entry) up to `budget` entries in all, else the odd stride that reads about
        `budget` of them."""
        total = sum(known_numel(local(p)) for _, p in self._sampled_params() if p.requires_grad)
        if total <= self.budget:
            return 1
        return math.ceil(total / self.budget) | 1

    def _sampled_params(self) -> list[tuple[dict[str, Any], Any]]:
        """(group, parameter) pairs read on sampled steps: all of them up to `TENSOR_BUDGET`, else
        every k-th; chosen again when the groups change (`add_param_group`)."""
        groups = self.opt.param_groups
        key = tuple(len(g["params"]) for g in groups)
        if key != self._selection_key:
            pairs = [(g, p) for g in groups for p in g["params"]]
            self._selection = pairs[:: max(1, math.ceil(len(pairs) / TENSOR_BUDGET))]
            self._selection_key = key
        return self._selection

    def _sample(self, t: torch.Tensor | None) -> torch.Tensor | None:
        """Every `stride`-th entry of `t`, as a view (no copy); None when `t` has no flat view."""
        if t is None:
            return None
        t = local(t).detach()
        if self.stride == 1:
            return t
        if not t.is_contiguous():
            return None
        return t.view(-1)[:: self.stride]

    def _pre(self, opt: Any, args: Any, kwargs: Any) -> None:
        self.stepped = True
        try:
            self._step_lrs = [_lr_now(g.get("lr")) for g in self.opt.param_groups]
        except Exception:
            self._step_lrs = None
        if not (self.sampled and self.enabled):
            return
        try:
            self._take_snapshot()
        except Exception as e:  # never break the user's optimizer step
            self.enabled, self.error = False, e

    def _post(self, opt: Any, args: Any, kwargs: Any) -> None:
        if self._snapshot is None or not self.enabled:
            return
        try:
            self._measure_update()
        except Exception as e:
            self.enabled, self.error = False, e
            self._snapshot = None

    def _take_snapshot(self) -> None:
        params, grads = [], []
        for _, p in self._sampled_params():
            if not p.requires_grad or p.grad is None:
                continue
            view, grad = self._sample(p), self._sample(p.grad)  # FSDP2: this rank's shard
            if view is not None and grad is not None and view.numel():
                params.append(view)
                grads.append(grad)
        if params:
            self._grads = grads
            groups = shape_groups(params)
            # one fused copy of the sample, or one stack per shape
            before = torch._foreach_mul(params, 1.0) if groups is None else stack_groups(params, groups)
            self._snapshot = (params, before, groups)

    def _measure_update(self) -> None:
        if self._snapshot is None:  # (the step hook checked already)
            return
        params, before, groups = self._snapshot
        grads, self._grads = self._grads, []  # do not keep gradients alive past the step
        self._snapshot = None
        with torch.no_grad():
            delta: list[torch.Tensor] | tuple[torch.Tensor, ...]
            if groups is None:
                delta = torch._foreach_sub(params, before)
                dn, pn = torch.stack(foreach_norm_any(delta)), torch.stack(foreach_norm_any(params))
                low = [(g, d) for p, d, g in zip(params, delta, grads) if p.dtype in _LOW]
            else:  # the same statistics, one row of a stack per tensor
                after = stack_groups(params, groups)
                delta = [a - b for a, b in zip(after, before)]
                dn, pn = torch.cat([row_norms(d) for d in delta]), torch.cat([row_norms(a) for a in after])
                low = [(torch.stack([grads[i] for i in g]), d) for g, d in zip(groups, delta) if d.dtype in _LOW]
            self._stats["delta_sq"] = [dn.square().sum()]
            self._stats["param_sq"] = [pn.square().sum()]
            if low:
                frozen = [((d == 0) & (g != 0)).sum() for g, d in low]
                moved = [(g != 0).sum() for g, _ in low]
                self._stats["lowp_frozen"] = [torch.stack(frozen).sum()]
                self._stats["lowp_moving"] = [torch.stack(moved).sum()]
            self._eps_stats()

    def _eps_stats(self) -> None:
        """Fraction of Adam's second-moment entries with sqrt(v_hat) < 10*eps, over the sampled
        entries. Entries sharing a threshold (same step, eps, beta2) are concatenated and counted
        with one comparison: two kernels per bucket instead of a pair per parameter."""
        buckets: dict[float, list[torch.Tensor]] = {}
        device_steps: list[tuple[torch.Tensor, torch.Tensor, float, float]] = []
        totals = 0
        for group, p in self._sampled_params():
            eps = group.get("eps")
            betas = group.get("betas")
            if not isinstance(eps, (int, float)) or not betas or not p.requires_grad:
                continue
            st = self.opt.state.get(p, {})
            v = self._sample(st.get("exp_avg_sq"))
            if v is not None and v.is_complex():  # Adam keeps a complex parameter's moments per
                v = torch.view_as_real(v)  # real and imaginary part: read them so
            step = st.get("step")
            if v is None or step is None or v.numel() == 0:
                continue
            totals += v.numel()
            if isinstance(step, torch.Tensor) and step.device.type != "cpu":
                device_steps.append((v, step, float(eps), float(betas[1])))  # capturable Adam
                continue
            thresh = (10.0 * eps) ** 2 * (1 - betas[1] ** float(step))
            buckets.setdefault(thresh, []).append(v)
        above: list[torch.Tensor] = []
        for thresh, vs in buckets.items():
            flat = torch.cat([v.reshape(-1) for v in vs]) if len(vs) > 1 else vs[0].reshape(-1)
            above.append(torch.count_nonzero(flat > thresh))
        for v, step, eps, beta2 in device_steps:  # the step lives on the device: no host read
            thresh = (10.0 * eps) ** 2 * (1 - torch.pow(torch.as_tensor(beta2, device=step.device), step.float()))
            above.append((v > thresh).sum().float())
        if above and totals:
            dev = above[0].device
            self._stats["eps_above_n"] = [torch.stack([a.to(dev).float() for a in above]).sum()]
            self._eps_total = totals  # a host number: no host-to-device copy needed

    def mark_skipped(self) -> None:
        """The step that just ran is to be recorded as skipped (a skip policy undid it), as a
        GradScaler's skip is."""
        self.stepped = False

    def flush(self, packer: Any, step: Any = None) -> dict[str, Any]:
        groups = self.opt.param_groups
        used, self._step_lrs = self._step_lrs, None
        lrs = [_host_float(v) for v in (used if self.stepped and used is not None else [g.get("lr") for g in groups])]
        wds = [_host_float(g.get("weight_decay", 0.0)) for g in groups]
        for k, v in self._stats.items():
            packer.add(k, v)
        ctx = {
            "lrs": lrs,
            "wds": wds,
            "stepped": self.stepped,
            "opt_stats": list(self._stats),
            "eps_total": self._eps_total,
        }
        self._stats = {}
        self._eps_total = 0
        self.stepped = False
        return ctx

    def interpret(self, values: dict[str, Any], ctx: dict[str, Any], rec: dict[str, Any]) -> None:
        """Host side: `skipped` (the optimizer did not step; the monitor tells a skip from a
        `mon.step` without an optimizer step), LR and weight decay, and the sampled ratios."""
        rec["skipped"] = 0 if ctx["stepped"] else 1
        lrs = ctx["lrs"]
        rec["lr"] = lrs[0] if lrs else None
        rec["wd"] = ctx["wds"][0] if ctx["wds"] else None
        if len(set(lrs)) > 1:
            rec["lr_groups"] = lrs
        if "delta_sq" in values and "param_sq" in values:
            d, p = float(values["delta_sq"][0]), float(values["param_sq"][0])
            rec["update_ratio"] = math.sqrt(d / p) if p > 0 and math.isfinite(d) else None
        if "lowp_frozen" in values and "lowp_moving" in values:
            moving = float(values["lowp_moving"][0])
            rec["frozen_frac"] = float(values["lowp_frozen"][0]) / moving if moving > 0 else None
        if "eps_above_n" in values and ctx.get("eps_total"):
            rec["eps_dominated"] = 1.0 - float(values["eps_above_n"][0]) / ctx["eps_total"]

    def remove(self) -> None:
        for h in self._handles:
            h.remove()
        self._handles.clear()


_LOW = (torch.bfloat16, torch.float16)
_NARROW = (torch.float16, torch.bfloat16, torch.float32)


def shape_groups(ts: list[torch.Tensor]) -> list[list[int]] | None:
    """Indices of `ts` by shape and dtype, when there are `GROUP_MIN` or more plain CPU tensors
    (the stacked path); None: the per-tensor `_foreach_*` path."""
    if len(ts) < GROUP_MIN or not all(type(t) is torch.Tensor and t.device.type == "cpu" for t in ts):
        return None
    by: dict[tuple[Any, ...], list[int]] = {}
    for i, t in enumerate(ts):
        by.setdefault((tuple(t.shape), t.dtype), []).append(i)
    return list(by.values())


def stack_groups(ts: list[torch.Tensor], groups: list[list[int]]) -> list[torch.Tensor]:
    """One copy of `ts`: a stack per group of `shape_groups`."""
    return [torch.stack([ts[i] for i in g]) for g in groups]


def row_norms(s: torch.Tensor) -> torch.Tensor:
    """The fp32 L2 norm of each stacked tensor (as `foreach_norm_any` gives them: accumulated in
    fp32 for fp16/bf16/fp32, in the tensor's own precision otherwise)."""
    flat = s.reshape(s.shape[0], -1)
    if s.dtype in _NARROW:
        return torch.linalg.vector_norm(flat, dim=1, dtype=torch.float32)
    return torch.linalg.vector_norm(flat, dim=1).float()


def _lr_now(v: Any) -> Any:
    """An LR as it is now: a tensor LR is updated in place by the scheduler, so a CPU one is copied
    (a device one is not read at all: `_host_float` gives None for it)."""
    if isinstance(v, torch.Tensor):
        return v.detach().clone() if v.device.type == "cpu" else v
    return v


def _host_float(v: Any) -> float | None:
    if v is None:
        return None
    if isinstance(v, torch.Tensor):
        # a tensor LR (capturable optimizers) is usually a CPU scalar; a device one would sync
        return float(v.item()) if v.device.type == "cpu" else None
    try:
        return float(v)
    except (TypeError, ValueError):
        return None
