"""A wide linear layer on CPU (an LM head) is vouched for between sampled steps instead of
scanned, and still gives the same non-finite flags and attribution as a scan would."""

from __future__ import annotations

import json

import pytest
import torch
from torch import nn
from torch.nn import functional as F

import lossdoctor
from lossdoctor.signals.tracer import INPUT, OUTPUT, VOUCHED
from lossdoctor.sources.rundir import read_run_dir

VOCAB, DIM, BATCH, SEQ = 2048, 16, 4, 32


class TinyLM(nn.Module):
    """Embedding -> Linear -> LayerNorm -> a head 128x wider than its input (as in a real LM)."""

    def __init__(self) -> None:
        super().__init__()
        torch.manual_seed(0)
        self.emb = nn.Embedding(VOCAB, DIM)
        self.mix = nn.Linear(DIM, DIM)
        self.ln = nn.LayerNorm(DIM)
        self.head = nn.Linear(DIM, VOCAB, bias=False)

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        return self.head(self.ln(self.mix(self.emb(ids))))


class Amplify(torch.autograd.Function):
    """Identity forward; backward multiplies the gradient by `factor` (finite, but huge)."""

    @staticmethod
    def forward(ctx, x, factor):
        ctx.factor = factor
        return x.clone()

    @staticmethod
    def backward(ctx, g):
        return g * ctx.factor, None


def _ids(i):
    return torch.randint(0, VOCAB, (BATCH, SEQ), generator=torch.Generator().manual_seed(i))


def _steps(d):
    return [json.loads(x) for x in (d / "steps.jsonl").read_text().splitlines()]


def _run(tmp_path, loss_fn, *, steps=7, layer_every=10, fault_step=None, backward_inputs=None):
    """Train TinyLM for `steps` steps; from `fault_step` on the loss is `loss_fn(logits, ids)`."""
    model = TinyLM()
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    kinds = []
    with lossdoctor.watch(model, opt, log_dir=tmp_path, alerts=False, layer_every=layer_every) as mon:
        head = mon.tracer.names.index("head")
        for i in range(steps):
            ids = _ids(i)
            opt.zero_grad()
            logits = model(ids)
            if fault_step is not None and i >= fault_step:
                loss = loss_fn(logits, ids)
            else:
                loss = F.cross_entropy(logits.reshape(-1, VOCAB), ids.reshape(-1))
            loss.backward(inputs=backward_inputs(model) if backward_inputs else None)
            opt.step()
            tr = mon.tracer
            kinds.append(
                (
                    [k for m, k in zip(tr.ev_module, tr.ev_kind) if m == head],
                    [k for m, k in zip(tr.bw_module, tr.bw_kind) if m == head],
                )
            )
            mon.step(loss, batch=ids)
    return _steps(tmp_path), kinds, model


def test_head_is_vouched_between_sampled_steps_and_measured_on_them(tmp_path):
    steps, kinds, _ = _run(tmp_path, None, steps=8)
    # steps 0-4 are sampled (warm-up), 5-7 are not (layer_every 10)
    assert kinds[0] == ([OUTPUT], [OUTPUT])
    assert kinds[6] == ([VOUCHED], [VOUCHED])
    for r in steps:
        assert "fwd_first_nonfinite" not in r and "bwd_first_nonfinite" not in r
    # the step's largest |activation| never comes from a module that was not measured
    assert steps[6]["act_absmax_layer"] != "head"
    assert steps[0]["act_absmax"] > 0
    layers = read_run_dir(tmp_path)[0].layers
    i = layers.modules.index("head")
    sampled = {int(s): row for s, row in zip(layers.steps, layers.stats["act_absmax"])}
    assert 0 in sampled and 6 not in sampled
    assert sampled[0][i] > 0  # measured on a sampled step


@pytest.mark.parametrize("layer_every", [1, 10])  # scanned on every step / vouched for at step 6
def test_nonfinite_gradient_at_the_head_output_is_found(tmp_path, layer_every):
    """sqrt(0) has an infinite derivative: the loss is finite, the logits' gradient is not."""

    def loss_fn(logits, ids):
        return F.cross_entropy(logits.reshape(-1, VOCAB), ids.reshape(-1)) + torch.sqrt(logits - logits.detach()).sum()

    steps, kinds, _ = _run(tmp_path, loss_fn, fault_step=6, layer_every=layer_every)
    r = steps[6]
    assert r["bwd_first_nonfinite"]["layer"] == "head"
    assert "bwd_first_nonfinite" not in steps[5]
    assert kinds[6][1] == [OUTPUT]  # measured (scanned once its input's gradient went bad)


@pytest.mark.parametrize("layer_every", [1, 10])
def test_nonfinite_gradient_made_by_the_head_backward_is_attributed_to_it(tmp_path, layer_every):
    """The logits' gradient is finite (1e38) but grad @ W overflows: the gradient first goes bad
    at the head's input, after the head."""
    steps, kinds, _ = _run(
        tmp_path, lambda logits, ids: Amplify.apply(logits, 1e38).sum(), fault_step=6, layer_every=layer_every
    )
    bad = steps[6]["bwd_first_nonfinite"]
    assert bad["layer"] == "ln" and bad["after"] == "head"
    assert kinds[6][1] == [OUTPUT]  # scanned (its input's gradient went bad): finite
    assert kinds[5][1] == ([VOUCHED] if layer_every == 10 else [OUTPUT])


def test_head_output_that_overflows_is_scanned_and_flagged(tmp_path):
    """Weights up to 5e37 are representable, but the bound (and the logits) pass the dtype's
    range: the output is scanned, and is inf."""
    model_holder = {}

    def loss_fn(logits, ids):
        return F.cross_entropy(logits.reshape(-1, VOCAB), ids.reshape(-1))

    # blow the head's weights up after step 5's update (SGD then carries them into step 6)
    class Blow(torch.optim.SGD):
        def step(self, closure=None):
            out = super().step(closure)
            if model_holder.get("n", 0) == 5:
                with torch.no_grad():
                    model_holder["m"].head.weight.mul_(2e19).mul_(1e19)
            model_holder["n"] = model_holder.get("n", 0) + 1
            return out

    model = TinyLM()
    model_holder["m"] = model
    opt = Blow(model.parameters(), lr=0.0)
    with lossdoctor.watch(model, opt, log_dir=tmp_path, alerts=False) as mon:
        for i in range(7):
            ids = _ids(i)
            opt.zero_grad()
            loss = loss_fn(model(ids), ids)
            loss.backward()
            opt.step()
            mon.step(loss, batch=ids)
    r = _steps(tmp_path)[6]
    assert r["fwd_first_nonfinite"]["layer"] == "head"
    assert "fwd_first_nonfinite" not in _steps(tmp_path)[5]


def test_gradient_that_never_reaches_the_input_is_checked_at_the_end_of_the_step(tmp_path):
    """backward(inputs=[head.weight]) computes the logits' gradient but not the head input's: the
    deferred check falls back to a scan when the step is collected."""

    def loss_fn(logits, ids):
        return torch.sqrt(logits - logits.detach()).sum()

    steps, kinds, _ = _run(tmp_path, loss_fn, fault_step=6, backward_inputs=lambda m: [m.head.weight])
    assert steps[6]["bwd_first_nonfinite"]["layer"] == "head"
    assert "bwd_first_nonfinite" not in steps[5]


def test_a_leaf_input_collects_no_hooks(tmp_path):
    """A head fed a parameter directly (a learned query) is scanned in backward as usual, so no
    gradient hook piles up on the persistent tensor step after step."""

    class Query(nn.Module):
        def __init__(self):
            super().__init__()
            torch.manual_seed(0)
            self.q = nn.Parameter(torch.randn(BATCH * SEQ, DIM))
            self.head = nn.Linear(DIM, VOCAB, bias=False)

        def forward(self, ids):
            return self.head(self.q).reshape(BATCH, SEQ, VOCAB)

    model = Query()
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    with lossdoctor.watch(model, opt, log_dir=tmp_path, alerts=False) as mon:
        head = mon.tracer.names.index("head")
        for i in range(8):
            ids = _ids(i)
            opt.zero_grad()
            loss = F.cross_entropy(model(ids).reshape(-1, VOCAB), ids.reshape(-1))
            loss.backward()
            opt.step()
            if i == 6:  # vouched for in forward, its gradient scanned as usual
                tr = mon.tracer
                assert [k for m, k in zip(tr.ev_module, tr.ev_kind) if m == head] == [INPUT, VOUCHED]
                assert [k for m, k in zip(tr.bw_module, tr.bw_kind) if m == head] == [OUTPUT]
            mon.step(loss, batch=ids)
    assert not model.q._backward_hooks
    assert all("bwd_first_nonfinite" not in r for r in _steps(tmp_path))


def test_a_gradient_scanned_just_before_does_not_vouch_for_another(tmp_path):
    """The deferred check reuses the stats of the gradient scanned just before only when it is the
    same tensor: here a side branch's (finite) gradient is scanned between the head's output
    gradient (infinite, from sqrt at 0) and its input's, which is a functional op's output."""

    class Branched(TinyLM):
        def __init__(self):
            super().__init__()
            self.side = nn.Linear(DIM, 1)

        def forward(self, ids):
            h = self.ln(self.mix(self.emb(ids)))
            logits = self.head(h * 1.0)
            return self.side(h), logits  # the model's output event aliases side's, not the head's

    model = Branched()
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    with lossdoctor.watch(model, opt, log_dir=tmp_path, alerts=False) as mon:
        for i in range(7):
            ids = _ids(i)
            opt.zero_grad()
            side, logits = model(ids)
            loss = F.cross_entropy(logits.reshape(-1, VOCAB), ids.reshape(-1)) + side.mean()
            if i == 6:
                loss = loss + torch.sqrt(logits - logits.detach()).sum()
            loss.backward()
            opt.step()
            if i == 6:  # side's gradient was scanned last before the head's deferred check
                assert [mon.tracer.names[m] for m in mon.tracer.bw_module][:2] == ["side", "head"]
            mon.step(loss, batch=ids)
    steps = _steps(tmp_path)
    assert steps[6]["bwd_first_nonfinite"]["layer"] == "head"
    assert "bwd_first_nonfinite" not in steps[5]


def test_the_bound_uses_the_head_input_not_the_tensor_scanned_before_it(tmp_path):
    """An element-wise module vouched for between sampled steps (here one that scales by 1000)
    hands the head an input 1000x larger than the LayerNorm output scanned before it: the bound
    must be taken on the head's own input, which puts it past the range, so the logits (which do
    overflow) are scanned and flagged at every step."""

    class ScaleActivation(nn.Module):  # an "...Activation" leaf: treated as element-wise
        def forward(self, x):
            return x * 1000.0

    class Scaled(TinyLM):
        def __init__(self):
            super().__init__()
            self.act = ScaleActivation()
            with torch.no_grad():
                self.head.weight.copy_(torch.sign(torch.randn(VOCAB, DIM)) * 1e36)

        def forward(self, ids):
            return self.head(self.act(self.ln(self.mix(self.emb(ids)))))

    model = Scaled()
    opt = torch.optim.SGD(model.parameters(), lr=0.0)
    with lossdoctor.watch(model, opt, log_dir=tmp_path, alerts=False) as mon:
        for i in range(7):
            ids = _ids(i)
            opt.zero_grad()
            loss = F.cross_entropy(model(ids).reshape(-1, VOCAB), ids.reshape(-1))
            loss.backward()
            opt.zero_grad()  # the gradients are NaN: keep the weights as they are (0 * NaN = NaN)
            opt.step()
            mon.step(loss, batch=ids)
    steps = _steps(tmp_path)
    assert [r["fwd_first_nonfinite"]["layer"] for r in steps] == ["head"] * 7
