"""What incident triage may use of the monitor that owns it, and nothing more.

Triage needs the training objects (to snapshot, replay and roll back), a place to write its
records, the step the loop is at, and four services of the monitor: switch its own hooks off
while a replay runs on the user's model, name its objects a scratch copy of the model must not
duplicate, record the step a skip policy undid as skipped, and say why replay was refused on a
sharded model (DeepSpeed ZeRO, FSDP1); and it reads the live engine's findings, whose fixes
verification checks with the incident's, and, on a pipeline stage, where the stage sits. The
monitor builds one `TriageHost` and hands it over; triage never sees the monitor itself, so what
it touches is written here.
"""

from __future__ import annotations

from collections.abc import Callable
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from torch import nn

from ..messages import Msg


def _no_refusal() -> Msg | None:
    return None


def _no_findings() -> list[Any]:
    return []


@dataclass
class TriageHost:
    model: nn.Module  # the bare model (data-parallel and compile wrappers removed): replay runs it
    optimizer: Any
    scaler: Any
    scheduler: Any
    run_dir: Path  # this rank's run directory (disk snapshots go under it)
    rank: int | None
    writer: Any  # the run log: `write_incident(name, record)`
    meta: dict[str, Any]  # the run metadata: triage records its settings under "triage"
    #: the incident records so far, oldest first; triage appends, the live engine reads them
    incidents: list[dict[str, Any]]
    step: Callable[[], int]  # the step `mon.step` is at now
    #: a context in which the monitor's hooks on the user's model record nothing (in-place replay)
    paused: Callable[[], AbstractContextManager[Any]]
    #: the step that just ran is recorded as skipped (the skip policy undid it)
    mark_skipped: Callable[[], None]
    #: the monitor's parts with hooks on the model or optimizer (their `_handles` are stripped
    #: from a scratch copy of the model)
    hooked: list[Any] = field(default_factory=list)
    #: objects a deep copy of the model must share, not duplicate (reachable through the bound
    #: methods and closures the monitor's hooks are)
    shared: tuple[Any, ...] = ()
    #: why replay cannot run on this model (DeepSpeed ZeRO 1-3, FSDP1: the note an incident record
    #: gets instead of "no replay_fn was given"), None when nothing refused it
    replay_refused: Callable[[], Msg | None] = _no_refusal
    #: the live engine's latest findings: their fixes are checked with the incident's own, so the
    #: detectors' advice (lower the LR, clip) reaches the report verified or not without a call to
    #: `mon.verify_fixes()`
    findings: Callable[[], list[Any]] = _no_findings
    #: a pipeline stage of several (`signals.pipeline.StageInfo`: its index, the number of stages,
    #: `last`): replay runs that stage alone on what its tape recorded (`stage_flow.py`); None elsewhere
    stage: Any = None
