"""Bugs in how the loop is wired: what goes into the loss, and which parameters the optimizer moves
(issue 26's list, after Karpathy's "A Recipe for Training Neural Networks" and Tobin's
"Troubleshooting Deep Neural Networks"). Every rule reads what `watch` records; each threshold says
where it comes from. "Measured default" means measured on the zoo scenarios that then score the
rule (benchmarks/zoo/wiring.py): those figures are in-sample.

Inputs and labels in different orders (`labels_misaligned`). Signals: the loss against chance
(ln K, K the output's last dimension), the update/param ratio, and the batch's 1-D class labels
(`class_max`). Two DataLoaders with shuffle=True over x and y, or a permutation applied to x only,
leave labels that say nothing about their inputs: the model learns the class prior and the loss
settles at chance and never goes below it, while the weights move at an ordinary rate. Label
noise, however heavy, leaves some signal and the loss goes below chance (80% noise over 10
classes: 2.17 against 2.30); a crawling LR or a frozen model sits near chance with updates far
below the usual 1e-4..1e-2 and is left to its own rules.

A sigmoid before `BCEWithLogitsLoss` (`softmax_before_loss`, its binary twin). Signals: `out_min`,
`out_max`, `out_classes`, `out_rowsum_dev`. Every output in [0, 1] without rows that sum to 1
(one output, or independent sigmoids) of a (B, K) head, driven to 0 and 1, and a loss that never goes below
-ln sigmoid(1) = 0.313 (the best a probability in [0, 1] can do when sigmoid is applied again):
the loss is saturated, not converged. `binary_cross_entropy` of the same probabilities goes below.

The wrong loss for the task (`wrong_loss`). Signals: `out_rank`/`out_last_dim` (a (B, 1) head),
`class_max`/`class_var` (the batch's labels are integer classes, three or more), the task hint.
An MSE (or a BCE) of one output against class indices treats class 7 as "more" than class 3; a
cross-entropy over K classes needs K outputs. Fired when the run says it is a classification, or,
without a hint, when the labels look like class ids: 4 to 20 values from 0, spread like balanced
classes (variance near a uniform draw's over 0..K-1; a count is binomial-like and narrower), whether
or not the loss falls (a regression of 10 blob classes gets to a tenth of their variance while half
its rounded predictions are wrong). A (B,) output of a head squeezed inside the forward counts as one
output. An integer target regressed on purpose (a count, a rating 1-5, one of more than 20 values,
or task="regression") is left alone. A cross-entropy over
one output is the other wrong loss: log-softmax of a single logit is 0, so the loss is exactly 0 at
every step whatever the target (`F.cross_entropy` of a (B, 1) regression head against soft or
one-column targets): a loss exactly 0 from the first step with a (B, 1) output is this, not an
empty label mask.

A param group at LR 0 (`frozen_model`). Signals: `lr_groups` (every group's LR at each step, when
they differ) and the optimizer's groups in meta.json (`n_params`). A group whose LR is 0 at every
recorded step while another's is not never moves: a `backbone_lr` left at its default of 0, a
lambda that returns 0 for that group. A warm-up from 0 leaves the LR at 0 for its first step only.

BatchNorm over a batch of one (`batchnorm_batch_of_one`). Signals: `batch_size` and `bn_train`
(BatchNorm layers in train mode). A last, incomplete batch of one sample (a DataLoader without
drop_last) normalises that sample with its own statistics: `BatchNorm1d` raises "Expected more
than 1 value per channel", `BatchNorm2d` trains on one image's spatial statistics and updates the
running statistics from them. BatchNorm in eval (frozen) or GroupNorm/LayerNorm are left alone.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from ..findings import Finding, as_fixes
from ..messages import Msg
from ..records import Run
from .base import detector
from .quantities import Quantities


def _meta(run: Run) -> dict:
    return run.meta if isinstance(run.meta, dict) else {}


def _task(run: Run) -> str | None:
    m = _meta(run)
    t = m.get("task") or m.get("task_hint")
    return t if isinstance(t, str) else None


def _smoothed(y: np.ndarray, w: int) -> np.ndarray:
    """Rolling medians of `w` points (one per window start): the loss level without batch noise."""
    if y.size < w:
        return np.array([float(np.median(y))])
    return np.median(np.lib.stride_tricks.sliding_window_view(y, w), axis=1)


@dataclass(frozen=True)
class MisalignedThresholds:
    #: loss points needed: the loss must have had time to fall below chance (measured default)
    min_points: int = 60
    #: window of the rolling median the lowest level is read from (32-sample batches of 10 classes
    #: have a per-batch loss noise of ~0.05 nats around chance; 10 points bring it to ~0.02)
    window: int = 10
    #: how far below chance, as a share of it, the lowest level may go and still be "at chance":
    #: 2% (0.046 nats at ln 10). Measured default: the two zoo faults' lowest levels read 0.990-0.996
    #: of chance, 80% label noise 0.938-0.944, overlapping classes 0.53-0.64 (3 seeds each)
    below: float = 0.02
    #: how far above chance the end may be: a run stuck above chance is not at chance (measured default)
    above: float = 0.05
    #: update/param ratio range that says the weights move at an ordinary rate (the usual 1e-4..1e-2
    #: of Karpathy's recipe; an LR 100x too low reads 1e-7, a wrecking LR 1e-1)
    min_update: float = 1e-4
    max_update: float = 1e-2


MISALIGNED = MisalignedThresholds()


def _chance(run: Run) -> tuple[float, int] | None:
    """ln K and K: K the output's classes, or, where the model's output was not seen (a Lightning
    `training_step` calls the layers, never the module's own forward), the labels' largest class
    plus one: the loss of a model that learned only the class prior is the labels' entropy, ln K
    for balanced labels over the classes the data holds."""
    k = run.col("out_classes")
    kk = k[np.isfinite(k)]
    if kk.size:
        classes = int(np.median(kk))
    else:
        top = run.col("class_max")
        top = top[np.isfinite(top)]
        classes = int(np.max(top)) + 1 if top.size else 0
    return (math.log(classes), classes) if classes >= 2 else None


@detector("labels_misaligned", needs=("loss", "class_max", "update_ratio"))
def labels_misaligned(run: Run, q: Quantities) -> list[Finding]:
    ch = _chance(run)
    lf = q.finite_loss
    if ch is None or lf.size < MISALIGNED.min_points or q.first_bad_step is not None:
        return []
    chance, k = ch
    y = q.loss[lf]
    lowest = float(np.min(_smoothed(y, MISALIGNED.window)))
    end = float(np.median(y[-max(MISALIGNED.window, y.size // 5) :]))
    if lowest < (1 - MISALIGNED.below) * chance or end > (1 + MISALIGNED.above) * chance:
        return []
    u = run.col("update_ratio")
    u = u[np.isfinite(u)]
    if not u.size or not MISALIGNED.min_update <= float(np.median(u)) <= MISALIGNED.max_update:
        return []
    evidence: list[str] = [
        Msg("wiring.misaligned.at_chance", lowest=lowest, end=end, chance=chance, k=k, n=int(y.size)),
        Msg("wiring.misaligned.updates", u=float(np.median(u))),
    ]
    return [
        Finding(
            cause="labels_misaligned",
            symptom="plateau",
            severity="warning",
            confidence=0.75,
            step=int(run.steps[lf[0]]),
            evidence=evidence,
            fixes=as_fixes([Msg("wiring.misaligned.fix_one_loader"), Msg("wiring.misaligned.fix_check")]),
        )
    ]


@dataclass(frozen=True)
class SigmoidThresholds:
    #: sampled steps with output statistics needed
    min_measured: int = 3
    #: share of them with every output in [0, 1] (a model ending in Sigmoid: all of them)
    share: float = 0.8
    #: |row sum - 1| above which the rows are not distributions (a softmax's are within ~1e-6)
    rowsum_tol: float = 2e-2
    #: outputs driven into the sigmoid's saturation at the end: min below, max above (the gradient
    #: of BCEWithLogits(p) pushes p to 0 and 1; measured default: 1e-3 / 0.999 on the zoo scenario)
    saturated: float = 0.05
    #: how far below the floor -ln sigmoid(1) the loss may go and still be saturated there (batch
    #: noise; measured default)
    below_floor: float = 0.02
    #: slack on [0, 1] for an output to count as a probability (float32 rounding of a sigmoid)
    prob_tol: float = 1e-6
    #: a final loss above ln 2 (a coin flip's BCE) is no saturation: the model learned nothing
    coin_flip: float = math.log(2)


SIGMOID = SigmoidThresholds()
#: -ln sigmoid(1): the lowest BCEWithLogits of a probability in [0, 1] against a positive target
SIGMOID_FLOOR = math.log(1 + math.exp(-1))


@detector("sigmoid_before_bce", needs=("out_min", "out_max", "out_classes", "loss"))
def sigmoid_before_bce(run: Run, q: Quantities) -> list[Finding]:
    if _task(run) in ("regression", "pretrain", "sft"):
        return []
    lo, hi, k, dev, rank = (run.col(c) for c in ("out_min", "out_max", "out_classes", "out_rowsum_dev", "out_rank"))
    # a classifier's (B, K) head: an image decoder's sigmoid (B, C, H, W) against soft pixel targets
    # has a BCE floor of its own (the targets' entropy) and is not this
    idx = np.flatnonzero(np.isfinite(lo) & np.isfinite(hi) & np.isfinite(k) & (rank == 2))
    if idx.size < SIGMOID.min_measured or not q.finite_loss.size:
        return []
    dist = (k[idx] >= 2) & np.isfinite(dev[idx]) & (dev[idx] <= SIGMOID.rowsum_tol)
    probs = (lo[idx] >= -SIGMOID.prob_tol) & (hi[idx] <= 1 + SIGMOID.prob_tol) & ~dist
    if probs.mean() < SIGMOID.share:
        return []
    last = idx[-1]
    if not (lo[last] <= SIGMOID.saturated and hi[last] >= 1 - SIGMOID.saturated):
        return []
    y = q.loss[q.finite_loss]
    best, end = float(np.min(y)), float(np.median(y[-max(1, y.size // 5) :]))
    if best < SIGMOID_FLOOR - SIGMOID.below_floor or end > SIGMOID.coin_flip:
        return []
    evidence: list[str] = [
        Msg(
            "wiring.sigmoid.outputs",
            n=int(probs.sum()),
            of=int(idx.size),
            lo=float(lo[last]),
            hi=float(hi[last]),
            step=int(run.steps[last]),
        ),
        Msg("wiring.sigmoid.floor", floor=SIGMOID_FLOOR, best=best, end=end),
    ]
    return [
        Finding(
            cause="softmax_before_loss",
            symptom="plateau",
            severity="warning",
            confidence=0.85,
            step=int(run.steps[idx[0]]),
            evidence=evidence,
            fixes=as_fixes([Msg("wiring.sigmoid.fix"), Msg("wiring.sigmoid.fix_bce")]),
        )
    ]


@dataclass(frozen=True)
class WrongLossThresholds:
    #: steps with both the output's shape and the class labels needed
    min_steps: int = 5
    #: largest class label from which the labels are multi-class (0, 1, 2: three classes; a binary
    #: 0/1 target against one output is what BCEWithLogitsLoss wants)
    min_class_max: int = 2
    #: the loss at the end, over the labels' variance, at or above which the regression of class
    #: indices has not fit them (predicting their mean gives 1; measured default): evidence, and a
    #: higher confidence
    ratio: float = 0.5
    #: without a task hint, labels read as class ids by their spread alone: at least this many
    #: values 0..K-1 (0..2 is as often a 3-point score or a small count as 3 classes; chosen)
    ids_min_classes: int = 4
    #: ... and at most this many: an integer target with more distinct values is a quantity (a count,
    #: an age) more often than a class id (chosen, not tuned)
    ids_max_classes: int = 20
    #: ... spread like balanced classes: their variance at least this share of a uniform draw over
    #: 0..K-1, (K^2 - 1) / 12. A count is binomial-like, at most 3 / (K + 1) of it (0.6 at K = 4,
    #: 0.27 at K = 10); balanced classes read ~1 (user-style scripts of 4, 5 and 10 blob classes:
    #: 0.97-1.01; chosen between the two)
    ids_spread: float = 0.7


WRONG_LOSS = WrongLossThresholds()


def _one_output_column(rank: np.ndarray, last: np.ndarray, batch: np.ndarray | None = None) -> bool:
    """Every measured step's model output was (B, 1), one number per sample: a regression head.
    With the batch sizes, a (B,) output (the head squeezed inside the model's forward) is one too."""
    one = (rank == 2) & (last == 1)
    if batch is not None:
        one |= (rank == 1) & (last == batch) & (batch > 1)
    return bool(np.all(one))


def _few_ids(run: Run, idx: np.ndarray, k: int) -> bool:
    """Without a task hint, labels that can be class ids: at most `ids_max_classes` values, from 0
    (a count of more values, a 1-5 rating, is a quantity)."""
    low = run.col("class_min")[idx]
    low = low[np.isfinite(low)]
    return k <= WRONG_LOSS.ids_max_classes and (not low.size or float(np.min(low)) == 0.0)


def _ids_spread(run: Run, idx: np.ndarray, k: int) -> float | None:
    """The labels' median variance over a uniform draw's over 0..K-1, when it is that of balanced
    classes (a count is narrower); None otherwise."""
    var = run.col("class_var")[idx]
    var = var[np.isfinite(var)]
    if not var.size or k < WRONG_LOSS.ids_min_classes:
        return None
    share = float(np.median(var)) / ((k * k - 1) / 12.0)
    return share if share >= WRONG_LOSS.ids_spread else None


@detector("wrong_loss", needs=("out_last_dim", "class_max", "loss"))
def wrong_loss(run: Run, q: Quantities) -> list[Finding]:
    task = _task(run)
    if task in ("regression", "pretrain", "sft"):
        return []
    rank, last, top, var = (run.col(c) for c in ("out_rank", "out_last_dim", "class_max", "class_var"))
    idx = np.flatnonzero(np.isfinite(rank) & np.isfinite(last) & np.isfinite(top) & np.isfinite(q.loss))
    bs = run.col("batch_size")[idx] if run.has("batch_size") else None
    if idx.size < WRONG_LOSS.min_steps or not _one_output_column(rank[idx], last[idx], bs):
        return []
    k = int(np.max(top[idx])) + 1
    if k - 1 < WRONG_LOSS.min_class_max:
        return []
    tail = idx[-max(1, idx.size // 5) :]
    v = var[tail][np.isfinite(var[tail]) & (var[tail] > 0)]
    loss_end = float(np.median(q.loss[tail]))
    r = loss_end / float(np.median(v)) if v.size else None
    negative = bool(np.nanmin(q.loss[idx]) < 0)
    unfit = r is not None and r >= WRONG_LOSS.ratio
    # without a hint, labels spread like balanced class ids (a count regressed on purpose that has
    # not fit yet is narrower); a negative loss needs no hint
    spread = _ids_spread(run, idx, k) if task != "classification" and _few_ids(run, idx, k) else None
    if task != "classification" and not negative and spread is None:
        return []
    shape = "(B,)" if int(rank[idx[0]]) == 1 else "(B, 1)"
    evidence: list[str] = [Msg("wiring.wrong_loss.head", k=k, top=k - 1, shape=shape)]
    if negative:
        evidence.append(Msg("wiring.wrong_loss.negative", low=float(np.nanmin(q.loss[idx]))))
    elif unfit:
        evidence.append(Msg("wiring.wrong_loss.ratio", loss=loss_end, var=float(np.median(v)), r=r))
    if spread is not None and not negative:
        evidence.append(Msg("wiring.wrong_loss.ids", k=k, top=k - 1, share=spread, floor=WRONG_LOSS.ids_spread))
    # a loss without a lower bound falls forever (the "absurd" negative loss is this, not bad data)
    severity, conf, symptom = ("critical", 0.9, "divergence") if negative else ("warning", 0.85, "plateau")
    if task != "classification" and not negative and not unfit:  # the labels' spread alone says it
        conf = 0.75
    return [
        Finding(
            cause="wrong_loss",
            symptom=symptom,
            severity=severity,
            confidence=conf,
            step=int(run.steps[idx[0]]),
            evidence=evidence,
            fixes=as_fixes([Msg("wiring.wrong_loss.fix", k=k), Msg("wiring.wrong_loss.fix_regression")]),
        )
    ]


@dataclass(frozen=True)
class OneClassThresholds:
    #: steps with the output's shape needed
    min_steps: int = 5
    #: share of those steps whose loss is exactly 0 (log-softmax of one logit is 0.0 exactly, in
    #: every dtype: no float noise to allow for)
    zero_share: float = 0.9


ONE_CLASS = OneClassThresholds()


@detector("wrong_loss_one_class", needs=("out_last_dim", "loss"))
def wrong_loss_one_class(run: Run, q: Quantities) -> list[Finding]:
    """A cross-entropy over a (B, 1) output: the loss is exactly 0 from the first step on."""
    rank, last = run.col("out_rank"), run.col("out_last_dim")
    idx = np.flatnonzero(np.isfinite(rank) & np.isfinite(last) & np.isfinite(q.loss))
    if idx.size < ONE_CLASS.min_steps or not _one_output_column(rank[idx], last[idx]):
        return []
    zero = q.loss[idx] == 0.0
    if not zero[0] or float(zero.mean()) < ONE_CLASS.zero_share:
        return []
    return [
        Finding(
            cause="wrong_loss",
            symptom="zero_loss",
            severity="critical",
            confidence=0.9,
            step=int(run.steps[idx[0]]),
            evidence=[Msg("wiring.wrong_loss.one_class", n=int(zero.sum()), of=int(idx.size))],
            fixes=as_fixes([Msg("wiring.wrong_loss.fix_one_output")]),
        )
    ]


@dataclass(frozen=True)
class ZeroLrGroupThresholds:
    #: steps with per-group LRs needed (a warm-up from 0 is at 0 for its first step only)
    min_steps: int = 20
    #: share of the optimizer's parameters the group must hold to be reported (a group of a few
    #: biases at LR 0 is a deliberate choice more often than not; chosen, not tuned)
    min_share: float = 0.05


ZERO_LR = ZeroLrGroupThresholds()


def _group_lrs(run: Run) -> np.ndarray | None:
    ev = run.events.get("lr_groups") or {}
    rows = [v for _, v in sorted(ev.items()) if isinstance(v, (list, tuple)) and v]
    if len(rows) < ZERO_LR.min_steps or len({len(r) for r in rows}) != 1:
        return None
    try:
        return np.asarray(rows, dtype=float)
    except (TypeError, ValueError):
        return None


@detector("param_group_lr_zero", needs=("lr_groups",))
def param_group_lr_zero(run: Run, q: Quantities) -> list[Finding]:
    lrs = _group_lrs(run)
    if lrs is None:
        return []
    groups = (_meta(run).get("optimizer") or {}).get("groups")
    sizes = [g.get("n_params") if isinstance(g, dict) else None for g in groups] if isinstance(groups, list) else []
    zero = [i for i in range(lrs.shape[1]) if np.all(lrs[:, i] == 0)]
    others = [i for i in range(lrs.shape[1]) if i not in zero and np.median(lrs[:, i]) > 0]
    if not zero or not others:
        return []
    total = sum(s for s in sizes if isinstance(s, int)) if len(sizes) == lrs.shape[1] else 0
    n = sum(s for s in (sizes[i] for i in zero) if isinstance(s, int)) if total else 0
    if total and n < ZERO_LR.min_share * total:
        return []
    other_lr = float(np.median(lrs[:, others[0]]))
    evidence: list[str] = [
        Msg(
            "wiring.zero_lr.groups",
            groups=", ".join(str(i) for i in zero),
            of=int(lrs.shape[1]),
            steps=int(lrs.shape[0]),
            other=other_lr,
        )
    ]
    if total:
        evidence.append(Msg("wiring.zero_lr.params", n=n, total=total, pct=100 * n / total))
    return [
        Finding(
            cause="frozen_model",
            symptom="stall",
            severity="warning",
            confidence=0.85,
            step=int(min(run.events["lr_groups"])),
            evidence=evidence,
            fixes=as_fixes(
                [Msg("wiring.zero_lr.fix", lr=other_lr / 10, other=other_lr), Msg("wiring.zero_lr.fix_freeze")]
            ),
        )
    ]


@dataclass(frozen=True)
class BatchOfOneThresholds:
    #: steps with a batch of one sample through BatchNorm in train mode needed: one is enough
    #: (each one replaces ~10% of the running statistics, BatchNorm's momentum 0.1)
    min_steps: int = 1
    #: a loss at those steps over the median of the run's other steps, quoted as evidence
    jump: float = 1.5


BATCH_OF_ONE = BatchOfOneThresholds()


@detector("batchnorm_batch_of_one", needs=("batch_size", "bn_train"))
def batchnorm_batch_of_one(run: Run, q: Quantities) -> list[Finding]:
    bs, bn = run.col("batch_size"), run.col("bn_train")
    hit = np.flatnonzero(np.isfinite(bs) & np.isfinite(bn) & (bs == 1) & (bn > 0))
    seen = np.flatnonzero(np.isfinite(bs) & np.isfinite(bn))
    if hit.size < BATCH_OF_ONE.min_steps:
        return []
    evidence: list[str] = [
        Msg(
            "wiring.bn1.steps",
            n=int(hit.size),
            of=int(seen.size),
            first=int(run.steps[hit[0]]),
            layers=int(np.max(bn[hit])),
        )
    ]
    rest = np.setdiff1d(q.finite_loss, hit)
    at = hit[np.isfinite(q.loss[hit])]
    if rest.size and at.size:
        base, there = float(np.median(q.loss[rest])), float(np.median(q.loss[at]))
        if base > 0 and there >= BATCH_OF_ONE.jump * base:
            evidence.append(Msg("wiring.bn1.loss", there=there, base=base, x=there / base))
    typical = int(np.median(bs[seen])) if seen.size else 0
    return [
        Finding(
            cause="batchnorm_batch_of_one",
            symptom="spike",
            severity="warning",
            confidence=0.9,
            step=int(run.steps[hit[0]]),
            evidence=evidence,
            fixes=as_fixes([Msg("wiring.bn1.fix_drop_last", typical=typical), Msg("wiring.bn1.fix_norm")]),
        )
    ]
