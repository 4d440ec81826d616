"""Incident triage: the verdict on a non-finite step (triage/classify.py).

Sample ids are shown as a bracketed list ("[3, 7]"), as in the records."""

TEMPLATES = {
    # pieces
    "triage.ids": ("[{ids}]", "[{ids}]"),
    "triage.loss_code": ("the loss code (outside the model)", "loss 计算代码（模型之外）"),
    "triage.some_rows": ("some rows", "部分行"),
    "triage.samples": ("sample(s) {ids}", "样本 {ids}"),
    "triage.mask_all_zero": (
        "; attention_mask is all zeros for sample(s) {ids}",
        "；样本 {ids} 的 attention_mask 全为 0",
    ),
    "triage.earlier": ("earlier: {what}", "更早：{what}"),
    # which samples
    "triage.samples.everyone": (
        "{n} of the {size} samples break the step each on their own: it is not a matter of particular samples",
        "batch 的 {size} 个样本中有 {n} 个单独就会让这一步出错：不是个别样本的问题",
    ),
    "triage.samples.together": (
        "sample(s) {ids} make the step non-finite only together ({probes} probes)",
        "样本 {ids} 只有放在一起时才会让这一步出现 NaN/Inf（共 {probes} 次探测）",
    ),
    "triage.samples.isolated": (
        "bisecting the batch ({probes} forward+backward probes) isolates sample(s) {ids}: each breaks the step "
        "on its own, the rest of the batch does not",
        "对 batch 做二分（{probes} 次 forward+backward 探测）定位到样本 {ids}：它们各自单独就会让这一步出错，"
        "batch 中其余样本不会",
    ),
    # bad data
    "triage.data.nonfinite": (
        "the batch holds NaN/Inf in {keys}: sample(s) {samples}",
        "batch 的 {keys} 中含有 NaN/Inf：样本 {samples}",
    ),
    "triage.data.fix": (
        "drop or repair those samples: filter with torch.isfinite(x).flatten(1).all(1) in the collate function, "
        "and fix the decoding/normalisation that produced {keys}",
        "丢弃或修复这些样本：在 collate 函数里用 torch.isfinite(x).flatten(1).all(1) 过滤，"
        "并修正产生 {keys} 的解码/归一化代码",
    ),
    "triage.untraced": (
        "the loss or a gradient is non-finite, but no traced op made it so (a custom autograd function or a "
        "kernel the dispatcher does not see?)",
        "loss 或某个梯度出现了 NaN/Inf，但追踪到的 op 都没有产生它（可能是自定义 autograd 函数，"
        "或 dispatcher 看不到的 kernel？）",
    ),
    # backward
    "triage.backward.first": (
        "the forward pass stayed finite; the first non-finite value appeared in backward{beyond}",
        "forward 全程有限；第一个 NaN/Inf 出现在 backward 中{beyond}",
    ),
    "triage.backward.beyond": (": a gradient beyond {dtype}'s range", "：梯度超出了 {dtype} 的表示范围"),
    "triage.backward.of": ("it is the backward of {op}{where}", "它是 {op}{where} 的 backward"),
    "triage.backward.in": (" in {module}", "（位于 {module}）"),
    "triage.backward.fix_scaler": (
        "train fp16 with a GradScaler (torch.amp.GradScaler scales the loss so gradients fit fp16, and skips the "
        "steps that still overflow), or use bf16 autocast",
        "用 GradScaler 训练 fp16（torch.amp.GradScaler 会缩放 loss 让梯度落在 fp16 范围内，并跳过仍然溢出的 step），"
        "或改用 bf16 autocast",
    ),
    "triage.backward.fix_domain": (
        "the derivative of {op} is infinite at its input (sqrt or norm at 0, log at 0): add an epsilon inside it",
        "{op} 在其输入处的导数为无穷大（sqrt 或 norm 在 0 处、log 在 0 处）：在里面加一个 epsilon",
    ),
    "triage.backward.fix_clip_scaled": (
        "clip gradients after scaler.unscale_(optimizer) (torch.nn.utils.clip_grad_norm_(params, 1.0))",
        "在 scaler.unscale_(optimizer) 之后做梯度裁剪（torch.nn.utils.clip_grad_norm_(params, 1.0)）",
    ),
    "triage.backward.fix_clip": (
        "clip gradients (torch.nn.utils.clip_grad_norm_(params, 1.0)); with fp16, use a GradScaler",
        "做梯度裁剪（torch.nn.utils.clip_grad_norm_(params, 1.0)）；用 fp16 时配合 GradScaler",
    ),
    # forward op families
    "triage.param.bad": (
        "a parameter was already non-finite before this step: an earlier update overflowed (exploding gradients "
        "or a too-high learning rate)",
        "这一步之前已有参数变成 NaN/Inf：更早的某次更新溢出了（梯度爆炸或 LR 过高）",
    ),
    "triage.param.fix": (
        "clip gradients (torch.nn.utils.clip_grad_norm_(params, 1.0)) and lower the learning rate; restart from "
        "the last checkpoint before the weights went bad",
        "做梯度裁剪（torch.nn.utils.clip_grad_norm_(params, 1.0)）并调低 LR；从权重出问题之前的最后一个 checkpoint "
        "重新开始",
    ),
    "triage.attn.masked_rows": (
        "{who}: every key of a softmax row is masked with -inf (a sequence that is all padding), and "
        "softmax(-inf, ..., -inf) = 0/0 = NaN{mask}",
        "{who}：softmax 某一行的所有 key 都被 -inf mask 掉了（整条序列都是 padding），"
        "softmax(-inf, ..., -inf) = 0/0 = NaN{mask}",
    ),
    "triage.attn.masked_rows_fix": (
        "drop empty (all-padding) sequences from the data, and mask with torch.finfo(scores.dtype).min instead "
        "of -inf (or use F.scaled_dot_product_attention, which returns 0 for fully masked rows)",
        "从数据中去掉空的（全是 padding 的）序列，并用 torch.finfo(scores.dtype).min 代替 -inf 做 mask"
        "（或使用 F.scaled_dot_product_attention，它对整行被 mask 的情况返回 0）",
    ),
    "triage.attn.drop_empty_fix": (
        "drop empty (all-padding) sequences from the data: sample(s) {ids} of this batch",
        "从数据中去掉空的（全是 padding 的）序列：这个 batch 的样本 {ids}",
    ),
    "triage.attn.mask_min_fix": (
        "mask with torch.finfo(scores.dtype).min instead of -inf (or use F.scaled_dot_product_attention, which "
        "returns 0 for fully masked rows): a sequence that is all padding then gives a finite softmax",
        "用 torch.finfo(scores.dtype).min 代替 -inf 做 mask（或使用 F.scaled_dot_product_attention，它对整行被 mask "
        "的情况返回 0）：这样全是 padding 的序列也能得到有限的 softmax",
    ),
    "triage.attn.exp": (
        "exp of attention logits up to {value} overflows {dtype} (exp(x) > {top} for x > {log_top}): the softmax "
        "is computed without subtracting the row maximum",
        "attention logits 最大到 {value}，exp 后溢出 {dtype}（x > {log_top} 时 exp(x) > {top}）："
        "softmax 计算时没有减去每行的最大值",
    ),
    "triage.attn.stable_fix": (
        "use torch.softmax(scores, dim=-1) (it subtracts the row max), or exp(scores - scores.amax(-1, "
        "keepdim=True)) in the hand-written softmax",
        "使用 torch.softmax(scores, dim=-1)（它会减去每行最大值），或在手写的 softmax 里用 "
        "exp(scores - scores.amax(-1, keepdim=True))",
    ),
    "triage.attn.other": (
        "{op} in attention module {module} made NaN/Inf{why}",
        "attention 模块 {module} 中的 {op} 产生了 NaN/Inf{why}",
    ),
    "triage.attn.zero_div": (
        " from a zero input: a hand-written softmax whose exp underflowed to 0 for a whole row (logits far below "
        "0) divides 0 by 0",
        "，输入为 0：手写 softmax 中一整行的 exp 都下溢成 0（logits 远小于 0），结果是 0 除以 0",
    ),
    "triage.attn.logits": (
        "attention logits reached {value} and overflowed {dtype}",
        "attention logits 达到 {value}，溢出了 {dtype}",
    ),
    "triage.attn.logits_fix": (
        "scale QK^T by 1/sqrt(head_dim) and compute attention scores in fp32; QK-layernorm or a z-loss of 1e-4 "
        "keeps logits bounded (Wortsman et al. 2023)",
        "把 QK^T 乘以 1/sqrt(head_dim)，并在 fp32 中计算 attention 分数；QK-layernorm 或 1e-4 的 z-loss "
        "可以让 logits 保持有界（Wortsman et al. 2023）",
    ),
    "triage.labels.empty": (
        "every label of the batch is the ignore index: the mean over zero tokens is 0/0",
        "batch 中所有 label 都是 ignore_index：对 0 个 token 求平均就是 0/0",
    ),
    "triage.labels.fix": (
        "skip batches without supervised tokens, or normalise by max(1, n_tokens)",
        "跳过没有监督 token 的 batch，或用 max(1, n_tokens) 做归一化",
    ),
    "triage.exp.overflow": (
        "exp of values up to {value} overflows {dtype}",
        "最大到 {value} 的值做 exp 后溢出 {dtype}",
    ),
    "triage.exp.fix": (
        "use the stable form: logsumexp / log_softmax / softplus instead of log(sum(exp(x))), or subtract the "
        "maximum before exp",
        "使用数值稳定的写法：用 logsumexp / log_softmax / softplus 代替 log(sum(exp(x)))，或在 exp 之前先减去最大值",
    ),
    "triage.overflow": (
        "{op} in {where} produced values beyond {dtype}'s range (max {top}) from inputs up to {value}",
        "{where} 中的 {op} 输出超出了 {dtype} 的范围（最大 {top}），输入最大为 {value}",
    ),
    "triage.overflow.fix_dtype": (
        "keep {where} out of {dtype}: run it under torch.autocast(device_type, enabled=False) on .float() "
        "inputs, or use bf16",
        "不要让 {where} 在 {dtype} 下计算：在 torch.autocast(device_type, enabled=False) 下对 .float() 输入运行它，"
        "或改用 bf16",
    ),
    "triage.overflow.fix_module_fp32": (
        "keep {module} out of {dtype}: run it under torch.autocast(device_type, enabled=False) on .float() "
        "inputs, or use bf16",
        "不要让 {module} 在 {dtype} 下计算：在 torch.autocast(device_type, enabled=False) 下对 .float() 输入运行它，"
        "或改用 bf16",
    ),
    "triage.backward.fix_module_fp32": (
        "keep {module} out of {dtype} so its backward stays in fp32: run it under "
        "torch.autocast(device_type, enabled=False) on .float() inputs",
        "不要让 {module} 在 {dtype} 下计算，让它的 backward 保持 fp32：在 torch.autocast(device_type, enabled=False) "
        "下对 .float() 输入运行它",
    ),
    "triage.state.fix_clip": (
        "clip gradients (torch.nn.utils.clip_grad_norm_(params, max_norm={max_norm:g})): the weights were already "
        "going bad before this step, and clipping bounds each update",
        "做梯度裁剪（torch.nn.utils.clip_grad_norm_(params, max_norm={max_norm:g})）：这一步之前权重已经在变坏，"
        "裁剪能限制每次更新的幅度",
    ),
    "triage.state.fix_lower_lr": (
        "lower the learning rate (now {lr}), e.g. to {to}: the updates grew the weights until this step overflowed",
        "降低学习率（当前为 {lr}），例如降到 {to}：之前的更新让权重不断变大，直到这一步溢出",
    ),
    "triage.state.eps_underflows": (
        "the optimizer's eps={eps} is below the smallest normal {dtype} number, the dtype its second moment is "
        "kept in: where that moment underflows to 0, sqrt(v) + eps is 0 and the update divides by zero",
        "optimizer 的 eps={eps} 小于 {dtype}（二阶矩所用的 dtype）能表示的最小正规数：二阶矩下溢成 0 的地方，"
        "sqrt(v) + eps 等于 0，更新就是除以 0",
    ),
    "triage.state.fix_eps": (
        "raise the optimizer's eps to {eps:g} (now {now}) so it survives in {dtype}, or keep the optimizer state "
        "in fp32 (fp32 master weights with autocast)",
        "把 optimizer 的 eps 调大到 {eps:g}（现在是 {now}），让它在 {dtype} 中不被舍入成 0；或者把优化器状态保持在 fp32"
        "（fp32 master weights 加 autocast）",
    ),
    "triage.overflow.fix_scale": (
        "normalise the input of {where} (LayerNorm) or scale its weights down; check the initialisation",
        "对 {where} 的输入做归一化（LayerNorm）或缩小它的权重；检查初始化",
    ),
    "triage.domain": (
        "{op} got inputs outside its domain (log of 0 or a negative, 0/0, sqrt of a negative): it made NaN/Inf "
        "from finite values",
        "{op} 的输入超出了定义域（对 0 或负数取 log、0/0、对负数开 sqrt）：由有限值产生了 NaN/Inf",
    ),
    "triage.domain.fix": (
        "guard {op} in {where}: add an epsilon or clamp(min=eps) to its input, or use the fused stable op "
        "(F.cross_entropy, F.binary_cross_entropy_with_logits, log_softmax)",
        "保护 {where} 中的 {op}：给它的输入加 epsilon 或 clamp(min=eps)，或使用融合的稳定 op"
        "（F.cross_entropy、F.binary_cross_entropy_with_logits、log_softmax）",
    ),
    # the incident's findings (triage/explain.py)
    "triage.bvs.batch_alone": (
        "batch vs state: the batch of step {step} also breaks the earlier healthy state of step {healthy}: the "
        "batch is the trigger (no other recent batch was kept to test the state on)",
        "batch 还是状态：第 {step} 步的 batch 在更早的健康状态（第 {healthy} 步）上同样出错：触发因素是这个 batch"
        "（没有保留其他近期 batch 来测试该状态）",
    ),
    "triage.bvs.batch": (
        "batch vs state: the batch of step {step} also breaks the earlier healthy state of step {healthy}, while "
        "the state before step {step} handles the other recent batches {others}: the batch is the trigger",
        "batch 还是状态：第 {step} 步的 batch 在更早的健康状态（第 {healthy} 步）上同样出错，而第 {step} 步之前的"
        "状态在其他近期 batch {others} 上都正常：触发因素是这个 batch",
    ),
    "triage.bvs.state": (
        "batch vs state: the state before step {step} breaks on other batches too {others}{fine}: the model "
        "state went bad, not the data (look at the LR, clipping, loss scale)",
        "batch 还是状态：第 {step} 步之前的状态在其他 batch {others} 上也会出错{fine}：坏的是模型状态，不是数据"
        "（检查 LR、梯度裁剪、loss scale）",
    ),
    "triage.bvs.state_fine": (
        ", while this batch is fine on the state of step {healthy}",
        "，而这个 batch 在第 {healthy} 步的状态上没有问题",
    ),
    "triage.bvs.both": (
        "batch vs state: the batch breaks even the healthy state of step {healthy}, and the state before step "
        "{step} breaks on other batches {others} as well",
        "batch 还是状态：这个 batch 连第 {healthy} 步的健康状态都会弄坏，而第 {step} 步之前的状态在其他 batch "
        "{others} 上也会出错",
    ),
    "triage.bvs.combination": (
        "batch vs state: neither this batch on the healthy state of step {healthy} nor this state on the other "
        "batches {others} fails: only this batch on this state does (skip the batch and go on)",
        "batch 还是状态：这个 batch 放在第 {healthy} 步的健康状态上不会出错，这个状态在其他 batch {others} 上也不会："
        "只有这个 batch 遇上这个状态才出错（跳过这个 batch 继续训练即可）",
    ),
    "triage.replay.exactly": ("exactly", "完全一致"),
    "triage.replay.relative": ("to a relative {dev:.1e}", "相对误差 {dev:.1e}"),
    "triage.replay.right_before": (
        "replaying step {step} from the snapshot taken right before it{tail}",
        "从紧挨着它之前的 snapshot 重放第 {step} 步{tail}",
    ),
    "triage.replay.from": (
        "replaying steps {start}-{step} from the snapshot of step {start} with the recorded batches and RNG ({n} "
        "earlier losses matched the log {close}){tail}",
        "用记录的 batch 和 RNG 从第 {start} 步的 snapshot 重放第 {start}-{step} 步（之前 {n} 个 loss 与日志"
        "{close}）{tail}",
    ),
    "triage.replay.approx": (
        "running the batch of step {step} on an approximate state (step {at}){tail}",
        "在近似状态（第 {at} 步）上运行第 {step} 步的 batch{tail}",
    ),
    "triage.replay.reproduces": (
        " reproduces the failure: it is deterministic (data or numerics), not a hardware fault",
        "，复现了这次故障：它是确定性的（数据或数值问题），不是硬件故障",
    ),
    "triage.replay.no_op": (
        "the op tracer found no op that made the value non-finite",
        "op 追踪器 没有找到产生 NaN/Inf 的 op",
    ),
    "triage.what.loss": ("loss", "loss"),
    "triage.what.gradients": ("gradients", "梯度"),
    "triage.nondet.how_from": (
        "steps {start}-{step} from the snapshot of step {start} with the same batches and RNG ({n} earlier losses "
        "matched the log {close})",
        "用相同的 batch 和 RNG 从第 {start} 步的 snapshot 重放第 {start}-{step} 步（之前 {n} 个 loss 与日志{close}）",
    ),
    "triage.nondet.how_right_before": (
        "step {step} from the snapshot taken right before it with the same batch and RNG",
        "用相同的 batch 和 RNG 从紧挨着它之前的 snapshot 重放第 {step} 步",
    ),
    "triage.nondet.finite": (
        " gives a finite loss ({loss:.6g}) and finite gradients",
        "，得到的 loss（{loss:.6g}）和梯度都是有限的",
    ),
    "triage.nondet.no_fail": (" does not fail", "，没有出错"),
    "triage.nondet.replayed": (
        "at step {step} the logged {what} went non-finite (loss {loss}), but replaying {how}{got}",
        "第 {step} 步日志中的 {what} 变成了 NaN/Inf（loss {loss}），但{how}{got}",
    ),
    "triage.nondet.not_data": (
        "the same computation on the same inputs did not fail again: the fault is not in the data or the "
        "numerics, but in the hardware (a bit flip, a failing GPU), a race, or a non-deterministic kernel",
        "相同输入上的相同计算没有再次出错：问题不在数据或数值，而在硬件（比特翻转、故障 GPU）、竞态条件或非确定性 kernel",
    ),
    "triage.nondet.layer": (
        "in training the first non-finite forward output was in {layer}",
        "训练中第一个出现 NaN/Inf 的 forward 输出在 {layer}",
    ),
    "triage.nondet.fix_resume": (
        "resume from the last checkpoint: the same data will very likely train through",
        "从最后一个 checkpoint 恢复训练：同样的数据很可能可以正常训练过去",
    ),
    "triage.nondet.fix_recurs": (
        "if it recurs: run with torch.use_deterministic_algorithms(True) to rule out non-deterministic kernels, "
        "and check the GPU's health (ECC errors in nvidia-smi -q -d ECC, dcgmi diag)",
        "如果再次出现：用 torch.use_deterministic_algorithms(True) 运行以排除非确定性 kernel，并检查 GPU 健康状况"
        "（nvidia-smi -q -d ECC 中的 ECC 错误、`dcgmi diag`）",
    ),
    "triage.spike.jumped": (
        "the loss jumped to {loss} at step {step}, {ratio}x the recent median {median} ({z} robust sigmas)",
        "第 {step} 步 loss 跳到 {loss}，是近期中位数 {median} 的 {ratio} 倍（{z} 个 稳健 sigma）",
    ),
    "triage.spike.jumped_live": (
        "the loss jumped to {loss} at step {step}, {ratio}x the recent median {median}",
        "第 {step} 步 loss 跳到 {loss}，是近期中位数 {median} 的 {ratio} 倍",
    ),
    "triage.spike.example_loss": (
        "packed row {row} example {example} (tokens {start}-{end}): {loss}",
        "packed 行 {row} 第 {example} 个样本（token {start}-{end}）：{loss}",
    ),
    "triage.spike.per_example": (
        "per-example losses (each example of the packed rows alone): {top} vs a median of {median}",
        "逐样本 loss（packed 行里的每个样本单独计算）：{top}，中位数为 {median}",
    ),
    "triage.spike.sample_loss": ("sample {i}: {loss}", "样本 {i}：{loss}"),
    "triage.spike.per_sample": (
        "per-sample losses: {top} vs a median of {median}",
        "逐样本 loss：{top}，中位数为 {median}",
    ),
    "triage.spike.fix_inspect": (
        "inspect samples {ids} of the batch of step {step} (mislabelled, corrupt or out-of-distribution?) and "
        "filter them",
        "检查第 {step} 步 batch 中的样本 {ids}（标注错误、数据损坏还是分布外？）并把它们过滤掉",
    ),
    "triage.spike.fix_state": (
        "lower the peak LR or clip gradients (clip_grad_norm_ 1.0); for transformers add QK-layernorm or a z-loss "
        "of 1e-4",
        "调低峰值 LR 或做梯度裁剪（clip_grad_norm_ 1.0）；transformer 可加 QK-layernorm 或 1e-4 的 z-loss",
    ),
    "triage.spike.fix_skip": (
        "skip that batch (on_incident='skip' rolls back and skips it), as PaLM did for its spikes",
        "跳过这个 batch（on_incident='skip' 会回滚并跳过它），PaLM 就是这样处理 loss 尖峰的",
    ),
    "triage.spike.fix_live": (
        "inspect the batch of this step; lower the LR or clip gradients if spikes recur",
        "检查这一步的 batch；如果尖峰反复出现，调低 LR 或做梯度裁剪",
    ),
    "triage.live.hint": (
        "pass replay_fn=lambda model, batch: <the step's loss> to lossdoctor.watch to replay this step from the "
        "last snapshot, check that it reproduces, and name the operation and the sample(s)",
        "给 lossdoctor.watch 传入 `replay_fn=lambda model, batch: <这一步的 loss>`，即可从最近的 snapshot 重放这一步、"
        "确认能否复现，并指出具体的 op 和样本",
    ),
    "triage.live.would": (
        "replay would confirm the failure reproduces and name the operation and the sample(s)",
        "重放可以确认故障能否复现，并指出具体的 op 和样本",
    ),
    "triage.live.why_would": (
        "{why}; replay would confirm the failure reproduces and name the operation and the sample(s)",
        "{why}；重放可以确认故障能否复现，并指出具体的 op 和样本",
    ),
    "triage.live.data": (
        "the batch holds NaN/Inf in {keys}: sample(s) {ids}",
        "batch 的 {keys} 中含有 NaN/Inf：样本 {ids}",
    ),
    "triage.live.forward": (
        "the first non-finite forward output ({value}) came from {layer}{padding}",
        "第一个出现 NaN/Inf 的 forward 输出（{value}）来自 {layer}{padding}",
    ),
    "triage.live.padding": ("; sample(s) {ids} are all padding", "；样本 {ids} 全是 padding"),
    "triage.live.labels": ("every label of the batch is the ignore_index", "batch 中所有 label 都是 ignore_index"),
    "triage.live.backward": (
        "forward stayed finite; the first non-finite gradient in backward order was at {layer}",
        "forward 全程有限；按 backward 顺序第一个出现 NaN/Inf 的梯度在 {layer}",
    ),
    "triage.live.loss_code": (
        "every module output was finite but the loss is not: the loss computation made it non-finite",
        "所有模块的输出都是有限的，但 loss 不是：是 loss 的计算产生了 NaN/Inf",
    ),
    "triage.live.grads": ("gradients went non-finite ({params})", "梯度变成了 NaN/Inf（{params}）"),
    "triage.live.fix": (
        "run lossdoctor.localize(model, batch, loss_fn) on this step's batch for the op and the sample(s), or pass "
        "replay_fn= to lossdoctor.watch to have it done automatically",
        "对这一步的 batch 运行 lossdoctor.localize(model, batch, loss_fn) 找出具体的 op 和样本，"
        "或给 lossdoctor.watch 传入 replay_fn= 让它自动完成",
    ),
    # the incident flow's notes (triage/flow.py)
    "triage.note.no_replay_fn": ("replay not run: no replay_fn was given", "未重放：没有提供 replay_fn"),
    "triage.note.snapshots_off": ("replay not run: snapshots are off", "未重放：snapshot 已关闭"),
    "triage.note.scratch_oom": (
        "the scratch copy of the model did not fit: pass triage_inplace=True",
        "放不下模型的临时副本：请传入 triage_inplace=True",
    ),
    "triage.note.no_snapshot": (
        "replay not run: no snapshot at or before step {step} (snapshots every {every} steps)",
        "未重放：第 {step} 步及之前没有 snapshot（每 {every} 步一个 snapshot）",
    ),
    "triage.note.diverged": (
        "the replay diverged from the logged run at step {step}, and the failing step did not fail again: "
        "inconclusive (replay_fn does not redo the training step exactly: gradient accumulation, clipping by "
        "value, a custom update?)",
        "重放在第 {step} 步与日志中的训练出现偏差，且出错的那一步没有再次出错：无法下结论（replay_fn 没有精确重现"
        "训练步骤：梯度累积、按值裁剪、自定义更新？）",
    ),
    "triage.note.batch_of": ("the batch of step {step} {why}", "第 {step} 步的 batch {why}"),
    "triage.note.approximated": (
        "{why}, so the state before step {step} is approximated by the state of step {at}",
        "{why}，因此用第 {at} 步的状态近似第 {step} 步之前的状态",
    ),
    "triage.note.not_replayable": (
        "the batch of step {step} {why}: the step cannot be replayed",
        "第 {step} 步的 batch {why}：这一步无法重放",
    ),
    "triage.note.no_op_answer": (
        "the batch of step {step} {why}: no op-level answer",
        "第 {step} 步的 batch {why}：无法给出 op 级别的结论",
    ),
    "triage.note.scale_overflows": (
        "without the loss scale, step {step}'s forward and backward are finite: the scale itself overflows the "
        "fp16 gradients",
        "去掉 loss scale 后，第 {step} 步的 forward 和 backward 都是有限的：是 loss scale 本身让 fp16 梯度溢出",
    ),
    "triage.note.no_rollback": (
        "rollback not possible: the replay did not reach the failing step exactly",
        "无法回滚：重放没有精确到达出错的那一步",
    ),
    "triage.note.rolled_back": (
        "rolled the model and optimizer back to the state before step {step} (its batch is skipped){dropped}",
        "已把模型和 optimizer 回滚到第 {step} 步之前的状态（跳过了该步的 batch）{dropped}",
    ),
    "triage.note.dropped_after": ("; the {n} step(s) after it were dropped too", "；其后的 {n} 步也一并丢弃"),
    "triage.missing.not_in_ring": ("is not in the ring", "不在 ring 中"),
    "triage.missing.over_budget": (
        "was not kept (triage budget; fingerprint {fingerprint})",
        "没有保留（超出 triage 内存预算；fingerprint {fingerprint}）",
    ),
    "triage.missing.not_passed": ("was not passed to mon.step (pass batch=)", "没有传给 mon.step（请传入 batch=）"),
    "triage.scale.finite_unscaled": (
        "the GradScaler skipped {n} steps in a row from step {first}; traced without the loss scale, step {step}'s "
        "forward and backward are finite: the scale ({scale} now) overflows the fp16 gradients",
        "GradScaler 从第 {first} 步起连续跳过了 {n} 步；去掉 loss scale 追踪第 {step} 步，forward 和 backward "
        "都是有限的：是 loss scale（现在为 {scale}）让 fp16 梯度溢出",
    ),
    "triage.scale.fix_init_scale": (
        "start the GradScaler at init_scale={init_scale:g} with growth_interval={growth_interval} (the scale is "
        "{scale} now): each step it starts too high is an overflow and a lost update",
        "把 GradScaler 的初始 scale 设为 init_scale={init_scale:g}，growth_interval={growth_interval}（现在 scale "
        "为 {scale}）：初始 scale 过高时每一步都会溢出，更新被丢掉",
    ),
    "triage.scale.traced": (
        "the GradScaler skipped {n} steps in a row from step {first}; step {step} traced op by op without the "
        "loss scale: its gradients are non-finite at any scale",
        "GradScaler 从第 {first} 步起连续跳过了 {n} 步；去掉 loss scale 逐 op 追踪第 {step} 步：无论 scale 多大，"
        "它的梯度都是 NaN/Inf",
    ),
    # one traced op, in a sentence (triage/optrace.py); the kind keys are triage.op.<OpEvent.kind>
    "triage.op.describe": (
        "{phase} op {op}{where} {what}: inputs [{ins}] -> outputs [{outs}]{scalars}",
        "{phase} op {op}{where}{what}：输入 [{ins}] -> 输出 [{outs}]{scalars}",
    ),
    "triage.op.in": (" in {module}{node}", "（位于 {module}{node}）"),
    "triage.op.outside": (" outside the model (loss code){node}", "（在模型之外：loss 代码{node}）"),
    "triage.op.node": (" (backward node {node})", "，backward 节点 {node}"),
    "triage.op.scalars": ("; scalar args {args}", "；标量参数 {args}"),
    "triage.op.nan": ("made NaN from inputs without NaN", "在输入没有 NaN 的情况下产生了 NaN"),
    "triage.op.overflow": (
        "overflowed: non-finite values where its inputs were finite",
        "溢出：输入有限，输出出现 NaN/Inf",
    ),
    "triage.op.domain": (
        "produced NaN/Inf from finite inputs (outside its domain)",
        "由有限输入产生了 NaN/Inf（超出定义域）",
    ),
    "triage.op.data": ("was the first to read a non-finite batch tensor", "是第一个读到含 NaN/Inf 的 batch 张量的 op"),
    "triage.op.param": ("was the first to read a non-finite parameter", "是第一个读到含 NaN/Inf 的参数的 op"),
    "triage.op.near_overflow": (
        "came within a factor 2 of its dtype's largest value",
        "输出已接近其 dtype 的最大值（相差不到 2 倍）",
    ),
    "triage.op.then": ("{first}; {rest}", "{first}；{rest}"),
    "triage.op.stats": ("{dtype}{shape}{src} {rng}{bad}", "{dtype}{shape}{src} {rng}{bad}"),
    "triage.op.no_finite": ("no finite values", "没有有限值"),
    "triage.op.range": ("range [{lo}, {hi}]", "范围 [{lo}, {hi}]"),
    "triage.op.counts": (" ({counts})", "（{counts}）"),
    "triage.op.nan_count": ("{n} NaN", "{n} 个 NaN"),
    "triage.op.inf_count": ("{n} Inf", "{n} 个 Inf"),
    # the sample search (triage/samples.py) and the snapshot ring (triage/ring.py)
    "triage.samples.packed_examples": (
        "the rows are packed: a bisection over the examples inside them ({probes} probes of chosen examples laid "
        "end to end) names {n} example(s): {examples}",
        "这些行是 packed 的：对行内样本做二分查找（{probes} 次探测，每次把选中的样本首尾相接放进一行）找到 {n} 个样本："
        "{examples}",
    ),
    "triage.samples.row_example": (
        "row {row} example {example} (tokens {start}-{end})",
        "行 {row} 第 {example} 个样本（token {start}-{end}）",
    ),
    "triage.samples.padded": (
        "the model cannot run a batch of one sample here ({why}): every probe kept at least {k} samples, a "
        "candidate being tested together with samples known to be good",
        "这个模型无法运行只有一个样本的 batch（{why}）：每次探测至少保留 {k} 个样本，把待测样本和已知正常的样本放在一起测试",
    ),
    "triage.samples.stopped": (
        "stopped after {probes} probes; the remaining candidates are listed",
        "探测 {probes} 次后停止；列出的是剩余的候选样本",
    ),
    "triage.samples.only_together": (
        "these samples make the step non-finite only together (no smaller subset does): a statistic over the "
        "batch (BatchNorm, a loss normalised by the batch) is involved{more}",
        "这些样本只有放在一起才会让这一步出现 NaN/Inf（任何更小的子集都不会）：涉及对整个 batch 的统计量"
        "（BatchNorm、按 batch 归一化的 loss）{more}",
    ),
    "triage.samples.and": ("; {note}", "；{note}"),
    "triage.samples.too_many": (
        "batch of {size} samples: per-sample losses not computed (limit {limit})",
        "batch 有 {size} 个样本：未计算逐样本 loss（上限 {limit}）",
    ),
    "triage.samples.no_single": (
        "per-sample losses not computed: the model cannot run a batch of one sample ({error})",
        "未计算逐样本 loss：这个模型无法运行只有一个样本的 batch（{error}）",
    ),
    "triage.samples.none_stands_out": (
        "no sample stands out: the whole batch is harder than usual, or the state is the problem",
        "没有哪个样本特别突出：要么整个 batch 比平时更难，要么是模型状态的问题",
    ),
    "triage.ring.batch_too_big": (
        "a batch of {mib:.1f} MiB does not fit in the triage budget ({budget:.0f} MiB, {snapshots:.0f} MiB of it "
        "snapshots): batches are kept as fingerprints and cannot be replayed; raise snapshot_budget",
        "一个 {mib:.1f} MiB 的 batch 放不进 triage 内存预算（{budget:.0f} MiB，其中 snapshot 占 {snapshots:.0f} MiB）："
        "batch 只保留 fingerprint，无法重放；请调大 snapshot_budget",
    ),
    "triage.ring.batch_too_wide": (
        "a batch with more than {visits} container elements or {tensors} tensors was not kept for replay (a "
        "bounded look, not a copy, each step); such steps cannot be replayed",
        "有 batch 的容器元素超过 {visits} 个或张量超过 {tensors} 个，没有保留用于重放（每步只做有界的查看，不复制）；"
        "这样的 step 无法重放",
    ),
    "triage.ring.batch_unreadable": (
        "a batch holding a {kind} tensor ({key}) was not kept for replay: its values cannot be copied; such steps "
        "cannot be replayed",
        "有 batch 含 {kind} 张量（{key}），其值无法复制，没有保留用于重放；这样的 step 无法重放",
    ),
    "triage.ring.fingerprinted": (
        "older batches were replaced by fingerprints to stay within the triage budget ({budget:.0f} MiB); steps "
        "before them cannot be replayed",
        "为了不超出 triage 内存预算（{budget:.0f} MiB），较早的 batch 已替换为 fingerprint；它们之前的 step 无法重放",
    ),
    "triage.ring.state_too_big": (
        "the model and optimizer state ({mib:.0f} MiB) exceeds the triage budget ({budget:.0f} MiB): snapshots "
        "are off; pass snapshot='disk' or a larger snapshot_budget to replay incidents",
        "模型和 optimizer 状态（{mib:.0f} MiB）超出了 triage 内存预算（{budget:.0f} MiB）：snapshot 已关闭；"
        "要重放事故，请传入 snapshot='disk' 或更大的 snapshot_budget",
    ),
    # snapshots, replay, and what triage writes to the log
    "triage.snapshot.unloadable": (
        "the snapshot {path} could not be loaded ({error}); it was not replayed",
        "snapshot {path} 无法加载（{error}）；未重放",
    ),
    "triage.snapshot.foreign": (
        "the snapshot {path} is not the one lossdoctor wrote for step {step}; it was not replayed",
        "snapshot {path} 不是 lossdoctor 为第 {step} 步写入的那个；未重放",
    ),
    "triage.replay.no_grad": (
        "replay_fn's loss at step {step} does not require grad: nothing to replay",
        "replay_fn 在第 {step} 步返回的 loss 不需要梯度：没有可重放的内容",
    ),
    "triage.log.failed": (
        "lossdoctor: incident triage at step {step} failed: {error}",
        "lossdoctor：第 {step} 步的事故分析失败：{error}",
    ),
    "triage.log.disabled": (
        "lossdoctor: incident triage disabled after an internal error: {error}",
        "lossdoctor：事故分析因内部错误被停用：{error}",
    ),
    "triage.log.rolled_back": (
        "lossdoctor: on_incident='skip': rolled back to the state before step {step} and skipped its batch",
        "lossdoctor：on_incident='skip'：已回滚到第 {step} 步之前的状态并跳过了它的 batch",
    ),
    "triage.log.skip_disabled": (
        "lossdoctor: the skip policy is disabled after an internal error: {error}",
        "lossdoctor：skip 策略因内部错误被停用：{error}",
    ),
    "triage.log.ring_note": ("lossdoctor: {note}", "lossdoctor：{note}"),
    "triage.log.ring_disabled": (
        "lossdoctor: snapshot ring disabled after an internal error: {error}",
        "lossdoctor：snapshot 环形缓冲 因内部错误被停用：{error}",
    ),
}

# a pipeline stage replayed alone (triage/stage_flow.py) and its tape in the ring (triage/stage_tape.py)
TEMPLATES.update(
    {
        "triage.stage.right_before": (
            "pipeline stage {stage} of {stages}, replayed alone from the snapshot taken right before step {step} on the "
            "inputs it recorded, goes non-finite again in the forward of step {step}",
            "流水线 stage {stage}（共 {stages} 个）用它记录的输入、从紧挨着第 {step} 步之前的 snapshot 单独重放，"
            "第 {step} 步的前向再次出现 NaN/Inf",
        ),
        "triage.stage.replayed_from": (
            "pipeline stage {stage} of {stages}, replayed alone from the snapshot of step {start} on the inputs and output "
            "gradients it recorded ({n} earlier steps, its outputs matching the recorded ones {close}), goes non-finite "
            "again in the forward of step {step}",
            "流水线 stage {stage}（共 {stages} 个）用它记录的输入和输出梯度、从第 {start} 步的 snapshot 单独重放"
            "（之前 {n} 步的输出与记录{close}），第 {step} 步的前向再次出现 NaN/Inf",
        ),
        "triage.stage.replayed_approx": (
            "pipeline stage {stage} of {stages} was replayed alone up to step {at} (the inputs of that step were not "
            "kept), and the inputs of step {step} run on the weights reached there go non-finite in the forward",
            "流水线 stage {stage}（共 {stages} 个）单独重放到第 {at} 步（该步的输入没有保留），"
            "在那里得到的权重上运行第 {step} 步的输入，前向出现 NaN/Inf",
        ),
        "triage.stage.micro_batch": (
            "micro-batch {micro} of the step's {n} (samples {first}-{last} of the step's batch) is the first whose "
            "forward goes non-finite{within}",
            "该步 {n} 个 micro-batch 中第一个前向出现 NaN/Inf 的是 micro-batch {micro}（该步 batch 的样本 "
            "{first}-{last}）{within}",
        ),
        "triage.stage.within": (
            "; the samples named here are counted within it: [{local}] there are [{ids}] of the step's batch",
            "；这里所说的样本按该 micro-batch 内部编号：其中的 [{local}] 即该步 batch 的 [{ids}]",
        ),
        "triage.stage.isolated": (
            "bisecting the micro-batch ({probes} forward probes of the stage) isolates sample(s) {ids}: each makes "
            "the stage's forward non-finite on its own, the rest of the micro-batch does not",
            "对该 micro-batch 做二分（{probes} 次该 stage 的前向探测）定位到样本 {ids}：它们各自单独就会让该 stage "
            "的前向出现 NaN/Inf，micro-batch 中其余样本不会",
        ),
        "triage.stage.nondet": (
            "pipeline stage {stage} of {stages} was replayed alone from the snapshot of step {start} on the inputs and "
            "output gradients it recorded ({n} earlier steps, its outputs matching the recorded ones {close}), and the "
            "forward of step {step} stays finite in all its {micro} micro-batches",
            "流水线 stage {stage}（共 {stages} 个）用它记录的输入和输出梯度、从第 {start} 步的 snapshot 单独重放"
            "（之前 {n} 步的输出与记录{close}），第 {step} 步全部 {micro} 个 micro-batch 的前向都保持有限",
        ),
        "triage.stage.not_kept": (
            "stage not replayed: its inputs of step {step} were not kept (over the triage budget, or a tensor that "
            "cannot be copied)",
            "未重放该 stage：它在第 {step} 步的输入没有保留（超出 triage 内存预算，或有无法复制的张量）",
        ),
        "triage.stage.approximated": (
            "the stage's replay stopped at step {at}, whose inputs were not kept: step {step} was run on the weights "
            "reached there, not on those it had in training",
            "该 stage 的重放停在第 {at} 步（该步的输入没有保留）：第 {step} 步是在那里得到的权重上运行的，"
            "而不是训练时的权重",
        ),
        "triage.stage.diverged": (
            "the stage's replay diverged from training at step {step} (its outputs no longer matched the recorded "
            "ones), so the step's forward was not judged on it",
            "该 stage 的重放在第 {step} 步与训练分叉（输出与记录不再一致），因此没有据此判断该步的前向",
        ),
        "triage.stage.not_nonfinite": (
            "stage {stage} not replayed: a {trigger} is judged on the loss, which needs every pipeline stage; one "
            "stage's replay localises a non-finite forward only",
            "未重放 stage {stage}：{trigger} 要根据 loss 判断，而 loss 需要所有流水线 stage；"
            "单个 stage 的重放只定位非有限的前向",
        ),
        "triage.stage.bwd_only": (
            "stage {stage} not replayed: its forward stayed finite at step {step} and the non-finite values came in "
            "its backward; one stage's replay runs its forward only, and its inputs of that step were not kept",
            "未重放 stage {stage}：它在第 {step} 步的前向保持有限，NaN/Inf 出现在反向中；"
            "单个 stage 的重放只运行前向，而且该步的输入没有保留",
        ),
        "triage.stage.bwd_own": (
            "stage {stage} not replayed: its forward stayed finite at step {step} and the gradients its outputs "
            "received were finite, so its own backward made them non-finite; one stage's replay runs its forward "
            "only and does not localise a backward",
            "未重放 stage {stage}：它在第 {step} 步的前向保持有限，输出收到的梯度也是有限的，"
            "所以是它自己的反向产生了 NaN/Inf；单个 stage 的重放只运行前向，不定位反向",
        ),
        "triage.stage.bwd_from_next": (
            "stage {stage} not replayed: its forward stayed finite at step {step}, and the gradient stage {next} sent "
            "back for micro-batch {micro} was already non-finite: the fault began in stage {next} or later, which a "
            "replay of this stage's forward cannot localise",
            "未重放 stage {stage}：它在第 {step} 步的前向保持有限，而 stage {next} 为 micro-batch {micro} "
            "传回的梯度已经是 NaN/Inf：问题始于 stage {next} 或更后面的 stage，重放该 stage 的前向无法定位",
        ),
        "triage.stage.bwd_from_loss": (
            "stage {stage} not replayed: its forward stayed finite at step {step}, and the gradient of the loss "
            "(computed outside the stage's module) for micro-batch {micro} was already non-finite: the fault began in "
            "the loss, which a replay of this stage's forward cannot localise",
            "未重放 stage {stage}：它在第 {step} 步的前向保持有限，而 loss（在该 stage 的模块之外计算）对 "
            "micro-batch {micro} 的梯度已经是 NaN/Inf：问题始于 loss，重放该 stage 的前向无法定位",
        ),
        "triage.stage.no_probe": (
            "not probed: a change of learning rate is judged on the loss, which needs every pipeline stage; stage "
            "{stage} is replayed alone only to localise a non-finite forward",
            "未做探测：学习率的改动要根据 loss 判断，而 loss 需要所有流水线 stage；stage {stage} "
            "只为定位非有限的前向而单独重放",
        ),
        "triage.stage.no_verify": (
            "fixes not verified: a fix is judged on the loss, which needs every pipeline stage; stage {stage} is "
            "replayed alone only to localise a non-finite forward",
            "未验证修复：修复要根据 loss 判断，而 loss 需要所有流水线 stage；stage {stage} 只为定位非有限的前向而单独重放",
        ),
        "triage.ring.stage_too_big": (
            "a step's pipeline-stage inputs and output gradients do not fit in the triage budget ({budget:.0f} MiB "
            "for them): that step's stage cannot be replayed; raise snapshot_budget",
            "某一步的流水线 stage 输入和输出梯度放不进 triage 内存预算（可用 {budget:.0f} MiB）："
            "该步的 stage 无法重放；请调大 snapshot_budget",
        ),
        "triage.ring.stage_dropped": (
            "older steps' pipeline-stage inputs were dropped to stay within the triage budget ({budget:.0f} MiB for "
            "them): a replay of the stage stops at the first of them",
            "为了不超出 triage 内存预算（可用 {budget:.0f} MiB），较早步骤的流水线 stage 输入已丢弃："
            "stage 的重放会停在其中第一个",
        ),
    }
)
