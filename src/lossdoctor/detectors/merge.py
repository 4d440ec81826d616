"""Preflight findings joined with the engine's: one finding per problem, not two.

A preflight finding (seen in the objects before or at the start of training) and a detector's
finding (seen in the step records) often describe the same problem: the GradScaler configured at
2^60 and the skipped steps it then caused, the prompt that is not masked and the label statistics.
When a finding of the same cause already exists, the preflight evidence and fixes are added to it
(the engine keeps one finding per cause and step anyway). Torch-free: the offline engine imports it;
it lives with the engine (preflight sits above the detectors).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from ..findings import Finding, importance_key
from ..messages import Msg, not_in
from ..vocabulary import SEVERITY_RANK


def merge_findings(
    base: list[Finding],
    extra: Iterable[Finding | dict[str, Any]],
    *,
    rank: int | None = None,
    notes: list[str] | None = None,
) -> list[Finding]:
    """`base` (the detectors' findings) with `extra` (preflight findings, as objects or contract
    dicts read back from a run directory) folded in. Unreadable dicts become a note."""
    out = list(base)
    for item in extra:
        try:
            p = item if isinstance(item, Finding) else Finding.from_dict(item)
        except (TypeError, ValueError, KeyError) as e:
            if notes is not None:
                notes.append(Msg("pcheck.unreadable_finding", error=str(e)))
            continue
        if p.rank is None:
            p.rank = rank
        target = next((f for f in out if f.cause == p.cause), None)
        if target is None:
            out.append(p)
        else:
            _fold(target, p)
    return out


def _fold(f: Finding, p: Finding) -> None:
    """Add `p` to `f`; the more severe of the two leads (its symptom, its evidence first)."""
    lead = SEVERITY_RANK[p.severity] > SEVERITY_RANK[f.severity]
    new_ev = not_in(p.evidence, f.evidence)
    new_fix = not_in(p.fixes, f.fixes)
    f.evidence = new_ev + f.evidence if lead else f.evidence + new_ev
    f.fixes = new_fix + f.fixes if lead else f.fixes + new_fix
    if lead:  # the finding is the lead's now: its symptom and its rule
        f.severity, f.symptom, f.rule = p.severity, p.symptom, p.rule or f.rule
    f.confidence = max(f.confidence, p.confidence)
    if f.layer is None:
        f.layer = p.layer
    if f.samples is None and p.samples is not None:
        f.samples, f.batch = p.samples, p.batch if f.batch is None else f.batch
    if f.step is None:
        f.step = p.step


def ordered(findings: list[Finding]) -> list[Finding]:
    return sorted(findings, key=importance_key)
