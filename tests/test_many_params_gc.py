"""The garbage-collector report of benchmarks/many_params.py: what it counts is what ran."""

from __future__ import annotations

import gc
import re

from benchmarks import many_params


def test_gc_clock_counts_collections_only_while_on() -> None:
    clock = many_params.GcClock()
    gc.callbacks.append(clock)
    try:
        gc.collect()  # off: not counted
        assert clock.count == [0, 0, 0]
        clock.on = True
        gc.collect()  # a full collection
        gc.collect(0)
        clock.on = False
        gc.collect()
    finally:
        gc.callbacks.remove(clock)
    assert clock.count == [1, 0, 1]
    assert clock.ms[0] >= 0.0 and clock.ms[2] > 0.0


def test_gc_report_runs_plain_and_watched_chunks(tmp_path, capsys) -> None:
    many_params.gc_report(16, "adapters", steps=2, rounds=1, workdir=str(tmp_path), warmup=1)
    lines = capsys.readouterr().out.strip().splitlines()
    assert [line.split(":")[0] for line in lines] == ["adapters plain", "adapters watch"]
    for line in lines:
        counts = [int(c) for c in re.findall(r"gen\d (\d+) \(", line)]
        assert len(counts) == 3 and all(c >= 0 for c in counts)
    assert many_params.GcClock not in [type(cb) for cb in gc.callbacks]  # removed after the report
