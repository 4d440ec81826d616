"""Events in a log's text become records at their step, with their values, and the differential
uses them as evidence (sources/text_events.py, detectors/log_events.py, the event rows of
detectors/differential.py, detectors/precision.py's minimum-scale finding).

Each line is the real message of the tool that prints it, copied from the file cited beside it;
the anomaly-mode line is produced here by torch itself, on a real attention whose backward returns
NaN. The whole logs are read by the real readers (`lossdoctor.sources.load_path`) and diagnosed by
the engine."""

from __future__ import annotations

import math

import pytest
import torch
from torch import nn

from lossdoctor.detectors.differential import TABLES
from lossdoctor.detectors.engine import diagnose_runs
from lossdoctor.records import TEXT_EVENT_KINDS
from lossdoctor.sources import load_path
from lossdoctor.sources.text_events import RULES, Events, read


def _read(tmp_path, text, name="train.log"):
    p = tmp_path / name
    p.write_text(text, encoding="utf-8")
    runs = load_path(p)
    assert len(runs) == 1
    return runs[0]


def _events(run, kind):
    return sorted(
        ((s, e) for s, v in run.event("text_events").items() for e in v if e["kind"] == kind), key=lambda se: se[0]
    )


def _keys(msgs):
    return [getattr(m, "key", None) for m in msgs]


def _alarms(report):
    return [f for f in report.findings if f.severity in ("warning", "critical")]


def _hf(step, loss, **extra):
    """transformers Trainer's console dict (trainer.py `self.log`, printed by ProgressCallback)."""
    d = {
        "loss": loss,
        "grad_norm": extra.pop("grad_norm", 1.1),
        "learning_rate": extra.pop("lr", 2e-5),
        "epoch": round(step / 1000, 3),
    }
    return repr(d) + "\n"


# ------------------------------------------------------------------ the table, line by line

LINES = [
    # (line, kind, values the record carries) -- the source of each line in the comment beside it
    # deepspeed/runtime/fp16/loss_scaler.py DynamicLossScaler.update_scale
    (
        "[2023-06-07 22:16:00,018] [INFO] [loss_scaler.py:181:update_scale] [deepspeed] OVERFLOW! Rank 0 Skipping "
        "step. Attempted loss scale: 65536, reducing to 32768",
        "overflow",
        {"scale": 32768.0, "attempted": 65536.0, "scaler": "deepspeed"},
    ),
    (
        "[deepspeed] OVERFLOW! Rank 0 Skipping step. Attempted loss scale: 1, but hysteresis is 2. Reducing "
        "hysteresis to 1",
        "overflow",
        {"scale": 1.0, "scaler": "deepspeed"},
    ),
    # apex/amp/scaler.py LossScaler.update_scale
    (
        "Gradient overflow.  Skipping step, loss scaler 0 reducing loss scale to 0.5",
        "overflow",
        {"scale": 0.5, "scaler": None},
    ),
    # fairseq/trainer.py train_step (OverflowError from fairseq/optim/dynamic_loss_scaler.py)
    (
        "2024-02-29 07:58:54 | INFO | fairseq.trainer | NOTE: gradient overflow detected, ignoring gradient, "
        "setting loss scale to: 64.0",
        "overflow",
        {"scale": 64.0},
    ),
    ("| WARNING: overflow detected, setting loss scale to: 0.25", "overflow", {"scale": 0.25}),
    # deepspeed/runtime/fp16/fused_optimizer.py (older releases): names its iteration
    ("Grad overflow on iteration 1234", "overflow", {"step": 1234}),
    # fairseq/optim/dynamic_loss_scaler.py check_overflow
    (
        "FloatingPointError: Minimum loss scale reached (0.0001). Your loss is probably exploding. Try lowering the "
        "learning rate, using gradient clipping or increasing the batch size.",
        "loss_scale_min",
        {"scale": 0.0001},
    ),
    # deepspeed/runtime/fp16/loss_scaler.py
    (
        "Exception: Current loss scale already at minimum - cannot decrease scale anymore. Exiting run.",
        "loss_scale_min",
        {},
    ),
    # Megatron-LM megatron/training/training.py training_log (a wrapped line)
    ("number of skipped iterations:   2 | number of nan iterations:   0", "skip_count", {"count": 2}),
    ("number of skipped iterations:   0 | number of nan iterations:   3", "nonfinite_loss", {"count": 3}),
    # torch/csrc/autograd/engine.cpp (anomaly mode): the message torch raises, see the test below
    (
        "RuntimeError: Function 'SoftmaxBackward0' returned nan values in its 0th output.",
        "anomaly_op",
        {"op": "SoftmaxBackward0", "value": "nan", "output": 0},
    ),
    # TRL trl/trainer/utils.py DataCollatorForCompletionOnlyLM.torch_call
    (
        "UserWarning: Could not find response key `### Answer:` in the following instance: Q: hi. This instance "
        "will be ignored in loss calculation. Note, if this happens often, consider increasing the `max_seq_length`.",
        "labels_ignored",
        {},
    ),
    # unsloth_zoo/training_utils.py (train_on_responses_only's check)
    (
        "ZeroDivisionError: Unsloth: All labels in your dataset are -100. Training losses will be all 0.",
        "labels_ignored",
        {},
    ),
    # FastChat fastchat/train/train.py preprocess: the sample's targets are all set to IGNORE_TOKEN_ID
    ("WARNING: tokenization mismatch: 12 vs. 45. #turn = 1. (ignored)", "labels_ignored", {}),
    # transformers tokenization_utils_base.py _eventual_warn_about_too_long_sequence
    (
        "Token indices sequence length is longer than the specified maximum sequence length for this model "
        "(1200 > 1024). Running this sequence through the model will result in indexing errors",
        "truncation",
        {},
    ),
    # torch c10/cuda/CUDACachingAllocator.cpp
    (
        "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 20.00 MiB (GPU 0; 79.15 GiB total capacity)",
        "oom",
        {},
    ),
    # torch/csrc/distributed/c10d/ProcessGroupNCCL.cpp
    (
        "[E ProcessGroupNCCL.cpp:475] [Rank 1] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=5, "
        "OpType=ALLREDUCE) ran for 1800000 milliseconds before timing out.",
        "nccl_error",
        {},
    ),
    # the CUDA runtime's and the NVIDIA driver's hardware faults
    ("RuntimeError: CUDA error: uncorrectable ECC error encountered", "hardware_error", {}),
    ("NVRM: Xid (PCI:0000:3b:00): 79, pid=1234, GPU has fallen off the bus.", "hardware_error", {}),
    # transformers trainer.py _inner_training_loop / _load_from_checkpoint
    ("  Continuing training from checkpoint, will skip to saved global_step", "resume", {}),
    ("Loading model from out/checkpoint-500.", "resume", {"from_step": 500}),
    # the DETR / DeiT / MAE engines (engine.py train_one_epoch)
    ("Loss is nan, stopping training", "nonfinite_loss", {"value": "nan"}),
    # ultralytics engine/trainer.py
    ("WARNING ⚠️ non-finite loss, ending training", "nonfinite_loss", {}),
    # detectron2 engine/train_loop.py _write_metrics
    ("FloatingPointError: Loss became infinite or NaN at iteration=27!", "nonfinite_loss", {"step": 27}),
    ("grad norm is nan", "nonfinite_grad", {"value": "nan"}),
    ("found inf/nan in gradients, skipping update", "nonfinite_grad", {}),
    # scikit-learn utils/validation.py _assert_all_finite (a feature pipeline before the model)
    ("ValueError: Input contains NaN, infinity or a value too large for dtype('float32').", "nonfinite_input", {}),
    # torch/utils/tensorboard/summary.py: about a logged value, not the data
    ("Warning: NaN or Inf found in input tensor.", "nonfinite_warning", {}),
    # keras/src/backend/tensorflow/nn.py categorical_crossentropy (and the sparse and binary ones, `Sigmoid`)
    (
        'UserWarning: "`categorical_crossentropy` received `from_logits=True`, but the `output` argument was '
        'produced by a Softmax activation and thus does not represent logits. Was this intended?"',
        "bug_warning",
        {"cause": "softmax_before_loss"},
    ),
    # tensorflow/python/keras/optimizer_v2/utils.py filter_empty_gradients
    (
        "WARNING:tensorflow:Gradients do not exist for variables ['dense_1/kernel:0', 'dense_1/bias:0'] when "
        "minimizing the loss. If you're using `model.compile()`, did you forget to provide a `loss` argument?",
        "bug_warning",
        {"cause": "frozen_model"},
    ),
    # torch/utils/checkpoint.py CheckpointFunction (reentrant checkpointing of a block whose inputs need no grad)
    (
        "UserWarning: None of the inputs have requires_grad=True. Gradients will be None",
        "bug_warning",
        {"cause": "frozen_model"},
    ),
    # peft/peft_model.py print_trainable_parameters
    (
        "trainable params: 0 || all params: 6,742,609,920 || trainable%: 0.0000",
        "bug_warning",
        {"cause": "frozen_model"},
    ),
    # lightning/pytorch/loops/optimization/automatic.py (a training_step that forgot `return loss`)
    (
        "UserWarning: `training_step` returned `None`. If this was on purpose, ignore this warning...",
        "bug_warning",
        {"cause": "frozen_model"},
    ),
]


@pytest.mark.parametrize("line,kind,values", LINES, ids=[f"{i}-{k}" for i, (_, k, _) in enumerate(LINES)])
def test_each_real_line_is_its_kind_with_its_values(line, kind, values):
    got = read(line)
    assert got is not None and got[0] == kind, got
    for k, v in values.items():
        assert got[1].get(k) == v, (k, got[1])


@pytest.mark.parametrize(
    "line",
    [
        "| epoch 001 | loss 9.000 | nll_loss 8.000 | oom 0.000 | loss_scale 128 | wall 100",  # fairseq's oom counter
        "number of skipped iterations:   0 | number of nan iterations:   0",  # Megatron: nothing happened
        "iteration 100: loss 2.31",
        "trainable params: 4,194,304 || all params: 6,742,609,920 || trainable%: 0.0622",  # PEFT: LoRA trains
    ],
)
def test_lines_that_say_nothing_happened_are_no_event(line):
    got = read(line)
    assert got is None or got[0] not in ("oom", "skip_count", "nonfinite_loss"), got


def test_the_rules_are_data_every_kind_has_a_rule_and_a_source():
    kinds = {r.kind for r in RULES}
    assert kinds == set(TEXT_EVENT_KINDS)
    assert all(r.source for r in RULES)
    # every event row of the differential names evidence that exists
    assert any(r.evidence == "scale_floor" for r in TABLES["nonfinite"])


def test_a_warning_printed_across_lines_is_one_event():
    """TRL prints the instance between `Could not find response key` and `This instance will be
    ignored in loss calculation`: one event."""
    ev = Events()
    ev.scan(1, "UserWarning: Could not find response key `### Answer:` in the following instance: Q: a", 3)
    ev.scan(2, "multi-line instance text", 3)
    ev.scan(3, "This instance will be ignored in loss calculation. Note, if this happens often, consider", 3)
    assert [k for _, k, _, _ in ev.items] == ["labels_ignored"]


def test_a_value_past_the_cut_text_is_kept():
    """DeepSpeed's overflow line with its timestamp is longer than the 120 characters kept: the scale
    at its end is read from the whole line."""
    ev = Events()
    line = (
        "[2023-06-07 22:16:00,018] [INFO] [loss_scaler.py:181:update_scale] [deepspeed] OVERFLOW! Rank 0 "
        "Skipping step. Attempted loss scale: 64, reducing to 32"
    )
    assert len(line) > 120
    ev.scan(5, line, 2)
    rec = ev.place([10, 20])[20][0]
    assert rec["kind"] == "overflow" and rec["scale"] == 32.0 and rec["attempted"] == 64.0 and len(rec["text"]) <= 120


@pytest.mark.parametrize(
    "line,precision",
    [
        ("Using 16bit Automatic Mixed Precision (AMP)", "fp16"),  # lightning/pytorch/trainer/connectors
        ("Using bfloat16 Automatic Mixed Precision (AMP)", "bf16"),
        (
            "Selected optimization level O1:  Insert automatic casts around Pytorch functions and Tensor methods.",
            "fp16",
        ),
        ("Mixed precision type: fp16", "fp16"),  # accelerate state.py AcceleratorState.__repr__
        ("Mixed precision type: bf16", "bf16"),
        ("python train.py --fp16 --lr 1e-4", "fp16"),
        ("model = AutoModelForCausalLM.from_pretrained(path, torch_dtype=torch.float16)", "fp16"),
        ("accelerate launch --mixed_precision=fp16 train.py", "fp16"),
        ("TrainingArguments(bf16=True, fp16=False, fp16_opt_level=O1, half_precision_backend=auto)", "bf16"),
        ("Namespace(amp=True, batch_size=64, lr=0.1)", "fp16"),  # timm/ultralytics args: torch.cuda.amp + GradScaler
        ("from torch.cuda.amp import autocast", None),  # code is no setting
        ("TrainingArguments(fp16=False, fp16_opt_level=O1)", None),  # HF's default opt level says nothing
    ],
)
def test_precision_said_in_the_text_is_the_runs(tmp_path, line, precision):
    text = line + "\n" + "".join(f"step {i}: loss {2.0 - i / 50:.4f}\n" for i in range(10))
    assert _read(tmp_path, text).meta.get("precision") == precision


# ------------------------------------------------------------------ whole logs: the record and the finding


def _ds_pipe(step, loss):
    """DeepSpeed's PipelineEngine.train_batch line and its engine's steps_per_print line (runtime/pipe/
    engine.py, runtime/engine.py `_report_progress`)."""
    return (
        f"steps: {step} loss: {loss} iter time (s): 3.181 samples/sec: 0.314\n"
        f"[2026-07-30 09:16:29,681] [INFO] [logging.py:123:log_dist] [Rank 0] step={step + 1}, skipped=0, "
        f"lr=[1e-06], mom=[0.0]\n"
    )


def test_overflows_and_a_collapsing_scale_before_a_nan_rank_the_scaler_over_the_data(tmp_path):
    """fp16 seen (the config line, the OVERFLOW lines, the scale they set) and the scale collapsing
    before the NaN: the NaN is the scaler's or an overflow's, not the data's."""
    text = "[2026-07-30 09:00:00,000] [INFO] [config.py:1000:print] fp16 ... {'enabled': True}\n--fp16\n"
    scale = 2.0**16
    for s in range(1, 41):
        loss = 2.0 - s / 100 + 0.01 * (s % 3)
        if s >= 30:
            text += (
                f"[deepspeed] OVERFLOW! Rank 0 Skipping step. Attempted loss scale: {scale:g}, "
                f"reducing to {scale / 4:g}\n"
            )
            scale /= 4
        text += _ds_pipe(s, "nan" if s == 40 else f"{loss:.4f}")
    run = _read(tmp_path, text)
    assert run.meta["precision"] == "fp16"
    ov = _events(run, "overflow")
    assert ov and all("scale" in e for _, e in ov) and ov[0][1]["scale"] == 2.0**14
    report = diagnose_runs([run])
    nan = next(f for f in report.findings if f.symptom == "nonfinite" and f.severity == "critical")
    assert nan.cause in ("loss_scale_collapse", "activation_overflow") and nan.step == 40, (nan.cause, nan.step)
    assert {"diff.ev.fp16", "diff.ev.scale_fell", "diff.ev.overflow_lines"} <= set(_keys(nan.evidence))
    ranked = next(m for m in nan.evidence if getattr(m, "key", None) == "diff.ranked")
    assert "nonfinite_data" not in (ranked.values["first"], ranked.values["second"])


def test_fairseq_minimum_loss_scale_is_a_loss_scale_collapse_at_its_step(tmp_path):
    """fairseq's progress lines (no loss_scale column), its overflow NOTE lines and the
    FloatingPointError it stops with (fairseq/trainer.py, fairseq/optim/dynamic_loss_scaler.py)."""
    text, scale = "", 128.0
    for k in range(1, 13):
        text += (
            f"2021-03-08 12:3{k % 10}:12 | INFO | train_inner | epoch 001:    {k * 10} / 2000 loss={9 - k / 10:.3f}, "
            f"nll_loss=8.1, ppl=275.3, wps=1000, ups=1, wpb=4000, bsz=128, num_updates={k * 10}, lr=0.0005, "
            f"gnorm=1.2, train_wall=57\n"
        )
        if k >= 6:
            scale /= 4
            text += (
                "2021-03-08 12:33:12 | INFO | fairseq.trainer | NOTE: gradient overflow detected, ignoring "
                f"gradient, setting loss scale to: {scale}\n"
            )
    text += (
        "FloatingPointError: Minimum loss scale reached (0.0001). Your loss is probably exploding. Try "
        "lowering the learning rate, using gradient clipping or increasing the batch size.\n"
    )
    run = _read(tmp_path, text)
    floor = _events(run, "loss_scale_min")
    assert floor and floor[0][0] == 120 and floor[0][1]["scale"] == 0.0001
    report = diagnose_runs([run])
    f = next(f for f in _alarms(report) if f.cause == "loss_scale_collapse")
    assert "precision.scale_floor" in _keys(f.evidence), _keys(f.evidence)
    assert f.step is not None and 60 <= f.step <= 120


def _attention_step(mask_all: bool):
    """One real training step of a masked attention whose masked rows are zeroed after the softmax:
    the forward stays finite; a row masked everywhere makes softmax's backward NaN (0 * NaN)."""
    torch.manual_seed(0)
    q = nn.Linear(8, 8)
    x = torch.randn(2, 4, 8)
    scores = q(x) @ x.transpose(1, 2)
    mask = torch.ones(2, 4, 4, dtype=torch.bool)
    if mask_all:
        mask[1, 2] = False  # one query row of sample 1 sees no key
    att = torch.softmax(scores.masked_fill(~mask, float("-inf")), dim=-1)
    att = torch.where(mask.any(-1, keepdim=True), att, torch.zeros_like(att))
    loss = (att @ x).pow(2).mean()
    loss.backward()
    return float(loss)


def test_anomaly_mode_names_the_op_on_the_nan_finding(tmp_path):
    """torch's anomaly mode raises `Function 'SoftmaxBackward0' returned nan values in its 0th
    output.` (produced here); the loop printed finite losses before it, so the NaN is only in the
    text: a critical non-finite finding at the step, with the op, ranked to attention_overflow."""
    lines = [f"step {s}: loss {_attention_step(False) * (1 - s / 100):.4f}\n" for s in range(1, 31)]
    with torch.autograd.detect_anomaly(check_nan=True):
        with pytest.raises(RuntimeError) as err:
            _attention_step(True)
    message = str(err.value).splitlines()[0]
    assert "SoftmaxBackward0" in message
    run = _read(tmp_path, "".join(lines) + f"RuntimeError: {message}\n")
    ((step, rec),) = _events(run, "anomaly_op")
    assert step == 30 and rec["op"] == "SoftmaxBackward0"
    report = diagnose_runs([run])
    f = next(f for f in report.findings if f.symptom == "nonfinite")
    assert f.severity == "critical" and f.step == 30 and f.op == "SoftmaxBackward0"
    assert f.cause == "attention_overflow" and "events.ev.op_attention" in _keys(f.evidence), _keys(f.evidence)
    assert "diff.fix.attention_mask" in _keys(f.fixes)


def test_a_nan_only_the_text_tells_is_a_finding_at_its_step_naming_the_candidates(tmp_path):
    """A MetricLogger line then `Loss is nan, stopping training` (MAE's engine_pretrain.py): the log
    holds nothing that separates the causes, so the finding names the symptom at its step and the
    ranked candidates, at a modest confidence."""
    text = "".join(
        f"[11:41:33.534863] Epoch: [8]  [{i * 20:4d}/2293]  eta: 1:52:52  lr: 0.000004  "
        f"loss: {0.30 - i / 1000:.4f} (0.2654)  time: 3.0808  data: 0.0002  max mem: 32637\n"
        for i in range(8)
    )
    run = _read(tmp_path, text + "[11:41:59.064379] Loss is nan, stopping training\n")
    ((step, rec),) = _events(run, "nonfinite_loss")
    last = int(run.steps[-1])
    assert step == last and rec["value"] == "nan"
    report = diagnose_runs([run])
    f = next(f for f in report.findings if f.symptom == "nonfinite")
    assert f.severity == "critical" and f.step == last and f.confidence <= 0.4
    keys = _keys(f.evidence)
    assert keys[0] == "diff.what.nonfinite_text" and "diff.ranked" in keys and "diff.separate" in keys
    ranked = f.evidence[keys.index("diff.ranked")]
    assert ranked.values["second"] and ranked.values["p1"] < 0.5
    assert "diff.ev.at_start" not in keys  # eight finite rows came before the NaN


def test_labels_dropped_warnings_are_label_mask_empty(tmp_path):
    """TRL's completion-only collator warns per instance whose response template it cannot find."""
    text = ""
    for s in range(10, 110, 10):
        text += _hf(s, round(1.5 - s / 500, 4))
        if s % 20 == 0:
            text += (
                "UserWarning: Could not find response key `### Answer:` in the following instance: "
                "### Question: 2+2 ... This instance will be ignored in loss calculation. Note, if this happens "
                "often, consider increasing the `max_seq_length`.\n"
            )
    run = _read(tmp_path, text)
    ev = _events(run, "labels_ignored")
    assert len(ev) == 5 and ev[0][0] == 2  # the dicts carry no step: numbered in order
    report = diagnose_runs([run])
    f = next(f for f in _alarms(report) if f.cause == "label_mask_empty")
    assert f.evidence[0].key == "events.labels_dropped" and f.evidence[0].values["steps"] == 5
    assert "events.fix.response_template" in _keys(f.fixes)


def test_a_zero_loss_with_labels_dropped_lines_is_an_empty_mask(tmp_path):
    text = (
        "ZeroDivisionError: Unsloth: All labels in your dataset are -100. Training losses will be all 0.\n"
        + "".join(_hf(s, 0.0, grad_norm=0.0) for s in range(10, 110, 10))
    )
    report = diagnose_runs([_read(tmp_path, text)])
    a = _alarms(report)
    assert a and a[0].cause == "label_mask_empty", [(f.cause, f.symptom) for f in a]


def test_a_skip_rate_from_deepspeed_counters_is_a_finding_with_its_step(tmp_path):
    """DeepSpeed's `step=N, skipped=K` counter (runtime/engine.py) rising on most steps."""
    text, skipped = "", 0
    for s in range(100, 400, 10):
        if s >= 200:
            skipped += 8
        text += _hf(s, round(2.0 - s / 1000 + 0.01 * (s % 7), 4))
        text += f"[Rank 0] step={s}, skipped={skipped}, lr=[2e-05], mom=[(0.9, 0.999)]\n"
    run = _read(tmp_path, text)
    assert run.has("skipped")
    report = diagnose_runs([run])
    f = next(f for f in _alarms(report) if f.symptom == "skipped_steps")
    assert f.cause == "loss_scale_collapse" and f.step is not None and 200 <= f.step <= 210, (f.cause, f.step)


def test_oom_and_nccl_errors_are_notes_not_loss_causes(tmp_path):
    text = "".join(_hf(s, round(2.0 - s / 1000, 4)) for s in range(10, 210, 10))
    text += "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB (GPU 0; 79.15 GiB total capacity)\n"
    text += (
        "[E ProcessGroupNCCL.cpp:475] [Rank 1] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=5, "
        "OpType=ALLREDUCE) ran for 1800000 milliseconds before timing out.\n"
    )
    text += "terminate called after throwing an instance of 'c10::Error'\n  what():  CUDA error: uncorrectable ECC error encountered\n"
    run = _read(tmp_path, text)
    report = diagnose_runs([run])
    notes = {getattr(n, "key", None): n for n in report.notes}
    assert notes["events.oom"].values["step"] == int(run.steps[-1]) and notes["events.nccl"].values["n"] == 1
    assert notes["events.hardware"].values["n"] == 1
    assert not _alarms(report), [(f.cause, f.symptom) for f in _alarms(report)]


def _curve_with_a_jump(resume: bool) -> str:
    text = ""
    for s in range(1, 61):
        loss = 1.0 + 0.05 * math.sin(s)
        if s == 31:
            if resume:
                text += "  Continuing training from checkpoint, will skip to saved global_step\n"
            loss = 12.0
        text += _hf(s, round(loss, 4))
    return text


def test_a_jump_where_the_log_resumes_is_no_spike(tmp_path):
    """The same curve: with the HF Trainer's resume line before the jump, the two runs' curves meet
    there (a note says so); without it the jump is a spike."""
    plain = diagnose_runs([_read(tmp_path, _curve_with_a_jump(False), "a.log")])
    assert any(f.symptom == "spike" for f in _alarms(plain)), [(f.cause, f.symptom) for f in plain.findings]
    run = _read(tmp_path, _curve_with_a_jump(True), "b.log")
    assert _events(run, "resume")[0][0] == 30
    resumed = diagnose_runs([run])
    assert not any(f.symptom == "spike" for f in _alarms(resumed)), [(f.cause, f.symptom) for f in resumed.findings]
    note = next(n for n in resumed.notes if getattr(n, "key", None) == "events.resume_split")
    assert note.values["step"] == 31 and note.values["resume"] == 30


def test_a_healthy_fp16_log_with_benign_warnings_stays_clean(tmp_path):
    """DeepSpeed's scaler halving its initial 2^32 on the first steps (normal for fp16), a tokenizer's
    truncation warning and one dropped instance: no warning or critical finding."""
    text = (
        "--fp16\nToken indices sequence length is longer than the specified maximum sequence length for this "
        "model (1200 > 1024). Running this sequence through the model will result in indexing errors\n"
    )
    scale = 2.0**32
    for _ in range(1, 4):
        text += (
            f"[deepspeed] OVERFLOW! Rank 0 Skipping step. Attempted loss scale: {scale:g}, reducing to {scale / 2:g}\n"
        )
        scale /= 2
    for s in range(10, 410, 10):
        text += _hf(s, round(2.0 * math.exp(-s / 300) + 0.5 + 0.02 * math.sin(s), 4))
        text += f"[Rank 0] step={s}, skipped={3}, lr=[2e-05], mom=[(0.9, 0.999)]\n"
        if s == 200:
            text += (
                "UserWarning: Could not find response key `### Answer:` in the following instance: x. This "
                "instance will be ignored in loss calculation.\n"
            )
    run = _read(tmp_path, text)
    assert run.meta["precision"] == "fp16" and _events(run, "overflow") and _events(run, "truncation")
    report = diagnose_runs([run])
    assert not _alarms(report), [(f.cause, f.symptom, f.step, _keys(f.evidence)) for f in _alarms(report)]
    assert report.to_dict()["status"] != "critical"


def test_a_skipped_counter_in_a_key_value_line_is_the_skipped_series_and_its_events(tmp_path):
    """A running count of skipped steps printed beside the loss (`steps: N loss: ... skipped: K`, the
    total DeepSpeed's engine keeps): the steps skipped in each interval, an event where it rose."""
    text = "".join(
        f"steps: {s} loss: {2.0 - s / 1000:.4f} lr: 0.0001 skipped: {max(0, (s - 200) // 10)}\n"
        for s in range(10, 310, 10)
    )
    run = _read(tmp_path, text)
    sk = dict(zip(run.steps.tolist(), run.col("skipped").tolist()))
    assert sk[200] == 0.0 and sk[210] == pytest.approx(0.1) and sk[300] == pytest.approx(0.1)
    ev = _events(run, "skip_count")
    assert ev[0][0] == 210 and ev[0][1]["count"] == 1 and len(ev) == 10


def _nan_run(op):
    from lossdoctor.records import from_columns

    loss = [2.0 - s / 40 + 0.02 * math.sin(s) for s in range(40)] + [float("nan")]
    events = {
        "text_events": {
            40: [
                {
                    "kind": "anomaly_op",
                    "line": 99,
                    "op": op,
                    "value": "nan",
                    "text": f"RuntimeError: Function '{op}' returned nan values in its 0th output.",
                }
            ]
        }
    }
    return from_columns(range(41), {"loss": loss, "lr": [1e-4] * 41}, events=events)


@pytest.mark.parametrize(
    "op,cause,key",
    [
        ("SoftmaxBackward0", "attention_overflow", "events.ev.op_attention"),
        # the curve rule named the batch already (a NaN out of a calm run): the op joins its finding
        ("LogBackward0", "nonfinite_data", "events.ev.anomaly_op"),
    ],
)
def test_the_op_anomaly_mode_names_weighs_its_family_on_a_nan_in_the_loss(op, cause, key):
    """A NaN in the loss column after a calm run, and the anomaly line at its step: the op goes on
    the finding, and its family moves the differential (a softmax's backward: the attention; a log
    at 0: the batch)."""
    report = diagnose_runs([_nan_run(op)])
    f = next(f for f in report.findings if f.symptom == "nonfinite" and f.severity == "critical")
    assert f.op == op and f.cause == cause and key in _keys(f.evidence), (f.cause, _keys(f.evidence))


def _broadcast_warning_line(pred, target):
    """The line torch's own `mse_loss` warns with, formatted as Python prints a warning to stderr."""
    import warnings

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        torch.nn.functional.mse_loss(pred, target)
    (w,) = [w for w in caught if "target size" in str(w.message)]
    return warnings.formatwarning(w.message, w.category, "torch/nn/functional.py", w.lineno).splitlines()[0]


def test_a_framework_warning_of_a_loop_bug_names_that_bug(tmp_path):
    """A regression on (B, 1) predictions against (B,) targets: torch warns once, the loss falls to the
    targets' variance and stays. The log with torch's own warning line is `loss_broadcast` first, at the
    warning's step, with its fix; the same log without the line names no such bug."""
    torch.manual_seed(0)
    model = nn.Linear(3, 1)
    opt = torch.optim.SGD(model.parameters(), lr=0.05)
    x = torch.randn(256, 3)
    y = x @ torch.tensor([1.5, -2.0, 0.7]) + 0.1 * torch.randn(256)
    lines = []
    for step in range(1, 41):
        pred = model(x)
        if step == 1:
            lines.append(_broadcast_warning_line(pred, y))
        with __import__("warnings").catch_warnings():
            __import__("warnings").simplefilter("ignore")
            loss = torch.nn.functional.mse_loss(pred, y)  # broadcasts to (256, 256)
        opt.zero_grad()
        loss.backward()
        opt.step()
        lines.append(f"step {step} loss {float(loss):.4f}")
    assert "Using a target size (torch.Size([256])) that is different to the input size" in lines[0]
    run = _read(tmp_path, "\n".join(lines) + "\n")
    assert [e["cause"] for _, e in _events(run, "bug_warning")] == ["loss_broadcast"]
    report = diagnose_runs([run])
    first = _alarms(report)[0]
    assert first.cause == "loss_broadcast" and first.step == 1
    assert "events.bug_warning" in _keys(first.evidence) and "bugs.broadcast.fix" in _keys(first.fixes)
    quiet = diagnose_runs([_read(tmp_path, "\n".join(lines[1:]) + "\n", "quiet.log")])
    assert all(f.cause != "loss_broadcast" for f in quiet.findings)


def _lightning_losses(return_loss: bool):
    """A real Lightning run's per-step losses and the warnings it raised; `return_loss=False` is the bug of
    a training_step that logs its loss and forgets to return it (Lightning skips the optimizer step)."""
    import warnings

    import lightning.pytorch as pl

    torch.manual_seed(0)
    x, y = torch.randn(256, 4), torch.randint(0, 2, (256,))
    y = (x[:, 0] > 0).long()

    class Module(pl.LightningModule):
        def __init__(self):
            super().__init__()
            self.net, self.losses = nn.Linear(4, 2), []

        def training_step(self, batch, _):
            loss = nn.functional.cross_entropy(self.net(batch[0]), batch[1])
            self.losses.append(float(loss))
            return loss if return_loss else None

        def configure_optimizers(self):
            return torch.optim.SGD(self.parameters(), lr=0.5)

    data = torch.utils.data.DataLoader(torch.utils.data.TensorDataset(x, y), batch_size=32)
    module = Module()
    trainer = pl.Trainer(
        max_epochs=3, logger=False, enable_checkpointing=False, enable_progress_bar=False, enable_model_summary=False
    )
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        trainer.fit(module, data)
    said = [warnings.formatwarning(w.message, w.category, "automatic.py", w.lineno).splitlines()[0] for w in caught]
    return module.losses, [s for s in said if "returned `None`" in s]


def test_a_training_step_that_returns_none_is_a_frozen_model_unless_the_loss_fell(tmp_path):
    losses, said = _lightning_losses(return_loss=False)
    assert said and losses[:8] == losses[8:16]  # Lightning warned, and no step was taken: each epoch the same
    text = said[0] + "\n" + "".join(f"step {i + 1} train_loss {v:.4f}\n" for i, v in enumerate(losses))
    report = diagnose_runs([_read(tmp_path, text)])
    hit = [f for f in report.findings if f.cause == "frozen_model"]
    assert hit and hit[0].severity in ("warning", "critical") and "events.bug_warning" in _keys(hit[0].evidence)
    trained, _ = _lightning_losses(return_loss=True)
    text = said[0] + "\n" + "".join(f"step {i + 1} train_loss {v:.4f}\n" for i, v in enumerate(trained))
    report = diagnose_runs([_read(tmp_path, text, "fell.log")])
    assert all(f.severity == "info" for f in report.findings if f.cause == "frozen_model")


def test_a_warning_about_a_part_of_the_model_is_no_frozen_model_alarm(tmp_path):
    """TF's "Gradients do not exist for variables [...]" names some variables (often a pooler or head left
    unused on purpose): beside a loss that does not fall it is said as info, below the curve's own cause,
    never a frozen_model warning that would send the user to unfreeze layers."""
    line = (
        "WARNING:tensorflow:Gradients do not exist for variables ['tf_bert_model/bert/pooler/dense/kernel:0', "
        "'tf_bert_model/bert/pooler/dense/bias:0'] when minimizing the loss."
    )
    losses = [0.6931, 0.6935, 0.6929, 0.6933, 0.6930, 0.6934, 0.6932, 0.6931, 0.6933, 0.6930]
    text = line + "\n" + "".join(f"step {10 * (i + 1)} loss {v}\n" for i, v in enumerate(losses))
    run = _read(tmp_path, text)
    assert [e.get("partial") for _, e in _events(run, "bug_warning")] == [True]
    frozen = [f for f in diagnose_runs([run]).findings if f.cause == "frozen_model"]
    assert frozen and all(f.severity == "info" for f in frozen)
