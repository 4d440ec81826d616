"""The SFT label mask: is the model trained on what it should produce, and only on that?

For a causal LM the labels of a sample are its token ids with -100 wherever no loss should be
taken. Four ways this goes wrong, each silent in the loss curve:

- the prompt (or the padding) keeps its labels: the model learns to reproduce the user's turn and
  the padding; the loss falls nicely and the model is bad (`label_mask_leak`);
- everything is -100: the mean cross-entropy over zero tokens is NaN (or 0 with a sum), no
  gradient flows (`label_mask_empty`); the same per sample, usually a prompt that filled
  `max_length` and truncation cut the whole response;
- the collator shifted the labels and the model shifts them again: it learns the token after next;
- the end-of-turn / EOS token is never supervised: the model never learns to stop.

Packed rows (`position_ids` restarting inside a row, TRL's `packing=True`) are checked example by
example: the rows are cut into their examples first, so an example whose labels are all -100 is
found even though its row holds other examples' labels, and the prompt of each example is judged
on its own. The evidence then names the row, the example's index in it and its tokens.

The prompt/response boundary comes from the tokenizer's chat template (`chat.ChatSpans`); without
one, an SFT batch whose every real token is supervised is the tell-tale `labels = input_ids`.
Which way the labels are aligned (`labels[i] == input_ids[i]`, shifted by the model, or already
shifted `labels[i] == input_ids[i+1]`) is measured, not assumed.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ..findings import Finding
from ..messages import Msg
from ..signals.packing import Example
from ..signals.safe_reads import stored_attr
from .chat import ChatSpans, decode
from .common import IGNORE_INDEX, BatchView, Context, make_finding, pct, quote, unwrap_model


@dataclass(frozen=True)
class LabelCheckLimits:
    #: batches whose every label position is ignored are reported at once (the loss is NaN right
    #: now) from this many positions on (a tiny batch may be all prompt by chance)
    min_positions: int = 16
    #: labels equal to the inputs (or to the inputs shifted by one) at this share of the
    #: supervised positions: the labels are a copy of the inputs, aligned (or already shifted)
    copy_share: float = 0.9
    #: aligned agreement below this share, shifted above `copy_share`: shifted twice
    aligned_below: float = 0.5
    #: SFT: prompt positions supervised, at least this many and this share of the prompt
    min_prompt_supervised: int = 4
    prompt_supervised_share: float = 0.2
    #: SFT without a known header: this share of the real samples fully supervised
    all_supervised_share: float = 0.9
    #: empty samples at this share of the samples: a warning, fewer an info (rule of thumb)
    empty_warning_share: float = 0.05


LIMITS = LabelCheckLimits()
#: the same value under its former name (`LabelCheckLimits.min_positions`)
MIN_POSITIONS = LIMITS.min_positions


@dataclass
class _Counts:
    batches: int = 0
    positions: int = 0
    supervised: int = 0
    samples: int = 0
    empty: list[tuple[int, int]] = field(default_factory=list)  # (batch, sample)
    empty_packed: list[tuple[int, Example]] = field(default_factory=list)  # (batch, example in a packed row)
    empty_at_max_len: int = 0
    aligned_agree: int = 0
    shifted_agree: int = 0
    compared: int = 0
    pad_supervised: int = 0
    prompt: int = 0
    prompt_supervised: int = 0
    response: int = 0
    response_supervised: int = 0
    header_found: bool = False
    all_real_supervised: int = 0  # samples whose every real token (but the first) is supervised
    real_samples: int = 0
    eos_supervised: int = 0
    eos_in_response: int = 0
    #: leak examples (batch, sample or packed example, text)
    examples: list[tuple[int, int | Example, str]] = field(default_factory=list)
    empty_examples: list[tuple[int, int | Example, str]] = field(default_factory=list)
    all_empty_batches: list[int] = field(default_factory=list)


class LabelCheck:
    """Accumulates label statistics batch by batch; `finish` turns them into findings."""

    def __init__(self, ctx: Context) -> None:
        self.ctx = ctx
        self.tok = ctx.tokenizer
        self.chat = ChatSpans.from_tokenizer(self.tok)
        self.sft = ctx.task == "sft" or (self.chat is not None and ctx.task in (None, "sft"))
        self.c = _Counts()
        self.pad_id = _token_id(self.tok, "pad_token_id")
        self.eos_ids = self._eos_ids()
        self.shifts = model_shifts_labels(ctx.model)
        #: the examples of the batch being added, when its rows are packed (sample s = units[s])
        self.units: list[Example] | None = None

    def _eos_ids(self) -> set[int]:
        ids = set()
        for v in (_token_id(self.tok, "eos_token_id"), _config_eos(self.ctx.model)):
            if v is not None:
                ids.add(v)
        if self.chat is not None and self.chat.end:
            ids.add(self.chat.end[0])
        return ids

    # --- per batch ----------------------------------------------------------------------------
    def add(self, view: BatchView) -> list[Finding]:
        """Account for one batch; returns the findings that cannot wait (an all-masked batch)."""
        if view.labels is None or view.labels.is_floating_point():
            return []
        labels = view.labels.detach().to("cpu").long().numpy()
        c = self.c
        c.batches += 1
        ignored = labels == IGNORE_INDEX
        c.positions += labels.size
        c.supervised += int((~ignored).sum())
        now: list[Finding] = []
        if ignored.all() and labels.size >= MIN_POSITIONS and view.token_labels():
            c.all_empty_batches.append(view.index)
            if len(c.all_empty_batches) == 1:
                now.append(self._all_masked(view, labels))
        if not view.token_labels() or view.input_ids is None:  # (token labels come with ids)
            return now
        ids = view.input_ids.detach().to("cpu").long().numpy()
        real = self._real(view, ids)
        self.units = [e for e in view.examples if e.length >= 2] if view.examples else None
        if self.units:  # one sample per example of the packed rows
            ids, labels, real = (
                by_example(a, self.units, fill)
                for a, fill in ((ids, self.pad_id or 0), (labels, IGNORE_INDEX), (real, False))
            )
        self._per_sample(view, ids, labels, real)
        offset = self._alignment(ids, labels)
        if offset is None:
            return now
        target = _targets(labels, offset)  # target[i, j]: position j's token is supervised
        c.pad_supervised += int((target & ~real).sum())
        self._prompt_response(view, ids, target, real)
        if self.eos_ids:
            eos = np.isin(ids, list(self.eos_ids))
            c.eos_supervised += int((eos & target).sum())
            c.eos_in_response += int((eos & real).sum())
        return now

    def _real(self, view: BatchView, ids: np.ndarray) -> np.ndarray:
        """Non-padding positions: the attention mask, else ids != pad (when pad is not also EOS)."""
        if view.attention_mask is not None and tuple(view.attention_mask.shape) == ids.shape:
            return view.attention_mask.detach().to("cpu").numpy() > 0
        if self.pad_id is not None and self.pad_id not in self.eos_ids:
            return ids != self.pad_id
        return np.ones(ids.shape, dtype=bool)

    def _per_sample(self, view: BatchView, ids: np.ndarray, labels: np.ndarray, real: np.ndarray) -> None:
        c = self.c
        sup = labels != IGNORE_INDEX
        per = sup.sum(axis=1)
        lengths = real.sum(axis=1)
        c.samples += len(per)
        if not (~sup).all():  # a fully masked batch is reported on its own
            # as long as the truncation allows: the trainer's max_length for packed examples (the
            # packed row is longer), the longest sample of the batch otherwise
            longest = int(lengths.max())
            if self.units and isinstance(self.ctx.trainer.get("max_length"), int):
                longest = min(longest, int(self.ctx.trainer["max_length"]))
            for s in np.flatnonzero(per == 0):
                if self.units:
                    c.empty_packed.append((view.index, self.units[s]))
                else:
                    c.empty.append((view.index, int(s)))
                if lengths[s] >= longest > 0:
                    c.empty_at_max_len += 1
                if len(c.empty_examples) < 2:
                    text = decode(self.tok, [int(x) for x in ids[s][real[s]][-40:]])
                    if text is not None:
                        c.empty_examples.append((view.index, self._unit(int(s)), text))
        has_real = lengths > 1
        c.real_samples += int(has_real.sum())
        # every real token but the first (which no label can predict) supervised
        real_after_first = real.copy()
        first = real.argmax(axis=1)
        real_after_first[np.arange(len(first)), first] = False
        all_sup = ((sup | ~real_after_first).all(axis=1)) & has_real
        c.all_real_supervised += int(all_sup.sum())

    def _alignment(self, ids: np.ndarray, labels: np.ndarray) -> int | None:
        """0 when labels[i] == input_ids[i] (the model shifts), 1 when labels[i] == input_ids[i+1]
        (already shifted); None when the labels are neither (not token labels of these ids)."""
        sup = labels != IGNORE_INDEX
        n = int(sup.sum())
        if n == 0:
            return None
        a0 = int(((labels == ids) & sup).sum())
        a1 = int(((labels[:, :-1] == ids[:, 1:]) & sup[:, :-1]).sum())
        n1 = int(sup[:, :-1].sum())
        c = self.c
        c.compared += n
        c.aligned_agree += a0
        c.shifted_agree += a1
        if a0 >= LIMITS.copy_share * n:
            return 0
        if n1 and a1 >= LIMITS.copy_share * n1:
            return 1
        return None

    def _prompt_response(self, view: BatchView, ids: np.ndarray, target: np.ndarray, real: np.ndarray) -> None:
        if self.chat is None:
            return
        response, neutral, found = self.chat.response_mask(ids, real)
        c = self.c
        c.header_found |= found
        if not found:
            return
        prompt = real & ~response & ~neutral
        c.prompt += int(prompt.sum())
        c.response += int(response.sum())
        leaked = target & prompt
        c.prompt_supervised += int(leaked.sum())
        c.response_supervised += int((target & response).sum())
        for s in np.flatnonzero(leaked.any(axis=1)):
            if len(c.examples) >= 2:
                break
            text = decode(self.tok, [int(x) for x in ids[s][target[s]]])
            if text is not None:
                c.examples.append((view.index, self._unit(int(s)), text))

    def _unit(self, s: int) -> int | Example:
        """Sample s of the batch being added: a row, or an example of a packed row."""
        return self.units[s] if self.units else int(s)

    # --- findings -----------------------------------------------------------------------------
    def _all_masked(self, view: BatchView, labels: np.ndarray) -> Finding:
        ev: list[str] = [Msg("plabels.all_masked", n=int(labels.size), batch=view.index, ignore=IGNORE_INDEX)]
        if view.input_ids is not None and self.tok is not None:
            ids = view.input_ids.detach().to("cpu").long().numpy()
            real = self._real(view, ids)
            text = decode(self.tok, [int(x) for x in ids[0][real[0]][-40:]])
            if text is not None:
                ev.append(Msg("plabels.sample0_ends_with", text=quote(text)))
        return make_finding(
            "label_mask_empty",
            "nonfinite",
            "critical",
            0.95,
            ev,
            [Msg("plabels.fix_keep_response"), Msg("plabels.fix_truncate_prompt")],
            ctx=self.ctx,
            batch=view.index,
            samples=list(range(labels.shape[0]))[:32],
        )

    def finish(self) -> list[Finding]:
        c = self.c
        out: list[Finding] = []
        if c.batches == 0:
            return out
        if len(c.all_empty_batches) > 1 and not self.ctx.live:  # live, the label detector counts them
            out.append(
                make_finding(
                    "label_mask_empty",
                    "nonfinite",
                    "critical",
                    0.95,
                    [
                        Msg(
                            "plabels.batches_all_masked",
                            n=len(c.all_empty_batches),
                            total=c.batches,
                            batches=str(c.all_empty_batches[:8]),
                        )
                    ],
                    [],
                    ctx=self.ctx,
                    batch=c.all_empty_batches[0],
                )
            )
        if c.compared and c.supervised and not c.all_empty_batches:
            if (
                c.aligned_agree < LIMITS.aligned_below * c.compared
                and c.shifted_agree >= LIMITS.copy_share * c.compared
            ):
                if self.shifts:
                    out.append(self._shifted_twice())
                else:
                    self.ctx.note(Msg("plabels.already_shifted"))
        out += self._leaks()
        out += self._empty_samples()
        eos = self._eos()
        if eos is not None:
            out.append(eos)
        return out

    def _shifted_twice(self) -> Finding:
        c = self.c
        name = type(unwrap_model(self.ctx.model)).__name__
        return make_finding(
            "noisy_data",
            "plateau",
            "warning",
            0.9,
            [
                Msg(
                    "plabels.shifted",
                    shifted=pct(c.shifted_agree, c.compared),
                    n=c.compared,
                    aligned=pct(c.aligned_agree, c.compared),
                ),
                Msg("plabels.shifted_again", model=name),
            ],
            [Msg("plabels.fix_do_not_shift", model=name)],
            ctx=self.ctx,
        )

    def _leaks(self) -> list[Finding]:
        """Supervised tokens that should be masked: padding (any task), the prompt (SFT only). One
        helper each, to keep each short."""
        found = [self._padding_leak(), self._prompt_leak() if self.sft else None]
        return [f for f in found if f is not None]

    def _padding_leak(self) -> Finding | None:
        """Padding positions whose label is supervised."""
        c = self.c
        if not c.pad_supervised:
            return None
        total = max(1, c.supervised)
        return make_finding(
            "label_mask_leak",
            "plateau",
            "warning",
            0.9,
            [Msg("plabels.padding_supervised", n=c.pad_supervised, pct=pct(c.pad_supervised, total), total=total)],
            [Msg("plabels.fix_mask_padding", ignore=IGNORE_INDEX)],
            ctx=self.ctx,
        )

    def _prompt_leak(self) -> Finding | None:
        """SFT: the prompt is supervised (the assistant header found), or every real token is (not
        found)."""
        c = self.c
        ev: list[str] = []
        conf = 0.0
        if (
            c.header_found
            and c.prompt
            and c.prompt_supervised >= max(LIMITS.min_prompt_supervised, LIMITS.prompt_supervised_share * c.prompt)
        ):
            conf = 0.95
            ev.append(
                Msg(
                    "plabels.prompt_supervised",
                    n=c.prompt_supervised,
                    prompt=c.prompt,
                    pct=pct(c.prompt_supervised, c.prompt),
                    batches=c.batches,
                    response_n=c.response_supervised,
                    response=c.response,
                )
            )
        elif (
            not c.header_found
            and c.real_samples
            and c.all_real_supervised >= max(1, LIMITS.all_supervised_share * c.real_samples)
        ):
            conf = 0.75
            ev.append(
                Msg("plabels.all_real_supervised", n=c.all_real_supervised, total=c.real_samples, ignore=IGNORE_INDEX)
            )
            if self.chat is not None:
                ev.append(Msg("plabels.header_not_found", header=quote(self.chat.header_text)))
        if not conf:
            return None
        for b, s, text in c.examples:
            ev.append(_about(b, s, "plabels.supervised_text", "plabels.packed_supervised_text", text=quote(text)))
        header = quote(self.chat.header_text) if self.chat is not None else Msg("plabels.the_assistant_header")
        return make_finding(
            "label_mask_leak", "plateau", "warning", conf, ev, [mask_prompt_fix(self.ctx.trainer, header)], ctx=self.ctx
        )

    def _empty_samples(self) -> list[Finding]:
        c = self.c
        if not (c.empty or c.empty_packed):
            return []
        n = len(c.empty) + len(c.empty_packed)
        sev = "warning" if n >= LIMITS.empty_warning_share * c.samples else "info"
        if c.empty_packed:
            first_batch = c.empty_packed[0][0]
            where = [e for b, e in c.empty_packed if b == first_batch][:32]
            samples = sorted({e.row for e in where})
            ev: list[str] = [
                Msg(
                    "plabels.no_supervised_example",
                    n=n,
                    total=c.samples,
                    batch=first_batch,
                    examples=[
                        Msg("labels.example_in_row", row=e.row, example=e.index, start=e.start, end=e.end)
                        for e in where[:4]
                    ],
                )
            ]
        else:
            first_batch = c.empty[0][0]
            samples = [s for b, s in c.empty if b == first_batch][:32]
            ev = [Msg("plabels.no_supervised_token", n=n, total=c.samples, batch=first_batch, samples=str(samples[:8]))]
        if c.empty_at_max_len and c.empty_packed and self.ctx.trainer.get("max_length"):
            ev.append(
                Msg(
                    "plabels.truncated_response_packed",
                    n=c.empty_at_max_len,
                    max_length=int(self.ctx.trainer["max_length"]),
                )
            )
        elif c.empty_at_max_len:
            ev.append(Msg("plabels.truncated_response", n=c.empty_at_max_len))
        for b, s, text in c.empty_examples:
            ev.append(_about(b, s, "plabels.sample_ends_with", "plabels.packed_example_ends_with", text=quote(text)))
        return [
            make_finding(
                "label_mask_empty",
                "slow_convergence",
                sev,
                0.85,
                ev,
                [Msg("plabels.fix_truncate_and_drop_packed" if c.empty_packed else "plabels.fix_truncate_and_drop")],
                ctx=self.ctx,
                batch=first_batch,
                samples=samples,
                examples=[e.to_dict() for e in where] if c.empty_packed else None,
            )
        ]

    def _eos(self) -> Finding | None:
        c = self.c
        if not (self.sft and self.eos_ids and c.supervised and not c.all_empty_batches) or c.eos_supervised:
            return None
        if c.response_supervised == 0 and c.header_found:
            return None  # nothing of the response is supervised: the leak/empty findings say it
        names = ", ".join(f"{_token_text(self.tok, i)} (id {i})" for i in sorted(self.eos_ids))
        if c.eos_in_response:
            ev: list[str] = [
                Msg("plabels.eos_never_supervised", names=names, n=c.eos_in_response, supervised=c.supervised)
            ]
        else:
            ev = [Msg("plabels.eos_absent", names=names, supervised=c.supervised)]
        return make_finding(
            "label_mask_empty", "plateau", "warning", 0.8, ev, [Msg("plabels.fix_append_eos")], ctx=self.ctx
        )


def mask_prompt_fix(trainer: dict[str, Any], header: Any) -> Msg:
    """How to mask the prompt, in the words of the trainer that runs: TRL 1.x's `SFTConfig`
    options (with what this run set them to), TRL before 0.20's collator, or plain -100 labels."""
    version = trainer.get("trl_version") if trainer else None
    if not isinstance(version, str):
        return Msg("plabels.fix_mask_prompt", ignore=IGNORE_INDEX, header=header)
    if _version(version) < (0, 20):  # assistant_only_loss arrived and the collator left in 0.20
        return Msg("plabels.fix_mask_prompt_trl_collator", version=version, header=header)
    return Msg(
        "plabels.fix_mask_prompt_trl",
        version=version,
        assistant=str(trainer.get("assistant_only_loss")),
        completion=str(trainer.get("completion_only_loss")),
    )


def by_example(a: np.ndarray, examples: list[Example], fill: Any) -> np.ndarray:
    """(examples, longest) matrix of a (rows, tokens) array cut into the packed examples, each
    left-aligned and filled after its end: the per-sample checks then run per example."""
    width = max(e.length for e in examples)
    out = np.full((len(examples), width), fill, dtype=a.dtype)
    for k, e in enumerate(examples):
        out[k, : e.length] = a[e.row, e.start : e.end]
    return out


def _about(batch: int, where: int | Example, key: str, packed_key: str, **values: Any) -> Msg:
    """A sentence about one sample, or about one example of a packed row (its row, its index in
    the row, its tokens)."""
    if isinstance(where, Example):
        return Msg(
            packed_key, batch=batch, row=where.row, example=where.index, start=where.start, end=where.end, **values
        )
    return Msg(key, batch=batch, sample=where, **values)


def _version(text: str) -> tuple[int, ...]:
    parts = []
    for piece in text.split(".")[:3]:
        digits = "".join(ch for ch in piece if ch.isdigit()) if piece[:1].isdigit() else ""
        parts.append(int(digits) if digits else 0)
    return tuple(parts)


def _targets(labels: np.ndarray, offset: int) -> np.ndarray:
    """Mask of positions whose token is a supervised target, given the label alignment."""
    sup = labels != IGNORE_INDEX
    if offset == 0:
        return sup
    out = np.zeros_like(sup)
    out[:, 1:] = sup[:, :-1]
    return out


def model_shifts_labels(model: Any) -> bool:
    """HF causal LMs shift labels inside forward (`*ForCausalLM`, GPT-2's `*LMHeadModel`)."""
    if model is None:
        return False
    name = type(unwrap_model(model)).__name__
    return name.endswith(("ForCausalLM", "LMHeadModel"))


def _token_id(tok: Any, attr: str) -> int | None:
    v = getattr(tok, attr, None) if tok is not None else None
    return int(v) if isinstance(v, int) else None


def _config_eos(model: Any) -> int | None:
    cfg = stored_attr(unwrap_model(model), "config") if model is not None else None
    v = getattr(cfg, "eos_token_id", None)
    vocab = getattr(cfg, "vocab_size", None)
    if isinstance(v, int) and (not isinstance(vocab, int) or v < vocab):
        return v
    return None


def _token_text(tok: Any, i: int) -> str:
    text = decode(tok, [i])
    return quote(text) if text else "EOS"
