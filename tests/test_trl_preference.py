"""Preference training through TRL's real trainers (DPO, ORPO, KTO; CPU, tiny GPT-2 from a config,
a tokenizer trained here), the callback added exactly as the README shows it
(`callbacks=[LossDoctorCallback(log_dir=...)]`). Each failure is made for real by its usual cause
(an LR far too high, a beta too large for the LR, an LR of 0, prompts that leave no room for the
answer) and must be named with a fix in the words of the installed TRL; the same run read back
from the files the Trainer wrote (`trainer_state.json`, its console dicts, TensorBoard tags) must
be diagnosed the same; healthy runs stay clean."""

from __future__ import annotations

import contextlib
import dataclasses
import io
import math

import numpy as np
import pytest

torch = pytest.importorskip("torch")
trl = pytest.importorskip("trl")

import trl_kit  # noqa: E402
from lossdoctor.detectors.engine import diagnose_runs  # noqa: E402
from lossdoctor.integrations.transformers import LossDoctorCallback  # noqa: E402
from lossdoctor.records import from_columns  # noqa: E402
from lossdoctor.sources import load_path  # noqa: E402
from lossdoctor.sources.rundir import read_run_dir  # noqa: E402

PREFERENCE_CAUSES = ("likelihood_displacement", "reward_overoptimization")


@dataclasses.dataclass
class Trained:
    cb: LossDoctorCallback
    trainer: object
    run: object  # the run directory the callback wrote, read back
    console: str  # what the Trainer printed (its log dicts)
    dir: object


def _train(tmp_path_factory, name: str, kind: str = "dpo", **kw) -> Trained:
    d = tmp_path_factory.mktemp(name)
    cb = LossDoctorCallback(log_dir=d / "ld")
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        trainer = getattr(trl_kit, kind)(d / "out", callback=cb, **kw)
    (run,) = read_run_dir(d / "ld")
    return Trained(cb, trainer, run, out.getvalue(), d)


def _offline(t: Trained, what: str):
    """The run diagnosed from one of the files the Trainer wrote."""
    if what == "trainer_state":
        path = t.dir / "trainer_state.json"
        t.trainer.state.save_to_json(str(path))
    elif what == "console":
        path = t.dir / "train.log"
        path.write_text(t.console)
    else:  # TensorBoard, the tags HF's TensorBoardCallback writes (`train/` + the logged name)
        from torch.utils.tensorboard import SummaryWriter

        path = t.dir / "tb"
        with SummaryWriter(str(path)) as w:
            for e in t.trainer.state.log_history:
                if "train_runtime" not in e:
                    for k, v in e.items():
                        if k not in ("step", "epoch") and isinstance(v, (int, float)):
                            w.add_scalar(f"train/{k}", v, e["step"])
    runs = load_path(path)
    return runs, diagnose_runs(runs)


def _one(report, cause):
    found = [f for f in report.findings if f.cause == cause]
    assert len(found) == 1, [f.to_dict() for f in report.findings]
    return found[0]


def _keys(msgs):
    return [getattr(m, "key", None) for m in msgs]


def _logged(trainer, key):
    return np.array([e[key] for e in trainer.state.log_history if key in e and "train_runtime" not in e], dtype=float)


# --- an LR far too high: both rewards fall (likelihood displacement) ------------------------------------


@pytest.fixture(scope="module")
def lr_too_high(tmp_path_factory):
    return _train(tmp_path_factory, "dpo_lr", steps=30, lr=5e-2, lr_scheduler_type="constant")


def test_dpo_records_what_trl_logs(lr_too_high):
    """The record's loss is TRL's DPO loss (not the model's LM loss on the chosen+rejected
    sequences), and the preference scalars are TRL's, step by step."""
    run, trainer = lr_too_high.run, lr_too_high.trainer
    assert run.meta["task"] == "preference"
    fw = run.meta["framework"]
    assert fw["beta"] == 0.1 and fw["loss_type"] == ["sigmoid"] and fw["trl_version"] == trl.__version__
    assert len(run) == 30
    np.testing.assert_allclose(run.col("loss"), _logged(trainer, "loss"), rtol=1e-6)
    assert run.col("loss")[0] == pytest.approx(math.log(2), abs=1e-4)  # policy == reference at step 0
    for col, key in (
        ("rewards_chosen", "rewards/chosen"),
        ("rewards_rejected", "rewards/rejected"),
        ("rewards_margins", "rewards/margins"),
        ("rewards_accuracies", "rewards/accuracies"),
        ("logps_chosen", "logps/chosen"),
        ("logps_rejected", "logps/rejected"),
    ):
        np.testing.assert_allclose(run.col(col), _logged(trainer, key), rtol=1e-6, err_msg=col)


def test_lr_too_high_both_rewards_fall_named_live(lr_too_high):
    f = _one(lr_too_high.cb.diagnose(), "likelihood_displacement")
    assert f.severity == "warning" and f.symptom == "divergence"
    fall = f.evidence[0].values
    assert (
        fall["c1"] < fall["c0"] - 2 and fall["r1"] < fall["r0"] - 2 and -(fall["c1"] - fall["c0"]) > 2 * fall["gained"]
    )
    assert "pref.chosen_logps_fall" in _keys(f.evidence)
    # the fix in the words of the TRL that ran: options DPOConfig has, none it lacks
    fields = {x.name for x in dataclasses.fields(trl.DPOConfig)}
    nll = f.fixes[0]
    assert nll.key == "pref.fix_nll_loss_type" and f"TRL {trl.__version__}" in nll
    assert 'loss_type=["sigmoid", "sft"]' in nll and {"loss_type", "loss_weights"} <= fields
    assert "rpo_alpha" not in " ".join(map(str, f.fixes)) and "rpo_alpha" not in fields
    assert trl.DPOConfig(
        output_dir="x", use_cpu=True, report_to=[], loss_type=["sigmoid", "sft"], loss_weights=[1.0, 1.0]
    ).loss_type == ["sigmoid", "sft"]
    assert (f.fixes[1].key, f.fixes[1].values["lr"], f.fixes[1].values["new"]) == ("pref.fix_lower_lr", 0.05, 0.005)
    assert "把 learning_rate 从 0.05 降到 0.005" in f.fixes[1].render("zh")
    assert not [g for g in lr_too_high.cb.diagnose().findings if g.cause == "reward_overoptimization"]


@pytest.mark.parametrize("what", ["trainer_state", "console", "tensorboard"])
def test_lr_too_high_offline_is_the_same_diagnosis(lr_too_high, what):
    live = _one(lr_too_high.cb.diagnose(), "likelihood_displacement")
    runs, report = _offline(lr_too_high, what)
    assert runs[0].has("rewards_margins") and runs[0].has("logps_chosen")
    f = _one(report, "likelihood_displacement")
    assert f.step == live.step + 1  # the Trainer counts steps from 1
    for k in ("c0", "c1", "r0", "r1"):
        assert f.evidence[0].values[k] == pytest.approx(live.evidence[0].values[k], rel=1e-3)
    assert f.fixes[0].key == "pref.fix_nll_any"  # no TRL version in the file: both spellings, with theirs


# --- beta too large for the LR: margins run away with the accuracy at 1.0 ------------------------------


@pytest.fixture(scope="module")
def margins_run_away(tmp_path_factory):
    return _train(tmp_path_factory, "dpo_margin", steps=40, lr=1e-2, beta=1.0, n=8, lr_scheduler_type="constant")


def test_margins_running_away_named_live_and_offline(margins_run_away):
    t = margins_run_away
    margins = _logged(t.trainer, "rewards/margins")
    assert margins[-10:].min() > 5 and _logged(t.trainer, "rewards/accuracies")[-10:].min() == 1.0  # the fault is real
    f = _one(t.cb.diagnose(), "reward_overoptimization")
    assert f.severity == "warning" and f.evidence[0].values["end"] > f.evidence[0].values["mid"] + 2
    assert "pref.accuracy_saturated" in _keys(f.evidence)
    by_key = {m.key: m for m in f.fixes}
    assert by_key["pref.fix_lower_lr"].values == {"lr": 0.01, "new": 0.001}
    assert by_key["pref.fix_raise_beta"].values["beta"] == 1.0  # read from the run's DPOConfig
    assert "pref.fix_ipo" in by_key and "ipo" in trl.DPOConfig.__doc__
    assert not [g for g in t.cb.diagnose().findings if g.cause == "likelihood_displacement"]
    _, report = _offline(t, "trainer_state")
    g = _one(report, "reward_overoptimization")
    assert g.evidence[0].values["end"] == pytest.approx(f.evidence[0].values["end"], rel=1e-3)


# --- an LR of 0: the DPO loss never leaves ln 2 -----------------------------------------------------------


def test_lr_zero_keeps_the_dpo_loss_at_ln2(tmp_path_factory):
    t = _train(tmp_path_factory, "dpo_lr0", steps=10, lr=0.0)
    assert np.all(np.abs(_logged(t.trainer, "loss") - math.log(2)) < 1e-6)
    for report in (t.cb.diagnose(), _offline(t, "trainer_state")[1]):
        f = [f for f in report.findings if f.cause == "frozen_model" and "pref.loss_at_ln2" in _keys(f.evidence)]
        assert len(f) == 1, [g.to_dict() for g in report.findings]
        assert "pref.rewards_exactly_zero" in _keys(f[0].evidence) and "pref.lr_zero" in _keys(f[0].evidence)
        assert _keys(f[0].fixes) == ["pref.fix_lr_zero", "pref.fix_frozen"]


# --- prompts that fill max_length: empty answers, NaN log-probs -----------------------------------------


def test_answers_truncated_away_give_nan_logps_named_label_mask_empty(tmp_path_factory):
    """ORPO (TRL 1.x: trl.experimental) keeps the prompt and truncates the answer: a 32-word prompt
    with max_length=20 leaves the answer no token, its mean log-prob is 0/0. The Trainer logs the
    NaN loss as 0.0 (its NaN filter): recorded as NaN."""
    t = _train(tmp_path_factory, "orpo_trunc", kind="orpo", steps=6, max_length=20, long_prompt_every=8)
    assert np.isnan(_logged(t.trainer, "logps/chosen")).any()  # the fault is real
    assert t.run.meta["framework"]["trainer"] == "ORPOTrainer" and t.run.meta["task"] == "preference"
    first = int(np.argmax(np.isnan(_logged(t.trainer, "logps/chosen"))))
    assert np.isnan(t.run.col("loss")[first]) and _logged(t.trainer, "loss")[first] == 0.0
    f = _one(t.cb.diagnose(), "label_mask_empty")
    assert f.step == first and f.symptom == "nonfinite" and f.severity == "critical"
    assert f.evidence[0].key == "pref.logps_nonfinite"
    assert f.fixes[0].key == "pref.fix_max_length" and f.fixes[0].values == {"n": 20, "new": 40}
    assert "max_length" in {x.name for x in dataclasses.fields(type(t.trainer.args))}
    assert "max_prompt_length" not in " ".join(map(str, f.fixes))  # TRL 1.x has no such option
    g = _one(_offline(t, "trainer_state")[1], "label_mask_empty")
    assert g.step == first + 1 and g.evidence[0].key == "pref.logps_nonfinite"


# --- healthy runs stay clean ----------------------------------------------------------------------------


@pytest.mark.parametrize("kind,kw", [("dpo", dict(steps=24, lr=5e-3)), ("orpo", dict(steps=8)), ("kto", dict(steps=8))])
def test_healthy_preference_runs_are_clean(tmp_path_factory, kind, kw):
    t = _train(tmp_path_factory, f"healthy_{kind}", kind=kind, **kw)
    assert t.run.meta["task"] == "preference" and t.run.has("rewards_chosen") and t.run.has("logps_chosen")
    np.testing.assert_allclose(t.run.col("loss"), _logged(t.trainer, "loss"), rtol=1e-6)  # TRL's own loss
    for report in (t.cb.diagnose(), _offline(t, "trainer_state")[1]):
        bad = [f.to_dict() for f in report.findings if f.severity != "info"]
        assert bad == [] and report.status in ("healthy", "inconclusive")  # 8 steps may be too few to judge


# --- each rule stays silent where its cause is not the explanation ----------------------------------------


def _run(n=24, **cols):
    """A run as a Trainer log gives it: every column logged at every step (NaN included)."""
    steps = np.arange(1, n + 1)
    return from_columns(
        steps,
        {k: np.asarray(v, dtype=float) for k, v in cols.items()},
        meta={"framework": {"name": "transformers"}},
        source="hf_trainer",
        logged={k: np.ones(n, dtype=bool) for k in cols},
    )


def test_nan_logps_after_the_gradient_blew_up_is_not_an_empty_answer():
    n = 12
    gn = np.r_[np.full(8, 1.0), 40.0, np.nan, np.nan, np.nan]
    logps = np.r_[np.linspace(-16, -20, 9), np.nan, np.nan, np.nan]
    loss = np.r_[np.full(9, 0.6), np.nan, np.nan, np.nan]
    report = diagnose_runs([_run(n, loss=loss, grad_norm=gn, logps_chosen=logps, logps_rejected=logps - 1)])
    assert not [f for f in report.findings if "pref.logps_nonfinite" in _keys(f.evidence)]
    # the same NaN with a calm gradient before it is the empty answer
    gn[8] = 1.0
    report = diagnose_runs([_run(n, loss=loss, grad_norm=gn, logps_chosen=logps, logps_rejected=logps - 1)])
    assert [f.step for f in report.findings if "pref.logps_nonfinite" in _keys(f.evidence)] == [10]


def test_large_but_settled_margins_and_a_tiny_lr_at_ln2():
    n = 24
    settled = np.r_[np.linspace(0, 6, 8), np.full(16, 6.0)]
    report = diagnose_runs(
        [
            _run(
                n,
                loss=np.exp(-settled) + 0.01,
                rewards_margins=settled,
                rewards_accuracies=np.ones(n),
                rewards_chosen=settled / 2,
                rewards_rejected=-settled / 2,
            )
        ]
    )
    assert not [f for f in report.findings if f.cause in PREFERENCE_CAUSES]
    # a tiny LR: the rewards move, but by 1e-4: lr_too_low with a 10x LR in the fix
    tiny = np.linspace(0, 1e-4, n)
    report = diagnose_runs(
        [
            _run(
                n,
                loss=np.full(n, math.log(2)) - tiny,
                lr=np.full(n, 1e-8),
                rewards_margins=tiny,
                rewards_chosen=tiny,
                rewards_rejected=np.zeros(n),
            )
        ]
    )
    (f,) = [f for f in report.findings if "pref.loss_at_ln2" in _keys(f.evidence)]
    assert f.cause == "lr_too_low" and f.fixes[0].values == {"lr": 1e-8, "new": 1e-7}
