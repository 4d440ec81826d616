"""The diagnosis engine: run every applicable detector, separate cause from consequence, order.

The same function serves the live monitor (called on the history so far) and `lossdoctor diagnose`
(called on a log), which is what makes `mon.diagnose()` equal to the CLI's answer.
"""

from __future__ import annotations

import logging
from typing import Iterable

from ..findings import Finding, Report, importance_key
from ..records import Run
from . import REGISTRY, load_all
from .quantities import Quantities

log = logging.getLogger("lossdoctor")

#: Causes that explain a first non-finite step by themselves; when one of them is found at or
#: before the onset, findings that only describe the blow-up (a NaN gradient, a spike) are
#: consequences, not causes.
ROOT_CAUSES_OF_NONFINITE = (
    "nonfinite_data", "attention_overflow", "activation_overflow", "label_mask_empty",
    "loss_scale_collapse", "bad_init", "lr_too_high", "nondeterministic_fault",
)
#: Findings that are symptoms of a blow-up rather than its explanation.
CONSEQUENCES = ("grad_explosion", "loss_spike", "activation_overflow", "lr_too_high")


def detect(run: Run) -> tuple[list[Finding], list[str]]:
    """All findings of one run (one rank), plus notes on checks that could not run."""
    load_all()
    q = Quantities(run)
    findings: list[Finding] = []
    notes: list[str] = []
    for d in REGISTRY:
        if not d.can_run(run):
            if d.hint:
                notes.append(f"{d.name}: not checked ({d.hint})")
            continue
        try:
            found = d.fn(run, q)
        except Exception as e:  # a detector bug must not hide the other findings
            log.debug("detector %s failed", d.name, exc_info=True)
            notes.append(f"{d.name}: internal error ({type(e).__name__}: {e})")
            continue
        for f in found:
            if f.rank is None:
                f.rank = run.rank
        findings.extend(found)
    if run.preflight:  # findings of the preflight checks, joined with the detectors' of the same cause
        from ..preflight.merge import merge_findings

        findings = merge_findings(findings, run.preflight, rank=run.rank, notes=notes)
    return arbitrate(findings), notes


def arbitrate(findings: list[Finding]) -> list[Finding]:
    """Keep causes, drop consequences, order by importance.

    When several findings describe the first non-finite step, the one whose cause explains it
    (bad data, an attention row of padding, an overflowing activation...) wins; a gradient
    explosion or spike reported at or after that step is its consequence and is dropped unless it
    began earlier (a gradient norm that was already growing is a cause in its own right).
    """
    roots = [f for f in findings if f.cause in ROOT_CAUSES_OF_NONFINITE and f.symptom == "nonfinite"
             and f.severity == "critical" and f.step is not None]
    keep: list[Finding] = []
    for f in findings:
        dominated = False
        for r in roots:
            if r is f or f.cause == r.cause or f.cause not in CONSEQUENCES:
                continue
            if f.step is not None and f.step >= r.step and _stronger(r, f):
                dominated = True
                break
        if not dominated:
            keep.append(f)
    keep = _dedupe(keep)
    keep.sort(key=importance_key)
    return keep


def _stronger(root: Finding, other: Finding) -> bool:
    """A direct observation (data, overflow located in a layer) explains a blow-up better than a
    trend. lr_too_high only yields to observations, not the other way round."""
    direct = ("nonfinite_data", "attention_overflow", "activation_overflow", "label_mask_empty",
              "loss_scale_collapse", "nondeterministic_fault")
    if root.cause in direct:
        return True
    return other.cause in ("grad_explosion", "loss_spike") and root.confidence >= other.confidence


def _dedupe(findings: Iterable[Finding]) -> list[Finding]:
    seen: dict[tuple, Finding] = {}
    for f in findings:
        key = (f.cause, f.step, f.layer, f.rank)
        if key not in seen or importance_key(f) < importance_key(seen[key]):
            seen[key] = f
    return list(seen.values())


def merge_ranks(per_rank: list[list[Finding]]) -> list[Finding]:
    """One finding per cause across ranks: the one that began first (earliest step; on a tie the
    one whose evidence is local to its rank wins, which the detectors encode as higher confidence).
    The other ranks are named in the evidence."""
    by_cause: dict[tuple[str, str | None], list[Finding]] = {}
    for fs in per_rank:
        for f in fs:
            by_cause.setdefault((f.cause, f.symptom), []).append(f)
    out = []
    for group in by_cause.values():
        group.sort(key=lambda f: (f.step if f.step is not None else float("inf"), -f.confidence,
                                  f.rank if f.rank is not None else 0))
        first = group[0]
        others = sorted({g.rank for g in group[1:] if g.rank is not None and g.rank != first.rank})
        if others:
            first.evidence.append(f"also seen later or at the same step on rank(s) {others}")
        out.append(first)
    return out


def diagnose_runs(runs: list[Run], *, source: str | None = None) -> Report:
    """Diagnose one run (possibly several ranks) into a Report."""
    per_rank: list[list[Finding]] = []
    notes: list[str] = []
    for run in runs:
        f, n = detect(run)
        per_rank.append(f)
        notes.extend(n)
        notes.extend(run.notes)
    findings = per_rank[0] if len(per_rank) == 1 else arbitrate(merge_ranks(per_rank))
    steps = max((len(r) for r in runs), default=0)
    notes = list(dict.fromkeys(notes))  # same note from every rank once
    return Report(findings=findings, steps=steps, notes=notes,
                  source=source or (runs[0].source if runs else None))
