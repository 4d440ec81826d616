"""Benchmark of the LR probe (triage/lr_probe.py): what it costs and what it measured.

The nanoGPT-style loop of tests/lr_kit.py (3-layer GPT, AdamW, no warm-up, 300 steps) at 10x the
LR that trains it best, under `watch(replay_fn=...)`: the probe record's cost (seconds, replayed
steps, peak resident memory it added, the scratch copy's size) and the losses of each LR tried;
and the wall time of the same run watched without replay_fn (no ring, no probe) for comparison.

    python -m benchmarks.lr_probe [--lr 0.1] [--steps 300] [--docs]
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--lr", type=float, default=0.1)
    ap.add_argument("--steps", type=int, default=300)
    ap.add_argument("--docs", action="store_true", help="write the section of docs/benchmarks.md")
    a = ap.parse_args()
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))
    import torch

    from lr_kit import final_loss, train

    torch.set_num_threads(1)
    with tempfile.TemporaryDirectory() as tmp:
        t = time.perf_counter()
        losses, _ = train(a.lr, steps=a.steps, log_dir=Path(tmp) / "plain", replay=False)
        plain = time.perf_counter() - t
        t = time.perf_counter()
        train(a.lr, steps=a.steps, log_dir=Path(tmp) / "probe", replay=True)
        probed = time.perf_counter() - t
        rec = json.loads((Path(tmp) / "probe" / "probes" / "probe-lr_too_high.json").read_text())
    p = rec["probe"]
    c = p["cost"]
    lines = [
        f"run at LR {a.lr}, {a.steps} steps, final loss {final_loss(losses):.3f}",
        f"watch without replay_fn: {plain:.1f} s; with replay_fn (ring + probe): {probed:.1f} s",
        "probe cost: " + json.dumps(c),
        f"window: steps {p['from_step']}-{p['to_step']}; control LR {p['control']['lr']:.3g} -> "
        f"{p['control']['loss']:.3f}; "
        + "; ".join(f"{t['lr']:.3g} -> {t['loss']:.3f} ({t['verdict']})" for t in p["trials"]),
    ]
    print("\n".join(lines))
    if a.docs:
        from . import docs

        rows = [f"| LR {p['control']['lr']:.3g} (now) | {p['control']['loss']:.3f} | control |"]
        rows += [f"| LR {t['lr']:.3g} | {t['loss']:.3f} | {t['verdict']} |" for t in p["trials"]]
        body = "\n".join(
            [
                "## The LR probe",
                "",
                docs.provenance(docs.command_line()),
                "",
                f"The nanoGPT-style loop of `tests/lr_kit.py` (3-layer GPT, AdamW, no warm-up) at LR {a.lr}, "
                f"10x the LR a sweep finds best there, {a.steps} steps under `watch(replay_fn=...)`. When "
                "`lr_too_high` is announced, the probe replays the recorded batches from the snapshot at "
                f"step {p['from_step']} through step {p['to_step']} on a scratch copy, at the current LR and "
                "at x1/3 and x1/10; the mean loss over the window's second half decides (in-sample: the "
                "probe's settings were chosen on this loop).",
                "",
                "| cost | value |",
                "|---|---|",
                f"| wall time of the probe | {c['seconds']:.2f} s |",
                f"| replayed steps (3 replays) | {c['steps_replayed']} |",
                f"| growth of the process's peak resident memory | {c['peak_rss_growth_mib']:.1f} MiB |",
                f"| scratch copy (model + optimizer state) | {c['workspace_mib']:.3f} MiB |",
                "",
                "| LR tried | mean loss, second half of the window | verdict |",
                "|---|---|---|",
                *rows,
                "",
                f"The run's own final loss: {final_loss(losses):.3f}. (Whole-run wall times on shared cores are "
                "too noisy to separate the probe's seconds from the rest: the probe's own time is above.)",
            ]
        )
        docs.write_section("lr-probe", body)


if __name__ == "__main__":
    main()
