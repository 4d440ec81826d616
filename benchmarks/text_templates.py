#!/usr/bin/env python3
"""How the general text reader groups lines into templates: its own few lines (constant words
around numbers) against a log-template miner (drain3), on accuracy and on speed.

Both variants share everything but the grouping: the same line cleaning, slot naming, choice of the
training loss and step. `ours` keys a line by its text with the numbers cut out; `drain3` keys it
by the cluster drain3's `TemplateMiner.add_log_message` puts it in (numbers masked as parameters).

Accuracy, two sets (both in-sample: the shapes were written for this reader and the dev logs were
looked at while writing it):
- the shape examples below (one per shape the reader is meant to read): right when the training
  loss values read equal the expected ones in order;
- the format gallery (`tests/test_format_gallery.py`: each tool's print shape with its truth), read
  by the general reader alone: right when its training losses are the truth's, in step order;
- the corpus's dev text logs (`benchmarks/real_logs/`, the manifest's dev split only: test-split
  files are never opened; JSON files are skipped):
  the named readers' training loss is the reference; right when at least 90% of its values are
  read (multiset overlap, 4 significant digits) and no more than 10% extra values come with them.
Speed: lines per second reading an ImageNet-example meter log of --lines lines.

    python benchmarks/text_templates.py [--lines 200000] [--console-lines 1000000 --baseline COMMIT] [--docs]

With --baseline, the console reader (the named reader the general one sits behind) is timed on a
nanoGPT console log of --console-lines lines, in fresh processes, alternating this checkout and the
sources of COMMIT (`git archive`), so a slowdown of the common path shows next to its cause.

drain3 is not a dependency of lossdoctor; install it to run this comparison (`pip install drain3`;
it pins old versions of cachetools and jsonpickle, so a separate target folder on PYTHONPATH keeps
them out of the project's environment).
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))

from lossdoctor.sources import SourceError, any_text, load_path  # noqa: E402
from lossdoctor.sources.console_text import segments  # noqa: E402

SHAPES: list[tuple[str, str, list[float]]] = [
    (
        "markdown",
        "| Step | Training Loss | Validation Loss |\n|---|---|---|\n| 10 | 2.31 | 2.4 |\n| 20 | 2.1 | 2.3 |\n"
        "| 30 | 1.9 | 2.2 |\n",
        [2.31, 2.1, 1.9],
    ),
    (
        "ascii box",
        "+------+------+\n| step | loss |\n+------+------+\n|   10 | 1.90 |\n|   20 | 1.80 |\n|   30 | 1.70 |\n",
        [1.9, 1.8, 1.7],
    ),
    (
        "aligned",
        "epoch  train_loss  valid_loss  time\n0      1.000000    1.100000    00:12\n1      0.900000    1.050000    00:12\n"
        "2      0.800000    1.000000    00:12\n",
        [1.0, 0.9, 0.8],
    ),
    (
        "sb3 blocks",
        "".join(
            f"--------------------\n| time/        |   |\n|    iterations | {i} |\n| train/       |   |\n"
            f"|    loss      | {v} |\n|    value_loss | 5.0 |\n--------------------\n"
            for i, v in ((1, 0.5), (2, 0.41), (3, 0.39))
        ),
        [0.5, 0.41, 0.39],
    ),
    (
        "meter",
        "".join(
            f"Epoch: [0][{b:4d}/5005]\tTime  0.257 ( 0.560)\tLoss {v:.4e} ({v + 0.05:.4e})\tAcc@1   0.00 (  0.14)\n"
            for b, v in ((0, 6.9), (10, 6.8), (20, 6.7))
        ),
        [6.9, 6.8, 6.7],
    ),
    (
        "tensor dict",
        "".join(
            f"iteration : {i}, losses : {{'loss': tensor({v}, device='cuda:0', grad_fn=<AddBackward0>), "
            f"'loss_dict': {{'loss_cls': tensor(0.3, device='cuda:0')}}}}\n"
            for i, v in ((0, 2.31), (20, 2.2), (40, 2.1))
        ),
        [2.31, 2.2, 2.1],
    ),
    (
        "np.float32",
        "".join(f"step {s}: {{'loss': np.float32({v}), 'lr': '0.0003'}}\n" for s, v in ((1, 2.4), (2, 2.3), (3, 2.2))),
        [2.4, 2.3, 2.2],
    ),
    ("epoch loss =", "epoch 1 loss = 0.91\nepoch 2 loss = 0.61\nepoch 3 loss = 0.41\n", [0.91, 0.61, 0.41]),
    (
        "iteration :",
        "iteration : 0, losses : 2.31\niteration : 20, losses : 2.2\niteration : 40, losses : 2.1\n",
        [2.31, 2.2, 2.1],
    ),
    (
        "Step: ||",
        "".join(
            f"Step: {s} || Tr.Loss: {v} || Val.Loss: 2.9 || lr: 0.0001\n" for s, v in ((40, 2.1), (80, 1.9), (120, 1.7))
        ),
        [2.1, 1.9, 1.7],
    ),
    (
        "[e/N]",
        "[1/100] loss: 0.41 acc: 0.9\n[2/100] loss: 0.38 acc: 0.9\n[3/100] loss: 0.35 acc: 0.9\n",
        [0.41, 0.38, 0.35],
    ),
    (
        "harness",
        "".join(f"[bench] run-A | tokens/s 1200.5 | train loss = {v} | mem 12.3GB\n" for v in (3.2, 3.1, 3.0)),
        [3.2, 3.1, 3.0],
    ),
    (
        "eval shaped like train",
        "Epoch 1 | loss 2.30\nEpoch 1 | valid | loss 2.90\nEpoch 2 | loss 2.10\nEpoch 2 | valid | loss 2.80\n"
        "Epoch 3 | loss 1.90\n",
        [2.3, 2.1, 1.9],
    ),
]


class Drain3Parser(any_text.TextParser):
    """The same reader with drain3's clusters as the templates."""

    def __init__(self) -> None:
        super().__init__()
        from drain3 import TemplateMiner
        from drain3.template_miner_config import TemplateMinerConfig

        config = TemplateMinerConfig()
        config.profiling_enabled = False
        config.drain_sim_th = 0.4
        config.drain_depth = 4
        from drain3.masking import MaskingInstruction

        config.masking_instructions = [
            MaskingInstruction(r"[-+]?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][-+]?\d+)?|nan|inf", "NUM")
        ]
        self.miner = TemplateMiner(config=config)
        self.by_cluster: dict[int, any_text.Template] = {}

    def _section(self, text: str) -> str:
        """The evaluation-section rule with drain3's grouping: a line of a training line's cluster."""
        if any_text.EVAL_SECTION.match(text):
            self.in_eval = True
            return ""
        self.in_eval = False
        c = self.miner.match(text)
        t = self.by_cluster.get(c.cluster_id) if c is not None else None
        if t is not None and any(any_text.classify_slot(t, j) == "train" for j in range(len(t.names))):
            self.in_eval = True
            return "eval | " + text
        return text

    def _template_line(self, text: str, zeroed: str) -> None:
        """Every line goes through drain3 (no cache of shapes: drain3's clusters are the grouping)."""
        spans = tuple(m.span() for m in any_text.NUMBER.finditer(text))
        if not spans or len(spans) > 64:
            return
        cluster = self.miner.add_log_message(text)["cluster_id"]
        t = self.by_cluster.get(cluster)
        if t is None:
            names = any_text.slot_names(text, list(spans))
            t = any_text.Template(f"drain3 cluster {cluster}", names, any_text._eval_context(text, list(spans), names))
            t.slash = [
                text[b : spans[j + 1][0]].strip() == "/" if j + 1 < len(spans) else False
                for j, (_, b) in enumerate(spans)
            ]
            self.by_cluster[cluster] = t
            self.templates[("drain3", cluster)] = t
        if len(spans) != len(t.names):
            return  # a line drain3 put with lines of another slot count: its numbers cannot be aligned
        try:
            self._row(t, [float(text[a:b]) for a, b in spans])
        except ValueError:
            return


def losses(variant: str, lines: list[str]) -> list[float]:
    p = Drain3Parser() if variant == "drain3" else any_text.TextParser()
    for line in lines:
        p.feed(line)
    p.finish()
    try:
        run = any_text.build(p, "x")
    except SourceError:
        return []
    if "loss" not in run.cols:
        return []
    return run.cols["loss"][run.logged("loss")].tolist()


def _key(v: float) -> str:
    return "nan" if math.isnan(v) else f"{v:.4g}"


def close(ref: list[float], got: list[float]) -> bool:
    if not ref:
        return False
    a, b = Counter(map(_key, ref)), Counter(map(_key, got))
    hit = sum((a & b).values())
    return hit >= 0.9 * len(ref) and len(got) <= 1.1 * len(ref) + 1


def text_lines(path: Path) -> list[str]:
    with open(path, "rb") as f:
        return list(segments(f))


def dev_logs() -> list[Path]:
    """The dev split's text logs (the manifest says which files are dev; the test split is not opened)."""
    d = ROOT / "benchmarks" / "real_logs"
    dev = [e["file"] for e in json.loads((d / "manifest.json").read_text(encoding="utf-8")) if e.get("split") == "dev"]
    return sorted(d / f for f in dev if Path(f).suffix in (".log", ".txt", ".md"))


def gallery() -> list[tuple[str, str, list[float]]]:
    """The format gallery's text cases (not its CSV/JSONL files) with the truth's training losses in step order."""
    sys.path.insert(0, str(ROOT / "tests"))
    import test_format_gallery as g

    out = []
    for c in g.CASES:
        if c["loss"] is None or c["file"] != "train.log":
            continue
        want = c["loss"][1] if isinstance(c["loss"], tuple) else [c["loss"][k] for k in sorted(c["loss"])]
        out.append((c["name"], c["text"], list(want)))
    return out


def exact(want: list[float], got: list[float]) -> bool:
    return len(got) == len(want) and all(_key(a) == _key(b) for a, b in zip(want, got))


def speed(variant: str, n: int) -> tuple[float, int]:
    with tempfile.TemporaryDirectory() as d:
        path = Path(d) / "meter.log"
        with open(path, "w") as f:
            for i in range(n):
                v = 6.9 - i * 1e-6
                f.write(
                    f"Epoch: [{i // 5005}][{i % 5005:4d}/5005]\tTime  0.257 ( 0.560)\tData  0.001 ( 0.284)\t"
                    f"Loss {v:.4e} ({v:.4e})\tAcc@1   0.00 (  0.14)\tAcc@5   0.78 (  0.62)\n"
                )
        lines = text_lines(path)
        t = time.perf_counter()
        got = losses(variant, lines)
        dt = time.perf_counter() - t
        return n / dt, len(got)


_TIME_READ = (
    "import sys, time; sys.path.insert(0, sys.argv[1]); from lossdoctor.sources import load_path; "
    "t = time.perf_counter(); r = load_path(sys.argv[2]); print(time.perf_counter() - t, len(r[0]))"
)


def console_speed(n: int, baseline: str, repeat: int = 3) -> dict[str, float]:
    """Median seconds to read an n-line nanoGPT console log (load_path in a fresh process), for this
    checkout and for the sources of commit `baseline`, runs alternating."""
    times: dict[str, list[float]] = {"this checkout": [], f"commit {baseline}": []}
    with tempfile.TemporaryDirectory() as d:
        log = Path(d) / "train.log"
        with open(log, "w") as f:
            for s in range(n):
                f.write(f"iter {s}: loss {2.0 + (s % 7) / 100:.4f}, time 120.50ms, mfu 38.12%\n")
        old = Path(d) / "old"
        old.mkdir()
        tar = subprocess.run(["git", "archive", baseline, "src"], cwd=ROOT, capture_output=True, check=True).stdout
        subprocess.run(["tar", "-x", "-C", str(old)], input=tar, check=True)
        srcs = {"this checkout": ROOT / "src", f"commit {baseline}": old / "src"}
        for _ in range(repeat):
            for k, src in srcs.items():
                out = subprocess.run(
                    [sys.executable, "-c", _TIME_READ, str(src), str(log)], capture_output=True, text=True, check=True
                )
                times[k].append(float(out.stdout.split()[0]))
    return {k: statistics.median(v) for k, v in times.items()}


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--lines", type=int, default=200_000)
    ap.add_argument("--console-lines", type=int, default=1_000_000)
    ap.add_argument("--baseline", help="a commit whose console reader is timed against this checkout's")
    ap.add_argument("--docs", action="store_true", help="write the section of docs/benchmarks.md")
    args = ap.parse_args()
    out: list[str] = []
    try:
        import drain3  # noqa: F401

        variants = ["ours", "drain3"]
    except ImportError:
        print("drain3 is not installed: only our own grouping is measured")
        variants = ["ours"]
    logs = dev_logs()
    refs = {}
    for p in logs:
        try:
            run = load_path(p)[0]
        except SourceError:
            continue
        if "loss" in run.cols:
            refs[p] = run.cols["loss"][run.logged("loss")].tolist()
    for v in variants:
        shapes = [
            name
            for name, text, want in SHAPES
            if close(want, losses(v, text.splitlines())) and len(losses(v, text.splitlines())) == len(want)
        ]
        missed = [name for name, _, _ in SHAPES if name not in shapes]
        cases = gallery()
        g_right = [name for name, text, want in cases if exact(want, losses(v, text.splitlines()))]
        dev = [p.name for p in refs if close(refs[p], losses(v, text_lines(p)))]
        rate, read = speed(v, args.lines)
        print(
            f"{v:7s} shapes {len(shapes)}/{len(SHAPES)} (missed: {', '.join(missed) or '-'}); gallery "
            f"{len(g_right)}/{len(cases)}; dev text logs "
            f"{len(dev)}/{len(refs)}; speed {rate:,.0f} lines/s on {args.lines:,} meter lines "
            f"({read:,} training losses read)"
        )
        out.append(
            f"| {v} | {len(shapes)}/{len(SHAPES)} ({', '.join(missed) or 'none missed'}) | "
            f"{len(g_right)}/{len(cases)} | {len(dev)}/{len(refs)} | "
            f"{rate:,.0f} | {read:,} of {args.lines:,} |"
        )
    speeds = console_speed(args.console_lines, args.baseline) if args.baseline else {}
    for k, t in speeds.items():
        print(f"console reader, {args.console_lines:,}-line nanoGPT log, {k}: {t:.2f} s (median of 3)")
    if args.docs:
        _docs(out, speeds, args)
    return 0


def _docs(rows: list[str], speeds: dict[str, float], args: argparse.Namespace) -> None:
    sys.path.insert(0, str(ROOT))
    from benchmarks import docs

    body = [
        "## General text reader",
        "",
        docs.provenance(docs.command_line()),
        "",
        "The general reader groups lines by their text with the numbers cut out (`ours`, a few dozen lines "
        "in `sources/any_text.py`); the alternative puts every line through drain3's `TemplateMiner` "
        "(numbers masked) and takes its clusters as the templates; the rest of the reader is the same. "
        "Shapes: one example per shape the reader is meant to read (the list in `benchmarks/text_templates.py`); "
        "gallery: the text cases of `tests/test_format_gallery.py`, read by the general reader alone (right: the "
        "truth's training losses, in step order); "
        "dev text logs: every dev-split text file of `benchmarks/real_logs/` whose named reader reads a training loss, "
        "read by the general reader alone and compared with the named reader's values (right: 90% of them "
        "read, at most 10% extra). Both sets are **in-sample** (written or looked at while writing the reader). "
        "Speed: the ImageNet example's meter lines, in process.",
        "",
        "| grouping | shapes right | gallery text cases right | dev text logs right | lines/s | training losses read |",
        "|---|---|---|---|---|---|",
        *rows,
        "",
    ]
    if speeds:
        body += [
            f"The named console reader (tried before the general one) on a {args.console_lines:,}-line nanoGPT log, "
            "`load_path` in a fresh process, median of 3 alternating runs:",
            "",
            "| sources | seconds |",
            "|---|---|",
            *[f"| {k} | {t:.2f} |" for k, t in speeds.items()],
            "",
        ]
    body.append(
        "drain3 was not chosen: no more accurate here, several times slower, and it pins old versions "
        "of `cachetools` and `jsonpickle` that conflict with MLflow's."
    )
    docs.write_section("text-reader", "\n".join(body))


if __name__ == "__main__":
    sys.exit(main())
