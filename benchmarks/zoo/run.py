"""`python -m benchmarks.zoo`: train every scenario under `watch`, diagnose, score, print, publish.

python -m benchmarks.zoo                      # the whole zoo, 3 seeds, writes docs/benchmarks.md
python -m benchmarks.zoo --seeds 1            # one seed (what the test suite runs)
python -m benchmarks.zoo --only attn_,mlp_nan # scenarios whose name starts with these
python -m benchmarks.zoo --rescore            # re-diagnose the existing run dirs (after a detector change)
python -m benchmarks.zoo --misses             # also print the step-record evidence of every miss
python -m benchmarks.zoo --seeds 1 --replay-all  # verified fixes: every scenario replays, per family
python -m benchmarks.zoo --generated --split dev --jobs 2   # randomised variants, the split tuned on
python -m benchmarks.zoo --generated --split test --jobs 2  # the held-out split (report, never tune)
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

from .. import docs
from . import report
from .harness import SCENARIOS, Scenario, train
from .score import RunScore, evidence, score_run

DEFAULT_OUT = docs.ROOT / "out" / "zoo"


def load_scenarios() -> dict[str, Scenario]:
    from . import scenarios, wiring  # noqa: F401  (registers them)

    return SCENARIOS


def select(names: str | None, ci: bool) -> list[Scenario]:
    scns = list(load_scenarios().values())
    if ci:
        scns = [s for s in scns if s.ci]
    if names:
        wanted = [n.strip() for n in names.split(",") if n.strip()]
        scns = [s for s in scns if any(s.name == w or s.name.startswith(w) for w in wanted)]
    return scns


def run_dir(out: Path, name: str, seed: int) -> Path:
    return out / name / f"seed-{seed}"


def run_one(name: str, seed: int, out: Path, train_it: bool = True, replay_all: bool = False) -> RunScore:
    """Train (unless rescoring) and score one (scenario, seed). Runs in a worker process."""
    import torch

    torch.set_num_threads(1)
    d = run_dir(out, name, seed)
    if train_it:
        shutil.rmtree(d, ignore_errors=True)
        train(load_scenarios()[name], seed, d, replay=replay_all)
    return score_run(d)


def run_all(
    scns: list[Scenario],
    seeds: int,
    out: Path,
    *,
    jobs: int = 1,
    rescore: bool = False,
    progress: bool = True,
    replay_all: bool = False,
) -> list[RunScore]:
    work = [(s.name, k) for s in scns for k in range(seeds)]
    if rescore:
        work = [(n, k) for n, k in work if (run_dir(out, n, k) / "zoo.json").exists()]
    results: list[RunScore] = []

    def note(rs: RunScore) -> None:
        if progress:
            verdict = (
                ("alarm!" if rs.full.false_alarm else "quiet")
                if rs.healthy
                else ("top-1" if rs.full.top1 else "top-3" if rs.full.top3 else "miss")
            )
            print(
                f"  {rs.scenario} seed {rs.seed}: {rs.full.got} [{verdict}] {rs.wall_s:.1f}s",
                file=sys.stderr,
                flush=True,
            )

    if jobs <= 1:
        for n, k in work:
            rs = run_one(n, k, out, not rescore, replay_all)
            note(rs)
            results.append(rs)
    else:
        import multiprocessing as mp

        with ProcessPoolExecutor(max_workers=jobs, mp_context=mp.get_context("fork")) as ex:
            futs = [ex.submit(run_one, n, k, out, not rescore, replay_all) for n, k in work]
            for f in futs:
                rs = f.result()
                note(rs)
                results.append(rs)
    return results


def render(
    scores: list[RunScore],
    scns: dict[str, Scenario],
    *,
    seeds: int,
    wall: float,
    command: str,
    include_catalogue: bool = True,
) -> str:
    from lossdoctor.vocabulary import CAUSES

    faulty = sorted({s.scenario for s in scores if not s.healthy})
    healthy = sorted({s.scenario for s in scores if s.healthy})
    parts = [
        "## Fault zoo",
        docs.provenance(command)
        + (
            f" Diagnosis and scoring of the run directories a training run wrote before took {wall:.0f} s in all."
            if "--rescore" in command
            else f" Training, diagnosis and scoring took {wall:.0f} s in all."
        ),
        f"{len(faulty)} faulty scenarios and {len(healthy)} healthy controls, {seeds} seed(s) each "
        f"({len(scores)} runs). Each run is a real training loop watched by `lossdoctor.watch`; the "
        "*full log* column is `lossdoctor diagnose RUN_DIR` on the run directory it wrote, the "
        "*scalars only* column is `lossdoctor diagnose` on a CSV of the same run's step, loss, "
        "grad_norm, lr (and loss scale under fp16) — what a user's own logger keeps.",
        "Scoring (see `benchmarks/zoo/score.py`): a scenario accepts a *set* of causes; an alarm is a "
        "warning or critical finding; top-1 = the first alarm's cause is acceptable, top-3 = one of the "
        "first three is; onset, layer, op and samples are read from the highest-ranked acceptable alarm "
        "(onset within ±2 steps; a layer inside the faulty module counts; samples: every faulty sample "
        "named and at least half of those named faulty); a false alarm is any alarm on a healthy control; live delay = the step at which `watch` raised the first acceptable "
        "alarm minus the onset.",
        "Read these numbers as in-sample: the detectors' thresholds were tuned while looking at this "
        "zoo's misses (each rule's docstring says what it keys on), so the zoo shows that the rules do "
        "what they claim on real training runs and that the healthy controls stay quiet; it is not a "
        "held-out estimate of accuracy on the faults of the world. The held-out figure is the generated "
        "variants' test split (its own section below: `python -m benchmarks.zoo --generated --split test`).",
        "### Summary",
        report.summary(scores),
        "### Live alerts withdrawn",
        "An alarm `watch` announced while the run trained that the final report does not hold: on a "
        "healthy control every live alarm (to the user watching it was a false alarm), on a faulty run "
        "a cause other than the final top-1 that the end dropped.",
        report.withdrawn(scores),
        "### Per cause",
        report.per_cause(scores, CAUSES),
        "### Per scenario",
        report.per_scenario(scores, scns),
    ]
    vias = {s.scalars.via.split(" (")[0] for s in scores if s.scalars.via}
    if "make_run" in vias:
        parts.append(
            "Note: this checkout has no reader for a generic CSV log yet, so the scalars-only "
            "column was diagnosed by building the same step records from the CSV with "
            "`lossdoctor.records.make_run` (the engine and detectors are the real ones)."
        )
    if include_catalogue:
        rows = [
            [
                s.name,
                "healthy" if s.healthy else ", ".join(sorted(s.causes)),
                str(s.onset if s.onset is not None else "–"),
                ", ".join(
                    filter(
                        None,
                        [
                            " ".join(s.layers),
                            " ".join(s.ops),
                            ("samples " + " ".join(map(str, s.samples))) if s.samples else "",
                        ],
                    )
                )
                or "–",
                s.fault,
            ]
            for s in scns.values()
            if s.name in set(faulty) | set(healthy)
        ]
        parts += [
            "### Scenarios",
            report.table(["scenario", "acceptable causes", "onset", "where", "fault as injected"], rows),
        ]
    return "\n\n".join(parts)


def render_verified(scores: list[RunScore], *, seeds: int, command: str, replay_all: bool = False) -> str:
    """The verified-fixes section: per fault family, how often the top fix was verified, and the cost."""
    from .fixcheck import per_family

    return "\n\n".join(
        [
            "## Verified fixes in the zoo",
            docs.provenance(command),
            f"{len({s.scenario for s in scores if not s.healthy})} faulty scenarios, {seeds} seed(s) each. "
            "`watch` replays each fix of a replayed incident from the last good snapshot through the "
            "incident step and 20 steps after it, and compares with the unfixed replay (verification is "
            "on by default). "
            + (
                "With `--replay-all` every scenario passes a `replay_fn` (the loss of "
                "its own loop), so every incident `watch` replays gets its fixes checked; "
                "a family with no verification had no replayed incident (–). "
                if replay_all
                else "Only the scenarios that pass a `replay_fn` replay incidents, so the "
                "other families have no verification (–). "
            )
            + "*Top fix* = the first fix of the first alarm of "
            "`lossdoctor diagnose RUN_DIR`; cost = wall seconds, replayed steps and growth of the "
            "process's peak resident memory, summed over a run's incidents (definitions: "
            "`benchmarks/zoo/fixcheck.py`). A top fix that is a change of code (normalise an input, mask "
            "with `finfo.min`, change the init) is *not verifiable* by replay; *no verdict* is an incident "
            "whose unfixed replay did not fail again (what a transient fault does) or left the log, so "
            "no fix can be judged on it.",
            "Read these numbers as in-sample: the zoo is the set of runs the detectors and the candidate "
            "fixes were developed on.",
            per_family(scores),
        ]
    )


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(
        prog="python -m benchmarks.zoo", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--seeds", type=int, default=3, help="seeds per scenario (default 3)")
    ap.add_argument("--only", metavar="NAMES", help="comma-separated scenario names or name prefixes")
    ap.add_argument("--ci", action="store_true", help="only the scenarios marked for the test suite")
    ap.add_argument("--out", type=Path, default=DEFAULT_OUT, help=f"run directories (default {DEFAULT_OUT})")
    ap.add_argument("--jobs", type=int, default=1, help="training processes in parallel (default 1)")
    ap.add_argument("--rescore", action="store_true", help="diagnose existing run dirs again, no training")
    ap.add_argument(
        "--docs",
        type=Path,
        default=None,
        help="write the zoo section of this markdown file (default: docs/benchmarks.md "
        "when the whole zoo ran with 3 seeds)",
    )
    ap.add_argument("--no-docs", action="store_true", help="never write the docs")
    ap.add_argument("--misses", action="store_true", help="print the step-record evidence of each miss")
    ap.add_argument("--list", action="store_true", help="list the scenarios and exit")
    ap.add_argument(
        "--replay-all",
        action="store_true",
        help="the verified-fixes pass: pass a replay_fn to every scenario (verification replays "
        "from the snapshot, so it needs one); writes only the verified-fixes section of the docs",
    )
    ap.add_argument(
        "--generated",
        action="store_true",
        help="the randomised variants of each fault family (benchmarks/zoo/generated.py)",
    )
    ap.add_argument(
        "--split",
        choices=("dev", "test", "all"),
        default="dev",
        help="with --generated: dev (tuned on), test (held out) or all (default dev)",
    )
    args = ap.parse_args(argv)

    if args.generated:
        from . import heldout

        out = args.out if args.out != DEFAULT_OUT else DEFAULT_OUT.parent / "generated"
        if args.list:
            for v in heldout.select(args.split, args.only):
                print(
                    f"{v.id:28s} {v.split:5s} {', '.join(sorted(v.scenario.causes)) or 'healthy':40s} "
                    f"{v.scenario.fault}"
                )
            return 0
        return heldout.main(
            args.split,
            jobs=args.jobs,
            out=out,
            only=args.only,
            rescore=args.rescore,
            docs_path=args.docs,
            write_docs=not args.no_docs,
        )

    scns = select(args.only, args.ci)
    if args.list:
        for s in scns:
            print(f"{s.name:40s} {'healthy' if s.healthy else ', '.join(sorted(s.causes))}")
        return 0
    if not scns:
        print("no scenario matches", file=sys.stderr)
        return 2
    t0 = time.perf_counter()
    scores = run_all(scns, args.seeds, args.out, jobs=args.jobs, rescore=args.rescore, replay_all=args.replay_all)
    wall = time.perf_counter() - t0
    all_scns = load_scenarios()
    command = docs.command_line()
    text = render(scores, all_scns, seeds=args.seeds, wall=wall, command=command)
    verified = render_verified(scores, seeds=args.seeds, command=command, replay_all=args.replay_all)
    print(text + "\n\n" + verified)
    miss = report.misses(scores, lambda s: evidence(Path(s.run_dir)))
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "results.json").write_text(json.dumps([s.to_dict() for s in scores], indent=1, default=str))
    (args.out / "misses.md").write_text(miss + "\n")
    if args.misses:
        print("\n## Misses and false alarms\n\n" + miss)
    else:
        print(f"\n(evidence of misses: {args.out / 'misses.md'})")
    whole = not args.only and not args.ci and args.seeds >= 3 and not args.rescore
    target = args.docs if args.docs is not None else (docs.DOC if whole else None)
    if target is not None and not args.no_docs and not args.replay_all:  # the zoo's tables are of its own set-up
        docs.write_section("zoo", text, Path(target))
        print(f"wrote {target}", file=sys.stderr)
    # its own section, written by the verified-fixes pass of the whole zoo (one seed is enough)
    if args.replay_all and not args.only and not args.ci and not args.no_docs:
        path = docs.write_section("zoo-verify", verified, Path(args.docs or docs.DOC))
        print(f"wrote {path} (verified fixes)", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
