"""Evidence and fixes of the detectors (detectors/*.py), and the hints the engine gives when a
detector cannot run. Chinese as a Chinese ML engineer writes it: the English terms people use
(loss, batch, grad norm, loss scale, warmup, mask, padding...) stay English."""

HINTS = {
    "hint.batch": ("pass batch= to mon.step to check the data", "给 mon.step 传入 batch= 才能检查数据"),
    "hint.grad_norm": ("log the gradient norm (grad_norm) to check it", "记录梯度范数（grad_norm）才能检查这一项"),
    "hint.layers": (
        "needs per-layer gradient norms, which lossdoctor.watch records",
        "需要逐层的梯度范数（lossdoctor.watch 会记录）",
    ),
    "hint.loss_scale": (
        "log the loss scale (GradScaler.get_scale()) to check fp16 loss scaling",
        "记录 loss scale（GradScaler.get_scale()）才能检查 fp16 的 loss scaling",
    ),
    "hint.accumulation": (
        "log accum_steps (watch does) or loss_weight (the framework callbacks do)",
        "记录 accum_steps（watch 会记录）或 loss_weight（框架回调会记录）",
    ),
}

NONFINITE = {
    "nonfinite.batch_absurd": (
        "the batch of step {step} has max |x| = {absmax}, {ratio}x the median {median} of the earlier batches",
        "第 {step} 步的 batch 最大 |x| = {absmax}，是之前各 batch 中位数 {median} 的 {ratio} 倍",
    ),
    "nonfinite.broke_at_that_step": ("training went non-finite at that step", "训练正是在这一步出现了 NaN/Inf"),
    "nonfinite.fix_inspect_batch": (
        "inspect that batch; clip or standardise features (e.g. (x - mean) / std per feature) and reject "
        "outliers in the data pipeline",
        "检查这个 batch；对特征做裁剪或标准化（例如逐特征 (x - mean) / std），并在数据管道里剔除离群值",
    ),
    "nonfinite.the_batch": ("the batch", "整个 batch"),
    "nonfinite.batch_holds": (
        "the batch of step {step} holds NaN/Inf in {keys}, sample(s) {samples}",
        "第 {step} 步的 batch 在 {keys} 中含有 NaN/Inf，样本 {samples}",
    ),
    "nonfinite.packed_examples": (
        "the rows are packed: the non-finite values are in {examples}",
        "这些行是 packed 的：NaN/Inf 在 {examples} 里",
    ),
    # one example inside a packed row, as the detectors, preflight, live alerts and reports name it
    "labels.example_in_row": (
        "row {row} example {example} (tokens {start}-{end})",
        "行 {row} 的第 {example} 个样本（token {start}-{end}）",
    ),
    "nonfinite.batches_in_incident": (
        "{n} batches in this incident held non-finite values (steps {steps})",
        "这次事件中有 {n} 个 batch 含有 NaN/Inf（第 {steps} 步）",
    ),
    "nonfinite.broke_when_used": (
        "training went non-finite at step {step}, right when that batch was used",
        "训练在第 {step} 步出现 NaN/Inf，恰好是用到这个 batch 的时候",
    ),
    "nonfinite.loss_stayed_finite": (
        "the loss stayed finite: the value was masked or unused, but it is still bad data",
        "loss 仍是有限值：这个值被 mask 掉了或没有用到，但它仍然是坏数据",
    ),
    "nonfinite.fix_drop_samples": (
        "drop or repair those samples: filter with torch.isfinite(x).flatten(1).all(1) in the collate function, "
        "and fix the decoding/normalisation that produced them ({keys})",
        "丢弃或修复这些样本：在 collate 函数里用 torch.isfinite(x).flatten(1).all(1) 过滤，并修正产生它们的"
        "解码/归一化步骤（{keys}）",
    ),
    "nonfinite.forward_became": (
        "at step {step} the forward output of {layer} became {value} (event {index} of {of} in forward order; "
        "every earlier module output was finite)",
        "第 {step} 步 {layer} 的前向输出变成了 {value}（按前向顺序是第 {index} 个事件，共 {of} 个；"
        "在它之前的模块输出都是有限值）",
    ),
    "nonfinite.batch_beyond_fp16": (
        "the batch holds values up to {absmax}, beyond fp16's 65504: autocast turns them into inf when it casts "
        "the input to fp16",
        "batch 中的数值最大到 {absmax}，超过了 fp16 的上限 65504：autocast 把输入转成 fp16 时它们变成了 inf",
    ),
    "nonfinite.largest_activation": (
        "largest activation before that used {pct}% of its dtype's range",
        "在此之前最大的激活值用到了其数据类型范围的 {pct}%",
    ),
    "nonfinite.scaler_after_overflow": (
        "the GradScaler skipped {skipped} of {n} steps from then on and its scale fell from {start} to {end}: "
        "no loss scale helps when the forward pass itself overflows",
        "此后 {n} 步中 GradScaler 跳过了 {skipped} 步，loss scale 从 {start} 降到 {end}：前向本身就溢出时，"
        "怎么调 loss scale 都没用",
    ),
    "nonfinite.fix_layer_out_of_fp16": (
        "keep {layer} out of fp16: wrap it in torch.autocast(device_type, enabled=False) and feed it .float() "
        "inputs, or train with bf16 autocast (fp16 overflows at 65504)",
        "让 {layer} 不走 fp16：用 torch.autocast(device_type, enabled=False) 包住它并传入 .float() 的输入，"
        "或者改用 bf16 autocast 训练（fp16 超过 65504 就溢出）",
    ),
    "nonfinite.fix_normalise_activations": (
        "scale activations down: add/verify normalisation (LayerNorm) before this layer",
        "把激活值降下来：在这一层之前加上（或检查）归一化层（LayerNorm）",
    ),
    "nonfinite.fix_find_nan_op": (
        "find the op in {layer} that makes NaN from finite inputs (0/0, log(0), sqrt(<0), inf-inf); run "
        "lossdoctor.localize(model, batch, loss_fn) on the batch of this step or pass replay_fn= to watch for "
        "the op-level answer",
        "找出 {layer} 中由有限输入算出 NaN 的算子（0/0、log(0)、sqrt(<0)、inf-inf）：对这一步的 batch 运行 "
        "lossdoctor.localize(model, batch, loss_fn)，或者给 watch 传入 replay_fn=，就能定位到具体算子",
    ),
    "nonfinite.activation_near_max": (
        "at step {step} an activation reached {absmax}, {pct}% of its dtype's largest value (fp16: 65504)",
        "第 {step} 步有激活值达到 {absmax}，是其数据类型最大值的 {pct}%（fp16：65504）",
    ),
    "nonfinite.fix_layer_fp32": (
        "keep that layer in fp32 under autocast, or use bf16; check normalisation before it",
        "在 autocast 下让这一层保持 fp32，或者改用 bf16；并检查它前面的归一化",
    ),
    "nonfinite.attention_became": (
        "at step {step} the forward output of attention module {layer} became {value} while every module "
        "before it was finite",
        "第 {step} 步 attention 模块 {layer} 的前向输出变成了 {value}，而它之前的模块输出都是有限值",
    ),
    "nonfinite.empty_attention_mask": (
        "sample(s) {samples} of that batch have an all-zero attention_mask: a fully masked row makes "
        "softmax(-inf, ..., -inf) = NaN",
        "这个 batch 中样本 {samples} 的 attention_mask 全为 0：整行都被 mask 时 softmax(-inf, ..., -inf) = NaN",
    ),
    "nonfinite.fix_drop_empty_sequences": (
        "drop empty sequences from the data, and mask with torch.finfo(dtype).min instead of -inf (or zero the "
        "fully-masked rows after softmax)",
        "从数据中去掉空序列，并用 torch.finfo(dtype).min 代替 -inf 做 mask（或者在 softmax 之后把整行被 mask "
        "的输出置零）",
    ),
    "nonfinite.attention_logits_overflow": (
        "attention logits (QK^T) overflowed the dtype's range",
        "attention logits（QK^T）超出了数据类型的范围",
    ),
    "nonfinite.fix_attention_fp32": (
        "compute attention scores in fp32 or scale them by 1/sqrt(head_dim); QK-layernorm or a z-loss of 1e-4 "
        "keeps logits bounded (Wortsman et al. 2023, PaLM)",
        "用 fp32 计算 attention 分数，或乘以 1/sqrt(head_dim) 缩放；QK-layernorm 或 1e-4 的 z-loss 能把 "
        "logits 控制住（Wortsman et al. 2023，PaLM）",
    ),
    "nonfinite.fix_fully_masked_rows": (
        "look for rows of the attention mask that mask every key (all padding), and use a finite mask value "
        "(torch.finfo(dtype).min) instead of -inf",
        "找出 attention mask 中把所有 key 都 mask 掉的行（全是 padding），并用有限的 mask 值"
        "（torch.finfo(dtype).min）代替 -inf",
    ),
    "nonfinite.fix_replay": (
        "pass replay_fn= to watch (or call lossdoctor.localize) to get the exact op and sample",
        "给 watch 传入 replay_fn=（或调用 lossdoctor.localize），可以定位到具体的算子和样本",
    ),
}

PRECISION = {
    "common.loss_not_improving": ("the loss is not improving", "loss 没有改善"),
    "precision.scale_fell": ("loss scale fell from {start} to {end}", "loss scale 从 {start} 降到了 {end}"),
    "precision.skipped_steps": (
        "{skipped} of {n} optimizer steps were skipped; longest streak {longest} steps (steps {first}-{last})",
        "{n} 个优化器 step 中有 {skipped} 个被跳过；最长连续跳过 {longest} 步（第 {first}-{last} 步）",
    ),
    "precision.forward_overflows": (
        "the forward pass itself overflows (first non-finite output: {layer}, {value}), so no loss scale can help",
        "前向本身就溢出了（第一个非有限输出：{layer}，{value}），所以怎么调 loss scale 都没用",
    ),
    "precision.fix_layer_out_of_fp16": (
        "keep {layer} out of fp16 (torch.autocast(..., enabled=False) around it, inputs .float()), or switch "
        "autocast to bf16",
        "让 {layer} 不走 fp16（用 torch.autocast(..., enabled=False) 包住它，输入转成 .float()），或者把 "
        "autocast 换成 bf16",
    ),
    "precision.backward_goes_bad_inside": (
        "in backward the gradient is still finite at the output of {after} and non-finite at the output of "
        "{layer}: it goes bad inside {after}'s backward, even at small scales (an op whose derivative is "
        "infinite there, e.g. sqrt or a norm at 0, or a product beyond fp16's range)",
        "反向传播时，梯度在 {after} 的输出处还是有限值，到 {layer} 的输出处就成了非有限值：问题出在 {after} "
        "的反向计算里，loss scale 很小时也一样（某个算子在该处导数为无穷大，例如 0 处的 sqrt 或范数，或者乘积"
        "超出了 fp16 的范围）",
    ),
    "precision.fix_guard_backward_op": (
        "guard the op in {after} whose derivative blows up (torch.sqrt(x + 1e-12) instead of torch.sqrt(x), "
        "clamp(min=eps) before a norm or a division); lossdoctor.localize(model, batch, loss_fn) names the "
        "backward op",
        "给 {after} 中导数会爆掉的算子加保护（用 torch.sqrt(x + 1e-12) 代替 torch.sqrt(x)，求范数或做除法前先 "
        "clamp(min=eps)）；lossdoctor.localize(model, batch, loss_fn) 能指出是哪个反向算子",
    ),
    "precision.backward_overflows_at": (
        "gradients overflow in backward first at {layer} even at small scales",
        "即使 loss scale 很小，反向传播中梯度也最先在 {layer} 溢出",
    ),
    "precision.fix_gradients_overflow_fp16": (
        "the gradients themselves overflow fp16: lower the learning rate or clip gradients after "
        "scaler.unscale_(optimizer), or train with bf16 autocast",
        "梯度本身就超出了 fp16 的范围：降低学习率，或者在 scaler.unscale_(optimizer) 之后做梯度裁剪，或者改用 "
        "bf16 autocast 训练",
    ),
    "precision.fix_gradients_overflow_fp16_clipped": (
        "the gradients themselves overflow fp16, before the clipping this run already does (max_grad_norm={clip:g}) "
        "can act: lower the learning rate, or train with bf16 autocast",
        "梯度本身就超出了 fp16 的范围，这次训练已有的梯度裁剪（max_grad_norm={clip:g}）来不及起作用：降低学习率，"
        "或者改用 bf16 autocast 训练",
    ),
    "precision.inputs_unnormalised": (
        "the inputs reach max |x| = {absmax} (median over batches): unnormalised features overflow fp16 in the "
        "first layer",
        "输入的最大 |x| 达到 {absmax}（各 batch 的中位数）：没有归一化的特征在第一层就让 fp16 溢出了",
    ),
    "precision.fix_normalise_inputs": (
        "normalise the input features (e.g. (x - mean) / std) before the model",
        "在送入模型之前对输入特征做归一化（例如 (x - mean) / std）",
    ),
    "precision.streak_ended_backing_off": (
        "the streak ended: the loss scaler spent those steps backing off from its initial scale",
        "连续跳过已经结束：这些步是 loss scaler 在从过大的初始 scale 往下退",
    ),
    "precision.fix_initial_scale_power": (
        "start DeepSpeed's loss scaler at a sane scale: \"initial_scale_power\": {power} in the config's fp16 "
        "section (2^{power} = {init_scale:g}; it started at {started})",
        'DeepSpeed 的 loss scaler 用合理的初始 scale：在配置的 fp16 部分设 "initial_scale_power": {power}'
        "（2^{power} = {init_scale:g}；当前从 {started} 开始）",
    ),
    "precision.fix_init_scale": (
        "start GradScaler at a sane scale: GradScaler(init_scale={init_scale:g}) (configured: {configured})",
        "给 GradScaler 一个合理的初始 scale：GradScaler(init_scale={init_scale:g})（当前配置为 {configured}）",
    ),
    "precision.streak_ended_lost_updates": (
        "the streak ended, but every skipped step is a lost update",
        "连续跳过已经结束，但每个被跳过的 step 都是一次丢掉的更新",
    ),
    "precision.frozen_entries": (
        "{pct}% of the low-precision weight entries with a non-zero gradient did not change in an optimizer "
        "step (median over {n} sampled steps)",
        "梯度非零的低精度权重中，有 {pct}% 在一次优化器 step 之后没有任何变化（{n} 个采样步的中位数）",
    ),
    "precision.param_dtypes": ("parameter dtypes: {dtypes}", "参数的 dtype：{dtypes}"),
    "precision.below_bf16_resolution": (
        "at lr {lr} the per-step relative update is below bf16's resolution (~2^-8 = 0.4%), so it rounds away",
        "lr 为 {lr} 时，每步的相对更新量低于 bf16 的精度（约 2^-8 = 0.4%），被舍入掉了",
    ),
    "precision.fix_fp32_master_weights": (
        "keep fp32 master weights: train fp32 parameters under torch.autocast(dtype=torch.bfloat16) instead of "
        "model.to(torch.bfloat16)",
        "保留 fp32 的 master weights：在 torch.autocast(dtype=torch.bfloat16) 下训练 fp32 参数，而不是 "
        "model.to(torch.bfloat16)",
    ),
    "precision.fix_stochastic_rounding": (
        "or use an optimizer with stochastic rounding / Kahan summation for bf16 weights",
        "或者对 bf16 权重使用带 stochastic rounding / Kahan summation 的优化器",
    ),
    "precision.eps_dominated": (
        "{pct}% of Adam's second-moment entries have sqrt(v_hat) < 10*eps (eps={eps}): the update is "
        "eps-dominated and tiny",
        "Adam 二阶矩中有 {pct}% 的元素 sqrt(v_hat) < 10*eps（eps={eps}）：更新量被 eps 主导，非常小",
    ),
    "precision.fix_eps": (
        "gradients are tiny relative to eps: lower eps (e.g. {eps:g} in fp32 state), check the loss is not scaled "
        "down, and never keep Adam state in fp16 (eps=1e-8 rounds to 0)",
        "梯度相对 eps 太小：调低 eps（例如 fp32 状态下用 {eps:g}），检查 loss 有没有被缩小，并且不要把 Adam 的状态"
        "放在 fp16 里（eps=1e-8 会被舍入成 0）",
    ),
    "precision.bf16_loss_grid": (
        "{on} of {n} losses lie exactly on the bf16 grid 2^(floor(log2 L)-7): the loss is computed in bf16 "
        "(8 bits of mantissa), so small improvements are invisible and its gradient is coarse",
        "{n} 个 loss 中有 {on} 个恰好落在 bf16 的网格 2^(floor(log2 L)-7) 上：loss 是用 bf16（8 位尾数）算的，"
        "小的改进看不出来，梯度也很粗糙",
    ),
    "precision.fix_loss_in_fp32": (
        "compute logits and loss in fp32: loss = F.cross_entropy(logits.float(), labels)",
        "用 fp32 计算 logits 和 loss：loss = F.cross_entropy(logits.float(), labels)",
    ),
}

GRADIENTS = {
    "grad.fix_clip_tighter": (
        "gradients are already clipped (max_grad_norm={clip:g}), far above this run's healthy norms: lower the "
        "threshold to {max_norm:g} (p95 of the gradient norm over steps {first}-{last})",
        "梯度已经在做裁剪（max_grad_norm={clip:g}），但阈值远高于这次训练正常时的 grad norm：把阈值降到 "
        "{max_norm:g}（第 {first}-{last} 步 grad norm 的 p95）",
    ),
    "grad.fix_already_clipped": (
        "gradients are already clipped (max_grad_norm={clip:g}): the norm here is measured before clipping, and "
        "clipping only caps each step; lower the learning rate and find the layer or batch the norm grows from",
        "梯度已经在做裁剪（max_grad_norm={clip:g}）：这里的 grad norm 是裁剪前测的，裁剪只限制每一步的大小；"
        "应该调低 LR，并找出 grad norm 是从哪一层或哪个 batch 开始变大的",
    ),
    "grad.fix_clip": (
        "clip gradients: torch.nn.utils.clip_grad_norm_(model.parameters(), max_norm={max_norm:g}) (p95 of the "
        "gradient norm over steps {first}-{last})",
        "做梯度裁剪：torch.nn.utils.clip_grad_norm_(model.parameters(), max_norm={max_norm:g})（取第 {first}-{last} "
        "步 grad norm 的 p95）",
    ),
    "grad.rose_then_nonfinite": (
        "grad norm rose from {start} (early median) to {peak} over steps {first}-{last}, then became non-finite "
        "at step {step}",
        "grad norm 在第 {first}-{last} 步从 {start}（早期中位数）升到 {peak}，随后在第 {step} 步变成非有限值",
    ),
    "grad.first_nonfinite_params": ("first non-finite gradients: {params}", "最先出现非有限梯度的参数：{params}"),
    "grad.fix_lower_lr": (
        "lower the learning rate (now {lr}), e.g. to {to}",
        "降低学习率（当前为 {lr}），例如降到 {to}",
    ),
    "grad.median_rose": (
        "grad norm median rose from {start} early to {end} from step {step} on ({ratio}x) while the loss did not "
        "improve",
        "从第 {step} 步起 grad norm 的中位数从早期的 {start} 升到 {end}（{ratio} 倍），而 loss 没有改善",
    ),
    "grad.vanishing": (
        "gradient norm of the first layers ({first}...) is {grad}, {ratio}x that of the last layers ({last}) "
        "(median over {n} sampled steps; AUTOTRAINER threshold 1e-3)",
        "前几层（{first}...）的梯度范数为 {grad}，是最后几层（{last}）的 {ratio} 倍（{n} 个采样步的中位数；"
        "AUTOTRAINER 的阈值为 1e-3）",
    ),
    "grad.fix_vanishing_architecture": (
        "use ReLU/GELU instead of sigmoid/tanh in deep stacks, add residual connections or (pre-)LayerNorm, and "
        "He/Kaiming (or 1/sqrt(fan_in)) initialisation",
        "深层网络里用 ReLU/GELU 代替 sigmoid/tanh，加上残差连接或 (pre-)LayerNorm，并使用 He/Kaiming"
        "（或 1/sqrt(fan_in)）初始化",
    ),
    "grad.fix_shallower": ("or make the network shallower", "或者把网络改浅一些"),
    "grad.went_nonfinite": ("training went non-finite at step {step}", "训练在第 {step} 步出现了 NaN/Inf"),
    "grad.before_any_update": (
        "before any update: the batch, the loss function (a mean over zero supervised tokens is NaN) or the "
        "initial weights",
        "还没有任何更新就出现了：问题在 batch、loss 函数（对零个有监督 token 求平均得到 NaN）或初始权重",
    ),
    "grad.rose_just_before": (
        "the gradient norm rose to {grad} ({ratio}x its median) just before",
        "在此之前 grad norm 升到了 {grad}（中位数的 {ratio} 倍）",
    ),
    "grad.loss_rose_just_before": (
        "the loss rose to {loss} ({ratio}x its median {median}) just before: divergence",
        "在此之前 loss 升到了 {loss}（中位数 {median} 的 {ratio} 倍）：发散",
    ),
    "grad.seen_curve_and_grad": ("the curve and the gradient norm were", "曲线和 grad norm 都"),
    "grad.seen_curve": ("the curve was", "曲线都"),
    "grad.healthy_then_forward_broke": (
        "{seen} healthy until then, and the loss of that very step is non-finite: its forward pass broke on this "
        "batch (bad values in the batch most often; else an overflowing op or a fully masked attention row)",
        "在此之前{seen}正常，而恰恰是这一步的 loss 成了非有限值：前向在这个 batch 上出了问题（最常见的是 batch "
        "里有坏值；也可能是某个算子溢出，或 attention 有整行被 mask）",
    ),
    "grad.sudden_blow_up": (
        "the curve was healthy until then: a sudden blow-up (a bad batch, an overflow or an exploding gradient)",
        "在此之前曲线都正常：是一次突然的崩溃（坏 batch、溢出或梯度爆炸）",
    ),
    "grad.log_too_coarse": (
        "the log has one point every {n} steps, too coarse to see how it began",
        "日志每 {n} 步才有一个点，太稀疏，看不出问题是怎么开始的",
    ),
    "grad.fix_log_every_step": (
        "log the gradient norm every step and pass batch= to lossdoctor.watch's mon.step to tell a bad batch "
        "from an explosion; lossdoctor.watch also names the first layer that went bad",
        "每一步都记录 grad norm，并给 lossdoctor.watch 的 mon.step 传入 batch=，才能区分是坏 batch 还是梯度爆炸；"
        "lossdoctor.watch 还会指出最先出问题的层",
    ),
    "lr.fix_warmup_already_clipped": (
        "add or lengthen the LR warm-up; gradients are already clipped (max_grad_norm={max_norm:g}), and clipping "
        "does not shrink Adam's step (Adam divides by the gradient's own scale): the LR and its warm-up are what "
        "bound the update",
        "加上或加长 LR warmup；梯度已经做了裁剪（max_grad_norm={max_norm:g}），而裁剪并不会缩小 Adam 的步长"
        "（Adam 会除以梯度自身的尺度）：能限制每步更新大小的是 LR 和它的 warmup",
    ),
}

INIT = {
    "init.loss_above_chance": (
        "initial loss {loss} vs {chance} for a uniform guess (ln of the number of classes/tokens): the output "
        "logits are {ratio}x too confident at init",
        "初始 loss 为 {loss}，而均匀猜测的 loss 只有 {chance}（类别数/词表大小的 ln）：初始化时输出 logits "
        "过于自信，loss 是随机水平的 {ratio} 倍",
    ),
    "init.fix_small_std": (
        "initialise weights with a small std (GPT-2: 0.02, or 1/sqrt(fan_in)), scale residual output "
        "projections by 1/sqrt(2*n_layer), and zero-init or down-scale the output layer",
        "用较小的 std 初始化权重（GPT-2 用 0.02，或 1/sqrt(fan_in)），把残差分支的输出投影按 1/sqrt(2*n_layer) "
        "缩放，并对输出层做零初始化或缩小初始化",
    ),
    "init.initializer_range": ("config initializer_range = {value}", "配置中 initializer_range = {value}"),
    "init.activation_at_step0": (
        "at step 0 an activation of {layer} reaches {act} from inputs of max |x| {input}: weights are "
        "initialised too large",
        "第 0 步 {layer} 的激活值达到 {act}，而输入的最大 |x| 只有 {input}：权重初始化得太大了",
    ),
    "init.fix_fan_in": (
        "use std = 1/sqrt(fan_in) (Kaiming/Xavier) or the model's default init",
        "用 std = 1/sqrt(fan_in)（Kaiming/Xavier）或模型默认的初始化",
    ),
    "init.residual_growth": (
        "at step {step} the activation RMS grows {ratio}x from {first} to {last} through the residual stack",
        "第 {step} 步激活值的 RMS 沿残差堆叠从 {first} 到 {last} 增长了 {ratio} 倍",
    ),
    "init.fix_residual_scaling": (
        "scale each block's output projection init by 1/sqrt(2*n_layer) (GPT-2), or use pre-LN",
        "把每个 block 输出投影的初始化按 1/sqrt(2*n_layer) 缩放（GPT-2 的做法），或者改用 pre-LN",
    ),
}

LABELS = {
    "labels.batches_all_masked": (
        "{n_full} of {logged} batches have every label position masked (-100), first at step {step}",
        "{logged} 个 batch 中有 {n_full} 个的所有标签位置都被 mask 了（-100），最早在第 {step} 步",
    ),
    "labels.loss_over_zero_tokens": (
        "the loss at step {step} is {loss} (a mean over zero supervised tokens)",
        "第 {step} 步的 loss 为 {loss}（对零个有监督 token 求平均）",
    ),
    "labels.grad_exactly_zero": ("the gradient norm is exactly 0", "grad norm 恰好为 0"),
    "labels.fix_collator_masking": (
        "check the collator's label masking: only prompt and padding tokens should be -100; the response tokens "
        "(and EOS) must keep their ids",
        "检查 collator 的标签 mask：只有 prompt 和 padding 的 token 应该是 -100，response 的 token（以及 EOS）"
        "必须保留原来的 id",
    ),
    "labels.fix_truncation": (
        "with truncation, make sure the response is not cut off entirely (raise max_length or truncate the "
        "prompt from the left)",
        "有截断时，确保 response 没有被整个截掉（调大 max_length，或者从左侧截断 prompt）",
    ),
    "labels.samples_unsupervised": (
        "{pct}% of samples have no supervised label position (all -100)",
        "{pct}% 的样本没有任何有监督的标签位置（全是 -100）",
    ),
    "labels.examples_unsupervised": (
        "{n} of {total} examples inside packed rows have no supervised label position (all -100, {pct:.1f}%), first "
        "at step {step}; their rows still hold other examples' labels, so the per-row numbers look healthy",
        "packed 行里的 {total} 个样本中有 {n} 个没有任何有监督的标签位置（全是 -100，{pct:.1f}%），最早出现在第 {step} "
        "步；它们所在的行里还有别的样本的标签，所以按行看一切正常",
    ),
    "labels.example_span": (
        "step {step}: packed row {row}, example {example} of the row (tokens {start}-{end} of the row)",
        "第 {step} 步：packed 行 {row} 中的第 {example} 个样本（该行的 token {start}-{end}）",
    ),
    "labels.fix_packed_unsupervised": (
        "truncation cut these examples' responses before packing (a prompt as long as max_length): drop examples "
        "whose prompt fills max_length before training, or raise max_length; TRL drops them itself only without "
        "packing, and packing_strategy='bfd_split' keeps the cut-off tokens. Packing does not keep the dataset "
        "index: find them in the dataset as the examples whose tokenized prompt is max_length tokens or longer",
        "这些样本的 response 在 packing 之前就被截断切掉了（prompt 和 max_length 一样长）：训练前丢弃 prompt 占满 "
        "max_length 的样本，或者调大 max_length；TRL 只在不用 packing 时才会自己丢掉它们，"
        "packing_strategy='bfd_split' 则会保留被截掉的 token。packing 不保留数据集里的下标：在数据集里找 tokenize 后 "
        "prompt 长度达到 max_length 的样本即可",
    ),
    "labels.fix_drop_unsupervised_samples": (
        "drop samples whose response was truncated away or masked entirely",
        "丢弃 response 被整个截掉或全部被 mask 的样本",
    ),
    "labels.nan_loss_zero_grad": (
        "the loss is {loss} at step {step} with a gradient norm of exactly 0{more}: a mean over zero supervised "
        "tokens (every label -100), which no other NaN produces (a NaN in the forward pass makes NaN gradients, "
        "not zero ones)",
        "第 {step} 步 loss 为 {loss}，而 grad norm 恰好为 0{more}：这是对零个有监督 token 求平均（所有标签都是 "
        "-100），别的 NaN 不会这样（前向里的 NaN 会让梯度也变成 NaN，而不是 0）",
    ),
    "labels.n_of_logged_like_that": (
        " ({n} of {logged} logged steps look like that)",
        "（已记录的 {logged} 步中有 {n} 步都是这样）",
    ),
    "labels.fix_masking_and_truncation": (
        "check the collator's label masking and truncation: a batch whose responses were all cut off or masked "
        "has no supervised token; skip such batches or normalise by max(1, n_tokens)",
        "检查 collator 的标签 mask 和截断：response 全被截掉或 mask 掉的 batch 没有任何有监督 token；跳过这种 "
        "batch，或者按 max(1, n_tokens) 归一化",
    ),
    "labels.fix_log_label_stats": (
        "log label statistics (lossdoctor.watch does: pass batch= to mon.step) to see which samples have no "
        "supervised token",
        "记录标签统计（lossdoctor.watch 会记录：给 mon.step 传入 batch=），看看哪些样本没有有监督 token",
    ),
    "labels.zero_loss_nonfinite_grad": (
        "the loss is exactly 0.0 at step {step} while the gradient norm is {grad}{more}; the other steps' loss "
        "is about {median}: a batch with no supervised token (every label -100) gives a loss of 0 over zero "
        "tokens and a 0/0 in its gradient; a bad batch makes a NaN or huge loss, not an exact 0",
        "第 {step} 步 loss 恰好为 0.0，而 grad norm 为 {grad}{more}；其他步的 loss 约为 {median}：没有任何有监督 "
        "token（所有标签都是 -100）的 batch 在零个 token 上得到 0 的 loss，梯度里出现 0/0；坏 batch 只会让 loss "
        "变成 NaN 或极大，而不会恰好为 0",
    ),
    "labels.n_steps_like_that": (" ({n} steps look like that)", "（共有 {n} 步是这样）"),
    "labels.fix_skip_unsupervised_batches": (
        "skip batches with no supervised token (count labels != -100 before the forward pass), or normalise the "
        "loss by max(1, n_tokens)",
        "跳过没有有监督 token 的 batch（在前向之前统计 labels != -100 的个数），或者按 max(1, n_tokens) 归一化 loss",
    ),
    "labels.fix_masking_truncation_short": (
        "check the collator's masking and truncation: responses cut off entirely leave only -100",
        "检查 collator 的 mask 和截断：response 被整个截掉时就只剩下 -100",
    ),
    "labels.zero_from_start": (
        "the loss is exactly 0 at {zeros} of the first {n} logged steps{grad}",
        "前 {n} 个记录的步中有 {zeros} 步 loss 恰好为 0{grad}",
    ),
    "labels.zero_drop": (
        "the loss fell from {before} at step {s0} to exactly 0 at step {step}, and is 0 at all {n} logged steps "
        "from there: no model learns that in one step. Either those batches supervise no token (the mean over none is "
        "logged as 0), or those steps went NaN and the trainer logged them as 0 (the HF Trainer's "
        "logging_nan_inf_filter)",
        "loss 从 step {s0} 的 {before} 在 step {step} 一下子变成恰好 0，从那以后记录的 {n} 步全是 0：模型不可能一步学到这样。"
        "要么这些 batch 里没有一个有监督的 token（对零个 token 求平均被记成 0），要么这些步其实是 NaN，被训练框架记成了 0"
        "（HF Trainer 的 logging_nan_inf_filter）",
    ),
    "labels.fix_zero_drop_log_grad": (
        "log the gradient norm next to the loss (HF Trainer: grad_norm): NaN there means the steps went NaN, 0 means "
        "no token was supervised; or run the step under lossdoctor.watch, which records both",
        "在 loss 旁边记录 grad norm（HF Trainer 会记录 grad_norm）：是 NaN 说明这些步其实是 NaN，是 0 说明没有 token "
        "被监督；或者用 lossdoctor.watch 跑这几步，两者都会记录",
    ),
    "labels.and_grad_zero": (" and the gradient norm is 0", "，grad norm 也为 0"),
    "labels.fix_some_labels_not_ignored": (
        "check that some label positions are not -100 (the loss over zero tokens is 0/NaN)",
        "检查是否有标签位置不是 -100（在零个 token 上算出的 loss 是 0 或 NaN）",
    ),
    "labels.pad_supervised": (
        "{pct}% of the padding positions (attention_mask 0) carry a label, in {n} of {of} padded batches: the "
        "model is trained to predict padding, and the loss averages over those easy tokens",
        "在 {of} 个带填充的 batch 中有 {n} 个：{pct}% 的填充位置（attention_mask 为 0）带有标签：模型在学习预测填充，"
        "loss 也把这些容易的 token 平均了进去",
    ),
    "labels.fix_mask_padding": (
        "set the labels of padding to -100 (labels[attention_mask == 0] = -100), or collate with "
        "DataCollatorForLanguageModeling / DataCollatorForSeq2Seq, which do",
        "把填充位置的标签设为 -100（labels[attention_mask == 0] = -100），或用会这样做的 "
        "DataCollatorForLanguageModeling / DataCollatorForSeq2Seq 来组 batch",
    ),
    "labels.leak": (
        "task='sft' but only {pct}% of label positions are masked (median over batches): prompt tokens are supervised",
        "task='sft'，但只有 {pct}% 的标签位置被 mask（各 batch 的中位数）：prompt 的 token 也参与了监督",
    ),
    "labels.fix_mask_prompt": (
        "set labels of the prompt (and padding) tokens to -100 (TRL's SFTConfig: assistant_only_loss=True for "
        "conversational data, completion_only_loss=True for prompt-completion data)",
        "把 prompt（以及 padding）token 的标签设为 -100（TRL 的 SFTConfig：对话格式的数据设 assistant_only_loss=True，"
        "prompt-completion 格式的数据设 completion_only_loss=True）",
    ),
}

ACCUMULATION = {
    "accum.weight": (
        "the loss each step differentiates is {weight}x the mean loss of its items (median over {n} steps; "
        "{frac:.0%} of them off by more than 1.5x)",
        "每步实际求导的 loss 是其各样本平均 loss 的 {weight} 倍（{n} 步的中位数；其中 {frac:.0%} 的步偏差超过 1.5 倍）",
    ),
    "accum.summed": (
        "{k} micro-batches per step: their losses are summed, not averaged",
        "每步 {k} 个 micro-batch：它们的 loss 被加在了一起，而不是取平均",
    ),
    "accum.divided_twice": (
        "{k} micro-batches per step: the loss is divided by {k} twice",
        "每步 {k} 个 micro-batch：loss 被除了两次 {k}",
    ),
    "accum.starts_at_k_chance": (
        "the run starts at loss {start} = {ratio}x the chance level {chance}, with {k} micro-batches per step: "
        "the logged loss is the sum of {k} micro-batch means",
        "训练开始时 loss 为 {start}，是随机水平 {chance} 的 {ratio} 倍，而每步有 {k} 个 micro-batch：记录的 "
        "loss 是 {k} 个 micro-batch 平均值之和",
    ),
    "accum.fix_divide": (
        "divide each micro-batch's loss by the number of micro-batches ({k}) before backward, or sum the "
        "per-token losses and divide by the step's token count",
        "在 backward 之前把每个 micro-batch 的 loss 除以 micro-batch 的个数（{k}），或者把逐 token 的 loss "
        "加总后除以这一步的 token 总数",
    ),
    "accum.fix_hf_trainer": (
        "HF Trainer with a custom compute_loss: divide the summed loss by num_items_in_batch, or set "
        "model_accepts_loss_kwargs = False on the trainer so it divides by gradient_accumulation_steps itself",
        "HF Trainer 配合自定义 compute_loss 时：把加总的 loss 除以 num_items_in_batch，或者在 trainer 上设置 "
        "model_accepts_loss_kwargs = False，让它自己除以 gradient_accumulation_steps",
    ),
    "accum.fix_divide_once": (
        "the loss is divided by the number of micro-batches ({k}) twice: keep one division (HF Trainer: a loss "
        "already divided by num_items_in_batch must not be divided again)",
        "loss 被 micro-batch 个数（{k}）除了两次：只保留一次除法（HF Trainer：已经除以 num_items_in_batch 的 "
        "loss 不能再除一次）",
    ),
}

RANKS_ENGINE = {
    "ranks.own_gradient_finite": (
        "this rank's own gradient was finite before the all-reduce at step {step}: the non-finite values came "
        "from another rank (diagnose the whole run directory to see where it began)",
        "第 {step} 步 all-reduce 之前这个 rank 自己的梯度是有限的：非有限值来自别的 rank（诊断整个运行目录才能"
        "看到问题从哪里开始）",
    ),
    "ranks.note_from_another_rank": (
        "step {step}: non-finite gradients arrived through the all-reduce from another rank",
        "第 {step} 步：非有限梯度是通过 all-reduce 从别的 rank 传过来的",
    ),
    "incident.live_monitor": ("live monitor: {evidence}", "实时监控：{evidence}"),
    "engine.not_checked": ("{name}: not checked ({hint})", "{name}：未检查（{hint}）"),
    "engine.internal_error": ("{name}: internal error ({error})", "{name}：内部错误（{error}）"),
    "engine.misuse_no_optimizer_step": (
        "mon.step was called without an optimizer step since the previous call at {idle} of {n} steps (first at "
        "step {step}): call mon.step once per optimizer step, after optimizer.step() (with gradient "
        "accumulation: after the last micro-batch); if the loop skips steps on purpose, those steps made no "
        "update",
        "{n} 步中有 {idle} 步调用 mon.step 时，距上一次调用并没有发生优化器 step（最早在第 {step} 步）：每个优化器 "
        "step 调用一次 mon.step，放在 optimizer.step() 之后（梯度累积时放在最后一个 micro-batch 之后）；如果训练"
        "循环是有意跳过这些步，那么这些步没有做任何更新",
    ),
    "engine.skipped_update": (
        "the gradient norm is non-finite at step {step} only, and every loss before and after it is finite: that "
        "update was skipped (a NaN gradient in the weights would make every later loss NaN). In fp16 that is the "
        "loss scaler's overflow check doing its job, common in the first steps; log the loss scale to see it",
        "只有第 {step} 步的 grad norm 是非有限值，前后的 loss 都是有限的：这次更新被跳过了（NaN 梯度如果进了权重，"
        "之后的 loss 都会是 NaN）。在 fp16 下这是 loss scaler 的溢出检查在正常工作，最初几步很常见；记录 loss "
        "scale 就能看到",
    ),
}

TEMPLATES = {**HINTS, **NONFINITE, **PRECISION, **GRADIENTS, **INIT, **LABELS, **ACCUMULATION, **RANKS_ENGINE}
