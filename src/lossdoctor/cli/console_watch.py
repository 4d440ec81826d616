"""The console fallback of `lossdoctor run`: when nothing in the process was hooked, read what it printed.

The hooks record `steps.jsonl` in the run directory once torch's first optimizer step is seen. A
command that never gets there (a JAX or TensorFlow script, a compiled trainer, a shell wrapper
whose workers do not inherit the environment) leaves only its console, which `console_tee` copies
to `console.log`. This module reads that copy with the same readers `lossdoctor diagnose` uses:
now and then while the command runs (one alert line per new warning/critical finding, on stderr),
and once at its end, with a note in the report that the diagnosis comes from the console.

Torch-free (this runs in the `lossdoctor run` process).
"""

from __future__ import annotations

import os
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

from ..records import Run
from .console_tee import CONSOLE_FILE

#: the name of the per-step file the hooks write (sources.rundir.STEPS), named here so the console path loads no reader
STEPS_FILE = "steps.jsonl"


@dataclass(frozen=True)
class LiveConsoleLimits:
    """How often and how far the running command's console is re-read."""

    #: seconds between reads: a finding a few seconds late is as useful, and each read parses the
    #: console from its start (measured: ~0.2 s per MB on 2 cores)
    interval_s: float = 5.0
    #: past this size the console is read only at the end: a live re-read would cost more than
    #: the alert is worth
    max_live_bytes: int = 32 << 20
    #: the first reads wait for this many bytes: a console that has printed less holds no curve
    min_bytes: int = 200


LIMITS = LiveConsoleLimits()


def recorded_steps(log_dir: Path) -> bool:
    """The hooks recorded at least one step somewhere in the run directory (itself, rank-N/,
    version_N/ or both)."""
    for pattern in (STEPS_FILE, f"*/{STEPS_FILE}", f"*/*/{STEPS_FILE}"):
        for p in log_dir.glob(pattern):
            try:
                if p.is_file() and p.stat().st_size > 0:
                    return True
            except OSError:
                continue
    return False


def console_runs(log_dir: Path) -> list[Run] | None:
    """The console copy read as a log, each run noted as read from the console; None when the
    copy is missing, empty or holds no training numbers."""
    from ..messages import Msg
    from ..sources import SourceError, load_path

    path = log_dir / CONSOLE_FILE
    try:
        if not path.is_file() or path.stat().st_size == 0:
            return None
        runs = load_path(path)
    except (SourceError, OSError):
        return None
    for run in runs:
        run.notes.insert(0, Msg("cli.run.from_console", file=CONSOLE_FILE))
    return runs


@dataclass
class ConsoleWatch:
    """Re-reads the console copy while the command runs, as long as the hooks record nothing."""

    log_dir: Path
    alerts: bool = True
    lang: str = "en"
    limits: LiveConsoleLimits = LIMITS
    _said: set[tuple[str, str]] = field(default_factory=set)
    _last_size: int = 0
    _next: float = 0.0
    _done: bool = False

    @property
    def interval(self) -> float:
        return self.limits.interval_s

    def poll(self) -> None:
        """One look: new alarms of the console so far, printed once each. Never raises: a fallback
        that failed must not end the run it watches."""
        if self._done or not self.alerts or time.monotonic() < self._next:
            return
        self._next = time.monotonic() + self.limits.interval_s
        try:
            self._look()
        except Exception:  # noqa: BLE001 - the fallback is best effort; the final read reports
            self._done = True

    def _look(self) -> None:
        if recorded_steps(self.log_dir):  # the hooks work: their own alerts are on the way
            self._done = True
            return
        size = os.stat(self.log_dir / CONSOLE_FILE).st_size
        if size > self.limits.max_live_bytes:
            self._done = True
            return
        if size < self.limits.min_bytes or size == self._last_size:
            return
        self._last_size = size
        runs = console_runs(self.log_dir)
        if not runs:
            return
        from ..detectors.engine import diagnose_runs
        from ..live.diagnoser import alert_line
        from ..messages import render

        for f in diagnose_runs(runs).findings:
            key = (f.cause, f.symptom)  # once each: a plateau's step moves as the log grows
            if f.severity in ("warning", "critical") and key not in self._said:
                self._said.add(key)
                line = alert_line(f, self.lang) + render("cli.run.console_alert", {}, self.lang)
                print(line, file=sys.stderr, flush=True)
