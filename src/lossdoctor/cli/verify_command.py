"""`lossdoctor verify RUN_DIR`: the verified fixes a run directory holds, per incident.

`watch(..., replay_fn=...)` replays each fix of an incident from the snapshot once the window after
the incident is recorded (on by default), and writes the verdicts into the incident record
(`incidents/step-*.json`: `verification`, and `fix_checks` on each finding). This command reads
those records and prints, per incident, each fix with its verdict and numbers, and what the
verification cost. It never imports torch and never runs code found in the files it reads.

Re-running the replays is not done here: they need the snapshots and the recorded batches, which
the snapshot ring keeps in memory (or, with snapshot="disk", in files removed when the monitor
closes); the run directory keeps neither. Re-run them while training runs: `mon.verify_fixes()`
before `mon.close()`.

Exit codes as for `diagnose`: 0 the records were read and shown; 1 only with `--fail-on unverified`
and an incident none of whose fixes was verified; 2 a path that is not a run directory, a run
directory without incident records or without any verification (one line on stderr).
"""

from __future__ import annotations

import argparse
import json
import math
from pathlib import Path
from typing import Any

from ..findings import as_fix
from ..messages import Msg
from .output import examples

FORMATS = ("text", "json", "md")
EPILOG = (
    "The verdicts are those watch(..., replay_fn=...) recorded during training (verify=True, the default). "
    "Re-running the replays needs the snapshots and the recorded batches, which the run directory "
    "does not keep: call mon.verify_fixes() before mon.close() to check fixes of your own."
)


class VerifyInputError(Exception):
    """The run directory cannot be shown: the message is one line for the user."""


class NoIncidents(VerifyInputError):
    """The run directory has no incident: `verify` says so and exits 0."""


def add_parser(sub: Any) -> None:
    v = sub.add_parser(
        "verify",
        help="show the verified fixes of a run directory, per incident",
        description="Show, per incident of a run directory written by lossdoctor.watch, each "
        "fix with its verdict (replayed from the snapshot) and what verification cost.",
        epilog=EPILOG + "\n\n" + examples("verify"),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    v.add_argument("path", metavar="RUN_DIR", help="run directory written by lossdoctor.watch")
    v.add_argument("--format", choices=FORMATS + ("markdown",), default="text", help="output format (default: text)")
    v.add_argument("-o", "--output", metavar="OUT", help="write the output to this file")
    v.add_argument(
        "--lang",
        choices=("en", "zh"),
        default=None,
        help="language of the text and md output (default: the locale's; JSON is always English)",
    )
    v.add_argument("--fail-on", choices=("unverified",), help="exit 1 when an incident has no verified fix")


def cmd_verify(args: argparse.Namespace) -> int:
    from .output import EXIT_BAD_INPUT, EXIT_FAIL_ON, EXIT_OK, chosen_lang, error_line, say_arg, write_text

    lang = chosen_lang(args)
    try:
        incidents = read_incidents(Path(args.path))
    except NoIncidents as e:  # a run without incidents: nothing to verify is an answer, not an error
        write_text(say_arg(e, lang), args.output, inputs=[str(args.path)], fmt="text")
        return EXIT_OK
    except VerifyInputError as e:
        error_line(f"lossdoctor: {say_arg(e, lang)}")
        return EXIT_BAD_INPUT
    fmt = "md" if args.format == "markdown" else args.format
    text = render(incidents, fmt, lang, str(args.path))
    write_text(text, args.output, inputs=[str(args.path)], fmt=fmt)
    if args.fail_on == "unverified" and any(not i["verified"] for i in incidents):
        return EXIT_FAIL_ON
    return EXIT_OK


# --- reading ----------------------------------------------------------------------------------


def read_incidents(path: Path) -> list[dict[str, Any]]:
    """The incidents of a run directory that verification ran for, each as `incident_view` makes it."""
    from ..sources.rundir import INCIDENTS, load_incidents, run_versions

    if not path.is_dir():
        raise VerifyInputError(Msg("cli.verify.not_dir", path=str(path)))
    versions = run_versions(path)
    if versions:  # a log_dir used by several runs: the newest, as `diagnose` reads it
        path = versions[-1][1]
    if not (path / "meta.json").is_file() and not (path / "steps.jsonl").is_file():
        raise VerifyInputError(Msg("cli.verify.not_run_dir", path=str(path)))
    unreadable: list[str] = []
    try:
        records = load_incidents(path, unreadable)
    except (OSError, ValueError) as e:
        raise VerifyInputError(
            Msg("cli.verify.unreadable", path=str(path / INCIDENTS), error=f"{type(e).__name__}: {e}")
        ) from e
    if not records and unreadable:
        raise VerifyInputError(Msg("cli.verify.unreadable", path=str(path / INCIDENTS), error=unreadable[0]))
    if not records:
        raise NoIncidents(Msg("cli.verify.no_incidents", path=str(path)))
    out = [incident_view(r) for r in records if isinstance(r.get("verification"), dict)]
    if not out:
        raise VerifyInputError(Msg("cli.verify.no_verification", path=str(path), n=len(records)))
    return out


def incident_view(record: dict[str, Any]) -> dict[str, Any]:
    """One incident: where, what verification did and cost, and every checked fix with its verdict."""
    from ..report.verdicts import summary

    v = record["verification"]
    fixes = []
    for f in _findings(record):
        for j, text in enumerate(f.fixes):
            for c in (x for x in f.fix_checks or [] if isinstance(x, dict) and x.get("fix") == j):
                fixes.append({"cause": f.cause, "fix_text": as_fix(text).text, **c})
    for c in _list(v.get("checks")):
        if isinstance(c, dict) and c.get("fix") is None:  # a fix asked for by name, not a finding's
            fixes.append({"fix_text": None, **c})
    step = record.get("step")
    trigger = record.get("trigger")
    return {
        "step": step if isinstance(step, int) else None,
        "trigger": trigger if isinstance(trigger, str) else None,
        "status": _str(v.get("status")),
        "from_step": _int(v.get("from_step")),
        "to_step": _int(v.get("to_step")),
        "note": v.get("note"),
        "note_data": v.get("note_data"),
        "error": v.get("error"),
        "cost": v.get("cost") if isinstance(v.get("cost"), dict) else None,
        "summary": summary(v),
        "fixes": fixes,
        "verified": any(x.get("verdict") == "verified" for x in fixes),
    }


def _findings(record: dict[str, Any]) -> list[Any]:
    """The record's own findings, then the diagnosis's findings verification checked too."""
    from ..findings import Finding

    out = []
    v = record["verification"]
    for d in _list(record.get("findings")) + _list(v.get("findings")):
        try:
            out.append(Finding.from_dict(d))
        except (TypeError, ValueError, KeyError, AttributeError):
            continue  # a damaged finding is left out; the others are still shown
    return out


def _list(x: Any) -> list[Any]:
    return x if isinstance(x, list) else []


# --- output -----------------------------------------------------------------------------------


def render(incidents: list[dict[str, Any]], fmt: str, lang: str, path: str) -> str:
    if fmt == "json":
        return (
            json.dumps(
                {"run_dir": path, "incidents": [_json(i) for i in incidents]},
                ensure_ascii=False,
                indent=1,
                allow_nan=False,
            )
            + "\n"
        )
    return render_lines(incidents, lang, path, md=fmt == "md")


def _json(incident: dict[str, Any]) -> dict[str, Any]:
    out = {k: v for k, v in incident.items() if k != "summary"}
    out["summary"], out["summary_data"] = str(incident["summary"]), incident["summary"].data()
    out["fixes"] = [
        {
            **{k: v for k, v in f.items() if k != "sentence"},
            "fix_text": _str(f.get("fix_text")),
            "sentence": _str(f.get("sentence")),
        }
        for f in incident["fixes"]
    ]
    out["note"] = _str(incident.get("note"))
    return _plain(out)


def _int(x: Any) -> int | None:
    return int(x) if isinstance(x, int) and not isinstance(x, bool) else None


def _str(x: Any) -> str | None:
    return None if x is None else str(x)


def _plain(x: Any) -> Any:
    """JSON-safe: non-finite floats as null, messages as their English text."""
    if isinstance(x, float):
        return x if math.isfinite(x) else None
    if isinstance(x, dict):
        return {str(k): _plain(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [_plain(v) for v in x]
    if isinstance(x, str):
        return str(x)
    return x


def render_lines(incidents: list[dict[str, Any]], lang: str, path: str, md: bool) -> str:
    """Text or Markdown: per incident a heading, its fixes with their verdicts, its cost."""
    from ..report.i18n import say, ui
    from ..report.markdown import md_escape
    from ..report.verdicts import ICON, sentence

    esc = md_escape if md else (lambda s: s)
    colon = ui(lang)["colon"]
    out = [("## " if md else "") + say(Msg("cli.verify.head", path=esc(path), n=len(incidents)), lang), ""]
    for inc in incidents:
        head = Msg(
            "cli.verify.incident", step=inc["step"] if inc["step"] is not None else "?", trigger=inc["trigger"] or "?"
        )
        out.append(("### " if md else "") + esc(say(head, lang)))
        if md:
            out.append("")
        for f in inc["fixes"]:
            what = (f"`{f['cause']}`" if md else f["cause"]) + colon if f.get("cause") else ""
            if f.get("fix_text") is not None:
                out.append(f"- {what}{esc(say(f['fix_text'], lang))}")
            mark = ICON.get(f.get("verdict"), "-")
            out.append(
                f"  - {mark} {esc(sentence(f, lang))}"
                if f.get("fix_text") is not None
                else f"- {mark} {esc(sentence(f, lang))}"
            )
        if not inc["fixes"]:
            out.append("- " + esc(say(Msg("cli.verify.no_fix_checked"), lang)))
        out.append("- " + esc(say(inc["summary"], lang)))
        out.append("")
    return "\n".join(out)
