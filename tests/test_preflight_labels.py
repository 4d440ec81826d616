"""SFT label mask checks on real pieces: a BPE tokenizer trained here with a ChatML template,
batches built with it, a tiny GPT-2; before training (`check`) and live (`watch` only)."""

from __future__ import annotations

import json

import pytest
import torch

import lossdoctor
from conftest import run_cli
from lossdoctor.sources.rundir import PREFLIGHT
from preflight_kit import chat_tokenizer, sft_batch, tiny_gpt2, train


def _causes(report, severities=("warning", "critical")):
    return [f.cause for f in report.findings if f.severity in severities]


def _one(report, cause):
    found = [f for f in report.findings if f.cause == cause]
    assert found, [f.to_dict() for f in report.findings]
    return found[0]


def _batches(mask):
    return [sft_batch(mask), sft_batch(mask, start=4)]


@pytest.fixture(scope="module")
def tok():
    return chat_tokenizer()


def test_correctly_masked_sft_is_silent(tok):
    model = tiny_gpt2()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    report = lossdoctor.check(model, opt, batches=_batches("right"), task="sft", tokenizer=tok)
    assert report.findings == [], [f.to_dict() for f in report.findings]
    assert report.status == "healthy"


def test_unmasked_prompt_is_a_leak_with_the_decoded_span(tok):
    report = lossdoctor.check(batches=_batches("none"), task="sft", tokenizer=tok)
    f = _one(report, "label_mask_leak")
    assert f.severity == "warning" and f.confidence >= 0.9
    text = " ".join(f.evidence)
    # every prompt token of both batches is supervised, and the evidence counts them: the prompt is
    # what the right mask hides, less the newline ending the assistant header (templates differ on it)
    right = _batches("right")
    prompt_tokens = sum(int(b["attention_mask"].sum()) - int((b["labels"] != -100).sum()) - len(b["labels"])
                        for b in right)
    assert f"{prompt_tokens} of {prompt_tokens} prompt tokens (100%)" in text
    # the decoded supervised span shows the user's turn
    assert '"<|im_start|>user\\nwhat is two plus two' in text
    assert any("<|im_start|>assistant\\n" in str(x) for x in f.fixes)


def test_unmasked_without_template_is_still_a_leak_for_sft():
    report = lossdoctor.check(batches=_batches("none"), task="sft")
    f = _one(report, "label_mask_leak")
    assert "every real token of 8 of 8 samples is supervised" in f.evidence[0]
    # pre-training supervises every token on purpose: no leak there
    assert "label_mask_leak" not in _causes(lossdoctor.check(batches=_batches("none"), task="pretrain"))


def test_everything_masked_is_label_mask_empty(tok):
    batches = _batches("all")
    report = lossdoctor.check(batches=batches, task="sft", tokenizer=tok)
    f = report.primary
    assert (f.cause, f.severity, f.symptom) == ("label_mask_empty", "critical", "nonfinite")
    n = batches[0]["labels"].numel()
    assert f"all {n} label positions of batch 0 are -100" in f.evidence[0]
    assert f.samples == [0, 1, 2, 3]
    # the claim in the evidence is what torch does
    model = tiny_gpt2()
    assert torch.isnan(model(**batches[0]).loss)


def test_padding_supervised_and_eos_never_supervised(tok):
    b = sft_batch("right")
    pad_labels = b["labels"].clone()
    pad_labels[b["attention_mask"] == 0] = tok.pad_token_id
    report = lossdoctor.check(batches={**b, "labels": pad_labels}, task="sft", tokenizer=tok)
    leak = _one(report, "label_mask_leak")
    n_pad = int((b["attention_mask"] == 0).sum())
    assert leak.evidence[0].startswith(f"{n_pad} supervised label positions are padding")

    no_eos = b["labels"].clone()
    no_eos[no_eos == tok.eos_token_id] = -100
    report = lossdoctor.check(batches={**b, "labels": no_eos}, task="sft", tokenizer=tok)
    f = _one(report, "label_mask_empty")
    assert f.severity == "warning" and '"<|im_end|>"' in f.evidence[0]
    assert "never learns to end" in f.evidence[0]


def test_a_sample_whose_response_was_truncated_away(tok):
    b = sft_batch("right")
    labels = b["labels"].clone()
    labels[2] = -100
    report = lossdoctor.check(batches={**b, "labels": labels}, task="sft", tokenizer=tok)
    f = _one(report, "label_mask_empty")
    assert f.severity == "warning" and f.samples == [2]
    assert f.evidence[0].startswith("1 of 4 samples have no supervised token")


def test_labels_shifted_twice(tok):
    b = sft_batch("right")
    shifted = torch.full_like(b["labels"], -100)
    shifted[:, :-1] = b["labels"][:, 1:]  # the collator shifted; GPT-2 shifts again
    model = tiny_gpt2()
    f = _one(lossdoctor.check(model, batches={**b, "labels": shifted}, task="sft", tokenizer=tok), "noisy_data")
    assert "labels[i] == input_ids[i+1] at 100%" in f.evidence[0]
    assert "GPT2LMHeadModel shifts the labels again" in f.evidence[1]
    # without a model that shifts, pre-shifted labels are legitimate: a note, no finding
    report = lossdoctor.check(batches={**b, "labels": shifted}, task="sft", tokenizer=tok)
    assert "noisy_data" not in _causes(report)
    assert any("already shifted" in n for n in report.notes)


@pytest.mark.parametrize("mask,cause,severity", [("right", None, None),
                                                  ("none", "label_mask_leak", "warning"),
                                                  ("all", "label_mask_empty", "critical")])
def test_caught_live_by_watch(tmp_path, mask, cause, severity):
    model = tiny_gpt2()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    with lossdoctor.watch(model, opt, log_dir=tmp_path, task="sft", alerts=False) as mon:
        train(model, opt, _batches(mask), 10, mon=mon)
    report = mon.diagnose()
    if cause is None:
        assert report.status == "healthy", [f.to_dict() for f in report.findings]
        return
    f = _one(report, cause)
    assert f.severity == severity
    assert [x.cause for x in mon.findings][:1] == [cause]  # the live engine saw it too
    lines = (tmp_path / PREFLIGHT).read_text().splitlines()
    assert any(json.loads(x)["cause"] == cause for x in lines)
    # the CLI on the run directory says the same
    out = run_cli("diagnose", tmp_path, "--format", "json")
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout)["findings"][0]["cause"] == cause


def test_watch_takes_the_tokenizer_for_plain_loops(tmp_path, tok):
    """No task hint: with the tokenizer, its chat template tells the prompt from the answer and the
    unmasked prompt is a leak; without it nothing can say so."""
    found = {}
    for given in (True, False):
        model = tiny_gpt2()
        opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
        extra = {"tokenizer": tok} if given else {}
        with lossdoctor.watch(model, opt, log_dir=tmp_path / str(given), alerts=False, **extra) as mon:
            train(model, opt, _batches("none"), 6, mon=mon)
        found[given] = [f for f in mon.diagnose().findings if f.cause == "label_mask_leak"]
    (leak,) = found[True]
    assert "prompt tokens" in leak.evidence[0] and "<|im_start|>" in " ".join(leak.evidence)
    assert found[False] == []


def test_watch_refuses_a_tokenizer_that_is_not_one(tmp_path):
    model = tiny_gpt2()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    with pytest.raises(ValueError, match="tokenizer must be a tokenizer"):
        lossdoctor.watch(model, opt, log_dir=tmp_path, tokenizer="gpt2")
