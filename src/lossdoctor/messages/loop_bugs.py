"""Sentences of the training-loop bug detectors (detectors/loop_bugs.py): the bugs of the public
troubleshooting lists (gradients never zeroed, ...)."""

TEMPLATES = {
    "bugs.stale.seen": (
        "at {n} of {of} steps the first backward found the previous step's gradient still in .grad "
        "(first at step {first}): gradients are never zeroed, so every update is the sum of all gradients so far",
        "{of} 个 step 中有 {n} 个在第一次 backward 时 .grad 里还留着上一步的梯度（最早在 step {first}）："
        "梯度从未清零，每次更新都是迄今所有梯度之和",
    ),
    "bugs.stale.partly": (
        "at {n} of {of} steps the first backward found a gradient left in .grad: zero_grad runs on some steps only",
        "{of} 个 step 中有 {n} 个在第一次 backward 时 .grad 里留有旧梯度：zero_grad 只在部分 step 上执行",
    ),
    "bugs.stale.norm_grows": (
        "the gradient norm grew from {a} to {b} while the loss went from {la} to {lb}: gradients adding up",
        "梯度范数从 {a} 涨到 {b}，而 loss 从 {la} 变到 {lb}：梯度在累加",
    ),
    "bugs.stale.fix": (
        "call optimizer.zero_grad() once per optimizer step: before the forward pass, or right after "
        "optimizer.step() (with gradient accumulation: after the step of each group of micro-batches)",
        "每个优化器 step 调用一次 optimizer.zero_grad()：放在前向之前，或紧跟在 optimizer.step() 之后"
        "（梯度累积时：在每组 micro-batch 的 step 之后）",
    ),
    "bugs.stale.lr_not_the_fix": (
        "lowering the LR only slows the growth down: the accumulated gradient keeps growing with the step",
        "降低 LR 只会让增长变慢：累积的梯度会随 step 一直变大",
    ),
    "bugs.softmax.outputs": (
        "the model's output is already a probability distribution at {n} of {of} measured steps: every value "
        "in [{lo}, {hi}] and each row summing to 1 within {dev}, over {k} classes",
        "在 {of} 个测量过的 step 中有 {n} 个模型输出已经是概率分布：所有值都在 [{lo}, {hi}] 之内，"
        "每行之和与 1 相差不超过 {dev}，共 {k} 个类别",
    ),
    "bugs.softmax.floor": (
        "a cross-entropy that applies its own softmax to probabilities cannot go below ln(1 + ({k}-1)/e) = {floor} "
        "(chance: ln {k} = {chance}); the loss is saturated there: lowest {best}, {end} at the end",
        "对概率再做一次 softmax 的交叉熵不可能低于 ln(1 + ({k}-1)/e) = {floor}（随机猜测为 ln {k} = {chance}）；"
        "loss 饱和在这里：最低 {best}，最后为 {end}",
    ),
    "bugs.softmax.fix": (
        "remove the softmax at the end of the model and pass the logits to CrossEntropyLoss "
        "(for sigmoid outputs: pass the logits to BCEWithLogitsLoss)",
        "去掉模型末尾的 softmax，把 logits 直接交给 CrossEntropyLoss（sigmoid 输出同理：把 logits 交给 "
        "BCEWithLogitsLoss）",
    ),
    "bugs.softmax.fix_nll": (
        "or, if the probabilities are needed: F.nll_loss(torch.log_softmax(logits, -1), y) "
        "(log_softmax, not log(softmax): it stays finite)",
        "如果确实需要概率：用 F.nll_loss(torch.log_softmax(logits, -1), y)（用 log_softmax 而不是 "
        "log(softmax)：这样不会出现非有限值）",
    ),
    "bugs.frozen.few_trainable": (
        "only {trainable} of the model's {total} parameters are trainable ({pct}%): requires_grad=False is on "
        "almost all of it",
        "模型 {total} 个参数中只有 {trainable} 个可训练（{pct}%）：几乎全部都设了 requires_grad=False",
    ),
    "bugs.frozen.optimizer_subset": (
        "the optimizer holds {n} parameters of the {trainable} that require a gradient: the rest get gradients "
        "and never move",
        "优化器只拿到了 {trainable} 个需要梯度的参数中的 {n} 个：其余的参数有梯度但从不更新",
    ),
    "bugs.frozen.loss_flat": (
        "and the loss does not learn: {first} at the start, {last} at the end ({pct}% lower)",
        "而 loss 没有在学：开始为 {first}，最后为 {last}（只降了 {pct}%）",
    ),
    "bugs.frozen.fix_requires_grad": (
        "unfreeze the layers that must learn (p.requires_grad_(True)); print sum(p.numel() for p in "
        "model.parameters() if p.requires_grad) before training",
        "解冻需要学习的层（p.requires_grad_(True)）；训练前打印 `sum(p.numel() for p in model.parameters() "
        "if p.requires_grad)` 确认一下",
    ),
    "bugs.frozen.fix_optimizer": (
        "build the optimizer from every trainable parameter: "
        "torch.optim.AdamW([p for p in model.parameters() if p.requires_grad], ...)",
        "用所有可训练参数构建优化器：`torch.optim.AdamW([p for p in model.parameters() if p.requires_grad], ...)`",
    ),
    "bugs.warmup.never_ends": (
        "the LR rose at every step of the run, from {a} to {b}, and was still rising at the last of its {n} steps: "
        "the warm-up never ends",
        "LR 在整个训练的每一步都在上升，从 {a} 升到 {b}，到第 {n} 步（最后一步）还在上升：warmup 一直没有结束",
    ),
    "bugs.warmup.would_reach": (
        "at this rate it reaches the peak LR {peak} the optimizer was built with at step ~{step}, {x}x the run's "
        "{n} steps: the warm-up is sized in other units (tokens, samples or micro-batches) than the scheduler "
        "is stepped in (optimizer steps)",
        "按这个速度，LR 要到第 ~{step} 步才能达到优化器设定的峰值 {peak}，是训练总步数 {n} 的 {x} 倍："
        "warmup 的长度用的单位（token、样本或 micro-batch）和 scheduler 的 step 单位（优化器 step）不一致",
    ),
    "bugs.warmup.fix_units": (
        "size the warm-up and the decay in optimizer steps: warmup_steps = warmup_tokens / (tokens per optimizer "
        "step), and step the scheduler once per optimizer step",
        "用优化器 step 来设定 warmup 和衰减的长度：warmup_steps = warmup_tokens /（每个优化器 step 的 token 数），"
        "并且每个优化器 step 调用一次 scheduler.step()",
    ),
    "bugs.planned.length": (
        "{cls} was planned for {planned} steps ({arg}={planned}) and the run stepped it {n} times, {pct}% of "
        "its plan: the schedule is counted in other units (samples, tokens or micro-batches) than the scheduler "
        "is stepped in",
        "{cls} 按 {planned} 步规划（{arg}={planned}），而训练只调用了它 {n} 次，是规划的 {pct}%："
        "schedule 的长度是按别的单位（样本、token 或 micro-batch）算的，而 scheduler 是按另一种单位 step 的",
    ),
    "bugs.planned.lambda": (
        "the LambdaLR still gave {at_end}% of its peak LR at the run's last step ({n}); its lr_lambda falls to a "
        "tenth of the peak only by step ~{planned}, {ratio}x the run: the schedule is counted in other units "
        "(samples, tokens or micro-batches) than the scheduler is stepped in",
        "LambdaLR 在训练最后一步（{n}）仍给出峰值 LR 的 {at_end}%；它的 lr_lambda 要到第 ~{planned} 步才降到峰值的十分之一，"
        "是整个训练的 {ratio} 倍：schedule 的计数单位（样本、token 或 micro-batch）和 scheduler 实际 step 的单位不一致",
    ),
    "bugs.planned.warmup": (
        "the LR went from {a} to {b}: the one-cycle never left its warm-up (30% of its plan), so the run "
        "trained near max_lr / div_factor and never reached its peak nor annealed",
        "LR 从 {a} 变到 {b}：one-cycle 一直没走出它的 warmup 阶段（规划的 30%），所以整个训练都在 "
        "max_lr / div_factor 附近，既没到峰值也没有退火",
    ),
    "bugs.planned.no_decay": (
        "the LR went from {a} to {b}: the schedule barely moved over the run, the decay it was meant for never came",
        "LR 从 {a} 变到 {b}：整个训练中 schedule 几乎没动，本该有的衰减始终没有到来",
    ),
    "bugs.planned.fix_units": (
        "size the schedule in the steps it is stepped in: {arg} = epochs * len(loader) // accumulation_steps "
        "(optimizer steps, not samples or tokens); for a run as long as this one, {arg}={n}",
        "按 scheduler 实际 step 的单位设定长度：{arg} = epochs * len(loader) // accumulation_steps"
        "（优化器 step 数，不是样本数或 token 数）；像这次这么长的训练，{arg}={n}",
    ),
    "bugs.planned.fix_early": (
        "if the run was stopped early on purpose (a smoke test of a longer plan), the schedule is as meant",
        "如果训练是有意提前停下的（对更长计划的冒烟测试），那么 schedule 本身没有问题",
    ),
    "bugs.warmup.fix_hf": (
        "with gradient accumulation, divide a length counted in micro-batches by gradient_accumulation_steps "
        "(the HF Trainer's warmup_steps are optimizer steps)",
        "使用梯度累积时，按 micro-batch 计的长度要除以 gradient_accumulation_steps（HF Trainer 的 warmup_steps "
        "是优化器 step 数）",
    ),
    "bugs.unshuffled.batches": (
        "{n} of {of} batches hold a single class, and the class changes {changes} times along the run "
        "(first at step {first}; {k} classes in all): the data is ordered by class, not shuffled",
        "{of} 个 batch 中有 {n} 个只含一个类别，而类别在训练过程中切换了 {changes} 次（最早在 step {first}；"
        "共 {k} 个类别）：数据按类别排序，没有打乱",
    ),
    "bugs.unshuffled.jump": (
        "at step {s}, where the class changes, the loss jumps to {loss}, {x}x the {base} of the steps before it",
        "在类别切换的 step {s}，loss 跳到 {loss}，是之前几步 {base} 的 {x} 倍",
    ),
    "bugs.unshuffled.by_length.rises": (
        "the batches' mean length rises at every one of {n} consecutive steps (from step {first}: {lo} to {hi} "
        "tokens per sample): the data is ordered by length, not shuffled",
        "连续 {n} 个 step 里 batch 的平均长度每一步都在上升（从 step {first} 起：每个样本 {lo} 到 {hi} 个 token）："
        "数据按长度排序，没有打乱",
    ),
    "bugs.unshuffled.by_length.falls": (
        "the batches' mean length falls at every one of {n} consecutive steps (from step {first}: {hi} down to {lo} "
        "tokens per sample): the data is ordered by length, not shuffled",
        "连续 {n} 个 step 里 batch 的平均长度每一步都在下降（从 step {first} 起：每个样本从 {hi} 降到 {lo} 个 token）："
        "数据按长度排序，没有打乱",
    ),
    "bugs.unshuffled.fix_length": (
        "shuffle the training data (DataLoader(..., shuffle=True)); to batch by length without ordering the "
        "run, group lengths within random mega-batches (transformers: group_by_length=True)",
        "打乱训练数据（DataLoader(..., shuffle=True)）；若想按长度组 batch 又不让整个训练有序，就在随机的大块内"
        "按长度分组（transformers：group_by_length=True）",
    ),
    "bugs.unshuffled.fix": (
        "shuffle the training data: DataLoader(dataset, shuffle=True) (or a sampler that mixes classes in every batch)",
        "打乱训练数据：DataLoader(dataset, shuffle=True)（或用让每个 batch 混合各类别的 sampler）",
    ),
    "bugs.unshuffled.fix_hf": (
        "a dataset sorted on disk stays sorted under an IterableDataset: shuffle it with a buffer "
        "(datasets: ds.shuffle(seed=..., buffer_size=...))",
        "在磁盘上已排序的数据集用 IterableDataset 读时仍是有序的：用缓冲区打乱（datasets：ds.shuffle(seed=..., "
        "buffer_size=...)）",
    ),
    "bugs.copy.frac": (
        "at {pct}% of the positions the model predicts its own input token (step {step}): it has learned to copy "
        "its input",
        "在 {pct}% 的位置上模型预测的就是它自己的输入 token（step {step}）：它学会了照抄输入",
    ),
    "bugs.copy.loss": (
        "and the loss is {end}, {pct}% of chance ln V = {chance}: far below what predicting the next token allows",
        "而 loss 为 {end}，只有随机水平 ln(V) = {chance} 的 {pct}%：远低于预测下一个 token 所能达到的水平",
    ),
    "bugs.copy.fix_shift": (
        "shift the labels by one: loss = cross_entropy(logits[:, :-1].flatten(0, 1), labels[:, 1:].flatten())",
        "把标签错开一位：loss = cross_entropy(logits[:, :-1].flatten(0, 1), labels[:, 1:].flatten())",
    ),
    "bugs.copy.fix_hf": (
        "HF causal LMs shift inside the model: pass labels=input_ids and use the model's own loss, never shift twice",
        "HF 的因果语言模型在模型内部错位：传 labels=input_ids 并使用模型自己的 loss，不要再错位一次",
    ),
    "bugs.eval.seen": (
        "the model was in eval mode at {n} of {of} training steps (from step {first}): its dropout is off and its "
        "BatchNorm layers normalise with running statistics while it trains",
        "在 {of} 个训练 step 中有 {n} 个模型处于 eval 模式（从 step {first} 开始）：训练时 dropout 被关闭，"
        "BatchNorm 层用的是 running 统计量",
    ),
    "bugs.eval.fix": (
        "call model.train() at the start of every training epoch (after each validation pass that called model.eval())",
        "在每个训练 epoch 开始时调用 model.train()（每次调用了 model.eval() 的验证之后都要切回来）",
    ),
    "bugs.broadcast.shapes": (
        "the model outputs (B, 1) and the batch's target is (B,): a loss of the two broadcasts to (B, B) and "
        "scores every prediction against every target",
        "模型输出是 (B, 1)，而 batch 的目标是 (B,)：两者算 loss 时会广播成 (B, B)，每个预测都和所有目标比较",
    ),
    "bugs.broadcast.floor": (
        "the loss stays at {loss}, {r}x the targets' variance {var}: what predicting their mean gives, the "
        "floor of a broadcast MSE",
        "loss 停在 {loss}，是目标方差 {var} 的 {r} 倍：这正是预测均值的结果，也是广播后 MSE 的下限",
    ),
    "bugs.broadcast.measured": (
        "measured: the loss the steps reported ({loss}) is the MSE of every prediction against every target "
        "({broadcast}), not the one sample by sample ({elementwise}), at {n} sampled steps",
        "实测：各步报告的 loss（{loss}）等于每个预测对所有目标的 MSE（{broadcast}），而不是逐样本的 MSE"
        "（{elementwise}），共 {n} 个采样步",
    ),
    "bugs.broadcast.fix": (
        "make the shapes equal before the loss: F.mse_loss(pred.squeeze(-1), y) (or y.unsqueeze(-1)); torch "
        'warns "Using a target size that is different to the input size"',
        "算 loss 之前让形状一致：F.mse_loss(pred.squeeze(-1), y)（或 y.unsqueeze(-1)）；torch 会给出警告 "
        '"Using a target size that is different to the input size"',
    ),
    # two causes tied after arbitration (detectors/ties.py)
    "tie.with": (
        "tied with {other} (same severity, confidence {conf}, from step {step}): the evidence does not tell the "
        "two apart; try the fixes of both",
        "与 {other} 并列（严重程度相同，置信度 {conf}，从 step {step} 开始）：证据无法区分这两个原因；两者的修复都值得一试",
    ),
    "tie.no_step": ("the start", "开头"),
    "bugs.clip.tight": (
        "at {n} of {of} measured steps the optimizer applied a gradient of norm {applied} where backward made "
        "{norm} (median): clipping at max_norm ~{applied} divides every update by ~{x}",
        "在 {of} 个测量过的 step 中有 {n} 个优化器实际用到的梯度范数只有 {applied}，而 backward 得到的是 {norm}"
        "（中位数）：max_norm ~{applied} 的梯度裁剪把每次更新都缩小了约 {x} 倍",
    ),
    "bugs.clip.fix": (
        "raise max_norm to about the gradient norm's p95 ({p95}; 1.0 is the common default) so that clipping "
        "catches spikes only, not every step (now ~{now})",
        "把 max_norm 提高到梯度范数的 p95 左右（{p95}；常用默认值是 1.0），让裁剪只拦住尖峰，而不是每一步都裁"
        "（现在约为 {now}）",
    ),
}
