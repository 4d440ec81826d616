"""The gradient-accumulation normalisation detector on plain loops (the HF Trainer case, where the
callback measures `loss_weight`, is in test_integrations_transformers.py), and the joining of a
step's micro-batches."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")

import lossdoctor  # noqa: E402
from lossdoctor.integrations.microbatch import join_batches  # noqa: E402

CLASSES, ACCUM = 16, 4


def plain_loop(tmp_path, *, divide: bool, steps: int = 24):
    """A classifier trained from scratch with 4 micro-batches per step; the loop logs the step's
    loss as the sum of the micro-batch losses it backpropagated (divided by 4, or not: the bug)."""
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(16, 64), torch.nn.ReLU(), torch.nn.Linear(64, CLASSES))
    opt = torch.optim.SGD(model.parameters(), lr=0.05)
    g = torch.Generator().manual_seed(0)
    centers = torch.randn(CLASSES, 16, generator=g) * 2
    mon = lossdoctor.watch(model, opt, log_dir=tmp_path / "ld", task="classification", alerts=False)
    for _ in range(steps):
        total = torch.zeros(())
        for _ in range(ACCUM):
            y = torch.randint(0, CLASSES, (8,), generator=g)
            x = centers[y] + torch.randn(8, 16, generator=g)
            loss = torch.nn.functional.cross_entropy(model(x), y)
            if divide:
                loss = loss / ACCUM
            loss.backward()
            total += loss.detach()
        opt.step()
        opt.zero_grad()
        mon.step(total, batch={"x": x, "labels": y})
    mon.close()
    return mon


def test_summed_micro_batch_losses_are_found(tmp_path):
    report = plain_loop(tmp_path, divide=False).diagnose()
    (f,) = [f for f in report.findings if f.cause == "grad_accum_normalization"]
    assert f.severity == "warning" and f.symptom == "oscillation"  # a 4x loss is a 4x step
    assert f.evidence[0].key in ("accum.summed", "accum.starts_at_k_chance") and f.evidence[0].values["k"] == 4, (
        f.evidence[0].data()
    )
    # a start at 4x the chance level is the sum, not over-confident initial logits
    assert "bad_init" not in {g.cause for g in report.findings}
    # the new cause and symptom are part of the published JSON contract
    jsonschema = pytest.importorskip("jsonschema")
    import json
    from importlib import resources

    schema = json.loads(resources.files("lossdoctor").joinpath("schema/report.schema.json").read_text())
    jsonschema.validate(report.to_dict(), schema)


def test_averaged_micro_batch_losses_are_quiet(tmp_path):
    mon = plain_loop(tmp_path, divide=True)
    report = mon.diagnose()
    assert not [f for f in report.findings if f.cause == "grad_accum_normalization"]
    assert report.status == "healthy", [f.to_dict() for f in report.findings]


def test_join_batches_pads_like_a_collator():
    a = {"input_ids": torch.ones(2, 3, dtype=torch.long), "labels": torch.full((2, 3), 5), "pixel": torch.zeros(2, 4)}
    b = {"input_ids": torch.ones(1, 5, dtype=torch.long), "labels": torch.full((1, 5), 7), "pixel": torch.ones(1, 4)}
    out = join_batches([a, b])
    assert out["input_ids"].shape == (3, 5) and out["labels"].shape == (3, 5)
    assert out["labels"][0].tolist() == [5, 5, 5, -100, -100]  # padded positions are ignored
    assert out["input_ids"][0].tolist() == [1, 1, 1, 0, 0]
    assert out["pixel"].shape == (3, 4) and out["pixel"][2].tolist() == [1.0] * 4
    tup = join_batches([(torch.zeros(2, 3), torch.zeros(2)), (torch.ones(3, 3), torch.ones(3))])
    assert tup[0].shape == (5, 3) and tup[1].tolist() == [0, 0, 1, 1, 1]
