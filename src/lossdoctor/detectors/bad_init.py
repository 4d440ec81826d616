"""Bad initialisation: a starting loss far above chance, or extreme activations from step 0."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..findings import Finding, FixLike, as_fixes
from ..messages import Msg
from ..records import Run
from .base import detector
from .quantities import Quantities


@dataclass(frozen=True)
class InitLimits:
    #: the first finite loss must be among the first rows up to this index to be the model's
    #: starting point (a log that starts later has already trained; rule of thumb, untuned)
    first_row_max: int = 2
    #: a starting loss this many times the chance-level cross-entropy: logits too large at init
    #: (an untrained softmax sits at chance; rule of thumb, untuned) ...
    loss_over_chance: float = 3
    #: ... and at least this many nats above it (a 3x on a 2-class chance of 0.69 is still small)
    nats_over_chance: float = 2
    #: an activation this large at step 0 (fp32) is no healthy init's (fan-in-scaled weights keep
    #: activations near 1; rule of thumb, untuned) ...
    step0_activation: float = 1e4
    #: ... from inputs below this share of it (large inputs make large activations legitimately)
    input_share: float = 1e-2
    #: numbered blocks needed to call a family of siblings a residual stack
    min_blocks: int = 4
    #: RMS growth from the first to the last block of the stack: the missing 1/sqrt(2*layers)
    #: residual scaling (GPT-2 paper's init; rule of thumb for the ratio, untuned)
    residual_growth: float = 10


LIMITS = InitLimits()


@detector("bad_init", needs=("loss",))
def bad_init(run: Run, q: Quantities) -> list[Finding]:
    """The model starts in a bad place.

    - initial loss `loss_over_chance` times the chance-level cross-entropy (ln vocab / ln classes,
      known from the model config or task) and `nats_over_chance` above it: logits too large at init;
    - activations at step 0 beyond `step0_activation` (fp32) from inputs that are not themselves
      that large;
    - per-layer RMS at step 0 growing `residual_growth` times from the first to the last block of
      a residual stack (missing 1/sqrt(2*layers) residual scaling).
    (The numbers are `InitLimits`' fields.)
    Suppressed: non-finite inputs at step 0 (that is data), a loss below chance (pretrained).
    """
    out: list[Finding] = []
    high = _loss_over_chance(run, q)
    if high is not None:
        out.append(high)
    if run.event("batch_nonfinite_detail").get(int(q.steps[0])) is not None:
        return out
    if not out:
        large = _step0_activation(run, q)
        if large is not None:
            out.append(large)
    growth = _residual_growth(run)
    if growth is not None and not out:
        first, last, r, s = growth
        out.append(
            Finding(
                cause="bad_init",
                symptom="divergence",
                severity="warning",
                confidence=0.6,
                step=s,
                layer=last,
                evidence=[Msg("init.residual_growth", step=s, ratio=r, first=first, last=last)],
                fixes=as_fixes([Msg("init.fix_residual_scaling")]),
            )
        )
    return out


def start_over_chance(run: Run, q: Quantities) -> tuple[float, float] | None:
    """(first loss, chance) when the run's first logged loss is `loss_over_chance` x the chance-level
    cross-entropy its configuration names and `nats_over_chance` above it: logits too large at init."""
    lf = q.finite_loss
    chance = run.meta.get("chance_loss")
    if not (lf.size and isinstance(chance, (int, float)) and chance > 0 and int(lf[0]) <= LIMITS.first_row_max):
        return None
    l0 = float(q.loss[lf[0]])
    if not (l0 >= LIMITS.loss_over_chance * chance and l0 >= chance + LIMITS.nats_over_chance):
        return None
    return l0, float(chance)


def _loss_over_chance(run: Run, q: Quantities) -> Finding | None:
    """The first loss far above the chance-level loss (logits too large at init). Apart from
    `bad_init` to keep it short."""
    start = start_over_chance(run, q)
    if start is None:
        return None
    lf = q.finite_loss
    l0, chance = start
    ev: list[str] = [Msg("init.loss_above_chance", loss=l0, chance=float(chance), ratio=l0 / chance)]
    init_range = (run.meta.get("model") or {}).get("initializer_range")
    fixes: list[FixLike] = [Msg("init.fix_small_std")]
    if init_range is not None:
        ev.append(Msg("init.initializer_range", value=str(init_range)))
    return Finding(
        cause="bad_init",
        symptom="divergence",
        severity="critical",
        confidence=0.85,
        step=int(q.steps[lf[0]]),
        evidence=ev,
        fixes=as_fixes(fixes),
    )


def _step0_activation(run: Run, q: Quantities) -> Finding | None:
    """Activations at step 0 beyond `step0_activation` from inputs that are not themselves that
    large. Apart from `bad_init` to keep it short."""
    act = run.col("act_absmax")
    inp = run.col("input_absmax")
    if not (np.isfinite(act[:1]).any() and act[0] > LIMITS.step0_activation):
        return None
    src = inp[0] if np.isfinite(inp[0]) else 0.0
    if not src < LIMITS.input_share * act[0]:
        return None
    layer = run.event("act_absmax_layer").get(int(q.steps[0]))
    return Finding(
        cause="bad_init",
        symptom="divergence",
        severity="warning",
        confidence=0.7,
        step=int(q.steps[0]),
        layer=layer if isinstance(layer, str) else None,
        evidence=[Msg("init.activation_at_step0", layer=str(layer), act=float(act[0]), input=float(src))],
        fixes=as_fixes([Msg("init.fix_fan_in")]),
    )


def _residual_growth(run: Run) -> tuple[str, str, float, int] | None:
    """RMS of numbered blocks (h.0, h.1, ... / layers.0, ...) at the first sampled step."""
    L = run.layers
    if L is None or "act_rms" not in L.stats or L.stats["act_rms"].shape[0] == 0:
        return None
    rms = L.stats["act_rms"][0].astype(np.float64)
    import re

    blocks = [
        (int(m.group(2)), i)
        for i, n in enumerate(L.modules)
        if (m := re.fullmatch(r"(.*\.)?(\d+)", n)) is not None and np.isfinite(rms[i])
    ]
    if len(blocks) < LIMITS.min_blocks:
        return None
    # keep the largest family of numbered siblings (the residual stack)
    fams: dict[str, list[tuple[int, int]]] = {}
    for k, i in blocks:
        fams.setdefault(L.modules[i].rsplit(".", 1)[0] if "." in L.modules[i] else "", []).append((k, i))
    fam = max(fams.values(), key=len)
    if len(fam) < LIMITS.min_blocks:
        return None
    fam.sort()
    a, b = rms[fam[0][1]], rms[fam[-1][1]]
    if a <= 0 or not np.isfinite(b):
        return None
    r = float(b / a)
    if r < LIMITS.residual_growth:
        return None
    return L.modules[fam[0][1]], L.modules[fam[-1][1]], r, int(L.steps[0])
