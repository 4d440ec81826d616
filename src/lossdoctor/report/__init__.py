"""Report formats: the same Report rendered as JSON (the contract), text, Markdown or HTML.

`render(report, fmt, runs=..., lang=...)` returns a string. The HTML report draws the run's series,
so it needs the `Run`s the report was made from (`runs`); the other formats ignore them. `lang`
("en" or "zh") applies to the human formats; JSON always speaks the contract's English names.
Formats are imported lazily so `--format json` does not pay for the HTML renderer.

Whatever the format, the string returned has passed `messages.safe_output`: no control character,
bidi override or undecodable file-name byte read from a log reaches a terminal or a document raw.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from ..findings import RENDERERS, Report

if TYPE_CHECKING:
    from ..records import Run

FORMATS = ("text", "json", "md", "html")


def _text(report: Report) -> str:
    return render(report, "text")


def _html(report: Report) -> str:
    return render(report, "html")


# `print(report)` and a notebook's display of a Report (findings.Report.__str__ / _repr_html_)
RENDERERS.update({"text": _text, "html": _html})
LANGS = ("en", "zh")


def render(
    report: Report,
    fmt: str = "text",
    *,
    runs: Sequence[Run] | None = None,
    lang: str = "en",
    color: bool = False,
    **options: Any,
) -> str:
    from ..messages import safe_output

    return safe_output(_render(report, fmt, runs=runs, lang=lang, color=color, **options), fmt, color=color)


def _render(report: Report, fmt: str, *, runs: Sequence[Run] | None, lang: str, color: bool, **options: Any) -> str:
    if lang not in LANGS:
        raise ValueError(f"unknown language {lang!r}; choose from {', '.join(LANGS)}")
    if fmt == "json":
        from .json_report import render_json

        return render_json(report)
    if fmt == "text":
        from .text import render_text

        return render_text(report, color=color, lang=lang, runs=runs, **options)
    if fmt == "md":
        from .markdown import render_md

        return render_md(report, lang=lang, runs=runs, **options)
    if fmt == "html":
        from .html import render_html

        return render_html(report, runs=runs, lang=lang, **options)
    raise ValueError(f"unknown format {fmt!r}; choose from {', '.join(FORMATS)}")
