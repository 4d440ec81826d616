"""The data behind the HTML report's charts: series per signal, reduced to what a screen can show.

A million-step log would make a 40 MB page and a frozen browser, so each series is reduced to the
minimum and maximum of each of at most `MAX_BUCKETS` buckets (a spike survives, unlike with plain
subsampling or averaging). Non-finite values cannot be drawn on a line; their steps are kept in a
separate list and drawn as markers (capped at `MAX_MARKS`, the first ones kept: the onset matters).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np

from ..findings import Report, as_fix
from ..records import COLUMNS, Run

#: a clipping fix's threshold ("... max_norm=2.3 ..."), drawn on the gradient-norm chart

MAX_BUCKETS = 2000
MAX_MARKS = 2000
MAX_RANKS = 8
MAX_HEAT_COLS = 600
MAX_HEAT_ROWS = 400

#: charts in display order; the other COLUMNS present get small charts under "other signals"
MAIN = ("loss", "grad_norm", "lr", "scale", "update_ratio")
LOG_SCALE = {"grad_norm", "scale", "update_ratio", "act_absmax", "input_absmax", "param_norm"}
_SKIP_OTHER = {"skipped", "time"}


def decimate(x: np.ndarray, y: np.ndarray, max_buckets: int = MAX_BUCKETS) -> tuple[np.ndarray, np.ndarray]:
    """Min/max decimation of finite points; returns (x, y) in step order."""
    ok = np.isfinite(y)
    x, y = x[ok], y[ok]
    n = len(x)
    if n <= 2 * max_buckets:
        return x, y
    k = math.ceil(n / max_buckets)
    nb = math.ceil(n / k)
    pad = nb * k - n
    yp = np.concatenate([y, np.full(pad, np.nan)]).reshape(nb, k)
    lo = np.nanargmin(yp, axis=1) + np.arange(nb) * k
    hi = np.nanargmax(yp, axis=1) + np.arange(nb) * k
    idx = np.unique(np.concatenate([lo, hi]))
    return x[idx], y[idx]


def _num(v: float, sig: int = 6) -> float | None:
    if not math.isfinite(v):
        return None
    return float(f"{v:.{sig}g}")


def series(run: Run, name: str) -> dict[str, Any] | None:
    if not run.has(name) or name not in run.cols:
        return None
    lg = run.logged(name)
    x = run.steps[lg].astype(np.float64)
    y = run.cols[name][lg]
    bad = ~np.isfinite(y)
    skipped = _skipped_mask(run)[lg]
    on_skip = x[bad & skipped][:MAX_MARKS]  # an overflow GradScaler skipped: its job, not a failure
    marks = x[bad & ~skipped][:MAX_MARKS]
    dx, dy = decimate(x, y)
    if name in LOG_SCALE:
        # a log axis shows positive values, and at most 15 decades below the largest (uPlot's
        # log splits over 40 decades of float32 denormals break it; nobody reads them anyway)
        top = float(dy.max()) if dy.size else 0.0
        keep = (dy > 0) & (dy >= top * 1e-15)
        dx, dy = dx[keep], dy[keep]
    # non-finite steps stay on the x axis (as gaps) so the onset and its pins are in view
    xs = np.concatenate([dx, marks, on_skip])
    ys = np.concatenate([dy, np.full(len(marks) + len(on_skip), np.nan)])
    order = np.argsort(xs, kind="stable")
    xs, ys = xs[order], ys[order]
    return {
        "x": [int(v) for v in xs],
        "y": [_num(v) for v in ys],
        "nonfinite": [int(v) for v in marks],
        "nonfinite_skipped": [int(v) for v in on_skip],
        "n": int(lg.sum()),
        "decimated": len(dx) < int((~bad).sum()),
    }


def _skipped_mask(run: Run) -> np.ndarray:
    if not run.has("skipped"):
        return np.zeros(len(run), dtype=bool)
    return np.nan_to_num(run.col("skipped"), nan=0.0) > 0.5


def skipped_steps(run: Run) -> list[int]:
    return [int(v) for v in run.steps[_skipped_mask(run)][:MAX_MARKS]]


def layer_heatmaps(run: Run) -> list[dict[str, Any]]:
    ls = run.layers
    if ls is None or not len(ls.steps) or not ls.modules:
        return []
    order = ["param_grad_norm", "grad_absmax", "act_absmax", "act_rms", "param_norm"]
    names = [s for s in order if s in ls.stats] + [s for s in ls.stats if s not in order]
    out = []
    for stat in names:
        m = np.asarray(ls.stats[stat], dtype=np.float64)  # (T, M)
        if m.ndim != 2 or m.shape[0] == 0:
            continue
        steps = np.asarray(ls.steps)
        # the run log's convention: Inf marks a non-finite value (drawn red), NaN a value not
        # measured at that step (a step between sampled ones, a module that did not run: blank);
        # a module with no value at all for this stat (a ReLU has no parameters) is not drawn
        applicable = np.flatnonzero(np.isfinite(m).any(axis=0) | np.isinf(m).any(axis=0))[:MAX_HEAT_ROWS]
        if applicable.size == 0:
            continue
        rows = [ls.modules[i] for i in applicable]
        m = m[:, applicable]
        t = m.shape[0]
        if t > MAX_HEAT_COLS:
            k = math.ceil(t / MAX_HEAT_COLS)
            starts = np.arange(0, t, k)
            nonfin = np.logical_or.reduceat(np.isinf(m), starts, axis=0)
            m = np.fmax.reduceat(np.where(np.isfinite(m), m, np.nan), starts, axis=0)
            m = np.where(nonfin, np.inf, m)
            steps = steps[starts]
        with np.errstate(divide="ignore", invalid="ignore"):
            lg = np.where(np.isfinite(m) & (m > 0), np.log10(np.where(m > 0, m, 1)), np.nan)
        cells = [[None if not np.isfinite(v) else round(float(v), 3) for v in col] for col in lg.T]
        bad = [[int(i) for i in np.flatnonzero(np.isinf(col))] for col in m.T]
        out.append({"stat": stat, "modules": rows, "steps": [int(s) for s in steps], "log10": cells, "nonfinite": bad})
    return out


def _wide(per_rank: list[dict[str, Any]]) -> bool:
    """A loss spanning more than 3 decades (an explosion) reads better on a log scale."""
    ys = [v for s in per_rank for v in s["y"] if v is not None]
    return bool(ys) and min(ys) > 0 and max(ys) / min(ys) > 1e3


def chart_data(report: Report, runs: Sequence[Run], labels: dict[str, str]) -> dict[str, Any]:
    shown = list(runs)[:MAX_RANKS]
    labels_of_runs = [str(r.get("label")) for r in (report.comparison or {}).get("runs", [])]
    if len(labels_of_runs) != len(list(runs)):
        labels_of_runs = []
    charts = _charts(shown, labels_of_runs, labels)
    clip = _run_clip(shown)
    # the clipping threshold a fix suggests (its number as data: the first clip fix)
    suggested = next(
        (
            float(x.params["max_norm"])
            for f in report.findings
            for x in map(as_fix, f.fixes)
            if x.kind == "clip" and isinstance(x.params.get("max_norm"), float) and math.isfinite(x.params["max_norm"])
        ),
        None,
    )
    findings = [
        {"i": i, "step": f.step, "cause": f.cause, "severity": f.severity}
        for i, f in enumerate(report.findings, 1)
        if f.step is not None
    ]
    heat = []
    for r in shown:
        heat = layer_heatmaps(r)
        if heat:
            break
    return {
        "charts": charts,
        "findings": findings,
        "clip": clip,
        "suggested_clip": suggested,
        "heatmaps": heat,
        "labels": labels,
        "ranks": len(runs),
    }


def _charts(shown: list[Run], labels_of_runs: list[str], labels: dict[str, str]) -> list[dict[str, Any]]:
    """One chart per column the runs have (the main ones always), each with a series per rank or
    compared run. Apart from `chart_data` to keep it short."""
    charts: list[dict[str, Any]] = []
    present = [c for c in COLUMNS if any(r.has(c) and c in r.cols for r in shown)]
    for name in list(MAIN) + [c for c in present if c not in MAIN and c not in _SKIP_OTHER]:
        per_rank = []
        for i, r in enumerate(shown):
            s = series(r, name)
            if s is not None:
                s["rank"] = r.rank
                if labels_of_runs:  # compared runs: one series per run, named by its label
                    s["label"] = labels_of_runs[i]
                per_rank.append(s)
        if not per_rank:
            continue
        charts.append(
            {
                "name": name,
                "label": labels.get(name, name),
                "log": name in LOG_SCALE or (name == "loss" and _wide(per_rank)),
                "main": name in MAIN,
                "series": per_rank,
                "skipped": [skipped_steps(r) for r in shown],
            }
        )
    return charts


def _run_clip(shown: list[Run]) -> float | None:
    """The gradient-clip threshold in the runs' metadata (the last run that has one; its first key
    that does). Apart from `chart_data` to keep it short."""
    clip = None
    for r in shown:
        for key in ("max_grad_norm", "clip_grad", "grad_clip"):
            v = r.meta.get(key)
            if isinstance(v, (int, float)) and not isinstance(v, bool) and v > 0 and math.isfinite(v):
                clip = float(v)
                break
    return clip
