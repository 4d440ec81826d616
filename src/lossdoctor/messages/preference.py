"""Sentences of the preference-training detector (detectors/preference.py): DPO/ORPO/KTO through TRL."""

TEMPLATES = {
    # logps NaN / -inf: an empty completion
    "pref.logps_nonfinite": (
        "logps/chosen is {chosen} and logps/rejected {rejected} at step {step}",
        "step {step} 的 logps/chosen 为 {chosen}，logps/rejected 为 {rejected}",
    ),
    "pref.loss_was_finite": (
        "the loss was finite until then (last {loss}) and the gradient norm had not grown: not a divergence",
        "在此之前 loss 一直是有限值（最后是 {loss}），grad norm 也没有变大：不是发散",
    ),
    "pref.logps_nonfinite_why": (
        "a completion with no supervised token (truncated away by max_length, or empty) has a mean log-prob of "
        "0/0 = NaN; a token of probability 0 gives -inf",
        "一个没有任何监督 token 的 completion（被 max_length 截断掉了，或者本身为空）的平均 log-prob 是 0/0 = NaN；"
        "概率为 0 的 token 会得到 -inf",
    ),
    "pref.fix_max_length": (
        "raise max_length (this run: {n}, e.g. {new}) so that every completion keeps tokens after the prompt",
        "调大 max_length（这次训练是 {n}，比如改成 {new}），让每个 completion 在 prompt 之后都还留有 token",
    ),
    "pref.fix_max_length_unknown": (
        "raise max_length so that every completion keeps tokens after the prompt",
        "调大 max_length，让每个 completion 在 prompt 之后都还留有 token",
    ),
    "pref.fix_prompt_length_old": (
        'cap the prompt instead of the answer: max_prompt_length below max_length, truncation_mode="keep_end"',
        '截断 prompt 而不是回答：把 max_prompt_length 设得比 max_length 小，并设 truncation_mode="keep_end"',
    ),
    "pref.fix_drop_empty": (
        "drop the pairs whose chosen or rejected answer is empty or whose prompt alone fills max_length",
        "去掉 chosen 或 rejected 回答为空、或者单是 prompt 就占满 max_length 的样本对",
    ),
    # margins exploding
    "pref.margins_grow": (
        "rewards/margins kept growing: median {mid} mid-run, {end} at the end (peak {peak}; steps {first}-{last})",
        "rewards/margins 一直在变大：训练中段中位数 {mid}，最后 {end}（峰值 {peak}；step {first}-{last}）",
    ),
    "pref.accuracy_saturated": (
        "rewards/accuracies {acc} over the last {n} logged steps: every pair is already ranked right",
        "最后 {n} 个记录点的 rewards/accuracies 为 {acc}：每一对都已经排对了",
    ),
    "pref.loss_near_zero": (
        "the loss is down to {loss}: the policy is pushed ever further from the reference model for nothing",
        "loss 已经降到 {loss}：策略模型被一直推离 reference 模型，却没有任何收益",
    ),
    "pref.fix_lower_lr": (
        "lower learning_rate from {lr} to {new} (DPO is usually trained at 5e-7 to 5e-6, LoRA around 5e-5)",
        "把 learning_rate 从 {lr} 降到 {new}（DPO 全参通常用 5e-7 到 5e-6，LoRA 大约 5e-5）",
    ),
    "pref.fix_lower_lr_unknown": (
        "lower learning_rate 10x (DPO is usually trained at 5e-7 to 5e-6, LoRA around 5e-5)",
        "把 learning_rate 降 10 倍（DPO 全参通常用 5e-7 到 5e-6，LoRA 大约 5e-5）",
    ),
    "pref.fix_raise_beta": (
        "raise beta from {beta} to {new}: a larger beta keeps the policy closer to the reference",
        "把 beta 从 {beta} 调到 {new}：beta 越大，策略模型离 reference 越近",
    ),
    "pref.fix_raise_beta_unknown": (
        "raise beta (TRL's default is 0.1): a larger beta keeps the policy closer to the reference",
        "调大 beta（TRL 默认 0.1）：beta 越大，策略模型离 reference 越近",
    ),
    "pref.fix_ipo": (
        'or use loss_type="ipo", whose target margin is bounded (1/(2 beta)) instead of infinite',
        '或者用 loss_type="ipo"：它的目标 margin 是有界的（1/(2 beta)），而不是无穷大',
    ),
    "pref.fix_stop_early": (
        "stop earlier: keep the checkpoint from before step {step}, or train fewer epochs",
        "提前停止：用 step {step} 之前的 checkpoint，或者少训几个 epoch",
    ),
    # both rewards falling
    "pref.both_rewards_fall": (
        "rewards/chosen fell from {c0} to {c1} and rewards/rejected from {r0} to {r1} (steps {first}-{last}): "
        "the margin gained only {gained}",
        "rewards/chosen 从 {c0} 降到 {c1}，rewards/rejected 从 {r0} 降到 {r1}（step {first}-{last}）："
        "margin 只涨了 {gained}",
    ),
    "pref.chosen_logps_fall": (
        "logps/chosen fell from {a} to {b}: the preferred answers became less likely",
        "logps/chosen 从 {a} 降到 {b}：偏好的回答反而变得更不可能了",
    ),
    "pref.displacement_why": (
        "the loss only asks for the margin, so it is met by lowering both answers, the chosen one less "
        "(likelihood displacement): the model drifts away from both",
        "loss 只要求 margin 变大，于是两个回答的概率一起往下压，chosen 压得少一点（即 likelihood_displacement）："
        "模型同时偏离了两个回答",
    ),
    "pref.fix_nll_loss_type": (
        'TRL {version}: add an NLL term on the chosen answers: loss_type=["sigmoid", "sft"] with '
        "loss_weights=[1.0, 1.0] in DPOConfig (RPO)",
        'TRL {version}：给 chosen 回答加一项 NLL：在 DPOConfig 里设 loss_type=["sigmoid", "sft"]，'
        "loss_weights=[1.0, 1.0]（RPO）",
    ),
    "pref.fix_nll_rpo_alpha": (
        "TRL {version}: add an NLL term on the chosen answers: rpo_alpha=1.0 in DPOConfig (RPO)",
        "TRL {version}：给 chosen 回答加一项 NLL：在 DPOConfig 里设 rpo_alpha=1.0（RPO）",
    ),
    "pref.fix_nll_any": (
        'add an NLL term on the chosen answers (RPO): in TRL 1.x loss_type=["sigmoid", "sft"] with '
        "loss_weights=[1.0, 1.0]; before 1.0 rpo_alpha=1.0",
        '给 chosen 回答加一项 NLL（RPO）：TRL 1.x 用 loss_type=["sigmoid", "sft"] 和 loss_weights=[1.0, 1.0]；'
        "1.0 之前用 rpo_alpha=1.0",
    ),
    # loss stuck at ln 2
    "pref.loss_at_ln2": (
        "the DPO loss stayed at ln 2 = 0.693 for all {n} logged steps ({first}-{last}: between {lo} and {hi}): "
        "the policy ranks the pairs exactly as the reference does",
        "DPO 的 loss 在全部 {n} 个记录点（step {first}-{last}）都停在 ln 2 = 0.693（在 {lo} 和 {hi} 之间）："
        "策略模型对样本对的排序和 reference 完全一样",
    ),
    "pref.logps_exactly_zero": (
        "logps/chosen and logps/rejected are exactly 0 at every one of {n} logged steps ({first}-{last})",
        "{n} 个记录点（step {first}-{last}）的 logps/chosen 和 logps/rejected 全部恰好为 0",
    ),
    "pref.logps_zero_why": (
        "a summed log-prob of exactly 0 means probability 1, which no real completion has: it is a sum over no "
        "supervised token (every label masked, or the answer truncated away by max_length), so policy and reference "
        "agree by construction and the loss stays at ln 2 whatever the weights do",
        "求和后的 log-prob 恰好为 0 意味着概率为 1，真实的 completion 不会如此：这是对零个监督 token 求和"
        "（所有 label 都被 mask，或回答被 max_length 截断掉了），所以策略模型和 reference 必然一致，"
        "无论权重如何变化 loss 都停在 ln 2",
    ),
    "pref.rewards_exactly_zero": (
        "rewards/chosen and rewards/rejected are exactly 0 at every one of {n} logged steps: the policy's "
        "log-probs equal the reference's, so its weights never changed",
        "{n} 个记录点的 rewards/chosen 和 rewards/rejected 全部恰好为 0：策略模型的 log-prob 和 reference 完全相同，"
        "说明权重从没变过",
    ),
    "pref.margins_tiny": ("rewards/margins never exceeded {m} in size", "rewards/margins 的绝对值从没超过 {m}"),
    "pref.lr_zero": ("the learning rate is 0 at every logged step", "每个记录点的学习率都是 0"),
    "pref.fix_lr_zero": (
        "set learning_rate above 0 (DPO: 5e-7 to 5e-6 for full fine-tuning, around 5e-5 for LoRA) and check the "
        "scheduler's warm-up",
        "把 learning_rate 设成大于 0（DPO 全参 5e-7 到 5e-6，LoRA 大约 5e-5），并检查 scheduler 的 warmup",
    ),
    "pref.fix_frozen": (
        "check that the policy's parameters require grad (the LoRA adapters attached and trainable) and that "
        "ref_model is a separate copy, not the policy itself (ref_model=None lets TRL make the copy)",
        "检查策略模型的参数是否 requires_grad（LoRA 适配器是否挂上且可训练），以及 ref_model 是否是独立的副本，"
        "而不是策略模型本身（ref_model=None 时 TRL 会自己复制一份）",
    ),
    "pref.fix_raise_lr": (
        "raise learning_rate from {lr} to {new}: the updates are too small to move the log-ratios",
        "把 learning_rate 从 {lr} 提到 {new}：更新太小，log-ratio 根本动不了",
    ),
    "pref.fix_raise_lr_unknown": (
        "raise learning_rate 10x: the updates are too small to move the log-ratios",
        "把 learning_rate 提高 10 倍：更新太小，log-ratio 根本动不了",
    ),
}
