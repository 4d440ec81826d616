"""Several runs side by side: the settings that differ, each run's outcome, and the first step where
two loss curves part beyond their noise.

Pure reasoning over `Run` records (nothing is read from disk here): `lossdoctor diagnose RUN_A RUN_B`
loads the runs, diagnoses each alone, and asks `compare` for the `comparison` object of the JSON
report; the text and HTML reports render that object.

The parting rule (`PartingRule`): the two loss curves are aligned on the steps both logged; the
noise of each is the robust spread (1.4826 x the median absolute deviation) of its residual from a
rolling median; the difference of two independent noisy curves has the pooled noise
sqrt(sigma_a^2 + sigma_b^2). The curves part at the first of `consecutive` aligned points in a row
whose difference exceeds `k` x that pooled noise (and `rel_floor` of the loss level, so that two
noise-free curves equal up to float rounding never part).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..records import Run


@dataclass(frozen=True)
class PartingRule:
    #: 4 robust sigmas: a Gaussian point passes it with probability 6e-5, so `consecutive` such points
    #: in a row by chance is below 1e-12 per step (chosen, not tuned; on tests/test_compare.py's MLP,
    #: in-sample: LR 3e-2 vs 3e-3 parts at step 20 of 60, identical seeds never part)
    k: float = 4.0
    #: three aligned points in a row: one odd batch (a spike in one run) is not a parting
    consecutive: int = 3
    #: the rolling median's width whose residual is a curve's noise: wide enough to ignore one spike
    #: (the median of 9 survives 4 outliers), narrow enough to follow a fast early descent
    window: int = 9
    #: a difference under 0.1% of the loss level is not a parting even when both curves are noise-free
    #: (full-batch runs): float rounding between two builds differs by far less
    rel_floor: float = 1e-3
    #: fewer aligned points than this: no noise estimate, no verdict (a 9-point median needs them)
    min_points: int = 9


PARTING = PartingRule()

#: the settings compared, in the order the report lists them
SETTINGS = (
    "lr",
    "optimizer",
    "batch_size",
    "precision",
    "scheduler",
    "seed",
    "momentum",
    "betas",
    "weight_decay",
    "eps",
    "max_grad_norm",
    "warmup",
    "max_steps",
)

#: keys of a run's configuration (hparams.yaml, W&B config, MLflow params...) -> the setting's name
_CONFIG_KEYS = {
    "learning_rate": "lr",
    "lr": "lr",
    "optimizer": "optimizer",
    "optim": "optimizer",
    "batch_size": "batch_size",
    "train_batch_size": "batch_size",
    "per_device_train_batch_size": "batch_size",
    "precision": "precision",
    "lr_scheduler_type": "scheduler",
    "scheduler": "scheduler",
    "lr_scheduler": "scheduler",
    "seed": "seed",
    "momentum": "momentum",
    "weight_decay": "weight_decay",
    "adam_epsilon": "eps",
    "eps": "eps",
    "max_grad_norm": "max_grad_norm",
    "gradient_clip_val": "max_grad_norm",
    "warmup_steps": "warmup",
    "warmup_ratio": "warmup",
    "max_steps": "max_steps",
}


def _plain(v: Any) -> Any:
    """A setting as JSON can hold it: numbers rounded to 6 significant digits, short strings."""
    if isinstance(v, bool) or v is None:
        return v
    if isinstance(v, (int, np.integer)):
        return int(v)
    if isinstance(v, (float, np.floating)):
        return float(f"{float(v):.6g}") if math.isfinite(float(v)) else None
    if isinstance(v, (list, tuple)) and len(v) <= 8:
        return [_plain(x) for x in v]
    if isinstance(v, str):
        return v[:80]
    return None


def _from_watch(meta: dict[str, Any], out: dict[str, Any]) -> None:
    """A lossdoctor run directory's meta.json: the optimizer's class and first group, the scheduler's
    and scaler's classes, the parameters' dtypes."""
    opt = meta.get("optimizer")
    if isinstance(opt, dict):
        if isinstance(opt.get("class"), str):
            out["optimizer"] = opt["class"]
        groups = opt.get("groups")
        if isinstance(groups, list) and groups and isinstance(groups[0], dict):
            g = groups[0]
            for name in ("lr", "momentum", "betas", "weight_decay", "eps"):
                if name in g and _plain(g[name]) is not None:
                    out[name] = _plain(g[name])
    sched = meta.get("scheduler")
    if isinstance(sched, dict) and isinstance(sched.get("class"), str):
        out["scheduler"] = sched["class"]
    elif isinstance(sched, str):
        out["scheduler"] = sched[:80]
    model = meta.get("model")
    dtypes = model.get("param_dtypes") if isinstance(model, dict) else None
    if isinstance(dtypes, dict) and dtypes:
        out["precision"] = "+".join(sorted(str(k) for k in dtypes))[:80]
    scaler = meta.get("scaler")
    if isinstance(scaler, dict) and scaler:
        out["precision"] = f"{out.get('precision', '')}+GradScaler".lstrip("+")


def settings(run: Run) -> dict[str, Any]:
    """The run's settings by the names in `SETTINGS`, from what its reader and config files said."""
    meta = run.meta
    out: dict[str, Any] = {}
    config = st if isinstance(st := meta.get("settings"), dict) else {}
    if isinstance(meta.get("config"), dict):
        config = {**meta["config"], **config}
    for key, name in _CONFIG_KEYS.items():
        v = config.get(key)
        if isinstance(v, dict) and set(v) >= {"value"}:
            v = v["value"]
        if name not in out and _plain(v) is not None:
            out[name] = _plain(v)
    for key, name in (
        ("config_lr", "lr"),
        ("train_batch_size", "batch_size"),
        ("seed", "seed"),
        ("max_grad_norm", "max_grad_norm"),
        ("max_steps", "max_steps"),
        ("precision", "precision"),
    ):
        if name not in out and _plain(meta.get(key)) is not None:
            out[name] = _plain(meta[key])
    if isinstance(meta.get("optimizer"), dict) and meta.get("format") != "lossdoctor.run/1":
        cls = meta["optimizer"].get("class")
        if isinstance(cls, str):
            out.setdefault("optimizer", cls)
    for flag, name in (("bf16", "bf16"), ("fp16", "fp16")):
        if meta.get(flag) is True or config.get(flag) is True:
            out.setdefault("precision", name)
    watch: dict[str, Any] = {}
    _from_watch(meta, watch)
    out = {**out, **watch}  # what the optimizer itself held wins over a config's
    if "lr" not in out and run.has("lr"):
        lrs = run.cols["lr"][run.logged("lr")]
        lrs = lrs[np.isfinite(lrs)]
        if lrs.size:
            out["lr"] = _plain(float(lrs.max()))  # the peak logged LR
    return out


def differing(all_settings: Sequence[dict[str, Any]]) -> dict[str, list[Any]]:
    """The settings whose values are not the same in every run (a missing one is None), in
    `SETTINGS` order: name -> one value per run."""
    names = [n for n in SETTINGS if any(n in s for s in all_settings)]
    out = {}
    for n in names:
        values = [s.get(n) for s in all_settings]
        if any(v != values[0] for v in values[1:]):
            out[n] = values
    return out


def loss_curve(run: Run) -> tuple[np.ndarray, np.ndarray]:
    """(steps, loss) of the logged, finite loss points, one per step (the last one logged)."""
    if not run.has("loss"):
        return np.zeros(0, dtype=np.int64), np.zeros(0)
    lg = run.logged("loss")
    steps, y = run.steps[lg].astype(np.int64), run.cols["loss"][lg].astype(np.float64)
    ok = np.isfinite(y)
    steps, y = steps[ok], y[ok]
    _, last = np.unique(steps[::-1], return_index=True)
    idx = np.sort(len(steps) - 1 - last)
    return steps[idx], y[idx]


def noise_sigma(y: np.ndarray, window: int) -> float:
    """1.4826 x the median absolute residual of `y` from its rolling median (edges padded)."""
    if y.size < 3:
        return 0.0
    w = min(window, y.size if y.size % 2 else y.size - 1)
    pad = w // 2
    padded = np.concatenate([np.full(pad, y[0]), y, np.full(pad, y[-1])])
    med = np.median(np.lib.stride_tricks.sliding_window_view(padded, w), axis=1)
    return float(1.4826 * np.median(np.abs(y - med)))


def parting(a: Run, b: Run, rule: PartingRule = PARTING) -> dict[str, Any]:
    """Where the loss of `b` parts from the loss of `a`: `step` (None when they never part),
    `verdict` ("parted", "together" or "too_short"), the aligned points, the pooled noise and the
    threshold the rule used, and the difference (b - a) at the parting step."""
    sa, ya = loss_curve(a)
    sb, yb = loss_curve(b)
    common, ia, ib = np.intersect1d(sa, sb, return_indices=True)
    out: dict[str, Any] = {
        "step": None,
        "aligned": int(common.size),
        "noise": None,
        "threshold": None,
        "difference": None,
        "rule": {"k": rule.k, "consecutive": rule.consecutive, "window": rule.window, "rel_floor": rule.rel_floor},
    }
    if common.size < rule.min_points:
        out["verdict"] = "too_short"
        return out
    ya, yb = ya[ia], yb[ib]
    pooled = math.hypot(noise_sigma(ya, rule.window), noise_sigma(yb, rule.window))
    level = float(np.median(np.abs(np.concatenate([ya, yb]))))
    threshold = max(rule.k * pooled, rule.rel_floor * level, 1e-12)
    d = yb - ya
    beyond = np.abs(d) > threshold
    out.update(noise=_plain(pooled), threshold=_plain(threshold))
    run_len = 0
    for i, hit in enumerate(beyond):
        run_len = run_len + 1 if hit else 0
        if run_len >= rule.consecutive:
            first = i - rule.consecutive + 1
            out.update(step=int(common[first]), difference=_plain(float(d[first])), verdict="parted")
            return out
    out["verdict"] = "together"
    return out


def outcome(run: Run, report: Any) -> dict[str, Any]:
    """One run's line of the table: steps, final and minimum loss, status and top finding."""
    _, y = loss_curve(run)
    top = report.findings[0] if report.findings else None
    raw = run.cols["loss"][run.logged("loss")] if run.has("loss") else np.zeros(0)
    bad = np.flatnonzero(~np.isfinite(raw))
    first_bad = int(run.steps[run.logged("loss")][bad[0]]) if bad.size else None
    return {
        "steps": int(report.steps),
        "status": report.status,
        # the last logged loss (null when it is NaN/Inf: `first_nonfinite` says from where)
        "final_loss": _plain(float(raw[-1])) if raw.size else None,
        "min_loss": _plain(float(y.min())) if y.size else None,
        "first_nonfinite": first_bad,
        "top": None
        if top is None
        else {
            "cause": top.cause,
            "symptom": top.symptom,
            "severity": top.severity,
            "step": None if top.step is None else int(top.step),
        },
    }


def compare(entries: Sequence[tuple[str, str, Run, Any]], rule: PartingRule = PARTING) -> dict[str, Any]:
    """The `comparison` object of the JSON report for (label, path, run, report) entries, the first
    being the baseline every other run's parting step is measured against."""
    sets = [settings(run) for _, _, run, _ in entries]
    runs = [
        {"label": label, "path": path, **outcome(run, rep), "settings": s}
        for (label, path, run, rep), s in zip(entries, sets)
    ]
    base = entries[0][2]
    partings = [
        {"baseline": 0, "run": i, **parting(base, run, rule)} for i, (_, _, run, _) in enumerate(entries) if i > 0
    ]
    return {"runs": runs, "differing": differing(sets), "parting": partings}
