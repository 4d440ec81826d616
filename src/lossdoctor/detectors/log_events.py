"""The events of a log's text (`events["text_events"]`, read by sources/text_events.py) as facts the
reasoning uses: the evidence functions of the differential's event rows, the op that autograd's
anomaly mode names, and one pass over the findings (`apply_events`) that

- puts the op anomaly mode named on the non-finite finding;
- says out-of-memory, NCCL and GPU hardware errors (ECC, Xid) as notes (they end a run; they are no
  cause of its loss);
- drops a spike dated where the log resumes from a checkpoint (two runs' curves meet there);
- names the framework's own warnings that samples' labels are dropped (`This instance will be
  ignored in loss calculation`) as `label_mask_empty`, when no finding names it already;
- names the bug a framework's warning names (`bug_warning`: a loss whose shapes broadcast, a softmax's
  output given to a loss that expects logits, variables the loss does not reach) as its cause.

A NaN only the text tells (`Loss is nan, stopping training`, anomaly mode's op) is a symptom of
`symptoms._nonfinite`, ranked by the differential like any other NaN; a differential finding whose
leader has no evidence of its own is capped there (`differential.UNSEPARATED_CONF`).

Reads `Run` records only; every threshold is a field of `LIMITS` with its reason.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..findings import Finding, as_fixes
from ..messages import Msg
from ..records import Run
from .quantities import Quantities
from .symptoms import Symptom


@dataclass(frozen=True)
class EventLimits:
    #: logged rows after a resume/restart line within which a jump is the two runs' curves meeting
    #: (the first row after it and the next: a log that prints every step or every interval)
    resume_rows: int = 2
    #: distinct steps with a labels-dropped warning from which it is the data's pattern, not one odd
    #: instance (TRL warns once per instance; one or two is an outlier, said as info)
    labels_steps: int = 3
    #: confidence of a bug a framework's warning names: the code that ran has it (the line says so), so it
    #: leads the curve rules' guesses of a cause (0.5-0.75) unless one measured more
    bug_confidence: float = 0.8
    #: a loss whose last third's median is below this share of its first third's fell: the model trains,
    #: so a warning that some parameters get no gradient is about a part frozen on purpose (info)
    frozen_fell: float = 0.9
    #: confidence of a cause a warning about a part of the model names (info: the part may be unused on
    #: purpose; below every curve rule's guess)
    part_confidence: float = 0.3


LIMITS = EventLimits()

#: the kinds that say samples' labels were dropped from the loss
LABELS = ("labels_ignored", "empty_target")
#: the kinds that end a run for want of resources: notes, never a cause of the loss curve
RESOURCE = {"oom": "events.oom", "nccl_error": "events.nccl", "hardware_error": "events.hardware"}
RESUMES = ("resume", "restart")

#: autograd function names (anomaly mode's `Function 'XBackward0'`) by what their NaN points to:
#: - attention: a softmax over a fully masked row or overflowing logits (torch issue 119320 for SDPA's
#:   efficient kernel; `SoftmaxBackward0` in the HF forums' NaN threads)
#: - domain: an op at an edge of its domain (log 0, x/0, sqrt at 0, acos at +-1, a norm of a zero
#:   vector): a value the batch brought there, fixed with an eps or a clamp
#: - overflow: products and exponentials whose values overflowed (inf * 0 = NaN in the backward)
OP_FAMILIES: tuple[tuple[str, re.Pattern[str]], ...] = (
    ("attention", re.compile(r"softmax|scaleddotproduct|attention|sdpa|flash", re.I)),
    (
        "domain",
        re.compile(
            r"^(?:log|div|sqrt|rsqrt|reciprocal|acos|asin|atan2|pow|norm|linalgvectornorm|"
            r"cdist|std|var|xlogy|logsumexp|binarycrossentropy|nllloss)",
            re.I,
        ),
    ),
    (
        "overflow",
        re.compile(
            r"^(?:exp|mul|mm|bmm|addmm|addbmm|baddbmm|matmul|linear|gelu|silu|tanh|sigmoid|"
            r"mse|sum|mean|add|sub|convolution|cudnnconvolution|layernorm|nativelayernorm)",
            re.I,
        ),
    ),
)


def events_of(run: Run, kinds: tuple[str, ...], upto_step: int | None = None) -> list[tuple[int, dict[str, Any]]]:
    """(step, event) of the text events of `kinds`, in step order (at or before `upto_step`)."""
    out: list[tuple[int, dict[str, Any]]] = []
    for s, items in run.event("text_events").items():
        if upto_step is not None and s > upto_step or not isinstance(items, list):
            continue
        out.extend((int(s), e) for e in items if isinstance(e, dict) and e.get("kind") in kinds)
    return sorted(out, key=lambda t: (t[0], t[1].get("line", 0)))


def anomaly_op(run: Run, upto_step: int | None = None) -> tuple[int, str] | None:
    """(step, op) of the first backward function anomaly mode says returned NaN/Inf."""
    hits = [(s, e["op"]) for s, e in events_of(run, ("anomaly_op",), upto_step) if isinstance(e.get("op"), str)]
    return hits[0] if hits else None


def op_family(op: str) -> str | None:
    name = op.split("::")[-1].split(".")[-1]
    for family, pattern in OP_FAMILIES:
        if pattern.search(name):
            return family
    return None


# ------------------------------------------------------------------ evidence (the differential's rows)


def ev_scale_floor(run: Run, q: Quantities, sym: Symptom) -> Msg | None:
    hits = events_of(run, ("loss_scale_min",), sym.step + 1)
    if not hits:
        return None
    s, e = hits[0]
    return Msg("events.ev.scale_floor", step=s, scale=e.get("scale"))


def _ev_op(family: str):
    def ev(run: Run, q: Quantities, sym: Symptom) -> Msg | None:
        hit = anomaly_op(run, sym.step + 1)
        if hit is None or op_family(hit[1]) != family:
            return None
        return Msg(f"events.ev.op_{family}", op=hit[1], step=hit[0])

    return ev


ev_op_attention = _ev_op("attention")
ev_op_domain = _ev_op("domain")
ev_op_overflow = _ev_op("overflow")


def ev_nan_input(run: Run, q: Quantities, sym: Symptom) -> Msg | None:
    hits = events_of(run, ("nonfinite_input",), sym.step + 1)
    return Msg("events.ev.nan_input", n=len(hits), first=hits[0][0]) if hits else None


def ev_grad_text(run: Run, q: Quantities, sym: Symptom) -> Msg | None:
    hits = events_of(run, ("nonfinite_grad",), sym.step + 1)
    return Msg("events.ev.grad_text", n=len(hits), first=hits[0][0]) if hits else None


def ev_resumed_here(run: Run, q: Quantities, sym: Symptom) -> Msg | None:
    r = resume_before(run, q, sym.row)
    return Msg("events.ev.resumed", step=r) if r is not None else None


def resume_before(run: Run, q: Quantities, row: int) -> int | None:
    """The step of a resume/restart line within `resume_rows` logged rows before row `row`."""
    for s, _ in events_of(run, RESUMES):
        at = int(np.searchsorted(q.steps, s, side="right"))  # the first row after the line's step
        if at - 1 <= row < at + LIMITS.resume_rows:
            return s
    return None


# ------------------------------------------------------------------ the pass over the findings


def apply_events(run: Run, q: Quantities, findings: list[Finding], notes: list[Any]) -> None:
    """In place: see the module's docstring. `notes` gets the resource errors and the dropped spikes.
    (A NaN only the text tells is a symptom: `symptoms._nonfinite`.)"""
    if not run.event("text_events"):
        return
    _op_on_nonfinite(run, findings)
    _resume_split(run, q, findings, notes)
    _labels_dropped(run, findings)
    _bug_warnings(run, q, findings)
    for kind, key in RESOURCE.items():
        hits = events_of(run, (kind,))
        if hits:
            notes.append(Msg(key, n=len(hits), step=hits[0][0], text=hits[0][1].get("text", "")))


def _labels_dropped(run: Run, findings: list[Finding]) -> None:
    """The framework says samples' labels were dropped (every label -100): those samples train
    nothing; on >= `labels_steps` distinct steps a warning, else info."""
    hits = events_of(run, LABELS)
    if not hits or any(f.cause == "label_mask_empty" for f in findings):
        return
    steps = sorted({s for s, _ in hits})
    first, e = hits[0]
    sev = "warning" if len(steps) >= LIMITS.labels_steps else "info"
    findings.append(
        Finding(
            cause="label_mask_empty",
            symptom="slow_convergence",
            severity=sev,
            confidence=0.6,
            step=first,
            evidence=[Msg("events.labels_dropped", n=len(hits), steps=len(steps), first=first, text=e.get("text", ""))],
            fixes=as_fixes([Msg("events.fix.response_template"), Msg("diff.fix.count_labels")]),
        )
    )


#: the fixes of the bug a framework's warning names (the same fixes the live detectors give it)
BUG_FIXES: dict[str, tuple[str, ...]] = {
    "loss_broadcast": ("bugs.broadcast.fix",),
    "softmax_before_loss": ("events.fix.from_logits", "bugs.softmax.fix"),
    "frozen_model": ("bugs.frozen.fix_requires_grad", "bugs.frozen.fix_optimizer"),
}
#: curve symptoms a bug of the loop shows as (the finding takes the first alarm's, else a slow loss)
_LOOP_SYMPTOMS = ("plateau", "slow_convergence", "stall", "oscillation", "divergence", "zero_loss")


def _bug_warnings(run: Run, q: Quantities, findings: list[Finding]) -> None:
    """The framework printed the warning of a bug in the loop (torch's `Using a target size ... different
    to the input size`, Keras's `from_logits=True` on a softmax's output, PEFT's `trainable params: 0`):
    the bug is in the code that ran, whatever the curve shows, so it is a warning of its own at the first
    such line, above the curve's guesses (`bug_confidence`); a finding that names it already takes the line
    as evidence. A warning about a part of the model only (`partial`: TF's "Gradients do not exist for
    variables", often a pooler or head unused on purpose) is evidence for a finding that names the cause,
    else info; so is a warning that parameters get no gradient beside a loss that fell (a part frozen on
    purpose, a step skipped by returning None)."""
    by_cause: dict[str, list[tuple[int, dict[str, Any]]]] = {}
    for s, e in events_of(run, ("bug_warning",)):
        if e.get("cause") in BUG_FIXES:
            by_cause.setdefault(e["cause"], []).append((s, e))
    for cause, hits in by_cause.items():
        first, e = hits[0]
        said = Msg("events.bug_warning", n=len(hits), first=first, text=e.get("text", ""))
        named = next((f for f in findings if f.cause == cause), None)
        whole = any(not h.get("partial") for _, h in hits)
        if named is not None:
            named.evidence.append(said)
            if whole:
                named.confidence = max(named.confidence, LIMITS.bug_confidence)
            continue
        curve = next(
            (f for f in findings if f.severity in ("warning", "critical") and f.symptom in _LOOP_SYMPTOMS), None
        )
        on_purpose = not whole or (cause == "frozen_model" and curve is None and _loss_fell(q))
        findings.append(
            Finding(
                cause=cause,
                symptom=curve.symptom if curve is not None else "slow_convergence",
                severity="info" if on_purpose else "warning",
                confidence=LIMITS.bug_confidence if whole else LIMITS.part_confidence,
                step=first,
                evidence=[said],
                fixes=as_fixes([Msg(k) for k in BUG_FIXES[cause]]),
            )
        )


def _loss_fell(q: Quantities) -> bool:
    """The median of the loss's last third is below `frozen_fell` x its first third's."""
    x = q.loss[q.finite_loss]
    k = x.size // 3
    return k >= 1 and float(np.median(x[-k:])) < LIMITS.frozen_fell * float(np.median(x[:k]))


def _op_on_nonfinite(run: Run, findings: list[Finding]) -> None:
    for f in findings:
        if f.symptom != "nonfinite" or f.op is not None:
            continue
        hit = anomaly_op(run, None if f.step is None else f.step + 1)
        if hit is None:
            continue
        f.op = hit[1]
        key = Msg("events.ev.anomaly_op", op=hit[1], step=hit[0])
        if all(getattr(m, "key", None) not in ("events.ev.anomaly_op",) + _OP_KEYS for m in f.evidence):
            f.evidence.append(key)


_OP_KEYS = tuple(f"events.ev.op_{family}" for family, _ in OP_FAMILIES)


def _resume_split(run: Run, q: Quantities, findings: list[Finding], notes: list[Any]) -> None:
    """A spike dated right where the log resumes (or restarts) is where two runs' curves meet."""
    if not events_of(run, RESUMES) or q.n == 0:
        return
    keep = []
    for f in findings:
        if f.symptom == "spike" and f.step is not None and f.severity in ("warning", "critical"):
            row = min(int(np.searchsorted(q.steps, f.step)), q.n - 1)
            r = resume_before(run, q, row)
            if r is not None:
                notes.append(Msg("events.resume_split", step=f.step, resume=r, cause=f.cause))
                continue
        keep.append(f)
    findings[:] = keep
