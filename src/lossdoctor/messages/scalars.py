"""Sentences of the scalar-log reasoning (detectors/scalars.py, loss_shape.py, learning_rate.py)."""

TEMPLATES = {
    # a run that trained normally and broke from one step to the next
    "scalars.sudden_nan.what": (
        "training went non-finite at step {step} after {n} finite steps, with no sign before it",
        "训练在 {n} 个正常的 step 之后于 step {step} 突然出现 NaN/Inf，之前没有任何征兆",
    ),
    "scalars.sudden_nan.grad_calm": (
        "the gradient norm was {g} just before (median {med} over the steps before): no build-up, as an "
        "exploding gradient would show",
        "出问题之前 grad norm 为 {g}（此前中位数 {med}）：没有逐步上升，不像梯度爆炸",
    ),
    "scalars.sudden_nan.loss_calm": (
        "the loss was {loss} just before, in its usual range (median {med}): no divergence, as a too-high "
        "LR would show",
        "出问题之前 loss 为 {loss}，在正常范围内（中位数 {med}）：没有发散，不像 LR 过大",
    ),
    "scalars.sudden_nan.differential": (
        "what breaks one step without warning, most likely first: (1) a batch holding NaN/Inf or extreme "
        "values; (2) an op that fails on a rare input (log(0), the gradient of sqrt at 0, a fully masked "
        "attention row); (3) a transient hardware or kernel fault. Only the batch of step {step} tells them apart",
        "毫无征兆地在某一步坏掉，按可能性排序：(1) batch 里有 NaN/Inf 或极端值；(2) 某个算子遇到罕见输入出错"
        "（log(0)、sqrt 在 0 处的梯度、整行被 mask 的 attention）；(3) 偶发的硬件或 kernel 故障。只有检查 "
        "step {step} 的 batch 才能区分",
    ),
    "scalars.sudden_nan.fix_batch": (
        "check the batch of step {step}: torch.isfinite(x).all() on every tensor; filter non-finite samples "
        "in the collate function and fix the decoding that made them",
        "检查 step {step} 的 batch：对每个 tensor 做 torch.isfinite(x).all()；在 collate 函数里过滤掉非有限值"
        "的样本，并修好产生它们的解码/预处理",
    ),
    "scalars.sudden_nan.fix_watch": (
        "run under lossdoctor.watch with mon.step(loss, batch=batch): it names the sample and the first layer "
        "that went non-finite",
        "用 lossdoctor.watch 运行并调用 mon.step(loss, batch=batch)：它会指出是哪个样本、哪一层最先出现 NaN/Inf",
    ),
    # a spike in a log too short for the long rule
    "scalars.spike.jumped": (
        "the loss jumped to {loss} at step {s}, {x}x the median {base} of the 5 points before it",
        "loss 在 step {s} 跳到 {loss}，是前 5 个点中位数 {base} 的 {x} 倍",
    ),
    "scalars.spike.came_back": ("it came back", "之后回落了"),
    "scalars.spike.not_back": ("it has not come back", "之后没有回落"),
    "scalars.spike.last_point": ("it is the last point", "这是最后一个点"),
    "scalars.spike.separate": ("{k} separate spikes in {n} points", "{n} 个点里有 {k} 次独立的尖峰"),
    "scalars.spike.one_off": (
        "a one-off that recovered: a data window, not the learning rate (no reason to lower it)",
        "一次性的尖峰且已恢复：是某段数据的问题，不是 LR 的问题（没有理由调低 LR）",
    ),
    "scalars.spike.short_log": ("judged on a short log ({n} points)", "只根据一段很短的日志（{n} 个点）判断"),
    # the first updates made the loss worse and it never recovered
    "scalars.jump.worse": (
        "the first updates made the loss worse: {x0} at step {s0}, {xj} at step {s}",
        "最初几次更新让 loss 变差了：step {s0} 是 {x0}，step {s} 变成 {xj}",
    ),
    "scalars.jump.never_below": (
        "it never got below its start in {n} points (last third's median {last})",
        "之后 {n} 个点里再也没有低于起点（后三分之一的中位数 {last}）",
    ),
    "scalars.jump.lr_adam_guess": (
        "LR {lr}: far above the usual peak for Adam/AdamW (1e-5 to 1e-3)",
        "LR {lr}：远高于 Adam/AdamW 常用的峰值（1e-5 到 1e-3）",
    ),
    "scalars.jump.fix": (
        "lower the learning rate ~10x and add a warm-up (1-5% of the steps)",
        "把 LR 降低约 10 倍，并加 warmup（总步数的 1-5%）",
    ),
    "scalars.jump.fix_lr": (
        "lower the learning rate ~10x (now {lr}, e.g. {to}), and add a warm-up over the first 1-5% of the steps",
        "把 LR 降低约 10 倍（现在是 {lr}，比如改成 {to}），并在前 1-5% 的步数里加 warmup",
    ),
    "scalars.jump.fix_lr_adam_guess": (
        "lower the learning rate ~10x (now {lr}, e.g. {to}) - if this is Adam/AdamW, 1e-4 to 1e-3 is the usual "
        "peak, and add a warm-up over the first 1-5% of the steps",
        "把 LR 降低约 10 倍（现在是 {lr}，比如改成 {to}）——如果用的是 Adam/AdamW，常用峰值是 1e-4 到 1e-3；"
        "并在前 1-5% 的步数里加 warmup",
    ),
    # a gradient norm x100 within a few points (an explosion at any length), or x1000 and back
    "scalars.surge.rose": (
        "the gradient norm rose from {g0} at step {s0} to {g1} at step {s1} ({x}x in {k} steps)",
        "grad norm 从 step {s0} 的 {g0} 升到 step {s1} 的 {g1}（{k} 步内涨了 {x} 倍）",
    ),
    "scalars.surge.rose_peak": (
        "the gradient norm rose from {g0} at step {s0} to {g1} at step {s1} ({x}x in {k} steps), up to {peak} later",
        "grad norm 从 step {s0} 的 {g0} 升到 step {s1} 的 {g1}（{k} 步内涨了 {x} 倍），之后最高到 {peak}",
    ),
    "scalars.surge.loss_rose": ("the loss rose with it from {best} to {top}", "loss 也跟着从 {best} 升到 {top}"),
    "scalars.surge.short_log": (
        "judged on a short log ({n} points): a x100 jump in a few steps is an explosion at any length",
        "只根据一段很短的日志（{n} 个点）判断：几步之内涨 100 倍，不管日志多长都是梯度爆炸",
    ),
    "scalars.surge.fix_clip": (
        "clip gradients: torch.nn.utils.clip_grad_norm_(model.parameters(), max_norm={max_norm})",
        "做梯度裁剪：torch.nn.utils.clip_grad_norm_(model.parameters(), max_norm={max_norm})",
    ),
    "scalars.surge.fix_lr": (
        "lower the learning rate about 3x (now {lr}) or lengthen the warm-up",
        "把 LR 降低约 3 倍（现在是 {lr}），或者加长 warmup",
    ),
    "scalars.surge.fix_lr_qk": (
        "lower the learning rate about 3x or lengthen the warm-up; for transformers add QK-layernorm",
        "把 LR 降低约 3 倍或者加长 warmup；transformer 模型可以加 QK-layernorm",
    ),
    "scalars.surge.jumped": (
        "the gradient norm jumped from {g0} at step {s0} to {g1} at step {s1} ({x}x), then came back to {back}",
        "grad norm 从 step {s0} 的 {g0} 跳到 step {s1} 的 {g1}（{x} 倍），之后又回到 {back}",
    ),
    "scalars.surge.jumped_peak": (
        "the gradient norm jumped from {g0} at step {s0} to {g1} at step {s1} and {peak} later ({x}x), then came "
        "back to {back}",
        "grad norm 从 step {s0} 的 {g0} 跳到 step {s1} 的 {g1}，之后到 {peak}（{x} 倍），然后又回到 {back}",
    ),
    "scalars.surge.survived": (
        "the loss did not diverge: the run survived this explosion, the next one may not be",
        "loss 没有发散：这次梯度爆炸挺过来了，下一次未必",
    ),
    "scalars.surge.loss_came_back": (
        "the loss rose with it from {best} to {top} and came back to {back}: the run survived this explosion, "
        "the next one may not be",
        "loss 也跟着从 {best} 升到 {top}，之后回到 {back}：这次梯度爆炸挺过来了，下一次未必",
    ),
    "scalars.surge.fix_clip_before": (
        "clip gradients: torch.nn.utils.clip_grad_norm_(model.parameters(), max_norm={max_norm}) (the largest "
        "norm before the jump)",
        "做梯度裁剪：torch.nn.utils.clip_grad_norm_(model.parameters(), max_norm={max_norm})（跳变之前的最大 "
        "grad norm）",
    ),
    "scalars.surge.fix_find_batch": (
        "find the batch of that step (run under lossdoctor.watch, which records it) and check it for extreme "
        "values or very long sequences",
        "找到那一步的 batch（用 lossdoctor.watch 运行会记录下来），检查有没有极端值或特别长的序列",
    ),
    # gradients that add up from step to step: the weights do not move
    "scalars.accumulating.what": (
        "the gradient norm grows in step with the step count: {g0} in the first sixth of the run, {g1} in "
        "the last ({ratio}x, correlation with the step {corr:n2})",
        "grad norm 随 step 线性增长：前六分之一为 {g0}，最后六分之一为 {g1}（{ratio} 倍，与 step 的相关系数 {corr:n2}）",
    ),
    "scalars.accumulating.loss": (
        "the loss did not fall meanwhile ({first} in the first third, {last} in the last)",
        "与此同时 loss 没有下降（前三分之一 {first}，后三分之一 {last}）",
    ),
    "scalars.accumulating.why": (
        "gradients that add up from step to step while the loss stands still: zero_grad clears other "
        "parameters than the ones the loss is computed from (an optimizer built on another copy of the model, "
        "e.g. before a reload), so nothing is stepped and .grad keeps summing",
        "梯度逐步累加而 loss 不动：zero_grad 清的不是计算 loss 的那些参数（optimizer 建在模型的另一个副本上，"
        "比如在重新加载之前建的），所以参数从未被更新，.grad 一直在累加",
    ),
    "scalars.accumulating.fix_optimizer": (
        "build the optimizer from the model that is trained, after any re-creation or checkpoint load: "
        "optimizer = AdamW(model.parameters(), ...); check that optimizer.step() and zero_grad() run every step",
        "在模型重建或加载 checkpoint 之后，用实际训练的模型构建 optimizer：optimizer = AdamW(model.parameters(), ...)；"
        "确认每一步都调用了 optimizer.step() 和 zero_grad()",
    ),
    # learns slowly / converged / learns nothing
    "scalars.slow.what": (
        "the loss learns slowly: down {total:.0%} over {n} logged points ({steps} steps), and as fast at the "
        "end as at the start (last third's fall {bend:n2}x the first's): no sign of converging, just small steps",
        "loss 下降得很慢：{n} 个记录点（{steps} 步）只降了 {total:.0%}，而且后期和前期降得一样快（后三分之一的"
        "降幅是前三分之一的 {bend:n2} 倍）：不是快收敛了，只是步子太小",
    ),
    "scalars.slow.stalled": (
        "the loss fell only {total:.0%} over {n} logged points ({steps} steps) and then stopped falling "
        "(last third's fall {bend:n2}x the first's): a plateau this high above where it started, at this LR, "
        "is the LR rather than the data",
        "loss 在 {n} 个记录点（{steps} 步）里只降了 {total:.0%} 就不再下降（后三分之一的降幅是前三分之一的 "
        "{bend:n2} 倍）：在这个 LR 下停在这么高的位置，更可能是 LR 的问题而不是数据",
    ),
    "scalars.slow.tiny_lr": (
        "the LR is at most {lr}: an Adam-family step moves each weight by about that much, an SGD step by "
        "that times the gradient",
        "LR 最大只有 {lr}：Adam 类优化器每步每个权重大约只动这么多，SGD 则是它乘以梯度",
    ),
    # updates skipped because their gradient was non-finite, again and again
    "scalars.skipped.what": (
        "the gradient norm is non-finite at {k} of {n} logged steps (first at step {first}, last at step "
        "{last}) while every loss is finite",
        "{n} 个记录的 step 中有 {k} 个 grad norm 为 NaN/Inf（第一次在 step {first}，最后一次在 step {last}），"
        "而所有 loss 都是有限值",
    ),
    "scalars.skipped.why": (
        "those updates were skipped (a NaN gradient that reached the weights would make every later loss "
        "NaN): an fp16 loss scaler's overflow check, DeepSpeed's, or a guard in the loop. Now and then at the "
        "start that is the scaler finding its scale; recurring, the gradients keep overflowing and those "
        "steps are lost",
        "这些 step 的更新被跳过了（如果 NaN 梯度真的写进了参数，之后所有 loss 都会是 NaN）：fp16 loss scaler、"
        "DeepSpeed 的 overflow 检查或者训练循环里的保护逻辑。训练刚开始偶尔出现是 scaler 在找合适的 loss scale；"
        "反复出现说明梯度一直在溢出，这些 step 都白跑了",
    ),
    "scalars.skipped.most": (
        "{frac:.0%} of the steps made no update: the weights hardly change, so the loss cannot fall",
        "{frac:.0%} 的 step 没有更新参数：权重基本不变，loss 不可能下降",
    ),
    "scalars.skipped.fix_scale": (
        "log the loss scale (GradScaler.get_scale(), DeepSpeed's cur_scale) next to the loss: if it keeps "
        "falling, the gradients overflow at any scale; train in bf16 where the hardware has it",
        "把 loss scale（GradScaler.get_scale()、DeepSpeed 的 cur_scale）和 loss 一起记下来：如果它一直在降，"
        "说明梯度在任何 scale 下都会溢出；硬件支持的话改用 bf16 训练",
    ),
    "scalars.skipped.fix_find": (
        "find the op that overflows: run a few hundred steps under lossdoctor.watch, which names the first "
        "layer whose gradient went non-finite",
        "找出溢出的算子：用 lossdoctor.watch 跑几百步，它会指出梯度最先变成 NaN/Inf 的那一层",
    ),
    # flat loss: how flat, and what the LR says
    "scalars.flat.tiny_step": (
        "LR x gradient norm is {step} per step (LR {lr}, median grad norm {g}): an SGD step that small moves "
        "the weights by almost nothing; usual LRs are 1e-3 to 1e-1 for SGD, 1e-5 to 1e-3 for Adam/AdamW",
        "LR x grad norm 每步只有 {step}（LR {lr}，grad norm 中位数 {g}）：这么小的 SGD 步长几乎不会改变参数；"
        "SGD 常用 LR 为 1e-3 到 1e-1，Adam/AdamW 为 1e-5 到 1e-3",
    ),
    "scalars.flat.fix_raise_sgd": (
        "raise the learning rate: for SGD to about 1e-2 (now {lr}); an LR range test (a few hundred steps, "
        "LR from 1e-7 up) finds the largest stable one",
        "调大 LR：SGD 建议 1e-2 左右（现在是 {lr}）；做一次学习率区间测试（几百步，LR 从 1e-7 开始往上扫）"
        "可以找到最大的稳定 LR",
    ),
    "scalars.flat.ranked_lr_high": (
        "ranked first because the run's LR is far above what is usual for its optimizer; also fit: {a}; {b}",
        "排在第一位是因为 LR 远高于该 optimizer 的常用范围；同样符合的还有：{a}；{b}",
    ),
    "scalars.flat.what": (
        "the loss did not fall over {n} logged points (steps {s0}-{s1}): median {first} in the first third, "
        "{last} in the last",
        "loss 在 {n} 个记录点（step {s0}-{s1}）上没有下降：前三分之一的中位数 {first}，后三分之一 {last}",
    ),
    "scalars.flat.run_chance": ("the run's chance level", "该任务的随机水平"),
    "scalars.flat.chance": (
        "it sits at {level:n5}, the chance level {name} = {chance:n5}: the model predicts no better than "
        "uniform, it learns nothing",
        "它停在 {level:n5}，正好是随机水平 {name} = {chance:n5}：模型的预测不比均匀分布好，什么都没学到",
    ),
    "scalars.flat.chance_run": (
        "it sits at {level:n5}, the run's chance level ({chance:n5}): the model predicts no better than "
        "uniform, it learns nothing",
        "它停在 {level:n5}，正好是该任务的随机水平（{chance:n5}）：模型的预测不比均匀分布好，什么都没学到",
    ),
    "scalars.flat.constant": (
        "it is exactly constant across steps (spread {spread}) although every step sees another batch: the "
        "model's outputs do not change",
        "每一步的 batch 都不同，loss 却完全不变（波动 {spread}）：模型的输出没有变化",
    ),
    "scalars.alt.labels": (
        "labels unrelated to their inputs (shuffled, misaligned): the model can learn only the label frequencies",
        "标签和输入对不上（被打乱或错位）：模型只能学到标签的频率",
    ),
    "scalars.alt.frozen": (
        "the weights do not change: frozen parameters, a loss detached from the model, or an optimizer that "
        "never steps (or holds other parameters)",
        "权重没有变化：参数被冻结、loss 和模型断开了（detach），或者 optimizer 从没 step（或者持有的是别的参数）",
    ),
    "scalars.alt.saturated": (
        "an output layer that cannot fit the loss: a softmax over a single unit (always 1), or a sigmoid "
        "saturated at 0 or 1, so the binary cross-entropy pays its clamp on every sample of the other class and "
        "passes no gradient",
        "输出层和 loss 不匹配：单个单元上的 softmax（恒为 1），或饱和在 0 或 1 的 sigmoid，于是另一类的每个样本"
        "都付出二元交叉熵的截断值，且没有梯度传回",
    ),
    "scalars.flat.fix_binary_output": (
        "for two classes use one sigmoid output with binary cross-entropy (or two softmax outputs with "
        "categorical cross-entropy and one-hot labels); never a softmax over one unit",
        "二分类用一个 sigmoid 输出加二元交叉熵（binary_crossentropy），或两个 softmax 输出加多类交叉熵"
        "（categorical_crossentropy）和 one-hot 标签；不要在单个单元上用 softmax",
    ),
    "scalars.alt.lr_low": ("a learning rate too low for this model ({lr})", "对这个模型来说 LR 太小（{lr}）"),
    "scalars.alt.lr_value": ("LR {lr}", "LR {lr}"),
    "scalars.alt.lr_unlogged": ("the LR (not logged)", "LR 没有记录"),
    "scalars.word.unknown": ("unknown", "未知"),
    "scalars.flat.tell": (
        "One measurement tells them apart: the update/param ratio ||dW||/||W|| per step (0: nothing steps; "
        "< 1e-5: LR too low; ~1e-3 with a flat loss: the labels) - lossdoctor.watch records it",
        "有一个量可以区分它们：每步的 update/param ratio ||dW||/||W||（0：参数没有更新；< 1e-5：LR 太小；"
        "~1e-3 而 loss 不动：标签的问题）- lossdoctor.watch 会记录它",
    ),
    "scalars.flat.ranked": (
        "the differential, ranked: (1) {a}; (2) {b}; (3) {c}. {tell}",
        "鉴别诊断，按可能性排序：(1) {a}；(2) {b}；(3) {c}。{tell}",
    ),
    "scalars.flat.equal": (
        "causes that fit this equally well (the log cannot rank them): (1) {a}; (2) {b}; (3) {c}. {tell}",
        "同样符合的几个原因（仅凭这份日志无法排序）：(1) {a}；(2) {b}；(3) {c}。{tell}",
    ),
    "scalars.flat.lr_zero": (
        "the learning rate is 0 at every logged step: the scheduler never let it rise (warm-up longer than the "
        "run, a LambdaLR returning 0)",
        "每个记录的 step 上 LR 都是 0：scheduler 从没让它升起来（warmup 比整个训练还长，或 LambdaLR 返回 0）",
    ),
    "scalars.flat.fix_lr_zero": (
        "check the scheduler: warm-up steps vs total steps, and what its lambda returns at step 0",
        "检查 scheduler：warmup 步数和总步数的关系，以及 lambda 在 step 0 返回什么",
    ),
    "scalars.flat.no_update": (
        "the weights did not change at any of {k} measured steps (update/param ratio 0, or a parameter norm "
        "equal to the last bit) although the gradient norm is {g}: the optimizer steps other parameters than "
        "the model's (built before the model was re-created or reloaded), or they are frozen, or "
        "optimizer.step() is never reached",
        "在测量的 {k} 个 step 里权重一次都没变（update/param ratio 为 0，或参数范数每一位都相同），而 grad norm "
        "是 {g}：optimizer 更新的不是这个模型的参数（在模型重建或重新加载之前就建好了），或者参数被冻结了，或者"
        "根本没有执行到 optimizer.step()",
    ),
    "scalars.flat.fix_rebuild_optimizer": (
        "build the optimizer from the model that is trained, after any re-creation or checkpoint load: "
        "optimizer = Adam(model.parameters(), ...); check requires_grad and that optimizer.step() runs",
        "在模型重建或加载 checkpoint 之后，用实际训练的模型构建 optimizer：optimizer = Adam(model.parameters(), ...)；"
        "检查 requires_grad，并确认 optimizer.step() 确实执行了",
    ),
    "scalars.flat.tiny_lr": (
        "the LR is at most {lr}: an Adam-family step then moves each weight by about {lr} (usual peak LRs: 1e-5 "
        "to 1e-3 for Adam/AdamW, 1e-3 to 1e-1 for SGD), too little to change the loss in {n} steps",
        "LR 最大只有 {lr}：Adam 类优化器每步每个权重只移动约 {lr}（常用的峰值 LR：Adam/AdamW 为 1e-5 到 1e-3，"
        "SGD 为 1e-3 到 1e-1），{n} 步之内不足以让 loss 变化",
    ),
    "scalars.flat.fix_raise": (
        "raise the learning rate to about 1e-4 (now {lr}) for Adam/AdamW, or 1e-2 for SGD; an LR range test (a "
        "few hundred steps, LR from 1e-7 up) finds the largest stable one",
        "把 LR 调大：Adam/AdamW 调到 1e-4 左右（现在是 {lr}），SGD 调到 1e-2 左右；做一次学习率区间测试（几百步，"
        "LR 从 1e-7 开始往上扫）可以找到最大的稳定 LR",
    ),
    "scalars.flat.zero_grad": (
        "the gradient norm is 0 at every logged step ({k}): no gradient reaches the weights (parameters frozen "
        "with requires_grad=False, the loss computed from detached tensors, or every label masked)",
        "每个记录的 step（共 {k} 个）grad norm 都是 0：没有梯度传到权重（参数被 requires_grad=False 冻结、loss "
        "是从 detach 过的 tensor 算出来的，或者所有标签都被 mask 了）",
    ),
    "scalars.flat.fix_requires_grad": (
        "check that the parameters given to the optimizer have requires_grad=True and that the loss is computed "
        "from the model's output without .detach()/.item()/torch.no_grad()",
        "确认交给 optimizer 的参数 requires_grad=True，并且 loss 是直接从模型输出算出来的，中间没有 "
        ".detach()/.item()/torch.no_grad()",
    ),
    "scalars.fix.overfit": (
        "train on 1-2 batches only: a model that can learn must overfit them to a loss near 0; if it cannot, the "
        "weights do not change (check requires_grad, .detach(), optimizer.step())",
        "只用 1-2 个 batch 训练：能学习的模型一定能把它们过拟合到 loss 接近 0；如果做不到，说明权重没在变"
        "（检查 requires_grad、.detach()、optimizer.step()）",
    ),
    "scalars.fix.watch_update_size": (
        "run 50 steps under lossdoctor.watch to measure the update size per layer",
        "用 lossdoctor.watch 跑 50 步，测量每一层的更新幅度",
    ),
    "scalars.fix.lower_lr_warmup": (
        "lower the learning rate ~10x and add a warm-up over the first 1-5% of the steps",
        "把 LR 降低约 10 倍，并在前 1-5% 的步数里加 warmup",
    ),
    "scalars.fix.audit_labels": (
        "audit a sample of labels against their inputs",
        "抽查一部分样本，核对标签和输入是否对应",
    ),
    "scalars.flat.fix_raise_usual": (
        "raise the learning rate into the usual range for this optimizer and task (now {lr}); an LR range "
        "test (a few hundred steps, LR from 1e-7 up) finds the largest stable one",
        "把 LR 调到该 optimizer 和任务的常用范围（现在是 {lr}）；做一次学习率区间测试（几百步，LR 从 1e-7 "
        "开始往上扫）可以找到最大的稳定 LR",
    ),
    "scalars.flat.noise": (
        "the change from the first third to the last ({first} -> {last}) is within the batch-to-batch noise "
        "(standard error {se})",
        "从前三分之一到后三分之一的变化（{first} -> {last}）在 batch 间的噪声范围内（标准误 {se}）",
    ),
    # an LR schedule that collapsed long before the end
    "scalars.lr_collapse.fell": (
        "the LR fell from its peak {peak} to {lr} by step {s} ({x}x the peak), {pct}% into a {total}-step run, "
        "and ended at {end}",
        "LR 从峰值 {peak} 降到 step {s} 的 {lr}（峰值的 {x} 倍），这时才到 {total} 步训练的 {pct}%，最后是 {end}",
    ),
    "scalars.lr_collapse.since": (
        "the loss has not improved since (median {then} then, {last} at the end): the run stopped learning "
        "because the LR is gone",
        "此后 loss 再没有改善（当时中位数 {then}，最后 {last}）：LR 没了，训练也就停了",
    ),
    "scalars.lr_collapse.fix_cadence": (
        "step the scheduler at the cadence its parameters assume: StepLR/MultiStepLR step_size and milestones "
        "counted in scheduler.step() calls (per epoch, or per batch with sizes in batches)",
        "按 scheduler 参数假设的频率调用 step：StepLR/MultiStepLR 的 step_size 和 milestones 是按 "
        "scheduler.step() 的调用次数算的（按 epoch 调用，或者按 batch 调用时用 batch 数来设）",
    ),
    "scalars.lr_collapse.fix_decay": (
        "check the decay: with gamma=0.1 every 10 calls the LR loses 10x every 10 steps",
        "检查衰减：gamma=0.1、每 10 次调用衰减一次，意味着 LR 每 10 步缩小 10 倍",
    ),
    # an LR that kept rising while the loss diverged
    "scalars.runaway.rose": (
        "the LR rose {x}x, from {lr0} at step {s0} to {lr1} at step {s1}, and never came down",
        "LR 涨了 {x} 倍：从 step {s0} 的 {lr0} 一路升到 step {s1} 的 {lr1}，从没降下来",
    ),
    "scalars.runaway.best_nan": (
        "the loss was best ({best}) at step {s}, at LR {lr}, and went non-finite at step {bad}",
        "loss 在 step {s}（LR {lr}）时最低（{best}），之后在 step {bad} 变成 NaN/Inf",
    ),
    "scalars.runaway.best_rose": (
        "the loss was best ({best}) at step {s}, at LR {lr}, and rose to {top} as the LR kept climbing",
        "loss 在 step {s}（LR {lr}）时最低（{best}），之后随着 LR 继续上升涨到了 {top}",
    ),
    "scalars.runaway.fix_cap": (
        "cap the peak LR well below {lr} (where the loss turned), e.g. {to}, and check the schedule: warm-up "
        "steps shorter than the run, a decay after the peak (the LR here never decays)",
        "把峰值 LR 限制在 {lr}（loss 开始变差的位置）以下，比如 {to}；并检查调度：warmup 步数要比训练短，峰值之后"
        "要有衰减（这里的 LR 从没衰减）",
    ),
    "scalars.runaway.fix_range_test": (
        "if this was an LR range test, pick ~1/10 of the LR where the loss was lowest",
        "如果这是一次学习率区间测试（LR 区间扫描），取 loss 最低处 LR 的 1/10 左右",
    ),
    # the LR against what is usual for the optimizer and task the run's configuration names
    "lr_usual.low": (
        "the LR {lr} is far below what is usual for {what} ({lo} to {hi}; optimizer {opt})",
        "LR {lr} 远低于{what}的常用范围（{lo} 到 {hi}；optimizer 为 {opt}）",
    ),
    "lr_usual.usual": (
        "the LR {lr} is within what is usual for {what} ({lo} to {hi}; optimizer {opt}): the LR's size "
        "alone does not explain this",
        "LR {lr} 在{what}的常用范围内（{lo} 到 {hi}；optimizer 为 {opt}）：单凭 LR 的大小解释不了这个现象",
    ),
    "lr_usual.high": (
        "the LR {lr} is far above what is usual for {what} ({lo} to {hi}; optimizer {opt})",
        "LR {lr} 远高于{what}的常用范围（{lo} 到 {hi}；optimizer 为 {opt}）",
    ),
    "lr_usual.high_any": (
        "the LR {lr} is far above the usual peak of every common optimizer (at most {hi}, SGD with momentum's)",
        "LR {lr} 远高于所有常用优化器的常用峰值（最高为 SGD+momentum 的 {hi}）",
    ),
    "lr_usual.for.adam_pretrain": ("Adam/AdamW LM pre-training", " Adam/AdamW 语言模型预训练"),
    "lr_usual.for.adam_finetune": ("Adam/AdamW fine-tuning", " Adam/AdamW 微调"),
    "lr_usual.for.adam": ("Adam/AdamW", " Adam/AdamW "),
    "lr_usual.for.sgd": ("SGD with momentum", "带 momentum 的 SGD "),
    "lr_usual.for.lion": ("Lion", " Lion "),
    # what a short log let the checks do (the coverage notes)
    "scalars.coverage.what": (
        "only {n} finite loss {pts}: the {skipped} checks ran in their short-log form only",
        "只有 {n} 个有限的 loss {pts}：{skipped}这几项检查只跑了短日志版本",
    ),
    "scalars.coverage.what_missing": (
        "only {n} finite loss {pts}: the {skipped} checks ran in their short-log form only; the log has no {missing}",
        "只有 {n} 个有限的 loss {pts}：{skipped}这几项检查只跑了短日志版本；日志里没有 {missing}",
    ),
    "scalars.coverage.point": ("point", "点"),
    "scalars.coverage.points": ("points", "点"),
    "scalars.coverage.check": ("{name} (needs {need})", "{name}（需要 {need} 个点）"),
    "scalars.check.late_divergence": ("late divergence", "后期发散"),
    "scalars.check.spike": ("spike", "尖峰"),
    "scalars.check.plateau": ("plateau", "平台期"),
    "scalars.coverage.no_grad_norm": ("grad_norm (explosions)", "grad_norm（判断梯度爆炸要用）"),
    "scalars.coverage.no_lr": ("the LR (a too-low or runaway LR)", "LR（判断 LR 过小或失控要用）"),
    "scalars.coverage.either": ("{a} or {b}", "{a}，也没有 {b}"),
    "scalars.coverage.cheap_ways": (
        "log the gradient norm (grad_norm) and the LR next to the loss; run 50 steps under lossdoctor.watch (it "
        "records per-layer gradients and update sizes); or run `lossdoctor check` before training",
        "在 loss 旁边同时记录 grad norm（grad_norm）和 LR；用 lossdoctor.watch 跑 50 步（它会记录每一层的梯度和"
        "更新幅度）；或者在训练前运行 `lossdoctor check`",
    ),
    "scalars.coverage.short_alarm": (
        "short log: {what}. For a fuller check: {ways}",
        "日志很短：{what}。想检查得更完整：{ways}",
    ),
    "scalars.coverage.too_few": (
        "inconclusive: {what}; cheapest way to a verdict: {ways}",
        "无法下结论：{what}；最省事的办法：{ways}",
    ),
    "scalars.coverage.short_fell": (
        "short log: {what}; the loss fell over it and no rule that it allows fired. For a fuller check: {ways}",
        "日志很短：{what}；这段时间里 loss 在下降，能跑的规则也都没有报警。想检查得更完整：{ways}",
    ),
    "scalars.coverage.short_measured": (
        "short log: {what}; the run's own records (update sizes, per-layer statistics) were checked and no rule "
        "that it allows fired. For a fuller check: {ways}",
        "日志很短：{what}；已检查了这次训练自己的记录（更新幅度、每一层的统计），能跑的规则都没有报警。"
        "想检查得更完整：{ways}",
    ),
    "scalars.coverage.not_fell": (
        "inconclusive: {what}, and the loss did not clearly fall over them (first third {first}, last {last}); "
        "nothing in them stands out of their own noise (no jump, climb, non-finite or absurd value, chance level "
        "or constant loss), and learning slowly and not learning look alike on so few points. Cheapest way to a "
        "verdict: {ways}",
        "无法下结论：{what}，而且这几个点上 loss 没有明显下降（前三分之一 {first}，后三分之一 {last}）；其中没有"
        "任何一点超出它们自身的噪声（没有跳变、爬升、非有限或离谱的值、随机猜测水平或恒定不变的 loss），而点这么少，"
        "学得慢和根本没在学看起来是一样的。最省事的办法：{ways}",
    ),
}
