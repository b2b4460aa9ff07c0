"""Builders and bounded waits for backend tests (imported by conftest and tests)."""

from __future__ import annotations

import contextlib
import random
import socket
import sys
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, TypeVar

import pytest

from taugrid.backends import base
from taugrid.backends.ray import ray_local

T = TypeVar("T")

# On the shared cluster a job that cannot get its entrypoint resources fails after
# this long (Ray's default: 15 min).
JOB_START_TIMEOUT_S = 20.0

PY = sys.executable


def free_port(ip: str, lo: int, hi: int) -> int:
    """A port in [lo, hi] that nobody listens on at ``ip``."""
    ports = list(range(lo, hi + 1))
    random.shuffle(ports)
    for port in ports:
        with socket.socket() as s:
            try:
                s.bind((ip, port))
            except OSError:
                continue
            return port
    raise RuntimeError(f"no free port in {lo}-{hi} on {ip}")


def start_cluster(
    ips: list[str],
    state_dir: Path,
    shapes: list[ray_local.NodeShape] | None = None,
    job_start_timeout_s: float | None = None,
) -> ray_local.LocalRayCluster:
    """Start a LocalRayCluster with one node per IP (default shape each)."""
    shapes = shapes or [ray_local.NodeShape() for _ in ips]
    shapes = [s.model_copy(update={"ip": ip}) for s, ip in zip(shapes, ips, strict=True)]
    cluster = ray_local.LocalRayCluster(
        ips[0],
        free_port(ips[0], 6400, 6499),
        free_port(ips[0], 8400, 8499),
        shapes,
        state_dir,
        job_start_timeout_s=job_start_timeout_s,
    )
    cluster.start(timeout_s=120)
    return cluster


def stop_cluster(cluster: ray_local.LocalRayCluster) -> None:
    """Stop and assert nothing of the cluster is left running."""
    cluster.stop()
    assert not cluster.pids(), f"Ray processes left behind: {sorted(cluster.pids())}"


@contextlib.contextmanager
def running_cluster(
    ips: list[str], state_dir: Path, shapes: list[ray_local.NodeShape] | None = None
) -> Iterator[ray_local.LocalRayCluster]:
    """``start_cluster``, stopped (and checked stopped) when the block ends."""
    cluster = start_cluster(ips, state_dir, shapes)
    try:
        yield cluster
    finally:
        stop_cluster(cluster)


def wait_for(
    fn: Callable[[], T | None], *, timeout: float = 30.0, interval: float = 0.25, what: str = ""
) -> T:
    """Poll ``fn`` until it returns something truthy; fail the test after ``timeout``."""
    deadline = time.monotonic() + timeout
    last = fn()
    while not last:
        if time.monotonic() > deadline:
            pytest.fail(f"timed out after {timeout}s waiting for {what or fn}: last={last!r}")
        time.sleep(interval)
        last = fn()
    return last


def wait_state(
    b: base.Backend, job_id: str, states: set[base.JobState], timeout: float = 120.0
) -> base.JobStatus:
    """Wait until the job is in one of ``states``."""

    def check() -> base.JobStatus | None:
        st = b.status(job_id)
        return st if st.state in states else None

    return wait_for(check, timeout=timeout, what=f"{job_id} in {states}")


def wait_terminal(b: base.Backend, job_id: str, timeout: float = 120.0) -> base.JobStatus:
    """Wait until the job is SUCCEEDED, FAILED or STOPPED."""
    return wait_state(
        b, job_id, {base.JobState.SUCCEEDED, base.JobState.FAILED, base.JobState.STOPPED}, timeout
    )


def submission(entrypoint: str, **fields: Any) -> base.Submission:
    """Builder: a Submission with a fresh unique id."""
    fields.setdefault("submission_id", f"t-{uuid.uuid4().hex[:10]}")
    return base.Submission(entrypoint=entrypoint, **fields)


def write_script(directory: Path, name: str, body: str) -> Path:
    """Write a Python script into ``directory`` (created) and return its path."""
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / name
    path.write_text(body)
    return path
