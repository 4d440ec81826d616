"""The print-statement benchmark (`benchmarks/print_shapes/`): its data file is well formed, its
harness renders what a statement prints and judges what the reader reads back."""

from __future__ import annotations

import json
import math

import pytest

from benchmarks.print_shapes import check_statements, score
from benchmarks.real_logs.split import split_of


def test_every_statement_renders_and_names_its_source():
    entries = json.loads(score.STATEMENTS.read_text(encoding="utf-8"))
    assert len(entries) >= 100
    for e in entries:
        assert check_statements.entry_errors(e) == [], e
        assert e["repo"].count("/") == 1 and e["path"] and e["source"]
    per_repo: dict[str, int] = {}
    for e in entries:
        per_repo[e["repo"].lower()] = per_repo.get(e["repo"].lower(), 0) + 1
    assert max(per_repo.values()) <= 2
    # both splits are populated by the corpus's rule
    assert {split_of(r) for r in per_repo} == {"dev", "test"}


def test_a_rendered_statement_prints_the_truth_it_is_judged_against():
    entry = {
        "repo": "a/b",
        "template": "Epoch [{epoch}/{epochs}] step {step} loss {loss:.4f} lr {lr:.1e}",
        "per": "step",
    }
    text, truth = score.render(entry, nan=True, seed=0)
    lines = text.splitlines()
    assert len(lines) == score.LINES == len(truth)
    assert lines[0].startswith("Epoch [1/3] step 10 loss ") and float(lines[0].split()[5]) == truth[0]
    assert all(math.isnan(v) for v in truth[score.NAN_FROM :]) and all(
        math.isfinite(v) for v in truth[: score.NAN_FROM]
    )
    assert lines[score.NAN_FROM].split()[5] == "nan"


def test_the_loss_printed_beside_its_average_is_the_truth():
    entry = {"repo": "a/b", "template": "Iter {step} Loss {loss:.4f} ({avg_loss:.4f})", "per": "step"}
    _, truth = score.render(entry, nan=False, seed=1)
    v = score.curve(1, False)
    assert truth[3] == pytest.approx(round(v["loss"][3], 4)) and truth[3] != pytest.approx(round(v["avg_loss"][3], 4))


@pytest.mark.parametrize(
    ("template", "read"),
    [
        ("Epoch [{epoch}/{epochs}], Step [{batch}/{batches}], Loss: {loss:.4f}", True),
        # the value a tqdm bar's rate would print, no loss anywhere: nothing to read back
        ("{percent:.0f}%|#####| {batch}/{batches} [{clock}<{clock}, {speed:.2f}it/s]", None),
    ],
)
def test_judge_reads_back_and_diagnoses_both_curves(tmp_path, template, read):
    entry = {"repo": "karpathy/nanogpt", "template": template, "per": "batch"}
    if read is None:
        assert score.check(entry) is not None  # no training loss printed: left out, never judged
        return
    res = score.judge(entry, seed=0, tmp=tmp_path)
    assert (res.read, res.why, res.nan_found, res.healthy_clean) == (True, "", True, True)
    assert res.split == split_of("karpathy/nanogpt")


def test_a_series_read_off_by_one_value_is_not_read():
    assert score._same([1.0, 2.0], [1.0, 2.0]) == ""
    assert score._same([1.0, float("nan")], [1.0, float("nan")]) == ""
    assert score._same([1.0, 2.5], [1.0, 2.0]).startswith("line 1")
    assert score._same([1.0], [1.0, 2.0]) == "1 losses read, 2 printed"


def test_an_unknown_role_is_refused_before_rendering():
    assert score.check({"template": "loss {loss} {secret.attr}"}) is not None
    assert score.check({"template": "loss {loss:.3f}", "prefix": "{asctime} "}) is None
