"""The findings of an incident record, and the sentences of their evidence.

Pure functions of what the incident flow measured (replay, op trace, samples, batch vs state);
kept apart from the flow itself so the wording can be read and changed in one place.
"""

from __future__ import annotations

import math
from typing import Any

from ..findings import Finding
from .localize import Localization
from .replay import ReplayResult
from .samples import SampleSearch

REPLAY_HINT = ("pass replay_fn=lambda model, batch: <the step's loss> to lossdoctor.watch to replay this step "
               "from the last snapshot, check that it reproduces, and name the operation and the sample(s)")


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


def verdict_sentence(step: int, bvs: dict[str, Any]) -> str | None:
    v = bvs.get("verdict")
    h = bvs.get("healthy_state_step")
    others = [o["step"] for o in bvs.get("other_batches", [])]
    if v == "batch":
        if not others:
            return (f"batch vs state: the batch of step {step} also breaks the earlier healthy state of step "
                    f"{h}: the batch is the trigger (no other recent batch was kept to test the state on)")
        return (f"batch vs state: the batch of step {step} also breaks the earlier healthy state of step {h}, "
                f"while the state before step {step} handles the other recent batches {others}: "
                "the batch is the trigger")
    if v == "state":
        return (f"batch vs state: the state before step {step} breaks on other batches too {others}"
                + (f", while this batch is fine on the state of step {h}" if h is not None else "")
                + ": the model state went bad, not the data (look at the LR, clipping, loss scale)")
    if v == "both":
        return (f"batch vs state: the batch breaks even the healthy state of step {h}, and the state before "
                f"step {step} breaks on other batches {others} as well")
    if v == "combination":
        return (f"batch vs state: neither this batch on the healthy state of step {h} nor this state on the "
                f"other batches {others} fails: only this batch on this state does (skip the batch and go on)")
    return None


def _closeness(rep: ReplayResult) -> str:
    d = rep.max_rel_dev()
    return "exactly" if d == 0 else f"to a relative {d:.1e}"


def _replay_sentence(step: int, rep: ReplayResult, reproduced: bool = True) -> str:
    n = len([s for s in rep.steps if s.step < step])
    if rep.reached and rep.start == step:
        base = f"replaying step {step} from the snapshot taken right before it"
    elif rep.reached:
        base = (f"replaying steps {rep.start}-{step} from the snapshot of step {rep.start} with the recorded "
                f"batches and RNG ({n} earlier losses matched the log " + _closeness(rep) + ")")
    else:
        base = f"running the batch of step {step} on an approximate state (step {rep.stopped_at})"
    return base + (" reproduces the failure: it is deterministic (data or numerics), not a hardware fault"
                   if reproduced else "")


def replay_finding(step: int, trig: dict[str, Any], rep: ReplayResult, loc: Localization,
                   bvs: dict[str, Any], exact: bool, live: dict[str, Any] | None = None) -> Finding:
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
        evidence.append("the op tracer found no op that made the value non-finite")
    conf = loc.confidence if loc.confidence else 0.6
    if not exact:
        conf *= 0.9
    return Finding(cause=cause, symptom="nonfinite", severity="critical", confidence=conf, step=step, batch=step,
                   layer=loc.layer, op=loc.op, samples=samples, evidence=evidence, fixes=fixes)


def nondeterministic_finding(step: int, trig: dict[str, Any], rep: ReplayResult, rec: dict[str, Any]) -> Finding:
    p = rep.target_probe
    what = "loss" if trig["kind"] == "nonfinite_loss" else "gradients"
    n = len([s for s in rep.steps if s.step < step])
    how = (f"steps {rep.start}-{step} from the snapshot of step {rep.start} with the same batches and RNG "
           f"({n} earlier losses matched the log {_closeness(rep)})" if n else
           f"step {step} from the snapshot taken right before it with the same batch and RNG")
    got = f" gives a finite loss ({p.loss:.6g}) and finite gradients" if p is not None else " does not fail"
    ev = [f"at step {step} the logged {what} went non-finite (loss {rec.get('loss')}), but replaying {how}{got}",
          "the same computation on the same inputs did not fail again: the fault is not in the data or the "
          "numerics, but in the hardware (a bit flip, a failing GPU), a race, or a non-deterministic kernel"]
    fwd = rec.get("fwd_first_nonfinite")
    layer = fwd.get("layer") if isinstance(fwd, dict) else None
    if layer:
        ev.append(f"in training the first non-finite forward output was in {layer}")
    return Finding(cause="nondeterministic_fault", symptom="nonfinite", severity="critical", confidence=0.85,
                   step=step, batch=step, layer=layer, evidence=ev,
                   fixes=["resume from the last checkpoint: the same data will very likely train through",
                          "if it recurs: run with torch.use_deterministic_algorithms(True) to rule out "
                          "non-deterministic kernels, and check the GPU's health (ECC errors in "
                          "nvidia-smi -q -d ECC, dcgmi diag)"])


def spike_finding(step: int, trig: dict[str, Any], rep: ReplayResult, search: SampleSearch | None,
                  bvs: dict[str, Any], rec: dict[str, Any]) -> Finding:
    from ..messages import fmt

    ev = [f"the loss jumped to {fmt(rec.get('loss', math.nan))} at step {step}, {fmt(trig['ratio'])}x the recent "
          f"median {fmt(trig['median'])} ({fmt(trig['z'])} robust sigmas)",
          _replay_sentence(step, rep, reproduced=True)]
    samples = None
    if search is not None:
        if search.samples:
            samples = search.samples
            top = ", ".join(f"sample {i}: {fmt(search.losses[i])}" for i in samples[:4] if i in search.losses)
            ev.append(f"per-sample losses: {top} vs a median of {fmt(search.median or math.nan)}")
        elif search.note:
            ev.append(search.note)
    vs = verdict_sentence(step, bvs)
    if vs:
        ev.append(vs)
    fixes = []
    if samples:
        fixes.append(f"inspect samples {samples[:8]} of the batch of step {step} (mislabelled, corrupt or "
                     "out-of-distribution?) and filter them")
    if bvs.get("verdict") in ("state", "both"):
        fixes.append("lower the peak LR or clip gradients (clip_grad_norm_ 1.0); for transformers add "
                     "QK-layernorm or a z-loss of 1e-4")
    else:
        fixes.append("skip that batch (on_incident='skip' rolls back and skips it), as PaLM did for its spikes")
    return Finding(cause="loss_spike", symptom="spike", severity="critical", confidence=0.85, step=step,
                   batch=step, samples=samples, evidence=ev, fixes=fixes)


def live_findings(step: int, trig: dict[str, Any], rec: dict[str, Any], record: dict[str, Any]) -> list[Finding]:
    """The layer-level answer from the live flags, and what replay would add."""
    from ..detectors.nonfinite import ATTENTION

    notes = record.get("notes", [])
    why = notes[0] if notes else ""
    add = REPLAY_HINT if "no replay_fn" in why else (why + "; " if why else "") + \
        "replay would confirm the failure reproduces and name the operation and the sample(s)"
    if trig["kind"] == "scale_collapse":
        return []  # the detectors read the scale's curve; without a trace there is nothing to add
    if trig["kind"] == "loss_spike":
        from ..messages import fmt

        return [Finding(cause="loss_spike", symptom="spike", severity="critical", confidence=0.6, step=step,
                        batch=step, evidence=[f"the loss jumped to {fmt(rec.get('loss', math.nan))} at step {step}, "
                                              f"{fmt(trig['ratio'])}x the recent median {fmt(trig['median'])}", add],
                        fixes=["inspect the batch of this step; lower the LR or clip gradients if spikes recur"])]
    detail = rec.get("batch_nonfinite_detail")
    fwd = rec.get("fwd_first_nonfinite") if isinstance(rec.get("fwd_first_nonfinite"), dict) else None
    bwd = rec.get("bwd_first_nonfinite") if isinstance(rec.get("bwd_first_nonfinite"), dict) else None
    empty = rec.get("mask_empty_sample_ids")
    layer = fwd.get("layer") if fwd else (bwd.get("layer") if bwd else None)
    samples = None
    ev = []
    if isinstance(detail, dict) and detail:
        cause = "nonfinite_data"
        samples = sorted({int(i) for v in detail.values() for i in v})
        ev.append(f"the batch holds NaN/Inf in {', '.join(map(repr, detail))}: sample(s) {samples[:16]}")
    elif fwd and (ATTENTION.search(layer or "") or empty):
        cause = "attention_overflow"
        samples = [int(i) for i in empty] if empty else None
        ev.append(f"the first non-finite forward output ({fwd.get('value')}) came from {layer}"
                  + (f"; sample(s) {samples} are all padding" if samples else ""))
    elif fwd:
        cause = "activation_overflow"
        ev.append(f"the first non-finite forward output ({fwd.get('value')}) came from {layer}")
    elif rec.get("label_tokens") == 0:
        cause = "label_mask_empty"
        ev.append("every label of the batch is the ignore index")
    elif bwd:
        cause = "grad_explosion"
        ev.append(f"forward stayed finite; the first non-finite gradient in backward order was at {layer}")
    elif trig["kind"] == "nonfinite_loss":
        cause = "activation_overflow"
        ev.append("every module output was finite but the loss is not: the loss computation made it non-finite")
    else:
        cause = "grad_explosion"
        params = rec.get("nonfinite_params") or []
        ev.append(f"gradients went non-finite ({', '.join(params[:4])})")
    ev.append(add)
    return [Finding(cause=cause, symptom="nonfinite", severity="critical", confidence=0.6, step=step, batch=step,
                    layer=layer, samples=samples, evidence=ev,
                    fixes=["run lossdoctor.localize(model, batch, loss_fn) on this step's batch for the op and "
                           "the sample(s), or pass replay_fn= to lossdoctor.watch to have it done automatically"])]
