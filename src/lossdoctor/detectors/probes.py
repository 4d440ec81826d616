"""What the LR probe measured (probe records, `probes/probe-<cause>.json`, written by
triage/lr_probe.py), folded into the findings; and what `watch` announced live that the final
diagnosis no longer holds, said with the reason.

A probe record of an LR finding either confirms it (a replay at a lower, or higher, LR beat the
recorded one: that LR becomes the fix, verified, with the losses of every LR tried side by side),
withdraws it (no LR tried beat the recorded one: the finding goes, a note says so with the same
losses), or could not run (the finding stays, said with why: its fix stays a range). A probe of a
plateau finding's own fixes gives them verdicts like an incident's verification. Torch-free.
"""

from __future__ import annotations

from typing import Any

from ..findings import Finding, Fix, as_fix, describe_fix
from ..messages import Msg, round_sig
from ..records import Run
from .fix_kinds import order_by_verdict

LR_CAUSES = ("lr_too_high", "lr_too_low")
#: a finding whose fix a replay verified is held at least this confident (the confirmed LR's too):
#: a measured improvement outranks a cause only the curve's shape suggests, so a look-alike at the
#: detectors' usual 0.75-0.8 no longer ties with it
VERIFIED_CONFIDENCE = 0.85


def probe_records(run: Run) -> list[dict[str, Any]]:
    return [
        r
        for r in run.incidents or []
        if isinstance(r, dict)
        and r.get("level") == "probe"
        and isinstance(r.get("probe"), dict)
        and isinstance(r.get("cause"), str)
    ]


def apply_probes(findings: list[Finding], run: Run, notes: list[str]) -> list[Finding]:
    out = list(findings)
    for rec in probe_records(run):
        cause, probe = rec["cause"], rec["probe"]
        targets = [f for f in out if f.cause == cause and f.symptom != "nonfinite"]
        status = probe.get("status")
        if status != "checked":
            why = Msg.from_data(probe.get("note_data")) or Msg("probe.reason.unknown")
            for f in targets:
                f.evidence.append(Msg("probe.none" if status == "no_probe" else "probe.no_verdict", reason=why))
            continue
        if cause in LR_CAUSES:
            out = _lr_verdict(out, targets, rec, notes)
        else:
            for f in targets:
                _state_verdicts(f, probe)
    return out


def _trial_table(probe: dict[str, Any]) -> list[Msg]:
    ctl = probe.get("control") or {}
    rows = [Msg("probe.trial_now", lr=_num(ctl.get("lr")), loss=_num(ctl.get("loss")))]
    for t in probe.get("trials") or []:
        if isinstance(t, dict) and t.get("kind") == "lr":
            rows.append(Msg("probe.trial", lr=_num(t.get("lr")), loss=_num(t.get("loss"))))
    return rows


def _num(x: Any) -> float:
    return float(x) if isinstance(x, (int, float)) and not isinstance(x, bool) else float("nan")


def _beaten(probe: dict[str, Any]) -> list[dict[str, Any]]:
    """The trials that beat the current LR (verified, with their LR and loss)."""
    return [
        t
        for t in probe.get("trials") or []
        if isinstance(t, dict)
        and t.get("verdict") == "verified"
        and isinstance(t.get("lr"), (int, float))
        and isinstance(t.get("loss"), (int, float))
    ]


def withdrawn_causes(run: Run) -> set[str]:
    """The causes the LR probe withdrew: lr_too_high checked by replay, no lower LR beating it. Read
    from the probe records (data), so no later rule of the engine brings the cause back."""
    return {
        rec["cause"]
        for rec in probe_records(run)
        if rec["cause"] == "lr_too_high" and rec["probe"].get("status") == "checked" and not _beaten(rec["probe"])
    }


def _lr_verdict(out: list[Finding], targets: list[Finding], rec: dict[str, Any], notes: list[str]) -> list[Finding]:
    probe = rec["probe"]
    start, end = probe.get("from_step"), probe.get("to_step")
    table = Msg("probe.losses", trials=_trial_table(probe), start=start, end=end)
    beaten = _beaten(probe)
    if not beaten and rec["cause"] == "lr_too_high":
        # nothing lower trained better: the LR was not too high, the finding is withdrawn (said,
        # with the losses), rather than advising an LR that trains worse
        notes.append(Msg("probe.withdrawn", cause=rec["cause"], step=rec.get("step"), losses=table))
        return [f for f in out if f not in targets]
    if not beaten:
        # too low: a few dozen steps at x3/x10 of a crawling LR may not move either; the finding
        # (tiny updates measured) stays, its fix a range to try and the losses said, never a point
        for f in targets:
            f.fixes = [x for x in f.fixes if as_fix(x).kind != "lr"] or f.fixes
            if all(as_fix(x).kind == "lr" for x in f.fixes):
                f.fixes = [_range_up(f, probe)]
            f.evidence.append(Msg("probe.not_beaten", losses=table))
        return out
    if not targets:  # announced live and confirmed by replay: it stands although the curve recovered
        try:
            found = Finding.from_dict(rec["finding"])
        except (TypeError, ValueError, KeyError):
            return out
        out.append(found)
        targets = [found]
    best = min(beaten, key=lambda t: t["loss"])
    best = {**best, "lr": round_sig(float(best["lr"]), 2)}
    now = _num((probe.get("control") or {}).get("lr"))
    ctl = _num((probe.get("control") or {}).get("loss"))
    fix = Fix.lr(
        Msg("lr.fix.probed", lr=float(best["lr"]), now=now, loss=float(best["loss"]), unfixed=ctl),
        to=float(best["lr"]),
        now=now,
    )
    check = {
        "fix": 0,
        "kind": "lr",
        "verdict": "verified",
        "step": start,
        "lr": float(best["lr"]),
        "steps_after": (end - start) if isinstance(end, int) and isinstance(start, int) else None,
        "loss_after": float(best["loss"]),
        "loss_before": ctl,
        "probe": True,
        "sentence": Msg(
            "probe.verified", lr=float(best["lr"]), loss=float(best["loss"]), now=now, unfixed=ctl, start=start, end=end
        ),
    }
    for f in targets:
        kept = [x for x in f.fixes if as_fix(x).kind not in ("lr", "lr_range")]  # the measured LR replaces them
        f.fixes = [fix, *kept]
        f.fix_checks = [dict(check, sentence_data=check["sentence"].data())]
        f.evidence.append(table)
        f.confidence = max(f.confidence, VERIFIED_CONFIDENCE)
    return out


def _range_up(f: Finding, probe: dict[str, Any]) -> Fix:
    now = _num((probe.get("control") or {}).get("lr"))
    lo, hi = round_sig(3 * now, 2), round_sig(30 * now, 2)
    return Fix.lr_range(Msg("lr.fix.range_up", lo=lo, hi=hi, now=now), lo=lo, hi=hi, now=now)


def _state_verdicts(f: Finding, probe: dict[str, Any]) -> None:
    """The verdicts of a plateau finding's own fixes (kept by their index in its fixes)."""
    ctl = _num((probe.get("control") or {}).get("loss"))
    checks = list(f.fix_checks or [])
    for t in probe.get("trials") or []:
        i = t.get("index") if isinstance(t, dict) else None
        if not isinstance(i, int) or not 0 <= i < len(f.fixes) or any(c.get("fix") == i for c in checks):
            continue
        if t.get("kind") != as_fix(f.fixes[i]).kind:  # a trial of another finding's fix list
            continue
        s = Msg(
            "probe.tried",
            fix=describe_fix(as_fix(f.fixes[i])),
            loss=_num(t.get("loss")),
            unfixed=ctl,
            start=probe.get("from_step"),
            end=probe.get("to_step"),
        )
        checks.append(
            {
                "fix": i,
                "kind": t.get("kind"),
                "verdict": t.get("verdict"),
                "sentence": s,
                "sentence_data": s.data(),
                "loss_after": t.get("loss"),
                "loss_before": ctl,
                "probe": True,
            }
        )
    if checks:
        f.fix_checks = checks
        order_by_verdict(f)
    if any(c.get("probe") and c.get("verdict") == "verified" for c in checks):
        f.confidence = max(f.confidence, VERIFIED_CONFIDENCE)


def withdrawn_notes(
    run: Run, findings: list[Finding], notes: list[str], explains: dict[str, tuple[str, ...]] | None = None
) -> None:
    """Each cause `watch` announced live (findings.jsonl) that the final diagnosis does not hold,
    with the reason: a probe withdrew it (its own note), another cause explains it, or the rest of
    the run no longer shows it (the loss then and at the end)."""
    have = {f.cause for f in findings}
    probed = withdrawn_causes(run)  # said in their own note already
    seen: set[str] = set()
    for d in run.live_findings or []:
        cause = d.get("cause") if isinstance(d, dict) else None
        if not isinstance(cause, str) or cause in have or cause in probed or cause in seen:
            continue
        seen.add(cause)
        step = d.get("step") if isinstance(d.get("step"), int) else None
        by = next((f.cause for f in findings if cause in (explains or {}).get(f.cause, ())), None)
        if by is not None:  # a cause the final diagnosis holds explains it (engine.EXPLAINS)
            why = Msg("withdrawn.explained", by=by)
        else:
            why = Msg("withdrawn.not_shown", then=_loss_at(run, step), last=_last_loss(run))
        notes.append(
            Msg(
                "withdrawn.live",
                cause=cause,
                step=step if step is not None else "?",
                severity=str(d.get("severity", "")),
                why=why,
            )
        )


def _loss_at(run: Run, step: int | None) -> float:
    import numpy as np

    if step is None or not run.has("loss"):
        return float("nan")
    i = np.flatnonzero(run.steps == step)
    return float(run.col("loss")[i[0]]) if i.size else float("nan")


def _last_loss(run: Run) -> float:
    import numpy as np

    if not run.has("loss"):
        return float("nan")
    x = run.col("loss")
    x = x[np.isfinite(x)][-20:]
    return float(np.median(x)) if x.size else float("nan")
