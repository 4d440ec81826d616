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

Module and parameter names keep FSDP1's `_fsdp_wrapped_module.` prefixes (they are the names the
wrapped model has); the parameters named in `nonfinite_params` are the flat parameters.
"""

from __future__ import annotations

from typing import Any

from torch import nn

from ..messages import Msg
from .distributed import ShardedGradProbe, is_fsdp1
from .local_grads import LocalGradProbe


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


def attach_fsdp1(monitor: Any, wrapper: nn.Module) -> Any:
    total = ShardedGradProbe(wrapper, monitor, kind="fsdp1")
    monitor.add_probe(total)
    local = LocalGradProbe(flat_parameters(wrapper), tag="fsdp1_local")
    monitor.add_probe(local)  # after the total: its local gradient flags replace the shard's
    monitor.meta["distributed"] = {"kind": "fsdp1", "local_grads": True,
                                   "grad_norm": "total over ranks (one all-reduce per step)",
                                   "grad_norm_local": "this rank's own gradient, before the reduce-scatter"}
    monitor.writer.write_meta(monitor.meta)
    return total


def refuse_replay(model: nn.Module, replay_fn: Any) -> tuple[Any, str | None]:
    """(replay_fn to use, the note saying why replay was refused) for `watch(model, ...)`."""
    if not is_fsdp1(model):
        return replay_fn, None
    return None, Msg("distributed.replay_skipped_fsdp1")
