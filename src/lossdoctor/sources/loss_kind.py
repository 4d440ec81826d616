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

import numpy as np

from ..messages import Msg
from ..records import Run
from .files import text_head

_NUM = r"(\d+(?:\.\d*)?(?:[eE][-+]?\d+)?)"
_LOSS = re.compile(r"\bloss\b[\s:=|]{0,4}" + _NUM, re.I)
#: names a log gives a perplexity by (the name's last word, any case: `PPL`, `Train perplexity`)
PPL_NAMES = frozenset({"ppl", "pplx", "perplexity"})
_WORDS = re.compile(r"[\s_/.-]+")
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
    #: a perplexity is exp of a cross-entropy, never below 1: a series under a perplexity's name with a
    #: finite value below this is something else, and no loss is derived from it
    min_perplexity: float = 1.0


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


def perplexity_name(key: object) -> bool:
    """Whether a series' name says it is a perplexity (its last word is one of `PPL_NAMES`)."""
    words = _WORDS.split(str(key).strip().lower())
    return bool(words) and words[-1] in PPL_NAMES


def loss_from_perplexity(run: Run, lim: LossKindLimits = LIMITS) -> bool:
    """A log that prints no loss, only a perplexity (OpenNMT-lua's `ppl: 11.85`, Sockeye's
    `perplexity=`, a seq2seq script's `PPL 8226.52`), had its perplexity taken for the loss: the levels
    every detector judges (ln K, ln V, a cross-entropy's start) are those of the loss, so the loss
    is ln(ppl), the token cross-entropy in nats, and the printed values stay in the `ppl` column.
    Said in a note; True when the run was changed."""
    key = run.meta.get("loss_key")
    if not perplexity_name(key) or "loss" not in run.cols or "ppl" in run.cols:
        return False
    ppl = np.asarray(run.cols["loss"], dtype=float)
    finite = ppl[np.isfinite(ppl)]
    if finite.size == 0 or finite.min() < lim.min_perplexity:
        return False
    mask = run.logged("loss").copy()
    run.cols["ppl"] = ppl
    run.logged_mask["ppl"] = mask
    with np.errstate(invalid="ignore", divide="ignore"):
        run.cols["loss"] = np.log(ppl)
    run.logged_mask["loss"] = mask
    run.meta["loss_from"] = "perplexity"
    run.meta["loss_guessed"] = False  # a perplexity is a cross-entropy's, said below, not a guess
    run.meta.setdefault("ce_from", "perplexity")
    run.notes[:] = [n for n in run.notes if getattr(n, "key", None) != "text.loss_guessed"]
    run.notes.append(Msg("text.loss_from_ppl", key=str(key)))
    return True
