"""Shared test fixtures.

Tests are real: real torch models and optimizers, real trainers, real files. `run_cli` runs the
CLI as a user would, in a subprocess, against this checkout's sources.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import settings

# Fuzz tests explore new random inputs on every local run; CI replays the same derandomised set,
# so that a red CI always points at a change, never at the luck of the draw.
settings.register_profile("ci", derandomize=True, database=None)
if os.environ.get("CI"):
    settings.load_profile("ci")

ROOT = Path(__file__).resolve().parents[1]
SRC = ROOT / "src"

# Reports and live alerts follow the locale when no language is asked for: the suite runs in an
# English locale whatever the machine's, and the language tests set theirs explicitly.
for _var in ("LC_ALL", "LC_MESSAGES", "LANGUAGE"):
    os.environ.pop(_var, None)
os.environ["LANG"] = "C.UTF-8"


def cli_env() -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = str(SRC) + os.pathsep + env.get("PYTHONPATH", "")
    env.setdefault("PYTHONHASHSEED", "0")
    return env


def run_cli(
    *args: str, timeout: float = 120, cwd: str | os.PathLike[str] | None = None, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess:
    """`env`: the environment to run in (the PYTHONPATH of this checkout is added to it)."""
    full = cli_env() if env is None else {**env, "PYTHONPATH": cli_env()["PYTHONPATH"]}
    return subprocess.run(
        [sys.executable, "-m", "lossdoctor", *map(str, args)],
        capture_output=True,
        text=True,
        timeout=timeout,
        env=full,
        cwd=cwd,
    )


@pytest.fixture(autouse=True)
def _torch_threads():
    """Two cores are shared by everything on CI: keep torch to one thread per test process."""
    try:
        import torch
    except ImportError:
        yield
        return
    n = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(n)


#: tracker libraries that keep their state in the process's environment: `mlflow.set_experiment`
#: exports MLFLOW_EXPERIMENT_ID, which a later test's subprocess would inherit (pointing into a
#: store that test never made)
_TRACKER_ENV = ("MLFLOW_", "WANDB_")


@pytest.fixture(autouse=True)
def _tracker_state():
    """Each test starts with the trackers' environment and MLflow's fluent state as the suite found them."""
    before = {k: v for k, v in os.environ.items() if k.startswith(_TRACKER_ENV)}
    yield
    for k in [k for k in os.environ if k.startswith(_TRACKER_ENV)]:
        if k not in before:
            del os.environ[k]
    os.environ.update(before)
    fluent = sys.modules.get("mlflow.tracking.fluent")
    if fluent is not None and hasattr(fluent, "_active_experiment_id"):
        fluent._active_experiment_id = None
