"""Console text as a stream of clean segments: what a terminal, `nohup.out` or a paste holds.

A training console is not a file of lines. Progress bars redraw themselves with `\\r` (a whole run
of tqdm updates can be one "line" of megabytes with no newline), log lines carry colours, rank
prefixes (`[default7]:`, `[rank0]:`, `0: `), timestamps and logger names, and a paste wraps it all
in prose and Markdown code fences. `segments()` reads the file in fixed-size chunks, splits on both
`\\r` and `\\n`, caps each segment's length (the work per segment stays bounded whatever the input),
and `clean()` strips colours and leading prefixes once, so the line patterns never see them.
"""

from __future__ import annotations

import codecs
import re
from collections.abc import Iterator
from typing import IO, Protocol

#: longest segment kept; the rest of a longer one is dropped (no training line is this long)
MAX_SEGMENT = 16384
_CHUNK = 1 << 20


class Readable(Protocol):
    """What `segments` reads from: a binary file, or bytes read like one."""

    def read(self, n: int, /) -> bytes: ...


_ANSI = re.compile(r"\x1b\[[0-9;?]*[ -/]*[@-~]|\x1b[()][A-Z0-9]|\x1b[=>]")
#: `\x1b[A` (cursor up) marks a nested progress bar (an evaluation bar drawn under the training one)
CURSOR_UP = "\x1b[A"
_SPLIT = re.compile(r"\r\n|[\r\n]")

#: prefixes that come before a log line's content, stripped from the start (several may stack)
_PREFIX = re.compile(
    r"""\s*(?:
        \[(?:default|rank|Rank\ |RANK\ |node\ ?)?\d+\]:?          # [default7]:  [rank0]:  [Rank 0]
      | (?:rank)?\d{1,5}:\s(?=\s*[\[{<(]|\s*\d{4}-\d\d-\d\d)      # srun --label "0: " before a tag/time
      | \[?\d{2,4}[-/]\d\d[-/]\d\d[ T_]\d\d:\d\d:\d\d(?:[.,]\d+)?(?:Z|[+-]\d\d:?\d\d)?\]?  # timestamps (%y too)
      | \[?\d\d:\d\d:\d\d(?:[.,]\d+)?\]?(?=\s)                     # time only
      | \[(?:titan|DEBUG|INFO|WARNING|WARN|ERROR|CRITICAL|I|W|E|[\w.-]+\.py:\d+(?::\w+)?|[\w.|-]+\.py:\d+)\]
      | (?:DEBUG|INFO|WARNING|ERROR|CRITICAL)(?::[\w.]+)*:(?=\S)    # INFO:root:
      | -\ [\w.]+\ -\ (?:DEBUG|INFO|WARNING|ERROR|CRITICAL)\ -      # " - root - INFO - "
      | (?:DEBUG|INFO|WARNING|ERROR|CRITICAL)\ -                    # "INFO - "
      | \|\ *(?:TRACE|DEBUG|INFO|SUCCESS|WARNING|ERROR|CRITICAL)\ *\|   # loguru: "| INFO     | mod:fn:42 - "
        (?:\s*[\w.<>-]+(?::[\w.<>-]+)?:\d+\ +-(?=\s))?              # (YOLOX's "mod:42 - ")
      | (?<=\ {8})-\ (?=[A-Za-z])                                   # the same with its front blanked by a terminal
      | >(?=\s)                                                     # a Markdown quote
    )\s*""",
    re.VERBOSE,
)


#: a line that opens an evaluation section and holds nothing else (PaddlePaddle's `Eval begin...`, a
#: script's `Validating...`, `***** Running Evaluation *****`): a training-shaped line right after it is
#: the evaluation's (`step  50/157 - loss: 2.46`), not a training step
EVAL_SECTION = re.compile(
    r"^[\W_]*(?:(?:start(?:ing)?|begin(?:ning)?|running)\s+(?:to\s+)?)?"
    r"(?:eval(?:uat(?:e|es|ing|ion))?|validat(?:e|es|ing|ion)|valid|test(?:ing)?)\b"
    r"(?:[^\d]{0,40}|\s+(?:in|at|for|after)\s+(?:epoch|step|iter(?:ation)?)\s*\d+\W*)$",
    re.IGNORECASE,
)


#: glog's and absl's prefix (Caffe, TensorFlow's C++ side, JAX trainers: `I0812 10:00:00.123456 140123
#: trainer_lib.py:123] `), tried apart: only a line that starts with its letter can hold it
_GLOG_FIRST = frozenset("IWEF")
_GLOG = re.compile(r"[IWEF]\d{4} \d\d:\d\d:\d\d\.\d+\s+\d+ [\w.-]+:\d+\]\s*")

#: the characters a prefix can start with (a line starting otherwise has none: skip the pattern)
_PREFIX_FIRST = set("[0123456789 \t-<>|rDIWECF")


#: a number, however a cut left it (`0.958123` cut to `0.` or `0`): one `#` in a line's shape
_NUMBER_SHAPE = re.compile(r"\d+(?:\.\d*)?(?:[eE][+-]?\d+)?")


def cut_short(last: str, prev: str | None) -> bool:
    """Whether a text's last segment, which no line break ends, is a line cut in the middle (a log
    copied or killed mid-print, an excerpt cut at a byte count): its shape (numbers as `#`) is a
    proper beginning of the shape of the line before it (`| 800 | 0` after `| 760 | 0.958123 |`,
    an iteration line that stops at `global batch`), or a line of the same shape whose last number
    has fewer decimals than the line before printed there (`2000\t2.` after `1950\t2.301234`). Its
    last number may be cut (`0.958123` read as `0`), and a field it lacks is not one the trainer left
    out: such a line is not read. A last line of its own shape and precision (`loss: 2.3` after
    `loss: 2.4`) is read: nothing shows it was cut."""
    if not prev:
        return False
    a = _NUMBER_SHAPE.sub("#", last).rstrip()
    b = _NUMBER_SHAPE.sub("#", prev).rstrip()
    if a and a == b and a.endswith("#"):  # the same shape, ending in a number: shorter and with fewer
        # decimals than the line before printed there (`2.` after `2.301234`) is a cut number; a longer
        # one (`12345.6` after `2.41`) is a value of its own
        x, y = _last_number(last), _last_number(prev)
        return len(x) < len(y) and _decimals(x) < _decimals(y)
    return bool(a) and len(a) < len(b) and b.startswith(a)


def _last_number(line: str) -> str:
    m = list(_NUMBER_SHAPE.finditer(line.rstrip()))
    return m[-1].group(0) if m else ""


def _decimals(number: str) -> int:
    """How many digits follow the point in a number (0 without a point)."""
    return len(re.split(r"[eE]", number.split(".", 1)[1])[0]) if "." in number else 0


def segments(f: IO[bytes] | Readable) -> Iterator[str]:
    """Every `\\r`/`\\n`-separated segment of a binary stream, decoded leniently, at most
    MAX_SEGMENT characters each (raw: colours and prefixes still there)."""
    carry = ""
    prev: str | None = None  # the last whole segment (for a last one no line break ends: `cut_short`)
    skipping = False  # inside an over-long segment whose head was already yielded
    decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")  # a character cut by a chunk stays whole
    while True:
        chunk = f.read(_CHUNK)
        if not chunk:
            break
        text = carry + decoder.decode(chunk)
        parts = _SPLIT.split(text)
        carry = parts.pop()
        for part in parts:
            if skipping:
                skipping = False
                continue
            prev = part
            yield part[:MAX_SEGMENT]
        if len(carry) > MAX_SEGMENT:
            if not skipping:
                yield carry[:MAX_SEGMENT]
            skipping = True
            carry = ""
    if carry and not skipping and not cut_short(carry, prev):
        yield carry[:MAX_SEGMENT]


#: characters that print as nothing but split a token: zero-width space/joiners, word joiner, BOM,
#: variation selectors (a chat app turns `':` + space into an emoji presentation, U+FE0F, in pastes)
_INVISIBLE = dict.fromkeys([0x200B, 0x200C, 0x200D, 0x2060, 0xFEFF, *range(0xFE00, 0xFE10)])


def clean(segment: str) -> str:
    """The segment without colours, invisible characters and the prefixes in front of its content."""
    if "\x1b" in segment:
        segment = _ANSI.sub("", segment)
    if not segment.isascii():
        segment = segment.translate(_INVISIBLE)
    first = segment[:1]
    if first not in _PREFIX_FIRST:
        if first != "`":
            return segment.strip()
        segment = segment.strip().strip("`")  # a line pasted between Markdown code ticks: `[  1]  1440 || ...`
    pos = 0
    if first in _GLOG_FIRST:
        g = _GLOG.match(segment)
        pos = 0 if g is None else g.end()
    for _ in range(8):
        m = _PREFIX.match(segment, pos)
        if m is None or m.end() == pos:
            break
        pos = m.end()
    rest = segment[pos:].strip()
    if rest[:1] == "`" or rest[-1:] == "`" and rest.count("`") == 1:
        return rest.strip("`").strip()  # a paste's inline-code ticks behind a prefix (`> \`40245, 4.021: ...`)
    return rest
