"""The live monitor's one-line alerts on stderr (`live.alert_line`)."""

TEMPLATES = {
    "live.alert": (
        "lossdoctor: {severity} {cause} ({symptom}) at {where}: ",
        "lossdoctor：{severity} {cause}（{symptom}），位置：{where}：",
    ),
    "live.fix": (" -> fix: {fix}", " -> 修复：{fix}"),
    "live.step": ("step {step}", "第 {step} 步"),
    "live.samples": ("samples {samples}", "样本 {samples}"),
    "live.packed_examples": ("packed {examples}", "packed {examples}"),
    "live.rank": ("rank {rank}", "rank {rank}"),
    "live.run": ("run", "整个训练"),
    "live.info": ("INFO", "提示"),
    "live.warning": ("WARNING", "警告"),
    "live.critical": ("CRITICAL", "严重"),
}
