"""The elastic controller's second level on real Ray: a node that is slow for a stage is
found from the stage actors' own measurements and the stage's replicas move off it.

A two-node Ray cluster (16 CPUs each); the stage asks 9 CPUs per replica and 2
replicas, so the first window has one replica on each node. The stage's callable is
the seam: it sleeps 6x longer per item on the worker node (a throttled or noisy node,
as the test declares it by IP). The driver waits for a pool's replicas before each
window's first batch (Ray Data's ``wait_for_min_actors_s``), so that both nodes get
work in window 1 whatever the order their actors start in. From the second window the
stage runs on the head only, one replica (all the head holds), and the run finishes.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path

import pytest

from taugrid.backends import base
from taugrid.backends.ray import ray_local
from tests.backends import backend_helpers as h

pytestmark = [pytest.mark.ray, pytest.mark.slow, pytest.mark.timeout(600)]

HEAD, WORKER = "127.0.47.1", "127.0.47.2"

STAGES = f"""
import time
import ray

def source():
    return [{{"id": i}} for i in range(48)]

def work(items):
    slow = ray.util.get_node_ip_address() == {WORKER!r}
    time.sleep(0.05 * len(items) * (6 if slow else 1))
    return items
"""

DRIVER = """
import json
import ray
import ray.data
from taugrid.elastic import controller, profile, ray_exec
from taugrid.spec import pipeline as sp

ray.init(address="auto", log_to_driver=False)
# both replicas up before a window's first batch, so each node gets work in window 1
ray.data.DataContext.get_current().wait_for_min_actors_s = 120
ips = {n["NodeID"]: n["NodeManagerAddress"] for n in ray.nodes()}
stage = sp.StageSpec(
    name="work", fn="stages:work", cpus=9,
    replicas=sp.Bounds(min=2, max=2), batch_size=sp.Bounds(min=4, max=4),
)
spec = sp.PipelineSpec(source="stages:source", target_throughput=16, window_s=1,
                       sample_size=4, stages=[stage])
measured = profile.measure(spec, search=".")
control = controller.Controller([m.profile for m in measured], spec.target_throughput)
windows = []

def seen(report):
    windows.append({
        "nodes": sorted(ips[n] for n in report.stages["work"].nodes),
        "avoided": sorted(ips[n] for n in report.avoided.get("work", ())),
        "next_avoided": sorted(ips[n] for n in report.next_avoided.get("work", ())),
    })

out = ray_exec.run(spec, control, search=".", dead_dir="dead", on_window=seen)
print("RESULT " + json.dumps({"out": out, "windows": windows}), flush=True)
"""


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ray_local.LocalRayCluster]:
    shapes = [ray_local.NodeShape(num_cpus=16, num_gpus=0, accelerator=None)] * 2
    with h.running_cluster([HEAD, WORKER], tmp_path_factory.mktemp("ray-slow"), shapes) as c:
        yield c


def test_a_stage_leaves_the_node_that_is_slow_for_it(
    cluster: ray_local.LocalRayCluster, tmp_path: Path
) -> None:
    h.write_script(tmp_path, "stages.py", STAGES)
    h.write_script(tmp_path, "driver.py", DRIVER)
    backend = cluster.backend()
    try:
        job = backend.submit(
            h.submission(
                f"{h.PY} driver.py",
                entrypoint_resources={f"node:{HEAD}": 0.01},
                runtime_env={"working_dir": str(tmp_path)},
            )
        )
        status = h.wait_state(backend, job, {base.JobState.SUCCEEDED, base.JobState.FAILED}, 300)
        logs = backend.logs(job)
    finally:
        backend.close()
    assert status.state is base.JobState.SUCCEEDED, logs[-3000:]
    found = re.search(r"^RESULT (.*)$", logs, re.M)
    assert found, logs[-3000:]
    result = json.loads(found.group(1))
    windows = result["windows"]
    assert result["out"] == 48 and len(windows) == 3, windows
    # window 1: one replica on each node (9 + 9 CPUs > 16); the worker is found slow
    assert windows[0]["nodes"] == [HEAD, WORKER] and windows[0]["avoided"] == []
    assert windows[0]["next_avoided"] == [WORKER]
    # later windows: off the worker, on the head alone
    for w in windows[1:]:
        assert w["avoided"] == [WORKER] and w["nodes"] == [HEAD], windows
