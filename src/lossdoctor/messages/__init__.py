"""Messages as data: every sentence a user reads is a key and its values, rendered per language.

Detectors, triage, preflight and the live monitor say things with numbers in them ("grad norm rose
from 1.3 to 4.1e4 over 25 steps before step 431"). Instead of formatting English text where the
finding is made, they build `Msg("grad.rose", start=1.3, end=4.1e4, n=25, step=431)`. A `Msg` *is*
the English sentence (a `str`, so everything that stores or prints evidence keeps working and the
JSON report keeps its English strings), and it remembers its key and values, so a report can
render it in Chinese, and programs can read the values instead of parsing the text.

Templates live in table modules next to this one (`messages/<area>.py`, each a `TEMPLATES` dict of
`key: (english, chinese)`); every module in this package is a table, found when first needed, so
adding an area never edits this file. A key defined twice is an error. The test suite checks that
every key used in the source exists, and that both languages use the same placeholders.

Values are numbers, strings (identifiers, layer and op names: the same in every language), other
`Msg`s (rendered in the same language), or lists of those. A float with no format spec is written
by `fmt` (three significant digits, exponent for the very large and small); `{x:n2}` asks for two
digits; any other spec is Python's (`{frac:.0%}`).
"""

from __future__ import annotations

import importlib
import logging
import math
import numbers
import os
import pkgutil
import re
import string
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Protocol

LANGS = ("en", "zh")

#: key -> {"en": template, "zh": template}; filled from the table modules on first use
_TEMPLATES: dict[str, dict[str, str]] = {}
_LOADED = False


def fmt(x: float, digits: int = 3) -> str:
    """Numbers in evidence sentences: short, and exact enough to act on."""
    if x != x:
        return "NaN"
    if x in (float("inf"), float("-inf")):
        return "inf" if x > 0 else "-inf"
    ax = abs(x)
    if ax != 0 and (ax >= 1e4 or ax < 1e-3):
        return f"{x:.{max(digits - 1, 1)}e}"
    return f"{x:.{digits}g}"


def round_sig(x: float, sig: int = 2) -> float:
    """Round to `sig` significant digits: a fix says max_norm=2.3, not 2.2871."""
    if x == 0 or x != x or x in (float("inf"), float("-inf")):
        return x
    return round(x, -int(math.floor(math.log10(abs(x)))) + sig - 1)


def templates() -> dict[str, dict[str, str]]:
    """Every template, loaded once from the table modules of this package."""
    global _LOADED
    if not _LOADED:
        table: dict[str, dict[str, str]] = {}
        for mod in sorted(m.name for m in pkgutil.iter_modules(__path__)):
            rows = getattr(importlib.import_module(f"{__name__}.{mod}"), "TEMPLATES", {})
            for key, (en, zh) in rows.items():
                if key in table:
                    raise ValueError(f"message key {key!r} is defined twice (again in {mod})")
                table[key] = {"en": en, "zh": zh}
        _TEMPLATES.update(table)
        _LOADED = True
    return _TEMPLATES


class _Formatter(string.Formatter):
    def __init__(self, lang: str) -> None:
        self.lang = lang

    def format_field(self, value: Any, spec: str) -> str:
        return render_value(value, self.lang, spec)


def render_value(value: Any, lang: str, spec: str = "") -> str:
    """One value as it appears inside a sentence in `lang`."""
    if isinstance(value, Msg):
        return value.render(lang)
    if isinstance(value, (list, tuple)):
        sep = "、" if lang == "zh" else ", "
        return sep.join(render_value(v, lang, spec) for v in value)
    if value is None:
        return "?"
    if isinstance(value, bool) or isinstance(value, str):
        return str(value)
    if isinstance(value, numbers.Integral) and not spec:
        return str(int(value))
    if isinstance(value, numbers.Real):  # numpy's numbers too
        value = int(value) if isinstance(value, numbers.Integral) else float(value)
        if not spec or spec == "n":
            return fmt(float(value))
        if spec[0] == "n" and spec[1:].isdigit():
            return fmt(float(value), int(spec[1:]))
    return format(value, spec)


def render(key: str, values: dict[str, Any], lang: str = "en") -> str:
    """The sentence for `key` in `lang` (English when `lang` has no template; never raises)."""
    row = templates().get(key)
    if row is None:
        # a key the table lacks is a bug the tests catch; the user still gets the numbers
        inner = ", ".join(f"{k}={render_value(v, 'en')}" for k, v in values.items())
        return f"{key}: {inner}" if inner else key
    template = row.get(lang) or row["en"]
    try:
        return _Formatter(lang).format(template, **values)
    except (KeyError, IndexError, ValueError, TypeError):
        if template is not row["en"]:
            return render(key, values, "en")
        inner = ", ".join(f"{k}={render_value(v, 'en')}" for k, v in values.items())
        return f"{key}: {inner}"


class Msg(str):
    """A sentence as data: the English text (this string), its `key` and its `values`."""

    key: str
    values: dict[str, Any]

    def __new__(cls, key: str, /, **values: Any) -> Msg:
        self = super().__new__(cls, render(key, values, "en"))
        self.key = key
        self.values = values
        return self

    def render(self, lang: str = "en") -> str:
        return str.__str__(self) if lang == "en" else render(self.key, self.values, lang)

    def __reduce__(self) -> tuple:
        return (_rebuild, (self.key, self.values))

    def data(self) -> dict[str, Any]:
        """The JSON form: `{"key": ..., "values": {...}}` (non-finite floats as {"float": "nan"})."""
        return {"key": self.key, "values": {k: _to_json(v) for k, v in self.values.items()}}

    @classmethod
    def from_data(cls, d: Any) -> Msg | None:
        """The inverse of `data`; None when `d` is not a message's JSON form, or nests deeper than
        `JSON_LIMITS.max_depth` (a file's data: the stored English is shown instead)."""
        if not isinstance(d, dict) or not isinstance(d.get("key"), str) or too_deep(d):
            return None
        values = d.get("values") or {}
        if not isinstance(values, dict):
            return None
        return cls(d["key"], **{str(k): _from_json(v) for k, v in values.items()})


def _rebuild(key: str, values: dict[str, Any]) -> Msg:
    return Msg(key, **values)


def _to_json(v: Any) -> Any:
    if isinstance(v, Msg):
        return v.data()
    if isinstance(v, (list, tuple)):
        return [_to_json(x) for x in v]
    if v is None or isinstance(v, bool):
        return v
    if isinstance(v, str):
        return str(v)
    if isinstance(v, numbers.Integral):
        return int(v)
    if isinstance(v, numbers.Real):
        v = float(v)
        if not math.isfinite(v):
            return {"float": "nan" if v != v else ("inf" if v > 0 else "-inf")}
        return v
    return str(v)


def _from_json(v: Any) -> Any:
    if isinstance(v, list):
        return [_from_json(x) for x in v]
    if isinstance(v, dict):
        if set(v) == {"float"} and v["float"] in ("nan", "inf", "-inf"):
            return float(v["float"])
        return Msg.from_data(v)
    return v


class Renders(Protocol):
    """What renders itself in a language: a fix (`findings.Fix`, a layer above this one)."""

    def render(self, lang: str) -> str: ...


def say(text: str | Renders, lang: str) -> str:
    """A sentence of a finding or a note in `lang`: a message is rendered in it; a plain string (a
    reader's note quoting the log, a report read back from JSON written before messages) is shown
    as it is. A fix (`findings.Fix`) is its sentence."""
    if isinstance(text, Msg):
        return text.render(lang)
    if not isinstance(text, str) and callable(getattr(text, "render", None)):
        return text.render(lang)
    kept: Any = text  # a string, or what a caller passed that is neither: given back as it is
    return kept


def identity(x: Any) -> Any:
    """What a sentence says, as data, for telling two apart: a message's key and its values in
    their JSON form (so two messages are the same when these are, not when their English reads
    alike: 0.1234 and 0.1236 both print as 0.123), an object with its own `identity()` (a fix: its
    kind, numbers and sentence) that, and a plain string (a reader's note quoting the log) its text."""
    if isinstance(x, Msg):
        return ("msg", x.key, repr(_sorted_json(x.data()["values"])))
    own = getattr(x, "identity", None)
    if callable(own):
        return own()
    return ("text", str.__str__(x) if isinstance(x, str) else repr(x))


def _sorted_json(v: Any) -> Any:
    if isinstance(v, dict):
        return tuple(sorted((str(k), _sorted_json(x)) for k, x in v.items()))
    if isinstance(v, list):
        return tuple(_sorted_json(x) for x in v)
    return v


def unique(items: Any) -> list[Any]:
    """`items` in order, each sentence once (by `identity`)."""
    seen: set[Any] = set()
    out = []
    for x in items:
        i = identity(x)
        if i not in seen:
            seen.add(i)
            out.append(x)
    return out


def not_in(items: Any, existing: Any) -> list[Any]:
    """The sentences of `items` that `existing` does not hold already (by `identity`), in order."""
    have = {identity(x) for x in existing}
    return [x for x in items if identity(x) not in have]


def holds(items: Any, x: Any) -> bool:
    """`x` is among `items` (by `identity`, not by its English)."""
    i = identity(x)
    return any(identity(y) == i for y in items)


#: what never reaches a terminal or a document raw: C0 controls (a newline and a tab are kept where
#: allowed), DEL, C1 (U+0080-U+009F, U+009B is a one-byte CSI), the bidirectional marks, embeddings,
#: overrides and isolates (U+200E/F, U+061C, U+202A-U+202E, U+2066-U+2069: "Trojan Source"), the
#: line and paragraph separators, and lone surrogates (a file name that is not UTF-8, decoded with
#: surrogateescape: written raw it fails the encoder)
_UNSAFE = "\x00-\x08\x0b-\x1f\x7f-\x9f\u061c\u200e\u200f\u2028\u2029\u202a-\u202e\u2066-\u2069\ud800-\udfff"
_UNSAFE_RE = {keep: re.compile(f"[{_UNSAFE}{'' if keep else chr(10) + chr(9)}]") for keep in (True, False)}
#: a colour or style sequence (SGR) as rich writes it: the only escape sequence a report emits
_SGR = re.compile(r"\x1b\[[0-9;]*m")


def _escape_char(c: str, json_safe: bool) -> str:
    n = ord(c)
    if 0xDC80 <= n <= 0xDCFF:  # a byte of a file name that is not UTF-8: shown as that byte
        return ("\\\\x" if json_safe else "\\x") + f"{n - 0xDC00:02x}"
    if json_safe or n > 0xFF:
        return f"\\u{n:04x}"
    return {"\n": "\\n", "\t": "\\t", "\r": "\\r"}.get(c, f"\\x{n:02x}")


def safe_text(text: str, *, newlines: bool = True, json_safe: bool = False, keep_sgr: bool = False) -> str:
    r"""`text` with every character that could drive a terminal or reorder what a reader sees
    replaced by a visible escape (`\x1b`, `\u202e`): the one function every report and message
    passes through before it is written (the CLI's `write_text` and `error_line`, `report.render`).

    `newlines=False` escapes newlines and tabs too (a one-line message); `json_safe` writes every
    escape as `\uXXXX`, which is a valid escape inside a JSON string (JSON reports, the HTML report's
    data block), and a non-UTF-8 byte as the text `\xff`; `keep_sgr` keeps the colour sequences a
    colour terminal report is made of (the text in it was escaped before it was styled)."""
    if not isinstance(text, str):
        text = str(text)
    pattern = _UNSAFE_RE[newlines]
    if keep_sgr and "\x1b" in text:
        parts = _SGR.split(text)
        seqs = _SGR.findall(text)
        return "".join(
            safe_text(p, newlines=newlines, json_safe=json_safe) + (seqs[i] if i < len(seqs) else "")
            for i, p in enumerate(parts)
        )
    if not pattern.search(text):
        return text
    return pattern.sub(lambda m: _escape_char(m.group(), json_safe), text)


def safe_output(text: str, fmt: str = "text", *, color: bool = False) -> str:
    """A whole rendered report or listing made safe to write (`safe_text` as the format needs)."""
    return safe_text(text, json_safe=fmt in ("json", "html"), keep_sgr=color and fmt == "text")


class _SafeLogText(logging.Filter):
    """The monitor's and the integrations' warnings (the "lossdoctor" logger) quote layer names,
    paths and exception texts: escaped as the CLI's stderr lines are, whatever handler prints them."""

    def filter(self, record: logging.LogRecord) -> bool:
        try:
            text = record.getMessage()
        except Exception:  # a bad format string is logging's own report to make
            return True
        safe = safe_text(text, newlines=False)
        if safe != text:
            record.msg, record.args = safe, ()
        return True


if not any(isinstance(f, _SafeLogText) for f in logging.getLogger("lossdoctor").filters):
    logging.getLogger("lossdoctor").addFilter(_SafeLogText())


@dataclass(frozen=True)
class JsonLimits:
    #: containers nested deeper than this in a file lossdoctor reads are cut (replaced by null):
    #: its own records nest 6 levels (an incident's verification checks and their messages), a
    #: Trainer state or a config a dozen; Python's encoder and every recursive walk of a report then
    #: stay far below the interpreter's recursion limit of 1,000 (measured default)
    max_depth: int = 64


JSON_LIMITS = JsonLimits()


def too_deep(obj: Any, limit: int | None = None) -> bool:
    """Whether lists/dicts in `obj` nest deeper than `limit` (iterative: any depth is safe)."""
    limit = JSON_LIMITS.max_depth if limit is None else limit
    stack = [(obj, 1)]
    while stack:
        x, depth = stack.pop()
        children = x.values() if isinstance(x, dict) else x if isinstance(x, (list, tuple)) else None
        if children is None:
            continue
        if depth > limit:
            return True
        stack.extend((c, depth + 1) for c in children if isinstance(c, (dict, list, tuple)))
    return False


def cap_depth(obj: Any, limit: int | None = None) -> tuple[Any, bool]:
    """`obj` (just parsed from JSON) with every list or dict deeper than `limit` replaced by None,
    in place and without recursion; and whether anything was cut."""
    limit = JSON_LIMITS.max_depth if limit is None else limit
    if not isinstance(obj, (dict, list)):
        return obj, False
    if limit < 1:
        return None, True
    cut = False
    stack = [(obj, 1)]
    while stack:
        x, depth = stack.pop()
        slots = list(x.items()) if isinstance(x, dict) else list(enumerate(x))
        for k, v in slots:
            if isinstance(v, (dict, list)):
                if depth + 1 > limit:
                    x[k] = None
                    cut = True
                else:
                    stack.append((v, depth + 1))
    return obj, cut


#: the locale variables, in the order the first one set decides (POSIX: LC_ALL overrides
#: LC_MESSAGES overrides LANG; GNU's LANGUAGE list last, for a system that sets only it)
LOCALE_VARS = ("LC_ALL", "LC_MESSAGES", "LANG", "LANGUAGE")


def locale_lang(environ: Mapping[str, str] | None = None) -> str:
    """ "zh" when the locale is Chinese (`zh_CN.UTF-8`, `zh_TW`, `zh`), else "en"."""
    env = os.environ if environ is None else environ
    for var in LOCALE_VARS:
        value = (env.get(var) or "").strip()
        if value:
            return "zh" if value.lower().startswith("zh") else "en"
    return "en"


def placeholders(template: str) -> set[str]:
    """The value names a template uses (both languages of a key must use the same ones)."""
    return {name.split(".")[0].split("[")[0] for _, name, _, _ in string.Formatter().parse(template) if name}
