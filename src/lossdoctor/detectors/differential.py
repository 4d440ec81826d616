"""Causes as a ranked differential: for each symptom (`symptoms`), the candidate causes scored by
the evidence the log holds, with the weights as data.

`TABLES[table]` holds rows (evidence, cause, weight, reason): a row's weight is added to its cause's
score when its evidence is present in the log (`EVIDENCE[name]` says whether, and says it as a
`Msg`). The ranked causes become one finding: the leader with the evidence for it and against it,
the runner-up, the one measurement that would separate the two (`SEPARATE`), and the cheapest
re-run that localises it. Its fixes follow its certainty: a cause's own fixes only when it leads
clearly, never a fix the run already applies (clipping a run that clips) nor an LR cut for a spike
the run recovered from.

The weights were set on the corpus's dev split (benchmarks/real_logs: the files there are
in-sample) and the generated dev variants; each row's reason says why the evidence points that way
and its source where the weight comes from (`SOURCES`, or the dev logs it was fitted on). The
priors (`ALWAYS` rows) are how often the dev threads name each cause for the symptom: with nothing
else in the log they order the candidates, and the finding says that nothing separates them
(`diff.unseparated`) at a confidence below every curve rule's.

Findings made here fill the gaps the specific detectors leave (a symptom no alarm of theirs
covers), and reconsider the two causes the curve-only rules name by default (`nonfinite_data` for
a NaN out of the blue, `label_mask_empty` for a loss of exactly 0) when the log holds evidence for
another one.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..findings import Finding, Fix, FixLike, as_fixes
from ..messages import Msg
from ..records import NAN_FILTER_META, Run
from .bad_init import start_over_chance
from .gradients import clip_in_place
from .log_events import (
    ev_grad_text,
    ev_nan_input,
    ev_op_attention,
    ev_op_domain,
    ev_op_overflow,
    ev_resumed_here,
    ev_scale_floor,
)
from .lr_advice import cut_evidence, withheld
from .lr_usual import above_every_family, judge_lr, peak_lr
from .quantities import Quantities
from .scalars import COMMON_K, clamped_share, clamped_share_msg
from .symptoms import (
    CLAMP_CEILINGS,
    CLAMP_TOL,
    Symptom,
    fast_fall,
    fp16_prone_model,
    identical,
    is_ce,
    precision_of,
    scale_path,
    steps_known,
    symptoms_of,
    text_events,
    unit_scale,
)
from .symptoms import (
    LIMITS as SYMPTOM_LIMITS,
)

#: where a row's weight comes from (`Row.source`): a source below, or "dev:" + the dev-split logs
#: (benchmarks/real_logs) it was fitted on, comma-separated
MECHANISM = "mechanism"
DOCUMENTED = "documented"
DEV_BASE_RATE = "dev base rate"
ZOO = "zoo"
SOURCES: dict[str, str] = {
    MECHANISM: "follows from how the cause works (the reason says how); weight set by hand, checked on the dev split",
    DOCUMENTED: "the framework's or the dtype's documented behaviour (fp16's range, a dynamic loss scaler's back-off)",
    DEV_BASE_RATE: "how often the dev split's threads name the cause for this symptom when the log shows nothing else",
    ZOO: "set on the fault zoo's scenarios (in-sample), named in the reason",
}
DEV = "dev:"


@dataclass(frozen=True)
class Row:
    """One piece of evidence's weight for (> 0) or against (< 0) one cause of a symptom."""

    evidence: str
    cause: str
    weight: float
    reason: str
    source: str = MECHANISM


ALWAYS = "always"

#: the dev split's NaN threads whose resolution names a cause (a fix that worked, a maintainer's
#: finding), by cause: the priors of `_NAN_ROWS`, ordered by these counts and shrunk towards equal
#: weights (eleven threads are a small sample). Threads that name two at once (byteps: lowering the
#: LR or fp32 both removed the NaN; yanmtt: fp16 needs a smaller LR) and unconfirmed suggestions
#: (caffe's "lower the LR", a maintainer's "check the data") are left out
DEV_NAN_CAUSES: dict[str, tuple[str, ...]] = {
    "activation_overflow": (
        "metriclogger_mar_loss_is_nan_stopping.log",
        "gemma_sft_dicts_intermittent_nan_fp16_weights.txt",
        "musubi_tuner_avr_loss_nan_fp16.txt",
        "mmdet_bevdet_fp16_dynamic_scale_nan.log",
        "guided_diffusion_logger_block_nan_lg_loss_scale.txt",
    ),
    "lr_too_high": (
        "detectron2_loss_dict_tensor_nan_lr.txt",
        "sequence_tagging_train_loss_nan_high_lr.log",
        "hf_vicuna_lora_loss_huge_inf_nan.txt",
        "cpm_pose_step_loss_nan_lr_lowered.log",
        "tf_faster_rcnn_iter_blocks_total_loss_nan_lr001.txt",
    ),
    "nonfinite_data": ("bmn_training_loss_components_then_nan.log",),
    "grad_explosion": (),
}

_NAN_ROWS = (
    # on a tie the cause listed first leads: the fp16 overflow, whose check (a re-run in bf16/fp32) needs no
    # change of the optimizer; the step size and the batch follow on what the log shows (early, late, calm)
    Row(
        ALWAYS,
        "activation_overflow",
        0.4,
        "one of the two causes the dev split's NaN threads name most (fp16 "
        "autocast or half-precision weights: 5 of 11), most of them in logs that do not print their precision",
        DEV_BASE_RATE,
    ),
    Row(
        ALWAYS,
        "lr_too_high",
        0.4,
        "the other (5 of 11: a too-large step blows the weights up; a lower LR fixed it)",
        DEV_BASE_RATE,
    ),
    Row(
        ALWAYS,
        "nonfinite_data",
        0.3,
        "a bad batch breaks one step of an otherwise sound run (1 of 11 dev threads; the zoo's commonest NaN)",
        DEV_BASE_RATE,
    ),
    Row(
        ALWAYS,
        "grad_explosion",
        0.2,
        "named by no dev NaN thread alone: its own evidence (a rising gradient norm) is what names it",
        DEV_BASE_RATE,
    ),
    Row(
        "fp16",
        "activation_overflow",
        0.5,
        "fp16's range ends at 65504: activations overflow where bf16's do not",
        DOCUMENTED,
    ),
    Row("fp16", "loss_scale_collapse", 0.3, "a dynamic loss scale is fp16's; its collapse makes NaN steps"),
    Row("scale_steady", "loss_scale_collapse", -1.0, "the scale held: the scaler was not backing off"),
    Row("scale_fell", "loss_scale_collapse", 2.0, "the scaler backed off again and again before the NaN"),
    Row("scale_fell", "activation_overflow", 1.2, "a forward overflow makes every scale overflow too"),
    Row("scale_fell", "nonfinite_data", -1.0, "a bad batch breaks one step, it does not walk the scale down"),
    Row("overflow_lines", "loss_scale_collapse", 1.5, "the log prints the overflows that skipped steps"),
    Row("overflow_lines", "activation_overflow", 0.8, "repeated overflows are what an overflowing op prints"),
    Row("fp16_model", "activation_overflow", 1.5, "the model is known to overflow in fp16"),
    Row("wide_dtype", "loss_scale_collapse", -2.0, "bf16/fp32 need no loss scale", DOCUMENTED),
    Row("wide_dtype", "activation_overflow", -0.8, "bf16/fp32 have fp32's range", DOCUMENTED),
    Row(
        "fp32_default",
        "activation_overflow",
        -0.6,
        "the framework trains in fp32 unless a mixed-precision policy "
        "is set, and the log shows none: fp32's range is overflowed only by values that already blew up",
        DOCUMENTED,
    ),
    Row("fp32_default", "loss_scale_collapse", -1.0, "no fp16 policy, no loss scaler", DOCUMENTED),
    Row("grad_rose", "grad_explosion", 2.0, "the gradient norm built up before the NaN"),
    Row("grad_rose", "nonfinite_data", -1.0, "a bad batch breaks a step without a build-up"),
    Row(
        "loss_rose",
        "lr_too_high",
        1.5,
        "the loss diverged before it went NaN",
        DEV + "sequence_tagging_train_loss_nan_high_lr.log",
    ),
    Row("loss_rose", "nonfinite_data", -0.5, "a bad batch breaks a calm run"),
    Row("lr_high", "lr_too_high", 1.0, "the LR is far above what is usual for the optimizer"),
    Row("lr_high", "nonfinite_data", -0.3, "with an LR that large the step size explains the NaN before a batch does"),
    Row("lr_usual", "lr_too_high", -0.4, "the LR is in the usual range for the optimizer"),
    Row(
        "warmup_end",
        "lr_too_high",
        0.8,
        "it went NaN as the LR reached its peak after a warm-up: the first steps at the full LR",
    ),
    Row(
        "grad_rose_at_peak",
        "lr_too_high",
        1.6,
        "the gradient norm was calm through the warm-up and built up only "
        "once the LR reached its peak: the explosion is the LR's doing",
    ),
    Row("grad_rose_at_peak", "grad_explosion", -0.6, "the same gradients were sane at the smaller warm-up LR"),
    # weak: a too-large LR also breaks the classification term first, its logits overflowing while a box
    # regression term is still finite (detectron2_loss_dict_tensor_nan_lr.txt), so no row against the LR
    Row(
        "one_term",
        "nonfinite_data",
        0.4,
        "one term of the loss went NaN while the others stayed finite: that "
        "term's arithmetic on this batch (a ratio over zero positives, a log of 0)",
        DEV + "bmn_training_loss_components_then_nan.log",
    ),
    Row("one_term", "activation_overflow", -0.3, "an overflow in the shared layers makes every term NaN"),
    Row(
        "term_stays",
        "nonfinite_data",
        0.6,
        "the same term stays NaN print after print while the others stay "
        "finite: the shared weights are finite, so that term's own input (its targets: a box of zero or negative "
        "size, a log of 0) makes the NaN, batch after batch",
    ),
    Row("term_stays", "lr_too_high", -1.0, "weights a too-large step blew up make every term NaN, not one"),
    Row("term_stays", "grad_explosion", -0.8, "an explosion that reached the weights makes every term NaN"),
    Row(
        "blew_up",
        "lr_too_high",
        0.8,
        "the loss was already huge and finite just before: the weights were blown "
        "up over steps, as a too-large LR does",
        DEV + "hf_vicuna_lora_loss_huge_inf_nan.txt",
    ),
    Row("blew_up", "grad_explosion", 0.6, "... or gradients that grew without bound"),
    Row(
        "blew_up",
        "activation_overflow",
        -0.3,
        "an op past fp16's range goes non-finite at once, not through a huge finite loss",
    ),
    Row("blew_up", "nonfinite_data", -0.3, "a bad batch breaks one step, it does not grow the loss first"),
    Row(
        "late",
        "lr_too_high",
        -0.5,
        "a too-large LR blows a run up within its first updates after the warm-up, not after thousands of calm ones",
        DEV + "metriclogger_mar_loss_is_nan_stopping.log",
    ),
    Row("calm", "nonfinite_data", 1.0, ">= 20 calm steps, then NaN in one step: the batch of that step"),
    Row("at_start", "nonfinite_data", 0.8, "NaN before any update: the data or the model's first forward"),
    Row("at_start", "grad_explosion", -0.3, "no updates yet to explode"),
    # every logged gradient non-finite under finite, flat losses: each update thrown away (`_grads_never_finite`)
    Row(
        "all_skipped",
        "nonfinite_data",
        -1.5,
        "a bad batch breaks its own step; finite losses with a non-finite gradient at every logged step "
        "are every batch's backward",
    ),
    Row(
        "all_skipped",
        "loss_scale_collapse",
        1.5,
        "finite losses whose updates were all skipped for non-finite gradients: the fp16 loss "
        "scaler throwing every step away",
        MECHANISM,
    ),
    Row(
        "all_skipped",
        "activation_overflow",
        0.8,
        "a backward that overflows fp16 at every batch overflows at any loss scale",
        MECHANISM,
    ),
    # the text's events (sources/text_events.RULES; a bare "loss is nan" line is the symptom, not evidence)
    Row("nan_input", "nonfinite_data", 1.2, "the framework says the inputs themselves hold NaN/Inf"),
    Row("scale_floor", "loss_scale_collapse", 2.5, "the scaler hit its minimum scale: every step overflowed"),
    Row("scale_floor", "activation_overflow", 0.8, "overflowing even at the minimum scale: values past fp16's range"),
    Row("scale_floor", "nonfinite_data", -1.0, "a bad batch breaks one step; it does not walk the scale to its floor"),
    Row(
        "op_attention",
        "attention_overflow",
        2.0,
        "anomaly mode names a softmax/attention backward: a fully masked row (all -inf) or overflowing logits",
    ),
    Row("op_attention", "nonfinite_data", -0.3, "the op named is the attention's, not the input's"),
    Row(
        "op_domain",
        "nonfinite_data",
        0.8,
        "anomaly mode names an op at an edge of its domain (log 0, x/0, sqrt at 0): a value the batch brought there",
    ),
    Row("op_overflow", "activation_overflow", 0.6, "anomaly mode names a product/exponential that overflowed"),
    Row("op_overflow", "grad_explosion", 0.4, "... or a gradient grown past the dtype's range through it"),
    Row("grad_text", "grad_explosion", 0.4, "the log says the gradient went non-finite"),
    Row("grad_zero", "label_mask_empty", 2.0, "only a mean over zero supervised tokens is NaN with a zero gradient"),
    Row(
        "zero_beside_nan_grad",
        "label_mask_empty",
        1.5,
        "a loss logged as exactly 0 beside a NaN gradient norm: the mean over zero supervised tokens (0/0) "
        "that the HF Trainer's NaN filter prints as 0 (TRL SFT with every label -100)",
        DEV + "trl_sft_hf_dict_loss0_gradnorm_nan_all_labels_masked.log",
    ),
    Row(
        "zero_beside_nan_grad", "nonfinite_data", -0.3, "a NaN batch's loss is printed NaN or averaged, not an exact 0"
    ),
    Row("labels_ignored", "label_mask_empty", 1.5, "the framework says labels were dropped"),
    Row("loss_finite", "grad_explosion", 0.3, "the gradient overflowed while the loss was still finite"),
    # (0.5 with the LR's prior at 0.4: the step alone leaves the LR under a clear lead, so its fix waits for
    # the measurement)
    Row(
        "early",
        "lr_too_high",
        0.5,
        "a too-large LR blows up in a run's first hundred steps; a bad batch comes at any step",
    ),
    Row("early", "grad_explosion", 0.2, "an explosion that grows from the first updates"),
    Row(
        "intermittent",
        "activation_overflow",
        1.0,
        "finite losses at the old level between the NaNs: the weights survived, some batches overflow in the forward",
    ),
    Row("intermittent", "nonfinite_data", 0.6, "NaN on some batches only, the weights intact: those batches"),
    Row("intermittent", "lr_too_high", -1.0, "weights a too-large step blew up stay NaN; these came back"),
    Row("intermittent", "grad_explosion", -0.8, "an explosion that reached the weights does not come back"),
    Row("unsteady", "lr_too_high", 1.0, "the loss swung >= 20% from point to point before the NaN: steps too large"),
    Row("unsteady", "grad_explosion", 0.3, "unstable steps before the blow-up"),
    Row("lr_small", "lr_too_high", -0.8, "an LR of at most 1e-5 does not blow the weights up"),
    Row(
        "first_update",
        "precision_stall",
        0.8,
        "NaN from the very first update of a finite loss and gradient: the optimizer's own arithmetic "
        "(Adam's eps is 0 in fp16: 0/0); set on the zoo's mlp_fp16_adam_eps (in-sample)",
        ZOO,
    ),
    Row("first_update", "grad_explosion", -0.5, "one update: nothing had time to grow"),
    Row("first_update", "lr_too_high", -0.3, "a too-large step most often raises the loss for a few steps first"),
)

_SPIKE_ROWS = (
    Row(ALWAYS, "loss_spike", 0.8, "a jump out of the run's noise that came back is a spike's definition"),
    Row(ALWAYS, "lr_too_high", 0.2, "large steps make occasional jumps"),
    Row(ALWAYS, "grad_explosion", 0.2, "a gradient burst jumps the loss"),
    Row("grad_jump_here", "grad_explosion", 1.0, "the gradient norm jumped with the loss"),
    Row("scale_fell", "loss_scale_collapse", 1.5, "the fp16 scale fell with the jump: overflowing steps"),
    Row("overflow_lines", "loss_scale_collapse", 1.0, "overflow lines at the jump"),
    Row("warmup_end", "lr_too_high", 0.8, "the jump came as the LR reached its peak"),
    Row("lr_high", "lr_too_high", 0.8, "the LR is far above what is usual for the optimizer"),
    Row("lr_usual", "lr_too_high", -0.5, "the LR is in the usual range"),
    Row("recovered", "lr_too_high", -0.4, "a too-high LR keeps the loss up; this one came back"),
    Row("first_updates", "lr_too_high", 1.2, "the first updates made the loss worse: steps too large from the start"),
    Row("first_updates", "loss_spike", -0.8, "a spike is a jump after training well; this run had not trained yet"),
    Row("resumed", "loss_spike", -1.5, "the jump is where the log resumes from a checkpoint: two runs' curves meet"),
)

_DIVERGE_ROWS = (
    Row(ALWAYS, "lr_too_high", 0.6, "a loss that rises and stays up is most often a too-large step"),
    Row(ALWAYS, "loss_spike", 0.3, "a bad batch or state can kick a run off its track"),
    Row(ALWAYS, "grad_explosion", 0.3, "gradients that grow without bound"),
    Row("grad_rose", "grad_explosion", 1.2, "the gradient norm grew >= 10x with the loss"),
    Row("lr_high", "lr_too_high", 1.0, "the LR is far above what is usual for the optimizer"),
    Row("lr_usual", "lr_too_high", -0.4, "the LR is in the usual range"),
    Row("warmup_end", "lr_too_high", 0.8, "it diverged as the LR reached its peak"),
    Row(
        "grad_rose_at_peak",
        "lr_too_high",
        1.2,
        "the gradient norm was calm through the warm-up and built up only "
        "once the LR reached its peak: the explosion is the LR's doing",
    ),
    Row("grad_rose_at_peak", "grad_explosion", -0.6, "the same gradients were sane at the smaller warm-up LR"),
    Row("warming", "lr_too_high", 0.5, "it diverged while the LR was still climbing"),
    Row("sudden", "loss_spike", 0.8, "one interval from calm to high: an event, not a drift"),
    Row("scale_fell", "loss_scale_collapse", 1.5, "the fp16 scale collapsed with it"),
    Row("overflow_lines", "loss_scale_collapse", 1.0, "overflow lines with it"),
    Row("fp16_model", "activation_overflow", 1.2, "the model is known to overflow in fp16"),
    Row("to_chance", "lr_too_high", 0.3, "back at chance: the weights were wrecked, as a too-large step does"),
    Row(
        "clamped",
        "lr_too_high",
        0.6,
        "the loss sits at a clamp's ceiling (Caffe's 87.3365, Keras's 16.1181): outputs that overflowed, "
        "as steps too large leave them",
    ),
    Row("clamped", "nonfinite_data", 0.3, "or a label outside the output's range: its probability is 0 too"),
    Row(
        "resumed", "lr_too_high", -0.5, "the level changed where the log resumed: the resumed state, not the step size"
    ),
    Row("resumed", "loss_spike", 0.5, "a resume that did not restore the state is an event, not a drift"),
    Row(
        "first_updates",
        "lr_too_high",
        1.0,
        "it diverged within the run's first logged updates: steps too large "
        "from the start (a bad batch or a corrupted state kicks a run that had trained first)",
        DEV + "fastai_docs_gradientclip_fp16_lr_too_high_table.md",
    ),
    Row("first_updates", "loss_spike", -0.8, "a spike is a jump after training well; this run had not trained yet"),
    Row(
        "kept_rising",
        "lr_too_high",
        0.6,
        "the loss rose again at every logged point to the end: a drift the "
        "updates drive, not one event the run absorbed",
    ),
    Row(
        "lr_small",
        "lr_too_high",
        -2.0,
        "an LR of at most 1e-5 up to that step does not blow the weights up: something else wrecked them",
        DEV + "neox_llama_bf16_loss_jump.log",
    ),
    Row(
        "kept_rising",
        "loss_spike",
        -0.4,
        "after a bad batch the loss stays at its new level or comes back; it does not go on rising",
    ),
    # a V traced point by point: what a too-large step makes, and what gradients summed over steps make
    # (each update adds all the earlier ones: the loss falls fast, overshoots, climbs at every step);
    # a loss alone does not tell them apart, so the weight makes the two as likely (the LR's prior and
    # its kept_rising row) and the finding says that nothing separates them
    Row(
        "v_turn",
        "grad_not_zeroed",
        1.2,
        "the loss fell at every point, then rose at every point from its best, "
        "smoothly: gradients never zeroed sum every step's gradient into the next update, which makes this V as "
        "a step too large does",
        DEV + "aihwkit_loss_error_lines_no_zero_grad_rises.log",
    ),
)

_ABSURD_ROWS = (
    Row(ALWAYS, "bad_init", 0.4, "a loss beyond its kind's range from a model that was never sane"),
    Row(ALWAYS, "grad_explosion", 0.3, "weights blown up by exploding gradients"),
    Row(ALWAYS, "nonfinite_data", 0.3, "absurd values in the batch (unnormalised targets or features)"),
    Row("at_start", "bad_init", 1.0, "absurd from the first step: before any update, the init or the data"),
    Row("at_start", "grad_explosion", -1.0, "no updates yet"),
    Row("grad_big", "grad_explosion", 1.0, "the gradient norm is in the thousands"),
    Row(
        "grad_big_unclipped",
        "grad_explosion",
        0.5,
        "a language model's gradient norm in the thousands with no "
        "clipping configured: every update is taken at that size and blows the weights up",
    ),
    Row("loss_rose", "lr_too_high", 1.2, "it was sane, then rose to this"),
    Row("negative", "nonfinite_data", 1.0, "a cross-entropy below 0 means the targets are not probabilities"),
    Row("after_sane", "bad_init", -1.0, "the loss was in range before: the init was sane"),
    Row(
        "trained_long",
        "bad_init",
        -1.0,
        "thousands of updates came before it: an init never sane does not train that long",
    ),
    Row("after_sane", "lr_too_high", 0.8, "sane, then absurd: the weights were blown up by an update"),
    Row("after_sane", "grad_explosion", 0.6, "sane, then absurd: an exploding gradient reached the weights"),
    Row("lr_small", "lr_too_high", -0.8, "an LR of at most 1e-5 does not blow the weights up"),
    Row(
        "clamped",
        "lr_too_high",
        0.8,
        "the loss is a clamp's ceiling (Caffe's 87.3365): the true class's probability underflowed "
        "to 0, outputs that overflowed, as steps too large leave them",
    ),
    Row("clamped", "nonfinite_data", 0.4, "or a label outside the output's range: its probability is 0 at any weights"),
)

_ZERO_ROWS = (
    Row(ALWAYS, "label_mask_empty", 0.6, "a mean over zero supervised tokens is logged as 0"),
    Row(ALWAYS, "nonfinite_data", 0.1, "NaN steps logged as 0 (the HF Trainer's NaN filter)"),
    Row(ALWAYS, "loss_scale_collapse", 0.1, "every step skipped"),
    # an LR of 0 on every step leaves the weights at their init, whose loss is the init's, not 0: the
    # schedule explains the stall (the LR finding says so) but not the zero, so it is no candidate
    # here; one cause that makes both (every step skipped: NaN losses logged as 0, the scheduler left
    # unstepped at 0) is likelier than two faults at once, yet the LR does not rule a mask out
    Row(
        "lr_zero_all",
        "label_mask_empty",
        -0.3,
        "one cause for both a zero loss and a zero LR (every step "
        "skipped) is likelier than an empty mask beside a schedule that never started",
    ),
    Row("lr_zero_all", "loss_scale_collapse", 0.6, "every step skipped leaves the scheduler unstepped at 0"),
    Row(
        "lr_zero_all",
        "nonfinite_data",
        0.4,
        "every step NaN and skipped: the loss logged as 0 (a NaN filter's "
        "mean over no finite loss), the scheduler never stepped",
    ),
    Row("grad_nonfinite", "nonfinite_data", 1.0, "NaN gradients: the steps went NaN and were logged as 0"),
    Row("grad_nonfinite", "label_mask_empty", -0.3, "an empty mask gives zero gradients, not NaN"),
    Row("fp16", "loss_scale_collapse", 0.8, "fp16 skips overflowing steps"),
    Row("grad_zero", "label_mask_empty", 1.0, "a zero gradient with a zero loss: nothing supervised"),
    Row("labels_ignored", "label_mask_empty", 1.5, "the framework says labels were dropped"),
    Row(
        "saturated_start",
        "bad_init",
        2.0,
        "the run started far above chance: logits that large saturate the softmax, and a one-hot output's "
        "cross-entropy and gradient underflow to exactly 0 (set on the zoo's mlp_init_std_1, in-sample)",
        ZOO,
    ),
    Row("saturated_start", "label_mask_empty", -0.5, "an empty mask does not start the loss far above chance"),
    Row(
        "lr_high",
        "lr_too_high",
        1.0,
        "an LR far above usual saturates the outputs: a batch whose one-hot predictions are all right has a "
        "cross-entropy that underflows to 0 (set on the zoo's cnn_adam_lr_scaled_for_big_batch, in-sample)",
        ZOO,
    ),
    # an epoch's loss is a sum or mean over its batches, started at 0: with no batch in the epoch it
    # prints that start, and no step is taken (tabnet: a dataset smaller than the batch size with
    # drop_last); an empty mask gives 0 only where the framework's mean over no token is 0, NaN elsewhere
    Row(
        "epoch_zero",
        "frozen_model",
        0.8,
        "exactly 0 at every epoch: the start value of an epoch's running loss "
        "when no batch ran (a loader that drops its only, incomplete batch), and then nothing updates",
    ),
)

_FLAT_ROWS = (
    Row(ALWAYS, "frozen_model", 0.5, "an exactly repeated loss means nothing changes between steps"),
    Row(ALWAYS, "noisy_data", 0.3, "labels unrelated to the inputs keep the loss at chance"),
    Row(ALWAYS, "lr_too_low", 0.3, "updates too small to move the loss"),
    Row("lr_zero_all", "lr_schedule_error", 2.0, "the LR is 0 on every logged step"),
    Row("lr_tiny", "lr_too_low", 1.5, "the LR is at most 1e-6"),
    Row("constant_loss", "frozen_model", 0.8, "the same loss to the last digit across batches"),
    Row("constant_loss", "noisy_data", -0.3, "unrelated labels still let the loss wander across batches"),
    Row("lr_high", "lr_too_high", 1.2, "an LR far above usual saturates a model at chance"),
    Row("grad_zero", "frozen_model", 1.0, "a zero gradient: nothing reaches the weights"),
    Row(
        "clamped",
        "lr_too_high",
        1.0,
        "stuck at a clamp's ceiling (Caffe's 87.3365, Keras's 16.1181): the outputs overflowed and "
        "saturated, as steps too large leave them, so no gradient moves them back",
    ),
    Row("clamped", "nonfinite_data", 0.4, "or a label outside the output's range: its probability is 0 at any weights"),
    Row("clamped", "frozen_model", -0.5, "weights at their init give a finite loss, not a clamp's ceiling"),
    Row("repeats", "frozen_model", 1.5, "the same batches gave the same losses again: the weights did not change"),
    Row("repeats", "noisy_data", -0.5, "unrelated labels still change the weights, and so the next pass's losses"),
    # the loss moved, then froze to the last digit: the weights did update, then the outputs went constant
    Row(
        "froze_after_moving",
        "lr_too_high",
        0.8,
        "the loss moved and then froze at one value: a step large enough "
        "to push the units into saturation (dead ReLUs, a sigmoid at 0 or 1) leaves no gradient to move them back",
        DEV + "tf_unet_minibatch_loss_collapses_to_ln2.md,keras_conv1d_adagrad_lr1_loss_identical.txt",
    ),
    Row(
        "froze_after_moving",
        "frozen_model",
        -0.6,
        "the loss changed before it froze: the weights did update, and "
        "weights that stop updating still give each batch its own loss",
    ),
    Row(
        "negative",
        "wrong_loss",
        1.2,
        "a loss that sits below 0 and does not move: a bounded loss (binary or "
        "categorical cross-entropy) fed targets outside [0, 1] saturates at a negative value",
        DEV + "keras_mnist_sigmoid_bce_negative_loss_constant.txt",
    ),
    Row("negative", "frozen_model", -0.3, "weights that never change give the loss the init gives, not one below 0"),
    Row(
        "bce_base_rate",
        "wrong_loss",
        1.5,
        "the loss sits at the binary cross-entropy of a 1/K base rate: a "
        "binary cross-entropy over K one-hot columns (a multi-class target compiled with binary_crossentropy) whose "
        "outputs learnt the prior and nothing else",
        DEV + "keras_lstm_newsgroups_dense1_sigmoid_bce_loss_acc_frozen.txt",
    ),
    Row(
        "bce_base_rate",
        "frozen_model",
        -0.8,
        "weights that never changed give their init's loss (ln 2 per column for "
        "sigmoids at 0.5), not the class prior's binary entropy to four digits: they were trained to it",
    ),
    Row(
        "clamped_share",
        "wrong_loss",
        2.0,
        "the loss is the share of the other class times a binary cross-entropy's clamp: every output "
        "sits at exactly 1 (or 0), as a softmax over a single output unit always gives; its gradient is 0 "
        "and nothing trains",
        DEV + "keras1_epoch_bars_loss_4p4380_acc_0p7247_identical_every_epoch.txt",
    ),
    Row("clamped_share", "frozen_model", -0.8, "weights at their init give finite outputs, not every one at 1"),
    Row("train_moves", "frozen_model", -1.0, "the training loss moves from step to step: the weights do change"),
    Row(
        "train_moves",
        "lr_too_high",
        0.6,
        "outputs on held-out data that no longer respond to their inputs while training goes on: units "
        "saturated (or embeddings collapsed to one point) by steps too large",
    ),
)

_STUCK_ROWS = (
    Row(
        ALWAYS, "lr_too_low", 0.4, "updates too small to move the loss: the commonest reason it never leaves its start"
    ),
    Row(ALWAYS, "noisy_data", 0.3, "labels unrelated to the inputs leave nothing to learn"),
    Row(ALWAYS, "frozen_model", 0.3, "updates that do not reach the weights"),
    Row(ALWAYS, "lr_too_high", 0.2, "steps too large bounce around the start instead of descending"),
    Row("rising", "lr_too_high", 0.6, "the loss rose from its start: steps that overshoot"),
    Row(
        "collapsed", "lr_too_high", 0.6, "the label metric got better, then went back to its worst: it was knocked off"
    ),
    Row("collapsed", "lr_too_low", -0.4, "it learnt, then lost it: the updates were large enough to move it"),
    Row("lr_high", "lr_too_high", 1.2, "the LR is far above what is usual for the optimizer"),
    Row("lr_usual", "lr_too_low", -0.3, "the LR is in the usual range"),
    Row("lr_usual", "lr_too_high", -0.3, "the LR is in the usual range"),
    Row("lr_tiny", "lr_too_low", 1.5, "the LR is at most 1e-6"),
    Row("lr_zero_all", "lr_schedule_error", 2.0, "the LR is 0 on every logged step"),
    Row("grad_zero", "frozen_model", 1.0, "a zero gradient: nothing reaches the weights"),
)

_GRAD_ROWS = (
    Row(ALWAYS, "grad_explosion", 0.8, "a gradient norm far above its own history"),
    Row(ALWAYS, "nonfinite_data", 0.3, "one extreme batch gives one extreme gradient"),
    Row("recovered", "nonfinite_data", 0.4, "it came back: one batch, not a trend"),
    Row("loss_rose", "grad_explosion", 0.6, "the loss rose with it"),
    Row("lr_high", "lr_too_high", 1.2, "the LR is far above what is usual for the optimizer"),
    Row("warmup_end", "lr_too_high", 0.6, "the gradient norm jumped as the LR reached its peak after a warm-up"),
    Row("scale_fell", "loss_scale_collapse", 1.2, "the fp16 scale fell with it"),
    Row(
        "grad_big_unclipped",
        "grad_explosion",
        0.6,
        "a language model's gradient norm in the thousands with no "
        "clipping configured (healthy LLM runs print pre-clip norms of 0.1-10): every update is that large",
    ),
    Row(
        "clips",
        "grad_explosion",
        -0.3,
        "the run clips at max_grad_norm: the printed norm is before clipping, the update is bounded",
        DOCUMENTED,
    ),
)

_SCALE_ROWS = (
    Row(ALWAYS, "loss_scale_collapse", 1.0, "the scale backed off far past the occasional overflow"),
    Row(ALWAYS, "activation_overflow", 0.3, "an op overflowing every step makes every scale overflow"),
    Row("fp16_model", "activation_overflow", 1.5, "the model is known to overflow in fp16"),
    Row("grad_rose", "grad_explosion", 1.0, "the unscaled gradient norm grew before the collapse"),
    Row("scale_below_one", "activation_overflow", 0.6, "overflow even at a scale below 1: in the forward pass"),
    Row("scale_floor", "loss_scale_collapse", 1.0, "the scaler reached its minimum scale and stopped the run"),
)

_LR_ZERO_ROWS = (
    Row(ALWAYS, "lr_schedule_error", 1.0, "an LR of 0 on every logged step: the schedule never started"),
    Row(ALWAYS, "frozen_model", 0.2, "nothing changes the weights"),
    Row("fp16", "loss_scale_collapse", 0.6, "skipped steps leave the scheduler unstepped"),
    Row("loss_moving", "lr_schedule_error", -0.5, "the loss moves: something does update"),
)

_LR_TINY_ROWS = (
    Row(ALWAYS, "lr_too_low", 1.0, "an LR of at most 1e-6 moves a network's weights by ~nothing"),
    Row(ALWAYS, "lr_schedule_error", 0.5, "a decay that reached ~0, or a warm-up that has not started"),
    Row("warming", "lr_schedule_error", 0.5, "the LR is still climbing: a warm-up this slow is the schedule"),
)

TABLES: dict[str, tuple[Row, ...]] = {
    "nonfinite": _NAN_ROWS,
    "spike": _SPIKE_ROWS,
    "divergence": _DIVERGE_ROWS,
    "absurd": _ABSURD_ROWS,
    "zero": _ZERO_ROWS,
    "flat": _FLAT_ROWS,
    "stuck": _STUCK_ROWS,
    "grad": _GRAD_ROWS,
    "scale": _SCALE_ROWS,
    "lr_zero": _LR_ZERO_ROWS,
    "lr_tiny": _LR_TINY_ROWS,
}

#: symptom kind -> (table, the finding's symptom, its severity)
KINDS: dict[str, tuple[str, str, str]] = {
    "nonfinite": ("nonfinite", "nonfinite", "critical"),
    "spike": ("spike", "spike", "warning"),
    "jump_stayed": ("divergence", "divergence", "critical"),
    "rise": ("divergence", "divergence", "critical"),
    "absurd": ("absurd", "divergence", "critical"),
    "zero": ("zero", "zero_loss", "critical"),
    "constant": ("flat", "stall", "warning"),
    "eval_constant": ("flat", "plateau", "warning"),
    "stuck": ("flat", "stall", "warning"),
    "chance": ("flat", "plateau", "warning"),
    "saturated": ("flat", "plateau", "warning"),
    "repeat": ("flat", "stall", "warning"),
    "recur": ("flat", "stall", "warning"),
    "no_fall": ("stuck", "plateau", "warning"),
    "epoch_flat": ("stuck", "plateau", "warning"),
    "fit_flat": ("stuck", "plateau", "warning"),
    "lm_untrained": ("stuck", "plateau", "warning"),
    "metric_worst": ("stuck", "plateau", "warning"),
    "grad_jump": ("grad", "spike", "warning"),
    "grad_level": ("grad", "divergence", "warning"),
    # the same, with the loss jumping in one logged interval: what the threads call a spike
    "grad_level_jump": ("grad", "spike", "warning"),
    "scale_collapse": ("scale", "skipped_steps", "warning"),
    "skips": ("scale", "skipped_steps", "warning"),
    "lr_zero": ("lr_zero", "stall", "warning"),
    "lr_tiny": ("lr_tiny", "slow_convergence", "warning"),
    "oscillation": ("divergence", "oscillation", "warning"),
    "rising_start": ("divergence", "divergence", "warning"),
    "creep": ("divergence", "divergence", "warning"),
}

#: the one measurement that tells the two leading causes apart (a message key under diff.sep.)
SEPARATE: dict[frozenset[str], str] = {
    frozenset(("nonfinite_data", "loss_scale_collapse")): "scale_vs_batch",
    frozenset(("nonfinite_data", "activation_overflow")): "scale_vs_batch",
    frozenset(("activation_overflow", "loss_scale_collapse")): "forward_fp32",
    frozenset(("nonfinite_data", "grad_explosion")): "grad_before",
    frozenset(("grad_explosion", "lr_too_high")): "lr_half",
    frozenset(("nonfinite_data", "lr_too_high")): "lr_half",
    frozenset(("loss_spike", "lr_too_high")): "replay_batch",
    frozenset(("loss_spike", "grad_explosion")): "grad_before",
    frozenset(("label_mask_empty", "loss_scale_collapse")): "count_labels",
    frozenset(("label_mask_empty", "nonfinite_data")): "count_labels",
    frozenset(("label_mask_empty", "lr_schedule_error")): "count_labels",
    frozenset(("label_mask_empty", "frozen_model")): "count_batches",
    frozenset(("lr_schedule_error", "loss_scale_collapse")): "log_skips",
    frozenset(("frozen_model", "noisy_data")): "update_size",
    frozenset(("frozen_model", "lr_too_low")): "update_size",
    frozenset(("frozen_model", "lr_too_high")): "outputs_constant",
    frozenset(("wrong_loss", "frozen_model")): "targets_range",
    frozenset(("wrong_loss", "lr_too_high")): "targets_range",
    frozenset(("noisy_data", "lr_too_low")): "overfit_one",
    frozenset(("lr_schedule_error", "frozen_model")): "update_size",
    frozenset(("lr_too_low", "lr_schedule_error")): "print_schedule",
    frozenset(("bad_init", "grad_explosion")): "first_forward",
    frozenset(("bad_init", "nonfinite_data")): "first_forward",
    frozenset(("attention_overflow", "nonfinite_data")): "attention_rows",
    frozenset(("attention_overflow", "activation_overflow")): "attention_rows",
    frozenset(("attention_overflow", "grad_explosion")): "attention_rows",
    frozenset(("attention_overflow", "lr_too_high")): "attention_rows",
    frozenset(("attention_overflow", "loss_scale_collapse")): "attention_rows",
    frozenset(("lr_too_low", "lr_too_high")): "lr_both",
    frozenset(("noisy_data", "lr_too_high")): "overfit_one",
    frozenset(("activation_overflow", "lr_too_high")): "scale_vs_batch",
    frozenset(("activation_overflow", "grad_explosion")): "scale_vs_batch",
    frozenset(("precision_stall", "nonfinite_data")): "scale_vs_batch",
    frozenset(("precision_stall", "lr_too_high")): "scale_vs_batch",
    frozenset(("grad_not_zeroed", "lr_too_high")): "zero_grad",
    frozenset(("grad_not_zeroed", "grad_explosion")): "zero_grad",
}

#: a cause's own fixes (message keys under diff.fix.), said only when it leads clearly
FIXES: dict[str, tuple[str, ...]] = {
    "nonfinite_data": ("inspect_batch",),
    "loss_scale_collapse": ("bf16_or_fp32_op",),
    "activation_overflow": ("bf16_or_fp32_op",),
    "grad_explosion": ("clip",),
    "lr_too_high": ("lower_lr",),
    "loss_spike": ("skip_window",),
    "label_mask_empty": ("count_labels",),
    "lr_schedule_error": ("print_schedule",),
    "frozen_model": ("check_requires_grad",),
    "noisy_data": ("overfit_one",),
    "lr_too_low": ("raise_lr",),
    "bad_init": ("first_forward",),
    "attention_overflow": ("attention_mask",),
    "precision_stall": ("fp32_optimizer_state",),
    "wrong_loss": ("loss_fits_targets",),
    "grad_not_zeroed": ("zero_grad",),
}

#: the leader's share of the differential at or above which its own fixes are said (below it the
#: separating measurement comes first: advice follows certainty); set on the dev split
CLEAR_LEAD = 0.5
#: confidence of a differential finding: its share, capped below what direct evidence gets
CONF_CAP = 0.75
CONF_FLOOR = 0.25
#: confidence of a finding whose leader has no evidence row of its own (only the prior) and no
#: clear lead (share < CLEAR_LEAD): it names the symptom and the ranked candidates, below what the
#: weakest curve rule says (0.5), above the floor
UNSEPARATED_CONF = 0.4
#: the leader's share over the runner-up's below which the two are not separated (a score margin of
#: 0.2: one weak row's worth)
SEPARATED_RATIO = 1.5


Evidence = Callable[[Run, Quantities, Symptom], "Msg | None"]


# ------------------------------------------------------------------ evidence: facts of the log


def _prev_rows(q: Quantities, sym: Symptom) -> np.ndarray:
    """The finite losses before the symptom (a NaN the text reports after the last logged row has
    that row before it too)."""
    upto = sym.row + 1 if sym.data.get("source") == "text" else sym.row
    return q.finite_loss[q.finite_loss < upto]


#: a NaN at or before this optimizer step (the trainer's step number, wherever the excerpt starts)
#: comes in the first updates, where a too-large LR without a warm-up blows up (the dev split's NaN
#: threads that concluded the LR was too high broke at steps 4-60: maskrcnn_benchmark 7,
#: tf_faster_rcnn 20, cpm_pose 60; an fp16 overflow or a bad batch comes at any step); weights of
#: its rows set on the dev split's NaN logs
EARLY_STEPS = 100
#: the median |change of ln loss| between consecutive points at or above which a loss swings
#: (>= 20% per logged interval; set on the dev split's NaN logs)
UNSTEADY = 0.2
#: an LR at most this at the onset is too small to blow weights up (scalars.TINY_LR)
LR_SMALL = 1e-5


def _ev_early(run: Run, q: Quantities, sym: Symptom) -> Msg | None:
    if not steps_known(run) or sym.step > EARLY_STEPS or sym.step <= 0:
        return None
    first_epoch = run.meta.get("first_epoch")
    if isinstance(first_epoch, (int, float)) and first_epoch >= 1:
        return None
    return Msg("diff.ev.early", step=sym.step, n=EARLY_STEPS)


#: a NaN at or after this optimizer step came after thousands of updates: past where a too-large LR
#: blows a run up (the lr_too_high rule looks at the first 50 steps; warm-ups end by ~2000)
LATE_STEPS = 1000


def _ev_late(run: Run, q: Quantities, sym: Symptom) -> Msg | None:
    """The NaN came at step >= LATE_STEPS of a log whose steps are the trainer's, the last loss before
    it no higher than the log's median before it (a late NaN out of a run still training, not the
    end of a divergence), and not as the LR reached its peak."""
    prev = _prev_rows(q, sym)
    if not steps_known(run) or sym.step < LATE_STEPS or prev.size == 0 or _ev_warmup_end(run, q, sym):
        return None
    x = q.loss[prev]
    return Msg("diff.ev.late", step=sym.step) if float(x[-1]) <= 1.2 * float(np.median(x)) else None


def _ev_trained_long(run: Run, q: Quantities, sym: Symptom) -> Msg | None:
    """The symptom came at step >= LATE_STEPS of a log whose steps are the trainer's, whatever the
    log shows before it: the model trained that long, so its init was sane (an excerpt that starts
    late shows no earlier point, yet the run had them)."""
    if not steps_known(run) or sym.step < LATE_STEPS:
        return None
    return Msg("diff.ev.trained_long", step=sym.step)


def _ev_grad_rose_at_peak(run: Run, q: Quantities, sym: Symptom) -> Msg | None:
    """The gradient norm built up (`grad_rose`) only after the LR reached the peak of its warm-up:
    calm (at most 3x its early median) up to the peak, >= 10x after it."""
    c = _lr_climb(q, sym.row)
    if c is None or _ev_grad_rose(run, q, sym) is None:
        return None
    peak_row = c[0]
    gn = q.grad_norm[: sym.row + 1]
    upto, after = gn[: peak_row + 1], gn[peak_row + 1 :]
    upto, after = upto[np.isfinite(upto)], after[np.isfinite(after)]
    if upto.size < 2 or after.size == 0:
        return None
    base = float(np.median(upto[: max(2, upto.size // 2)]))
    if base <= 0 or float(np.max(upto)) > 3 * base or float(np.max(after)) < 10 * base:
        return None
    # ... and it began within one warm-up's length after the peak ("right after the warm-up")
    gn_after = gn[peak_row + 1 :]
    onset = peak_row + 1 + int(np.flatnonzero(np.nan_to_num(gn_after, nan=0.0) >= 3 * base)[0])
    warmup = int(q.steps[peak_row]) - int(q.steps[0])
    if int(q.steps[onset]) - int(q.steps[peak_row]) > max(warmup, 1):
        return None
    return Msg("diff.ev.grad_rose_at_peak", lr=c[2], step=int(q.steps[peak_row]), base=base, top=float(np.max(after)))


def _ev_one_term(run: Run, q: Quantities, sym: Symptom) -> Msg | None:
    """At the NaN's step the log prints the loss's terms, and some are NaN/Inf while others are finite."""
    comps = run.event("loss_components").get(sym.step)
    if not isinstance(comps, dict):
        return None
    vals = {k: float(v) for k, v in comps.items() if isinstance(v, (int, float)) and not isinstance(v, bool)}
    bad = sorted(k for k, v in vals.items() if not math.isfinite(v))
    good = [k for k, v in vals.items() if math.isfinite(v)]
    return Msg("diff.ev.one_term", bad=bad, n=len(good)) if bad and good else None


#: prints from the NaN's on (it included) with the same term NaN/Inf and another finite: the weights
#: stayed finite (one print is `one_term`; a second print, an interval later, shows the shared weights
#: outlived the first NaN's step: a detector's `rpn_box: nan` at iterations 100 and 200 beside finite
#: classification terms, its wrong samples found by the thread)
TERM_STAYS_PRINTS = 2


def _ev_term_stays(run: Run, q: Quantities, sym: Symptom) -> Msg | None:
    """From the NaN's step on, the log's loss terms show the same term(s) non-finite and some other
    term finite on at least TERM_STAYS_PRINTS prints."""
    comps = run.event("loss_components")
    bad_sets = []
    for step in sorted(k for k in comps if int(k) >= sym.step):
        vals = comps[step]
        if not isinstance(vals, dict):
            continue
        nums = {k: float(v) for k, v in vals.items() if isinstance(v, (int, float)) and not isinstance(v, bool)}
        bad = frozenset(k for k, v in nums.items() if not math.isfinite(v))
        if bad and len(bad) < len(nums):
            bad_sets.append(bad)
    common = frozenset.intersection(*bad_sets) if bad_sets else frozenset()
    if len(bad_sets) < TERM_STAYS_PRINTS or not common:
        return None
    return Msg("diff.ev.term_stays", terms=sorted(common), n=len(bad_sets))


#: a finite loss at least this large just before the NaN had already blown up (no common loss reaches
#: it healthy), or this many times the losses before it
BLOWN_UP = 1e4
BLOWN_UP_RATIO = 100.0


def _ev_blew_up(run: Run, q: Quantities, sym: Symptom) -> Msg | None:
    """The last finite loss before the NaN is >= BLOWN_UP, or >= BLOWN_UP_RATIO x the median before it:
    the values grew through the range before they went non-finite."""
    x = q.loss[_prev_rows(q, sym)]
    if x.size == 0:
        return None
    last = abs(float(x[-1]))
    earlier = np.abs(x[:-1])
    big = last >= BLOWN_UP or (earlier.size >= 1 and last >= BLOWN_UP_RATIO * max(float(np.median(earlier)), 1e-12))
    return Msg("diff.ev.blew_up", loss=float(x[-1])) if big else None


def _ev_intermittent(run: Run, q: Quantities, sym: Symptom) -> Msg | None:
    """>= 2 finite losses after the first NaN at <= 2x the median before it: the run came back."""
    before = q.loss[_prev_rows(q, sym)]
    after = q.loss[q.finite_loss[q.finite_loss > sym.row]]
    if before.size == 0 or after.size < 2 or sym.data.get("source"):
        return None
    base = float(np.median(before))
    back = int((np.abs(after) <= 2 * abs(base)).sum())
    return Msg("diff.ev.intermittent", n=back, base=base) if back >= 2 else None


def _ev_unsteady(run: Run, q: Quantities, sym: Symptom) -> Msg | None:
    x = q.loss[_prev_rows(q, sym)]
    if x.size < 4 or (x <= 0).any():
        return None
    swing = float(np.median(np.abs(np.diff(np.log(x[-10:])))))
    return Msg("diff.ev.unsteady", swing=swing) if swing >= UNSTEADY else None


def _ev_lr_small(run: Run, q: Quantities, sym: Symptom) -> Msg | None:
    lr = _lr_at(q, sym.row)
    return Msg("diff.ev.lr_small", lr=lr) if lr is not None and lr <= LR_SMALL else None


def _ev_first_update(run: Run, q: Quantities, sym: Symptom) -> Msg | None:
    """The NaN is at the first update: the only finite row before it is the run's step 0, with a
    finite loss and gradient norm."""
    prev = _prev_rows(q, sym)
    if prev.size != 1 or int(q.steps[prev[0]]) != 0 or not steps_known(run) or sym.data.get("source"):
        return None
    g = q.grad_norm[prev[0]]
    calm = np.isfinite(g) and g <= FIRST_GRAD_MAX and abs(float(q.loss[prev[0]])) < 1e3
    return Msg("diff.ev.first_update", g=float(g)) if calm and run.has("grad_norm") else None


#: the step-0 gradient norm at most this for a NaN at the first update to be the optimizer's own
#: arithmetic (healthy first norms are O(0.1-10); the zoo's unnormalised features start at 1.7e6,
#: an explosion)
FIRST_GRAD_MAX = 100.0


def _ev_after_sane(run: Run, q: Quantities, sym: Symptom) -> Msg | None:
    x = q.loss[_prev_rows(q, sym)]
    if x.size < 2 or sym.data.get("at_start") or float(np.max(np.abs(x))) >= 1e3:
        return None
    return Msg("diff.ev.after_sane", n=int(x.size), top=float(np.max(x)))


def _ev_repeats(run: Run, q: Quantities, sym: Symptom) -> Msg | None:
    return (
        Msg("diff.ev.repeats", first=sym.data["first"], again=sym.data["again"])
        if sym.kind in ("repeat", "recur")
        else None
    )


def _ev_rising(run: Run, q: Quantities, sym: Symptom) -> Msg | None:
    return Msg("diff.ev.rising", first=sym.data["first"], last=sym.data["last"]) if sym.data.get("rising") else None


def _ev_collapsed(run: Run, q: Quantities, sym: Symptom) -> Msg | None:
    best = sym.data.get("best_before")
    return Msg("diff.ev.collapsed", metric=sym.data["metric"], best=best) if best is not None else None


def _ev_fp16(run: Run, q: Quantities, sym: Symptom) -> Msg | None:
    return Msg("diff.ev.fp16") if precision_of(run) == "fp16" else None


def _ev_wide(run: Run, q: Quantities, sym: Symptom) -> Msg | None:
    p = run.meta.get("precision")
    if p in ("bf16", "fp32") and precision_of(run) != "fp16":
        return Msg("diff.ev.wide_dtype", dtype=str(p))
    return Msg("diff.ev.unit_scale") if unit_scale(run) else None


#: frameworks (the readers' `meta["framework"]`) whose training runs in fp32 unless the user sets a
#: mixed-precision policy (Keras: the global dtype policy is "float32" by default)
FP32_DEFAULT = ("keras",)


def _ev_fp32_default(run: Run, q: Quantities, sym: Symptom) -> Msg | None:
    fw = run.meta.get("framework")
    if fw in FP32_DEFAULT and precision_of(run) is None:
        return Msg("diff.ev.fp32_default", framework=str(fw))
    return None


def _ev_scale_steady(run: Run, q: Quantities, sym: Symptom) -> Msg | None:
    p = scale_path(run, sym.row + 1)
    if p is None or unit_scale(run) or _ev_scale_fell(run, q, sym):
        return None
    return Msg("diff.ev.scale_steady", low=p[1])


def _ev_scale_fell(run: Run, q: Quantities, sym: Symptom) -> Msg | None:
    """The scale fell >= 16x within 10 logged rows up to just after the onset, or below 1."""
    fell = fast_fall(run, sym.row + 2)
    p = scale_path(run, sym.row + 2)
    if fell is None and p is not None and p[1] < 1:
        fell = p
    if fell is None:
        return None
    top, low, row = fell
    return Msg("diff.ev.scale_fell", top=top, low=low, step=int(q.steps[row]))


def _ev_overflow_lines(run: Run, q: Quantities, sym: Symptom) -> Msg | None:
    steps = text_events(run, "overflow", sym.step + 1) + text_events(run, "loss_scale", sym.step + 1)
    return Msg("diff.ev.overflow_lines", n=len(steps), first=min(steps)) if steps else None


def _ev_fp16_model(run: Run, q: Quantities, sym: Symptom) -> Msg | None:
    name = fp16_prone_model(run)
    return Msg("diff.ev.fp16_model", model=name) if name and precision_of(run) in ("fp16", None) else None


def _ev_grad_rose(run: Run, q: Quantities, sym: Symptom) -> Msg | None:
    gn = q.grad_norm[: sym.row + 1]
    fin = np.flatnonzero(np.isfinite(gn))
    if fin.size < 3:
        return None
    g = gn[fin]
    base = float(np.median(g[: max(2, g.size // 2)]))
    top = float(np.max(g[-3:]))
    if base > 0 and top >= 10 * base and top >= 1.0:
        return Msg("diff.ev.grad_rose", base=base, top=top, ratio=top / base)
    return None


def _ev_grad_big(run: Run, q: Quantities, sym: Symptom) -> Msg | None:
    g = q.grad_norm[np.isfinite(q.grad_norm)]
    big = g.size and float(np.max(g)) >= SYMPTOM_LIMITS.grad_level
    return Msg("diff.ev.grad_big", g=float(np.max(g))) if big else None


def _ev_grad_big_unclipped(run: Run, q: Quantities, sym: Symptom) -> Msg | None:
    """A language model's (a cross-entropy's, `is_ce`) median gradient norm in the thousands, and
    no clipping in the run's configuration: every update is taken at that size (healthy LLM runs
    print pre-clip norms of 0.1-10; one that clips at max_grad_norm bounds the step whatever it prints)."""
    g = q.grad_norm[np.isfinite(q.grad_norm)]
    if (
        g.size < 2
        or float(np.median(g)) < SYMPTOM_LIMITS.grad_level
        or not is_ce(run)
        or clip_in_place(run) is not None
    ):
        return None
    return Msg("diff.ev.grad_big_unclipped", g=float(np.median(g)))


def _ev_clips(run: Run, q: Quantities, sym: Symptom) -> Msg | None:
    clip = clip_in_place(run)
    return Msg("diff.ev.clips", max_norm=clip) if clip is not None else None


def _ev_grad_jump_here(run: Run, q: Quantities, sym: Symptom) -> Msg | None:
    for s in symptoms_of(q):
        if s.kind == "grad_jump" and abs(s.row - sym.row) <= 2:
            return Msg("diff.ev.grad_jump", g=s.data["g"], base=s.data["base"], step=s.step)
    return None


def _ev_loss_rose(run: Run, q: Quantities, sym: Symptom) -> Msg | None:
    lf = _prev_rows(q, sym)
    if lf.size < 3:
        return None
    x = q.loss[lf]
    base = float(np.median(x))
    tail = x[-max(2, min(10, x.size // 4)) :]
    progress = max(float(np.median(x[:3])) - base, 0.0)
    # and gave back >= 20% of the progress made (a converged loss near 0 that doubles is noise)
    if base > 0 and float(np.max(tail)) >= max(1.5 * base, base + 0.2 * progress):
        return Msg("diff.ev.loss_rose", top=float(np.max(tail)), base=base)
    return None


def _ev_calm(run: Run, q: Quantities, sym: Symptom) -> Msg | None:
    if _prev_rows(q, sym).size < 20 or _ev_grad_rose(run, q, sym) or _ev_loss_rose(run, q, sym):
        return None
    return Msg("diff.ev.calm", n=int(_prev_rows(q, sym).size))


def _ev_at_start(run: Run, q: Quantities, sym: Symptom) -> Msg | None:
    """Nothing finite before it, at the run's first steps (a first row at step 27 had 27 updates)."""
    first_epoch = run.meta.get("first_epoch")
    if (
        _prev_rows(q, sym).size
        or (steps_known(run) and sym.step > START_STEPS)
        or (isinstance(first_epoch, (int, float)) and first_epoch >= 1)
    ):
        return None  # (a log that starts in its second epoch shows no run's start, whatever its steps)
    return Msg("diff.ev.at_start")


#: a first logged step at or below this is before (or at) the first updates
START_STEPS = 5


def _lr_at(q: Quantities, row: int) -> float | None:
    lr = q.lr[: row + 1]
    fin = lr[np.isfinite(lr)]
    return float(fin.max()) if fin.size and float(fin.max()) > 0 else None


def _ev_lr_judged(verdict: str) -> Evidence:
    """The LR logged up to the symptom (else the configured one: a command line's `--lr`) against what
    is usual for the run's optimizer; with no optimizer named, an LR above every family's usual peak
    is high all the same (an LR of 1e5 needs no optimizer to judge)."""

    def ev(run: Run, q: Quantities, sym: Symptom) -> Msg | None:
        lr = _lr_at(q, sym.row)
        if lr is None:
            lr = peak_lr(run, q)  # no LR logged up to the symptom: what the log shows later, or configured
        judged = judge_lr(run, q, lr)
        if judged is None and verdict == "high":
            return above_every_family(lr)
        return judged[1] if judged and judged[0] == verdict else None

    return ev


def _lr_climb(q: Quantities, row: int) -> tuple[int, float, float] | None:
    """(row of the LR's peak up to `row`, the first LR, the peak) when it climbed >= 3x to it."""
    lr = q.lr[: row + 1]
    rows = np.flatnonzero(np.isfinite(lr) & (lr > 0))
    if rows.size < 2:
        return None
    v = lr[rows]
    p = int(np.argmax(v))
    return (int(rows[p]), float(v[0]), float(v[p])) if v[p] >= 3 * v[0] else None


def _ev_warmup_end(run: Run, q: Quantities, sym: Symptom) -> Msg | None:
    c = _lr_climb(q, sym.row)
    if c is None:
        return None
    peak_row, lr0, peak = c
    near = max(3, q.n // 10)
    return Msg("diff.ev.warmup_end", lr=peak, step=int(q.steps[peak_row])) if 0 <= sym.row - peak_row <= near else None


def _ev_warming(run: Run, q: Quantities, sym: Symptom) -> Msg | None:
    c = _lr_climb(q, sym.row)
    return Msg("diff.ev.warming", lr0=c[1], lr=c[2]) if c is not None and c[0] == _last_lr_row(q, sym.row) else None


def _last_lr_row(q: Quantities, row: int) -> int:
    rows = np.flatnonzero(np.isfinite(q.lr[: row + 1]))
    return int(rows[-1]) if rows.size else -1


def _ev_text(kinds: tuple[str, ...], key: str) -> Evidence:
    def ev(run: Run, q: Quantities, sym: Symptom) -> Msg | None:
        steps = sorted(s for k in kinds for s in text_events(run, k, sym.step + 1))
        return Msg(key, n=len(steps), first=steps[0]) if steps else None

    return ev


def _ev_zero_beside_nan_grad(run: Run, q: Quantities, sym: Symptom) -> Msg | None:
    """The reader read a loss logged as exactly 0 beside a NaN/Inf gradient norm back as NaN (the
    HF Trainer's NaN filter, `records.NAN_FILTER_META`) at or before the symptom."""
    first = run.meta.get(NAN_FILTER_META)
    return (
        Msg("diff.ev.zero_beside_nan_grad", step=int(first)) if isinstance(first, int) and first <= sym.step else None
    )


def _ev_saturated_start(run: Run, q: Quantities, sym: Symptom) -> Msg | None:
    """The run's first loss was far above chance (`bad_init.start_over_chance`): logits that large
    saturate the softmax, and once it is one-hot on every sample its cross-entropy and gradient
    underflow to exactly 0 in fp32."""
    start = start_over_chance(run, q)
    return None if start is None else Msg("diff.ev.saturated_start", loss=start[0], chance=start[1])


def _ev_grad_zero(run: Run, q: Quantities, sym: Symptom) -> Msg | None:
    g = q.grad_norm[sym.row : sym.row + 3]
    return Msg("diff.ev.grad_zero") if run.has("grad_norm") and (np.isfinite(g) & (g == 0)).any() else None


#: logged epochs, all exactly 0, that make an epoch-level zero (fewer: two prints say little)
EPOCH_ZERO_POINTS = 3


def _ev_epoch_zero(run: Run, q: Quantities, sym: Symptom) -> Msg | None:
    """The log prints one loss per epoch (its step is the epoch, one row per epoch in a row) and it
    is exactly 0 at every one from the symptom's on."""
    if run.meta.get("steps_from") != "epoch":
        return None
    lf = q.finite_loss[q.finite_loss >= sym.row]
    x = q.loss[lf]
    if x.size < EPOCH_ZERO_POINTS or not bool((x == 0).all()) or not bool((np.diff(q.steps[lf]) == 1).all()):
        return None
    return Msg("diff.ev.epoch_zero", n=int(x.size))


def _ev_grad_nonfinite(run: Run, q: Quantities, sym: Symptom) -> Msg | None:
    bad = run.logged("grad_norm") & ~np.isfinite(q.grad_norm)
    return Msg("diff.ev.grad_nonfinite", n=int(bad.sum())) if bad.any() else None


def _has(kind: str) -> Callable[[Quantities], Symptom | None]:
    def get(q: Quantities) -> Symptom | None:
        return next((s for s in symptoms_of(q) if s.kind == kind), None)

    return get


def _ev_lr_zero_all(run: Run, q: Quantities, sym: Symptom) -> Msg | None:
    s = _has("lr_zero")(q)
    return Msg("diff.ev.lr_zero_all", n=s.data["n"]) if s else None


def _ev_lr_tiny(run: Run, q: Quantities, sym: Symptom) -> Msg | None:
    s = _has("lr_tiny")(q)
    return Msg("diff.ev.lr_tiny", lr=s.data["lr"]) if s else None


def _ev_recovered(run: Run, q: Quantities, sym: Symptom) -> Msg | None:
    return Msg("diff.ev.recovered") if sym.data.get("recovered") is True else None


def _ev_sudden(run: Run, q: Quantities, sym: Symptom) -> Msg | None:
    sudden = sym.kind == "jump_stayed" and not sym.data.get("climb")
    return Msg("diff.ev.sudden", ratio=sym.data["ratio"]) if sudden else None


def _ev_to_chance(run: Run, q: Quantities, sym: Symptom) -> Msg | None:
    v = sym.data.get("loss") if sym.kind == "jump_stayed" else None
    if not v:
        return None
    k = min(COMMON_K, key=lambda k: abs(math.log(k) - float(v)))
    return Msg("diff.ev.to_chance", loss=float(v), k=k) if k >= 1000 and abs(math.log(k) - v) <= 0.02 * v else None


def clamped(q: Quantities, from_row: int = 0) -> tuple[int, Msg] | None:
    """(the first row, the sentence) where the loss sits at a clamp's ceiling from `from_row` on: the
    network's output for the true class underflowed (outputs overflowing, most often a step too
    large; or a label outside the output's range), whatever the curve looks like around it."""
    x = q.loss[from_row:]
    ok = np.isfinite(x)
    for ceiling, name in CLAMP_CEILINGS:
        at = ok & (np.abs(np.where(ok, x, 0.0) - ceiling) <= CLAMP_TOL * ceiling)
        if at.any():
            n = int(at.sum())
            return from_row + int(np.argmax(at)), Msg(
                "diff.ev.clamped", loss=round(ceiling, 4), n=n, what=Msg(f"diff.clamp.{name}")
            )
    return None


def _ev_clamped(run: Run, q: Quantities, sym: Symptom) -> Msg | None:
    hit = clamped(q, sym.row)
    return hit[1] if hit else None


def _ev_negative(run: Run, q: Quantities, sym: Symptom) -> Msg | None:
    return Msg("diff.ev.negative") if sym.data.get("negative") else None


def _ev_constant(run: Run, q: Quantities, sym: Symptom) -> Msg | None:
    tail = sym.kind == "stuck" or sym.data.get("tail")
    return Msg("diff.ev.constant") if tail or identical(run, q, q.loss[q.finite_loss]) else None


def _ev_froze_after_moving(run: Run, q: Quantities, sym: Symptom) -> Msg | None:
    """The flat tail (`stuck`, or a chance level on the log's last points) came after losses that differed."""
    if not (sym.kind == "stuck" or sym.data.get("tail")):
        return None
    before = q.loss[q.finite_loss[q.finite_loss < sym.row]]
    return (
        Msg("diff.ev.froze_after_moving", n=int(before.size), level=f"{sym.data['level']:.10g}")
        if before.size
        else None
    )


def _ev_negative_level(run: Run, q: Quantities, sym: Symptom) -> Msg | None:
    """The negative-loss evidence: an absurd symptom's own, or a flat loss that sits below 0."""
    if sym.kind in ("stuck", "constant") and float(sym.data.get("level", 0.0)) < 0:
        return Msg("diff.ev.negative")
    return _ev_negative(run, q, sym)


#: class counts whose binary entropy H(1/K) a flat loss is compared with (K >= 3: at K = 2 it is ln 2,
#: a softmax's chance level too), and the relative tolerance (`chance_of`'s 0.2%)
BCE_KS = tuple(k for k in COMMON_K if k >= 3)
BCE_TOL = 0.002


def _ev_bce_base_rate(run: Run, q: Quantities, sym: Symptom) -> Msg | None:
    """The flat level is H(1/K) = -(1/K) ln(1/K) - (1 - 1/K) ln(1 - 1/K) for a common K >= 3: the mean
    binary cross-entropy of K one-hot columns predicted at their base rate 1/K (Keras'
    binary_crossentropy on a 20-class softmax target sits at 0.1985, its accuracy at 0.95)."""
    level = sym.data.get("level")
    if not isinstance(level, (int, float)) or not level > 0:
        return None
    for k in BCE_KS:
        h = -(1 / k) * math.log(1 / k) - (1 - 1 / k) * math.log(1 - 1 / k)
        if abs(float(level) - h) <= BCE_TOL * h:
            return Msg("diff.ev.bce_base_rate", level=float(level), k=k, h=h)
    return None


def _ev_train_moves(run: Run, q: Quantities, sym: Symptom) -> Msg | None:
    """The held-out loss froze while the training loss moved (`eval_constant`)."""
    return Msg("diff.ev.train_moves") if sym.kind == "eval_constant" else None


def _ev_clamped_share(run: Run, q: Quantities, sym: Symptom) -> Msg | None:
    level = sym.data.get("level")
    if sym.kind == "saturated":  # the identity held row by row: the symptom measured it
        return clamped_share_msg(sym.data["level"], sym.data["share"], sym.data["clamp"])
    return clamped_share(run, q, float(level)) if isinstance(level, (int, float)) else None


def _ev_scale_below_one(run: Run, q: Quantities, sym: Symptom) -> Msg | None:
    return Msg("diff.ev.scale_below_one", low=sym.data["low"]) if sym.data.get("low", 2.0) < 1 else None


def _ev_loss_moving(run: Run, q: Quantities, sym: Symptom) -> Msg | None:
    x = q.loss[q.finite_loss]
    return Msg("diff.ev.loss_moving") if x.size >= 3 and float(np.ptp(x)) > 0.05 * abs(float(np.median(x))) else None


def _ev_first_updates(run: Run, q: Quantities, sym: Symptom) -> Msg | None:
    """The jump came within the first 3 logged points of a log that shows the run's start."""
    lf = q.finite_loss
    numbered = run.meta.get("steps_from") == "numbered"  # line numbers from 1 say nothing of the run's start
    if lf.size == 0 or int(q.steps[lf[0]]) > 5 or _prev_rows(q, sym).size > 3 or numbered:
        return None
    return Msg("diff.ev.first_updates", n=int(_prev_rows(q, sym).size))


#: a climb that goes on: the point before the symptom and at least this many after it, rising at each
KEPT_RISING_AFTER = 2
#: a V: at least this many falling intervals to the best, and as many rising ones from it to the end
V_SIDE = 3
#: ... rising smoothly: no interval of the rise carries more than this share of it (`climb_step_share`'s
#: 0.7 is a jump; a V climbs in even steps)
V_STEP_SHARE = 0.5


def _ev_v_turn(run: Run, q: Quantities, sym: Symptom) -> Msg | None:
    """The loss fell at every logged point to its lowest (>= V_SIDE intervals), then rose at every
    point from there to the end (>= V_SIDE intervals), no interval carrying more than V_STEP_SHARE of
    the rise."""
    lf = q.finite_loss[q.finite_loss < q.healthy_end]
    x = q.loss[lf]
    if sym.kind not in ("rise", "jump_stayed") or x.size <= V_SIDE + V_SIDE:
        return None
    b = int(np.argmin(x))
    down, up = np.diff(x[: b + 1]), np.diff(x[b:])
    if down.size < V_SIDE or up.size < V_SIDE or (down >= 0).any() or (up <= 0).any():
        return None
    if float(np.max(up)) > V_STEP_SHARE * float(x[-1] - x[b]):
        return None
    return Msg("diff.ev.v_turn", best=float(x[b]), step=int(q.steps[lf[b]]), first=float(x[0]), last=float(x[-1]))


def _ev_kept_rising(run: Run, q: Quantities, sym: Symptom) -> Msg | None:
    """From the point before the symptom (or the symptom's own point when it is the lower: a rise
    dated at its lowest point) to the end of the log the loss rose at every logged point, over >= 2
    intervals (a climb that goes on, not a step up that levels off)."""
    lf = q.finite_loss[q.finite_loss < q.healthy_end]
    k = int(np.searchsorted(lf, sym.row))
    x = q.loss[lf[max(0, k - 1) :]]
    if k > 0 and x.size > 1 and x[1] < x[0]:
        x = x[1:]
    if k == 0 or x.size <= KEPT_RISING_AFTER or not bool((np.diff(x) > 0).all()):
        return None
    return Msg("diff.ev.kept_rising", n=int(x.size - 1), last=float(x[-1]))


def _ev_all_skipped(run: Run, q: Quantities, sym: Symptom) -> Msg | None:
    return Msg("diff.ev.all_skipped", n=sym.data["n"]) if sym.data.get("all_skipped") else None


def _ev_loss_finite(run: Run, q: Quantities, sym: Symptom) -> Msg | None:
    i = sym.row
    if sym.data.get("from_text") or sym.data.get("source") in ("text", "component"):
        return None  # a NaN only the text tells, or a component's: not this row's gradient
    return Msg("diff.ev.loss_finite") if q.loss_logged[i] and np.isfinite(q.loss[i]) else None


EVIDENCE: dict[str, Evidence] = {
    "fp16": _ev_fp16,
    "wide_dtype": _ev_wide,
    "fp32_default": _ev_fp32_default,
    "scale_fell": _ev_scale_fell,
    "overflow_lines": _ev_overflow_lines,
    "fp16_model": _ev_fp16_model,
    "grad_rose": _ev_grad_rose,
    "grad_big": _ev_grad_big,
    "grad_big_unclipped": _ev_grad_big_unclipped,
    "clips": _ev_clips,
    "grad_jump_here": _ev_grad_jump_here,
    "loss_rose": _ev_loss_rose,
    "calm": _ev_calm,
    "at_start": _ev_at_start,
    "lr_high": _ev_lr_judged("high"),
    "lr_usual": _ev_lr_judged("usual"),
    "warmup_end": _ev_warmup_end,
    "warming": _ev_warming,
    "nonfinite_text": _ev_text(("nonfinite_warning",), "diff.ev.nonfinite_text"),
    "labels_ignored": _ev_text(("labels_ignored", "empty_target", "truncation"), "diff.ev.labels_ignored"),
    "grad_zero": _ev_grad_zero,
    "saturated_start": _ev_saturated_start,
    "zero_beside_nan_grad": _ev_zero_beside_nan_grad,
    "grad_nonfinite": _ev_grad_nonfinite,
    "epoch_zero": _ev_epoch_zero,
    "lr_zero_all": _ev_lr_zero_all,
    "lr_tiny": _ev_lr_tiny,
    "recovered": _ev_recovered,
    "sudden": _ev_sudden,
    "to_chance": _ev_to_chance,
    "clamped": _ev_clamped,
    "negative": _ev_negative_level,
    "constant_loss": _ev_constant,
    "bce_base_rate": _ev_bce_base_rate,
    "clamped_share": _ev_clamped_share,
    "train_moves": _ev_train_moves,
    "froze_after_moving": _ev_froze_after_moving,
    "scale_below_one": _ev_scale_below_one,
    "loss_moving": _ev_loss_moving,
    "loss_finite": _ev_loss_finite,
    "all_skipped": _ev_all_skipped,
    "scale_steady": _ev_scale_steady,
    # the text's events (detectors/log_events.py)
    "nan_input": ev_nan_input,
    "scale_floor": ev_scale_floor,
    "op_attention": ev_op_attention,
    "op_domain": ev_op_domain,
    "op_overflow": ev_op_overflow,
    "grad_text": ev_grad_text,
    "resumed": ev_resumed_here,
    "first_updates": _ev_first_updates,
    "kept_rising": _ev_kept_rising,
    "v_turn": _ev_v_turn,
    "early": _ev_early,
    "intermittent": _ev_intermittent,
    "unsteady": _ev_unsteady,
    "lr_small": _ev_lr_small,
    "after_sane": _ev_after_sane,
    "repeats": _ev_repeats,
    "rising": _ev_rising,
    "collapsed": _ev_collapsed,
    "first_update": _ev_first_update,
    "late": _ev_late,
    "trained_long": _ev_trained_long,
    "grad_rose_at_peak": _ev_grad_rose_at_peak,
    "one_term": _ev_one_term,
    "term_stays": _ev_term_stays,
    "blew_up": _ev_blew_up,
}


# ------------------------------------------------------------------ ranking


@dataclass
class Ranked:
    causes: list[tuple[str, float]]  # (cause, share), best first
    present: dict[str, Msg]  # evidence name -> its sentence
    table: tuple[Row, ...]

    @property
    def leader(self) -> str:
        return self.causes[0][0]

    @property
    def runner_up(self) -> str | None:
        return self.causes[1][0] if len(self.causes) > 1 else None

    def said(self, cause: str, sign: int) -> list[str]:
        """The present evidence whose rows point for (sign 1) or against (-1) `cause`."""
        names = [
            r.evidence
            for r in self.table
            if r.cause == cause and r.evidence != ALWAYS and r.evidence in self.present and (r.weight > 0) == (sign > 0)
        ]
        return [self.present[n] for n in dict.fromkeys(names)]


def rank(run: Run, q: Quantities, sym: Symptom, table: str) -> Ranked:
    """The causes of `sym` scored by the rows of TABLES[table] whose evidence the log holds; the
    shares are a softmax of the scores."""
    rows = TABLES[table]
    present: dict[str, Msg] = {}
    for name in dict.fromkeys(r.evidence for r in rows if r.evidence != ALWAYS):
        with np.errstate(all="ignore"):
            m = EVIDENCE[name](run, q, sym)
        if m is not None:
            present[name] = m
    score: dict[str, float] = {}
    for r in rows:
        if r.evidence == ALWAYS or r.evidence in present:
            score[r.cause] = score.get(r.cause, 0.0) + r.weight
    top = max(score.values())
    z = {c: math.exp(2.0 * (s - top)) for c, s in score.items()}
    total = sum(z.values())
    causes = sorted(((c, v / total) for c, v in z.items()), key=lambda t: -t[1])
    return Ranked(causes=causes, present=present, table=rows)


# ------------------------------------------------------------------ findings


def what(sym: Symptom) -> Msg:
    """The symptom as a sentence, with its numbers."""
    d = dict(sym.data, step=sym.step)
    special = _what_special(sym, d)
    if special is not None:
        return special
    keys = _WHAT_KEYS[sym.kind]
    if sym.kind in ("stuck", "constant", "eval_constant"):  # "exactly" that value: as printed, not rounded
        d.update({k: f"{d[k]:.10g}" for k in ("level", "before") if k in d})
    return Msg(f"diff.what.{sym.kind}", **{k: d[k] for k in keys})


def _what_special(sym: Symptom, d: dict[str, Any]) -> Msg | None:
    """The sentence of a symptom whose variant (its source, a signed or opening jump) says more than
    its kind's numbers; None for the plain ones."""
    if sym.kind == "absurd":
        why = (
            "diff.absurd.negative"
            if d["negative"]
            else "diff.absurd.huge"
            if abs(d["loss"]) >= 1e6
            else "diff.absurd.ce_high"
        )
        return Msg("diff.what.absurd", loss=d["loss"], step=sym.step, why=Msg(why))
    if sym.kind == "scale_collapse" and d["top"] == d["low"]:  # below 1 from its first print: it did not fall here
        return Msg("diff.what.scale_low", low=d["low"], step=sym.step)
    if sym.kind == "spike" and d.get("opening"):
        return Msg(
            "diff.what.spike_opening", loss=d["loss"], step=sym.step, ratio=d["ratio"], base=d["base"], after=d["after"]
        )
    if sym.kind == "spike" and d.get("one_out"):
        return Msg(
            "diff.what.signed_one_out", loss=d["loss"], step=sym.step, sigmas=d["sigmas"], base=d["base"], n=d["n"]
        )
    if sym.kind in ("spike", "jump_stayed") and d.get("signed"):
        after = Msg("diff.what.signed_after", level=d["level_after"]) if d["level_after"] is not None else ""
        return Msg(
            "diff.what.signed_jump",
            loss=d["loss"],
            step=sym.step,
            sigmas=d["sigmas"],
            base=d["base"],
            before=d["before"],
            after=after,
        )
    if sym.kind == "jump_stayed" and d.get("climb"):
        return Msg("diff.what.climb", loss=d["loss"], step=sym.step, ratio=d["ratio"], base=d["base"])
    if sym.kind == "nonfinite" and d.get("source") == "component":
        return Msg("diff.what.nonfinite_component", name=d["name"], step=sym.step)
    if sym.kind == "nonfinite" and d.get("source") == "text":
        return Msg("diff.what.nonfinite_text", step=sym.step)
    if sym.kind == "nonfinite" and d.get("source") == "grad":
        return Msg("diff.what.nonfinite_grad", n=d["n"], step=sym.step)
    return None


#: the numbers each plain symptom's sentence quotes (`diff.what.<kind>`)
_WHAT_KEYS: dict[str, tuple[str, ...]] = {
    "nonfinite": ("step",),
    "spike": ("loss", "step", "ratio", "base", "before"),
    "jump_stayed": ("loss", "step", "ratio", "base", "before"),
    "rise": ("best", "best_step", "end", "ratio", "step"),
    "zero": ("n", "step"),
    "constant": ("level", "n"),
    "eval_constant": ("level", "n"),
    "chance": ("level", "n", "k", "chance"),
    "saturated": ("level", "share", "clamp", "n", "of", "step"),
    "stuck": ("level", "n", "step", "before"),
    "grad_jump": ("g", "step", "ratio", "base"),
    "grad_level": ("median", "top"),
    "grad_level_jump": ("median", "top", "base", "loss", "ratio", "step"),
    "scale_collapse": ("top", "low", "low_step"),
    "skips": ("k", "n", "step"),
    "lr_zero": ("n",),
    "lr_tiny": ("lr", "first", "last"),
    "repeat": ("first", "again", "n", "step"),
    "recur": ("first", "again", "n", "step", "level"),
    "no_fall": ("first", "low", "last", "n", "step", "end_step"),
    "epoch_flat": ("first", "last", "n", "step", "end_step"),
    "fit_flat": ("first", "last", "n", "step", "end_step", "eval_first", "eval_last"),
    "lm_untrained": ("first", "last", "n", "step", "end_step", "level"),
    "metric_worst": ("metric", "first", "last", "n", "step", "end_step", "loss_first", "loss_last"),
    "rising_start": ("first", "last", "n", "ratio"),
    "creep": ("best", "best_step", "end", "ratio", "step", "n"),
    "oscillation": ("step", "swing", "base", "n"),
}


def finding_for(run: Run, q: Quantities, sym: Symptom) -> Finding:
    """The symptom's finding: the differential's leader, the evidence for and against it, the
    runner-up and what separates them, and fixes as certain as the ranking."""
    table, symptom, severity = KINDS[sym.kind]
    r = rank(run, q, sym, table)
    lead, share = r.causes[0]
    ev: list[str] = [what(sym)] + r.said(lead, 1)
    second = r.runner_up
    against = [m for m in r.said(lead, -1) + (r.said(second, 1) if second else []) if m not in ev]
    if against:
        ev.append(Msg("diff.against", items=list(dict.fromkeys(against))))
    sep = None
    if second:
        ev.append(Msg("diff.ranked", first=lead, p1=share, second=second, p2=r.causes[1][1]))
        sep = Msg(
            "diff.sep." + SEPARATE.get(frozenset((lead, second)), "generic"), first=lead, second=second, step=sym.step
        )
        ev.append(Msg("diff.separate", how=sep))
    cut = cut_evidence(run, q, _rise_onset(q, sym), sym.kind == "nonfinite") if lead == "lr_too_high" else None
    if cut is not None:  # a too-large LR leads: its cut only on evidence that holds (`lr_advice`)
        held, why = cut
        if held is None:
            ev.append(withheld(why))
        elif getattr(held, "key", "").startswith("lr.advice."):
            ev.append(held)  # what the cut rests on (the LR's usual range is a row of its own)
        if held is None and severity == "critical" and sym.kind != "nonfinite":
            severity = "warning"  # the symptom with the LR as one candidate, and the measurement
    fixes = _fixes(run, q, sym, lead, share, sep, cut is not None and cut[0] is not None)
    conf = min(CONF_CAP, max(CONF_FLOOR, share))
    if second and _unseparated(r):
        conf = min(conf, UNSEPARATED_CONF)  # nothing in the log separates the causes: it says so
        ev.append(Msg("diff.unseparated", first=lead, second=second))
    batch = sym.step if sym.kind in ("nonfinite", "spike", "jump_stayed") else None
    return Finding(
        cause=lead,
        symptom=symptom,
        severity=severity,
        confidence=conf,
        step=sym.step,
        batch=batch,
        rank=run.rank,
        evidence=ev,
        fixes=as_fixes(fixes),
        rule=f"differential.{sym.kind}",
    )


def _rise_onset(q: Quantities, sym: Symptom) -> int:
    """The row an LR cut's evidence is measured from: the symptom's, or for a loss beyond its
    kind's range the start of the rise or jump that took it there (the LR made the climb, not the
    point where it crossed a range)."""
    if sym.kind != "absurd":
        return sym.row
    rows = [s.row for s in symptoms_of(q) if s.kind in ("rise", "jump_stayed") and s.row <= sym.row]
    return min(rows, default=sym.row)


def _unseparated(r: Ranked) -> bool:
    """The log's evidence does not separate the leader from the runner-up: no clear lead, and either
    nothing but the prior speaks for the leader or the runner-up's share is within SEPARATED_RATIO."""
    share, second = r.causes[0][1], r.causes[1][1]
    return share < CLEAR_LEAD and (not r.said(r.leader, 1) or share < SEPARATED_RATIO * second)


def _fixes(
    run: Run, q: Quantities, sym: Symptom, lead: str, share: float, sep: Msg | None, cut_holds: bool = False
) -> list[FixLike]:
    out: list[FixLike] = []
    if share >= CLEAR_LEAD:
        for key in FIXES.get(lead, ()):
            if key == "clip" and clip_in_place(run) is not None:
                continue  # the run clips already: clipping again is no fix
            if key == "lower_lr" and (sym.kind in ("spike", "grad_jump") or sym.data.get("recovered") or not cut_holds):
                continue  # a one-off that came back, or a rise the log does not show held: no slower run
            if key in ("bf16_or_fp32_op",) and precision_of(run) in ("bf16", "fp32"):
                continue
            out.append(Msg("diff.fix." + key, step=sym.step))
    if sep is not None:
        out.append(Fix("measure", None, Msg("diff.fix.measure", how=sep)))
    before = q.finite_loss[q.finite_loss < sym.row]
    if before.size:
        out.append(Fix("rerun", None, Msg("diff.fix.rerun", step=int(q.steps[before[-1]]), onset=sym.step)))
    return out or [Msg("diff.fix.log_more")]


#: a finding's symptom -> the symptoms of other findings that already show what it shows
COVERS: dict[str, tuple[str, ...]] = {
    "nonfinite": ("nonfinite",),
    "spike": ("spike", "divergence", "nonfinite", "oscillation"),
    "divergence": ("divergence", "nonfinite", "oscillation", "spike"),
    "oscillation": ("oscillation", "divergence", "nonfinite", "spike"),
    "zero_loss": ("zero_loss", "nonfinite"),
    "stall": ("stall", "plateau", "slow_convergence", "zero_loss", "skipped_steps"),
    "plateau": ("stall", "plateau", "slow_convergence", "zero_loss"),
    "slow_convergence": ("stall", "plateau", "slow_convergence", "zero_loss"),
    "skipped_steps": ("skipped_steps", "stall"),
}


def fill_gaps(run: Run, q: Quantities, findings: list[Finding]) -> list[Finding]:
    """Findings for the symptoms that no alarm of the specific detectors shows (one per symptom
    family), so that a visible symptom is never left without a warning or critical finding."""
    shown = {f.symptom for f in findings if f.severity in ("warning", "critical")}
    if any(
        f.symptom == "skipped_steps" or f.cause == "loss_scale_collapse"
        for f in findings
        if f.severity in ("warning", "critical")
    ):
        shown.add("skipped_steps")
    out: list[Finding] = []
    never = _grads_never_finite(q)
    for sym in symptoms_of(q) + ([never] if never else []):
        symptom = KINDS[sym.kind][1]
        if shown & set(COVERS[symptom]) and not _predates(q, sym, findings + out):
            _date_back(q, sym, findings)
            continue
        if q.first_bad is not None and sym.kind != "nonfinite" and sym.row >= q.first_bad:
            continue
        out.append(finding_for(run, q, sym))
        shown.add(symptom)
    return out


#: a symptom that begins more than this many logged rows before every alarm that covers it is
#: reported too: those alarms date the fault where one of its points first crossed their bar (a
#: long log's level shift of x1.7 under 3% noise: the spike rule's first point past x2 came 20-40
#: rows after the step), the symptom where it began
EARLIER_ROWS = 5


def _predates(q: Quantities, sym: Symptom, findings: list[Finding]) -> bool:
    """The symptom (a level shift or a rise, the kinds dated where they began) begins more than
    EARLIER_ROWS logged rows before every warning/critical finding that shows the same symptom."""
    if sym.kind not in ("jump_stayed", "rise"):
        return False
    if sym.kind == "rise" and any(s.kind == "jump_stayed" for s in symptoms_of(q)):
        return False  # a step up: the jump dates it, the rise's fit of a trend does not
    symptom = KINDS[sym.kind][1]
    covering = [f for f in findings if f.severity in ("warning", "critical") and f.symptom in COVERS[symptom]]
    steps = [int(f.step) for f in covering if f.step is not None]
    if not steps or len(steps) < len(covering):
        return False  # an undated alarm: nothing to say the symptom came first
    first = int(np.searchsorted(q.steps, min(steps)))
    return first - sym.row > EARLIER_ROWS


def _date_back(q: Quantities, sym: Symptom, findings: list[Finding]) -> None:
    """A step up or a rise (the kinds dated where they began) that alarms of the same symptom date up
    to EARLIER_ROWS rows later (where a point first crossed their bar: the spike rule's third point
    of a loss climbing x4 a print): those alarms are dated where it began, as `engine` dates a
    finding of the same cause. (A NaN alarm stays at its NaN.)"""
    if sym.kind not in ("jump_stayed", "rise"):
        return
    if sym.kind == "rise" and any(s.kind == "jump_stayed" for s in symptoms_of(q)):
        return  # a step up: the jump dates it
    symptom = KINDS[sym.kind][1]
    for f in findings:
        if f.severity in ("warning", "critical") and f.symptom == symptom and f.step is not None:
            rows = int(np.searchsorted(q.steps, int(f.step))) - sym.row
            if 0 < rows <= EARLIER_ROWS:
                f.step = sym.step


#: the loss moved at least this share of its first value between the first and the last logged point
GRAD_NAN_LOSS_MOVED = 0.1
#: with a flat loss, this many logged rows with a non-finite gradient norm and no finite one, past
#: the scaler's search for its scale, are a run whose every update was skipped: nothing trains
GRAD_NAN_FLAT_ROWS = 4
#: the search: a dynamic loss scale starts at 2^16 (torch) or 2^32 (DeepSpeed) and halves once per
#: overflowing step, ~16 steps at most; rows past it, or a first row this far into the first epoch
#: (2% of an epoch of >= 800 updates), are past the search
GRAD_NAN_SEARCH_STEPS = 20
GRAD_NAN_SEARCH_EPOCH = 0.02


def _grads_never_finite(q: Quantities) -> Symptom | None:
    """Every logged gradient norm (>= 2) non-finite while every loss is finite and the loss moved
    (>= GRAD_NAN_LOSS_MOVED): `Quantities` files those rows as skipped updates
    (`survived_nonfinite_grads`), but a loss that moves says the weights did change, under gradients
    whose norm is NaN. No update the log shows was sound: as critical as a NaN loss. A flat loss
    under them is what skipped updates make: critical too once the rows are past the scaler's
    search (`_past_search`): every update the log shows was thrown away."""
    rows = q.survived_nonfinite_grads
    if rows.size < 2 or rows.size != int(q.run.logged("grad_norm").sum()):
        return None
    x = q.loss[q.loss_logged & np.isfinite(q.loss)]  # (`finite_loss` leaves skipped rows out: all of them here)
    if x.size < 2:
        return None
    flat = abs(float(x[-1]) - float(x[0])) < GRAD_NAN_LOSS_MOVED * abs(float(x[0]))
    if flat and not (rows.size >= GRAD_NAN_FLAT_ROWS and _past_search(q, rows)):
        return None  # the scaler finding its scale, or too few rows: the skipped-updates finding tells it
    if any(s.kind == "nonfinite" for s in symptoms_of(q)):
        return None
    data: dict[str, Any] = {"source": "grad", "n": int(rows.size), "all_skipped": flat}
    return Symptom(kind="nonfinite", row=int(rows[0]), step=int(q.steps[rows[0]]), data=data)


def _past_search(q: Quantities, rows: np.ndarray) -> bool:
    """The rows lie past a dynamic loss scale's search: more of them than the search takes steps,
    the last one past it at the trainer's own steps, or a first logged epoch past its share."""
    run = q.run
    epoch = run.meta.get("first_epoch")
    return bool(
        rows.size > GRAD_NAN_SEARCH_STEPS
        or (steps_known(run) and int(q.steps[rows[-1]]) > GRAD_NAN_SEARCH_STEPS)
        or (isinstance(epoch, (int, float)) and epoch >= GRAD_NAN_SEARCH_EPOCH)
    )


def reconsider(run: Run, q: Quantities, findings: list[Finding]) -> list[Finding]:
    """The curve-only rules' default causes, weighed again: a NaN named `nonfinite_data` from the
    curve's calm alone (confidence <= 0.5), and a loss of exactly 0 named `label_mask_empty` from the
    loss alone, are replaced by the differential's finding when its evidence ranks another cause first;
    an `lr_too_high` NaN whose only evidence is "never improved" (`SOFT_LR_KEYS`) always is (then
    the LR is as certain as the log's evidence makes it, with the runner-up named)."""
    if run.has("label_ignored_frac") or run.event("batch_nonfinite_detail"):
        return findings
    out = []
    for f in findings:
        sym = _default_symptom(q, f)
        if sym is not None:
            g = finding_for(run, q, sym)
            # the curve rule weighed the curve already: only evidence it cannot see (the precision,
            # the text's events, the LR) moves the cause
            if (
                _soft_lr_default(f)
                or g.cause != f.cause
                and (
                    g.cause in FP16_CAUSES + TEXT_CAUSES + ("lr_schedule_error", "label_mask_empty")
                    or f.cause == "label_mask_empty"
                )
            ):
                g.step = f.step
                f = g
        out.append(_precision_first(run, q, f))
    return out


#: evidence that the fp16 loss scaler was failing where a curve rule saw a divergence or a spike
SCALER_FAILING = ("diff.ev.scale_fell", "diff.ev.overflow_lines")
FP16_CAUSES = ("loss_scale_collapse", "activation_overflow")
#: causes only evidence beyond the curve can lead with (the LR, the text's events: an op anomaly mode names)
TEXT_CAUSES = ("lr_schedule_error", "label_mask_empty", "attention_overflow")


def _precision_first(run: Run, q: Quantities, f: Finding) -> Finding:
    """A divergence or spike that a curve rule named (the LR, a spike, an explosion) while the fp16
    scale collapsed or overflow lines were printed at the same place: the differential of that
    symptom, when it ranks the scaler's causes first (an LR cut does not stop fp16 overflowing).
    Not for runs `watch` recorded (their direct evidence names the cause)."""
    if (
        f.cause in FP16_CAUSES
        or f.symptom not in ("divergence", "spike")
        or f.severity == "info"
        or f.step is None
        or run.event("fwd_first_nonfinite")
        or run.layers is not None
    ):
        return f
    row = int(np.searchsorted(q.steps, f.step))
    for sym in symptoms_of(q):
        if KINDS[sym.kind][1] in ("divergence", "spike") and abs(sym.row - row) <= 10:
            g = finding_for(run, q, sym)
            if g.cause in FP16_CAUSES and any(getattr(m, "key", None) in SCALER_FAILING for m in g.evidence):
                return g
    return f


#: the evidence of the LR rule's "never improved, then NaN" when it is all that rule saw: a
#: default (a loss that fell 17% in three points and then went NaN says nothing of the LR by itself);
#: with the reason its cut was withheld (`lr_advice`: no climb before the NaN)
SOFT_LR_KEYS = frozenset({"lr.high.never_improved", "lr.high.peak_at", "lr.advice.withheld"})


def _soft_lr_default(f: Finding) -> bool:
    keys = {getattr(m, "key", None) for m in f.evidence}
    return f.cause == "lr_too_high" and f.symptom == "nonfinite" and bool(keys) and keys <= SOFT_LR_KEYS


def _default_symptom(q: Quantities, f: Finding) -> Symptom | None:
    if f.cause == "nonfinite_data" and f.symptom == "nonfinite" and f.confidence <= 0.5 or _soft_lr_default(f):
        kind = "nonfinite"
    elif f.cause == "label_mask_empty" and f.symptom == "zero_loss":
        kind = "zero"
    else:
        return None
    return next((s for s in symptoms_of(q) if s.kind == kind), None)
