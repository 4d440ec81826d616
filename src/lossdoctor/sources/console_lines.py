"""Line patterns of training consoles, each a small function over one clean segment.

- `hf_dict`: what the Hugging Face Trainer (and Axolotl, LLaMA-Factory, Unsloth, TRL on top of it)
  prints every `logging_steps`: a Python dict repr, `{'loss': 2.3456, 'grad_norm': nan,
  'learning_rate': 5e-05, 'epoch': 0.1}`, or with quoted values in newer versions (`{'loss':
  '2.346', ...}`). Parsed by a small pattern over `'key': value` items, never evaluated.
- `tqdm_bar`: a tqdm progress bar, `Epoch 0:  45%|####  | 45/100 [00:10<00:12, 4.5it/s, loss=2.31,
  lr=1e-4]`: its step counter and the metrics of its postfix (`set_postfix`) and description.
- `key_values`: any line whose fields are a name and a number with any separator (`key: v`,
  `key=v`, `key v`, `| key: v |`). Names are read with the same table as every tabular log
  (`columns.column_for`), so nanoGPT's `iter 100: loss 2.3456`, litgpt's `iter 12 step 3: loss ...`,
  mlx-lm's `Iter 10: Train loss 2.345, Learning Rate 1.000e-05` and torchtitan's `step: 1  loss:
  8.1661  grad_norm: 3.6855` all come out of one function, and so does a trainer nobody listed.
  Evaluation fields (`val loss`) are never taken for the training loss.
- `dialect`: the name of the tool whose print format a key-value line follows, for the notes.
"""

from __future__ import annotations

import math
import re
from typing import Any

from ..records import FILLED_NONFINITE, MSVC_NONFINITE, text_number, to_float
from . import text_slots
from .columns import LABEL_COLUMNS, SIDE_COLUMNS, column_for, normalise, step_number, step_rank
from .text_slots import TRAIN_WORD, averaged_beside

#: the columns a console line can fill
METRICS = ("loss", "grad_norm", "lr", "scale")

#: a number, possibly with a unit glued to it (`120.50ms`, `2.47GiB`); `nan`/`inf` as whole words
_NUMBER = re.compile(
    r"(?<![\w.])(?:"
    + MSVC_NONFINITE
    + r"(?![\w.])|"
    + FILLED_NONFINITE
    + r"(?![\w.])|[-+]?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][-+]?\d+)?(?![\d.])|"
    r"[-+]?(?:infinity|nan|inf)(?![\w.]))",
    re.IGNORECASE,
)
NUMBER = _NUMBER
#: up to three words right before a number, with only separators between them and the number
#: (a closing bracket may follow the name: loguru-style `| [Loss] 0.52 | [step] 89 |`)
#: (or a call's parenthesis or an arrow: `grad_norm(1.23)`, `loss -> 2.31`)
_KEY = re.compile(r"([A-Za-z_][\w./-]*(?:[ \t]+[A-Za-z_][\w./-]*){0,2})[\s'\"]*\]?[\s'\"]*(?:[:=(]|->)?[\s'\"]*$")
#: the same name with a list opened before the number: `lr: [0.0001]` (a scheduler's `get_last_lr()`,
#: one value per parameter group, printed as is); the first group's value is read, and only for a metric
#: (a counter in brackets, `Epoch: [3]`, is the epoch-batch patterns' to read)
_KEY_LISTED = re.compile(r"([A-Za-z_][\w./-]*(?:[ \t]+[A-Za-z_][\w./-]*){0,2})[\s'\"]*(?:[:=]|->)[\s'\"]*\[[\s'\"]*$")
_INT = re.compile(r"\+?\d+$")
_EVAL_WORDS = {"val", "vali", "valid", "validation", "eval", "evaluation", "test", "dev", "predict"}
#: names console prints use that the tabular table does not hold
_EXTRA = {
    "loss train": ("loss", 1),
    "train loss": ("loss", 1),
    "num_updates": ("step", 2),
    "iter_num": ("step", 6),
    "global step": ("step", 0),
    "update": ("step", 8),
    "reduced_train_loss": ("loss", 1),
    "tr.loss": ("loss", 1),
    "losses": ("loss", 2),
}
#: names read only when they are the whole name in front of the number: llm.c's `| norm 1.2345 |`
#: is the gradient norm (`weight norm` is not), and `epoch: 3` is an epoch counter (used as the step
#: only when a log has nothing finer, see `stdout`)
_ALONE = {
    "norm": ("grad_norm", 2),
    "epoch": ("epoch", 0),
    # llm.c's `main.log` (train_gpt2.cu's logger, kept by modded-nanogpt): `s:%d trl:%.4f lr:%.6f
    # norm:%.2f` for a training step, `s:%d tel:%.4f` for a validation loss
    "s": ("step", 20),
    "trl": ("loss", 1),
    "tel": ("eval_loss", 1),
}
#: the plain counters (`step`, `iteration`, `iter`, `it`): when a line prints two of them, the one
#: with the larger value is the finer one (litgpt's `iter 1152 step 144`: micro-batches and optimizer
#: steps; each line is one micro-batch's loss)
_PLAIN_RANKS = [r for r in map(step_rank, ("step", "iteration", "iter", "it")) if r is not None]
_PLAIN_COUNTERS = (_PLAIN_RANKS[0], max(_PLAIN_RANKS))
_cache: dict[str, tuple[str, int] | None] = {}


#: how much a loss name read by its tail only (`Loc Loss` as `loss`) ranks below the bare name; a
#: `current` one less (it ranks before an average's `avg loss`, which ranks as `_QUALIFIED`)
_QUALIFIED = 2
_CURRENT = 1


#: words that say an accuracy is the training batch's or interval's own (`Iter acc`, `Train acc`, `Batch
#: acc`); an evaluation word rejects the number before this is asked
_TRAIN_QUALIFIERS = frozenset({"iter", "batch", "train", "training", "step", "epoch", "avg", "mean", "running"})


def _side_named(col: str, qualifier: list[str]) -> bool:
    """Whether a side column's name stands alone (`reward 0.4`), or an accuracy's or error rate's is
    qualified by training words only (`Iter acc 0.0`)."""
    return not qualifier or col in LABEL_COLUMNS and _TRAIN_QUALIFIERS.issuperset(qualifier)


def classify(key: str) -> tuple[str, int] | None:
    """(column or "step", rank) for the words in front of a number; None for anything else,
    including evaluation metrics. The longest known tail of the words wins (`Train loss` -> loss,
    `ms lr` -> lr), and an evaluation word in it rejects the number (`val loss`)."""
    hit = _cache.get(key, False)
    if hit is not False:
        return hit  # type: ignore[return-value]
    words = [w.rstrip(".") if w[:-1].rstrip(".") in text_slots.ABBREVIATIONS else w for w in key.lower().split()]
    hit = None
    for k in range(len(words), 0, -1):
        tail = words[-k:]
        if _EVAL_WORDS.intersection(tail) or any(
            w.startswith(("val_", "eval_", "val/", "eval/", "test_", "val.", "valid_", "validation_")) for w in tail
        ):
            if "loss" in tail[-1] or tail[-1].endswith(("_loss", "/loss")):
                hit = ("eval_loss", 1)  # `val loss 2.41`: kept apart, never the training loss
            break
        name = " ".join(tail)
        if k == len(words) and name in _ALONE:
            hit = _ALONE[name]
            break
        if name in _EXTRA:
            hit = _EXTRA[name]
            break
        r = step_rank(name)
        if r is not None:
            hit = ("step", r)
            break
        col = column_for(name)
        if col is not None and (col[0] in METRICS or col[0] in SIDE_COLUMNS and _side_named(col[0], words[:-k])):
            # a loss named by a qualifier the table does not know (`Loc Loss`, `Cls Loss`) is a part
            # of the loss more often than the total: it ranks below a named total (`Tot Loss`)
            # (`Current Loss` beside `Average Loss`, Speech-Transformer's: the step's value before a mean)
            if col[0] == "loss" and k < len(words):
                hit = (col[0], col[1] + (_CURRENT if words[-k - 1] in ("cur", "current") else _QUALIFIED))
            else:
                hit = col
            break
    if len(_cache) > 4096:
        _cache.clear()
    _cache[key] = hit
    return hit


#: deeplearning4j's ScoreIterationListener, `log.info("Score at iteration {} is {}", iteration, score)`: its
#: score is the network's loss (Java spells the non-finite ones `NaN` and `Infinity`); `score` alone names a
#: metric in other tools, so only this sentence is read as a loss
_DL4J_SCORE = re.compile(r"\bScore at iteration (\d+) is (-?(?:\d+(?:\.\d*)?(?:[eE][-+]?\d+)?|NaN|Infinity|nan|inf))\b")


def key_values(text: str) -> dict[str, Any] | None:
    """{'step': N or None, 'loss': ..., '_dialect': ...} for a line with at least one training
    metric, else None. The best-ranked name wins when two fields map to the same column (`step`
    over `iter`).

    A log repeats one line shape thousands of times. Lines that differ only in their digits have
    their numbers at the same places (the number pattern sees a digit only as a digit), so the
    line with its digits zeroed keys a cached plan: which characters hold which column. Only a new
    shape is read word by word."""
    dl4j = _DL4J_SCORE.search(text) if "Score at iteration" in text else None
    if dl4j is not None:
        return {"step": int(dl4j.group(1)), "loss": text_number(dl4j.group(2)), "_dialect": "deeplearning4j"}
    plan = _plans.get(text.translate(_ZERO_DIGITS))
    if plan is None:
        plan = _plan(text)
        if len(_plans) > 4096:
            _plans.clear()
        _plans[text.translate(_ZERO_DIGITS)] = plan
    fields, name = plan
    if not fields:
        return None
    row: dict[str, Any] = {"step": None, "_dialect": name}
    counters: list[tuple[int, int]] = []  # (rank, value) of every step counter on the line
    for col, start, end, rank in fields:
        value = text[start:end]
        if col == "step" or col == "epoch":
            if _INT.match(value):
                if col == "epoch":
                    row["_epoch"] = int(value)
                else:
                    counters.append((rank, int(value)))
        elif col[0] == "_":  # `_c:NAME`: a component loss (`aux_loss 0.01`), kept apart from the total
            row.setdefault("_components", {})[col[3:]] = text_number(value)
        else:
            row[col] = text_number(value)
    if counters:
        row["step"] = _pick_step(counters)
        if len(counters) > 1 and row["step"] != min(counters)[1]:
            row["_finer_counter"] = True
    eb = epoch_batch_step(text) if "[" in text else None
    if eb is not None:  # the batch within an epoch, counted on from the epochs before
        row["step"] = eb
        row.pop("_epoch", None)
        row.pop("_finer_counter", None)
    return row


def plan_fields(text: str) -> tuple[tuple[str, int, int, int], ...]:
    """(column, start, end, rank) of the numbers `key_values` reads from `text` (its cached plan)."""
    plan = _plans.get(text.translate(_ZERO_DIGITS))
    return plan[0] if plan is not None else _plan(text)[0]


#: an epoch counter followed by the batch within it: mmengine `Epoch(train)  [2][ 50/788]` and mmcv
#: `Epoch [1][100/62598]` (epochs and iterations from 1); timm `Train: 0 [  50/1251 (  4%)]`
#: (`f'Train: {epoch} [{update_idx:>4d}/{updates_per_epoch} ...]'`, both from 0); and the iteration-based
#: runners' `Iter(train) [  50/80000]` (mmengine) and `Iter [50/80000]` (mmcv), whose counter is the step
_EPOCH_BATCH = re.compile(
    r"\bEpoch(?:\(train\))?\s*\[(\d+)\]\s*\[\s*(\d+)\s*/\s*(\d+)\s*\]"
    r"|^Train:\s*(\d+)\s*\[\s*(\d+)\s*/\s*(\d+)\b"
    r"|^(?:Epoch:\s*\[(\d+)\]\s+)?\[\s*(\d+)\s*/\s*(\d+)\]\s+eta:"
    r"|\bIter(?:\(train\))?\s*\[\s*(\d+)\s*/\s*\d+\s*\]"
)
#: torchvision's / DETR's / DeiT's `MetricLogger.log_every`: `"  ".join([header, "[{0:>N}/{1}]", "eta:
#: {eta}", "{meters}", ...])` with the header `Epoch: [{epoch}]` (epochs and batches from 0)


def epoch_batch_step(text: str) -> int | None:
    """The optimizer steps done at a line that counts batches within epochs, else None."""
    m = _EPOCH_BATCH.search(text)
    if m is None:
        return None
    if m.group(1) is not None:
        epoch, batch, per_epoch = int(m.group(1)), int(m.group(2)), int(m.group(3))
        return (max(epoch, 1) - 1) * per_epoch + batch
    if m.group(10) is not None:
        return int(m.group(10))
    if m.group(4) is not None:
        epoch, batch, per_epoch = int(m.group(4)), int(m.group(5)), int(m.group(6))
        return epoch * per_epoch + batch + 1
    epoch, batch, per_epoch = int(m.group(7) or 0), int(m.group(8)), int(m.group(9))
    return epoch * per_epoch + batch


def _pick_step(counters: list[tuple[int, int]]) -> int:
    """An explicit global step beats everything; between plain counters (`iter N step K`) the
    larger value is the finer counter; else the best-ranked name."""
    best = min(counters)
    lo, hi = _PLAIN_COUNTERS
    if best[0] < lo:
        return best[1]
    plain = [v for r, v in counters if lo <= r <= hi]
    return max(plain) if plain else best[1]


_ZERO_DIGITS = str.maketrans("123456789", "000000000")

#: text_slots' evaluation word standing alone (one definition), and TF Estimator's evaluation results line
EVAL_WORD = re.compile(text_slots.EVAL_ALONE + r"|Saving dict for global step", re.IGNORECASE)


def eval_before(text: str, at: int) -> bool:
    """An evaluation word before position `at` of a line, and no training word between them: the
    number there is an evaluation's (`Epoch 3, validation: loss 2.40`, `[eval] step 40 loss 2.3`).
    Decided once per line shape (the plan is cached), so it costs nothing per line."""
    last = None
    for m in EVAL_WORD.finditer(text, 0, at):
        last = m
    return last is not None and TRAIN_WORD.search(text, last.end(), at) is None


_plans: dict[str, tuple[tuple[tuple[str, int, int, int], ...], str]] = {}


#: the rank of a counter that stands between a loss's name and its value (after every named counter)
_STEP_RANK_COUNTED = 50
#: a loss's name, a whole number, then (spaces or a colon between) the value: the whole number counts
_COUNTED_GAP = re.compile(r"\s*:?\s*$")


def _counted_value(
    text: str, m: re.Match[str], nxt: re.Match[str] | None, hit: tuple[str, int] | None
) -> re.Match[str] | None:
    """The loss's own number when a whole number stands between its name and it (NVIDIA tacotron2's
    `Train loss 120 0.512345`, `Validation loss 6312:  0.149928`), else None."""
    if nxt is None or not m.group(0).isdigit() or "." not in nxt.group(0) and nxt.group(0).isdigit():
        return None
    if _COUNTED_GAP.match(text, m.end(), nxt.start()) is None:
        return None
    return nxt if hit is not None and hit[0] in ("loss", "eval_loss") else None


def _plan(text: str) -> tuple[tuple[tuple[str, int, int, int], ...], str]:
    """((column, start, end, rank)...) of the numbers a line's names point at, and its dialect;
    empty when it names no training metric. Every step counter is kept (`key_values` picks one by
    value); for any other column the best-ranked name."""
    best: dict[str, tuple[int, int, int]] = {}
    steps: list[tuple[str, int, int, int]] = []
    trained: tuple[int, int, int] | None = None  # a loss the line names the training one (`train_loss`)
    prev = 0
    numbers = list(_NUMBER.finditer(text))
    for i, m in enumerate(numbers):
        piece = text[prev : m.start()]
        prev = m.end()
        km = _KEY.search(piece)
        if km is None:
            km = _KEY_LISTED.search(piece)
            if km is None or (classify(km.group(1)) or ("step",))[0] in ("step", "epoch"):
                continue
        hit = classify(km.group(1))
        counted = _counted_value(text, m, numbers[i + 1] if i + 1 < len(numbers) else None, hit)
        if counted is not None:  # tacotron2's `Validation loss 6312:  0.149928`: the step, then the value
            steps.append(("step", m.start(), m.end(), _STEP_RANK_COUNTED))
            m = counted
        if hit is None:
            name = km.group(1).split()[-1]
            if _COMPONENT_KEY.match(name) and not EVAL_WORD.search(name) and not name.startswith(("val", "eval")):
                best.setdefault("_c:" + name, (0, m.start(), m.end()))
            continue
        col, rank = hit
        if col == "loss" and _TRAIN_NAMED.match(km.group(1)):
            trained = (rank, m.start(), m.end())
        if col == "step":
            steps.append(("step", m.start(), m.end(), rank))
        elif col not in best or rank < best[col][0]:
            best[col] = (rank, m.start(), m.end())
    parts = [k[3:] for k in best if k.startswith("_c:")]
    for name in parts:  # OpenRLHF's `gpt_loss=2.31, loss_mean=2.41`: the mean is no part of the loss
        if averaged_beside(name, [p for p in parts if p != name]):
            del best["_c:" + name]
    if trained is not None and "loss" in best and best["loss"] != trained:
        # a bare `loss` beside a `train_loss` is the other one: DeepICF's `loss = 0.25 [54.1s] train_loss
        # = 0.32` prints its test loss bare (the training one is named so because another is not)
        best.setdefault("eval_loss", best["loss"])
        best["loss"] = trained
    if "loss" in best and eval_before(text, best["loss"][1]):
        loss = best.pop("loss")  # `Epoch 3, validation: loss 2.40`: an evaluation's loss, no training loss
        best.setdefault("eval_loss", loss)
    if not any(c in best for c in METRICS) and "eval_loss" not in best:
        return (), ""
    return tuple(steps) + tuple((col, a, b, r) for col, (r, a, b) in best.items()), dialect(text)


#: a loss name that says it is the training one
_TRAIN_NAMED = re.compile(r"(?:train|training|tr)[\s_.-]*loss\b", re.IGNORECASE)


#: a line of `name: number` pairs and nothing else (separators aside): `rpn_cls: 0.5280, rpn_box: nan, rcnn_box 0.0000`
_TERM = re.compile(r"([A-Za-z_][\w./-]*)\s*[:=]?\s*([-+]?(?:\d+(?:\.\d*)?(?:[eE][-+]?\d+)?|nan|inf))(?![\w.])", re.I)
_TERM_GAPS = re.compile(r"[\s,;|]*")


def term_line(text: str) -> dict[str, float] | None:
    """{name: value} of a line made only of named numbers (two or more), else None: the per-term line
    some trainers print indented under their step line (jwyang's faster-rcnn.pytorch: `[session 1][epoch
    1][iter 100] loss: nan, lr: 1.00e-03`, then `\t\t\trpn_cls: 0.5280, rpn_box: nan, rcnn_cls: ...`)."""
    terms: dict[str, float] = {}
    pos = 0
    for m in _TERM.finditer(text):
        if _TERM_GAPS.fullmatch(text, pos, m.start()) is None:
            return None
        terms[m.group(1)] = to_float(m.group(2))
        pos = m.end()
    if len(terms) < 2 or _TERM_GAPS.fullmatch(text, pos) is None:
        return None
    return terms


def sums_to(terms: dict[str, float], total: float) -> bool:
    """The terms add up to the printed total, within what the prints' rounding allows."""
    values = list(terms.values())
    if not all(math.isfinite(v) for v in values) or not math.isfinite(total):
        return False
    return abs(sum(values) - total) <= max(1e-3 * abs(total), 1e-4 * len(values))


# --- Hugging Face Trainer dicts ---------------------------------------------------------------

_HF_ITEM = re.compile(r"'([^'\\]{1,120})'\s*:\s*('(?:[^'\\]|\\.){0,200}'|\"[^\"]{0,200}\"|[^,{}]{1,200})")
_NOT_TRAINING = ("eval_", "test_", "predict_", "train_runtime")


def hf_dict(text: str) -> dict[str, Any] | None:
    """None when the segment holds no `{'key': ...}` dict; {} for a dict that is not a training
    step (evaluation, the final `train_runtime` summary); else the row (`step` None unless the dict
    names one)."""
    i = text.find("{'")
    if i < 0:
        i = text.find("{ '")
        if i < 0:
            return None
    j = text.rfind("}")
    if j < i:
        return None
    items = _HF_ITEM.findall(text, i + 1, j)
    if not items:
        return None
    keys = [k for k, _ in items]
    if any(k.startswith(_NOT_TRAINING) for k in keys):
        return {}
    row: dict[str, Any] = {}
    ranks: dict[str, int] = {}
    for key, raw in items:
        hit = _dict_key(key)
        if hit is None and not _COMPONENT_KEY.search(key):
            continue
        value = raw.strip().strip(_EMPHASIS)  # a paste's Markdown bold around the value: `'loss': **4.7581**`
        if value[:1] in "'\"":
            value = value[1:-1]
        elif value[:1].isalpha():
            value = _WRAPPED.sub("", value)  # `tensor(2.31, device=...)`, `np.float32(2.3)`: the number inside
        said = _said_number(value)
        if hit is None:  # `'loss_dict': {'loss_cls': tensor(0.3)...}`: a component, kept apart from the total
            if said is not None:
                row.setdefault("_components", {})[key] = said
            continue
        col, rank = hit
        if col == "step":
            v = step_number(value)
            if v == v and v >= 0:
                row["step"] = int(v)
            continue
        if col == "epoch":
            row["epoch"] = to_float(value)
            continue
        if said is not None and (col not in ranks or rank < ranks[col]):
            row[col], ranks[col] = said, rank  # (a value that is no number is no NaN: not read)
    if not any(c in row for c in METRICS):
        return {}
    if "step" not in row:
        m = _STEP_BEFORE.search(text, 0, i)  # `iteration : 120, losses : {...}`: the counter printed before it
        row["step"] = int(m.group(1)) if m is not None else None
    return row


_HF_EVAL_LOSS = re.compile(r"'eval_loss'\s*:\s*'?([-+]?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][-+]?\d+)?|nan|inf)", re.I)


def hf_eval_loss(text: str) -> float | None:
    """The `eval_loss` of an HF Trainer evaluation dict, else None."""
    m = _HF_EVAL_LOSS.search(text)
    return float(m.group(1)) if m is not None else None


#: a component loss's key (`loss_cls`, `loss_bbox`, `aux_loss`, `z_loss`)
_COMPONENT_KEY = re.compile(r"^(?:loss_\w+|\w+_loss|aux\w*|z_?loss\w*)$")

#: a value printed through a wrapper: `tensor(2.31`, `np.float32(2.3`, `array(0.5` (the item pattern
#: stops at the comma after the number)
#: Markdown emphasis a paste puts around a dict's value
_EMPHASIS = "*`"


def _said_number(value: str) -> float | None:
    """The number a dict's value spells (NaN/Inf only when it says so), None for any other text."""
    v = to_float(value)
    return v if v == v or value.lower().lstrip("+-") in ("nan", "inf") else None


_WRAPPED = re.compile(r"^(?:(?:torch\.)?tensor|(?:np\.|numpy\.)?(?:float|int)(?:16|32|64)|array)\(\s*|\)+$")
#: a step counter printed in front of a dict
_STEP_BEFORE = re.compile(r"\b(?:global[_ ]step|step|steps|iteration|iter|it)\s*[:=]?\s*(\d+)\b", re.IGNORECASE)


_dict_keys: dict[str, tuple[str, int] | None] = {}


def _dict_key(key: str) -> tuple[str, int] | None:
    """("step" | "epoch" | a metric column, rank) of a dict key, cached (a log repeats its keys)."""
    if key in _dict_keys:
        return _dict_keys[key]
    r = step_rank(key)
    hit = column_for(key)
    if r is not None:
        out: tuple[str, int] | None = ("step", r)
    elif hit is not None and (hit[0] in METRICS or hit[0] in SIDE_COLUMNS):  # RL rewards, TRL's rewards/logps too
        out = hit
    elif normalise(key) == "epoch":
        out = ("epoch", 0)
    else:
        out = None
    if len(_dict_keys) > 4096:
        _dict_keys.clear()
    _dict_keys[key] = out
    return out


# --- tqdm ----------------------------------------------------------------------------------

#: `45/100 [00:10<00:12, 4.5it/s, loss=2.31]` or, without a total, `45it [00:10, 4.5it/s, loss=2.31]`
_BAR = re.compile(r"(?<![\w.])(\d+)(?:/(\d+|\?))?(?:[A-Za-z]{1,12})?\s*\[((?:\d+:)?\d+:\d\d(?:<[^,\]]*)?[^\]]*)\]")
_POSTFIX = re.compile(r"([A-Za-z_][\w./ -]{0,60}?)\s*=\s*([^,\]=]+)")
_EPOCH = re.compile(r"\bEpoch\s+(\d+)", re.IGNORECASE)


#: a description that opens with its own counters, unnamed, joined by `|` before the loss's name (torchtune's
#: `f"{curr_epoch + 1}|{self.global_step}|Loss: {loss_to_log}"`): the epoch, then the step
_DESC_COUNTERS = re.compile(r"(?<![\w.|])(\d+)\|(\d+)\|\s*[A-Za-z]")


#: the batch's own loss in a Lightning bar, beside `loss=` (Lightning 1.x's progress bar adds `loss`,
#: the running mean of the last 20 batches, `fit_loop.running_loss.mean()`): the value, not the mean
#: (NeMo's Megatron models log theirs as `reduced_train_loss`, the step's loss averaged over ranks)
_BATCH_LOSS_KEYS = frozenset({"train_loss", "train_loss_step", "reduced_train_loss"})


def tqdm_bar(text: str) -> tuple[int, int | None, dict[str, Any], int] | None:
    """(counter, total or None, metrics of the postfix and description, where the bar ends) of a
    progress bar. Text after the bar is another line glued to it: a log line printed while the bar
    had no newline yet."""
    m = _BAR.search(text)
    if m is None:
        return None
    n = int(m.group(1))
    total = int(m.group(2)) if m.group(2) and m.group(2) != "?" else None
    metrics: dict[str, Any] = {}
    ranks: dict[str, int] = {}
    for key, value in _POSTFIX.findall(m.group(3)):
        hit = classify(key.strip())
        if hit is None:
            continue
        v = to_float(value.strip())
        if hit[0] == "epoch":
            continue
        if hit[0] == "step":  # NeMo's `global_step=99.0`: the trainer's own step beats the bar's counter
            if v == v and v >= 0 and v == int(v):
                metrics["_step"] = int(v)
            continue
        rank = -1 if hit[0] == "loss" and key.strip() in _BATCH_LOSS_KEYS else hit[1]
        if hit[0] not in ranks or rank < ranks[hit[0]]:
            metrics[hit[0]], ranks[hit[0]] = v, rank
            if hit[0] == "loss":
                metrics["_loss_key"] = key.strip()  # the name the bar prints its loss under (`avr_loss`)
    desc = text[: m.start()]
    cut = desc.find("%|")
    if cut >= 0:
        desc = desc[:cut]
    if desc:
        found = key_values(desc) or {}
        for col in METRICS:
            if col in found and col not in metrics:
                metrics[col] = found[col]
        own = found.get("step")
        if own is None and (c := _DESC_COUNTERS.search(desc)) is not None:
            own = int(c.group(2))
        if own is not None and "_step" not in metrics and metrics:
            metrics["_step"] = own  # the step the description's loss is of, not how far the bar got
        e = _EPOCH.search(desc)
        if e and total:
            metrics["_epoch"] = int(e.group(1))
        if not metrics and other_work(desc):
            metrics["_other"] = True
    return n, total, metrics, m.end()


#: words of a bar's description that say it counts training steps (Lightning's `Epoch 3`, a script's
#: `Training`, `steps`, `iter`): a bar described otherwise counts something else
_TRAINING_BAR = re.compile(r"epoch|train|step|iter|batch|\bit\b|fit|optim|updat|loss|global|rank|gpu", re.IGNORECASE)


def other_work(desc: str) -> bool:
    """Whether a bar's description names other work than training (`Map`, `Downloading data`, `Loading
    checkpoint shards`, `Tokenizing`): its counter is not the training step. A bar with no words in
    front of it (the Hugging Face Trainer's) or with a training word counts the steps."""
    words = re.findall(r"[A-Za-z]{2,}", desc)
    return bool(words) and not any(_TRAINING_BAR.search(w) for w in words)


# --- Keras ---------------------------------------------------------------------------------

#: `Epoch 3/10` and its progress line `100/100 [==============================] - 2s 15ms/step - loss: 0.6931`
#: (verbose=1) or `100/100 - 2s - 15ms/step - loss: 0.6931` (verbose=2); Keras 3 draws the bar with
#: heavy lines and puts the time before the first ` - `: `391/391 ━━━━━━━━━━━━━━━━━━━━ 9s 22ms/step -
#: accuracy: 0.7792 - loss: 0.4457`
KERAS_EPOCH = re.compile(r"Epoch (\d+)/(\d+)\s*$")
_KERAS_BAR = re.compile(r"(\d+)/(\d+)(?:(?: \[[=>.]*\])? - | \u2501+ )")
#: Keras draws its bar with no newline, so a script's print lands right after the bar's last value
#: (`- loss: nanmf:[16]`): a value Keras prints (`%.4f`, `%.4e`, nan, inf) with letters glued after it
_GLUED_AFTER_BAR = re.compile(r"(?<![\w.])((?:\d+\.\d{4}(?:e[-+]\d+)?|nan|inf))(?=[A-Za-z_][\w]*\s*[:=])")


def keras_bar(text: str) -> tuple[int, int, dict[str, Any]] | None:
    """(batch, batches per epoch, metrics) of a Keras progress line; the loss is the epoch's
    running mean up to that batch."""
    m = _KERAS_BAR.match(text)
    if m is None:
        return None
    rest = _GLUED_AFTER_BAR.sub(r"\1 ", text[m.end() :])
    found = key_values(rest.replace(" - ", " , ")) or {}
    # `val_loss` at an epoch's end: kept apart; `- accuracy: 0.5000` is the epoch's running accuracy
    metrics = {c: found[c] for c in (*METRICS, "eval_loss", *LABEL_COLUMNS) if c in found}
    return int(m.group(1)), int(m.group(2)), metrics


# --- which tool printed a key-value line -----------------------------------------------------

DIALECTS = (
    ("nanoGPT", re.compile(r"(?:iter \d+: loss \S+, time |step \d+: train loss )")),
    ("litgpt", re.compile(r"(?:Epoch \d+ \| )?iter \d+ step \d+\b")),
    ("mlx-lm", re.compile(r"Iter \d+: (?:Train|Val) loss ")),
    # (torchtitan's fields after the loss: a bare `step: 58  loss: [2526.27]` is any script's print)
    ("torchtitan", re.compile(r"step:\s*\d+\s+loss:\s*\S+\s+(?:grad_norm|memory|wps|tps|tflops|mfu)\b")),
)


def dialect(text: str) -> str:
    for name, pattern in DIALECTS:
        if pattern.match(text):
            return name
    return "key-value"
