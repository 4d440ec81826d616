"""The incident record as a dataclass writes the same files the flow wrote when it was a dict.

Each scenario of `incident_scenarios` trains a real model into one path of the incident flow; its
`incidents/step-N.json`, floats and this checkout's path masked, must equal the reference written by
the dict version (`tests/data/incident_records/`), byte for byte: the same keys in the same order,
the same nesting and values. The dict the monitor shares is the file's content, verification
included.
"""

from __future__ import annotations

from pathlib import Path

import orjson
import pytest

from incident_scenarios import SCENARIOS, masked, run_scenario
from lossdoctor.live.runlog import _dumps
from lossdoctor.triage.record import ABSENT, KEYS, SCALE_KEYS, IncidentRecord

REFERENCE = Path(__file__).parent / "data" / "incident_records"


@pytest.mark.parametrize("name", sorted(SCENARIOS))
def test_the_record_files_are_the_ones_the_dict_version_wrote(tmp_path, name):
    mon, files = run_scenario(name, tmp_path)
    assert files, f"{name} left no incident record"
    written = orjson.dumps([orjson.loads(masked(f)) for f in files], option=orjson.OPT_INDENT_2) + b"\n"
    assert written == (REFERENCE / f"{name}.json").read_bytes()
    # the dict the monitor and the live engine hold is the file, as last written (a later
    # verification included)
    assert len(mon.incidents) == len(files)
    for shared, data in zip(mon.incidents, files):
        assert orjson.loads(_dumps(shared)) == orjson.loads(data)
        assert list(shared) == list(orjson.loads(data))
    assert [r.to_dict() for r in mon.triage.records] == mon.incidents


def _record(**kw):
    return IncidentRecord(
        step=7,
        trigger=kw.pop("trigger", "nonfinite_loss"),
        rank=None,
        policy="report",
        live={"loss": float("nan")},
        **kw,
    )


def test_absent_parts_are_left_out_and_a_null_answer_is_kept():
    rec = _record()
    assert list(rec.to_dict()) == [
        "format",
        "step",
        "trigger",
        "rank",
        "policy",
        "level",
        "live",
        "notes",
        "action",
        "findings",
    ]
    rec.reproducible = None  # "cannot tell" is an answer: written as null
    rec.samples = None
    assert rec.to_dict()["reproducible"] is None and rec.to_dict()["samples"] is None
    rec.reproducible = ABSENT
    assert "reproducible" not in rec.to_dict()


def test_keys_follow_the_file_order_whatever_order_the_flow_fills_them():
    rec = _record()
    rec.seconds = 0.5
    rec.batch_vs_state = {"verdict": "batch"}
    rec.time("localize_s", 0.123456)
    rec.replay = {"from_step": 4}
    assert list(rec.to_dict())[-5:] == ["replay", "timing", "batch_vs_state", "findings", "seconds"]
    assert rec.timing == {"localize_s": 0.1235}
    scale = _record(trigger="scale_collapse")
    scale.time("localize_s", 0.1)
    scale.localization = {"op": "aten.div"}
    assert list(scale.to_dict())[-3:] == ["localization", "timing", "findings"]
    assert sorted(SCALE_KEYS) == sorted(KEYS) and SCALE_KEYS != KEYS


def test_publish_refreshes_the_one_shared_dict_in_place():
    rec = _record()
    shared = rec.publish()
    assert "verification" not in shared
    rec.verification = {"status": "checked"}
    assert rec.publish() is shared and shared["verification"] == {"status": "checked"}
    assert list(shared)[-1] == "verification"
