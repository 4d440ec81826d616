"""The log readers' notes (sources/*.py): what was read from where, what the log lacks, what could
not be read. File, column, tag and metric names are values (shown as they are)."""

SIGNALS = {
    "signal.loss": ("the training loss", "训练 loss"),
    "signal.grad_norm": ("the gradient norm", "grad norm"),
    "signal.grad_norm_before_clipping": ("the gradient norm before clipping", "裁剪前的 grad norm"),
    "signal.lr": ("the learning rate", "学习率"),
    "signal.scale": ("the loss scale", "loss scale"),
    "signal.fp16_scale": ("the fp16 loss scale", "fp16 的 loss scale"),
    "signal.skipped": ("skipped optimizer steps", "被跳过的优化器 step"),
    "signal.hf_grad_norm": ("grad_norm (transformers >= 4.38 logs it)", "grad_norm（transformers >= 4.38 会记录）"),
    "word.a_and_b": ("{a} and {b}", "{a}、{b}"),
}

SOURCES = {
    "sources.settings_skipped": (
        "{file} beside the log was not read ({why}): its settings are not used",
        "没有读取日志旁边的 {file}（{why}）：其中的设置没有使用",
    ),
    "sources.settings_read": ("read the optimizer/LR settings from {files}", "已从 {files} 读取优化器/LR 设置"),
    "source.console_dir_newest": (
        "read the newest console log in this directory, {chosen}; {n} more here "
        "({others}): pass a file to read another",
        "读取了该目录下最新的控制台日志 {chosen}；这里还有 {n} 个（{others}），要读别的请直接传文件路径",
    ),
    "source.record_unreadable": ("{name} is unreadable ({error}); left out", "{name} 无法读取（{error}）；已略过"),
    "source.json_too_deep": (
        "{name}: values nested deeper than {limit} levels were cut (read as null)",
        "{name}：嵌套超过 {limit} 层的值已被截去（按 null 读取）",
    ),
    "source.not_in_log": ("not in this log: {signals}", "这份日志里没有：{signals}"),
    "source.hf_truncated": (
        "{name} is truncated (the run stopped while saving?): read {n} log entries up to step {step}",
        "{name} 被截断了（训练在保存时中止了？）：读取了到第 {step} 步为止的 {n} 条日志记录",
    ),
    "source.json_truncated": (
        "{name} is truncated or damaged at character {pos}: read the {n} entries before it",
        "{name} 在第 {pos} 个字符处被截断或损坏：读取了它之前的 {n} 条记录",
    ),
    "source.rundir_versions": (
        "{path} holds {n} runs ({names}); this report reads {chosen}; `--run NAME` reads another",
        "{path} 中有 {n} 次运行（{names}）；本报告读取的是 {chosen}；用 `--run NAME` 读取其他运行",
    ),
    "source.rundir_no_version": (
        "{path}: no run {want} here (runs: {names})",
        "{path}：这里没有运行 {want}（已有的运行：{names}）",
    ),
    "source.tb_runs": (
        "{n} TensorBoard runs here; read the newest, {chosen} (others: {others}; point at one to diagnose it)",
        "这里有 {n} 个 TensorBoard 运行；读取了最新的 {chosen}（其他：{others}；要诊断其他运行请指定它）",
    ),
    "source.mlflow_db_run": ("{db} run {id}", "{db} 的运行 {id}"),
    "source.mlflow_run": ("run {id}", "运行 {id}"),
    "source.huge_ints": (
        "ignored {n} setting(s) whose integer value is beyond any float",
        "忽略了 {n} 个整数值超出浮点范围的配置项",
    ),
    "source.coarse_averaged": (
        "the log holds an average over {n} steps: a spike or blow-up inside an interval is smoothed out, and a "
        "finding's step is only known to within {n} steps; log every step to localise it",
        "日志里每个点是 {n} 步的平均：区间内的尖峰或崩溃会被平滑掉，诊断出的步也只能精确到 {n} 步以内；每步都记录"
        "才能定位",
    ),
    "source.thinned": (
        "the log has {n} rows, more than are held in memory: {kept} were kept (the first and last, every "
        "non-finite or outlying point and its neighbours, and one row in {stride} elsewhere)",
        "日志有 {n} 行，超过内存中保留的上限：保留了 {kept} 行（开头和结尾、每个非有限值或离群点及其前后，其余每 {stride} "
        "行保留一行）",
    ),
    "source.coarse_sampled": (
        "the log holds one point every {n} steps: a spike or blow-up inside an interval is not seen, and a "
        "finding's step is only known to within {n} steps; log every step to localise it",
        "日志每 {n} 步才有一个点：区间内的尖峰或崩溃看不到，诊断出的步也只能精确到 {n} 步以内；每步都记录才能定位",
    ),
    "source.hf_most_complete": (
        "read {file} (the most complete of {n} {name} files)",
        "读取了 {file}（{n} 个 {name} 文件中最完整的一个）",
    ),
    "source.hf_read": (
        "{what}: read {n} log entries (loss, grad_norm, learning_rate)",
        "{what}：读取了 {n} 条日志记录（loss、grad_norm、learning_rate）",
    ),
    "source.hf_no_scale": (
        "not in a Trainer log: the fp16 loss scale and skipped steps (add "
        "lossdoctor.integrations.transformers.LossDoctorCallback to record them)",
        "Trainer 日志里没有 fp16 的 loss scale 和被跳过的 step（加上 "
        "lossdoctor.integrations.transformers.LossDoctorCallback 就能记录）",
    ),
    "source.hf_filtered_nan": (
        "loss logged as 0.0 with a non-finite grad norm from step {step} on: read as NaN (the Trainer's "
        "logging_nan_inf_filter, on by default, logs an interval of NaN losses as 0)",
        "从第 {step} 步起 loss 记为 0.0 而 grad norm 是非有限值：按 NaN 读取（Trainer 默认开启的 "
        "logging_nan_inf_filter 会把全是 NaN 的区间的 loss 记成 0）",
    ),
    "source.lightning_runs": (
        "{n} Lightning runs here; read {chosen} (the latest version; point at another version_N to diagnose it)",
        "这里有 {n} 个 Lightning 运行；读取了 {chosen}（最新的版本；要诊断其他版本请指定对应的 version_N）",
    ),
    "source.lightning_log_grad_norm": (
        "log the gradient norm to enable the gradient checks: in on_before_optimizer_step, "
        "self.log_dict(lightning.pytorch.utilities.grad_norm(self, norm_type=2))",
        "记录 grad norm 才能做梯度相关的检查：在 on_before_optimizer_step 中调用 "
        "self.log_dict(lightning.pytorch.utilities.grad_norm(self, norm_type=2))",
    ),
    "source.mlflow_stopped": (
        "metric {name}: stopped at line {line}, which is not '<timestamp> <value> <step>' ({text}); read the {n} "
        "value(s) before it",
        "指标 {name}：在第 {line} 行停止读取，该行不是 '<timestamp> <value> <step>' 格式（{text}）；读取了它之前的 "
        "{n} 个值",
    ),
    "source.mlflow_no_steps": (
        "metric {name} has no steps (MLflow 0.x); numbered by line",
        "指标 {name} 没有 step（MLflow 0.x）；按行号编号",
    ),
    "source.mlflow_hint_dir": ("point at a run directory to diagnose another", "要诊断其他运行，请指定对应的运行目录"),
    "source.mlflow_hint_select": ("`--run ID` reads another", "用 `--run ID` 读取其他运行"),
    "source.mlflow_runs": (
        "{n} MLflow runs here; read the newest that logged a training metric, {chosen} (others: {others}; {hint})",
        "这里有 {n} 个 MLflow 运行；读取了记录了训练指标的最新一个 {chosen}（其他：{others}；{hint}）",
    ),
    "source.mlflow_read": ("{what}: read MLflow metrics {used}", "{what}：读取了 MLflow 指标 {used}"),
    "source.mlflow_unstepped": (
        "metric {name} was logged without step= (all at step {step}): numbered in logging order",
        "指标 {name} 记录时没有传 step=（全都在第 {step} 步）：按记录顺序编号",
    ),
    "source.mlflow_status": ("MLflow marks this run {status}", "MLflow 把这个运行标记为 {status}"),
    "source.mlflow_running": (
        "MLflow marks this run RUNNING: still training, or killed before it could end the run",
        "MLflow 把这个运行标记为 RUNNING：还在训练，或者在结束运行之前就被终止了",
    ),
    "source.mlflow_also_file_store": (
        "this folder also holds an MLflow file store (mlruns/); read {db}, point at mlruns/ to read that instead",
        "这个目录里还有一个 MLflow 文件存储（mlruns/）；读取的是 {db}，要读取前者请指定 mlruns/",
    ),
    "source.not_numbers": ("{name}: ignored {n} value(s) that are not numbers", "{name}：忽略了 {n} 个不是数字的值"),
    "source.step_column_empty": (
        "column {column} holds no step numbers; rows numbered from 0",
        "列 {column} 中没有 step 数值；按行从 0 开始编号",
    ),
    "source.eval_rows": (
        "{n} rows an evaluation wrote (`mode: val`) were left out of the training series",
        "{n} 行由验证阶段写入（`mode: val`），没有计入训练序列",
    ),
    "source.counted_on_epochs": (
        "{column} starts again with each epoch ({epoch}): counted on from the epochs before",
        "{column} 在每个 epoch（{epoch}）重新计数：按之前的 epoch 累加",
    ),
    "source.no_step_column": (
        "no step column (looked for step, global_step, iteration, _step); rows numbered from 0",
        "没有 step 列（找过 step、global_step、iteration、_step）；按行从 0 开始编号",
    ),
    "source.no_header": (
        "{what}: no header row: read {n} rows of {width} unnamed numbers",
        "{what}：没有表头：读取了 {n} 行、每行 {width} 个未命名的数",
    ),
    "source.first_column_step": (
        "the first column counts up in whole numbers: read as the step",
        "第一列是递增的整数：当作 step 读取",
    ),
    "source.read_columns": ("{what}: read {columns}", "{what}：读取了 {columns}"),
    "source.too_many_columns": (
        "{name}: {n} columns past the {max}th were ignored",
        "{name}：第 {max} 列之后的 {n} 列被忽略了",
    ),
    "source.ragged_rows": (
        "{name}: {n} row(s) with a wrong number of fields were padded or cut",
        "{name}：{n} 行的字段数不对，已补齐或截断",
    ),
    "source.wandb_export_runs": (
        "the export holds {n} runs; diagnosed {name} (export one run per file to diagnose the others)",
        "导出文件里有 {n} 个运行；诊断的是 {name}（每个文件只导出一个运行，才能诊断其他运行）",
    ),
    "source.the_last_line": ("the last line", "最后一行"),
    "source.n_lines": ("{n} line(s)", "{n} 行"),
    "source.unreadable_lines": (
        "{name}: skipped {where} that could not be read (a run killed mid-write leaves one)",
        "{name}：{where}无法读取，已跳过（训练在写入时被终止就会留下这样的行）",
    ),
    "source.tb_bad_record": (
        "{name}: {n} record(s) fail their CRC-32C check (damaged on disk or in transfer; the first at byte {pos}): "
        "their values were not read",
        "{name}：{n} 条记录未通过 CRC-32C 校验（在磁盘上或传输中损坏；第一条在第 {pos} 字节处）：这些记录中的值没有读取",
    ),
    "source.tb_bad_length": (
        "{name}: the length of the record at byte {pos} fails its CRC-32C check: the file is damaged there, and "
        "nothing after it was read",
        "{name}：第 {pos} 字节处记录的长度未通过 CRC-32C 校验：文件在此处损坏，其后的内容都没有读取",
    ),
    "source.tb_crc_unchecked": (
        "{name}: record checksums not checked (pip install google-crc32c to check them): a damaged record would be "
        "read as data",
        "{name}：没有校验记录的校验和（`pip install google-crc32c` 后即可校验）：损坏的记录会被当作数据读取",
    ),
    "source.tb_torn": (
        "{name}: stopped at a torn record at byte {pos} (the writer was still writing or was killed)",
        "{name}：在第 {pos} 字节处遇到不完整的记录，停止读取（写入方还在写，或者被终止了）",
    ),
    "source.tb_damaged": (
        "{name}: stopped reading at a damaged record after {n} values",
        "{name}：读取 {n} 个值之后遇到损坏的记录，停止读取",
    ),
    "source.tb_read": ("{what}: read TensorBoard tags {tags}", "{what}：读取了 TensorBoard 标签 {tags}"),
    "source.tb_deepspeed_samples": (
        "DeepSpeed's monitor logs against samples, not optimizer steps: finding steps are sample counts",
        "DeepSpeed 的 monitor 按样本数而不是优化器 step 记录：诊断中的步数是样本数",
    ),
    "source.wandb_torn": (
        "{name}: stopped at a torn record at byte {pos} (the run was still writing or was killed)",
        "{name}：在第 {pos} 字节处遇到不完整的记录，停止读取（运行还在写入，或者被终止了）",
    ),
    "source.wandb_bad_checksum": (
        "{name}: stopped at a record with a bad checksum at byte {pos}",
        "{name}：在第 {pos} 字节处遇到校验和错误的记录，停止读取",
    ),
    "source.wandb_runs": (
        "{n} W&B runs here; read the newest, {chosen} (point at a run directory to diagnose another)",
        "这里有 {n} 个 W&B 运行；读取了最新的 {chosen}（要诊断其他运行，请指定对应的运行目录）",
    ),
}

CONSOLE = {
    "console.kind_megatron": ("Megatron iteration lines", "Megatron iteration 行"),
    "console.kind_ds_step": ("DeepSpeed step= lines", "DeepSpeed step= 行"),
    "console.kind_ds_overflow": ("DeepSpeed OVERFLOW lines", "DeepSpeed OVERFLOW 行"),
    "console.kind_grad_overflow": ("Grad overflow lines", "Grad overflow 行"),
    "console.kind_hf": ("HF Trainer dict lines", "HF Trainer 字典行"),
    "console.kind_tqdm": ("tqdm bars with metrics", "带指标的 tqdm 进度条"),
    "console.kind_nanogpt": ("nanoGPT lines", "nanoGPT 行"),
    "console.kind_litgpt": ("litgpt lines", "litgpt 行"),
    "console.kind_mlx_lm": ("mlx-lm lines", "mlx-lm 行"),
    "console.kind_torchtitan": ("torchtitan lines", "torchtitan 行"),
    "console.kind_keras": ("Keras progress lines", "Keras 进度行"),
    "console.kind_composer": ("Composer metric blocks", "Composer 指标块"),
    "console.composer_rounded": (
        "{n} LR or gradient-norm values below {below} left out: Composer prints four decimals, too few to read "
        "them (log to W&B, MLflow or TensorBoard for the full values)",
        "{n} 个低于 {below} 的 LR 或 grad norm 值未读取：Composer 只打印四位小数，不足以读准（完整数值请看 W&B、"
        "MLflow 或 TensorBoard 的记录）",
    ),
    "console.kind_key_value": ("lines with a step and named metrics", "带 step 和具名指标的行"),
    "console.n_kind": ("{n} {kind}", "{n} 条 {kind}"),
    "console.nothing": ("nothing", "什么也没有"),
    "console.eval_dicts": ("{n} evaluation/summary dicts", "{n} 个评估/汇总字典"),
    "console.eval_lines": ("{n} evaluation lines", "{n} 条评估行"),
    "console.other_lines": ("{n} other lines", "{n} 条其他行"),
    "console.read": ("{what}: read {used}", "{what}：读取了 {used}"),
    "console.read_ignored": ("{what}: read {used}; {ignored} ignored", "{what}：读取了 {used}；忽略了 {ignored}"),
    "console.node_copies": (
        "{n} log dict(s) printed again, value for value, under another host or rank prefix: each node's copy "
        "of the record before it, read once",
        "{n} 条日志字典在另一个主机或 rank 前缀下被原样再次输出：是前一条记录在各节点上的副本，只读取一次",
    ),
    "console.printed_twice": (
        "{n} log dict(s) printed a second time by another logger (rounded, or with a field more) read as the "
        "record they repeat",
        "{n} 条由另一个日志器再次输出的日志字典（数值经过舍入，或多一个字段）按其重复的那条记录读取",
    ),
    "console.took_bar_counter": (
        "{n} logged line(s) without a step took the counter of the progress bar drawn with them",
        "{n} 条没有 step 的日志行用了同时输出的进度条上的计数",
    ),
    "console.placed_one_interval": (
        "{n} logged line(s) without a step or a progress bar after them were placed one logging interval after "
        "the previous one",
        "{n} 条既没有 step、后面也没有进度条的日志行，被放在上一条之后一个记录间隔的位置",
    ),
    "console.two_counters": (
        "{n} line(s) print two step counters (litgpt's `iter N step K`: micro-batch iterations and optimizer "
        "steps): the finer one is the step, so every micro-batch's loss is kept and a finding's step is an "
        "iteration number",
        "{n} 行输出了两个计数（litgpt 的 `iter N step K`：micro-batch 迭代数和优化器 step 数）：取更细的那个作为步数，"
        "所以每个 micro-batch 的 loss 都保留了，诊断中的步数是迭代数",
    ),
    "console.epoch_is_step": (
        "{n} logged line(s) carry an epoch and no finer counter: the epoch is the step, so a finding's step is "
        "an epoch number",
        "{n} 条日志行只有 epoch，没有更细的计数：把 epoch 当作步数，所以诊断中的步数是 epoch 数",
    ),
    "console.numbered": (
        "{n} logged line(s) carry no step and no progress bar was found: numbered 1, 2, 3... in order, so a "
        "finding's step is a line number, not the trainer's step",
        "{n} 条日志行没有 step，也没找到进度条：按顺序编号为 1、2、3……，所以诊断中的步数是行号，而不是训练的步数",
    ),
    "console.other_rank_overflows": (
        "{n} OVERFLOW line(s) of ranks other than rank {rank} were the same overflows printed by each rank: not "
        "counted again",
        "rank {rank} 以外的 {n} 条 OVERFLOW 行是各个 rank 各自打印的同一批溢出：不重复计数",
    ),
    "console.spaced": (
        "{n} logged line(s) above the first progress bar carry no step: placed every logging interval before the "
        "first step the bar gave (a guess)",
        "第一个进度条之前的 {n} 条日志行没有 step：从进度条给出的第一步往前，每隔一个记录间隔放一条（推测）",
    ),
    "console.spaced_leading": (
        "{n} logged line(s) before the first line with a step carry none (the excerpt may begin in the middle of "
        "a line): placed every logging interval before that first step (a guess)",
        "第一条带 step 的日志行之前有 {n} 条日志行没有 step（摘录可能从一行的中间开始）：从那个第一步往前，每隔一个记录间隔放一条（推测）",
    ),
    "console.deepspeed_overflow_placed": (
        "DeepSpeed prints no step with an OVERFLOW line: overflows were placed on the steps right after the last "
        "step counter (iteration line, step= line or bar)",
        "DeepSpeed 的 OVERFLOW 行不带 step：溢出被放在最近一个步数计数（iteration 行、step= 行或进度条）之后的步上",
    ),
    "console.overflow_placed_before": (
        "{n} OVERFLOW line(s) came before the first row and print no step: placed on the {n} steps right before "
        "the first row's step, one each (a guess)",
        "第一条数据行之前有 {n} 条 OVERFLOW 行，且不带 step：把它们放在第一行的 step 之前紧挨着的 {n} 个步上，每行一步（推测）",
    ),
    "console.megatron_nan": (
        "{n} Megatron iteration line(s) without `lm loss` read as a non-finite loss (Megatron prints the loss "
        "only when the interval's mean is > 0; a NaN mean is not)",
        "{n} 条没有 `lm loss` 的 Megatron iteration 行按非有限 loss 读取（Megatron 只在区间平均值 > 0 时打印 loss，"
        "NaN 的平均值不满足）",
    ),
    "console.megatron_skipped": (
        "{n} Megatron iteration line(s) without `lm loss` had every iteration skipped: read as skipped steps",
        "{n} 条没有 `lm loss` 的 Megatron iteration 行中每个迭代都被跳过了：按被跳过的 step 读取",
    ),
}

TEMPLATES = {**SIGNALS, **SOURCES, **CONSOLE}
