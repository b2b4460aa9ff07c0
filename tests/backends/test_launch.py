"""The multi-worker launcher as a Ray Job entrypoint on the shared cluster."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from taugrid.backends import base
from taugrid.backends.programs import launch
from taugrid.backends.ray import ray_jobs
from tests.backends import backend_helpers as h

pytestmark = pytest.mark.ray

S = base.JobState
_SHOW = """
import os
keys = ["RANK", "WORLD_SIZE", "LOCAL_RANK", "TAU_WORKER_INDEX", "TAU_RUN_ID", "CHECKPOINT_PATH"]
print(" ".join(f"{k}={os.environ.get(k)}" for k in keys), flush=True)
raise SystemExit(int(os.environ.get("FAIL_RANK_EXIT", "0")) if os.environ["RANK"] == "1" else 0)
"""


def _launcher(*args: str) -> str:
    return f"{h.PY} -m taugrid.backends.programs.launch " + " ".join(args)


def test_two_workers_get_ranks_and_passthrough_env(
    backend: ray_jobs.RayBackend, tmp_path: Path
) -> None:
    h.write_script(tmp_path, "show.py", _SHOW)
    env = {"TAU_RUN_ID": "run-7", "CHECKPOINT_PATH": "/data/ckpt"}
    entry = _launcher(
        "--workers 2 --gpus-per-worker 1 --cpus-per-worker 1 --accelerator A100-80G",
        f"-- {h.PY} show.py",
    )
    job = backend.submit(
        h.submission(entry, runtime_env={"working_dir": str(tmp_path), "env_vars": env})
    )
    st = h.wait_terminal(backend, job, timeout=90)
    logs = backend.logs(job)
    assert st.state is S.SUCCEEDED, logs
    for rank in (0, 1):
        line = (
            f"[rank {rank}] RANK={rank} WORLD_SIZE=2 LOCAL_RANK=0 TAU_WORKER_INDEX={rank} "
            "TAU_RUN_ID=run-7 CHECKPOINT_PATH=/data/ckpt"
        )
        assert line in logs  # LOCAL_RANK=0 on both: STRICT_SPREAD put them on two nodes
    assert "STRICT_SPREAD" in logs
    nodes = set(re.findall(r"rank \d on node (\w+)", logs))
    assert len(nodes) == 2


def test_failing_rank_fails_the_job_with_its_exit_code(
    backend: ray_jobs.RayBackend, tmp_path: Path
) -> None:
    h.write_script(tmp_path, "show.py", _SHOW)
    entry = _launcher("--workers 2 --cpus-per-worker 1", f"-- {h.PY} show.py")
    env = {"working_dir": str(tmp_path), "env_vars": {"FAIL_RANK_EXIT": "5"}}
    job = backend.submit(h.submission(entry, runtime_env=env))
    st = h.wait_terminal(backend, job, timeout=90)
    assert st.state is S.FAILED and st.exit_code == 5
    assert "rank 1 failed (exit code 5)" in backend.logs(job)
    h.wait_for(lambda: backend.release_check(job), timeout=30, what="release")


def test_local_ranks_count_per_node() -> None:
    places = [("n1", "10.0.0.1", 1000), ("n2", "10.0.0.2", 1001), ("n1", "10.0.0.1", 1002)]
    envs = launch._envs(places)
    assert [e["LOCAL_RANK"] for e in envs] == ["0", "0", "1"]
    assert [e["LOCAL_WORLD_SIZE"] for e in envs] == ["2", "1", "2"]
    assert {e["MASTER_ADDR"] for e in envs} == {"10.0.0.1"} and envs[2]["MASTER_PORT"] == "1000"
