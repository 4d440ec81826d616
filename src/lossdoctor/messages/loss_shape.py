"""Sentences of the loss-curve shape detectors (detectors/loss_shape.py): spikes and noisy labels."""

TEMPLATES = {
    # what to do about a spike
    "spike.fix.skip_window": (
        "skip or rewind past the data window: restart from a checkpoint ~100 steps before step {step} and skip the "
        "batches of steps {first}-{step} (as PaLM and OLMo do); inspect those batches",
        "跳过或回退这段数据：从 step {step} 之前约 100 步的 checkpoint 重新开始，并跳过 step {first}-{step} 的 batch"
        "（PaLM 和 OLMo 都是这么做的）；检查一下这些 batch",
    ),
    "spike.fix.recurring": (
        "spikes recur: lower the peak LR (e.g. 2x), add QK-layernorm to attention and a z-loss of 1e-4 on the "
        "output logits",
        "尖峰反复出现：降低峰值 LR（比如降 2 倍），给 attention 加 QK-layernorm，并对输出 logits 加 1e-4 的 z-loss",
    ),
    "spike.fix.recurring_measure": (
        "spikes recur: add QK-layernorm to attention and a z-loss of 1e-4 on the output logits; to see whether the "
        "step size drives them, replay the window before step {step} at half the LR beside the current one",
        "尖峰反复出现：给 attention 加 QK-layernorm，并对输出 logits 加 1e-4 的 z-loss；要判断是否由步长引起，"
        "可在 step {step} 之前的这段数据上分别用一半的 LR 和当前 LR 重放对比",
    ),
    "spike.fix.if_again": (
        "if it spikes again after the rewind: lower the peak LR and add QK-layernorm or a z-loss of 1e-4",
        "如果回退之后还出现尖峰：降低峰值 LR，并加 QK-layernorm 或 1e-4 的 z-loss",
    ),
    # a spike in a long log
    "spike.jumped": (
        "the loss jumped to {peak} at step {s}, {x}x the median {base} of the {w} steps before it ({z} robust sigmas)",
        "loss 在 step {s} 跳到 {peak}，是之前 {w} 步中位数 {base} 的 {x} 倍（{z} 个稳健标准差）",
    ),
    "spike.came_back_50": ("it came back within 50 steps", "50 步之内回落了"),
    "spike.steps_in_incident": ("{n} spiking steps in this incident", "这次尖峰持续了 {n} 个 step"),
    "spike.incidents": ("{n} separate spike incidents in the run", "整个训练中有 {n} 次独立的尖峰"),
    "spike.outlier_batch": (
        "the batch of step {s} is an outlier: max |x| {a} vs median {m}",
        "step {s} 的 batch 是离群值：最大 |x| 为 {a}，中位数只有 {m}",
    ),
    "spike.fix.outlier_batch": ("inspect / skip the batch of step {s}", "检查或跳过 step {s} 的 batch"),
    "spike.lr_changed": (
        "the LR changed at that step ({a} -> {b}): a schedule event",
        "LR 正好在这一步变了（{a} -> {b}）：是学习率调度造成的",
    ),
    "spike.grad_surged": ("the grad norm surged to {g} ({x}x its median)", "grad norm 猛增到 {g}（中位数的 {x} 倍）"),
    # a plateau high above where clean labels would go
    "noisy.plateau_gain": (
        "over {n} logged points the loss plateaued at {end} ({pct}% of its start {start}) and the second half "
        "improved it by only {gain}%",
        "在 {n} 个记录点上 loss 停在 {end}（起点 {start} 的 {pct}%），后半段只改善了 {gain}%",
    ),
    "noisy.plateau_flat": (
        "over {n} logged points the loss plateaued at {end} ({pct}% of its start {start}) and the second half "
        "did not improve it",
        "在 {n} 个记录点上 loss 停在 {end}（起点 {start} 的 {pct}%），后半段完全没有改善",
    ),
    "noisy.grad_stays": (
        "the gradient norm stays at {g} ({x}x its early level): the model is pushed but cannot fit the labels",
        "grad norm 一直保持在 {g}（是早期水平的 {x} 倍）：模型一直被推着走，却拟合不了这些标签",
    ),
    "noisy.at_chance": (
        "that is {pct}% of the chance level {c} (ln of the number of classes): the model predicts no better than "
        "the label frequencies, as if the labels did not belong to their inputs",
        "这是随机水平 {c}（类别数的对数）的 {pct}%：模型的预测不比按标签频率瞎猜好，就好像标签和输入对不上",
    ),
    "noisy.at_chance_moving": (
        "that is {pct}% of the chance level {c} (ln of the number of classes) while the weights keep moving "
        "(update/param ratio {r} per step): the model predicts no better than the label frequencies, as if the "
        "labels did not belong to their inputs",
        "这是随机水平 {c}（类别数的对数）的 {pct}%，而权重一直在变（每步 update/param ratio 为 {r}）：模型的预测"
        "不比按标签频率瞎猜好，就好像标签和输入对不上",
    ),
    "noisy.at_chance_alternatives": (
        "at the chance level these fit as well, and the log cannot rank them: weights that do not change (frozen, "
        "detached, an optimizer holding other parameters), or a learning rate too low; the update/param ratio "
        "(lossdoctor.watch records it) tells them apart: 0, < 1e-5, or ~1e-3 with a flat loss for the labels",
        "停在随机水平时下面几种情况也同样符合，仅凭日志无法排序：权重没有变化（被冻结、被 detach、optimizer 持有的是"
        "别的参数），或者 LR 太小；update/param ratio（lossdoctor.watch 会记录）可以区分它们：为 0、< 1e-5，"
        "或者 ~1e-3 而 loss 不动则是标签的问题",
    ),
    "noisy.chance": ("chance-level loss would be {c}", "随机猜测水平的 loss 约为 {c}"),
    "noisy.fix.audit": (
        "audit a sample of labels (are they shuffled or misaligned with inputs?); train on a small clean subset to "
        "see whether the loss can go lower",
        "抽查一部分标签（是不是被打乱了，或者和输入错位了？）；在一个干净的小子集上训练，看 loss 能不能降得更低",
    ),
    "noisy.fix.smoothing": (
        "use label smoothing (0.1) or a noise-robust loss if noise is expected",
        "如果噪声本来就避免不了，用 label smoothing（0.1）或者对噪声鲁棒的 loss",
    ),
}
