"""`lossdoctor check --config setup.py`: the preflight checks from a script, for CI or a shell.

The config is a Python file with a function that builds the training objects and returns them as
a dict of `lossdoctor.check` arguments::

    # setup.py
    def lossdoctor_setup():
        model = build_model()
        optimizer = torch.optim.AdamW(model.parameters(), lr=3e-4)
        return {"model": model, "optimizer": optimizer, "scheduler": make_scheduler(optimizer),
                "batches": list(itertools.islice(loader, 4)), "total_steps": 10_000,
                "task": "sft", "tokenizer": tokenizer}

`--config setup.py` calls `lossdoctor_setup()` (or `setup()`); `--config setup.py:make` calls
`make()`. Whatever the file prints goes to stderr so `--format json` stays one JSON object on
stdout. Exit codes are diagnose's: 0 the checks ran, 1 with --fail-on and a finding at or above
that severity, 2 a config that cannot be loaded or used (one line on stderr, no traceback), and
also 2 when the model's forward on the first batch raised (the report is written first, status
inconclusive, the error in its notes; `"forward": False` in the config skips that forward).
"""

from __future__ import annotations

import argparse
import contextlib
import importlib.util
import sys
from pathlib import Path
from typing import Any

from ..messages import Msg
from .output import examples

DEFAULT_FUNCTIONS = ("lossdoctor_setup", "setup")
ARGUMENTS = (
    "model",
    "optimizer",
    "scheduler",
    "batches",
    "total_steps",
    "task",
    "tokenizer",
    "scaler",
    "scheduler_interval",
    "steps_per_epoch",
    "max_batches",
    "forward",
)


class SetupError(Exception):
    """The config cannot be used: the message is one line for the user."""


def add_parser(sub: Any, formats: tuple[str, ...]) -> None:
    c = sub.add_parser(
        "check",
        help="check a training setup before the first step (needs torch)",
        description="Run the preflight checks on the objects a config file builds.",
        epilog=examples("check"),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    c.add_argument(
        "--config",
        required=True,
        metavar="FILE[:FUNCTION]",
        help="Python file whose function (default: lossdoctor_setup or setup) returns a dict of "
        "lossdoctor.check arguments: model, optimizer, scheduler, batches, total_steps, "
        "task, tokenizer, scaler, ...",
    )
    c.add_argument("--total-steps", type=int, metavar="N", help="planned optimizer steps (overrides the config)")
    c.add_argument(
        "--task", choices=("sft", "pretrain", "classification", "regression"), help="task hint (overrides the config)"
    )
    c.add_argument("--format", choices=formats, default="text", help="output format (default: text)")
    c.add_argument("-o", "--output", metavar="OUT", help="write the report to this file")
    c.add_argument(
        "--lang",
        choices=("en", "zh"),
        default=None,
        help="language of the text, md and html reports (default: the locale's)",
    )
    c.add_argument(
        "--fail-on", choices=("warning", "critical"), help="exit 1 when a finding has this severity or worse"
    )


def cmd_check(args: argparse.Namespace) -> int:
    from ..messages import render
    from ..vocabulary import SEVERITY_RANK
    from .output import EXIT_BAD_INPUT, EXIT_FAIL_ON, EXIT_OK, chosen_lang, error_line, say_arg, write_report

    lang = chosen_lang(args)

    try:
        import torch  # noqa: F401
    except ImportError:
        error_line(render("cli.check_needs_torch", {}, lang))
        return EXIT_BAD_INPUT
    try:
        kwargs = load_setup(args.config)
        if args.total_steps is not None:
            kwargs["total_steps"] = args.total_steps
        if args.task is not None:
            kwargs["task"] = args.task
        from ..preflight.api import check

        with contextlib.redirect_stdout(sys.stderr):
            report = check(**kwargs)
    except SetupError as e:
        error_line(f"lossdoctor: {say_arg(e, lang)}")
        return EXIT_BAD_INPUT
    except (TypeError, ValueError) as e:
        error_line(f"lossdoctor: {args.config}: {e}".splitlines()[0])
        return EXIT_BAD_INPUT
    report.source = args.config
    write_report(report, args, inputs=[str(split_spec(args.config)[0])])
    from ..preflight.api import forward_error

    error = forward_error(report)
    if error is not None:  # the model cannot run its own first batch: a setup that cannot be used
        error_line(render("cli.check_forward_failed", {"path": args.config, "error": error}, lang))
        return EXIT_BAD_INPUT
    if args.fail_on:
        worst = max((f.severity_rank for f in report.findings), default=-1)
        if worst >= SEVERITY_RANK[args.fail_on]:
            return EXIT_FAIL_ON
    return EXIT_OK


def split_spec(spec: str) -> tuple[Path, str | None]:
    """'setup.py:make' -> (setup.py, 'make'); a drive letter ('C:\\x.py') is not a function."""
    head, sep, tail = spec.rpartition(":")
    if sep and head and tail.isidentifier():
        return Path(head), tail
    return Path(spec), None


def load_setup(spec: str) -> dict[str, Any]:
    """Import the config file, call its setup function, validate what it returns."""
    path, name = split_spec(spec)
    if not path.is_file():
        raise SetupError(Msg("cli.setup_no_file", path=str(path)))
    module = _import(path)
    names = (name,) if name else DEFAULT_FUNCTIONS
    fn = next((getattr(module, n) for n in names if callable(getattr(module, n, None))), None)
    if fn is None:
        want = f"{name}()" if name else " or ".join(f"{n}()" for n in DEFAULT_FUNCTIONS)
        raise SetupError(Msg("cli.setup_no_function", path=str(path), want=want))
    try:
        with contextlib.redirect_stdout(sys.stderr):
            result = fn()
    except (KeyboardInterrupt, SystemExit):
        raise
    except BaseException as e:
        raise SetupError(
            Msg("cli.setup_raised", path=str(path), fn=fn.__name__, error=_one_line(f"{type(e).__name__}: {e}"))
        ) from None
    if not isinstance(result, dict):
        raise SetupError(
            Msg(
                "cli.setup_not_dict",
                path=str(path),
                fn=fn.__name__,
                args=", ".join(ARGUMENTS[:7]),
                type=type(result).__name__,
            )
        )
    unknown = sorted(set(map(str, result)) - set(ARGUMENTS))
    if unknown:
        raise SetupError(
            Msg(
                "cli.setup_unknown_args",
                path=str(path),
                fn=fn.__name__,
                unknown=", ".join(unknown),
                known=", ".join(ARGUMENTS),
            )
        )
    return dict(result)


def _import(path: Path) -> Any:
    spec = importlib.util.spec_from_file_location(f"lossdoctor_setup_{abs(hash(str(path)))}", path)
    if spec is None or spec.loader is None:
        raise SetupError(Msg("cli.setup_not_python", path=str(path)))
    module = importlib.util.module_from_spec(spec)
    folder = str(path.resolve().parent)
    sys.path.insert(0, folder)  # the config may import its neighbours
    try:
        with contextlib.redirect_stdout(sys.stderr):
            spec.loader.exec_module(module)
    except (KeyboardInterrupt, SystemExit):
        raise
    except BaseException as e:
        raise SetupError(
            Msg("cli.setup_failed_to_load", path=str(path), error=_one_line(f"{type(e).__name__}: {e}"))
        ) from None
    return module


def _one_line(text: str) -> str:
    return text.splitlines()[0] if text else text
