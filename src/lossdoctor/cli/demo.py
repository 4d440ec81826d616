"""`lossdoctor demo`: train a small model with a realistic fault on CPU, watch it, diagnose it."""

from __future__ import annotations

import argparse
import sys
import time
from datetime import datetime
from pathlib import Path


def cmd_demo(args: argparse.Namespace) -> int:
    from ..demo.scenarios import DEFAULT_FAULT, SCENARIOS

    if args.fault == "list":
        width = max(len(n) for n in SCENARIOS)
        for name, sc in SCENARIOS.items():
            tag = "healthy" if not sc.expect else "fault  "
            default = "  (default)" if name == DEFAULT_FAULT else ""
            print(f"{name:<{width}}  {tag}  {sc.description}{default}")
        return 0
    name = args.fault or DEFAULT_FAULT
    if name not in SCENARIOS:
        print(f"lossdoctor: unknown fault {name!r}; `lossdoctor demo --fault list` lists them",
              file=sys.stderr)
        return 2
    import torch

    from ..demo.scenarios import run_scenario
    from ..detectors.engine import diagnose_runs
    from ..sources import load_path
    from .output import write_report

    torch.set_num_threads(min(2, torch.get_num_threads()))
    log_dir = Path(args.log_dir) if args.log_dir else \
        Path("lossdoctor_runs") / f"demo-{name}-{datetime.now().strftime('%Y%m%d-%H%M%S')}"
    sc = SCENARIOS[name]
    print(f"lossdoctor demo: {name} - {sc.description}", file=sys.stderr)
    t0 = time.perf_counter()
    run_scenario(name, log_dir, seed=args.seed, alerts=True, replay=True)
    print(f"lossdoctor demo: trained in {time.perf_counter() - t0:.1f}s; run directory {log_dir}",
          file=sys.stderr)
    runs = load_path(log_dir)
    report = diagnose_runs(runs)
    write_report(report, args, runs)
    print(f"(the same diagnosis again: lossdoctor diagnose {log_dir})", file=sys.stderr)
    return 0
