"""The format x fault x interleaving matrix (tests/log_matrix.py) holds its rates, and the bugs it found
stay fixed (issue 25, "logs from anywhere").

Each case is a log written the way one tool prints (HF Trainer dicts, Megatron, fairseq, mmengine, YOLO,
a Markdown table, JSON lines, Chinese-labelled prints...), with a fault laid on the run (NaN, a divergence
to 1e6+, a spike, a plateau at ln 10, a zero loss, an fp16 scale collapse, a gradient explosion) or none,
and what a console adds around the rows (DeepSpeed OVERFLOW lines, warnings, evaluation prints, tqdm
redraws, checkpoint lines, a traceback, rank prefixes, timestamps, a Markdown quote or fence, Windows
line endings, a cut). Each is read from a file by `load_path` and diagnosed by the engine, as `lossdoctor
diagnose FILE` does: the reading must hold the printed values at their steps, and the verdict must name
the fault's symptom among its first two alarms within one logged row of the fault (a healthy log: no
warning or critical finding). `python benchmarks/log_matrix.py` prints the whole sample and its failures.
"""

from __future__ import annotations

from collections import Counter

import pytest

import log_matrix as lm

#: the fixed subset: one interleaving per format x fault, a third of them stacked with a second
SUBSET = dict(seed=0, per_pair=1)
#: what the subset read and judged right when this test was written (cases, read, verdict), per
#: format, fault and interleaving: a change of the readers or detectors may not lower any of them
FLOORS: dict[str, dict[str, tuple[int, int, int]]] = {
    "format": {
        name: (11, 11, 11)
        for name in (
            "chinese_epoch",
            "chinese_iter",
            "csv",
            "deepspeed",
            "deepspeed_chat",
            "detectron2",
            "fairseq",
            "hf_dicts",
            "hf_tqdm",
            "imagenet",
            "jsonl_console",
            "jsonl_file",
            "keras2_bar",
            "keras_verbose2",
            "kv",
            "lightning_bar",
            "litgpt",
            "llmc",
            "logging",
            "md_table",
            "megatron",
            "mmengine_epoch",
            "mmengine_iter",
            "nanogpt",
            "paddleocr",
            "plain_epoch",
            "tab_table",
            "timm",
            "tutorial",
            "yolo",
        )
    },
    "fault": {
        name: (30, 30, 30)
        for name in (
            "divergence",
            "fp16_overflow",
            "grad_explosion",
            "healthy",
            "healthy_late",
            "inf_nan",
            "nan",
            "plateau_ln10",
            "spike_recovers",
            "spike_stays",
            "zero",
        )
    },
    "interleaving": {
        "checkpoint": (24, 24, 24),
        "crlf": (40, 40, 40),
        "cut_head": (24, 24, 24),
        "cut_tail": (42, 42, 42),
        "epoch_restart": (6, 6, 6),
        "eval": (18, 18, 18),
        "fence": (31, 31, 31),
        "md_quote": (32, 32, 32),
        "none": (21, 21, 21),
        "overflow": (24, 24, 24),
        "rank_prefix": (27, 27, 27),
        "srun_prefix": (25, 25, 25),
        "timestamps": (29, 29, 29),
        "tqdm": (26, 26, 26),
        "traceback": (29, 29, 29),
        "warnings": (26, 26, 26),
    },
}

#: combinations that were read or judged wrong before the change named beside each (format/fault/
#: interleavings/seed): each must be read right and judged right
FIXED = {
    "megatron/healthy/cut_tail/0": "a last line cut mid-print is not read (it was a NaN loss: critical)",
    "megatron/healthy_late/cut_head/0": "a cut first line is placed an interval before the first counted one",
    "megatron/spike_recovers/eval+traceback/0": "Megatron's `validation loss at iteration N` line is eval_loss",
    "hf_dicts/healthy_late/srun_prefix/0": "no tiny-SGD-step LR finding on a mid-run excerpt",
    "fairseq/healthy_late/md_quote/0": "no noisy_data plateau on a mid-run excerpt",
    "hf_tqdm/plateau_ln10/rank_prefix+srun_prefix/0": "noisy_data dates a plateau where it began",
    "md_table/spike_recovers/cut_tail/0": "a number cut at the end is no 0 that hides a spike",
    "hf_dicts/spike_recovers/crlf+cut_tail/0": "a x6 one-off in a 40-point log is a spike",
    "mmengine_iter/nan/tqdm/0": "mmengine's `Iter(train) [N/M]` is the step, a print glued to a bar a line",
    "imagenet/healthy/timestamps+tqdm/0": "the general reader drops a bare bar glued in front of a line",
    "tab_table/divergence/md_quote/0": "a table numbered for want of a step column gives way to the log's steps",
    "jsonl_console/grad_explosion/eval/0": "an evaluation's loss column is eval_loss",
    "yolo/fp16_overflow/md_quote+srun_prefix/0": "srun's `0: ` tag (in a quote too) is stripped",
    "yolo/healthy_late/srun_prefix+tqdm/5": "a launcher's tag is looked for on the lines a terminal starts",
    "fairseq/fp16_overflow/fence+md_quote/0": "a scale that held before it fell is past the scaler's search",
    "logging/fp16_overflow/overflow/0": "a scale known only at overflow lines held over the rows between them",
    "deepspeed/divergence/crlf/0": "a climb that left its best in one print is dated there",
    "deepspeed_chat/spike_stays/srun_prefix/2": "lr_too_high's onset is the run of risen rows' first",
    "keras_verbose2/divergence/srun_prefix/0": "an alarm 1-5 rows after a step up is dated where it began",
    "yolo/zero/overflow/0": "an overflow line marks the step after the row before it skipped",
    "plain_epoch/zero/overflow/0": "an overflow line skips no epoch row",
    "tab_table/plateau_ln10/cut_tail/1": "a table row cut mid-number is not read",
    "hf_dicts/spike_recovers/fence/0": "a cross-entropy out of range for one print is a spike",
    "timm/healthy_late/warnings/0": "3-digit prints recurring by chance are no repeated batches",
    "hf_dicts/fp16_overflow/overflow/0": "overflows between step-less Trainer dicts are steps of their own",
}


@pytest.fixture(scope="module")
def subset(tmp_path_factory):
    out = []
    for k, case in enumerate(lm.cases(**SUBSET)):
        d = tmp_path_factory.mktemp(f"m{k}")
        out.append(lm.judge(case, d))
    return out


def _tally(results, key):
    n, read, ok = Counter(), Counter(), Counter()
    for r in results:
        for k in key(r):
            n[k] += 1
            read[k] += r.read_ok
            ok[k] += r.verdict_ok
    return {k: (n[k], read[k], ok[k]) for k in n}


AXES = {
    "format": lambda r: [r.case.fmt],
    "fault": lambda r: [r.case.curve],
    "interleaving": lambda r: list(r.case.inter),
}


@pytest.mark.parametrize("axis", sorted(AXES))
def test_the_matrix_rates_do_not_fall(subset, axis):
    got = _tally(subset, AXES[axis])
    low = []
    for name, (n, read, ok) in FLOORS[axis].items():
        g = got.get(name, (0, 0, 0))
        assert g[0] == n, (axis, name, "the subset changed: re-measure the floors", g)
        if g[1] < read or g[2] < ok:
            low.append((name, g, (n, read, ok)))
    fails = [(r.case.name, r.read_why, r.verdict_why) for r in subset if not (r.read_ok and r.verdict_ok)]
    assert not low, (low, fails[:10])


def test_the_subset_covers_every_format_fault_and_interleaving(subset):
    assert {r.case.fmt for r in subset} == set(lm.FORMATS)
    assert {r.case.curve for r in subset} == set(lm.CURVES)
    assert {i for r in subset for i in r.case.inter} == set(lm.INTERLEAVINGS)
    # and the truth it judges by is the text's: every case's rows are printed in it
    assert all(r.case.truth and r.case.text for r in subset)


@pytest.mark.parametrize("name", sorted(FIXED))
def test_a_bug_the_matrix_found_stays_fixed(name, tmp_path):
    fmt, curve, inter, seed = name.split("/")
    r = lm.judge(lm.make_case(fmt, curve, tuple(inter.split("+")), int(seed)), tmp_path)
    assert r.read_ok, (FIXED[name], r.read_why)
    assert r.verdict_ok, (FIXED[name], r.verdict_why, r.findings)


def test_the_judge_fails_a_wrong_reading_and_a_wrong_verdict(tmp_path):
    """The matrix can fail: a reading whose values are not the printed ones, an alarm on a healthy
    log and no alarm on a faulty one are each a failure of the judge."""
    case = lm.make_case("nanogpt", "nan", ("none",), 0)
    wrong = case.text.replace(" loss ", " loss 1", 1)  # one printed value changed under the truth
    bad = lm.judge(lm.Case(**{**case.__dict__, "text": wrong}), tmp_path)
    assert not bad.read_ok and "loss" in bad.read_why
    healthy = lm.make_case("nanogpt", "healthy", ("none",), 0)
    (tmp_path / "h").mkdir()
    (tmp_path / "f").mkdir()
    as_faulty = lm.judge(
        lm.Case(**{**healthy.__dict__, "symptoms": frozenset({"nonfinite"}), "window": (0, 1)}), tmp_path / "h"
    )
    assert as_faulty.read_ok and not as_faulty.verdict_ok and as_faulty.verdict_why.startswith("no alarm")
    faulty_as_healthy = lm.judge(lm.Case(**{**case.__dict__, "symptoms": frozenset(), "window": None}), tmp_path / "f")
    assert faulty_as_healthy.read_ok and faulty_as_healthy.verdict_why.startswith("false alarm")
