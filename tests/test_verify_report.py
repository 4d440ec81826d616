"""Verified fixes in the Markdown and HTML reports (and the text report's incident section), from
real training runs: each fix's verdict right under the fix, in English and Chinese (no English
left in the Chinese report), and per incident what verification did and cost."""

from __future__ import annotations

import re

import pytest
import torch

import lossdoctor
from conftest import run_cli
from latin_check import document_english, html_text
from lossdoctor.detectors.engine import diagnose_runs
from lossdoctor.report import render
from lossdoctor.report.verdicts import incident_line, sentence
from lossdoctor.sources import load_path
from test_triage_verify import _nan_data_run
from triage_models import MLP, mse_loss, regression_batches, train


@pytest.fixture(scope="module")
def nan_run(tmp_path_factory):
    """Adam on a regression, a NaN feature in sample 3 of the batch of step 14: verification (on
    by default) drops that sample and the replay passes step 14."""
    torch.manual_seed(0)
    d = tmp_path_factory.mktemp("nan_data")
    _nan_data_run(d).close()
    runs = load_path(d)
    return d, runs, diagnose_runs(runs)


@pytest.fixture(scope="module")
def diverged_run(tmp_path_factory):
    """The replay_fn is not the loss the loop trains on: the replay leaves the log, no verdict."""
    torch.manual_seed(0)
    d = tmp_path_factory.mktemp("diverged")
    model = MLP()
    opt = torch.optim.SGD(model.parameters(), lr=0.05)
    batches = regression_batches(40)
    x, y = batches[14]
    batches[14] = (x * 300.0, y * 300.0)
    mon = lossdoctor.watch(
        model, opt, log_dir=d, alerts=False, snapshot_every=5, replay_fn=lambda m, b: 1.5 * mse_loss(m, b)
    )
    train(model, opt, batches, mse_loss, mon)
    mon.close()
    runs = load_path(d)
    return d, runs, diagnose_runs(runs)


def _fix_then_verdict(doc: str, fix: str, verdict: str) -> None:
    """`verdict` comes after `fix` and before the next fix or section."""
    i = doc.index(fix)
    j = doc.index(verdict, i)
    assert "\n- " not in doc[i:j] and "<li>" not in doc[i:j], doc[i:j]


def test_markdown_shows_the_verdict_under_its_fix_and_the_cost(nan_run):
    _, runs, report = nan_run
    top = report.findings[0]
    assert top.cause == "nonfinite_data" and top.fix_checks[0]["verdict"] == "verified"
    md = render(report, "md", runs=runs, lang="en")
    _fix_then_verdict(
        md,
        "- drop or repair those samples",
        "  - ✅ verified: with sample(s) 3 dropped from the batch of step 14 the replay passes step 14 and the loss is",
    )
    assert "20 steps later (unfixed: NaN at 14)" in md
    section = md[md.index("### Verification of the fixes") :]
    line = re.search(
        r"- incident at step 14: fixes replayed from step (\d+) to (\d+): 1 verified, (\d+) did not help, "
        r"\d+ not checked or not verifiable; cost: ([0-9.e+-]+) s, (\d+) replayed steps \(budget 400\), "
        r"peak memory \+([0-9.e+-]+) MiB",
        section,
    )
    assert line, section
    rec = runs[0].incidents[0]["verification"]
    assert int(line[1]) == rec["from_step"] and int(line[2]) == rec["to_step"]
    assert int(line[5]) == rec["cost"]["steps_replayed"] > 0


def test_markdown_in_chinese_has_the_verdict_and_no_english(nan_run):
    _, runs, report = nan_run
    md = render(report, "md", runs=runs, lang="zh")
    _fix_then_verdict(
        md, "- 丢弃或修复这些样本", "  - ✅ 已验证：采用「从第 14 步的 batch 中去掉样本 3」后重放能越过第 14 步"
    )
    assert "### 修复验证" in md and "- 第 14 步的事故：从第" in md and "1 个修复已验证" in md
    assert document_english(md) == [], document_english(md)


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_html_shows_the_verdict_under_its_fix_and_the_cost(nan_run, lang):
    _, runs, report = nan_run
    page = render(report, "html", runs=runs, lang=lang)
    fixes = page[page.index('<ul class="fixes">') :]
    fixes = fixes[: fixes.index("</ul>")]
    m = re.search(
        r'<li>([^<]*)<div class="verdict verified" data-verdict="verified"><span class="vbadge" '
        r'title="([^"]*)">✅</span> ([^<]*)</div></li>',
        fixes,
    )
    assert m, fixes
    section = page[page.index('<section class="verification">') :]
    section = section[: section.index("</section>")]
    if lang == "en":
        assert m[1].startswith("drop or repair those samples") and m[2] == "verified"
        assert m[3].startswith("verified: with sample(s) 3 dropped from the batch of step 14")
        assert "Verification of the fixes" in section and "incident at step 14" in section
    else:
        assert m[1].startswith("丢弃或修复这些样本") and m[2] == "已验证"
        assert m[3].startswith("已验证：采用「从第 14 步的 batch 中去掉样本 3」")
        assert "修复验证" in section and "第 14 步的事故" in section and "重放" in section
        assert document_english(html_text(page)) == []


def test_no_verdict_is_said_with_its_reason_in_both_languages(diverged_run):
    _, runs, report = diverged_run
    assert all(not f.fix_checks for f in report.findings)
    v = runs[0].incidents[0]["verification"]
    assert v["status"] == "diverged"
    en = render(report, "md", runs=runs, lang="en")
    assert "- incident at step 16: no verdict: the replay diverges from the log at step" in en
    assert "✅" not in en and "❌" not in en
    zh = render(report, "md", runs=runs, lang="zh")
    assert "- 第 16 步的事故：无法给出结论：重放在第" in zh and document_english(zh) == []
    text = render(report, "text", runs=runs, lang="en", width=10_000)
    assert "Verification of the fixes" in text and "no verdict: the replay diverges" in text


def test_the_cli_reports_carry_the_verdicts(nan_run, tmp_path):
    d, _, _ = nan_run
    md = run_cli("diagnose", d, "--format", "md", "--lang", "zh")
    assert md.returncode == 0, md.stderr
    assert "✅ 已验证：" in md.stdout and "### 修复验证" in md.stdout
    out = tmp_path / "r.html"
    page = run_cli("diagnose", d, "--format", "html", "--lang", "en", "-o", out)
    assert page.returncode == 0, page.stderr
    assert 'data-verdict="verified"' in out.read_text(encoding="utf-8")


def test_a_record_this_version_cannot_render_shows_its_stored_text():
    """A verdict written by a newer version (a message key unknown here) falls back to its text."""
    check = {
        "fix": 0,
        "verdict": "verified",
        "sentence": "verified: stored text",
        "sentence_data": {"key": "verify.from_the_future", "values": {}},
    }
    assert sentence(check, "zh") == "verified: stored text"
    line = incident_line(
        {"step": 3, "verification": {"status": "checked", "checks": "garbage", "cost": 5, "from_step": {"x": 1}}}
    )
    assert line is not None and line.startswith("incident at step 3: fixes replayed from step ? to ?")
    assert incident_line({"step": 3}) is None


try:
    import sys
    from pathlib import Path

    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "scripts"))
    from screenshot_report import check_report, find_browser
except ImportError:  # pragma: no cover - the script is part of the repository
    check_report = find_browser = None


@pytest.mark.skipif(find_browser is None or find_browser() is None, reason="chromium + chromedriver not installed")
@pytest.mark.parametrize("lang", ["en", "zh"])
def test_the_verdicts_show_in_chromium(nan_run, tmp_path, lang):
    pytest.importorskip("selenium")
    d, _, _ = nan_run
    out = tmp_path / "report.html"
    p = run_cli("diagnose", d, "--format", "html", "--lang", lang, "-o", out)
    assert p.returncode == 0, p.stderr
    r = check_report(out, tmp_path / f"verdicts-{lang}.png")
    assert r["ready"] and r["console_errors"] == [], r
    want = (
        ("verified: with sample(s) 3 dropped", "Verification of the fixes")
        if lang == "en"
        else ("已验证：采用", "修复验证")
    )
    assert all(w in r["text"] for w in want), r["text"][:2000]
    if lang == "zh":
        assert document_english(r["text"]) == [], r["text"]
