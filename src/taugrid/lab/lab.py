"""Start and stop the local multi-region lab: one hub, N regions, shaped links.

``Lab(home).up(topology)``:
1. ``platform.yaml`` with one region/cluster per topology region (one Ray node with
   ``gpus_per_region`` emulated A100-80G, the region's GPU price) and the record
   store: the topology's ``records`` (an S3 object store) or the shared ``records/``
   directory; every component's own root (``lab.roots``);
2. network namespaces and shaped veth links (``lab.net``);
3. the hub daemon on 127.0.0.1 (a free port), SQLite under ``home/hub``, in a private
   mount namespace that hides the regions' roots (as root, ``roots.confine``); the context
   ``lab`` (``sdk.client.contexts``) is added and made current, so ``tau`` commands target
   the lab without exported variables;
4. per region an agent daemon rooted at ``home/regions/<region>`` (its copies of the
   platform file and tokens; a mount namespace hiding the hub's and the other regions'
   roots) with ``--start-ray`` (its own token-authenticated Ray cluster on the
   topology's ``ray_base`` + i, 127.0.0.6x by default; free GCS and dashboard ports)
   whose probe and data servers
   listen in the region's namespace, one address per link, with the link's RTT added
   in user space;
5. wait until every agent is registered; ``home/lab.json`` records what runs;
6. the supervisor (``sdk.local.supervise``) that starts a dead hub or agent again.

``down`` stops the supervisor, then agents (each stops its Ray cluster; a Ray cluster
left behind by a killed agent is stopped from its state file), then the hub, then
removes the namespaces and the ``lab`` context (the previous context is current
again). Both are idempotent.
Needs root (namespaces, tc).
"""

from __future__ import annotations

import json
import os
import secrets
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import yaml

from taugrid import errors
from taugrid import home as tau_home
from taugrid.backends.ray import ray_local
from taugrid.lab import net, roots, topology
from taugrid.sdk.client import client, contexts
from taugrid.sdk.local import embedded

__all__ = ["CONTEXT", "Lab"]

CONTEXT = "lab"

_STATE = "lab.json"
Progress = Callable[[str], None]


def _quiet(_: str) -> None:
    return None


def _free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class Lab:
    """The lab rooted at ``home`` (default ``$TAU_HOME/lab``)."""

    def __init__(
        self, home: Path, contexts_home: Path | None = None, confined: bool | None = None
    ) -> None:
        self.home = home
        self.roots = roots.Roots(home)
        self.hub_home = self.roots.hub
        self.confined = os.geteuid() == 0 if confined is None else confined
        """Each component in its own mount namespace (``roots.confine``; needs root)."""
        self.contexts = contexts.Contexts(contexts_home or client.tau_home())

    # -- state -------------------------------------------------------------------------
    def state(self) -> dict[str, Any] | None:
        path = self.home / _STATE
        return dict(json.loads(path.read_text())) if path.exists() else None

    def _net(self, st: dict[str, Any]) -> net.Net:
        links = tuple(net.LinkSpec(**ln) for ln in st["links"])
        return net.Net(st["tag"], tuple(st["regions"]), links)

    def _daemon(self, name: str, home: Path | None = None) -> embedded.Daemon:
        # "lab-" names: never the embedded platform's hub/agent pid files
        return embedded.Daemon(f"lab-{name}", home or self.hub_home)

    def _supervisor(self) -> embedded.Daemon:
        """Restarts the lab's hub and agents when they die (``sdk.local.supervise``)."""
        return embedded.Daemon("lab-supervisor", self.hub_home, embedded.SUPERVISOR_MODULE)

    # -- up ------------------------------------------------------------------------------
    def up(
        self, topo: topology.Topology, progress: Progress = _quiet, timeout_s: float = 180
    ) -> dict[str, Any]:
        if self.state() is not None:
            raise errors.UserError(
                f"a lab already runs from {self.home}", "stop it first with: tau lab down"
            )
        regions = topo.names()
        n = net.Net(f"tl{secrets.token_hex(2)}", tuple(regions), topo.link_specs())
        st = {
            "tag": n.tag,
            "regions": regions,
            "links": [ln.__dict__ for ln in n.links],
            "started_at": time.time(),
        }
        self.home.mkdir(parents=True, exist_ok=True)
        (self.home / _STATE).write_text(json.dumps(st, indent=2))
        try:
            progress(f"network: {len(regions)} namespaces, {len(n.links)} shaped links")
            n.up()
            url = self.start_hub(topo, progress)
            token_file = self.hub_home / "data.token"
            token_file.write_text(secrets.token_urlsafe(24))
            token_file.chmod(0o600)
            for i, region in enumerate(regions):
                platform = self.roots.provision(region, self.home / "platform.yaml", token_file)
                ip = topo.ray_ip(i)
                self._start_agent(ip, region, n, url, platform, progress)
            self._wait_agents(url, regions, progress, timeout_s)
            watched = [self._daemon("hub")]
            watched += [self._daemon(f"agent-{r}", self.roots.region(r)) for r in regions]
            embedded.start_supervisor(self._supervisor(), watched, self._env(), progress)
        except BaseException:
            self.down(progress)
            raise
        return self.state() or st

    def start_hub(self, topo: topology.Topology, progress: Progress = _quiet) -> str:
        """Write the platform, start the lab's hub, record it; make ``lab`` current."""
        self.home.mkdir(parents=True, exist_ok=True)
        self.roots.make(topo.names())
        platform = self._write_platform(topo)
        url = self._start_hub(platform, topo.names(), progress)
        creds = self.hub_home / "credentials.json"
        st = self.state() or {"tag": None, "regions": [], "links": []}
        st.update(hub_url=url, credentials=str(creds))
        (self.home / _STATE).write_text(json.dumps(st, indent=2))
        self.contexts.add(CONTEXT, url, creds, use=True)
        progress(f"context '{CONTEXT}' is current: tau commands now target the lab")
        return url

    def _write_platform(self, topo: topology.Topology) -> Path:
        regions = [
            {
                "name": r,
                "clusters": [
                    {
                        "name": r,
                        "emulated_gpus": True,
                        "node_pools": [
                            {
                                "name": "gpu",
                                "gpu_model": "A100-80G",
                                "gpus_per_node": topo.gpus_per_region,
                                "cpus_per_node": 4,
                                "memory_per_node": "16Gi",
                                "nodes": 1,
                                "cost_per_gpu_hour": topo.gpu_cost.get(r, 1.0),
                            }
                        ],
                    }
                ],
            }
            for r in topo.names()
        ]
        gpus = topo.gpus_per_region * len(regions)
        doc = {
            "schema_version": 1,
            "gpu_types": [{"name": "A100-80G"}],
            "regions": regions,
            "priority_classes": [{"name": "normal", "value": 1000}],
            "profiles": [{"name": "default"}],
            "teams": [{"name": "research", "quotas": [{"gpu_model": "A100-80G", "nominal": gpus}]}],
            "workspaces": [
                {
                    "name": "default",
                    "team": "research",
                    "defaults": {"priority": "normal", "profile": "default"},
                }
            ],
            "default_workspace": "default",
            "records": topo.records.model_dump(mode="json", exclude_none=True)
            if topo.records is not None
            else {"url": str(self.roots.records)},
        }
        path = self.home / "platform.yaml"
        path.write_text(yaml.safe_dump(doc, sort_keys=False))
        return path

    def _env(self, home: Path | None = None) -> dict[str, str]:
        env = dict(os.environ, TAU_HOME=str(home or self.hub_home), PYTHONUNBUFFERED="1")
        if home is not None:  # a region: its temporary files stay in its root
            env["TMPDIR"] = str(home / "tmp")
        for var in ("TAU_HUB_URL", "TAU_TOKEN", "TAU_HUB_PORT"):
            env.pop(var, None)
        for var in ("TAU_RAY_GCS_PORT", "TAU_RAY_DASHBOARD_PORT"):
            env.pop(var, None)
        return env

    def _confine(self, argv: list[str], hidden: list[Path]) -> list[str]:
        return roots.confine(argv, hidden) if self.confined else argv

    def _start_hub(self, platform: Path, regions: list[str], progress: Progress) -> str:
        port = _free_port()
        argv = [sys.executable, "-m", "taugrid.hub.server.daemon", "--home", str(self.hub_home)]
        argv += ["--port", str(port), "--platform", str(platform), "--lease", "15"]
        argv = self._confine(argv, self.roots.hidden_from_hub(regions))
        self._daemon("hub").start(argv, self._env())
        url = f"http://127.0.0.1:{port}"
        deadline = time.time() + 60
        while time.time() < deadline:
            try:
                if httpx.get(f"{url}/healthz", timeout=2).status_code == 200:
                    progress(f"hub: {url}")
                    return url
            except httpx.HTTPError:
                pass
            time.sleep(0.3)
        raise errors.SystemFault(
            "the lab hub did not answer /healthz within 60 s", "see hub/logs/hub.log"
        )

    def _start_agent(
        self,
        ip: str,
        region: str,
        n: net.Net,
        url: str,
        platform: Path,
        progress: Progress,
    ) -> None:
        root = self.roots.region(region)
        argv = [sys.executable, "-m", "taugrid.agent.daemon", "--home", str(root), "--hub", url]
        argv += ["--cluster", region, "--platform", str(platform), "--start-ray", "--ray-ip", ip]
        gcs, dash = ray_local.free_port(ip), ray_local.free_port(ip)
        argv += ["--ray-gcs-port", str(gcs), "--ray-dashboard-port", str(dash)]
        argv += ["--report", "5", "--data-root", str(root / "data")]
        argv += ["--netns", n.ns(region), "--data-token-file", str(root / "data.token")]
        argv += ["--probe-interval", "10"]
        for peer in n.regions:
            if peer == region:
                continue
            link = n.link(region, peer)
            mine = n.address(region, peer)
            argv += ["--region-address", mine, "--egress", f"{peer}={link.egress_per_gb}"]
            argv += ["--delay", f"{mine}={link.rtt_ms}", "--loss", f"{mine}={link.loss_pct}"]
        argv = self._confine(argv, self.roots.hidden_from_region(region, list(n.regions)))
        self._daemon(f"agent-{region}", root).start(argv, self._env(root))
        progress(f"region {region}: agent + Ray on {ip} (namespace {n.ns(region)})")

    def _wait_agents(
        self, url: str, regions: list[str], progress: Progress, timeout_s: float
    ) -> None:
        token = json.loads((self.hub_home / "credentials.json").read_text())["token"]
        deadline = time.time() + timeout_s
        with httpx.Client(base_url=url, headers={"Authorization": f"Bearer {token}"}) as c:
            while time.time() < deadline:
                ready = {x["id"] for x in c.get("/v1/clusters").json() if x["report"].get("nodes")}
                if ready >= set(regions):
                    progress(f"all {len(regions)} regions report")
                    return
                time.sleep(1.0)
        raise errors.SystemFault(
            f"lab regions did not all report within {timeout_s:.0f} s",
            f"see the agent logs under {self.hub_home / 'logs'}",
        )

    # -- down ----------------------------------------------------------------------------
    def down(self, progress: Progress = _quiet) -> bool:
        st = self.state()
        if st is None:
            return False
        self._supervisor().stop()  # first: nothing comes back behind us
        for region in st["regions"]:
            root = self.roots.region(region)
            if self._daemon(f"agent-{region}", root).stop(timeout_s=30):
                progress(f"region {region}: agent stopped")
            leftover = ray_local.LocalRayCluster.attach(tau_home.agent_ray(root, region))
            if leftover is not None:
                leftover.stop()
        if self._daemon("hub").stop(timeout_s=15):
            progress("hub stopped")
        if st.get("tag"):
            self._net(st).down()
            progress("network namespaces removed")
        back = self.contexts.remove(CONTEXT)
        progress(f"context '{back}' is current again")
        (self.home / _STATE).unlink(missing_ok=True)
        return True
