"""Report formats: the same Report rendered as JSON (the contract), text, Markdown or HTML.

`render(report, fmt)` returns a string. Formats are imported lazily so `lossdoctor diagnose
--format json` does not pay for the HTML renderer.
"""

from __future__ import annotations

from typing import Any

from ..findings import Report

FORMATS = ("text", "json")


def render(report: Report, fmt: str = "text", *, color: bool = False, **options: Any) -> str:
    if fmt == "json":
        from .json_report import render_json

        return render_json(report)
    if fmt == "text":
        from .text import render_text

        return render_text(report, color=color, **options)
    raise ValueError(f"unknown format {fmt!r}; choose from {', '.join(FORMATS)}")
