"""The pipeline driver sizes its stage pools within its cluster's CPUs, on real Ray.

A one-node Ray cluster of 4 CPUs and the pipeline of ``relocation_lab`` (here without
moving): two CPU stages of one CPU per replica whose target asks 3 replicas each (6
CPUs). The driver (``python -m taugrid.sdk.job.pipeline_job``, as a pipeline run starts it)
gives the pools at most 3 CPUs (``pipeline_job.cpu_budget``: all but one, which Ray
Data's own tasks need; the job is submitted straight to Ray, so the run holds none), so
every window runs on pools the cluster holds (without the cap the plan is 4 + 4
replicas, half of them waiting for CPUs in every window); ``pipeline.json`` names the
limit: the stage, the cluster's CPUs, and how far short of the target the cluster
leaves the pipeline.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from taugrid.backends import base
from taugrid.backends.ray import ray_local
from tests.backends import backend_helpers as h
from tests.elastic import relocation_lab as lab

pytestmark = [pytest.mark.ray, pytest.mark.slow, pytest.mark.timeout(600)]

HEAD = "127.0.48.1"


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ray_local.LocalRayCluster]:
    shapes = [ray_local.NodeShape(num_cpus=4, num_gpus=0, accelerator=None)]
    with h.running_cluster([HEAD], tmp_path_factory.mktemp("ray-cpus"), shapes) as c:
        yield c


def test_stage_pools_stay_within_the_clusters_cpus_and_the_limit_is_named(
    cluster: ray_local.LocalRayCluster, tmp_path: Path
) -> None:
    h.write_script(tmp_path, "stages.py", lab.stages_py(180))
    h.write_script(tmp_path, "tau.yaml", lab.tau_yaml("cpu-bound", relocate=False))
    out = tmp_path / "out"
    backend = cluster.backend()
    try:
        job = backend.submit(
            h.submission(
                f"{h.PY} -m taugrid.sdk.job.pipeline_job --config tau.yaml",
                runtime_env={
                    "working_dir": str(tmp_path),
                    "env_vars": {"TAU_OUTPUT_DIR": str(out), "TAU_RUN_ID": "cpu-bound"},
                },
            )
        )
        status = h.wait_state(backend, job, {base.JobState.SUCCEEDED, base.JobState.FAILED}, 300)
        logs = backend.logs(job)
    finally:
        backend.close()
    assert status.state is base.JobState.SUCCEEDED, logs[-3000:]
    summary = json.loads(next(out.rglob("pipeline.json")).read_text())
    assert summary["items_out"] == 180
    for doc in [summary["plan"], summary["final"]] + summary["windows"]:
        replicas = (
            doc["replicas"]
            if "replicas" in doc
            else {s["name"]: s["replicas"] for s in doc["stages"]}
        )
        assert sum(replicas.values()) <= 3, doc
    limit = summary["final"]["limit"]
    assert limit is not None and limit["cpu_budget"] == 3, summary["final"]
    assert "all the cluster's 3 CPUs allow" in limit["message"]
