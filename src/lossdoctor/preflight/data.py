"""The data itself: values a model cannot learn from, before they reach it.

Per batch, at once: NaN/Inf in floating inputs or targets (which samples), token ids outside the
embedding. Over the batches seen: feature scales (raw pixels 0..255, a feature in the 1e5 range
next to one in the 1e-1 range), text that was decoded with the wrong codec (U+FFFD replacement
characters, UTF-8 read as cp1252: "cafÃ©"), empty samples, samples far longer than the rest, and
exact duplicates. Only reductions leave the device; the batch is never copied whole.
"""

from __future__ import annotations

import hashlib
import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch

from ..findings import Finding, FixLike
from ..messages import Msg
from .chat import decode
from .common import BatchView, Context, make_finding, pct, quote, unwrap_model


@dataclass(frozen=True)
class DataLimits:
    #: a feature whose RMS exceeds this is not standardised (standardised data has RMS ~1; rule
    #: of thumb, untuned)
    scale: float = 20.0
    #: features of one input whose RMS spread over this ratio (four orders of magnitude)
    spread: float = 1e4
    #: regression targets get more room before they count as unscaled (rule of thumb, untuned)
    target_scale: float = 100.0
    #: a sample this many times the median length is far longer than the rest (an info)
    long_factor: float = 8.0
    #: pixel layout: values within [0, this] with a max above 1 are raw 8-bit pixels
    pixel_max: float = 255
    #: samples with decoding errors at this share of the texts (and at least
    #: `min_decoding_errors`): a warning, fewer an info (rule of thumb, untuned)
    decoding_share: float = 0.02
    min_decoding_errors: int = 2
    #: decoding errors and mojibake kept as examples
    kept_examples: int = 64
    #: rows needed (and features per row) to hash samples for duplicates; wider rows are not hashed
    min_lengths: int = 4
    min_row_features: int = 4
    max_hashed_features: int = 1 << 16
    #: a median length below this is too short to call anything "far longer"
    min_median_length: float = 2
    #: samples needed before duplicates are judged; a duplicate share from `duplicate_share` on is
    #: reported, from `duplicate_warning` on a warning (rule of thumb, untuned)
    min_samples_for_duplicates: int = 8
    duplicate_share: float = 0.05
    duplicate_warning: float = 0.2


LIMITS = DataLimits()


@dataclass
class _Moments:
    """Per-feature count/mean/M2 combined across batches (Chan et al.'s parallel update)."""

    n: np.ndarray | None = None
    mean: np.ndarray | None = None
    m2: np.ndarray | None = None
    lo: float = math.inf
    hi: float = -math.inf
    layout: str = ""

    def add(self, n: np.ndarray, mean: np.ndarray, var: np.ndarray) -> None:
        m2 = var * n
        if self.n is None or self.mean is None or self.m2 is None or self.n.shape != n.shape:
            self.n, self.mean, self.m2 = n, mean, m2
            return
        tot = self.n + n
        with np.errstate(invalid="ignore", divide="ignore"):
            delta = mean - self.mean
            self.mean = np.where(tot > 0, self.mean + delta * n / np.maximum(tot, 1), 0.0)
            self.m2 = self.m2 + m2 + delta * delta * self.n * n / np.maximum(tot, 1)
        self.n = tot

    def rms(self) -> np.ndarray:
        if self.n is None or self.mean is None or self.m2 is None:  # nothing added yet
            return np.zeros(0)
        var = self.m2 / np.maximum(self.n, 1)
        return np.sqrt(self.mean * self.mean + var)


@dataclass
class _Seen:
    samples: int = 0
    hashes: dict[bytes, tuple[int, int]] = field(default_factory=dict)
    duplicates: list[tuple[tuple[int, int], tuple[int, int]]] = field(default_factory=list)
    lengths: list[tuple[int, int, int]] = field(default_factory=list)  # (length, batch, sample)
    empty: list[tuple[int, int]] = field(default_factory=list)
    fffd: list[tuple[int, int, str]] = field(default_factory=list)
    mojibake: list[tuple[int, int, str, str]] = field(default_factory=list)
    texts: int = 0


class DataCheck:
    def __init__(self, ctx: Context) -> None:
        self.ctx = ctx
        self.tok = ctx.tokenizer
        self.moments: dict[str, _Moments] = {}
        self.target_moments: dict[str, _Moments] = {}
        self.seen = _Seen()
        self.vocab = _vocab_size(ctx)
        self.pad_id = getattr(self.tok, "pad_token_id", None) if self.tok is not None else None
        self._reported: set[str] = set()
        self._ftfy: bool | None = None  # imported on the first text (0.2 s)

    # --- per batch ----------------------------------------------------------------------------
    def add(self, view: BatchView) -> list[Finding]:
        now: list[Finding] = []
        with torch.no_grad():
            for key, t in list(view.floats.items()) + list(view.float_targets.items()):
                f = self._nonfinite(view, key, t)
                if f is not None:
                    now.append(f)
            for key, t in view.floats.items():
                if "mask" not in key.rsplit(".", 1)[-1]:
                    _accumulate(self.moments.setdefault(key, _Moments()), t)
            for key, t in view.float_targets.items():
                _accumulate(self.target_moments.setdefault(key, _Moments()), t)
            f = self._id_range(view)
            if f is not None:
                now.append(f)
        self._samples(view)
        return now

    def _nonfinite(self, view: BatchView, key: str, t: torch.Tensor) -> Finding | None:
        flat = t.detach().reshape(t.shape[0], -1)
        bad_per = (~torch.isfinite(flat)).sum(dim=1).to("cpu").numpy()
        if not bad_per.any():
            return None
        samples = [int(i) for i in np.flatnonzero(bad_per)]
        nan = int(torch.isnan(flat).sum())
        inf = int(bad_per.sum()) - nan
        what = ", ".join(x for x in (f"{nan} NaN" if nan else "", f"{inf} Inf" if inf else "") if x)
        return make_finding(
            "nonfinite_data",
            "nonfinite",
            "critical",
            0.95,
            [
                Msg(
                    "data.nonfinite_samples",
                    batch=view.index,
                    key=repr(key),
                    n=len(samples),
                    total=int(flat.shape[0]),
                    what=what,
                    samples=str(samples[:8]),
                )
            ],
            [Msg("data.fix_drop_nonfinite")],
            ctx=self.ctx,
            batch=view.index,
            samples=samples[:32],
        )

    def _id_range(self, view: BatchView) -> Finding | None:
        if view.input_ids is None or self.vocab is None or "ids" in self._reported:
            return None
        ids = view.input_ids.detach()
        lo, hi = (int(x) for x in torch.aminmax(ids))
        if lo >= 0 and hi < self.vocab:
            return None
        self._reported.add("ids")
        bad = ((ids < 0) | (ids >= self.vocab)).reshape(ids.shape[0], -1).any(dim=1)
        samples = [int(i) for i in torch.nonzero(bad).flatten().tolist()]
        return make_finding(
            "nonfinite_data",
            "nonfinite",
            "critical",
            0.95,
            [Msg("data.ids_out_of_range", batch=view.index, lo=lo, hi=hi, vocab=self.vocab, samples=str(samples[:8]))],
            [Msg("data.fix_tokenizer", n=max(hi + 1, self.vocab))],
            ctx=self.ctx,
            batch=view.index,
            samples=samples[:32],
        )

    def _samples(self, view: BatchView) -> None:
        """Per-sample facts kept on the host: length, emptiness, hash, and the text."""
        s = self.seen
        lengths, hashes, texts = self._sample_parts(view)
        if lengths is None and not texts:
            return
        n = len(lengths) if lengths is not None else len(texts)
        s.samples += n
        if self.ctx.live:
            # a training loop revisits samples every epoch: inside watch only a batch's own repeats count
            s.hashes = {}
        for j in range(n):
            if lengths is not None:
                s.lengths.append((int(lengths[j]), view.index, j))
                if lengths[j] == 0:
                    s.empty.append((view.index, j))
            if hashes is not None:
                h = hashes[j]
                first = s.hashes.get(h)
                if first is None:
                    s.hashes[h] = (view.index, j)
                else:
                    s.duplicates.append((first, (view.index, j)))
        for j, text in enumerate(texts[:n] if texts else []):
            self._text(view.index, j, text)

    def _sample_parts(self, view: BatchView) -> tuple[np.ndarray | None, list[bytes] | None, list[str]]:
        texts: list[str] = []
        if view.input_ids is not None and view.input_ids.dim() == 2:
            ids = view.input_ids.detach().to("cpu").long().numpy()
            if view.attention_mask is not None and tuple(view.attention_mask.shape) == ids.shape:
                real = view.attention_mask.detach().to("cpu").numpy() > 0
            elif self.pad_id is not None:
                real = ids != self.pad_id
            else:
                real = np.ones(ids.shape, dtype=bool)
            lengths = real.sum(axis=1)
            hashes = [_digest(ids[j][real[j]].tobytes()) for j in range(ids.shape[0])]
            if self.tok is not None:
                texts = [decode_plain(self.tok, ids[j][real[j]]) for j in range(ids.shape[0])]
            return lengths, hashes, texts
        if view.texts:
            key, strings = next(iter(view.texts.items()))
            lengths = np.asarray([len(x.strip()) for x in strings])
            hashes = [_digest(x.encode("utf-8", "surrogatepass")) for x in strings]
            return lengths, hashes, strings
        rows = [t for t in view.floats.values() if t.dim() >= 2 and t[0].numel() >= LIMITS.min_row_features]
        if rows:
            t = rows[0].detach().to("cpu")
            flat = t.reshape(t.shape[0], -1).contiguous()
            if flat.shape[1] <= LIMITS.max_hashed_features:
                raw = flat.view(torch.uint8).numpy()  # bytes of any dtype, bf16 included
                return None, [_digest(raw[j].tobytes()) for j in range(raw.shape[0])], []
        return None, None, []

    def _text(self, batch: int, sample: int, text: str) -> None:
        s = self.seen
        s.texts += 1
        core = text.strip().strip("\ufffd")  # a truncated multi-byte character at either end is not bad data
        if "\ufffd" in core and len(s.fffd) < LIMITS.kept_examples:
            i = core.index("\ufffd")
            s.fffd.append((batch, sample, core[max(0, i - 30) : i + 30]))
        if self._ftfy is None:
            try:
                import ftfy  # noqa: F401

                self._ftfy = True
            except ImportError:
                self._ftfy = False
        if self._ftfy and len(s.mojibake) < LIMITS.kept_examples:
            import ftfy
            from ftfy import badness

            if badness.is_bad(core):
                fixed = ftfy.fix_encoding(core)
                if fixed != core:
                    s.mojibake.append((batch, sample, core, fixed))

    # --- over all batches -----------------------------------------------------------------------
    def finish(self) -> list[Finding]:
        out: list[Finding] = []
        for key, m in self.moments.items():
            f = self._scale(key, m, target=False)
            if f is not None:
                out.append(f)
        for key, m in self.target_moments.items():
            f = self._scale(key, m, target=True)
            if f is not None:
                out.append(f)
        out += self._text_findings()
        out += self._shape_findings()
        if self.seen.texts and not self._ftfy:
            self.ctx.note(Msg("data.no_ftfy"))
        return out

    def _scale(self, key: str, m: _Moments, *, target: bool) -> Finding | None:
        if m.n is None or m.mean is None or m.m2 is None or not (m.n > 0).any():
            return None
        rms = m.rms()
        used = (m.n > 0) & np.isfinite(rms)
        if not used.any():
            return None
        hi_i = int(np.argmax(np.where(used, rms, -1)))
        hi = float(rms[hi_i])
        pos = used & (rms > 0)
        lo = float(rms[pos].min()) if pos.any() else 0.0
        limit = LIMITS.target_scale if target else LIMITS.scale
        spread = hi / lo if lo > 0 else 0.0
        if hi < limit and not (not target and spread >= LIMITS.spread and hi >= 1.0):
            return None
        std = float(np.sqrt(m.m2[hi_i] / max(1, m.n[hi_i])))
        where = Msg("data.feature_i", i=hi_i) if len(rms) > 1 else Msg("data.it")
        n = int(m.n.max())
        mean = float(m.mean[hi_i])
        if target:
            ev: list[str] = [Msg("data.targets_scale", key=repr(key), rms=hi, mean=mean, std=std, n=n, sq=hi * hi)]
            fix: list[str] = [Msg("data.fix_standardise_targets", mean=mean, std=max(std, 1e-12))]
        else:
            ev = [Msg("data.input_scale", key=repr(key), lo=lo, hi=hi, n=n, where=where, mean=mean, std=std)]
            if m.layout == "channels" and 0 <= m.lo and m.hi <= LIMITS.pixel_max and m.hi > 1:
                fix = [Msg("data.fix_pixels")]
            else:
                fix = [
                    Msg(
                        "data.fix_standardise_inputs",
                        mean=float(np.abs(m.mean[used]).max()),
                        std=float(np.sqrt(m.m2[used] / np.maximum(1, m.n[used])).max()),
                    )
                ]
            if spread >= LIMITS.spread:
                ev.append(Msg("data.scale_spread", spread=spread))
        return make_finding("nonfinite_data", "divergence", "warning", 0.8, ev, fix, ctx=self.ctx, batch=0)

    def _text_findings(self) -> list[Finding]:
        s = self.seen
        out: list[Finding] = []
        bad = len({(b, j) for b, j, _ in s.fffd} | {(b, j) for b, j, _, _ in s.mojibake})
        if not bad or not s.texts:
            return out
        sev = "warning" if bad >= max(LIMITS.min_decoding_errors, LIMITS.decoding_share * s.texts) else "info"
        ev: list[str] = [Msg("data.decoding_errors", bad=bad, n=s.texts)]
        if s.fffd:
            b, j, snip = s.fffd[0]
            ev.append(Msg("data.fffd", n=len(s.fffd), batch=b, sample=j, text=quote(snip)))
        if s.mojibake:
            b, j, text, fixed = s.mojibake[0]
            ev.append(
                Msg("data.mojibake", n=len(s.mojibake), batch=b, sample=j, text=quote(text, 60), fixed=quote(fixed, 60))
            )
        fixes: list[FixLike] = [Msg("data.fix_decode_utf8")]
        samples = [j for b, j, *_ in (s.fffd + s.mojibake) if b == (s.fffd + s.mojibake)[0][0]]
        out.append(
            make_finding(
                "noisy_data",
                "plateau",
                sev,
                0.8,
                ev,
                fixes,
                ctx=self.ctx,
                batch=(s.fffd + s.mojibake)[0][0],
                samples=sorted(set(samples))[:32],
            )
        )
        return out

    def _shape_findings(self) -> list[Finding]:
        """What the samples' shapes say: empty samples, very long ones, duplicates (one helper each,
        to keep each short)."""
        found = [self._empty_finding(), self._long_finding(), self._duplicate_finding()]
        return [f for f in found if f is not None]

    def _empty_finding(self) -> Finding | None:
        """Empty samples (no tokens): the first batch that has any is named."""
        s = self.seen
        if not s.empty:
            return None
        b0 = s.empty[0][0]
        samples = [j for b, j in s.empty if b == b0]
        return make_finding(
            "noisy_data",
            "plateau",
            "warning",
            0.85,
            [Msg("data.empty_samples", n=len(s.empty), total=s.samples, batch=b0, samples=str(samples[:8]))],
            [Msg("data.fix_filter_empty")],
            ctx=self.ctx,
            batch=b0,
            samples=samples[:32],
        )

    def _long_finding(self) -> Finding | None:
        """Samples many times the median length: the longest is named."""
        s = self.seen
        lengths = np.asarray([x[0] for x in s.lengths if x[0] > 0])
        if lengths.size < LIMITS.min_lengths:
            return None
        med = float(np.median(lengths))
        top = max(s.lengths)
        if not (med >= LIMITS.min_median_length and top[0] >= LIMITS.long_factor * med):
            return None
        long = [x for x in s.lengths if x[0] >= LIMITS.long_factor * med]
        return make_finding(
            "noisy_data",
            "spike",
            "info",
            0.6,
            [
                Msg(
                    "data.long_samples",
                    n=len(long),
                    total=s.samples,
                    factor=float(LIMITS.long_factor),
                    median=med,
                    batch=top[1],
                    sample=top[2],
                    length=top[0],
                )
            ],
            [Msg("data.fix_cap_length", max_length=int(np.percentile(lengths, 99)))],
            ctx=self.ctx,
            batch=top[1],
            samples=[top[2]],
        )

    def _duplicate_finding(self) -> Finding | None:
        """Repeated samples, when their share is large enough: the first repeat is named."""
        s = self.seen
        if not (s.samples >= LIMITS.min_samples_for_duplicates and s.duplicates):
            return None
        frac = len(s.duplicates) / s.samples
        if frac < LIMITS.duplicate_share:
            return None
        (b0, j0), (b1, j1) = s.duplicates[0]
        return make_finding(
            "noisy_data",
            "plateau",
            "warning" if frac >= LIMITS.duplicate_warning else "info",
            0.7,
            [
                Msg(
                    "data.duplicates",
                    n=len(s.duplicates),
                    total=s.samples,
                    pct=pct(len(s.duplicates), s.samples),
                    b1=b1,
                    j1=j1,
                    b0=b0,
                    j0=j0,
                )
            ],
            [Msg("data.fix_deduplicate")],
            ctx=self.ctx,
            batch=b1,
            samples=[j1],
        )


def _accumulate(m: _Moments, t: torch.Tensor) -> None:
    """Per-feature finite count/mean/variance of one batch (on its device), merged on the host."""
    x = t.detach()
    if x.dim() == 1:
        x = x.reshape(-1, 1)
    elif x.dim() == 3:
        x = x.reshape(-1, x.shape[-1])
        m.layout = "sequence"
    elif x.dim() >= 4:
        x = x.movedim(1, -1).reshape(-1, x.shape[1])
        m.layout = "channels"
    x = x.float()
    ok = torch.isfinite(x)
    n = ok.sum(dim=0)
    z = torch.where(ok, x, torch.zeros((), dtype=x.dtype, device=x.device))
    mean = z.sum(dim=0) / n.clamp(min=1)
    var = (torch.where(ok, x - mean, torch.zeros((), dtype=x.dtype, device=x.device)) ** 2).sum(dim=0) / n.clamp(min=1)
    big = torch.finfo(torch.float32).max
    lo = torch.where(ok, x, torch.full((), big, device=x.device)).min()
    hi = torch.where(ok, x, torch.full((), -big, device=x.device)).max()
    packed = torch.cat([n.float(), mean, var, lo.reshape(1), hi.reshape(1)]).to("cpu").double().numpy()
    f = x.shape[1]
    m.add(packed[:f], packed[f : 2 * f], packed[2 * f : 3 * f])
    m.lo, m.hi = min(m.lo, float(packed[-2])), max(m.hi, float(packed[-1]))


def _digest(b: bytes) -> bytes:
    return hashlib.blake2b(b, digest_size=16).digest()


def decode_plain(tok: Any, ids: np.ndarray) -> str:
    """Text of a sample without special tokens, for the text checks."""
    try:
        return tok.decode([int(x) for x in ids], skip_special_tokens=True)
    except Exception:
        return decode(tok, [int(x) for x in ids]) or ""


def _vocab_size(ctx: Context) -> int | None:
    """Rows of the model's input embedding (the hard limit on token ids), else the tokenizer's size."""
    model = unwrap_model(ctx.model)
    if model is not None and hasattr(model, "get_input_embeddings"):
        try:
            emb = model.get_input_embeddings()
            if isinstance(emb, torch.nn.Embedding):
                return int(emb.num_embeddings)
        except Exception:
            pass
    if ctx.tokenizer is not None:
        try:
            return int(len(ctx.tokenizer))
        except Exception:
            return None
    return None
