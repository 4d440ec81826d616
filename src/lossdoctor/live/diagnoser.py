"""Live diagnosis: the same engine as `lossdoctor diagnose`, run on the history so far.

The history is kept as typed columns (8 bytes a value) rather than dicts, so a long run costs
little memory. The engine runs on a schedule that thins out as the run gets longer (every 25 steps
early, every ~2% of the run later: linear total cost) and immediately when something new goes
wrong (a non-finite value, a skipped step, bad data), at most once every few steps.

Alerts go to stderr (through `tqdm.write` while a tqdm bar is shown) once per incident: a finding is announced when its (cause, layer) has not been
announced yet, when it begins again more than `rearm_after` steps after the last announcement, or
when it grew graver (a gradient surge announced as a warning that then went NaN: critical).
They speak the user's language: the locale's (LANG=zh_CN.UTF-8 -> Chinese) unless a program sets
one with `set_alert_language` (`lossdoctor demo --lang` does).
"""

from __future__ import annotations

import logging
import math
import sys
from array import array
from collections.abc import Callable
from typing import Any

from ..findings import Finding, Report
from ..records import COLUMNS, EVENTS, Run

log = logging.getLogger("lossdoctor")

#: the language of the alerts; None: the locale's, looked up when an alert is printed
ALERT_LANG: str | None = None


def set_alert_language(lang: str | None) -> None:
    """Alerts in `lang` ("en", "zh"), or in the locale's language again with None."""
    global ALERT_LANG
    ALERT_LANG = lang


def alert_language() -> str:
    from ..messages import locale_lang

    return ALERT_LANG or locale_lang()


TRIGGERS = (
    "batch_nonfinite_detail",
    "fwd_first_nonfinite",
    "bwd_first_nonfinite",
    "nonfinite_params",
    "label_empty_sample_ids",
)


class History:
    """Append-only columnar copy of the step records."""

    def __init__(self) -> None:
        self.steps = array("q")
        self.cols: dict[str, array] = {}
        self.logged: dict[str, bytearray] = {}  # a logged NaN loss is the failure, not a gap
        self.events: dict[str, dict[int, Any]] = {}

    def append(self, rec: dict[str, Any]) -> None:
        n = len(self.steps)
        self.steps.append(int(rec["step"]))
        for k, v in rec.items():
            if k in COLUMNS:
                col = self.cols.get(k)
                if col is None:
                    col = self.cols[k] = array("d", [math.nan]) * n
                    self.logged[k] = bytearray(n)
                col.append(_num(v))
                self.logged[k].append(v is not None)
            elif k in EVENTS and v is not None:
                self.events.setdefault(k, {})[int(rec["step"])] = v
        for k, col in self.cols.items():
            if len(col) == n:  # not in this record
                col.append(math.nan)
                self.logged[k].append(0)

    def run(self, meta: dict[str, Any], rank: int | None) -> Run:
        import numpy as np

        steps = np.frombuffer(self.steps, dtype=np.int64).copy()
        cols = {k: np.frombuffer(c, dtype=np.float64).copy() for k, c in self.cols.items()}
        logged = {k: np.frombuffer(m, dtype=np.uint8).astype(bool) for k, m in self.logged.items()}
        events = {k: dict(v) for k, v in self.events.items()}
        return Run(steps=steps, cols=cols, events=events, meta=meta, logged_mask=logged, rank=rank)


def _num(v: Any) -> float:
    if v is None:
        return math.nan
    if isinstance(v, bool):
        return 1.0 if v else 0.0
    try:
        return float(v)
    except (TypeError, ValueError):
        return math.nan


class LiveDiagnoser:
    def __init__(
        self,
        meta: dict[str, Any],
        *,
        rank: int | None = None,
        alerts: bool = True,
        rearm_after: int = 100,
        on_finding: Callable[[Finding], None] | None = None,
        layers_fn: Callable[[], Any] | None = None,
    ) -> None:
        self.meta = meta
        self.layers_fn = layers_fn
        self.rank = rank
        self.alerts = alerts
        self.rearm_after = rearm_after
        self.on_finding = on_finding
        self.history = History()
        self.preflight: list[dict[str, Any]] = []  # appended by the monitor's preflight checks
        self.incidents: list[dict[str, Any]] = []  # incident records (the monitor shares its list)
        self.probes: list[dict[str, Any]] = []  # LR probe records (triage shares its list)
        self.report: Report | None = None
        self._next_check = 0
        self._last_trigger = -(10**9)
        #: (cause, layer) -> (the step and the severity rank last announced)
        self._announced: dict[tuple[str, str | None], tuple[int, int]] = {}

    def observe(self, rec: dict[str, Any]) -> None:
        self.history.append(rec)
        step = int(rec["step"])
        triggered = any(rec.get(k) for k in TRIGGERS) or bool(rec.get("skipped")) or _nonfinite(rec.get("loss"))
        if step >= self._next_check or (triggered and step - self._last_trigger >= 5):
            if triggered:
                self._last_trigger = step
            self._next_check = step + max(25, step // 50)
            self.evaluate()

    def evaluate(self) -> Report:
        from ..detectors.engine import diagnose_runs

        run = self.history.run(self.meta, self.rank)
        run.preflight = list(self.preflight)
        run.incidents = list(self.incidents) + list(self.probes)
        if self.layers_fn is not None:
            run.layers = self.layers_fn()
        self.report = diagnose_runs([run])
        for f in self.report.findings:
            self._maybe_announce(f)
        return self.report

    def _maybe_announce(self, f: Finding) -> None:
        if f.severity == "info":
            return
        key = (f.cause, f.layer)
        last = self._announced.get(key)
        step = f.step if f.step is not None else -1
        if last is not None and step <= last[0] + self.rearm_after and f.severity_rank <= last[1]:
            return
        self._announced[key] = (step, f.severity_rank)
        if self.on_finding is not None:
            self.on_finding(f)
        if self.alerts:
            from ..messages import safe_text

            write_alert(safe_text(alert_line(f, alert_language()), newlines=False))


def write_alert(text: str) -> None:
    """One line on stderr; while a tqdm bar is on screen, through `tqdm.write` (the bar is cleared,
    the line printed, the bar drawn again below it) so the line is never glued to the bar. tqdm is
    used only when the process already imported it."""
    std = sys.modules.get("tqdm.std")
    bar = getattr(std, "tqdm", None)
    if bar is not None and getattr(bar, "_instances", None):
        try:
            bar.write(text, file=sys.stderr)
            sys.stderr.flush()
            return
        except Exception:  # a tqdm that cannot write: stderr as without one
            pass
    print(text, file=sys.stderr, flush=True)


def _nonfinite(v: Any) -> bool:
    return isinstance(v, float) and not math.isfinite(v)


def alert_line(f: Finding, lang: str = "en") -> str:
    """The one stderr line of a new finding: what, where, its first evidence and its first fix."""
    from ..messages import Msg, render, say

    where: list[str] = []
    if f.step is not None:
        where.append(Msg("live.step", step=f.step))
    if f.layer:
        where.append(f.layer)
    if f.op:
        where.append(f.op)
    if f.samples:
        where.append(Msg("live.samples", samples=str(f.samples[:8])))
    if f.examples:  # packed rows: the examples inside them
        where.append(
            Msg(
                "live.packed_examples",
                examples=[
                    Msg(
                        "labels.example_in_row",
                        row=e.get("row"),
                        example=e.get("example"),
                        start=e.get("start"),
                        end=e.get("end"),
                    )
                    for e in f.examples[:3]
                ],
            )
        )
    if f.rank is not None:
        where.append(Msg("live.rank", rank=f.rank))
    head = render(
        "live.alert",
        {
            "severity": Msg(f"live.{f.severity}"),
            "cause": f.cause,
            "symptom": f.symptom,
            "where": where or Msg("live.run"),
        },
        lang,
    )
    body = say(f.evidence[0], lang) if f.evidence else ""
    fix = render("live.fix", {"fix": say(f.fixes[0], lang)}, lang) if f.fixes else ""
    return f"{head}{body}{fix}"
