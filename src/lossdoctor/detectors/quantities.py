"""Quantities computed once per run and shared by all detectors (the Cockpit idea: compute the
numbers once, let each instrument reason over them).

Everything here is vectorised numpy so a million-step log is diagnosed in seconds.
"""

from __future__ import annotations

from functools import cached_property

import numpy as np

from ..records import Run

#: sqrt(fp32 max) ~ 1.8e19: a gradient norm above it cannot be squared in fp32 (what clipping and an
#: fp32 norm do), so its step counts as the one training went bad, whatever its values
GRAD_NORM_OVERFLOW = 1.8e19


class Quantities:
    def __init__(self, run: Run) -> None:
        self.run = run
        self.n = len(run)
        self.steps = run.steps

    # --- raw signals ------------------------------------------------------------------------
    @cached_property
    def loss(self) -> np.ndarray:
        return self.run.col("loss")

    @cached_property
    def loss_logged(self) -> np.ndarray:
        """Rows whose loss was logged, less the steps the reader found print no loss (a partial
        logging interval's sum divided by the whole interval, `meta["partial_interval_steps"]`)."""
        logged = self.run.logged("loss")
        partial = self.run.meta.get("partial_interval_steps")
        if partial:
            logged = logged & ~np.isin(self.run.steps, np.asarray(partial, dtype=float))
        return logged

    @cached_property
    def grad_norm(self) -> np.ndarray:
        return self.run.col("grad_norm")

    @cached_property
    def skipped(self) -> np.ndarray:
        """Steps whose optimizer update was skipped (GradScaler overflow). From the `skipped` column,
        else inferred from a falling loss scale (a back-off happens exactly on overflow).

        Logs differ on whether a row holds the scale before or after that step's `update()`: the
        back-off of a step shows in its own row (after) or in the next one (before). A row whose
        gradient norm is non-finite is taken as skipped when the scale falls at either; that also
        covers the first row, which has no previous scale to compare with. A row per epoch is never
        inferred skipped: the overflow that lowered the scale skipped one of its thousands of steps."""
        if self.run.has("skipped"):
            return np.nan_to_num(self.run.col("skipped"), nan=0.0) > 0.5
        if self.run.has("scale") and self.run.meta.get("steps_from") != "epoch":
            s = self.run.col("scale")
            prev = np.concatenate([[np.nan], s[:-1]])
            nxt = np.concatenate([s[1:], [np.nan]])
            fell = np.nan_to_num(s < prev, nan=False).astype(bool)
            fell_next = np.nan_to_num(nxt < s, nan=False).astype(bool) & ~np.isfinite(self.grad_norm)
            return fell | fell_next
        skipped = np.zeros(self.n, dtype=bool)
        skipped[self.survived_nonfinite_grads] = True
        return skipped

    @cached_property
    def survived_nonfinite_grads(self) -> np.ndarray:
        """Every row whose gradient norm is non-finite, in a log that says nothing of skipped steps,
        when every logged loss is finite, at least one loss was logged after the first such row,
        and the gradient norm came back finite after the last one (or was never finite: every step
        skipped): a NaN gradient that reached the weights would have made the later losses NaN, so
        those updates were skipped (an fp16 loss scaler, DeepSpeed, a guard in the loop).
        One such row is `survived_nonfinite_grad`; several recur, which `skipped_updates` reports.
        Empty when the log has a `skipped` or loss-scale column (`skipped` reads those)."""
        none = np.zeros(0, dtype=int)
        if not self.run.has("grad_norm") or self.run.has("skipped") or self.run.has("scale"):
            return none
        bad = np.flatnonzero(self.run.logged("grad_norm") & ~np.isfinite(self.grad_norm))
        if bad.size == 0:
            return none
        if bad.size == 1:
            return none if self.survived_nonfinite_grad is None else bad
        losses = self.loss[self.loss_logged]
        if losses.size == 0 or not np.isfinite(losses).all() or not self.loss_logged[bad[0] + 1 :].any():
            return none
        gn_logged = self.run.logged("grad_norm")
        every = bad.size == int(gn_logged.sum())  # no update at all: every step was skipped
        recovered = bool((gn_logged[bad[-1] + 1 :] & np.isfinite(self.grad_norm[bad[-1] + 1 :])).any())
        # non-finite norms up to the end of a log that had finite ones may be the start of a run
        # gone bad (the log stops before its loss does): not judged as skips
        return bad if every or recovered else none

    @cached_property
    def survived_nonfinite_grad(self) -> int | None:
        """The one row whose gradient norm is non-finite in a log that says nothing of skipped steps,
        when every loss logged before and after it is finite. A NaN gradient that reached the weights
        would make every later loss NaN; finite losses after it mean that update was skipped (an fp16
        loss scaler's overflow check, DeepSpeed's, or a guard in the loop). One such row is the
        scaler doing its job (typically at the first steps, where the initial scale overflows);
        several are not judged here (the non-finite detectors see them). None when the log says
        which steps were skipped (a `skipped` or loss-scale column): `skipped` reads those."""
        if not self.run.has("grad_norm") or self.run.has("skipped") or self.run.has("scale"):
            return None
        gn_logged = self.run.logged("grad_norm")
        bad = np.flatnonzero(gn_logged & ~np.isfinite(self.grad_norm))
        if bad.size != 1:
            return None
        i = int(bad[0])
        losses = self.loss[self.loss_logged]
        after = self.loss_logged[i + 1 :] & np.isfinite(self.loss[i + 1 :])
        later_gn = gn_logged[i + 1 :] & np.isfinite(self.grad_norm[i + 1 :])
        if losses.size == 0 or not np.isfinite(losses).all() or not after.any() or not later_gn.any():
            return None
        return i

    @cached_property
    def optimizer(self) -> str:
        opt = self.run.meta.get("optimizer") or {}
        return str(opt.get("class", "")).lower() if isinstance(opt, dict) else str(opt).lower()

    @property
    def adam_like(self) -> bool:
        return any(k in self.optimizer for k in ("adam", "lamb", "lion", "adafactor"))

    # --- the first bad step -----------------------------------------------------------------
    @cached_property
    def bad(self) -> np.ndarray:
        """Rows where training went non-finite: a logged non-finite loss, or a non-finite gradient
        norm on a step that was not skipped (a skipped overflow step is GradScaler doing its job)."""
        loss_bad = self.loss_logged & ~np.isfinite(self.loss)
        gn_logged = self.run.logged("grad_norm")
        gn_bad = gn_logged & ~np.isfinite(self.grad_norm) & ~self.skipped
        if self.run.has("grad_nonfinite"):
            gn_bad |= (np.nan_to_num(self.run.col("grad_nonfinite")) > 0) & ~self.skipped
        # finite gradients whose norm's square overflows fp32 are one multiply from inf: the step
        # went bad (the monitor counts them finite since it accumulates norms in float64)
        huge = np.nan_to_num(self.grad_norm, nan=0.0, posinf=0.0) > GRAD_NORM_OVERFLOW
        gn_bad |= gn_logged & huge & ~self.skipped
        # a scaler run whose loss is non-finite on a skipped step is the scaler's business too
        if self.run.has("scale"):
            loss_bad &= ~self.skipped
        return loss_bad | gn_bad

    @cached_property
    def first_bad(self) -> int | None:
        idx = np.flatnonzero(self.bad)
        return int(idx[0]) if idx.size else None

    @property
    def first_bad_step(self) -> int | None:
        return None if self.first_bad is None else int(self.steps[self.first_bad])

    @cached_property
    def healthy_end(self) -> int:
        """Rows [0, healthy_end) precede the first non-finite step."""
        return self.n if self.first_bad is None else self.first_bad

    # --- loss shape -------------------------------------------------------------------------
    @cached_property
    def finite_loss(self) -> np.ndarray:
        """Row indices of logged, finite losses on steps that were not skipped."""
        return np.flatnonzero(self.loss_logged & np.isfinite(self.loss) & ~self.skipped)

    @cached_property
    def loss_start(self) -> float:
        """Typical loss over the first few logged steps (median of up to 5)."""
        idx = self.finite_loss[:5]
        return float(np.median(self.loss[idx])) if idx.size else float("nan")

    def window(self, a: int, b: int, name: str = "loss") -> np.ndarray:
        """Finite values of column `name` in rows [a, b)."""
        x = self.run.col(name)[a:b]
        return x[np.isfinite(x)]

    @cached_property
    def lr(self) -> np.ndarray:
        return self.run.col("lr")


def trailing_baseline(x: np.ndarray, w: int) -> tuple[np.ndarray, np.ndarray]:
    """Per-row median and MAD of the previous complete block of `w` finite values.

    Non-overlapping blocks keep this O(n) for a million steps; each row is compared with a block
    that ended before it, so a spike never hides in its own baseline.
    """
    n = len(x)
    med = np.full(n, np.nan)
    mad = np.full(n, np.nan)
    if n < 2 * w:
        return med, mad
    nb = n // w
    blocks = x[: nb * w].reshape(nb, w)
    with np.errstate(all="ignore"):
        import warnings

        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)
            bmed = np.nanmedian(blocks, axis=1)
            bmad = np.nanmedian(np.abs(blocks - bmed[:, None]), axis=1)
    for b in range(1, nb + 1):
        lo, hi = b * w, min((b + 1) * w, n)
        med[lo:hi] = bmed[b - 1]
        mad[lo:hi] = bmad[b - 1]
    return med, mad


def percentile(x: np.ndarray, q: float) -> float:
    x = x[np.isfinite(x)]
    return float(np.percentile(x, q)) if x.size else float("nan")


#: point-to-point differences a log's noise needs (`diff_noise`: fewer measure nothing)
NOISE_DIFFS = 3


def diff_noise(x: np.ndarray) -> float:
    """The noise of one point-to-point difference of ln x: the robust sigma (1.4826 MAD) of those
    differences about their median. A trend (a steady rise, one step up that stays) shifts their
    median or adds one outlier, so the spread it leaves is the noise's, not the trend's; a V (a
    descent, then a rise) would not, so callers pass the stretch from the turn on. Fewer than
    `NOISE_DIFFS` differences measure nothing: 0."""
    return log_diff_noise(np.log(x))


def log_diff_noise(lx: np.ndarray) -> float:
    """`diff_noise` of a series already in log space."""
    d = np.diff(lx)
    if d.size < NOISE_DIFFS:
        return 0.0
    return float(1.4826 * np.median(np.abs(d - np.median(d))))
