"""The corpus of real training logs (benchmarks/real_logs): every excerpt, written by other people
and pasted into public threads, must be read without error, with the steps and values the source
shows.

The facts checked for each file live in the corpus manifest (`expect`), copied by hand from the
source text:
- `n_steps_at_least`: the reader found at least this many steps;
- `points`: `[step, column, value]` where the log prints its own step counter;
- `rows`: `[k, column, value]`: the k-th logged value of that column in step order (negative k counts
  from the end), for logs whose lines carry no unambiguous step (HF Trainer dicts, fairseq, a tqdm
  bar next to a dict);
- `first_nonfinite_step`: the first step whose loss or grad norm is NaN/Inf, or that was skipped
  (null: none in the excerpt; absent: not checked);
- `n_skipped_at_least`: how many steps at least were marked skipped (DeepSpeed OVERFLOW lines).
A value "nan" must come back as a logged NaN; any other value within 1e-6 relative.

A point or row may carry a fourth element where the reader deliberately reads a value other than
the one printed: `{"logged_value": <what the source prints>, "read_as_nan": <why>}`. The source's
number stays on record; the expected value is the reader's reading, and the run's notes must say
so. The one such rule so far: the Hugging Face Trainer's `logging_nan_inf_filter` logs an interval
whose every step is NaN as `'loss': 0.0` (with `'grad_norm': nan`), which is read as NaN.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from benchmarks.real_logs.facts import fact_failures
from benchmarks.real_logs.split import repository_of, split_of
from lossdoctor.sources import load_path
from lossdoctor.vocabulary import CAUSES

CORPUS = Path(__file__).resolve().parents[1] / "benchmarks" / "real_logs"
ENTRIES: list[dict] = json.loads((CORPUS / "manifest.json").read_text(encoding="utf-8"))
OUTCOMES = {"nan", "divergence", "spike", "plateau", "healthy", "other"}


def test_manifest_is_complete_and_uses_the_contract_vocabulary():
    files = sorted(
        p.name
        for p in CORPUS.iterdir()
        if p.is_file() and p.name not in ("manifest.json", "README.md", "DEV_INDEX.md") and p.suffix != ".py"
    )  # the scorer sits next to the logs
    assert sorted(e["file"] for e in ENTRIES) == files, "every corpus file has one manifest entry"
    assert len(ENTRIES) >= 150  # issue 25: >= 150 logs from >= 60 repositories or sites, about a third healthy
    assert len({e["repository"] for e in ENTRIES}) >= 60
    assert sum(e["outcome"] == "healthy" for e in ENTRIES) >= len(ENTRIES) // 4
    assert len({e["file"] for e in ENTRIES}) == len(ENTRIES), "one entry per file"
    for e in ENTRIES:
        assert set(e) >= {
            "file",
            "source",
            "repository",
            "split",
            "format",
            "outcome",
            "diagnosis_given_there",
            "expected_cause",
            "confidence",
            "expect",
        }
        assert e["source"].startswith("https://"), e["file"]
        assert e["confidence"] in ("high", "medium", "low"), e["file"]
        assert e.get("reads_today", True) in (True, False), e["file"]
        for fact in ("has_loss_scaler", "clips_at", "recovered_spike"):
            assert fact not in e or e[fact] is None or isinstance(e[fact], (bool, int, float)), e["file"]
        assert e["outcome"] in OUTCOMES, e["file"]
        assert e["expected_cause"] is None or e["expected_cause"] in CAUSES, e["file"]
        exp = e["expect"]
        assert exp["n_steps_at_least"] >= 1
        assert exp.get("points") or exp.get("rows"), f"{e['file']}: no value to check"
        for fact in exp.get("points", []) + exp.get("rows", []):
            assert len(fact) in (3, 4), e["file"]
            if len(fact) == 4:
                _check_reinterpretation(fact, e["file"])


def test_every_entry_sits_on_the_side_of_the_split_rule():
    """The split is by repository (or site), decided by `split.py`, never by hand."""
    for e in ENTRIES:
        assert e["repository"] == repository_of(e["source"]), e["file"]
        assert e["split"] == split_of(e["repository"]), e["file"]


def test_the_split_rule_is_fixed():
    """The rule itself: pinned repositories are dev, the others fall by sha256 mod 3 (values
    computed once when the rule was written; a change here would move logs between the sides)."""
    assert split_of("karpathy/nanoGPT") == "dev"  # pinned: in the corpus before the split
    assert split_of("pytorch/pytorch") == "test"
    assert split_of("huggingface/accelerate") == "dev"
    assert split_of("discuss.pytorch.org/t") == "test"
    assert repository_of("https://github.com/Owner/Name.git/issues/3") == "owner/name"
    assert repository_of("https://www.Example.org/forum/t/123") == "example.org/forum"


def _check_reinterpretation(fact: list, file: str) -> None:
    """A value the reader reads differently from the print: the printed value and the reason are
    both recorded, and the reading is NaN."""
    extra = fact[3]
    assert set(extra) == {"logged_value", "read_as_nan"}, file
    assert isinstance(extra["logged_value"], (int, float)) and extra["read_as_nan"].strip(), file
    assert fact[2] == "nan", f"{file}: a value read as NaN must expect 'nan'"


def _param(e: dict):
    """A log in a format the reader cannot read yet (`"reads_today": false`, with `reads_today_why`)
    is an expected failure, not strict: when the general reader lands it starts passing."""
    if e.get("reads_today", True):
        return pytest.param(e, id=e["file"])
    reason = "not read yet: " + e.get("reads_today_why", "format outside the reader's table")
    return pytest.param(e, id=e["file"], marks=pytest.mark.xfail(strict=False, reason=reason))


@pytest.mark.parametrize("entry", [_param(e) for e in ENTRIES])
def test_real_log_is_read_with_the_values_of_its_source(entry):
    failures = fact_failures(entry, load_path(CORPUS / entry["file"]))
    assert not failures, failures


def test_a_fact_names_a_component_as_printed_the_reader_keys_it_in_lower_case(tmp_path):
    """GluonCV's `CrossEntropy=19.147, SmoothL1=3.899` (no total printed) come back as the components
    `crossentropy`, `smoothl1`: a fact naming them as printed is checked against those values, and a
    wrong value or a name no reader key matches still fails."""
    p = tmp_path / "train.log"
    p.write_text(
        "".join(
            f"INFO:root:[Epoch 0][Batch {b}], Speed: 24.210 samples/sec, CrossEntropy={19.147 - b:.3f}, "
            f"SmoothL1={3.899 - b / 10:.3f}\n"
            for b in range(4)
        )
    )
    runs = load_path(p)

    def entry(*rows):
        return {"expect": {"n_steps_at_least": 4, "rows": [list(r) for r in rows]}}

    assert fact_failures(entry((0, "CrossEntropy", 19.147), (-1, "SmoothL1", 3.599)), runs) == []
    assert fact_failures(entry((0, "crossentropy", 19.147)), runs) == []
    assert fact_failures(entry((0, "CrossEntropy", 19.0)), runs)
    assert fact_failures(entry((0, "Cross Entropy", 19.147)), runs)
