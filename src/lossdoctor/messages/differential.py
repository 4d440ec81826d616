"""Sentences of the symptoms' differential (detectors/symptoms.py, detectors/differential.py)."""

TEMPLATES = {
    # the symptoms, as the log shows them
    "diff.what.rising_start": (
        "the loss rose over the run's first {n} logged points, from {first} to {last} ({ratio}x), never below its start",
        "在训练最初的 {n} 个记录点里 loss 一路上升，从 {first} 到 {last}（{ratio} 倍），从未低于起点",
    ),
    "diff.what.creep": (
        "the loss crept up from its best {best} (step {best_step}) to {end} ({ratio}x) over its last {n} points, "
        "rising at most of them, from step {step} on",
        "loss 从最好的 {best}（step {best_step}）在最后 {n} 个点里缓慢上升到 {end}（{ratio} 倍），多数点都在上升，"
        "始于 step {step}",
    ),
    "diff.what.nonfinite": (
        "the loss or the gradient norm went non-finite at step {step}",
        "loss 或 grad norm 在 step {step} 变成了 NaN/Inf",
    ),
    "diff.what.nonfinite_component": (
        "the component loss {name} is non-finite at step {step}",
        "分项 loss {name} 在 step {step} 为 NaN/Inf",
    ),
    "diff.what.nonfinite_text": (
        "the log reports a NaN/Inf loss at step {step}, after its last logged value",
        "日志在最后一个记录值之后的 step {step} 报告 loss 为 NaN/Inf",
    ),
    "diff.what.nonfinite_grad": (
        "the gradient norm is non-finite on all {n} logged steps from step {step} while the loss stays finite: "
        "no update the log shows was sound (skipped, or made from a gradient that cannot be measured)",
        "从 step {step} 起全部 {n} 个记录的 step 上 grad norm 都是 NaN/Inf，而 loss 仍为有限值："
        "日志中没有一次更新是正常的（被跳过，或基于无法度量的梯度）",
    ),
    "diff.what.repeat": (
        "the losses of steps {first} on ({n} in a row) recur exactly at step {step} ({again}): the same batches "
        "gave the same losses",
        "从 step {first} 起连续 {n} 个 loss 在 step {step}（{again}）处完全重复：同样的 batch 给出了同样的 loss",
    ),
    "diff.what.recur": (
        "{n} losses recur exactly at later steps (step {first}'s {level} again at step {again}), far more often than "
        "the log's own spread and print allow: the same batches gave the same losses, so the weights did not change",
        "有 {n} 个 loss 在之后的 step 完全重复（step {first} 的 {level} 在 step {again} 再次出现），远超日志自身波动和"
        "打印精度所能解释：同样的 batch 给出了同样的 loss，权重没有改变",
    ),
    "diff.what.no_fall": (
        "the loss never fell below its first value {first} over {n} points from step {step} to {end_step} "
        "(lowest {low}, last {last})",
        "从 step {step} 到 {end_step} 的 {n} 个点上 loss 从未低于起始值 {first}（最低 {low}，最后 {last}）",
    ),
    "diff.what.spike": (
        "the loss jumped to {loss} at step {step}, {ratio}x the median {base} of the {before} points before "
        "it, beyond their own noise",
        "loss 在 step {step} 跳到 {loss}，是之前 {before} 个点中位数 {base} 的 {ratio} 倍，超出了它们自身的噪声",
    ),
    "diff.what.spike_opening": (
        "the log opens on a loss of {loss} (step {step}), {ratio}x the median {base} of the {after} points "
        "after it, which are back in range: a spike the run came back from",
        "日志开头的 loss 是 {loss}（step {step}），是之后 {after} 个点中位数 {base} 的 {ratio} 倍，"
        "之后的点已回到正常范围：训练从这次尖峰中恢复了",
    ),
    "diff.what.signed_jump": (
        "the loss jumped to {loss} at step {step}, {sigmas} robust sigmas above the median {base} of the "
        "{before} points before it{after}",
        "loss 在 step {step} 跳到 {loss}，比之前 {before} 个点的中位数 {base} 高出 {sigmas} 个稳健标准差{after}",
    ),
    "diff.what.signed_one_out": (
        "the loss jumped to {loss} at step {step}, {sigmas} robust sigmas above the median {base} of the {n} "
        "other points of the log, before and after it, which stay in range: a spike the run came back from",
        "loss 在 step {step} 跳到 {loss}，比日志中其前后另外 {n} 个点的中位数 {base} 高出 {sigmas} 个稳健标准差，"
        "这些点都在正常范围内：训练从这次尖峰中恢复了",
    ),
    "diff.what.signed_after": (
        "; after it the loss sat at {level} (median)",
        "；之后 loss 停在 {level}（中位数）",
    ),
    "diff.what.jump_stayed": (
        "the loss jumped to {loss} at step {step}, {ratio}x the median {base} of the {before} points before "
        "it, and did not come back",
        "loss 在 step {step} 跳到 {loss}，是之前 {before} 个点中位数 {base} 的 {ratio} 倍，之后没有回落",
    ),
    "diff.what.lm_untrained": (
        "a language model's loss sat at {first} -> {last} over {n} prints from step {step} to {end_step}, above "
        "{level} nats: near the entropy of the tokens' frequencies (a unigram model), which a learning model leaves "
        "in its first few hundred steps; trained models sit at 1.5-4.5",
        "语言模型的 loss 在 step {step} 到 {end_step} 的 {n} 次打印中停在 {first} -> {last}，高于 {level} nats："
        "接近 token 频率的熵（unigram 模型），正常学习的模型在最初几百步内就会离开这个水平；训练好的模型在 1.5-4.5",
    ),
    "diff.what.metric_worst": (
        "the {metric} printed beside the loss stayed at its worst ({first} -> {last}) over {n} prints from step "
        "{step} to {end_step} while the loss did not fall ({loss_first} -> {loss_last}): the model has learnt "
        "nothing about its labels",
        "loss 旁打印的 {metric} 在 step {step} 到 {end_step} 的 {n} 次打印中一直处于最差水平（{first} -> {last}），"
        "而 loss 没有下降（{loss_first} -> {loss_last}）：模型没有学到任何关于标签的东西",
    ),
    "diff.what.fit_flat": (
        "over the first {n} evaluation periods (to step {end_step}) neither loss fell after the first: the "
        "training loss went {first} -> {last} from step {step}, the held-out loss {eval_first} -> {eval_last}, "
        "and the training loss sits at the held-out one: the model is not fitting even its training data",
        "前 {n} 个评估周期（到 step {end_step}）里两个 loss 在第一个周期之后都没有下降：训练 loss 从 step {step} 起 "
        "{first} -> {last}，验证 loss {eval_first} -> {eval_last}，且训练 loss 和验证 loss 持平：模型连训练数据都没有拟合",
    ),
    "diff.what.epoch_flat": (
        "the loss did not fall over {n} epochs from epoch {step} to {end_step} (median of the first third "
        "{first}, of the last third {last}): pass after pass over the data, nothing was learnt",
        "从第 {step} 到第 {end_step} 个 epoch 的 {n} 个 epoch 里 loss 没有下降（前三分之一中位数 {first}，"
        "后三分之一中位数 {last}）：一遍又一遍地过数据，什么也没有学到",
    ),
    "diff.what.climb": (
        "the loss climbed from step {step} over two logged intervals to {loss}, {ratio}x the median {base} "
        "of the points before",
        "loss 自 step {step} 起在两个记录间隔内升到 {loss}，是之前各点中位数 {base} 的 {ratio} 倍",
    ),
    "diff.what.rise": (
        "the loss rose from its best {best} (step {best_step}) to {end} at the end of the log ({ratio}x), "
        "from step {step} on",
        "loss 从最低的 {best}（step {best_step}）上升到日志末尾的 {end}（{ratio} 倍），自 step {step} 起",
    ),
    "diff.what.oscillation": (
        "from step {step} on the loss swings by x{swing} from one logged point to the next (its noise "
        "before: x{base}) over {n} points, and does not fall",
        "自 step {step} 起 loss 在相邻记录点之间摆动 {swing} 倍（此前的噪声：{base} 倍），共 {n} 个点，且没有下降",
    ),
    "diff.what.absurd": ("a loss of {loss} at step {step}: {why}", "step {step} 的 loss 为 {loss}：{why}"),
    "diff.absurd.ce_high": (
        "above ln(256000) = 12.5, what a cross-entropy over the largest vocabulary starts at",
        "高于 ln(256000) = 12.5，即最大词表上交叉熵的初始值",
    ),
    "diff.absurd.negative": ("a cross-entropy cannot be negative", "交叉熵不可能为负"),
    "diff.absurd.huge": ("no healthy run prints a loss of a million or more", "健康的训练不会打印 ≥ 1e6 的 loss"),
    "diff.what.zero": (
        "the loss is exactly 0 on {n} logged steps from step {step}",
        "从 step {step} 起 {n} 个记录的 step 上 loss 恰好为 0",
    ),
    "diff.what.constant": (
        "the loss is exactly {level} on all {n} logged steps",
        "全部 {n} 个记录的 step 上 loss 都恰好是 {level}",
    ),
    "diff.what.eval_constant": (
        "the evaluation loss is exactly {level} at each of the last {n} evaluations while the training loss "
        "still moves: the model's outputs on held-out data no longer change",
        "最后 {n} 次评估的 loss 都恰好是 {level}，而训练 loss 仍在变化：模型在验证集上的输出已不再改变",
    ),
    "diff.what.stuck": (
        "the loss is exactly {level} on the last {n} logged steps, from step {step} (it was {before} "
        "before): it stopped changing",
        "从 step {step} 起最后 {n} 个记录的 step 上 loss 都恰好是 {level}（此前为 {before}）：它不再变化",
    ),
    "diff.what.saturated": (
        "from step {step} the loss is each row's error rate times a cross-entropy's clamp ({level} = {share} x "
        "{clamp}) on {n} of {of} rows: every output sits at exactly 0 or 1 (saturated), so no gradient flows "
        "through it",
        "从 step {step} 起，loss 等于每行的错误率乘以交叉熵的截断值（{level} = {share} x {clamp}），共 {of} 行中的 "
        "{n} 行如此：每个输出都恰好是 0 或 1（饱和），梯度无法通过",
    ),
    "diff.what.chance": (
        "the loss sits at {level} on {n} points: the chance level ln({k}) = {chance}, a model that has learnt "
        "nothing about its labels",
        "loss 在 {n} 个点上停在 {level}：即随机猜测水平 ln({k}) = {chance}，模型没有学到任何关于标签的东西",
    ),
    "diff.what.grad_jump": (
        "the gradient norm jumped to {g} at step {step}, {ratio}x its median {base} before",
        "grad norm 在 step {step} 跳到 {g}，是之前中位数 {base} 的 {ratio} 倍",
    ),
    "diff.what.grad_level": (
        "the gradient norm's median over the log is {median} (largest {top})",
        "整个日志中 grad norm 的中位数为 {median}（最大 {top}）",
    ),
    "diff.what.grad_level_jump": (
        "the gradient norm's median over the log is {median} (largest {top}), and the loss jumped from {base} to "
        "{loss} ({ratio}x) in one logged interval at step {step}",
        "整个日志中 grad norm 的中位数为 {median}（最大 {top}），loss 在 step {step} 一个记录间隔内从 {base} 跳到 "
        "{loss}（{ratio} 倍）",
    ),
    "diff.what.scale_collapse": (
        "the loss scale fell from {top} to {low} (step {low_step})",
        "loss scale 从 {top} 降到 {low}（step {low_step}）",
    ),
    "diff.what.scale_low": (
        "the loss scale is {low} from its first print (step {step}): below 1, the scaler has backed off past "
        "every overflow a healthy fp16 run has",
        "loss scale 从第一次打印（step {step}）起就是 {low}：低于 1，缩放器的回退已超过健康 fp16 训练会有的任何溢出",
    ),
    "diff.what.skips": (
        "{k} of {n} logged steps were skipped for overflow, from step {step}",
        "{n} 个记录的 step 中有 {k} 个因溢出被跳过，自 step {step} 起",
    ),
    "diff.what.lr_zero": ("the LR is exactly 0 on all {n} logged steps", "全部 {n} 个记录的 step 上 LR 都恰好为 0"),
    "diff.what.lr_tiny": (
        "the LR is at most {lr} over the log while the loss went from {first} to {last}",
        "整个日志中 LR 至多为 {lr}，而 loss 从 {first} 变为 {last}",
    ),
    # the ranking
    "diff.against": ("against it: {items}", "不支持它的证据：{items}"),
    "diff.ranked": (
        "ranked by the evidence in the log: {first} ({p1:.0%}), then {second} ({p2:.0%})",
        "按日志中的证据排序：{first}（{p1:.0%}），其次 {second}（{p2:.0%}）",
    ),
    "diff.unseparated": (
        "nothing in the log separates {first} from {second}: the order is how often each causes this symptom, "
        "not evidence of this run, so the cause is uncertain until the measurement below is made",
        "日志中没有能区分 {first} 与 {second} 的证据：这个排序只反映各原因导致该症状的常见程度，而不是本次训练的证据，"
        "在完成下面的测量之前原因仍不确定",
    ),
    "diff.separate": ("what separates the two: {how}", "区分二者的方法：{how}"),
    # the evidence
    "diff.ev.fp16": (
        "the run trains in fp16 (a loss scale or overflow lines in the log, or its config)",
        "该训练使用 fp16（日志中有 loss scale 或溢出信息，或配置如此）",
    ),
    "diff.ev.wide_dtype": (
        "the run trains in {dtype}, which needs no loss scale",
        "该训练使用 {dtype}，无需 loss scale",
    ),
    "diff.ev.unit_scale": (
        "the loss scale is exactly 1 throughout: no fp16 loss scaling (bf16 or fp32)",
        "loss scale 始终恰好为 1：没有 fp16 loss scaling（bf16 或 fp32）",
    ),
    "diff.ev.scale_steady": (
        "the loss scale held at {low} or above before it: the scaler was not backing off",
        "在此之前 loss scale 保持在 {low} 或以上：scaler 没有在回退",
    ),
    "diff.ev.scale_fell": (
        "the loss scale fell from {top} to {low} by step {step}",
        "loss scale 到 step {step} 时已从 {top} 降到 {low}",
    ),
    "diff.ev.overflow_lines": (
        "the log prints {n} overflow / loss-scale lines, the first at step {first}",
        "日志打印了 {n} 条溢出 / loss scale 信息，第一条在 step {first}",
    ),
    "diff.ev.fp16_model": (
        "{model} is known to overflow in fp16 (it was trained in bf16)",
        "{model} 已知在 fp16 下会溢出（它是用 bf16 训练的）",
    ),
    "diff.ev.grad_rose": (
        "the gradient norm rose to {top} before it, {ratio}x its earlier median {base}",
        "在此之前 grad norm 升到 {top}，是早先中位数 {base} 的 {ratio} 倍",
    ),
    "diff.ev.grad_big": ("the gradient norm reached {g}", "grad norm 达到 {g}"),
    "diff.ev.grad_big_unclipped": (
        "a language model's gradient norm at a median of {g}, and no clipping in the "
        "configuration the log shows: every update is taken at that size",
        "语言模型的 grad norm 中位数为 {g}，且日志所示的配置中没有梯度裁剪：每次更新都按这个大小进行",
    ),
    "diff.ev.clips": (
        "the run clips gradients at max_norm={max_norm}: the norm printed is before clipping",
        "该运行以 max_norm={max_norm} 裁剪梯度：打印的范数是裁剪前的",
    ),
    "diff.ev.grad_jump": (
        "the gradient norm jumped to {g} at step {step} (median {base} before)",
        "grad norm 在 step {step} 跳到 {g}（此前中位数 {base}）",
    ),
    "diff.ev.loss_rose": (
        "the loss rose to {top} just before, over its median {base}",
        "在此之前 loss 升到 {top}，高于其中位数 {base}",
    ),
    "diff.ev.calm": (
        "{n} calm steps before it: no build-up in the loss or the gradient norm",
        "之前 {n} 个 step 都很平稳：loss 和 grad norm 都没有逐步上升",
    ),
    "diff.ev.at_start": (
        "it is there from the first logged step, before any update",
        "从第一个记录的 step 就出现了，在任何更新之前",
    ),
    "diff.ev.warmup_end": (
        "it came as the LR reached its peak {lr} (step {step}) after a warm-up",
        "它出现在 warm-up 之后 LR 达到峰值 {lr}（step {step}）时",
    ),
    "diff.ev.warming": ("the LR was still climbing, from {lr0} to {lr}", "LR 仍在上升，从 {lr0} 到 {lr}"),
    "diff.ev.nonfinite_text": (
        "the log warns of NaN/Inf values {n} times, the first at step {first}",
        "日志 {n} 次警告 NaN/Inf 值，第一次在 step {first}",
    ),
    "diff.ev.labels_ignored": (
        "the log says labels were dropped or truncated {n} times, the first at step {first}",
        "日志 {n} 次提示标签被忽略或截断，第一次在 step {first}",
    ),
    "diff.ev.grad_zero": ("the gradient norm is exactly 0 there", "那里的 grad norm 恰好为 0"),
    "diff.ev.zero_beside_nan_grad": (
        "at step {step} the loss is logged as exactly 0 beside a NaN gradient norm: a mean over no supervised token",
        "第 {step} 步 loss 记为恰好 0，而 grad norm 为 NaN：这是对零个受监督 token 取平均",
    ),
    "diff.ev.saturated_start": (
        "the run started at loss {loss:.3g}, far above chance ({chance:.3g}): a saturated softmax underflows to 0",
        "训练起点的 loss 为 {loss:.3g}，远高于随机猜测水平（{chance:.3g}）：饱和的 softmax 会下溢为 0",
    ),
    "diff.ev.epoch_zero": (
        "the log prints one loss per epoch, and it is exactly 0 at all {n} of them",
        "日志每个 epoch 打印一个 loss，{n} 个 epoch 全都恰好为 0",
    ),
    "diff.ev.grad_nonfinite": (
        "the gradient norm is non-finite on {n} logged steps",
        "{n} 个记录的 step 上 grad norm 为 NaN/Inf",
    ),
    "diff.ev.lr_zero_all": ("the LR is exactly 0 on all {n} logged steps", "全部 {n} 个记录的 step 上 LR 都恰好为 0"),
    "diff.ev.lr_tiny": ("the LR is at most {lr}", "LR 至多为 {lr}"),
    "diff.ev.recovered": ("the loss came back afterwards", "之后 loss 回落了"),
    "diff.ev.sudden": ("it happened in one logged interval ({ratio}x)", "它发生在一个记录间隔内（{ratio} 倍）"),
    "diff.ev.clamped": (
        "the loss is {loss} at {n} point(s): {what}; the true class's probability reached 0 (outputs overflowed, "
        "or a label outside the output's range), and the printed loss is the clamp's, not a measurement",
        "loss 在 {n} 个点上等于 {loss}：{what}；真实类别的概率已经变成 0（输出溢出，或标签超出输出范围），"
        "打印出的 loss 是截断值，而不是实际测量值",
    ),
    "diff.clamp.caffe_flt_min": (
        "-ln(FLT_MIN), where Caffe's SoftmaxWithLoss clamps a zero probability",
        "-ln(FLT_MIN)，Caffe 的 SoftmaxWithLoss 把为 0 的概率截断到这里",
    ),
    "diff.clamp.keras_epsilon": (
        "-ln(1e-7), where Keras's cross-entropy clips a zero probability (its epsilon)",
        "-ln(1e-7)，Keras 的交叉熵把为 0 的概率截断到这里（epsilon）",
    ),
    "diff.ev.to_chance": (
        "it jumped to {loss}, the chance level of a {k}-way softmax: the weights were wrecked",
        "它跳到 {loss}，即 {k} 类 softmax 的随机水平：权重已被破坏",
    ),
    "diff.ev.froze_after_moving": (
        "the loss moved before it ({n} earlier point(s) differ), then froze at {level}",
        "在此之前 loss 有变化（之前 {n} 个点的值不同），随后停在 {level}",
    ),
    "diff.ev.negative": ("the loss is negative", "loss 为负"),
    "diff.ev.v_turn": (
        "the loss fell at every logged point from {first} to {best} (step {step}), then rose at every point to {last}",
        "loss 从 {first} 逐点下降到 {best}（step {step}），之后又逐点上升到 {last}",
    ),
    "diff.ev.bce_base_rate": (
        "the loss sits at {level}, the binary cross-entropy of K = {k} one-hot columns predicted at their base rate "
        "1/{k} ({h}): the outputs learnt the class prior under a binary loss",
        "loss 停在 {level}，正好是 K = {k} 个 one-hot 列都预测为基础比例 1/{k} 时的二元交叉熵（{h}）："
        "在二元 loss 下输出只学到了类别先验",
    ),
    "diff.ev.clamped_share": (
        "the loss {level} is the share {share} of samples of the other class times a binary cross-entropy's clamp "
        "{clamp}: every output sits at exactly 1 (or 0), as a softmax over one output unit always gives",
        "loss {level} 正好是另一类样本的比例 {share} 乘以二元交叉熵的截断值 {clamp}：每个输出都恰好为 1（或 0），"
        "单个输出单元上的 softmax 总是如此",
    ),
    "diff.ev.train_moves": (
        "the training loss still moves between those evaluations",
        "这几次评估之间训练 loss 仍在变化",
    ),
    "diff.ev.constant": ("the loss repeats to the last digit across batches", "不同 batch 的 loss 完全相同"),
    "diff.ev.scale_below_one": ("the scale is {low}, below 1", "scale 为 {low}，低于 1"),
    "diff.ev.loss_moving": ("the loss moves from step to step", "loss 在各 step 之间有变化"),
    "diff.ev.first_updates": (
        "it came after only {n} logged step(s) of the run's start: the first updates",
        "它出现在训练开始后仅 {n} 个记录的 step：即最初的几次更新",
    ),
    "diff.ev.kept_rising": (
        "the loss rose at each of the {n} logged intervals to the end of the log (last {last})",
        "直到日志末尾，loss 在全部 {n} 个记录间隔上都在上升（最后为 {last}）",
    ),
    "diff.ev.early": (
        "it came at step {step}, within the run's first {n} updates",
        "它出现在 step {step}，即训练最初的 {n} 次更新之内",
    ),
    "diff.ev.fp32_default": (
        "{framework} trains in fp32 unless a mixed-precision policy is set, and the log shows none",
        "{framework} 默认以 fp32 训练（除非设置了混合精度策略），日志中也没有显示使用混合精度",
    ),
    "diff.ev.intermittent": (
        "{n} finite losses after it at the earlier level ({base}): the weights survived",
        "之后有 {n} 个有限的 loss 回到先前水平（{base}）：权重没有被破坏",
    ),
    "diff.ev.unsteady": (
        "before it the loss swung by a median {swing} in ln per logged interval (>= 20%)",
        "在此之前 loss 每个记录间隔的 ln 变化中位数为 {swing}（≥ 20%）：在剧烈摆动",
    ),
    "diff.ev.lr_small": (
        "the LR there is {lr}, too small to blow the weights up",
        "那里的 LR 为 {lr}，小到不足以让权重爆炸",
    ),
    "diff.ev.first_update": (
        "it came at the first update, from a finite loss and gradient norm ({g}) at step 0",
        "它出现在第一次更新时，而 step 0 的 loss 与 grad norm（{g}）都是有限值",
    ),
    "diff.ev.after_sane": (
        "the {n} losses before it were in range (at most {top})",
        "它之前的 {n} 个 loss 都在正常范围内（至多 {top}）",
    ),
    "diff.ev.repeats": (
        "the losses from step {first} recur exactly from step {again}",
        "从 step {first} 起的 loss 在 step {again} 起完全重复",
    ),
    "diff.ev.rising": ("the loss rose from {first} to {last}", "loss 从 {first} 升到 {last}"),
    "diff.ev.collapsed": (
        "the {metric} had been better ({best}) before it went back to its worst",
        "{metric} 之前曾更好（{best}），之后又回到最差",
    ),
    "diff.ev.term_stays": (
        "{terms} stayed NaN/Inf on {n} prints from there on while the other terms stayed finite: the weights did "
        "not go NaN",
        "从那里起 {n} 次打印中 {terms} 一直是 NaN/Inf，而其他项保持有限：权重并没有变成 NaN",
    ),
    "diff.ev.one_term": (
        "at that step the loss term(s) {bad} went non-finite while {n} other term(s) stayed finite",
        "该 step 上 loss 分项 {bad} 变成 NaN/Inf，而其余 {n} 个分项仍是有限值",
    ),
    "diff.ev.blew_up": (
        "the last finite loss before it was {loss}: it had blown up before it went non-finite",
        "在此之前最后一个有限的 loss 为 {loss}：它在变成 NaN/Inf 之前已经爆炸",
    ),
    "diff.ev.trained_long": (
        "it came at step {step}: the run had trained that long, so its initial weights were sane",
        "它出现在 step {step}：此前已训练这么久，说明初始权重是正常的",
    ),
    "diff.ev.late": (
        "it came at step {step}, after thousands of updates of a run whose loss was still at its level",
        "它出现在 step {step}，此前已更新数千次，且 loss 仍处于正常水平",
    ),
    "diff.ev.grad_rose_at_peak": (
        "the gradient norm stayed near {base} through the warm-up and rose to {top} only after the LR reached its "
        "peak {lr} (step {step})",
        "warm-up 期间 grad norm 保持在 {base} 附近，直到 LR 在 step {step} 达到峰值 {lr} 之后才升到 {top}",
    ),
    "diff.ev.loss_finite": ("the loss was still finite at that step", "该 step 的 loss 仍是有限值"),
    "diff.ev.all_skipped": (
        "the loss stayed flat and finite over all {n} steps with a non-finite gradient: every update was "
        "thrown away, so nothing trained",
        "在全部 {n} 个 grad 为 NaN/Inf 的 step 中 loss 一直平稳且有限：每次更新都被丢弃，模型什么也没学到",
    ),
    # the measurement that separates the leader from the runner-up
    "diff.sep.generic": (
        "log the gradient norm, the LR and the loss scale every step and look at step {step}",
        "每个 step 记录 grad norm、LR 和 loss scale，并查看 step {step}",
    ),
    "diff.sep.scale_vs_batch": (
        "re-run the steps before {step} in bf16 or fp32: if it trains through, it was fp16's range; if it "
        "breaks at the same step, check that step's batch with torch.isfinite",
        "用 bf16 或 fp32 重跑 step {step} 之前的几步：能顺利训练下去说明是 fp16 的范围问题；若在同一步出错，"
        "则用 torch.isfinite 检查该 step 的 batch",
    ),
    "diff.sep.forward_fp32": (
        "run one forward pass of the batch at step {step} in fp32 and print each module's largest |output|: "
        "above 65504 it is the forward pass, below it the scaler",
        "用 fp32 对 step {step} 的 batch 做一次前向，打印每个模块输出的最大绝对值：超过 65504 是前向溢出，否则是 scaler 的问题",
    ),
    "diff.sep.grad_before": (
        "log the gradient norm every step up to {step}: a build-up is an explosion, a single-step jump a batch",
        "每个 step 记录 grad norm 直到 step {step}：逐步上升是梯度爆炸，单步跳变是 batch 的问题",
    ),
    "diff.sep.lr_half": (
        "re-run from before step {step} at half the LR: if it still breaks it is not the LR",
        "从 step {step} 之前以一半的 LR 重跑：如果仍然出错，就不是 LR 的问题",
    ),
    "diff.sep.replay_batch": (
        "replay the batch of step {step} on the weights just before it: a jump again is the batch; none is the "
        "optimizer's state",
        "在 step {step} 之前的权重上重放该 step 的 batch：再次跳变是 batch 的问题；没有跳变则是优化器状态的问题",
    ),
    "diff.sep.count_batches": (
        "count the batches the training loader yields in one epoch (len(train_loader)) and the labels that are not "
        "-100 in them: no batch is an empty loader (drop_last with fewer samples than one batch), no label an empty "
        "mask",
        "统计训练 loader 每个 epoch 产出的 batch 数（len(train_loader)）以及其中不等于 -100 的标签数：没有 batch 说明 "
        "loader 是空的（样本数不足一个 batch 且 drop_last），没有标签说明标签全被 mask",
    ),
    "diff.sep.count_labels": (
        "count the label positions that are not -100 in the batches around step {step}: 0 is an empty mask",
        "统计 step {step} 附近 batch 中不等于 -100 的标签位置数：为 0 即标签全被 mask",
    ),
    "diff.sep.log_skips": (
        "log whether each optimizer step was skipped (the scaler's scale before and after)",
        "记录每个优化器 step 是否被跳过（scaler 更新前后的 scale）",
    ),
    "diff.sep.update_size": (
        "measure ||ΔW||/||W|| for one step: 0 is a model that does not update",
        "测量一个 step 的 ||ΔW||/||W||：为 0 说明模型没有更新",
    ),
    "diff.sep.outputs_constant": (
        "print the model's outputs on two different batches at step {step}: the same outputs for both are a network "
        "whose units died or saturated (restart from before it at a lower LR); outputs that differ while the loss "
        "does not move are weights that stopped updating (check requires_grad and the optimizer's parameters)",
        "在 step {step} 打印模型在两个不同 batch 上的输出：两者输出相同说明网络的单元已死亡或饱和（从此前的 checkpoint "
        "以更低的 LR 重新开始）；输出不同而 loss 不变说明权重不再更新（检查 requires_grad 与优化器的参数）",
    ),
    "diff.sep.targets_range": (
        "print the targets' smallest and largest values and the model's output shape beside the loss function: "
        "targets outside the loss's range (class indices fed to a binary cross-entropy) are the wrong loss",
        "在 loss 函数旁打印目标的最小值、最大值以及模型输出的形状：目标超出 loss 的取值范围"
        "（把类别索引喂给二元交叉熵）就是用错了 loss",
    ),
    "diff.sep.overfit_one": (
        "train on one batch repeatedly: a loss that falls to ~0 rules out the optimizer",
        "在同一个 batch 上反复训练：loss 能降到接近 0 就排除了优化器的问题",
    ),
    "diff.sep.print_schedule": (
        "print the scheduler's LR for the first and the last steps of the run",
        "打印调度器在训练开头和结尾几步的 LR",
    ),
    "diff.sep.lr_both": (
        "re-run 100 steps at 3x and at 1/3 of the LR: the one that falls faster names the side",
        "分别以 3 倍和 1/3 的 LR 重跑 100 步：下降更快的那个说明 LR 偏向哪一边",
    ),
    "diff.sep.first_forward": (
        "run one forward pass before any update and compare the loss with ln(classes)",
        "在任何更新之前做一次前向，把 loss 与 ln(类别数) 比较",
    ),
    # fixes
    "diff.sep.zero_grad": (
        "check that optimizer.zero_grad() runs once per step before backward, and log the gradient norm from the "
        "first step: gradients summed over steps make it grow at every step even while the loss still falls",
        "检查每一步在 backward 之前是否调用了一次 optimizer.zero_grad()，并从第一步起记录 grad norm："
        "梯度跨步累加时，即使 loss 仍在下降，grad norm 也会逐步增大",
    ),
    "diff.fix.zero_grad": (
        "zero the gradients once per optimizer step (optimizer.zero_grad(set_to_none=True) before backward, or after "
        "step() when accumulating)",
        "每个优化器 step 清零一次梯度（在 backward 之前调用 optimizer.zero_grad(set_to_none=True)，"
        "梯度累积时在 step() 之后调用）",
    ),
    "diff.fix.measure": ("first, measure: {how}", "先测量：{how}"),
    "diff.fix.rerun": (
        "cheapest re-run that localises it: resume from the last checkpoint at or before step {step} and run "
        "through step {onset} under lossdoctor.watch",
        "能定位问题的最便宜的重跑：从 step {step} 或之前的最后一个 checkpoint 恢复，在 lossdoctor.watch 下跑到 step {onset}",
    ),
    "diff.fix.log_more": (
        "log the gradient norm, the LR and the loss every step",
        "每个 step 记录 grad norm、LR 和 loss",
    ),
    "diff.fix.inspect_batch": (
        "check the batch of step {step} with torch.isfinite and drop the samples that fail",
        "用 torch.isfinite 检查 step {step} 的 batch，丢弃不通过的样本",
    ),
    "diff.fix.bf16_or_fp32_op": (
        "train in bf16, or keep the op that overflows (often attention or the loss) in fp32",
        "改用 bf16 训练，或把溢出的算子（常见为 attention 或 loss）保持在 fp32",
    ),
    "diff.fix.clip": (
        "clip gradients: torch.nn.utils.clip_grad_norm_(model.parameters(), max_norm=1.0)",
        "裁剪梯度：torch.nn.utils.clip_grad_norm_(model.parameters(), max_norm=1.0)",
    ),
    "diff.fix.lower_lr": (
        "lower the peak learning rate 3-10x, or lengthen the warm-up",
        "把峰值学习率降低 3-10 倍，或延长 warm-up",
    ),
    "diff.fix.skip_window": (
        "skip the data window around step {step} when resuming, or rewind past it",
        "恢复训练时跳过 step {step} 附近的数据，或回退到它之前",
    ),
    "diff.fix.count_labels": (
        "make sure every batch keeps some labels that are not -100 (truncation, masking)",
        "确保每个 batch 都保留一些不等于 -100 的标签（检查截断和 mask）",
    ),
    "diff.fix.print_schedule": (
        "print the scheduler's LR per step and fix its warm-up / decay lengths",
        "逐步打印调度器的 LR，修正 warm-up / decay 的长度",
    ),
    "diff.fix.check_requires_grad": (
        "check that the parameters the loss depends on require grad and are in the optimizer",
        "检查 loss 依赖的参数是否 requires_grad 且在优化器中",
    ),
    "diff.fix.overfit_one": (
        "train on one batch repeatedly; if the loss falls, audit the labels",
        "在同一个 batch 上反复训练；若 loss 能下降，检查标签",
    ),
    "diff.fix.loss_fits_targets": (
        "match the loss to the targets: a binary cross-entropy needs targets in [0, 1] (one sigmoid output per label); "
        "class indices 0..K-1 need a categorical cross-entropy over K outputs",
        "让 loss 与目标匹配：二元交叉熵要求目标在 [0, 1] 之内（每个标签一个 sigmoid 输出）；"
        "类别索引 0..K-1 需要在 K 个输出上使用分类交叉熵",
    ),
    "diff.fix.raise_lr": (
        "raise the learning rate to the usual range for the optimizer",
        "把学习率提高到该优化器的常用范围",
    ),
    "diff.fix.fp32_optimizer_state": (
        "keep the weights and the optimizer state in fp32 (autocast for the forward only), or raise Adam's "
        "eps to 1e-4 if they must stay fp16",
        "把权重和优化器状态保持在 fp32（只对前向用 autocast）；若必须用 fp16，把 Adam 的 eps 提高到 1e-4",
    ),
    "diff.fix.first_forward": (
        "check the init and the inputs' scale on the first batch",
        "在第一个 batch 上检查初始化和输入的尺度",
    ),
}
