"""One run directory for all ranks, agreed without a collective.

Every rank calls `watch`; when none is given a `log_dir`, each must still pick the same directory
(the monitor then writes `rank-N/` inside it). A timestamp taken by each rank would differ, and a
collective at start-up would hang a rank whose peers never call `watch`. So the name comes from
what the launcher put in the environment, identical on every rank:

- one node (``torchrun`` on one machine, ``torch.multiprocessing.spawn``): all ranks are children
  of the same launcher process, so its pid and start time name the run, unique and time-sorted;
- several nodes: the scheduler's job id (``SLURM_JOB_ID``/``SLURM_STEP_ID``) or torchrun's
  rendezvous id (``TORCHELASTIC_RUN_ID``, unless it is the default ``none``).

Torch-free: it only reads the environment and ``/proc``.
"""

from __future__ import annotations

import os
import re
import time
from collections.abc import Mapping


def shared_run_name(env: Mapping[str, str] | None = None, ppid: int | None = None) -> str | None:
    """The run directory name every rank of this launch derives, or None when the environment does
    not identify the launch (several nodes without a job or rendezvous id: pass `log_dir`)."""
    env = os.environ if env is None else env
    world, local_world = env.get("WORLD_SIZE"), env.get("LOCAL_WORLD_SIZE")
    multi_node = world is not None and local_world is not None and world != local_world
    if multi_node:
        if env.get("SLURM_JOB_ID"):
            return _safe(f"slurm-{env['SLURM_JOB_ID']}.{env.get('SLURM_STEP_ID', '0')}")
        run_id = env.get("TORCHELASTIC_RUN_ID")
        if run_id and run_id != "none":
            return _safe(f"torchrun-{run_id}")
        return None
    ppid = os.getppid() if ppid is None else ppid
    started = process_start_time(ppid)
    stamp = time.strftime("%Y%m%d-%H%M%S", time.localtime(started)) if started else time.strftime("%Y%m%d")
    return f"{stamp}-launcher{ppid}"


def process_start_time(pid: int) -> float | None:
    """Start time (epoch seconds) of a process, from /proc on Linux; None elsewhere."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            stat = f.read().decode()
        # the command name (field 2) may hold spaces and parentheses: split after its last ')'
        fields = stat[stat.rindex(")") + 2 :].split()
        ticks = int(fields[19])  # field 22 of the whole line: start time in clock ticks since boot
        with open("/proc/stat", "rb") as f:
            btime = next(int(line.split()[1]) for line in f.read().decode().splitlines() if line.startswith("btime "))
        return btime + ticks / os.sysconf("SC_CLK_TCK")
    except (OSError, ValueError, StopIteration, IndexError):
        return None


def _safe(name: str) -> str:
    return re.sub(r"[^A-Za-z0-9._-]+", "_", name)[:120]
