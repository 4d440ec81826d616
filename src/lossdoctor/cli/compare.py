"""`lossdoctor diagnose RUN_A RUN_B [...]` (or one folder holding several runs): each run read and
diagnosed alone, then side by side (`detectors.comparison.compare`); and `lossdoctor completion`.
Torch-free, like `diagnose`."""

from __future__ import annotations

import argparse
import dataclasses
import os
from pathlib import Path
from typing import Any

from .output import (
    EXIT_BAD_INPUT,
    EXIT_FAIL_ON,
    EXIT_OK,
    WriteError,
    chosen_lang,
    error_line,
    progress,
    say_arg,
    write_report,
    write_text,
)


def compared_paths(args: argparse.Namespace) -> list[str] | None:
    """The paths to compare, or None for one run: two or more PATHs, or `--compare` on one folder
    (its version_N/ runs, else its sub-folders and files that read as runs)."""
    if len(args.paths) >= 2:
        return list(args.paths)
    if getattr(args, "compare", False) and args.paths[0] != "-":
        return folder_runs(Path(args.paths[0]))
    return None


def folder_runs(folder: Path) -> list[str]:
    """What a folder holds that may be a run each: a run directory's version_N/ runs, else its
    sub-folders and files (not hidden, links not followed), sorted by name."""
    from ..sources.rundir import run_versions

    if not folder.is_dir():
        return [str(folder)]
    versions = run_versions(folder)
    if len(versions) >= 2:
        return [str(p) for _, p in versions]
    try:
        entries = sorted(os.scandir(folder), key=lambda e: e.name)
    except OSError:
        return [str(folder)]
    return [
        e.path for e in entries if not e.name.startswith(".") and not e.is_symlink() and (e.is_dir() or e.is_file())
    ][:64]


def labels(paths: list[str]) -> list[str]:
    """Short, distinct names: the last path component, or more of it where two are the same."""
    parts = [Path(os.path.abspath(p)).parts for p in paths]
    for depth in range(1, 6):
        names = ["/".join(p[-depth:]) for p in parts]
        if len(set(names)) == len(names):
            return names
    return [f"{i}:{Path(p).name}" for i, p in enumerate(paths)]


def cmd_compare(args: argparse.Namespace, paths: list[str], from_folder: str | None = None) -> int:
    from ..detectors.comparison import compare
    from ..detectors.engine import diagnose_runs
    from ..messages import Msg
    from ..sources import SourceError, load_path
    from ..vocabulary import SEVERITY_RANK

    lang = chosen_lang(args)
    from_folder = from_folder or (args.paths[0] if len(args.paths) == 1 else None)
    if getattr(args, "run", None) is not None:
        error_line(f"lossdoctor: {say_arg(Exception(Msg('cli.compare.no_run')), lang)}")
        return EXIT_BAD_INPUT
    if "-" in paths:
        error_line(f"lossdoctor: {say_arg(Exception(Msg('cli.compare.stdin')), lang)}")
        return EXIT_BAD_INPUT
    loaded: list[tuple[str, Any, Any]] = []
    for path in paths:
        try:
            with progress(path, lang):
                runs = load_path(path, getattr(args, "format_in", None))
                report = diagnose_runs(runs)
        except (SourceError, OSError, ValueError, UnicodeDecodeError, MemoryError) as e:
            if from_folder is None:
                error_line(f"lossdoctor: {' '.join(str(e).split())}"[:500])
                return EXIT_BAD_INPUT
            continue  # a folder's file or sub-folder that is no run: not compared
        loaded.append((path, runs, report))
    if len(loaded) < 2:
        error_line(
            f"lossdoctor: {say_arg(Exception(Msg('cli.compare.too_few', path=from_folder or paths[0], n=len(loaded))), lang)}"
        )
        return EXIT_BAD_INPUT
    names = labels([p for p, _, _ in loaded])
    comparison = compare([(name, p, runs[0], rep) for name, (p, runs, rep) in zip(names, loaded)])
    base = loaded[0][2]
    report = dataclasses.replace(base, comparison=comparison)
    try:
        write_report(report, args, [runs[0] for _, runs, _ in loaded], inputs=[p for p, _, _ in loaded])
    except WriteError as e:
        error_line(f"lossdoctor: {say_arg(e, lang)}")
        return EXIT_BAD_INPUT
    if args.fail_on:
        worst = max((f.severity_rank for _, _, rep in loaded for f in rep.findings), default=-1)
        if worst >= SEVERITY_RANK[args.fail_on]:
            return EXIT_FAIL_ON
    return EXIT_OK


# --- shell completion -------------------------------------------------------------------------

_BASH = """# bash completion for lossdoctor (lossdoctor completion bash)
_lossdoctor() {
  local cur cmd opts
  cur="${COMP_WORDS[COMP_CWORD]}"
  cmd="${COMP_WORDS[1]}"
  if [ "$COMP_CWORD" -eq 1 ]; then
    COMPREPLY=( $(compgen -W "@COMMANDS@ --help --version" -- "$cur") )
    return 0
  fi
  case "$cmd" in
@CASES@
    *) opts="--help" ;;
  esac
  if [[ "$cur" == -* ]]; then
    COMPREPLY=( $(compgen -W "$opts" -- "$cur") )
  else
    COMPREPLY=( $(compgen -f -- "$cur") )
  fi
  return 0
}
complete -o filenames -o bashdefault -F _lossdoctor lossdoctor
"""

_ZSH = """#compdef lossdoctor
# zsh completion for lossdoctor (lossdoctor completion zsh): zsh's bash-completion bridge
autoload -U +X bashcompinit && bashcompinit
"""


def completion_script(shell: str, parser: argparse.ArgumentParser) -> str:
    """A static completion script: the commands and each command's options, as the parser has them."""
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    cases = []
    for name, p in sub.choices.items():
        opts = sorted({o for a in p._actions for o in a.option_strings})
        cases.append(f'    {name}) opts="{" ".join(opts)}" ;;')
    script = _BASH.replace("@COMMANDS@", " ".join(sub.choices)).replace("@CASES@", "\n".join(cases))
    return script if shell == "bash" else _ZSH + script


def cmd_completion(args: argparse.Namespace, parser: argparse.ArgumentParser) -> int:
    write_text(completion_script(args.shell, parser), None)
    return EXIT_OK
