"""Findings where people look: `on_finding`, the run's TensorBoard / W&B / MLflow (real writers,
offline, read back with their own readers), and live alerts under a tqdm bar."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap

import pytest
import torch
from torch import nn
from torch.nn import functional as F

import lossdoctor
from conftest import cli_env

BAD_FROM = 30  # the step from which one sample of every batch holds a NaN (nonfinite_data, critical)


def _mlp(seed=0):
    torch.manual_seed(seed)
    return nn.Sequential(nn.Linear(8, 32), nn.ReLU(), nn.Linear(32, 3))


def _batch(i, bad=True):
    g = torch.Generator().manual_seed(i)
    x, y = torch.randn(6, 8, generator=g), torch.randint(0, 3, (6,), generator=g)
    if bad and i >= BAD_FROM:
        x[0, 0] = float("nan")
    return x, y


def _train(log_dir, steps=40, bad=True, bar=None, **options):
    """The plain loop under `watch`; NaN data from step 30 (bad=True). Returns the monitor, model."""
    model = _mlp()
    opt = torch.optim.SGD(model.parameters(), lr=0.05)
    with lossdoctor.watch(model, opt, log_dir=log_dir, **options) as mon:
        for i in range(steps):
            x, y = _batch(i, bad)
            opt.zero_grad()
            loss = F.cross_entropy(model(x), y)
            loss.backward()
            opt.step()
            mon.step(loss, batch=(x, y))
            if bar is not None:
                bar.update(1)
    return mon, model


def test_on_finding_gets_the_live_alert_then_the_final_findings(tmp_path):
    calls = []
    mon, _ = _train(
        tmp_path, on_finding=lambda f, step: calls.append((f.cause, f.severity, f.step, step)), alerts=False
    )
    live = [c for c in calls if c[3] == BAD_FROM]
    assert live == [("nonfinite_data", "critical", BAD_FROM, BAD_FROM)], calls  # as it happened
    final = [c for c in calls if c[3] == 39]  # at close: the last recorded step
    assert ("nonfinite_data", "critical", BAD_FROM, 39) in final
    assert [c[0] for c in final] == [f.cause for f in mon.findings]


def test_on_finding_with_a_final_parameter_is_told_which(tmp_path):
    calls = []
    _train(tmp_path, alerts=False, on_finding=lambda f, step, final: calls.append((f.cause, step, final)))
    assert ("nonfinite_data", BAD_FROM, False) in calls and ("nonfinite_data", 39, True) in calls
    assert all(final == (step == 39) for _, step, final in calls)


def test_on_finding_not_called_on_a_healthy_run_with_an_alert(tmp_path):
    calls = []
    _train(tmp_path, bad=False, on_finding=lambda f, step: calls.append(f), alerts=False)
    assert all(f.severity == "info" for f in calls), [(f.cause, f.severity) for f in calls]


def test_on_finding_that_raises_is_one_note_and_training_is_untouched(tmp_path, caplog):
    def boom(f, step):
        raise RuntimeError("webhook down")

    _, plain = _train(tmp_path / "plain", alerts=False)
    mon, raising = _train(tmp_path / "raising", on_finding=boom, alerts=False)
    for a, b in zip(plain.state_dict().values(), raising.state_dict().values()):
        assert a.numpy().tobytes() == b.numpy().tobytes()
    assert mon.step_idx == 40
    meta = json.loads((tmp_path / "raising" / "meta.json").read_text())
    keys = [d and d["key"] for d in meta["monitor_notes_data"]]
    assert keys.count("integrations.sink_failed") == 1, keys  # called several times, noted once
    data = meta["monitor_notes_data"][keys.index("integrations.sink_failed")]
    assert data["values"]["part"] == "on_finding" and "webhook down" in data["values"]["error"]
    assert sum("webhook down" in r.getMessage() for r in caplog.records) == 1


def test_bad_sink_options_are_refused_before_anything_is_installed(tmp_path):
    model = _mlp()
    opt = torch.optim.SGD(model.parameters(), lr=0.05)
    for bad in ({"on_finding": 3}, {"sinks": "yes"}, {"tensorboard": "runs/"}):
        with pytest.raises(ValueError):
            lossdoctor.watch(model, opt, log_dir=tmp_path, **bad)
    assert not model._forward_hooks and not list(tmp_path.iterdir())


def _tb_read(path):
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    ea = EventAccumulator(str(path), size_guidance={"tensors": 0, "scalars": 0})
    ea.Reload()
    return ea


def _tb_text(ea, tag):
    return [(e.step, e.tensor_proto.string_val[0].decode()) for e in ea.Tensors(tag)]


def test_tensorboard_gets_alerts_findings_and_scalars(tmp_path):
    from torch.utils.tensorboard import SummaryWriter

    writer = SummaryWriter(str(tmp_path / "tb"))
    _train(tmp_path / "run", tensorboard=writer, alerts=False)
    writer.close()
    ea = _tb_read(tmp_path / "tb")
    alerts = _tb_text(ea, "lossdoctor/alerts/text_summary")
    assert len(alerts) == 1 and alerts[0][0] == BAD_FROM and "nonfinite_data" in alerts[0][1]
    ((step, text),) = _tb_text(ea, "lossdoctor/findings/text_summary")
    assert step == 39 and "nonfinite_data" in text
    sev = ea.Scalars("lossdoctor/severity/nonfinite_data")
    assert [(s.step, s.value) for s in sev] == [(BAD_FROM, 2.0), (39, 2.0)]  # the alert, the final
    assert [s.value for s in ea.Scalars("lossdoctor/first_bad_step")] == [BAD_FROM]
    assert [s.value for s in ea.Scalars("lossdoctor/status")] == [2.0]  # critical


def test_a_writer_found_twice_is_written_once(tmp_path):
    from torch.utils.tensorboard import SummaryWriter

    from lossdoctor.integrations.sinks import sinks_of

    writer = SummaryWriter(str(tmp_path / "tb"))
    model = _mlp()
    opt = torch.optim.SGD(model.parameters(), lr=0.05)
    with lossdoctor.watch(model, opt, log_dir=tmp_path / "run", tensorboard=writer, alerts=False) as mon:
        sinks_of(mon).add_tensorboard(lambda: writer)  # as a trainer's logger would add it again
        for i in range(40):
            x, y = _batch(i)
            opt.zero_grad()
            F.cross_entropy(model(x), y).backward()
            opt.step()
            mon.step(None, batch=(x, y))
    writer.close()
    assert len(_tb_text(_tb_read(tmp_path / "tb"), "lossdoctor/alerts/text_summary")) == 1


def test_tensorboard_healthy_run_and_off_switch(tmp_path):
    from torch.utils.tensorboard import SummaryWriter

    writer = SummaryWriter(str(tmp_path / "tb"))
    _train(tmp_path / "run", bad=False, tensorboard=writer, alerts=False)
    writer.close()
    ea = _tb_read(tmp_path / "tb")
    assert [s.value for s in ea.Scalars("lossdoctor/status")] == [0.0]
    assert "lossdoctor/first_bad_step" not in ea.Tags()["scalars"]
    assert "lossdoctor/alerts/text_summary" not in ea.Tags()["tensors"]

    calls = []
    off = SummaryWriter(str(tmp_path / "off"))
    off.add_scalar("train/loss", 1.0, 0)  # the user's own scalars stay the only ones
    _train(
        tmp_path / "run-off",
        tensorboard=off,
        sinks=False,
        alerts=False,
        on_finding=lambda f, step: calls.append(f.cause),
    )
    off.close()
    tags = _tb_read(tmp_path / "off").Tags()
    assert tags["scalars"] == ["train/loss"] and not tags["tensors"]
    assert "nonfinite_data" in calls  # on_finding is not a sink: still called


@pytest.fixture
def offline_wandb(tmp_path, monkeypatch):
    """wandb in offline mode from the environment; its process-wide setup (which reads the
    environment once) is torn down before and after, so tests do not see each other's."""
    wandb = pytest.importorskip("wandb")
    for k, v in {
        "WANDB_MODE": "offline",
        "WANDB_DIR": str(tmp_path),
        "WANDB_SILENT": "true",
        "WANDB_CONSOLE": "off",
        "WANDB_PROJECT": "lossdoctor-test",
    }.items():
        monkeypatch.setenv(k, v)
    wandb.teardown()
    yield wandb
    if wandb.run is not None:
        wandb.run.finish()
    wandb.teardown()


def _finish_wandb(wandb, run=None):
    """Finish the run and shut wandb's service down: `finish()` may return before the service has
    written the run's last records (its summary) to the .wandb file, which teardown waits for."""
    run = run if run is not None else wandb.run
    if run is not None:
        run.finish()
    wandb.teardown()


def _wandb_records(root):
    from wandb.proto import wandb_internal_pb2 as pb

    from lossdoctor.sources.wandb import iter_records

    (path,) = root.glob("wandb/offline-run-*/run-*.wandb")
    out = []
    for payload in iter_records(path.read_bytes(), [], path.name):
        rec = pb.Record()
        rec.ParseFromString(payload)
        out.append(rec)
    return out


def _wandb_summary(records):
    """The run summary as the records set it, keyed 'a/b' (a nested key joined)."""
    summary = {}
    for rec in records:
        if rec.WhichOneof("record_type") == "summary":
            for item in rec.summary.update:
                summary["/".join(item.nested_key) if item.nested_key else item.key] = json.loads(item.value_json)
    return summary


def test_wandb_offline_run_summary_and_alert(tmp_path, offline_wandb):
    wandb = offline_wandb
    run = wandb.init(
        mode="offline",
        project="lossdoctor-test",
        dir=str(tmp_path),
        settings=wandb.Settings(silent=True, console="off", x_disable_stats=True),
    )
    try:
        _train(tmp_path / "run", alerts=False)
    finally:
        _finish_wandb(wandb, run)
    recs = _wandb_records(tmp_path)
    summary = _wandb_summary(recs)
    assert summary.get("lossdoctor/cause") == "nonfinite_data", sorted(summary)
    assert summary["lossdoctor/status"] == "critical"
    assert summary["lossdoctor/step"] == BAD_FROM and summary["lossdoctor/first_bad_step"] == BAD_FROM
    assert summary["lossdoctor/alert_cause"] == "nonfinite_data" and summary["lossdoctor/alert_step"] == BAD_FROM
    assert summary["lossdoctor/findings"][0]["cause"] == "nonfinite_data"
    alerts = [r.alert for r in recs if r.WhichOneof("record_type") == "alert"]  # sent when the run syncs
    assert [a.title for a in alerts] == ["lossdoctor: nonfinite_data (critical)"]


def test_mlflow_file_store_tags(tmp_path, monkeypatch):
    mlflow = pytest.importorskip("mlflow")
    monkeypatch.setenv("MLFLOW_ALLOW_FILE_STORE", "true")  # MLflow 3 keeps the file store behind a switch
    from mlflow.tracking import MlflowClient

    mlflow.set_tracking_uri((tmp_path / "mlruns").as_uri())
    monkeypatch.delenv("MLFLOW_EXPERIMENT_ID", raising=False)
    try:
        # an experiment of this store: an earlier test's active experiment id would point elsewhere
        exp = mlflow.set_experiment("lossdoctor-sinks")
        with mlflow.start_run(experiment_id=exp.experiment_id) as active:
            _train(tmp_path / "run", alerts=False)
        tags = MlflowClient().get_run(active.info.run_id).data.tags
    finally:
        mlflow.set_tracking_uri(None)
    assert tags["lossdoctor.cause"] == "nonfinite_data" and tags["lossdoctor.severity"] == "critical"
    assert tags["lossdoctor.step"] == str(BAD_FROM) and tags["lossdoctor.status"] == "critical"
    assert tags["lossdoctor.alert_cause"] == "nonfinite_data" and tags["lossdoctor.alert_step"] == str(BAD_FROM)
    assert "nonfinite_data" in tags["lossdoctor.causes"].split(",")


def test_alert_under_a_tqdm_bar_is_on_its_own_line(tmp_path, capsys):
    from tqdm import tqdm

    with tqdm(total=40, file=sys.stderr, mininterval=0, ascii=True) as bar:
        _train(tmp_path, bar=bar)
    err = capsys.readouterr().err
    pieces = [p for chunk in err.split("\n") for p in chunk.split("\r")]
    alert = [p for p in pieces if "CRITICAL nonfinite_data" in p]
    assert len(alert) == 1 and alert[0].startswith("lossdoctor: CRITICAL nonfinite_data"), alert
    after = pieces[pieces.index(alert[0]) + 1 :]
    assert any("40/40" in p for p in after)  # the bar is drawn again below the alert and goes on


def test_no_tracker_library_is_imported(tmp_path):
    """A run that does not use wandb, mlflow or tensorboard does not get them imported."""
    script = textwrap.dedent(f"""
        import sys, torch
        from torch import nn
        import lossdoctor
        model = nn.Linear(4, 2)
        opt = torch.optim.SGD(model.parameters(), lr=0.1)
        with lossdoctor.watch(model, opt, log_dir={str(tmp_path / "run")!r}, alerts=False) as mon:
            for i in range(30):
                opt.zero_grad(); loss = model(torch.randn(3, 4)).pow(2).mean(); loss.backward(); opt.step()
                mon.step(loss)
        print(sorted(m for m in ("wandb", "mlflow", "tensorboard", "tensorboardX") if m in sys.modules))
    """)
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120, env=cli_env())
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "[]", out.stdout


@pytest.mark.parametrize("mask", ["all", "prompt"])
def test_hf_trainer_report_to_tensorboard_gets_the_findings(tmp_path, monkeypatch, capsys, mask):
    """`report_to=["tensorboard"]`: the Trainer's own writer (found through its TensorBoardCallback,
    which closes it at train end, before lossdoctor's final findings) holds lossdoctor's too; the
    live alert under the Trainer's tqdm bar is on its own line."""
    pytest.importorskip("transformers")
    from transformers import Trainer, TrainingArguments

    from lossdoctor.integrations.transformers import LossDoctorCallback
    from test_integrations_transformers import TokenData, gpt2

    monkeypatch.setenv("TENSORBOARD_LOGGING_DIR", str(tmp_path / "tb"))  # HF 5's place for it
    calls = []
    cb = LossDoctorCallback(log_dir=tmp_path / "ld", on_finding=lambda f, s: calls.append((f.cause, f.severity)))
    args = TrainingArguments(
        output_dir=str(tmp_path / "out"),
        per_device_train_batch_size=4,
        max_steps=4,
        logging_steps=1,
        save_strategy="no",
        report_to=["tensorboard"],
        use_cpu=True,
        disable_tqdm=False,
        dataloader_num_workers=0,
    )
    Trainer(model=gpt2(), args=args, train_dataset=TokenData(32, mask), callbacks=[cb]).train()
    err = capsys.readouterr().err
    ea = _tb_read(tmp_path / "tb")
    assert any(t.startswith("train/") for t in ea.Tags()["scalars"])  # the Trainer's own scalars, same run
    ((_, text),) = _tb_text(ea, "lossdoctor/findings/text_summary")  # written after the Trainer closed it
    if mask == "prompt":  # healthy: no alert, the status 0, still in the Trainer's writer
        assert "lossdoctor/alerts/text_summary" not in ea.Tags()["tensors"]
        assert [s.value for s in ea.Scalars("lossdoctor/status")] == [0.0]
        assert all(sev == "info" for _, sev in calls), calls
        return
    assert "label_mask_empty" in text
    assert [s.value for s in ea.Scalars("lossdoctor/severity/label_mask_empty")][-1] == 2.0
    assert ("label_mask_empty", "critical") in calls  # the callback's constructor takes on_finding
    pieces = [p for chunk in err.split("\n") for p in chunk.split("\r")]
    alert = [p for p in pieces if "CRITICAL label_mask_empty" in p]
    assert alert and all(p.startswith("lossdoctor: CRITICAL label_mask_empty") for p in alert), alert
    assert any("4/4" in p for p in pieces[pieces.index(alert[0]) :])  # the Trainer's bar went on below it


def _lightning_fit(tmp_path, logger):
    """A Lightning fit of a small regressor whose batches hold NaN from step 30 on, watched."""
    L = pytest.importorskip("lightning")

    from lossdoctor.integrations.lightning import LossDoctorCallback

    class Regressor(L.LightningModule):
        def __init__(self):
            super().__init__()
            self.net = nn.Sequential(nn.Linear(8, 16), nn.Tanh(), nn.Linear(16, 1))

        def training_step(self, batch, i):
            x, y = batch
            loss = F.mse_loss(self.net(x), y)
            self.log("train_loss", loss, on_step=True)
            return loss

        def configure_optimizers(self):
            return torch.optim.SGD(self.parameters(), lr=0.01)

    torch.manual_seed(0)
    x = torch.randn(640, 8, generator=torch.Generator().manual_seed(0))
    x[16 * BAD_FROM :, 0] = float("nan")  # every batch from step 30 on holds NaN
    data = torch.utils.data.DataLoader(torch.utils.data.TensorDataset(x, x[:, 1:2]), batch_size=16)
    trainer = L.Trainer(
        max_steps=40,
        logger=logger,
        callbacks=[LossDoctorCallback(log_dir=tmp_path / "ld", alerts=False)],
        log_every_n_steps=1,
        enable_checkpointing=False,
        enable_progress_bar=False,
        enable_model_summary=False,
        accelerator="cpu",
    )
    trainer.fit(Regressor(), data)


def test_lightning_tensorboard_logger_gets_the_findings(tmp_path):
    pytest.importorskip("lightning")
    from lightning.pytorch.loggers import TensorBoardLogger

    _lightning_fit(tmp_path, TensorBoardLogger(str(tmp_path / "tb"), name="", version="v"))
    ea = _tb_read(tmp_path / "tb" / "v")
    assert "train_loss" in ea.Tags()["scalars"]
    alerts = _tb_text(ea, "lossdoctor/alerts/text_summary")
    assert alerts and alerts[0][0] == BAD_FROM and "nonfinite_data" in alerts[0][1]
    ((_, text),) = _tb_text(ea, "lossdoctor/findings/text_summary")
    assert "nonfinite_data" in text


def test_lightning_mlflow_and_wandb_loggers_get_the_findings(tmp_path, monkeypatch, offline_wandb):
    """Lightning's MLFlowLogger starts no active run (its client and run id are used) and its
    WandbLogger holds its own run."""
    pytest.importorskip("lightning")
    pytest.importorskip("mlflow")
    wandb = offline_wandb
    from lightning.pytorch.loggers import MLFlowLogger, WandbLogger
    from mlflow.tracking import MlflowClient

    monkeypatch.setenv("MLFLOW_ALLOW_FILE_STORE", "true")
    uri = (tmp_path / "mlruns").as_uri()
    ml = MLFlowLogger(experiment_name="ld", tracking_uri=uri)
    wb = WandbLogger(
        project="lossdoctor-test",
        save_dir=str(tmp_path),
        offline=True,
        settings=wandb.Settings(mode="offline", silent=True, console="off", x_disable_stats=True),
    )
    try:
        _lightning_fit(tmp_path, [ml, wb])
    finally:
        _finish_wandb(wandb)
    tags = MlflowClient(uri).get_run(ml.run_id).data.tags
    assert tags["lossdoctor.cause"] == "nonfinite_data" and tags["lossdoctor.step"] == str(BAD_FROM)
    summary = _wandb_summary(_wandb_records(tmp_path))
    assert summary.get("lossdoctor/cause") == "nonfinite_data", sorted(summary)
    assert summary["lossdoctor/alert_step"] == BAD_FROM


@pytest.mark.slow  # ~15 s on the shared 2-core machine (mlflow's and wandb's imports, W&B's core process)
def test_hf_trainer_report_to_mlflow_and_wandb_get_the_findings(tmp_path, monkeypatch, offline_wandb):
    """HF's MLflowCallback ends its run in its own on_train_end, before lossdoctor's final findings:
    the run remembered at start still gets its tags. WandbCallback's offline run gets the summary."""
    pytest.importorskip("transformers")
    mlflow = pytest.importorskip("mlflow")
    from mlflow.tracking import MlflowClient
    from transformers import Trainer, TrainingArguments

    from lossdoctor.integrations.transformers import LossDoctorCallback
    from test_integrations_transformers import TokenData, gpt2

    uri = (tmp_path / "mlruns").as_uri()
    for k, v in {"MLFLOW_ALLOW_FILE_STORE": "true", "MLFLOW_TRACKING_URI": uri}.items():
        monkeypatch.setenv(k, v)
    mlflow.set_tracking_uri(uri)  # as the environment says (another library may have set it in this process)
    cb = LossDoctorCallback(log_dir=tmp_path / "ld", alerts=False)
    args = TrainingArguments(
        output_dir=str(tmp_path / "out"),
        per_device_train_batch_size=4,
        max_steps=4,
        logging_steps=1,
        save_strategy="no",
        report_to=["mlflow", "wandb"],
        use_cpu=True,
        disable_tqdm=True,
        dataloader_num_workers=0,
    )
    try:
        Trainer(model=gpt2(), args=args, train_dataset=TokenData(32, "all"), callbacks=[cb]).train()
    finally:
        import wandb

        _finish_wandb(wandb)
        mlflow.set_tracking_uri(uri)
        runs = MlflowClient().search_runs([e.experiment_id for e in MlflowClient().search_experiments()])
        mlflow.set_tracking_uri(None)
    (run,) = runs
    assert run.info.status == "FINISHED"  # ended by HF before lossdoctor's close
    assert run.data.tags["lossdoctor.cause"] == "label_mask_empty" and run.data.tags["lossdoctor.step"] == "0"
    summary = _wandb_summary(_wandb_records(tmp_path))
    assert summary.get("lossdoctor/cause") == "label_mask_empty", sorted(summary)


MLFLOW_SCRIPT = textwrap.dedent("""
    import mlflow, torch
    mlflow.set_tracking_uri(__import__("sys").argv[1])
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Linear(16, 1))
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    with mlflow.start_run():
        for step in range(40):
            x = torch.randn(16, 8)
            if step >= 30:
                x[3, 2] = float("nan")
            loss = torch.nn.functional.mse_loss(model(x), x[:, :1])
            opt.zero_grad(); loss.backward(); opt.step()
            mlflow.log_metric("loss", loss.item(), step=step)
""")


@pytest.mark.slow  # two subprocesses that import torch and mlflow: ~20 s on the shared machine
@pytest.mark.parametrize("flag", [[], ["--no-sinks"]])
def test_lossdoctor_run_puts_findings_on_the_scripts_mlflow_run(tmp_path, flag):
    """`lossdoctor run -- python train.py`: the script's own MLflow run gets the tags, with no line
    added to it; `--no-sinks` leaves it alone."""
    pytest.importorskip("mlflow")
    from conftest import run_cli

    script = tmp_path / "train.py"
    script.write_text(MLFLOW_SCRIPT)
    uri = (tmp_path / "mlruns").as_uri()
    env = {**cli_env(), "MLFLOW_ALLOW_FILE_STORE": "true"}
    p = run_cli(
        "run",
        "--no-alerts",
        "--log-dir",
        "runs/ml",
        *flag,
        "--",
        sys.executable,
        str(script),
        uri,
        cwd=tmp_path,
        env=env,
        timeout=300,
    )
    assert p.returncode == 0, p.stderr
    out = subprocess.run(
        [
            sys.executable,
            "-c",
            textwrap.dedent(f"""
        import json, mlflow
        from mlflow.tracking import MlflowClient
        mlflow.set_tracking_uri({uri!r})
        c = MlflowClient()
        (run,) = c.search_runs([e.experiment_id for e in c.search_experiments()])
        print(json.dumps({{k: v for k, v in run.data.tags.items() if k.startswith("lossdoctor.")}}))
    """),
        ],
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
    )
    tags = json.loads(out.stdout)
    if flag:
        assert tags == {}
    else:
        assert tags["lossdoctor.cause"] == "nonfinite_data" and tags["lossdoctor.step"] == "30"
