"""Files: a reused log_dir never mixes two runs, an output never replaces an input, the run log
never writes through a planted link, the readers stay bounded, and what is read is checked
(issue 27). Real `watch` runs, real writers, real planted links, the real CLI in a subprocess."""

from __future__ import annotations

import csv
import hashlib
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from torch import nn

import lossdoctor
from conftest import cli_env, run_cli
from lossdoctor.monitor import open_run_log
from lossdoctor.runlog import CLAIM, claim_run_dir

HANG = 60


def train(log_dir: Path, nan_at: int | None = None, steps: int = 30, **options):
    """A real regression run under `watch`; `nan_at`: a NaN in that step's batch."""
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 1))
    opt = torch.optim.SGD(model.parameters(), lr=0.05)
    mon = lossdoctor.watch(model, opt, log_dir=log_dir, alerts=False, **options)
    g = torch.Generator().manual_seed(1)
    for i in range(steps):
        x = torch.randn(8, 4, generator=g)
        if i == nan_at:
            x[0, 0] = float("nan")
        loss = ((model(x) - x.sum(1, keepdim=True)) ** 2).mean()
        loss.backward()
        opt.step()
        opt.zero_grad()
        mon.step(loss, batch=x)
    mon.close()
    return mon


def tree(root: Path, skip: str | None = None) -> dict[str, bytes]:
    """Every file under `root` (links not followed) with its bytes; `skip` a top folder."""
    out = {}
    for dirpath, dirnames, files in os.walk(root):
        rel = Path(dirpath).relative_to(root)
        if skip and rel.parts[:1] == (skip,):
            continue
        for f in files:
            p = Path(dirpath) / f
            out[str(rel / f)] = b"<link>" if p.is_symlink() else p.read_bytes()
    return out


def causes(report) -> set[str]:
    return {f.cause for f in report.findings}


def one_line_error(p: subprocess.CompletedProcess) -> str:
    assert p.returncode == 2, (p.returncode, p.stdout[-500:], p.stderr[-2000:])
    lines = p.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in p.stderr and "internal error" not in p.stderr, p.stderr
    return lines[0]


# --- 1. a reused log_dir ---------------------------------------------------------------------

@pytest.fixture(scope="module")
def reused(tmp_path_factory):
    d = tmp_path_factory.mktemp("reuse") / "exp1"
    first = train(d, nan_at=20)
    before = tree(d)
    second = train(d)
    return d, first, second, before


def test_a_reused_log_dir_keeps_the_second_run_apart(reused):
    d, first, second, before = reused
    assert "nonfinite_data" in causes(first.diagnose())
    assert second.log_dir == d / "version_1" and second.version == "version_1"
    report = second.diagnose()
    assert report.findings == [] and not report.inconclusive
    # mon.diagnose() of the first run still reads its own run, not the newest
    assert "nonfinite_data" in causes(first.diagnose())
    # the first run's files are intact: not one byte appended
    assert tree(d, skip="version_1") == before
    steps = (d / "version_1" / "steps.jsonl").read_text().splitlines()
    assert len(steps) == 30 and len((d / "steps.jsonl").read_text().splitlines()) == 30


def test_diagnose_reads_the_newest_run_and_names_the_others(reused):
    d, *_ = reused
    p = run_cli("diagnose", d, "--format", "json", timeout=HANG)
    assert p.returncode == 0, p.stderr
    rep = json.loads(p.stdout)
    assert rep["findings"] == []
    note = next(n for n in rep["notes_data"] if n["key"] == "source.rundir_versions")
    assert note["values"]["n"] == 2 and note["values"]["chosen"] == "version_1"
    old = json.loads(run_cli("diagnose", d, "--run", "version_0", "--format", "json", timeout=HANG).stdout)
    assert "nonfinite_data" in {f["cause"] for f in old["findings"]}
    assert json.loads(run_cli("diagnose", d, "--run", "1", "--format", "json", timeout=HANG).stdout)["findings"] == []
    bad = one_line_error(run_cli("diagnose", d, "--run", "version_7", timeout=HANG))
    assert "version_7" in bad


def test_ranks_of_one_launch_share_one_new_version(tmp_path):
    root = tmp_path / "ddp"
    train(root, steps=3)  # an earlier run in the directory
    a, va = claim_run_dir(root, "launch-A", 0)
    b, vb = claim_run_dir(root, "launch-A", 1)  # the other rank of the same launch
    c, vc = claim_run_dir(root, "launch-B", 0)  # a later launch
    assert va == vb == "version_1" and vc == "version_2"
    assert json.loads((root / "version_1" / CLAIM).read_text())["launch"] == "launch-A"
    # ranks that share no launch name: each takes the first version where its rank-N/ is absent
    for slot in (a, b, c):
        slot.close()
    (root / "version_2" / "rank-0").mkdir()
    d, vd = claim_run_dir(tmp_path / "noname", None, 0)
    assert vd == "version_0"
    d.close()


# --- 2. an output that is an input -----------------------------------------------------------

def csv_log(path: Path, n: int = 60) -> bytes:
    with open(path, "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["step", "loss"])
        for i in range(n):
            w.writerow([i, 2.0 / (1 + i)])
    return path.read_bytes()


def test_an_output_that_is_an_input_is_refused(tmp_path, reused):
    log = tmp_path / "train.csv"
    data = csv_log(log)
    os.link(log, tmp_path / "hard.csv")
    (tmp_path / "soft.csv").symlink_to(log)
    for out in (log, tmp_path / "hard.csv", tmp_path / "soft.csv", tmp_path / "." / "train.csv"):
        line = one_line_error(run_cli("diagnose", log, "-o", out, timeout=HANG))
        assert "refusing" in line
        assert log.read_bytes() == data
    d, *_ = reused
    before = tree(d)
    for out in (d / "steps.jsonl", d / "meta.json", d / "version_1" / "steps.jsonl", d / "new.html"):
        one_line_error(run_cli("diagnose", d, "--format", "html", "-o", out, timeout=HANG))
        one_line_error(run_cli("verify", d, "-o", out, timeout=HANG))
    assert tree(d) == before


def test_reports_are_written_atomically(tmp_path):
    log = tmp_path / "train.csv"
    csv_log(log)
    out = tmp_path / "r.html"
    out.write_bytes(b"the previous report")
    # a file-size limit below the report's size: the write fails half-way (EFBIG)
    code = ("import resource, runpy, signal, sys; signal.signal(signal.SIGXFSZ, signal.SIG_IGN); "
            "resource.setrlimit(resource.RLIMIT_FSIZE, (4096, 4096)); "
            f"sys.argv = ['lossdoctor', 'diagnose', {str(log)!r}, '--format', 'html', '-o', {str(out)!r}]; "
            "runpy.run_module('lossdoctor', run_name='__main__')")
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=cli_env(), timeout=HANG)
    one_line_error(p)
    assert out.read_bytes() == b"the previous report"
    assert sorted(os.listdir(tmp_path)) == ["r.html", "train.csv"]  # no temporary file left
    ok = run_cli("diagnose", log, "--format", "json", "-o", out, timeout=HANG)
    assert ok.returncode == 0 and json.loads(out.read_text())["schema"].startswith("lossdoctor.report")


# --- 3. planted links ------------------------------------------------------------------------

def plant(log_dir: Path, outside: Path, names: list[str]) -> dict[str, bytes]:
    """Symlinks named like the run log's files, each to a file outside with known bytes."""
    outside.mkdir()
    log_dir.mkdir()
    for i, name in enumerate(names):
        target = outside / f"victim-{i}"
        target.write_bytes(f"someone's file {i}\n".encode())
        (log_dir / name).symlink_to(target)
    return tree(outside)


def test_planted_links_are_never_written_through(tmp_path):
    log_dir, outside = tmp_path / "run", tmp_path / "outside"
    names = ["findings.jsonl", "layers.f32", "layers.json", "preflight.jsonl", "meta.json.tmp", ".meta.json.tmp"]
    before = plant(log_dir, outside, names)
    (log_dir / "dangling.jsonl").symlink_to(outside / "created-by-the-monitor")
    (outside / "incidents").mkdir()
    (log_dir / "incidents").symlink_to(outside / "incidents")
    mon = train(log_dir, nan_at=20)
    assert tree(outside) == {**before}  # byte-identical, nothing created (incidents/ stays empty)
    assert not (outside / "created-by-the-monitor").exists()
    refused = {n.values["path"] for n in mon.notes if getattr(n, "key", "") == "monitor.path_refused"}
    assert {"findings.jsonl", "layers.f32", "incidents"} <= refused
    # monitoring went on: steps written, the NaN found, the notes in the report
    assert len((log_dir / "steps.jsonl").read_text().splitlines()) == 30
    report = mon.diagnose()
    assert "nonfinite_data" in causes(report)


def test_a_planted_steps_file_sends_the_run_to_a_fresh_version(tmp_path):
    log_dir, outside = tmp_path / "run", tmp_path / "outside"
    before = plant(log_dir, outside, ["steps.jsonl", "version_1"])  # version_1: a link to a file
    (outside / "dir").mkdir()
    (log_dir / "version_2").symlink_to(outside / "dir")
    mon = train(log_dir, steps=5)
    assert mon.log_dir == log_dir / "version_3"
    assert tree(outside) == before and os.listdir(outside / "dir") == []


def test_planted_rank_dir_and_incident_file(tmp_path):
    log_dir, outside = tmp_path / "run", tmp_path / "outside"
    before = plant(log_dir, outside, ["rank-0"])
    slot, version = claim_run_dir(log_dir, "launch", 0)
    assert version == "version_1"  # a rank-0 entry means a run was here: not reused
    (slot.path / "rank-0").symlink_to(outside)  # planted after the claim, as a rank opens it
    notes: list[str] = []
    w = open_run_log(slot.path / "rank-0", slot, True, notes)
    w.append_step({"step": 0, "loss": 1.0})
    w.write_meta({"rank": 0})
    w.close()
    assert [n.key for n in notes] == ["monitor.path_refused"] and tree(outside) == before
    # a link planted inside incidents/ under the name of the next record: replaced, not followed
    d = tmp_path / "run2"
    (d / "incidents").mkdir(parents=True)
    victim = outside / "victim-0"
    (d / "incidents" / "step-00000003.json").symlink_to(victim)
    (d / "incidents" / "step-00000003.json.tmp").symlink_to(victim)
    slot, _ = claim_run_dir(d, "x", None)
    w = open_run_log(d, slot, False, [])
    w.write_incident("step-00000003", {"step": 3})
    w.close()
    assert tree(outside) == before
    assert json.loads((d / "incidents" / "step-00000003.json").read_text()) == {"step": 3}
