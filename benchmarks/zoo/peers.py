"""Side by side: the PyPI log-reading tools people use, on the zoo's scalar logs.

    python -m benchmarks.zoo --seeds 3            # first: the zoo's run dirs and scalars.csv files
    python -m benchmarks.zoo.peers --setup        # creates out/peers-venv with the pinned tools
    python -m benchmarks.zoo.peers                # runs them, prints the table, writes docs

The tools run in their own virtual environment (never in this project's, never in CI), each on the
same `scalars.csv` (step, loss, grad_norm, lr, and the loss scale under fp16) that lossdoctor's
scalars-only column diagnoses, through its own CLI with JSON output.

None of them reports a cause from lossdoctor's vocabulary; most report symptoms (NaN, divergence,
plateau). To compare fairly, a peer *names an acceptable cause* only when one of its alarms is a
check whose name is a cause and maps onto an acceptable one (PEER_CAUSES below; symptom checks such
as `nan_inf` or `divergence` map to nothing). Alarms are a peer's findings at its warning level or
above; a healthy control with any alarm is a false alarm.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
from collections import defaultdict
from pathlib import Path
from typing import Any

from .. import docs
from .report import table
from .run import DEFAULT_OUT

TOOLS = {  # name: (pinned requirement, console script)
    "losslint": ("losslint==0.4.1", "losslint"),
    "runmedic": ("runmedic==0.1.1", "runmedic"),
    "trainspotter": ("trainspotter==0.2.6", "trainspotter"),
}
PEER_CAUSES = {
    "losslint": {"loss_spike": "loss_spike"},
    "runmedic": {
        "grad_spikes": "grad_explosion",
        "loss_spikes": "loss_spike",
        "constant_lr_plateau": "lr_schedule_error",
    },
    "trainspotter": {"grad_norm": "grad_explosion", "lr_schedule": "lr_schedule_error", "spikes": "loss_spike"},
}
ALARM_LEVELS = {
    "losslint": ("error", "warning"),
    "runmedic": ("critical", "warning"),
    "trainspotter": ("error", "warning"),
}
DEFAULT_VENV = DEFAULT_OUT.parent / "peers-venv"


def setup_venv(venv: Path) -> None:
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    subprocess.run(
        [str(venv / "bin" / "python"), "-m", "pip", "install", "-q", *(req for req, _ in TOOLS.values())], check=True
    )


def tool_version(venv: Path, tool: str) -> str:
    r = subprocess.run([str(venv / "bin" / "python"), "-m", "pip", "show", tool], capture_output=True, text=True)
    return next((ln.split(":", 1)[1].strip() for ln in r.stdout.splitlines() if ln.startswith("Version:")), "?")


def run_tool(venv: Path, tool: str, csv_path: Path) -> dict[str, Any]:
    exe = str(venv / "bin" / TOOLS[tool][1])
    cmd = {
        "losslint": [exe, "check", str(csv_path), "--format", "json"],
        "runmedic": [exe, "diagnose", str(csv_path), "--json"],
        "trainspotter": [exe, "analyze", str(csv_path), "--output", "json"],
    }[tool]
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
    try:
        data = json.loads(r.stdout)
    except json.JSONDecodeError:
        return {
            "error": (r.stderr.strip() or r.stdout.strip() or f"exit {r.returncode}").splitlines()[-1][:200],
            "alarms": [],
        }
    if tool == "losslint":
        found = [(f["check"], f["severity"]) for f in data.get("findings", [])]
    elif tool == "runmedic":
        runs = data if isinstance(data, list) else [data]
        found = [(f["check"], f["severity"]) for run in runs for f in run.get("findings", [])]
    else:
        found = [(f["detector"], f["severity"]) for f in data.get("findings", [])]
    alarms = [name for name, sev in found if sev in ALARM_LEVELS[tool]]
    return {"alarms": alarms, "all": found}


def judge(tool: str, alarms: list[str], causes: list[str]) -> tuple[bool, bool]:
    """(raised any alarm, named an acceptable cause)."""
    mapped = {PEER_CAUSES[tool].get(a) for a in alarms}
    return bool(alarms), bool(mapped & set(causes))


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(
        prog="python -m benchmarks.zoo.peers", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--venv", type=Path, default=DEFAULT_VENV, help=f"the peers' venv (default {DEFAULT_VENV})")
    ap.add_argument("--setup", action="store_true", help="create the venv and install the pinned tools first")
    ap.add_argument("--out", type=Path, default=DEFAULT_OUT, help="the zoo's output directory")
    ap.add_argument("--docs", type=Path, default=None)
    ap.add_argument("--no-docs", action="store_true")
    args = ap.parse_args(argv)

    if args.setup and not (args.venv / "bin" / "python").exists():
        setup_venv(args.venv)
    missing = [t for t, (_, exe) in TOOLS.items() if not (args.venv / "bin" / exe).exists()]
    if missing:
        print(f"peers venv {args.venv} lacks {', '.join(missing)}: run with --setup", file=sys.stderr)
        return 2
    results_file = args.out / "results.json"
    if not results_file.exists():
        print(f"{results_file} not found: run `python -m benchmarks.zoo` first", file=sys.stderr)
        return 2
    ours = json.loads(results_file.read_text())
    rows_by: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for r in ours:
        csv_path = Path(r["run_dir"]) / "scalars.csv"
        entry = {
            "seed": r["seed"],
            "causes": r["causes"],
            "healthy": r["healthy"],
            "ours_full": r["full"],
            "ours_scalars": r["scalars"],
            "peers": {},
        }
        for tool in TOOLS:
            entry["peers"][tool] = run_tool(args.venv, tool, csv_path)
        rows_by[r["scenario"]].append(entry)
        print(
            f"  {r['scenario']} seed {r['seed']}: "
            + "; ".join(f"{t} {','.join(dict.fromkeys(v['alarms'])) or '-'}" for t, v in entry["peers"].items()),
            file=sys.stderr,
            flush=True,
        )

    names = ["lossdoctor (full log)", "lossdoctor (scalars only)", *TOOLS]

    def verdicts(e: dict[str, Any]) -> dict[str, tuple[bool, bool, int]]:
        out = {}
        for key, label in (("ours_full", names[0]), ("ours_scalars", names[1])):
            alarms = [f["cause"] for f in e[key]["findings"]]
            out[label] = (bool(alarms), bool(set(alarms[:3]) & set(e["causes"])), len(alarms))
        for tool, res in e["peers"].items():
            raised, named = judge(tool, res["alarms"], e["causes"])
            out[tool] = (raised, named, len(res["alarms"]))
        return out

    summary_rows = []
    all_entries = [e for es in rows_by.values() for e in es]
    for n in names:
        faulty = [verdicts(e)[n] for e in all_entries if not e["healthy"]]
        healthy = [verdicts(e)[n] for e in all_entries if e["healthy"]]
        errors = sum(1 for e in all_entries for t, res in e["peers"].items() if t == n and res.get("error"))
        summary_rows.append(
            [
                n,
                f"{sum(v[0] for v in faulty)}/{len(faulty)}",
                f"{sum(v[1] for v in faulty)}/{len(faulty)}",
                f"{sum(v[0] for v in healthy)}/{len(healthy)}",
                f"{statistics.median([v[2] for v in faulty]) if faulty else 0:.0f}",
                str(errors) if n in TOOLS else "–",
            ]
        )

    def cell(tool: str, es: list[dict[str, Any]]) -> str:
        if tool in TOOLS:
            seen: dict[str, None] = {}
            for e in es:
                for a in e["peers"][tool]["alarms"]:
                    seen[a] = None
            errs = sum(1 for e in es if e["peers"][tool].get("error"))
            named = sum(judge(tool, e["peers"][tool]["alarms"], e["causes"])[1] for e in es)
            text = ", ".join(seen) or "–"
            if errs:
                text += f" (error ×{errs})"
        else:
            key = "ours_full" if "full" in tool else "ours_scalars"
            seen = {}
            for e in es:
                if e[key]["findings"]:
                    seen[e[key]["findings"][0]["cause"]] = None
            text = ", ".join(seen) or "–"
            named = sum(bool({f["cause"] for f in e[key]["findings"][:3]} & set(e["causes"])) for e in es)
        if es[0]["healthy"]:
            raised = sum(
                bool(e["peers"][tool]["alarms"])
                if tool in TOOLS
                else bool(e["ours_full" if "full" in tool else "ours_scalars"]["findings"])
                for e in es
            )
            return f"{text} ({raised}/{len(es)} alarmed)" if raised else "quiet"
        return f"{text} [{named}/{len(es)}]"

    scen_rows = []
    for scen, es in rows_by.items():
        want = "(healthy)" if es[0]["healthy"] else ", ".join(es[0]["causes"])
        scen_rows.append([scen, want] + [cell(n, es) for n in names])

    versions = ", ".join(f"{t} {tool_version(args.venv, t)}" for t in TOOLS)
    mapping = "; ".join(f"{t}: " + ", ".join(f"`{k}`→{v}" for k, v in m.items()) for t, m in PEER_CAUSES.items())
    text = "\n\n".join(
        [
            "## Peers on the same logs",
            docs.provenance(docs.command_line()) + f" Peers: {versions} (from PyPI, in a separate venv).",
            "Each tool read the same per-run `scalars.csv` that lossdoctor's scalars-only column reads "
            "(step, loss, grad_norm, lr, and the loss scale under fp16), through its own CLI with JSON "
            "output. *Alarm* = a finding at the tool's warning level or above. *Named an acceptable "
            "cause* = for lossdoctor, an acceptable cause among its first three alarms; for a peer, one of "
            "its alarms is a check whose name is a cause that maps onto an acceptable one — "
            f"{mapping}; symptom checks (NaN, divergence, plateau, stagnation) map to no cause.",
            "### Summary",
            table(
                [
                    "tool",
                    "faulty runs with an alarm",
                    "named an acceptable cause",
                    "healthy runs with an alarm",
                    "alarms per faulty run (median)",
                    "tool errors",
                ],
                summary_rows,
            ),
            "### Per scenario",
            "Each cell: the distinct alarms raised over the seeds (lossdoctor: its primary diagnosis), then "
            "[runs that named an acceptable cause / runs].",
            table(["scenario", "acceptable causes", *names], scen_rows),
        ]
    )
    print(text)
    (args.out / "peers.json").write_text(json.dumps(rows_by, indent=1, default=str))
    if not args.no_docs:
        target = args.docs or docs.DOC
        docs.write_section("peers", text, target)
        print(f"wrote {target}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
