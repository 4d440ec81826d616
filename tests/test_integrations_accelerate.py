"""Accelerate needs no callback: `watch` on the prepared model and optimizer, with
`accelerator.backward`, `accelerator.accumulate`, `clip_grad_norm_` and bf16 mixed precision."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")
accelerate = pytest.importorskip("accelerate")

import lossdoctor  # noqa: E402
from lossdoctor.sources.rundir import read_run_dir  # noqa: E402


@pytest.fixture(autouse=True)
def fresh_accelerate_state():
    """Accelerate keeps process-wide singletons (a Trainer in an earlier test set them up without
    mixed precision): start and leave each test with a clean slate."""
    from accelerate.state import AcceleratorState, GradientState

    AcceleratorState._reset_state(True)
    GradientState._reset_state()
    yield
    AcceleratorState._reset_state(True)
    GradientState._reset_state()


def run_loop(tmp_path, *, nan_batch: int | None = None):
    from accelerate import Accelerator

    acc = Accelerator(cpu=True, mixed_precision="bf16", gradient_accumulation_steps=2)
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(8, 32), torch.nn.ReLU(), torch.nn.Linear(32, 4))
    opt = torch.optim.AdamW(model.parameters(), lr=3e-3)
    g = torch.Generator().manual_seed(0)
    x = torch.randn(96, 8, generator=g)
    y = (x[:, 0] > 0).long() + 2 * (x[:, 1] > 0).long()
    if nan_batch is not None:
        x[nan_batch * 8 + 1, 2] = float("inf")
    dl = torch.utils.data.DataLoader(torch.utils.data.TensorDataset(x, y), batch_size=8)
    model, opt, dl = acc.prepare(model, opt, dl)
    mon = lossdoctor.watch(model, opt, scaler=acc.scaler, log_dir=tmp_path / "ld", task="classification", alerts=False)
    clip_norms = []
    for xb, yb in dl:
        with acc.accumulate(model):
            loss = torch.nn.functional.cross_entropy(model(xb), yb)
            acc.backward(loss)
            if acc.sync_gradients:
                clip_norms.append(float(acc.clip_grad_norm_(model.parameters(), 0.5)))
            opt.step()
            opt.zero_grad()
            if acc.sync_gradients:  # once per optimizer step
                mon.step(loss, batch=(xb, yb))
    mon.close()
    (run,) = read_run_dir(tmp_path / "ld")
    return mon, run, clip_norms


def test_accelerate_loop_records_pre_clip_norms_per_optimizer_step(tmp_path):
    mon, run, clip_norms = run_loop(tmp_path)
    assert len(run) == 6  # 12 micro-batches, 2 per step
    assert run.col("accum_steps").tolist() == [2.0] * 6
    # clip_grad_norm_ returns the norm before clipping: the monitor saw the same gradients
    assert run.col("grad_norm").tolist() == pytest.approx(clip_norms, rel=1e-4)
    assert run.col("skipped").tolist() == [0.0] * 6
    assert run.col("lr").tolist() == pytest.approx([3e-3] * 6)
    report = mon.diagnose()
    assert report.status == "healthy", [f.to_dict() for f in report.findings]


def test_accelerate_inf_in_a_batch_is_nonfinite_data(tmp_path):
    mon, run, _ = run_loop(tmp_path, nan_batch=5)  # micro-batch 5 = the last one of step 2
    report = mon.diagnose()
    assert report.primary.cause == "nonfinite_data"
    assert report.primary.step == 2
