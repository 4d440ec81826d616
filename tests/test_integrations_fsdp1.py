"""FSDP1 (`FullyShardedDataParallel`) over gloo on CPU, two ranks: the total gradient norm over the
shards, each rank's own gradient before the reduce-scatter, the rank a NaN began on."""

from __future__ import annotations

import json
import math

import pytest

torch = pytest.importorskip("torch")
dist = pytest.importorskip("torch.distributed")
if not dist.is_available() or not dist.is_gloo_available():
    pytest.skip("torch.distributed with gloo is not available", allow_module_level=True)

import torch.multiprocessing as mp  # noqa: E402
from torch import nn  # noqa: E402

import dist_workers  # noqa: E402
import ds_workers  # noqa: E402  (the same model and batches, measured without any wrapper)
from dist_workers import free_port  # noqa: E402
from lossdoctor import diagnose  # noqa: E402
from lossdoctor.sources.rundir import read_run_dir  # noqa: E402
from msgs import has  # noqa: E402

NAN_RANK, NAN_STEP = 1, 3


@pytest.mark.slow
@pytest.mark.timeout(300)
def test_fsdp1_nan_on_rank_1_total_and_local_norms(tmp_path):
    mp.spawn(dist_workers.fsdp1_worker, args=(2, free_port(), str(tmp_path), NAN_RANK, NAN_STEP), nprocs=2, join=True)
    ref = [json.loads((tmp_path / f"rank{r}.json").read_text())["ref"] for r in (0, 1)]
    runs = read_run_dir(tmp_path / "ld")
    assert [r.meta["distributed"]["kind"] for r in runs] == ["fsdp1", "fsdp1"]
    for rank, run in enumerate(runs):
        # the total over both ranks' shards: FSDP1's own clip_grad_norm_ total, before clipping
        assert run.col("grad_norm")[:NAN_STEP].tolist() == pytest.approx(ref[rank][:NAN_STEP], rel=1e-4)
        assert run.col("grad_norm")[0] == pytest.approx(ds_workers.averaged_grad_norm(2, 0), rel=1e-4)
        # this rank's own gradient, before the reduce-scatter: the bare model on its batch
        assert run.col("grad_norm_local")[0] == pytest.approx(ds_workers.local_grad_norm(rank, 0), rel=1e-4)
        # replay refused (a one-rank replay would wait in FSDP's all-gathers), and said so
        assert has(run.notes, "distributed.replay_skipped_fsdp1"), [getattr(m, "key", m) for m in run.notes]
    local0, local1 = runs[0].col("grad_norm_local"), runs[1].col("grad_norm_local")
    assert math.isfinite(local0[NAN_STEP]) and not math.isfinite(local1[NAN_STEP])
    assert runs[0].col("grad_nonfinite")[NAN_STEP] == 0 and runs[1].col("grad_nonfinite")[NAN_STEP] == 3
    assert not runs[0].event("nonfinite_params").get(NAN_STEP)
    report = diagnose(str(tmp_path / "ld"))
    f = report.primary
    assert (f.cause, f.rank, f.step, f.samples) == ("nonfinite_data", 1, NAN_STEP, [2])
    assert not [g for g in report.findings if g.rank == 0 and g.symptom == "nonfinite"]


def test_watch_dispatches_and_the_monitor_needs_an_optimizer(tmp_path):
    """`lossdoctor.watch` is the dispatching entry (a DeepSpeed engine, or a model and its optimizer);
    the monitor's own `watch` takes no engine, so without an optimizer it says what is missing."""
    import lossdoctor
    from lossdoctor.integrations import entry
    from lossdoctor.live import monitor

    assert lossdoctor.watch is entry.watch
    model = nn.Linear(4, 2)
    for watch in (lossdoctor.watch, monitor.watch):
        with pytest.raises(TypeError, match=r"watch\(model, optimizer\): the optimizer is needed"):
            watch(model, log_dir=tmp_path / "x")
    assert not (tmp_path / "x").exists()


def test_an_incident_says_why_replay_was_refused(tmp_path):
    """Triage reads the monitor's refusal through its host: the incident record of a sharded model
    says why replay could not run, not "no replay_fn was given"."""
    import lossdoctor
    from lossdoctor.messages import Msg
    from triage_models import TinyLM, lm_batches, lm_loss, train

    notes = {}
    for refused in (False, True):
        torch.manual_seed(0)
        model = TinyLM()
        opt = torch.optim.AdamW(model.parameters(), lr=1e-2)
        batches = lm_batches(8)
        mon = lossdoctor.watch(model, opt, log_dir=tmp_path / str(refused), alerts=False)
        if refused:  # what `watch` sets on an FSDP1 model, and the DeepSpeed integration under ZeRO
            mon.replay_refused = Msg("distributed.replay_skipped_fsdp1")
        assert mon.triage.host.replay_refused() == mon.replay_refused
        train(model, opt, batches, lm_loss, mon, before_step=lambda i, m=model: _poison(m) if i == 5 else None)
        mon.close()
        [record] = mon.incidents[:1]
        notes[refused] = record["notes"]
    assert has(notes[False], "triage.note.no_replay_fn") and not has(notes[False], "distributed.replay_skipped_fsdp1")
    assert has(notes[True], "distributed.replay_skipped_fsdp1") and not has(notes[True], "triage.note.no_replay_fn")


def _poison(model: nn.Module) -> None:
    """A NaN in one weight: every step from here on goes non-finite (an incident)."""
    with torch.no_grad():
        next(model.parameters()).view(-1)[0] = float("nan")


def test_a_local_gradient_probe_that_fails_in_backward_leaves_the_training_alone(caplog):
    """The probe's hook runs inside the user's backward: its failure switches it off with one log
    line, the gradients are those of the same backward without it, and it flushes nothing after."""
    from lossdoctor.signals.local_grads import LocalGradProbe
    from lossdoctor.signals.readout import Packer

    def broken_scale():
        raise RuntimeError("injected: no loss scale")

    torch.manual_seed(0)
    model, x = nn.Linear(4, 2), torch.randn(8, 4)
    model(x).square().mean().backward()
    expected = [p.grad.clone() for p in model.parameters()]
    model.zero_grad()
    probe = LocalGradProbe(list(model.named_parameters()), scale_fn=broken_scale)
    with caplog.at_level("WARNING", logger="lossdoctor"):
        model(x).square().mean().backward()
    assert [torch.equal(p.grad, e) for p, e in zip(model.parameters(), expected)] == [True, True]
    assert not probe.enabled and probe.flush(Packer()) is None
    assert [r.getMessage() for r in caplog.records] == [
        "lossdoctor: local gradient probe disabled after an internal error: RuntimeError: injected: no loss scale"
    ]
    probe.remove()
