"""Several runs side by side (`lossdoctor diagnose RUN_A RUN_B`): the table's headings and the lines
under it."""

TEMPLATES = {
    "compare.title": ("comparing {n} runs", "比较 {n} 个运行"),
    "compare.col.run": ("run", "运行"),
    "compare.col.status": ("status", "状态"),
    "compare.col.top": ("top finding", "首要发现"),
    "compare.col.final": ("final loss", "最终 loss"),
    "compare.col.min": ("min loss", "最低 loss"),
    "compare.col.steps": ("steps", "步数"),
    "compare.none": ("-", "-"),
    "compare.nonfinite": ("nan from step {step}", "第 {step} 步起为 nan"),
    "compare.differ": ("settings that differ: {names}", "不同的设置：{names}"),
    "compare.same": (
        "no setting read from the runs differs (those read: {names})",
        "从运行中读到的设置都相同（读到的：{names}）",
    ),
    "compare.no_settings": (
        "no settings could be read from these runs (meta.json, hparams.yaml, a config)",
        "这些运行里读不到任何设置（meta.json、hparams.yaml 或配置）",
    ),
    "compare.parted": (
        "the loss of {run} parts from {base} at step {step}: difference {diff} beyond "
        "{k} x the pooled noise {noise} (threshold {threshold}) for {consecutive} aligned points in a row",
        "{run} 的 loss 在第 {step} 步与 {base} 分开：差值 {diff} 连续 {consecutive} 个对齐点超过 "
        "{k} 倍合并噪声 {noise}（阈值 {threshold}）",
    ),
    "compare.together": (
        "the loss of {run} stays with {base} over {n} aligned steps: never {consecutive} points in a "
        "row beyond {k} x the pooled noise {noise} (threshold {threshold})",
        "{run} 的 loss 在 {n} 个对齐步上与 {base} 一致：从未连续 {consecutive} 个点超过 {k} 倍合并噪声 "
        "{noise}（阈值 {threshold}）",
    ),
    "compare.too_short": (
        "{run} and {base} share {n} logged steps: too few to say where their losses part",
        "{run} 和 {base} 只有 {n} 个共同记录的步：太少，无法判断 loss 从哪里分开",
    ),
    "compare.hint": (
        "one run's full report: lossdoctor diagnose {path}",
        "单个运行的完整报告：lossdoctor diagnose {path}",
    ),
    "compare.skipped": ("{path}: skipped ({error})", "{path}：已跳过（{error}）"),
}
