"""Hugging Face `Trainer`: `trainer_state.json` (its `log_history`), or an output / checkpoint
directory holding one.

What the Trainer logs, and what that means for a diagnosis:
- every `logging_steps` (500 by default) one entry with `loss` (the mean over the interval),
  `grad_norm` (of the last step, before clipping) and `learning_rate`;
- with `logging_nan_inf_filter=True` (the default) a non-finite loss is left out of the interval
  mean, so an interval whose every loss was NaN is logged as `loss: 0.0`. When the gradient norm
  of such an entry is non-finite, the 0.0 is that artefact, not a real zero loss, and is read back
  as NaN (said in the notes);
- evaluation entries (`eval_loss`) and the final summary (`train_loss`, `train_runtime`) are not
  training steps and are skipped.

The file is JSON written by Python's `json` (NaN/Infinity literals), so it is parsed with the
standard library, which accepts them. A truncated file (the run was killed while saving) is read
entry by entry up to the cut, with a note.
"""

from __future__ import annotations

import json
import math
import re
from pathlib import Path
from typing import Any

import numpy as np

from ..messages import Msg
from ..records import NAN_FILTER_META, Run, from_columns, to_float
from .columns import SIDE_COLUMNS, column_for
from .files import head, json_array_prefix, looks_binary, numbered, read_bytes, tail, walk
from .registry import SourceError, reader

STATE = "trainer_state.json"

#: log_history key -> records column
_KEYS = {"loss": "loss", "grad_norm": "grad_norm", "learning_rate": "lr"}


def _sniff(p: Path) -> bool:
    if p.is_dir():
        return (p / STATE).is_file() or bool(_checkpoint_states(p))
    if p.name == STATE:
        return True
    if p.suffix.lower() == ".json":
        return b'"log_history"' in head(p, 1 << 20)
    return False


def _checkpoint_states(d: Path) -> list[Path]:
    return walk(d, lambda n: n == STATE, max_depth=2)


def find_state(path: Path) -> tuple[Path, list[str]]:
    """The trainer_state.json to read for a file or directory: the output dir's own one, else the
    latest checkpoint's (it holds the whole log_history up to that checkpoint)."""
    if path.is_file():
        return path, []
    candidates = _checkpoint_states(path)
    if not candidates:
        raise SourceError(f"{path}: no {STATE} in this directory")
    own = path / STATE
    latest = max(candidates, key=lambda c: (numbered(c.parent, r"checkpoint-(\d+)"), c.stat().st_mtime))
    notes: list[str] = []
    chosen = own if own.is_file() else latest
    if own.is_file() and latest != own and _global_step(latest) > _global_step(own):
        chosen = latest
    if len(candidates) > 1:
        notes.append(Msg("source.hf_most_complete", file=str(chosen.relative_to(path)), n=len(candidates), name=STATE))
    return chosen, notes


def _global_step(p: Path) -> int:
    m = re.search(rb'"global_step"\s*:\s*(\d{1,18})\b', head(p, 1 << 16)) or re.search(
        rb'"global_step"\s*:\s*(\d{1,18})\b', tail(p, 4096)
    )
    return int(m.group(1)) if m else -1


def load_state(p: Path) -> tuple[dict[str, Any], list[str]]:
    """The parsed state, recovering the log entries of a truncated file."""
    if looks_binary(head(p, 4096)):  # NUL bytes: no JSON, refused before the file is read
        raise SourceError(f"{p}: binary data, not a Trainer state")
    text = read_bytes(p).decode("utf-8", errors="replace")
    if not text.strip():
        raise SourceError(f"{p}: the file is empty")
    try:
        state = json.loads(text)
    except RecursionError as e:
        raise SourceError(f"{p}: JSON nested too deeply to be a Trainer state") from e
    except ValueError:
        return _recover(text, p)
    if not isinstance(state, dict) or not isinstance(state.get("log_history"), list):
        raise SourceError(f"{p}: not a Trainer state (no log_history list)")
    return state, []


def _recover(text: str, p: Path) -> tuple[dict[str, Any], list[str]]:
    """Read log_history entries one by one up to where the file was cut."""
    i = text.find('"log_history"')
    if i < 0:
        raise SourceError(f"{p}: not valid JSON and no log_history to recover")
    entries, _, _ = json_array_prefix(text, text.find("[", i))
    if not entries:
        raise SourceError(f"{p}: truncated JSON with no complete log entry")
    state: dict[str, Any] = {"log_history": entries}
    for key in ("logging_steps", "max_steps", "train_batch_size", "global_step"):
        m = re.search(rf'"{key}"\s*:\s*(\d{{1,18}})\b', text)
        if m:
            state[key] = int(m.group(1))
    last = entries[-1].get("step", "?")
    return state, [Msg("source.hf_truncated", name=p.name, n=len(entries), step=last)]


def state_to_run(state: dict[str, Any], *, what: str, notes: list[str]) -> Run:
    entries = [
        e
        for e in state["log_history"]
        if isinstance(e, dict) and _is_step(e.get("step")) and any(k in e for k in _KEYS) and "train_runtime" not in e
    ]
    if not entries:
        raise SourceError(f"{what}: log_history holds no training loss entries (logging_steps larger than the run?)")
    steps = np.array([to_float(e.get("step")) for e in entries])
    cols: dict[str, np.ndarray] = {}
    logged: dict[str, np.ndarray] = {}
    for key, col in {**_KEYS, **_preference_keys(entries)}.items():
        present = np.array([key in e and e[key] is not None for e in entries])
        if present.any():
            cols[col] = np.array([to_float(e.get(key)) for e in entries])
            logged[col] = present
    meta: dict[str, Any] = {"loss_is_interval_mean": True, "framework": "transformers"}
    for key in ("logging_steps", "max_steps", "train_batch_size", "global_step", "num_train_epochs"):
        if _plain_number(state.get(key)):
            meta[key] = state[key]
    if isinstance(meta.get("logging_steps"), int) and meta["logging_steps"] > 0:
        meta["log_interval"] = meta["logging_steps"]
    absent = [n for k, n in (("grad_norm", Msg("signal.hf_grad_norm")), ("loss", "loss")) if k not in cols]
    notes.insert(0, Msg("source.hf_read", what=what, n=len(entries)))
    if absent:
        notes.append(Msg("source.not_in_log", signals=absent))
    notes.append(Msg("source.hf_no_scale"))
    run = from_columns(steps, cols, meta=meta, source="hf_trainer", logged=logged)
    run.notes.extend(notes)
    restore_filtered_nan(run)
    return run


def _preference_keys(entries: list[dict[str, Any]]) -> dict[str, str]:
    """The preference-training scalars TRL puts in log_history (`rewards/chosen`, `logps/rejected`...)
    -> their records columns (the best-named key of each)."""
    best: dict[str, tuple[int, str]] = {}
    for key in {k for e in entries[:64] for k in e if isinstance(k, str)}:
        hit = column_for(key)
        if hit is not None and hit[0] in SIDE_COLUMNS and (hit[0] not in best or (hit[1], key) < best[hit[0]]):
            best[hit[0]] = (hit[1], key)
    return {key: col for col, (_, key) in best.items()}


def filtered_nan_note(first_step: int) -> str:
    return Msg("source.hf_filtered_nan", step=first_step)


def is_filtered_nan(loss: Any, grad_norm: Any) -> bool:
    """One logged entry of the HF Trainer: a loss of 0.0 next to a non-finite grad norm is an
    interval whose every loss was NaN/Inf (see `restore_filtered_nan`), read back as NaN."""
    return loss == 0.0 and grad_norm is not None and not np.isfinite(to_float(grad_norm))


def restore_filtered_nan(run: Run) -> None:
    """The HF Trainer logs an interval whose losses were all NaN/Inf as 0.0 (`logging_nan_inf_filter`
    adds the mean of the interval's finite losses for a NaN step: none, so 0) next to a non-finite
    grad norm: read such a 0.0 back as NaN. For logs the Trainer wrote (trainer_state.json, its
    MLflow metrics); elsewhere loss 0.0 with a NaN grad norm is a batch with no supervised token."""
    if not (run.has("loss") and run.has("grad_norm")):
        return
    loss, gn = run.cols["loss"], run.cols["grad_norm"]
    artefact = run.logged("loss") & (loss == 0.0) & run.logged("grad_norm") & ~np.isfinite(gn)
    if artefact.any():
        run.cols["loss"] = np.where(artefact, np.nan, loss)
        first = int(run.steps[np.flatnonzero(artefact)[0]])
        run.meta[NAN_FILTER_META] = first
        run.notes.append(filtered_nan_note(first))


def _is_step(v: Any) -> bool:
    """A step number an entry can be filed under: a finite number within int64."""
    f = to_float(v)
    return not isinstance(v, bool) and bool(np.isfinite(f)) and abs(f) < 2.0**62


def _plain_number(v: Any) -> bool:
    """A configuration number worth keeping: finite, not a bool, not beyond 2^53."""
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        return False
    if isinstance(v, int):
        return abs(v) < 1 << 53
    return math.isfinite(v) and abs(v) < 2.0**53


@reader("Hugging Face trainer_state.json", _sniff, priority=10)
def read(path: Path) -> list[Run]:
    state_path, notes = find_state(path)
    state, more = load_state(state_path)
    return [state_to_run(state, what=state_path.name, notes=notes + more)]
