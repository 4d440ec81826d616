"""The public vocabulary: causes, symptoms and severities.

These names are part of the contract (see the JSON schema `lossdoctor.report/1`): users grep for
them and CI gates on them, so they never change; new ones may be added. Each cause carries a
one-line explanation that the human report formats and the README's cause table use.
"""

from __future__ import annotations

SCHEMA = "lossdoctor.report/1"

SEVERITIES = ("info", "warning", "critical")
SEVERITY_RANK = {name: i for i, name in enumerate(SEVERITIES)}

CAUSES: dict[str, str] = {
    "nonfinite_data": "NaN/Inf or absurd values in the batch (inputs or targets)",
    "grad_explosion": "gradient norm grows without bound, then overflows",
    "loss_scale_collapse": "fp16 loss scale keeps falling and steps keep being skipped",
    "attention_overflow": "attention logits overflow or a fully masked row makes softmax NaN",
    "bad_init": "initial weights give extreme activations or a loss far from chance",
    "lr_too_high": "learning rate too high: loss jumps, oscillates or diverges",
    "lr_too_low": "learning rate too low: updates are tiny and the loss crawls",
    "lr_schedule_error": "the LR schedule is not what was intended (warm-up, period, stepping)",
    "label_mask_empty": "every label is masked: loss is 0 or NaN and gradients are zero",
    "label_mask_leak": "prompt or padding tokens are supervised: the model learns to copy",
    "vanishing_gradient": "early layers receive almost no gradient",
    "noisy_data": "noisy or mismatched labels: the loss stalls high",
    "loss_spike": "the loss suddenly rises after training well, without going NaN",
    "precision_stall": "updates are below the resolution of the weights' or loss's dtype",
    "nondeterministic_fault": "the failure does not reproduce on replay: hardware or a race",
    "activation_overflow": "forward activations beyond the dtype's range (fp16 max 65504)",
    "grad_accum_normalization": "gradient accumulation scales the loss wrong: each step optimises k "
    "times (or 1/k of) the mean loss of its micro-batches",
    "frozen_model": "the weights do not change: parameters frozen or detached from the loss, or an "
    "optimizer that never steps",
    "grad_not_zeroed": "gradients are never zeroed between optimizer steps: each update is the sum of "
    "every gradient so far",
    "softmax_before_loss": "the model outputs probabilities (softmax already applied) to a loss that applies "
    "its own softmax (CrossEntropyLoss): the loss saturates far above zero",
    "unshuffled_data": "the data is ordered (by class) instead of shuffled: stretches of batches hold one "
    "class each, and the loss jumps where the class changes",
    "labels_not_shifted": "the labels are the inputs at the same position (no shift): the model learns to "
    "copy its input and the loss falls far below what next-token prediction allows",
    "eval_mode_training": "the model trains in eval mode (model.eval() left on): dropout is off and BatchNorm "
    "normalises with its running statistics",
    "loss_broadcast": "the loss compares tensors whose shapes broadcast ((B, 1) predictions against (B,) "
    "targets): every prediction is scored against every target, so only the mean is learned",
    "grad_clip_too_tight": "gradient clipping at a max_norm far below the gradient norm: every update is "
    "scaled down by the same large factor",
    "labels_misaligned": "inputs and labels are drawn in different orders (two shuffled loaders, a permutation "
    "applied to one of them): the labels say nothing about the inputs and the loss never "
    "goes below chance",
    "wrong_loss": "the loss does not fit the task: a regression loss (MSE) or a binary loss on class indices, "
    "a single output where a cross-entropy needs one per class",
    "batchnorm_batch_of_one": "BatchNorm in train mode on a batch of one sample (a last, incomplete batch "
    "without drop_last): the batch statistics are one sample's",
    "likelihood_displacement": "preference training lowers the chosen answers' likelihood along with the "
    "rejected ones: both rewards fall, the margin grows only a little",
    "reward_overoptimization": "preference training over-optimises: reward margins grow without bound and "
    "the accuracy saturates at 1.0 (LR too high or beta too small)",
}

SYMPTOMS: dict[str, str] = {
    "nonfinite": "loss or gradients became NaN/Inf",
    "divergence": "loss rose and kept rising",
    "oscillation": "loss swings up and down instead of falling",
    "plateau": "loss stopped improving",
    "slow_convergence": "loss falls, but far too slowly",
    "spike": "loss jumped far above its recent level",
    "zero_loss": "loss is (almost) exactly zero",
    "stall": "weights or loss do not change",
    "skipped_steps": "optimizer steps are being skipped",
}
