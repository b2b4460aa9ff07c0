"""Run ``examples/span-data-parallel/train.py`` on a spanning lab cluster through the
Jobs API (the test and ``benchmarks/bench_span.py`` share it)."""

from __future__ import annotations

import json
import re
import secrets
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from taugrid.backends import base
from taugrid.backends.ray import ray_local

TRAIN = Path(__file__).parents[2] / "examples" / "span-data-parallel" / "train.py"


def driver_lines(logs: str, tail: int = 60) -> str:
    """The job's own output: Ray forwards other processes' logs (a dying raylet's stack)
    into the driver's, prefixed by the process in parentheses or indented; drop them."""
    own = [ln for ln in logs.splitlines() if not re.match(r"\s*(\x1b\[\d+m)?\(|\s+/", ln)]
    return "\n".join(own[-tail:])


def train(
    cluster: ray_local.LocalRayCluster,
    out: Path,
    args: list[str],
    *,
    during: Callable[[], None] | None = None,
    timeout_s: float = 360,
) -> dict[str, Any]:
    """The job's summary once it succeeded; ``during`` runs once, when it is training."""
    backend = cluster.backend()
    job = f"span-{secrets.token_hex(3)}"
    argv = [sys.executable, str(TRAIN), "--out", str(out), *args]
    backend.submit(base.Submission(submission_id=job, entrypoint=subprocess.list2cmdline(argv)))
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        st = backend.status(job)
        if st.state.terminal:
            logs = backend.logs(job)
            assert st.state is base.JobState.SUCCEEDED, f"{st.message}\n{driver_lines(logs)}"
            return dict(json.loads(out.read_text()))
        if during is not None and "progress shards=" in backend.logs(job):
            during()
            during = None
        time.sleep(1)
    raise AssertionError(f"job {job} not done in time:\n{backend.logs(job)[-3000:]}")
