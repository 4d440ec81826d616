"""Label masking: everything masked (loss 0 or NaN, zero gradient), or nothing masked in SFT."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..findings import Finding, as_fixes
from ..messages import Msg
from ..records import Run
from .base import detector
from .quantities import Quantities


@dataclass(frozen=True)
class LabelMaskLimits:
    #: all-masked batches that are at least this share of the logged ones: critical, the run
    #: trains on almost nothing (an occasional one is a warning)
    most_batches: float = 0.5
    #: samples without a supervised position that are at least this share: a warning (rule of
    #: thumb, untuned)
    unsupervised_samples: float = 0.25
    #: packed examples without a supervised position at this share: a warning (the rows around
    #: them still have labels, so a smaller share is only worth an info; rule of thumb)
    unsupervised_examples: float = 0.05
    #: a median of the other losses above this: the run's loss is "well above 0" (an exact 0
    #: among them is then no converged loss)
    well_above_zero: float = 1e-2
    #: other losses needed for that median
    min_other_losses: int = 2
    #: exact zeros at the start: at least this many, in the first `head_rows` finite losses, the
    #: first ones all zero
    zeros_from_start: int = 3
    head_rows: int = 10
    #: the loss just before a drop to exactly 0 is at least this: 1000x what a four-decimal log
    #: can still print, so the 0 is no converged loss rounded down
    zero_drop_from: float = 0.05
    #: finite losses needed for the drop rule, and logged zeros after the drop
    drop_min_points: int = 4
    zeros_after_drop: int = 2
    #: an SFT run whose median ignored share is at most this masks (almost) nothing: the prompt
    #: is supervised (a chat template's prompt is far more than 2% of a row; rule of thumb)
    leak_ignored_share: float = 0.02
    #: at most this many packed spans are kept, and this many named in the evidence
    spans_kept: int = 32
    spans_shown: int = 3


LIMITS = LabelMaskLimits()


@detector("label_mask_empty", needs_any=("label_ignored_frac", "loss"))
def label_mask_empty(run: Run, q: Quantities) -> list[Finding]:
    """Every label position is the ignore index (-100): mean over zero tokens is NaN (or 0 with a
    sum reduction), and the gradient is zero.

    From the batch: batches with 100% ignored labels (critical when they are most batches or
    the loss broke there; warning for an occasional one) and samples with no supervised position
    (warning from `unsupervised_samples` of the samples on); in packed rows, the examples inside a
    row with no supervised position (warning from `unsupervised_examples` of them on: the row
    around them still has labels, so the per-row numbers look healthy). From the loss alone
    (foreign logs): a non-finite loss with a gradient norm of exactly 0 (only an empty mean does
    that), a loss of exactly 0.0 for the first `zeros_from_start` logged steps with a zero gradient
    norm, or a loss that falls from `zero_drop_from` or more to exactly 0.0 in one logged step and
    stays there (no gradient norm saying otherwise). Numbers: `LabelMaskLimits`.
    """
    fi = run.col("label_ignored_frac")
    if np.isfinite(fi).any():  # the batch's own label statistics outrank what the loss suggests
        return _batches_all_masked(run, q, fi) or _samples_unsupervised(run, q) or _examples_unsupervised(run, q)
    return (
        _nan_loss_zero_grad(run, q)
        or _zero_loss_nonfinite_grad(run, q)
        or _zero_loss_from_start(q)
        or _zero_loss_drop(run, q)
    )


def _batches_all_masked(run: Run, q: Quantities, fi: np.ndarray) -> list[Finding]:
    """Batches whose every label is ignored: critical when most batches are, or the loss broke there."""
    full = np.isfinite(fi) & (fi >= 1.0)
    if not full.any():
        return []
    logged = int(np.isfinite(fi).sum())
    i = int(np.flatnonzero(full)[0])
    s = int(q.steps[i])
    n_full = int(full.sum())
    most = n_full >= LIMITS.most_batches * logged
    broke = q.first_bad is not None and q.first_bad >= i and q.first_bad - i <= 1
    ev: list[str] = [Msg("labels.batches_all_masked", n_full=n_full, logged=logged, step=s)]
    loss_i = q.loss[i]
    if run.logged("loss")[i]:
        ev.append(Msg("labels.loss_over_zero_tokens", step=s, loss=float(loss_i)))
    gn = q.grad_norm[i]
    if np.isfinite(gn) and gn == 0:
        ev.append(Msg("labels.grad_exactly_zero"))
    return [
        Finding(
            cause="label_mask_empty",
            symptom="zero_loss" if np.isfinite(loss_i) else "nonfinite",
            severity="critical" if (most or broke) else "warning",
            confidence=0.95,
            step=s,
            batch=s,
            samples=_ids(run, s),
            evidence=ev,
            fixes=as_fixes([Msg("labels.fix_collator_masking"), Msg("labels.fix_truncation")]),
        )
    ]


def _samples_unsupervised(run: Run, q: Quantities) -> list[Finding]:
    """`unsupervised_samples` or more of the samples have no supervised position: they train nothing."""
    es = run.col("label_empty_samples")
    bs = run.col("batch_size")
    ok = np.isfinite(es) & np.isfinite(bs) & (bs > 0)
    if not ok.any():
        return []
    frac = float(es[ok].sum() / bs[ok].sum())
    if frac < LIMITS.unsupervised_samples:
        return []
    i = int(np.flatnonzero(ok & (es > 0))[0])
    s = int(q.steps[i])
    return [
        Finding(
            cause="label_mask_empty",
            symptom="slow_convergence",
            severity="warning",
            confidence=0.8,
            step=s,
            batch=s,
            samples=_ids(run, s),
            evidence=[Msg("labels.samples_unsupervised", pct=frac * 100)],
            fixes=as_fixes([Msg("labels.fix_drop_unsupervised_samples")]),
        )
    ]


def _examples_unsupervised(run: Run, q: Quantities) -> list[Finding]:
    """Examples inside packed rows whose labels are all ignored (`label_empty_examples`): usually a
    prompt that filled `max_length`, truncated before packing, so the response was cut away."""
    events = run.event("label_empty_examples")
    if not events:
        return []
    n = sum(int(e.get("n", 0)) for e in events.values() if isinstance(e, dict))
    pe = run.col("packed_examples")
    total = int(np.nansum(pe)) if np.isfinite(pe).any() else 0
    total = max(total, n, 1)
    s = min(events)
    at = [e for e in (events[s].get("at") or []) if isinstance(e, dict)][: LIMITS.spans_kept]
    frac = n / total
    ev: list[str] = [Msg("labels.examples_unsupervised", n=n, total=total, pct=frac * 100, step=s)]
    ev += [
        Msg(
            "labels.example_span",
            step=s,
            row=e.get("row"),
            example=e.get("example"),
            start=e.get("start"),
            end=e.get("end"),
        )
        for e in at[: LIMITS.spans_shown]
    ]
    return [
        Finding(
            cause="label_mask_empty",
            symptom="slow_convergence",
            severity="warning" if frac >= LIMITS.unsupervised_examples else "info",
            confidence=0.85,
            step=s,
            batch=s,
            samples=sorted({int(e["row"]) for e in at if "row" in e}) or None,
            examples=at,
            evidence=ev,
            fixes=as_fixes([Msg("labels.fix_packed_unsupervised")]),
        )
    ]


def _nan_loss_zero_grad(run: Run, q: Quantities) -> list[Finding]:
    """A non-finite loss whose gradient norm is exactly 0. A mean over zero supervised tokens is
    0/0 = NaN while nothing contributes a gradient; any other NaN in the forward pass makes NaN
    gradients, not zero ones."""
    empty = q.loss_logged & ~np.isfinite(q.loss) & run.logged("grad_norm") & (q.grad_norm == 0)
    if not empty.any():
        return []
    i = int(np.flatnonzero(empty)[0])
    s = int(q.steps[i])
    n = int(empty.sum())
    logged = int(q.loss_logged.sum())
    ev: list[str] = [
        Msg(
            "labels.nan_loss_zero_grad",
            loss=float(q.loss[i]),
            step=s,
            more=Msg("labels.n_of_logged_like_that", n=n, logged=logged) if n > 1 else "",
        )
    ]
    return [
        Finding(
            cause="label_mask_empty",
            symptom="nonfinite",
            severity="critical",
            confidence=0.8,
            step=s,
            batch=s,
            evidence=ev,
            fixes=as_fixes([Msg("labels.fix_masking_and_truncation"), Msg("labels.fix_log_label_stats")]),
        )
    ]


def _zero_loss_nonfinite_grad(run: Run, q: Quantities) -> list[Finding]:
    """A loss of exactly 0.0 with a non-finite gradient norm, in a run whose loss is otherwise well
    above 0: a loss normalised by a token count of zero (logged as 0, or sum/0 in backward). A bad
    batch makes a NaN or huge loss, never an exact 0."""
    zero_nan = q.loss_logged & (q.loss == 0.0) & run.logged("grad_norm") & ~np.isfinite(q.grad_norm)
    others = q.loss[q.loss_logged & np.isfinite(q.loss) & (q.loss != 0.0)]
    if not (
        zero_nan.any() and others.size >= LIMITS.min_other_losses and float(np.median(others)) > LIMITS.well_above_zero
    ):
        return []
    i = int(np.flatnonzero(zero_nan)[0])
    s = int(q.steps[i])
    n = int(zero_nan.sum())
    return [
        Finding(
            cause="label_mask_empty",
            symptom="nonfinite",
            severity="critical",
            confidence=0.75,
            step=s,
            batch=s,
            evidence=[
                Msg(
                    "labels.zero_loss_nonfinite_grad",
                    step=s,
                    grad=float(q.grad_norm[i]),
                    more=Msg("labels.n_steps_like_that", n=n) if n > 1 else "",
                    median=float(np.median(others)),
                )
            ],
            fixes=as_fixes([Msg("labels.fix_skip_unsupervised_batches"), Msg("labels.fix_masking_truncation_short")]),
        )
    ]


def _zero_loss_from_start(q: Quantities) -> list[Finding]:
    """The loss alone: exact zeros in the first logged steps, with a zero (or unlogged) gradient norm."""
    lf = q.finite_loss
    n0 = LIMITS.zeros_from_start
    if lf.size < n0:
        return []
    head = q.loss[lf[: LIMITS.head_rows]]
    zeros = head == 0.0
    if not (zeros.sum() >= n0 and zeros[:n0].all()):
        return []
    gn = q.grad_norm[lf[: LIMITS.head_rows]]
    gz = np.isfinite(gn) & (gn == 0)
    if np.isfinite(gn).any() and not gz.any():
        return []
    return [
        Finding(
            cause="label_mask_empty",
            symptom="zero_loss",
            severity="critical",
            confidence=0.6,
            step=int(q.steps[lf[0]]),
            evidence=[
                Msg(
                    "labels.zero_from_start",
                    zeros=int(zeros.sum()),
                    n=int(head.size),
                    grad=Msg("labels.and_grad_zero") if gz.any() else "",
                )
            ],
            fixes=as_fixes([Msg("labels.fix_some_labels_not_ignored")]),
        )
    ]


#: the loss just before a drop to exactly 0 is at least this (`LabelMaskLimits.zero_drop_from`)


def _zero_loss_drop(run: Run, q: Quantities) -> list[Finding]:
    """The loss alone: it falls from `zero_drop_from` or more to exactly 0.0 in one logged step and
    stays 0 for the rest of the log (`zeros_after_drop` logged steps or more), with no finite non-zero gradient norm there. A model does
    not learn that in one step: the batches there supervise no token (the mean over none is logged
    as 0), or those steps went NaN and the trainer logged them as 0 (the HF Trainer's
    `logging_nan_inf_filter`). A notebook's `Step | Training Loss` table shows nothing else."""
    lf = q.finite_loss
    zero = q.loss[lf] == 0.0
    if lf.size < LIMITS.drop_min_points or not zero[-1]:
        return []
    start = len(zero) - int(np.argmin(zero[::-1])) if not zero.all() else 0
    if start == 0 or len(zero) - start < LIMITS.zeros_after_drop or q.loss[lf[start - 1]] < LIMITS.zero_drop_from:
        return []
    gn = q.grad_norm[lf[start:]]
    if (np.isfinite(gn) & (gn > 0)).any():
        return []  # gradients flow: something else logs 0
    i = int(lf[start])
    s = int(q.steps[i])
    return [
        Finding(
            cause="label_mask_empty",
            symptom="zero_loss",
            severity="critical",
            confidence=0.5,
            step=s,
            batch=s,
            evidence=[
                Msg(
                    "labels.zero_drop",
                    before=float(q.loss[lf[start - 1]]),
                    s0=int(q.steps[lf[start - 1]]),
                    step=s,
                    n=len(zero) - start,
                )
            ],
            fixes=as_fixes([Msg("labels.fix_zero_drop_log_grad"), Msg("labels.fix_some_labels_not_ignored")]),
        )
    ]


def _ids(run: Run, s: int) -> list[int] | None:
    ids = run.event("label_empty_sample_ids").get(s)
    return [int(i) for i in ids] if ids else None


@detector("label_mask_leak", needs=("label_ignored_frac",))
def label_mask_leak(run: Run, q: Quantities) -> list[Finding]:
    """SFT run (task="sft") where (almost) no label position is masked: the prompt is supervised
    and the model learns to copy its input. Needs the task hint: in pre-training nothing is
    masked on purpose."""
    if run.meta.get("task") != "sft":
        return []
    fi = _ignored_beyond_packing(run)
    v = fi[np.isfinite(fi)]
    if v.size < 1 or float(np.median(v)) > LIMITS.leak_ignored_share:
        return []
    i = int(np.flatnonzero(np.isfinite(fi))[0])
    return [
        Finding(
            cause="label_mask_leak",
            symptom="plateau",
            severity="warning",
            confidence=0.7,
            step=int(q.steps[i]),
            batch=int(q.steps[i]),
            evidence=[Msg("labels.leak", pct=float(np.median(v)) * 100)],
            fixes=as_fixes([Msg("labels.fix_mask_prompt")]),
        )
    ]


@dataclass(frozen=True)
class PaddingLimits:
    #: batches with padding (and labels of the mask's shape) needed
    min_batches: int = 5
    #: share of those batches, and of their padding positions, that are supervised: a collator that
    #: copies input_ids to labels supervises all of them (1.0); one that masks them, none
    share: float = 0.5


PADDING = PaddingLimits()


@detector("padding_supervised", needs=("pad_positions",))
def padding_supervised(run: Run, q: Quantities) -> list[Finding]:
    """Labels on the padding (attention_mask 0): the batches' own tensors say it, whatever the task."""
    pos, sup = run.col("pad_positions"), run.col("pad_supervised")
    idx = np.flatnonzero(np.isfinite(pos) & (pos > 0) & np.isfinite(sup))
    if idx.size < PADDING.min_batches:
        return []
    share = sup[idx] / pos[idx]
    hit = idx[share >= PADDING.share]
    if hit.size < PADDING.share * idx.size:
        return []
    s = int(q.steps[hit[0]])
    return [
        Finding(
            cause="label_mask_leak",
            symptom="plateau",
            severity="warning",
            confidence=0.9,
            step=s,
            batch=s,
            evidence=[
                Msg("labels.pad_supervised", pct=float(np.median(share)) * 100, n=int(hit.size), of=int(idx.size))
            ],
            fixes=as_fixes([Msg("labels.fix_mask_padding")]),
        )
    ]


def _ignored_beyond_packing(run: Run) -> np.ndarray:
    """The ignored fraction of the label positions, not counting the first token of each packed
    example (a packing collator masks it: nothing before it in the example predicts it), so a
    packed run that masks nothing else reads as the 0% it is."""
    fi = run.col("label_ignored_frac")
    pe = run.col("packed_examples")
    tokens = run.col("label_tokens")
    ok = np.isfinite(fi) & np.isfinite(pe) & np.isfinite(tokens) & (fi < 1.0)
    if not ok.any():
        return fi
    out = fi.copy()
    positions = tokens[ok] / (1.0 - fi[ok])
    out[ok] = np.maximum(0.0, fi[ok] - pe[ok] / np.maximum(positions, 1.0))
    return out
