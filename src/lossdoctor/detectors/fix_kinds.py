"""What a fix sentence asks to change, read from its message data, and fixes ordered by verdict.

A fix is a sentence as data (`messages.Msg`): its key says which suggestion it is and its values
hold the numbers (`max_norm=`, the LR it goes `to=`, `init_scale=`, `eps=`, `module=`...). The
verifier (triage/verify.py) replays what a fix asks for; the incident merge (detectors/incidents.py)
finds the same fix in another finding. Both read the key and the values here, never the English.

Torch-free: the offline CLI merges incident records and their verdicts too.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ..findings import Finding
from ..messages import Msg

#: fix kinds a replay applies to the training state from the snapshot on, and to the data
STATE_FIXES = ("clip", "lr", "scaler", "adam_eps", "fp32_module")
DATA_FIXES = ("drop_samples", "skip_batch")

#: sentences that say clip_grad_norm_(..., 1.0) without the number as a value
CLIP_KEYS = ("triage.backward.fix_clip", "triage.backward.fix_clip_scaled", "triage.param.fix", "triage.spike.fix_state")
#: sentences that name max_norm but are not a clipping fix (the gradients already are clipped)
NOT_CLIP_KEYS = ("lr.fix_warmup_already_clipped",)
SKIP_KEYS = ("triage.spike.fix_skip", "triage.labels.fix")
DROP_KEYS = ("triage.data.fix", "triage.spike.fix_inspect", "triage.attn.drop_empty_fix")
#: LR sentences: key -> (the value holding the suggested LR, the value holding the LR it starts from)
LR_KEYS = {
    "lr.fix.set": ("lr", "now"), "lr.fix.set_ratio": ("lr", "now"),
    "lr.fix.raise": ("lr", "now"), "lr.fix.raise_ratio": ("lr", "now"),
    "grad.fix_lower_lr": ("to", "lr"), "triage.state.fix_lower_lr": ("to", "lr"),
    "scalars.runaway.fix_cap": ("to", "lr"), "scalars.jump.fix_lr": ("to", "lr"),
    "scalars.jump.fix_lr_adam_guess": ("to", "lr"),
    "lr.fix.probed": ("lr", "now"),  # the LR probe's winner (detectors/probes.py)
}
#: LR sentences that say a factor instead: key -> the value holding the factor the LR is divided by
LR_DIVIDE_KEYS = {"lr.fix.lower_by": "x"}
#: LR sentences whose factor is in the sentence's own words (the key says which): key -> the factor
LR_FACTOR_KEYS = {"scalars.surge.fix_lr": 1 / 3}
#: sentences that keep one module out of fp16/bf16: key -> the value holding the module's name
FP32_KEYS = {"triage.overflow.fix_module_fp32": "module", "triage.backward.fix_module_fp32": "module",
             "nonfinite.fix_layer_out_of_fp16": "layer", "precision.fix_layer_out_of_fp16": "layer"}


@dataclass
class Fix:
    """One candidate fix. `index` is its position in the finding's `fixes` (None for a fix the
    caller asked for)."""

    kind: str          # "clip" | "lr" | "scaler" | "adam_eps" | "fp32_module" | "drop_samples" | "skip_batch" | "code"
    index: int | None = None
    max_norm: float | None = None
    lr: float | None = None        # the suggested LR
    lr_now: float | None = None    # the LR the suggestion starts from (else: the recorded one)
    lr_factor: float | None = None  # or: the recorded LR times this
    samples: list[int] | None = None
    init_scale: float | None = None       # GradScaler(init_scale=...)
    growth_interval: int | None = None    # GradScaler(growth_interval=...)
    eps: float | None = None              # the optimizer's eps
    module: str | None = None             # the module run in fp32 (autocast off for it)
    reason: Msg | None = None      # why a code change cannot be replayed

    def describe(self, step: int) -> Msg:
        if self.kind == "clip":
            return Msg("verify.fix.clip", max_norm=float(self.max_norm or 0.0))
        if self.kind == "lr":
            if self.lr is None and self.lr_factor:
                return Msg("verify.fix.lr_factor", x=float(1 / self.lr_factor))
            return Msg("verify.fix.lr", lr=float(self.lr or 0.0))
        if self.kind == "scaler":
            return Msg("verify.fix.scaler", settings=self._scaler_settings())
        if self.kind == "adam_eps":
            return Msg("verify.fix.eps", eps=float(self.eps or 0.0))
        if self.kind == "fp32_module":
            return Msg("verify.fix.fp32", module=str(self.module))
        if self.kind == "drop_samples":
            return Msg("verify.fix.drop", ids=[int(i) for i in self.samples or []], step=step)
        if self.kind == "skip_batch":
            return Msg("verify.fix.skip", step=step)
        return Msg("verify.fix.code")

    def _scaler_settings(self) -> str:
        parts = [f"init_scale={self.init_scale:g}"] if self.init_scale is not None else []
        if self.growth_interval is not None:
            parts.append(f"growth_interval={self.growth_interval}")
        return ", ".join(parts)

    def key(self) -> tuple:
        return (self.kind, self.max_norm, self.lr, self.lr_factor, tuple(self.samples or ()), self.init_scale,
                self.growth_interval, self.eps, self.module)

    def values(self) -> dict[str, Any]:
        """Its numbers, as a check carries them next to the verdict."""
        names = ("max_norm", "lr", "lr_factor", "samples", "init_scale", "growth_interval", "eps", "module")
        return {n: (list(v) if isinstance(v, list) else v) for n in names if (v := getattr(self, n)) is not None}


def _number(values: dict[str, Any], name: str | None) -> float | None:
    v = values.get(name) if name else None
    return float(v) if isinstance(v, (int, float)) and not isinstance(v, bool) else None


def parse_fix(text: str, index: int | None, finding: Finding) -> Fix:
    """What one fix sentence asks for, from its key and values."""
    key = getattr(text, "key", None)
    values = getattr(text, "values", {}) or {}
    if _number(values, "max_norm") is not None and key not in NOT_CLIP_KEYS:
        return Fix("clip", index, max_norm=_number(values, "max_norm"))
    lr = _lr_fix(key, values, index)
    if lr is not None:
        return lr
    if _number(values, "init_scale") is not None or _number(values, "growth_interval") is not None:
        gi = _number(values, "growth_interval")
        return Fix("scaler", index, init_scale=_number(values, "init_scale"),
                   growth_interval=int(gi) if gi is not None else None)
    if _number(values, "eps") is not None:
        return Fix("adam_eps", index, eps=_number(values, "eps"))
    module = values.get(FP32_KEYS[key]) if key in FP32_KEYS else None
    if isinstance(module, str) and module:
        return Fix("fp32_module", index, module=module)
    if key in CLIP_KEYS:
        return Fix("clip", index, max_norm=1.0)  # those sentences say clip_grad_norm_(..., 1.0)
    if key in DROP_KEYS and finding.samples:
        return Fix("drop_samples", index, samples=list(finding.samples))
    if key in SKIP_KEYS:
        return Fix("skip_batch", index)
    if key is None:  # a plain sentence: its numbers are not data, so what to replay is unknown
        return Fix("code", index, reason=Msg("verify.reason.plain"))
    return Fix("code", index, reason=Msg("verify.reason.code"))


def _lr_fix(key: str | None, values: dict[str, Any], index: int | None) -> Fix | None:
    if key in LR_KEYS:
        new, now = LR_KEYS[key]
        if _number(values, new) is not None:
            return Fix("lr", index, lr=_number(values, new), lr_now=_number(values, now))
    if key in LR_FACTOR_KEYS:
        return Fix("lr", index, lr_factor=LR_FACTOR_KEYS[key])
    if key in LR_DIVIDE_KEYS:
        x = _number(values, LR_DIVIDE_KEYS[key])
        return Fix("lr", index, lr_factor=1 / x) if x and x > 0 else None
    if key is not None and "lr" in key and _number(values, "to") is not None:  # an LR sentence not listed yet
        return Fix("lr", index, lr=_number(values, "to"), lr_now=_number(values, "lr"))
    return None


def candidate_fixes(finding: Finding) -> list[Fix]:
    """The fixes of a finding, each as something a replay can apply or as a code change."""
    return [parse_fix(text, i, finding) for i, text in enumerate(finding.fixes)]


def same_fix(a: str, b: str, fa: Finding, fb: Finding) -> bool:
    """The two sentences ask for the same change: the same kind with the same values (a replayable
    fix), or the same message with the same values (a code change). Plain text never matches."""
    ka, kb = getattr(a, "key", None), getattr(b, "key", None)
    if ka is None or kb is None:
        return False
    xa, xb = parse_fix(a, None, fa), parse_fix(b, None, fb)
    if xa.kind != "code" or xb.kind != "code":
        return xa.key() == xb.key()
    return ka == kb and getattr(a, "values", None) == getattr(b, "values", None)


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
    moved = [{**c, "fix": new_place[c["fix"]]} if isinstance(c.get("fix"), int) and c["fix"] in new_place
             else dict(c) for c in checks]
    # the checks themselves, verified first as the contract has them (stable within a verdict)
    finding.fix_checks = sorted(moved, key=lambda c: _CHECK_RANK.get(c.get("verdict", ""), 4))
