"""Per-tensor L2 norms of many small CPU tensors in a few kernels: one per shape, not one per tensor.

On CPU `torch._foreach_norm` is a loop of one `vector_norm` per tensor, and each costs a dispatch
(~4 us) whatever the tensor holds: on a model of 10,000 small parameter tensors (adapters, experts)
the per-step gradient norms took ~50 ms, and stacking the 10,000 results ~10 ms more
(benchmarks/many_params.py). Tensors of one shape are stacked instead (one copy, a C++ loop) and
normed along their own dimensions (one kernel), in float64 on CPU as `foreach_norm_wide`; the
groups, their order and the permutation back to the caller's order are worked out once, from the
parameters, and reused every step. A tensor's gradient has its parameter's shape and dtype (torch
refuses any other), so the plan made from the parameters fits their gradients; if it does not fit
(a parameter replaced by one of another shape or device), stacking raises and the caller falls
back to the per-tensor path. Large tensors keep `_foreach_norm`: their dispatch cost is negligible
next to the pass over their values, and stacking them would copy a large part of the model.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch


@dataclass(frozen=True)
class GroupLimits:
    """Which tensors are stacked, and how large a stack may be."""

    #: a tensor above this many elements is normed alone: there the pass over its values, not the
    #: dispatch, is the cost (measured default: at 64K fp32 elements a norm takes ~20 us, 5x its dispatch)
    small_numel: int = 1 << 16
    #: elements in one stack, a transient copy (32 MiB in float64; measured default: larger stacks
    #: gain nothing once the per-tensor dispatch is gone)
    stack_numel: int = 1 << 22
    #: fewer tensors than this in all: the plain per-tensor path (nothing to gain, measured default)
    min_tensors: int = 64


LIMITS = GroupLimits()


class GroupedNorms:
    """A norm plan for a fixed list of CPU tensors (parameters, or their gradients, which have the
    same shapes): `norms(ts)` gives one float64 tensor of their L2 norms, in `ts`'s order."""

    def __init__(self, template: list[torch.Tensor], limits: GroupLimits = LIMITS) -> None:
        self.n = len(template)
        by_shape: dict[tuple[int, ...], list[int]] = {}
        large: list[int] = []
        for i, t in enumerate(template):
            if t.numel() > limits.small_numel or t.numel() == 0:
                large.append(i)
            else:
                by_shape.setdefault(tuple(t.shape), []).append(i)
        #: (indices of one stack, the dimensions of its members) in the order the norms come out
        self.chunks: list[tuple[list[int], tuple[int, ...]]] = []
        for shape, idx in by_shape.items():
            per = max(1, limits.stack_numel // max(1, _numel(shape)))
            dims = tuple(range(1, len(shape) + 1))
            for k in range(0, len(idx), per):
                self.chunks.append((idx[k : k + per], dims))
        self.large = large
        order = [i for idx, _ in self.chunks for i in idx] + large
        self.inverse = torch.empty(self.n, dtype=torch.long)
        self.inverse[torch.tensor(order, dtype=torch.long)] = torch.arange(self.n)

    def norms(self, ts: list[torch.Tensor], dtype: torch.dtype = torch.float64) -> torch.Tensor:
        """L2 norm of each of `ts` (the plan's tensors, or tensors of the same shapes) in `dtype`,
        as one tensor; raises (RuntimeError, ValueError) where `ts` does not fit the plan."""
        if len(ts) != self.n:
            raise ValueError("tensors do not match the norm plan")
        parts: list[torch.Tensor] = []
        for idx, dims in self.chunks:
            s = torch.stack([ts[i] for i in idx])
            if s.layout is not torch.strided:  # sparse gradients stack too: not this plan's to read
                raise ValueError("tensors do not match the norm plan")
            parts.append(torch.linalg.vector_norm(s, dim=dims, dtype=dtype) if dims else s.to(dtype).abs())
        if self.large:
            parts.append(torch.stack(list(torch._foreach_norm([ts[i] for i in self.large], 2, dtype=dtype))))
        return torch.cat(parts)[self.inverse]


def _numel(shape: tuple[int, ...]) -> int:
    out = 1
    for s in shape:
        out *= s
    return out


def plan_for(tensors: list[Any], limits: GroupLimits = LIMITS) -> GroupedNorms | None:
    """A plan for these tensors when they are many, plain, dense and all on CPU with a dtype the
    wide norm takes (fp16/bf16/fp32/fp64); else None (the per-tensor path)."""
    if len(tensors) < limits.min_tensors:
        return None
    if not all(
        type(t) in (torch.Tensor, torch.nn.Parameter)
        and t.layout is torch.strided
        and t.device.type == "cpu"
        and t.dtype in _WIDE
        for t in tensors
    ):
        return None
    return GroupedNorms(tensors, limits)


_WIDE = (torch.float32, torch.float16, torch.bfloat16, torch.float64)
