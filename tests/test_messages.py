"""Messages as data: the template table is complete and every key the source uses exists."""

from __future__ import annotations

import ast
import copy
import json
import pickle
from pathlib import Path

import pytest

from latin_check import latin_runs
from lossdoctor.findings import Finding, Fix, Report
from lossdoctor.messages import LANGS, Msg, fmt, holds, identity, not_in, placeholders, render, templates, unique

SRC = Path(__file__).resolve().parents[1] / "src" / "lossdoctor"


def test_every_key_has_both_languages_with_the_same_placeholders():
    table = templates()
    assert table, "no templates loaded"
    for key, row in table.items():
        for lang in LANGS:
            assert row.get(lang), f"{key} has no {lang} template"
        assert placeholders(row["en"]) == placeholders(row["zh"]), key


def _msg_calls():
    """`Msg("key", name=...)` calls, and `render("key", {"name": ...}, lang)` calls (as (path,
    key, the value names or None when they are not literal, line))."""
    for path in SRC.rglob("*.py"):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            if not (
                isinstance(node, ast.Call)
                and isinstance(node.func, ast.Name)
                and node.args
                and isinstance(node.args[0], ast.Constant)
                and isinstance(node.args[0].value, str)
            ):
                continue
            if node.func.id == "Msg":
                names = None if any(k.arg is None for k in node.keywords) else {k.arg for k in node.keywords}
                yield path, node.args[0].value, names, node.lineno
            elif node.func.id == "render" and len(node.args) >= 2:
                d = node.args[1]
                names = (
                    {k.value for k in d.keys}
                    if isinstance(d, ast.Dict) and all(isinstance(k, ast.Constant) for k in d.keys)
                    else None
                )
                yield path, node.args[0].value, names, node.lineno


def test_every_key_used_in_the_source_exists_with_the_values_it_is_given():
    table = templates()
    seen = 0
    for path, key, given, line in _msg_calls():
        where = f"{path.relative_to(SRC)}:{line}"
        assert key in table, f"{where}: message key {key!r} has no template"
        seen += 1
        if given is None:
            continue  # **values: checked when rendered
        assert placeholders(table[key]["en"]) == given, f"{where}: {key} given {sorted(given)}"
    assert seen > 300  # the walk finds the calls (a refactor that hides them would pass vacuously)


def test_keys_made_at_run_time_exist():
    """The keys the source builds from a name (`live.{severity}`, `cause.{cause}`, ...)."""
    from lossdoctor.vocabulary import CAUSES, SEVERITIES, SYMPTOMS

    table = templates()
    wanted = (
        [f"live.{s}" for s in SEVERITIES]
        + [f"cause.{c}" for c in CAUSES]
        + [f"symptom.{s}" for s in SYMPTOMS]
        + [f"ui.{s}" for s in SEVERITIES]
        + ["ui.healthy", "ui.inconclusive"]
    )
    assert [k for k in wanted if k not in table] == []


def _sample_values(template: str) -> dict:
    """A number for every placeholder (a number fits every spec the templates use)."""
    return {name: 12 for name in placeholders(template)}


@pytest.mark.parametrize("lang", LANGS)
def test_every_template_renders_in_both_languages(lang):
    for key, row in templates().items():
        values = _sample_values(row["en"])
        text = render(key, values, lang)
        assert not text.startswith(key + ":"), f"{key} does not render in {lang}: {text}"
        if lang == "zh" and row["zh"] == row["en"] and not placeholders(row["en"]) == set():
            assert not latin_runs(text), f"{key}: the Chinese template is the English one"


def test_chinese_templates_leave_no_english_sentence():
    """Every Chinese template, filled with numbers, shows no run of English words outside the
    terms Chinese ML engineers write in English (loss, batch, grad norm, loss scale, warmup...)."""
    bad = {}
    for key, row in templates().items():
        runs = latin_runs(render(key, _sample_values(row["zh"]), "zh"))
        if runs:
            bad[key] = runs
    assert bad == {}


def test_findings_carry_their_messages_in_the_json_and_read_back():
    f = Finding(
        "grad_explosion",
        "nonfinite",
        "critical",
        0.9,
        step=431,
        evidence=[
            Msg("grad.rose_then_nonfinite", start=1.3, peak=4.1e4, first=406, last=430, step=431),
            "a plain sentence",
        ],
        fixes=[Msg("grad.fix_clip", max_norm=2.0, first=100, last=400)],
    )
    report = Report([f], steps=500, notes=[Msg("engine.skipped_update", step=7), "plain note"])
    d = json.loads(json.dumps(report.to_dict(), allow_nan=False))
    fd = d["findings"][0]
    # the English strings stay the contract, the data sits next to them
    assert (
        fd["evidence"][0] == "grad norm rose from 1.3 (early median) to 4.10e+04 over steps 406-430, then "
        "became non-finite at step 431"
    )
    assert fd["evidence_data"][0] == {
        "key": "grad.rose_then_nonfinite",
        "values": {"start": 1.3, "peak": 41000.0, "first": 406, "last": 430, "step": 431},
    }
    assert fd["evidence_data"][1] is None and d["notes_data"][1] is None
    assert fd["fixes_data"][0]["values"]["max_norm"] == 2.0
    back = Report.from_dict(d)
    ev = back.findings[0].evidence
    assert isinstance(ev[0], Msg) and not isinstance(ev[1], Msg) and ev == f.evidence
    assert ev[0].render("zh").startswith("grad norm 在第 406-430 步从 1.3")
    assert back.notes[0].render("zh").startswith("只有第 7 步的 grad norm")
    from importlib import resources

    import jsonschema

    schema = json.loads(resources.files("lossdoctor").joinpath("schema/report.schema.json").read_text())
    jsonschema.validate(d, schema)


def test_message_data_that_does_not_fit_keeps_the_english():
    d = Finding("loss_spike", "spike", "warning", 0.5, evidence=["the stored sentence"]).to_dict()
    for data in (
        [{"key": "no.such.key", "values": {}}],
        [{"key": "grad.went_nonfinite", "values": {"step": 3}}, None],
        ["junk"],
        "junk",
    ):
        d["evidence_data"] = data
        assert Finding.from_dict(d).evidence == ["the stored sentence"]
    d["evidence_data"] = [{"key": "grad.went_nonfinite", "values": {"step": 3, "key": 1}}]
    assert Finding.from_dict(d).evidence[0].key == "grad.went_nonfinite"  # a value may be called key


def test_numpy_values_render_and_serialise_as_numbers():
    import numpy as np

    m = Msg("grad.went_nonfinite", step=np.int64(42))
    assert m == "training went non-finite at step 42" and m.data()["values"]["step"] == 42
    m = Msg("precision.scale_fell", start=np.float32(65536.0), end=np.float64(np.nan))
    assert m == "loss scale fell from 6.55e+04 to NaN"
    assert json.loads(json.dumps(m.data()))["values"] == {"start": 65536.0, "end": {"float": "nan"}}


def test_a_message_is_its_english_text_and_renders_in_chinese():
    m = Msg("word.rising")
    assert m == "rising" and isinstance(m, str)
    assert m.render("zh") == "上升"
    assert m.render("en") == "rising"


def test_a_message_survives_copy_pickle_and_json():
    m = Msg("word.falling")
    for back in (copy.deepcopy(m), pickle.loads(pickle.dumps(m)), Msg.from_data(json.loads(json.dumps(m.data())))):
        assert isinstance(back, Msg) and back.key == "word.falling" and back == m


def test_values_round_trip_including_non_finite_numbers_and_nested_messages():
    data = {
        "key": "some.key",
        "values": {"x": {"float": "nan"}, "w": {"key": "word.flat", "values": {}}, "xs": [1, 2.5]},
    }
    m = Msg.from_data(json.loads(json.dumps(data)))
    assert m.values["x"] != m.values["x"]
    assert isinstance(m.values["w"], Msg) and m.values["w"].render("zh") == "持平"
    assert m.data()["values"]["x"] == {"float": "nan"}
    assert Msg.from_data({"nokey": 1}) is None


def test_sentences_are_told_apart_by_key_and_values_not_by_their_english():
    """The evidence and notes a merge keeps once are compared as data: two messages whose English
    reads alike (0.12341 and 0.12344 both print 0.123) are two, one message rebuilt is one."""
    a, b = (
        Msg("grad.median_rose", start=0.12341, end=5.0, step=3, ratio=40.5),
        Msg("grad.median_rose", start=0.12344, end=5.0, step=3, ratio=40.5),
    )
    assert a == b  # the English is the same string ...
    assert identity(a) != identity(b) and not_in([b], [a]) == [b] and unique([a, b]) == [a, b]  # ... the data is not
    again = Msg.from_data(json.loads(json.dumps(a.data())))
    assert identity(again) == identity(a) and unique([a, again]) == [a] and holds([a], again)
    nan = Msg("grad.median_rose", start=float("nan"), end=5.0, step=3, ratio=float("nan"))
    assert unique([nan, Msg.from_data(nan.data())]) == [nan]  # NaN values still match themselves
    assert not_in([Fix.clip(a, max_norm=2.0), Fix.clip(again, max_norm=1.0)], [Fix.clip(a, max_norm=1.0)]) == [
        Fix.clip(a, max_norm=2.0)
    ]  # a fix: its kind, numbers and sentence
    assert identity(Fix.code(a)) == identity(a)  # a code change is its sentence (a fix in the old form)


def test_an_unknown_key_still_shows_its_numbers_instead_of_raising():
    text = render("no.such.key", {"grad": 1234567.0, "step": 12})
    assert "no.such.key" in text and "1.23e+06" in text and "12" in text


def test_numbers_are_formatted_short():
    assert fmt(4.1e4) == "4.10e+04"
    assert fmt(1.23456) == "1.23"
    assert fmt(float("nan")) == "NaN"


def test_the_partial_read_warnings_name_keys_that_exist():
    """The CLI warns on stderr for these notes by key: a renamed key would silence the warning."""
    from lossdoctor.cli.main import PARTIAL_READ

    assert PARTIAL_READ and PARTIAL_READ <= set(templates())
