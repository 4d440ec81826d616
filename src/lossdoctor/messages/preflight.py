"""Findings and notes of the preflight checks (preflight/*.py): the LR schedule simulated before
training, the first batches, the initialisation, the labels, the precision setup."""

SCHEDULE = {
    "schedule.simulated_first": (
        "schedule simulated for the first {n} of {total} steps",
        "只模拟了 {total} 步中前 {n} 步的学习率调度",
    ),
    "schedule.plateau_not_simulated": (
        "ReduceLROnPlateau follows the metric; its schedule cannot be simulated",
        "ReduceLROnPlateau 跟随指标变化，无法预先模拟其调度",
    ),
    "schedule.needs_total_steps": (
        "LR schedule not simulated: pass total_steps (the planned optimizer steps)",
        "没有模拟学习率调度：请传入 total_steps（计划的优化器 step 数）",
    ),
    "schedule.not_a_scheduler": (
        "{name}: not a torch LR scheduler; schedule not simulated",
        "{name}：不是 torch 的 LR scheduler；没有模拟调度",
    ),
    "schedule.not_simulated": ("LR schedule not simulated ({error})", "没有模拟学习率调度（{error}）"),
    "schedule.per_epoch": (
        "; the scheduler steps once per epoch (every {n} optimizer steps)",
        "；scheduler 每个 epoch 才 step 一次（每 {n} 个优化器 step）",
    ),
    "schedule.fix_step_every_step": (
        "step the scheduler after every optimizer step, not every epoch (Lightning: "
        "lr_scheduler={{'scheduler': s, 'interval': 'step'}})",
        "每个优化器 step 之后都调用 scheduler.step()，而不是每个 epoch 一次（Lightning："
        "lr_scheduler={{'scheduler': s, 'interval': 'step'}}）",
    ),
    "schedule.is_zero": ("is 0", "为 0"),
    "schedule.is_not_finite": ("is not finite", "不是有限值"),
    "schedule.lr_bad_everywhere": (
        "{desc} gives an LR that {bad} at every one of the {planned} planned steps{stepping}",
        "{desc} 给出的学习率在计划的全部 {planned} 步中都{bad}{stepping}",
    ),
    "schedule.fix_lambda": (
        "check the schedule's lambda/factors: the LR must be > 0 after warm-up",
        "检查调度的 lambda/系数：warmup 之后学习率必须 > 0",
    ),
    "schedule.warms_up_to": ("warms up for {k} steps to ", "warmup {k} 步到"),
    "schedule.rises_without_reaching": ("rises without reaching ", "上升但达不到"),
    "schedule.summary": (
        "LR schedule over {planned} steps: starts at {start}, {how}peak {peak}, ends at {end}{stepping}",
        "{planned} 步的学习率调度：从 {start} 开始，{how}峰值 {peak}，结束于 {end}{stepping}",
    ),
    "schedule.still_rising": (
        "is still rising at the last of the {planned} planned steps: the LR gets to {end}, {ratio}x its base LR {base}",
        "到计划的第 {planned} 步结束时还在上升：学习率只到 {end}，是基础学习率 {base} 的 {ratio} 倍",
    ),
    "schedule.reaches_peak_late": (
        "reaches its peak {peak} only at step {k} of the {planned} planned",
        "在计划的 {planned} 步中直到第 {k} 步才达到峰值 {peak}",
    ),
    "schedule.warmup_too_long": (
        "the warm-up of {desc} {reach}{stepping}: most of the run trains at a fraction of the intended LR",
        "{desc} 的 warmup {reach}{stepping}：大部分训练都只用了预期学习率的一小部分",
    ),
    "schedule.fix_warmup_3pct": (
        "warm up for about {warm} steps (3% of {planned}), e.g. get_cosine_schedule_with_warmup(opt, "
        "num_warmup_steps={warm}, num_training_steps={planned})",
        "warmup 大约 {warm} 步（{planned} 的 3%），例如 get_cosine_schedule_with_warmup(opt, "
        "num_warmup_steps={warm}, num_training_steps={planned})",
    ),
    "schedule.period_too_short": (
        "{desc} brings the LR down to {low} at step {at} of the {planned} planned, then it climbs again to {high} "
        "by step {by}{stepping}: the schedule's period is shorter than the run",
        "{desc} 在计划的 {planned} 步中于第 {at} 步把学习率降到 {low}，之后又回升，到第 {by} 步升到 {high}{stepping}："
        "调度的周期比训练短",
    ),
    "schedule.steps_after_warmup": ("the steps after warm-up", "warmup 之后的步数"),
    "schedule.runs_length": ("the run's length", "训练的总步数"),
    "schedule.fix_t_max": ("T_max={length} ({what}; T_max={tmax} now)", "T_max={length}（{what}；当前 T_max={tmax}）"),
    "schedule.fix_decay_length": (
        "set the decay length to the run: {length} steps after a {k}-step warm-up (num_training_steps={planned})",
        "把衰减长度设成训练的长度：{k} 步 warmup 之后再衰减 {length} 步（num_training_steps={planned}）",
    ),
    "schedule.ends_early": (
        "{desc} brings the LR to {lr} at step {step} and keeps it there: the last {idle} of the {planned} planned "
        "steps ({frac:.0%}) do not train{stepping}",
        "{desc} 在第 {step} 步把学习率降到 {lr} 并一直保持：计划的 {planned} 步中最后 {idle} 步（{frac:.0%}）"
        "等于没有训练{stepping}",
    ),
    "schedule.t_max_hint": (" (T_max={tmax})", "（T_max={tmax}）"),
    "schedule.fix_as_long_as_run": (
        "make the schedule as long as the run: num_training_steps={planned}{tmax}",
        "让调度和训练一样长：num_training_steps={planned}{tmax}",
    ),
    "schedule.no_warmup": (
        "{desc} starts at its peak LR {peak} at step 0: no warm-up; Adam's first steps use second-moment "
        "estimates from a handful of batches",
        "{desc} 在第 0 步就是峰值学习率 {peak}：没有 warmup；Adam 最初几步的二阶矩估计只来自很少几个 batch",
    ),
    "schedule.fix_add_warmup": (
        "add a linear warm-up of about {warm} steps (3% of {planned})",
        "加一段大约 {warm} 步的线性 warmup（{planned} 的 3%）",
    ),
}

DATA = {
    "data.nonfinite_samples": (
        "batch {batch} {key}: {n} of {total} samples hold non-finite values ({what}; samples {samples}): the first "
        "forward pass that sees them returns NaN",
        "batch {batch} 的 {key}：{total} 个样本中有 {n} 个含有非有限值（{what}；样本 {samples}）：第一次用到它们的前向"
        "就会得到 NaN",
    ),
    "data.fix_drop_nonfinite": (
        "drop or repair these samples where the data is loaded (torch.isfinite(x).all(dim=1) as a filter), and find "
        "the step that produced them (a division by 0, a log of 0, a bad decode)",
        "在加载数据的地方丢弃或修复这些样本（用 torch.isfinite(x).all(dim=1) 过滤），并找出产生它们的那一步"
        "（除以 0、对 0 取 log、解码出错）",
    ),
    "data.ids_out_of_range": (
        "batch {batch}: token ids range over {lo}..{hi}, but the embedding has {vocab} rows (samples {samples}): an "
        "index error on CPU, a device-side assert or garbage on GPU",
        "batch {batch}：token id 的范围是 {lo}..{hi}，但 embedding 只有 {vocab} 行（样本 {samples}）：在 CPU 上会报"
        "索引错误，在 GPU 上会触发 device-side assert 或得到垃圾值",
    ),
    "data.fix_tokenizer": (
        "tokenize with the model's own tokenizer, or resize the embedding: model.resize_token_embeddings({n})",
        "用模型自己的 tokenizer 分词，或者调整 embedding 的大小：model.resize_token_embeddings({n})",
    ),
    "data.no_ftfy": (
        "mojibake check skipped: install ftfy (U+FFFD characters were still checked)",
        "跳过了乱码（mojibake）检查：需要安装 ftfy（U+FFFD 字符仍然检查过了）",
    ),
    "data.feature_i": ("feature {i}", "第 {i} 个特征"),
    "data.it": ("it", "该特征"),
    "data.targets_scale": (
        "targets {key} have RMS {rms} (mean {mean}, std {std}) over {n} values: a squared error starts near {sq} and "
        "its gradients are as large",
        "目标值 {key} 的 RMS 为 {rms}（均值 {mean}，std {std}，共 {n} 个值）：平方误差一开始就在 {sq} 左右，梯度也"
        "同样大",
    ),
    "data.fix_standardise_targets": (
        "standardise the targets: y = (y - {mean}) / {std}, and invert that on the predictions",
        "对目标值做标准化：y = (y - {mean}) / {std}，预测时再反变换回去",
    ),
    "data.input_scale": (
        "input {key}: per-feature RMS ranges from {lo} to {hi} over {n} values ({where}: mean {mean}, std {std}); "
        "standardised inputs have RMS ~1",
        "输入 {key}：逐特征的 RMS 从 {lo} 到 {hi}（共 {n} 个值；{where}：均值 {mean}，std {std}）；标准化后的输入 "
        "RMS 应在 1 左右",
    ),
    "data.fix_pixels": (
        "scale pixels to 0..1 (x / 255), then normalise per channel: (x - mean) / std "
        "(torchvision.transforms.Normalize)",
        "把像素缩放到 0..1（x / 255），再逐通道归一化：(x - mean) / std（torchvision.transforms.Normalize）",
    ),
    "data.fix_standardise_inputs": (
        "standardise each feature with the training set's statistics: x = (x - mean) / std (here the largest mean "
        "is {mean} and the largest std {std})",
        "用训练集的统计量对每个特征做标准化：x = (x - mean) / std（这里最大的均值是 {mean}，最大的 std 是 {std}）",
    ),
    "data.scale_spread": (
        "the feature scales span a factor of {spread}: one learning rate cannot suit them all",
        "各特征的尺度相差 {spread} 倍：一个学习率没法同时适合所有特征",
    ),
    "data.decoding_errors": (
        "{bad} of {n} samples hold text decoding errors: the model learns the garbage",
        "{n} 个样本中有 {bad} 个存在文本解码错误：模型会把这些乱码也学进去",
    ),
    "data.fffd": (
        "{n} samples contain U+FFFD replacement characters, e.g. batch {batch} sample {sample}: {text}",
        "{n} 个样本含有 U+FFFD 替换字符，例如 batch {batch} 的样本 {sample}：{text}",
    ),
    "data.mojibake": (
        "{n} samples contain mojibake (UTF-8 read as cp1252/latin-1), e.g. batch {batch} sample {sample}: {text} "
        "should read {fixed}",
        "{n} 个样本含有乱码（UTF-8 被当成 cp1252/latin-1 读取），例如 batch {batch} 的样本 {sample}：{text} 应为 "
        "{fixed}",
    ),
    "data.fix_decode_utf8": (
        "decode the source files as UTF-8 (open(path, encoding='utf-8')); repair text that was already mis-decoded "
        "with ftfy.fix_encoding, and drop samples that still contain U+FFFD",
        "按 UTF-8 解码源文件（open(path, encoding='utf-8')）；已经解码错的文本用 ftfy.fix_encoding 修复，仍含 "
        "U+FFFD 的样本直接丢弃",
    ),
    "data.empty_samples": (
        "{n} of {total} samples are empty (no real token; batch {batch}: samples {samples}): they teach nothing, and "
        "an all-padding row can make attention's softmax NaN in implementations that mask with -inf",
        "{total} 个样本中有 {n} 个是空的（没有真实 token；batch {batch}：样本 {samples}）：它们学不到任何东西，而且在用 "
        "-inf 做 mask 的实现里，整行都是 padding 会让 attention 的 softmax 得到 NaN",
    ),
    "data.fix_filter_empty": (
        "filter empty samples out before batching (e.g. dataset.filter(lambda x: len(x['text'].strip()) > 0))",
        "在组 batch 之前过滤掉空样本（例如 dataset.filter(lambda x: len(x['text'].strip()) > 0)）",
    ),
    "data.long_samples": (
        "{n} of {total} samples are at least {factor:g}x the median length {median:g}; the longest (batch {batch} "
        "sample {sample}) has {length}: it dominates the token-averaged loss and the memory of its batch",
        "{total} 个样本中有 {n} 个的长度至少是中位长度 {median:g} 的 {factor:g} 倍；最长的（batch {batch} 的样本 "
        "{sample}）有 {length}：它主导了按 token 平均的 loss，也占满了所在 batch 的显存",
    ),
    "data.fix_cap_length": (
        "cap the length (max_length around {max_length}, the 99th percentile) or bucket samples by length",
        "限制长度（max_length 取 99 分位数 {max_length} 左右），或者按长度分桶",
    ),
    "data.duplicates": (
        "{n} of {total} samples ({pct}) are exact duplicates of an earlier one (e.g. batch {b1} sample {j1} = batch "
        "{b0} sample {j0}): the model memorises them and the loss over-states progress",
        "{total} 个样本中有 {n} 个（{pct}）与前面的样本完全重复（例如 batch {b1} 的样本 {j1} = batch {b0} 的样本 "
        "{j0}）：模型会把它们背下来，loss 会高估训练进展",
    ),
    "data.fix_deduplicate": (
        "deduplicate the dataset (exact hash, then near-duplicates with MinHash) and check that the sampler does not "
        "repeat samples within an epoch",
        "对数据集去重（先按精确哈希，再用 MinHash 去近似重复），并检查 sampler 在一个 epoch 内没有重复采样",
    ),
}

INIT = {
    "pinit.hot_weights": (
        "{n} of {total} weight matrices have std·√fan_in >= {limit:g} (He init is 1.41): {layer} std {std} with "
        "fan_in {fan_in} (gain {gain}), worst {worst} (gain {worst_gain})",
        "{total} 个权重矩阵中有 {n} 个的 std·√fan_in >= {limit:g}（He 初始化为 1.41）：{layer} 的 std 为 {std}，"
        "fan_in 为 {fan_in}（gain {gain}），最严重的是 {worst}（gain {worst_gain}）",
    ),
    "pinit.how_hf": (
        " (config.initializer_range=0.02, then model.init_weights())",
        "（config.initializer_range=0.02，然后调用 model.init_weights()）",
    ),
    "pinit.how_torch": (" (nn.init.kaiming_uniform_/xavier_uniform_)", "（nn.init.kaiming_uniform_/xavier_uniform_）"),
    "pinit.fix_std": (
        "initialise with std = 1/√fan_in (= {std} for {layer}) or the architecture's default{how}",
        "用 std = 1/√fan_in 初始化（{layer} 对应 {std}），或者用该架构默认的初始化{how}",
    ),
    "pinit.residual_unscaled": (
        "residual projections ({names}...) of the {layers} blocks in {prefix} have {ratio}x the std of the other "
        "matrices; GPT-2/Megatron scale them by 1/√(2·{layers}) = {expected} so the residual stream does not grow "
        "with depth",
        "{prefix} 中 {layers} 个 block 的残差投影（{names}...）的 std 是其他矩阵的 {ratio} 倍；GPT-2/Megatron 会把它们"
        "按 1/√(2·{layers}) = {expected} 缩放，免得残差流随深度增长",
    ),
    "pinit.fix_residual": (
        "scale the residual output projections' init std by {factor} (1/√(2·n_layer))",
        "把残差输出投影的初始化 std 乘以 {factor}（1/√(2·n_layer)）",
    ),
    "pinit.rms_grows": (
        "on the first batch the activation RMS grows from {start} (input of {first}) to {end} (output of {last}): "
        "x{ratio} over {layers} layers, x{per_layer} per layer",
        "在第一个 batch 上，激活值的 RMS 从 {start}（{first} 的输入）增长到 {end}（{last} 的输出）：{layers} 层共放大 "
        "{ratio} 倍，每层 {per_layer} 倍",
    ),
    "pinit.rms_shrinks": (
        "on the first batch the activation RMS shrinks from {start} (input of {first}) to {end} (output of {last}): "
        "x{ratio} over {layers} layers; gradients will vanish the same way",
        "在第一个 batch 上，激活值的 RMS 从 {start}（{first} 的输入）缩小到 {end}（{last} 的输出）：{layers} 层共乘以 "
        "{ratio}；梯度也会以同样的方式消失",
    ),
    "pinit.fix_he_init": (
        "use He init for ReLU layers (nn.init.kaiming_normal_(w, nonlinearity='relu')) or add normalisation/residual "
        "connections",
        "ReLU 层用 He 初始化（nn.init.kaiming_normal_(w, nonlinearity='relu')），或者加归一化/残差连接",
    ),
    "pinit.initial_loss": (
        "the initial loss is {loss}, {ratio}x chance (ln {classes} = {chance}): the untrained model is confidently "
        "wrong, its logits are already large",
        "初始 loss 为 {loss}，是随机水平（ln {classes} = {chance}）的 {ratio} 倍：未训练的模型错得很自信，logits "
        "一开始就很大",
    ),
    "pinit.fix_output_layer": (
        "initialise the output layer small (std 0.02, or zero the classifier's weight) so the first loss is near "
        "ln(classes) = {chance}",
        "把输出层初始化得小一些（std 0.02，或者把分类器的权重置零），让初始 loss 接近 ln(classes) = {chance}",
    ),
}

LABELS = {
    "plabels.all_masked": (
        "all {n} label positions of batch {batch} are {ignore}: the mean cross-entropy over 0 tokens is NaN (0 with "
        "a sum), and no gradient flows",
        "batch {batch} 的全部 {n} 个标签位置都是 {ignore}：在 0 个 token 上求平均的交叉熵是 NaN（用 sum 则是 0），"
        "没有任何梯度",
    ),
    "plabels.sample0_ends_with": (
        "sample 0 ends with {text} and none of it is supervised",
        "样本 0 的结尾是 {text}，其中没有任何部分参与监督",
    ),
    "plabels.fix_keep_response": (
        "keep the labels of the response: labels = input_ids where the answer is, -100 only on the prompt and padding",
        "保留 response 的标签：回答部分 labels = input_ids，只有 prompt 和 padding 设为 -100",
    ),
    "plabels.fix_truncate_prompt": (
        "if the prompt fills max_length, truncate the prompt, not the response",
        "如果 prompt 占满了 max_length，截断 prompt，而不是 response",
    ),
    "plabels.batches_all_masked": (
        "{n} of {total} batches have every label masked (batches {batches})",
        "{total} 个 batch 中有 {n} 个的标签全被 mask（batch {batches}）",
    ),
    "plabels.already_shifted": (
        "labels are already shifted (labels[i] == input_ids[i+1]); that is right only if the loss does not shift "
        "them again (HF *ForCausalLM models do)",
        "标签已经移过位了（labels[i] == input_ids[i+1]）；只有当 loss 不再移位时才对（HF 的 *ForCausalLM 模型会再移一次）",
    ),
    "plabels.shifted": (
        "labels[i] == input_ids[i+1] at {shifted} of {n} supervised positions (labels[i] == input_ids[i] at "
        "{aligned}): the collator already shifted the labels",
        "{n} 个有监督位置中 {shifted} 满足 labels[i] == input_ids[i+1]（labels[i] == input_ids[i] 的只有 {aligned}）："
        "collator 已经把标签移过位了",
    ),
    "plabels.shifted_again": (
        "{model} shifts the labels again inside forward, so it is trained to predict the token after next and the "
        "loss stalls high",
        "{model} 在 forward 里会再移一次位，于是模型学的是预测下下个 token，loss 会停在高位",
    ),
    "plabels.fix_do_not_shift": (
        "do not shift in the collator: labels = input_ids.clone() (then -100 on prompt and padding); {model} shifts "
        "them itself",
        "不要在 collator 里移位：labels = input_ids.clone()（再把 prompt 和 padding 设为 -100）；{model} 会自己移位",
    ),
    "plabels.padding_supervised": (
        "{n} supervised label positions are padding (attention_mask 0): {pct} of the {total} supervised tokens teach "
        "the model to predict padding, and they dilute the loss of the real tokens",
        "{n} 个有监督的标签位置是 padding（attention_mask 为 0）：{total} 个有监督 token 中有 {pct} 在教模型预测 "
        "padding，还稀释了真实 token 的 loss",
    ),
    "plabels.fix_mask_padding": (
        "set labels to {ignore} where attention_mask == 0 (DataCollatorForSeq2Seq pads labels with "
        "label_pad_token_id={ignore})",
        "在 attention_mask == 0 的位置把标签设为 {ignore}（DataCollatorForSeq2Seq 用 label_pad_token_id={ignore} "
        "填充标签）",
    ),
    "plabels.prompt_supervised": (
        "{n} of {prompt} prompt tokens ({pct}) in {batches} batch(es) are supervised, next to {response_n} of "
        "{response} response tokens: the model is trained to write the user's turn too",
        "{batches} 个 batch 中 {prompt} 个 prompt token 有 {n} 个（{pct}）参与了监督，而 response 的 {response} 个 "
        "token 中有 {response_n} 个：模型连用户的那一轮也在学着写",
    ),
    "plabels.all_real_supervised": (
        "every real token of {n} of {total} samples is supervised (no label is {ignore} except padding): for SFT the "
        "prompt should be masked",
        "{total} 个样本中有 {n} 个的所有真实 token 都参与了监督（除 padding 外没有标签是 {ignore}）：SFT 应该把 "
        "prompt mask 掉",
    ),
    "plabels.header_not_found": (
        "the chat template's assistant header {header} was not found in input_ids, so the prompt boundary is inferred",
        "在 input_ids 中没找到 chat template 的 assistant 开头 {header}，prompt 的边界是推断出来的",
    ),
    "plabels.supervised_text": (
        "batch {batch} sample {sample} supervised text: {text}",
        "batch {batch} 样本 {sample} 参与监督的文本：{text}",
    ),
    "plabels.the_assistant_header": ("the assistant header", "assistant 的开头"),
    "plabels.fix_mask_prompt": (
        "set labels to {ignore} on every prompt token (up to and including {header}), keep them on the answer and its "
        "end-of-turn token (TRL: assistant_only_loss=True / completion_only_loss=True)",
        "把所有 prompt token（直到并包括 {header}）的标签设为 {ignore}，回答及其结束 token 的标签保留"
        "（TRL：assistant_only_loss=True / completion_only_loss=True）",
    ),
    "plabels.fix_mask_prompt_trl": (
        "TRL {version}: set assistant_only_loss=True in SFTConfig for conversational data (the chat template must mark "
        "the assistant turns with {{% generation %}}), or completion_only_loss=True for prompt-completion data; this "
        "run has assistant_only_loss={assistant}, completion_only_loss={completion}",
        "TRL {version}：对话格式的数据在 SFTConfig 里设 assistant_only_loss=True（chat template 要用 "
        "{{% generation %}} 标出 assistant 的轮次），prompt-completion 格式的数据设 completion_only_loss=True；"
        "这次训练是 assistant_only_loss={assistant}、completion_only_loss={completion}",
    ),
    "plabels.fix_mask_prompt_trl_collator": (
        "TRL {version}: train with DataCollatorForCompletionOnlyLM(response_template={header}), which sets the "
        "labels of everything up to the response template to -100 (TRL 0.20 and later: assistant_only_loss=True)",
        "TRL {version}：用 DataCollatorForCompletionOnlyLM(response_template={header}) 训练，它会把 response template "
        "之前的标签都设为 -100（TRL 0.20 及以后：assistant_only_loss=True）",
    ),
    "plabels.no_supervised_token": (
        "{n} of {total} samples have no supervised token (batch {batch}: samples {samples}): they cost compute and "
        "teach nothing",
        "{total} 个样本中有 {n} 个没有任何有监督 token（batch {batch}：样本 {samples}）：白白耗费算力，什么也学不到",
    ),
    "plabels.truncated_response": (
        "{n} of them are as long as the longest sample of their batch: truncation probably cut the whole response",
        "其中 {n} 个和所在 batch 中最长的样本一样长：很可能是截断把整个 response 切掉了",
    ),
    "plabels.no_supervised_example": (
        "{n} of {total} examples inside packed rows have no supervised token (batch {batch}: {examples}): their "
        "rows still hold other examples' labels, so per row they look fine; these examples cost compute and teach "
        "nothing",
        "packed 行里的 {total} 个样本中有 {n} 个没有任何有监督 token（batch {batch}：{examples}）：它们所在的行里"
        "还有别的样本的标签，按行看一切正常；这些样本白白耗费算力，什么也学不到",
    ),
    "plabels.truncated_response_packed": (
        "{n} of them are max_length ({max_length}) tokens long: truncation to max_length probably cut the whole "
        "response",
        "其中 {n} 个的长度正好是 max_length（{max_length} 个 token）：很可能是截断到 max_length 时把整个 response 切掉了",
    ),
    "plabels.packed_example_ends_with": (
        "batch {batch} packed row {row}, example {example} (tokens {start}-{end}) ends with {text}",
        "batch {batch} packed 行 {row} 的第 {example} 个样本（token {start}-{end}）的结尾是 {text}",
    ),
    "plabels.packed_supervised_text": (
        "batch {batch} packed row {row}, example {example} (tokens {start}-{end}) supervised text: {text}",
        "batch {batch} packed 行 {row} 的第 {example} 个样本（token {start}-{end}）参与监督的文本：{text}",
    ),
    "plabels.fix_truncate_and_drop_packed": (
        "these examples were truncated to max_length before packing and lost their whole response: drop examples "
        "whose prompt alone fills max_length (search the dataset for the text above), or raise max_length; TRL "
        "drops such examples itself only without packing",
        "这些样本在 packing 之前被截断到 max_length，整个 response 都丢了：丢弃 prompt 本身就占满 max_length 的样本"
        "（用上面的文本在数据集里搜索），或者调大 max_length；TRL 只有在不用 packing 时才会自己丢掉这类样本",
    ),
    "plabels.sample_ends_with": (
        "batch {batch} sample {sample} ends with {text}",
        "batch {batch} 样本 {sample} 的结尾是 {text}",
    ),
    "plabels.fix_truncate_and_drop": (
        "truncate the prompt, not the response (or raise max_length), and drop samples whose labels are all -100 "
        "before batching",
        "截断 prompt 而不是 response（或者调大 max_length），并在组 batch 之前丢弃标签全是 -100 的样本",
    ),
    "plabels.eos_never_supervised": (
        "{names} occurs {n} times in input_ids but none of the {supervised} supervised tokens is it: the model never "
        "learns to end its answer",
        "{names} 在 input_ids 中出现了 {n} 次，但 {supervised} 个有监督 token 中一个都不是它：模型永远学不会结束回答",
    ),
    "plabels.eos_absent": (
        "no sample contains {names}, so none of the {supervised} supervised tokens is an end-of-turn: the model never "
        "learns to end its answer",
        "没有样本包含 {names}，所以 {supervised} 个有监督 token 中没有一个是轮次结束符：模型永远学不会结束回答",
    ),
    "plabels.fix_append_eos": (
        "append the end-of-turn token to each answer and keep its label (a collator that sets labels to -100 wherever "
        "input_ids == pad_token_id also masks EOS when pad == EOS: use a distinct pad token or mask by attention_mask)",
        "在每个回答后面加上轮次结束 token，并保留它的标签（collator 如果在 input_ids == pad_token_id 的地方把标签设为 "
        "-100，那么 pad == EOS 时 EOS 也会被 mask：换一个单独的 pad token，或者按 attention_mask 做 mask）",
    ),
}

PRECISION = {
    "pprec.fp16_params": ("{n} parameters are float16", "{n} 个参数是 float16"),
    "pprec.fp16_autocast": (
        "the forward runs under torch.autocast(dtype=torch.float16)",
        "前向在 torch.autocast(dtype=torch.float16) 下运行",
    ),
    "pprec.scaler_disabled": ("the GradScaler is disabled", "GradScaler 被禁用了"),
    "pprec.scaler_absent": ("no GradScaler is used", "没有使用 GradScaler"),
    "pprec.no_scaler": (
        "{where} and {scaler}: gradients below {tiny} (fp16's smallest subnormal) flush to 0 and above 65504 become inf",
        "{where}，而{scaler}：小于 {tiny}（fp16 最小的次正规数）的梯度会变成 0，大于 65504 的会变成 inf",
    ),
    "pprec.fix_use_scaler": (
        "use torch.amp.GradScaler() with fp16 (scaler.scale(loss).backward(); scaler.step(opt); scaler.update()), or "
        "train in bf16, which has fp32's range",
        "fp16 要配合 torch.amp.GradScaler() 使用（scaler.scale(loss).backward(); scaler.step(opt); "
        "scaler.update()），或者改用 bf16 训练，它的范围和 fp32 一样",
    ),
    "pprec.fix_default_scaler": (
        "torch.amp.GradScaler() with its defaults (init_scale=65536, growth_factor=2, backoff_factor=0.5, "
        "growth_interval=2000)",
        "使用默认参数的 torch.amp.GradScaler()（init_scale=65536, growth_factor=2, backoff_factor=0.5, "
        "growth_interval=2000）",
    ),
    "pprec.backoff_ge_1": (
        "GradScaler backoff_factor={b}: after an overflow the scale never comes down, so every later step overflows "
        "and is skipped",
        "GradScaler 的 backoff_factor={b}：溢出之后 scale 不会下降，之后每一步都会溢出并被跳过",
    ),
    "pprec.backoff_le_0": (
        "GradScaler backoff_factor={b}: one overflow sets the scale to 0 and every later gradient to 0",
        "GradScaler 的 backoff_factor={b}：一次溢出就会把 scale 变成 0，之后所有梯度都是 0",
    ),
    "pprec.scale_nonpositive": (
        "GradScaler the scale is {scale}: every gradient is multiplied by it",
        "GradScaler 的 scale 为 {scale}：每个梯度都会乘上它",
    ),
    "pprec.init_scale_huge": (
        "GradScaler starts at {start}: fp16 gradients overflow until it has backed off to about 2^16, i.e. ~{skipped} "
        "skipped steps (x{b} per overflow) before the first update",
        "GradScaler 从 {start} 开始：在它退到 2^16 左右之前 fp16 梯度都会溢出，也就是第一次更新之前要跳过约 {skipped} 步"
        "（每次溢出乘以 {b}）",
    ),
    "pprec.scheduler_advances": (
        "the LR scheduler still advances on skipped steps: the first ~{skipped} steps of the schedule (its warm-up) are "
        "spent without training",
        "被跳过的 step 上 LR scheduler 照样前进：调度的前约 {skipped} 步（也就是 warmup）都白白过去了",
    ),
    "pprec.fix_init_scale_default": (
        "init_scale=2**16 (65536, the default); {fix}",
        "init_scale=2**16（65536，默认值）；{fix}",
    ),
    "pprec.init_scale_below_one": (
        "GradScaler starts at {start} < 1: it shrinks the loss instead of lifting small gradients above fp16's {tiny}, "
        "so more of them flush to 0",
        "GradScaler 从 {start} < 1 开始：它把 loss 缩小了，而不是把小梯度抬到 fp16 的 {tiny} 之上，于是更多梯度变成 0",
    ),
    "pprec.fix_init_scale": ("init_scale=2**16; {fix}", "init_scale=2**16；{fix}"),
    "pprec.growth_too_often": (
        "GradScaler grows x{g} every {interval} good steps and backs off x{b} per overflow: in steady state about {pct} "
        "of all steps overflow and are skipped",
        "GradScaler 每 {interval} 个正常步放大 {g} 倍，每次溢出缩小为 {b} 倍：稳定后约有 {pct} 的 step 会溢出并被跳过",
    ),
    "pprec.fix_growth_interval": (
        "growth_interval=2000 (the default) so fewer than 0.1% of steps are skipped",
        "growth_interval=2000（默认值），这样被跳过的 step 少于 0.1%",
    ),
    "pprec.growth_below_one": (
        "GradScaler growth_factor={g} < 1: the scale shrinks on every growth interval of {interval} steps and ends "
        "below 1, where gradients underflow",
        "GradScaler 的 growth_factor={g} < 1：scale 每过 {interval} 步就缩小一次，最终低于 1，梯度会下溢",
    ),
    "pprec.fix_growth_factor": ("growth_factor=2.0; {fix}", "growth_factor=2.0；{fix}"),
    "pprec.eps_underflows": (
        "{opt} eps={eps:g} is 0 in {dtype}, the dtype of its second-moment state (param group {group}): wherever a "
        "gradient is below ~{tiny}, v underflows to 0 and the update is 0/0 = NaN",
        "{opt} 的 eps={eps:g} 在 {dtype}（其二阶矩状态的 dtype，param group {group}）中是 0：梯度小于约 {tiny} 的地方 "
        "v 会下溢为 0，更新量就是 0/0 = NaN",
    ),
    "pprec.fix_fp32_state": (
        "keep fp32 weights and optimizer state (model.float() + torch.autocast(dtype=torch.{dtype}) + GradScaler), or "
        "eps=1e-6 if the state must stay in {dtype}",
        "权重和优化器状态保持 fp32（model.float() + torch.autocast(dtype=torch.{dtype}) + GradScaler），如果状态必须"
        "留在 {dtype}，就用 eps=1e-6",
    ),
    "pprec.how_adam": ("Adam's first update is ~lr per entry", "Adam 的第一次更新每个元素约为 lr"),
    "pprec.how_sgd": ("the first update is lr·|grad|", "第一次更新为 lr·|grad|"),
    "pprec.updates_round_away": (
        "with lr={lr} ({how}), {pct} of the {total} {dtype} weight entries would not change: {dtype} keeps {bits} "
        "significant bits, so an update below |w|·2^-{exp} rounds away (the median weight needs an update of at least "
        "{need})",
        "在 lr={lr} 时（{how}），{total} 个 {dtype} 权重中有 {pct} 不会变化：{dtype} 只有 {bits} 位有效数字，小于 "
        "|w|·2^-{exp} 的更新会被舍入掉（中位数大小的权重至少需要 {need} 的更新）",
    ),
    "pprec.fix_master_weights": (
        "keep fp32 master weights: model.float() and run the forward under torch.autocast(dtype=torch.{dtype}); or an "
        "optimizer with stochastic rounding / Kahan summation for {dtype} weights; raising lr to >= {lr} only helps "
        "the median weight",
        "保留 fp32 的 master weights：model.float()，并在 torch.autocast(dtype=torch.{dtype}) 下跑前向；或者对 {dtype} "
        "权重使用带 stochastic rounding / Kahan summation 的优化器；把 lr 提到 >= {lr} 只对中位数大小的权重有用",
    ),
    "pprec.loss_dtype": ("the loss is computed in {dtype}", "loss 是用 {dtype} 计算的"),
    "pprec.loss_dtype_grid": (
        "the loss is computed in {dtype}: at {value} it can only take values {grid} apart, so improvements smaller than "
        "that are invisible, and the log-softmax inside it loses precision",
        "loss 是用 {dtype} 计算的：在 {value} 附近，它能表示的相邻值相差 {grid}，比这小的改进都看不出来，里面的 "
        "log-softmax 也会丢失精度",
    ),
    "pprec.fix_loss_fp32": (
        "compute the loss in fp32: F.cross_entropy(logits.float(), labels) (HF models upcast logits for the loss; a "
        "custom head under a pure-bf16 model does not)",
        "用 fp32 计算 loss：F.cross_entropy(logits.float(), labels)（HF 模型算 loss 时会把 logits 转成 fp32；纯 bf16 "
        "模型上自定义的 head 不会）",
    ),
}

CHECK = {
    "pcheck.no_batches": (
        "no batches given: label, data, activation and initial-loss checks skipped",
        "没有给出 batch：跳过了标签、数据、激活值和初始 loss 的检查",
    ),
    "pcheck.weights_unread": (
        "init check: the weights of {n} layer(s) were not read ({layers}): parametrized (computed on access: "
        "reading them would run the parametrization, a spectral_norm power-iteration step) or lazy, not yet "
        "materialised; their scale against fan-in was not checked",
        "初始化检查：没有读取 {n} 个层的权重（{layers}）：它们是参数化的（每次访问都会重新计算：读取会运行参数化，"
        "对 spectral_norm 来说就是一步幂迭代）或尚未实例化的 lazy 层；没有检查它们相对 fan-in 的尺度",
    ),
    "pcheck.forward_failed": (
        "forward pass on the first batch failed ({error}); activation, initial-loss and loss-dtype checks skipped",
        "在第一个 batch 上的前向失败了（{error}）；跳过了激活值、初始 loss 和 loss dtype 的检查",
    ),
    "pcheck.unreadable_finding": (
        "preflight: skipped an unreadable finding ({error})",
        "preflight：跳过了一条无法读取的诊断（{error}）",
    ),
}

TEMPLATES = {**SCHEDULE, **DATA, **INIT, **LABELS, **PRECISION, **CHECK}
