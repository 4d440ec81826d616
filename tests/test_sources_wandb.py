"""Weights & Biases: offline run directories written by the real wandb client, the CSV that the W&B
UI exports from a panel, and the wandb-history.jsonl of old clients."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest

import logfaults
from conftest import run_cli
from lossdoctor.detectors.engine import diagnose_runs
from lossdoctor.sources import load_path
from msgs import has


def _offline_run(root, curve: dict) -> None:
    wandb = pytest.importorskip("wandb")
    run = wandb.init(
        mode="offline",
        project="lossdoctor-test",
        dir=str(root),
        config={"max_grad_norm": 1.0, "logging_steps": 1},
        settings=wandb.Settings(silent=True, console="off", x_disable_stats=True),
    )
    for i, step in enumerate(curve["step"]):
        run.log(
            {
                "train/loss": float(curve["loss"][i]),
                "train/grad_norm": float(curve["grad_norm"][i]),
                "train/learning_rate": float(curve["lr"][i]),
                "train/global_step": int(step),
            }
        )
    run.finish()


@pytest.fixture(scope="module")
def wandb_runs(tmp_path_factory):
    root = tmp_path_factory.mktemp("wandb")
    for name in ("healthy", "grad_explosion"):
        _offline_run(root / name, logfaults.CURVES[name]())
    return root


@pytest.mark.parametrize("name", ["healthy", "grad_explosion"])
def test_offline_run(wandb_runs, name):
    files = list((wandb_runs / name / "wandb").glob("offline-run-*/run-*.wandb"))
    assert len(files) == 1
    runs = load_path(wandb_runs / name)  # the directory that holds wandb/
    run = runs[0]
    curve = logfaults.CURVES[name]()
    assert run.source == "wandb" and len(run) == len(curve["step"])
    np.testing.assert_allclose(run.cols["loss"], curve["loss"], rtol=1e-12, equal_nan=True)
    assert run.meta["max_grad_norm"] == 1.0  # from the run config
    logfaults.check(diagnose_runs(runs), name)


def _record_starts(data: bytes) -> list[int]:
    """Where each record header of a W&B transaction log starts (LevelDB's log: 32 KiB blocks, a 7-byte
    header `crc u32, length u16, type u8` before each fragment, a block's last < 7 bytes zero padding)."""
    block, header, pos, out = 32768, 7, 7, []
    while pos + header <= len(data):
        room = block - pos % block
        if room < header:
            pos += room
            continue
        length, kind = int.from_bytes(data[pos + 4 : pos + 6], "little"), data[pos + 6]
        if kind == 0 and length == 0:
            pos += room
            continue
        out.append(pos)
        pos += header + length
    return out


def test_torn_wandb_file_is_a_partial_read(wandb_runs, tmp_path):
    """A file cut inside a record (its payload, its header, or between the fragments of a record that
    spans two blocks) reads up to there and says it is torn; cut where one record ends and the next
    begins it is a whole shorter log, which no reader can tell from one, so the cuts are chosen inside."""
    src = next((wandb_runs / "healthy" / "wandb").glob("offline-run-*/run-*.wandb"))
    data = src.read_bytes()
    starts = _record_starts(data)
    at = next(i for i, p in enumerate(starts) if p >= len(data) * 2 // 3)
    spans = next(
        (p for p in starts if p // 32768 != (p + 7 + int.from_bytes(data[p + 4 : p + 6], "little")) // 32768), None
    )
    cuts = {"payload": (starts[at] + starts[at + 1]) // 2, "header": starts[at] + 3}
    if spans is not None:  # a record whose fragments straddle a block boundary: cut after its first one
        cuts["fragments"] = 32768 * (spans // 32768 + 1) + 7
    for how, cut in cuts.items():
        torn = tmp_path / f"run-torn-{how}.wandb"
        torn.write_bytes(data[:cut])
        run = load_path(torn)[0]
        assert 0 < len(run) < 300, how
        assert has(run.notes, "source.wandb_torn") or has(run.notes, "source.wandb_bad_checksum"), (
            how,
            [getattr(m, "key", m) for m in run.notes],
        )
    p = run_cli("diagnose", tmp_path / "run-torn-payload.wandb")
    assert p.returncode == 0 and "warning" in p.stderr


def _export_csv(path, curve: dict, runs=("run-a", "run-b")) -> None:
    """The panel export: Step, then `<run> - <metric>` with __MIN/__MAX envelopes per run."""
    cols = ["Step"]
    for r in runs:
        cols += [
            f"{r} - train/loss_scale",
            f"{r} - train/loss_scale__MIN",
            f"{r} - train/loss_scale__MAX",
            f"{r} - train/loss",
            f"{r} - train/loss__MIN",
            f"{r} - train/loss__MAX",
        ]
    lines = [",".join(f'"{c}"' for c in cols)]
    for i, s in enumerate(curve["step"]):
        row = [str(int(s))]
        for _ in runs:
            sc, lo = float(curve["scale"][i]), float(curve["loss"][i])
            row += [repr(sc)] * 3 + ["" if math.isnan(lo) else repr(lo)] * 3
        lines.append(",".join(row))
    path.write_text("\n".join(lines) + "\n")


def test_wandb_csv_export(tmp_path):
    p = tmp_path / "wandb_export_2024-05-01T10_00_00.csv"
    _export_csv(p, logfaults.scale_collapse())
    runs = load_path(p)
    assert runs[0].source == "wandb_csv"
    assert runs[0].meta["columns"]["scale"] == "train/loss_scale"
    assert any("2 runs" in n and "run-a" in n for n in runs[0].notes)
    logfaults.check(diagnose_runs(runs), "scale_collapse")


def test_legacy_history_jsonl(tmp_path):
    curve = logfaults.lr_too_high()
    d = tmp_path / "run-20200101_000000-abc" / "files"
    d.mkdir(parents=True)
    with open(d / "wandb-history.jsonl", "w") as f:
        for i, s in enumerate(curve["step"]):
            f.write(
                json.dumps(
                    {"_step": int(s), "_runtime": i * 0.1, "loss": float(curve["loss"][i]), "lr": float(curve["lr"][i])}
                )
                + "\n"
            )
    p = run_cli("diagnose", tmp_path, "--format", "json")
    assert p.returncode == 0, p.stderr
    logfaults.check(json.loads(p.stdout), "lr_too_high")
