"""Languages of the human report formats (text, Markdown, HTML) and of the live alerts.

Every sentence a report shows is a `messages.Msg` rendered in the chosen language (`say`); the
report's own words (headings, labels, the explanation of each cause and symptom) are messages of
the `ui.*`, `cause.*` and `symptom.*` keys (`messages/report.py`). Cause and symptom *names* never
change (they are the contract).

The language is `--lang` when given, else the user's locale (`locale_lang`): a Chinese locale
(`LANG=zh_CN.UTF-8`) gets Chinese reports and alerts without asking.
"""

from __future__ import annotations

from ..messages import LANGS, locale_lang, render, say, templates

__all__ = ["LANGS", "ui", "cause_text", "symptom_text", "say", "locale_lang"]


def ui(lang: str) -> dict[str, str]:
    """The report's headings and labels in `lang` (`{"title": ..., "steps": ...}`)."""
    return {
        key[3:]: render(key, {}, lang) if "{" not in row["en"] else row.get(lang) or row["en"]
        for key, row in templates().items()
        if key.startswith("ui.")
    }


def cause_text(cause: str, lang: str) -> str:
    key = f"cause.{cause}"
    return render(key, {}, lang) if key in templates() else ""


def symptom_text(symptom: str, lang: str) -> str:
    key = f"symptom.{symptom}"
    return render(key, {}, lang) if key in templates() else ""
