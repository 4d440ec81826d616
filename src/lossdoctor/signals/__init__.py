"""Signals: statistics collected on the device during training (torch required).

tracer      forward/backward module outputs: min/max (non-finite flag, magnitude), RMS when sampled
gradients   per-parameter gradient norms at the end of backward, before clipping
optimizer   LR / weight decay per group, skipped steps, update/param ratio, Adam eps dominance
batch       non-finite samples, input magnitude, label masking, all-padding rows
readout     one device-to-host copy per step (asynchronous on CUDA)
describe    run metadata written once
probe       the interface every probe shares (built-in and add-on), the step's inputs and record
distributed DDP / FSDP2: gradient norms before and after the ranks combine them
launch      the run directory every rank agrees on without a collective
accelerate  Accelerate's gradient-sync flag (which micro-batch's backward completes the step)
"""
