"""LocalRayCluster on a dedicated cluster: node death, growth and clean shutdown.

These tests kill nodes, so they do not share the session cluster. They run in file
order on one module cluster (127.0.0.22 head, 127.0.0.23 worker); the last one stops it.
"""

from __future__ import annotations

import json
import os
import re
import signal
from collections.abc import Iterator
from pathlib import Path

import pytest

from taugrid.backends import base, errors
from taugrid.backends.ray import ray_jobs, ray_local
from tests.backends import backend_helpers as h

pytestmark = pytest.mark.ray

S = base.JobState
HEAD, WORKER = "127.0.0.22", "127.0.0.23"
_SHAPE = ray_local.NodeShape(num_cpus=4, num_gpus=4)
_WAIT = """
import time
print("up", flush=True)
time.sleep(120)
"""


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ray_local.LocalRayCluster]:
    c = h.start_cluster([HEAD, WORKER], tmp_path_factory.mktemp("ray-kill"), [_SHAPE, _SHAPE])
    try:
        yield c
    finally:
        h.stop_cluster(c)


@pytest.fixture
def rb(cluster: ray_local.LocalRayCluster) -> Iterator[ray_jobs.RayBackend]:
    b = cluster.backend()
    yield b
    b.close()


def test_state_file_records_addresses_and_pids(cluster: ray_local.LocalRayCluster) -> None:
    state = json.loads((cluster.state_dir / "cluster.json").read_text())
    assert state["gcs_address"] == cluster.gcs_address
    assert [n["ip"] for n in state["nodes"]] == [HEAD, WORKER]
    assert all(n["pid"] for n in state["nodes"]) and cluster.start_seconds
    assert state["emulated_gpus"] is cluster.emulated


def _raylet_of(cluster: ray_local.LocalRayCluster, ip: str) -> int:
    for pid in cluster.pids():
        try:
            argv = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        if argv and argv[0].endswith(b"raylet") and f"--node_ip_address={ip}".encode() in argv:
            return pid
    raise AssertionError(f"no raylet of {ip} among {sorted(cluster.pids())}")


def test_node_whose_raylet_died_is_started_again(cluster: ray_local.LocalRayCluster) -> None:
    before = cluster.node_ids()[1]
    os.kill(_raylet_of(cluster, WORKER), signal.SIGKILL)  # not kill_node: nobody meant it
    revived = h.wait_for(cluster.revive, timeout=60, what="the dead worker started again")
    assert revived == [1]
    ids = cluster.node_ids()
    assert len(ids) == 2 and ids[1] != before  # a new Ray node on the same place
    # the killed raylet's node stays ALIVE in the GCS until its health checks time out
    backend = cluster.backend()
    h.wait_for(
        lambda: sorted(n.node_id for n in backend.inventory().alive_nodes) == sorted(ids.values()),
        timeout=90,
        what="the GCS to see the old node dead and the new one alive",
    )
    assert cluster.revive() == []  # nothing else is dead


def test_killed_node_turns_dead_and_its_jobs_fail(
    cluster: ray_local.LocalRayCluster, rb: ray_jobs.RayBackend, tmp_path: Path
) -> None:
    # A plain job whose driver sits on the worker, and a 2-rank launch whose driver
    # sits on the head with one rank on each node (which rank is Ray's choice).
    plain = rb.submit(
        h.submission(
            f"{h.PY} -c 'import time; time.sleep(120)'",
            entrypoint_resources={f"node:{WORKER}": 0.01},
        )
    )
    h.write_script(tmp_path, "wait.py", _WAIT)
    entry = (
        f"{h.PY} -m taugrid.backends.programs.launch --workers 2 --gpus-per-worker 4 "
        f"--cpus-per-worker 1 -- {h.PY} wait.py"
    )
    launched = rb.submit(
        h.submission(
            entry,
            entrypoint_resources={f"node:{HEAD}": 0.01},
            runtime_env={"working_dir": str(tmp_path)},
        )
    )
    h.wait_state(rb, plain, {S.RUNNING})
    h.wait_for(lambda: rb.logs(launched).count("] up") == 2, timeout=60, what="2 ranks up")
    worker_id = cluster.node_ids()[1]
    assert worker_id in rb.job_nodes(launched).worker_node_ids

    cluster.kill_node(1)

    def worker_dead() -> bool:
        return not next(n for n in rb.inventory().nodes if n.node_id == worker_id).alive

    h.wait_for(worker_dead, timeout=30, what="worker node DEAD")
    inv = rb.inventory()
    assert inv.gpu_total == 4 and len(inv.alive_nodes) == 1
    st = h.wait_terminal(rb, plain, timeout=30)
    assert st.state is S.FAILED and "node" in st.message.lower()
    st = h.wait_terminal(rb, launched, timeout=30)
    assert st.state is S.FAILED and st.exit_code == 1
    logs = rb.logs(launched)
    lost = re.search(rf"rank (\d) on node \w+ \({re.escape(WORKER)}\)", logs)
    assert lost is not None, logs
    assert f"rank {lost.group(1)} failed" in logs


def test_add_node_joins_the_cluster(
    cluster: ray_local.LocalRayCluster, rb: ray_jobs.RayBackend
) -> None:
    index = cluster.add_node(_SHAPE.model_copy(update={"ip": "127.0.0.24"}))
    assert index == 2
    ips = {n.ip for n in rb.inventory().alive_nodes}
    assert ips == {HEAD, "127.0.0.24"}
    with pytest.raises(errors.LocalClusterError):
        cluster.kill_node(7)


def test_stop_leaves_no_processes(cluster: ray_local.LocalRayCluster) -> None:
    assert cluster.pids()
    cluster.stop()
    assert not cluster.pids()
    cluster.stop()  # idempotent
