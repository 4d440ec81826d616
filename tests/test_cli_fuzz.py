"""Fuzzing `lossdoctor diagnose` with mutated real logs.

Seeds are logs written by the real writers (the csv and json modules as training scripts use them,
transformers' TrainerState.save_to_json, torch's TensorBoard SummaryWriter, lossdoctor's own run
directory writer, Megatron and DeepSpeed line formats) with the fault curves of `logfaults`.
Hypothesis mutates them (cuts, flipped bytes, deleted and repeated slices, inserted tokens that
parsers trip on: 400-digit numbers, thousands of brackets, NUL bytes, NaN literals, a 200 kB line)
or replaces them with random bytes, and runs each through the CLI's `main` in process, in every
output format. The contract: exit 0 with a report, or exit 2 with exactly one line on stderr; never
a traceback and never the last line of defence's "internal error" (that line means a reader let an
exception through). A few subprocess runs check the same through the real entry point. Time is
bounded by pytest-timeout per test. With CI=1 the examples are derandomised (conftest), so CI
replays the same inputs on every run.
"""

from __future__ import annotations

import contextlib
import csv
import io
import json
import random
import re
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import logfaults
from conftest import cli_env, run_cli
from lossdoctor.cli.main import INTERNAL_ERROR, main
from test_sources_megatron import deepspeed_log, megatron_log

#: inputs tried per seed format by the in-process fuzz test (docs/reliability.md quotes the total)
EXAMPLES = 250
KINDS = ("csv", "jsonl", "json_array", "trainer_state", "tensorboard", "run_dir", "megatron", "deepspeed")
FORMATS = ("text", "json", "md", "html")


def _csv(curve: dict) -> bytes:
    f = io.StringIO(newline="")
    w = csv.writer(f)
    w.writerow(["step", "train_loss", "grad_norm", "learning_rate", "loss_scale"])
    for i, s in enumerate(curve["step"]):
        w.writerow(
            [int(s)]
            + [repr(float(curve[k][i])) for k in ("loss", "grad_norm", "lr")]
            + [repr(float(curve.get("scale", [65536.0] * len(curve["step"]))[i]))]
        )
    return f.getvalue().encode()


def _jsonl(curve: dict) -> bytes:
    # Python's json writes NaN/Infinity literals, as most training scripts' loggers do
    return "".join(
        json.dumps(
            {
                "global_step": int(s),
                "loss": float(curve["loss"][i]),
                "gradient_norm": float(curve["grad_norm"][i]),
                "lr": float(curve["lr"][i]),
            }
        )
        + "\n"
        for i, s in enumerate(curve["step"])
    ).encode()


def _trainer_state(curve: dict, d: Path) -> bytes:
    from transformers import TrainerState

    history = [
        {
            "epoch": i / 100,
            "grad_norm": float(curve["grad_norm"][i]),
            "learning_rate": float(curve["lr"][i]),
            "loss": float(curve["loss"][i]),
            "step": int(s) + 1,
        }
        for i, s in enumerate(curve["step"])
    ]
    TrainerState(global_step=len(history), logging_steps=1, max_steps=len(history), log_history=history).save_to_json(
        str(d / "trainer_state.json")
    )
    return (d / "trainer_state.json").read_bytes()


def _tensorboard(curve: dict, d: Path) -> bytes:
    from torch.utils.tensorboard import SummaryWriter

    w = SummaryWriter(str(d / "tb"))
    for i, s in enumerate(curve["step"]):
        w.add_scalar("train/loss", float(curve["loss"][i]), int(s))
        w.add_scalar("train/grad_norm", float(curve["grad_norm"][i]), int(s))
    w.close()
    return next((d / "tb").glob("events.out.tfevents.*")).read_bytes()


def _steps_jsonl(curve: dict, d: Path) -> bytes:
    from lossdoctor.live.runlog import RunLogWriter
    from lossdoctor.sources.rundir import STEPS

    w = RunLogWriter(d / "run")
    for i, s in enumerate(curve["step"]):
        w.append_step(
            {
                "step": int(s),
                "loss": float(curve["loss"][i]),
                "grad_norm": float(curve["grad_norm"][i]),
                "lr": float(curve["lr"][i]),
                "scale": float(curve["scale"][i]) if "scale" in curve else None,
            }
        )
    w.close()
    return (d / "run" / STEPS).read_bytes()


@pytest.fixture(scope="module")
def seeds(tmp_path_factory) -> dict[str, tuple[str, bytes]]:
    """kind -> (file name the reader expects, bytes written by the real writer)."""
    d = tmp_path_factory.mktemp("seeds")
    boom, collapse, high = logfaults.grad_explosion(), logfaults.scale_collapse(), logfaults.lr_too_high()
    return {
        "csv": ("log.csv", _csv(collapse)),
        "jsonl": ("log.jsonl", _jsonl(boom)),
        "json_array": ("metrics.json", json.dumps([json.loads(x) for x in _jsonl(high).splitlines()]).encode()),
        "trainer_state": ("trainer_state.json", _trainer_state(boom, d)),
        "tensorboard": ("events.out.tfevents.1.host", _tensorboard(boom, d)),
        "run_dir": ("steps.jsonl", _steps_jsonl(collapse, d)),
        "megatron": ("train.log", megatron_log(collapse).encode()),
        "deepspeed": ("train.log", deepspeed_log(collapse).encode()),
    }


TOKENS = [
    b"9" * 400,
    b"-" + b"9" * 400,
    b"[" * 5000,
    b"{" * 5000,
    b'{"a":' * 3000,
    b"NaN",
    b"-Infinity",
    b"1e999",
    b"null",
    b"\x00",
    b"\xff\xfe\xfd",
    b"\n",
    b"\r\n",
    b",",
    b";",
    b"\t",
    b'"',
    b"]",
    b"}",
    b'"step": "x",',
    b'"step": 1e300,',
    b'"loss": [[[1]]],',
    b"x" * 200_000,
    b",,,,,,,,",
    b"\x1b[31m",
    b"<img src=x onerror=alert(1)>",
    b"@octocat #1",
    "\ufeff".encode(),
]


#: what a number in a log is replaced with by the "value" mutation (values parsers choke on)
VALUES = [
    b"9" * 400,
    b"-" + b"9" * 400,
    b"1e999",
    b"-1e999",
    b"1e-400",
    b"NaN",
    b"nan",
    b"Infinity",
    b"-0",
    b"null",
    b"true",
    b'"3"',
    b'"x"',
    b"[]",
    b"[1, 2]",
    b"{}",
    b'{"a": 1}',
    b"[" * 3000 + b"]" * 3000,
    b"0x1F",
    b"1_000",
    b"",
    b"4" * 5000,
    b"2e308",
]
_NUMBER = re.compile(rb"-?\d+(?:\.\d+)?(?:[eE][-+]?\d+)?")


@st.composite
def mutated(draw, seed: bytes):
    if draw(st.integers(0, 9)) == 0:
        return draw(st.binary(max_size=2000))  # anything at all, under a log's name
    data = seed
    data = bytearray(data)
    for _ in range(draw(st.integers(1, 4))):
        op = draw(st.sampled_from(["value", "value", "cut", "flip", "insert", "delete", "repeat"]))
        pos = draw(st.integers(0, max(0, len(data) - 1)))
        if op == "value":  # one number of the log (a loss, a step, a config value) becomes a bad value
            numbers = list(_NUMBER.finditer(data[:200_000]))
            if numbers:
                m = numbers[draw(st.integers(0, len(numbers) - 1))]
                data[m.start() : m.end()] = draw(st.sampled_from(VALUES))
        elif op == "cut":
            del data[pos:]
        elif op == "flip" and data:
            for _ in range(draw(st.integers(1, 16))):
                i = draw(st.integers(0, len(data) - 1))
                data[i] ^= draw(st.integers(1, 255))
        elif op == "insert":
            data[pos:pos] = draw(st.sampled_from(TOKENS) | st.binary(min_size=1, max_size=64))
        elif op == "delete":
            del data[pos : pos + draw(st.integers(1, 4000))]
        else:
            data[pos:pos] = data[pos : pos + draw(st.integers(1, 2000))] * draw(st.integers(1, 5))
    return bytes(data)


def _diagnose_in_process(path: Path, fmt: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        rc = main(["diagnose", str(path), "--format", fmt])
    return rc, out.getvalue(), err.getvalue()


def check_contract(rc: int, out: str, err: str, fmt: str) -> None:
    assert rc in (0, 2), (rc, err)
    assert "Traceback" not in err and INTERNAL_ERROR not in err, err
    if rc == 2:
        lines = [x for x in err.splitlines() if x.strip()]
        assert len(lines) == 1, err
        assert not out
    else:
        assert out.strip()
        if fmt == "json":
            assert json.loads(out)["schema"] == "lossdoctor.report/1"


@pytest.mark.slow  # ~40 s for all kinds on 2 cores
@pytest.mark.timeout(300)
@pytest.mark.parametrize("kind", KINDS)
def test_fuzz_diagnose_mutated_real_logs(seeds, kind):
    name, seed = seeds[kind]
    tried = []

    @settings(
        max_examples=EXAMPLES, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large]
    )
    @given(data=mutated(seed), fmt=st.sampled_from(FORMATS))
    def run(data, fmt):
        with tempfile.TemporaryDirectory() as d:
            path = Path(d) / name
            if kind == "run_dir":  # steps.jsonl inside a run directory, as watch writes it
                path = Path(d) / "run" / name
                path.parent.mkdir()
            path.write_bytes(data)
            rc, out, err = _diagnose_in_process(path.parent if kind == "run_dir" else path, fmt)
        check_contract(rc, out, err, fmt)
        tried.append(rc)

    run()
    assert len(tried) >= EXAMPLES // 2, len(tried)  # the inputs were tried, not filtered away


@pytest.mark.timeout(300)
@pytest.mark.parametrize("kind", KINDS)
def test_fuzz_through_the_real_entry_point(seeds, tmp_path, kind):
    """The same contract through `python -m lossdoctor`: a seed cut in the middle, and one with
    bytes flipped (fixed random seed)."""
    name, data = seeds[kind]
    rng = random.Random(kind)
    flipped = bytearray(data)
    for _ in range(64):
        flipped[rng.randrange(len(flipped))] ^= rng.randrange(1, 256)
    for i, variant in enumerate((data[: len(data) // 2], bytes(flipped))):
        d = tmp_path / str(i)
        target = d / "run" if kind == "run_dir" else d
        target.mkdir(parents=True)
        (target / name).write_bytes(variant)
        p = run_cli("diagnose", target if kind == "run_dir" else target / name, "--format", "json", timeout=120)
        check_contract(p.returncode, p.stdout, p.stderr, "json")


#: audit events the offline path must never raise: network, unpickling, starting programs
_FORBIDDEN = (
    "socket.",
    "pickle.find_class",
    "subprocess.Popen",
    "os.system",
    "os.exec",
    "os.posix_spawn",
    "os.spawn",
    "os.fork",
    "urllib.Request",
    "webbrowser.open",
)

_AUDITED = """
import os, sys
seen = []
WRITE = os.O_WRONLY | os.O_RDWR | os.O_CREAT | os.O_APPEND | os.O_TRUNC

def hook(event, args):
    if event.startswith(FORBIDDEN):
        seen.append(event)
    elif event == "open":
        path, mode, flags = args
        if (isinstance(mode, str) and any(c in mode for c in "wax+")) or (mode is None and flags & WRITE):
            seen.append(f"open for writing: {path}")

FORBIDDEN = tuple(sys.argv[1].split(","))
sys.addaudithook(hook)
from lossdoctor.cli.main import main
codes = [main(["diagnose", p, "--format", "html"]) for p in sys.argv[2:]]
sys.stdout.flush()
print("AUDIT", codes, sorted(set(seen)), file=sys.stderr)
"""


@pytest.mark.timeout(300)
def test_diagnose_opens_no_socket_runs_nothing_writes_nothing(seeds, tmp_path):
    """Diagnosing every seed, cut and uncut, under an audit hook: no socket, no unpickling, no
    program started, no file opened for writing (the report goes to stdout)."""
    paths = []
    for kind, (name, data) in seeds.items():
        for i, variant in enumerate((data, data[: len(data) // 3])):
            d = tmp_path / f"{kind}-{i}"
            target = d / "run" if kind == "run_dir" else d
            target.mkdir(parents=True)
            (target / name).write_bytes(variant)
            paths.append(str(target if kind == "run_dir" else target / name))
    env = cli_env()
    env["PYTHONDONTWRITEBYTECODE"] = "1"
    p = subprocess.run(
        [sys.executable, "-c", _AUDITED, ",".join(_FORBIDDEN), *paths],
        capture_output=True,
        text=True,
        env=env,
        timeout=240,
    )
    line = next((x for x in p.stderr.splitlines() if x.startswith("AUDIT")), None)
    assert p.returncode == 0 and line is not None, p.stderr[-3000:]
    codes, seen = line.split(" ", 1)[1].rsplit("] ", 1)
    assert "[]" == seen.strip(), seen
    assert set(json.loads(codes + "]")) <= {0, 2} and json.loads(codes + "]").count(0) >= len(seeds)
