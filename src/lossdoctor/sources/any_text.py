"""The general reader of training text: what no named reader recognises, read by its shape.

A training script nobody listed still prints the same few line shapes thousands of times. This
reader finds them without knowing the tool:

- **repeated line templates**: a line with its numbers replaced by slots is its template
  (`epoch # loss = #`, `Step: # || Tr.Loss: # || ...`, `[#/#] loss: # acc: #`). Lines sharing a
  template are rows of one series per slot, each slot named by the words in front of it (the
  wrappers `tensor(`, `np.float32(`, quotes and dict braces are skipped, so `'loss':
  tensor(2.31, device='cuda:0')` is `loss`). A slot in parentheses right after another
  (`Loss 2.3456 (2.4012)`, the AverageMeter's current value and running average) is that slot's
  average and is never taken for it. A number with no word in front of it is named by the words
  right after it up to a separator (Darknet's ` 1: 2.31, 2.71 avg loss, 0.001 rate,`: `2.31` is the
  loss, `avg loss` its running average), a copula is not part of a name (`Loss is 2.31.`), and
  Chinese metric words read as their English (`第3轮 损失: 0.41` is `epoch 3 loss: 0.41`). Step
  counters are named (`step`, `iter`, `iteration`, `it`, `global_step`, `batch`, also after
  `train`/`at`/`optimizer`: mmengine's `Iter(train)`), printed `N/TOTAL` (never a date's `06/01`),
  a bare `[N]` (CLU, XGBoost) or a leading `N:`. An epoch with a counter that restarts each epoch makes one increasing step, `(epoch - first) * TOTAL + N`, an epoch in brackets
  counting from 0 (`Epoch: [0][ 10/5005]`, the PyTorch reference scripts), a bare or `E/TOTAL` one
  from 1 (`Epoch  1, 12900/37527`); a counter that goes on across epochs is the step as printed
  (PaddleSeg's `epoch: 2, iter: 30/1000`). The same training line with a field more or less (a
  MetricLogger's ETA losing its day, `grad_norm` logged from some step on) is one series: its
  sibling templates fill the same columns. Fields wrapped over lines that end with `|` are joined;
- **tables with a header**: Markdown and notebook tables (`| Step | Training Loss | Validation
  Loss |`), ASCII boxes and whitespace- or tab-aligned columns: a header line of names followed
  by rows of numbers with as many cells;
- **per-step key/value blocks**: one `| key | value |` line per metric between dashed lines, with
  `| section/ |  |` lines naming the section of the keys under them (stable-baselines3's logger).

- **evaluation sections**: after a line that opens one (`Eval begin...`, `Validating...`), lines of
  the training line's shape are the evaluation's (`eval_loss`), until a line of another shape;

- **records printed one pair a line**: `key: value`, `'key': value,`, `Key: k, Value: v` lines in a
  row (a pretty-printed dict, RSL-RL's block, Coqui's `| > loss: 3.63  (3.53)` behind a list marker, its
  running average dropped) are one row; a key seen again starts the next; records with a key more or less
  are one series. A line that names a step counter and else only when or where it was printed (a clock, a
  host; OLMo's `[step=2/739328,epoch=0]`, Coqui's `--> TIME: ... STEP: 25/496 -- GLOBAL_STEP: 25`) is the
  header of the record under it: its step;
- **one row**: when no loss has two rows, one is enough (a `loss_dict = {...}` in an error, one
  summary); a row with no counter takes the step its line before names (`at iteration=27!`,
  `Learning iteration 8391/10000`).

- **when no name says loss** (what a human reader does next): a number equal on every row to the
  sum of the named numbers beside it is their total (YOLACT's `T`), a printed total beats a sum taken
  again (YOLOv7's `total`); the one named number of a counted line left once counters, the LR,
  timings, scores and settings are known is the loss (VSE++'s `Le`, a guess); bare numbers behind a
  first number that counts up are the step and the loss (`print(step, loss)`, a guess); a set's name
  alone (`learn:` / `test:`) or its metric (`train-rmse`, `training's l2`) names the objective. A
  counter that starts again from its beginning is counted on from the epoch before (`counted_on`), one
  rank's late copy of a step is not such a restart. On lines of unnamed numbers a column that is the
  sum of the columns before it is their total (YOLOv7's results.txt); a criterion's class name
  (`CrossEntropyLoss`) names the objective; an RL trainer's policy loss (`actor/pg_loss`, `act_loss`)
  is the loss when no total is printed, its critic's, KL and entropy terms kept beside it; a call
  printed with its value is named by the function (Julia's `loss(x, y) = param(0.09)`).
- **free text after the numbers**: when several line shapes differ only in the words after their last
  number (the char-RNN tutorial's sample name and guess), the text is read again with those words left
  out of the shape, and that reading kept when it holds more loss points.

Series keep their names. Train, evaluation and component losses stay apart: an evaluation loss
(by its name, or by an evaluation word in its line's own words) fills `eval_loss`, component losses
(`loss_cls`, `aux_loss`, `z_loss`...) go to `events["loss_components"]`, and the training loss is
the best-named total (`meta["loss_key"]`; `meta["loss_guessed"]` and a note when no name says
total). With no total printed, the sum of the components on the line that holds all of them is the
loss (`text.loss_summed`); two adversaries' `d_loss` and `g_loss` are neither the loss nor summed
(`text.adversaries`: both kept as components, no training loss read); a component gone NaN where
no sum was taken is a `nonfinite_warning` event. Repeated `print(loss)` lines of a tensor are a
guessed loss; a text of overflow lines only is a row per line. Event lines (`text_events`) are
filed at the step of the row read before them. How numbers are named, line shapes, step counters
and loss kinds are `sources/text_slots.py`; this module reads the lines and chooses the series.

The miner is a few dozen lines rather than a template-mining library (drain3): on this task it is
as accurate and faster, see docs/benchmarks.md ("General text reader").
"""

from __future__ import annotations

import bisect
import math
import re
import struct
import unicodedata
from collections import Counter
from collections.abc import Iterable, Iterator, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from ..messages import Msg
from ..records import Run, from_columns, text_number
from . import line_prefix, named_arrays
from .columns import SIDE_COLUMNS, column_for, normalise
from .console_text import EVAL_SECTION, clean, segments
from .files import head, looks_binary, open_regular
from .registry import SourceError, reader
from .text_events import TEXT_MAX, Events, classify, scale_in

# NUMBER, Template, slot_names and _eval_context are also read from here (benchmarks, tests)
from .text_slots import (
    _NOT_A_PART,
    AVERAGE_PREFIX,
    EVAL_NAME,
    GLUED_COUNTER,
    GLUED_UNIT,
    NUMBER,
    PERCENT,
    Template,
    _eval_context,
    _slash,
    adversaries,
    base_name,
    classify_slot,
    counted_on,
    counters_apart,
    gan_parts,
    headed_parts,
    latin,
    leading_slots,
    lone_metric,
    name_key,
    names_a_loss,
    policy_named,
    slot_names,
    step_rank,
    steps_of,
    total_rank,
    unglued,
    whole_numbers,
)

LOOKED_FOR = (
    "numbers repeated under the same words on many lines (a line template), a table with a "
    "header row, or per-step `| key | value |` blocks"
)

#: YOLOv5's epoch table (train.py: `('%10s' * 7) % ('Epoch', 'gpu_mem', 'box', 'obj', 'cls', 'labels',
#: 'img_size')`): its bare `box`, `obj`, `cls` (and ultralytics' `dfl`) columns are loss components
_YOLO_HEADER = re.compile(r"^gpu_mem$", re.IGNORECASE)
_YOLO_LOSSES = frozenset({"box", "obj", "cls", "dfl", "seg"})
#: YOLOv5's (and ultralytics/yolov3's) results.txt, written without a header: `epoch/last`, the GPU memory
#: (`1.86G`), the mean box, obj, cls and total losses, the labels and image size of the last batch, then
#: P, R, mAP@.5, mAP@.5:.95 and the validation box, obj, cls losses (train.py's `'%10s' * 2 + '%10.4g' * 6`
#: and `'%10.4g' * 7 % results`)
_YOLO_RESULTS_ROW = re.compile(r"^\s*\d+/\d+\s+[\d.]+G(?:\s+\S+){13}\s*$")
_YOLO_RESULTS_HEADER = (
    "Epoch",
    "gpu_mem",
    "box",
    "obj",
    "cls",
    "total_loss",
    "labels",
    "img_size",
    "P",
    "R",
    "mAP@.5",
    "mAP@.5:.95",
    "val_box_loss",
    "val_obj_loss",
    "val_cls_loss",
)
#: a tqdm bar after a table row (YOLOv5: `  416: 100%|####| 7/7 [00:15<00:00,  2.27s/it]`)
_BAR_TAIL = re.compile(r":?\s+\d{1,3}%\|.*$")
#: a tqdm bar at the start of a line with another print glued right after it (the bar on stderr had no
#: line break yet when the script printed on stdout): `50/300 [00:50<04:00, 2.00it/s]Epoch: [0][ 50/300] ...`
#: (a bar with metrics of its own in its postfix, `[..., train_loss=10.90]`, stays one line with the print:
#: the two together are the record)
_GLUED_BAR = re.compile(r"^\s*(?:[^|\[\]=]{0,60}:\s*)?\d{1,3}%\|[^|]*\|\s*\d+/\d+\s*\[[^\]=]*\](?=\S)")
_MIN_ROWS = 2
#: the first line of a warning printed by Python's `warnings` module (`run.py:198: UserWarning: message`); the
#: module prints the warned line of source under it, indented (`  t_loss += loss.data[0]`)
_PY_WARNING = re.compile(r"^\s*\S+\.py:\d+: [A-Z]\w*(?:Warning|Error)\b")
_MAX_TEMPLATES = 2000
_HEADER_SPLIT = re.compile(r"\s*\|\s*|\t+|\s{2,}")
#: the losses of every step printed on one line after a plural name (cu2rec's `Losses: 161.9 160.99 ...`, a
#: script's `print("losses:", losses)` of a list): three or more numbers and nothing else after it
_LOSS_LIST = re.compile(
    r"^((?:train(?:ing)?[ _])?loss(?:es| values| history))\s*[:=]?\s*\[?((?:[-+]?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][-+]?\d+)?"
    r"|nan|inf)(?:(?:,\s*|\s+)(?:[-+]?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][-+]?\d+)?|nan|inf)){2,})\]?$",
    re.IGNORECASE,
)
#: a record's line a terminal wrapped right after a name (YOLOX's `..., conf_loss: 2.0, cls_loss:` then
#: `1.1, lr: 4.340e-04, ...` on the next line): a number before it, the line ending with `name:` or `name=`
_NAME_LAST = re.compile(r"\d[^\d]*[,;|\s][A-Za-z_][\w./-]*\s*[:=]$")
#: the rest of such a line: starting with the value (a bar's `100%|` is no value)
_VALUE_FIRST = re.compile(r"^[-+]?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][-+]?\d+)?(?:[,;\s]|$)|^(?:nan|inf)\b", re.IGNORECASE)
_RULE = re.compile(r"^[\s|+:=*~_-]*-{3,}[\s|+:=*~_-]*$|^[\s|+:]*={3,}[\s|+:=]*$")
_KV_LINE = re.compile(r"^\|\s*([^|]*?)\s*\|\s*([^|]*?)\s*\|$")


#: a quoted value that names something (a checkpoint, a run, an EMA copy: Demucs's `'Bname': 'ema_batch_1'`):
#: letters and digits inside quotes after a key; its digits are no metric and its words no part of the
#: line's shape (`'ema_epoch_0'` and `'ema_batch_1'` are the same record). A quoted number (`'lr': '3e-4'`)
#: stays a value, and a quoted word without digits (`'phase': 'train'`) stays part of the shape
_QUOTED_NAME = re.compile(r"""([:=]\s*)(['"])([^'"(\n]{0,80}?[A-Za-z][^'"(\n]{0,80}?)\2""")
_NAME_HOLDER = "name"


def _name_placeholder(m: re.Match[str]) -> str:
    inner = m.group(3)
    if not any(c.isdigit() for c in inner) or _is_number(inner):
        return m.group(0)
    return f"{m.group(1)}{m.group(2)}{_NAME_HOLDER}{m.group(2)}"


def _is_number(s: str) -> bool:
    try:
        float(s)
    except ValueError:
        return False
    return True


def split_cells(text: str) -> list[str]:
    cells = _HEADER_SPLIT.split(text.strip().strip("|+").strip())
    return [c for c in cells if c != ""]


def _counted_metrics(text: str) -> bool:
    """Whether the line names a step counter and a gradient norm, loss scale or parameter norm
    (Megatron's `iteration 5/50 | ... | loss scale: 1.0 | grad norm: nan |`): a row even when it also
    reads as an event (its NaN is the symptom)."""
    names = slot_names(text, [m.span() for m in NUMBER.finditer(text)])
    if not any(step_rank(n) is not None for n in names if n):
        return False
    return any((column_for(base_name(n)) or (None,))[0] in ("grad_norm", "scale", "param_norm") for n in names if n)


class TextParser:
    """Feed it raw segments; then `templates` holds every repeated shape (line templates, tables and
    key/value blocks alike: a table's header and a block's keys are their slot names)."""

    def __init__(self, loose: bool = False) -> None:
        #: whether the words after a line's last number are left out of its shape (`free_tails`)
        self.loose = loose
        self.templates: dict[Any, Template] = {}
        self.events = Events()
        self.scale_points: list[tuple[int, float]] = []  # (row index before it, scale) from event lines
        self.overflows: list[int] = []  # row index before each overflow line
        self.n_rows = 0
        self.line_no = 0
        self.header: list[str] | None = None
        self.wrapped: str | None = None  # a line ending with `|`, maybe continued on the next
        self.pending: list[tuple[int, str, str, float | None]] = []  # one-pair lines of a record being read
        self.hints: list[tuple[int, float]] = []  # (index of the next row, step) said by an event line
        self.n_events = 0
        self.scale_seq: list[int] = []  # the event number of each scale point and overflow
        self.overflow_seq: list[int] = []
        #: (event number, step the line names or None) of each "the loss became NaN" line
        self.nan_seq: list[tuple[int, float | None]] = []
        self.nan_rows: list[int] = []  # rows of an events-only text that are such lines
        self.header_key: tuple[str, ...] | None = None
        self.name_line: tuple[int, list[str]] | None = None  # (line number, words) of a line of names only
        self.in_eval = False  # inside an evaluation section (`Eval begin...`)
        self.warned_at = -1  # the line of the last Python warning (`run.py:198: UserWarning: ...`)
        self.last_table: tuple[list[str], tuple[str, ...] | None] | None = None  # the last header that had rows
        self.block: dict[str, float] | None = None
        self.record_keys: set[str] = set()  # the keys of the records of several pairs read so far
        self.section = ""
        self.ranks = 0  # how many ranks printed lines that name their rank (only the lowest's are read)
        #: a line's text with its digits zeroed -> its template and where its numbers are
        self._cache: dict[str, tuple[Template, tuple[tuple[int, int], ...]]] = {}

    def feed(self, raw: str) -> None:
        self.line_no += 1
        if _PY_WARNING.match(raw):
            self.warned_at = self.line_no
        elif self.warned_at == self.line_no - 1 and raw[:1] in (" ", "\t"):
            return  # the source line a Python warning echoes (`  t_loss += loss.data[0]`): code, no record
        text = clean(raw)
        bar = _GLUED_BAR.match(text)
        if bar is not None:  # the print glued to a bar is a line of its own (its own prefix too)
            text = clean(text[bar.end() :])
        text = latin(text)
        if not text:
            return
        if "'" in text or '"' in text:
            text = _QUOTED_NAME.sub(_name_placeholder, text)
        if "," in text:
            text = whole_numbers(text)
        if "_" in text:
            text = unglued(text)
        if GLUED_COUNTER.search(text):
            text = counters_apart(text)
        if raw[:1] != text[:1] != "[" and (
            "] [" in raw or "]\t" in raw or raw[:1] == "["
        ):  # a prefix was cut: a `[N]`?
            text = _counter_back(raw, text)
        if self.in_eval:
            text = self._section(text)
            if not text:
                return
        if (many := _LOSS_LIST.match(text)) is not None:
            for v in NUMBER.findall(many.group(2)):  # a loss per step, in order: a row each
                self._feed_text(f"{many.group(1)}: {v}")
            return
        if self.wrapped is not None or text[-1] == "|" and text[0] != "|" or _NAME_LAST.search(text):
            joined = self._unwrap(text)
            if joined is None:
                return
            text = joined
        if self._known(text):
            return  # a shape read before: a row again (the common case)
        pieces = _pasted_pieces(text)
        if len(pieces) > 1 or pieces[0] != text:
            for piece in pieces:
                if not self._known(piece):
                    self._fresh(piece)
            return
        self._fresh(text)

    def _known(self, text: str) -> bool:
        hit = self._cache.get(text.translate(_ZERO_DIGITS))
        if hit is not None and self.header is None and self.block is None and not self.pending:
            self._values(text, *hit)
            return True
        return False

    def _fresh(self, text: str) -> None:
        if len(text) <= 64 and EVAL_SECTION.match(text):  # a line without numbers: never a cached shape
            self.in_eval = True
            return
        self._feed_text(text)

    def _section(self, text: str) -> str:
        """Lines of an evaluation section (`Eval begin...` then lines shaped like the training line):
        each such line read as an evaluation's (`eval | ` in front of it); the section ends at the
        first line of another shape."""
        if EVAL_SECTION.match(text):
            self.in_eval = True
            return ""
        self.in_eval = False
        t = self.templates.get(_shape_key(text, [m.span() for m in NUMBER.finditer(text)])[1])
        if (
            t is not None
            and t.text not in _NOT_LINES
            and any(classify_slot(t, j) == "train" for j in range(len(t.names)))
        ):
            self.in_eval = True
            return "eval | " + text
        return text

    def _unwrap(self, text: str) -> str | None:
        """Fields wrapped over several lines (Megatron's `iteration 5/50 | ... |` broken by a terminal
        or a paste, each piece ending with `|`): the pieces joined into one line. A line of the same
        shape as the held one (the next record, unwrapped) is not joined: the held one is read alone."""
        held, self.wrapped = self.wrapped, None
        if held is not None:
            if _shape(held) == _shape(text) or len(held) > 4000 or held[-1] != "|" and not _VALUE_FIRST.match(text):
                self._feed_text(held)
            else:
                text = held + " " + text
        if text[-1] == "|" and text[0] != "|" or _NAME_LAST.search(text):
            self.wrapped = text
            return None
        return text

    def _feed_text(self, text: str) -> None:
        zeroed = text.translate(_ZERO_DIGITS)
        hit = self._cache.get(zeroed)
        if hit is not None and self.header is None and self.block is None and not self.pending:
            self._values(text, *hit)
            return
        if ("=" in text or ":" in text or "  " in text or "\t" in text) and self._pair_line(text):
            return
        if self.pending:
            self._flush_record()
        self._line(text, zeroed)

    def _line(self, text: str, zeroed: str | None = None) -> None:
        if _RULE.match(text):
            self._end_block()
            return
        if text[0] == "|" and text[-1] == "|" and self._kv_line(text):
            return
        self._end_block()
        zeroed = text.translate(_ZERO_DIGITS) if zeroed is None else zeroed
        hit = self._cache.get(zeroed)
        if hit is not None and self.header is None:
            self._values(text, *hit)
            return
        if classify(text) is not None and (names_a_loss(text) or _counted_metrics(text)):
            # a training line that also says "truncated", "loss_scale: N" or "nan": a row first (the
            # NaN it holds is the symptom), its event recorded at that row
            if not self._table_line(text):
                self._template_line(text, zeroed)
        kind = self.events.scan(self.line_no, text, self.n_rows)
        if kind is not None:
            self._event(kind, text)
            return
        if self._table_line(text):
            return
        self._template_line(text, zeroed)

    def _event(self, kind: str, text: str) -> None:
        m = _STEP_HINT.search(text)
        if m is not None:
            self.hints.append((self.n_rows, float(m.group(1))))
        self.n_events += 1
        if kind == "nonfinite_loss":
            self.nan_seq.append((self.n_events, float(m.group(1)) if m is not None else None))
        if kind == "overflow":
            self.overflows.append(self.n_rows)
            self.overflow_seq.append(self.n_events)
        if kind in ("overflow", "loss_scale"):
            v = scale_in(text)
            if v is not None:
                self.scale_points.append((self.n_rows, v))
                self.scale_seq.append(self.n_events)

    # --- one line of a repeated shape -------------------------------------------------------

    def _template_line(self, text: str, zeroed: str) -> None:
        hit = self._new_shape(text)
        if hit is None:
            return
        if len(self._cache) > 4096:
            self._cache.clear()
        self._cache[zeroed] = hit
        self._values(text, *hit)

    def _values(self, text: str, t: Template, spans: tuple[tuple[int, int], ...]) -> None:
        try:
            values = [float(text[a:b]) for a, b in spans]
        except ValueError:  # MSVC's `1.#INF`, a padded `nanxxx`: read by the slower parser; anything else is no row
            values = [text_number(text[a:b]) for a, b in spans]
            if not any("#" in text[a:b] or text[a:b][-1:] in "xX" for a, b in spans):
                return
        self._row(t, values)

    def _new_shape(self, text: str) -> tuple[Template, tuple[tuple[int, int], ...]] | None:
        spans = tuple(m.span() for m in NUMBER.finditer(text))
        if not spans or len(spans) > 64:
            return None
        parts, key = _shape_key(text, spans)
        if self.loose:
            key = key[: key.rfind("\x00") + 1]  # the words after the last number are free text
        t = self.templates.get(key)
        if t is None:
            if len(self.templates) >= _MAX_TEMPLATES:
                return None
            names = slot_names(text, list(spans))
            t = Template(key, names, _eval_context(text, list(spans), names))
            t.slash = [_slash(parts, j) for j in range(len(spans))]  # `N/TOTAL` counters
            t.in_brackets = [
                parts[j].rstrip().endswith("[") and parts[j + 1].lstrip().startswith("]") for j in range(len(spans))
            ]
            t.bracketed = [b and not names[j] for j, b in enumerate(t.in_brackets)]  # `[100] loss=` (clu)
            t.leading = leading_slots(parts, names)
            t.losses = gan_parts(text, names)
            t.adversarial = bool(t.losses)
            t.losses = t.losses or headed_parts(text, spans, names)
            if not names[0] and parts[0].strip() == "" and _LEADING_SLOT.match(parts[1]):
                t.bracketed[0] = (
                    True  # `120: loss 2.31`, `120 loss: 2.31`, `120 | loss`, Darknet's ` 1: 2.31`: a counter
                )
            self.templates[key] = t
        return t, spans

    def _row(self, t: Template, values: list[float]) -> None:
        t.lines.append(self.line_no)
        t.order.append(self.n_rows)
        t.rows.append(values)
        self.n_rows += 1

    # --- tables -------------------------------------------------------------------------

    def _table_line(self, text: str) -> bool:
        cells = split_cells(text)
        header, key = self.header, self.header_key
        if header is None and self.last_table is not None:
            header, key = self.last_table  # a table resumed after another's lines (YOLOv5's val rows between epochs)
        if header is None and _YOLO_RESULTS_ROW.match(text):
            header, key = list(_YOLO_RESULTS_HEADER), _YOLO_RESULTS_HEADER  # its results.txt: no header written
        mark = None
        if header is not None and len(cells) != len(header):
            cells, mark = _spaced_row(text, cells, len(header))
        if len(cells) < 2:
            return self._spaced_header(text)
        if header is not None and len(cells) > len(header) and "|" in text:
            cells = split_cells(_BAR_TAIL.sub("", text))
        if header is not None and len(cells) == len(header) and all(_CELL_RULE.match(c) for c in cells):
            return True  # Markdown's `-- | --` under the header: the table goes on
        if header is not None and len(cells) == len(header):
            values = [_cell(c) for c in cells]
            if all(v is not None for v in values) and any(v == v for v in values):
                phase = _phase_column(header)
                evaluating = phase is not None and values[phase] == 0.0 or bool(mark)
                t = self._table_template(header, key, evaluating)
                self.header, self.header_key, self.last_table = header, key, (header, key)
                self._row(t, values)  # type: ignore[arg-type]
                return True
        self.header = None  # the table ended
        names_before, self.name_line = self.name_line, None
        if _is_header(cells):
            cells = _stacked(names_before, self.line_no, text) or _uncommented(text, cells)
            self.header, self.header_key = cells, tuple(cells)
            return True
        if _NAMES_ONLY.match(text):
            self.name_line = (self.line_no, text.split())
        return False

    def _spaced_header(self, text: str) -> bool:
        """A header of names separated by single spaces (fastai's `epoch train_loss valid_loss
        accuracy time`): only when at least three words are all names and two are metric names."""
        words = text.split()
        if (
            len(words) >= 3
            and all(_NAME_WORD.match(w) for w in words)
            and _is_header(words)
            and sum(bool(_METRICISH.search(w)) for w in words) >= 2
        ):
            self.header, self.header_key = words, tuple(words)
            return True
        return False

    def _table_template(self, header: list[str], key: tuple[str, ...] | None, evaluating: bool) -> Template:
        """The table's template; the rows a phase column marks as evaluation (`train: False`, as
        fastai's and minai's metric tables print them) get their own, whose losses are eval losses."""
        tkey = ("table", key, "eval") if evaluating else ("table", key)
        t = self.templates.get(tkey)
        if t is None:
            marks = [bool(EVAL_NAME.search(h)) or (evaluating and step_rank(h) is None) for h in header]
            t = Template("table", list(header), marks)
            if any(_YOLO_HEADER.match(h) for h in header):
                t.losses = _YOLO_LOSSES
            self.templates[tkey] = t
        return t

    # --- key/value blocks ------------------------------------------------------------------

    def _kv_line(self, text: str) -> bool:
        m = _KV_LINE.match(text)
        if m is None:
            return False
        key, value = m.group(1), m.group(2)
        if not key or _cell(key) is not None:
            return False
        if value == "":
            if key.endswith("/"):
                self.section = key
                if self.block is None:
                    self.block = {}
                return True
            return False
        v = _cell(value)
        if v is None:
            return False
        if self.block is None:
            self.block, self.section = {}, ""
        name = (self.section + key) if self.section and raw_indented(text) else key
        self.block[name] = v
        return True

    def _end_block(self) -> None:
        block, self.block, self.section = self.block, None, ""
        if not block:
            return
        names = tuple(block)
        key = ("block", names)
        t = self.templates.get(key)
        if t is None:
            t = Template("block", list(names), [bool(EVAL_NAME.search(n.split("/")[0])) for n in names])
            self.templates[key] = t
        self._row(t, [block[n] for n in names])

    def finish(self) -> None:
        if self.wrapped is not None:
            held, self.wrapped = self.wrapped, None
            self._feed_text(held)
        if self.pending:
            self._flush_record()
        self._end_block()
        _cut_first_line(self.templates)
        _wrapped_lines(self.templates)
        _worded_values(self.templates)

    # --- records printed one `key: value` per line -----------------------------------------

    def _pair_line(self, text: str) -> bool:
        """A line holding one `key: value` / `"key": value,` pair (a pretty-printed dict, RSL-RL's
        block, llama-recipes' `Key: k, Value: v`) joins the record being read; a key seen again in
        it starts the next record. A pair with a text value (`"eta": "1 day, 13:30:44"`) is skipped
        inside a record."""
        m = _KEY_VALUE.match(text) or _PAIR.match(text)
        if m is None and self.header is None:  # under a table's header, an aligned line is its row
            m = _ALIGNED_PAIR.match(text)
        if m is None or _DIGIT_WORD.search(m.group(1)):
            return False
        key, raw = m.group(1).strip(), m.group(2).strip()
        if raw[-1:] == ")" and (avg := _WITH_AVERAGE.match(raw)) is not None:
            raw = avg.group(1)
        if "," in raw and raw[:1] not in "'\"" and not _WRAPPED_VALUE.match(raw) and len(NUMBER.findall(raw)) > 1:
            return False  # `loss = 2.3, step = 101 (9.5 sec)`: several pairs, a line of its own shape
        value = _cell(raw)
        if value is None and key in self.record_keys and (left := _OVERWRITTEN.match(raw)) is not None:
            value = float(left.group(1))  # `Epoch    :  7ain data 10/10`: a bar's tail left after the value
        if value is None or value != value and not _NAN_WORD.match(raw):
            return bool(self.pending) and raw[:1] in "'\""
        if any(k == key for _, _, k, _ in self.pending):
            self._flush_record()
        self.pending.append((self.line_no, text, key, value))
        return True

    def _flush_record(self) -> None:
        pending, self.pending = self.pending, []
        if len(pending) == 1 and pending[0][2] not in self.record_keys:  # one pair alone: a line of its own
            line_no, self.line_no = self.line_no, pending[0][0]
            self._line(pending[0][1])
            self.line_no = line_no
            return
        names = tuple(k for _, _, k, _ in pending)
        if len(names) > 1:
            self.record_keys.update(names)  # a record cut to one of these keys is still a record
        key = ("record", names)
        t = self.templates.get(key)
        if t is None:
            t = Template("record", list(names), [bool(EVAL_NAME.search(n)) for n in names])
            self.templates[key] = t
        line_no, self.line_no = self.line_no, pending[0][0]
        self._row(t, [v for _, _, _, v in pending])  # type: ignore[misc]
        self.line_no = line_no


def _cut_first_line(templates: dict[Any, Template]) -> None:
    """The first line of an excerpt cut at its start (ctrNet's `poch 0 step 100 lr 0.001 logloss 0.365`
    over `  epoch 0 step 200 ...`): its shape is a later shape's with the start of the first word lost.
    Its row joins that shape's rows (as their first), instead of being a shape of its own, one row
    that is no series."""
    cut = next((t for t in templates.values() if t.order[:1] == [0] and len(t.rows) == 1), None)
    key = next((k for k, t in templates.items() if t is cut), None)
    if cut is None or not isinstance(key, str) or "\x00" not in key:
        return
    head, rest = key.split("\x00", 1)
    for k, whole in templates.items():
        if isinstance(k, str) and k != key and k.endswith("\x00" + rest) and k[: -len(rest) - 1].endswith(head):
            if len(whole.names) != len(cut.names) or not whole.rows:
                continue
            whole.rows.insert(0, cut.rows[0])
            whole.lines.insert(0, cut.lines[0])
            whole.order.insert(0, 0)
            whole.steps_memo = None
            break
    else:
        return
    del templates[key]


def _wrapped_lines(templates: dict[Any, Template]) -> None:
    """A line wrapped in two by a terminal or a paste between its fields (arcface_torch's `Training:
    ... LearningRate 0.001000   ` then `Epoch: 0   Global Step: 20 ...` on the next line), each piece a
    shape read once: where the two shapes, one after the other, make a shape read on other lines,
    their numbers are one row of it (at its place in reading order) instead of two rows of shapes
    that are no series."""
    once = {t.order[0]: (k, t) for k, t in templates.items() if isinstance(k, str) and len(t.rows) == 1}
    for o, (ka, a) in sorted(once.items()):
        kb, b = once.get(o + 1, (None, None))
        if kb is None or b is None or b.lines[0] != a.lines[0] + 1 or ka not in templates or kb not in templates:
            continue
        whole = templates.get(ka + kb)
        if whole is None or not whole.rows or len(whole.names) != len(a.names) + len(b.names):
            continue
        at = bisect.bisect(whole.order, o)
        whole.rows.insert(at, a.rows[0] + b.rows[0])
        whole.lines.insert(at, a.lines[0])
        whole.order.insert(at, o)
        whole.steps_memo = None
        del templates[ka], templates[kb]


def _worded_values(templates: dict[Any, Template]) -> None:
    """A line read once whose shape is a repeated shape with one number written as words (`image-loss: No
    data  video-loss: 3.1493` among lines of `image-loss: nan  video-loss: nan`): a row of that shape,
    that number not logged, instead of a shape of its own (the first step of the log lost)."""
    for key, t in list(templates.items()):
        if not isinstance(key, str) or len(t.rows) != 1:
            continue
        for k, whole in templates.items():
            j = _worded_slot(key, k) if isinstance(k, str) and whole.rows and k != key else None
            if j is None or len(whole.names) != len(t.names) + 1:
                continue
            at = bisect.bisect(whole.order, t.order[0])
            whole.rows.insert(at, [*t.rows[0][:j], NOT_LOGGED, *t.rows[0][j:]])
            whole.lines.insert(at, t.lines[0])
            whole.order.insert(at, t.order[0])
            whole.steps_memo = None
            del templates[key]
            break


def _worded_slot(key: str, whole: str) -> int | None:
    """The slot of shape `whole` that `key` writes as words (`_NO_VALUE_WORDS`), or None."""
    parts = whole.split("\x00")
    low = key.lower()
    for j in range(len(parts) - 1):
        for w in _NO_VALUE_WORDS:
            if "\x00".join([*parts[:j], parts[j] + w + parts[j + 1], *parts[j + 2 :]]).lower() == low:
                return j
    return None


_SPACES = re.compile(r"\s+")


#: Markdown emphasis typed around a value in a pasted log (`gan1: **6.840**`)
_BOLD = re.compile(r"\*\*([^*\s]{1,40})\*\*")
#: where a line's opening words start again right after a closing bracket or a value: two records glued
#: where a paste or two processes lost the newline between them (`... fake2: 0.022][Epoch 11/11] [Batch
#: 3871/3880] ...`, two ranks' `Training Loss: nanEpoch: 1/1, Iteration: 2/160782, ...`)
_OPENING = re.compile(r"^(\[?[A-Za-z][A-Za-z _]{2,}[:=\s]*)\d")


def _pasted_pieces(text: str) -> list[str]:
    """A line as it was printed before a paste: Markdown bold around its values dropped, two records
    glued together split apart (only a line of a shape not read before comes here)."""
    if "**" in text:
        text = _BOLD.sub(r"\1", text)
    m = _OPENING.match(text)
    if m is None:
        return [text]
    head = m.group(1)
    pieces, start = [], 0
    i = text.find(head, len(head))
    while i > 0:
        if text[i - 1] in ")]" or text[i - 1].isdigit() or text[i - 3 : i].lower() in ("nan", "inf"):
            pieces.append(text[start:i])
            start = i
        i = text.find(head, i + len(head))
    pieces.append(text[start:])
    return pieces


def _shape_key(text: str, spans: Sequence[tuple[int, int]]) -> tuple[list[str], str]:
    """The pieces of a line around its numbers, and its template's key: the pieces without their
    spaces (padding varies with the digits)."""
    parts, prev = [], 0
    for a, b in spans:
        parts.append(text[prev:a])
        prev = b
    parts.append(text[prev:])
    return parts, "\x00".join(_SPACES.sub("", _BAR_FILL.sub("[]", part)) for part in parts)


#: a progress bar's fill between brackets (`[#####               ]`, `[=====>....]`): its length changes
#: with the progress, so one line printed at 7% and at 50% would otherwise be two shapes
_BAR_FILL = re.compile(r"\[[#=>.*█▏▎▍▌▋▊▉░▒▓-]+ *\]|\[ +\]")


def _shape(text: str) -> str:
    """A line without its numbers and spaces (`iteration 100/ 500 |` and `iteration  2000/ 500 |` alike)."""
    return _SPACES.sub("", NUMBER.sub("#", text))


#: what follows a leading unnamed number that may be a counter (used only when it increases: `steps_of`)
_LEADING_SLOT = re.compile(r":|\s+[A-Za-z]|\s*\|\s*[A-Za-z]")  # llama2.c's `10 | loss 2.31 |`: a column


def _counter_back(raw: str, text: str) -> str:
    """The line with the bare `[N]` that `clean` took for a rank's prefix put back in front: right
    before the content it is the line's counter (XGBoost's `[0]\ttrain-logloss:0.61`, behind its
    logger's clock `[10:32:11] `; CLU's `[100] loss=2.31` behind absl's `I0601 12:00:00.1 1402
    logging_writer.py:48] `); a rank's tag stays the same on every line, so it never counts up."""
    k = len(raw.rstrip()) - len(text)  # where the content starts (clean cut the front only)
    if k < 4 or raw[k - 1] not in " \t" or not raw.startswith(text[:8], k):
        return text
    head = raw[:k].rstrip()
    if head[-1:] != "]":
        return text
    counter = head[head.rfind("[") :]
    return f"{counter} {text}" if counter[1:-1].isdigit() else text


#: one `key: value` pair making up the whole line (dict braces, quotes and a trailing comma around it)
#: (a list's marker may stand before it: Coqui's `| > loss: 3.63  (3.53)`, `* loss = 3.63`, `• loss: 3.63`; not
#: a `-`, which a logger's ` - INFO - ` leaves)
_PAIR = re.compile(r"^(?:[{\s'\"]|[|>*•](?=[\s|>]))*([A-Za-z_][\w ./@()-]{0,80}?)['\"]?\s*[:=]\s*(\S.{0,60}?)\s*[,}]*$")
#: one key and its number set apart by a run of spaces or a tab, the whole line (a tabular logger's dump, one
#: key per line: rlpyt's and rllab's `loss/Average    0.31`, `CumTime (s)    12.5`, after the clock its logger
#: prints in front): the key's words are set apart by single spaces, the value by more
_ALIGNED_PAIR = re.compile(
    r"^([A-Za-z_](?:[\w./@()-]| (?! )){0,80}?)(?:[ ]{2,}|\t+)([-+]?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][-+]?\d+)?|[-+]?(?:nan|inf))\s*$",
    re.IGNORECASE,
)
#: a value followed by its running average in parentheses (`3.6332  (3.5348)`): the value
_WITH_AVERAGE = re.compile(r"^(\S+)\s+\(\s*[-+]?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][-+]?\d+)?\s*\)$")
_DIGIT_WORD = re.compile(r"(?<![\w.])\d")
#: a value printed inside a wrapper whose own arguments hold numbers (`tensor(2.3, device='cuda:0')`)
_WRAPPED_VALUE = re.compile(r"^['\"]?(?:(?:torch\.)?tensor|(?:np\.|numpy\.)?\w+\d*)\(")
_NAN_WORD = re.compile(r"^['\"]?[-+]?(?:nan|inf)", re.I)
#: llama-recipes' summary (`train_utils.py`: `print(f"Key: {key}, Value: {value}")`)
#: a whole number with the tail of a longer line glued after it: a progress line drawn with `\r` and
#: overwritten in place by the next print, pasted as the terminal showed it (`Epoch    :  7ain data 10/10`
#: over `Generating train data 10/10`)
_OVERWRITTEN = re.compile(r"^(\d+)[a-z]{2,}\b")
_KEY_VALUE = re.compile(r"^Key:\s*([A-Za-z_][\w./-]*),\s*Value:\s*(\S+)$")
#: the step an event line names (detectron2: `Loss became infinite or NaN at iteration=27!`)
_STEP_HINT = re.compile(r"(?<![A-Za-z])(?:global[_ ]step|iteration|iter|step)\s*[=:]?\s*(\d+)(?![\d.])", re.I)
_ZERO_DIGITS = str.maketrans("123456789", "000000000")
_METRICISH = re.compile(
    r"loss|acc|step|epoch|iter|lr|learning|norm|reward|score|perplex|ppl|error|"
    r"f1|bleu|mse|mae|time",
    re.IGNORECASE,
)
_CLOCK = re.compile(r"^\d+:\d\d(?::\d\d)?(?:\.\d+)?$")
_NOT_A_VALUE = {"no log", "no data", "-", "--", "none", "n/a", "null", ""}
#: what a logger prints in a number's place when it has none (VideoChat2's MetricLogger `image-loss: No data`
#: on a step without images, the HF Trainer's `No log`): a table cell's words (`_NOT_A_VALUE`), spaces dropped
#: as in a shape's key, compared without case
_NO_VALUE_WORDS = tuple(sorted({w.replace(" ", "") for w in _NOT_A_VALUE if w}))
#: what a cell that says nothing was logged (`No log`: the HF Trainer's results table before its first
#: logging step) is read as: a NaN with a payload of its own, so a row keeps its shape as numbers and
#: `build` drops these cells (not logged) instead of reading a NaN loss
NOT_LOGGED = struct.unpack("<d", struct.pack("<Q", 0x7FF8_0000_0000_0B1D))[0]
_NOT_LOGGED_BITS = struct.pack("<d", NOT_LOGGED)


def not_logged(v: float) -> bool:
    """Whether v is a cell that said nothing was logged (`NOT_LOGGED`), not a NaN the run printed."""
    return v != v and struct.pack("<d", v) == _NOT_LOGGED_BITS


_BOOLEAN = {"true": 1.0, "false": 0.0}
#: a column whose True/False says a row is a training (True) or an evaluation (False) row
_PHASE_NAMES = {"train", "training", "is_train"}
#: a Markdown table's rule row under the header (`--`, `:---:`)
_CELL_RULE = re.compile(r"^:?-{2,}:?$")
_NAME_WORD = re.compile(r"^[A-Za-z_][\w.]*$")


#: a line of three or more words and nothing else (maybe the first line of a header printed over two)
_NAMES_ONLY = re.compile(r"^\s*[A-Za-z_][\w./%-]*(?:\s+[A-Za-z_][\w./%-]*){2,}\s*$")
#: a word a table row may end with beyond its header's cells, and whether it marks the row as an
#: evaluation's (Vowpal Wabbit's ` h`: past the first pass, a row of the holdout set's loss)
_ROW_MARKS = {"h": True, "*": False}


def _spaced_row(text: str, cells: list[str], width: int) -> tuple[list[str], bool | None]:
    """A row whose cells did not split as its header did: printed with single spaces (fastai's
    `epoch train_loss valid_loss`, Vowpal Wabbit's `0.693147 0.693147  1`), maybe with a mark after
    the last cell; (the cells, whether the mark says evaluation, None when there is none)."""
    words = text.split()
    if len(words) == width:
        return words, None
    if len(words) == width + 1 and words[-1] in _ROW_MARKS:
        return words[:-1], _ROW_MARKS[words[-1]]
    if "|" not in text and len(words) == width - 1 and len(words) >= 2:
        # its last column left blank (scikit-learn's verbose boosting table prints no `Remaining Time`
        # once its loss overflows the column: `13 1071...104.0000`): that cell logged nothing
        return [*words, "-"], None
    return cells, None


def _stacked(before: tuple[int, list[str]] | None, line_no: int, text: str) -> list[str] | None:
    """A header printed over two lines, each column's name stacked in it (Vowpal Wabbit's `average  since
    example ...` over `loss  last  counter ...`): the names joined word by word, when the line of names
    right before has as many words as this one."""
    words = text.split()
    if before is None or before[0] != line_no - 1 or len(before[1]) != len(words):
        return None
    return [f"{a} {b}" for a, b in zip(before[1], words)]


#: a header written as a comment line (DeePMD-kit's `lcurve.out`: `#  step  rmse_val  rmse_trn ...`, numpy's
#: `savetxt(header=...)`), maybe inside a paste's quotes: the `#` marks the comment, it names no column
_COMMENT_MARK = re.compile(r"^[\"']?\s*#+\s*(?=[A-Za-z_])")


def _uncommented(text: str, cells: list[str]) -> list[str]:
    """A header's cells without the comment mark in front of its first name (the rows under it print
    no `#`: their first cell is the first name's, the step in `lcurve.out`)."""
    m = _COMMENT_MARK.match(text)
    if m is None or "|" in text:
        return cells
    rest = split_cells(text[m.end() :])
    return rest if _is_header(rest) else cells


def _is_header(cells: list[str]) -> bool:
    return all(len(c) <= 40 and NUMBER.search(c) is None for c in cells) and any(_METRICISH.search(c) for c in cells)


def _phase_column(header: list[str]) -> int | None:
    """The column that says whether a row is a training row (`train`: True/False)."""
    for j, h in enumerate(header):
        if h.strip().lower() in _PHASE_NAMES:
            return j
    return None


def _cell(c: str) -> float | None:
    """A table cell as a number (NaN for a cell that says nothing was logged; 1/0 for True/False),
    else None."""
    s = c.strip().strip("'\"")
    if not s.isascii():
        s = _marks_off(s)
    if s[:2] in ("**", "__") and s[-2:] == s[:2]:
        s = s[2:-2].strip()  # a Markdown table's bold cell (`**74.04%**`: the best value so far)
    if s.lower() in _BOOLEAN:
        return _BOOLEAN[s.lower()]
    if s.lower() in _NOT_A_VALUE:
        return NOT_LOGGED
    if _CLOCK.match(s):
        return float("nan")  # a duration column (fastai's `00:12`)
    if s[:1] == "[" and s[-1:] == "]":
        return _listed(s[1:-1])
    m = _CELL_NUMBER.match(s) or _CELL_COUNTER.match(s)
    if m is None:
        return None
    try:
        return float(m.group(1))
    except ValueError:
        return None


def _listed(inner: str) -> float | None:
    """A cell holding a list of numbers (DeepXDE's `[5.47e+03]`, `[1.2e-01, 3.4e-02]`: one loss per
    term of the objective): their sum, the total (NaN when one is); None when an item is no number."""
    items = [x for x in re.split(r"[,\s]+", inner.strip()) if x]
    try:
        values = [float(x) for x in items]
    except ValueError:
        return None
    return float(sum(values)) if values else None


def _marks_off(s: str) -> str:
    """A cell without the pictographs typed after its value (`**74.04%** ✅`, `77.45% 🏆`): symbols, emoji
    joiners and variation selectors at its end."""
    end = len(s)
    while end and (unicodedata.category(s[end - 1])[0] == "S" or s[end - 1] in "\u200d\ufe0f \t"):
        end -= 1
    return s[:end]


#: a number cell (a tensor's repr, a percentage, a size, a duration such as nolearn's `dur` `0.05s`)
_CELL_NUMBER = re.compile(
    r"^(?:(?:torch\.)?tensor\(|np\.float\d+\()?\s*([-+]?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][-+]?\d+)?|"
    r"[-+]?(?:nan|inf))\s*(?:,.*\)|\))?(?:%|[KMGT]i?B?|s|ms|sec|min|h)?$",
    re.IGNORECASE,
)
#: a counter cell `N/TOTAL` (YOLOv5's epoch `1/99`): its N
_CELL_COUNTER = re.compile(r"^(\d+)/\d+$")


def raw_indented(text: str) -> bool:
    """A key/value line whose key is indented under a section line (`|    loss    | 0.41 |`)."""
    return text[1:3] == "  "


# --- from shapes to series ------------------------------------------------------------------


def choose(parser: TextParser) -> dict[str, Any]:
    """Which template is the training line and which slot is each series. A series needs two rows;
    when no loss has two, one row is enough (a single dict dump, one RL block, one summary)."""
    cands = _candidates(parser, _MIN_ROWS)
    if not cands["train"] and not any(len(c[4].rows) >= _MIN_ROWS for c in cands["component"]):
        cands = _candidates(parser, 1)
    train = _off_bar(cands["train"], min(cands["train"], key=lambda c: c[:4])) if cands["train"] else None
    train = _value_over_average(cands["train"], train) if train is not None else None
    train = _finer_than_summary(cands["train"], train) if train is not None else None
    guessed = train is None or train[0] >= 50
    if train is not None and guessed and (total := _total_part(cands["component"])) is not None:
        train, guessed = total, False
    if train is not None and guessed and (once := _named_once(parser, train)) is not None:
        train, guessed = once, False
    summed, of_parts = None, []
    policy = _policy(cands["component"]) if train is None else None
    if policy is not None:  # an RL run's policy loss: the loss, its value/KL/entropy terms kept beside it
        train, guessed = policy, False
    elif train is None and (head := _named_head(cands["component"])) is not None:
        train, guessed = head, False  # `batch_loss` beside `batch_loss_c`, `batch_loss_s`: the parts' head
    elif train is None and cands["component"]:
        summed = _summed(cands["component"])
        total = _printed_total(*summed) if summed is not None else None
        if total is None and summed is not None and (inner := _total_among(*summed)) is not None:
            total, summed = inner, (summed[0], [k for k in summed[1] if k != inner[5]])
        if (
            total is not None and summed is not None
        ):  # the parts' sum printed under a name of its own (YOLOv7's `total`)
            train, of_parts, summed, guessed = total, [(summed[0], k) for k in summed[1]], None, False
        elif summed is None and not _rivals(cands["component"]):
            train = min(cands["component"], key=lambda c: (c[1], c[2], c[3]))  # kept among the components too
    rival = train is None and summed is None and bool(cands["component"])
    parts: list[tuple[Template, int]] = []
    if train is None and summed is None and not rival:
        total = _total_of_parts(parser) or _unnamed_total(parser)
        train, parts, guessed = (total[0], total[1], False) if total is not None else (_lone(parser), [], True)
        train = train or _bare(parser)
    main = train[4] if train is not None else summed[0] if summed is not None else _busiest(parser)
    if rival:  # two adversaries only: their line is the one that holds them
        main = max((c[4] for c in cands["component"]), key=lambda t: (len(t.rows), -t.order[0]))
    return {
        "all": list(parser.templates.values()),
        "main": main,
        "loss": train[4:] if train else None,
        "guessed": guessed,
        "summed": summed,
        "policy": policy is not None,
        "siblings": _siblings(parser, train[4], train[5])
        if train and train[4].text not in _NOT_BLOCKS
        else [(t, k[0]) for t, k in _summed_siblings(list(parser.templates.values()), *summed)]
        if summed
        else [],
        "rivals": sorted({c[4].names[c[5]] for c in cands["component"]}) if rival else [],
        "eval": min(cands["eval"], key=lambda c: c[:4])[4:] if cands["eval"] else None,
        "components": [c[4:] for c in cands["component"]] + parts + _other_losses(cands["train"], train),
        "parts": parts or of_parts,
    }


def _other_losses(found: list[tuple[Any, ...]], train: tuple[Any, ...] | None) -> list[tuple[Template, int]]:
    """The training losses of other lines than the chosen one, under names of their own (a GAN
    script's `DLoss:nan` on its counter line beside the generator's `L_total:` line): kept apart as
    components, so a NaN there is seen, never in the training loss. Not the chosen line's other slots
    (its running average) nor a line printing the chosen name (a sibling of the same series)."""
    if train is None:
        return []
    chosen = name_key(train[4].names[train[5]])
    return [
        (c[4], c[5])
        for c in found
        if c[4] is not train[4] and name_key(c[4].names[c[5]]) != chosen and c[4].text not in _NOT_LINES
    ]


def _policy(found: list[tuple[Any, ...]]) -> tuple[Any, ...] | None:
    """With no total printed, an RL trainer's policy loss (verl's `actor/pg_loss`, DeepSpeed-Chat's `act_loss`,
    RSL-RL's `Surrogate loss`, `policy_loss`) is the training loss: what the run optimises its policy by. The
    value, critic, KL and entropy terms beside it are kept as components and not added to it (their weights
    are not printed, and a critic is another model); the policy loss may sit near 0 or below it."""
    policy = [c for c in found if policy_named(c[4].names[c[5]])]
    return min(policy, key=lambda c: (c[1], c[2], c[3])) if policy else None


_TOTAL_WORD = re.compile(r"(?:^|[ _])total(?:$|[ _])", re.IGNORECASE)


def _named_once(parser: TextParser, guess: tuple[Any, ...]) -> tuple[Any, ...] | None:
    """A loss named as the training loss (`training loss at iteration 31000: 7.48`) printed fewer than two
    times, beside a guessed loss printed more (`focal loss at iteration ...`, one of its parts): a paste cut
    inside the record that prints them all, every step it was printed at also a step of the guess. That
    name is the loss, not the part that happened to be printed once more."""
    guess_steps, _, how = steps_of(guess[4])
    if guess_steps is None or how == "numbered":
        return None
    once = [
        c
        for c in _candidates(parser, 1)["train"]
        if c[0] < 50 and len(c[4].rows) < _MIN_ROWS and not EVAL_NAME.search(c[4].names[c[5]])
    ]
    for c in sorted(once, key=lambda c: c[:4]):
        steps, _, how2 = steps_of(c[4])
        if steps is not None and how2 == how and set(steps.tolist()) <= set(guess_steps.tolist()):
            return c
    return None


def _total_part(found: list[tuple[Any, ...]]) -> tuple[Any, ...] | None:
    """The one loss named a total (HiFi-GAN's `Gen Loss Total : 77.188, Mel-Spec. Error : 1.468`): the
    loss the trainer steps on, before a name that is only a metric's (`Error`). A total of each of
    two adversaries says no one loss."""
    totals = [c for c in found if _TOTAL_WORD.search(base_name(name_key(c[4].names[c[5]])))]
    return totals[0] if len(totals) == 1 else None


def _named_head(found: list[tuple[Any, ...]]) -> tuple[Any, ...] | None:
    """With no total's name printed: a loss whose name every other loss name of its line extends
    (PSENet's `batch_loss: 1.0, batch_loss_c: 1.0, batch_loss_s: 1.0`, a `loss_x` beside `loss_x_a`,
    `loss_x_b`) is the loss the others are parts of, printed by the script (never summed again;
    its weights are not printed). Two adversaries' losses have no head."""
    if _rivals(found):
        return None
    for c in found:
        head = base_name(name_key(c[4].names[c[5]]))
        others = [base_name(name_key(c[4].names[d[5]])) for d in found if d[4] is c[4] and d is not c]
        if others and all(o.startswith(head) and o[len(head) : len(head) + 1] in ("_", " ", ".") for o in others):
            return c
    return None


#: most parts a total is looked for over (a detection loss has 3 to 6)
_MAX_PARTS = 8


def _total_of_parts(parser: TextParser) -> tuple[tuple[Any, ...], list[tuple[Template, int]]] | None:
    """With no number named a loss: a number that is, on every row, the sum of the two or more named
    numbers right before it (or right after it), up to their rounding, is their total and they its
    parts (YOLACT's `B: 5.495 | C: 3.668 | M: 6.919 | S: 1.564 | T: 17.647`): a human adds them up
    to tell the loss. Timings, counters and averages are no parts."""
    for t in sorted(parser.templates.values(), key=lambda t: -len(t.rows)):
        if len(t.rows) < _MIN_ROWS or t.text in _NOT_LINES:
            continue
        a = np.array(t.rows, dtype=np.float64)
        ok = np.all(np.isfinite(a), axis=1)
        if ok.sum() < _MIN_ROWS:
            continue
        a = a[ok]
        named = [j for j in range(len(t.names)) if _part_like(t, j, a)]
        for j in named:
            for run in (_run_before(named, j), _run_after(named, j)):
                k = _summing(a, j, run)
                if k:
                    return (50, -len(t.rows), t.order[0], id(t), t, j), [(t, i) for i in k]
    return None


def _unnamed_total(parser: TextParser) -> tuple[tuple[Any, ...], list[tuple[Template, int]]] | None:
    """A counted line of numbers with no names at all (YOLOv7's `results.txt`: epoch, memory, box, obj, cls,
    total, labels, size, P, R, mAP...): a column equal on every row to the sum of two or more columns
    right before it, up to their rounding, is the total and they its parts, as with named parts. The
    columns are then named by their place (`column 6`)."""
    for t in sorted(parser.templates.values(), key=lambda t: -len(t.rows)):
        if len(t.rows) < _MIN_ROWS or t.text in _NOT_LINES or any(n not in ("", PERCENT) for n in t.names):
            continue
        _, counters, how = steps_of(t)
        if how not in ("counter", "named", "epoch_counter"):
            continue
        a = np.array(t.rows, dtype=np.float64)
        a = a[np.all(np.isfinite(a), axis=1)]
        if a.shape[0] < _MIN_ROWS:
            continue
        cols = [
            j
            for j in range(len(t.names))
            if j not in counters and not t.names[j] and not np.all(a[:, j] == np.round(a[:, j]))
        ]
        for j in cols:
            k = _summing(a, j, _run_before(cols, j))
            if k:
                for i in (j, *k):  # counted as printed: `0/149` is one column
                    t.names[i] = f"column {i + 1 - sum(t.slash[:i])}"
                return (50, -len(t.rows), t.order[0], id(t), t, j), [(t, i) for i in k]
    return None


def _part_like(t: Template, j: int, a: np.ndarray) -> bool:
    n = name_key(t.names[j])
    return (
        bool(n)
        and not n.startswith("(avg)")
        and step_rank(n) is None
        and not _NOT_A_PART.match(n)
        and not np.all(a[:, j] == np.round(a[:, j]))
    )


def _on_bar(t: Template) -> bool:
    """Whether the template is a progress bar's line (tqdm's `100%|...| 2785/2785 [00:53<00:00, 52.28it/s]`)."""
    return PERCENT in t.names and ("it/s" in t.text or "s/it" in t.text)


def _value_over_average(found: list[tuple[Any, ...]], best: tuple[Any, ...]) -> tuple[Any, ...]:
    """A loss named as an average (`epoch 14 average loss: 0.2148`, MONAI's tutorials) beside a plain
    training loss printed on more lines (`1/16, train_loss: 0.1162 step time: 0.94` each step): the
    steps' own values are the series, the average is a summary of them (a meter's value, not its
    mean). A plain one on as few lines is no finer record: the average's better name keeps it."""
    if not AVERAGE_PREFIX.match(base_name(name_key(best[4].names[best[5]]))):
        return best
    finer = [
        c
        for c in found
        if c[0] < 50
        and len(c[4].rows) > len(best[4].rows)
        and not AVERAGE_PREFIX.match(base_name(name_key(c[4].names[c[5]])))
    ]
    return min(finer, key=lambda c: c[:4]) if finer else best


#: a summary's rows are at most this share of the finer series' rows it closes
_SUMMARY_SHARE = 0.34


def _finer_than_summary(found: list[tuple[Any, ...]], best: tuple[Any, ...]) -> tuple[Any, ...]:
    """A training loss printed once after each run of another training loss's lines (a GCN script's
    `this epoch:` / `loss= 1.5874` after its `iter:0020 loss_train: 2.1153` lines), on at most a third as
    many rows: the summary of those steps, not the finer record the run printed; that one is taken."""
    mine = best[4].order
    for c in sorted(found, key=lambda c: c[:4]):
        if c[0] >= 50 or c[4] is best[4] or len(mine) > _SUMMARY_SHARE * len(c[4].order):
            continue
        theirs = np.asarray(c[4].order)
        before = np.searchsorted(theirs, np.asarray(mine))  # the finer rows read before each summary row
        if before[0] >= 2 and bool(np.all(np.diff(before) >= 2)):
            return c
    return best


def _off_bar(found: list[tuple[Any, ...]], best: tuple[Any, ...]) -> tuple[Any, ...]:
    """A loss shown on a progress bar is what the bar showed when it was last drawn (its last batch);
    a training loss printed on a line of its own as often or more (DMRGCN's `Train_loss: 46.05` after
    each epoch's bar) is the record the script meant: it is taken instead."""
    if not _on_bar(best[4]):
        return best
    steady = [c for c in found if not _on_bar(c[4]) and len(c[4].rows) >= len(best[4].rows)]
    return min(steady, key=lambda c: c[:4]) if steady else best


def _printed_total(t: Template, slots: list[int]) -> tuple[Any, ...] | None:
    """Where the components' line also prints their sum under a name of its own (YOLOv7's `box obj cls
    total` columns), that printed number is the loss, not a sum taken again of the rounded parts."""
    rows = [r for r in t.rows if all(math.isfinite(v) for v in r)]
    if len(rows) < 1:
        return None
    a = np.array(rows, dtype=np.float64)
    _, counters, _ = steps_of(t)
    for j in range(len(t.names)):
        if j in slots or j in counters or not t.names[j] or name_key(t.names[j]).startswith("(avg)"):
            continue
        if _summing(a, j, list(slots)) == list(slots):
            return (50, -len(t.rows), t.order[0], id(t), t, j)
    return None


def _total_among(t: Template, slots: list[int]) -> tuple[Any, ...] | None:
    """One of the loss-named slots that is the sum of all the others on every row (ICSRec's
    `rec_avg_loss`, `icl_avg_loss` and their `joint_avg_loss`): the total the script printed, named
    like a part; summing it with its parts would double the loss."""
    rows = [r for r in t.rows if all(math.isfinite(r[k]) for k in slots)]
    if len(slots) < 3 or len(rows) < _SUM_ROWS:
        return None
    a = np.array([[r[k] for k in range(len(t.names))] for r in rows], dtype=np.float64)
    for j in slots:
        rest = [k for k in slots if k != j]
        if _summing(a, j, rest) == rest and _shares_move(a, j, rest):  # the sum, within the digits printed
            return (50, -len(t.rows), t.order[0], id(t), t, j)
    return None


#: rows a sum must hold on before a part is taken for the total of the others
_SUM_ROWS = 3
#: ... while the parts' shares of it move by more than this many times what the printed digits'
#: rounding can move them: parts in fixed proportions (a weighted objective whose terms fall together)
#: make one equal to the sum of the others by their weights alone, on every row
_SHARE_MOVES = 3.0


def _shares_move(a: np.ndarray, j: int, rest: list[int]) -> bool:
    """Whether the shares of the parts `rest` in slot j's value change across the rows beyond rounding."""
    if not np.all(a[:, [j, *rest]] > 0):
        return False
    half = {c: 0.5 * 10.0 ** -_decimals(a[:, c]) for c in (j, *rest)}
    for k in rest:
        share = a[:, k] / a[:, j]
        rounding = float(np.max(share * (half[k] / a[:, k] + half[j] / a[:, j])))
        if float(np.ptp(share)) > _SHARE_MOVES * 2 * rounding:
            return True
    return False


def _run_before(named: list[int], j: int) -> list[int]:
    run: list[int] = []
    while j - 1 - len(run) in named and len(run) < _MAX_PARTS:
        run.insert(0, j - 1 - len(run))
    return run


def _run_after(named: list[int], j: int) -> list[int]:
    run: list[int] = []
    while j + 1 + len(run) in named and len(run) < _MAX_PARTS:
        run.append(j + 1 + len(run))
    return run


def _summing(a: np.ndarray, j: int, run: list[int]) -> list[int]:
    """The longest tail of `run` (nearest to `j` first) of two or more slots whose sum is slot j's value
    on every row, within the rounding of each column's printed digits; [] when none."""
    for size in range(len(run), 1, -1):
        k = run[-size:] if run[-1] < j else run[:size]
        total, parts = a[:, j], a[:, k].sum(axis=1)
        # each column's rounding; a column of whole numbers is taken as exact (`unsuper_loss: 0.0`)
        tol = sum(0.5 * 10.0**-d for c in (j, *k) if (d := _decimals(a[:, c])) > 0)
        if _decimals(total) > 0 and np.all(np.abs(total - parts) <= tol):
            return k
    return []


def _decimals(a: np.ndarray) -> int:
    """How many decimals a column was printed with: the most any of its values shows (17.647 -> 3)."""
    ds = [len(repr(float(v)).partition(".")[2].rstrip("0")) if "e" not in repr(float(v)) else 6 for v in a.ravel()]
    return min(max(ds), 8) if ds else 0


def _siblings(parser: TextParser, main: Template, j: int) -> list[tuple[Template, int]]:
    """The other line templates holding the training loss under the same name and the same step
    counters: the same training line with a field more or less (DeiT's MetricLogger adding `grad_norm`
    once it is logged, TF's `loss = 2.3, step = 1` before `loss = 2.1, step = 101 (9.5 sec)`)."""
    name = name_key(main.names[j])
    _, counters, how = steps_of(main)
    steps_named = sorted(name_key(main.names[k]) for k in counters)
    out = []
    for t in parser.templates.values():
        if t is main or t.text in _NOT_BLOCKS or t.text != main.text and main.text == "record":
            continue
        for k, n in enumerate(t.names):
            if name_key(n) != name or classify_slot(t, k) != "train":
                continue
            _, c2, how2 = steps_of(t)
            if how2 == how and sorted(name_key(t.names[i]) for i in c2) == steps_named:
                out.append((t, k))
            break
    return out


def _summed_siblings(templates: list[Template], main: Template, slots: list[int]) -> list[tuple[Template, list[int]]]:
    """The other line shapes holding every component the loss is summed from, under the same step
    counters (the same training line with a field reshaped: mmengine's `eta: 1 day, 0:29:42` becoming
    `eta: 23:54:54`; a record printed one pair a line with a key more or less, RSL-RL's block once its
    `Mean reward` is printed): their rows are sums of the same parts."""
    names = [name_key(main.names[j]) for j in slots]
    _, counters, how = steps_of(main)
    steps_named = sorted(name_key(main.names[k]) for k in counters)
    out = []
    for t in templates:
        if t is main or t.text in _NOT_BLOCKS or (t.text == "record") != (main.text == "record"):
            continue
        keys = [name_key(n) for n in t.names]
        if not all(n in keys for n in names):
            continue
        _, c2, how2 = steps_of(t)
        if how2 == how and sorted(keys[i] for i in c2) == steps_named:
            out.append((t, [keys.index(n) for n in names]))
    return out


def _candidates(parser: TextParser, min_rows: int) -> dict[str, list[tuple[Any, ...]]]:
    cands: dict[str, list[tuple[Any, ...]]] = {"train": [], "eval": [], "component": []}
    family: dict[str, int] = {}  # rows of each component's name over every shape that prints it
    for t in parser.templates.values():
        for n in set(t.losses or ()) | {name_key(n) for n in t.names if n and _COMPONENT_LIKE.search(n)}:
            family[n] = family.get(n, 0) + len(t.rows)
    for t in parser.templates.values():
        _, counters, _ = steps_of(t)
        for j in range(len(t.names)):
            if j in counters:
                continue
            kind = classify_slot(t, j)
            # one evaluation, one NaN component is enough; a component printed by a shape of one row
            # whose name other shapes print too is a row of that series (a record cut short at the log's end)
            once = (
                kind == "eval"
                or kind == "component"
                and (not all(math.isfinite(r[j]) for r in t.rows) or family.get(name_key(t.names[j]), 0) >= min_rows)
            )
            if kind in cands and (len(t.rows) >= min_rows or once):
                # (rows that logged it: a slot a line wrote as words, `No data`, is no series there)
                logged = sum(1 for r in t.rows if not not_logged(r[j]))
                cands[kind].append((total_rank(t.names[j]), -logged, t.order[0], id(t), t, j))
    return cands


def _summed(found: list[tuple[Any, ...]]) -> tuple[Template, list[int]] | None:
    """With no total printed, the sum of the components is the loss (detectron2's and mmdetection's
    `losses = sum(loss_dict.values())`, YOLOv5's box + obj + cls) on the line that holds every
    component seen in the log; None when no line holds them all or they are two adversaries'."""
    names = {name_key(c[4].names[c[5]]) for c in found}
    if len(names) < 2 or _rivals(found):
        return None
    by_t: dict[int, list[tuple[Any, ...]]] = {}
    for c in found:
        by_t.setdefault(id(c[4]), []).append(c)
    full = [cs for cs in by_t.values() if {name_key(c[4].names[c[5]]) for c in cs} == names]
    if not full:
        return None
    best = max(full, key=lambda cs: len(cs[0][4].rows))
    return best[0][4], [c[5] for c in best]


def _rivals(found: list[tuple[Any, ...]]) -> bool:
    """Whether the components are two adversaries' (by their names, or by their line's)."""
    return adversaries(c[4].names[c[5]] for c in found) or any(c[4].adversarial for c in found)


def _bare(parser: TextParser) -> tuple[Any, ...] | None:
    """A line that is nothing but one printed tensor (`print(loss)`: `tensor(3.2207, device='cuda:0')`),
    repeated: that number is taken for the loss (a guess, said in a note). A bare number alone on
    its lines is not: too many other things print one."""
    found = [
        t
        for t in parser.templates.values()
        if len(t.rows) >= _MIN_ROWS + 1
        and t.text not in _NOT_LINES
        and t.text.split("\x00", 1)[0].strip().lower() in ("tensor(", "torch.tensor(")
        and not t.names[0]
    ]
    if found:
        t = max(found, key=lambda t: (len(t.rows), -t.order[0]))
        return (50, -len(t.rows), t.order[0], id(t), t, 0)
    alone = _numbers_only(parser)
    if alone is not None:
        return (50, -len(alone.rows), alone.order[0], id(alone), alone, 0)
    columns = [
        (t, j)
        for t in parser.templates.values()
        if (j := _unnamed_value(t)) is not None or (j := _after_word(t)) is not None
    ]
    if not columns:
        return None
    t, j = max(columns, key=lambda c: (len(c[0].rows), -c[0].order[0]))
    t.names[j] = f"column {j + 1 - sum(t.slash[:j])}"  # named by its place, as printed, for the notes
    return (50, -len(t.rows), t.order[0], id(t), t, j)


#: a text whose lines are bare numbers at least this share of its lines is a printed series
_NUMBERS_ONLY_SHARE = 0.8


def _numbers_only(parser: TextParser) -> Template | None:
    """The lines of a text that is nothing but one number per line (`print(loss.item())` each epoch,
    pasted alone): that series is the loss (a guess, said in a note). Among other lines a bare
    number is anything (a count, a size, a seed), so the text must be almost only these lines."""
    t = next((t for t in parser.templates.values() if t.text == "\x00" and not t.names[0]), None)
    if t is None or len(t.rows) < _MIN_ROWS + 1 or len(t.rows) < _NUMBERS_ONLY_SHARE * parser.line_no:
        return None
    t.names[0] = "number per line"
    return t


def _lone(parser: TextParser) -> tuple[Any, ...] | None:
    """The busiest counted line whose one named number left is no known column (`text_slots.lone_metric`)."""
    for t in sorted(parser.templates.values(), key=lambda t: (-len(t.rows), t.order[0] if t.order else 0)):
        if len(t.rows) < _MIN_ROWS or t.text in _NOT_LINES:
            continue
        _, counters, how = steps_of(t)
        if how not in ("named", "counter", "epoch_counter"):
            continue
        j = lone_metric(t, counters, (k for k, _ in _column_slots(t)))
        if j is not None:
            return (50, -len(t.rows), t.order[0], id(t), t, j)
    return None


def _unnamed_value(t: Template) -> int | None:
    """Numbers printed with no name at all, a counter first (`76930 2.6496577`, a GAN script's `10:
    0.69  1.38`): the first value after the counter, when it is no whole number on some row (NaN and
    Inf count as values), is what a training print puts there first, its loss (a guess, said in a
    note); the counter must count up, so a table of measurements is not taken for it."""
    bare = [j for j, n in enumerate(t.names) if not n]  # a percentage or a duration beside them names nothing
    if (
        len(t.rows) < _MIN_ROWS + 1
        or t.text in _NOT_LINES
        or not bare
        or any(n not in ("", PERCENT, "time") for n in t.names)
    ):
        return None
    _, counters, how = steps_of(t)
    # (numbered: the counter repeats over rows that each hold a record, `1/3  0.946G  2.31`)
    if how not in ("counter", "numbered") or not t.leading[bare[0]] or not _counted_from(t, bare, counters):
        return None
    if len([j for j in bare if j > max(counters, default=bare[0])]) > _MAX_UNNAMED:
        return None  # more values than a training print's few: a table of measurements
    return _first_fraction(t, [j for j in bare[1:] if j not in counters])


def _first_fraction(t: Template, slots: list[int]) -> int | None:
    """The first of `slots` with no unit glued to it (a number with a unit, YOLOv5's `0.946G` of GPU
    memory, is a measurement, no loss), or None when it is a whole number on every row (a count)."""
    pieces = t.text.split("\x00")
    j = next((j for j in slots if not _unit_after(pieces, j)), None)
    if j is None or all(math.isfinite(r[j]) and float(r[j]).is_integer() for r in t.rows):
        return None
    return j


#: most unnamed values after the counter a training print is taken for (loss, accuracy, LR)
_MAX_UNNAMED = 3


def _after_word(t: Template) -> int | None:
    """A counter named by its word, then numbers with no name (`Epoch 11: 54602.61407, Time is 374.20s`,
    `Iteration 100: 2.31`, `Epoch 3/10 - 0.41`): a small script's print of its loss, the first such value
    that is no whole number on some row (a guess, said in a note). Any other named number on the line
    (`acc 0.91`) says the script names what it prints, so an unnamed one is something else."""
    if len(t.rows) < _MIN_ROWS + 1 or t.text in _NOT_LINES:
        return None
    _, counters, how = steps_of(t)
    if how not in ("named", "epoch") or not counters:
        return None
    others = [j for j in range(len(t.names)) if j not in counters]
    bare = [j for j in others if not t.names[j] and j > max(counters)]
    if not bare or len(bare) > _MAX_UNNAMED or any(t.names[j].lower() not in ("", PERCENT, "time") for j in others):
        return None
    return _first_fraction(t, bare)


def _counted_from(t: Template, bare: list[int], counters: set[int]) -> bool:
    """Whether the line's first number is its counter, or an epoch before it: whole numbers that never
    go down, then the counter (Chainer's PrintReport rows without their header, `1  3100  5.86994 ...`:
    epoch, iteration, main/loss)."""
    if bare[0] in counters:
        return True
    first = next((j for j in bare if j in counters), None)
    if first is None:
        return False
    before = np.array([[r[j] for j in bare if j < first] for r in t.rows], dtype=float)
    finite = np.isfinite(before).all()
    return bool(finite and (before == np.round(before)).all() and (np.diff(before, axis=0) >= 0).all())


def _unit_after(pieces: list[str], j: int) -> bool:
    """Whether the text right after slot j is a unit glued to its number (`0.946G`, `13.6GB`)."""
    after = pieces[j + 1] if j + 1 < len(pieces) else ""
    return after[:1].isalpha() and GLUED_UNIT.match(after) is not None


_NOT_LINES = ("table", "block", "record", "events")
_COMPONENT_LIKE = re.compile(r"loss|aux|_l\b|^l_", re.IGNORECASE)
#: shapes whose siblings are not looked for: a table's or a block's columns are its own (records printed one
#: pair a line with a key more or less are one series, as lines are: OLMo's blocks, Coqui's `| > key:` lines)
_NOT_BLOCKS = ("table", "block", "events")


def _busiest(parser: TextParser) -> Template | None:
    """With no loss: the busiest line of metrics; else a line with a step counter and a series the
    records know (Megatron's wrapped `iteration 5/50 | ... | grad norm: nan |`, printed once)."""
    named = [
        t
        for t in parser.templates.values()
        if len(t.rows) >= _MIN_ROWS + 1
        and any(_METRICISH.search(n) for n in t.names)
        and any(r != t.rows[0] for r in t.rows)
    ]  # not one line repeated
    if not named:
        named = [
            t
            for t in parser.templates.values()
            if t.text not in _NOT_LINES and steps_of(t)[2] in ("named", "counter", "epoch_counter") and _column_slots(t)
        ]
    return max(named, key=lambda t: (len(t.rows), -t.order[0])) if named else None


#: the records columns other slots may fill (by `columns.column_for`), never from evaluation lines
_OTHER_COLUMNS = ("grad_norm", "lr", "scale", "param_norm", "batch_size", *SIDE_COLUMNS)


class Placed:
    """The training template's steps, and where every other row goes: its own counter when its
    line has one, else the step of the training row read before it."""

    def __init__(
        self, main: Template, hints: list[tuple[int, float]] | None = None, companion: np.ndarray | None = None
    ) -> None:
        steps, _, self.how = steps_of(main)
        if companion is not None and self.how != "named":
            steps, self.how = companion, "named"
        if steps is not None and np.any(np.diff(steps) < 0):
            steps = counted_on(steps)  # a batch counter that starts again each epoch: counted on
        if steps is not None and (np.sum(np.diff(steps) < 0) >= 2 or len(steps) > 1 and np.all(np.diff(steps) == 0)):
            # a counter that goes back and forth, or stays (Keras' `60000/60000` at each epoch's end)
            steps, self.how = None, "numbered"
        if steps is None and hints:
            steps = _hinted(main.order, hints, count_back=main.text == "record")
            self.how = "numbered" if steps is None else "hinted"
        self.steps = steps if steps is not None else np.arange(1, len(main.rows) + 1, dtype=np.float64)
        self.order = np.asarray(main.order)
        self.main = main
        self.hints = hints or []

    def of(self, t: Template) -> np.ndarray:
        if t is self.main:
            return self.steps
        own, counters, how = steps_of(t)
        # a counter an evaluation word stands before is the evaluation's (its own batches), not the step
        if own is not None and (
            how == "named" or how in ("counter", "epoch_counter") and not any(t.eval_context[k] for k in counters)
        ):
            return own
        steps = self.at(np.asarray(t.order))
        steps = steps if not self.hints else self._hinted_rows(t.order, steps)
        return self._counted_back(t, steps) if self.how == "hinted" and self.main.text == "record" else steps

    def _counted_back(self, t: Template, steps: np.ndarray) -> np.ndarray:
        """Records printed before the first header and the first training record (a paste cut inside
        the block before it: RSL-RL's, with a key fewer): one step a record before the first one, as
        `_hinted` counts the training records themselves, when that stays >= 0."""
        first = min(self.order[0], self.hints[0][0])
        lead = [k for k, o in enumerate(t.order) if o < first]
        if t.text != "record" or not lead or self.steps[0] - len(lead) < 0:
            return steps
        out = steps.copy()
        for i, k in enumerate(lead):
            out[k] = self.steps[0] - (len(lead) - i)
        return out

    def _hinted_rows(self, order: list[int], steps: np.ndarray) -> np.ndarray:
        """A row with a step said on the line before it (and after the last training row): that step
        (detectron2's `at iteration=27!` before its `loss_dict = {...}`)."""
        at = np.asarray([p for p, _ in self.hints])
        out = steps.copy()
        for k, o in enumerate(order):
            h = int(np.searchsorted(at, o, side="right")) - 1
            last_main = int(np.searchsorted(self.order, o, side="left")) - 1
            if h >= 0 and (last_main < 0 or at[h] > self.order[last_main]):
                out[k] = self.hints[h][1]
        return out

    def at(self, order: np.ndarray) -> np.ndarray:
        """The step of the training row read before each row index (the first one's before it)."""
        idx = np.searchsorted(self.order, order, side="right") - 1
        return self.steps[np.maximum(idx, 0)]


def _companion(parser: TextParser, main: Template) -> np.ndarray | None:
    """The steps a companion line names: a line with a named step counter printed once beside each
    training row (`grad_norm: 4.0071 iteration: 59448` under `Train Epoch: 4 [49920/141886 (35%)]
    Loss: 0.326567`), when the training line names none itself (a sample count within an epoch)."""
    if len(main.rows) < 2 or steps_of(main)[2] == "named":
        return None
    mo = np.asarray(main.order)
    for t in parser.templates.values():
        if t is main or t.text in _NOT_LINES or len(t.rows) != len(main.rows) or any(t.eval_context):
            continue
        steps, _, how = steps_of(t)
        if how != "named" or steps is None or not np.all(np.diff(steps) > 0):
            continue
        to = np.asarray(t.order)
        if np.all(mo < to) and np.all(to[:-1] < mo[1:]) or np.all(to < mo) and np.all(mo[:-1] < to[1:]):
            return steps
    return None


def _hinted(order: list[int], hints: list[tuple[int, float]], count_back: bool = False) -> np.ndarray | None:
    """The step of each row from the hint read since the row before it, when every row has one. With
    `count_back` (records printed one pair a line, each under its header), records printed before the
    first header (a paste cut inside the block before it: RSL-RL's block before `Learning iteration
    1/10`) count back from it, one step a record, when that stays >= 0."""
    at = [p for p, _ in hints]
    lead = sum(o < at[0] for o in order) if at and count_back else 0
    out, prev = [], -1
    for i, o in enumerate(order):
        k = int(np.searchsorted(at, o, side="right")) - 1
        if k < 0 and i < lead and hints[0][1] - (lead - i) >= 0:
            out.append(hints[0][1] - (lead - i))
            continue
        if k < 0 or at[k] <= prev:
            return None
        out.append(hints[k][1])
        prev = o
    steps = np.asarray(out, dtype=np.float64)
    return steps if np.all(np.diff(steps) > 0) else None


#: the next print over a step-0 print, as a share of the logging interval, that makes the step-0 print a
#: partial interval's average (the first batch's loss divided by the interval: at least a quarter of it,
#: at most twice, for a first batch above or somewhat below the next interval's mean)
_PARTIAL_SHARE = (0.25, 2.0)
#: intervals shorter than this leave a partial first print too close to a loss to tell apart
_PARTIAL_MIN_EVERY = 10


def _partial_first_interval(loss: dict[int, float]) -> tuple[float, float, int] | None:
    """(first, next, interval) when the print at step 0 is a sum over the interval's first batch divided
    by the whole interval (`cur_loss = total_loss / log_interval` printed at batch 0: `loss 5.54E-02 | ppl
    1.06` before `loss 4.13E+00` at batch 100): the next print, one regular interval on, is about the
    interval times it, and every print after the next is below the next (the run learns from there, as
    one from its init does); that first value is no loss and would read as a jump to the second."""
    steps = sorted(loss)
    if len(steps) < 3 or steps[0] != 0:
        return None
    every = steps[1]
    if every < _PARTIAL_MIN_EVERY or steps[2] - steps[1] != every:
        return None
    first, nxt = loss[0], loss[every]
    if not (math.isfinite(first) and math.isfinite(nxt)) or first <= 0 or nxt <= 0:
        return None
    lo, hi = _PARTIAL_SHARE
    if not lo * every <= nxt / first <= hi * every:
        return None
    # and the run learns from the second print on, as one from its init does: a loss that jumped from a
    # real first value and stayed up (a divergence) does not fall below its second print
    rest = [loss[s] for s in steps[2:]]
    return (first, nxt, every) if all(math.isfinite(v) and v < nxt for v in rest) else None


def _drop_not_logged(cols: dict[str, dict[int, float]]) -> None:
    """Remove the cells that said nothing was logged (`No log`: `NOT_LOGGED`) from every column."""
    for col in cols.values():
        for s in [s for s, v in col.items() if not_logged(v)]:
            del col[s]


def _nan_placeholders(cols: dict[str, dict[int, float]]) -> bool:
    """A training and an evaluation loss printed in one table, each `nan` exactly where the other has a
    value (casanovo's `_log_history`: `Step  Train loss  Valid loss`, a validation row's train cell
    `nan`, a training row's valid cell `nan`), both finite again after their NaNs: the `nan` is the
    table's word for a cell with nothing in it, not a loss that overflowed. Those cells are dropped
    (not logged); True when they were."""
    train, ev = cols.get("loss"), cols.get("eval_loss")
    if not train or not ev or not _alternating(train, ev):
        return False
    _drop_nan(train)
    _drop_nan(ev)
    return True


def _drop_nan(col: dict[int, float]) -> None:
    """Remove a column's `nan` cells (placeholders: nothing was logged there)."""
    for s in [s for s, v in col.items() if math.isnan(v)]:
        del col[s]


def _no_loss_cells(
    picked: dict[str, Any], place: Placed, cols: dict[str, dict[int, float]], meta: dict[str, Any], notes: list[Msg]
) -> None:
    """Cells that print no value: `No log` words, `nan` placeholders of a table's alternating rows
    (dropped), a step-0 print of a partial interval (kept as printed, judged as no loss)."""
    _drop_not_logged(cols)
    partial = _partial_first_interval(cols.get("loss", {}))
    if partial is not None:  # kept as printed (a row of the log), judged as no loss (`partial_interval_steps`)
        meta["partial_interval_steps"] = [0]
        notes.append(Msg("text.partial_first", first=partial[0], next=partial[1], every=partial[2]))
    if _nan_placeholders(cols):
        notes.append(Msg("text.nan_placeholders"))
    elif _unnamed_placeholders(picked, place, cols):
        notes.append(Msg("text.nan_placeholders_unnamed"))


def _alternating(train: dict[int, float], other: dict[int, float]) -> bool:
    """Whether two columns of one table are each `nan` exactly where the other has a value, and the
    training one finite again after its first `nan` (`_nan_placeholders`)."""
    both = sorted(set(train) | set(other))
    gaps = [s for s in both if math.isnan(train.get(s, math.nan))]
    if not gaps or any(math.isnan(other.get(s, math.nan)) == math.isnan(train.get(s, math.nan)) for s in both):
        return False  # a row with both (or neither) filled: not one table's two alternating kinds of row
    # (the loss never came back: a NaN that stayed is the run's, whatever the other column)
    return any(math.isfinite(train[s]) for s in train if s > gaps[0])


def _unnamed_placeholders(picked: dict[str, Any], place: Placed, cols: dict[str, dict[int, float]]) -> bool:
    """The same alternation in a table read without its header (an excerpt of casanovo's `_log_history`
    cut below it: `120000  nan  0.512935`, `133760  0.596518  nan`): the guessed loss's `nan` cells, where
    another unnamed value of its line is filled, are empty cells, dropped; True when they were."""
    loss = cols.get("loss")
    if not picked["guessed"] or picked["loss"] is None or not loss:
        return False
    t, j = picked["loss"]
    steps = place.of(t).tolist()
    for k in (k for k, n in enumerate(t.names) if not n and k != j):
        other = {int(s): float(r[k]) for s, r in zip(steps, t.rows)}
        if _alternating(loss, other):
            _drop_nan(loss)
            return True
    return False


def build(parser: TextParser, what: str) -> Run:
    picked = choose(parser)
    main = picked["main"]
    if main is None:
        main = _events_only(parser)
    if main is None:
        raise SourceError(
            f"{what}: not a log format lossdoctor knows: no numeric series in this text (looked for {_looked_for()})"
        )
    place = Placed(main, _hints(parser, main), _companion(parser, main))
    cols: dict[str, dict[int, float]] = {}
    meta: dict[str, Any] = {"framework": "text"}
    notes: list[Msg] = []
    _loss_columns(picked, place, cols, meta, notes)
    if parser.nan_rows and main is not picked["main"]:
        _fill(cols, "loss", place.steps[parser.nan_rows], [math.nan] * len(parser.nan_rows))
    _other_columns(parser, place, cols, picked["siblings"])
    _skip_counters(parser, place, cols)
    comp_lines: dict[int, int] = {}
    components = _components(picked["components"], place, comp_lines)
    events: dict[str, dict[int, Any]] = {}
    if components:
        events["loss_components"] = components
        notes.append(Msg("text.components", names=sorted({k for v in components.values() for k in v})[:8]))
    _event_columns(parser, place, cols, events, events_only=main is not picked["main"])
    _nonfinite_components(components, comp_lines, cols, events, outside=meta.get("outside_sum", ()))
    _nonfinite_average(picked, place, events)
    parser.events.hints.apply(meta, saw_scale="scale" in cols)
    _no_loss_cells(picked, place, cols, meta, notes)
    steps = np.array(sorted({s for c in cols.values() for s in c} | set(place.steps.tolist())), dtype=np.float64)
    arrays = {k: np.array([c.get(s, np.nan) for s in steps.tolist()]) for k, c in cols.items()}
    logged = {k: np.array([s in c for s in steps.tolist()]) for k, c in cols.items()}
    meta["steps_from"] = {"epoch": "epoch", "numbered": "numbered"}.get(place.how, "log")
    if picked["rivals"]:
        meta["adversaries"] = list(picked["rivals"])  # two adversaries' losses: no training loss, on purpose
    run = from_columns(steps, arrays, events=events, meta=meta, source="text", logged=logged)
    if len(run) == 0:  # every step out of range (`step 99999999999999999999 OVERFLOW!`): nothing to read
        raise SourceError(
            f"{what}: not a log format lossdoctor knows: no numeric series in this text (looked for {_looked_for()})"
        )
    shape = {
        "named": None,
        "counter": None,
        "epoch_counter": None,
        "hinted": None,
        "epoch": "text.epoch_is_step",
        "numbered": "text.numbered",
    }[place.how]
    head_notes = [Msg("text.read", what=what, n=len(main.rows), shape=_shape_name(main), key=meta.get("loss_key", "-"))]
    if shape:
        head_notes.append(Msg(shape, n=len(main.rows)))
    if "loss" not in cols:
        head_notes.append(Msg("source.not_in_log", signals=[Msg("signal.loss")]))
    if picked["rivals"]:
        head_notes.append(Msg("text.adversaries", keys=picked["rivals"]))
    if parser.ranks:
        head_notes.append(Msg("text.one_rank", n=parser.ranks))
    run.notes.extend(head_notes + notes)
    return run


def _loss_columns(
    picked: dict[str, Any], place: Placed, cols: dict[str, dict[int, float]], meta: dict[str, Any], notes: list[Msg]
) -> None:
    if picked["loss"] is not None:
        t, j = picked["loss"]
        for t2, j2 in picked["siblings"]:
            _fill(cols, "loss", place.of(t2), [r[j2] for r in t2.rows])
        _fill(cols, "loss", place.of(t), [r[j] for r in t.rows])
        meta["loss_key"], meta["loss_guessed"] = t.names[j], picked["guessed"]
        if picked["guessed"]:
            notes.append(Msg("text.loss_guessed", key=t.names[j]))
        if picked["policy"]:
            others = sorted({u.names[k] for u, k in picked["components"] if (u, k) != (t, j)})
            notes.append(Msg("text.policy_loss", key=t.names[j], keys=others))
        if picked["parts"]:
            notes.append(Msg("text.total_of_parts", key=t.names[j], keys=[u.names[k] for u, k in picked["parts"]]))
    elif picked["summed"] is not None:
        t, slots = picked["summed"]
        slots, outside = _outside_the_sum(t, slots)
        if outside:
            notes.append(Msg("text.term_outside_sum", keys=outside, n=len(t.rows)))
            meta["outside_sum"] = [_component_key(k) for k in outside]
        for t2, slots2 in _summed_siblings(picked["all"], t, slots):  # (their lr... come with `siblings`)
            _fill(cols, "loss", place.of(t2), [float(sum(r[j] for j in slots2)) for r in t2.rows])
        _fill(cols, "loss", place.of(t), [float(sum(r[j] for j in slots)) for r in t.rows])
        keys = [t.names[j] for j in slots]
        meta["loss_key"], meta["loss_guessed"] = " + ".join(keys), False
        notes.append(Msg("text.loss_summed", keys=keys, n=len(t.rows)))
    if picked["eval"] is not None:
        t, j = picked["eval"]
        _fill(cols, "eval_loss", place.of(t), [r[j] for r in t.rows])
        meta["eval_loss_key"] = t.names[j]
        notes.append(Msg("text.eval_kept", key=t.names[j], n=len(t.rows)))


#: a component whose every printed value is non-finite while another falls to this share of its
#: first value or less over the same rows
_TRAINS_TO = 0.9


def _outside_the_sum(t: Template, slots: list[int]) -> tuple[list[int], list[str]]:
    """The components that can be in the optimised sum, and the names of those that cannot: a term
    NaN or Inf on every row while another term stays finite and falls (to `_TRAINS_TO` of where it
    began) never reached the weights, or its first backward pass would have made every term
    non-finite from the next update on (DAFormer's `src.loss_imnet_feat_dist: nan` on every line of a
    run whose `decode.loss_seg` falls 2.68 -> 1.61: a term logged but not trained on). A scaler
    skipping the steps would keep the weights finite too, but then no term would fall."""
    if len(t.rows) < _MIN_ROWS:
        return slots, []
    dead = [j for j in slots if not any(math.isfinite(r[j]) for r in t.rows)]
    trains = [
        j
        for j in slots
        if j not in dead and all(math.isfinite(r[j]) for r in t.rows) and 0 < t.rows[-1][j] <= _TRAINS_TO * t.rows[0][j]
    ]
    if not dead or not trains:
        return slots, []
    return [j for j in slots if j not in dead], [t.names[j] for j in dead]


def _events_only(parser: TextParser) -> Template | None:
    """A text of event lines only, each such line a row: overflow / loss-scale lines (apex's `Gradient
    overflow.  Skipping step, loss scaler 0 reducing loss scale to 32768.0`, repeated), numbered in
    order, and lines saying the loss became non-finite (detectron2's `FloatingPointError: Loss became
    infinite or NaN at iteration=27!` pasted alone): a NaN loss at the step the line names. The user
    pasted the one line that matters; refusing it would hide a symptom the text states."""
    if not parser.scale_points and not parser.overflows and not parser.nan_seq:
        return None
    nan_steps = dict(parser.nan_seq)
    seq = sorted(set(parser.scale_seq) | set(parser.overflow_seq) | set(nan_steps))
    named = all(nan_steps.get(e) is not None for e in seq)  # only NaN lines, each naming its step
    t = Template("events", ["iteration"] if named else [], [False] if named else [])
    t.rows = [[nan_steps[e]] if named else [] for e in seq]  # type: ignore[list-item]
    t.order = list(range(len(seq)))
    row = {e: k for k, e in enumerate(seq)}
    parser.scale_points = [(row[e] + 1, v) for e, (_, v) in zip(parser.scale_seq, parser.scale_points)]
    parser.overflows = [row[e] + 1 for e in parser.overflow_seq]
    parser.nan_rows = [row[e] for e in nan_steps]
    return t


def _hints(parser: TextParser, main: Template) -> list[tuple[int, float]]:
    """(index of the next row, step) said by the lines around the rows: an event line naming its
    step, and a line that is nothing but a counter (RSL-RL's `Learning iteration 8391/10000`)."""
    out = list(parser.hints)
    for t in parser.templates.values():
        if t is main or t.text in _NOT_LINES:
            continue
        steps, counters, how = steps_of(t)
        if (
            steps is not None
            and how in ("named", "counter", "epoch")
            and len(counters) == len(t.names)
            or how in ("named", "epoch_counter")
            and steps is not None
            and _header_only(t, counters)
        ):
            out.extend((o + 1, s) for o, s in zip(t.order, steps.tolist()))
    return sorted(out)


#: the name of when or where a line was printed (a header's clock, a host's or a process's id)
_WHEN = re.compile(r"^(?:time|date|timestamp|eta|elapsed|wall|clock|host|pid|rank|node)\b", re.IGNORECASE)


def _header_only(t: Template, counters: set[int]) -> bool:
    """A line that names a step counter and says nothing else that changes but when it was printed
    (OLMo's `... olmo.train:908  INFO  [step=2/739328,epoch=0]`, Coqui's `--> TIME: 2024-03-18 13:31:34
    -- STEP: 25/496 -- GLOBAL_STEP: 25`): the header of the record printed under it. Its other numbers
    are unnamed (a date, a clock), named for the time or the host, or the same on every row."""
    first = t.rows[0]
    for j, name in enumerate(t.names):
        if j in counters or not name or _WHEN.match(name):
            continue
        if len(t.rows) < 2 or classify_slot(t, j) is not None or any(r[j] != first[j] for r in t.rows):
            return False
    return True


def _shape_name(t: Template) -> str:
    if t.text in _NOT_LINES:
        return t.text
    return re.sub(r"\s+", " ", t.text.replace("\x00", "#"))[:80]


def _fill(cols: dict[str, dict[int, float]], name: str, steps: np.ndarray, values: Iterable[float]) -> None:
    """Put one template's values at their steps (over what an earlier template put there); rows of
    one template at the same step (a finer counter the step does not show) keep the first."""
    keys = steps.astype(np.int64).tolist()
    vals = list(values)
    # in reverse, so that the first row at a step is the one left
    cols.setdefault(name, {}).update(zip(reversed(keys[: len(vals)]), reversed(vals[: len(keys)])))


def _other_columns(
    parser: TextParser, place: Placed, cols: dict[str, dict[int, float]], siblings: Sequence[tuple[Template, int]] = ()
) -> None:
    """grad_norm, lr, scale...: each from the template that names it best; the training line's
    siblings (the same line with a field more) add their values to the training line's."""
    best: dict[str, tuple[int, int, Template, int]] = {}
    family = {id(t) for t, _ in siblings} | {id(place.main)}
    least = min(_MIN_ROWS, len(place.main.rows))  # a one-row log's other series have one row too
    for t in parser.templates.values():
        if len(t.rows) < least and id(t) not in family:
            continue
        for j, hit in _column_slots(t):
            key = (hit[1], -sum(len(u.rows) for u in _kin(t, parser, family, place.main)))
            if hit[0] not in best or key < best[hit[0]][:2]:
                best[hit[0]] = (*key, t, j)
    for col, (_, _, t, _j) in best.items():
        for u in _kin(t, parser, family, place.main):
            k = next((k for k, h in _column_slots(u) if h[0] == col), None)
            if k is not None:
                _fill(cols, col, place.of(u), [r[k] for r in u.rows])


#: names of a running count of skipped optimizer steps (DeepSpeed's `step=N, skipped=K` line,
#: runtime/engine.py; `skipped_steps` of other fp16 trainers)
_SKIP_COUNTER_NAMES = ("skipped", "skipped_steps", "skipped_iters", "skipped_iterations")


def _skip_counters(parser: TextParser, place: Placed, cols: dict[str, dict[int, float]]) -> None:
    """A running total of skipped steps becomes the fraction of each logged interval that was
    skipped (the `skipped` column, as the console reader makes it from the same counter). A count
    that ever falls is not a running total (a per-interval count or a restart): left alone."""
    if "skipped" in cols:
        return
    for t in parser.templates.values():
        j = next((j for j, n in enumerate(t.names) if n and normalise(n) in _SKIP_COUNTER_NAMES), None)
        if j is None or len(t.rows) < 2:
            continue
        total = np.asarray([r[j] for r in t.rows], dtype=np.float64)
        if not np.all(np.isfinite(total)) or np.any(np.diff(total) < 0):
            continue
        steps = place.of(t).astype(np.float64)
        gaps = np.diff(steps, prepend=steps[0] - max(1.0, float(np.median(np.diff(steps))) if len(steps) > 1 else 1.0))
        counts = np.diff(total, prepend=total[0])
        _fill(cols, "skipped", steps, np.clip(counts / np.maximum(gaps, 1.0), 0.0, 1.0).tolist())
        return


def _kin(t: Template, parser: TextParser, family: set[int], main: Template) -> list[Template]:
    """The templates whose rows one series spans: the training line's family (siblings first, so the
    main line's values win at a shared step), else the template alone."""
    if id(t) not in family:
        return [t]
    kin = [u for u in parser.templates.values() if id(u) in family]
    return sorted(kin, key=lambda u: u is main)  # stable: the main line last


def _column_slots(t: Template) -> list[tuple[int, tuple[str, int]]]:
    out = []
    for j, name in enumerate(t.names):
        if not name or t.eval_context[j] or name_key(name).startswith("(avg)"):
            continue
        hit = column_for(base_name(name)) or column_for(normalise(name)) or _alias(base_name(name))
        if hit is not None and hit[0] in _OTHER_COLUMNS:
            out.append((j, hit))
    return out


#: bare names the records' column table does not hold, as the tools that print them mean them: llm.c's
#: `| norm 1.2345 |` (train_gpt2.cu: the global gradient norm); ranked after every named column
#: `%f rate` (Darknet's `get_current_rate(net)`, the learning rate of the step)
#: `L.r. 3.0000e-04` (Marian's scheduler line: the learning rate, its letters dotted)
_ALIASES = {"norm": ("grad_norm", 9), "rate": ("lr", 9), "l.r": ("lr", 9)}
#: a name whose last `_` part is an LR of a numbered optimizer or group (ESPnet's `optim0_lr0`)
_NUMBERED_LR = re.compile(r"^(?:\w+_)?lr\d+$")


def _alias(name: str) -> tuple[str, int] | None:
    return _ALIASES.get(name) or (("lr", 9) if _NUMBERED_LR.match(name) else None)


def _components(
    found: list[tuple[Template, int]], place: Placed, lines: dict[int, int] | None = None
) -> dict[int, dict[str, float]]:
    """{step: {component: value}}; `lines[step]` gets the line each step's components came from."""
    out: dict[int, dict[str, float]] = {}
    for t, j in found:
        for s, r, line in zip(place.of(t).tolist(), t.rows, t.lines):
            out.setdefault(int(s), {}).setdefault(_component_key(t.names[j]), r[j])
            if lines is not None:
                lines.setdefault(int(s), line)
    return out


def _nonfinite_components(
    components: dict[int, dict[str, float]],
    lines: dict[int, int],
    cols: dict[str, dict[int, float]],
    events: dict[str, dict[int, Any]],
    outside: Iterable[str] = (),
) -> None:
    """A component that went NaN/Inf at a step whose training loss is finite or not logged (a
    `loss_dict` holding only some of the components, so no sum was taken): a `nonfinite_warning`
    text event at that step, so the non-finite value is not lost. Not for a term `outside` the sum
    (`_outside_the_sum`: non-finite on every row while the others train, it never reached the weights)."""
    loss = cols.get("loss", {})
    for step, comp in sorted(components.items()):
        bad = sorted(k for k, v in comp.items() if not math.isfinite(v) and k not in outside)
        if bad and (step not in loss or math.isfinite(loss[step])):
            text = ", ".join(f"{k} = {comp[k]}" for k in bad)[:TEXT_MAX]
            events.setdefault("text_events", {}).setdefault(step, []).append(
                {"kind": "nonfinite_warning", "line": lines.get(step, 0), "text": f"component loss non-finite: {text}"}
            )


def _nonfinite_average(picked: dict[str, Any], place: Placed, events: dict[str, dict[int, Any]]) -> None:
    """A meter line's running average of the loss turned NaN/Inf while the value printed beside it is
    finite (maskrcnn-benchmark's `loss: 5.6908 (nan)`: a window's median beside the global average):
    some step since the last print went non-finite; a `nonfinite_loss` text event at this print (the
    text saying a loss went non-finite before a NaN is printed dates the symptom there)."""
    if picked["loss"] is None:
        return
    hits: list[tuple[int, int, str]] = []
    for t, j in [picked["loss"], *picked["siblings"]]:  # (a line wrapped in the paste is a shape of its own)
        avg = [k for k, n in enumerate(t.names) if name_key(n) == "(avg) " + name_key(t.names[j])]
        for r, step, line in zip(t.rows, place.of(t), t.lines) if avg else ():
            if math.isfinite(r[j]) and not math.isfinite(r[avg[0]]):
                hits.append((int(step), line, f"running average of {t.names[j]} non-finite: {r[avg[0]]} beside {r[j]}"))
    if hits:  # the first such print dates it; later ones carry the same average
        step, line, text = min(hits)
        events.setdefault("text_events", {}).setdefault(step, []).append(
            {"kind": "nonfinite_loss", "line": line, "text": text[:TEXT_MAX], "value": "nan"}
        )


#: an average's word in front of a part's name: every printed loss is averaged over its interval, so the
#: word tells nothing (RSL-RL 2.x prints `Mean value_function loss` where 1.x printed `Value function loss`);
#: a name that only starts with it (ChainerRL's `average_loss_value_func`) keeps it
_AVERAGED_PART = re.compile(r"^(?:mean|avg|average)[\s_]+(?=\S.*[\s_]loss$)", re.IGNORECASE)


def _component_key(name: str) -> str:
    """A component's name in lower snake case, an average's word dropped (RSL-RL's `Value function loss`
    and `Mean value_function loss` -> `value_function_loss`, CycleGAN's `D_A` -> `d_a`): the same part
    printed by two tools has one key."""
    return re.sub(r"\s+", "_", _AVERAGED_PART.sub("", name.strip()).lower())


def _event_columns(
    parser: TextParser,
    place: Placed,
    cols: dict[str, dict[int, float]],
    events: dict[str, dict[int, Any]],
    events_only: bool = False,
) -> None:
    """Loss scales and overflows read from event lines, and the events themselves, at their step
    (in a text of event lines only, each overflow line is its own row)."""
    if parser.scale_points:
        at = place.at(np.asarray([i - 1 for i, _ in parser.scale_points]))
        named = dict(cols.get("scale", {}))  # a row's own `loss_scale=128` beats what its event line is read as
        _fill(cols, "scale", at, [v for _, v in parser.scale_points])
        cols["scale"].update(named)
    if parser.overflows and place.how != "epoch":  # a row per epoch: the skipped step is inside one (an event)
        before = np.asarray([i - 1 for i in parser.overflows])
        # the step an overflow skipped came after the training row read before it (whose loss is a
        # finished step's: DeepSpeed prints OVERFLOW during the step it skips), as the console reader
        # places it; one read before every row goes to the first row's step
        after = (before >= (place.order[0] if len(place.order) else 0)) & (not events_only)
        at = place.at(before) + after.astype(place.steps.dtype)
        _fill(cols, "skipped", at, [1.0] * len(at))
    if parser.events.items:
        by_step: dict[int, list[dict[str, Any]]] = {}
        at = place.at(np.asarray([i - 1 for _, _, _, i in parser.events.items]))
        for i, s in enumerate(at.tolist()):
            by_step.setdefault(int(s), []).append(parser.events.record(i))
        events["text_events"] = by_step


def _looked_for() -> str:
    from .stdout import LOOKED_FOR as CONSOLE

    return f"{CONSOLE}; {LOOKED_FOR}; also reads trainer_state.json, TensorBoard, W&B, MLflow, CSV, JSONL"


#: lines read without one numeric row before the general reader stops looking: text that holds a
#: training series shows it long before this (a real log's preamble is tens to thousands of
#: lines), and a reader at ~10 us a line would otherwise take minutes on 256 MiB of `yes` piped in
NO_SERIES_LINES = 200_000


def parse(lines: Iterable[str], loose: bool = False) -> TextParser:
    p = TextParser(loose)
    for line in lines:
        p.feed(line)
        if p.n_rows == 0 and p.line_no >= NO_SERIES_LINES:
            break  # refused as "no numeric series" below, in bounded time
    p.finish()
    p.ranks = _one_rank(p)
    return p


def _one_rank(parser: TextParser) -> int:
    """Lines that name the rank that printed them (WeNet's `... lr 0.00032 rank 2`, every rank printing
    each step): only the lowest rank's are read, as of a launcher's tagged lines; returns how many
    ranks printed (0: no line names its rank)."""
    seen = 0
    for t in parser.templates.values():
        j = (
            next((j for j, n in enumerate(t.names) if name_key(n) == "rank"), None)
            if t.text not in _NOT_LINES
            else None
        )
        if j is None or len(t.rows) < 2:
            continue
        ranks = [r[j] for r in t.rows]
        counts = Counter(ranks).values()
        # every rank prints each of its lines: as many of each (a metric named `rank` is no such rota)
        if (
            not all(math.isfinite(v) and v == round(v) and v >= 0 for v in ranks)
            or len(counts) < 2
            or min(counts) < 2
            or max(counts) - min(counts) > 1
        ):
            continue
        keep = [i for i, v in enumerate(ranks) if v == min(ranks)]
        t.rows, t.lines, t.order = [t.rows[i] for i in keep], [t.lines[i] for i in keep], [t.order[i] for i in keep]
        t.steps_memo = None
        seen = max(seen, len(set(ranks)))
    return seen


_NOT_TEXT = (".json", ".jsonl", ".ndjson", ".parquet", ".npz", ".pt", ".wandb", ".db", ".sqlite")


def _sniff(p: Path) -> bool:
    return p.is_file() and p.suffix.lower() not in _NOT_TEXT and not looks_binary(head(p, 65536))


#: a process manager's or a log collector's tag in front of every line: pm2's `0|yolo     | `,
#: docker compose's `trainer_1  | ` / `trainer-1  | `, a bracketed job or container name `[job-7]: `,
#: `srun --label`'s task number `0: ` (one tag on most lines: a counter `0:` would differ line by line);
#: inside a Markdown quote (`> 0: `) too
_MANAGER_PREFIX = re.compile(
    r"^(?:>\s?)?(?:\d+\|[\w.@-]+\s*\|\s?|[\w.@-]+[-_]\d+\s+\|\s?|\[[\w.@-]{1,40}\]:\s?|\d{1,5}:\s)"
)
#: the share of a text's first lines that must start with the same tag for it to be stripped
_PREFIX_SHARE = 0.8


def shared_prefix(sample: Sequence[str]) -> str:
    """The process manager's tag most lines of the sample start with ("" when none): constant in
    front of every line, it hides each line's own shape from the template miner."""
    lines = [s for s in sample if s.strip()][:200]
    counts: dict[str, int] = {}
    for line in lines:
        m = _MANAGER_PREFIX.match(line)
        if m is not None:
            counts[m.group(0)] = counts.get(m.group(0), 0) + 1
    if not counts:
        return ""
    tag, n = max(counts.items(), key=lambda kv: kv[1])
    return tag if len(lines) >= 2 and n >= _PREFIX_SHARE * len(lines) else ""


def _without(prefix: str, lines: Iterable[str]) -> Iterator[str]:
    k = len(prefix)
    for line in lines:
        yield line[k:] if line.startswith(prefix) else line


@reader("training text", _sniff, priority=95)
def read(path: Path) -> list[Run]:
    lines = _Lines(path)
    run, refused = None, None
    parser = parse(lines())
    free = free_tails(parser)
    try:
        run = build(parser, path.name)
    except SourceError as e:
        refused = e
    if free and (run is None or not run.meta.get("adversaries")):
        try:  # read again with the free text after each line's last number left out
            loose = build(parse(lines(), loose=True), path.name)
        except SourceError:
            loose = None
        if loose is not None and loose.has("loss") and _loss_points(loose) > _loss_points(run):
            loose.notes.insert(1, Msg("text.free_tails"))
            run = loose
    if _loss_points(run) < named_arrays.MIN_VALUES:  # the losses kept in a list and printed once
        listed = _from_arrays(lines.text(), path.name)
        if listed is not None and _loss_points(listed) > _loss_points(run):
            run = listed
    if run is None:
        raise refused or SourceError(f"{path.name}: not a log format lossdoctor knows")
    return [run]


class _Lines:
    """A text's lines as a terminal starts them (a `\\r` redraw of a bar is no new line: a launcher's tag
    is not on it), less the prefix its own lines repeat (a logging format, a host, a process manager's
    tag): each call streams them again; `text()` is the first MAX_BYTES of them joined (for arrays that
    span lines: `named_arrays`)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.learned = line_prefix.learned(path)
        sample = head(path, 65536)
        self.prefix = shared_prefix(
            (sample if self.learned is None else self.learned.sub(b"", sample)).decode("utf-8", "replace").split("\n")
        )

    def __call__(self) -> Iterator[str]:
        with open_regular(self.path) as f:
            lines = segments(f if self.learned is None else line_prefix.Stripped(f, self.learned))
            yield from _without(self.prefix, lines) if self.prefix else lines

    def text(self) -> str:
        out, size = [], 0
        for line in self():
            out.append(line)
            size += len(line) + 1
            if size >= named_arrays.MAX_BYTES:
                break
        return "\n".join(out)


def _from_arrays(text: str, what: str) -> Run | None:
    """The run the text's named arrays hold (`print(history.history)` among other lines), or None."""
    try:
        return arrays_run(text, what)
    except SourceError:
        return None


def arrays_run(text: str, what: str) -> Run | None:
    """The run the named arrays in `text` hold (None: no loss-named array of MIN_VALUES numbers), read
    as the lines `named_arrays.lines` makes of them; its note says so, not the made lines' shape."""
    arrays = named_arrays.find(text)
    if not any(named_arrays.LOSS_NAME.search(k) for k in arrays):
        return None
    rows = named_arrays.lines(arrays)
    run = build(parse(rows), what)
    used = sorted(k for k, v in arrays.items() if len(v) == len(rows))
    run.notes[:] = [Msg("text.named_arrays", what=what, n=len(rows), names=used[:8])] + [
        m for m in run.notes if getattr(m, "key", None) != "text.read"
    ]
    return run


@reader("named arrays", named_arrays.is_dump, priority=78)
def read_arrays(path: Path) -> list[Run]:
    """A file that is a dump of named arrays (a Keras history dict, its `history.json`)."""
    run = arrays_run(_Lines(path).text(), path.name)
    if run is None:
        raise SourceError(f"{path.name}: no array named as a loss with {named_arrays.MIN_VALUES} or more numbers")
    return [run]


def _loss_points(run: Run | None) -> int:
    return int(run.logged("loss").sum()) if run is not None and run.has("loss") else 0


def free_tails(parser: TextParser) -> bool:
    """Whether several line shapes differ only in the words after their last number: a print that
    ends each line with free text (the PyTorch char-RNN tutorial's `5000 5% (0m 12s) 2.4177 Coelho /
    Portuguese ✓`: a name and a guess), which makes every line a shape of its own."""
    groups: dict[str, int] = {}
    for key in parser.templates:
        if isinstance(key, str) and "\x00" in key:
            head_key = key[: key.rfind("\x00")]
            groups[head_key] = groups.get(head_key, 0) + 1
    return any(n > _MIN_ROWS for n in groups.values())
