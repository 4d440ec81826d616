"""Markdown report, for pasting into an issue or a pull request (GitHub-flavoured).

Text from logs and detectors is escaped: Markdown punctuation gets a backslash and `<`, `>`, `&`
become entities, so a metric named `<img src=x>` or `**x**` shows as typed and never as markup.
GitHub's references are neutralised too: a zero-width joiner goes after the `@` of `@name` and the
`#` of `#123`, so a run or layer name pasted into an issue pings nobody and links no issue, while
it still reads as typed.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

from ..findings import Finding, Report
from ..messages import render
from ..records import Run
from .i18n import cause_text, say, symptom_text, ui
from .text import where
from .verdicts import ICON, checks_of, incident_lines, sentence

_MD_SPECIAL = re.compile(r"([\\`*_\[\]|~])")
#: `@user`, `@org/team` (mentions) and `#123`, `GH-123`, `owner/repo#123` (issue references)
_GH_REFERENCE = re.compile(r"(@(?=[A-Za-z0-9])|(?:#|(?i:gh)-)(?=[0-9]))")
_ZWJ = "\u200d"
_ICON = {"critical": "🔴", "warning": "🟠", "info": "🔵", "healthy": "🟢", "inconclusive": "⚪"}


def md_escape(s: str) -> str:
    s = s.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
    s = _MD_SPECIAL.sub(r"\\\1", s)
    s = _GH_REFERENCE.sub(lambda m: m.group(1) + _ZWJ, s)
    return s.replace("\r", " ").replace("\n", " ")


def compare_md(comparison: dict[str, Any], lang: str) -> list[str]:
    """Several runs side by side: the table and the lines under it, then the baseline's report."""
    from .side_by_side import lines_under, table_rows

    head, rows = table_rows(comparison, lang)
    out = [
        f"## lossdoctor{ui(lang)['colon']}{render('compare.title', {'n': len(rows)}, lang)}",
        "",
        "| " + " | ".join(md_escape(h) for h in head) + " |",
        "|" + "---|" * len(head),
    ]
    out += ["| " + " | ".join(md_escape(c) for c in cells) + " |" for cells in rows]
    out.append("")
    out += [f"- {md_escape(x)}" for x in lines_under(comparison, lang)]
    out.append("")
    return out


def render_md(report: Report, *, lang: str = "en", runs: Sequence[Run] | None = None, **_: Any) -> str:
    if report.comparison:
        rest = render_md(
            Report(report.findings, report.steps, report.notes, report.source, report.inconclusive),
            lang=lang,
            runs=list(runs or [])[:1],
        )
        return "\n".join(compare_md(report.comparison, lang)) + "\n" + rest
    t = ui(lang)
    out = _headline(report, lang)
    if not report.findings:
        out += [t["no_findings"], ""]
    else:
        out += _findings_table(report.findings, lang)
        for i, f in enumerate(report.findings, 1):
            out += _finding_section(i, f, lang)
    verified = incident_lines(runs)
    if verified:
        out += [f"### {t['verification']}", ""]
        out.extend(f"- {md_escape(say(m, lang))}" for m in verified)
        out.append("")
    if report.notes:
        out += [f"<details><summary>{t['notes']}{t['lparen']}{len(report.notes)}{t['rparen']}</summary>", ""]
        out.extend(f"- {md_escape(say(n, lang))}" for n in report.notes)
        out += ["", "</details>", ""]
    out.append(f"<sub>{t['generated']}</sub>")
    return "\n".join(out) + "\n"


def _headline(report: Report, lang: str) -> list[str]:
    """The status line (with the primary cause and its step) and the source line."""
    t = ui(lang)
    head = f"## {_ICON[report.status]} lossdoctor{t['colon']}{t[report.status]}"
    if report.primary is not None:
        p = report.primary
        head += f" — `{p.cause}`" + (
            f"{t['lparen']}{render('ui.where_step', {'step': int(p.step)}, lang)}{t['rparen']}"
            if p.step is not None
            else ""
        )
    src = f"{report.steps} {t['steps']}"
    if report.source:
        src += f" · {t['from']} {md_escape(report.source)}"
    return [head, "", src, ""]


def _findings_table(findings: Sequence[Finding], lang: str) -> list[str]:
    """One row per finding: severity, cause, symptom, where, confidence."""
    t = ui(lang)
    out = [
        f"| # | {t['severity']} | {t['cause']} | {t['symptom']} | {t['where']} | {t['confidence']} |",
        "|---|---|---|---|---|---|",
    ]
    for i, f in enumerate(findings, 1):
        sev = f"{_ICON[f.severity]} {t[f.severity]}"
        out.append(
            f"| {i} | {sev} | `{f.cause}` | {f.symptom} | {md_escape(where(f, lang)) or '—'} | {f.confidence:.2f} |"
        )
    out.append("")
    return out


def _finding_section(i: int, f: Finding, lang: str) -> list[str]:
    """A finding's own section: what it means, where, its evidence and its fixes (each with the
    checks replayed from the snapshot)."""
    t = ui(lang)
    label = t["primary"] if i == 1 else render("ui.finding_n", {"n": i}, lang)
    out = [
        f"### {i}. `{f.cause}` — {label}",
        "",
        f"{md_escape(cause_text(f.cause, lang))}{t['lparen']}{md_escape(symptom_text(f.symptom, lang))}{t['rparen']}",
        "",
    ]
    w = where(f, lang)
    if w:
        out += [f"**{t['where']}{t['colon'].rstrip()}** {md_escape(w)}", ""]
    if f.evidence:
        out.append(f"**{t['evidence']}{t['colon'].rstrip()}**")
        out.extend(f"- {md_escape(say(e, lang))}" for e in f.evidence)
        out.append("")
    if f.fixes:
        out.append(f"**{t['fixes']}{t['colon'].rstrip()}**")
        for j, x in enumerate(f.fixes):
            out.append(f"- {md_escape(say(x, lang))}")
            out.extend(
                f"  - {ICON.get(str(c.get('verdict')), '')} {md_escape(sentence(c, lang))}" for c in checks_of(f, j)
            )  # replayed from the snapshot
        out.append("")
    return out
