"""Console logs of tensor- and pipeline-parallel runs (`sources/parallel_logs.py`)."""

TEMPLATES = {
    "parallel_logs.read_rank_stage": (
        "a parallel run's console (mesh {mesh}): the metric lines read are rank {rank}'s (pipeline stage "
        "{stage}); rank(s) [{loss_ranks}] printed a loss; {others} metric line(s) of the other ranks were "
        "left out (a step's values are the same on the ranks that have them, and the other stages have none)",
        "并行训练的控制台日志（网格 {mesh}）：读取的是 rank {rank} 的指标行（流水线 stage {stage}）；"
        "打印了 loss 的 rank 为 [{loss_ranks}]；其他 rank 的 {others} 行指标未读取（有这些值的 rank 上同一 step 的值相同，"
        "其他 stage 没有 loss）",
    ),
    "parallel_logs.read_rank": (
        "a console of several ranks: the metric lines read are rank {rank}'s; rank(s) [{loss_ranks}] printed "
        "a loss; {others} metric line(s) of the other ranks were left out (a step's values are the same on "
        "the ranks that have them, and ranks without the last pipeline stage have none)",
        "多个 rank 的控制台日志：读取的是 rank {rank} 的指标行；打印了 loss 的 rank 为 [{loss_ranks}]；"
        "其他 rank 的 {others} 行指标未读取（有这些值的 rank 上同一 step 的值相同，不含最后一个流水线 stage 的 rank 没有 loss）",
    ),
    "parallel_logs.no_loss_rank": (
        "a console of several ranks: no rank printed a loss (rank(s) [{ranks}] printed only torchtitan's "
        "placeholder -1; the last pipeline stage's ranks were filtered out of the log: "
        "torchrun --local-ranks-filter)",
        "多个 rank 的控制台日志：没有 rank 打印真实 loss（rank [{ranks}] 只打印了 torchtitan 的占位值 -1；"
        "最后一个流水线 stage 的 rank 被过滤掉了：torchrun --local-ranks-filter）",
    ),
    "parallel_logs.placeholder": (
        "rank(s) [{ranks}] printed loss {value} at every step: torchtitan's placeholder on ranks without "
        "the last pipeline stage (they compute no loss), not a loss",
        "rank [{ranks}] 每个 step 打印的 loss 都是 {value}：这是 torchtitan 在不含最后一个流水线 stage 的 rank 上"
        "打印的占位值（这些 rank 不计算 loss），不是真实的 loss",
    ),
    "parallel_logs.first_nonfinite": (
        "the loss first went non-finite at step {step} on rank {rank} (rank(s) [{ranks}] printed a non-finite loss)",
        "loss 最早在 rank {rank} 的 step {step} 变为非有限值（打印了非有限 loss 的 rank：[{ranks}]）",
    ),
}
