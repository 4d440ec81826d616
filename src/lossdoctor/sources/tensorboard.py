"""TensorBoard event files (`events.out.tfevents.*`), or a run directory holding them.

Read with the `tensorboard` package's own event-file loader (no TensorFlow needed): it handles the
TFRecord framing and checksums and migrates old `simple_value` summaries to tensors, so files from
`torch.utils.tensorboard.SummaryWriter`, tensorboardX, Lightning, HF, Megatron and DeepSpeed all
read the same way. Tags are mapped by `columns.column_for` (`train/loss`, `lm loss`, `grad-norm`,
`learning_rate`, `lr-AdamW`, `loss-scale`...); the notes say which tags fed which signal.

A directory may hold several runs (HF writes `runs/<date>_<host>/` per training run): the most
recently written run directory is read, and the others are named in a note. Several event files in
one directory (a resumed run) are merged; at a repeated step the later file wins.
"""

from __future__ import annotations

import logging
from pathlib import Path

import numpy as np

from ..records import Run, from_columns
from . import SourceError, reader
from .columns import SIGNAL_NAMES, column_for

_MARK = "tfevents"


def _is_event_file(name: str) -> bool:
    return _MARK in name and not name.endswith((".tmp", ".lock"))


def _sniff(p: Path) -> bool:
    from .files import walk

    if p.is_file():
        return _is_event_file(p.name)
    return bool(walk(p, _is_event_file, max_depth=4))


def _event_files(p: Path) -> tuple[list[Path], list[str]]:
    from .files import walk

    if p.is_file():
        return [p], []
    files = walk(p, _is_event_file, max_depth=4)
    by_dir: dict[Path, list[Path]] = {}
    for f in files:
        by_dir.setdefault(f.parent, []).append(f)
    if len(by_dir) == 1:
        return files, []
    newest = max(by_dir, key=lambda d: max(f.stat().st_mtime for f in by_dir[d]))
    others = sorted(str(d.relative_to(p)) for d in by_dir if d != newest)
    shown = ", ".join(others[:5]) + (" ..." if len(others) > 5 else "")
    return sorted(by_dir[newest]), [f"{len(by_dir)} TensorBoard runs here; read the newest, "
                                    f"{newest.relative_to(p)} (others: {shown}; point at one to "
                                    "diagnose it)"]


def read_scalars(files: list[Path], notes: list[str]) -> dict[str, tuple[list[int], list[float]]]:
    """tag -> (steps, values) of every scalar summary in the files, in file order."""
    try:
        from tensorboard.backend.event_processing.event_file_loader import EventFileLoader
        from tensorboard.util import tensor_util
    except ImportError as e:
        raise SourceError("reading TensorBoard event files needs the tensorboard package "
                          "(pip install tensorboard)") from e
    logging.getLogger("tensorboard").setLevel(logging.ERROR)
    out: dict[str, tuple[list[int], list[float]]] = {}
    for f in sorted(files, key=lambda x: (x.stat().st_mtime, x.name)):
        n = 0
        try:
            for ev in EventFileLoader(str(f)).Load():
                if not ev.HasField("summary"):
                    continue
                for v in ev.summary.value:
                    val = _scalar(v, tensor_util)
                    if val is None:
                        continue
                    steps, vals = out.setdefault(v.tag, ([], []))
                    steps.append(int(ev.step))
                    vals.append(val)
                    n += 1
        except Exception as e:  # noqa: BLE001 - a corrupt record ends the file, not the diagnosis
            notes.append(f"{f.name}: stopped reading at a damaged record after {n} values "
                         f"({type(e).__name__})")
    return out


def _scalar(v, tensor_util) -> float | None:
    kind = v.WhichOneof("value")
    if kind == "simple_value":
        return float(v.simple_value)
    if kind == "tensor":
        plugin = v.metadata.plugin_data.plugin_name
        if plugin and plugin != "scalars":
            return None
        try:
            a = tensor_util.make_ndarray(v.tensor)
        except Exception:  # noqa: BLE001 - not a numeric tensor
            return None
        if a.size != 1 or a.dtype.kind not in "fiub":
            return None
        return float(a.reshape(()))
    return None


def scalars_to_run(scalars: dict[str, tuple[list[int], list[float]]], *, what: str,
                   notes: list[str]) -> Run:
    best: dict[str, tuple[int, str]] = {}
    for tag in scalars:
        hit = column_for(tag)
        if hit is None:
            continue
        col, rank = hit
        if col not in best or (rank, tag) < best[col]:
            best[col] = (rank, tag)
    if not best:
        tags = ", ".join(repr(t) for t in list(scalars)[:12]) or "none"
        raise SourceError(f"{what}: no training metric among the TensorBoard scalar tags ({tags})")
    all_steps = np.unique(np.concatenate([np.asarray(scalars[t][0], dtype=np.int64)
                                          for _, t in best.values()]))
    cols: dict[str, np.ndarray] = {}
    logged: dict[str, np.ndarray] = {}
    for col, (_, tag) in best.items():
        s = np.asarray(scalars[tag][0], dtype=np.int64)
        v = np.asarray(scalars[tag][1], dtype=np.float64)
        idx = np.searchsorted(all_steps, s)
        c = np.full(all_steps.shape, np.nan)
        c[idx] = v  # the later value at a repeated step wins
        lg = np.zeros(all_steps.shape, dtype=bool)
        lg[idx] = True
        cols[col], logged[col] = c, lg
    used = ", ".join(f"{col} <- {tag!r}" for col, (_, tag) in sorted(best.items()))
    notes.insert(0, f"{what}: read TensorBoard tags {used}")
    absent = [SIGNAL_NAMES[c] for c in ("loss", "grad_norm", "lr", "scale") if c not in best]
    if absent:
        notes.insert(1, f"not in this log: {', '.join(absent)}")
    meta = {"tags": {col: tag for col, (_, tag) in best.items()}}
    if any(t.lower().startswith("train/samples/") for _, t in best.values()):
        notes.append("DeepSpeed's monitor logs against samples, not optimizer steps: finding steps "
                     "are sample counts")
        meta["step_unit"] = "samples"
    run = from_columns(all_steps, cols, meta=meta, source="tensorboard", logged=logged)
    run.notes.extend(notes)
    return run


@reader("TensorBoard event file", _sniff, priority=30)
def read(path: Path) -> list[Run]:
    files, notes = _event_files(path)
    if not files:
        raise SourceError(f"{path}: no TensorBoard event files")
    scalars = read_scalars(files, notes)
    if not scalars:
        raise SourceError(f"{path}: the TensorBoard events hold no scalar values")
    return [scalars_to_run(scalars, what=path.name, notes=notes)]
