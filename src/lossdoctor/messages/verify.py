"""Verified fixes (triage/verify.py): each fix replayed from the snapshot, and its verdict."""

TEMPLATES = {
    # the fix, as the verdict names it
    "verify.fix.clip": ("max_norm={max_norm:g}", "max_norm={max_norm:g}"),
    "verify.fix.lr": ("the LR scaled to {lr}", "LR 调到 {lr}"),
    "verify.fix.lr_factor": ("the LR lowered {x}x", "LR 降低 {x} 倍"),
    "verify.fix.scaler": ("GradScaler({settings})", "GradScaler({settings})"),
    "verify.fix.eps": ("the optimizer's eps={eps:g}", "optimizer 的 eps={eps:g}"),
    "verify.fix.unfreeze": (
        "every parameter trained (requires_grad on, all of them in the optimizer)",
        "训练所有参数（全部 requires_grad=True，并且都交给优化器）",
    ),
    "verify.fix.fp32": ("{module} run in fp32 (autocast off for it)", "{module} 用 fp32 计算（对它关闭 autocast）"),
    "verify.fix.drop": (
        "sample(s) {ids} dropped from the batch of step {step}",
        "从第 {step} 步的 batch 中去掉样本 {ids}",
    ),
    "verify.fix.skip": ("the batch of step {step} skipped", "跳过第 {step} 步的 batch"),
    "verify.fix.code": ("this fix", "这个修复"),
    # what a replay did from the incident step on
    "verify.outcome.nonfinite": ("{loss} at {step}", "第 {step} 步为 {loss}"),
    "verify.outcome.skips": (
        "the GradScaler skips {n} steps in a row up to step {step}",
        "GradScaler 连续跳过 {n} 步，直到第 {step} 步",
    ),
    "verify.outcome.bad": ("the loss spikes to {loss} at {step}", "第 {step} 步 loss 跳到 {loss}"),
    "verify.outcome.loss_after": ("loss {loss} {n} steps later", "{n} 步后 loss 为 {loss}"),
    "verify.outcome.not_recovered": (
        "the loss is {loss} {n} steps later, above its level of {before} before the incident",
        "{n} 步后 loss 为 {loss}，高于出事前的水平 {before}",
    ),
    # verdicts
    "verify.verified": (
        "verified: with {fix} the replay passes step {step} and the loss is {loss} {n} steps later "
        "(unfixed: {unfixed})",
        "已验证：采用「{fix}」后重放能越过第 {step} 步，{n} 步后 loss 为 {loss}（不修复：{unfixed}）",
    ),
    "verify.verified_at": (
        "verified: with {fix} the replay passes step {step} with loss {loss} (no batch after it was recorded to "
        "replay further; unfixed: {unfixed})",
        "已验证：采用「{fix}」后重放能越过第 {step} 步，loss 为 {loss}（之后没有记录下的 batch 可以继续重放；"
        "不修复：{unfixed}）",
    ),
    "verify.did_not_help": (
        "did not help: with {fix}, {what} (unfixed: {unfixed})",
        "没有用：采用「{fix}」后，{what}（不修复：{unfixed}）",
    ),
    "verify.not_verifiable": ("not verifiable by replay: {reason}", "无法通过重放验证：{reason}"),
    "verify.not_checked": ("not checked ({fix}): {reason}", "未验证（{fix}）：{reason}"),
    "verify.error": ("not checked ({fix}): the replay failed: {error}", "未验证（{fix}）：重放出错：{error}"),
    "verify.reason.code": (
        "it is a change to the code or the data pipeline, not to the training state or a batch, so replaying "
        "the recorded steps cannot apply it",
        "这是对代码或数据管线的修改，不是对训练状态或某个 batch 的修改，重放记录下来的 step 无法应用它",
    ),
    "verify.reason.plain": (
        "the suggestion is plain text without its numbers as data, so what to replay is not known",
        "这条建议是纯文本，数值没有作为数据保存，不知道该重放什么",
    ),
    "verify.reason.no_samples": ("the finding names no samples to drop", "这个结论没有指出要去掉哪些样本"),
    "verify.reason.budget": (
        "the verification budget of {budget} replayed steps is spent",
        "验证预算（{budget} 个重放 step）已用完",
    ),
    # no verdict at all
    "verify.diverged": (
        "no verdict: the replay diverges from the log at step {step} (logged {logged}, replayed {replayed}), "
        "so what a fix does in the replay says nothing about the run",
        "无法给出结论：重放在第 {step} 步与日志不一致（日志 {logged}，重放 {replayed}），"
        "所以修复在重放里的效果说明不了真实训练",
    ),
    "verify.stopped": (
        "no verdict: the batch of step {step} was not kept, so the replay cannot reach step {incident}",
        "无法给出结论：第 {step} 步的 batch 没有保留，重放到不了第 {incident} 步",
    ),
    "verify.replay_error": ("no verdict: the replay failed: {error}", "无法给出结论：重放出错：{error}"),
    "verify.not_reproduced": (
        "no verdict: the unfixed replay does not fail at step {step}, so there is nothing for a fix to prevent",
        "无法给出结论：不修复的重放在第 {step} 步没有出错，修复没有可以避免的问题",
    ),
    "verify.budget_small": (
        "no verdict: one replay takes {n} steps, more than the budget of {budget} (raise verify_budget)",
        "无法给出结论：一次重放需要 {n} 步，超过预算 {budget}（调大 verify_budget）",
    ),
    "verify.no_replay": (
        "no verdict: step {step} cannot be replayed (no replay_fn, or no snapshot before it)",
        "无法给出结论：第 {step} 步无法重放（没有 replay_fn，或之前没有快照）",
    ),
    "verify.log.failed": (
        "lossdoctor: checking the fixes of step {step} failed ({error}); training goes on",
        "lossdoctor：验证第 {step} 步的修复失败（{error}）；训练继续",
    ),
}
