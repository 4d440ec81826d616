"""Findings and reports: what every detector produces and every report format renders.

A `Finding` is one diagnosis (a cause, the symptom it explains, where it began, the evidence with
numbers, and fixes with numbers). A `Report` is the ordered list of findings for a run plus notes on
what could not be checked. `Report.to_dict()` is the public JSON contract `lossdoctor.report/1`.

Evidence, fixes and notes are sentences as data (`messages.Msg`: the English text, a key and its
values). The JSON keeps the English strings (the contract) and adds, next to each list, the same
list as data (`evidence_data`, `fixes_data`, `notes_data`: `{"key", "values"}`, or null for a
sentence that is plain text), so a program reads the numbers without parsing English and a report
read back from JSON renders in any language.
"""

from __future__ import annotations

import math
import numbers
from dataclasses import dataclass, field
from typing import Any

from .messages import Msg, templates, too_deep
from .vocabulary import CAUSES, SCHEMA, SEVERITY_RANK, SYMPTOMS


@dataclass
class Finding:
    cause: str
    symptom: str
    severity: str
    confidence: float
    step: int | None = None
    layer: str | None = None
    op: str | None = None
    batch: int | None = None
    samples: list[int] | None = None
    rank: int | None = None
    evidence: list[str] = field(default_factory=list)
    fixes: list[str] = field(default_factory=list)
    #: added (verified fixes): for fixes replayed from a snapshot, one entry per checked fix:
    #: `{"fix": index into fixes, "verdict": "verified" | "did_not_help" | "not_verifiable" |
    #: "not_checked", "sentence", "sentence_data", and its numbers}`; None when nothing was replayed
    fix_checks: list[dict[str, Any]] | None = None
    #: added (packed sequences): when `samples` are packed rows, the examples inside them that the
    #: finding is about: `{"row", "example", "start", "end"}` (the example's index in its row and
    #: its tokens [start, end) of the row); None when the batch was not packed
    examples: list[dict[str, Any]] | None = None
    #: added (where in the user's code): the innermost frame outside torch and lossdoctor of the
    #: first bad op on replay, `{"file", "line", "function"}`; None when no op was traced
    code: dict[str, Any] | None = None

    def __post_init__(self) -> None:
        if self.cause not in CAUSES:
            raise ValueError(f"unknown cause {self.cause!r}")
        if self.symptom not in SYMPTOMS:
            raise ValueError(f"unknown symptom {self.symptom!r}")
        if self.severity not in SEVERITY_RANK:
            raise ValueError(f"unknown severity {self.severity!r}")
        if isinstance(self.confidence, bool) or not isinstance(self.confidence, numbers.Real):
            raise ValueError(f"confidence must be a number, not {type(self.confidence).__name__}")
        self.confidence = 0.0 if self.confidence != self.confidence else float(
            min(1.0, max(0.0, self.confidence)))
        # findings are also read back from files (preflight.jsonl, incidents/): every field gets
        # its type checked here, so no report format ever receives a string as a step
        self.step = _int_or_none("step", self.step)
        self.batch = _int_or_none("batch", self.batch)
        self.rank = _int_or_none("rank", self.rank)
        self.layer = _str_or_none("layer", self.layer)
        self.op = _str_or_none("op", self.op)
        if self.samples is not None:
            if not isinstance(self.samples, (list, tuple)):
                raise ValueError("samples must be a list of integers")
            self.samples = [_int_or_none("sample", s) for s in self.samples if s is not None]
        self.evidence = _str_list("evidence", self.evidence)
        self.fixes = _str_list("fixes", self.fixes)
        if self.fix_checks is not None and not (isinstance(self.fix_checks, list)
                                                and all(isinstance(c, dict) for c in self.fix_checks)):
            raise ValueError("fix_checks must be a list of objects or null")
        if self.fix_checks is not None and too_deep(self.fix_checks):  # read back from a file
            raise ValueError("fix_checks nest too deeply")
        if self.examples is not None:
            if not isinstance(self.examples, (list, tuple)) or not all(isinstance(e, dict) for e in self.examples):
                raise ValueError("examples must be a list of objects or null")
            self.examples = [{k: v if k == "key" else _int_or_none(k, v) for k, v in e.items()}
                             for e in self.examples]
        self.code = _code_or_none(self.code)

    def to_dict(self) -> dict[str, Any]:
        return {
            "cause": self.cause,
            "symptom": self.symptom,
            "severity": self.severity,
            "confidence": round(self.confidence, 3),
            "step": None if self.step is None else int(self.step),
            "layer": self.layer,
            "op": self.op,
            "batch": None if self.batch is None else int(self.batch),
            "samples": None if self.samples is None else [int(s) for s in self.samples],
            "rank": None if self.rank is None else int(self.rank),
            "evidence": [str.__str__(e) for e in self.evidence],
            "fixes": [str.__str__(x) for x in self.fixes],
            "evidence_data": messages_data(self.evidence),
            "fixes_data": messages_data(self.fixes),
            # added, and only when fixes were replayed (older readers see the same keys as before)
            **({"fix_checks": [dict(c) for c in self.fix_checks]} if self.fix_checks is not None else {}),
            **({"examples": [dict(e) for e in self.examples]} if self.examples is not None else {}),
            **({"code": dict(self.code)} if self.code is not None else {}),
        }

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Finding:
        keys = cls.__dataclass_fields__.keys()
        values = {k: d[k] for k in keys if k in d}
        for name in ("evidence", "fixes"):
            if name in values:
                values[name] = restore_messages(values[name], d.get(f"{name}_data"))
        return cls(**values)

    @property
    def severity_rank(self) -> int:
        return SEVERITY_RANK[self.severity]


#: steps, batches, ranks and sample indices beyond this are not ones a run has (and would not fit
#: the JSON report's integers)
_MAX_INDEX = 1 << 62


def _int_or_none(name: str, v: Any) -> int | None:
    """An index field: None, or an integer (numpy integers and integral floats accepted)."""
    if v is None:
        return None
    if isinstance(v, bool):
        raise ValueError(f"{name} must be an integer, not a bool")
    if isinstance(v, numbers.Integral):
        v = int(v)
    elif isinstance(v, numbers.Real) and math.isfinite(v) and float(v).is_integer():
        v = int(float(v))
    else:
        raise ValueError(f"{name} must be an integer or null, not {type(v).__name__}")
    if abs(v) >= _MAX_INDEX:
        raise ValueError(f"{name} out of range")
    return v


def _str_or_none(name: str, v: Any) -> str | None:
    if v is None or isinstance(v, str):
        return v
    raise ValueError(f"{name} must be a string or null, not {type(v).__name__}")


def _code_or_none(v: Any) -> dict[str, Any] | None:
    """A code location: None, or `{"file": str, "line": int, "function": str}`."""
    if v is None:
        return None
    if not isinstance(v, dict) or not isinstance(v.get("file"), str):
        raise ValueError("code must be an object with file, line and function, or null")
    fn = v.get("function")
    return {"file": v["file"], "line": _int_or_none("line", v.get("line")),
            "function": fn if isinstance(fn, str) else "?"}


def _str_list(name: str, v: Any) -> list[str]:
    if not isinstance(v, (list, tuple)) or not all(isinstance(x, str) for x in v):
        raise ValueError(f"{name} must be a list of strings")
    return list(v)


def messages_data(sentences: list[str]) -> list[dict[str, Any] | None]:
    """The JSON form of each sentence: a message's key and values, None for plain text."""
    return [x.data() if isinstance(x, Msg) else None for x in sentences]


def restore_messages(sentences: Any, data: Any) -> Any:
    """The sentences read back from JSON, as messages where their data says so. The data is used
    only when it lines up with the strings and its key is one this version knows; otherwise the
    stored English stays (a record written by another version still reads)."""
    if not isinstance(sentences, list) or not isinstance(data, list) or len(data) != len(sentences):
        return sentences
    known = templates()
    out = []
    for text, d in zip(sentences, data):
        try:
            m = Msg.from_data(d) if isinstance(text, str) else None
        except TypeError:  # values that are no keyword names (a hand-edited file)
            m = None
        out.append(m if m is not None and m.key in known else text)
    return out


def importance_key(f: Finding) -> tuple:
    """Most important first: severity, then confidence, then the earliest step."""
    step = f.step if f.step is not None else float("inf")
    return (-f.severity_rank, -round(f.confidence, 2), step)


#: how a Report shows itself (`print(report)`: "text"; a notebook cell: "html"), set by the report
#: layer when it is imported (the package facade imports it), so this layer imports nothing above it
RENDERERS: dict[str, Any] = {}


@dataclass
class Report:
    findings: list[Finding]
    steps: int
    notes: list[str] = field(default_factory=list)
    source: str | None = None
    #: the log was too short or too sparse for the checks that matter (the notes say what is
    #: missing): status `inconclusive` instead of `healthy` when nothing was found
    inconclusive: bool = False
    #: `lossdoctor diagnose RUN_A RUN_B`: the runs side by side (`detectors.comparison.compare`);
    #: None for one run, whose JSON then has no `comparison` key
    comparison: dict[str, Any] | None = None

    @property
    def status(self) -> str:
        worst = max((f.severity_rank for f in self.findings), default=0)
        if worst >= SEVERITY_RANK["critical"]:
            return "critical"
        if worst >= SEVERITY_RANK["warning"]:
            return "warning"
        return "inconclusive" if self.inconclusive else "healthy"

    def __str__(self) -> str:
        """The text report (`print(mon.diagnose())`), as `lossdoctor diagnose` prints it."""
        text = RENDERERS.get("text")
        if text is None:  # the report layer not imported: the status and the causes, one line
            return f"lossdoctor: {self.status}" + "".join(f"; {f.cause} ({f.severity})" for f in self.findings)
        return str(text(self))

    def _repr_html_(self) -> str | None:
        """The HTML report, for a notebook cell whose value is the report."""
        html = RENDERERS.get("html")
        return None if html is None else str(html(self))

    @property
    def primary(self) -> Finding | None:
        return self.findings[0] if self.findings else None

    def to_dict(self) -> dict[str, Any]:
        return {
            "schema": SCHEMA,
            "status": self.status,
            "steps": int(self.steps),
            "findings": [f.to_dict() for f in self.findings],
            "notes": [str.__str__(n) for n in self.notes],
            "notes_data": messages_data(self.notes),
            "source": self.source,
            **({"comparison": self.comparison} if self.comparison is not None else {}),
        }

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Report:
        return cls(
            findings=[Finding.from_dict(f) for f in d.get("findings", [])],
            steps=int(d.get("steps", 0)),
            notes=list(restore_messages(list(d.get("notes", [])), d.get("notes_data"))),
            source=d.get("source"),
            inconclusive=d.get("status") == "inconclusive",
        )
