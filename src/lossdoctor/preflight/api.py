"""`lossdoctor.check`: every preflight check, once, before training.

Nothing the user owns is changed: the scheduler is simulated on a shadow copy, the forward pass on
the first batch runs with the RNG state (torch, CUDA, Python, NumPy) and the model's buffers
(BatchNorm statistics) saved and restored, gradients come from `torch.autograd.grad` (never
`.grad`), and the hooks are removed before returning.
"""

from __future__ import annotations

import contextlib
import inspect
import logging
import math
import random
from collections.abc import Iterator, Mapping
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from ..detectors.merge import merge_findings, ordered
from ..findings import Finding, Report
from ..messages import Msg
from .common import BatchView, Context, unwrap_model
from .data import DataCheck
from .init import ActivationProbe, chance, init_findings, unread_note, weight_stats
from .labels import LabelCheck
from .mixed_precision import LOW, config_findings, loss_dtype_finding
from .schedule import schedule_findings

log = logging.getLogger("lossdoctor")

TASKS = (None, "sft", "pretrain", "classification", "regression")


def check(
    model: nn.Module | None = None,
    optimizer: torch.optim.Optimizer | None = None,
    scheduler: Any = None,
    batches: Any = None,
    total_steps: int | None = None,
    task: str | None = None,
    tokenizer: Any = None,
    *,
    scaler: Any = None,
    scheduler_interval: str = "step",
    steps_per_epoch: int | None = None,
    max_batches: int = 16,
    forward: bool = True,
) -> Report:
    """Check a training setup before the first step; returns a `Report` (status, findings, notes).

    Every argument is optional; each check runs when what it needs is given:

    - `batches`: a list of batches or a DataLoader (the first `max_batches` are read: a fresh
      iterator, RNG restored after), or one batch (a dict, a tuple `(x, y)`, a tensor). Label,
      data and (with `model`) init checks need them;
    - `tokenizer`: with a chat template, the prompt/response boundary of SFT samples; decodes the
      supervised text into the evidence;
    - `scheduler` + `total_steps`: the schedule simulated over the planned optimizer steps;
      `scheduler_interval="epoch"` (with `steps_per_epoch`) when the loop steps it per epoch;
    - `scaler`: the GradScaler, for fp16 runs; `forward=False` skips the forward pass.
    """
    steps_per_epoch = _checked_arguments(task, total_steps, scheduler_interval, steps_per_epoch, batches)
    ctx = Context(
        model=model,
        optimizer=optimizer,
        scheduler=scheduler,
        scaler=scaler,
        total_steps=None if total_steps is None else int(total_steps),
        task=task,
        tokenizer=tokenizer,
        scheduler_interval=scheduler_interval,
        steps_per_epoch=steps_per_epoch,
    )
    found: list[Finding] = []
    with preserved_state(model):
        raw = take_batches(batches, max_batches)
        views = [BatchView.parse(b, i) for i, b in enumerate(raw)]
        found += guarded(ctx, "label and data checks", _batch_checks, ctx, views)
        run = _first_forward(ctx, raw[0] if raw else None, views[0] if views else None, forward)
    found += guarded(ctx, "schedule check", schedule_findings, ctx)
    found += _model_checks(ctx, run, batch=0 if raw else None)
    if not raw and batches is None:
        ctx.note(Msg("pcheck.no_batches"))
    findings = ordered(merge_findings([], found))
    # a forward that raised, or a check that failed, is not a pass: never "healthy" on what remains
    failed = any(getattr(n, "key", None) in CHECK_FAILED for n in ctx.notes)
    return Report(findings=findings, steps=0, notes=list(ctx.notes), source="preflight", inconclusive=failed)


def _checked_arguments(
    task: str | None, total_steps: Any, scheduler_interval: str, steps_per_epoch: int | None, batches: Any
) -> int | None:
    """`check`'s arguments checked (a ValueError naming the bad one) before anything runs; returns
    the steps per epoch, taken from `batches`' length when an epoch schedule has none. Apart from
    `check` to keep it short."""
    if task not in TASKS:
        raise ValueError(f"task must be one of {', '.join(t for t in TASKS if t)} (got {task!r})")
    if total_steps is not None and (not isinstance(total_steps, (int, np.integer)) or total_steps <= 0):
        raise ValueError(f"total_steps must be a positive integer (got {total_steps!r})")
    if scheduler_interval not in ("step", "epoch"):
        raise ValueError(f"scheduler_interval must be 'step' or 'epoch' (got {scheduler_interval!r})")
    if scheduler_interval == "epoch" and steps_per_epoch is None:
        steps_per_epoch = _len(batches)
        if steps_per_epoch is None:
            raise ValueError("scheduler_interval='epoch' needs steps_per_epoch (optimizer steps per epoch)")
    return steps_per_epoch


def _model_checks(ctx: Context, run: dict[str, Any], batch: int | None) -> list[Finding]:
    """The init and precision checks, on what the first forward measured (`run`); each runs when
    what it needs was given (the model; the model, optimizer or scaler). Apart from `check` to keep
    it short."""
    found: list[Finding] = []
    model = ctx.model
    if model is not None:
        found += guarded(
            ctx,
            "init check",
            lambda: init_findings(
                ctx, weight_stats(unwrap_model(model)), run.get("growth"), run.get("loss"), run.get("chance")
            ),
        )
        found += guarded(ctx, "init check", _note_unread, ctx, unwrap_model(model))
    if model is not None or ctx.optimizer is not None or ctx.scaler is not None:
        found += guarded(
            ctx,
            "precision check",
            lambda: config_findings(ctx, autocast=run.get("autocast"), grads=run.get("grads"), peak_lr=ctx.peak_lr),
        )
        f = loss_dtype_finding(ctx, run.get("loss_dtype"), run.get("loss"), batch=batch)
        if f is not None:
            found.append(f)
    return found


#: notes saying a check did not run because something raised (the user's forward, or lossdoctor)
CHECK_FAILED = frozenset({"pcheck.forward_failed", "engine.internal_error"})


def forward_error(report: Report) -> str | None:
    """The error of the forward pass `check` ran on the first batch, when it raised."""
    for n in report.notes:
        if isinstance(n, Msg) and n.key == "pcheck.forward_failed":
            return str(n.values.get("error"))
    return None


def guarded(ctx: Context, what: str, fn: Any, *args: Any) -> list[Finding]:
    """Run one area; a bug in lossdoctor becomes a note, never an exception in the user's script."""
    try:
        return list(fn(*args))
    except Exception as e:
        log.debug("preflight %s failed", what, exc_info=True)
        ctx.note(Msg("engine.internal_error", name=what, error=f"{type(e).__name__}: {e}".splitlines()[0]))
        return []


def _note_unread(ctx: Context, model: nn.Module) -> list[Finding]:
    note = unread_note(model)
    if note is not None:
        ctx.note(note)
    return []


def _batch_checks(ctx: Context, views: list[BatchView]) -> list[Finding]:
    if not views:
        return []
    labels, data = LabelCheck(ctx), DataCheck(ctx)
    out: list[Finding] = []
    for v in views:
        out += labels.add(v)
        out += data.add(v)
    return out + labels.finish() + data.finish()


def take_batches(batches: Any, limit: int) -> list[Any]:
    """One batch or an iterable of batches -> a list of at most `limit` batches."""
    if batches is None:
        return []
    if (
        isinstance(batches, (torch.Tensor, str, tuple))
        or isinstance(batches, Mapping)
        or hasattr(batches, "__dataclass_fields__")
    ):
        return [batches]
    out = []
    for b in batches:
        out.append(b)
        if len(out) >= limit:
            break
    return out


def _len(x: Any) -> int | None:
    try:
        return int(len(x)) if x is not None else None
    except TypeError:
        return None


@contextlib.contextmanager
def preserved_state(model: nn.Module | None) -> Iterator[None]:
    """Restore the RNGs and the model's buffers on exit: a check must not change the run."""
    py_state = random.getstate()
    np_state = np.random.get_state()
    devices = []
    if model is not None and torch.cuda.is_available():
        devices = sorted({p.device.index or 0 for p in model.parameters() if p.device.type == "cuda"})
    buffers = {}
    if model is not None:
        buffers = {n: b.detach().clone() for n, b in model.named_buffers()}
    try:
        with torch.random.fork_rng(devices=devices):
            yield
    finally:
        random.setstate(py_state)
        np.random.set_state(np_state)
        if model is not None:
            with torch.no_grad():
                for n, b in model.named_buffers():
                    if n in buffers and b.shape == buffers[n].shape:
                        b.copy_(buffers[n])


def _first_forward(ctx: Context, batch: Any, view: BatchView | None, enabled: bool) -> dict[str, Any]:
    """One forward pass on the first batch, under hooks: activation growth, the initial loss and its
    dtype, the autocast state; gradients too when the resolution check needs them (low-precision
    weights and a non-Adam optimizer)."""
    out: dict[str, Any] = {}
    model = ctx.model
    if model is None or batch is None or not enabled:
        return out
    root = unwrap_model(model)
    out["autocast"] = _autocast_now(root)
    need_grads = _needs_grads(ctx, root)
    probe = ActivationProbe(root)
    try:
        with torch.set_grad_enabled(need_grads):
            result = call_model(model, batch)
            loss, n_classes = _loss(result, view, ctx.task)
            if loss is not None:
                out["loss_dtype"] = loss.dtype
                value = float(loss.detach().float())
                out["loss"] = value if math.isfinite(value) else None
                out["chance"] = chance(n_classes, ctx.task)
                if need_grads and loss.requires_grad:
                    params = [p for p in root.parameters() if p.requires_grad]
                    grads = torch.autograd.grad(loss, params, allow_unused=True)
                    out["grads"] = {p: g for p, g in zip(params, grads) if g is not None}
        if probe.loss_dtype is not None:
            out["loss_dtype"] = probe.loss_dtype
        out["autocast"] = out["autocast"] or probe.autocast
        out["growth"] = probe.growth()
    except Exception as e:  # the user's model may need a batch shape we did not guess
        ctx.note(Msg("pcheck.forward_failed", error=f"{type(e).__name__}: {e}".splitlines()[0]))
        log.debug("preflight forward failed", exc_info=True)
    finally:
        probe.remove()
    return out


def _autocast_now(model: nn.Module) -> torch.dtype | None:
    dev = next((p.device.type for p in model.parameters()), "cpu")
    try:
        return torch.get_autocast_dtype(dev) if torch.is_autocast_enabled(dev) else None
    except Exception:
        return None


def _needs_grads(ctx: Context, model: nn.Module) -> bool:
    opt = ctx.optimizer
    if opt is None or ("eps" in getattr(opt, "defaults", {}) and "betas" in getattr(opt, "defaults", {})):
        return False
    return any(p.dtype in LOW for p in model.parameters() if p.requires_grad)


def call_model(model: nn.Module, batch: Any) -> Any:
    """Call the model the way a training loop most likely does: `model(**batch)` for a dict (keys
    its forward accepts), `model(x)` for an `(x, y)` tuple, `model(t)` for a tensor."""
    device = next((p.device for p in model.parameters()), torch.device("cpu"))
    batch = _to(batch, device, _float_dtype(model))
    if isinstance(batch, Mapping):
        accepted = _accepted(model)
        kwargs = {k: v for k, v in batch.items() if isinstance(v, torch.Tensor) and (accepted is None or k in accepted)}
        return model(**kwargs)
    if isinstance(batch, (tuple, list)):
        inputs = batch[:-1] if len(batch) >= 2 else batch
        return model(*inputs)
    return model(batch)


def _accepted(model: nn.Module) -> set[str] | None:
    try:
        params = inspect.signature(model.forward).parameters.values()
    except (TypeError, ValueError):
        return None
    if any(p.kind == p.VAR_KEYWORD for p in params):
        return None
    return {p.name for p in params}


def _float_dtype(model: nn.Module) -> torch.dtype | None:
    """bf16/fp16 when every floating parameter is: a pure low-precision model is fed inputs of its
    dtype (the loop casts them; outside autocast an fp32 input would not even multiply)."""
    dtypes = {p.dtype for p in model.parameters() if p.is_floating_point()}
    if (
        len(dtypes) == 1
        and next(iter(dtypes)) in LOW
        and not torch.is_autocast_enabled(next(model.parameters()).device.type)
    ):
        return next(iter(dtypes))
    return None


def _to(batch: Any, device: torch.device, dtype: torch.dtype | None = None) -> Any:
    if isinstance(batch, torch.Tensor):
        if dtype is not None and batch.is_floating_point():
            return batch.to(device, dtype)
        return batch.to(device)
    if isinstance(batch, Mapping):
        return {k: _to(v, device, dtype) for k, v in batch.items()}
    if isinstance(batch, (tuple, list)):
        items = [_to(v, device, dtype) for v in batch]
        return tuple(items) if isinstance(batch, tuple) else items
    return batch


def _loss(result: Any, view: BatchView | None, task: str | None) -> tuple[torch.Tensor | None, int | None]:
    """(initial loss, number of classes of its cross-entropy or None)."""
    logits = getattr(result, "logits", None)
    if not isinstance(logits, torch.Tensor):
        logits = (
            result
            if isinstance(result, torch.Tensor)
            else (
                result[0]
                if isinstance(result, (tuple, list)) and result and isinstance(result[0], torch.Tensor)
                else None
            )
        )
    n_classes = int(logits.shape[-1]) if isinstance(logits, torch.Tensor) and logits.dim() >= 2 else None
    loss = getattr(result, "loss", None)
    if isinstance(loss, torch.Tensor) and loss.numel() == 1:
        labels_int = view is not None and view.labels is not None and not view.labels.is_floating_point()
        return loss.reshape(()), n_classes if labels_int else None
    if logits is None or view is None:
        return None, None
    labels = view.labels
    if (
        labels is not None
        and not labels.is_floating_point()
        and logits.dim() >= 2
        and tuple(logits.shape[:-1]) == tuple(labels.shape)
        and task != "regression"
    ):
        labels = labels.to(logits.device)
        if (labels != -100).any():
            # the user's cross-entropy on these logits, in their dtype (autocast upcasts it to fp32)
            return F.cross_entropy(
                logits.reshape(-1, logits.shape[-1]), labels.reshape(-1).long(), ignore_index=-100
            ), n_classes
        return None, None
    targets = next(iter(view.float_targets.values()), None)
    if targets is not None and targets.shape == logits.shape:
        return F.mse_loss(logits, targets.to(logits.device, logits.dtype)), None
    return None, None
