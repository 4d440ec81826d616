"""File helpers shared by the readers: bounded directory search, cheap content sniffing, and the
one place that opens a file for reading.

Sniffing must stay cheap (every reader's sniff runs on every path until one matches), so it reads
at most the head of a file and walks at most a few levels of a directory.

Every reader opens files through `open_regular` (directly or via `head` / `read_bytes`): it opens
without blocking and refuses anything that is not a regular file. A FIFO, a character device or a
socket named like a log (`steps.jsonl` made with mkfifo, `/dev/zero`) would otherwise block the
open or the read forever, or never end.
"""

from __future__ import annotations

import json
import os
import re
import stat
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import IO, Any

from .console_text import cut_short
from .registry import SourceError

_SKIP_DIRS = {".git", "__pycache__", "node_modules", ".venv", "venv", "site-packages"}


def walk(root: Path, match: Callable[[str], bool], *, max_depth: int = 4, max_entries: int = 50_000) -> list[Path]:
    """Files under `root` (at most `max_depth` levels down) whose name satisfies `match`, sorted.
    Bounded so pointing the CLI at a home directory fails fast instead of crawling the disk."""
    out: list[Path] = []
    stack = [(root, 0)]
    seen = 0
    while stack:
        d, depth = stack.pop()
        try:
            entries = list(os.scandir(d))
        except OSError:
            continue
        for e in entries:
            seen += 1
            if seen > max_entries:
                return sorted(out)
            try:
                if e.is_dir(follow_symlinks=False):
                    if depth < max_depth and e.name not in _SKIP_DIRS:
                        stack.append((Path(e.path), depth + 1))
                elif e.is_file() and match(e.name):
                    out.append(Path(e.path))
            except OSError:
                continue
    return sorted(out)


def check_kind(path: Path, st: os.stat_result) -> None:
    """SourceError unless `st` is a regular file or a directory."""
    if stat.S_ISREG(st.st_mode) or stat.S_ISDIR(st.st_mode):
        return
    kind = (
        "a named pipe (FIFO)"
        if stat.S_ISFIFO(st.st_mode)
        else "a socket"
        if stat.S_ISSOCK(st.st_mode)
        else "a device"
        if stat.S_ISCHR(st.st_mode) or stat.S_ISBLK(st.st_mode)
        else "a special file"
    )
    raise SourceError(f"{path}: {kind}, not a regular file: lossdoctor reads only log files and directories")


def open_regular(path: Path) -> IO[bytes]:
    """Open a file for binary reading; SourceError when it is not a regular file. O_NONBLOCK keeps
    the open of a FIFO from waiting for a writer; the kind is checked on the opened descriptor, so
    a file swapped after a check cannot slip through."""
    flags = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0)
    fd = os.open(path, flags)
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            check_kind(path, st)
            raise SourceError(f"{path}: not a regular file")
        if hasattr(os, "set_blocking"):
            os.set_blocking(fd, True)
        return os.fdopen(fd, "rb")
    except BaseException:
        os.close(fd)
        raise


#: the largest file a reader reads whole into memory (a JSON document, a CSV table, a W&B
#: transaction log): 1 GiB. Larger logs of these formats are refused with a sentence rather than
#: taking gigabytes of memory; line-by-line formats (console logs, steps.jsonl) and TensorBoard
#: events are streamed and have no such cap.
MAX_WHOLE_READ = 1 << 30


def read_bytes(path: Path, limit: int = MAX_WHOLE_READ) -> bytes:
    """The whole content of a regular file (`Path.read_bytes` would hang on a FIFO), read once;
    SourceError when it is over `limit` bytes (checked on the descriptor before reading)."""
    with open_regular(path) as f:
        size = os.fstat(f.fileno()).st_size
        data = f.read(limit + 1) if size <= limit else b""
        if size > limit or len(data) > limit:
            raise SourceError(
                f"{path}: {max(size, len(data)) / 2**20:.0f} MiB is more than the "
                f"{limit / 2**20:.0f} MiB lossdoctor reads of a file of this format"
            )
        return data


def line_chunks(f: IO[bytes], size: int, max_line: int, *, drop_cut_last: bool = False) -> Iterator[bytes]:
    """A stream's bytes in chunks of about `size` that end right after a newline (the last one
    where the data ends): no line, no `\r\n` and no UTF-8 character is cut between two chunks, so
    a line-based format (CSV, JSON lines) is read chunk by chunk in bounded memory whatever the
    file's size. A line longer than `max_line` is yielded cut once past it (the reader then says the
    file has a line too long), so one huge line cannot take the memory either. With `drop_cut_last`,
    a last line that no line break ends and that was cut mid-print (`console_text.cut_short`: a table
    row that stops short, or whose last number lost its decimals) is not yielded."""
    carry = b""
    prev = b""  # the last whole line yielded (for a last one no line break ends: `cut_short`)
    while True:
        data = f.read(size)
        if not data:
            break
        data = carry + data if carry else data
        last = data.rfind(b"\n")
        if last < 0 and len(data) <= max_line:
            carry = data
            continue
        cut = last + 1 if last >= 0 else len(data)
        carry = data[cut:]
        prev = data[data.rfind(b"\n", 0, max(0, cut - 1)) + 1 : cut].rstrip(b"\r\n") or prev
        yield data[:cut]
    if carry and not (drop_cut_last and cut_short(carry.decode("utf-8", "replace"), prev.decode("utf-8", "replace"))):
        yield carry


def head(path: Path, n: int = 65536) -> bytes:
    with open_regular(path) as f:
        return f.read(n)


def tail(path: Path, n: int = 4096) -> bytes:
    """The last `n` bytes of a regular file, without reading the rest."""
    with open_regular(path) as f:
        size = os.fstat(f.fileno()).st_size
        f.seek(max(0, size - n))
        return f.read(n)


#: control bytes a terminal's text holds: tab, line feed, carriage return, ESC, backspace, form feed
_TERMINAL = frozenset((9, 10, 13, 27, 8, 12))


def looks_binary(data: bytes) -> bool:
    """NUL bytes or mostly non-text bytes in the head: not a text log. A terminal's control bytes
    (ESC of a colour code, backspace, form feed) are text: a coloured log is mostly ESC-led codes
    around its numbers."""
    if not data:
        return False
    if b"\x00" in data:
        return True
    text = sum(1 for b in data[:4096] if 32 <= b < 127 or b in _TERMINAL or b >= 128)
    return text < 0.9 * min(len(data), 4096)


def text_head(path: Path, n: int = 65536) -> str | None:
    """The head of a text file, or None when it is binary."""
    data = head(path, n)
    if looks_binary(data):
        return None
    return data.decode("utf-8", errors="replace")


def numbered(path: Path, pattern: str) -> int:
    """The number in a name like `checkpoint-500` or `version_3` (-1 when there is none), for
    picking the latest of several."""
    m = re.search(pattern, path.name)
    return int(m.group(1)) if m else -1


def json_array_prefix(text: str, bracket: int) -> tuple[list[dict[str, Any]], int, int]:
    """The entries of the JSON array whose `[` is at `bracket`, decoded one by one up to where the
    text is cut or damaged: (the dict entries, how many entries were whole, where decoding stopped).
    A log cut mid-write (the run was killed while saving) keeps everything before the cut."""
    dec = json.JSONDecoder()
    rows: list[dict[str, Any]] = []
    entries = 0
    pos = bracket + 1
    while bracket >= 0:
        while pos < len(text) and text[pos] in " \t\r\n,":
            pos += 1
        if pos >= len(text) or text[pos] == "]":
            break
        try:
            obj, pos = dec.raw_decode(text, pos)
        except (ValueError, RecursionError):
            break
        entries += 1
        if isinstance(obj, dict):
            rows.append(obj)
    return rows, entries, pos
