"""Training console output of any trainer, read in one pass as one run.

What a user has after a failed run is what the trainer printed: a terminal scroll, `nohup.out`,
`slurm-1234.out`, a few lines pasted into an issue. One reader takes it all, line by line
(`console_text` splits `\\r`-redrawn bars and strips colours, rank prefixes and timestamps once),
trying a small table of line kinds on each clean segment:

- Megatron-LM / GPT-NeoX / Megatron-DeepSpeed iteration lines and the arguments block (`megatron`:
  its parsers and `MegatronLines`, the state kept for them);
- DeepSpeed's `step=N, skipped=K` and `OVERFLOW! ... Attempted loss scale` lines (`deepspeed`: its
  parsers and `DeepSpeedLines`: skipped counts, which rank is read, where a stepless overflow goes);
- Hugging Face Trainer dicts, tqdm bars (their counter and postfix), and any `name: number` line
  with a step counter: nanoGPT, litgpt, mlx-lm, torchtitan, fairseq, an unseen trainer
  (`console_lines`).

A log that mixes them (Megatron-DeepSpeed, or the Trainer over DeepSpeed) is one run, merged by
step. Where a line carries no step, it gets one from its neighbours, and the notes say how:

- an HF Trainer dict is printed right after the progress bar moved to its step, and tqdm redraws
  the bar right after the dict (`tqdm.write`), so the dict takes the counter of the bar drawn next
  (the bar drawn before it can lag by a few steps: tqdm redraws at most every 0.1 s); a bar
  nested under it (the evaluation bar, drawn after a cursor-up) is not the training counter;
- DeepSpeed prints no step with an OVERFLOW line: it belongs to the step after the last counter
  (iteration line, `step=` line or bar), and consecutive overflows to consecutive steps;
- with no counter at all, rows are numbered 1, 2, 3... and the note says the step is unknown.

Interval counts become per-step-compatible columns: `skipped` is the *fraction* of the interval's
iterations that were skipped (0/1 on a per-step log, the same meaning), and the raw counts stay in
`skipped_in_interval` / `nan_in_interval` for the report.
"""

from __future__ import annotations

import math
import re
from collections import Counter
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import numpy as np

from ..messages import Msg
from ..records import (
    FLAG_DROP,
    FLAG_NAN_FILTER,
    FLAG_WEAK,
    HOW,
    NAN_FILTER_META,
    THINNING,
    Run,
    StepColumns,
    Thinning,
    from_columns,
)
from . import composer as co
from . import console_fast as fast
from . import console_lines as cl
from . import deepspeed as ds
from . import line_prefix
from . import megatron as mg
from .columns import SIDE_COLUMNS
from .console_text import CURSOR_UP, EVAL_SECTION, clean, segments
from .files import head, looks_binary, open_regular
from .hf_trainer import filtered_nan_note, is_filtered_nan
from .registry import SourceError, reader
from .text_events import Events
from .text_slots import counted_on, whole_numbers

_SNIFF_BYTES = 8 << 20
_SNIFF_CONSOLE_BYTES = 4 << 20
_SNIFF_SEGMENTS = 20_000
_ANY = re.compile(
    rb"\biteration\s+\d+\s*/\s*\d+\s*\|.*loss|\bstep=\d+,\s*skipped=\d+|"
    rb"Attempted loss scale:|Grad overflow on iteration"
)
#: a segment worth the key-value parser: names a training metric
#: (trl, tel: llm.c's main.log; `Score at iteration`: deeplearning4j's ScoreIterationListener)
_HINT = re.compile(r"loss|norm|\blr\b|learning|scale|\b(?:trl|tel):|Score at iteration", re.IGNORECASE)
#: a line that reports an evaluation, not a training step: it starts with an evaluation word as its own
#: field (fairseq's `valid | epoch 002 | valid on 'valid' subset | loss 9.393 | ...`, `eval: loss ...`),
#: or names the subset it was evaluated on (fairseq's `valid on 'valid' subset`), or opens with an
#: evaluation's loss and what it was taken at (Megatron's ` validation loss at iteration 500 | lm loss
#: value: 2.1 | ...`). Its `loss` is no training loss even though the name alone does not say so.
_EVAL_LINE = re.compile(
    r"(?:\|\s*)?(?:val|valid|validation|eval|evaluation|test|dev)\s*[|:,\]-]|.*\bvalid on '[^']*' subset|"
    r"\s*(?:val|valid|validation|eval|evaluation|test|dev)\s+loss\s+(?:at|after|for|on|of)\b",
    re.IGNORECASE,
)
#: a tqdm bar with nothing around it, `  45%|####      | 45/100 [00:10<00:12,  4.50it/s]`: no prefix for
#: `clean` to strip, no description or postfix for `console_lines.tqdm_bar` to read, no cursor-up; read
#: as that function reads it (its counter and total) without the general pattern
_PLAIN_BAR = re.compile(r"\s*\d{1,3}%\|[^\[\]|=\x1b]*\| *(\d+)/(\d+) \[(?:\d+:)?\d+:\d\d[^\]=\x1b]*\]\s*$")
_NOT_CONSOLE = (".csv", ".tsv", ".jsonl", ".ndjson", ".json", ".parquet", ".wandb", ".npz", ".pt")

#: what each kind of line is called in the notes, in the order the notes list them
KINDS = {
    "megatron": Msg("console.kind_megatron"),
    "ds_step": Msg("console.kind_ds_step"),
    "ds_overflow": Msg("console.kind_ds_overflow"),
    "grad_overflow": Msg("console.kind_grad_overflow"),
    "hf": Msg("console.kind_hf"),
    "tqdm": Msg("console.kind_tqdm"),
    "nanoGPT": Msg("console.kind_nanogpt"),
    "litgpt": Msg("console.kind_litgpt"),
    "mlx-lm": Msg("console.kind_mlx_lm"),
    "torchtitan": Msg("console.kind_torchtitan"),
    "keras": Msg("console.kind_keras"),
    "composer": Msg("console.kind_composer"),
    "key-value": Msg("console.kind_key_value"),
}
LOOKED_FOR = (
    "Hugging Face Trainer dicts, tqdm bars with loss=, Megatron/DeepSpeed lines, nanoGPT/"
    "litgpt/mlx-lm/torchtitan/Keras lines, Composer metric blocks, or lines with a step counter and a "
    "loss, grad norm or lr"
)


class ConsoleParser:
    """Feed it raw segments; `rows` gets one dict per logged step (several may share a step)."""

    def __init__(self, thinning: Thinning = THINNING) -> None:
        self.rows: list[dict[str, Any]] = []  # the latest rows, still open to change; older ones are in `store`
        self.store = StepColumns(_COLUMNS, thinning)
        self.megatron = mg.MegatronLines()  # the arguments block, dropped losses
        self.deepspeed = ds.DeepSpeedLines()  # skipped-step counts, which rank's overflows are read
        self.nan_average_seen = False  # a loss line whose running average was non-finite was read
        self.composer = co.ComposerLines()  # the metric block being read
        self.counts: Counter[str] = Counter()
        self.ignored = 0  # segments with text that no pattern used
        self.eval_dicts = 0
        self.eval_lines = 0
        self.finer_counter = 0  # lines with two counters whose finer one was taken (litgpt's iter over step)
        self.bar_done = True  # the last training bar reached its total (or has none)
        self.marker: int | None = None  # the last step a counter said was done
        self.since_marker = 0  # overflows placed after it
        self.pending: dict[str, Any] | None = None  # a row waiting for the next counter
        self.last_counter: int | None = None
        self.tqdm_steps: set[int] = set()
        self.bar_before: dict[str, Any] | None = None  # the bar's row before its last step
        self.bar_tail: list[dict[str, Any]] = []  # the bar's rows at its last step
        self.last_pending_step: int | None = None
        self.pending_interval = 1
        self.numbered = 0  # rows numbered in order, for want of any counter
        #: (attempted, reduced) scale of the OVERFLOW lines read before any row: placed once the first row says its step
        self.early_overflows: list[tuple[float, float]] = []
        self.early_evals: list[float] = []  # evaluation losses read before any step (see `_eval`)
        self.epoch_rows = 0  # rows placed at their epoch, for want of anything finer
        self.leading_spaced = 0  # rows with no step before the first counted one, placed an interval apart
        self.keras_epoch = 0  # the last "Epoch N/M" line
        self.keras_restarts = 0  # bars begun again since that line with no header of their own (Keras 1)
        self.keras_last: tuple[int, int] | None = None  # (batch, total) of the last bar read
        #: rows of bars read before any `Epoch N/M` line (an excerpt cut inside an epoch): None once dated
        self.keras_orphans: list[dict[str, Any]] | None = []
        self.keras_ends = 0  # bar rows at their epoch's last batch: each the mean over its epoch
        self.keras_inside = 0  # bar rows inside an epoch
        self.keras_first: int | None = None  # the numbered epoch of the first bar row (None: not numbered)
        self.first_epoch: float | None = None  # the first HF dict's epoch (>= 1: the paste starts mid-run)
        self.events = Events()  # overflow, NaN-warning, OOM... lines at the row read before them
        self.eval_rows = 0  # rows holding only an evaluation's loss
        self.component_rows = 0  # rows holding component losses
        self.line_no = 0
        self.templates: list[fast.Template] = []  # line shapes learned for the fast path (console_fast)
        self.dict_templates: list[fast.DictTemplate] = []  # Trainer log-dict shapes learned
        self._cycles: list[fast.Cycle] = []
        self._learnable: tuple[dict[str, Any], tuple] | None = None
        self._shapes: set[str] = set()  # line shapes already offered to `fast.learn`
        self.in_eval = False  # inside an evaluation section (`Eval begin...`: console_text.EVAL_SECTION)
        self.last_train_line: str | None = None  # the last `name: number` line read as a training row
        self.pending_epoch: Any = None  # the epoch of the waiting log dict
        self.twice = 0  # log dicts printed a second time by another logger, merged into the first
        self.node_copies = 0  # log dicts printed again, the same, by another node (another line prefix)
        self.pending_prefix = ""  # the text before the waiting log dict on its line (a host, a rank)
        self.indented = False  # the segment being read began with a space or tab
        #: the last step row and its line, while only indented lines follow it
        self.under: tuple[dict[str, Any], str] | None = None
        self.bar_loss_keys: Counter[str] = Counter()  # the names progress bars print their loss under
        self.term_shapes: set[tuple[str, ...]] = set()  # per-term lines whose terms summed to their step's loss

    def n_rows(self) -> int:
        """Rows read so far (the next row's ordinal)."""
        return self.store.total + len(self.rows)

    def _spill(self, final: bool = False) -> None:
        """Move the rows no line can change any more into the column store: all but the latest
        `_KEEP_RECENT`, and none from the progress bar's rows still open (`bar_before`, `bar_tail`)."""
        cut = len(self.rows) if final else len(self.rows) - _KEEP_RECENT
        if cut <= 0:
            return
        open_rows = {id(r) for r in self.bar_tail}
        if self.bar_before is not None:
            open_rows.add(id(self.bar_before))
        if open_rows and not final:
            cut = next((i for i, r in enumerate(self.rows[:cut]) if id(r) in open_rows), cut)
        if cut > 0:
            self.store.append_rows(self.rows[:cut])
            del self.rows[:cut]

    # --- one segment ---------------------------------------------------------------------

    def feed(self, raw: str) -> None:
        self.line_no += 1
        if not raw or raw.isspace():
            return  # what `clean` leaves of it is nothing (a bar cleared by tqdm.write)
        bar = _PLAIN_BAR.match(raw)
        if bar is not None:  # a bare tqdm bar (no description, no postfix): what `tqdm_bar` reads of it
            self._bar(int(bar.group(1)), int(bar.group(2)), {}, nested=False)
            return
        if raw[:2] == "{'" and self.dict_templates and fast.FAST and self._idle():
            for t in self.dict_templates:
                m = t.rx.fullmatch(raw)
                if m is not None:  # a log dict of a learned shape: the row `hf_dict` would make
                    self._hf(t.row(m))
                    return
        text = clean(raw)
        nested = CURSOR_UP in raw
        for _ in range(64):  # bars, and what was printed after them before a newline
            if not ("[" in text and ":" in text):
                break
            parsed = cl.tqdm_bar(text)
            if parsed is None:
                break
            n, total, metrics, end = parsed
            self._bar(n, total, metrics, nested=nested)
            # what a print wrote right after the bar (no line break between them: the bar on
            # stderr, the print on stdout) is a line of its own, with its own timestamp or logger prefix
            text = clean(text[end:]).strip()
            if len(text) <= 2:
                return
        if text:
            self._learnable = None
            self.indented = raw[:1] in " \t"
            if not self.indented:
                self.under = None
            self._line(text)
            if (
                self._learnable is not None
                and raw == text
                and "[" not in text
                and len(self.templates) < fast.MAX_TEMPLATES
                and self._new_shape(text)
            ):
                t = fast.learn(text, *self._learnable)
                if t is not None and all(t.rx.pattern != o.rx.pattern for o in self.templates):
                    self.templates.append(t)

    def _new_shape(self, text: str) -> bool:
        """True the first time a line of this shape (its digits aside) is seen: worth learning."""
        shape = text.translate(cl._ZERO_DIGITS)
        if shape in self._shapes:
            return False
        if len(self._shapes) < 4096:
            self._shapes.add(shape)
        return True

    def _idle(self) -> bool:
        """No arguments block or Composer block open that a line could belong to."""
        return not (
            self.megatron.in_args
            or self.composer.block is not None
            or self.composer.in_eval
            or self.in_eval
            or self.megatron.wrapped is not None
        )

    def can_bulk(self) -> bool:
        """True when a learned line would be read the same whatever came before it, and its row can go
        straight to the store: idle, and no progress-bar rows open."""
        return self._idle() and not (self.bar_tail or self.bar_before is not None)

    def cycles(self) -> list[fast.Cycle]:
        """The Trainer console cycles of the learned log-dict shapes (built once per shape)."""
        if len(self._cycles) != len(self.dict_templates):
            self._cycles = [fast.cycle_of(t) for t in self.dict_templates]
        return self._cycles

    def bulk_cycles(self, c: fast.Cycle, groups: list, segments: int) -> bool:
        """Cycles of log dict + bar redraws (`console_fast.Cycle`), read as `feed` would read their
        segments: each dict waits for a step and the bar drawn next gives it (`_place_pending`); the
        bars move the counter. False (nothing read) unless that reading is certain: no row waiting
        before them, and each dict's bar counter beyond the one before."""
        v = fast.cycle_values(c, groups)
        steps = v.steps
        if (
            self.pending is not None
            or not self.can_bulk()
            or np.any(np.diff(steps) <= 0)
            or (self.last_pending_step is not None and steps[0] <= self.last_pending_step)
        ):
            return False
        cols = v.cols
        if v.epoch is not None and self.first_epoch is None:
            self.first_epoch = v.epoch
        flags = None
        if "loss" in cols and "grad_norm" in cols:  # `is_filtered_nan`: an all-NaN interval logged as 0.0
            filtered = (cols["loss"] == 0.0) & ~np.isfinite(cols["grad_norm"])
            if filtered.any():
                cols["loss"] = np.where(filtered, np.nan, cols["loss"])
                flags = np.where(filtered, FLAG_NAN_FILTER, 0).astype(np.uint8)
        self._spill(final=True)
        self.under = None
        self.store.append_arrays(steps, cols, how="counter", flags=flags)
        self.counts["hf"] += len(steps)
        if self.last_pending_step is not None or len(steps) > 1:
            prev = steps[-2] if len(steps) > 1 else self.last_pending_step
            self.pending_interval = max(1, int(steps[-1] - prev))
        self.last_pending_step = int(steps[-1])
        self.bar_done = bool(v.last[0] >= v.last[1])
        self.last_counter = int(v.last[0])
        top = int(v.top)
        if self.marker is None or top > self.marker:
            self.marker, self.since_marker = top, 0
        self.line_no += segments
        return True

    def bulk(self, t: fast.Template, values: np.ndarray) -> None:
        """Lines of a learned shape, read as the line parser would read each (`console_fast`): plain
        step rows, each the new marker, appended as arrays."""
        m = values.shape[0]
        if not m:
            return
        self.under = None  # rows read in bulk are no dicts a term line could go to
        self._flush_pending()
        self._spill(final=True)
        si = t.cols.index("step")
        self.store.append_arrays(values[:, si], {c: values[:, j] for j, c in enumerate(t.cols) if c != "step"})
        self.counts[t.dialect] += m
        self.line_no += m
        self.marker, self.since_marker = int(values[-1, si]), 0

    def _line(self, text: str) -> None:
        if self.megatron.wrapped is not None or "iteration" in text:
            held, rest = self.megatron.unwrap(text)
            if held is not None:
                self._read_line(held)
            if rest is None:
                return
            text = rest
        self._read_line(text)

    def _read_line(self, text: str) -> None:
        if self.in_eval or len(text) <= 64 and EVAL_SECTION.match(text):
            if self._section(text):
                return
        if self.megatron.argument_line(text):
            return
        if (text[:1] == "[" or self.composer.block is not None or self.composer.in_eval) and self._composer(text):
            return
        if self._keras_line(text) or self._megatron_deepspeed_line(text):
            return
        if "{" in text and self._dict_line(text):
            return
        if _HINT.search(text) and self._key_value(text):
            return
        if self.indented and self.under is not None and self._terms_under(text, *self.under):
            return
        # a row waiting for its counter (an HF dict before its bar) is read already: the event is after it
        self.events.scan(self.line_no, text, self.n_rows() + (self.pending is not None))
        self.ignored += 1

    def _keras_line(self, text: str) -> bool:
        """A Keras progress bar (`12/100 [==>...] - loss: ...`) or its `Epoch 3/10` header: True when read."""
        if text[:1].isdigit() and " - " in text:
            keras = cl.keras_bar(text)
            if keras is not None:
                self._keras(*keras)
                return True
        if text.startswith("Epoch "):
            e = cl.KERAS_EPOCH.match(text)
            if e is not None:
                if self.keras_orphans:
                    self._date_orphans(int(e.group(1)))
                self.keras_orphans = None
                self.keras_epoch, self.keras_restarts, self.keras_last = int(e.group(1)), 0, None
                return True
        return False

    def _megatron_deepspeed_line(self, text: str) -> bool:
        """A Megatron iteration line, a gradient-overflow line, a DeepSpeed `step=` line or an
        OVERFLOW report (placed at the step it belongs to): True when read."""
        if "iteration" in text:
            row = self.megatron.iteration(text)
            if row is not None:
                self.counts["megatron"] += 1
                self._add(row, marker=True)
                return True
            it = ds.parse_grad_overflow(text)
            if it is not None:
                self.counts["grad_overflow"] += 1
                self._add({"step": it, "skipped": 1.0}, marker=True)
                return True
        if "step=" in text:
            row = self.deepspeed.step(text)
            if row is not None:
                self.counts["ds_step"] += 1
                self._add(row, marker=True)
                if row.get("skipped_in_interval"):  # DeepSpeed's `skipped=N` counter rose
                    self.events.add(self.line_no, "overflow", text, self.n_rows())
                return True
        if "VERFLOW" in text or "verflow" in text:
            ov = self.deepspeed.overflow(text)
            if ov is not None:
                if ov:  # () is another rank's copy of an overflow already read
                    self.counts["ds_overflow"] += 1
                    if self.epoch_rows and self.marker is None and self.last_counter is None:
                        pass  # rows at their epoch: the skipped step is one of thousands inside it (an event)
                    elif (
                        self.marker is None
                        and self.last_counter is None
                        and not self.rows
                        and not self.store.n
                        and self.pending is None
                    ):
                        self.early_overflows.append(ov)
                    elif self.marker is None and self.last_counter is None:
                        self._overflow_in_order(ov)
                    else:
                        self.since_marker = self.deepspeed.place_overflow(
                            self.rows, self.marker, self.since_marker, *ov
                        )
                    self.events.add(self.line_no, "overflow", text, self.n_rows())
                return True
        return False

    def _dict_line(self, text: str) -> bool:
        """A Hugging Face Trainer dict (`{'loss': ...}`; its shape learned for the fast path) or an
        evaluation's dict: True when read."""
        row = cl.hf_dict(text)
        if row is None:
            return False
        if row:
            if len(self.dict_templates) < fast.MAX_TEMPLATES and self._idle() and fast.FAST and self._new_shape(text):
                t = fast.learn_dict(text, row)
                if t is not None and all(t.rx.pattern != o.rx.pattern for o in self.dict_templates):
                    self.dict_templates.append(t)
            self._hf(row, text[: text.find("{")])
        else:
            self.eval_dicts += 1
            self._eval({"step": None, "eval_loss": cl.hf_eval_loss(text)})
        return True

    def _section(self, text: str) -> bool:
        """A line of an evaluation section: its opening line, a line of prose inside it (`please be
        patient`, a warning), or a line with a loss and no step counter of its own (athena's
        `loss: 19.17 Accuracy: 0.81` under `start evaluate in epoch 16`, its epoch summary), or one
        shaped like the last training row, whose loss is the evaluation's (kept as `eval_loss` at the
        last training step). True when used; the section ends at a line of another shape or at a
        training-shaped line whose step is past the last training step (training again)."""
        if EVAL_SECTION.match(text):
            self.in_eval = True
            return True
        if self.in_eval and not any(c.isdigit() for c in text):
            return True  # prose between the evaluation's lines
        was, self.in_eval = self.in_eval, False
        row = cl.key_values(text)
        if self.last_train_line is None or row is None or "loss" not in row:
            return False
        if _shape(text) != _shape(self.last_train_line):
            if not (was and row["step"] is None):
                return False
        elif row["step"] is not None and self.rows and row["step"] > self.rows[-1]["step"]:
            return False  # the training line again, at a step past the last: the section is over
        self.in_eval = True
        self.eval_lines += 1
        self._eval({"step": None, "eval_loss": row["loss"]})
        return True

    def _key_value(self, text: str) -> bool:
        """A `name: number` line with a step counter (or two training metrics): True when used."""
        if "," in text:
            text = whole_numbers(text)  # `iter:  25,390,`: one number
        if _EVAL_LINE.match(text):
            self.eval_lines += 1
            self._eval(cl.key_values(cl.EVAL_WORD.sub(" ", text)) or {})
            return True
        row = cl.key_values(text)
        if row is not None and "eval_loss" in row:
            self.eval_rows += 1
        if row is not None and "_components" in row:
            self.component_rows += 1
        if row is not None and "eval_loss" in row and not any(c in row for c in cl.METRICS):
            self.eval_lines += 1  # only an evaluation loss (`Iter 10: Val loss 2.345`)
            self._eval(row)
            return True
        if row is not None and (row["step"] is not None or "_epoch" in row or sum(c in row for c in cl.METRICS) >= 2):
            self._skip_total(text, row)
            self._nan_in_average(text, row)
            under = (
                self.keras_epoch
                and "_epoch" not in row
                and row["step"] is not None
                and _LEADING_OF_TOTAL.match(text) is not None
            )
            if under:  # its step depends on the header line before it: never read in bulk
                row["step"] = _under_epoch_header(text, self.keras_epoch, row["step"])
            # a plain step row is a template for the fast path; not one with a running skip counter
            # (its interval count is the difference to the line before, which a bulk read skips)
            if (
                row["step"] is not None
                and "skipped" not in text
                and not under
                and all(k[0] != "_" or k == "_dialect" for k in row)
            ):
                self._learnable = (dict(row), cl.plan_fields(text))  # a plain step row: a template for the fast path
            self.counts[row.pop("_dialect")] += 1
            if "loss" in row:
                self.last_train_line = text
            epoch = row.pop("_epoch", None)
            if row.pop("_finer_counter", False):
                self.finer_counter += 1
            if row["step"] is None and epoch is not None and self.last_counter is None and self.marker is None:
                row["step"], row["_how"] = epoch, "epoch"  # nothing finer than the epoch
                self.epoch_rows += 1
                self._add(row, marker=False)
            elif row["step"] is None:
                self._wait_for_step(row)
            else:
                self._add(row, marker=True)
                self.under = (row, text)
            return True
        return False

    def _terms_under(self, text: str, row: dict[str, Any], line: str) -> bool:
        """An indented line of named numbers under a step line: the step's loss terms, once a line of
        these names has summed to its step's loss (a line of other numbers, `fg/bg=(2/126)`, never
        does). True when read. The step line's learned shape is dropped (and never learned again): its rows
        must stay open to their term lines, which a bulk read would not wait for."""
        terms = cl.term_line(text)
        if terms is None:
            return False
        names = tuple(terms)
        if names not in self.term_shapes:
            if not cl.sums_to(terms, float(row.get("loss", float("nan")))):
                return False
            self.term_shapes.add(names)
        if self.templates:
            self.templates = [t for t in self.templates if t.rx.match(line.encode() + b"\n") is None]
        row.setdefault("_components", {}).update(terms)
        self.component_rows += 1
        return True

    def _skip_total(self, text: str, row: dict[str, Any]) -> None:
        """A `skipped: K` counter in a key/value line (DeepSpeed's running total of skipped steps, as
        its `step=N, skipped=K` line has it): the steps skipped since the previous such line."""
        m = _SKIP_TOTAL.search(text) if "skipped" in text else None
        if m is None:
            return
        total = int(m.group(1))
        k = max(0, total - self.deepspeed.skipped_total)
        row["skipped_in_interval"] = k
        self.deepspeed.skipped_total = total
        if k:  # an event at the row this line is about to add (a waiting row, if any, comes first)
            self.events.add(
                self.line_no, "skip_count", text, self.n_rows() + (self.pending is not None) + 1, {"count": k}
            )

    def _nan_in_average(self, text: str, row: dict[str, Any]) -> None:
        """The loss's running average printed beside it non-finite while the loss is finite
        (`loss: 23.3687 (nan)`, maskrcnn-benchmark's MetricLogger: a window's median beside its global
        average): a NaN/Inf loss entered the meter since the run began, which the print hides. A
        `nonfinite_loss` event at the row this line adds, once (the first such line dates it)."""
        if self.nan_average_seen or not isinstance(row.get("loss"), float) or not math.isfinite(row["loss"]):
            return
        if "(" not in text or _NAN_AVERAGE.search(text) is None:
            return
        self.nan_average_seen = True
        at = self.n_rows() + (self.pending is not None) + 1
        self.events.add(
            self.line_no, "nonfinite_loss", text, at, {"step": row["step"]} if row["step"] is not None else {}
        )

    def _eval(self, row: dict[str, Any]) -> None:
        """An evaluation's loss, kept apart as `eval_loss`: at the step its line names, else at the last
        step a counter said was done; dropped when neither is known."""
        v = row.get("eval_loss", row.get("loss"))
        step = row.get("step")
        for fallback in (self.marker, self.last_counter):
            step = step if step is not None else fallback
        if v is not None and step is None and self.pending is not None:
            self.pending.setdefault("eval_loss", v)  # at the step the training row waiting for one gets
            self.eval_rows += 1
            return
        if step is None and self.rows:
            step = self.rows[-1]["step"]
        if v is not None and step is None and self.store.total == 0:
            # an excerpt cut after the training line of the step this evaluation ran at (OpenSeq2Seq's
            # `Validation loss: 250.1655` above the first `Epoch 10, global step 21: Train loss`): kept
            # for the step right before the first one read, as the OVERFLOW lines read before any row
            self.early_evals.append(v)
            return
        if v is None or step is None:
            return
        self.rows.append({"step": step, "eval_loss": v})

    # --- kinds of lines ------------------------------------------------------------------

    def _composer(self, text: str) -> bool:
        consumed = self.composer.line(text)
        for row in self.composer.drain():
            self.counts["composer"] += 1
            if row["step"] is None:
                self._wait_for_step(row)
            else:
                self._add(row, marker=True)
        return consumed

    def _keras(self, batch: int, per_epoch: int, metrics: dict[str, Any]) -> None:
        """Keras counts batches within an epoch: the step is (epoch - 1) * batches per epoch + batch. A
        bar that begins again (at or below the last bar's batch, the same total) with no `Epoch N/M`
        line between is the next epoch's (Keras 1 printed no header: `215424/215375 [====] - 418s -
        train loss: 3.7656` once per epoch)."""
        if self.keras_last is not None and self.keras_last[1] == per_epoch and batch <= self.keras_last[0]:
            self.keras_restarts += 1
        self.keras_last = (batch, per_epoch)
        step = (max(self.keras_epoch, 1) - 1 + self.keras_restarts) * per_epoch + batch
        if metrics:
            self.counts["keras"] += 1
            self._count_keras_row(batch >= per_epoch)
            row = {"step": step, **metrics}
            self._add(row, marker=True)
            if self.keras_orphans is not None and self.keras_epoch == 0:
                self.keras_orphans.append(row)
                if len(self.keras_orphans) > _KEEP_RECENT:
                    self.keras_orphans = None  # too many to hold: left as counted from epoch 1

    def _count_keras_row(self, at_end: bool) -> None:
        """Count a bar row at its epoch's end or inside it, and note the first row's epoch when an
        `Epoch N/M` line numbers it: a log of end-of-epoch bars only is a log of epoch means
        (`keras_epoch_rows`), as Keras's `verbose=2` lines are."""
        if self.keras_ends + self.keras_inside == 0 and self.keras_epoch > 0:
            self.keras_first = self.keras_epoch + self.keras_restarts
        if at_end:
            self.keras_ends += 1
        else:
            self.keras_inside += 1

    def keras_epoch_rows(self) -> int | None:
        """The epoch of the first row when every row read is a Keras bar at its epoch's end (two or
        more: one mean per epoch), 0 when that epoch is not numbered; None for any other log."""
        if self.keras_ends < 2 or self.keras_inside or sum(self.counts.values()) != self.counts["keras"]:
            return None
        return self.keras_first or 0

    def _date_orphans(self, epoch: int) -> None:
        """Bars printed before the first `Epoch N/M` line are the epoch before it (an excerpt that starts
        inside epoch N-1, its header cut off), not epoch 1: their steps move on by the epochs between."""
        assert self.keras_orphans is not None
        per_epoch = self.keras_last[1] if self.keras_last is not None else 0
        shift = (epoch - 2 - self.keras_restarts) * per_epoch
        held = {id(r) for r in self.rows}
        if shift <= 0 or not all(id(r) in held for r in self.keras_orphans):
            return
        for row in self.keras_orphans:
            row["step"] += shift
        self.marker = max(r["step"] for r in self.keras_orphans)

    def _hf(self, row: dict[str, Any], prefix: str = "") -> None:
        epoch = row.pop("epoch", None)
        if row["step"] is None and self._from_another_node(row, epoch, prefix):
            return
        if row["step"] is None and self._printed_twice(row, epoch):
            row = self.pending  # type: ignore[assignment]
        else:
            self.counts["hf"] += 1
            self.component_rows += "_components" in row
            self.first_epoch = epoch if self.first_epoch is None and isinstance(epoch, float) else self.first_epoch
        if is_filtered_nan(row.get("loss"), row.get("grad_norm")):
            row["loss"] = float("nan")  # logging_nan_inf_filter logs an all-NaN interval as 0.0
            row["_nan_filter"] = True
        if row is self.pending:
            return
        if row["step"] is None:
            self._wait_for_step(row)
            self.pending_epoch, self.pending_prefix = epoch, prefix
        else:
            self._add(row, marker=False)

    def _from_another_node(self, row: dict[str, Any], epoch: Any, prefix: str) -> bool:
        """The waiting log dict printed again, every value the same, under another line prefix (a
        host or a rank: `10.96.202.16: {'loss': 0.5621, ...}` after `10.96.202.17: {...}`): each node's
        main process prints the same record (the HF Trainer's `log_on_each_node`), one record and not
        another step. True when it was such a copy (then dropped)."""
        held = self.pending
        if held is None or held["step"] is not None or epoch != self.pending_epoch:
            return False
        if not prefix.strip() or prefix == self.pending_prefix:
            return False  # no prefix, or the same one: the same process printing again is another step
        keys = {k for k in row if k[0] != "_" and k != "step"} | {k for k in held if k[0] != "_" and k != "step"}
        if not all(k in row and k in held and row[k] == held[k] for k in keys):
            return False
        self.node_copies += 1
        return True

    def _printed_twice(self, row: dict[str, Any], epoch: Any) -> bool:
        """One log record printed by two loggers (LLaMA-Factory's callback logs the Trainer's record,
        rounded, and the Trainer prints it again in full, or with a field more): a dict with no step
        right after a waiting one of the same epoch, whose keys are a subset or a superset of its keys
        and whose shared values agree to the shorter print's rounding. Merged into the waiting row
        (the fuller value of each key kept); True when it was."""
        held = self.pending
        if held is None or held["step"] is not None or epoch is None or epoch != self.pending_epoch:
            return False
        mine = {k for k in row if k[0] != "_" and k != "step"}
        theirs = {k for k in held if k[0] != "_" and k != "step"}
        if mine == theirs or not (mine <= theirs or theirs <= mine) or not mine & theirs:
            return False
        printed = dict(held, loss=0.0) if held.get("_nan_filter") else held  # the 0.0 it printed
        if not all(_same_print(row[k], printed[k]) for k in mine & theirs):
            return False
        for k in mine:
            if k not in held or len(repr(row[k])) > len(repr(printed[k])):
                held[k] = row[k]
        self.twice += 1
        return True

    def _bar(self, n: int, total: int | None, metrics: dict[str, Any], nested: bool) -> None:
        if nested or metrics.pop("_other", False):
            return  # an evaluation bar drawn under the training one; a bar of other work (`Map: 100%`)
        self.bar_done = total is None or n >= total
        named = metrics.pop("_loss_key", None)
        if named is not None:
            self.bar_loss_keys[named] += 1
        epoch = metrics.pop("_epoch", None)
        own = metrics.pop("_step", None)
        step = own if own is not None else n + epoch * total if epoch is not None and total else n
        if self.pending is not None:
            if self.last_pending_step is None or step > self.last_pending_step:
                self._place_pending(step)
            else:
                self._flush_pending()
        self.last_counter = step
        if self.marker is None or step > self.marker:
            self.marker, self.since_marker = step, 0
        if self.last_counter is not None and step < self.last_counter:
            self._drop_closing_render()  # a new bar: the old one was closed
        if metrics:
            self.eval_rows += "eval_loss" in metrics
            self.tqdm_steps.add(step)
            self.counts["tqdm"] = len(self.tqdm_steps)  # a bar is drawn several times per step
            row = {"step": step, **metrics}
            self._release_early(step)
            self.rows.append(row)
            if len(self.rows) >= 2 * _KEEP_RECENT:
                self._spill()
            if self.bar_tail and step == self.bar_tail[-1]["step"]:
                self.bar_tail.append(row)
            else:
                self.bar_before = self.bar_tail[-1] if self.bar_tail else None
                self.bar_tail = [row]

    # --- steps ---------------------------------------------------------------------------

    def _add(self, row: dict[str, Any], *, marker: bool) -> None:
        self._flush_pending()
        self._release_early(row["step"] if marker else None)
        self.rows.append(row)
        if len(self.rows) >= 2 * _KEEP_RECENT:
            self._spill()
        if marker:
            self.marker, self.since_marker = row["step"], 0

    def _release_early(self, step: int | None) -> None:
        """The OVERFLOW lines read before any row (NVIDIA's fp16_optimizer skips the first steps while
        its scale falls from 2**23, printing no step): on the steps right before the first row's step,
        one each; with no step to count back from, numbered in order as a log without counters is."""
        if step is not None and self.early_evals and step - len(self.early_evals) >= 0:
            evals, self.early_evals = self.early_evals, []
            self.rows.extend({"step": step - len(evals) + k, "eval_loss": v} for k, v in enumerate(evals))
        early, self.early_overflows = self.early_overflows, []
        first = None if step is None else step - len(early)
        if first == -1:  # one too many to fit before it: the last is the first row's own skipped step, its
            first = 0  # print after its overflow line (a script's `step:0, loss:...` after DeepSpeed's OVERFLOW)
        if first is None or first < 0:
            for ov in early:
                self._overflow_in_order(ov)
            return
        self.deepspeed.placed_before += len(early)
        for k, (_, reduced) in enumerate(early):
            self.rows.append(ds.skipped_row(first + k, reduced))

    def _overflow_in_order(self, ov: tuple[float, float]) -> None:
        """An OVERFLOW line in a log with no counter at all, whose rows are numbered in reading order:
        the skipped step takes the next number too, between the rows read before and after it (placed
        after the last counter, as with counters, it would land on rows numbered from 1 and mark them
        skipped)."""
        self._flush_pending()
        self.deepspeed.place_overflow(self.rows, self.numbered, 0, *ov)
        self.numbered += 1

    def _wait_for_step(self, row: dict[str, Any]) -> None:
        self._flush_pending()
        self.pending = row

    def _place_pending(self, step: int) -> None:
        row, self.pending = self.pending, None
        assert row is not None
        if self.last_pending_step is not None:
            self.pending_interval = max(1, step - self.last_pending_step)
        row["step"] = step
        row["_how"] = "counter"
        self.last_pending_step = step
        self._release_early(step)
        self.rows.append(row)
        if len(self.rows) >= 2 * _KEEP_RECENT:
            self._spill()

    def _flush_pending(self) -> None:
        """No counter came after the waiting row: the last counter before it if that is newer than
        the previous such row, else one interval after the previous one, else the next number."""
        if self.pending is None:
            return
        if self.last_counter is not None and (
            self.last_pending_step is None or self.last_counter > self.last_pending_step
        ):
            self._place_pending(self.last_counter)
            return
        row, self.pending = self.pending, None
        if self.last_pending_step is not None and self.last_counter is not None:
            row["step"] = self.last_pending_step + self.pending_interval
            row["_how"] = "interval"
        else:
            self._release_early(None)
            self.numbered += 1
            row["step"] = self.numbered
            row["_how"] = "numbered"
        self.last_pending_step = row["step"]
        self.rows.append(row)

    def _drop_closing_render(self) -> None:
        """tqdm draws a bar once more when it closes: the counter one past the last iteration with
        that iteration's postfix. That is no step of its own."""
        prev = self.bar_before
        if prev is not None and self.bar_tail and self.bar_tail[0]["step"] == prev["step"] + 1:
            shown = repr({k: v for k, v in prev.items() if k != "step"})  # repr: NaN equals itself
            if all(repr({k: v for k, v in r.items() if k != "step"}) == shown for r in self.bar_tail):
                for r in self.bar_tail:
                    r["_drop"] = True
        self.bar_before, self.bar_tail = None, []

    def finish(self) -> None:
        if self.megatron.wrapped is not None:  # a wrapped iteration line the log ends in
            held, self.megatron.wrapped = self.megatron.wrapped, None
            self._read_line(held)
        self._composer("")  # the last block ends with the log
        if self.bar_done:  # a bar that stopped short of its total was cut, not closed: its last draw is a step
            self._drop_closing_render()
        self._flush_pending()
        self._release_early(None)
        self._spill(final=True)
        self._number_repeated_epochs()
        self._number_stuck_counter()
        self._space_numbered()
        self._space_leading()

    def _number_repeated_epochs(self) -> None:
        """Lines placed at their epoch: if an epoch comes twice, the lines are finer than epochs
        (`Epoch 1, batch 200, loss ...` with no step): number them in order instead."""
        st = self.store
        idx = np.nonzero(st.how[: st.n] == HOW["epoch"])[0]
        if idx.size < 2 or np.unique(st.step[idx]).size == idx.size:
            return
        st.step[idx] = self.numbered + 1 + np.arange(idx.size)
        st.how[idx] = HOW["numbered"]
        self.numbered += idx.size

    def _number_stuck_counter(self) -> None:
        """Every row at step 0, each with a loss of its own (DL4J's ScoreIterationListener printing
        `Score at iteration 0 is X` on every line of a run whose iteration count is never updated):
        the counter never left its start, no step; the rows are numbered in order instead of kept as
        one. (Rows at one later step are each device's or rank's line at that step: torch_xla's
        `Device=xla:0/k Step=55`.)"""
        st = self.store
        n = st.n
        if n < _STUCK_ROWS or st.thinned or not st.logged("loss").all() or np.any(st.step[:n] != 0):
            return
        loss = st.view("loss")
        if np.unique(loss[np.isfinite(loss)]).size < _STUCK_ROWS:
            return
        st.step[:n] = self.numbered + 1 + np.arange(n)
        st.how[:n] = HOW["numbered"]
        self.numbered += n

    def _space_numbered(self) -> None:
        """Dicts copied from a terminal's scrollback, with only the last progress bar below them:
        the first k-1 were numbered 1, 2...; the k-th took the bar's counter S. A Trainer logs every
        L steps from step L, so when S is a multiple of k they were at L, 2L, ... (L = S / k)."""
        st = self.store
        how = st.how[: st.n]
        waiting = np.nonzero(np.isin(how, (HOW["numbered"], HOW["counter"], HOW["interval"])))[0]
        numbered = np.nonzero(how == HOW["numbered"])[0]
        if not numbered.size or numbered.size == waiting.size:
            return
        k = numbered.size + 1
        first = waiting[numbered.size]
        if not np.array_equal(waiting[: numbered.size], numbered) or how[first] != HOW["counter"] or st.step[first] % k:
            return
        every = int(st.step[first]) // k
        later = st.step[waiting[numbered.size :]]
        if every < 1 or np.any(np.diff(later) != every):
            return
        st.step[numbered] = every * np.arange(1, k)
        st.how[numbered] = HOW["spaced"]

    def _space_leading(self) -> None:
        """One or two lines with no step read before the first line that carries the log's own counter
        (an excerpt whose first line was cut in the middle: ` size: 512 | lm loss: 2.1 | ...`): when
        the counted lines after them are evenly spaced (L), they were the logging steps just before
        the first counted one (S - kL, ..., S - L). Numbered 1, 2 instead, they would put the log's
        start thousands of steps before its excerpt and make the whole reading one of line numbers."""
        st = self.store
        how = st.how[: st.n]
        k = int(np.count_nonzero(how == HOW["numbered"]))
        if (
            not 0 < k <= _LEADING_MAX
            or st.n < k + _LEADING_SPACING
            or np.any(how[:k] != HOW["numbered"])
            or np.any(how[k:] != HOW[None])
        ):
            return
        gaps = np.diff(st.step[k : k + _LEADING_SPACING])
        every = int(gaps[0])
        first = int(st.step[k]) - k * every
        if every < 1 or np.any(gaps != every) or first < 0:
            return
        st.step[:k] = first + every * np.arange(k)
        st.how[:k] = HOW["spaced"]
        self.leading_spaced = k

    # --- notes ---------------------------------------------------------------------------

    def final_how(self) -> np.ndarray:
        """How many kept rows got their step each way (`records.HOW`)."""
        return np.bincount(self.store.how[: self.store.n], minlength=len(HOW))

    def steps_from(self) -> str:
        """Where the rows' steps came from, as the detectors read it (`meta["steps_from"]`): "log"
        (the log's own counters), "epoch" (an epoch number is the step) or "numbered" (line order)."""
        final = self.final_how()
        return "numbered" if final[HOW["numbered"]] else "epoch" if final[HOW["epoch"]] else "log"

    def notes(self, what: str) -> list[str]:
        kinds = [Msg("console.n_kind", n=n, kind=KINDS[k]) for k in KINDS if (n := self.counts.get(k, 0))]
        used = _and(kinds) if kinds else Msg("console.nothing")
        other = []
        if self.eval_dicts:
            other.append(Msg("console.eval_dicts", n=self.eval_dicts))
        if self.eval_lines:
            other.append(Msg("console.eval_lines", n=self.eval_lines))
        if self.ignored:
            other.append(Msg("console.other_lines", n=self.ignored))
        out: list[str] = [
            Msg("console.read_ignored", what=what, used=used, ignored=_and(other, all_and=True))
            if other
            else Msg("console.read", what=what, used=used)
        ]
        st = self.store
        final = self.final_how()
        how = {
            "counter": st.how_counts[HOW["counter"]],
            "interval": st.how_counts[HOW["interval"]],
            "numbered": int(final[HOW["numbered"]]),
            "epoch": int(final[HOW["epoch"]]),
            "spaced": int(final[HOW["spaced"]]),
        }
        if how.get("counter"):
            out.append(Msg("console.took_bar_counter", n=how["counter"]))
        if how.get("interval"):
            out.append(Msg("console.placed_one_interval", n=how["interval"]))
        if self.finer_counter:
            out.append(Msg("console.two_counters", n=self.finer_counter))
        if self.twice:
            out.append(Msg("console.printed_twice", n=self.twice))
        if self.node_copies:
            out.append(Msg("console.node_copies", n=self.node_copies))
        if how.get("epoch"):
            out.append(Msg("console.epoch_is_step", n=how["epoch"]))
        if how.get("numbered"):
            out.append(Msg("console.numbered", n=how["numbered"]))
        out.extend(self.deepspeed.rank_notes())
        if how.get("spaced"):
            out.append(Msg("console.spaced_leading" if self.leading_spaced else "console.spaced", n=how["spaced"]))
        out.extend(self.deepspeed.placement_notes())
        out.extend(self.megatron.notes())
        out.extend(self.composer.notes())
        first_filtered = _nan_filter_first(st)
        if first_filtered is not None:
            out.append(filtered_nan_note(first_filtered))
        if st.thinned:
            out.append(Msg("source.thinned", n=st.total, kept=st.n, stride=st.stride))
        return out


#: how far apart two prints of one value may be: the rounding of a shorter print (`0.0000`, `4.9985e-05`)
_PRINT_REL, _PRINT_ABS = 1e-3, 5e-5


def _same_print(a: Any, b: Any) -> bool:
    """Whether two printed values are one value, one of them rounded (NaN and NaN alike)."""
    if not isinstance(a, float) or not isinstance(b, float):
        return a == b
    if a != a or b != b:
        return a != a and b != b
    return abs(a - b) <= max(_PRINT_ABS, _PRINT_REL * max(abs(a), abs(b)))


def _and(items: list[Msg], all_and: bool = False) -> Msg:
    """ "a, b and c" (or "a and b and c") in English, "a、b、c" in Chinese."""
    if len(items) == 1:
        return items[0]
    if all_and:
        return Msg("word.a_and_b", a=_and(items[:-1], True), b=items[-1])
    return Msg("word.a_and_b", a=items[:-1], b=items[-1])


#: a line that starts with its counter printed `N/TOTAL` (PaddlePaddle's `step  10/938 - loss: ...`)
_LEADING_OF_TOTAL = re.compile(r"\W*(?:step|iter|iteration|batch)\s*:?\s*(\d+)\s*/\s*(\d+)\b", re.IGNORECASE)


def _under_epoch_header(text: str, epoch: int, step: int) -> int:
    """A counter within an epoch (`step 100/938`) under an `Epoch 2/10` header line counted on from the
    epochs before, as Keras' bar is: (epoch - 1) * TOTAL + N; other counters as printed."""
    m = _LEADING_OF_TOTAL.match(text)
    if m is None or int(m.group(1)) != step:
        return step
    return (epoch - 1) * int(m.group(2)) + step


def _shape(text: str) -> str:
    """A line without its numbers and spaces: `step  50/157 - loss: 2.46` has the shape of `step 100/938 -
    loss: 2.31`."""
    return "".join(cl.NUMBER.sub("#", text).split())


def parse(lines: Iterable[str]) -> ConsoleParser:
    p = ConsoleParser()
    for line in lines:
        p.feed(line)
    p.finish()
    return p


def _framework(p: ConsoleParser) -> str:
    c = p.counts
    if c["megatron"]:
        return "megatron"
    if c["hf"]:
        return "transformers"
    if c["ds_step"] or c["ds_overflow"] or c["grad_overflow"]:
        if not any(c[k] for k in ("tqdm", "nanoGPT", "litgpt", "mlx-lm", "torchtitan", "keras", "key-value")):
            return "deepspeed"
    named = [k for k in ("nanoGPT", "litgpt", "mlx-lm", "torchtitan", "keras", "composer") if c[k]]
    if named:
        return max(named, key=lambda k: c[k])
    return "tqdm" if c["tqdm"] else "console"


_COLUMNS = (
    "loss",
    "eval_loss",
    "lr",
    "scale",
    "grad_norm",
    "param_norm",
    "skipped",
    "batch_size",
    "skipped_in_interval",
    "nan_in_interval",
    *SIDE_COLUMNS,
)


#: rows kept as dicts while newer lines may still change them (a bar's closing draw, an overflow's
#: scale); older rows go to the column store in batches of this size
_KEEP_RECENT = 256
#: at most this many stepless lines before the first counted one are placed before it (the cut head
#: of an excerpt is one line; more stepless lines are a shape of their own, numbered in order)
_LEADING_MAX = 2
#: the first counted lines that must be evenly spaced for that placement (three equal gaps)
_LEADING_SPACING = 4


#: a running count of skipped steps in a key/value line (`steps: 100 loss: 2.1 ... skipped: 3`)
_SKIP_TOTAL = re.compile(r"\bskipped(?:[ _]steps)?\s*[:=]\s*(\d+)\b")
#: a loss's value followed by its running average in parentheses, the average NaN or Inf
_NAN_AVERAGE = re.compile(
    r"\bloss\s*[:=]?\s*[-+]?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][-+]?\d+)?\s*\(\s*[-+]?(?:nan|inf)\s*\)", re.IGNORECASE
)


def _event_series(
    p: ConsoleParser, steps: np.ndarray, cols: dict[str, np.ndarray], logged: dict[str, np.ndarray]
) -> None:
    """The loss scale and the skipped steps that event lines carry (apex's and fairseq's overflow
    lines, a skip counter), put on the first row of their step where no row of that step has its
    own (`steps` sorted)."""
    if not p.events.items:
        return
    n = len(steps)
    for col, points in p.events.series(_OrdinalSteps(p.store)).items():
        same = (col, "skipped") if col == "skipped_in_interval" else (col,)
        for step, v in points.items():
            lo, hi = np.searchsorted(steps, step, "left"), np.searchsorted(steps, step, "right")
            if lo == hi or any(c in logged and logged[c][lo:hi].any() for c in same):
                continue
            if col not in cols:
                cols[col], logged[col] = np.full(n, np.nan), np.zeros(n, dtype=bool)
            cols[col][lo], logged[col][lo] = v, True


def _loss_key(p: ConsoleParser) -> str:
    """The name the log prints its training loss under: a bar's postfix name when only bars printed a
    loss (kohya's `avr_loss`), else `loss` (the console formats' own names are plain)."""
    if len(p.bar_loss_keys) == 1 and all(k == "tqdm" for k, n in p.counts.items() if n):
        return next(iter(p.bar_loss_keys))
    return "loss"


def _kept_rows(p: ConsoleParser) -> np.ndarray:
    """Indices (into the store) of the rows a Run is built from, sorted by step (stable: at a repeated
    step the last row read wins): not the closing draw of a bar, and not a scale guessed from
    "Attempted loss scale" where a logged one exists at that step."""
    st = p.store
    n = st.n
    flags = st.flags[:n]
    keep = (flags & FLAG_DROP) == 0
    weak = keep & ((flags & FLAG_WEAK) != 0)
    if weak.any() and "scale" in st.vals:
        logged = keep & ~weak & st.logged("scale")
        keep &= ~(weak & np.isin(st.step[:n], st.step[:n][logged]))
    idx = np.nonzero(keep)[0]
    return idx[np.argsort(st.step[idx], kind="stable")]


def _count_on(st: StepColumns) -> None:
    """A line's counter that starts again from its beginning (a batch within an epoch the line does
    not number: `iter 10 ... iter 200`, then `iter 10` again) counted on, in reading order, from the
    epoch before (`text_slots.counted_on`); a resume to a middle value stays as printed."""
    steps = st.step[: st.n]
    have = np.isfinite(steps)
    if have.sum() >= 3:
        steps[have] = counted_on(steps[have])


#: the fewest rows, and different losses among them, at one step that make its counter a stuck one
_STUCK_ROWS = 3


#: the signals a console log is read for; a note names those it lacks (each has a `signal.<name>` message)
_CORE_SIGNALS = ("loss", "grad_norm", "scale")


def _rows_meta(p: ConsoleParser) -> dict[str, Any]:
    """What the parser learnt about its rows, as the detectors read it: where their steps came from,
    copies of one record dropped, epoch means, evaluations printed once an epoch, lines left unread."""
    meta: dict[str, Any] = {"steps_from": p.steps_from()}
    if p.node_copies:
        meta["node_copies"] = p.node_copies  # (the general reader would count each copy as a step)
    if (first := p.keras_epoch_rows()) is not None:
        meta["epoch_rows_from"] = first
    if p.counts["keras"]:
        meta["eval_at_epoch_end"] = True  # Keras prints val_* on an epoch's last bar only: each is one evaluation
    meta["lines_unread"] = bool(p.eval_dicts or p.eval_lines or p.ignored)
    return meta


def _nan_filter_first(st: StepColumns) -> int | None:
    """The first step whose 0.0 beside a non-finite grad norm was read back as NaN (`FLAG_NAN_FILTER`)."""
    hit = st.step[: st.n][(st.flags[: st.n] & FLAG_NAN_FILTER) != 0]
    return int(hit.min()) if hit.size else None


def rows_to_run(p: ConsoleParser, what: str) -> Run:
    st = p.store
    _count_on(st)
    order = _kept_rows(p)
    steps = st.step[order]
    framework = _framework(p)
    meta: dict[str, Any] = {"framework": framework}
    meta.update(mg.args_meta(p.megatron.args))
    if p.first_epoch is not None and np.isfinite(p.first_epoch):
        meta["first_epoch"] = p.first_epoch
    if p.megatron.args:
        meta["args"] = {k: v for k, v in p.megatron.args.items() if isinstance(v, (int, float, str, bool))}
    if p.counts["megatron"] or p.counts["hf"]:
        meta["loss_is_interval_mean"] = True
    if st.thinned:
        meta["thinned"] = {"rows": st.total, "kept": st.n, "stride": st.stride}
        meta.setdefault("log_interval", interval_before_thinning(st))
    first_filtered = _nan_filter_first(st)
    if first_filtered is not None:  # a 0.0 beside a NaN grad norm read back as NaN: where, for the detectors
        meta[NAN_FILTER_META] = first_filtered
    cols: dict[str, np.ndarray] = {}
    logged: dict[str, np.ndarray] = {}
    for name in _COLUMNS:
        if name not in st.vals:
            continue
        present = st.logged(name)[order]
        if present.any():
            cols[name] = st.view(name)[order]
            logged[name] = present
    _event_series(p, steps, cols, logged)
    if "skipped_in_interval" in cols and p.steps_from() != "epoch":
        # (rows at their epoch: an epoch's steps are not known, so a count is no share of them)
        _skipped_share(steps, cols, logged, float(meta.get("log_interval", 1) or 1))
    if "loss" not in cols and "scale" not in cols and "grad_norm" not in cols:
        raise SourceError(
            f"{what}: found {sum(p.counts.values())} training log line(s) but no loss, grad norm or loss scale in them"
        )
    notes = p.notes(what)
    meta.update(_rows_meta(p))
    meta["steps_collapsed"] = _collapsed(st, order)
    absent = [Msg(f"signal.{c}") for c in _CORE_SIGNALS if c not in cols]
    if absent:
        notes.insert(1, Msg("source.not_in_log", signals=absent))
    source = framework if framework in ("megatron", "deepspeed") else "console"
    events: dict[str, dict[int, Any]] = {}
    if p.component_rows:
        events["loss_components"] = _components(p, order)
    if p.events.items:
        events["text_events"] = p.events.place(_OrdinalSteps(st))
    fp16 = bool(np.any(cols.get("skipped", np.zeros(1)) > 0)) or bool(
        np.any(np.nan_to_num(cols.get("scale", np.ones(1)), nan=1.0) != 1.0)
    )
    p.events.hints.apply(meta, saw_scale=fp16)
    meta.setdefault("loss_key", _loss_key(p))
    meta.setdefault("loss_guessed", False)  # the console's formats name their training loss
    run = from_columns(steps, cols, meta=meta, source=source, logged=logged, events=events)
    run.notes.extend(notes)
    return run


def _skipped_share(
    steps: np.ndarray, cols: dict[str, np.ndarray], logged: dict[str, np.ndarray], log_interval: float
) -> None:
    """`skipped` from the interval counts: the share of each logged interval that was skipped. An
    OVERFLOW line's skip wins over a count of 0 at its step: Megatron-DeepSpeed's iteration line
    counts Megatron's own skips, not those of DeepSpeed's optimizer, which its OVERFLOW line reports."""
    interval = np.maximum(np.diff(steps, prepend=steps[0] - log_interval), 1.0)
    frac = np.clip(cols["skipped_in_interval"] / interval, 0.0, 1.0)
    lg = logged["skipped_in_interval"]
    base = cols.get("skipped", np.full(len(steps), np.nan))
    frac = np.where(np.isin(steps, steps[base == 1.0]), 1.0, frac)
    cols["skipped"] = np.where(lg & np.isnan(base), frac, base)
    logged["skipped"] = logged.get("skipped", np.zeros(len(steps), dtype=bool)) | lg


def _collapsed(st: StepColumns, order: np.ndarray) -> bool:
    """Whether rows of three or more different losses were put at one step, so that all but one are
    lost: the step read is no step (the Informer family's `Epoch: 3, Steps: 9 | Train Loss: ...`, `Steps`
    the same count each epoch); the reading is then weak (`text_choice`). Two values at a step are a
    bar drawn again before its counter moved, with its new postfix."""
    if "loss" not in st.vals:
        return False
    have = st.logged("loss")[order]
    steps, loss = st.step[order][have], st.view("loss")[order][have]  # in step order
    again = np.diff(steps) == 0
    if np.count_nonzero(again) < 2:
        return False  # the common case: a step a row
    shared = np.concatenate(([False], again)) | np.concatenate((again, [False]))
    steps, loss = steps[shared], loss[shared]
    ok = np.isfinite(loss)
    if _finite_then_not(steps, ok):
        return True
    pairs = np.unique(np.stack([steps[ok], loss[ok]]), axis=1) if ok.any() else np.zeros((2, 0))
    return bool(pairs.shape[1]) and int(np.unique(pairs[0], return_counts=True)[1].max()) >= 3


def _finite_then_not(steps: np.ndarray, ok: np.ndarray) -> bool:
    """Whether three or more rows share one step, a finite loss among them and a NaN/Inf after it (`Epoch
    1, Iter 0: Loss:1.0637` then `Epoch 2, Iter 0: Loss:nan`...: the counter restarts each epoch): kept
    as one row, the finite loss is lost and the NaN's onset too, so the reading is weak."""
    for s in np.unique(steps).tolist():
        at = ok[steps == s]
        if at.size >= 3 and at.any() and not at.all() and not at[np.argmax(at) :].all():
            return True
    return False


def _components(p: ConsoleParser, order: np.ndarray) -> dict[int, Any]:
    """{step: component losses} of the kept rows, in step order (the last row at a step wins)."""
    st = p.store
    ordinals = st.ordinal[order]
    out: dict[int, Any] = {}
    for i in np.nonzero(np.isin(ordinals, np.fromiter(st.extra, np.int64, len(st.extra))))[0].tolist():
        out[int(st.step[order[i]])] = st.extra[int(ordinals[i])]["_components"]
    return out


def interval_before_thinning(st: StepColumns) -> int:
    """The typical gap between logged loss points of the head of the log (kept whole): the log's own
    interval, which the thinned middle's gaps would misstate."""
    head = st.ordinal[: st.n] < st.rules.head
    steps = np.sort(st.step[: st.n][head & st.logged("loss")]) if "loss" in st.vals else np.sort(st.step[: st.n][head])
    gaps = np.diff(steps)
    gaps = gaps[gaps > 0]
    return int(max(1, np.median(gaps))) if gaps.size else 1


class _OrdinalSteps:
    """The step of the row read at each ordinal (what `Events.place` asks for): of a thinned row, the
    step of the last kept row read before it."""

    def __init__(self, st: StepColumns) -> None:
        self.st = st

    def __len__(self) -> int:
        return self.st.total

    def __getitem__(self, i: int) -> float:
        st = self.st
        j = int(np.searchsorted(st.ordinal[: st.n], i, side="right")) - 1
        return float(st.step[max(j, 0)])


def _sniff(p: Path) -> bool:
    if not p.is_file() or p.suffix.lower() in _NOT_CONSOLE:
        return False
    data = head(p, _SNIFF_BYTES)
    if looks_binary(data[:65536]):
        return False
    data = line_prefix.strip_bytes(data)  # a prefix the text puts before each line (`node12: `)
    start = data[:4096].lstrip()
    if start.startswith((b'{"', b"[{", b"[\n", b"[]")):
        return False  # JSON: the JSON readers take it
    if (
        any(m in data for m in (b"iteration", b"step=", b"Attempted loss scale", b"Grad overflow"))
        and _ANY.search(data) is not None
    ):
        return True
    # the first 64 KiB (cut after a newline: the same first segments) usually decide; else the whole head
    cut = data.rfind(b"\n", 0, 1 << 16) + 1
    for part in (data[:cut], data[:_SNIFF_CONSOLE_BYTES]) if cut else (data[:_SNIFF_CONSOLE_BYTES],):
        parser = ConsoleParser()
        for i, seg in enumerate(segments(_Bytes(part))):
            parser.feed(seg)
            if parser.n_rows() or parser.pending is not None or parser.composer.holding():
                return True
            if i > _SNIFF_SEGMENTS:
                return False
    return False


class _Bytes:
    """A bytes object read like a file (for `segments`)."""

    def __init__(self, data: bytes) -> None:
        self.data, self.pos = data, 0

    def read(self, n: int) -> bytes:
        out = self.data[self.pos : self.pos + n]
        self.pos += n
        return out


def read_stream(f: Any, what: str) -> Run:
    p = ConsoleParser()
    fast.feed_stream(f, p)
    p.finish()
    if not p.n_rows():
        raise SourceError(f"{what}: no training log lines (looked for {LOOKED_FOR})")
    return rows_to_run(p, what)


#: names a captured console usually has: `nohup.out`, `slurm-1234.out`, `train.log`, `stdout.txt`
_CONSOLE_NAME = re.compile(r".*\.(out|log|txt|err)$|^(stdout|stderr|output|console)$", re.IGNORECASE)
#: how deep a directory is searched for a console log (the run folder and one level below)
_CONSOLE_DEPTH = 1


def console_logs(root: Path) -> list[Path]:
    """The console logs in a directory, newest first: files named like a captured console whose
    head holds training log lines. Why newest: a folder of `slurm-*.out` files is a history of
    attempts, and the one a user asks about is the last."""
    from .files import walk

    named = walk(root, lambda n: _CONSOLE_NAME.match(n) is not None, max_depth=_CONSOLE_DEPTH, max_entries=5_000)
    newest = sorted(named, key=lambda f: (-f.stat().st_mtime, str(f)))[:_CONSOLE_SNIFFED]
    return [f for f in newest if _sniff(f)]


#: at most this many files of a directory are sniffed (each sniff reads up to a few MiB)
_CONSOLE_SNIFFED = 16


def _sniff_any(p: Path) -> bool:
    """A console log, or a directory holding no structured log but a console log (the structured
    readers come first)."""
    return _sniff(p) or (p.is_dir() and bool(console_logs(p)))


@reader("console log", _sniff_any, priority=80)
def read(path: Path) -> list[Run]:
    if path.is_dir():
        return read_dir(path)
    with open_regular(path) as f:  # streamed, a segment at a time: no whole-file read
        return [read_stream(line_prefix.opened(f, path), path.name)]


def read_dir(path: Path) -> list[Run]:
    logs = console_logs(path)
    if not logs:
        raise SourceError(f"{path}: no console log with training log lines in this directory")
    chosen = logs[0]
    with open_regular(chosen) as f:
        run = read_stream(f, str(chosen.relative_to(path)))
    run.meta["path"] = str(chosen)  # the file read, not the folder it was found in
    if len(logs) > 1:
        run.notes.insert(
            0,
            Msg(
                "source.console_dir_newest",
                chosen=str(chosen.relative_to(path)),
                others=[str(o.relative_to(path)) for o in logs[1:4]],
                n=len(logs) - 1,
            ),
        )
    return [run]
