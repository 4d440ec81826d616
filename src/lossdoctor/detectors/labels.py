"""Label masking: everything masked (loss 0 or NaN, zero gradient), or nothing masked in SFT."""

from __future__ import annotations

import numpy as np

from ..findings import Finding
from ..records import Run
from .base import detector, fmt
from .quantities import Quantities


@detector("label_mask_empty", needs_any=("label_ignored_frac", "loss"))
def label_mask_empty(run: Run, q: Quantities) -> list[Finding]:
    """Every label position is the ignore index (-100): mean over zero tokens is NaN (or 0 with a
    sum reduction), and the gradient is zero.

    From the batch: batches with 100% ignored labels (critical when they are most batches or
    the loss broke there; warning for an occasional one) and samples with no supervised position
    (warning when >= 25% of samples). From the loss alone (foreign logs): a non-finite loss with a
    gradient norm of exactly 0 (only an empty mean does that), or a loss of exactly 0.0 for >= 3
    logged steps from the start with a zero gradient norm.
    """
    out: list[Finding] = []
    fi = run.col("label_ignored_frac")
    if np.isfinite(fi).any():
        full = np.isfinite(fi) & (fi >= 1.0)
        logged = int(np.isfinite(fi).sum())
        if full.any():
            i = int(np.flatnonzero(full)[0])
            s = int(q.steps[i])
            n_full = int(full.sum())
            most = n_full >= 0.5 * logged
            broke = q.first_bad is not None and q.first_bad >= i and q.first_bad - i <= 1
            ev = [f"{n_full} of {logged} batches have every label position masked (-100), first at step {s}"]
            loss_i = q.loss[i]
            if run.logged("loss")[i]:
                ev.append(f"the loss at step {s} is {fmt(float(loss_i))} (a mean over zero supervised tokens)")
            gn = q.grad_norm[i]
            if np.isfinite(gn) and gn == 0:
                ev.append("the gradient norm is exactly 0")
            return [Finding(
                cause="label_mask_empty", symptom="zero_loss" if np.isfinite(loss_i) else "nonfinite",
                severity="critical" if (most or broke) else "warning", confidence=0.95, step=s, batch=s,
                samples=_ids(run, s), evidence=ev,
                fixes=["check the collator's label masking: only prompt and padding tokens should be -100; "
                       "the response tokens (and EOS) must keep their ids",
                       "with truncation, make sure the response is not cut off entirely (raise max_length or "
                       "truncate the prompt from the left)"])]
        es = run.col("label_empty_samples")
        bs = run.col("batch_size")
        ok = np.isfinite(es) & np.isfinite(bs) & (bs > 0)
        if ok.any():
            frac = float(es[ok].sum() / bs[ok].sum())
            if frac >= 0.25:
                i = int(np.flatnonzero(ok & (es > 0))[0])
                s = int(q.steps[i])
                out.append(Finding(
                    cause="label_mask_empty", symptom="slow_convergence", severity="warning", confidence=0.8,
                    step=s, batch=s, samples=_ids(run, s),
                    evidence=[f"{fmt(frac * 100)}% of samples have no supervised label position (all -100)"],
                    fixes=["drop samples whose response was truncated away or masked entirely"]))
        return out
    # loss and gradient norm alone: a non-finite loss whose gradient norm is exactly 0. A mean over
    # zero supervised tokens is 0/0 = NaN while nothing contributes a gradient; any other NaN in
    # the forward pass makes NaN gradients, not zero ones
    empty = q.loss_logged & ~np.isfinite(q.loss) & run.logged("grad_norm") & (q.grad_norm == 0)
    if empty.any():
        i = int(np.flatnonzero(empty)[0])
        s = int(q.steps[i])
        n = int(empty.sum())
        logged = int(q.loss_logged.sum())
        ev = [f"the loss is {fmt(float(q.loss[i]))} at step {s} with a gradient norm of exactly 0"
              + (f" ({n} of {logged} logged steps look like that)" if n > 1 else "")
              + ": a mean over zero supervised tokens (every label -100), which no other NaN produces "
              "(a NaN in the forward pass makes NaN gradients, not zero ones)"]
        return [Finding(cause="label_mask_empty", symptom="nonfinite", severity="critical", confidence=0.8,
                        step=s, batch=s, evidence=ev,
                        fixes=["check the collator's label masking and truncation: a batch whose responses "
                               "were all cut off or masked has no supervised token; skip such batches or "
                               "normalise by max(1, n_tokens)",
                               "log label statistics (lossdoctor.watch does: pass batch= to mon.step) to see "
                               "which samples have no supervised token"])]
    # a loss of exactly 0.0 with a non-finite gradient norm, in a run whose loss is otherwise well
    # above 0: a loss normalised by a token count of zero (logged as 0, or sum/0 in backward). A
    # bad batch makes a NaN or huge loss, never an exact 0
    zero_nan = q.loss_logged & (q.loss == 0.0) & run.logged("grad_norm") & ~np.isfinite(q.grad_norm)
    others = q.loss[q.loss_logged & np.isfinite(q.loss) & (q.loss != 0.0)]
    if zero_nan.any() and others.size >= 2 and float(np.median(others)) > 1e-2:
        i = int(np.flatnonzero(zero_nan)[0])
        s = int(q.steps[i])
        n = int(zero_nan.sum())
        return [Finding(
            cause="label_mask_empty", symptom="nonfinite", severity="critical", confidence=0.75, step=s, batch=s,
            evidence=[f"the loss is exactly 0.0 at step {s} while the gradient norm is {fmt(float(q.grad_norm[i]))}"
                      + (f" ({n} steps look like that)" if n > 1 else "")
                      + f"; the other steps' loss is about {fmt(float(np.median(others)))}: a batch with no "
                      "supervised token (every label -100) gives a loss of 0 over zero tokens and a 0/0 in "
                      "its gradient; a bad batch makes a NaN or huge loss, not an exact 0"],
            fixes=["skip batches with no supervised token (count labels != -100 before the forward pass), or "
                   "normalise the loss by max(1, n_tokens)",
                   "check the collator's masking and truncation: responses cut off entirely leave only -100"])]
    # loss alone: exact zeros from the start
    lf = q.finite_loss
    if lf.size >= 3:
        head = q.loss[lf[:10]]
        zeros = head == 0.0
        if zeros.sum() >= 3 and zeros[:3].all():
            gn = q.grad_norm[lf[:10]]
            gz = np.isfinite(gn) & (gn == 0)
            if not np.isfinite(gn).any() or gz.any():
                return [Finding(
                    cause="label_mask_empty", symptom="zero_loss", severity="critical", confidence=0.6,
                    step=int(q.steps[lf[0]]),
                    evidence=[f"the loss is exactly 0 at {int(zeros.sum())} of the first {head.size} logged steps"
                              + (" and the gradient norm is 0" if gz.any() else "")],
                    fixes=["check that some label positions are not -100 (the loss over zero tokens is 0/NaN)"])]
    return out


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
    fi = run.col("label_ignored_frac")
    v = fi[np.isfinite(fi)]
    if v.size < 1 or float(np.median(v)) > 0.02:
        return []
    i = int(np.flatnonzero(np.isfinite(fi))[0])
    return [Finding(cause="label_mask_leak", symptom="plateau", severity="warning", confidence=0.7,
                    step=int(q.steps[i]), batch=int(q.steps[i]),
                    evidence=[f"task='sft' but only {fmt(float(np.median(v)) * 100)}% of label positions are "
                              "masked (median over batches): prompt tokens are supervised"],
                    fixes=["set labels of the prompt (and padding) tokens to -100, e.g. with "
                           "DataCollatorForCompletionOnlyLM / assistant_only_loss=True"])]
