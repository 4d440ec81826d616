"""Step records: the one shape every signal source and every log reader produces.

A `Run` holds one training run (one rank) as aligned columns: `steps[i]` is the optimizer
iteration of row i and `cols[name][i]` its value, NaN where that signal was not logged at that
step. Sparse, non-numeric facts (which module went NaN first, which sample of the batch held an
Inf) live in `events[name][step]`. Detectors read only this, so the live monitor and a
TensorBoard file are diagnosed by exactly the same code.

This module is deliberately torch-free: the offline CLI imports it.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

import numpy as np

#: Numeric per-step columns. Names are shared by the live run log and all readers.
COLUMNS: dict[str, str] = {
    "loss": "training loss of the optimizer step (mean over micro-batches)",
    "grad_norm": "total L2 norm of the gradients before clipping, unscaled",
    "lr": "learning rate of parameter group 0 after the step",
    "wd": "weight decay of parameter group 0",
    "scale": "GradScaler / loss scale after the step",
    "skipped": "1 if the optimizer step was skipped (overflow), else 0",
    "no_optimizer_step": "1 when mon.step was called without an optimizer step since the previous call "
    "and no GradScaler skip explains it (a misuse: twice per step, per micro-batch)",
    "update_ratio": "||dW|| / ||W|| over all parameters for this step (sampled)",
    "frozen_frac": "fraction of bf16/fp16 parameter entries with a non-zero gradient that did not change (sampled)",
    "eps_dominated": "fraction of Adam second-moment entries with sqrt(v_hat) < 10*eps (sampled)",
    "act_absmax": "largest |activation| of any module output measured in the forward pass (between "
    "sampled steps a wide linear layer on CPU is vouched for by a bound, not measured: "
    "its outputs are then below a quarter of their dtype's range)",
    "act_range_frac": "largest measured |activation| / largest finite value of its dtype (>= 1 is overflow)",
    "grad_nonfinite": "number of parameters whose gradient holds NaN/Inf",
    "input_absmax": "largest |value| of any floating tensor in the batch",
    "batch_nonfinite": "number of samples of the batch that hold NaN/Inf",
    "label_ignored_frac": "fraction of label positions equal to the ignore index (-100)",
    "label_empty_samples": "number of samples in the batch with every label ignored",
    "label_tokens": "number of supervised label positions in the batch",
    "packed_examples": "number of examples (of two tokens or more) in the batch's packed rows, whose "
    "position_ids restart at 0 inside a row; absent when nothing is packed",
    "batch_size": "size of the batch's first dimension",
    "out_min": "smallest value of the model's output (its logits) at the step's first forward (sampled)",
    "out_max": "largest value of the model's output at the step's first forward (sampled)",
    "out_rowsum_dev": "largest |sum over the last dimension - 1| of the model's output (0: every row is a "
    "probability distribution; sampled)",
    "out_classes": "size of the last dimension of the model's output (classes or vocabulary; sampled)",
    "batch_one_class": "1 when every class label of the batch (a 1-D integer tensor of 4+) is the same class, else 0",
    "batch_class": "the class of a single-class batch (absent otherwise)",
    "class_max": "largest class label of the batch (the same 1-D integer tensor of 4+ as batch_one_class)",
    "class_var": "variance of those class labels taken as numbers (what an MSE on class indices starts from)",
    "class_min": "smallest class label of the batch (class indices start at 0; a 1-5 rating does not)",
    "bn_train": "number of BatchNorm layers in train mode at the step's first forward with gradients "
    "(recorded for models with BatchNorm only)",
    "out_copy_frac": "share of positions where the model's argmax is its own input token (a (B, T, V) output "
    "of a forward given input_ids (B, T); sampled): near 1 for a model taught to copy",
    "train_mode": "1 when the model was in train mode at the step's first forward with gradients, 0 in eval "
    "mode (recorded for models with dropout or BatchNorm only)",
    "out_rank": "number of dimensions of the model's output (sampled)",
    "out_last_dim": "size of the last dimension of the model's output (sampled; 1 for a (B, 1) regression head)",
    "target_var": "variance of the batch's first 1-D floating tensor of 4+ values (a (B,) target)",
    "pad_positions": "padding positions of the batch (attention_mask 0) where labels has the mask's shape",
    "pad_supervised": "of those, the positions whose label is not -100: padding the loss is trained on",
    "batch_tokens_mean": "mean tokens per sample of the batch, from its attention_mask (the samples' lengths)",
    "mse_elementwise": "mean squared error of a (B, 1) output against the batch's (B,) floating target, "
    "sample by sample (what the loss is when the prediction is squeezed; sampled)",
    "mse_broadcast": "the same MSE over the (B, B) broadcast of the two shapes, every prediction against "
    "every target (what F.mse_loss((B, 1), (B,)) computes; sampled)",
    "grad_norm_applied": "total L2 norm of the gradients at the optimizer's step, after any clipping (sampled)",
    "grad_stale": "1 when the step's first backward found a non-zero .grad left from before (gradients "
    "never zeroed), 0 when .grad was None or zero; absent when not measured",
    "ppl": "a perplexity a log printed in place of its loss (read from a log: `loss` is then ln(ppl), the "
    "token cross-entropy in nats)",
    "eval_loss": "a validation/evaluation loss printed at that step (read from a log; never written into loss)",
    "param_norm": "total L2 norm of the parameters (sampled)",
    "time": "wall-clock seconds since the monitor started",
    "accum_steps": "backward passes (micro-batches) accumulated into this optimizer step",
    "loss_weight": "sum over micro-batches of the weight each one's loss got in the backward, as a "
    "share of the step (1 = the step optimises the mean; k = the sum of k micro-batches)",
    "grad_norm_local": "this rank's gradient norm before the data-parallel reduction (DDP, DeepSpeed, "
    "FSDP1) or of its shard (FSDP2); grad_norm is then the reduced/total one",
    # RL fine-tuning (PPO, GRPO, RLOO through TRL, OpenRLHF, LLaMA-Factory, verl): its policy loss can sit
    # near 0 or below it by design, so the reward says whether the run learns
    "reward": "RL training: mean reward of the policy's samples over the logging interval (the reward "
    "model's or the reward functions' score)",
    # preference training (DPO, ORPO, KTO, CPO through TRL): the scalars the trainer logs, mean over
    # the logging interval (TRL's `rewards/chosen`, `logps/chosen`...); rewards are beta x the
    # policy/reference log-ratio (ORPO: beta x the policy's own log-probs)
    "rewards_chosen": "preference training: mean implicit reward of the chosen completions",
    "rewards_rejected": "preference training: mean implicit reward of the rejected completions",
    "rewards_margins": "preference training: mean of chosen minus rejected reward",
    "rewards_accuracies": "preference training: fraction of pairs whose chosen reward beats the rejected one",
    "logps_chosen": "preference training: mean log-probability (summed over tokens) of the chosen completions",
    "logps_rejected": "preference training: mean log-probability (summed over tokens) of the rejected completions",
    # what a log prints beside its loss about the labels: a loss flat while the accuracy sits at chance
    # (or an error rate at 1) is a model that learnt nothing about them
    "accuracy": "training accuracy printed beside the loss (`acc`, `accuracy`, `Acc@1`), as printed: a "
    "fraction, or a percentage when a value is above 1; never a validation accuracy",
    "error_rate": "an error rate printed beside the loss (`wer`, `cer`, `error_rate`), as printed: 1 (or "
    "100 as a percentage) is every output wrong",
}

#: Sparse per-step facts: events[name][step] = value.
EVENTS: dict[str, str] = {
    "batch_nonfinite_detail": "{batch key: [sample indices]} of non-finite values in the batch",
    "fwd_first_nonfinite": "{'layer', 'where': 'output'|'input', 'index'} first non-finite forward value",
    "bwd_first_nonfinite": "{'layer', 'after'} first module whose output gradient was non-finite (backward "
    "order), and the module before it whose output gradient was still finite",
    "nonfinite_params": "names of (up to 8) parameters whose gradient was non-finite",
    "act_absmax_layer": "module whose output held the step's largest |activation|",
    "lr_groups": "learning rate of every parameter group, when there is more than one",
    "label_empty_sample_ids": "indices of samples whose labels are all ignored",
    "mask_empty_sample_ids": "indices of samples whose attention_mask is all zeros (all padding)",
    "label_empty_examples": "packed rows: {'n', 'of', 'at': [{'row', 'example', 'start', 'end'}]} the examples "
    "inside packed rows whose labels are all ignored (tokens [start, end) of the row)",
    "batch_nonfinite_examples": "packed rows: [{'key', 'row', 'example', 'start', 'end'}] examples holding "
    "NaN/Inf in a floating batch tensor",
    "loss_components": "{name: value} of the component losses a log printed at the step (loss_cls, aux, "
    "z_loss...), kept apart from the total in `loss`",
    "text_events": "[{'kind', 'line', 'text'}] lines of a log that say what happened at the step (filed under "
    "the step of the row read before them); kind is one of TEXT_EVENT_KINDS, line the line's "
    "number in the text (a progress bar's `\\r` redraws count as lines), text at most 120 characters; "
    "the values the line carries beside them (sources/text_events.RULES): 'scale' (the loss scale "
    "it sets), 'attempted', 'count', 'op' (an autograd function), 'value' (nan/inf), 'step' (the "
    "step the line names, where it was filed), 'from_step' (a resumed checkpoint's step), 'cause' (the bug "
    "a framework's warning names: loss_broadcast, softmax_before_loss, frozen_model), 'partial' (the "
    "warning is about a part of the model only)",
}

#: kinds of `text_events` (what a line of a training log said happened at a step)
TEXT_EVENT_KINDS = (
    "overflow",
    "loss_scale",
    "nonfinite_warning",
    "labels_ignored",
    "truncation",
    "empty_target",
    "oom",
    "nccl_error",
    "hardware_error",
    "restart",
    "resume",
    "loss_scale_min",
    "anomaly_op",
    "skip_count",
    "nonfinite_loss",
    "nonfinite_grad",
    "nonfinite_input",
    "bug_warning",
)


@dataclass
class LayerStats:
    """Per-module statistics at sampled steps: `stats[name]` has shape (len(steps), len(modules))."""

    steps: np.ndarray
    modules: list[str]
    stats: dict[str, np.ndarray]
    types: list[str] = field(default_factory=list)  # module class names, aligned with `modules`


@dataclass
class Run:
    """One rank of one training run as aligned columns (see module docstring)."""

    steps: np.ndarray
    cols: dict[str, np.ndarray] = field(default_factory=dict)
    events: dict[str, dict[int, Any]] = field(default_factory=dict)
    meta: dict[str, Any] = field(default_factory=dict)
    #: rows where a column was logged; absent means "logged wherever the value is not NaN".
    #: Needed because a logged NaN loss (the failure) and an unlogged step look alike otherwise.
    logged_mask: dict[str, np.ndarray] = field(default_factory=dict)
    layers: LayerStats | None = None
    live_findings: list[dict[str, Any]] = field(default_factory=list)
    #: findings of the preflight checks (contract dicts), joined with the detectors' by the engine
    preflight: list[dict[str, Any]] = field(default_factory=list)
    #: incident triage records (contract dicts, `incidents/*.json`), merged by the engine
    incidents: list[dict[str, Any]] = field(default_factory=list)
    source: str = "lossdoctor"
    notes: list[str] = field(default_factory=list)
    rank: int | None = None

    def __len__(self) -> int:
        return int(self.steps.shape[0])

    def col(self, name: str) -> np.ndarray:
        """The column, or an all-NaN column when the source did not log it."""
        c = self.cols.get(name)
        if c is None:
            return np.full(len(self), np.nan)
        return c

    def has(self, name: str) -> bool:
        """True when the column was logged at least once (NaN from a NaN loss counts as logged)."""
        if name in self.events:
            return True
        c = self.cols.get(name)
        return c is not None and bool(self.logged(name).any())

    def logged(self, name: str) -> np.ndarray:
        """Mask of rows where `name` was logged (a logged NaN counts)."""
        mask = self.logged_mask.get(name)
        if mask is not None:
            return mask
        c = self.cols.get(name)
        if c is None:
            return np.zeros(len(self), dtype=bool)
        return ~np.isnan(c)

    def event(self, name: str) -> dict[int, Any]:
        return self.events.get(name, {})


def make_run(
    rows: list[dict[str, Any]],
    *,
    meta: dict[str, Any] | None = None,
    source: str = "lossdoctor",
    rank: int | None = None,
) -> Run:
    """Build a Run from per-step dicts (`{"step": 3, "loss": 2.1, ...}`), the readers' common path.

    Values under a COLUMNS name become numeric columns; values under an EVENTS name become sparse
    events; other keys are ignored. Rows without a step are dropped.
    """
    rows = [r for r in rows if _is_step(r.get("step"))]
    steps = [r["step"] for r in rows]
    keys = {k for r in rows for k in r}
    cols = {k: [r.get(k) for r in rows] for k in keys if k in COLUMNS}
    events: dict[str, dict[int, Any]] = {}
    for k in keys & EVENTS.keys():
        events[k] = {int(to_float(r["step"])): r[k] for r in rows if r.get(k) is not None}
    return from_columns(steps, cols, events=events, meta=meta, source=source, rank=rank)


def _is_step(v: Any) -> bool:
    """A step number a record can be filed under (finite, within int64); else the row is dropped."""
    f = to_float(v)
    return bool(np.isfinite(f)) and abs(f) < 2.0**62


def from_columns(
    steps: Any,
    cols: dict[str, Any],
    *,
    events: dict[str, dict[int, Any]] | None = None,
    meta: dict[str, Any] | None = None,
    source: str = "lossdoctor",
    rank: int | None = None,
    logged: dict[str, np.ndarray] | None = None,
) -> Run:
    """Build a Run from column arrays aligned with `steps` (None/NaN where not logged).

    `logged[name]`, when given, is the mask of rows where column `name` was logged; it lets a
    reader that parsed a float array pass a logged NaN (the failure) apart from an empty cell.

    Rows are sorted by step; when a step repeats (a log that restarted, or one row per metric as in
    Lightning's CSV), each column keeps its last logged value at that step. Vectorised so a
    million-step log loads in well under a second.
    """
    steps_arr = np.asarray(
        [to_float(s) for s in steps] if not isinstance(steps, np.ndarray) else steps, dtype=np.float64
    )
    keep = np.isfinite(steps_arr) & (np.abs(steps_arr) < 2.0**62)  # a step that is no integer is dropped
    steps_i = steps_arr[keep].astype(np.int64)
    uniq, inverse = np.unique(steps_i, return_inverse=True)
    n = len(uniq)
    out_cols: dict[str, np.ndarray] = {}
    logged_out: dict[str, np.ndarray] = {}
    for k, values in cols.items():
        vals, mask = _as_float_column(values)
        if logged is not None and k in logged:
            mask = np.asarray(logged[k], dtype=bool)
        vals, mask = vals[keep], mask[keep]
        col = np.full(n, np.nan)
        lg = np.zeros(n, dtype=bool)
        idx = np.nonzero(mask)[0]
        col[inverse[idx]] = vals[idx]  # later rows overwrite earlier ones: the last value wins
        lg[inverse[idx]] = True
        out_cols[k] = col
        logged_out[k] = lg
    return Run(
        steps=uniq,
        cols=out_cols,
        events=dict(events or {}),
        meta=dict(meta or {}),
        logged_mask=logged_out,
        source=source,
        rank=rank,
    )


def _as_float_column(values: Any) -> tuple[np.ndarray, np.ndarray]:
    """(float values, logged mask). None and unparsable strings are "not logged"; 'nan' is logged."""
    if isinstance(values, np.ndarray) and values.dtype.kind in "fiub":
        v = values.astype(np.float64)
        return v, ~np.isnan(v) if values.dtype.kind == "f" else np.ones(len(v), dtype=bool)
    try:
        v = np.array(values, dtype=np.float64)
        mask = np.array([x is not None for x in values], dtype=bool)
        if v.shape != (len(values),):
            raise ValueError("not one number per row")
        return v, mask
    except (TypeError, ValueError, OverflowError):
        v = np.array([to_float(x) for x in values], dtype=np.float64)
        mask = np.array([x is not None and (not np.isnan(f) or _says_nan(x)) for x, f in zip(values, v)], dtype=bool)
        return v, mask


def _says_nan(x: Any) -> bool:
    return isinstance(x, str) and x.strip().lower() in ("nan", "-nan", "+nan")


def to_float(v: Any) -> float:
    """Lenient number parsing for logs: bools, numbers, numeric strings, 'nan'/'inf'; else NaN.
    A list ([lr] per param group) gives its first number, looked for at most 4 levels deep."""
    for _ in range(4):
        if not (isinstance(v, (list, tuple)) and v):
            break
        v = v[0]
    if v is None:
        return np.nan
    if isinstance(v, bool):
        return 1.0 if v else 0.0
    if isinstance(v, (int, float, np.floating, np.integer)):
        try:
            return float(v)
        except OverflowError:  # an integer beyond float range (a 400-digit number): as 1e400 reads
            return np.inf if v > 0 else -np.inf
    if isinstance(v, str):
        return text_number(v.strip())
    return np.nan


#: MSVC's printf spells the non-finite values `1.#INF`, `-1.#IND`, `1.#QNAN`, `1.#SNAN` (a C++ trainer on
#: Windows): `INF` is an infinity with its sign, the others a NaN
MSVC_NONFINITE = r"[-+]?\d\.#(?:INF|IND|QNAN|SNAN)\d*"
#: Python's format with a fill character pads a value shorter than its width: PaddleOCR prints its
#: metrics with `{:x<6f}`, so a NaN loss is `nanxxx` and an infinity `infxxx` (a finite value printed
#: with `f` has six decimals and is never padded)
FILLED_NONFINITE = r"[-+]?(?:nan|inf)x{1,3}"


def text_number(s: str) -> float:
    """A number as a log writes it, MSVC's non-finite spellings included; NaN for anything else."""
    try:
        return float(s)
    except ValueError:
        if (
            re.fullmatch(MSVC_NONFINITE, s, re.IGNORECASE)
            and "#INF" in s.upper()
            or re.fullmatch(FILLED_NONFINITE, s, re.IGNORECASE)
            and "inf" in s.lower()
        ):
            return -np.inf if s.startswith("-") else np.inf
        return np.nan  # `-1.#IND`, `1.#QNAN`, or no number at all


# --- a log read in order, as growable columns ---------------------------------------------------


@dataclass(frozen=True)
class Thinning:
    """When and how a very long log is thinned while it is read (`StepColumns`)."""

    #: rows held before the store thins; measured default: 1M rows of one series are ~30 MB in the
    #: store (a 1 GB console log peaks under 250 MB, benchmarks/read_speed.py), and a 1M-step log
    #: (benchmarks/diagnose_1m.py) is read whole, so no answer there changes
    max_rows: int = 1 << 20
    #: rows kept at full resolution at the start and at the end of the log (measured default: the
    #: warmup and the last few thousand steps hold what the LR and schedule detectors read)
    head: int = 65_536
    tail: int = 65_536
    #: window of the running median an outlier is judged against (measured default: ~ a few hundred
    #: steps, shorter than a schedule's change and longer than a spike)
    window: int = 256
    #: a point this many median absolute deviations from its window's median is kept (6 MADs keep
    #: ~0.1% of Gaussian noise: spikes and a blow-up's ramp stay, noise is thinned; measured default)
    outlier_mads: float = 6.0
    #: rows kept on each side of a kept non-finite or outlier point, so its onset reads as before
    #: (measured default: the detectors look back 25-50 steps before a NaN)
    context: int = 64
    #: the first non-finite points of the log kept whatever the thinning (the onset of a NaN run and
    #: what follows; measured default)
    nonfinite_keep: int = 4096


THINNING = Thinning()

#: how a row got its step, as a small code (`StepColumns.how`); `numbered`/`epoch` rows are renumbered
#: at the end of a console log, so they are never thinned
HOW = {None: 0, "counter": 1, "interval": 2, "numbered": 3, "epoch": 4, "spaced": 5}
HOW_NAMES = {v: k for k, v in HOW.items()}
#: per-row flags (`StepColumns.flags`)
FLAG_DROP, FLAG_WEAK, FLAG_NAN_FILTER = 1, 2, 4
#: meta key: the first step whose logged 0.0 beside a non-finite grad norm a reader read back as NaN (the HF
#: Trainer's `logging_nan_inf_filter` logs an interval of NaN losses as 0.0)
NAN_FILTER_META = "nan_filter_first_step"
#: set by a thinning pass on a row it must keep (rare, non-finite, outlying, or next to a non-finite one)
FLAG_KEEP = 8
#: set by a thinning pass on a row next to an outlier: kept while the store has room for every such
#: row, else (from then on) thinned like any other (noisy grad norms make ~0.3% of points 6-MAD
#: outliers, and their neighbours a third of the log: kept, memory grew with the file)
FLAG_NEAR = 16
_FLAG_KEYS = (("_drop", FLAG_DROP), ("_weak", FLAG_WEAK), ("_nan_filter", FLAG_NAN_FILTER))


class StepColumns:
    """Rows of a log, in reading order, as growable numpy arrays: `step`, one float array per named
    series with its logged mask, how each row got its step, flags, and the rare rows' extras
    (component losses) by ordinal. A reader appends a batch of row dicts (`append_rows`) or whole
    arrays (`append_arrays`); memory stays bounded: past `rules.max_rows` rows the middle of the log
    is thinned (`_thin`: every non-finite or outlier point and its neighbours kept, the first and
    last rows kept, the rest kept one in `stride` by reading order), and `thinned` says by how much.
    `roles` names the series that holds a signal the thinning judges (`{"loss": "train_loss"}`) where
    a reader stores its columns under the log's own names (a CSV or JSONL table); by default a
    signal's series has its name."""

    def __init__(self, names: tuple[str, ...], rules: Thinning = THINNING, roles: dict[str, str] | None = None) -> None:
        self.names = tuple(names)
        self.rules = rules
        self.roles = dict(roles or {})
        self.n = 0  # rows held
        self.total = 0  # rows ever appended (the next row's ordinal)
        self.stride = 1
        self.thinned = 0  # rows dropped by thinning
        self.nonfinite_seen = 0
        self.peak_nbytes = 0
        self.how_counts = [0] * len(HOW)  # over every row appended, thinned or not
        self.extra: dict[int, dict[str, Any]] = {}  # ordinal -> {"_components": ...}
        self._judged = 0  # rows before this index were judged by a thinning pass
        self._nonfinite_judged = {"loss": 0, "grad_norm": 0}
        self.near_dropped = False  # the outliers' neighbours no longer fit: thinned like other rows
        # the columns, made by `_alloc` (declared here, assigned there: `_alloc` tells a first
        # allocation by their absence)
        self.step: np.ndarray  # float64, NaN where a row has no step
        self.ordinal: np.ndarray  # int64, the row's index in reading order
        self.how: np.ndarray  # int8, index into HOW
        self.flags: np.ndarray  # uint8
        self.vals: dict[str, np.ndarray]  # series name -> float64 values
        self.have: dict[str, np.ndarray]  # series name -> bool, logged at that row
        self.cap: int
        self._alloc(1024)

    def _alloc(self, cap: int) -> None:
        """Room for `cap` rows (the rows held are kept)."""
        old = self.__dict__.get("step")
        n = self.n
        arrays = {"step": np.float64, "ordinal": np.int64, "how": np.int8, "flags": np.uint8}
        for k, dt in arrays.items():
            a = np.zeros(cap, dtype=dt)
            if old is not None:
                a[:n] = getattr(self, k)[:n]
            setattr(self, k, a)
        vals: dict[str, np.ndarray] = {}
        have: dict[str, np.ndarray] = {}
        for name in getattr(self, "vals", {}):
            vals[name], have[name] = np.full(cap, np.nan), np.zeros(cap, dtype=bool)
            vals[name][:n], have[name][:n] = self.vals[name][:n], self.have[name][:n]
        self.vals, self.have = vals, have
        self.cap = cap
        self.peak_nbytes = max(self.peak_nbytes, self.nbytes())

    def _series(self, name: str) -> None:
        """Arrays for a series seen for the first time (a series never logged takes no memory)."""
        if name not in self.vals:
            self.vals[name], self.have[name] = np.full(self.cap, np.nan), np.zeros(self.cap, dtype=bool)

    def nbytes(self) -> int:
        return int(
            self.step.nbytes
            + self.ordinal.nbytes
            + self.how.nbytes
            + self.flags.nbytes
            + sum(v.nbytes for v in self.vals.values())
            + sum(h.nbytes for h in self.have.values())
        )

    def _reserve(self, m: int) -> int:
        if self.n + m > self.cap:  # doubling, but not far past what thinning lets the store hold
            self._alloc(max(self.n + m, min(self.cap * 2, self.rules.max_rows + (1 << 16))))
        start = self.n
        self.n += m
        self.ordinal[start : self.n] = np.arange(self.total, self.total + m)
        self.total += m
        return start

    def append_rows(self, rows: list[dict[str, Any]]) -> None:
        """Append row dicts (`{"step": 3, "loss": 2.1, "_how": "counter", ...}`): the series in
        `names`, how the step was found, the flags, and component losses; other keys are ignored."""
        m = len(rows)
        if not m:
            return
        keys = set().union(*rows)
        start = self._reserve(m)
        end = start + m
        self.step[start:end] = np.fromiter((r["step"] for r in rows), np.float64, m)
        for name in keys.intersection(self.names):
            self._series(name)
            self.have[name][start:end] = np.fromiter((name in r for r in rows), bool, m)
            self.vals[name][start:end] = np.fromiter((r.get(name, np.nan) for r in rows), np.float64, m)
        if "_how" in keys:
            how = np.fromiter((HOW[r.get("_how")] for r in rows), np.int8, m)
            self.how[start:end] = how
            for code, c in enumerate(np.bincount(how, minlength=len(HOW)).tolist()):
                self.how_counts[code] += c
        for key, bit in _FLAG_KEYS:
            if key in keys:
                self.flags[start:end] |= np.fromiter((bit if r.get(key) else 0 for r in rows), np.uint8, m)
        if "_components" in keys:
            for i, r in enumerate(rows):
                if r.get("_components"):
                    self.extra[int(self.ordinal[start + i])] = {"_components": r["_components"]}
        self._after_append(start)

    def append_arrays(
        self,
        steps: np.ndarray,
        cols: dict[str, np.ndarray],
        *,
        how: str | None = None,
        flags: np.ndarray | None = None,
        logged: dict[str, np.ndarray] | None = None,
    ) -> None:
        """Append rows given as arrays (a named series logged on every row unless `logged[name]` says
        where; `how` the rows' step was found, `flags` per row)."""
        m = len(steps)
        if not m:
            return
        start = self._reserve(m)
        self.step[start : start + m] = steps
        if how is not None:
            self.how[start : start + m] = HOW[how]
            self.how_counts[HOW[how]] += m
        if flags is not None:
            self.flags[start : start + m] = flags
        for name, v in cols.items():
            self._series(name)
            self.vals[name][start : start + m] = v
            self.have[name][start : start + m] = True if logged is None or name not in logged else logged[name]
        self._after_append(start)

    def _role(self, signal: str) -> str:
        """The series holding `signal` (see `roles`)."""
        return self.roles.get(signal, signal)

    def _after_append(self, start: int) -> None:
        for name in map(self._role, ("loss", "grad_norm")):
            if name in self.vals:
                v = self.vals[name][start : self.n]
                self.nonfinite_seen += int((self.have[name][start : self.n] & ~np.isfinite(v)).sum())
        if self.n > self.rules.max_rows:
            self._thin()

    # --- thinning --------------------------------------------------------------------------

    def _thin(self) -> None:
        """Keep the head, the tail, what is rare and what is anomalous; one in `stride` elsewhere.
        The stride only doubles, so the kept middle is every row whose ordinal is a multiple of the
        final stride: deterministic, whatever the chunking."""
        r = self.rules
        n = self.n
        a = self._judged  # rows before it were judged by an earlier pass (their verdict is in FLAG_KEEP)
        new = (self.how[a:n] == HOW["numbered"]) | (self.how[a:n] == HOW["epoch"])
        if self.extra:
            new |= np.isin(self.ordinal[a:n], np.fromiter(self.extra, np.int64, len(self.extra)))
        new |= self._rare(a, n)
        nonfinite, outlying = self._anomalies(a, n)
        new |= _dilate(nonfinite, r.context) | outlying
        near = np.zeros(n - a, dtype=bool) if self.near_dropped else _dilate(outlying, r.context) & ~new
        self.flags[a:n] |= (np.where(new, FLAG_KEEP, 0) | np.where(near, FLAG_NEAR, 0)).astype(np.uint8)
        must = (self.ordinal[:n] < r.head) | ((self.flags[:n] & ~np.uint8(FLAG_NEAR)) != 0)
        must[max(0, n - r.tail) :] = True
        if not self.near_dropped and (must | (self.flags[:n] == FLAG_NEAR)).sum() > r.max_rows // 2:
            self.near_dropped = True
            self.flags[:n] &= ~np.uint8(FLAG_NEAR)
        must |= (self.flags[:n] & FLAG_NEAR) != 0
        while True:  # the smallest doubling of the stride that leaves room for as many rows again
            keep = must | ((self.ordinal[:n] % self.stride) == 0)
            if keep.sum() <= r.max_rows // 2 or self.stride >= 1 << 40:
                break
            self.stride *= 2
        idx = np.nonzero(keep)[0]
        self.thinned += n - idx.size
        for k in ("step", "ordinal", "how", "flags"):
            a = getattr(self, k)
            a[: idx.size] = a[idx]
        for name in self.vals:
            self.vals[name][: idx.size] = self.vals[name][idx]
            self.have[name][: idx.size] = self.have[name][idx]
            self.vals[name][idx.size : n] = np.nan  # the freed rows read as never logged again
            self.have[name][idx.size : n] = False
        self.how[idx.size : n] = 0
        self.flags[idx.size : n] = 0
        self.n = self._judged = idx.size

    def _rare(self, a: int, n: int) -> np.ndarray:
        """Rows a..n that say something seldom said: an evaluation loss, a skipped step or interval
        count, a NaN count, a loss scale that changed."""
        out = np.zeros(n - a, dtype=bool)
        for signal in ("eval_loss", "skipped", "skipped_in_interval", "nan_in_interval", "scale"):
            name = self._role(signal)
            if name not in self.vals:
                continue
            v, h = self.vals[name][a:n], self.have[name][a:n]
            if signal == "eval_loss":
                out |= h
            elif signal == "scale":
                prev = np.concatenate([self.vals[name][max(a - 1, 0) : max(a, 1)], v[:-1]])[: v.size]
                out |= h & ~((v == prev) | (np.isnan(v) & np.isnan(prev)))
            else:
                out |= h & (v != 0)
        return out

    def _anomalies(self, a: int, n: int) -> tuple[np.ndarray, np.ndarray]:
        """Rows a..n whose loss or grad norm is non-finite (the log's first `nonfinite_keep` of them,
        and each run's first), and rows where one is an outlier against its window's median."""
        r = self.rules
        out = np.zeros(n - a, dtype=bool)
        outlying = np.zeros(n - a, dtype=bool)
        for signal in ("loss", "grad_norm"):
            name = self._role(signal)
            if name not in self.vals:
                continue
            v, h = self.vals[name][a:n], self.have[name][a:n]
            bad = h & ~np.isfinite(v)
            if bad.any():
                before = bool(a and self.have[name][a - 1] and not np.isfinite(self.vals[name][a - 1]))
                first = bad & ~np.concatenate([[before], bad[:-1]])
                early = bad & (np.cumsum(bad) + self._nonfinite_judged[signal] <= r.nonfinite_keep)
                self._nonfinite_judged[signal] += int(bad.sum())
                out |= first | early
            outlying |= _outliers(np.where(h & ~bad, v, np.nan), r.window, r.outlier_mads)
        return out, outlying

    # --- the result ------------------------------------------------------------------------

    def view(self, name: str) -> np.ndarray:
        """The series' values of the rows held (NaN where not logged)."""
        return self.vals[name][: self.n] if name in self.vals else np.full(self.n, np.nan)

    def logged(self, name: str) -> np.ndarray:
        return self.have[name][: self.n] if name in self.have else np.zeros(self.n, dtype=bool)


def _outliers(v: np.ndarray, window: int, k: float) -> np.ndarray:
    """Points more than `k` median absolute deviations from the median of their window (NaN: not
    judged). Windows are fixed blocks of `window` points: one median per block, vectorised."""
    n = v.size
    if n < window:
        return np.zeros(n, dtype=bool)
    m = (n + window - 1) // window
    pad = np.full(m * window, np.nan)
    pad[:n] = v
    blocks = pad.reshape(m, window)
    with np.errstate(all="ignore"):
        import warnings

        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)  # an all-NaN block has no median
            med = np.nanmedian(blocks, axis=1, keepdims=True)
            mad = np.nanmedian(np.abs(blocks - med), axis=1, keepdims=True)
        floor = 1e-6 * np.maximum(np.abs(med), 1e-12)
        out = np.abs(blocks - med) > k * np.maximum(mad, floor)
    return out.reshape(-1)[:n]


def _dilate(mask: np.ndarray, c: int) -> np.ndarray:
    """`mask` widened by `c` rows on each side."""
    idx = np.nonzero(mask)[0]
    if not idx.size or c <= 0:
        return mask
    d = np.zeros(mask.size + 1, dtype=np.int64)
    np.add.at(d, np.maximum(idx - c, 0), 1)
    np.add.at(d, np.minimum(idx + c + 1, mask.size), -1)
    return np.cumsum(d[:-1]) > 0
