"""The incident record: what triage learnt about one incident, written as `incidents/step-N.json`.

The flow (`triage/flow.py`) fills it in step by step: the trigger, then the replay, its timing,
whether the failing step failed again, the localisation (or the samples of a spike), batch vs
state, the findings; the verifier adds `verification` later. Each of those is a field here, so a
misspelt key is an error where it is written rather than a missing key where it is read.

The file is the contract (`lossdoctor.incident/1`): `to_dict` writes the keys in the order the
flow has always written them, and leaves out what a record does not have (a record without a
replay has no `replay` key, not `"replay": null`). `reproducible` and `samples` are the two fields
whose null is an answer ("cannot tell", "no samples found"): they are left out only while ABSENT.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field
from typing import Any, Literal

FORMAT = "lossdoctor.incident/1"


class _Absent(enum.Enum):
    ABSENT = "absent"


#: a field not reached by the flow (left out of the file), where None is itself an answer
ABSENT = _Absent.ABSENT

#: the keys of the file, in the order they are written
KEYS = (
    "format",
    "step",
    "trigger",
    "rank",
    "policy",
    "level",
    "live",
    "notes",
    "action",
    "spike",
    "scale",
    "replay",
    "timing",
    "reproducible",
    "localization",
    "samples",
    "batch_vs_state",
    "error",
    "findings",
    "seconds",
    "verification",
)
#: the scale-collapse flow traces the step without a replay, and has always written its
#: localisation before the timing of it
SCALE_KEYS = (
    "format",
    "step",
    "trigger",
    "rank",
    "policy",
    "level",
    "live",
    "notes",
    "action",
    "spike",
    "scale",
    "replay",
    "reproducible",
    "localization",
    "timing",
    "samples",
    "batch_vs_state",
    "error",
    "findings",
    "seconds",
    "verification",
)
#: the keys written only when the record has them (their None means "not there")
OPTIONAL = frozenset(
    {"spike", "scale", "replay", "timing", "localization", "batch_vs_state", "error", "seconds", "verification"}
)


@dataclass(eq=False)  # a record is one incident: compared (and found in a list) by identity
class IncidentRecord:
    """One incident's record, as the flow fills it in."""

    step: int
    #: what started it: nonfinite_loss, nonfinite_grad, scale_collapse, loss_spike
    trigger: str
    rank: int | None
    #: the on_incident policy it ran under: report, raise, skip
    policy: str
    #: the step record's own flags at the incident (`incident.LIVE_KEYS`)
    live: dict[str, Any]
    #: how far triage got: live (the step record's flags), replay, replay-state (the state was bad)
    level: str = "live"
    notes: list[str] = field(default_factory=list)
    #: what the skip policy did: none, skipped, rolled_back
    action: str = "none"
    #: a loss spike's numbers (median, z, ratio, threshold)
    spike: dict[str, Any] | None = None
    #: a scale collapse's numbers (streak, first)
    scale: dict[str, Any] | None = None
    replay: dict[str, Any] | None = None
    #: seconds each part of the flow took (replay_s, localize_s, batch_vs_state_s)
    timing: dict[str, float] | None = None
    #: does the failing step fail again after the replay (None: cannot tell)
    reproducible: bool | None | Literal[_Absent.ABSENT] = ABSENT
    localization: dict[str, Any] | None = None
    #: a spike's per-sample search (None: the batch has no samples to search)
    samples: dict[str, Any] | None | Literal[_Absent.ABSENT] = ABSENT
    batch_vs_state: dict[str, Any] | None = None
    #: the flow's own failure, when it failed (the record then has the live answer)
    error: str | None = None
    #: the findings (contract dicts), the first the answer
    findings: list[dict[str, Any]] = field(default_factory=list)
    seconds: float | None = None
    #: the fix verifier's result (`triage.verify`), once the fixes were replayed
    verification: dict[str, Any] | None = None
    format: str = FORMAT
    #: the dict the monitor, the live engine and `TrainingIncident` share (see `publish`)
    _view: dict[str, Any] = field(default_factory=dict, init=False, repr=False)

    def time(self, part: str, seconds: float) -> None:
        """How long one part of the flow took, rounded as the record keeps it."""
        if self.timing is None:
            self.timing = {}
        self.timing[part] = round(seconds, 4)

    def to_dict(self) -> dict[str, Any]:
        """The record as its file has it: the keys in their order, the absent ones left out."""
        out: dict[str, Any] = {}
        for key in SCALE_KEYS if self.trigger == "scale_collapse" else KEYS:
            value = getattr(self, key)
            if value is ABSENT or (value is None and key in OPTIONAL):
                continue
            out[key] = value
        return out

    def publish(self) -> dict[str, Any]:
        """The record as one dict that stays the same object: refreshed in place, so whoever holds it
        (the monitor's `incidents`, the live engine, a raised `TrainingIncident`) sees a later
        verification too."""
        fresh = self.to_dict()
        self._view.clear()
        self._view.update(fresh)
        return self._view
