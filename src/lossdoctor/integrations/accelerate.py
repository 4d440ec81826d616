"""Accelerate: nothing to install, `watch` the prepared model and optimizer (see the docs'
integrations page). The one thing the monitor reads from it, the gradient-sync flag, is in
`lossdoctor.signals.accelerate` (the monitor sits below the integrations); re-exported here."""

from ..signals.accelerate import sync_gradients_flag

__all__ = ["sync_gradients_flag"]
