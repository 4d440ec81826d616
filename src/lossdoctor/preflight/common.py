"""What every preflight area shares: the objects under check, one batch taken apart, findings.

A batch comes in whatever shape the user's loop uses (a dict or `BatchEncoding`, an `(x, y)`
tuple, a bare tensor, a dataclass). `BatchView` takes it apart once into the roles the checks
reason about: token ids, token labels, the attention mask, floating inputs, floating targets and
raw strings, so each check asks "where are the labels" in one place.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import torch

from ..findings import Finding, FixLike, as_fixes
from ..messages import fmt, holds, round_sig
from ..signals.batch import IGNORE_INDEX, LABEL_KEYS, iter_tensors
from ..signals.packing import Example, packed_examples
from ..signals.safe_reads import stored_attr, unreadable

__all__ = ["Context", "BatchView", "make_finding", "fmt", "round_sig", "quote", "IGNORE_INDEX", "unwrap_model", "pct"]


@dataclass
class Context:
    """The objects under check and what is known about the plan."""

    model: Any = None
    optimizer: Any = None
    scheduler: Any = None
    scaler: Any = None
    total_steps: int | None = None
    task: str | None = None
    tokenizer: Any = None
    #: "step" when scheduler.step() runs every optimizer step, "epoch" when once per epoch
    scheduler_interval: str = "step"
    steps_per_epoch: int | None = None
    #: True inside watch: batch findings then carry the step they were seen at
    live: bool = False
    #: the schedule's peak LR once simulated (precision checks judge the update size at the peak)
    peak_lr: float | None = None
    notes: list[str] = field(default_factory=list)
    #: what the training framework says about the run (the HF callback's `framework` metadata:
    #: trainer class, TRL version, `assistant_only_loss`...), so a fix names the trainer's option
    trainer: dict[str, Any] = field(default_factory=dict)

    def note(self, text: str) -> None:
        if not holds(self.notes, text):
            self.notes.append(text)


def unwrap_model(model: Any) -> Any:
    """The nn.Module inside DDP / FSDP / compiled wrappers (their `.module` or `._orig_mod`)."""
    seen = 0
    while seen < 5 and model is not None:
        # stored, never a property (FSDP1's `module` property reads `_fsdp_wrapped_module`)
        inner = (
            stored_attr(model, "_orig_mod")
            or stored_attr(model, "module")
            or stored_attr(model, "_fsdp_wrapped_module")
        )
        if not isinstance(inner, torch.nn.Module):
            break
        model = inner
        seen += 1
    return model


@dataclass
class BatchView:
    """One batch taken apart by role. Tensors stay where they were (device and dtype)."""

    index: int
    size: int | None = None
    input_ids: torch.Tensor | None = None
    labels: torch.Tensor | None = None
    label_key: str | None = None
    attention_mask: torch.Tensor | None = None
    #: floating inputs (features, pixels, embeddings) by key
    floats: dict[str, torch.Tensor] = field(default_factory=dict)
    #: floating targets (regression) by key
    float_targets: dict[str, torch.Tensor] = field(default_factory=dict)
    #: raw strings of the batch by key, one per sample
    texts: dict[str, list[str]] = field(default_factory=dict)
    #: the examples of packed rows (`position_ids` restarting inside a row), None when not packed
    examples: list[Example] | None = None

    @classmethod
    def parse(cls, batch: Any, index: int) -> BatchView:
        view = cls(index=index)
        # tensors whose values cannot be read (meta, sparse, complex...) are left out: only their
        # own checks are lost (the batch probe says which, once)
        pairs = [(k, t) for k, t in iter_tensors(batch) if unreadable(t) is None]
        tuple_like = isinstance(batch, (tuple, list)) and not hasattr(batch, "items")
        last_key = str(len(batch) - 1) if tuple_like and len(batch) >= 2 else None
        for key, t in pairs:
            if t.dim() == 0 or t.numel() == 0:
                continue
            if view.size is None:
                view.size = int(t.shape[0])
            leaf = key.rsplit(".", 1)[-1]
            is_label = leaf in LABEL_KEYS or key == last_key
            if leaf == "attention_mask":
                if view.attention_mask is None:
                    view.attention_mask = t
            elif is_label:
                if t.is_floating_point():
                    view.float_targets[key] = t
                elif view.labels is None:
                    view.labels, view.label_key = t, key
            elif t.is_floating_point():
                view.floats[key] = t
            elif leaf == "input_ids" or (tuple_like and key == "0" and t.dim() == 2):
                if view.input_ids is None:
                    view.input_ids = t
        view.texts = _strings(batch)
        by_leaf = {k.rsplit(".", 1)[-1]: t for k, t in pairs}
        pos = by_leaf.get("position_ids")
        if pos is None or view.input_ids is None or tuple(pos.shape) == tuple(view.input_ids.shape):
            view.examples = packed_examples(by_leaf)  # (positions shared by every row say nothing)
        if view.size is None and view.texts:
            view.size = len(next(iter(view.texts.values())))
        return view

    def token_labels(self) -> bool:
        """Labels are per token (same shape as the ids), not one class per sample."""
        return (
            self.labels is not None
            and self.input_ids is not None
            and tuple(self.labels.shape) == tuple(self.input_ids.shape)
            and self.labels.dim() == 2
        )


def _strings(batch: Any) -> dict[str, list[str]]:
    """String fields of a dict-like batch (`{"text": [...]}`), or a batch that is a list of str."""
    out: dict[str, list[str]] = {}
    if isinstance(batch, str):
        return {"text": [batch]}
    if isinstance(batch, (list, tuple)) and batch and all(isinstance(s, str) for s in batch):
        return {"text": list(batch)}
    if hasattr(batch, "items") and callable(batch.items):
        for k, v in batch.items():
            if isinstance(v, str):
                out[str(k)] = [v]
            elif isinstance(v, (list, tuple)) and v and all(isinstance(s, str) for s in v):
                out[str(k)] = list(v)
    return out


def make_finding(
    cause: str,
    symptom: str,
    severity: str,
    confidence: float,
    evidence: list[str],
    fixes: Sequence[FixLike],
    *,
    ctx: Context | None = None,
    batch: int | None = None,
    layer: str | None = None,
    samples: list[int] | None = None,
    examples: list[dict[str, Any]] | None = None,
    rule: str | None = None,
) -> Finding:
    """A finding; inside watch a batch finding also carries the step it was seen at (batch i is the
    i-th optimizer iteration), before training (`check`) only the batch index. Its rule:
    `preflight.<cause>` unless the check names its own."""
    step = batch if (ctx is not None and ctx.live and batch is not None) else None
    return Finding(
        cause=cause,
        symptom=symptom,
        severity=severity,
        confidence=confidence,
        step=step,
        batch=batch,
        layer=layer,
        samples=samples,
        evidence=evidence,
        fixes=as_fixes(fixes),
        examples=examples,
        rule=rule or f"preflight.{cause}",
    )


def quote(text: str, limit: int = 90) -> str:
    """A decoded span for an evidence sentence: JSON-quoted (newlines visible), shortened."""
    if len(text) > limit:
        head = limit * 2 // 3
        text = text[:head] + " ... " + text[-(limit - head - 5) :]
    return json.dumps(text, ensure_ascii=False)


def pct(part: float, whole: float) -> str:
    """A share for an evidence sentence: '97%', '0.4%'."""
    if whole <= 0:
        return "0%"
    p = 100.0 * part / whole
    return f"{p:.0f}%" if p >= 10 or p == 0 else f"{p:.1g}%"
