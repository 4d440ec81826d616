"""Preflight: catch the mistake before the first step.

Many runs that "do not converge" were doomed by their configuration: a prompt that is not masked,
a scheduler whose cosine period is shorter than the run, a GPT-2 initialised with std 1.0, bf16
weights that an Adam step at lr=1e-5 cannot move. These checks look at the objects themselves
(model, optimizer, scheduler, scaler, a few batches, the tokenizer) instead of waiting for the loss
curve to say so.

    report = lossdoctor.check(model, optimizer, scheduler, batches=batches, total_steps=10_000,
                              task="sft", tokenizer=tokenizer)

One module per area, each producing contract `Finding`s:

    labels     SFT label mask: prompt or padding supervised, all masked, labels shifted twice, EOS
    data       non-finite values, unnormalised features, mojibake, empty/long/duplicate samples
    init       weight std vs fan-in, residual scaling, activation growth, initial loss vs chance
    schedule   the LR schedule simulated over the planned steps on a shadow optimizer
    precision  fp16 without GradScaler, absurd scaler settings, Adam eps, bf16 resolution

`api.check` runs them all once; `watch.PreflightWatch` runs them inside `lossdoctor.watch` (config
checks at start, batch checks on the first batches, activation checks on the first forward) and
`merge` folds the findings into the engine's report. Only `merge` is imported by the offline path,
so this package imports torch lazily.
"""

from __future__ import annotations

from typing import Any


def __getattr__(name: str) -> Any:
    if name == "check":  # imported on first use: it needs torch
        from .api import check

        return check
    raise AttributeError(f"module 'lossdoctor.preflight' has no attribute {name!r}")


__all__ = ["check"]
