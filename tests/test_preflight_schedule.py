"""LR schedule checks: the scheduler simulated over the planned run on a shadow optimizer
(`check`), and the same faults caught live by `watch` alone."""

from __future__ import annotations

import copy

import torch
from torch.optim.lr_scheduler import CosineAnnealingLR, LambdaLR
from transformers import get_cosine_schedule_with_warmup, get_linear_schedule_with_warmup

import lossdoctor
from preflight_kit import regression_problem, train

TOTAL = 1000


def _schedule_findings(report):
    return [f for f in report.findings if f.cause == "lr_schedule_error" and f.severity != "info"]


def _setup(make_scheduler, lr=1e-2):
    model, batches, loss_fn = regression_problem()
    opt = torch.optim.AdamW(model.parameters(), lr=lr)
    return model, opt, make_scheduler(opt), batches, loss_fn


def test_cosine_period_shorter_than_the_run():
    model, opt, sched, *_ = _setup(lambda o: CosineAnnealingLR(o, T_max=300))
    before_sched, before_groups = copy.deepcopy(sched.state_dict()), copy.deepcopy(opt.state_dict())
    report = lossdoctor.check(model, opt, sched, total_steps=TOTAL)
    [f] = _schedule_findings(report)
    assert f.severity == "warning"
    assert "down to 0 at step 300 of the 1000 planned, then it climbs again to 0.01 by step 600" in f.evidence[0]
    assert "T_max=1000" in str(f.fixes[-1])
    # the user's scheduler and optimizer were not stepped
    assert sched.state_dict() == before_sched
    assert opt.state_dict() == before_groups
    assert sched.last_epoch == 0 and opt.param_groups[0]["lr"] == 1e-2


def test_warmup_scheduler_stepped_per_epoch():
    warmup = 100  # written in optimizer steps, stepped every 50 of them
    model, opt, sched, *_ = _setup(lambda o: LambdaLR(o, lambda t: min(1.0, (t + 1) / warmup)))
    report = lossdoctor.check(model, opt, sched, total_steps=TOTAL, scheduler_interval="epoch",
                              steps_per_epoch=50)
    [f] = _schedule_findings(report)
    assert "is still rising at the last of the 1000 planned steps" in f.evidence[0]
    assert "0.2x its base LR 0.01" in f.evidence[0]  # 20 scheduler steps of a 100-step warm-up
    assert "every 50 optimizer steps" in f.evidence[0]
    assert "interval': 'step'" in str(f.fixes[0])
    # stepped every optimizer step, the same scheduler is fine
    assert _schedule_findings(lossdoctor.check(model, opt, sched, total_steps=TOTAL)) == []


def test_linear_decay_shorter_than_the_run():
    model, opt, sched, *_ = _setup(lambda o: get_linear_schedule_with_warmup(o, 30, 600))
    [f] = _schedule_findings(lossdoctor.check(model, opt, sched, total_steps=TOTAL))
    assert "the last 400 of the 1000 planned steps (40%) do not train" in f.evidence[0]
    assert "num_training_steps=1000" in str(f.fixes[0])


def test_warmup_and_cosine_over_the_whole_run_is_silent():
    model, opt, sched, *_ = _setup(lambda o: get_cosine_schedule_with_warmup(o, 30, TOTAL))
    report = lossdoctor.check(model, opt, sched, total_steps=TOTAL)
    assert report.findings == [], [f.to_dict() for f in report.findings]
    assert any("warms up for 30 steps to peak 0.01" in n for n in report.notes)


def _live(tmp_path, make_scheduler, steps, every=1):
    model, opt, sched, batches, loss_fn = _setup(make_scheduler, lr=1e-3)
    with lossdoctor.watch(model, opt, scheduler=sched, log_dir=tmp_path, alerts=False) as mon:
        train(model, opt, batches, steps, loss_fn=loss_fn, scheduler=sched, scheduler_every=every, mon=mon)
    return mon.diagnose()


def test_cosine_period_shorter_than_the_run_caught_live(tmp_path):
    report = _live(tmp_path, lambda o: CosineAnnealingLR(o, T_max=40), 120)
    [f] = _schedule_findings(report)
    assert "shorter than the run" in f.evidence[0]


def test_warmup_stepped_every_50_steps_caught_live(tmp_path):
    report = _live(tmp_path, lambda o: LambdaLR(o, lambda t: min(1.0, (t + 1) / 100)), 200, every=50)
    [f] = _schedule_findings(report)
    assert "every ~50 steps" in f.evidence[0]


def test_warmup_and_cosine_over_the_whole_run_is_silent_live(tmp_path):
    report = _live(tmp_path, lambda o: get_cosine_schedule_with_warmup(o, 10, 200), 200)
    assert _schedule_findings(report) == [], [f.to_dict() for f in report.findings]
    assert report.status == "healthy", [f.to_dict() for f in report.findings]
