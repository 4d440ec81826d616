"""The text readers read a log the same way whatever was put around its lines: a logging format's or a
launcher's prefix in front of every line (learned from the text, `sources/line_prefix.py`), a viewer's
line numbers, colour codes, a progress bar of other work between the lines, inline-code ticks behind a
quote. Each test writes the log with the real writer where there is one (Python's `logging`, `tqdm`),
reads it with `load_path` and checks the values printed; the measurement over the corpus is
`benchmarks/real_logs/variants.py`."""

from __future__ import annotations

import logging
import math
import re
from pathlib import Path

import numpy as np
import pytest

from lossdoctor.sources import load_path
from lossdoctor.sources.line_prefix import Stripped, learn

#: nanoGPT's training line (`print(f"iter {iter_num}: loss {lossf:.4f}, time {dt*1000:.2f}ms, mfu ...")`)
LOSSES = [4.2314, 3.9872, 3.7718, 3.6021, 3.5112, 3.4407, 3.3791, 3.3315]
STEPS = [10 * i for i in range(len(LOSSES))]


def _nanogpt_lines() -> list[str]:
    return [
        f"iter {s}: loss {v:.4f}, time {512.3 + i:.2f}ms, mfu 31.20%" for i, (s, v) in enumerate(zip(STEPS, LOSSES))
    ]


def _hf_lines() -> list[str]:
    """The Hugging Face Trainer's log dicts as `print(logs)` writes them."""
    return [
        str({"loss": v, "grad_norm": 1.5 + i / 10, "learning_rate": 2e-05, "epoch": round((i + 1) * 0.05, 2)})
        for i, v in enumerate(LOSSES)
    ]


#: Keras's `fit(verbose=1)` console: `Epoch e/E`, then the epoch's last progress line
KERAS_LOSSES = [1.7646, 1.3821, 1.2012, 1.0897]


def _keras_lines() -> list[str]:
    lines = []
    for e, v in enumerate(KERAS_LOSSES, 1):
        lines += [
            f"Epoch {e}/4",
            f"50000/50000 [==============================] - 12s 240us/step - loss: {v:.4f} - acc: 0.{40 + 5 * e}",
        ]
    return lines


#: the step of each Keras epoch's last line: epochs times batches per epoch
KERAS_STEPS = [50000 * e for e in range(1, 5)]

#: a notebook's results table (fastai's `fit` output pasted as Markdown)
TABLE_LOSSES = [38.214138, 377.145508, 839.392883]


def _table_lines() -> list[str]:
    return ["| epoch | train_loss | valid_loss | time |", "|---|---|---|---|"] + [
        f"| {i} | {v:.6f} | {v + 0.1:.6f} | 00:0{i} |" for i, v in enumerate(TABLE_LOSSES)
    ]


def _hf_nan_filtered() -> list[str]:
    """Trainer dicts where every step of two intervals was NaN: `logging_nan_inf_filter` logs `'loss': 0.0`
    beside `'grad_norm': nan`, which the console reader reads as a NaN loss."""
    rows = [(2.31, 1.2), (2.12, 1.1), (0.0, float("nan")), (0.0, float("nan"))]
    return [
        str({"loss": v, "grad_norm": g, "learning_rate": 2e-05, "epoch": 0.05 * (i + 1)})
        for i, (v, g) in enumerate(rows)
    ]


def _loss(path: Path) -> tuple[list[int], list[float]]:
    run = max(load_path(path), key=len)
    mask = run.logged("loss")
    order = np.argsort(run.steps[mask], kind="stable")
    return [int(s) for s in run.steps[mask][order]], [float(v) for v in run.col("loss")[mask][order]]


def _write(tmp_path: Path, name: str, lines: list[str]) -> Path:
    p = tmp_path / name
    p.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return p


def _logged(path: Path, lines: list[str]) -> None:
    """`lines` written through Python's `logging` with `%(asctime)s - %(levelname)s - %(name)s - %(message)s`."""
    handler = logging.FileHandler(path, encoding="utf-8")
    handler.setFormatter(logging.Formatter("%(asctime)s - %(levelname)s - %(name)s - %(message)s"))
    log = logging.getLogger("train")
    log.propagate, log.level = False, logging.INFO
    log.addHandler(handler)
    try:
        for line in lines:
            log.info(line)
        log.warning("saving checkpoint to out/ckpt.pt")
    finally:
        log.removeHandler(handler)
        handler.close()


def test_python_logging_format_with_the_level_before_the_logger_is_stripped(tmp_path):
    """The level before the logger's name, a format `clean` has no pattern for: learned from the lines.
    Keras's epochs keep their steps and a notebook table logged line by line is read (it was refused)."""
    keras, table = tmp_path / "keras.log", tmp_path / "table.log"
    _logged(keras, _keras_lines())
    _logged(table, _table_lines())
    assert keras.read_text().splitlines()[1].split(" - ")[1:3] == ["INFO", "train"]
    assert _loss(keras) == (KERAS_STEPS, KERAS_LOSSES)
    assert _loss(table) == ([0, 1, 2], TABLE_LOSSES)


@pytest.mark.parametrize("tag", ["[1,0]<stdout>:", "node12: "])
def test_a_launchers_constant_tag_on_every_line_is_stripped(tmp_path, tag):
    """mpirun's `--tag-output` and pdsh's host in front of every line: Keras's epochs keep their steps
    (they were read as steps 1..4, or as one point), the notebook table is read (it was refused)."""
    assert _loss(_write(tmp_path, "keras.txt", [tag + line for line in _keras_lines()])) == (KERAS_STEPS, KERAS_LOSSES)
    assert _loss(_write(tmp_path, "table.md", [tag + line for line in _table_lines()])) == ([0, 1, 2], TABLE_LOSSES)


def test_a_viewers_line_numbers_are_stripped(tmp_path):
    """Line numbers of a copy-paste out of a viewer: the Trainer's NaN-filtered `'loss': 0.0` is still
    known for the Trainer's (a NaN), Keras's epochs keep their steps."""
    numbered = [f"{i + 1:4d} | {line}" for i, line in enumerate(_hf_nan_filtered())]
    steps, losses = _loss(_write(tmp_path, "hf.txt", numbered))
    assert losses[:2] == [2.31, 2.12] and all(math.isnan(v) for v in losses[2:])
    numbered = [f"{i + 1:4d} | {line}" for i, line in enumerate(_keras_lines())]
    assert learn("\n".join(numbered) + "\n") is not None
    assert _loss(_write(tmp_path, "keras.txt", numbered)) == (KERAS_STEPS, KERAS_LOSSES)


def test_colour_codes_around_every_number_are_text_not_binary(tmp_path):
    """A console coloured the way `rich` highlights numbers (every number in bold green) was refused as
    binary data: its ESC bytes passed a tenth of the head."""
    rows = [(1, 2.3, 0.1, 1.2), (2, 2.1, 0.2, 1.1), (3, 1.9, 0.3, 0.9), (4, 1.8, 0.3, 0.8)]
    lines = [f"step {s} | loss {v} | acc {a} | lr 1e-3 | gn {g}" for s, v, a, g in rows]
    coloured = [re.sub(r"(?<![\w.])(\d+(?:\.\d+)?)", "\x1b[1;32m\\1\x1b[0m", line) for line in lines]
    assert coloured[0].count("\x1b") == 12  # 1e-3 is coloured in two parts, as a highlighter of plain numbers does
    assert _loss(_write(tmp_path, "colour.log", coloured)) == ([1, 2, 3, 4], [2.3, 2.1, 1.9, 1.8])


def test_a_progress_bar_of_other_work_does_not_set_the_step(tmp_path):
    """A `datasets` map bar (`Map: 100%|...| 2000/2000`, drawn by tqdm) between the Trainer's dicts:
    its counter is not the training step, so the dicts keep the steps they have without it."""
    from tqdm import tqdm

    class _Sink:
        def __init__(self) -> None:
            self.text = ""

        def write(self, s: str) -> None:
            self.text += s

        def flush(self) -> None:
            pass

    sink = _Sink()
    for _ in tqdm(range(2000), desc="Map", file=sink, mininterval=0, ascii=False):
        pass
    bar = sink.text.split("\r")[-1].strip()
    assert bar.startswith("Map: 100%") and "2000/2000" in bar
    plain = _write(tmp_path, "plain.txt", _hf_lines())
    lines = []
    for i, line in enumerate(_hf_lines()):
        lines.append(line)
        if i % 3 == 1:
            lines.append(bar)
    noisy = _write(tmp_path, "noisy.txt", lines)
    assert _loss(noisy) == _loss(plain)
    assert max(_loss(noisy)[0]) < 2000


@pytest.mark.parametrize("prefix", ["> ", "2024-05-01T12:00:01.123456Z "])
def test_inline_code_ticks_behind_a_prefix_keep_the_first_line(tmp_path, prefix):
    """A backticked paste of Darknet's classifier lines (`step, epoch: loss, avg avg, rate rate, ...`) behind a
    quote or a timestamp: the first line's tick sits behind the prefix, and its point was lost."""
    lines = [
        f"{40245 + i}, 4.021: {v:.6f}, 6.910023 avg, 0.081346 rate, 0.385639 seconds, 5151360 images"
        for i, v in enumerate(LOSSES)
    ]
    lines[0], lines[-1] = "`" + lines[0], lines[-1] + "`"
    steps, losses = _loss(_write(tmp_path, "pasted.md", [prefix + line for line in lines]))
    assert steps == [40245 + i for i in range(len(LOSSES))] and losses == LOSSES


@pytest.mark.parametrize(
    "lines",
    [
        # darknet's line: the leading number is the step, not a line counter
        [
            f" {s + 1}: {v:.6f}, {v + 0.1:.6f} avg loss, 0.001000 rate, 3.2 seconds, 64 images"
            for s, v in zip(STEPS, LOSSES)
        ],
        # a line's own start, with a step word
        [f"Epoch {i}: loss {v:.4f}" for i, v in enumerate(LOSSES)],
        # a table whose first column counts the rows: its header carries no number
        ["step | loss", "---|---", *(f"{i + 1} | {v:.4f}" for i, v in enumerate(LOSSES))],
        # Caffe's `Train net output #0:` lines: prose behind glog's prefix (which `clean` knows)
        [
            f"I0812 10:00:{i:02d}.123456 12345 solver.cpp:244]     Train net output #0: loss = {v}"
            for i, v in enumerate(LOSSES)
        ],
        # a set's name as a key
        [f"Train: iter {s} loss {v:.4f}" for s, v in zip(STEPS, LOSSES)],
        # a bracketed step, and a set's name in brackets
        [f"[{s}] loss {v:.4f}" for s, v in zip(STEPS, LOSSES)],
        [f"[TRAIN] iter {s} loss {v:.4f}" for s, v in zip(STEPS, LOSSES)],
    ],
)
def test_a_lines_own_start_is_never_learned_as_a_prefix(lines):
    assert learn("\n".join(lines) + "\n") is None


def test_a_counter_behind_a_constant_tag_stays(tmp_path):
    """Only the constant tag is a prefix; the bracketed counter that counts up behind it is the step."""
    lines = [f"node3: [{s}] | loss {v:.4f}" for s, v in zip(STEPS, LOSSES)]
    rx = learn("\n".join(lines) + "\n")
    assert rx is not None
    assert [rx.sub(b"", line.encode()).decode() for line in lines] == [
        f"[{s}] | loss {v:.4f}" for s, v in zip(STEPS, LOSSES)
    ]
    assert _loss(_write(tmp_path, "tagged.log", lines)) == (STEPS, LOSSES)


def test_a_bracketed_progress_meter_and_fixed_width_tags_are_a_prefix(tmp_path):
    """xLearn prints its epoch table behind `[   10%      ]` (its header behind `[------------]`),
    between `[ ACTION     ]` lines: the meter and the tags are stripped and the table reads by epoch."""
    lines = [
        "[ ACTION     ] Start to train ...",
        "[------------] Epoch      Train log_loss       Test log_loss            Test AUC     Time cost (sec)",
        *(
            f"[   {10 * e:>3}%     ]     {e}            {v:.6f}            {v + 0.02:.6f}            0.700000    11.07"
            for e, v in zip(range(1, 8), LOSSES)
        ),
        "[ ACTION     ] Finish training",
    ]
    runs = load_path(_write(tmp_path, "xlearn.log", lines))
    run = max(runs, key=len)
    assert run.steps.tolist() == list(range(1, 8))
    assert run.col("loss").tolist() == [float(f"{v:.6f}") for v in LOSSES[:7]]


def test_stripped_stream_removes_the_prefix_at_every_line_start_across_reads():
    """The stream wrapper strips whole lines only: a line cut by a read keeps its prefix until its end arrives."""
    import io

    text = "".join(f"node12: iter {s}: loss {v:.4f}\n" for s, v in zip(STEPS, LOSSES)).encode()
    rx = learn(text.decode())
    assert rx is not None
    f = Stripped(io.BytesIO(text), rx)
    out = b""
    while chunk := f.read(7):
        out += chunk
    assert out.decode().splitlines() == [f"iter {s}: loss {v:.4f}" for s, v in zip(STEPS, LOSSES)]


@pytest.mark.parametrize("cut", [1, 3])
def test_a_keras_excerpt_cut_inside_an_epoch_dates_its_first_bar_by_the_next_header(tmp_path, cut):
    """An excerpt that starts at the progress line of epoch 1 or 2 (its `Epoch N/4` header cut off): that
    line is the epoch before the first header left, not epoch 1."""
    lines = _keras_lines()[cut:]
    first = (cut + 1) // 2  # the epoch whose header was cut
    assert _loss(_write(tmp_path, "excerpt.txt", lines)) == (KERAS_STEPS[first - 1 :], KERAS_LOSSES[first - 1 :])
