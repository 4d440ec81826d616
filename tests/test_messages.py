"""Messages as data: the template table is complete and every key the source uses exists."""

from __future__ import annotations

import ast
import copy
import json
import pickle
from pathlib import Path

from lossdoctor.messages import LANGS, Msg, fmt, placeholders, render, templates

SRC = Path(__file__).resolve().parents[1] / "src" / "lossdoctor"


def test_every_key_has_both_languages_with_the_same_placeholders():
    table = templates()
    assert table, "no templates loaded"
    for key, row in table.items():
        for lang in LANGS:
            assert row.get(lang), f"{key} has no {lang} template"
        assert placeholders(row["en"]) == placeholders(row["zh"]), key


def _msg_calls():
    for path in SRC.rglob("*.py"):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            if (isinstance(node, ast.Call) and isinstance(node.func, ast.Name)
                    and node.func.id == "Msg" and node.args
                    and isinstance(node.args[0], ast.Constant)):
                yield path, node


def test_every_key_used_in_the_source_exists_with_the_values_it_is_given():
    table = templates()
    for path, node in _msg_calls():
        key = node.args[0].value
        where = f"{path.relative_to(SRC)}:{node.lineno}"
        assert key in table, f"{where}: message key {key!r} has no template"
        if any(k.arg is None for k in node.keywords):
            continue  # **values: checked when rendered
        given = {k.arg for k in node.keywords}
        assert placeholders(table[key]["en"]) == given, f"{where}: {key} given {sorted(given)}"


def test_a_message_is_its_english_text_and_renders_in_chinese():
    m = Msg("word.rising")
    assert m == "rising" and isinstance(m, str)
    assert m.render("zh") == "上升"
    assert m.render("en") == "rising"


def test_a_message_survives_copy_pickle_and_json():
    m = Msg("word.falling")
    for back in (copy.deepcopy(m), pickle.loads(pickle.dumps(m)),
                 Msg.from_data(json.loads(json.dumps(m.data())))):
        assert isinstance(back, Msg) and back.key == "word.falling" and back == m


def test_values_round_trip_including_non_finite_numbers_and_nested_messages():
    data = {"key": "some.key", "values": {"x": {"float": "nan"}, "w": {"key": "word.flat", "values": {}},
                                          "xs": [1, 2.5]}}
    m = Msg.from_data(json.loads(json.dumps(data)))
    assert m.values["x"] != m.values["x"]
    assert isinstance(m.values["w"], Msg) and m.values["w"].render("zh") == "持平"
    assert m.data()["values"]["x"] == {"float": "nan"}
    assert Msg.from_data({"nokey": 1}) is None


def test_an_unknown_key_still_shows_its_numbers_instead_of_raising():
    text = render("no.such.key", {"grad": 1234567.0, "step": 12})
    assert "no.such.key" in text and "1.23e+06" in text and "12" in text


def test_numbers_are_formatted_short():
    assert fmt(4.1e4) == "4.10e+04"
    assert fmt(1.23456) == "1.23"
    assert fmt(float("nan")) == "NaN"
