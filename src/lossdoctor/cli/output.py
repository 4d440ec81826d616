"""Writing a report, and the exit codes: shared by every command (`diagnose` in `main`, `demo`,
`check`), so the commands import this module and not each other."""

from __future__ import annotations

import argparse
import os
import sys

EXIT_OK, EXIT_FAIL_ON, EXIT_BAD_INPUT = 0, 1, 2


class WriteError(Exception):
    """The report could not be written (full disk, closed pipe, missing folder): one line."""


def write_report(report, args: argparse.Namespace, runs=None) -> None:
    from ..report import render

    out = getattr(args, "output", None)
    color = out is None and sys.stdout.isatty() and args.format == "text"
    text = render(report, args.format, color=color, runs=runs, lang=getattr(args, "lang", "en"))
    try:
        if out:
            with open(out, "w", encoding="utf-8") as f:
                f.write(text)
        else:
            sys.stdout.write(text if text.endswith("\n") else text + "\n")
            sys.stdout.flush()  # a full disk or a closed pipe shows here, not at interpreter exit
    except OSError as e:
        if not out:
            _silence_stdout()
        raise WriteError(write_error(e, out)) from e


def _silence_stdout() -> None:
    """After a failed write to stdout, point it at /dev/null: Python's final flush at exit would
    otherwise fail again and print its own 'Exception ignored' message."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)
    except (OSError, ValueError, AttributeError):
        pass


def write_error(e: OSError, out: str | None) -> str:
    """One line for a report that could not be written (to a file, or to standard output)."""
    where = out or "the report to standard output"
    if isinstance(e, BrokenPipeError):
        return f"cannot write {where}: the reading end of the pipe was closed"
    return f"cannot write {where}: {e.strerror or e}"
