"""File helpers shared by the readers: bounded directory search and cheap content sniffing.

Sniffing must stay cheap (every reader's sniff runs on every path until one matches), so it reads
at most the head of a file and walks at most a few levels of a directory.
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Callable

_SKIP_DIRS = {".git", "__pycache__", "node_modules", ".venv", "venv", "site-packages"}


def walk(root: Path, match: Callable[[str], bool], *, max_depth: int = 4,
         max_entries: int = 50_000) -> list[Path]:
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


def head(path: Path, n: int = 65536) -> bytes:
    with open(path, "rb") as f:
        return f.read(n)


def looks_binary(data: bytes) -> bool:
    """NUL bytes or mostly non-text bytes in the head: not a text log."""
    if not data:
        return False
    if b"\x00" in data:
        return True
    text = sum(1 for b in data[:4096] if 32 <= b < 127 or b in (9, 10, 13) or b >= 128)
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
