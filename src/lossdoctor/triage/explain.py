"""The findings of an incident record, and the sentences of their evidence.

Pure functions of what the incident flow measured (replay, op trace, samples, batch vs state);
kept apart from the flow itself so the wording can be read and changed in one place.
"""

from __future__ import annotations

import math
from typing import Any

from ..findings import Finding, Fix, FixLike, as_fixes
from ..messages import Msg
from .localize import Localization
from .replay import ReplayResult
from .samples import SampleSearch

REPLAY_HINT = Msg("triage.live.hint")


def _ids(ids: list[int]) -> Msg:
    """Sample ids (and steps) as the records show them: [3, 7]."""
    return Msg("triage.ids", ids=list(ids))


def verdict(batch_breaks: bool | None, state_breaks: bool | None) -> str | None:
    if batch_breaks is None and state_breaks is None:
        return None
    if batch_breaks and not state_breaks:
        return "batch"
    if state_breaks and not batch_breaks:
        return "state"
    if batch_breaks and state_breaks:
        return "both"
    if batch_breaks is False and state_breaks is False:
        return "combination"
    return None


def verdict_sentence(step: int, bvs: dict[str, Any]) -> Msg | None:
    v = bvs.get("verdict")
    h = bvs.get("healthy_state_step")
    others = _ids([o["step"] for o in bvs.get("other_batches", [])])
    if v == "batch":
        if not others.values["ids"]:
            return Msg("triage.bvs.batch_alone", step=step, healthy=h)
        return Msg("triage.bvs.batch", step=step, healthy=h, others=others)
    if v == "state":
        fine = Msg("triage.bvs.state_fine", healthy=h) if h is not None else ""
        return Msg("triage.bvs.state", step=step, others=others, fine=fine)
    if v == "both":
        return Msg("triage.bvs.both", healthy=h, step=step, others=others)
    if v == "combination":
        return Msg("triage.bvs.combination", healthy=h, others=others)
    return None


def _closeness(rep: ReplayResult) -> Msg:
    d = rep.max_rel_dev()
    return Msg("triage.replay.exactly") if d == 0 else Msg("triage.replay.relative", dev=d)


def _replay_sentence(step: int, rep: ReplayResult, reproduced: bool = True) -> Msg:
    n = len([s for s in rep.steps if s.step < step])
    tail = Msg("triage.replay.reproduces") if reproduced else ""
    if rep.reached and rep.start == step:
        return Msg("triage.replay.right_before", step=step, tail=tail)
    if rep.reached:
        return Msg("triage.replay.from", start=rep.start, step=step, n=n, close=_closeness(rep), tail=tail)
    return Msg("triage.replay.approx", step=step, at=rep.stopped_at, tail=tail)


def replay_finding(
    step: int,
    trig: dict[str, Any],
    rep: ReplayResult,
    loc: Localization,
    bvs: dict[str, Any],
    exact: bool,
    live: dict[str, Any] | None = None,
) -> Finding:
    cause = loc.cause
    samples = loc.samples
    if cause == "label_mask_empty" and not samples and live and live.get("label_empty_sample_ids"):
        # every sample breaks the step on its own, so bisection names none; the batch probe knows
        # exactly which samples have no supervised token
        samples = [int(i) for i in live["label_empty_sample_ids"]]
    evidence = list(loc.evidence)
    evidence.insert(min(2, len(evidence)), _replay_sentence(step, rep))
    vs = verdict_sentence(step, bvs)
    if vs:
        evidence.append(vs)
    fixes = list(loc.fixes)
    if cause is None:
        cause = "grad_explosion" if trig["kind"] == "nonfinite_grad" else "activation_overflow"
        evidence.append(Msg("triage.replay.no_op"))
    conf = loc.confidence if loc.confidence else 0.6
    if not exact:
        conf *= 0.9
    search = loc.sample_search
    examples = search.examples if search is not None and samples == loc.samples else None  # packed rows
    return _op_finding("triage.replay", step, loc, cause, conf, samples, evidence, fixes, examples)


def _op_finding(
    rule: str,
    step: int,
    loc: Localization,
    cause: str,
    conf: float,
    samples: Any,
    evidence: list[Any],
    fixes: list[FixLike],
    examples: list[dict[str, Any]] | None = None,
) -> Finding:
    """The critical non-finite finding a replay that located the op makes (whole model or one
    pipeline stage): the layer, op and code come from the localization, the rest from the caller."""
    return Finding(
        rule=rule,
        cause=cause,
        symptom="nonfinite",
        severity="critical",
        confidence=conf,
        step=step,
        batch=step,
        layer=loc.layer,
        op=loc.op,
        samples=samples,
        evidence=evidence,
        fixes=as_fixes(fixes),
        examples=examples,
        code=loc.code,
    )


def _nondeterministic(step: int, rec: dict[str, Any], ev: list[str]) -> Finding:
    """The finding of a faithful replay that stayed finite (whole model or one pipeline stage), with
    the layer the live forward first went non-finite at when the record has it: the same verdict and
    fixes whichever replay made it."""
    fwd = rec.get("fwd_first_nonfinite")
    layer = fwd.get("layer") if isinstance(fwd, dict) else None
    if layer:
        ev.append(Msg("triage.nondet.layer", layer=layer))
    return Finding(
        rule="triage.nondeterministic",
        cause="nondeterministic_fault",
        symptom="nonfinite",
        severity="critical",
        confidence=0.85,
        step=step,
        batch=step,
        layer=layer,
        evidence=ev,
        fixes=as_fixes([Msg("triage.nondet.fix_resume"), Msg("triage.nondet.fix_recurs")]),
    )


def nondeterministic_finding(step: int, trig: dict[str, Any], rep: ReplayResult, rec: dict[str, Any]) -> Finding:
    p = rep.target_trial
    what = Msg("triage.what.loss") if trig["kind"] == "nonfinite_loss" else Msg("triage.what.gradients")
    n = len([s for s in rep.steps if s.step < step])
    how = (
        Msg("triage.nondet.how_from", start=rep.start, step=step, n=n, close=_closeness(rep))
        if n
        else Msg("triage.nondet.how_right_before", step=step)
    )
    got = Msg("triage.nondet.finite", loss=p.loss) if p is not None else Msg("triage.nondet.no_fail")
    # the logged loss as the record holds it (nan, inf), not rounded
    ev: list[str] = [
        Msg("triage.nondet.replayed", step=step, what=what, loss=str(rec.get("loss")), how=how, got=got),
        Msg("triage.nondet.not_data"),
    ]
    return _nondeterministic(step, rec, ev)


def spike_finding(
    step: int,
    trig: dict[str, Any],
    rep: ReplayResult,
    search: SampleSearch | None,
    bvs: dict[str, Any],
    rec: dict[str, Any],
) -> Finding:
    ev: list[str] = [
        Msg(
            "triage.spike.jumped",
            loss=float(rec.get("loss", math.nan)),
            step=step,
            ratio=float(trig["ratio"]),
            median=float(trig["median"]),
            z=float(trig["z"]),
        ),
        _replay_sentence(step, rep, reproduced=True),
    ]
    samples, said = _search_sentences(search)
    ev += said
    vs = verdict_sentence(step, bvs)
    if vs:
        ev.append(vs)
    fixes: list[FixLike] = []
    if samples:
        fixes.append(Fix.drop(Msg("triage.spike.fix_inspect", ids=_ids(samples[:8]), step=step)))
    if bvs.get("verdict") in ("state", "both"):
        fixes.append(Fix.clip(Msg("triage.spike.fix_state"), max_norm=1.0))  # says clip_grad_norm_(..., 1.0)
    else:
        fixes.append(Fix.skip(Msg("triage.spike.fix_skip")))
    examples = (
        [{k: e[k] for k in ("row", "example", "start", "end")} for e in search.examples]
        if samples and search is not None and search.examples
        else None
    )
    return Finding(
        rule="triage.spike",
        cause="loss_spike",
        symptom="spike",
        severity="critical",
        confidence=0.85,
        step=step,
        batch=step,
        samples=samples,
        evidence=ev,
        fixes=as_fixes(fixes),
        examples=examples,
    )


def _search_sentences(search: SampleSearch | None) -> tuple[list[int] | None, list[str]]:
    """What the sample search found for a spike: the samples (or packed examples) with the highest
    losses and the sentence that names them, or its note when it found none. Apart from
    `spike_finding` to keep it short."""
    samples = None
    ev: list[str] = []
    if search is not None:
        if search.samples and search.examples:  # packed rows: the examples inside them
            samples = search.samples
            top = [
                Msg(
                    "triage.spike.example_loss",
                    row=e["row"],
                    example=e["example"],
                    start=e["start"],
                    end=e["end"],
                    loss=float(e.get("loss", math.nan)),
                )
                for e in search.examples[:4]
            ]
            ev.append(Msg("triage.spike.per_example", top=top, median=float(search.median or math.nan)))
        elif search.samples:
            samples = search.samples
            top = [
                Msg("triage.spike.sample_loss", i=i, loss=float(search.losses[i]))
                for i in samples[:4]
                if i in search.losses
            ]
            ev.append(Msg("triage.spike.per_sample", top=top, median=float(search.median or math.nan)))
        elif search.note:
            ev.append(search.note)
    return samples, ev


def live_findings(step: int, trig: dict[str, Any], rec: dict[str, Any], notes: list[str]) -> list[Finding]:
    """The layer-level answer from the live flags, and what replay would add (`notes`: the incident
    record's, the first saying why there was no replay)."""
    why = notes[0] if notes else ""
    add = (
        REPLAY_HINT
        if getattr(why, "key", None) == "triage.note.no_replay_fn"
        else Msg("triage.live.why_would", why=why)
        if why
        else Msg("triage.live.would")
    )
    if trig["kind"] == "scale_collapse":
        return []  # the detectors read the scale's curve; without a trace there is nothing to add
    if trig["kind"] == "loss_spike":
        jumped = Msg(
            "triage.spike.jumped_live",
            loss=float(rec.get("loss", math.nan)),
            step=step,
            ratio=float(trig["ratio"]),
            median=float(trig["median"]),
        )
        return [
            Finding(
                rule="triage.live_spike",
                cause="loss_spike",
                symptom="spike",
                severity="critical",
                confidence=0.6,
                step=step,
                batch=step,
                evidence=[jumped, add],
                fixes=as_fixes([Msg("triage.spike.fix_live")]),
            )
        ]
    cause, layer, samples, ev = _live_nonfinite(trig, rec)
    ev.append(add)
    return [
        Finding(
            rule="triage.live",
            cause=cause,
            symptom="nonfinite",
            severity="critical",
            confidence=0.6,
            step=step,
            batch=step,
            layer=layer,
            samples=samples,
            evidence=ev,
            fixes=as_fixes([Msg("triage.live.fix")]),
        )
    ]


def _live_nonfinite(trig: dict[str, Any], rec: dict[str, Any]) -> tuple[str, str | None, list[int] | None, list[str]]:
    """A non-finite step's cause from the live flags alone, first that holds: non-finite data, the
    forward (attention, with the samples whose mask is empty, or another layer), empty labels, the
    backward, the loss's own code, else the gradients. Returns the cause, its layer, samples and
    evidence. Apart from `live_findings` to keep it short."""
    from ..detectors.nonfinite import ATTENTION

    detail = rec.get("batch_nonfinite_detail")
    fwd = rec.get("fwd_first_nonfinite") if isinstance(rec.get("fwd_first_nonfinite"), dict) else None
    bwd = rec.get("bwd_first_nonfinite") if isinstance(rec.get("bwd_first_nonfinite"), dict) else None
    empty = rec.get("mask_empty_sample_ids")
    layer = fwd.get("layer") if fwd else (bwd.get("layer") if bwd else None)
    samples = None
    ev: list[str] = []
    if isinstance(detail, dict) and detail:
        cause = "nonfinite_data"
        samples = sorted({int(i) for v in detail.values() for i in v})
        ev.append(Msg("triage.live.data", keys=[repr(k) for k in detail], ids=_ids(samples[:16])))
    elif fwd and (ATTENTION.search(layer or "") or empty):
        cause = "attention_overflow"
        samples = [int(i) for i in empty] if empty else None
        padding = Msg("triage.live.padding", ids=_ids(samples)) if samples else ""
        ev.append(Msg("triage.live.forward", value=str(fwd.get("value")), layer=str(layer), padding=padding))
    elif fwd:
        cause = "activation_overflow"
        ev.append(Msg("triage.live.forward", value=str(fwd.get("value")), layer=str(layer), padding=""))
    elif rec.get("label_tokens") == 0:
        cause = "label_mask_empty"
        ev.append(Msg("triage.live.labels"))
    elif bwd:
        cause = "grad_explosion"
        ev.append(Msg("triage.live.backward", layer=str(layer)))
    elif trig["kind"] == "nonfinite_loss":
        cause = "activation_overflow"
        ev.append(Msg("triage.live.loss_code"))
    else:
        cause = "grad_explosion"
        params = rec.get("nonfinite_params") or []
        ev.append(Msg("triage.live.grads", params=[str(x) for x in params[:4]]))
    return cause, layer, samples, ev


# --- a pipeline stage replayed alone (stage_flow.py) ------------------------------------------------


def _stage_replay_sentence(step: int, rep: Any, stage: Any) -> Msg:
    """How the stage was replayed: from a snapshot right before the step, through the steps after
    the snapshot, or up to a step whose tape was not kept (then an approximation)."""
    where = {"stage": stage.index, "stages": stage.n_stages, "step": step}
    if rep.reached and rep.start == step:
        return Msg("triage.stage.right_before", **where)
    if rep.reached:
        return Msg("triage.stage.replayed_from", start=rep.start, n=len(rep.steps), close=_closeness(rep), **where)
    return Msg("triage.stage.replayed_approx", at=rep.stopped_at, **where)


def _micro_batch_sentence(at: Any) -> Msg:
    """Which micro-batch of the step broke, where it sits in the step's batch, and its samples (the
    tracer's and the bisection's sentences count samples within the micro-batch)."""
    within = Msg("triage.stage.within", local=list(at.local), ids=list(at.samples or [])) if at.local else ""
    last = at.first + at.size - 1 if at.size else at.first
    return Msg("triage.stage.micro_batch", micro=at.micro, n=at.micro_batches, first=at.first, last=last, within=within)


def _forward_probes(sentence: Any) -> Any:
    """The bisection's sentence as a stage's replay ran it: forward probes of the micro-batch."""
    if getattr(sentence, "key", None) == "triage.samples.isolated":
        return Msg("triage.stage.isolated", **sentence.values)
    return sentence


def stage_finding(step: int, rep: Any, loc: Localization, at: Any, stage: Any) -> Finding:
    """The replay of one pipeline stage found the first non-finite op of the failing step's forward:
    the finding names the layer, the op, and the samples in the step's batch; its evidence says the
    stage and the micro-batch."""
    evidence = [_forward_probes(e) for e in loc.evidence]
    evidence.insert(min(2, len(evidence)), _stage_replay_sentence(step, rep, stage))
    evidence.insert(min(3, len(evidence)), _micro_batch_sentence(at))
    cause = loc.cause
    if cause is None:
        cause = "activation_overflow"
        evidence.append(Msg("triage.replay.no_op"))
    conf = (loc.confidence or 0.6) * (1.0 if rep.reached else 0.9)
    return _op_finding("triage.stage_replay", step, loc, cause, conf, at.samples, evidence, list(loc.fixes))


def stage_nondeterministic_finding(
    step: int, trig: dict[str, Any], rep: Any, rec: dict[str, Any], stage: Any, micro: int
) -> Finding:
    """A faithful replay of the stage whose forward of the failing step stays finite: the stage's
    weights and inputs did not make the value non-finite."""
    ev: list[str] = [
        Msg(
            "triage.stage.nondet",
            stage=stage.index,
            stages=stage.n_stages,
            start=rep.start,
            step=step,
            n=len(rep.steps),
            close=_closeness(rep),
            micro=micro,
        ),
        Msg("triage.nondet.not_data"),
    ]
    return _nondeterministic(step, rec, ev)
