"""The general text reader's notes (sources/any_text.py): which repeated shape was read, how its
steps were found, which series was taken for the training loss. Names are values, shown as they are."""

TEMPLATES = {
    "text.read": (
        "{what}: read {n} rows of the repeated shape `{shape}`; the training loss is `{key}`",
        "{what}：读取了重复格式 `{shape}` 的 {n} 行；训练 loss 取 `{key}`",
    ),
    "text.loss_guessed": (
        "no series is named as the total training loss: `{key}` was taken for it (a guess)",
        "没有名字表明是总训练 loss 的序列：把 `{key}` 当作训练 loss（推测）",
    ),
    "text.loss_from_ppl": (
        "no loss is printed, only a perplexity (`{key}`): the training loss is ln({key}), the token "
        "cross-entropy in nats; the printed values are kept as `ppl`",
        "日志没有打印 loss，只有困惑度（`{key}`）：训练 loss 取 ln({key})，即以 nat 为单位的 token 交叉熵；"
        "打印的值保存为 `ppl`",
    ),
    "text.eval_kept": (
        "{n} evaluation loss value(s) (`{key}`) kept apart from the training loss",
        "{n} 个评估 loss 值（`{key}`）与训练 loss 分开保存",
    ),
    "text.loss_summed": (
        "no total loss is printed: the training loss is the sum of the components {keys} "
        "({n} row(s); a NaN in any of them makes the sum NaN)",
        "日志没有打印总 loss：训练 loss 取各分项 {keys} 之和（{n} 行；任一分项为 NaN 则和为 NaN）",
    ),
    "text.term_outside_sum": (
        "{keys} is NaN or Inf on all {n} rows while another term falls: it cannot have reached the weights "
        "(a non-finite gradient would have made every term non-finite at the next update), so it is left out "
        "of the summed training loss; a term meant to be trained on is not (it is detached, masked or "
        "computed after the backward pass)",
        "{keys} 在全部 {n} 行都是 NaN 或 Inf，而其他分项在下降：它不可能进入了权重的梯度（否则下一次更新后所有分项都会变成非有限值），"
        "因此不计入训练 loss 之和；若它本应参与训练，则它没有参与（被 detach、被 mask，或在 backward 之后才计算）",
    ),
    "text.total_of_parts": (
        "no series is named as the loss: `{key}` is the sum of {keys} on every row, so it was taken for the "
        "total training loss and they for its components",
        "没有名为 loss 的序列：`{key}` 在每一行都等于 {keys} 之和，因此把它当作总训练 loss，其余作为分项",
    ),
    "text.policy_loss": (
        "no total loss is printed: `{key}`, the RL policy's loss, is the training loss (it may sit near 0 or below "
        "by design); {keys} are kept as components, not added to it",
        "日志没有打印总 loss：强化学习策略的 loss `{key}` 作为训练 loss（按设计可能接近 0 或为负）；{keys} 作为分项保存，不计入总和",
    ),
    "text.free_tails": (
        "each line ends with free text after its last number (a sample, a prediction): lines were grouped by "
        "what comes before it",
        "每行在最后一个数字之后还有自由文本（样本、预测）：按其之前的部分归并行格式",
    ),
    "text.partial_first": (
        "the print at step 0 ({first}) is about {every} times below the next ({next}), one interval of {every} "
        "steps on: a sum over the first batch divided by the whole interval, not a loss; it is not judged",
        "step 0 的打印值（{first}）约为下一次（{next}，相隔 {every} 步）的 1/{every}：这是第一个 batch 的累计值除以整个"
        "间隔，不是 loss，不参与判断",
    ),
    "text.nan_placeholders_unnamed": (
        "the guessed loss and another unnamed column print `nan` in turn, each where the other has a value: "
        "read as empty cells (nothing logged), not as non-finite losses",
        "猜测的 loss 列和另一个无名列轮流打印 `nan`，恰好在对方有值的那一行：按空单元格（未记录）读取，而不是当作非有限的 loss",
    ),
    "text.nan_placeholders": (
        "the training and the evaluation loss print `nan` in turn, each where the other has a value: read as "
        "empty cells (nothing logged), not as non-finite losses",
        "训练 loss 和验证 loss 轮流打印 `nan`，恰好在对方有值的那一行：按空单元格（未记录）读取，而不是当作非有限的 loss",
    ),
    "text.components": (
        "component losses kept apart from the total: {names}",
        "与总 loss 分开保存的分项 loss：{names}",
    ),
    "text.one_rank": (
        "{n} ranks printed each line, naming their rank: only the lowest rank's lines were read",
        "{n} 个 rank 各自打印了每一行（行内写明 rank）：只读取了编号最小的 rank 的行",
    ),
    "text.adversaries": (
        "the losses {keys} are two adversaries' (a GAN's discriminator and generator): neither is the training "
        "loss and their sum is none, so both are kept as components and no training loss is read",
        "损失 {keys} 属于两个对抗方（GAN 的判别器和生成器）：两者都不是训练 loss，它们的和也不是，"
        "所以都作为分项保存，不读取训练 loss",
    ),
    "text.epoch_is_step": (
        "{n} row(s) carry an epoch and no finer counter: the epoch is the step, so a finding's step is an epoch number",
        "{n} 行只有 epoch，没有更细的计数：把 epoch 当作步数，所以诊断中的步数是 epoch 数",
    ),
    "text.named_arrays": (
        "{what}: read {n} row(s) from arrays named {names}: each array is a series, its positions the rows",
        "{what}：从名为 {names} 的数组读取了 {n} 行：每个数组是一条序列，其位置即行",
    ),
    "text.numbered": (
        "{n} row(s) carry no step counter: numbered 1, 2, 3... in order, so a finding's step is a row number, "
        "not the trainer's step",
        "{n} 行没有 step 计数：按顺序编号为 1、2、3……，所以诊断中的步数是行号，而不是训练的步数",
    ),
}
