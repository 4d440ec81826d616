"""Faults inside the monitor never reach the training loop.

Each test injects an internal error into one part of the monitor (monkeypatching lossdoctor's own
code to raise, where a real bug would) and checks the user's side: training bit-identical to an
unwatched run, one warning, a note in the run log, and no hook left behind.
"""

from __future__ import annotations

import json
import logging

import pytest
import torch
from torch import nn
from torch.nn import functional as F

import lossdoctor
from lossdoctor.triage import policy, ring
from triage_models import MLP, mse_loss, regression_batches, state_bytes


def _setup():
    torch.manual_seed(0)
    model = MLP()
    return model, torch.optim.AdamW(model.parameters(), lr=1e-2)


def _train(model, opt, mon, n=8):
    losses = []
    for b in regression_batches(n):
        opt.zero_grad()
        loss = mse_loss(model, b)
        loss.backward()
        opt.step()
        if mon is not None:
            mon.step(loss, batch=b)
        losses.append(loss.detach().clone())
    return losses


def _reference(n=8):
    model, opt = _setup()
    losses = _train(model, opt, None, n)
    return losses, state_bytes(model, opt)


def hook_count(model: nn.Module, opt: torch.optim.Optimizer) -> int:
    """Every hook the monitor could have installed: module forward hooks, parameter gradient
    hooks, optimizer step hooks."""
    n = sum(len(m._forward_hooks) + len(m._forward_pre_hooks) for m in model.modules())
    n += sum(len(getattr(p, "_post_accumulate_grad_hooks", None) or {}) for p in model.parameters())
    n += len(opt._optimizer_step_pre_hooks) + len(opt._optimizer_step_post_hooks)
    return n


def _warnings(caplog, text):
    return [r.getMessage() for r in caplog.records if text in r.getMessage()]


def _meta(d):
    return json.loads((d / "meta.json").read_text())


def test_failing_queue_callback_in_the_gradient_hook_does_not_break_backward(tmp_path, caplog, monkeypatch):
    """The post-accumulate-grad hook runs inside loss.backward(): queueing the capture fails."""

    real = torch.autograd.Variable._execution_engine

    class BrokenEngine:  # autograd's engine, except that queueing a callback fails
        def queue_callback(self, fn):
            raise RuntimeError("injected: queue_callback failed")

        def __getattr__(self, name):
            return getattr(real, name)

    ref_losses, ref_state = _reference()
    model, opt = _setup()
    with caplog.at_level(logging.WARNING, logger="lossdoctor"):
        mon = lossdoctor.watch(model, opt, log_dir=tmp_path, alerts=False)
        monkeypatch.setattr(torch.autograd.Variable, "_execution_engine", BrokenEngine())
        losses = _train(model, opt, mon)
        monkeypatch.undo()
        mon.close()
    assert all(torch.equal(a, b) for a, b in zip(losses, ref_losses))
    assert state_bytes(model, opt) == ref_state
    assert len(_warnings(caplog, "queue_callback failed")) == 1
    assert any("GradProbe" in n and "queue_callback failed" in n for n in _meta(tmp_path)["monitor_notes"])
    recs = [json.loads(x) for x in (tmp_path / "steps.jsonl").read_text().splitlines()]
    assert len(recs) == 8 and all("loss" in r for r in recs)  # the other parts kept recording
    assert hook_count(model, opt) == 0
    rep = lossdoctor.diagnose(str(tmp_path))
    assert any("GradProbe" in n for n in rep.notes)


def test_failing_capture_callback_at_the_end_of_backward(tmp_path, caplog):
    """The callback queued on the autograd engine runs when backward ends: it fails there."""

    class Exploding:
        def __iadd__(self, other):
            raise RuntimeError("injected: capture callback failed")

    ref_losses, ref_state = _reference()
    model, opt = _setup()
    with caplog.at_level(logging.WARNING, logger="lossdoctor"):
        mon = lossdoctor.watch(model, opt, log_dir=tmp_path, alerts=False)
        mon.grads.backwards = Exploding()
        losses = _train(model, opt, mon)
        mon.close()
    assert all(torch.equal(a, b) for a, b in zip(losses, ref_losses))
    assert state_bytes(model, opt) == ref_state
    assert len(_warnings(caplog, "capture callback failed")) == 1
    assert hook_count(model, opt) == 0


@pytest.mark.parametrize("what", ["ring.remove", "snapshot unlink", "guard.remove"])
def test_close_failures_do_not_escape_and_the_log_is_closed(tmp_path, caplog, monkeypatch, what):
    def boom(*a, **k):
        raise OSError(f"injected: {what} failed")

    model, opt = _setup()
    mon = lossdoctor.watch(
        model,
        opt,
        log_dir=tmp_path,
        alerts=False,
        replay_fn=mse_loss,
        snapshot="disk",
        snapshot_every=2,
        on_incident="skip",
    )
    _train(model, opt, mon, 5)
    if what == "ring.remove":
        monkeypatch.setattr(ring.SnapshotRing, "remove", boom)
    elif what == "snapshot unlink":
        monkeypatch.setattr(ring, "_unlink", boom)
    else:
        monkeypatch.setattr(policy.SkipGuard, "remove", boom)
    with caplog.at_level(logging.WARNING, logger="lossdoctor"):
        mon.close()  # must not raise
    monkeypatch.undo()
    assert mon.closed and mon.writer._steps.closed
    assert len(_warnings(caplog, f"{what} failed")) == 1
    assert any(f"{what} failed" in n for n in _meta(tmp_path)["monitor_notes"])
    # everything else was removed all the same; only the part that failed may keep its hooks
    left = hook_count(model, opt)
    assert left == {"ring.remove": 2, "snapshot unlink": 0, "guard.remove": 2}[what]
    assert len((tmp_path / "steps.jsonl").read_text().splitlines()) == 5


def test_a_model_that_cannot_be_described_is_still_watched(tmp_path, caplog, monkeypatch):
    from lossdoctor.live import monitor

    def broken(*a, **k):
        raise AttributeError("injected: describe_run failed")

    monkeypatch.setattr(monitor, "describe_run", broken)
    ref_losses, ref_state = _reference()
    model, opt = _setup()
    with caplog.at_level(logging.WARNING, logger="lossdoctor"):
        with lossdoctor.watch(model, opt, log_dir=tmp_path, alerts=False) as mon:
            losses = _train(model, opt, mon)
    assert all(torch.equal(a, b) for a, b in zip(losses, ref_losses))
    assert state_bytes(model, opt) == ref_state
    assert len(_warnings(caplog, "describe_run failed")) == 1
    assert len((tmp_path / "steps.jsonl").read_text().splitlines()) == 8
    assert "describe_run failed" in " ".join(mon.diagnose().notes)


@pytest.mark.parametrize("where", ["skip guard", "live engine", "preflight config"])
def test_a_watch_that_raises_leaves_no_hook_behind(tmp_path, monkeypatch, where):
    def broken(*a, **k):
        raise RuntimeError(f"injected: {where} failed")

    if where == "skip guard":  # after the tracer, gradient, optimizer and snapshot-ring hooks
        monkeypatch.setattr(policy.SkipGuard, "__init__", broken)
    elif where == "live engine":
        from lossdoctor.live import monitor

        monkeypatch.setattr(monitor, "LiveDiagnoser", broken)
    else:  # preflight never raises, but its probe's hooks must go with it
        from lossdoctor.preflight import watch as pw

        monkeypatch.setattr(pw, "config_findings", broken)
    ref_losses, ref_state = _reference()
    model, opt = _setup()
    if where == "preflight config":
        mon = lossdoctor.watch(model, opt, log_dir=tmp_path, alerts=False, replay_fn=mse_loss, on_incident="skip")
        assert mon.preflight is None
        mon.close()
    else:
        with pytest.raises(RuntimeError, match="injected"):
            lossdoctor.watch(model, opt, log_dir=tmp_path, alerts=False, replay_fn=mse_loss, on_incident="skip")
    assert hook_count(model, opt) == 0
    losses = _train(model, opt, None)  # and training afterwards is the unwatched training
    assert all(torch.equal(a, b) for a, b in zip(losses, ref_losses))
    assert state_bytes(model, opt) == ref_state


def test_diagnose_after_the_step_record_failed_at_step_0_reports_what_failed(tmp_path, caplog, monkeypatch):
    """The README's `print(mon.diagnose())` after training must not crash the script when the
    monitor wrote no step at all."""
    from lossdoctor.live import monitor

    def broken(self, loss, batch):
        raise RuntimeError("injected: step record failed")

    monkeypatch.setattr(monitor.Monitor, "_collect", broken)
    ref_losses, ref_state = _reference()
    model, opt = _setup()
    with caplog.at_level(logging.WARNING, logger="lossdoctor"):
        with lossdoctor.watch(model, opt, log_dir=tmp_path, alerts=False) as mon:
            losses = _train(model, opt, mon)
            live = mon.diagnose()  # before close, too
    assert all(torch.equal(a, b) for a, b in zip(losses, ref_losses))
    assert state_bytes(model, opt) == ref_state
    rep = mon.diagnose()
    for r in (live, rep):
        assert r.findings == [] and r.steps == 8 and r.status == "inconclusive"
        text = " ".join(r.notes)
        assert "no diagnosis" in text and "step disabled after an internal error" in text
        assert "injected: step record failed" in text
    assert "no diagnosis" in str(rep.to_dict()["notes"])
    assert len(_warnings(caplog, "step record failed")) == 1


class _Planted:
    """What an attacker would put in a run directory: unpickling it runs `open(marker, "w")`."""

    def __init__(self, marker: str) -> None:
        self.marker = marker

    def __reduce__(self):
        return (open, (self.marker, "w"))


@pytest.mark.parametrize("planted", ["pickle", "foreign tensors"])
def test_a_planted_snapshot_file_is_not_executed_and_triage_says_so(tmp_path, planted):
    from triage_models import ce_loss, classification_batches

    model = MLP()
    opt = torch.optim.SGD(model.parameters(), lr=0.05)
    batches = classification_batches(8)
    batches[5][0][2, 1] = float("nan")
    marker = tmp_path / "code-ran"
    run = tmp_path / "run"
    mon = lossdoctor.watch(model, opt, log_dir=run, alerts=False, replay_fn=ce_loss, snapshot="disk", snapshot_every=2)
    for i, (x, y) in enumerate(batches):
        if i == 5:  # every snapshot on disk is replaced before the incident is replayed
            for f in (run / "snapshots").glob("*.pt"):
                obj = _Planted(str(marker)) if planted == "pickle" else {"step": 0, "tensors": [torch.zeros(3)]}
                torch.save(obj, f)
        opt.zero_grad()
        loss = F.cross_entropy(model(x), y)
        loss.backward()
        opt.step()
        mon.step(loss, batch=(x, y))
    mon.close()
    assert not marker.exists()  # the file's code never ran
    [rec] = [json.loads(f.read_text()) for f in (run / "incidents").glob("*.json")]
    assert (
        "could not be loaded" in " ".join(rec["notes"])
        if planted == "pickle"
        else "is not the one lossdoctor wrote" in " ".join(rec["notes"])
    )
    assert rec["level"] == "live" and rec["findings"]  # the live flags still answer


class _Unreadable:
    """A batch value whose attribute access raises (a lazy proxy, a closed handle)."""

    def __getattr__(self, name):
        raise RuntimeError(f"injected: cannot read .{name}")


def test_one_unreadable_batch_value_costs_only_its_own_checks(tmp_path, caplog):
    from triage_models import ce_loss, classification_batches

    model = MLP()
    opt = torch.optim.SGD(model.parameters(), lr=0.05)
    batches = [(x, y, _Unreadable()) for x, y in classification_batches(8)]
    batches[5][0][2, 1] = float("nan")
    with caplog.at_level(logging.WARNING, logger="lossdoctor"):
        with lossdoctor.watch(
            model, opt, log_dir=tmp_path, alerts=False, snapshot_every=2, replay_fn=lambda m, b: ce_loss(m, b[:2])
        ) as mon:
            for b in batches:
                opt.zero_grad()
                loss = F.cross_entropy(model(b[0]), b[1])
                loss.backward()
                opt.step()
                mon.step(loss, batch=b)
    assert not _warnings(caplog, "disabled")  # no part of the monitor was switched off
    recs = [json.loads(x) for x in (tmp_path / "steps.jsonl").read_text().splitlines()]
    assert len(recs) == 8 and all(r["batch_size"] == 8 and "grad_norm" in r for r in recs)
    assert recs[5]["batch_nonfinite_detail"] == {"0": [2]}
    [rec] = [json.loads(f.read_text()) for f in (tmp_path / "incidents").glob("*.json")]
    assert rec["findings"][0]["samples"] == [2]  # triage kept and replayed the batch
