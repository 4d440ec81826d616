"""Terminal report: colours in a terminal, plain text when piped (rich decides)."""

from __future__ import annotations

import io
from typing import Any

from ..findings import Finding, Report
from ..vocabulary import CAUSES

_STYLE = {"critical": "bold red", "warning": "yellow", "info": "cyan", "healthy": "green"}


def _where(f: Finding) -> str:
    parts = []
    if f.step is not None:
        parts.append(f"step {f.step}")
    if f.layer:
        parts.append(f"layer {f.layer}")
    if f.op:
        parts.append(f"op {f.op}")
    if f.samples:
        more = "..." if len(f.samples) > 8 else ""
        parts.append(f"samples {', '.join(map(str, f.samples[:8]))}{more}")
    if f.rank is not None:
        parts.append(f"rank {f.rank}")
    return ", ".join(parts)


def render_text(report: Report, *, color: bool = False, width: int = 100, **_: Any) -> str:
    from rich.console import Console
    from rich.markup import escape

    buf = io.StringIO()
    con = Console(file=buf, force_terminal=color, no_color=not color, width=width, highlight=False,
                  soft_wrap=False)
    status = report.status
    con.print(f"[bold]lossdoctor[/] - {report.steps} steps"
              + (f" from {escape(report.source)}" if report.source else "")
              + f" - status: [{_STYLE[status]}]{status.upper()}[/]")
    if not report.findings:
        con.print("No problems found.")
    for i, f in enumerate(report.findings, 1):
        con.print()
        label = "primary diagnosis" if i == 1 else f"finding {i}"
        con.print(f"[{_STYLE[f.severity]}]{f.severity.upper()}[/] {label}: [bold]{f.cause}[/] "
                  f"({f.symptom}, confidence {f.confidence:.2f})")
        con.print(f"  {escape(CAUSES.get(f.cause, ''))}")
        where = _where(f)
        if where:
            con.print(f"  where: {escape(where)}")
        for e in f.evidence:
            con.print(f"  - {escape(e)}")
        for fix in f.fixes:
            con.print(f"  [green]fix:[/] {escape(fix)}")
    if report.notes:
        con.print()
        con.print("[dim]notes:[/]")
        for n in report.notes:
            con.print(f"[dim]  - {escape(n)}[/]")
    return buf.getvalue()
