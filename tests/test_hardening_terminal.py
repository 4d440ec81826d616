"""The terminal and odd names (issue 27): text read from a log never drives the terminal, a file
name that is not UTF-8 never ends in an internal error, JSON nested 1,000 or 100,000 deep never
ends in a RecursionError.

The hostile logs are written by the real writers (the csv module, torch's SummaryWriter,
transformers' TrainerState, lossdoctor's RunLogWriter, a console log as the Trainer prints it), with
a payload of OSC 0 (window title), OSC 8 (hyperlink), CSI 2J (clear screen), BEL, BS, CR, DEL, C1
(U+009B, a one-byte CSI) and RLO (U+202E) in their metric, tag, key, layer, op and run names, in
their values and in their file names. The CLI runs as a user runs it: `python -m lossdoctor` in a
real pseudo-terminal (so the text report is the colour one rich writes) and through pipes.
"""

from __future__ import annotations

import csv
import json
import os
import re
import select
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

import logfaults
from conftest import cli_env, run_cli
from lossdoctor.cli.main import INTERNAL_ERROR, main
from lossdoctor.live.runlog import RunLogWriter
from lossdoctor.messages import JSON_LIMITS, Msg, cap_depth, safe_output, safe_text, too_deep
from lossdoctor.sources.rundir import INCIDENTS, META, PREFLIGHT

#: window title, hyperlink, clear screen, bell, backspace, carriage return, DEL, C1 CSI, RLO
PAYLOAD = "\x1b]0;pwned\x07\x1b]8;;http://evil.example/\x07link\x1b]8;;\x07\x1b[2J\x07\x08\r\x7f\u009b2J\u202e"
#: the same, fit for a file name (no slash) and for a CSV header (no ';', which the sniffer would
#: take for the delimiter; no CR, which would end the row)
NAME = PAYLOAD.replace("/", "_")
CSV_TEXT = PAYLOAD.replace("\r", "").replace(";", "")
#: what must never reach a terminal raw, once the colour codes rich writes (SGR) are set aside
UNSAFE = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u061c\u200e\u200f\u2028\u2029\u202a-\u202e\u2066-\u2069]")
SGR = re.compile(r"\x1b\[[0-9;]*m")
HANG = 60


def unsafe_chars(text: str, pty: bool = False) -> list[str]:
    """The characters of `text` that could drive a terminal; SGR colour codes are the report's own
    styling and allowed; on a pty the line discipline turns each newline into CR LF."""
    text = SGR.sub("", text)
    if pty:
        text = text.replace("\r\n", "\n")
    return UNSAFE.findall(text)


def run_pty(*args, env: dict[str, str] | None = None, timeout: float = HANG) -> tuple[int, str]:
    """`python -m lossdoctor ARGS` with stdin, stdout and stderr on a real pseudo-terminal: what a
    user's terminal would receive, as text."""
    master, slave = os.openpty()
    full = {**cli_env(), "TERM": "xterm-256color", **(env or {})}
    full.pop("NO_COLOR", None)
    p = subprocess.Popen(
        [sys.executable, "-m", "lossdoctor", *map(str, args)],
        stdin=slave,
        stdout=slave,
        stderr=slave,
        env=full,
        close_fds=True,
    )
    os.close(slave)
    out = bytearray()
    deadline = time.monotonic() + timeout
    try:
        while True:
            ready, _, _ = select.select([master], [], [], max(0.0, deadline - time.monotonic()))
            if not ready:
                p.kill()
                raise AssertionError(f"no end after {timeout} s: {bytes(out[-500:])!r}")
            try:
                chunk = os.read(master, 1 << 16)
            except OSError:  # EIO: every writer of the pty has gone
                break
            if not chunk:
                break
            out += chunk
    finally:
        os.close(master)
    return p.wait(timeout=30), out.decode("utf-8", "replace")


# --- hostile logs, each written by its real writer ---------------------------------------------


def console_log(d: Path) -> Path:
    """The Trainer's console lines, interleaved with lines holding the payload."""
    c = logfaults.healthy(60)
    lines = [f"{PAYLOAD} starting {PAYLOAD}"]
    for i in range(60):
        lines.append(
            str(
                {
                    "loss": round(float(c["loss"][i]), 4),
                    "grad_norm": 1.0,
                    "learning_rate": float(c["lr"][i]),
                    "epoch": i / 60,
                }
            )
        )
        lines.append(f"{PAYLOAD} {PAYLOAD}")
    p = d / f"console{NAME}.log"
    p.write_text("\n".join(lines) + "\n")
    return p


def csv_log(d: Path) -> Path:
    c = logfaults.healthy(60)
    p = d / f"train{NAME}.csv"
    with open(p, "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["step", "loss", "lr", CSV_TEXT, f"loss/{CSV_TEXT}"])
        for i in range(60):
            w.writerow([i, c["loss"][i], c["lr"][i], CSV_TEXT, c["loss"][i]])
    return p


def tensorboard_log(d: Path) -> Path:
    from torch.utils.tensorboard import SummaryWriter

    c = logfaults.healthy(60)
    p = d / f"tb{NAME}"
    w = SummaryWriter(str(p))
    for i in range(60):
        w.add_scalar("train/loss", float(c["loss"][i]), i)
        w.add_scalar(f"train/{PAYLOAD}", 1.0, i)
    w.add_text(PAYLOAD, PAYLOAD, 0)
    w.close()
    return p


def trainer_state(d: Path) -> Path:
    from transformers import TrainerState

    c = logfaults.healthy(60)
    st = TrainerState()
    st.log_history = [
        {
            "step": i + 1,
            "loss": float(c["loss"][i]),
            "learning_rate": float(c["lr"][i]),
            "epoch": i / 60,
            PAYLOAD: PAYLOAD,
        }
        for i in range(60)
    ]
    st.global_step = st.max_steps = 60
    p = d / f"hf{NAME}"
    p.mkdir()
    st.save_to_json(str(p / "trainer_state.json"))
    return p / "trainer_state.json"


def run_directory(d: Path, name: str = f"run{NAME}") -> Path:
    """A run directory as watch writes it: a layer, an op, a run name, notes, a preflight finding
    and an incident whose verification holds the payload."""
    c = logfaults.healthy(60)
    p = d / name
    w = RunLogWriter(p)
    w.write_meta({"rank": 0, "task": "classification", "run_name": PAYLOAD, "monitor_notes": [PAYLOAD]})
    w.start_layers([f"h.0.{PAYLOAD}", "h.1"], ["act_absmax"], [f"Linear{PAYLOAD}", "Linear"])
    for i in range(60):
        w.append_step(
            {"step": i, "loss": float(c["loss"][i]), "grad_norm": float(c["grad_norm"][i]), "lr": float(c["lr"][i])}
        )
        w.append_layers(i, np.ones((1, 2)))
    w.append_preflight(
        {
            "cause": "lr_too_high",
            "symptom": "divergence",
            "severity": "warning",
            "confidence": 0.9,
            "step": 3,
            "layer": f"h.0.{PAYLOAD}",
            "op": PAYLOAD,
            "evidence": [PAYLOAD],
            "fixes": [PAYLOAD],
        }
    )
    finding = {
        "cause": "nonfinite_data",
        "symptom": "nonfinite",
        "severity": "critical",
        "confidence": 0.9,
        "step": 5,
        "layer": PAYLOAD,
        "evidence": [PAYLOAD],
        "fixes": [PAYLOAD],
        "fix_checks": [{"fix": 0, "verdict": "verified", "sentence": PAYLOAD}],
    }
    w.write_incident(
        "step-5",
        {
            "step": 5,
            "trigger": PAYLOAD,
            "findings": [finding],
            "verification": {
                "status": PAYLOAD,
                "note": PAYLOAD,
                "error": PAYLOAD,
                "checks": [{"fix": None, "verdict": "verified", "sentence": PAYLOAD}],
            },
        },
    )
    w.close()
    return p


WRITERS = {
    "console": console_log,
    "csv": csv_log,
    "tensorboard": tensorboard_log,
    "trainer_state": trainer_state,
    "run_dir": run_directory,
}


@pytest.fixture(scope="module")
def hostile(tmp_path_factory) -> dict[str, Path]:
    d = tmp_path_factory.mktemp("hostile")
    return {name: make(d) for name, make in WRITERS.items()}


# --- 1. escapes ---------------------------------------------------------------------------------


def test_safe_text_escapes_every_class_and_keeps_the_text():
    for c in [
        "\x00",
        "\x07",
        "\x08",
        "\x0b",
        "\x0c",
        "\r",
        "\x1b",
        "\x7f",
        "\x85",
        "\x9b",
        "\u061c",
        "\u200e",
        "\u200f",
        "\u2028",
        "\u2029",
        "\u202a",
        "\u202e",
        "\u2066",
        "\u2069",
        "\udcff",
    ]:
        out = safe_text(f"a{c}b")
        assert not unsafe_chars(out) and out.startswith("a\\") and out.endswith("b"), (repr(c), out)
        assert safe_text(out) == out  # escaping twice changes nothing
    assert safe_text(PAYLOAD).startswith("\\x1b]0;pwned\\x07\\x1b]8;;")
    assert safe_text("line\n\ttab") == "line\n\ttab"
    assert safe_text("line\n\ttab", newlines=False) == "line\\n\\ttab"
    assert safe_text("run\udcff\udcfe.csv") == "run\\xff\\xfe.csv"  # os.fsdecode(b"run\xff\xfe.csv")
    assert safe_text("层 h.0 — ok") == "层 h.0 — ok"
    # inside JSON every escape is one JSON reads back: the characters themselves
    doc = json.loads(safe_output(json.dumps({"k": PAYLOAD}, ensure_ascii=False), "json"))
    assert doc == {"k": PAYLOAD}
    # a colour report keeps rich's colour codes and nothing else
    colour = "\x1b[1;31mCRITICAL\x1b[0m " + PAYLOAD
    out = safe_output(colour, "text", color=True)
    assert out.startswith("\x1b[1;31mCRITICAL\x1b[0m \\x1b]0;") and not unsafe_chars(out)


@pytest.mark.slow
@pytest.mark.timeout(600)
@pytest.mark.parametrize("kind", list(WRITERS))
def test_no_raw_control_character_reaches_a_terminal(hostile, kind):
    path = hostile[kind]
    rc, screen = run_pty("diagnose", path)  # a terminal: rich's colour report
    assert rc == 0 and "Traceback" not in screen and INTERNAL_ERROR not in screen, screen[-2000:]
    assert "\x1b[" in screen, "the report on a terminal is the colour one"
    assert not unsafe_chars(screen, pty=True), sorted(set(unsafe_chars(screen, pty=True)))
    assert "\x1b]" not in screen and "\x1b[2J" not in screen and "\x07" not in screen and "\u202e" not in screen
    shown = [screen]
    for fmt in ("text", "md", "html", "json"):
        p = run_cli("diagnose", path, "--format", fmt, timeout=HANG)
        shown.append(p.stdout)
        assert p.returncode == 0 and "Traceback" not in p.stderr, p.stderr[-2000:]
        assert not unsafe_chars(p.stdout) and not unsafe_chars(p.stderr), (fmt, sorted(set(unsafe_chars(p.stdout))))
        if fmt == "json":
            doc = json.loads(p.stdout)  # still valid JSON, the names still what the log says
            if kind == "run_dir":
                assert {f["layer"] for f in doc["findings"]} >= {PAYLOAD, f"h.0.{PAYLOAD}"}
        if fmt == "html":
            data = re.search(r'<script type="application/json" id="ld-data">(.*?)</script>', p.stdout, re.S)
            json.loads(data.group(1))  # the charts' data block still parses
    # what a log says is shown, escaped, not dropped: at least its name, in the HTML report's header
    assert any("\\x1b]0;pwned" in text or "\\u001b]0;pwned" in text for text in shown)


@pytest.mark.slow
@pytest.mark.timeout(300)
def test_verify_escapes_what_the_incident_records_say(hostile):
    path = hostile["run_dir"]
    rc, screen = run_pty("verify", path)
    assert rc == 0 and "Traceback" not in screen, screen[-2000:]
    assert not unsafe_chars(screen, pty=True), sorted(set(unsafe_chars(screen, pty=True)))
    assert screen.count("\\x1b]0;pwned") >= 4  # the path, the trigger, the fix, its verdict: all shown
    for fmt in ("md", "json"):
        p = run_cli("verify", path, "--format", fmt, timeout=HANG)
        assert p.returncode == 0 and not unsafe_chars(p.stdout), (fmt, p.stderr[-2000:])
    doc = json.loads(p.stdout)
    assert doc["incidents"][0]["trigger"] == PAYLOAD and doc["run_dir"] == str(path)


@pytest.mark.timeout(300)
def test_warnings_and_errors_echo_names_escaped(tmp_path):
    """The stderr lines: a partial-read warning naming the file, a one-line error naming a path."""
    torn = tmp_path / f"torn{NAME}.jsonl"
    lines = logfaults_jsonl() + ['{"step": 60, "loss": 1.2']  # a torn last line
    torn.write_text("\n".join(lines))
    rc, screen = run_pty("diagnose", torn, "--format", "json")
    assert rc == 0 and "warning" in screen and "\\x1b]0;pwned" in screen, screen[-2000:]
    assert not unsafe_chars(screen, pty=True), sorted(set(unsafe_chars(screen, pty=True)))
    (tmp_path / "x.jsonl").write_text("\n".join(logfaults_jsonl()) + "\n")
    for args in (
        ("diagnose", tmp_path / f"missing{NAME}.csv"),
        ("verify", tmp_path / f"none{NAME}"),
        ("diagnose", tmp_path / "x.jsonl", "-o", tmp_path / f"no{NAME}" / "r.txt"),
    ):
        p = run_cli(*args, timeout=HANG)
        assert p.returncode == 2 and len(p.stderr.splitlines()) == 1, p.stderr
        assert not unsafe_chars(p.stderr) and "\\x1b]0;pwned" in p.stderr, p.stderr


def logfaults_jsonl(n: int = 60) -> list[str]:
    c = logfaults.healthy(n)
    return [json.dumps({"step": i, "loss": float(c["loss"][i])}) for i in range(n)]


def test_live_alert_line_is_escaped(capsys):
    """The live monitor's stderr alert names a layer of the user's model: escaped too."""
    from lossdoctor.findings import Finding
    from lossdoctor.live.diagnoser import LiveDiagnoser

    live = LiveDiagnoser({"rank": 0}, alerts=True)
    live._maybe_announce(
        Finding(
            cause="grad_explosion",
            symptom="nonfinite",
            severity="critical",
            confidence=0.9,
            step=3,
            layer=PAYLOAD,
            evidence=[PAYLOAD],
            fixes=[PAYLOAD],
        )
    )
    err = capsys.readouterr().err
    assert "\\x1b]0;pwned" in err and not unsafe_chars(err) and err.count("\n") == 1, err


def test_monitor_warnings_are_escaped(caplog):
    """The "lossdoctor" logger (the monitor's one-time warnings quote exception texts and names)."""
    import logging

    with caplog.at_level(logging.WARNING, logger="lossdoctor"):
        logging.getLogger("lossdoctor").warning(
            "lossdoctor: %s disabled after an internal error: %s", "tracer", PAYLOAD
        )
    (record,) = caplog.records
    assert "\\x1b]0;pwned" in record.getMessage() and not unsafe_chars(record.getMessage())


# --- 2. names that are not UTF-8 ---------------------------------------------------------------

LOCALES = {
    "C.UTF-8": {"LC_ALL": "C.UTF-8"},
    "strict": {"LC_ALL": "C.UTF-8", "PYTHONIOENCODING": "utf-8:strict"},
    "C": {"LC_ALL": "C"},
}


def _run_bytes(args: list, env: dict[str, str], timeout: float = HANG) -> subprocess.CompletedProcess:
    full = {**cli_env(), **env}
    return subprocess.run([sys.executable, "-m", "lossdoctor", *args], capture_output=True, env=full, timeout=timeout)


def _ok(p: subprocess.CompletedProcess, bad_input: bool = False) -> None:
    err = p.stderr.decode("utf-8", "replace")
    assert b"Traceback" not in p.stderr and INTERNAL_ERROR not in err, err[-2000:]
    if bad_input:
        assert p.returncode == 2 and len(err.splitlines()) == 1, (p.returncode, err)
    else:
        assert p.returncode == 0, (p.returncode, err[-2000:])


@pytest.fixture(scope="module")
def odd_names(tmp_path_factory) -> dict[str, bytes]:
    d = os.fsencode(tmp_path_factory.mktemp("names"))
    c = logfaults.healthy(60)
    log = os.path.join(d, b"run\xff\xfe.csv")
    with open(log, "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["step", "loss", "lr"])
        for i in range(60):
            w.writerow([i, c["loss"][i], c["lr"][i]])
    rd = os.path.join(d, b"rd\xff\xfe")
    w = RunLogWriter(os.fsdecode(rd))
    w.write_meta({"rank": 0, "log_dir": os.fsdecode(rd)})  # the writer copes with the name itself
    for i in range(60):
        w.append_step({"step": i, "loss": float(c["loss"][i]), "lr": float(c["lr"][i])})
    w.write_incident(
        "step-5",
        {
            "step": 5,
            "trigger": "nonfinite_loss",
            "findings": [],
            "verification": {
                "status": "done",
                "checks": [{"fix": None, "verdict": "verified", "sentence": os.fsdecode(rd)}],
            },
        },
    )
    w.close()
    return {"dir": d, "csv": log, "run_dir": rd}


@pytest.mark.slow
@pytest.mark.timeout(900)
@pytest.mark.parametrize("locale", list(LOCALES))
def test_names_that_are_not_utf8(odd_names, locale):
    """diagnose (a log file, a run directory) and verify, every format, to stdout and to `-o`
    files named b"out\\xff\\xfe.<fmt>": exit 0 and the name shown as `\\xff\\xfe`; a missing one:
    one line, exit 2."""
    env = LOCALES[locale]
    d = odd_names["dir"]
    runs = [
        ("diagnose", odd_names["csv"], ("text", "json", "md", "html")),
        ("diagnose", odd_names["run_dir"], ("text", "json", "md", "html")),
        ("verify", odd_names["run_dir"], ("text", "json", "md")),
    ]
    for cmd, path, fmts in runs:
        for fmt in fmts:
            out = os.path.join(d, f"out-{cmd}-{locale}".encode() + b"\xff\xfe." + fmt.encode())
            for target in (None, out):
                p = _run_bytes([cmd, path, "--format", fmt] + (["-o", target] if target else []), env)
                _ok(p)
                text = p.stdout if target is None else Path(os.fsdecode(target)).read_bytes()
                if fmt == "json":
                    json.loads(text)
                elif cmd == "verify" or fmt == "html":  # both show the path they read
                    assert b"\\xff\\xfe" in text, (cmd, fmt, text[:300])
    _ok(_run_bytes(["diagnose", os.path.join(d, b"missing\xff.csv")], env), bad_input=True)
    _ok(_run_bytes(["verify", os.path.join(d, b"missing\xff")], env), bad_input=True)


@pytest.mark.slow
@pytest.mark.timeout(600)
def test_check_and_demo_with_names_that_are_not_utf8(tmp_path):
    d = os.fsencode(tmp_path)
    setup = os.path.join(d, b"setup\xff\xfe.py")
    with open(setup, "w") as f:
        f.write(
            "import torch\n\ndef lossdoctor_setup():\n    torch.manual_seed(0)\n"
            "    model = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.ReLU(), torch.nn.Linear(8, 1))\n"
            "    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)\n"
            "    return {'model': model, 'optimizer': opt, 'total_steps': 100}\n"
        )
    env = LOCALES["strict"]
    p = _run_bytes(["check", "--config", setup], env, timeout=300)
    _ok(p)
    assert b"\\xff\\xfe" in p.stdout.replace(b"\n", b"")  # a long temporary path wraps the header line
    out = os.path.join(d, b"check\xff.json")
    _ok(_run_bytes(["check", "--config", setup, "--format", "json", "-o", out], env, timeout=300))
    assert json.loads(Path(os.fsdecode(out)).read_bytes())["schema"] == "lossdoctor.report/1"
    _ok(_run_bytes(["check", "--config", setup + b":nope"], env, timeout=300), bad_input=True)
    log_dir, report = os.path.join(d, b"demo\xff\xfe"), os.path.join(d, b"demo\xff.md")
    p = _run_bytes(
        ["demo", "--fault", "nan-data", "--log-dir", log_dir, "--format", "md", "-o", report], env, timeout=540
    )
    _ok(p)
    assert b"\\xff\\xfe" in p.stderr and os.path.isfile(os.path.join(log_dir, b"meta.json"))
    assert b"nonfinite_data" in Path(os.fsdecode(report)).read_bytes()


# --- 3. JSON nested 1,000 and 100,000 deep -----------------------------------------------------


def _deep(n: int, kind: str) -> str:
    return "[" * n + "]" * n if kind == "list" else '{"a":' * n + "1" + "}" * n


def _rows(n: int = 60) -> list[dict]:
    c = logfaults.healthy(n)
    return [{"step": i, "loss": float(c["loss"][i]), "lr": float(c["lr"][i])} for i in range(n)]


def _plain_run_dir(p: Path) -> Path:
    w = RunLogWriter(p)
    w.write_meta({"rank": 0})
    for r in _rows():
        w.append_step(r)
    w.write_incident(
        "step-5",
        {
            "step": 5,
            "trigger": "nonfinite_loss",
            "findings": [],
            "verification": {"status": "done", "checks": [{"fix": None, "verdict": "verified", "sentence": "x"}]},
        },
    )
    w.close()
    return p


def _finding(extra: str) -> str:
    return (
        '{"cause": "lr_too_high", "symptom": "divergence", "severity": "warning", "confidence": 0.5, '
        '"evidence": ["e"], "fixes": ["f"], ' + extra + "}"
    )


def deep_input(d: Path, where: str, deep: str) -> Path:
    """A log, or a run directory, holding `deep` at `where`."""
    if where == "jsonl":
        lines = [json.dumps(r) for r in _rows()]
        lines[5] = lines[5][:-1] + ', "extra": ' + deep + "}"
        (d / "log.jsonl").write_text("\n".join(lines) + "\n")
        return d / "log.jsonl"
    if where == "json_array":
        rows = [json.dumps(r) for r in _rows()]
        rows[-1] = rows[-1][:-1] + ', "x": ' + deep + "}"
        (d / "log.json").write_text("[" + ",".join(rows) + "]")
        return d / "log.json"
    if where == "trainer_state":
        hist = ",".join(
            json.dumps({"step": r["step"] + 1, "loss": r["loss"], "learning_rate": r["lr"]}) for r in _rows()
        )
        (d / "trainer_state.json").write_text(
            '{"global_step": 60, "trial_params": ' + deep + ', "log_history": [' + hist + "]}"
        )
        return d / "trainer_state.json"
    if where == "wandb_history":
        (d / "files").mkdir()
        lines = [json.dumps({"_step": r["step"], "loss": r["loss"]}) for r in _rows()]
        lines[3] = lines[3][:-1] + ', "x": ' + deep + "}"
        (d / "files" / "wandb-history.jsonl").write_text("\n".join(lines) + "\n")
        return d / "files" / "wandb-history.jsonl"
    rd = _plain_run_dir(d / "run")
    if where == "meta":
        (rd / META).write_text('{"rank": 0, "config": ' + deep + "}")
    elif where == "steps":
        with open(rd / "steps.jsonl", "a") as f:
            f.write('{"step": 60, "loss": 1.0, "x": ' + deep + "}\n")
    elif where == "preflight_fix_checks":
        (rd / PREFLIGHT).write_text(
            _finding('"fix_checks": [{"fix": 0, "verdict": "verified", "x": ' + deep + "}]") + "\n"
        )
    elif where == "preflight_messages":
        n = deep.count("[") + deep.count("{")
        msg = '{"key": "ui.where_step", "values": {"step": ' * (n // 2) + "1" + "}}" * (n // 2)
        (rd / PREFLIGHT).write_text(_finding('"evidence_data": [' + msg + "]") + "\n")
    elif where == "incident":
        (rd / INCIDENTS / "step-5.json").write_text(
            '{"step": 5, "trigger": "nonfinite_loss", "findings": ['
            + _finding('"fix_checks": [{"fix": 0, "x": ' + deep + "}]")
            + '], "verification": {"status": "done", "cost": '
            + deep
            + ', "checks": [{"fix": null, "verdict": "verified", "sentence": "x", "v": '
            + deep
            + "}]}}"
        )
    elif where == "layers":
        (rd / "layers.json").write_text('{"modules": ["a"], "stats": ["s"], "types": ' + deep + "}")
        (rd / "layers.f32").write_bytes(np.zeros(2, "<f4").tobytes())
    return rd


DEEP_INPUTS = [
    "jsonl",
    "json_array",
    "trainer_state",
    "wandb_history",
    "meta",
    "steps",
    "preflight_fix_checks",
    "preflight_messages",
    "incident",
    "layers",
]


@pytest.mark.timeout(600)
@pytest.mark.parametrize("where", DEEP_INPUTS)
def test_json_nested_deep_is_bounded(tmp_path, capsys, where):
    """Each JSON input the CLI reads, holding 1,000 and 100,000 nested lists and dicts: a report
    in every format (or, where the whole file is refused, one line and exit 2), never a
    RecursionError; `verify --format json` too."""
    for n in (1000, 100_000):
        for kind in ("list", "dict"):
            d = tmp_path / f"{kind}{n}"
            d.mkdir()
            path = deep_input(d, where, _deep(n, kind))
            for fmt in ("json", "text", "md", "html"):
                rc = main(["diagnose", str(path), "--format", fmt])
                out, err = capsys.readouterr()
                assert INTERNAL_ERROR not in err and "Recursion" not in err, (where, n, kind, fmt, err)
                assert rc == 0 or (rc == 2 and len(err.splitlines()) == 1), (where, n, kind, fmt, rc, err)
                if rc == 0 and fmt == "json":
                    json.loads(out)
            if path.name == "run" and where in ("incident", "meta"):
                for fmt in ("json", "text", "md"):
                    rc = main(["verify", str(path), "--format", fmt])
                    out, err = capsys.readouterr()
                    assert INTERNAL_ERROR not in err and "Recursion" not in err, (where, n, kind, fmt, err)
                    # 1,000 levels: cut, and shown; 100,000: beyond the parser, the record is unreadable
                    assert rc == 0 or (
                        rc == 2 and len(err.splitlines()) == 1 and n == 100_000 and where == "incident"
                    ), (where, n, kind, fmt, rc, err)
                    if rc == 0 and fmt == "json":
                        json.loads(out)


def test_run_directory_json_is_cut_at_the_limit_with_a_note(tmp_path, capsys):
    rd = deep_input(tmp_path, "meta", _deep(1000, "dict"))
    assert main(["diagnose", str(rd), "--format", "json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    cut = [n for n in doc["notes_data"] if isinstance(n, dict) and n.get("key") == "source.json_too_deep"]
    assert cut and cut[0]["values"]["limit"] == JSON_LIMITS.max_depth, doc["notes"]


def test_depth_helpers_never_recurse():
    obj: list = []
    for _ in range(100_000):  # built without recursion, walked without it
        obj = [obj]
    assert too_deep(obj) and not too_deep([[1], {"a": [2]}])
    capped, cut = cap_depth(obj)
    assert cut and not too_deep(capped)
    depth, x = 0, capped
    while isinstance(x, list):
        depth, x = depth + 1, x[0]
    assert depth == JSON_LIMITS.max_depth and x is None
    assert cap_depth({"a": [1, {"b": 2}]}) == ({"a": [1, {"b": 2}]}, False)
    deep_msg: dict = {"key": "ui.where_step", "values": {"step": 1}}
    for _ in range(5000):
        deep_msg = {"key": "ui.where_step", "values": {"step": deep_msg}}
    assert Msg.from_data(deep_msg) is None  # shown as the stored English instead
