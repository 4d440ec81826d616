"""Run metadata: what the model, optimizer, scheduler and scaler are, written once at start.

Detectors use it to reason about what the numbers mean (an Adam run vs SGD, the chance-level loss
of a 50k-token vocabulary, bf16 parameters, the GradScaler's configured growth); the report uses it
to say what was watched.
"""

from __future__ import annotations

import math
import platform
import sys
from collections import Counter
from typing import Any

import torch
from torch import nn

from .safe_reads import known_numel, stored_attr


def _scalar_items(d: dict[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for k, v in d.items():
        if isinstance(v, bool) or isinstance(v, (int, float, str)) or v is None:
            out[k] = v
        elif isinstance(v, (tuple, list)) and all(isinstance(x, (int, float)) for x in v) and len(v) <= 8:
            out[k] = list(v)
        elif isinstance(v, torch.Tensor) and v.numel() == 1 and v.device.type == "cpu":
            out[k] = float(v)
    return out


def describe_model(model: nn.Module) -> dict[str, Any]:
    dtypes = Counter(str(p.dtype).replace("torch.", "") for p in model.parameters())
    n_params = sum(known_numel(p) for p in model.parameters())  # a lazy layer's: 0 until its forward
    info: dict[str, Any] = {
        "class": type(model).__name__,
        "params": n_params,
        "trainable_params": sum(known_numel(p) for p in model.parameters() if p.requires_grad),
        "modules": sum(1 for _ in model.modules()),
        "param_dtypes": dict(dtypes),
        "device": str(next(model.parameters()).device) if n_params else "cpu",
    }
    cfg = stored_attr(model, "config")  # a property is never called
    if cfg is not None:
        for key in (
            "model_type",
            "vocab_size",
            "num_labels",
            "n_layer",
            "num_hidden_layers",
            "hidden_size",
            "n_embd",
            "initializer_range",
            "problem_type",
        ):
            v = getattr(cfg, key, None)
            if isinstance(v, (int, float, str)):
                info[key] = v
    last_linear = None
    for m in model.modules():
        if isinstance(m, nn.Linear):
            last_linear = m
    if last_linear is not None:
        info["output_dim"] = last_linear.out_features
    return info


def describe_optimizer(opt: torch.optim.Optimizer) -> dict[str, Any]:
    groups = []
    for g in opt.param_groups:
        d = _scalar_items({k: v for k, v in g.items() if k != "params"})
        d["n_params"] = sum(known_numel(p) for p in g["params"])
        groups.append(d)
    return {"class": type(opt).__name__, "groups": groups}


def describe_scheduler(sched: Any) -> dict[str, Any] | None:
    if sched is None:
        return None
    info = {"class": type(sched).__name__}
    try:
        info.update(_scalar_items(sched.state_dict()))
    except Exception:
        pass
    return info


def describe_scaler(scaler: Any) -> dict[str, Any] | None:
    if scaler is None:
        return None
    info: dict[str, Any] = {"class": type(scaler).__name__}
    for k in ("_init_scale", "_growth_factor", "_backoff_factor", "_growth_interval", "_enabled"):
        v = getattr(scaler, k, None)
        if isinstance(v, (int, float, bool)):
            info[k.lstrip("_")] = v
    return info


def chance_loss(model_info: dict[str, Any], task: str | None) -> float | None:
    """Cross-entropy of a uniform guess, when the task makes the loss a cross-entropy."""
    if task in ("regression",):
        return None
    n = None
    if model_info.get("vocab_size") and task in (None, "pretrain", "sft") and model_info.get("model_type") is not None:
        n = model_info["vocab_size"]
    elif model_info.get("num_labels") and task == "classification":
        n = model_info["num_labels"]
    elif task in ("classification", "pretrain", "sft") and model_info.get("output_dim"):
        n = model_info["output_dim"]
    return math.log(n) if n and n > 1 else None


def describe_run(
    model: nn.Module,
    optimizer: torch.optim.Optimizer,
    scaler: Any,
    scheduler: Any,
    task: str | None,
    extra: dict[str, Any] | None = None,
) -> dict[str, Any]:
    from .._version import __version__

    mi = describe_model(model)
    meta = {
        "format": "lossdoctor.run/1",
        "task": task,
        "model": mi,
        "optimizer": describe_optimizer(optimizer),
        "scheduler": describe_scheduler(scheduler),
        "scaler": describe_scaler(scaler),
        "chance_loss": chance_loss(mi, task),
        "versions": {"lossdoctor": __version__, "torch": torch.__version__, "python": platform.python_version()},
        "argv": list(sys.argv[:8]),
    }
    meta.update(extra or {})
    return meta
