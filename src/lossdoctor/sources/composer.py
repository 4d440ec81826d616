"""MosaicML Composer's console (`ConsoleLogger`, what llm-foundry and the runs built on it print):
one block per logged batch, a progress header and one indented line per metric::

    [batch=3108/3200]:
             Train time/batch: 3107
             Train loss/train/total: 2.3456
             Train l2_norm/grad/global: 1.234
             Train lr-DecoupledAdamW/group0: 0.0006

The header is `[batch=N/T]` when the run's duration is counted in batches, `[epoch=E][batch=b/T]`
(b within the epoch) when in epochs, `[token=N/T]` or `[sample=N/T]` otherwise. A block ends at
the next header or the first line that is not one of its metrics; evaluation blocks
(`[Eval batch=3/10] Eval on eval data:` and `Eval ...` lines) are not training steps.

The step is the header's batch count; with an epoch header, (E - 1) x T + b; with a token or
sample header, `Train time/batch` + 1 (the logger reads the counter before the trainer increments
it: a `[batch=3108/3200]` block holds `time/batch: 3107`). Metric names: `loss/train/total` is the
loss, `l2_norm/grad/global` the gradient norm (its `OptimizerMonitor`), `lr-<Optimizer>/group0` the
learning rate (its `LRMonitor`); other names go through the shared column aliases.

Composer prints every float with four decimals (`format_log_data_value`: `f'{data:.4f}'`): an LR
of 6e-5 reads 0.0001 and one of 2e-5 reads 0.0000. A learning rate or gradient norm below 0.005
(more than 1% off) is therefore left out rather than read as a number, and a note says how many:
a printed 0.0000 must not become "the LR is zero".

`ComposerLines` is what the console reader (`sources/stdout.py`) keeps for these blocks while it
reads a log that may mix them with other lines.
"""

from __future__ import annotations

import re
from typing import Any

from ..messages import Msg
from ..records import to_float
from .columns import column_for

HEADER = re.compile(r"^(?:\[epoch=(\d+)\])?\[(batch|token|sample|iteration)=(\d+)(?:/(\d+))?\]:?\s*$")
EVAL_HEADER = re.compile(r"^\[Eval batch=\d+(?:/\d+)?\]")
METRIC = re.compile(r"^(Train|Eval) ([^:]+?):\s+(\S.*)$")
#: Composer's own metric names -> records column (the loss total before its parts)
FIELDS = {"loss/train/total": "loss", "l2_norm/grad/global": "grad_norm"}
_LR = re.compile(r"^lr-[^/]+/group0$")
#: the columns a Composer metric may feed
_COLUMNS = ("loss", "grad_norm", "lr", "scale")
#: below this, a four-decimal value is more than 1% off: not read (LR, gradient norm)
ROUNDED_BELOW = 0.005
_ROUNDED = ("lr", "grad_norm")


class ComposerLines:
    """The block being read and the rows of the blocks already closed."""

    def __init__(self) -> None:
        self.block: dict[str, Any] | None = None
        self.in_eval = False
        self.done: list[dict[str, Any]] = []
        self.eval_blocks = 0
        self.rounded = 0  # LR / gradient-norm values left out: too small for four decimals

    def line(self, text: str) -> bool:
        """Whether `text` belongs to Composer's console (then it is consumed)."""
        h = HEADER.match(text) if text.startswith("[") else None
        if h is not None:
            self.close()
            self.block = {"_header": _header_step(h), "_fields": {}}
            return True
        if text.startswith("[") and EVAL_HEADER.match(text):
            self.close()
            self.in_eval = True
            self.eval_blocks += 1
            return True
        m = METRIC.match(text) if (self.block is not None or self.in_eval) else None
        if m is None:
            self.close()
            return False
        if m.group(1) == "Train" and self.block is not None:
            self.block["_fields"][m.group(2).strip()] = m.group(3).strip()
        return True

    def holding(self) -> bool:
        """A block with metrics is open (a paste of one block is still a Composer log)."""
        return self.block is not None and bool(self.block["_fields"])

    def close(self) -> None:
        self.in_eval = False
        block, self.block = self.block, None
        if block is None:
            return
        row = _row(block["_header"], block["_fields"])
        if row is None:
            return
        for col in _ROUNDED:
            if col in row and abs(row[col]) < ROUNDED_BELOW:
                del row[col]
                self.rounded += 1
        if any(c in row for c in _COLUMNS):
            self.done.append(row)

    def notes(self) -> list[Msg]:
        return [Msg("console.composer_rounded", n=self.rounded, below=ROUNDED_BELOW)] if self.rounded else []

    def drain(self) -> list[dict[str, Any]]:
        out, self.done = self.done, []
        return out


def _header_step(h: re.Match[str]) -> int | None:
    epoch, unit, n, total = h.group(1), h.group(2), int(h.group(3)), h.group(4)
    if unit != "batch":
        return None  # tokens or samples: the step comes from `time/batch`
    if epoch is None:
        return n
    return (int(epoch) - 1) * int(total) + n if total else None


def _row(header_step: int | None, fields: dict[str, str]) -> dict[str, Any] | None:
    row: dict[str, Any] = {}
    for name, raw in fields.items():  # Composer's own names first: the loss total before its parts
        col = FIELDS.get(name) or ("lr" if _LR.match(name) else None)
        if col is not None and col not in row:
            row[col] = to_float(raw)
    for name, raw in fields.items():
        hit = column_for(name)
        if hit is not None and hit[0] in _COLUMNS and hit[0] not in row:
            row[hit[0]] = to_float(raw)
    if not row:
        return None
    step = header_step
    if step is None:
        batches = to_float(fields.get("time/batch"))
        step = int(batches) + 1 if batches == batches and batches >= 0 else None
    row["step"] = step
    return row
