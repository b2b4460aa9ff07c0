"""Runs and their attempts on the hub: submit, cancel, resume, how an attempt ends,
fencing, limits, results exports, guest clusters of spans, node suspicion, sweeps, the
model registry and the MLflow bridge.
"""
