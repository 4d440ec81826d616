"""Verified fixes beyond clipping and the LR: a GradScaler's init_scale, the optimizer's eps, a
module run in fp32, each replayed on a real training run (fp16 autocast on CPU, fp16 Adam state);
the verdicts survive the merge of an incident into the detectors' finding, and fixes are ordered
by verdict."""

from __future__ import annotations

import json
from importlib import resources

import jsonschema
import numpy as np
import pytest
import torch
from torch import nn

import lossdoctor
from conftest import run_cli
from lossdoctor.detectors.fix_kinds import candidate, order_by_verdict
from lossdoctor.findings import Finding, Fix, Report
from lossdoctor.messages import Msg
from msgs import has, sentence_of
from triage_models import MLP, mse_loss, regression_batches, train

SCHEMA = json.loads(resources.files("lossdoctor").joinpath("schema/report.schema.json").read_text())
RANK = {"verified": 0, "not_checked": 1, "not_verifiable": 1, "did_not_help": 2}


@pytest.fixture(autouse=True)
def _seed():
    torch.manual_seed(0)


def _record(path, step):
    return json.loads((path / "incidents" / f"step-{step:08d}.json").read_text())


def _assert_checks_point_at_their_fix(f: Finding) -> None:
    """Every check's `fix` index names a fix whose kind and numbers are what the check replayed,
    and no fix that did not help comes before one that was verified."""
    assert f.fix_checks
    for c in f.fix_checks:
        fix = candidate(f.fixes[c["fix"]], None, f)
        assert fix.kind == c["kind"], (f.fixes[c["fix"]], c)
        for name, value in fix.values().items():
            if name != "samples":
                assert c.get(name) == pytest.approx(value), (name, f.fixes[c["fix"]], c)
    listed = [c["verdict"] for c in f.fix_checks]
    assert listed == sorted(listed, key=["verified", "did_not_help", "not_checked", "not_verifiable"].index)
    verdicts = {c["fix"]: c["verdict"] for c in f.fix_checks}
    ranks = [RANK.get(verdicts.get(i, ""), 1) for i in range(len(f.fixes))]
    assert ranks == sorted(ranks), (f.fixes, f.fix_checks)


# --- loss-scale collapse: GradScaler(init_scale=...) ---------------------------------------------------


def amp_loss(model, batch):
    """The loop's loss under fp16 autocast on CPU (what the replay must run too)."""
    with torch.autocast("cpu", dtype=torch.float16):
        return mse_loss(model, batch)


def test_loss_scale_collapse_the_suggested_init_scale_is_verified_and_clipping_does_not_help(tmp_path):
    """fp16 autocast on CPU with GradScaler(init_scale=2**40): fp16 gradients overflow at that scale,
    and the scaler skips step after step while it backs off. Traced without the scale, the step is
    finite: the incident says to start at 2**16, and the replay from step 0 with that scaler trains."""
    model = MLP()
    opt = torch.optim.Adam(model.parameters(), lr=1e-2)
    scaler = torch.amp.GradScaler("cpu", init_scale=2.0**40)
    mon = lossdoctor.watch(
        model, opt, scaler=scaler, log_dir=tmp_path, alerts=False, replay_fn=amp_loss, snapshot_every=50
    )
    train(model, opt, regression_batches(40), mse_loss, mon, scaler=scaler, autocast=torch.float16)
    rec = _record(tmp_path, 11)  # 12 skips in a row: steps 0-11
    assert (rec["trigger"], rec["level"], rec["scale"]["streak"]) == ("scale_collapse", "replay", 12)
    [f] = [Finding.from_dict(d) for d in rec["findings"]]
    assert f.cause == "loss_scale_collapse" and f.fixes[0].key == "triage.scale.fix_init_scale"
    assert f.fixes[0].values["init_scale"] == 2.0**16
    # checked once the window was recorded (with the live engine's findings' fixes): verified
    [check] = [
        c for c in rec["verification"]["checks"] if c["cause"] == "loss_scale_collapse" and c["kind"] == "scaler"
    ]
    assert (check["kind"], check["verdict"], check["init_scale"]) == ("scaler", "verified", 2.0**16)
    assert check["unfixed_first_bad"] == 11 and check["first_bad"] is None
    assert has([sentence_of(check)], "verify.outcome.skips", n=12, step=11), check["sentence_data"]
    # a wrong fix: clipping the (unscaled, infinite) gradients changes nothing
    scale = scaler.get_scale()
    [r] = mon.verify_fixes(fixes=(Fix("clip", max_norm=1.0),))
    [clip] = [c for c in r["checks"] if c["cause"] is None]
    assert clip["verdict"] == "did_not_help" and clip["first_bad"] == 11
    said = sentence_of(clip)
    assert (
        said.key == "verify.did_not_help"
        and has([said], "verify.fix.clip", max_norm=1.0)
        and has([said], "verify.outcome.skips", n=12)
    ), said.data()
    assert scaler.get_scale() == scale, "the user's scaler is left alone"
    mon.close()
    top = mon.diagnose().findings[0]
    assert top.cause == "loss_scale_collapse" and top.fix_checks[0]["verdict"] == "verified"
    assert top.fixes[top.fix_checks[0]["fix"]].key == "triage.scale.fix_init_scale"
    _assert_checks_point_at_their_fix(top)


# --- a module run in fp32 -------------------------------------------------------------------------------


class UpNormNet(nn.Module):
    """A wide projection, then LayerNorm: under fp16 autocast the projection of large inputs
    overflows 65504, while in fp32 the LayerNorm after it brings them back to unit scale."""

    def __init__(self) -> None:
        super().__init__()
        self.up = nn.Linear(6, 32)
        self.norm = nn.LayerNorm(32)
        self.out = nn.Linear(32, 3)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.out(torch.relu(self.norm(self.up(x))))


def test_an_fp16_overflow_running_that_module_in_fp32_is_verified_and_clipping_does_not_help(tmp_path):
    model = UpNormNet()
    opt = torch.optim.Adam(model.parameters(), lr=1e-2)
    batches = regression_batches(40)
    x, y = batches[14]
    batches[14] = (x * 1e5, y)  # inputs far from unit scale: `up` overflows fp16 there
    mon = lossdoctor.watch(model, opt, log_dir=tmp_path, alerts=False, replay_fn=amp_loss, snapshot_every=5)
    losses = train(model, opt, batches, mse_loss, mon, autocast=torch.float16)
    assert np.isfinite(losses[13]) and not np.isfinite(losses[14])
    rec = _record(tmp_path, 14)
    [f] = [Finding.from_dict(d) for d in rec["findings"]]
    assert f.cause == "activation_overflow" and f.layer == "up"
    fp32 = f.fixes[0]
    assert fp32.key == "triage.overflow.fix_module_fp32" and fp32.values == {"module": "up", "dtype": "float16"}
    [r] = mon.verify_fixes(fixes=(Fix("clip", max_norm=1.0),))
    [check] = [c for c in r["checks"] if c["kind"] == "fp32_module"]
    assert check["verdict"] == "verified" and check["module"] == "up" and check["first_bad"] is None
    said = sentence_of(check)
    assert (said.key, said.values["step"]) == ("verify.verified", 14) and has([said], "verify.fix.fp32", module="up"), (
        said.data()
    )
    assert has([said], "verify.outcome.nonfinite", step=14) and check["loss_after"] < 3  # unfixed: NaN at 14
    [clip] = [c for c in r["checks"] if c["cause"] is None]
    assert clip["verdict"] == "did_not_help" and clip["first_bad"] == 14
    # the replay wrapped the scratch copy's module only
    assert "forward" not in model.up.__dict__
    mon.close()
    top = mon.diagnose().findings[0]
    assert top.cause == "activation_overflow" and top.fixes[0] == fp32
    assert top.fix_checks[0]["verdict"] == "verified"
    _assert_checks_point_at_their_fix(top)
    zh = Msg.from_data(top.fix_checks[0]["sentence_data"]).render("zh")
    assert zh.startswith("已验证：采用「up 用 fp32 计算（对它关闭 autocast）」后重放能越过第 14 步")


# --- the optimizer's eps --------------------------------------------------------------------------------


def half_loss(model, batch):
    x, y = batch
    return mse_loss(model, (x.half(), y.half())).float()


def test_adam_in_fp16_raising_eps_is_verified_clipping_and_a_lower_lr_do_not_help(tmp_path):
    """A model in fp16 with Adam at eps=1e-8: the second moment is kept in fp16, where 1e-8 rounds
    to 0; where it underflows, the update is m / 0 and the first step makes the weights Inf."""
    model = MLP().half()
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    mon = lossdoctor.watch(model, opt, log_dir=tmp_path, alerts=False, replay_fn=half_loss, snapshot_every=5)
    losses = train(model, opt, regression_batches(30), half_loss, mon)
    assert np.isfinite(losses[0]) and not np.isfinite(losses[1])
    rec = _record(tmp_path, 1)
    assert rec["level"] == "replay-state"
    [f] = [Finding.from_dict(d) for d in rec["findings"]]
    eps = next(x for x in f.fixes if x.key == "triage.state.fix_eps")
    assert eps.values["eps"] == pytest.approx(1e-4) and eps.values["now"] == pytest.approx(1e-8)
    assert any(getattr(e, "key", None) == "triage.state.eps_underflows" for e in f.evidence)
    # checked on its own: the record's finding has its fixes ordered by verdict
    by_kind = {c["kind"]: c for c in f.fix_checks}
    assert by_kind["adam_eps"]["verdict"] == "verified" and by_kind["adam_eps"]["eps"] == pytest.approx(1e-4)
    assert by_kind["clip"]["verdict"] == "did_not_help" and by_kind["lr"]["verdict"] == "did_not_help"
    assert f.fixes[0] == eps
    _assert_checks_point_at_their_fix(f)
    mon.close()
    top = mon.diagnose().findings[0]
    assert top.fixes[0] == eps and top.fix_checks[0]["verdict"] == "verified"
    _assert_checks_point_at_their_fix(top)


# --- verdicts survive the merge ---------------------------------------------------------------------------


def _explosion_run(tmp_path, **meta):
    """SGD on a regression; the batch of step 14 is 300x larger: its update throws the weights far
    out and two steps later the loss is inf. Replayed, the state before step 16 breaks on other
    batches too: a replay-state incident, merged into the detectors' grad_explosion finding."""
    model = MLP()
    opt = torch.optim.SGD(model.parameters(), lr=0.05)
    batches = regression_batches(40)
    x, y = batches[14]
    batches[14] = (x * 300.0, y * 300.0)
    mon = lossdoctor.watch(model, opt, log_dir=tmp_path, alerts=False, replay_fn=mse_loss, snapshot_every=5)
    mon.meta.update(meta)  # what a framework callback records (e.g. the Trainer's max_grad_norm)
    train(model, opt, batches, mse_loss, mon)
    return mon


def test_a_replay_state_incident_hands_its_verdicts_to_the_detectors_finding(tmp_path):
    mon = _explosion_run(tmp_path)
    mon.close()
    rec = _record(tmp_path, 16)
    assert rec["level"] == "replay-state" and rec["verification"]["status"] == "checked"
    report = mon.diagnose()
    top = report.findings[0]
    assert top.cause == "grad_explosion" and top.fix_checks, "the incident's verdicts reach the top finding"
    # the verified clipping (the incident's own sentence: the detector suggests another max_norm)
    # is added and comes first; the detector's lower LR (the same value the incident suggested)
    # gets the incident's verdict: it did not help, so it comes last
    assert top.fixes[0].key == "triage.state.fix_clip" and top.fix_checks[0]["verdict"] == "verified"
    [lr] = [c for c in top.fix_checks if c["kind"] == "lr"]
    assert lr["verdict"] == "did_not_help" and top.fixes[lr["fix"]].key == "grad.fix_lower_lr"
    assert lr["fix"] == len(top.fixes) - 1
    _assert_checks_point_at_their_fix(top)
    d = report.to_dict()
    jsonschema.validate(d, SCHEMA)
    assert d["findings"][0]["fixes_data"][0]["key"] == "triage.state.fix_clip"
    # the offline path merges the same way
    cli = run_cli("diagnose", tmp_path, "--format", "json")
    assert cli.returncode == 0, cli.stderr
    first = json.loads(cli.stdout)["findings"][0]
    assert first["fixes"] == d["findings"][0]["fixes"] and first["fix_checks"] == d["findings"][0]["fix_checks"]


def test_lr_too_high_its_own_set_the_lr_sentence_is_verified_and_the_verdict_reaches_the_report(tmp_path):
    """Plain SGD with the LR far too high: lr_too_high says "set the learning rate to about X
    (now 0.5)"; its values (lr=X, now=0.5) are what the replay scales the LR to. At 0.5 the run goes
    NaN at the same step whatever the last bits of the init (at 0.35 whether it went NaN at all
    depended on the CPU's kernels: a 1e-7 change of the weights decided it)."""
    torch.manual_seed(13)  # MLP() draws from the global generator: an unseeded run depends on the test order
    model = MLP()
    opt = torch.optim.SGD(model.parameters(), lr=0.5)
    mon = lossdoctor.watch(model, opt, log_dir=tmp_path, alerts=False, replay_fn=mse_loss, snapshot_every=10)
    train(model, opt, regression_batches(80), mse_loss, mon)
    [r] = mon.verify_fixes()
    [own] = [c for c in r["checks"] if c["cause"] == "lr_too_high" and c["kind"] == "lr"]
    assert own["verdict"] == "verified" and own["lr"] < 0.5 / 2  # the LR probe's winner (x1/3, rounded), replayed again
    mon.close()
    [f] = [f for f in mon.diagnose().findings if f.cause == "lr_too_high"]
    assert f.fixes[0].key == "lr.fix.probed" and f.fixes[0].values["lr"] == pytest.approx(own["lr"])
    assert f.fix_checks[0]["fix"] == 0 and f.fix_checks[0]["verdict"] == "verified"
    _assert_checks_point_at_their_fix(f)


# --- what a sentence asks for, and the order ---------------------------------------------------------------


def _finding(fixes, checks=None):
    return Finding(
        cause="grad_explosion",
        symptom="nonfinite",
        severity="critical",
        confidence=0.9,
        step=5,
        fixes=fixes,
        fix_checks=checks,
    )


def test_a_fix_replays_what_its_kind_and_numbers_say_not_its_sentence():
    """The candidate a replay tries is read from the fix's kind and params: the same sentence made
    with another kind is a code change, and a plain sentence (the old form) is one too."""
    f = _finding([])
    said = Msg("grad.fix_lower_lr", lr=0.05, to=0.017)
    lr = candidate(Fix.lr(said, to=0.017, now=0.05), 0, f)
    assert (lr.kind, lr.lr, lr.lr_now) == ("lr", 0.017, 0.05)
    assert candidate(Fix.code(said), 0, f).kind == "code"  # the same sentence, another kind
    assert candidate(said, 0, f).kind == "code"  # the old form: a Msg given as a fix
    assert candidate(said, 0, f).reason.key == "verify.reason.code"
    assert candidate("set the learning rate to about 0.01", 0, f).reason.key == "verify.reason.plain"
    assert candidate(Fix.lr(Msg("lr.fix.lower_by", x=10), factor=0.1), 0, f).lr_factor == pytest.approx(0.1)
    # an LR range to try is said, not replayed (no point to replay)
    rng = Fix.lr_range(Msg("lr.fix.range", lo=1e-4, hi=3e-4, now=1e-3), lo=1e-4, hi=3e-4, now=1e-3)
    assert candidate(rng, 0, f).kind == "code" and rng.params == {"lo": 1e-4, "hi": 3e-4, "lr_now": 1e-3}
    # a drop fix without its own samples drops the finding's; none named: nothing to replay
    drop = Fix.drop(Msg("triage.data.fix", keys=["'x'"]))
    assert candidate(drop, 0, _finding([])).kind == "code"
    with_rows = Finding(
        cause="nonfinite_data", symptom="nonfinite", severity="critical", confidence=0.9, step=5, samples=[3, 1]
    )
    assert (candidate(drop, 0, with_rows).kind, candidate(drop, 0, with_rows).samples) == ("drop_samples", [3, 1])
    with pytest.raises(ValueError):
        Fix("rewrite", None, said)  # the kinds are a closed vocabulary
    with pytest.raises(ValueError):
        Fix("clip", {"max_nrom": 1.0})


def test_the_detectors_lr_fixes_carry_the_lr_they_suggest_and_the_one_they_start_from():
    """Made by the detectors of a diverging log: an LR fix's numbers are params, and they match
    the values its sentence was made with."""
    from lossdoctor.detectors.engine import diagnose_runs
    from lossdoctor.records import Run

    n = 120
    lr = np.geomspace(1e-3, 3.0, n)  # a warm-up with no end: the LR keeps climbing
    loss = np.concatenate([np.linspace(2.0, 1.0, 60), np.geomspace(1.0, 40.0, 60)])
    run = Run(steps=np.arange(n), cols={"loss": loss, "lr": lr})
    found = diagnose_runs([run]).findings
    [f] = [f for f in found if f.rule == "scalars.runaway_lr"]
    assert f.cause == "lr_too_high" and all(x.rule for x in found)
    fix = next(x for x in f.fixes if x.kind == "lr")
    assert fix.key == "scalars.runaway.fix_cap"
    assert fix.params["lr"] == pytest.approx(fix.values["to"]) and fix.params["lr_now"] == pytest.approx(
        fix.values["lr"]
    )


def test_fixes_are_reordered_by_verdict_and_each_check_still_points_at_its_sentence():
    code = Fix.code(Msg("triage.attn.stable_fix"))
    lr = Fix.lr(Msg("grad.fix_lower_lr", lr=0.05, to=0.017), to=0.017, now=0.05)
    clip = Fix.clip(Msg("triage.state.fix_clip", max_norm=1.0), max_norm=1.0)
    skip = Fix.skip(Msg("triage.spike.fix_skip"))
    f = _finding(
        [lr, code, skip, clip],
        [
            {"fix": 0, "kind": "lr", "verdict": "did_not_help", "lr": 0.017},
            {"fix": 1, "kind": "code", "verdict": "not_verifiable"},
            {"fix": 3, "kind": "clip", "verdict": "verified", "max_norm": 1.0},
        ],
    )
    order_by_verdict(f)
    assert f.fixes == [clip, code, skip, lr]
    assert {c["kind"]: c["fix"] for c in f.fix_checks} == {"clip": 0, "code": 1, "lr": 3}
    _assert_checks_point_at_their_fix(f)
    # the JSON has the fixes, their data and the indices in the same order
    d = f.to_dict()
    assert [x["key"] for x in d["fixes_data"]] == [m.key for m in f.fixes]
    assert [(x["fix_kind"], x["params"]) for x in d["fixes_data"]] == [
        ("clip", {"max_norm": 1.0}),
        ("code", {}),
        ("skip_batch", {}),
        ("lr", {"lr": 0.017, "lr_now": 0.05}),
    ]
    back = Finding.from_dict(json.loads(json.dumps(d)))
    assert back.fixes == f.fixes and back.fix_checks == f.fix_checks
    assert [(x.kind, x.params) for x in back.fixes] == [(x.kind, x.params) for x in f.fixes]
    order_by_verdict(back)  # ordering twice changes nothing
    assert back.fixes == f.fixes and back.fix_checks == f.fix_checks
    assert Report(findings=[back], steps=10).to_dict()["findings"][0]["fixes"][0] == str(clip)


def test_the_detectors_fixes_are_checked_with_the_incident_without_asking(tmp_path):
    """The automatic check after an incident also replays the live engine's findings' fixes: the
    lr_too_high finding of a plain run carries its verdict with no call to `mon.verify_fixes()`,
    and the live engine's own findings are left without verdicts (copies were checked)."""
    torch.manual_seed(13)  # MLP() draws from the global generator: an unseeded run depends on the test order
    model = MLP()
    opt = torch.optim.SGD(model.parameters(), lr=0.35)
    mon = lossdoctor.watch(model, opt, log_dir=tmp_path, alerts=False, replay_fn=mse_loss, snapshot_every=10)
    train(model, opt, regression_batches(80), mse_loss, mon)
    live = {f.cause: f for f in mon.findings}
    mon.close()
    [f] = [f for f in mon.diagnose().findings if f.cause == "lr_too_high"]
    assert f.fix_checks, [x.cause for x in mon.diagnose().findings]
    assert f.fixes[0].key == "lr.fix.probed" and f.fix_checks[0]["verdict"] == "verified"
    # one answer: what the live engine shows for the cause is the final verdict
    assert [c["verdict"] for c in live["lr_too_high"].fix_checks] == [c["verdict"] for c in f.fix_checks]
    _assert_checks_point_at_their_fix(f)


def test_a_run_that_already_clips_at_1_is_not_told_to_clip_at_1(tmp_path):
    """The replay-state incident suggests clipping at 1.0 and a lower LR; a run whose metadata says
    it clips at 1.0 already (what the HF/Lightning callbacks record) gets only the lower LR."""
    mon = _explosion_run(tmp_path, max_grad_norm=1.0)
    mon.close()
    rec = _record(tmp_path, 16)
    assert rec["level"] == "replay-state"
    keys = [[x["key"] for x in d.get("fixes_data") or [] if x] for d in rec["findings"]]
    assert keys and all("triage.state.fix_clip" not in k and "triage.state.fix_lower_lr" in k for k in keys), keys


# --- fixes and findings as data: the kind and the rule decide, never the sentence -------------------------


def test_a_report_round_trips_through_json_with_its_fixes_kinds_params_and_rules():
    nan_lr = Fix.lr(Msg("lr.fix.set", lr=float("nan"), now=0.3), to=float("nan"), now=0.3)
    fixes = [
        Fix.clip(Msg("grad.fix_clip", max_norm=2.5, first=3, last=40), max_norm=2.5),
        Fix.lr_range(Msg("lr.fix.range", lo=1e-4, hi=3e-4, now=1e-3), lo=1e-4, hi=3e-4, now=1e-3),
        Fix.scaler(Msg("precision.fix_init_scale", init_scale=2.0**16, configured=2.0**40), init_scale=2.0**16),
        Fix.fp32(Msg("nonfinite.fix_layer_out_of_fp16", layer="blocks.3.mlp"), module="blocks.3.mlp"),
        Fix.drop(Msg("triage.data.fix", keys=["'x'"])),
        nan_lr,
        Fix("rerun", None, Msg("diff.fix.rerun", step=3, onset=9)),
        Msg("grad.fix_log_every_step"),  # the old form: a code change
        "check the data loader",
    ]  # plain text: a code change
    f = Finding(
        cause="grad_explosion",
        symptom="nonfinite",
        severity="critical",
        confidence=0.9,
        step=5,
        samples=[2],
        fixes=fixes,
        rule="gradients.grad_explosion",
    )
    d = Report(findings=[f], steps=50).to_dict()
    jsonschema.validate(d, SCHEMA)
    data = d["findings"][0]["fixes_data"]
    assert [x and x["fix_kind"] for x in data] == [
        "clip",
        "lr_range",
        "scaler",
        "fp32_module",
        "drop_samples",
        "lr",
        "rerun",
        "code",
        None,
    ]
    assert data[0]["params"] == {"max_norm": 2.5} and data[3]["params"] == {"module": "blocks.3.mlp"}
    assert data[5]["params"] == {"lr": {"float": "nan"}, "lr_now": 0.3}
    assert d["findings"][0]["rule"] == "gradients.grad_explosion"
    assert d["findings"][0]["fixes"][0] == str(fixes[0])  # the English strings stay the contract
    [back] = Report.from_dict(json.loads(json.dumps(d))).findings
    assert back.rule == "gradients.grad_explosion"
    assert [(x.kind, x.key) for x in back.fixes] == [(x.kind, x.key) for x in f.fixes]
    assert [x.params for x in back.fixes[:5]] == [x.params for x in f.fixes[:5]]
    assert np.isnan(back.fixes[5].params["lr"]) and back.fixes[5].params["lr_now"] == 0.3
    assert back.fixes[0].render("zh") == f.fixes[0].render("zh")  # and it renders in any language
    # a fixes_data entry of a kind this version does not know: the fix is read as a code change
    d["findings"][0]["fixes_data"][0]["fix_kind"] = "rewrite_the_model"
    assert Finding.from_dict(d["findings"][0]).fixes[0].kind == "code"


def test_verify_replays_a_fix_by_its_kind_and_numbers_not_its_sentence(tmp_path):
    """The same run, two fixes whose sentences lie about them: a clip fix worded as something else
    is replayed as clipping (and verified, as the honest clip fix is); a sentence that names
    max_norm, given as a code change, is not replayed."""
    mon = _explosion_run(tmp_path)
    disguised = Fix("clip", {"max_norm": 1.0}, Msg("triage.attn.stable_fix"))
    worded = Fix.code(Msg("triage.state.fix_clip", max_norm=1.0))
    [r] = mon.verify_fixes(fixes=(Fix("clip", max_norm=1.0), disguised, worded))
    asked = [c for c in r["checks"] if c["cause"] is None]
    honest, by_kind = [c for c in asked if c["kind"] == "clip"]
    assert honest["verdict"] == by_kind["verdict"] == "verified" and by_kind["max_norm"] == 1.0
    assert by_kind["loss_after"] == pytest.approx(honest["loss_after"])
    [code] = [c for c in asked if c["kind"] == "code"]
    assert code["verdict"] == "not_verifiable" and "max_norm" not in code
    mon.close()


def test_arbitration_reads_the_rule_not_the_evidence():
    """A loss spike while the LR still climbs is the runaway LR's divergence: dropped when the LR
    finding is `scalars.runaway_lr`'s, kept for the same finding made by another rule (even with
    the runaway's evidence word for word)."""
    from lossdoctor.detectors.engine import arbitrate
    from lossdoctor.detectors.scalars import RUNAWAY_LR

    said = [Msg("scalars.runaway.rose", x=100.0, lr0=1e-3, s0=0, lr1=0.1, s1=80)]

    def findings(rule):
        lr = Finding(
            cause="lr_too_high",
            symptom="divergence",
            severity="critical",
            confidence=0.8,
            step=40,
            evidence=list(said),
            rule=rule,
        )
        spike = Finding(
            cause="loss_spike",
            symptom="spike",
            severity="warning",
            confidence=0.7,
            step=60,
            rule="loss_shape.loss_spike",
        )
        return arbitrate([lr, spike])

    assert [f.cause for f in findings(RUNAWAY_LR)] == ["lr_too_high"]
    assert sorted(f.cause for f in findings("learning_rate.lr_too_high")) == ["loss_spike", "lr_too_high"]
