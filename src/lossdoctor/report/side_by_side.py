"""Several runs side by side: the text table and the lines under it, and the HTML table, from a
report's `comparison` object (`detectors.comparison.compare`)."""

from __future__ import annotations

import html
import io
import textwrap
from typing import Any

from ..messages import fmt, render, safe_text
from .i18n import ui


def _value(v: Any) -> str:
    if v is None:
        return "-"
    if isinstance(v, bool):
        return str(v).lower()
    if isinstance(v, float):
        return fmt(v)
    if isinstance(v, list):
        return "(" + ", ".join(_value(x) for x in v) + ")"
    return str(v)


def _final(r: dict[str, Any], lang: str) -> str:
    """The final loss, or `nan from 431` when the run's loss went non-finite and stayed so."""
    if r.get("final_loss") is None and r.get("first_nonfinite") is not None:
        return render("compare.nonfinite", {"step": r["first_nonfinite"]}, lang)
    return _value(r.get("final_loss"))


def table_rows(comparison: dict[str, Any], lang: str) -> tuple[list[str], list[list[str]]]:
    """The table's headings and one row of cells per run: label, status, top finding, final and
    minimum loss, steps, then each setting that differs."""
    t = ui(lang)
    differing = comparison.get("differing", {})
    head = [render(f"compare.col.{k}", {}, lang) for k in ("run", "status", "top", "final", "min", "steps")]
    head += list(differing)
    rows = []
    for i, r in enumerate(comparison.get("runs", [])):
        top = r.get("top")
        cells = [
            str(r.get("label")),
            t.get(str(r.get("status")), str(r.get("status"))),
            "-" if top is None else f"{top['cause']} ({top['symptom']})",
            _final(r, lang),
            _value(r.get("min_loss")),
            str(r.get("steps")),
        ]
        cells += [_value(values[i]) for values in differing.values()]
        rows.append(cells)
    return head, rows


def lines_under(comparison: dict[str, Any], lang: str) -> list[str]:
    """The settings that differ, and per run where its loss parts from the baseline's."""
    runs = comparison.get("runs", [])
    differing = comparison.get("differing", {})
    out = []
    if differing:
        names = "; ".join(f"{n} {' | '.join(_value(v) for v in vs)}" for n, vs in differing.items())
        out.append(render("compare.differ", {"names": names}, lang))
    else:
        read = sorted({k for r in runs for k in r.get("settings", {})})
        out.append(
            render("compare.same", {"names": ", ".join(read)}, lang)
            if read
            else render("compare.no_settings", {}, lang)
        )
    for p in comparison.get("parting", []):
        values = {
            "run": runs[p["run"]]["label"],
            "base": runs[p["baseline"]]["label"],
            "n": p["aligned"],
            "step": p["step"],
            "diff": p["difference"],
            "noise": p["noise"],
            "threshold": p["threshold"],
            **{k: p["rule"][k] for k in ("k", "consecutive")},
        }
        key = {"parted": "compare.parted", "together": "compare.together"}.get(p["verdict"], "compare.too_short")
        out.append(render(key, values, lang))
    return out


def render_compare_text(comparison: dict[str, Any], *, color: bool, width: int, lang: str) -> str:
    from rich.console import Console
    from rich.markup import escape as markup_escape
    from rich.table import Table

    def esc(s: str) -> str:
        return markup_escape(safe_text(s))

    buf = io.StringIO()
    con = Console(
        file=buf, force_terminal=color, no_color=not color, width=width, highlight=False, soft_wrap=False, emoji=False
    )
    runs = comparison.get("runs", [])
    con.print(f"[bold]lossdoctor[/] - {esc(render('compare.title', {'n': len(runs)}, lang))}")
    head, rows = table_rows(comparison, lang)
    table = Table(box=None, pad_edge=False, show_edge=False, header_style="bold", expand=False)
    for i, h in enumerate(head):
        table.add_column(esc(h), justify="right" if i in (3, 4, 5) else "left", overflow="fold")
    for cells in rows:
        table.add_row(*(esc(c) for c in cells))
    con.print(table)
    con.print()
    for line in lines_under(comparison, lang):  # a hanging indent, so each sentence reads as one item
        for i, part in enumerate(textwrap.wrap(line, max(20, width - 2)) or [""]):
            con.print(("- " if i == 0 else "  ") + esc(part))
    if runs:
        con.print(f"[dim]{esc(render('compare.hint', {'path': runs[0].get('path')}, lang))}[/]")
    return buf.getvalue()


def compare_html(comparison: dict[str, Any] | None, lang: str) -> str:
    """The comparison's table and lines as an HTML section (empty for one run)."""
    if not comparison:
        return ""

    def e(s: Any) -> str:
        return html.escape(safe_text(str(s)), quote=True)

    head, rows = table_rows(comparison, lang)
    thead = "".join(f"<th>{e(h)}</th>" for h in head)
    body = "".join("<tr>" + "".join(f"<td>{e(c)}</td>" for c in cells) + "</tr>" for cells in rows)
    items = "".join(f"<li>{e(x)}</li>" for x in lines_under(comparison, lang))
    title = e(render("compare.title", {"n": len(comparison.get("runs", []))}, lang))
    return (
        f'<section class="comparison" id="ld-comparison"><h2>{title}</h2>'
        f"<table><thead><tr>{thead}</tr></thead><tbody>{body}</tbody></table><ul>{items}</ul></section>"
    )
