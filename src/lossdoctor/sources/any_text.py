"""The general reader of training text: what no named reader recognises, read by its shape.

A training script nobody listed still prints the same few line shapes thousands of times. This
reader finds them without knowing the tool:

- **repeated line templates**: a line with its numbers replaced by slots is its template
  (`epoch # loss = #`, `Step: # || Tr.Loss: # || ...`, `[#/#] loss: # acc: #`). Lines sharing a
  template are rows of one series per slot, each slot named by the words in front of it (the
  wrappers `tensor(`, `np.float32(`, quotes and dict braces are skipped, so `'loss':
  tensor(2.31, device='cuda:0')` is `loss`). A slot in parentheses right after another
  (`Loss 2.3456 (2.4012)`, the AverageMeter's current value and running average) is that slot's
  average and is never taken for it. A counter printed as `N/TOTAL` is a step counter, and an
  epoch in front of it makes the step `epoch * TOTAL + N` (`Epoch: [0][ 10/5005]`);
- **tables with a header**: Markdown and notebook tables (`| Step | Training Loss | Validation
  Loss |`), ASCII boxes and whitespace- or tab-aligned columns: a header line of names followed
  by rows of numbers with as many cells;
- **per-step key/value blocks**: one `| key | value |` line per metric between dashed lines, with
  `| section/ |  |` lines naming the section of the keys under them (stable-baselines3's logger).

- **records printed one pair a line**: `key: value`, `'key': value,`, `Key: k, Value: v` lines in a
  row (a pretty-printed dict, RSL-RL's block) are one row; a key seen again starts the next;
- **one row**: when no loss has two rows, one is enough (a `loss_dict = {...}` in an error, one
  summary); a row with no counter takes the step its line before names (`at iteration=27!`,
  `Learning iteration 8391/10000`).

Series keep their names. Train, evaluation and component losses stay apart: an evaluation loss
(by its name, or by an evaluation word in its line's own words) fills `eval_loss`, component losses
(`loss_cls`, `aux_loss`, `z_loss`...) go to `events["loss_components"]`, and the training loss is
the best-named total (`meta["loss_key"]`; `meta["loss_guessed"]` and a note when no name says
total). With no total printed, the sum of the components on the line that holds all of them is the
loss (`text.loss_summed`; never two adversaries' `d_loss` + `g_loss`); a component gone NaN where
no sum was taken is a `nonfinite_warning` event. Repeated `print(loss)` lines of a tensor are a
guessed loss; a text of overflow lines only is a row per line. Event lines (`text_events`) are filed at the step of the row read before them.

The miner is a few dozen lines rather than a template-mining library (drain3): on this task it is
as accurate and faster, see docs/benchmarks.md ("General text reader").
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import numpy as np

from ..messages import Msg
from ..records import Run, from_columns
from .columns import column_for, normalise
from .console_text import clean, segments
from .files import head, looks_binary, open_regular
from .registry import SourceError, reader
from .text_events import TEXT_MAX, Events, classify, scale_in

LOOKED_FOR = ("numbers repeated under the same words on many lines (a line template), a table with a "
              "header row, or per-step `| key | value |` blocks")

#: a number (a unit may be glued after it: `120.50ms`), or nan/inf as a whole word
NUMBER = re.compile(r"(?<![\w.@])[-+]?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][-+]?\d+)?(?![\d.])|"
                    r"(?<![\w.])[-+]?(?:nan|inf|NaN|Inf|NAN|INF)(?![\w.])")
#: the last one to three words before a slot (a name may hold `.`, `/`, `@`, `-`: `Tr.Loss`, `Acc@1`)
_NAME = re.compile(r"([A-Za-z_][\w./@-]*(?: +[A-Za-z_][\w./@-]*){0,2})[^A-Za-z0-9_]*$")  # a tab ends a name
#: wrappers between a name and its number: `tensor(`, `np.float32(`, `array([`, quotes and `{`
_WRAP = re.compile(r"(?:(?:torch\.)?tensor|(?:np\.|numpy\.)?(?:float|int)(?:16|32|64)|array|Decimal|"
                   r"float|np\.array)\(\s*\[*\s*['\"]?\s*$")
#: an evaluation word standing alone (not inside a name such as `val_loss`, not itself naming a field: `val loss`)
EVAL_WORD = re.compile(r"(?<![\w/.-])(?:val|valid|validation|validating|eval|evaluation|evaluating|test|testing"
                        r"|dev)(?![\w/-])(?!\s*(?:loss|acc|ppl|perplexity))", re.IGNORECASE)
_TRAIN_WORD = re.compile(r"(?<![A-Za-z])(?:train|training|tr)(?![A-Za-z])", re.IGNORECASE)
#: an evaluation word inside a series' own name (`val_loss`, `Validation Loss`, `eval/loss`)
EVAL_NAME = re.compile(r"(?:^|[/_ .-])(?:eval|evaluation|val|valid|validation|test|dev)(?:[/_ .-]|$)", re.IGNORECASE)
#: step-like names, best first
_STEP_NAMES = ("global_step", "global step", "step", "steps", "iteration", "iterations", "iter", "it",
               "update", "updates", "n_updates", "num_updates", "batch", "total_timesteps", "timesteps")
_EPOCH_NAMES = ("epoch", "epochs", "ep")
#: total-loss names, best first: anything else holding `loss` is a guess
_TOTAL = ("loss", "train loss", "training loss", "train_loss", "tr.loss", "trloss", "total loss", "total_loss",
          "loss_total", "losses", "lm loss", "lm_loss", "objective", "avg loss", "mean loss",
          "xent")  # xent: OpenNMT's and Neural Monkey's cross-entropy (`target/train_xent`)
_COMPONENT = re.compile(r"loss_|_loss|aux|z_loss|zloss|kl\b|(?<![a-z])(?:cls|bbox|mask|rpn|ctc|mlm|nsp|entropy|"
                        r"value|policy|crossentropy|cross_entropy|smoothl1|smooth_l1)", re.IGNORECASE)
#: MXNet's metric names that are losses (`mx.metric.CrossEntropy`, the SSD example's `SmoothL1`)
_LOSS_METRICS = ("crossentropy", "cross_entropy", "cross-entropy", "smoothl1", "smooth_l1")
#: YOLOv5's epoch table (train.py: `('%10s' * 7) % ('Epoch', 'gpu_mem', 'box', 'obj', 'cls', 'labels',
#: 'img_size')`): its bare `box`, `obj`, `cls` (and ultralytics' `dfl`) columns are loss components
_YOLO_HEADER = re.compile(r"^gpu_mem$", re.IGNORECASE)
_YOLO_LOSSES = frozenset({"box", "obj", "cls", "dfl", "seg"})
#: a tqdm bar after a table row (YOLOv5: `  416: 100%|####| 7/7 [00:15<00:00,  2.27s/it]`)
_BAR_TAIL = re.compile(r":?\s+\d{1,3}%\|.*$")
_MIN_ROWS = 2
_MAX_TEMPLATES = 2000
_HEADER_SPLIT = re.compile(r"\s*\|\s*|\t+|\s{2,}")
_RULE = re.compile(r"^[\s|+:=*~_-]*-{3,}[\s|+:=*~_-]*$|^[\s|+:]*={3,}[\s|+:=]*$")
_KV_LINE = re.compile(r"^\|\s*([^|]*?)\s*\|\s*([^|]*?)\s*\|$")


def name_key(name: str) -> str:
    return re.sub(r"\s+", " ", name.strip().lower())


def split_cells(text: str) -> list[str]:
    cells = _HEADER_SPLIT.split(text.strip().strip("|+").strip())
    return [c for c in cells if c != ""]


def names_a_loss(text: str) -> bool:
    """Whether a number of the line stands behind a loss name (`loss 2.3`, `xent nan`; never `loss
    scale`): such a line is a training row even when it also reads as an event."""
    spans = [m.span() for m in NUMBER.finditer(text)]
    return any(_is_loss(name_key(n)) for n in slot_names(text, spans) if n)


def slot_names(text: str, spans: list[tuple[int, int]]) -> list[str]:
    """The name in front of each number of a line; "(avg) NAME" for a number in parentheses right
    after another (a running average); "" when no word is in front of it."""
    names: list[str] = []
    prev = 0
    for i, (a, b) in enumerate(spans):
        piece = text[prev:a]
        prev = b
        if i and piece.strip() in ("(", "[", "( ", "(avg", "(avg:") and names:
            names.append("(avg) " + names[-1].removeprefix("(avg) "))
            continue
        piece = _WRAP.sub("", piece)
        m = _NAME.search(piece)
        names.append(m.group(1).strip(" ./-") if m else "")
    return names


class Template:
    """The lines that share one shape: their line numbers, row order and numbers."""

    def __init__(self, text: str, names: list[str], eval_context: list[bool]) -> None:
        self.text, self.names, self.eval_context = text, names, eval_context
        self.lines: list[int] = []
        self.order: list[int] = []  # index of the row in reading order (over all templates and tables)
        self.rows: list[list[float]] = []
        self.slash: list[bool] = [False] * len(names)  # slot j is printed as `N/TOTAL` (slot j+1 the total)
        self.losses: frozenset[str] = frozenset()  # names that are loss components in this table only


def _eval_context(text: str, spans: list[tuple[int, int]], names: list[str]) -> list[bool]:
    """For each slot: does the line's own text before it say evaluation (and no training word after
    that)? `valid | epoch 2 | loss 3.1` and `Validation: loss 2.4` do; `train loss 2.3, val loss 2.4`
    does not for its first loss."""
    out = []
    for (a, _), _name in zip(spans, names):
        before = text[:a]
        ev = None
        for m in EVAL_WORD.finditer(before):
            ev = m
        if ev is None:
            out.append(False)
            continue
        after = before[ev.end():]
        out.append(_TRAIN_WORD.search(after) is None)
    return out


class TextParser:
    """Feed it raw segments; then `templates` holds every repeated shape (line templates, tables and
    key/value blocks alike: a table's header and a block's keys are their slot names)."""

    def __init__(self) -> None:
        self.templates: dict[Any, Template] = {}
        self.events = Events()
        self.scale_points: list[tuple[int, float]] = []  # (row index before it, scale) from event lines
        self.overflows: list[int] = []  # row index before each overflow line
        self.n_rows = 0
        self.line_no = 0
        self.header: list[str] | None = None
        self.pending: list[tuple[int, str, str, float | None]] = []  # one-pair lines of a record being read
        self.hints: list[tuple[int, float]] = []  # (index of the next row, step) said by an event line
        self.n_events = 0
        self.scale_seq: list[int] = []  # the event number of each scale point and overflow
        self.overflow_seq: list[int] = []
        self.header_key: tuple[str, ...] | None = None
        self.block: dict[str, float] | None = None
        self.section = ""
        #: a line's text with its digits zeroed -> its template and where its numbers are
        self._cache: dict[str, tuple[Template, tuple[tuple[int, int], ...]]] = {}

    def feed(self, raw: str) -> None:
        self.line_no += 1
        text = clean(raw)
        if not text:
            return
        zeroed = text.translate(_ZERO_DIGITS)
        hit = self._cache.get(zeroed)
        if hit is not None and self.header is None and self.block is None and not self.pending:
            self._values(text, *hit)  # a shape read before: a row again (the common case)
            return
        if ("=" in text or ":" in text) and self._pair_line(text):
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
        if classify(text) is not None and names_a_loss(text):
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
        except ValueError:
            return
        self._row(t, values)

    def _new_shape(self, text: str) -> tuple[Template, tuple[tuple[int, int], ...]] | None:
        spans = tuple(m.span() for m in NUMBER.finditer(text))
        if not spans or len(spans) > 64:
            return None
        parts, prev = [], 0
        for a, b in spans:
            parts.append(text[prev:a])
            prev = b
        parts.append(text[prev:])
        key = "\x00".join(_SPACES.sub("", part) for part in parts)  # padding varies with the digits
        t = self.templates.get(key)
        if t is None:
            if len(self.templates) >= _MAX_TEMPLATES:
                return None
            names = slot_names(text, list(spans))
            t = Template(key, names, _eval_context(text, list(spans), names))
            t.slash = [parts[j + 1].strip() == "/" for j in range(len(spans))]  # `N/TOTAL` counters
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
        if len(cells) < 2:
            return False
        if self.header is not None and len(cells) > len(self.header) and "|" in text:
            cells = split_cells(_BAR_TAIL.sub("", text))
        if self.header is not None and len(cells) == len(self.header):
            values = [_cell(c) for c in cells]
            if all(v is not None for v in values) and any(v == v for v in values):
                key = ("table", self.header_key)
                t = self.templates.get(key)
                if t is None:
                    t = Template("table", list(self.header), [bool(EVAL_NAME.search(h)) for h in self.header])
                    if any(_YOLO_HEADER.match(h) for h in self.header):
                        t.losses = _YOLO_LOSSES
                    self.templates[key] = t
                self._row(t, values)  # type: ignore[arg-type]
                return True
        self.header = None  # the table ended
        if all(len(c) <= 40 and NUMBER.search(c) is None for c in cells) and any(_METRICISH.search(c) for c in cells):
            self.header, self.header_key = cells, tuple(cells)
            return True
        return False

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
        if self.pending:
            self._flush_record()
        self._end_block()

    # --- records printed one `key: value` per line -----------------------------------------

    def _pair_line(self, text: str) -> bool:
        """A line holding one `key: value` / `"key": value,` pair (a pretty-printed dict, RSL-RL's
        block, llama-recipes' `Key: k, Value: v`) joins the record being read; a key seen again in
        it starts the next record. A pair with a text value (`"eta": "1 day, 13:30:44"`) is skipped
        inside a record."""
        m = _KEY_VALUE.match(text) or _PAIR.match(text)
        if m is None or _DIGIT_WORD.search(m.group(1)):
            return False
        key, raw = m.group(1).strip(), m.group(2).strip()
        value = _cell(raw)
        if value is None or value != value and not _NAN_WORD.match(raw):
            return bool(self.pending) and raw[:1] in "'\""
        if any(k == key for _, _, k, _ in self.pending):
            self._flush_record()
        self.pending.append((self.line_no, text, key, value))
        return True

    def _flush_record(self) -> None:
        pending, self.pending = self.pending, []
        if len(pending) == 1:
            line_no, self.line_no = self.line_no, pending[0][0]
            self._line(pending[0][1])
            self.line_no = line_no
            return
        names = tuple(k for _, _, k, _ in pending)
        key = ("record", names)
        t = self.templates.get(key)
        if t is None:
            t = Template("record", list(names), [bool(EVAL_NAME.search(n)) for n in names])
            self.templates[key] = t
        line_no, self.line_no = self.line_no, pending[0][0]
        self._row(t, [v for _, _, _, v in pending])  # type: ignore[misc]
        self.line_no = line_no


_SPACES = re.compile(r"\s+")
#: one `key: value` pair making up the whole line (dict braces, quotes and a trailing comma around it)
_PAIR = re.compile(r"^[{\s'\"]*([A-Za-z_][\w ./@()-]{0,80}?)['\"]?\s*[:=]\s*(\S.{0,60}?)\s*[,}]*$")
_DIGIT_WORD = re.compile(r"(?<![\w.])\d")
_NAN_WORD = re.compile(r"^['\"]?[-+]?(?:nan|inf)", re.I)
#: llama-recipes' summary (`train_utils.py`: `print(f"Key: {key}, Value: {value}")`)
_KEY_VALUE = re.compile(r"^Key:\s*([A-Za-z_][\w./-]*),\s*Value:\s*(\S+)$")
#: the step an event line names (detectron2: `Loss became infinite or NaN at iteration=27!`)
_STEP_HINT = re.compile(r"(?<![A-Za-z])(?:global[_ ]step|iteration|iter|step)\s*[=:]?\s*(\d+)(?![\d.])", re.I)
_ZERO_DIGITS = str.maketrans("123456789", "000000000")
_METRICISH = re.compile(r"loss|acc|step|epoch|iter|lr|learning|norm|reward|score|perplex|ppl|error|"
                        r"f1|bleu|mse|mae|time", re.IGNORECASE)
_CLOCK = re.compile(r"^\d+:\d\d(?::\d\d)?(?:\.\d+)?$")
_NOT_A_VALUE = {"no log", "-", "--", "none", "n/a", "null", ""}


def _cell(c: str) -> float | None:
    """A table cell as a number (NaN for a cell that says nothing was logged), else None."""
    s = c.strip().strip("'\"")
    if s.lower() in _NOT_A_VALUE or _CLOCK.match(s):
        return float("nan")  # nothing logged, or a duration column (fastai's `00:12`)
    m = _CELL_NUMBER.match(s) or _CELL_COUNTER.match(s)
    if m is None:
        return None
    try:
        return float(m.group(1))
    except ValueError:
        return None


_CELL_NUMBER = re.compile(r"^(?:(?:torch\.)?tensor\(|np\.float\d+\()?\s*([-+]?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][-+]?\d+)?|"
                          r"[-+]?(?:nan|inf))\s*(?:,.*\)|\))?(?:%|[KMGT]i?B?)?$", re.IGNORECASE)
#: a counter cell `N/TOTAL` (YOLOv5's epoch `1/99`): its N
_CELL_COUNTER = re.compile(r"^(\d+)/\d+$")


def raw_indented(text: str) -> bool:
    """A key/value line whose key is indented under a section line (`|    loss    | 0.41 |`)."""
    return text[1:3] == "  "


# --- from shapes to series ------------------------------------------------------------------

def base_name(name: str) -> str:
    """The name without its section (`train/loss` -> `loss`, `time/iterations` -> `iterations`)."""
    n = name_key(name).removeprefix("(avg) ")
    return n.rsplit("/", 1)[-1] if "/" in n.rstrip("/") else n


def _word(name: str) -> str:
    """The last word of a slot's name (`Train Epoch` -> `epoch`, `time/iterations` -> `iterations`)."""
    n = base_name(name).split()
    return n[-1] if n else ""


def steps_of(t: Template) -> tuple[np.ndarray | None, set[int], str]:
    """(the step of each row or None, the slots that are counters, how the step was found:
    "named", "counter", "epoch_counter", "epoch" or "numbered"). A counter within an epoch (printed
    `N/TOTAL`, or one that restarts) is counted on from the epochs before it."""
    a = np.array(t.rows, dtype=np.float64) if t.rows else np.zeros((0, len(t.names)))
    whole = [j for j in range(a.shape[1]) if np.all(np.isfinite(a[:, j])) and np.all(a[:, j] == np.round(a[:, j]))
             and np.all(a[:, j] >= 0)]
    of_total = [j for j in whole if t.slash[j] and j + 1 in whole and np.all(a[:, j + 1] == a[0, j + 1])]
    counters = {k for j in of_total for k in (j, j + 1)}
    epoch = next((j for j in whole if _word(t.names[j]) in _EPOCH_NAMES), None)
    named = [(_STEP_NAMES.index(base_name(t.names[j])), j) for j in whole if base_name(t.names[j]) in _STEP_NAMES
             and j != epoch]
    counters.update(j for _, j in named)
    if epoch is None and len(of_total) > 1:
        epoch = of_total[0]  # `[0][ 10/5005]`: the outer of two counters is the epoch
    if epoch is not None:
        counters.add(epoch)
    inner = min(named)[1] if named else next((j for j in reversed(of_total) if j != epoch), None)
    if inner is None:
        if epoch is not None and a.shape[0] and np.all(np.diff(a[:, epoch]) > 0):
            return a[:, epoch], counters, "epoch"
        return None, counters, "numbered"
    steps = a[:, inner]
    if epoch is None or epoch > inner or np.all(np.diff(steps) >= 0) and inner not in of_total:
        return steps, counters, "named" if named else "counter"
    per_epoch = a[0, inner + 1] if inner in of_total else np.max(steps) + 1
    # an epoch printed `E/TOTAL` counts from 1 (`Epoch [1/10]`); a bare one as the ImageNet example's from 0
    first = 1.0 if epoch in of_total and a.shape[0] and np.min(a[:, epoch]) >= 1 else 0.0
    return (a[:, epoch] - first) * per_epoch + steps, counters, "epoch_counter"


def _is_loss(n: str) -> bool:
    n = n.removeprefix("train_").removeprefix("training_")
    if "scale" in n:  # `loss scale`, `loss_scale`: the fp16 scaler's, never a loss
        return False
    return "loss" in n or n in ("nll", "xent", "objective", "ce", "perplexity", "ppl") or n.endswith("loss") or \
        n in _LOSS_METRICS


def classify_slot(t: Template, j: int) -> str | None:
    """"train", "eval", "component" for a loss-like slot; "avg" for a running average; else None."""
    raw = name_key(t.names[j])
    if not raw or raw.startswith("(avg)"):
        return "avg" if raw else None
    n = base_name(raw)
    if n in t.losses:
        return "component"
    comp_name = bool(_COMPONENT.search(n)) and total_rank(n) == 50 and not n.startswith(("total", "train", "tr."))
    loss_like = _is_loss(n) or (comp_name and bool(re.search(r"aux|z_?loss", n)))
    if not loss_like:
        return None
    if EVAL_NAME.search(raw) or (t.eval_context[j] and not _TRAIN_WORD.search(raw)):
        return "eval"
    return "component" if comp_name else "train"


#: words in front of a total's name that keep it the total (`avg_train_loss`, kohya's `avr_loss`)
_TOTAL_PREFIX = re.compile(r"^(?:avg|avr|average|mean|running|smoothed|cur|current)[_ ]", re.IGNORECASE)


def total_rank(name: str) -> float:
    """The rank of a total-loss name (lower is better; 50: not a total). A prefixed total
    (`avg_train_loss`) ranks right after the bare one."""
    n = base_name(name)
    bare = _TOTAL_PREFIX.sub("", n)
    if bare != n:
        r = total_rank(bare)
        return r + 0.5 if r < 50 else 50
    for prefix in ("train ", "train_", "training "):
        if n.startswith(prefix) and n[len(prefix):] in _TOTAL:
            return _TOTAL.index(n[len(prefix):]) + 1
    return _TOTAL.index(n) if n in _TOTAL else 50


def choose(parser: TextParser) -> dict[str, Any]:
    """Which template is the training line and which slot is each series. A series needs two rows;
    when no loss has two, one row is enough (a single dict dump, one RL block, one summary)."""
    cands = _candidates(parser, _MIN_ROWS)
    if not cands["train"] and not any(len(c[4].rows) >= _MIN_ROWS for c in cands["component"]):
        cands = _candidates(parser, 1)
    train = min(cands["train"], key=lambda c: c[:4]) if cands["train"] else None
    guessed = train is None or train[0] >= 50
    summed = None
    if train is None and cands["component"]:
        summed = _summed(cands["component"])
        if summed is None:
            train = min(cands["component"], key=lambda c: (c[1], c[2], c[3]))  # kept among the components too
    if train is None and summed is None:
        train = _bare(parser)
    main = train[4] if train is not None else summed[0] if summed is not None else _busiest(parser)
    return {"main": main, "loss": train[4:] if train else None, "guessed": guessed, "summed": summed,
            "eval": min(cands["eval"], key=lambda c: c[:4])[4:] if cands["eval"] else None,
            "components": [c[4:] for c in cands["component"]]}


def _candidates(parser: TextParser, min_rows: int) -> dict[str, list[tuple[Any, ...]]]:
    cands: dict[str, list[tuple[Any, ...]]] = {"train": [], "eval": [], "component": []}
    for t in parser.templates.values():
        _, counters, _ = steps_of(t)
        for j in range(len(t.names)):
            if j in counters:
                continue
            kind = classify_slot(t, j)
            once = kind == "eval" or kind == "component" and not all(math.isfinite(r[j]) for r in t.rows)
            if kind in cands and (len(t.rows) >= min_rows or once):  # one evaluation, one NaN component is enough
                cands[kind].append((total_rank(t.names[j]), -len(t.rows), t.order[0], id(t), t, j))
    return cands


#: component names of two adversaries (a GAN's D and G): their sum is no training loss
_ADVERSARIES = re.compile(r"^(?:d|g|disc|gen|discriminator|generator|critic|actor)(?:[_ ./]|$)", re.IGNORECASE)


def _summed(found: list[tuple[Any, ...]]) -> tuple[Template, list[int]] | None:
    """With no total printed, the sum of the components is the loss (detectron2's and mmdetection's
    `losses = sum(loss_dict.values())`, YOLOv5's box + obj + cls) on the line that holds every
    component seen in the log; None when no line holds them all or they are two adversaries'."""
    names = {name_key(c[4].names[c[5]]) for c in found}
    if len(names) < 2 or any(_ADVERSARIES.match(n) for n in names):
        return None
    by_t: dict[int, list[tuple[Any, ...]]] = {}
    for c in found:
        by_t.setdefault(id(c[4]), []).append(c)
    full = [cs for cs in by_t.values() if {name_key(c[4].names[c[5]]) for c in cs} == names]
    if not full:
        return None
    best = max(full, key=lambda cs: len(cs[0][4].rows))
    return best[0][4], [c[5] for c in best]


def _bare(parser: TextParser) -> tuple[Any, ...] | None:
    """A line that is nothing but one printed tensor (`print(loss)`: `tensor(3.2207, device='cuda:0')`),
    repeated: that number is taken for the loss (a guess, said in a note). A bare number alone on
    its lines is not: too many other things print one."""
    found = [t for t in parser.templates.values() if len(t.rows) >= _MIN_ROWS + 1 and t.text not in _NOT_LINES
             and t.text.split("\x00", 1)[0].strip().lower() in ("tensor(", "torch.tensor(")
             and not t.names[0]]
    if not found:
        return None
    t = max(found, key=lambda t: (len(t.rows), -t.order[0]))
    return (50, -len(t.rows), t.order[0], id(t), t, 0)


_NOT_LINES = ("table", "block", "record", "events")


def _busiest(parser: TextParser) -> Template | None:
    named = [t for t in parser.templates.values() if len(t.rows) >= _MIN_ROWS + 1 and any(
        _METRICISH.search(n) for n in t.names) and any(r != t.rows[0] for r in t.rows)]  # not one line repeated
    return max(named, key=lambda t: (len(t.rows), -t.order[0])) if named else None


#: the records columns other slots may fill (by `columns.column_for`), never from evaluation lines
_OTHER_COLUMNS = ("grad_norm", "lr", "scale", "param_norm", "batch_size")


class Placed:
    """The training template's steps, and where every other row goes: its own counter when its
    line has one, else the step of the training row read before it."""

    def __init__(self, main: Template, hints: list[tuple[int, float]] | None = None) -> None:
        steps, _, self.how = steps_of(main)
        if steps is not None and np.sum(np.diff(steps) < 0) >= 2:
            steps, self.how = None, "numbered"  # a counter that restarts (a batch within an epoch)
        if steps is None and hints:
            steps = _hinted(main.order, hints)
            self.how = "numbered" if steps is None else "hinted"
        self.steps = steps if steps is not None else np.arange(1, len(main.rows) + 1, dtype=np.float64)
        self.order = np.asarray(main.order)
        self.main = main
        self.hints = hints or []

    def of(self, t: Template) -> np.ndarray:
        if t is self.main:
            return self.steps
        own, _, how = steps_of(t)
        if own is not None and (how == "named" or how in ("counter", "epoch_counter") and not any(t.eval_context)):
            return own
        steps = self.at(np.asarray(t.order))
        return steps if not self.hints else self._hinted_rows(t.order, steps)

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


def _hinted(order: list[int], hints: list[tuple[int, float]]) -> np.ndarray | None:
    """The step of each row from the hint read since the row before it, when every row has one."""
    at = [p for p, _ in hints]
    out, prev = [], -1
    for o in order:
        k = int(np.searchsorted(at, o, side="right")) - 1
        if k < 0 or at[k] <= prev:
            return None
        out.append(hints[k][1])
        prev = o
    steps = np.asarray(out, dtype=np.float64)
    return steps if np.all(np.diff(steps) > 0) else None


def build(parser: TextParser, what: str) -> Run:
    picked = choose(parser)
    main = picked["main"]
    if main is None:
        main = _events_only(parser)
    if main is None:
        raise SourceError(f"{what}: not a log format lossdoctor knows: no numeric series in this text "
                          f"(looked for {_looked_for()})")
    place = Placed(main, _hints(parser, main))
    cols: dict[str, dict[int, float]] = {}
    meta: dict[str, Any] = {"framework": "text"}
    notes: list[Msg] = []
    _loss_columns(picked, place, cols, meta, notes)
    _other_columns(parser, place, cols)
    comp_lines: dict[int, int] = {}
    components = _components(picked["components"], place, comp_lines)
    events: dict[str, dict[int, Any]] = {}
    if components:
        events["loss_components"] = components
        notes.append(Msg("text.components", names=sorted({k for v in components.values() for k in v})[:8]))
    _event_columns(parser, place, cols, events)
    _nonfinite_components(components, comp_lines, cols, events)
    parser.events.hints.apply(meta, saw_scale="scale" in cols)
    steps = np.array(sorted({s for c in cols.values() for s in c} | set(place.steps.tolist())), dtype=np.float64)
    arrays = {k: np.array([c.get(s, np.nan) for s in steps.tolist()]) for k, c in cols.items()}
    logged = {k: np.array([s in c for s in steps.tolist()]) for k, c in cols.items()}
    run = from_columns(steps, arrays, events=events, meta=meta, source="text", logged=logged)
    shape = {"named": None, "counter": None, "epoch_counter": None, "hinted": None, "epoch": "text.epoch_is_step",
             "numbered": "text.numbered"}[place.how]
    head_notes = [Msg("text.read", what=what, n=len(main.rows), shape=_shape_name(main),
                      key=meta.get("loss_key", "-"))]
    if shape:
        head_notes.append(Msg(shape, n=len(main.rows)))
    if "loss" not in cols:
        head_notes.append(Msg("source.not_in_log", signals=[Msg("signal.loss")]))
    run.notes.extend(head_notes + notes)
    return run


def _loss_columns(picked: dict[str, Any], place: Placed, cols: dict[str, dict[int, float]],
                  meta: dict[str, Any], notes: list[Msg]) -> None:
    if picked["loss"] is not None:
        t, j = picked["loss"]
        _fill(cols, "loss", place.of(t), [r[j] for r in t.rows])
        meta["loss_key"], meta["loss_guessed"] = t.names[j], picked["guessed"]
        if picked["guessed"]:
            notes.append(Msg("text.loss_guessed", key=t.names[j]))
    elif picked["summed"] is not None:
        t, slots = picked["summed"]
        _fill(cols, "loss", place.of(t), [float(sum(r[j] for j in slots)) for r in t.rows])
        keys = [t.names[j] for j in slots]
        meta["loss_key"], meta["loss_guessed"] = " + ".join(keys), False
        notes.append(Msg("text.loss_summed", keys=keys, n=len(t.rows)))
    if picked["eval"] is not None:
        t, j = picked["eval"]
        _fill(cols, "eval_loss", place.of(t), [r[j] for r in t.rows])
        meta["eval_loss_key"] = t.names[j]
        notes.append(Msg("text.eval_kept", key=t.names[j], n=len(t.rows)))


def _events_only(parser: TextParser) -> Template | None:
    """A text of overflow / loss-scale lines only (apex's `Gradient overflow.  Skipping step, loss
    scaler 0 reducing loss scale to 32768.0`, repeated): each such line is a row, numbered in order."""
    if not parser.scale_points and not parser.overflows:
        return None
    t = Template("events", [], [])
    seq = sorted(set(parser.scale_seq) | set(parser.overflow_seq))
    t.rows, t.order = [[] for _ in seq], list(range(len(seq)))
    row = {e: k for k, e in enumerate(seq)}
    parser.scale_points = [(row[e] + 1, v) for e, (_, v) in zip(parser.scale_seq, parser.scale_points)]
    parser.overflows = [row[e] + 1 for e in parser.overflow_seq]
    return t


def _hints(parser: TextParser, main: Template) -> list[tuple[int, float]]:
    """(index of the next row, step) said by the lines around the rows: an event line naming its
    step, and a line that is nothing but a counter (RSL-RL's `Learning iteration 8391/10000`)."""
    out = list(parser.hints)
    for t in parser.templates.values():
        if t is main or t.text in _NOT_LINES:
            continue
        steps, counters, how = steps_of(t)
        if steps is not None and how in ("named", "counter") and len(counters) == len(t.names):
            out.extend((o + 1, s) for o, s in zip(t.order, steps.tolist()))
    return sorted(out)


def _shape_name(t: Template) -> str:
    if t.text in _NOT_LINES:
        return t.text
    return re.sub(r"\s+", " ", t.text.replace("\x00", "#"))[:80]


def _fill(cols: dict[str, dict[int, float]], name: str, steps: np.ndarray, values: Iterable[float]) -> None:
    c = cols.setdefault(name, {})
    for s, v in zip(steps.tolist(), values):
        c[int(s)] = v


def _other_columns(parser: TextParser, place: Placed, cols: dict[str, dict[int, float]]) -> None:
    best: dict[str, tuple[int, int, Template, int]] = {}
    least = min(_MIN_ROWS, len(place.main.rows))  # a one-row log's other series have one row too
    for t in parser.templates.values():
        if len(t.rows) < least:
            continue
        for j, name in enumerate(t.names):
            if not name or t.eval_context[j] or name_key(name).startswith("(avg)"):
                continue
            hit = column_for(base_name(name)) or column_for(normalise(name))
            if hit is None or hit[0] not in _OTHER_COLUMNS:
                continue
            key = (hit[1], -len(t.rows))
            if hit[0] not in best or key < best[hit[0]][:2]:
                best[hit[0]] = (*key, t, j)
    for col, (_, _, t, j) in best.items():
        _fill(cols, col, place.of(t), [r[j] for r in t.rows])


def _components(found: list[tuple[Template, int]], place: Placed,
                lines: dict[int, int] | None = None) -> dict[int, dict[str, float]]:
    """{step: {component: value}}; `lines[step]` gets the line each step's components came from."""
    out: dict[int, dict[str, float]] = {}
    for t, j in found:
        for s, r, line in zip(place.of(t).tolist(), t.rows, t.lines):
            out.setdefault(int(s), {}).setdefault(_component_key(t.names[j]), r[j])
            if lines is not None:
                lines.setdefault(int(s), line)
    return out


def _nonfinite_components(components: dict[int, dict[str, float]], lines: dict[int, int],
                          cols: dict[str, dict[int, float]], events: dict[str, dict[int, Any]]) -> None:
    """A component that went NaN/Inf at a step whose training loss is finite or not logged (a
    `loss_dict` holding only some of the components, so no sum was taken): a `nonfinite_warning`
    text event at that step, so the non-finite value is not lost."""
    loss = cols.get("loss", {})
    for step, comp in sorted(components.items()):
        bad = sorted(k for k, v in comp.items() if not math.isfinite(v))
        if bad and (step not in loss or math.isfinite(loss[step])):
            text = ", ".join(f"{k} = {comp[k]}" for k in bad)[:TEXT_MAX]
            events.setdefault("text_events", {}).setdefault(step, []).append(
                {"kind": "nonfinite_warning", "line": lines.get(step, 0), "text": f"component loss non-finite: {text}"})


def _component_key(name: str) -> str:
    """A component's name as printed, a name of several words in snake case (RSL-RL's `Value
    function loss` -> `value_function_loss`)."""
    n = name.strip()
    return re.sub(r"\s+", "_", n.lower()) if " " in n else n


def _event_columns(parser: TextParser, place: Placed, cols: dict[str, dict[int, float]],
                   events: dict[str, dict[int, Any]]) -> None:
    """Loss scales and overflows read from event lines, and the events themselves, at their step."""
    if parser.scale_points:
        at = place.at(np.asarray([i - 1 for i, _ in parser.scale_points]))
        _fill(cols, "scale", at, [v for _, v in parser.scale_points])
    if parser.overflows:
        at = place.at(np.asarray([i - 1 for i in parser.overflows]))
        _fill(cols, "skipped", at, [1.0] * len(at))
    if parser.events.items:
        by_step: dict[int, list[dict[str, Any]]] = {}
        at = place.at(np.asarray([i - 1 for _, _, _, i in parser.events.items]))
        for s, (line, kind, text, _) in zip(at.tolist(), parser.events.items):
            by_step.setdefault(int(s), []).append({"kind": kind, "line": line, "text": text})
        events["text_events"] = by_step


def _looked_for() -> str:
    from .stdout import LOOKED_FOR as CONSOLE

    return f"{CONSOLE}; {LOOKED_FOR}; also reads trainer_state.json, TensorBoard, W&B, MLflow, CSV, JSONL"


#: lines read without one numeric row before the general reader stops looking: text that holds a
#: training series shows it long before this (a real log's preamble is tens to thousands of
#: lines), and a reader at ~10 us a line would otherwise take minutes on 256 MiB of `yes` piped in
NO_SERIES_LINES = 200_000


def parse(lines: Iterable[str]) -> TextParser:
    p = TextParser()
    for line in lines:
        p.feed(line)
        if p.n_rows == 0 and p.line_no >= NO_SERIES_LINES:
            break  # refused as "no numeric series" below, in bounded time
    p.finish()
    return p


_NOT_TEXT = (".json", ".jsonl", ".ndjson", ".parquet", ".npz", ".pt", ".wandb", ".db", ".sqlite")


def _sniff(p: Path) -> bool:
    return p.is_file() and p.suffix.lower() not in _NOT_TEXT and not looks_binary(head(p, 65536))


@reader("training text", _sniff, priority=95)
def read(path: Path) -> list[Run]:
    with open_regular(path) as f:
        return [build(parse(segments(f)), path.name)]
