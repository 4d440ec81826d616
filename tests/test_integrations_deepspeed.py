"""DeepSpeed ZeRO on CPU with the real `deepspeed` package: two ranks (gloo), `lossdoctor.watch(engine)`.

The first DeepSpeed start on a machine compiles its shared-memory communication op (about a minute
on two cores, cached afterwards under ~/.cache/torch_extensions); the fixture's timeout allows it.
"""

from __future__ import annotations

import json
import math

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("deepspeed")
dist = pytest.importorskip("torch.distributed")
if not dist.is_available() or not dist.is_gloo_available():
    pytest.skip("torch.distributed with gloo is not available", allow_module_level=True)

import torch.multiprocessing as mp  # noqa: E402

import ds_workers as W  # noqa: E402
from conftest import run_cli  # noqa: E402
from dist_workers import free_port  # noqa: E402
from lossdoctor import diagnose  # noqa: E402
from lossdoctor.sources.rundir import read_run_dir  # noqa: E402
from msgs import has, keys  # noqa: E402

pytestmark = [pytest.mark.timeout(400), pytest.mark.slow]


@pytest.fixture(scope="module")
def zero(tmp_path_factory):
    out = tmp_path_factory.mktemp("ds")
    mp.spawn(W.zero_worker, args=(2, free_port(), str(out)), nprocs=2, join=True)
    return out, [json.loads((out / f"rank{r}.json").read_text()) for r in (0, 1)]


@pytest.mark.parametrize("stage", [0, 1, 2, 3])
def test_zero_nan_sample_on_rank_1_is_nonfinite_data_on_rank_1(zero, stage):
    out, res = zero
    d = out / f"zero{stage}"
    report = diagnose(str(d))
    f = report.primary
    assert (f.cause, f.rank, f.step, f.samples) == ("nonfinite_data", 1, W.NAN_STEP, [2])
    # rank 0 only received the NaN through DeepSpeed's reduction: no non-finite finding of its own
    assert not [g for g in report.findings if g.rank == 0 and g.symptom == "nonfinite"]
    runs = read_run_dir(d)
    assert [r.meta["distributed"]["kind"] for r in runs] == ["deepspeed"] * 2
    assert [r.meta["distributed"]["zero_stage"] for r in runs] == [stage] * 2
    # local evidence: rank 1's own gradient was non-finite, rank 0's was not
    local0, local1 = runs[0].col("grad_norm_local"), runs[1].col("grad_norm_local")
    assert math.isfinite(local0[W.NAN_STEP]) and not math.isfinite(local1[W.NAN_STEP])
    assert runs[1].col("grad_nonfinite")[W.NAN_STEP] == 6 and runs[0].col("grad_nonfinite")[W.NAN_STEP] == 0
    # ZeRO's overflow check skipped the step on both ranks (ZeRO-0 in fp32 has none: the NaN went
    # into the weights); the monitor says skipped, not a misuse of mon.step
    for r in runs:
        assert r.col("skipped").tolist() == [1.0 if s == W.NAN_STEP and stage else 0.0 for s in range(W.NAN_STEPS)]
        assert not r.has("no_optimizer_step")
    # replay_fn was given: refused at ZeRO 1-3 (partitioned state), said in the notes; run at ZeRO-0
    assert all(has(r.notes, "distributed.replay_skipped_zero") == (stage > 0) for r in runs)
    assert "on_incident='skip' is not supported" in res[0][f"zero{stage}"]["skip_refused"]
    if stage:  # the incident says why replay cannot run here, not "pass replay_fn"
        assert not {"triage.live.hint", "triage.live.fix", "nonfinite.fix_replay", "nonfinite.fix_find_nan_op"} & set(
            keys(f.evidence + f.fixes)
        )  # not "pass replay_fn"
        assert has(f.evidence, "distributed.replay_skipped_zero", stage=stage), [m.data() for m in f.evidence]
    cli = run_cli("diagnose", d, "--format", "json")
    assert cli.returncode == 0, cli.stderr
    first = json.loads(cli.stdout)["findings"][0]
    assert (first["cause"], first["rank"], first["step"]) == ("nonfinite_data", 1, W.NAN_STEP)


@pytest.mark.parametrize("stage", [1, 2, 3])
def test_zero_grad_norms_are_deepspeeds_global_and_the_ranks_own(zero, stage):
    out, res = zero
    runs = read_run_dir(out / f"zero{stage}")
    for rank, run in enumerate(runs):
        ds = [math.inf if n is None else n for n in res[rank][f"zero{stage}"]["ds_norms"]]
        # DeepSpeed's own global norm of every step (inf where its overflow check fired)
        assert run.col("grad_norm").tolist() == pytest.approx(ds, rel=1e-6)
        # before clipping (gradient_clipping=1.0): the norm of the ranks' averaged gradient
        assert run.col("grad_norm")[0] == pytest.approx(res[rank]["avg_ref"], rel=1e-4)
        assert run.col("grad_norm")[0] > 1.0
        # this rank's own gradient before reduction: the same model without DeepSpeed on its batch
        assert run.col("grad_norm_local")[0] == pytest.approx(res[rank]["local_ref"], rel=1e-4)
    assert not math.isclose(res[0]["local_ref"], res[1]["local_ref"], rel_tol=1e-3)


def test_zero0_fp32_keeps_no_global_norm_and_records_the_local_one(zero):
    out, res = zero
    for rank, run in enumerate(read_run_dir(out / "zero0")):
        assert res[rank]["zero0"]["ds_norms"] == [None] * W.NAN_STEPS  # DeepSpeed keeps none here
        assert not run.has("grad_norm")  # not the local one passed off as the global one
        assert run.col("grad_norm_local")[0] == pytest.approx(res[rank]["local_ref"], rel=1e-4)


def test_zero_healthy_run_with_accumulation_stays_clean(zero):
    out, res = zero
    report = diagnose(str(out / "healthy"))
    assert [f.cause for f in report.findings if f.severity != "info"] == []
    runs = read_run_dir(out / "healthy")
    for rank, run in enumerate(runs):
        # one record per optimizer step, the micro-steps' losses averaged into it
        assert len(run) == W.HEALTHY_STEPS == res[rank]["healthy"]["global_steps"]
        micro = res[rank]["healthy"]["micro_losses"]
        means = [(micro[2 * i] + micro[2 * i + 1]) / 2 for i in range(W.HEALTHY_STEPS)]
        assert run.col("loss").tolist() == pytest.approx(means, rel=1e-5)
        assert run.col("batch_size").tolist() == [8.0] * W.HEALTHY_STEPS  # both micro-batches checked
        assert not run.has("no_optimizer_step") and run.col("skipped").sum() == 0
        assert run.col("lr")[0] == pytest.approx(3e-3)
        assert run.col("accum_steps")[0] == W.HEALTHY_ACCUM


def test_zero_bf16_records_deepspeeds_norm_and_no_loss_scale(zero):
    out, res = zero
    for rank, run in enumerate(read_run_dir(out / "bf16")):
        assert run.col("grad_norm").tolist() == pytest.approx(res[rank]["bf16"]["ds_norms"], rel=1e-6)
        assert not run.has("scale") and run.col("skipped").sum() == 0
        assert all(math.isfinite(x) for x in run.col("grad_norm_local"))


def test_zero_fp16_overflowing_features_is_loss_scale_collapse(zero):
    out, res = zero
    runs = read_run_dir(out / "fp16")
    for rank, run in enumerate(runs):
        # DeepSpeed's dynamic loss scale and its own skip counter, step by step
        assert run.col("scale").tolist() == res[rank]["fp16"]["scales"]
        skipped = res[rank]["fp16"]["skipped"]
        per_step = [skipped[0]] + [b - a for a, b in zip(skipped, skipped[1:])]
        assert run.col("skipped").tolist() == [float(s) for s in per_step]
    assert res[0]["fp16"]["scales"][-1] < 2**16 / 1000  # it really collapsed
    f = diagnose(str(out / "fp16")).primary
    assert f.cause == "loss_scale_collapse" and f.severity == "critical"
    assert has(f.evidence, "precision.inputs_unnormalised"), [m.data() for m in f.evidence]


def test_hf_trainer_with_a_deepspeed_config_records_deepspeeds_signals(tmp_path):
    pytest.importorskip("transformers")
    mp.spawn(W.hf_worker, args=(2, free_port(), str(tmp_path)), nprocs=2, join=True)
    ref = [json.loads((tmp_path / f"rank{r}.json").read_text()) for r in (0, 1)]
    assert ref[0]["wrapped"] == "DeepSpeedEngine"
    runs = read_run_dir(tmp_path / "ld")
    assert [r.rank for r in runs] == [0, 1]
    for rank, run in enumerate(runs):
        assert run.meta["distributed"]["kind"] == "deepspeed" and run.meta["distributed"]["zero_stage"] == 2
        # the norm the Trainer logs is DeepSpeed's: the callback reached the engine and read the same
        assert run.col("grad_norm").tolist() == pytest.approx(ref[rank]["ref"], rel=1e-5)
        assert len(run) == 4 and run.col("accum_steps").tolist() == [2.0] * 4
        assert run.col("batch_size").tolist() == [8.0] * 4  # both micro-batches of each step
        assert not run.has("no_optimizer_step") and run.col("skipped").sum() == 0
        assert run.col("loss_weight").tolist() == pytest.approx([1.0] * 4, abs=0.05)
    # each rank's per-token mean loss; the Trainer logs their mean over the ranks
    mean = (runs[0].col("loss") + runs[1].col("loss")) / 2
    assert mean.tolist() == pytest.approx(ref[0]["loss"], rel=1e-3)
