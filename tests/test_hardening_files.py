"""Files: a reused log_dir never mixes two runs, an output never replaces an input, the run log
never writes through a planted link, the readers stay bounded, and what is read is checked
(issue 27). Real `watch` runs, real writers, real planted links, the real CLI in a subprocess."""

from __future__ import annotations

import csv
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
from lossdoctor.live.monitor import open_run_log
from lossdoctor.live.runlog import CLAIM, claim_run_dir

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
    for dirpath, _dirnames, files in os.walk(root):
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
        assert "refusing" in one_line_error(run_cli("diagnose", d, "--format", "html", "-o", out, timeout=HANG))
    # one file of a run directory read alone: its directory is still protected
    line = one_line_error(run_cli("diagnose", d / "steps.jsonl", "-o", d / "meta.json", timeout=HANG))
    assert "refusing" in line
    assert tree(d) == before


def replay(model, x):
    return ((model(x) - x.sum(1, keepdim=True)) ** 2).mean()


def test_verify_output_into_its_run_directory_is_refused(tmp_path):
    d = tmp_path / "v"
    train(d, nan_at=20, replay_fn=replay)
    assert run_cli("verify", d, timeout=HANG).returncode == 0
    before = tree(d)
    for out in (d / "incidents" / "step-00000020.json", d / "v.txt", d / "steps.jsonl"):
        assert "refusing" in one_line_error(run_cli("verify", d, "-o", out, timeout=HANG))
    assert tree(d) == before
    ok = run_cli("verify", d, "--format", "json", "-o", tmp_path / "v.json", timeout=HANG)
    assert ok.returncode == 0 and json.loads((tmp_path / "v.json").read_text())


def test_reports_are_written_atomically(tmp_path):
    log = tmp_path / "train.csv"
    csv_log(log)
    out = tmp_path / "r.html"
    out.write_bytes(b"the previous report")
    # a file-size limit below the report's size: the write fails half-way (EFBIG)
    code = (
        "import resource, runpy, signal, sys; signal.signal(signal.SIGXFSZ, signal.SIG_IGN); "
        "resource.setrlimit(resource.RLIMIT_FSIZE, (4096, 4096)); "
        f"sys.argv = ['lossdoctor', 'diagnose', {str(log)!r}, '--format', 'html', '-o', {str(out)!r}]; "
        "runpy.run_module('lossdoctor', run_name='__main__')"
    )
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


def test_planted_snapshots_dir_is_never_written_through(tmp_path):
    log_dir, outside = tmp_path / "run", tmp_path / "outside"
    log_dir.mkdir()
    outside.mkdir()
    (log_dir / "snapshots").symlink_to(outside)
    mon = train(log_dir, nan_at=20, replay_fn=replay, snapshot="disk", snapshot_every=5)
    assert os.listdir(outside) == []
    assert len((log_dir / "steps.jsonl").read_text().splitlines()) == 30
    assert "nonfinite_data" in causes(mon.diagnose())
    # a link planted inside a real snapshots/ under a snapshot's name: removed, never followed
    d = tmp_path / "run2"
    (d / "snapshots").mkdir(parents=True)
    victim = outside / "victim"
    victim.write_bytes(b"someone's file")
    for step in (0, 5, 10, 15, 20):
        (d / "snapshots" / f"snapshot-{step:08d}.pt").symlink_to(victim)
    train(d, nan_at=20, replay_fn=replay, snapshot="disk", snapshot_every=5)
    assert victim.read_bytes() == b"someone's file" and sorted(os.listdir(outside)) == ["victim"]


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


# --- 4. bounds ---------------------------------------------------------------------------------


def peak_rss_mib(*args: str) -> tuple[int, float, float]:
    """(exit code, peak resident memory in MiB, seconds) of `lossdoctor ARGS` in a fresh Python
    (VmHWM of the process itself: a fork's memory before exec is not counted)."""
    import time

    code = (
        "import runpy, sys\n"
        f"sys.argv = ['lossdoctor', *{list(map(str, args))!r}]\n"
        "rc = 0\n"
        "try:\n    runpy.run_module('lossdoctor', run_name='__main__')\n"
        "except SystemExit as e:\n    rc = e.code\n"
        "hwm = open('/proc/self/status').read().split('VmHWM:')[1].split()[0]\n"
        "print('PEAK', rc, hwm, file=sys.stderr)\n"
    )
    t0 = time.perf_counter()
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=cli_env(), timeout=HANG)
    seconds = time.perf_counter() - t0
    _, rc, kb = p.stderr.strip().splitlines()[-1].split()
    return int(rc), int(kb) / 1024, seconds


@pytest.mark.slow
@pytest.mark.parametrize(
    "name", ["trainer_state.json", "train.csv", "train.jsonl", "events.out.tfevents.1.host", "train.log"]
)
def test_nul_files_are_read_in_bounded_memory_and_time(tmp_path, name):
    sizes = {}
    for mib in (64, 256):
        d = tmp_path / str(mib)
        d.mkdir()
        with open(d / name, "wb") as f:
            f.truncate(mib << 20)  # NUL bytes
        sizes[mib] = peak_rss_mib("diagnose", d / name)
    (rc64, mem64, t64), (rc256, mem256, t256) = sizes[64], sizes[256]
    assert rc64 == rc256 == 2
    # 4x the bytes: the same memory (the file is refused from its head or streamed), never 2x the file
    assert mem256 < mem64 + 32 and mem256 < 200, sizes
    assert t256 < 30 and t256 < 4 * t64 + 5, sizes  # time does not grow with the file either


def test_stdin_is_capped_and_the_cut_is_said(tmp_path):
    line = json.dumps({"loss": 0.5, "learning_rate": 1e-4, "epoch": 0.01}) + "\n"
    gen = subprocess.Popen(
        [sys.executable, "-c", f"import sys\nwhile True: sys.stdout.write({line!r})"], stdout=subprocess.PIPE
    )
    env = {**cli_env(), "LOSSDOCTOR_STDIN_MAX_BYTES": str(1 << 20)}
    try:
        p = subprocess.run(
            [sys.executable, "-m", "lossdoctor", "diagnose", "-", "--format", "json"],
            stdin=gen.stdout,
            capture_output=True,
            text=True,
            env=env,
            timeout=HANG,
        )
    finally:
        gen.kill()
        gen.wait()
    assert p.returncode == 0, p.stderr
    rep = json.loads(p.stdout)
    cut = [n for n in rep["notes_data"] if n["key"] == "cli.stdin_cut"]
    assert cut and cut[0]["values"]["mib"] == 1
    assert "warning" in p.stderr
    # the default cap is a named, documented constant
    from lossdoctor.cli.main import STDIN_MAX_BYTES

    assert STDIN_MAX_BYTES == 256 << 20


def test_text_with_no_series_is_refused_in_bounded_time(tmp_path):
    """`yes | lossdoctor diagnose -`: lines with no number at all. The general text reader stops
    looking after NO_SERIES_LINES lines without a numeric row (it took ~20 s a million lines)."""
    from lossdoctor.sources.any_text import NO_SERIES_LINES

    path = tmp_path / "yes.txt"
    path.write_text("y\n" * (3 * NO_SERIES_LINES))
    p = subprocess.run(
        [sys.executable, "-m", "lossdoctor", "diagnose", str(path)],
        capture_output=True,
        text=True,
        env=cli_env(),
        timeout=HANG,
    )
    assert p.returncode == 2 and len(p.stderr.strip().splitlines()) == 1, p.stderr
    assert "no numeric series" in p.stderr


def lightning_dir(path: Path, hparams: str) -> Path:
    path.mkdir()
    with open(path / "metrics.csv", "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["epoch", "step", "train_loss"])
        for i in range(60):
            w.writerow([0, i, 2.0 / (1 + i)])
    (path / "hparams.yaml").write_text(hparams)
    return path


def alias_bomb(levels: int = 9) -> str:
    lines = ['a0: &a0 ["lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol"]']
    lines += [f"a{i}: &a{i} [" + ", ".join([f"*a{i - 1}"] * 9) + "]" for i in range(1, levels)]
    lines.append("b: [" + ", ".join(["*a8"] * 20_000) + "]")
    return "\n".join(lines) + "\noptimizer: SGD\nlr: 0.1\n"


def test_a_yaml_alias_bomb_beside_a_log_is_refused_fast(tmp_path):
    import time

    d = lightning_dir(tmp_path / "bomb", alias_bomb())
    t0 = time.perf_counter()
    p = run_cli("diagnose", d, "--format", "json", timeout=HANG)
    assert p.returncode == 0, p.stderr
    assert time.perf_counter() - t0 < 20
    rep = json.loads(p.stdout)
    skipped = [n for n in rep["notes_data"] if n["key"] == "sources.settings_skipped"]
    assert skipped and skipped[0]["values"]["file"] == "hparams.yaml"
    # a plain hparams.yaml is still read
    ok = lightning_dir(tmp_path / "plain", "optimizer: SGD\nlr: 0.1\n")
    from lossdoctor.sources import load_path

    assert load_path(ok)[0].meta.get("optimizer", {}).get("class") == "SGD"
    # and YAML never builds an object from a tag
    evil = lightning_dir(tmp_path / "evil", "x: !!python/object/apply:os.system ['touch pwned']\nlr: 0.1\n")
    run_cli("diagnose", evil, cwd=tmp_path, timeout=HANG)
    assert not (tmp_path / "pwned").exists()


# --- 5. trust in what is read ------------------------------------------------------------------


def test_a_tensorboard_record_with_a_flipped_bit_is_not_read(tmp_path):
    import struct

    import numpy as np
    from torch.utils.tensorboard import SummaryWriter

    from lossdoctor.detectors.engine import diagnose_runs
    from lossdoctor.sources import load_path

    w = SummaryWriter(str(tmp_path / "tb"))
    for i in range(100):
        w.add_scalar("train/loss", 1.696 if i == 50 else 2.0 / (1 + 0.05 * i), i)
    w.close()
    f = next((tmp_path / "tb").glob("events.out.tfevents.*"))
    data = bytearray(f.read_bytes())
    at = data.find(struct.pack("<f", np.float32(1.696)))
    assert at > 0
    # damage of the value: 1.696 becomes NaN (the exponent's bits set), the CRCs left as written
    data[at : at + 4] = struct.pack("<I", struct.unpack("<I", data[at : at + 4])[0] | 0x7F800001)
    assert np.isnan(np.frombuffer(bytes(data[at : at + 4]), "<f4")[0])
    f.write_bytes(bytes(data))
    run = load_path(f)[0]
    assert 50 not in set(run.steps[run.logged("loss")].tolist()) and run.logged("loss").sum() == 99
    assert np.isfinite(run.cols["loss"][run.logged("loss")]).all()
    bad = [n for n in run.notes if getattr(n, "key", "") == "source.tb_bad_record"]
    assert bad and bad[0].values["n"] == 1
    assert "nonfinite_data" not in causes(diagnose_runs([run]))
    p = run_cli("diagnose", f, "--format", "json", timeout=HANG)
    assert p.returncode == 0 and "warning" in p.stderr
    # a damaged length: the read stops there, with a note
    data = bytearray(f.read_bytes())
    data[2000] ^= 0xFF
    f.write_bytes(bytes(data))
    notes = {getattr(n, "key", "") for n in load_path(f)[0].notes}
    assert notes & {"source.tb_bad_length", "source.tb_bad_record"}


def test_crc32c_is_fast():
    import time

    import google_crc32c

    data = os.urandom(32 << 20)
    t0 = time.perf_counter()
    google_crc32c.value(data)
    assert 32 / (time.perf_counter() - t0) > 50  # MB/s: hundreds on a loaded 2-core machine


def test_an_mlflow_store_in_wal_mode_is_left_as_it_was(tmp_path, monkeypatch):
    import sqlite3

    import numpy as np

    mlflow = pytest.importorskip("mlflow")
    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)
    monkeypatch.delenv("MLFLOW_RUN_ID", raising=False)
    db = tmp_path / "store" / "mlflow.db"
    db.parent.mkdir()
    mlflow.set_tracking_uri(f"sqlite:///{db}")
    try:
        mlflow.set_experiment("wal")
        with mlflow.start_run():
            for i in range(40):
                mlflow.log_metric("loss", 2.0 / (1 + i), step=i)
    finally:
        mlflow.set_tracking_uri(None)
    con = sqlite3.connect(db)
    assert con.execute("PRAGMA journal_mode=WAL").fetchone()[0] == "wal"
    con.close()

    def listing():
        return {e.name: (e.stat().st_size, e.stat().st_mtime_ns) for e in os.scandir(db.parent)}

    before = listing()
    assert sorted(before) == ["mlflow.db"]
    for target in (db, f"sqlite:///{db}", db.parent):
        p = run_cli("diagnose", target, "--format", "json", timeout=HANG)
        assert p.returncode == 0, p.stderr
        assert listing() == before
    # a writer still holding the WAL (committed pages not checkpointed): they are read, nothing changes
    writer = sqlite3.connect(db)
    writer.execute("PRAGMA wal_autocheckpoint=0")
    run_id = writer.execute("SELECT run_uuid FROM runs").fetchone()[0]
    writer.execute(
        "INSERT INTO metrics (key, value, timestamp, run_uuid, step, is_nan) VALUES ('loss', 0.0, 0, ?, 40, 1)",
        (run_id,),
    )
    writer.commit()
    try:
        held = listing()
        assert "mlflow.db-wal" in held
        p = run_cli("diagnose", db, "--format", "json", timeout=HANG)
        assert p.returncode == 0, p.stderr
        from lossdoctor.sources import load_path

        run = load_path(db)[0]
        assert run.steps[-1] == 40 and np.isnan(run.cols["loss"][-1])  # the WAL's page was read
        assert listing() == held
    finally:
        writer.close()


# --- 1b. the ranks of a real DDP launch, twice into one log_dir -------------------------------


def reuse_ddp_worker(rank: int, world: int, port: int, out: str, nan: bool) -> None:
    """DDP over gloo, every rank given the same log_dir; a NaN sample on rank 1 at step 2 when `nan`."""
    import dist_workers

    dist_workers._setup(rank, world, port)
    model = nn.parallel.DistributedDataParallel(dist_workers._mlp())
    opt = torch.optim.SGD(model.parameters(), lr=1e-2)
    mon = lossdoctor.watch(model, opt, log_dir=Path(out) / "ld", alerts=False)
    for step in range(4):
        b = dist_workers._batch(rank, step, 1 if nan else -1, 2)
        loss = nn.functional.mse_loss(model(b["x"]), b["y"])
        loss.backward()
        opt.step()
        opt.zero_grad()
        mon.step(loss, batch=b)
    mon.close()
    Path(out, f"rank{rank}-{int(nan)}.json").write_text(
        json.dumps({"log_dir": str(mon.log_dir), "version": mon.version})
    )
    torch.distributed.destroy_process_group()


@pytest.mark.slow
def test_two_ddp_launches_into_one_log_dir_stay_apart(tmp_path):
    import torch.multiprocessing as mp

    import dist_workers
    from lossdoctor.detectors.engine import diagnose_runs
    from lossdoctor.sources import load_path

    for nan in (True, False):
        mp.spawn(reuse_ddp_worker, args=(2, dist_workers.free_port(), str(tmp_path), nan), nprocs=2, join=True)
    got = {(r, n): json.loads((tmp_path / f"rank{r}-{n}.json").read_text()) for r in (0, 1) for n in (0, 1)}
    ld = tmp_path / "ld"
    assert {got[r, 1]["log_dir"] for r in (0, 1)} == {str(ld)}
    assert {got[r, 0]["log_dir"] for r in (0, 1)} == {str(ld / "version_1")}  # both ranks, one folder
    assert sorted(p.name for p in (ld / "version_1").iterdir() if not p.name.startswith(".")) == ["rank-0", "rank-1"]
    newest = load_path(ld)
    assert [r.rank for r in newest] == [0, 1] and diagnose_runs(newest).findings == []
    first = diagnose_runs(load_path(ld, select="version_0"))
    assert any(f.cause == "nonfinite_data" and f.rank == 1 for f in first.findings)
