"""The words around the numbers of a training text: how the general reader (`any_text`) names each
number of a line (the words in front of it, wrappers such as `tensor(` skipped, a running average
in parentheses marked), the shape a repeated line makes (`Template`), which slots are step
counters and how they make one increasing step (`steps_of`), and which names are a training,
evaluation or component loss (`classify_slot`, `total_rank`). Pure functions over strings and
the rows already read; `any_text` reads the lines and chooses the series."""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Sequence
from typing import Any

import numpy as np

from ..records import FILLED_NONFINITE, MSVC_NONFINITE
from .columns import LABEL_COLUMNS, column_for

#: a number (a unit may be glued after it: `120.50ms`), or nan/inf as a whole word (MSVC's `1.#INF` too)
#: (a sentence may end right after it: `Loss is 2.3102.`; a version `1.2.3` is no number)
NUMBER = re.compile(
    r"(?<![\w.@])(?:"
    + MSVC_NONFINITE
    + "|"
    + FILLED_NONFINITE
    + r")(?![\w.])|(?<![\w.@])[-+]?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][-+]?\d+)?(?!\d|\.\d|\.[A-Za-z_])|"
    # (and as a number, it may end a sentence: `Current Loss: nan.`, `Loss: nan... Val Loss: nan`)
    r"(?<![\w.])[-+]?(?:Infinity|infinity|nan|inf|NaN|Inf|NAN|INF)(?!\w|\.\w)|"
    # a NaN timing with its unit glued (modded-nanogpt's `step_avg:nanms` at step 0)
    r"(?<![\w.])nan(?=ms(?![\w.]))"
)


#: a number printed with thousands separators right after its name's `:` or `=` (`iter:  25,390,`, OLMo's
#: `throughput/total_tokens=1,048,576`): one number; a comma not followed by three digits and no more is a
#: list's (`1,2`, `1,200,0.5`)
THOUSANDS = re.compile(r"(?<=[=:])(\s*)(\d{1,3}(?:,\d{3})+)(?![\d.]|,\d)")
_GROUP = re.compile(r",\d\d\d")  # what the pattern needs, found ten times faster (most lines have none)


#: a number printed with a decimal comma right after its name's `:` or `=` (a .NET or Delphi program
#: in a European locale: Encog's `Epoch #1 Error:0,403222760807917`): four or more digits after the
#: comma (no thousands group has them), or an integer part of 0 and two or more (`0,25`), and no
#: further comma or point after it; `a: 1,2` and `x=1,200` stay lists and thousands
DECIMAL_COMMA = re.compile(r"(?<=[=:])(\s*)(\d+),(\d{4,}|(?<=[=:\s]0,)\d{2,})(?![\d,.])")


def _decimal_point(m: re.Match[str]) -> str:
    return f"{m.group(1)}{m.group(2)}.{m.group(3)}"


def whole_numbers(text: str) -> str:
    """The line with its thousands-separated numbers written without the separators, and its
    decimal commas after a name as points (called on lines holding a comma)."""
    if _GROUP.search(text) is not None and THOUSANDS.search(text) is not None:
        text = THOUSANDS.sub(lambda m: m.group(1) + m.group(2).replace(",", ""), text)
    return DECIMAL_COMMA.sub(_decimal_point, text) if "," in text else text


#: a counter's or a loss's name glued to its value by an underscore, alone between separators (`step_78540:`,
#: `loss_-4.0655`: a script's `print("step_{}:\tloss_{:.9f}".format(...))`); a name inside a longer word
#: (`model_epoch_10.pth`, `conv_1`) is not one
_GLUED_NAME = re.compile(
    r"(?<![\w.-])(step|iter|iteration|epoch|loss|lr)_([-+]?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][-+]?\d+)?|nan|inf)"
    r"(?=[\s:,;|]|$)",
    re.IGNORECASE,
)


def unglued(text: str) -> str:
    """The line with `name_value` written `name value` (called on lines holding an underscore)."""
    return _GLUED_NAME.sub(r"\1 \2", text) if _GLUED_NAME.search(text) else text


#: a counter's name with its number glued on (`Epoch0 Iter3 --- total_loss: nan`: a script's
#: `print(f"Epoch{e} Iter{i} --- ...")`), alone between separators; inside a longer word or a file
#: name (`model_epoch10.pth`, `conv2`) it is not one
GLUED_COUNTER = re.compile(r"(?<![\w.-])(epoch|iter|iteration|step|batch)(\d+)(?=[\s:,;|/]|$)", re.IGNORECASE)


def counters_apart(text: str) -> str:
    """The line with `Iter3` written `Iter 3`, so the counter's number is a slot like any other."""
    return GLUED_COUNTER.sub(r"\1 \2", text)


#: the last one to three words before a slot (a name may hold `.`, `/`, `@`, `-`: `Tr.Loss`, `Acc@1`)
#: (a possessive joins a set to its metric: LightGBM's `valid_1's binary_logloss: 0.55`)
_NAME = re.compile(r"([A-Za-z_][\w./@-]*(?:'s)?(?: +[A-Za-z_][\w./@-]*){0,2})[^A-Za-z0-9_]*$")  # a tab ends a name
#: ... and a fourth when the last is a copula (`avg loss so far is 0.11`: the three words are `loss so far`)
_NAME_OR_COPULA = re.compile(r"([A-Za-z_][\w./@-]*(?:'s)?(?: +[A-Za-z_][\w./@-]*){0,3})[^A-Za-z0-9_]*$")


#: wrappers between a name and its number: `tensor(`, `np.float32(`, `array([`, quotes and `{`
_WRAP = re.compile(
    r"(?:(?:torch\.)?tensor|(?:np\.|numpy\.)?(?:float|int)(?:16|32|64)|array|Decimal|"
    r"float|np\.array)\(\s*\[*\s*['\"]?\s*$"
)


#: a counter's name with its mode in parentheses (mmengine's `Epoch(train)`, `Iter(val)`)
_MODE = re.compile(r"([A-Za-z]+)\((train|val|test|eval)\)", re.IGNORECASE)


#: an evaluation word standing alone (not inside a name such as `val_loss`, not itself naming a field: `val loss`)
EVAL_ALONE = (
    r"(?:(?<![\w/.-])(?:val|valid|validation|validating|eval|evaluation|evaluating|test|testing"
    r"|dev"
    r"|cv)"  # cv: WeNet's and its kin's (WeTTS, WeKWS) cross-validation pass, `Epoch 0 [CV] progress ...`
    r"(?![\w/-])(?!\s*(?:loss|acc|ppl|perplexity))"
    # GluonTS's trainer: `Evaluation metric 'epoch_loss'=0.35` is any metric's phrase, the
    # quoted name says which (`'validation_epoch_loss'`)
    r"(?!\s+metric\s+['\"])"
    # a logger's channel glued to its name by a hyphen, capitalised, then a colon (FastEstimator's
    # `FastEstimator-Eval:`; a run named `mi-test:` is no channel)
    r"|(?<=[A-Za-z]-)(?-i:Eval|Test|Validation)(?=:))"  # (one group: what callers append binds to both)
)
#: ... and not a phase's size, whose values follow: Poutyne's `Train steps: 938 Val steps: 157 ... loss:`
#: (the template reader's; the console reader keeps `Val steps: 157` an evaluation's, out of its step counter)
EVAL_WORD = re.compile(
    EVAL_ALONE + r"(?!\s+(?:steps|batches|samples|examples|iters|iterations)\s*[:=]\s*\d+\s)", re.IGNORECASE
)


TRAIN_WORD = re.compile(r"(?<![A-Za-z])(?:train|training|tr)(?![A-Za-z])", re.IGNORECASE)


#: an evaluation word inside a series' own name (`val_loss`, `Validation Loss`, `eval/loss`)
EVAL_NAME = re.compile(
    r"(?:^|[/_ .-])(?:eval|evaluation|val|vali|valid|validation|test|dev)(?:[/_ .-]|$)", re.IGNORECASE
)


#: step-like names, best first
_STEP_NAMES = (
    "global_step",
    "global step",
    "step",
    "steps",
    "iteration",
    "iterations",
    "iter",
    "iters",
    "it",
    "update",
    "updates",
    "n_updates",
    "num_updates",
    "batch",
    "batches",
    "total_timesteps",
    "timesteps",
    "minibatch",
    "minibatches",
    "up",  # up: Marian's `Ep. 1 : Up. 1000 : ... : Cost 6.5` (the update counter, bare only)
    "counter",  # counter: Vowpal Wabbit's `example counter` column (the examples seen)
    "round",  # round: a federated run's communication round (`Round 3`, `>> ROUND 3`), a boosting round
    "itn",  # itn: spaCy v2's `spacy train` table (`Itn.  Dep Loss  NER Loss  UAS ...`), from 0
    "itn.",
    "#",
)  # #: a table's counter column (spaCy's `E  #  LOSS NER  ENTS_F`); a line's names never hold `#`


_EPOCH_NAMES = ("epoch", "epochs", "ep", "pass")  # pass: PaddlePaddle's (v2, fluid) epoch


#: total-loss names, best first: anything else holding `loss` is a guess
_TOTAL = (
    "loss",
    "train loss",
    "training loss",
    "train_loss",
    "loss_train",  # the same name written the other way (`iter:0020 loss_train: 2.1153 acc_train: 0.3594`)
    "tr.loss",
    "trloss",
    "total loss",
    "total_loss",
    "loss_total",
    "tot loss",
    "tot_loss",
    "all_loss",  # MTCNN's `det loss: 0.68, bbox loss: 0.045, all_loss: 0.70`: the weighted sum of the parts
    "all loss",
    "loss_all",
    "overall loss",
    "overall_loss",
    "epoch_loss",
    "epoch loss",
    "losses",
    "lm loss",
    "lm_loss",
    "objective",
    "avg loss",
    "mean loss",
    "xent",  # xent: OpenNMT's and Neural Monkey's cross-entropy (`target/train_xent`)
    "cost",
)  # cost: what PaddlePaddle's and TF1's tutorials call the loss (`Pass 0, Batch 100, Cost 2.31`)


#: names of the parts of a loss (`surrogate`: PPO's clipped policy objective, beside its value loss)
_COMPONENT = re.compile(
    r"loss_|_loss|aux|z_loss|zloss|kl\b|(?<![a-z])(?:cls|bbox|mask|rpn|ctc|mlm|nsp|entropy|"
    r"value|policy|surrogate|crossentropy|cross_entropy|smoothl1|smooth_l1)",
    re.IGNORECASE,
)


#: MXNet's metric names that are losses (`mx.metric.CrossEntropy`, the SSD example's `SmoothL1`)
_LOSS_METRICS = ("crossentropy", "cross_entropy", "cross-entropy", "smoothl1", "smooth_l1")


def name_key(name: str) -> str:
    return re.sub(r"\s+", " ", name.strip().lower())


def names_a_loss(text: str) -> bool:
    """Whether a number of the line stands behind a loss name (`loss 2.3`, `xent nan`; never `loss
    scale`): such a line is a training row even when it also reads as an event."""
    spans = [m.span() for m in NUMBER.finditer(text)]
    return any(_is_loss(name_key(n)) for n in slot_names(text, spans) if n)


def _labels_metric(name: str) -> bool:
    """Whether a name is an accuracy or an error rate (`columns.LABEL_COLUMNS`): printed as a
    percentage, it is still that metric, read as printed (a value above 1 says it is a percentage)."""
    hit = column_for(base_name(name)) if name else None
    return hit is not None and hit[0] in LABEL_COLUMNS


def _names_in_front(pieces: list[str]) -> list[str]:
    """Each number's name from the text in front of it (`pieces[i]`, between the number before and
    it): a percentage's, a running average's in parentheses, past a unit of the number before."""
    names: list[str] = []
    for i, piece in enumerate(pieces[:-1]):
        if pieces[i + 1][:1] == "%":  # a progress bar's percentage (`steps:  22%|███`): never a counter's value
            named = _prefix_name(piece, pieces[i - 1] if i else "")
            names.append(named if _labels_metric(named) else PERCENT)  # `Accuracy: 49.44%` keeps its name
            continue
        if i and piece.strip() in ("(", "[", "( ", "(avg", "(avg:") and names:
            names.append("(avg) " + names[-1].removeprefix("(avg) "))
            continue
        if i and piece[:1].isalpha() and (unit := GLUED_UNIT.match(piece)) is not None:
            piece = piece[unit.end() :]  # the unit of the number before (`13.6G   0.0485`), no name of this one
        elif i and (rate := RATE_UNIT.match(piece)) is not None:
            piece = piece[rate.end() :]  # MXNet's `Speed: 6.44 samples/sec Train-CrossEntropy=0.59`: a unit
        names.append(_prefix_name(piece, pieces[i - 1] if i else ""))
    return names


#: `NAME of N UNITS:` (CTR-GCN's `Mean test loss of 8 batches: 0.567`): a count with its unit, then the value
_OF_COUNT = re.compile(r"^(.*\S)\s+of\s*$", re.IGNORECASE)
_COUNT_UNIT = re.compile(r"^\s+[A-Za-z]+s\s*[:=]\s*$")


def _counted_over(pieces: list[str], names: list[str]) -> None:
    """A name ending in `of` before a count and its plural unit and a separator (`Mean test loss of 8
    batches: 0.567`): the count is the unit's (`batches`), the name is the value's after the separator."""
    for i in range(len(names) - 1):
        m = _OF_COUNT.match(names[i])
        if m is not None and _COUNT_UNIT.match(pieces[i + 1]):
            names[i], names[i + 1] = pieces[i + 1].strip(" :=\t"), m.group(1)


def slot_names(text: str, spans: list[tuple[int, int]]) -> list[str]:
    """The name of each number of a line: the words in front of it (a copula dropped: `Loss is
    2.3` is `Loss`); for a number with none, the words right after it up to a separator (Darknet's
    `2.71 avg loss, 0.001 rate,`). "(avg) NAME" for a running average: a number in parentheses right
    after another (`Loss 2.34 (2.40)`), or one named `avg NAME` right after an unnamed one (`2.31,
    2.71 avg loss`); "" when no word names it."""
    pieces = [text[(spans[i - 1][1] if i else 0) : a] for i, (a, _) in enumerate(spans)]
    pieces.append(text[spans[-1][1] :] if spans else text)
    names = _names_in_front(pieces)
    _counted_over(pieces, names)
    _counted_values(text, spans, pieces, names)
    _tuple_names(spans, pieces, names)
    _listed_names(spans, pieces, names)
    _labelled_total(pieces, names)
    for i, name in enumerate(names):
        if not name and ")" in pieces[i] and (call := _CALL.search(text, 0, spans[i][0])) is not None:
            names[i] = call.group(1)  # a call whose arguments hold numbers: `accuracy(m, x, 0.0:9) = 0.91`
        if names[i]:
            continue
        if _TIME_UNIT.match(pieces[i + 1]):  # `(0m 12s)`: a duration's parts
            names[i] = "time"
            continue
        if i and pieces[i] == ":" and _CLOCK_PART.fullmatch(text, *spans[i]):
            continue  # `Remain 80:39:57 Loss 1.03`: a clock's seconds, never named by the word after them
        after = _SUFFIX.match(pieces[i + 1])
        if (
            after is not None
            and i + 1 < len(spans)
            and after.end() == len(pieces[i + 1])
            and name_key(names[i + 1]) == name_key(after.group(1).strip(" ./-"))
        ):
            after = None  # `progress 0/2754 loss 0.61`: the word names the number after it, not the total before
        if after is None:
            word = _SUFFIX_WORD.match(pieces[i + 1])  # `100 batches Average loss: ...`: a counter's own word
            if word is not None and (step_rank(word.group(1)) is not None or word.group(1).lower() in _EPOCH_NAMES):
                names[i] = word.group(1)
            continue
        names[i] = after.group(1).strip(" ./-")
        avg = _AVG_WORD.match(names[i])
        if avg and i and not names[i - 1] and pieces[i].strip(" ,;") == "":
            names[i - 1], names[i] = avg.group(1), "(avg) " + avg.group(1)  # `2.31, 2.71 avg loss`
        elif names[i].lower() in _AVG_ALONE and i and not names[i - 1] and pieces[i].strip(" ,;") == "":
            names[i - 1], names[i] = UNNAMED_AVERAGED, "(avg) " + UNNAMED_AVERAGED  # `2.31, 2.71 avg,`
    _range_ends(pieces, names)
    _changes(pieces, names)
    _named_before_counter(pieces, names)
    for i, name in enumerate(names):
        if (m := _SET_LOSS.match(name)) is not None:
            names[i] = ("train" if m.group(1) in _TRAIN_SETS else "test") + " loss"
    return names


#: a name, maybe a parenthesised remark, then `at`/`in`/`for` and only counters (`#` for their numbers) up
#: to the value: `Training loss (for one batch) at step #`, `loss in epoch # iteration #`
_AT_COUNTER = re.compile(
    r"^\W*([A-Za-z][\w ]*?)\s*(?:\([^)]*\))?\s+(?:at|in|for)\s+(?:(?:step|iteration|iter|epoch|batch)\s*#\s*,?\s*)+$",
    re.IGNORECASE,
)


def _named_before_counter(pieces: list[str], names: list[str]) -> None:
    """A value printed right after its counters, named by the words before them (the Keras guide's
    custom training loop: `Training loss (for one batch) at step 10: 2.3612`; SASRec's `loss in epoch
    1 iteration 10: 2.3150`): the counters are named by their words, the value by nothing after it,
    so it takes the name in front of the counters. A count inside the remark (`(for 1 batch)`) is
    part of the remark, no counter."""
    for i in range(1, len(names)):
        if names[i] or pieces[i].strip() not in (":", "=", "is", "-"):
            continue
        inside = _in_parentheses(pieces[:i])
        last = [n.split()[-1].lower() if n.split() else "" for n, p in zip(names[:i], inside) if not p]
        if not all(step_rank(w) is not None or w in _EPOCH_NAMES for w in last):
            continue
        m = _AT_COUNTER.search("#".join(pieces[:i]) + "#")
        if m is not None:
            names[i] = m.group(1).strip()


def _in_parentheses(pieces: list[str]) -> list[bool]:
    """For each slot after pieces[j]: whether it sits inside an open parenthesis."""
    depth, out = 0, []
    for piece in pieces:
        depth = max(0, depth + piece.count("(") - piece.count(")"))
        out.append(depth > 0)
    return out


#: a loss written as `L` and its set's short name, the way a paper writes L_tr (DeepMind graph_nets' demos:
#: `# 22253, T 14594.9, Ltr 0.0123, Lge 0.0456, Ctr ...`, training and generalisation losses)
_SET_LOSS = re.compile(r"^L(tr|trn|train|te|tst|test|ge|gen|va|val|dev)$")
_TRAIN_SETS = frozenset({"tr", "trn", "train"})


#: the word that opens a change's old value (`Val loss decrease from 2.79 to 2.78`, Keras's `val_acc
#: improved from 0.70 to 0.76`): the sentence reports a comparison, it is no row of the series it names
_CHANGE_FROM = re.compile(r"(?:^|\s)from\s*$", re.IGNORECASE)
_CHANGE_TO = re.compile(r"^\s*to\s*$", re.IGNORECASE)


def _changes(pieces: list[str], names: list[str]) -> None:
    """`<name> decreased from A to B`: A and B are named `from` and `to`, never the name's values (a
    checkpoint callback's message repeats the best value, it is not a new measurement)."""
    for i in range(len(names)):
        if _CHANGE_FROM.search(pieces[i]) and names[i]:
            names[i] = "from"
            if i + 1 < len(names) and _CHANGE_TO.match(pieces[i + 1]):
                names[i + 1] = "to"


def _counted_values(text: str, spans: list[tuple[int, int]], pieces: list[str], names: list[str]) -> None:
    """A loss's name followed by a whole number and then, after spaces or a colon only, an unnamed
    number with a point (NVIDIA tacotron2's `Train loss 120 0.512345`, `Validation loss 6312:
    0.149928`): the whole number counts the steps it was taken at, the other is the loss."""
    for i in range(len(names) - 1):
        if not names[i] or names[i + 1] or pieces[i + 1].strip() not in ("", ":"):
            continue
        first, second = text[spans[i][0] : spans[i][1]], text[spans[i + 1][0] : spans[i + 1][1]]
        if (
            first.isdigit()
            and ("." in second or second.lower().lstrip("+-") in ("nan", "inf"))
            and _is_loss(name_key(names[i]))
        ):
            names[i], names[i + 1] = "step", names[i]


#: a tuple of names right before a tuple of values (`train loss (min, avg, max): (-0.27, nan, 1152.6)`, a
#: script's `print("loss (min, avg, max):", (lo, avg, hi))`), the subject's name in front of the names
_NAME_TUPLE = re.compile(
    r"([A-Za-z_][\w ./-]*?)\s*\(\s*([A-Za-z_]\w*(?:\s*,\s*[A-Za-z_]\w*)+)\s*\)\s*[:=]?\s*[(\[]\s*$"
)
#: the names in such a tuple that say the value is the subject itself: its average over the interval
_AVERAGE_WORDS = frozenset({"avg", "average", "mean"})


def _tuple_names(spans: list[tuple[int, int]], pieces: list[str], names: list[str]) -> None:
    """Each value of a tuple printed after a tuple of names takes its name: the average takes the
    subject's (`train loss`), the others their own word (`min`, `max`), never the subject's (an
    extreme of the interval is no loss the trainer steps on)."""
    for i, piece in enumerate(pieces[: len(spans)]):
        m = _NAME_TUPLE.search(piece)
        if m is None:
            continue
        words = [w.strip() for w in m.group(2).split(",")]
        if i + len(words) > len(spans) or any(p.strip() != "," for p in pieces[i + 1 : i + len(words)]):
            continue
        subject = _prefix_name(m.group(1), "")
        for k, w in enumerate(words):
            names[i + k] = subject if w.lower() in _AVERAGE_WORDS and subject else w


#: names listed with a separator, then the values listed with the same one (a DCGAN script's `generator loss |
#: discriminator loss : 3.7583103 | 0.9910032`, `D/G loss: 0.51/1.23`): the separators tried, and the shape of
#: one name (split by plain string operations: a pattern with the list's repetition in it backtracks
#: exponentially on a long line of names that ends without a colon)
_LIST_SEPARATORS = "|/,"
_LIST_TAIL = re.compile(r"[:=]\s*$")
_LIST_WORD = re.compile(r"[A-Za-z_][\w .-]*")
_NOT_NAME_CHAR = re.compile(r"[^\w .-]")


def _listed_names(spans: list[tuple[int, int]], pieces: list[str], names: list[str]) -> None:
    """Each value of a list printed after a list of names, in the same separator, takes its name."""
    for i, piece in enumerate(pieces[: len(spans)]):
        tail = _LIST_TAIL.search(piece)
        sep = next((c for c in _LIST_SEPARATORS if tail is not None and c in piece[: tail.start()]), None)
        if tail is None or sep is None:
            continue
        words = [w.strip() for w in piece[: tail.start()].split(sep)]
        words[0] = _NOT_NAME_CHAR.split(words[0])[-1].strip()  # the list starts after the text before it
        words = words[1:] if not words[0] and len(words) > 2 else words  # `step 5, loss_D, loss_G = ...`
        if not all(_LIST_WORD.fullmatch(w) for w in words):
            continue
        if i + len(words) > len(spans) or any(p.strip() != sep for p in pieces[i + 1 : i + len(words)]):
            continue
        noun = words[-1].split(" ", 1)
        if len(noun) == 2 and all(" " not in w for w in words[:-1]):
            words = [f"{w} {noun[1]}" for w in words[:-1]] + [words[-1]]  # `D/G loss`: each keeps the noun
        for k, w in enumerate(words):
            names[i + k] = w


#: a loss's label with no number of its own, its parts listed after it (`loss: x 27.0, y 28.6, ... total 17.1`)
_LOSS_LABEL = re.compile(r"(?<![\w.-])(?:loss|losses)\s*:\s*[A-Za-z_][\w ]*$", re.IGNORECASE)


def _labelled_total(pieces: list[str], names: list[str]) -> None:
    """pytorch-yolo2's region loss prints `loss: x %f, y %f, w %f, h %f, conf %f, cls %f, total %f`:
    the label says the numbers after it are the loss's, so their `total` is the loss itself; so does a
    loss's name before a `total`."""
    label = next((i for i, p in enumerate(pieces[: len(names)]) if _LOSS_LABEL.search(p)), None)
    if label is None:
        # a `total` printed after losses named as such (a mmdet head's `..., trans_loss: 0.37, total: 51.77,
        # grad_norm: ...`, the log_vars of a model that names its sum `total`): their sum, the loss
        named = (i + 1 for i, n in enumerate(names) if "loss" in n.lower() and not EVAL_NAME.search(n))
        label = next(named, None)
        if label is None:
            return
    for k in range(label, len(names)):
        if names[k].lower() == "total":
            names[k] = "total loss"


def _range_ends(pieces: list[str], names: list[str]) -> None:
    """A counter printed as a range in brackets (CNTK's ` Minibatch[ 101- 200]: loss = ...`): the
    values were taken over the whole range, so the range's end carries the counter's name and the
    start none."""
    for i in range(1, len(names)):
        if names[i] or not names[i - 1] or pieces[i].strip() != "-":
            continue
        if pieces[i - 1].rstrip().endswith("[") and pieces[i + 1].lstrip().startswith("]"):
            names[i], names[i - 1] = names[i - 1], ""


#: words that join a name to its value and are not part of the name (`Loss is 2.3`, `loss was 2.3`)
_COPULA = frozenset({"is", "was", "are", "were", "becomes", "became", "now", "reached", "equals"})
#: a name's subject before the counter it is dated by (`loss at epoch 3 is 0.41`, `loss for step 5: 2.3`)
_SUBJECT = re.compile(r"^(.+?)\s+(?:at|for|in|after|on|of)\s+\S+$")
#: nothing but a separator between a counter and the number after it (`iteration 100: 0.58`)
_BARE_SEP = re.compile(r"\s*[:=]\s*$")
#: the words right after a number that has none in front of it, up to a separator: its name (`64 images,`)
_SUFFIX = re.compile(r"^ +([A-Za-z_][\w./@-]*(?: [A-Za-z_][\w./@-]*){0,2})\s*(?:[,;|]|$)")
#: (a word followed by its own separator names the number after it, not the one before: `2:03:04  iter: 19`)
_SUFFIX_WORD = re.compile(r"^ +([A-Za-z_]+)\b(?!\s*[:=])")
#: letters glued to a number, then a space or a separator: its unit (`13.6G`, `4011M`, `0.82s,`, a rate's
#: `0.70h/epoch`), never the name of the number after it
GLUED_UNIT = re.compile(r"[A-Za-z]{1,4}(?:/[A-Za-z]{1,6})?(?=[\s),;|\]]|$)")
#: a rate's unit after its number, a space between (`6.44 samples/sec`, `1200 tokens/s`, `3.1 it/s`): the unit of
#: the number before, never the first word of the next number's name (a rate named in front of its own number,
#: `tokens/sec: 5000`, is a name: a separator follows it, not a word)
RATE_UNIT = re.compile(r" +[A-Za-z]+/(?:s|sec|second|ms|min|step|iter|it|batch)(?=[ \t]+[A-Za-z_])")
#: a time unit glued to a number with no name (`(0m 12s)`, `1h 2m`): a duration, not a value
_TIME_UNIT = re.compile(r"(?:ms|us|s|sec|secs|min|m|h|hr)(?![A-Za-z/])")
#: the minutes or seconds of a clock (`80:39:57`), joined to the number before by a bare `:`
_CLOCK_PART = re.compile(r"\d\d(?:\.\d+)?")
#: the name of a number printed as a percentage
PERCENT = "percent"
#: a running average with no name (pjreddie's Darknet: `%ld: %f, %f avg, %f rate`): the number before
#: it is what a training print averages, its loss, taken as a guess (no total name: a note says so)
_AVG_ALONE = frozenset({"avg", "average", "running avg", "running average"})
UNNAMED_AVERAGED = "loss (unnamed, averaged)"
_AVG_WORD = re.compile(r"^(?:avg|average|running)[ _](\S.*)$", re.IGNORECASE)


def _prefix_name(piece: str, before: str) -> str:
    """The name in the words in front of a number (after the last separator when words only stand
    before it: Darknet's ` avg loss, ` names the number before it, not after)."""
    cut = max(piece.rfind(","), piece.rfind(";"))
    if cut >= 0 and _NAME_CHAR.search(piece[cut:]) is None:
        return ""
    if ")" in piece and (call := _CALL.search(piece)) is not None:
        return call.group(1)  # Julia's `@show loss(x, y)`: `loss(x, y) = param(0.0913)`
    piece = _MODE.sub(r"\2 \1", _WRAP.sub("", piece))  # mmengine's `Iter(train)`, `Epoch(val)`
    m = _NAME.search(piece)
    if not m:  # `Cost after iteration 100: 0.58`: only a separator between the counter and its value
        return _subject(before) if _BARE_SEP.match(piece) else ""
    name = _after_sentence(m.group(1).strip(" ./-"))  # a sentence before it is not its name
    words = name.split()
    copula = bool(words) and words[-1].lower() in _COPULA
    while words and words[-1].lower() in _COPULA:
        words.pop()
    if copula and not _known_name(words) and (longer := _NAME_OR_COPULA.search(piece)) is not None:
        # the copula took one of the three words: `avg loss so far is 0.11` names `loss so far`
        more = [w for w in _after_sentence(longer.group(1).strip(" ./-")).split() if w.lower() not in _COPULA]
        words = more[-3:] if _known_name(more[-3:]) else words
    joint = [i for i, w in enumerate(words[:-1]) if w.lower() in _ENDS_WITH]
    if joint:  # `Training batch 28 ends with loss NaN`: the name is what comes after `with`
        words = words[joint[-1] + 1 :]
    if len(words) > 1 and words[0] in _LOG_LEVELS:
        words = words[1:]  # a logging prefix's level before the name (`P834 INFO Train loss: 0.46`)
    if not words and name:  # `loss at epoch 3 is 0.41`: the subject before the counter
        return _subject(before)
    return " ".join(words)


def _known_name(words: list[str]) -> bool:
    """Whether words name a loss or a known column (`learning rate`), so no longer name is looked for."""
    name = " ".join(words)
    return bool(name) and ("loss" in name.lower() or column_for(name) is not None)


#: a word that joins a sentence to the name of the number after it (`ends with loss`, `finished with
#: loss`): the words before it are the sentence, not the name
_ENDS_WITH = frozenset({"with"})

#: a logging call's level, printed right before a message whose first words name a number
_LOG_LEVELS = frozenset({"INFO", "DEBUG", "WARNING", "WARN", "ERROR", "CRITICAL", "TRACE", "NOTICE"})


#: a name before the counter that dates it: up to three words of subject, the preposition and the counter's
#: name (CornerNet's `focal loss at iteration 100: 7.34`, `training loss at iteration 100: 7.48`)
_DATED_NAME = re.compile(r"([A-Za-z_][\w./@-]*(?:'s)?(?: +[A-Za-z_][\w./@-]*){0,4})[^A-Za-z0-9_]*$")


def _subject(before: str) -> str:
    """The subject a counter dates (`loss at epoch 3`, `Cost after iteration 100`), or ""."""
    bm = _DATED_NAME.search(before)
    sm = _SUBJECT.match(bm.group(1)) if bm else None
    return sm.group(1).strip() if sm else ""


_NAME_CHAR = re.compile(r"[A-Za-z]")
#: words a name abbreviates with a dot (prime-rl's `Grad. Norm`, `Avg. Loss`, `Tr. Loss`): the dot ends no sentence
ABBREVIATIONS = frozenset(
    {
        "grad",
        "avg",
        "tr",
        "val",
        "eval",
        "acc",
        "approx",
        "est",
        "tot",
        "iter",
        "ep",
        "no",
        "num",
        "norm",
        "max",
        "min",
        "std",
        "lr",
        "l",
        "r",
        "cur",
        "prev",
    }
)


def _after_sentence(name: str) -> str:
    """The name without a sentence before it (`Epoch done. Loss` -> `Loss`); an abbreviation's dot is
    kept inside the name, as a space (`Grad. Norm` -> `Grad Norm`)."""
    if ". " not in name:
        return name
    parts = name.split(". ")
    k = len(parts) - 1
    while k and parts[k - 1].rsplit(" ", 1)[-1].lower() in ABBREVIATIONS:
        k -= 1
    return " ".join(parts[k:])


#: a call printed with its value (Julia's `@show loss(x, y)`, a REPL's `accuracy(m, x) = 0.91`, `f(x): 2.3`): the
#: function's name names the value; a wrapper around the value after the `=` (`param(`, `Float32(`) is skipped
_CALL = re.compile(r"([A-Za-z_][\w.]*)\([^()]*\)\s*[=:]\s*(?:[A-Za-z_][\w.]*\(\s*)?$")


class Template:
    """The lines that share one shape: their line numbers, row order and numbers."""

    def __init__(self, text: str, names: list[str], eval_context: list[bool]) -> None:
        self.text, self.names, self.eval_context = text, names, eval_context
        self.lines: list[int] = []
        self.order: list[int] = []  # index of the row in reading order (over all templates and tables)
        self.rows: list[list[float]] = []
        self.slash: list[bool] = [False] * len(names)  # slot j is printed as `N/TOTAL` (slot j+1 the total)
        self.bracketed: list[bool] = [False] * len(names)  # slot j is a bare `[N]` with no name
        self.leading: list[bool] = [False] * len(names)  # slot j opens the line with no name (nor any before it)
        self.in_brackets: list[bool] = [False] * len(names)  # slot j is printed `[N]` (`Epoch: [0]`)
        self.losses: frozenset[str] = frozenset()  # names that are loss components in this table only
        self.adversarial = False  # the components of this line are two adversaries' (a GAN's D and G)
        self.steps_memo: tuple[int, Any] | None = None  # (rows, steps_of(self)) when last computed


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
        after = before[ev.end() :]
        # a bracketed section (`[val] loss=5.9, acc=0.2 [time per itr] 1403ms [lr] 0.00003`) ends at the next one
        closed = before[ev.start() - 1 : ev.start()] == "[" and _SECTION.search(after) is not None
        out.append(TRAIN_WORD.search(after) is None and not closed)
    return out


#: a section's label in brackets (`[lr]`, `[time per itr]`): words only
_SECTION = re.compile(r"\[[A-Za-z][A-Za-z _-]*\]")


def base_name(name: str) -> str:
    """The name without its section (`train/loss` -> `loss`, `time/iterations` -> `iterations`); a
    TensorBoard-style tag that ends with its split names the metric before it (`Loss/train` -> `loss`;
    `Loss/val` stays an evaluation by its full name)."""
    n = name_key(name).removeprefix("(avg) ")
    if "/" not in n.rstrip("/"):
        return n
    head, last = n.rsplit("/", 1)
    if (last in _SPLITS or last in _INTERVAL_MEAN) and head:
        return head.rsplit("/", 1)[-1]
    return last


_SPLITS = frozenset({"train", "training", "val", "valid", "validation", "eval", "test", "dev"})
#: a tag ending in its mean over the logging interval names the metric (a tabular logger's per-key statistics,
#: rlpyt's and rllab's `loss/Average` beside `loss/Std`, `loss/Min`, `loss/Max`: the average is the metric, the
#: others are statistics of it and keep their own names)
_INTERVAL_MEAN = frozenset({"average", "mean", "avg"})


#: what a variable holding a counter adds to its name (Pax's `step_i`, `batch_idx`, `iter_num`, `step_nr`)
_INDEX_TAIL = re.compile(r"[_ ](?:i|idx|index|id|num|nr|no|cnt|count)$")


def step_rank(name: str) -> int | None:
    """The rank of a step counter's name (lower is better), None when it names no step: `iter`,
    `global_step`, also after a training word (`train iter`: mmengine's `Iter(train)`), and a
    counter variable's name (`step_i`, `batch_idx`)."""
    n = base_name(name)
    if n in _STEP_NAMES:
        return _STEP_NAMES.index(n)
    bare = _INDEX_TAIL.sub("", n)
    if bare != n and bare in _STEP_NAMES:
        return _STEP_NAMES.index(bare)
    head, _, last = n.rpartition(" ")
    before = head.rsplit(" ", 1)[-1]  # the word right before: `INFO optimizer step`, not `time per iteration`
    if head and last in _STEP_NAMES and (TRAIN_WORD.fullmatch(before) or before in _STEP_HEADS):
        return _STEP_NAMES.index(last)
    return None


#: words that may stand before a step counter's name and keep it the step (`loss 2.3 at step 100`,
#: `optimizer step 12`, MaxText's `completed step: 10`, the Keras guide's callback `Up to batch 7, the average
#: loss is 4.53`); not `total`, `max`, `per`, `skipped`...
_STEP_HEADS = frozenset(
    {
        "at",
        "to",
        "optimizer",
        "opt",
        "current",
        "cur",
        "completed",
        "done",
        "finished",
        "after",
        "on",
        "in",
        "global",
        "example",
    }
)


def _slash(parts: list[str], j: int) -> bool:
    """Whether number j is printed as `N/TOTAL` (`[ 50/500]`, `iteration 100/ 500000`), not as part of a
    date (`12/01/2023`, `06/01 12:00:00`)."""
    if j + 2 >= len(parts) or parts[j + 1].strip() != "/" or parts[j].endswith("/") or parts[j + 2].startswith("/"):
        return False
    return not (parts[j + 2].strip() == "" and j + 3 < len(parts) and parts[j + 3].startswith(":"))


#: what joins the numbers of one date or clock (`2020-09-15`, `21:05:17,981`): no counter stands there
_CLOCK_JOINS = frozenset({":", "-", ",", "."})


def leading_slots(parts: list[str], names: list[str]) -> list[bool]:
    """Which slots open the line with no name (nor any named one before them) and are no part of
    a date or a clock: where a print puts its own counter when it names none."""
    out = [False] * len(names)
    for j, name in enumerate(names):
        if name in (PERCENT, "time"):  # a duration or a percentage printed first (`0m 5s (5000 5%) 2.85`)
            continue
        if name:
            break
        inner_join = parts[j] in _CLOCK_JOINS and j > 0 or parts[j + 1] in _CLOCK_JOINS and j + 1 < len(names)
        out[j] = not inner_join
    return out


def _word(name: str) -> str:
    """The last word of a slot's name (`Train Epoch` -> `epoch`, `time/iterations` -> `iterations`,
    `epoch_idx` -> `epoch`)."""
    n = _INDEX_TAIL.sub("", base_name(name)).split()
    return n[-1] if n else ""


def steps_of(t: Template) -> tuple[np.ndarray | None, set[int], str]:
    """(the step of each row or None, the slots that are counters, how the step was found:
    "named", "counter", "epoch_counter", "epoch" or "numbered"). A counter within an epoch (printed
    `N/TOTAL`, or one that restarts) is counted on from the epochs before it. Computed once per
    template and number of rows (the choice of series asks it for the same template several times)."""
    memo = t.steps_memo
    if memo is not None and memo[0] == len(t.rows):
        return memo[1]
    out = _steps_of(t)
    t.steps_memo = (len(t.rows), out)
    return out


def _of_total(t: Template, a: np.ndarray, whole: list[int]) -> list[int]:
    """The slots printed `N/TOTAL` as a counter of a fixed total: `06/01` (a date, day < month) is no
    counter; one past the total is (MONAI's tutorials print `{step}/{len(train_ds) // batch_size}`,
    whose last batch, a partial one, is `244/243`)."""
    return [
        j
        for j in whole
        if t.slash[j] and j + 1 in whole and np.all(a[:, j + 1] == a[0, j + 1]) and np.all(a[:, j] <= a[:, j + 1] + 1)
    ]


def _steps_of(t: Template) -> tuple[np.ndarray | None, set[int], str]:
    a = np.array(t.rows, dtype=np.float64) if t.rows else np.zeros((0, len(t.names)))
    whole = [
        j
        for j in range(a.shape[1])
        if np.all(np.isfinite(a[:, j])) and np.all(a[:, j] == np.round(a[:, j])) and np.all(a[:, j] >= 0)
    ]
    of_total = _of_total(t, a, whole)
    counters = {k for j in of_total for k in (j, j + 1)}
    # (never the number after a slash: `109326/0 sec. train epoch 1` names the 1, the 0 is a total)
    epoch = next((j for j in whole if _word(t.names[j]) in _EPOCH_NAMES and not (j and t.slash[j - 1])), None)
    totals = {j + 1 for j in of_total}  # `200/ 2983 batches`: the word after a total names the counter, not it
    named = [(k, j) for j in whole if (k := step_rank(t.names[j])) is not None and j != epoch and j not in totals]
    named = named or _running_total(t, a, whole, {epoch, *totals})
    if epoch is None and (swap := _epoch_then_count(t, a, named, whole)) is not None:
        epoch, named = swap, [(named[0][0], swap + 1)]  # WeNet's `Batch {epoch}/{batch_idx}`
    counters.update(j for _, j in named)
    if epoch is not None and a.shape[0] >= 2 and np.all(np.diff(a[:, epoch]) > 0):
        # the same `Steps: 9` each epoch (the Informer family's steps per epoch): a count, not a step; one
        # printed `N/TOTAL` is the iteration within each epoch, logged at the same one each epoch (YOLOX's
        # `epoch: 2/300, iter: 10/12` where an epoch has 12)
        named = [(k, j) for k, j in named if np.any(a[:, j] != a[0, j]) or j in of_total]
    if epoch is None and len(of_total) > 1:
        epoch = of_total[0]  # `[0][ 10/5005]`: the outer of two counters is the epoch
    if epoch is not None:
        counters.add(epoch)
    inner = min(named)[1] if named else next((j for j in reversed(of_total) if j != epoch), None)
    if inner is None:
        inner = next((j for j in whole if t.bracketed[j] and np.all(np.diff(a[:, j]) > 0)), None)  # `[100] loss=`
        if inner is None and a.shape[0] >= 2:
            # the first number of the line, named by nothing, counting up: its step (`76930 2.6496`,
            # `0: inf nan`, glample's `50, cost average: 110.2`, YOLACT's `[  1]    1440 || B: ...`)
            inner = next((j for j in whole if t.leading[j] and np.all(np.diff(a[:, j]) > 0)), None)
        elif inner is None and a.shape[0] == 1 and sum(not n for n in t.names) == 1:
            # one row, every number named but a whole number opening the line: what a print puts first
            # when it names no counter (graph_nets' `# 22253, T 14594.9, Ltr nan, Lge nan`)
            inner = next((j for j in whole if t.leading[j] and not t.names[j]), None)
        if inner is not None:
            counters.add(inner)
    if inner is None:
        if epoch is not None and a.shape[0] and np.all(np.diff(a[:, epoch]) > 0):
            return a[:, epoch], counters, "epoch"
        return None, counters, "numbered"
    steps = a[:, inner]
    if epoch is None and inner in of_total and _several_per_count(a, inner, counters):
        return None, counters, "numbered"
    if epoch is None or np.all(np.diff(steps) >= 0) and (inner not in of_total or _goes_on(a[:, epoch], steps)):
        # no epoch, a counter that is not `N/TOTAL` within one epoch, or one that goes on across epochs
        # (PaddleSeg's `epoch: 2, iter: 30/1000`): the counter as printed
        return steps, counters, "named" if named else "counter"
    run_on = _running_beside(t, a, whole, counters, inner)
    if run_on is not None:
        counters.add(run_on)
        return a[:, run_on], counters, "counter"
    per_epoch = a[0, inner + 1] if inner in of_total else np.max(steps) + 1
    # an epoch printed `E/TOTAL` or as a bare number counts from 1 (`Epoch [1/10]`, OpenNMT's `Epoch  1,
    # 12900/37527`); one in brackets as the PyTorch reference scripts' from 0 (`Epoch: [0][ 10/5005]`)
    first = 1.0 if (epoch in of_total or not t.in_brackets[epoch]) and a.shape[0] and np.min(a[:, epoch]) >= 1 else 0.0
    return (a[:, epoch] - first) * per_epoch + steps, counters, "epoch_counter"


def _goes_on(epochs: np.ndarray, steps: np.ndarray) -> bool:
    """Whether an `N/TOTAL` counter goes on across the epochs (PaddleSeg's `epoch: 2, iter: 30/1000`):
    the epoch changes somewhere and the counter moves up wherever it does (one that stays put there,
    YOLOX's `iter: 10/12` each epoch, counts within the epoch)."""
    turn = np.diff(epochs) != 0
    return bool(turn.any()) and bool(np.all(np.diff(steps)[turn] > 0))


#: the counts of optimizer updates a `total` may head (not `timesteps`: an RL run's environment steps, nor
#: `batches`/`examples`: the data seen)
_UPDATE_COUNTS = frozenset({"step", "steps", "iter", "iters", "iteration", "iterations", "update", "updates"})


def _several_per_count(a: np.ndarray, j: int, counters: set[int]) -> bool:
    """The counter j repeats on consecutive rows whose other numbers differ, on most of its repeats:
    several records per value of it (an epoch printed with each of its progress prints, PyTorch
    beginner scripts' `[1/3] Loss: 2.309949, Acc: 0.076020` every 300 batches, YOLOv5's classifier bar
    `1/3  0.946G  2.31`), so it is no step and the rows are taken in order. A line printed twice (two
    loggers, two ranks) repeats its numbers too: it stays one record per value. Asked only of an
    `N/TOTAL` counter (an epoch out of epochs): a named step repeated with other numbers is more
    often every rank printing its own loss at that step than records within it."""
    if a.shape[0] < 3:
        return False
    same = np.diff(a[:, j]) == 0
    others = [k for k in range(a.shape[1]) if k not in counters and k != j]
    if not same.any() or not others:
        return False
    with np.errstate(invalid="ignore"):  # inf - inf between two rows that printed inf: NaN, no move
        moved = np.any(np.abs(np.diff(a[:, others], axis=0)) > 0, axis=1)
    return int(np.sum(same & moved)) * 2 > int(same.sum()) and int(same.sum()) * 2 >= a.shape[0] - 1


def _running_total(t: Template, a: np.ndarray, whole: list[int], not_these: set[int | None]) -> list[tuple[int, int]]:
    """A `total` step count that grows on every line (InsightFace-TF's `epoch 0, total_step 90180, ...`):
    the steps taken so far, the step. (A planned total, `total_steps: 1000`, prints the same number on
    every line, which is why `total` is no step head otherwise.)"""
    if a.shape[0] < 2:
        return []
    out = []
    for j in whole:
        words = name_key(t.names[j]).replace("_", " ").split()
        if len(words) == 2 and words[0] == "total" and words[1] in _UPDATE_COUNTS and j not in not_these:
            if np.all(np.diff(a[:, j]) > 0):
                out.append((_STEP_NAMES.index(words[1]), j))  # ranked as the bare name
    return out


def _epoch_then_count(t: Template, a: np.ndarray, named: list[tuple[int, int]], whole: list[int]) -> int | None:
    """A named counter printed `N/M` whose N stays while M moves on (WeNet's executor: `TRAIN Batch
    {epoch}/{batch_idx}`, `Batch 4/203700` then `Batch 4/203800`): M is no total (a total never changes)
    but the counter, N the epoch. Returns N's slot."""
    if len(named) != 1 or a.shape[0] < 2:
        return None
    j = named[0][1]
    if not t.slash[j] or j + 1 not in whole or np.any(a[:, j] != a[0, j]) or np.all(a[:, j + 1] == a[0, j + 1]):
        return None
    return j


def _running_beside(t: Template, a: np.ndarray, whole: list[int], counters: set[int], inner: int) -> int | None:
    """A whole number that counts up on every row by just as much as the counter within the epoch
    (VSE++'s `Epoch: [5][1069/2266]  Eit 12400`, whatever its name): the same iterations counted on
    across epochs, the step as printed (no epoch arithmetic needed)."""
    if a.shape[0] < 2:
        return None
    d_inner = np.diff(a[:, inner])
    on = d_inner > 0
    if not on.any():
        return None
    for k in whole:
        if k in counters or t.eval_context[k] or name_key(t.names[k]).startswith(("(avg)", PERCENT)):
            continue
        d = np.diff(a[:, k])
        if np.all(d > 0) and np.all(d[on] == d_inner[on]):
            return k
    return None


#: names that are a loss by themselves, whole (Torch7's imagenet `Err 6.9076`: its criterion's value)
#: (`error`: what a from-scratch net prints for its objective, `print("Error: ", error)`; `top-1 error`, `error rate`
#: are other names)
#: (`crosse`, `crossent`: a cross-entropy's abbreviations, TF1's `tf.Print(ce, [ce], "CrossE")`)
_LOSS_NAMES = frozenset(
    {
        "nll",
        "xent",
        "crosse",
        "crossent",
        "objective",
        "ce",
        "perplexity",
        "ppl",
        "cost",
        "err",
        "error",
        *_LOSS_METRICS,
    }
)
#: the last word of a name that makes it an objective's value, the metric a tool prints for its loss
#: (XGBoost's `train-logloss`, LightGBM's `training's l2` / `valid_1's binary_logloss`, `train-rmse`):
#: ranked after every name that says loss
METRIC_LOSS_WORDS = frozenset(
    {
        "logloss",
        "mlogloss",
        "rmse",
        "mse",
        "mae",
        "l1",
        "l2",
        "nll",
        "xent",
        "huber",
        "crossentropy",
        "cross_entropy",
        "objective",
        "cost",
    }
)
#: a dataset's name alone naming the value printed for it (CatBoost's `learn: 0.65  test: 0.66`): the
#: objective on that set, a training or an evaluation loss (ranked after every other loss name)
_SET_TRAIN = frozenset({"learn", "train", "training"})
_SET_EVAL = frozenset({"test", "valid", "validation", "eval", "val"})
#: a set's name written after its metric's, `_`-joined (DeePMD-kit's `lcurve.out`: `rmse_trn`, `rmse_val`;
#: an evaluation one is told apart by `EVAL_NAME`)
_SET_TAILS = frozenset({"trn", "train", "training", "val", "valid", "validation", "test", "tst", "eval", "dev"})
#: what separates a set's name from its metric's (`train-rmse`, `training's l2`, `valid_1 l2`)
_SET_SEP = re.compile(r"[\s'-]+")
#: words that may stand before a metric's name in one `_`-joined name (`binary_logloss`, `valid_rmse`);
#: any other (`lin_vel_z_l2`, an RL reward term) makes it the name of something else
_METRIC_HEADS = frozenset(
    {
        "train",
        "training",
        "val",
        "valid",
        "validation",
        "test",
        "eval",
        "dev",
        "binary",
        "multi",
        "avg",
        "mean",
        "weighted",
        "total",
    }
)


#: a one-word CamelCase metric class, lower-cased, that is a cross-entropy of some kind (`languagecrossentropy`,
#: `tokencrossentropy`, `maskedcrossentropy`): the objective it scores
_NAMED_CROSS_ENTROPY = re.compile(r"[a-z]+crossentropy")


def _metric_named(n: str) -> bool:
    """Whether a name is an objective's metric (`train-logloss`, `training's l2`, `valid_1's
    binary_logloss`, `rmse`), not a name that merely ends like one (`Episode_Reward/lin_vel_z_l2`)."""
    last = _SET_SEP.split(n)[-1]
    if _NAMED_CROSS_ENTROPY.fullmatch(last):
        return True  # a metric class named for what it scores (Composer's `LanguageCrossEntropy`)
    words = last.split("_")
    if len(words) > 1 and words[-1] in _SET_TAILS:
        words = words[:-1]  # the set named after its metric (DeePMD-kit's `rmse_trn` / `rmse_val`)
    return words[-1] in METRIC_LOSS_WORDS and all(w in _METRIC_HEADS for w in words[:-1])


def counted_on(steps: np.ndarray) -> np.ndarray:
    """The steps of rows in reading order, a counter that starts again from its beginning (back at or
    below every value printed before: a batch within an epoch whose number the line does not print,
    glample's `50, cost average`) counted on from the epoch before: each restart goes on one interval
    after the last value reached. A counter that goes back to a middle value (a resume from a
    checkpoint), or two counters of different scales in one sequence, are left as printed."""
    d = np.diff(steps)
    back = d < 0
    if back.any():
        back &= ~_late_copies(steps, back)
    # every restart lands at or below all the values printed before it (the counter's beginning)
    if not back.any() or np.any(steps[1:][back] > np.minimum.accumulate(steps)[:-1][back]):
        return steps
    up = d[d > 0]
    gap = max(1.0, float(np.round(np.median(up)))) if up.size else 1.0
    starts = np.concatenate(([0], np.nonzero(back)[0] + 1))  # where each run of the counter begins
    ends = np.concatenate((starts[1:] - 1, [len(steps) - 1]))
    offsets = np.zeros(len(starts))
    for k in range(1, len(starts)):  # one step per restart, not per row
        offsets[k] = steps[ends[k - 1]] + offsets[k - 1] + gap - steps[starts[k]]
    return steps + offsets[np.cumsum(np.concatenate(([False], back)))]


def _late_copies(steps: np.ndarray, back: np.ndarray) -> np.ndarray:
    """Which steps back are one line out of order, not a restart: a value printed more than once before
    (several ranks print each step) that the counter leaves at once for where it was (`1 1 1 2 1 2 2`:
    a rank's late copy of step 1, printed after another rank's step 2)."""
    out = np.zeros_like(back)
    for i in np.nonzero(back)[0].tolist():
        j = i + 1
        if j + 1 < len(steps) and steps[j + 1] >= steps[i] and np.count_nonzero(steps[:j] == steps[j]) >= 2:
            out[i] = True
    return out


#: the fp16 loss scaler's value by its name (`loss scale`, `loss_scale`, `lossscale`, `grad_scale`, `scale`): a name
#: that only holds the word inside a part's (GluonCV's `BoxScaleLoss`, a box's size term) is a loss
_SCALER = re.compile(r"loss[ _/.-]?scale|scale(?:r|[ _]factor)?$")


def _is_loss(n: str) -> bool:
    n = AVERAGE_TAIL.sub("", n.removeprefix("train_").removeprefix("training_"))  # `cost average`: a cost
    n = _CURRENT_PREFIX.sub("", n)  # FANN's `Current error: 0.36`: the error (its MSE) at this epoch
    if "scale" in n and _SCALER.search(n):  # `loss scale`, `loss_scale`: the fp16 scaler's, never a loss
        return False
    return "loss" in n or n in _LOSS_NAMES or n.endswith("loss") or _metric_named(n) or bool(_TERM.match(n))


#: a loss term named by the short prefix of a loss dict's keys (BasicSR's `l_pix`, `l_g_gan`, `l_d_real`, `l_p_8`):
#: one part of the loss the optimizer steps on
_TERM = re.compile(r"^l_[a-z]")


def _set_named(t: Template, j: int, n: str) -> str | None:
    """ "train" or "eval" for a slot named by a dataset alone whose values are no counts (a loss is
    not a whole number on every row; `train: 50000` is a set's size)."""
    kind = "train" if n in _SET_TRAIN else "eval" if n in _SET_EVAL else None
    if kind is None or not t.rows or all(float(r[j]).is_integer() for r in t.rows if math.isfinite(r[j])):
        return None
    return kind


def classify_slot(t: Template, j: int) -> str | None:
    """ "train", "eval", "component" for a loss-like slot; "avg" for a running average; else None."""
    raw = name_key(t.names[j])
    if not raw or raw.startswith("(avg)"):
        return "avg" if raw else None
    n = base_name(raw)
    if n in t.losses:
        return "component"
    if averaged_beside(n, [base_name(name_key(x)) for i, x in enumerate(t.names) if i != j and x]):
        return "avg"
    comp_name = (
        (bool(_COMPONENT.search(n)) or bool(_ADVERSARIES.match(n)) or bool(_TERM.match(n)) or camel_part(t.names[j]))
        and total_rank(n) >= 50
        and not n.startswith(("total", "train", "tr."))
        or criterion_named(n)
        and any(criterion_named(base_name(x)) for i, x in enumerate(t.names) if i != j and x)
    )
    loss_like = _is_loss(n) or (comp_name and bool(re.search(r"aux|z_?loss", n)))
    if not loss_like:
        return _set_named(t, j, n) if not EVAL_NAME.search(raw) or n in _SET_EVAL else None
    if EVAL_NAME.search(raw) or (t.eval_context[j] and not TRAIN_WORD.search(raw)):
        return "eval"
    return "component" if comp_name else "train"


#: a loss's part named in CamelCase, its qualifier glued to `Loss` (GluonCV's YOLOv3 `ObjLoss=`, `BoxCenterLoss=`,
#: `BoxScaleLoss=`, `ClassLoss=`, the four terms it steps on): a part, as `obj_loss` would be
_CAMEL_PART = re.compile(r"^((?:[A-Z][a-z0-9]+)+)Loss$")
#: qualifiers that make a CamelCase loss the total or a set's (`TotalLoss`, `TrainLoss`, `ValLoss`), not a part
_CAMEL_WHOLE = frozenset({"total", "tot", "train", "training", "avg", "average", "mean", "running", "batch", "epoch"})


def camel_part(name: str) -> bool:
    """Whether a name is a CamelCase loss part (`ObjLoss`), not a total's or a criterion's (`CrossEntropyLoss`)."""
    m = _CAMEL_PART.match(name.strip())
    if m is None:
        return False
    q = m.group(1).lower()
    return q not in _CAMEL_WHOLE and q not in _CRITERIA and not EVAL_NAME.search(m.group(1) + "_")


#: a loss name that says it is a running average by its tail (OpenRLHF's `gpt_loss=2.31, loss_mean=2.41`)
AVERAGE_TAIL = re.compile(r"[_ ](?:mean|avg|average|ema|smooth|smoothed|running)$", re.IGNORECASE)


def averaged_beside(name: str, others: Iterable[str]) -> bool:
    """Whether a loss named as an average (`loss_mean`) sits beside a loss that is not one: it then
    averages that loss over past steps, and is neither the loss nor a part of it. Alone, it is the
    only loss the line holds and is read as such."""
    return (
        bool(AVERAGE_TAIL.search(name))
        and _is_loss(name)
        and any(_is_loss(o) and not AVERAGE_TAIL.search(o) for o in others)
    )


#: words in front of a total's name that say it is an average of the steps' values (`avg_train_loss`,
#: kohya's `avr_loss`), and those that say it is the step's own (`Current Loss`): both keep it the total
AVERAGE_PREFIX = re.compile(r"^(?:avg|avr|average|mean|running|smoothed)[_ ]", re.IGNORECASE)
_CURRENT_PREFIX = re.compile(r"^(?:cur|current)[_ ]", re.IGNORECASE)


#: a total's or a training loss's name written as one word (an OCR trainer's `Totalloss:51.620 CTCloss: 51.392`)
_GLUED_TOTAL = re.compile(r"^(total|tot|train|training)loss$")


def total_rank(name: str) -> float:
    """The rank of a total-loss name (lower is better; 50: not a total). A prefixed total
    (`avg_train_loss`) ranks right after the bare one."""
    n = _GLUED_TOTAL.sub(r"\1 loss", base_name(name))  # `Totalloss:51.62` as `total loss`
    for head, after in ((_CURRENT_PREFIX, 0.25), (AVERAGE_PREFIX, 0.5)):
        # the step's own value before a running average of it (Speech-Transformer's `Average Loss 2.326
        # | Current Loss 2.326479`): a meter's value, not its average
        bare = head.sub("", n)
        if bare != n:
            r = total_rank(bare)
            return r + after if r < 50 else 50
    for prefix in ("train ", "train_", "training "):
        if n.startswith(prefix) and n[len(prefix) :] in _TOTAL:
            return _TOTAL.index(n[len(prefix) :]) + 1
    if n in _TOTAL:
        return _TOTAL.index(n)
    tail = AVERAGE_TAIL.search(n)
    if tail is not None and n[: tail.start()] in _TOTAL:  # glample's `cost average`: the total, averaged
        return _TOTAL.index(n[: tail.start()]) + 0.5
    if criterion_named(n):
        return _CRITERION_RANK
    if "loss" not in n and (n in _LOSS_NAMES or _metric_named(n)):
        return _METRIC_RANK
    return _SET_RANK if n in _SET_TRAIN or n in _SET_EVAL else 50


#: a loss named by its criterion's class (PyTorch's `nn.CrossEntropyLoss`, `nn.MSELoss`...: OLMo's
#: `train/CrossEntropyLoss`, a script's `print(f"{type(criterion).__name__}: {loss}")`): the objective itself,
#: ranked after every total's name; two such names on one line are parts of one objective
_CRITERIA = frozenset(
    {
        "crossentropy",
        "nll",
        "mse",
        "l1",
        "smoothl1",
        "huber",
        "bce",
        "bcewithlogits",
        "kldiv",
        "ctc",
        "marginranking",
        "hingeembedding",
        "cosineembedding",
        "tripletmargin",
        "poissonnll",
        "gaussiannll",
        "multilabelsoftmargin",
        "softmargin",
        "multimargin",
        "focal",
        "dice",
    }
)
_CRITERION_RANK = 30


def criterion_named(n: str) -> bool:
    """Whether a (lower-case, sectionless) name is a loss criterion's class name (`crossentropyloss`)."""
    return n.endswith("loss") and n[:-4] in _CRITERIA


#: the rank of a loss named by its metric (`train-logloss`, `rmse`): after every name holding `loss`
_METRIC_RANK = 60
#: the rank of a value named by its dataset alone (`learn:`): after every other name
_SET_RANK = 70


#: an RL trainer's policy loss, by its name (the section dropped: verl's `actor/pg_loss`): a policy-gradient loss,
#: the actor's loss (DeepSpeed-Chat's `act_loss`, OpenRLHF's `policy_loss`), trained apart from its critic; not
#: one actor-critic network's `Surrogate loss` beside its `Value function loss` (RSL-RL: one loss, their sum)
_POLICY = re.compile(r"^(?:pg|policy|policy_gradient|actor|act)[_ ]loss$")


def policy_named(name: str) -> bool:
    return _POLICY.match(base_name(name)) is not None


#: component names of two adversaries (a GAN's D and G): their sum is no training loss
_ADVERSARIES = re.compile(r"^(?:d|g|disc|gen|discriminator|generator|critic|actor)(?:[_ ./]|$)", re.IGNORECASE)


#: the same side named after the loss (the DCGAN tutorial's `Loss_D`, `errD`, `Err_G`; AdaptSegNet's `loss_D1`, one
#: discriminator of several), or after a loss term's prefix (BasicSR's `l_d_real`, `l_g_gan`)
_SIDE_AFTER = re.compile(r"^(?:loss|err|error|l)[_ ]?(d|g)\d*(?:$|_)", re.IGNORECASE)


def adversaries(names: Iterable[str]) -> bool:
    """Whether loss names are two adversaries' (`d_loss` and `g_loss`, `D loss` and `G loss`,
    `Loss_D` and `Loss_G`)."""
    return any(
        _ADVERSARIES.match(name_key(n)) or _SIDE_AFTER.match(name_key(n)) or _SIDE_LETTER.match(n.strip())
        for n in names
    )


#: an adversary named by its network's capital letter alone, as GAN scripts print them in a bar's postfix or
#: brackets (TUNIT's `D[0.00] G[0.00] C[2.61]`, musika's `DR=713, DF=nan, G=nan, GP=2.16e+4`): `D`, `G`, the
#: side glued to what it was scored on (`DR`/`DF`: real, fake; `DA`/`GB`: a direction of CycleGAN's) or to its
#: index (`D1`, `G2`). Upper case as printed: `dr`, `df` as words are something else
_SIDE_LETTER = re.compile(r"^([DG])(?:[RFAB]|\d)?$")
#: a network's capital letter beside the adversaries' (TUNIT's `C`, the guiding network; InfoGAN's `Q`; an
#: encoder's `E`): the loss printed for that network, one more part on a line that names both sides
_NET_LETTER = re.compile(r"^[A-Z]$")


def _side(name: str) -> str | None:
    """ "d" or "g" for a name that says which adversary it belongs to (`D_A`, `G_GAN`, `Loss_D`, `DR`)."""
    letter = _SIDE_LETTER.match(name.strip())
    if letter:
        return letter.group(1).lower()
    n = name_key(name)
    m = _SIDE_AFTER.match(n)
    if m:
        return m.group(1).lower()
    m = _ADVERSARIES.match(n)
    return ("d" if n[0] in "dc" else "g") if m and n[0] in "dgc" else None


#: a bracketed group of one adversary's losses (`[G - gan1: 6.8, rec: 0.15] [D - real: 0.4]`)
_SIDE_GROUP = re.compile(r"\[\s*([DG])\s*[-:]\s*[A-Za-z]")
#: names on a GAN's line that are no loss: timing, data loading, the LR, accuracies, counters
_NOT_A_PART = re.compile(
    r"^(?:time|data|eta|speed|lr|learning[ _]rate|mem|memory|acc|accuracy|fps|sec|secs)\b"
    r"|^.*[ _](?:took|time|elapsed|duration|speed)$",  # a phase's timing: `batch took 2.1 s`, `iter time`
    re.IGNORECASE,
)


#: names of what a training line prints beside its loss that is no loss: scores, accuracies, rewards,
#: throughput, sizes, regularisation settings (the LR, the norms, the scale are the records' own columns)
_NOT_A_LOSS = re.compile(
    r"^(?:top-?\d|acc|prec|precision|recall|f1|auc|m?ap\b|m?iou|bleu|rouge|reward|return|score|"
    r"psnr|ssim|tokens?|samples?|images?|imgs?|throughput|tps|wd|weight[ _]decay|momentum|temp|"
    r"beta|alpha|eps|ratio|grad|norm|param|scale|best|batch(?![ _](?:average|avg|mean)[ _])|bs|size|len|seq|gpu|cuda|rank|mom|dropout|decay|"
    r"clip|warmup|"
    r"step)",  # step: a step's timing or rate (modded-nanogpt's `step_avg:258.57ms`)
    re.IGNORECASE,
)


def lone_metric(t: Template, counters: set[int], known: Iterable[int]) -> int | None:
    """With no number named a loss: the one named number of a counted training line that is no
    counter, timing, LR or other known column, no score, size or running average, no whole number on
    every row and no setting (it changes between rows) (VSE++'s `Eit 12400  lr 0.0002  Le 25.6000
    Time 0.900`: `Le`). What a reader takes for the loss when nothing else is left; None when two or
    more are left (which one is unknown)."""
    known = set(known)
    left = [
        j
        for j, n in enumerate(t.names)
        if n
        and j not in counters
        and j not in known
        and not t.eval_context[j]
        and not EVAL_NAME.search(n)
        and not name_key(n).startswith(("(avg)", PERCENT))
        and not _NOT_A_PART.match(n)
        and not _NOT_A_LOSS.match(n)
        and name_key(n) not in _EPOCH_NAMES
        and not all(math.isfinite(r[j]) and float(r[j]).is_integer() for r in t.rows)
        and any(r[j] != t.rows[0][j] for r in t.rows)
    ]
    if len(left) > 1:  # the step's own value beside a figure over the run so far (Kaldi's `global average objf:
        # -0.687 over 573696.0 frames, current batch average objf: -0.457`): the step's
        left = [j for j in left if not _OVER_THE_RUN.match(t.names[j])] or left
    return left[0] if len(left) == 1 else None


#: words that open the name of a figure over the whole run so far, not the step's own value
_OVER_THE_RUN = re.compile(r"^(?:global|overall|cumulative|running|total)[ _]+(?:average|avg|mean)\b", re.IGNORECASE)


def gan_parts(text: str, names: list[str]) -> frozenset[str]:
    """The loss components of a GAN's line (CycleGAN's and pix2pix's `D_A: # G_A: # cycle_A: #`, the
    DCGAN tutorial's `Loss_D: # Loss_G: #`, `[G - gan1: #, rec: #] [D - real: #]`): when the line
    names both adversaries, every named number but counters, timings and the LR is one of their
    parts (cycle and identity terms included), kept apart and never summed; empty otherwise."""
    sides = {_side(n) for n in names if n} | {g.lower() for g in _SIDE_GROUP.findall(text)}
    if not {"d", "g"} <= sides:
        return frozenset()
    return frozenset(
        base_name(n)
        for n in names
        if (len(n) >= 2 or _NET_LETTER.match(n))
        and step_rank(n) is None
        and name_key(n) not in _EPOCH_NAMES
        and not _NOT_A_PART.match(n)
        and not n.startswith(("(avg)", PERCENT))
        and not _SCORE_TAIL.search(n)
    )


#: a label over the losses printed after it (Hopenet's `Losses: Yaw 161.4, Pitch 180.9, Roll 41.3`, `Loss: cls 0.3
#: reg 0.2`): a loss word and its colon followed by a name, not by the value (`loss: 2.3`, `loss: nan`)
_PARTS_HEADING = re.compile(r"\b(?:loss|losses|loss terms|loss components)\s*:\s*(?=(?!(?:nan|inf)\b)[A-Za-z])", re.I)


def headed_parts(text: str, spans: Sequence[tuple[int, int]], names: list[str]) -> frozenset[str]:
    """The loss components a heading names (`Losses: Yaw #, Pitch #, Roll #`): every named number after
    the label but counters, timings, the LR and names that say loss themselves; two at least, a heading
    over one name is that loss's own name. The line prints no total: their sum is read as the loss."""
    m = _PARTS_HEADING.search(text)
    if m is None:
        return frozenset()
    parts = frozenset(
        base_name(n)
        for (a, _), n in zip(spans, names)
        if a >= m.end()
        and n
        and step_rank(n) is None
        and name_key(n) not in _EPOCH_NAMES
        and not _NOT_A_PART.match(n)
        and not _NOT_A_LOSS.match(n)
        and not n.startswith(("(avg)", PERCENT))
        and not _is_loss(name_key(n))
    )
    return parts if len(parts) >= 2 else frozenset()


#: a GAN line's measurements that are no loss: the discriminator's scores, outputs and accuracies (BasicSR's
#: `real_score`, `fake_score`, `out_d_real`, a `D_acc`), image quality
_SCORE_TAIL = re.compile(r"(?:^|[_ ])(?:score|scores|acc|accuracy|prob|psnr|ssim)$|^out_", re.IGNORECASE)


#: Chinese training prints in the words the names above are written in (`第3轮 损失: 0.41` is `epoch 3
#: loss: 0.41`): full-width punctuation first, then counters (`第N轮`, `第N步`), then metric words, the
#: longest first (训练损失 before 损失)
_ZH_PUNCT = str.maketrans({"：": ": ", "，": ", ", "；": "; ", "（": "(", "）": ")", "【": "[", "】": "]", "＝": "="})
_ZH_COUNTER = (
    (re.compile(r"第\s*(\d+)\s*(?:个\s*)?(?:轮次?|回合|周期|代|epoch)", re.IGNORECASE), r" epoch \1 "),
    (re.compile(r"第\s*(\d+)\s*(?:次迭代|步|次)"), r" step \1 "),
)
_ZH_WORDS = (
    ("训练次数", "train step"),
    ("训练步数", "train step"),
    ("训练损失", "train loss"),
    ("验证损失", "val loss"),
    ("验证集损失", "val loss"),
    ("测试损失", "test loss"),
    ("损失函数", "loss"),
    ("损失值", "loss"),
    ("平均损失", "avg loss"),
    ("总损失", "total loss"),
    ("损失", "loss"),
    ("迭代次数", "iter"),
    ("迭代", "iter"),
    ("步数", "step"),
    ("轮次", "epoch"),
    ("轮数", "epoch"),
    ("学习率", "lr"),
    ("梯度范数", "grad_norm"),
    ("准确率", "acc"),
    ("训练", "train"),
    ("验证", "val"),
    ("测试", "test"),
)
_ZH_ANY = re.compile("|".join(re.escape(w) for w, _ in _ZH_WORDS))
_ZH_MAP = dict(_ZH_WORDS)


def latin(text: str) -> str:
    """A line's Chinese metric words and punctuation in the English the slot names are read in; the
    line as it is when it holds none (one `isascii` test for the common case)."""
    if text.isascii() or _HAN.search(text) is None:
        return text  # a bar's blocks, accented words: as they are (a table's column spacing kept)
    text = text.translate(_ZH_PUNCT)
    for rx, repl in _ZH_COUNTER:
        text = rx.sub(repl, text)
    return _ZH_ANY.sub(lambda m: " " + _ZH_MAP[m.group(0)] + " ", text).strip()


_HAN = re.compile(r"[\u3000-\u303f\u4e00-\u9fff\uff00-\uffef]")
