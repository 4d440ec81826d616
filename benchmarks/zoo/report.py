"""Tables from run scores: a per-scenario table, a summary, a per-cause table, and the evidence of
misses. Every table is produced as GitHub markdown; the terminal prints the same text."""

from __future__ import annotations

import statistics
from collections import defaultdict
from collections.abc import Iterable
from typing import Any

from .harness import Scenario
from .score import RunScore


def _frac(values: Iterable[bool | None]) -> tuple[int, int]:
    vs = [v for v in values if v is not None]
    return sum(1 for v in vs if v), len(vs)


def fmt_frac(values: Iterable[bool | None]) -> str:
    k, n = _frac(values)
    return f"{k}/{n}" if n else "–"


def pct(values: Iterable[bool | None]) -> str:
    k, n = _frac(values)
    return f"{100.0 * k / n:.0f}% ({k}/{n})" if n else "–"


def table(header: list[str], rows: list[list[str]]) -> str:
    out = ["| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|"]
    for r in rows:
        out.append("| " + " | ".join(str(c).replace("|", "\\|") for c in r) + " |")
    return "\n".join(out)


def _got(scores: list[RunScore], path: str) -> str:
    """Primary diagnosis per seed, run-length encoded: `lr_too_high x2, - x1`."""
    counts: dict[str, int] = defaultdict(int)
    for s in scores:
        ps = getattr(s, path)
        counts["ERROR" if ps.error else ps.got] += 1
    return ", ".join(f"{k} ×{v}" if len(scores) > 1 else k for k, v in counts.items())


def _loc(scores: list[RunScore]) -> str:
    parts = []
    for name, attr in (("layer", "layer_hit"), ("op", "op_hit"), ("samples", "sample_hit")):
        k, n = _frac(getattr(s.full, attr) for s in scores)
        if n:
            parts.append(f"{name} {k}/{n}")
    return ", ".join(parts) or "–"


def _delay(scores: list[RunScore]) -> str:
    d = [s.live_delay for s in scores if s.live_delay is not None]
    return str(int(statistics.median(d))) if d else "–"


def per_scenario(scores: list[RunScore], scenarios: dict[str, Scenario]) -> str:
    by: dict[str, list[RunScore]] = defaultdict(list)
    for s in scores:
        by[s.scenario].append(s)
    rows = []
    for name, ss in by.items():
        scn = scenarios[name]
        kind = f"{scn.family}/{scn.optimizer}/{scn.precision}/{scn.task}"
        if scn.healthy:
            expected = "(healthy)"
            res = f"alarms {fmt_frac(s.full.false_alarm for s in ss)}"
            res_s = f"alarms {fmt_frac(s.scalars.false_alarm for s in ss)}"
            rows.append([name, kind, expected, _got(ss, "full"), res, "–", "–", "–", _got(ss, "scalars"), res_s])
            continue
        expected = ", ".join(sorted(scn.causes))
        rows.append(
            [
                name,
                kind,
                expected,
                _got(ss, "full"),
                f"{fmt_frac(s.full.top1 for s in ss)} / {fmt_frac(s.full.top3 for s in ss)}",
                fmt_frac(s.full.onset_hit for s in ss),
                _loc(ss),
                _delay(ss),
                _got(ss, "scalars"),
                f"{fmt_frac(s.scalars.top1 for s in ss)} / {fmt_frac(s.scalars.top3 for s in ss)}",
            ]
        )
    return table(
        [
            "scenario",
            "model/optimizer/precision/task",
            "acceptable causes",
            "got (full log)",
            "top-1 / top-3",
            "onset ±2",
            "where",
            "live delay",
            "got (scalars only)",
            "scalars top-1 / top-3",
        ],
        rows,
    )


def summary(scores: list[RunScore]) -> str:
    faulty = [s for s in scores if not s.healthy]
    healthy = [s for s in scores if s.healthy]
    rows = []
    for label, path in (("full run log (watch)", "full"), ("scalars only (loss, grad_norm, lr, scale)", "scalars")):
        ps = [getattr(s, path) for s in faulty]
        hs = [getattr(s, path) for s in healthy]
        delays = [s.live_delay for s in faulty if s.live_delay is not None] if path == "full" else []
        rows.append(
            [
                label,
                pct(p.top1 for p in ps),
                pct(p.top3 for p in ps),
                pct(p.onset_hit for p in ps),
                pct(p.layer_hit for p in ps) if path == "full" else "–",
                pct(p.op_hit for p in ps) if path == "full" else "–",
                pct(p.sample_hit for p in ps) if path == "full" else "–",
                pct(h.false_alarm for h in hs),
                (f"{statistics.median(delays):.0f} (max {max(delays)})" if delays else "–"),
                str(sum(1 for p in ps + hs if p.error or p.detector_errors)),
                _withdrawn(healthy, faulty) if path == "full" else "–",
            ]
        )
    return table(
        [
            "path",
            "top-1",
            "top-3",
            "onset ±2",
            "layer",
            "op",
            "samples",
            "false alarms (healthy)",
            "live delay, steps (median)",
            "runs where a detector crashed",
            "live alerts withdrawn (healthy; faulty)",
        ],
        rows,
    )


def _withdrawn(healthy: list[RunScore], faulty: list[RunScore]) -> str:
    """Runs on which `watch` announced an alarm the end did not hold: healthy controls with any live
    alarm, faulty runs with a withdrawn cause other than the final top-1 (score.withdrawn_live)."""
    h = sum(1 for s in healthy if s.live_withdrawn)
    f = sum(1 for s in faulty if s.live_withdrawn)
    return f"{h}/{len(healthy)}; {f}/{len(faulty)}"


def withdrawn(scores: list[RunScore]) -> str:
    """Which live alarms were withdrawn, per scenario: the seeds and `cause@step raised` of each."""
    by: dict[str, list[str]] = defaultdict(list)
    for s in scores:
        if s.live_withdrawn:
            by[s.scenario].append(f"seed {s.seed}: " + ", ".join(s.live_withdrawn))
    rows = [
        [name, "healthy" if any(s.healthy for s in scores if s.scenario == name) else "faulty", "; ".join(v)]
        for name, v in sorted(by.items())
    ]
    return table(["scenario", "kind", "live alarms withdrawn (cause@step raised)"], rows) if rows else "(none)"


def per_cause(scores: list[RunScore], causes: Iterable[str]) -> str:
    rows = []
    for c in causes:
        ss = [s for s in scores if not s.healthy and c in s.causes]
        if not ss:
            rows.append([c, "0", "–", "–", "–"])
            continue
        names = sorted({s.scenario for s in ss})
        rows.append(
            [
                c,
                str(len(names)),
                pct(s.full.top1 for s in ss),
                pct(s.full.top3 for s in ss),
                pct(s.scalars.top3 for s in ss),
            ]
        )
    return table(["cause", "scenarios accepting it", "top-1", "top-3", "scalars-only top-3"], rows)


def misses(scores: list[RunScore], evidence_of: Any) -> str:
    """For every faulty run not diagnosed top-1, every false alarm and every run on which a detector
    crashed: what the engine said and the step records' numbers, for whoever tunes the detectors."""
    out = []
    for s in scores:
        crashed = bool(s.full.detector_errors or s.scalars.detector_errors)
        if s.healthy and not s.full.false_alarm and not crashed:
            continue
        if not s.healthy and s.full.top1 and not crashed:
            continue
        head = f"### {s.scenario} (seed {s.seed})"
        want = "healthy" if s.healthy else " | ".join(s.causes)
        got = (
            "; ".join(
                f"{f['cause']}({f['severity']}, step {f['step']}, layer {f['layer']})" for f in s.full.findings[:3]
            )
            or "no alarm"
        )
        lines = [
            head,
            f"- expected: {want}" + (f", onset {s.onset}" if s.onset is not None else ""),
            f"- got: {got}" + (f" [engine error: {s.full.error}]" if s.full.error else ""),
        ]
        lines += [f"- detector crashed: {n}" for n in s.full.detector_errors]
        lines += [f"- detector crashed (scalars only): {n}" for n in s.scalars.detector_errors]
        try:
            ev = evidence_of(s)
        except Exception as e:  # the evidence is a help, never a reason to lose the report
            ev = {"error": str(e)}
        lines += [f"- {k}: {v}" for k, v in ev.items()]
        out.append("\n".join(lines))
    return "\n\n".join(out) if out else "(none)"
