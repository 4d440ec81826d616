"""Training runs that leave one incident record each, down every path of the incident flow.

`tests/test_incident_record.py` runs them and compares what they write to `incidents/` with the
records the flow wrote before `IncidentRecord` existed (`tests/data/incident_records/*.json`, made by
running this file as a script on that version). A record's measured times (its timing, seconds and
the verification's cost) differ from run to run, and a value's last digit with the number of
threads, so every float, and every decimal number inside a sentence, is masked on both sides; the
keys, their order, the nesting, and the rest of every string, integer, boolean and null must be
the same.

    PYTHONPATH=src:tests python tests/incident_scenarios.py tests/data/incident_records
"""

from __future__ import annotations

import re
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import orjson
import torch

import lossdoctor
from triage_models import (
    MLP,
    PairDistance,
    TinyLM,
    ce_loss,
    classification_batches,
    lm_batches,
    lm_loss,
    mse_loss,
    regression_batches,
    train,
)

#: floats are masked as this string (they include measured times)
FLOAT = "<float>"
#: a decimal number inside a sentence ("range [-0.946, 0.964]", "1e-05"), masked as "<num>"
DECIMAL = re.compile(r"\d+\.\d+(?:e[-+]?\d+)?|\d+e[-+]?\d+")
#: the folder of this file, as a traceback in a record names it: masked (it is where the checkout is)
HERE = str(Path(__file__).resolve().parent)


def padding_replay(log_dir: Path) -> Any:
    """An all-padding sequence: replayed, localised to the softmax, batch vs state."""
    model = TinyLM(dropout=0.1)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-2)
    batches = lm_batches(10)
    batches[6]["attention_mask"][3] = 0
    mon = lossdoctor.watch(model, opt, log_dir=log_dir, alerts=False, snapshot_every=4, replay_fn=lm_loss)
    train(model, opt, batches, lm_loss, mon, clip=0.5)
    mon.close()
    return mon


def padding_live(log_dir: Path) -> Any:
    """The same fault without replay_fn: the live flags' answer and a note."""
    model = TinyLM(dropout=0.1)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-2)
    batches = lm_batches(10)
    batches[6]["attention_mask"][3] = 0
    mon = lossdoctor.watch(model, opt, log_dir=log_dir, alerts=False, snapshot_every=4)
    train(model, opt, batches, lm_loss, mon, clip=0.5)
    mon.close()
    return mon


def spike_skip(log_dir: Path) -> Any:
    """A finite but absurd target: a loss spike replayed to its sample, rolled back (skip policy)."""
    batches = regression_batches(60, size=8)
    batches[50] = (batches[50][0], batches[50][1].clone())
    batches[50][1][3] = 300.0
    model = MLP()
    opt = torch.optim.Adam(model.parameters(), lr=3e-3)
    mon = lossdoctor.watch(
        model, opt, log_dir=log_dir, alerts=False, replay_fn=mse_loss, snapshot_every=8, on_incident="skip"
    )
    for b in batches:
        opt.zero_grad()
        loss = mse_loss(model, b)
        loss.backward()
        opt.step()
        mon.step(loss, batch=b)
    mon.close()
    return mon


def scale_collapse(log_dir: Path) -> Any:
    """A GradScaler that skips step after step: the unscaled backward traced (no replay)."""
    model = PairDistance()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    scaler = torch.amp.GradScaler("cpu")

    def contrastive(m: Any, b: Any) -> torch.Tensor:
        x, y = b
        d = m(x).float()
        same = (y[:, None] == y[None, :]).float()
        return (same * d**2 + (1 - same) * torch.relu(1.0 - d) ** 2).mean()

    def replay(m: Any, b: Any) -> torch.Tensor:
        with torch.autocast("cpu", dtype=torch.float16):
            return contrastive(m, b)

    mon = lossdoctor.watch(model, opt, scaler=scaler, log_dir=log_dir, alerts=False, replay_fn=replay)
    train(model, opt, classification_batches(20), contrastive, mon, scaler=scaler, autocast=torch.float16)
    mon.close()
    return mon


def explosion_verified(log_dir: Path) -> Any:
    """A 300x batch: the state goes bad (replay-state), and the fixes are verified by replay."""
    model = MLP()
    opt = torch.optim.SGD(model.parameters(), lr=0.05)
    batches = regression_batches(40)
    x, y = batches[14]
    batches[14] = (x * 300.0, y * 300.0)
    mon = lossdoctor.watch(model, opt, log_dir=log_dir, alerts=False, replay_fn=mse_loss, snapshot_every=5)
    train(model, opt, batches, mse_loss, mon)
    mon.verify_fixes(fixes=(lossdoctor.Fix("clip", max_norm=1.0), lossdoctor.Fix("drop_samples", samples=[0])))
    mon.close()
    return mon


def fp16_overflow(log_dir: Path) -> Any:
    """fp16 autocast overflow under a GradScaler: the op, the layer and the sample."""
    model = MLP()
    with torch.no_grad():
        model.fc2.weight.mul_(1000.0)
    opt = torch.optim.SGD(model.parameters(), lr=1e-6)
    scaler = torch.amp.GradScaler("cpu")
    batches = classification_batches(7)
    batches[5][0][4] *= 200.0

    def replay(m: Any, b: Any) -> torch.Tensor:
        with torch.autocast("cpu", dtype=torch.float16):
            return ce_loss(m, b)

    mon = lossdoctor.watch(model, opt, scaler=scaler, log_dir=log_dir, alerts=False, replay_fn=replay, snapshot_every=4)
    train(model, opt, batches, ce_loss, mon, scaler=scaler, autocast=torch.float16)
    mon.close()
    return mon


def replay_error(log_dir: Path) -> Any:
    """The replay itself fails: the record keeps its live answer, the error and a note."""
    from unittest import mock

    def broken(*args: Any, **kwargs: Any) -> Any:
        raise RuntimeError("replay broke")

    with mock.patch("lossdoctor.triage.flow.replay", broken):
        return padding_replay(log_dir)


SCENARIOS: dict[str, Callable[[Path], Any]] = {
    "padding_replay": padding_replay,
    "padding_live": padding_live,
    "spike_skip": spike_skip,
    "scale_collapse": scale_collapse,
    "explosion_verified": explosion_verified,
    "fp16_overflow": fp16_overflow,
    "replay_error": replay_error,
}


def run_scenario(name: str, log_dir: Path) -> tuple[Any, list[bytes]]:
    """The scenario's monitor (closed), and the bytes of each incident file it wrote, oldest first
    (seeded as the tests are)."""
    torch.manual_seed(0)
    mon = SCENARIOS[name](log_dir)
    return mon, [f.read_bytes() for f in sorted((log_dir / "incidents").glob("*.json"))]


def mask_floats(obj: Any) -> Any:
    """The record with every float, and every decimal in a string, masked, and this folder's path
    replaced by <tests>; keys and their order kept."""
    if isinstance(obj, float):
        return FLOAT
    if isinstance(obj, str):
        return "<tests>" + obj[len(HERE) :] if obj.startswith(HERE) else DECIMAL.sub("<num>", obj)
    if isinstance(obj, dict):
        ours = isinstance(obj.get("file"), str) and obj["file"].startswith(HERE)  # a line of this folder's code
        return {k: "<line>" if ours and k == "line" else mask_floats(v) for k, v in obj.items()}
    if isinstance(obj, list):
        return [mask_floats(v) for v in obj]
    return obj


def masked(data: bytes) -> bytes:
    """One incident file as it is compared: floats masked, written as the run log writes it."""
    return orjson.dumps(mask_floats(orjson.loads(data)), option=orjson.OPT_INDENT_2)


if __name__ == "__main__":
    import tempfile

    out = Path(sys.argv[1])
    out.mkdir(parents=True, exist_ok=True)
    for name in SCENARIOS:
        with tempfile.TemporaryDirectory() as d:
            _, files = run_scenario(name, Path(d))
        (out / f"{name}.json").write_bytes(
            orjson.dumps([orjson.loads(masked(f)) for f in files], option=orjson.OPT_INDENT_2) + b"\n"
        )
        print(name, len(files))
