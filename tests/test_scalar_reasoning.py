"""Scalar-only logs read like an expert would: evidence scaled to the log's length, the LR as
evidence, spikes by kind, and an explicit `inconclusive` when the log cannot support a verdict.

Two kinds of log: CSVs written by real torch training loops (what a user's own logger keeps), and
short hand-written logs of the kind pasted into an issue (3-50 lines)."""

from __future__ import annotations

import csv
import json
import math
from importlib import resources

import jsonschema
import numpy as np
import pytest
import torch
from torch import nn
from torch.nn import functional as F

from conftest import run_cli
from lossdoctor import diagnose
from lossdoctor.report import render
from msgs import find, from_json, has, keys, walk

SCHEMA = json.loads(resources.files("lossdoctor").joinpath("schema/report.schema.json").read_text())
ALARM = ("warning", "critical")


def _write(path, rows, cols=("step", "loss", "grad_norm", "lr")):
    with open(path, "w", newline="") as fh:
        w = csv.writer(fh)
        w.writerow(cols)
        w.writerows(rows)
    return path


def _alarms(report):
    return [f for f in report.findings if f.severity in ALARM]


def _classifier_loop(path, *, steps, lr, make_opt=None, lr_lambda=None, corrupt_at=None, freeze=False, seed=0):
    """A real classification loop (10 classes, an MLP, AdamW) logging step, loss, grad_norm, lr."""
    torch.manual_seed(seed)
    g = torch.Generator().manual_seed(seed)
    centers = torch.randn(10, 16, generator=g) * 2
    model = nn.Sequential(nn.Linear(16, 64), nn.ReLU(), nn.Linear(64, 10))
    if freeze:  # a zero-initialised head, and every parameter frozen: outputs uniform, nothing learns
        nn.init.zeros_(model[2].weight)
        nn.init.zeros_(model[2].bias)
        for p in model.parameters():
            p.requires_grad_(False)
        model[0].weight.requires_grad_(True)  # something for the optimizer to hold; no gradient reaches it
    params = [p for p in model.parameters() if p.requires_grad]
    opt = (make_opt or (lambda ps: torch.optim.AdamW(ps, lr=lr)))(params)
    sched = torch.optim.lr_scheduler.LambdaLR(opt, lr_lambda) if lr_lambda else None
    rows = []
    for step in range(steps):
        y = torch.randint(0, 10, (32,), generator=g)
        x = centers[y] + torch.randn(32, 16, generator=g)
        if step == corrupt_at:  # one corrupted batch: features x50, labels shuffled
            x = x * 50
            y = y[torch.randperm(32, generator=g)]
        loss = F.cross_entropy(model(x), y)
        opt.zero_grad()
        if loss.requires_grad:
            loss.backward()
        gn = torch.nn.utils.clip_grad_norm_(params, 1e9) if loss.requires_grad else torch.tensor(0.0)
        opt.step()
        rows.append((step, loss.item(), gn.item(), opt.param_groups[0]["lr"]))
        if sched:
            sched.step()
    return _write(path, rows)


# --- LR as evidence --------------------------------------------------------------------------------


def test_flat_loss_at_a_tiny_lr_is_lr_too_low_not_noisy_data(tmp_path):
    r = diagnose(_classifier_loop(tmp_path / "log.csv", steps=40, lr=1e-6))
    f = _alarms(r)[0]
    assert f.cause == "lr_too_low", [(x.cause, x.evidence) for x in r.findings]
    assert not any(x.cause == "noisy_data" for x in r.findings)
    assert f.evidence[0].values["n"] == 40  # says how many points it judged on
    assert has(f.fixes, "scalars.flat.fix_raise", lr=1e-6), keys(f.fixes)


def test_flat_loss_at_a_tiny_lr_in_a_long_log_is_lr_too_low(tmp_path):
    r = diagnose(_classifier_loop(tmp_path / "log.csv", steps=150, lr=1e-6))
    assert _alarms(r)[0].cause == "lr_too_low", [(x.cause, x.evidence) for x in r.findings]


def test_a_runaway_lr_that_diverges_is_the_lr_not_a_spike(tmp_path):
    # an LR "warm-up" that never ends: x1.15 per step, 3000x over the run
    path = _classifier_loop(
        tmp_path / "log.csv",
        steps=60,
        lr=1e-3,
        lr_lambda=lambda s: 1.145**s,
        make_opt=lambda ps: torch.optim.SGD(ps, lr=1e-3, momentum=0.9),
    )
    r = diagnose(path)
    f = _alarms(r)[0]
    assert f.cause in ("lr_too_high", "lr_schedule_error"), [(x.cause, x.evidence) for x in r.findings]
    assert has(f.evidence, "scalars.runaway.rose"), keys(f.evidence)
    assert not any(x.cause == "loss_spike" for x in r.findings), [(x.cause, x.step) for x in r.findings]
    assert "clip" not in str(f.fixes[0])


def test_an_lr_that_rises_then_decays_is_not_a_runaway(tmp_path):
    # warm-up then cosine decay, healthy: no LR finding
    def wc(s):
        return (s + 1) / 10 if s < 10 else 0.5 * (1 + math.cos(math.pi * (s - 10) / 110))

    r = diagnose(_classifier_loop(tmp_path / "log.csv", steps=120, lr=3e-3, lr_lambda=wc))
    assert r.status == "healthy", [(x.cause, x.evidence) for x in r.findings]


def test_an_lr_decayed_to_nothing_early_is_the_schedule(tmp_path):
    # StepLR(step_size=10, gamma=0.1) meant per epoch, stepped per batch: 1e-6 of the peak by step 60
    path = _classifier_loop(tmp_path / "log.csv", steps=150, lr=3e-4, lr_lambda=lambda s: 0.1 ** (s // 10))
    r = diagnose(path)
    f = _alarms(r)[0]
    assert (f.cause, f.symptom) == ("lr_schedule_error", "stall"), [(x.cause, x.evidence) for x in r.findings]
    assert f.evidence[0].key == "scalars.lr_collapse.fell" and f.fixes[0].key == "scalars.lr_collapse.fix_cadence"


def test_first_updates_make_it_worse_and_it_never_recovers_is_lr_too_high(tmp_path):
    # the shape of AdamW at LR 0.3 on a GPT-2 (the zoo's gpt2_adamw_lr_x100, a real run): 4.17 -> 6.2
    # after the first update, back to ~4.1 and stuck there
    rows = [(0, 4.17, 0.96, 0.3), (1, 6.16, 2.9, 0.3), (2, 6.09, 2.4, 0.3), (3, 6.3, 4.1, 0.3)]
    rows += [(i, 4.15 + 0.05 * math.sin(i), 1.5, 0.3) for i in range(4, 60)]
    r = diagnose(_write(tmp_path / "log.csv", rows))
    f = _alarms(r)[0]
    assert (f.cause, f.step) == ("lr_too_high", 3), [(x.cause, x.evidence) for x in r.findings]
    assert has(f.evidence, "scalars.jump.lr_adam_guess", lr=0.3)


# --- spikes ----------------------------------------------------------------------------------------


def _assert_one_off_spike(r, step):
    spikes = [f for f in r.findings if f.cause == "loss_spike"]
    assert spikes and spikes[0].step == step and spikes[0].severity == "warning", [
        (f.cause, f.step, f.evidence) for f in r.findings
    ]
    assert not any(f.cause == "lr_too_high" for f in r.findings)
    fixes = [x for f in r.findings for x in f.fixes]
    assert has(fixes, "spike.fix.skip_window", step=step)  # skip or rewind past the window (PaLM, OLMo)
    # never an LR cut for a one-off spike that recovered: no LR change, not even "if it spikes again"
    assert not [x for x in fixes if x.kind in ("lr", "lr_range")], keys(fixes)
    assert not {"spike.fix.recurring", "spike.fix.if_again"} & set(keys(fixes)), keys(fixes)


def test_one_off_recovered_spike_in_a_long_log_gets_skip_or_rewind(tmp_path):
    r = diagnose(_classifier_loop(tmp_path / "log.csv", steps=200, lr=3e-3, corrupt_at=150))
    _assert_one_off_spike(r, 150)


def test_one_off_recovered_spike_in_a_short_log_gets_skip_or_rewind(tmp_path):
    r = diagnose(_classifier_loop(tmp_path / "log.csv", steps=30, lr=1e-2, corrupt_at=22))
    _assert_one_off_spike(r, 22)


@pytest.mark.parametrize("lr, first_fix", [(1e-3, "spike.fix.recurring_measure"), (1.0, "spike.fix.recurring")])
def test_recurring_spikes_get_qk_norm_and_a_lower_peak_lr_only_when_the_lr_is_beyond_usual(tmp_path, lr, first_fix):
    rows = []
    for i in range(30):
        loss = 2.5 * math.exp(-i / 3) + 0.3 + 0.01 * (i % 3)
        if i in (12, 20, 27):
            loss = 3.0
        rows.append((i, loss, 1.0, lr))
    r = diagnose(_write(tmp_path / "log.csv", rows))
    f = [x for x in r.findings if x.cause == "loss_spike"][0]
    assert has(f.evidence, "scalars.spike.separate", k=3), keys(f.evidence)
    # QK-layernorm and a z-loss; the peak LR lowered only when it is far above every usual range
    # (spikes that recur and come back are also what small batches' losses do: `lr_advice`)
    assert f.fixes[0].key == first_fix


# --- short logs ------------------------------------------------------------------------------------


def test_grad_norm_x4000_in_five_steps_is_an_explosion_in_a_six_line_log(tmp_path):
    rows = [
        (0, 2.2, 0.24, 1e-3),
        (1, 2.3, 1.9, 1e-3),
        (2, 2.6, 15, 1e-3),
        (3, 3.4, 120, 1e-3),
        (4, 4.4, 480, 1e-3),
        (5, 5.1, 960, 1e-3),
    ]
    doc = json.loads(run_cli("diagnose", _write(tmp_path / "log.csv", rows), "--format", "json").stdout)
    assert doc["status"] == "critical"
    f = doc["findings"][0]
    assert f["cause"] == "grad_explosion" and f["step"] <= 2, doc["findings"]
    ev = from_json(f, "evidence")
    assert 0.24 in ev[0].values.values() and has(ev, "scalars.surge.short_log", n=6), [m.data() for m in ev]


def _lr_zero_rows(first_step, n=70, seed=0):
    """A trained LM's loss in its noise (3.27 +- 2%) with the LR printed as 0 on every row."""
    rng = np.random.default_rng(seed)
    return [(first_step + i, round(3.27 * (1 + 0.02 * rng.standard_normal()), 4), 0.23, 0.0) for i in range(n)]


def test_an_lr_of_0_throughout_alarms_from_the_run_start_and_not_in_an_excerpt_from_its_end(tmp_path):
    # from step 0, the scheduler never let the LR rise; an excerpt from step 19,491 on is a schedule that
    # decayed to 0 (and a fixed-decimals print of its last small LR): the run ends as planned
    start = diagnose(_write(tmp_path / "start.csv", _lr_zero_rows(0)))
    assert any(f.cause == "lr_schedule_error" and f.severity == "critical" for f in start.findings), [
        f.data() for f in start.findings
    ]
    late = diagnose(_write(tmp_path / "late.csv", _lr_zero_rows(19491)))
    assert not _alarms(late), [f.data() for f in late.findings]


def _surge_rows(tail):
    """A short log whose gradient norm goes x4000 in five steps with the loss x2.3, then `tail`."""
    return [
        (0, 2.2, 0.24, 1e-4),
        (1, 2.22, 0.9, 1e-4),
        (2, 2.6, 2.4, 1e-4),
        (3, 2.25, 16, 1e-4),
        (4, 2.35, 145, 1e-4),
        (5, 5.1, 960, 1e-4),
        (6, 3.5, 350, 1e-4),
        (7, 3.2, 380, 1e-4),
    ] + tail


def _lr_cuts(f):
    return [x.data() for x in f.fixes if x.kind in ("lr", "lr_range")]


def test_a_gradient_surge_the_run_came_back_from_is_a_spike_with_no_lr_cut(tmp_path):
    # norm and loss both back near their levels before by the log's end: the run survived it
    r = diagnose(
        _write(tmp_path / "log.csv", _surge_rows([(8, 2.8, 650, 1e-4), (9, 2.21, 0.27, 1e-4), (10, 2.23, 0.2, 1e-4)]))
    )
    (f,) = [x for x in r.findings if x.cause == "grad_explosion"]
    assert (f.severity, f.symptom) == ("warning", "spike"), f.data()
    assert has(f.evidence, "scalars.surge.loss_came_back", best=2.2, top=5.1, back=2.23), keys(f.evidence)
    assert not _lr_cuts(f) and [x for x in f.fixes if x.kind == "clip"], [x.data() for x in f.fixes]


@pytest.mark.parametrize(
    "tail, cut",
    [
        ([(8, 2.6, 300, 1e-4), (9, 2.4, 320, 1e-4), (10, 2.3, 310, 1e-4)], False),  # the loss trained back down
        ([(8, 5.6, 700, 1e-4), (9, 6.3, 900, 1e-4), (10, 7.0, 1200, 1e-4)], True),
    ],
)  # the loss kept climbing
def test_a_gradient_surge_still_up_cuts_the_lr_only_when_the_loss_rise_holds(tmp_path, tail, cut):
    r = diagnose(_write(tmp_path / "log.csv", _surge_rows(tail)))
    (f,) = [x for x in r.findings if x.cause == "grad_explosion"]
    assert (f.severity, f.symptom) == ("critical", "divergence"), f.data()
    assert bool(_lr_cuts(f)) is cut, [x.data() for x in f.fixes]
    assert has(f.evidence, "lr.advice.withheld") is not cut, keys(f.evidence)


def test_short_real_loop_with_an_exploding_gradient(tmp_path):
    # plain SGD far above the stable LR on unnormalised regression features: the gradient norm
    # and the loss grow geometrically within a few steps, before anything overflows
    torch.manual_seed(0)
    model = nn.Linear(8, 1)
    opt = torch.optim.SGD(model.parameters(), lr=0.05)
    x_all = torch.randn(256, 8) * torch.tensor([1, 1, 1, 1, 1, 1, 1, 12.0])
    y_all = x_all @ torch.randn(8, 1)
    rows = []
    for step in range(8):
        i = torch.randint(0, 256, (32,))
        loss = F.mse_loss(model(x_all[i]), y_all[i])
        opt.zero_grad()
        loss.backward()
        gn = torch.nn.utils.clip_grad_norm_(model.parameters(), 1e12)
        opt.step()
        rows.append((step, loss.item(), gn.item(), 0.05))
    assert all(math.isfinite(r[1]) for r in rows) and rows[-1][2] > 100 * rows[0][2]  # the premise
    r = diagnose(_write(tmp_path / "log.csv", rows))
    assert r.status == "critical" and r.findings[0].cause in ("grad_explosion", "lr_too_high"), [
        (f.cause, f.evidence) for f in r.findings
    ]


def test_loss_at_exactly_ln_100_for_every_step_learns_nothing(tmp_path):
    rows = [(i, 4.605, 0.8, 1e-3) for i in range(12)]
    r = diagnose(_write(tmp_path / "log.csv", rows))
    f = r.findings[0]
    assert r.status == "warning" and f.symptom == "plateau"
    assert has(f.evidence, "scalars.flat.chance", name="ln(100)"), [m.data() for m in f.evidence]
    assert (
        f.cause == "frozen_model" and has(f.evidence, "scalars.flat.ranked") and has(f.evidence, "scalars.alt.labels")
    )  # the differential


def test_real_frozen_model_sits_at_chance(tmp_path):
    r = diagnose(_classifier_loop(tmp_path / "log.csv", steps=15, lr=1e-3, freeze=True))
    f = r.findings[0]
    assert f.cause == "frozen_model", [(x.cause, x.evidence) for x in r.findings]
    assert has(f.evidence, "scalars.flat.chance", name="ln(10)"), [m.data() for m in f.evidence]


def test_at_chance_with_nothing_to_rank_says_the_causes_fit_equally(tmp_path):
    # wanders around ln(10) (not constant), LR and gradient ordinary: labels vs no update vs LR
    rows = [(i, math.log(10) + 0.01 * math.sin(i * 1.7), 0.5 + 0.05 * math.cos(i), 1e-3) for i in range(40)]
    r = diagnose(_write(tmp_path / "log.csv", rows))
    f = r.findings[0]
    assert f.severity == "warning" and f.confidence <= 0.5
    equal = find(f.evidence, "scalars.flat.equal")  # labels vs no update vs LR: each named by its key
    assert {m.key for m in walk([equal]) if m is not equal} >= {
        "scalars.alt.labels",
        "scalars.alt.frozen",
        "scalars.alt.lr_low",
    }, equal.data()


def test_too_few_points_is_inconclusive_not_healthy(tmp_path):
    p = run_cli(
        "diagnose", _write(tmp_path / "log.csv", [(0, 2.0, 1.0, 1e-3), (1, 1.9, 1.0, 1e-3)]), "--format", "json"
    )
    assert p.returncode == 0, p.stderr
    doc = json.loads(p.stdout)
    jsonschema.validate(doc, SCHEMA)
    assert doc["status"] == "inconclusive" and doc["findings"] == []
    note = find(from_json(doc, "notes"), "scalars.coverage.too_few")
    assert find([note], "scalars.coverage.what").values["n"] == 2  # says how few points it had
    assert has([note], "scalars.coverage.cheap_ways")  # and the cheapest way to a verdict


def test_short_flat_log_without_evidence_is_inconclusive_and_says_what_to_log(tmp_path):
    rows = [(i, 2.0 + 0.01 * (-1) ** i) for i in range(10)]
    r = diagnose(_write(tmp_path / "log.csv", rows, cols=("step", "loss")))
    assert r.status == "inconclusive", [(f.cause, f.evidence) for f in r.findings]
    note = find(r.notes, "scalars.coverage.not_fell")
    assert find([note], "scalars.coverage.what_missing").values["n"] == 10 and has(
        [note], "scalars.coverage.no_grad_norm"
    )
    for fmt in ("text", "md", "html"):  # every format renders the new status
        assert render(r, fmt)


def test_short_log_that_learns_is_healthy_with_a_word(tmp_path):
    rows = [(i, 3.0 * math.exp(-i / 5) + 0.3, 1.0, 1e-3) for i in range(12)]
    r = diagnose(_write(tmp_path / "log.csv", rows))
    assert r.status == "healthy" and not r.findings
    assert find([find(r.notes, "scalars.coverage.short_fell")], "scalars.coverage.what").values["n"] == 12


# --- empty label masks -----------------------------------------------------------------------------


def test_loss_zero_with_nan_grad_norm_is_an_empty_label_mask(tmp_path):
    """The guarded division `where(n > 0, s / n, 0)` of a batch with no supervised token: the
    forward pass gives 0.0, the backward pass 0 * (1/0) = NaN (a real torch gotcha)."""
    torch.manual_seed(0)
    emb, head = nn.Embedding(50, 16), nn.Linear(16, 50)
    params = [*emb.parameters(), *head.parameters()]
    opt = torch.optim.AdamW(params, lr=1e-3)
    rows = []
    for step in range(20):
        ids = torch.randint(0, 50, (4, 8))
        labels = ids.clone()
        if step == 12:
            labels[:] = -100  # every response truncated away
        mask = (labels != -100).float().view(-1)
        logp = F.log_softmax(head(emb(ids)).view(-1, 50), dim=-1)
        per_tok = -logp.gather(1, labels.clamp(min=0).view(-1, 1)).squeeze(1)
        n = mask.sum()
        s = (per_tok * mask).sum()
        loss = torch.where(n > 0, s / n, torch.zeros(()))
        opt.zero_grad()
        loss.backward()
        gn = torch.nn.utils.clip_grad_norm_(params, 1e9)
        if torch.isfinite(gn):
            opt.step()
        rows.append((step, loss.item(), gn.item(), 1e-3))
    assert rows[12][1] == 0.0 and math.isnan(rows[12][2])  # the premise
    r = diagnose(_write(tmp_path / "log.csv", rows))
    f = r.findings[0]
    assert (f.cause, f.step, f.severity) == ("label_mask_empty", 12, "critical"), [
        (x.cause, x.step, x.evidence) for x in r.findings
    ]
    assert not any(x.cause in ("nonfinite_data", "lr_too_high") for x in r.findings)


def test_a_gradient_explosion_the_run_survived_is_a_warning_with_clipping_not_an_lr_cut(tmp_path):
    # a real loop with clipping at 1.0: one batch of features 1e4x too large makes the gradient
    # norm (measured before clipping) jump ~1e4x for one step; the clip saves the run and the loss
    # goes on falling. Not healthy (the next such batch may not be survived), not critical, and the
    # advice must not cut the LR of a run that was learning.
    torch.manual_seed(0)
    model = nn.Linear(8, 1)
    opt = torch.optim.SGD(model.parameters(), lr=0.05)
    x_all = torch.randn(512, 8)
    y_all = x_all @ torch.randn(8, 1)
    rows = []
    for step in range(12):
        i = torch.randint(0, 512, (32,))
        x = x_all[i] * (100.0 if step == 6 else 1.0)
        loss = F.mse_loss(model(x), y_all[i])
        opt.zero_grad()
        loss.backward()
        gn = float(torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0))
        opt.step()
        rows.append((step, loss.item(), gn, 0.05))
    assert max(r[2] for r in rows) > 1000 * min(r[2] for r in rows[:6])  # the fault is there
    doc = json.loads(run_cli("diagnose", _write(tmp_path / "log.csv", rows), "--format", "json").stdout)
    f = doc["findings"][0]
    assert doc["status"] == "warning" and f["cause"] == "grad_explosion" and f["symptom"] == "spike", doc
    assert f["step"] == 6
    assert f["fixes_data"][0]["fix_kind"] == "clip"
    assert not [x for x in f["fixes_data"] if x["fix_kind"] in ("lr", "lr_range")], f["fixes_data"]


def _guarded_loop(path, *, guard: bool, steps: int = 60, bad_steps: tuple[int, ...] = (5,)):
    """A real regression loop where step 5 (or each of `bad_steps`) adds sqrt(0) to the loss (a
    pairwise distance of a point to itself): the loss stays finite, its gradient is NaN. With `guard`, the loop skips the update
    when the gradient norm is non-finite (what an fp16 loss scaler or DeepSpeed does); without, the
    NaN reaches the weights."""
    torch.manual_seed(0)
    model = nn.Linear(4, 1)
    opt = torch.optim.SGD(model.parameters(), lr=0.05)
    x_all = torch.randn(256, 4)
    y_all = x_all @ torch.randn(4, 1)
    rows = []
    for step in range(steps):
        i = torch.randint(0, 256, (32,))
        out = model(x_all[i])
        loss = F.mse_loss(out, y_all[i])
        if step in bad_steps:
            loss = loss + torch.sqrt(((out - out.detach()) ** 2).sum())
        opt.zero_grad()
        loss.backward()
        gn = float(torch.nn.utils.clip_grad_norm_(model.parameters(), 1e9))
        if not guard or math.isfinite(gn):
            opt.step()
        rows.append((step, loss.item(), gn, 0.05))
    return _write(path, rows)


def test_one_nan_gradient_the_loop_skipped_is_not_a_nonfinite_run(tmp_path):
    # finite losses after a NaN gradient mean the update never reached the weights: the scaler's (or
    # a guard's) skip, as a maintainer explains for an fp16 run's first logged NaN grad norm
    doc = json.loads(run_cli("diagnose", _guarded_loop(tmp_path / "log.csv", guard=True), "--format", "json").stdout)
    assert doc["status"] in ("healthy", "inconclusive"), doc["findings"]
    assert has(from_json(doc, "notes"), "engine.skipped_update", step=5), doc["notes_data"]


def test_one_nan_gradient_that_reached_the_weights_is_critical(tmp_path):
    doc = json.loads(run_cli("diagnose", _guarded_loop(tmp_path / "log.csv", guard=False), "--format", "json").stdout)
    assert doc["status"] == "critical" and doc["findings"][0]["step"] == 5, doc["findings"]


def test_optimizer_holding_another_models_parameters_is_frozen_model_with_the_measured_norm(tmp_path):
    # a real loop under watch: the optimizer was built on a model that was then re-created, so
    # the trained model's weights never change (watch's parameter norm is the same to the last bit)
    import lossdoctor

    torch.manual_seed(0)
    stale = nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 4))
    opt = torch.optim.Adam(stale.parameters(), lr=1e-3)
    model = nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 4))
    x_all, y_all = torch.randn(256, 8), torch.randint(0, 4, (256,))
    with lossdoctor.watch(model, opt, log_dir=tmp_path / "run", alerts=False) as mon:
        for _ in range(30):
            i = torch.randint(0, 256, (32,))
            loss = F.cross_entropy(model(x_all[i]), y_all[i])
            opt.zero_grad()
            model.zero_grad()
            loss.backward()
            opt.step()
            mon.step(loss)
    f = diagnose(tmp_path / "run").findings[0]
    assert f.cause == "frozen_model", [(x.cause, x.evidence) for x in diagnose(tmp_path / "run").findings]
    assert find(f.evidence, "scalars.flat.no_update").values["g"] > 0  # the measured gradient norm


def test_at_the_runs_own_chance_level_names_it_once(tmp_path):
    """A watched run knows its own chance level (ln of its vocabulary): the sentence names it as the
    run's, in both languages (it read "the chance level the run's chance level = ..." before)."""
    import numpy as np

    from lossdoctor.detectors.engine import diagnose_runs
    from lossdoctor.records import from_columns

    level = math.log(300)
    steps = np.arange(40, dtype=float)
    run = from_columns(
        steps,
        {"loss": level + 0.001 * np.sin(steps), "grad_norm": np.full(40, 0.5), "lr": np.full(40, 1e-3)},
        meta={"chance_loss": level},
    )
    f = diagnose_runs([run]).findings[0]
    sentence = next(e for e in f.evidence if getattr(e, "key", "").startswith("scalars.flat.chance"))
    assert sentence.key == "scalars.flat.chance_run" and f"the run's chance level ({level:.5g})" in sentence
    assert "随机水平" in sentence.render("zh") and "chance level" not in sentence.render("zh")


def test_mid_run_excerpt_jump_needs_a_level_shift(tmp_path):
    """An excerpt from step 1000 on: its first loss is one batch of a trained model. A wobble
    (0.06 -> 0.19, back to 0.10) is no lr_too_high; a level shift (1.7 -> 10-12, never back) is.
    The same wobble at the run's start (step 0) still is the early-jump rule's."""
    wobble = [0.0618, 0.1924, 0.1147, 0.1006, 0.1459, 0.1210, 0.0990]
    shift = [1.70, 11.46, 11.75, 11.50, 11.48, 12.19, 10.02, 10.94]
    for start, losses, expect in ((1000, wobble, False), (1000, shift, True), (0, wobble, True)):
        rows = [(start + i, v, 1.0, 2.6e-4) for i, v in enumerate(losses)]
        r = diagnose(_write(tmp_path / f"{start}-{len(losses)}.csv", rows))
        causes = [(f.cause, f.symptom) for f in r.findings]
        assert (("lr_too_high", "divergence") in causes) == expect, (start, losses, causes)


def test_a_loss_that_drops_to_exactly_zero_is_not_healthy(tmp_path):
    """A notebook's `Step | Training Loss` table: 2.35, 2.12, 1.99, then 0.000000 to the end. No
    model learns that in one step (empty label masks, or NaN steps logged as 0): critical, not
    healthy. A loss that converges to 0.0000 through 0.01, 0.001... and zeros with gradients still
    flowing are not that."""
    table = "Step\tTraining Loss\n" + "".join(
        f"{i}\t{v:.6f}\n" for i, v in enumerate([2.3456, 2.1234, 1.9876, 0, 0, 0], 1)
    )
    (tmp_path / "nb.txt").write_text(table)
    r = diagnose(tmp_path / "nb.txt")
    f = r.findings[0]
    assert r.status == "critical" and (f.cause, f.symptom, f.step) == ("label_mask_empty", "zero_loss", 4)
    assert "logging_nan_inf_filter" in f.evidence[0] and "grad" in str(f.fixes[0])
    converging = [(i, v, 0.5, 1e-3) for i, v in enumerate([0.5, 0.1, 0.01, 0.001, 1e-4, 0.0, 0.0, 0.0])]
    flowing = [
        (i, v, g, 1e-3)
        for i, (v, g) in enumerate([(2.3, 1.0), (2.1, 1.0), (1.9, 0.9), (0.0, 0.8), (0.0, 0.8), (0.0, 0.7)])
    ]
    for name, rows in (("converging", converging), ("flowing", flowing)):
        found = [x for x in diagnose(_write(tmp_path / f"{name}.csv", rows)).findings if x.symptom == "zero_loss"]
        assert not found, (name, [(x.cause, x.evidence) for x in found])
