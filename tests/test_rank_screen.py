"""Run directories of many ranks: screened, the ranks that tell the story read in full, the answer the
same as a full read, the other ranks named once in ranges. The files are written by the monitor's
own run-log writer (`RunLogWriter`), as data-parallel ranks write them."""

from __future__ import annotations

import math

import numpy as np
import pytest

from conftest import run_cli
from lossdoctor import diagnose
from lossdoctor.detectors.ranks import local_onset, ranges
from lossdoctor.live.runlog import RunLogWriter
from lossdoctor.sources import rank_screen
from lossdoctor.sources.rundir import read_run_dir
from msgs import has

RANKS, STEPS, NAN_RANK, NAN_STEP = 40, 300, 23, 220


def write_dp_run(root, ranks=RANKS, steps=STEPS, nan_rank=NAN_RANK, nan_step=NAN_STEP, kind="ddp"):
    """Data-parallel ranks: the same weights, each rank's own batches; rank `nan_rank` (None: no
    rank) gets a NaN sample at `nan_step`, and the reduction carries it to every rank."""
    reduced = 0.9 + 0.1 * np.abs(np.random.default_rng(0).standard_normal(steps))
    for r in range(ranks):
        rng = np.random.default_rng(r + 1)
        w = RunLogWriter(root / f"rank-{r}")
        dist = {"kind": kind} if kind == "ddp" else {"kind": kind, "local_grads": True}
        w.write_meta({"format": "lossdoctor.run/1", "rank": r, "world_size": ranks, "distributed": dist})
        for s in range(steps):
            broken = nan_rank is not None and s > nan_step  # NaN weights on every rank
            mine = nan_rank == r and s == nan_step
            rec = {
                "step": s,
                "loss": 2.0 * math.exp(-s / 80) + 0.3 + 0.02 * rng.standard_normal(),
                "lr": 1e-3,
                "grad_norm": float(reduced[s]),
                "skipped": 0,
                "batch_size": 8,
                "grad_norm_local": float(reduced[s] * (1 + 0.2 * rng.random())),
                "grad_nonfinite": 0,
                "batch_nonfinite": 0,
            }
            if nan_rank is not None and s >= nan_step:
                rec["grad_norm"] = math.nan
            if broken or mine:
                rec.update(loss=math.nan, grad_norm_local=math.nan, grad_nonfinite=6)
            if mine:
                rec.update(batch_nonfinite=1, batch_nonfinite_detail={"x": [3]})
            w.append_step(rec)
        w.close()
    return root


@pytest.fixture(scope="module")
def many(tmp_path_factory):
    return write_dp_run(tmp_path_factory.mktemp("many"))


def test_screen_onset_is_the_full_reads_local_onset(many, monkeypatch):
    monkeypatch.setattr(rank_screen, "FULL_READ", 10**6)
    full = read_run_dir(many)
    assert len(full) == RANKS
    for run in full:
        data = (many / f"rank-{run.rank}" / "steps.jsonl").read_bytes()
        assert rank_screen.screen_onset(data, True) == local_onset(run)
    assert [local_onset(r) for r in full].count(NAN_STEP) == 1


def test_many_ranks_read_only_the_story_and_answer_as_a_full_read(many, monkeypatch):
    runs = read_run_dir(many)
    assert [r.rank for r in runs] == [0, NAN_RANK, RANKS - 1]
    report = diagnose(str(many))
    f = report.primary
    assert (f.cause, f.rank, f.step, f.samples) == ("nonfinite_data", NAN_RANK, NAN_STEP, [3])
    # every other rank named once, in ranges, in the origin's finding
    text = " ".join(f.evidence)
    assert "[1-22, 24-38]" in text and "[0, 39]" in text
    assert len([g for g in report.findings if g.symptom == "nonfinite"]) == 1
    assert any(f"{RANKS} ranks: every rank's log was screened" in n for n in report.notes)
    # the same answer as reading every rank
    monkeypatch.setattr(rank_screen, "FULL_READ", 10**6)
    full = diagnose(str(many)).primary
    assert (full.cause, full.rank, full.step, full.samples) == (f.cause, f.rank, f.step, f.samples)
    cli = run_cli("diagnose", many, "--format", "json")
    assert cli.returncode == 0, cli.stderr
    assert '"rank": 23' in cli.stdout


def test_many_healthy_ranks_read_the_first_and_last(tmp_path):
    root = write_dp_run(tmp_path, ranks=20, nan_rank=None)
    assert [r.rank for r in read_run_dir(root)] == [0, 19]
    report = diagnose(str(root))
    assert [g.cause for g in report.findings if g.severity != "info"] == []
    assert has(report.notes, "distributed.screened_note", n=20), [getattr(m, "key", m) for m in report.notes]


def test_two_ranks_with_nan_at_the_same_step_are_both_read(tmp_path):
    root = write_dp_run(tmp_path, ranks=20, nan_rank=7)
    # a second rank's own batch breaks at the same step
    p = root / "rank-12" / "steps.jsonl"
    lines = p.read_text().splitlines()
    lines[NAN_STEP] = lines[NAN_STEP].replace('"batch_nonfinite":0', '"batch_nonfinite":1')
    p.write_text("\n".join(lines) + "\n")
    assert [r.rank for r in read_run_dir(root)] == [0, 7, 12, 19]
    assert diagnose(str(root)).primary.rank in (7, 12)


def test_ranges():
    assert ranges([5, 0, 1, 2, 7, 8, 2]) == "0-2, 5, 7-8"
    assert ranges([3]) == "3" and ranges([]) == ""
    assert ranges(list(range(512))) == "0-511"


def test_screen_reads_the_writers_strings_and_spaced_counts():
    from lossdoctor.live.runlog import _dumps

    lines = [_dumps({"step": s, "loss": 1.0, "grad_norm": math.nan if s >= 3 else 1.0}) for s in range(5)]
    lines += [b'{"step": 5, "loss": 1.0, "batch_nonfinite": 2}', _dumps({"step": 6, "loss": -math.inf})]
    data = b"\n".join(lines) + b"\n"
    assert rank_screen.screen_onset(data, False) == 5  # grad_norm alone is not local
    assert rank_screen.screen_onset(data.replace(b'"batch_nonfinite": 2', b'"batch_nonfinite": 0'), False) == 6
