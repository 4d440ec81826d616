"""Terminal report: colours in a terminal, plain text when piped (the CLI decides `color`; rich
renders). Everything that came from a log or a detector is escaped, so a tag like `[bold]` in a
metric name prints as itself."""

from __future__ import annotations

import io
from typing import Any, Sequence

from ..findings import Finding, Report
from ..records import Run
from .i18n import cause_text, translate, ui

_STYLE = {"critical": "bold red", "warning": "yellow", "info": "cyan", "healthy": "green"}


def where(f: Finding, lang: str = "en") -> str:
    t = ui(lang)
    parts = []
    if f.step is not None:
        parts.append(f"{t['step']} {f.step}")
    if f.layer:
        parts.append(f"{t['layer']} {f.layer}")
    if f.op:
        parts.append(f"{t['op']} {f.op}")
    if f.samples:
        more = "..." if len(f.samples) > 8 else ""
        parts.append(f"{t['samples']} {', '.join(map(str, f.samples[:8]))}{more}")
    if f.rank is not None:
        parts.append(f"{t['rank']} {f.rank}")
    return ", ".join(parts)


def render_text(report: Report, *, color: bool = False, width: int = 100, lang: str = "en",
                runs: Sequence[Run] | None = None, **_: Any) -> str:
    from rich.console import Console
    from rich.markup import escape

    t = ui(lang)
    buf = io.StringIO()
    con = Console(file=buf, force_terminal=color, no_color=not color, width=width, highlight=False,
                  soft_wrap=False, emoji=False)
    status = report.status
    con.print(f"[bold]lossdoctor[/] - {report.steps} {t['steps']}"
              + (f" - {t['from']} {escape(report.source)}" if report.source else "")
              + f" - {t['status']}: [{_STYLE[status]}]{t[status].upper() if lang == 'en' else t[status]}[/]")
    if not report.findings:
        con.print(t["no_findings"])
    for i, f in enumerate(report.findings, 1):
        con.print()
        label = t["primary"] if i == 1 else f"{t['finding']} {i}"
        sev = f.severity.upper() if lang == "en" else t[f.severity]
        con.print(f"[{_STYLE[f.severity]}]{sev}[/] {label}: [bold]{escape(f.cause)}[/] "
                  f"({escape(f.symptom)}, {t['confidence']} {f.confidence:.2f})")
        con.print(f"  {escape(cause_text(f.cause, lang))}")
        w = where(f, lang)
        if w:
            con.print(f"  {t['where']}: {escape(w)}")
        for e in f.evidence:
            con.print(f"  - {escape(translate(e, lang))}")
        for fix in f.fixes:
            con.print(f"  [green]{t['fix']}:[/] {escape(translate(fix, lang))}")
    if report.notes:
        con.print()
        con.print(f"[dim]{t['notes']}:[/]")
        for n in report.notes:
            con.print(f"[dim]  - {escape(translate(n, lang))}[/]")
    return buf.getvalue()
