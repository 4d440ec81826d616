"""What the framework callbacks and the distributed probes say in the log (integrations/*,
signals/distributed.py)."""

TEMPLATES = {
    "integrations.no_optimizer": (
        "lossdoctor: the trainer has no optimizer; not watching this run",
        "lossdoctor：trainer 没有 optimizer；不监控这次训练",
    ),
    "integrations.first_optimizer": (
        "lossdoctor: watching the first of {n} optimizers",
        "lossdoctor：只监控 {n} 个 optimizer 中的第一个",
    ),
    "integrations.no_model": (
        "lossdoctor: the Trainer passed no model/optimizer; not watching this run",
        "lossdoctor：Trainer 没有传入 model/optimizer；不监控这次训练",
    ),
    "integrations.orphan_closed": (
        "lossdoctor: closed the monitor of an earlier run on this model that ended without on_train_end "
        "(an exception, e.g. Ctrl-C): its hooks are removed, its run log is complete up to its last step",
        "lossdoctor：关闭了这个模型上一次未调用 on_train_end 就结束的运行（异常，比如 Ctrl-C）的监控："
        "它的 hook 已移除，运行日志完整记录到其最后一步",
    ),
    "integrations.cannot_start": ("lossdoctor: could not start watching: {error}", "lossdoctor：无法开始监控：{error}"),
    "integrations.ddp.hook_taken": (
        "lossdoctor: DDP already has a communication hook; recording local gradient norms only",
        "lossdoctor：DDP 已经注册了 通信 hook；只记录本 rank 的梯度范数",
    ),
    "integrations.ddp.no_hook": (
        "lossdoctor: could not add a DDP communication hook ({error}); local gradient norms only",
        "lossdoctor：无法添加 DDP 通信 hook（{error}）；只记录本 rank 的梯度范数",
    ),
    "integrations.ddp.disabled": (
        "lossdoctor: DDP probe disabled after an internal error: {error}",
        "lossdoctor：DDP 探针 因内部错误被停用：{error}",
    ),
    "integrations.fsdp.disabled": ("lossdoctor: FSDP 探针 disabled: {error}", "lossdoctor：FSDP 探针 已停用：{error}"),
    "integrations.fsdp.allreduce": (
        "lossdoctor: FSDP gradient-norm all-reduce failed; totals off: {error}",
        "lossdoctor：FSDP 梯度范数的 all-reduce 失败；不再计算跨 rank 总量：{error}",
    ),
    "integrations.mesh_unsupported": (
        "lossdoctor: the gradient norm is this rank's shard only (no total over the device mesh: {error})",
        "lossdoctor：梯度范数只是本 rank 的分片（无法在设备网格上求总量：{error}）",
    ),
    "integrations.pp_sharded_stage": (
        "lossdoctor: this pipeline stage's parameters are DTensors (PP with TP or FSDP2): the gradient norm "
        "is this rank's own, not the total over the stages and shards",
        "lossdoctor：该流水线 stage 的参数是 DTensor（PP 与 TP 或 FSDP2 组合）：梯度范数只是本 rank 自己的，"
        "不是所有 stage 和分片的总量",
    ),
    "integrations.loss_not_backpropagated": (
        "{trainer} backpropagates a loss it computes itself, not the model's outputs.loss: the weight of each "
        "micro-batch in the objective (loss_weight) cannot be measured, so the gradient-accumulation normalisation "
        "check (grad_accum_normalization) did not run",
        "{trainer} 反向传播的是它自己算的 loss，而不是模型的 outputs.loss：测不到每个 micro-batch 在目标函数里的权重"
        "（loss_weight），所以梯度累积归一化的检查（grad_accum_normalization）没有运行",
    ),
    # where findings go besides stderr (integrations/sinks.py)
    "integrations.sink_failed": (
        "lossdoctor: note: could not send findings to {part} ({error}); training goes on",
        "lossdoctor：提示：无法把诊断结果发送到 {part}（{error}）；训练照常进行",
    ),
    # lossdoctor run: the hooks inside the training process (integrations/attach.py)
    "integrations.attach.failed": (
        "lossdoctor: note: could not watch this run ({part}: {error}); the script runs on unwatched",
        "lossdoctor：提示：无法监控这次训练（{part}：{error}）；脚本照常运行，不再监控",
    ),
    "integrations.attach.no_model": (
        "lossdoctor: note: an optimizer stepped, but no module called with gradients holds its parameters; "
        "not watching this run",
        "lossdoctor：提示：optimizer 执行了 step，但没有哪个在梯度模式下调用过的 module 持有它的参数；不监控这次训练",
    ),
    "integrations.attach.pipeline_engine": (
        "lossdoctor: note: a DeepSpeed pipeline engine (train_batch) is not watched by lossdoctor run yet; "
        "the script runs on unwatched",
        "lossdoctor：提示：`lossdoctor run` 暂不监控 DeepSpeed 的流水线 engine（`train_batch`）；脚本照常运行，不监控",
    ),
}
