"""Lightning callback: a real `lightning.Trainer` fitting a small LightningModule on CPU."""

from __future__ import annotations

import math

import pytest

torch = pytest.importorskip("torch")
L = pytest.importorskip("lightning")

from lossdoctor.integrations.lightning import LossDoctorCallback  # noqa: E402
from lossdoctor.sources.rundir import read_run_dir  # noqa: E402


class Regressor(L.LightningModule):
    def __init__(self) -> None:
        super().__init__()
        torch.manual_seed(0)
        self.net = torch.nn.Sequential(torch.nn.Linear(8, 32), torch.nn.Tanh(), torch.nn.Linear(32, 1))

    def training_step(self, batch, batch_idx):
        x, y = batch
        return torch.nn.functional.mse_loss(self.net(x), y)

    def configure_optimizers(self):
        opt = torch.optim.SGD(self.parameters(), lr=0.05, momentum=0.9)
        sched = torch.optim.lr_scheduler.StepLR(opt, step_size=4, gamma=0.5)
        return {"optimizer": opt, "lr_scheduler": {"scheduler": sched, "interval": "step"}}


class PreClipNorms(L.Callback):
    """What Lightning itself sees before clipping: the reference for the recorded grad norm."""

    def __init__(self) -> None:
        self.norms: list[float] = []

    def on_before_optimizer_step(self, trainer, pl_module, optimizer):
        grads = [p.grad for p in pl_module.parameters() if p.grad is not None]
        self.norms.append(float(torch.linalg.vector_norm(torch.stack([g.norm() for g in grads]))))


def loader(n: int = 80, nan_at: tuple[int, int] | None = None) -> torch.utils.data.DataLoader:
    g = torch.Generator().manual_seed(1)
    x = torch.randn(n, 8, generator=g)
    y = x[:, :1] * 2.0 - x[:, 1:2] + 0.1 * torch.randn(n, 1, generator=g)
    if nan_at is not None:
        batch, sample = nan_at
        x[batch * 8 + sample, 3] = float("nan")
    return torch.utils.data.DataLoader(torch.utils.data.TensorDataset(x, y), batch_size=8)


def fit(tmp_path, data, *, accumulate=1, epochs=1, extra=()):
    cb = LossDoctorCallback(log_dir=tmp_path / "ld", alerts=False)
    trainer = L.Trainer(
        max_epochs=epochs,
        accelerator="cpu",
        devices=1,
        logger=False,
        enable_checkpointing=False,
        enable_progress_bar=False,
        enable_model_summary=False,
        accumulate_grad_batches=accumulate,
        gradient_clip_val=0.5,
        num_sanity_val_steps=0,
        callbacks=[cb, *extra],
    )
    trainer.fit(Regressor(), data)
    (run,) = read_run_dir(tmp_path / "ld")
    return cb, run


def test_nan_in_one_batch_is_nonfinite_data_at_that_step(tmp_path):
    cb, run = fit(tmp_path, loader(nan_at=(3, 5)))
    assert len(run) == 10
    i = int(list(run.steps).index(3))
    assert run.col("batch_nonfinite")[i] == 1
    assert run.event("batch_nonfinite_detail")[3] == {"0": [5]}
    assert math.isfinite(run.col("loss")[i - 1]) and not math.isfinite(run.col("loss")[i])
    report = cb.diagnose()
    assert report.primary.cause == "nonfinite_data"
    assert report.primary.step == 3 and report.primary.samples == [5]


def test_healthy_run_with_accumulation_is_quiet_and_matches_lightning(tmp_path):
    ref = PreClipNorms()
    # 10 batches, 3 per step: steps of 3, 3, 3 and a last one of 1 micro-batch per epoch
    cb, run = fit(tmp_path, loader(), accumulate=3, epochs=3, extra=[ref])
    assert len(run) == 12
    assert run.col("accum_steps").tolist() == [3.0, 3.0, 3.0, 1.0] * 3
    assert run.col("batch_size").tolist() == [24.0, 24.0, 24.0, 8.0] * 3
    # gradients recorded before Lightning clipped them (clip at 0.5, norms are larger)
    assert run.col("grad_norm").tolist() == pytest.approx(ref.norms, rel=1e-4)
    assert max(ref.norms) > 0.5
    # LR after each step follows StepLR(4, 0.5)
    # the LR each step's update used (the scheduler steps after the optimizer)
    assert run.col("lr").tolist() == pytest.approx([0.05 * 0.5 ** (i // 4) for i in range(12)])
    assert run.col("loss")[-1] < run.col("loss")[0]
    report = cb.diagnose()
    assert report.status == "healthy", [f.to_dict() for f in report.findings]
