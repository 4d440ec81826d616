"""`lossdoctor` command line.

Exit codes (the contract): 0 the analysis ran, whatever it found; 1 only with --fail-on and a
finding at or above that severity; 2 bad input or usage, with one line on stderr and no traceback.
`main` is the last line of defence: an error no reader foresaw still ends as one line and exit 2
(`LOSSDOCTOR_DEBUG=1` prints its traceback), so no input ever shows a user a traceback.

The offline paths (`diagnose`, `verify`) never import torch, so it starts fast; `demo` and `check` do.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence
from typing import Any, NoReturn

from .output import (  # noqa: F401
    EXIT_BAD_INPUT,
    EXIT_FAIL_ON,
    EXIT_OK,
    WriteError,
    chosen_lang,
    error_line,
    examples,
    progress,
    say_arg,
    write_report,
)


class UsageError(Exception):
    pass


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:  # one line, exit 2 (argparse's default is 2 lines)
        raise UsageError(message)


def build_parser() -> argparse.ArgumentParser:
    from .._version import __version__
    from ..report import FORMATS, LANGS

    p = _Parser(prog="lossdoctor", description="Why does my training loss not go down, or go NaN?")
    p.add_argument("--version", action="version", version=f"lossdoctor {__version__}")
    sub = p.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)

    _add_diagnose_parser(sub, FORMATS, LANGS)
    _add_demo_parser(sub, FORMATS, LANGS)

    from .check import add_parser as add_check_parser
    from .run import add_parser as add_run_parser
    from .verify_command import add_parser as add_verify_parser

    add_run_parser(sub)
    add_check_parser(sub, FORMATS)
    add_verify_parser(sub)
    c = sub.add_parser(
        "completion",
        help="print a shell completion script (bash or zsh)",
        epilog=examples("completion"),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    c.add_argument("shell", choices=("bash", "zsh"))
    return p


def _add_diagnose_parser(sub: Any, formats: Sequence[str], langs: Sequence[str]) -> None:
    """The `diagnose` subcommand's options, apart from build_parser so that each stays short
    enough to read whole (the option list is long: one entry per way of pointing at a run)."""
    d = sub.add_parser(
        "diagnose",
        help="diagnose a run directory or a training log; several: compare them",
        epilog=examples("diagnose"),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    d.add_argument(
        "path",
        metavar="PATH",
        nargs="+",
        help="run directory written by watch, or a supported log ('-' reads the log from stdin); "
        "two or more (or a folder holding several runs) are compared side by side",
    )
    d.add_argument(
        "--compare",
        action="store_true",
        help="compare the runs one folder holds (version_N/ or one folder per run) instead of reading the newest",
    )
    d.add_argument(
        "--format-in",
        metavar="NAME",
        default=None,
        help="read PATH as this format instead of detecting it (console, tensorboard, csv, jsonl, trainer-state...)",
    )
    d.add_argument(
        "--run",
        metavar="ID",
        default=None,
        help="in an MLflow store holding several runs, read this one (its id, a prefix of "
        "it, or its name) instead of the newest; in a run directory used by several runs, "
        "version_N (or N; version_0 is the first)",
    )
    d.add_argument("--format", choices=formats, default="text", help="output format (default: text)")
    d.add_argument("-o", "--output", metavar="OUT", help="write the report to this file")
    d.add_argument(
        "--lang",
        choices=langs,
        default=None,
        help="language of the text, md and html reports (default: the locale's, zh for "
        "LANG=zh_CN.UTF-8, else en; JSON is always English)",
    )
    d.add_argument(
        "--fail-on", choices=("warning", "critical"), help="exit 1 when a finding has this severity or worse"
    )


def _add_demo_parser(sub: Any, formats: Sequence[str], langs: Sequence[str]) -> None:
    """The `demo` subcommand's options, apart from build_parser for the same reason as diagnose's."""
    m = sub.add_parser("demo", help="train a small model with a realistic fault and diagnose it")
    m.add_argument("--fault", default=None, metavar="NAME", help="fault to inject; 'list' lists them")
    m.add_argument("--log-dir", metavar="DIR", help="where to leave the run directory")
    m.add_argument("--format", choices=formats, default="text")
    m.add_argument("-o", "--output", metavar="OUT", help="write the report to this file")
    m.add_argument(
        "--lang", choices=langs, default=None, help="language of the report and the live alerts (default: the locale's)"
    )
    m.add_argument("--seed", type=int, default=0)


def main(argv: Sequence[str] | None = None) -> int:
    from ..messages import Msg
    from ..report.i18n import locale_lang

    lang = locale_lang()  # the lines below speak the report's language once --lang is known
    try:
        from .run import split_command

        parser = build_parser()
        argv, command = split_command(sys.argv[1:] if argv is None else argv)
        args = parser.parse_args(argv)
        lang = chosen_lang(args)
        if args.command == "run":
            from .run import cmd_run, usage_problem

            problem = usage_problem(args, command)
            if problem is not None:
                raise UsageError(problem)
            return cmd_run(args, command)
        if args.command == "diagnose":
            from .compare import cmd_compare, compared_paths

            args.paths, args.path = list(args.path), args.path[0]
            paths = compared_paths(args)
            if paths is not None:
                return cmd_compare(args, paths)
            return cmd_diagnose(args)
        if args.command == "completion":
            from .compare import cmd_completion

            return cmd_completion(args, parser)
        if args.command == "demo":
            from .demo import cmd_demo

            return cmd_demo(args)
        if args.command == "verify":
            from .verify_command import cmd_verify

            return cmd_verify(args)
        if args.command == "check":
            from .check import cmd_check

            return cmd_check(args)
        raise UsageError(Msg("cli.no_command"))
    except UsageError as e:
        error_line(render_line("cli.error", {"error": say_arg(e, lang)}, lang))
        return EXIT_BAD_INPUT
    except WriteError as e:
        error_line(f"lossdoctor: {say_arg(e, lang)}")
        return EXIT_BAD_INPUT
    except KeyboardInterrupt:
        error_line(render_line("cli.interrupted", {}, lang))
        return 130
    except Exception as e:  # the last line of defence: see the module docstring
        return internal_error(e, lang)


def render_line(key: str, values: dict, lang: str) -> str:
    from ..messages import render

    return render(key, values, lang)


#: the start of the one line an unforeseen error prints (the fuzz tests look for it: a reader that
#: lets an error reach this far has a check missing)
INTERNAL_ERROR = "lossdoctor: internal error"


def internal_error(e: BaseException, lang: str = "en") -> int:
    if os.environ.get("LOSSDOCTOR_DEBUG"):
        import traceback

        traceback.print_exception(e)
    what = f"{type(e).__name__}: {e}".splitlines()[0][:300] if str(e) else type(e).__name__
    # the line starts with INTERNAL_ERROR in every language (scripts and the fuzz tests look for it)
    error_line(INTERNAL_ERROR + render_line("cli.internal_error", {"what": what}, lang))
    return EXIT_BAD_INPUT


def cmd_diagnose(args: argparse.Namespace) -> int:
    from ..detectors.engine import diagnose_runs
    from ..messages import Msg
    from ..sources import SourceError, load_path
    from ..vocabulary import SEVERITY_RANK

    stdin_dir, cut = None, None
    try:
        path = args.path
        if path == "-":
            stdin_dir, path, cut = stdin_to_file()
        with progress(args.path, chosen_lang(args)):
            runs = load_path(path, getattr(args, "format_in", None), getattr(args, "run", None))
        if stdin_dir is not None:
            for run in runs:
                run.meta["path"] = "<stdin>"
                if cut is not None:
                    run.notes.insert(0, Msg("cli.stdin_cut", mib=cut))
        report = diagnose_runs(runs)
        warn_partial(runs, chosen_lang(args))
    except SourceError as e:
        several = several_runs(args, e) if stdin_dir is None else None
        if several is not None:  # a folder holding several runs, itself none: compared
            from .compare import cmd_compare

            return cmd_compare(args, several, from_folder=args.path)
        msg = str(e) if stdin_dir is None else str(e).replace(str(path), "<stdin>")
        if cut is not None:
            msg = f"{msg} ({Msg('cli.stdin_cut', mib=cut)})"
        error_line(f"lossdoctor: {' '.join(msg.split())}")  # one line, whatever the path
        return EXIT_BAD_INPUT
    except (OSError, ValueError, UnicodeDecodeError, MemoryError) as e:
        error_line(f"lossdoctor: {args.path}: cannot read ({type(e).__name__}: {e})".splitlines()[0])
        return EXIT_BAD_INPUT
    finally:
        if stdin_dir is not None:
            stdin_dir.cleanup()
    try:
        write_report(report, args, runs, inputs=read_paths(args.path))
    except WriteError as e:
        error_line(f"lossdoctor: {say_arg(e, chosen_lang(args))}")
        return EXIT_BAD_INPUT
    if args.fail_on:
        worst = max((f.severity_rank for f in report.findings), default=-1)
        if worst >= SEVERITY_RANK[args.fail_on]:
            return EXIT_FAIL_ON
    return EXIT_OK


def several_runs(args: argparse.Namespace, error: Exception) -> list[str] | None:
    """The runs a folder holds when no reader took the folder itself (one folder per run, as
    `lossdoctor_runs/` or an experiments folder keep them): two or more sub-folders that are runs."""
    from pathlib import Path

    from ..sources.rundir import is_run_dir
    from .compare import folder_runs

    folder = Path(args.path)
    from ..sources.registry import NoReader

    if getattr(args, "run", None) is not None or not folder.is_dir() or not isinstance(error, NoReader):
        return None
    subs = [p for p in folder_runs(folder) if Path(p).is_dir()]
    runs = [p for p in subs if is_run_dir(Path(p)) or any(Path(p).iterdir())]
    return runs if len(runs) >= 2 else None


def read_paths(arg: str) -> list[str]:
    """The paths `diagnose` read for the argument `arg` (none for stdin): an `-o` onto one of them,
    or into it, is refused."""
    if arg == "-":
        return []
    from pathlib import Path

    from ..sources.mlflow_store import uri_path
    from ..sources.rundir import is_run_dir

    paths = [str(arg), str(uri_path(arg))]
    parent = Path(paths[1]).parent
    if Path(paths[1]).is_file() and is_run_dir(parent):  # a run directory's own file read alone
        paths.append(str(parent))
    return paths


#: the most of standard input `diagnose -` reads (256 MiB: a pasted or piped log is far smaller;
#: `yes | lossdoctor diagnose -` would otherwise fill the disk). The rest is not read and a note
#: says so. LOSSDOCTOR_STDIN_MAX_BYTES sets another cap.
STDIN_MAX_BYTES = 256 << 20


def stdin_cap() -> int:
    try:
        return max(1, int(os.environ.get("LOSSDOCTOR_STDIN_MAX_BYTES", STDIN_MAX_BYTES)))
    except ValueError:
        return STDIN_MAX_BYTES


def stdin_to_file():
    """A pasted log piped in (`diagnose -`): copied in chunks to a temporary file named `stdin`, so
    every reader (they sniff and seek) takes it like a file, up to `stdin_cap()` bytes (what is
    beyond is left unread). Returns (the directory, the path, how many MiB were kept when cut, else
    None)."""
    import tempfile
    from pathlib import Path

    cap = stdin_cap()
    d = tempfile.TemporaryDirectory(prefix="lossdoctor-")
    path = Path(d.name) / "stdin"
    left, cut = cap, None
    with open(path, "wb") as f:
        while left > 0:
            chunk = sys.stdin.buffer.read(min(1 << 20, left))
            if not chunk:
                break
            f.write(chunk)
            left -= len(chunk)
        if left <= 0 and sys.stdin.buffer.read(1):
            cut = round(cap / 2**20, 2)
    return d, path, cut


#: the readers' notes that say part of the input could not be read (by message key)
PARTIAL_READ = frozenset(
    {
        "source.hf_truncated",
        "source.json_truncated",
        "source.mlflow_stopped",
        "source.not_numbers",
        "source.ragged_rows",
        "source.unreadable_lines",
        "source.tb_torn",
        "source.tb_damaged",
        "source.tb_bad_record",
        "source.tb_bad_length",
        "cli.stdin_cut",
        "source.wandb_torn",
        "source.wandb_bad_checksum",
    }
)


def warn_partial(runs, lang: str = "en") -> None:
    """One stderr line per partial read, so a truncated log is never silently half-diagnosed."""
    from ..report.i18n import say

    for run in runs:
        for note in run.notes:
            if getattr(note, "key", None) in PARTIAL_READ:
                error_line(render_line("cli.warning", {"note": say(note, lang)}, lang))


if __name__ == "__main__":
    sys.exit(main())
