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
from typing import Any

import numpy as np
import torch

from ..findings import Finding
from ..messages import Msg
from .common import Context, make_finding

#: scheduler steps simulated at most (a Python scheduler step costs ~10 us)
MAX_SIM_STEPS = 200_000
#: schedulers whose LR rises again by design
CYCLIC = ("CosineAnnealingWarmRestarts", "CyclicLR")


class _Shadow(torch.optim.Optimizer):
    """Parameter groups without parameters worth the name: a scheduler can step it for free."""

    def __init__(self, groups: list[dict[str, Any]]) -> None:
        super().__init__(groups, {})

    def step(self, closure: Any = None) -> None:  # type: ignore[override]
        return None


def unwrap_scheduler(s: Any) -> Any:
    """The torch scheduler inside Accelerate-style wrappers (`.scheduler`)."""
    seen = 0
    while s is not None and not isinstance(s, torch.optim.lr_scheduler.LRScheduler) \
            and hasattr(s, "scheduler") and seen < 5:
        s = s.scheduler
        seen += 1
    return s


def shadow_copy(scheduler: Any) -> tuple[Any, _Shadow]:
    """A deep copy of `scheduler` bound to a shadow of its optimizer (the `memo` maps the real
    optimizer, and every parameter, to the shadow's, so nothing large is copied)."""
    opt = scheduler.optimizer
    groups = []
    for g in opt.param_groups:
        d = {k: (v.detach().clone() if isinstance(v, torch.Tensor) else copy.deepcopy(v))
             for k, v in g.items() if k != "params"}
        d["params"] = [torch.zeros(1)]
        groups.append(d)
    shadow = _Shadow(groups)
    memo: dict[int, Any] = {id(opt): shadow}
    for g in opt.param_groups:
        for p in g["params"]:
            memo[id(p)] = p  # never copy a parameter, whatever holds a reference to it
    return copy.deepcopy(scheduler, memo), shadow


def simulate(scheduler: Any, total_steps: int, *, interval: str = "step",
             steps_per_epoch: int | None = None) -> tuple[np.ndarray, list[str]]:
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
        lrs, notes = simulate(sched, int(ctx.total_steps), interval=ctx.scheduler_interval,
                              steps_per_epoch=ctx.steps_per_epoch)
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


def analyse(lrs: np.ndarray, ctx: Context, *, name: str = "the scheduler", scheduler: Any = None) -> list[Finding]:
    """Findings from a simulated LR curve (one value per optimizer step)."""
    total = len(lrs)
    if total < 2:
        return []
    desc = _describe(name, scheduler) if scheduler is not None else name
    planned = ctx.total_steps or total
    per_epoch = ctx.scheduler_interval == "epoch" and (ctx.steps_per_epoch or 1) > 1
    stepping = Msg("schedule.per_epoch", n=ctx.steps_per_epoch) if per_epoch else ""
    step_fix = Msg("schedule.fix_step_every_step") if per_epoch else None
    peak = float(np.max(lrs))
    if not (peak > 0) or not np.isfinite(lrs).all():
        bad = Msg("schedule.is_zero") if peak == 0 else Msg("schedule.is_not_finite")
        return [make_finding("lr_schedule_error", "stall", "critical", 0.9,
                             [Msg("schedule.lr_bad_everywhere", desc=desc, bad=bad, planned=planned,
                                  stepping=stepping)],
                             [Msg("schedule.fix_lambda")], ctx=ctx)]
    # the LR the schedule is built around: its base LR, unless the curve itself goes higher (OneCycle)
    base = _base_lr(scheduler)
    ref = max(peak, base) if base is not None else peak
    ctx.peak_lr = ref
    out: list[Finding] = []
    reached = lrs >= 0.999 * ref
    # the step the warm-up reaches the peak (or the curve's own maximum when it never gets there)
    k = int(np.argmax(reached)) if reached.any() else int(np.argmax(lrs))
    warm = lrs[0] < 0.999 * ref and k > 0
    how = (Msg("schedule.warms_up_to", k=k) if reached.any() else Msg("schedule.rises_without_reaching")) \
        if warm else ""
    ctx.note(Msg("schedule.summary", planned=planned, start=float(lrs[0]), how=how, peak=ref, end=float(lrs[-1]),
                 stepping=stepping))
    if warm and k >= 0.5 * (total - 1):
        never = not reached.any() or k >= 0.95 * (total - 1)
        if not reached.any():
            reach = Msg("schedule.still_rising", planned=planned, end=float(lrs[-1]), ratio=float(lrs[-1] / ref),
                        base=ref)
        else:
            reach = Msg("schedule.reaches_peak_late", peak=ref, k=k, planned=planned)
        ev = [Msg("schedule.warmup_too_long", desc=desc, reach=reach, stepping=stepping)]
        warm_steps = max(1, round(0.03 * planned))
        fixes = [step_fix] if step_fix else []
        fixes.append(Msg("schedule.fix_warmup_3pct", warm=warm_steps, planned=planned))
        out.append(make_finding("lr_schedule_error", "slow_convergence", "warning", 0.85 if never else 0.7,
                                ev, fixes, ctx=ctx))
        return out
    peak = ref
    after = lrs[k:]
    run_min = np.minimum.accumulate(after)
    climb = (run_min <= 0.5 * peak) & (after - run_min >= 0.1 * peak)
    climbs = bool(climb.any()) and name not in CYCLIC
    if climbs:
        t = int(np.argmax(climb))
        trough = int(np.argmin(after[: t + 1]))
        top = t + int(np.argmax(after[t:]))
        ev = [Msg("schedule.period_too_short", desc=desc, low=float(after[trough]), at=k + trough, planned=planned,
                  high=float(after[top]), by=k + top, stepping=stepping)]
        length = planned - k
        tmax = getattr(scheduler, "T_max", None)
        fixes = [step_fix] if step_fix else []
        if isinstance(tmax, int):
            what = Msg("schedule.steps_after_warmup") if k else Msg("schedule.runs_length")
            fixes.append(Msg("schedule.fix_t_max", length=length, what=what, tmax=tmax))
        else:
            fixes.append(Msg("schedule.fix_decay_length", length=length, k=k, planned=planned))
        out.append(make_finding("lr_schedule_error", "oscillation", "warning", 0.85, ev, fixes, ctx=ctx))
    floor = 1e-4 * peak
    if not climbs and after[-1] <= floor:
        above = np.flatnonzero(lrs > floor)
        z = int(above[-1]) + 1 if above.size else 0
        if z <= 0.9 * total:
            ev = [Msg("schedule.ends_early", desc=desc, lr=float(lrs[z]), step=z, idle=total - z, planned=planned,
                      frac=(total - z) / total, stepping=stepping)]
            fixes = [step_fix] if step_fix else []
            fixes.append(Msg("schedule.fix_as_long_as_run", planned=planned,
                             tmax=Msg("schedule.t_max_hint", tmax=planned - k) if hasattr(scheduler, "T_max") else ""))
            out.append(make_finding("lr_schedule_error", "plateau", "warning", 0.85, ev, fixes, ctx=ctx))
    if not warm and lrs[-1] < 0.5 * peak and _adam_like(ctx.optimizer) and not out:
        out.append(make_finding(
            "lr_schedule_error", "slow_convergence", "info", 0.5,
            [Msg("schedule.no_warmup", desc=desc, peak=peak)],
            [Msg("schedule.fix_add_warmup", warm=max(1, round(0.03 * planned)), planned=planned)], ctx=ctx))
    return out


def _base_lr(scheduler: Any) -> float | None:
    base = getattr(scheduler, "base_lrs", None)
    try:
        return float(base[0]) if base else None
    except (TypeError, ValueError, IndexError):
        return None


def _adam_like(opt: Any) -> bool:
    name = type(opt).__name__.lower() if opt is not None else ""
    return any(k in name for k in ("adam", "lamb", "lion"))
