"""Lightning `Trainer` callback.

    from lossdoctor.integrations.lightning import LossDoctorCallback
    trainer = lightning.Trainer(..., callbacks=[LossDoctorCallback(log_dir="runs/ld")])

One record per optimizer step (`trainer.global_step` advancing), with the signals of
`lossdoctor.watch`:

- the LightningModule (or the DDP wrapper the strategy put around it, so gradients are measured
  before and after the all-reduce), the first optimizer, its first LR scheduler and the precision
  plugin's GradScaler (`16-mixed`) come from the trainer at `on_train_start`, after the strategy
  has set everything up (and after the sanity-check validation, which is not recorded);
- gradients: per-parameter norms when backward ends, before Lightning's gradient clipping;
- the batch: Lightning hands it to `on_train_batch_start`; with `accumulate_grad_batches` the
  step's micro-batches are joined along the first dimension;
- the loss: `training_step`'s loss as Lightning returns it to `on_train_batch_end`; Lightning
  divides it by `accumulate_grad_batches` before backward, so it is multiplied back and the step's
  loss is the mean over its micro-batches (per label position when the batch holds `labels`).

Validation forwards between steps are dropped from the per-step module trace.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch
from lightning.pytorch import Callback

from ..messages import Msg
from .callback import WatchingCallback
from .sinks import add_lightning_targets

log = logging.getLogger("lossdoctor")


class LossDoctorCallback(WatchingCallback, Callback):
    """Watch a `lightning.Trainer` run with lossdoctor.

    `log_dir`, `task`, `replay_fn` and any other keyword are passed to `lossdoctor.watch`. After
    `fit`, `callback.monitor` is the closed monitor and `callback.diagnose()` its diagnosis.
    """

    def __init__(
        self,
        log_dir: str | Path | None = None,
        task: str | None = None,
        replay_fn: Callable[[torch.nn.Module, Any], torch.Tensor] | None = None,
        **watch_options: Any,
    ) -> None:
        super().__init__()
        self._init_watching(log_dir, task, replay_fn, watch_options)
        self._last_global_step = 0
        self._step_open = False

    # --- Lightning hooks --------------------------------------------------------------------------
    def on_train_start(self, trainer: Any, pl_module: Any) -> None:
        self._start_guarded(self._start, trainer, pl_module)

    def on_train_batch_start(self, trainer: Any, pl_module: Any, batch: Any, batch_idx: int) -> None:
        if self.monitor is None or self.probe is None:
            return
        if not self._step_open:  # first micro-batch of an optimizer step
            self._begin_step()
            self._step_open = True

    def on_train_batch_end(self, trainer: Any, pl_module: Any, outputs: Any, batch: Any, batch_idx: int) -> None:
        if self.monitor is None or self.probe is None:
            return
        loss = outputs.get("loss") if isinstance(outputs, dict) else outputs
        if isinstance(loss, torch.Tensor) and pl_module.automatic_optimization:
            loss = loss * trainer.accumulate_grad_batches  # undo Lightning's division
        self.probe.observe(batch, loss if isinstance(loss, torch.Tensor) else None)
        if trainer.global_step != self._last_global_step:  # the optimizer stepped (or was skipped)
            self._last_global_step = trainer.global_step
            self._step_open = False
            self._end_step()

    def on_train_end(self, trainer: Any, pl_module: Any) -> None:
        self._finish()

    def on_exception(self, trainer: Any, pl_module: Any, exception: BaseException) -> None:
        self._finish()

    # --- internals ----------------------------------------------------------------------------------
    def _start(self, trainer: Any, pl_module: Any) -> None:
        if not trainer.optimizers:
            log.warning("%s", Msg("integrations.no_optimizer"))
            return
        if len(trainer.optimizers) > 1:
            log.info("%s", Msg("integrations.first_optimizer", n=len(trainer.optimizers)))
        scaler = getattr(trainer.precision_plugin, "scaler", None)
        configs = getattr(trainer, "lr_scheduler_configs", None) or []
        scheduler = configs[0].scheduler if configs else None
        self._open(
            pl_module,
            getattr(trainer.strategy, "model", None),
            trainer.optimizers[0],
            scaler,
            scheduler,
            _describe(trainer),
        )
        add_lightning_targets(self.monitor, trainer)  # its loggers get the alerts and findings too
        self._last_global_step = trainer.global_step
        self._step_open = False
        self._plan(trainer, configs)

    def _plan(self, trainer: Any, configs: list) -> None:
        """Tell preflight how long the run is, so it can simulate the LR schedule over it."""
        pre = getattr(self.monitor, "preflight", None)
        if pre is None or not configs:
            return
        try:
            total = int(trainer.estimated_stepping_batches)
        except Exception:
            return
        if total <= 0 or total > 10**9:  # unbounded (max_steps=-1 with an iterable dataset)
            return
        interval = getattr(configs[0], "interval", "step")
        per_epoch = None
        batches = getattr(trainer, "num_training_batches", None)
        if isinstance(batches, int) and batches > 0:
            per_epoch = -(-batches // max(1, trainer.accumulate_grad_batches))
        pre.set_total_steps(total, interval=interval, steps_per_epoch=per_epoch)


def _describe(trainer: Any) -> dict[str, Any]:
    import lightning

    info: dict[str, Any] = {
        "name": "lightning",
        "version": lightning.__version__,
        "accumulate_grad_batches": trainer.accumulate_grad_batches,
        "precision": str(getattr(trainer.precision_plugin, "precision", "")),
        "strategy": type(trainer.strategy).__name__,
    }
    clip = getattr(trainer, "gradient_clip_val", None)
    if isinstance(clip, (int, float)):
        info["gradient_clip_val"] = clip
    return info
