"""The zoo's verified-fixes table (benchmarks/zoo/fixcheck.py) over real scenario runs: per fault
family, the top fix's verdict counted and the cost read from the incident records."""

from __future__ import annotations

import pytest

from benchmarks.zoo.fixcheck import family, family_rows, per_family, top_fix_verdict
from benchmarks.zoo.run import load_scenarios, run_all


@pytest.fixture(scope="module")
def scores(tmp_path_factory):
    import torch

    scns = load_scenarios()
    n = torch.get_num_threads()
    try:
        replayed = run_all(
            [scns["mlp_nan_in_features"], scns["mlp_sgd_lr_x100"]],
            1,
            tmp_path_factory.mktemp("zoo_replay"),
            progress=False,
            replay_all=True,
        )
        plain = run_all([scns["mlp_sgd_lr_x100"]], 1, tmp_path_factory.mktemp("zoo_plain"), progress=False)
    finally:
        torch.set_num_threads(n)
    return replayed, plain


def test_the_nan_feature_family_has_its_top_fix_verified_with_its_cost(scores):
    replayed, _ = scores
    nan = next(s for s in replayed if s.scenario == "mlp_nan_in_features")
    assert nan.verify["statuses"] == ["checked"] and nan.verify["top_cause"] == "nonfinite_data"
    assert nan.verify["top_fix_verdict"] == "verified" and nan.verify["any_verified"]
    rows = {r["family"]: r for r in family_rows(replayed)}
    row = rows[family(nan.causes)]
    assert (row["runs"], row["verified_runs"], row["verified"], row["no_verdict"]) == (1, 1, 1, 0)
    assert row["seconds"][0] > 0 and row["steps"][0] > 20 and row["rss"][0] >= 0
    table = per_family(replayed)
    assert "| nonfinite_data | 1 | 1 | 100% (1/1) | 1/1 |" in table


def test_rows_add_up_and_the_all_row_sums_the_families(scores):
    replayed, _ = scores
    rows = family_rows(replayed)
    assert rows[-1]["family"] == "all faulty runs" and len(rows) == 3
    for r in rows:
        assert r["verified"] + r["did_not_help"] + r["unchecked"] + r["no_verdict"] == r["verified_runs"], r
    for key in ("runs", "verified_runs", "verified", "did_not_help", "unchecked", "no_verdict", "any_verified"):
        assert rows[-1][key] == sum(r[key] for r in rows[:-1]), key


def test_without_a_replay_fn_there_is_no_verification_to_count(scores):
    _, plain = scores
    [s] = plain
    assert s.verify["statuses"] == [] and s.verify["seconds"] is None
    [row] = family_rows(plain)
    assert row["verified_runs"] == 0 and row["runs"] == 1
    assert per_family(plain).splitlines()[-1].endswith("| 1 | 0 | – | – | – | – | – | – | – | – |")


def test_top_fix_verdict_reads_the_first_alarm_and_its_first_fix():
    checks = [{"fix": 1, "verdict": "did_not_help"}, {"fix": 0, "verdict": "verified"}]
    report = {
        "findings": [
            {"cause": "lr_too_low", "severity": "info"},
            {"cause": "grad_explosion", "severity": "critical", "fix_checks": checks},
        ]
    }
    assert top_fix_verdict(report) == ("grad_explosion", "verified")
    assert top_fix_verdict({"findings": [{"cause": "noisy_data", "severity": "warning"}]}) == ("noisy_data", None)
    assert top_fix_verdict({"findings": []}) == (None, None)
