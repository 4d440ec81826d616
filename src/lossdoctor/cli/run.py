"""`lossdoctor run [options] -- COMMAND ...`: the user's unmodified script, watched.

This process never imports torch: it starts COMMAND with `LOSSDOCTOR_ATTACH=1` and the bootstrap
directory (`lossdoctor/integrations/bootstrap`, whose `sitecustomize` installs
`lossdoctor.integrations.attach`) first on `PYTHONPATH`, so the training process (and a launcher's
workers, which inherit the environment) watch themselves into `--log-dir`. Ctrl-C goes to the
script (this process waits for it), then the run directory is read like `lossdoctor diagnose` reads
it, the diagnosis goes to stderr with the directory's name, and the exit code is the script's.

What the command prints is passed on unchanged and copied to `console.log` in the run directory
(`cli/console_tee.py`). Where nothing in the process could be hooked (no optimizer step of torch
was recorded: another framework, a compiled binary), that copy is read by the console readers
while the command runs (an alert line per new warning/critical finding) and at its end, and the
report says the diagnosis comes from the console.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import subprocess
import sys
from collections.abc import Sequence
from datetime import datetime
from pathlib import Path
from typing import Any

EPILOG = """examples:
  lossdoctor run -- python train.py --lr 3e-4
  lossdoctor run --log-dir runs/exp1 -- python -m mypkg.train
  lossdoctor run -- python train.py --resume_from_checkpoint out/checkpoint-900
  LOSSDOCTOR_ATTACH=1 PYTHONPATH=$(lossdoctor run --print-bootstrap) torchrun ... (a launcher it cannot wrap)

The script is not edited: its optimizer, model, loss and batch are found through torch's global
hooks (an HF Trainer gets the lossdoctor callback instead). Training is unchanged; the exit code
is the script's, 2 for bad usage."""


def add_parser(sub: Any) -> None:
    from ..report import LANGS

    r = sub.add_parser(
        "run",
        help="run an unmodified training script under watch: lossdoctor run -- python train.py",
        description="Run COMMAND (a training script) under lossdoctor.watch without editing it, "
        "then print the diagnosis.",
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    r.add_argument("--log-dir", metavar="DIR", help="the run directory (default: lossdoctor_runs/run-<time>)")
    r.add_argument(
        "--task",
        choices=("sft", "pretrain", "classification", "regression"),
        default=None,
        help="what is trained (a hint for the checks, as watch(task=...))",
    )
    r.add_argument(
        "--layer-every",
        type=int,
        metavar="N",
        default=None,
        help="per-layer statistics every N steps (watch's layer_every; default 10)",
    )
    r.add_argument("--no-alerts", action="store_true", help="no live alert lines while training")
    r.add_argument(
        "--no-sinks",
        action="store_true",
        help="do not write findings to the run's TensorBoard / W&B / MLflow (watch's sinks=False)",
    )
    r.add_argument("--lang", choices=LANGS, default=None, help="language of the diagnosis (default: the locale's)")
    r.add_argument(
        "--print-bootstrap",
        action="store_true",
        help="print the directory to put first on PYTHONPATH (with LOSSDOCTOR_ATTACH=1) and exit",
    )
    r.add_argument("cmdline", nargs=argparse.REMAINDER, metavar="-- COMMAND ...", help="the training command")


def split_command(argv: Sequence[str]) -> tuple[list[str], list[str] | None]:
    """`run [options] -- COMMAND...` -> (the options part, COMMAND); None when there is no `--`."""
    argv = list(argv)
    if argv[:1] == ["run"] and "--" in argv:
        i = argv.index("--")
        return argv[:i], argv[i + 1 :]
    return argv, None


def bootstrap_dir() -> Path:
    return Path(__file__).resolve().parent.parent / "integrations" / "bootstrap"


def command_of(args: argparse.Namespace, command: list[str] | None) -> list[str]:
    return list(args.cmdline or []) if command is None else command


def usage_problem(args: argparse.Namespace, command: list[str] | None) -> Any:
    """What makes this bad usage (a one-line error, exit 2), or None: no command, a program not
    found, a missing script."""
    from ..messages import Msg

    command = command_of(args, command)
    if args.print_bootstrap:
        return None
    if not command:
        return Msg("cli.run.no_command")
    if shutil.which(command[0]) is None:
        return Msg("cli.run.not_found", program=command[0])
    if Path(command[0]).name.startswith("python") and len(command) > 1:
        script = command[1]
        if not script.startswith("-") and not Path(script).is_file():
            return Msg("cli.run.no_script", path=script)
    return None


def child_env(log_dir: Path, args: argparse.Namespace) -> dict[str, str]:
    from ..integrations.attach import ENV_LOG_DIR, ENV_OPTIONS, ENV_SWITCH

    options: dict[str, Any] = {}
    if args.task:
        options["task"] = args.task
    if args.layer_every is not None:
        options["layer_every"] = args.layer_every
    if args.no_alerts:
        options["alerts"] = False
    if args.no_sinks:
        options["sinks"] = False
    env = dict(os.environ)
    env[ENV_SWITCH] = "1"
    env[ENV_LOG_DIR] = str(log_dir.resolve())
    env[ENV_OPTIONS] = json.dumps(options)
    env["LOSSDOCTOR_PKG_ROOT"] = str(Path(__file__).resolve().parents[2])
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(bootstrap_dir()), env.get("PYTHONPATH")) if p)
    return env


def cmd_run(args: argparse.Namespace, command: list[str] | None) -> int:
    if args.print_bootstrap:
        print(bootstrap_dir())
        return 0
    command = command_of(args, command)
    log_dir = (
        Path(args.log_dir)
        if args.log_dir
        else Path("lossdoctor_runs") / f"run-{datetime.now().strftime('%Y%m%d-%H%M%S-%f')}"
    )
    rc = run_child(command, child_env(log_dir, args), log_dir, args)
    report_run(log_dir, args)
    return rc if rc >= 0 else 128 - rc  # killed by signal N: 128 + N, as a shell says


def run_child(command: list[str], env: dict[str, str], log_dir: Path, args: argparse.Namespace) -> int:
    """COMMAND to its end, its console copied to the run directory. Ctrl-C reaches it from the
    terminal (same process group); this process only waits (a handler, not SIG_IGN, so the child
    does not inherit an ignored SIGINT)."""
    from .console_tee import CONSOLE_FILE, Tee
    from .console_watch import ConsoleWatch

    tee = Tee(log_dir / CONSOLE_FILE)
    tee.start()
    watch = ConsoleWatch(log_dir, alerts=not args.no_alerts, lang=_lang(args))
    previous = signal.signal(signal.SIGINT, lambda *_: None)
    try:
        proc = subprocess.Popen(command, env=env, stdout=tee.child_fds["stdout"], stderr=tee.child_fds["stderr"])
        tee.after_spawn()
        while True:
            try:
                rc = proc.wait(timeout=watch.interval)
                break
            except subprocess.TimeoutExpired:
                watch.poll()
            except KeyboardInterrupt:
                continue
    finally:
        signal.signal(signal.SIGINT, previous)
    tee.finish()
    return rc


def _lang(args: argparse.Namespace) -> str:
    from .output import chosen_lang

    return chosen_lang(args)


def report_run(log_dir: Path, args: argparse.Namespace) -> None:
    """The diagnosis of what was recorded (stderr), and where it is; a line when nothing was."""
    from ..detectors.engine import diagnose_runs
    from ..messages import render
    from ..report import render as render_report
    from ..sources import SourceError, load_path
    from .console_tee import CONSOLE_FILE
    from .console_watch import console_runs, recorded_steps
    from .output import chosen_lang, error_line, no_color, text_width

    lang = chosen_lang(args)
    if not log_dir.is_dir():
        error_line(render("cli.run.nothing", {"log_dir": str(log_dir)}, lang))
        return
    hooked = recorded_steps(log_dir)
    try:
        runs = load_path(log_dir) if hooked else console_runs(log_dir)
        if runs is None:
            error_line(render("cli.run.nothing", {"log_dir": str(log_dir)}, lang))
            return
        report = diagnose_runs(runs)
    except SourceError as e:
        error_line(render("cli.run.unreadable", {"log_dir": str(log_dir), "error": str(e)}, lang))
        return
    text = render_report(
        report, "text", color=sys.stderr.isatty() and not no_color(), runs=runs, lang=lang, width=text_width()
    )
    print(text.rstrip("\n"), file=sys.stderr)
    if hooked:
        error_line(render("cli.run.where", {"log_dir": str(log_dir)}, lang))
    else:
        error_line(
            render("cli.run.where_console", {"log_dir": str(log_dir), "console": str(log_dir / CONSOLE_FILE)}, lang)
        )
