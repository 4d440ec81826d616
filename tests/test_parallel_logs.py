"""The console of a tensor/pipeline-parallel run (torchtitan, Megatron-LM) read as one run
(`sources/parallel_logs.py`). The lines are built here in the trainers' own print formats
(torchtitan's `MetricsProcessor.log` f-string through its `[titan] %(asctime)s - %(name)s -
%(levelname)s - %(message)s` formatter, Megatron's `training_log`), prefixed as torchrun
`--role rank --tee 3` prefixes them; `tests/test_integrations_pp.py` reads the console of a real
2-stage pipeline run launched that way."""

from __future__ import annotations

import math

import pytest

from conftest import run_cli
from lossdoctor.sources import load_path

RED, GREEN, RESET = "\033[31m", "\033[32m", "\033[39m"


def titan(rank: int, step: int, loss: float, grad_norm: float = 1.25) -> str:
    return (
        f"[rank{rank}]:[titan] 2026-01-01 10:00:{step % 60:02d},123 - root - INFO - {RED}step: {step:2}  "
        f"{GREEN}loss: {loss:7.4f}  grad_norm: {grad_norm:7.4f}  memory: 12.34GiB(15.60%)  tps: {12345:,}  "
        f"tflops: {123.45:,.2f}  mfu: {12.50:.2f}%{RESET}"
    )


def loss_at(step: int, nan_from: int | None = None) -> float:
    return math.nan if nan_from is not None and step >= nan_from else 10.0 * math.exp(-step / 40) + 2.0


def titan_log(path, order=(3, 2, 1, 0), steps=80, nan_from=None, header=True) -> None:
    """2 stages x 2 TP ranks: ranks 0-1 hold stage 0 (placeholder loss), 2-3 the last stage."""
    lines = []
    if header:
        for r in (0, 2):
            lines.append(
                f"[rank{r}]:[titan] 2026-01-01 10:00:00,000 - root - INFO - Building 2-D device mesh "
                f"with ['pp', 'tp'], [2, 2]"
            )
            lines.append(
                f"[rank{r}]:[titan] 2026-01-01 10:00:00,000 - root - INFO - PP rank {r // 2} is building "
                f"stage_idx {r // 2} with start_layer None, stop_layer layers.4"
            )
    for s in range(1, steps + 1):
        for r in order:
            lines.append(titan(r, s, loss_at(s, nan_from) if r >= 2 else -1.0))
    path.write_text("\n".join(lines) + "\n")


def test_titan_pp_console_reads_the_last_stages_loss_whatever_the_order(tmp_path):
    # the stage-0 ranks' -1.0 printed last at every step: read line by line, it would be the loss
    log = tmp_path / "train.log"
    titan_log(log)
    (run,) = load_path(log)
    assert run.steps.tolist() == list(range(1, 81))
    assert run.col("loss").tolist() == pytest.approx([loss_at(s) for s in range(1, 81)], abs=1e-4)
    assert run.meta["distributed"] == {
        "kind": "pp",
        "mesh": {"pp": 2, "tp": 2},
        "loss_ranks": [2, 3],
        "read_rank": 2,
        "loss_stage": 1,
        "no_loss_ranks": [0, 1],
    }
    keys = [getattr(n, "key", None) for n in run.notes]
    assert "parallel_logs.read_rank_stage" in keys and "parallel_logs.placeholder" in keys


def test_titan_pp_console_nan_on_the_last_stage_is_found_at_its_step(tmp_path):
    log = tmp_path / "train.log"
    titan_log(log, order=(0, 1, 2, 3), nan_from=61)
    p = run_cli("diagnose", log, "--format", "json")
    assert p.returncode == 0, p.stderr
    import json

    report = json.loads(p.stdout)
    bad = [f for f in report["findings"] if f["symptom"] == "nonfinite"]
    assert bad and bad[0]["step"] == 61
    first = [n for n in report["notes_data"] if n["key"] == "parallel_logs.first_nonfinite"]
    assert first and first[0]["values"]["rank"] == 2 and first[0]["values"]["step"] == 61


def test_titan_console_of_the_first_stage_only_has_no_loss(tmp_path):
    # --local-ranks-filter 0: only a stage without the loss is in the log
    log = tmp_path / "train.log"
    titan_log(log, order=(0, 1), header=False)
    (run,) = load_path(log)
    assert not run.has("loss")
    assert run.col("grad_norm").tolist() == pytest.approx([1.25] * 80)
    assert "parallel_logs.no_loss_rank" in [getattr(n, "key", None) for n in run.notes]


def test_a_one_rank_console_is_left_to_the_console_reader(tmp_path):
    log = tmp_path / "train.log"
    titan_log(log, order=(2,), header=False)
    (run,) = load_path(log)
    assert "distributed" not in run.meta
    assert run.col("loss")[0] == pytest.approx(loss_at(1), abs=1e-4)


def megatron_line(rank: int, it: int, loss: float) -> str:
    return (
        f"[rank{rank}]: [2026-01-01 10:00:00] iteration {it:8d}/{100:8d} | consumed samples: {it * 32:12d} | "
        f"elapsed time per iteration (ms): 123.4 | learning rate: {1e-4:.6E} | global batch size: {32:5d} | "
        f"lm loss: {loss:.6E} | loss scale: 1.0 | grad norm: {1.5:.3f} | number of skipped iterations: "
        f"{0:3d} | number of nan iterations: {int(math.isnan(loss)):3d} |"
    )


def test_megatron_tp_pp_console_names_the_layout_and_the_last_stage(tmp_path):
    lines = [
        "[rank0]: ------------------------ arguments ------------------------",
        "[rank0]:   clip_grad ....................................... 1.0",
        "[rank0]:   pipeline_model_parallel_size .................... 2",
        "[rank0]:   tensor_model_parallel_size ...................... 2",
        "[rank0]: -------------------- end of arguments ---------------------",
    ]
    for r, (t, p) in enumerate([(0, 0), (1, 0), (0, 1), (1, 1)]):
        lines.append(f"[rank{r}]:  > number of parameters on (tensor, pipeline) model parallel rank ({t}, {p}): 1234")
    lines += [megatron_line(3, it, loss_at(it)) for it in range(1, 61)]
    log = tmp_path / "megatron.log"
    log.write_text("\n".join(lines) + "\n")
    (run,) = load_path(log)
    d = run.meta["distributed"]
    assert (d["kind"], d["mesh"], d["loss_ranks"], d["read_rank"], d["loss_stage"]) == (
        "pp",
        {"pp": 2, "tp": 2},
        [3],
        3,
        1,
    )
    assert run.meta["max_grad_norm"] == 1.0  # rank 0's arguments are still read
    assert run.col("loss").tolist() == pytest.approx([loss_at(i) for i in range(1, 61)], rel=1e-6)
