"""The monitor's parts and the interfaces between them: watch's options as one checked value,
incident records as a typed field of the run, triage's narrow view of the monitor, the probe
interface shared by built-in and add-on probes."""

from __future__ import annotations

import json
import shutil

import pytest
import torch

import lossdoctor
from lossdoctor.live.options import WatchOptions
from lossdoctor.signals.probe import StepInputs
from lossdoctor.sources import load_path
from triage_models import TinyLM, lm_batches, lm_loss, train


@pytest.fixture(autouse=True)
def _seed():
    torch.manual_seed(0)


@pytest.mark.parametrize(
    "bad, message",
    [
        ({"on_incident": "ignore"}, "on_incident must be one of ('report', 'raise', 'skip'), not 'ignore'"),
        ({"snapshot": "gpu"}, "snapshot must be 'memory', 'disk' or 'off', not 'gpu'"),
        ({"snapshot_every": 0}, "snapshot_every must be >= 1, not 0"),
    ],
)
def test_bad_options_are_refused_by_watch_before_anything_is_installed(tmp_path, bad, message):
    model = TinyLM()
    opt = torch.optim.AdamW(model.parameters())
    with pytest.raises(ValueError) as e:
        lossdoctor.watch(model, opt, log_dir=tmp_path, **bad)
    assert str(e.value) == message
    assert sum(len(m._forward_hooks) for m in model.modules()) == 0
    with pytest.raises(ValueError):
        WatchOptions(**bad)


def test_options_are_gathered_and_normalised(tmp_path):
    model = TinyLM()
    opt = torch.optim.AdamW(model.parameters())
    with lossdoctor.watch(model, opt, log_dir=tmp_path, alerts=False, layer_every=0, max_incidents=1) as mon:
        assert mon.options == WatchOptions(alerts=False, layer_every=1, max_incidents=1)
        assert mon.layer_every == 1
    with pytest.raises(TypeError):
        lossdoctor.watch(model, opt, log_dir=tmp_path / "x", no_such_option=True)


def _padding_run(path):
    """A real incident: sample 3 of step 6 is all padding, the softmax of its rows is NaN."""
    model = TinyLM(dropout=0.1)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-2)
    batches = lm_batches(10)
    batches[6]["attention_mask"][3] = 0
    mon = lossdoctor.watch(model, opt, log_dir=path, alerts=False, snapshot_every=4, replay_fn=lm_loss)
    train(model, opt, batches, lm_loss, mon, clip=0.5)
    mon.close()
    return mon


def test_incidents_are_a_typed_field_of_the_run_and_old_run_dirs_still_read(tmp_path):
    mon = _padding_run(tmp_path / "run")
    [record] = mon.incidents
    assert record["step"] == 6 and mon.live.incidents is mon.incidents  # the live engine reads the same list
    assert "incidents" not in json.loads((tmp_path / "run" / "meta.json").read_text())
    [run] = load_path(tmp_path / "run")
    assert [r["step"] for r in run.incidents] == [6] and "incidents" not in run.meta
    new = lossdoctor.diagnose(str(tmp_path / "run"))
    assert (new.findings[0].cause, new.findings[0].op) == ("attention_overflow", "aten._softmax")

    # a run directory of an older version kept the records in meta.json, not in incidents/
    old = tmp_path / "old"
    shutil.copytree(tmp_path / "run", old)
    meta = json.loads((old / "meta.json").read_text())
    meta["incidents"] = [json.loads(f.read_text()) for f in sorted((old / "incidents").glob("*.json"))]
    (old / "meta.json").write_text(json.dumps(meta))
    shutil.rmtree(old / "incidents")
    [run] = load_path(old)
    assert [r["step"] for r in run.incidents] == [6]
    assert lossdoctor.diagnose(str(old)).to_dict()["findings"] == new.to_dict()["findings"]


def test_triage_sees_the_monitor_only_through_its_host(tmp_path):
    model = TinyLM()
    opt = torch.optim.AdamW(model.parameters())
    with lossdoctor.watch(model, opt, log_dir=tmp_path, alerts=False) as mon:
        host = mon.triage.host
        assert not hasattr(mon.triage, "mon")
        assert (host.model, host.optimizer, host.writer, host.incidents) == (
            mon.model,
            mon.optimizer,
            mon.writer,
            mon.incidents,
        )
        mon.step_idx = 7
        assert host.step() == 7
        with host.paused():  # the tracer and the gradient capture are off inside, restored after
            assert not mon.tracer.enabled and not mon.grads.enabled
        assert mon.tracer.enabled and mon.grads.enabled
        mon.grads.enabled = False  # a part already off stays off
        with host.paused():
            pass
        assert not mon.grads.enabled
        mon.opt_probe.stepped = True
        host.mark_skipped()
        assert mon.opt_probe.stepped is False
        assert mon.tracer in host.hooked and mon in host.shared


class CountingProbe:
    """An add-on probe: the number of steps seen and the sum of the batch, through the packer."""

    name = "counting probe"

    def __init__(self, fail_at: int | None = None) -> None:
        self.enabled = True
        self.fail_at = fail_at
        self.removed = False

    def flush(self, packer, step: StepInputs):
        if not self.enabled:
            return None
        if step.step == self.fail_at:
            raise RuntimeError("injected: probe failed")
        packer.add("counting_sum", step.batch["input_ids"].float().sum().reshape(1))
        return {"step": step.step}

    def interpret(self, values, ctx, rec):
        rec["probe_step"] = ctx["step"]
        rec["probe_sum"] = float(values["counting_sum"][0])

    def remove(self):
        self.removed = True


def test_an_add_on_probe_shares_the_built_in_interface_and_fails_alone(tmp_path, caplog):
    model = TinyLM()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    batches = lm_batches(6)
    mon = lossdoctor.watch(model, opt, log_dir=tmp_path, alerts=False)
    good, bad = CountingProbe(), CountingProbe(fail_at=3)
    mon.add_probe(good)
    mon.add_probe(bad)
    assert [type(p).__name__ for p in mon.probes[:4]] == ["ModuleTracer", "GradProbe", "OptimizerProbe", "BatchProbe"]
    train(model, opt, batches, lm_loss, mon)
    mon.close()
    recs = [json.loads(x) for x in (tmp_path / "steps.jsonl").read_text().splitlines()]
    assert [r["probe_step"] for r in recs] == list(range(6))
    assert [r["probe_sum"] for r in recs] == [float(b["input_ids"].sum()) for b in batches]
    assert all("grad_norm" in r and "lr" in r and "act_absmax" in r for r in recs)  # the built-ins still ran
    assert good.removed and bad.removed and not bad.enabled and good.enabled
    notes = json.loads((tmp_path / "meta.json").read_text())["monitor_notes"]
    assert len(notes) == 1 and notes[0].startswith("counting probe disabled after an internal error")
