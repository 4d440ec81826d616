"""Console logs of tensor- and pipeline-parallel runs (torchtitan, Megatron-LM), read as one run.

Launched with `torchrun --tee 3` (or `srun --label`), every line carries the rank that printed it
(`[rank3]:`, `[default3]:`, `3: `), and under pipeline parallelism the ranks do not print the same
thing:

- torchtitan: every rank whose `--local-ranks-filter` lets it through prints the metrics line
  (`[titan] ... - root - INFO - step: 10  loss:  7.9000  grad_norm:  1.2000  memory: ...GiB(..%)
  tps: ...  tflops: ...  mfu: ...%`, coloured unless `--metrics.disable_color_printing`), but only
  the last stage's ranks have a loss: the others print torchtitan's placeholder `loss: -1.0000`
  (`torch.tensor([-1.0])` where `pp_has_last_stage` is false). The gradient norm is the total over
  the mesh on every rank. The layout is in `Building 2-D device mesh with ['pp', 'tp'], [2, 2]`
  and `PP rank 1 is building stage_idx 1 with start_layer ..., stop_layer ...`.
- Megatron-LM prints the iteration line on the last rank only (`print_rank_last`, the last
  pipeline stage), the arguments block on rank 0 (`tensor_model_parallel_size ... 2`,
  `pipeline_model_parallel_size ... 2`), and each model-parallel rank its
  `> number of parameters on (tensor, pipeline) model parallel rank (t, p): N`.

Read line by line as they come, the console reader would take whichever rank's line came last for
a step (a placeholder -1 from stage 0 over the last stage's real loss, making a NaN run look
healthy). This reader reads the file twice: first which ranks print which metric lines (and the
layout), then the console reader (`sources/stdout.py`) on every line except the metric lines of
the ranks not read: the loss-carrying rank where the loss first went non-finite (else the first
loss-carrying rank). Everything else those ranks printed (arguments, warnings, NCCL or OOM lines)
is read as before. The run's metadata says the layout (`distributed`: mesh, the ranks that printed
the loss, their stage) and a note says which rank was read and why.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..messages import Msg
from ..records import Run
from . import megatron as mg
from .console_text import clean, segments
from .files import open_regular, text_head
from .registry import reader
from .stdout import parse, rows_to_run

_ANSI = re.compile(r"\x1b\[[0-9;?]*[ -/]*[@-~]")
#: the rank a launcher put in front of a line: torchrun's `[rank3]:` / `[default3]:`, srun's `3: `
_RANK = re.compile(r"\s*(?:\[(?:rank|default)(\d{1,6})\]:|(\d{1,6}):\s)")
#: torchtitan's metrics line (after the console's prefixes are stripped)
_TITAN = re.compile(r"^step:\s*(\d+)\s+loss:\s*(\S+)")
#: the value torchtitan prints as the loss on a rank without the last pipeline stage
PLACEHOLDER_LOSS = -1.0
_MESH = re.compile(r"Building \d+-D device mesh with \[([^\]]*)\],\s*\[([^\]]*)\]")
_TITAN_STAGE = re.compile(r"PP rank (\d+) is building stage_idx (\d+)")
_MEGATRON_SIZE = re.compile(r"^\s*(tensor|pipeline)_model_parallel_size\s\.{3,}\s*(\d+)")
# a line that starts with a rank number (`3: ...`): at the text's start, or after a line feed (the
# search runs on the line feed, where `^` under re.M would be tried at every character)
_NUMBERED = re.compile(r"\d{1,6}: ")
_NUMBERED_LINE = re.compile(r"\n\d{1,6}: ")
_MEGATRON_RANK = re.compile(r"\(tensor, pipeline\) model parallel rank \((\d+)\s*,\s*(\d+)\)")
_SNIFF_CHARS = 4 << 20


@dataclass
class RankLines:
    """What one rank printed of the metric lines."""

    lines: int = 0
    placeholder: int = 0  # torchtitan's -1.0
    first_bad: int | None = None  # first step whose loss was not finite
    steps: set[int] = field(default_factory=set)


@dataclass
class Layout:
    """The parallel layout the log states, and what each rank printed."""

    mesh: dict[str, int] = field(default_factory=dict)
    stage_of: dict[int, int] = field(default_factory=dict)  # rank -> pipeline stage
    tp_of: dict[int, int] = field(default_factory=dict)  # rank -> tensor-parallel rank (Megatron)
    ranks: dict[int, RankLines] = field(default_factory=dict)
    prefixed: int = 0  # lines with a rank prefix

    def loss_ranks(self) -> list[int]:
        return sorted(r for r, s in self.ranks.items() if s.lines > s.placeholder)

    def placeholder_ranks(self) -> list[int]:
        return sorted(r for r, s in self.ranks.items() if s.lines and s.placeholder == s.lines)

    def chosen(self) -> int | None:
        """The rank whose metric lines are read: among those that printed a loss, the first to go
        non-finite, else the lowest."""
        carriers = self.loss_ranks()
        if not carriers:
            return None
        return min(carriers, key=lambda r: (self.ranks[r].first_bad is None, self.ranks[r].first_bad or 0, r))


def line_rank(segment: str) -> int | None:
    text = _ANSI.sub("", segment) if "\x1b" in segment else segment
    m = _RANK.match(text)
    if m is None:
        return None
    return int(m.group(1) or m.group(2))


def metric(text: str) -> tuple[int, float] | None:
    """(step, loss) of a torchtitan metrics line or a Megatron iteration line (cleaned), else None."""
    m = _TITAN.match(text)
    if m is not None:
        return int(m.group(1)), _float(m.group(2))
    if "iteration" in text and "|" in text:
        row = mg.parse_iteration(text)
        if row is not None and "step" in row:
            return int(row["step"]), float(row.get("loss", math.nan))
    return None


def _float(s: str) -> float:
    try:
        return float(s.replace(",", ""))
    except ValueError:
        return math.nan


def _layout_line(layout: Layout, rank: int | None, text: str) -> None:
    m = _MESH.search(text)
    if m is not None:
        names = [n.strip().strip("'\"") for n in m.group(1).split(",") if n.strip()]
        sizes = [int(x) for x in re.findall(r"\d+", m.group(2))]
        if len(names) == len(sizes):
            layout.mesh.update(zip(names, sizes))
        return
    m = _TITAN_STAGE.search(text)
    if m is not None and rank is not None:
        layout.stage_of[rank] = int(m.group(2))
        return
    m = _MEGATRON_SIZE.match(text)
    if m is not None:
        layout.mesh["tp" if m.group(1) == "tensor" else "pp"] = int(m.group(2))
        return
    m = _MEGATRON_RANK.search(text)
    if m is not None and rank is not None:
        layout.tp_of[rank], layout.stage_of[rank] = int(m.group(1)), int(m.group(2))


def scan(lines: Iterator[str]) -> Layout:
    """The first pass: the layout lines and, per rank, its metric lines."""
    layout = Layout()
    for raw in lines:
        rank = line_rank(raw)
        if rank is not None:
            layout.prefixed += 1
        text = clean(raw)
        hit = metric(text)
        if hit is None:
            if "mesh" in text or "stage_idx" in text or "model_parallel" in text or "model parallel" in text:
                _layout_line(layout, rank, text)
            continue
        if rank is None:
            continue
        step, loss = hit
        s = layout.ranks.setdefault(rank, RankLines())
        s.lines += 1
        s.steps.add(step)
        if loss == PLACEHOLDER_LOSS and _TITAN.match(text):
            s.placeholder += 1
        elif not math.isfinite(loss) and s.first_bad is None:
            s.first_bad = step
    return layout


def parallel(layout: Layout) -> bool:
    """Whether the log is one this reader is for: metric lines from several ranks, torchtitan's
    placeholder loss, or a stated TP/PP layout with rank-prefixed metric lines."""
    if not layout.ranks:
        return False
    if layout.placeholder_ranks():
        return True
    seen: set[int] = set()
    for s in layout.ranks.values():
        if seen & s.steps:  # two ranks printed the same step
            return True
        seen |= s.steps
    return any(layout.mesh.get(d, 1) > 1 for d in ("pp", "tp"))


def _sniff(p: Path) -> bool:
    if not p.is_file():
        return False
    text = text_head(p, _SNIFF_CHARS)
    if not text:
        return False
    if "[rank" not in text and "[default" not in text and not (_NUMBERED.match(text) or _NUMBERED_LINE.search(text)):
        return False
    return parallel(scan(iter(text.splitlines())))


def _kept(lines: Iterator[str], layout: Layout, read: int) -> Iterator[str]:
    """Every line but the metric lines of other ranks at the steps `read` printed, and the
    placeholder ranks' (their loss is none) wherever `read` has a loss."""
    own = layout.ranks[read].steps
    placeholder = set(layout.placeholder_ranks()) - {read}
    for raw in lines:
        rank = line_rank(raw)
        if rank is not None and rank != read:
            hit = metric(clean(raw))
            if hit is not None and (hit[0] in own or rank in placeholder):
                continue
        yield raw


@reader("tensor/pipeline-parallel console log", _sniff, priority=75)
def read(path: Path) -> list[Run]:
    with open_regular(path) as f:
        layout = scan(segments(f))
    read_rank = layout.chosen()
    placeholders = layout.placeholder_ranks()
    kept = read_rank if read_rank is not None else min(placeholders) if placeholders else None
    with open_regular(path) as f:
        lines = segments(f) if kept is None else _kept(segments(f), layout, kept)
        run = rows_to_run(parse(lines), path.name)
    if read_rank is None and placeholders:  # only stages without the loss are in the log
        run.cols.pop("loss", None)
        run.logged_mask.pop("loss", None)
    describe(run, layout, read_rank)
    return [run]


def describe(run: Run, layout: Layout, read_rank: int | None) -> None:
    """The layout into `meta["distributed"]` and the note saying which rank's metric lines were read."""
    mesh = {k: v for k, v in layout.mesh.items() if v > 1}
    kind = "pp" if mesh.get("pp", 1) > 1 or layout.placeholder_ranks() else "tp" if mesh.get("tp", 1) > 1 else "dp"
    dist: dict[str, Any] = {"kind": kind, "loss_ranks": layout.loss_ranks(), "read_rank": read_rank}
    if mesh:
        dist["mesh"] = mesh
    if read_rank is not None and read_rank in layout.stage_of:
        dist["loss_stage"] = layout.stage_of[read_rank]
    if layout.placeholder_ranks():
        dist["no_loss_ranks"] = layout.placeholder_ranks()
    run.meta["distributed"] = dist
    own = layout.ranks[read_rank].steps if read_rank is not None else set()
    others = sum(len(s.steps & own) for r, s in layout.ranks.items() if r != read_rank)
    stage = dist.get("loss_stage")
    said = {"rank": read_rank, "loss_ranks": _ranges(layout.loss_ranks()), "others": others}
    if read_rank is None:
        note = Msg("parallel_logs.no_loss_rank", ranks=_ranges(sorted(layout.ranks)))
    elif mesh and stage is not None:
        note = Msg(
            "parallel_logs.read_rank_stage", **said, stage=stage, mesh=", ".join(f"{k}={v}" for k, v in mesh.items())
        )
    else:
        note = Msg("parallel_logs.read_rank", **said)
    run.notes.insert(1 if run.notes else 0, note)
    if layout.placeholder_ranks():
        run.notes.insert(
            2, Msg("parallel_logs.placeholder", ranks=_ranges(layout.placeholder_ranks()), value=PLACEHOLDER_LOSS)
        )
    bad = [r for r in layout.loss_ranks() if layout.ranks[r].first_bad is not None]
    if read_rank is not None and layout.ranks[read_rank].first_bad is not None:
        run.notes.append(
            Msg(
                "parallel_logs.first_nonfinite",
                rank=read_rank,
                step=layout.ranks[read_rank].first_bad,
                ranks=_ranges(bad),
            )
        )


def _ranges(ranks: list[int]) -> str:
    """[0, 1, 2, 5] -> "0-2, 5"."""
    parts: list[str] = []
    for r in sorted(set(ranks)):
        if parts and r == int(parts[-1].split("-")[-1]) + 1:
            parts[-1] = f"{parts[-1].split('-')[0]}-{r}"
        else:
            parts.append(str(r))
    return ", ".join(parts)
