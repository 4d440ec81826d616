"""MLflow tracking stores written by the real mlflow client: the `mlruns/` file store and the
SQLite store (`sqlite:///.../mlflow.db`), from a real torch training loop (healthy, and one whose
SGD step is far too large so the loss overflows to inf and NaN), from HF Trainer's MLflowCallback
(`report_to="mlflow"`), and from the fault curves. lossdoctor reads both stores without mlflow."""

from __future__ import annotations

import contextlib
import json
import math
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

import lightning_kit
import logfaults
from conftest import cli_env, run_cli
from hf_console_train import train
from lossdoctor.detectors.engine import diagnose_runs
from lossdoctor.sources import load_path
from msgs import find, has

mlflow = pytest.importorskip("mlflow")


@pytest.fixture(scope="module")
def empty_db(tmp_path_factory):
    """An empty SQLite store made once: creating one runs MLflow's ~60 schema migrations (seconds),
    so each test starts from a copy of it instead."""
    path = tmp_path_factory.mktemp("mlflow-db") / "mlflow.db"
    mlflow.MlflowClient(f"sqlite:///{path}").search_experiments()
    mlflow.set_tracking_uri(None)
    return path


@pytest.fixture
def tracking(monkeypatch, empty_db):
    """Point the mlflow client at a store; MLflow >= 3.7 writes the file store only when allowed."""
    monkeypatch.setenv("MLFLOW_ALLOW_FILE_STORE", "true")
    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)
    monkeypatch.delenv("MLFLOW_RUN_ID", raising=False)

    def use(uri: str) -> None:
        if uri.startswith("sqlite:///"):
            db = Path(uri[len("sqlite:///") :])
            if not db.exists():
                shutil.copyfile(empty_db, db)
        mlflow.set_tracking_uri(uri)
        mlflow.set_experiment("lossdoctor-test")  # the client remembers the last test's experiment id

    yield use
    if mlflow.active_run():
        mlflow.end_run()
    mlflow.set_tracking_uri(None)


def torch_loop(*, explode: bool, steps: int = 80) -> list[dict[str, float]]:
    """A real regression loop, logged to the active MLflow run every step; returns what it logged.
    Healthy: a small MLP with Adam. Exploding: two stacked linear layers on inputs of scale 10
    with SGD at lr=0.003, beyond 2/curvature: the loss grows ~10x per step until the gradient norm
    overflows float32 (inf) and the weights sit at ~1e13."""
    import torch
    import torch.nn.functional as F

    torch.manual_seed(0)
    x = torch.randn(256, 8) * (10.0 if explode else 1.0)
    y = x @ torch.randn(8, 1) + 0.1 * torch.randn(256, 1)
    if explode:
        model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.Linear(16, 1))
        lr = 0.003
        opt = torch.optim.SGD(model.parameters(), lr=lr)
    else:
        model = torch.nn.Sequential(torch.nn.Linear(8, 32), torch.nn.Tanh(), torch.nn.Linear(32, 1))
        lr = 1e-2
        opt = torch.optim.Adam(model.parameters(), lr=lr)
    mlflow.log_params({"learning_rate": lr, "optimizer": type(opt).__name__, "max_grad_norm": 1e9})
    g = torch.Generator().manual_seed(1)
    logged = []
    for step in range(steps):
        idx = torch.randint(0, 256, (32,), generator=g)
        loss = F.mse_loss(model(x[idx]), y[idx])
        opt.zero_grad()
        loss.backward()
        gn = torch.nn.utils.clip_grad_norm_(model.parameters(), 1e9)
        opt.step()
        row = {"train/loss": loss.item(), "train/grad_norm": gn.item(), "lr": lr}
        mlflow.log_metrics({**row, "eval_loss": 9.0}, step=step)  # eval_loss: never the training loss
        logged.append(row)
    return logged


def _check_read_back(run, logged):
    assert run.source == "mlflow" and len(run) == len(logged)
    assert list(run.steps) == list(range(len(logged)))
    np.testing.assert_array_equal(run.cols["loss"], [r["train/loss"] for r in logged])
    np.testing.assert_array_equal(run.cols["grad_norm"], [r["train/grad_norm"] for r in logged])
    assert run.meta["columns"]["loss"] == "train/loss"


@pytest.mark.parametrize("store", ["file", "sqlite"])
@pytest.mark.parametrize("explode", [False, True], ids=["healthy", "explode"])
def test_torch_loop(tmp_path, tracking, store, explode):
    uri = f"file:{tmp_path}/mlruns" if store == "file" else f"sqlite:///{tmp_path}/mlflow.db"
    tracking(uri)
    mlflow.set_experiment("tiny")
    with mlflow.start_run(run_name="regression"):
        logged = torch_loop(explode=explode)
    losses = np.array([r["train/loss"] for r in logged])
    gns = np.array([r["train/grad_norm"] for r in logged])
    if explode:  # the loop really blew up: the loss up a millionfold, the gradient norm overflowed
        assert losses.max() > 1e6 * losses[0] and np.isfinite(gns[:3]).all() and np.isinf(gns).any()
    else:
        assert np.isfinite(losses).all() and losses[-10:].mean() < losses[:10].mean() / 3
    run = load_path(tmp_path / "mlruns" if store == "file" else tmp_path / "mlflow.db")[0]
    _check_read_back(run, logged)
    assert run.meta["optimizer"]["class"] == ("SGD" if explode else "Adam")
    assert run.meta["config_lr"] == (0.003 if explode else 1e-2)
    assert run.meta["mlflow"]["name"] == "regression" and run.meta["mlflow"]["status"] == "FINISHED"
    p = run_cli("diagnose", uri, "--format", "json")  # the tracking URI itself, as a path
    assert p.returncode == 0, p.stderr
    doc = json.loads(p.stdout)
    if explode:
        first_bad = int(np.flatnonzero(~np.isfinite(gns))[0])
        assert doc["status"] == "critical"
        assert doc["findings"][0]["cause"] in {"grad_explosion", "lr_too_high"}, doc["findings"]
        assert doc["findings"][0]["step"] <= first_bad
    else:
        assert doc["status"] == "healthy", doc["findings"]


def test_sqlite_nan_and_inf_match_mlflows_own_reader(tmp_path, tracking):
    """The SQL store keeps NaN as 0 + is_nan and Inf as the largest double: both come back as
    written, and every value agrees with what MlflowClient.get_metric_history returns."""
    tracking(f"sqlite:///{tmp_path}/mlflow.db")
    vals = [2.0, 1.5, float("inf"), float("nan"), -float("inf"), 0.0, 1e-30]
    with mlflow.start_run() as active:
        for i, v in enumerate(vals):
            mlflow.log_metric("loss", v, step=10 * i)
    run = load_path(tmp_path / "mlflow.db")[0]
    assert list(run.steps) == [10 * i for i in range(len(vals))]
    np.testing.assert_array_equal(run.cols["loss"], vals)
    assert run.logged("loss").all()
    hist = sorted(mlflow.MlflowClient().get_metric_history(active.info.run_id, "loss"), key=lambda m: m.step)
    theirs = [m.value for m in hist]
    assert [m.step for m in hist] == list(run.steps)
    for ours, t in zip(run.cols["loss"], theirs):
        if math.isnan(ours):
            assert math.isnan(t)
        elif math.isinf(ours):
            assert abs(t) == sys.float_info.max and math.copysign(1, t) == math.copysign(1, ours)
        else:
            assert ours == t


@pytest.mark.parametrize("name", ["grad_explosion", "scale_collapse"])
def test_fault_curves_through_log_batch(tmp_path, tracking, name):
    from mlflow.entities import Metric

    tracking(f"sqlite:///{tmp_path}/mlflow.db")
    curve = logfaults.CURVES[name]()
    names = {
        "loss": "training_loss",
        "grad_norm": "grad_norm",
        "lr": "learning_rate",
        "scale": "loss_scale",
        "skipped": "skipped",
    }
    with mlflow.start_run() as active:
        metrics = [
            Metric(names[c], float(curve[c][i]), 1000 + i, int(s))
            for i, s in enumerate(curve["step"])
            for c in names
            if c in curve
        ]
        client = mlflow.MlflowClient()
        for k in range(0, len(metrics), 1000):  # MLflow's batch limit
            client.log_batch(active.info.run_id, metrics=metrics[k : k + 1000])
    tracking(f"file:{tmp_path}/mlruns")  # a file store beside it (an older run): named in a note
    _file_run(tmp_path / "mlruns", "older", [1.0, 0.9, 0.8])
    run = load_path(tmp_path)[0]  # the folder holding mlflow.db
    np.testing.assert_array_equal(run.cols["loss"], curve["loss"])
    assert has(run.notes, "source.mlflow_also_file_store"), [getattr(m, "key", m) for m in run.notes]
    assert len(load_path(tmp_path / "mlruns")[0]) == 3
    logfaults.check(diagnose_runs([run]), name)


def _hf_train(out, *, lr: float, optim: str, max_grad_norm: float) -> list[dict]:
    return train(
        out, lr=lr, optim=optim, max_grad_norm=max_grad_norm, report_to=("mlflow",), save=False
    ).state.log_history


@pytest.mark.parametrize("explode", [False, True], ids=["healthy", "explode"])
def test_hf_trainer_mlflow_callback(tmp_path, tracking, monkeypatch, explode):
    pytest.importorskip("transformers")
    uri = f"sqlite:///{tmp_path}/mlflow.db"
    monkeypatch.setenv("MLFLOW_TRACKING_URI", uri)  # how the callback is pointed at a store
    monkeypatch.setenv("MLFLOW_EXPERIMENT_NAME", "hf")
    tracking(uri)
    if explode:  # plain SGD at lr=2 without clipping: the gradient norm grows to ~1e7, then NaN
        history = _hf_train(tmp_path / "out", lr=2.0, optim="sgd", max_grad_norm=0.0)
    else:
        history = _hf_train(tmp_path / "out", lr=1e-3, optim="adamw_torch", max_grad_norm=1.0)
    run = load_path(tmp_path / "mlflow.db")[0]
    entries = [h for h in history if "loss" in h]
    assert len(run) == 30 and list(run.steps) == [h["step"] for h in entries]
    assert run.meta["framework"] == "transformers" and run.meta["loss_is_interval_mean"]
    assert run.meta["max_grad_norm"] == (0.0 if explode else 1.0)
    assert run.meta["optimizer"]["class"] == ("sgd" if explode else "adamw_torch")
    assert run.meta["columns"]["loss"] == "loss"  # not the end-of-training mean `train_loss`
    gn = np.array([h["grad_norm"] for h in entries], dtype=float)
    np.testing.assert_array_equal(run.cols["grad_norm"], gn)
    report = diagnose_runs([run])
    if explode:
        first_bad = int(np.flatnonzero(~np.isfinite(gn))[0])
        assert np.isnan(run.cols["loss"][first_bad])  # logged as 0.0 by the Trainer: read as NaN
        assert report.findings[0].cause == "grad_explosion", report.findings
        assert report.findings[0].step == int(run.steps[first_bad])
    else:
        np.testing.assert_allclose(run.cols["loss"], [h["loss"] for h in entries], rtol=1e-12)
        assert report.status == "healthy", [(f.cause, f.evidence) for f in report.findings]


def _file_run(root, name: str, losses, start=None):
    mlflow.set_tracking_uri(f"file:{root}")
    mlflow.set_experiment("many")
    with mlflow.start_run(run_name=name) as r:
        for i, v in enumerate(losses):
            mlflow.log_metric("loss", v, step=i)
    return r.info.run_id


def test_several_runs_newest_read_and_run_dir_selects(tmp_path, tracking):
    tracking(f"file:{tmp_path}/mlruns")
    old = _file_run(tmp_path / "mlruns", "old", [5.0] * 12)
    new = _file_run(tmp_path / "mlruns", "new", [3.0 - 0.1 * i for i in range(20)])
    with mlflow.start_run(run_name="no-metrics"):
        mlflow.log_param("x", 1)
    run = load_path(tmp_path)[0]  # the folder holding mlruns/
    assert run.meta["mlflow"]["id"] == new and len(run) == 20
    runs = find(run.notes, "source.mlflow_runs")
    assert runs.values["n"] == 3 and old in runs.values["others"], runs.data()
    run_dir = next((tmp_path / "mlruns").glob(f"*/{old}"))
    picked = load_path(run_dir)[0]
    assert picked.meta["mlflow"]["id"] == old and len(picked) == 12
    exp_dir = run_dir.parent
    assert load_path(exp_dir)[0].meta["mlflow"]["id"] == new


@pytest.mark.parametrize("store", ["file", "sqlite"])
def test_run_option_selects_a_run_in_a_store(tmp_path, tracking, store):
    """A SQLite store has no run directory to point at: `--run` names the run (id, id prefix, name)."""
    uri = f"file:{tmp_path}/mlruns" if store == "file" else f"sqlite:///{tmp_path}/mlflow.db"
    tracking(uri)
    ids = {}
    for name, losses in (("old", [5.0] * 12), ("new", [3.0 - 0.1 * i for i in range(20)])):
        with mlflow.start_run(run_name=name) as r:
            for i, v in enumerate(losses):
                mlflow.log_metric("loss", v, step=i)
        ids[name] = r.info.run_id
    target = tmp_path / ("mlruns" if store == "file" else "mlflow.db")
    assert load_path(target)[0].meta["mlflow"]["id"] == ids["new"]
    for want in (ids["old"], ids["old"][:8], "old"):
        run = load_path(target, select=want)[0]
        assert run.meta["mlflow"]["id"] == ids["old"] and len(run) == 12
    r = run_cli("diagnose", uri, "--run", "old", "--format", "json")
    assert r.returncode in (0, 1) and json.loads(r.stdout)["steps"] == 12, r.stderr
    for bad in ("nope", ""):
        r = run_cli("diagnose", uri, "--run", bad)
        assert r.returncode == 2 and "Traceback" not in r.stderr and len(r.stderr.strip().splitlines()) == 1
    (tmp_path / "log.csv").write_text("step,loss\n" + "".join(f"{i},{3 - 0.1 * i}\n" for i in range(20)))
    r = run_cli("diagnose", str(tmp_path / "log.csv"), "--run", "old")
    assert r.returncode == 2 and "MLflow" in r.stderr and "Traceback" not in r.stderr


def test_deleted_run_is_skipped(tmp_path, tracking):
    tracking(f"sqlite:///{tmp_path}/mlflow.db")
    with mlflow.start_run() as keep:
        for i in range(10):
            mlflow.log_metric("train_loss", 2.0 - 0.1 * i, step=i)
    with mlflow.start_run() as gone:
        for i in range(10):
            mlflow.log_metric("train_loss", 9.0, step=i)
    mlflow.delete_run(gone.info.run_id)
    run = load_path(f"sqlite:///{tmp_path}/mlflow.db")[0]
    assert run.meta["mlflow"]["id"] == keep.info.run_id and run.cols["loss"][0] == 2.0


def one_line_error(p) -> str:
    assert p.returncode == 2, (p.returncode, p.stdout[-300:], p.stderr)
    lines = [x for x in p.stderr.splitlines() if x.strip()]
    assert len(lines) == 1 and "Traceback" not in p.stderr, p.stderr
    return lines[0]


def test_empty_mlruns_exit_2(tmp_path, tracking):
    tracking(f"file:{tmp_path}/mlruns")
    mlflow.set_experiment("nothing-yet")  # what the client leaves before the first run
    assert "no MLflow runs" in one_line_error(run_cli("diagnose", tmp_path / "mlruns"))
    (tmp_path / "bare" / "mlruns").mkdir(parents=True)
    assert "no MLflow runs" in one_line_error(run_cli("diagnose", tmp_path / "bare" / "mlruns"))


def test_run_without_training_metrics_exit_2(tmp_path, tracking):
    tracking(f"sqlite:///{tmp_path}/mlflow.db")
    with mlflow.start_run():
        mlflow.log_metric("accuracy", 0.5, step=1)
        mlflow.log_metric("eval_loss", 1.0, step=1)
    line = one_line_error(run_cli("diagnose", tmp_path / "mlflow.db"))
    assert "no training metric" in line and "'accuracy'" in line


def test_sqlite_that_is_not_mlflow_exit_2(tmp_path):
    import sqlite3

    db = tmp_path / "other.db"
    con = sqlite3.connect(db)
    con.execute("CREATE TABLE trials (id INTEGER, value REAL)")
    con.commit()
    con.close()
    assert "not an MLflow tracking store" in one_line_error(run_cli("diagnose", db))
    damaged = tmp_path / "mlflow.db"
    damaged.write_bytes(b"SQLite format 3\x00" + b"\xff" * 2000)
    assert "cannot read this SQLite database" in one_line_error(run_cli("diagnose", damaged))


def test_malformed_metric_line_reads_up_to_the_damage(tmp_path, tracking):
    tracking(f"file:{tmp_path}/mlruns")
    _file_run(tmp_path / "mlruns", "torn", [3.0 - 0.05 * i for i in range(30)])
    f = next((tmp_path / "mlruns").glob("*/*/metrics/loss"))
    lines = f.read_text().splitlines()
    f.write_text("\n".join(lines[:20] + ["1796118441000 2.0 garbage"] + lines[21:]) + "\n")
    run = load_path(tmp_path / "mlruns")[0]
    assert len(run) == 20 and run.cols["loss"][19] == pytest.approx(3.0 - 0.05 * 19)
    assert has(run.notes, "source.mlflow_stopped", line=21, n=20), [getattr(m, "key", m) for m in run.notes]
    p = run_cli("diagnose", tmp_path / "mlruns")
    assert p.returncode == 0 and "warning" in p.stderr and "line 21" in p.stderr
    f.write_text("not a metric line\n")
    line = one_line_error(run_cli("diagnose", tmp_path / "mlruns"))
    assert "no readable value" in line and "line 1" in line


@settings(max_examples=200, deadline=None)
@given(
    st.lists(
        st.one_of(
            st.sampled_from(
                [
                    "1700000000000 2.5 3",
                    "1 nan 4",
                    "1 inf 5",
                    "1 -inf 7",
                    "1 2.0",
                    "1 1e400 2",
                    "1 2 1e300",
                    "1 2 1.5",
                    "",
                    "x y z",
                ]
            ),
            st.text(max_size=30),
        ),
        max_size=20,
    )
)
def test_metric_lines_fuzz(lines):
    """Whatever the lines, a metric file reads to aligned (steps, values) or stops with a note."""
    from lossdoctor.sources.mlflow_store import parse_metric_file

    notes: list[str] = []
    steps, values = parse_metric_file("\n".join(lines).encode("utf-8", "surrogatepass"), "loss", notes)
    assert steps.shape == values.shape and steps.dtype == np.int64
    assert len(notes) <= 2
    if lines and all(len(x.split()) == 3 and x == " ".join(x.split()) for x in lines):
        assert steps.size == len(lines) or notes  # every line read, or a note says where it stopped


_PLAIN_TOKENS = ["0", "1", "17", "1700000000100", "2.5", "-0.0", "1e-05", "1E5", "3.3050000000000002", "nan", "-3"]
_ODD_TOKENS = ["-0", "inf", "-inf", "-nan", "+1", "1.", ".5", "1e400", "18446744073709551617", "1_0", "null", "0x10"]
_ODD_TOKENS += ["\u00e9", "\x1c", "1\r", "2.5\u00a0", "1e-0", "-00"]
#: a metric file's lines: mostly three plain tokens (`timestamp value step`), some of odd ones
METRIC_LINES = st.lists(
    st.one_of(
        st.lists(st.sampled_from(_PLAIN_TOKENS), min_size=3, max_size=3),
        st.lists(st.sampled_from(_PLAIN_TOKENS + _ODD_TOKENS), min_size=2, max_size=4),
    ).map(" ".join),
    max_size=40,
)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    METRIC_LINES,
    st.booleans(),
    st.integers(8, 300),
)
@example(["1 -0 1", "2 2.5 2"], True, 300)  # JSON reads -0 as the integer 0; float() as -0.0
@example(["1700000000100 2.5 170000000000000 5 6"], True, 16)  # a line cut by a block, each part 3 numbers
def test_a_metric_file_read_by_blocks_is_read_as_whole(tmp_path, lines, newline_at_end, block):
    """A metric file read block by block (the blocks parsed by JSON where their tokens are spelled as
    JSON numbers) gives what the whole file's parse gives: the same steps, values (NaN, the sign of a
    zero, infinities), notes, for plain, odd and damaged lines and any cut of the blocks."""
    from lossdoctor.sources import mlflow_store

    path, want, whole_notes = whole_metric_file(tmp_path, lines, newline_at_end)
    notes: list[str] = []
    with block_size("_BLOCK", block):
        got = mlflow_store.read_metric_file(path, "loss", notes)
    assert got[0].dtype == want[0].dtype
    assert_same_parse(got, want, notes, whole_notes)


def whole_metric_file(tmp_path, lines: list[str], newline_at_end: bool):
    """The MLflow metric file of `lines` written under tmp_path, with the whole file's parse and its
    notes: what any block-wise read of it must give."""
    from lossdoctor.sources import mlflow_store

    path = tmp_path / "loss"
    data = "\n".join(lines).encode() + (b"\n" if newline_at_end and lines else b"")
    path.write_bytes(data)
    whole_notes: list[str] = []
    return path, mlflow_store.parse_metric_file(data, "loss", whole_notes), whole_notes


@contextlib.contextmanager
def block_size(name: str, block: int):
    """`mlflow_store.<name>` (a block size in bytes) set to `block` inside the block (hypothesis runs
    the test many times in one function scope: no monkeypatch fixture)."""
    from lossdoctor.sources import mlflow_store

    saved = getattr(mlflow_store, name)
    setattr(mlflow_store, name, block)
    try:
        yield
    finally:
        setattr(mlflow_store, name, saved)


def assert_same_parse(got, want, notes: list[str], whole_notes: list[str]) -> None:
    """The same steps, values (NaN, the sign of a zero) and notes as the whole file's parse."""
    assert np.array_equal(got[0], want[0]) and np.array_equal(got[1], want[1], equal_nan=True)
    assert np.array_equal(np.signbit(got[1]), np.signbit(want[1]))
    assert list(map(repr, notes)) == list(map(repr, whole_notes))


def test_misaligned_lines_are_not_regrouped():
    """Two bad lines whose token counts add up to two good ones must not be read as two rows."""
    from lossdoctor.sources.mlflow_store import parse_metric_file

    notes: list[str] = []
    steps, values = parse_metric_file(b"1 2.5 0\n2 2.0\n3 1.5 1 7\n", "loss", notes)
    assert list(steps) == [0] and list(values) == [2.5]
    assert notes and has(notes[:1], "source.mlflow_stopped", line=2, n=1), notes
    steps, values = parse_metric_file(b"1 2.5\n2 2.0\n", "loss", notes)  # MLflow 0.x: no step
    assert list(steps) == [0, 1] and list(values) == [2.5, 2.0] and has(notes[-1:], "source.mlflow_no_steps")


def test_reading_imports_neither_mlflow_nor_torch(tmp_path, tracking):
    tracking(f"file:{tmp_path}/mlruns")
    _file_run(tmp_path / "mlruns", "x", [1.0, 0.9, 0.8, 0.7])
    tracking(f"sqlite:///{tmp_path}/mlflow.db")
    with mlflow.start_run():
        mlflow.log_metric("loss", 1.0, step=0)
        mlflow.log_metric("loss", 0.9, step=1)
    for target in (tmp_path / "mlruns", tmp_path / "mlflow.db"):
        code = (
            "import sys; from lossdoctor.cli.main import main; "
            f"rc = main(['diagnose', {str(target)!r}, '--format', 'json']); "
            "assert 'torch' not in sys.modules and 'mlflow' not in sys.modules, 'imported'; sys.exit(rc)"
        )
        p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=cli_env())
        assert p.returncode == 0, p.stderr


def test_logged_model_metrics_are_not_a_run(tmp_path, tracking):
    """MLflow 3 also files a logged model's metrics under mlruns/<exp>/models/<model_id>/metrics:
    that folder looks like a run directory, but it is the same numbers again, not another run."""
    if not hasattr(mlflow, "initialize_logged_model"):
        pytest.skip("logged models are MLflow 3")
    tracking(f"file:{tmp_path}/mlruns")
    with mlflow.start_run() as active:
        model = mlflow.initialize_logged_model(name="m")
        for i in range(12):
            mlflow.log_metric("loss", 2.0 - 0.1 * i, step=i, model_id=model.model_id)
    assert list((tmp_path / "mlruns").glob("*/models/*/metrics/loss"))
    run = load_path(tmp_path / "mlruns")[0]
    assert run.meta["mlflow"]["id"] == active.info.run_id and len(run) == 12
    assert not has(run.notes, "source.mlflow_runs"), run.notes


def test_lightning_mlflow_logger(tmp_path, tracking):
    """Lightning's MLFlowLogger with LearningRateMonitor: `train_loss_step`/`train_loss_epoch` and
    `lr-SGD`, logged against the global step; hparams become params. The per-step loss is used."""
    pytest.importorskip("lightning")
    from lightning.pytorch.loggers import MLFlowLogger

    uri = f"sqlite:///{tmp_path}/mlflow.db"
    tracking(uri)
    seen: list[float] = []
    lightning_kit.fit(
        MLFlowLogger(experiment_name="pl", tracking_uri=uri),
        lr=0.01,
        save_hparams=True,
        hparams={"gradient_clip_val": 0.5},
        on_epoch=True,
        seen=seen,
    )
    run = load_path(tmp_path / "mlflow.db")[0]
    assert run.meta["columns"]["loss"] == "train_loss_step" and run.meta["columns"]["lr"] == "lr-SGD"
    np.testing.assert_allclose(run.cols["loss"][run.logged("loss")], seen, rtol=1e-6)
    assert run.meta["config_lr"] == 0.01 and run.meta["max_grad_norm"] == 0.5
    assert diagnose_runs([run]).status == "healthy"


@pytest.mark.parametrize("store", ["file", "sqlite"])
def test_metric_logged_without_step_is_numbered_in_order(tmp_path, tracking, store):
    tracking(f"file:{tmp_path}/mlruns" if store == "file" else f"sqlite:///{tmp_path}/mlflow.db")
    losses = [3.0 - 0.1 * i for i in range(20)]
    with mlflow.start_run():
        for v in losses:
            mlflow.log_metric("loss", v)  # no step=: MLflow files each at step 0
    run = load_path(tmp_path / ("mlruns" if store == "file" else "mlflow.db"))[0]
    assert list(run.steps) == list(range(20))
    np.testing.assert_array_equal(run.cols["loss"], losses)
    assert has(run.notes, "source.mlflow_unstepped", step=0), [getattr(m, "key", m) for m in run.notes]


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.binary(max_size=3000), st.sampled_from(["mlflow.db", "runs.sqlite"]))
def test_damaged_sqlite_fuzz(tmp_path, data, name):
    """Whatever follows SQLite's header, reading ends in runs or one SourceError."""
    from lossdoctor.sources import SourceError

    p = tmp_path / name
    p.write_bytes(b"SQLite format 3\x00" + data)
    try:
        load_path(p)
    except SourceError as e:
        assert "\n" not in str(e)


@pytest.mark.parametrize("cut", [0.05, 0.3, 0.6, 0.9, 0.999])
def test_truncated_real_store(tmp_path, tracking, cut):
    """A real mlflow.db cut short (a copy interrupted, a full disk): runs or one clear line."""
    tracking(f"sqlite:///{tmp_path}/mlflow.db")
    with mlflow.start_run():
        for i in range(30):
            mlflow.log_metric("loss", 2.0 - 0.01 * i, step=i)
    data = (tmp_path / "mlflow.db").read_bytes()
    cut_db = tmp_path / "cut" / "mlflow.db"
    cut_db.parent.mkdir()
    cut_db.write_bytes(data[: int(len(data) * cut)])
    p = run_cli("diagnose", cut_db)
    assert p.returncode in (0, 2) and "Traceback" not in p.stderr, p.stderr
    if p.returncode == 2:
        one_line_error(p)
