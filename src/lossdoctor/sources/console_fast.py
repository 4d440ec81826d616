"""The console reader's fast path: runs of lines of one learned shape read in bulk.

A training console repeats one line a million times, `iter 41: loss 2.3456, time 120.50ms, mfu
38.12%`, with only its numbers changing. The line parser (`stdout.ConsoleParser`) reads the first
one word by word; when it took that line as a plain step row (a step counter and training metrics,
nothing else: no prefix to strip, no bar, no evaluation or component loss), `learn` turns the line
into a *template*: its text, with each number replaced by a pattern of the same kind (digits for an
integer, digits.digits for a decimal, the exponent kept; `nan`/`inf` stay words), the numbers the
row used captured. A line the template matches is a line the parser would read the same way (the
parser's decisions depend on the words around the numbers and on the kind of each number, and the
template fixes both), so `feed_stream` hands whole runs of such lines to the parser at once
(`ConsoleParser.bulk`): one regex pass over a chunk of the file, the captured numbers converted by
numpy, no string per line. Every other line goes through the line parser as before, in order, so the
parser's state (the last counter, a row waiting for its step) is what it would have been.

`FAST = False` turns the fast path off (the tests compare both ways on the same logs).
"""

from __future__ import annotations

import codecs
import itertools
import re
from collections.abc import Iterable
from dataclasses import dataclass
from typing import IO, Any

import numpy as np
import orjson

from .console_lines import _HF_ITEM, _NUMBER, METRICS, _dict_key
from .console_text import MAX_SEGMENT, Readable, cut_short

#: the fast path on (the tests read the same logs with it off and compare)
FAST = True
#: at most this many line shapes are learned per log (a log has a few; a log whose every line has a
#: new shape gets no template after these)
MAX_TEMPLATES = 8
#: lines longer than this are not learned (a training step line is a few hundred characters)
MAX_TEMPLATE_LINE = 1024
_CHUNK = 1 << 20
_FIRST_CHUNK = 1 << 16
_SPLIT_B = re.compile(rb"\r\n|[\r\n]")
_SPLIT_KEEP = re.compile(r"(\r\n|[\r\n])")
_SPLIT_KEEP_B = re.compile(rb"(\r\n|[\r\n])")
_SPLIT = re.compile(r"\r\n|[\r\n]")


@dataclass
class Template:
    """A learned line shape: `rx` (over bytes: a bytes pattern runs faster than a str one) matches
    one whole line and its newline, with the used numbers captured in `cols` order."""

    rx: re.Pattern[bytes]
    cols: tuple[str, ...]  # the captured numbers' columns, in the line's order ("step" among them)
    dialect: str


def _kind(tok: str) -> str:
    """A pattern matching the numbers of the same kind as `tok` (same sign, same parts)."""
    if tok.lstrip("+-").isalpha():
        return re.escape(tok)
    out = re.escape(tok[0]) if tok[0] in "+-" else ""
    body = tok.lstrip("+-")
    mant, e, exp = body.partition("e") if "e" in body else body.partition("E")
    whole, dot, frac = mant.partition(".")
    out += r"\d+" if whole else ""
    out += (r"\.\d+" if frac else r"\.") if dot else ""
    if e:
        out += re.escape(e) + (re.escape(exp[0]) if exp[:1] in "+-" else "") + r"\d+"
    return out


def learn(text: str, row: dict[str, Any], fields: tuple[tuple[str, int, int, int], ...]) -> Template | None:
    """The template of a line the parser read as a plain step row (`row`, from the plan `fields`:
    (column, start, end, rank) of the numbers it used), or None when the row is not one."""
    if (
        len(text) > MAX_TEMPLATE_LINE
        or not text.isascii()
        or any(k not in ("step", "_dialect") and k not in METRICS for k in row)
    ):
        return None
    used = {(a, b): col for col, a, b, _ in fields}
    if sum(col == "step" for col in used.values()) != 1 or row.get("step") is None:
        return None
    parts: list[str] = []
    cols: list[tuple[int, str]] = []
    prev = 0
    for m in _NUMBER.finditer(text):
        parts.append(re.escape(text[prev : m.start()]))
        col = used.get((m.start(), m.end()))
        pat = _kind(m.group())
        if col is not None:
            if col == "step" and not m.group().lstrip("+").isdigit():
                return None
            cols.append((len(cols), col))
            parts.append(f"({pat})")
        else:
            parts.append(f"(?:{pat})")
        prev = m.end()
    parts.append(re.escape(text[prev:]))
    if len(cols) != len(used):
        return None
    body = "".join(parts).encode("ascii")
    try:
        rx = re.compile(rb"^" + body + rb"\r?\n", re.M)
    except (re.error, RecursionError, OverflowError):
        return None
    return Template(rx, tuple(c for _, c in cols), str(row["_dialect"]))


@dataclass
class DictTemplate:
    """A learned shape of the Hugging Face Trainer's log dict: `rx` matches the whole segment, its
    groups are the values of `keys` (a metric column or "epoch")."""

    rx: re.Pattern[str]
    keys: tuple[str, ...]

    def row(self, m: re.Match[str]) -> dict[str, Any]:
        """The row `console_lines.hf_dict` makes of a matching segment."""
        row: dict[str, Any] = {k: float(v) for k, v in zip(self.keys, m.groups())}
        row["step"] = None
        return row


#: words that send a line to another parser before the dict one (`ConsoleParser._line`)
_EARLIER = ("iteration", "step=", "VERFLOW", "verflow", "[", "argument", "NeoXArgs")


def learn_dict(text: str, row: dict[str, Any]) -> DictTemplate | None:
    """The template of a segment `hf_dict` read as a training row with no step (`row`), or None: every
    value it used is a plain number, no column is named twice, nothing else reads the line first."""
    if (
        not (text.startswith("{'") and text.endswith("}"))
        or len(text) > MAX_TEMPLATE_LINE
        or not text.isascii()
        or any(w in text for w in _EARLIER)
        or row.get("step") is not None
        or any(k not in METRICS and k not in ("step", "epoch") for k in row)
    ):
        return None
    parts: list[str] = []
    keys: list[str] = []
    prev = 0
    for item in _HF_ITEM.finditer(text, 1, text.rfind("}")):
        hit = _dict_key(item.group(1))
        value = item.group(2)
        tok = _NUMBER.fullmatch(value.strip())
        if hit is None or tok is None or value != value.strip() or hit[0] == "step":
            if hit is not None:
                return None  # a used value that is no plain number (quoted, wrapped): not learned
            continue
        col = hit[0]
        if col in keys:
            return None
        parts.append(re.escape(text[prev : item.start(2)]))
        parts.append(f"({_kind(value)})")
        keys.append(col)
        prev = item.end(2)
    parts.append(re.escape(text[prev:]))
    if sorted(keys) != sorted(k for k in row if k != "step"):
        return None
    try:
        return DictTemplate(re.compile("".join(parts)), tuple(keys))
    except (re.error, RecursionError, OverflowError):
        return None


#: a separator (`\r\n`, `\r`, `\n`). Its `\n` after a `\r` is possessive: in a cycle a blank segment may
#: stand after every separator, so giving that `\n` back (a `\r`, then an empty segment) could lead
#: to no other match; without the backtracking point the cycle's match is about a sixth cheaper
_SEP = rb"(?:\r\n?+|\n)"
#: a run of blanks, `[ \t]*+`: its spaces first taken by a one-character loop (the cheapest there is),
#: then any tabs and what follows them; the same characters taken
_BLANKS = rb" *+[ \t]*+"
#: `stdout._PLAIN_BAR` over bytes after its leading blanks (a segment: no separator inside), its
#: counter and total captured. A segment of a cycle is `[ \t]*` and then this or nothing: blanks and
#: bars share their leading blanks, so no run of spaces is tried twice
_BAR_BODY = rb"\d{1,3}%\|[^\[\]|=\x1b\r\n]*+\| *+(\d+)/(\d+) \[(?:\d+:)?\d+:\d\d[^\]=\x1b\r\n]*+\]" + _BLANKS
_BAR_BODY_NC = _BAR_BODY.replace(rb"(\d+)", rb"\d+")
#: a bar's counter and total, in whole segments known to be blanks or bars (starts on a literal)
_BARS = re.compile(rb"\| *(\d+)/(\d+) \[(?:\d+:)?\d+:\d\d")
_BAR_COUNTERS = re.compile(rb"\| *(\d+)/\d+ \[(?:\d+:)?\d+:\d\d")


@dataclass
class Cycle:
    """The Trainer's console cycle with its progress bar on: a log dict of a learned shape, then the
    bar redrawn (blank segments where `tqdm.write` cleared it). `rx` matches one cycle: groups are
    the dict's values, the first bar's counter and total, the next bar's counter and total (None when
    the first is followed by no bar before another kind of segment), and the rest of the bars."""

    rx: re.Pattern[bytes]
    dict: DictTemplate


def cycle_of(t: DictTemplate) -> Cycle:
    body = t.rx.pattern.encode("ascii")
    # the segment's start: right after a separator (or the data's start), checked after the dict's
    # opening `{'` so the search runs on that literal (a look-behind first would cost at every byte)
    assert body.startswith(rb"\{'")
    start = rb"\{'(?<![^\r\n]\{')" + body[3:]
    blank = _BLANKS + _SEP
    # possessive quantifiers (`*+`) where giving characters back can never lead to a match: the
    # same matches, without the backtracking. After the first bar: blank segments, a bar (its numbers
    # captured: the parser's bar redrawn for the next step, so that its counter needs no search),
    # then any blank or bar segments; greedy and with nothing after, they take what `(blank | bar)*`
    # takes
    rx = re.compile(
        start
        + _SEP
        + rb"(?:"
        + blank
        + rb")*"
        + _BLANKS
        + _BAR_BODY
        + _SEP
        + rb"(?:"
        + blank
        + rb")*(?:"
        + _BLANKS
        + _BAR_BODY
        + _SEP
        + rb")?((?:"
        + _BLANKS
        + rb"(?:"
        + _BAR_BODY_NC
        + rb")?"
        + _SEP
        + rb")*)"
    )
    return Cycle(rx, t)


@dataclass
class CycleValues:
    """What the parser keeps of a run of matched cycles (`cycle_values`)."""

    cols: dict[str, np.ndarray]  # the dict's columns, "epoch" apart
    epoch: float | None  # the first cycle's epoch (None: the dict has no epoch)
    steps: np.ndarray  # each cycle's first bar's counter
    top: float  # the largest counter of all the bars
    last: tuple[float, float]  # the last bar's counter and total


def cycle_values(c: Cycle, groups: list[Any]) -> CycleValues:
    """What the parser keeps of matched cycles, from their groups one after the other (`groups`, as
    `Cycle.rx` captures them). Each kept column's numbers are parsed in one call (no Python step per
    cycle); what is not kept is not parsed: the epochs but the first, the totals but the last, of the
    redraws only the counters."""
    g = c.rx.groups
    k = len(c.dict.keys)
    n = len(groups) // g
    cols = {key: numbers(groups[j::g], n) for j, key in enumerate(c.dict.keys) if key != "epoch"}
    epoch = float(numbers([groups[c.dict.keys.index("epoch")]], 1)[0]) if "epoch" in c.dict.keys else None
    steps = numbers(groups[k::g], n)
    redrawn = groups[k + 2 :: g]
    rest = groups[g - 1 :: g]
    counters = _BAR_COUNTERS.findall(b"".join(rest))
    # a redraw the cycle did not hold: None from a split, b"" from a findall (both paths feed this)
    drawn = [x for x in redrawn if x]
    if not counters and not drawn:
        return CycleValues(cols, epoch, steps, float(steps.max()), (float(steps[-1]), _number(groups[k + 1 - g])))
    counters += drawn
    top = max(float(steps.max()), float(numbers(counters, len(counters)).max()))
    return CycleValues(cols, epoch, steps, top, _last_bar(groups, g, k))


def _last_bar(groups: list, g: int, k: int) -> tuple[float, float]:
    """The (counter, total) of the last bar after a first one, looked for from the last cycle back
    (there is one)."""
    for i in range(len(groups) - g, -1, -g):
        found = _BARS.findall(groups[i + g - 1])
        if found:
            return _number(found[-1][0]), _number(found[-1][1])
        if groups[i + k + 2] is not None:
            return _number(groups[i + k + 2]), _number(groups[i + k + 3])
    raise AssertionError("no bar after a first one")


def _number(token: bytes) -> float:
    """One captured number, parsed as `numbers` parses it."""
    return float(numbers([token], 1)[0])


def _tokens(found: list) -> list:
    """The captured numbers of `findall`'s matches, one after the other (a match's tuple flattened)."""
    return list(itertools.chain.from_iterable(found)) if found and isinstance(found[0], tuple) else found


def feed_stream(f: IO[bytes] | Readable, parser: Any) -> None:
    """Feed a binary stream to `parser` (its `feed(segment)` for single segments, `bulk(template,
    values)` for runs of learned lines), every segment cut as `console_text.segments` cuts it (split
    at `\r`, `\n` and `\r\n`, decoded leniently, its first MAX_SEGMENT characters). A chunk is cut
    at its last separator, so no segment and no UTF-8 character is split between two chunks."""
    carry = b""
    prev: str | None = None  # the last whole segment (for a last one no line break ends: `cut_short`)
    skipping = False  # inside an over-long segment whose head was already fed
    size = _FIRST_CHUNK  # small at first: the lines read before a shape is learned are read one by one
    while True:
        chunk = f.read(size)
        size = _CHUNK
        if not chunk:
            break
        data = carry + chunk
        last = max(data.rfind(b"\n"), data.rfind(b"\r"))
        if last < 0:
            carry = data
        else:
            carry, body = data[last + 1 :], data[: last + 1]
            if skipping:  # the rest of an over-long segment, up to its separator
                cut = _SPLIT_B.search(body)
                body = body[cut.end() :] if cut is not None else b""
                skipping = False
            _feed_bytes(body, parser)
            prev = _last_segment(body) or prev
        if len(carry) > 4 * MAX_SEGMENT + 4:  # more than MAX_SEGMENT characters, whatever they are
            if not skipping:
                parser.feed(_decode(carry)[:MAX_SEGMENT])
            skipping = True
            carry = b""
    if carry and not skipping and not cut_short(_decode(carry), prev):
        parser.feed(_decode(carry)[:MAX_SEGMENT])


def _last_segment(body: bytes) -> str | None:
    """The last segment of `body` (which ends with a separator), decoded; None when it is empty."""
    end = len(body.rstrip(b"\r\n"))
    seg = body[max(body.rfind(b"\n", 0, end), body.rfind(b"\r", 0, end)) + 1 : end]
    return _decode(seg) if seg.strip() else None


def _decode(data: bytes) -> str:
    """UTF-8, a bad byte as U+FFFD; an incomplete character at the end left out (as the incremental
    decoder of `segments` leaves it)."""
    return codecs.getincrementaldecoder("utf-8")(errors="replace").decode(data)


def _feed_bytes(data: bytes, parser: Any) -> None:
    """Feed `data` (whole segments: it ends with a separator): runs of learned lines in bulk, every
    other segment through the line parser, in order."""
    pos = 0
    while pos < len(data):
        pos = _feed_from(data, pos, parser)


def _feed_from(data: bytes, pos: int, parser: Any) -> int:
    """Feed `data[pos:]` until the line parser learns a new shape (then the runs are looked for again
    from there); returns where it stopped."""
    view = data[pos:] if pos else data
    templates = parser.templates if FAST and parser.can_bulk() else []
    cycles = parser.cycles() if FAST and parser.can_bulk() else []
    at = 0
    runs = _runs(templates, view) if templates else []
    if cycles and not runs:
        runs = _cycle_runs(cycles, view)
    for start, stop, t, found in runs:
        if isinstance(t, Cycle):
            if start > at:
                done = _feed_slow(view, at, start, parser)
                if done < start:
                    return pos + done
            groups = found if found is not None else _tokens(t.rx.findall(view, start, stop))
            if not parser.bulk_cycles(t, groups, _segments_in(view, start, stop)):
                _feed_slow(view, start, stop, parser, early=False)
            at = stop
            continue
        if start > at:
            done = _feed_slow(view, at, start, parser)
            if done < start:
                return pos + done
        if parser.can_bulk() and any(t is k for k in parser.templates):  # a shape dropped since: line by line
            parser.bulk(t, _floats(t, found if found is not None else _tokens(t.rx.findall(view, start, stop))))
        else:
            _feed_slow(view, start, stop, parser, early=False)
        at = stop
    return pos + (_feed_slow(view, at, len(view), parser) if at < len(view) else at)


def _feed_slow(data: bytes, start: int, stop: int, parser: Any, early: bool = True) -> int:
    """Feed the segments of `data[start:stop]` one by one (split in one call; ASCII decoded in one
    call); stop early (returning where) when the parser has learned a new line shape and something
    is left, so the rest can be looked at with it."""
    chunk = data[start:stop]
    ascii_ = chunk.isascii()
    parts = _SPLIT_KEEP.split(chunk.decode("ascii")) if ascii_ else _SPLIT_KEEP_B.split(chunk)
    known = len(parser.templates)
    feed = parser.feed
    last = len(parts) - 1  # parts: segment, separator, segment, ..., "" (the data ends with a separator)
    for i in range(0, last, 2):
        seg = parts[i]
        feed(seg[:MAX_SEGMENT] if isinstance(seg, str) else seg.decode("utf-8", "replace")[:MAX_SEGMENT])  # str: ascii_
        if early and FAST and len(parser.templates) != known and i + 2 < last:
            return start + sum(len(p) for p in parts[: i + 2])
    return stop


def _runs(templates: list[Template], text: bytes) -> list[tuple[int, int, Template, list | None]]:
    """(start, stop, template, its captured numbers one after the other, or None) of the runs of
    consecutive lines of `text` that one template matches, in order. The common case, every line one
    template's, costs one `split` (no tuple per line: the numbers come as one flat list)."""
    lines = text.count(b"\n")
    partial: list[tuple[Template, int]] = []
    for i, t in enumerate(templates):
        parts = t.rx.split(text)
        step = t.rx.groups + 1  # parts: text before, the numbers, text between, the numbers, ..., text after
        found = len(parts) // step
        if found == lines and lines:
            if i:  # the shape of this part of the log: tried first from now on
                templates.insert(0, templates.pop(i))
            del parts[::step]
            return [(0, text.rfind(b"\n") + 1, t, parts)]
        if found:
            partial.append((t, found))
    spans = sorted((m.start(), m.end(), i) for i, (t, _) in enumerate(partial) for m in t.rx.finditer(text))
    runs: list[tuple[int, int, Template, list | None]] = []
    for a, b, i in spans:
        if runs and runs[-1][1] == a and runs[-1][2] is partial[i][0]:
            runs[-1] = (runs[-1][0], b, partial[i][0], None)
        else:
            runs.append((a, b, partial[i][0], None))
    return runs


def _cycle_runs(cycles: list[Cycle], data: bytes) -> list[tuple[int, int, Any, list | None]]:
    """Runs of consecutive cycles of one shape: one `split` when they tile the data from the first
    one to the end of the last (their groups then come as one flat list), else their spans."""
    out: list[tuple[int, int, Any, list | None]] = []
    for i, c in enumerate(cycles):
        parts = c.rx.split(data)
        if len(parts) == 1:
            continue
        if i:  # the shape of this part of the log: tried first from now on
            cycles.insert(0, cycles.pop(i))
        step = c.rx.groups + 1  # parts: text before, the groups, text between, the groups, ..., text after
        if not any(parts[step:-1:step]):  # nothing between two cycles
            start, stop = len(parts[0]), len(data) - len(parts[-1])
            del parts[::step]
            return [(start, stop, c, parts)]
        for m in c.rx.finditer(data):
            a, b = m.span()
            if out and out[-1][1] == a and out[-1][2] is c:
                out[-1] = (out[-1][0], b, c, None)
            else:
                out.append((a, b, c, None))
        return out
    return out


def _segments_in(data: bytes, start: int, stop: int) -> int:
    """How many segments `data[start:stop]` holds (it ends with a separator; `\r\n` is one). The
    `\r\n` pairs are counted at the line feeds (a two-byte count costs three one-byte ones)."""
    lf, cr = data.count(b"\n", start, stop), data.count(b"\r", start, stop)
    if not lf or not cr:
        return lf + cr
    u8 = np.frombuffer(data, np.uint8, stop - start, start)
    before_lf = np.flatnonzero(u8[1:] == 10)  # index of the byte before each line feed (but a first one)
    return lf + cr - int(np.count_nonzero(u8[before_lf] == 13))


def _floats(t: Template, tokens: list) -> np.ndarray:
    """(lines, len(cols)) floats of the captured numbers (`tokens`: a line's numbers, then the next
    line's), parsed in one call (`numbers`)."""
    return numbers(tokens, len(tokens)).reshape(-1, len(t.cols))


def numbers(tokens: Iterable[bytes], count: int) -> np.ndarray:
    """`count` floats of number tokens (what a template captured: numbers, `nan`/`inf` words), each
    the float Python's `float()` reads. Why orjson: its number parser is correctly rounded (the same
    double as `float()`) and about 2.5x faster than numpy's text parser, which was the largest cost
    of a bulk read. JSON has no `nan` (it reads `null`, which numpy makes NaN) and no spelling for
    `inf`, a leading `+` or zero, or `1.`: such a chunk is parsed by numpy's text parser as before."""
    flat = b",".join(tokens)
    if b"n" in flat:  # nan, and inf/-inf, which JSON cannot spell
        quoted = flat.replace(b"nan", b"null")
        body = None if b"i" in quoted else quoted
    else:
        body = flat
    if body is not None:
        try:
            out = np.array(orjson.loads(b"[" + body + b"]"), dtype=np.float64)
            if out.shape == (count,):
                return out
        except (orjson.JSONDecodeError, TypeError, ValueError):
            pass
    out = np.fromstring(flat.decode("ascii"), sep=",")
    if out.size != count:
        out = np.fromiter(map(float, flat.split(b",")), np.float64, count=count)
    return out
