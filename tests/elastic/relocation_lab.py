"""Two Ray regions for a pipeline that outgrows its cluster (tests and benchmarks).

``small`` (4 CPUs, the cheaper, so a run goes there first under the ``cost``
objective) and ``big`` (12 CPUs), each a one-node Ray cluster with its own agent
thread, and a real hub. The pipeline: two CPU stages of 20 items/s per 1-CPU replica
and a target of 60 items/s, so 3 + 3 replicas; on ``small`` the run's driver holds 1
CPU and Ray Data 1, which leaves the pools 2.
"""

from __future__ import annotations

import contextlib
import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from taugrid.backends.ray import ray_local
from taugrid.store import db
from tests.hub import platform_builders as pb
from tests.hub import region as rg
from tests.hub.harness import HubServer, make_hub

__all__ = ["code_dir", "pipeline_json", "stages_py", "tau_yaml", "two_regions"]

PLATFORM = pb.platform(
    {"small": 1.0, "big": 3.0}, pb.TENANCY + "scheduling: {default_objective: cost}\n"
)
IPS = {"small": "127.0.51.1", "big": "127.0.52.1"}
CPUS = {"small": 4, "big": 12}

_STAGES = """
import time

def source():
    return [{{"id": i}} for i in range({items})]

def decode(items):
    time.sleep(0.05 * len(items))  # 20 items/s per replica
    return items

def resize(items):
    time.sleep(0.05 * len(items))
    return items
"""

_TAU_YAML = """
schema_version: 1
name: {name}
run:
  entrypoint: python -m taugrid.sdk.job.pipeline_job
  workload_kind: pipeline
compute:
  gpus: 0
  cpus: 1
  memory: 1Gi
pipeline:
  source: stages:source
  target_throughput: 60
  sample_size: 4
  window_s: 1
  relocate: {relocate}
  stages:
    - {{name: decode, fn: "stages:decode", cpus: 1, batch_size: {{min: 2, max: 2}},
       replicas: {{min: 1, max: 8}}}}
    - {{name: resize, fn: "stages:resize", cpus: 1, batch_size: {{min: 2, max: 2}},
       replicas: {{min: 1, max: 8}}}}
"""


def stages_py(items: int) -> str:
    """The stages module: a source of ``items`` items and the two 20 items/s stages."""
    return _STAGES.format(items=items)


def tau_yaml(name: str, relocate: bool = True) -> str:
    return _TAU_YAML.format(name=name, relocate=str(relocate).lower())


def code_dir(where: Path, items: int, text: str) -> Path:
    """The run's code: ``stages.py`` with a source of ``items`` items, and ``text``."""
    where.mkdir(parents=True)
    (where / "stages.py").write_text(stages_py(items))
    (where / "tau.yaml").write_text(text)
    return where


@contextlib.contextmanager
def two_regions(tmp: Path) -> Iterator[HubServer]:
    """The two Ray regions, the hub and an agent per region; all stopped after."""
    started: dict[str, ray_local.LocalRayCluster] = {}
    try:
        for name, ip in IPS.items():
            shape = ray_local.NodeShape(ip=ip, num_cpus=CPUS[name], num_gpus=0, accelerator=None)
            started[name] = rg.start_ray([ip], tmp / name, [shape])
        with _hub(tmp, started) as server:
            yield server
    finally:
        rg.stop_regions(started)


@contextlib.contextmanager
def _hub(tmp: Path, clusters: dict[str, ray_local.LocalRayCluster]) -> Iterator[HubServer]:
    (tmp / "platform.yaml").write_text(PLATFORM)
    engine = db.open_engine(f"sqlite:///{tmp / 'hub.db'}")
    server = HubServer(make_hub(engine, tmp / "home", tmp / "platform.yaml")).start()
    agents = [rg.AgentThread(server, clusters[n], tmp / f"agent-{n}", cluster_id=n) for n in IPS]
    try:
        for agent in agents:
            agent.start()
        _wait_reported(server)
        yield server
    finally:
        for agent in agents:
            agent.stop()
        server.stop()
        engine.dispose()


def _wait_reported(server: HubServer, timeout_s: float = 120) -> None:
    """Both regions ready with their nodes reported: a run submitted before ``small``
    reported went to ``big`` at once, and nothing was left to relocate."""
    deadline = time.monotonic() + timeout_s
    with server.http() as c:
        while True:
            rows = {x["id"]: x for x in c.get("/v1/clusters").json()}
            ready = [n for n in IPS if _reported(rows.get(n))]
            if len(ready) == len(IPS):
                return
            assert time.monotonic() < deadline, f"regions not reported: {sorted(rows)}"
            time.sleep(0.2)


def _reported(row: dict[str, Any] | None) -> bool:
    return bool(row and row["state"] == "ready" and (row.get("report") or {}).get("nodes"))


def pipeline_json(record: Path) -> dict[str, Any]:
    """The run's ``pipeline.json`` artifact (its last attempt's)."""
    (path,) = list(record.rglob("pipeline.json"))
    return dict(json.loads(path.read_text()))
