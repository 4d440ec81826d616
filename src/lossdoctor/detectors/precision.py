"""Low-precision traps: fp16 loss scaling out of control, updates below the weights' resolution,
an eps-dominated Adam, a loss computed in bf16."""

from __future__ import annotations

import numpy as np

from ..findings import Finding
from ..records import Run
from .base import detector, fmt
from .quantities import Quantities


def _runs_of_true(mask: np.ndarray) -> list[tuple[int, int]]:
    """[start, end) of each run of consecutive True values."""
    if not mask.any():
        return []
    m = np.concatenate([[False], mask, [False]]).astype(np.int8)
    d = np.diff(m)
    return list(zip(np.flatnonzero(d == 1), np.flatnonzero(d == -1)))


@detector("loss_scale_collapse", needs_any=("scale", "skipped"),
          hint="log the loss scale (GradScaler.get_scale()) to check fp16 loss scaling")
def loss_scale_collapse(run: Run, q: Quantities) -> list[Finding]:
    """The fp16 loss scale keeps falling and steps keep being skipped: no progress.

    Fires when the scale drops below 1, when >= 10 consecutive steps are skipped, or when half of
    the last 20+ steps were skipped. Suppressed: the normal few back-offs while GradScaler finds
    its level at the start (a streak < 10 that ends), and the single back-off every growth
    interval. A long streak at the start that ends (an absurd init_scale) is a warning.
    """
    if not (run.has("scale") or run.has("skipped")):
        return []
    if run.has("scale") and not run.has("skipped"):
        # only a scale column: skips are inferred from back-offs; a scaler that is not enabled
        # (scale constant 1 or absent) says nothing
        pass
    skipped = q.skipped
    if not skipped.any() or q.n < 5:
        return []
    scale = run.col("scale")
    streaks = _runs_of_true(skipped)
    longest = max(streaks, key=lambda r: r[1] - r[0])
    tail_n = max(20, q.n // 10)
    tail = skipped[-tail_n:]
    tail_frac = float(tail.mean()) if q.n >= 20 else 0.0
    fin_scale = scale[np.isfinite(scale)]
    below_one = fin_scale.size > 0 and float(fin_scale.min()) < 1.0
    long_streak = longest[1] - longest[0] >= 10
    if not (below_one or long_streak or tail_frac >= 0.5):
        return []
    ongoing = tail_frac >= 0.5 or (long_streak and longest[1] == q.n)
    start = longest[0] if long_streak else int(np.flatnonzero(skipped)[0])
    if ongoing:
        # onset: the start of the last streak of skips that reaches the end (allowing short gaps)
        start = streaks[-1][0]
        for a, b in reversed(streaks[:-1]):
            if start - b <= 3:
                start = a
            else:
                break
    s = int(q.steps[start])
    ev = []
    if fin_scale.size:
        s0 = scale[np.isfinite(scale)][0]
        smin = float(fin_scale.min())
        ev.append(f"loss scale fell from {fmt(float(s0))} to {fmt(smin)}")
    ev.append(f"{int(skipped.sum())} of {q.n} optimizer steps were skipped; longest streak "
              f"{longest[1] - longest[0]} steps (steps {int(q.steps[longest[0]])}-{int(q.steps[longest[1] - 1])})")
    fixes = []
    fwd = run.event("fwd_first_nonfinite")
    bwd = run.event("bwd_first_nonfinite")
    streak_end = int(q.steps[min(q.n - 1, longest[1] if not ongoing else q.n - 1)])
    fwd_in = [st for st in fwd if s <= st <= streak_end]
    layer = None
    if fwd_in:
        e = fwd[min(fwd_in)]
        layer = e.get("layer")
        ev.append(f"the forward pass itself overflows (first non-finite output: {layer}, "
                  f"{e.get('value')}), so no loss scale can help")
        fixes.append(f"keep {layer} out of fp16 (torch.autocast(..., enabled=False) around it, inputs "
                     ".float()), or switch autocast to bf16")
    else:
        bwd_in = [st for st in bwd if s <= st <= streak_end]
        if bwd_in:
            e = bwd[min(bwd_in)]
            layer, after = e.get("layer"), e.get("after")
            if after:
                ev.append(f"in backward the gradient is still finite at the output of {after} and non-finite "
                          f"at the output of {layer}: it goes bad inside {after}'s backward, even at small "
                          "scales (an op whose derivative is infinite there, e.g. sqrt or a norm at 0, or a "
                          "product beyond fp16's range)")
                fixes.append(f"guard the op in {after} whose derivative blows up (torch.sqrt(x + 1e-12) instead "
                             "of torch.sqrt(x), clamp(min=eps) before a norm or a division); "
                             f"lossdoctor.localize(model, batch, loss_fn) names the backward op")
                layer = after
            else:
                ev.append(f"gradients overflow in backward first at {layer} even at small scales")
        fixes.append("the gradients themselves overflow fp16: lower the learning rate or clip "
                     "gradients after scaler.unscale_(optimizer), or train with bf16 autocast")
    ia = run.col("input_absmax")
    if np.isfinite(ia).any() and float(np.nanmedian(ia)) > 1e3:
        ev.append(f"the inputs reach max |x| = {fmt(float(np.nanmedian(ia)))} (median over batches): "
                  "unnormalised features overflow fp16 in the first layer")
        fixes.insert(0, "normalise the input features (e.g. (x - mean) / std) before the model")
    if not ongoing and not below_one:
        init = float((run.meta.get("scaler", {}) or {}).get("init_scale", float("nan")))
        s0 = float(fin_scale[0]) if fin_scale.size else float("nan")
        if (init > 2.0**24 or s0 > 2.0**24) and longest[0] <= 1:
            ev.append("the streak ended: GradScaler spent those steps backing off from its initial scale")
            fixes = [f"start GradScaler at a sane scale: GradScaler(init_scale=2**16) "
                     f"(configured: {fmt(init if init == init else s0)})"] + fixes
        else:
            ev.append("the streak ended, but every skipped step is a lost update")
        return [Finding(cause="loss_scale_collapse", symptom="skipped_steps", severity="warning",
                        confidence=0.7, step=s, layer=layer, evidence=ev, fixes=fixes)]
    return [Finding(cause="loss_scale_collapse", symptom="skipped_steps", severity="critical",
                    confidence=0.9, step=s, layer=layer, evidence=ev, fixes=fixes)]


@detector("precision_stall", needs_any=("frozen_frac", "eps_dominated", "loss"))
def precision_stall(run: Run, q: Quantities) -> list[Finding]:
    """Updates below the resolution of the weights' dtype (bf16 keeps ~8 bits: relative updates
    under ~2^-8 round away), an eps-dominated Adam, or a loss computed in bf16.

    Frozen weights: median `frozen_frac` >= 0.5 over sampled steps (half of the low-precision
    entries with a non-zero gradient did not move). Eps: >= 90% of Adam's second-moment entries
    under (10 eps)^2 with a loss that stalls. bf16 loss: >= 90% of >= 20 losses exactly on the bf16
    grid 2^(floor(log2 L) - 7); values are checked only where the grid is 10x coarser than the
    log's rounding, so rounded logs cannot fake it.
    """
    out: list[Finding] = []
    ff = run.col("frozen_frac")
    ffv = ff[np.isfinite(ff)]
    if ffv.size >= 2:
        med = float(np.median(ffv[1:] if ffv.size > 2 else ffv))
        if med >= 0.5:
            i = int(np.flatnonzero(np.isfinite(ff))[0])
            dtypes = (run.meta.get("model") or {}).get("param_dtypes", {})
            lr = q.lr[np.isfinite(q.lr)]
            ev = [f"{fmt(med * 100)}% of the low-precision weight entries with a non-zero gradient did "
                  f"not change in an optimizer step (median over {ffv.size} sampled steps)"]
            if dtypes:
                ev.append(f"parameter dtypes: {dtypes}")
            if lr.size:
                ev.append(f"at lr {fmt(float(lr[-1]))} the per-step relative update is below bf16's "
                          "resolution (~2^-8 = 0.4%), so it rounds away")
            out.append(Finding(
                cause="precision_stall", symptom="stall", severity="critical" if med >= 0.9 else "warning",
                confidence=0.85, step=int(q.steps[i]), evidence=ev,
                fixes=["keep fp32 master weights: train fp32 parameters under torch.autocast(dtype=torch.bfloat16) "
                       "instead of model.to(torch.bfloat16)",
                       "or use an optimizer with stochastic rounding / Kahan summation for bf16 weights"]))
    ed = run.col("eps_dominated")
    edv = ed[np.isfinite(ed)]
    if edv.size >= 3 and float(np.median(edv)) >= 0.9 and _stalled(q):
        i = int(np.flatnonzero(np.isfinite(ed))[0])
        eps = _adam_eps(run)
        out.append(Finding(
            cause="precision_stall", symptom="stall", severity="warning", confidence=0.6,
            step=int(q.steps[i]),
            evidence=[f"{fmt(float(np.median(edv)) * 100)}% of Adam's second-moment entries have sqrt(v_hat) "
                      f"< 10*eps (eps={fmt(eps) if eps else '?'}): the update is eps-dominated and tiny",
                      "the loss is not improving"],
            fixes=["gradients are tiny relative to eps: lower eps (e.g. 1e-12 in fp32 state), check the loss "
                   "is not scaled down, and never keep Adam state in fp16 (eps=1e-8 rounds to 0)"]))
    grid = _bf16_loss_fraction(q)
    if grid is not None and grid[0] >= 0.9:
        out.append(Finding(
            cause="precision_stall", symptom="plateau", severity="warning", confidence=0.75,
            step=int(q.steps[q.finite_loss[0]]),
            evidence=[f"{grid[1]} of {grid[2]} losses lie exactly on the bf16 grid 2^(floor(log2 L)-7): the "
                      "loss is computed in bf16 (8 bits of mantissa), so small improvements are invisible "
                      "and its gradient is coarse"],
            fixes=["compute logits and loss in fp32: loss = F.cross_entropy(logits.float(), labels)"]))
    return out


def _adam_eps(run: Run) -> float | None:
    groups = ((run.meta.get("optimizer") or {}).get("groups") or [{}])
    e = groups[0].get("eps") if groups else None
    return float(e) if isinstance(e, (int, float)) else None


def _stalled(q: Quantities) -> bool:
    lf = q.finite_loss
    if lf.size < 10:
        return False
    k = max(3, lf.size // 5)
    return float(np.median(q.loss[lf[-k:]])) > 0.9 * float(np.median(q.loss[lf[:k]]))


def _bf16_loss_fraction(q: Quantities) -> tuple[float, int, int] | None:
    x = q.loss[q.finite_loss]
    x = x[x > 0]
    if x.size < 20:
        return None
    e = np.floor(np.log2(x))
    g = np.exp2(e - 7)
    # a log rounded to d decimals moves a value by up to 0.5e-d; only trust coarser grids
    usable = g > 10 * 5e-5
    if usable.sum() < 20:
        return None
    xs, gs = x[usable], g[usable]
    r = xs / gs
    on = np.abs(r - np.round(r)) * gs <= np.maximum(1e-7 * xs, 5e-5)
    return float(on.mean()), int(on.sum()), int(on.size)
