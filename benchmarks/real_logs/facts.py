"""Does a reader's output hold the values the source shows? One check, used by the corpus test
(`tests/test_real_logs.py`) and by the scorer (a log whose facts do not hold is not counted as read).

The facts of an entry (`expect` in manifest.json; the corpus README says what each means):
`n_steps_at_least`, `points` ([step, column, value]), `rows` ([k, column, value], k-th logged value
in step order), `first_nonfinite_step`, `n_skipped_at_least`. A column that is no `Run` column is
looked up in `events["loss_components"]` (component losses kept apart from the total); `val_loss` is
`eval_loss`. A value "nan" must come back as a logged NaN, any other value within 1e-6 relative.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np


def main_run(runs: list) -> Any:
    """The run with the most steps (a log printed by several ranks may come back as several runs)."""
    return max(runs, key=len)


def nonfinite_rows(run) -> np.ndarray:
    """The rows whose logged loss or grad norm is NaN/Inf, or that were skipped; in a log that prints
    no total loss (a GAN's two adversaries, kept as components), the rows where a component is."""
    bad = np.zeros(len(run), dtype=bool)
    for name in ("loss", "grad_norm"):
        bad |= run.logged(name) & ~np.isfinite(run.col(name))
    if not run.has("loss"):
        comps = _components(run)
        broken = {s for s, c in comps.items() if any(not math.isfinite(float(v)) for v in c.values())}
        bad |= np.isin(run.steps, list(broken))
    if "skipped" in run.cols:
        bad |= run.col("skipped") == 1
    return bad


def first_nonfinite_step(run) -> int | None:
    bad = nonfinite_rows(run)
    order = np.argsort(run.steps, kind="stable")
    hits = [int(run.steps[i]) for i in order if bad[i]]
    return hits[0] if hits else None


#: names a fact may give a column by, for the `Run` column that holds it: Keras's and most scripts' `val_loss`
#: is the contract's `eval_loss` (the evaluation loss, kept apart from the training loss)
_COLUMN_OF = {"val_loss": "eval_loss"}


def _components(run) -> dict:
    return run.events.get("loss_components", {}) or {}


def _component_name(comp: dict, name: str) -> str:
    """The key the reader keeps a printed component under: the readers key components by the name in lower
    case (`CrossEntropy=` is `crossentropy`), the general text reader with its spaces as underscores
    (`generator loss` is `generator_loss`), while the facts give the name as the source prints it."""
    if any(name in c for c in comp.values()):
        return name
    for key in (" ".join(name.lower().split()), "_".join(name.lower().split())):
        if any(key in c for c in comp.values()):
            return key
    return name


def _value_error(got: float, want, where: str) -> str | None:
    if want == "nan":
        return None if math.isnan(got) else f"{where}: expected NaN, got {got}"
    if math.isclose(got, float(want), rel_tol=1e-6, abs_tol=1e-12):
        return None
    return f"{where}: expected {want}, got {got}"


def _point_error(run, step: int, name: str, want) -> str | None:
    name = _COLUMN_OF.get(name, name)
    comp = _components(run)
    if name not in run.cols:
        name = _component_name(comp, name)
    if name not in run.cols and name in comp.get(step, {}):
        return _value_error(float(comp[step][name]), want, f"{name} at step {step}")
    steps = [int(s) for s in run.steps]
    if step not in steps:
        return f"step {step} missing (read steps {steps[:5]}...{steps[-5:]})"
    i = steps.index(step)
    if not run.logged(name)[i]:
        return f"{name} not logged at step {step}"
    return _value_error(float(run.col(name)[i]), want, f"{name} at step {step}")


def _row_error(run, k: int, name: str, want) -> str | None:
    name = _COLUMN_OF.get(name, name)
    comp = _components(run)
    if name not in run.cols:
        name = _component_name(comp, name)
    if name not in run.cols and any(name in c for c in comp.values()):
        values = np.array([float(comp[s][name]) for s in sorted(comp) if name in comp[s]])
    else:
        order = np.argsort(run.steps, kind="stable")
        values = run.col(name)[order][run.logged(name)[order]]
    if not -len(values) <= k < len(values):
        return f"{name}: only {len(values)} values logged, wanted row {k}"
    return _value_error(float(values[k]), want, f"{name} row {k}")


def fact_failures(entry: dict[str, Any], runs: list) -> list[str]:
    """Every fact of the entry the runs get wrong (empty: read with the source's values)."""
    exp = entry["expect"]
    run = main_run(runs)
    out: list[str] = []
    if len(run) < exp["n_steps_at_least"]:
        out.append(f"read {len(run)} steps, expected at least {exp['n_steps_at_least']}")
    reinterpreted = False
    for fact in exp.get("points", []):
        reinterpreted |= len(fact) == 4
        out.append(_point_error(run, int(fact[0]), fact[1], fact[2]))
    for fact in exp.get("rows", []):
        reinterpreted |= len(fact) == 4
        out.append(_row_error(run, int(fact[0]), fact[1], fact[2]))
    if reinterpreted and not any("logging_nan_inf_filter" in note for note in run.notes):
        out.append("a logged 0.0 read as NaN without a note saying so")  # the reader must tell the user
    if "first_nonfinite_step" in exp and first_nonfinite_step(run) != exp["first_nonfinite_step"]:
        out.append(f"first non-finite step {first_nonfinite_step(run)}, expected {exp['first_nonfinite_step']}")
    if "n_skipped_at_least" in exp:
        n = int((run.col("skipped") == 1).sum())
        if n < exp["n_skipped_at_least"]:
            out.append(f"{n} skipped steps, expected at least {exp['n_skipped_at_least']}")
    return [x for x in out if x]
