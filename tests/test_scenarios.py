"""Every detector on a real run with its fault, and silence on healthy runs.

Each scenario trains a real model (MLPs, a hand-written attention model, a transformers GPT-2 built
from config, fp16 autocast with GradScaler on CPU, bf16 parameters) under `lossdoctor.watch`, then
diagnoses the run directory exactly as `lossdoctor diagnose` does.
"""

from __future__ import annotations

import json
from importlib import resources

import jsonschema
import pytest

from lossdoctor import diagnose
from lossdoctor.demo.scenarios import SCENARIOS, run_scenario
from msgs import has

HEALTHY = [n for n, s in SCENARIOS.items() if not s.expect]
FAULTS = [n for n, s in SCENARIOS.items() if s.expect]
SCHEMA = json.loads(resources.files("lossdoctor").joinpath("schema/report.schema.json").read_text())


@pytest.fixture(scope="module")
def diagnosed(tmp_path_factory):
    cache = {}

    def get(name):
        if name not in cache:
            d = run_scenario(name, tmp_path_factory.mktemp(name.replace("-", "_")), seed=0)
            cache[name] = (d, diagnose(str(d)))
        return cache[name]

    return get


@pytest.mark.parametrize("name", HEALTHY)
def test_healthy_runs_are_silent(diagnosed, name):
    _, report = diagnosed(name)
    loud = [(f.cause, f.severity, f.evidence) for f in report.findings if f.severity != "info"]
    assert report.status == "healthy", loud
    jsonschema.validate(report.to_dict(), SCHEMA)


@pytest.mark.parametrize("name", FAULTS)
def test_fault_is_the_primary_diagnosis(diagnosed, name):
    _, report = diagnosed(name)
    assert report.findings, f"{name}: nothing found"
    primary = report.findings[0]
    assert primary.cause in SCENARIOS[name].expect, [(f.cause, f.step, f.evidence) for f in report.findings]
    assert primary.severity in ("warning", "critical")
    assert primary.evidence and primary.fixes
    jsonschema.validate(report.to_dict(), SCHEMA)


def test_nan_data_names_step_and_sample(diagnosed):
    _, r = diagnosed("nan-data")
    f = r.findings[0]
    assert (f.step, f.batch, f.samples, f.severity) == (60, 60, [5], "critical")
    assert not any(g.cause == "grad_explosion" for g in r.findings)  # cause, not consequence


def test_attention_padding_names_layer_and_sample(diagnosed):
    _, r = diagnosed("attention-padding")
    f = r.findings[0]
    assert (f.cause, f.step, f.layer, f.samples) == ("attention_overflow", 50, "attn", [7])


def test_the_demo_verifies_dropping_the_empty_sequence(tmp_path):
    """`lossdoctor demo` replays (as the CLI runs it): dropping the empty sequence is a change of
    data the replay checks and passes; masking with finfo.min is a change of code."""
    f = diagnose(str(run_scenario("attention-padding", tmp_path, seed=0, replay=True))).findings[0]
    verdicts = {f.fixes[c["fix"]].key: c["verdict"] for c in f.fix_checks or []}
    assert verdicts == {"triage.attn.drop_empty_fix": "verified", "triage.attn.mask_min_fix": "not_verifiable"}
    assert f.fixes[0].key == "triage.attn.drop_empty_fix"


def test_grad_explosion_gives_max_norm_from_history(diagnosed):
    _, r = diagnosed("grad-explosion")
    f = r.findings[0]
    assert f.cause == "grad_explosion" and f.symptom == "nonfinite"
    assert f.evidence[0].key == "grad.rose_then_nonfinite", f.evidence[0].data()
    # the clipping threshold is the p95 of the run's own healthy norms, as data
    clip = next(x for x in f.fixes if x.kind == "clip")
    assert clip.key == "grad.fix_clip" and clip.params["max_norm"] == clip.values["max_norm"] > 0


def test_lr_too_high_at_step_one_without_nan(diagnosed):
    _, r = diagnosed("lr-too-high")
    f = r.findings[0]
    assert f.cause == "lr_too_high" and f.step is not None and f.step <= 3
    assert [x for x in f.fixes if x.kind in ("lr", "lr_range")], [x.data() for x in f.fixes]


def test_forward_overflow_explains_the_scale_collapse(diagnosed):
    """Inputs beyond fp16's range overflow the first layer on every step: the scaler backs off
    forever, but the cause is the forward overflow, and the finding says what the scale did."""
    _, r = diagnosed("fp16-overflow")
    f = r.findings[0]
    assert f.cause == "activation_overflow" and f.severity == "critical" and f.symptom == "nonfinite"
    assert f.layer == "0" and f.step == 0
    assert has(f.evidence, "nonfinite.scaler_after_overflow") or has(f.evidence, "precision.scale_fell"), [
        m.data() for m in f.evidence
    ]
    assert not any(g.cause == "loss_scale_collapse" for g in r.findings)


def test_fp16_activation_overflow_names_the_layer(diagnosed):
    _, r = diagnosed("fp16-activation-overflow")
    over = [f for f in r.findings if f.cause == "activation_overflow"]
    assert over and over[0].layer in ("2", "3") and over[0].severity == "critical"
    assert any("65504" in str(x) for x in over[0].fixes)


def test_vanishing_names_first_layer(diagnosed):
    _, r = diagnosed("vanishing")
    assert r.findings[0].layer == "0"


def test_loss_spike_at_the_corrupted_batch(diagnosed):
    _, r = diagnosed("loss-spike")
    f = r.findings[0]
    assert f.cause == "loss_spike" and f.step == 300
    assert any("outlier" in e for e in f.evidence)


def test_schedule_errors_are_explained(diagnosed):
    _, r = diagnosed("cosine-too-short")
    assert r.findings[0].evidence[0].key == "lr.schedule.cosine_restart"
    _, r = diagnosed("warmup-per-epoch")
    e = r.findings[0].evidence[0]
    assert (e.key, e.values["k"]) == ("lr.schedule.staircase", 25), e.data()


def test_live_findings_match_offline(diagnosed):
    """What the monitor announced live is what the offline diagnosis says."""
    d, r = diagnosed("nan-data")
    live = [json.loads(x) for x in (d / "findings.jsonl").read_text().splitlines()]
    assert live and live[0]["cause"] == r.findings[0].cause and live[0]["step"] == r.findings[0].step
