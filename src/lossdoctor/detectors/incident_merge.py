"""Findings of incident triage records (`incidents/*.json`, written by the monitor's incident flow),
merged with what the detectors found from the step records.

A record whose level is "replay" answered from a replay of the failing step (op, samples,
reproducibility): its finding replaces the detectors' findings about the same step and symptom,
whose evidence it keeps as context. A "replay-state" record found that the state before the
failing step breaks on other batches too: the op it names is where a state that had already gone
bad (exploding weights) overflowed, and the detectors' trend (gradient explosion, LR) is the
better cause, so it is merged like a "live" one, lending its op and evidence. A "live" record only
re-reads the live flags the detectors
also read: it adds the sentence about what replay would add to the detectors' finding of that step
(or of that symptom), and stands on its own only when no detector found anything of that symptom.

Verified fixes survive the merge: when an incident's finding is merged into a detector's, the
verdicts of its fixes (`fix_checks`) go onto the same fixes of the detector's finding, a verified
fix it lacks is added, and its fixes are ordered by verdict. The verdicts an on-demand verification
gave the detectors' own fixes (kept in the record's `verification.findings`) go back onto them too.

Torch-free: the offline CLI reads incident records too.
"""

from __future__ import annotations

from ..findings import Finding, importance_key
from ..messages import Msg, not_in, unique
from ..records import Run
from .fix_kinds import order_by_verdict, same_fix

MAX_CONTEXT = 2
MAX_STATE_LINES = 3


def incident_findings(run: Run) -> list[tuple[Finding, str]]:
    """(finding, level) for every finding of every incident record of the run."""
    out: list[tuple[Finding, str]] = []
    records = run.incidents or run.meta.get("incidents") or []  # in meta: Runs built by older code
    for rec in records if isinstance(records, list) else []:
        if not isinstance(rec, dict):
            continue
        level = rec.get("level", "live")
        found = rec.get("findings")
        if not isinstance(found, list) or not isinstance(level, str):
            continue  # a damaged or hand-edited record: nothing to merge
        for d in found:
            try:
                f = Finding.from_dict(d)
            except (TypeError, ValueError):
                continue
            if f.rank is None:
                f.rank = run.rank
            out.append((f, level))
    return out


def merge_incidents(findings: list[Finding], run: Run) -> list[Finding]:
    incidents = incident_findings(run)
    if not incidents:
        return findings
    keep = list(findings)
    for inc, level in incidents:
        same = [
            f
            for f in keep
            if f.step == inc.step
            and f.symptom == inc.symptom
            and (f.rank is None or inc.rank is None or f.rank == inc.rank)
        ]
        if level == "replay":
            context: list[str] = []
            for f in sorted(same, key=lambda f: f.cause != inc.cause):  # same cause first
                keep.remove(f)
                context.extend(Msg("incident.live_monitor", evidence=e) for e in f.evidence)
            inc.evidence.extend(not_in(unique(context), inc.evidence)[:MAX_CONTEXT])
            keep.append(inc)
        else:
            # the live flags are the detectors' own input: enrich their finding of this step (or,
            # failing that, their finding of this symptom); stand alone only if they found none
            same = same or [f for f in keep if f.symptom == inc.symptom and f.severity == inc.severity]
            if not same:
                keep.append(inc)
                continue
            target = min(same, key=importance_key)
            if target.step == inc.step:
                same_place = target.layer is None or target.layer == inc.layer
                for attr in ("layer", "op", "code", "samples", "batch"):
                    if attr in ("op", "code") and not same_place:
                        continue  # an op belongs to its layer: not lent to a finding about another layer
                    if getattr(target, attr) is None and getattr(inc, attr) is not None:
                        setattr(target, attr, getattr(inc, attr))
            new = not_in(inc.evidence, target.evidence)
            target.evidence.extend(new[-1:] if level == "live" else new[:MAX_STATE_LINES])
            carry_checks(inc, target)
    for f in verified_elsewhere(run):
        for target in keep:
            if (target.cause, target.step) == (f.cause, f.step):
                carry_checks(f, target, add=False)
    return keep


def carry_checks(src: Finding, target: Finding, add: bool = True) -> None:
    """The verdicts of `src`'s fixes onto `target`: each check goes to the target's fix that asks
    for the same change (same kind and values: the message data, never the English); a verified fix
    the target does not have is added to its fixes with its check (`add`). Then the target's fixes
    are ordered by verdict. A fix of the target that already has a check keeps it."""
    if not src.fix_checks:
        return
    checks = list(target.fix_checks or [])
    checked = {c.get("fix") for c in checks}
    for c in src.fix_checks:
        i = c.get("fix")
        if not isinstance(i, int) or not 0 <= i < len(src.fixes):
            continue
        text = src.fixes[i]
        j = next((j for j, t in enumerate(target.fixes) if same_fix(text, t, src, target)), None)
        if j is None and add and c.get("verdict") == "verified":
            target.fixes.append(text)
            j = len(target.fixes) - 1
        if j is not None and j not in checked:
            checks.append({**c, "fix": j})
            checked.add(j)
    if checks:
        target.fix_checks = checks
        order_by_verdict(target)


def verified_elsewhere(run: Run) -> list[Finding]:
    """The detectors' findings an incident's verification checked the fixes of (on demand,
    `mon.verify_fixes()`: the diagnosis's findings too), as they were then, with their checks."""
    out = []
    records = run.incidents or run.meta.get("incidents") or []
    for rec in records if isinstance(records, list) else []:
        v = rec.get("verification") if isinstance(rec, dict) else None
        for d in (v.get("findings") if isinstance(v, dict) else None) or []:
            try:
                f = Finding.from_dict(d)
            except (TypeError, ValueError):
                continue
            if f.fix_checks:
                out.append(f)
    return out
