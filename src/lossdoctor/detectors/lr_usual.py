"""The LR's magnitude against what is usual for the optimizer and the task, when the run says them.

Evidence only: an LR outside the usual range supports a finding that the curve already made (or
breaks a tie between causes that fit the curve equally); it never makes a finding on its own, and
an LR inside the range is said as evidence against an LR finding. The ranges are the peaks people
use (and papers report): AdamW LM pre-training 1e-4 to 1e-3, fine-tuning a pretrained model 1e-5
to 2e-4, Adam-family otherwise 1e-5 to 1e-3, SGD with momentum 1e-3 to 1e-1, Lion 3-10x below
AdamW. "Outside" means beyond 3x either end: the ranges are habits, not laws.
"""

from __future__ import annotations

import functools
from collections.abc import Callable

from ..findings import Finding
from ..messages import Msg
from ..records import Run
from ..sources.metadata import optimizer_family
from .quantities import Quantities

#: (optimizer family, task kind or None) -> (usual low, usual high, what it is usual for: a message key)
USUAL_LR: dict[tuple[str, str | None], tuple[float, float, str]] = {
    ("adam", "pretrain"): (1e-4, 1e-3, "lr_usual.for.adam_pretrain"),
    ("adam", "finetune"): (1e-5, 2e-4, "lr_usual.for.adam_finetune"),
    ("adam", None): (1e-5, 1e-3, "lr_usual.for.adam"),
    ("sgd", None): (1e-3, 1e-1, "lr_usual.for.sgd"),
    ("lion", None): (1e-6, 3e-4, "lr_usual.for.lion"),
}
SLACK = 3.0


def task_kind(run: Run) -> str | None:
    """'pretrain' / 'finetune' from the run's config, or from the task `watch` was given."""
    kind = run.meta.get("task_kind")
    if kind in ("pretrain", "finetune"):
        return kind
    task = run.meta.get("task")
    return {"pretrain": "pretrain", "sft": "finetune"}.get(task) if isinstance(task, str) else None


def judge_lr(run: Run, q: Quantities, lr: float | None) -> tuple[str, Msg] | None:
    """('low' | 'usual' | 'high', the sentence that says so) for `lr`, or None when the run does
    not say its optimizer (or its LR is unknown)."""
    fam = optimizer_family(q.optimizer)
    if fam is None or lr is None or not lr > 0:
        return None
    kind = task_kind(run) if fam == "adam" else None
    lo, hi, what = USUAL_LR.get((fam, kind)) or USUAL_LR[(fam, None)]
    verdict = "low" if lr < lo / SLACK else "high" if lr > hi * SLACK else "usual"
    opt = (
        (run.meta.get("optimizer") or {}).get("class")
        if isinstance(run.meta.get("optimizer"), dict)
        else run.meta.get("optimizer")
    )
    return verdict, Msg(f"lr_usual.{verdict}", lr=lr, lo=_short(lo), hi=_short(hi), what=Msg(what), opt=str(opt))


def above_every_family(lr: float | None) -> Msg | None:
    """The sentence saying `lr` is far above the usual peak of every optimizer family (beyond SLACK
    x the highest usual peak, SGD's), so that the run's unnamed optimizer does not matter; None when
    it is not (or unknown)."""
    top = max(hi for _, hi, _ in USUAL_LR.values())
    if lr is None or not lr > top * SLACK:
        return None
    return Msg("lr_usual.high_any", lr=lr, hi=_short(top))


def _short(x: float) -> str:
    """1e-4, 2e-4, 1e-1: a range's ends as people write them."""
    m, e = f"{x:.0e}".split("e")
    return f"{m}e{int(e)}"


def peak_lr(run: Run, q: Quantities) -> float | None:
    """The largest LR the log shows, else the configured one."""
    import numpy as np

    lr = q.lr[np.isfinite(q.lr)]
    if lr.size and float(lr.max()) > 0:
        return float(lr.max())
    v = run.meta.get("config_lr")
    return float(v) if isinstance(v, (int, float)) and not isinstance(v, bool) and v > 0 else None


#: the verdict that supports a finding of each cause
SUPPORTS = {"lr_too_high": "high", "lr_too_low": "low"}


def with_lr_evidence(fn: Callable[[Run, Quantities], list[Finding]]) -> Callable[[Run, Quantities], list[Finding]]:
    """Wrap a detector: each of its lr_too_high / lr_too_low findings gets the LR-vs-usual sentence
    as evidence, for or against. Its severity, confidence and rank stay what the curve made them:
    the order of causes is the curve's (a tie at chance is broken in `flat_loss`, not here)."""

    @functools.wraps(fn)
    def wrapped(run: Run, q: Quantities) -> list[Finding]:
        found = fn(run, q)
        if not any(f.cause in SUPPORTS for f in found):
            return found
        judged = judge_lr(run, q, peak_lr(run, q))
        if judged is None:
            return found
        verdict, msg = judged
        for f in found:
            want = SUPPORTS.get(f.cause)
            if want is None or any(getattr(e, "key", "").startswith("lr_usual.") for e in f.evidence):
                continue
            f.evidence.append(msg)
        return found

    return wrapped
