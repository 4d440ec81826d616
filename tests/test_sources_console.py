"""Console output as users have it (a terminal scroll, nohup.out, a paste), read by the console reader.

Where the tool runs here, the text is written by the tool itself: a real Hugging Face Trainer (its
progress bar on, stdout and stderr captured into one file as a terminal shows them) and real tqdm
bars. Where it does not (nanoGPT, litgpt, mlx-lm, torchtitan, Megatron, DeepSpeed), the lines are
written with the print statement of the tool's source, cited at each writer below.
"""

from __future__ import annotations

import io
import json
import math
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import logfaults
from conftest import cli_env, run_cli
from lossdoctor.detectors.engine import diagnose_runs
from lossdoctor.sources import SourceError, load_path
from msgs import from_json, has, walk

HERE = Path(__file__).resolve().parent


# --- Hugging Face Trainer, the real one -------------------------------------------------------


def read_counts(notes) -> dict[str, int]:
    """What the console reader's first note says it read: {the kind's key: how many lines}."""
    return {
        m.values["kind"].key: m.values["n"]
        for m in walk(notes)
        if m.key == "console.n_kind" and hasattr(m.values["kind"], "key")
    }


def _console_log(script: str, out: Path, *args) -> Path:
    """Run a training script with its console progress bar on; stdout and stderr go to one file,
    unbuffered, in the order a terminal shows them (`python train.py > train.log 2>&1` with
    PYTHONUNBUFFERED)."""
    log = out / "train.log"
    env = cli_env()
    env["PYTHONUNBUFFERED"] = "1"
    env.pop("TQDM_DISABLE", None)
    with open(log, "wb") as f:
        subprocess.run(
            [sys.executable, str(HERE / script), str(out), *map(str, args)],
            stdout=f,
            stderr=subprocess.STDOUT,
            env=env,
            timeout=600,
            check=True,
        )
    return log


def _hf_console(
    out: Path, lr: float, optim: str, clip: float, steps: int, logging_steps: int, eval_steps: int = 0
) -> Path:
    return _console_log("hf_console_train.py", out, lr, optim, clip, steps, logging_steps, eval_steps)


@pytest.fixture(scope="module")
def hf_logs(tmp_path_factory):
    root = tmp_path_factory.mktemp("hfconsole")
    (root / "explode").mkdir()
    (root / "healthy").mkdir()
    # SGD at lr=2 without clipping: the gradient norm grows to ~1e6, then NaN (the Trainer then
    # logs the NaN interval's loss as 0); evaluation every 10 steps adds nested eval bars and dicts
    explode = _hf_console(root / "explode", 2.0, "sgd", 0.0, 30, 2, eval_steps=10)
    healthy = _hf_console(root / "healthy", 1e-3, "adamw_torch", 1.0, 30, 1)
    return explode, healthy


def _state(log: Path, steps: int = 30) -> list[dict]:
    state = json.loads((log.parent / f"checkpoint-{steps}" / "trainer_state.json").read_text())
    return [e for e in state["log_history"] if "loss" in e]


@pytest.mark.slow  # trains a real HF Trainer (~25 s)
def test_hf_trainer_console_steps_match_trainer_state(hf_logs):
    explode, _ = hf_logs
    raw = explode.read_bytes()
    assert b"\r" in raw and b"{'loss'" in raw and b"eval_loss" in raw and b"train_runtime" in raw
    run = load_path(explode)[0]
    entries = _state(explode)
    # every dict is placed on the Trainer's own global_step (which the dict does not print)
    assert list(run.steps) == [e["step"] for e in entries]
    state_loss = np.array([e["loss"] for e in entries], dtype=float)
    state_gn = np.array([e["grad_norm"] for e in entries], dtype=float)
    finite = np.isfinite(state_gn)
    np.testing.assert_allclose(run.cols["grad_norm"][finite], state_gn[finite], rtol=2e-3)
    assert np.isnan(run.cols["grad_norm"][~finite]).all()
    ok = finite & (state_loss != 0)
    np.testing.assert_allclose(run.cols["loss"][ok], state_loss[ok], rtol=2e-3)
    # the all-NaN intervals the Trainer logged as 0.0 are read as NaN, logged
    artefact = ~finite & (state_loss == 0)
    assert artefact.any() and np.isnan(run.cols["loss"][artefact]).all() and run.logged("loss")[artefact].all()
    assert run.meta["framework"] == "transformers" and run.meta["log_interval"] == 2
    assert read_counts(run.notes)["console.kind_hf"] == 15 and has(run.notes, "console.eval_dicts"), [
        m.data() for m in run.notes
    ]
    assert has(run.notes, "source.hf_filtered_nan") and has(run.notes, "console.took_bar_counter")


@pytest.mark.slow  # trains a real HF Trainer (~25 s, shared fixture)
def test_hf_trainer_console_diagnosed_like_trainer_state(hf_logs):
    explode, _ = hf_logs
    console = json.loads(run_cli("diagnose", explode, "--format", "json").stdout)
    state = json.loads(
        run_cli("diagnose", explode.parent / "checkpoint-30" / "trainer_state.json", "--format", "json").stdout
    )
    assert console["status"] == state["status"] == "critical"
    assert [(f["cause"], f["step"]) for f in console["findings"]] == [
        (f["cause"], f["step"]) for f in state["findings"]
    ]


@pytest.mark.slow  # trains a real HF Trainer (~25 s, shared fixture)
def test_hf_trainer_console_healthy(hf_logs):
    _, healthy = hf_logs
    run = load_path(healthy)[0]
    assert list(run.steps) == list(range(1, 31))
    assert run.cols["loss"][-1] < run.cols["loss"][0] and run.has("grad_norm") and run.has("lr")
    assert diagnose_runs([run]).status == "healthy"


# --- TRL's SFTTrainer, the real one -----------------------------------------------------------


@pytest.mark.slow  # a real TRL SFTTrainer trains (~7 s)
def test_trl_sft_trainer_console_matches_trainer_state(tmp_path):
    """TRL prints the Trainer's dicts with its own keys added ('entropy', 'num_tokens',
    'mean_token_accuracy'); they must not break reading, and the steps and losses must be TRL's own."""
    pytest.importorskip("trl")
    log = _console_log("trl_console_train.py", tmp_path, 1e-3, "adamw_torch", 1.0, 12, 2)
    raw = log.read_bytes()
    assert b"\r" in raw and b"'mean_token_accuracy'" in raw and b"'num_tokens'" in raw and b"'entropy'" in raw
    run = load_path(log)[0]
    state = json.loads((tmp_path / "checkpoint-12" / "trainer_state.json").read_text())
    entries = [e for e in state["log_history"] if "loss" in e]
    assert [e["step"] for e in entries] == [2, 4, 6, 8, 10, 12]
    assert list(run.steps) == [e["step"] for e in entries]
    # TRL 1.x prints values rounded to 4 significant digits
    np.testing.assert_allclose(run.cols["loss"], [e["loss"] for e in entries], rtol=6e-4)
    np.testing.assert_allclose(run.cols["grad_norm"], [e["grad_norm"] for e in entries], rtol=6e-4)
    assert read_counts(run.notes)["console.kind_hf"] == 6
    assert run_cli("diagnose", log).returncode == 0


@pytest.mark.slow  # a real TRL SFTTrainer trains (~7 s)
def test_trl_sft_trainer_diverging_console_diagnosed_like_trainer_state(tmp_path):
    """SGD at lr=5 without clipping: the loss grows to ~5e12, then the gradient norm is NaN and TRL
    (through the Trainer's logging_nan_inf_filter) logs the loss as 0."""
    pytest.importorskip("trl")
    log = _console_log("trl_console_train.py", tmp_path, 5.0, "sgd", 0.0, 12, 1)
    run = load_path(log)[0]
    state_path = tmp_path / "checkpoint-12" / "trainer_state.json"
    entries = [e for e in json.loads(state_path.read_text())["log_history"] if "loss" in e]
    assert list(run.steps) == [e["step"] for e in entries] == list(range(1, 13))
    state_loss = np.array([e["loss"] for e in entries], dtype=float)
    finite = np.isfinite(np.array([e["grad_norm"] for e in entries], dtype=float))
    assert state_loss[finite].max() > 1e6 and not finite.all()
    np.testing.assert_allclose(run.cols["loss"][finite], state_loss[finite], rtol=6e-4)
    assert np.isnan(run.cols["loss"][~finite]).all()
    console = json.loads(run_cli("diagnose", log, "--format", "json").stdout)
    state = json.loads(run_cli("diagnose", state_path, "--format", "json").stdout)
    assert console["status"] == state["status"] == "critical"
    assert [(f["cause"], f["step"]) for f in console["findings"]] == [
        (f["cause"], f["step"]) for f in state["findings"]
    ]
    assert console["findings"][0]["cause"] == "lr_too_high"


def test_hf_dict_forms_without_a_bar(tmp_path):
    """Older transformers print bare floats and `nan`; newer ones quote the values. Printed without
    a progress bar (disable_tqdm: the PrinterCallback) the dicts have no step: numbered, with a note."""
    p = tmp_path / "out.txt"
    p.write_text(
        "{'loss': 2.3456, 'grad_norm': 1.5, 'learning_rate': 5e-05, 'epoch': 0.1}\n"
        "{'loss': '2.101', 'grad_norm': 'inf', 'learning_rate': '4.5e-05', 'epoch': '0.2'}\n"
        "{'loss': 0.0, 'grad_norm': nan, 'learning_rate': 4e-05, 'epoch': 0.3}\n"
        "{'eval_loss': 2.2, 'eval_runtime': 1.0, 'epoch': 0.3}\n"
        "{'train_runtime': 10.0, 'train_samples_per_second': 3.2, 'train_loss': 1.5, 'epoch': 0.3}\n"
    )
    run = load_path(p)[0]
    assert list(run.steps) == [1, 2, 3]
    assert run.cols["loss"][0] == 2.3456 and run.cols["loss"][1] == 2.101 and np.isnan(run.cols["loss"][2])
    assert np.isinf(run.cols["grad_norm"][1]) and run.cols["lr"][1] == 4.5e-05
    assert any("numbered 1, 2, 3" in n for n in run.notes)


def test_invisible_characters_in_a_paste_do_not_split_values(tmp_path):
    """Pasted through a chat app or a web page, `':` + space can gain an emoji variation selector
    (U+FE0F) or a zero-width space (seen in a real paste: benchmarks/real_logs/
    hf_crystal_llm_loss_always_zero.txt): the value after it must still be read."""
    p = tmp_path / "paste.md"
    p.write_text(
        "{'loss':\ufe0f 0.0, 'learning_rate': 1e-05, 'epoch': 0.0}\n"
        "{'loss': 0.0,\u200b 'learning_rate': 2e-05, 'epoch': 0.0}\n"
        "\ufeff{'loss': 1.5, 'learning_rate': 3e-05, 'epoch': 0.0}\n",
        encoding="utf-8",
    )
    run = load_path(p)[0]
    assert list(run.cols["loss"]) == [0.0, 0.0, 1.5]
    assert list(run.cols["lr"]) == [1e-05, 2e-05, 3e-05]


def test_hf_dicts_pasted_above_the_last_bar(tmp_path):
    """Copied from a terminal: the dicts stay in the scrollback, the bar is redrawn below them."""
    p = tmp_path / "paste.txt"
    p.write_text(
        "".join(
            f"{{'loss': {2.0 - s / 100:.4f}, 'learning_rate': 1e-05, 'epoch': {s / 100}}}\n" for s in (5, 10, 15, 20)
        )
        + " 20%|##        | 20/100 [00:10<00:40,  2.00it/s]\n"
    )
    run = load_path(p)[0]
    assert list(run.steps) == [5, 10, 15, 20]
    assert has(run.notes, "console.spaced", n=3), [m.data() for m in run.notes]  # the fourth took the bar's counter


def test_llama_factory_trainer_log_jsonl(tmp_path):
    """LLaMA-Factory's LogCallback (src/llamafactory/train/callbacks.py) appends `json.dumps(logs)`
    of dict(current_steps, total_steps, loss, lr, epoch, percentage, elapsed_time, remaining_time)
    with the None values dropped to `trainer_log.jsonl`; evaluation entries carry eval_loss."""
    lines = []
    for s in range(5, 105, 5):
        loss = 2.0 - s / 200 if s < 80 else float("nan")
        lines.append(
            json.dumps(
                {
                    "current_steps": s,
                    "total_steps": 100,
                    "loss": loss,
                    "lr": 1e-4,
                    "epoch": s / 100,
                    "percentage": float(s),
                    "elapsed_time": "0:00:10",
                    "remaining_time": "0:01:00",
                }
            )
        )
        if s % 50 == 0:
            lines.append(
                json.dumps(
                    {"current_steps": s, "total_steps": 100, "eval_loss": 1.9, "epoch": s / 100, "percentage": float(s)}
                )
            )
    p = tmp_path / "trainer_log.jsonl"
    p.write_text("\n".join(lines) + "\n")
    run = load_path(p)[0]
    assert list(run.steps) == list(range(5, 105, 5))
    assert run.cols["loss"][0] == pytest.approx(1.975) and np.isnan(run.cols["loss"][-1])
    assert run.logged("loss")[-1] and run.cols["lr"][0] == 1e-4


# --- tqdm, the real one -----------------------------------------------------------------------


def test_tqdm_postfix_with_real_tqdm(tmp_path):
    from tqdm import tqdm

    curve = logfaults.grad_explosion()
    buf = io.StringIO()
    bar = tqdm(range(len(curve["step"])), file=buf, mininterval=0, miniters=1, desc="train")
    for i in bar:
        bar.set_postfix(loss=float(curve["loss"][i]), grad_norm=float(curve["grad_norm"][i]), lr=float(curve["lr"][i]))
    bar.close()
    text = buf.getvalue()
    assert "\r" in text and "\n" not in text.rstrip("\n")  # one "line" of \r-redrawn bars
    p = tmp_path / "tqdm.log"
    p.write_text(text)
    run = load_path(p)[0]
    assert list(run.steps) == list(range(300))
    # tqdm's postfix prints floats with 3 significant digits
    np.testing.assert_allclose(run.cols["loss"], curve["loss"], rtol=6e-3, equal_nan=True)
    np.testing.assert_allclose(run.cols["grad_norm"], curve["grad_norm"], rtol=6e-3, equal_nan=True)
    assert run.meta["framework"] == "tqdm"
    logfaults.check(diagnose_runs([run]), "grad_explosion")


@pytest.mark.parametrize("describe", ["{e}|{s}|Loss: {v}", "Step {s} | loss {v}", "epoch {e} global_step={s} loss={v}"])
def test_a_bar_description_that_names_its_step_dates_its_loss(tmp_path, describe):
    """A bar whose description says which step its loss is of (torchtune's `f"{epoch + 1}|{global_step}|Loss:
    {loss}"`, a named `Step`, `global_step=`): that step, not the bar's counter (updated before the
    description, or counting micro-batches). Real tqdm, redrawn as a terminal gets it."""
    from tqdm import tqdm

    losses = [2.31, 2.27, 2.19, 2.12, 2.08, 2.01]
    buf = io.StringIO()
    bar = tqdm(total=20, file=buf, mininterval=0, miniters=1)
    for s, v in enumerate(losses, start=40):
        bar.update(3)  # three micro-batches a step
        bar.set_description(describe.format(e=1, s=s, v=v))
    bar.close()
    run = _read_text(tmp_path, buf.getvalue())
    lg = run.logged("loss")
    assert dict(zip(run.steps[lg].tolist(), run.cols["loss"][lg].tolist())) == dict(enumerate(losses, start=40))


def test_tqdm_lightning_epochs_become_global_steps(tmp_path):
    """Lightning's bar restarts each epoch (`Epoch 1: 40%|...| 4/10`): step = epoch * total + n."""
    from tqdm import tqdm

    buf = io.StringIO()
    for epoch in range(3):
        bar = tqdm(total=10, file=buf, mininterval=0, miniters=1, desc=f"Epoch {epoch}")
        for i in range(10):
            bar.update(1)
            bar.set_postfix(v_num=0, train_loss=3.0 - 0.05 * (epoch * 10 + i))
        bar.close()
    p = tmp_path / "lightning.log"
    p.write_text(buf.getvalue())
    run = load_path(p)[0]
    assert list(run.steps) == list(range(1, 31))
    assert np.all(np.diff(run.cols["loss"]) < 0)


def test_nemo_bar_with_its_global_step(tmp_path):
    """NeMo (Lightning's bar): the postfix carries `reduced_train_loss` and the trainer's own
    0-based `global_step` as a float, which is the step, not the bar's counter within the epoch."""
    segs = [
        f"\rEpoch 1: :  {s}%|#         | {s}/200 [01:40<31:40, reduced_train_loss={3 - s / 100:.3f}, "
        f"global_step={199 + s}.0, consumed_samples={(200 + s) * 256}.0, train_step_timing in s=1.01]"
        for s in range(1, 51)
    ]
    p = tmp_path / "nemo.log"
    p.write_text("".join(segs) + "\n")
    run = load_path(p)[0]
    assert list(run.steps) == list(range(200, 250))
    assert run.cols["loss"][0] == pytest.approx(2.99)


def test_nemo_bar_reads_reduced_train_loss_not_the_running_mean(tmp_path):
    """NeMo 1.x on Lightning 1.x: the bar prints Lightning's `loss=` (the running mean of the last
    batches, at its own 3 significant digits) before `reduced_train_loss=` (the step's loss averaged
    over ranks): the step's loss is the loss."""
    steps = range(100, 130)
    own = [3.0 + 0.4 * ((s * 7) % 5 - 2) / 2 for s in steps]
    segs = []
    for i, s in enumerate(steps):
        mean = sum(own[max(0, i - 19) : i + 1]) / len(own[max(0, i - 19) : i + 1])
        segs.append(
            f"\rEpoch 0:   1%|          | {s + 1}/77225 [9:07:58<878:01:48, 41.36s/it, loss={mean:.3g}, v_num=, "
            f"reduced_train_loss={own[i]:.3f}, global_step={s}.0, consumed_samples={(s + 1) * 2048:.3g}]"
        )
    p = tmp_path / "nemo_megatron.log"
    p.write_text("".join(segs) + "\n")
    run = load_path(p)[0]
    assert list(run.steps) == list(steps)
    assert run.cols["loss"].tolist() == pytest.approx([round(v, 3) for v in own])


def test_a_counter_restarting_each_epoch_keeps_the_finite_loss_before_the_nans(tmp_path):
    """A script printing `print(f"Epoch {epoch}, Iter {i}: Loss:{loss:.4f} S-loss:{s_loss:.4f}")` at `i == 0`
    only: every line says `Iter 0`, the epoch moves on. Kept at one step, the first epoch's finite loss
    would be lost under the NaNs after it; each line is its own row, the NaN from the second one."""
    losses = [1.0637, float("nan"), float("nan"), float("nan"), float("nan")]
    text = "".join(f"Epoch {e}, Iter 0: Loss:{v:.4f} S-loss:{v * 0.9:.4f}\n" for e, v in enumerate(losses))
    p = tmp_path / "train.log"
    p.write_text(text)
    run = load_path(p)[0]
    got = run.col("loss")[run.logged("loss")].tolist()
    assert len(got) == 5 and got[0] == pytest.approx(1.0637) and all(math.isnan(v) for v in got[1:])
    assert list(run.steps) == sorted(run.steps) and len(set(run.steps.tolist())) == 5


# --- trainers that do not run here: their print statements ----------------------------------


def nanogpt_log(curve: dict) -> str:
    """nanoGPT train.py: `print(f"step {iter_num}: train loss {losses['train']:.4f}, val loss
    {losses['val']:.4f}")` every eval_interval and `print(f"iter {iter_num}: loss {lossf:.4f}, time
    {dt*1000:.2f}ms, mfu {running_mfu*100:.2f}%")` every log_interval."""
    out = ["Initializing a new model from scratch", "number of parameters: 10.65M"]
    for s, loss in zip(curve["step"], curve["loss"]):
        if s % 50 == 0:
            out.append(f"step {s}: train loss {loss:.4f}, val loss {loss + 0.1:.4f}")
        out.append(f"iter {s}: loss {loss:.4f}, time {120.5:.2f}ms, mfu {12.34 if s >= 5 else -100.0:.2f}%")
    return "\n".join(out) + "\n"


def litgpt_log(curve: dict) -> str:
    """lit-gpt pretrain/*.py: `fabric.print(f"iter {iter_num} step {step_count}: loss {loss.item():.4f},
    iter time: {(t1 - iter_t0) * 1000:.2f}ms{' (optimizer.step)' if not is_accumulating else ''}")`,
    with 4 micro-batches per optimizer step. Each line is one micro-batch's loss: the reader keeps
    them all, on the iteration counter (the finer one), not one per optimizer step."""
    out = []
    for s, loss in zip(curve["step"], curve["loss"]):
        for micro in range(4):
            it = int(s) * 4 + micro
            tail = " (optimizer.step)" if micro == 3 else ""
            out.append(f"iter {it} step {int(s) + (micro == 3)}: loss {loss:.4f}, iter time: 95.12ms{tail}")
    return "\n".join(out) + "\n"


def mlx_log(curve: dict) -> str:
    """mlx-lm mlx_lm/tuner/trainer.py: `print(f"Iter {it}: Train loss {train_loss:.3f}, Learning Rate
    {learning_rate:.3e}, It/sec {it_sec:.3f}, Tokens/sec {tokens_sec:.3f}, Trained Tokens
    {trained_tokens}, Peak mem {peak_mem:.3f} GB")` and `Iter {it}: Val loss {val_loss:.3f}, Val took
    {val_time:.3f}s`."""
    out = ["Loading pretrained model", "Starting training..., iters: 300"]
    for s, loss, lr in zip(curve["step"], curve["loss"], curve["lr"]):
        if s % 100 == 0:
            out.append(f"Iter {s + 1}: Val loss {loss + 0.2:.3f}, Val took 1.234s")
        out.append(
            f"Iter {s + 1}: Train loss {loss:.3f}, Learning Rate {lr:.3e}, It/sec 1.234, "
            f"Tokens/sec 456.789, Trained Tokens {(s + 1) * 512}, Peak mem 3.210 GB"
        )
    return "\n".join(out) + "\n"


def torchtitan_log(curve: dict) -> str:
    """torchtitan train.py: `logger.info(f"{color.red}step: {step:2}  {color.green}loss: {loss:7.4f}
    {color.orange}grad_norm: {grad_norm:7.4f}  {color.turquoise}memory: {...:5.2f}GiB({...:.2f}%)
    {color.blue}tps: {round(tps):,}  {color.cyan}tflops: {tflops:,.2f}  {color.magenta}mfu:
    {mfu:.2f}%{color.reset}")` through its logger (`[titan] <time> - root - INFO - `), under
    torchrun's `[rank0]:` prefix."""
    red, green, orange, blue, reset = "\x1b[31m", "\x1b[32m", "\x1b[33m", "\x1b[34m", "\x1b[39m"
    out = []
    for s, loss, gn in zip(curve["step"], curve["loss"], curve["grad_norm"]):
        out.append(
            f"[rank0]:[titan] 2025-10-30 14:32:58,897 - root - INFO - {red}step: {int(s) + 1:2}  "
            f"{green}loss: {loss:7.4f}  {orange}grad_norm: {gn:7.4f}  {blue}memory:  2.49GiB(3.14%)  "
            f"tps: 177,138  tflops: 96.17  mfu: 9.72%{reset}"
        )
    return "\n".join(out) + "\n"


def composer_log(curve: dict) -> str:
    """MosaicML Composer composer/loggers/console_logger.py `log_to_console`: `log_str =
    f'{progress}' + ':'`, then per metric `log_str += f'\\n\\t {prefix}{data_name}: {data_str}'`
    with prefix 'Train ' and the progress `f'[{unit.name.lower()}={curr_duration}/{total}]'`; values
    by `format_log_data_value` (floats `f'{data:.4f}'`). `time/batch` is read before the trainer
    counts the batch; `l2_norm/grad/global` is its OptimizerMonitor's, `lr-DecoupledAdamW/group0` its
    LRMonitor's. Evaluation blocks in between (`[Eval batch=1/4] Eval on eval data`)."""
    n = len(curve["step"])
    out = ["******************************", "Config:", "max_duration: 1000ba", "******************************"]
    for s, loss, gn, lr in zip(curve["step"], curve["loss"], curve["grad_norm"], curve["lr"]):
        block = f"[batch={int(s)}/{n}]:"
        for name, v in (
            ("time/batch", int(s) - 1),
            ("loss/train/total", loss),
            ("l2_norm/grad/global", gn),
            ("lr-DecoupledAdamW/group0", lr),
        ):
            block += f"\n\t Train {name}: {v if isinstance(v, int) else f'{v:.4f}'}"
        out.append(block)
        if s % 25 == 0:
            out += [
                "[Eval batch=1/4] Eval on eval data",
                "[Eval batch=4/4] Eval on eval data:",
                f"\t Eval metrics/eval/LanguageCrossEntropy: {loss + 0.1:.4f}",
            ]
    return "\n".join(out) + "\n"


def mmengine_log(curve: dict) -> str:
    """mmengine's LoggerHook / LogProcessor (MMDetection, XTuner...): `Epoch(train) [{epoch}][{iter}/{max}]`
    then `name: value` pairs, the batch counted within its epoch (epochs from 1): the step is
    (epoch - 1) x iterations per epoch + iteration. As in the corpus' mmengine excerpts."""
    per = 100
    return "".join(
        f"2024/05/10 15:46:31 - mmengine - INFO - Epoch(train)  [{int(s) // per + 1}][{int(s) % per:>3}/{per}]  "
        f"lr: {lr:.4e}  eta: 4:14:00  time: 0.8167  data_time: 0.0169  memory: 15943  grad_norm: {gn:.4f}  "
        f"loss: {loss:.4f}  loss_cls: {loss / 2:.4f}\n"
        for s, loss, gn, lr in zip(curve["step"], curve["loss"], curve["grad_norm"], curve["lr"])
    )


def timm_log(curve: dict) -> str:
    """timm train.py: `f'Train: {epoch} [{update_idx:>4d}/{updates_per_epoch} ({100. * (update_idx + 1) /
    updates_per_epoch:>3.0f}%)]  Loss: {losses_m.val:#.3g} ({losses_m.avg:#.3g})  ...  LR: {lr:.3e}  ...'`,
    epoch and update index from 0: the step after that update is epoch x updates + index + 1."""
    per = 100
    return "".join(
        f"Train: {int(s) // per} [{int(s) % per:>4d}/{per} ({100.0 * (int(s) % per + 1) / per:>3.0f}%)]  "
        f"Loss: {loss:#.3g} ({loss:#.3g})  Time: 0.412s,  621.12/s  (0.468s,  546.46/s)  LR: {lr:.3e}  "
        f"Data: 0.011 (0.052)\n"
        for s, loss, lr in zip(curve["step"], curve["loss"], curve["lr"])
    )


def onmt_log(curve: dict) -> str:
    """OpenNMT-py onmt/utils/statistics.py `output`: `("Step %2d/%5d; acc: %6.2f; ppl: %5.2f; xent: %4.2f; "
    + "lr: %7.5f; %3.0f/%3.0f tok/s; %6.0f sec")` through its logger; `xent` is the cross-entropy loss."""
    n = len(curve["step"])
    return "".join(
        "[2024-01-01 10:00:00,000 INFO] "
        + ("Step %2d/%5d; acc: %6.2f; ppl: %5.2f; xent: %4.2f; lr: %7.5f; %3.0f/%3.0f tok/s; %6.0f sec")
        % (int(s), n, 12.5, math.exp(min(loss, 50)) if loss == loss else loss, loss, lr, 1234, 1234, 60)
        + "\n"
        for s, loss, lr in zip(curve["step"], curve["loss"], curve["lr"])
    )


def swift_log(curve: dict) -> str:
    """ms-swift's console: the Trainer's logs dict printed with its own fields, the step only in
    `'global_step/max_steps': 'N/M'` (as in modelscope/ms-swift issue 2280's pasted lines)."""
    n = len(curve["step"])
    return "".join(
        f"{{'loss': {loss:.8g}, 'token_acc': 0.5, 'grad_norm': {gn:.8g}, 'learning_rate': {lr:.4g}, "
        f"'memory(GiB)': 65.89, 'train_speed(iter/s)': 0.025912, 'epoch': {s / n:.2f}, "
        f"'global_step/max_steps': '{int(s)}/{n}', 'percentage': '{100 * s / n:.2f}%', 'elapsed_time': '14s', "
        f"'remaining_time': '8h 17m 1s'}}\n"
        for s, loss, gn, lr in zip(curve["step"], curve["loss"], curve["grad_norm"], curve["lr"])
    )


def generic_logs(curve: dict) -> dict[str, str]:
    """Trainers nobody listed: the same fields with other separators."""
    pipes, eq, spaces = [], [], []
    for s, loss, gn, lr in zip(curve["step"], curve["loss"], curve["grad_norm"], curve["lr"]):
        pipes.append(f"| epoch 1 | step: {s} | lm loss: {loss:.5f} | grad norm: {gn:.4g} | lr: {lr:.3e} |")
        eq.append(f"2024-05-01 10:00:00 INFO global_step={s} train/loss={loss:.5f} gnorm={gn:.4g} lr={lr:.3e}")
        spaces.append(f"Step {s} Loss {loss:.5f} Grad Norm {gn:.4g} LR {lr:.3e} 0.52s/it")
    return {"pipes": "\n".join(pipes) + "\n", "eq": "\n".join(eq) + "\n", "spaces": "\n".join(spaces) + "\n"}


@pytest.mark.parametrize(
    "kind",
    [
        "nanoGPT",
        "litgpt",
        "mlx-lm",
        "torchtitan",
        "composer",
        "swift",
        "mmengine",
        "timm",
        "onmt",
        "pipes",
        "eq",
        "spaces",
    ],
)
def test_trainer_print_formats(tmp_path, kind):
    curve = logfaults.grad_explosion()
    text = {
        "nanoGPT": nanogpt_log,
        "litgpt": litgpt_log,
        "mlx-lm": mlx_log,
        "torchtitan": torchtitan_log,
        "composer": composer_log,
        "swift": swift_log,
        "mmengine": mmengine_log,
        "timm": timm_log,
        "onmt": onmt_log,
    }.get(kind, lambda c: generic_logs(c)[kind])(curve)
    p = tmp_path / "train.out"
    p.write_text(text)
    run = load_path(p)[0]
    offset = 1 if kind in ("mlx-lm", "torchtitan", "timm") else 0
    n = len(curve["step"])
    if kind == "litgpt":  # micro-batch lines: every one kept, on the iteration counter
        assert list(run.steps) == list(range(4 * n))
        np.testing.assert_allclose(run.cols["loss"][::4], curve["loss"], rtol=2e-3, equal_nan=True)
        assert has(run.notes, "console.two_counters"), [m.data() for m in run.notes]
    else:
        assert list(run.steps) == list(curve["step"] + offset)
        digits = {"timm": 6e-3, "onmt": 5e-3}.get(kind, 2e-3)  # timm: three significant digits; onmt: 2 decimals
        np.testing.assert_allclose(run.cols["loss"], curve["loss"], rtol=digits, equal_nan=True)
    if kind in ("torchtitan", "composer", "swift", "mmengine", "pipes", "eq", "spaces"):
        np.testing.assert_allclose(run.cols["grad_norm"], curve["grad_norm"], rtol=2e-3, equal_nan=True)
    if kind == "composer":  # four printed decimals: an LR under 0.005 is left out, not read as 0.0000
        assert run.meta["framework"] == "composer" and any(f"read {n} Composer metric blocks" in x for x in run.notes)
        assert (np.asarray(curve["lr"]) < 0.005).all() and not run.has("lr")  # this curve's LR: 1e-5..1e-3
        assert any(getattr(x, "key", "") == "console.composer_rounded" for x in run.notes)
    if kind in ("nanoGPT", "litgpt", "mlx-lm", "torchtitan"):
        assert run.meta["framework"] == kind
        assert any(f"{len(curve['step'])} {kind} lines" in n or f" {kind} lines" in n for n in run.notes)
    report = diagnose_runs([run])
    if run.has("grad_norm"):
        logfaults.check(report, "grad_explosion")
    else:  # without the gradient norm: the step where the loss went NaN
        first_nan = int(curve["step"][np.flatnonzero(np.isnan(curve["loss"]))[0]]) + offset
        if kind == "litgpt":
            first_nan *= 4  # the iteration of that step's first micro-batch
        assert report.status == "critical" and report.findings[0].step == first_nan


def keras_log(losses: list[float], verbose: int) -> str:
    """Keras keras/src/utils/progbar.py: `Epoch {epoch}/{epochs}`, then `f"{current}/{target}"`, with
    verbose=1 a bar `" [" + "=" * prog_width + ...` redrawn with `\r` (`- ETA: ...` while running), the
    time and `{time_per_unit}/step`, and `info += f" - {k}: {avg:.4f}"` per metric."""
    out = []
    for e, loss in enumerate(losses, 1):
        out.append(f"Epoch {e}/{len(losses)}\n")
        if verbose == 1:
            out.append(
                f"\r 50/100 [==============>...............] - ETA: 1s - loss: {loss + 0.1:.4f} - accuracy: 0.5000"
            )
            out.append(
                f"\r100/100 [==============================] - 2s 15ms/step - loss: {loss:.4f} - accuracy: 0.5000 "
                f"- val_loss: {loss + 1:.4f} - val_accuracy: 0.4000\n"
            )
        else:
            out.append(f"100/100 - 2s - 15ms/step - accuracy: 0.5000 - loss: {loss:.4f} - val_loss: {loss + 1:.4f}\n")
    return "".join(out)


def keras3_log(losses: list[float]) -> str:
    """Keras 3's keras/src/utils/progbar.py: the counter in bold, the bar as `"━" * width` in two
    colours (done and to do), the ETA while running or the time and `{time_per_unit}/step` at the end,
    then `f" - {k}: {v:.4f}"` per metric (accuracy before loss, the order `fit` logs them)."""
    bold, green, grey, off = "\x1b[1m", "\x1b[32m", "\x1b[37m", "\x1b[0m"
    out = []
    for e, loss in enumerate(losses, 1):
        out.append(f"Epoch {e}/{len(losses)}\n")
        out.append(
            f"\r{bold} 50/100{off} {green}{'━' * 10}{off}{grey}{'━' * 10}{off} {bold}1s{off} 15ms/step - "
            f"accuracy: 0.5000 - loss: {loss + 0.1:.4f}"
        )
        out.append(
            f"\r{bold}100/100{off} {green}{'━' * 20}{off} 2s 15ms/step - accuracy: 0.5000 - loss: {loss:.4f} "
            f"- val_accuracy: 0.4000 - val_loss: {loss + 1:.4f}\n"
        )
    return "".join(out)


def test_keras3_progress_bars_of_heavy_lines(tmp_path):
    losses = [0.6931, 0.5123, 0.4011, float("nan")]
    p = tmp_path / "fit.log"
    p.write_text(keras3_log(losses))
    run = load_path(p)[0]
    ends = [100, 200, 300, 400]
    assert [int(s) for s in run.steps if s in ends] == ends and run.meta["framework"] == "keras"
    got = [run.cols["loss"][list(run.steps).index(s)] for s in ends]
    np.testing.assert_allclose(got, losses, equal_nan=True)
    assert run.cols["loss"][list(run.steps).index(50)] == pytest.approx(0.7931)
    assert run.cols["eval_loss"][list(run.steps).index(100)] == pytest.approx(1.6931)


@pytest.mark.parametrize("verbose", [1, 2])
def test_keras_progress_lines(tmp_path, verbose):
    losses = [0.6931, 0.5123, 0.4011, float("nan")]
    p = tmp_path / "fit.log"
    p.write_text(keras_log(losses, verbose))
    run = load_path(p)[0]
    ends = [100, 200, 300, 400]
    assert [int(s) for s in run.steps if s in ends] == ends and run.meta["framework"] == "keras"
    got = [run.cols["loss"][list(run.steps).index(s)] for s in ends]
    np.testing.assert_allclose(got, losses, equal_nan=True)
    if verbose == 1:  # the running mean at batch 50 of each epoch
        assert run.cols["loss"][list(run.steps).index(50)] == pytest.approx(0.7931)


def test_eval_losses_are_not_training_losses(tmp_path):
    p = tmp_path / "log.txt"
    p.write_text(
        "step 0: train loss 4.0000, val loss 9.0000\n"
        "Iter 1: Val loss 9.000, Val took 1.0s\n"
        "step 5 | val_loss 9.0 | eval/loss 9.0 | loss 3.5\n"
    )
    run = load_path(p)[0]
    lg = run.logged("loss")
    assert list(run.steps[lg]) == [0, 5] and list(run.cols["loss"][lg]) == [4.0, 3.5]
    # the evaluation losses are kept apart, at the step their line names
    ev = run.logged("eval_loss")
    assert list(run.steps[ev]) == [0, 1, 5] and list(run.cols["eval_loss"][ev]) == [9.0, 9.0, 9.0]


# --- Megatron lines without a loss, prefixes, DeepSpeed overflows -----------------------------


def _megatron_line(
    it: int, total: int, loss: float | None, skipped: int = 0, nan: int = 0, gn: float | None = 1.2, scale: float = 1.0
):
    """Megatron-LM megatron/training/training.py training_log: `iteration {:8d}/{:8d} |` then
    `' {}: {:.6E} |'.format(key, avg)` for each loss only `if avg > 0.0`, then `loss scale`,
    `grad norm` (when not None), `number of skipped iterations: {:3d} |`, `number of nan
    iterations: {:3d} |`."""
    s = (
        f" iteration {it:8d}/{total:8d} | consumed samples: {it * 512:12d} | elapsed time per iteration (ms): "
        f"1234.5 | learning rate: 3.000000E-04 | global batch size:   512 |"
    )
    if loss is not None:
        s += f" lm loss: {loss:.6E} |"
    s += f" loss scale: {scale:.1f} |"
    if gn is not None:
        s += f" grad norm: {gn:.3f} |"
    s += f" number of skipped iterations: {skipped:3d} | number of nan iterations: {nan:3d} |"
    return s


def test_megatron_iteration_without_lm_loss_is_nonfinite_or_skipped(tmp_path):
    lines = []
    for it in range(1, 21):
        if it == 12:  # fp16 overflow: the iteration was skipped, Megatron prints no loss
            lines.append(_megatron_line(it, 20, None, skipped=1, gn=None))
        elif it >= 16:  # the loss went NaN: nan > 0 is False, so no `lm loss` field
            lines.append(_megatron_line(it, 20, None, nan=1 if it == 16 else 0, gn=None))
        else:
            lines.append(_megatron_line(it, 20, 3.0 - it * 0.05))
    prefixes = ["[default7]:", "[rank0]: ", "0: ", "\x1b[32m[2024-05-01 10:00:00] \x1b[0m"]
    p = tmp_path / "slurm-1234.out"
    p.write_text("\n".join(prefixes[i % 4] + ln for i, ln in enumerate(lines)) + "\n")
    run = load_path(p)[0]
    assert list(run.steps) == list(range(1, 21))
    i12, i16 = 11, 15
    assert run.cols["skipped"][i12] == 1.0 and not run.logged("loss")[i12]
    assert np.isnan(run.cols["loss"][i16:]).all() and run.logged("loss")[i16:].all()
    assert np.isfinite(run.cols["loss"][:i12]).all()
    assert has(run.notes, "console.megatron_nan"), [m.data() for m in run.notes]
    report = diagnose_runs([run])
    assert report.status == "critical" and report.findings[0].step == 16


def test_deepspeed_overflow_on_hf_steps(tmp_path):
    """The Trainer over DeepSpeed: the engine's OVERFLOW line is printed inside the step after the
    bar's last counter (tqdm counts finished steps), then the dict of the logged step and the bar."""
    out = []
    scale = 65536.0
    for step in range(1, 21):
        if step in (7, 8, 9):  # overflows at steps 7, 8, 9
            out.append(
                f"[2024-05-01 10:00:01,000] [INFO] [loss_scaler.py:183:update_scale] [deepspeed] OVERFLOW! "
                f"Rank 0 Skipping step. Attempted loss scale: {scale:g}, reducing to {scale / 2:g}\n"
            )
            scale /= 2
        out.append(f"\r {step * 5:3d}%|#         | {step}/20 [00:0{step % 10}<00:10,  1.00it/s]")
        if step % 5 == 0:
            out.append(
                "\r                                  \r"
                f"{{'loss': {3.0 - step * 0.05:.4f}, 'grad_norm': 1.0, 'learning_rate': 0.0001, 'epoch': 0.1}}\n"
            )
            out.append(f"\r {step * 5:3d}%|#         | {step}/20 [00:0{step % 10}<00:10,  1.00it/s]")
    p = tmp_path / "nohup.out"
    p.write_text("".join(out))
    run = load_path(p)[0]
    steps = list(run.steps)
    assert [steps[i] for i in np.flatnonzero(run.cols["skipped"] == 1.0)] == [7, 8, 9]
    assert run.cols["scale"][steps.index(9)] == 8192
    assert [s for s in steps if run.logged("loss")[steps.index(s)]] == [5, 10, 15, 20]
    counts = read_counts(run.notes)
    assert (counts["console.kind_hf"], counts["console.kind_ds_overflow"]) == (4, 3), counts


def test_overflow_printed_by_every_rank_counts_once(tmp_path):
    lines = ["[Rank 0] step=10, skipped=0, lr=[0.001], mom=[(0.9, 0.999)]"]
    for a, b in ((65536, 32768), (32768, 16384)):
        for rank in (1, 0, 3, 2):  # ranks print in any order
            lines.append(
                f"[default{rank}]:[deepspeed] OVERFLOW! Rank {rank} Skipping step. Attempted loss scale: "
                f"{a}, reducing to {b}"
            )
    p = tmp_path / "ds.log"
    p.write_text("\n".join(lines) + "\n")
    run = load_path(p)[0]
    steps = list(run.steps)
    assert [steps[i] for i in np.flatnonzero(run.cols["skipped"] == 1.0)] == [11, 12]
    assert run.cols["scale"][steps.index(12)] == 16384
    assert has(run.notes, "console.other_rank_overflows"), [m.data() for m in run.notes]


def test_overflow_after_megatron_iteration_lines(tmp_path):
    lines = [
        _megatron_line(1, 5, 3.0),
        _megatron_line(2, 5, 2.9),
        "[deepspeed] OVERFLOW! Rank 0 Skipping step. Attempted loss scale: 4096, reducing to 2048",
        _megatron_line(3, 5, None, skipped=1, gn=None, scale=2048),
        _megatron_line(4, 5, 2.8, scale=2048),
    ]
    p = tmp_path / "mds.log"
    p.write_text("\n".join(lines) + "\n")
    run = load_path(p)[0]
    i3 = list(run.steps).index(3)
    assert run.cols["skipped"][i3] == 1.0 and run.cols["scale"][i3] == 2048


def test_an_overflow_before_a_first_print_at_step_0_is_that_steps_skip(tmp_path):
    """A script printing `step:0, loss:5.45` after DeepSpeed's OVERFLOW line for iteration 0, then ten
    OVERFLOW lines before `step:10`: the first skip is step 0's own (there is no step before it), so the
    printed steps keep their numbers and the skips are steps 0-10."""
    ov = "[2021-10-27 23:25:40,395] [INFO] [stage3.py:2736:_overflow_clean_up] [deepscale] OVERFLOW! Rank 0 "
    ov += "Skipping step. Attempted loss scale: {}, reducing to {}"
    scales = [2.0**32 / 2**k for k in range(12)]
    lines = [ov.format(int(scales[0]), int(scales[0])), "step:0, loss:5.453125"]
    lines += [ov.format(int(scales[k]), int(scales[k + 1])) for k in range(10)]
    lines += ["step:10, loss:3.6484375", "step:20, loss:3.546875", "step:30, loss:3.76953125"]
    p = tmp_path / "ds_notebook.log"
    p.write_text("\n".join(lines) + "\n")
    run = load_path(p)[0]
    steps = list(run.steps)
    logged = {steps[i]: float(run.cols["loss"][i]) for i in np.flatnonzero(run.logged("loss"))}
    assert logged == {0: 5.453125, 10: 3.6484375, 20: 3.546875, 30: 3.76953125}
    assert [steps[i] for i in np.flatnonzero(run.cols["skipped"] == 1.0)] == list(range(11))


def test_overflows_between_trainer_dicts_without_steps_are_steps_of_their_own(tmp_path):
    """No counter anywhere: the dicts are numbered in reading order and each OVERFLOW line is a
    skipped step between the dicts around it (not stacked onto the dicts' own numbers)."""
    ov = "[deepspeed] OVERFLOW! Rank 0 Skipping step. Attempted loss scale: {}, reducing to {}"
    d = "{{'loss': {}, 'grad_norm': {}, 'learning_rate': 2e-05, 'epoch': {}}}"
    lines = [
        d.format(2.14, 1.3, 0.1),
        d.format(1.99, 1.1, 0.2),
        ov.format(65536, 32768),
        ov.format(32768, 16384),
        d.format(1.89, 1.3, 0.3),
        ov.format(16384, 8192),
        d.format("nan", "nan", 0.4),
        d.format("nan", "nan", 0.5),
    ]
    p = tmp_path / "hf_ds.txt"
    p.write_text("\n".join(lines) + "\n")
    run = load_path(p)[0]
    steps = list(run.steps)
    assert steps == [1, 2, 3, 4, 5, 6, 7, 8]
    assert [steps[i] for i in np.flatnonzero(run.cols["skipped"] == 1.0)] == [3, 4, 6]
    logged = [steps[i] for i in np.flatnonzero(run.logged("loss"))]
    assert logged == [1, 2, 5, 7, 8] and np.isnan(run.cols["loss"][steps.index(7)])
    assert run.cols["scale"][steps.index(6)] == 8192
    report = diagnose_runs([run])
    assert report.status == "critical" and report.primary.step == 7 and report.primary.symptom == "nonfinite"


def test_one_log_record_printed_by_two_loggers_is_one_step(tmp_path):
    """A tool that logs the Trainer's record itself (LLaMA-Factory's callback, rounded, behind its own
    logger's prefix) before or after the Trainer prints it: one step, each key's fuller value kept, and
    the NaN-filter reading (loss 0.0 beside a NaN grad norm) made on the merged record. Two records of
    the same keys are never merged, even with equal values (a loss stuck at 0.0, a constant LR)."""
    bar = "  {pct}%|##        | {n}/500 [00:30<03:00,  2.74it/s]"
    cb = "[INFO|2025-01-02 10:00:{k:02d}] mytool.callbacks:88 >> {{'loss': {v:.4f}, 'learning_rate': {lr:.4e}, 'epoch': {e}}}"
    tr = "{{'loss': {v}, 'grad_norm': {g}, 'learning_rate': {lr}, 'epoch': {e}}}"
    lr = [4.99871234e-05, 4.99712345e-05, 4.99523456e-05]
    recs = [(2.310211, 1.31, 0.02), (0.0, "nan", 0.04), (2.05, 0.9, 0.06)]
    lines = []
    for k, ((v, g, e), r, n) in enumerate(zip(recs, lr, (10, 20, 30))):
        pair = [cb.format(k=k, v=v, lr=r, e=e), tr.format(v=v, g=g, lr=r, e=e)]
        lines += (pair if k != 1 else pair[::-1]) + [bar.format(pct=n // 5, n=n)]
    run = _read_text(tmp_path, "\n".join(lines) + "\n")
    assert list(run.steps) == [10, 20, 30]
    loss = run.cols["loss"]
    assert loss[0] == 2.310211 and math.isnan(loss[1]) and loss[2] == 2.05
    assert list(run.cols["lr"]) == lr
    assert has(run.notes, "console.printed_twice", n=3)
    same = "\n".join(tr.format(v=0.0, g=0.5, lr=1e-05, e=0.01) for _ in range(3)) + "\n"
    assert len(_read_text(tmp_path, same).steps) == 3
    other = tr.format(v=2.3, g=1.0, lr=1e-05, e=0.01) + "\n" + cb.format(k=0, v=2.1, lr=1e-05, e=0.01) + "\n"
    assert len(_read_text(tmp_path, other).steps) == 2  # values that disagree: two records


def _read_text(tmp_path, text):
    p = tmp_path / "console.txt"
    p.write_text(text)
    return load_path(p)[0]


# --- pastes, mixed logs, unknown text ---------------------------------------------------------


def test_markdown_paste_of_three_lines(tmp_path):
    p = tmp_path / "issue.md"
    p.write_text(
        "My loss goes NaN after a few steps, any idea? Log:\n\n```\n"
        "iter 0: loss 10.9853, time 5123.42ms, mfu -100.00%\n"
        "iter 1: loss 9.7512, time 310.22ms, mfu -100.00%\n"
        "iter 2: loss nan, time 309.87ms, mfu -100.00%\n```\n\nThanks! (I use lr 6e-4.)\n"
    )
    run = load_path(p)[0]
    assert list(run.steps) == [0, 1, 2] and np.isnan(run.cols["loss"][2]) and run.logged("loss")[2]


def test_stdin_paste(tmp_path):
    text = "".join(f"> step {s}, loss: {2.0 - s * 0.1:.3f}, lr: 1e-3\n" for s in range(5))
    p = subprocess.run(
        [sys.executable, "-m", "lossdoctor", "diagnose", "-", "--format", "json"],
        input=text,
        capture_output=True,
        text=True,
        env=cli_env(),
        timeout=120,
    )
    assert p.returncode == 0, p.stderr
    doc = json.loads(p.stdout)
    assert doc["steps"] == 5 and read_counts(from_json(doc, "notes"))["console.kind_key_value"] == 5, doc["notes_data"]


def test_mixed_formats_are_one_run_and_notes_say_which_lines(tmp_path):
    curve = logfaults.healthy(60)
    text = nanogpt_log({k: v[:30] for k, v in curve.items()})
    text += "".join(
        f"{{'loss': {curve['loss'][s]:.4f}, 'grad_norm': {curve['grad_norm'][s]:.4f}, "
        f"'learning_rate': 0.0003, 'step': {s}}}\n"
        for s in range(30, 60)
    )
    text += 'Traceback (most recent call last):\n  File "train.py", line 3\nKeyboardInterrupt\n'
    p = tmp_path / "mixed.log"
    p.write_text(text)
    doc = json.loads(run_cli("diagnose", p, "--format", "json").stdout)
    assert doc["steps"] == 60
    first = from_json(doc, "notes")[:1]
    assert first[0].key == "console.read_ignored" and has(first, "console.other_lines"), doc["notes_data"][0]
    assert read_counts(first)["console.kind_hf"] == 30 and "console.kind_nanogpt" in read_counts(first)


@pytest.mark.parametrize(
    "content",
    [
        "hello world\nthis is not a log\n",
        "Epoch 1 done. Accuracy 93%\n" * 5,
        '```\nTraceback (most recent call last):\n  File "x.py"\n```\n',
    ],
)
def test_unknown_text_exits_2_saying_what_was_looked_for(tmp_path, content):
    p = tmp_path / "notes.txt"
    p.write_text(content)
    r = run_cli("diagnose", p)
    assert r.returncode == 2 and len(r.stderr.strip().splitlines()) == 1
    assert "looked for" in r.stderr and "Hugging Face Trainer dicts" in r.stderr


def test_format_in_override(tmp_path):
    p = tmp_path / "weird.csv"  # a console log under a name that looks like a table
    p.write_text("".join(f"iter {s}: loss {3 - s * 0.1:.4f}, time 1.00ms, mfu 1.00%\n" for s in range(5)))
    assert run_cli("diagnose", p).returncode == 2
    r = run_cli("diagnose", p, "--format-in", "console", "--format", "json")
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["steps"] == 5
    bad = run_cli("diagnose", p, "--format-in", "nope")
    assert bad.returncode == 2 and "unknown input format" in bad.stderr


def test_long_bar_line_and_huge_segment(tmp_path):
    """A whole run of bar redraws with no newline, and a 2 MB garbage segment: read, bounded."""
    seg = "".join(f"\r{s}/5000 [00:01<00:10, 9.50it/s, loss={3 - s / 5000:.4f}]" for s in range(5000))
    p = tmp_path / "bar.log"
    half = seg.index("\r", len(seg) // 2)
    p.write_text(seg[:half] + "\n" + "x" * (2 << 20) + "\n" + seg[half:])
    run = load_path(p)[0]
    assert len(run) == 5000 and run.cols["loss"][-1] == pytest.approx(2.0002, abs=1e-4)


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    text=st.text(alphabet=st.sampled_from(list("{}[]|:=,'\"\r\n %/.-+eE0123456789 lossnaifterpgd_")), max_size=300),
    prefix=st.sampled_from(["", "{'loss': 1.0}\n", " 3/10 [00:01<00:02, loss=2]\r", "iter 1: loss 2.0\n"]),
)
def test_fuzz_console(tmp_path_factory, text, prefix):
    p = tmp_path_factory.mktemp("c") / "console.log"
    p.write_text(prefix + text, encoding="utf-8")
    try:
        runs = load_path(p)
    except SourceError as e:
        assert str(e) and "\n" not in str(e)
        return
    assert runs and all(len(r) > 0 for r in runs)


# --- print formats met in real logs (benchmarks/real_logs) ------------------------------------


def test_llmc_step_lines_read_norm_as_the_grad_norm(tmp_path):
    """llm.c train_gpt2.cu: `printf0("step %4d/%d | loss %7.6f (%+.2fz)| norm %6.4f (%+.2fz)| lr
    %.2e | %.2f ms | %.1f%% bf16 MFU | %.0f tok/s\\n", ...)`: the bare `norm` is the gradient norm
    (the `z` fields are its and the loss's z-scores). A `weight norm` is not."""
    lines = [
        f"step {s:4d}/74 | loss {loss:7.6f} (+0.12z)| norm {gn:6.4f} (-0.40z)| lr 3.00e-04 | "
        f"36.58 ms | 9.2% bf16 MFU | 112241 tok/s"
        for s, loss, gn in [(1, 11.0, 2.5), (2, 10.5, 1.75)]
    ]
    lines += ["step   3/74 | loss     nan (+nanz)| norm    nan (+nanz)| lr 3.00e-04 | 36.58 ms | 9.2% bf16 MFU"]
    p = tmp_path / "llmc.log"
    p.write_text("\n".join(lines) + "\n")
    run = load_path(p)[0]
    assert list(run.steps) == [1, 2, 3]
    np.testing.assert_allclose(run.cols["grad_norm"][:2], [2.5, 1.75])
    assert np.isnan(run.cols["grad_norm"][2]) and run.logged("grad_norm")[2]
    q = tmp_path / "weights.log"
    q.write_text("step 1 | loss 2.0 | weight norm 40.0\nstep 2 | loss 1.9 | weight norm 41.0\n")
    assert not load_path(q)[0].has("grad_norm")


def test_litgpt_keeps_every_micro_batch_on_the_iteration_counter(tmp_path):
    """litgpt finetune (`iter {iter_num} step {step_count}: loss {loss:.4f}, iter time: ...ms
    (optimizer.step)`), 4 micro-batches per optimizer step, a loss spike on the first micro-batch
    after an optimizer step: read per optimizer step (one line kept of four) the spike is gone."""
    losses = [1.70, 1.71, 1.69, 1.72, 11.46, 11.75, 11.50, 10.93, 10.55]
    lines = [
        f"iter {100 + i} step {25 + (i + 1) // 4}: loss {x:.4f}, iter time: 95.12ms"
        + (" (optimizer.step)" if (i + 1) % 4 == 0 else "")
        for i, x in enumerate(losses)
    ]
    p = tmp_path / "litgpt.txt"
    p.write_text("\n".join(lines) + "\n")
    run = load_path(p)[0]
    assert list(run.steps) == list(range(100, 109))
    np.testing.assert_allclose(run.cols["loss"], losses)


def test_loguru_lines_with_bracketed_names(tmp_path):
    """loguru's default format `{time:YYYY-MM-DD HH:mm:ss.SSS} | {level: <8} | {name}:{function}:{line}
    - {message}`, with a message of `| [Loss] x | [step] n |` fields (nv-tlabs/LION's trainer)."""
    msg = "[R0] | E{e} iter[ 14/ 15] | [Loss] {loss} | [exp] ./exp/run | [step] {s:5d} | [time] 0.4m (~5h) |"
    rows = [(5, "0.5213", 89), (6, "nan", 104), (7, "nan", 119)]
    lines = [
        f"2023-01-25 00:21:{10 + e}.074 | INFO     | trainers.base_trainer:train_epochs:256 - "
        + msg.format(e=e, loss=loss, s=s)
        for e, loss, s in rows
    ]
    p = tmp_path / "loguru.log"
    p.write_text("\n".join(lines) + "\n")
    run = load_path(p)[0]
    assert list(run.steps) == [89, 104, 119]
    assert run.cols["loss"][0] == pytest.approx(0.5213) and np.isnan(run.cols["loss"][1:]).all()


def test_epoch_is_the_step_when_nothing_finer_is_printed(tmp_path):
    """A plain `print(f"epoch: {epoch} loss: {loss}")` loop (vpetren/gradnorm_tf): one line per
    epoch, the epoch is the step and a note says so. When an epoch repeats, the lines are finer than
    epochs and are numbered in order instead."""
    p = tmp_path / "epochs.txt"
    p.write_text("".join(f"epoch: {e} loss: {x}\n" for e, x in [(10, 0.21), (11, 0.20), (12, "nan")]))
    run = load_path(p)[0]
    assert list(run.steps) == [10, 11, 12] and np.isnan(run.cols["loss"][2])
    assert has(run.notes, "console.epoch_is_step", n=3), [m.data() for m in run.notes]
    q = tmp_path / "batches.txt"
    q.write_text("".join(f"Epoch {e} loss: {x}\n" for e, x in [(1, 0.9), (1, 0.8), (2, 0.7), (2, 0.6)]))
    run = load_path(q)[0]
    assert list(run.steps) == [1, 2, 3, 4]
    np.testing.assert_allclose(run.cols["loss"], [0.9, 0.8, 0.7, 0.6])


def test_tqdm_bar_cut_before_its_total_keeps_its_last_step(tmp_path):
    """A real tqdm bar (Lightning's: `train_loss=` postfix) that the log stops in, far from its
    total: its last draw is a step of its own, not the extra draw tqdm makes when it closes."""
    from tqdm import tqdm

    buf = io.StringIO()
    bar = tqdm(total=1000, file=buf, mininterval=0, miniters=1, desc="Epoch 0")
    for _ in range(6):
        bar.update(1)
        bar.set_postfix(train_loss=10.9)
    p = tmp_path / "cut.log"
    p.write_text(buf.getvalue())  # the run was stopped (or the paste cut) here: no close()
    run = load_path(p)[0]
    assert list(run.steps) == [1, 2, 3, 4, 5, 6]


def test_fairseq_valid_lines_are_not_training_steps(tmp_path):
    """fairseq (>= 0.9) logs through Python logging, `%(asctime)s | %(levelname)s | %(name)s |
    %(message)s`, with the logger named after the tag (fairseq_cli/train.py, progress_bar.py): the
    `valid` line at the same num_updates as the `train` epoch summary must not replace it."""
    import logging

    log = tmp_path / "fairseq.log"
    handler = logging.FileHandler(log)
    handler.setFormatter(
        logging.Formatter("%(asctime)s | %(levelname)s | %(name)s | %(message)s", datefmt="%Y-%m-%d %H:%M:%S")
    )
    lines = [
        (
            "train",
            "epoch 002 | loss 9.803 | nll_loss 8.89 | ppl 474.37 | wps 31194.9 | num_updates 695 | "
            "lr 0.00017375 | gnorm 55.005 | loss_scale 0 | train_wall 4512 | wall 9786",
        ),
        (
            "valid",
            "epoch 002 | valid on 'valid' subset | loss 9.393 | nll_loss 8.328 | ppl 321.26 | "
            "num_updates 695 | best_loss 9.393",
        ),
        (
            "train_inner",
            "epoch 003:      5 / 356 loss=9.44, nll_loss=8.44, ppl=347.28, wps=30690.8, "
            "num_updates=700, lr=0.000175, gnorm=156.036, loss_scale=0, train_wall=1281",
        ),
    ]
    for name, message in lines:
        logger = logging.getLogger(name)
        logger.propagate = False
        logger.addHandler(handler)
        logger.setLevel(logging.INFO)
        logger.info(message)
        logger.removeHandler(handler)
    handler.close()
    run = load_path(log)[0]
    assert list(run.steps) == [695, 700]
    np.testing.assert_allclose(run.cols["loss"], [9.803, 9.44])
    np.testing.assert_allclose(run.cols["grad_norm"], [55.005, 156.036])
    assert has(run.notes, "console.eval_lines", n=1), [m.data() for m in run.notes]


@pytest.mark.slow  # trains a real HF Trainer (~25 s, shared fixture)
def test_folder_holding_only_console_logs_reads_the_newest(hf_logs, tmp_path):
    """`diagnose runs/` where the run left only `nohup.out` / `slurm-*.out`: the newest console log
    is read (a folder of slurm files is a history of attempts) and the note names the others."""
    import os
    import shutil

    explode, healthy = hf_logs
    shutil.copy(healthy, tmp_path / "slurm-101.out")
    shutil.copy(explode, tmp_path / "nohup.out")
    (tmp_path / "notes.txt").write_text("nothing to see here\n")
    os.utime(tmp_path / "slurm-101.out", (1_000_000, 1_000_000))  # the older attempt
    [run] = load_path(tmp_path)
    [alone] = load_path(tmp_path / "nohup.out")
    assert run.meta["path"] == str(tmp_path / "nohup.out")
    assert np.array_equal(run.steps, alone.steps)
    assert any(getattr(n, "key", None) == "source.console_dir_newest" and "slurm-101.out" in n for n in run.notes)
    assert [f.cause for f in diagnose_runs([run]).findings] == [f.cause for f in diagnose_runs([alone]).findings]
    os.utime(tmp_path / "slurm-101.out")  # now the healthy attempt is the newest
    [run] = load_path(tmp_path)
    assert run.meta["path"] == str(tmp_path / "slurm-101.out")


def test_folder_with_no_console_log_is_one_line_exit_2(tmp_path):
    (tmp_path / "readme.txt").write_text("hello\nworld\n")
    r = run_cli("diagnose", str(tmp_path))
    assert r.returncode == 2 and "Traceback" not in r.stderr and len(r.stderr.strip().splitlines()) == 1


def test_composer_values_too_small_for_four_decimals_are_left_out(tmp_path):
    """Composer prints `f'{data:.4f}'`: an LR of 2e-5 reads 0.0000 and must not become "LR zero";
    an LR of 0.02 reads right. Steps: the header's batch, `[epoch=E][batch=b/T]` counts on from
    earlier epochs, a `[token=...]` header takes `time/batch` + 1."""
    blocks = []
    for e, lr in ((1, 2e-5), (2, 0.02)):
        for b in (1, 2):
            blocks.append(
                f"[epoch={e}][batch={b}/2]:\n\t Train time/batch: {(e - 1) * 2 + b - 1}\n"
                f"\t Train loss/train/total: {3.0 - 0.1 * b:.4f}\n\t Train lr-AdamW/group0: {lr:.4f}"
            )
    blocks.append("[token=4096/99999]:\n\t Train time/batch: 4\n\t Train loss/train/total: 2.7000")
    p = tmp_path / "composer.log"
    p.write_text("\n".join(blocks) + "\n")
    [run] = load_path(p)
    assert list(run.steps) == [1, 2, 3, 4, 5]
    np.testing.assert_array_equal(run.logged("lr"), [False, False, True, True, False])
    assert run.cols["lr"][2] == 0.02
    assert any(getattr(n, "key", "") == "console.composer_rounded" and "2 LR" in n for n in run.notes)


def test_a_print_glued_to_a_keras_bar_leaves_its_last_value_read(tmp_path):
    """Keras draws its progress bar with no newline, so a debug print in the model lands on the bar's
    line right after its last value (`- loss: nanmf:[16]`): the value is still the loss, a NaN here."""
    bar = "{b}/984 [====================>.........] - ETA: 4:42 - loss: {v}mf:[16]\nmf:[16]\nloss: [nan][nan][9747]\n"
    p = tmp_path / "train.log"
    p.write_text(
        "".join(bar.format(b=b, v=v) for b, v in ((699, "718.5894"), (700, "nan"), (701, "nan"), (702, "inf")))
    )
    run = load_path(p)[0]
    lg = run.logged("loss")
    got = dict(zip(run.steps[lg].tolist(), run.cols["loss"][lg].tolist()))
    assert got[699] == 718.5894 and math.isnan(got[700]) and math.isnan(got[701]) and got[702] == math.inf


def test_llm_c_main_log_lines_are_read(tmp_path):
    """llm.c's logger (train_gpt2.cu, kept by modded-nanogpt) writes `main.log` with
    `fprintf(logfile, "s:%d trl:%.4f lr:%.6f norm:%.2f\\n", ...)` per training step and `"s:%d
    tel:%.4f\\n"` per validation: `s` is the step, `trl` the training loss, `tel` the validation loss
    (kept apart), `norm` the gradient norm."""
    lines = ["s:%d tel:%.4f" % (0, 10.9689)]
    lines += [
        "s:%d trl:%.4f lr:%.6f norm:%.2f" % (s, v, 6e-4, g)
        for s, v, g in ((0, 10.9656, 1.2), (1, 10.814, 1.1), (2, float("nan"), 0.9))
    ]
    lines += ["s:%d tel:%.4f" % (3, 6.0344)]
    p = tmp_path / "main.log"
    p.write_text("\n".join(lines) + "\n")
    run = load_path(p)[0]
    lg = run.logged("loss")
    got = dict(zip(run.steps[lg].tolist(), run.cols["loss"][lg].tolist()))
    assert got[0] == 10.9656 and got[1] == 10.814 and math.isnan(got[2]) and len(got) == 3
    ev = run.logged("eval_loss")
    assert dict(zip(run.steps[ev].tolist(), run.cols["eval_loss"][ev].tolist())) == {0: 10.9689, 3: 6.0344}
    gn = run.logged("grad_norm")
    assert run.cols["grad_norm"][gn].tolist() == [1.2, 1.1, 0.9]


def test_a_deepspeed_overflow_line_marks_its_step_skipped_where_megatron_counts_none(tmp_path):
    """Megatron-DeepSpeed with DeepSpeed's ZeRO optimizer: DeepSpeed prints `OVERFLOW! Rank 0 Skipping
    step` before the iteration line of the step it skipped, and Megatron's own `number of skipped
    iterations` stays 0 (it does not see that optimizer's skips). The OVERFLOW line's skip wins."""

    def it(i, loss, scale):
        return (
            f" iteration {i:8d}/  159576 | consumed samples: {i * 2048:12d} | learning rate: 5.948E-05 | "
            f"global batch size:  2048 | lm loss: {loss:.6E} | loss scale: {scale:.1f} | grad norm: 4.5 | "
            "num zeros: 0.0 | number of skipped iterations:   0 | number of nan iterations:   0 |"
        )

    ov = (
        "[2022-01-19 13:09:13,305] [INFO] [stage_1_and_2.py:1644:step] [deepscale] OVERFLOW! Rank 0 Skipping "
        "step. Attempted loss scale: {a:.1f}, reducing to {b:.1f}"
    )
    lines = [it(100, 2.66, 1048576.0), it(101, 2.67, 1048576.0)]
    scale = 1048576.0
    for i in range(102, 106):
        lines += [ov.format(a=scale, b=scale / 2), it(i, 4.3, scale / 2)]
        scale /= 2
    lines.append(it(106, 4.1, scale))
    p = tmp_path / "train.log"
    p.write_text("\n".join(lines) + "\n")
    run = load_path(p)[0]
    sk = dict(zip(run.steps.tolist(), run.cols["skipped"].tolist()))
    assert [sk[s] for s in range(100, 107)] == [0.0, 0.0, 1.0, 1.0, 1.0, 1.0, 0.0]


@pytest.mark.parametrize("width", [120, 153])
def test_megatron_lines_wrapped_by_a_fixed_width_terminal_are_joined(tmp_path, width):
    """A terminal of fixed width breaks Megatron's long iteration line anywhere, inside a field's name
    too (`... | learning` then ` rate: 4.475E-05 | ...`); each piece pasted with its trailing spaces
    trimmed. The pieces are joined back into the iteration line and read as one."""

    def line(i, loss, g):
        return (
            f"[default7]: iteration {i:7d}/ 115311 | consumed samples: {i * 2048:11d} | consumed tokens: "
            f"{i * 4194304:12d} | elapsed time per iteration (s): 105.16 | learning rate: 4.475E-05 | global batch "
            f"size: 2048 | lm loss: {loss:.6E} | grad norm: {g:.3f} | num zeros: 0.0 | number of skipped "
            "iterations:  0 | number of nan iterations:  0 | samples per second: 19.474 | TFLOPs: 149.10 |"
        )

    rows = [(42780, 2.117073, 0.15), (42781, 2.116946, 0.14), (42782, 2.110646, 0.144)]
    pieces = []
    for i, loss, g in rows:
        text = line(i, loss, g)
        pieces += [text[k : k + width].rstrip() for k in range(0, len(text), width)]
    p = tmp_path / "train.log"
    p.write_text("\n".join(pieces) + "\n")
    run = load_path(p)[0]
    assert run.steps.tolist() == [42780, 42781, 42782]
    assert run.cols["loss"].tolist() == [2.117073, 2.116946, 2.110646]
    assert run.cols["grad_norm"].tolist() == [0.15, 0.14, 0.144]


def test_the_first_deepspeed_skip_total_of_an_excerpt_is_spread_over_the_steps_before_it(tmp_path):
    """DeepSpeed's `step=N, skipped=K` counts every skipped step since the run began: an excerpt that
    starts at step 320 with `skipped=21` did not skip its whole first interval (21 of 320 steps were
    skipped, when is not said); a rise later in the log is that interval's."""
    line = (
        "[2023-04-05 11:28:07,877] [INFO] [logging.py:75:log_dist] [Rank 0] step={s}, skipped={k}, lr=[1e-05], "
        "mom=[[0.9, 0.95]]\nloss:{v}, global_step:{s}\n"
    )
    rows = [(320, 21, 0.697), (330, 21, 0.455), (340, 21, 0.690), (350, 31, 0.7)]
    p = tmp_path / "train.log"
    p.write_text("".join(line.format(s=s, k=k, v=v) for s, k, v in rows))
    run = load_path(p)[0]
    sk = dict(zip(run.steps.tolist(), run.cols["skipped"].tolist()))
    assert sk[320] == pytest.approx(21 / 320) and sk[330] == sk[340] == 0.0 and sk[350] == 1.0


def test_fp16_optimizer_overflows_before_the_first_row_go_on_the_steps_before_it(tmp_path):
    """NVIDIA's fp16_optimizer (Tacotron 2, WaveGlow) prints `OVERFLOW! Skipping step. Attempted loss scale:
    {scale}` and no training line for a skipped step, halving the scale from 2**23 at the start: the
    overflows before the first training line are the steps right before its step, one each; one between
    two training lines is the step the counter leaves out."""
    lines = [f"OVERFLOW! Skipping step. Attempted loss scale: {2.0 ** (23 - k)}" for k in range(7)]
    lines.append("Train iter       16 loss 49.316841 Grad Norm 10.800460 3.22s/it")
    lines.append("OVERFLOW! Skipping step. Attempted loss scale: 65536.0")
    lines += [
        f"Train iter       {s} loss {v:.6f} Grad Norm 8.5 3.18s/it" for s, v in ((18, 40.57), (19, 23.86), (20, 13.44))
    ]
    p = tmp_path / "train.log"
    p.write_text("\n".join(lines) + "\n")
    run = load_path(p)[0]
    lg = run.logged("skipped")
    skipped = sorted(int(s) for s, v in zip(run.steps[lg], run.cols["skipped"][lg]) if v == 1.0)
    assert skipped == [9, 10, 11, 12, 13, 14, 15, 17]
    assert has(run.notes, "console.overflow_placed_before", n=7)
    lg = run.logged("loss")
    assert dict(zip(run.steps[lg].tolist(), run.cols["loss"][lg].tolist()))[16] == 49.316841


def test_an_evaluation_section_opened_in_words_keeps_its_losses_apart(tmp_path):
    """athena's absl lines: `start evaluate in epoch 16`, prose and a warning, stepless `loss:` lines
    and the evaluation's epoch summary, then training again: only the training lines are the loss."""
    train = [(11743 + 10 * i, 7.6 - 0.01 * i) for i in range(4)]
    later = [(11783 + 10 * i, 7.5 - 0.01 * i) for i in range(3)]
    lines = [f"INFO:absl:global_steps: {s}   learning_rate: 5.7e-04   loss: {v:.4f}   Accuracy: 0.91" for s, v in train]
    lines += [
        "INFO:absl:>>>>> start evaluate in epoch 16",
        "INFO:absl:please be patient, enable tf.function, it takes time ...",
        "WARNING:absl:the length of logits is shorter than that of labels",
        "INFO:absl:loss: 19.1721 Accuracy: 0.8155        CTCAccuracy: 0.7443",
        "INFO:absl:loss: 30.9493 Accuracy: 0.8029        CTCAccuracy: 0.7711",
        "INFO:absl:epoch: 16     loss: 31.2108   Accuracy: 0.7918        CTCAccuracy: 0.7697",
    ]
    lines += [
        f"INFO:absl:global_steps: {s}   learning_rate: 5.7e-04   loss: {v:.4f}   Accuracy: 0.91" for s, v in later
    ]
    p = tmp_path / "athena.log"
    p.write_text("\n".join(lines) + "\n")
    run = load_path(p)[0]
    lg = run.logged("loss")
    assert [int(s) for s in run.steps[lg]] == [s for s, _ in train + later]
    np.testing.assert_allclose(run.col("loss")[lg], [v for _, v in train + later], rtol=1e-6)
    ev = run.logged("eval_loss")
    # kept at the last training step before the section: one value a step, the summary's coming last
    assert run.col("eval_loss")[ev].tolist() == [31.2108] and int(run.steps[ev][0]) == train[-1][0]


#: a Keras 1 thread's epoch losses, "the loss creeps up"
KERAS_CREEP = [0.176, 0.184, 0.1816, 0.1915, 0.1928, 0.1964, 0.1948, 0.1971, 0.1899, 0.1957]
KERAS_CREEP += [0.1923, 0.191, 0.2104, 0.1976, 0.1979, 0.2036, 0.2019, 0.1978, 0.1954]


def _keras_final_bars(losses: list[float]) -> str:
    """What a notebook shows of verbose=1: each epoch's bar as last drawn (the `\r` redraws gone)."""
    bar = "100/100 [==============================] - 2s 15ms/step - loss: {v:.4f} - accuracy: 0.5000\n"
    return "".join(f"Epoch {e}/{len(losses)}\n" + bar.format(v=v) for e, v in enumerate(losses, 1))


@pytest.mark.parametrize("shape", ["final_bars", "verbose_2"])
def test_keras_bars_at_their_epochs_end_are_the_epoch_means_from_epoch_1(tmp_path, shape):
    """Keras prints one bar (or verbose=2 line) per epoch ending at `100/100`: each row is its epoch's
    mean and the first is epoch 1's, so a loss that never falls below it over 19 epochs shows the run's
    start, as the same epoch numbers printed alone would (a Keras 1 thread's 0.176 -> 0.195)."""
    p = tmp_path / "train.log"
    p.write_text(_keras_final_bars(KERAS_CREEP) if shape == "final_bars" else keras_log(KERAS_CREEP, 2))
    run = load_path(p)[0]
    assert run.meta["epoch_rows_from"] == 1
    report = diagnose_runs([run])
    alarm = next(f for f in report.findings if f.severity in ("warning", "critical"))
    assert alarm.symptom == "divergence" and alarm.evidence[0].key == "diff.what.creep"
    assert alarm.evidence[0].values["best"] == 0.176


def test_keras_bars_inside_an_epoch_or_from_a_later_one_are_no_run_start(tmp_path):
    """Bars cut inside a later epoch (`30/100`) are running means of part of it, and a paste that starts
    at `Epoch 7/20` is not the run's start: neither is read as epoch means from the first epoch."""
    inside = "Epoch 3/5\n" + "".join(
        f"{b}/100 [=====>........................] - ETA: 3s - loss: {v:.4f}\n"
        for b, v in zip(range(5, 100, 5), KERAS_CREEP)
    )
    later = "".join(
        f"Epoch {e}/20\n100/100 [==============================] - 2s 15ms/step - loss: {v:.4f}\n"
        for e, v in enumerate(KERAS_CREEP, 7)
    )
    for name, text in (("inside.log", inside), ("later.log", later)):
        p = tmp_path / name
        p.write_text(text)
        run = load_path(p)[0]
        assert run.meta.get("epoch_rows_from") in (None, 7), name
        report = diagnose_runs([run])
        assert not any(f.evidence and f.evidence[0].key == "diff.what.creep" for f in report.findings), name


def test_a_dict_value_in_markdown_bold_is_its_number_and_text_is_no_nan(tmp_path):
    """A thread pastes `{'loss': **0.8759**, ...}` to point at the loss: the bold is the paste's, the
    value 0.8759; a value that spells no number (`'loss': 'n/a'`) is not read, never a NaN loss."""
    p = tmp_path / "train.log"
    p.write_text(
        "{'loss': **0.8759**, 'grad_norm': 0.3293, 'learning_rate': 9.9e-05, 'epoch': 0.1}\n"
        "{'loss': 'n/a', 'grad_norm': 0.31, 'learning_rate': 9.8e-05, 'epoch': 0.2}\n"
        "{'loss': `0.8412`, 'grad_norm': 0.30, 'learning_rate': 9.7e-05, 'epoch': 0.3}\n"
    )
    run = load_path(p)[0]
    lg = run.logged("loss")
    assert run.cols["loss"][lg].tolist() == [0.8759, 0.8412]
    assert diagnose_runs([run]).status != "critical"


def test_each_nodes_copy_of_a_log_dict_is_one_record(tmp_path):
    """A multi-node run prints every record once per node, behind the host (`10.96.202.17: {...}`):
    four identical dicts under four prefixes are one step, so a loss that falls 1.87 -> 0.56 over
    two records is two points, not eight, and its last record's copies are no constant loss. The
    same dict printed twice under one prefix is two steps (a frozen loss)."""
    hosts = ["10.96.202.43", "10.96.202.17", "10.96.202.16", "10.96.202.40"]
    records = [("1.8673", "4.9999999999876634e-05"), ("0.5621", "4.9999999998026084e-05")]
    text = "".join(f"{h}: {{'loss': {v}, 'learning_rate': {lr}, 'epoch': 0.0}}\n" for v, lr in records for h in hosts)
    p = tmp_path / "train.log"
    p.write_text(text)
    run = load_path(p)[0]
    lg = run.logged("loss")
    assert run.cols["loss"][lg].tolist() == [1.8673, 0.5621] and run.meta["node_copies"] == 6
    p.write_text("".join(f"{hosts[0]}: {{'loss': 0.5621, 'learning_rate': 5e-05, 'epoch': 0.0}}\n" for _ in range(4)))
    again = load_path(p)[0]
    assert int(again.logged("loss").sum()) == 4 and "node_copies" not in again.meta


def test_a_bare_step_loss_print_is_no_torchtitan_and_no_cross_entropy(tmp_path):
    """Paddle's gradient-clipping guide prints `step:  58     loss:  [2526.2734]` for a regression that
    converges to 0.55: torchtitan's own line goes on with its memory, throughput and MFU fields, a bare
    `step: loss:` print is any script's, so 2526 is no cross-entropy out of any vocabulary's range."""
    losses = [2526.2734, 868.17065, 1267.7072, 946.5017, 724.8644, 303.8, 140.8, 38.56, 10.07, 1.68, 0.5535]
    p = tmp_path / "train.log"
    p.write_text("".join(f"  step:  {58 + i}     loss:  [{v}]\n" for i, v in enumerate(losses)))
    run = load_path(p)[0]
    assert run.meta["framework"] != "torchtitan"
    assert diagnose_runs([run]).status == "healthy"
    titan = tmp_path / "titan.log"
    titan.write_text(
        torchtitan_log({"step": np.arange(10), "loss": np.linspace(10.9, 8.1, 10), "grad_norm": np.ones(10)})
    )
    assert load_path(titan)[0].meta["framework"] == "torchtitan"


def _openseq2seq_block(epoch: int, step: int, train: float, val: float) -> list[str]:
    """What OpenSeq2Seq's hooks print at a step that logs and evaluates: `deco_print` lines (`*** ` in
    front), the train loss with a trailing space, the samples, then the evaluation on the validation set."""
    return [
        f"*** Epoch {epoch}, global step {step}: ***     Train loss: {train:.4f} ",
        "time per step = 0:00:0.230",
        "***     Sample WER: 1.0000",
        "***     Sample target:     there was no autopsy period",
        "***     Sample prediction: i  s t i",
        "*** Running evaluation on a validation set:",
        f"***     Validation loss: {val:.4f} ",
        "***     Validation WER:  1.0000",
    ]


def test_an_evaluation_above_the_first_training_line_is_kept_before_it(tmp_path):
    """An excerpt cut after the training line of a step that evaluated (its samples and `Validation loss`
    first, the next step's `Train loss` after them): that evaluation's loss is kept, at the step right
    before the first one read, not dropped for want of a step; the others stay at their steps."""
    blocks = [(10, 21, 148.8157, 276.5779), (12, 24, 328.64, 282.3839), (13, 27, 206.5612, 272.6924)]
    lines = _openseq2seq_block(9, 18, 150.0, 250.1655)[2:]  # the excerpt starts at the samples
    for b in blocks:
        lines += _openseq2seq_block(*b)
    run = _read_text(tmp_path, "\n".join(lines) + "\n")
    lg = run.logged("eval_loss")
    assert dict(zip(run.steps[lg].tolist(), run.cols["eval_loss"][lg].tolist())) == {
        20: 250.1655,
        21: 276.5779,
        24: 282.3839,
        27: 272.6924,
    }
    lg = run.logged("loss")
    assert dict(zip(run.steps[lg].tolist(), run.cols["loss"][lg].tolist())) == {21: 148.8157, 24: 328.64, 27: 206.5612}


def test_a_counter_that_never_moves_is_no_step(tmp_path):
    """DL4J's ScoreIterationListener logs `Score at iteration {} is {}` with the model's iteration count,
    which some setups never update: every line says iteration 0 while the score changes. The counter is
    no step: the lines are the rows, in order, not one row at step 0."""
    scores = [4088.198263888889, 5207.152777777777, 5499.83125, 4602.516319444445, 3966.8118055555556, 3960.5694]
    text = "".join(f"o.d.o.l.ScoreIterationListener - Score at iteration 0 is {v}\n" for v in scores)
    run = _read_text(tmp_path, text)
    assert list(run.cols["loss"][run.logged("loss")]) == scores
    assert run.meta["steps_from"] == "numbered"


def test_deepspeeds_initial_scale_search_is_its_config_not_the_gradients(tmp_path):
    """DeepSpeed started at its old default 2^32 halves 22 times in the first steps, then trains: the
    warning names the config's `initial_scale_power` (2^16), and no step-size or clipping fix for
    gradients that never overflowed at a working scale (a healthy notebook run was told to cut its LR)."""
    ov = "[2021-10-27 23:25:40,395] [INFO] [stage3.py:2736:_overflow_clean_up] [deepscale] OVERFLOW! Rank 0 "
    ov += "Skipping step. Attempted loss scale: {}, reducing to {}"
    lines = [ov.format(2**32, 2**32), "step:0, loss:5.453125"]
    for k in range(22):
        lines.append(ov.format(2 ** (32 - k), 2 ** (31 - k)))
        if (k + 1) % 10 == 0:
            lines.append(f"step:{k + 1}, loss:{5.4 - 0.1 * k:.4f}")
    lines += [f"step:{s}, loss:{3.6 - 0.002 * s:.4f}" for s in range(30, 300, 10)]
    p = tmp_path / "ds_search.log"
    p.write_text("\n".join(lines) + "\n")
    [f] = [f for f in diagnose_runs(load_path(p)).findings if f.cause == "loss_scale_collapse"]
    keys = [x.key for x in f.fixes]
    assert keys[0] == "precision.fix_initial_scale_power" and f.fixes[0].values["started"] == "2^32", keys
    assert not {"precision.fix_gradients_overflow_fp16", "precision.fix_gradients_overflow_fp16_clipped"} & set(keys)
