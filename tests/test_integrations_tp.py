"""Tensor parallel: `watch` on a model split with `parallelize_module` (DTensor over gloo, two
processes on CPU launched with torchrun, the worker in `tp_worker.py`)."""

from __future__ import annotations

import json
import math
import subprocess
import sys
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")
dist = pytest.importorskip("torch.distributed")
if not dist.is_available() or not dist.is_gloo_available():
    pytest.skip("torch.distributed with gloo is not available", allow_module_level=True)
pytest.importorskip("torch.distributed.tensor.parallel")

from conftest import cli_env  # noqa: E402
from lossdoctor.runlog import read_run_dir  # noqa: E402

WORKER = Path(__file__).with_name("tp_worker.py")
NAN_RANK, NAN_STEP = 1, 3


def launch(out: Path, nan_rank: int) -> list[dict]:
    """`torchrun --nproc_per_node 2 tp_worker.py`; each rank's reference numbers."""
    from dist_workers import free_port

    cmd = [sys.executable, "-m", "torch.distributed.run", "--nproc_per_node", "2", "--master_port",
           str(free_port()), str(WORKER), str(out), str(nan_rank), str(NAN_STEP)]
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=300, env=cli_env())
    assert p.returncode == 0, p.stdout[-3000:] + p.stderr[-3000:]
    return [json.loads((out / f"rank{r}.json").read_text()) for r in (0, 1)]


@pytest.fixture(scope="module")
def nan_run(tmp_path_factory):
    out = tmp_path_factory.mktemp("tp_nan")
    return out, launch(out, NAN_RANK)


@pytest.mark.slow
def test_tp_ranks_record_every_step_from_their_shards(nan_run):
    out, ref = nan_run
    runs = read_run_dir(out / "ld")
    assert [r.rank for r in runs] == [0, 1]
    for rank, run in enumerate(runs):
        assert ref[rank]["warnings"] == []  # neither preflight nor a step part disabled itself
        assert run.steps.tolist() == list(range(6))
        assert math.isfinite(run.col("act_absmax")[0]) and run.col("act_absmax")[0] > 0
        # the preflight's init check read each matrix's local shard
        rms = ref[rank]["weight_rms"]
        assert sorted(rms) == ["down", "head", "up"]
        assert all(0 < v < 1 for v in rms.values())
