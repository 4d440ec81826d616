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

Torch-free: the offline CLI reads incident records too.
"""

from __future__ import annotations

from ..findings import Finding, importance_key
from ..messages import Msg
from ..records import Run

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
        same = [f for f in keep if f.step == inc.step and f.symptom == inc.symptom
                and (f.rank is None or inc.rank is None or f.rank == inc.rank)]
        if level == "replay":
            context = []
            for f in sorted(same, key=lambda f: f.cause != inc.cause):  # same cause first
                keep.remove(f)
                context.extend(Msg("incident.live_monitor", evidence=e) for e in f.evidence)
            inc.evidence.extend([e for e in dict.fromkeys(context) if e not in inc.evidence][:MAX_CONTEXT])
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
                for attr in ("layer", "op", "samples", "batch"):
                    if attr == "op" and not same_place:
                        continue  # an op belongs to its layer: not lent to a finding about another layer
                    if getattr(target, attr) is None and getattr(inc, attr) is not None:
                        setattr(target, attr, getattr(inc, attr))
            new = [e for e in inc.evidence if e not in target.evidence]
            target.evidence.extend(new[-1:] if level == "live" else new[:MAX_STATE_LINES])
    return keep
