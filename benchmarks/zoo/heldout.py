"""`python -m benchmarks.zoo --generated --split dev|test`: train the randomised variants of one
split under `watch`, diagnose the run directory and its scalars-only CSV, score, publish.

dev is what the detectors' thresholds are tuned on; test is run to report and never to tune (the
split is a hash of the variant id, see `generated.split_of`).
"""

from __future__ import annotations

import json
import shutil
import sys
import time
from collections import defaultdict
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

from .. import docs
from . import report
from .generated import HEALTHY, PER_FAMILY, SPIKE_VISIBLE, Variant, fault_visible, variants
from .harness import train
from .score import RunScore, read_steps, score_run


def select(split: str, only: str | None = None) -> list[Variant]:
    vs = [v for v in variants().values() if split == "all" or v.split == split]
    if only:
        wanted = [w.strip() for w in only.split(",") if w.strip()]
        vs = [v for v in vs if any(v.id == w or v.id.startswith(w) for w in wanted)]
    return vs


def run_variant(vid: str, out: Path, train_it: bool = True) -> RunScore:
    """Train (unless rescoring) and score one variant. Runs in a worker process."""
    import torch

    torch.set_num_threads(1)
    v = variants()[vid]
    d = out / vid
    if train_it:
        shutil.rmtree(d, ignore_errors=True)
        train(v.scenario, v.seed, d)
    return score_run(d)


def run_split(vs: list[Variant], out: Path, *, jobs: int, rescore: bool = False) -> list[RunScore]:
    ids = [v.id for v in vs if not rescore or (out / v.id / "zoo.json").exists()]
    results: list[RunScore] = []

    def note(rs: RunScore) -> None:
        verdict = (
            ("alarm!" if rs.scalars.false_alarm else "quiet")
            if rs.healthy
            else ("top-1" if rs.scalars.top1 else "miss")
        )
        print(
            f"  {rs.scenario}: scalars {rs.scalars.got} [{verdict}], full {rs.full.got} {rs.wall_s:.1f}s",
            file=sys.stderr,
            flush=True,
        )

    if jobs <= 1:
        for vid in ids:
            results.append(run_variant(vid, out, not rescore))
            note(results[-1])
        return results
    import multiprocessing as mp

    with ProcessPoolExecutor(max_workers=jobs, mp_context=mp.get_context("fork")) as ex:
        for f in [ex.submit(run_variant, vid, out, not rescore) for vid in ids]:
            results.append(f.result())
            note(results[-1])
    return results


def per_family(scores: list[RunScore], fam: dict[str, str]) -> str:
    by: dict[str, list[RunScore]] = defaultdict(list)
    for s in scores:
        by[fam[s.scenario]].append(s)
    rows = []
    for name, ss in by.items():
        if name == "healthy":
            rows.append(
                [
                    name,
                    str(len(ss)),
                    f"alarms {report.fmt_frac(s.scalars.false_alarm for s in ss)}",
                    f"alarms {report.fmt_frac(s.full.false_alarm for s in ss)}",
                ]
            )
        else:
            rows.append(
                [
                    name,
                    str(len(ss)),
                    report.fmt_frac(s.scalars.top1 for s in ss),
                    report.fmt_frac(s.full.top1 for s in ss),
                ]
            )
    return report.table(["fault family", "variants", "scalars-only top-1", "full log top-1"], rows)


def misses(scores: list[RunScore], vs: dict[str, Variant]) -> str:
    rows = []
    for s in scores:
        wrong = s.scalars.false_alarm if s.healthy else not s.scalars.top1
        if not wrong and not s.scalars.error:
            continue
        got = "; ".join(f"{f['cause']} ({f['severity']})" for f in s.scalars.findings[:2]) or "no alarm"
        got += f" [{s.scalars.status}]" if s.scalars.status == "inconclusive" else ""
        rows.append(
            [
                s.scenario,
                "healthy" if s.healthy else ", ".join(s.causes),
                got + (s.scalars.error or ""),
                vs[s.scenario].scenario.fault,
            ]
        )
    return report.table(["variant", "acceptable", "got (scalars only)", "variant as drawn"], rows) if rows else "(none)"


def void(scores: list[RunScore], vs: dict[str, Variant]) -> list[str]:
    """Variants whose fault did not show in the loop's own losses (see `generated.fault_visible`)."""
    return [s.scenario for s in scores if not fault_visible(vs[s.scenario], read_steps(Path(s.run_dir)))]


def render(split: str, scores: list[RunScore], vs: dict[str, Variant], *, wall: float, command: str) -> str:
    fam = {v.id: v.fault_family for v in vs.values()}
    gone = void(scores, vs)
    scores = [s for s in scores if s.scenario not in gone]
    n_faulty = sum(1 for s in scores if not s.healthy)
    role = (
        "**dev**: the split the detectors' thresholds were tuned on, so in-sample for the tuning (the rules "
        "added while looking at it are tested in `tests/test_scalar_variants.py`; one generator recipe was "
        "corrected on it too: corrupted rows scaled x20-60 kept their class direction and often did not move "
        "the loss, so they became rows of garbage, and a corrupted batch the loop's own loss did not show is "
        "not scored)"
        if split == "dev"
        else "**test**: run to report, never to tune: no threshold or recipe was changed after looking at it"
        if split == "test"
        else "both splits together (dev was tuned on, test was not)"
    )
    parts = [
        f"## Generated variants: {split}",
        docs.provenance(command)
        + (
            f" Diagnosis and scoring of the run directories a training run wrote before took {wall:.0f} s in all."
            if "--rescore" in command
            else f" Training, diagnosis and scoring took {wall:.0f} s in all."
        ),
        f"Split: {role}. The variants (`benchmarks/zoo/generated.py`) are drawn at random per fault "
        f"family ({PER_FAMILY} per family, {HEALTHY} healthy controls) over model size, optimizer, "
        "learning rate, batch size, data task, schedule, where and how hard the fault hits, and seed; a "
        "variant is in test when the first byte of sha256(its id) is odd, in dev when even (a rule fixed "
        "before any result was seen). Only faults whose signature is in the logged scalars are drawn "
        "(LR, schedule, non-finite data, spikes, explosions, empty label masks, loss-scale collapse, a "
        "frozen model, noisy labels); the in-activation faults are measured by the hand-written zoo. "
        "Scoring as in the zoo: top-1 = the first alarm's cause is in the variant's acceptable set.",
        f"{n_faulty} faulty variants and {len(scores) - n_faulty} healthy controls scored in this split"
        + (
            f"; {len(gone)} spike variant(s) not scored because the corrupted batch did not move the loop's "
            f"own loss (< {SPIKE_VISIBLE}x the median of the 10 losses before it: the model absorbed it, "
            f"there was no spike to see): {', '.join(gone)}"
            if gone
            else ""
        )
        + ".",
        "### Summary",
        report.summary(scores),
        "### Live alerts withdrawn",
        report.withdrawn(scores),
        "### Per fault family",
        per_family(scores, fam),
        "### Scalars-only misses and false alarms",
        misses(scores, vs),
    ]
    return "\n\n".join(parts)


def main(
    split: str, *, jobs: int, out: Path, only: str | None, rescore: bool, docs_path: Path | None, write_docs: bool
) -> int:
    vs = select(split, only)
    if not vs:
        print("no variant matches", file=sys.stderr)
        return 2
    t0 = time.perf_counter()
    scores = run_split(vs, out, jobs=jobs, rescore=rescore)
    wall = time.perf_counter() - t0
    text = render(split, scores, variants(), wall=wall, command=docs.command_line())
    print(text)
    out.mkdir(parents=True, exist_ok=True)
    (out / f"results-{split}.json").write_text(json.dumps([s.to_dict() for s in scores], indent=1, default=str))
    target = docs_path if docs_path is not None else (docs.DOC if not only and split in ("dev", "test") else None)
    if target is not None and write_docs:
        docs.write_section(f"generated-{split}", text, Path(target))
        print(f"wrote {target}", file=sys.stderr)
    return 0
