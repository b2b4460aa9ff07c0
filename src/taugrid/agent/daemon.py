"""``python -m taugrid.agent.daemon``: one cluster's agent process.

With ``--start-ray`` (the embedded platform) the agent owns a real local Ray cluster
built from the platform's node pools for its cluster (GPUs emulated as Ray logical
resources when the machine has none) and stops it on SIGTERM; otherwise it attaches
to ``--ray-dashboard``. A Ray cluster left running by a previous agent of the same
state directory (one killed with ``kill -9``) is adopted when all its nodes are alive,
so an agent restart never kills running attempts (the agent re-attaches to them);
a half-dead one is stopped and replaced.

Every cluster it starts uses Ray token authentication: the token lives in
``$TAU_HOME/agents/<cluster>.ray-token`` (0600) and this process exports
``RAY_AUTH_MODE=token`` / ``RAY_AUTH_TOKEN_PATH`` so its Jobs, state and GCS clients
(and the jobs, which inherit Ray's environment) present it. GCS and dashboard ports
default to free ones (``--ray-gcs-port`` / ``--ray-dashboard-port`` or
``TAU_RAY_GCS_PORT`` / ``TAU_RAY_DASHBOARD_PORT`` pin them).
A node of that cluster whose Ray processes die is started again within seconds (a
dead head restarts the whole cluster); nodes marked faulty are cordoned by
``backends.ray.ray_cordon``.
"""

from __future__ import annotations

import argparse
import logging
import os
import signal
import threading
from pathlib import Path
from types import FrameType

from taugrid import home as tau_home
from taugrid import private
from taugrid.agent import agent, hubclient
from taugrid.agent.attempts import guests
from taugrid.agent.data import datasync
from taugrid.backends import errors
from taugrid.backends.ray import ray_cordon, ray_jobs, ray_local
from taugrid.platform import load as platform_load
from taugrid.platform import models as pm
from taugrid.render import naming

__all__ = [
    "main",
    "node_shapes",
    "start_or_adopt",
    "stop_leftover",
    "use_ray_token",
]

log = logging.getLogger(__name__)


def node_shapes(cluster: pm.ClusterSpec) -> list[ray_local.NodeShape]:
    """One Ray node per declared node, shaped like its pool."""
    from taugrid.spec import units

    return [
        ray_local.NodeShape(
            num_cpus=int(pool.cpus_per_node),
            num_gpus=pool.gpus_per_node,
            accelerator=pool.gpu_model,
            labels={naming.POOL_LABEL: pool.name},
            memory=units.parse_quantity_bytes(pool.memory_per_node),
        )
        for pool in cluster.node_pools
        for _ in range(pool.nodes)
    ]


def _cluster_spec(platform: pm.Platform, cluster_id: str) -> tuple[str, pm.ClusterSpec]:
    for region in platform.regions:
        for c in region.clusters:
            if c.name == cluster_id:
                return region.name, c
    raise SystemExit(
        f"cluster {cluster_id} is not in the platform file; add it under regions[].clusters"
    )


def _env_port(name: str) -> int | None:
    value = os.environ.get(name)
    return int(value) if value else None


def use_ray_token(home: Path, cluster_id: str) -> Path:
    """Create (once) the cluster's Ray auth token and make this process present it."""
    path = ray_local.write_auth_token(tau_home.agent_ray_token(home, cluster_id))
    os.environ["RAY_AUTH_MODE"] = "token"
    os.environ["RAY_AUTH_TOKEN_PATH"] = str(path)
    os.environ.pop("RAY_AUTH_TOKEN", None)
    return path


def start_or_adopt(
    args: argparse.Namespace, spec: pm.ClusterSpec, state_dir: Path
) -> ray_local.LocalRayCluster:
    """The cluster a killed predecessor left running, if healthy; else a new one."""
    token = use_ray_token(args.home, args.cluster)
    old = ray_local.LocalRayCluster.attach(state_dir)
    if old is not None:
        try:
            if old.auth_token_file != token:
                raise errors.LocalClusterError("it does not use this cluster's Ray token")
            old.wait_ready(timeout_s=30)
            log.info("adopted the running Ray cluster at %s", old.gcs_address)
            return old
        except errors.LocalClusterError as exc:
            log.warning("stopping the Ray cluster left behind (%s)", exc.message)
            old.stop(grace_s=1)
    ip = args.ray_ip
    return ray_local.LocalRayCluster(
        ip,
        args.ray_gcs_port or ray_local.free_port(ip),
        args.ray_dashboard_port or ray_local.free_port(ip),
        node_shapes(spec),
        state_dir,
        auth_token_file=token,
    ).start()


def _watch_ray(cluster: ray_local.LocalRayCluster, stop: threading.Event) -> None:
    """Start again the Ray nodes whose processes died (the state report says so meanwhile)."""
    while not stop.wait(2.0):
        try:
            if revived := cluster.revive():
                log.warning("Ray nodes %s had died; started again", revived)
        except Exception as exc:  # keep watching: the next round may succeed
            log.error("restarting dead Ray nodes failed: %s", exc)


def _args() -> argparse.Namespace:
    p = argparse.ArgumentParser(description="TauGrid agent")
    p.add_argument(
        "--home", type=Path, default=Path(os.environ.get("TAU_HOME", "~/.tau")).expanduser()
    )
    p.add_argument(
        "--hub",
        help="the hub's URL, or several replicas' URLs comma-separated "
        "(required unless --stop-leftover-ray)",
    )
    p.add_argument(
        "--stop-leftover-ray",
        action="store_true",
        help="only stop the Ray cluster a killed agent of --cluster left running, then exit",
    )
    p.add_argument("--cluster", default="local")
    p.add_argument(
        "--token-file",
        type=Path,
        default=os.environ.get("TAU_AGENT_TOKEN_FILE"),
        help="the agent's hub token (default: $TAU_HOME/agents/<cluster>.token)",
    )
    p.add_argument("--platform", type=Path, default=os.environ.get("TAU_PLATFORM_FILE"))
    p.add_argument("--start-ray", action="store_true")
    p.add_argument("--ray-ip", default="127.0.0.2")
    p.add_argument("--ray-dashboard", default=None)
    p.add_argument("--ray-gcs-port", type=int, default=_env_port("TAU_RAY_GCS_PORT"))
    p.add_argument("--ray-dashboard-port", type=int, default=_env_port("TAU_RAY_DASHBOARD_PORT"))
    p.add_argument("--sync", type=float, default=1.0)
    p.add_argument("--report", type=float, default=10.0)
    p.add_argument(
        "--prewarm-wait",
        type=float,
        default=900.0,
        help="longest a run waits for its runtime to be prepared before it is submitted",
    )
    p.add_argument("--no-prewarm", action="store_true", help="submit without preparing")
    datasync.add_args(p)
    return p.parse_args()


def stop_leftover(home: Path, cluster_id: str) -> str | None:
    """Stop the Ray cluster left under ``home`` for ``cluster_id``; its GCS address."""
    left = ray_local.LocalRayCluster.attach(tau_home.agent_ray(home, cluster_id))
    if left is None:
        return None
    left.stop(grace_s=1)
    return left.gcs_address


def main() -> None:
    args = _args()
    private.restrict()  # records, scratch, Ray's session files: the owner's only
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(levelname)s %(message)s")
    if args.stop_leftover_ray:
        stopped = stop_leftover(args.home, args.cluster)
        print(f"stopped the Ray cluster left at {stopped}" if stopped else "", flush=True)
        return
    if not args.hub:
        raise SystemExit("--hub URL is required")
    _serve(args)


def _serve(args: argparse.Namespace) -> None:
    """Run the agent (and its Ray cluster with ``--start-ray``) until SIGTERM."""
    platform = (
        platform_load.load_platform(args.platform)
        if args.platform
        else platform_load.default_platform()
    )
    region, spec = _cluster_spec(platform, args.cluster)
    state_dir = tau_home.agent_state(args.home, args.cluster)
    token_file = args.token_file or tau_home.agent_token(args.home, args.cluster)
    try:
        token = token_file.read_text().strip()
    except OSError as exc:
        raise SystemExit(
            f"cannot read the agent's hub token at {token_file}: {exc.strerror}; the hub "
            f"writes it to its own $TAU_HOME/agents/{args.cluster}.token: copy it here or "
            "pass --token-file"
        ) from None
    cluster = None
    if spec.backend == "kubernetes":
        _serve_kubernetes(args, platform, region, spec, state_dir, token)
        return
    if args.start_ray:
        (state_dir / "ray").mkdir(parents=True, exist_ok=True)
        cluster = start_or_adopt(args, spec, state_dir / "ray")
        backend = cluster.backend(emulated_gpus=spec.emulated_gpus or ray_local.gpus_are_emulated())
    else:
        backend = ray_jobs.RayBackend(args.ray_dashboard or f"http://{args.ray_ip}:8265")
    hub = hubclient.HubClient(args.hub, token, args.cluster)
    cordon = ray_cordon.GpuCordon(backend, state_dir / "cordons.json")
    cfg = agent.AgentConfig(
        args.cluster,
        region,
        state_dir,
        sync_s=args.sync,
        report_s=args.report,
        prewarm=not args.no_prewarm,
        prewarm_wait_s=args.prewarm_wait,
        expected_nodes=len(node_shapes(spec)) if cluster is not None else None,
        store_endpoint=os.environ.get("TAU_STORE_ENDPOINT") or None,
        spot_pools=spec.spot_pools,
        # its own Ray cluster: it may head spanning runs and lend them guest nodes
        span=guests.SpanConfig(args.ray_ip, cluster.gcs_address, cluster.auth_token_file)
        if cluster is not None
        else None,
    )
    stop = threading.Event()
    sidecar: datasync.Sidecar | None = None

    def _term(_sig: int, _frame: FrameType | None) -> None:
        stop.set()

    signal.signal(signal.SIGTERM, _term)
    signal.signal(signal.SIGINT, _term)
    if cluster is not None:
        threading.Thread(target=_watch_ray, args=(cluster, stop), daemon=True).start()
    try:
        the_agent = agent.Agent(cfg, backend, hub, cordon)
        the_agent.sidecar = sidecar = datasync.from_args(args, args.hub, token, args.cluster)
        the_agent.run(stop)
    finally:
        if sidecar is not None:
            sidecar.stop()
        hub.close()
        if cluster is not None and os.environ.get("TAU_KEEP_RAY") != "1":
            cluster.stop()


def _serve_kubernetes(
    args: argparse.Namespace,
    platform: pm.Platform,
    region: str,
    spec: pm.ClusterSpec,
    state_dir: Path,
    token: str,
) -> None:
    """Run the agent of a ``backend: kubernetes`` cluster (its kubeconfig/context) until
    SIGTERM: no Ray to start, no runtime pre-warm; nodes marked faulty get a condition
    and a taint (``backends.kube.kube_marks``)."""
    from taugrid.backends.kube import kube_marks, kubernetes

    backend = kubernetes.KubernetesBackend(platform, spec)
    hub = hubclient.HubClient(args.hub, token, args.cluster)
    cfg = agent.AgentConfig(
        args.cluster, region, state_dir, sync_s=args.sync, report_s=args.report, prewarm=False
    )
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda _s, _f: stop.set())
    signal.signal(signal.SIGINT, lambda _s, _f: stop.set())
    try:
        agent.Agent(cfg, backend, hub, kube_marks.NodeMarks(backend.api)).run(stop)
    finally:
        hub.close()
        backend.close()


if __name__ == "__main__":
    main()
