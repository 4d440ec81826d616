"""The fault zoo: faulty training runs and healthy controls, each watched by the real
`lossdoctor.watch` and diagnosed by the real engine, scored against sets of acceptable causes.

Run it with `python -m benchmarks.zoo` (see `run.py` for the options).
"""
