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
from lossdoctor.findings import Finding  # noqa: E402
from lossdoctor.sources.rundir import read_run_dir  # noqa: E402
from msgs import has  # noqa: E402

WORKER = Path(__file__).with_name("pp_worker.py")
FAULT_STEP = 5


def launch(
    out: Path, fault: str, schedule: str = "gpipe", console: str = "titan", watched: str = "stage", replay: str = "on"
) -> list[dict]:
    """`torchrun --nproc_per_node 2 --role rank --tee 3 pp_worker.py` (torchtitan's launcher flags:
    every line the ranks print comes prefixed `[rankN]:`); each rank's reference numbers. What the
    ranks printed, as torchtitan or Megatron print it, is kept in OUT/console.log. `replay="on"`:
    each rank passes a `replay_fn` (its stage's micro-batches are recorded, an incident replayed)."""
    from dist_workers import free_port

    cmd = [
        sys.executable,
        "-m",
        "torch.distributed.run",
        "--nproc_per_node",
        "2",
        "--master_port",
        str(free_port()),
        "--role",
        "rank",
        "--tee",
        "3",
        str(WORKER),
        str(out),
        fault,
        str(FAULT_STEP),
        schedule,
        console,
        watched,
        replay,
    ]
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=300, env=cli_env())
    assert p.returncode == 0, p.stdout[-3000:] + p.stderr[-3000:]
    (out / "console.log").write_text(p.stdout)
    return [json.loads((out / f"rank{r}.json").read_text()) for r in range(2)]


def test_one_stage_pipeline_in_one_process(tmp_path):
    """`watch(stage, opt)` on a 1-stage pipeline (one process, a gloo group of one, no torchrun):
    the schedule's placeholder pass is not recorded, the 4 micro-batches are one step, and the norm
    is taken after the schedule divided the gradients by the micro-batches."""
    from dist_workers import free_port

    env = {
        **cli_env(),
        "RANK": "0",
        "LOCAL_RANK": "0",
        "WORLD_SIZE": "1",
        "LOCAL_WORLD_SIZE": "1",
        "MASTER_ADDR": "127.0.0.1",
        "MASTER_PORT": str(free_port()),
    }
    p = subprocess.run(
        [sys.executable, str(WORKER), str(tmp_path), "none", str(FAULT_STEP), "gpipe", "megatron"],
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
    )
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
            run.col("grad_norm_local")[applied].tolist(), rel=1e-4
        )
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
    # the replay_fn the worker passed turns on the replay of each stage alone: nothing refused
    runs = read_run_dir(out / "ld")
    for run in runs:
        assert run.meta["triage"]["replay"] == "stage"
        assert not [k for k in keys(run.notes) if k and "replay_skipped" in k]
        assert not (out / "ld" / f"rank-{run.rank}" / "incidents").exists()


@pytest.mark.slow
def test_pp_recording_the_stages_leaves_training_bit_identical(healthy, tmp_path):
    """The same run without a replay_fn (no stage tape, no snapshots): every loss and every total
    gradient norm the ranks computed themselves is the same to the last bit, and no collective was
    added."""
    _, with_tape = healthy
    without = launch(tmp_path, "none", replay="off")
    for rank in range(2):
        assert with_tape[rank]["losses"] == without[rank]["losses"]
        assert with_tape[rank]["ref"] == without[rank]["ref"]
        assert with_tape[rank]["calls"] == without[rank]["calls"] == {"all_reduce": pp_worker.STEPS}
    (run,) = [r for r in read_run_dir(tmp_path / "ld") if r.rank == 1]
    assert run.meta["triage"]["replay"] is False


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
    # stage 0 replayed alone (1F1B), faithfully from step 0: the weight the worker spoilt between two
    # steps is not what training made of the recorded micro-batches, so the forward stays finite
    rec = incident(out / "ld", 0)
    assert rec["replay"]["steps_replayed"] == FAULT_STEP and rec["replay"]["faithful"]
    assert (rec["reproducible"], f.cause) == (False, "nondeterministic_fault")


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
    # a fault that reached stage 0 in its backward is not replayed there; its record says why: the
    # gradient stage 1 sent back for the first micro-batch was already non-finite
    first = incident(ld, 0)
    assert (first["level"], first.get("replay")) == ("live", None)
    assert has(
        Finding.from_dict(first["findings"][0]).evidence,
        "triage.stage.bwd_from_next",
        stage=0,
        step=FAULT_STEP,
        next=1,
        micro=0,
    )
    # stage 1, replayed alone on the activations it received (recorded before the worker's hook on
    # its first layer spoilt them) and its weights, stays finite: the NaN was not made by them
    last = incident(ld, 1)
    assert last["replay"]["reached"] and last["replay"]["faithful"] and last["reproducible"] is False
    assert last["findings"][0]["cause"] == "nondeterministic_fault"

    # offline: what the ranks printed (torchtitan's lines, rank 0's placeholder loss among them)
    console = diagnose(tmp_path / "console.log")
    bad = [x for x in console.findings if x.symptom == "nonfinite"]
    assert bad and bad[0].step == FAULT_STEP + 1  # torchtitan counts steps from 1
    (run,) = load_path(tmp_path / "console.log")
    notes = {getattr(n, "key", None): n for n in run.notes}
    assert notes["parallel_logs.first_nonfinite"].values["rank"] == 1
    assert notes["parallel_logs.first_nonfinite"].values["step"] == FAULT_STEP + 1
    assert run.col("loss")[:FAULT_STEP].tolist() == pytest.approx(ref[1]["losses"][:FAULT_STEP], abs=1e-4)


def incident(ld: Path, rank: int) -> dict:
    return json.loads((ld / f"rank-{rank}" / "incidents" / f"step-{FAULT_STEP:08d}.json").read_text())


@pytest.mark.slow
def test_pp_last_stage_replayed_alone_names_the_layer_op_and_micro_batch(tmp_path):
    """A temperature of 0 for one sample, a keyword input of the last stage (ScheduleGPipe): the
    last stage, replayed alone from the snapshot of step 0 on its recorded micro-batches, names
    the op and layer that made the Inf, the micro-batch, and the sample in the step's batch."""
    from lossdoctor import diagnose

    launch(tmp_path, "temper")
    ld = tmp_path / "ld"
    f = diagnose(ld).primary
    assert (f.symptom, f.rank, f.step) == ("nonfinite", 1, FAULT_STEP)
    assert (f.rule, f.layer, f.op, f.samples) == ("triage.stage_replay", "temper", "aten.div", [pp_worker.BAD_SAMPLE])
    assert has(f.evidence, "triage.stage.replayed_from", stage=1, stages=2, start=0, step=FAULT_STEP, n=FAULT_STEP)
    micro, first = divmod(pp_worker.BAD_SAMPLE, pp_worker.BATCH // pp_worker.MICRO)
    size = pp_worker.BATCH // pp_worker.MICRO
    assert has(
        f.evidence,
        "triage.stage.micro_batch",
        micro=micro,
        n=pp_worker.MICRO,
        first=micro * size,
        last=micro * size + size - 1,
    )
    assert has(f.evidence, "triage.stage.within", local=[first], ids=[pp_worker.BAD_SAMPLE])
    assert _began(f)["stage"] == 1 and _began(f)["layer"] == "temper"
    rec = incident(ld, 1)
    rep = rec["replay"]
    assert (rep["from_step"], rep["steps_replayed"], rep["reached"], rep["faithful"]) == (0, FAULT_STEP, True, True)
    assert rep["max_rel_deviation"] < 1e-6 and [s["micro_batches"] for s in rep["steps"]] == [pp_worker.MICRO] * 5
    loc = rec["localization"]
    assert (loc["micro_batch"], loc["micro_batch_samples"], loc["step_samples"]) == (
        micro,
        [first],
        [pp_worker.BAD_SAMPLE],
    )
    assert rec["reproducible"] is True and rec["level"] == "replay"
    # stage 0's forward stayed finite: not replayed, and its record says the gradient came back bad
    assert has(
        Finding.from_dict(incident(ld, 0)["findings"][0]).evidence,
        "triage.stage.bwd_from_next",
        stage=0,
        next=1,
        micro=micro,
    )


@pytest.mark.slow
def test_pp_first_stage_replayed_alone_names_the_bad_input_sample(tmp_path):
    """A NaN in the first stage's input features (Schedule1F1B): stage 0's replay names the batch
    tensor, the layer that read it, the micro-batch and the sample."""
    from lossdoctor import diagnose

    launch(tmp_path, "input", "1f1b", console="megatron")
    f = diagnose(tmp_path / "ld").primary
    assert (f.cause, f.rank, f.step, f.layer, f.op) == ("nonfinite_data", 0, FAULT_STEP, "feat_proj", "aten.addmm")
    assert f.samples == [pp_worker.BAD_SAMPLE]
    micro = pp_worker.BAD_SAMPLE // (pp_worker.BATCH // pp_worker.MICRO)
    assert has(f.evidence, "triage.stage.micro_batch", micro=micro, n=pp_worker.MICRO)
    assert has(f.evidence, "triage.data.nonfinite", keys=["'feats'"])
    rec = incident(tmp_path / "ld", 0)
    assert rec["localization"]["step_samples"] == [pp_worker.BAD_SAMPLE] and rec["replay"]["faithful"]


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
    assert run.meta["distributed"] == {
        "kind": "pp",
        "mesh": {"pp": 2},
        "loss_ranks": [1],
        "read_rank": 1,
        "loss_stage": 1,
        "no_loss_ranks": [0],
    }
    notes = {getattr(n, "key", None): n for n in run.notes}
    assert notes["parallel_logs.read_rank_stage"].values == {
        "rank": 1,
        "loss_ranks": "1",
        "others": pp_worker.STEPS,
        "stage": 1,
        "mesh": "pp=2",
    }
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
    p = run_cli(
        "run",
        "--log-dir",
        ld,
        "--no-alerts",
        "--",
        sys.executable,
        "-m",
        "torch.distributed.run",
        "--nproc_per_node",
        "2",
        "--master_port",
        str(free_port()),
        WORKER,
        tmp_path,
        "none",
        str(FAULT_STEP),
        "gpipe",
        "titan",
        "none",
        timeout=300,
    )
    assert p.returncode == 0, p.stdout[-3000:] + p.stderr[-3000:]
    ref = [json.loads((tmp_path / f"rank{r}.json").read_text()) for r in range(2)]
    runs = read_run_dir(ld)
    for rank, run in enumerate(runs):
        d = run.meta["distributed"]
        assert (d["kind"], d["stage"], d["mesh"]) == ("pp", rank, {"pp": 2})
        assert run.col("grad_norm").tolist() == pytest.approx(ref[rank]["ref"], rel=1e-2)
    # the loss the attach records is the one the last backward started from: the last micro-batch's
    assert runs[1].logged("loss").sum() == pp_worker.STEPS and not runs[0].logged("loss").any()
