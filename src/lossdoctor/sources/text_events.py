"""Events in training text: the lines that are no metric but say what happened at a step.

A console holds more than numbers: DeepSpeed's and apex's overflow lines, a loss scale lowered or
raised, a NaN/Inf warning, a tokenizer saying it truncated or a trainer saying an instance "will be
ignored in loss calculation", an out-of-memory or NCCL error, a restart or a resume from a
checkpoint. `classify(line)` names the kind of such a line (`records.TEXT_EVENT_KINDS`), looking
only at words, never evaluating anything; `Events` keeps them with their line number and the row
index they were read at, and `place` files them under their step as
`events["text_events"][step] = [{"kind", "line", "text"}]` once the rows have steps.

The same lines tell the precision (a loss scale or an OVERFLOW line is fp16; `fp16: true`,
`--bf16`, `torch_dtype=torch.float16` in a printed config) and sometimes the task and its size
(`num_labels=10`, `vocab_size: 50257`, an SFT trainer): `hints` reads them into `meta`.

Cost: one combined pattern searched per line the metric readers did not use; a line without any
of the few cue words is rejected by it at once.
"""

from __future__ import annotations

import re
from typing import Any

#: (kind, pattern), first match wins: the specific kinds before the generic NaN warning
_KINDS: tuple[tuple[str, re.Pattern[str]], ...] = (
    ("oom", re.compile(r"out of memory|OutOfMemoryError|\bOOM\b|CUBLAS_STATUS_ALLOC_FAILED", re.I)),
    ("nccl_error", re.compile(r"\bNCCL\b.*(?:error|timeout|timed out|WARN|abort)|nccl\w*Error|"
                              r"Watchdog caught collective operation timeout|ProcessGroupNCCL.*(?:timeout|error)", re.I)),
    ("overflow", re.compile(r"OVERFLOW!|\b(?:grad(?:ient)?s?|fp16|loss scale|dynamic loss scale) overflow|"
                            r"\boverflow\b.*\bskip|overflow detected", re.I)),
    ("loss_scale", re.compile(r"(?:loss[ _]?scale|loss scaler|grad[ _]?scale)\w*.*?(?:to|:|=)\s*[-+]?\d", re.I)),
    ("labels_ignored", re.compile(r"ignored in (?:the )?loss calculation|labels? (?:are|is|were) (?:all )?"
                                  r"(?:ignored|masked|-100)|all (?:the )?labels? (?:are|is) -100", re.I)),
    ("empty_target", re.compile(r"\bempty (?:targets?|labels?|responses?|answers?|completions?|sequences?)|"
                                r"\bno (?:valid )?(?:target|label|response) tokens?|num_items_in_batch\W+0\b", re.I)),
    ("truncation", re.compile(r"truncat|longer than the specified maximum sequence length|"
                              r"exceeds? (?:the )?(?:model'?s? )?max(?:imum)?[ _](?:length|seq)", re.I)),
    ("nonfinite_warning", re.compile(r"(?:\b(?:nan|inf)\b.*\b(?:detected|found|encountered|warn\w*|error|occurred)\b|"
                                     r"\b(?:detected|found|encountered|warn\w*|returned|got|became|is)\b\W*(?:a\s+)?\b(?:nan|inf)\b|"
                                     r"non-?finite|FloatingPointError|anomaly detect)", re.I)),
    ("resume", re.compile(r"\bresum(?:e|ed|ing)\b|continuing training from|loading (?:model )?checkpoint|"
                          r"loaded (?:from )?checkpoint|resume_from_checkpoint", re.I)),
    ("restart", re.compile(r"\brestart(?:ing|ed)?\b|restart_count|Rendezvous'ing worker group", re.I)),
)
#: the cue words: a line holding none of them is no event (one cheap search rejects most lines)
_CUE = re.compile(r"memory|OOM|NCCL|nccl|Watchdog|OVERFLOW|[Oo]verflow|[Ss]kipping|scale|label|ignored|"
                  r"[Ee]mpty|[Nn]o (?:valid )?(?:target|label|response)|num_items|[Tt]runcat|longer than|xceed|"
                  r"[Nn]a[Nn]|\b[Ii]nf\b|finite|FloatingPoint|[Aa]nomaly|[Rr]esum|[Rr]estart|Rendezvous|"
                  r"[Cc]ontinuing training|checkpoint|CUBLAS")
#: a number after the words of a loss-scale line (`reducing to 32`, `loss scale: 1.0`)
_SCALE_VALUE = re.compile(r"(?:to|:|=)\s*([-+]?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][-+]?\d+)?)\s*[.,;)]?\s*$|"
                          r"(?:reducing|increasing|lowering|raising)\s+(?:loss\s+)?(?:scale\s+)?to\s*"
                          r"([-+]?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][-+]?\d+)?)", re.I)
TEXT_MAX = 120


def classify(line: str) -> str | None:
    """The event kind of one clean line, or None."""
    if _CUE.search(line) is None:
        return None
    for kind, pattern in _KINDS:
        if pattern.search(line):
            return kind
    return None


def scale_in(line: str) -> float | None:
    """The loss scale a loss-scale or overflow line sets (the value it reduces/raises to), else None."""
    for m in _SCALE_VALUE.finditer(line):
        v = m.group(2) or m.group(1)
        try:
            return float(v)
        except (TypeError, ValueError):
            continue
    return None


class Events:
    """Events read so far: (line number, kind, text, the row index they came after)."""

    def __init__(self) -> None:
        self.items: list[tuple[int, str, str, int]] = []
        self.hints = Hints()

    def add(self, line_no: int, kind: str, text: str, row_index: int) -> None:
        if len(self.items) < _MAX_EVENTS:
            self.items.append((line_no, kind, text[:TEXT_MAX], row_index))

    def scan(self, line_no: int, text: str, row_index: int) -> str | None:
        """Classify `text`; keep it when it is an event. Returns its kind."""
        self.hints.scan(text)
        kind = classify(text)
        if kind is not None:
            self.add(line_no, kind, text, row_index)
        return kind

    def place(self, steps: list[int]) -> dict[int, list[dict[str, Any]]]:
        """{step: [event, ...]}; `steps[i]` is the step of row i (the rows in reading order). An
        event belongs to the last row read before it, or the first row when none was."""
        out: dict[int, list[dict[str, Any]]] = {}
        if not steps:
            return out
        for line_no, kind, text, idx in self.items:
            step = int(steps[idx - 1] if idx > 0 else steps[0])
            out.setdefault(step, []).append({"kind": kind, "line": line_no, "text": text})
        return out


#: at most this many events are kept (a log printing a warning on every step stays bounded)
_MAX_EVENTS = 20_000

_PRECISION = (
    ("fp16", re.compile(r"--fp16\b(?!\s*(?:=\s*)?(?:false|False|0)\b)|\bfp16\W{0,3}[:=]\s*(?:true|True|1)\b|"
                        r"\"fp16\":\s*\{\s*\"enabled\":\s*true|torch_dtype\W+(?:torch\.)?float16\b|"
                        r"\bmixed_precision\W+fp16\b|\bprecision\W+16(?:-mixed)?\b|\bamp_dtype\W+(?:torch\.)?float16\b")),
    ("bf16", re.compile(r"--bf16\b(?!\s*(?:=\s*)?(?:false|False|0)\b)|\bbf16\W{0,3}[:=]\s*(?:true|True|1)\b|"
                        r"\"bf16\":\s*\{\s*\"enabled\":\s*true|torch_dtype\W+(?:torch\.)?bfloat16\b|"
                        r"\bmixed_precision\W+bf16\b|\bprecision\W+bf16(?:-mixed)?\b")),
)
_HINT_CUE = re.compile(r"16|num_labels|num_classes|n_classes|vocab_size|SFT|[Ss]ft|[Pp]re-?train|[Cc]lassif")
_SIZE = (("n_classes", re.compile(r"\b(?:num_labels|num_classes|n_classes|nb_classes)\W{1,4}(\d{1,7})\b")),
         ("vocab_size", re.compile(r"\b(?:vocab_size|padded_vocab_size|n_vocab)\W{1,4}(\d{1,8})\b")))
_TASK = (("sft", re.compile(r"\bSFTTrainer\b|\bsft\b|supervised fine-?tun", re.I)),
         ("pretrain", re.compile(r"\bpre-?train(?:ing)?\b", re.I)),
         ("classification", re.compile(r"ForSequenceClassification|ForImageClassification|\bclassification\b", re.I)))


class Hints:
    """What the text says about the run itself: precision, task, number of classes, vocabulary."""

    def __init__(self) -> None:
        self.meta: dict[str, Any] = {}

    def scan(self, text: str) -> None:
        if _HINT_CUE.search(text) is None or len(self.meta) >= 4:
            return
        if "precision" not in self.meta:
            for name, pattern in _PRECISION:
                if pattern.search(text):
                    self.meta["precision"] = name
                    break
        for key, pattern in _SIZE:
            if key not in self.meta:
                m = pattern.search(text)
                if m is not None and int(m.group(1)) >= 2:
                    self.meta[key] = int(m.group(1))
        if "task_hint" not in self.meta:
            for name, pattern in _TASK:
                if pattern.search(text):
                    self.meta["task_hint"] = name
                    break

    def apply(self, meta: dict[str, Any], *, saw_scale: bool) -> None:
        """Fill `meta` (never overwriting what a reader set); a loss scale or an overflow is fp16."""
        if saw_scale:
            meta.setdefault("precision", "fp16")
        for k, v in self.meta.items():
            meta.setdefault(k, v)
