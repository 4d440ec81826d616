"""HF Trainer callback: a real `transformers.Trainer` training a GPT-2 built from a config."""

from __future__ import annotations

import math

import pytest

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

from transformers import GPT2Config, GPT2LMHeadModel, Trainer, TrainingArguments  # noqa: E402

from lossdoctor.integrations.transformers import LossDoctorCallback  # noqa: E402
from lossdoctor.sources.rundir import read_run_dir  # noqa: E402
from msgs import has  # noqa: E402

VOCAB, SEQ = 64, 16


class TokenData(torch.utils.data.Dataset):
    """Random token rows; `mask` says which label positions are ignored (-100)."""

    def __init__(self, n: int, mask: str = "prompt") -> None:
        self.n, self.mask = n, mask

    def __len__(self) -> int:
        return self.n

    def __getitem__(self, i: int) -> dict:
        g = torch.Generator().manual_seed(i)
        ids = torch.randint(0, VOCAB, (SEQ,), generator=g)
        labels = ids.clone()
        if self.mask == "all":
            labels[:] = -100
        elif self.mask == "prompt":
            labels[: 3 + i % 5] = -100  # a prompt of 3-7 tokens, answer supervised
        return {"input_ids": ids, "attention_mask": torch.ones(SEQ, dtype=torch.long), "labels": labels}


def gpt2() -> GPT2LMHeadModel:
    torch.manual_seed(0)
    cfg = GPT2Config(n_layer=2, n_embd=32, n_head=2, vocab_size=VOCAB, n_positions=SEQ, bos_token_id=0, eos_token_id=0)
    return GPT2LMHeadModel(cfg)


def train(tmp_path, *, mask="prompt", accum=1, steps=8, trainer_cls=Trainer, lr=1e-3):
    cb = LossDoctorCallback(log_dir=tmp_path / "ld", alerts=False)
    args = TrainingArguments(
        output_dir=str(tmp_path / "out"),
        per_device_train_batch_size=4,
        gradient_accumulation_steps=accum,
        max_steps=steps,
        learning_rate=lr,
        max_grad_norm=1.0,
        logging_steps=1,
        save_strategy="no",
        report_to=[],
        use_cpu=True,
        disable_tqdm=True,
        dataloader_num_workers=0,
    )
    trainer = trainer_cls(model=gpt2(), args=args, train_dataset=TokenData(64, mask), callbacks=[cb])
    trainer.train()
    (run,) = read_run_dir(tmp_path / "ld")
    return cb, trainer, run


def test_all_masked_labels_is_label_mask_empty(tmp_path):
    cb, trainer, run = train(tmp_path, mask="all", steps=6)
    # the callback fed the batch: every label position ignored, every sample empty
    assert run.col("label_ignored_frac").tolist() == [1.0] * len(run)
    assert run.col("label_empty_samples").tolist() == [4.0] * len(run)
    # the Trainer's own log hides it (its NaN filter); the record keeps the NaN loss
    assert all(h["loss"] == 0.0 for h in trainer.state.log_history if "loss" in h and "train_loss" not in h)
    assert not math.isfinite(run.col("loss")[0])
    report = cb.diagnose()
    assert report.primary is not None and report.primary.cause == "label_mask_empty"
    assert report.primary.step == 0


def test_healthy_run_matches_the_trainer_and_is_quiet(tmp_path):
    cb, trainer, run = train(tmp_path, accum=2, steps=8)
    logged = [h for h in trainer.state.log_history if "loss" in h and "grad_norm" in h]
    assert len(logged) == len(run) == 8
    # one record per optimizer step, with the micro-batches joined
    assert run.col("accum_steps").tolist() == [2.0] * 8
    assert run.col("batch_size").tolist() == [8.0] * 8
    # the same loss and pre-clip gradient norm as the Trainer computes for itself
    for i, h in enumerate(logged):
        assert run.col("loss")[i] == pytest.approx(h["loss"], rel=1e-5)
        assert run.col("grad_norm")[i] == pytest.approx(h["grad_norm"], rel=1e-4)
    assert run.col("loss_weight").tolist() == pytest.approx([1.0] * 8, abs=1e-3)
    # the LR after each step is the linear schedule's (decay to 0 over 8 steps)
    # the LR each step's update used (the Trainer steps its scheduler after the optimizer)
    assert run.col("lr").tolist() == pytest.approx([1e-3 * (8 - i) / 8 for i in range(8)])
    report = cb.diagnose()
    assert report.status == "healthy", [f.to_dict() for f in report.findings]
    # the Trainer backpropagated the model's own loss: no "check could not run" note
    assert not [n for n in report.notes if "loss_weight" in n]


class SummingTrainer(Trainer):
    """The accumulation bug of transformers PR #34191's follow-ups (TRL's CPO trainer): a custom
    compute_loss ignores num_items_in_batch and returns a per-micro-batch mean, while the Trainer,
    seeing a model that accepts loss kwargs, assumes the loss is already normalised over the step
    and skips its division by gradient_accumulation_steps."""

    def compute_loss(self, model, inputs, return_outputs=False, num_items_in_batch=None):
        out = model(input_ids=inputs["input_ids"], labels=inputs["labels"])
        return (out.loss, out) if return_outputs else out.loss


def test_accumulation_normalisation_bug_is_found(tmp_path):
    cb, trainer, run = train(tmp_path, accum=4, steps=5, trainer_cls=SummingTrainer)
    logged = [h["loss"] for h in trainer.state.log_history if "loss" in h and "grad_norm" in h]
    # the bug is real: the Trainer's logged loss is the sum of the 4 micro-batch means
    assert logged[0] == pytest.approx(4 * run.col("loss")[0], rel=1e-4)
    assert run.col("loss_weight").tolist() == pytest.approx([4.0] * 5, rel=1e-3)
    report = cb.diagnose()
    (f,) = [f for f in report.findings if f.cause == "grad_accum_normalization"]
    assert f.severity == "warning" and f.step == 0
    assert has(f.evidence, "accum.summed", k=4), [m.data() for m in f.evidence]


def test_evaluation_between_steps_is_not_recorded(tmp_path):
    cb = LossDoctorCallback(log_dir=tmp_path / "ld", alerts=False)
    args = TrainingArguments(
        output_dir=str(tmp_path / "out"),
        per_device_train_batch_size=4,
        per_device_eval_batch_size=4,
        max_steps=4,
        eval_strategy="steps",
        eval_steps=2,
        save_strategy="no",
        report_to=[],
        use_cpu=True,
        disable_tqdm=True,
    )
    trainer = Trainer(
        model=gpt2(), args=args, train_dataset=TokenData(32), eval_dataset=TokenData(12, mask="all"), callbacks=[cb]
    )
    trainer.train()
    (run,) = read_run_dir(tmp_path / "ld")
    assert len(run) == 4
    # evaluation batches were all-masked: none of them leaked into the training records
    assert float(run.col("label_ignored_frac").max()) < 1.0
    assert cb.monitor.closed
