"""Hugging Face `Trainer` callback (and the TRL trainers built on it).

    from lossdoctor.integrations.transformers import LossDoctorCallback
    trainer = Trainer(..., callbacks=[LossDoctorCallback(log_dir="runs/ld")])

The callback watches the same signals as `lossdoctor.watch`, one record per optimizer step:

- model, optimizer (Accelerate's wrapper is unwrapped), LR scheduler and the mixed-precision
  GradScaler (`optimizer.scaler`) come from `on_train_begin`;
- gradients: the monitor's hooks take per-parameter norms when the last micro-batch's backward
  ends, i.e. before the Trainer clips them; with gradient accumulation the other micro-batches'
  norms are skipped (the Trainer's optimizer is Accelerate's, whose `sync_gradients` says which
  backward is the last);
- loss and batch: Trainer callbacks are not handed the inputs or the loss, so a forward hook on
  the model records, for every training forward (grad enabled, `model.training`), the keyword
  arguments the model received (`input_ids`, `attention_mask`, `labels`...: exactly what the
  loss was computed from, after the collator and device placement) and the loss it returned.
  The model hook works for every trainer subclass that calls the model (TRL's SFT trainer, a
  custom `compute_loss`) and sees what the *model* was told (`num_items_in_batch` or not).
- the loss the Trainer backpropagates: `trainer.compute_loss` is wrapped on the calling trainer
  instance (`LossTap`, undone at train end) and a gradient hook on what it returns measures the
  weight each micro-batch's loss gets in the objective: TRL computes its loss itself, so the
  model's `outputs.loss` never reaches backward. Both together give the accumulation
  normalisation check (see `microbatch`); a trainer whose backpropagated loss is not a
  normalisation of the model's (DPO, an auxiliary term, its own `training_step`) gets a note
  that the check could not run. A trainer whose loss is computed outside the model (GRPO) gets
  every other signal but no loss column.
- what a preference trainer (DPO, ORPO, KTO, CPO) logs (`on_log`): a step the Trainer is about to
  log is recorded when its log arrives, with TRL's `rewards/*` and `logps/*` in it; the trainer
  computes its loss outside the model, so the record's `loss` is the one it logs, not the model's
  language-model loss (see `trainer_logs`). Other trainers' steps are recorded at `on_step_end`.
- the Trainer hides a NaN loss from its own logs (`logging_nan_inf_filter`); this one does not.

Evaluation forwards run under `no_grad` and are not recorded; the monitor's per-step module trace
is restarted at `on_step_begin`, so evaluation between steps does not leak into the next step.
"""

from __future__ import annotations

import functools
import logging
import sys
from collections.abc import Callable
from pathlib import Path
from types import FrameType
from typing import Any

import torch
from transformers import TrainerCallback

from ..messages import Msg
from .callback import WatchingCallback
from .microbatch import LOSS_KWARGS, model_loss
from .sinks import add_hf_targets
from .trainer_logs import TrainerLogProbe

log = logging.getLogger("lossdoctor")


def _eager(fn: Callable[..., Any]) -> Callable[..., Any]:
    """`fn` never traced by torch.compile (dynamo): it runs as plain Python, a graph break."""
    disable = getattr(getattr(torch, "compiler", None), "disable", None)
    return disable(fn) if disable is not None else fn


class LossDoctorCallback(WatchingCallback, TrainerCallback):
    """Watch a `transformers.Trainer` run with lossdoctor.

    `log_dir`, `task`, `replay_fn` and any other keyword are passed to `lossdoctor.watch`. After
    training, `callback.monitor` is the closed monitor and `callback.diagnose()` its diagnosis.
    """

    def __init__(
        self,
        log_dir: str | Path | None = None,
        task: str | None = None,
        replay_fn: Callable[[torch.nn.Module, Any], torch.Tensor] | None = None,
        **watch_options: Any,
    ) -> None:
        self._init_watching(log_dir, task, replay_fn, watch_options)
        self._handles: list[Any] = []
        self._logs: TrainerLogProbe | None = None
        self._deferred = False  # a finished step waiting for the trainer's on_log

    # --- Trainer events ---------------------------------------------------------------------------
    def on_train_begin(
        self,
        args: Any,
        state: Any,
        control: Any,
        model: Any = None,
        optimizer: Any = None,
        lr_scheduler: Any = None,
        **kwargs: Any,
    ) -> None:
        self._finish()
        if model is None or optimizer is None:
            log.warning("%s", Msg("integrations.no_model"))
            return
        self._start_guarded(self._start, args, state, model, optimizer, lr_scheduler, kwargs.get("processing_class"))

    def on_step_begin(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        self._record_deferred()
        self._begin_step()

    def on_step_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        if self._logs is not None and getattr(control, "should_log", False):
            self._deferred = True  # the Trainer logs this step next: recorded in on_log
            return
        self._end_step()

    def on_log(self, args: Any, state: Any, control: Any, logs: dict | None = None, **kwargs: Any) -> None:
        """The scalars the trainer logged for the step just ended (TRL's DPO loss, `rewards/*`,
        `logps/*`) go into that step's record (see `trainer_logs`)."""
        if not self._deferred:
            return
        if self._logs is not None and isinstance(logs, dict):
            try:
                self._logs.take(logs)
            except Exception as e:  # never stop the user's training
                log.debug("trainer logs not recorded: %s", e)
        self._record_deferred()

    def on_train_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        self._record_deferred()
        self._finish()

    # --- internals ----------------------------------------------------------------------------------
    def _start(
        self,
        args: Any,
        state: Any,
        model: torch.nn.Module,
        optimizer: Any,
        lr_scheduler: Any,
        processing_class: Any = None,
    ) -> None:
        trainer = _calling_trainer()
        scaler = getattr(optimizer, "scaler", None)
        if scaler is None and trainer is not None:
            scaler = getattr(getattr(trainer, "accelerator", None), "scaler", None)
        if processing_class is None:
            processing_class = getattr(trainer, "processing_class", None)
        mon = self._open(
            model,
            getattr(trainer, "model_wrapped", None),
            optimizer,
            scaler,
            lr_scheduler,
            _describe(args, trainer),
            task=trainer_task(trainer, args),
            tokenizer=_tokenizer_of(processing_class),
            shift_labels=_shifts_labels(model),
        )
        add_hf_targets(mon, trainer)  # report_to="tensorboard": alerts and findings in its writer too
        self._handles.append(model.register_forward_hook(self._on_forward, with_kwargs=True))
        if trainer is not None:
            self._handles.append(LossTap(trainer, self._on_trainer_loss))
        if mon.meta.get("task") == "preference":  # only preference trainers log scalars of their own
            self._logs = TrainerLogProbe(replace_loss=True)
            mon.add_probe(self._logs)
        planned = getattr(state, "max_steps", 0) or 0
        if mon.preflight is not None and planned > 0:  # the Trainer steps its scheduler per optimizer step
            mon.preflight.set_total_steps(int(planned) - int(getattr(state, "global_step", 0) or 0))

    @_eager
    def _on_forward(self, module: torch.nn.Module, args: tuple, kwargs: dict, out: Any) -> None:
        _record_forward(self, module, args, kwargs, out)

    def _on_trainer_loss(self, loss: Any, num_items: Any = None) -> None:
        if self.probe is not None:
            self.probe.observe_objective(loss, num_items)

    def _record_deferred(self) -> None:
        if self._deferred:
            self._deferred = False
            self._end_step()

    def _finish(self) -> None:
        self._logs, self._deferred = None, False
        for h in self._handles:
            h.remove()
        self._handles.clear()
        super()._finish()


@_eager
def _record_forward(cb: LossDoctorCallback, module: torch.nn.Module, args: tuple, kwargs: dict, out: Any) -> None:
    """The model hook's body, run eagerly: with `Trainer(torch_compile=True)` dynamo would compile it
    as a frame of its own and guard on the probe's state, which changes every forward (a
    recompilation per micro-batch, then its limit); kept out of the graph it costs one graph break
    after the model's forward and changes no number."""
    if cb.probe is None or not (torch.is_grad_enabled() and module.training):
        return
    if kwargs:
        batch: Any = {k: v for k, v in kwargs.items() if isinstance(v, torch.Tensor) and k not in LOSS_KWARGS}
    else:
        batch = args[0] if len(args) == 1 else (list(args) or None)
    cb.probe.observe(batch, model_loss(out), kwargs.get("num_items_in_batch"))


class LossTap:
    """Sees the loss the Trainer backpropagates: `trainer.compute_loss` wrapped on this trainer
    instance only (an instance attribute in front of the class's method), handed on unchanged, and
    undone by `remove()` at train end.

    Why: the Trainer calls `loss = self.compute_loss(...)`, scales it (1/k when the loss was not
    normalised by `num_items_in_batch`) and calls `accelerator.backward(loss)`. TRL's trainers and
    any subclass with its own `compute_loss` (LLaMA-Factory's) return a loss they computed
    themselves, which the model's `outputs.loss` is not part of, so only here can the gradient
    each micro-batch's loss gets in backward, hence the accumulation normalisation, be measured.
    The model hook still supplies the batch and the per-item mean loss."""

    def __init__(self, trainer: Any, on_loss: Callable[[Any, Any], None]) -> None:
        self.trainer = trainer
        own = vars(trainer)
        self._had_own, self._own = "compute_loss" in own, own.get("compute_loss")
        original = trainer.compute_loss

        @functools.wraps(original)
        def compute_loss(*args: Any, **kwargs: Any) -> Any:
            out = original(*args, **kwargs)
            try:
                on_loss(out, kwargs.get("num_items_in_batch"))
            except Exception:  # never break the user's training step
                pass
            return out

        self._wrapper = compute_loss
        trainer.compute_loss = compute_loss

    def remove(self) -> None:
        own = vars(self.trainer)
        if own.get("compute_loss") is not self._wrapper:
            return  # replaced by someone else since: theirs stays
        if self._had_own:
            own["compute_loss"] = self._own
        else:
            del own["compute_loss"]


def _calling_trainer() -> Any:
    """The `Trainer` whose training loop is calling this callback: callbacks are not handed it, and
    it is needed only to reach the DDP wrapper around the model (`trainer.model_wrapped`)."""
    try:
        from transformers import Trainer

        frame: FrameType | None = sys._getframe(2)
        for _ in range(12):
            if frame is None:
                return None
            obj = frame.f_locals.get("self")
            if isinstance(obj, Trainer):
                return obj
            frame = frame.f_back
    except Exception:
        return None
    return None


def _shifts_labels(model: torch.nn.Module) -> bool:
    """Whether the Trainer counts `num_items_in_batch` over `labels[..., 1:]` (its own rule)."""
    try:
        from transformers.loss.loss_utils import LOSS_MAPPING, ForCausalLMLoss

        base = getattr(model, "get_base_model", None)  # PEFT's wrapper
        inner = base() if callable(base) else model
        enc_dec = bool(getattr(getattr(inner, "config", None), "is_encoder_decoder", False))
        return LOSS_MAPPING.get(str(getattr(inner, "loss_type", None))) is ForCausalLMLoss and not enc_dec
    except Exception:
        return False


#: trainer classes (TRL's, and any subclass of them) and the task they train, by class name so
#: that TRL is never imported here
TRAINER_TASKS = {
    "SFTTrainer": "sft",
    "DPOTrainer": "preference",
    "ORPOTrainer": "preference",
    "KTOTrainer": "preference",
    "CPOTrainer": "preference",
}
CONFIG_TASKS = {
    "SFTConfig": "sft",
    "DPOConfig": "preference",
    "ORPOConfig": "preference",
    "KTOConfig": "preference",
    "CPOConfig": "preference",
}
#: trainers known by the module they are defined in (LLaMA-Factory's stages subclass the HF
#: `Seq2SeqTrainer`/`Trainer` under these names; its DPO/KTO trainers subclass TRL's, found above)
MODULE_TASKS = {"llamafactory.train.sft.": "sft", "llamafactory.train.pt.": "pretrain"}
#: what a TRL config says about the labels and the sequences (recorded, and used by fix texts)
TRL_KEYS = ("max_length", "packing", "padding_free", "assistant_only_loss", "completion_only_loss", "loss_type", "beta")


def trainer_task(trainer: Any, args: Any) -> str | None:
    """The task the trainer trains, from its class (or a base class) or its config's class:
    `SFTTrainer` -> "sft", `DPOTrainer`/ORPO/KTO/CPO -> "preference", LLaMA-Factory's SFT and
    pre-training stages by their module; a plain `Trainer` -> None
    (it could be pre-training, SFT or classification: the user's `task=` says)."""
    for cls in type(trainer).__mro__ if trainer is not None else ():
        if cls.__name__ in TRAINER_TASKS:
            return TRAINER_TASKS[cls.__name__]
    for cls in type(args).__mro__:
        if cls.__name__ in CONFIG_TASKS:
            return CONFIG_TASKS[cls.__name__]
    module = type(trainer).__module__ + "." if trainer is not None else ""
    return next((task for prefix, task in MODULE_TASKS.items() if module.startswith(prefix)), None)


def _tokenizer_of(processing_class: Any) -> Any:
    """The tokenizer inside the Trainer's processing class (a multimodal processor holds one)."""
    inner = getattr(processing_class, "tokenizer", None)
    tok = inner if inner is not None else processing_class
    return tok if callable(getattr(tok, "decode", None)) else None


def _describe(args: Any, trainer: Any = None) -> dict[str, Any]:
    import transformers

    info: dict[str, Any] = {"name": "transformers", "version": transformers.__version__}
    for key in (
        "gradient_accumulation_steps",
        "max_grad_norm",
        "per_device_train_batch_size",
        "learning_rate",
        "lr_scheduler_type",
        "warmup_steps",
        "warmup_ratio",
        "weight_decay",
        "fp16",
        "bf16",
        "average_tokens_across_devices",
        "world_size",
    ):
        v = getattr(args, key, None)
        if isinstance(v, (int, float, str, bool)):
            info[key] = v
    if trainer is not None:
        info["trainer"] = type(trainer).__name__
    if type(args).__module__.split(".")[0] == "trl" or type(trainer).__module__.split(".")[0] == "trl":
        info.update(_trl_config(args))
    return info


def _trl_config(args: Any) -> dict[str, Any]:
    """TRL's version and the label/sequence settings of its config (None kept: it means "the
    dataset decides", e.g. `completion_only_loss=None`)."""
    info: dict[str, Any] = {}
    try:
        import trl

        info["trl_version"] = str(trl.__version__)
    except Exception:
        pass
    for key in TRL_KEYS:
        if hasattr(args, key):
            v = getattr(args, key)
            if v is None or isinstance(v, (int, float, str, bool)):
                info[key] = v
            elif isinstance(v, (list, tuple)) and all(isinstance(x, str) for x in v):
                info[key] = list(v)  # DPOConfig.loss_type is a list in TRL 1.x
    return info
