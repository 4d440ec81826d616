"""The LR schedule, simulated over the planned run before the run.

The user's scheduler is deep-copied with its optimizer replaced by a shadow optimizer (the same
parameter-group hyper-parameters, one 1-element dummy parameter per group), so stepping the copy
costs microseconds and touches neither the real optimizer, nor its state, nor the real scheduler.
The copy is stepped once per optimizer step (or once per epoch, when that is how the loop steps
it) for `total_steps` steps, and the resulting LR curve is read like an expert would:

- a warm-up that never ends, or takes most of the run (a warm-up written in steps, stepped per
  epoch, is 50x longer than meant);
- a cosine whose period is shorter than the run: the LR reaches its floor, then climbs again;
- a decay that reaches 0 long before the last step: the rest of the run does not train;
- an LR that is 0 throughout; no warm-up at all for Adam (info).
"""

from __future__ import annotations

import copy
import math
import warnings
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch

from ..findings import Finding, FixLike
from ..messages import Msg
from .common import Context, make_finding

#: scheduler steps simulated at most (a Python scheduler step costs ~10 us)
MAX_SIM_STEPS = 200_000
#: schedulers whose LR rises again by design
CYCLIC = ("CosineAnnealingWarmRestarts", "CyclicLR")


@dataclass(frozen=True)
class ScheduleLimits:
    #: wrappers unwrapped at most looking for the torch scheduler (Accelerate nests one)
    max_wrappers: int = 5
    #: a warm-up that takes this share of the run or more is too long; from `never_share` on it
    #: never ends (rule of thumb, untuned)
    long_warmup_share: float = 0.5
    never_share: float = 0.95
    #: an LR within this share of the peak has reached it (float noise of a schedule's peak)
    reached_share: float = 0.999
    #: an Adam-like run without warm-up whose LR ends below this share of its peak is worth an
    #: info (the schedule decays, but starts cold)
    no_warmup_end_share: float = 0.5
    #: the warm-up the fix suggests: this share of the planned steps (the common 3%)
    suggested_warmup_share: float = 0.03
    #: after the warm-up the LR falls below `trough_share` of the peak, then climbs again by
    #: `climb_share` of it: a period shorter than the run
    trough_share: float = 0.5
    climb_share: float = 0.1
    #: an LR below this share of the peak is ~0; reached before `idle_after_share` of the run, the
    #: rest does not train
    zero_share: float = 1e-4
    idle_after_share: float = 0.9


LIMITS = ScheduleLimits()


class _Shadow(torch.optim.Optimizer):
    """Parameter groups without parameters worth the name: a scheduler can step it for free."""

    def __init__(self, groups: list[dict[str, Any]]) -> None:
        super().__init__(groups, {})

    def step(self, closure: Any = None) -> None:  # type: ignore[override]
        return None


def unwrap_scheduler(s: Any) -> Any:
    """The torch scheduler inside Accelerate-style wrappers (`.scheduler`)."""
    seen = 0
    while (
        s is not None
        and not isinstance(s, torch.optim.lr_scheduler.LRScheduler)
        and hasattr(s, "scheduler")
        and seen < LIMITS.max_wrappers
    ):
        s = s.scheduler
        seen += 1
    return s


@dataclass(frozen=True)
class LambdaPlanLimits:
    #: probes of an `lr_lambda` start at the run's last step and grow by this factor (1.25: one of
    #: them lands within 10% of any point, so a cosine's trough is not stepped over)
    growth: float = 1.25
    #: ... up to this step (a plan in tokens of a trillion-token run is ~1e9 optimizer steps x 1e3)
    horizon: float = 1e12
    #: the LR at the run's end is near its peak (this share or more): the decay had not begun
    near_peak: float = 0.9
    #: the plan's decay is where the factor first falls to this share of its peak
    decayed: float = 0.1


LAMBDA_PLAN = LambdaPlanLimits()


def lambda_plan(scheduler: Any, stepped: int) -> dict[str, float] | None:
    """Where a LambdaLR's decay was planned to happen, seen from the run's end: when, after `stepped`
    scheduler steps, its first `lr_lambda` still gives >= `near_peak` of its peak factor and first
    falls to `decayed` of it at a later probed step, {"decays_by": that step, "at_end": the share of the
    peak at the end}. None for another class, a schedule without decay (constant, warm-up only), one
    already decaying, or an `lr_lambda` that fails. (The planned length of a LambdaLR, HF's linear
    and cosine schedules above all, lives in a closure: only calling it tells it. The lambda is the
    user's own function, called at most ~150 times at the run's close, on numbers only.)"""
    s = unwrap_scheduler(scheduler)
    fns = getattr(s, "lr_lambdas", None)
    if not isinstance(s, torch.optim.lr_scheduler.LambdaLR) or not fns or stepped < 1:
        return None
    try:
        steps = [stepped]
        while steps[-1] * LAMBDA_PLAN.growth <= LAMBDA_PLAN.horizon:
            steps.append(math.ceil(steps[-1] * LAMBDA_PLAN.growth))
        f = [float(fns[0](k)) for k in steps]
        before, k = [], stepped  # and back to the start, for the peak a warm-up reached before the end
        while k > 1:
            k = int(k / LAMBDA_PLAN.growth)
            before.append(float(fns[0](k)))
    except Exception:
        return None
    peak = max(f + before)
    if not (peak > 0 and math.isfinite(peak)) or f[0] < LAMBDA_PLAN.near_peak * peak:
        return None
    bar = LAMBDA_PLAN.decayed * peak
    j = next((j for j, v in enumerate(f) if v <= bar), None)
    if j is None:
        return None
    lo, hi = steps[max(0, j - 1)], steps[j]  # above the bar at lo, at or below it at hi: bisect
    try:
        while hi - lo > 1:
            mid = (lo + hi) // 2
            lo, hi = (lo, mid) if float(fns[0](mid)) <= bar else (mid, hi)
    except Exception:
        return None
    return {"decays_by": float(hi), "at_end": f[0] / peak}


def shadow_copy(scheduler: Any) -> tuple[Any, _Shadow]:
    """A deep copy of `scheduler` bound to a shadow of its optimizer (the `memo` maps the real
    optimizer, and every parameter, to the shadow's, so nothing large is copied)."""
    opt = scheduler.optimizer
    groups = []
    for g in opt.param_groups:
        d = {
            k: (v.detach().clone() if isinstance(v, torch.Tensor) else copy.deepcopy(v))
            for k, v in g.items()
            if k != "params"
        }
        d["params"] = [torch.zeros(1)]
        groups.append(d)
    shadow = _Shadow(groups)
    memo: dict[int, Any] = {id(opt): shadow}
    for g in opt.param_groups:
        for p in g["params"]:
            memo[id(p)] = p  # never copy a parameter, whatever holds a reference to it
    return copy.deepcopy(scheduler, memo), shadow


def simulate(
    scheduler: Any, total_steps: int, *, interval: str = "step", steps_per_epoch: int | None = None
) -> tuple[np.ndarray, list[str]]:
    """LR of parameter group 0 at every optimizer step 0..total_steps-1 (the LR the step uses)."""
    notes: list[str] = []
    sched, shadow = shadow_copy(scheduler)
    every = 1
    if interval == "epoch":
        every = max(1, int(steps_per_epoch or 1))
    n_sched = math.ceil(total_steps / every)
    if n_sched > MAX_SIM_STEPS:
        notes.append(Msg("schedule.simulated_first", n=MAX_SIM_STEPS * every, total=total_steps))
        n_sched = MAX_SIM_STEPS
    values = np.empty(n_sched, dtype=np.float64)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for i in range(n_sched):
            values[i] = float(shadow.param_groups[0]["lr"])
            shadow.step()
            sched.step()
    lrs = np.repeat(values, every)[: min(total_steps, n_sched * every)]
    return lrs, notes


def schedule_findings(ctx: Context) -> list[Finding]:
    sched = unwrap_scheduler(ctx.scheduler)
    if sched is None:
        return []
    name = type(sched).__name__
    if isinstance(sched, torch.optim.lr_scheduler.ReduceLROnPlateau):
        ctx.note(Msg("schedule.plateau_not_simulated"))
        return []
    if not ctx.total_steps:
        ctx.note(Msg("schedule.needs_total_steps"))
        return []
    if not hasattr(sched, "optimizer") or not hasattr(sched, "step"):
        ctx.note(Msg("schedule.not_a_scheduler", name=name))
        return []
    try:
        lrs, notes = simulate(
            sched, int(ctx.total_steps), interval=ctx.scheduler_interval, steps_per_epoch=ctx.steps_per_epoch
        )
    except Exception as e:
        ctx.note(Msg("schedule.not_simulated", error=f"{type(e).__name__}: {e}".splitlines()[0]))
        return []
    for n in notes:
        ctx.note(n)
    return analyse(lrs, ctx, name=name, scheduler=sched)


def _describe(name: str, sched: Any) -> str:
    keys = ("T_max", "T_0", "total_steps", "step_size", "milestones", "gamma", "total_iters", "eta_min")
    parts = [f"{k}={getattr(sched, k)!r}" for k in keys if isinstance(getattr(sched, k, None), (int, float, list))]
    return f"{name}({', '.join(parts)})" if parts else name


@dataclass
class _Curve:
    """A simulated LR curve and what every finding about it says: how the scheduler is written
    (`desc`), the planned length, how it is stepped, and where the warm-up reaches the peak."""

    lrs: np.ndarray
    name: str
    scheduler: Any
    desc: str
    planned: int
    stepping: Msg | str  # "stepped once per epoch (N steps)" or nothing
    step_fix: Msg | None  # "step it every optimizer step", when it is stepped per epoch
    peak: float = 0.0  # the LR the schedule is built around (see analyse)
    k: int = 0  # the step the warm-up reaches the peak (or the curve's own maximum)
    reached: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=bool))  # set by _find_warmup
    warm: bool = False

    @property
    def total(self) -> int:
        return len(self.lrs)

    def fixes(self, *more: Msg) -> list[FixLike]:
        return [self.step_fix, *more] if self.step_fix else list(more)


def analyse(lrs: np.ndarray, ctx: Context, *, name: str = "the scheduler", scheduler: Any = None) -> list[Finding]:
    """Findings from a simulated LR curve (one value per optimizer step)."""
    if len(lrs) < 2:
        return []
    per_epoch = ctx.scheduler_interval == "epoch" and (ctx.steps_per_epoch or 1) > 1
    c = _Curve(
        lrs,
        name,
        scheduler,
        desc=_describe(name, scheduler) if scheduler is not None else name,
        planned=ctx.total_steps or len(lrs),
        stepping=Msg("schedule.per_epoch", n=ctx.steps_per_epoch) if per_epoch else "",
        step_fix=Msg("schedule.fix_step_every_step") if per_epoch else None,
    )
    if not (float(np.max(lrs)) > 0) or not np.isfinite(lrs).all():
        return [_never_trains(c, ctx)]
    _find_warmup(c)
    ctx.peak_lr = c.peak
    how = (
        (Msg("schedule.warms_up_to", k=c.k) if c.reached.any() else Msg("schedule.rises_without_reaching"))
        if c.warm
        else ""
    )
    ctx.note(
        Msg(
            "schedule.summary",
            planned=c.planned,
            start=float(lrs[0]),
            how=how,
            peak=c.peak,
            end=float(lrs[-1]),
            stepping=c.stepping,
        )
    )
    if c.warm and c.k >= LIMITS.long_warmup_share * (c.total - 1):
        return [_warmup_too_long(c, ctx)]
    out = _period_too_short(c, ctx)
    if not out:
        out = _ends_early(c, ctx)
    if not c.warm and lrs[-1] < LIMITS.no_warmup_end_share * c.peak and _adam_like(ctx.optimizer) and not out:
        out.append(
            make_finding(
                "lr_schedule_error",
                "slow_convergence",
                "info",
                0.5,
                [Msg("schedule.no_warmup", desc=c.desc, peak=c.peak)],
                [
                    Msg(
                        "schedule.fix_add_warmup",
                        warm=max(1, round(LIMITS.suggested_warmup_share * c.planned)),
                        planned=c.planned,
                    )
                ],
                ctx=ctx,
            )
        )
    return out


def _never_trains(c: _Curve, ctx: Context) -> Finding:
    """An LR that is 0 (or not finite) at every step: nothing trains."""
    bad = Msg("schedule.is_zero") if float(np.max(c.lrs)) == 0 else Msg("schedule.is_not_finite")
    return make_finding(
        "lr_schedule_error",
        "stall",
        "critical",
        0.9,
        [Msg("schedule.lr_bad_everywhere", desc=c.desc, bad=bad, planned=c.planned, stepping=c.stepping)],
        [Msg("schedule.fix_lambda")],
        ctx=ctx,
    )


def _find_warmup(c: _Curve) -> None:
    """The peak the schedule is built around (its base LR, unless the curve itself goes higher, as
    OneCycle does) and the step the warm-up reaches it (the curve's own maximum when it never does)."""
    peak = float(np.max(c.lrs))
    base = _base_lr(c.scheduler)
    c.peak = max(peak, base) if base is not None else peak
    c.reached = c.lrs >= LIMITS.reached_share * c.peak
    c.k = int(np.argmax(c.reached)) if c.reached.any() else int(np.argmax(c.lrs))
    c.warm = bool(c.lrs[0] < LIMITS.reached_share * c.peak and c.k > 0)


def _warmup_too_long(c: _Curve, ctx: Context) -> Finding:
    """A warm-up that takes `long_warmup_share` of the run or more (or never ends)."""
    never = not c.reached.any() or c.k >= LIMITS.never_share * (c.total - 1)
    if not c.reached.any():
        reach = Msg(
            "schedule.still_rising",
            planned=c.planned,
            end=float(c.lrs[-1]),
            ratio=float(c.lrs[-1] / c.peak),
            base=c.peak,
        )
    else:
        reach = Msg("schedule.reaches_peak_late", peak=c.peak, k=c.k, planned=c.planned)
    ev: list[str] = [Msg("schedule.warmup_too_long", desc=c.desc, reach=reach, stepping=c.stepping)]
    fixes = c.fixes(
        Msg(
            "schedule.fix_warmup_3pct", warm=max(1, round(LIMITS.suggested_warmup_share * c.planned)), planned=c.planned
        )
    )
    return make_finding("lr_schedule_error", "slow_convergence", "warning", 0.85 if never else 0.7, ev, fixes, ctx=ctx)


def _period_too_short(c: _Curve, ctx: Context) -> list[Finding]:
    """After the warm-up the LR falls below `trough_share` of the peak, then climbs again by
    `climb_share` of it: a cosine whose period is shorter than the run (unless the scheduler
    restarts by design)."""
    after = c.lrs[c.k :]
    run_min = np.minimum.accumulate(after)
    climb = (run_min <= LIMITS.trough_share * c.peak) & (after - run_min >= LIMITS.climb_share * c.peak)
    if not climb.any() or c.name in CYCLIC:
        return []
    k = c.k
    t = int(np.argmax(climb))
    trough = int(np.argmin(after[: t + 1]))
    top = t + int(np.argmax(after[t:]))
    ev: list[str] = [
        Msg(
            "schedule.period_too_short",
            desc=c.desc,
            low=float(after[trough]),
            at=k + trough,
            planned=c.planned,
            high=float(after[top]),
            by=k + top,
            stepping=c.stepping,
        )
    ]
    length = c.planned - k
    tmax = getattr(c.scheduler, "T_max", None)
    if isinstance(tmax, int):
        what = Msg("schedule.steps_after_warmup") if k else Msg("schedule.runs_length")
        fixes = c.fixes(Msg("schedule.fix_t_max", length=length, what=what, tmax=tmax))
    else:
        fixes = c.fixes(Msg("schedule.fix_decay_length", length=length, k=k, planned=c.planned))
    return [make_finding("lr_schedule_error", "oscillation", "warning", 0.85, ev, fixes, ctx=ctx)]


def _ends_early(c: _Curve, ctx: Context) -> list[Finding]:
    """The LR reaches ~0 (`zero_share` of the peak) at or before `idle_after_share` of the run: the
    rest does not train."""
    floor = LIMITS.zero_share * c.peak
    if not c.lrs[c.k :][-1] <= floor:
        return []
    above = np.flatnonzero(c.lrs > floor)
    z = int(above[-1]) + 1 if above.size else 0
    if z > LIMITS.idle_after_share * c.total:
        return []
    total = c.total
    ev: list[str] = [
        Msg(
            "schedule.ends_early",
            desc=c.desc,
            lr=float(c.lrs[z]),
            step=z,
            idle=total - z,
            planned=c.planned,
            frac=(total - z) / total,
            stepping=c.stepping,
        )
    ]
    fixes = c.fixes(
        Msg(
            "schedule.fix_as_long_as_run",
            planned=c.planned,
            tmax=Msg("schedule.t_max_hint", tmax=c.planned - c.k) if hasattr(c.scheduler, "T_max") else "",
        )
    )
    return [make_finding("lr_schedule_error", "plateau", "warning", 0.85, ev, fixes, ctx=ctx)]


def _base_lr(scheduler: Any) -> float | None:
    base = getattr(scheduler, "base_lrs", None)
    try:
        return float(base[0]) if base else None
    except (TypeError, ValueError, IndexError):
        return None


def _adam_like(opt: Any) -> bool:
    name = type(opt).__name__.lower() if opt is not None else ""
    return any(k in name for k in ("adam", "lamb", "lion"))
