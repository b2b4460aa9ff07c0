"""The automatic fault chain on real Ray: detect → mark → cordon → replace → resume.

A dedicated cluster (these tests mark, quarantine and kill nodes): a CPU-only head on
127.0.23.1 and two nodes of 4 emulated A100-80G on 127.0.23.2-3. Faults are injected
through the agent's documented fault-injection source (``<state_dir>/health/nodes/
<node-id>.json``) and through the job's own log; nobody marks or clears a node by hand
except where a test says an admin does. Every run must end resumed from its latest
checkpoint on a healthy node, with every step in the run's and the node's history.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from taugrid.agent.nodes import nodecheck
from taugrid.backends.ray import ray_local
from taugrid.store import db
from tests.backends import backend_helpers as bh
from tests.hub import region as rg
from tests.hub.harness import HubServer, make_hub

pytestmark = [pytest.mark.ray, pytest.mark.slow]

IPS = ["127.0.23.1", "127.0.23.2", "127.0.23.3"]
SLOW = "--steps 150 --checkpoint-every 20 --step-sleep 0.08"
CHECKER = nodecheck.CheckerConfig(every_s=0.5, fail_after=2, clear_after=2, max_clears=100)


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ray_local.LocalRayCluster]:
    shapes = [ray_local.NodeShape(ip=IPS[0], num_gpus=0, num_cpus=4)]
    shapes += [ray_local.NodeShape(ip=ip) for ip in IPS[1:]]
    c = ray_local.LocalRayCluster(
        IPS[0],
        bh.free_port(IPS[0], 6600, 6699),
        bh.free_port(IPS[0], 8600, 8699),
        shapes,
        tmp_path_factory.mktemp("ray-health"),
        job_start_timeout_s=60,
    )
    c.start(timeout_s=180)
    yield c
    c.stop()


class Lab:
    def __init__(self, server: HubServer, state_dir: Path, cluster: ray_local.LocalRayCluster):
        self.server, self.cluster = server, cluster
        self.inject_dir = state_dir / "health" / "nodes"
        ids = cluster.node_ids()
        self.gpu_nodes = [ids[1], ids[2]]

    def inject(self, node: str, doc: dict[str, Any] | None) -> None:
        self.inject_dir.mkdir(parents=True, exist_ok=True)
        path = self.inject_dir / f"{node}.json"
        if doc is None:
            path.unlink(missing_ok=True)
        else:
            path.write_text(json.dumps(doc))


@pytest.fixture(scope="module")
def lab(
    tmp_path_factory: pytest.TempPathFactory, cluster: ray_local.LocalRayCluster
) -> Iterator[Lab]:
    tmp = tmp_path_factory.mktemp("health-hub")
    engine = db.open_engine(f"sqlite:///{tmp / 'hub.db'}")
    server = HubServer(make_hub(engine, tmp / "home")).start()
    agent = rg.AgentThread(server, cluster, tmp / "agent", expected_nodes=3, health=CHECKER)
    agent.start()
    with server.http() as c:
        bh.wait_for(
            lambda: len(_node_list(c)) == 3 and all(n["health"] == "ok" for n in _node_list(c)),
            timeout=120,
            what="three checked nodes",
        )
    yield Lab(server, tmp / "agent", cluster)
    agent.stop()
    server.stop()
    engine.dispose()


def _node_list(c: httpx.Client) -> list[dict[str, Any]]:
    r = c.get("/v1/admin/nodes")
    assert r.status_code == 200, r.text
    return list(r.json())


def _node(c: httpx.Client, node_id: str) -> dict[str, Any]:
    return next(n for n in _node_list(c) if n["node_id"] == node_id)


def _history(c: httpx.Client, node_id: str) -> list[dict[str, Any]]:
    return list(c.get(f"/v1/admin/nodes/{node_id}/history").json())


def _on_gpu_node(lab: Lab, run: dict[str, Any]) -> str | None:
    a = run["attempts"][-1] if run["attempts"] else None
    if not a or a["state"] != "running" or (a["checkpoint_step"] or 0) < 20:
        return None
    return next((n for n in a["nodes"] if n in lab.gpu_nodes), None)


def _wait_clear(c: httpx.Client, node_id: str) -> None:
    bh.wait_for(
        lambda: not _node(c, node_id)["marks"] and _node(c, node_id)["health"] == "ok",
        timeout=120,
        what=f"node {node_id[:8]} cleared by the checker",
    )


def _resumed_elsewhere(c: httpx.Client, run_id: str, bad: str) -> dict[str, Any]:
    done = rg.wait_run(c, run_id, rg.finished, timeout=300)
    assert done["state"] == "succeeded", done["reason"]
    last = done["attempts"][-1]
    assert len(done["attempts"]) >= 2 and bad not in last["nodes"]
    assert last["resumed_from"] and "step-" in last["resumed_from"]
    return done


@pytest.mark.parametrize(
    ("kind", "doc"),
    [
        ("xid", {"xid": [79]}),
        ("ecc", {"ecc_uncorrected": 4}),
        ("disk", {"disk_free_fraction": 0.005}),
    ],
)
def test_injected_fault_moves_the_run_to_a_healthy_node(
    lab: Lab, kind: str, doc: dict[str, Any]
) -> None:
    with lab.server.http() as c:
        run = rg.submit_run(c, rg.quickstart_yaml(SLOW, name=f"fault-{kind}"))
        bad = bh.wait_for(
            lambda: _on_gpu_node(lab, c.get(f"/v1/runs/{run['id']}").json()),
            timeout=180,
            what="the run running with a checkpoint",
        )
        lab.inject(bad, doc)
        done = _resumed_elsewhere(c, run["id"], bad)
        assert done["attempts"][0]["failure_kind"] == "node_failure"
        assert f"marked faulty ({kind})" in done["attempts"][0]["reason"]
        node = _node(c, bad)
        assert [(m["kind"], m["source"]) for m in node["marks"]] == [(kind, "checker")]
        failing = [x for x in node["conditions"] if x["status"] == "failing"]
        assert failing and failing[0]["type"] in ("GpuXid", "GpuEcc", "DiskSpace")
        events = [e["kind"] for e in c.get(f"/v1/runs/{run['id']}/events").json()]
        for step in ("node_marked", "attempt_failed", "retry", "attempt_running", "succeeded"):
            assert step in events, (step, events)
        assert events.index("node_marked") < events.index("retry")
        lab.inject(bad, None)
        _wait_clear(c, bad)  # the checker clears its own mark once the fault is gone
        hist = [(e["event"], e.get("source")) for e in _history(c, bad)]
        assert hist[-2:] == [("node_marked", "checker"), ("node_cleared", "checker")]


def test_a_crashing_checker_is_reported_never_healthy(lab: Lab) -> None:
    node = lab.gpu_nodes[0]
    with lab.server.http() as c:
        lab.inject(node, {"crash": "NVML call timed out"})
        row = bh.wait_for(
            lambda: (n := _node(c, node))["health"] == "unknown" and n,
            timeout=60,
            what="health unknown",
        )
        assert "NVML call timed out" in row["conditions"][0]["reason"]
        assert row["marks"] == []  # unknown is neither healthy nor a reason to mark
        lab.inject(node, None)
        bh.wait_for(lambda: _node(c, node)["health"] == "ok", timeout=60, what="health ok")


def test_a_stalled_run_restarts_from_its_checkpoint(lab: Lab) -> None:
    stall = "  stall:\n    interval: 2s\n    warn_after: 3\n    restart_after: 8\n"
    args = "--steps 60 --checkpoint-every 20 --fail-at-step 30 --fail-mode hang"
    text = rg.quickstart_yaml(args, name="stall").replace("resilience:\n", "resilience:\n" + stall)
    with lab.server.http() as c:
        run = rg.submit_run(c, text)
        done = rg.wait_run(c, run["id"], rg.finished, timeout=300)
        assert done["state"] == "succeeded", done["reason"]
        first, last = done["attempts"][0], done["attempts"][-1]
        assert first["failure_kind"] == "stall" and "no metric, heartbeat or log" in first["reason"]
        assert last["resumed_from"] and "step-" in last["resumed_from"]
        events = c.get(f"/v1/runs/{run['id']}/events").json()
        stalled = [e for e in events if e["kind"] == "stalled"]
        assert stalled and stalled[0]["payload"]["attempt"] == 1  # the Progressing warning
        kinds = [e["kind"] for e in events]
        assert kinds.index("stalled") < kinds.index("retry")


def test_a_stalled_run_without_a_checkpoint_fails_with_the_reason(lab: Lab) -> None:
    stall = "  stall:\n    interval: 1s\n    warn_after: 2\n    restart_after: 4\n"
    args = "--steps 60 --checkpoint-every 1000 --fail-at-step 5 --fail-mode hang"
    text = rg.quickstart_yaml(args, name="stall-nockpt").replace(
        "resilience:\n", "resilience:\n" + stall
    )
    with lab.server.http() as c:
        run = rg.submit_run(c, text)
        done = rg.wait_run(c, run["id"], rg.finished, timeout=240)
        assert done["state"] == "failed"
        assert len(done["attempts"]) == 1  # not restarted (forever or at all)
        assert "no checkpoint to restart from" in done["reason"], done["reason"]


def test_log_errors_quarantine_a_node_and_the_last_healthy_node_makes_runs_wait(
    lab: Lab,
) -> None:
    """An admin cordons one GPU node, so both failing attempts land on the other: the
    log monitor stops each on its Xid line and the second suspicion quarantines the
    node. Now no GPU node is left: the region is degraded with the reason and the run
    waits (it does not fail) until the admin clears the cordon; then it resumes."""
    spare, target = lab.gpu_nodes
    xid = "NVRM: Xid (PCI:0000:3b:00): 79, pid=4242, GPU has fallen off the bus."
    args = "--steps 80 --checkpoint-every 20 --fail-at-step 30 --fail-attempts 2 --fail-mode hang"
    text = rg.quickstart_yaml(args, env={"FAIL_MESSAGE": xid}, retries=3, name="xid-log")
    with lab.server.http() as c:
        fault = {"cluster_id": "local", "node_id": spare, "kind": "cordon"}
        assert c.post("/v1/admin/nodes/fault", json=fault).status_code == 200
        bh.wait_for(  # what `tau admin node fault` waits for: the agent has cordoned it
            lambda: any(
                n["node_id"] == spare and n.get("fault") for n in _cluster(c)["report"]["nodes"]
            ),
            timeout=60,
            what="the cordon reported",
        )
        run = rg.submit_run(c, text)
        bh.wait_for(
            lambda: any(m["kind"] == "quarantine" for m in _node(c, target)["marks"]),
            timeout=300,
            what="the node quarantined",
        )
        row = bh.wait_for(
            lambda: (x := _cluster(c))["report"]["health"] == "degraded" and x,
            timeout=60,
            what="region degraded",
        )
        assert "every GPU node is marked faulty" in row["report"]["health_reason"]
        waiting = c.get(f"/v1/runs/{run['id']}").json()
        assert waiting["state"] in ("queued", "admitted"), waiting["state"]
        assert [m["source"] for m in _node(c, target)["marks"]] == ["log_monitor"]
        suspects = [e for e in _history(c, target) if e["event"] == "node_suspect"]
        assert len({e["token"] for e in suspects}) == 2 and suspects[0]["finding"] == "xid"
        clear = {"cluster_id": "local", "node_id": spare}
        assert c.post("/v1/admin/nodes/clear", json=clear).status_code == 200
        done = _resumed_elsewhere(c, run["id"], target)
        assert done["attempts"][0]["failure_kind"] == "node_failure"
        assert "log monitor: xid" in done["attempts"][0]["reason"]
        assert c.post("/v1/admin/nodes/clear", json={**clear, "node_id": target}).status_code == 200
        hist = [(e["event"], e.get("source")) for e in _history(c, target)]
        assert ("node_marked", "log_monitor") in hist and hist[-1] == ("node_cleared", "all")


def test_a_hung_nccl_collective_is_stopped_and_the_run_resumes(lab: Lab) -> None:
    """The job prints NCCL's watchdog timeout and then hangs (a collective that never
    returns): the log monitor stops the attempt as a node failure, the node becomes a
    suspect, and the next attempt resumes from the checkpoint, with no human."""
    nccl = (
        "[Rank 0] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=42, "
        "OpType=ALLREDUCE) ran for 600000 milliseconds before timing out."
    )
    args = "--steps 60 --checkpoint-every 20 --fail-at-step 30 --fail-mode hang"
    text = rg.quickstart_yaml(args, env={"FAIL_MESSAGE": nccl}, retries=2, name="nccl-hang")
    with lab.server.http() as c:
        run = rg.submit_run(c, text)
        done = rg.wait_run(c, run["id"], rg.finished, timeout=300)
        assert done["state"] == "succeeded", done["reason"]
        first, last = done["attempts"][0], done["attempts"][-1]
        assert first["failure_kind"] == "node_failure"
        assert "log monitor: nccl" in first["reason"], first["reason"]
        assert last["resumed_from"] and "step-" in last["resumed_from"]
        suspects = [e for e in _history(c, first["nodes"][0]) if e["event"] == "node_suspect"]
        assert suspects and suspects[-1]["finding"] == "nccl"


def _cluster(c: httpx.Client) -> dict[str, Any]:
    return next(x for x in c.get("/v1/clusters").json() if x["id"] == "local")


def test_node_loss_resumes_the_run_on_a_healthy_node(lab: Lab) -> None:
    """Last: it kills a node of the module's cluster."""
    with lab.server.http() as c:
        run = rg.submit_run(c, rg.quickstart_yaml(SLOW, name="node-loss"))
        bad = bh.wait_for(
            lambda: _on_gpu_node(lab, c.get(f"/v1/runs/{run['id']}").json()),
            timeout=180,
            what="the run running with a checkpoint",
        )
        lab.cluster.kill_node(bad)
        _resumed_elsewhere(c, run["id"], bad)
        row = bh.wait_for(
            lambda: (n := _node(c, bad))["marks"] and n, timeout=120, what="lost node marked"
        )
        assert [(m["kind"], m["source"]) for m in row["marks"]] == [("lost", "checker")]
