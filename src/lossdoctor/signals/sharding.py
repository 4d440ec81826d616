"""Sharded tensors: measure the part this rank holds.

Under FSDP2 parameters and gradients are DTensors. An operation that mixes a DTensor with a plain
tensor fails, and one on DTensors alone may issue a collective; the monitor's statistics are
per-rank quantities combined explicitly (see `lossdoctor.signals.distributed`), so every
probe measures a DTensor's local shard.
"""

from __future__ import annotations

from typing import Any


def local(t: Any) -> Any:
    """A DTensor's local shard; any other tensor unchanged."""
    to_local = getattr(t, "to_local", None)
    return to_local() if to_local is not None else t


def local_list(ts: list[Any]) -> list[Any]:
    return [local(t) for t in ts]


def holds_data(t: Any) -> bool:
    """Whether a tensor's storage holds its elements. FSDP1 (`FullyShardedDataParallel` with flat
    parameters) leaves each module's `weight` as a view of the flat parameter whose storage it
    frees between forwards: the view keeps its shape, and reading it reads freed memory (a
    segfault, not an exception). Anything that cannot be checked counts as holding its data."""
    try:
        t = local(t)
        if t.numel() == 0:
            return True
        extent = sum((n - 1) * s for n, s in zip(t.shape, t.stride()) if n > 0) + 1
        return t.untyped_storage().nbytes() >= (t.storage_offset() + extent) * t.element_size()
    except Exception:
        return True


def is_dtensor(t: Any) -> bool:
    return getattr(t, "device_mesh", None) is not None and getattr(t, "placements", None) is not None


def has_dtensor_params(model: Any) -> bool:
    return any(is_dtensor(p) for p in model.parameters())


def replication(t: Any) -> int:
    """On how many ranks of its mesh a DTensor's local shard is repeated: the product of the mesh
    sizes along the dimensions where it is `Replicate` (a plain tensor: 1). Summing every rank's
    squared shard norm divided by this counts each element of the whole tensor once."""
    if not is_dtensor(t):
        return 1
    mesh, n = t.device_mesh, 1
    for dim, placement in enumerate(t.placements):
        if placement.is_replicate():
            n *= int(mesh.size(dim))
    return n


def the_mesh(params: list[Any]) -> Any:
    """The one device mesh the DTensor parameters live on; None when none is a DTensor; raises
    ValueError when they live on several meshes (one reduction could not combine them)."""
    meshes: list[Any] = []
    seen: set[int] = set()
    for p in params:
        if is_dtensor(p) and id(p.device_mesh) not in seen:
            seen.add(id(p.device_mesh))
            if not any(p.device_mesh == m for m in meshes):  # each fully_shard call builds its own, equal, mesh
                meshes.append(p.device_mesh)
    if len(meshes) > 1:
        raise ValueError(f"parameters on {len(meshes)} device meshes")
    return meshes[0] if meshes else None


def mesh_group(mesh: Any, world_size: int) -> tuple[Any, int]:
    """The process group spanning every rank of `mesh` and its size: the mesh's own group when it
    is 1-D (tensor parallel alone: the TP dimension), the default group when the mesh holds every
    rank (a torchtitan 2-D mesh over the whole job); raises ValueError for a sub-mesh of several
    dimensions (no group spans exactly its ranks)."""
    if mesh.ndim == 1:
        return mesh.get_group(0), int(mesh.size())
    if int(mesh.size()) == world_size:
        return None, world_size
    raise ValueError(f"a {mesh.ndim}-D mesh of {mesh.size()} of {world_size} ranks")
