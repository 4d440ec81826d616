"""The snapshot ring: memory budget (fingerprint fallback), disk snapshots, in-place replay, off."""

from __future__ import annotations

import json

import pytest
import torch

import lossdoctor
from lossdoctor.triage.batches import nbytes
from lossdoctor.triage.state import state_nbytes
from triage_models import TinyLM, lm_batches, lm_loss, state_bytes, train


@pytest.fixture(autouse=True)
def _seed():
    torch.manual_seed(0)


def _record(path):
    [f] = sorted((path / "incidents").glob("*.json"))
    return json.loads(f.read_text())


def test_budget_is_enforced_and_old_batches_fall_back_to_fingerprints(tmp_path):
    model = TinyLM()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-2)
    batches = lm_batches(8)
    batches[7]["attention_mask"][4] = 0
    budget = state_nbytes(model, opt) + 3 * nbytes(batches[0]) + 100  # one snapshot and three batches
    mon = lossdoctor.watch(
        model, opt, log_dir=tmp_path, alerts=False, replay_fn=lm_loss, snapshot_every=8, snapshot_budget=budget
    )
    ring = mon.triage.ring
    held = []

    def check(i: int) -> None:
        held.append(ring.snapshot_bytes() + ring.batch_bytes())

    train(model, opt, batches, lm_loss, mon, before_step=check)
    mon.close()
    assert max(held) <= budget and ring.keep == 1
    rec = _record(tmp_path)
    assert rec["replay"]["stopped_at"] == 0  # the batches of steps 0-4 were fingerprinted
    assert any("fingerprints" in n for n in rec["notes"])
    assert any("approximated" in n for n in rec["notes"])
    f = rec["findings"][0]
    assert (f["cause"], f["op"], f["samples"]) == ("attention_overflow", "aten._softmax", [4])


def test_a_state_larger_than_the_budget_turns_snapshots_off_with_a_clear_note(tmp_path):
    model = TinyLM()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-2)
    batches = lm_batches(4)
    batches[2]["attention_mask"][0] = 0
    mon = lossdoctor.watch(model, opt, log_dir=tmp_path, alerts=False, replay_fn=lm_loss, snapshot_budget=1000)
    assert not mon.triage.ring.enabled
    train(model, opt, batches, lm_loss, mon)
    mon.close()
    rec = _record(tmp_path)
    assert rec["level"] == "live" and any("exceeds the triage budget" in n for n in rec["notes"])


def _run(tmp_path, **kw):
    torch.manual_seed(0)
    model = TinyLM(dropout=0.1)
    opt = torch.optim.Adam(model.parameters(), lr=1e-2)
    batches = lm_batches(9)
    batches[6]["attention_mask"][5] = 0
    mon = lossdoctor.watch(model, opt, log_dir=tmp_path, alerts=False, **kw) if kw else None
    train(model, opt, batches, lm_loss, mon, clip=1.0)
    if mon is not None:
        mon.close()
    return state_bytes(model, opt), torch.get_rng_state()


def test_disk_snapshots_and_inplace_replay_give_the_same_answer_and_restore_the_model(tmp_path):
    plain = _run(tmp_path / "plain")
    watched = _run(tmp_path / "w", replay_fn=lm_loss, snapshot_every=4, snapshot="disk", triage_inplace=True)
    assert watched[0] == plain[0] and torch.equal(watched[1], plain[1])
    rec = _record(tmp_path / "w")
    assert rec["replay"]["from_step"] == 4 and rec["replay"]["faithful"] and rec["reproducible"] is True
    f = rec["findings"][0]
    assert (f["cause"], f["op"], f["layer"], f["samples"]) == ("attention_overflow", "aten._softmax", "attn", [5])
    assert rec["batch_vs_state"]["verdict"] == "batch"
    assert not list((tmp_path / "w" / "snapshots").glob("*.pt"))  # removed at close


def test_snapshot_off_keeps_the_live_answer(tmp_path):
    _run(tmp_path, replay_fn=lm_loss, snapshot="off")
    rec = _record(tmp_path)
    assert rec["level"] == "live" and "snapshots are off" in rec["notes"][0]
    assert rec["findings"][0]["layer"] == "attn"


def test_replay_leaves_the_snapshot_it_started_from_intact(tmp_path):
    model = TinyLM()
    opt = torch.optim.Adam(model.parameters(), lr=1e-2)
    batches = lm_batches(10)
    batches[6]["attention_mask"][1] = 0
    mon = lossdoctor.watch(model, opt, log_dir=tmp_path, alerts=False, replay_fn=lm_loss, snapshot_every=4)
    seen = {}

    def keep_copy(i: int) -> None:
        if i == 6:  # the snapshot of step 4, before the incident replays from it
            snap = mon.triage.ring.snapshot_for(6)
            seen["step"] = snap.step
            seen["bytes"] = [t.clone() for t in snap.tensors]

    train(model, opt, batches, lm_loss, mon, before_step=keep_copy)
    snap = mon.triage.ring.snapshot_for(6)
    assert snap.step == seen["step"] == 4 and len(_record(tmp_path)["replay"]["losses"]) == 3
    assert all(torch.equal(a, b) for a, b in zip(snap.tensors, seen["bytes"]))
    mon.close()
