"""The HF Trainer's own path with the callback added as the README shows it: the loss the Trainer
backpropagates (TRL computes its own; a subclass's `compute_loss` may too), the LR each step used,
`torch_compile=True`, and the Trainer subclasses LLaMA-Factory and Axolotl train with. Real TRL and
transformers, tiny GPT-2 from a config, a tokenizer trained here, CPU."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("trl")

import trl_kit  # noqa: E402
from lossdoctor.integrations.transformers import LossDoctorCallback  # noqa: E402
from lossdoctor.sources.rundir import read_run_dir  # noqa: E402
from msgs import has  # noqa: E402


def _sft(out_dir, *, trainer_cls=None, callback=None, steps=4, lr=1e-3, warmup_steps=1, n=64, **config):
    """TRL's SFTTrainer (or a subclass of it) on the kit's conversations; returns the trainer."""
    from datasets import Dataset
    from trl import SFTConfig, SFTTrainer

    torch.set_num_threads(1)
    convs = trl_kit.conversations(n)
    tok = trl_kit.tokenizer([m["content"] for c in convs for m in c])
    args = SFTConfig(
        output_dir=str(out_dir),
        max_steps=steps,
        per_device_train_batch_size=4,
        learning_rate=lr,
        warmup_steps=warmup_steps,
        logging_steps=1,
        max_length=64,
        save_strategy="no",
        report_to=[],
        use_cpu=True,
        disable_tqdm=True,
        dataloader_num_workers=0,
        seed=0,
        assistant_only_loss=True,
        **config,
    )
    trainer = (trainer_cls or SFTTrainer)(
        model=trl_kit.gpt2(tok, 64),
        args=args,
        train_dataset=Dataset.from_dict({"messages": convs}),
        processing_class=tok,
        callbacks=[callback] if callback else None,
    )
    trainer.train()
    return trainer


def _sft_watched(tmp_path, **kw):
    cb = LossDoctorCallback(log_dir=tmp_path / "ld")
    trainer = _sft(tmp_path / "out", callback=cb, **kw)
    (run,) = read_run_dir(tmp_path / "ld")
    return cb, trainer, run


def _ignores_num_items():
    """An SFTTrainer whose `compute_loss` drops `num_items_in_batch`, as custom losses written for
    transformers < 4.46 do: each micro-batch's loss is then its own mean, but the Trainer still
    believes the loss was divided by the step's item count and does not divide by k itself."""
    from trl import SFTTrainer

    class MeanPerMicroBatchSFT(SFTTrainer):
        def compute_loss(self, model, inputs, return_outputs=False, num_items_in_batch=None):
            return super().compute_loss(model, inputs, return_outputs=return_outputs, num_items_in_batch=None)

    return MeanPerMicroBatchSFT


# --- 1. the loss the Trainer backpropagates -------------------------------------------------------


def test_sft_trainer_accumulation_is_measured_on_the_loss_it_backpropagates(tmp_path):
    cb, trainer, run = _sft_watched(tmp_path, steps=4, gradient_accumulation_steps=2)
    assert run.col("accum_steps").tolist() == [2.0] * 4
    # TRL's own loss (sum over tokens / the step's token count) got weight 1 in backward
    assert run.col("loss_weight").tolist() == pytest.approx([1.0] * 4, abs=1e-3)
    # the per-item mean the callback reconstructs is the loss the Trainer logs
    logged = [h["loss"] for h in trainer.state.log_history if "loss" in h]
    assert run.col("loss").tolist() == pytest.approx(logged, rel=1e-4)
    report = cb.diagnose()
    assert not [n for n in report.notes if "loss_weight" in n]
    assert not [f for f in report.findings if f.cause == "grad_accum_normalization"]
    assert "compute_loss" not in vars(trainer)  # the wrapper on the instance is gone after training


def test_compute_loss_that_ignores_num_items_is_a_normalisation_fault(tmp_path):
    cb, trainer, run = _sft_watched(tmp_path, trainer_cls=_ignores_num_items(), steps=4, gradient_accumulation_steps=2)
    w = run.col("loss_weight")
    assert w.tolist() == pytest.approx([2.0] * 4, rel=0.1)  # two micro-batch means summed
    (f,) = [f for f in cb.diagnose().findings if f.cause == "grad_accum_normalization"]
    assert has(f.evidence, "accum.summed", k=2), [m.data() for m in f.evidence]
    assert any("num_items_in_batch" in str(x) for x in f.fixes)
    assert f.step == 0


def test_without_accumulation_the_check_is_quiet_for_the_same_subclass(tmp_path):
    """k=1: a micro-batch mean is the step's mean; the same subclass is healthy."""
    cb, trainer, run = _sft_watched(tmp_path, trainer_cls=_ignores_num_items(), steps=4)
    assert run.col("loss_weight").tolist() == pytest.approx([1.0] * 4, abs=1e-3)
    assert not [f for f in cb.diagnose().findings if f.cause == "grad_accum_normalization"]


def test_callback_leaves_sft_training_bit_identical(tmp_path):
    plain = _sft(tmp_path / "a", steps=3, gradient_accumulation_steps=2)
    watched = _sft(
        tmp_path / "b", steps=3, gradient_accumulation_steps=2, callback=LossDoctorCallback(log_dir=tmp_path / "ld")
    )
    a, b = plain.model.state_dict(), watched.model.state_dict()
    assert a.keys() == b.keys()
    for k in a:
        assert torch.equal(a[k], b[k]), k
    la = [h.get("loss") for h in plain.state.log_history]
    lb = [h.get("loss") for h in watched.state.log_history]
    assert la == lb


def test_trainer_whose_loss_never_reaches_backward_keeps_the_note(tmp_path):
    """A trainer that backpropagates something other than what `compute_loss` returned (its own
    `training_step`): neither loss gets a gradient, and the note says the check could not run."""
    from trl import SFTTrainer

    class OwnStep(SFTTrainer):
        def training_step(self, model, inputs, num_items_in_batch=None):
            model.train()
            inputs = self._prepare_inputs(inputs)
            out = model(**inputs, fused_lm_head=True)  # the model's loss is returned, not used
            loss = -out.log_probs.sum() / out.label_mask.sum().clamp(min=1)
            self.accelerator.backward(loss / self.current_gradient_accumulation_steps)
            return loss.detach() / self.current_gradient_accumulation_steps

    cb, trainer, run = _sft_watched(tmp_path, trainer_cls=OwnStep, steps=3, gradient_accumulation_steps=2)
    report = cb.diagnose()
    assert has(report.notes, "integrations.loss_not_backpropagated", trainer="OwnStep"), report.notes
    assert not [f for f in report.findings if f.cause == "grad_accum_normalization"]


# --- 2. the LR each step used, and the fixes of a run that already clips ----------------------------


@pytest.fixture(scope="module")
def lr_one(tmp_path_factory):
    """SFT at LR 1.0 with a 5-step warm-up, the Trainer clipping at 1.0 (its default): lr_too_high."""
    tmp = tmp_path_factory.mktemp("lr1")
    cb = LossDoctorCallback(log_dir=tmp / "ld")
    trainer = _sft(tmp / "out", callback=cb, steps=20, lr=1.0, warmup_steps=5)
    state = tmp / "trainer_state.json"
    trainer.state.save_to_json(str(state))
    (run,) = read_run_dir(tmp / "ld")
    return cb, trainer, run, state


def test_lr_recorded_for_a_step_is_the_lr_that_step_used(lr_one):
    """The HF scheduler steps after the optimizer: the LR in param_groups at the step's end is the
    next step's. The record of optimizer step s (0-based) carries what the Trainer logs for its
    global step s+1, the LR that update used: 0 for the first, 1.0 first at the sixth."""
    cb, trainer, run, _ = lr_one
    logged = [h["learning_rate"] for h in trainer.state.log_history if "learning_rate" in h]
    assert run.col("lr").tolist() == pytest.approx(logged)
    assert run.col("lr")[0] == 0.0 and run.col("lr")[5] == 1.0 and run.col("lr")[4] < 1.0


def _lr_finding(report):
    (f,) = [f for f in report.findings if f.cause == "lr_too_high"]
    return f


def test_lr_finding_names_the_peak_lr_and_the_step_the_climb_began(lr_one):
    cb, trainer, run, _ = lr_one
    f = _lr_finding(cb.diagnose())
    loss, first = run.col("loss"), run.col("loss")[0]
    onset = next(i for i in range(1, len(loss)) if all(loss[i : i + 2] >= 1.5 * first))
    assert f.step == onset, (f.step, loss[:6].tolist())
    assert has(f.evidence, "lr.high.peak_at", lr=1.0, s=5), [m.data() for m in f.evidence]
    assert [x for x in f.fixes if x.kind in ("lr", "lr_range") and x.params.get("lr_now") == 1.0], [
        x.data() for x in f.fixes
    ]  # the LR it names is the peak, now 1
    # the Trainer clips at 1.0: no fix tells the run to clip at 1.0 again
    assert run.meta["max_grad_norm"] == 1.0
    assert not [x for x in f.fixes if x.kind == "clip" or x.key == "lr.fix.warmup_clip"], [x.data() for x in f.fixes]
    assert [
        x
        for x in f.fixes
        if x.key in ("grad.fix_already_clipped", "grad.fix_clip_tighter", "lr.fix_warmup_already_clipped")
        and 1.0 in (x.values.get("clip"), x.values.get("max_norm"))
    ], [x.data() for x in f.fixes]


def test_offline_trainer_state_names_the_same_lr_at_the_trainers_own_step(lr_one):
    """trainer_state.json numbers steps as the Trainer does (global_step: the first update is step
    1): the same finding, one step later in that numbering, same LR."""
    from lossdoctor.detectors.engine import diagnose_runs
    from lossdoctor.sources import load_path

    cb, trainer, run, state = lr_one
    live = _lr_finding(cb.diagnose())
    (f,) = [f for f in diagnose_runs(load_path(state)).findings if f.cause == "lr_too_high"]
    assert f.step == live.step + 1
    assert has(f.evidence, "lr.high.peak_at", lr=1.0, s=6), [m.data() for m in f.evidence]
    assert [x for x in f.fixes if x.kind in ("lr", "lr_range") and x.params.get("lr_now") == 1.0], [
        x.data() for x in f.fixes
    ]  # the LR it names is the peak, now 1


@pytest.mark.parametrize("clip", [None, 1.0, 100.0])
def test_gradient_clipping_fixes_know_the_run_already_clips(clip):
    """The grad-explosion fixes (short log and surge rules) with and without a clip threshold in the
    run's metadata (where the log readers and the callbacks put max_grad_norm)."""
    import numpy as np

    from lossdoctor.detectors.engine import diagnose_runs
    from lossdoctor.records import from_columns

    steps = np.arange(6)
    cols = {"loss": [2.2, 2.3, 2.6, 3.4, 4.4, 5.1], "grad_norm": [0.24, 1.9, 15, 120, 480, 960], "lr": [1e-3] * 6}
    meta = {"max_grad_norm": clip} if clip else {}
    (f,) = [f for f in diagnose_runs([from_columns(steps, cols, meta=meta)]).findings if f.cause == "grad_explosion"]
    data = [x.data() for x in f.fixes]
    if clip is None:
        assert [x for x in f.fixes if x.kind == "clip"], data  # clip gradients: clip_grad_norm_(..., max_norm=...)
    else:
        assert not [x for x in f.fixes if x.kind == "clip"], data
        assert [
            x
            for x in f.fixes
            if x.key in ("grad.fix_already_clipped", "grad.fix_clip_tighter", "lr.fix_warmup_already_clipped")
            and x.values.get("clip") == clip
        ], data


# --- 3. Trainer(torch_compile=True) ------------------------------------------------------------------


def _compiled_trainer(out_dir, callback=None):
    """A plain Trainer on a causal LM with `torch_compile=True`. The backend is aot_eager: dynamo
    traces the model and its hooks exactly as with inductor (where the callback's hooks matter), and
    AOT autograd builds the backward; only inductor's code generation (minutes on a small CPU) is
    left out."""
    import torch._dynamo
    from datasets import Dataset
    from torch._dynamo.utils import counters
    from transformers import Trainer, TrainingArguments

    torch.set_num_threads(1)
    torch._dynamo.reset()
    counters.clear()
    texts = [" ".join(m["content"] for m in c) for c in trl_kit.conversations(32)]
    tok = trl_kit.tokenizer(texts)
    enc = tok(texts, truncation=True, max_length=16, padding="max_length")
    ds = Dataset.from_dict(
        {"input_ids": enc["input_ids"], "attention_mask": enc["attention_mask"], "labels": enc["input_ids"]}
    )
    args = TrainingArguments(
        output_dir=str(out_dir),
        max_steps=4,
        per_device_train_batch_size=4,
        gradient_accumulation_steps=2,
        learning_rate=1e-3,
        logging_steps=1,
        save_strategy="no",
        report_to=[],
        use_cpu=True,
        disable_tqdm=True,
        seed=0,
        torch_compile=True,
        torch_compile_backend="aot_eager",
    )
    trainer = Trainer(
        model=trl_kit.gpt2(tok, 16), args=args, train_dataset=ds, callbacks=[callback] if callback is not None else None
    )
    with torch._dynamo.config.patch(error_on_recompile=True):  # the callback must not cause one
        trainer.train()
    return trainer, counters["stats"]["unique_graphs"]


@pytest.mark.slow  # two HF Trainer runs, one compiled (~9 s)
def test_torch_compile_trainer_with_the_callback_trains_identically(tmp_path):
    pytest.importorskip("torch._dynamo")
    plain, graphs_plain = _compiled_trainer(tmp_path / "a")
    cb = LossDoctorCallback(log_dir=tmp_path / "ld")
    watched, graphs_watched = _compiled_trainer(tmp_path / "b", cb)
    assert type(watched.model_wrapped).__name__ == "OptimizedModule"  # it really ran compiled
    assert graphs_watched == graphs_plain  # no extra graphs or recompilations from the hooks
    a, b = plain.model.state_dict(), watched.model.state_dict()
    assert all(torch.equal(a[k], b[k]) for k in a)
    (run,) = read_run_dir(tmp_path / "ld")
    logged = [h["loss"] for h in watched.state.log_history if "loss" in h]
    assert run.col("loss").tolist() == pytest.approx(logged, rel=1e-4)
    assert run.col("loss_weight").tolist() == pytest.approx([1.0] * 4, abs=1e-3)
    assert cb.monitor.closed and not [n for n in cb.diagnose().notes if "disabled" in n.lower()]


# --- 4. the Trainer subclasses LLaMA-Factory and Axolotl train with -----------------------------------


def _llamafactory_sft(out_dir, *, callback, train_on_prompt=False, steps=8):
    """LLaMA-Factory's SFT stage, built here: its `CustomSeq2SeqTrainer` is a `Seq2SeqTrainer`
    subclass whose `compute_loss` calls the parent's, defined in `llamafactory.train.sft.trainer`;
    its supervised preprocessing masks the prompt with -100 unless `train_on_prompt`, and its
    collator is `DataCollatorForSeq2Seq` (labels padded with -100). A causal LM, as it trains."""
    from datasets import Dataset
    from transformers import DataCollatorForSeq2Seq, Seq2SeqTrainer, Seq2SeqTrainingArguments

    class CustomSeq2SeqTrainer(Seq2SeqTrainer):
        def compute_loss(self, model, inputs, *args, **kwargs):
            return super().compute_loss(model, inputs, *args, **kwargs)

    CustomSeq2SeqTrainer.__module__ = "llamafactory.train.sft.trainer"

    torch.set_num_threads(1)
    convs = trl_kit.conversations(64)
    tok = trl_kit.tokenizer([m["content"] for c in convs for m in c])
    rows = {"input_ids": [], "attention_mask": [], "labels": []}
    for c in convs:
        prompt = tok.apply_chat_template(c[:1], tokenize=True, add_generation_prompt=True, return_dict=False)
        full = tok.apply_chat_template(c, tokenize=True, return_dict=False)
        ids = list(full)[:64]
        labels = list(ids) if train_on_prompt else [-100] * len(prompt) + ids[len(prompt) :]
        rows["input_ids"].append(ids)
        rows["attention_mask"].append([1] * len(ids))
        rows["labels"].append(labels[:64])
    args = Seq2SeqTrainingArguments(
        output_dir=str(out_dir),
        max_steps=steps,
        per_device_train_batch_size=4,
        gradient_accumulation_steps=2,
        learning_rate=1e-3,
        warmup_steps=1,
        logging_steps=1,
        save_strategy="no",
        report_to=[],
        use_cpu=True,
        disable_tqdm=True,
        dataloader_num_workers=0,
        seed=0,
    )
    trainer = CustomSeq2SeqTrainer(
        model=trl_kit.gpt2(tok, 64),
        args=args,
        train_dataset=Dataset.from_dict(rows),
        data_collator=DataCollatorForSeq2Seq(tok, label_pad_token_id=-100),
        processing_class=tok,
        callbacks=[callback],
    )
    trainer.train()
    return trainer


def test_llamafactory_style_sft_trainer_healthy(tmp_path):
    cb = LossDoctorCallback(log_dir=tmp_path / "ld")  # what run_exp(args, callbacks=[...]) hands on
    trainer = _llamafactory_sft(tmp_path / "out", callback=cb)
    (run,) = read_run_dir(tmp_path / "ld")
    assert run.meta["task"] == "sft" and run.meta["framework"]["trainer"] == "CustomSeq2SeqTrainer"
    assert run.col("loss_weight").tolist() == pytest.approx([1.0] * 8, abs=1e-3)
    logged = [h["loss"] for h in trainer.state.log_history if "loss" in h]
    assert run.col("loss").tolist() == pytest.approx(logged, rel=1e-4)
    report = cb.diagnose()
    assert report.status == "healthy", [f.to_dict() for f in report.findings]


def test_llamafactory_style_train_on_prompt_is_a_label_mask_leak(tmp_path):
    cb = LossDoctorCallback(log_dir=tmp_path / "ld")
    _llamafactory_sft(tmp_path / "out", callback=cb, train_on_prompt=True)
    (leak,) = [f for f in cb.diagnose().findings if f.cause == "label_mask_leak"]
    assert leak.severity == "warning" and leak.evidence[0].key == "plabels.prompt_supervised", leak.evidence[0].data()


def test_backpropagated_loss_pairs_with_the_models_only_up_to_a_normalisation():
    """Which trainer losses the accumulation weight may be measured on: the model's loss itself,
    over k, its tokens over the step's (TRL), over the count the Trainer passed (every rank's
    tokens) times the processes; not a DPO-like loss."""
    from lossdoctor.integrations.microbatch import objective_is_model_loss

    m, n = [2.0, 3.0], [30.0, 10.0]
    assert objective_is_model_loss([2.0, 3.0], m, n)
    assert objective_is_model_loss([1.0, 1.5], m, n)  # each / k
    assert objective_is_model_loss([2.0 * 30 / 40, 3.0 * 10 / 40], m, n)  # sum / the step's tokens
    # DDP, 2 ranks: divided by both ranks' 100 tokens, multiplied by 2
    assert objective_is_model_loss([2 * 2.0 * 30 / 100, 2 * 3.0 * 10 / 100], m, n, 2, num_items=[100, 100])
    assert not objective_is_model_loss([2 * 2.0 * 30 / 100, 2 * 3.0 * 10 / 100], m, n, 2)
    assert not objective_is_model_loss([0.69, 0.71], m, n)  # a DPO loss
    assert not objective_is_model_loss([2.0, float("nan")], m, n)
