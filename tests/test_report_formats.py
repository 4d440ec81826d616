"""Human report formats: Markdown, terminal text, Chinese; the CLI's --format/--lang/-o."""

from __future__ import annotations

import json

import pytest

import logfaults
from conftest import run_cli
from lossdoctor.detectors.engine import diagnose_runs
from lossdoctor.findings import Finding, Report
from lossdoctor.messages import Msg
from lossdoctor.report import render
from lossdoctor.report.i18n import locale_lang, say
from lossdoctor.report.markdown import md_escape
from test_sources_tabular import CSV_NAMES, write_csv


@pytest.fixture(scope="module")
def explosion_log(tmp_path_factory):
    p = tmp_path_factory.mktemp("fmt") / "log.csv"
    write_csv(p, logfaults.grad_explosion(), CSV_NAMES)
    return p


def test_markdown_report(explosion_log):
    p = run_cli("diagnose", explosion_log, "--format", "md")
    assert p.returncode == 0, p.stderr
    md = p.stdout
    assert md.startswith("## ") and "`grad_explosion`" in md.splitlines()[0]
    assert "| # |" in md and "### 1. `grad_explosion`" in md and "**evidence:**" in md
    assert "<details><summary>notes" in md


def test_markdown_escapes_log_text():
    f = Finding(
        "loss_spike",
        "spike",
        "warning",
        0.5,
        step=3,
        layer="h.0|<b>",
        evidence=["tag **bold** <img src=x onerror=alert(1)> | pipe"],
    )
    md = render(Report([f], steps=10, notes=["[link](http://x)"]), "md")
    assert "<img" not in md and "&lt;img" in md and "\\*\\*bold\\*\\*" in md
    assert "\\[link\\]" in md and "h.0\\|&lt;b&gt;" in md
    assert md_escape("a_b") == "a\\_b"


def test_text_plain_when_piped_and_colour_in_terminal(explosion_log):
    p = run_cli("diagnose", explosion_log)
    assert p.returncode == 0 and "\x1b[" not in p.stdout and "grad_explosion" in p.stdout
    spark = p.stdout.splitlines()[1]  # the loss at a glance: falling blocks, then x for NaN
    assert spark.startswith("loss 0 ") and spark.endswith(" 299") and "█" in spark and spark.count("x") >= 10
    runs_report = diagnose_runs(__import__("lossdoctor.sources", fromlist=["load_path"]).load_path(explosion_log))
    coloured = render(runs_report, "text", color=True)
    assert "\x1b[" in coloured


def test_chinese_report(explosion_log):
    p = run_cli("diagnose", explosion_log, "--lang", "zh")
    assert p.returncode == 0, p.stderr
    assert "主要诊断" in p.stdout and "一路增长，最终溢出" in p.stdout
    assert "grad_explosion" in p.stdout  # cause names stay as they are
    j = json.loads(run_cli("diagnose", explosion_log, "--format", "json", "--lang", "zh").stdout)
    assert j["findings"][0]["cause"] == "grad_explosion"
    assert all(ord(c) < 0x3000 for e in j["findings"][0]["evidence"] for c in e)  # JSON stays English


def test_no_sentence_is_translated_by_matching_its_english():
    """A message renders in the report's language; a plain string is shown as it is (no table of
    English patterns: rewording a sentence cannot silently drop its Chinese)."""
    import importlib.util

    assert say("it has not come back", "zh") == "it has not come back"
    m = Msg("scalars.spike.not_back")
    assert m == "it has not come back" and say(m, "zh") == "之后没有回落" and say(m, "en") == m
    assert importlib.util.find_spec("lossdoctor.messages.fallback_zh") is None


def test_language_follows_the_locale():
    assert locale_lang({"LANG": "zh_CN.UTF-8"}) == "zh"
    assert locale_lang({"LC_ALL": "zh_TW.UTF-8", "LANG": "en_US.UTF-8"}) == "zh"
    assert locale_lang({"LC_ALL": "C.UTF-8", "LANG": "zh_CN.UTF-8"}) == "en"  # LC_ALL decides
    assert locale_lang({"LC_MESSAGES": "zh_CN", "LANG": "en_US"}) == "zh"
    assert locale_lang({"LANGUAGE": "zh_CN:en"}) == "zh"
    assert locale_lang({}) == "en"


def test_cli_report_language_from_the_locale(explosion_log):
    import os

    env = {k: v for k, v in os.environ.items() if k not in ("LC_ALL", "LC_MESSAGES", "LANGUAGE")}
    zh = run_cli("diagnose", explosion_log, env={**env, "LANG": "zh_CN.UTF-8"})
    assert zh.returncode == 0 and "主要诊断" in zh.stdout, zh.stderr
    en = run_cli("diagnose", explosion_log, env={**env, "LANG": "en_US.UTF-8"})
    assert "primary diagnosis" in en.stdout and "主要诊断" not in en.stdout
    forced = run_cli("diagnose", explosion_log, "--lang", "en", env={**env, "LANG": "zh_CN.UTF-8"})
    assert "primary diagnosis" in forced.stdout


def test_output_file_and_formats(explosion_log, tmp_path):
    for fmt in ("md", "html", "json", "text"):
        out = tmp_path / f"r.{fmt}"
        p = run_cli("diagnose", explosion_log, "--format", fmt, "-o", out)
        assert p.returncode == 0 and p.stdout == "" and out.stat().st_size > 100, p.stderr
    assert json.loads((tmp_path / "r.json").read_text())["schema"] == "lossdoctor.report/1"
    one = [x for x in run_cli("diagnose", explosion_log, "--lang", "fr").stderr.splitlines() if x]
    assert len(one) == 1
