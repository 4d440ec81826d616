"""A perplexity (or bits per character) printed beside the loss names the loss a token
cross-entropy (`sources.loss_kind`): only the relation counts, never the key alone, and with it the
level rules see a language model where a plain print gave an unknown objective."""

from __future__ import annotations

import math

import numpy as np
import pytest

from lossdoctor.detectors.engine import diagnose_runs
from lossdoctor.sources import load_path
from lossdoctor.sources.loss_kind import perplexity_evidence

SEEDS = range(6)


def _lines(loss, fmt: str, step0: int = 2000, every: int = 200) -> str:
    return "".join(
        fmt.format(step=step0 + i * every, loss=x, ppl=math.exp(x), bpc=x / math.log(2)) + "\n"
        for i, x in enumerate(loss)
    )


TXL = "| epoch   1 step {step:8d} | lr 0.000249 | ms/batch 619.56 | loss {loss:5.2f} | ppl {ppl:9.3f}"
XLNET = "I0704 22:15:42.730550 1405 train_gpu.py:303] [{step}] | gnorm 0.25 lr 0.000223 | loss {loss:.2f} | pplx {ppl:.2f}, bpc {bpc:.4f}"
CHARS = "step {step} train loss={loss:.4f} bpc={bpc:.4f}"


@pytest.mark.parametrize("fmt", [TXL, XLNET, CHARS])
def test_a_perplexity_or_bpc_that_follows_the_loss_names_a_cross_entropy(fmt):
    text = _lines([7.42, 7.40, 7.43, 6.9], fmt)
    assert perplexity_evidence(text) == ("bpc" if fmt is CHARS else "perplexity")


def test_a_perplexity_in_bits_or_beside_another_loss_is_no_evidence():
    fairseq = "".join(
        f"| epoch 001 | loss {x:.3f} | nll_loss {x:.3f} | ppl {2**x:.2f} | wps 18000\n" for x in (9.1, 8.2, 7.5)
    )
    assert perplexity_evidence(fairseq) is None  # fairseq's loss is in bits: ppl = 2 ** loss
    other = "".join(f"step {i} loss {x:.3f} ppl {math.exp(x / 2):.2f}\n" for i, x in enumerate((4.0, 3.5, 3.1)))
    assert perplexity_evidence(other) is None
    one = "step 1 loss 7.42 ppl 1670.86\nstep 2 loss 7.40\n"
    assert perplexity_evidence(one) is None  # one line could be chance


@pytest.mark.parametrize("seed", SEEDS)
def test_a_language_model_flat_at_the_unigram_level_is_flagged_when_its_ppl_says_it_is_one(tmp_path, seed):
    rng = np.random.default_rng(seed)
    loss = 7.4 + rng.normal(0, 0.01, 12)
    path = tmp_path / "train.log"
    path.write_text(_lines(loss, TXL))
    runs = load_path(str(path))
    assert runs[0].meta["ce_from"] == "perplexity"
    found = [(f.rule, f.severity) for f in diagnose_runs(runs).findings]
    assert ("differential.lm_untrained", "warning") in found
    path.write_text(_lines(loss, TXL.replace(" | ppl {ppl:9.3f}", "")))  # the same print without its ppl
    runs = load_path(str(path))
    assert "ce_from" not in runs[0].meta
    assert not [f for f in diagnose_runs(runs).findings if f.rule == "differential.lm_untrained"]


@pytest.mark.parametrize("seed", SEEDS)
def test_a_language_model_that_learns_is_no_finding(tmp_path, seed):
    rng = np.random.default_rng(seed)
    loss = 3.0 + 4.5 * np.exp(-np.arange(12) / 3) + rng.normal(0, 0.02, 12)
    path = tmp_path / "train.log"
    path.write_text(_lines(loss, TXL))
    report = diagnose_runs(load_path(str(path)))
    assert not [f for f in report.findings if f.severity in ("warning", "critical")]


# logs that print no loss at all, only a perplexity: the loss is ln(ppl), derived with a note
ONMT_LUA = (
    "Epoch  {epoch},   {i}/  725; acc:   0.00; ppl:  {ppl:.2f}; 5187 src tok/s; 5634 tgt tok/s;     {i} s elapsed"
)
SEQ2SEQ_LUA = "Epoch {epoch} ; Iter {i}/213 ; LR 1.0000 ; Target tokens/s 1265 ; PPL {ppl:.2f} ;"
SOCKEYE = "[INFO:sockeye.training] Epoch[{epoch}] Batch [{i}]\tSpeed: 412.3 samples/sec\tperplexity={ppl:.6f}"


def _ppl_log(fmt: str, ppl: list[float], per_epoch: int = 4) -> str:
    return "".join(
        fmt.format(epoch=1 + k // per_epoch, i=50 * (1 + k % per_epoch), ppl=p) + "\n" for k, p in enumerate(ppl)
    )


@pytest.mark.parametrize("fmt", [ONMT_LUA, SEQ2SEQ_LUA, SOCKEYE])
def test_a_log_printing_only_a_perplexity_is_read_with_its_log_as_the_loss(tmp_path, fmt):
    ppl = [8226.52, 3359.02, 2249.66, 1623.21, 311.73, 197.73, 149.43, 118.44]
    path = tmp_path / "train.log"
    path.write_text(_ppl_log(fmt, ppl))
    (run,) = load_path(path)
    read_ppl = run.col("ppl")[run.logged("ppl")]
    assert read_ppl.tolist() == pytest.approx(ppl)
    assert run.col("loss")[run.logged("loss")].tolist() == pytest.approx([math.log(p) for p in ppl])
    keys = [getattr(n, "key", None) for n in run.notes]
    assert "text.loss_from_ppl" in keys and "text.loss_guessed" not in keys
    assert run.meta["loss_from"] == "perplexity" and run.meta["ce_from"] == "perplexity"


def test_a_nan_perplexity_is_a_nan_loss(tmp_path):
    path = tmp_path / "train.log"
    path.write_text(_ppl_log(ONMT_LUA, [40.1, 30.2, 25.3, 21.0]) + _ppl_log(ONMT_LUA, [float("nan")] * 2))
    (run,) = load_path(path)
    loss = run.col("loss")[run.logged("loss")]
    assert np.isnan(loss[-1]) and loss[0] == pytest.approx(math.log(40.1))


def test_a_loss_beside_a_perplexity_stays_the_printed_loss(tmp_path):
    path = tmp_path / "train.log"
    path.write_text(_lines([7.42, 7.1, 6.8, 6.5, 6.2], TXL))
    (run,) = load_path(path)
    assert run.col("loss")[run.logged("loss")].tolist() == pytest.approx([7.42, 7.1, 6.8, 6.5, 6.2])
    assert "ppl" not in run.cols and run.meta.get("loss_from") is None


def test_a_series_named_ppl_below_one_is_no_perplexity(tmp_path):
    path = tmp_path / "train.log"
    path.write_text(_ppl_log(SEQ2SEQ_LUA, [0.9, 0.7, 0.5, 0.4, 0.3]))
    (run,) = load_path(path)
    assert "ppl" not in run.cols
    assert run.col("loss")[run.logged("loss")].tolist() == pytest.approx([0.9, 0.7, 0.5, 0.4, 0.3])
