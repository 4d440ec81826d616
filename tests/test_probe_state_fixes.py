"""Plateau and slow-convergence findings whose fix changes the training state are tried from a
snapshot (triage/lr_probe.py, detectors/probes.py): a model frozen by mistake (every parameter
trained), clipping at a tiny max_norm (the norm the gradients have), a warm-up that never ends (the
LR held at the optimizer's peak). Each fix is replayed on the run's own recorded batches beside the
unchanged run; the finding says what was tried and both losses, and the user's model, its
`requires_grad` flags and its optimizer are as the unwatched run leaves them."""

from __future__ import annotations

import json

import pytest
import torch
from torch.nn import functional as F

import lossdoctor
from conftest import run_cli

STEPS = 200


def replay_loss(model: torch.nn.Module, batch) -> torch.Tensor:
    x, y = batch
    return F.cross_entropy(model(x), y)


def _loop(tmp_path, bug: str, watched: bool = True, replay: bool = True):
    """`bug`: "frozen" (requires_grad=False on all but the output bias), "subset" (every parameter
    trainable, the optimizer given the output bias only), "clip" (SGD clipped at
    max_norm 1e-3), "warmup" (a linear warm-up sized in samples: 32x the run's length)."""
    torch.manual_seed(0)
    g = torch.Generator().manual_seed(4)
    centres = 2.0 * torch.randn(10, 16, generator=g)
    model = torch.nn.Sequential(torch.nn.Linear(16, 64), torch.nn.ReLU(), torch.nn.Linear(64, 10))
    if bug == "frozen":
        model.requires_grad_(False)
        model[-1].bias.requires_grad_(True)
    params = [model[-1].bias] if bug == "subset" else [p for p in model.parameters() if p.requires_grad]
    opt = torch.optim.SGD(params, lr=0.05, momentum=0.9) if bug == "clip" else torch.optim.Adam(params, lr=3e-3)
    sched = (
        torch.optim.lr_scheduler.LambdaLR(opt, lambda s: min(1.0, (s + 1) / (STEPS * 32))) if bug == "warmup" else None
    )
    mon = (
        lossdoctor.watch(
            model,
            opt,
            scheduler=sched,
            log_dir=tmp_path,
            alerts=False,
            task="classification",
            replay_fn=replay_loss if replay else None,
        )
        if watched
        else None
    )
    for _ in range(STEPS):
        y = torch.randint(0, 10, (32,), generator=g)
        x = centres[y] + torch.randn(32, 16, generator=g)
        opt.zero_grad()
        loss = F.cross_entropy(model(x), y)
        loss.backward()
        if bug == "clip":
            torch.nn.utils.clip_grad_norm_(params, 1e-3)
        opt.step()
        if sched is not None:
            sched.step()
        if mon is not None:
            mon.step(loss, batch=(x, y))
    report = mon.diagnose() if mon is not None else None
    if mon is not None:
        mon.close()
    return model, opt, report


CASES = [
    ("frozen", "frozen_model", "unfreeze"),
    ("subset", "frozen_model", "unfreeze"),
    ("clip", "grad_clip_too_tight", "clip"),
    ("warmup", "lr_schedule_error", "lr"),
]


@pytest.mark.parametrize("bug,cause,kind", CASES)
def test_the_state_fix_of_a_slow_run_is_tried_and_verified(tmp_path, bug, cause, kind):
    model, opt, report = _loop(tmp_path / "run", bug)
    f = next(f for f in report.findings if f.cause == cause)
    data = f.to_dict()
    assert data["fixes_data"][0]["fix_kind"] == kind
    [check] = [c for c in data["fix_checks"] if c.get("probe")]
    assert (check["fix"], check["kind"], check["verdict"]) == (0, kind, "verified")
    assert check["loss_after"] < 0.8 * check["loss_before"]  # a measured improvement, both losses said
    assert check["sentence_data"]["key"] == "probe.tried"
    assert f.confidence >= 0.85 and report.findings[0].cause == cause
    assert (tmp_path / "run" / "probes" / f"probe-{cause}.json").is_file()
    # the CLI reading the directory later gives the same finding, fix and check
    out = json.loads(run_cli("diagnose", tmp_path / "run", "--format", "json").stdout)
    mine = next(x for x in out["findings"] if x["cause"] == cause)
    assert (mine["fixes"], mine["fixes_data"]) == (data["fixes"], data["fixes_data"])
    assert [(c["kind"], c["verdict"]) for c in mine["fix_checks"]] == [
        (c["kind"], c["verdict"]) for c in data["fix_checks"]
    ]
    # the replay trained a scratch copy: the user's model and optimizer are the unwatched run's
    plain_model, plain_opt, _ = _loop(tmp_path / "plain", bug, watched=False)
    for (name, p), q in zip(model.named_parameters(), plain_model.parameters()):
        assert p.requires_grad == q.requires_grad, name
        assert torch.equal(p, q), name
    assert len(opt.param_groups) == len(plain_opt.param_groups) == 1
    assert len(opt.param_groups[0]["params"]) == len(plain_opt.param_groups[0]["params"])


def test_without_a_replay_the_state_fix_is_said_not_tried(tmp_path):
    _, _, report = _loop(tmp_path / "run", "frozen", replay=False)
    f = next(f for f in report.findings if f.cause == "frozen_model")
    assert f.to_dict()["fixes_data"][0]["fix_kind"] == "unfreeze"
    assert not [c for c in f.fix_checks or [] if c.get("probe")]
