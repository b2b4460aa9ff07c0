"""Cost you can see (issue 16 item 5): GPU-hours x the pool's price plus egress, per run,
workspace and team — through the real hub API, the real ``tau`` script and ``/metrics``,
for runs that really ran on a Ray region.

Egress: the cross-region copy a run's staging makes is written through the data store
as the data plane records it (``request_transfer`` with the run as requester, then
``start``/``finish``): moving gigabytes between two regions is not what is under test.
"""

from __future__ import annotations

import datetime
import json
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from prometheus_client import parser as prom_parser

from taugrid.backends.ray import ray_local
from taugrid.hub.tenancy import cost
from taugrid.store import data as store_data
from taugrid.store import db
from tests.hub import region as rg
from tests.hub import tenancy_builders as tb
from tests.hub.harness import HubServer, make_hub

pytestmark = [pytest.mark.ray, pytest.mark.slow]
PRICE, EGRESS = 3.0, 0.08
PLATFORM = f"""\
schema_version: 1
gpu_types: [{{name: A100-80G}}]
regions:
  - name: local
    clusters:
      - name: local
        emulated_gpus: true
        node_pools: [{{name: a, gpu_model: A100-80G, gpus_per_node: 4, cpus_per_node: 16,
                      memory_per_node: 128Gi, nodes: 1, cost_per_gpu_hour: {PRICE}}}]
  - name: far
    egress_cost_per_gb: {EGRESS}
    clusters: [{{name: far, emulated_gpus: true}}]
priority_classes: [{{name: normal, value: 1000}}]
profiles: [{{name: default}}]
teams:
  - {{name: research, quotas: [{{gpu_model: A100-80G, nominal: 8}}]}}
  - {{name: speech-team, quotas: [{{gpu_model: A100-80G, nominal: 2}}]}}
workspaces:
  - {{name: default, team: research, defaults: {{priority: normal, profile: default}}}}
  - {{name: speech, team: speech-team, defaults: {{priority: normal, profile: default}}}}
default_workspace: default
"""


@pytest.fixture(scope="module")
def ray_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ray_local.LocalRayCluster]:
    cluster = rg.start_ray(["127.0.22.10"], tmp_path_factory.mktemp("ray"))
    yield cluster
    cluster.stop()


@pytest.fixture
def platform(tmp_path: Path, ray_cluster: ray_local.LocalRayCluster) -> Iterator[HubServer]:
    (tmp_path / "platform.yaml").write_text(PLATFORM)
    engine = db.open_engine(f"sqlite:///{tmp_path / 'hub.db'}")
    server = HubServer(make_hub(engine, tmp_path / "home", tmp_path / "platform.yaml")).start()
    agent = rg.AgentThread(server, ray_cluster, tmp_path / "agent").start()
    try:
        yield server
    finally:
        agent.stop()
        server.stop()
        engine.dispose()


def _tau(server: HubServer, *args: str) -> subprocess.CompletedProcess[str]:
    proc = server.tau(*args)
    assert proc.returncode == 0, proc.stderr + proc.stdout
    return proc


def _egress(server: HubServer, run_id: str, gb: float) -> None:
    """A staging copy of ``gb`` from region far into local, requested by ``run_id``."""
    s = store_data.DataStore(server.hub.engine)
    s.register("corpus", "v1", "far", "/data/corpus", "admin", "default")
    s.set_manifest("corpus@v1", "far", [], int(gb * 1e9), "0" * 64, None)
    x = s.request_transfer("corpus@v1", "far", "local", "/replicas/corpus", run_id, 1.0)
    assert s.start_transfer(x["id"], 1e9)
    s.finish_transfer(x["id"], True, int(gb * 1e9), 1e9, "")


def _samples(server: HubServer, name: str) -> dict[tuple[tuple[str, str], ...], float]:
    with server.http() as c:
        text = c.get("/metrics").text
    out = {}
    for fam in prom_parser.text_string_to_metric_families(text):
        for s in fam.samples:
            if s.name == name:
                out[tuple(sorted(s.labels.items()))] = s.value
    return out


def _gpu_hours(run: dict[str, Any]) -> float:
    """What the run's own attempts say it held (independent of ``hub.tenancy.cost``)."""
    return sum(
        float(run["gpus"]) * (float(a["ended_at"]) - float(a["started_at"])) / 3600
        for a in run["attempts"]
        if a["started_at"]
    )


def test_run_workspace_and_team_cost(platform: HubServer) -> None:
    with platform.http() as c:
        run = rg.submit_run(c, rg.quickstart_yaml("--steps 20 --step-sleep 0.2"))
        run = rg.wait_run(c, run["id"], rg.finished, timeout=300)
        assert run["state"] == "succeeded", run["reason"]
        _egress(platform, run["id"], 2.5)
        doc = tb.ok(c.get(f"/v1/runs/{run['id']}/cost"))
    hours = _gpu_hours(run)
    assert hours > 0
    assert doc["gpu_hours"] == pytest.approx(hours)
    assert doc["gpu_cost"] == pytest.approx(hours * PRICE)
    assert doc["egress_gb"] == pytest.approx(2.5) and doc["egress_cost"] == pytest.approx(0.2)
    assert doc["total"] == pytest.approx(hours * PRICE + 0.2)
    assert [a["price_per_gpu_hour"] for a in doc["attempts"]] == [PRICE]

    status = _tau(platform, "run", "status", run["id"]).stdout
    assert f"x {cost_str(PRICE)}" in status and "egress 2.50 GB ($0.20)" in status
    as_json = json.loads(_tau(platform, "run", "status", run["id"], "-o", "json").stdout)
    assert as_json["cost"]["total"] == pytest.approx(doc["total"])

    ws = _tau(platform, "workspace", "status", "default").stdout
    assert f"month to date: {cost_str(doc['total'])}" in ws
    ws_json = json.loads(_tau(platform, "workspace", "status", "default", "-o", "json").stdout)
    assert ws_json["cost"]["total"] == pytest.approx(doc["total"])
    assert ws_json["cost"]["month_to_date"] == pytest.approx(doc["total"])

    gauges = _samples(platform, "tau_workspace_cost_dollars")
    key = (("kind", "gpu"), ("team", "research"), ("workspace", "default"))
    assert gauges[key] == pytest.approx(doc["gpu_cost"], rel=1e-6)
    assert gauges[(("kind", "egress"), ("team", "research"), ("workspace", "default"))] == (
        pytest.approx(0.2)
    )
    assert gauges[(("kind", "gpu"), ("team", "speech-team"), ("workspace", "speech"))] == 0
    teams = _samples(platform, "tau_team_cost_dollars")
    assert teams[(("kind", "gpu"), ("team", "research"))] == pytest.approx(doc["gpu_cost"])
    month = _samples(platform, "tau_workspace_cost_month_to_date_dollars")
    assert month[(("team", "research"), ("workspace", "default"))] == pytest.approx(doc["total"])

    # next month, the finished run still costs what it cost, but not this month
    start = datetime.datetime.fromtimestamp(cost.month_start(run["created_at"]), datetime.UTC)
    later = (start + datetime.timedelta(days=40)).timestamp()
    moved = cost.run_cost(platform.hub, run["id"], clock=lambda: later)
    assert moved["total"] == pytest.approx(doc["total"]) and moved["month_to_date"] == 0


def cost_str(amount: float) -> str:
    return f"${amount:,.2f}"


def test_researcher_sees_only_own_costs_and_live_run_metric(platform: HubServer) -> None:
    secret = tb.token(platform, "sam", workspaces=["speech"])
    with platform.http() as c:
        run = rg.submit_run(c, rg.quickstart_yaml("--steps 2000 --step-sleep 0.5"))
        rg.wait_run(c, run["id"], lambda r: r["state"] == "running", timeout=300)
        tb.wait_for(lambda: _live_cost(platform, run["id"]) > 0, timeout=30)
        with platform.http(secret) as sam:
            assert sam.get(f"/v1/runs/{run['id']}/cost").status_code == 404
            mine = tb.ok(sam.get("/v1/cost"))
            assert [w["workspace"] for w in mine["workspaces"]] == ["speech"]
            assert [t["team"] for t in mine["teams"]] == ["speech-team"]
            assert sam.get("/v1/admin/utilization").status_code == 403
        tb.ok(c.post(f"/v1/runs/{run['id']}/cancel"))
        rg.wait_run(c, run["id"], rg.finished, timeout=120)
        assert run["id"] not in str(_samples(platform, "tau_run_cost_dollars"))  # ended
        util = tb.ok(c.get("/v1/admin/utilization"))
        assert util["regions"]["local"][0]["source"] == "allocation"  # emulated GPUs


def _live_cost(server: HubServer, run_id: str) -> float:
    gauges = _samples(server, "tau_run_cost_dollars")
    key = (("kind", "gpu"), ("region", "local"), ("run_id", run_id), ("workspace", "default"))
    return gauges.get(key, 0.0)
