"""The prefix a text puts in front of every line, learned from the text itself, and a stream without it.

Whatever wrote a log often puts the same thing in front of each line: a logging format
(`2024-05-01 12:00:01,123 - INFO - train - `), a launcher's tag (`[1,0]<stdout>:`, `node12: `,
`trainer_1  | `), a viewer's line number from a copy-paste (`  12 | `). `console_text.clean` knows
the common ones by their look; a list of such patterns never ends, so the prefix is also learned
from the text's own repeated leading template: the longest start of a line, cut at a separator
(`:`, `|`, `>`, ` - `), whose shape (digits as `#`) most lines share. It is a prefix, not the log's
content, only when it is one of what prefixes are made of:

- a **constant tag**: the same characters on most lines (`node12: `, `[1,0]<stdout>:`);
- a **clock**: its varying numbers include a time or a date (`#:#:#`, `#-#-#`);
- a **line counter**: a number and a bar on every line, counting the lines (a viewer's line numbers).

and it names no metric or counter (`loss`, `step`, `epoch`, ...) and holds none of a record's
punctuation (`{`, `=`, quotes, `N/TOTAL`): a training line's own start (`Epoch 3: `, darknet's
` 12: 2.31, ...`, whose leading number is the step) is never taken for a prefix.

`Stripped` wraps a binary stream and removes the prefix from the start of every line (after each
`\\n`, where a terminal starts a line: a `\\r` redraw carries none), so every reader downstream,
the fast template path included, sees the lines as the program printed them.
"""

from __future__ import annotations

import re
from collections import Counter
from pathlib import Path
from typing import IO

from .console_text import Readable
from .files import head

#: lines of the head sampled to learn the prefix
SAMPLE_LINES = 300
#: the share of the sampled non-blank lines that must carry the prefix
SHARE = 0.8
#: fewer non-blank lines than this: no prefix learned (under five lines, SHARE means every line)
MIN_LINES = 2
#: the prefix ends within this many characters of the line's start
MAX_LEN = 80

#: where a prefix may end: after a separator (`:`, `|`, `>`, a dash between spaces) and its spaces, or a
#: bracket and a space; never between two digits (`12:00:01`); before one (`<stdout>:50000/50000`) yes
_BOUNDARY = re.compile(r"(?:(?<!\d)[:|>\u2502]|[:|>\u2502](?=[ \t])|\s-)[ \t]*|\][ \t]+")
_DIGITS = re.compile(r"\d+")
_SPACES = re.compile(r"[ \t]+")
#: the varying numbers a prefix may hold, each a slot of its shape: a date, glog's level and date
#: (`I1203`), a time of day, a source line (`train.py:88`, `trainer:42]`, `line 88`), a level
_METER = r"^\[(?:(?=[^\]]*(?:%|-{3}|={3}|#{3}))[ \d.%=#>-]*| [A-Z]+ {2,})\]"
_LEVELS = r"(?:TRACE|DEBUG|INFO|SUCCESS|NOTICE|WARN|WARNING|ERROR|CRITICAL|FATAL)"
_SLOTS = (
    ("\x01", r"\d{2,4}[-/]\d\d[-/]\d{2,4}", r"\d{2,4}[-/]\d\d[-/]\d{2,4}"),
    ("\x02", r"\b[IWEF]\d{4}\b", r"[IWEF]\d{4}"),
    ("\x03", r"\d{1,2}:\d\d(?::\d\d)?(?:[.,]\d+)?", r"\d{1,2}:\d\d(?::\d\d)?(?:[.,]\d+)?"),
    ("\x04", r"(?<=[A-Za-z_]:)\d+(?=[\]\s:])|(?<=\bline )\d+", r"\d+"),
    ("\x06", rf"\b{_LEVELS}\b", _LEVELS),  # a logging level: it changes line by line (INFO, SUCCESS)
    # a progress meter in brackets opening the line, a percentage or a bar's fill, never a bare number,
    # or a fixed-width tag (xLearn's `[   10%      ]` rows under a `[------------]` header, between
    # `[ ACTION     ]` lines; `[100] loss` keeps its step, `[TRAIN]` its set)
    ("\x07", _METER, _METER),
)
_LINE_SLOT = ("\x05", r"\d+")
_SLOT_RX = [(mark, re.compile(rx)) for mark, rx, _ in _SLOTS]
_SLOT_PATTERN = {mark: pattern for mark, _, pattern in _SLOTS} | dict([_LINE_SLOT])
#: what a line's content holds and a prefix never does
_CONTENT_CHARS = re.compile(r"[{}=\"'()%]|\d/\d|\d\.\d")
_CONTENT_WORDS = re.compile(
    r"loss|step|iter|epoch|batch|\blr\b|learning|acc|norm|grad|perplex|ppl|reward|score|metric|total|avg|mean|cost|"
    r"\b(?:ep|up|it|itr)\b",  # Marian's `Ep. 7 : Up. 306350 :`
    re.IGNORECASE,
)
#: a value spelt as a word
_VALUE_WORD = re.compile(r"\b(?:nan|inf|infinity|none|true|false)\b", re.IGNORECASE)
#: a data set's name: content where it starts the prefix, ends it as a key or is bracketed (`Train:`,
#: `[TRAIN]`), not as a logger's name (`- INFO - train - `, `bert_sentiment.train:train:86`)
_SETS = r"(?:train(?:ing)?|test(?:ing)?|val(?:id(?:ation)?)?|eval(?:uation)?|dev)"
_SET_KEY = re.compile(rf"^[^\w\x01-\x06]*{_SETS}\b|\[\s*{_SETS}\s*\]|(?<![\w.:]){_SETS}\s*:\s*$", re.IGNORECASE)
#: a bar right after another separator: a table's first cell border behind a tag (`node12: | 0 | 38.2 |`)
_AFTER_TAG = re.compile(r"[:|>\]-]\s*[|\u2502]$")
_LEVEL = re.compile(r"^(?:TRACE|DEBUG|INFO|SUCCESS|NOTICE|WARN|WARNING|ERROR|CRITICAL|FATAL|STDOUT|STDERR)$")
#: two plain words in a row: prose (`Train net output`, `number of examples`), a line's content
_PROSE = re.compile(r"(?<![\w.])([A-Za-z]+) ([A-Za-z]+)(?![\w.])")
#: a line counter's shape: a viewer's `  12 | ` (on every line: a table's first column of steps, `1 | 2.31`, leaves
#: out its header)
_COUNTER = re.compile(r"^\d+ ?[|\u2502] ?$")
_LINE_NO = "\x05"
#: a prefix must hold a letter or a digit (punctuation alone, `| ` or `> `, is a table's or a quote's)
_ALNUM = re.compile(r"[^\W_]")


def _shape(s: str) -> str:
    """`s` with its dates, times and source lines as slots and its runs of spaces as one space:
    the same on every line a logging format starts, where a line's own numbers differ."""
    for mark, rx in _SLOT_RX:
        s = rx.sub(mark, s)
    return _SPACES.sub(" ", s).strip()


def _candidates(line: str) -> list[tuple[int, str]]:
    """(end, shape) of each start of `line` cut at a separator within MAX_LEN characters (the whole
    line too: a blank line behind a viewer's line number is that number alone)."""
    out = [(m.end(), _shape(line[: m.end()])) for m in _BOUNDARY.finditer(line, 0, MAX_LEN)]
    if out and _COUNTER.match(out[0][1]):  # a line counter: its number a slot
        out[0] = (out[0][0], _DIGITS.sub(_LINE_NO, out[0][1]))
    return out


def _acceptable(shape: str) -> bool:
    """Whether a shape is made of what prefixes are made of (see the module's docstring)."""
    plain = shape
    for mark in _SLOT_PATTERN:
        plain = plain.replace(mark, "0")
    if not _ALNUM.search(plain) or _CONTENT_CHARS.search(shape) or _CONTENT_WORDS.search(shape):
        return False
    if shape.startswith("|") or _VALUE_WORD.search(shape):
        return False  # a table's row (`| mse | nan |`), a value
    if any(not (_LEVEL.match(a) or _LEVEL.match(b)) for a, b in _PROSE.findall(shape)):
        return False
    if _SET_KEY.search(shape) or _AFTER_TAG.search(shape):
        return False
    last = re.search(r"([\w.\x01-\x06\]>)-]+):\s*$", shape)
    if last is not None:  # `word:` at the end: a key (`eta:`, `Progress:`) unless a level, a tag or a logger
        w = last.group(1)
        if not (_LEVEL.match(w) or re.search(r"[\d.\]>)\x01-\x06]", w) or shape[: last.start()].endswith(":")):
            return False
    return True


def learn(sample: str) -> re.Pattern[bytes] | None:
    """The pattern of the prefix most lines of `sample` (a text's head) start with, or None; None
    too where `console_text.clean` already strips it from most lines (a prefix it knows)."""
    lines = sample.split("\n")[:SAMPLE_LINES]
    if len(lines) > 1:
        lines = lines[:-1]  # the head's last line may be cut
    seen = [(i, line.rstrip("\r")) for i, line in enumerate(lines) if line.strip()]
    if len(seen) < MIN_LINES:
        return None
    shapes: Counter[str] = Counter()
    cuts: dict[int, dict[str, int]] = {}
    for i, line in seen:
        cuts[i] = {s: end for end, s in _candidates(line)}
        shapes.update(cuts[i].keys())
    need = SHARE * len(seen)
    for shape, n in sorted(shapes.items(), key=lambda kv: -len(kv[0])):
        if n < need or not _acceptable(shape):
            continue
        carriers = [(i, line, cuts[i][shape]) for i, line in seen if shape in cuts[i]]
        if shape.startswith(_LINE_NO) and not (len(carriers) == len(seen) and _counts_lines(carriers)):
            continue
        if _DIGITS.search(shape) and not _constant_numbers(carriers, need):
            continue
        return None if _known(carriers) else _pattern(shape)
    return None


def _constant_numbers(carriers: list[tuple[int, str, int]], need: float) -> bool:
    """Whether most carriers' prefixes hold the same numbers (a tag's `node12`, a process id)."""
    seen = Counter(tuple(_DIGITS.findall(_shape(line[:end]))) for _, line, end in carriers)
    return seen.most_common(1)[0][1] >= need


def _counts_lines(carriers: list[tuple[int, str, int]]) -> bool:
    """Whether the number of each prefix is its line's number (plus one constant)."""
    offsets: Counter[int] = Counter()
    for i, line, _ in carriers:
        m = _DIGITS.search(line)
        if m is None:
            return False
        offsets[int(m.group(0)) - i] += 1
    return offsets.most_common(1)[0][1] >= SHARE * len(carriers)


def _known(carriers: list[tuple[int, str, int]]) -> bool:
    """Whether `clean` strips at least this prefix from most lines already: then nothing is learned,
    so a text whose prefix the readers know reads as it always did."""
    from .console_text import clean

    n = sum(1 for _, line, end in carriers if len(clean(line)) <= len(line[end:].strip()))
    return n >= SHARE * len(carriers)


def _pattern(shape: str) -> re.Pattern[bytes]:
    """A pattern for the prefix at a line's start: its words and separators as they are, any run of
    spaces as any spaces, a slot (a clock's, a line counter's) as what fills it."""
    parts = [r"[ \t]*"]
    for tok in re.split(r"( |[\x01-\x06]|\d+)", shape):
        if not tok:
            continue
        if tok == " ":
            parts.append(r"[ \t]*")
        elif tok in _SLOT_PATTERN:
            parts.append(_SLOT_PATTERN[tok])
        else:
            parts.append(re.escape(tok))
    # (after a Markdown quote's `> ` too: a paste quoted on its first line only, GitHub's lazy continuation)
    return re.compile(("(?m)^(?:>[ \t]?)?" + "".join(parts) + r"[ \t]?").encode())


class Stripped:
    """A binary stream read like the one it wraps, with `prefix` removed from the start of each line."""

    def __init__(self, f: IO[bytes] | Readable, prefix: re.Pattern[bytes]) -> None:
        self.f, self.rx, self.carry, self.done = f, prefix, b"", False

    def read(self, n: int, /) -> bytes:
        while not self.done:
            chunk = self.f.read(n)
            if not chunk:
                self.done = True
                break
            data = self.carry + chunk
            cut = data.rfind(b"\n") + 1
            if cut:  # whole lines: the prefix of each stripped; the rest waits for its line's end
                self.carry = data[cut:]
                return self.rx.sub(b"", data[:cut])
            self.carry = data
        out, self.carry = self.carry, b""
        return self.rx.sub(b"", out) if out else b""


#: the head a prefix is learned from
HEAD_BYTES = 65536


def strip_bytes(data: bytes) -> bytes:
    """`data` (a text's head) without the prefix it learns from itself."""
    rx = learn(data[:HEAD_BYTES].decode("utf-8", "replace"))
    return data if rx is None else rx.sub(b"", data)


def learned(path: Path) -> re.Pattern[bytes] | None:
    """The prefix of the text file at `path`, learned from its head (None: none learned)."""
    return learn(head(path, HEAD_BYTES).decode("utf-8", "replace"))


def opened(f: IO[bytes], path: Path) -> IO[bytes] | Stripped:
    """The open text file `f` at `path`, read without the prefix its lines carry (itself when none)."""
    rx = learned(path)
    return f if rx is None else Stripped(f, rx)
