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

import re
from collections import Counter
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import numpy as np

from ..messages import Msg
from ..records import Run, from_columns
from . import composer as co
from . import console_lines as cl
from . import deepspeed as ds
from . import megatron as mg
from .columns import PREFERENCE_COLUMNS
from .console_text import CURSOR_UP, clean, segments
from .files import head, looks_binary, open_regular
from .hf_trainer import filtered_nan_note, is_filtered_nan
from .registry import SourceError, reader
from .text_events import Events

_SNIFF_BYTES = 8 << 20
_SNIFF_CONSOLE_BYTES = 4 << 20
_SNIFF_SEGMENTS = 20_000
_ANY = re.compile(rb"\biteration\s+\d+\s*/\s*\d+\s*\|.*loss|\bstep=\d+,\s*skipped=\d+|"
                  rb"Attempted loss scale:|Grad overflow on iteration")
#: a segment worth the key-value parser: names a training metric
_HINT = re.compile(r"loss|norm|\blr\b|learning|scale", re.IGNORECASE)
#: a line that reports an evaluation, not a training step: it starts with an evaluation word as its own
#: field (fairseq's `valid | epoch 002 | valid on 'valid' subset | loss 9.393 | ...`, `eval: loss ...`),
#: or names the subset it was evaluated on (fairseq's `valid on 'valid' subset`). Its `loss` is no
#: training loss even though the name alone does not say so.
_EVAL_LINE = re.compile(r"(?:\|\s*)?(?:val|valid|validation|eval|evaluation|test|dev)\s*[|:,\]-]|.*\bvalid on '[^']*' subset",
                        re.IGNORECASE)
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
LOOKED_FOR = ("Hugging Face Trainer dicts, tqdm bars with loss=, Megatron/DeepSpeed lines, nanoGPT/"
              "litgpt/mlx-lm/torchtitan/Keras lines, Composer metric blocks, or lines with a step counter and a "
              "loss, grad norm or lr")


class ConsoleParser:
    """Feed it raw segments; `rows` gets one dict per logged step (several may share a step)."""

    def __init__(self) -> None:
        self.rows: list[dict[str, Any]] = []
        self.megatron = mg.MegatronLines()  # the arguments block, dropped losses
        self.deepspeed = ds.DeepSpeedLines()  # skipped-step counts, which rank's overflows are read
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
        self.keras_epoch = 0  # the last "Epoch N/M" line
        self.first_epoch: float | None = None  # the first HF dict's epoch (>= 1: the paste starts mid-run)
        self.events = Events()  # overflow, NaN-warning, OOM... lines at the row read before them
        self.eval_rows = 0  # rows holding only an evaluation's loss
        self.component_rows = 0  # rows holding component losses
        self.line_no = 0

    # --- one segment ---------------------------------------------------------------------

    def feed(self, raw: str) -> None:
        self.line_no += 1
        text = clean(raw)
        nested = CURSOR_UP in raw
        for _ in range(64):  # bars, and what was printed after them before a newline
            if not ("[" in text and ":" in text):
                break
            bar = cl.tqdm_bar(text)
            if bar is None:
                break
            n, total, metrics, end = bar
            self._bar(n, total, metrics, nested=nested)
            text = text[end:].strip()
            if len(text) <= 2:
                return
        if text:
            self._line(text)

    def _line(self, text: str) -> None:
        if self.megatron.argument_line(text):
            return
        if (text[:1] == "[" or self.composer.block is not None or self.composer.in_eval) \
                and self._composer(text):
            return
        if text[:1].isdigit() and " - " in text:
            keras = cl.keras_bar(text)
            if keras is not None:
                self._keras(*keras)
                return
        if text.startswith("Epoch "):
            e = cl.KERAS_EPOCH.match(text)
            if e is not None:
                self.keras_epoch = int(e.group(1))
                return
        if "iteration" in text:
            row = self.megatron.iteration(text)
            if row is not None:
                self.counts["megatron"] += 1
                self._add(row, marker=True)
                return
            it = ds.parse_grad_overflow(text)
            if it is not None:
                self.counts["grad_overflow"] += 1
                self._add({"step": it, "skipped": 1.0}, marker=True)
                return
        if "step=" in text:
            row = self.deepspeed.step(text)
            if row is not None:
                self.counts["ds_step"] += 1
                self._add(row, marker=True)
                if row.get("skipped_in_interval"):  # DeepSpeed's `skipped=N` counter rose
                    self.events.add(self.line_no, "overflow", text, len(self.rows))
                return
        if "VERFLOW" in text or "verflow" in text:
            ov = self.deepspeed.overflow(text)
            if ov is not None:
                if ov:  # () is another rank's copy of an overflow already read
                    self.counts["ds_overflow"] += 1
                    self.since_marker = self.deepspeed.place_overflow(self.rows, self.marker,
                                                                      self.since_marker, *ov)
                    self.events.add(self.line_no, "overflow", text, len(self.rows))
                return
        if "{" in text:
            row = cl.hf_dict(text)
            if row is not None:
                if row:
                    self._hf(row)
                else:
                    self.eval_dicts += 1
                    self._eval({"step": None, "eval_loss": cl.hf_eval_loss(text)})
                return
        if _HINT.search(text) and self._key_value(text):
            return
        self.events.scan(self.line_no, text, len(self.rows))
        self.ignored += 1

    def _key_value(self, text: str) -> bool:
        """A `name: number` line with a step counter (or two training metrics): True when used."""
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
        if row is not None and (row["step"] is not None or "_epoch" in row
                                or sum(c in row for c in cl.METRICS) >= 2):
            self.counts[row.pop("_dialect")] += 1
            epoch = row.pop("_epoch", None)
            if row.pop("_finer_counter", False):
                self.finer_counter += 1
            if row["step"] is None and epoch is not None and self.last_counter is None \
                    and self.marker is None:
                row["step"], row["_how"] = epoch, "epoch"  # nothing finer than the epoch
                self._add(row, marker=False)
            elif row["step"] is None:
                self._wait_for_step(row)
            else:
                self._add(row, marker=True)
            return True
        return False

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
        """Keras counts batches within an epoch: the step is (epoch - 1) * batches per epoch + batch."""
        step = (max(self.keras_epoch, 1) - 1) * per_epoch + batch
        if metrics:
            self.counts["keras"] += 1
            self._add({"step": step, **metrics}, marker=True)

    def _hf(self, row: dict[str, Any]) -> None:
        self.counts["hf"] += 1
        self.component_rows += "_components" in row
        epoch = row.pop("epoch", None)
        self.first_epoch = epoch if self.first_epoch is None and isinstance(epoch, float) else self.first_epoch
        if is_filtered_nan(row.get("loss"), row.get("grad_norm")):
            row["loss"] = float("nan")  # logging_nan_inf_filter logs an all-NaN interval as 0.0
            row["_nan_filter"] = True
        if row["step"] is None:
            self._wait_for_step(row)
        else:
            self._add(row, marker=False)

    def _bar(self, n: int, total: int | None, metrics: dict[str, Any], nested: bool) -> None:
        if nested:
            return  # an evaluation bar drawn under the training one
        self.bar_done = total is None or n >= total
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
            self.rows.append(row)
            if self.bar_tail and step == self.bar_tail[-1]["step"]:
                self.bar_tail.append(row)
            else:
                self.bar_before = self.bar_tail[-1] if self.bar_tail else None
                self.bar_tail = [row]

    # --- steps ---------------------------------------------------------------------------

    def _add(self, row: dict[str, Any], *, marker: bool) -> None:
        self._flush_pending()
        self.rows.append(row)
        if marker:
            self.marker, self.since_marker = row["step"], 0

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
        self.rows.append(row)

    def _flush_pending(self) -> None:
        """No counter came after the waiting row: the last counter before it if that is newer than
        the previous such row, else one interval after the previous one, else the next number."""
        if self.pending is None:
            return
        if self.last_counter is not None and (self.last_pending_step is None
                                              or self.last_counter > self.last_pending_step):
            self._place_pending(self.last_counter)
            return
        row, self.pending = self.pending, None
        if self.last_pending_step is not None and self.last_counter is not None:
            row["step"] = self.last_pending_step + self.pending_interval
            row["_how"] = "interval"
        else:
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
        self._composer("")  # the last block ends with the log
        if self.bar_done:  # a bar that stopped short of its total was cut, not closed: its last draw is a step
            self._drop_closing_render()
        self._flush_pending()
        self._number_repeated_epochs()
        self._space_numbered()

    def _number_repeated_epochs(self) -> None:
        """Lines placed at their epoch: if an epoch comes twice, the lines are finer than epochs
        (`Epoch 1, batch 200, loss ...` with no step): number them in order instead."""
        by_epoch = [r for r in self.rows if r.get("_how") == "epoch"]
        epochs = [r["step"] for r in by_epoch]
        if len(set(epochs)) == len(epochs):
            return
        for r in by_epoch:
            self.numbered += 1
            r["step"], r["_how"] = self.numbered, "numbered"

    def _space_numbered(self) -> None:
        """Dicts copied from a terminal's scrollback, with only the last progress bar below them:
        the first k-1 were numbered 1, 2...; the k-th took the bar's counter S. A Trainer logs every
        L steps from step L, so when S is a multiple of k they were at L, 2L, ... (L = S / k)."""
        waiting = [r for r in self.rows if r.get("_how") in ("numbered", "counter", "interval")]
        numbered = [r for r in waiting if r["_how"] == "numbered"]
        if not numbered or len(numbered) == len(waiting):
            return
        k = len(numbered) + 1
        first = waiting[len(numbered)]
        if waiting[:len(numbered)] != numbered or first["_how"] != "counter" or first["step"] % k:
            return
        every = first["step"] // k
        later = [r["step"] for r in waiting[len(numbered):]]
        if every < 1 or any(b - a != every for a, b in zip(later, later[1:])):
            return
        for j, r in enumerate(numbered, 1):
            r["step"], r["_how"] = j * every, "spaced"

    # --- notes ---------------------------------------------------------------------------

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
        out: list[str] = [Msg("console.read_ignored", what=what, used=used, ignored=_and(other, all_and=True)) if other
                          else Msg("console.read", what=what, used=used)]
        how = Counter(r.get("_how") for r in self.rows if r.get("_how"))
        if how.get("counter"):
            out.append(Msg("console.took_bar_counter", n=how["counter"]))
        if how.get("interval"):
            out.append(Msg("console.placed_one_interval", n=how["interval"]))
        if self.finer_counter:
            out.append(Msg("console.two_counters", n=self.finer_counter))
        if how.get("epoch"):
            out.append(Msg("console.epoch_is_step", n=how["epoch"]))
        if how.get("numbered"):
            out.append(Msg("console.numbered", n=how["numbered"]))
        out.extend(self.deepspeed.rank_notes())
        if how.get("spaced"):
            out.append(Msg("console.spaced", n=how["spaced"]))
        out.extend(self.deepspeed.placement_notes())
        out.extend(self.megatron.notes())
        out.extend(self.composer.notes())
        nan_filter = [r["step"] for r in self.rows if r.get("_nan_filter")]
        if nan_filter:
            out.append(filtered_nan_note(min(nan_filter)))
        return out


def _and(items: list[Msg], all_and: bool = False) -> Msg:
    """"a, b and c" (or "a and b and c") in English, "a、b、c" in Chinese."""
    if len(items) == 1:
        return items[0]
    if all_and:
        return Msg("word.a_and_b", a=_and(items[:-1], True), b=items[-1])
    return Msg("word.a_and_b", a=items[:-1], b=items[-1])


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


_COLUMNS = ("loss", "eval_loss", "lr", "scale", "grad_norm", "param_norm", "skipped", "batch_size",
            "skipped_in_interval", "nan_in_interval", *PREFERENCE_COLUMNS)


def rows_to_run(p: ConsoleParser, what: str) -> Run:
    # a scale guessed from "Attempted loss scale" must not overwrite a logged one at that step
    rows = [r for r in p.rows if not r.get("_drop")]
    logged_scale_steps = {r["step"] for r in rows if "scale" in r and not r.get("_weak")}
    rows = [r for r in rows if not (r.get("_weak") and r["step"] in logged_scale_steps)]
    rows.sort(key=lambda r: r["step"])
    steps = np.array([r["step"] for r in rows], dtype=np.float64)
    framework = _framework(p)
    meta: dict[str, Any] = {"framework": framework}
    meta.update(mg.args_meta(p.megatron.args))
    if p.first_epoch is not None and np.isfinite(p.first_epoch):
        meta["first_epoch"] = p.first_epoch
    if p.megatron.args:
        meta["args"] = {k: v for k, v in p.megatron.args.items() if isinstance(v, (int, float, str, bool))}
    if p.counts["megatron"] or p.counts["hf"]:
        meta["loss_is_interval_mean"] = True
    cols: dict[str, np.ndarray] = {}
    logged: dict[str, np.ndarray] = {}
    for name in _COLUMNS:
        if name == "eval_loss" and not p.eval_rows:
            continue  # no row can hold it: one pass over the rows saved
        present = np.array([name in r for r in rows], dtype=bool)
        if present.any():
            cols[name] = np.array([float(r.get(name, np.nan)) for r in rows])
            logged[name] = present
    if "skipped_in_interval" in cols:
        interval = np.diff(steps, prepend=steps[0] - float(meta.get("log_interval", 1) or 1))
        interval = np.maximum(interval, 1.0)
        frac = np.clip(cols["skipped_in_interval"] / interval, 0.0, 1.0)
        lg = logged["skipped_in_interval"]
        base = cols.get("skipped", np.full(len(rows), np.nan))
        cols["skipped"] = np.where(lg & np.isnan(base), frac, base)
        logged["skipped"] = logged.get("skipped", np.zeros(len(rows), dtype=bool)) | lg
    if "loss" not in cols and "scale" not in cols and "grad_norm" not in cols:
        raise SourceError(f"{what}: found {sum(p.counts.values())} training log line(s) but no loss, grad "
                          "norm or loss scale in them")
    notes = p.notes(what)
    absent = [n for c, n in (("loss", Msg("signal.loss")), ("grad_norm", Msg("signal.grad_norm")),
                             ("scale", Msg("signal.scale"))) if c not in cols]
    if absent:
        notes.insert(1, Msg("source.not_in_log", signals=absent))
    source = framework if framework in ("megatron", "deepspeed") else "console"
    events: dict[str, dict[int, Any]] = {}
    if p.component_rows:
        events["loss_components"] = {int(r["step"]): r["_components"] for r in rows if r.get("_components")}
    if p.events.items:
        events["text_events"] = p.events.place([r["step"] for r in p.rows])
    fp16 = bool(np.any(cols.get("skipped", np.zeros(1)) > 0)) or bool(
        np.any(np.nan_to_num(cols.get("scale", np.ones(1)), nan=1.0) != 1.0))
    p.events.hints.apply(meta, saw_scale=fp16)
    meta.setdefault("loss_key", "loss")
    meta.setdefault("loss_guessed", False)  # the console's formats name their training loss
    run = from_columns(steps, cols, meta=meta, source=source, logged=logged, events=events)
    run.notes.extend(notes)
    return run


def _sniff(p: Path) -> bool:
    if not p.is_file() or p.suffix.lower() in _NOT_CONSOLE:
        return False
    data = head(p, _SNIFF_BYTES)
    if looks_binary(data[:65536]):
        return False
    start = data[:4096].lstrip()
    if start.startswith((b'{"', b"[{", b"[\n", b"[]")):
        return False  # JSON: the JSON readers take it
    if any(m in data for m in (b"iteration", b"step=", b"Attempted loss scale", b"Grad overflow")) \
            and _ANY.search(data) is not None:
        return True
    parser = ConsoleParser()
    for i, seg in enumerate(segments(_Bytes(data[:_SNIFF_CONSOLE_BYTES]))):
        parser.feed(seg)
        if parser.rows or parser.pending is not None or parser.composer.holding():
            return True
        if i > _SNIFF_SEGMENTS:
            break
    return False


class _Bytes:
    """A bytes object read like a file (for `segments`)."""

    def __init__(self, data: bytes) -> None:
        self.data, self.pos = data, 0

    def read(self, n: int) -> bytes:
        out = self.data[self.pos:self.pos + n]
        self.pos += n
        return out


def read_stream(f: Any, what: str) -> Run:
    p = parse(segments(f))
    if not p.rows:
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
        return [read_stream(f, path.name)]


def read_dir(path: Path) -> list[Run]:
    logs = console_logs(path)
    if not logs:
        raise SourceError(f"{path}: no console log with training log lines in this directory")
    chosen = logs[0]
    with open_regular(chosen) as f:
        run = read_stream(f, str(chosen.relative_to(path)))
    run.meta["path"] = str(chosen)  # the file read, not the folder it was found in
    if len(logs) > 1:
        run.notes.insert(0, Msg("source.console_dir_newest", chosen=str(chosen.relative_to(path)),
                                others=[str(o.relative_to(path)) for o in logs[1:4]], n=len(logs) - 1))
    return [run]
