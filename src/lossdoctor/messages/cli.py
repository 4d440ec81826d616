"""The command line's own lines on stderr (the reports' sentences are the other tables')."""

TEMPLATES = {
    "cli.error": ("lossdoctor: error: {error}", "lossdoctor：错误：{error}"),
    "cli.no_command": (
        "no command given: lossdoctor diagnose PATH (or verify, demo, check; lossdoctor --help lists them)",
        "没有给出命令：`lossdoctor diagnose PATH`（或者 verify、demo、check；`lossdoctor --help` 会列出全部命令）",
    ),
    "cli.interrupted": ("lossdoctor: interrupted", "lossdoctor：已中断"),
    "cli.internal_error": (
        " ({what}); set LOSSDOCTOR_DEBUG=1 for the traceback, and please report it",
        "（{what}）；设置 LOSSDOCTOR_DEBUG=1 可以看到 traceback，请把这个问题报告给我们",
    ),
    "cli.warning": ("lossdoctor: warning: {note}", "lossdoctor：警告：{note}"),
    "cli.stdout": ("the report to standard output", "报告到标准输出"),
    "cli.pipe_closed": (
        "cannot write {where}: the reading end of the pipe was closed",
        "无法写入{where}：管道的读取端已经关闭",
    ),
    "cli.cannot_write": ("cannot write {where}: {error}", "无法写入{where}：{error}"),
    "cli.output_is_input": (
        "refusing to write the report to {out}: it is the input {input} (the log would be "
        "replaced by the report); choose another -o file",
        "拒绝把报告写到 {out}：它就是输入 {input}（日志会被报告覆盖）；请用 -o 指定另一个文件",
    ),
    "cli.output_in_input": (
        "refusing to write the report to {out}: it is inside {input}, the run directory being "
        "read; choose a path outside it",
        "拒绝把报告写到 {out}：它位于正在读取的运行目录 {input} 之内；请选择该目录之外的路径",
    ),
    "cli.stdin_cut": (
        "standard input was cut after its first {mib} MiB (the cap of `diagnose -`); the rest "
        "was not read: save the log to a file and pass its path to read all of it",
        "标准输入只读取了前 {mib} MiB（`diagnose -` 的上限），其余部分没有读取：把日志保存为文件并传入"
        "其路径即可读取全部内容",
    ),
    "cli.unknown_fault": (
        "lossdoctor: unknown fault {name}; `lossdoctor demo --fault list` lists them",
        "lossdoctor：没有名为 {name} 的故障；`lossdoctor demo --fault list` 会列出全部故障",
    ),
    "cli.check_needs_torch": (
        "lossdoctor: check needs torch (pip install torch)",
        "lossdoctor：check 需要 torch（`pip install torch`）",
    ),
    "cli.check_forward_failed": (
        "lossdoctor: {path}: the model's forward on the first batch raised {error}; the checks that need it did "
        'not run (status inconclusive). Fix the batch or the model, or return "forward": False to skip it',
        "lossdoctor：{path}：模型在第一个 batch 上的前向抛出了 {error}；需要前向的检查没有运行（状态为 inconclusive）。"
        '请修正 batch 或模型，或在配置中返回 "forward": False 以跳过前向',
    ),
    "cli.setup_no_file": ("{path}: no such file", "{path}：文件不存在"),
    "cli.setup_no_function": (
        "{path}: defines no function {want} returning the objects to check",
        "{path}：没有定义返回待检查对象的函数 {want}",
    ),
    "cli.setup_raised": ("{path}: {fn}() raised {error}", "{path}：{fn}() 抛出了 {error}"),
    "cli.setup_not_dict": (
        "{path}: {fn}() must return a dict of check arguments ({args}, ...), not {type}",
        "{path}：{fn}() 必须返回 check 参数的 dict（{args}, ...），而不是 {type}",
    ),
    "cli.setup_unknown_args": (
        "{path}: {fn}() returned unknown argument(s) {unknown}; known: {known}",
        "{path}：{fn}() 返回了未知的参数 {unknown}；可用的参数：{known}",
    ),
    "cli.setup_not_python": ("{path}: not a Python file", "{path}：不是 Python 文件"),
    "cli.setup_failed_to_load": ("{path}: failed to load ({error})", "{path}：加载失败（{error}）"),
    "cli.demo_healthy": ("healthy", "健康"),
    "cli.demo_fault": ("fault  ", "故障"),
    "cli.demo_default": ("  (default)", "（默认）"),
    "cli.demo_start": ("lossdoctor demo: {name} - {description}", "lossdoctor demo：{name} - {description}"),
    "cli.demo_trained": (
        "lossdoctor demo: trained in {seconds:.1f}s; run directory {log_dir}",
        "lossdoctor demo：训练用时 {seconds:.1f} 秒；运行目录 {log_dir}",
    ),
    "cli.demo_again": (
        "(the same diagnosis again: lossdoctor diagnose {log_dir})",
        "（再次查看同一诊断：lossdoctor diagnose {log_dir}）",
    ),
    # lossdoctor verify RUN_DIR (cli/verify_command.py)
    "cli.verify.not_dir": (
        "{path}: no such directory (verify reads a run directory written by lossdoctor.watch)",
        "{path}：目录不存在（verify 读取的是 lossdoctor.watch 写出的运行目录）",
    ),
    "cli.verify.not_run_dir": (
        "{path}: not a lossdoctor run directory (no meta.json or steps.jsonl)",
        "{path}：不是 lossdoctor 的运行目录（没有 meta.json 或 steps.jsonl）",
    ),
    "cli.verify.unreadable": (
        "{path}: cannot read the incident records ({error})",
        "{path}：无法读取事故记录（{error}）",
    ),
    "cli.verify.no_incidents": (
        "{path}: no incidents (incidents/*.json), so there is no fix to verify: watch(..., replay_fn=...) "
        "writes one when a NaN/Inf or a loss spike is replayed",
        "{path}：没有事故（incidents/*.json），所以没有需要验证的修复：watch(..., replay_fn=...) 在重放 "
        "NaN/Inf 或 loss 尖峰时才会写出事故记录",
    ),
    "cli.verify.no_verification": (
        "{path}: none of its {n} incident record(s) holds a verification: it runs when watch(..., replay_fn=...) "
        "replays an incident with verify=True (the default); re-running it needs the snapshots and batches, "
        "which a run directory does not keep (mon.verify_fixes() before mon.close())",
        "{path}：{n} 条事故记录里都没有验证结果：只有 watch(..., replay_fn=...) 在 verify=True（默认）时重放事故才会验证；"
        "重新验证需要快照和 batch，运行目录里不保存它们（请在 mon.close() 之前调用 mon.verify_fixes()）",
    ),
    "cli.verify.head": (
        "`lossdoctor verify` {path}: {n} incident(s) whose fixes were replayed",
        "`lossdoctor verify` {path}：{n} 个事故的修复经过了重放验证",
    ),
    "cli.verify.incident": ("incident at step {step} ({trigger})", "第 {step} 步的事故（{trigger}）"),
    "cli.verify.no_fix_checked": ("no fix was checked", "没有验证任何修复"),
    # lossdoctor run -- COMMAND (cli/run.py)
    "cli.run.no_command": (
        "lossdoctor run needs a command after --: lossdoctor run -- python train.py",
        "`lossdoctor run` 需要在 -- 之后给出命令：`lossdoctor run -- python train.py`",
    ),
    "cli.run.not_found": ("{program}: command not found", "{program}：找不到这个命令"),
    "cli.run.no_script": ("{path}: no such file", "{path}：文件不存在"),
    "cli.run.nothing": (
        "lossdoctor run: nothing was recorded in {log_dir}: no optimizer step of torch was seen in the process "
        "and its console (console.log there) held no training numbers",
        "`lossdoctor run`：{log_dir} 里没有记录：进程里没有看到 torch 的 optimizer step，"
        "它的控制台输出（该目录下的 console.log）里也没有训练数值",
    ),
    "cli.run.from_console": (
        "nothing in the process could be hooked (no optimizer step of torch was seen): this diagnosis is read "
        "from the command's console output ({file} in the run directory), without per-layer statistics or replay",
        "进程里没有可挂接的部分（没有看到 torch 的 optimizer step）：本诊断读取的是命令的控制台输出（运行目录下的 "
        "{file}），没有逐层统计，也无法回放",
    ),
    "cli.run.console_alert": (" [read from the console]", "（读自控制台输出）"),
    "cli.run.unreadable": (
        "lossdoctor run: cannot read the run directory {log_dir}: {error}",
        "`lossdoctor run`：无法读取运行目录 {log_dir}：{error}",
    ),
    "cli.run.where_console": (
        "lossdoctor run: run directory {log_dir}, its console in {console} (again: lossdoctor diagnose {console})",
        "`lossdoctor run`：运行目录 {log_dir}，控制台输出在 {console}（再次查看：`lossdoctor diagnose {console}`）",
    ),
    "cli.run.where": (
        "lossdoctor run: run directory {log_dir} (again: lossdoctor diagnose {log_dir})",
        "`lossdoctor run`：运行目录 {log_dir}（再次查看：`lossdoctor diagnose {log_dir}`）",
    ),
    "cli.examples.diagnose": (
        "examples:\n"
        "  lossdoctor diagnose lossdoctor_runs/2024-05-01_12-00-00\n"
        "  lossdoctor diagnose out/trainer_state.json --format json\n"
        "  lossdoctor diagnose train.log --format html -o report.html\n"
        "  lossdoctor diagnose run_lr3e-2 run_lr3e-3            (compare runs side by side)\n"
        "  lossdoctor diagnose lightning_logs --compare --format html -o compare.html\n"
        "  python train.py 2>&1 | lossdoctor diagnose -\n"
        "environment: NO_COLOR=1 plain text; COLUMNS=N text width",
        "示例：\n"
        "  lossdoctor diagnose lossdoctor_runs/2024-05-01_12-00-00\n"
        "  lossdoctor diagnose out/trainer_state.json --format json\n"
        "  lossdoctor diagnose train.log --format html -o report.html\n"
        "  lossdoctor diagnose run_lr3e-2 run_lr3e-3            （并排比较几个运行）\n"
        "  lossdoctor diagnose lightning_logs --compare --format html -o compare.html\n"
        "  python train.py 2>&1 | lossdoctor diagnose -\n"
        "环境变量：NO_COLOR=1 不用颜色；COLUMNS=N 文本宽度",
    ),
    "cli.examples.verify": (
        "examples:\n"
        "  lossdoctor verify lossdoctor_runs/2024-05-01_12-00-00\n"
        "  lossdoctor verify RUN_DIR --format json --fail-on unverified",
        "示例：\n"
        "  `lossdoctor verify lossdoctor_runs/2024-05-01_12-00-00`\n"
        "  `lossdoctor verify RUN_DIR --format json --fail-on unverified`",
    ),
    "cli.examples.check": (
        "examples:\n"
        "  lossdoctor check --config setup.py\n"
        "  lossdoctor check --config setup.py:make_everything --total-steps 1000 --fail-on critical",
        "示例：\n"
        "  `lossdoctor check --config setup.py`\n"
        "  `lossdoctor check --config setup.py:make_everything --total-steps 1000 --fail-on critical`",
    ),
    "cli.examples.completion": (
        "examples:\n"
        "  lossdoctor completion bash > ~/.local/share/bash-completion/completions/lossdoctor\n"
        "  lossdoctor completion zsh > ~/.zfunc/_lossdoctor",
        "示例：\n"
        "  `lossdoctor completion bash > ~/.local/share/bash-completion/completions/lossdoctor`\n"
        "  `lossdoctor completion zsh > ~/.zfunc/_lossdoctor`",
    ),
    "cli.compare.too_few": (
        "{path}: holds {n} run(s) that can be read; comparing needs two or more",
        "{path}：其中能读取的运行只有 {n} 个；比较至少需要两个",
    ),
    "cli.compare.stdin": (
        "'-' (standard input) cannot be compared with other runs; give files or folders",
        "'-'（标准输入）不能和其他运行比较；请给出文件或文件夹",
    ),
    "cli.compare.no_run": (
        "--run selects one run of a store; it cannot be used when comparing runs",
        "--run 用来选择存储中的某一个运行；比较多个运行时不能使用",
    ),
    "cli.progress": ("reading {path}", "正在读取 {path}"),
}
