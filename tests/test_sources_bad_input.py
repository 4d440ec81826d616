"""Bad input never ends in a traceback: exit 2 with one clear line, or a partial read with a
warning. The readers are fuzzed with hypothesis: whatever the bytes, `load_path` returns runs or
raises SourceError, nothing else."""

from __future__ import annotations

import json
import struct

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from conftest import run_cli
from lossdoctor.sources import SourceError, load_path


def one_line_error(p) -> str:
    assert p.returncode == 2, (p.returncode, p.stdout[-500:], p.stderr)
    lines = [x for x in p.stderr.splitlines() if x.strip()]
    assert len(lines) == 1 and "Traceback" not in p.stderr, p.stderr
    return lines[0]


@pytest.mark.parametrize(
    "name,content,says",
    [
        ("empty.csv", b"", "empty"),
        ("junk.bin", bytes(range(256)) * 40, "not a log format"),
        ("junk.csv", b"\x00\x01\x02\xff" * 100, "binary"),
        ("trainer_state.json", b'{"global_step": 3, "log_hist', "not valid JSON"),
        ("trainer_state.json", b'{"log_history": "nope"}', "not a Trainer state"),
        ("x.jsonl", b"{not json\n[1, 2]\n", "no JSON objects"),
        ("header_only.csv", b"step,loss\n", "no rows"),
        ("metrics.csv", b"epoch,accuracy\n0,0.5\n", "no training metric"),
        ("events.out.tfevents.123.host", b"\x10\x00\x00\x00garbage" * 3, "no scalar"),
        ("run-x.wandb", b":W&B\xe1\xbe\x00" + struct.pack("<IHB", 0, 5000, 1) + b"x", "no logged history"),
    ],
)
def test_bad_files_exit_2(tmp_path, name, content, says):
    p = tmp_path / name
    p.write_bytes(content)
    line = one_line_error(run_cli("diagnose", p))
    assert says in line, line


def test_dir_with_no_known_log(tmp_path):
    (tmp_path / "notes.txt").write_text("nothing to see\n")
    (tmp_path / "model.bin").write_bytes(b"\x00" * 64)
    assert "no known training log" in one_line_error(run_cli("diagnose", tmp_path))


def test_unwritable_output(tmp_path):
    p = tmp_path / "log.csv"
    p.write_text("step,loss\n0,1\n1,0.9\n2,0.8\n")
    one_line_error(run_cli("diagnose", p, "--format", "html", "-o", tmp_path / "missing" / "r.html"))


_SUFFIXES = [
    "log.csv",
    "log.jsonl",
    "trainer_state.json",
    "metrics.csv",
    "train.log",
    "events.out.tfevents.1.h",
    "run-a.wandb",
    "wandb-history.jsonl",
]
_PREFIXES = [
    b"",
    b"step,loss,grad_norm\n",
    b'{"step": 1, "loss": 2.0}\n',
    b'{"log_history": [',
    b" iteration 1/ 10 | lm loss: 2.0 | loss scale: 1.0 |\n",
    b":W&B\xe1\xbe\x00",
    b"[Rank 0] step=10, skipped=0, lr=[0.1]\n",
]


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    name=st.sampled_from(_SUFFIXES),
    prefix=st.sampled_from(_PREFIXES),
    body=st.binary(max_size=400),
    text=st.text(max_size=200),
)
def test_fuzz_readers(tmp_path_factory, name, prefix, body, text):
    d = tmp_path_factory.mktemp("fuzz")
    p = d / name
    p.write_bytes(prefix + text.encode("utf-8", "surrogatepass") + body)
    try:
        runs = load_path(p)
    except SourceError as e:
        assert str(e) and "\n" not in str(e)
        return
    assert runs and all(len(r) > 0 for r in runs)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    rows=st.lists(
        st.dictionaries(
            st.sampled_from(["step", "loss", "lr", "grad_norm", "scale", "x"]),
            st.one_of(
                st.none(),
                st.booleans(),
                st.integers(-5, 10**6),
                st.floats(allow_nan=True, allow_infinity=True),
                st.text(max_size=5),
                st.lists(st.floats(), max_size=2),
            ),
        ),
        min_size=1,
        max_size=30,
    )
)
def test_fuzz_jsonl_values_diagnose(tmp_path_factory, rows):
    """Any mix of value types reads and diagnoses without an exception escaping."""
    from lossdoctor.detectors.engine import diagnose_runs
    from lossdoctor.report import render

    p = tmp_path_factory.mktemp("fz") / "log.jsonl"
    p.write_text("\n".join(json.dumps(r) for r in rows))
    try:
        runs = load_path(p)
    except SourceError:
        return
    report = diagnose_runs(runs)
    for fmt in ("json", "md", "html", "text"):
        assert render(report, fmt, runs=runs)
