"""SFT label mask checks on real pieces: a BPE tokenizer trained here with a ChatML template,
batches built with it, a tiny GPT-2; before training (`check`) and live (`watch` only)."""

from __future__ import annotations

import json

import pytest
import torch

import lossdoctor
from conftest import run_cli
from lossdoctor.sources.rundir import PREFLIGHT
from msgs import find, has
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
    # every prompt token of both batches is supervised, and the evidence counts them: the prompt is
    # what the right mask hides, less the newline ending the assistant header (templates differ on it)
    right = _batches("right")
    prompt_tokens = sum(
        int(b["attention_mask"].sum()) - int((b["labels"] != -100).sum()) - len(b["labels"]) for b in right
    )
    counted = find(f.evidence, "plabels.prompt_supervised").values
    assert (counted["n"], counted["prompt"], counted["pct"], counted["batches"]) == (
        prompt_tokens,
        prompt_tokens,
        "100%",
        2,
    ), counted
    # the decoded supervised span shows the user's turn
    assert (
        find(f.evidence, "plabels.supervised_text")
        .values["text"]
        .startswith('"<|im_start|>user\\nwhat is two plus two')
    )
    assert find(f.fixes, "plabels.fix_mask_prompt").values["header"] == '"<|im_start|>assistant\\n"'


def test_unmasked_without_template_is_still_a_leak_for_sft():
    report = lossdoctor.check(batches=_batches("none"), task="sft")
    f = _one(report, "label_mask_leak")
    assert (f.evidence[0].key, f.evidence[0].values["n"], f.evidence[0].values["total"]) == (
        "plabels.all_real_supervised",
        8,
        8,
    ), f.evidence[0].data()
    # pre-training supervises every token on purpose: no leak there
    assert "label_mask_leak" not in _causes(lossdoctor.check(batches=_batches("none"), task="pretrain"))


def test_everything_masked_is_label_mask_empty(tok):
    batches = _batches("all")
    report = lossdoctor.check(batches=batches, task="sft", tokenizer=tok)
    f = report.primary
    assert (f.cause, f.severity, f.symptom) == ("label_mask_empty", "critical", "nonfinite")
    n = batches[0]["labels"].numel()
    assert has(f.evidence[:1], "plabels.all_masked", n=n, batch=0, ignore=-100), f.evidence[0].data()
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
    assert has(leak.evidence[:1], "plabels.padding_supervised", n=n_pad), leak.evidence[0].data()

    no_eos = b["labels"].clone()
    no_eos[no_eos == tok.eos_token_id] = -100
    report = lossdoctor.check(batches={**b, "labels": no_eos}, task="sft", tokenizer=tok)
    f = _one(report, "label_mask_empty")
    eos = f.evidence[0]
    assert f.severity == "warning" and eos.key == "plabels.eos_never_supervised", eos.data()  # never learns to end
    assert eos.values["names"].startswith('"<|im_end|>"'), eos.data()


def test_a_sample_whose_response_was_truncated_away(tok):
    b = sft_batch("right")
    labels = b["labels"].clone()
    labels[2] = -100
    report = lossdoctor.check(batches={**b, "labels": labels}, task="sft", tokenizer=tok)
    f = _one(report, "label_mask_empty")
    assert f.severity == "warning" and f.samples == [2]
    assert has(f.evidence[:1], "plabels.no_supervised_token", n=1, total=4), f.evidence[0].data()


def test_labels_shifted_twice(tok):
    b = sft_batch("right")
    shifted = torch.full_like(b["labels"], -100)
    shifted[:, :-1] = b["labels"][:, 1:]  # the collator shifted; GPT-2 shifts again
    model = tiny_gpt2()
    f = _one(lossdoctor.check(model, batches={**b, "labels": shifted}, task="sft", tokenizer=tok), "noisy_data")
    assert has(f.evidence[:1], "plabels.shifted", shifted="100%"), f.evidence[0].data()
    assert has(f.evidence[1:2], "plabels.shifted_again", model="GPT2LMHeadModel"), f.evidence[1].data()
    # without a model that shifts, pre-shifted labels are legitimate: a note, no finding
    report = lossdoctor.check(batches={**b, "labels": shifted}, task="sft", tokenizer=tok)
    assert "noisy_data" not in _causes(report)
    assert has(report.notes, "plabels.already_shifted")


@pytest.mark.parametrize(
    "mask,cause,severity",
    [("right", None, None), ("none", "label_mask_leak", "warning"), ("all", "label_mask_empty", "critical")],
)
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
    assert leak.evidence[0].key == "plabels.prompt_supervised", leak.evidence[0].data()
    assert find(leak.evidence, "plabels.supervised_text").values["text"].startswith('"<|im_start|>')
    assert found[False] == []


def test_watch_refuses_a_tokenizer_that_is_not_one(tmp_path):
    model = tiny_gpt2()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    with pytest.raises(ValueError, match="tokenizer must be a tokenizer"):
        lossdoctor.watch(model, opt, log_dir=tmp_path, tokenizer="gpt2")
