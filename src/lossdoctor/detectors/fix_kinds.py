"""The fixes a replay tries (`Candidate`: a finding's `Fix` with its place in the finding), and
fixes ordered by verdict.

A fix says what it asks to change as data (`findings.Fix`: its kind and numbers); the verifier
(triage/verify.py) replays it, the incident merge (detectors/incident_merge.py) finds the same fix in
another finding (`same_fix`). Both read the kind and the numbers, never the sentence.

Torch-free: the offline CLI merges incident records and their verdicts too.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ..findings import DATA_FIXES, REPLAYABLE, STATE_FIXES, Finding, Fix, as_fix, describe_fix
from ..messages import Msg

__all__ = ["DATA_FIXES", "STATE_FIXES", "Candidate", "candidate", "candidate_fixes", "order_by_verdict", "same_fix"]


@dataclass(frozen=True)
class Candidate:
    """One fix as a replay tries it: the `Fix`, its `index` in the finding's `fixes` (None for a
    fix the caller passed), and the kind the replay applies: the fix's own kind when a replay can
    apply it, else "code" (said with `reason`: why it cannot be replayed)."""

    fix: Fix
    index: int | None = None
    kind: str = field(init=False)
    reason: Msg | None = field(init=False, default=None)

    def __post_init__(self) -> None:
        kind = self.fix.kind if self.fix.kind in REPLAYABLE else "code"
        object.__setattr__(self, "kind", kind)
        if kind == "code":  # plain text: its numbers are not data, so what to replay is unknown
            why = "verify.reason.plain" if self.fix.key is None else "verify.reason.code"
            object.__setattr__(self, "reason", Msg(why))

    def param(self, name: str) -> Any:
        return self.fix.params.get(name)

    @property
    def max_norm(self) -> float | None:
        return self.param("max_norm")

    @property
    def lr(self) -> float | None:
        return self.param("lr")

    @property
    def lr_now(self) -> float | None:
        return self.param("lr_now")

    @property
    def lr_factor(self) -> float | None:
        return self.param("lr_factor")

    @property
    def samples(self) -> list[int] | None:
        return self.param("samples")

    @property
    def init_scale(self) -> float | None:
        return self.param("init_scale")

    @property
    def growth_interval(self) -> int | None:
        return self.param("growth_interval")

    @property
    def eps(self) -> float | None:
        return self.param("eps")

    @property
    def module(self) -> str | None:
        return self.param("module")

    def describe(self, step: int) -> Msg:
        return describe_fix(self.fix, step) if self.kind != "code" else Msg("verify.fix.code")

    def key(self) -> tuple:
        return (
            self.kind,
            self.max_norm,
            self.lr,
            self.lr_factor,
            tuple(self.samples or ()),
            self.init_scale,
            self.growth_interval,
            self.eps,
            self.module,
        )

    def values(self) -> dict[str, Any]:
        """Its numbers, as a check carries them next to the verdict."""
        if self.kind == "code":
            return {}
        names = ("max_norm", "lr", "lr_factor", "samples", "init_scale", "growth_interval", "eps", "module")
        return {n: (list(v) if isinstance(v, list) else v) for n in names if (v := self.param(n)) is not None}


def candidate(x: Any, index: int | None = None, finding: Finding | None = None) -> Candidate:
    """`x` (a Fix, or a sentence: a code change) as a replay tries it. A drop fix without its own
    samples drops the finding's (a code change when the finding names none)."""
    fix = as_fix(x)
    if fix.kind == "drop_samples" and not fix.params.get("samples") and finding is not None:
        fix = (
            Fix("drop_samples", {**fix.params, "samples": list(finding.samples)}, fix.text)
            if finding.samples
            else Fix("code", None, fix.text)
        )
    return Candidate(fix, index)


def candidate_fixes(finding: Finding) -> list[Candidate]:
    """The fixes of a finding, each as something a replay can apply or as a code change."""
    return [candidate(x, i, finding) for i, x in enumerate(finding.fixes)]


def same_fix(a: Any, b: Any, fa: Finding, fb: Finding) -> bool:
    """The two fixes ask for the same change: the same kind with the same numbers (a fix a replay
    applies), or the same message with the same values (any other). Plain text never matches."""
    xa, xb = candidate(a, None, fa), candidate(b, None, fb)
    if xa.fix.key is None or xb.fix.key is None:
        return False
    if xa.kind != "code" or xb.kind != "code":
        return xa.key() == xb.key()
    return xa.fix.key == xb.fix.key and xa.fix.values == xb.fix.values


# --- fixes ordered by verdict ---------------------------------------------------------------------

#: verified first; then the fixes nobody could check (a code change may well be the answer); a fix
#: the replay showed not to help last
_RANK = {"verified": 0, "not_checked": 1, "not_verifiable": 1, "did_not_help": 2}
#: the order of `fix_checks` itself (as triage/verify.py's `order_checks`)
_CHECK_RANK = {"verified": 0, "did_not_help": 1, "not_checked": 2, "not_verifiable": 3}


def order_by_verdict(finding: Finding) -> None:
    """Reorder `finding.fixes` so verified fixes come first and fixes that did not help last
    (stable otherwise), and point each check's `fix` index at its sentence's new place."""
    checks = finding.fix_checks
    if not checks:
        return
    verdict: dict[int, str] = {}
    for c in checks:
        i = c.get("fix")
        if isinstance(i, int) and 0 <= i < len(finding.fixes):
            v = c.get("verdict", "")
            if i not in verdict or _RANK.get(v, 1) < _RANK.get(verdict[i], 1):
                verdict[i] = v
    order = sorted(range(len(finding.fixes)), key=lambda i: (_RANK.get(verdict.get(i, ""), 1), i))
    new_place = {old: new for new, old in enumerate(order)}
    finding.fixes = [finding.fixes[i] for i in order]
    moved = [
        {**c, "fix": new_place[c["fix"]]} if isinstance(c.get("fix"), int) and c["fix"] in new_place else dict(c)
        for c in checks
    ]
    # the checks themselves, verified first as the contract has them (stable within a verdict)
    finding.fix_checks = sorted(moved, key=lambda c: _CHECK_RANK.get(c.get("verdict", ""), 4))
