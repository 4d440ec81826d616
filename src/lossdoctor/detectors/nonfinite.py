"""Where a non-finite value entered: the data, an attention softmax, or an overflowing activation.

These read the per-step facts the monitor records at the moment things go wrong (which samples of
the batch held NaN/Inf, which module's output went non-finite first in forward order), so they
name the cause directly instead of inferring it from the loss curve.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..findings import Finding, Fix, FixLike, as_fixes
from ..messages import Msg
from ..records import Run
from .base import detector
from .quantities import Quantities

ATTENTION = re.compile(r"(attn|attention|self_att|cross_att|mha|softmax)", re.IGNORECASE)
FP16_MAX = 65504.0


@dataclass(frozen=True)
class NonfiniteLimits:
    #: non-finite batches this many steps apart are separate incidents (the monitor re-arms)
    incident_gap: int = 50
    #: at most this many bad-batch findings per run
    max_incidents: int = 5
    #: earlier batches needed for the median an absurd batch is compared with
    min_prior_batches: int = 3
    #: an input absmax above this (and `absurd_over_median` times the earlier median) at the
    #: step training broke is absurd data; image pixels in [0, 255] are not (rule of thumb)
    absurd_input: float = 1e3
    absurd_over_median: float = 100
    #: floor of that median (a batch of zeros has median 0)
    median_floor: float = 1e-12
    #: the loss went non-finite within this many steps of the bad batch: the batch broke it
    broke_within: int = 2
    #: steps listed in the incident's evidence before "..."
    steps_shown: int = 8
    #: a peak act_range_frac above this: the activations are fp16 (fp32/bf16 ranges end at
    #: ~3e38: a healthy model's activations are a vanishing share of it)
    fp16_range_share: float = 1e-20
    #: prior rows whose largest activation the evidence reports
    prior_rows: int = 50
    #: first recorded steps that say which dtype the activations use
    dtype_rows: int = 3
    #: the loss rose this many times before the overflow, or an update ratio reached this: the
    #: updates blew the weights up (lr_too_high's story; rule of thumb, untuned)
    blown_up_loss: float = 10
    blown_up_update: float = 0.1
    #: the gradient-growth test (as gradients.grad_explosion's): finite norms needed, the early
    #: median's bounds, the prelude, and the growth over the early median
    growth_min_points: int = 6
    early_min: int = 3
    early_max: int = 20
    prelude_steps: int = 25
    growth: float = 10
    #: fp16 activations above this share of the range are near overflow (a warning; rule of thumb)
    near_overflow_share: float = 0.25


LIMITS = NonfiniteLimits()


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


@detector("nonfinite_data", needs_any=("batch_nonfinite", "input_absmax"), hint=Msg("hint.batch"))
def nonfinite_data(run: Run, q: Quantities) -> list[Finding]:
    """NaN/Inf in a batch (which key, which samples), or a batch with absurd magnitude at the step
    training broke.

    Suppressions: a non-finite batch whose NaN never reaches the loss is a warning, not critical;
    an outlier magnitude counts only when it coincides with the first non-finite step and is
    `absurd_over_median` times the median of earlier batches (`NonfiniteLimits`).
    """
    out: list[Finding] = []
    detail: dict[int, Any] = run.event("batch_nonfinite_detail")
    if detail:
        for incident in _incidents(sorted(detail), gap=LIMITS.incident_gap)[: LIMITS.max_incidents]:
            out.append(_bad_batch_finding(run, q, detail, incident))
        return out
    # an absurd-magnitude batch at the step where training broke
    if q.first_bad is None or not run.has("input_absmax"):
        return out
    a = run.col("input_absmax")
    i = q.first_bad
    prev = a[:i][np.isfinite(a[:i])]
    if prev.size >= LIMITS.min_prior_batches and np.isfinite(a[i]):
        med = float(np.median(prev))
        if a[i] > LIMITS.absurd_input and a[i] > LIMITS.absurd_over_median * max(med, LIMITS.median_floor):
            s = int(q.steps[i])
            out.append(
                Finding(
                    cause="nonfinite_data",
                    symptom="nonfinite",
                    severity="critical",
                    confidence=0.8,
                    step=s,
                    batch=s,
                    evidence=[
                        Msg(
                            "nonfinite.batch_absurd",
                            step=s,
                            absmax=float(a[i]),
                            ratio=float(a[i] / max(med, LIMITS.median_floor)),
                            median=med,
                        ),
                        Msg("nonfinite.broke_at_that_step"),
                    ],
                    fixes=as_fixes([Msg("nonfinite.fix_inspect_batch")]),
                )
            )
    return out


def _value(e: dict[str, Any]) -> Any:
    """What a forward value became: "inf"/"nan" as recorded, else the word for non-finite."""
    v = e.get("value")
    return v if isinstance(v, str) and v in ("inf", "-inf", "nan") else Msg("word.nonfinite")


def _int(v: Any, default: int) -> int:
    return int(v) if isinstance(v, (int, float)) and not isinstance(v, bool) and v == v else default


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
    keys = [f"'{k}'" for k in d] if isinstance(d, dict) else Msg("nonfinite.the_batch")
    broke = q.first_bad_step is not None and s <= q.first_bad_step <= s + LIMITS.broke_within
    i = _row(q, s)
    loss_at = q.loss[i] if i < q.n else np.nan
    critical = broke or (i < q.n and run.logged("loss")[i] and not np.isfinite(loss_at))
    ev: list[str] = [Msg("nonfinite.batch_holds", step=s, keys=keys, samples=str(samples[:16]) if samples else "?")]
    packed = [e for e in run.event("batch_nonfinite_examples").get(s) or [] if isinstance(e, dict)][:32]
    if packed:  # the rows are packed: name the examples inside them
        ev.append(
            Msg(
                "nonfinite.packed_examples",
                examples=[
                    Msg(
                        "labels.example_in_row",
                        row=e.get("row"),
                        example=e.get("example"),
                        start=e.get("start"),
                        end=e.get("end"),
                    )
                    for e in packed[:4]
                ],
            )
        )
    if len(steps) > 1:
        ev.append(
            Msg(
                "nonfinite.batches_in_incident",
                n=len(steps),
                steps=str(steps[: LIMITS.steps_shown]) + ("..." if len(steps) > LIMITS.steps_shown else ""),
            )
        )
    if critical:
        ev.append(Msg("nonfinite.broke_when_used", step=q.first_bad_step if broke else s))
    else:
        ev.append(Msg("nonfinite.loss_stayed_finite"))
    return Finding(
        cause="nonfinite_data",
        symptom="nonfinite",
        severity="critical" if critical else "warning",
        confidence=0.95 if critical else 0.7,
        step=s,
        batch=s,
        samples=samples,
        evidence=ev,
        fixes=as_fixes([Msg("nonfinite.fix_drop_samples", keys=keys)]),
        examples=[{k: e[k] for k in ("key", "row", "example", "start", "end") if k in e} for e in packed] or None,
    )


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
    if _updates_broke_it(run, q, i, frac, overflow):
        return []
    ev: list[str] = [
        Msg(
            "nonfinite.forward_became",
            step=s,
            layer=layer,
            value=_value(e),
            index=_int(e.get("index"), 0) + 1,
            of=e.get("of", "?"),
        )
    ]
    more, beyond_fp16 = _overflow_context(run, q, i, frac)
    ev += more
    overflow = overflow or beyond_fp16
    fixes: list[FixLike] = []
    if overflow:
        fixes.append(Fix.fp32(Msg("nonfinite.fix_layer_out_of_fp16", layer=layer), module=layer))
        fixes.append(Msg("nonfinite.fix_normalise_activations"))
    else:
        fixes.append(Msg("nonfinite.fix_find_nan_op", layer=layer))
    return [
        Finding(
            cause="activation_overflow",
            symptom="nonfinite",
            severity="critical",
            confidence=0.85 if overflow else 0.6,
            step=s,
            batch=s,
            layer=layer,
            evidence=ev,
            fixes=as_fixes(fixes),
        )
    ]


def _updates_broke_it(run: Run, q: Quantities, i: int, frac: np.ndarray, overflow: bool) -> bool:
    """An update, not the activations, broke row `i`: the weights grew with exploding gradients,
    were already non-finite, or (an fp32/bf16 Inf) were blown up by the updates before. Apart from
    `activation_overflow` to keep it short."""
    if _grew_before(q, i):
        return True  # weights grew with exploding gradients: that is grad_explosion's story
    pn = run.col("param_norm")[:i][run.logged("param_norm")[:i]]
    if not np.isfinite(pn).all():
        return True  # the weights were already non-finite: a module fed NaN weights did not overflow
    # an fp32/bf16 activation past 3e38 after updates that blew the weights up is the
    # learning rate's doing (lr_too_high / grad_explosion), not a range problem of the dtype
    return bool(overflow and i >= 1 and _wide_dtype(frac[:i]) and _blew_up_before(run, q, i))


def _overflow_context(run: Run, q: Quantities, i: int, frac: np.ndarray) -> tuple[list[str], bool]:
    """The evidence around a forward fault at row `i`: in an fp16 run, a batch beyond fp16's range
    (then it is an overflow: the second value), the largest activation before, what the GradScaler
    made of it. Apart from `activation_overflow` to keep it short."""
    ev: list[str] = []
    beyond_fp16 = False
    ia = run.col("input_absmax")
    # fp16 activations: a share of the range no fp32/bf16 model reaches, or a GradScaler (fp16's tool)
    fp16 = bool(run.meta.get("scaler")) or (
        np.isfinite(frac[: i + 1]).any()
        and float(np.nanmax(np.where(np.isfinite(frac[: i + 1]), frac[: i + 1], 0))) > LIMITS.fp16_range_share
    )
    if i < q.n and np.isfinite(ia[i]) and ia[i] > FP16_MAX and fp16:
        ev.append(Msg("nonfinite.batch_beyond_fp16", absmax=float(ia[i])))
        beyond_fp16 = True
    prior = frac[max(0, i - LIMITS.prior_rows) : i]
    prior = prior[np.isfinite(prior)]
    if prior.size:
        ev.append(Msg("nonfinite.largest_activation", pct=float(prior.max()) * 100))
    if q.skipped[i:].any() and run.has("scale"):
        # what the GradScaler made of it: the scale collapse is this overflow's consequence
        sc = run.col("scale")[i:]
        sc = sc[np.isfinite(sc)]
        n_skip = int(q.skipped[i:].sum())
        if sc.size:
            ev.append(
                Msg(
                    "nonfinite.scaler_after_overflow",
                    skipped=n_skip,
                    n=q.n - i,
                    start=float(sc[0]),
                    end=float(sc.min()),
                )
            )
    return ev, beyond_fp16


def _wide_dtype(frac: np.ndarray) -> bool:
    """The first activations used a vanishing share of their dtype's range: fp32/bf16, not fp16.
    Judged on the first recorded steps, before a blow-up pushed them towards the range."""
    f = frac[np.isfinite(frac)][: LIMITS.dtype_rows]
    return f.size > 0 and float(f.max()) < LIMITS.fp16_range_share


def _blew_up_before(run: Run, q: Quantities, i: int) -> bool:
    ur = run.col("update_ratio")[:i]
    ur = ur[np.isfinite(ur)]
    lf = q.finite_loss[q.finite_loss < i]
    rose = lf.size >= 2 and float(q.loss[lf[-1]]) > LIMITS.blown_up_loss * float(q.loss[lf[0]])
    return rose or (ur.size > 0 and float(ur.max()) >= LIMITS.blown_up_update)


def _grew_before(q: Quantities, i: int) -> bool:
    gn = q.grad_norm[:i]
    fin = gn[np.isfinite(gn)]
    if fin.size < LIMITS.growth_min_points:
        return False
    base = float(np.median(fin[: max(LIMITS.early_min, min(LIMITS.early_max, fin.size // 5))]))
    return base > 0 and float(fin[-LIMITS.prelude_steps :].max()) >= LIMITS.growth * base


@detector("activation_range", needs=("act_range_frac",))
def activation_near_overflow(run: Run, q: Quantities) -> list[Finding]:
    """Low-precision activations approaching their dtype's maximum (before anything overflowed).
    Only fires for fp16-range activations above `near_overflow_share` of the range
    (`NonfiniteLimits`); fp32/bf16 ranges are not reachable by healthy models."""
    frac = run.col("act_range_frac")
    ok = np.isfinite(frac) & (frac >= LIMITS.near_overflow_share) & (frac <= 1.0)
    if not ok.any() or run.event("fwd_first_nonfinite"):
        return []
    i = int(np.flatnonzero(ok)[0])
    s = int(q.steps[i])
    layer = run.event("act_absmax_layer").get(s)
    absmax = run.col("act_absmax")[i]
    return [
        Finding(
            cause="activation_overflow",
            symptom="spike",
            severity="warning",
            confidence=0.6,
            step=s,
            layer=layer if isinstance(layer, str) else None,
            evidence=[Msg("nonfinite.activation_near_max", step=s, absmax=float(absmax), pct=float(frac[i]) * 100)],
            fixes=as_fixes([Msg("nonfinite.fix_layer_fp32")]),
        )
    ]


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
    ev: list[str] = [Msg("nonfinite.attention_became", step=s, layer=layer, value=_value(e))]
    fixes: list[FixLike] = []
    if empty:
        ev.append(Msg("nonfinite.empty_attention_mask", samples=str(list(empty)[:16])))
        fixes.append(Msg("nonfinite.fix_drop_empty_sequences"))
    elif e.get("value") == "inf":
        ev.append(Msg("nonfinite.attention_logits_overflow"))
        fixes.append(Msg("nonfinite.fix_attention_fp32"))
    else:
        fixes.append(Msg("nonfinite.fix_fully_masked_rows"))
    fixes.append(Msg("nonfinite.fix_replay"))
    return [
        Finding(
            cause="attention_overflow",
            symptom="nonfinite",
            severity="critical",
            confidence=0.9 if empty else 0.8,
            step=s,
            batch=s,
            layer=layer,
            samples=[int(x) for x in empty] if empty else None,
            evidence=ev,
            fixes=as_fixes(fixes),
        )
    ]
