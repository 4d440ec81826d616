"""`lossdoctor run -- COMMAND`: unmodified scripts, written here, run watched in a real subprocess.

The scripts know nothing of lossdoctor; the run directory they leave is read back with the same
readers `lossdoctor diagnose` uses, and the assertions are on causes, steps and bytes."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from conftest import cli_env, run_cli
from dist_workers import free_port

PLAIN_LOOP = textwrap.dedent("""
    import sys, time, torch
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Linear(16, 1))
    opt = torch.optim.Adam(model.parameters(), lr=3e-3)
    data = torch.randn(256, 8)
    target = torch.tanh(data[:, :2].sum(1, keepdim=True))
    nan_at = int(sys.argv[1])
    steps = int(sys.argv[2]) if len(sys.argv) > 2 else 30
    for step in range(steps):
        i = (step * 16) % 256
        x, y = data[i:i + 16].clone(), target[i:i + 16]
        if step == nan_at:
            x[3, 2] = float("nan")
        loss = torch.nn.functional.mse_loss(model(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        if step == 5:
            print("ready", flush=True)
        if len(sys.argv) > 3 and sys.argv[3] == "raise" and not torch.isfinite(loss):
            raise FloatingPointError(f"loss is {loss.item()} at step {step}")
        if steps > 100:
            time.sleep(0.02)
    torch.save(model.state_dict(), "final.pt")
""")


def write(tmp_path: Path, name: str, text: str) -> Path:
    p = tmp_path / name
    p.write_text(text)
    return p


def diagnosis(log_dir: Path):
    from lossdoctor.detectors.engine import diagnose_runs
    from lossdoctor.sources import load_path

    return diagnose_runs(load_path(log_dir))


def steps_recorded(run_dir: Path) -> list[int]:
    return [json.loads(line)["step"] for line in (run_dir / "steps.jsonl").read_text().splitlines() if line.strip()]


@pytest.mark.slow
def test_nan_at_a_known_step_is_named(tmp_path):
    script = write(tmp_path, "train.py", PLAIN_LOOP)
    p = run_cli("run", "--log-dir", "runs/nan", "--", sys.executable, str(script), "7", cwd=tmp_path, timeout=300)
    assert p.returncode == 0, p.stderr
    log_dir = tmp_path / "runs" / "nan"
    assert str(Path("runs") / "nan") in p.stderr  # the run directory is named
    report = diagnosis(log_dir)
    top = report.findings[0]
    assert (top.cause, top.step) == ("nonfinite_data", 7)
    assert top.cause in p.stderr  # the diagnosis was printed
    assert steps_recorded(log_dir) == list(range(30))  # one record per optimizer step
    meta = json.loads((log_dir / "meta.json").read_text())
    assert (
        meta["attached"] == {"model": "Sequential", "optimizer": "Adam", "scaler": None, "scheduler": None}
        and meta["closed"]
    )


@pytest.mark.slow
def test_healthy_loop_is_healthy_and_trains_bit_identically(tmp_path):
    script = write(tmp_path, "train.py", PLAIN_LOOP)
    plain = subprocess.run(
        [sys.executable, str(script), "-1"], cwd=tmp_path, capture_output=True, text=True, timeout=300
    )
    assert plain.returncode == 0, plain.stderr
    unwatched = (tmp_path / "final.pt").read_bytes()
    (tmp_path / "final.pt").unlink()
    p = run_cli("run", "--log-dir", "runs/ok", "--", sys.executable, str(script), "-1", cwd=tmp_path, timeout=300)
    assert p.returncode == 0, p.stderr
    assert (tmp_path / "final.pt").read_bytes() == unwatched
    report = diagnosis(tmp_path / "runs" / "ok")
    assert [f.cause for f in report.findings if f.severity in ("warning", "critical")] == []
    assert steps_recorded(tmp_path / "runs" / "ok") == list(range(30))


@pytest.mark.slow
def test_a_script_that_raises_keeps_its_exit_code_and_is_diagnosed(tmp_path):
    script = write(tmp_path, "train.py", PLAIN_LOOP)
    p = run_cli(
        "run",
        "--no-alerts",
        "--log-dir",
        "runs/raised",
        "--",
        sys.executable,
        str(script),
        "4",
        "30",
        "raise",
        cwd=tmp_path,
        timeout=300,
    )
    assert p.returncode == 1, p.stderr
    assert "FloatingPointError" in p.stderr  # the script's own traceback, untouched
    log_dir = tmp_path / "runs" / "raised"
    assert steps_recorded(log_dir) == list(range(5))
    assert diagnosis(log_dir).findings[0].step == 4
    assert "nonfinite_data" in p.stderr and str(Path("runs") / "raised") in p.stderr


@pytest.mark.slow
def test_ctrl_c_ends_the_script_and_the_diagnosis_is_printed(tmp_path):
    script = write(tmp_path, "train.py", PLAIN_LOOP)
    env = cli_env()
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "lossdoctor",
            "run",
            "--log-dir",
            "runs/int",
            "--",
            sys.executable,
            str(script),
            "-1",
            "100000",
        ],
        cwd=tmp_path,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    try:
        assert proc.stdout.readline().strip() == "ready"
        os.killpg(proc.pid, signal.SIGINT)  # what Ctrl-C in the terminal does: the whole group
        out, err = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 130, err
    assert "KeyboardInterrupt" in err
    log_dir = tmp_path / "runs" / "int"
    meta = json.loads((log_dir / "meta.json").read_text())
    assert meta["closed"] and meta["steps"] >= 6
    assert str(Path("runs") / "int") in err


def test_bad_usage_is_one_line_and_exit_2(tmp_path):
    for args in (
        ["run"],
        ["run", "--"],
        ["run", "--", sys.executable, str(tmp_path / "missing.py")],
        ["run", "--", "no-such-program-xyz"],
    ):
        p = run_cli(*args, cwd=tmp_path)
        assert p.returncode == 2, (args, p.stderr)
        assert len(p.stderr.strip().splitlines()) == 1 and "Traceback" not in p.stderr, p.stderr


def test_run_process_never_imports_torch(tmp_path):
    """The command's own process stays torch-free: a `torch` that cannot be imported is on its
    path, and a child that never imports torch runs to its end with the script's exit code."""
    fake = tmp_path / "fake"
    (fake / "torch").mkdir(parents=True)
    (fake / "torch" / "__init__.py").write_text("raise ImportError('torch imported by lossdoctor run')\n")
    env = {**cli_env(), "PYTHONPATH": cli_env()["PYTHONPATH"] + os.pathsep + str(fake)}
    env["PYTHONPATH"] = str(fake) + os.pathsep + env["PYTHONPATH"]
    p = subprocess.run(
        [
            sys.executable,
            "-m",
            "lossdoctor",
            "run",
            "--log-dir",
            "runs/none",
            "--",
            sys.executable,
            "-c",
            "import sys; sys.exit(3)",
        ],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert p.returncode == 3, p.stderr
    assert "torch imported" not in p.stderr
    assert not (tmp_path / "runs" / "none").exists()


@pytest.mark.slow
def test_a_failing_attach_is_a_note_and_the_script_runs_on(tmp_path):
    """The documented switch without the command (as for a launcher it cannot wrap), with watch
    options `watch` refuses: the script trains to its end, bit-identically, and a note says why."""
    from lossdoctor.cli.run import bootstrap_dir
    from lossdoctor.messages import render

    script = write(tmp_path, "train.py", PLAIN_LOOP)
    subprocess.run([sys.executable, str(script), "-1"], cwd=tmp_path, check=True, timeout=300)
    unwatched = (tmp_path / "final.pt").read_bytes()
    env = {
        **cli_env(),
        "LOSSDOCTOR_ATTACH": "1",
        "LOSSDOCTOR_LOG_DIR": str(tmp_path / "runs" / "bad"),
        "LOSSDOCTOR_WATCH": json.dumps({"layer_every": "often"}),
    }
    env["PYTHONPATH"] = str(bootstrap_dir()) + os.pathsep + env["PYTHONPATH"]
    p = subprocess.run(
        [sys.executable, str(script), "-1"], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300
    )
    assert p.returncode == 0, p.stderr
    assert (tmp_path / "final.pt").read_bytes() == unwatched
    head = render("integrations.attach.failed", {"part": "watch", "error": "X"}, "en").split("(")[0]
    assert head + "(watch:" in p.stderr, p.stderr


HF_SCRIPT = textwrap.dedent("""
    import torch
    from transformers import GPT2Config, GPT2LMHeadModel, Trainer, TrainingArguments, set_seed
    set_seed(0)
    model = GPT2LMHeadModel(GPT2Config(vocab_size=64, n_positions=32, n_embd=16, n_layer=1, n_head=2))
    ids = torch.randint(0, 64, (32, 16), generator=torch.Generator().manual_seed(0))
    data = [{"input_ids": r, "labels": r.clone()} for r in ids]
    args = TrainingArguments(output_dir="out", max_steps=6, per_device_train_batch_size=4, learning_rate=1e-3,
                             logging_steps=1, save_strategy="no", report_to=[], use_cpu=True, disable_tqdm=True,
                             dataloader_num_workers=0, seed=0)
    Trainer(model=model, args=args, train_dataset=data).train()
    torch.save(model.state_dict(), "final.pt")
""")


@pytest.mark.slow
def test_hf_trainer_gets_its_callback_and_records_each_step_once(tmp_path):
    script = write(tmp_path, "train_hf.py", HF_SCRIPT)
    subprocess.run([sys.executable, str(script)], cwd=tmp_path, check=True, capture_output=True, timeout=300)
    unwatched = (tmp_path / "final.pt").read_bytes()
    (tmp_path / "final.pt").unlink()
    p = run_cli(
        "run", "--no-alerts", "--log-dir", "runs/hf", "--", sys.executable, str(script), cwd=tmp_path, timeout=300
    )
    assert p.returncode == 0, p.stderr
    assert (tmp_path / "final.pt").read_bytes() == unwatched
    log_dir = tmp_path / "runs" / "hf"
    assert steps_recorded(log_dir) == list(range(6))  # the callback's records only: no second recording
    meta = json.loads((log_dir / "meta.json").read_text())
    assert meta["framework"]["name"] == "transformers" and "attached" not in meta
    assert sorted(q.name for q in (tmp_path / "runs").iterdir()) == ["hf"]


DDP_SCRIPT = textwrap.dedent("""
    import gc, torch, torch.distributed as dist
    dist.init_process_group("gloo")
    rank = dist.get_rank()
    torch.manual_seed(0)
    net = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Linear(16, 1))
    model = torch.nn.parallel.DistributedDataParallel(net)
    opt = torch.optim.Adam(model.parameters(), lr=3e-3)
    data = torch.randn(128, 8, generator=torch.Generator().manual_seed(rank))
    target = torch.tanh(data[:, :2].sum(1, keepdim=True))
    for step in range(12):
        i = (step * 8) % 128
        x, y = data[i:i + 8].clone(), target[i:i + 8]
        if rank == 1 and step == 5:
            x[2, 0] = float("nan")
        loss = torch.nn.functional.mse_loss(model(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        if step == 4 and rank == 0:
            torch.save(net.state_dict(), "before_nan.pt")
    # The DDP wrapper (its reducer holds the process group) goes before the group: left for the
    # interpreter's exit, gloo's teardown aborted a rank in 4 of 40 plain runs here, 0 of 80 this way.
    del model, opt
    gc.collect()
    dist.destroy_process_group()
""")


@pytest.mark.slow
def test_torchrun_workers_are_watched_one_rank_dir_each(tmp_path):
    """`-- torchrun --nproc_per_node 2` over gloo: the launcher passes the environment switch to
    its workers, each writes its `rank-N/`, and the diagnosis names the rank the NaN began on."""
    script = write(tmp_path, "ddp.py", DDP_SCRIPT)

    def launch() -> list[str]:  # a free port each time: torchrun's default 29500 may be another job's
        return [
            sys.executable,
            "-m",
            "torch.distributed.run",
            "--nproc_per_node",
            "2",
            "--master_port",
            str(free_port()),
            str(script),
        ]

    subprocess.run(launch(), cwd=tmp_path, check=True, capture_output=True, timeout=300, env=cli_env())
    unwatched = (tmp_path / "before_nan.pt").read_bytes()
    (tmp_path / "before_nan.pt").unlink()
    p = run_cli("run", "--no-alerts", "--log-dir", "runs/ddp", "--", *launch(), cwd=tmp_path, timeout=300)
    assert p.returncode == 0, p.stderr
    assert (tmp_path / "before_nan.pt").read_bytes() == unwatched
    log_dir = tmp_path / "runs" / "ddp"
    assert sorted(q.name for q in log_dir.iterdir() if q.is_dir()) == ["rank-0", "rank-1"]
    assert steps_recorded(log_dir / "rank-1") == list(range(12))
    top = diagnosis(log_dir).findings[0]
    assert (top.cause, top.step, top.rank) == ("nonfinite_data", 5, 1)


LIGHTNING_SCRIPT = textwrap.dedent("""
    import torch, lightning as L
    L.seed_everything(0)
    class M(L.LightningModule):
        def __init__(self):
            super().__init__()
            self.net = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Linear(16, 1))
        def training_step(self, batch, i):
            x, y = batch
            return torch.nn.functional.mse_loss(self.net(x), y)
        def configure_optimizers(self):
            return torch.optim.Adam(self.parameters(), lr=3e-3)
    x = torch.randn(64, 8, generator=torch.Generator().manual_seed(0))
    y = torch.tanh(x[:, :2].sum(1, keepdim=True))
    loader = torch.utils.data.DataLoader(torch.utils.data.TensorDataset(x, y), batch_size=8)
    m = M()
    L.Trainer(max_steps=8, accelerator="cpu", logger=False, enable_checkpointing=False, enable_progress_bar=False,
              enable_model_summary=False).fit(m, loader)
    torch.save(m.state_dict(), "final.pt")
""")


@pytest.mark.slow
def test_lightning_trainer_gets_its_callback_and_records_each_step_once(tmp_path):
    script = write(tmp_path, "train_pl.py", LIGHTNING_SCRIPT)
    subprocess.run([sys.executable, str(script)], cwd=tmp_path, check=True, capture_output=True, timeout=300)
    unwatched = (tmp_path / "final.pt").read_bytes()
    (tmp_path / "final.pt").unlink()
    p = run_cli(
        "run", "--no-alerts", "--log-dir", "runs/pl", "--", sys.executable, str(script), cwd=tmp_path, timeout=300
    )
    assert p.returncode == 0, p.stderr
    assert (tmp_path / "final.pt").read_bytes() == unwatched
    log_dir = tmp_path / "runs" / "pl"
    assert steps_recorded(log_dir) == list(range(8))
    meta = json.loads((log_dir / "meta.json").read_text())
    assert meta["framework"]["name"] == "lightning" and "attached" not in meta


def test_help_has_examples():
    p = run_cli("run", "--help")
    assert p.returncode == 0
    assert "lossdoctor run -- python train.py" in p.stdout and "LOSSDOCTOR_ATTACH=1" in p.stdout
    p = run_cli("run", "--print-bootstrap")
    assert p.returncode == 0 and (Path(p.stdout.strip()) / "sitecustomize.py").is_file()


RESUME_SCRIPT = """
import sys, torch
from transformers import Trainer, TrainingArguments, set_seed
set_seed(0)
class Net(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.body = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Linear(16, 1))
    def forward(self, x, labels=None):
        out = self.body(x)
        return {"loss": torch.nn.functional.mse_loss(out, labels), "logits": out}
x = torch.randn(64, 8, generator=torch.Generator().manual_seed(0))
y = torch.tanh(x[:, :2].sum(1, keepdim=True))
x[45, 3] = float("nan")   # a broken sample: batch 5 (samples 40-47, no shuffling)
data = [{"x": a, "labels": b} for a, b in zip(x, y)]
class Ordered(Trainer):
    def _get_train_sampler(self, *a, **k):
        return torch.utils.data.SequentialSampler(self.train_dataset)
resume = sys.argv[sys.argv.index("--resume_from_checkpoint") + 1] if "--resume_from_checkpoint" in sys.argv else None
args = TrainingArguments(output_dir="out", max_steps=8, per_device_train_batch_size=8, learning_rate=1e-3,
                         logging_steps=1, save_steps=2, report_to=[], use_cpu=True, disable_tqdm=True, seed=0)
Ordered(model=Net(), args=args, train_dataset=data).train(resume_from_checkpoint=resume)
"""


@pytest.mark.slow
def test_rerun_from_the_last_checkpoint_reproduces_the_nan_and_triages_it(tmp_path):
    """The README's first step after a NaN: `lossdoctor run -- python train.py
    --resume_from_checkpoint out/checkpoint-4`, on an HF Trainer run whose batch 5 holds a NaN
    sample: the rerun records from the checkpoint on, the NaN comes back at the same batch, and it
    is triaged (an incident record) and named down to the sample."""
    script = write(tmp_path, "train.py", RESUME_SCRIPT)
    subprocess.run([sys.executable, str(script)], cwd=tmp_path, check=True, capture_output=True, timeout=300)
    unwatched = (tmp_path / "out" / "checkpoint-8" / "model.safetensors").read_bytes()
    p = run_cli(
        "run",
        "--no-alerts",
        "--log-dir",
        "runs/resume",
        "--",
        sys.executable,
        str(script),
        "--resume_from_checkpoint",
        "out/checkpoint-4",
        cwd=tmp_path,
        timeout=300,
    )
    assert p.returncode == 0, p.stderr
    assert (tmp_path / "out" / "checkpoint-8" / "model.safetensors").read_bytes() == unwatched
    log_dir = tmp_path / "runs" / "resume"
    assert steps_recorded(log_dir) == list(range(4))  # global steps 5-8: counted from the checkpoint
    top = diagnosis(log_dir).findings[0]
    assert (top.cause, top.step, list(top.samples)) == ("nonfinite_data", 1, [5])
    assert (log_dir / "incidents" / "step-00000001.json").is_file()


AMP_SCRIPT = textwrap.dedent("""
    import torch
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Linear(16, 1))
    opt = torch.optim.Adam(model.parameters(), lr=3e-3)
    scaler = torch.amp.GradScaler("cpu", init_scale=2.0 ** 16)
    sched = torch.optim.lr_scheduler.LinearLR(opt, start_factor=0.5, total_iters=4)
    data = torch.randn(256, 8)
    target = torch.tanh(data[:, :2].sum(1, keepdim=True))
    losses = []
    for step in range(12):
        i = (step * 16) % 256
        loss = torch.nn.functional.mse_loss(model(data[i:i + 16]), target[i:i + 16])
        if step == 6:
            loss = loss * float("inf")  # an overflow: the scaler skips this step
        losses.append(loss.item())
        opt.zero_grad()
        scaler.scale(loss).backward()
        scaler.step(opt)
        scaler.update()
        sched.step()
    torch.save({"model": model.state_dict(), "losses": losses}, "final.pt")
""")


@pytest.mark.slow
def test_a_grad_scaler_and_scheduler_are_found_the_loss_unscaled_and_skipped_steps_recorded(tmp_path):
    import torch

    script = write(tmp_path, "amp.py", AMP_SCRIPT)
    subprocess.run([sys.executable, str(script)], cwd=tmp_path, check=True, capture_output=True, timeout=300)
    unwatched = (tmp_path / "final.pt").read_bytes()
    losses = torch.load(tmp_path / "final.pt")["losses"]
    p = run_cli(
        "run", "--no-alerts", "--log-dir", "runs/amp", "--", sys.executable, str(script), cwd=tmp_path, timeout=300
    )
    assert p.returncode == 0, p.stderr
    assert (tmp_path / "final.pt").read_bytes() == unwatched
    log_dir = tmp_path / "runs" / "amp"
    records = [json.loads(line) for line in (log_dir / "steps.jsonl").read_text().splitlines() if line.strip()]
    assert [r["step"] for r in records] == list(range(12))  # the skipped step too
    assert [r["loss"] for r in records if r["step"] != 6] == [x for i, x in enumerate(losses) if i != 6]
    assert [r["step"] for r in records if r["skipped"]] == [6]
    assert (records[0]["scale"], records[-1]["scale"]) == (65536.0, 32768.0)
    # opened before the first backward: step 0's gradient norm is measured, and unscaled once
    assert 0.1 < records[0]["grad_norm"] / records[1]["grad_norm"] < 10
    attached = json.loads((log_dir / "meta.json").read_text())["attached"]
    assert (attached["scaler"], attached["scheduler"]) == ("GradScaler", "LinearLR")
    assert [r["lr"] for r in records[:5]] == pytest.approx([1.5e-3, 1.875e-3, 2.25e-3, 2.625e-3, 3e-3])


@pytest.mark.slow
def test_a_script_that_watches_itself_is_not_recorded_twice(tmp_path):
    own = PLAIN_LOOP.replace(
        "opt = torch.optim.Adam(model.parameters(), lr=3e-3)\n",
        "opt = torch.optim.Adam(model.parameters(), lr=3e-3)\n"
        'import lossdoctor\nmon = lossdoctor.watch(model, opt, log_dir="runs/own", alerts=False)\n',
    )
    own = own.replace("    opt.step()\n", "    opt.step()\n    mon.step(loss, batch=x)\n")
    own = own.replace('torch.save(model.state_dict(), "final.pt")', "mon.close()")
    assert own.count("mon.") == 2
    script = write(tmp_path, "train.py", own)
    p = run_cli(
        "run",
        "--no-alerts",
        "--log-dir",
        "runs/run",
        "--",
        sys.executable,
        str(script),
        "-1",
        "10",
        cwd=tmp_path,
        timeout=300,
    )
    assert p.returncode == 0, p.stderr
    assert steps_recorded(tmp_path / "runs" / "own") == list(range(10))
    # lossdoctor run's directory holds the console copy only: no second recording
    assert sorted(p.name for p in (tmp_path / "runs" / "run").iterdir()) == ["console.log"]


@pytest.mark.slow
def test_python_dash_m_runs_a_module_watched(tmp_path):
    """`-- python -m pkg.train ARGS`: the module is found on the child's own path (its working
    directory), as without lossdoctor, and watched."""
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "__init__.py").write_text("")
    write(tmp_path / "pkg", "train.py", PLAIN_LOOP)
    p = run_cli(
        "run",
        "--no-alerts",
        "--log-dir",
        "runs/mod",
        "--",
        sys.executable,
        "-m",
        "pkg.train",
        "3",
        "12",
        cwd=tmp_path,
        timeout=300,
    )
    assert p.returncode == 0, p.stderr
    top = diagnosis(tmp_path / "runs" / "mod").findings[0]
    assert (top.cause, top.step) == ("nonfinite_data", 3)
    assert steps_recorded(tmp_path / "runs" / "mod") == list(range(12))


ACCELERATE_LOOP = textwrap.dedent("""
    import torch
    from accelerate import Accelerator
    acc = Accelerator(cpu=True)
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Linear(16, 1))
    opt = torch.optim.Adam(model.parameters(), lr=3e-3)
    model, opt = acc.prepare(model, opt)
    data = torch.randn(256, 8)
    target = data[:, :1]
    for step in range(20):
        i = (step * 16) % 256
        x, y = data[i:i + 16].clone(), target[i:i + 16]
        if step == 7:
            x[0, 0] = float("nan")
        loss = torch.nn.functional.mse_loss(model(x), y)
        opt.zero_grad()
        acc.backward(loss)
        opt.step()
""")


@pytest.mark.slow
def test_accelerate_launch_is_watched(tmp_path):
    """`accelerate launch` (its real CLI, one CPU process): the script's Accelerator-wrapped
    optimizer is found, every step recorded, the NaN batch named; no warning of lossdoctor's own in
    the script's console."""
    pytest.importorskip("accelerate")
    accelerate = Path(sys.executable).with_name("accelerate")
    if not accelerate.exists():
        pytest.skip("the accelerate CLI is not installed next to this Python")
    script = write(tmp_path, "train.py", ACCELERATE_LOOP)
    p = run_cli(
        "run",
        "--no-alerts",
        "--log-dir",
        "runs/acc",
        "--",
        str(accelerate),
        "launch",
        "--cpu",
        "--num_processes",
        "1",
        "--num_machines",
        "1",
        "--mixed_precision",
        "no",
        "--dynamo_backend",
        "no",
        str(script),
        cwd=tmp_path,
        timeout=300,
    )
    assert p.returncode == 0, p.stderr
    log_dir = tmp_path / "runs" / "acc"
    assert steps_recorded(log_dir) == list(range(20))
    top = diagnosis(log_dir).findings[0]
    assert (top.cause, top.step, top.samples) == ("nonfinite_data", 7, [0])
    assert "lossdoctor/integrations" not in (log_dir / "console.log").read_text()
