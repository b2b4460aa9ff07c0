"""Stopping a process a test started: one way for every harness (the control plane, the
real node, the registry, the operator, Prometheus)."""

from __future__ import annotations

import subprocess

__all__ = ["stop"]


def stop(proc: subprocess.Popen[bytes] | None, grace_s: float = 20.0) -> None:
    """SIGTERM, then SIGKILL if it is still there after ``grace_s``; always reaped."""
    if proc is None or proc.poll() is not None:
        return
    proc.terminate()
    try:
        proc.wait(timeout=grace_s)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait(timeout=15)
