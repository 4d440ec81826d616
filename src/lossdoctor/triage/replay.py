"""Replaying recorded steps on a workspace, and probing a state with a batch.

Replay re-runs the training step the way the loop ran it, from what the ring recorded:
`replay_fn(model, batch) -> loss`, backward (through the GradScaler when there is one), the
gradient-clipping factor recovered from the recorded gradient norms, the recorded hyper-parameters,
and an optimizer step only where the original stepped. The replayed losses are compared with the
logged ones step by step: while they agree, the replay is faithful, and what happens at the
failing step is what happened in training.

A *probe* runs forward and backward of one batch on the workspace's current state without
stepping, and says whether the loss or any gradient is non-finite. Buffers (BatchNorm running
statistics) are put back afterwards, so probes never change the state they probe.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import torch

from ..messages import Msg
from ..signals.gradients import foreach_norm_fp32
from .ring import StepEntry
from .state import Snapshot, Workspace

ReplayFn = Callable[[torch.nn.Module, Any], torch.Tensor]

#: replayed and logged losses agree when within this relative tolerance (GPU kernels with atomics
#: make tiny differences that grow over a few steps; a real divergence is far larger)
RTOL = 1e-3


def losses_agree(logged: float | None, replayed: float, rtol: float = RTOL) -> bool | None:
    if logged is None:
        return None
    lf, rf = math.isfinite(logged), math.isfinite(replayed)
    if not lf or not rf:
        return (not lf) and (not rf)
    return abs(logged - replayed) <= rtol * max(abs(logged), abs(replayed)) + 1e-7


@dataclass
class BatchTrial:
    """One forward+backward of a batch on a state: its loss and whether the gradients stayed finite.
    (Not a `signals.probe.Probe`, the monitor's per-step measurement.)"""

    loss: float
    grads_finite: bool

    @property
    def nonfinite(self) -> bool:
        return not math.isfinite(self.loss) or not self.grads_finite


def scalar_loss(loss: Any, who: str = "replay_fn") -> torch.Tensor:
    """The loss tensor a replay or loss function returned, as a scalar (a per-sample loss is
    averaged); anything else is the caller's mistake, said in one line."""
    if not isinstance(loss, torch.Tensor):
        raise TypeError(f"{who} must return the loss tensor, got {type(loss).__name__}")
    return loss if loss.dim() == 0 else loss.float().mean()


def grads_finite(params: list[torch.Tensor]) -> bool:
    """All gradients finite. An L2 norm overflows for huge finite values, so a non-finite norm is
    confirmed on that tensor before it counts."""
    gs = [p.grad.detach() for p in params if p.grad is not None and not p.grad.is_sparse]
    if not gs:
        return True
    norms = torch.stack(foreach_norm_fp32(gs))
    if bool(torch.isfinite(norms).all()):
        return True
    bad = (~torch.isfinite(norms)).nonzero().flatten().tolist()
    return all(bool(torch.isfinite(gs[i]).all()) for i in bad)


def try_batch(ws: Workspace, batch: Any, fn: ReplayFn, *, rng: Any = None) -> BatchTrial:
    """Forward + backward of `batch` on the workspace's state; the state is left as it was."""
    model = ws.model
    bufs = [b.detach().clone() for b in model.buffers()]
    ws.zero_grad()
    try:
        if rng is not None:
            rng.apply()
        loss = scalar_loss(fn(model, batch))
        value = float(loss.detach().float())
        ok = True
        if loss.requires_grad:
            loss.backward()
            ok = grads_finite(list(ws.params()))
        return BatchTrial(value, ok)
    finally:
        ws.zero_grad()
        with torch.no_grad():
            for b, v in zip(model.buffers(), bufs):
                b.copy_(v)


@dataclass
class StepReplay:
    step: int
    logged: float | None
    replayed: float
    agree: bool | None
    clip: float | None = None  # gradient scale factor the loop's clipping applied

    def to_dict(self) -> dict[str, Any]:
        d = {"step": self.step, "logged": self.logged, "replayed": self.replayed, "agree": self.agree}
        if self.clip is not None:
            d["clip_factor"] = self.clip
        return d


@dataclass
class ReplayResult:
    start: int  # the snapshot's step
    target: int
    steps: list[StepReplay] = field(default_factory=list)
    reached: bool = False  # the target step was replayed (state == state before it)
    stopped_at: int | None = None  # a step whose batch was not kept
    target_trial: BatchTrial | None = None
    error: str | None = None

    @property
    def diverged_at(self) -> int | None:
        for s in self.steps:
            if s.step < self.target and s.agree is False:
                return s.step
        return None

    @property
    def faithful(self) -> bool:
        return self.diverged_at is None

    def max_rel_dev(self) -> float:
        devs = [
            abs(s.replayed - s.logged) / max(abs(s.logged), 1e-12)
            for s in self.steps
            if s.step < self.target and s.logged is not None and math.isfinite(s.logged) and math.isfinite(s.replayed)
        ]
        return max(devs) if devs else 0.0

    def to_dict(self) -> dict[str, Any]:
        return {
            "from_step": self.start,
            "to_step": self.target,
            "steps_replayed": len(self.steps),
            "reached": self.reached,
            "stopped_at": self.stopped_at,
            "faithful": self.faithful,
            "diverged_at": self.diverged_at,
            "max_rel_deviation": self.max_rel_dev(),
            "losses": [s.to_dict() for s in self.steps],
            "error": self.error,
        }


def flat_params(opt: torch.optim.Optimizer) -> list[torch.Tensor]:
    return [p for g in opt.param_groups for p in g["params"]]


def _emulate_clipping(entry: StepEntry, params: list[torch.Tensor]) -> float | None:
    """Scale the gradients by the factor the loop's clipping applied at this step, read from the
    recorded norms of a few gradients. Only a uniform factor (clip_grad_norm_) is reproduced; if
    the probed gradients disagree, nothing is done and the loss comparison will tell."""
    if entry.probe is None or not entry.probe_idx:
        return None
    gs = [params[i].grad for i in entry.probe_idx if i < len(params)]
    if len(gs) != len(entry.probe_idx) or any(g is None for g in gs):
        return None
    now = torch.stack(foreach_norm_fp32([g.detach() for g in gs if g is not None])).tolist()
    rec = entry.probe.detach().float().cpu().tolist()
    ratios = [r / n for r, n in zip(rec, now) if n > 0 and math.isfinite(n) and math.isfinite(r)]
    if not ratios:
        return None
    lo, hi = min(ratios), max(ratios)
    if hi - lo > 1e-3 * hi or abs(hi - 1.0) < 1e-6:
        return None
    f = sum(ratios) / len(ratios)
    with torch.no_grad():
        torch._foreach_mul_([p.grad for p in params if p.grad is not None], f)
    return f


def replay(
    ws: Workspace, snap: Snapshot, entries: list[StepEntry | None], fn: ReplayFn, target: int, *, rtol: float = RTOL
) -> ReplayResult:
    """Restore `snap` and replay steps snap.step .. target (the target is run forward+backward
    but not stepped, so the workspace ends in the state the failing step started from)."""
    res = ReplayResult(start=snap.step, target=target)
    ws.load(snap)
    params = flat_params(ws.optimizer)
    for step in range(snap.step, target + 1):
        e = entries[step - snap.step] if step - snap.step < len(entries) else None
        if e is None or not e.kept:
            res.stopped_at = step
            return res
        batch = e.device_batch()
        if step == target:
            res.target_trial = try_batch(ws, batch, fn, rng=e.rng)
            res.steps.append(
                StepReplay(step, e.loss, res.target_trial.loss, losses_agree(e.loss, res.target_trial.loss, rtol))
            )
            res.reached = True
            return res
        ws.zero_grad()
        if e.rng is not None:
            e.rng.apply()
        loss = scalar_loss(fn(ws.model, batch))
        value = float(loss.detach().float())
        if not loss.requires_grad:
            res.error = Msg("triage.replay.no_grad", step=step)
            res.stopped_at = step
            return res
        scaler = ws.scaler
        (scaler.scale(loss) if scaler is not None else loss).backward()
        clip = optimizer_step(ws, e, params)
        ws.zero_grad()
        res.steps.append(StepReplay(step, e.loss, value, losses_agree(e.loss, value, rtol), clip))
    return res


def optimizer_step(ws: Workspace, e: StepEntry, params: list[torch.Tensor]) -> float | None:
    """The update of step `e` on the workspace, its gradients computed: with the hyper-parameters it
    had and the factor of the loop's clipping (returned); a GradScaler decides itself whether to step
    (and must update its scale either way), a plain optimizer steps where the logged run did."""
    scaler = ws.scaler
    clip = None
    if e.stepped or scaler is not None:
        if e.hparams:
            for g, hp in zip(ws.optimizer.param_groups, e.hparams):
                g.update(hp)
        if scaler is not None:
            scaler.unscale_(ws.optimizer)
        clip = _emulate_clipping(e, params)
        if scaler is None:
            ws.optimizer.step()
        else:
            if not e.skipped_by_policy:  # the skip policy kept this update out of training
                scaler.step(ws.optimizer)
            scaler.update()
    return clip
