#!/usr/bin/env python3
"""The format gallery's figure: how many of the tool print shapes in `tests/test_format_gallery.py`
`lossdoctor diagnose` reads exactly (the truth's values at the truth's steps), for this checkout and,
with `--baseline COMMIT`, for the sources of that commit (the same gallery, the older reader).

    python benchmarks/format_gallery.py [--baseline COMMIT] [--docs]

The gallery is in-sample: its shapes were written while the reader was changed to read them.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tarfile
import tempfile
from io import BytesIO
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from benchmarks.docs import command_line, provenance, write_section  # noqa: E402

CHILD = r"""
import json, sys, tempfile
from pathlib import Path
sys.path.insert(0, sys.argv[1])
import test_format_gallery as g
from lossdoctor.sources import load_path
out = {}
d = Path(tempfile.mkdtemp())
for c in g.CASES:
    p = d / (c["name"] + "-" + c["file"])
    p.write_text(c["text"])
    try:
        run = load_path(p)[0]
        if c["loss"] is None:
            ok = not (run.has("loss") and run.logged("loss").any())
        else:
            g._check(g._at(run, "loss"), c["loss"], "loss")
            for col in ("eval_loss", "grad_norm", "lr", "scale"):
                if col in c:
                    g._check(g._at(run, col), c[col], col)
            ok = True
        out[c["name"]] = "read" if ok else "misread"
    except AssertionError:
        out[c["name"]] = "misread"
    except Exception as e:
        out[c["name"]] = "refused" if type(e).__name__ in ("SourceError", "NoReader") else "raised " + type(e).__name__
print(json.dumps(out))
"""


def gallery(src: Path) -> dict[str, str]:
    p = subprocess.run(
        [sys.executable, "-c", CHILD, str(ROOT / "tests")],
        capture_output=True,
        text=True,
        env={"PYTHONPATH": str(src), "PATH": "/usr/bin:/bin"},
        timeout=600,
    )
    if p.returncode != 0:
        raise SystemExit(f"gallery run failed: {p.stderr[-2000:]}")
    return json.loads(p.stdout.strip().splitlines()[-1])


def baseline_src(commit: str, into: Path) -> Path:
    blob = subprocess.run(["git", "archive", commit, "src"], cwd=ROOT, capture_output=True, check=True).stdout
    with tarfile.open(fileobj=BytesIO(blob)) as t:
        t.extractall(into, filter="data")
    return into / "src"


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--baseline", help="a commit whose reader reads the same gallery")
    ap.add_argument("--docs", action="store_true", help="write the section of docs/benchmarks.md")
    args = ap.parse_args()
    results = {"this checkout": gallery(ROOT / "src")}
    if args.baseline:
        with tempfile.TemporaryDirectory() as d:
            results[f"commit {args.baseline}"] = gallery(baseline_src(args.baseline, Path(d)))
    n = len(next(iter(results.values())))
    rows = ["| sources | shapes read exactly | refused | misread |", "|---|---|---|---|"]
    for label, r in results.items():
        bad = {k: v for k, v in r.items() if v != "read"}
        refused = sorted(k for k, v in bad.items() if v != "misread")
        misread = sorted(k for k, v in bad.items() if v == "misread")
        rows.append(f"| {label} | {n - len(bad)}/{n} | {', '.join(refused) or '-'} | {', '.join(misread) or '-'} |")
    table = "\n".join(rows)
    print(table)
    if args.docs:
        read = {label: sum(v == "read" for v in r.values()) for label, r in results.items()}
        before = "".join(f" ({label}: {k}/{n})" for label, k in read.items() if label != "this checkout")
        body = (
            "## Format gallery\n\n" + provenance(command_line()) + "\n\n"
            f"format gallery: {read['this checkout']}/{n} shapes read{before}. "
            "Each shape is a short log written the way one tool prints it (HF Trainer dicts and notebook tables, "
            "Lightning and NeMo bars, Keras, fairseq, mmcv/mmengine, detectron2, YOLO, timm, the ImageNet "
            "example's meters, DETR's MetricLogger, SB3 and guided-diffusion logger blocks, nanoGPT, llm.c, "
            "Megatron, torchtitan, nanotron, MaxText, CLU, OpenNMT, icefall, Flair, SpeechBrain, PaddleOCR/"
            "PaddleSeg, PaddlePaddle's Model.fit and fluid prints, MXNet, Caffe, Darknet, the TF Estimator and TF-slim, "
            "ESPnet2, RLlib, BigDL, T5X, MindSpore, LiBai, MegEngine, Chainer, CNTK, Lasagne, Torch7, CatBoost, LightGBM, "
            "fastai v1, Catalyst, Poutyne, skorch, Marian, PaddleNLP, LLaMA-Factory, ms-swift, OpenRLHF, verl, diffusers, "
            "OneTrainer, fastText, AllenNLP, spaCy, Flux.jl, luz, GPT-NeoX, PyG, DGL, plain prints in many phrasings (Chinese ones too), tensor and numpy reprs, "
            "Markdown/ASCII/aligned tables, evaluation sections, JSON lines, CSV, non-finite values as each tool spells them; "
            "the list and each tool's source file are in `tests/test_format_gallery.py`), read by `load_path` "
            "(what `lossdoctor diagnose FILE` does) and compared with its truth: the training loss, and the "
            "evaluation loss, gradient norm, LR and loss scale where the tool prints them, at their steps. "
            "**In-sample**: the shapes were written while the reader was changed to read them.\n\n" + table
        )
        write_section("format-gallery", body)
    return 0


if __name__ == "__main__":
    sys.exit(main())
