"""What a trainer logs, into the step record: the scalars only the trainer computes.

TRL's preference trainers (DPO, ORPO, KTO, CPO) compute their loss, implicit rewards and
log-probs outside the model and hand them to the Trainer's `log` (`rewards/chosen`,
`logps/rejected`...), which passes them to every callback's `on_log`. This probe puts them into
the record of the optimizer step they describe, under the same column names the log readers use
(`sources.columns`), so the preference detector reasons over the same numbers live and from
`trainer_state.json`.

The loss: the model's forward returns its language-model loss on the chosen and rejected
sequences, which is not what a preference trainer optimises. With `replace_loss` the record's
`loss` is the one the trainer logged (its DPO loss), and a step the trainer did not log has no
loss, rather than a number of another kind. The Trainer logs an interval whose every loss was NaN
as 0.0 (`logging_nan_inf_filter`) next to a non-finite grad norm: that 0.0 is recorded as NaN, as
the `trainer_state.json` reader reads it.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from ..records import to_float
from ..sources.columns import SIDE_COLUMNS, column_for
from ..sources.hf_trainer import is_filtered_nan


def logged_scalars(logs: Mapping[str, Any]) -> dict[str, float]:
    """{column: value} of the training scalars in one `on_log` dict that the Trainer's own
    signals do not already give (the loss, an RL reward and the preference columns); NaN/inf kept."""
    out: dict[str, tuple[int, float]] = {}
    for key, value in logs.items():
        if not isinstance(key, str) or value is None or isinstance(value, (str, bytes)):
            continue
        hit = column_for(key)
        if hit is None or not (hit[0] == "loss" or hit[0] in SIDE_COLUMNS):
            continue
        v = to_float(value)
        if hit[0] not in out or hit[1] < out[hit[0]][0]:
            out[hit[0]] = (hit[1], v)
    got = {col: v for col, (_, v) in out.items()}
    if is_filtered_nan(got.get("loss"), logs.get("grad_norm")):
        got["loss"] = float("nan")  # the Trainer's NaN filter logs an all-NaN interval as 0.0
    return got


class TrainerLogProbe:
    """A monitor probe (`signals.probe`): the scalars of the latest `on_log` into the next step
    record (`take` before `mon.step`)."""

    name = "trainer logs"

    def __init__(self, replace_loss: bool = False) -> None:
        self.enabled = True
        self.replace_loss = replace_loss
        self._pending: dict[str, float] = {}

    def take(self, logs: Mapping[str, Any]) -> None:
        self._pending = logged_scalars(logs)

    def flush(self, packer: Any, step: Any) -> dict[str, float]:
        ctx, self._pending = self._pending, {}
        return ctx

    def interpret(self, values: Mapping[str, np.ndarray], ctx: dict[str, float], rec: dict[str, Any]) -> None:
        if self.replace_loss:
            rec["loss"] = ctx.get("loss")  # None (dropped) at a step the trainer did not log
        for col, v in ctx.items():
            if col != "loss":
                rec[col] = v

    def remove(self) -> None:
        self._pending = {}
