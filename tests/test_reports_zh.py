"""Chinese reports end to end: every demo fault and a set of offline logs diagnosed in `--lang zh`
show no English sentence (tests/latin_check.py says what counts), in the text, Markdown and HTML
formats; the language follows the locale, for the reports and for the live alerts on stderr.

No area is excepted: every evidence and fix of a finding is a message (a plain string would be
shown in English as it is), and no regular expression translates anything.
"""

from __future__ import annotations

import html as html_lib
import math
import os

import pytest

import logfaults
from conftest import run_cli
from latin_check import document_english, html_text, latin_runs, plain_sentences, report_english
from lossdoctor.demo.scenarios import SCENARIOS, run_scenario
from lossdoctor.detectors.engine import diagnose_runs
from lossdoctor.report import render
from lossdoctor.sources import load_path
from test_sources_tabular import CSV_NAMES, write_csv

#: offline logs of the faults the log-fault generators make (the zoo's shapes seen from a CSV log)
LOGS = {
    "grad_explosion": logfaults.grad_explosion,
    "scale_collapse": logfaults.scale_collapse,
    "lr_too_high": logfaults.lr_too_high,
    "healthy": logfaults.healthy,
}


@pytest.fixture(scope="module")
def demo_runs(tmp_path_factory):
    out = {}
    for name in SCENARIOS:
        d = run_scenario(name, tmp_path_factory.mktemp(name.replace("-", "_")), seed=0)
        runs = load_path(d)
        out[name] = (runs, diagnose_runs(runs))
    return out


@pytest.fixture(scope="module")
def log_runs(tmp_path_factory):
    out = {}
    for name, make in LOGS.items():
        p = tmp_path_factory.mktemp("zh") / f"{name}.csv"
        write_csv(p, make(), CSV_NAMES)
        runs = load_path(p)
        out[name] = (runs, diagnose_runs(runs))
    return out


def _check_all_formats(runs, report) -> None:
    assert report_english(report) == []
    assert plain_sentences(report) == []
    text = render(report, "text", runs=runs, lang="zh", width=100_000)
    assert document_english(text) == [], text
    md = render(report, "md", runs=runs, lang="zh")
    assert document_english(md) == [], md
    page = html_text(render(report, "html", runs=runs, lang="zh"))
    assert document_english(page) == [], page


@pytest.mark.slow  # trains every demo scenario under watch (~35 s)
@pytest.mark.parametrize("name", list(SCENARIOS))
def test_demo_report_in_chinese_has_no_english_sentence(demo_runs, name):
    runs, report = demo_runs[name]
    _check_all_formats(runs, report)
    if report.findings:
        text = render(report, "text", runs=runs, lang="zh")
        assert "主要诊断" in text and report.findings[0].cause in text


@pytest.mark.parametrize("name", list(LOGS))
def test_offline_log_report_in_chinese_has_no_english_sentence(log_runs, name):
    runs, report = log_runs[name]
    _check_all_formats(runs, report)
    assert report.notes  # the readers' notes are part of what is checked


def test_every_demo_fault_is_described_in_chinese():
    from lossdoctor.messages.demo import DESCRIPTIONS_ZH

    assert sorted(set(SCENARIOS) - set(DESCRIPTIONS_ZH)) == []
    p = run_cli("demo", "--fault", "list", "--lang", "zh")
    assert p.returncode == 0 and "梯度爆炸" in p.stdout and "（默认）" in p.stdout, p.stderr


def test_the_checker_finds_english():
    """The check itself fails on an English sentence (and passes the allowed terms)."""
    assert latin_runs("the loss jumped at step 5") == ["the loss jumped at step"]
    assert latin_runs("grad norm 从 1.3 升到 4.1e4；clip_grad_norm_(model.parameters(), max_norm=1.0)") == []
    from lossdoctor.findings import Finding, Report

    f = Finding("loss_spike", "spike", "warning", 0.5, evidence=["a sentence nobody translated"])
    assert report_english(Report([f], steps=3)) != []


def test_report_language_follows_the_locale_and_alerts_too(tmp_path):
    env = {k: v for k, v in os.environ.items() if k not in ("LC_ALL", "LC_MESSAGES", "LANGUAGE")}
    p = run_cli(
        "demo", "--fault", "nan-data", "--log-dir", tmp_path / "run", env={**env, "LANG": "zh_CN.UTF-8"}, timeout=300
    )
    assert p.returncode == 0, p.stderr
    assert "主要诊断" in p.stdout and "primary diagnosis" not in p.stdout
    alerts = [line for line in p.stderr.splitlines() if line.startswith("lossdoctor：")]
    assert alerts and "严重 nonfinite_data" in alerts[0] and "位置：第 60 步" in alerts[0], p.stderr
    assert "训练用时" in p.stderr


def test_live_alerts_speak_the_locale(monkeypatch, capsys):
    from lossdoctor.live import diagnoser

    monkeypatch.setenv("LANG", "zh_CN.UTF-8")
    monkeypatch.setattr(diagnoser, "ALERT_LANG", None)
    d = diagnoser.LiveDiagnoser({}, alerts=True)
    for i in range(40):  # a falling loss, then a gradient norm that explodes until it overflows
        loss = 2.0 * math.exp(-i / 10) if i < 30 else float("nan")
        grad = 1.0 if i < 20 else 10 ** ((i - 20) / 2) if i < 30 else float("nan")
        d.observe({"step": i, "loss": loss, "grad_norm": grad})
    d.evaluate()
    err = capsys.readouterr().err
    assert "lossdoctor：严重 grad_explosion（nonfinite），位置：第 30 步：grad norm 在第 5-29 步从 1" in err, err
    assert "修复：做梯度裁剪" in err and not latin_runs(err.replace("lossdoctor", "")), err
    monkeypatch.setenv("LANG", "en_US.UTF-8")
    assert "CRITICAL" in diagnoser.alert_line(d.report.findings[0], diagnoser.alert_language())


def test_chinese_html_escapes_and_declares_its_language(log_runs):
    runs, report = log_runs["grad_explosion"]
    page = render(report, "html", runs=runs, lang="zh")
    assert '<html lang="zh-CN">' in page and "诊断结果" in page
    assert html_lib.escape(report.findings[0].evidence[0].render("zh")) in page
