"""One training loop for every scenario, watched by the real `lossdoctor.watch`.

A scenario is a function `seed -> Setup` (model, optimizer, data, loss, precision, schedule) plus
its ground truth: the set of acceptable causes (Humbatova et al., EMSE'25: score against sets, not
one label), the onset step, and the layer / op / samples where the fault has one. The loop is the
loop people write: zero_grad, forward (under autocast when the scenario says so), backward (through
a GradScaler when it says so), optional clipping, optimizer step, scheduler step every `sched_every`
optimizer steps, then `mon.step(loss, batch=batch)`.

Besides the run directory that `watch` writes, the harness leaves `zoo.json` next to it: the ground
truth, what the loop itself saw (first non-finite loss), and when each live finding was raised
(read from `findings.jsonl` as it grows), which gives the live detection delay.
"""

from __future__ import annotations

import contextlib
import json
import math
import random
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch import nn

#: onset modes besides a fixed step: the first step whose loss the loop saw non-finite
FIRST_NONFINITE = "first_nonfinite"


@dataclass
class Setup:
    model: nn.Module
    optimizer: torch.optim.Optimizer
    batches: Callable[[int], Any]  # step -> batch (a pure function of the step)
    loss_fn: Callable[[nn.Module, Any], torch.Tensor]
    steps: int
    scheduler: Any = None
    sched_every: int = 1  # >1: stepped once per "epoch" of this many steps
    scaler: Any = None
    autocast: torch.dtype | None = None
    clip: float | None = None
    accum: int = 1  # micro-batches per step: batches(step) is a list
    replay: bool = False  # pass a replay_fn to watch (op/sample localisation)
    stop_after_nonfinite: int = 10  # a user stops a run that stays NaN
    zero_grad: bool = True  # False: the loop never calls zero_grad (a bug)
    task_hint: bool = True  # False: watch is not told the task (a user's script without task=)


@dataclass(frozen=True)
class Scenario:
    name: str
    build: Callable[[int], Setup]
    family: str  # mlp, cnn, lstm, rnn, gpt2, attention
    optimizer: str
    precision: str  # fp32, bf16, fp16-amp, fp16
    task: str  # regression, classification, pretrain, sft
    causes: frozenset[str]  # acceptable causes; empty for a healthy control
    fault: str  # how the fault was injected, in a sentence
    onset: int | str | None = None
    layers: tuple[str, ...] = ()
    ops: tuple[str, ...] = ()
    samples: tuple[int, ...] = ()
    ci: bool = False  # part of the reduced zoo that runs in the test suite

    @property
    def healthy(self) -> bool:
        return not self.causes


SCENARIOS: dict[str, Scenario] = {}


def scenario(
    name: str,
    *,
    family: str,
    optimizer: str,
    precision: str,
    task: str,
    causes: set[str] | tuple[str, ...] = (),
    fault: str,
    onset: int | str | None = None,
    layers: tuple[str, ...] = (),
    ops: tuple[str, ...] = (),
    samples: tuple[int, ...] = (),
    ci: bool = False,
) -> Callable[[Callable[[int], Setup]], Callable[[int], Setup]]:
    def register(fn: Callable[[int], Setup]) -> Callable[[int], Setup]:
        if name in SCENARIOS:
            raise ValueError(f"duplicate scenario {name}")
        SCENARIOS[name] = Scenario(
            name=name,
            build=fn,
            family=family,
            optimizer=optimizer,
            precision=precision,
            task=task,
            causes=frozenset(causes),
            fault=fault,
            onset=onset,
            layers=tuple(layers),
            ops=tuple(ops),
            samples=tuple(samples),
            ci=ci,
        )
        return fn

    return register


def seed_everything(seed: int) -> None:
    random.seed(seed)
    np.random.seed(seed)
    torch.manual_seed(seed)


def _autocast(dtype: torch.dtype | None):
    return torch.autocast("cpu", dtype=dtype) if dtype is not None else contextlib.nullcontext()


@dataclass
class Outcome:
    """What the loop itself observed (independent of lossdoctor)."""

    steps_run: int = 0
    first_nonfinite: int | None = None
    loss_first: float | None = None
    loss_last: float | None = None
    wall_s: float = 0.0
    live: list[dict[str, Any]] = field(default_factory=list)  # findings raised live, with the step
    error: str | None = None


def train(scn: Scenario, seed: int, run_dir: Path, replay: bool = False) -> Outcome:
    """Train `scn` with `seed` under `lossdoctor.watch`, writing the run to `run_dir`. `replay`
    passes a `replay_fn` even where the scenario does not ask for one (the verified-fixes pass:
    verification replays from the snapshot, so it needs one)."""
    import lossdoctor

    seed_everything(seed)
    s = scn.build(seed)
    run_dir = Path(run_dir)
    findings_file = run_dir / "findings.jsonl"
    replay_fn = None
    if s.replay or replay:

        def replay_fn(model: nn.Module, batch: Any) -> torch.Tensor:
            with _autocast(s.autocast):  # accumulation: the loop's backward of each micro-batch, summed
                return sum(s.loss_fn(model, mb) for mb in batch) if s.accum > 1 else s.loss_fn(model, batch)

    out = Outcome()
    t0 = time.perf_counter()
    mon = lossdoctor.watch(
        s.model,
        s.optimizer,
        scaler=s.scaler,
        scheduler=s.scheduler,
        log_dir=run_dir,
        task=scn.task if s.task_hint else None,
        replay_fn=replay_fn,
        alerts=False,
    )
    seen_bytes = 0
    bad_streak = 0
    try:
        for step in range(s.steps):
            batch = s.batches(step)
            micro = batch if s.accum > 1 else [batch]
            if s.zero_grad:
                s.optimizer.zero_grad(set_to_none=True)
            total = None
            for mb in micro:
                with _autocast(s.autocast):
                    loss = s.loss_fn(s.model, mb)
                (s.scaler.scale(loss) if s.scaler is not None else loss).backward()
                total = loss.detach() if total is None else total + loss.detach()
            if s.scaler is not None:
                if s.clip is not None:
                    s.scaler.unscale_(s.optimizer)
                    torch.nn.utils.clip_grad_norm_(s.model.parameters(), s.clip)
                s.scaler.step(s.optimizer)
                s.scaler.update()
            else:
                if s.clip is not None:
                    torch.nn.utils.clip_grad_norm_(s.model.parameters(), s.clip)
                s.optimizer.step()
            if s.scheduler is not None and (step + 1) % s.sched_every == 0:
                s.scheduler.step()
            mon.step(total, batch=batch)

            value = float(total)
            out.steps_run = step + 1
            if out.loss_first is None:
                out.loss_first = value
            out.loss_last = value
            if math.isfinite(value):
                bad_streak = 0
            else:
                if out.first_nonfinite is None:
                    out.first_nonfinite = step
                bad_streak += 1
            seen_bytes = _read_live(findings_file, seen_bytes, step, out.live)
            if s.scaler is None and bad_streak >= s.stop_after_nonfinite:
                break
    except Exception as e:  # a scenario bug is reported in the table, never hidden
        out.error = f"{type(e).__name__}: {e}"
    finally:
        mon.close()
    _read_live(findings_file, seen_bytes, max(out.steps_run - 1, 0), out.live)  # raised at close
    out.wall_s = time.perf_counter() - t0
    truth = {k: v for k, v in asdict(scn).items() if k != "build"}
    truth["causes"] = sorted(scn.causes)
    (run_dir / "zoo.json").write_text(json.dumps({"scenario": truth, "seed": seed, "outcome": asdict(out)}, indent=1))
    return out


def _read_live(path: Path, seen: int, step: int, into: list[dict[str, Any]]) -> int:
    """Findings appended to findings.jsonl since byte `seen`, stamped with the step that raised them."""
    if not path.exists() or path.stat().st_size <= seen:
        return seen
    with open(path, "rb") as f:
        f.seek(seen)
        new = f.read()
    for line in new.splitlines():
        try:
            d = json.loads(line)
        except json.JSONDecodeError:
            continue
        into.append({"raised_at": step, "cause": d.get("cause"), "severity": d.get("severity"), "step": d.get("step")})
    return seen + len(new)
