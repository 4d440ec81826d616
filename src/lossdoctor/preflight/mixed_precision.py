"""Mixed precision: settings under which the numbers cannot work, found before they fail.

- fp16 (weights or autocast) without a GradScaler: gradients below 6.0e-8 flush to 0, above 65504
  become inf;
- GradScaler settings that start or stay absurd: init_scale 2^60 skips ~44 steps before the first
  update (and the scheduler still advances through them), a growth interval of a few steps keeps
  overflowing, a backoff factor >= 1 never recovers;
- Adam's eps in the optimizer state's dtype: 1e-8 is 0 in fp16, so where the second moment
  underflows the update is 0/0 = NaN (shown here on CPU: fp16 Adam, eps 1e-8, tiny gradients);
- bf16/fp16 weights whose updates are below their resolution: bf16 keeps 8 significant bits, so an
  update smaller than |w|·2^-9 rounds away. Adam's first update is ~lr per entry (m/√v = ±1), so
  the share of weights that cannot move at all is known before the first step;
- the loss computed in bf16/fp16: a bf16 loss of 5.6 can only take values 2^-5 apart.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import torch

from ..findings import Finding
from ..messages import Msg
from ..signals.optimizer import unwrap_optimizer
from ..signals.safe_reads import uninitialized
from .common import Context, fmt, make_finding, pct, round_sig, unwrap_model

FP16_TINY = 2.0**-24  # smallest fp16 subnormal
LOW = (torch.bfloat16, torch.float16)
#: explicit mantissa bits
MANTISSA = {torch.bfloat16: 7, torch.float16: 10, torch.float32: 23}
#: weight entries sampled per parameter when measuring resolution (a strided sample)
SAMPLE = 1 << 20


@dataclass(frozen=True)
class MixedPrecisionLimits:
    #: an init_scale above 2^24 is absurd: GradScaler backs off from it for many steps before the
    #: first update (its default is 2^16, where the count of skipped steps is measured to)
    absurd_init_scale: float = 2.0**24
    default_init_scale: float = 2.0**16
    #: a share of steps this large lost to overflow after each growth is waste (a few % is the
    #: price of probing for a larger scale; rule of thumb)
    overflow_rate: float = 0.1
    #: weights that cannot move at all: from this share on it is reported, from
    #: `frozen_warning` on a warning (rule of thumb, untuned)
    frozen_share: float = 0.1
    frozen_warning: float = 0.5


LIMITS = MixedPrecisionLimits()


def scaler_config(scaler: Any) -> dict[str, Any] | None:
    """Settings of a torch GradScaler (None when absent or disabled)."""
    if scaler is None:
        return None
    enabled = getattr(scaler, "_enabled", None)
    if enabled is None and hasattr(scaler, "is_enabled"):
        enabled = scaler.is_enabled()
    if enabled is False:
        return None
    cfg = {
        k: getattr(scaler, "_" + k, None) for k in ("init_scale", "growth_factor", "backoff_factor", "growth_interval")
    }
    cur = getattr(scaler, "_scale", None)
    cfg["scale"] = float(cur.item()) if isinstance(cur, torch.Tensor) and cur.device.type == "cpu" else None
    return cfg


def param_dtypes(model: Any) -> dict[torch.dtype, int]:
    out: dict[torch.dtype, int] = {}
    if model is None:
        return out
    for p in unwrap_model(model).parameters():
        if p.requires_grad and not uninitialized(p) and p.is_floating_point():
            out[p.dtype] = out.get(p.dtype, 0) + p.numel()
    return out


def config_findings(
    ctx: Context,
    *,
    autocast: torch.dtype | None = None,
    grads: dict[torch.Tensor, torch.Tensor] | None = None,
    peak_lr: float | None = None,
) -> list[Finding]:
    """Findings from the model/optimizer/scaler configuration (and, when known, the autocast dtype
    of the forward and one batch's gradients)."""
    out: list[Finding] = []
    dtypes = param_dtypes(ctx.model)
    scaler = scaler_config(ctx.scaler)
    fp16 = dtypes.get(torch.float16, 0) > 0 or autocast == torch.float16
    if fp16 and scaler is None:
        out.append(fp16_without_scaler(ctx, autocast))
    if scaler is not None:
        out += _scaler(ctx, scaler)
    opt = unwrap_optimizer(ctx.optimizer) if ctx.optimizer is not None else None
    if isinstance(opt, torch.optim.Optimizer):
        out += _adam_eps(ctx, opt)
        f = _resolution(ctx, opt, grads, peak_lr)
        if f is not None:
            out.append(f)
    return out


def fp16_without_scaler(ctx: Context, autocast: torch.dtype | None) -> Finding:
    dtypes = param_dtypes(ctx.model)
    where = (
        Msg("pprec.fp16_params", n=dtypes[torch.float16]) if dtypes.get(torch.float16) else Msg("pprec.fp16_autocast")
    )
    disabled = ctx.scaler is not None
    return make_finding(
        "precision_stall",
        "stall",
        "warning",
        0.85,
        [
            Msg(
                "pprec.no_scaler",
                where=where,
                scaler=Msg("pprec.scaler_disabled") if disabled else Msg("pprec.scaler_absent"),
                tiny=FP16_TINY,
            )
        ],
        [Msg("pprec.fix_use_scaler")],
        ctx=ctx,
    )


def _scaler(ctx: Context, cfg: dict[str, Any]) -> list[Finding]:
    """A GradScaler configured to collapse: a backoff or start that breaks it outright, else a start
    far from the default and growth that outruns the backoff (one helper each, to keep each short)."""
    init, g, b, interval = cfg["init_scale"], cfg["growth_factor"], cfg["backoff_factor"], cfg["growth_interval"]
    start = cfg["scale"] if cfg["scale"] is not None else init
    if not all(isinstance(x, (int, float)) for x in (start, g, b, interval)):
        return []
    fix_default = Msg("pprec.fix_default_scaler")
    if b >= 1 or b <= 0 or start <= 0:
        ev = (
            Msg("pprec.backoff_ge_1", b=str(b))
            if b >= 1
            else Msg("pprec.backoff_le_0", b=str(b))
            if b <= 0
            else Msg("pprec.scale_nonpositive", scale=float(start))
        )
        return [make_finding("loss_scale_collapse", "skipped_steps", "critical", 0.9, [ev], [fix_default], ctx=ctx)]
    return _scaler_start(ctx, start, b, fix_default) + _scaler_growth(ctx, g, b, interval, fix_default)


def _scaler_start(ctx: Context, start: float, b: float, fix_default: Msg) -> list[Finding]:
    """A start scale so large that the first steps are skipped backing off, or below one."""
    out: list[Finding] = []
    if start > LIMITS.absurd_init_scale:
        skipped = math.ceil(math.log(start / LIMITS.default_init_scale) / math.log(1 / b))
        evs: list[str] = [Msg("pprec.init_scale_huge", start=_pow2(start), skipped=skipped, b=str(b))]
        if ctx.scheduler is not None:
            evs.append(Msg("pprec.scheduler_advances", skipped=skipped))
        out.append(
            make_finding(
                "loss_scale_collapse",
                "skipped_steps",
                "warning",
                0.85,
                evs,
                [Msg("pprec.fix_init_scale_default", fix=fix_default)],
                ctx=ctx,
            )
        )
    elif start < 1:
        out.append(
            make_finding(
                "loss_scale_collapse",
                "skipped_steps",
                "warning",
                0.8,
                [Msg("pprec.init_scale_below_one", start=float(start), tiny=FP16_TINY)],
                [Msg("pprec.fix_init_scale", fix=fix_default)],
                ctx=ctx,
            )
        )
    return out


def _scaler_growth(ctx: Context, g: float, b: float, interval: float, fix_default: Msg) -> list[Finding]:
    """Growth so frequent that overflows undo it at a steady rate, or a growth factor below one."""
    out: list[Finding] = []
    if g > 1 and interval >= 1:
        per = math.log(g) / math.log(1 / b)  # overflow steps needed to undo one growth
        rate = per / (interval + per)
        if rate >= LIMITS.overflow_rate:
            out.append(
                make_finding(
                    "loss_scale_collapse",
                    "skipped_steps",
                    "warning",
                    0.8,
                    [Msg("pprec.growth_too_often", g=str(g), interval=str(interval), b=str(b), pct=pct(rate, 1))],
                    [Msg("pprec.fix_growth_interval")],
                    ctx=ctx,
                )
            )
    elif g < 1:
        out.append(
            make_finding(
                "loss_scale_collapse",
                "skipped_steps",
                "warning",
                0.8,
                [Msg("pprec.growth_below_one", g=str(g), interval=str(interval))],
                [Msg("pprec.fix_growth_factor", fix=fix_default)],
                ctx=ctx,
            )
        )
    return out


def _pow2(x: float) -> str:
    e = math.log2(x)
    return f"2^{int(e)}" if e == int(e) else fmt(x)


def _adam_eps(ctx: Context, opt: torch.optim.Optimizer) -> list[Finding]:
    """eps that is 0 in the dtype of the second moment (the state follows the parameter's dtype)."""
    for gi, group in enumerate(opt.param_groups):
        eps = group.get("eps")
        if not isinstance(eps, (int, float)) or not group.get("betas") or eps <= 0:
            continue
        for p in group["params"]:
            v = opt.state.get(p, {}).get("exp_avg_sq")
            dtype = v.dtype if isinstance(v, torch.Tensor) else p.dtype
            if dtype not in LOW:
                continue
            as_dtype = float(torch.tensor(eps, dtype=dtype))
            if as_dtype == 0:
                name = str(dtype).replace("torch.", "")
                return [
                    make_finding(
                        "precision_stall",
                        "nonfinite",
                        "critical",
                        0.9,
                        [
                            Msg(
                                "pprec.eps_underflows",
                                opt=type(opt).__name__,
                                eps=float(eps),
                                dtype=name,
                                group=gi,
                                tiny=math.sqrt(FP16_TINY),
                            )
                        ],
                        [Msg("pprec.fix_fp32_state", dtype=name)],
                        ctx=ctx,
                    )
                ]
    return []


def _resolution(
    ctx: Context, opt: torch.optim.Optimizer, grads: dict[torch.Tensor, torch.Tensor] | None, peak_lr: float | None
) -> Finding | None:
    """Share of low-precision weight entries that the first update cannot move. Runs once; the
    per-parameter results stay on the device until one copy at the end."""
    adam = "eps" in opt.defaults and "betas" in opt.defaults
    total = 0.0
    lr_used = None
    stuck_share: list[torch.Tensor] = []  # per parameter: share of its entries that cannot move
    sizes: list[int] = []
    need: list[torch.Tensor] = []  # per parameter: the median half-ulp, the smallest update that counts
    with torch.no_grad():
        for group in opt.param_groups:
            lr = _group_lr(group, peak_lr)
            if lr is None:
                continue
            for p in group["params"]:
                if p.dtype not in LOW or not p.requires_grad:
                    continue
                got = _stuck(p, lr, adam, grads)
                if got is None:
                    continue
                stuck_share.append(got[0])
                need.append(got[1])
                sizes.append(p.numel())
                total += p.numel()
                lr_used = lr
    if not total or lr_used is None:  # (a parameter counted in total set lr_used)
        return None
    shares = torch.stack([s.to("cpu") for s in stuck_share]).tolist()
    needs = [x for x in torch.stack([n.to("cpu") for n in need]).tolist() if x == x]
    frozen = sum(s * n for s, n in zip(shares, sizes))
    if frozen < LIMITS.frozen_share * total:
        return None
    return _round_away_finding(ctx, opt, adam, lr_used, frozen, total, needs)


def _round_away_finding(
    ctx: Context,
    opt: torch.optim.Optimizer,
    adam: bool,
    lr_used: float,
    frozen: float,
    total: float,
    needs: list[float],
) -> Finding:
    """`_resolution`'s finding, from what it measured: `frozen` of `total` weight entries stuck,
    `needs` the per-parameter median half-ulps. Apart from it to keep it short."""
    share = frozen / total
    dtype = next((p.dtype for g in opt.param_groups for p in g["params"] if p.dtype in LOW), torch.bfloat16)
    name = str(dtype).replace("torch.", "")
    bits = MANTISSA[dtype] + 1
    how = Msg("pprec.how_adam") if adam else Msg("pprec.how_sgd")
    need_lr = sorted(needs)[len(needs) // 2] if needs else float("nan")
    return make_finding(
        "precision_stall",
        "stall",
        "warning" if share >= LIMITS.frozen_warning else "info",
        0.85 if share >= LIMITS.frozen_warning else 0.6,
        [
            Msg(
                "pprec.updates_round_away",
                lr=float(lr_used),
                how=how,
                pct=pct(frozen, total),
                total=int(total),
                dtype=name,
                bits=bits,
                exp=bits + 1,
                need=float(need_lr),
            )
        ],
        [Msg("pprec.fix_master_weights", dtype=name, lr=float(round_sig(need_lr * 2)))],
        ctx=ctx,
    )


def _group_lr(group: dict[str, Any], peak_lr: float | None) -> Any:
    """The learning rate a parameter group's first update uses (its initial one, or the schedule's
    peak when that is larger), or None when it has no positive one. Apart from `_resolution` to
    keep it short."""
    lr = group.get("initial_lr", group.get("lr"))
    if isinstance(lr, torch.Tensor):
        lr = float(lr)
    if peak_lr is not None:
        lr = max(float(lr or 0), peak_lr)
    if not isinstance(lr, (int, float)) or lr <= 0:
        return None
    return lr


def _stuck(
    p: torch.Tensor, lr: float, adam: bool, grads: dict[torch.Tensor, torch.Tensor] | None
) -> tuple[torch.Tensor, torch.Tensor] | None:
    """One low-precision parameter (sampled) under its first update: the share of its nonzero entries
    the update cannot move (below half a unit in the last place) and their median half-ulp, both
    still on the device; None when the update's size is unknown (not Adam, no gradient). Apart
    from `_resolution` to keep it short."""
    w = _sample(p.detach())
    if adam:
        step = torch.full_like(w, float(lr), dtype=torch.float32)
    elif grads is not None and p in grads:
        step = float(lr) * _sample(grads[p]).float().abs()
    else:
        return None
    half_ulp = torch.ldexp(
        torch.ones_like(w, dtype=torch.float32), torch.frexp(w.float()).exponent - MANTISSA[p.dtype] - 2
    )
    nonzero = w != 0
    return ((step < half_ulp) & nonzero).float().mean(), torch.where(nonzero, half_ulp, torch.nan).nanmedian()


def _sample(t: torch.Tensor) -> torch.Tensor:
    flat = t.reshape(-1)
    if flat.numel() <= SAMPLE:
        return flat
    return flat[:: math.ceil(flat.numel() / SAMPLE)]


def loss_dtype_finding(
    ctx: Context, dtype: torch.dtype | None, value: float | None, batch: int | None = None
) -> Finding | None:
    """The loss itself computed in bf16/fp16: it lives on a grid of 2^(floor(log2 L) - mantissa)."""
    if dtype not in LOW:
        return None
    name = str(dtype).replace("torch.", "")
    ev = Msg("pprec.loss_dtype", dtype=name)
    if value is not None and math.isfinite(value) and value > 0:
        grid = 2.0 ** (math.floor(math.log2(value)) - MANTISSA[dtype])
        ev = Msg("pprec.loss_dtype_grid", dtype=name, value=float(value), grid=grid)
    return make_finding(
        "precision_stall", "stall", "warning", 0.8, [ev], [Msg("pprec.fix_loss_fp32")], ctx=ctx, batch=batch
    )
