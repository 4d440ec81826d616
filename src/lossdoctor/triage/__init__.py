"""Incident triage: snapshots, replay, op-level localisation (filled in below)."""
