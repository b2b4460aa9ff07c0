"""Killing what is left of an ended attempt on this host (Linux ``/proc``).

Ray can lose a job without its processes dying: when the raylet of a worker node is
killed, the job's driver (the entrypoint runs in its own session) keeps running and
keeps writing, though Ray reports the job failed and the hub has ended the attempt.
Every process of an attempt carries ``TAU_RUN_ID`` and ``TAU_FENCING_TOKEN`` in its
environment (set by the platform, inherited by children), so once Ray says the job is
over, any live process carrying both values is a stray: ``kill`` SIGKILLs it.

Only processes this agent's user may signal, on this host, are reached; on other hosts
the fence (``FENCE`` set to 0 by the hub) stops a stray at its next write.
"""

from __future__ import annotations

import contextlib
import os
import signal
from pathlib import Path

from taugrid.record import jobenv

__all__ = ["find", "kill"]

_PROC = Path("/proc")


def find(run_id: str, token: int) -> set[int]:
    """Live pids (not zombies, not this process) whose environment names the attempt."""
    needles = {f"{jobenv.RUN_ID}={run_id}".encode(), f"{jobenv.FENCING_TOKEN}={token}".encode()}
    me = os.getpid()
    found = set()
    for entry in _PROC.iterdir() if _PROC.is_dir() else []:
        if not entry.name.isdigit() or int(entry.name) == me:
            continue
        try:
            env = set((entry / "environ").read_bytes().split(b"\0"))
            state = (entry / "stat").read_text().rsplit(")", 1)[1].split()[0]
        except (OSError, IndexError):
            continue
        if needles <= env and state not in ("Z", "X"):
            found.add(int(entry.name))
    return found


def kill(run_id: str, token: int) -> set[int]:
    """SIGKILL every process of the attempt found on this host; returns their pids."""
    pids = find(run_id, token)
    for pid in pids:
        with contextlib.suppress(OSError):
            os.kill(pid, signal.SIGKILL)
    return pids
