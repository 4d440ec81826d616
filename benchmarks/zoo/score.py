"""Scoring: run the real engine on each run directory (what `lossdoctor diagnose RUN_DIR` does) and
on a scalars-only log of the same run, and compare with the scenario's ground truth.

Definitions (every number in the tables means exactly this):
- an *alarm* is a finding of severity warning or critical (status != healthy);
- top-1: the first alarm's cause is in the scenario's set of acceptable causes;
  top-3: one of the first three alarms' causes is;
- the *matched finding* is the highest-ranked alarm with an acceptable cause; onset, layer, op and
  samples are read from it: onset hit = |step - onset| <= 2; layer hit = its layer is the faulty
  module or inside it; op hit = same operator ignoring the `aten.` namespace, overload and leading
  underscores; sample hit = every faulty sample named, and at least half of the named samples
  faulty (recall 1, precision >= 0.5);
- false alarm: a healthy control with any alarm;
- live detection delay: the step at which `watch` wrote the first acceptable alarm to
  findings.jsonl, minus the onset;
- live alert withdrawn: an alarm `watch` wrote to findings.jsonl (what a user watching saw) whose
  cause the final report does not hold (no finding of it at any severity). On a healthy control
  every live alarm counts (to the user it was a false alarm, whatever the end said); on a faulty run,
  those of a cause other than the final top-1 that the final report dropped.
"""

from __future__ import annotations

import csv
import json
import math
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

ALARM = ("warning", "critical")
SCALAR_COLUMNS = ("step", "loss", "grad_norm", "lr", "scale")
ONSET_TOLERANCE = 2


@dataclass
class PathScore:
    """One diagnosis path (full run directory, or scalars only) of one run."""

    status: str = "error"
    findings: list[dict[str, Any]] = field(default_factory=list)  # alarms, compact, in report order
    top1: bool | None = None
    top3: bool | None = None
    onset_hit: bool | None = None
    layer_hit: bool | None = None
    op_hit: bool | None = None
    sample_hit: bool | None = None
    false_alarm: bool | None = None
    via: str = ""
    error: str | None = None
    #: detectors that crashed on this run (the engine notes them and carries on)
    detector_errors: list[str] = field(default_factory=list)

    @property
    def got(self) -> str:
        return self.findings[0]["cause"] if self.findings else "-"


@dataclass
class RunScore:
    scenario: str
    seed: int
    healthy: bool
    causes: list[str]
    onset: int | None
    full: PathScore
    scalars: PathScore
    live_delay: int | None = None
    live_raised_at: int | None = None
    #: live alarms the end did not hold (see the module's definitions): `cause@step` each
    live_withdrawn: list[str] = field(default_factory=list)
    steps_run: int = 0
    wall_s: float = 0.0
    run_dir: str = ""
    harness_error: str | None = None
    #: verified fixes: the top finding's top fix and the cost (`fixcheck.run_verification`)
    verify: dict[str, Any] | None = None

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def norm_op(op: str | None) -> str:
    if not op:
        return ""
    name = op.split("aten.", 1)[-1].split("::", 1)[-1].split(".", 1)[0]
    return name.lstrip("_").lower()


def layer_matches(found: str | None, expected: tuple[str, ...] | list[str]) -> bool:
    if not found:
        return False
    return any(found == e or found.startswith(e + ".") for e in expected)


def samples_match(found: list[int] | None, expected: list[int] | tuple[int, ...]) -> bool:
    """All faulty samples named (recall 1) and at least half of those named are faulty."""
    if not found:
        return False
    f, e = set(found), set(expected)
    return e <= f and len(f & e) >= 0.5 * len(f)


def compact(f: dict[str, Any]) -> dict[str, Any]:
    return {k: f.get(k) for k in ("cause", "symptom", "severity", "confidence", "step", "layer", "op", "samples")}


def judge(report: dict[str, Any], truth: dict[str, Any], onset: int | None, *, localise: bool) -> PathScore:
    """Compare one report (the JSON contract) with the ground truth."""
    alarms = [compact(f) for f in report.get("findings", []) if f.get("severity") in ALARM]
    ps = PathScore(
        status=report.get("status", "?"),
        findings=alarms,
        detector_errors=[n for n in report.get("notes", []) if "internal error" in n],
    )
    ok = set(truth["causes"])
    if not ok:  # healthy control
        ps.false_alarm = bool(alarms)
        return ps
    ps.top1 = bool(alarms) and alarms[0]["cause"] in ok
    ps.top3 = any(f["cause"] in ok for f in alarms[:3])
    match = next((f for f in alarms if f["cause"] in ok), None)
    if onset is not None:
        ps.onset_hit = (
            match is not None and match["step"] is not None and abs(int(match["step"]) - onset) <= ONSET_TOLERANCE
        )
    if localise:
        if truth.get("layers"):
            ps.layer_hit = match is not None and layer_matches(match["layer"], truth["layers"])
        if truth.get("ops"):
            ps.op_hit = match is not None and norm_op(match["op"]) in {norm_op(o) for o in truth["ops"]}
        if truth.get("samples"):
            ps.sample_hit = match is not None and samples_match(match["samples"], truth["samples"])
    return ps


def resolve_onset(truth: dict[str, Any], outcome: dict[str, Any]) -> int | None:
    onset = truth.get("onset")
    if onset == "first_nonfinite":
        return outcome.get("first_nonfinite")
    return onset if isinstance(onset, int) else None


def read_steps(run_dir: Path) -> list[dict[str, Any]]:
    rows = []
    with open(run_dir / "steps.jsonl", "rb") as f:
        for line in f:
            try:
                rows.append(json.loads(line))
            except json.JSONDecodeError:
                continue
    return rows


def write_scalars(run_dir: Path) -> Path:
    """The run as a user's own logger would have kept it: step, loss, grad_norm, lr (and the loss
    scale under fp16), one CSV row per step, NaN written as `nan`."""
    rows = read_steps(run_dir)
    cols = [c for c in SCALAR_COLUMNS if c == "step" or any(c in r for r in rows)]
    path = run_dir / "scalars.csv"
    with open(path, "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(cols)
        for r in rows:
            w.writerow(["" if r.get(c) is None else r[c] for c in cols])
    return path


def _diagnose(path: Path) -> tuple[dict[str, Any], str]:
    from lossdoctor.detectors.engine import diagnose_runs
    from lossdoctor.sources import SourceError, load_path

    try:
        runs = load_path(path)
        via = "load_path"
    except SourceError as e:
        if path.suffix != ".csv":
            raise
        # No generic CSV reader in this checkout yet: build the same step records directly, and
        # say so in the table (the reader's job is parsing, not diagnosis).
        from lossdoctor.records import make_run

        with open(path, newline="") as f:
            rows = list(csv.DictReader(f))
        runs = [make_run(rows, source="csv")]
        via = f"make_run ({e})"
    return diagnose_runs(runs).to_dict(), via


def score_run(run_dir: Path) -> RunScore:
    info = json.loads((run_dir / "zoo.json").read_text())
    truth, outcome = info["scenario"], info["outcome"]
    onset = resolve_onset(truth, outcome)
    scores = []
    full: dict[str, Any] = {}
    for path, localise in ((run_dir, True), (None, False)):
        try:
            if path is None:
                path = write_scalars(run_dir)
            report, via = _diagnose(path)
            full = full or report
            ps = judge(report, truth, onset, localise=localise)
            ps.via = via
        except Exception as e:  # a crash of the engine is a result too: reported, not hidden
            ps = PathScore(error=f"{type(e).__name__}: {e}")
        scores.append(ps)
    rs = RunScore(
        scenario=truth["name"],
        seed=info["seed"],
        healthy=not truth["causes"],
        causes=truth["causes"],
        onset=onset,
        full=scores[0],
        scalars=scores[1],
        steps_run=outcome.get("steps_run", 0),
        wall_s=outcome.get("wall_s", 0.0),
        run_dir=str(run_dir),
        harness_error=outcome.get("error"),
    )
    from .fixcheck import run_verification  # imported here: fixcheck's tables import this module

    rs.verify = run_verification(run_dir, full)
    ok = set(truth["causes"])
    rs.live_withdrawn = withdrawn_live(outcome.get("live", []), full, healthy=not ok)
    first = next(
        (x for x in outcome.get("live", []) if x.get("severity") in ALARM and (x.get("cause") in ok if ok else True)),
        None,
    )
    if first is not None:
        rs.live_raised_at = first["raised_at"]
        if onset is not None and ok:
            rs.live_delay = int(first["raised_at"]) - onset
    return rs


def withdrawn_live(live: list[dict[str, Any]], report: dict[str, Any], *, healthy: bool) -> list[str]:
    """The live alarms a user watching saw and the final report does not stand by, `cause@step`
    once per cause: on a healthy control every live alarm; on a faulty run, a cause other than the
    final top-1 with no finding of it in the final report."""
    held = {f.get("cause") for f in report.get("findings", [])}
    alarms = [f for f in report.get("findings", []) if f.get("severity") in ALARM]
    top1 = alarms[0].get("cause") if alarms else None
    out: dict[str, str] = {}
    for x in live:
        cause = x.get("cause")
        if x.get("severity") not in ALARM or not isinstance(cause, str) or cause in out:
            continue
        if healthy or (cause != top1 and cause not in held):
            out[cause] = f"{cause}@{x.get('raised_at')}"
    return list(out.values())


def evidence(run_dir: Path) -> dict[str, Any]:
    """The step records' numbers a detector author needs to see for a miss, in one small dict."""
    import numpy as np

    rows = read_steps(run_dir)

    def col(name: str) -> np.ndarray:
        out = []
        for r in rows:
            v = r.get(name)
            try:
                out.append(float(v))
            except (TypeError, ValueError):
                out.append(math.nan)
        return np.asarray(out)

    def fin(x: np.ndarray) -> np.ndarray:
        return x[np.isfinite(x)]

    def g(x: float) -> str:
        return f"{x:.3g}"

    ev: dict[str, Any] = {"steps": len(rows)}
    loss = col("loss")
    bad = np.flatnonzero(~np.isfinite(loss) & np.array(["loss" in r for r in rows]))
    if fin(loss).size:
        f = fin(loss)
        ev["loss"] = f"first {g(f[0])} min {g(f.min())} last {g(f[-1])}"
    if bad.size:
        ev["first_nonfinite_loss"] = int(rows[bad[0]]["step"])
    for name, q in (
        ("grad_norm", (50, 99)),
        ("update_ratio", (50,)),
        ("frozen_frac", (50,)),
        ("eps_dominated", (50,)),
        ("act_absmax", (50, 100)),
        ("input_absmax", (100,)),
        ("label_ignored_frac", (50,)),
    ):
        x = fin(col(name))
        if x.size:
            ev[name] = " ".join(f"p{p} {g(np.percentile(x, p))}" for p in q)
    gn = col("grad_norm")
    if np.any(~np.isfinite(gn) & np.array(["grad_norm" in r for r in rows])):
        ev["grad_norm_nonfinite_steps"] = int(np.sum(~np.isfinite(gn) & np.array(["grad_norm" in r for r in rows])))
    lr = fin(col("lr"))
    if lr.size:
        ev["lr"] = f"first {g(lr[0])} max {g(lr.max())} min {g(lr.min())} last {g(lr[-1])}"
    sc = fin(col("scale"))
    if sc.size:
        ev["scale"] = f"first {g(sc[0])} min {g(sc.min())} last {g(sc[-1])}"
    sk = fin(col("skipped"))
    if sk.size and sk.sum():
        ev["skipped"] = f"{int(sk.sum())}/{sk.size}"
    for key in (
        "fwd_first_nonfinite",
        "bwd_first_nonfinite",
        "batch_nonfinite_detail",
        "label_empty_sample_ids",
        "mask_empty_sample_ids",
    ):
        hit = next((r for r in rows if r.get(key)), None)
        if hit is not None:
            v = hit[key]
            if isinstance(v, dict):
                v = {k: v[k] for k in ("layer", "module", "where", "value") if k in v} or v
            ev[key] = f"step {hit['step']}: {json.dumps(v)}"
    return ev
