"""Many ranks: DeepSpeed ZeRO, FSDP1, and run directories of many ranks."""

TEMPLATES = {
    "distributed.replay_skipped_zero": (
        "replay not run: under DeepSpeed ZeRO-{stage} the optimizer state (and at stage 3 the "
        "parameters) is partitioned across ranks, so one rank cannot redo a training step, and a "
        "replay on one rank would start DeepSpeed collectives its peers never join; the live "
        "localisation (batch check, first non-finite layer forward and backward) ran on every rank",
        "未运行 replay：DeepSpeed ZeRO-{stage} 下 optimizer state（stage 3 时连参数也）被切分到各个 rank 上，"
        "单个 rank 无法重做一个训练 step，而只在一个 rank 上 replay 会发起其他 rank 不会参与的 DeepSpeed "
        "collective；在线定位（batch 检查、前向和反向中第一个出现非有限值的层）已在每个 rank 上运行"),
}
