"""The command line's own lines on stderr (the reports' sentences are the other tables')."""

TEMPLATES = {
    "cli.demo_start": ("lossdoctor demo: {name} - {description}", "lossdoctor demo：{name} - {description}"),
    "cli.demo_trained": ("lossdoctor demo: trained in {seconds:.1f}s; run directory {log_dir}",
                         "lossdoctor demo：训练用时 {seconds:.1f} 秒；运行目录 {log_dir}"),
    "cli.demo_again": ("(the same diagnosis again: lossdoctor diagnose {log_dir})",
                       "（再次查看同一诊断：lossdoctor diagnose {log_dir}）"),
}
