"""One run directory for all ranks: the code lives in `lossdoctor.signals.launch` (the monitor
needs it, and the monitor sits below the integrations); re-exported here under its old name."""

from ..signals.launch import process_start_time, shared_run_name

__all__ = ["process_start_time", "shared_run_name"]
