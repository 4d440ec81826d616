"""TEMPORARY: Chinese for the few English sentences of areas not converted to messages yet.

Every area this package's reports show speaks `messages.Msg` except the detectors being
restructured elsewhere (`detectors/learning_rate.py`, `loss_shape.py`, `scalars.py`,
`quantities.py`) and triage. Before messages existed, the sentences below were translated by
matching their English text; so that `--lang zh` does not get worse for them meanwhile, this
module keeps that matching for exactly these sentences and nothing else. Delete it (and its one
caller, `report.i18n.say`) once those areas build their sentences as `Msg`.
"""

from __future__ import annotations

import re
from functools import lru_cache

#: (English template, Chinese template); `{name}` holes are copied over as they are
SENTENCES: list[tuple[str, str]] = [
    # detectors/learning_rate.py
    ("the loss jumped from {a} to {b} at step {s}", "第 {s} 步 loss 从 {a} 跳升到 {b}"),
    ("and stayed high (median {m} over the next {n} steps)", "并一直居高不下（之后 {n} 步的中位数为 {m}）"),
    ("set the learning rate to about {lr} (now {now})", "把学习率设为约 {lr}（当前为 {now}）"),
    ("the LR starts at its peak: add a linear warm-up over the first ~2-5% of steps",
     "学习率一开始就是峰值：在前约 2-5% 的步里加一段线性 warmup"),
    ("the loss never improved (best {a} vs start {b}) and went non-finite at step {s}",
     "loss 从未改善（最好 {a}，起始 {b}），并在第 {s} 步变成非有限值"),
    ("grad norm grew from {a} to {b} in {n} steps", "grad norm 在 {n} 步内从 {a} 增长到 {b}"),
    ("update/param ratio {r} per step (healthy ~1e-3)", "每步的更新量/参数比为 {r}（健康值约 1e-3）"),
    ("the loss fell to {a} then rose to {b} ({x}x) from step {s} on",
     "loss 先降到 {a}，从第 {s} 步起又升到 {b}（{x} 倍）"),
    ("the update/param ratio (recorded by watch) is needed to tell a too-low LR",
     "判断学习率是否过低需要更新量/参数比（watch 会记录）"),
    ("log the learning rate to check the schedule", "记录学习率才能检查调度"),
    # detectors/loss_shape.py, scalars.py
    ("the loss jumped to {peak} at step {s}, {x}x the median {m} of the {w} steps before it ({z} robust sigmas)",
     "第 {s} 步 loss 跳到 {peak}，是之前 {w} 步中位数 {m} 的 {x} 倍（{z} 个稳健标准差）"),
    ("it came back within 50 steps", "并在 50 步内回落"),
    ("{n} spiking steps in this incident", "这次事件中有 {n} 个尖峰步"),
    ("{n} separate spike incidents in the run", "整个训练中有 {n} 次独立的尖峰事件"),
    ("the batch of step {s} is an outlier: max |x| {a} vs median {m}",
     "第 {s} 步的 batch 是离群值：最大 |x| 为 {a}，中位数为 {m}"),
    ("inspect / skip the batch of step {s}", "检查或跳过第 {s} 步的 batch"),
    ("the LR changed at that step ({a} -> {b}): a schedule event", "学习率在这一步发生了变化（{a} -> {b}）：是调度导致的"),
    ("the grad norm surged to {g} ({x}x its median)", "grad norm 激增到 {g}（中位数的 {x} 倍）"),
    ("if spikes recur: lower the peak LR, and for transformers add QK-layernorm or a z-loss of 1e-4",
     "如果尖峰反复出现：降低峰值学习率；transformer 可以加 QK-layernorm 或 1e-4 的 z-loss"),
    ("chance-level loss would be {c}", "随机猜测水平的 loss 约为 {c}"),
    ("audit a sample of labels (are they shuffled or misaligned with inputs?); train on a small clean "
     "subset to see whether the loss can go lower",
     "抽查一部分标签（是否被打乱，或与输入错位？）；在一个干净的小子集上训练，看 loss 能否降得更低"),
    ("use label smoothing (0.1) or a noise-robust loss if noise is expected",
     "如果噪声无法避免，用 label smoothing（0.1）或对噪声鲁棒的 loss"),
    ("it has not come back", "并且没有回落"),
]


@lru_cache(maxsize=None)
def _compiled() -> list[tuple[re.Pattern[str], str]]:
    out = []
    for en, zh in SENTENCES:
        parts = re.split(r"\{(\w+)\}", en)
        rx = "".join(re.escape(p) if i % 2 == 0 else f"(?P<{p}>.+?)" for i, p in enumerate(parts))
        out.append((re.compile("^" + rx + "$", re.DOTALL), zh))
    return out


def translate(sentence: str) -> str:
    """The Chinese of one of `SENTENCES`; any other sentence unchanged."""
    for rx, zh in _compiled():
        m = rx.match(sentence)
        if m:
            return zh.format(**m.groupdict())
    return sentence
