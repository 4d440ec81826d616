"""When two causes tie, the finding says so.

After arbitration the findings are ordered by severity, then confidence. When the first two name
different causes with the same severity and confidences within `TIES.confidence` of each other,
the order between them is not evidence: each gets a sentence naming the other (its cause, its
confidence, where it begins), so a reader tries the fixes of both instead of trusting the first.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..findings import Finding
from ..messages import Msg


@dataclass(frozen=True)
class TieThresholds:
    #: confidences this close are one judgement (the detectors' confidences are set in steps of
    #: 0.05 to 0.1: closer than one step is no preference; measured default)
    confidence: float = 0.05


TIES = TieThresholds()


def mark_ties(findings: list[Finding]) -> None:
    """Add the tie sentence to the first two findings when they tie (in place)."""
    if len(findings) < 2:
        return
    a, b = findings[0], findings[1]
    if a.cause == b.cause or a.severity != b.severity or a.severity == "info":
        return
    if abs(a.confidence - b.confidence) > TIES.confidence + 1e-9:
        return
    for f, other in ((a, b), (b, a)):
        m = Msg(
            "tie.with",
            other=other.cause,
            conf=round(other.confidence, 2),
            step=other.step if other.step is not None else Msg("tie.no_step"),
        )
        if all(getattr(e, "key", None) != "tie.with" for e in f.evidence):
            f.evidence.append(m)
