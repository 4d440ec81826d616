"""FSDP1 (`torch.distributed.fsdp.FullyShardedDataParallel`): flat parameters, sharded gradients.

FSDP1 flattens each wrapped module's parameters into one `FlatParameter` per wrapper, gathers it
for the forward and backward, and reduce-scatters its gradient, so that after backward each rank
holds its shard of the reduced gradient. Two things are measured, as under FSDP2 and DeepSpeed:

- the total gradient norm before clipping (`grad_norm`): the squared norms of the rank's shards,
  summed across ranks with one all-reduce of three numbers per step (`ShardedGradProbe`, shared
  with FSDP2; the same value `FullyShardedDataParallel.clip_grad_norm_` computes);
- this rank's own, unsharded gradient before the reduce-scatter (`grad_norm_local`,
  `grad_nonfinite`, `nonfinite_params`): tensor hooks on the flat parameters, the autograd leaves
  the gradient flows into (`LocalGradProbe`), so the rank a NaN began on is known without another
  collective.

Triage: replay reruns the model on one rank; an FSDP1 model's forward all-gathers its parameters
from every rank, so a replay on the rank that saw the incident would wait forever for peers that
are not replaying. Replay is refused (a note says so); the live localisation (batch check, first
non-finite layer forward and backward) is rank-local and runs.

Both are one probe (`FSDP1Probe`, which `distributed_probe` returns for an FSDP1 model): the
total's all-reduce runs in its `presync` on every rank at every step, and the local flags are read
after the total's (they replace the shard's).

Module and parameter names keep FSDP1's `_fsdp_wrapped_module.` prefixes (they are the names the
wrapped model has); the parameters named in `nonfinite_params` are the flat parameters.
"""

from __future__ import annotations

from typing import Any

from torch import nn

from ..messages import Msg
from .local_grads import LocalGradProbe


def is_fsdp1(model: nn.Module) -> bool:
    """`FullyShardedDataParallel` (FSDP1, flat parameters), the root or any wrapper inside."""
    try:
        from torch.distributed.fsdp import FullyShardedDataParallel
    except ImportError:
        return False
    return any(isinstance(m, FullyShardedDataParallel) for m in model.modules())


def flat_parameters(model: nn.Module) -> list[tuple[str, Any]]:
    """(name, FlatParameter) of every FSDP1 wrapper in `model`, whatever `use_orig_params` says."""
    from torch.distributed.fsdp import FullyShardedDataParallel

    out = []
    for name, m in model.named_modules():
        handle = getattr(m, "_handle", None) if isinstance(m, FullyShardedDataParallel) else None
        flat = getattr(handle, "flat_param", None)
        if flat is not None and flat.requires_grad:
            out.append(((name + "." if name else "") + "_flat_param", flat))
    return out


class FSDP1Probe:
    """The total over the ranks' shards (`total`: a `ShardedGradProbe` on the FSDP1 root, built by
    `distributed_probe`) and this rank's own gradient before the reduce-scatter (`local`), as one
    probe: the total first, then the local gradient flags, which replace the shard's."""

    name = "FSDP1Probe"

    def __init__(self, total: Any, wrapper: nn.Module) -> None:
        self.total = total
        self.local = LocalGradProbe(flat_parameters(wrapper), tag="fsdp1_local")

    @property
    def enabled(self) -> bool:
        return self.total.enabled or self.local.enabled

    @enabled.setter
    def enabled(self, on: bool) -> None:  # the monitor switches a failing probe off as a whole
        self.total.enabled = self.local.enabled = on

    def describe(self) -> dict[str, Any]:
        return {
            "kind": "fsdp1",
            "local_grads": True,
            "grad_norm": "total over ranks (one all-reduce per step)",
            "grad_norm_local": "this rank's own gradient, before the reduce-scatter",
        }

    def presync(self) -> None:
        """Every rank, every step (the total's all-reduce), even when switched off."""
        self.total.presync()

    def flush(self, packer: Any, step: Any = None) -> dict[str, Any] | None:
        ctx = {"total": self.total.flush(packer, step), "local": self.local.flush(packer, step)}
        return ctx if ctx["total"] is not None or ctx["local"] is not None else None

    def interpret(self, values: Any, ctx: dict[str, Any], rec: dict[str, Any]) -> None:
        if ctx["total"] is not None:
            self.total.interpret(values, ctx["total"], rec)
        self.local.interpret(values, ctx["local"], rec)

    def remove(self) -> None:
        self.total.remove()
        self.local.remove()


def refuse_replay(model: nn.Module, replay_fn: Any) -> tuple[Any, Msg | None]:
    """(replay_fn to use, the note saying why replay was refused) for `watch(model, ...)`."""
    if not is_fsdp1(model):
        return replay_fn, None
    return None, Msg("distributed.replay_skipped_fsdp1")
