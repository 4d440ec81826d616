"""The real logs cut into the excerpts people paste: is a verdict still right on part of a log?

Issue 25 asks for symptoms judged "at any length": a user pastes the last screen of a run, a middle
stretch, or the lines up to the first NaN, not the whole file. This cuts each corpus log (by lines,
as a paste would) and judges every excerpt as the real-log scorer judges a whole log:

- a healthy log's excerpts (its tail half, tail quarter, middle 30-70%, head 40%) must stay clean
  (no warning or critical finding);
- a faulty log whose whole text raised an alarm: its tail half and tail quarter, when the excerpt
  still holds the step of that alarm, must raise one too (the same fault, seen again in less text);
- a NaN log: the lines up to and including the first line printing a NaN/Inf, and the eight lines
  before it plus two after, must give a critical non-finite finding.

Refused excerpts count as misses (a table cut below its header still holds a numeric series). The
truth of a faulty excerpt is the whole log's own alarm, so this measures consistency across lengths,
not new labels; the healthy and NaN rows rest on the thread's labels alone.

    python -m benchmarks.real_logs.excerpts                  # dev split; writes its docs section
    python -m benchmarks.real_logs.excerpts --split test --no-docs
    python -m benchmarks.real_logs.excerpts --show 20       # and the first 20 misses of each kind
"""

from __future__ import annotations

import argparse
import json
import os
import re
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from benchmarks.real_logs.score import ALARM, CORPUS, MANIFEST

#: line-fraction cuts of a healthy log (start, end)
HEALTHY_CUTS = {"tail 50%": (0.5, 1.0), "tail 25%": (0.75, 1.0), "middle 30-70%": (0.3, 0.7), "head 40%": (0.0, 0.4)}
#: line-fraction cuts of a faulty log: the fault is usually near its end
FAULTY_CUTS = {"tail 50%": (0.5, 1.0), "tail 25%": (0.75, 1.0)}
#: lines kept before and after the first NaN/Inf line in the "around" cut
AROUND_BEFORE, AROUND_AFTER = 8, 2
#: fewer lines than this is no excerpt anyone would paste for a verdict
MIN_LINES = 3
#: a NaN/Inf printed as a value: after a separator (`loss: nan lr: 0.1`, `tensor(inf)`, `| nan |`), or
#: as a word not followed by another (`loss nan`), never a word of a name (`financial`, Megatron's
#: `number of nan iterations: 0`)
NAN_WORD = re.compile(
    r"(?:[:=(\[,|]|^)\s*[-+]?(?:nan|inf)(?![A-Za-z])|(?<![A-Za-z])[-+]?(?:nan|inf)(?![A-Za-z])(?!\s+[A-Za-z])", re.I
)
#: formats whose lines are not independent records (a JSON array, a CSV header): cut as text anyway,
#: but reported so a refusal there is read for what it is
WHOLE_FILE_SUFFIXES = (".json",)


@dataclass
class Cut:
    file: str
    kind: str  # "healthy", "faulty", "nan"
    cut: str
    ok: bool
    got: str


def _verdict(path: Path) -> tuple[str, list[dict[str, Any]], Any]:
    """(status, findings, the longest run) of one file, or ("refused", [], None)."""
    from lossdoctor.detectors.engine import diagnose_runs
    from lossdoctor.sources import SourceError, load_path

    try:
        runs = load_path(path)
    except SourceError:
        return "refused", [], None
    report = diagnose_runs(runs).to_dict()
    return report["status"], report["findings"], max(runs, key=len)


def _judge_text(lines: list[str], suffix: str) -> tuple[str, list[dict[str, Any]], Any]:
    fd, name = tempfile.mkstemp(suffix=suffix)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.writelines(lines)
        return _verdict(Path(name))
    finally:
        os.unlink(name)


def _first(findings: list[dict[str, Any]]) -> str:
    alarms = [f for f in findings if f["severity"] in ALARM]
    return f"{alarms[0]['cause']}/{alarms[0]['symptom']}" if alarms else "-"


def _alarm_step(findings: list[dict[str, Any]]) -> int | None:
    steps = [f.get("step") for f in findings if f["severity"] in ALARM and f.get("step") is not None]
    return int(steps[0]) if steps else None


def _holds(run: Any, step: int | None) -> bool:
    """The excerpt's steps span `step` (a whole log's alarm step): the fault is inside the excerpt."""
    if run is None or step is None or not len(run):
        return step is not None
    return float(run.steps.min()) <= step <= float(run.steps.max())


def _lines(path: Path) -> list[str]:
    return path.read_text(encoding="utf-8", errors="replace").splitlines(keepends=True)


def _healthy(entry: dict[str, Any], lines: list[str], suffix: str) -> Iterator[Cut]:
    for name, (a, b) in HEALTHY_CUTS.items():
        part = lines[int(a * len(lines)) : int(b * len(lines))]
        if len(part) < MIN_LINES:
            continue
        status, findings, _ = _judge_text(part, suffix)
        alarmed = any(f["severity"] in ALARM for f in findings)
        yield Cut(entry["file"], "healthy", name, status != "refused" and not alarmed, status + " " + _first(findings))


def _faulty(entry: dict[str, Any], lines: list[str], suffix: str) -> Iterator[Cut]:
    _, whole, _ = _verdict(CORPUS / entry["file"])
    step = _alarm_step(whole)
    if step is None:
        return  # the whole log raised no alarm: the real-log scorer counts that miss already
    for name, (a, b) in FAULTY_CUTS.items():
        part = lines[int(a * len(lines)) : int(b * len(lines))]
        if len(part) < MIN_LINES:
            continue
        status, findings, run = _judge_text(part, suffix)
        if status != "refused" and not _holds(run, step):
            continue  # the fault the whole log showed lies before the excerpt
        alarmed = any(f["severity"] in ALARM for f in findings)
        yield Cut(entry["file"], "faulty", name, alarmed, status + " " + _first(findings))


def _nan(entry: dict[str, Any], lines: list[str], suffix: str) -> Iterator[Cut]:
    hits = [i for i, line in enumerate(lines) if NAN_WORD.search(line)]
    if not hits:
        return
    h = hits[0]
    cuts = {
        "up to the first NaN line": lines[: h + 1],
        "around it": lines[max(0, h - AROUND_BEFORE) : h + 1 + AROUND_AFTER],
    }
    for name, part in cuts.items():
        status, findings, _ = _judge_text(part, suffix)
        crit = any(f["severity"] == "critical" and f["symptom"] == "nonfinite" for f in findings)
        yield Cut(entry["file"], "nan", name, crit, status + " " + _first(findings))


def cut_corpus(split: str) -> list[Cut]:
    out: list[Cut] = []
    for entry in json.loads(MANIFEST.read_text(encoding="utf-8")):
        if entry.get("split", "dev") != split or entry["outcome"] == "other":
            continue
        path = CORPUS / entry["file"]
        lines, suffix = _lines(path), path.suffix
        if entry["outcome"] == "healthy":
            out += _healthy(entry, lines, suffix)
        else:
            out += _faulty(entry, lines, suffix)
            if entry["outcome"] == "nan":
                out += _nan(entry, lines, suffix)
    return out


def table(cuts: list[Cut]) -> str:
    rows = ["| logs | excerpt | right | what right means |", "|---|---|---|---|"]
    means = {
        "healthy": "no warning or critical finding",
        "faulty": "an alarm, as the whole log raised",
        "nan": "a critical non-finite finding",
    }
    order = [("healthy", c) for c in HEALTHY_CUTS] + [("faulty", c) for c in FAULTY_CUTS]
    order += [("nan", "up to the first NaN line"), ("nan", "around it")]
    for kind, name in order:
        got = [c for c in cuts if c.kind == kind and c.cut == name]
        if got:
            ok = sum(c.ok for c in got)
            rows.append(f"| {kind} | {name} | {ok}/{len(got)} ({100 * ok / len(got):.0f}%) | {means[kind]} |")
    return "\n".join(rows)


def docs_body(by_split: dict[str, list[Cut]], command: str) -> str:
    from benchmarks.docs import provenance

    parts = [
        "## Real logs, cut into excerpts",
        "",
        provenance(command),
        "",
        "Each corpus log cut by lines the way people paste part of a run (see `benchmarks/real_logs/excerpts.py`): a "
        "healthy log's excerpts must stay clean, a faulty log's tail must raise the alarm its whole text raised "
        "(when the tail still holds that step), and a NaN log cut at its first NaN line must be critical. "
        "The dev split is in-sample (rules were written while looking at its excerpts); the test split's files "
        "were never opened.",
    ]
    for split, cuts in by_split.items():
        parts += ["", f"### {split}", "", table(cuts)]
        misses = [c for c in cuts if not c.ok]
        if split == "dev" and misses:
            parts += ["", "Misses (dev):", ""]
            parts += [f"- `{c.file}` ({c.kind}, {c.cut}): {c.got}" for c in misses]
    return "\n".join(parts)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--split", choices=("dev", "test", "both"), default="dev")
    ap.add_argument("--no-docs", action="store_true", help="print only; leave docs/benchmarks.md alone")
    ap.add_argument("--show", type=int, default=0, help="print this many misses of each kind (dev only)")
    args = ap.parse_args(argv)
    splits = ("dev", "test") if args.split == "both" else (args.split,)
    by = {s: cut_corpus(s) for s in splits}
    for s, cuts in by.items():
        print(f"\n{s}\n" + table(cuts))
        if args.show and s == "dev":
            for kind in ("healthy", "faulty", "nan"):
                for c in [c for c in cuts if c.kind == kind and not c.ok][: args.show]:
                    print(f"  miss {kind:7s} {c.cut:26s} {c.got:40s} {c.file}")
    if not args.no_docs:
        from benchmarks.docs import command_line, write_section

        print(f"\nwrote {write_section('real-log-excerpts', docs_body(by, command_line()))}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
