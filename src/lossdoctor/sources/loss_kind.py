"""What a text log's own lines say about the kind of its loss: a perplexity or bits per character
printed beside it.

`ppl = exp(loss)` and `bpc = loss / ln 2` hold only for a token cross-entropy in nats, so a line
printing `loss 7.42 | ppl 1670.86` names its loss a language model's cross-entropy as surely as a
`vocab_size` in a config does, whatever the trainer (Transformer-XL's and XLNet's scripts,
OpenNMT, a word-LM tutorial's `| loss 5.1 | ppl 164.0`). The detectors that judge a level (a
language model stuck at the unigram level, a cross-entropy beyond any vocabulary) need that kind;
without it a plain print is an unknown objective and they stay silent.

Only the relation counts, never the key alone: fairseq prints `ppl = 2 ** loss` (its loss is in
bits, so the nat levels would be wrong), and a `ppl` column beside a loss it does not follow
(a sum, a regularised total) says nothing about that loss. Cost: one pattern over the first
`LossKindLimits.head_bytes` of the file.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from pathlib import Path

from .files import text_head

_NUM = r"(\d+(?:\.\d*)?(?:[eE][-+]?\d+)?)"
_LOSS = re.compile(r"\bloss\b[\s:=|]{0,4}" + _NUM, re.I)
_PPL = re.compile(r"\b(ppl|pplx|perplexity|bpc)\b[\s:=|]{0,4}" + _NUM, re.I)


@dataclass(frozen=True)
class LossKindLimits:
    #: the head of a file read for the relation (a log's first lines print it as well as its last)
    head_bytes: int = 1 << 20
    #: lines printing both a loss and a perplexity (or bpc) that must follow the relation: two is
    #: no coincidence for a relation that holds to the printed digits
    min_lines: int = 2
    #: ... and their share of all such lines (a different loss beside the ppl on some lines)
    min_share: float = 0.8
    #: the relation holds within this many nats plus `rel_tol` of the loss: a loss printed to two
    #: decimals is off by up to 0.005, a perplexity rounded to its digits by less
    abs_tol: float = 0.006
    rel_tol: float = 0.002


LIMITS = LossKindLimits()


def _follows(loss: float, key: str, value: float, lim: LossKindLimits) -> bool:
    """Whether `value` printed under `key` is the perplexity (or bits per character) of `loss` in
    nats."""
    tol = lim.abs_tol + lim.rel_tol * abs(loss)
    if key == "bpc":
        return abs(value * math.log(2) - loss) <= tol
    return value > 0 and abs(math.log(value) - loss) <= tol


def perplexity_evidence(text: str, lim: LossKindLimits = LIMITS) -> str | None:
    """'perplexity' or 'bpc' when the text's lines print the loss with its perplexity (bits per
    character) in the relation a token cross-entropy in nats has, else None."""
    agree = seen = 0
    kind = None
    for line in text.splitlines():
        p = _PPL.search(line)
        if p is None:
            continue
        loss = _LOSS.search(line)
        if loss is None:
            continue
        seen += 1
        key = p.group(1).lower()
        if _follows(float(loss.group(1)), key, float(p.group(2)), lim):
            agree += 1
            kind = "bpc" if key == "bpc" else "perplexity"
    if agree >= lim.min_lines and agree >= lim.min_share * seen:
        return kind
    return None


def read_evidence(path: Path, lim: LossKindLimits = LIMITS) -> str | None:
    """`perplexity_evidence` over the head of a text file; None for a directory or a binary file."""
    if not path.is_file():
        return None
    text = text_head(path, lim.head_bytes)
    return None if text is None else perplexity_evidence(text, lim)
