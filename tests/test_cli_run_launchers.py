"""`lossdoctor run -- LAUNCHER ...`: launchers that start several worker processes, and the
environment switch for a launcher `lossdoctor run` cannot wrap.

Each test runs the same unmodified script twice, unwatched and watched, through the real launcher
(DeepSpeed's `deepspeed` and Accelerate's `accelerate launch`, two CPU processes over gloo; a
shell-script launcher for the switch), and asserts on what the script saved (byte-identical), on
the run directory each worker wrote (one `rank-N/` each) and on the diagnosis printed."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from conftest import cli_env, run_cli
from dist_workers import free_port
from test_cli_run import PLAIN_LOOP, diagnosis, steps_recorded, write

pytestmark = [pytest.mark.slow, pytest.mark.timeout(400)]

# Rank 1's batch of step 3 holds a NaN sample; the losses and the weights before it are saved.
DEEPSPEED_SCRIPT = textwrap.dedent("""
    import gc, json, torch, deepspeed
    deepspeed.init_distributed(dist_backend="gloo")
    rank = torch.distributed.get_rank()
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.Tanh(), torch.nn.Linear(16, 1))
    config = {"train_micro_batch_size_per_gpu": 8, "gradient_accumulation_steps": 1,
              "optimizer": {"type": "AdamW", "params": {"lr": 3e-3, "torch_adam": True}},
              "zero_optimization": {"stage": 2}, "steps_per_print": 10**6}
    engine, *_ = deepspeed.initialize(model=model, model_parameters=model.parameters(), config=config)
    data = torch.randn(128, 8, generator=torch.Generator().manual_seed(rank))
    target = torch.tanh(data[:, :2].sum(1, keepdim=True))
    losses = []
    for step in range(10):
        i = (step * 8) % 128
        x, y = data[i:i + 8].clone(), target[i:i + 8]
        if rank == 1 and step == 3:
            x[2, 5] = float("nan")
        loss = torch.nn.functional.mse_loss(engine(x), y)
        engine.backward(loss)
        engine.step()
        losses.append(loss.item())
        if step == 2:
            torch.save(model.state_dict(), f"before_nan-{rank}.pt")
    torch.save({"losses": losses, "after": model.state_dict()}, f"final-{rank}.pt")
    del engine, model  # what holds the process group goes before it (see test_cli_run.DDP_SCRIPT)
    gc.collect()
    torch.distributed.destroy_process_group()
""")

# Rank 1's batch of step 5 holds a NaN sample (DDP spreads it to rank 0 in the all-reduce).
ACCELERATE_SCRIPT = textwrap.dedent("""
    import torch
    from accelerate import Accelerator
    acc = Accelerator(cpu=True)
    rank = acc.process_index
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Linear(16, 1))
    opt = torch.optim.Adam(model.parameters(), lr=3e-3)
    model, opt = acc.prepare(model, opt)
    data = torch.randn(128, 8, generator=torch.Generator().manual_seed(rank))
    target = torch.tanh(data[:, :2].sum(1, keepdim=True))
    losses = []
    for step in range(12):
        i = (step * 8) % 128
        x, y = data[i:i + 8].clone(), target[i:i + 8]
        if rank == 1 and step == 5:
            x[2, 0] = float("nan")
        loss = torch.nn.functional.mse_loss(model(x), y)
        opt.zero_grad()
        acc.backward(loss)
        opt.step()
        losses.append(loss.item())
        if step == 4:
            torch.save(acc.unwrap_model(model).state_dict(), f"before_nan-{rank}.pt")
    torch.save({"losses": losses, "world": acc.num_processes}, f"final-{rank}.pt")
    # the DDP wrapper before the process group (see test_cli_run.DDP_SCRIPT): the script's names and
    # the Accelerator's own references (free_memory)
    del model, opt
    acc.free_memory()
    acc.end_training()
""")


def saved(where: Path) -> dict[str, bytes]:
    """What the script saved in `where` (each file's bytes), removed for the next run."""
    files = {p.name: p.read_bytes() for p in sorted(where.glob("*.pt"))}
    for name in files:
        (where / name).unlink()
    return files


def start_run(command: list[str], cwd: Path, **env: str) -> subprocess.Popen:
    """A run started in a directory of its own (the unwatched one, while the watched one runs: the
    launchers' start-up, not the training, is what takes the time); its console to `console.txt`."""
    cwd.mkdir()
    with open(cwd / "console.txt", "w") as console:
        return subprocess.Popen(command, cwd=cwd, stdout=console, stderr=subprocess.STDOUT, env={**cli_env(), **env})


def finish_run(proc: subprocess.Popen, cwd: Path) -> dict[str, bytes]:
    """Its end (exit 0), and what it saved."""
    try:
        proc.wait(timeout=300)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 0, (cwd / "console.txt").read_text()[-3000:]
    return saved(cwd)


def rank_dirs(log_dir: Path) -> list[str]:
    return sorted(q.name for q in log_dir.iterdir() if q.is_dir())


def test_deepspeed_launcher_workers_are_watched_one_rank_dir_each(tmp_path):
    """`-- deepspeed --num_gpus 2 script.py` (ZeRO-2 on DeepSpeed's CPU accelerator): each worker
    watches its engine into `rank-N/`, DeepSpeed's global norm and skipped step are recorded, the
    diagnosis names the rank and the sample, and the weights and losses are the unwatched run's."""
    pytest.importorskip("deepspeed")
    deepspeed = Path(sys.executable).with_name("deepspeed")
    if not deepspeed.exists():
        pytest.skip("the deepspeed launcher is not installed next to this Python")
    script = write(tmp_path, "train_ds.py", DEEPSPEED_SCRIPT)

    def launch() -> list[str]:
        return [str(deepspeed), "--num_gpus", "2", "--master_port", str(free_port()), str(script)]

    plain = start_run(launch(), tmp_path / "plain", DS_ACCELERATOR="cpu")
    p = run_cli(
        "run",
        "--no-alerts",
        "--log-dir",
        "runs/ds",
        "--",
        *launch(),
        cwd=tmp_path,
        timeout=300,
        env={**os.environ, "DS_ACCELERATOR": "cpu"},
    )
    unwatched = finish_run(plain, tmp_path / "plain")
    assert sorted(unwatched) == ["before_nan-0.pt", "before_nan-1.pt", "final-0.pt", "final-1.pt"]
    assert p.returncode == 0, p.stderr[-3000:]
    assert saved(tmp_path) == unwatched
    log_dir = tmp_path / "runs" / "ds"
    assert rank_dirs(log_dir) == ["rank-0", "rank-1"]
    for rank in (0, 1):
        meta = json.loads((log_dir / f"rank-{rank}" / "meta.json").read_text())
        assert (meta["rank"], meta["closed"], meta["distributed"]["zero_stage"]) == (rank, True, 2)
        assert meta["attached"]["engine"] == "DeepSpeedEngine" and meta["attached"]["model"] == "Sequential"
        records = [json.loads(line) for line in (log_dir / f"rank-{rank}" / "steps.jsonl").read_text().splitlines()]
        assert [r["step"] for r in records] == list(range(10))
        assert [r["step"] for r in records if r["skipped"]] == [3]  # DeepSpeed's own overflow check
        assert all(r["grad_norm"] > 0 for r in records if r["step"] != 3)  # DeepSpeed's norm, every step
    top = diagnosis(log_dir).findings[0]
    assert (top.cause, top.step, top.rank, list(top.samples)) == ("nonfinite_data", 3, 1, [2])
    assert "nonfinite_data" in p.stderr and str(Path("runs") / "ds") in p.stderr  # the diagnosis, printed
    assert "lossdoctor: note" not in p.stderr  # nothing of the attach machinery failed


def test_accelerate_launch_two_processes_are_watched_one_rank_dir_each(tmp_path):
    """`-- accelerate launch --multi_gpu --num_processes 2 script.py`, the script on
    `Accelerator(cpu=True)`: on a machine without GPUs Accelerate starts two CPU workers over gloo
    through torchrun (its `--cpu` flag would start one process only). Each worker writes its
    `rank-N/`; the NaN began on rank 1; training is the unwatched run's."""
    pytest.importorskip("accelerate")
    accelerate = Path(sys.executable).with_name("accelerate")
    if not accelerate.exists():
        pytest.skip("the accelerate CLI is not installed next to this Python")
    script = write(tmp_path, "train_acc.py", ACCELERATE_SCRIPT)

    def launch() -> list[str]:
        return [
            str(accelerate),
            "launch",
            "--multi_gpu",
            "--num_processes",
            "2",
            "--num_machines",
            "1",
            "--mixed_precision",
            "no",
            "--dynamo_backend",
            "no",
            "--main_process_port",
            str(free_port()),
            str(script),
        ]

    plain = start_run(launch(), tmp_path / "plain")
    p = run_cli("run", "--no-alerts", "--log-dir", "runs/acc", "--", *launch(), cwd=tmp_path, timeout=300)
    unwatched = finish_run(plain, tmp_path / "plain")
    assert sorted(unwatched) == ["before_nan-0.pt", "before_nan-1.pt", "final-0.pt", "final-1.pt"]
    assert p.returncode == 0, p.stderr[-3000:]
    assert saved(tmp_path) == unwatched
    log_dir = tmp_path / "runs" / "acc"
    assert rank_dirs(log_dir) == ["rank-0", "rank-1"]
    for rank in (0, 1):
        meta = json.loads((log_dir / f"rank-{rank}" / "meta.json").read_text())
        assert (meta["rank"], meta["world_size"], meta["closed"]) == (rank, 2, True)
        assert steps_recorded(log_dir / f"rank-{rank}") == list(range(12))
    top = diagnosis(log_dir).findings[0]
    assert (top.cause, top.step, top.rank, list(top.samples)) == ("nonfinite_data", 5, 1, [2])
    assert "nonfinite_data" in p.stderr and str(Path("runs") / "acc") in p.stderr


# A launcher lossdoctor run cannot wrap (a cluster's job script): it starts the training command
# through a fresh shell, in a directory of its own, with its console going to a job log.
JOB_LAUNCHER = textwrap.dedent("""\
    #!/bin/sh
    mkdir -p job && cd job || exit 1
    sh -c "$*" > job.log 2>&1
""")


def test_the_environment_switch_watches_a_process_a_launcher_starts_through_a_shell(tmp_path):
    """The README's switch, by hand: `LOSSDOCTOR_ATTACH=1`, an absolute `LOSSDOCTOR_LOG_DIR`,
    `LOSSDOCTOR_WATCH` options and the bootstrap first on `PYTHONPATH` reach the training process
    through the launcher's shell; it records every step into the directory named, with the options
    given, trains bit-identically, and `lossdoctor diagnose` names the NaN afterwards."""
    script = write(tmp_path, "train.py", PLAIN_LOOP)
    launcher = write(tmp_path, "launch.sh", JOB_LAUNCHER)
    launcher.chmod(0o755)
    job = f"{sys.executable} {script} 7 20"
    plain = subprocess.run([str(launcher), job], cwd=tmp_path, timeout=300, env=cli_env())
    assert plain.returncode == 0
    unwatched = saved(tmp_path / "job")
    assert list(unwatched) == ["final.pt"]

    lossdoctor = f"{sys.executable} -m lossdoctor"
    switch = textwrap.dedent(f"""\
        export LOSSDOCTOR_ATTACH=1 LOSSDOCTOR_LOG_DIR="$PWD/runs/exp1" LOSSDOCTOR_WATCH='{{"layer_every": 5}}'
        export PYTHONPATH=$({lossdoctor} run --print-bootstrap)${{PYTHONPATH:+:$PYTHONPATH}}
        ./launch.sh '{job}'
    """)
    p = subprocess.run(["sh", "-c", switch], cwd=tmp_path, capture_output=True, text=True, timeout=300, env=cli_env())
    assert p.returncode == 0, p.stderr
    assert saved(tmp_path / "job") == unwatched
    log_dir = tmp_path / "runs" / "exp1"
    assert steps_recorded(log_dir) == list(range(20))
    assert not (log_dir / "console.log").exists()  # no lossdoctor run process to copy the console
    meta = json.loads((log_dir / "meta.json").read_text())
    assert (meta["layer_every"], meta["closed"], meta["attached"]["optimizer"]) == (5, True, "Adam")
    assert "lossdoctor: note" not in (tmp_path / "job" / "job.log").read_text()

    d = run_cli("diagnose", str(log_dir), "--format", "json", cwd=tmp_path)
    assert d.returncode == 0, d.stderr
    primary = json.loads(d.stdout)["findings"][0]
    assert (primary["cause"], primary["step"]) == ("nonfinite_data", 7)


def test_without_the_switch_the_same_launcher_records_nothing(tmp_path):
    """The bootstrap on `PYTHONPATH` alone does nothing: the switch is what turns it on."""
    script = write(tmp_path, "train.py", PLAIN_LOOP)
    launcher = write(tmp_path, "launch.sh", JOB_LAUNCHER)
    launcher.chmod(0o755)
    bootstrap = run_cli("run", "--print-bootstrap").stdout.strip()
    env = {**cli_env(), "LOSSDOCTOR_LOG_DIR": str(tmp_path / "runs" / "off")}
    env["PYTHONPATH"] = bootstrap + os.pathsep + env["PYTHONPATH"]
    env.pop("LOSSDOCTOR_ATTACH", None)
    p = subprocess.run([str(launcher), f"{sys.executable} {script} -1 6"], cwd=tmp_path, timeout=300, env=env)
    assert p.returncode == 0
    assert (tmp_path / "job" / "final.pt").is_file() and not (tmp_path / "runs").exists()


# One process (world 1, no launcher), two micro-batches per optimizer step; the loss goes back
# through `engine.backward(loss)` or, DeepSpeed's torch-style, `(loss / 2).backward()`.
DEEPSPEED_ACCUMULATING = textwrap.dedent("""
    import sys, torch, deepspeed
    deepspeed.init_distributed(dist_backend="gloo")
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.Tanh(), torch.nn.Linear(16, 1))
    config = {"train_micro_batch_size_per_gpu": 4, "gradient_accumulation_steps": 2,
              "optimizer": {"type": "AdamW", "params": {"lr": 3e-3, "torch_adam": True}},
              "zero_optimization": {"stage": 2}, "steps_per_print": 10**6}
    engine, *_ = deepspeed.initialize(model=model, model_parameters=model.parameters(), config=config)
    data = torch.randn(128, 8, generator=torch.Generator().manual_seed(0))
    target = torch.tanh(data[:, :2].sum(1, keepdim=True))
    losses = []
    for micro in range(12):
        i = micro * 4
        loss = torch.nn.functional.mse_loss(engine(data[i:i + 4]), target[i:i + 4])
        if sys.argv[1] == "torch":
            (loss / 2).backward()
        else:
            engine.backward(loss)
        engine.step()
        losses.append(loss.item())
    torch.save({"losses": losses, "after": model.state_dict()}, "final.pt")
    torch.distributed.destroy_process_group()
""")


def test_a_deepspeed_engine_joins_micro_steps_under_either_backward(tmp_path):
    """`-- python script.py` on a DeepSpeed engine with 2 micro-batches per step: 12 micro-steps
    are 6 recorded steps; the loss recorded is the mean of the script's micro-batch losses through
    `engine.backward(loss)` (before DeepSpeed divides it), and the tensor backpropagated under a
    torch-style `loss.backward()`; both train as unwatched."""
    pytest.importorskip("deepspeed")
    import torch

    script = write(tmp_path, "train_ds.py", DEEPSPEED_ACCUMULATING)
    world = {"DS_ACCELERATOR": "cpu", "RANK": "0", "LOCAL_RANK": "0", "WORLD_SIZE": "1", "MASTER_ADDR": "127.0.0.1"}
    styles = {"engine": 1.0, "torch": 0.5}  # the share of each micro-batch's loss that is backpropagated
    runs = {}
    for style in styles:  # all four runs at once: DeepSpeed's import, not the training, takes the time
        command = [sys.executable, str(script), style]
        watched = tmp_path / f"watched-{style}"
        runs[style] = (
            start_run(command, tmp_path / f"plain-{style}", **world, MASTER_PORT=str(free_port())),
            start_run(
                [sys.executable, "-m", "lossdoctor", "run", "--no-alerts", "--log-dir", "runs", "--", *command],
                watched,
                **world,
                MASTER_PORT=str(free_port()),
            ),
        )
    for style, per_micro in styles.items():
        plain, watching = runs[style]
        watched = tmp_path / f"watched-{style}"
        unwatched = finish_run(plain, tmp_path / f"plain-{style}")
        losses = torch.load(watched / "final.pt")["losses"]
        assert finish_run(watching, watched) == unwatched  # exit 0, and the same bytes saved
        records = [json.loads(line) for line in (watched / "runs" / "steps.jsonl").read_text().splitlines()]
        assert [r["step"] for r in records] == list(range(6))
        expected = [per_micro * (losses[2 * s] + losses[2 * s + 1]) / 2 for s in range(6)]
        assert [r["loss"] for r in records] == pytest.approx(expected, rel=1e-6), style
        meta = json.loads((watched / "runs" / "meta.json").read_text())
        assert meta["attached"]["engine"] == "DeepSpeedEngine" and meta["closed"]
        assert "lossdoctor: note" not in (watched / "console.txt").read_text()


DEEPSPEED_PIPELINE = textwrap.dedent("""
    import torch, deepspeed
    from deepspeed.pipe import PipelineModule
    deepspeed.init_distributed(dist_backend="gloo")
    torch.manual_seed(0)
    net = PipelineModule(layers=[torch.nn.Linear(8, 16), torch.nn.Tanh(), torch.nn.Linear(16, 1)], num_stages=1,
                         loss_fn=torch.nn.MSELoss())
    config = {"train_micro_batch_size_per_gpu": 4, "gradient_accumulation_steps": 2,
              "optimizer": {"type": "AdamW", "params": {"lr": 3e-3, "torch_adam": True}}, "steps_per_print": 10**6}
    engine, *_ = deepspeed.initialize(model=net, model_parameters=net.parameters(), config=config)
    data = torch.randn(64, 8, generator=torch.Generator().manual_seed(0))
    pairs = iter([(data[i:i + 4], data[i:i + 4, :1]) for i in range(0, 64, 4)])
    losses = [engine.train_batch(pairs) for _ in range(4)]
    torch.save({"losses": losses, "after": net.state_dict()}, "final.pt")
    torch.distributed.destroy_process_group()
""")


def test_a_deepspeed_pipeline_engine_is_left_unwatched_with_a_note(tmp_path):
    """A `PipelineEngine` (`train_batch` runs the micro-batches itself) is not watched: one note,
    the optimizer hooks do not take its flat partitions for a model (no second note), training is
    the unwatched run's, and the diagnosis comes from the console."""
    pytest.importorskip("deepspeed")
    from lossdoctor.messages import render

    script = write(tmp_path, "train_pipe.py", DEEPSPEED_PIPELINE)
    world = {"DS_ACCELERATOR": "cpu", "RANK": "0", "LOCAL_RANK": "0", "WORLD_SIZE": "1", "MASTER_ADDR": "127.0.0.1"}
    command = [sys.executable, str(script)]
    plain = start_run(command, tmp_path / "plain", **world, MASTER_PORT=str(free_port()))
    p = run_cli(
        "run",
        "--no-alerts",
        "--log-dir",
        "runs/pipe",
        "--",
        *command,
        cwd=tmp_path,
        timeout=300,
        env={**os.environ, **world, "MASTER_PORT": str(free_port())},
    )
    unwatched = finish_run(plain, tmp_path / "plain")
    assert p.returncode == 0, p.stderr[-3000:]
    assert saved(tmp_path) == unwatched
    assert p.stderr.count(render("integrations.attach.pipeline_engine", {}, "en")) == 1
    assert render("integrations.attach.no_model", {}, "en") not in p.stderr
    assert sorted(q.name for q in (tmp_path / "runs" / "pipe").iterdir()) == ["console.log"]
