"""Incident triage: rewind, replay, reproduce, isolate the batch and sample, find the first layer and op.

    ring.py       SnapshotRing: every K steps a snapshot of model/optimizer/scaler/scheduler/RNG,
                  every step the batch (host copy, or a fingerprint past the memory budget), the
                  forward's RNG state, the optimizer's hyper-parameters and clipping factor
    state.py      snapshots, RNG, scratch workspace (deep copy without the monitor's hooks) or
                  in-place workspace restored bit for bit
    replay.py     replay recorded steps, compare with the logged losses, try a batch on a state
    optrace.py    OpTracer (TorchDispatchMode): first op whose output went non-finite, forward and
                  backward, with its module and input/output statistics
    samples.py    bisection of a batch for the samples that break a step; per-sample spike losses
    classify.py   op-level evidence -> cause, evidence sentences, fixes
    localize.py   `lossdoctor.localize(model, batch, loss_fn)`
    incident.py   Triage: what the monitor owns; on_incident policies, the LR probe's schedule
    trigger.py    which step record starts an incident (non-finite, scale collapse, loss spike)
    flow.py       the flow on one incident: replay, reproduce, localise, batch vs state
    record.py     IncidentRecord: what the flow found, as `incidents/step-N.json` has it
    fix_verifier.py  when an incident's fixes are replayed, and where the verdicts go
    explain.py    the findings of an incident record and the sentences of their evidence
    policy.py     the "skip" policy's optimizer hooks
    verify.py     verified fixes: replay from the snapshot through the incident and a window after it,
                  unfixed and once per candidate fix (LR, clipping, samples dropped, batch skipped)

Torch is required here; the offline path reads incident records through `detectors.incident_merge`.
"""
