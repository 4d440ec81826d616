"""Which rank a non-finite value began on.

Data-parallel training mixes the ranks' gradients: DDP averages them, so one rank's NaN sample
makes every rank's gradient NaN in the same step, and every rank's weights NaN after it. Each
rank's detectors see "training went non-finite at step s" and explain it as best they can from
their own run (a rank without the bad sample might call it lr_too_high). Those are echoes.

What separates the origin from an echo is *local* evidence: signals measured on a rank before the
ranks' numbers were combined. The loss, the batch check, the forward activations and the
backward activation gradients are always local; under DDP so are the per-parameter gradient
flags and `grad_norm_local` (taken before the all-reduce). A rank whose first local non-finite
signal comes after step s, while another rank's came at or before s, received its step-s blow-up
from that rank: its non-finite findings at s are dropped and the origin's finding says so.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

import numpy as np

from ..findings import Finding
from ..messages import Msg
from ..records import Run


@dataclass(frozen=True)
class RankLimits:
    #: a finding whose non-finite step this rank's own (pre-reduction) gradient did not share keeps
    #: this share of its confidence: the run did break, but the explanation belongs to another rank
    #: (halved: it then ranks below the origin rank's own findings; rule of thumb, untuned)
    echo_confidence: float = 0.5


LIMITS = RankLimits()


def local_onset(run: Run) -> int | None:
    """First step whose signals, measured on this rank alone, went non-finite."""
    bad = np.zeros(len(run), dtype=bool)
    loss = run.col("loss")
    bad |= run.logged("loss") & ~np.isfinite(loss)
    if run.has("batch_nonfinite"):
        bad |= np.nan_to_num(run.col("batch_nonfinite")) > 0
    if _pre_reduction_grads(run):  # DDP: the rank's own gradient, before the all-reduce
        if run.has("grad_norm_local"):
            bad |= run.logged("grad_norm_local") & ~np.isfinite(run.col("grad_norm_local"))
        elif run.has("grad_nonfinite"):  # (with bucket views these may already be partly reduced)
            bad |= np.nan_to_num(run.col("grad_nonfinite")) > 0
    steps = [int(s) for s in np.asarray(run.steps)[bad]]
    for name in ("batch_nonfinite_detail", "fwd_first_nonfinite", "bwd_first_nonfinite"):
        steps.extend(int(s) for s in run.event(name))
    return min(steps) if steps else None


def _pre_reduction_grads(run: Run) -> bool:
    """Whether the run's gradient flags were measured before the ranks' gradients were combined:
    true under DDP and wherever the probe says so (`local_grads`: DeepSpeed, FSDP1's unsharded
    gradient hooks); FSDP2's shards are measured after the reduce-scatter."""
    dist = run.meta.get("distributed") if isinstance(run.meta, dict) else None
    return isinstance(dist, dict) and (dist.get("kind") == "ddp" or dist.get("local_grads") is True)


def drop_echoes(runs: list[Run], per_rank: list[list[Finding]], notes: list[str] | None = None) -> list[list[Finding]]:
    """Per-rank findings without the non-finite findings a rank only received from another.

    With one rank of a multi-rank run (the live monitor sees only its own) the findings stay (the
    rank did break) but say so, at half confidence, when the rank's own gradient was measured
    finite before the all-reduce."""
    if len(runs) == 1:
        return [_drop_single(runs[0], per_rank[0], notes)]
    screened = runs[0].meta.get("rank_screen") if isinstance(runs[0].meta, dict) else None
    if isinstance(screened, dict) and notes is not None:
        notes.append(
            Msg(
                "distributed.screened_note",
                n=len(screened.get("ranks") or []),
                read=ranges(sorted(r.rank for r in runs if r.rank is not None)),
                others=len(screened.get("ranks") or []) - len(runs),
            )
        )
    onsets = [local_onset(r) for r in runs]
    known = [o for o in onsets if o is not None]
    if not known:
        return per_rank
    origin_step = min(known)
    origins = _first_in_forward(runs, [i for i, o in enumerate(onsets) if o == origin_step], origin_step)
    onsets = [o if i in origins or o != origin_step else None for i, o in enumerate(onsets)]
    out: list[list[Finding]] = []
    echoed: list[int] = []
    for i, (run, fs) in enumerate(zip(runs, per_rank)):
        if i in origins:
            out.append(fs)
            continue
        keep = [f for f in fs if not _echo(f, onsets[i], origin_step)]
        if len(keep) < len(fs) and run.rank is not None:
            echoed.append(run.rank)
        out.append(keep)
    if echoed:
        for i in origins:
            for f in out[i]:
                if f.symptom == "nonfinite" and f.step == origin_step:
                    f.evidence.append(_echo_msg(runs, echoed, origin_step, runs[i]))
    for i in origins:
        _say_stage(runs[i], out[i], origin_step)
    if isinstance(screened, dict):
        _screened_ranks(runs, out, origins, origin_step, screened)
    return out


def _first_in_forward(runs: list[Run], origins: list[int], step: int) -> list[int]:
    """Under tensor parallel the ranks' activations meet inside the forward (a row-parallel
    layer's all-reduce), so a NaN in one rank's shard reaches every rank at the same step: the
    origin is the rank whose first non-finite forward event comes earliest in the forward order
    (the ranks run the same modules in the same order). Elsewhere the ranks stay as they are."""
    if len(origins) >= 2 and all(_stage(runs[i]) is not None for i in origins):
        return _first_in_pipeline(runs, origins, step)
    if len(origins) < 2 or not all(_tensor_parallel(runs[i]) for i in origins):
        return origins
    order = {i: _forward_index(runs[i], step) for i in origins}
    first = min(order.values())
    return [i for i in origins if order[i] == first] if first != float("inf") else origins


def _stage(run: Run) -> int | None:
    """The pipeline stage a rank's run is (`meta["distributed"]["stage"]`), or None."""
    dist = run.meta.get("distributed") if isinstance(run.meta, dict) else None
    stage = dist.get("stage") if isinstance(dist, dict) else None
    return int(stage) if isinstance(stage, int) and not isinstance(stage, bool) else None


def _first_in_pipeline(runs: list[Run], origins: list[int], step: int) -> list[int]:
    """Pipeline stages pass activations forward (stage 0 to the last) and gradients backward
    within one step, so a NaN reaches the other stages in the step it began: the origin is the
    earliest stage whose forward went non-finite at that step; when no stage's forward did (it
    began in a backward), the latest stage whose backward did."""
    fwd = [i for i in origins if step in run_events(runs[i], "fwd_first_nonfinite")]
    if fwd:
        first = min(_stage(runs[i]) or 0 for i in fwd)
        return [i for i in fwd if _stage(runs[i]) == first]
    bwd = [i for i in origins if step in run_events(runs[i], "bwd_first_nonfinite")]
    if bwd:
        last = max(_stage(runs[i]) or 0 for i in bwd)
        return [i for i in bwd if _stage(runs[i]) == last]
    return origins


def run_events(run: Run, name: str) -> dict:
    ev = run.event(name)
    return ev if isinstance(ev, dict) else {}


def _tensor_parallel(run: Run) -> bool:
    dist = run.meta.get("distributed") if isinstance(run.meta, dict) else None
    if not isinstance(dist, dict):
        return False
    mesh = dist.get("mesh")
    return dist.get("kind") == "tp" or (isinstance(mesh, dict) and len(mesh) >= 2)


def _forward_index(run: Run, step: int) -> float:
    ev = run.event("fwd_first_nonfinite").get(step)
    index = ev.get("index") if isinstance(ev, dict) else None
    return float(index) if isinstance(index, (int, float)) else float("inf")


def _echo_msg(runs: list[Run], echoed: list[int], step: int, origin: Run) -> Msg:
    stages = {r.rank: _stage(r) for r in runs}
    if _stage(origin) is None or any(stages.get(r) is None for r in echoed):
        return Msg("distributed.echoed", ranks=ranges(echoed), step=step, rank=origin.rank)
    return Msg(
        "distributed.echoed_pp",
        ranks=ranges(echoed),
        stages=ranges([stages[r] for r in echoed]),
        step=step,
        rank=origin.rank,
    )


def _say_stage(run: Run, findings: list[Finding], step: int) -> None:
    """On a pipeline stage, or a rank of a device mesh (TP, FSDP2 x TP): the origin's non-finite
    findings at the step say the rank, its mesh coordinate (and stage) and the first bad layer
    there."""
    stage = _stage(run)
    dist = run.meta.get("distributed") if isinstance(run.meta, dict) else None
    coord = dist.get("coordinate") if isinstance(dist, dict) else None
    if stage is None and not isinstance(coord, dict):
        return
    coord = coord if isinstance(coord, dict) else {"pp": stage}
    coordinate = ", ".join(f"{k}={v}" for k, v in coord.items())
    for f in findings:
        if f.symptom != "nonfinite" or f.step != step:
            continue
        layer = f.layer or _event_layer(run, step) or "?"
        if stage is None:
            f.evidence.append(Msg("distributed.began_on_coordinate", rank=run.rank, coordinate=coordinate, layer=layer))
        else:
            f.evidence.append(
                Msg(
                    "distributed.began_on_stage",
                    rank=run.rank,
                    stage=stage,
                    stages=dist.get("num_stages", "?") if isinstance(dist, dict) else "?",
                    coordinate=coordinate,
                    layer=layer,
                )
            )


def _event_layer(run: Run, step: int) -> str | None:
    for name in ("fwd_first_nonfinite", "bwd_first_nonfinite"):
        ev = run_events(run, name).get(step)
        if isinstance(ev, dict) and ev.get("layer"):
            return str(ev["layer"])
    return None


def _screened_ranks(
    runs: list[Run], out: list[list[Finding]], origins: list[int], origin_step: int, screened: dict
) -> None:
    """A run directory of many ranks was screened, not read in full (`sources.rank_screen`): the
    origin's finding names the ranks that were not read, in ranges."""
    read = {r.rank for r in runs}
    onsets = {int(k): v for k, v in (screened.get("onsets") or {}).items()}
    others = [r for r in screened.get("ranks") or [] if r not in read]
    later = [r for r in others if onsets.get(r) is None or onsets[r] > origin_step]
    if later:
        for i in origins:
            for f in out[i]:
                if f.symptom == "nonfinite" and f.step == origin_step:
                    f.evidence.append(
                        Msg(
                            "distributed.screened_later",
                            n=len(later),
                            ranks=ranges(later),
                            step=origin_step,
                            rank=runs[i].rank,
                        )
                    )


def ranges(ranks: Iterable[int | None]) -> str:
    """[0, 1, 2, 5, 7, 8] -> "0-2, 5, 7-8": 511 ranks in a few characters, not 511 numbers (a
    None among them is skipped)."""
    rs = sorted({int(r) for r in ranks if r is not None})
    parts: list[str] = []
    i = 0
    while i < len(rs):
        j = i
        while j + 1 < len(rs) and rs[j + 1] == rs[j] + 1:
            j += 1
        parts.append(str(rs[i]) if i == j else f"{rs[i]}-{rs[j]}")
        i = j + 1
    return ", ".join(parts)


def _echo(f: Finding, own_onset: int | None, origin_step: int) -> bool:
    if f.symptom != "nonfinite" or f.step is None or f.step < origin_step:
        return False
    return own_onset is None or own_onset > f.step


def _drop_single(run: Run, findings: list[Finding], notes: list[str] | None) -> list[Finding]:
    if int(run.meta.get("world_size") or 1) <= 1 or not run.has("grad_norm_local") or not _pre_reduction_grads(run):
        return findings
    own = local_onset(run)
    gn = run.col("grad_norm_local")
    logged = run.logged("grad_norm_local")
    row = {int(s): i for i, s in enumerate(np.asarray(run.steps))}

    def echo(f: Finding) -> bool:
        if f.step is None:
            return False
        i = row.get(int(f.step))
        return (
            f.symptom == "nonfinite"
            and i is not None
            and bool(logged[i])
            and np.isfinite(gn[i])
            and (own is None or own > f.step)
        )

    echoes = [f for f in findings if echo(f)]
    for f in echoes:  # the run did break; only the explanation belongs to another rank
        f.confidence *= LIMITS.echo_confidence
        f.evidence.insert(0, Msg("ranks.own_gradient_finite", step=f.step))
    if echoes and notes is not None:
        notes.append(Msg("ranks.note_from_another_rank", step=echoes[0].step))
    return findings
