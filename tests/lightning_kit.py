"""A real Lightning run shared by the tests that read what Lightning's loggers write (CSVLogger's
metrics.csv and hparams.yaml, MLFlowLogger's store): a small regressor on x -> sum(x), SGD or another
torch optimizer, LearningRateMonitor on, every step logged."""

from __future__ import annotations

from typing import Any


def fit(
    logger: Any,
    *,
    lr: float = 0.01,
    optimizer: str = "SGD",
    steps: int = 40,
    save_hparams: bool = False,
    hparams: dict[str, Any] | None = None,
    on_epoch: bool = False,
    seen: list[float] | None = None,
) -> None:
    """Fit with `logger`. `save_hparams`: the module calls save_hyperparameters (lr, optimizer and
    `hparams`), so they reach hparams.yaml / the logger's params; `seen` collects each step's loss."""
    import lightning as L
    import torch
    from lightning.pytorch.callbacks import LearningRateMonitor

    torch.manual_seed(0)

    class Regressor(L.LightningModule):
        def __init__(self, lr: float, optimizer: str, **extra: Any):
            super().__init__()
            if save_hparams:
                self.save_hyperparameters()
            self.lr, self.optimizer_name = lr, optimizer
            self.net = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.Tanh(), torch.nn.Linear(16, 1))

        def training_step(self, batch, i):
            x, y = batch
            loss = torch.nn.functional.mse_loss(self.net(x), y)
            self.log("train_loss", loss, on_step=True, on_epoch=on_epoch)
            if seen is not None:
                seen.append(loss.item())
            return loss

        def configure_optimizers(self):
            return getattr(torch.optim, self.optimizer_name)(self.parameters(), lr=self.lr)

    g = torch.Generator().manual_seed(0)
    x = torch.randn(256, 8, generator=g)
    data = torch.utils.data.DataLoader(torch.utils.data.TensorDataset(x, x.sum(1, keepdim=True)), batch_size=16)
    trainer = L.Trainer(
        max_steps=steps,
        logger=logger,
        callbacks=[LearningRateMonitor("step")],
        log_every_n_steps=1,
        enable_checkpointing=False,
        enable_progress_bar=False,
        enable_model_summary=False,
        accelerator="cpu",
    )
    trainer.fit(Regressor(lr, optimizer, **(hparams or {})), data)
