"""How general is the text reader? Each dev-split log of the corpus, rewritten the ways real pastes
differ from it, read again.

A reader tuned on the corpus reads the corpus; a log written by someone else differs in ways that do
not change what it says: a logger's or launcher's prefix in front of every line, a Markdown fence or
quote around the paste, colours, CRLF line ends, numbers printed in another notation, an excerpt
cut from the middle, a warning or a progress bar between the lines. This tool takes every dev-split
text log of `manifest.json` (the test split is never opened), reads it with
`lossdoctor.sources.load_path` (the baseline: the longest run's `loss`, `grad_norm` and `lr` by step),
applies each transform below, writes the variant to a temporary file of the same name and reads it
again. A variant is

- **same**: the same series (an excerpt: every point of the variant is the original's, the variant's
  steps a contiguous window of the original's, shifted by one constant where the steps were counted
  from the text's start; values equal to the printed precision),
- **changed**: read, but another series (`loss col`: the loss now differs and comes from a column of
  another name),
- **refused**: the reader raised,
- not counted (`n/a`) when the transform does not apply to the log (an excerpt of a log too short to
  cut, numbers to rewrite where there are none).

Every transform keeps what the log says; the reader should read every variant as it read the log.

    python -m benchmarks.real_logs.variants [--only NAME,...] [--transforms NAME,...] [--show N]

`--show N` prints up to N failing files per transform (what changed), to find the mechanism.
CSV/JSON files (rows of a table format, not console text) are left out.
"""

from __future__ import annotations

import argparse
import json
import math
import random
import re
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

CORPUS = Path(__file__).resolve().parent
MANIFEST = CORPUS / "manifest.json"
#: the files read as console text (tables and JSON files are other readers' formats)
TEXT_SUFFIXES = (".log", ".txt", ".md", ".out")
#: the series compared
SERIES = ("loss", "grad_norm", "lr")
#: an excerpt of a log shorter than this many lines is not cut
MIN_EXCERPT_LINES = 10


def _lines(text: str) -> list[str]:
    return text.split("\n")


def _each_line(text: str, make: Callable[[int], str], *, blank_too: bool = False) -> str:
    """`make(i)` in front of every (non-blank) line; the i-th such line gets make(i)."""
    out, i = [], 0
    for line in _lines(text):
        if line.strip() or blank_too:
            out.append(make(i) + line)
            i += 1
        else:
            out.append(line)
    return "\n".join(out)


def _clock(i: int) -> tuple[int, int, int, int]:
    """A clock that moves on with the lines: (hours, minutes, seconds, milliseconds)."""
    t = 43200 * 1000 + i * 1370 + (i * 7919) % 211
    ms = t % 1000
    s = t // 1000
    return s // 3600, (s // 60) % 60, s % 60, ms


def _pylogging(i: int) -> str:
    h, m, s, ms = _clock(i)
    return f"2024-05-01 {h:02d}:{m:02d}:{s:02d},{ms:03d} - INFO - train - "


def _iso(i: int) -> str:
    h, m, s, ms = _clock(i)
    return f"2024-05-01T{h:02d}:{m:02d}:{s:02d}.{ms:03d}{(i * 37) % 1000:03d}Z "


def _glog(i: int) -> str:
    h, m, s, ms = _clock(i)
    return f"I1203 {h:02d}:{m:02d}:{s:02d}.{ms:03d}{(i * 37) % 1000:03d} 12345 train.py:88] "


#: a plain decimal (not part of a word, a version, a date or a clock)
_DECIMAL = re.compile(r"(?<![\w.:/-])(-?)(\d+)\.(\d+)(?![\w.:/])")


def _scientific(m: re.Match[str]) -> str:
    sign, whole, frac = m.groups()
    digits = (whole + frac).lstrip("0") or "0"
    value = float(f"{whole}.{frac}")
    if value == 0:
        return m.group(0)
    return f"{sign}{value:.{max(len(digits) - 1, 1)}e}"


def _more_digits(m: re.Match[str]) -> str:
    return m.group(0) + "00"


def _fewer_digits(m: re.Match[str]) -> str:
    """One decimal less where the number has at least five significant digits (a change below 5e-4
    relative: the value as a coarser print shows it)."""
    sign, whole, frac = m.groups()
    if len((whole + frac).lstrip("0")) < 5 or len(frac) < 2:
        return m.group(0)
    return f"{sign}{float(f'{whole}.{frac}'):.{len(frac) - 1}f}"


def _numbers(sub: Callable[[re.Match[str]], str]) -> Callable[[str], str | None]:
    def apply(text: str) -> str | None:
        new = _DECIMAL.sub(sub, text)
        return new if new != text else None

    return apply


def _ansi_numbers(text: str) -> str | None:
    new = re.sub(r"(?<![\w.])(-?\d+(?:\.\d+)?(?:[eE][+-]?\d+)?)(?![\w.])", "\x1b[32m\\1\x1b[0m", text)
    return new if new != text else None


def _excerpt(a: float, b: float) -> Callable[[str], str | None]:
    def apply(text: str) -> str | None:
        lines = _lines(text)
        if sum(1 for x in lines if x.strip()) < MIN_EXCERPT_LINES:
            return None
        return "\n".join(lines[int(len(lines) * a) : int(math.ceil(len(lines) * b))])

    return apply


NOISE = {
    "warnings": [
        "/usr/lib/python3/site-packages/torch/utils/data/dataloader.py:557: UserWarning: This DataLoader "
        "will create 16 worker processes in total.",
        "  warnings.warn(",
        "WARNING:root:Some weights of the model checkpoint were not used when initializing the model.",
    ],
    "tqdm": [
        "Loading checkpoint shards:  50%|█████     | 1/2 [00:03<00:03,  3.52s/it]",
        "Downloading data: 100%|██████████| 1.23M/1.23M [00:00<00:00, 3.21MB/s]",
        "Map: 100%|██████████| 2000/2000 [00:01<00:00, 1500.42 examples/s]",
    ],
    "traceback": [
        "Traceback (most recent call last):",
        '  File "/home/user/project/train.py", line 88, in <module>',
        "    main()",
        '  File "/home/user/project/trainer.py", line 412, in train_step',
    ],
    "wandb": [
        "wandb: Currently logged in as: someone. Use `wandb login --relogin` to force relogin",
        "wandb: Tracking run with wandb version 0.16.3",
        "wandb: ⭐️ View project at https://wandb.ai/someone/project",
    ],
}


def _noise(kind: str, every: int = 4) -> Callable[[str], str]:
    pool = NOISE[kind]

    def apply(text: str) -> str:
        out, k = [], 0
        for i, line in enumerate(_lines(text)):
            out.append(line)
            if i % every == every - 1 and line.strip():
                out.append(pool[k % len(pool)])
                k += 1
        return "\n".join(out)

    return apply


#: name -> (text -> variant text, None where it does not apply)
TRANSFORMS: dict[str, Callable[[str], str | None]] = {
    "pylogging": lambda t: _each_line(t, _pylogging),
    "rank0": lambda t: _each_line(t, lambda i: "[rank0]: "),
    "mpirun_tag": lambda t: _each_line(t, lambda i: "[1,0]<stdout>:"),
    "slurm_node": lambda t: _each_line(t, lambda i: "node12: "),
    "iso_time": lambda t: _each_line(t, _iso),
    "glog": lambda t: _each_line(t, _glog),
    "viewer_lineno": lambda t: _each_line(t, lambda i: f"{i + 1:4d} | ", blank_too=True),
    "md_fence": lambda t: "```\n" + t.rstrip("\n") + "\n```\n",
    "md_quote": lambda t: "\n".join("> " + x for x in _lines(t)),
    "ansi_numbers": _ansi_numbers,
    "crlf": lambda t: t.replace("\n", "\r\n") if "\r" not in t else None,
    "tabs": lambda t: re.sub(r"(?<=\S) {2,}(?=\S)", "\t", t) if re.search(r"\S {2,}\S", t) else None,
    "trailing_spaces": lambda t: "\n".join(x + "   " if x.strip() else x for x in _lines(t)),
    "blank_lines": lambda t: "\n\n".join(_lines(t)),
    "scientific": _numbers(_scientific),
    "more_digits": _numbers(_more_digits),
    "fewer_digits": _numbers(_fewer_digits),
    "drop_first_30": _excerpt(0.3, 1.0),
    "middle_20_80": _excerpt(0.2, 0.8),
    "noise_warnings": _noise("warnings"),
    "noise_tqdm": _noise("tqdm"),
    "noise_traceback": _noise("traceback"),
    "noise_wandb": _noise("wandb"),
}
#: transforms that round values (compared to their printed precision); excerpts (a window of the points)
ROUNDED = {"fewer_digits": 5e-4}
EXCERPTS = {"drop_first_30", "middle_20_80"}


def series(runs: list[Any]) -> dict[str, Any]:
    """The longest run's loss, grad_norm and lr as {column: [(step, value)...]} in step order, and
    which column the reader took the loss from."""
    run = max(runs, key=len)
    out: dict[str, Any] = {}
    order = np.argsort(run.steps, kind="stable")
    for name in SERIES:
        if name in run.cols and run.has(name):
            mask = run.logged(name)
            col = run.col(name)
            out[name] = [(int(run.steps[i]), float(col[i])) for i in order if mask[i]]
    out["loss_key"] = run.meta.get("loss_key")
    return out


def _close(a: float, b: float, rtol: float) -> bool:
    if math.isnan(a) or math.isnan(b):
        return math.isnan(a) and math.isnan(b)
    return math.isclose(a, b, rel_tol=rtol, abs_tol=1e-12)


def _matches(orig: list, var: list, rtol: float, offset: int) -> bool:
    at = dict(orig)
    return all(s + offset in at and _close(at[s + offset], v, rtol) for s, v in var)


def _window_offset(orig: list, var: list, rtol: float) -> int | None:
    """The step shift that makes `var` a contiguous window of `orig` (0 tried first), or None."""
    if not var:
        return None
    candidates = [0] + [s - var[0][0] for s, v in orig if _close(v, var[0][1], rtol)]
    steps = [s for s, _ in orig]
    for off in candidates:
        if not _matches(orig, var, rtol, off):
            continue
        lo, hi = var[0][0] + off, var[-1][0] + off
        if len({s for s in steps if lo <= s <= hi}) == len({s for s, _ in var}):
            return off
    return None


def compare(base: dict[str, Any], got: dict[str, Any], transform: str) -> str | None:
    """None when `got` reads as `base` did; else what differs, in a few words."""
    rtol = ROUNDED.get(transform, 1e-9)
    diff = _series_diff(base, got, transform, rtol)
    if diff is not None and "loss" in base and "loss" in got and got.get("loss_key") != base.get("loss_key"):
        return f"loss col {base.get('loss_key')!r} -> {got.get('loss_key')!r} ({diff})"
    return diff


def _series_diff(base: dict[str, Any], got: dict[str, Any], transform: str, rtol: float) -> str | None:
    """What differs between two readings' series (None: the same; the loss's name is not compared)."""
    if set(base) - {"loss_key"} != set(got) - {"loss_key"}:
        return f"columns {sorted(set(base) - {'loss_key'})} -> {sorted(set(got) - {'loss_key'})}"
    offset = 0
    if transform in EXCERPTS and "loss" in base:
        off = _window_offset(base["loss"], got["loss"], rtol)
        if off is None:
            return f"loss not a window ({len(got['loss'])} of {len(base['loss'])} points)"
        offset = off
    for name in SERIES:
        if name not in base:
            continue
        a, b = base[name], got[name]
        if transform in EXCERPTS:
            if not _matches(a, b, rtol, offset):
                return f"{name}: a point not the original's"
        elif len(a) != len(b) or any(sa != sb or not _close(va, vb, rtol) for (sa, va), (sb, vb) in zip(a, b)):
            return f"{name}: {len(a)} -> {len(b)} points, first diff {_first_diff(a, b)}"
    return None


def _first_diff(a: list, b: list) -> str:
    for (sa, va), (sb, vb) in zip(a, b):
        if sa != sb or not _close(va, vb, 1e-9):
            return f"({sa}, {va:.6g}) vs ({sb}, {vb:.6g})"
    return "(length)"


def dev_logs(only: set[str] | None = None) -> list[Path]:
    entries = json.loads(MANIFEST.read_text(encoding="utf-8"))
    files = [e["file"] for e in entries if e["split"] == "dev"]  # test-split files are never opened
    files = [f for f in files if Path(f).suffix.lower() in TEXT_SUFFIXES]
    if only:
        files = [f for f in files if f in only]
    return [CORPUS / f for f in sorted(files)]


def _read(path: Path) -> tuple[dict[str, Any] | None, str]:
    from lossdoctor.sources import SourceError, load_path

    try:
        return series(load_path(path)), ""
    except SourceError as e:
        return None, str(e).splitlines()[0][:160]


def run(files: list[Path], names: list[str], show: int) -> dict[str, dict[str, int]]:
    table = {n: {"same": 0, "changed": 0, "loss col": 0, "refused": 0, "n/a": 0} for n in names}
    failures: dict[str, list[str]] = {n: [] for n in names}
    random.seed(0)
    with tempfile.TemporaryDirectory(prefix="variants-") as tmp:
        for path in files:
            base, why = _read(path)
            if base is None:
                print(f"baseline refused: {path.name}: {why}", file=sys.stderr)
                continue
            text = path.read_bytes().decode("utf-8", "replace")
            for name in names:
                variant = TRANSFORMS[name](text)
                if variant is None:
                    table[name]["n/a"] += 1
                    continue
                out = Path(tmp) / path.name
                out.write_bytes(variant.encode("utf-8"))
                got, why = _read(out)
                if got is None:
                    table[name]["refused"] += 1
                    failures[name].append(f"{path.name}: refused ({why})")
                    continue
                diff = compare(base, got, name)
                if diff is None:
                    table[name]["same"] += 1
                    continue
                table[name]["loss col" if diff.startswith("loss col") else "changed"] += 1
                failures[name].append(f"{path.name}: {diff}")
    if show:
        for name in names:
            for line in failures[name][:show]:
                print(f"  [{name}] {line}")
    return table


def print_table(table: dict[str, dict[str, int]], n_files: int) -> None:
    cols = ["same", "changed", "loss col", "refused", "n/a"]
    print(f"{n_files} dev-split text logs; each transform's variants read again\n")
    print(f"| {'transform':16s} | " + " | ".join(f"{c:>8s}" for c in cols) + " |")
    print("|" + "-" * 18 + "|" + "|".join("-" * 10 for _ in cols) + "|")
    total = dict.fromkeys(cols, 0)
    for name, row in table.items():
        print(f"| {name:16s} | " + " | ".join(f"{row[c]:8d}" for c in cols) + " |")
        for c in cols:
            total[c] += row[c]
    print(f"| {'all':16s} | " + " | ".join(f"{total[c]:8d}" for c in cols) + " |")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--only", help="comma-separated corpus file names (default: every dev-split text log)")
    ap.add_argument("--transforms", help=f"comma-separated, of: {', '.join(TRANSFORMS)}")
    ap.add_argument("--show", type=int, default=0, help="print up to N failing files per transform")
    ap.add_argument("--json", help="also write the table to this file")
    ap.add_argument("--docs", action="store_true", help="also rewrite this tool's section of docs/benchmarks.md")
    args = ap.parse_args(argv)
    names = args.transforms.split(",") if args.transforms else list(TRANSFORMS)
    unknown = [n for n in names if n not in TRANSFORMS]
    if unknown:
        ap.error(f"unknown transform(s): {', '.join(unknown)}")
    files = dev_logs(set(args.only.split(",")) if args.only else None)
    table = run(files, names, args.show)
    print_table(table, len(files))
    if args.json:
        Path(args.json).write_text(json.dumps(table, indent=1), encoding="utf-8")
    if args.docs:
        from benchmarks.docs import command_line, write_section

        print(f"wrote {write_section('real-log-variants', docs_body(table, len(files), command_line()))}")
    return 0


def docs_body(table: dict[str, dict[str, int]], n_files: int, command: str) -> str:
    """The section of docs/benchmarks.md: the table, with what the columns mean."""
    from benchmarks.docs import provenance

    cols = ["same", "changed", "loss col", "refused", "n/a"]
    rows = ["| transform | " + " | ".join(cols) + " |", "|---|" + "---|" * len(cols)]
    total = dict.fromkeys(cols, 0)
    for name, row in table.items():
        rows.append(f"| {name} | " + " | ".join(str(row[c]) for c in cols) + " |")
        for c in cols:
            total[c] += row[c]
    rows.append("| **all** | " + " | ".join(f"**{total[c]}**" for c in cols) + " |")
    return "\n".join(
        [
            "## Real logs, rewritten the ways pastes differ",
            "",
            provenance(command),
            "",
            f"The {n_files} dev-split text logs of the corpus (in-sample: the reader was changed while looking at "
            "these variants; the test split is never opened), each rewritten by every transform of "
            "`benchmarks/real_logs/variants.py` (a logger's or launcher's prefix, a Markdown fence or quote, colours, "
            "CRLF, other number notations, an excerpt, noise lines between the lines) and read again. **same**: the "
            "same loss, grad_norm and lr series (an excerpt: a contiguous window of them); **changed**: read, other "
            "series (**loss col**: the loss now comes from another column); **refused**: the reader raised; "
            "**n/a**: the transform does not apply to the log.",
            "",
            *rows,
        ]
    )


if __name__ == "__main__":
    sys.exit(main())
