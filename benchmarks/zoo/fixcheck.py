"""Verified fixes in the zoo: per run, what the replay said about the top finding's top fix and what
verification cost; per fault family, how often that fix was verified and the median cost.

`watch` verifies on its own (on by default) once an incident was replayed and the window after it
recorded: it needs a `replay_fn`, which only the scenarios marked `replay=True` pass. So a family
whose scenarios do not replay has no verification to count, and the table says so ("–") instead of
counting those runs as failures.

Definitions (every number in the table means exactly this):
- the *top finding* is the first alarm (warning or critical) of `lossdoctor diagnose RUN_DIR`, the
  *top fix* is its first fix as the report lists it; its verdict is the `fix_checks` entry of that
  fix (verified | did_not_help | not_checked | not_verifiable);
- "some fix verified": any fix of the run's replayed incidents was verified (the top finding's or
  another's, first or not);
- "not checked": verification ran, but the top fix has no verdict (a code change, over the
  budget, or the top finding is not one of the replayed incident's);
- a run whose incident was replayed but got no verdict (the replay diverged from the log, the
  incident did not fail again, over the budget, an error) counts under "no verdict";
- cost is summed over the run's incident records (`incidents/*.json`, `verification.cost`): wall
  seconds and replayed steps; memory is the largest growth of the process's peak resident memory.
"""

from __future__ import annotations

import statistics
from collections import defaultdict
from pathlib import Path
from typing import Any

from .report import table

ALARM = ("warning", "critical")


def top_fix_verdict(report: dict[str, Any]) -> tuple[str | None, str | None]:
    """(cause of the top finding, verdict of its first fix), None where there is none."""
    top = next((f for f in report.get("findings", []) if f.get("severity") in ALARM), None)
    if top is None:
        return None, None
    check = next((c for c in top.get("fix_checks") or [] if c.get("fix") == 0), None)
    return top.get("cause"), (check or {}).get("verdict")


def run_verification(run_dir: Path, report: dict[str, Any]) -> dict[str, Any]:
    """What verification did on one run: its incident records' statuses and cost, and the verdict
    of the top finding's top fix in the diagnosis of the run directory."""
    from lossdoctor.sources.rundir import load_incidents

    statuses, seconds, steps, rss, any_verified = [], 0.0, 0, 0.0, False
    for rec in load_incidents(run_dir):
        v = rec.get("verification")
        if not isinstance(v, dict):
            continue
        statuses.append(str(v.get("status")))
        any_verified = any_verified or any(
            isinstance(c, dict) and c.get("verdict") == "verified" for c in v.get("checks") or []
        )
        cost = v.get("cost") if isinstance(v.get("cost"), dict) else {}
        seconds += float(cost.get("seconds") or 0.0)
        steps += int(cost.get("steps_replayed") or 0)
        rss = max(rss, float(cost.get("peak_rss_growth_mib") or 0.0))
    cause, verdict = top_fix_verdict(report)
    return {
        "statuses": statuses,
        "top_cause": cause,
        "top_fix_verdict": verdict,
        "any_verified": any_verified,
        "seconds": round(seconds, 4) if statuses else None,
        "steps_replayed": steps if statuses else None,
        "peak_rss_growth_mib": round(rss, 2) if statuses else None,
    }


def family(causes: list[str]) -> str:
    """A scenario's fault family: its set of acceptable causes."""
    return " / ".join(sorted(causes)) or "healthy"


def _median(xs: list[float], spec: str) -> str:
    return format(statistics.median(xs), spec) if xs else "–"


def family_rows(scores: list[Any]) -> list[dict[str, Any]]:
    """Per fault family (faulty runs only), then all faulty runs together: runs, runs verified at
    all, the top fix's verdicts and the cost. `scores` are `RunScore`s (`.verify` from
    `run_verification`)."""
    by: dict[str, list[Any]] = defaultdict(list)
    for s in scores:
        if not s.healthy:
            by[family(s.causes)].append(s)
    groups = [(fam, by[fam]) for fam in sorted(by)]
    if len(groups) > 1:
        groups.append(("all faulty runs", [s for fam in sorted(by) for s in by[fam]]))
    return [_row(fam, runs) for fam, runs in groups]


def _row(fam: str, runs: list[Any]) -> dict[str, Any]:
    vs = [s.verify for s in runs if s.verify and s.verify.get("statuses")]
    verdicts = [v["top_fix_verdict"] for v in vs]
    return {
        "family": fam,
        "runs": len(runs),
        "verified_runs": len(vs),
        "verified": sum(1 for x in verdicts if x == "verified"),
        "any_verified": sum(1 for v in vs if v.get("any_verified")),
        "did_not_help": sum(1 for x in verdicts if x == "did_not_help"),
        "unchecked": sum(
            1 for v in vs if "checked" in v["statuses"] and v["top_fix_verdict"] not in ("verified", "did_not_help")
        ),
        "no_verdict": sum(1 for v in vs if "checked" not in v["statuses"]),
        "seconds": [v["seconds"] for v in vs],
        "steps": [v["steps_replayed"] for v in vs],
        "rss": [v["peak_rss_growth_mib"] for v in vs],
    }


def per_family(scores: list[Any]) -> str:
    """The table of `family_rows`, as GitHub markdown."""
    out = []
    for r in family_rows(scores):
        n = r["verified_runs"]
        share = f"{100.0 * r['verified'] / n:.0f}% ({r['verified']}/{n})" if n else "–"
        out.append(
            [
                r["family"],
                str(r["runs"]),
                str(n),
                share,
                f"{r['any_verified']}/{n}" if n else "–",
                str(r["did_not_help"]) if n else "–",
                str(r["unchecked"]) if n else "–",
                str(r["no_verdict"]) if n else "–",
                _median(r["seconds"], ".2f"),
                _median(r["steps"], ".0f"),
                (f"{_median(r['rss'], '.1f')} (max {max(r['rss']):.1f})" if r["rss"] else "–"),
            ]
        )
    return table(
        [
            "fault family (acceptable causes)",
            "runs",
            "runs with a verification",
            "top fix verified",
            "some fix verified",
            "top fix did not help",
            "top fix not checked / not verifiable",
            "no verdict (replay diverged, not reproduced, budget)",
            "seconds (median)",
            "replayed steps (median)",
            "peak RSS growth, MiB (median)",
        ],
        out,
    )
