"""Many ranks: what each rank measures, and how the ranks' numbers combine.

Every rank runs its own monitor and writes `log_dir/rank-N/`; `lossdoctor diagnose` reads them all
and says on which rank a problem began. That needs *local* evidence, measured before the ranks mix
their numbers: DDP averages gradients across ranks, so one rank's NaN sample makes every rank's
gradient NaN. The local signals are

- the batch, the loss, forward activations and backward activation gradients (the monitor's
  tracer: all computed on this rank, before any reduction);
- the gradient of this rank's own batch, before the all-reduce: under DDP a communication hook
  measures each bucket as it is handed to the all-reduce (`grad_norm_local`), and the reduced
  bucket when it comes back (`grad_norm`, the gradient the optimizer will see, before clipping).
  The per-parameter norms that the monitor takes at the end of backward are still the rank's own
  (DDP copies the averaged buckets back only after them), so `grad_nonfinite` and
  `nonfinite_params` are local too.

Collectives: DDP needs none (its reduction carries the numbers). FSDP2 (`fully_shard`) leaves each
rank with a shard of every gradient, so the total norm needs the shards' squared norms summed
across ranks: one all-reduce of three numbers per step, issued in `mon.step` by every rank at every
step whatever happened on it (a rank whose monitor failed sends zeros), so no rank waits in a
collective its peers skip. FSDP1 (`FullyShardedDataParallel`) needs the same all-reduce, plus this
rank's own gradient before the reduce-scatter (see `signals.fsdp1`).
"""

from __future__ import annotations

import logging
import math
from collections.abc import Callable
from typing import Any

import torch
from torch import nn

from ..messages import Msg
from .fsdp1 import FSDP1Probe, is_fsdp1
from .safe_reads import norm_fp32
from .sharding import has_dtensor_params, is_dtensor, local, mesh_group, replication, the_mesh

log = logging.getLogger("lossdoctor")


def unwrap_data_parallel(model: nn.Module) -> nn.Module:
    """The user's model inside DistributedDataParallel / DataParallel and torch.compile's wrapper,
    so layer names are the model's own (`h.3.attn`, not `module.h.3.attn` or
    `_orig_mod.h.3.attn`) and triage replays the eager model."""
    inner = model
    for _ in range(4):
        if isinstance(inner, (nn.parallel.DistributedDataParallel, nn.DataParallel)):
            inner = inner.module
        elif type(inner).__name__ == "OptimizedModule" and isinstance(
            orig := getattr(inner, "_orig_mod", None), nn.Module
        ):
            inner = orig
        else:
            break
    return inner


def is_fsdp2(model: nn.Module) -> bool:
    try:
        from torch.distributed.fsdp import FSDPModule
    except ImportError:
        return False
    return any(isinstance(m, FSDPModule) for m in model.modules())


def tensor_parallel(model: nn.Module) -> bool:
    """DTensor parameters that are not FSDP2's alone: `parallelize_module` (maybe under FSDP2 on a
    2-D mesh), whose forward exchanges activations between the ranks."""
    if not has_dtensor_params(model):
        return False
    if not is_fsdp2(model):
        return True
    return any(getattr(getattr(p, "device_mesh", None), "ndim", 1) > 1 for p in model.parameters())


def refuse_tp_replay(model: nn.Module, replay_fn: Any) -> tuple[Any, Msg | None]:
    """(replay_fn to use, the note saying why replay was refused) for `watch(model, ...)`: a
    one-rank replay of a tensor-parallel forward would wait in its collectives."""
    try:
        tp = tensor_parallel(model)
    except Exception:  # an unusual model: leave replay as it was asked
        return replay_fn, None
    return (None, Msg("distributed.replay_skipped_tp")) if tp else (replay_fn, None)


def distributed_probe(
    wrapper: nn.Module, grads: Any, scale_fn: Callable[[], torch.Tensor | None], world_size: int
) -> DDPProbe | ShardedGradProbe | FSDP1Probe | None:
    """The probe that fits how `wrapper` distributes gradients (None when it is not data-parallel).
    It needs only the gradient probe (FSDP2 arms and listens to its capture), the loss scale in
    effect and the number of ranks; the monitor adds it to its probes and records `describe()`."""
    if isinstance(wrapper, nn.parallel.DistributedDataParallel):
        return DDPProbe(wrapper, scale_fn)
    if is_fsdp2(wrapper):
        return ShardedGradProbe(wrapper, grads, world_size)
    if has_dtensor_params(wrapper):  # tensor parallel (parallelize_module) without FSDP
        return ShardedGradProbe(wrapper, grads, world_size, kind="tp")
    if is_fsdp1(wrapper):  # the same total over the shards, and each rank's own gradient
        return FSDP1Probe(ShardedGradProbe(wrapper, grads, world_size), wrapper)
    return None


def _sum_sq(norms: list[torch.Tensor]) -> torch.Tensor:
    n = torch.stack([x.reshape(()).float() for x in norms])
    return (n * n).sum()


class DDPProbe:
    """Measures each DDP gradient bucket before and after its all-reduce, from a communication hook
    that wraps the reduction DDP would do anyway (the default all-reduce, or the user's own hook:
    `ddp.register_comm_hook` called after `watch` is chained, not replaced)."""

    name = "DDPProbe"

    def __init__(self, ddp: nn.parallel.DistributedDataParallel, scale_fn: Callable[[], torch.Tensor | None]) -> None:
        self.ddp = ddp
        self.scale_fn = scale_fn
        self.enabled = True
        self.hooked = False
        self._local: list[torch.Tensor] = []
        self._reduced: list[torch.Tensor] = []
        self._scale: torch.Tensor | None = None
        self._inner_state: Any = ddp.process_group
        from torch.distributed.algorithms.ddp_comm_hooks.default_hooks import allreduce_hook

        self._inner_hook: Any = allreduce_hook
        if getattr(ddp, "_comm_hooks", None):
            # DDP takes one hook and it is taken: fall back to the rank's own gradients only
            log.info("%s", Msg("integrations.ddp.hook_taken"))
            return
        try:
            ddp.register_comm_hook(None, self._hook)
        except Exception as e:  # an old or unusual DDP: keep training, measure less
            log.info("%s", Msg("integrations.ddp.no_hook", error=str(e)))
            return
        self.hooked = True
        ddp.register_comm_hook = self._chain  # type: ignore[method-assign]

    def describe(self) -> dict[str, Any]:
        return {
            "kind": "ddp",
            "comm_hook": self.hooked,
            "grad_norm": "all-reduced" if self.hooked else "local (this rank, before all-reduce)",
        }

    def _chain(self, state: Any, hook: Any) -> None:
        """Stands in for `ddp.register_comm_hook` once ours is registered: the user's hook becomes
        the reduction our hook wraps, so their training is unchanged."""
        self.ddp._check_comm_hook(hook)
        self._inner_state, self._inner_hook = state, hook
        self.ddp._comm_hooks.append((hook, state))

    def _hook(self, _state, bucket):  # no annotations: DDP checks them against its own types
        measured = False
        if self.enabled:
            try:
                if not self._local:
                    s = self.scale_fn()
                    self._scale = None if s is None else s.detach().clone()
                self._local.append(norm_fp32(bucket.buffer().detach()))
                measured = True
            except Exception as e:
                self._fail(e)
        fut = self._inner_hook(self._inner_state, bucket)
        if not measured:
            return fut

        def after(f: torch.futures.Future) -> torch.Tensor:
            out = f.value()
            t = out[0] if isinstance(out, (list, tuple)) else out
            if self.enabled:
                try:
                    self._reduced.append(norm_fp32(t.detach()))
                except Exception as e:
                    self._fail(e)
            return t

        return fut.then(after)

    def _fail(self, e: BaseException) -> None:
        self.enabled = False
        log.warning("%s", Msg("integrations.ddp.disabled", error=f"{type(e).__name__}: {e}"))

    def flush(self, packer: Any, step: Any = None) -> dict[str, Any] | None:
        if not self.enabled:
            return None
        local, reduced, scale = self._local, self._reduced, self._scale
        self._local, self._reduced, self._scale = [], [], None
        ctx = {
            "local": bool(local),
            "reduced": bool(reduced) and len(reduced) == len(local),
            "scale": scale is not None,
        }
        if local:
            packer.add("ddp_local_sq", _sum_sq(local))
        if ctx["reduced"]:
            packer.add("ddp_reduced_sq", _sum_sq(reduced))
        if scale is not None:
            packer.add("ddp_scale", scale)
        return ctx

    def interpret(self, values: dict[str, Any], ctx: dict[str, Any], rec: dict[str, Any]) -> None:
        if not self.hooked:
            # the monitor's own total is this rank's gradient, taken before DDP copied the average back
            if "grad_norm" in rec:
                rec["grad_norm_local"] = rec.pop("grad_norm")
            return
        scale = float(values["ddp_scale"][0]) if ctx["scale"] else 1.0
        if ctx["local"]:
            rec["grad_norm_local"] = _root(float(values["ddp_local_sq"][0])) / scale
        if ctx["reduced"]:
            rec["grad_norm"] = _root(float(values["ddp_reduced_sq"][0])) / scale
        elif "grad_norm" in rec:  # no reduction this step (no_sync): the total is local
            rec["grad_norm_local"] = rec.pop("grad_norm")

    def remove(self) -> None:
        # DDP cannot unregister a hook; ours becomes a plain pass-through
        self.enabled = False


class ShardedGradProbe:
    """FSDP2 and tensor parallel: every rank holds a shard of each DTensor gradient. The monitor
    measures the local shards; this probe sums their squares over the ranks of the parameters'
    device mesh (one small all-reduce per step, no per-parameter collective, no all-gather) into
    the total norm, `clip_grad_norm_`'s. A shard repeated on several ranks (`Replicate` along a
    mesh dimension: a row-parallel bias, a norm's weight) is divided by its number of copies, so
    it counts once; under tensor parallel a plain (non-DTensor) parameter counts as replicated
    over the mesh."""

    name = "ShardedGradProbe"

    def __init__(self, model: nn.Module, grads: Any, world_size: int, kind: str = "fsdp2") -> None:
        self.grads = grads  # the monitor's GradProbe: its capture is armed from here, its norms summed
        self.kind = kind
        self.world_size = world_size  # ranks of the reduction (the mesh's, once known)
        self.enabled = True
        self.broken = False  # the collective itself failed: stop issuing it
        self._local: torch.Tensor | None = None
        self._pending: tuple[Any, torch.Tensor, torch.Tensor] | None = None
        first = next((p for p in model.parameters()), None)
        self.device = local(first).device if first is not None else torch.device("cpu")
        self.group: Any = None
        self.mesh: dict[str, int] | None = None
        self.coordinate: dict[str, int] | None = None
        self._weights = self._mesh_weights(grads.params)
        grads.listeners.append(self._on_capture)
        # FSDP2 assigns the reduced shards to the sharded parameters itself, so autograd's
        # accumulate-grad hooks never fire on them: arm the capture from the root's output instead.
        # FSDP's own end-of-backward callback is queued first (its hooks were registered first), so
        # the capture runs after the reduce-scatter has produced this rank's shards.
        self._handle = model.register_forward_hook(self._on_forward)

    def _mesh_weights(self, params: list[Any]) -> torch.Tensor | None:
        """The reduction's group and size from the parameters' mesh, and each parameter's weight
        (1 / its copies; None when every weight is 1). A layout one reduction cannot total
        (several meshes, a sub-mesh of several dimensions) leaves the rank's own shard, said once."""
        try:
            mesh = the_mesh(params)
            if mesh is None:
                return None
            self.group, self.world_size = mesh_group(mesh, self.world_size)
            names = mesh.mesh_dim_names or tuple(f"dim{d}" for d in range(mesh.ndim))
            self.mesh = {str(n): int(mesh.size(d)) for d, n in enumerate(names)}
            coord = mesh.get_coordinate()  # where this rank sits in the mesh
            self.coordinate = None if coord is None else {str(n): int(c) for n, c in zip(names, coord)}
        except (ValueError, RuntimeError) as e:
            self.broken = True
            log.warning("%s", Msg("integrations.mesh_unsupported", error=str(e)))
            return None
        plain = self.world_size if self.kind == "tp" else 1
        reps = [replication(p) if is_dtensor(p) else plain for p in params]
        if all(r == 1 for r in reps):
            return None
        return torch.tensor([1.0 / r for r in reps], dtype=torch.float32, device=self.device)

    def describe(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "kind": self.kind,
            "grad_norm": "total over ranks (one all-reduce per step)",
            "grad_norm_local": "this rank's shard",
        }
        if self.mesh is not None:
            out["mesh"] = self.mesh
        if self.coordinate is not None:
            out["coordinate"] = self.coordinate
        return out

    def _on_forward(self, module: nn.Module, args: Any, out: Any) -> None:
        from .tracer import compiling, first_float_tensor

        if compiling() or not self.enabled or not torch.is_grad_enabled():
            return
        try:
            t = first_float_tensor(out)
            if t is not None and t.requires_grad:
                t.register_hook(self._arm)
        except Exception as e:
            self.enabled = False
            log.warning("%s", Msg("integrations.fsdp.disabled", error=f"{type(e).__name__}: {e}"))

    def _arm(self, grad: torch.Tensor) -> None:
        self.grads.arm()

    def _on_capture(self, idx: Any, norms: Any) -> None:
        if not self.enabled or len(norms) == 0:
            return
        # GradProbe's stacked per-parameter norms (a list only when they sit on several devices)
        n = norms.float() if isinstance(norms, torch.Tensor) else torch.stack([x.reshape(()).float() for x in norms])
        bad = (~torch.isfinite(n)).float()
        sq = n * n
        if self._weights is not None:
            w = self._weights if len(idx) == len(self._weights) else self._weights[torch.as_tensor(idx)]
            w = w.to(n.device)
            sq, bad = sq * w, bad * w
        one = torch.ones((), device=n.device)
        self._local = torch.stack([sq.sum(), bad.sum(), one])

    def presync(self) -> None:
        """Every rank, every step: one all-reduce of [shard sq-norm, non-finite shards, captured]."""
        if self.broken:
            return
        try:
            import torch.distributed as dist

            vec = self._local if self._local is not None else torch.zeros(3, device=self.device)
            self._local = None
            reduced = vec.clone()
            work = dist.all_reduce(reduced, op=dist.ReduceOp.SUM, group=self.group, async_op=True)
            self._pending = (work, vec, reduced)
        except Exception as e:
            self.broken = True
            self._pending = None
            log.warning("%s", Msg("integrations.fsdp.allreduce", error=f"{type(e).__name__}: {e}"))

    def flush(self, packer: Any, step: Any = None) -> dict[str, Any] | None:
        if not self.enabled:
            return None
        if self._pending is None:
            return {"have": False}
        work, vec, reduced = self._pending
        self._pending = None
        work.wait()
        packer.add("fsdp_local", vec)
        packer.add("fsdp_total", reduced)
        return {"have": True}

    def interpret(self, values: dict[str, Any], ctx: dict[str, Any], rec: dict[str, Any]) -> None:
        if not ctx.get("have"):
            if self.broken and "grad_norm" in rec:  # no total: what was measured is this rank's shard
                rec["grad_norm_local"] = rec.pop("grad_norm")
            return
        local, total = values["fsdp_local"], values["fsdp_total"]
        if local[2] < 1:  # no capture on this rank this step
            return
        scale = float(values["grad_scale"][0]) if "grad_scale" in values else 1.0
        rec["grad_norm_local"] = _root(float(local[0])) / scale
        world = self.world_size
        if total[2] >= world:  # every rank contributed its shard
            rec["grad_norm"] = _root(float(total[0])) / scale
            rec["grad_nonfinite"] = int(round(float(total[1])))
        else:
            rec.pop("grad_norm", None)

    def remove(self) -> None:
        self.enabled = False
        self._handle.remove()
        if self._on_capture in self.grads.listeners:
            self.grads.listeners.remove(self._on_capture)


def _root(x: float) -> float:
    return math.sqrt(x) if x >= 0 and math.isfinite(x) else float("nan") if x != x else float("inf")
