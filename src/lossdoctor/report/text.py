"""Terminal report: colours in a terminal, plain text when piped (the CLI decides `color`; rich
renders). Everything that came from a log or a detector is escaped, so a tag like `[bold]` in a
metric name prints as itself, and (`messages.safe_text`, before rich styles it) a control
character or a bidi override prints as a visible escape, so only rich's own colour codes reach a
colour terminal."""

from __future__ import annotations

import io
from collections.abc import Callable, Sequence
from typing import Any

from ..findings import Finding, Report
from ..messages import render, safe_text
from ..records import Run
from .i18n import cause_text, say, ui
from .verdicts import checks_of, incident_lines, sentence

_STYLE = {"critical": "bold red", "warning": "yellow", "info": "cyan", "healthy": "green", "inconclusive": "magenta"}


def where(f: Finding, lang: str = "en") -> str:
    """Where a finding is: "step 431, layer h.3.attn" / "第 431 步，层 h.3.attn"."""
    parts = []
    if f.step is not None:
        parts.append(render("ui.where_step", {"step": f.step}, lang))
    if f.layer:
        parts.append(render("ui.where_layer", {"layer": f.layer}, lang))
    if f.op:
        parts.append(render("ui.where_op", {"op": f.op}, lang))
    if f.code:  # the user's file and line of the first bad op (replay)
        parts.append(render("ui.where_code", {k: f.code.get(k) for k in ("file", "line", "function")}, lang))
    if f.samples:
        more = "..." if len(f.samples) > 8 else ""
        parts.append(render("ui.where_samples", {"samples": ", ".join(map(str, f.samples[:8])) + more}, lang))
    if f.examples:  # packed rows: the examples inside them are what the user can act on
        shown = [
            render("labels.example_in_row", {k: e.get(k) for k in ("row", "example", "start", "end")}, lang)
            for e in f.examples[:4]
            if all(isinstance(e.get(k), int) for k in ("row", "example", "start", "end"))
        ]
        if shown:
            more = "..." if len(f.examples) > 4 else ""
            parts.append(render("ui.where_examples", {"examples": ui(lang)["comma"].join(shown) + more}, lang))
    if f.rank is not None:
        parts.append(render("ui.where_rank", {"rank": f.rank}, lang))
    return ui(lang)["comma"].join(parts)


_BARS = "▁▂▃▄▅▆▇█"


def sparkline(run: Run, name: str = "loss", width: int = 48) -> str | None:
    """The series as one line of block characters (bucket means, log-scaled when it spans decades);
    `x` marks a bucket holding a non-finite value. None when the run did not log it."""
    import numpy as np

    if not run.has(name) or name not in run.cols:
        return None
    y = run.cols[name][run.logged(name)]
    if y.size < 2:
        return None
    edges = np.linspace(0, y.size, min(width, y.size) + 1).astype(int)
    out = []
    means = []
    for a, b in zip(edges[:-1], edges[1:]):
        seg = y[a:b]
        fin = seg[np.isfinite(seg)]
        means.append(float(fin.mean()) if fin.size == seg.size and fin.size else None)
    vals = [m for m in means if m is not None]
    if not vals:
        return "x" * len(means)
    lo, hi = min(vals), max(vals)
    if lo > 0 and hi / lo > 100:
        tf = np.log10
        lo, hi = float(tf(lo)), float(tf(hi))
    else:
        tf = None
    for m in means:
        if m is None:
            out.append("x")
            continue
        v = float(np.log10(m)) if tf is not None else m
        k = 0 if hi == lo else int(round((v - lo) / (hi - lo) * (len(_BARS) - 1)))
        out.append(_BARS[k])
    return "".join(out)


def render_text(
    report: Report,
    *,
    color: bool = False,
    width: int = 100,
    lang: str = "en",
    runs: Sequence[Run] | None = None,
    **_: Any,
) -> str:
    from rich.console import Console
    from rich.markup import escape as markup_escape

    def escape(s: str) -> str:
        return markup_escape(safe_text(s))

    if report.comparison:  # several runs side by side (lossdoctor diagnose RUN_A RUN_B)
        from .side_by_side import render_compare_text

        return render_compare_text(report.comparison, color=color, width=width, lang=lang)
    t = ui(lang)
    buf = io.StringIO()
    con = Console(
        file=buf, force_terminal=color, no_color=not color, width=width, highlight=False, soft_wrap=False, emoji=False
    )
    status = report.status
    con.print(
        f"[bold]lossdoctor[/] - {report.steps} {t['steps']}"
        + (f" - {t['from']} {escape(report.source)}" if report.source else "")
        + f" - {t['status']}{t['colon']}[{_STYLE[status]}]{t[status].upper() if lang == 'en' else t[status]}[/]"
    )
    for run in list(runs or [])[:1]:
        line = sparkline(run)
        if line:
            first, last = int(run.steps[0]), int(run.steps[-1])
            con.print(f"{t['loss']} [dim]{first}[/] {escape(line).replace('x', '[red]x[/]')} [dim]{last}[/]")
    if not report.findings:
        con.print(t["no_findings"])
    for i, f in enumerate(report.findings, 1):
        _print_finding(con, i, f, t, lang, escape)
    verified = incident_lines(runs)
    if verified:
        con.print()
        con.print(f"[bold]{t['verification']}[/]")
        for m in verified:
            con.print(f"  - {escape(say(m, lang))}")
    if report.notes:
        con.print()
        con.print(f"[dim]{t['notes']}{t['colon'].rstrip()}[/]")
        for n in report.notes:
            con.print(f"[dim]  - {escape(say(n, lang))}[/]")
    return buf.getvalue()


def _print_finding(con: Any, i: int, f: Finding, t: dict[str, str], lang: str, escape: Callable[[str], str]) -> None:
    """Finding `i` (1 is the primary): its headline, cause, place, evidence, fixes with their
    verdicts; `t` the report's labels in `lang`. Apart from `render_text` to keep it short."""
    con.print()
    label = t["primary"] if i == 1 else render("ui.finding_n", {"n": i}, lang)
    sev = f.severity.upper() if lang == "en" else t[f.severity]
    con.print(
        f"[{_STYLE[f.severity]}]{sev}[/] {label}{t['colon']}[bold]{escape(f.cause)}[/]"
        f"{t['lparen']}{escape(f.symptom)}{t['comma']}{t['confidence']} {f.confidence:.2f}{t['rparen']}"
    )
    con.print(f"  {escape(cause_text(f.cause, lang))}")
    w = where(f, lang)
    if w:
        con.print(f"  {t['where']}{t['colon']}{escape(w)}")
    for e in f.evidence:
        con.print(f"  - {escape(say(e, lang))}")
    for j, fix in enumerate(f.fixes):
        con.print(f"  [green]{t['fix']}{t['colon']}[/]{escape(say(fix, lang))}")
        for check in fix_verdicts(f, j, lang):  # replayed from the snapshot (triage/verify.py)
            con.print(f"    [dim]->[/] {escape(check)}")


def fix_verdicts(f: Finding, index: int, lang: str) -> list[str]:
    """The verdicts of fix `index` of a finding (`fix_checks`), in `lang`."""
    return [sentence(c, lang) for c in checks_of(f, index)]
