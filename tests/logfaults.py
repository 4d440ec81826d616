"""Scalar training curves with the faults a log can show, for the reader tests.

Each format's test writes these with the format's real writer (SummaryWriter, wandb, the CSV the
W&B UI exports, Megatron's line format...) and checks the diagnosis. The curves follow what such
runs look like: a healthy run with warm-up, noise and a falling loss; a gradient norm that grows
geometrically and overflows (loss goes NaN at the same step); an fp16 loss scale halving from
65536 down to 0.0625 while steps are skipped and the loss stops moving; a learning rate so high
that the loss jumps at step 2 and diverges.
"""

from __future__ import annotations

import numpy as np

N = 300
#: the acceptable primary diagnoses of each curve (Humbatova et al.: score against sets)
EXPECTED = {
    "grad_explosion": {"grad_explosion"},
    "scale_collapse": {"loss_scale_collapse"},
    "lr_too_high": {"lr_too_high"},
}


def _lr(n: int = N, peak: float = 3e-4, warmup: int = 30) -> np.ndarray:
    s = np.arange(n)
    warm = peak * (s + 1) / warmup
    cos = 0.1 * peak + 0.45 * peak * (1 + np.cos(np.pi * (s - warmup) / (n - warmup)))
    return np.where(s < warmup, warm, cos)


def healthy(n: int = N, seed: int = 0) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    s = np.arange(n)
    loss = 2.2 * np.exp(-s / 90) + 1.1 + 0.04 * rng.standard_normal(n)
    gn = 1.4 * np.exp(-s / 200) + 0.4 + 0.08 * np.abs(rng.standard_normal(n))
    return {"step": s, "loss": loss, "grad_norm": gn, "lr": _lr(n)}


def grad_explosion(n: int = N, onset: int = 150, seed: int = 1) -> dict[str, np.ndarray]:
    """Healthy, then the grad norm grows 1.5x per step from `onset` (to ~1e7 after 40 steps); the
    loss follows it up in the last steps and gradients and loss are NaN from `onset + 40` on."""
    d = healthy(n, seed)
    s = d["step"]
    blow = onset + 40
    gn = d["grad_norm"] * np.where(s >= onset, 1.5 ** (s - onset), 1.0)
    loss = d["loss"] * np.where(s >= blow - 8, 1 + 0.3 * (s - blow + 9), 1.0)
    loss[blow:] = np.nan
    gn[blow:] = np.nan
    return {**d, "grad_norm": gn, "loss": loss}


def scale_collapse(n: int = N, onset: int = 100, seed: int = 2) -> dict[str, np.ndarray]:
    """fp16 GradScaler: 65536 until `onset`, then an overflow (skip, halve) every 5th step until the
    scale is 0.0625, then every step overflows; the loss freezes at its value at `onset`."""
    d = healthy(n, seed)
    s = d["step"]
    scale = np.full(n, 65536.0)
    skipped = np.zeros(n)
    cur = 65536.0
    for i in range(onset, n):
        if (i - onset) % 5 == 0 or cur <= 0.0625:
            skipped[i] = 1.0
            cur = max(cur / 2, 0.0625) if cur > 0.0625 else cur
        scale[i] = cur
    rng = np.random.default_rng(seed)
    loss = d["loss"].copy()
    loss[onset:] = loss[onset] + 0.04 * rng.standard_normal(n - onset)
    gn = d["grad_norm"].copy()
    gn[skipped > 0] = np.inf  # the unscaled norm of an overflowing step
    return {**d, "loss": loss, "grad_norm": gn, "scale": scale, "skipped": skipped, "step": s}


def lr_too_high(n: int = N, seed: int = 3) -> dict[str, np.ndarray]:
    """A learning rate 100x too high with no warm-up: the loss jumps at step 2 and diverges."""
    rng = np.random.default_rng(seed)
    s = np.arange(n)
    loss = np.empty(n)
    loss[0], loss[1] = 2.31, 2.25
    loss[2:] = 9.0 + 0.02 * (s[2:] - 2) * 8 + 1.5 * rng.standard_normal(n - 2)
    gn = np.where(s < 2, 2.0, 40.0 + 10 * np.abs(rng.standard_normal(n)))
    return {"step": s, "loss": np.abs(loss), "grad_norm": gn, "lr": np.full(n, 0.03)}


CURVES = {
    "healthy": healthy,
    "grad_explosion": grad_explosion,
    "scale_collapse": scale_collapse,
    "lr_too_high": lr_too_high,
}


def primary(report) -> str | None:
    d = report.to_dict() if hasattr(report, "to_dict") else report
    return d["findings"][0]["cause"] if d["findings"] else None


def check(report, curve: str) -> None:
    """Assert the diagnosis a curve must get: healthy -> status healthy; a fault -> its cause first."""
    d = report.to_dict() if hasattr(report, "to_dict") else report
    if curve == "healthy":
        assert d["status"] == "healthy", [(f["cause"], f["severity"], f["evidence"]) for f in d["findings"]]
        return
    got = primary(d)
    assert got in EXPECTED[curve], (
        curve,
        [(f["cause"], f["severity"], f["step"], f["evidence"]) for f in d["findings"]],
    )
