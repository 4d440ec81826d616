"""What each `lossdoctor demo` fault is (the English is `demo.scenarios`' description; a scenario
without a row here shows its English description)."""

DESCRIPTIONS_ZH = {
    "healthy-regression": "MLP 回归，Adam 1e-3，batch 大小 8、带噪声",
    "healthy-classifier": "MLP 分类器，SGD momentum 0.05，第 150 步学习率按 step 衰减到 0.1 倍",
    "healthy-gpt2": "从 config 构建的 GPT-2（2 层），AdamW，warmup 之后整个训练做 cosine 衰减",
    "healthy-fp16": "fp16 autocast 下的 MLP 分类器，配 GradScaler（开头几次正常的 back-off）",
    "healthy-attention": "手写的带 padding 的 attention 分类器，Adam 3e-3",
    "nan-data": "第 60 步某个样本的一个特征是 NaN（解码出错）",
    "grad-explosion": "学习率 warmup 一直升到 3.0（SGD，不做裁剪）：梯度爆炸",
    "lr-too-high": "GPT-2 用 AdamW、lr 0.5（本意是 5e-4）：loss 立刻跳升",
    "lr-too-low": "MLP 分类器用 SGD、lr 1e-5：loss 下降极慢",
    "fp16-overflow": "未归一化的特征（x1e5）上做 fp16 autocast + GradScaler：每一步都溢出，loss scale 崩塌",
    "fp16-activation-overflow": "fp16 autocast，特征尺度为 8 的 squared-ReLU 激活 MLP：某个隐藏层超过了 fp16 的 65504",
    "bf16-stall": "bf16 参数配 Adam、lr 1e-5：更新被舍入掉",
    "labels-all-masked": "GPT-2 SFT 的 batch 标签全是 -100（collator 的 bug）",
    "attention-padding": "attention 分类器；第 50 步有一条序列全是 padding（masked_fill -inf，整行被 mask 的 softmax）",
    "bad-init": "GPT-2 用 std 1.0 而不是 0.02 初始化",
    "vanishing": "12 层 sigmoid MLP，没有残差也没有归一化，SGD",
    "loss-spike": "分类器训练正常；第 300 步来了一个损坏的 batch（标签被打乱，特征 x20）",
    "cosine-too-short": "200 步的训练用 CosineAnnealingLR(T_max=50)：学习率又升回去了",
    "warmup-per-epoch": "线性 warmup 的 LambdaLR 每个 25 步的 epoch 才 step 一次，而不是每步一次",
}


TEMPLATES: dict[str, tuple[str, str]] = {}


def description(name: str, english: str, lang: str) -> str:
    """A demo fault's description in `lang`."""
    if lang == "zh" and name in DESCRIPTIONS_ZH:
        return DESCRIPTIONS_ZH[name]
    return english
