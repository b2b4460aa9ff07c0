"""The agent's node health checker against a real hub: rounds, hysteresis, crashes.

The inventory is a value (what Ray would report); marks go through the real hub API
with the cluster's real agent token; faults come from the documented injection files.
"""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa

from taugrid.agent import hubclient
from taugrid.agent.nodes import nodecheck
from taugrid.backends import base
from taugrid.health import signals
from tests.dataplane.test_data_api import PLATFORM
from tests.hub import agent_builders as ab
from tests.hub.harness import HubServer, platform_hub

NODE = "a-n0"


@pytest.fixture
def hub(engine: sa.Engine, tmp_path: Path) -> Iterator[HubServer]:
    with platform_hub(engine, tmp_path, PLATFORM) as server:
        ab.sync(server, "a", ab.report("a", 4))
        yield server


def _inv(
    emulated: bool = True, cpu_node: bool = False, remote: bool = False
) -> base.ClusterInventory:
    nodes = [base.NodeInventory(node_id=NODE, ip="127.0.23.200", alive=True, gpu_total=4)]
    if cpu_node:
        nodes.append(base.NodeInventory(node_id="cpu-n", ip="127.0.23.201", alive=True))
    return base.ClusterInventory(
        nodes=nodes, emulated_gpus=emulated, remote_nodes=remote, taken_at=dt.datetime.now()
    )


def _checker(hub: HubServer, tmp: Path, **kw: Any) -> tuple[nodecheck.NodeChecker, Path]:
    client = hubclient.HubClient(hub.url, hub.agent_token("a"), "a")
    cfg = nodecheck.CheckerConfig(every_s=0, fail_after=2, clear_after=2)
    checker = nodecheck.NodeChecker(cfg, tmp / "agent", tmp, client, **kw)
    return checker, tmp / "agent" / "health" / "nodes"


def _marks(hub: HubServer) -> list[tuple[str, str]]:
    with hub.http() as c:
        rows = c.get("/v1/admin/nodes").json()
    return [(m["kind"], m["source"]) for r in rows if r["node_id"] == NODE for m in r["marks"]]


def _inject(d: Path, doc: dict[str, Any] | None) -> None:
    d.mkdir(parents=True, exist_ok=True)
    (d / f"{NODE}.json").unlink(missing_ok=True)
    if doc is not None:
        (d / f"{NODE}.json").write_text(json.dumps(doc))


def test_flapping_fault_never_marks_a_steady_one_marks_then_clears(
    hub: HubServer, tmp_path: Path
) -> None:
    checker, d = _checker(hub, tmp_path)
    for _ in range(6):  # fail, pass, fail, pass ...
        _inject(d, {"xid": [13]})
        checker.maybe_check(_inv(), [NODE])
        _inject(d, None)
        checker.maybe_check(_inv(), [NODE])
    assert _marks(hub) == []
    _inject(d, {"xid": [79]})
    checker.maybe_check(_inv(), [NODE])
    assert _marks(hub) == []
    checker.maybe_check(_inv(), [NODE])
    assert _marks(hub) == [("xid", "checker")]
    assert checker.row(NODE)["health_check"] == "failing"
    _inject(d, None)
    for _ in range(2):
        checker.maybe_check(_inv(), [NODE])
    assert _marks(hub) == [] and checker.row(NODE)["health_check"] == "ok"


def test_the_checker_clears_its_own_mark_after_an_agent_restart(
    hub: HubServer, tmp_path: Path
) -> None:
    checker, d = _checker(hub, tmp_path)
    _inject(d, {"disk_free_fraction": 0.001})
    checker.maybe_check(_inv(), [NODE])
    checker.maybe_check(_inv(), [NODE])
    assert _marks(hub) == [("disk", "checker")]
    _inject(d, None)
    again, _ = _checker(hub, tmp_path)  # a restarted agent knows the mark is its own
    for _ in range(2):
        again.maybe_check(_inv(), [NODE])
    assert _marks(hub) == []


def test_a_crashing_check_is_unknown_and_never_marks_or_clears(
    hub: HubServer, tmp_path: Path
) -> None:
    checker, d = _checker(hub, tmp_path)
    _inject(d, {"crash": "NVML call timed out"})
    for _ in range(4):
        checker.maybe_check(_inv(), [NODE])
    row = checker.row(NODE)
    assert row["health_check"] == "unknown"
    assert "NVML call timed out" in row["conditions"][0]["reason"]
    assert _marks(hub) == []


def test_nvml_failure_makes_gpu_nodes_unknown_not_cpu_nodes(hub: HubServer, tmp_path: Path) -> None:
    """Real (not emulated) GPUs, but no NVIDIA driver here: the real NVML reader fails."""
    checker, _ = _checker(hub, tmp_path, nvml=signals.NvmlReader())
    checker.maybe_check(_inv(emulated=False, cpu_node=True), [NODE, "cpu-n"])
    assert checker.row(NODE)["health_check"] == "unknown"
    assert "NVML" in checker.row(NODE)["conditions"][0]["reason"]
    assert checker.row("cpu-n")["health_check"] == "ok"


def test_kubernetes_nodes_are_never_sampled_here_but_injections_still_mark(
    hub: HubServer, tmp_path: Path
) -> None:
    """A Kubernetes cluster's nodes (kwok's carry loopback addresses) are not this host:
    no NVML read, no crash condition; an injected fault still marks them."""
    checker, d = _checker(hub, tmp_path, nvml=signals.NvmlReader())
    checker.maybe_check(_inv(emulated=False, remote=True), [NODE])
    assert checker.row(NODE)["health_check"] == "ok"
    _inject(d, {"xid": [79]})
    for _ in range(2):
        checker.maybe_check(_inv(emulated=False, remote=True), [NODE])
    assert _marks(hub) == [("xid", "checker")]
