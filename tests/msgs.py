"""Assertions on what a finding or a note says as data: message keys and values, not English.

Evidence, fixes and notes are `Msg`s (a fix: a `Fix` whose sentence is one) with a `key` and
`values`; a value may itself be a message (`scalars.coverage.not_fell` says *what* the log holds
with another one). The words are the templates' business, checked once per language by the
rendering tests (`test_messages.py`, `test_reports_zh.py`, `test_report_formats.py`)."""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import Any


def keys(items: Iterable[Any]) -> list[str | None]:
    """The key of each message (None for plain text: a reader's note quoting the log)."""
    return [getattr(x, "key", None) for x in items]


def walk(items: Iterable[Any]) -> Iterator[Any]:
    """Each message of `items` and, depth first, the messages among its values."""
    for x in items:
        if getattr(x, "key", None) is None:
            continue
        yield x
        for v in x.values.values():
            yield from walk(v if isinstance(v, (list, tuple)) else [v])


def all_keys(items: Iterable[Any]) -> set[str]:
    """The keys of `items` and of the messages nested in their values."""
    return {m.key for m in walk(items)}


def find(items: Iterable[Any], key: str) -> Any:
    """The first message with `key` (a prefix when it ends with "."), nested ones included; an
    AssertionError naming the keys there are when none has it."""
    items = list(items)
    for m in walk(items):
        if m.key == key or (key.endswith(".") and m.key.startswith(key)):
            return m
    raise AssertionError(f"no message {key!r} among {sorted(all_keys(items))}")


def has(items: Iterable[Any], key: str, /, **values: Any) -> bool:
    """A message with `key` (a prefix when it ends with ".") whose values include `values`."""
    return any(
        (m.key == key or (key.endswith(".") and m.key.startswith(key)))
        and all(m.values.get(k) == v for k, v in values.items())
        for m in walk(items)
    )


def data_keys(entries: Iterable[dict[str, Any]]) -> list[str | None]:
    """The keys of a JSON report's `evidence_data` / `fixes_data` / `notes_data` entries."""
    return [e.get("key") if isinstance(e, dict) else None for e in entries]


def from_json(d: dict[str, Any], field: str) -> list[Any]:
    """A JSON report's (or finding's) `field` (evidence, fixes, notes) as messages again, from its
    `<field>_data` entries (a plain-text entry stays its text)."""
    from lossdoctor.findings import restore_messages

    return list(restore_messages(list(d.get(field, [])), d.get(f"{field}_data")))


def sentence_of(check: dict[str, Any]) -> Any:
    """A fix check's verdict sentence (`sentence_data`, or `note_data` of a verification that gave
    none) as a message again."""
    from lossdoctor.messages import Msg

    return Msg.from_data(check.get("sentence_data") or check.get("note_data"))
