"""The LR as evidence from the run's own configuration: optimizer, peak LR and task read from the
files real tools write next to their logs (Lightning's hparams.yaml from a real Lightning run,
W&B's config from a real offline run, a real HF Trainer's output dir with LLaMA-Factory's
training_args.yaml, a Megatron arguments block), compared with what is usual for that optimizer.

It supports a finding the curve made, or breaks a tie; it never makes a finding on its own."""

from __future__ import annotations

import csv
import math

import pytest

import lightning_kit
from lossdoctor import diagnose
from lossdoctor.sources import load_path
from msgs import find, has

ALARM = ("warning", "critical")


def _alarms(report):
    return [f for f in report.findings if f.severity in ALARM]


def _show(report):
    return [(f.cause, f.severity, f.confidence, f.evidence) for f in report.findings]


def _lightning_fit(root, *, lr: float, opt: str, steps: int = 40) -> None:
    """A real Lightning run: CSVLogger's metrics.csv, and hparams.yaml from save_hyperparameters."""
    from lightning.pytorch.loggers import CSVLogger

    lightning_kit.fit(CSVLogger(str(root)), lr=lr, optimizer=opt, steps=steps, save_hparams=True)


def test_lightning_hparams_name_the_optimizer_and_support_an_lr_finding(tmp_path):
    _lightning_fit(tmp_path, lr=1.0, opt="SGD")  # SGD at 1.0 on this regression: the loss jumps
    version = tmp_path / "lightning_logs" / "version_0"
    assert (version / "hparams.yaml").is_file()  # written by Lightning itself
    run = load_path(version)[0]
    assert run.meta["optimizer"]["class"] == "SGD" and run.meta["config_lr"] == 1.0, run.meta
    assert any("hparams.yaml" in n for n in run.notes)
    r = diagnose(version)
    f = _alarms(r)[0]
    assert f.cause == "lr_too_high", _show(r)
    high = find(f.evidence, "lr_usual.high")
    assert (high.values["lr"], high.values["lo"], high.values["hi"]) == (1.0, "1e-3", "1e-1") and has(
        [high], "lr_usual.for.sgd"
    ), high.data()
    # the same log without its hparams.yaml: the finding stands on the curve alone, as sure as before
    # (the configuration is evidence, never the reason for a critical finding)
    (version / "hparams.yaml").unlink()
    r2 = diagnose(version)
    f2 = _alarms(r2)[0]
    assert (f2.cause, f2.severity, f2.confidence) == (f.cause, f.severity, f.confidence)
    assert not has(f2.evidence, "lr_usual.for.sgd"), [m.data() for m in f2.evidence]


def test_lightning_hparams_of_a_healthy_run_raise_nothing(tmp_path):
    _lightning_fit(tmp_path, lr=0.01, opt="SGD")
    r = diagnose(tmp_path / "lightning_logs")
    assert r.status == "healthy", _show(r)


def _flat_at_chance(path, lr):
    """A loss that wanders at ln(4) for 120 steps, gradient norm ~0.5: nothing in the curve says why."""
    with open(path, "w", newline="") as fh:
        w = csv.writer(fh)
        w.writerow(["step", "loss", "grad_norm", "lr"])
        for i in range(120):
            w.writerow([i, math.log(4) + 0.003 * math.sin(i * 1.3), 0.5 + 0.02 * math.cos(i), lr])
    return path


def test_an_lr_below_usual_for_the_named_optimizer_breaks_the_tie_at_chance(tmp_path):
    from lightning.pytorch.core.saving import save_hparams_to_yaml

    log = _flat_at_chance(tmp_path / "train.csv", lr=1e-4)
    r = diagnose(log)
    assert _alarms(r)[0].cause != "lr_too_low", _show(r)  # 1e-4 alone is an ordinary LR
    save_hparams_to_yaml(tmp_path / "hparams.yaml", {"optimizer": "SGD", "lr": 1e-4, "batch_size": 32})
    r = diagnose(log)
    f = _alarms(r)[0]
    assert f.cause == "lr_too_low" and f.severity == "warning", _show(r)
    assert has([find(f.evidence, "lr_usual.low")], "lr_usual.for.sgd"), [m.data() for m in f.evidence]


def test_an_lr_above_usual_for_adam_ranks_lr_too_high_first_at_chance(tmp_path):
    from lightning.pytorch.core.saving import save_hparams_to_yaml

    log = _flat_at_chance(tmp_path / "train.csv", lr=0.05)
    save_hparams_to_yaml(tmp_path / "hparams.yaml", {"optimizer": "AdamW", "lr": 0.05})
    r = diagnose(log)
    f = _alarms(r)[0]
    assert (f.cause, f.severity) == ("lr_too_high", "warning"), _show(r)  # a warning, never critical on it
    assert has([find(f.evidence, "lr_usual.high")], "lr_usual.for.adam"), [m.data() for m in f.evidence]


def _load_when_flushed(path, timeout=20.0):
    """The W&B service process may still be writing the run file when finish() returns."""
    import time

    from lossdoctor.sources import SourceError

    t0 = time.monotonic()
    while True:
        try:
            return load_path(path)[0]
        except SourceError:
            if time.monotonic() - t0 > timeout:
                raise
            time.sleep(0.5)


def test_wandb_offline_run_config_names_the_optimizer(tmp_path):
    wandb = pytest.importorskip("wandb")
    run = wandb.init(
        mode="offline",
        project="lossdoctor-test",
        dir=str(tmp_path),
        config={"optimizer": "AdamW", "learning_rate": 3e-4, "max_grad_norm": 1.0},
        settings=wandb.Settings(silent=True, console="off", x_disable_stats=True),
    )
    for i in range(30):
        run.log(
            {
                "train/loss": 3.0 * math.exp(-i / 10) + 0.5,
                "train/grad_norm": 1.0,
                "train/learning_rate": 3e-4,
                "train/global_step": i,
            }
        )
    run.finish()
    r = _load_when_flushed(tmp_path)
    assert r.meta["optimizer"]["class"] == "AdamW" and r.meta["config_lr"] == 3e-4, r.meta
    assert diagnose(tmp_path).status == "healthy"


def test_hf_trainer_output_dir_with_llamafactory_training_args(tmp_path):
    import yaml

    from hf_console_train import train

    train(tmp_path, lr=2.0, optim="sgd", max_grad_norm=0.0)  # a real Trainer: the grad norm explodes
    # LLaMA-Factory writes its arguments next to the Trainer's output as training_args.yaml
    # (yaml.safe_dump of the parsed arguments); the keys are the ones it writes
    (tmp_path / "training_args.yaml").write_text(
        yaml.safe_dump(
            {
                "stage": "sft",
                "finetuning_type": "full",
                "learning_rate": 2.0,
                "optim": "sgd",
                "per_device_train_batch_size": 8,
                "output_dir": str(tmp_path),
            }
        )
    )
    run = load_path(tmp_path)[0]
    assert run.meta["optimizer"]["class"] == "sgd" and run.meta["task_kind"] == "finetune", run.meta
    r = diagnose(tmp_path)
    lr_findings = [f for f in r.findings if f.cause == "lr_too_high"]
    assert r.status == "critical" and lr_findings, _show(r)
    assert has([find(lr_findings[0].evidence, "lr_usual.high")], "lr_usual.for.sgd"), [
        m.data() for m in lr_findings[0].evidence
    ]


def test_megatron_arguments_name_the_optimizer_and_the_task(tmp_path):
    args = (
        "------------------------ arguments ------------------------\n"
        "  lr .............................................. 0.0003\n"
        "  optimizer ....................................... adam\n"
        "  log_interval .................................... 1\n"
        "-------------------- end of arguments ---------------------\n"
    )
    lines = [
        f" iteration {i + 1:8d}/     100 | consumed samples: {(i + 1) * 8:10d} | learning rate: 3.000000E-04 |"
        f" global batch size:     8 | lm loss: {6.0 * math.exp(-i / 30) + 2:.6E} | loss scale: 1.0 |"
        " grad norm: 1.000 | number of skipped iterations:   0 | number of nan iterations:   0 |"
        for i in range(60)
    ]
    (tmp_path / "train.log").write_text(args + "\n".join(lines) + "\n")
    run = load_path(tmp_path / "train.log")[0]
    assert run.meta["optimizer"] == {"class": "adam", "from": "Megatron arguments"}
    assert run.meta["task_kind"] == "pretrain" and run.meta["config_lr"] == 3e-4
    assert diagnose(tmp_path / "train.log").status == "healthy"


def test_a_yaml_that_would_run_code_is_not_run(tmp_path):
    marker = tmp_path / "ran"
    (tmp_path / "hparams.yaml").write_text(f"optimizer: !!python/object/apply:os.system ['touch {marker}']\nlr: 0.1\n")
    log = _flat_at_chance(tmp_path / "train.csv", lr=0.1)
    r = diagnose(log)
    assert not marker.exists()
    assert r.status in ("warning", "inconclusive", "healthy")  # read without the file, no crash
