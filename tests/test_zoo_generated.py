"""The generated variants (benchmarks/zoo/generated.py): a fixed dev/test split by id, every fault
family in both splits, variants that are a pure function of their id, and set-ups that train."""

from __future__ import annotations

import hashlib

import pytest
import torch

from benchmarks.zoo.generated import FAMILIES, fault_visible, split_of, variants


def test_the_split_is_the_parity_of_the_ids_hash():
    for vid in ("lr_too_high-00", "lr_too_high-01", "healthy-17", "frozen_model-05"):
        odd = hashlib.sha256(vid.encode()).digest()[0] % 2 == 1
        assert split_of(vid) == ("test" if odd else "dev")
    # the ids the docs were produced with keep their split
    assert split_of("lr_too_high-00") == "dev" and split_of("lr_too_high-01") == "test"


def test_every_family_is_in_both_splits_and_the_variants_are_reproducible():
    vs, again = variants(), variants()
    assert list(vs) == list(again)
    for vid, v in vs.items():
        w = again[vid]
        assert (v.seed, v.scenario.fault, v.scenario.causes) == (w.seed, w.scenario.fault, w.scenario.causes)
        assert v.scenario.healthy == (v.fault_family == "healthy")
    for fam in list(FAMILIES) + ["healthy"]:
        splits = {v.split for v in vs.values() if v.fault_family == fam}
        assert splits == {"dev", "test"}, fam


@pytest.mark.parametrize("fam", list(FAMILIES) + ["healthy"])
def test_a_variant_of_each_family_builds_and_steps(fam):
    v = next(v for v in variants().values() if v.fault_family == fam)
    torch.manual_seed(v.seed)
    s = v.scenario.build(v.seed)
    for step in range(2):
        batch = s.batches(step)
        s.optimizer.zero_grad(set_to_none=True)
        with torch.autocast("cpu", dtype=s.autocast) if s.autocast else torch.enable_grad():
            loss = s.loss_fn(s.model, batch)
        (s.scaler.scale(loss) if s.scaler is not None else loss).backward()
        if s.scaler is not None:
            s.scaler.step(s.optimizer)
            s.scaler.update()
        else:
            s.optimizer.step()
    assert loss.ndim == 0


def test_a_corrupted_batch_the_loss_did_not_show_is_not_scored():
    v = next(v for v in variants().values() if v.fault_family == "loss_spike")
    at = v.scenario.onset
    calm = [{"step": k, "loss": 1.0} for k in range(at - 10, at + 5)]
    assert not fault_visible(v, calm)
    spiked = [dict(r, loss=3.0) if r["step"] == at else r for r in calm]
    assert fault_visible(v, spiked)
    other = next(v for v in variants().values() if v.fault_family == "lr_too_high")
    assert fault_visible(other, calm)  # only the spike family can be absorbed
