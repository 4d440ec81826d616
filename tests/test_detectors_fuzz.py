"""The detectors on arbitrary step records: no detector may crash (a crash silently hides its
check), and a run that went non-finite is never reported healthy."""

from __future__ import annotations

import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from lossdoctor.detectors.engine import diagnose_runs
from lossdoctor.records import from_columns

values = st.one_of(
    st.floats(allow_nan=True, allow_infinity=True, width=32),
    st.sampled_from([0.0, 1.0, -1.0, 1e-30, 1e30, float("nan"), float("inf")]),
)
COLS = (
    "loss",
    "grad_norm",
    "lr",
    "scale",
    "skipped",
    "update_ratio",
    "frozen_frac",
    "eps_dominated",
    "label_ignored_frac",
    "label_empty_samples",
    "batch_size",
    "input_absmax",
    "act_absmax",
    "act_range_frac",
    "grad_nonfinite",
    "batch_nonfinite",
)


@st.composite
def runs(draw):
    n = draw(st.integers(1, 120))
    cols = draw(st.sets(st.sampled_from(COLS), min_size=1))
    data = {}
    for c in cols:
        kind = draw(st.sampled_from(["random", "const", "ramp"]))
        if kind == "random":
            data[c] = np.array(draw(st.lists(values, min_size=n, max_size=n)), dtype=float)
        elif kind == "const":
            data[c] = np.full(n, draw(values))
        else:
            data[c] = np.geomspace(1e-3, draw(st.floats(1e-3, 1e9)), n)
    return from_columns(np.arange(n), data)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(runs())
def test_detectors_never_crash(run):
    with np.errstate(all="ignore"):
        report = diagnose_runs([run])
    errors = [n for n in report.notes if "internal error" in n]
    assert not errors, errors
    loss = run.col("loss")
    if (
        run.has("loss")
        and not np.isfinite(loss[run.logged("loss")]).all()
        and not run.has("scale")
        and not run.has("skipped")
    ):
        assert report.status == "critical"


def test_a_run_that_went_nonfinite_stays_critical_when_its_only_alarm_is_explained_away():
    """Found by the fuzzer: an early 4x loss jump (lr_too_high) is explained away by a bad_init
    warning; the NaN two steps later must still be a critical finding."""
    run = from_columns(
        np.arange(4),
        {
            "loss": np.array([0.25, 0.0, 1.0, np.inf]),
            "act_absmax": np.array([10001.0, 0, 0, 0]),
            "update_ratio": np.zeros(4),
        },
    )
    report = diagnose_runs([run])
    assert report.status == "critical"
    assert any(f.severity == "critical" and f.step == 3 for f in report.findings)
