"""Fixtures for backend tests: one shared real Ray cluster per session.

The shared cluster is the embedded default shape (2 nodes x 4 emulated A100-80G, 16
CPUs, 128Gi) on 127.0.0.20 (head) and 127.0.0.21, with GCS/dashboard ports picked
free from 6400-6499 / 8400-8499. Tests that kill nodes start their own cluster
(``backend_helpers.start_cluster``) on 127.0.0.22+. Every cluster is stopped at
teardown, and teardown asserts that none of its processes survived.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from taugrid.backends.ray import ray_jobs, ray_local
from tests.backends import backend_helpers as h


@pytest.fixture(scope="session")
def ray_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ray_local.LocalRayCluster]:
    cluster = h.start_cluster(
        ["127.0.0.20", "127.0.0.21"],
        tmp_path_factory.mktemp("ray-shared"),
        job_start_timeout_s=h.JOB_START_TIMEOUT_S,
    )
    print(f"\nshared Ray cluster started in {cluster.start_seconds:.1f}s")
    try:
        yield cluster
    finally:
        h.stop_cluster(cluster)


@pytest.fixture
def backend(ray_cluster: ray_local.LocalRayCluster) -> Iterator[ray_jobs.RayBackend]:
    b = ray_cluster.backend()
    try:
        yield b
    finally:
        b.close()
