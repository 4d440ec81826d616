"""From what the op tracer, the batch scan and the sample search saw, to a cause with evidence and
fixes. Pure reasoning over small records; no torch.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from ..detectors.nonfinite import ATTENTION
from ..findings import Fix, FixLike
from ..messages import Msg
from .optrace import LOSS_OPS, SOFTMAX_OPS, OpEvent, base_name

MATMUL_OPS = frozenset({"mm", "bmm", "addmm", "baddbmm", "matmul", "addbmm", "linear", "einsum", "_scaled_mm"})
DTYPE_MAX = {"float16": 65504.0, "bfloat16": 3.39e38, "float32": 3.40e38, "float64": 1.80e308}


@dataclass
class Verdict:
    cause: str | None = None
    layer: str | None = None
    op: str | None = None
    phase: str | None = None
    samples: list[int] | None = None
    confidence: float = 0.0
    evidence: list[str] = field(default_factory=list)
    fixes: list[FixLike] = field(default_factory=list)
    code: dict[str, Any] | None = None  # the user's file and line of the origin op


def is_attention(ev: OpEvent | None) -> bool:
    if ev is None:
        return False
    return bool((ev.module and ATTENTION.search(ev.module)) or (ev.module_type and ATTENTION.search(ev.module_type)))


def _where(ev: OpEvent) -> str:
    return ev.module if ev.module else Msg("triage.loss_code")


def _ids(ids: list[int]) -> Msg:
    """Sample ids as the records show them: [3, 7]."""
    return Msg("triage.ids", ids=list(ids))


def _samples(search: Any, ev: OpEvent | None, bad_batch: dict[str, list[int]]) -> list[int] | None:
    if bad_batch:
        s = sorted({i for v in bad_batch.values() for i in v if i >= 0})
        if s:
            return s
    if search is not None and search.samples is not None:
        return None if _everyone(search, getattr(search, "size", None)) else list(search.samples)
    if ev is not None and ev.samples:
        return list(ev.samples)
    return None


def _everyone(search: Any, size: int | None) -> bool:
    """Most of the batch fails on its own: not a question of particular samples."""
    return (
        search is not None
        and search.samples is not None
        and size is not None
        and size > 2
        and len(search.samples) > size // 2
    )


def _sample_sentence(search: Any, samples: list[int] | None) -> str | None:
    if search is None or search.samples is None:
        return None
    if getattr(search, "size", None) and _everyone(search, search.size):
        return Msg("triage.samples.everyone", n=len(search.samples), size=search.size)
    if search.together:
        return Msg("triage.samples.together", ids=_ids(search.samples[:16]), probes=search.probes)
    return Msg("triage.samples.isolated", probes=search.probes, ids=_ids(search.samples[:16]))


def classify(
    fwd: OpEvent | None,
    bwd: OpEvent | None,
    near: OpEvent | None,
    bad_batch: dict[str, list[int]],
    search: Any,
    live: dict[str, Any],
    *,
    loss: float,
    grads_ok: bool,
) -> Verdict:
    """The cause of a non-finite step: bad data in the batch first; else the first non-finite
    forward op, explained by the first op family of `FORWARD_FAMILIES` it belongs to; else the first
    non-finite backward op. `near` is the last op before it (context)."""
    v = Verdict()
    origin = fwd or bwd
    v.samples = _samples(search, origin, bad_batch)
    if origin is not None:
        v.layer, v.op, v.phase, v.code = origin.module, origin.op, origin.phase, origin.code
    sample_line = _sample_sentence(search, v.samples)
    if bad_batch:
        return _bad_data(v, bad_batch, fwd, sample_line)
    if fwd is None and bwd is None:
        return _untraced(v, near, loss=loss, grads_ok=grads_ok)
    if fwd is not None:
        op = ForwardOp.of(fwd, live, v.samples)
        family = next(f for f in FORWARD_FAMILIES if f.matches(op))
        v.cause = family.cause
        v.confidence = family.confidence(op) if callable(family.confidence) else family.confidence
        family.explain(op, v)
        v.evidence.append(fwd.describe())
    else:
        assert bwd is not None
        _explain_backward(v, bwd)
    if sample_line:
        v.evidence.append(sample_line)
    if near is not None and near is not fwd:
        v.evidence.append(Msg("triage.earlier", what=near.describe()))
    return v


def _bad_data(v: Verdict, bad_batch: dict[str, list[int]], fwd: OpEvent | None, sample_line: str | None) -> Verdict:
    keys = [f"'{k}'" for k in bad_batch]
    v.cause, v.confidence = "nonfinite_data", 0.97
    v.evidence.append(Msg("triage.data.nonfinite", keys=keys, samples=_ids(v.samples[:16]) if v.samples else "?"))
    if fwd is not None:
        v.evidence.append(fwd.describe())
    if sample_line:
        v.evidence.append(sample_line)
    v.fixes.append(Fix.drop(Msg("triage.data.fix", keys=keys)))  # the verdict's samples
    return v


def _untraced(v: Verdict, near: OpEvent | None, *, loss: float, grads_ok: bool) -> Verdict:
    if not math.isfinite(loss) or not grads_ok:
        v.evidence.append(Msg("triage.untraced"))
    if near is not None:
        v.evidence.append(near.describe())
    return v


def _explain_backward(v: Verdict, bwd: OpEvent) -> None:
    out_dtype = bwd.outputs[0].dtype if bwd.outputs else "float32"
    half = out_dtype in ("float16", "bfloat16") and bwd.kind == "overflow"
    v.cause, v.confidence = ("activation_overflow", 0.85) if half else ("grad_explosion", 0.75)
    v.evidence.append(
        Msg("triage.backward.first", beyond=Msg("triage.backward.beyond", dtype=out_dtype) if half else "")
    )
    v.evidence.append(bwd.describe())
    if half:
        v.fixes.append(Fix("add_scaler", None, Msg("triage.backward.fix_scaler")))
        if bwd.module:
            v.fixes.append(
                Fix.fp32(Msg("triage.backward.fix_module_fp32", module=bwd.module, dtype=out_dtype), module=bwd.module)
            )
    if bwd.forward_op:
        v.evidence.append(
            Msg(
                "triage.backward.of",
                op=bwd.forward_op,
                where=Msg("triage.backward.in", module=bwd.module) if bwd.module else "",
            )
        )
    if bwd.kind == "domain":
        v.fixes.append(Msg("triage.backward.fix_domain", op=bwd.forward_op or bwd.op))
    v.fixes.append(Fix.clip(Msg("triage.backward.fix_clip"), max_norm=1.0))  # says clip_grad_norm_(..., 1.0)


# --- forward op families ---------------------------------------------------------------------------


@dataclass(frozen=True)
class ForwardOp:
    """The first forward op that made a non-finite value, with what the families look at."""

    ev: OpEvent
    name: str  # the op's base name (`aten.exp.default` -> `exp`)
    out_dtype: str
    in_max: float | None  # the largest |input| (None when unknown)
    live: dict[str, Any]  # the step record's live flags
    samples: list[int] | None

    @classmethod
    def of(cls, ev: OpEvent, live: dict[str, Any], samples: list[int] | None) -> ForwardOp:
        return cls(
            ev=ev,
            name=base_name(ev.op),
            out_dtype=ev.outputs[0].dtype if ev.outputs else "float32",
            in_max=max((s.absmax for s in ev.inputs if s.absmax is not None), default=None),
            live=live,
            samples=samples,
        )

    @property
    def in_attention(self) -> bool:
        """A softmax anywhere, or in an attention module: a matmul (the logits), exp, or an op that
        made NaN or left its domain."""
        return self.name in SOFTMAX_OPS or (
            is_attention(self.ev)
            and (self.name in MATMUL_OPS or self.name == "exp" or self.ev.kind in ("nan", "domain"))
        )


@dataclass(frozen=True)
class OpFamily:
    """A kind of op that makes NaN/Inf, the cause it points to, and how to explain it."""

    name: str
    cause: str
    confidence: float | Callable[[ForwardOp], float]
    matches: Callable[[ForwardOp], bool]
    explain: Callable[[ForwardOp, Verdict], None]  # adds the evidence and fixes


#: tried in order; the first family that matches explains the op (the last one matches any op)
FORWARD_FAMILIES: list[OpFamily] = []


def op_family(
    name: str, cause: str, confidence: float | Callable[[ForwardOp], float], matches: Callable[[ForwardOp], bool]
) -> Callable:
    """Register the decorated `explain(op, verdict)` as the next family in `FORWARD_FAMILIES`."""

    def register(explain: Callable[[ForwardOp, Verdict], None]) -> Callable[[ForwardOp, Verdict], None]:
        FORWARD_FAMILIES.append(OpFamily(name, cause, confidence, matches, explain))
        return explain

    return register


@op_family("a parameter already non-finite", "grad_explosion", 0.6, lambda op: op.ev.kind == "param")
def _bad_parameter(op: ForwardOp, v: Verdict) -> None:
    v.evidence.append(Msg("triage.param.bad"))
    v.fixes.append(Fix.clip(Msg("triage.param.fix"), max_norm=1.0))


@op_family(
    "softmax over fully masked rows",
    "attention_overflow",
    0.95,
    lambda op: op.in_attention and op.name in SOFTMAX_OPS and any(s.inf for s in op.ev.inputs) and op.ev.kind == "nan",
)
def _masked_rows(op: ForwardOp, v: Verdict) -> None:
    empty = op.live.get("mask_empty_sample_ids")
    who = Msg("triage.samples", ids=_ids(op.samples[:16])) if op.samples else Msg("triage.some_rows")
    mask = Msg("triage.mask_all_zero", ids=_ids(list(empty)[:16])) if empty else ""
    v.evidence.append(Msg("triage.attn.masked_rows", who=who, mask=mask))
    if op.samples:  # a change of data a replay can check, apart from the change of code
        v.fixes.append(Fix.drop(Msg("triage.attn.drop_empty_fix", ids=_ids(op.samples[:16]))))
    v.fixes.append(Msg("triage.attn.mask_min_fix"))


@op_family("exp of attention logits", "attention_overflow", 0.95, lambda op: op.in_attention and op.name == "exp")
def _attention_exp(op: ForwardOp, v: Verdict) -> None:
    top = DTYPE_MAX.get(op.out_dtype, 3.4e38)
    v.evidence.append(
        Msg(
            "triage.attn.exp",
            value=float(op.in_max or math.inf),
            dtype=op.out_dtype,
            top=float(top),
            log_top=math.log(top),
        )
    )
    v.fixes.append(Msg("triage.attn.stable_fix"))


@op_family(
    "another op of a hand-written attention",
    "attention_overflow",
    0.95,
    lambda op: op.in_attention and op.name not in MATMUL_OPS and op.name not in SOFTMAX_OPS,
)
def _attention_other(op: ForwardOp, v: Verdict) -> None:
    fwd = op.ev
    zero_in = any(s.min == 0 or (s.absmax is not None and s.absmax == 0) for s in fwd.inputs)
    why = Msg("triage.attn.zero_div") if zero_in and op.name == "div" else ""
    v.evidence.append(Msg("triage.attn.other", op=fwd.op, module=str(fwd.module), why=why))
    v.fixes.append(Msg("triage.attn.stable_fix"))


@op_family("attention logits (QK^T, or the softmax of them)", "attention_overflow", 0.95, lambda op: op.in_attention)
def _attention_logits(op: ForwardOp, v: Verdict) -> None:
    v.evidence.append(Msg("triage.attn.logits", value=float(op.in_max or math.inf), dtype=op.out_dtype))
    v.fixes.append(Msg("triage.attn.logits_fix"))


@op_family(
    "a loss over zero supervised tokens",
    "label_mask_empty",
    0.9,
    lambda op: op.name in LOSS_OPS and op.live.get("label_tokens") == 0,
)
def _loss_without_labels(op: ForwardOp, v: Verdict) -> None:
    v.evidence.append(Msg("triage.labels.empty"))
    v.fixes.append(Fix.skip(Msg("triage.labels.fix")))


@op_family("exp overflow", "activation_overflow", 0.9, lambda op: op.ev.kind == "overflow" and op.name == "exp")
def _exp_overflow(op: ForwardOp, v: Verdict) -> None:
    v.evidence.append(Msg("triage.exp.overflow", value=float(op.in_max or math.inf), dtype=op.out_dtype))
    v.fixes.append(Msg("triage.exp.fix"))


@op_family("overflow beyond the dtype's range", "activation_overflow", 0.9, lambda op: op.ev.kind == "overflow")
def _overflow(op: ForwardOp, v: Verdict) -> None:
    fwd, dtype = op.ev, op.out_dtype
    v.evidence.append(
        Msg(
            "triage.overflow",
            op=fwd.op,
            where=_where(fwd),
            dtype=dtype,
            top=float(DTYPE_MAX.get(dtype, math.inf)),
            value=None if op.in_max is None else float(op.in_max),
        )
    )
    if dtype in ("float16", "bfloat16"):
        v.fixes.append(
            Fix.fp32(Msg("triage.overflow.fix_module_fp32", module=fwd.module, dtype=dtype), fwd.module)
            if fwd.module
            else Msg("triage.overflow.fix_dtype", where=_where(fwd), dtype=dtype)
        )
    v.fixes.append(Msg("triage.overflow.fix_scale", where=_where(fwd)))


@op_family(
    "an input outside the op's domain",
    "activation_overflow",
    lambda op: 0.9 if op.ev.kind == "domain" else 0.8,
    lambda op: True,
)
def _out_of_domain(op: ForwardOp, v: Verdict) -> None:
    fwd = op.ev
    v.evidence.append(Msg("triage.domain", op=fwd.op))
    v.fixes.append(Msg("triage.domain.fix", op=fwd.op, where=_where(fwd)))
