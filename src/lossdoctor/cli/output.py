"""Writing a report, and the exit codes: shared by every command (`diagnose` in `main`, `demo`,
`check`), so the commands import this module and not each other."""

from __future__ import annotations

import argparse
import os
import stat
import sys
import tempfile
from collections.abc import Sequence
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # imported when a spinner is shown (rich costs start-up time)
    import threading

    from rich.status import Status

EXIT_OK, EXIT_FAIL_ON, EXIT_BAD_INPUT = 0, 1, 2


class WriteError(Exception):
    """The report could not be written (full disk, closed pipe, missing folder): one line."""


def write_report(report, args: argparse.Namespace, runs=None, inputs: Sequence[str] = ()) -> None:
    from ..report import render

    out = getattr(args, "output", None)
    if out:
        refuse_input_as_output(out, inputs)  # before rendering: a refused -o costs nothing
    color = out is None and sys.stdout.isatty() and args.format == "text" and not no_color()
    # report.render escaped it already (safe_output) and the output was checked above
    write_text(
        render(report, args.format, color=color, runs=runs, lang=chosen_lang(args), width=text_width()),
        out,
        fmt=args.format,
        color=color,
        escaped=True,
    )


def no_color() -> bool:
    """NO_COLOR set to anything but the empty string turns colour off (https://no-color.org)."""
    return bool(os.environ.get("NO_COLOR"))


#: the text report's width when neither the terminal nor COLUMNS says one (a pipe, a file), and the
#: narrowest it is made (a table of runs cannot fold into less)
TEXT_WIDTH, MIN_WIDTH = 100, 40


def text_width() -> int:
    """The terminal's width (COLUMNS first, as `shutil.get_terminal_size` reads it), else TEXT_WIDTH."""
    import shutil

    cols = shutil.get_terminal_size((TEXT_WIDTH, 24)).columns
    return max(MIN_WIDTH, cols if cols > 0 else TEXT_WIDTH)


#: an input read for longer than this gets a progress line on stderr (a terminal only);
#: LOSSDOCTOR_PROGRESS_AFTER_S sets another delay (0: at once)
PROGRESS_AFTER_S = 1.0


def progress_after() -> float:
    try:
        return max(0.0, float(os.environ.get("LOSSDOCTOR_PROGRESS_AFTER_S", PROGRESS_AFTER_S)))
    except ValueError:
        return PROGRESS_AFTER_S


class progress:
    """`with progress(path, lang):` shows "reading PATH" with a spinner on stderr when reading takes
    longer than PROGRESS_AFTER_S and stderr is a terminal; nothing otherwise (a pipe, a log file)."""

    def __init__(self, path: str, lang: str = "en") -> None:
        self.path, self.lang = str(path), lang
        self.timer: threading.Timer | None = None
        self.status: Status | None = None

    def __enter__(self) -> progress:
        try:
            if not sys.stderr.isatty():
                return self
        except (ValueError, AttributeError):
            return self
        import threading

        from rich.console import Console

        from ..messages import render, safe_text

        con = Console(stderr=True, no_color=no_color(), highlight=False)
        self.status = con.status(safe_text(render("cli.progress", {"path": self.path}, self.lang), newlines=False))
        self.lock = threading.Lock()
        self.timer = threading.Timer(progress_after(), self._start)
        self.timer.daemon = True
        self.timer.start()
        return self

    def _start(self) -> None:
        with self.lock:
            if self.status is not None:
                self.status.start()

    def __exit__(self, *exc: object) -> None:
        if self.timer is None:
            return
        self.timer.cancel()
        with self.lock:
            status, self.status = self.status, None
        if status is not None:
            status.stop()


def write_text(
    text: str,
    out: str | None,
    inputs: Sequence[str] = (),
    *,
    fmt: str = "text",
    color: bool = False,
    escaped: bool = False,
) -> None:
    """`text` to the file `out` (atomically: never a half-written file, never an input replaced),
    or to standard output; WriteError (one line) when it cannot be.

    This is where every report and listing leaves the program, so this is where what came from a
    file is made safe to show (`messages.safe_output`: control characters, bidi overrides and the
    bytes of a file name that is not UTF-8 become visible escapes)."""
    from ..messages import safe_output

    if not escaped:  # (`escaped`: a report from report.render, which escapes what it renders)
        text = safe_output(text, fmt, color=color)
    try:
        if out:
            refuse_input_as_output(out, inputs)
            write_atomic(out, text.encode("utf-8"))
        else:
            plain_errors(sys.stdout)
            sys.stdout.write(text if text.endswith("\n") else text + "\n")
            sys.stdout.flush()  # a full disk or a closed pipe shows here, not at interpreter exit
    except OSError as e:
        if not out:
            silence_stdout()
        raise WriteError(write_error(e, out)) from e  # a message: printed in the report's language


def refuse_input_as_output(out: str, inputs: Sequence[str]) -> None:
    """WriteError when writing `out` would destroy what was read: `out` is an input file (the same
    file by path, by a symlink or by a hard link), or lies inside an input directory (a run
    directory, whose own files the report would replace). Inputs that are not paths (`-`) are
    skipped."""
    from ..messages import Msg

    target = os.path.realpath(out)
    for given in inputs:
        if not given or given == "-":
            continue
        src = os.path.realpath(given)
        if os.path.isdir(src):
            if target == src or target.startswith(src.rstrip(os.sep) + os.sep):
                raise WriteError(Msg("cli.output_in_input", out=str(out), input=str(given)))
            continue
        same = target == src
        if not same:
            try:
                same = os.path.samefile(out, src)  # a hard link: another name, the same inode
            except OSError:
                same = False
        if same:
            raise WriteError(Msg("cli.output_is_input", out=str(out), input=str(given)))


def write_atomic(out: str, data: bytes) -> None:
    """Write `data` to `out` through a temporary file in the same directory and `os.replace`, so
    a reader (or a failure half-way: a full disk) never sees a partial report; the temporary file
    is removed on error. A device or a pipe named as `out` (`/dev/stdout`, `/dev/full`) cannot be
    replaced and is written directly."""
    try:
        st = os.stat(out)
    except OSError:
        st = None
    if st is not None and not stat.S_ISREG(st.st_mode):
        with open(out, "wb") as f:
            f.write(data)
        return
    folder = os.path.dirname(os.path.abspath(out))
    fd, tmp = tempfile.mkstemp(prefix=".lossdoctor-", suffix=".tmp", dir=folder)
    try:
        with os.fdopen(fd, "wb") as f:
            umask = os.umask(0)
            os.umask(umask)
            os.fchmod(f.fileno(), (st.st_mode & 0o7777) if st is not None else 0o666 & ~umask)
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, out)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise


def error_line(text: str) -> None:
    """One line on stderr (an error, a warning, a progress line): escaped like a report, newlines
    included, so a path or a name read from a file cannot drive the terminal or split the line."""
    from ..messages import safe_text

    plain_errors(sys.stderr)
    try:
        print(safe_text(str(text), newlines=False), file=sys.stderr, flush=True)
    except (OSError, ValueError):
        pass  # stderr itself is gone: nothing left to tell


def plain_errors(stream) -> None:
    """A character the stream's encoding lacks (a report in Chinese under LC_ALL=C with
    PYTHONIOENCODING=ascii) is written as a backslash escape instead of failing the write."""
    reconfigure = getattr(stream, "reconfigure", None)
    if reconfigure is not None and getattr(stream, "errors", "") in ("strict", "surrogateescape"):
        try:
            reconfigure(errors="backslashreplace")
        except (ValueError, OSError, TypeError):
            pass


def silence_stdout() -> None:
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
    from ..messages import Msg

    where = out or Msg("cli.stdout")
    if isinstance(e, BrokenPipeError):
        return Msg("cli.pipe_closed", where=where)
    return Msg("cli.cannot_write", where=where, error=str(e.strerror or e))


def chosen_lang(args: argparse.Namespace) -> str:
    """`--lang` when given, else the user's locale (LANG=zh_CN.UTF-8 -> zh)."""
    from ..report.i18n import locale_lang

    return getattr(args, "lang", None) or locale_lang()


def say_arg(e: BaseException, lang: str) -> str:
    """An error's message in `lang` when it was made as a message, else its text."""
    from ..report.i18n import say

    return say(e.args[0], lang) if e.args and isinstance(e.args[0], str) else str(e)


def examples(command: str) -> str:
    """The examples under a command's --help (messages/cli.py: `cli.examples.<command>`), in the
    locale's language."""
    from ..messages import render
    from ..report.i18n import locale_lang

    return render(f"cli.examples.{command}", {}, locale_lang())
