"""What the framework callbacks and the distributed probes say in the log (integrations/*,
signals/distributed.py)."""

TEMPLATES = {
    "integrations.no_optimizer": ("lossdoctor: the trainer has no optimizer; not watching this run",
                                  "lossdoctor：trainer 没有 optimizer；不监控这次训练"),
    "integrations.first_optimizer": ("lossdoctor: watching the first of {n} optimizers",
                                     "lossdoctor：只监控 {n} 个 optimizer 中的第一个"),
    "integrations.no_model": ("lossdoctor: the Trainer passed no model/optimizer; not watching this run",
                              "lossdoctor：Trainer 没有传入 model/optimizer；不监控这次训练"),
    "integrations.cannot_start": ("lossdoctor: could not start watching: {error}", "lossdoctor：无法开始监控：{error}"),
    "integrations.ddp.hook_taken": (
        "lossdoctor: DDP already has a communication hook; recording local gradient norms only",
        "lossdoctor：DDP 已经注册了 communication hook；只记录本 rank 的梯度范数"),
    "integrations.ddp.no_hook": (
        "lossdoctor: could not add a DDP communication hook ({error}); local gradient norms only",
        "lossdoctor：无法添加 DDP communication hook（{error}）；只记录本 rank 的梯度范数"),
    "integrations.ddp.disabled": ("lossdoctor: DDP probe disabled after an internal error: {error}",
                                  "lossdoctor：DDP probe 因内部错误被停用：{error}"),
    "integrations.fsdp.disabled": ("lossdoctor: FSDP probe disabled: {error}", "lossdoctor：FSDP probe 已停用：{error}"),
    "integrations.fsdp.allreduce": (
        "lossdoctor: FSDP gradient-norm all-reduce failed; totals off: {error}",
        "lossdoctor：FSDP 梯度范数的 all-reduce 失败；不再计算跨 rank 总量：{error}"),
}
