"""Packed sequences through TRL's real `SFTTrainer` (`packing=True`: best-fit packing, and the
padding-free collator that flattens the whole batch into one row with `position_ids` restarting at
every example), with the callback exactly as the README shows it. "Sample 0" is then a row of a
dozen examples: what the user can act on is the example, so the report names row, example and
tokens, and the label checks work per example."""

from __future__ import annotations

import json

import numpy as np
import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("trl")

import trl_kit  # noqa: E402
from lossdoctor.integrations.transformers import LossDoctorCallback  # noqa: E402
from lossdoctor.sources.rundir import read_run_dir  # noqa: E402
from msgs import find, has  # noqa: E402


def _train(tmp_path, convs=None, **config):
    cb = LossDoctorCallback(log_dir=tmp_path / "ld")
    if convs is None:
        trl_kit.sft(tmp_path / "out", callback=cb, packing=True, **config)
    else:
        trl_kit.sft_on(tmp_path / "out", convs, callback=cb, packing=True, **config)
    (run,) = read_run_dir(tmp_path / "ld")
    return cb, run


def _alerts(capfd, cause: str) -> list[str]:
    return [line for line in capfd.readouterr().err.splitlines() if line.startswith("lossdoctor:") and cause in line]


def test_healthy_packed_sft_is_clean(tmp_path):
    cb, run = _train(tmp_path, assistant_only_loss=True, steps=6)
    assert run.meta["framework"]["packing"] is True
    # the padding-free collator flattens the batch into one row holding every example
    assert run.col("batch_size").tolist() == [1.0] * 6
    assert (run.col("packed_examples") >= 12).all(), run.col("packed_examples")
    assert not run.event("label_empty_examples")
    report = cb.diagnose()
    assert report.status == "healthy", [f.to_dict() for f in report.findings]
    assert not [f for f in report.findings if f.cause.startswith("label_mask")]


def test_all_masked_example_inside_a_packed_row_is_named_by_its_example(tmp_path, capfd):
    """Every 4th prompt alone is longer than max_length: packing truncates it to max_length (TRL
    drops fully masked examples only without packing), so that example keeps no label; its row
    holds the other examples' labels, so the per-row numbers look healthy."""
    convs = trl_kit.conversations_some_too_long(64, every=4)
    cb, run = _train(tmp_path, convs, assistant_only_loss=True, steps=3)
    assert run.col("label_empty_samples").tolist() == [0.0] * 3  # per row: nothing is wrong
    ev0 = run.event("label_empty_examples")[0]
    assert ev0["n"] >= 2 and ev0["of"] == run.col("packed_examples")[0]
    assert all(e["row"] == 0 and e["end"] - e["start"] == 64 for e in ev0["at"])
    assert len(_alerts(capfd, "label_mask_empty")) == 1  # alerted once, not once per step

    report = cb.diagnose()
    (f,) = [f for f in report.findings if f.cause == "label_mask_empty"]
    assert f.severity == "warning" and f.step == 0 and f.samples == [0]
    assert f.examples and all(set(e) == {"row", "example", "start", "end"} for e in f.examples)
    # the examples named are really the fully masked ones of the packed row
    assert {(e["start"], e["end"]) for e in f.examples} >= {(e["start"], e["end"]) for e in ev0["at"]}
    first = f.examples[0]
    ends = find(f.evidence, "plabels.packed_example_ends_with").values
    assert {k: ends[k] for k in ("row", "example", "start", "end")} == {
        "row": 0,
        "example": first["example"],
        "start": first["start"],
        "end": first["end"],
    }, ends
    assert has(f.evidence, "plabels.truncated_response_packed", max_length=64), [m.data() for m in f.evidence]
    assert has(f.fixes, "plabels.fix_truncate_and_drop_packed") or has(f.fixes, "labels.fix_packed_unsupervised")
    zh = " ".join(e.render("zh") for e in f.evidence if hasattr(e, "render"))
    assert "packed 行" in zh and "样本" in zh
    d = json.loads(json.dumps(report.to_dict()))
    assert [x for x in d["findings"] if x["cause"] == "label_mask_empty"][0]["examples"] == f.examples


def test_all_labels_masked_by_packing_and_truncation(tmp_path, capfd):
    """Every prompt fills max_length: packing truncation leaves no label in any example, the loss
    is TRL's clamped 0 with a zero gradient: label_mask_empty at step 0, critical, alerted once."""
    convs = trl_kit.conversations_some_too_long(32, every=1)
    cb, run = _train(tmp_path, convs, assistant_only_loss=True, steps=3)
    assert run.col("label_ignored_frac").tolist() == [1.0] * 3
    assert run.col("loss").tolist() == [0.0] * 3
    assert len(_alerts(capfd, "label_mask_empty")) == 1
    report = cb.diagnose()
    (f,) = [f for f in report.findings if f.cause == "label_mask_empty"]
    assert f.severity == "critical" and f.step == 0
    assert report.status != "healthy"


def test_prompt_leak_is_judged_per_packed_example(tmp_path):
    """assistant_only_loss=False with packing: each example's prompt is supervised (all but its
    first token, which the collator masks at every example boundary). Judged per example, 0% of the
    positions are masked beyond those boundaries and the leak evidence names the examples."""
    cb, run = _train(tmp_path, assistant_only_loss=False, steps=4)
    fi = run.col("label_ignored_frac")
    assert (fi > 0.02).all()  # per row, the boundaries alone hide the leak from a 2% threshold
    report = cb.diagnose()
    (leak,) = [f for f in report.findings if f.cause == "label_mask_leak"]
    assert leak.confidence >= 0.9
    assert has(leak.evidence, "labels.leak", pct=0), [m.data() for m in leak.evidence]  # 0% of labels masked
    named = [m.values for m in leak.evidence if getattr(m, "key", None) == "plabels.packed_supervised_text"]
    assert named and all(v["row"] == 0 and v["end"] - v["start"] >= 2 for v in named), named
    assert any("assistant_only_loss=True" in str(x) for x in leak.fixes)


def test_fused_lm_head_loss_is_never_an_activation(tmp_path):
    """TRL 1.16's SFTTrainer computes the loss with a fused LM head: `lm_head` never runs as a
    module and the model returns its loss (and per-token log-probs), no logits. The loss is not an
    activation: `<model>` has no activation value, none is named after it, and a note says the head
    was bypassed."""
    cb, run = _train(tmp_path, assistant_only_loss=True, steps=3, lr=1.0)
    mods = run.layers.modules
    act = run.layers.stats["act_absmax"]
    assert np.isnan(act[:, mods.index("<model>")]).all(), act[:, mods.index("<model>")]
    assert np.isnan(act[:, mods.index("lm_head")]).all()
    assert np.isfinite(act[:, mods.index("transformer.ln_f")]).all()
    assert "<model>" not in run.event("act_absmax_layer").values()
    # the largest activation is a real module output, not the loss
    assert not np.isclose(run.col("act_absmax"), run.col("loss")).any()
    (note,) = [n for n in cb.diagnose().notes if getattr(n, "key", None) == "tracer.head_bypassed"]
    assert note.values["head"] == "lm_head"  # never ran as a module: not traced
    (msg,) = [n for n in cb.monitor.notes if getattr(n, "key", "") == "tracer.head_bypassed"]
    assert "隐藏状态" in msg.render("zh") and "lm_head" in msg.render("zh")


def test_model_outputs_with_logits_report_the_logits_not_the_loss(tmp_path):
    """A plain HF forward with labels returns (loss, logits): `<model>` is the logits' magnitude."""
    import lossdoctor

    tok = trl_kit.tokenizer(["the cat sat on a mat"])
    model = trl_kit.gpt2(tok, 16)
    opt = torch.optim.SGD(model.parameters(), lr=0.0)
    ids = torch.randint(6, len(tok), (2, 12), generator=torch.Generator().manual_seed(0))
    mon = lossdoctor.watch(model, opt, log_dir=tmp_path / "ld")
    out = model(input_ids=ids, labels=ids)
    out.loss.backward()
    logits_max = float(out.logits.detach().abs().max())
    opt.step()
    mon.step(loss=out.loss, batch={"input_ids": ids, "labels": ids})
    mon.close()
    (run,) = read_run_dir(tmp_path / "ld")
    root = run.layers.stats["act_absmax"][0, run.layers.modules.index("<model>")]
    assert root == pytest.approx(logits_max, rel=1e-5) and root != pytest.approx(float(out.loss), rel=1e-3)
    assert not has(mon.notes, "tracer.head_bypassed")


def _packed_embeds_batch(model, lengths, nan_at=None, seed=0):
    """One padding-free row of examples of `lengths` (TRL's layout: position_ids restarting per
    example, cu_seq_lens, the first label of each example -100), as input embeddings; `nan_at`
    puts a NaN into that token."""
    pos = torch.cat([torch.arange(n) for n in lengths])[None]
    ids = torch.randint(6, model.config.vocab_size, pos.shape, generator=torch.Generator().manual_seed(seed))
    emb = model.transformer.wte(ids).detach()
    if nan_at is not None:
        emb[0, nan_at] = float("nan")
    labels = ids.clone()
    labels[pos == 0] = -100
    cu = torch.tensor([0, *torch.tensor(lengths).cumsum(0).tolist()], dtype=torch.int32)
    return {"inputs_embeds": emb, "position_ids": pos, "labels": labels, "cu_seq_lens_q": cu, "cu_seq_lens_k": cu}


def test_localize_bisects_the_examples_of_a_packed_row():
    """A NaN in example 2 of a packed row (without a varlen kernel it reaches every later example
    of the row through attention): bisection over the examples, not the rows, names example 2."""
    import lossdoctor

    tok = trl_kit.tokenizer(["the cat sat on a mat"])
    model = trl_kit.gpt2(tok, 64)
    lengths = [10, 12, 9, 14, 11]
    batch = _packed_embeds_batch(model, lengths, nan_at=10 + 12 + 4)
    loc = lossdoctor.localize(model, batch, lambda m, b: m(**b).loss)
    assert loc.cause == "nonfinite_data" and loc.samples == [0]
    assert loc.sample_search.method == "bisection over packed examples"
    assert loc.sample_search.examples == [{"row": 0, "example": 2, "start": 22, "end": 31}]
    f = loc.finding(step=0)
    assert f.examples == [{"row": 0, "example": 2, "start": 22, "end": 31}]
    assert has(f.evidence, "triage.samples.row_example", row=0, example=2, start=22, end=31), [
        m.data() for m in f.evidence
    ]


def test_nan_inside_a_packed_row_is_named_by_its_example(tmp_path, capfd):
    """A plain loop under `watch` feeding packed rows: the batch probe reads the row per example, so
    the non-finite data finding and its live alert name the example, not only row 0; the replay
    (triage) bisects the examples of the row and names the same one."""
    import lossdoctor

    tok = trl_kit.tokenizer(["the cat sat on a mat"])
    model = trl_kit.gpt2(tok, 64)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    mon = lossdoctor.watch(model, opt, log_dir=tmp_path / "ld", replay_fn=lambda m, b: m(**b).loss)
    for step in range(4):
        batch = _packed_embeds_batch(model, [10, 12, 9, 14, 11], nan_at=40 if step == 2 else None, seed=step)
        out = model(**batch)
        out.loss.backward()
        opt.step()
        opt.zero_grad()
        mon.step(loss=out.loss, batch=batch)
    mon.close()
    (run,) = read_run_dir(tmp_path / "ld")
    assert run.col("packed_examples").tolist() == [5.0] * 4
    assert run.event("batch_nonfinite_examples")[2] == [
        {"key": "inputs_embeds", "row": 0, "example": 3, "start": 31, "end": 45}
    ]
    (f,) = [f for f in mon.diagnose().findings if f.cause == "nonfinite_data"]
    assert f.step == 2 and f.samples == [0]
    assert {"row": 0, "example": 3, "start": 31, "end": 45} in [
        {k: e[k] for k in ("row", "example", "start", "end")} for e in f.examples
    ]
    bisection = find(f.evidence, "triage.samples.packed_examples")  # a bisection over the packed examples
    assert bisection.values["n"] == 1 and has(
        [bisection], "triage.samples.row_example", row=0, example=3, start=31, end=45
    ), bisection.data()
    (alert,) = [x for x in capfd.readouterr().err.splitlines() if "nonfinite_data" in x]
    assert "packed row 0 example 3 (tokens 31-45)" in alert
    # the reports' "where" line names the example too (text, Markdown and HTML share it)
    from lossdoctor.report.text import where

    assert "packed row 0 example 3 (tokens 31-45)" in where(f)
    assert "行 0 的第 3 个样本（token 31-45）" in where(f, "zh")


def test_per_sample_loss_of_a_packed_row_is_per_example():
    """The spike search's per-sample loss on a packed row is the loss of each example alone. The
    model has learnt to answer token 6; example 3 alone is labelled with token 7: it stands out,
    named by row, index and tokens."""
    from lossdoctor.triage.samples import per_sample_outliers

    tok = trl_kit.tokenizer(["the cat sat on a mat"])
    model = trl_kit.gpt2(tok, 64)
    lengths = [10, 12, 9, 14, 11, 13]
    batch = _packed_embeds_batch(model, lengths)
    batch["labels"][batch["labels"] != -100] = 6
    opt = torch.optim.AdamW(model.parameters(), lr=1e-2)
    for _ in range(20):
        model(**batch).loss.backward()
        opt.step()
        opt.zero_grad()
    batch["labels"][0, 32:45] = 7  # example 3 (tokens 31-45; its first label stays -100)

    def loss_of(sub):
        with torch.no_grad():
            return float(model(**sub).loss)

    res = per_sample_outliers(batch, 1, loss_of)
    assert res.method == "per-example loss (packed rows)" and res.probes == len(lengths)
    assert res.samples == [0]
    assert [(e["example"], e["start"], e["end"]) for e in res.examples] == [(3, 31, 45)]
    assert res.examples[0]["loss"] > 2 * res.median


def test_rows_are_cut_where_positions_restart_and_padding_is_not_an_example():
    from lossdoctor.signals.packing import Example, packed_examples

    # right-padded rows with position 0 on the padding: not packed (one example per row)
    padded = torch.tensor([[0, 1, 2, 3, 0, 0], [0, 1, 2, 3, 4, 5]])
    assert packed_examples({"position_ids": padded}) is None
    # a packed row then right padding: the one-token pieces are there, but are not examples of two tokens
    packed = torch.tensor([[0, 1, 2, 0, 1, 0, 0]])
    ex = packed_examples({"position_ids": packed})
    assert ex[:2] == [Example(0, 0, 0, 3), Example(0, 1, 3, 5)] and all(e.length == 1 for e in ex[2:])
    # no position_ids: the cumulative lengths of a flattened (one-row) batch
    ids = torch.zeros(1, 9, dtype=torch.long)
    cu = torch.tensor([0, 4, 9], dtype=torch.int32)
    assert packed_examples({"input_ids": ids, "cu_seq_lens_q": cu}) == [Example(0, 0, 0, 4), Example(0, 1, 4, 9)]
    assert packed_examples({"input_ids": ids, "cu_seq_lens_q": torch.tensor([0, 4, 12])}) is None  # does not fit
