"""Sentences of the learning-rate detectors (detectors/learning_rate.py): too high, too low, the schedule."""

TEMPLATES = {
    # what to set the LR to
    "lr.fix.lower_by": ("lower the learning rate by {x}x", "把 LR 降低 {x} 倍"),
    "lr.fix.set": ("set the learning rate to about {lr} (now {now})", "把 LR 设为 {lr} 左右（现在是 {now}）"),
    "lr.fix.set_ratio": (
        "set the learning rate to about {lr} (now {now}; that brings the update/param ratio from {ratio} to ~1e-3)",
        "把 LR 设为 {lr} 左右（现在是 {now}；这样 update/param ratio 会从 {ratio} 回到 ~1e-3）",
    ),
    "lr.fix.raise": ("raise the learning rate to about {lr} (now {now})", "把 LR 调大到 {lr} 左右（现在是 {now}）"),
    "lr.fix.raise_ratio": (
        "raise the learning rate to about {lr} (now {now}; that brings the update/param ratio from {ratio} to ~1e-3)",
        "把 LR 调大到 {lr} 左右（现在是 {now}；这样 update/param ratio 会从 {ratio} 回到 ~1e-3）",
    ),
    "lr.fix.range": (
        "lower the learning rate into {lo}-{hi} (now {now}) and keep the value that trains best there",
        "把 LR 降到 {lo}-{hi} 之间（现在是 {now}），取其中训练得最好的值",
    ),
    "lr.fix.range_up": (
        "raise the learning rate into {lo}-{hi} (now {now}) and keep the value that trains best there",
        "把 LR 调大到 {lo}-{hi} 之间（现在是 {now}），取其中训练得最好的值",
    ),
    "lr.high.loss_stays": (
        "the loss kept most of its level (median {first} in the first fifth, {last} in the last)",
        "loss 基本没降下来（前五分之一的中位数 {first}，最后五分之一 {last}）",
    ),
    "lr.fix.warmup_from_peak": (
        "the LR starts at its peak: add a linear warm-up over the first ~2-5% of steps",
        "LR 一开始就是峰值：在前 ~2-5% 的步数里加一段线性 warmup",
    ),
    "lr.fix.warmup_clip": (
        "add or lengthen the LR warm-up, and clip gradients (max_norm=1.0)",
        "加上或加长 LR warmup，并做梯度裁剪（max_norm=1.0）",
    ),
    # how certain an LR cut is (detectors/lr_advice.py)
    "lr.fix.measure_first": (
        "before changing the LR, measure it: re-run from a checkpoint before step {step} for the same number of "
        "steps at a third of the LR and at the current one; the LR is the cause only if the loss stays down at "
        "the smaller one and not at the current one",
        "改 LR 之前先测量：从 step {step} 之前的 checkpoint 出发，分别用三分之一的 LR 和当前 LR 跑同样的步数；"
        "只有较小 LR 下 loss 保持下降、当前 LR 下不能时，原因才是 LR",
    ),
    "lr.advice.withheld": ("no LR cut is advised on this evidence: {why}", "依据不足，不建议降低 LR：{why}"),
    "lr.advice.held": (
        "the loss rose from {base} to {end} ({x}x) from step {step} on and stayed up to the end of the log",
        "loss 从 step {step} 起由 {base} 升到 {end}（{x} 倍），并一直保持到日志结尾",
    ),
    "lr.advice.blown": (
        "the loss blew up to {top} from {base} after step {step}: a jump of that size is a step far too large for "
        "the weights, however the run went on",
        "step {step} 之后 loss 从 {base} 暴涨到 {top}：这么大的跳变说明步长对权重来说过大，无论之后训练如何",
    ),
    "lr.advice.fell_again": (
        "the loss came back down after the rise (from its peak {peak} to {end} at the end of the log, against "
        "{base} before step {step}): a run that trains its loss down again after a bump (a warm-up, an LR "
        "restart, a resume, a change of the data, a running mean filling up) is not one a smaller LR helps",
        "上升之后 loss 又降了下来（从峰值 {peak} 降到日志结尾的 {end}，step {step} 之前为 {base}）：出现波峰后"
        "又能把 loss 降下来的训练（warm-up、LR 重启、恢复训练、数据变化、滑动平均的起步）不需要更小的 LR",
    ),
    "lr.advice.fills_up": (
        "the loss rises gradually from the log's first print ({first}), its lowest, each step adding less than "
        "the one before: the shape of a running mean started at 0 or of an objective that grows from 0 (a KL to "
        "a reference); a model at its init prints its highest loss first, and a step too large makes a rise that "
        "grows",
        "loss 从日志第一条（{first}，也是最低点）开始逐步上升，且每步增幅都比前一步小：这是从 0 开始的滑动平均"
        "或从 0 增长的目标（如相对参考模型的 KL）的形状；初始化时模型的第一条 loss 最高，步长过大造成的上升会越来越快",
    ),
    "lr.advice.tiny": (
        "the loss rose from {base} to {end} after step {step} but stays below {level}: weights a step too large "
        "blew up print losses back near their init's, and an objective near 0 by design (an RL loss, a KL "
        "penalty) moves down there",
        "step {step} 之后 loss 从 {base} 升到 {end}，但仍低于 {level}：被过大步长破坏的权重，其 loss 会回到接近初始化时的水平；"
        "而本就接近 0 的目标（强化学习的目标函数、KL 惩罚）会在这个范围内波动",
    ),
    "lr.advice.small_rise": (
        "the loss ended at {x}x its level before step {step} ({base} -> {end}), under the {need}x a step too large "
        "for the weights leaves behind",
        "loss 最终是 step {step} 之前水平的 {x} 倍（{base} -> {end}），低于步长过大时会留下的 {need} 倍",
    ),
    "lr.advice.in_noise": (
        "the rise from {base} to {end} after step {step} is only {z} sigma of the log's own point-to-point noise",
        "step {step} 之后从 {base} 到 {end} 的上升只有日志自身逐点噪声的 {z} 个 sigma",
    ),
    "lr.advice.unmeasured": (
        "the rise cannot be measured against a level before it (the loss is not positive there)",
        "无法与此前的水平比较这次上升（那里的 loss 不是正数）",
    ),
    "lr.advice.nan_first": (
        "no finite loss came before the NaN/Inf: nothing shows a climb",
        "NaN/Inf 之前没有有限的 loss：看不出有上升过程",
    ),
    "lr.advice.nan_calm": (
        "the loss did not climb before the NaN/Inf (last {last}, {base} before it): a NaN out of a calm run is as "
        "often fp16's range or one bad batch as a step too large",
        "NaN/Inf 之前 loss 没有上升（最后为 {last}，此前为 {base}）：平稳训练中突然出现的 NaN，"
        "同样常见于 fp16 的范围或一个坏 batch，而不只是步长过大",
    ),
    "lr.advice.nan_climb": (
        "the loss climbed to {top} (from {base}) right before the NaN/Inf",
        "NaN/Inf 之前 loss 刚刚从 {base} 升到 {top}",
    ),
    "lr.advice.nan_blown": ("the loss had blown up to {loss} before the NaN/Inf", "NaN/Inf 之前 loss 已经爆到 {loss}"),
    # too high: the loss never improved and went non-finite
    "lr.high.never_improved": (
        "the loss never improved (best {best} vs start {start}) and went non-finite at step {s}",
        "loss 从没改善过（最好 {best}，起点 {start}），并在 step {s} 变成 NaN/Inf",
    ),
    "lr.high.already_rising": (
        "it was already rising at step {s} ({loss}, {x}x the start)",
        "在 step {s} 时就已经在上升了（{loss}，是起点的 {x} 倍）",
    ),
    "lr.high.peak_at": ("the LR reached {lr} at step {s}", "LR 在 step {s} 达到 {lr}"),
    "lr.high.grad_grew": ("grad norm grew from {a} to {b} in {n} steps", "grad norm 在 {n} 步内从 {a} 涨到 {b}"),
    "lr.high.ratio": (
        "update/param ratio {r} per step (healthy ~1e-3)",
        "每步的 update/param ratio 为 {r}（正常约 1e-3）",
    ),
    # too high: a jump in the first steps
    "lr.high.jumped": ("the loss jumped from {a} to {b} at step {s}", "loss 在 step {s} 从 {a} 跳到 {b}"),
    "lr.high.stayed": (
        "and stayed high (median {m} over the next {n} steps)",
        "并且一直居高不下（之后 {n} 步的中位数 {m}）",
    ),
    # too high: divergence later in the run
    "lr.high.fell_then_rose": (
        "the loss fell to {best} then rose to {last} ({x}x) from step {s} on",
        "loss 先降到 {best}，从 step {s} 起又涨到 {last}（{x} 倍）",
    ),
    # too high: an update as large as the weights
    "lr.high.blown": (
        "the update at step {s} was {r}x the size of the weights (||dW||/||W||; healthy ~1e-3)",
        "step {s} 的更新量是权重本身的 {r} 倍（||dW||/||W||；正常约 1e-3）",
    ),
    "lr.high.not_improved_since": (
        "the loss has not improved since (start {start}, now {last})",
        "此后 loss 再没有改善（起点 {start}，现在 {last}）",
    ),
    "lr.high.at_chance": (
        "it sits at the chance level {c}: the first steps saturated the model",
        "它停在随机水平 {c}：最初几步就让模型饱和了",
    ),
    "lr.high.activations_grew": ("activations grew from {a} to {b}", "激活值从 {a} 涨到 {b}"),
    # too high: oscillation with huge updates
    "lr.high.ratio_median": (
        "median update/param ratio {r} per step (DeepDiagnosis: above 0.1 is too large; healthy ~1e-3)",
        "每步 update/param ratio 的中位数为 {r}（DeepDiagnosis：超过 0.1 就太大了；正常约 1e-3）",
    ),
    "lr.high.not_improving": (
        "the loss is not improving (first fifth {first}, last {last})",
        "loss 没有改善（前五分之一 {first}，最后五分之一 {last}）",
    ),
    # too low
    "lr.low.ratio_median": (
        "median update/param ratio {r} per step (DeepDiagnosis: below 1e-5 is too small; healthy ~1e-3)",
        "每步 update/param ratio 的中位数为 {r}（DeepDiagnosis：低于 1e-5 就太小了；正常约 1e-3）",
    ),
    "lr.low.crawl": (
        "the loss moved from {first} to only {last} over {n} steps",
        "{n} 步里 loss 只从 {first} 变到 {last}",
    ),
    "hint.update_ratio": (
        "the update/param ratio (recorded by watch) is needed to tell a too-low LR",
        "要判断 LR 是否过小，需要 update/param ratio（watch 会记录）",
    ),
    # the schedule
    "hint.lr": ("log the learning rate to check the schedule", "记录 LR 才能检查学习率调度"),
    "lr.schedule.all_zero": ("the learning rate is 0 at every logged step", "每个记录的 step 上 LR 都是 0"),
    "lr.schedule.fix_all_zero": (
        "check the scheduler: a LambdaLR returning 0, or warm-up steps larger than the run",
        "检查 scheduler：是不是 LambdaLR 返回了 0，或者 warmup 步数比整个训练还长",
    ),
    "lr.schedule.staircase": (
        "during warm-up the LR rose in {n} jumps, one every ~{k} steps (e.g. {a} -> {b} at step {s}), flat in "
        "between: the warm-up scheduler is stepped once per epoch / every {k} steps, not per optimizer step",
        "warmup 期间 LR 分 {n} 次跳升，大约每 {k} 步一次（比如 step {s} 从 {a} -> {b}），中间保持不变："
        "warmup 的 scheduler 是每个 epoch（每 {k} 步）才 step 一次，而不是每个 optimizer step 都调用",
    ),
    "lr.schedule.fix_staircase": (
        "call scheduler.step() after every optimizer.step(), or express warm-up in epochs",
        "每次 optimizer.step() 之后都调用 scheduler.step()，或者把 warmup 按 epoch 来设",
    ),
    "lr.schedule.cosine_restart": (
        "the LR decayed from {peak} to {low} at step {s_min}, then climbed back to {back} by step {s}: the cosine "
        "period (~{period} steps) is shorter than the run ({total} steps)",
        "LR 从 {peak} 衰减到 step {s_min} 的 {low}，到 step {s} 又回升到 {back}：cosine 的周期（~{period} 步）"
        "比整个训练（{total} 步）短",
    ),
    "lr.schedule.fix_cosine": (
        "set CosineAnnealingLR(T_max=total optimizer steps) (here {total} minus warm-up), or use "
        "CosineAnnealingWarmRestarts if restarts are intended",
        "把 CosineAnnealingLR 的 T_max 设为 optimizer 的总步数（这里是 {total} 减去 warmup 步数）；如果本来就想要"
        "重启，就用 CosineAnnealingWarmRestarts",
    ),
    "lr.schedule.one_step_rise": (
        "the LR rose {x}x in one step ({a} -> {b} at step {s})",
        "LR 在一步之内涨了 {x} 倍（step {s}：{a} -> {b}）",
    ),
    "lr.schedule.fix_one_step_rise": (
        "check the scheduler's milestones/lambda and that it is not re-created or stepped twice; ramp the LR over "
        "several steps",
        "检查 scheduler 的 milestones/lambda，确认它没有被重新创建、也没有一步调用两次；让 LR 分几步逐渐升上去",
    ),
    "lr.schedule.stuck_zero": (
        "the learning rate is exactly 0 at {n} logged steps from step {s} on",
        "从 step {s} 起有 {n} 个记录的 step 上 LR 恰好是 0",
    ),
    "lr.schedule.fix_stuck_zero": (
        "check the schedule's length (total steps) and any LambdaLR returning 0",
        "检查调度的长度（总步数），以及有没有 LambdaLR 返回 0",
    ),
}
