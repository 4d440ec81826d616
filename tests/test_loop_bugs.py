"""The training-loop bugs of the public troubleshooting lists, caught live and named for what they
are: real models, real optimizers, the loops people write (right and wrong)."""

from __future__ import annotations

import json

import pytest
import torch
from torch.nn import functional as F

import lossdoctor
from conftest import run_cli
from triage_models import MLP, classification_batches


@pytest.fixture(autouse=True)
def _seed():
    torch.manual_seed(0)


def _loop(tmp_path, zero: str, steps: int = 30, accum: int = 1, lr: float = 0.02):
    """`zero`: "none" (the bug), "none_every_other" (zero_grad on even steps only), "start"
    (set_to_none, before the forward), "start_zeros" (set_to_none=False), "after_step" (HF Trainer's
    place), "before_backward" (Lightning's place: between the forward and the backward)."""
    model = MLP()
    opt = torch.optim.SGD(model.parameters(), lr=lr, momentum=0.9)
    mon = lossdoctor.watch(model, opt, log_dir=tmp_path, alerts=False)
    batches = classification_batches(steps * accum, size=8)
    for step in range(steps):
        if zero == "start" or (zero == "none_every_other" and step % 2 == 0):
            opt.zero_grad()
        elif zero == "start_zeros":
            opt.zero_grad(set_to_none=False)
        total = 0.0
        for i in range(accum):
            x, y = batches[step * accum + i]
            loss = F.cross_entropy(model(x), y) / accum
            if zero == "before_backward" and i == 0:
                opt.zero_grad()
            loss.backward()
            total += float(loss.detach())
        opt.step()
        if zero == "after_step":
            opt.zero_grad()
        mon.step(torch.tensor(total), batch=batches[step * accum])
    mon.close()
    return mon


def _stale(tmp_path) -> list:
    rows = [json.loads(line) for line in (tmp_path / "steps.jsonl").read_text().splitlines()]
    return [r.get("grad_stale") for r in rows]


@pytest.mark.slow
def test_a_loop_that_never_zeroes_is_grad_not_zeroed_from_step_1(tmp_path):
    mon = _loop(tmp_path, "none")
    assert _stale(tmp_path)[:4] == [0, 1, 1, 1]
    top = mon.diagnose().findings[0]
    assert (top.cause, top.severity, top.step) == ("grad_not_zeroed", "critical", 1)
    data = top.to_dict()
    assert data["evidence_data"][0]["key"] == "bugs.stale.seen"
    assert data["evidence_data"][0]["values"]["n"] == 29 and data["evidence_data"][0]["values"]["of"] == 29
    assert data["fixes_data"][0]["key"] == "bugs.stale.fix"
    # the CLI on the run directory says the same
    out = run_cli("diagnose", tmp_path, "--format", "json")
    assert json.loads(out.stdout)["findings"][0]["cause"] == "grad_not_zeroed"


def test_zero_grad_on_some_steps_only_is_a_warning(tmp_path):
    mon = _loop(tmp_path, "none_every_other")
    f = next(f for f in mon.diagnose().findings if f.cause == "grad_not_zeroed")
    assert f.severity == "warning"
    assert f.to_dict()["evidence_data"][0]["key"] == "bugs.stale.partly"


@pytest.mark.parametrize("zero", ["start", "start_zeros", "after_step", "before_backward"])
def test_loops_that_zero_at_any_usual_place_read_clean(tmp_path, zero):
    mon = _loop(tmp_path, zero)
    stale = _stale(tmp_path)
    assert set(stale) == {0}, stale
    assert all(f.cause != "grad_not_zeroed" for f in mon.diagnose().findings)


def test_gradient_accumulation_on_purpose_is_not_stale(tmp_path):
    mon = _loop(tmp_path, "start", accum=4)
    assert set(_stale(tmp_path)) == {0}
    assert all(f.cause != "grad_not_zeroed" for f in mon.diagnose().findings)


def test_the_probe_never_changes_training(tmp_path):
    """Bit-identical weights with and without the monitor, in the buggy loop (hooks only read)."""

    def final(watched: bool):
        torch.manual_seed(0)
        model = MLP()
        opt = torch.optim.SGD(model.parameters(), lr=0.02, momentum=0.9)
        mon = lossdoctor.watch(model, opt, log_dir=tmp_path / str(watched), alerts=False) if watched else None
        for x, y in classification_batches(10):
            F.cross_entropy(model(x), y).backward()
            opt.step()
            if mon is not None:
                mon.step(torch.tensor(0.0))
        if mon is not None:
            mon.close()
        return [p.detach().clone() for p in model.parameters()]

    assert all(torch.equal(a, b) for a, b in zip(final(True), final(False)))


def _classify(tmp_path, softmax: bool, loss: str, steps: int = 60):
    """A 10-class problem (Gaussian clusters); `loss`: "ce" (F.cross_entropy of the output) or
    "nll_log" (nll_loss of log of the output: right for a model that outputs probabilities)."""
    g = torch.Generator().manual_seed(1)
    centres = 2.0 * torch.randn(10, 16, generator=g)
    layers = [torch.nn.Linear(16, 64), torch.nn.ReLU(), torch.nn.Linear(64, 10)]
    model = torch.nn.Sequential(*layers, *([torch.nn.Softmax(dim=-1)] if softmax else []))
    opt = torch.optim.Adam(model.parameters(), lr=3e-3)
    mon = lossdoctor.watch(model, opt, log_dir=tmp_path, alerts=False, task="classification")
    for _ in range(steps):
        y = torch.randint(0, 10, (32,), generator=g)
        x = centres[y] + torch.randn(32, 16, generator=g)
        opt.zero_grad()
        out = model(x)
        value = F.cross_entropy(out, y) if loss == "ce" else F.nll_loss(out.clamp_min(1e-12).log(), y)
        value.backward()
        opt.step()
        mon.step(value, batch=(x, y))
    mon.close()
    return mon


def test_probabilities_fed_to_cross_entropy_are_softmax_before_loss(tmp_path):
    mon = _classify(tmp_path, softmax=True, loss="ce")
    top = mon.diagnose().findings[0]
    assert top.cause == "softmax_before_loss"
    ev = {d["key"]: d["values"] for d in top.to_dict()["evidence_data"]}
    assert ev["bugs.softmax.outputs"]["k"] == 10
    floor = ev["bugs.softmax.floor"]
    assert abs(floor["floor"] - 1.4607) < 1e-3 and floor["best"] >= floor["floor"] - 0.02
    assert [d["key"] for d in top.to_dict()["fixes_data"]][0] == "bugs.softmax.fix"


@pytest.mark.parametrize("softmax,loss", [(True, "nll_log"), (False, "ce")])
def test_probabilities_with_the_right_loss_and_logits_with_ce_read_clean(tmp_path, softmax, loss):
    mon = _classify(tmp_path, softmax=softmax, loss=loss)
    assert all(f.cause != "softmax_before_loss" for f in mon.diagnose().findings)
    assert mon.diagnose().status == "healthy", [f.cause for f in mon.diagnose().findings]


def _frozen(tmp_path, how: str, steps: int = 60):
    """`how`: "all_but_bias" (requires_grad=False on all but the output bias), "optimizer_subset"
    (every parameter trainable, the optimizer given the output bias only), "head" (a frozen
    backbone with a trained output layer, on purpose)."""
    g = torch.Generator().manual_seed(2)
    centres = 2.0 * torch.randn(10, 16, generator=g)
    model = torch.nn.Sequential(
        torch.nn.Linear(16, 256), torch.nn.ReLU(), torch.nn.Linear(256, 256), torch.nn.ReLU(), torch.nn.Linear(256, 10)
    )
    head = model[-1]
    if how in ("all_but_bias", "head"):
        model.requires_grad_(False)
        (head if how == "head" else head.bias).requires_grad_(True)
    params = [head.bias] if how == "optimizer_subset" else [p for p in model.parameters() if p.requires_grad]
    opt = torch.optim.Adam(params, lr=3e-3)
    mon = lossdoctor.watch(model, opt, log_dir=tmp_path, alerts=False, task="classification")
    for _ in range(steps):
        y = torch.randint(0, 10, (32,), generator=g)
        x = centres[y] + torch.randn(32, 16, generator=g)
        opt.zero_grad()
        loss = F.cross_entropy(model(x), y)
        loss.backward()
        opt.step()
        mon.step(loss, batch=(x, y))
    mon.close()
    return mon


@pytest.mark.parametrize(
    "how,key", [("all_but_bias", "bugs.frozen.few_trainable"), ("optimizer_subset", "bugs.frozen.optimizer_subset")]
)
def test_a_model_frozen_by_mistake_is_frozen_model_with_the_counts(tmp_path, how, key):
    mon = _frozen(tmp_path, how)
    top = mon.diagnose().findings[0]
    assert top.cause == "frozen_model"
    ev = {d["key"]: d["values"] for d in top.to_dict()["evidence_data"]}
    assert key in ev and "bugs.frozen.loss_flat" in ev
    if how == "all_but_bias":
        assert (ev[key]["trainable"], ev[key]["total"]) == (10, 16 * 256 + 256 + 256 * 256 + 256 + 2570)
    else:
        assert ev[key]["n"] == 10


def test_a_frozen_backbone_with_a_trained_head_reads_clean(tmp_path):
    mon = _frozen(tmp_path, "head")
    assert mon.diagnose().status == "healthy", [(f.cause, f.evidence) for f in mon.diagnose().findings]


def _scheduled(tmp_path, make_sched, steps: int = 120, lr: float = 3e-3, seen_live: set | None = None):
    """A run with the scheduler `make_sched(opt)` stepped per optimizer step; `seen_live` receives
    the causes `watch` announced before `close`."""
    g = torch.Generator().manual_seed(3)
    centres = 2.0 * torch.randn(10, 16, generator=g)
    model = torch.nn.Sequential(torch.nn.Linear(16, 64), torch.nn.ReLU(), torch.nn.Linear(64, 10))
    opt = torch.optim.AdamW(model.parameters(), lr=lr)
    sched = make_sched(opt)
    mon = lossdoctor.watch(model, opt, scheduler=sched, log_dir=tmp_path, alerts=False, task="classification")
    for _ in range(steps):
        y = torch.randint(0, 10, (32,), generator=g)
        x = centres[y] + torch.randn(32, 16, generator=g)
        opt.zero_grad()
        loss = F.cross_entropy(model(x), y)
        loss.backward()
        opt.step()
        sched.step()
        mon.step(loss, batch=(x, y))
    if seen_live is not None:
        seen_live.update(_live_causes(tmp_path))
    mon.close()
    return mon


def _linear_warmup(opt, warmup: int):
    return torch.optim.lr_scheduler.LambdaLR(opt, lambda s: min(1.0, (s + 1) / warmup))


def test_a_warmup_sized_in_samples_never_ends_and_says_how_long_it_would_take(tmp_path):
    mon = _scheduled(tmp_path, lambda o: _linear_warmup(o, 100 * 32))  # 100 steps x 32 samples
    f = next(f for f in mon.diagnose().findings if f.cause == "lr_schedule_error")
    ev = {d["key"]: d["values"] for d in f.to_dict()["evidence_data"]}
    assert ev["bugs.warmup.never_ends"]["n"] == 120
    would = ev["bugs.warmup.would_reach"]
    assert abs(would["step"] - 3200) <= 40 and abs(would["peak"] - 3e-3) < 1e-12


@pytest.mark.parametrize(
    "make",
    [
        pytest.param(lambda o: _linear_warmup(o, 20), id="warmup-that-ends"),
        pytest.param(lambda o: torch.optim.lr_scheduler.OneCycleLR(o, max_lr=3e-3, total_steps=120), id="one-cycle"),
        pytest.param(lambda o: torch.optim.lr_scheduler.CosineAnnealingWarmRestarts(o, T_0=30), id="sgdr"),
        pytest.param(
            lambda o: torch.optim.lr_scheduler.CosineAnnealingWarmRestarts(o, T_0=20, T_mult=2), id="sgdr-tmult"
        ),
    ],
)
def test_schedules_done_on_purpose_are_not_schedule_errors(tmp_path, make):
    mon = _scheduled(tmp_path, make)
    assert all(f.cause != "lr_schedule_error" for f in mon.diagnose().findings), [
        (f.cause, f.evidence) for f in mon.diagnose().findings
    ]
    # the same from the scalars alone (no meta.json naming the scheduler)
    rows = [json.loads(line) for line in (tmp_path / "steps.jsonl").read_text().splitlines()]
    csv = tmp_path / "scalars_only.csv"
    csv.write_text("step,loss,lr\n" + "".join(f"{r['step']},{r['loss']},{r['lr']}\n" for r in rows))
    out = run_cli("diagnose", csv, "--format", "json")
    assert out.returncode == 0, out.stderr
    assert all(f["cause"] != "lr_schedule_error" for f in json.loads(out.stdout)["findings"])


def test_a_cosine_period_shorter_than_the_run_is_still_a_schedule_error(tmp_path):
    mon = _scheduled(tmp_path, lambda o: torch.optim.lr_scheduler.CosineAnnealingLR(o, T_max=30))
    assert any(f.cause == "lr_schedule_error" for f in mon.diagnose().findings)


def _ordered(tmp_path, sort: bool, steps: int = 80):
    g = torch.Generator().manual_seed(4)
    centres = 2.0 * torch.randn(8, 16, generator=g)
    model = torch.nn.Sequential(torch.nn.Linear(16, 64), torch.nn.ReLU(), torch.nn.Linear(64, 8))
    opt = torch.optim.Adam(model.parameters(), lr=3e-3)
    # a dataset of 8 classes x 320 samples; the loader either keeps its order (sorted by class) or shuffles
    ys = torch.arange(8).repeat_interleave(320)
    xs = centres[ys] + torch.randn(ys.shape[0], 16, generator=g)
    order = torch.arange(ys.shape[0]) if sort else torch.randperm(ys.shape[0], generator=g)
    loader = torch.utils.data.DataLoader(torch.utils.data.TensorDataset(xs[order], ys[order]), batch_size=32)
    mon = lossdoctor.watch(model, opt, log_dir=tmp_path, alerts=False, task="classification")
    for _, (x, y) in zip(range(steps), loader):
        opt.zero_grad()
        loss = F.cross_entropy(model(x), y)
        loss.backward()
        opt.step()
        mon.step(loss, batch=(x, y))
    mon.close()
    return mon


def test_data_sorted_by_class_is_unshuffled_data_with_the_jump_at_the_class_change(tmp_path):
    mon = _ordered(tmp_path, sort=True)
    top = mon.diagnose().findings[0]
    assert top.cause == "unshuffled_data"
    ev = {d["key"]: d["values"] for d in top.to_dict()["evidence_data"]}
    assert ev["bugs.unshuffled.batches"]["n"] == 80 and ev["bugs.unshuffled.batches"]["changes"] == 7
    assert ev["bugs.unshuffled.jump"]["s"] % 10 == 0 and ev["bugs.unshuffled.jump"]["x"] >= 1.5  # a class boundary
    assert top.step == ev["bugs.unshuffled.jump"]["s"]


def test_the_same_data_shuffled_reads_clean(tmp_path):
    mon = _ordered(tmp_path, sort=False)
    rows = [json.loads(line) for line in (tmp_path / "steps.jsonl").read_text().splitlines()]
    assert {r["batch_one_class"] for r in rows} == {0}
    assert all(f.cause != "unshuffled_data" for f in mon.diagnose().findings)


class _Bigram(torch.nn.Module):
    """The smallest causal LM: the logits at position t are a function of token t."""

    def __init__(self, vocab: int = 32) -> None:
        super().__init__()
        self.emb = torch.nn.Embedding(vocab, 32)
        self.head = torch.nn.Linear(32, vocab)

    def forward(self, input_ids: torch.Tensor) -> torch.Tensor:
        return self.head(torch.relu(self.emb(input_ids)))


def _lm(tmp_path, shift: bool, steps: int = 60):
    g = torch.Generator().manual_seed(5)
    trans = torch.softmax(3.0 * torch.randn(32, 32, generator=g), dim=-1)  # a Markov chain's transitions
    model = _Bigram()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-2)
    mon = lossdoctor.watch(model, opt, log_dir=tmp_path, alerts=False, task="pretrain")
    for _ in range(steps):
        ids = torch.empty(8, 24, dtype=torch.long)
        ids[:, 0] = torch.randint(0, 32, (8,), generator=g)
        for t in range(1, 24):
            ids[:, t] = torch.multinomial(trans[ids[:, t - 1]], 1, generator=g).squeeze(1)
        opt.zero_grad()
        logits = model(input_ids=ids)
        if shift:
            loss = F.cross_entropy(logits[:, :-1].reshape(-1, 32), ids[:, 1:].reshape(-1))
        else:
            loss = F.cross_entropy(logits.reshape(-1, 32), ids.reshape(-1))
        loss.backward()
        opt.step()
        mon.step(loss, batch={"input_ids": ids, "labels": ids})
    mon.close()
    return mon


def test_labels_equal_to_the_inputs_without_a_shift_is_labels_not_shifted(tmp_path):
    mon = _lm(tmp_path, shift=False)
    top = mon.diagnose().findings[0]
    assert (top.cause, top.severity) == ("labels_not_shifted", "critical")
    ev = {d["key"]: d["values"] for d in top.to_dict()["evidence_data"]}
    assert ev["bugs.copy.frac"]["pct"] > 90 and ev["bugs.copy.loss"]["end"] < 0.1 * ev["bugs.copy.loss"]["chance"]


def test_the_same_lm_with_the_shift_reads_clean(tmp_path):
    mon = _lm(tmp_path, shift=True)
    rows = [json.loads(line) for line in (tmp_path / "steps.jsonl").read_text().splitlines()]
    assert max(r["out_copy_frac"] for r in rows if "out_copy_frac" in r) < 0.3
    assert all(f.cause != "labels_not_shifted" for f in mon.diagnose().findings)


def _epochs(tmp_path, back_to_train: bool, freeze_bn: bool = False, epochs: int = 4, per_epoch: int = 10):
    """Train with a validation pass (model.eval(), no_grad) after every epoch; `back_to_train`:
    the loop calls model.train() at the start of each epoch, as it should."""
    g = torch.Generator().manual_seed(6)
    centres = 2.0 * torch.randn(5, 16, generator=g)
    model = torch.nn.Sequential(
        torch.nn.Linear(16, 32),
        torch.nn.BatchNorm1d(32),
        torch.nn.ReLU(),
        torch.nn.Dropout(0.2),
        torch.nn.Linear(32, 5),
    )
    opt = torch.optim.Adam(model.parameters(), lr=3e-3)
    mon = lossdoctor.watch(model, opt, log_dir=tmp_path, alerts=False, task="classification")

    def batch():
        y = torch.randint(0, 5, (16,), generator=g)
        return centres[y] + torch.randn(16, 16, generator=g), y

    for _ in range(epochs):
        if back_to_train:
            model.train()
            if freeze_bn:
                model[1].eval()  # BatchNorm statistics frozen on purpose
        for _ in range(per_epoch):
            x, y = batch()
            opt.zero_grad()
            loss = F.cross_entropy(model(x), y)
            loss.backward()
            opt.step()
            mon.step(loss, batch=(x, y))
        model.eval()
        with torch.no_grad():  # validation
            x, y = batch()
            F.cross_entropy(model(x), y)
    mon.close()
    return mon


def test_a_loop_that_never_calls_train_after_validation_is_eval_mode_training(tmp_path):
    mon = _epochs(tmp_path, back_to_train=False)
    f = next(f for f in mon.diagnose().findings if f.cause == "eval_mode_training")
    ev = f.to_dict()["evidence_data"][0]
    assert ev["key"] == "bugs.eval.seen" and (ev["values"]["n"], ev["values"]["of"], ev["values"]["first"]) == (
        30,
        40,
        10,
    )


@pytest.mark.parametrize("freeze_bn", [False, True])
def test_a_loop_that_switches_back_to_train_reads_clean(tmp_path, freeze_bn):
    mon = _epochs(tmp_path, back_to_train=True, freeze_bn=freeze_bn)
    rows = [json.loads(line) for line in (tmp_path / "steps.jsonl").read_text().splitlines()]
    assert {r["train_mode"] for r in rows} == {1}
    assert all(f.cause != "eval_mode_training" for f in mon.diagnose().findings)


class _Heard:
    """A listener on the monitor's announcements: what `watch` told the user, and at which step."""

    def __init__(self) -> None:
        self.alerts: list[tuple[str, str, int]] = []

    def alert(self, f, step: int) -> None:
        self.alerts.append((f.cause, f.severity, step))

    def final(self, report, step: int) -> None:
        pass


def _regress(tmp_path, squeeze: bool, steps: int = 40, lr: float = 1e-2, offset: float = 0.0, heard=None):
    g = torch.Generator().manual_seed(7)
    w = torch.randn(8, generator=g)
    model = torch.nn.Sequential(torch.nn.Linear(8, 32), torch.nn.Tanh(), torch.nn.Linear(32, 1))
    opt = torch.optim.Adam(model.parameters(), lr=lr)
    mon = lossdoctor.watch(model, opt, log_dir=tmp_path, alerts=False, task="regression")
    if heard is not None:
        mon.sinks.append(heard)
    for _ in range(steps):
        x = torch.randn(32, 8, generator=g)
        y = x @ w + offset  # (B,)
        opt.zero_grad()
        pred = model(x)  # (B, 1)
        with pytest.warns(UserWarning, match="target size") if not squeeze else _nothing():
            loss = F.mse_loss(pred.squeeze(-1) if squeeze else pred, y)
        loss.backward()
        opt.step()
        mon.step(loss, batch=(x, y))
    mon.close()
    return mon


class _nothing:
    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False


def test_a_b1_prediction_against_a_b_target_is_loss_broadcast(tmp_path):
    mon = _regress(tmp_path, squeeze=False)
    top = mon.diagnose().findings[0]
    assert top.cause == "loss_broadcast"
    ev = {d["key"]: d["values"] for d in top.to_dict()["evidence_data"]}
    assert ev["bugs.broadcast.floor"]["r"] >= 0.8


def test_the_squeezed_prediction_reads_clean(tmp_path):
    mon = _regress(tmp_path, squeeze=True)
    assert all(f.cause != "loss_broadcast" for f in mon.diagnose().findings)


def _steps(tmp_path) -> list[dict]:
    return [json.loads(line) for line in (tmp_path / "steps.jsonl").read_text().splitlines()]


def test_both_mses_are_measured_and_the_loss_is_the_one_the_loop_computed(tmp_path):
    """The broadcast MSE from the moments is torch's own F.mse_loss((B, 1), (B,)); the elementwise
    one is the squeezed loss: each reported loss is one of them, to float precision."""
    for squeeze, sub in ((True, "sq"), (False, "bc")):
        _regress(tmp_path / sub, squeeze=squeeze)
        rows = [r for r in _steps(tmp_path / sub) if "mse_broadcast" in r]
        assert len(rows) >= 5
        key = "mse_elementwise" if squeeze else "mse_broadcast"
        assert all(abs(r[key] - r["loss"]) <= 1e-5 * abs(r["loss"]) for r in rows)


def test_a_squeezed_regression_still_at_its_targets_variance_reads_clean(tmp_path):
    """An unscaled target (mean 20) at a modest LR: after 60 steps the loss is still above the
    targets' variance, the level a broadcast MSE keeps; the measured MSEs say it is the elementwise
    one, and the predictions already follow the targets, so it is no broadcast. Nor was it ever
    announced live: at step 25 the two MSEs could not be told apart yet and the loss was 40x the
    targets' variance (the mean not learned), which the rule reads as no sign either way."""
    heard = _Heard()
    mon = _regress(tmp_path, squeeze=True, steps=60, lr=3e-3, offset=20.0, heard=heard)
    rows = [r for r in _steps(tmp_path) if "target_var" in r]
    tail = rows[-len(rows) // 3 :]
    assert sorted(r["loss"] / r["target_var"] for r in tail)[len(tail) // 2] >= 0.8  # the level rule alone fires
    assert all(f.cause != "loss_broadcast" for f in mon.diagnose().findings)
    assert "loss_broadcast" not in {c for c, _, _ in heard.alerts}


def test_the_broadcast_bug_on_an_unscaled_target_is_still_announced_live(tmp_path):
    """The same unscaled target, the (B, 1) prediction not squeezed: the loss is the broadcast MSE
    to float precision from the first steps, which is the bug whatever the model learned: `watch`
    announces it at its first evaluation with enough steps, and the end holds it."""
    heard = _Heard()
    mon = _regress(tmp_path, squeeze=False, steps=60, lr=3e-3, offset=20.0, heard=heard)
    live = [(c, step) for c, sev, step in heard.alerts if c == "loss_broadcast" and sev != "info"]
    assert live and live[0][1] <= 25
    assert mon.diagnose().findings[0].cause == "loss_broadcast"


def _ce_one_output(tmp_path, steps: int = 30):
    g = torch.Generator().manual_seed(3)
    model = torch.nn.Sequential(torch.nn.Linear(8, 32), torch.nn.Tanh(), torch.nn.Linear(32, 1))
    opt = torch.optim.Adam(model.parameters(), lr=1e-2)
    mon = lossdoctor.watch(model, opt, log_dir=tmp_path, alerts=False)
    before = [p.detach().clone() for p in model.parameters()]
    for _ in range(steps):
        x = torch.randn(32, 8, generator=g)
        y = x.sum(dim=1)  # a quantity, (B,)
        opt.zero_grad()
        loss = F.cross_entropy(model(x), y.unsqueeze(-1))  # one logit: log-softmax is 0
        loss.backward()
        opt.step()
        mon.step(loss, batch=(x, y))
    mon.close()
    return mon, before, model


def test_cross_entropy_over_one_output_is_wrong_loss_not_an_empty_mask(tmp_path):
    mon, before, model = _ce_one_output(tmp_path)
    assert all(torch.equal(a, b) for a, b in zip(before, model.parameters()))  # nothing trains: the fault is real
    top = mon.diagnose().findings[0]
    assert (top.cause, top.symptom, top.severity) == ("wrong_loss", "zero_loss", "critical")
    ev = {d["key"]: d["values"] for d in top.to_dict()["evidence_data"]}
    assert ev["wiring.wrong_loss.one_class"]["n"] == ev["wiring.wrong_loss.one_class"]["of"] >= 5
    assert top.to_dict()["fixes_data"][0]["key"] == "wiring.wrong_loss.fix_one_output"


def test_two_causes_that_tie_name_each_other_and_a_clear_winner_does_not():
    from lossdoctor.detectors.ties import mark_ties
    from lossdoctor.findings import Finding

    def f(cause, conf, sev="warning", step=3):
        return Finding(cause=cause, symptom="plateau", severity=sev, confidence=conf, step=step)

    tied = [f("noisy_data", 0.6), f("lr_too_low", 0.58, step=None), f("bad_init", 0.58)]
    mark_ties(tied)
    assert tied[0].to_dict()["evidence_data"][-1]["key"] == "tie.with"
    assert tied[0].to_dict()["evidence_data"][-1]["values"]["other"] == "lr_too_low"
    assert tied[1].to_dict()["evidence_data"][-1]["values"]["other"] == "noisy_data"
    assert tied[2].evidence == []
    mark_ties(tied)  # once only
    assert len(tied[0].evidence) == 1
    for pair in (
        [f("noisy_data", 0.9), f("lr_too_low", 0.6)],  # a clear winner
        [f("noisy_data", 0.6, "critical"), f("lr_too_low", 0.6)],  # a worse severity
        [f("noisy_data", 0.6), f("noisy_data", 0.6)],
    ):  # the same cause
        mark_ties(pair)
        assert all(not x.evidence for x in pair)


def _clipped(tmp_path, max_norm: float, optimizer: str = "sgd", steps: int = 40):
    g = torch.Generator().manual_seed(8)
    centres = 2.0 * torch.randn(5, 16, generator=g)
    model = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.ReLU(), torch.nn.Linear(32, 5))
    opt = (
        torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
        if optimizer == "sgd"
        else torch.optim.Adam(model.parameters(), lr=3e-3)
    )
    mon = lossdoctor.watch(model, opt, log_dir=tmp_path, alerts=False, task="classification")
    for _ in range(steps):
        y = torch.randint(0, 5, (16,), generator=g)
        x = centres[y] + torch.randn(16, 16, generator=g)
        opt.zero_grad()
        loss = F.cross_entropy(model(x), y)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), max_norm)
        opt.step()
        mon.step(loss, batch=(x, y))
    mon.close()
    return mon


def test_clipping_sgd_at_a_tiny_max_norm_is_grad_clip_too_tight(tmp_path):
    mon = _clipped(tmp_path, 1e-3)
    f = next(f for f in mon.diagnose().findings if f.cause == "grad_clip_too_tight")
    ev = f.to_dict()["evidence_data"][0]["values"]
    assert abs(ev["applied"] - 1e-3) < 1e-5 and ev["x"] > 100
    assert f.to_dict()["fixes_data"][0]["key"] == "bugs.clip.fix"


@pytest.mark.parametrize("max_norm,optimizer", [(1.0, "sgd"), (1e-3, "adam")])
def test_ordinary_clipping_and_adams_scale_invariance_read_clean(tmp_path, max_norm, optimizer):
    mon = _clipped(tmp_path, max_norm, optimizer)
    assert all(f.cause != "grad_clip_too_tight" for f in mon.diagnose().findings)


def test_a_configured_warmup_still_running_is_not_a_warmup_that_never_ends():
    """300 steps into a correct 2000-step warm-up the LR curve looks like the bug; the Trainer's
    configuration (meta.json `framework.warmup_steps`) says it is the plan: no finding."""
    import numpy as np

    from lossdoctor.detectors.engine import diagnose_runs
    from lossdoctor.records import from_columns

    steps = np.arange(300)
    cols = {"loss": 3.0 - 0.002 * steps, "lr": 3e-4 * (steps + 1) / 2000}

    def causes(meta):
        return {f.cause for f in diagnose_runs([from_columns(steps, cols, meta=meta)]).findings}

    assert "lr_schedule_error" in causes({})  # the curve alone: a warm-up that never ends
    assert "lr_schedule_error" not in causes({"framework": {"name": "transformers", "warmup_steps": 2000}})
    assert "lr_schedule_error" not in causes({"framework": {"warmup_ratio": 0.1, "max_steps": 20000}})


def test_a_uniform_task_id_or_lengths_is_not_read_as_the_class():
    """Only targets count for "one class a batch": a `task_id` or `lengths` key that is uniform per
    batch on purpose (one task a batch, length bucketing) read as the class made unshuffled_data fire."""
    from lossdoctor.signals.batch import BatchProbe
    from lossdoctor.signals.readout import Packer

    x = torch.randn(8, 4)
    ctx = BatchProbe().flush_batch({"x": x, "task_id": torch.full((8,), 3), "lengths": torch.full((8,), 17)}, Packer())
    assert "class_key" not in ctx
    ctx = BatchProbe().flush_batch({"x": x, "task_id": torch.full((8,), 3), "labels": torch.arange(8) % 2}, Packer())
    assert ctx["class_key"] == "labels"
    assert BatchProbe().flush_batch((x, torch.zeros(8, dtype=torch.long)), Packer())["class_key"] == "1"


def test_a_sharded_run_compares_the_applied_norm_with_its_own_shard():
    """Under FSDP2/TP the applied norm is the rank's shard, the recorded grad_norm the total over
    ranks: compared with that, 64 unclipped ranks read as clipping by 64x; the shard's own
    norm is the comparison. A plain string optimizer in meta.json is read too."""
    import numpy as np

    from lossdoctor.detectors.engine import diagnose_runs
    from lossdoctor.records import from_columns

    steps = np.arange(40)
    shard = np.full(40, 0.5)
    cols = {"loss": 2.0 - 0.01 * steps, "grad_norm": shard * 64, "grad_norm_local": shard, "grad_norm_applied": shard}

    def causes(meta):
        return {f.cause for f in diagnose_runs([from_columns(steps, cols, meta=meta)]).findings}

    assert "grad_clip_too_tight" not in causes({"optimizer": "SGD", "distributed": {"kind": "fsdp2"}})
    assert "grad_clip_too_tight" in causes({"optimizer": "SGD", "distributed": {"kind": "ddp"}})


def _by_length(tmp_path, order: str, steps: int = 80, batch: int = 8):
    """A token classifier over variable-length samples (2 to 20 tokens, padded to 24, with their
    attention mask), read in the order `order` says: "sorted" (a dataset sorted by length, no
    shuffle), "shuffled", or "grouped" (transformers' own LengthGroupedSampler: mega-batches of 50
    batches, sorted within)."""
    g = torch.Generator().manual_seed(5)
    n = steps * batch
    lengths = torch.randint(2, 21, (n,), generator=g)
    ids = torch.randint(1, 50, (n, 24), generator=g)
    mask = (torch.arange(24)[None, :] < lengths[:, None]).long()
    ids = ids * mask
    y = ids.sum(dim=1) % 5
    if order == "sorted":
        perm = torch.argsort(lengths, stable=True)
    elif order == "shuffled":
        perm = torch.randperm(n, generator=g)
    else:
        from transformers.trainer_pt_utils import LengthGroupedSampler

        perm = torch.tensor(list(LengthGroupedSampler(batch, lengths=lengths.tolist(), generator=g)))
    emb = torch.nn.Embedding(50, 16)
    head = torch.nn.Linear(16, 5)
    model = torch.nn.ModuleDict({"emb": emb, "head": head})
    opt = torch.optim.Adam(model.parameters(), lr=3e-3)
    mon = lossdoctor.watch(model, opt, log_dir=tmp_path, alerts=False)
    for s in range(steps):
        rows = perm[s * batch : (s + 1) * batch]
        b = {"input_ids": ids[rows], "attention_mask": mask[rows], "labels": y[rows]}
        opt.zero_grad()
        m = b["attention_mask"][..., None]
        logits = head((emb(b["input_ids"]) * m).sum(1) / m.sum(1))  # mean over the real tokens
        loss = F.cross_entropy(logits, b["labels"])
        loss.backward()
        opt.step()
        mon.step(loss, batch=b)
    mon.close()
    return mon


def test_data_sorted_by_length_is_unshuffled_data_from_the_first_step(tmp_path):
    f = next(f for f in _by_length(tmp_path, "sorted").diagnose().findings if f.cause == "unshuffled_data")
    ev = {d["key"]: d["values"] for d in f.to_dict()["evidence_data"]}["bugs.unshuffled.by_length.rises"]
    assert f.step == 0 and ev["n"] == 80 and ev["lo"] <= 3 and ev["hi"] >= 19
    assert f.to_dict()["fixes_data"][0]["key"] == "bugs.unshuffled.fix_length"


@pytest.mark.parametrize("order", ["shuffled", "grouped"])
def test_shuffled_or_length_grouped_batches_read_clean(tmp_path, order):
    """transformers' group_by_length sorts within random mega-batches on purpose: no finding."""
    assert all(f.cause != "unshuffled_data" for f in _by_length(tmp_path, order).diagnose().findings)


def _padded_lm(tmp_path, pad_labels: str, steps: int = 30, batch: int = 8):
    """A next-token LM over samples of 4 to 24 tokens padded to 24 (pad id 0, attention mask 0),
    its labels the input ids with the padding either kept ("kept": the collator copied input_ids
    after padding), set to -100 ("masked"), or no padding at all ("none": every sample full)."""
    g = torch.Generator().manual_seed(9)
    emb, head = torch.nn.Embedding(50, 16), torch.nn.Linear(16, 50)
    model = torch.nn.ModuleDict({"emb": emb, "head": head})
    opt = torch.optim.Adam(model.parameters(), lr=3e-3)
    mon = lossdoctor.watch(model, opt, log_dir=tmp_path, alerts=False, task="pretrain")
    for _ in range(steps):
        lengths = torch.randint(4, 25, (batch,), generator=g) if pad_labels != "none" else torch.full((batch,), 24)
        mask = (torch.arange(24)[None, :] < lengths[:, None]).long()
        ids = torch.randint(1, 50, (batch, 24), generator=g) * mask
        labels = ids.clone()
        if pad_labels == "masked":
            labels[mask == 0] = -100
        b = {"input_ids": ids, "attention_mask": mask, "labels": labels}
        opt.zero_grad()
        logits = head(emb(ids))
        loss = F.cross_entropy(logits[:, :-1].reshape(-1, 50), labels[:, 1:].reshape(-1), ignore_index=-100)
        loss.backward()
        opt.step()
        mon.step(loss, batch=b)
    mon.close()
    return mon


def test_labels_on_the_padding_are_label_mask_leak_with_the_share(tmp_path):
    f = next(f for f in _padded_lm(tmp_path, "kept").diagnose().findings if f.cause == "label_mask_leak")
    ev = {d["key"]: d["values"] for d in f.to_dict()["evidence_data"]}["labels.pad_supervised"]
    assert ev["pct"] == 100 and ev["n"] == ev["of"] >= 5
    assert f.to_dict()["fixes_data"][0]["key"] == "labels.fix_mask_padding"
    rows = [json.loads(line) for line in (tmp_path / "steps.jsonl").read_text().splitlines()]
    padded = [r for r in rows if r.get("pad_positions")]
    assert padded and all(r["pad_supervised"] == r["pad_positions"] for r in padded)


@pytest.mark.parametrize("pad_labels", ["masked", "none"])
def test_masked_padding_or_no_padding_reads_clean(tmp_path, pad_labels):
    mon = _padded_lm(tmp_path, pad_labels)
    assert all(f.cause != "label_mask_leak" for f in mon.diagnose().findings)
    rows = [json.loads(line) for line in (tmp_path / "steps.jsonl").read_text().splitlines()]
    assert all(not r.get("pad_supervised") for r in rows)


def _live_causes(tmp_path) -> set[str]:
    """The causes `watch` announced while the run went on (the run log's live findings)."""
    path = tmp_path / "findings.jsonl"
    lines = path.read_text().splitlines() if path.exists() else []
    return {json.loads(line).get("cause") for line in lines}


@pytest.mark.parametrize("total", [240, 4 * 120])
def test_a_one_cycle_warming_up_live_is_no_schedule_error_until_the_run_ends_rising(tmp_path, total):
    """OneCycleLR rises for its first 30%: live, before its plan (`total_steps`) is over, that is
    the configured warm-up, not one that never ends. A one-cycle planned for 4x the run's steps is
    still rising when the run closes: then the run's own length judges, and it is the bug."""
    steps = 240 if total == 240 else 120
    during: set[str] = set()
    mon = _scheduled(
        tmp_path,
        lambda o: torch.optim.lr_scheduler.OneCycleLR(o, max_lr=3e-3, total_steps=total),
        steps=steps,
        seen_live=during,
    )
    assert "lr_schedule_error" not in during
    final = [f for f in mon.diagnose().findings if f.cause == "lr_schedule_error"]
    if total == 240:
        assert not final and mon.diagnose().status == "healthy"
        assert "lr_schedule_error" not in _live_causes(tmp_path)
        return
    keys = [d["key"] for d in final[0].to_dict()["evidence_data"]]
    assert keys[0] == "bugs.warmup.never_ends"
    assert "lr_schedule_error" in _live_causes(tmp_path)  # announced when the run closed: one answer


def test_a_planned_length_is_read_only_live():
    import numpy as np

    from lossdoctor.detectors.engine import diagnose_runs
    from lossdoctor.records import from_columns

    steps = np.arange(100)
    cols = {"loss": 3.0 - 0.002 * steps, "lr": 3e-4 * (steps + 1) / 100}
    one_cycle = {"class": "OneCycleLR", "total_steps": 1000}

    def causes(meta):
        return {f.cause for f in diagnose_runs([from_columns(steps, cols, meta=meta)]).findings}

    assert "lr_schedule_error" not in causes({"scheduler": one_cycle})
    assert "lr_schedule_error" in causes({"scheduler": one_cycle, "closed": True})
    assert "lr_schedule_error" in causes({"scheduler": {"class": "OneCycleLR", "total_steps": 50}})


@pytest.mark.parametrize("kind", ["one_cycle", "cosine"])
def test_a_schedule_planned_50x_longer_than_the_run_is_lr_schedule_error_at_its_end(tmp_path, kind):
    """OneCycleLR(total_steps=...) or CosineAnnealingLR(T_max=...) counted in samples: over the run
    the one-cycle never leaves its warm-up (the LR rises 1.3x, not the 3x the endless-warm-up rule
    needs) and the cosine never decays. Live the run's length is unknown; at close it is judged
    from meta.json (class, planned length, times stepped), announced, and the directory says the same."""

    def make(o):
        if kind == "one_cycle":
            return torch.optim.lr_scheduler.OneCycleLR(o, max_lr=3e-3, total_steps=50 * 120)
        return torch.optim.lr_scheduler.CosineAnnealingLR(o, T_max=50 * 120)

    during: set[str] = set()
    mon = _scheduled(tmp_path, make, seen_live=during)
    assert "lr_schedule_error" not in during
    assert "lr_schedule_error" in _live_causes(tmp_path)
    top = mon.diagnose().findings[0]
    assert (top.cause, top.severity) == ("lr_schedule_error", "warning")
    data = top.to_dict()
    length = data["evidence_data"][0]
    cls, arg = ("OneCycleLR", "total_steps") if kind == "one_cycle" else ("CosineAnnealingLR", "T_max")
    assert length["key"] == "bugs.planned.length"
    assert {k: length["values"][k] for k in ("cls", "arg", "planned", "n")} == {
        "cls": cls,
        "arg": arg,
        "planned": 6000,
        "n": 120,
    }
    lr = data["evidence_data"][1]
    assert lr["key"] == ("bugs.planned.warmup" if kind == "one_cycle" else "bugs.planned.no_decay")
    assert lr["values"]["b"] == pytest.approx(lr["values"]["a"], rel=0.5)  # the LR barely moved
    assert data["fixes_data"][0]["key"] == "bugs.planned.fix_units" and data["fixes_data"][0]["values"]["n"] == 120
    meta = json.loads((tmp_path / "meta.json").read_text())
    assert meta["scheduler"]["stepped"] == 120
    out = run_cli("diagnose", tmp_path, "--format", "json")
    assert json.loads(out.stdout)["findings"][0]["cause"] == "lr_schedule_error"


@pytest.mark.parametrize("kind", ["one_cycle", "cosine"])
def test_a_schedule_sized_to_the_run_is_not_planned_too_long(tmp_path, kind):
    def make(o):
        if kind == "one_cycle":
            return torch.optim.lr_scheduler.OneCycleLR(o, max_lr=3e-3, total_steps=120)
        return torch.optim.lr_scheduler.CosineAnnealingLR(o, T_max=120)

    mon = _scheduled(tmp_path, make)
    rep = mon.diagnose()
    assert rep.status == "healthy", [(f.cause, f.evidence) for f in rep.findings]
    assert "lr_schedule_error" not in _live_causes(tmp_path)


def test_a_planned_length_is_set_against_the_times_the_scheduler_was_stepped():
    """A cosine planned in epochs and stepped per epoch (T_max=20, stepped 20 times over 1000
    optimizer steps) is sized right; one planned for 5000 and stepped 100 times is not; live (not
    closed) nothing is judged; a short smoke test is not judged."""
    import numpy as np

    from lossdoctor.detectors.engine import diagnose_runs
    from lossdoctor.records import from_columns

    steps = np.arange(100)
    cols = {"loss": 2.0 - 0.005 * steps, "lr": np.full(100, 1e-3)}

    def planned(sched, **meta):
        run = from_columns(steps, cols, meta={"scheduler": {"class": "CosineAnnealingLR", **sched}, **meta})
        return [f for f in diagnose_runs([run]).findings if f.cause == "lr_schedule_error"]

    assert not planned({"T_max": 20, "stepped": 20}, closed=True, steps=1000)
    assert not planned({"T_max": 20}, closed=True, steps=1000)
    assert not planned({"T_max": 5000, "stepped": 100})  # live
    assert not planned({"T_max": 5000, "stepped": 30}, closed=True)  # a smoke test
    found = planned({"T_max": 5000, "stepped": 100}, closed=True, steps=100)
    assert found and found[0].to_dict()["evidence_data"][0]["values"]["planned"] == 5000


def _hf_schedule(kind: str, total: int):
    from transformers import (
        get_constant_schedule_with_warmup,
        get_cosine_schedule_with_warmup,
        get_linear_schedule_with_warmup,
    )

    if kind == "linear":
        return lambda o: get_linear_schedule_with_warmup(o, 10, total)
    if kind == "cosine":
        return lambda o: get_cosine_schedule_with_warmup(o, 10, total)
    return lambda o: get_constant_schedule_with_warmup(o, 10)


@pytest.mark.parametrize("kind", ["linear", "cosine"])
def test_an_hf_lambda_schedule_planned_in_samples_is_lr_schedule_error_at_its_end(tmp_path, kind):
    """HF's get_linear/cosine_schedule_with_warmup are LambdaLRs: their num_training_steps sits in a
    closure, not in the state. Counted in samples (32 x 120 for a 120-step run), the decay never
    comes; at close the monitor probes the lambda and the run's end judges it."""
    mon = _scheduled(tmp_path, _hf_schedule(kind, 32 * 120))
    top = mon.diagnose().findings[0]
    assert (top.cause, top.severity) == ("lr_schedule_error", "warning")
    data = top.to_dict()
    length = data["evidence_data"][0]
    assert length["key"] == "bugs.planned.lambda"
    assert length["values"]["n"] == 120
    # the factor falls to a tenth of its peak at ~90% (linear) or ~80% (cosine) of the 3,840-step plan
    assert length["values"]["planned"] == pytest.approx(3457 if kind == "linear" else 3056, rel=0.01)
    assert length["values"]["at_end"] >= 90
    fix = data["fixes_data"][0]
    assert (fix["key"], fix["values"]["arg"], fix["values"]["n"]) == (
        "bugs.planned.fix_units",
        "num_training_steps",
        120,
    )
    meta = json.loads((tmp_path / "meta.json").read_text())
    assert meta["scheduler"]["class"] == "LambdaLR" and meta["scheduler"]["decays_by"] == length["values"]["planned"]
    assert "lr_schedule_error" in _live_causes(tmp_path)


@pytest.mark.parametrize("kind", ["linear", "cosine", "constant"])
def test_an_hf_lambda_schedule_sized_to_the_run_or_without_decay_is_not_planned_too_long(tmp_path, kind):
    mon = _scheduled(tmp_path, _hf_schedule(kind, 120))
    assert all(f.cause != "lr_schedule_error" for f in mon.diagnose().findings)
    meta = json.loads((tmp_path / "meta.json").read_text())
    assert "decays_by" not in meta["scheduler"]


def test_lambda_plan_reads_the_closure_and_leaves_the_scheduler_alone():
    from transformers import get_linear_schedule_with_warmup

    from lossdoctor.preflight.schedule import lambda_plan

    opt = torch.optim.AdamW(torch.nn.Linear(2, 2).parameters(), lr=1e-3)
    sched = get_linear_schedule_with_warmup(opt, 100, 100_000)
    for _ in range(200):
        opt.step()
        sched.step()
    before = (sched.last_epoch, opt.param_groups[0]["lr"])
    plan = lambda_plan(sched, sched.last_epoch)
    # (100000 - k) / 99900 <= 0.1 from k = 90010 on (the peak is probed, so within 1%)
    assert plan is not None and plan["decays_by"] == pytest.approx(90_010, rel=0.01)
    assert plan["at_end"] == pytest.approx(1.0, abs=0.01)
    assert (sched.last_epoch, opt.param_groups[0]["lr"]) == before
    assert lambda_plan(torch.optim.lr_scheduler.StepLR(opt, 10), 200) is None  # its plan is in its state
    assert lambda_plan(torch.optim.lr_scheduler.LambdaLR(opt, lambda s: 1.0), 200) is None  # no decay planned

    def fails_later(step):  # the user's function raising is no crash of the monitor: no plan
        if step > 1000:
            raise ValueError("user code")
        return 1.0

    assert lambda_plan(torch.optim.lr_scheduler.LambdaLR(opt, fails_later), 200) is None
