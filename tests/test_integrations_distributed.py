"""Many ranks: real torch.distributed (gloo, 2 processes on CPU) with DDP and FSDP2."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")
dist = pytest.importorskip("torch.distributed")
if not dist.is_available() or not dist.is_gloo_available():
    pytest.skip("torch.distributed with gloo is not available", allow_module_level=True)

import torch.multiprocessing as mp  # noqa: E402

import dist_workers  # noqa: E402
from conftest import run_cli  # noqa: E402
from dist_workers import free_port  # noqa: E402
from lossdoctor import diagnose  # noqa: E402
from lossdoctor.signals.launch import process_start_time, shared_run_name  # noqa: E402
from lossdoctor.sources.rundir import read_run_dir  # noqa: E402
from msgs import has  # noqa: E402

NAN_RANK, NAN_STEP = 1, 3


def spawn(fn, out: Path) -> list[dict]:
    mp.spawn(fn, args=(2, free_port(), str(out), NAN_RANK, NAN_STEP), nprocs=2, join=True)
    return [json.loads((out / f"rank{r}.json").read_text()) for r in (0, 1)]


@pytest.fixture(scope="module")
def ddp_run(tmp_path_factory):
    out = tmp_path_factory.mktemp("ddp")
    return spawn(dist_workers.ddp_worker, out)


@pytest.mark.slow  # spawns two ranks
def test_ddp_ranks_share_the_default_run_dir(ddp_run):
    dirs = {r["log_dir"] for r in ddp_run}
    assert len(dirs) == 1
    root = Path(dirs.pop())
    assert root.parent.name == "lossdoctor_runs"
    assert sorted(d.name for d in root.iterdir()) == ["rank-0", "rank-1"]


@pytest.mark.slow  # spawns two ranks
def test_ddp_records_reduced_and_local_gradient_norms(ddp_run):
    runs = read_run_dir(ddp_run[0]["log_dir"])
    assert [r.rank for r in runs] == [0, 1]
    for rank, run in enumerate(runs):
        assert run.meta["distributed"]["comm_hook"] is True
        # the user's hook, registered after watch, still did the reduction
        assert ddp_run[rank]["hook_calls"] >= dist_workers.STEPS
        gn = run.col("grad_norm")
        # before the NaN: the all-reduced, pre-clip norm, the same that clip_grad_norm_ returned
        assert gn[:NAN_STEP].tolist() == pytest.approx(ddp_run[rank]["ref"][:NAN_STEP], rel=1e-4)
    local0, local1 = runs[0].col("grad_norm_local"), runs[1].col("grad_norm_local")
    assert not math.isclose(local0[0], local1[0], rel_tol=1e-3)  # each rank's own batch
    # at the NaN step: every rank's reduced gradient is NaN, only rank 1's own one is
    assert not math.isfinite(runs[0].col("grad_norm")[NAN_STEP])
    assert math.isfinite(local0[NAN_STEP]) and not math.isfinite(local1[NAN_STEP])
    assert runs[1].event("batch_nonfinite_detail")[NAN_STEP] == {"x": [2]}
    assert runs[0].col("batch_nonfinite")[NAN_STEP] == 0


@pytest.mark.slow  # spawns two ranks
def test_ddp_nan_on_rank_1_is_nonfinite_data_rank_1(ddp_run):
    report = diagnose(ddp_run[0]["log_dir"])
    f = report.primary
    assert (f.cause, f.rank, f.step, f.samples) == ("nonfinite_data", 1, NAN_STEP, [2])
    # rank 0 only received the NaN through the all-reduce: no finding of its own at that step
    assert not [g for g in report.findings if g.rank == 0 and g.symptom == "nonfinite"]
    assert has(f.evidence, "distributed.echoed", step=NAN_STEP, rank=1), [m.data() for m in f.evidence]
    # the CLI reads the same directory, all ranks
    cli = run_cli("diagnose", ddp_run[0]["log_dir"], "--format", "json")
    assert cli.returncode == 0, cli.stderr
    first = json.loads(cli.stdout)["findings"][0]
    assert (first["cause"], first["rank"], first["step"]) == ("nonfinite_data", 1, NAN_STEP)
    # live, rank 0 saw only itself: its alert for the step says the NaN came from elsewhere
    (run0, _) = read_run_dir(ddp_run[0]["log_dir"])
    live0 = [g for g in run0.live_findings if g["step"] == NAN_STEP]
    assert live0 and all(g["evidence_data"][0]["key"] == "ranks.own_gradient_finite" for g in live0), live0


@pytest.mark.slow  # spawns two ranks
@pytest.mark.timeout(300)
def test_fsdp2_shard_norms_combine_into_the_total(tmp_path):
    ref = spawn(dist_workers.fsdp_worker, tmp_path)
    runs = read_run_dir(tmp_path / "ld")
    assert [r.meta["distributed"]["kind"] for r in runs] == ["fsdp2", "fsdp2"]
    for rank, run in enumerate(runs):
        # the total over both ranks' shards equals FSDP's own clip_grad_norm_ total
        assert run.col("grad_norm")[:NAN_STEP].tolist() == pytest.approx(ref[rank]["ref"][:NAN_STEP], rel=1e-4)
    shard0, shard1 = runs[0].col("grad_norm_local"), runs[1].col("grad_norm_local")
    total = runs[0].col("grad_norm")
    assert (shard0[:NAN_STEP] ** 2 + shard1[:NAN_STEP] ** 2).tolist() == pytest.approx(
        (total[:NAN_STEP] ** 2).tolist(), rel=1e-4
    )
    report = diagnose(tmp_path / "ld")
    f = report.primary
    assert (f.cause, f.rank, f.step) == ("nonfinite_data", 1, NAN_STEP)
    # rank 1's monitor failed at FAIL_STEP; both ranks finished (no one left in the all-reduce),
    # and rank 0 knows the total of the next step is incomplete rather than reporting half of it
    fail = dist_workers.FAIL_STEP
    assert len(runs[0]) == dist_workers.STEPS and len(runs[1]) == fail
    assert runs[0].logged("grad_norm_local")[fail + 1] and not runs[0].logged("grad_norm")[fail + 1]


def test_shared_run_name_comes_from_the_launch():
    # one node: the launcher process names the run, identical for all its children
    assert shared_run_name({}, ppid=4242).endswith("-launcher4242")
    assert shared_run_name({"WORLD_SIZE": "4", "LOCAL_WORLD_SIZE": "4"}, ppid=7).endswith("-launcher7")
    # several nodes: a job or rendezvous id, or nothing (then the user must pass log_dir)
    multi = {"WORLD_SIZE": "16", "LOCAL_WORLD_SIZE": "8"}
    assert shared_run_name({**multi, "SLURM_JOB_ID": "991", "SLURM_STEP_ID": "2"}) == "slurm-991.2"
    assert shared_run_name({**multi, "TORCHELASTIC_RUN_ID": "job/7"}) == "torchrun-job_7"
    assert shared_run_name({**multi, "TORCHELASTIC_RUN_ID": "none"}) is None


def test_process_start_time_is_when_the_process_began():
    import os
    import time

    t = process_start_time(os.getpid())
    if t is None:
        pytest.skip("no /proc on this platform")
    assert time.time() - 3600 < t <= time.time() + 1


@pytest.mark.slow  # spawns two ranks
def test_hf_trainer_under_ddp_measures_the_all_reduced_gradient(tmp_path):
    pytest.importorskip("transformers")
    ref = spawn(dist_workers.hf_ddp_worker, tmp_path)
    assert ref[0]["wrapped"] == "DistributedDataParallel"
    runs = read_run_dir(tmp_path / "ld")
    assert [r.rank for r in runs] == [0, 1]
    for rank, run in enumerate(runs):
        assert run.meta["distributed"] == {"kind": "ddp", "comm_hook": True, "grad_norm": "all-reduced"}
        # the Trainer logs the averaged, pre-clip norm: the callback reached DDP and measured the same
        assert run.col("grad_norm").tolist() == pytest.approx(ref[rank]["ref"], rel=1e-4)
        # tokens are averaged across ranks (num_items_in_batch is global, the loss x world size):
        # still one per-token mean per step
        assert run.col("loss_weight").tolist() == pytest.approx([1.0] * len(run), abs=0.05)
    assert not math.isclose(runs[0].col("grad_norm_local")[0], runs[1].col("grad_norm_local")[0], rel_tol=1e-3)
