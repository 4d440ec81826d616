"""`watch`'s tuning options as one value, checked where it is made.

`lossdoctor.watch(model, optimizer, ..., layer_every=5, on_incident="skip")` takes them as keyword
arguments (as it always has); the monitor turns them into a `WatchOptions`, so a bad value is
refused before anything is installed, with one clear message. Plain data: no torch, no imports
from the rest of the package (the triage policies are named here, and triage reads them).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

#: what the monitor does when training goes non-finite (see `lossdoctor.triage`)
POLICIES = ("report", "raise", "skip")
#: where the snapshots for replay are kept
SNAPSHOT_MODES = ("memory", "disk", "off")


@dataclass(frozen=True)
class WatchOptions:
    """The keyword options of `lossdoctor.watch` (see `Monitor` for what each one does)."""

    layer_every: int = 10
    check_inputs: bool = True
    alerts: bool = True
    update_budget: int = 1 << 20
    on_incident: str = "report"
    snapshot_every: int = 50
    snapshot: str = "memory"
    snapshot_budget: int | None = None
    triage_inplace: bool = False
    max_incidents: int = 3
    #: the tokenizer (or processor) the batches were made with: its chat template tells prompt from
    #: answer (the SFT label-mask checks), and it decodes evidence. Integrations pass the trainer's.
    tokenizer: Any = field(default=None, compare=False, repr=False)
    #: verified fixes: replay each fix of a replayed incident from the snapshot (off: False)
    verify: bool = True
    #: steps replayed after the incident step (bounded by the recorded batches)
    verify_window: int = 20
    #: replayed steps all the replays of one incident may take together
    verify_budget: int = 400

    def __post_init__(self) -> None:
        if self.on_incident not in POLICIES:
            raise ValueError(f"on_incident must be one of {POLICIES}, not {self.on_incident!r}")
        if self.snapshot not in SNAPSHOT_MODES:
            raise ValueError(f"snapshot must be 'memory', 'disk' or 'off', not {self.snapshot!r}")
        if int(self.snapshot_every) < 1:
            raise ValueError(f"snapshot_every must be >= 1, not {self.snapshot_every!r}")
        if self.tokenizer is not None and not callable(getattr(self.tokenizer, "decode", None)):
            raise ValueError(f"tokenizer must be a tokenizer (with .decode), not {type(self.tokenizer).__name__}")
        if int(self.verify_window) < 0 or int(self.verify_budget) < 1:
            raise ValueError(
                f"verify_window must be >= 0 and verify_budget >= 1, not {self.verify_window!r}, {self.verify_budget!r}"
            )
        # a per-layer sample every step at least: 0 or a negative value means "every step"
        object.__setattr__(self, "layer_every", max(1, int(self.layer_every)))
