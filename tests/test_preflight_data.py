"""Data checks: values a model cannot learn from, found in the batches before training."""

from __future__ import annotations

import pytest
import torch

import lossdoctor
from msgs import find, has
from preflight_kit import chat_tokenizer, sft_batch


def _findings(report, cause):
    return [f for f in report.findings if f.cause == cause]


def _features(seed=0, n=64):
    g = torch.Generator().manual_seed(seed)
    return torch.randn(n, 6, generator=g), torch.randint(0, 3, (n,), generator=g)


def test_healthy_features_and_text_are_silent():
    x, y = _features()
    report = lossdoctor.check(batches=[(x[:32], y[:32]), (x[32:], y[32:])], task="classification")
    assert report.findings == [], [f.to_dict() for f in report.findings]
    texts = {"text": ["the cat sat on the mat", "naïve café résumé", "Привет мир", "2 × 3 ≥ 5"]}
    assert lossdoctor.check(batches=texts).findings == []


def test_nonfinite_samples_are_named():
    x, y = _features()
    x[5, 2] = float("nan")
    x[9, 0] = float("inf")
    [f] = _findings(lossdoctor.check(batches=(x, y)), "nonfinite_data")
    assert (f.severity, f.symptom, f.samples) == ("critical", "nonfinite", [5, 9])
    assert has(f.evidence[:1], "data.nonfinite_samples", n=2, total=64, what="1 NaN, 1 Inf"), f.evidence[0].data()


def test_unnormalised_features():
    x, y = _features()
    x[:, 3] = x[:, 3] * 3e4 + 1e5  # a raw currency amount next to standardised features
    [f] = _findings(lossdoctor.check(batches=(x, y)), "nonfinite_data")
    assert f.severity == "warning"
    col = x[:, 3].double()
    rms, mean, std = (float(v) for v in (col.square().mean().sqrt(), col.mean(), col.std(unbiased=False)))
    scale = f.evidence[0]
    assert scale.key == "data.input_scale" and scale.values["n"] == 64, scale.data()
    assert [scale.values[k] for k in ("hi", "mean", "std")] == pytest.approx([rms, mean, std], rel=1e-3), scale.data()
    assert f.evidence[1].key == "data.scale_spread"
    assert f.fixes[0].key == "data.fix_standardise_inputs"  # x = (x - mean) / std


def test_raw_pixels():
    g = torch.Generator().manual_seed(0)
    images = torch.randint(0, 256, (8, 3, 8, 8), generator=g).float()
    [f] = _findings(lossdoctor.check(batches=(images, torch.zeros(8, dtype=torch.long))), "nonfinite_data")
    assert "x / 255" in str(f.fixes[0])


def test_regression_targets_on_a_huge_scale():
    x, _ = _features()
    y = x[:, :1] * 5e4 + 2e5
    [f] = _findings(lossdoctor.check(batches=(x, y), task="regression"), "nonfinite_data")
    assert has(f.evidence[:1], "data.targets_scale", key="'1'"), f.evidence[0].data()
    assert f.fixes[0].key == "data.fix_standardise_targets"


def test_mojibake_and_replacement_characters():
    good = ["the cat sat on the mat", "a quiet afternoon", "numbers like 3 and 4", "plain text"] * 2
    bad = ["cafÃ© au lait", "donâ€™t panic", "bad byte \ufffd in the middle here"]
    report = lossdoctor.check(batches=[{"text": good[:4]}, {"text": good[4:] + bad}])
    [f] = _findings(report, "noisy_data")
    ev = " ".join(f.evidence)
    assert has(f.evidence[:1], "data.decoding_errors", bad=3, n=11), f.evidence[0].data()
    mojibake = find(f.evidence, "data.mojibake")
    assert (mojibake.values["text"], mojibake.values["fixed"]) == ('"cafÃ© au lait"', '"café au lait"'), mojibake.data()
    assert "U+FFFD" in ev
    assert f.batch == 1


def test_tokenised_text_is_decoded_for_the_check():
    tok = chat_tokenizer()
    b = sft_batch("right")
    ids = tok("cafÃ© and donâ€™t", add_special_tokens=False)["input_ids"]
    b["input_ids"][0, 1 : 1 + len(ids)] = torch.tensor(ids)
    [f] = _findings(lossdoctor.check(batches=b, tokenizer=tok), "noisy_data")
    assert "mojibake" in " ".join(f.evidence) and f.samples == [0]


def test_empty_long_and_duplicate_samples():
    texts = [f"short sample number {i}" for i in range(12)]
    texts[3] = "   "
    texts[7] = "word " * 400
    texts[10] = texts[11] = texts[9]
    report = lossdoctor.check(batches=[{"text": texts[:6]}, {"text": texts[6:]}])
    [f] = _findings(report, "noisy_data")  # one finding per cause, one evidence line per problem
    assert f.severity == "warning" and f.samples == [3]
    assert [m.key for m in f.evidence[:3]] == ["data.empty_samples", "data.long_samples", "data.duplicates"]
    empty, long, dup = (m.values for m in f.evidence[:3])
    assert (empty["n"], empty["total"], empty["batch"], empty["samples"]) == (1, 12, 0, "[3]"), empty
    assert (
        long["n"],
        long["total"],
        long["factor"],
        long["median"],
        long["batch"],
        long["sample"],
        long["length"],
    ) == (1, 12, 8, 21, 1, 1, 1999), long
    assert (dup["n"], dup["total"], dup["pct"], dup["b1"], dup["j1"], dup["b0"], dup["j0"]) == (
        2,
        12,
        "17%",
        1,
        4,
        1,
        3,
    ), dup


def test_token_ids_beyond_the_embedding():
    tok = chat_tokenizer()
    b = sft_batch("right")
    b["input_ids"][1, 2] = len(tok) + 5
    [f] = _findings(lossdoctor.check(batches=b, tokenizer=tok), "nonfinite_data")
    assert f.severity == "critical" and f.samples == [1]
    assert f"range over 0..{len(tok) + 5}, but the embedding has {len(tok)} rows" in f.evidence[0]
