"""What the events of a log's text say (detectors/log_events.py, the event rows of the differential,
detectors/precision.py's minimum-scale finding). A line quoted from the log is a value, shown as it is."""

TEMPLATES = {
    "events.what.nonfinite_text": (
        "the log says the loss went non-finite after step {step}: \u201c{text}\u201d",
        "日志表明 loss 在 step {step} 之后变成了 NaN/Inf：\u201c{text}\u201d",
    ),
    "events.ev.scale_floor": (
        "the loss scaler reached its minimum scale ({scale}) at step {step} and stopped the run",
        "loss scaler 在 step {step} 降到了最小值（{scale}），训练因此停止",
    ),
    "events.ev.op_attention": (
        "autograd's anomaly mode names {op} (a softmax / attention backward) as returning NaN at step {step}",
        "autograd 异常检测指出 {op}（softmax / attention 的反向）在 step {step} 返回了 NaN",
    ),
    "events.ev.op_domain": (
        "autograd's anomaly mode names {op} as returning NaN at step {step}: an op at an edge of its domain "
        "(log 0, x/0, sqrt at 0)",
        "autograd 异常检测指出 {op} 在 step {step} 返回了 NaN：一个处在定义域边缘的算子（log 0、x/0、sqrt 在 0 处）",
    ),
    "events.ev.op_overflow": (
        "autograd's anomaly mode names {op} as returning NaN at step {step}: a product or exponential that overflowed",
        "autograd 异常检测指出 {op} 在 step {step} 返回了 NaN：一个溢出的乘积或指数运算",
    ),
    "events.ev.anomaly_op": (
        "autograd's anomaly mode names {op} as returning NaN at step {step}",
        "autograd 异常检测指出 {op} 在 step {step} 返回了 NaN",
    ),
    "events.ev.nan_input": (
        "the log says {n} time(s) that the inputs hold NaN/Inf, the first at step {first}",
        "日志 {n} 次提示输入数据含有 NaN/Inf，第一次在 step {first}",
    ),
    "events.ev.grad_text": (
        "the log says {n} time(s) that the gradient went non-finite, the first at step {first}",
        "日志 {n} 次提示梯度变成了 NaN/Inf，第一次在 step {first}",
    ),
    "events.ev.resumed": (
        "the log resumes from a checkpoint at step {step}, right before it",
        "日志在其前面的 step {step} 从 checkpoint 恢复了训练",
    ),
    "events.oom": (
        "the log shows an out-of-memory error {n} time(s), the first at step {step} (\u201c{text}\u201d): it "
        "ends the run for want of memory and is no cause of the loss curve",
        "日志 {n} 次出现显存不足（OOM）错误，第一次在 step {step}（\u201c{text}\u201d）：它因内存不足而终止训练，"
        "不是 loss 曲线的原因",
    ),
    "events.nccl": (
        "the log shows an NCCL error or timeout {n} time(s), the first at step {step} (\u201c{text}\u201d): "
        "a communication failure between ranks, no cause of the loss curve",
        "日志 {n} 次出现 NCCL 错误或超时，第一次在 step {step}（\u201c{text}\u201d）：这是 rank 之间的通信故障，"
        "不是 loss 曲线的原因",
    ),
    "events.hardware": (
        "the log shows a GPU hardware error {n} time(s), the first at step {step} (\u201c{text}\u201d): a "
        "fault of the device (an uncorrectable memory error, the GPU lost from the bus), no cause of the loss "
        "curve; resume from the last checkpoint on other hardware",
        "日志 {n} 次出现 GPU 硬件错误，第一次在 step {step}（\u201c{text}\u201d）：这是设备故障（不可纠正的显存错误、"
        "GPU 从总线上掉线），不是 loss 曲线的原因；请换一台机器从最近的 checkpoint 恢复训练",
    ),
    "events.resume_split": (
        "the jump at step {step} ({cause}) is not reported as a spike: the log resumes from a checkpoint at "
        "step {resume}, where two runs' curves meet",
        "step {step} 的跳变（{cause}）不作为尖峰报告：日志在 step {resume} 从 checkpoint 恢复训练，两段曲线在此相接",
    ),
    "events.bug_warning": (
        "the log prints the framework's warning of this bug {n} time(s), first at step {first} "
        "(\u201c{text}\u201d): the code that ran has it",
        "日志中框架对这个 bug 的警告出现了 {n} 次，第一次在 step {first}（\u201c{text}\u201d）："
        "运行的代码里确实有这个问题",
    ),
    "events.fix.from_logits": (
        "give the loss the logits: drop the final softmax/sigmoid activation (keep from_logits=True), or keep "
        "the activation and set from_logits=False, never both",
        "把 logits 交给 loss：去掉最后的 softmax/sigmoid 激活（保留 from_logits=True），或者保留激活并设置 "
        "from_logits=False，两者不要同时用",
    ),
    "events.labels_dropped": (
        "the log says {n} time(s), on {steps} step(s) from step {first}, that a sample's labels were dropped "
        "from the loss (\u201c{text}\u201d): those samples train nothing",
        "日志 {n} 次（{steps} 个 step，从 step {first} 开始）提示样本的标签被排除在 loss 之外"
        "（\u201c{text}\u201d）：这些样本什么也没有训练",
    ),
    "events.fix.response_template": (
        "decode one batch's labels (the positions that are not -100): the response template / instruction part "
        "must match the tokenized text token for token, and max_seq_length must leave the answer in",
        "解码一个 batch 的标签（不等于 -100 的位置）：response template（及 instruction 部分）必须与分词后的文本逐个 "
        "token 一致，max_seq_length 也要留得下答案",
    ),
    "diff.sep.attention_rows": (
        "count the rows of the batch of step {step} whose attention mask is all zeros, and log the largest "
        "attention logit: an empty row or logits past the dtype's range is {first}, neither is {second}",
        "统计 step {step} 的 batch 中 attention mask 全为 0 的行，并记录最大的 attention 分数（logit）：出现空行或 logit "
        "超出 dtype 范围则是 {first}，都没有则是 {second}",
    ),
    "diff.fix.attention_mask": (
        "mask attention with torch.finfo(dtype).min instead of -inf (or use F.scaled_dot_product_attention) "
        "and drop sequences that are all padding from the batch of step {step}",
        "attention 掩码用 torch.finfo(dtype).min 代替 -inf（或使用 F.scaled_dot_product_attention），并从 step "
        "{step} 的 batch 中去掉全是 padding 的序列",
    ),
    "precision.scale_floor": (
        "the loss scaler reached its minimum scale ({scale}) at step {step} (\u201c{text}\u201d): every step "
        "overflowed, whatever the scale",
        "loss scaler 在 step {step} 降到了最小值（{scale}）（\u201c{text}\u201d）：无论 scale 多小，每一步都溢出",
    ),
    "precision.overflow_lines": (
        "the log prints {n} overflow line(s) before it, the first at step {first}",
        "此前日志打印了 {n} 条溢出信息，第一条在 step {first}",
    ),
}
