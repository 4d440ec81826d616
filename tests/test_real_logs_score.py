"""The real-log scorer (benchmarks/real_logs/score.py): every corpus file is diagnosed, and the
judging rules give the verdicts they promise on hand-made reports. No accuracy floor is asserted
beyond what the scorer measured when it was written."""

from __future__ import annotations

import json

import pytest

from benchmarks.real_logs import score
from lossdoctor.records import make_run


def _report(status, *findings):
    return {
        "status": status,
        "findings": [dict(cause=c, symptom=s, severity=sev, step=st, fixes=list(fx)) for c, s, sev, st, fx in findings],
        "notes": ["inconclusive: only 3 finite loss points; log grad_norm"],
    }


def _entry(outcome, expected=None):
    return {"file": "x.log", "outcome": outcome, "expected_cause": expected}


@pytest.fixture(scope="module")
def results():
    return score.score_corpus()


def test_every_corpus_file_is_diagnosed_and_judged(results):
    entries = json.loads(score.MANIFEST.read_text())
    assert [r.file for r in results] == [e["file"] for e in entries]
    valid = {
        score.RIGHT,
        score.RIGHT_TOP3,
        score.INCONCLUSIVE,
        score.WRONG,
        score.FALSE_ALARM,
        score.OK_HEALTHY,
        score.NOT_SCORED,
        score.REFUSED,
    }
    for r in results:
        assert r.verdict in valid, r.file
        assert r.split in ("dev", "test"), r.file
        if r.read == score.NOT_READ:  # the reader raised: counted as refused, never as a verdict
            assert r.verdict == score.REFUSED and r.status == "refused", r.file
            continue
        assert r.status in ("healthy", "inconclusive", "warning", "critical"), r.file
        assert (r.verdict == score.NOT_SCORED) == (r.outcome == "other"), r.file
    t = score.totals(results)
    assert t["right"] + t["inconclusive"] + t["wrong"] + t["refused_faulty"] == t["faulty"]
    # measured when the scorer was written: 25 of 27 faulty logs right or inconclusive, 0 harmful fixes
    assert t["right"] + t["inconclusive"] >= 20
    # no harmful fix on the split the rules are tuned on; the test split is measured, never tuned on,
    # so its count is a regression guard at what was measured (1: a healthy log given an LR cut; 2 since
    # the eighth batch, whose held-out PaddleClas log got an LR cut from the code before that batch too)
    assert score.totals([r for r in results if r.split == "dev"])["harmful"] == 0
    assert score.totals([r for r in results if r.split == "test"])["harmful"] <= 2


def test_an_lr_cut_on_a_recovered_spike_is_harmful_and_elsewhere_not():
    rep = _report("critical", ("lr_too_high", "spike", "critical", 30, ["lower the learning rate by 10x"]))
    assert score.harmful_fixes(rep, "spike", recovered=True)
    assert score.harmful_fixes(rep, "healthy", recovered=None)
    assert score.harmful_fixes(rep, "spike", recovered=None)  # the excerpt ends at the spike
    assert not score.harmful_fixes(rep, "spike", recovered=False)  # a spike that did not recover
    assert not score.harmful_fixes(rep, "divergence", recovered=None)
    skip = _report(
        "warning",
        (
            "lr_too_high",
            "spike",
            "warning",
            30,
            ["skip the data window of that step, or rewind to the last checkpoint before it"],
        ),
    )
    assert not score.harmful_fixes(skip, "spike", recovered=True)


def test_set_the_lr_is_a_cut_only_below_the_current_lr():
    assert score.cuts_lr("set the learning rate to about 2.00e-05 (now 1.98e-04)", None)
    assert not score.cuts_lr("set the learning rate to about 3.00e-04 (now 1.00e-05)", None)
    assert score.cuts_lr("set the learning rate to about 1e-5", current_lr=1e-4)
    assert not score.cuts_lr("set the learning rate to about 1e-5", current_lr=None)  # cannot prove a cut
    assert not score.cuts_lr("add a linear warm-up of the LR over the first 2-5% of steps", None)
    assert not score.cuts_lr("clip gradients: clip_grad_norm_(model.parameters(), max_norm=1.0)", None)


def test_inconclusive_on_a_faulty_log_is_a_miss_not_right():
    verdict, why = score.judge(_entry("plateau"), _report("inconclusive"))
    assert verdict == score.INCONCLUSIVE and why.startswith("cannot tell") and "log grad_norm" in why
    assert score.judge(_entry("plateau"), _report("healthy"))[0] == score.WRONG
    assert score.judge(_entry("healthy"), _report("inconclusive"))[0] == score.OK_HEALTHY
    flagged = _report("warning", ("noisy_data", "plateau", "warning", 4, []))
    assert score.judge(_entry("healthy"), flagged)[0] == score.FALSE_ALARM


def test_cause_top1_top3_and_symptom_families():
    rep = _report(
        "critical", ("lr_too_high", "divergence", "critical", 9, []), ("grad_explosion", "spike", "warning", 9, [])
    )
    assert score.judge(_entry("spike", "lr_too_high"), rep)[0] == score.RIGHT
    assert score.judge(_entry("spike", "grad_explosion"), rep)[0] == score.RIGHT_TOP3
    assert score.judge(_entry("spike", "bad_init"), rep)[0] == score.WRONG
    assert score.judge(_entry("divergence"), rep)[0] == score.RIGHT
    assert score.judge(_entry("spike"), rep)[0] == score.RIGHT_TOP3
    assert score.judge(_entry("plateau"), rep)[0] == score.WRONG


def test_a_nan_needs_a_critical_nonfinite_finding_near_the_first_bad_row():
    rows = {s: s - 1 for s in range(1, 11)}  # steps 1..10 in rows 0..9
    near = _report("critical", ("nonfinite_data", "nonfinite", "critical", 9, []))
    far = _report("critical", ("lr_too_high", "nonfinite", "critical", 2, []))
    assert score.judge(_entry("nan"), near, first_bad_row=9, finding_rows=rows)[0] == score.RIGHT
    assert score.judge(_entry("nan"), far, first_bad_row=9, finding_rows=rows)[0] == score.WRONG
    warn = _report("warning", ("grad_explosion", "nonfinite", "warning", 10, []))
    assert score.judge(_entry("nan"), warn, first_bad_row=9, finding_rows=rows)[0] == score.WRONG


def test_a_nan_component_is_the_logs_nan_only_when_no_total_loss_is_printed():
    """Two adversaries' losses kept as components (no total read): their NaN is the log's. Beside a
    printed total, a component's NaN is not (the total says whether the step broke)."""
    nan = float("nan")
    gan = make_run([{"step": s, "lr": 1e-4} for s in (10, 20, 30)])
    gan.events["loss_components"] = {10: {"d": 0.7, "g": 1.2}, 20: {"d": nan, "g": 1.1}, 30: {"d": nan, "g": nan}}
    assert score.first_nonfinite(gan) == (20, 1)
    summed = make_run([{"step": s, "loss": 2.0} for s in (10, 20, 30)])
    summed.events["loss_components"] = {20: {"aux": nan}}
    assert score.first_nonfinite(summed) == (None, None)


def test_spike_recovered_reads_the_loss_after_the_largest_grad_norm():
    steps = list(range(1, 7))
    back = make_run(
        [
            {"step": s, "loss": v, "grad_norm": g}
            for s, v, g in zip(steps, [1.4, 1.45, 1.4, 1.3, 1.27, 1.18], [4.2, 4.2, 5e3, 1.7e8, 3.0, 2.4])
        ]
    )
    assert score.spike_recovered(back) is True
    stuck = make_run(
        [
            {"step": s, "loss": v, "grad_norm": g}
            for s, v, g in zip(steps, [1.4, 1.45, 1.4, 6.0, 6.3, 6.1], [4.2, 4.2, 5e3, 1.7e8, 3.0, 2.4])
        ]
    )
    assert score.spike_recovered(stuck) is False
    no_before = make_run([{"step": 1, "loss": 5.0, "grad_norm": 1e6}, {"step": 2, "loss": 1.0, "grad_norm": 1.0}])
    assert score.spike_recovered(no_before) is None


def test_the_harm_rule_recognises_the_lr_cuts_lossdoctor_actually_prints():
    """Every lr_too_high finding on the corpus carries an LR cut that cuts_lr sees: were the fix
    wording to change, the harm check would go blind and this test says so."""
    from lossdoctor.detectors.engine import diagnose_runs
    from lossdoctor.sources import load_path

    seen = 0
    for e in json.loads(score.MANIFEST.read_text()):
        if not e.get("reads_today", True):
            continue
        runs = load_path(score.CORPUS / e["file"])
        run = max(runs, key=len)
        for f in diagnose_runs(runs).to_dict()["findings"]:
            data = [d for d in f.get("fixes_data") or [] if d]
            # a finding too uncertain for an LR cut advises measuring first (a differential's
            # measurement, or lr_advice's re-run at a third of the LR): no cut to recognise there
            if f["cause"] == "lr_too_high" and not all(
                d["key"].startswith("diff.") or d.get("fix_kind") == "measure" for d in data
            ):
                seen += 1
                assert any(score.cuts_lr(x, score.lr_at(run, f["step"])) for x in f["fixes"]), (e["file"], f["fixes"])
    assert seen >= 1


def test_the_threads_facts_make_advice_harmful():
    """`has_loss_scaler`, `clips_at`, `recovered_spike` from the manifest: a fix kind that
    contradicts what the thread shows counts as harmful, and only then."""

    def rep(key, text):
        return {
            "status": "critical",
            "findings": [
                dict(
                    cause="loss_scale_collapse",
                    symptom="nonfinite",
                    severity="critical",
                    step=3,
                    fixes=[text],
                    fixes_data=[{"key": key, "values": {}}],
                )
            ],
        }

    scaler = rep("pprec.fix_use_scaler", "use torch.amp.GradScaler")
    assert score.harmful_fixes(scaler, "nan", None, facts={"has_loss_scaler": True})
    assert not score.harmful_fixes(scaler, "nan", None, facts={})
    clip = rep("grad.fix_clip", "clip gradients at 1.0")
    assert score.harmful_fixes(clip, "divergence", None, facts={"clips_at": 1.0})
    assert not score.harmful_fixes(clip, "divergence", None, facts={"clips_at": None})
    cut = rep("lr.fix.lower_by", "make the step smaller")  # the key says it, whatever the words
    assert score.harmful_fixes(cut, "spike", False, facts={"recovered_spike": True})
    assert not score.harmful_fixes(cut, "spike", True, facts={"recovered_spike": False})


def test_a_refused_log_counts_against_every_headline_figure():
    ok = score.Judged(
        "a", "nan", "lr_too_high", "critical", "lr_too_high", "nonfinite", 3, score.RIGHT, alarmed=True, cause_top1=True
    )
    refused = score._refused({"file": "b", "outcome": "nan", "expected_cause": "lr_too_high", "split": "test"}, "x")
    healthy = score._refused({"file": "c", "outcome": "healthy", "expected_cause": None}, "x")
    t = score.split_totals([ok, refused, healthy])
    assert (t["read"], t["refused"], t["flagged"], t["faulty"]) == (1, 2, 1, 2)
    assert (t["cause_top1"], t["with_cause"], t["clean"], t["healthy"]) == (1, 2, 0, 1)


def test_dev_index_names_every_dev_file_and_no_test_file():
    """DEV_INDEX.md is what the reader and the reasoner may look at: exactly the dev split, kept in
    step with the manifest (rewrite it with `python -m benchmarks.real_logs.score --dev-index`)."""
    import re

    entries = json.loads(score.MANIFEST.read_text(encoding="utf-8"))
    listed = set(re.findall(r"^\| `([^`]+)` \|", score.DEV_INDEX.read_text(encoding="utf-8"), re.M))
    assert listed == {e["file"] for e in entries if e["split"] == "dev"}
    assert score.DEV_INDEX.read_text(encoding="utf-8") == score.dev_index()


def test_an_lr_cut_is_read_from_the_fix_kind_and_parameters_before_its_words():
    """The harm rule reads a fix's data where it has any: an `lr` fix by 1/3 or to a value below the
    quoted LR is a cut, one that raises the LR is not, whatever its sentence says; words decide only
    when the data cannot (another kind, no LR to compare with)."""
    lr = {"fix_kind": "lr", "key": "x"}
    assert score.cut_by_kind({**lr, "params": {"lr_factor": 1 / 3}}, None) is True
    assert score.cut_by_kind({**lr, "params": {"lr_factor": 3.0}}, None) is False
    assert score.cut_by_kind({**lr, "params": {"lr": 1e-4, "lr_now": 1e-3}}, None) is True
    assert score.cut_by_kind({**lr, "params": {"lr": 1e-2, "lr_now": None}}, 1e-3) is False
    assert score.cut_by_kind({**lr, "params": {"lr": 1e-2, "lr_now": None}}, None) is None
    assert score.cut_by_kind({"fix_kind": "lr_range", "params": {"lo": 1e-5, "hi": 1e-4, "lr_now": 1e-3}}, None)
    assert score.cut_by_kind({"fix_kind": "clip", "params": {"max_norm": 1.0}}, 1e-3) is None
    report = {
        "findings": [
            {
                "cause": "lr_too_high",
                "step": 5,
                "fixes": ["lower the learning rate"],
                "fixes_data": [{"key": "x", "fix_kind": "lr", "params": {"lr_factor": 3.0}}],
            }
        ]
    }
    assert score.harmful_fixes(report, "healthy", None) == []
    report["findings"][0]["fixes_data"][0]["params"]["lr_factor"] = 0.1
    assert len(score.harmful_fixes(report, "healthy", None)) == 1


def test_excerpts_find_the_first_printed_nan_value_not_a_name():
    from benchmarks.real_logs.excerpts import NAN_WORD

    assert NAN_WORD.search("iter 40 | loss: nan | lr 0.1")
    assert NAN_WORD.search("tensor(inf, device='cuda:0')")
    assert not NAN_WORD.search("number of nan iterations:   0 | financial: 3")


def test_excerpts_of_a_healthy_log_and_of_a_nan_log_are_judged(tmp_path, monkeypatch):
    from benchmarks.real_logs import excerpts

    healthy = "".join(f"step {s} | loss {2.5 * 0.99**s:.4f}\n" for s in range(0, 400, 10))
    nan = "".join(f"step {s} | loss {2.5 * 0.99**s:.4f}\n" for s in range(0, 300, 10)) + "step 300 | loss nan\n"
    (tmp_path / "h.log").write_text(healthy)
    (tmp_path / "n.log").write_text(nan + "step 310 | loss nan\n")
    entries = [
        {"file": "h.log", "outcome": "healthy", "split": "dev"},
        {"file": "n.log", "outcome": "nan", "split": "dev"},
    ]
    (tmp_path / "manifest.json").write_text(json.dumps(entries))
    monkeypatch.setattr(excerpts, "CORPUS", tmp_path)
    monkeypatch.setattr(excerpts, "MANIFEST", tmp_path / "manifest.json")
    cuts = excerpts.cut_corpus("dev")
    assert {(c.kind, c.cut) for c in cuts} == {
        *(("healthy", k) for k in excerpts.HEALTHY_CUTS),
        *(("faulty", k) for k in excerpts.FAULTY_CUTS),
        ("nan", "up to the first NaN line"),
        ("nan", "around it"),
    }
    assert all(c.ok for c in cuts), [(c.kind, c.cut, c.got) for c in cuts if not c.ok]
