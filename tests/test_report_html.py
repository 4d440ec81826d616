"""The HTML report: self-contained, everything from logs escaped, bounded size, and checked in real
headless Chromium (renders, charts draw non-blank pixels, no console errors, screenshot)."""

from __future__ import annotations

import json
import re
import sys

import numpy as np
import pytest

import logfaults
from conftest import ROOT, run_cli
from lossdoctor.detectors.engine import diagnose_runs
from lossdoctor.records import from_columns
from lossdoctor.report import render
from lossdoctor.sources import load_path
from test_sources_tabular import CSV_NAMES, write_csv

sys.path.insert(0, str(ROOT / "scripts"))
from screenshot_report import check_report, find_browser  # noqa: E402


def _data(html: str) -> dict:
    m = re.search(r'<script type="application/json" id="ld-data">(.*?)</script>', html, re.S)
    return json.loads(m.group(1))


@pytest.fixture(scope="module")
def watched_run(tmp_path_factory):
    """A run directory written by lossdoctor.watch (per-layer stats included): an MLP whose SGD
    learning rate keeps rising until the gradients blow up."""
    import torch

    import lossdoctor

    d = tmp_path_factory.mktemp("watched")
    torch.manual_seed(0)
    model = torch.nn.Sequential(
        torch.nn.Linear(8, 32), torch.nn.Tanh(), torch.nn.Linear(32, 32), torch.nn.Tanh(), torch.nn.Linear(32, 1)
    )
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    with lossdoctor.watch(model, opt, log_dir=d, alerts=False) as mon:
        for i in range(60):
            for g in opt.param_groups:
                g["lr"] = 0.01 * 1.13**i
            x = torch.randn(16, 8)
            loss = torch.nn.functional.mse_loss(model(x), x.sum(1, keepdim=True))
            opt.zero_grad()
            loss.backward()
            opt.step()
            mon.step(loss)
    return d


def test_self_contained_and_pinned(tmp_path):
    p = tmp_path / "log.csv"
    write_csv(p, logfaults.grad_explosion(), CSV_NAMES)
    out = tmp_path / "r.html"
    assert run_cli("diagnose", p, "--format", "html", "-o", out).returncode == 0
    html = out.read_text()
    assert "<script src" not in html and "<link" not in html and "@import" not in html
    assert not re.search(r"""(src|href)\s*=\s*["']?https?:""", html)
    data = _data(html)
    names = [c["name"] for c in data["charts"]]
    assert names[:3] == ["loss", "grad_norm", "lr"] and "scale" not in names
    assert data["findings"][0]["cause"] == "grad_explosion" and data["findings"][0]["step"] == 190
    loss = data["charts"][0]["series"][0]
    assert 190 in loss["nonfinite"] and 190 in loss["x"]  # the onset stays on the axis
    assert 'data-step="190"' in html and 'class="finding critical"' in html


def test_log_text_is_escaped(tmp_path):
    evil = "<script>alert('x')</script>"
    p = tmp_path / "wandb_export.csv"
    p.write_text(
        f'"Step","{evil} - train/loss","other - train/loss"\n'
        + "".join(f"{i},{2 - 0.01 * i},{2 - 0.01 * i}\n" for i in range(50))
    )
    runs = load_path(p)
    assert any(evil in n for n in runs[0].notes)  # the run name reaches a note...
    html = render(diagnose_runs(runs), "html", runs=runs)
    assert evil not in html and "&lt;script&gt;alert(&#x27;x&#x27;)&lt;/script&gt;" in html  # ...escaped
    assert html.count("<script") == 3  # data + uPlot + report.js, nothing injected


def test_script_json_cannot_close_the_script():
    from lossdoctor.report.html import script_json

    s = script_json({"m": "</script><b>", "u": "\u2028"})
    assert "</" not in s and "<b>" not in s and json.loads(s)["m"] == "</script><b>"


def test_million_points_are_decimated():
    n = 1_000_000
    rng = np.random.default_rng(0)
    loss = 2 + 0.1 * rng.standard_normal(n)
    loss[500_123] = 50.0  # a one-step spike must survive the reduction
    run = from_columns(np.arange(n), {"loss": loss}, logged={"loss": np.ones(n, bool)})
    html = render(diagnose_runs([run]), "html", runs=[run])
    assert len(html) < 1_500_000
    s = _data(html)["charts"][0]["series"][0]
    assert len(s["x"]) <= 4000 and max(v for v in s["y"] if v is not None) == 50.0
    assert s["decimated"] and "min and max" in html


def test_layer_heatmaps_from_run_dir(watched_run):
    runs = load_path(watched_run)
    data = _data(render(diagnose_runs(runs), "html", runs=runs))
    assert data["heatmaps"] and {"param_grad_norm", "act_absmax"} <= {h["stat"] for h in data["heatmaps"]}
    h = data["heatmaps"][0]
    assert len(h["log10"]) == len(h["modules"]) and len(h["log10"][0]) == len(h["steps"])
    # a value not measured at a step (act_rms between sampled steps on the rows an incident adds)
    # is blank, never red: red only once the run broke
    from lossdoctor.detectors.quantities import Quantities

    first_bad = Quantities(runs[0]).first_bad_step
    assert first_bad is not None and first_bad > 10
    for hm in data["heatmaps"]:
        assert all(hm["steps"][c] >= first_bad for bad in hm["nonfinite"] for c in bad), hm["stat"]


needs_browser = pytest.mark.skipif(find_browser() is None, reason="chromium + chromedriver not installed")


@needs_browser
@pytest.mark.parametrize("lang", ["en", "zh"])
def test_renders_in_chromium(watched_run, tmp_path, lang):
    pytest.importorskip("selenium")
    out = tmp_path / "report.html"
    p = run_cli("diagnose", watched_run, "--format", "html", "--lang", lang, "-o", out)
    assert p.returncode == 0, p.stderr
    png = tmp_path / f"report-{lang}.png"
    r = check_report(out, png)
    assert r["ready"] and r["console_errors"] == [], r
    assert r["state"]["errors"] == [] and r["state"]["charts"] >= 4 and r["state"]["heatmaps"] >= 2
    drawn = {c["signal"] for c in r["canvases"] if c["drawn"] > 0}
    assert {"loss", "grad_norm", "lr"} <= drawn and any(s.startswith("layers:") for s in drawn)
    assert r["blank_canvases"] == []
    assert r["finding_cards"] >= 1
    assert png.stat().st_size > 20_000
    # what the browser shows is in the chosen language: headings, labels, findings, notes
    if lang == "zh":
        from latin_check import document_english

        assert r["lang"] == "zh-CN" and "诊断结果" in r["text"] and "训练信号" in r["text"], r["text"][:500]
        assert document_english(r["text"]) == [], r["text"]
    else:
        assert r["lang"] == "en" and "Findings" in r["text"] and "诊断" not in r["text"]


@needs_browser
def test_screenshot_script(tmp_path):
    pytest.importorskip("selenium")
    import subprocess

    log = tmp_path / "log.csv"
    write_csv(log, logfaults.scale_collapse(), CSV_NAMES)
    png = tmp_path / "shot.png"
    p = subprocess.run(
        [sys.executable, str(ROOT / "scripts" / "screenshot_report.py"), str(log), "-o", str(png)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert p.returncode == 0, p.stdout + p.stderr
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and json.loads(p.stdout.split("screenshot:")[0])["ok"]


def test_overflow_on_skipped_steps_is_not_drawn_as_a_failure(tmp_path):
    p = tmp_path / "log.csv"
    write_csv(p, logfaults.scale_collapse(), CSV_NAMES)
    runs = load_path(p)
    data = _data(render(diagnose_runs(runs), "html", runs=runs))
    gn = next(c for c in data["charts"] if c["name"] == "grad_norm")
    assert gn["series"][0]["nonfinite"] == [] and 100 in gn["series"][0]["nonfinite_skipped"]
    assert 100 in gn["skipped"][0]


def test_heatmap_blank_is_not_measured_and_red_is_nonfinite(tmp_path):
    """fp16 with a GradScaler that skips every step (sqrt at 0 in backward): every step writes a
    per-layer row, the forward stays finite. Activation RMS, measured on sampled steps only, is
    blank on the others, not red; the NaN gradients are red."""
    import torch

    import lossdoctor
    from triage_models import PairDistance

    torch.manual_seed(0)
    model = PairDistance()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    scaler = torch.amp.GradScaler("cpu")
    with lossdoctor.watch(model, opt, scaler=scaler, log_dir=tmp_path, alerts=False) as mon:
        for _ in range(25):
            with torch.autocast("cpu", dtype=torch.float16):
                loss = model(torch.randn(8, 6)).float().mean()
            opt.zero_grad()
            scaler.scale(loss).backward()
            scaler.step(opt)
            scaler.update()
            mon.step(loss)
    runs = load_path(tmp_path)
    data = _data(render(diagnose_runs(runs), "html", runs=runs))
    maps = {h["stat"]: h for h in data["heatmaps"]}
    rms = maps["act_rms"]
    assert len(rms["steps"]) == 25 and all(bad == [] for bad in rms["nonfinite"])
    assert any(v is None for row in rms["log10"] for v in row)  # the unsampled steps: blank
    assert any(maps["param_grad_norm"]["nonfinite"])  # the NaN gradients: red
