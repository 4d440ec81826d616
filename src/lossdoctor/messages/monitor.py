"""The live monitor (monitor.py): what it says about its own parts and about misuse."""

TEMPLATES = {
    "monitor.disabled": (
        "{part} disabled after an internal error ({error}); training went on unchanged",
        "{part} 因内部错误被停用（{error}）；训练照常进行，未受影响"),
    "monitor.misuse": (
        "lossdoctor: mon.step was called at step {step} without an optimizer step since the previous call; call it "
        "once per optimizer step, after optimizer.step() (with gradient accumulation: after the last micro-batch). "
        "Such calls are recorded as no_optimizer_step, not as skipped steps",
        "lossdoctor：第 {step} 步调用了 mon.step，但自上次调用以来 optimizer 没有 step；请在每个 optimizer step 调用一次，"
        "放在 optimizer.step() 之后（有梯度累积时：放在最后一个 micro-batch 之后）。这样的调用记为 "
        "no_optimizer_step，而不是跳过的 step"),
    "monitor.parts_disabled": ("the monitor's own parts were disabled: {notes}", "monitor 自身的部分组件已被停用：{notes}"),
    "tracer.head_bypassed": (
        "the model's output head ({head}) never ran as a module: the loss was computed from the last hidden state "
        "without it (a fused or chunked LM-head loss, e.g. TRL's), so the logits were never made and are not "
        "traced; the activation checks end at the last hidden state",
        "模型的输出头（{head}）从未作为 module 运行：loss 是绕过它、直接从最后一层隐藏状态算出来的（fused 或分块的 "
        "LM head loss，比如 TRL 的），logits 根本没有生成，所以无法追踪；activation 检查止于最后一层隐藏状态"),
    "monitor.unreadable": ("no diagnosis: the run log in {path} could not be read ({error})",
                           "无法诊断：{path} 中的运行日志无法读取（{error}）"),
    "monitor.run_dir": (
        "lossdoctor.watch: the run log is in {path} (afterwards: lossdoctor diagnose {path})",
        "lossdoctor.watch：运行日志在 {path}（之后可运行：lossdoctor diagnose {path}）"),
}
