"""The monitor never changes the training and never stops for one odd value (issue 27, round 3).

- Reading a weight never computes it: a WGAN-GP whose critic has spectral_norm layers (the old
  hook API and `parametrizations`), weight_norm (both APIs), a custom parametrization, lazy
  modules and a property that computes train byte for byte the same with and without `watch`
  and after `lossdoctor.check`; no parametrization or property runs more often than in the
  plain run.
- An odd tensor in the batch (meta, sparse, nested, complex) costs only its own checks.
- The batch walk is bounded: its count of visited elements is capped, whatever the container size.
- float64 and complex models are monitored, or a note says exactly what was not checked.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
import torch
from torch import nn
from torch.nn.utils import parametrize

import lossdoctor


# --- training byte for byte ---------------------------------------------------------------------
class Counting(nn.Module):
    """A parametrization that counts its calls (a symmetric weight, scaled)."""

    def __init__(self) -> None:
        super().__init__()
        self.calls = 0

    def forward(self, w: torch.Tensor) -> torch.Tensor:
        self.calls += 1
        return w * 0.5


class PropLinear(nn.Module):
    """A layer whose `weight` and `config` are properties that compute (and count)."""

    def __init__(self, n_in: int, n_out: int) -> None:
        super().__init__()
        self.raw = nn.Parameter(torch.randn(n_out, n_in) * 0.3)
        self.bias = nn.Parameter(torch.zeros(n_out))
        self.calls = 0

    @property
    def weight(self) -> torch.Tensor:
        self.calls += 1
        return self.raw * 2.0

    @property
    def config(self) -> dict[str, int]:
        self.calls += 1
        return {"hidden_size": 8}

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return nn.functional.linear(x, self.weight, self.bias)


def _sn_old(m: nn.Module) -> nn.Module:
    return torch.nn.utils.spectral_norm(m)


def _sn_new(m: nn.Module) -> nn.Module:
    return torch.nn.utils.parametrizations.spectral_norm(m)


def _wn_old(m: nn.Module) -> nn.Module:
    return torch.nn.utils.weight_norm(m)


def _wn_new(m: nn.Module) -> nn.Module:
    return torch.nn.utils.parametrizations.weight_norm(m)


def _custom(m: nn.Module) -> nn.Module:
    parametrize.register_parametrization(m, "weight", Counting())
    return m


WRAPS: dict[str, Callable[[nn.Module], nn.Module]] = {
    "spectral_norm_hook": _sn_old,
    "spectral_norm_parametrizations": _sn_new,
    "weight_norm_hook": _wn_old,
    "weight_norm_parametrizations": _wn_new,
    "custom_parametrization": _custom,
}


def _critic(kind: str) -> nn.Module:
    if kind == "lazy":
        return nn.Sequential(nn.LazyLinear(16), nn.LeakyReLU(0.2), nn.LazyLinear(1))
    if kind == "property":
        return nn.Sequential(PropLinear(4, 16), nn.LeakyReLU(0.2), PropLinear(16, 1))
    wrap = WRAPS[kind]
    return nn.Sequential(wrap(nn.Linear(4, 16)), nn.LeakyReLU(0.2), wrap(nn.Linear(16, 1)))


def _calls(model: nn.Module) -> int:
    return sum(getattr(m, "calls", 0) for m in model.modules())


def _state(*objs: Any) -> dict[str, torch.Tensor]:
    out: dict[str, torch.Tensor] = {}
    for k, obj in enumerate(objs):
        if isinstance(obj, nn.Module):
            for name, t in obj.state_dict(keep_vars=True).items():
                out[f"{k}.{name}"] = t.detach().clone()
            for name, m in obj.named_modules():  # the hook APIs' computed weight is a plain attribute
                for attr in ("weight",):
                    t = m.__dict__.get(attr)
                    if isinstance(t, torch.Tensor):
                        out[f"{k}.{name}.{attr}(attribute)"] = t.detach().clone()
        else:
            for i, st in obj.state_dict()["state"].items():
                for name, t in st.items():
                    if isinstance(t, torch.Tensor):
                        out[f"{k}.opt{i}.{name}"] = t.detach().clone()
    return out


def _train_wgan(kind: str, mode: str, tmp_path, steps: int = 6, materialise_first: bool = False):
    """A WGAN-GP (critic D, generator G, gradient penalty): `mode` is "plain", "watch" or "check"
    (lossdoctor.check on the first batch, then watch). Returns every state tensor and the calls."""
    torch.manual_seed(0)
    D = _critic(kind)
    G = nn.Sequential(nn.Linear(2, 16), nn.ReLU(), nn.Linear(16, 4))
    if materialise_first:
        D(torch.zeros(1, 4))
    gen = torch.Generator().manual_seed(1)
    oD = torch.optim.Adam(D.parameters(), 1e-3, betas=(0.5, 0.9))
    oG = torch.optim.Adam(G.parameters(), 1e-3, betas=(0.5, 0.9))
    calls0 = _calls(D)
    mon = None
    if mode == "check":
        x0 = torch.randn(8, 4, generator=torch.Generator().manual_seed(5))
        lossdoctor.check(D, oD, batches=[(x0, torch.zeros(8, 1))], forward=False)
    if mode in ("watch", "check"):
        mon = lossdoctor.watch(D, oD, log_dir=tmp_path / mode)
    for _ in range(steps):
        real = torch.randn(8, 4, generator=gen) + 2
        z = torch.randn(8, 2, generator=gen)
        fake = G(z).detach()
        eps = torch.rand(8, 1, generator=gen)
        x = (eps * real + (1 - eps) * fake).requires_grad_(True)
        grad = torch.autograd.grad(D(x).sum(), x, create_graph=True)[0]
        gp = ((grad.norm(dim=1) - 1) ** 2).mean()
        loss_d = D(fake).mean() - D(real).mean() + 10 * gp
        oD.zero_grad()
        loss_d.backward()
        oD.step()
        if mon is not None:
            mon.step(loss_d, batch={"real": real, "z": z})
        loss_g = -D(G(z)).mean()
        oG.zero_grad()
        loss_g.backward()
        oG.step()
    if mon is not None:
        mon.close()
    return _state(D, G, oD, oG), _calls(D) - calls0, mon


def _assert_identical(a: dict[str, torch.Tensor], b: dict[str, torch.Tensor]) -> None:
    assert a.keys() == b.keys()
    differ = [
        k
        for k in a
        if a[k].dtype != b[k].dtype or a[k].shape != b[k].shape or a[k].numpy().tobytes() != b[k].numpy().tobytes()
    ]
    assert differ == [], differ


@pytest.mark.parametrize("kind", [*WRAPS, "lazy", "property"])
@pytest.mark.parametrize("mode", ["watch", "check"])
def test_training_is_byte_identical_with_computed_weights(kind, mode, tmp_path):
    plain, plain_calls, _ = _train_wgan(kind, "plain", tmp_path)
    watched, watched_calls, mon = _train_wgan(kind, mode, tmp_path)
    _assert_identical(plain, watched)
    assert len(plain) >= 20  # params, buffers (u/v, g/v), both optimizers' moments
    assert watched_calls == plain_calls  # no parametrization or property ran for lossdoctor
    assert [n for n in mon.notes if getattr(n, "key", None) == "monitor.disabled"] == []  # every part ran
    if kind in ("spectral_norm_parametrizations", "weight_norm_parametrizations", "custom_parametrization"):
        assert plain_calls > 0 or kind != "custom_parametrization"
        notes = [n for n in mon.notes if getattr(n, "key", None) == "pcheck.weights_unread"]
        assert len(notes) == 1 and notes[0].values["n"] == 2
        report = mon.diagnose()  # the note reaches the report with its key
        assert "pcheck.weights_unread" in [d and d["key"] for d in report.to_dict()["notes_data"]]
    if kind == "property":
        assert plain_calls > 0
    if kind == "spectral_norm_hook":
        assert any(k.endswith("weight_u") for k in plain)


def test_lazy_module_watched_after_materialisation_is_identical(tmp_path):
    plain, _, _ = _train_wgan("lazy", "plain", tmp_path, materialise_first=True)
    watched, _, mon = _train_wgan("lazy", "watch", tmp_path, materialise_first=True)
    _assert_identical(plain, watched)
    assert mon.notes == []  # materialised: every weight read, every part ran


def test_check_forward_runs_the_parametrization_once_and_restores_the_state():
    """`check`'s one documented forward calls a parametrization as one plain forward does, and
    the spectral_norm u/v buffers it moved are restored."""
    torch.manual_seed(0)
    for wrap in (_custom, _sn_new, _sn_old):
        D = nn.Sequential(wrap(nn.Linear(4, 16)), nn.LeakyReLU(0.2), wrap(nn.Linear(16, 1)))
        opt = torch.optim.Adam(D.parameters(), 1e-3)
        before = _state(D)
        c0 = _calls(D)
        x = torch.randn(8, 4)
        report = lossdoctor.check(D, opt, batches=[(x, torch.zeros(8, 1))], task="regression")
        assert _calls(D) - c0 == (2 if wrap is _custom else 0)  # one forward: each layer once
        after = _state(D)
        if wrap is _sn_old:  # the hook API's cached weight attribute is recomputed by any forward
            before = {k: v for k, v in before.items() if "(attribute)" not in k}
            after = {k: v for k, v in after.items() if "(attribute)" not in k}
        _assert_identical(before, after)
        keys = [n.key for n in report.notes if hasattr(n, "key")]
        assert ("pcheck.weights_unread" in keys) == (wrap is not _sn_old)


# --- an odd tensor in the batch costs only its own checks ------------------------------------------
def _odd(kind: str) -> torch.Tensor:
    if kind == "meta":
        return torch.empty(8, 3, device="meta")
    if kind == "sparse":
        return torch.eye(8).to_sparse()
    if kind == "nested":
        return torch.nested.nested_tensor([torch.ones(2), torch.ones(3)])
    if kind == "quantized":
        return torch.quantize_per_tensor(torch.ones(8, 2), 0.1, 0, torch.quint8)
    raise ValueError(kind)


def _small_run(
    tmp_path,
    batch_fn: Callable[[int, torch.Tensor, torch.Tensor], Any],
    steps: int = 20,
    dtype: torch.dtype = torch.float32,
):
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(4, 8), nn.Tanh(), nn.Linear(8, 1)).to(dtype)
    opt = torch.optim.SGD(model.parameters(), lr=0.01)

    def replay(m: nn.Module, b: Any) -> torch.Tensor:  # a replay function: triage's snapshot ring is on
        x, y = (b["x"], b["y"]) if isinstance(b, dict) else (b[0], b[1])
        return (m(x) - y).abs().pow(2).mean().real

    mon = lossdoctor.watch(model, opt, log_dir=tmp_path / "run", replay_fn=replay)
    for s in range(steps):
        x, y = torch.randn(8, 4, dtype=dtype), torch.randn(8, 1, dtype=dtype)
        loss = (model(x) - y).abs().pow(2).mean().real
        opt.zero_grad()
        loss.backward()
        opt.step()
        mon.step(loss, batch=batch_fn(s, x, y))
    mon.close()
    from lossdoctor.sources.rundir import read_run_dir

    return mon, read_run_dir(tmp_path / "run")[0]


@pytest.mark.parametrize("kind", ["meta", "sparse", "nested", "quantized"])
def test_an_unreadable_tensor_in_the_batch_costs_only_its_own_checks(kind, tmp_path):
    def batch(s: int, x: torch.Tensor, y: torch.Tensor) -> dict[str, Any]:
        if s == 12:
            x = x.clone()
            x[3, 1] = float("nan")  # the rest of the batch is still checked
        return {"x": x, "y": y, "odd": _odd(kind)}

    mon, run = _small_run(tmp_path, batch)
    assert len(run.steps) == 20  # every step recorded
    bad = run.cols["batch_nonfinite"]
    assert list(bad[:12]) == [0] * 12 and bad[12] == 1
    skipped = [n for n in mon.notes if getattr(n, "key", None) == "batch.tensor_skipped"]
    assert [(n.values["key"], n.values["kind"]) for n in skipped] == [("odd", kind)]  # said once
    assert [n for n in mon.notes if getattr(n, "key", None) == "monitor.disabled"] == []
    assert mon.preflight is not None and mon.preflight.enabled  # preflight on
    assert mon.triage.enabled and mon.triage.ring is not None and mon.triage.ring.enabled  # triage on
    if kind == "meta":  # its batches cannot be copied: replay of those steps only is lost
        assert [getattr(n, "key", None) for n in mon.triage.ring.notes] == ["triage.ring.batch_unreadable"]


def test_a_complex_input_is_checked_through_its_real_view(tmp_path):
    def batch(s: int, x: torch.Tensor, y: torch.Tensor) -> dict[str, Any]:
        z = torch.complex(x, x.flip(0))
        if s == 7:
            z[2, 0] = complex(float("nan"), 0.0)
        return {"x": x, "y": y, "z": z.t().contiguous().t()}  # a non-contiguous complex view too

    mon, run = _small_run(tmp_path, batch)
    assert len(run.steps) == 20
    assert run.cols["batch_nonfinite"][7] == 1 and run.cols["batch_nonfinite"][6] == 0
    assert [n for n in mon.notes if getattr(n, "key", None) in ("batch.tensor_skipped", "monitor.disabled")] == []


# --- bounds: the batch walk is capped ---------------------------------------------------------------
class CountingDict(dict):
    """A real dict that counts the items handed out by `items()` (what a walk reads)."""

    def __init__(self, *a: Any, **k: Any) -> None:
        super().__init__(*a, **k)
        self.read = 0

    def items(self):  # type: ignore[override]
        for kv in super().items():
            self.read += 1
            yield kv


def test_batch_walk_count_is_capped_whatever_the_container_size():
    from lossdoctor.signals.batch import WALK, walk_batch
    from lossdoctor.triage.batches import KEEP, unkeepable

    for n in (10, 1_000, 100_000):
        big = [torch.zeros(2)] * 3 + [{"a": i} for i in range(n)]
        w = walk_batch(big)
        assert w.visited == min(2 * n + 3, WALK.max_visits) and w.cut == (2 * n + 3 > WALK.max_visits)
        w = walk_batch(list(range(n)))  # a list of plain values: read no further than its first
        assert w.visited == 1 and not w.cut
        assert (unkeepable(list(range(n))) is not None) == (n > KEEP.max_visits)  # the copy needs all
        d = CountingDict({f"k{i}": torch.tensor([i]) for i in range(n)})
        w = walk_batch(d)
        assert len(w.items) == min(n, WALK.max_tensors)
        assert d.read <= WALK.max_tensors + 1  # items are read lazily, never all copied
        d.read = 0
        assert (unkeepable(d) is not None) == (n > min(KEEP.max_visits, KEEP.max_tensors))
        assert d.read <= KEEP.max_visits + 1
    nested = {"a": {f"k{i}": {f"j{j}": j for j in range(50)} for i in range(50)}, "b": torch.ones(2)}
    w = walk_batch(nested)
    assert w.visited == WALK.max_visits and w.cut  # all levels together
    texts = {"text": ["a sample"] * 1000, "input_ids": torch.ones(1000, 4, dtype=torch.long)}
    assert [k for k, _ in walk_batch(texts).items] == ["input_ids"]  # 1,000 texts cost one visit


def test_huge_batch_containers_are_recorded_with_a_note(tmp_path):
    wide = [{"i": i} for i in range(100_000)]

    def batch(s: int, x: torch.Tensor, y: torch.Tensor) -> Any:
        return [x, y, *wide]

    mon, run = _small_run(tmp_path, batch)
    assert len(run.steps) == 20 and list(run.cols["batch_nonfinite"]) == [0] * 20  # x and y checked
    keys = [getattr(n, "key", None) for n in mon.notes]
    assert keys.count("batch.walk_capped") == 1 and "monitor.disabled" not in keys
    assert [getattr(n, "key", None) for n in mon.triage.ring.notes] == ["triage.ring.batch_too_wide"]


# --- hooks left after an exception -------------------------------------------------------------------
HOOK_DICTS = (
    "_forward_hooks",
    "_forward_pre_hooks",
    "_backward_hooks",
    "_backward_pre_hooks",
    "_state_dict_hooks",
    "_load_state_dict_pre_hooks",
)


def _hook_count(model: nn.Module, *optimizers: Any) -> int:
    n = sum(len(getattr(m, a, None) or {}) for m in model.modules() for a in HOOK_DICTS)
    n += sum(len(getattr(p, "_post_accumulate_grad_hooks", None) or {}) for p in model.parameters())
    n += sum(len(getattr(p, "_backward_hooks", None) or {}) for p in model.parameters())
    for opt in optimizers:
        opt = getattr(opt, "optimizer", opt)  # accelerate's wrapper: the torch optimizer inside
        n += len(opt._optimizer_step_pre_hooks) + len(opt._optimizer_step_post_hooks)
    return n


def _hf_trainer(model: nn.Module, out, steps: int, callbacks: list[Any], accum: int = 1):
    from transformers import Trainer, TrainingArguments

    from test_integrations_transformers import TokenData

    args = TrainingArguments(
        output_dir=str(out),
        per_device_train_batch_size=4,
        max_steps=steps,
        gradient_accumulation_steps=accum,
        logging_steps=1,
        save_strategy="no",
        report_to=[],
        use_cpu=True,
        disable_tqdm=True,
        dataloader_num_workers=0,
    )
    return Trainer(model=model, args=args, train_dataset=TokenData(64), callbacks=callbacks)


@pytest.mark.slow
@pytest.mark.parametrize("where", ["on_step_end", "on_substep_end"])
def test_interrupted_hf_trainer_leaves_nothing_after_the_next_run(where, tmp_path):
    """Ctrl-C (a KeyboardInterrupt from a callback at step 2) ends `trainer.train()` without
    on_train_end; forwards after it keep no buffer bounded-less; the next Trainer run on the same
    model (a new callback) closes the orphaned monitor, and after it ends every hook is gone."""
    pytest.importorskip("transformers")
    from transformers import TrainerCallback

    from lossdoctor.integrations.transformers import LossDoctorCallback
    from test_integrations_transformers import gpt2

    class CtrlC(TrainerCallback):
        def on_step_end(self, args: Any, state: Any, control: Any, **kw: Any) -> None:
            if where == "on_step_end" and state.global_step == 2:
                raise KeyboardInterrupt

        def on_substep_end(self, args: Any, state: Any, control: Any, **kw: Any) -> None:
            if where == "on_substep_end" and state.global_step == 2:
                raise KeyboardInterrupt

    model = gpt2()
    before = _hook_count(model)
    cb1 = LossDoctorCallback(log_dir=tmp_path / "ld1", alerts=False)
    t1 = _hf_trainer(model, tmp_path / "o1", 6, [cb1, CtrlC()], accum=2)
    with pytest.raises(KeyboardInterrupt):
        t1.train()
    assert _hook_count(model) > before and "compute_loss" in vars(t1)  # what HF leaves behind
    tracer, probe = cb1.monitor.tracer, cb1.probe
    tracer.max_events = probe.max_items = 64  # the caps, small enough to reach here
    sizes = []
    ids = torch.randint(0, 64, (2, 16))
    for r in range(3):
        model.train()
        for _ in range(80 if r == 0 else 10):  # training-mode forwards with no trainer running
            model(input_ids=ids, labels=ids)
        with torch.no_grad():
            model.eval()
            model(input_ids=ids)
        sizes.append((len(tracer.ev_module), len(tracer.bw_module), len(probe.items), len(probe.objective)))
    assert sizes[0] == sizes[1] == sizes[2]  # bounded: more forwards grow nothing
    assert max(sizes[0]) <= 64
    if where == "on_step_end":  # between steps: nothing is traced at all
        assert sizes[0] == (0, 0, 0, 0)

    cb2 = LossDoctorCallback(log_dir=tmp_path / "ld2", alerts=False)
    t2 = _hf_trainer(model, tmp_path / "o2", 3, [cb2])
    t2.train()
    assert cb1.monitor.closed and "compute_loss" not in vars(t1)  # the orphan was closed first
    assert "compute_loss" not in vars(t2)  # not wrapped twice, and unwrapped at the end
    assert _hook_count(model, t1.optimizer, t2.optimizer) == before
    from lossdoctor.sources.rundir import read_run_dir

    assert len(read_run_dir(tmp_path / "ld2")[0].steps) == 3
    assert len(read_run_dir(tmp_path / "ld1")[0].steps) == 2  # the interrupted run's log is whole


# --- float64 and complex models ---------------------------------------------------------------------
def _dtype_run(tmp_path, dtype: torch.dtype, bad_step: int | None = None):
    def batch(s: int, x: torch.Tensor, y: torch.Tensor) -> dict[str, Any]:
        if s == bad_step:
            x = x.clone()
            x[2, 1] = float("inf")
        return {"x": x, "y": y}

    return _small_run(tmp_path / str(dtype), batch, steps=14, dtype=dtype)


@pytest.mark.parametrize("dtype", [torch.float64, torch.complex64])
def test_float64_and_complex_models_are_fully_monitored(dtype, tmp_path):
    _, ref = _dtype_run(tmp_path, torch.float32)
    mon, run = _dtype_run(tmp_path, dtype)
    measured = {k for k, v in run.cols.items() if (v == v).any()}  # not all NaN
    expected = {k for k, v in ref.cols.items() if (v == v).any()}
    assert expected <= measured, expected - measured  # activations, gradients, updates, Adam eps...
    assert {"act_absmax", "grad_norm", "update_ratio", "param_norm", "batch_nonfinite"} <= measured
    assert run.layers is not None and len(run.layers.steps) > 0
    assert [n for n in mon.notes if getattr(n, "key", None) == "monitor.disabled"] == []
    # a non-finite input is found and named, in this dtype too (triage's op-level trace included)
    mon, run = _dtype_run(tmp_path / "bad", dtype, bad_step=9)
    report = mon.diagnose()
    assert report.primary is not None and report.primary.cause == "nonfinite_data" and report.primary.step == 9


@pytest.mark.parametrize("dtype", [torch.float64, torch.complex64])
def test_check_reads_float64_and_complex_weights(dtype):
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(64, 64), nn.Tanh(), nn.Linear(64, 64), nn.Tanh(), nn.Linear(64, 1)).to(dtype)
    with torch.no_grad():
        for m in model:
            if isinstance(m, nn.Linear):
                m.weight.normal_(0, 1.0)  # std 1 with fan_in 64: a gain of 8 a layer
    x = torch.randn(16, 64, dtype=dtype)
    report = lossdoctor.check(
        model,
        torch.optim.SGD(model.parameters(), lr=0.01),
        batches=[(x, torch.randn(16, 1, dtype=dtype))],
        task="regression",
    )
    keys = [getattr(n, "key", None) for n in report.notes]
    assert "engine.internal_error" not in keys and "pcheck.forward_failed" not in keys
    assert report.primary is not None and report.primary.cause == "bad_init"


class BrokenProbe:
    """A real add-on probe whose flush fails (a part of the monitor that switches itself off)."""

    name = "broken probe"

    def __init__(self) -> None:
        self.enabled = True

    def flush(self, packer: Any, step: Any) -> None:
        raise RuntimeError("cannot measure this")

    def interpret(self, values: Any, ctx: Any, rec: Any) -> None:
        pass

    def remove(self) -> None:
        pass


def test_a_part_that_switched_itself_off_makes_the_run_inconclusive_not_healthy(tmp_path):
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(4, 8), nn.Tanh(), nn.Linear(8, 1))
    opt = torch.optim.Adam(model.parameters(), lr=3e-3)
    w_true = torch.randn(4, 1)
    gen = torch.Generator().manual_seed(0)
    for broken in (False, True):
        mon = lossdoctor.watch(model, opt, log_dir=tmp_path / str(broken), alerts=False)
        if broken:
            mon.add_probe(BrokenProbe())
        for _ in range(120):
            x = torch.randn(32, 4, generator=gen)
            loss = (model(x) - x @ w_true).pow(2).mean()
            opt.zero_grad()
            loss.backward()
            opt.step()
            mon.step(loss, batch={"x": x})
        mon.close()
        report = mon.diagnose()
        assert report.findings == []
        assert report.status == ("inconclusive" if broken else "healthy")
        keys = [d and d["key"] for d in report.to_dict()["notes_data"]]
        assert ("monitor.disabled" in keys) == broken


CHECK_SETUP = """
import torch

def lossdoctor_setup():
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.ReLU(), torch.nn.Linear(8, 2))
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    x, y = torch.randn(16, 5), torch.randint(0, 2, (16,))  # 5 features for a 4-input model
    return {"model": model, "optimizer": opt, "batches": [(x, y)], "task": "classification"}

def skip_forward():
    return {**lossdoctor_setup(), "forward": False}
"""


@pytest.mark.slow
def test_check_whose_forward_raises_reports_the_error_and_exits_2(tmp_path):
    import json

    from conftest import run_cli

    (tmp_path / "setup.py").write_text(CHECK_SETUP)
    out = run_cli("check", "--config", "setup.py", "--format", "json", cwd=tmp_path)
    assert out.returncode == 2, out.stderr
    report = json.loads(out.stdout)  # the report is written, then the one-line error
    assert report["status"] == "inconclusive"
    data = [d for d in report["notes_data"] if d and d["key"] == "pcheck.forward_failed"]
    assert len(data) == 1 and data[0]["values"]["error"].startswith("RuntimeError: mat1 and mat2 shapes")
    last = out.stderr.splitlines()[-1]
    assert last.startswith("lossdoctor: setup.py: the model's forward on the first batch raised RuntimeError")
    assert "Traceback" not in out.stderr
    out = run_cli("check", "--config", "setup.py:skip_forward", "--format", "json", cwd=tmp_path)
    assert out.returncode == 0 and json.loads(out.stdout)["status"] == "healthy"  # forward skipped on request
