"""Finds English left in a Chinese report: runs of Latin words outside the terms Chinese ML
engineers write in English (loss, batch, grad norm, warmup...), identifiers and quoted log text.

A run is two or more purely alphabetic words separated by spaces ("the loss is"); identifiers
(`clip_grad_norm_`, `model.parameters()`, `max_norm=1.0`, `h.0.attn`), numbers and quoted text
from the user's data or log (JSON-quoted samples, repr'd names) never form one. A run whose every
word is an allowed term passes ("grad norm", "loss scale", "HF Trainer").

There is no exception: every sentence of a finding or a note is a message, rendered in
the report's language.
"""

from __future__ import annotations

import re

from lossdoctor.report.i18n import say

#: words that stay English in Chinese ML writing (lower case), including names of tools and papers
ALLOWED = set(
    """
loss losses batch batches grad norm scale scaler warmup warm-up lr mask masked padding token tokens prompt
response logits softmax attention dtype fp16 bf16 fp32 nan inf step steps epoch epochs micro-batch
micro-batches optimizer adam adamw sgd layernorm pre-ln pre-layernorm relu gelu sigmoid tanh he kaiming xavier
gpt-2 megatron deepspeed hf trainer transformers lightning tensorboard mlflow tqdm keras nanogpt litgpt
mlx-lm torchtitan w&b wandb gradscaler autocast collate collator eos sft rms std rank ranks all-reduce ddp fsdp
stochastic rounding kahan summation wortsman et al palm qk-layernorm z-loss autotrainer deepdiagnosis minhash
label smoothing head master weights iteration overflow grad-overflow lm dict key value u+fffd mojibake ftfy
cp1252 latin-1 utf-8 lambdalr reducelronplateau cosine lossdoctor diagnose demo check scaling scheduler id
device-side assert lambda x chat template pad param group
""".split()
)

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


def english_left(sentence: str, lang: str = "zh") -> list[str]:
    """The English runs a report in `lang` shows for this sentence."""
    return latin_runs(say(sentence, lang))


def report_english(report, lang: str = "zh") -> list[tuple[str, str]]:
    """(sentence, English runs) for every evidence, fix and note of `report` that shows English in `lang`."""
    sentences = [s for f in report.findings for s in (*f.evidence, *_fix_texts(f))] + list(report.notes)
    out = []
    for s in sentences:
        runs = english_left(s, lang)
        if runs:
            out.append((str(s), "; ".join(runs)))
    return out


def plain_sentences(report) -> list[str]:
    """The evidence and fixes of `report` that are plain strings, not messages: a report in
    Chinese would show them in English whatever their words."""
    from lossdoctor.messages import Msg

    return [str(s) for f in report.findings for s in (*f.evidence, *_fix_texts(f)) if not isinstance(s, Msg)]


def _fix_texts(f) -> list[str]:
    """The sentences of a finding's fixes (a `Fix` renders as its `text`)."""
    return [getattr(x, "text", x) for x in f.fixes]


def document_english(doc: str) -> list[str]:
    """English runs in a rendered report `doc` (text, Markdown, or an HTML report's `html_text`)."""
    return latin_runs(doc)


def html_text(html: str) -> str:
    """The visible text of an HTML report (no styles, scripts or tags), entities decoded."""
    import html as html_lib

    html = re.sub(r"<(style|script)\b.*?</\1>", " ", html, flags=re.S)
    html = re.sub(r"<[^>]+>", "\n", html)
    return html_lib.unescape(html)
