"""Symptoms judged against the log's own noise at any length, and causes ranked as a differential
(detectors/symptoms.py, detectors/differential.py).

The faulty logs are built with `records.from_columns` from the numbers of failures seen in real
logs (issue 25's examples); the healthy ones are real torch training loops (noisy small batches, a
warm-up, warm restarts, an eval loss that spikes, a 5-point log)."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from torch import nn
from torch.nn import functional as F

from lossdoctor.detectors.differential import ALWAYS, EVIDENCE, KINDS, SEPARATE, TABLES, finding_for
from lossdoctor.detectors.engine import diagnose_runs
from lossdoctor.detectors.quantities import Quantities
from lossdoctor.detectors.symptoms import symptoms_of
from lossdoctor.records import from_columns
from lossdoctor.vocabulary import CAUSES, SYMPTOMS


def _diagnose(steps, cols, **kw):
    run = from_columns(steps, cols, **kw)
    return diagnose_runs([run])


def _alarms(report):
    return [f for f in report.findings if f.severity in ("warning", "critical")]


def _keys(f):
    return [getattr(m, "key", None) for m in f.evidence]


def _fix_keys(f):
    return [getattr(m, "key", None) for m in f.fixes]


def _noisy(n, level, rel=0.02, seed=0, fall=0.0):
    g = np.random.default_rng(seed)
    return [level * (1 - fall * i / n) * math.exp(rel * g.standard_normal()) for i in range(n)]


# ------------------------------------------------------------------ the failures seen, flagged


def test_loss_tripling_in_two_intervals_while_the_fp16_scale_falls_16x_is_the_scale():
    n = 24
    loss = _noisy(20, 2.0) + [3.1, 6.2, 6.0, 6.3]
    scale = [65536.0] * 20 + [16384.0, 4096.0, 4096.0, 4096.0]
    r = _diagnose(range(n), {"loss": loss, "scale": scale, "lr": [3e-4] * n})
    a = _alarms(r)
    assert a and 19 <= a[0].step <= 22, [(f.cause, f.step) for f in a]  # where the scale fell
    assert a[0].cause in ("loss_scale_collapse", "activation_overflow"), [(f.cause, _keys(f)) for f in a]
    assert "nonfinite_data" not in [f.cause for f in a]


def test_a_loss_of_5e26_after_1_1_is_critical():
    r = _diagnose(range(4), {"loss": [1.1, 1.05, 1.02, 5e26]})
    a = _alarms(r)
    assert a and a[0].severity == "critical" and a[0].step == 3, [(f.cause, f.step) for f in r.findings]


def test_a_loss_flat_at_ln10_for_a_10_class_problem_is_a_plateau():
    g = np.random.default_rng(1)
    loss = [math.log(10) + 0.004 * g.standard_normal() for _ in range(12)]
    r = _diagnose([50 * i for i in range(12)], {"loss": loss}, meta={"n_classes": 10})
    a = _alarms(r)
    assert a and a[0].symptom == "plateau", [(f.cause, f.symptom) for f in r.findings]
    what = a[0].evidence[0]
    assert what.key == "diff.what.chance" and what.values["k"] == 10


def test_an_llm_loss_of_186_with_a_grad_norm_of_8000_is_not_healthy():
    loss = _noisy(10, 186.0, rel=0.05)
    gn = _noisy(10, 8000.0, rel=0.1, seed=2)
    r = _diagnose(range(10), {"loss": loss, "grad_norm": gn, "lr": [2e-4] * 10}, meta={"task_hint": "pretrain"})
    a = _alarms(r)
    assert a and a[0].severity == "critical", [(f.cause, f.symptom) for f in r.findings]
    assert a[0].evidence[0].key == "diff.what.absurd"


def test_a_20_point_log_with_a_clear_spike_is_flagged_at_its_step_without_an_lr_cut():
    loss = _noisy(20, 2.0, fall=0.3, seed=3)
    loss[12] = 4 * loss[11]
    r = _diagnose(range(20), {"loss": loss, "lr": [1e-4] * 20})
    a = _alarms(r)
    assert a and a[0].symptom == "spike" and a[0].step == 12, [(f.cause, f.symptom, f.step) for f in r.findings]
    assert "diff.fix.lower_lr" not in [k for f in r.findings for k in _fix_keys(f)]


def test_a_three_point_jump_is_enough_when_it_is_large():
    r = _diagnose(range(4), {"loss": [2.3, 2.2, 2.25, 9.5]})
    a = _alarms(r)
    assert a and a[0].step == 3


# ------------------------------------------------------------------ the differential ranks by evidence


def _nan_after(calm, **extra):
    n = calm + 1
    loss = _noisy(calm, 1.5, fall=0.2) + [float("nan")]
    cols = {"loss": loss, "grad_norm": _noisy(calm, 0.8, seed=5) + [float("nan")], "lr": [2e-4] * n}
    cols.update({k: v(n) for k, v in extra.pop("cols", {}).items()})
    return _diagnose(range(n), cols, **extra)


def test_a_nan_after_the_fp16_scale_collapsed_is_not_a_data_nan():
    def scale(n):  # seven back-offs, then it holds at 512 until the loss goes NaN
        return [65536.0] * (n - 11) + [65536.0 / 2**k for k in range(1, 8)] + [512.0] * 4

    r = _nan_after(30, cols={"scale": scale})
    f = next(f for f in r.findings if f.symptom == "nonfinite" and f.severity == "critical")
    assert f.cause in ("loss_scale_collapse", "activation_overflow"), (f.cause, _keys(f))
    assert "diff.ev.scale_fell" in _keys(f), _keys(f)


def test_a_nan_out_of_a_calm_bf16_run_is_the_data():
    r = _nan_after(30, meta={"precision": "bf16"})
    f = next(f for f in r.findings if f.symptom == "nonfinite" and f.severity == "critical")
    assert f.cause == "nonfinite_data", (f.cause, _keys(f))


def test_a_nan_in_an_fp16_run_of_a_model_known_to_overflow_ranks_the_overflow():
    r = _nan_after(30, meta={"precision": "fp16", "model_type": "t5"})
    f = next(f for f in r.findings if f.symptom == "nonfinite" and f.severity == "critical")
    assert f.cause == "activation_overflow", (f.cause, _keys(f))


def test_a_zero_loss_with_lr_0_on_every_step_is_not_an_empty_label_mask():
    r = _diagnose(range(16), {"loss": [0.0] * 16, "lr": [0.0] * 16, "grad_norm": [float("nan")] * 16})
    a = _alarms(r)
    assert a and all(f.cause != "label_mask_empty" for f in a), [(f.cause, f.symptom) for f in a]


def test_a_zero_loss_with_a_zero_gradient_and_a_moving_lr_is_an_empty_label_mask():
    lr = [1e-5 * (i + 1) for i in range(16)]
    r = _diagnose(range(16), {"loss": [0.0] * 16, "lr": lr, "grad_norm": [0.0] * 16})
    assert _alarms(r)[0].cause == "label_mask_empty"


def test_a_differential_finding_names_the_runner_up_and_what_separates_them():
    r = _diagnose(range(4), {"loss": [2.3, 2.2, 2.25, 9.5], "grad_norm": [1.0, 1.1, 0.9, 1.0]})
    f = _alarms(r)[0]
    keys = _keys(f)
    assert keys[0].startswith("diff.what.") and "diff.ranked" in keys and "diff.separate" in keys
    ranked = f.evidence[keys.index("diff.ranked")]
    assert ranked.values["first"] == f.cause and ranked.values["second"] in CAUSES
    assert ranked.values["p1"] >= ranked.values["p2"]
    assert "diff.fix.measure" in _fix_keys(f) and "diff.fix.rerun" in _fix_keys(f)
    d = r.to_dict()["findings"][0]
    assert d["evidence_data"][keys.index("diff.ranked")]["key"] == "diff.ranked"


def test_a_run_that_clips_is_not_told_to_clip():
    gn = [1.0] * 10 + [5e3, 6e3, 8e3, 7e3]
    loss = _noisy(10, 2.0) + [2.1, 2.0, 2.2, 2.1]
    for meta, told in (({"max_grad_norm": 1.0}, False), ({}, True)):
        run = from_columns(range(14), {"loss": loss, "grad_norm": gn}, meta=meta)
        q = Quantities(run)
        sym = next(s for s in symptoms_of(q) if s.kind == "grad_jump")
        f = finding_for(run, q, sym)
        assert f.cause == "grad_explosion" and f.step == 10, (f.cause, f.step)
        assert ("diff.fix.clip" in _fix_keys(f)) == told, (meta, _fix_keys(f))


def test_a_recovered_spike_is_never_told_to_lower_the_lr():
    loss = _noisy(30, 2.0, fall=0.3)
    loss[20] = 6 * loss[19]
    run = from_columns(range(30), {"loss": loss, "lr": [3e-2] * 30}, meta={"optimizer": "AdamW"})
    q = Quantities(run)
    sym = next(s for s in symptoms_of(q) if s.kind == "spike")
    f = finding_for(run, q, sym)
    assert sym.data["recovered"] is True and "diff.fix.lower_lr" not in _fix_keys(f), (f.cause, _fix_keys(f))


def test_the_tables_are_data_every_row_names_known_evidence_and_causes():
    for name, rows in TABLES.items():
        assert rows, name
        for r in rows:
            assert r.cause in CAUSES, (name, r)
            assert r.evidence == ALWAYS or r.evidence in EVIDENCE, (name, r)
            assert r.reason and r.weight != 0, (name, r)
    for kind, (table, symptom, severity) in KINDS.items():
        assert table in TABLES and symptom in SYMPTOMS and severity in ("warning", "critical"), kind
    assert all(len(pair) == 2 and pair <= set(CAUSES) for pair in SEPARATE)


# ------------------------------------------------------------------ healthy runs stay quiet


def _train(steps, *, batch=64, lr=0.05, opt="sgd", sched=None, seed=0, eval_every=0):
    """A real classifier on separable data; returns the columns a user's logger keeps."""
    torch.manual_seed(seed)
    w = torch.randn(16, 4)
    model = nn.Sequential(nn.Linear(16, 32), nn.ReLU(), nn.Linear(32, 4))
    o = (
        torch.optim.SGD(model.parameters(), lr=lr, momentum=0.9)
        if opt == "sgd"
        else torch.optim.AdamW(model.parameters(), lr=lr)
    )
    s = sched(o) if sched else None
    cols = {"loss": [], "grad_norm": [], "lr": [], "eval_loss": []}
    xv = torch.randn(256, 16)
    yv = (xv @ w).argmax(1)
    for step in range(steps):
        x = torch.randn(batch, 16)
        y = (x @ w).argmax(1)
        loss = F.cross_entropy(model(x), y)
        o.zero_grad()
        loss.backward()
        gn = torch.nn.utils.clip_grad_norm_(model.parameters(), 1e9)
        o.step()
        cols["lr"].append(o.param_groups[0]["lr"])
        if s:
            s.step()
        cols["loss"].append(float(loss.detach()))
        cols["grad_norm"].append(float(gn))
        ev = float("nan")
        if eval_every and step % eval_every == 0:
            with torch.no_grad():  # an eval on a shifted set: it spikes, the train loss does not
                ev = float(F.cross_entropy(model(xv * (3.0 if step % (4 * eval_every) == 0 else 1.0)), yv))
        cols["eval_loss"].append(ev)
    return cols


HEALTHY = {
    "noisy_sgd_batch4": dict(steps=200, batch=4, lr=0.05),
    "warmup_bump": dict(
        steps=150,
        opt="adam",
        lr=3e-3,
        sched=lambda o: torch.optim.lr_scheduler.LambdaLR(o, lambda s: min(1.0, (s + 1) / 30)),
    ),
    "warm_restarts": dict(
        steps=200, lr=0.1, sched=lambda o: torch.optim.lr_scheduler.CosineAnnealingWarmRestarts(o, T_0=40)
    ),
    "eval_spikes": dict(steps=120, eval_every=10),
}


@pytest.mark.parametrize("name", list(HEALTHY))
def test_healthy_runs_have_no_symptom_finding(name):
    for seed in range(2):
        cols = _train(seed=seed, **HEALTHY[name])
        r = _diagnose(range(len(cols["loss"])), cols)
        made = [(f.cause, f.symptom, f.step, _keys(f)[:1]) for f in _alarms(r) if str(_keys(f)[0]).startswith("diff.")]
        assert not made, (name, seed, made)


def test_a_healthy_5_point_log_has_no_symptom():
    for seed in range(3):
        cols = _train(5, seed=seed, batch=8)
        run = from_columns(range(5), cols)
        assert not symptoms_of(Quantities(run)), (seed, cols["loss"])
        assert not _alarms(diagnose_runs([run]))


def test_a_loss_that_converged_to_exactly_0_is_no_zero_loss_symptom():
    loss = [1.0 * 0.7**i for i in range(30)] + [0.0] * 40
    run = from_columns(range(70), {"loss": [round(v, 4) for v in loss]})
    assert "zero" not in [s.kind for s in symptoms_of(Quantities(run))]


def test_an_fp16_scalers_first_search_is_no_collapse():
    scale = [2.0**32 / 2**k for k in range(8)] + [2.0**24] * 40
    loss = _noisy(48, 2.0, fall=0.3)
    run = from_columns(range(48), {"loss": loss, "scale": scale, "skipped": [1.0] * 8 + [0.0] * 40})
    kinds = [s.kind for s in symptoms_of(Quantities(run))]
    assert "scale_collapse" not in kinds and "skips" not in kinds, kinds


# ------------------------------------------------------------------ the reader's records: text events, meta


def _overflow_events(steps):
    return {
        "text_events": {s: [{"kind": "overflow", "line": 10 + s, "text": "OVERFLOW! Skipping step."}] for s in steps}
    }


def test_overflow_lines_before_a_nan_rank_the_scaler_above_the_data():
    r = _nan_after(30, events=_overflow_events(range(22, 30)))
    f = next(f for f in r.findings if f.symptom == "nonfinite" and f.severity == "critical")
    assert f.cause in ("loss_scale_collapse", "activation_overflow"), (f.cause, _keys(f))
    assert "diff.ev.overflow_lines" in _keys(f)


def test_overflow_lines_on_most_steps_are_skipped_steps():
    loss = _noisy(30, 2.0, fall=0.1)
    r = _diagnose(range(100, 130), {"loss": loss}, events=_overflow_events(range(110, 130)))
    a = _alarms(r)
    assert a and a[0].symptom == "skipped_steps" and a[0].step == 110, [(f.cause, f.symptom, f.step) for f in a]
    assert a[0].evidence[0].values["k"] == 20


def test_labels_dropped_lines_make_a_zero_loss_an_empty_mask_even_at_lr_0():
    events = {
        "text_events": {
            s: [{"kind": "labels_ignored", "line": s, "text": "This instance will be ignored in loss calculation."}]
            for s in range(3)
        }
    }
    run = from_columns(range(16), {"loss": [0.0] * 16, "lr": [0.0] * 16}, events=events)
    q = Quantities(run)
    f = finding_for(run, q, next(s for s in symptoms_of(q) if s.kind == "zero"))
    assert f.cause == "label_mask_empty" and "diff.ev.labels_ignored" in _keys(f), (f.cause, _keys(f))


def test_a_vocabulary_in_the_config_makes_a_loss_above_its_range_absurd_and_its_chance_a_plateau():
    v = 32000
    flat = [math.log(v) * (1 + 0.003 * math.sin(i)) for i in range(10)]
    run = from_columns([20 * i for i in range(10)], {"loss": flat}, meta={"vocab_size": v})
    kinds = {s.kind: s for s in symptoms_of(Quantities(run))}
    assert kinds["chance"].data["k"] == v and kinds["chance"].data["known"]
    run = from_columns(range(5), {"loss": [14.0, 13.9, 13.8, 13.85, 13.7]}, meta={"vocab_size": v})
    assert "absurd" in [s.kind for s in symptoms_of(Quantities(run))]
    run = from_columns(range(5), {"loss": [14.0, 13.9, 13.8, 13.85, 13.7]})  # the task unknown: a regression may
    assert "absurd" not in [s.kind for s in symptoms_of(Quantities(run))]


def test_the_tail_of_a_decay_to_0_is_no_tiny_lr_unless_the_loss_rises():
    lr = [5e-7 * (1 - i / 10) for i in range(10)]
    flat = _noisy(10, 1.6, rel=0.02, seed=4)
    run = from_columns(range(3990, 4000), {"loss": flat, "lr": lr})
    assert "lr_tiny" not in [s.kind for s in symptoms_of(Quantities(run))]
    rising = [1.6 * (1 + 0.03 * i) for i in range(10)]
    run = from_columns(range(3990, 4000), {"loss": rising, "lr": lr})
    assert "lr_tiny" in [s.kind for s in symptoms_of(Quantities(run))]
    stuck = flat[:-1] + [flat[0] * 1.01]  # it did not fall
    run = from_columns(range(10), {"loss": stuck, "lr": [1e-7] * 10})  # a tiny LR that is the setting
    f = finding_for(run, q := Quantities(run), next(s for s in symptoms_of(q) if s.kind == "lr_tiny"))
    assert f.cause == "lr_too_low" and f.symptom == "slow_convergence", (f.cause, _keys(f))


def test_a_zero_loss_at_lr_0_is_every_step_skipped_and_with_fp16_the_scaler():
    # an LR of 0 leaves the weights at their init, whose loss is not 0: the schedule explains the stall
    # (the LR rule's own finding) but not the zero; one cause of both, every step skipped (NaN losses
    # logged as 0, the scheduler left at 0), ranks first, the empty mask after it
    cols = {"loss": [0.0] * 16, "lr": [0.0] * 16}
    for meta in ({}, {"precision": "fp16"}):
        run = from_columns(range(16), cols, meta=meta)
        q = Quantities(run)
        f = finding_for(run, q, next(s for s in symptoms_of(q) if s.kind == "zero"))
        assert f.cause == "loss_scale_collapse", (meta, f.cause, _keys(f))
        ranked = f.evidence[_keys(f).index("diff.ranked")]
        assert "label_mask_empty" != ranked.values["first"], ranked.values
        assert "lr_schedule_error" not in (ranked.values["first"], ranked.values["second"]), ranked.values


def test_a_cause_the_lr_probe_withdrew_is_not_brought_back_by_the_differential():
    """A run that falls then rises at AdamW LR 1e-2 reads as lr_too_high from its curve; when the
    LR probe replayed lower LRs and none trained better, the differential must not name it again
    (it did, with "lower the peak LR 3-10x": the advice the probe had measured as worse)."""
    from lossdoctor.detectors.engine import diagnose_runs
    from lossdoctor.records import from_columns

    steps = np.arange(200)
    loss = np.concatenate([np.linspace(3.0, 1.0, 80), np.linspace(1.0, 4.0, 120)])
    loss = loss * (1 + 0.01 * np.sin(steps))
    lr = np.full(200, 1e-2)
    meta = {"optimizer": {"class": "AdamW", "param_groups": [{"lr": 1e-2}]}}

    def run(incidents):
        r = from_columns(steps, {"loss": loss, "lr": lr}, meta=meta)
        r.incidents = incidents
        return r

    plain = diagnose_runs([run([])])
    assert "lr_too_high" in {f.cause for f in plain.findings}  # the curve alone names it
    probe = {
        "level": "probe",
        "cause": "lr_too_high",
        "step": 100,
        "probe": {
            "status": "checked",
            "from_step": 90,
            "to_step": 130,
            "control": {"lr": 1e-2, "loss": 2.0},
            "trials": [
                {"kind": "lr", "lr": 3.3e-3, "loss": 2.4, "verdict": "did_not_help"},
                {"kind": "lr", "lr": 1e-3, "loss": 2.9, "verdict": "did_not_help"},
            ],
        },
    }
    report = diagnose_runs([run([probe])]).to_dict()
    assert "lr_too_high" not in {f["cause"] for f in report["findings"]}
    assert [n["values"]["cause"] for n in report["notes_data"] if n and n["key"] == "probe.withdrawn"] == [
        "lr_too_high"
    ]


@pytest.mark.parametrize(
    ("head", "lr", "high"),
    [
        ("ignite/examples# python3 mnist.py --lr=100000", 1e5, True),  # pytorch-ignite's #2012 demonstration
        ("Namespace(batch_size=64, epochs=10, lr=50.0, momentum=0.5, seed=1)", 50.0, True),
        ("python train.py --lr 3e-4 --batch-size 64", 3e-4, False),
    ],
)
def test_a_configured_lr_on_the_command_line_ranks_a_nan_run(tmp_path, head, lr, high):
    """A log that prints no LR per step but shows the run's command line (or its argparse namespace):
    the configured LR is read, and one above every optimizer family's usual peak ranks lr_too_high
    first for the NaN, with the sentence that says so; an ordinary one adds nothing."""
    from conftest import run_cli
    from lossdoctor.sources import load_path

    rows = "".join(
        f"Epoch[1] Iteration[{10 * i}/938] Loss: {v}\n" for i, v in enumerate(["2.3012", "nan", "nan", "nan"], 1)
    )
    p = tmp_path / "train.log"
    p.write_text(head + "\n" + rows)
    assert load_path(p)[0].meta["config_lr"] == lr
    report = __import__("json").loads(run_cli("diagnose", p, "--format", "json").stdout)
    top = report["findings"][0]
    keys = [e["key"] for e in top["evidence_data"]]
    assert top["severity"] == "critical"
    assert (top["cause"] == "lr_too_high" and "lr_usual.high_any" in keys) == high, (top["cause"], keys)


@pytest.mark.parametrize("ceiling", [87.3365, 16.1181])
def test_a_loss_that_jumps_to_a_clamps_ceiling_says_so_and_ranks_the_step_size(ceiling):
    """Caffe prints 87.3365 (-ln FLT_MIN) and Keras 16.1181 (-ln 1e-7) when the true class's probability
    reached 0: the loss is the clamp's, the outputs overflowed. The alarm on a jump there says so, with
    the ceiling and how many points sit at it, whichever rule raised it; a jump to another value does not."""
    steps = np.arange(0, 1600, 20)
    rng = np.random.default_rng(0)
    base = list(0.9 * np.exp(-steps[:60] / 300) * np.exp(0.05 * rng.standard_normal(60)))
    for top, named in ((ceiling, True), (ceiling * 1.3, False)):
        loss = np.array(base + [top] * 20)
        report = _diagnose(steps, {"loss": loss})
        f = _alarms(report)[0]
        keys = _keys(f)
        assert ("diff.ev.clamped" in keys) == named, keys
        if named:
            ev = next(m for m in f.evidence if getattr(m, "key", None) == "diff.ev.clamped")
            assert ev.values["loss"] == pytest.approx(ceiling, abs=1e-4) and ev.values["n"] == 20
            assert f.step == 1200


def test_a_loss_stuck_at_caffes_ceiling_from_the_start_is_no_frozen_model():
    steps = np.arange(0, 2000, 100)
    report = _diagnose(steps, {"loss": np.r_[21.4, np.full(19, 87.3365)]})
    f = _alarms(report)[0]
    assert "diff.ev.clamped" in _keys(f) and f.cause == "lr_too_high", (f.cause, _keys(f))


def test_a_loss_that_rises_3x_after_the_runs_first_point_and_stays_is_a_divergence():
    """RecBole's WideDeep by epoch: train loss 5.8079, 22.2083, 19.6216. One point before the jump is
    no baseline alone, but at the run's start the next point staying as high makes it two against one;
    the same three numbers mid-run (single-batch losses of a long run: Caffe's 0.18, 0.61, 0.57) are noise."""
    report = _diagnose(np.arange(3), {"loss": np.array([5.8079, 22.2083, 19.6216])})
    f = _alarms(report)[0]
    assert (f.severity, f.symptom, f.step) == ("critical", "divergence", 1)
    came_back = _diagnose(np.arange(3), {"loss": np.array([5.8079, 22.2083, 5.1])})
    assert all(f.symptom != "divergence" for f in _alarms(came_back))
    mid_run = _diagnose(np.array([1851300, 1851400, 1851500]), {"loss": np.array([0.183091, 0.606006, 0.571156])})
    assert _alarms(mid_run) == []


def _grad_norms(n, level, spread, seed):
    g = np.random.default_rng(seed)
    return [level * math.exp(spread * g.standard_normal()) for _ in range(n)]


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_a_gradient_jump_out_of_a_calm_history_is_a_spike_though_it_came_back(seed):
    """A fine-tune's norms of 2.4-5.7, then 237 for one logged interval and back (GLM-4 thread): x77
    is under the x1000 bar for a jump that came back, but ~15 of its history's own noise sigmas."""
    gn = _grad_norms(10, 3.5, 0.25, seed) + [237.6, 4.9, 5.7]
    loss = _noisy(10, 0.095, seed=seed) + [0.12, 0.1, 0.099]
    r = diagnose_runs([from_columns(range(13), {"loss": loss, "grad_norm": gn})])
    alarm = next(f for f in r.findings if f.severity in ("warning", "critical"))
    assert alarm.symptom == "spike" and alarm.step == 10 and _keys(alarm)[0] == "diff.what.grad_jump"
    assert alarm.evidence[0].values["g"] == 237.6


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_a_x100_gradient_jump_in_a_scattered_small_batch_log_that_came_back_is_no_symptom(seed):
    """Small batches of a converged model scatter their norms over decades (sigma ~1.5 in ln g): a
    x100 point that comes back is within a few of their sigmas, no jump."""
    gn = _grad_norms(20, 0.05, 1.5, seed)
    gn[15] = 100 * float(np.median(gn[:15]))
    run = from_columns(range(20), {"loss": _noisy(20, 0.3, rel=0.2, seed=seed), "grad_norm": gn})
    assert not any(s.kind == "grad_jump" for s in symptoms_of(Quantities(run)))


def _zero_finding(report):
    return next(f for f in report.findings if f.symptom == "zero_loss")


def test_a_zero_loss_after_a_start_far_above_chance_is_a_saturated_init_not_an_empty_mask():
    """An MLP initialised with std 1 starts at a loss of 1.5e4 against ln 10 = 2.3: its softmax is
    saturated, and a batch whose one-hot outputs are all right has a loss and gradient of exactly 0
    (the zoo's mlp_init_std_1, raised live as label_mask_empty before): bad_init leads the zero loss.
    The same zeros after a start at chance stay an empty label mask."""
    loss = [15300.0, 900.0, 40.0, 3.0, 0.9] + [0.0] * 6
    grad = [800.0, 300.0, 20.0, 2.0, 0.5] + [0.0] * 6
    meta = {"chance_loss": math.log(10)}
    saturated = _zero_finding(_diagnose(range(11), {"loss": loss, "grad_norm": grad}, meta=meta))
    assert saturated.cause == "bad_init", _keys(saturated)
    assert "diff.ev.saturated_start" in _keys(saturated)
    calm = [2.31, 2.2, 2.0, 1.7, 1.2] + [0.0] * 6
    masked = _zero_finding(_diagnose(range(11), {"loss": calm, "grad_norm": grad}, meta=meta))
    assert masked.cause == "label_mask_empty", _keys(masked)


def test_a_zero_loss_between_swings_at_an_lr_far_above_usual_is_the_lr():
    """Adam at LR 0.128 swings a CNN's batch losses between 24 and exactly 0 (the zoo's
    cnn_adam_lr_scaled_for_big_batch, its first 51 steps, raised live as label_mask_empty before): the
    saturating step size leads the zero loss the log ends on, not a mask."""
    loss = [1.326, 24.3184, 2.3986, 1.4092, 1.2972, 0.961, 0.9468, 0.6328, 0.1647, 0.2487, 0.2529, 0.0035]
    loss += [1.9593, 0.0, 0.0138, 0.0, 0.6131, 0.8324, 0.0545, 0.6791, 0.1107, 0.5148, 0.2723, 0.0479, 0.498]
    loss += [0.0816, 0.0, 0.0, 0.0, 0.0098, 0.0, 0.8902, 0.0, 0.0, 0.3706, 0.0002, 0.0003, 0.3064, 0.1735]
    loss += [0.0936, 0.0017, 0.0004, 0.5494, 0.0093, 0.2476, 0.0543, 0.0009, 0.0004, 0.0, 1.3464, 0.0]
    grad = [2.0 if v > 0 else 1e-14 for v in loss]  # (the run logged 1e-14, not an exact 0)
    cols = {"loss": loss, "grad_norm": grad, "lr": [0.128] * len(loss)}
    f = _zero_finding(_diagnose(range(len(loss)), cols, meta={"optimizer": "Adam"}))
    assert f.cause == "lr_too_high", _keys(f)
    cols["lr"] = [1e-3] * len(loss)
    assert _zero_finding(_diagnose(range(len(loss)), cols, meta={"optimizer": "Adam"})).cause != "lr_too_high"


def test_a_loss_logged_as_0_beside_a_nan_grad_norm_is_an_empty_label_mask(tmp_path):
    """TRL's SFT with every label -100 logs `{'loss': 0.0, 'grad_norm': nan, ...}` (the HF Trainer's NaN
    filter prints the 0/0 mean as 0.0): the reader reads it back as NaN and says where, and the NaN's
    leading cause is the empty mask; the same lines printing `'loss': nan` carry no such evidence."""
    from lossdoctor.sources import load_path

    line = "{{'loss': {}, 'grad_norm': nan, 'learning_rate': 2e-05, 'mean_token_accuracy': 0.0, 'epoch': {}}}\n"
    for loss, want in (("0.0", True), ("nan", False)):
        p = tmp_path / f"trl_{loss}.txt"
        p.write_text("".join(line.format(loss, round(0.1 * k, 1)) for k in range(1, 5)))
        [f] = [f for f in diagnose_runs(load_path(p)).findings if f.symptom == "nonfinite"]
        assert ("diff.ev.zero_beside_nan_grad" in _keys(f)) == want, _keys(f)
        assert (f.cause == "label_mask_empty") == want, (loss, f.cause)
