"""Megatron-LM, GPT-NeoX and Megatron-DeepSpeed training stdout: line parsers.

The iteration line (Megatron-LM `training_log`, printed every `--log-interval` iterations, default
100)::

    [2024-05-01 10:00:00] iteration      200/  500000 | consumed samples: 102400 | elapsed time per
    iteration (ms): 1234.5 | learning rate: 1.500000E-04 | global batch size: 512 | lm loss:
    7.123456E+00 | loss scale: 65536.0 | grad norm: 1.234 | num zeros: 0.0 | params norm: 234.5 |
    number of skipped iterations: 0 | number of nan iterations: 0 |

GPT-NeoX writes `lm_loss`, Megatron-DeepSpeed adds `actual seqlen`, `samples per second`; all are
`key: value` fields between `|`. The loss is the mean over the interval (skipped iterations
excluded); learning rate, loss scale and grad norm are those of the interval's last iteration;
`number of skipped iterations` / `number of nan iterations` are counts within the interval.

The arguments block Megatron prints at start (`clip_grad ........ 1.0`) gives the clip threshold,
log interval, precision and schedule, kept in `meta["args"]` and the facts detectors use.

`MegatronLines` is what the console reader (`sources/stdout.py`) keeps for these lines while it
reads a log that may mix them with other frameworks' lines.
"""

from __future__ import annotations

import re
from collections import Counter
from typing import Any

from ..messages import Msg
from ..records import to_float

ITERATION = re.compile(r"\biteration\s+(\d+)\s*/\s*(\d+)\s*\|")
#: one `|`-separated field: `name: value`, or `name value` where the value is one number and nothing else (CPM-2's and other
#: Megatron forks' `| learning rate 3e-06 | lm loss 7.72363 | loss scale 512.0 |`)
_FIELD = re.compile(
    r"\s*([A-Za-z][A-Za-z0-9 _()/.\-]*?)(?:\s*:|\s+(?=[-+]?(?:\d[\d.]*(?:e[-+]?\d+)?|\.\d+|nan|inf)\s*(?:\||$)))\s*([^|]*?)\s*(?=\||$)",
    re.IGNORECASE,
)
ARG_LINE = re.compile(r"^\s*([A-Za-z_][A-Za-z0-9_]*)\s\.{3,}\s(.*?)(?:\.{3,}\s*(?:updated|default))?\s*$")
ARGS_START = re.compile(r"-{3,}\s*arguments\s*-{3,}|NeoXArgs\.|^\s*arguments:\s*$")
ARGS_END = re.compile(r"-{3,}\s*end of arguments\s*-{3,}")

#: Megatron field name -> records column (or an interval count kept as its own column)
FIELDS = {
    "lm loss": "loss",
    "lm_loss": "loss",
    "loss": "loss",
    "lm-loss": "loss",
    "learning rate": "lr",
    "lr": "lr",
    "loss scale": "scale",
    "grad norm": "grad_norm",
    "grad_norm": "grad_norm",
    "params norm": "param_norm",
    "number of skipped iterations": "skipped_in_interval",
    "number of nan iterations": "nan_in_interval",
    "global batch size": "batch_size",
}

#: arguments that detectors can use, under the names they look for in meta
ARG_META = {
    "clip_grad": "max_grad_norm",
    "log_interval": "log_interval",
    "fp16": "fp16",
    "bf16": "bf16",
    "lr": "config_lr",
    "min_lr": "min_lr",
    "lr_warmup_iters": "warmup_steps",
    "lr_decay_style": "lr_decay_style",
    "lr_decay_iters": "lr_decay_iters",
    "train_iters": "max_steps",
    "initial_loss_scale": "initial_loss_scale",
    "loss_scale": "static_loss_scale",
    "global_batch_size": "global_batch_size",
    "micro_batch_size": "micro_batch_size",
    "seq_length": "seq_length",
}


def parse_iteration(line: str) -> dict[str, Any] | None:
    """{'step': N, 'loss': ..., ...} for an iteration line, else None."""
    m = ITERATION.search(line)
    if m is None:
        return None
    row: dict[str, Any] = {"step": int(m.group(1)), "_total": int(m.group(2))}
    for key, value in _FIELD.findall(line[m.end() :]):
        col = FIELDS.get(key.strip().lower())
        if col is not None:
            row[col] = to_float(value.split()[0] if value.split() else value)
    return row


#: fields only a training iteration line has (an evaluation line also says "iteration")
_TRAINING_FIELDS = ("learning rate", "consumed samples", "elapsed time", "global batch size")
#: the fields `training_log` prints after the losses: a line with none of them stops before the place
#: of its loss (the log was cut in the middle of the line), so the loss is not known to be left out
_AFTER_LOSS = ("loss scale", "grad norm", "num zeros", "params norm", "skipped iterations", "nan iterations")


def fill_dropped_loss(row: dict[str, Any], interval: int, line: str) -> str | None:
    """Megatron prints `lm loss` only when the interval's mean is > 0 (`training_log`: `if avg >
    0.0`), so an iteration line *without* it is not a missing step: every iteration of the interval
    was skipped (fp16 overflow), or the mean was NaN (`nan > 0` is False). A line that stops before
    the fields printed after the losses was cut there: its loss is unknown, not left out. Returns what happened
    ("nan" or "skipped"), with the row completed, or None when the loss is there or the line is
    not a training iteration line."""
    if "loss" in row or not any(f in line for f in _TRAINING_FIELDS) or not any(f in line for f in _AFTER_LOSS):
        return None
    skipped = row.get("skipped_in_interval", 0.0)
    nan = row.get("nan_in_interval", 0.0)
    all_skipped = skipped == skipped and skipped >= max(1, interval)
    if all_skipped:
        row["skipped"] = 1.0
    if nan or not all_skipped:
        row["loss"] = float("nan")
        return "nan"
    return "skipped"


def parse_arg(line: str) -> tuple[str, Any] | None:
    m = ARG_LINE.match(line)
    if m is None:
        return None
    raw = m.group(2).strip().rstrip(".").strip()
    return m.group(1), _arg_value(raw)


def _arg_value(raw: str) -> Any:
    if raw in ("True", "False"):
        return raw == "True"
    if raw == "None":
        return None
    try:
        return int(raw)
    except ValueError:
        pass
    try:
        return float(raw)
    except ValueError:
        return raw


def args_meta(args: dict[str, Any]) -> dict[str, Any]:
    meta: dict[str, Any] = {}
    for k, name in ARG_META.items():
        v = args.get(k)
        if v is not None and not isinstance(v, str):
            meta[name] = v
    if isinstance(args.get("optimizer"), str):  # `optimizer ...... adam` (Megatron: adam or sgd)
        meta["optimizer"] = {"class": args["optimizer"], "from": "Megatron arguments"}
        tuned = args.get("finetune") is True or args.get("pretrained_checkpoint") not in (None, "None", "")
        meta["task_kind"] = "finetune" if tuned else "pretrain"
    return meta


#: a piece of an iteration line wrapped by a terminal or a paste: `key: value |` fields and nothing else
CONTINUATION = re.compile(r"^\s*(?:[A-Za-z][A-Za-z0-9 _()/.\-]*?:\s*[^|:]+?\s*(?:\||$)\s*)+$")
#: the fields Megatron's `training_log` prints last: a line without them was cut, the rest follows
_LAST_FIELDS = ("skipped iterations", "nan iterations")


#: the head of a field broken by a terminal of fixed width (`... | learning` then ` rate: 4.475E-05 | ...`): a
#: piece that opens with a field and goes on past a `|`
_BROKEN = re.compile(r"^\s*[A-Za-z][A-Za-z0-9 _()/.\-]*:\s*[^|:]+?\s*\|")


def wrapped_iteration(text: str) -> bool:
    """Whether an iteration line stops short before its last fields: wrapped after a `|`, or inside a
    field's name by a terminal of fixed width (BLOOM's `... | learning` / ` rate: 4.475E-05 | ...`)."""
    if ITERATION.search(text) is None or any(f in text for f in _LAST_FIELDS):
        return False
    t = text.rstrip()
    return t.endswith("|") or ":" not in t.rsplit("|", 1)[-1]


class MegatronLines:
    """The state a console reader keeps for Megatron's lines: the arguments block (its log interval
    says how many iterations one iteration line sums up), the previous iteration (the interval when
    no arguments were printed), and how many lines had their loss left out (skipped or NaN)."""

    def __init__(self) -> None:
        self.args: dict[str, Any] = {}
        self.in_args = False
        self.prev_iteration: int | None = None
        self.dropped_loss: Counter[str] = Counter()
        self.wrapped: str | None = None  # the head of an iteration line wrapped over several lines

    def unwrap(self, text: str) -> tuple[str | None, str | None]:
        """(a held iteration line to read now, the text to read after it). A wrapped iteration line is
        held, the `key: value |` pieces that follow are joined to it until one does not end with `|`."""
        held = self.wrapped
        if held is None:
            if wrapped_iteration(text):
                self.wrapped = text
                return None, None
            return None, text
        if ITERATION.search(text) is None and (CONTINUATION.match(text) or _BROKEN.match(text)):
            joined = held.rstrip() + " " + text.strip()
            if text.rstrip().endswith("|") and not any(f in joined for f in _LAST_FIELDS):
                self.wrapped = joined
                return None, None
            self.wrapped = None
            return None, joined
        self.wrapped = None
        return held, self.unwrap(text)[1]

    def argument_line(self, text: str) -> bool:
        """True when `text` was the arguments block's start, end or one of its arguments."""
        if self.in_args:
            if ARGS_END.search(text):
                self.in_args = False
                return True
            kv = parse_arg(text)
            if kv:
                self.args.setdefault(kv[0], kv[1])
                return True
            return False
        if ("argument" in text or "NeoXArgs" in text) and ARGS_START.search(text):
            self.in_args = True
            return True
        return False

    def iteration(self, text: str) -> dict[str, Any] | None:
        """The row of an iteration line (a dropped loss filled in as NaN or skipped), else None."""
        row = parse_iteration(text)
        if row is None:
            return None
        interval = self.args.get("log_interval")
        if not isinstance(interval, int) or interval < 1:
            interval = row["step"] - self.prev_iteration if self.prev_iteration is not None else 1
        self.prev_iteration = row["step"]
        what = fill_dropped_loss(row, max(1, interval), text)
        if what:
            self.dropped_loss[what] += 1
        return row

    def notes(self) -> list[Msg]:
        """What the reader made of iteration lines without a loss."""
        out = []
        if self.dropped_loss.get("nan"):
            out.append(Msg("console.megatron_nan", n=self.dropped_loss["nan"]))
        if self.dropped_loss.get("skipped"):
            out.append(Msg("console.megatron_skipped", n=self.dropped_loss["skipped"]))
        return out
