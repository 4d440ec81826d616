"""The LR a run was told to use was tried first (triage/lr_probe.py, detectors/probes.py).

A nanoGPT-style loop (tests/lr_kit.py): a sweep finds the LR that trains best; a run at 10x it is
lr_too_high with a suggestion the probe measured, within 3x of the sweep's best (never the
update-ratio point that was 60x too low under AdamW); a run at the best LR has no LR finding; with
no replay_fn the report says no probe could run and gives a range. `mon.diagnose()` and
`lossdoctor diagnose DIR` give the same findings, and whatever `watch` announced live is in the
report or withdrawn with a note that names it.
"""

from __future__ import annotations

import json

import pytest

from conftest import run_cli
from lr_kit import final_loss, train

SWEEP = (3e-3, 1e-2, 3e-2)  # brackets the best: the ends train worse than the middle


@pytest.fixture(scope="module")
def best_lr() -> float:
    ends = {lr: final_loss(train(lr)[0]) for lr in SWEEP}
    best = min(ends, key=ends.get)
    assert best not in (SWEEP[0], SWEEP[-1]), ends  # the sweep found the best, not its edge
    return best


def lr_findings(report):
    return [f for f in report.findings if f.cause in ("lr_too_high", "lr_too_low")]


def suggested_lrs(report) -> list[float]:
    out = []
    for f in report.findings:
        for x in f.fixes:
            v = getattr(x, "values", {}) or {}
            if getattr(x, "key", "").startswith("lr.fix") and isinstance(v.get("lr"), (int, float)):
                out.append(float(v["lr"]))
    return out


def one_answer(report, run_dir) -> None:
    """The CLI's diagnosis of the directory is the monitor's, and every cause announced live is
    in it or named by a withdrawal note."""
    p = run_cli("diagnose", run_dir, "--format", "json")
    assert p.returncode in (0, 1), p.stderr
    cli = json.loads(p.stdout)
    mine = report.to_dict()
    assert [(f["cause"], f["step"], f["fixes"]) for f in cli["findings"]] == [
        (f["cause"], f["step"], f["fixes"]) for f in mine["findings"]
    ]
    announced = {json.loads(x)["cause"] for x in (run_dir / "findings.jsonl").read_text().splitlines() if x}
    withdrawn = {
        n["values"].get("cause") for n in mine["notes_data"] if n and n["key"] in ("withdrawn.live", "probe.withdrawn")
    }
    assert announced <= {f.cause for f in report.findings} | withdrawn


@pytest.mark.slow
def test_ten_times_the_best_lr_is_too_high_with_a_probed_lr(best_lr, tmp_path):
    losses, report = train(10 * best_lr, log_dir=tmp_path / "run")
    assert final_loss(losses) > 2 * final_loss(train(best_lr)[0])  # the fault is real
    high = [f for f in report.findings if f.cause == "lr_too_high"]
    assert high, [f.cause for f in report.findings]
    fix = high[0].fixes[0]
    assert fix.key == "lr.fix.probed"
    assert best_lr / 3 <= fix.values["lr"] <= 3 * best_lr
    assert fix.values["loss"] < fix.values["unfixed"]
    assert high[0].fix_checks[0]["verdict"] == "verified" and high[0].fix_checks[0]["fix"] == 0
    table = next(e for e in high[0].evidence if getattr(e, "key", "") == "probe.losses")
    assert len(table.values["trials"]) == 3  # the current LR, x1/3 and x1/10 side by side
    # regression: under AdamW the update ratio gave "set the LR to about 5e-5", 60x below the best
    assert all(lr >= best_lr / 3 for lr in suggested_lrs(report))
    assert not any(
        getattr(x, "key", "") in ("lr.fix.set_ratio", "lr.fix.raise_ratio") for f in report.findings for x in f.fixes
    )
    one_answer(report, tmp_path / "run")
    # the same record had no lower LR beaten the current one: the finding is withdrawn, said with
    # the losses, and no LR is suggested (the reader of probe records, on the record as written)
    path = tmp_path / "run" / "probes" / "probe-lr_too_high.json"
    rec = json.loads(path.read_text())
    for t in rec["probe"]["trials"]:
        t["loss"], t["verdict"] = rec["probe"]["control"]["loss"] * 1.2, "did_not_help"
    path.write_text(json.dumps(rec))
    p = run_cli("diagnose", tmp_path / "run", "--format", "json")
    out = json.loads(p.stdout)
    assert not [f for f in out["findings"] if f["cause"] == "lr_too_high"]
    [note] = [n for n in out["notes_data"] if n and n["key"] == "probe.withdrawn"]
    assert note["values"]["cause"] == "lr_too_high"


@pytest.mark.slow
def test_the_best_lr_has_no_lr_finding(best_lr, tmp_path):
    _, report = train(best_lr, log_dir=tmp_path / "run")
    assert not lr_findings(report), [(f.cause, f.symptom) for f in report.findings]
    one_answer(report, tmp_path / "run")


@pytest.mark.slow
def test_without_replay_no_probe_and_a_range(best_lr, tmp_path):
    _, report = train(10 * best_lr, log_dir=tmp_path / "run", replay=False)
    high = [f for f in report.findings if f.cause == "lr_too_high"]
    assert high
    assert any(getattr(e, "key", "") == "probe.none" for e in high[0].evidence)
    ranges = [x for x in high[0].fixes if getattr(x, "key", "") == "lr.fix.range"]
    assert ranges and ranges[0].values["lo"] < ranges[0].values["hi"] < 10 * best_lr
    assert not [x for x in high[0].fixes if getattr(x, "key", "") in ("lr.fix.set", "lr.fix.set_ratio")]
    one_answer(report, tmp_path / "run")


class MarkovRows:
    """The loop's language as a map-style dataset of rows for the HF Trainer."""

    def __init__(self, n: int) -> None:
        import torch

        from lr_kit import SEQ, batches

        self.rows = torch.cat(batches(n // 8 + 1, seed=2))[:n, :SEQ]

    def __len__(self) -> int:
        return len(self.rows)

    def __getitem__(self, i: int) -> dict:
        return {"input_ids": self.rows[i], "labels": self.rows[i].clone()}


@pytest.mark.slow
def test_hf_trainer_at_ten_times_its_lr_is_not_healthy(tmp_path):
    """A transformers Trainer (GPT-2 from a config, its default AdamW and linear decay) at LR 5e-2,
    10x the 5e-3 that trains it (200 steps: ~1.0 at 5e-3, ~2.1 at 5e-2; 600 steps: 0.30 vs 1.87):
    reported as lr_too_high (was healthy), with a range to try (the callback has no replay_fn, so
    no probe) and no ratio point."""
    import torch
    from transformers import GPT2Config, GPT2LMHeadModel, Trainer, TrainingArguments
    from transformers.utils import logging as hf_logging

    from lossdoctor.integrations.transformers import LossDoctorCallback
    from lr_kit import SEQ, VOCAB

    hf_logging.set_verbosity_error()
    torch.manual_seed(0)
    cfg = GPT2Config(
        n_layer=2,
        n_embd=32,
        n_head=2,
        vocab_size=VOCAB,
        n_positions=SEQ,
        bos_token_id=0,
        eos_token_id=0,
        resid_pdrop=0.0,
        embd_pdrop=0.0,
        attn_pdrop=0.0,
    )
    cb = LossDoctorCallback(log_dir=tmp_path / "ld", alerts=False)
    args = TrainingArguments(
        output_dir=str(tmp_path / "out"),
        per_device_train_batch_size=8,
        max_steps=200,
        learning_rate=5e-2,
        logging_steps=1,
        save_strategy="no",
        report_to=[],
        use_cpu=True,
        disable_tqdm=True,
        dataloader_num_workers=0,
    )
    trainer = Trainer(model=GPT2LMHeadModel(cfg), args=args, train_dataset=MarkovRows(1600), callbacks=[cb])
    trainer.train()
    report = cb.diagnose()
    assert report.status != "healthy"
    high = [f for f in report.findings if f.cause == "lr_too_high"]
    assert high, [(f.cause, f.severity) for f in report.findings]
    assert any(getattr(x, "key", "") == "lr.fix.range" for x in high[0].fixes)
    assert all(lr >= 5e-4 for lr in suggested_lrs(report))  # never 100x below the LR that trains


def test_print_report_is_the_text_report_and_watch_says_where_the_log_is(tmp_path, capsys):
    """What a new user meets: `watch` prints where its run log is (one line, once), and
    `print(mon.diagnose())` prints the same text report as `lossdoctor diagnose`."""
    import torch

    import lossdoctor
    from benchmarks.zoo.models import TinyTransformer
    from lossdoctor.report import render
    from lr_kit import batches, loss_fn

    torch.manual_seed(0)
    model = TinyTransformer(vocab=16, d=16, heads=2, n_layer=1, max_len=16)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    mon = lossdoctor.watch(model, opt, log_dir=tmp_path / "run", alerts=True)
    for b in batches(12):
        loss = loss_fn(model, b)
        opt.zero_grad()
        loss.backward()
        opt.step()
        mon.step(loss, batch=b)
    report = mon.diagnose()
    mon.close()
    err = capsys.readouterr().err
    lines = [x for x in err.splitlines() if str(tmp_path / "run") in x]
    assert len(lines) == 1 and "lossdoctor diagnose" in lines[0]
    assert str(report) == render(report, "text") and "status" in str(report)
    html = report._repr_html_()
    assert html is not None and html.lstrip().lower().startswith("<!doctype html")


def test_a_guess_at_the_nan_step_does_not_outrank_the_op_a_live_incident_saw():
    """Arbitration ranks by evidence and confidence: the curve's 0.3-0.5 guess `nonfinite_data`
    at the first NaN step loses to an incident that saw the op (aten.log, 0.9), and the winner
    keeps the op and layer."""
    from lossdoctor.detectors.engine import arbitrate
    from lossdoctor.findings import Finding

    guess = Finding(
        cause="nonfinite_data", symptom="nonfinite", severity="critical", confidence=0.3, step=40, samples=[2]
    )
    seen = Finding(
        cause="activation_overflow",
        symptom="nonfinite",
        severity="critical",
        confidence=0.9,
        step=40,
        layer="head",
        op="aten.log",
    )
    (top,) = arbitrate([guess, seen])
    assert (top.cause, top.op, top.layer, top.samples) == ("activation_overflow", "aten.log", "head", [2])
    # two observations: the more direct cause still wins, and keeps the other's op
    data = Finding(cause="nonfinite_data", symptom="nonfinite", severity="critical", confidence=0.8, step=40)
    (top,) = arbitrate([data, seen])
    assert (top.cause, top.op) == ("nonfinite_data", "aten.log")


def test_a_run_with_a_grad_scaler_is_not_told_to_add_one():
    from lossdoctor.findings import Finding, Fix
    from lossdoctor.messages import Msg
    from lossdoctor.triage.flow import _has_scaler

    f = Finding(
        cause="activation_overflow",
        symptom="nonfinite",
        severity="critical",
        confidence=0.85,
        step=3,
        fixes=[
            Fix("add_scaler", None, Msg("triage.backward.fix_scaler")),
            Fix.clip(Msg("triage.backward.fix_clip"), max_norm=1.0),
        ],
    )
    _has_scaler([f])  # by the fix's kind: "add a GradScaler" goes
    assert [(x.kind, x.key) for x in f.fixes] == [("clip", "triage.backward.fix_clip_scaled")]
    assert "GradScaler" not in str(f.fixes[0])
