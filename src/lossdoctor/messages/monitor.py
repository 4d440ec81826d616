"""The live monitor (live/monitor.py): what it says about its own parts and about misuse."""

TEMPLATES = {
    "monitor.path_refused": (
        "{path} in the run directory was not written ({error}): a symlink, hard link or special file is never "
        "written through, so nothing outside the run directory changes; the other files are written",
        "运行目录中的 {path} 没有写入（{error}）：符号链接、硬链接或特殊文件一律不会被写穿，运行目录之外的文件不会被改动；"
        "其他文件照常写入",
    ),
    "monitor.new_version": (
        "{root} already holds a run; this run writes to {path} (`lossdoctor diagnose {root}` reads the newest run)",
        "{root} 中已有一次运行；本次运行写入 {path}（`lossdoctor diagnose {root}` 读取最新的运行）",
    ),
    "monitor.disabled": (
        "{part} disabled after an internal error ({error}); training went on unchanged",
        "{part} 因内部错误被停用（{error}）；训练照常进行，未受影响",
    ),
    "monitor.misuse": (
        "lossdoctor: mon.step was called at step {step} without an optimizer step since the previous call; call it "
        "once per optimizer step, after optimizer.step() (with gradient accumulation: after the last micro-batch). "
        "Such calls are recorded as no_optimizer_step, not as skipped steps",
        "lossdoctor：第 {step} 步调用了 mon.step，但自上次调用以来 optimizer 没有 step；请在每个 optimizer step 调用一次，"
        "放在 optimizer.step() 之后（有梯度累积时：放在最后一个 micro-batch 之后）。这样的调用记为 "
        "no_optimizer_step，而不是跳过的 step",
    ),
    "monitor.parts_disabled": (
        "the monitor's own parts were disabled: {notes}",
        "monitor 自身的部分组件已被停用：{notes}",
    ),
    "tracer.head_bypassed": (
        "the model's output head ({head}) never ran as a module: the loss was computed from the last hidden state "
        "without it (a fused or chunked LM-head loss, e.g. TRL's), so the logits were never made and are not "
        "traced; the activation checks end at the last hidden state",
        "模型的输出头（{head}）从未作为 module 运行：loss 是绕过它、直接从最后一层隐藏状态算出来的（fused 或分块的 "
        "LM head loss，比如 TRL 的），logits 根本没有生成，所以无法追踪；activation 检查止于最后一层隐藏状态",
    ),
    "tracer.subset": (
        "the model has {modules} modules: live per-layer statistics cover {traced} of them, evenly spaced (a hook "
        "on every module would slow each step), and between sampled steps the activation checks run on {every_step} "
        "of those (the loss and every gradient are still checked at every step); a replayed incident traces every "
        "module",
        "模型有 {modules} 个 module：实时的逐层统计只覆盖其中均匀分布的 {traced} 个（给每个 module 都挂 hook 会拖慢每一步），"
        "在两次采样 step 之间，activation 检查只在其中 {every_step} 个上进行（loss 和每个梯度仍然每步检查）；"
        "重放 incident 时会追踪所有 module",
    ),
    "tracer.events_capped": (
        "module trace: a step held {events} forward events (forwards with no mon.step between them: an "
        "interrupted trainer, or a loop that does not call mon.step); later forwards of that step were not "
        "traced",
        "模块追踪：一个 step 积累了 {events} 个前向事件（两次 mon.step 之间有大量前向：训练器被中断，或循环没有调用 "
        "mon.step）；该 step 之后的前向没有追踪",
    ),
    "batch.walk_capped": (
        "batch checks: the batch is a large container; only its first {visits} elements and {tensors} tensors "
        "were looked at each step (the rest of it was not checked)",
        "batch 检查：这个 batch 是一个很大的容器；每步只查看了它的前 {visits} 个元素和 {tensors} 个张量（其余部分未检查）",
    ),
    "batch.tensor_skipped": (
        "batch checks: {key} is a {kind} tensor, whose values cannot be read; it was not checked (the rest of the "
        "batch was)",
        "batch 检查：{key} 是 {kind} 张量，其值无法读取，因此未检查它（batch 的其余部分照常检查）",
    ),
    "monitor.unreadable": (
        "no diagnosis: the run log in {path} could not be read ({error})",
        "无法诊断：{path} 中的运行日志无法读取（{error}）",
    ),
    "monitor.run_dir": (
        "lossdoctor.watch: the run log is in {path} (afterwards: lossdoctor diagnose {path})",
        "lossdoctor.watch：运行日志在 {path}（之后可运行：lossdoctor diagnose {path}）",
    ),
}
