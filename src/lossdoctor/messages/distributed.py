"""Many ranks: DeepSpeed ZeRO, FSDP1, and run directories of many ranks."""

TEMPLATES = {
    "distributed.replay_skipped_zero": (
        "replay not run: under DeepSpeed ZeRO-{stage} the optimizer state (and at stage 3 the "
        "parameters) is partitioned across ranks, so one rank cannot redo a training step, and a "
        "replay on one rank would start DeepSpeed collectives its peers never join; the live "
        "localisation (batch check, first non-finite layer forward and backward) ran on every rank",
        "未运行 replay：DeepSpeed ZeRO-{stage} 下优化器状态（stage 3 时连参数也）被切分到各个 rank 上，"
        "单个 rank 无法重做一个训练 step，而只在一个 rank 上 replay 会发起其他 rank 不会参与的 DeepSpeed "
        "集合通信；在线定位（batch 检查、前向和反向中第一个出现非有限值的层）已在每个 rank 上运行",
    ),
}

TEMPLATES.update(
    {
        "distributed.echoed": (
            "rank(s) [{ranks}] went non-finite at step {step} only through the gradient all-reduce; "
            "it began on rank {rank}",
            "rank [{ranks}] 在 step {step} 出现非有限值只是经由梯度 all-reduce 传过来的；源头在 rank {rank}",
        ),
        "distributed.screened_later": (
            "on the other {n} rank(s) [{ranks}] the values measured locally (loss, batch, the rank's own "
            "gradient) were still finite at step {step}: what went non-finite there came from rank {rank} "
            "through the gradient reduction",
            "其余 {n} 个 rank [{ranks}] 在 step {step} 本地测得的值（loss、batch、本 rank 自己的梯度）仍是有限的："
            "那里出现的非有限值是经由梯度规约从 rank {rank} 传过去的",
        ),
        "distributed.screened_note": (
            "{n} ranks: every rank's log was screened for values that went non-finite locally, and ranks "
            "[{read}] were read and checked in full (the first and last rank, and where non-finite values "
            "began first); the other {others} share their weights and tell the same training story",
            "{n} 个 rank：每个 rank 的日志都筛查了本地出现的非有限值，完整读取并检查的是 rank [{read}]"
            "（第一个和最后一个 rank，以及最早出现非有限值的 rank）；其余 {others} 个 rank 共享同一份权重，训练过程相同",
        ),
        "distributed.also_on_ranks": (
            "also seen later or at the same step on rank(s) [{ranks}]",
            "在 rank [{ranks}] 上也出现了（同一 step 或更晚）",
        ),
    }
)

TEMPLATES.update(
    {
        "distributed.replay_skipped_fsdp1": (
            "replay not run: an FSDP1 model's forward gathers its parameters from every rank, so a replay "
            "on one rank would wait for peers that are not replaying; the live localisation (batch check, "
            "first non-finite layer forward and backward) ran on every rank",
            "未运行 replay：FSDP1 模型的前向会从所有 rank 收集参数，只在一个 rank 上 replay 会一直等待不参与 "
            "replay 的其他 rank；在线定位（batch 检查、前向和反向中第一个出现非有限值的层）已在每个 rank 上运行",
        ),
        "distributed.replay_skipped_tp": (
            "replay not run: a tensor-parallel model's forward exchanges activations between ranks, so a "
            "replay on one rank would wait for peers that are not replaying; the live localisation (batch "
            "check, first non-finite layer forward and backward, the rank it began on) ran on every rank",
            "未运行 replay：张量并行模型的前向会在 rank 之间交换激活值，只在一个 rank 上 replay 会一直等待不参与 "
            "replay 的其他 rank；在线定位（batch 检查、前向和反向中第一个出现非有限值的层、最先出错的 rank）已在每个 rank 上运行",
        ),
    }
)

TEMPLATES.update(
    {
        "distributed.deepspeed_disabled": (
            "lossdoctor: DeepSpeed probe disabled after an internal error: {error}",
            "lossdoctor：DeepSpeed 探针 因内部错误被停用：{error}",
        ),
        "distributed.local_grads_disabled": (
            "lossdoctor: local gradient probe disabled after an internal error: {error}",
            "lossdoctor：本 rank 梯度 probe 因内部错误被停用：{error}",
        ),
    }
)

TEMPLATES.update(
    {
        "distributed.replay_skipped_pp_sharded": (
            "replay not run: this pipeline stage's parameters are DTensors (PP with TP or FSDP2), so its forward "
            "exchanges tensors with the other ranks of its mesh and a replay on one rank would wait for peers that "
            "are not replaying; the live localisation (first non-finite layer forward and backward, the stage it "
            "began on) ran on every stage",
            "未运行 replay：该流水线 stage 的参数是 DTensor（PP 与 TP 或 FSDP2 组合），它的前向要和网格中的其他 rank "
            "交换张量，只在一个 rank 上 replay 会一直等待并未重放的对端；在线定位（前向和反向中第一个出现非有限值的层、"
            "最先出错的 stage）已在每个 stage 上运行",
        ),
        "distributed.began_on_stage": (
            "it began on rank {rank}, pipeline stage {stage} of {stages} (mesh coordinate {coordinate}), "
            "first in layer {layer} of that stage",
            "它始于 rank {rank}，流水线 stage {stage}（共 {stages} 个，网格坐标 {coordinate}），"
            "该 stage 内第一个出错的层是 {layer}",
        ),
        "distributed.began_on_coordinate": (
            "it began on rank {rank} (mesh coordinate {coordinate}), first in layer {layer} on that rank",
            "它始于 rank {rank}（网格坐标 {coordinate}），该 rank 上第一个出错的层是 {layer}",
        ),
        "distributed.echoed_pp": (
            "rank(s) [{ranks}] (pipeline stage(s) [{stages}]) went non-finite at step {step} only through "
            "what the pipeline passes between stages (activations forward, gradients backward); it began "
            "on rank {rank}",
            "rank [{ranks}]（流水线 stage [{stages}]）在 step {step} 出现非有限值只是经由 stage 之间传递的数据"
            "（前向的激活值、反向的梯度）传过来的；源头在 rank {rank}",
        ),
    }
)
