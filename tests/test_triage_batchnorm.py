"""Triage narrows a bad batch to its sample even when the model cannot run one sample alone.

A BatchNorm layer in train mode refuses a batch of one ("Expected more than 1 value per channel"):
the bisection then keeps at least two samples in every probe, pairing each candidate with a sample
already known to be good, and says so in the record.
"""

from __future__ import annotations

import json

import pytest
import torch
from torch import nn

import lossdoctor
from triage_models import ce_loss, classification_batches, train


def _bn_model():
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(6, 16), nn.BatchNorm1d(16), nn.ReLU(), nn.Linear(16, 3))


@pytest.mark.parametrize("bad_sample", [0, 5, 7])
def test_batchnorm_model_incident_is_narrowed_to_the_sample(tmp_path, bad_sample):
    model = _bn_model()
    opt = torch.optim.SGD(model.parameters(), lr=0.05)
    batches = classification_batches(8)
    batches[5][0][bad_sample, 1] = float("nan")
    mon = lossdoctor.watch(model, opt, log_dir=tmp_path, alerts=False, replay_fn=ce_loss, snapshot_every=3)
    train(model, opt, batches, ce_loss, mon)
    mon.close()
    [rec] = [json.loads(f.read_text()) for f in (tmp_path / "incidents").glob("*.json")]
    assert "error" not in rec, rec.get("error")
    f = rec["findings"][0]
    assert f["cause"] == "nonfinite_data" and f["samples"] == [bad_sample]
    search = rec["localization"]["sample_search"]
    assert search["samples"] == [bad_sample] and search["min_group"] == 2
    assert "BatchNorm" in search["note"] and "known to be good" in search["note"]


def test_localize_on_a_batchnorm_model_names_the_sample():
    model = _bn_model()
    x, y = classification_batches(1, size=6)[0]
    x[3, 0] = float("inf")
    loc = lossdoctor.localize(model, (x, y), ce_loss)
    assert loc.samples == [3]
    assert model.training  # the model is left in the mode it was in


def test_bisection_pads_with_known_good_samples_when_one_sample_is_refused():
    """Any model that refuses a single sample (not only BatchNorm): the first refusal switches the
    bisection to padded probes, and every probe it then makes has at least two samples."""
    from lossdoctor.triage.samples import bisect

    batch = torch.arange(10.0)[:, None]
    bad_ids = {6}
    sizes = []

    def bad(sub):
        sizes.append(len(sub))
        if len(sub) < 2:
            raise RuntimeError("needs two samples")
        return any(int(v) in bad_ids for v in sub[:, 0])

    res = bisect(batch, 10, bad)
    assert res.samples == [6] and res.min_group == 2
    assert sizes.count(1) == 1 and min(s for s in sizes if s != 1) >= 2
    assert "needs two samples" in res.note and "known to be good" in res.note
