"""Pipeline parallel: `watch(stage, optimizer)` on each rank's `PipelineStage` of a small transformer
cut into 2 stages, trained by the schedule torch ships (`torch.distributed.pipelining`, gloo on
CPU, two processes launched with torchrun; the worker is `pp_worker.py`)."""

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
pytest.importorskip("torch.distributed.pipelining")

import pp_worker  # noqa: E402
from conftest import cli_env  # noqa: E402
from lossdoctor.sources.rundir import read_run_dir  # noqa: E402

WORKER = Path(__file__).with_name("pp_worker.py")
FAULT_STEP = 5


def launch(out: Path, fault: str, schedule: str = "gpipe", console: str = "titan", watched: str = "stage") -> list[dict]:
    """`torchrun --nproc_per_node 2 --role rank --tee 3 pp_worker.py` (torchtitan's launcher flags:
    every line the ranks print comes prefixed `[rankN]:`); each rank's reference numbers. What the
    ranks printed, as torchtitan or Megatron print it, is kept in OUT/console.log."""
    from dist_workers import free_port

    cmd = [sys.executable, "-m", "torch.distributed.run", "--nproc_per_node", "2", "--master_port",
           str(free_port()), "--role", "rank", "--tee", "3", str(WORKER), str(out), fault, str(FAULT_STEP),
           schedule, console, watched]
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=300, env=cli_env())
    assert p.returncode == 0, p.stdout[-3000:] + p.stderr[-3000:]
    (out / "console.log").write_text(p.stdout)
    return [json.loads((out / f"rank{r}.json").read_text()) for r in range(2)]


def test_one_stage_pipeline_in_one_process(tmp_path):
    """`watch(stage, opt)` on a 1-stage pipeline (one process, a gloo group of one, no torchrun):
    the schedule's placeholder pass is not recorded, the 4 micro-batches are one step, and the norm
    is taken after the schedule divided the gradients by the micro-batches."""
    from dist_workers import free_port

    env = {**cli_env(), "RANK": "0", "LOCAL_RANK": "0", "WORLD_SIZE": "1", "LOCAL_WORLD_SIZE": "1",
           "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(free_port())}
    p = subprocess.run([sys.executable, str(WORKER), str(tmp_path), "none", str(FAULT_STEP), "gpipe", "megatron"],
                       capture_output=True, text=True, timeout=120, env=env)
    assert p.returncode == 0, p.stdout[-3000:] + p.stderr[-3000:]
    ref = json.loads((tmp_path / "rank0.json").read_text())
    (run,) = read_run_dir(tmp_path / "ld")
    assert ref["warnings"] == []
    d = run.meta["distributed"]
    assert (d["kind"], d["stage"], d["num_stages"], d["mesh"]) == ("pp", 0, 1, {"pp": 1})
    assert run.col("accum_steps").tolist() == [pp_worker.MICRO] * pp_worker.STEPS
    assert run.col("grad_norm").tolist() == pytest.approx(ref["ref"], rel=1e-2)  # not 4x: after scale_grads
    assert 0 < run.col("act_absmax")[0] < 100  # the placeholder pass on torch.empty inputs is not in it
    assert run.col("loss").tolist() == pytest.approx(ref["losses"], rel=1e-6)
    assert ref["calls"] == {"all_reduce": pp_worker.STEPS}  # the total over the group of one


def keys(items) -> list[str]:
    return [getattr(x, "key", None) for x in items]


@pytest.fixture(scope="module")
def healthy(tmp_path_factory):
    out = tmp_path_factory.mktemp("pp_ok")
    return out, launch(out, "none")


@pytest.fixture(scope="module")
def weight_nan(tmp_path_factory):
    out = tmp_path_factory.mktemp("pp_weight")
    return out, launch(out, "weight", "1f1b", console="megatron")


@pytest.mark.slow
def test_pp_stages_record_every_step_and_the_total_grad_norm(healthy):
    out, ref = healthy
    runs = read_run_dir(out / "ld")
    assert [r.rank for r in runs] == [0, 1]
    for rank, run in enumerate(runs):
        d = run.meta["distributed"]
        assert (d["kind"], d["stage"], d["num_stages"], d["last_stage"]) == ("pp", rank, 2, rank == 1)
        assert (d["mesh"], d["coordinate"]) == ({"pp": 2}, {"pp": rank})
        assert ref[rank]["warnings"] == []
        assert run.steps.tolist() == list(range(pp_worker.STEPS))
        # the four micro-batches of a step are one optimizer step
        assert run.col("accum_steps").tolist() == [pp_worker.MICRO] * pp_worker.STEPS
        # the total over both stages, after the schedule divided the gradients by the micro-batches:
        # what clip_grad_norm_ measures across the stages (within the 1%)
        assert run.col("grad_norm").tolist() == pytest.approx(ref[rank]["ref"], rel=1e-2)
        assert all(run.col("grad_norm_local") < run.col("grad_norm"))
        # the stage's optimizer applies its own stage's gradients: what the clipping check compares
        applied = run.logged("grad_norm_applied")
        assert applied.any()
        assert run.col("grad_norm_applied")[applied].tolist() == pytest.approx(
            run.col("grad_norm_local")[applied].tolist(), rel=1e-4)
        # one all-reduce per step for it (the pipeline's own traffic is point-to-point)
        assert ref[rank]["calls"] == {"all_reduce": pp_worker.STEPS}
        # the placeholder pass of the first schedule step (torch.empty activations) is not recorded
        assert 0 < run.col("act_absmax")[0] < 100
    # the loss lives on the last stage
    assert not runs[0].has("loss") or not runs[0].logged("loss").any()
    assert runs[1].col("loss").tolist() == pytest.approx(ref[1]["losses"], rel=1e-5)
    # each stage measured its own layers, under the full model's names
    assert "layers.0.attn" in runs[0].layers.modules and "layers.2.attn" not in runs[0].layers.modules
    assert "layers.2.attn" in runs[1].layers.modules and "output" in runs[1].layers.modules


@pytest.mark.slow
def test_pp_healthy_run_stays_healthy(healthy):
    from lossdoctor import diagnose

    out, _ = healthy
    report = diagnose(out / "ld")
    # no false bad_init on stage 1 (fed placeholders once), no "no loss" finding on stage 0
    assert report.status == "healthy", [f.to_dict() for f in report.findings]
    # the replay_fn the worker passed is refused on both stages, each saying why
    runs = read_run_dir(out / "ld")
    assert "distributed.replay_skipped_pp_first" in keys(runs[0].notes)
    assert "distributed.replay_skipped_pp_later" in keys(runs[1].notes)


def _began(f) -> dict:
    said = [e for e in f.evidence if getattr(e, "key", "") == "distributed.began_on_stage"]
    assert said, keys(f.evidence)
    return said[0].values


@pytest.mark.slow
def test_pp_nan_in_stage0_weights_is_found_at_its_step_stage_and_layer(weight_nan):
    from lossdoctor import diagnose

    out, ref = weight_nan
    runs = read_run_dir(out / "ld")
    assert ref[0]["ref"][FAULT_STEP - 1] == pytest.approx(runs[0].col("grad_norm")[FAULT_STEP - 1], rel=1e-2)
    # both stages went non-finite in the forward of the step: stage 0 first, in its own layer
    assert runs[0].event("fwd_first_nonfinite")[FAULT_STEP]["layer"] == "layers.1.mlp.up"
    assert runs[1].event("fwd_first_nonfinite")[FAULT_STEP]["layer"] == "layers.2"
    f = diagnose(out / "ld").primary
    assert (f.symptom, f.rank, f.step, f.layer) == ("nonfinite", 0, FAULT_STEP, "layers.1.mlp.up")
    assert _began(f) == {"rank": 0, "stage": 0, "stages": 2, "coordinate": "pp=0", "layer": "layers.1.mlp.up"}
    echoed = [e for e in f.evidence if getattr(e, "key", "") == "distributed.echoed_pp"]
    assert echoed and (echoed[0].values["ranks"], echoed[0].values["stages"]) == ("1", "1")


@pytest.mark.slow
def test_pp_nan_in_the_last_stages_batch_is_found_on_that_stage(tmp_path):
    from lossdoctor import diagnose

    ref = launch(tmp_path, "batch", watched="module")  # watch(stage.submod, opt): the stage is found
    runs = read_run_dir(tmp_path / "ld")
    assert [r.meta["distributed"]["stage"] for r in runs] == [0, 1]
    assert runs[1].col("grad_norm")[:FAULT_STEP].tolist() == pytest.approx(ref[1]["ref"][:FAULT_STEP], rel=1e-2)
    # stage 0's forward stayed finite; the NaN came back to it in the backward of the same step
    assert FAULT_STEP not in runs[0].event("fwd_first_nonfinite")
    assert FAULT_STEP in runs[0].event("bwd_first_nonfinite")
    ld = tmp_path / "ld"
    report = diagnose(ld)
    f = report.primary
    assert (f.symptom, f.rank, f.step, f.layer) == ("nonfinite", 1, FAULT_STEP, "layers.2")
    assert _began(f)["stage"] == 1 and _began(f)["coordinate"] == "pp=1"
    # stage 0's echo is not a finding of its own
    assert [x.rank for x in report.findings if x.symptom == "nonfinite"] == [1]
    assert math.isnan(runs[1].col("loss")[FAULT_STEP])

    # offline: what the ranks printed (torchtitan's lines, rank 0's placeholder loss among them)
    console = diagnose(tmp_path / "console.log")
    bad = [x for x in console.findings if x.symptom == "nonfinite"]
    assert bad and bad[0].step == FAULT_STEP + 1  # torchtitan counts steps from 1
    (run,) = load_path(tmp_path / "console.log")
    notes = {getattr(n, "key", None): n for n in run.notes}
    assert notes["parallel_logs.first_nonfinite"].values["rank"] == 1
    assert notes["parallel_logs.first_nonfinite"].values["step"] == FAULT_STEP + 1
    assert run.col("loss")[:FAULT_STEP].tolist() == pytest.approx(ref[1]["losses"][:FAULT_STEP], abs=1e-4)


def load_path(path):
    from lossdoctor.sources import load_path as load

    return load(path)


@pytest.mark.slow
def test_pp_torchtitan_console_of_both_stages_is_one_run_with_the_last_stages_loss(healthy):
    out, ref = healthy
    (run,) = load_path(out / "console.log")
    assert run.steps.tolist() == list(range(1, pp_worker.STEPS + 1))
    # the last stage's loss, never stage 0's placeholder -1.0 printed at the same steps
    assert run.col("loss").tolist() == pytest.approx(ref[1]["losses"], abs=1e-4)
    assert run.col("grad_norm").tolist() == pytest.approx(ref[0]["ref"], abs=1e-4)
    assert run.meta["distributed"] == {"kind": "pp", "mesh": {"pp": 2}, "loss_ranks": [1], "read_rank": 1,
                                       "loss_stage": 1, "no_loss_ranks": [0]}
    notes = {getattr(n, "key", None): n for n in run.notes}
    assert notes["parallel_logs.read_rank_stage"].values == {"rank": 1, "loss_ranks": "1", "others": pp_worker.STEPS,
                                                             "stage": 1, "mesh": "pp=2"}
    assert notes["parallel_logs.placeholder"].values["ranks"] == "0"


@pytest.mark.slow
def test_pp_megatron_console_names_the_stage_that_printed_the_loss(weight_nan):
    from lossdoctor import diagnose

    out, ref = weight_nan
    (run,) = load_path(out / "console.log")
    d = run.meta["distributed"]
    assert (d["kind"], d["mesh"], d["read_rank"], d["loss_stage"]) == ("pp", {"pp": 2}, 1, 1)
    assert run.meta["args"]["pipeline_model_parallel_size"] == 2  # rank 0's arguments block is read
    assert run.col("loss")[:FAULT_STEP].tolist() == pytest.approx(ref[1]["losses"][:FAULT_STEP], rel=1e-5)
    bad = [x for x in diagnose(out / "console.log").findings if x.symptom == "nonfinite"]
    assert bad and bad[0].step == FAULT_STEP + 1


@pytest.mark.slow
def test_pp_script_under_lossdoctor_run_is_watched_per_stage(tmp_path):
    """`lossdoctor run -- torchrun ... pp_worker.py` with no `watch` in the script: the attached
    monitor finds each rank's stage from the module it watches."""
    from conftest import run_cli
    from dist_workers import free_port

    ld = tmp_path / "attached"
    p = run_cli("run", "--log-dir", ld, "--no-alerts", "--", sys.executable, "-m", "torch.distributed.run",
                "--nproc_per_node", "2", "--master_port", str(free_port()), WORKER, tmp_path, "none",
                str(FAULT_STEP), "gpipe", "titan", "none", timeout=300)
    assert p.returncode == 0, p.stdout[-3000:] + p.stderr[-3000:]
    ref = [json.loads((tmp_path / f"rank{r}.json").read_text()) for r in range(2)]
    runs = read_run_dir(ld)
    for rank, run in enumerate(runs):
        d = run.meta["distributed"]
        assert (d["kind"], d["stage"], d["mesh"]) == ("pp", rank, {"pp": 2})
        assert run.col("grad_norm").tolist() == pytest.approx(ref[rank]["ref"], rel=1e-2)
    # the loss the attach records is the one the last backward started from: the last micro-batch's
    assert runs[1].logged("loss").sum() == pp_worker.STEPS and not runs[0].logged("loss").any()
