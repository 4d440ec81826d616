"""The live half: what `lossdoctor.watch` runs inside a training process.

    monitor.py    Monitor / watch: the probe loop, one packed copy per step, triage, the run log
    diagnoser.py  LiveDiagnoser: the offline engine on the history so far; the stderr alerts
    options.py    WatchOptions: watch's keyword options as one checked value
    runlog.py     RunLogWriter: appends the run directory that `sources.rundir` reads

It sits above the reasoning it uses (signals, sources, detectors, preflight, triage) and below the
integrations that start it; nothing under it is imported by the offline half. This file imports
nothing, so `lossdoctor.live.diagnoser` (the alerts, used by the console reader) loads without torch.
"""
