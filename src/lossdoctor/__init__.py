"""lossdoctor: why does my training loss not go down, or go NaN?

    import lossdoctor
    mon = lossdoctor.watch(model, optimizer)      # live (needs torch)
    ...; mon.step(loss, batch=batch)
    report = lossdoctor.diagnose("run_dir_or_log") # offline (no torch)
    report = lossdoctor.check(model, optimizer, scheduler, batches=batches, total_steps=N)  # preflight
    where = lossdoctor.localize(model, batch, loss_fn)  # first non-finite layer, op, samples of a batch

Importing the package is light: torch is imported only when a live entry point is used.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from . import report as _report  # noqa: F401  (registers how a Report prints: `print(mon.diagnose())`)
from ._version import __version__

if TYPE_CHECKING:
    from .findings import Fix, Report
    from .integrations.entry import watch
    from .live.monitor import Monitor
    from .preflight.api import check
    from .triage.incident import TrainingIncident
    from .triage.localize import Localization, localize


def diagnose(path: str) -> Report:
    """Diagnose a run directory or a supported training log (no torch needed)."""
    from .detectors.engine import diagnose_runs
    from .sources import load_path

    return diagnose_runs(load_path(path))


_LAZY = {
    "watch": ("integrations.entry", "watch"),  # a model and its optimizer, or a DeepSpeed engine
    "Monitor": ("live.monitor", "Monitor"),
    "Finding": ("findings", "Finding"),
    "Fix": ("findings", "Fix"),
    "Report": ("findings", "Report"),
    "check": ("preflight.api", "check"),
    "localize": ("triage.localize", "localize"),
    "Localization": ("triage.localize", "Localization"),
    "TrainingIncident": ("triage.incident", "TrainingIncident"),
}


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        import importlib

        mod, attr = _LAZY[name]
        return getattr(importlib.import_module(f".{mod}", __name__), attr)
    raise AttributeError(f"module 'lossdoctor' has no attribute {name!r}")


__all__ = [
    "watch",
    "Monitor",
    "diagnose",
    "check",
    "localize",
    "Localization",
    "TrainingIncident",
    "Finding",
    "Fix",
    "Report",
    "__version__",
]
