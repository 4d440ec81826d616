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
                    "detectors/quantities.py", "triage/*.py", "monitor.py", "signals/*.py", "integrations/*.py")

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
def _excepted_patterns() -> list[tuple[str, str, int, re.Pattern[str]]]:
    """(leading literal, trailing literal, letters of its literal text, pattern) of every string
    literal of the excepted areas; an f-string's values match anything."""
    pats = []
    for pattern in EXCEPTED_SOURCES:
        for path in sorted(SRC.glob(pattern)):
            tree = ast.parse(path.read_text(encoding="utf-8"))
            consts = {t.id: n.value.value for n in tree.body if isinstance(n, ast.Assign)
                      and isinstance(n.value, ast.Constant) and isinstance(n.value.value, str)
                      for t in n.targets if isinstance(t, ast.Name)}
            for node in ast.walk(tree):
                if isinstance(node, ast.JoinedStr):
                    parts = [v.value if isinstance(v, ast.Constant) else
                             consts.get(v.value.id) if isinstance(v, ast.FormattedValue)
                             and isinstance(v.value, ast.Name) else None for v in node.values]
                elif isinstance(node, ast.Constant) and isinstance(node.value, str) and " " in node.value:
                    parts = [node.value]
                else:
                    continue
                if not re.search(r"[A-Za-z]+ [A-Za-z]+", " ".join(x for x in parts if x is not None)):
                    continue  # no words of its own ("{a}: {b}"): it would match any sentence
                rx = "".join(re.escape(x) if x is not None else ".*?" for x in parts)
                head = parts[0] if parts and parts[0] is not None else ""
                tail = parts[-1] if parts and parts[-1] is not None else ""
                letters = sum(c.isalpha() for x in parts if x is not None for c in x)
                pats.append((head, tail, letters, re.compile(rx, re.DOTALL)))
    return pats


@lru_cache(maxsize=4096)
def from_excepted_area(sentence: str, depth: int = 0) -> bool:
    """The sentence is made by the excepted areas: one of their literals spans all of it, or it is
    a concatenation of up to four of them."""
    rest = sentence.lstrip(" ;:,.")
    if not rest:
        return depth > 0
    if depth >= 4:
        return False
    for head, tail, letters, rx in _excepted_patterns():
        if head and not rest.startswith(head):
            continue
        for k in range(len(rest), 0, -1):
            if tail and not rest[:k].endswith(tail):
                continue
            # the literal's own words must make most of the span: "{x} at step {s}" is no author of
            # a whole sentence
            if letters < 40 and letters < 0.6 * sum(c.isalpha() for c in rest[:k]):
                continue
            if rx.fullmatch(rest[:k]) and (k == len(rest) or from_excepted_area(rest[k:], depth + 1)):
                return True
    return False


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
