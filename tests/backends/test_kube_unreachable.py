"""A ``backend: kubernetes`` region whose API server does not answer: the real hub, the
agent with the kubernetes backend and the official client, against a loopback address
where nothing listens (no control plane needed). The region reports itself unavailable
with the reason naming the API server; the agent keeps syncing (the hub does not lose
it)."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import yaml

from tests.hub import harness
from tests.k8s import kube_region

DEAD_IP = "127.0.21.1"  # nothing listens on the port picked below


def _dead_kubeconfig(path: Path) -> Path:
    port = harness.free_port(DEAD_IP)
    cfg = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [
            {
                "name": "dead",
                "cluster": {
                    "server": f"https://{DEAD_IP}:{port}",
                    "insecure-skip-tls-verify": True,
                },
            }
        ],
        "users": [{"name": "u", "user": {"token": "t"}}],
        "contexts": [{"name": "dead", "context": {"cluster": "dead", "user": "u"}}],
        "current-context": "dead",
    }
    path.write_text(yaml.safe_dump(cfg))
    return path


def _row(server: harness.HubServer) -> dict[str, Any]:
    with server.http() as c:
        rows = c.get("/v1/clusters").json()
    return next((r for r in rows if r["id"] == kube_region.CLUSTER), {})


def test_an_unreachable_api_server_makes_the_region_unavailable_with_the_reason(
    tmp_path: Path,
) -> None:
    kubeconfig = _dead_kubeconfig(tmp_path / "kubeconfig")
    with kube_region.region(tmp_path, kubeconfig) as (server, _agent):
        deadline = time.monotonic() + 60
        row = _row(server)
        while row.get("state") != "unavailable":
            assert time.monotonic() < deadline, f"cluster row: {row}"
            time.sleep(0.3)
            row = _row(server)
        reason = row["report"]["health_reason"]
        assert "Kubernetes API server" in reason and f"https://{DEAD_IP}:" in reason
        # the agent still syncs: its lease is renewed, the region is not lost
        renewed = row["lease_expires"]
        while _row(server)["lease_expires"] == renewed:
            assert time.monotonic() < deadline + 30, "the agent stopped syncing"
            time.sleep(0.3)
        assert _row(server)["state"] == "unavailable"
