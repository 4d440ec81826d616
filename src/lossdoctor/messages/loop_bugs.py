"""Sentences of the training-loop bug detectors (detectors/loop_bugs.py): the bugs of the public
troubleshooting lists (gradients never zeroed, ...)."""

TEMPLATES = {
    "bugs.stale.seen": (
        "at {n} of {of} steps the first backward found the previous step's gradient still in .grad "
        "(first at step {first}): gradients are never zeroed, so every update is the sum of all gradients so far",
        "{of} 个 step 中有 {n} 个在第一次 backward 时 .grad 里还留着上一步的梯度（最早在 step {first}）："
        "梯度从未清零，每次更新都是迄今所有梯度之和"),
    "bugs.stale.partly": (
        "at {n} of {of} steps the first backward found a gradient left in .grad: zero_grad runs on some steps only",
        "{of} 个 step 中有 {n} 个在第一次 backward 时 .grad 里留有旧梯度：zero_grad 只在部分 step 上执行"),
    "bugs.stale.norm_grows": (
        "the gradient norm grew from {a} to {b} while the loss went from {la} to {lb}: gradients adding up",
        "梯度范数从 {a} 涨到 {b}，而 loss 从 {la} 变到 {lb}：梯度在累加"),
    "bugs.stale.fix": (
        "call optimizer.zero_grad() once per optimizer step: before the forward pass, or right after "
        "optimizer.step() (with gradient accumulation: after the step of each group of micro-batches)",
        "每个优化器 step 调用一次 optimizer.zero_grad()：放在前向之前，或紧跟在 optimizer.step() 之后"
        "（梯度累积时：在每组 micro-batch 的 step 之后）"),
    "bugs.stale.lr_not_the_fix": (
        "lowering the LR only slows the growth down: the accumulated gradient keeps growing with the step",
        "降低 LR 只会让增长变慢：累积的梯度会随 step 一直变大"),
}
