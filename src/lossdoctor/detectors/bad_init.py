"""Bad initialisation: a starting loss far above chance, or extreme activations from step 0."""

from __future__ import annotations

import numpy as np

from ..findings import Finding, FixLike, as_fixes
from ..messages import Msg
from ..records import Run
from .base import detector
from .quantities import Quantities


@detector("bad_init", needs=("loss",))
def bad_init(run: Run, q: Quantities) -> list[Finding]:
    """The model starts in a bad place.

    - initial loss >= 3x the chance-level cross-entropy (ln vocab / ln classes, known from the
      model config or task) and >= chance + 2 nats: logits too large at init;
    - activations at step 0 beyond 1e4 (fp32) from inputs that are not themselves that large;
    - per-layer RMS at step 0 growing >= 10x from the first to the last block of a residual stack
      (missing 1/sqrt(2*layers) residual scaling).
    Suppressed: non-finite inputs at step 0 (that is data), a loss below chance (pretrained).
    """
    out: list[Finding] = []
    lf = q.finite_loss
    chance = run.meta.get("chance_loss")
    if lf.size and isinstance(chance, (int, float)) and chance > 0 and int(lf[0]) <= 2:
        l0 = float(q.loss[lf[0]])
        if l0 >= 3 * chance and l0 >= chance + 2:
            ev: list[str] = [Msg("init.loss_above_chance", loss=l0, chance=float(chance), ratio=l0 / chance)]
            init_range = (run.meta.get("model") or {}).get("initializer_range")
            fixes: list[FixLike] = [Msg("init.fix_small_std")]
            if init_range is not None:
                ev.append(Msg("init.initializer_range", value=str(init_range)))
            out.append(Finding(cause="bad_init", symptom="divergence", severity="critical", confidence=0.85,
                               step=int(q.steps[lf[0]]), evidence=ev, fixes=as_fixes(fixes)))
    if run.event("batch_nonfinite_detail").get(int(q.steps[0])) is not None:
        return out
    act = run.col("act_absmax")
    inp = run.col("input_absmax")
    if not out and np.isfinite(act[:1]).any() and act[0] > 1e4:
        src = inp[0] if np.isfinite(inp[0]) else 0.0
        if src < 1e-2 * act[0]:
            layer = run.event("act_absmax_layer").get(int(q.steps[0]))
            out.append(Finding(
                cause="bad_init", symptom="divergence", severity="warning", confidence=0.7,
                step=int(q.steps[0]), layer=layer if isinstance(layer, str) else None,
                evidence=[Msg("init.activation_at_step0", layer=str(layer), act=float(act[0]), input=float(src))],
                fixes=as_fixes([Msg("init.fix_fan_in")])))
    growth = _residual_growth(run)
    if growth is not None and not out:
        first, last, r, s = growth
        out.append(Finding(
            cause="bad_init", symptom="divergence", severity="warning", confidence=0.6, step=s, layer=last,
            evidence=[Msg("init.residual_growth", step=s, ratio=r, first=first, last=last)],
            fixes=as_fixes([Msg("init.fix_residual_scaling")])))
    return out


def _residual_growth(run: Run) -> tuple[str, str, float, int] | None:
    """RMS of numbered blocks (h.0, h.1, ... / layers.0, ...) at the first sampled step."""
    L = run.layers
    if L is None or "act_rms" not in L.stats or L.stats["act_rms"].shape[0] == 0:
        return None
    rms = L.stats["act_rms"][0].astype(np.float64)
    import re

    blocks = [(int(m.group(2)), i) for i, n in enumerate(L.modules)
              if (m := re.fullmatch(r"(.*\.)?(\d+)", n)) is not None and np.isfinite(rms[i])]
    if len(blocks) < 4:
        return None
    # keep the largest family of numbered siblings (the residual stack)
    fams: dict[str, list[tuple[int, int]]] = {}
    for k, i in blocks:
        fams.setdefault(L.modules[i].rsplit(".", 1)[0] if "." in L.modules[i] else "", []).append((k, i))
    fam = max(fams.values(), key=len)
    if len(fam) < 4:
        return None
    fam.sort()
    a, b = rms[fam[0][1]], rms[fam[-1][1]]
    if a <= 0 or not np.isfinite(b):
        return None
    r = float(b / a)
    if r < 10:
        return None
    return L.modules[fam[0][1]], L.modules[fam[-1][1]], r, int(L.steps[0])
