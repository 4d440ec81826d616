"""LR schedule checks: the scheduler simulated over the planned run on a shadow optimizer
(`check`), and the same faults caught live by `watch` alone."""

from __future__ import annotations

import copy

import pytest
import torch
from torch.optim.lr_scheduler import CosineAnnealingLR, LambdaLR
from transformers import get_cosine_schedule_with_warmup, get_linear_schedule_with_warmup

import lossdoctor
from msgs import find, has
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
    e = f.evidence[0]
    assert e.key == "schedule.period_too_short", e.data()
    assert {k: e.values[k] for k in ("low", "at", "planned", "high", "by")} == {
        "low": 0.0,
        "at": 300,
        "planned": 1000,
        "high": pytest.approx(0.01),
        "by": 600,
    }, e.data()
    assert find(f.fixes[-1:], "schedule.fix_t_max").values["length"] == 1000
    # the user's scheduler and optimizer were not stepped
    assert sched.state_dict() == before_sched
    assert opt.state_dict() == before_groups
    assert sched.last_epoch == 0 and opt.param_groups[0]["lr"] == 1e-2


def test_warmup_scheduler_stepped_per_epoch():
    warmup = 100  # written in optimizer steps, stepped every 50 of them
    model, opt, sched, *_ = _setup(lambda o: LambdaLR(o, lambda t: min(1.0, (t + 1) / warmup)))
    report = lossdoctor.check(model, opt, sched, total_steps=TOTAL, scheduler_interval="epoch", steps_per_epoch=50)
    [f] = _schedule_findings(report)
    rising = find(f.evidence[:1], "schedule.still_rising")
    assert (rising.values["planned"], rising.values["ratio"], rising.values["base"]) == (1000, 0.2, 0.01), (
        rising.data()
    )  # 20 scheduler steps of a 100-step warm-up
    assert has(f.evidence[:1], "schedule.per_epoch", n=50), f.evidence[0].data()
    assert f.fixes[0].key == "schedule.fix_step_every_step"  # Lightning's 'interval': 'step'
    # stepped every optimizer step, the same scheduler is fine
    assert _schedule_findings(lossdoctor.check(model, opt, sched, total_steps=TOTAL)) == []


def test_linear_decay_shorter_than_the_run():
    model, opt, sched, *_ = _setup(lambda o: get_linear_schedule_with_warmup(o, 30, 600))
    [f] = _schedule_findings(lossdoctor.check(model, opt, sched, total_steps=TOTAL))
    e = f.evidence[0]
    assert (e.key, e.values["idle"], e.values["planned"], e.values["frac"]) == (
        "schedule.ends_early",
        400,
        1000,
        0.4,
    ), e.data()
    assert find(f.fixes[:1], "schedule.fix_as_long_as_run").values["planned"] == 1000  # num_training_steps=1000


def test_warmup_and_cosine_over_the_whole_run_is_silent():
    model, opt, sched, *_ = _setup(lambda o: get_cosine_schedule_with_warmup(o, 30, TOTAL))
    report = lossdoctor.check(model, opt, sched, total_steps=TOTAL)
    assert report.findings == [], [f.to_dict() for f in report.findings]
    summary = find(report.notes, "schedule.summary")
    assert summary.values["peak"] == 0.01 and has([summary], "schedule.warms_up_to", k=30), summary.data()


def _live(tmp_path, make_scheduler, steps, every=1):
    model, opt, sched, batches, loss_fn = _setup(make_scheduler, lr=1e-3)
    with lossdoctor.watch(model, opt, scheduler=sched, log_dir=tmp_path, alerts=False) as mon:
        train(model, opt, batches, steps, loss_fn=loss_fn, scheduler=sched, scheduler_every=every, mon=mon)
    return mon.diagnose()


def test_cosine_period_shorter_than_the_run_caught_live(tmp_path):
    report = _live(tmp_path, lambda o: CosineAnnealingLR(o, T_max=40), 120)
    [f] = _schedule_findings(report)
    assert f.evidence[0].key == "lr.schedule.cosine_restart", f.evidence[0].data()  # shorter than the run


def test_warmup_stepped_every_50_steps_caught_live(tmp_path):
    report = _live(tmp_path, lambda o: LambdaLR(o, lambda t: min(1.0, (t + 1) / 100)), 200, every=50)
    [f] = _schedule_findings(report)
    assert (f.evidence[0].key, f.evidence[0].values["k"]) == ("lr.schedule.staircase", 50), f.evidence[0].data()


def test_warmup_and_cosine_over_the_whole_run_is_silent_live(tmp_path):
    report = _live(tmp_path, lambda o: get_cosine_schedule_with_warmup(o, 10, 200), 200)
    assert _schedule_findings(report) == [], [f.to_dict() for f in report.findings]
    assert report.status == "healthy", [f.to_dict() for f in report.findings]
