"""docs/benchmarks.md is assembled from sections, each rewritten only by the command that measures
it (`<!-- BEGIN name -->` ... `<!-- END name -->`), so rerunning one benchmark never erases the
numbers of another."""

from __future__ import annotations

import os
import platform
import subprocess
import sys
from datetime import datetime, timezone
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DOC = ROOT / "docs" / "benchmarks.md"
ORDER = (
    "intro",
    "zoo",
    "zoo-verify",
    "lr-probe",
    "generated-dev",
    "generated-test",
    "peers",
    "real-logs",
    "real-log-excerpts",
    "real-log-variants",
    "text-reader",
    "format-gallery",
    "print-shapes",
    "read-speed",
    "overhead",
    "overhead-spread",
    "overhead-ablation",
    "overhead-gpu",
    "many-params",
    "many-ranks",
    "deepspeed-overhead",
    "tp-overhead",
    "pp-overhead",
)

INTRO = """# Benchmarks

Every number on this page was printed by a command in `benchmarks/`; each section says which
command produced it, when, on what machine, and at which commit. Rerun a command and it rewrites
its own section.

| section | command |
|---|---|
| [Fault zoo](#fault-zoo) | `python -m benchmarks.zoo` (add `--seeds 1` for a quick pass, `--only NAME` for one scenario) |
| [Verified fixes in the zoo](#verified-fixes-in-the-zoo) | `python -m benchmarks.zoo --seeds 1 --replay-all` (rewrites this section only) |
| [The LR probe](#the-lr-probe) | `python -m benchmarks.lr_probe --docs` |
| [Generated variants: dev](#generated-variants-dev) | `python -m benchmarks.zoo --generated --split dev --jobs 2` (the split tuned on) |
| [Generated variants: test](#generated-variants-test) | `python -m benchmarks.zoo --generated --split test --jobs 2` (held out: never tuned on) |
| [Peers on the same logs](#peers-on-the-same-logs) | `python -m benchmarks.zoo.peers` (needs a separate venv, see the section) |
| [Real logs](#real-logs) | `python -m benchmarks.real_logs.score` |
| [Real logs, cut into excerpts](#real-logs-cut-into-excerpts) | `python -m benchmarks.real_logs.excerpts --split both` |
| [Real logs, rewritten the ways pastes differ](#real-logs-rewritten-the-ways-pastes-differ) | `python -m benchmarks.real_logs.variants --docs` |
| [General text reader](#general-text-reader) | `PYTHONPATH=<a folder with drain3> python benchmarks/text_templates.py --baseline 1c5b225 --docs` |
| [Format gallery](#format-gallery) | `python benchmarks/format_gallery.py --baseline 1c5b225 --docs` |
| [Print statements from training scripts](#print-statements-from-training-scripts) | `python -m benchmarks.print_shapes.score --baseline c278d4a --docs` |
| [Read speed](#read-speed) | `python benchmarks/read_speed.py --reference --sizes 10MB,100MB,1GB:console+csv+jsonl --before 1c5b225 --repeat 2 --docs` (default: 10MB of each format, a quick run) |
| [Overhead](#overhead) | `python benchmarks/overhead.py` |
| [Overhead, part by part](#overhead-part-by-part) | `python benchmarks/overhead.py --ablate --sizes 10m` |
| Overhead on a GPU (not run yet: no GPU was lent; the section appears when it runs) | `python benchmarks/gpu.py` (CUDA only; skips cleanly without it) |
| [Overhead with many parameter tensors](#overhead-with-many-parameter-tensors) | `python benchmarks/many_params.py` |
| [Run directories of many ranks](#run-directories-of-many-ranks) | `python benchmarks/many_ranks.py --docs` |
| [Overhead under DeepSpeed ZeRO-2](#overhead-under-deepspeed-zero-2) | `python benchmarks/deepspeed_overhead.py --docs` |
| [Overhead under tensor parallel](#overhead-under-tensor-parallel) | `python benchmarks/tp_overhead.py --docs` |
| [Overhead under pipeline parallel](#overhead-under-pipeline-parallel) | `python benchmarks/pp_overhead.py --docs` |
"""


def provenance(command: str) -> str:
    """One paragraph: command, time, machine, load, versions, commit."""
    try:
        commit = subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True, timeout=10
        ).stdout.strip()
        # the docs page itself is rewritten by each benchmark: not a change to what is measured
        dirty = subprocess.run(
            ["git", "status", "--porcelain", "--untracked-files=no", "--", ".", ":!docs/benchmarks.md"],
            cwd=ROOT,
            capture_output=True,
            text=True,
            timeout=10,
        ).stdout.strip()
        commit = (commit + (" (with uncommitted changes)" if dirty else "")) or "unknown"
    except (OSError, subprocess.SubprocessError):
        commit = "unknown"
    try:
        import torch

        tv = torch.__version__
    except ImportError:
        tv = "not installed"
    try:
        load = "load average " + " / ".join(f"{x:.2f}" for x in os.getloadavg())
    except OSError:
        load = "load unknown"
    when = datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    return (
        f"Command: `{command}` — run {when} on {platform.machine()} with {os.cpu_count()} CPUs "
        f"({load} at the end), Python {platform.python_version()}, torch {tv}, commit {commit}."
    )


def write_section(name: str, body: str, path: Path = DOC) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    text = path.read_text() if path.exists() else ""
    sections = {k: _extract(text, k) for k in ORDER}
    sections["intro"] = INTRO.strip()
    sections[name] = body.strip()
    out = []
    for k in ORDER:
        if sections.get(k):
            out.append(f"<!-- BEGIN {k} -->\n{sections[k]}\n<!-- END {k} -->")
    path.write_text("\n\n".join(out) + "\n")
    return path


def _extract(text: str, name: str) -> str | None:
    a, b = f"<!-- BEGIN {name} -->", f"<!-- END {name} -->"
    if a in text and b in text:
        return text.split(a, 1)[1].split(b, 1)[0].strip()
    return None


def command_line() -> str:
    """The command as the user typed it: `python -m pkg.mod ...` or `python path/to/script.py ...`."""
    spec = getattr(sys.modules.get("__main__"), "__spec__", None)
    if spec is not None and spec.name:
        name = spec.name[: -len(".__main__")] if spec.name.endswith(".__main__") else spec.name
        prog = f"-m {name}"
    else:
        prog = sys.argv[0]
        try:
            prog = str(Path(prog).resolve().relative_to(ROOT))
        except ValueError:
            pass
    return " ".join(["python", prog, *sys.argv[1:]])
