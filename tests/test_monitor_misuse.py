"""`mon.step` called without an optimizer step in between is a misuse of the monitor, said as such:
never a skipped step, never a loss-scale collapse when there is no GradScaler."""

from __future__ import annotations

import json
import logging

import pytest
import torch

import lossdoctor
from triage_models import MLP, mse_loss, regression_batches


def _run(tmp_path, pattern, scaler=False, n=40):
    """pattern: "twice" (mon.step twice per optimizer step), "never" (no optimizer step at all),
    "per_microbatch" (mon.step after each of 2 accumulated micro-batches)."""
    torch.manual_seed(0)
    model = MLP()
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    sc = torch.amp.GradScaler("cpu") if scaler else None
    mon = lossdoctor.watch(model, opt, scaler=sc, log_dir=tmp_path, alerts=False)
    for i, b in enumerate(regression_batches(n)):
        loss = mse_loss(model, b)
        (sc.scale(loss) if sc else loss).backward()
        if pattern == "twice":
            if sc:
                sc.step(opt)
                sc.update()
            else:
                opt.step()
            opt.zero_grad()
            mon.step(loss, batch=b)
            mon.step(loss, batch=b)
        elif pattern == "never":
            opt.zero_grad()
            mon.step(loss, batch=b)
        else:
            if i % 2 == 1:
                opt.step()
                opt.zero_grad()
            mon.step(loss, batch=b)
    mon.close()
    return mon


@pytest.mark.parametrize("pattern", ["twice", "never", "per_microbatch"])
def test_mon_step_without_optimizer_step_is_a_misuse_not_a_scale_collapse(tmp_path, caplog, pattern):
    with caplog.at_level(logging.WARNING, logger="lossdoctor"):
        mon = _run(tmp_path, pattern)
    rep = mon.diagnose()
    causes = [f.cause for f in rep.findings]
    assert "loss_scale_collapse" not in causes, causes
    assert rep.status != "critical"
    recs = [json.loads(x) for x in (tmp_path / "steps.jsonl").read_text().splitlines()]
    idle = [r["step"] for r in recs if r.get("no_optimizer_step")]
    assert all(r["skipped"] == 0 for r in recs)
    expected = {"twice": list(range(1, 80, 2)), "never": list(range(40)), "per_microbatch": list(range(0, 40, 2))}
    assert idle == expected[pattern]
    note = [n for n in rep.notes if getattr(n, "key", None) == "engine.misuse_no_optimizer_step"]
    assert len(note) == 1 and note[0].values["idle"] == len(expected[pattern]), [
        getattr(n, "key", n) for n in rep.notes
    ]
    warned = [r.getMessage() for r in caplog.records if "without an optimizer step" in r.getMessage()]
    assert len(warned) == 1  # said once on stderr, not per step


def test_a_grad_scaler_skip_is_still_a_skipped_step(tmp_path):
    """The GradScaler's own skips (the scale backs off) stay `skipped`; a second mon.step with
    the same scale is the misuse."""
    torch.manual_seed(0)
    model = MLP()
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    sc = torch.amp.GradScaler("cpu", init_scale=2.0**16)
    batches = regression_batches(6)
    batches[2][0][0, 0] = float("inf")  # the scaler skips step 2 (inf gradients) and backs off
    with lossdoctor.watch(model, opt, scaler=sc, log_dir=tmp_path, alerts=False) as mon:
        for i, b in enumerate(batches):
            opt.zero_grad()
            sc.scale(mse_loss(model, b)).backward()
            sc.step(opt)
            sc.update()
            mon.step(batch=b)
            if i == 4:
                mon.step(batch=b)  # the misuse: no optimizer step since the previous call
    recs = [json.loads(x) for x in (tmp_path / "steps.jsonl").read_text().splitlines()]
    assert [r["skipped"] for r in recs] == [0, 0, 1, 0, 0, 0, 0]
    assert [r["step"] for r in recs if r.get("no_optimizer_step")] == [5]
