"""The test control plane: etcd, kube-apiserver, kube-controller-manager, kube-scheduler
and kwok, as built by ``k8s/build.sh`` (from source modules, cached outside the repo),
started on a 127.0.21.x loopback address with free ports, a self-made CA and a static
admin token, with a kubeconfig in the work directory. ``stop`` ends every process it
started (by its own handle) and waits for it."""

from __future__ import annotations

import os
import random
import socket
import ssl
import subprocess
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

import httpx
import yaml

from tests import procs
from tests.hub import cut_proxy
from tests.k8s import certs, cluster_dns

REPO = Path(__file__).resolve().parents[2]
BUILD_SCRIPT = REPO / "k8s" / "build.sh"
CORE = ("etcd", "kube-apiserver", "kube-controller-manager", "kube-scheduler", "kwok")
KWOK_NODE_ANNOTATION = "kwok.x-k8s.io/node"
KUBELET_STOPPED_LABEL = "taugrid.io/test-kubelet-stopped"
"""A node with this label gets no more status from kwok (its "kubelet" stopped):
kube-controller-manager's node lifecycle controller then marks it as it would a node
whose kubelet died (Ready Unknown, ``node.kubernetes.io/unreachable`` taints). Remove
the label and kwok makes it Ready again."""
ADMIN_TOKEN = "taugrid-test-admin-token"  # a test cluster's static token


def bin_dir() -> Path:
    """Where ``k8s/build.sh`` puts (or has put) the binaries for the pinned versions."""
    out = subprocess.run(
        [str(BUILD_SCRIPT), "--print-bin"], check=True, capture_output=True, text=True
    )
    return Path(out.stdout.strip())


def missing(bindir: Path, names: tuple[str, ...] = CORE) -> list[str]:
    """The binaries of ``names`` not built yet under ``bindir``."""
    return [n for n in names if not (bindir / n).is_file()]


def free_port(host: str) -> int:
    with socket.socket() as s:
        s.bind((host, 0))
        return int(s.getsockname()[1])


@dataclass
class _Proc:
    name: str
    popen: subprocess.Popen[bytes]
    log: Path

    def tail(self, lines: int = 25) -> str:
        text = self.log.read_text(errors="replace") if self.log.exists() else ""
        return "\n".join(text.splitlines()[-lines:])


@dataclass
class ControlPlane:
    """One control plane in ``workdir``; use ``start``/``stop`` (or ``with``)."""

    bindir: Path
    workdir: Path
    ip: str = field(default_factory=lambda: f"127.0.21.{random.randint(2, 250)}")
    ready_timeout_s: float = 180.0
    procs: list[_Proc] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.etcd_port = free_port(self.ip)
        self.etcd_peer_port = free_port(self.ip)
        self.port = free_port(self.ip)
        self.url = f"https://{self.ip}:{self.port}"
        self.kubeconfig = self.workdir / "kubeconfig"
        self.logs = self.workdir / "logs"
        self.kubelet_port = free_port(self.ip)
        octet = self.ip.rsplit(".", 1)[1]
        self.service_range = f"127.96.{octet}.0/24"
        """Services' cluster IPs: loopback addresses, a range per control plane (its
        address's last octet). No kube-proxy runs: a ``cut_proxy.Proxy`` relays the
        ``kubernetes`` Service's address (the range's first) to the API server, so a
        host-network pod on the real node reaches it as in-cluster clients do."""
        self.api_service_ip = f"127.96.{octet}.1"
        self.service_proxy: cut_proxy.Proxy | None = None
        self.dns: cluster_dns.ClusterDNS | None = None
        """The cluster's DNS (``cluster_dns``) on the control plane's address, port 53."""
        self.resolv_conf = self.workdir / "resolv.conf"
        """A resolver file naming ``dns``: what a process sees as /etc/resolv.conf when
        started with ``spawn(..., cluster_names=True)``."""
        self.pod_log = self.workdir / "pod-containers.log"
        """The file kwok's "kubelet" serves as every container's log (``pods/log``)."""

    # -- lifecycle -------------------------------------------------------------------

    def __enter__(self) -> ControlPlane:
        try:
            self.start()
        except BaseException:
            self.stop()
            raise
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def start(self, kwok: bool = True) -> None:
        self.logs.mkdir(parents=True, exist_ok=True)
        self.pki = certs.make_pki(self.workdir / "pki", self.ip, self.api_service_ip)
        self._start_etcd()
        self._start_apiserver()
        self.service_proxy = cut_proxy.Proxy(self.api_service_ip, (self.ip, self.port), 443)
        self._write_kubeconfig()
        self.dns = cluster_dns.ClusterDNS(self.api, self.ip).start()
        self.resolv_conf.write_text(
            f"nameserver {self.ip}\nsearch svc.{cluster_dns.DOMAIN} {cluster_dns.DOMAIN}\n"
            "options ndots:5\n"
        )
        self._start_controllers()
        if kwok:
            self._start_kwok()

    def stop(self) -> None:
        """Terminates every started process (newest first), killing any that linger."""
        if self.service_proxy is not None:
            self.service_proxy.close()
            self.service_proxy = None
        if self.dns is not None:
            self.dns.stop()
            self.dns = None
        for proc in reversed(self.procs):
            if proc.popen.poll() is None:
                proc.popen.terminate()
        for proc in reversed(self.procs):
            try:
                proc.popen.wait(timeout=15)
            except subprocess.TimeoutExpired:
                proc.popen.kill()
                proc.popen.wait(timeout=15)
        self.procs.clear()

    def api(self) -> httpx.Client:
        """An admin client of the API server."""
        return httpx.Client(
            base_url=self.url,
            verify=ssl.create_default_context(cafile=str(self.pki.ca_cert)),
            headers={"Authorization": f"Bearer {ADMIN_TOKEN}"},
            timeout=30,
        )

    def alive(self) -> list[str]:
        return [p.name for p in self.procs if p.popen.poll() is None]

    def stop_apiserver(self) -> None:
        """Terminates kube-apiserver alone (an outage the other components ride out);
        its log is kept beside the next one's."""
        proc = next(p for p in self.procs if p.name == "kube-apiserver")
        procs.stop(proc.popen, grace_s=30)
        self.procs.remove(proc)
        proc.log.rename(proc.log.with_name(f"kube-apiserver.{time.time_ns()}.log"))

    def start_apiserver(self) -> None:
        """Starts kube-apiserver again (same address, certificates and etcd)."""
        self._start_apiserver()

    # -- components ------------------------------------------------------------------

    def spawn(
        self,
        name: str,
        args: list[str],
        env: dict[str, str] | None = None,
        cluster_names: bool = False,
    ) -> _Proc:
        """Starts ``bindir/name`` (logging to ``logs/name.log``); ``stop`` ends it.
        ``cluster_names``: it resolves names through the cluster's DNS, as a process in
        a pod does (its own mount namespace, ``resolv_conf`` as /etc/resolv.conf)."""
        log = self.logs / f"{name}.log"
        argv = [str(self.bindir / name), *args]
        if cluster_names:
            bind = 'mount --bind "$0" /etc/resolv.conf && exec "$@"'
            argv = [
                "unshare",
                "--mount",
                "--propagation",
                "private",
                "--",
                "sh",
                "-c",
                bind,
                str(self.resolv_conf),
                *argv,
            ]
        with log.open("wb") as out:
            popen = subprocess.Popen(
                argv,
                stdout=out,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                cwd=self.workdir,
                env={**os.environ, **(env or {})},
                start_new_session=True,
            )
        proc = _Proc(name, popen, log)
        self.procs.append(proc)
        return proc

    def wait_ready(self, what: str, ok: Callable[[], bool], proc: _Proc) -> None:
        deadline = time.monotonic() + self.ready_timeout_s
        while time.monotonic() < deadline:
            if proc.popen.poll() is not None:
                raise RuntimeError(
                    f"{proc.name} exited with {proc.popen.returncode} before {what}; "
                    f"log {proc.log}:\n{proc.tail()}"
                )
            try:
                if ok():
                    return
            except httpx.HTTPError:
                pass
            time.sleep(0.5)
        raise TimeoutError(
            f"{what} not reached in {self.ready_timeout_s:.0f}s; log {proc.log}:\n{proc.tail()}"
        )

    def _start_etcd(self) -> None:
        client = f"http://{self.ip}:{self.etcd_port}"
        peer = f"http://{self.ip}:{self.etcd_peer_port}"
        proc = self.spawn(
            "etcd",
            [
                "--name=test",
                f"--data-dir={self.workdir / 'etcd'}",
                f"--listen-client-urls={client}",
                f"--advertise-client-urls={client}",
                f"--listen-peer-urls={peer}",
                f"--initial-advertise-peer-urls={peer}",
                f"--initial-cluster=test={peer}",
                "--unsafe-no-fsync",
                "--log-level=warn",
            ],
        )
        self.wait_ready(
            "etcd /health",
            lambda: httpx.get(f"{client}/health", timeout=5).status_code == 200,
            proc,
        )

    def _start_apiserver(self) -> None:
        pki = self.pki
        tokens = self.workdir / "tokens.csv"
        tokens.write_text(f'{ADMIN_TOKEN},admin,admin-uid,"system:masters"\n')
        proc = self.spawn(
            "kube-apiserver",
            [
                f"--etcd-servers=http://{self.ip}:{self.etcd_port}",
                f"--bind-address={self.ip}",
                f"--advertise-address={self.ip}",
                f"--secure-port={self.port}",
                f"--tls-cert-file={pki.serving_cert}",
                f"--tls-private-key-file={pki.serving_key}",
                f"--client-ca-file={pki.ca_cert}",
                f"--token-auth-file={tokens}",
                "--authorization-mode=Node,RBAC",
                f"--service-account-key-file={pki.sa_pub}",
                f"--service-account-signing-key-file={pki.sa_key}",
                "--service-account-issuer=https://kubernetes.default.svc",
                f"--service-cluster-ip-range={self.service_range}",
                f"--cert-dir={self.workdir / 'apiserver-certs'}",
                "--allow-privileged=true",
                "--profiling=false",
                # pods/log goes to kwok's "kubelet" server at the node's InternalIP
                "--kubelet-preferred-address-types=InternalIP",
            ],
        )
        self.wait_ready("kube-apiserver /readyz", self._readyz, proc)

    def _readyz(self) -> bool:
        r = httpx.get(
            f"{self.url}/readyz",
            verify=ssl.create_default_context(cafile=str(self.pki.ca_cert)),
            headers={"Authorization": f"Bearer {ADMIN_TOKEN}"},
            timeout=5,
        )
        return r.status_code == 200

    def _write_kubeconfig(self) -> None:
        cfg = {
            "apiVersion": "v1",
            "kind": "Config",
            "clusters": [
                {
                    "name": "test",
                    "cluster": {"server": self.url, "certificate-authority": str(self.pki.ca_cert)},
                }
            ],
            "users": [{"name": "admin", "user": {"token": ADMIN_TOKEN}}],
            "contexts": [{"name": "test", "context": {"cluster": "test", "user": "admin"}}],
            "current-context": "test",
        }
        self.kubeconfig.write_text(yaml.safe_dump(cfg))

    def _start_controllers(self) -> None:
        common = [
            f"--kubeconfig={self.kubeconfig}",
            f"--authentication-kubeconfig={self.kubeconfig}",
            f"--authorization-kubeconfig={self.kubeconfig}",
            "--leader-elect=false",
            f"--bind-address={self.ip}",
        ]
        self.spawn(
            "kube-controller-manager",
            [
                *common,
                f"--secure-port={free_port(self.ip)}",
                f"--cert-dir={self.workdir / 'kcm-certs'}",
                f"--service-account-private-key-file={self.pki.sa_key}",
                f"--root-ca-file={self.pki.ca_cert}",
                "--use-service-account-credentials=false",
            ],
        )
        self.spawn(
            "kube-scheduler",
            [
                *common,
                f"--secure-port={free_port(self.ip)}",
                f"--cert-dir={self.workdir / 'scheduler-certs'}",
            ],
        )

    def _start_kwok(self) -> None:
        # Not pod-complete: it "finishes" every Job's pod at once, so KubeRay's submitter
        # would end and KubeRay fail the RayJob (its Ray job, which no container runs,
        # never ends); here pods run until deleted, and tests that need a finished
        # object set its status themselves
        stages = sorted(
            p
            for p in (self.bindir.parent / "share" / "kwok-stages").glob("*.yaml")
            if p.name != "pod-complete.yaml"
        )
        if not stages:
            raise RuntimeError(
                f"no kwok stage YAMLs under {self.bindir.parent / 'share' / 'kwok-stages'}; "
                "run k8s/build.sh kwok (it copies them from the kwok module)"
            )
        config = self.workdir / "kwok-stages.yaml"
        self.pod_log.touch()
        docs = [_heartbeat_unless_stopped(yaml.safe_load(s.read_text())) for s in stages]
        config.write_text(yaml.safe_dump_all([*docs, self._cluster_logs()]))
        self.spawn(
            "kwok",
            [
                f"--kubeconfig={self.kubeconfig}",
                f"--config={config}",
                "--manage-all-nodes=false",
                f"--manage-nodes-with-annotation-selector={KWOK_NODE_ANNOTATION}=fake",
                # the nodes' InternalIP and kubelet port: kwok's server, which the API
                # server reaches for pods/log (a self-signed certificate it does not check)
                f"--node-ip={self.ip}",
                # a Hostname address too: kwok's node-initialize stage rewrites the
                # addresses of a node it makes Ready again, keeping only what it can
                # fill (without one, a node back from NotReady lost its InternalIP and
                # pods/log on it failed: "no preferred addresses found")
                "--node-name=kwok-node",
                f"--node-port={self.kubelet_port}",
                f"--server-address={self.ip}:{self.kubelet_port}",
                "--cidr=10.244.0.0/16",
            ],
        )

    def _cluster_logs(self) -> dict[str, object]:
        """kwok's ClusterLogs: every container's log is ``pod_log`` (CRI log lines, as
        the container runtime writes them)."""
        return {
            "apiVersion": "kwok.x-k8s.io/v1alpha1",
            "kind": "ClusterLogs",
            "metadata": {"name": "pod-containers"},
            "spec": {"logs": [{"logsFile": str(self.pod_log)}]},
        }


def _heartbeat_unless_stopped(stage: dict[str, Any]) -> dict[str, Any]:
    """kwok's node stages (initialize: Ready True; heartbeat) skip nodes labelled
    ``KUBELET_STOPPED_LABEL``; the other stages as they ship."""
    if stage["metadata"]["name"] in ("node-initialize", "node-heartbeat"):
        stopped = {
            "key": f'.metadata.labels["{KUBELET_STOPPED_LABEL}"]',
            "operator": "DoesNotExist",
        }
        stage["spec"]["selector"].setdefault("matchExpressions", []).append(stopped)
    return stage


T = TypeVar("T")


def wait_until(what: str, check: Callable[[], T | None], timeout_s: float = 120.0) -> T:
    """Polls ``check`` until it returns something truthy; raises naming ``what`` if it
    does not within ``timeout_s`` (bounded: the machine may be loaded)."""
    deadline = time.monotonic() + timeout_s
    last: T | None = None
    while time.monotonic() < deadline:
        last = check()
        if last:
            return last
        time.sleep(0.5)
    raise TimeoutError(f"{what}: not within {timeout_s:.0f}s (last seen: {last!r})")
