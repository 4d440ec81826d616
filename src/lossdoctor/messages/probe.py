"""Sentences of the LR probe (triage/lr_probe.py, detectors/probes.py) and of live findings the final
diagnosis withdrew."""

TEMPLATES = {
    "lr.fix.probed": (
        "set the learning rate to {lr} (now {now}): replayed from a snapshot on the run's own batches it "
        "reached a loss of {loss} where the current LR reached {unfixed}",
        "把 LR 设为 {lr}（现在是 {now}）：从快照在本次训练自己的 batch 上重放，它的 loss 到了 {loss}，"
        "当前 LR 是 {unfixed}",
    ),
    "probe.verified": (
        "LR {lr} tried from the snapshot at step {start} through step {end}: loss {loss} vs {unfixed} at "
        "the current LR {now}",
        "从 step {start} 的快照重放到 step {end}，LR {lr}：loss {loss}，当前 LR {now} 为 {unfixed}",
    ),
    "probe.losses": (
        "LR probe, steps {start}-{end} replayed from a snapshot (mean loss over the second half): {trials}",
        "LR 探测，从快照重放 step {start}-{end}（后半段的平均 loss）：{trials}",
    ),
    "probe.trial_now": ("{lr} (now) -> {loss}", "{lr}（当前）-> {loss}"),
    "probe.trial": ("{lr} -> {loss}", "{lr} -> {loss}"),
    "probe.withdrawn": (
        "{cause} (announced at step {step}) was withdrawn: no LR the probe tried beat the current one; {losses}",
        "{cause}（在 step {step} 报出）已撤回：探测试过的 LR 都没有比当前的更好；{losses}",
    ),
    "probe.not_beaten": (
        "no LR the probe tried trained better within its window ({losses}): try a longer LR range test",
        "探测在其窗口内试过的 LR 都没有训练得更好（{losses}）：请做更长的 LR 区间测试",
    ),
    "probe.none": (
        "no LR probe could run ({reason}): the LR to use is a range to try, not a measured value",
        "无法做 LR 探测（{reason}）：建议的 LR 是一个要试的范围，不是测出来的值",
    ),
    "probe.no_verdict": ("the LR probe gave no verdict ({reason})", "LR 探测没有给出结论（{reason}）"),
    "probe.stopped": (
        "the replay stopped at step {step}: its batch was not kept",
        "重放停在 step {step}：这一步的 batch 没有保存",
    ),
    "probe.reason.unknown": ("reason unknown", "原因未知"),
    "probe.tried": (
        "tried from the snapshot, steps {start}-{end}: {fix} -> loss {loss} vs {unfixed} without it",
        "从快照试过（step {start}-{end}）：{fix} -> loss {loss}，不改时为 {unfixed}",
    ),
    "withdrawn.live": (
        "{cause} ({severity}, announced live at step {step}) is not in this report: {why}",
        "{cause}（{severity}，训练中在 step {step} 报出）不在本报告里：{why}",
    ),
    "withdrawn.explained": ("{by} explains it", "{by} 解释了它"),
    "withdrawn.not_shown": (
        "the rest of the run no longer shows it (loss {then} then, {last} at the end)",
        "后续训练已不再显示这个问题（当时 loss {then}，结束时 {last}）",
    ),
}
