"""Finds English left in a Chinese report: runs of Latin words outside the terms Chinese ML
engineers write in English (loss, batch, grad norm, warmup...), identifiers and quoted log text.

A run is two or more purely alphabetic words separated by spaces ("the loss is"); identifiers
(`clip_grad_norm_`, `model.parameters()`, `max_norm=1.0`, `h.0.attn`), numbers and quoted text
from the user's data or log (JSON-quoted samples, repr'd names) never form one. A run whose every
word is an allowed term passes ("grad norm", "loss scale", "HF Trainer").

Sentences of the areas not converted to messages yet are listed in EXCEPTED_SOURCES and matched
exactly against those files' own string literals (f-strings as patterns), so a sentence of any
other area that is still English fails the check.
"""

from __future__ import annotations

import ast
import re
from functools import lru_cache
from pathlib import Path

from lossdoctor.messages import Msg
from lossdoctor.report.i18n import say

SRC = Path(__file__).resolve().parents[1] / "src" / "lossdoctor"

#: TEMPORARY exception: areas that have not converted their sentences to messages yet (another
#: change restructures them). Their plain-English sentences may appear in a zh report.
EXCEPTED_SOURCES = ("detectors/scalars.py", "detectors/loss_shape.py", "detectors/learning_rate.py",
                    "detectors/quantities.py")

#: words that stay English in Chinese ML writing (lower case), including names of tools and papers
ALLOWED = set("""
loss losses batch batches grad norm scale scaler warmup warm-up lr mask masked padding token tokens prompt
response logits softmax attention dtype fp16 bf16 fp32 nan inf step steps epoch epochs micro-batch
micro-batches optimizer adam adamw sgd layernorm pre-ln pre-layernorm relu gelu sigmoid tanh he kaiming xavier
gpt-2 megatron deepspeed hf trainer transformers lightning tensorboard mlflow tqdm keras nanogpt litgpt
mlx-lm torchtitan w&b wandb gradscaler autocast collate collator eos sft rms std rank ranks all-reduce ddp fsdp
stochastic rounding kahan summation wortsman et al palm qk-layernorm z-loss autotrainer deepdiagnosis minhash
label smoothing head master weights iteration overflow grad-overflow lm dict key value u+fffd mojibake ftfy
cp1252 latin-1 utf-8 lambdalr reducelronplateau cosine lossdoctor diagnose demo check scaling scheduler id
device-side assert lambda x chat template pad param group
""".split())

_RUN = re.compile(r"(?<![\w.\-/'])[A-Za-z][A-Za-z'&+\-]*(?:[ \t]+[A-Za-z][A-Za-z'&+\-]*)+(?![\w.(/=\-])")
_QUOTED = re.compile(r'"(?:[^"\\]|\\.)*"|\'[^\']*\'|`[^`]*`')


def latin_runs(text: str) -> list[str]:
    """The runs of Latin words in `text` that are not all allowed terms."""
    text = _QUOTED.sub(" Q ", text)
    out = []
    for m in _RUN.finditer(text):
        words = m.group(0).split()
        if not all(w.lower().strip("'") in ALLOWED or w == "Q" for w in words):
            out.append(m.group(0))
    return out


@lru_cache(maxsize=None)
def _excepted_fragments() -> tuple[str, ...]:
    """The literal text of every string of the excepted areas (an f-string's literal parts; a
    module constant used in one is inlined), longest first."""
    frags: set[str] = set()
    for pattern in EXCEPTED_SOURCES:
        for path in sorted(SRC.glob(pattern)):
            tree = ast.parse(path.read_text(encoding="utf-8"))
            for node in ast.walk(tree):
                if isinstance(node, ast.Constant) and isinstance(node.value, str):
                    frags.add(node.value)
    return tuple(sorted((f for f in frags if len(f) >= 4 and re.search(r"[A-Za-z]{2}", f)), key=len, reverse=True))


@lru_cache(maxsize=4096)
def from_excepted_area(sentence: str) -> bool:
    """The sentence is made by the excepted areas: the literal text of their strings covers (nearly)
    all of its words. (Their sentences are assembled from pieces: f-strings, concatenations, helper
    results; the pieces are what can be found.)"""
    covered = bytearray(len(sentence))
    for frag in _excepted_fragments():
        start = sentence.find(frag)
        while start >= 0:
            covered[start:start + len(frag)] = b"\x01" * len(frag)
            start = sentence.find(frag, start + 1)
    words = [(m.start(), m.end()) for m in re.finditer(r"(?<![\w.])[A-Za-z]+(?![\w.(])", sentence)]
    total = sum(b - a for a, b in words)
    own = sum(1 for a, b in words for i in range(a, b) if covered[i])
    return total > 0 and own >= 0.75 * total


def _word_letters(text: str) -> int:
    """Letters of the words of `text` (identifiers such as aten.sqrt or h.0.attn left out)."""
    return sum(len(w) for w in re.findall(r"(?<![\w.])[A-Za-z]+(?![\w.(])", text))


def english_left(sentence: str, lang: str = "zh") -> list[str]:
    """The English runs a report in `lang` shows for this sentence, leaving out what the excepted
    areas contribute (a plain sentence of theirs, or their plain text handed to a message)."""
    shown = say(sentence, lang)
    if not isinstance(sentence, Msg):
        return [] if from_excepted_area(str(sentence)) else latin_runs(shown)
    for v in _plain_values(sentence):
        if from_excepted_area(v):
            shown = shown.replace(say(v, lang), " ")
    return latin_runs(shown)


def _plain_values(m: Msg) -> list[str]:
    out = []
    for v in m.values.values():
        for x in v if isinstance(v, (list, tuple)) else [v]:
            if isinstance(x, Msg):
                out += _plain_values(x)
            elif isinstance(x, str):
                out.append(x)
    return out


def report_english(report, lang: str = "zh") -> list[tuple[str, str]]:
    """(sentence, English runs) for every evidence, fix and note of `report` that shows English in `lang`."""
    sentences = [s for f in report.findings for s in (*f.evidence, *f.fixes)] + list(report.notes)
    out = []
    for s in sentences:
        runs = english_left(s, lang)
        if runs:
            out.append((str(s), "; ".join(runs)))
    return out


def document_english(doc: str, report, lang: str = "zh", escape=lambda s: s) -> list[str]:
    """English runs in a rendered report `doc` (text, or Markdown/HTML text with `escape` being the
    format's own escaping), once the excepted areas' sentences are taken out."""
    sentences = [s for f in report.findings for s in (*f.evidence, *f.fixes)] + list(report.notes)
    for s in sentences:
        parts = _plain_values(s) if isinstance(s, Msg) else [str(s)]
        for v in parts:
            if from_excepted_area(v):
                doc = doc.replace(escape(say(v, lang)), " ")
    return latin_runs(doc)


def html_text(html: str) -> str:
    """The visible text of an HTML report (no styles, scripts or tags), entities decoded."""
    import html as html_lib

    html = re.sub(r"<(style|script)\b.*?</\1>", " ", html, flags=re.S)
    html = re.sub(r"<[^>]+>", "\n", html)
    return html_lib.unescape(html)
