"""Data checks: values a model cannot learn from, found in the batches before training."""

from __future__ import annotations

import torch

import lossdoctor
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
    assert "2 of 64 samples hold non-finite values (1 NaN, 1 Inf" in f.evidence[0]


def test_unnormalised_features():
    x, y = _features()
    x[:, 3] = x[:, 3] * 3e4 + 1e5  # a raw currency amount next to standardised features
    [f] = _findings(lossdoctor.check(batches=(x, y)), "nonfinite_data")
    assert f.severity == "warning"
    col = x[:, 3].double()
    rms, mean, std = (float(v) for v in (col.square().mean().sqrt(), col.mean(), col.std(unbiased=False)))
    assert f"to {rms:.2e} over 64 values (feature 3: mean {mean:.2e}, std {std:.2e})" in f.evidence[0]
    assert "the feature scales span a factor of" in f.evidence[1]
    assert "x = (x - mean) / std" in str(f.fixes[0])


def test_raw_pixels():
    g = torch.Generator().manual_seed(0)
    images = torch.randint(0, 256, (8, 3, 8, 8), generator=g).float()
    [f] = _findings(lossdoctor.check(batches=(images, torch.zeros(8, dtype=torch.long))), "nonfinite_data")
    assert "x / 255" in str(f.fixes[0])


def test_regression_targets_on_a_huge_scale():
    x, _ = _features()
    y = (x[:, :1] * 5e4 + 2e5)
    [f] = _findings(lossdoctor.check(batches=(x, y), task="regression"), "nonfinite_data")
    assert f.evidence[0].startswith("targets '1' have RMS")
    assert "standardise the targets" in str(f.fixes[0])


def test_mojibake_and_replacement_characters():
    good = ["the cat sat on the mat", "a quiet afternoon", "numbers like 3 and 4", "plain text"] * 2
    bad = ["cafÃ© au lait", "donâ€™t panic", "bad byte \ufffd in the middle here"]
    report = lossdoctor.check(batches=[{"text": good[:4]}, {"text": good[4:] + bad}])
    [f] = _findings(report, "noisy_data")
    ev = " ".join(f.evidence)
    assert f.evidence[0].startswith("3 of 11 samples hold text decoding errors")
    assert '"cafÃ© au lait" should read "café au lait"' in ev
    assert "U+FFFD" in ev
    assert f.batch == 1


def test_tokenised_text_is_decoded_for_the_check():
    tok = chat_tokenizer()
    b = sft_batch("right")
    ids = tok("cafÃ© and donâ€™t", add_special_tokens=False)["input_ids"]
    b["input_ids"][0, 1:1 + len(ids)] = torch.tensor(ids)
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
    assert f.evidence[0].startswith("1 of 12 samples are empty (no real token; batch 0: samples [3])")
    assert f.evidence[1].startswith("1 of 12 samples are at least 8x the median length 21; the longest "
                                    "(batch 1 sample 1) has 1999")
    assert f.evidence[2].startswith("2 of 12 samples (17%) are exact duplicates of an earlier one "
                                    "(e.g. batch 1 sample 4 = batch 1 sample 3)")


def test_token_ids_beyond_the_embedding():
    tok = chat_tokenizer()
    b = sft_batch("right")
    b["input_ids"][1, 2] = len(tok) + 5
    [f] = _findings(lossdoctor.check(batches=b, tokenizer=tok), "nonfinite_data")
    assert f.severity == "critical" and f.samples == [1]
    assert f"range over 0..{len(tok) + 5}, but the embedding has {len(tok)} rows" in f.evidence[0]
