"""Where a non-finite value entered: the data, an attention softmax, or an overflowing activation.

These read the per-step facts the monitor records at the moment things go wrong (which samples of
the batch held NaN/Inf, which module's output went non-finite first in forward order), so they
name the cause directly instead of inferring it from the loss curve.
"""

from __future__ import annotations

import re
from typing import Any

import numpy as np

from ..findings import Finding
from ..records import Run
from .base import detector, fmt
from .quantities import Quantities

ATTENTION = re.compile(r"(attn|attention|self_att|cross_att|mha|softmax)", re.IGNORECASE)
FP16_MAX = 65504.0


def is_attention(layer: str | None, run: Run) -> bool:
    if not layer:
        return False
    if ATTENTION.search(layer):
        return True
    if run.layers is not None and run.layers.types and layer in run.layers.modules:
        return bool(ATTENTION.search(run.layers.types[run.layers.modules.index(layer)]))
    return False


def _row(q: Quantities, step: int) -> int:
    return int(np.searchsorted(q.steps, step))


@detector("nonfinite_data", needs_any=("batch_nonfinite", "input_absmax"),
          hint="pass batch= to mon.step to check the data")
def nonfinite_data(run: Run, q: Quantities) -> list[Finding]:
    """NaN/Inf in a batch (which key, which samples), or a batch with absurd magnitude at the step
    training broke.

    Suppressions: a non-finite batch whose NaN never reaches the loss is a warning, not critical;
    an outlier magnitude counts only when it coincides with the first non-finite step and is 100x
    the median of earlier batches (image pixels in [0, 255] are not absurd).
    """
    out: list[Finding] = []
    detail: dict[int, Any] = run.event("batch_nonfinite_detail")
    if detail:
        for incident in _incidents(sorted(detail), gap=50)[:5]:
            out.append(_bad_batch_finding(run, q, detail, incident))
        return out
    # an absurd-magnitude batch at the step where training broke
    if q.first_bad is None or not run.has("input_absmax"):
        return out
    a = run.col("input_absmax")
    i = q.first_bad
    prev = a[:i][np.isfinite(a[:i])]
    if prev.size >= 3 and np.isfinite(a[i]):
        med = float(np.median(prev))
        if a[i] > 1e3 and a[i] > 100 * max(med, 1e-12):
            s = int(q.steps[i])
            out.append(Finding(
                cause="nonfinite_data", symptom="nonfinite", severity="critical", confidence=0.8,
                step=s, batch=s,
                evidence=[f"the batch of step {s} has max |x| = {fmt(a[i])}, {fmt(a[i] / max(med, 1e-12))}x "
                          f"the median {fmt(med)} of the earlier batches",
                          f"training went non-finite at that step"],
                fixes=["inspect that batch; clip or standardise features (e.g. (x - mean) / std per "
                       "feature) and reject outliers in the data pipeline"]))
    return out


def _incidents(steps: list[int], gap: int) -> list[list[int]]:
    """Group steps into incidents: a new incident starts after `gap` clean steps (re-arming)."""
    groups: list[list[int]] = []
    for s in steps:
        if groups and s - groups[-1][-1] <= gap:
            groups[-1].append(s)
        else:
            groups.append([s])
    return groups


def _bad_batch_finding(run: Run, q: Quantities, detail: dict[int, Any], steps: list[int]) -> Finding:
    s = steps[0]
    d = detail[s]
    samples = sorted({int(i) for v in d.values() for i in v}) if isinstance(d, dict) else None
    keys = ", ".join(f"'{k}'" for k in d) if isinstance(d, dict) else "the batch"
    broke = q.first_bad_step is not None and s <= q.first_bad_step <= s + 2
    i = _row(q, s)
    loss_at = q.loss[i] if i < q.n else np.nan
    critical = broke or (i < q.n and run.logged("loss")[i] and not np.isfinite(loss_at))
    ev = [f"the batch of step {s} holds NaN/Inf in {keys}, sample(s) {samples[:16] if samples else '?'}"]
    if len(steps) > 1:
        ev.append(f"{len(steps)} batches in this incident held non-finite values (steps {steps[:8]}"
                  f"{'...' if len(steps) > 8 else ''})")
    if critical:
        ev.append(f"training went non-finite at step {q.first_bad_step if broke else s}, "
                  "right when that batch was used")
    else:
        ev.append("the loss stayed finite: the value was masked or unused, but it is still bad data")
    return Finding(
        cause="nonfinite_data", symptom="nonfinite", severity="critical" if critical else "warning",
        confidence=0.95 if critical else 0.7, step=s, batch=s, samples=samples, evidence=ev,
        fixes=[f"drop or repair those samples: filter with torch.isfinite(x).flatten(1).all(1) in the "
               f"collate function, and fix the decoding/normalisation that produced them ({keys})"])


def _first_forward_fault(run: Run, q: Quantities) -> tuple[int, dict[str, Any]] | None:
    """The first step whose forward pass produced a non-finite value, with that event."""
    ev = run.event("fwd_first_nonfinite")
    if not ev:
        return None
    s = min(ev)
    return s, ev[s]


@detector("activation_overflow", needs=("fwd_first_nonfinite",))
def activation_overflow(run: Run, q: Quantities) -> list[Finding]:
    """A module's forward output became Inf (beyond its dtype's range) or NaN from a finite input,
    outside attention. Suppressed when the batch itself held non-finite values (that is data), and
    when the weights were already non-finite before that step (an update broke them: the
    optimizer's or the LR's story, not the activations')."""
    found = _first_forward_fault(run, q)
    if found is None:
        return []
    s, e = found
    layer = e.get("layer")
    if run.event("batch_nonfinite_detail").get(s) or is_attention(layer, run):
        return []
    if e.get("where") == "input" and e.get("index", 1) == 0:
        return []  # the very first value of the forward pass was bad: that is the model's input
    i = _row(q, s)
    frac = run.col("act_range_frac")
    overflow = e.get("value") == "inf"
    if _grew_before(q, i):
        return []  # weights grew with exploding gradients: that is grad_explosion's story
    pn = run.col("param_norm")[:i][run.logged("param_norm")[:i]]
    if not np.isfinite(pn).all():
        return []  # the weights were already non-finite: a module fed NaN weights did not overflow
    if overflow and i >= 1 and _wide_dtype(frac[:i]) and _blew_up_before(run, q, i):
        # an fp32/bf16 activation past 3e38 after updates that blew the weights up is the
        # learning rate's doing (lr_too_high / grad_explosion), not a range problem of the dtype
        return []
    ev = [f"at step {s} the forward output of {layer} became {e.get('value', 'non-finite')} "
          f"(event {e.get('index', 0) + 1} of {e.get('of', '?')} in forward order; every earlier "
          "module output was finite)"]
    ia = run.col("input_absmax")
    # fp16 activations: a share of the range no fp32/bf16 model reaches, or a GradScaler (fp16's tool)
    fp16 = bool(run.meta.get("scaler")) or (np.isfinite(frac[: i + 1]).any() and float(
        np.nanmax(np.where(np.isfinite(frac[: i + 1]), frac[: i + 1], 0))) > 1e-20)
    if i < q.n and np.isfinite(ia[i]) and ia[i] > FP16_MAX and fp16:
        ev.append(f"the batch holds values up to {fmt(float(ia[i]))}, beyond fp16's 65504: autocast turns "
                  "them into inf when it casts the input to fp16")
        overflow = True
    prior = frac[max(0, i - 50): i]
    prior = prior[np.isfinite(prior)]
    if prior.size:
        ev.append(f"largest activation before that used {fmt(float(prior.max()) * 100)}% of its dtype's range")
    if q.skipped[i:].any() and run.has("scale"):
        # what the GradScaler made of it: the scale collapse is this overflow's consequence
        sc = run.col("scale")[i:]
        sc = sc[np.isfinite(sc)]
        n_skip = int(q.skipped[i:].sum())
        if sc.size:
            ev.append(f"the GradScaler skipped {n_skip} of {q.n - i} steps from then on and its scale fell from "
                      f"{fmt(float(sc[0]))} to {fmt(float(sc.min()))}: no loss scale helps when the forward "
                      "pass itself overflows")
    fixes = []
    if overflow:
        fixes.append(f"keep {layer} out of fp16: wrap it in torch.autocast(device_type, enabled=False) and "
                     "feed it .float() inputs, or train with bf16 autocast (fp16 overflows at 65504)")
        fixes.append("scale activations down: add/verify normalisation (LayerNorm) before this layer")
    else:
        fixes.append(f"find the op in {layer} that makes NaN from finite inputs (0/0, log(0), sqrt(<0), "
                     "inf-inf); run lossdoctor.localize(model, batch, loss_fn) on the batch of this step "
                     "or pass replay_fn= to watch for the op-level answer")
    return [Finding(cause="activation_overflow", symptom="nonfinite", severity="critical",
                    confidence=0.85 if overflow else 0.6, step=s, batch=s, layer=layer, evidence=ev,
                    fixes=fixes)]


def _wide_dtype(frac: np.ndarray) -> bool:
    """The first activations used a vanishing share of their dtype's range: fp32/bf16, not fp16.
    Judged on the first recorded steps, before a blow-up pushed them towards the range."""
    f = frac[np.isfinite(frac)][:3]
    return f.size > 0 and float(f.max()) < 1e-20


def _blew_up_before(run: Run, q: Quantities, i: int) -> bool:
    ur = run.col("update_ratio")[:i]
    ur = ur[np.isfinite(ur)]
    lf = q.finite_loss[q.finite_loss < i]
    rose = lf.size >= 2 and float(q.loss[lf[-1]]) > 10 * float(q.loss[lf[0]])
    return rose or (ur.size > 0 and float(ur.max()) >= 0.1)


def _grew_before(q: Quantities, i: int) -> bool:
    gn = q.grad_norm[:i]
    fin = gn[np.isfinite(gn)]
    if fin.size < 6:
        return False
    base = float(np.median(fin[: max(3, min(20, fin.size // 5))]))
    return base > 0 and float(fin[-25:].max()) >= 10 * base


@detector("activation_range", needs=("act_range_frac",))
def activation_near_overflow(run: Run, q: Quantities) -> list[Finding]:
    """Low-precision activations approaching their dtype's maximum (before anything overflowed).
    Only fires for fp16-range activations above 25% of the range; fp32/bf16 ranges are not
    reachable by healthy models."""
    frac = run.col("act_range_frac")
    ok = np.isfinite(frac) & (frac >= 0.25) & (frac <= 1.0)
    if not ok.any() or run.event("fwd_first_nonfinite"):
        return []
    i = int(np.flatnonzero(ok)[0])
    s = int(q.steps[i])
    layer = run.event("act_absmax_layer").get(s)
    absmax = run.col("act_absmax")[i]
    return [Finding(cause="activation_overflow", symptom="spike", severity="warning", confidence=0.6,
                    step=s, layer=layer if isinstance(layer, str) else None,
                    evidence=[f"at step {s} an activation reached {fmt(absmax)}, {fmt(frac[i] * 100)}% of "
                              "its dtype's largest value (fp16: 65504)"],
                    fixes=["keep that layer in fp32 under autocast, or use bf16; check normalisation "
                           "before it"])]


@detector("attention_overflow", needs=("fwd_first_nonfinite",))
def attention_overflow(run: Run, q: Quantities) -> list[Finding]:
    """The first non-finite forward value came out of an attention module: a row of pure padding
    (softmax over all -inf = NaN) or logits beyond the dtype's range. Names the samples whose
    attention mask was empty when the batch carried one."""
    found = _first_forward_fault(run, q)
    if found is None:
        return []
    s, e = found
    layer = e.get("layer")
    if not is_attention(layer, run) or run.event("batch_nonfinite_detail").get(s):
        return []
    empty = run.event("mask_empty_sample_ids").get(s)
    ev = [f"at step {s} the forward output of attention module {layer} became "
          f"{e.get('value', 'non-finite')} while every module before it was finite"]
    fixes = []
    if empty:
        ev.append(f"sample(s) {list(empty)[:16]} of that batch have an all-zero attention_mask: a fully "
                  "masked row makes softmax(-inf, ..., -inf) = NaN")
        fixes.append("drop empty sequences from the data, and mask with torch.finfo(dtype).min instead "
                     "of -inf (or zero the fully-masked rows after softmax)")
    elif e.get("value") == "inf":
        ev.append("attention logits (QK^T) overflowed the dtype's range")
        fixes.append("compute attention scores in fp32 or scale them by 1/sqrt(head_dim); QK-layernorm "
                     "or a z-loss of 1e-4 keeps logits bounded (Wortsman et al. 2023, PaLM)")
    else:
        fixes.append("look for rows of the attention mask that mask every key (all padding), and use a "
                     "finite mask value (torch.finfo(dtype).min) instead of -inf")
    fixes.append("pass replay_fn= to watch (or call lossdoctor.localize) to get the exact op and sample")
    return [Finding(cause="attention_overflow", symptom="nonfinite", severity="critical",
                    confidence=0.9 if empty else 0.8, step=s, batch=s, layer=layer,
                    samples=[int(x) for x in empty] if empty else None, evidence=ev, fixes=fixes)]
