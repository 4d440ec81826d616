"""Languages of the human report formats (text, Markdown, HTML) and of the live alerts.

Every sentence a report shows is a `messages.Msg` rendered in the chosen language (`say`); the
report's own words (headings, labels, the explanation of each cause and symptom) are messages of
the `ui.*`, `cause.*` and `symptom.*` keys (`messages/report.py`). Cause and symptom *names* never
change (they are the contract).

The language is `--lang` when given, else the user's locale (`locale_lang`): a Chinese locale
(`LANG=zh_CN.UTF-8`) gets Chinese reports and alerts without asking.
"""

from __future__ import annotations

import os
from typing import Mapping

from ..messages import LANGS, Msg, render, templates
from . import fallback_zh

__all__ = ["LANGS", "ui", "cause_text", "symptom_text", "say", "locale_lang"]

#: the locale variables, in the order the first one set decides (POSIX: LC_ALL overrides
#: LC_MESSAGES overrides LANG; GNU's LANGUAGE list last, for a system that sets only it)
LOCALE_VARS = ("LC_ALL", "LC_MESSAGES", "LANG", "LANGUAGE")


def locale_lang(environ: Mapping[str, str] | None = None) -> str:
    """"zh" when the locale is Chinese (`zh_CN.UTF-8`, `zh_TW`, `zh`), else "en"."""
    env = os.environ if environ is None else environ
    for var in LOCALE_VARS:
        value = (env.get(var) or "").strip()
        if value:
            return "zh" if value.lower().startswith("zh") else "en"
    return "en"


def ui(lang: str) -> dict[str, str]:
    """The report's headings and labels in `lang` (`{"title": ..., "steps": ...}`)."""
    return {key[3:]: render(key, {}, lang) if "{" not in row["en"] else row.get(lang) or row["en"]
            for key, row in templates().items() if key.startswith("ui.")}


def cause_text(cause: str, lang: str) -> str:
    key = f"cause.{cause}"
    return render(key, {}, lang) if key in templates() else ""


def symptom_text(symptom: str, lang: str) -> str:
    key = f"symptom.{symptom}"
    return render(key, {}, lang) if key in templates() else ""


def say(text: str, lang: str) -> str:
    """A sentence of a finding or a note in `lang`: a message is rendered; a plain string (an area
    not converted to messages yet) is shown as it is, or, TEMPORARILY, through the fallback for the
    few sentences of those areas that were translated before (see `fallback_zh`)."""
    if isinstance(text, Msg):
        if lang == "zh" and any(type(v) is str for v in text.values.values()):
            # a hint or a sentence of an unconverted area handed in as a value (TEMPORARY, as below)
            values = {k: fallback_zh.translate(v) if type(v) is str else v for k, v in text.values.items()}
            return render(text.key, values, lang)
        return text.render(lang)
    if lang == "zh":
        return fallback_zh.translate(text)
    return text
