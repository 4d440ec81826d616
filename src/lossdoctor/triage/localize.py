"""`lossdoctor.localize(model, batch, loss_fn)`: the first bad layer, op and samples of one batch.

One forward+backward under the op tracer names the first operation (forward, then backward) whose
output went non-finite or overflowed, with its module and input/output statistics; a scan of the
batch names samples holding NaN/Inf; bisection over the batch names the samples that break the
step. The model is left exactly as it was: parameters are not stepped, the gradients the caller
had are put back (the same tensors), buffers (BatchNorm statistics) and the RNG are restored.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import torch
from torch import nn

from ..findings import Finding, FixLike, as_fix, as_fixes
from ..signals.packing import packed_examples
from ..signals.safe_reads import float_like, unreadable
from .batches import batch_size, named_tensors
from .classify import Verdict, classify
from .optrace import OpEvent, OpTracer, leaf_names
from .replay import grads_finite, scalar_loss
from .samples import SampleSearch, bisect, bisect_examples, examples_named
from .state import RngState

LossFn = Callable[[nn.Module, Any], torch.Tensor]


@dataclass
class Trace:
    """What one traced forward+backward saw."""

    loss: float
    grads_finite: bool
    forward: OpEvent | None
    backward: OpEvent | None
    near_overflow: OpEvent | None
    ops: dict[str, int]
    seconds: float
    error: str | None = None

    @property
    def nonfinite(self) -> bool:
        return (
            not math.isfinite(self.loss)
            or not self.grads_finite
            or self.forward is not None
            or self.backward is not None
        )

    def to_dict(self) -> dict[str, Any]:
        return {
            "loss": self.loss,
            "grads_finite": self.grads_finite,
            "forward": self.forward.to_dict() if self.forward else None,
            "backward": self.backward.to_dict() if self.backward else None,
            "near_overflow": self.near_overflow.to_dict() if self.near_overflow else None,
            "ops": dict(self.ops),
            "seconds": round(self.seconds, 4),
            "error": self.error,
        }


def nonfinite_samples(batch: Any) -> dict[str, list[int]]:
    """{batch key: samples holding NaN/Inf} for the floating tensors of a batch."""
    n = batch_size(batch)
    out: dict[str, list[int]] = {}
    with torch.no_grad():
        for key, t in named_tensors(batch):
            if not float_like(t) or unreadable(t, complex_ok=True) or t.numel() == 0:
                continue
            if t.dim() >= 1 and n is not None and int(t.shape[0]) == n:
                rows = (~torch.isfinite(t.detach())).reshape(n, -1).any(dim=1)
                bad = torch.nonzero(rows).flatten().tolist()
            else:
                bad = [] if bool(torch.isfinite(t).all()) else [-1]
            if bad:
                out[key] = [int(i) for i in bad[:64]]
    return out


class Preserve:
    """Put back the caller's gradients (same tensor objects), buffers and RNG."""

    def __init__(self, model: nn.Module) -> None:
        self.model = model

    def __enter__(self) -> Preserve:
        self.grads = [(p, p.grad) for p in self.model.parameters()]
        for p, _ in self.grads:
            p.grad = None
        self.bufs = [(b, b.detach().clone()) for b in self.model.buffers()]
        self.rng = RngState.capture()
        return self

    def reset(self) -> None:
        """Between probes: no gradients, buffers as they were."""
        for p, _ in self.grads:
            p.grad = None
        with torch.no_grad():
            for b, v in self.bufs:
                b.copy_(v)

    def __exit__(self, *exc: Any) -> None:
        self.reset()
        for p, g in self.grads:
            p.grad = g
        self.rng.restore()


def trace_once(model: nn.Module, batch: Any, loss_fn: LossFn, *, rng: Any = None) -> Trace:
    """Forward+backward of `batch` under the op tracer. Leaves gradients on the model (the caller
    clears them)."""
    t0 = time.perf_counter()
    if rng is not None:
        rng.apply()
    tracer = OpTracer(model, leaves=leaf_names(model, batch), batch_size=batch_size(batch))
    with tracer:
        loss = scalar_loss(loss_fn(model, batch), "the loss function")
        if loss.requires_grad:
            loss.backward()
    value = float(loss.detach().float())
    ok = grads_finite([p for p in model.parameters() if p.requires_grad])
    return Trace(
        loss=value,
        grads_finite=ok,
        forward=tracer.origin["forward"],
        backward=tracer.origin["backward"],
        near_overflow=tracer.near["forward"] or tracer.near["backward"],
        ops=dict(tracer.ops),
        seconds=time.perf_counter() - t0,
        error=None if tracer.error is None else f"{type(tracer.error).__name__}: {tracer.error}",
    )


def probe_nonfinite(model: nn.Module, sub: Any, loss_fn: LossFn, reset: Callable[[], None]) -> bool:
    """Does this (sub-)batch make the loss or a gradient non-finite on the model's state?"""
    try:
        loss = scalar_loss(loss_fn(model, sub), "the loss function")
        if not math.isfinite(float(loss.detach().float())):
            return True
        if loss.requires_grad:
            loss.backward()
            return not grads_finite([p for p in model.parameters() if p.requires_grad])
        return False
    finally:
        reset()


@dataclass
class Localization:
    """The answer of `localize` (and of the incident flow's localisation step)."""

    cause: str | None
    layer: str | None
    op: str | None
    phase: str | None
    samples: list[int] | None
    trace: Trace
    batch_nonfinite: dict[str, list[int]]
    sample_search: SampleSearch | None
    evidence: list[str] = field(default_factory=list)
    fixes: list[FixLike] = field(default_factory=list)
    confidence: float = 0.0
    seconds: float = 0.0
    code: dict[str, Any] | None = None  # the user's file, line and function of the first bad op

    @property
    def found(self) -> bool:
        return self.cause is not None

    def finding(self, step: int | None = None, severity: str = "critical") -> Finding | None:
        if self.cause is None:
            return None
        return Finding(
            rule="triage.localize",
            cause=self.cause,
            symptom="nonfinite",
            severity=severity,
            confidence=self.confidence,
            step=step,
            batch=step,
            layer=self.layer,
            op=self.op,
            samples=self.samples,
            evidence=list(self.evidence),
            fixes=as_fixes(self.fixes),
            code=self.code,
            examples=self.sample_search.examples if self.sample_search else None,
        )

    def to_dict(self) -> dict[str, Any]:
        return {
            "cause": self.cause,
            "layer": self.layer,
            "op": self.op,
            "phase": self.phase,
            "samples": self.samples,
            "code": self.code,
            "confidence": self.confidence,
            "evidence": self.evidence,
            "fixes": [str(as_fix(x)) for x in self.fixes],
            "trace": self.trace.to_dict(),
            "batch_nonfinite": self.batch_nonfinite,
            "sample_search": self.sample_search.to_dict() if self.sample_search else None,
            "seconds": round(self.seconds, 4),
        }

    def __str__(self) -> str:
        if self.cause is None:
            return "lossdoctor.localize: forward and backward stayed finite on this batch"
        code = f"{self.code['file']}:{self.code['line']}" if self.code else None
        where = ", ".join(
            x
            for x in (
                f"layer {self.layer}" if self.layer else None,
                f"op {self.op}" if self.op else None,
                f"at {code}" if code else None,
                f"samples {self.samples}" if self.samples else None,
            )
            if x
        )
        return f"{self.cause} at {where}: " + "; ".join(self.evidence[:2])


def min_group(model: nn.Module) -> tuple[int, str]:
    """Fewest samples a probe of this model needs, and why: a BatchNorm in train mode cannot
    normalise a single sample (one value per channel)."""
    for name, m in model.named_modules():
        if isinstance(m, nn.modules.batchnorm._BatchNorm) and m.training:
            return 2, f"{name or type(m).__name__} is a {type(m).__name__} in train mode"
    return 1, ""


def localize_on(
    model: nn.Module,
    batch: Any,
    loss_fn: LossFn,
    *,
    rng: Any = None,
    live: dict | None = None,
    find_samples: bool = True,
    preserve: Preserve | None = None,
) -> Localization:
    """Trace, scan and bisect on the model's current state (shared by `localize` and triage).
    `preserve.reset` is called between probes; the caller owns restoring the model."""
    t0 = time.perf_counter()
    reset = preserve.reset if preserve is not None else (lambda: None)
    trace = trace_once(model, batch, loss_fn, rng=rng)
    reset()
    bad_batch = nonfinite_samples(batch)
    search = None
    n = batch_size(batch)

    def bad(sub: Any) -> bool:
        if rng is not None:
            rng.apply()
        return probe_nonfinite(model, sub, loss_fn, reset)

    examples = packed_examples(batch) if find_samples and trace.nonfinite and hasattr(batch, "get") else None
    if examples and sum(e.length >= 2 for e in examples) > 1:  # packed rows: search their examples
        search = bisect_examples(batch, examples, bad)
    elif find_samples and trace.nonfinite and n and n > 1:
        k, why = min_group(model)
        search = bisect(batch, n, bad, min_group=k, why=why)
    elif find_samples and trace.nonfinite and n == 1:
        search = SampleSearch(samples=[0], method="single sample")
    v: Verdict = classify(
        trace.forward,
        trace.backward,
        trace.near_overflow,
        bad_batch,
        search,
        live or {},
        loss=trace.loss,
        grads_ok=trace.grads_finite,
    )
    if v.cause is not None and search is not None and search.examples:
        v.evidence.append(examples_named(search))
    return Localization(
        cause=v.cause,
        layer=v.layer,
        op=v.op,
        phase=v.phase,
        samples=v.samples,
        trace=trace,
        batch_nonfinite=bad_batch,
        sample_search=search,
        evidence=v.evidence,
        fixes=v.fixes,
        confidence=v.confidence,
        seconds=time.perf_counter() - t0,
        code=v.code,
    )


def localize(model: nn.Module, batch: Any, loss_fn: LossFn, *, find_samples: bool = True) -> Localization:
    """One forward+backward of `batch` under full op-level tracing.

    `loss_fn(model, batch) -> loss` computes the loss the way the training step does (including any
    autocast). Returns the first operation whose output went non-finite or overflowed (forward
    first, then backward), its layer (`model.named_modules()` name) and the samples of the batch
    that cause it. The model's parameters, gradients, buffers and the RNG are left as they were.
    """
    from .state import StepRng

    with Preserve(model) as keep:
        dev = next((p.device for p in model.parameters()), None)
        rng = StepRng.capture(dev)  # every probe draws the same dropout masks as the traced run
        return localize_on(model, batch, loss_fn, rng=rng, find_samples=find_samples, preserve=keep)
