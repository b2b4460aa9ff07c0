"""RayBackend against the shared real Ray cluster (2 nodes x 4 emulated A100-80G)."""

from __future__ import annotations

from pathlib import Path

import pytest

from taugrid.backends import base, errors
from taugrid.backends.ray import ray_jobs, ray_local
from tests.backends import backend_helpers as h

pytestmark = pytest.mark.ray

S = base.JobState
PY = h.PY
# A script that holds its resources until a file appears (bounded: 60 s), then exits 0.
_HOLD = """
import os, sys, time
print("holding", flush=True)
deadline = time.time() + 60
while not os.path.exists(sys.argv[1]) and time.time() < deadline:
    time.sleep(0.1)
print("released", flush=True)
"""


def test_exit_zero_succeeds_with_times_and_logs(backend: ray_jobs.RayBackend) -> None:
    job = backend.submit(h.submission(f"{PY} -c 'print(\"all good\")'"))
    st = h.wait_terminal(backend, job)
    assert st.state is S.SUCCEEDED and st.exit_code == 0
    assert st.start_time and st.end_time and st.start_time <= st.end_time
    assert "all good" in backend.logs(job)


def test_exit_three_fails_with_exit_code_and_log_tail(
    backend: ray_jobs.RayBackend, tmp_path: Path
) -> None:
    h.write_script(tmp_path, "fail.py", "import sys\nprint('about to fail')\nsys.exit(3)\n")
    job = backend.submit(h.submission(f"{PY} fail.py", runtime_env={"working_dir": str(tmp_path)}))
    st = h.wait_terminal(backend, job)
    assert st.state is S.FAILED and st.exit_code == 3
    assert "about to fail" in st.message  # Ray puts the log tail in the message
    assert "about to fail" in backend.logs(job)


def test_working_dir_and_env_vars_reach_the_entrypoint(
    backend: ray_jobs.RayBackend, tmp_path: Path
) -> None:
    (tmp_path / "data.txt").write_text("shipped")
    h.write_script(
        tmp_path,
        "show.py",
        "import os\nprint('data=' + open('data.txt').read(), 'foo=' + os.environ['FOO'])\n",
    )
    env = {"working_dir": str(tmp_path), "env_vars": {"FOO": "bar"}}
    job = backend.submit(h.submission(f"{PY} show.py", runtime_env=env, metadata={"run": "r1"}))
    assert h.wait_terminal(backend, job).state is S.SUCCEEDED
    assert "data=shipped foo=bar" in backend.logs(job)


def test_tail_logs_yields_everything_then_stops(backend: ray_jobs.RayBackend) -> None:
    code = "import time\nfor i in range(5):\n    print(f'line {i}', flush=True); time.sleep(0.2)"
    job = backend.submit(h.submission(f'{PY} -c "{code}"'))
    text = "".join(backend.tail_logs(job, poll_s=0.2, timeout_s=60))
    assert all(f"line {i}" in text for i in range(5))
    chunk = backend.read_logs(job, offset=len(text))
    assert chunk.text == "" and chunk.next_offset == len(text)


def test_inventory_shows_two_nodes_of_four_a100(
    backend: ray_jobs.RayBackend, ray_cluster: ray_local.LocalRayCluster
) -> None:
    inv = backend.inventory()
    assert len(inv.alive_nodes) == 2 and {n.ip for n in inv.nodes} == {"127.0.0.20", "127.0.0.21"}
    for node in inv.nodes:
        assert node.gpu_total == 4 and node.accelerator == "A100-80G"
        assert node.cpu_total == 16 and node.memory_total == 128 * 2**30
    assert inv.gpu_models["A100-80G"].total == 8
    assert inv.emulated_gpus is ray_cluster.emulated
    assert sorted(ray_cluster.node_ids().values()) == sorted(n.node_id for n in inv.nodes)
    # The dashboard-only path (no GCS address) sees the same nodes and totals.
    slow = ray_cluster.backend(gcs_address=None)
    assert slow.inventory().gpu_models["A100-80G"].total == 8
    slow.close()


def test_gpu_job_is_busy_then_released(backend: ray_jobs.RayBackend, tmp_path: Path) -> None:
    h.write_script(tmp_path, "hold.py", _HOLD)
    flag = tmp_path / "go"
    sub = h.submission(
        f"{PY} hold.py {flag}",
        entrypoint_num_gpus=2,
        entrypoint_resources={"accelerator_type:A100-80G": 2},
        runtime_env={"working_dir": str(tmp_path)},
    )
    job = backend.submit(sub)
    h.wait_for(lambda: "holding" in backend.logs(job), timeout=180, what="job running")
    inv = backend.inventory()
    assert inv.gpu_busy == 2 and inv.gpu_free == 6
    placement = backend.job_nodes(job)
    busy_node = next(n for n in inv.nodes if n.gpu_busy)
    assert placement.driver_node_id == busy_node.node_id
    assert not backend.release_check(job)
    flag.touch()
    assert h.wait_terminal(backend, job).state is S.SUCCEEDED
    h.wait_for(lambda: backend.release_check(job), timeout=30, what="release")
    h.wait_for(lambda: backend.inventory().gpu_free == 8, timeout=30, what="GPUs free")


def test_stop_stops_a_running_job(backend: ray_jobs.RayBackend) -> None:
    job = backend.submit(h.submission(f"{PY} -c 'import time; time.sleep(120)'"))
    h.wait_state(backend, job, {S.RUNNING})
    backend.stop(job)
    st = h.wait_terminal(backend, job, timeout=30)
    assert st.state is S.STOPPED
    h.wait_for(lambda: backend.release_check(job), timeout=30, what="release")


def test_gpu_request_larger_than_any_node_stays_pending(backend: ray_jobs.RayBackend) -> None:
    """Ray accepts it and keeps it PENDING until the job start timeout fails it (20 s
    here, 15 min by Ray's default); stop() cannot end it sooner (Ray queues the stop on
    a supervisor actor that never starts). infeasible() says why up front."""
    sub = h.submission("echo never", entrypoint_num_gpus=5)
    assert "GPU" in (backend.infeasible(sub) or "")
    assert backend.infeasible(h.submission("echo ok", entrypoint_num_gpus=4)) is None
    job = backend.submit(sub)
    h.wait_for(lambda: "waiting for resources" in backend.status(job).message, timeout=10)
    st = backend.status(job)
    assert st.state is S.PENDING and st.start_time is not None and st.exit_code is None
    backend.stop(job)
    assert backend.status(job).state is S.PENDING
    st = h.wait_terminal(backend, job, timeout=h.JOB_START_TIMEOUT_S + 15)
    assert st.state is S.FAILED and "failed to start within" in st.message


def test_unknown_and_duplicate_jobs_are_user_errors(backend: ray_jobs.RayBackend) -> None:
    with pytest.raises(errors.JobNotFound):
        backend.status("no-such-job")
    with pytest.raises(errors.JobNotFound):
        backend.stop("no-such-job")
    sub = h.submission("true")
    backend.submit(sub)
    with pytest.raises(errors.DuplicateSubmission):
        backend.submit(sub)
    h.wait_terminal(backend, sub.submission_id)
