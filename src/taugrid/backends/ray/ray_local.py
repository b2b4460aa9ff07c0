"""``LocalRayCluster``: a real multi-node Ray cluster on this host, owned by one process.

Owns starting, growing, killing and stopping the embedded platform's (and the tests')
Ray cluster. Each node is one ``ray start --block`` process in its own session, with
its own ``--temp-dir`` and, ideally, its own loopback IP (``127.0.0.x``), so several
clusters — other users' included — coexist on one host. A node may also run inside a
network namespace (``NodeShape.netns``, the lab's regions) on one of its addresses: one
cluster then spans regions, its nodes joined over the lab's shaped links. Nothing here runs
``ray stop`` (it kills every Ray cluster on the host): a node's processes are found by
the marker environment variable described in ``_procs`` and signalled by pid.

Invariants:

- node 0 is the head (GCS, dashboard, autoscaler monitor); the others join it;
- GPUs are Ray *logical* resources (``--num-gpus``) plus ``accelerator_type:<model>``
  (one unit per GPU); ``emulated`` is True unless ``nvidia-smi`` lists devices;
- ``state_dir`` holds ``cluster.json`` (addresses, pids, temp dirs) and each node's
  ``ray start`` output (``node-<i>.log``); Ray's own session logs live in the node's
  short temp dir under /tmp (Unix socket paths must stay under 107 bytes) and are
  removed by ``stop()``;
- with ``auth_token_file`` (what the platform always passes) every node runs with
  Ray's token authentication (``RAY_AUTH_MODE=token``, ``RAY_AUTH_TOKEN_PATH``): GCS,
  raylets, workers and the dashboard refuse a client without the token; without it
  (tests only) auth is explicitly off. The dashboard listens on the node's loopback
  IP; Ray binds its C++ gRPC servers and metrics endpoints to every interface for a
  127.0.0.x node (there is no option), which is why the token matters;
- GCS health checks run every ``health_check_period_ms`` so a killed node is DEAD in
  the inventory within about ``period x threshold`` (about 5 s by default, not Ray's 30 s).
"""

from __future__ import annotations

import glob
import json
import logging
import os
import re
import secrets
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from types import TracebackType
from typing import Any

import httpx
import pydantic

from taugrid.backends import errors
from taugrid.backends.ray import _procs, ray_jobs
from taugrid.render import command

__all__ = [
    "LocalRayCluster",
    "NodeShape",
    "default_nodes",
    "free_port",
    "gpus_are_emulated",
    "node_args",
    "node_env",
    "start_argv",
    "write_auth_token",
]

_STATE_FILE = "cluster.json"
# What a node's log says when Ray gave up waiting for its raylet (fixed 30 s in Ray).
_STARTUP_TIMEOUTS = ("timed out during startup", "Timed out waiting for node info")
START_TIMEOUT_S = 60.0 + command.RAYLET_REGISTER_S
"""How long a start waits for every node: the head's dashboard, then the time Ray itself
gives a raylet to register. At 90 s a cold CI's embedded platform gave up on its second
node after 64 s, while Ray would still have waited for it."""
log = logging.getLogger(__name__)
_SETUP_LINE = re.compile(r"^[^\n]*job_manager\.py:\d+ -- Runtime env is setting up\.\n?", re.M)
"""What Ray's job manager writes into the head's copy of every driver log first."""


class NodeShape(pydantic.BaseModel):
    """The declared (logical) resources of one node."""

    model_config = pydantic.ConfigDict(extra="forbid", frozen=True)

    num_cpus: int = pydantic.Field(default=16, ge=0)
    num_gpus: int = pydantic.Field(default=4, ge=0)
    accelerator: str | None = pydantic.Field(default="A100-80G", description="GPU model")
    memory: int = pydantic.Field(default=128 * 2**30, ge=0, description="logical bytes")
    object_store_memory: int = pydantic.Field(default=200 * 10**6, ge=80 * 10**6)
    resources: dict[str, float] = pydantic.Field(default_factory=dict)
    labels: dict[str, str] = pydantic.Field(default_factory=dict)
    ip: str | None = pydantic.Field(default=None, description="None: the head's IP")
    netns: str | None = pydantic.Field(
        default=None, description="network namespace the node runs in (the lab's regions)"
    )

    def ray_resources(self) -> dict[str, float]:
        """Custom resources for ``ray start --resources`` (the GPU model included)."""
        extra = dict(self.resources)
        if self.accelerator and self.num_gpus:
            extra.setdefault(f"accelerator_type:{self.accelerator}", float(self.num_gpus))
        return extra


def default_nodes() -> list[NodeShape]:
    """The embedded default: 2 nodes x 4 A100-80G GPUs, 16 CPUs, 128Gi each."""
    return [NodeShape(), NodeShape()]


def gpus_are_emulated() -> bool:
    """False only when ``nvidia-smi -L`` lists at least one device."""
    exe = shutil.which("nvidia-smi")
    if exe is None:
        return True
    try:
        out = subprocess.run([exe, "-L"], capture_output=True, text=True, timeout=10)
    except (OSError, subprocess.SubprocessError):
        return True
    return not any(line.startswith("GPU ") for line in out.stdout.splitlines())


def free_port(ip: str, *also: str) -> int:
    """A TCP port nobody listens on at ``ip``, nor at the addresses ``also``, right now
    (the kernel's pick for ``ip``)."""
    for _ in range(100):
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
            s.bind((ip, 0))
            port = int(s.getsockname()[1])
        if not any(_port_in_use(other, port) for other in also):
            return port
    raise errors.LocalClusterError(f"no port free on {ip} and {', '.join(also)}")


def _port_in_use(ip: str, port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind((ip, port))
        except OSError:
            return True
    return False


def _auth_env(token_file: Path | None) -> dict[str, str]:
    if token_file is None:
        return {"RAY_AUTH_MODE": "disabled"}
    return {"RAY_AUTH_MODE": "token", "RAY_AUTH_TOKEN_PATH": str(token_file)}


def write_auth_token(path: Path) -> Path:
    """Create a Ray auth token file (0600) at ``path`` unless one exists; returns it."""
    if not path.exists():
        path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "w") as fh:
            fh.write(secrets.token_hex(32))
    os.chmod(path, 0o600)
    return path


def start_argv(shape: NodeShape) -> list[str]:
    """``ray start --block`` with this interpreter, in the node's namespace if it has one."""
    ray = [sys.executable, "-m", "ray.scripts.scripts", "start", "--block"]
    return ["ip", "netns", "exec", shape.netns, *ray] if shape.netns is not None else ray


def node_args(shape: NodeShape, ip: str, temp_dir: Path) -> list[str]:
    """The ``ray start`` flags every node of ours gets: its address and declared shape."""
    args = [
        f"--node-ip-address={ip}",
        f"--num-cpus={shape.num_cpus}",
        f"--num-gpus={shape.num_gpus}",
        f"--memory={shape.memory}",
        f"--object-store-memory={shape.object_store_memory}",
        f"--resources={json.dumps(shape.ray_resources())}",
        f"--temp-dir={temp_dir}",
        "--dashboard-agent-listen-port=0",
        "--disable-usage-stats",
    ]
    if shape.labels:
        args.append("--labels=" + ",".join(f"{k}={v}" for k, v in shape.labels.items()))
    return args


def node_env(marker: str, token_file: Path | None, health: tuple[int, int]) -> dict[str, str]:
    """A node's environment: its process marker, Ray's auth mode and health checks."""
    env = {
        k: v for k, v in os.environ.items() if not k.startswith(("RAY_ADDRESS", "RAY_AUTH_TOKEN"))
    }
    env.update(
        {
            _procs.MARKER_ENV: marker,
            "RAY_USAGE_STATS_ENABLED": "0",
            # Explicit either way: Ray 2.60 turns token auth on by itself when
            # ~/.ray/auth_token exists, which would tie this cluster to the home dir.
            **_auth_env(token_file),
            "RAY_health_check_period_ms": str(health[0]),
            "RAY_health_check_failure_threshold": str(health[1]),
            "RAY_health_check_initial_delay_ms": "1000",
            **{k: env.get(k, v) for k, v in command.RAY_NODE_ENV.items()},
        }
    )
    # Job entrypoints say `python ...`: make that the cluster's own interpreter (the
    # one with Ray, TauGrid and the job's libraries), not whatever PATH finds first.
    bindir = str(Path(sys.executable).parent)
    env["PATH"] = os.pathsep.join([bindir, env.get("PATH", "")])
    return env


class _Node:
    """Bookkeeping of one started node (mutable, private)."""

    def __init__(self, index: int, shape: NodeShape, ip: str, temp_dir: Path, log: Path) -> None:
        self.index, self.shape, self.ip = index, shape, ip
        self.temp_dir, self.log = temp_dir, log
        self.proc: subprocess.Popen[bytes] | None = None
        self.killed = False


class _LocalLogsBackend(ray_jobs.RayBackend):
    """A ``RayBackend`` that reads a driver's log from its own node's temp dir.

    Every node has its own ``--temp-dir``, and a worker node's dashboard agent serves
    job logs from the head's: for a driver on any other node, Ray's logs API returns
    only the head's "Runtime env is setting up" line. (One shared temp dir is no fix:
    every node's log monitor then forwards every worker's output.)
    """

    def __init__(self, address: str, tmp_root: Path | None, **kwargs: Any) -> None:
        super().__init__(address, **kwargs)
        self._tmp_root = tmp_root

    def logs(self, job_id: str) -> str:
        if self._tmp_root is not None:
            pattern = f"n*/session_*/logs/job-driver-{glob.escape(job_id)}.log"
            for path in sorted(self._tmp_root.glob(pattern)):
                if path.parts[-4] != "n0":  # the head's copy is what the API returns
                    return path.read_text(errors="replace")
        # Until a driver on another node has written its own file, the API returns the
        # head's stub line; dropped, so that a reader's offset into it is never applied
        # to the driver's file that replaces it (which would cut its first characters).
        return _SETUP_LINE.sub("", super().logs(job_id))


class LocalRayCluster:
    """A local Ray cluster of ``nodes`` (node 0 is the head) at ``ip:gcs_port``.

    ``job_start_timeout_s`` bounds how long a Ray Job may stay PENDING (waiting for
    its entrypoint resources) before Ray fails it; Ray's default is 15 minutes.
    """

    def __init__(
        self,
        ip: str,
        gcs_port: int,
        dashboard_port: int,
        nodes: list[NodeShape],
        state_dir: Path,
        *,
        health_check_period_ms: int = 1000,
        health_check_failure_threshold: int = 5,
        job_start_timeout_s: float | None = None,
        auth_token_file: Path | None = None,
    ) -> None:
        if not nodes:
            raise ValueError("a cluster needs at least one node (the head)")
        self.ip, self.gcs_port, self.dashboard_port = ip, gcs_port, dashboard_port
        self.state_dir = Path(state_dir)
        self.emulated = gpus_are_emulated()
        self.start_seconds: float | None = None
        self._shapes = list(nodes)
        self._health = (health_check_period_ms, health_check_failure_threshold)
        self._job_start_timeout_s = job_start_timeout_s
        self.auth_token_file = Path(auth_token_file) if auth_token_file else None
        self._token = uuid.uuid4().hex[:12]
        self._tmp_root: Path | None = None
        self._nodes: list[_Node] = []

    # -- addresses -----------------------------------------------------------------
    @property
    def gcs_address(self) -> str:
        """``IP:PORT`` of the GCS (what ``ray start --address`` and ``ray.init`` take)."""
        return f"{self.ip}:{self.gcs_port}"

    @property
    def dashboard_url(self) -> str:
        """``http://IP:PORT`` of the dashboard (the Jobs API address)."""
        return f"http://{self.ip}:{self.dashboard_port}"

    def backend(self, **kwargs: Any) -> ray_jobs.RayBackend:
        """A ``RayBackend`` for this cluster (GCS-fresh inventory, ``emulated`` set)."""
        kwargs.setdefault("gcs_address", self.gcs_address)
        kwargs.setdefault("emulated_gpus", self.emulated)
        return _LocalLogsBackend(self.dashboard_url, self._tmp_root, **kwargs)

    # -- lifecycle -----------------------------------------------------------------
    def start(self, timeout_s: float = START_TIMEOUT_S) -> LocalRayCluster:
        """Start the head, then every other node; return once all are ALIVE (in the
        host's start slot, ``_procs.start_slot``).

        A node whose raylet does not register with the GCS in time (a busy machine) is
        a startup timeout: everything is stopped and started once more.
        """
        with _procs.start_slot():
            try:
                return self._start_once(timeout_s)
            except errors.LocalClusterError as exc:
                if not any(m in str(exc) for m in _STARTUP_TIMEOUTS):
                    raise
                log.warning("Ray start timed out on a busy machine; starting it once more")
                self._wait_ports_free(30.0)
                return self._start_once(timeout_s)

    def _wait_ports_free(self, timeout_s: float) -> None:
        deadline = time.monotonic() + timeout_s
        while (
            time.monotonic() < deadline
            and self._shapes[0].netns is None
            and any(_port_in_use(self.ip, p) for p in (self.gcs_port, self.dashboard_port))
        ):
            time.sleep(0.5)

    def _start_once(self, timeout_s: float) -> LocalRayCluster:
        if self._nodes:
            raise errors.LocalClusterError("cluster already started", hint="stop() it first")
        for port in (self.gcs_port, self.dashboard_port):
            if self._shapes[0].netns is None and _port_in_use(self.ip, port):
                raise errors.LocalClusterError(
                    f"port {self.ip}:{port} is already in use",
                    hint="pick free ports (or stop the cluster that holds them)",
                )
        t0 = time.monotonic()
        self.state_dir.mkdir(parents=True, exist_ok=True)
        self._tmp_root = Path(tempfile.mkdtemp(prefix="tau-ray-", dir="/tmp"))
        try:
            self._launch(self._shapes[0])
            self._wait_dashboard(t0 + timeout_s)
            # A joining node looks the head up in the GCS and gives up after Ray's 20
            # tries 2 s apart; on a loaded machine the head's raylet registered later
            # than that ("No node info found for head node in GCS", cold CI).
            self.wait_ready(max(t0 + timeout_s - time.monotonic(), 1.0))
            for shape in self._shapes[1:]:
                self._launch(shape)
            self.wait_ready(max(t0 + timeout_s - time.monotonic(), 1.0))
        except BaseException:
            self.stop(grace_s=0)
            raise
        self.start_seconds = time.monotonic() - t0
        return self

    @classmethod
    def attach(cls, state_dir: Path) -> LocalRayCluster | None:
        """The cluster a previous process started from ``state_dir``, if it still runs.

        Used by an agent that restarts: running jobs keep running, and ``stop()`` of
        the attached object still finds every node process by its marker.
        """
        path = Path(state_dir) / _STATE_FILE
        if not path.exists():
            return None
        state = json.loads(path.read_text())
        token = state["marker"].split("=", 1)[1].split("/", 1)[0]
        if not _procs.marked(token + "/", prefix=True):
            return None
        gcs_ip, gcs_port = state["gcs_address"].rsplit(":", 1)
        dash_port = int(state["dashboard_url"].rsplit(":", 1)[1])
        shapes = [NodeShape.model_validate(n["shape"]) for n in state["nodes"]]
        auth = state.get("auth_token_file")
        cluster = cls(gcs_ip, int(gcs_port), dash_port, shapes, Path(state_dir))
        cluster.auth_token_file = Path(auth) if auth else None
        cluster._token = token
        cluster._tmp_root = Path(state["tmp_root"])
        cluster._nodes = [
            _Node(n["index"], shape, n["ip"], Path(n["temp_dir"]), Path(n["log"]))
            for n, shape in zip(state["nodes"], shapes, strict=True)
        ]
        return cluster

    def add_node(self, shape: NodeShape | None = None, timeout_s: float = 60.0) -> int:
        """Start one more node joining the head; returns its index once it is ALIVE."""
        if not self._nodes:
            raise errors.LocalClusterError("start() the cluster before adding nodes")
        with _procs.start_slot():
            node = self._launch(shape or self._shapes[-1])
            self.wait_ready(timeout_s)
        return node.index

    def heal(self, timeout_s: float = 120.0) -> None:
        """Wait until every node not killed on purpose is ALIVE in the GCS, starting again
        (``revive``) those whose processes died. A node the GCS declared dead while its
        processes still run (its link cut, or its health checks starved) exits by itself
        once it hears so, as Ray's raylet does, and is started again then."""
        self._wait_alive(timeout_s, lambda left: self.revive(timeout_s=max(1.0, left)))

    def revive(self, timeout_s: float = 90.0) -> list[int]:
        """Start again every node whose Ray processes died on their own; their indexes.

        A worker node is started again and rejoins (Ray gives it a new node ID). A dead
        head took the GCS with it, so the whole cluster is started again. Nodes killed
        on purpose (``kill_node``) stay down.
        """
        dead = [n for n in self._nodes if not n.killed and not self._running(n)]
        if not dead:
            return []
        if dead[0].index == 0:
            self.stop(grace_s=1)
            self.start(timeout_s)
            return [n.index for n in self._nodes]
        known = {r["node_id"] for r in self._node_rows()}  # the dead may still look alive
        for node in dead:
            _procs.terminate(self._marker(node), grace_s=1)  # what is left of it
            self._spawn(node)
        self._write_state()
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            rows = self._node_rows()
            if sum(r["node_id"] not in known and r.get("state") == "ALIVE" for r in rows) >= len(
                dead
            ):
                return [n.index for n in dead]
            time.sleep(0.25)
        raise errors.LocalClusterError(
            f"Ray nodes {[n.index for n in dead]} did not come back in {timeout_s:.0f}s",
            hint=f"see the node logs under {self.state_dir}",
        )

    def kill_node(self, node: int | str) -> None:
        """SIGKILL every process of a node (by index or Ray node id): a machine dying.

        Ray notices through missed health checks; the node turns DEAD and the actors,
        tasks and job drivers on it fail. Killing node 0 takes the whole cluster down.
        """
        target = self._find(node)
        target.killed = True
        left = _procs.terminate(self._marker(target), grace_s=0)
        if target.proc is not None:
            target.proc.wait(timeout=10)
        if left:
            raise errors.LocalClusterError(f"node {target.index} pids {sorted(left)} survived")

    def stop(self, grace_s: float = 3.0) -> None:
        """Stop every node (workers first), remove temp dirs; idempotent."""
        for node in reversed(self._nodes):
            _procs.terminate(self._marker(node), grace_s=grace_s)
            if node.proc is not None and node.proc.poll() is None:
                node.proc.kill()
            if node.proc is not None:
                node.proc.wait(timeout=10)
        left = _procs.terminate(self._token + "/", prefix=True, grace_s=0)
        self._nodes = []
        if self._tmp_root is not None:
            shutil.rmtree(self._tmp_root, ignore_errors=True)
            self._tmp_root = None
        if left:
            raise errors.LocalClusterError(f"Ray processes {sorted(left)} survived stop()")

    def __enter__(self) -> LocalRayCluster:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()

    # -- observation ---------------------------------------------------------------
    def pids(self) -> set[int]:
        """Every live process of this cluster (for leak checks)."""
        return _procs.marked(self._token + "/", prefix=True)

    def node_ids(self) -> dict[int, str]:
        """Node index → Ray node id, for nodes Ray knows (by IP and start order)."""
        rows = self._node_rows()
        out: dict[int, str] = {}
        for node in self._nodes:
            match = [r for r in rows if r.get("node_ip") == node.ip]
            match.sort(key=lambda r: int(r.get("start_time_ms") or 0))
            same_ip = [n for n in self._nodes if n.ip == node.ip]
            match = match[-len(same_ip) :]  # a revived node replaces its dead self
            pos = same_ip.index(node)
            if pos < len(match):
                out[node.index] = match[pos]["node_id"]
        return out

    def wait_ready(self, timeout_s: float = 60.0) -> None:
        """Block until every node not killed is ALIVE in Ray's view."""
        self._wait_alive(timeout_s, lambda _left: self._check_processes())

    def _wait_alive(self, timeout_s: float, each_round: Callable[[float], object]) -> None:
        """Until every node not killed is ALIVE: ``each_round(seconds left)`` first, then
        Ray's view; raises naming how many were alive when ``timeout_s`` ran out."""
        deadline = time.monotonic() + timeout_s
        want = sum(1 for n in self._nodes if not n.killed)
        alive = 0
        while time.monotonic() < deadline:
            each_round(deadline - time.monotonic())
            try:
                alive = sum(1 for r in self._node_rows() if r.get("state") == "ALIVE")
            except (httpx.HTTPError, KeyError, ValueError):
                alive = 0
            if alive >= want:
                return
            time.sleep(0.25)
        raise errors.LocalClusterError(
            f"only {alive} of {want} Ray nodes alive after {timeout_s:.0f}s",
            hint=f"see the node logs under {self.state_dir}",
        )

    # -- private -------------------------------------------------------------------
    def _marker(self, node: _Node) -> str:
        return f"{self._token}/{node.index}"

    def _find(self, node: int | str) -> _Node:
        if isinstance(node, int):
            if 0 <= node < len(self._nodes):
                return self._nodes[node]
        else:
            for index, node_id in self.node_ids().items():
                if node_id == node:
                    return self._nodes[index]
        raise errors.LocalClusterError(f"no node {node!r} in this cluster")

    def auth_headers(self) -> dict[str, str]:
        """The ``Authorization`` header Ray's HTTP servers want ({} when auth is off)."""
        if self.auth_token_file is None:
            return {}
        return {"Authorization": f"Bearer {self.auth_token_file.read_text().strip()}"}

    def _node_rows(self) -> list[dict[str, Any]]:
        resp = httpx.get(
            f"{self.dashboard_url}/api/v0/nodes",
            params={"limit": 1000, "detail": 1},
            headers=self.auth_headers(),
            timeout=5,
        )
        resp.raise_for_status()
        rows: list[dict[str, Any]] = resp.json()["data"]["result"]["result"]
        return rows

    def _check_processes(self) -> None:
        for node in self._nodes:
            if node.proc is not None and not node.killed and node.proc.poll() is not None:
                tail = node.log.read_text(errors="replace")[-2000:]
                raise errors.LocalClusterError(
                    f"Ray node {node.index} ({node.ip}) exited with {node.proc.returncode}:\n"
                    f"{tail}",
                    hint=f"full log: {node.log}",
                )

    def _wait_dashboard(self, deadline: float) -> None:
        while time.monotonic() < deadline:
            self._check_processes()
            try:
                code = httpx.get(
                    f"{self.dashboard_url}/api/version", headers=self.auth_headers(), timeout=2
                ).status_code
            except httpx.HTTPError:
                code = 0
            if code == 200:
                return
            if code in (401, 403):
                raise errors.LocalClusterError(
                    f"Ray dashboard {self.dashboard_url} refused this cluster's token ({code})",
                    hint="another Ray cluster holds this address; stop it or pick other ports",
                )
            time.sleep(0.25)
        raise errors.LocalClusterError(
            f"Ray dashboard {self.dashboard_url} not up in time",
            hint=f"see {self.state_dir}/node-0.log",
        )

    def _launch(self, shape: NodeShape) -> _Node:
        assert self._tmp_root is not None
        index = len(self._nodes)
        ip = shape.ip or self.ip
        node = _Node(
            index, shape, ip, self._tmp_root / f"n{index}", self.state_dir / f"node-{index}.log"
        )
        node.temp_dir.mkdir(parents=True, exist_ok=True)
        self._spawn(node)
        self._nodes.append(node)
        self._write_state()
        return node

    def _running(self, node: _Node) -> bool:
        if node.proc is not None:
            return node.proc.poll() is None
        return bool(_procs.marked(self._marker(node)))  # attached: a previous agent's

    def _spawn(self, node: _Node) -> None:
        """Run ``node``'s ``ray start`` in a session of its own, appending to its log."""
        with node.log.open("ab") as log:
            node.proc = subprocess.Popen(
                self._command(node),
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                env=self._env(node),
                start_new_session=True,  # our Ctrl-C must not reach Ray directly
                cwd=node.temp_dir,
            )

    def _command(self, node: _Node) -> list[str]:
        shape = node.shape
        ray = start_argv(shape)
        common = node_args(shape, node.ip, node.temp_dir)
        if node.index > 0:
            return [*ray, f"--address={self.gcs_address}", *common]
        # A fresh namespace has every port free; the host cannot bind its addresses.
        # Ray's client proxy binds its port on 127.0.0.1 too: it must be free there
        # (a hub of another home listens on 127.0.0.1, CI's test_node_faults_cli).
        client_port = free_port("127.0.0.1") if shape.netns else free_port(self.ip, "127.0.0.1")
        return [
            *ray,
            "--head",
            f"--port={self.gcs_port}",
            f"--dashboard-host={self.ip}",
            f"--dashboard-port={self.dashboard_port}",
            f"--ray-client-server-port={client_port}",
            *common,
        ]

    def _env(self, node: _Node) -> dict[str, str]:
        env = node_env(self._marker(node), self.auth_token_file, self._health)
        if self._job_start_timeout_s is not None:
            env["RAY_JOB_START_TIMEOUT_SECONDS"] = str(self._job_start_timeout_s)
        return env

    def _write_state(self) -> None:
        state = {
            "gcs_address": self.gcs_address,
            "dashboard_url": self.dashboard_url,
            "emulated_gpus": self.emulated,
            "tmp_root": str(self._tmp_root),
            "auth_token_file": str(self.auth_token_file) if self.auth_token_file else None,
            "marker": f"{_procs.MARKER_ENV}={self._token}/<index>",
            "nodes": [
                {
                    "index": n.index,
                    "ip": n.ip,
                    "pid": n.proc.pid if n.proc else None,
                    "temp_dir": str(n.temp_dir),
                    "log": str(n.log),
                    "shape": n.shape.model_dump(),
                }
                for n in self._nodes
            ],
        }
        (self.state_dir / _STATE_FILE).write_text(json.dumps(state, indent=2))
