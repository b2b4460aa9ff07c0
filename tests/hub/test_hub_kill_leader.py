"""``kill -9`` the leader of three hub replicas while clients submit and a real Ray
region runs the work: no accepted submission lost, none duplicated, none run twice.

Three real hub daemons on a private PostgreSQL server, the real agent loop on one real
Ray node, four concurrent SDK clients with the replicas' URL list
(``ha_cluster.kill_leader_run``; ``benchmarks/bench_hub_failover`` runs the same
scenario with 1,000 submissions and reports the time without a leader).
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.hub import ha_cluster, pg_server

pytestmark = [
    pytest.mark.skipif(not pg_server.available(), reason="PostgreSQL 15 not installed"),
    pytest.mark.ray,
    pytest.mark.slow,
    pytest.mark.long,
    pytest.mark.timeout(1200),
]

HOST = "127.0.26.5"
RAY_IP = "127.0.26.6"
N = 16


@pytest.fixture(scope="module")
def pg() -> Iterator[pg_server.PgServer]:
    with pg_server.pg_server(HOST) as server:
        yield server


@pytest.mark.long
def test_leader_killed_mid_submissions_loses_duplicates_and_reruns_nothing(
    pg: pg_server.PgServer, tmp_path: Path
) -> None:
    reps = ha_cluster.Replicas(tmp_path, HOST, pg.new_database("kill"), count=3, lease_s=2)
    try:
        with ha_cluster.ray_region(tmp_path, RAY_IP, reps):
            out = ha_cluster.kill_leader_run(reps, tmp_path, N, clients=4, timeout_s=600)
    finally:
        reps.stop()
    assert len(out.accepted) + out.refused == N and len(out.accepted) >= N // 2
    assert out.lost == 0, "an accepted submission is not in the database"
    assert out.duplicated == 0, "a submission was stored twice"
    assert out.new_leader != out.killed
    assert all(out.states[r] == "succeeded" for r in out.accepted), out.states
    assert all(out.executions.get(r) for r in out.accepted), out.executions
    assert out.executed_twice == 0, out.executions
