"""Map the metric names people log to lossdoctor's step-record columns (`records.COLUMNS`).

Every tabular or tagged log (CSV, JSONL, TensorBoard tags, W&B history, Lightning's metrics.csv)
names the same few signals differently: `loss`, `train/loss`, `train_loss_step`, `lm loss`;
`learning_rate`, `lr-AdamW`; `loss_scale`, `loss-scale`. One table here, used by all readers, so a
name learned for one format works for all of them.

A name is normalised (lower case, separators unified, a leading `train/`-like prefix and a trailing
`_step` removed), then looked up. Names of evaluation metrics (`eval/loss`, `val_loss`) are never
taken for the training loss. When several names map to the same column, the one with the best
(lowest) rank wins: an exact `loss` beats `train_loss_epoch`.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

import numpy as np
from numpy.typing import ArrayLike

from ..messages import Msg
from ..records import to_float

#: canonical spelling (after `normalise`) -> (column, rank); lower rank wins.
_ALIASES: dict[str, tuple[str, int]] = {}


def _add(column: str, rank: int, *names: str) -> None:
    for n in names:
        _ALIASES[normalise(n)] = (column, rank)


#: step-axis names, best first (an explicit global step beats a logger's own row counter)
STEP_NAMES = (
    "global_step",
    "trainer/global_step",
    "train/global_step",
    "current_steps",
    "acc_iter",  # OpenPCDet's `acc_iter=1100` beside `cur_iter=15/271`: the iterations accumulated over epochs
    "accumulated_iter",
    "global_step/max_steps",
    "step",
    "iteration",
    "iter",
    "it",
    "steps",
    "num_steps",
    "optimizer_step",
    "_step",
    "Step",
    "global_steps",
)  # a TF LoggingTensorHook dict's `global_steps = 1000`
#: a step written as "done/total" (ms-swift's `'global_step/max_steps': '15/500'`)
_STEP_OF_TOTAL = re.compile(r"\s*(\d+)\s*/\s*\d+\s*$")


def step_number(v: Any) -> float:
    """A logged step as a number: a number, a numeric string, or "done/total" (its done)."""
    if isinstance(v, str):
        m = _STEP_OF_TOTAL.match(v)
        if m is not None:
            return float(m.group(1))
    return to_float(v)


#: words that mark a metric as evaluation, not training
_EVAL = re.compile(
    r"(^|[/_ .-])(eval|evaluation|val|vali|valid|validation|test|dev)([/_ .-]|$)"
)  # vali: the Informer family's `Vali Loss`
_PREFIXES = (
    "train/",
    "training/",
    "trainer/",
    "train_",
    "training_",
    "train-",
    "train ",
    "train.",
    "tr.",
    "tr_",
    "optim/",
    "optimizer/",
    "samples/",
    "metrics/",
)
_SUFFIXES = ("_step", "/step", "-step")


_RUNS_OF_UNDERSCORES = re.compile(r"_+")


def normalise(name: str) -> str:
    n = name.strip().lower().replace("-", "_").replace(" ", "_")
    if "__" in n:
        n = _RUNS_OF_UNDERSCORES.sub("_", n)
    return n


_PREFIXES_N = tuple(dict.fromkeys(normalise(p) for p in _PREFIXES))
_SUFFIXES_N = tuple(dict.fromkeys(normalise(s) for s in _SUFFIXES))


def _strip(n: str) -> tuple[str, int]:
    """Remove train-like prefixes and a `_step` suffix; the count of removals raises the rank."""
    penalty = 0
    changed = True
    while changed:
        changed = False
        for p in _PREFIXES_N:
            if n.startswith(p) and len(n) > len(p):
                n = n[len(p) :]
                penalty += 1
                changed = True
    for s in _SUFFIXES_N:
        if n.endswith(s) and len(n) > len(s):
            n = n[: -len(s)]
            penalty += 1
    return n, penalty


_add("loss", 0, "loss")
_add(
    "loss",
    1,
    "lm loss",
    "lm_loss",
    "total_loss",
    "tot_loss",
    "tot loss",
    "all_loss",  # MTCNN's `det loss: ..., bbox loss: ..., all_loss: ...`: the weighted sum of the parts
    "loss_all",
    "overall_loss",
    "loss_value",
    "train_loss",
    "objective",
    "nll",
    "nll_loss",
    "ce_loss",
    "cross_entropy",
    "mlm_loss",
    "xent",  # xent: OpenNMT-py's cross-entropy
    "closs",
)  # closs: LLaMA2-Accessory's `metric_logger.update(closs=c_loss_value)`
#: the loss averaged over the steps since the last print, under the names trainers give it when it is the
#: only loss they print (kohya's sd-scripts and musubi-tuner's bar `avr_loss=`, `running_loss`, `avg_loss`):
#: below a printed loss or total, so a line that prints both keeps the step's own loss
_add("loss", 2, "avr_loss", "avg_loss", "average_loss", "ave_loss", "mean_loss", "running_loss", "loss_avg")
_add(
    "grad_norm",
    0,
    "grad_norm",
    "grad norm",
    "gradient_norm",
    "grad_2.0_norm_total",
    "global_grad_norm",
    "total_grad_norm",
    "grad_norm_total",
    "gnorm",
    "grad_l2_norm",
    "grad_norm/total",
    "gradient_norm/total",
    "total_norm",
    "grads_norm",
)
_add(
    "lr",
    0,
    "lr",
    "learning_rate",
    "learning rate",
    "learningrate",
    "lr_group_0",
    "lr/pg0",
    "lr_0",
    "learning_rate_0",
    "current_lr",
)
_add(
    "scale",
    0,
    "loss_scale",
    "loss scale",
    "scale",
    "grad_scale",
    "grad_scaler_scale",
    "amp_scale",
    "scaler_scale",
    "scaler/scale",
    "loss_scaler",
    "lossscale",
)
_add(
    "skipped",
    0,
    "skipped",
    "skipped_step",
    "skip",
    "overflow",
    "is_skipped",
    "skipped_iterations",
    "skipped_train_iterations",
    "number of skipped iterations",
    "step_skipped",
)
_add("wd", 0, "weight_decay", "wd")
_add(
    "update_ratio",
    0,
    "update_ratio",
    "update_to_param_ratio",
    "update/param",
    "update_param_ratio",
    "update_norm_ratio",
)
_add("param_norm", 0, "param_norm", "params norm", "params_norm", "parameter_norm", "weight_norm", "param_norm/total")
_add("batch_size", 1, "batch_size", "global_batch_size", "global batch size")

#: preference training (TRL's DPO/ORPO/KTO/CPO trainers log these names; W&B and TensorBoard get
#: them under `train/`, which `_strip` removes; `eval_rewards/chosen` is evaluation and skipped)
PREFERENCE_COLUMNS = (
    "rewards_chosen",
    "rewards_rejected",
    "rewards_margins",
    "rewards_accuracies",
    "logps_chosen",
    "logps_rejected",
)
for _col in PREFERENCE_COLUMNS:
    _what, _side = _col.split("_", 1)
    _add(_col, 0, f"{_what}/{_side}")
    _add(_col, 1, f"{_what}_{_side}")
_add("rewards_accuracies", 1, "rewards/accuracy", "reward_accuracy")
_add("rewards_margins", 1, "rewards/margin", "reward_margin")
#: mlx-lm's preference trainers print `Chosen reward -0.21, Rejected reward -0.23` (and their pairs' `Accuracy`)
_add("rewards_chosen", 2, "chosen_reward")
_add("rewards_rejected", 2, "rejected_reward")

#: RL fine-tuning's reward (TRL's GRPO/RLOO/PPO `reward`, `env/reward_mean`, `objective/scores`; OpenRLHF's and
#: LLaMA-Factory's `reward`; verl's `critic/rewards/mean` and its score before the KL penalty,
#: `critic/score/mean`); a reward function's own term (`rewards/format_reward`) or its spread (`reward_std`) is not
_add(
    "reward",
    0,
    "reward",
    "rewards",
    "reward_mean",
    "mean_reward",
    "avg_reward",
    "reward/mean",
    "rewards/mean",
    "critic/rewards/mean",
)
_add(
    "reward",
    1,
    "env/reward_mean",
    "objective/scores",
    "critic/score/mean",
    "score/mean",
    "rlhf_reward",
    "objective/rlhf_reward",
)
#: a training accuracy (Keras's `acc`/`accuracy`, timm's `Acc@1`, `train_acc`; `val_acc` is evaluation
#: and skipped) and an error rate (speech recognition's WER/CER): what says a flat loss learnt nothing
_add("accuracy", 0, "accuracy", "acc")
_add(
    "accuracy",
    1,
    "acc@1",
    "acc1",
    "top1",
    "top1_acc",
    "top_1_accuracy",
    "top1_accuracy",
    "categorical_accuracy",
    "sparse_categorical_accuracy",
    "binary_accuracy",
)
_add("error_rate", 0, "error_rate", "wer", "cer")
_add("error_rate", 1, "err_rate", "word_error_rate", "character_error_rate")
#: the label metrics: read beside the loss, never taken for it
LABEL_COLUMNS = ("accuracy", "error_rate")

#: what a log prints beside its loss that no divergence detector reads but the report, the RL and
#: preference checks and the label-metric check do: every reader keeps these too
SIDE_COLUMNS = ("reward", *PREFERENCE_COLUMNS, *LABEL_COLUMNS)


@lru_cache(maxsize=1 << 14)
def column_for(name: str) -> tuple[str, int] | None:
    """(records column, rank) for a logged metric name, or None when it is not one we use.
    Cached: every reader asks about the same few hundred names (TensorBoard once per event)."""
    n = normalise(name)
    if n.endswith(("__min", "__max")) or "vs_samples" in n or "vs_tokens" in n:
        return None  # W&B export envelopes; Megatron's alternative x-axes
    if _EVAL.search(n):
        return _eval_loss(n)
    epoch_penalty = 0
    if n.endswith("_epoch"):  # Lightning's per-epoch aggregate: use only when nothing else exists
        n = n[: -len("_epoch")]
        epoch_penalty = 10
    if n in _ALIASES:
        col, rank = _ALIASES[n]
        return col, rank + epoch_penalty
    base, penalty = _strip(n)
    if base in _ALIASES:
        col, rank = _ALIASES[base]
        return col, rank + penalty + epoch_penalty
    # Lightning's LearningRateMonitor: `lr-<Optimizer>`, `lr-<Optimizer>/pg1`, `lr-<Optimizer>-momentum`
    m = re.fullmatch(r"lr_[a-z0-9_.]+?(/pg(\d+))?", n)
    if m and "momentum" not in n and "beta" not in n:
        group = int(m.group(2) or 0)
        return "lr", 2 + group * 3
    return None


def _eval_loss(n: str) -> tuple[str, int] | None:
    """An evaluation's loss (`val_loss`, `eval/loss`, `validation_loss`, `valid_nll_loss`): the
    `eval_loss` column, kept apart from the training loss at the rank its training name would have;
    any other evaluation metric (`eval_runtime`, `test_acc`): None."""
    base = _EVAL.sub("_", n).strip("_/ .-")
    hit = column_for(base) if base and base != n else None
    return ("eval_loss", hit[1]) if hit is not None and hit[0] == "loss" else None


#: a training loss's part by its name (`train_loss_itc`, `loss_mlm`, `box_loss`); an evaluation's is not
_PART = re.compile(r"(?:^|[_/ ])loss_[a-z0-9]+$|^(?:train_)?[a-z0-9]+_loss$", re.IGNORECASE)


def is_loss_part(name: str) -> bool:
    """Whether a column is a part of a training loss (a table reader sums the parts when no column is
    the total): named `loss_<part>` or `<part>_loss`, no evaluation's, and no metric of its own."""
    return bool(_PART.search(name)) and not _EVAL.search(normalise(name)) and column_for(name) is None


#: a column an evaluation fills: read and kept apart, but a log of nothing else has no training metric
EVAL_COLUMNS = frozenset({"eval_loss"})
#: what a log printed beside its loss about the labels: read, but a log of only these has no training
#: metric either (an accuracy alone says nothing of the loss lossdoctor judges)
_NOT_ALONE = EVAL_COLUMNS | frozenset(LABEL_COLUMNS)


def trains(columns: Iterable[str]) -> bool:
    """Whether any of these records columns is a training metric (not only an evaluation's or a
    label metric's)."""
    return any(c not in _NOT_ALONE for c in columns)


def step_rank(name: str) -> int | None:
    """Rank of a step-axis name (lower is better), or None."""
    return _STEP_RANK.get(normalise(name))


_STEP_RANK: dict[str, int] = {}
for _i, _s in enumerate(STEP_NAMES):
    _STEP_RANK.setdefault(normalise(_s), _i)


#: an epoch counter: the step axis of a table that logs once per epoch and names no step (DeiT's and
#: timm's `log.txt`, `{"train_loss": ..., "epoch": 49}`), used only when its values count up in whole numbers
EPOCH_NAMES = ("epoch", "epochs")


def is_epoch_axis(name: str) -> bool:
    return normalise(name) in EPOCH_NAMES


def epoch_steps(values: np.ndarray) -> bool:
    """Whether an epoch column can be the step axis: whole numbers, each row's above the one before."""
    v = np.asarray(values, dtype=np.float64)
    return bool(v.size and np.all(np.isfinite(v)) and np.all(v == np.round(v)) and np.all(np.diff(v) > 0))


@dataclass
class Mapping:
    """Which logged name feeds which column (`used[column] = name`)."""

    step: str | None
    used: dict[str, str]

    def describe(self) -> str:
        parts = [f"{col} <- {name!r}" for col, name in sorted(self.used.items())]
        if self.step:
            parts.insert(0, f"step <- {self.step!r}")
        return ", ".join(parts)


def map_names(names: list[str]) -> Mapping:
    """Choose, for every records column, the best-ranked logged name; and the step axis."""
    best: dict[str, tuple[int, int, str]] = {}
    for order, name in enumerate(names):
        hit = column_for(name)
        if hit is None:
            continue
        col, rank = hit
        key = (rank, order, name)
        if col not in best or key < best[col]:
            best[col] = key
    steps = [(r, i, n) for i, n in enumerate(names) if (r := step_rank(n)) is not None]
    step = min(steps)[2] if steps else next((n for n in names if is_epoch_axis(n)), None)
    return Mapping(step=step, used={col: k[2] for col, k in best.items()})


#: what a user should log to let lossdoctor see a signal, used in "not in this log" notes
SIGNAL_NAMES = {
    "loss": Msg("signal.loss"),
    "grad_norm": Msg("signal.grad_norm_before_clipping"),
    "lr": Msg("signal.lr"),
    "scale": Msg("signal.fp16_scale"),
    "skipped": Msg("signal.skipped"),
}


def distinct_sorted(a: np.ndarray) -> np.ndarray:
    """`np.unique(a)` of an integer array, by a sort: numpy 2's hash-based unique of integers took
    about 7x a sort (1.3 s against 0.18 s on three metrics' million steps each)."""
    s = np.sort(a)
    return s[np.concatenate(([True], s[1:] != s[:-1]))] if s.size else s


def aligned(
    series: dict[str, tuple[ArrayLike, ArrayLike]],
) -> tuple[np.ndarray, dict[str, np.ndarray], dict[str, np.ndarray]]:
    """Scalar series logged at their own steps (TensorBoard tags, MLflow metrics), put on the union
    of their steps: (steps, columns with NaN where a series has no point, which points were logged).
    A step logged twice keeps the value logged last."""
    arrays = [np.asarray(s, dtype=np.int64) for s, _ in series.values()]
    first = arrays[0] if arrays else np.zeros(0, dtype=np.int64)
    if first.size and np.all(first[1:] > first[:-1]) and all(np.array_equal(a, first) for a in arrays[1:]):
        steps = first.copy()  # the common case: every series at the same increasing steps, their union
    else:
        steps = distinct_sorted(np.concatenate(arrays))
    cols: dict[str, np.ndarray] = {}
    logged: dict[str, np.ndarray] = {}
    for col, (s, v) in series.items():
        idx = np.searchsorted(steps, np.asarray(s, dtype=np.int64))
        c = np.full(steps.shape, np.nan)
        c[idx] = np.asarray(v, dtype=np.float64)
        lg = np.zeros(steps.shape, dtype=bool)
        lg[idx] = True
        cols[col], logged[col] = c, lg
    return steps, cols, logged
