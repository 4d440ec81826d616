"""`lossdoctor demo`: train a small model with a realistic fault on CPU, watch it, diagnose it."""

from __future__ import annotations

import argparse
import sys
import time
from datetime import datetime
from pathlib import Path


def cmd_demo(args: argparse.Namespace) -> int:
    from ..demo.scenarios import DEFAULT_FAULT, SCENARIOS
    from ..messages import render
    from ..messages.demo import description

    if args.fault == "list":
        from .output import chosen_lang

        lang = chosen_lang(args)
        width = max(len(n) for n in SCENARIOS)
        try:
            for name, sc in SCENARIOS.items():
                tag = render("cli.demo_healthy" if not sc.expect else "cli.demo_fault", {}, lang)
                default = render("cli.demo_default", {}, lang) if name == DEFAULT_FAULT else ""
                print(f"{name:<{width}}  {tag}  {description(name, sc.description, lang)}{default}")
            sys.stdout.flush()
        except BrokenPipeError:  # `lossdoctor demo --fault list | head`
            from .output import silence_stdout

            silence_stdout()
        return 0
    name = args.fault or DEFAULT_FAULT
    if name not in SCENARIOS:
        from ..messages import render
        from .output import chosen_lang, error_line

        error_line(render("cli.unknown_fault", {"name": repr(name)}, chosen_lang(args)))
        return 2
    import torch

    from ..demo.scenarios import run_scenario
    from ..detectors.engine import diagnose_runs
    from ..live.diagnoser import set_alert_language
    from ..sources import load_path
    from .output import chosen_lang, error_line, write_report

    lang = chosen_lang(args)
    set_alert_language(lang)

    torch.set_num_threads(min(2, torch.get_num_threads()))
    log_dir = (
        Path(args.log_dir)
        if args.log_dir
        else Path("lossdoctor_runs") / f"demo-{name}-{datetime.now().strftime('%Y%m%d-%H%M%S')}"
    )
    sc = SCENARIOS[name]
    error_line(render("cli.demo_start", {"name": name, "description": description(name, sc.description, lang)}, lang))
    t0 = time.perf_counter()
    run_scenario(name, log_dir, seed=args.seed, alerts=True, replay=True)
    error_line(render("cli.demo_trained", {"seconds": time.perf_counter() - t0, "log_dir": str(log_dir)}, lang))
    runs = load_path(log_dir)
    report = diagnose_runs(runs)
    write_report(report, args, runs)
    error_line(render("cli.demo_again", {"log_dir": str(log_dir)}, lang))
    return 0
