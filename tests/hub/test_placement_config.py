"""tau.yaml's ``placement.objective`` and ``placement.compliance`` through a real hub.

A real hub server on a platform.yaml with three regions and a ``scheduling`` section;
the agents register and post state reports over HTTP with their real tokens (no Ray
needed); runs go through ``POST /v1/runs`` and the hub's scheduler thread places them.
Each run's explain-placement document must name the objective preset and weights its
clusters were scored with — the platform.yaml weights where it overrides a preset.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import sqlalchemy as sa
from typer.testing import CliRunner

from taugrid.cli import main as cli_main
from tests.hub.harness import HubServer, platform_hub

# region -> ($/GPU-hour, free GPUs of 8, compliance domains)
REGIONS = {"cheap": (1.0, 2, "[]"), "idle": (8.0, 8, "[]"), "eu": (9.0, 4, "[gdpr]")}

PLATFORM = (
    "schema_version: 1\ngpu_types: [{name: A100-80G}]\nregions:\n"
    + "".join(
        f"""  - name: {r}
    compliance: {domains}
    clusters:
      - name: {r}
        emulated_gpus: true
        node_pools: [{{name: p, gpu_model: A100-80G, gpus_per_node: 8, cpus_per_node: 16,
                      memory_per_node: 128Gi, nodes: 1, cost_per_gpu_hour: {cost}}}]
"""
        for r, (cost, _free, domains) in REGIONS.items()
    )
    + """priority_classes: [{name: normal, value: 1000}]
profiles: [{name: default}]
teams: [{name: research, quotas: [{gpu_model: A100-80G, nominal: 64}]}]
workspaces: [{name: default, team: research, defaults: {priority: normal, profile: default}}]
default_workspace: default
scheduling:
  presets:
    time: {idle_gpu: 0.5, wait: 0.5}
  span_min_mbit: 100
"""
)

RUN = """\
schema_version: 1
name: {name}
run:
  entrypoint: train.py
compute:
  gpus: 2
  cpus: 1
  memory: 1Gi
placement:
{placement}
"""


@pytest.fixture
def hub(engine: sa.Engine, tmp_path: Path) -> Iterator[HubServer]:
    with platform_hub(engine, tmp_path, PLATFORM) as server:
        for region, (_cost, free, _domains) in REGIONS.items():
            with server.http(server.agent_token(region)) as c:
                body = {"cluster_id": region, "region": region}
                assert c.post(f"/v1/agents/{region}/register", json=body).status_code == 200
                r = c.post(f"/v1/agents/{region}/sync", json={"report": report(region, free)})
                assert r.status_code == 200, r.text
        yield server


def report(cluster: str, free: int) -> dict[str, Any]:
    node = {
        "node_id": f"{cluster}-n0",
        "gpu_model": "A100-80G",
        "gpus_total": 8,
        "gpus_free": free,
        "cpus_free": 16,
        "memory_free": 128 * 2**30,
        "alive": True,
    }
    probes = {peer: {"throughput_mbps": 1000.0} for peer in REGIONS if peer != cluster}
    return {"cluster_id": cluster, "nodes": [node], "gpu_free": free, "probes": probes}


def placed(c: httpx.Client, name: str) -> dict[str, Any]:
    """The run's explain-placement document once the scheduler has placed it."""
    deadline = time.time() + 30
    while True:
        doc: dict[str, Any] = c.get(f"/v1/runs/{name}").json()
        if doc["state"] not in ("queued", "admitted"):
            explained: dict[str, Any] = c.get(f"/v1/runs/{name}/placement").json()
            return explained
        assert time.time() < deadline, f"{name} still {doc['state']}: {doc['reason']}"
        time.sleep(0.1)


def submit(c: httpx.Client, name: str, placement: str) -> httpx.Response:
    return c.post("/v1/runs", json={"tau_yaml": RUN.format(name=name, placement=placement)})


def test_objective_and_compliance_steer_placement_and_show_in_explain(
    hub: HubServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    with hub.http() as c:
        for name, placement in (
            ("by-cost", "  objective: cost"),
            ("by-time", "  objective: time"),
            ("gdpr", "  objective: cost\n  compliance: [gdpr]"),
        ):
            r = submit(c, name, placement)
            assert r.status_code == 201, r.text
        by_cost, by_time, gdpr = (placed(c, n) for n in ("by-cost", "by-time", "gdpr"))
    # cost-first (built-in: cost 0.6, data 0.2, idle 0.2): cheap 79 > idle 52 > eu 46
    assert (by_cost["cluster"], by_cost["objective"]) == ("cheap", "cost")
    assert by_cost["weights"]["cost"] == pytest.approx(0.6)
    # "time" as platform.yaml redefines it (idle 0.5, wait 0.5): idle 100 > eu 75
    assert (by_time["cluster"], by_time["objective"]) == ("idle", "time")
    assert by_time["weights"]["idle_gpu"] == 0.5 and by_time["weights"]["cost"] == 0.0
    # only eu meets gdpr, though it is the dearest
    assert gdpr["cluster"] == "eu"
    why = {v["cluster_id"]: v["reason"] for v in gdpr["verdicts"]}
    assert why["cheap"].startswith("compliance: region cheap does not meet compliance ['gdpr']")
    # the console script shows the preset and its weights
    monkeypatch.setenv("TAU_HUB_URL", hub.url)
    monkeypatch.setenv("TAU_TOKEN", hub.admin_token)
    out = CliRunner().invoke(cli_main.app, ["run", "explain-placement", "by-cost"])
    assert out.exit_code == 0, out.output
    assert (
        "objective: cost (cost-first); weights: data 0.20, idle_gpu 0.20, cost 0.60" in out.output
    )


def test_compliance_no_region_meets_is_refused_at_submit(hub: HubServer) -> None:
    with hub.http() as c:
        r = submit(c, "hipaa", "  compliance: [hipaa]")
    assert r.status_code == 400, r.text
    assert "no region meets compliance ['hipaa']" in r.text


def test_a_run_no_cluster_can_ever_take_is_flagged_not_left_waiting(hub: HubServer) -> None:
    # Two workers of 8 GPUs: quota allows it, but every cluster has one 8-GPU node, so each drops
    # the run for good and Placed turns to a warning that says so (it stays queued).
    tau_yaml = RUN.format(name="huge", placement="  objective: cost").replace(
        "gpus: 2", "gpus: 8\n  workers: 2"
    )
    with hub.http() as c:
        r = c.post("/v1/runs", json={"tau_yaml": tau_yaml})
        assert r.status_code == 201, r.text
        deadline = time.time() + 30
        while (placed_phase := _phase(c.get("/v1/runs/huge").json(), "placed"))[
            "status"
        ] != "warning":
            assert time.time() < deadline, placed_phase
            time.sleep(0.1)
        doc = c.get("/v1/runs/huge").json()
    assert placed_phase["reason"].startswith("no registered cluster can ever take this run")
    assert "cheap: fit: 2x8 GPU (any model) never fits: 8 usable GPUs" in placed_phase["reason"]
    assert doc["state"] == "admitted" and doc["reason"] == placed_phase["reason"]


def _phase(doc: dict[str, Any], name: str) -> dict[str, Any]:
    return next(p for p in doc["phases"] if p["phase"] == name)
