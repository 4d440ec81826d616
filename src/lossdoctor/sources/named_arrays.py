"""Series printed as named arrays: a whole run's losses in one list under a name.

People paste what their script kept rather than what it printed each step: Keras's
`print(history.history)` (`{'loss': [0.69, 0.55, ...], 'val_loss': [...]}`), the same dict dumped to a
`history.json`, a course notebook's `{'costs': [...]}`, `losses = [tensor(2.31), ...]`. Each array is
one series and its positions are the rows. The arrays are turned into one line per position
(`loss: 0.69, val_loss: 0.60`) and read by the general text reader, so names, the training loss's
choice and the evaluation split follow the same rules as any printed log (`any_text.read_arrays`).

A position is an epoch when the loss has a `val_` twin of its length (Keras's history: one
validation per epoch); otherwise the rows are numbered, as for any log without a step counter."""

from __future__ import annotations

import bisect
import re
from pathlib import Path

from .files import head, looks_binary

#: an array needs this many numbers to be a series (two are a pair of settings: Adam's betas) ...
MIN_VALUES = 3
#: ... or this many when it is one of a history's twins (`loss` and `val_loss` of the same length: two
#: epochs of Keras's history)
PAIRED_VALUES = 2
#: a file is a dump of arrays (its own reader) when at least this share of its first numbers sit
#: inside named arrays: a log that prints one list among its step lines is the general reader's
DUMP_SHARE = 0.8
#: the most text read for arrays (a history of a million epochs is 20 MB)
MAX_BYTES = 64 << 20

_NUMBER = r"[-+]?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][-+]?\d+)?|[-+]?(?:nan|inf(?:inity)?)"
#: `name: [`, `'name': [`, `"name" = np.array([`, `name = tensor([`: a name, then the array's opening
_OPEN = re.compile(r"""(?<![\w.])['"]?([A-Za-z_][\w./-]{0,60})['"]?\s*[:=]\s*(?:[\w.]{1,20}\(\s*)?\[""")
#: a number wrapped in its type: `np.float32(0.69)`, `tensor(0.69, device='cuda:0', grad_fn=<MeanBackward0>)`
_WRAPPED = re.compile(rf"[A-Za-z_][\w.]{{0,30}}\(\s*({_NUMBER})\s*(?:,[^()\[\]]*)?\)", re.IGNORECASE)
_VALUE = re.compile(rf"^(?:{_NUMBER})$", re.IGNORECASE)
_ANY_NUMBER = re.compile(r"(?<![\w.])[-+]?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][-+]?\d+)?")
_QUOTE_MARK = re.compile(r"^[ \t]*>[ \t]?", re.MULTILINE)
LOSS_NAME = re.compile(r"loss|cost|error|objective|nll|perplexity|ppl", re.IGNORECASE)
_EVAL_FIRST = re.compile(r"(?:val|valid|validation|eval|test|dev)[ _]", re.IGNORECASE)


def find(text: str) -> dict[str, list[float]]:
    """Every named array of >= MIN_VALUES numbers in `text`, by name, first occurrence kept (an LR sweep
    printing `costs` once per rate: the first run is read, not the sweep spliced into one series).
    Each array runs from its `[` to the next `]`; one with another `[` before that is nested (a matrix)
    and skipped. The brackets are found once, so a text of many openings and no closing stays linear."""
    out: dict[str, list[float]] = {}
    text = _QUOTE_MARK.sub("", text)  # an array pasted into a Markdown quote: `> ` opens each of its lines
    opens = [m.start() for m in re.finditer(r"\[", text)]
    closes = [m.start() for m in re.finditer(r"\]", text)]
    for m in _OPEN.finditer(text):
        name = m.group(1)
        if name in out:
            continue
        k = bisect.bisect_left(closes, m.end())
        if k == len(closes):
            break  # no array closes after this one: none that follows can either
        end = closes[k]
        j = bisect.bisect_left(opens, m.end())
        if j < len(opens) and opens[j] < end:
            continue  # nested arrays: a matrix, not a series
        values = _numbers(text[m.end() : end])
        if values is not None and len(values) >= PAIRED_VALUES:
            out[name] = values
    histories = _history_lengths(out)
    return {k: v for k, v in out.items() if len(v) >= MIN_VALUES or len(v) in histories}


def _history_lengths(arrays: dict[str, list[float]]) -> set[int]:
    """The lengths at which a loss-named array and its `val_` twin are both printed: a history's epochs
    (Keras's after two epochs), whose other arrays of that length are its metrics."""
    return {len(v) for k, v in arrays.items() if LOSS_NAME.search(k) and len(arrays.get(f"val_{k}", ())) == len(v)}


def _numbers(inner: str) -> list[float] | None:
    """The array's values, or None when anything in it is not a number (a list of words or paths)."""
    cells = [c.strip() for c in re.split(r"[,\s]+", _WRAPPED.sub(r"\1", inner)) if c.strip()]
    if not cells or not all(_VALUE.match(c) for c in cells):
        return None
    return [float(c) for c in cells]


def singular(name: str) -> str:
    """The name of one of the array's values: `costs` holds a cost per row, `val_losses` a val_loss."""
    for plural, one in _PLURALS:
        if name.lower().endswith(plural):
            return name[: len(name) - len(plural)] + one
    return name


#: (ending, its singular), tried in order: `losses` -> `loss`, `accuracies` -> `accuracy`, `costs` -> `cost`
_PLURALS = (("sses", "ss"), ("ies", "y"), ("ss", "ss"), ("s", ""))


def lines(arrays: dict[str, list[float]]) -> list[str]:
    """One line per position of the longest loss-named array (a training one before `val_loss`, whichever
    the dict prints first), holding every array of that length."""
    main = max(arrays, key=lambda k: (bool(LOSS_NAME.search(k)), not _EVAL_FIRST.match(k), len(arrays[k])))
    n = len(arrays[main])
    names = [k for k, v in arrays.items() if len(v) == n]
    by_epoch = any(k.lower() in (f"val_{main.lower()}", f"val {main.lower()}") for k in names)
    out = []
    for i in range(n):
        cells = ", ".join(f"{singular(k)}: {arrays[k][i]!r}" for k in names)
        out.append(f"epoch {i + 1}: {cells}" if by_epoch else cells)
    return out


def is_dump(p: Path) -> bool:
    """Most of the file's first numbers are inside named arrays, one of them a loss's."""
    if not p.is_file():
        return False
    data = head(p, 65536)
    if looks_binary(data):
        return False
    text = data.decode("utf-8", "replace")
    arrays = find(text)
    if not any(LOSS_NAME.search(k) for k in arrays):
        return False
    inside = sum(len(v) for v in arrays.values())
    return inside >= DUMP_SHARE * len(_ANY_NUMBER.findall(text))
