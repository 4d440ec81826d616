"""Pipeline parallel (`torch.distributed.pipelining`): one stage per rank.

Each rank calls `lossdoctor.watch(stage, optimizer)` on its `PipelineStage`; the monitor watches
the stage's module (`stage.submod`: its layers keep the full model's names when the model was cut
torchtitan's way) and knows from the stage its index, the number of stages and the pipeline's
process group. The schedule (`ScheduleGPipe`, `Schedule1F1B`, ...) runs one forward and backward
per micro-batch inside `schedule.step`; the gradients accumulate on the stage's parameters and the
last backward of the step is captured, so the micro-batches join into the optimizer step.

A stage holds its own parameters and no other stage's: the total gradient norm (the one
`clip_grad_norm_` computes across stages, torchtitan's way: each stage's norm squared, all-reduced
over the pipeline group) is the stages' squared norms summed, one all-reduce of three numbers per
step over the pipeline group (`ShardedGradProbe` with the stage's group, every weight 1). The
loss lives on the last stage: the other stages call `mon.step(None, batch=...)`, and their runs say
so in the metadata (`loss_stage`), so no "no loss" finding is made there.

Replay under PP is of one stage alone: the loss needs every stage, so a stage cannot replay the
loss, but with a `replay_fn` given triage records each micro-batch's inputs and output gradients
on the stage (`triage/stage_tape.py`, whose recording the stage's gradient scaling here tells the
factor) and replays the stage's own forward to localise a NaN that began in it
(`triage/stage_flow.py`). A stage whose parameters are DTensors (PP with TP or FSDP2) is refused,
with a note: its forward meets the other ranks of its mesh. The live localisation (the first
non-finite layer forward and backward, the batch check on the first stage) runs on every stage.
"""

from __future__ import annotations

import gc
import logging
import sys
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from torch import nn

from ..messages import Msg
from .distributed import ShardedGradProbe
from .sharding import has_dtensor_params

log = logging.getLogger("lossdoctor")


@dataclass(frozen=True)
class StageInfo:
    """Where a pipeline stage sits: its index, the number of stages, the pipeline's process group
    (None: the default group) and its size."""

    index: int
    n_stages: int
    group: Any
    group_size: int
    group_rank: int
    #: the `PipelineStage` itself (its metadata pass and gradient scaling are hooked)
    obj: Any = field(default=None, compare=False, repr=False)

    @property
    def last(self) -> bool:
        return self.index == self.n_stages - 1

    def describe(self) -> dict[str, Any]:
        return {"stage": self.index, "num_stages": self.n_stages, "last_stage": self.last}


def is_pipeline_stage(obj: Any) -> bool:
    try:
        from torch.distributed.pipelining.stage import _PipelineStageBase
    except Exception:  # an old torch, or one built without distributed
        return False
    return isinstance(obj, _PipelineStageBase)


def find_stage(module: Any) -> Any:
    """The `PipelineStage` whose module is `module` (`watch(stage.submod, opt)`), or None. Looked up
    only when `torch.distributed.pipelining` was imported and the module is an `nn.Module`: among
    the objects that refer to the module (the stage holds it in its `submod` attribute)."""
    if "torch.distributed.pipelining" not in sys.modules or not isinstance(module, nn.Module):
        return None
    try:
        for ref in gc.get_referrers(module):
            if is_pipeline_stage(ref) and ref.submod is module:
                return ref
            if isinstance(ref, dict) and ref.get("submod") is module:  # the stage's __dict__
                for owner in gc.get_referrers(ref):
                    if is_pipeline_stage(owner) and owner.submod is module:
                        return owner
    except Exception:  # an unusual object graph: the module is watched as a plain model
        return None
    return None


def split_stage(obj: Any) -> tuple[Any, StageInfo | None]:
    """(the module to watch, the stage's place) for what was given to `watch`: a `PipelineStage`
    gives its module; a module that is a stage's `submod` gives itself and that stage; anything
    else is returned as it is, with no stage."""
    if not is_pipeline_stage(obj):
        stage = find_stage(obj)
        if stage is None:
            return obj, None
        return obj, split_stage(stage)[1]
    info = StageInfo(
        index=int(obj.stage_index),
        n_stages=int(obj.num_stages),
        group=obj.group,
        group_size=int(obj.group_size),
        group_rank=int(obj.group_rank),
        obj=obj,
    )
    return obj.submod, info


def refuse_pp_replay(model: nn.Module, stage: StageInfo | None, replay_fn: Any) -> tuple[Any, Msg | None]:
    """(replay_fn to use, the note saying why replay was refused) for a pipeline stage: one whose
    parameters are DTensors (PP with TP or FSDP2) cannot be replayed on one rank; any other stage
    is replayed alone (`triage/stage_flow.py`)."""
    if stage is None or stage.n_stages <= 1 or replay_fn is None or not has_dtensor_params(model):
        return replay_fn, None
    return None, Msg("distributed.replay_skipped_pp_sharded")


class PipelineGradProbe(ShardedGradProbe):
    """The total gradient norm over the pipeline's stages: this stage's squared norm summed over
    the pipeline group (one all-reduce per step, every rank, every step). The run's metadata says
    the stage, the mesh ({"pp": stages}) and this rank's coordinate in it."""

    name = "PipelineGradProbe"

    def __init__(self, model: nn.Module, grads: Any, stage: StageInfo) -> None:
        super().__init__(model, grads, stage.group_size, kind="pp")
        self.stage = stage
        self.group = stage.group
        self.world_size = stage.group_size
        self.mesh = {"pp": stage.n_stages}
        self.coordinate = {"pp": stage.group_rank}

    def describe(self) -> dict[str, Any]:
        out = super().describe()
        out["grad_norm"] = "total over the pipeline stages (one all-reduce per step)"
        out["grad_norm_local"] = "this stage's parameters"
        out.update(self.stage.describe())
        return out


def pipeline_probe(model: nn.Module, grads: Any, stage: StageInfo) -> PipelineGradProbe | None:
    """The probe for a pipeline stage, or None (said once) for a stage whose parameters are
    DTensors (PP combined with TP or FSDP2: one reduction over the pipeline group would not total
    their shards; not yet handled)."""
    if has_dtensor_params(model):
        log.warning("%s", Msg("integrations.pp_sharded_stage"))
        return None
    return PipelineGradProbe(model, grads, stage)


#: the stage's passes that run its module on placeholders, not on training data: torch 2.13's
#: metadata inference (forward on `torch.empty` tensors of the received shapes, and a backward), and
#: the shape inference of older versions
_PLACEHOLDER_PASSES = ("_forward_metadata_inference", "_backward_metadata_inference", "_shape_inference")


def hook_stage(
    stage: StageInfo, parts: Iterable[Any], recapture: Callable[[], None], on_scale: Callable[[Any], None] | None = None
) -> Callable[[], None]:
    """Wrap the stage object's own methods, on that instance only, and return what undoes it:

    - the passes that run the stage's module on uninitialised placeholder tensors (the first
      `schedule.step`, before any micro-batch) run with `parts` (the monitor's hooks) switched off:
      their garbage values would read as extreme activations at step 0 (a false `bad_init`) or NaN;
    - `perform_reduce_grad` and `scale_grads` (called once per step after the last backward; the
      schedule divides the accumulated gradients by the number of micro-batches there,
      `scale_grads=True`): the gradient norms are taken after them, once per step, so the recorded
      norm is the one the optimizer sees (and `clip_grad_norm_` measures). The monitor skips the
      capture at the end of each micro-batch's backward (`defer_capture`); `on_scale` is told the
      factor the gradients were divided by (the stage's tape replays it).

    Each wrapper calls the original with the same arguments and returns its result."""
    obj = stage.obj
    parts = [p for p in parts if p is not None and hasattr(p, "enabled")]
    undo: list[str] = []
    inside = [0]  # perform_reduce_grad calls scale_grads: one capture, after the outer call
    for name in _PLACEHOLDER_PASSES:
        if callable(getattr(obj, name, None)):
            setattr(obj, name, _quiet(getattr(obj, name), parts))
            undo.append(name)
    for name in ("perform_reduce_grad", "scale_grads"):
        if callable(getattr(obj, name, None)):
            setattr(obj, name, _rescaled(getattr(obj, name), inside, recapture, on_scale))
            undo.append(name)

    def remove() -> None:
        for name in undo:
            obj.__dict__.pop(name, None)  # the class's method again

    return remove


def _quiet(fn: Callable[..., Any], parts: list[Any]) -> Callable[..., Any]:
    """`fn` (a placeholder pass) wrapped to run with `parts` switched off, their state restored and
    what they collected dropped after. Apart from `hook_stage` to keep it short."""

    def call(*args: Any, **kwargs: Any) -> Any:
        state = [p.enabled for p in parts]
        _switch(parts, [False] * len(parts))
        try:
            return fn(*args, **kwargs)
        finally:
            _switch(parts, state, reset=True)

    return call


def _rescaled(
    fn: Callable[..., Any], inside: list[int], recapture: Callable[[], None], on_scale: Callable[[Any], None] | None
) -> Callable[..., Any]:
    """`fn` (`perform_reduce_grad` or `scale_grads`) wrapped to tell `on_scale` the factor and
    capture the gradients after it; `inside` is the depth shared by both wrappers, so the nested
    call captures nothing and the outer one captures once. Apart from `hook_stage` to keep it
    short."""

    def call(*args: Any, **kwargs: Any) -> Any:
        if not inside[0] and on_scale is not None:
            _tell(on_scale, args[0] if args else kwargs.get("grad_scale_factor"))
        inside[0] += 1
        try:
            out = fn(*args, **kwargs)
        finally:
            inside[0] -= 1
        if not inside[0]:
            recapture()
        return out

    return call


def _tell(fn: Callable[[Any], None], value: Any) -> None:
    """Call a listener inside the user's schedule step: nothing may escape."""
    try:
        fn(value)
    except Exception:
        pass


def _switch(parts: list[Any], on: list[bool], reset: bool = False) -> None:
    """Each part's `enabled` set (and, once the placeholder pass is over, what it collected
    dropped); inside the user's schedule step, so nothing may escape: a part that cannot be
    switched is switched off."""
    for p, state in zip(parts, on):
        try:
            p.enabled = state
            if reset and getattr(p, "reset", None) is not None:
                p.reset()
        except Exception:
            try:
                p.enabled = False
            except Exception:
                pass


def defers_capture(stage: StageInfo) -> bool:
    """Whether the stage's schedule says when its gradients are final (it calls
    `perform_reduce_grad` or `scale_grads` once per step: torch 2.3 and later), so the capture at
    the end of each micro-batch's backward can be skipped."""
    obj = stage.obj
    return callable(getattr(obj, "perform_reduce_grad", None)) or callable(getattr(obj, "scale_grads", None))
