"""Preflight findings joined with the engine's: the code lives in `detectors.merge` (the offline
engine needs it, and the detectors sit below preflight); re-exported here for preflight's callers."""

from ..detectors.merge import merge_findings, ordered

__all__ = ["merge_findings", "ordered"]
