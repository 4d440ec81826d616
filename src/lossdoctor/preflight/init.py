"""Initialisation: does the model start where training can go from?

Four measurements, combined into one `bad_init` finding because they are one story:

- weight scale per layer against its fan-in: std·√fan_in is the layer's forward gain on unit-RMS
  inputs; LeCun is 1, He √2, PyTorch's default Linear 0.58, GPT-2's 0.02 at width 768 is 0.55. A gain
  of 3 or more multiplies activations at every layer;
- residual projections scaled by 1/√(2·layers) (GPT-2, Megatron): without it the residual stream
  of a deep transformer grows with depth;
- activation RMS through depth on a real batch (forward hooks on the block stack, first call only):
  the measured consequence of the two above;
- the initial loss against chance: a classifier that knows nothing should score ln(classes), a
  language model ln(vocab); far above that, the logits are already huge and confidently wrong.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from typing import Any, TypeGuard

import torch
from torch import nn

from ..findings import Finding, FixLike
from ..messages import Msg
from ..signals.safe_reads import foreach_norm_any, norm_fp32, parametrized, stored_attr, uninitialized
from ..signals.sharding import holds_data, local
from ..signals.tracer import compiling, first_float_tensor
from .common import Context, make_finding, round_sig, unwrap_model


@dataclass(frozen=True)
class InitCheckLimits:
    #: std·√fan_in at or above this is an init that amplifies every layer (He is √2 ≈ 1.41;
    #: twice that with slack, rule of thumb)
    gain: float = 3.0
    #: activation RMS growth through the stack that is flagged, with a per-block factor above
    #: `per_block` (an order of magnitude; rule of thumb, untuned); shrinking by its square is
    #: the vanishing side
    growth: float = 10.0
    per_block: float = 1.5
    #: growth this large, or an RMS this large at the end, is critical (no block recovers from it)
    critical_growth: float = 1e3
    critical_rms: float = 1e4
    #: residual projections unscaled: at least this many layers, a ratio of this many times the
    #: expected 1/sqrt(2*layers) scaling, and at least `residual_ratio_floor` in absolute terms
    residual_min_layers: int = 4
    residual_over_expected: float = 2
    residual_ratio_floor: float = 0.7
    #: from this many layers on, unscaled residuals alone are worth an info
    residual_info_layers: int = 8
    #: an initial loss above chance by this many nats (or `loss_excess_share` of chance) is a
    #: bad init; `loss_over_chance` times chance is critical (as detectors.bad_init's rule)
    loss_excess_nats: float = 1.0
    loss_excess_share: float = 0.2
    loss_over_chance: float = 3


LIMITS = InitCheckLimits()
#: residual projection names (GPT-2, Llama, BERT/T5/Megatron spellings)
RESIDUAL_NAMES = ("c_proj", "o_proj", "out_proj", "down_proj", "fc2", "dense_4h_to_h", "wo", "w2")
_INDEXED = re.compile(r"^(.*?)\.(\d+)\.(.+)$")


def fan_in(module: nn.Module, weight: torch.Tensor) -> int | None:
    """Inputs feeding one output unit: Linear (out, in), ConvNd (out, in/groups, *k), and
    transformers' Conv1D (in, out)."""
    if type(module).__name__ == "Conv1D" and weight.dim() == 2:
        return int(weight.shape[0])
    if isinstance(module, nn.Linear):
        return int(weight.shape[1])
    if isinstance(module, nn.modules.conv._ConvNd):
        return int(weight.shape[1] * math.prod(weight.shape[2:]))
    return None


def weight_layers(model: nn.Module) -> list[tuple[str, nn.Module, torch.Tensor, int]]:
    """(name, module, weight, fan_in) of the matrix layers; a head tied to an embedding is skipped
    (its scale is the embedding's convention, not a fan-in rule). Weights are read as stored
    (`stored_attr`): a parametrized weight (spectral_norm, weight_norm...) or a property is never
    computed, and a lazy module's uninitialised weight is skipped (`unread_weights` names them)."""
    embedded = {id(stored_attr(m, "weight")) for m in model.modules() if isinstance(m, nn.Embedding)}
    out = []
    for name, m in model.named_modules():
        w = stored_attr(m, "weight")
        if (
            not isinstance(w, torch.Tensor)
            or uninitialized(w)
            or not (w.is_floating_point() or w.is_complex())
            or w.dim() < 2
            or id(w) in embedded
        ):
            continue
        if w.device.type == "meta" or not holds_data(w):  # FSDP1 frees its views' storage
            continue
        fi = fan_in(m, w)
        if fi:
            out.append((name, m, w, fi))
    return out


def unread_weights(model: nn.Module) -> list[str]:
    """Layers whose weight the init check does not read: parametrized (computed on access; reading
    it would run the parametrization, a spectral_norm power-iteration step) or lazy, not yet
    materialised."""
    out = []
    for name, m in model.named_modules():
        if "weight" in parametrized(m) or uninitialized(stored_attr(m, "weight")):
            out.append(name or type(m).__name__)
    return out


def unread_note(model: nn.Module) -> str | None:
    """The note naming the layers the init check skipped, or None."""
    names = unread_weights(model)
    if not names:
        return None
    return Msg("pcheck.weights_unread", n=len(names), layers=", ".join(names[:5]) + (", ..." if len(names) > 5 else ""))


def weight_stats(model: nn.Module) -> list[dict[str, Any]]:
    """RMS and gain of each matrix layer, with one fused norm over all weights."""
    layers = weight_layers(model)
    if not layers:
        return []
    with torch.no_grad():
        # a DTensor (tensor parallel, FSDP2) is read on this rank's shard: its RMS estimates the
        # whole matrix's (the init draws every element alike), with no collective
        ws = [local(w.detach()) for _, _, w, _ in layers]
        norms = foreach_norm_any(ws)
        host = torch.stack([n.to("cpu") for n in norms]).tolist()
    out = []
    for (name, _, _, fi), w, norm in zip(layers, ws, host):
        rms = norm / math.sqrt(max(1, w.numel()))
        out.append({"layer": name, "rms": rms, "fan_in": fi, "gain": rms * math.sqrt(fi)})
    return out


def residual_scaling(stats: list[dict[str, Any]]) -> dict[str, Any] | None:
    """Residual projections' std relative to the other matrices of the repeated blocks.

    GPT-2 and Megatron initialise them with std/√(2·layers); a ratio near 1 in a deep stack means
    the scaling is missing."""
    blocks: dict[str, set[str]] = {}
    for s in stats:
        m = _INDEXED.match(s["layer"])
        if m:
            blocks.setdefault(m.group(1), set()).add(m.group(2))
    if not blocks:
        return None
    prefix, idx = max(blocks.items(), key=lambda kv: len(kv[1]))
    n_layers = len(idx)
    proj: list[float] = []
    other: list[float] = []
    for s in stats:
        m = _INDEXED.match(s["layer"])
        if not m or m.group(1) != prefix:
            continue
        (proj if s["layer"].rsplit(".", 1)[-1] in RESIDUAL_NAMES else other).append(s["rms"])
    if not proj or not other:
        return None
    ratio = _median(proj) / max(_median(other), 1e-30)
    return {"layers": n_layers, "ratio": ratio, "expected": 1 / math.sqrt(2 * n_layers), "prefix": prefix}


def _median(xs: list[float]) -> float:
    xs = sorted(xs)
    n = len(xs)
    return xs[n // 2] if n % 2 else 0.5 * (xs[n // 2 - 1] + xs[n // 2])


class ActivationProbe:
    """RMS of the input and output of each depth element on the first forward pass only.

    Depth elements are the children of the largest `ModuleList`/`Sequential` of blocks (a
    transformer's layers), else the matrix layers in execution order (an MLP). The hooks remove
    themselves after the first call of the root module, so the probe costs one forward's worth of
    reductions, once. Also notes the autocast state and the output dtype of that forward.

    `enabled` off (a pipeline stage's placeholder pass on `torch.empty` tensors) skips a forward;
    `reset` then drops what it saw, so the first forward judged is one on training data."""

    def __init__(self, model: nn.Module) -> None:
        self.model = model
        self.enabled = True
        self.names, self.modules = _depth_elements(model)
        self.rms_in: dict[int, torch.Tensor] = {}
        self.rms_out: dict[int, torch.Tensor] = {}
        self.order: list[int] = []
        self.autocast: torch.dtype | None = None
        self.out_dtype: torch.dtype | None = None
        self.loss_dtype: torch.dtype | None = None
        self.done = False
        self.error: BaseException | None = None
        self._handles: list[Any] = []
        for i, m in enumerate(self.modules):
            self._handles.append(m.register_forward_hook(self._make_hook(i), with_kwargs=False))
        self._handles.append(model.register_forward_pre_hook(self._root_pre))
        self._handles.append(model.register_forward_hook(self._root_post))

    def _make_hook(self, i: int):
        def hook(module: nn.Module, args: tuple, out: Any) -> None:
            if compiling() or self.done or not self.enabled or i in self.rms_out:
                return
            try:
                with torch.no_grad():
                    x = first_float_tensor(args) if args else None
                    y = first_float_tensor(out)
                    if y is None:
                        return
                    if x is not None:
                        self.rms_in[i] = _rms(x)
                    self.rms_out[i] = _rms(y)
                    self.order.append(i)
            except Exception as e:  # never break the user's forward
                self.error = e
                self.remove()

        return hook

    def _root_pre(self, module: nn.Module, args: tuple) -> None:
        if compiling() or not self.enabled:
            return
        try:
            dev = _device_type(module)
            if torch.is_autocast_enabled(dev):
                self.autocast = torch.get_autocast_dtype(dev)
        except Exception:
            pass

    def _root_post(self, module: nn.Module, args: tuple, out: Any) -> None:
        if compiling() or self.done or not self.enabled:
            return
        try:
            logits = getattr(out, "logits", None)
            if not isinstance(logits, torch.Tensor):
                logits = _main_output(out)
            if isinstance(logits, torch.Tensor):
                self.out_dtype = logits.dtype
            loss = getattr(out, "loss", None)
            if isinstance(loss, torch.Tensor):
                self.loss_dtype = loss.dtype
        except Exception:
            pass
        self.done = True
        self.remove()

    def reset(self) -> None:
        """Forget a skipped forward's partial measurements (its hooks stay until a judged one)."""
        if not self.done:
            self.rms_in.clear()
            self.rms_out.clear()
            self.order.clear()
            self.autocast = self.out_dtype = self.loss_dtype = None

    def remove(self) -> None:
        for h in self._handles:
            h.remove()
        self._handles.clear()

    def growth(self) -> dict[str, Any] | None:
        """Measured RMS through depth, once the first forward ran."""
        if not self.order:
            return None
        order = list(self.order)
        first, last = order[0], order[-1]
        if first not in self.rms_in:
            return None
        vals = torch.stack(
            [self.rms_in[first].float().to("cpu")] + [self.rms_out[i].float().to("cpu") for i in order]
        ).tolist()
        rin, outs = vals[0], vals[1:]
        if not (rin > 0 and math.isfinite(rin)):
            return None
        n = len(order)
        outs = [x if math.isfinite(x) else math.inf for x in outs]
        # the extremes through depth (the last layer alone can hide them: a head's bias, a final norm)
        hi = max(range(n), key=lambda k: outs[k])
        lo = min(range(n), key=lambda k: outs[k])
        prev = [rin] + outs[:-1]
        jump = next((k for k in range(n) if prev[k] > 0 and outs[k] / prev[k] >= LIMITS.per_block), 0)
        return {
            "n": n,
            "rms_in": rin,
            "first": self.names[first],
            "last": self.names[last],
            "jump": self.names[order[jump]],
            "up": _span(rin, outs[hi], hi + 1, self.names[order[hi]]),
            "down": _span(rin, outs[lo], lo + 1, self.names[order[lo]]),
        }


def _span(rms_in: float, rms: float, layers: int, name: str) -> dict[str, Any]:
    ratio = rms / rms_in
    per = ratio ** (1 / layers) if 0 < ratio < math.inf else (math.inf if ratio == math.inf else 0.0)
    return {"rms": rms, "ratio": ratio, "per_layer": per, "layers": layers, "name": name}


def _rms(t: torch.Tensor) -> torch.Tensor:
    t = local(t.detach())  # a DTensor activation: this rank's shard (no collective)
    return norm_fp32(t) / math.sqrt(max(1, t.numel()))


def _device_type(model: nn.Module) -> str:
    for p in model.parameters():
        return p.device.type
    return "cpu"


def _main_output(out: Any) -> torch.Tensor | None:
    if isinstance(out, torch.Tensor):
        return out
    if isinstance(out, (tuple, list)):
        for x in out:
            if isinstance(x, torch.Tensor) and x.is_floating_point() and x.dim() >= 2:
                return x
    return first_float_tensor(out)


def _depth_elements(model: nn.Module) -> tuple[list[str], list[nn.Module]]:
    best: tuple[str, nn.ModuleList | nn.Sequential] | None = None
    for name, m in model.named_modules():
        if _is_block_stack(m) and (best is None or len(m) > len(best[1])):
            best = (name, m)
    if best is not None and not _is_flat_mlp(best[1]):
        name, stack = best
        return [f"{name}.{i}" if name else str(i) for i in range(len(stack))], list(stack)
    layers = [(n, m) for n, m, _, _ in weight_layers(model)]
    return [n for n, _ in layers], [m for _, m in layers]


def _is_block_stack(m: nn.Module) -> TypeGuard[nn.ModuleList | nn.Sequential]:
    """A list of repeated blocks with weights (a transformer's layers). A `ModuleList` of one
    composite block counts too: a one-layer transformer's depth is its one block, and measuring
    the matrix layers inside it instead would read a residual branch's small output (GPT-2 scales
    its projections down on purpose) as a signal vanishing through depth."""
    if not isinstance(m, (nn.ModuleList, nn.Sequential)) or len(m) == 0:
        return False
    kinds = [type(c) for c in m]
    common = max(set(kinds), key=kinds.count)
    block = m[kinds.index(common)]
    if not any(True for _ in block.parameters()):
        return False
    if len(m) >= 2:
        return kinds.count(common) >= 2
    return isinstance(m, nn.ModuleList) and len(block._modules) > 0


def _is_flat_mlp(stack: nn.Module) -> bool:
    """A Sequential of Linear/activation leaves is measured layer by layer, not child by child."""
    return isinstance(stack, nn.Sequential) and all(len(c._modules) == 0 for c in stack)


def chance(logits_dim: int | None, task: str | None) -> float | None:
    """Cross-entropy of a uniform guess over `logits_dim` outcomes."""
    if task == "regression" or not logits_dim or logits_dim < 2:
        return None
    return math.log(logits_dim)


@dataclass
class _Votes:
    """The evidence for bad_init as it is gathered: each check that fires votes, raises the severity
    and may name the layer (the first check to name one keeps it)."""

    ev: list[str] = field(default_factory=list)
    fixes: list[FixLike] = field(default_factory=list)
    severity: str = "info"
    votes: int = 0
    layer: str | None = None

    def vote(self, severity: str, layer: str | None = None) -> None:
        self.votes += 1
        self.severity = _max_sev(self.severity, severity)
        self.layer = self.layer or layer


def init_findings(
    ctx: Context,
    stats: list[dict[str, Any]],
    growth: dict[str, Any] | None,
    loss: float | None,
    chance_loss: float | None,
) -> list[Finding]:
    """One bad_init finding from the weight, activation and initial-loss evidence, or none."""
    v = _Votes()
    hot = _hot_weights(v, stats, unwrap_model(ctx.model))
    res = residual_scaling(stats)
    res_missing = (
        res is not None
        and res["layers"] >= LIMITS.residual_min_layers
        and res["ratio"] >= LIMITS.residual_over_expected * res["expected"]
        and res["ratio"] >= LIMITS.residual_ratio_floor
    )
    if res_missing and res is not None:
        v.ev.append(
            Msg(
                "pinit.residual_unscaled",
                names=list(RESIDUAL_NAMES[:3]),
                layers=res["layers"],
                prefix=res["prefix"],
                ratio=float(res["ratio"]),
                expected=float(res["expected"]),
            )
        )
        v.fixes.append(Msg("pinit.fix_residual", factor=float(round_sig(res["expected"]))))
    if growth is not None and growth["n"] >= 2:
        _activation_growth(v, growth, hot=bool(hot))
    if loss is not None and chance_loss is not None and math.isfinite(loss):
        _initial_loss(v, loss, chance_loss)
    if v.votes == 0:
        if res_missing and res is not None and res["layers"] >= LIMITS.residual_info_layers:
            return [make_finding("bad_init", "slow_convergence", "info", 0.5, v.ev, v.fixes, ctx=ctx)]
        return []
    conf = min(0.95, 0.6 + 0.15 * v.votes)
    return [
        make_finding(
            "bad_init",
            "slow_convergence" if v.severity != "critical" else "divergence",
            v.severity,
            conf,
            v.ev,
            v.fixes,
            ctx=ctx,
            layer=v.layer,
        )
    ]


def _hot_weights(v: _Votes, stats: list[dict[str, Any]], model: Any) -> list[dict[str, Any]]:
    """The layers whose weights are `LIMITS.gain` times larger than their fan-in calls for (a
    warning, with the std to use); returned, since an overflow is init only when weights are hot."""
    hot = [s for s in stats if s["gain"] >= LIMITS.gain]
    if not hot:
        return hot
    worst = max(hot, key=lambda s: s["gain"])
    first = hot[0]
    v.vote("warning", first["layer"])
    v.ev.append(
        Msg(
            "pinit.hot_weights",
            n=len(hot),
            total=len(stats),
            limit=float(LIMITS.gain),
            layer=first["layer"],
            std=float(first["rms"]),
            fan_in=first["fan_in"],
            gain=float(first["gain"]),
            worst=worst["layer"],
            worst_gain=float(worst["gain"]),
        )
    )
    v.fixes.append(
        Msg(
            "pinit.fix_std",
            std=float(round_sig(1 / math.sqrt(first["fan_in"]))),
            layer=first["layer"],
            how=Msg("pinit.how_hf") if _is_hf(model) else Msg("pinit.how_torch"),
        )
    )
    return hot


def _activation_growth(v: _Votes, growth: dict[str, Any], *, hot: bool) -> None:
    """Activations that grow (`LIMITS.growth` overall and `per_block` per block; critical past
    `critical_growth` or `critical_rms`) or shrink (the inverse) through the blocks at init."""
    up, down = growth["up"], growth["down"]
    g = up["ratio"]
    # an output that overflowed (inf) under fp16 autocast is a range problem the live
    # activation_overflow check names with its op; it is init only when the weights are hot
    overflowed = not math.isfinite(up["rms"]) and not hot
    if not overflowed and ((g >= LIMITS.growth and up["per_layer"] >= LIMITS.per_block) or not math.isfinite(g)):
        critical = g >= LIMITS.critical_growth or not math.isfinite(g) or up["rms"] >= LIMITS.critical_rms
        v.vote("critical" if critical else "warning", growth["jump"])
        v.ev.append(
            Msg(
                "pinit.rms_grows",
                start=float(growth["rms_in"]),
                first=growth["first"],
                end=float(up["rms"]),
                last=up["name"],
                ratio=float(g),
                layers=up["layers"],
                per_layer=float(up["per_layer"]),
            )
        )
    elif down["ratio"] <= 1 / (LIMITS.growth * LIMITS.growth) and down["per_layer"] <= 1 / LIMITS.per_block:
        v.vote("warning", growth["first"])
        v.ev.append(
            Msg(
                "pinit.rms_shrinks",
                start=float(growth["rms_in"]),
                first=growth["first"],
                end=float(down["rms"]),
                last=down["name"],
                ratio=float(down["ratio"]),
                layers=down["layers"],
            )
        )
        v.fixes.append(Msg("pinit.fix_he_init"))


def _initial_loss(v: _Votes, loss: float, chance_loss: float) -> None:
    """The first loss well above a uniform guess's (`loss_excess_nats` or `loss_excess_share` of
    it; critical past `loss_over_chance` times it): the output layer starts confident and wrong."""
    excess = loss - chance_loss
    if not excess > max(LIMITS.loss_excess_nats, LIMITS.loss_excess_share * chance_loss):  # NaN: no vote
        return
    v.vote("critical" if loss >= LIMITS.loss_over_chance * chance_loss else "warning")
    v.ev.append(
        Msg(
            "pinit.initial_loss",
            loss=float(loss),
            ratio=float(loss / chance_loss),
            classes=round(math.exp(chance_loss)),
            chance=float(chance_loss),
        )
    )
    if not v.fixes:
        v.fixes.append(Msg("pinit.fix_output_layer", chance=float(chance_loss)))


def _max_sev(a: str, b: str) -> str:
    order = ("info", "warning", "critical")
    return a if order.index(a) >= order.index(b) else b


def _is_hf(model: Any) -> bool:
    return (
        model is not None
        and stored_attr(model, "config") is not None
        and stored_attr(model, "init_weights") is not None
    )
