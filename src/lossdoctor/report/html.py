"""HTML report: one self-contained file that opens from disk with no network.

uPlot (vendored in `assets/`, MIT) draws the charts; `assets/report.js` wires them: loss with an
adjustable smoothing, gradient norm on a log scale with the clip threshold, learning rate, loss
scale with skipped steps marked, update/parameter ratio, other logged signals, per-layer heatmaps
from a lossdoctor run directory, and every finding pinned at its step (click a finding to zoom all
charts to it). Findings, evidence, fixes and notes are rendered here, server-side, with
`html.escape`; the chart data travels as JSON in a `<script type="application/json">` block with
`<`, `>` and `&` escaped, so nothing from a log can close the script or inject markup.
"""

from __future__ import annotations

import html
import json
from collections.abc import Sequence
from functools import cache
from importlib import resources
from typing import Any

from .._version import __version__
from ..findings import Report
from ..messages import render, safe_text
from ..records import Run
from .i18n import cause_text, say, symptom_text, ui
from .series import chart_data
from .side_by_side import compare_html
from .text import where
from .verdicts import ICON, checks_of, incident_lines, sentence, verdict_label

UPLOT_VERSION = "1.6.32"


@cache
def asset(name: str) -> str:
    return (resources.files("lossdoctor.report") / "assets" / name).read_text(encoding="utf-8")


def script_json(obj: Any) -> str:
    """JSON safe inside a <script> element."""
    s = json.dumps(obj, ensure_ascii=False, allow_nan=False, separators=(",", ":"))
    s = safe_text(s, json_safe=True)  # control characters, bidi overrides: JSON escapes
    return (
        s.replace("&", "\\u0026")
        .replace("<", "\\u003c")
        .replace(">", "\\u003e")
        .replace("\u2028", "\\u2028")
        .replace("\u2029", "\\u2029")
    )


def _e(s: Any) -> str:
    """Text for the page: control characters and bidi overrides as visible escapes, then HTML's."""
    return html.escape(safe_text(str(s)), quote=True)


def _finding_cards(report: Report, lang: str) -> str:
    t = ui(lang)
    if not report.findings:
        return f'<p class="empty">{_e(t["no_findings"])}</p>'
    out = []
    for i, f in enumerate(report.findings, 1):
        step_attr = f' data-step="{int(f.step)}"' if f.step is not None else ""
        label = t["primary"] if i == 1 else render("ui.finding_n", {"n": i}, lang)
        parts = [
            f'<div class="finding {_e(f.severity)}"{step_attr} data-cause="{_e(f.cause)}">',
            '<div class="title">'
            f'<span class="num">{i}</span><code>{_e(f.cause)}</code>'
            f'<span class="badge {_e(f.severity)}">{_e(t[f.severity])}</span>'
            f'<span class="where">{_e(label)} · {_e(f.symptom)} · {_e(t["confidence"])} '
            f"{f.confidence:.2f}</span></div>",
            f'<div class="expl">{_e(cause_text(f.cause, lang))}{_e(t["lparen"])}'
            f"{_e(symptom_text(f.symptom, lang))}{_e(t['rparen'])}</div>",
        ]
        w = where(f, lang)
        if w:
            parts.append(f'<div class="where">{_e(t["where"])}{_e(t["colon"])}{_e(w)}</div>')
        if f.evidence:
            parts.append(
                f'<div class="label">{_e(t["evidence"])}</div><ul class="evidence">'
                + "".join(f"<li>{_e(say(e, lang))}</li>" for e in f.evidence)
                + "</ul>"
            )
        if f.fixes:
            parts.append(
                f'<div class="label">{_e(t["fixes"])}</div><ul class="fixes">'
                + "".join(f"<li>{_e(say(x, lang))}{_verdicts(f, j, lang)}</li>" for j, x in enumerate(f.fixes))
                + "</ul>"
            )
        parts.append("</div>")
        out.append("".join(parts))
    return "\n".join(out)


def _verdicts(f, index: int, lang: str) -> str:
    """The verdicts of one fix (replayed from the snapshot), under it: a badge and the sentence."""
    out = []
    for c in checks_of(f, index):
        v = str(c.get("verdict", ""))
        out.append(
            f'<div class="verdict {_e(v)}" data-verdict="{_e(v)}">'
            f'<span class="vbadge" title="{_e(verdict_label(v, lang))}">{ICON.get(v, "")}</span> '
            f"{_e(sentence(c, lang))}</div>"
        )
    return "".join(out)


def _verification(runs: Sequence[Run], lang: str) -> str:
    """Per incident, what verifying its fixes did and cost (empty when it did not run)."""
    lines = incident_lines(runs)
    if not lines:
        return ""
    t = ui(lang)
    items = "".join(f"<li>{_e(say(m, lang))}</li>" for m in lines)
    return f'<section class="verification"><h2>{_e(t["verification"])}</h2><ul>{items}</ul></section>'


def render_html(report: Report, *, runs: Sequence[Run] | None = None, lang: str = "en", **_: Any) -> str:
    t = ui(lang)
    runs = list(runs or [])
    data = chart_data(report, runs, t)
    status = report.status
    path = next((str(r.meta["path"]) for r in runs if r.meta.get("path")), "")
    title = f"{t['title']} — {path or report.source or ''}"
    notes = "".join(f"<li>{_e(say(n, lang))}</li>" for n in report.notes)
    downsampled = ""
    for c in data["charts"]:
        s = c["series"][0]
        if s.get("decimated"):
            downsampled = _e(render("ui.downsampled", {"n": 2000, "total": s["n"]}, lang))
            break
    source = f" · {_e(t['from'])} {_e(report.source)}" if report.source else ""
    return f"""<!doctype html>
<html lang="{"zh-CN" if lang == "zh" else "en"}">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<meta name="generator" content="lossdoctor {_e(__version__)}">
<title>{_e(title)}</title>
<style>{asset("uPlot.min.css")}</style>
<style>{asset("report.css")}</style>
</head>
<body>
<header>
<h1>lossdoctor</h1>
<span class="badge {_e(status)}">{_e(t[status])}</span>
<span class="meta">{report.steps} {_e(t["steps"])}{source}</span>
<span class="meta">{_e(path)}</span>
</header>
{compare_html(report.comparison, lang)}
<div class="layout">
<main class="charts" id="ld-charts">
<h2>{_e(t["signals"])}</h2>
<p class="hint">{_e(t["zoom_hint"])}{(" · " + downsampled) if downsampled else ""}</p>
</main>
<aside class="findings" id="ld-findings">
<h2>{_e(t["findings"])}</h2>
{_finding_cards(report, lang)}
</aside>
</div>
{_verification(runs, lang)}
<section class="notes">
<details{" open" if len(report.notes) <= 6 else ""}><summary>{_e(t["notes"])}{_e(t["lparen"])}{len(report.notes)}{_e(t["rparen"])}</summary>
<ul>{notes}</ul>
</details>
</section>
<footer>{_e(t["generated"])} {_e(__version__)} · uPlot {UPLOT_VERSION} (MIT)</footer>
<script type="application/json" id="ld-data">{script_json(data)}</script>
<script>{asset("uPlot.iife.min.js")}</script>
<script>{asset("report.js")}</script>
</body>
</html>
"""
