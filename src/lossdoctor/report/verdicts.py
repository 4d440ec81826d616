"""Verified fixes as the human reports show them: each fix's verdict (from the finding's
`fix_checks`, written by the replay of `triage/verify.py`), and per incident what verification
did and cost (from the incident records of the run directory).

The verdict sentences and their numbers are messages (`sentence_data`), so every report renders
them in its own language; a check read back without its data (an older record) shows its English
sentence.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

from ..findings import Finding
from ..messages import Msg, templates
from ..records import Run
from .i18n import say, ui

#: one mark per verdict, for the Markdown and HTML reports (the text report says the verdict in words)
ICON = {"verified": "✅", "did_not_help": "❌", "not_checked": "⏸️", "not_verifiable": "➖"}
VERDICTS = tuple(ICON)


def checks_of(f: Finding, index: int) -> list[dict[str, Any]]:
    """The checks of fix `index` of a finding (most often one; more when two findings suggested it)."""
    return [c for c in f.fix_checks or [] if isinstance(c, dict) and c.get("fix") == index]


def message(data: Any) -> Msg | None:
    """A message read back from a record; None when it is not one this version can render (a key
    it does not know, values that do not fit the template): the caller shows the stored text."""
    if not isinstance(data, dict) or data.get("key") not in templates():
        return None
    try:
        return Msg.from_data(data)
    except (KeyError, ValueError, IndexError, TypeError, AttributeError):
        return None


def sentence(check: dict[str, Any], lang: str) -> str:
    """A check's sentence in `lang` (the verdict and its numbers)."""
    m = message(check.get("sentence_data"))
    if m is not None:
        try:
            return say(m, lang)
        except (KeyError, ValueError, IndexError, TypeError, AttributeError):
            pass
    return str(check.get("sentence") or "")


def verdict_label(verdict: Any, lang: str) -> str:
    """The verdict in a few words ("verified", "已验证"); the contract's name when unknown."""
    return ui(lang).get(f"verdict_{verdict}", str(verdict))


def _step(x: Any) -> int | str:
    return int(x) if isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(x) else "?"


def _num(x: Any) -> float:
    return float(x) if isinstance(x, (int, float)) and math.isfinite(x) else 0.0


def incident_line(record: dict[str, Any]) -> Msg | None:
    """What verification did for one incident record, with its cost; None when it did not run."""
    v = record.get("verification")
    if not isinstance(v, dict):
        return None
    step = _step(record.get("step", v.get("step")))
    if v.get("status") == "error":
        return Msg("report.verification.error", step=step, error=str(v.get("error", "")))
    return Msg("report.verification.incident", step=step, summary=summary(v))


def summary(v: dict[str, Any]) -> Msg:
    """What verification did (the verdicts counted, or why there is none) and its cost."""
    cost = c if isinstance(c := v.get("cost"), dict) else {}
    what = message(v.get("note_data")) or (str(v["note"]) if v.get("note") else None)
    if v.get("status") == "checked":
        checks = cs if isinstance(cs := v.get("checks"), list) else []
        counts = {k: sum(1 for c in checks if isinstance(c, dict) and c.get("verdict") == k) for k in VERDICTS}
        what = Msg(
            "report.verification.checked",
            start=_step(v.get("from_step")),
            end=_step(v.get("to_step")),
            verified=counts["verified"],
            did_not_help=counts["did_not_help"],
            other=counts["not_checked"] + counts["not_verifiable"],
        )
    gpu = cost.get("cuda_peak_growth_mib")
    spent = Msg(
        "report.verification.cost",
        seconds=_num(cost.get("seconds")),
        steps=int(_num(cost.get("steps_replayed"))),
        budget=int(_num(cost.get("budget_steps"))),
        mib=_num(cost.get("peak_rss_growth_mib")),
    )
    if isinstance(gpu, (int, float)):
        spent = Msg("report.verification.cost_gpu", cost=spent, gpu=_num(gpu))
    if v.get("status") == "error":
        what = Msg("report.verification.failed", error=str(v.get("error", "")))
    return Msg("report.verification.summary", what=what or Msg("report.verification.no_note"), cost=spent)


def incident_lines(runs: Sequence[Run] | None) -> list[Msg]:
    """One line per incident whose fixes verification replayed (or tried to), oldest first."""
    out = []
    for run in runs or []:
        for rec in getattr(run, "incidents", None) or []:
            line = incident_line(rec) if isinstance(rec, dict) else None
            if line is not None:
                out.append(line)
    return out
