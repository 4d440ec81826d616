"""TRL's real trainers with the HF callback added exactly as the README shows it
(`callbacks=[LossDoctorCallback(log_dir=...)]`, no task, no tokenizer): tiny GPT-2 from a config, a
tokenizer trained here with a chat template, CPU. What the trainer knows (SFT, its tokenizer, its
label settings, its clipping) must reach the checks."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("trl")

import trl_kit  # noqa: E402
from lossdoctor.integrations.transformers import LossDoctorCallback, trainer_task  # noqa: E402
from lossdoctor.sources.rundir import read_run_dir  # noqa: E402
from msgs import find, has  # noqa: E402


def _sft(tmp_path, **config):
    cb = LossDoctorCallback(log_dir=tmp_path / "ld")
    trainer = trl_kit.sft(tmp_path / "out", callback=cb, **config)
    (run,) = read_run_dir(tmp_path / "ld")
    return cb, trainer, run


def test_unmasked_prompt_in_sft_trainer_is_a_label_mask_leak(tmp_path):
    cb, trainer, run = _sft(tmp_path, assistant_only_loss=False)
    # the callback learned the task and the label settings from the trainer
    assert run.meta["task"] == "sft"
    fw = run.meta["framework"]
    assert fw["trainer"] == "SFTTrainer" and fw["assistant_only_loss"] is False
    assert fw["max_length"] == 64 and fw["packing"] is False and fw["max_grad_norm"] == 1.0
    assert fw["trl_version"] == __import__("trl").__version__
    report = cb.diagnose()
    (leak,) = [f for f in report.findings if f.cause == "label_mask_leak"]
    assert leak.severity == "warning" and leak.confidence >= 0.9
    # the prompt boundary came from the trainer's tokenizer's chat template
    assert has(leak.evidence[:1], "plabels.prompt_supervised", pct="100%"), leak.evidence[0].data()
    assert any("<|user|>" in m.values["text"] for m in leak.evidence[1:] if m.key == "plabels.supervised_text")
    # the fix names the options of the TRL that runs, with what this run set them to
    assert not has(leak.fixes, "plabels.fix_mask_prompt_trl_collator")  # not the collator of TRL < 0.20
    trl_fix = find(leak.fixes, "plabels.fix_mask_prompt_trl")
    assert {k: trl_fix.values[k] for k in ("version", "assistant", "completion")} == {
        "version": fw["trl_version"],
        "assistant": "False",
        "completion": "None",
    }, trl_fix.data()
    zh = [x.render("zh") for x in leak.fixes if hasattr(x, "render")]
    assert any("assistant_only_loss=True" in x and "这次训练" in x for x in zh)


def test_sft_trainer_masking_the_prompt_is_clean(tmp_path):
    cb, trainer, run = _sft(tmp_path, assistant_only_loss=True)
    assert run.meta["framework"]["assistant_only_loss"] is True
    report = cb.diagnose()
    assert not [f for f in report.findings if f.cause.startswith("label_mask")], [f.to_dict() for f in report.findings]
    assert report.status == "healthy", [f.to_dict() for f in report.findings]


def test_trainer_task_from_class_and_config():
    from transformers import Trainer, TrainingArguments
    from trl import DPOConfig, DPOTrainer, SFTConfig, SFTTrainer

    class MySFT(SFTTrainer):  # a subclass (LLaMA-Factory style) keeps the task
        def __init__(self):
            pass

    class MyDPO(DPOTrainer):
        def __init__(self):
            pass

    plain = Trainer.__new__(Trainer)
    assert trainer_task(MySFT(), None) == "sft"
    assert trainer_task(MyDPO(), None) == "preference"
    assert trainer_task(plain, TrainingArguments(output_dir="x", use_cpu=True, report_to=[])) is None
    assert trainer_task(plain, SFTConfig(output_dir="x", use_cpu=True, report_to=[])) == "sft"
    assert trainer_task(plain, DPOConfig(output_dir="x", use_cpu=True, report_to=[])) == "preference"


def test_mask_prompt_fix_names_the_installed_trl_option():
    from lossdoctor.preflight.labels import mask_prompt_fix

    new = mask_prompt_fix({"trl_version": "1.16.0", "assistant_only_loss": False}, '"<|assistant|>"')
    assert "assistant_only_loss=True" in new and "DataCollatorForCompletionOnlyLM" not in new
    old = mask_prompt_fix({"trl_version": "0.19.1"}, '"<|assistant|>"')
    assert 'DataCollatorForCompletionOnlyLM(response_template="<|assistant|>")' in old
    plain = mask_prompt_fix({"name": "transformers"}, '"<|assistant|>"')
    assert plain.key == "plabels.fix_mask_prompt" and "-100" in plain


@pytest.mark.parametrize("max_grad_norm", [1.0, 0.0])
def test_lr_fix_knows_the_trainer_already_clips(tmp_path, max_grad_norm):
    """LR 1.0 with a warm-up: lr_too_high. With the Trainer clipping at 1.0 (its default) the fix
    must not tell the user to clip at 1.0; with clipping off (max_grad_norm=0) it may."""
    cb, trainer, run = _sft(
        tmp_path, assistant_only_loss=True, lr=1.0, steps=20, warmup_steps=5, max_grad_norm=max_grad_norm
    )
    assert run.meta.get("max_grad_norm") == (1.0 if max_grad_norm else None)
    (f,) = [f for f in cb.diagnose().findings if f.cause == "lr_too_high"]
    data = [x.data() for x in f.fixes]
    if max_grad_norm:
        assert not has(f.fixes, "lr.fix.warmup_clip"), data  # not "clip gradients (max_norm=1.0)"
        assert has(f.fixes, "lr.fix_warmup_already_clipped", max_norm=1.0), data
    else:
        assert has(f.fixes, "lr.fix.warmup_clip") and not has(f.fixes, "lr.fix_warmup_already_clipped"), data


def test_accumulation_check_runs_on_the_loss_sft_trainer_backpropagates(tmp_path):
    """SFTTrainer differentiates the loss it computes itself, never the model's outputs.loss: the
    callback measures the weight on what `compute_loss` returned (tests/test_trl_trainer_path.py has
    the fault and the note for a trainer where even that cannot be seen)."""
    cb, trainer, run = _sft(tmp_path, assistant_only_loss=True, steps=4, gradient_accumulation_steps=2)
    assert run.col("accum_steps").tolist() == [2.0] * 4
    assert run.col("loss_weight").tolist() == pytest.approx([1.0] * 4, abs=1e-3)
    report = cb.diagnose()
    assert not [n for n in report.notes if "loss_weight" in n]
    assert not [f for f in report.findings if f.cause == "grad_accum_normalization"]


def test_dpo_trainer_is_preference_training_and_healthy(tmp_path):
    cb = LossDoctorCallback(log_dir=tmp_path / "ld")
    trl_kit.dpo(tmp_path / "out", callback=cb, steps=4, warmup_steps=1)
    (run,) = read_run_dir(tmp_path / "ld")
    assert run.meta["task"] == "preference" and run.meta["framework"]["trainer"] == "DPOTrainer"
    assert run.meta["framework"]["max_length"] == 64
    report = cb.diagnose()
    assert not [f for f in report.findings if f.severity != "info"], [f.to_dict() for f in report.findings]
    # DPO's loss is TRL's own: the accumulation check says it could not run
    assert has(report.notes, "integrations.loss_not_backpropagated", trainer="DPOTrainer"), report.notes
