"""`lossdoctor diagnose RUN_A RUN_B`: real `watch` runs side by side (the settings that differ, the
step where the losses part, the HTML overlay), and the command line's conventions (NO_COLOR, the
terminal's width, completion, --help examples, a folder of W&B panel exports)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from conftest import ROOT, cli_env, run_cli
from lossdoctor.detectors.comparison import PARTING, loss_curve, noise_sigma, parting
from lossdoctor.records import from_columns
from lossdoctor.sources import load_path

sys.path.insert(0, str(ROOT / "scripts"))
from screenshot_report import check_report, find_browser  # noqa: E402


def _train(log_dir: Path, lr: float, seed: int = 0, steps: int = 60) -> Path:
    """A small MLP regression under SGD, watched: the same data order whatever the LR."""
    import torch

    import lossdoctor

    torch.manual_seed(seed)
    model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.Tanh(), torch.nn.Linear(16, 1))
    opt = torch.optim.SGD(model.parameters(), lr=lr)
    g = torch.Generator().manual_seed(123)
    x = torch.randn(256, 8, generator=g)
    y = x[:, :1] * 2 - x[:, 1:2]
    with lossdoctor.watch(model, opt, log_dir=log_dir, alerts=False) as mon:
        for _ in range(steps):
            idx = torch.randint(0, 256, (32,), generator=g)
            loss = torch.nn.functional.mse_loss(model(x[idx]), y[idx])
            opt.zero_grad()
            loss.backward()
            opt.step()
            mon.step(loss)
    return log_dir


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    root = tmp_path_factory.mktemp("compare")
    return {
        "high": _train(root / "lr3e-2", 3e-2),
        "low": _train(root / "lr3e-3", 3e-3),
        "twin": _train(root / "twin" / "lr3e-2", 3e-2),
    }


def _json(*args) -> dict:
    p = run_cli("diagnose", *args, "--format", "json")
    assert p.returncode == 0, p.stderr
    return json.loads(p.stdout)


def test_lr_runs_name_the_lr_and_the_parting_step(runs):
    d = _json(runs["high"], runs["low"])
    c = d["comparison"]
    assert [r["label"] for r in c["runs"]] == ["lr3e-2", "lr3e-3"]
    assert c["differing"] == {"lr": [0.03, 0.003]}  # the optimizer, momentum... are the same
    assert all(r["settings"]["optimizer"] == "SGD" for r in c["runs"])
    [p] = c["parting"]
    assert p["verdict"] == "parted" and p["rule"]["k"] == PARTING.k
    # the step the rule names: the first of `consecutive` aligned points beyond the threshold
    sa, ya = loss_curve(load_path(runs["high"])[0])
    sb, yb = loss_curve(load_path(runs["low"])[0])
    assert np.array_equal(sa, sb)
    beyond = np.abs(yb - ya) > p["threshold"]
    i = int(np.flatnonzero(sa == p["step"])[0])
    assert beyond[i : i + PARTING.consecutive].all()
    assert not any(beyond[j : j + PARTING.consecutive].all() for j in range(i))
    assert p["threshold"] == pytest.approx(PARTING.k * p["noise"], rel=1e-4)
    assert 0 < p["step"] < 60
    # the report's other keys are the baseline's: the first run diagnosed alone
    alone = _json(runs["high"])
    assert "comparison" not in alone  # one path: the single-run JSON, unchanged
    assert {k: d[k] for k in alone} == alone
    jsonschema = pytest.importorskip("jsonschema")
    from importlib import resources

    schema = json.loads(resources.files("lossdoctor").joinpath("schema/report.schema.json").read_text())
    jsonschema.validate(d, schema)  # the comparison object is part of the published contract
    r0 = c["runs"][0]
    assert r0["final_loss"] == pytest.approx(float(ya[-1]), rel=1e-5) and r0["min_loss"] == pytest.approx(
        float(ya.min()), rel=1e-5
    )
    assert r0["steps"] == 60


def test_identical_seeds_never_part(runs):
    c = _json(runs["high"], runs["twin"])["comparison"]
    assert c["differing"] == {}
    [p] = c["parting"]
    assert p["verdict"] == "together" and p["step"] is None and p["aligned"] == 60
    # the same last name: one more part of each path
    assert [r["label"] for r in c["runs"]] == [f"{runs['high'].parent.name}/lr3e-2", "twin/lr3e-2"]


def test_one_odd_point_is_not_a_parting():
    """A spike at one step of one run (a bad batch) is one point beyond the noise, not `consecutive`."""
    rng = np.random.default_rng(0)
    steps = np.arange(200)
    base = 2 * np.exp(-steps / 60) + 0.05 * rng.standard_normal(200)
    other = base + 0.05 * rng.standard_normal(200)
    spiky = other.copy()
    spiky[100] += 5.0
    a = from_columns(steps, {"loss": base})
    b = from_columns(steps, {"loss": spiky})
    assert parting(a, b)["verdict"] == "together"
    shifted = other.copy()
    shifted[120:] += 1.0  # a lasting step change: parts where it starts
    got = parting(a, from_columns(steps, {"loss": shifted}))
    assert got["verdict"] == "parted" and got["step"] == 120
    assert noise_sigma(base, PARTING.window) == pytest.approx(0.05, rel=0.35)
    short = from_columns(steps[:5], {"loss": base[:5]})
    assert parting(a, short)["verdict"] == "too_short"


def test_a_run_that_went_nan_says_from_where(tmp_path):
    """A loss that turns NaN at step 30 and stays so: no final loss, the step it went bad, and the
    curves part (the finite part rose first) before it."""
    from lossdoctor.detectors.comparison import compare
    from lossdoctor.detectors.engine import diagnose_runs
    from lossdoctor.report.side_by_side import table_rows

    steps = np.arange(60)
    rng = np.random.default_rng(1)
    good = 2 * np.exp(-steps / 20) + 0.01 * rng.standard_normal(60)
    bad = good.copy()
    bad[20:30] = good[20:30] * np.exp(np.arange(10))  # grows, then NaN
    bad[30:] = np.nan
    every = {"loss": np.ones(60, dtype=bool)}  # logged at every step: the NaNs are logged values
    a, b = from_columns(steps, {"loss": good}, logged=every), from_columns(steps, {"loss": bad}, logged=every)
    c = compare([("good", "g", a, diagnose_runs([a])), ("bad", "b", b, diagnose_runs([b]))])
    assert c["runs"][1]["final_loss"] is None and c["runs"][1]["first_nonfinite"] == 30
    assert c["runs"][0]["first_nonfinite"] is None and c["runs"][0]["final_loss"] == pytest.approx(good[-1], rel=1e-5)
    assert c["parting"][0]["verdict"] == "parted" and 20 <= c["parting"][0]["step"] < 30
    _, rows = table_rows(c, "en")
    assert rows[1][3] == "nan from step 30"


def test_text_table_and_lines(runs):
    p = run_cli("diagnose", runs["high"], runs["low"], env={**os.environ, "COLUMNS": "160"})
    assert p.returncode == 0, p.stderr
    lines = p.stdout.splitlines()
    head = next(ln for ln in lines if ln.startswith("run "))
    assert head.split()[-1] == "lr" and "top finding" in head and "final loss" in head
    row = next(ln for ln in lines if ln.startswith("lr3e-3 "))
    assert row.split()[-1] == "0.003"
    assert any("settings that differ: lr 0.03 | 0.003" in ln for ln in lines)
    assert any("parts from lr3e-2 at step" in ln for ln in lines)
    md = run_cli("diagnose", runs["high"], runs["low"], "--format", "md")
    assert md.returncode == 0 and "| run | status |" in md.stdout and "| lr3e-3 |" in md.stdout


def test_width_follows_columns(runs):
    for cols in (60, 200):
        p = run_cli("diagnose", runs["high"], runs["low"], env={**os.environ, "COLUMNS": str(cols)})
        assert p.returncode == 0, p.stderr
        widest = max(len(ln) for ln in p.stdout.splitlines())
        assert widest <= cols
        if cols == 200:
            assert widest > 100  # the parting sentence on one line, not folded at the old 100


def test_html_overlays_the_runs(runs, tmp_path):
    out = tmp_path / "compare.html"
    p = run_cli("diagnose", runs["high"], runs["low"], "--format", "html", "-o", out)
    assert p.returncode == 0, p.stderr
    page = out.read_text()
    import re

    data = json.loads(re.search(r'<script type="application/json" id="ld-data">(.*?)</script>', page, re.S).group(1))
    charts = {c["name"]: c for c in data["charts"]}
    for name in ("loss", "grad_norm", "lr"):
        assert [s["label"] for s in charts[name]["series"]] == ["lr3e-2", "lr3e-3"], name
    assert charts["lr"]["series"][0]["y"][0] == pytest.approx(0.03)
    assert charts["lr"]["series"][1]["y"][0] == pytest.approx(0.003)
    assert 'id="ld-comparison"' in page and "<td>0.003</td>" in page


@pytest.mark.skipif(find_browser() is None, reason="chromium + chromedriver not installed")
def test_comparison_report_in_chromium(runs, tmp_path):
    pytest.importorskip("selenium")
    out = tmp_path / "compare.html"
    assert run_cli("diagnose", runs["high"], runs["low"], "--format", "html", "-o", out).returncode == 0
    png = tmp_path / "compare.png"
    r = check_report(out, png)
    assert r["ready"] and r["console_errors"] == [] and r["state"]["errors"] == [], r
    drawn = {c["signal"] for c in r["canvases"] if c["drawn"] > 0}
    assert {"loss", "grad_norm", "lr"} <= drawn and r["blank_canvases"] == []
    assert "lr3e-3" in r["text"] and png.stat().st_size > 20_000


def test_a_folder_of_runs_is_compared(runs, tmp_path):
    folder = tmp_path / "experiments"
    folder.mkdir()
    for key in ("high", "low"):
        shutil.copytree(runs[key], folder / runs[key].name)
    c = _json(folder)["comparison"]
    assert [r["label"] for r in c["runs"]] == ["lr3e-2", "lr3e-3"] and list(c["differing"]) == ["lr"]
    (folder / "notes.txt").write_text("not a run\n")
    assert _json(folder, "--compare")["comparison"]["differing"] == {"lr": [0.03, 0.003]}  # the file skipped


def test_compare_bad_input_is_one_line(runs, tmp_path):
    p = run_cli("diagnose", runs["high"], tmp_path / "missing")
    assert p.returncode == 2 and len(p.stderr.strip().splitlines()) == 1 and "missing" in p.stderr
    p = run_cli("diagnose", runs["high"], "-")
    assert p.returncode == 2 and "standard input" in p.stderr
    p = run_cli("diagnose", runs["high"], runs["low"], "--run", "version_0")
    assert p.returncode == 2 and "--run" in p.stderr and len(p.stderr.strip().splitlines()) == 1
    lone = tmp_path / "lone"
    shutil.copytree(runs["high"], lone / "only")
    p = run_cli("diagnose", lone, "--compare")
    assert p.returncode == 2 and "comparing needs two or more" in p.stderr


def _pty(args, env, timeout: float = 120):
    """`python -m lossdoctor ARGS` on a real pseudo-terminal with `env` added (NO_COLOR kept)."""
    import pty
    import select
    import time

    master, slave = pty.openpty()
    full = {k: v for k, v in cli_env().items() if k != "NO_COLOR"}
    p = subprocess.Popen(
        [sys.executable, "-m", "lossdoctor", *map(str, args)],
        stdin=slave,
        stdout=slave,
        stderr=slave,
        env={**full, "TERM": "xterm-256color", **env},
        close_fds=True,
    )
    os.close(slave)
    out = bytearray()
    deadline = time.monotonic() + timeout
    try:
        while select.select([master], [], [], max(0.0, deadline - time.monotonic()))[0]:
            try:
                chunk = os.read(master, 1 << 16)
            except OSError:  # EIO: the child has gone
                break
            if not chunk:
                break
            out += chunk
    finally:
        os.close(master)
    return p.wait(timeout=30), out.decode("utf-8", "replace")


def test_no_color(runs):
    # the reading spinner (which hides the cursor: not a colour) is kept out: on a loaded machine
    # reading can pass its 1 s delay
    quiet = {"LOSSDOCTOR_PROGRESS_AFTER_S": "600"}
    rc, colour = _pty(["diagnose", runs["high"], runs["low"]], quiet)
    assert rc == 0 and "\x1b[" in colour
    rc, plain = _pty(["diagnose", runs["high"], runs["low"]], {**quiet, "NO_COLOR": "1"})
    assert rc == 0 and "\x1b[" not in plain and "settings that differ" in plain
    rc, plain = _pty(["diagnose", runs["high"]], {**quiet, "NO_COLOR": "1"})
    assert rc == 0 and "\x1b[" not in plain


def test_progress_line_on_a_terminal_only(runs, tmp_path):
    """The "reading PATH" spinner shows on a terminal's stderr for an input read longer than the
    delay (set to 0 here: a real slow input would cost the test seconds), and never on a pipe."""
    rc, screen = _pty(["diagnose", runs["high"], "--format", "json"], {"LOSSDOCTOR_PROGRESS_AFTER_S": "0"})
    assert rc == 0 and f"reading {runs['high']}" in screen
    rc, quick = _pty(["diagnose", runs["high"], "--format", "json"], {"LOSSDOCTOR_PROGRESS_AFTER_S": "20"})
    assert rc == 0 and "reading " not in quick  # read before the delay: no line
    p = run_cli("diagnose", runs["high"], env={**os.environ, "LOSSDOCTOR_PROGRESS_AFTER_S": "0"})
    assert p.returncode == 0 and p.stderr == ""


def test_wandb_panel_folder_reads_as_one_run(tmp_path):
    """Three panels exported as W&B writes them (`Step,<run> - <metric>,...__MIN,...__MAX`), one
    metric logged every other step: one run, the metrics on the union of the steps."""
    rng = np.random.default_rng(0)
    steps = np.arange(0, 400, 2)
    loss = 2 * np.exp(-steps / 150) + 0.02 * rng.standard_normal(steps.size)
    lr = np.minimum(steps / 40, 1) * 3e-4
    gn = 1 + 0.1 * rng.standard_normal(steps.size)

    def panel(name, metric, xs, ys):
        with open(tmp_path / name, "w", newline="") as f:
            f.write(f'Step,"bright-sun-7 - {metric}","bright-sun-7 - {metric}__MIN","bright-sun-7 - {metric}__MAX"\n')
            for s, v in zip(xs, ys):
                f.write(f"{int(s)},{float(v)!r},{float(v)!r},{float(v)!r}\n")

    panel("train_loss.csv", "train/loss", steps, loss)
    panel("lr.csv", "train/learning_rate", steps, lr)
    panel("grad_norm.csv", "train/grad_norm", steps[::2], gn[::2])
    [run] = load_path(tmp_path)
    assert run.meta["format"] == "W&B panel exports" and len(run) == steps.size
    np.testing.assert_allclose(run.cols["loss"][run.logged("loss")], loss)
    np.testing.assert_allclose(run.cols["lr"][run.logged("lr")], lr)
    assert run.logged("grad_norm").sum() == steps[::2].size
    d = _json(tmp_path)
    assert d["steps"] >= steps.size - 1 and "comparison" not in d
    (tmp_path / "other.csv").write_text("epoch,accuracy\n1,0.5\n")  # not a panel: not a panel folder
    from lossdoctor.sources.wandb_panels import panel_files

    assert panel_files(tmp_path) == []


def test_completion_scripts_complete(tmp_path):
    p = run_cli("completion", "bash")
    assert p.returncode == 0, p.stderr
    script = tmp_path / "ld.bash"
    script.write_text(p.stdout)
    bash = shutil.which("bash")
    if bash is None:
        pytest.skip("no bash")

    def complete(*words):
        line = " ".join(words)
        cmd = (
            f'source {script}; COMP_WORDS=({line}); COMP_CWORD={len(words) - 1}; _lossdoctor; echo "${{COMPREPLY[@]}}"'
        )
        return subprocess.run([bash, "-c", cmd], capture_output=True, text=True, timeout=30).stdout.split()

    assert complete("lossdoctor", "di") == ["diagnose"]
    assert "--format" in complete("lossdoctor", "diagnose", "--f")
    assert "--fail-on" in complete("lossdoctor", "verify", "--fa")
    zsh = run_cli("completion", "zsh")
    assert zsh.returncode == 0 and zsh.stdout.startswith("#compdef lossdoctor") and "bashcompinit" in zsh.stdout
    assert run_cli("completion", "fish").returncode == 2


@pytest.mark.parametrize("command", ["diagnose", "verify", "check", "completion"])
def test_help_has_examples(command):
    p = run_cli(command, "--help", env={**cli_env(), "LANG": "C.UTF-8"})
    assert p.returncode == 0
    tail = p.stdout.split("examples:", 1)
    assert len(tail) == 2 and f"lossdoctor {command} " in tail[1]


@pytest.mark.slow
def test_lightning_versions_compared_with_their_hparams(tmp_path):
    """Two real Lightning fits into one `lightning_logs/` (version_0, version_1): `--compare` reads
    both, and the settings that differ come from the hparams.yaml Lightning wrote."""
    from lightning.pytorch.loggers import CSVLogger

    import lightning_kit

    lightning_kit.fit(CSVLogger(str(tmp_path)), lr=0.05, steps=30, save_hparams=True, hparams={"batch_size": 32})
    lightning_kit.fit(CSVLogger(str(tmp_path)), lr=0.05, steps=30, save_hparams=True, hparams={"batch_size": 64})
    logs = tmp_path / "lightning_logs"
    alone = _json(logs)
    assert "comparison" not in alone  # without --compare: the newest version, as before
    c = _json(logs, "--compare")["comparison"]
    assert [r["label"] for r in c["runs"]] == ["version_0", "version_1"]
    assert c["differing"] == {"batch_size": [32, 64]}
    assert all(r["settings"]["lr"] == 0.05 and r["settings"]["optimizer"] == "SGD" for r in c["runs"])
