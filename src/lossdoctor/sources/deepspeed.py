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
"""

from __future__ import annotations

import re
from typing import Any

STEP = re.compile(r"\bstep=(\d+),\s*skipped=(\d+)(?:,\s*lr=\[([^\]]*)\])?")
OVERFLOW = re.compile(r"(?:OVERFLOW!|overflow!).*?Attempted loss scale:\s*([0-9.eE+-]+|inf|nan)"
                      r",\s*reducing to\s*([0-9.eE+-]+)")
GRAD_OVERFLOW = re.compile(r"Grad overflow on iteration\s+(\d+)")
SCALE_UP = re.compile(r"(?:No Grad overflow|increasing loss scale|Increasing dynamic loss scale)"
                      r".*?(?:to|loss scale:)\s*([0-9.eE+-]+)", re.IGNORECASE)


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


def parse_overflow(line: str) -> tuple[float, float] | None:
    """(attempted scale, reduced scale) of an overflow line."""
    m = OVERFLOW.search(line)
    if m is None:
        return None
    try:
        return float(m.group(1)), float(m.group(2))
    except ValueError:
        return None


def parse_grad_overflow(line: str) -> int | None:
    m = GRAD_OVERFLOW.search(line)
    return int(m.group(1)) if m else None
