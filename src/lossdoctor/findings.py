"""Findings and reports: what every detector produces and every report format renders.

A `Finding` is one diagnosis (a cause, the symptom it explains, where it began, the evidence with
numbers, and fixes with numbers). A `Report` is the ordered list of findings for a run plus notes on
what could not be checked. `Report.to_dict()` is the public JSON contract `lossdoctor.report/1`.

Evidence, fixes and notes are sentences as data (`messages.Msg`: the English text, a key and its
values). The JSON keeps the English strings (the contract) and adds, next to each list, the same
list as data (`evidence_data`, `fixes_data`, `notes_data`: `{"key", "values"}`, or null for a
sentence that is plain text), so a program reads the numbers without parsing English and a report
read back from JSON renders in any language.

A fix is data too (`Fix`): what it asks to change (`kind`, from `FIX_KINDS`), its numbers
(`params`) and the sentence it renders as (`text`, a `Msg`). Programs (the verifier, the incident
merge, the LR probe) read the kind and the numbers, never the sentence. A finding names the rule
that made it (`rule`, e.g. `scalars.runaway_lr`), which arbitration reads instead of its evidence.
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any, TypeAlias

from .messages import Msg, _from_json, _to_json, identity, templates, too_deep
from .vocabulary import CAUSES, SCHEMA, SEVERITY_RANK, SYMPTOMS

#: what a fix asks to change (a closed vocabulary: add, never rename). A replay can apply the state
#: kinds (clip, lr, scaler, adam_eps, fp32_module, unfreeze) and the data kinds (drop_samples, skip_batch); the
#: others are said, not replayed: `lr_range` (an LR range to try, no point), `code` (a change to the
#: code, the data pipeline or the configuration), `measure` (log a signal that tells causes apart),
#: `rerun` (run again with the monitor on), `add_scaler` (train with a GradScaler: never said to a
#: run that has one)
FIX_KINDS = (
    "clip",
    "lr",
    "lr_range",
    "scaler",
    "adam_eps",
    "fp32_module",
    "drop_samples",
    "skip_batch",
    "code",
    "measure",
    "rerun",
    "add_scaler",
    "unfreeze",
)
#: the numbers a fix may carry: `max_norm` (clip); `lr` (the LR to set), `lr_now` (the LR the
#: suggestion starts from), `lr_factor` (or: the LR times this); `lo`/`hi` (an LR range);
#: `samples` (the batch rows to drop; absent: the finding's samples); `init_scale`,
#: `growth_interval` (GradScaler); `eps` (the optimizer's); `module` (the module run in fp32)
FIX_PARAMS = (
    "max_norm",
    "lr",
    "lr_now",
    "lr_factor",
    "lo",
    "hi",
    "samples",
    "init_scale",
    "growth_interval",
    "eps",
    "module",
)


def _number(v: Any) -> float | None:
    return float(v) if isinstance(v, numbers.Real) and not isinstance(v, bool) else None


@dataclass(frozen=True, init=False, eq=False)
class Fix:
    """One suggested fix: its `kind` (FIX_KINDS), its numbers (`params`, names from FIX_PARAMS) and
    the sentence it renders as (`text`: a `Msg`, or plain text). `Fix("clip", max_norm=1.0)` (no
    text) renders as the verifier names that change. The constructors below keep call sites short:
    `Fix.lr(Msg("grad.fix_lower_lr", lr=lr, to=lr / 10), to=lr / 10, now=lr)`."""

    kind: str
    params: dict[str, Any]
    text: str

    def __init__(
        self, kind: str, params: dict[str, Any] | None = None, text: str | None = None, /, **more: Any
    ) -> None:
        if kind not in FIX_KINDS:
            raise ValueError(f"unknown fix kind {kind!r}")
        p = {**(params or {}), **more}
        unknown = [k for k in p if k not in FIX_PARAMS]
        if unknown:
            raise ValueError(f"unknown fix parameter(s) {', '.join(map(repr, unknown))}")
        p = {k: _param(k, v) for k, v in p.items() if v is not None}
        object.__setattr__(self, "kind", kind)
        object.__setattr__(self, "params", p)
        if text is None:
            text = _describe(kind, p)
        if not isinstance(text, str):
            raise ValueError(f"a fix's text must be a string, not {type(text).__name__}")
        object.__setattr__(self, "text", text)

    # --- the constructors every detector uses -------------------------------------------------
    @classmethod
    def clip(cls, text: str, max_norm: float) -> Fix:
        return cls("clip", {"max_norm": max_norm}, text)

    @classmethod
    def lr(cls, text: str, to: Any = None, now: Any = None, factor: float | None = None) -> Fix:
        """The LR set `to` a value (from `now`), or times `factor`; a code change when neither is a
        number (nothing to replay)."""
        if _number(to) is not None:
            return cls("lr", {"lr": _number(to), "lr_now": _number(now)}, text)
        if factor is not None and factor > 0:
            return cls("lr", {"lr_factor": factor}, text)
        return cls("code", None, text)

    @classmethod
    def lr_range(cls, text: str, lo: Any = None, hi: Any = None, now: Any = None) -> Fix:
        return cls("lr_range", {"lo": _number(lo), "hi": _number(hi), "lr_now": _number(now)}, text)

    @classmethod
    def scaler(cls, text: str, init_scale: Any = None, growth_interval: Any = None) -> Fix:
        gi = _number(growth_interval)
        return cls(
            "scaler", {"init_scale": _number(init_scale), "growth_interval": None if gi is None else int(gi)}, text
        )

    @classmethod
    def adam_eps(cls, text: str, eps: float) -> Fix:
        return cls("adam_eps", {"eps": eps}, text)

    @classmethod
    def fp32(cls, text: str, module: str | None) -> Fix:
        """Keep `module` out of fp16/bf16; a code change when no module is named."""
        return (
            cls("fp32_module", {"module": module}, text)
            if isinstance(module, str) and module
            else cls("code", None, text)
        )

    @classmethod
    def unfreeze(cls, text: str) -> Fix:
        """Train every parameter of the model: `requires_grad` on, and each one in the optimizer."""
        return cls("unfreeze", None, text)

    @classmethod
    def drop(cls, text: str, samples: list[int] | None = None) -> Fix:
        """Drop samples from the batch (`samples` absent: the finding's own samples)."""
        return cls("drop_samples", {"samples": samples}, text)

    @classmethod
    def skip(cls, text: str) -> Fix:
        return cls("skip_batch", None, text)

    @classmethod
    def code(cls, text: str) -> Fix:
        return cls("code", None, text)

    def identity(self) -> Any:
        """What the fix asks for, as data (`messages.identity`): its kind, numbers and sentence's key
        and values; a code change with no numbers is its sentence (as a fix in the old form is)."""
        if self.kind == "code" and not self.params:
            return identity(self.text)
        return (
            "fix",
            self.kind,
            repr(sorted((k, repr(_to_json(v))) for k, v in self.params.items())),
            identity(self.text),
        )

    # --- the sentence ---------------------------------------------------------------------------
    @property
    def key(self) -> str | None:
        """The message key of its sentence (None for plain text)."""
        return self.text.key if isinstance(self.text, Msg) else None

    @property
    def values(self) -> dict[str, Any]:
        return dict(self.text.values) if isinstance(self.text, Msg) else {}

    def render(self, lang: str = "en") -> str:
        return self.text.render(lang) if isinstance(self.text, Msg) else str.__str__(self.text)

    def __str__(self) -> str:
        return str.__str__(self.text)

    def __eq__(self, other: object) -> bool:
        """Two fixes are equal when kind, numbers and sentence are; a fix equals a sentence (a
        fix in the old form, a `Msg`) that is its own English text."""
        if isinstance(other, Fix):
            return (self.kind, self.params, str.__str__(self.text)) == (
                other.kind,
                other.params,
                str.__str__(other.text),
            )
        if isinstance(other, str):
            return str.__str__(self.text) == str.__str__(other)
        return NotImplemented

    def __hash__(self) -> int:
        return hash(str.__str__(self.text))

    def __contains__(self, part: str) -> bool:
        """`"max_norm" in fix`, as when fixes were sentences: a search of its English text."""
        return part in str.__str__(self.text)

    def data(self) -> dict[str, Any] | None:
        """The JSON form (an entry of `fixes_data`): the sentence's key and values with the fix's
        kind and numbers; None for a plain-text code change (nothing but its words)."""
        if not isinstance(self.text, Msg) and self.kind == "code" and not self.params:
            return None
        base = self.text.data() if isinstance(self.text, Msg) else {"key": None, "values": {}}
        return {**base, "fix_kind": self.kind, "params": {k: _to_json(v) for k, v in self.params.items()}}

    @classmethod
    def from_data(cls, text: str, d: Any) -> Fix:
        """A fix read back from JSON: `text` (a message or the stored English) with the kind and
        numbers of its `fixes_data` entry; a code change when the entry has none this version knows."""
        kind = d.get("fix_kind") if isinstance(d, dict) else None
        params = d.get("params") if isinstance(d, dict) else None
        if kind in FIX_KINDS and isinstance(params, dict):
            try:
                return cls(kind, {str(k): _from_json(v) for k, v in params.items()}, text)
            except (TypeError, ValueError):
                pass
        return cls("code", None, text)


#: the kinds a replay from a snapshot applies (triage/verify.py)
STATE_FIXES = ("clip", "lr", "scaler", "adam_eps", "fp32_module", "unfreeze")
DATA_FIXES = ("drop_samples", "skip_batch")
REPLAYABLE = STATE_FIXES + DATA_FIXES


def _param(name: str, v: Any) -> Any:
    if name == "module":
        if not isinstance(v, str):
            raise ValueError("a fix's module must be a string")
        return v
    if name == "samples":
        if not isinstance(v, (list, tuple)):
            raise ValueError("a fix's samples must be a list of integers")
        return [_int_or_none("sample", s) for s in v if s is not None]
    if name == "growth_interval":
        return _int_or_none(name, v)
    x = _number(v)
    if x is None:
        raise ValueError(f"a fix's {name} must be a number, not {type(v).__name__}")
    return x


def _describe(kind: str, p: dict[str, Any], step: int | None = None) -> Msg:
    """The change a fix asks for, in a few words (as a verdict names it)."""
    if kind == "clip":
        return Msg("verify.fix.clip", max_norm=float(p.get("max_norm") or 0.0))
    if kind == "lr":
        if p.get("lr") is None and p.get("lr_factor"):
            return Msg("verify.fix.lr_factor", x=float(1 / p["lr_factor"]))
        return Msg("verify.fix.lr", lr=float(p.get("lr") or 0.0))
    if kind == "scaler":
        parts = [f"init_scale={p['init_scale']:g}"] if p.get("init_scale") is not None else []
        if p.get("growth_interval") is not None:
            parts.append(f"growth_interval={p['growth_interval']}")
        return Msg("verify.fix.scaler", settings=", ".join(parts))
    if kind == "adam_eps":
        return Msg("verify.fix.eps", eps=float(p.get("eps") or 0.0))
    if kind == "fp32_module":
        return Msg("verify.fix.fp32", module=str(p.get("module")))
    if kind == "drop_samples":
        return Msg("verify.fix.drop", ids=[int(i) for i in p.get("samples") or []], step=step)
    if kind == "skip_batch":
        return Msg("verify.fix.skip", step=step)
    if kind == "unfreeze":
        return Msg("verify.fix.unfreeze")
    return Msg("verify.fix.code")


def describe_fix(fix: Fix, step: int | None = None) -> Msg:
    return _describe(fix.kind, fix.params, step)


def as_fix(x: Any) -> Fix:
    """A fix as data: a `Fix` as it is; a sentence (a `Msg` or plain text: code written before
    fixes were data, or a user's) is a code change that says it."""
    if isinstance(x, Fix):
        return x
    if isinstance(x, str):
        return Fix("code", None, x)
    raise ValueError(f"a fix must be a Fix or a string, not {type(x).__name__}")


#: what a detector may write as a fix: a `Fix`, or a sentence (a `Msg` or plain text) that
#: `as_fix` makes a code change; `Finding.fixes` always holds `Fix`es (`as_fixes` converts)
FixLike: TypeAlias = Fix | str


def as_fixes(xs: Iterable[FixLike]) -> list[Fix]:
    """Fixes as data (`as_fix` of each): what `Finding(fixes=...)` is given, typed as it holds them."""
    return [as_fix(x) for x in xs]


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
    #: `Fix`es (a sentence given here becomes a code change: `as_fix`)
    fixes: list[Fix] = field(default_factory=list)
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
    #: added: the rule that made the finding, a short stable id (`scalars.runaway_lr`,
    #: `preflight.init`, `triage.replay`...); what arbitration and the merges read, never the evidence
    rule: str | None = None

    def __post_init__(self) -> None:
        if self.cause not in CAUSES:
            raise ValueError(f"unknown cause {self.cause!r}")
        if self.symptom not in SYMPTOMS:
            raise ValueError(f"unknown symptom {self.symptom!r}")
        if self.severity not in SEVERITY_RANK:
            raise ValueError(f"unknown severity {self.severity!r}")
        if isinstance(self.confidence, bool) or not isinstance(self.confidence, numbers.Real):
            raise ValueError(f"confidence must be a number, not {type(self.confidence).__name__}")
        self.confidence = 0.0 if self.confidence != self.confidence else float(min(1.0, max(0.0, self.confidence)))
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
        if not isinstance(self.fixes, (list, tuple)):
            raise ValueError("fixes must be a list of fixes or strings")
        self.fixes = [as_fix(x) for x in self.fixes]
        self.rule = _str_or_none("rule", self.rule)
        if self.fix_checks is not None and not (
            isinstance(self.fix_checks, list) and all(isinstance(c, dict) for c in self.fix_checks)
        ):
            raise ValueError("fix_checks must be a list of objects or null")
        if self.fix_checks is not None and too_deep(self.fix_checks):  # read back from a file
            raise ValueError("fix_checks nest too deeply")
        if self.examples is not None:
            if not isinstance(self.examples, (list, tuple)) or not all(isinstance(e, dict) for e in self.examples):
                raise ValueError("examples must be a list of objects or null")
            self.examples = [{k: v if k == "key" else _int_or_none(k, v) for k, v in e.items()} for e in self.examples]
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
            "fixes": [str(as_fix(x)) for x in self.fixes],
            "evidence_data": messages_data(self.evidence),
            "fixes_data": [as_fix(x).data() for x in self.fixes],
            "rule": self.rule,
            # added, and only when fixes were replayed (older readers see the same keys as before)
            **({"fix_checks": [dict(c) for c in self.fix_checks]} if self.fix_checks is not None else {}),
            **({"examples": [dict(e) for e in self.examples]} if self.examples is not None else {}),
            **({"code": dict(self.code)} if self.code is not None else {}),
        }

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Finding:
        keys = cls.__dataclass_fields__.keys()
        values = {k: d[k] for k in keys if k in d}
        if "evidence" in values:
            values["evidence"] = restore_messages(values["evidence"], d.get("evidence_data"))
        if "fixes" in values:
            texts = restore_messages(values["fixes"], d.get("fixes_data"))
            data = d.get("fixes_data")
            if isinstance(texts, list) and isinstance(data, list) and len(data) == len(texts):
                values["fixes"] = [Fix.from_data(t, x) if isinstance(t, str) else t for t, x in zip(texts, data)]
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
    return {
        "file": v["file"],
        "line": _int_or_none("line", v.get("line")),
        "function": fn if isinstance(fn, str) else "?",
    }


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
