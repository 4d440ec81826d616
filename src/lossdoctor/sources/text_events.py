"""Events in training text: the lines that are no metric but say what happened at a step.

A console holds more than numbers: DeepSpeed's and apex's overflow lines, a loss scale lowered or
raised, a NaN/Inf warning, a tokenizer saying it truncated or a trainer saying an instance "will be
ignored in loss calculation", an out-of-memory or NCCL error, a restart or a resume from a
checkpoint. `read(line)` names the kind of such a line (`records.TEXT_EVENT_KINDS`) and the values
it carries, from the table `RULES` (pattern -> kind, its named groups the values: the scale it sets,
a count, the op anomaly mode names, the step it names), looking only at words, never evaluating
anything; `Events` keeps them with their line number, their values and the row index they were
read at, `place` files them under their step as `events["text_events"][step] = [{"kind", "line",
"text", **values}]` once the rows have steps (the step the line names, else the row read before
it), and `series` turns the counters into series (the loss scale, the skipped steps).

The same lines tell the precision (a loss scale or an OVERFLOW line is fp16; `fp16: true`,
`--bf16`, `torch_dtype=torch.float16` in a printed config) and sometimes the task and its size
(`num_labels=10`, `vocab_size: 50257`, an SFT trainer): `hints` reads them into `meta`.

Cost: one combined pattern searched per line the metric readers did not use; a line without any
of the few cue words is rejected by it at once.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol

_NUM = r"[-+]?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][-+]?\d+)?"


@dataclass(frozen=True)
class EventRule:
    """One kind of event line: `pattern`'s named groups are the values it carries (`scale`: the loss
    scale it sets, `attempted`: the scale that overflowed, `count`, `op`: the autograd function,
    `value`: nan/inf, `step`: the step the line itself names, `from_step`: the checkpoint's step, and
    `scaler`: whose loss scaler printed it, where only one prints that wording (a group named for it:
    DeepSpeed's `OVERFLOW!`));
    `source` is whose line it is (the file that prints it), `keep` drops a line whose values say
    nothing happened (a counter of 0)."""

    kind: str
    pattern: re.Pattern[str]
    source: str
    keep: Callable[[dict[str, Any]], bool] | None = None


def _rule(
    kind: str, pattern: str, source: str, keep: Callable[[dict[str, Any]], bool] | None = None, flags: int = re.I
) -> EventRule:
    return EventRule(kind, re.compile(pattern, flags), source, keep)


def _positive(v: dict[str, Any]) -> bool:
    return int(v.get("count") or 0) > 0


#: the event table, first match wins: the specific kinds before the generic ones (a NaN warning last)
RULES: tuple[EventRule, ...] = (
    _rule(
        "oom",
        r"out of memory|OutOfMemoryError|\bOOM\b(?!\W{0,3}\d)|CUBLAS_STATUS_ALLOC_FAILED",
        "torch c10/cuda/CUDACachingAllocator.cpp: `CUDA out of memory. Tried to allocate ...`",
    ),
    _rule(
        "nccl_error",
        r"\bNCCL\b.*(?:error|timeout|timed out|WARN|abort)|nccl\w*Error|"
        r"Watchdog caught collective operation timeout|ProcessGroupNCCL.*(?:timeout|error)",
        "torch ProcessGroupNCCL.cpp: `Watchdog caught collective operation timeout`",
    ),
    _rule(
        "hardware_error",
        r"uncorrectable ECC|ECC error|cudaErrorECCUncorrectable|\bXid\b.{0,40}\d|fallen off the bus|"
        r"NVLink\b.{0,40}(?:error|fail)",
        "the CUDA runtime (`CUDA error: uncorrectable ECC error encountered`), the NVIDIA driver's Xid "
        "messages (`NVRM: Xid (PCI:0000:3b:00): 79, GPU has fallen off the bus`)",
    ),
    _rule(
        "loss_scale_min",
        rf"Minimum loss scale reached \((?P<scale>{_NUM})\)|loss scale already at minimum|"
        r"loss scale (?:has )?reached (?:its |the )?minimum",
        "fairseq optim/dynamic_loss_scaler.py: `FloatingPointError: Minimum loss scale reached (0.0001)`; "
        "deepspeed runtime/fp16/loss_scaler.py: `Current loss scale already at minimum`",
    ),
    _rule(
        "anomaly_op",
        r"Function '(?P<op>[A-Za-z_][\w:.]*)' returned (?P<value>nan|inf) values in its "
        r"(?P<output>\d+)(?:st|nd|rd|th) output",
        "torch autograd anomaly mode (torch/csrc/autograd/python_anomaly_mode / engine): "
        "`Function 'SoftmaxBackward0' returned nan values in its 0th output.`",
        flags=0,
    ),
    _rule(
        "overflow",
        rf"(?P<deepspeed>OVERFLOW!)(?:.*?Attempted loss scale:\s*(?P<attempted>{_NUM}),\s*reducing to\s*"
        rf"(?P<scale>{_NUM})|.*?Attempted loss scale:\s*(?P<scale_kept>{_NUM}),?\s*but hysteresis)|"
        rf"overflow detected, ignoring gradient, setting loss scale to:?\s*(?P<scale_set>{_NUM})|"
        rf"Gradient overflow\.\s+Skipping step, loss scaler \d+ reducing loss scale to\s*(?P<scale_to>{_NUM})|"
        r"Grad overflow on iteration\s+(?P<step>\d+)",
        "deepspeed runtime/fp16/loss_scaler.py (`[deepspeed] OVERFLOW! Rank 0 Skipping step. Attempted loss "
        "scale: 65536, reducing to 32768`), fairseq trainer.py (`NOTE: gradient overflow detected, ignoring "
        "gradient, setting loss scale to: 64.0`), apex amp/scaler.py (`Gradient overflow.  Skipping step, loss "
        "scaler 0 reducing loss scale to 0.5`)",
    ),
    _rule(
        "overflow",
        r"(?P<deepspeed>OVERFLOW!)|\b(?:grad(?:ient)?s?|fp16|loss scale|dynamic loss scale) overflow|"
        r"\boverflow\b.*\bskip|overflow detected",
        "the same trainers' other wordings",
    ),
    _rule(
        "skip_count",
        r"number of skipped iterations:\s*(?P<count>\d+)",
        "Megatron-LM training.py training_log: `number of skipped iterations:   2`",
        keep=_positive,
    ),
    _rule(
        "nonfinite_loss",
        r"number of nan iterations:\s*(?P<count>\d+)",
        "Megatron-LM training.py training_log: `number of nan iterations:   1`",
        keep=_positive,
    ),
    _rule(
        "loss_scale",
        r"(?:loss[ _]?scale|loss scaler|grad[ _]?scale)\w*.*?(?:to|:|=)\s*[-+]?\d",
        "Megatron's `loss scale: 1.0`, guided-diffusion's `lg_loss_scale`, the scalers' `reducing ... to N`",
    ),
    _rule(
        "bug_warning",
        r"(?P<loss_broadcast>Using a target size .{0,80}? that is different to the input size)|"
        r"(?P<softmax_before_loss>received .?from_logits=True.?,? but the .?output.? argument was produced by "
        r"an? (?:softmax|sigmoid) activation)|"
        r"(?P<frozen_model>trainable params:\s*0\s*\|\||.?training_step.? returned .?None.?\. If this was on purpose)|"
        r"(?P<frozen_part>Gradients do not exist for variables .{0,400}when minimizing the loss|"
        r"None of the inputs have requires_grad=True\. Gradients will be None)",
        "a framework naming a bug of the loop: torch/nn/functional.py mse_loss (`Using a target size "
        "(torch.Size([32])) that is different to the input size (torch.Size([32, 1])). This will likely lead to "
        "incorrect results due to broadcasting.`), Keras's losses (`\"`categorical_crossentropy` received "
        "`from_logits=True`, but the `output` argument was produced by a Softmax activation and thus does not "
        "represent logits\"`), TF's optimizer (`Gradients do not exist for variables [...] when minimizing the "
        "loss.`), torch/utils/checkpoint.py (`None of the inputs have requires_grad=True. Gradients will be "
        "None`), PEFT's `print_trainable_parameters` (`trainable params: 0 || all params: ...`), Lightning's loops "
        "(`` `training_step` returned `None`. If this was on purpose, ignore this warning... ``: no optimizer step)",
    ),
    _rule(
        "labels_ignored",
        r"ignored in (?:the )?loss calculation|Could not find (?:response|instruction) key|"
        r"labels? (?:are|is|were) (?:all )?(?:ignored|masked|-100)|"
        r"all (?:the )?labels? (?:in your dataset )?(?:are|is) -100|labels in your dataset are -100|"
        r"tokenization mismatch: \d+ vs\. \d+",
        "TRL DataCollatorForCompletionOnlyLM (`Could not find response key ... This instance will be ignored in "
        "loss calculation.`), Unsloth (`All labels in your dataset are -100`), FastChat train.py "
        "(`WARNING: tokenization mismatch: 12 vs. 45. (ignored)`: the sample's labels all set to -100)",
    ),
    _rule(
        "empty_target",
        r"\bempty (?:targets?|labels?|responses?|answers?|completions?|sequences?)|"
        r"\bno (?:valid )?(?:target|label|response) tokens?|num_items_in_batch\W+0\b",
        "trainers warning of an empty answer",
    ),
    _rule(
        "truncation",
        r"truncat|longer than the specified maximum sequence length|"
        r"exceeds? (?:the )?(?:model'?s? )?max(?:imum)?[ _](?:length|seq)",
        "transformers tokenization_utils_base.py: `Token indices sequence length is longer than the specified "
        "maximum sequence length for this model`",
    ),
    _rule(
        "nonfinite_loss",
        r"Loss became infinite or NaN(?: at iteration=(?P<step>\d+))?|"
        r"\bloss\b(?: value)?(?: (?:is|became|was|went)|\s?[=:])\s*(?P<value>nan|inf|-inf)\b|"
        r"\bnon-?finite loss|\bloss is (?:not finite|non-?finite)|\bNaN loss\b|"
        r"\bloss (?:is )?NaN\b",
        "detectron2 engine/train_loop.py (`Loss became infinite or NaN at iteration=N!`), the DETR/DeiT/MAE "
        "engines (`Loss is nan, stopping training`), ultralytics (`non-finite loss, ending training`)",
    ),
    _rule(
        "nonfinite_grad",
        r"\bgrad(?:ient)?[ _]?norm\b\W{0,3}(?:is|was|became|=|:)?\s*(?P<value>nan|inf)\b|"
        r"\b(?:found|detected|encountered)\b\W*(?:inf|nan)(?:\s*(?:/|or|and)\s*(?:inf|nan))?s?\b"
        r"(?: values?)? in (?:the )?grad",
        "trainers that check the gradient: `grad norm is nan`, `found inf/nan in gradients`",
    ),
    _rule(
        "nonfinite_input",
        r"\b(?:inputs?|batch|data|features?|targets?|images?|samples?)\b[^.]{0,30}"
        r"\b(?:contains?|has|have|with|includes?)\b[^.]{0,12}\b(?:nan|inf)s?\b|"
        r"\b(?:nan|inf)s?\b[^.]{0,25}\bin (?:the |your )?(?:input(?!\s+tensor)|batch|dataset|"
        r"data\b|features|targets)",
        "data checks: `Input contains NaN`, `NaN in the batch` (not torch.utils.tensorboard's `NaN or Inf "
        "found in input tensor`, which is about a logged value)",
    ),
    _rule(
        "nonfinite_warning",
        r"(?:\b(?:nan|inf)\b.*\b(?:detected|found|encountered|warn\w*|error|occurred)\b|"
        r"\b(?:detected|found|encountered|warn\w*|returned|got|became|is)\b\W*(?:a\s+)?"
        r"\b(?:nan|inf)\b|non-?finite|FloatingPointError|anomaly detect)",
        "any other NaN/Inf warning",
    ),
    _rule(
        "resume",
        r"\bresum(?:e|ed|ing)\b|continuing training from|loading (?:model )?checkpoint|"
        r"loaded (?:from )?checkpoint|resume_from_checkpoint|Loading model from \S*checkpoint|"
        r"Restoring states from the checkpoint",
        "transformers trainer.py (`Continuing training from checkpoint, will skip to saved global_step`, "
        "`Loading model from out/checkpoint-500.`), Lightning (`Restoring states from the checkpoint path at`)",
    ),
    _rule(
        "restart",
        r"\brestart(?:ing|ed)?\b|restart_count|Rendezvous'ing worker group",
        "torch.distributed.elastic: `Rendezvous'ing worker group`, `restart_count`",
    ),
)
#: a line that goes on with the warning of the line just before it (TRL prints the instance between
#: `Could not find response key` and `This instance will be ignored`): one event, not two
_CONTINUES = {
    "labels_ignored": (
        re.compile(r"ignored in (?:the )?loss calculation", re.I),
        re.compile(r"Could not find (?:response|instruction) key", re.I),
    )
}
_CONTINUE_LINES = 40
#: the cue words: a line holding none of them is no event (one cheap search rejects most lines)
_CUE = re.compile(
    r"memory|OOM|NCCL|nccl|Watchdog|ECC|Xid|fallen off|NVLink|OVERFLOW|[Oo]verflow|[Ss]kipping|scale|label|ignored|"
    r"[Ee]mpty|[Nn]o (?:valid )?(?:target|label|response)|num_items|[Tt]runcat|longer than|xceed|"
    r"[Nn]a[Nn]|\b[Ii]nf\b|finite|FloatingPoint|[Aa]nomaly|[Rr]esum|[Rr]estart|Rendezvous|"
    r"[Cc]ontinuing training|checkpoint|CUBLAS|skipped|response key|instruction key|mismatch|"
    r"target size|from_logits|Gradients (?:do not exist|will be None)|trainable params|returned .?None"
)
#: a number after the words of a loss-scale line (`reducing to 32`, `loss scale: 1.0`)
_SCALE_VALUE = re.compile(
    rf"(?:to|:|=)\s*({_NUM})\s*[.,;)]?\s*$|"
    rf"(?:reducing|increasing|lowering|raising)\s+(?:loss\s+)?(?:scale\s+)?to\s*({_NUM})",
    re.I,
)
TEXT_MAX = 120
_FLOAT_KEYS = ("scale", "attempted")
_INT_KEYS = ("count", "step", "output", "from_step")
#: the groups that say a scale under another name (`scale_kept`: hysteresis keeps the attempted scale)
_SCALE_ALIASES = ("scale_kept", "scale_set", "scale_to")
#: the groups that name the loss scaler whose wording matched (`scaler`)
_SCALERS = ("deepspeed",)
#: the groups of a `bug_warning` line: the cause it names (the event's `cause`), and whether it says so of
#: a part only (`partial`: TF's "Gradients do not exist for variables [...]" names some variables, often a
#: head or pooler left out on purpose; checkpointing's warning is about one block's inputs)
BUG_GROUPS = {
    "loss_broadcast": ("loss_broadcast", False),
    "softmax_before_loss": ("softmax_before_loss", False),
    "frozen_model": ("frozen_model", False),
    "frozen_part": ("frozen_model", True),
}
_FROM_STEP = re.compile(r"checkpoint[-_ ](\d+)\b|global_step[-_ ]?(\d+)\b", re.I)


def read(line: str) -> tuple[str, dict[str, Any]] | None:
    """(kind, values) of one clean line, or None: the first rule of `RULES` that matches and keeps it."""
    if _CUE.search(line) is None:
        return None
    for rule in RULES:
        m = rule.pattern.search(line)
        if m is None:
            continue
        values = _values(m)
        if rule.kind in ("overflow", "loss_scale") and "scale" not in values:
            v = _scale_after(line)
            if v is not None:
                values["scale"] = v
        if rule.kind == "resume":
            f = _FROM_STEP.search(line)
            if f is not None:
                values["from_step"] = int(f.group(1) or f.group(2))
        if rule.keep is not None and not rule.keep(values):
            continue  # a counter of 0: nothing happened (a later rule may still read the line)
        return rule.kind, values
    return None


def _values(m: re.Match[str]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for k, v in m.groupdict().items():
        if v is None:
            continue
        if k in _SCALERS:
            out["scaler"] = k
            continue
        if k in BUG_GROUPS:
            out["cause"], partial = BUG_GROUPS[k]
            if partial:
                out["partial"] = True
            continue
        if k in _SCALE_ALIASES:
            k = "scale"
        try:
            if k in _FLOAT_KEYS:
                out[k] = float(v)
            elif k in _INT_KEYS:
                out[k] = int(v)
            elif k == "value":
                out[k] = v.lower()
            else:
                out[k] = v
        except ValueError:
            continue
    return out


def _scale_after(line: str) -> float | None:
    for m in _SCALE_VALUE.finditer(line):
        try:
            return float(m.group(2) or m.group(1))
        except (TypeError, ValueError):
            continue
    return None


def classify(line: str) -> str | None:
    """The event kind of one clean line, or None."""
    hit = read(line)
    return None if hit is None else hit[0]


def scale_in(line: str) -> float | None:
    """The loss scale a loss-scale or overflow line sets (the value it reduces/raises to), else None."""
    hit = read(line)
    if hit is not None and "scale" in hit[1] and hit[0] != "loss_scale_min":
        return float(hit[1]["scale"])
    return _scale_after(line)


class RowSteps(Protocol):
    """The step of each row, in reading order (`steps[i]`: row i's): a list, or a view that
    computes it (`sources.stdout._OrdinalSteps`)."""

    def __len__(self) -> int: ...

    def __getitem__(self, i: int, /) -> float: ...


class Events:
    """Events read so far: (line number, kind, text, the row index they came after), and the values
    each carries (`values[i]` for item i: scale, count, op, step...)."""

    def __init__(self) -> None:
        self.items: list[tuple[int, str, str, int]] = []
        self.values: dict[int, dict[str, Any]] = {}
        self.hints = Hints()

    def add(self, line_no: int, kind: str, text: str, row_index: int, values: dict[str, Any] | None = None) -> None:
        """Keep one event; `values` default to what the table reads from the full line (before the
        text is cut to TEXT_MAX)."""
        if len(self.items) >= _MAX_EVENTS:
            return
        if values is None:
            hit = read(text)
            values = hit[1] if hit is not None else {}
        if values:
            self.values[len(self.items)] = values
        self.items.append((line_no, kind, text[:TEXT_MAX], row_index))

    def scan(self, line_no: int, text: str, row_index: int) -> str | None:
        """Classify `text`; keep it when it is an event. Returns its kind."""
        self.hints.scan(text)
        hit = read(text)
        if hit is None:
            return None
        kind, values = hit
        if not self._continues(kind, text, line_no, row_index):
            self.add(line_no, kind, text, row_index, values)
        return kind

    def _continues(self, kind: str, text: str, line_no: int, row_index: int) -> bool:
        """The line goes on with the last event's warning (same kind, no row between, a few lines on)."""
        pair = _CONTINUES.get(kind)
        if pair is None or not self.items or pair[0].search(text) is None or pair[1].search(text) is not None:
            return False
        last_line, last_kind, last_text, last_row = self.items[-1]
        return (
            last_kind == kind
            and last_row == row_index
            and line_no - last_line <= _CONTINUE_LINES
            and pair[1].search(last_text) is not None
        )

    def record(self, i: int) -> dict[str, Any]:
        """Item i as it is filed under its step: {"kind", "line", "text", and its values}."""
        line_no, kind, text, _ = self.items[i]
        return {"kind": kind, "line": line_no, "text": text, **self.values.get(i, {})}

    def place(self, steps: RowSteps) -> dict[int, list[dict[str, Any]]]:
        """{step: [event, ...]}; `steps[i]` is the step of row i (the rows in reading order). An
        event belongs to the step its line names, else to the last row read before it, or the first
        row when none was."""
        out: dict[int, list[dict[str, Any]]] = {}
        if not steps:
            return out
        for i, (_, _, _, idx) in enumerate(self.items):
            rec = self.record(i)
            step = rec.get("step")
            if not isinstance(step, int):
                step = int(steps[idx - 1] if idx > 0 else steps[0])
            out.setdefault(int(step), []).append(rec)
        return out

    def series(self, steps: RowSteps) -> dict[str, dict[int, float]]:
        """The counters the events carry, as series at their step: `scale` (the loss scale an overflow
        or loss-scale line sets), `skipped_in_interval` (overflows: one skipped step each; a skip
        counter: its count)."""
        out: dict[str, dict[int, float]] = {"scale": {}, "skipped_in_interval": {}}
        for step, recs in self.place(steps).items():
            for r in recs:
                if r["kind"] in ("overflow", "loss_scale") and isinstance(r.get("scale"), float):
                    out["scale"][step] = r["scale"]  # the last one read at the step
                if r["kind"] == "overflow" and "total" not in r:
                    out["skipped_in_interval"][step] = out["skipped_in_interval"].get(step, 0.0) + 1.0
                elif r["kind"] == "skip_count":
                    out["skipped_in_interval"][step] = out["skipped_in_interval"].get(step, 0.0) + r["count"]
        return {k: v for k, v in out.items() if v}


#: at most this many events are kept (a log printing a warning on every step stays bounded)
_MAX_EVENTS = 20_000

_PRECISION = (
    (
        "fp16",
        re.compile(
            r"--fp16\b(?!\s*(?:=\s*)?(?:false|False|0)\b)|\bfp16\W{0,3}[:=]\s*(?:true|True|1)\b|"
            r"\"fp16\":\s*\{\s*\"enabled\":\s*true|torch_dtype\W+(?:torch\.)?float16\b|"
            r"\bmixed_precision\W+fp16\b|\bprecision\W+16(?:-mixed)?\b|\bamp_dtype\W+(?:torch\.)?float16\b|"
            # Lightning's `Using 16bit Automatic Mixed Precision (AMP)` / `Using native 16bit
            # precision.`, apex's `Selected optimization level O1`, `amp=True` (ultralytics,
            # timm's --amp: torch.cuda.amp with a GradScaler, fp16), `dtype: float16`
            r"Using (?:native )?16[- ]?bit|Selected optimization level O[123]\b|"
            r"(?:^|(?<=[\s,(]))(?:--)?(?:use_)?amp\b(?:\s*[:=]\s*(?:true|True|1)\b|(?=\s+--|\s*$))|"
            r"\bdtype\W{1,4}(?:torch\.)?float16\b|Mixed precision type: fp16\b"
        ),
    ),
    (
        "bf16",
        re.compile(
            r"--bf16\b(?!\s*(?:=\s*)?(?:false|False|0)\b)|\bbf16\W{0,3}[:=]\s*(?:true|True|1)\b|"
            r"\"bf16\":\s*\{\s*\"enabled\":\s*true|torch_dtype\W+(?:torch\.)?bfloat16\b|"
            r"\bmixed_precision\W+bf16\b|\bprecision\W+bf16(?:-mixed)?\b|Using bfloat16 Automatic Mixed Precision|"
            r"\b(?:amp_)?dtype\W{1,4}(?:torch\.)?bfloat16\b|Mixed precision type: bf16\b"
        ),
    ),
)
_HINT_CUE = re.compile(
    r"16|amp\b|AMP|optimization level|num_labels|num_classes|n_classes|vocab_size|SFT|[Ss]ft|[Pp]re-?train|[Cc]lassif"
    r"|--lr|--learning|Namespace\(|[Ww]arm"
)
_NUM = r"(\d+(?:\.\d*)?(?:[eE][-+]?\d+)?|\.\d+(?:[eE][-+]?\d+)?)"
#: the LR a run was started with, as its command line or its printed argparse namespace says it
#: (`python3 mnist.py --lr=100000`, `Namespace(batch_size=64, lr=0.01, ...)`): the configured LR, read
#: only where no LR is logged per step
_CONFIG_LR = (
    re.compile(r"(?:^|\s)--(?:lr|learning[-_]rate)(?:=|\s+)" + _NUM + r"(?![\w.])"),
    re.compile(r"\bNamespace\(.*?\b(?:lr|learning_rate)=" + _NUM + r"(?![\w.])"),
)
_SIZE = (
    ("n_classes", re.compile(r"\b(?:num_labels|num_classes|n_classes|nb_classes)\W{1,4}(\d{1,7})\b")),
    ("vocab_size", re.compile(r"\b(?:vocab_size|padded_vocab_size|n_vocab)\W{1,4}(\d{1,8})\b")),
    # the LR's warm-up, in steps (VideoMAE's `Set warmup steps = 86135`, HF's `warmup_steps=500`)
    ("warmup_steps", re.compile(r"\bwarm[-_ ]?up[-_ ]steps\W{1,4}(\d{1,9})\b", re.IGNORECASE)),
)
_TASK = (
    ("sft", re.compile(r"\bSFTTrainer\b|\bsft\b|supervised fine-?tun", re.I)),
    ("pretrain", re.compile(r"\bpre-?train(?:ing)?\b", re.I)),
    ("classification", re.compile(r"ForSequenceClassification|ForImageClassification|\bclassification\b", re.I)),
)


#: the keys `Hints` can fill: once all are found, no more lines are scanned
_HINT_KEYS = 2 + len(_SIZE) + 1  # precision, task_hint, the sizes, config_lr


class Hints:
    """What the text says about the run itself: precision, task, number of classes, vocabulary."""

    def __init__(self) -> None:
        self.meta: dict[str, Any] = {}

    def scan(self, text: str) -> None:
        if _HINT_CUE.search(text) is None or len(self.meta) >= _HINT_KEYS:
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
        if "config_lr" not in self.meta:
            for pattern in _CONFIG_LR:
                m = pattern.search(text)
                if m is not None and float(m.group(1)) > 0:
                    self.meta["config_lr"] = float(m.group(1))
                    break
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
