"""Sentences of the loop-wiring detectors (detectors/loop_wiring.py): labels drawn apart from their
inputs, a sigmoid before BCEWithLogitsLoss, the wrong loss for the task, a param group at LR 0,
BatchNorm over a batch of one."""

TEMPLATES = {
    "wiring.misaligned.at_chance": (
        "over {n} steps the loss never went below chance: its lowest level {lowest} and {end} at the end, "
        "against ln {k} = {chance} for {k} classes; the model learned the class prior and nothing about the inputs",
        "{n} 个 step 里 loss 从未低于随机猜测水平：最低 {lowest}，最后 {end}，而 {k} 类的随机水平是 ln {k} = {chance}；"
        "模型只学到了类别先验，没有从输入里学到任何东西",
    ),
    "wiring.misaligned.updates": (
        "while the weights move at an ordinary rate (update/param ratio {u}, the usual range is 1e-4 to 1e-2): "
        "not a crawling LR or a frozen model, the labels carry no information about their inputs",
        "而权重的更新幅度正常（update/param 比值 {u}，通常在 1e-4 到 1e-2 之间）：不是 LR 太小或模型被冻结，"
        "而是标签和输入之间没有关系",
    ),
    "wiring.misaligned.fix_one_loader": (
        "draw inputs and labels together: one Dataset that returns (x, y) pairs and one DataLoader(shuffle=True) "
        "over it, never two shuffled loaders zipped, never a permutation applied to x alone",
        "让输入和标签一起抽取：用一个返回 (x, y) 对的 Dataset 和一个 DataLoader(shuffle=True)，"
        "不要把两个各自 shuffle 的数据加载器用 zip 拼在一起，也不要只对 x 做置换",
    ),
    "wiring.misaligned.fix_check": (
        "check a batch by hand: print a few (input, label) pairs, and overfit one fixed batch of 8 to loss ~0 "
        "(misaligned labels cannot be overfit across batches)",
        "手工检查一个 batch：打印几组 (输入, 标签)，并在一个固定的 8 样本 batch 上过拟合到 loss ~0"
        "（错位的标签无法在不同 batch 之间被拟合）",
    ),
    "wiring.sigmoid.outputs": (
        "the model's output is a probability at {n} of {of} measured steps: every value in [0, 1], not rows "
        "summing to 1; at step {step} they are driven to {lo} and {hi}, the sigmoid's saturation",
        "在 {of} 个测量过的 step 中有 {n} 个模型输出已经是概率：所有值都在 [0, 1] 之内，且各行之和不为 1；"
        "到 step {step} 时被推到 {lo} 和 {hi}，即 sigmoid 的饱和区",
    ),
    "wiring.sigmoid.floor": (
        "a loss that applies its own sigmoid (BCEWithLogitsLoss) to a probability cannot go below "
        "-ln sigmoid(1) = {floor} on a positive target nor ln 2 on a negative one; the loss is saturated there: "
        "lowest {best}, {end} at the end",
        "对概率再做一次 sigmoid 的 loss（BCEWithLogitsLoss）在正样本上不可能低于 -ln sigmoid(1) = {floor}，"
        "在负样本上不可能低于 ln 2；loss 饱和在那里：最低 {best}，最后 {end}",
    ),
    "wiring.sigmoid.fix": (
        "remove the sigmoid at the end of the model and pass the logits to BCEWithLogitsLoss "
        "(apply torch.sigmoid only when predicting)",
        "去掉模型末尾的 sigmoid，把 logits 直接交给 BCEWithLogitsLoss（只在预测时再用 torch.sigmoid）",
    ),
    "wiring.sigmoid.fix_bce": (
        "or, if the model must output probabilities: use F.binary_cross_entropy on them (less stable than the "
        "logits version in fp16)",
        "或者，如果模型必须输出概率：对概率使用 F.binary_cross_entropy（在 fp16 下不如 logits 版本稳定）",
    ),
    "wiring.wrong_loss.head": (
        "the model has one output per sample ({shape}) and the batch's labels are class indices 0 to {top}; "
        "{k} classes: the loss scores class indices as numbers (an MSE or BCE of one output), not as classes",
        "模型每个样本只有一个输出（{shape}），而 batch 的标签是类别下标 0 到 {top}，共 {k} 类："
        "loss 把类别下标当成数值来比较（对单个输出做 MSE 或 BCE），而不是当成类别",
    ),
    "wiring.wrong_loss.ratio": (
        "the loss stays at {loss}, {r}x the variance of the labels as numbers ({var}): the regression "
        "of class indices does not fit them",
        "loss 停在 {loss}，是标签（当成数值）方差 {var} 的 {r} 倍：对类别下标做回归拟合不了它们",
    ),
    "wiring.wrong_loss.ids": (
        "the labels are integers 0 to {top} spread like {k} balanced classes (their variance is {share} of a "
        "uniform draw's over 0..{top}, at least {floor}; a count or a score is narrower): an MSE, L1 or Huber "
        "loss on them fits a number between two classes, and rounding it does not give the class back",
        "标签是 0 到 {top} 的整数，分布得像 {k} 个均衡的类别（方差是 0..{top} 上均匀分布的 {share} 倍，不低于 {floor}；"
        "计数或评分的分布更窄）：对它们用 MSE、L1 或 Huber 做回归，拟合出来的是两个类别之间的一个数，四舍五入也还原不了类别",
    ),
    "wiring.wrong_loss.negative": (
        "the loss goes negative (down to {low}): a binary cross-entropy against targets above 1 has no lower bound",
        "loss 变成了负数（最低 {low}）：目标大于 1 的二元交叉熵没有下界",
    ),
    "wiring.wrong_loss.fix": (
        "give the model {k} outputs (nn.Linear(..., {k})) and train with F.cross_entropy(logits, y) on the "
        "integer labels",
        "让模型输出 {k} 维（nn.Linear(..., {k})），并对整数标签使用 F.cross_entropy(logits, y)",
    ),
    "wiring.wrong_loss.fix_regression": (
        "if the target is a quantity (a count, a rating) and regression is meant, say so with "
        'watch(..., task="regression")',
        '如果目标是一个数量（计数、评分），本来就要做回归：用 watch(..., task="regression") 说明',
    ),
    "wiring.wrong_loss.one_class": (
        "the loss is exactly 0 at {n} of {of} steps from the first, and the model has one output ((B, 1)): a "
        "cross-entropy over one class is always 0 (log-softmax of a single logit is 0), so nothing is learned",
        "从第一步起 {of} 步中有 {n} 步 loss 恰好为 0，而模型只有一个输出（(B, 1)）：只有一个类别的交叉熵恒为 0"
        "（单个 logit 的 log-softmax 是 0），模型什么也学不到",
    ),
    "wiring.wrong_loss.fix_one_output": (
        "use the loss of the task: F.mse_loss(pred.squeeze(-1), y) or F.l1_loss for a quantity, "
        "F.binary_cross_entropy_with_logits(pred.squeeze(-1), y.float()) for a 0/1 target, or K outputs and "
        "F.cross_entropy for K classes",
        "换成与任务相符的 loss：数量用 F.mse_loss(pred.squeeze(-1), y) 或 F.l1_loss；0/1 目标用 "
        "F.binary_cross_entropy_with_logits(pred.squeeze(-1), y.float())；K 个类别则输出 K 维并用 F.cross_entropy",
    ),
    "wiring.zero_lr.groups": (
        "param group(s) {groups} of {of} have LR 0 at every one of {steps} steps while another group trains at "
        "{other}: their parameters never move",
        "{of} 个参数组中的第 {groups} 组在全部 {steps} 个 step 上 LR 都是 0，而另一组以 {other} 训练：这些参数从不更新",
    ),
    "wiring.zero_lr.params": (
        "those groups hold {n} of the optimizer's {total} parameters ({pct}%)",
        "这些参数组占优化器 {total} 个参数中的 {n} 个（{pct}%）",
    ),
    "wiring.zero_lr.fix": (
        "give that group a learning rate: e.g. {lr} (1/10 of the other group's {other}, the usual "
        "discriminative ratio); check the default of the option that set it (a backbone_lr of 0)",
        "给这个参数组设置学习率：例如 {lr}（另一组 {other} 的 1/10，常见的分层学习率比例）；"
        "检查设置它的选项的默认值（例如 backbone_lr 默认为 0）",
    ),
    "wiring.zero_lr.fix_freeze": (
        "if freezing is meant: set requires_grad_(False) on those parameters and leave them out of the "
        "optimizer (no gradients computed, no optimizer state kept)",
        "如果本来就要冻结：对这些参数设 requires_grad_(False)，并且不要把它们交给优化器"
        "（不计算梯度，也不保存优化器状态）",
    ),
    "wiring.bn1.steps": (
        "{n} of {of} steps trained on a batch of one sample through {layers} BatchNorm layer(s) in train mode "
        "(first at step {first}): each normalised that sample with its own statistics",
        "{of} 个 step 中有 {n} 个用只有一个样本的 batch 经过 {layers} 个训练模式的 BatchNorm 层"
        "（最早在 step {first}）：每次都用这个样本自己的统计量做归一化",
    ),
    "wiring.bn1.loss": (
        "the loss at those steps is {there}, {x}x the {base} of the other steps",
        "这些 step 上的 loss 是 {there}，是其他 step（{base}）的 {x} 倍",
    ),
    "wiring.bn1.fix_drop_last": (
        "drop the incomplete last batch: DataLoader(..., drop_last=True) (the batches are {typical} samples "
        "otherwise); BatchNorm needs 2 samples at the very least and 16+ for stable statistics",
        "丢掉最后一个不完整的 batch：DataLoader(..., drop_last=True)（其余 batch 为 {typical} 个样本）；"
        "BatchNorm 至少需要 2 个样本，16 个以上统计量才稳定",
    ),
    "wiring.bn1.fix_norm": (
        "or normalise without batch statistics: nn.GroupNorm or nn.LayerNorm instead of BatchNorm",
        "或者换成不依赖 batch 统计量的归一化：用 nn.GroupNorm 或 nn.LayerNorm 代替 BatchNorm",
    ),
}
