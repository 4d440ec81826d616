"""DeepSpeed's own stdout lines: line parsers.

- every `steps_per_print` steps (default 10)::

      [Rank 0] step=120, skipped=7, lr=[0.0001, 0.0001], mom=[(0.9, 0.999), (0.9, 0.999)]

  `skipped` is the running total of skipped steps since the start;
- on every fp16 overflow (ZeRO stage 1/2/3 and the fused optimizers word it a little differently)::

      [deepspeed] OVERFLOW! Rank 0 Skipping step. Attempted loss scale: 65536, reducing to 32768
      [deepspeed] fp16 dynamic loss scale overflow! Skipping step. Attempted loss scale: 4096, reducing to 2048
      Grad overflow on iteration 1234

DeepSpeed does not print the step of an OVERFLOW line. The reader places overflows on the steps
after the last `step=` line in order (consecutive skipped steps, which is what a collapsing scale
looks like) and says so in a note; a `Grad overflow on iteration N` line names its step exactly.

`DeepSpeedLines` is what the console reader (`sources/stdout.py`) keeps for these lines while it
reads a log that may mix them with other frameworks' lines.
"""

from __future__ import annotations

import math
import re
from typing import Any

from ..messages import Msg

STEP = re.compile(r"\bstep=(\d+),\s*skipped=(\d+)(?:,\s*lr=\[([^\]]*)\])?")
OVERFLOW = re.compile(
    r"(?:OVERFLOW!|overflow!).*?Attempted loss scale:\s*([0-9.eE+-]+|inf|nan)"
    r",\s*reducing to\s*([0-9.eE+-]+)"
)
GRAD_OVERFLOW = re.compile(r"Grad overflow on iteration\s+(\d+)")
_RANK = re.compile(r"\bRank (\d+)")
SCALE_UP = re.compile(
    r"(?:No Grad overflow|increasing loss scale|Increasing dynamic loss scale)"
    r".*?(?:to|loss scale:)\s*([0-9.eE+-]+)",
    re.IGNORECASE,
)


def parse_step(line: str) -> dict[str, Any] | None:
    m = STEP.search(line)
    if m is None:
        return None
    row: dict[str, Any] = {"step": int(m.group(1)), "skipped_total": int(m.group(2))}
    if m.group(3):
        first = m.group(3).split(",")[0].strip()
        try:
            row["lr"] = float(first)
        except ValueError:
            pass
    return row


#: DeepSpeed with `hysteresis` > 1 keeps the scale on an overflow and lowers the hysteresis instead:
#: `OVERFLOW! Rank 0 Skipping step. Attempted loss scale: 1, but hysteresis is 2. Reducing hysteresis to 1`
#: (the step is still skipped; the scale stays where it was)
OVERFLOW_HYSTERESIS = re.compile(
    r"(?:OVERFLOW!|overflow!).*?Attempted loss scale:\s*([0-9.eE+-]+|inf|nan),?\s*"
    r"but hysteresis is"
)


#: NVIDIA's fp16_optimizer (Tacotron 2, WaveGlow; the line DeepSpeed's comes from) prints the attempted
#: scale alone: `OVERFLOW! Skipping step. Attempted loss scale: 8388608.0` (the scale it falls to unprinted)
OVERFLOW_ALONE = re.compile(r"^(?:OVERFLOW!|overflow!)\s*Skipping step\.?\s*Attempted loss scale:\s*([0-9.eE+-]+)\s*$")


def parse_overflow(line: str) -> tuple[float, float] | None:
    """(attempted scale, reduced scale) of an overflow line (NaN: the reduced scale is not printed)."""
    m = OVERFLOW.search(line)
    if m is None and (alone := OVERFLOW_ALONE.match(line.strip())) is not None:
        try:
            return float(alone.group(1)), float("nan")
        except ValueError:
            return None
    if m is None:
        h = OVERFLOW_HYSTERESIS.search(line)
        if h is None:
            return None
        try:
            return float(h.group(1)), float(h.group(1))
        except ValueError:
            return None
    try:
        return float(m.group(1)), float(m.group(2))
    except ValueError:
        return None


def parse_grad_overflow(line: str) -> int | None:
    m = GRAD_OVERFLOW.search(line)
    return int(m.group(1)) if m else None


def skipped_row(step: float, reduced: float) -> dict[str, Any]:
    """The row of a step an overflow skipped: skipped, with the scale it was reduced to when the
    line says (an NVIDIA fp16_optimizer line names only the attempted scale)."""
    row: dict[str, Any] = {"step": step, "skipped": 1.0}
    if math.isfinite(reduced):
        row["scale"] = reduced
    return row


class DeepSpeedLines:
    """The state a console reader keeps for DeepSpeed's lines: the running count of skipped steps
    (a `step=` line gives the total since the start), the rank whose OVERFLOW lines are read (every
    rank prints the same overflow), and whether an overflow had to be placed by guess."""

    def __init__(self) -> None:
        self.skipped_total = 0
        self.step_lines = 0  # `step=` lines read so far
        self.overflow_rank: str | None = None
        self.other_rank_overflows = 0
        self.placed_guess = False
        self.placed_before = 0  # OVERFLOW lines read before any row, placed on the steps before the first

    def step(self, text: str) -> dict[str, Any] | None:
        """The row of a `step=N, skipped=K` line, with the steps skipped since the previous one."""
        row = parse_step(text)
        if row is None:
            return None
        total = row.pop("skipped_total")
        row["skipped_in_interval"] = max(0, total - self.skipped_total)
        self.skipped_total = total
        self.step_lines += 1
        if self.step_lines == 1 and total and row.get("step"):
            # the first line's total counts every skip since the run began (an excerpt from step 320 on:
            # `step=320, skipped=21`): a share of all the steps before it, not of one interval
            row["skipped"] = min(1.0, total / row["step"])
        return row

    def overflow(self, text: str) -> tuple[float, float] | tuple[()] | None:
        """(attempted scale, reduced scale) of an OVERFLOW line to place; () for another rank's copy
        of it (counted, not placed); None when `text` is no OVERFLOW line."""
        ov = parse_overflow(text)
        if ov is None:
            return None
        rank = _RANK.search(text)
        if rank is not None:
            if self.overflow_rank is None:
                self.overflow_rank = rank.group(1)
            elif rank.group(1) != self.overflow_rank:
                self.other_rank_overflows += 1
                return ()
        return ov

    def place_overflow(
        self, rows: list[dict[str, Any]], marker: int | None, since_marker: int, attempted: float, reduced: float
    ) -> int:
        """Append an overflow to `rows`: on the step a `Grad overflow on iteration N` line just named,
        else on the next step after the last one a counter said was done (`marker`), the attempted
        scale on the step before. Returns the overflows placed after `marker` so far."""
        last = rows[-1] if rows else None
        if (
            last is not None
            and since_marker == 0
            and last.get("skipped") == 1.0
            and last["step"] == marker
            and "scale" not in last
        ):
            if math.isfinite(reduced):
                last["scale"] = reduced
            return since_marker
        since_marker += 1
        step = (marker if marker is not None else 0) + since_marker
        self.placed_guess = True
        if since_marker == 1 and math.isfinite(attempted):
            rows.append({"step": step - 1, "scale": attempted, "_weak": True})
        rows.append(skipped_row(step, reduced))
        return since_marker

    def rank_notes(self) -> list[Msg]:
        if not self.other_rank_overflows:
            return []
        return [Msg("console.other_rank_overflows", n=self.other_rank_overflows, rank=self.overflow_rank)]

    def placement_notes(self) -> list[Msg]:
        out = [Msg("console.deepspeed_overflow_placed")] if self.placed_guess else []
        if self.placed_before:
            out.append(Msg("console.overflow_placed_before", n=self.placed_before))
        return out
