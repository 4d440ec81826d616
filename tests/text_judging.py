"""Shared by the tests that judge generated text logs end to end: write the text, read it with the
real readers, diagnose it, and look at the alarms."""

from __future__ import annotations

from lossdoctor.detectors.engine import diagnose_runs
from lossdoctor.sources import load_path


def diagnose_text(tmp_path, text: str, name: str = "train.log"):
    """(runs, report) of `text` written to `tmp_path / name`."""
    path = tmp_path / name
    path.write_text(text)
    runs = load_path(str(path))
    return runs, diagnose_runs(runs)


def alarms(report):
    """The report's warning and critical findings."""
    return [f for f in report.findings if f.severity in ("warning", "critical")]


def show(report):
    """The findings as tuples, for an assertion's message."""
    return [(f.rule, f.cause, f.symptom, f.severity, f.step) for f in report.findings]
