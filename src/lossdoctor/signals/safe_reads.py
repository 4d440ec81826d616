"""Reading the user's objects without changing them, and telling which tensors can be read at all.

- `stored_attr(obj, name)`: an attribute as it is stored, never computed. `module.weight` on a
  parametrized module (`torch.nn.utils.parametrizations.spectral_norm`, `weight_norm`, any
  `register_parametrization`) runs the parametrization: spectral_norm then takes a power-iteration
  step in training mode (its u/v buffers change and the run diverges from an unwatched one). A
  property may compute too. So the monitor reads the module's own dictionaries (parameters,
  buffers, submodules, instance attributes) and a class attribute only when it is not a
  descriptor; a method is bound (binding runs no user code). What is computed reads as absent.
  The old hook APIs (`torch.nn.utils.spectral_norm`, `weight_norm`) store the last computed
  weight as a plain attribute: reading it is free.
- `parametrized(module)`: names of the module's parametrized tensors (said in a note, not read).
- `unreadable(t)`: why a tensor's values cannot be read by a batch check (meta, sparse, nested,
  a DTensor or other tensor subclass, quantized, complex), or None.
- `norm_fp32` / `foreach_norm_any`: L2 norms as fp32 for any dtype: fp16/bf16/fp32 accumulate
  in fp32 (one fused call, as before); float64 and complex compute in their own precision and
  cast the (real) result, where `dtype=torch.float32` would raise.
"""

from __future__ import annotations

import inspect
import types
from typing import Any

import torch
from torch import nn

_MISSING = object()
_NARROW = (torch.float16, torch.bfloat16, torch.float32)


def stored_attr(obj: Any, name: str, default: Any = None) -> Any:
    """`getattr(obj, name, default)` without running a property, a parametrization or any other
    descriptor; see the module docstring."""
    d = _own_dict(obj)
    if isinstance(obj, nn.Module):
        if name in parametrized(obj):
            return default
        for store in ("_parameters", "_buffers", "_modules"):
            s = d.get(store)
            if isinstance(s, dict) and name in s:
                return s[name]
    if name in d:
        return d[name]
    try:
        raw = inspect.getattr_static(obj, name)
    except AttributeError:
        return default
    if isinstance(raw, (types.FunctionType, staticmethod, classmethod, types.BuiltinFunctionType)):
        return getattr(obj, name, default)  # binding a method runs no code of the user's
    if hasattr(type(raw), "__get__"):  # property, cached_property, other descriptors: computed
        return default
    return raw


def _own_dict(obj: Any) -> dict[str, Any]:
    try:
        d = object.__getattribute__(obj, "__dict__")
    except AttributeError:
        return {}
    return d if isinstance(d, dict) else {}


def parametrized(module: nn.Module) -> tuple[str, ...]:
    """Names of the module's tensors computed by `torch.nn.utils.parametrize` on every access."""
    p = _own_dict(module).get("_modules", {}).get("parametrizations")
    if isinstance(p, nn.ModuleDict):
        return tuple(p.keys())
    return ()


def uninitialized(t: Any) -> bool:
    """A lazy module's parameter before its first forward (no shape, no data; any op raises)."""
    return nn.parameter.is_lazy(t)  # an UninitializedParameter or UninitializedBuffer


def known_numel(t: torch.Tensor) -> int:
    """`t.numel()`, 0 for an uninitialised (lazy) parameter."""
    return 0 if uninitialized(t) else t.numel()


def unreadable(t: torch.Tensor, *, complex_ok: bool = False) -> str | None:
    """Why the values of `t` cannot be read by a check on the host, or None when they can
    (`complex_ok`: a complex tensor counts as readable, for a copy or a real view)."""
    if type(t) not in (torch.Tensor, nn.Parameter) and not isinstance(t, nn.Parameter):
        return type(t).__name__  # DTensor, FakeTensor, functorch wrappers: their own semantics
    if t.device.type == "meta":
        return "meta"
    if t.layout != torch.strided:
        return "sparse" if t.is_sparse or t.layout in _SPARSE else str(t.layout).replace("torch.", "")
    if getattr(t, "is_nested", False):
        return "nested"
    if t.is_quantized:
        return "quantized"
    if t.is_complex() and not complex_ok:
        return "complex"
    return None


_SPARSE = tuple(
    getattr(torch, n)
    for n in ("sparse_coo", "sparse_csr", "sparse_csc", "sparse_bsr", "sparse_bsc")
    if hasattr(torch, n)
)


def real_view(t: torch.Tensor) -> torch.Tensor:
    """A complex tensor as its real and imaginary parts (a view, `view_as_real`): its min/max then
    say whether any part is non-finite and how large the parts are; any other tensor as it is."""
    return torch.view_as_real(t.resolve_conj()) if t.is_complex() else t


def float_like(t: torch.Tensor) -> bool:
    """Floating or complex: values that can be NaN/Inf."""
    return t.is_floating_point() or t.is_complex()


def norm_fp32(t: torch.Tensor) -> torch.Tensor:
    """L2 norm of `t` as an fp32 scalar tensor, whatever its dtype."""
    if t.dtype in _NARROW:
        return torch.linalg.vector_norm(t, dtype=torch.float32)
    return torch.linalg.vector_norm(t).float()


def foreach_norm_any(ts: list[torch.Tensor] | tuple[torch.Tensor, ...]) -> list[torch.Tensor]:
    """Per-tensor fp32 norms: one fused call when every tensor is fp16/bf16/fp32 (the usual case,
    unchanged), else one call per float64/complex tensor."""
    if all(t.dtype in _NARROW for t in ts):
        try:
            return list(torch._foreach_norm(ts, 2, dtype=torch.float32))
        except (TypeError, RuntimeError):  # older torch: no dtype argument
            pass
    return [norm_fp32(t) for t in ts]
