"""Bugs in how the loop is wired (detectors/loop_wiring.py), caught live by the real `watch` on
real models and optimizers: each fault as it is written by mistake, and its look-alike done on
purpose, which must stay clean. Assertions are on causes and message keys/values."""

from __future__ import annotations

import json
import math
from collections.abc import Callable
from typing import Any

import pytest
import torch
from torch import nn
from torch.nn import functional as F

import lossdoctor
from conftest import run_cli


@pytest.fixture(autouse=True)
def _seed():
    torch.manual_seed(0)


def _clusters(n: int = 640, k: int = 10, d: int = 24, spread: float = 1.0, seed: int = 0):
    g = torch.Generator().manual_seed(seed)
    centres = torch.randn(k, d, generator=g) * spread
    y = torch.randint(0, k, (n,), generator=g)
    return centres[y] + torch.randn(n, d, generator=g), y


def _mlp(d_in: int = 24, d_out: int = 10, tail: nn.Module | None = None) -> nn.Sequential:
    layers: list[nn.Module] = [nn.Linear(d_in, 48), nn.ReLU(), nn.Linear(48, d_out)]
    return nn.Sequential(*layers, *([tail] if tail is not None else []))


def _train(
    tmp_path,
    model: nn.Module,
    opt: torch.optim.Optimizer,
    batches: Callable[[int], Any],
    loss_fn: Callable[[nn.Module, Any], torch.Tensor],
    steps: int,
    task: str | None = None,
    scheduler: Any = None,
):
    mon = lossdoctor.watch(model, opt, scheduler=scheduler, log_dir=tmp_path, task=task, alerts=False)
    for step in range(steps):
        batch = batches(step)
        opt.zero_grad()
        loss = loss_fn(model, batch)
        loss.backward()
        opt.step()
        if scheduler is not None:
            scheduler.step()
        mon.step(loss, batch=batch)
    mon.close()
    return mon.diagnose()


def _loaders(x: torch.Tensor, y: torch.Tensor, bs: int = 32, apart: bool = False, noise: float = 0.0):
    """Epochs over (x, y): one shuffled order for both, or (apart) two loaders shuffled on their own."""
    n = x.shape[0]

    def batches(step: int):
        epoch, i = divmod(step * bs, n)
        px = torch.randperm(n, generator=torch.Generator().manual_seed(1000 + epoch))
        py = torch.randperm(n, generator=torch.Generator().manual_seed(2000 + epoch)) if apart else px
        yb = y[py[i : i + bs]]
        if noise:
            g = torch.Generator().manual_seed(step)
            flip = torch.rand(yb.shape, generator=g) < noise
            yb = torch.where(flip, torch.randint(0, 10, yb.shape, generator=g), yb)
        return x[px[i : i + bs]], yb

    return batches


def _xent(model, batch):
    return F.cross_entropy(model(batch[0]), batch[1])


def _keys(f) -> list[str]:
    return [e["key"] for e in f.to_dict()["evidence_data"]]


def _values(f, key: str) -> dict:
    return next(e["values"] for e in f.to_dict()["evidence_data"] if e["key"] == key)


# --- inputs and labels from two shuffled loaders ------------------------------------------------


def test_inputs_and_labels_from_two_shuffled_loaders_is_labels_misaligned(tmp_path):
    x, y = _clusters()
    model = _mlp()
    rep = _train(
        tmp_path,
        model,
        torch.optim.Adam(model.parameters(), lr=3e-3),
        _loaders(x, y, apart=True),
        _xent,
        steps=150,
        task="classification",
    )
    top = rep.findings[0]
    assert top.cause == "labels_misaligned"
    v = _values(top, "wiring.misaligned.at_chance")
    assert v["k"] == 10 and v["chance"] == pytest.approx(math.log(10))
    assert v["lowest"] >= 0.98 * math.log(10)
    assert 1e-4 <= _values(top, "wiring.misaligned.updates")["u"] <= 1e-2
    assert top.to_dict()["fixes_data"][0]["key"] == "wiring.misaligned.fix_one_loader"
    assert "noisy_data" not in {f.cause for f in rep.findings}  # explained by it
    out = run_cli("diagnose", tmp_path, "--format", "json")
    assert json.loads(out.stdout)["findings"][0]["cause"] == "labels_misaligned"


@pytest.mark.parametrize("noise", [0.0, 0.7])
def test_one_loader_and_heavy_label_noise_are_not_labels_misaligned(tmp_path, noise):
    """The same data through one shuffled loader learns; 70% label noise keeps the loss high but
    it still goes below chance: neither is labels drawn apart from their inputs."""
    x, y = _clusters()
    model = _mlp()
    rep = _train(
        tmp_path,
        model,
        torch.optim.Adam(model.parameters(), lr=3e-3),
        _loaders(x, y, noise=noise),
        _xent,
        steps=150,
        task="classification",
    )
    assert "labels_misaligned" not in {f.cause for f in rep.findings}
    if noise == 0.0:
        assert rep.status == "healthy", [(f.cause, f.evidence) for f in rep.findings]


# --- sigmoid before BCEWithLogitsLoss -----------------------------------------------------------


def _binary(seed: int = 0):
    x, y = _clusters(n=512, k=2, spread=1.2, seed=seed)

    def batches(step: int):
        i = (step * 32) % 512
        return x[i : i + 32], y[i : i + 32]

    return batches


@pytest.mark.parametrize("loss,fires", [("with_logits", True), ("bce_of_probs", False)])
def test_a_sigmoid_before_bce_with_logits_is_softmax_before_loss(tmp_path, loss, fires):
    model = _mlp(d_out=1, tail=nn.Sigmoid())

    def fn(m, b):
        p = m(b[0]).squeeze(-1)
        t = b[1].float()
        return F.binary_cross_entropy_with_logits(p, t) if loss == "with_logits" else F.binary_cross_entropy(p, t)

    rep = _train(
        tmp_path, model, torch.optim.Adam(model.parameters(), lr=3e-3), _binary(), fn, steps=100, task="classification"
    )
    hits = [f for f in rep.findings if f.cause == "softmax_before_loss"]
    if not fires:
        assert not hits and rep.status == "healthy", [(f.cause, f.evidence) for f in rep.findings]
        return
    assert rep.findings[0].cause == "softmax_before_loss"
    f = hits[0]
    assert _keys(f) == ["wiring.sigmoid.outputs", "wiring.sigmoid.floor"]
    v = _values(f, "wiring.sigmoid.floor")
    assert v["floor"] == pytest.approx(0.3133, abs=1e-4) and v["best"] >= v["floor"] - 0.02
    assert f.to_dict()["fixes_data"][0]["key"] == "wiring.sigmoid.fix"


# --- the wrong loss for the task ------------------------------------------------------------------


def _mse_indices(m, b):
    return F.mse_loss(m(b[0]).squeeze(-1), b[1].float())


def _bce_indices(m, b):
    return F.binary_cross_entropy_with_logits(m(b[0]).squeeze(-1), b[1].float())


@pytest.mark.parametrize(
    "loss,task,key",
    [
        (_mse_indices, "classification", None),
        (_mse_indices, None, "wiring.wrong_loss.ratio"),
        (_bce_indices, "classification", "wiring.wrong_loss.negative"),
    ],
)
def test_a_one_output_head_against_class_indices_is_wrong_loss(tmp_path, loss, task, key):
    x, y = _clusters(spread=0.6)
    model = _mlp(d_out=1)
    rep = _train(
        tmp_path, model, torch.optim.Adam(model.parameters(), lr=3e-3), _loaders(x, y), loss, steps=100, task=task
    )
    top = rep.findings[0]
    assert top.cause == "wrong_loss"
    assert _values(top, "wiring.wrong_loss.head")["k"] == 10
    if key:
        assert key in _keys(top)
    assert top.to_dict()["fixes_data"][0]["values"]["k"] == 10
    assert "bad_init" not in {f.cause for f in rep.findings}


def test_a_count_regressed_on_purpose_and_a_binary_head_are_not_wrong_loss(tmp_path):
    g = torch.Generator().manual_seed(3)
    xs = torch.randn(640, 16, generator=g)
    counts = (xs[:, :8] > 0).sum(dim=1)  # 0..8, an ordinal target
    model = _mlp(d_in=16, d_out=1)
    rep = _train(
        tmp_path / "count",
        model,
        torch.optim.Adam(model.parameters(), lr=3e-3),
        _loaders(xs, counts),
        _mse_indices,
        steps=100,
        task="regression",
    )
    assert rep.status == "healthy", [(f.cause, f.evidence) for f in rep.findings]
    model = _mlp(d_out=1)
    rep = _train(
        tmp_path / "binary",
        model,
        torch.optim.Adam(model.parameters(), lr=3e-3),
        _binary(),
        _bce_indices,
        steps=100,
        task="classification",
    )
    assert "wrong_loss" not in {f.cause for f in rep.findings}


class _SqueezedHead(nn.Module):
    """A one-output head squeezed inside the forward: the model returns (B,)."""

    def __init__(self, d_in: int = 24) -> None:
        super().__init__()
        self.net = _mlp(d_in=d_in, d_out=1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.net(x).squeeze(-1)


def _mse_module(m, b):
    return nn.MSELoss()(m(b[0]).squeeze(), b[1].float())


def _l1(m, b):
    return F.l1_loss(m(b[0]), b[1].float())


@pytest.mark.parametrize("head,loss", [("column", _mse_module), ("squeezed", _l1)])
def test_class_ids_regressed_without_a_task_hint_are_wrong_loss_while_the_loss_falls(tmp_path, head, loss):
    """What a user writes: nn.MSELoss()(model(x).squeeze(), y.float()) (or an L1 on a head squeezed
    inside the forward), and no task= given. The loss falls far below the labels' variance (the old
    ratio rule withdrew its live alert at the end), but the labels are 0..9 spread like ten balanced
    classes, which a count or a score is not."""
    x, y = _clusters(n=2048, spread=1.5)
    model = _mlp(d_out=1) if head == "column" else _SqueezedHead()
    rep = _train(tmp_path, model, torch.optim.Adam(model.parameters(), lr=1e-3), _loaders(x, y), loss, steps=200)
    assert rep.findings and rep.findings[0].cause == "wrong_loss", [f.cause for f in rep.findings]
    top = rep.findings[0]
    head_v = _values(top, "wiring.wrong_loss.head")
    assert head_v["k"] == 10 and head_v["shape"] == ("(B, 1)" if head == "column" else "(B,)")
    ids = _values(top, "wiring.wrong_loss.ids")
    assert (ids["k"], ids["top"], ids["floor"]) == (10, 9, 0.7) and 0.85 <= ids["share"] <= 1.15
    assert top.severity == "warning" and top.confidence >= 0.75
    assert [fx["key"] for fx in top.to_dict()["fixes_data"]][:2] == [
        "wiring.wrong_loss.fix",
        "wiring.wrong_loss.fix_regression",
    ]


def _regress(m, b):
    return F.mse_loss(m(b[0]).squeeze(-1), b[1].float())


def test_integer_and_float_regressions_and_a_distillation_mse_without_a_hint_are_not_wrong_loss(tmp_path):
    """Done on purpose, no task= given: a binomial count 0..8 (narrower than nine classes), a count
    with more than 20 distinct values, a real-valued ordinal target, an MSE between the logits of a
    student and a teacher: none is wrong_loss."""
    g = torch.Generator().manual_seed(3)
    xs = torch.randn(640, 32, generator=g)
    teacher = _mlp(d_in=32, d_out=10)
    with torch.no_grad():
        soft = teacher(xs)
    cases = {
        "count": (_mlp(d_in=32, d_out=1), (xs[:, :8] > 0).sum(dim=1), _regress),
        "wide": (_mlp(d_in=32, d_out=1), (xs[:, :30] > -0.5).sum(dim=1), _regress),
        "ordinal": (_mlp(d_in=32, d_out=1), xs[:, :4].sum(dim=1) * 1.5 + 5.0, _regress),
        "distill": (_mlp(d_in=32, d_out=10), soft, lambda m, b: F.mse_loss(m(b[0]), b[1])),
    }
    for name, (model, target, loss) in cases.items():
        rep = _train(
            tmp_path / name, model, torch.optim.Adam(model.parameters(), lr=3e-3), _loaders(xs, target), loss, steps=100
        )
        rows = [json.loads(line) for line in (tmp_path / name / "steps.jsonl").read_text().splitlines()]
        if name in ("count", "wide"):  # integer labels: read as classes, and judged
            assert any("class_min" in r for r in rows)
        assert "wrong_loss" not in {f.cause for f in rep.findings}, (name, [f.cause for f in rep.findings])


# --- a param group at LR 0 ----------------------------------------------------------------------


def _groups(model: nn.Sequential, body_lr: float, head_lr: float) -> list[dict]:
    return [
        {"params": list(model[0].parameters()), "lr": body_lr},
        {"params": list(model[2].parameters()), "lr": head_lr},
    ]


def test_a_param_group_at_lr_zero_is_frozen_model_with_its_share(tmp_path):
    x, y = _clusters(spread=0.5)
    model = _mlp()
    opt = torch.optim.Adam(_groups(model, 0.0, 3e-3))
    rep = _train(tmp_path, model, opt, _loaders(x, y), _xent, steps=60, task="classification")
    f = next(f for f in rep.findings if f.cause == "frozen_model")
    assert rep.findings[0].cause == "frozen_model"
    g = _values(f, "wiring.zero_lr.groups")
    assert g["groups"] == "0" and g["of"] == 2 and g["steps"] == 60 and g["other"] == pytest.approx(3e-3)
    p = _values(f, "wiring.zero_lr.params")
    assert p["n"] == 24 * 48 + 48 and p["total"] == 24 * 48 + 48 + 48 * 10 + 10
    assert f.to_dict()["fixes_data"][0]["values"]["lr"] == pytest.approx(3e-4)
    assert not any(e["key"] == "lr.schedule.all_zero" for f in rep.findings for e in f.to_dict()["evidence_data"])


def test_discriminative_lrs_warmed_up_from_zero_read_clean(tmp_path):
    x, y = _clusters(spread=0.5)
    model = _mlp()
    opt = torch.optim.Adam(_groups(model, 3e-4, 3e-3))
    sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda s: min(1.0, s / 10))
    rep = _train(tmp_path, model, opt, _loaders(x, y), _xent, steps=60, task="classification", scheduler=sched)
    assert "frozen_model" not in {f.cause for f in rep.findings}
    assert rep.status == "healthy", [(f.cause, f.evidence) for f in rep.findings]


# --- BatchNorm over a batch of one ----------------------------------------------------------------


class _ConvNet(nn.Module):
    def __init__(self, norm: str) -> None:
        super().__init__()
        self.conv = nn.Conv2d(1, 8, 3, padding=1)
        self.norm = nn.BatchNorm2d(8) if norm == "batch" else nn.GroupNorm(2, 8)
        self.head = nn.Linear(8 * 4 * 4, 2)

    def forward(self, x):
        return self.head(F.max_pool2d(F.relu(self.norm(self.conv(x))), 2).flatten(1))


def _images(last_of_one: bool):
    g = torch.Generator().manual_seed(5)
    x = torch.randn(8 * 16 + 1, 1, 8, 8, generator=g)
    y = (x[:, 0, :4].mean(dim=(1, 2)) > 0).long()
    x[:, 0, :4] += y[:, None, None] * 1.0

    def batches(step: int):
        k = step % 9  # 8 batches of 16 and, without drop_last, one of a single image
        if k == 8:
            return (x[-1:], y[-1:]) if last_of_one else (x[:16], y[:16])
        return x[16 * k : 16 * k + 16], y[16 * k : 16 * k + 16]

    return batches


@pytest.mark.parametrize(
    "norm,last_of_one,frozen,fires",
    [
        ("batch", True, False, True),
        ("group", True, False, False),
        ("batch", False, False, False),
        ("batch", True, True, False),
    ],
)
def test_batchnorm_over_a_batch_of_one(tmp_path, norm, last_of_one, frozen, fires):
    model = _ConvNet(norm)
    if frozen:
        model.norm.eval()  # BatchNorm frozen on purpose: running statistics, no batch statistics
    opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    rep = _train(tmp_path, model, opt, _images(last_of_one), _xent, steps=45, task="classification")
    hits = [f for f in rep.findings if f.cause == "batchnorm_batch_of_one"]
    if not fires:
        assert not hits
        return
    f = hits[0]
    v = _values(f, "wiring.bn1.steps")
    assert (v["n"], v["of"], v["first"], v["layers"]) == (5, 45, 8, 1)
    assert f.step == 8
    assert f.to_dict()["fixes_data"][0]["values"]["typical"] == 16


def test_a_sigmoid_image_decoder_on_soft_targets_is_not_softmax_before_loss(tmp_path):
    """A decoder ending in a sigmoid, trained with binary_cross_entropy on soft pixel targets: its
    outputs are driven to 0 and 1 where the targets are, and the loss stays at the entropy of the
    half-grey pixels (between 0.313 and ln 2) on purpose. Its output is (B, C, H, W), not a head."""
    g = torch.Generator().manual_seed(4)
    x = torch.randn(640, 16, generator=g)
    t = (x > 0).float()
    t[:, ::2] = 0.5  # half the pixels grey: the BCE's floor is ln 2 there
    model = nn.Sequential(nn.Linear(16, 32), nn.ReLU(), nn.Linear(32, 16), nn.Sigmoid(), nn.Unflatten(1, (1, 4, 4)))
    rep = _train(
        tmp_path,
        model,
        torch.optim.Adam(model.parameters(), lr=1e-2),
        _loaders(x, t),
        lambda m, b: F.binary_cross_entropy(m(b[0]), b[1].view(-1, 1, 4, 4)),
        steps=120,
    )
    rows = [json.loads(line) for line in (tmp_path / "steps.jsonl").read_text().splitlines()]
    last = [r for r in rows if "out_min" in r][-1]
    assert last["out_min"] < 0.05 and last["out_max"] > 0.95  # saturated, as a double sigmoid's would be
    assert 0.3 < rows[-1]["loss"] < math.log(2)
    assert "softmax_before_loss" not in {f.cause for f in rep.findings}


# --- a (B, 1) binary head squeezed in the loop: no broadcast --------------------------------------


def test_a_squeezed_binary_head_on_overlapping_classes_is_never_announced_as_broadcast(tmp_path):
    """Overlapping classes: the BCE stays near 0.4 and for the first tens of steps the predictions do
    not follow their targets yet (elementwise over broadcast MSE above 0.9 at steps 2-20), so a
    judgement at step 25 that read those first steps as "the end" announced loss_broadcast live and
    the end withdrew it. The rule reads what the model learned only past the start: never announced."""
    x, y = _clusters(n=512, k=2, spread=0.3)
    yf = y.float()

    def batches(step: int):
        i = (step * 32) % 512
        return x[i : i + 32], yf[i : i + 32]

    model = _mlp(d_out=1)

    def fn(m, b):
        return F.binary_cross_entropy_with_logits(m(b[0]).squeeze(-1), b[1])

    rep = _train(tmp_path, model, torch.optim.Adam(model.parameters(), lr=3e-3), batches, fn, steps=80)
    rows = [json.loads(line) for line in (tmp_path / "steps.jsonl").read_text().splitlines()]
    assert any("target_var" in r and "mse_broadcast" in r for r in rows)  # the broadcast rule had its signals
    assert rows[-1]["loss"] > 0.1  # overlapping: the loss keeps a floor
    path = tmp_path / "findings.jsonl"
    live = [json.loads(line)["cause"] for line in path.read_text().splitlines()] if path.exists() else []
    assert "loss_broadcast" not in live
    assert "loss_broadcast" not in {f.cause for f in rep.findings}


@pytest.mark.parametrize("tail", ["sigmoid", "logits"])
def test_a_squeezed_binary_head_on_float_targets_is_no_loss_broadcast(tmp_path, tail):
    """A (B, 1) head against float 0/1 targets of shape (B,), squeezed in the loss and no task hint:
    the loss is a BCE, not an MSE, so its level against the targets' variance says nothing; the
    measured MSEs show the predictions following their own targets, which a broadcast loss never
    does. With a Sigmoid before BCEWithLogitsLoss the answer is the double sigmoid; without it the
    run is clean."""
    x, y = _clusters(n=512, k=2, spread=1.2)
    yf = y.float()

    def batches(step: int):
        i = (step * 32) % 512
        return x[i : i + 32], yf[i : i + 32]

    model = _mlp(d_out=1, tail=nn.Sigmoid() if tail == "sigmoid" else None)

    def fn(m, b):
        return F.binary_cross_entropy_with_logits(m(b[0]).squeeze(-1), b[1])

    rep = _train(tmp_path, model, torch.optim.Adam(model.parameters(), lr=3e-3), batches, fn, steps=150)
    rows = [json.loads(line) for line in (tmp_path / "steps.jsonl").read_text().splitlines()]
    assert any("target_var" in r and "mse_broadcast" in r for r in rows)  # the broadcast rule had its signals
    assert "loss_broadcast" not in {f.cause for f in rep.findings}
    live = [json.loads(line) for line in (tmp_path / "findings.jsonl").read_text().splitlines()]
    assert "loss_broadcast" not in {d["cause"] for d in live}  # nor announced live and withdrawn at the end
    if tail == "logits":
        assert rep.status == "healthy", [(f.cause, f.evidence) for f in rep.findings]
        return
    top = rep.findings[0]
    assert top.cause == "softmax_before_loss" and _keys(top)[0] == "wiring.sigmoid.outputs"


# --- labels drawn apart from their inputs under Lightning -----------------------------------------


def _lightning_fit(
    tmp_path, labels: torch.Tensor, x: torch.Tensor, net: nn.Module | None = None, criterion: nn.Module | None = None
) -> Any:
    """A Lightning classifier whose `training_step` calls its layers and its loss module (never the
    module's own forward), with the lossdoctor callback."""
    L = pytest.importorskip("lightning")
    from lossdoctor.integrations.lightning import LossDoctorCallback

    class Lit(L.LightningModule):
        def __init__(self):
            super().__init__()
            self.net = net if net is not None else _mlp()
            self.criterion = criterion if criterion is not None else nn.CrossEntropyLoss()

        def training_step(self, batch, i):
            out = self.net(batch[0])
            return self.criterion(out.squeeze(-1) if out.shape[-1] == 1 else out, batch[1])

        def configure_optimizers(self):
            return torch.optim.Adam(self.parameters(), lr=3e-3)

    cb = LossDoctorCallback(log_dir=tmp_path, alerts=False)
    data = torch.utils.data.DataLoader(torch.utils.data.TensorDataset(x, labels), batch_size=32, shuffle=True)
    trainer = L.Trainer(
        max_steps=150,
        logger=False,
        enable_checkpointing=False,
        enable_progress_bar=False,
        enable_model_summary=False,
        accelerator="cpu",
        callbacks=[cb],
    )
    trainer.fit(Lit(), data)
    return lossdoctor.diagnose(tmp_path)


@pytest.mark.parametrize("shuffled", [True, False])
def test_labels_shuffled_apart_from_their_inputs_under_lightning(tmp_path, shuffled):
    """The label array permuted on its own (the inputs left in place): the loss sits at chance,
    ln K; the same data with its labels in place trains clean. (4096 samples: 150 steps see each about once, as a real data set's
    first epoch does; a few hundred seen eight times are memorised, labels or not.)"""
    x, y = _clusters(n=4096)
    labels = y[torch.randperm(y.numel(), generator=torch.Generator().manual_seed(5))] if shuffled else y
    rep = _lightning_fit(tmp_path, labels, x)
    rows = [json.loads(line) for line in (tmp_path / "steps.jsonl").read_text().splitlines()]
    assert any("class_max" in r for r in rows)
    causes = [f.cause for f in rep.findings]
    if not shuffled:
        assert "labels_misaligned" not in causes and rep.status == "healthy", causes
        return
    top = rep.findings[0]
    assert top.cause == "labels_misaligned", causes
    v = _values(top, "wiring.misaligned.at_chance")
    assert v["k"] == 10 and v["chance"] == pytest.approx(math.log(10))


def test_chance_from_the_labels_when_the_output_was_not_seen(tmp_path):
    """Without the output's classes (a record of a run whose forward was not hooked), chance is ln K
    with K the labels' largest class plus one."""
    from lossdoctor.detectors.loop_wiring import _chance
    from lossdoctor.records import from_columns

    top = [9.0 if i % 3 else 8.0 for i in range(20)]
    assert _chance(from_columns(range(20), {"loss": [2.3] * 20, "class_max": top})) == (
        pytest.approx(math.log(10)),
        10,
    )
    both = {"loss": [2.3] * 20, "class_max": top, "out_classes": [12.0] * 20}
    assert _chance(from_columns(range(20), both)) == (pytest.approx(math.log(12)), 12)
    assert _chance(from_columns(range(20), {"loss": [2.3] * 20, "class_max": [0.0] * 20})) is None


@pytest.mark.parametrize("sigmoid", [True, False])
def test_a_lightning_step_that_calls_its_layers_has_its_output_measured(tmp_path, sigmoid):
    """The root's forward never runs; the probe measures the last child the step called with a
    floating output (the network, not the loss module): a Sigmoid before BCEWithLogitsLoss is found
    under Lightning as in a plain loop, and the same run on logits is clean."""
    x, y = _clusters(n=4096, k=2, spread=1.2)
    net = _mlp(d_out=1, tail=nn.Sigmoid() if sigmoid else None)
    rep = _lightning_fit(tmp_path, y.float(), x, net=net, criterion=nn.BCEWithLogitsLoss())
    rows = [json.loads(line) for line in (tmp_path / "steps.jsonl").read_text().splitlines()]
    measured = [r["step"] for r in rows if "out_classes" in r]
    assert measured and measured[0] == 2  # a step without the root's forward, a step to find the network
    assert {r["out_classes"] for r in rows if "out_classes" in r} == {1}
    causes = [f.cause for f in rep.findings]
    if not sigmoid:
        assert rep.status == "healthy", causes
        return
    assert causes[0] == "softmax_before_loss", causes
    assert _keys(rep.findings[0])[0] == "wiring.sigmoid.outputs"


def test_a_plain_loop_measures_the_root_and_scouts_no_child(tmp_path):
    """The stand-in search is for a root whose forward never runs: in a plain loop the root's output
    is measured from step 0 and no child is ever hooked in its place."""
    x, y = _clusters()
    model = _mlp()
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    mon = lossdoctor.watch(model, opt, log_dir=tmp_path, alerts=False)
    batches = _loaders(x, y)
    for step in range(6):
        batch = batches(step)
        opt.zero_grad()
        loss = _xent(model, batch)
        loss.backward()
        opt.step()
        mon.step(loss, batch=batch)
        assert mon.outputs.stand_in is None and not mon.outputs._scouting
    mon.close()
    rows = [json.loads(line) for line in (tmp_path / "steps.jsonl").read_text().splitlines()]
    assert [r["out_classes"] for r in rows if "out_classes" in r][:1] == [10]
    assert rows[0]["step"] == 0 and "out_classes" in rows[0]
