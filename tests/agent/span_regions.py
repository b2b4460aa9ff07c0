"""Regions that may span, on real Ray, for tests and benchmarks of live spanning runs.

Each region is a one-node Ray cluster (``gpus`` emulated A100 GPUs, 2 more CPUs, the
``region:<name>`` resource, Ray token auth) with a real agent thread that may span
(``AgentConfig.span``) and a real data-plane sidecar whose probes measure the links
between regions (loopback); one real hub whose platform.yaml sets a link budget
(``scheduling.span_min_mbit: 10``).

Every region uses one Ray token: the agents share this process, and a process presents
one token (``ray_http.auth_headers``; the lab's agents are processes of their own, each
with its cluster's). The agents read their clusters over HTTP only (``AgentThread(...,
gcs=False)``): Ray's in-process GCS client would keep token mode on for the rest of the
process, and a later ``ray.init()`` without a token would fail. A guest node still joins
only with the token the hub relayed: one started without it is refused by the head.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from pathlib import Path

from taugrid.agent.data import datasync
from taugrid.backends.ray import _procs, ray_local
from taugrid.store import db
from tests import ray_auth
from tests.backends import backend_helpers as bh
from tests.hub import platform_builders as pb
from tests.hub import region as rg
from tests.hub.harness import HubServer, make_hub

__all__ = ["EXAMPLE", "IPS", "guest_pids", "regions"]

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "span-data-parallel"
IPS = {"a": "127.0.33.1", "b": "127.0.34.1"}


def _cluster(name: str, gpus: int, tmp: Path, token: Path) -> ray_local.LocalRayCluster:
    ip = IPS[name]
    shape = ray_local.NodeShape(  # a CPU per worker actor, plus the driver's and one spare
        ip=ip, num_gpus=gpus, num_cpus=gpus + 2, resources={f"region:{name}": float(gpus)}
    )
    return ray_local.LocalRayCluster(
        ip,
        bh.free_port(ip, 6600, 6699),
        bh.free_port(ip, 8600, 8699),
        [shape],
        tmp / name,
        job_start_timeout_s=120,
        auth_token_file=token,
    ).start(timeout_s=180)


def _sidecar(server: HubServer, name: str, tmp: Path) -> datasync.Sidecar:
    ip = IPS[name]
    cfg = datasync.SidecarConfig(
        data_root=tmp / f"data-{name}",
        addresses=(ip,),
        # below the kernel's ephemeral range, where the Ray processes already on ``ip``
        # take their ports: a port the kernel picked could be theirs before we bind it
        probe_port=bh.free_port(ip, 7600, 7649),
        data_port=bh.free_port(ip, 7650, 7699),
        probe_interval_s=0.5,
        probe_duration_s=0.2,
    )
    return datasync.Sidecar(cfg, server.url, server.agent_token(name), name).start()


@contextlib.contextmanager
def regions(tmp: Path, gpus: dict[str, int], token: Path | None = None) -> Iterator[HubServer]:
    """The regions named in ``gpus`` (of ``IPS``), the hub and their agents; all stopped
    after, with any guest node left. ``token``: the Ray token file (default: a new one
    in ``tmp``); a process that sets up regions twice must pass the same one, since Ray's
    GCS client keeps the first token it read."""
    token = token or ray_local.write_auth_token(tmp / "ray-token")
    with contextlib.ExitStack() as stack:
        stack.enter_context(ray_auth.token_env(token))
        stack.callback(lambda: _procs.terminate("tau-guest/", prefix=True, grace_s=1))
        clusters = {}
        for name, count in gpus.items():
            clusters[name] = _cluster(name, count, tmp, token)
            stack.callback(clusters[name].stop)
        costs = {name: 1.0 for name in gpus}
        platform = pb.platform(costs, pb.TENANCY + "scheduling: {span_min_mbit: 10}\n")
        (tmp / "platform.yaml").write_text(platform)
        engine = db.open_engine(f"sqlite:///{tmp / 'hub.db'}")
        stack.callback(engine.dispose)
        srv = HubServer(make_hub(engine, tmp / "home", tmp / "platform.yaml")).start()
        stack.callback(srv.stop)
        for name, cluster in clusters.items():
            agent = rg.AgentThread(
                srv, cluster, tmp / f"agent-{name}", cluster_id=name, span=True, gcs=False
            )
            agent.agent.sidecar = _sidecar(srv, name, tmp)
            stack.callback(agent.agent.sidecar.stop)
            stack.callback(agent.stop)
            agent.start()
        yield srv


def guest_pids() -> set[int]:
    """Processes of any guest node on this host (``backends.ray.ray_guest`` markers)."""
    return _procs.marked("tau-guest/", prefix=True)
