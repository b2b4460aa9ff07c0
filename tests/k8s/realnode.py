"""A real node for the test control plane: kubelet + containerd + runc that run containers.

Beside the kwok nodes (which run nothing), ``RealNode`` registers a kubelet built by
``k8s/build.sh kubelet`` (the pinned Kubernetes release, from its module) that runs
pods through a private containerd (Debian's ``containerd`` and ``runc``) on images built
here (``tests/k8s/oci.py``: pause and busybox, no registry). What this machine asks for,
each found out by trying it (docs/kubernetes.md, "A real node"):

- **Host-network pods on a loopback node address** (``IP``; the worker's own network
  namespace in a parallel run). The kubelet refuses a loopback ``--node-ip`` ("nodeIP
  can't be loopback address") and never sets the node's addresses, so ``start`` patches
  ``status.addresses`` once (the kubelet leaves them alone). No CNI plugin runs: a CNI
  config file is enough for containerd to call the network ready, and host-network pods
  never call it.
- **cgroup v1, root without CAP_SYS_RESOURCE**: ``failCgroupV1: false``, the cgroupfs
  driver under a ``cgroupRoot`` of its own, and ``restrict_oom_score_adj`` in containerd
  (runc could not lower a sandbox's ``oom_score_adj``: "can't get final child's PID").
- **Nothing of the host changes**: the kubelet writes sysctls (``vm.overcommit_memory``,
  ``kernel.panic``, ...) and fixed paths (``/var/lib/kubelet/device-plugins``,
  ``/var/log/containers``, ``/run/containerd/s``). kubelet and containerd run in a
  private mount namespace held by one process, where those sysctl files are stand-ins
  and ``/var/lib``, ``/var/log`` and ``/run`` are overlays on this node's directory; the
  namespace and every mount in it go with the holder.
- **GPUs are emulated**: ``nvidia.com/gpu`` is set in the node's capacity through the
  API (no device plugin: the scheduler counts them, containers get no device).
- **A taint** (``TAINT``) keeps every other test's pods on the kwok nodes; a pod for
  the real node tolerates it and selects it by name.
- **Cluster DNS**: the kubelet's ``clusterDNS`` is the control plane's (``cluster_dns``),
  so Service names resolve in pods that use it (``dnsPolicy: ClusterFirstWithHostNet``),
  as KubeRay's pods need for the head's name.

``stop`` kills every container task and containerd's shims, containerd, the kubelet and
the holder, removes the cgroups, and deletes the Node object.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import textwrap
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import yaml

from tests import procs
from tests.k8s import certs, cluster_dns, oci
from tests.k8s.controlplane import ControlPlane

__all__ = ["GPU", "IP", "NAME", "TAINT", "RealNode", "missing"]

IP = "127.0.0.90"
NAME = "real-node-0"
GPU = "nvidia.com/gpu"
TAINT = {"key": "taugrid.io/real-node", "value": "true", "effect": "NoSchedule"}
_CGROUPS = Path("/sys/fs/cgroup")
_SYSCTLS = (
    "vm/overcommit_memory",
    "vm/panic_on_oom",
    "kernel/panic",
    "kernel/panic_on_oops",
    "kernel/keys/root_maxkeys",
    "kernel/keys/root_maxbytes",
)


def missing(bindir: Path) -> list[str]:
    """What this machine lacks for a real node (a binary or a Debian package)."""
    out = [] if (bindir / "kubelet").is_file() else ["kubelet (k8s/build.sh kubelet)"]
    out += [p for p in ("containerd", "ctr", "runc", "unshare", "nsenter") if not _which(p)]
    return out + oci.missing_tools()


def _which(name: str) -> bool:
    return shutil.which(name) is not None or Path("/usr/sbin", name).exists()


@dataclass
class RealNode:
    """One kubelet node of ``cp`` under ``workdir``; ``start``/``stop`` (or ``with``)."""

    cp: ControlPlane
    workdir: Path
    gpus: int = 4
    registries: tuple[str, ...] = ()
    """``host:port`` of registries the node pulls from over plain HTTP (loopback ones)."""
    procs: dict[str, subprocess.Popen[bytes]] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.sock = self.workdir / "containerd" / "containerd.sock"
        # cgroups are one tree for the whole machine: two xdist workers' nodes (each in
        # its own network namespace, perhaps with the same directory name) must not share
        self.cgroup_root = f"taugrid-test-{self.workdir.name}-{os.getpid()}"
        self.logs = self.workdir / "logs"

    def __enter__(self) -> RealNode:
        try:
            self.start()
        except BaseException:
            self.stop()
            raise
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # -- start -----------------------------------------------------------------------

    def start(self) -> None:
        self.logs.mkdir(parents=True, exist_ok=True)
        images = oci.archives()
        self._hold_namespace()
        self._start_containerd()
        for archive in images:
            self.import_image(archive)
        self._make_cgroups()
        self._start_kubelet()
        self._register()

    def import_image(self, archive: Path) -> None:
        """Loads an OCI image archive into the node's containerd (pods name it with
        ``imagePullPolicy: Never``)."""
        self._ctr("images", "import", str(archive))

    def _spawn(self, name: str, argv: list[str], in_ns: bool = True) -> None:
        if in_ns:
            argv = ["nsenter", f"--mount=/proc/{self.procs['holder'].pid}/ns/mnt", "--", *argv]
        with (self.logs / f"{name}.log").open("wb") as out:
            self.procs[name] = subprocess.Popen(
                argv, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL
            )

    def _hold_namespace(self) -> None:
        ns = self.workdir / "ns"
        script = textwrap.dedent(
            f"""\
            set -eu
            N={ns}
            for d in var-lib var-log run; do mkdir -p $N/$d-upper $N/$d-work; done
            for d in lib log; do
              mount -t overlay ns-var-$d \\
                -o lowerdir=/var/$d,upperdir=$N/var-$d-upper,workdir=$N/var-$d-work /var/$d
            done
            mount -t overlay ns-run -o lowerdir=/run,upperdir=$N/run-upper,workdir=$N/run-work /run
            mkdir -p $N/sysctl
            for k in {" ".join(_SYSCTLS)}; do
              f=$N/sysctl/$(echo $k | tr / _)
              cat /proc/sys/$k > $f
              mount --bind $f /proc/sys/$k
            done
            touch $N/ready
            exec sleep infinity
            """
        )
        ns.mkdir(parents=True, exist_ok=True)
        self._spawn(
            "holder",
            ["unshare", "--mount", "--propagation", "private", "bash", "-c", script],
            False,
        )
        self._wait("the node's mount namespace", lambda: (ns / "ready").exists(), "holder")

    def _start_containerd(self) -> None:
        root = self.workdir / "containerd"
        cni = self.workdir / "cni"
        (cni / "net.d").mkdir(parents=True, exist_ok=True)
        (cni / "net.d" / "10-host-network-only.conflist").write_text(
            '{"cniVersion": "0.4.0", "name": "host-network-only",'
            ' "plugins": [{"type": "never-called"}]}\n'
        )
        config = self.workdir / "containerd.toml"
        config.write_text(_containerd_toml(root, cni))
        for host in self.registries:  # containerd's hosts.toml: plain HTTP to this host
            hosts = root / "certs.d" / host / "hosts.toml"
            hosts.parent.mkdir(parents=True, exist_ok=True)
            hosts.write_text(
                f'server = "http://{host}"\n[host."http://{host}"]\n'
                '  capabilities = ["pull", "resolve"]\n'
            )
        self._spawn("containerd", ["containerd", "--config", str(config)])
        self._wait("containerd", lambda: self._ctr_ok("version"), "containerd")

    def _ctr_ok(self, *args: str) -> bool:
        argv = ["ctr", "--address", str(self.sock), "-n", "k8s.io", *args]
        return subprocess.run(argv, capture_output=True, timeout=30).returncode == 0

    def _ctr(self, *args: str) -> str:
        argv = ["ctr", "--address", str(self.sock), "-n", "k8s.io", *args]
        return subprocess.run(argv, capture_output=True, text=True, timeout=60, check=True).stdout

    def _make_cgroups(self) -> None:
        """The kubelet's ``cgroupRoot`` in every v1 hierarchy (it refuses a missing one)."""
        for hierarchy in _hierarchies():
            (hierarchy / self.cgroup_root).mkdir(exist_ok=True)
        cpuset = _CGROUPS / "cpuset"
        if cpuset.is_dir():
            for f in ("cpuset.cpus", "cpuset.mems"):
                (cpuset / self.cgroup_root / f).write_text((cpuset / f).read_text())

    def _start_kubelet(self) -> None:
        crt, key = certs.client_cert(
            self.cp.pki, f"system:node:{NAME}", "system:nodes", self.workdir / "pki"
        )
        kubeconfig = self.workdir / "kubelet.kubeconfig"
        kubeconfig.write_text(yaml.safe_dump(_kubeconfig(self.cp, crt, key)))
        config = self.workdir / "kubelet.yaml"
        config.write_text(yaml.safe_dump(self._kubelet_config()))
        argv = [str(self.cp.bindir / "kubelet"), f"--config={config}"]
        argv += [f"--kubeconfig={kubeconfig}", f"--root-dir={self.workdir / 'kubelet'}"]
        argv += [f"--hostname-override={NAME}", f"--node-ip={IP}", "--v=2"]
        self._spawn("kubelet", argv)

    def _kubelet_config(self) -> dict[str, Any]:
        sock = f"unix://{self.sock}"
        return {
            "apiVersion": "kubelet.config.k8s.io/v1beta1",
            "kind": "KubeletConfiguration",
            "address": IP,
            "healthzBindAddress": IP,
            "readOnlyPort": 0,
            "failCgroupV1": False,
            "cgroupDriver": "cgroupfs",
            "cgroupRoot": f"/{self.cgroup_root}",
            "failSwapOn": False,
            "makeIPTablesUtilChains": False,
            "containerRuntimeEndpoint": sock,
            "imageServiceEndpoint": sock,
            "podLogsDir": str(self.workdir / "pod-logs"),
            "volumePluginDir": str(self.workdir / "volume-plugins"),
            "registerWithTaints": [TAINT],
            "clusterDNS": [self.cp.ip],
            "clusterDomain": cluster_dns.DOMAIN,
            # the API server calls the kubelet without a client certificate
            "authentication": {"anonymous": {"enabled": True}, "webhook": {"enabled": False}},
            "authorization": {"mode": "AlwaysAllow"},
            # a busy test machine: no evictions, no image garbage collection
            "evictionHard": {k: "1%" for k in ("nodefs.available", "imagefs.available")},
            "mergeDefaultEvictionSettings": False,
            "imageGCHighThresholdPercent": 100,
            "imageGCLowThresholdPercent": 99,
            "nodeStatusUpdateFrequency": "4s",
            "syncFrequency": "10s",
            "maxPods": 20,
            "shutdownGracePeriod": "0s",
        }

    def _register(self) -> None:
        """Wait for the Node, give it its address and GPUs (see the module's docstring),
        then wait until it is Ready."""
        with self.api() as c:
            self._wait("the kubelet registering", lambda: c.get(_NODE).status_code == 200)
            status = {
                "addresses": [
                    {"type": "InternalIP", "address": IP},
                    {"type": "Hostname", "address": NAME},
                ],
                "capacity": {GPU: str(self.gpus)},
                "allocatable": {GPU: str(self.gpus)},
            }
            r = c.patch(f"{_NODE}/status", json={"status": status}, headers=_MERGE)
            r.raise_for_status()
            self._wait("the node Ready", lambda: _ready(c.get(_NODE).json()))

    def api(self) -> httpx.Client:
        """An admin client of the control plane's API."""
        return self.cp.api()

    def _wait(self, what: str, ok: Any, proc: str = "kubelet", timeout_s: float = 90) -> None:
        deadline = time.monotonic() + timeout_s
        while not ok():
            p = self.procs.get(proc)
            if p is not None and p.poll() is not None:
                raise RuntimeError(f"{proc} exited waiting for {what}:\n{self.tail(proc)}")
            if time.monotonic() > deadline:
                raise RuntimeError(f"timed out waiting for {what}:\n{self.tail(proc)}")
            time.sleep(0.2)

    def tail(self, name: str, lines: int = 30) -> str:
        log = self.logs / f"{name}.log"
        text = log.read_text(errors="replace") if log.exists() else ""
        return "\n".join(text.splitlines()[-lines:])

    # -- stop ------------------------------------------------------------------------

    def stop(self) -> None:
        self._stop("kubelet")
        if "containerd" in self.procs and self.procs["containerd"].poll() is None:
            for task in self._tasks():
                subprocess.run(
                    ["ctr", "--address", str(self.sock), "-n", "k8s.io", "tasks", "rm", "-f", task],
                    capture_output=True,
                    timeout=30,
                )
        self._stop("containerd")
        # shims outlive containerd; each names this containerd's socket on its command line
        shims = subprocess.run(["pgrep", "-f", f"-address {self.sock}"], capture_output=True)
        for pid in shims.stdout.split():
            subprocess.run(["kill", "-9", pid.decode()], capture_output=True)
        self._stop("holder")  # the mount namespace and every mount in it go with it
        for hierarchy in _hierarchies():
            _rmtree_cgroup(hierarchy / self.cgroup_root)
        shutil.rmtree(self.workdir / "containerd" / "root", ignore_errors=True)  # image layers
        if getattr(self.cp, "pki", None) is not None and self.cp.alive():
            with self.api() as c:
                c.delete(_NODE)

    def _tasks(self) -> list[str]:
        try:
            return self._ctr("tasks", "ls", "-q").split()
        except (subprocess.SubprocessError, OSError):
            return []

    def _stop(self, name: str) -> None:
        procs.stop(self.procs.pop(name, None))


_NODE = f"/api/v1/nodes/{NAME}"
_MERGE = {"Content-Type": "application/merge-patch+json"}


def _ready(node: dict[str, Any]) -> bool:
    conditions = node.get("status", {}).get("conditions") or []
    return any(c["type"] == "Ready" and c["status"] == "True" for c in conditions)


def _hierarchies() -> list[Path]:
    """The mounted cgroup v1 hierarchies (``cpu``, ``memory``, ... and ``systemd``)."""
    if not _CGROUPS.is_dir():
        return []
    return [p for p in _CGROUPS.iterdir() if p.is_dir() and not p.is_symlink()]


def _rmtree_cgroup(path: Path) -> None:
    """Remove a cgroup and its children, deepest first (cgroups are removed by rmdir)."""
    if not path.is_dir():
        return
    for child in sorted((p for p in path.rglob("*") if p.is_dir()), key=lambda p: -len(p.parts)):
        child.rmdir()
    path.rmdir()


def _kubeconfig(cp: ControlPlane, crt: Path, key: Path) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [
            {
                "name": "test",
                "cluster": {"server": cp.url, "certificate-authority": str(cp.pki.ca_cert)},
            }
        ],
        "users": [{"name": NAME, "user": {"client-certificate": str(crt), "client-key": str(key)}}],
        "contexts": [{"name": "test", "context": {"cluster": "test", "user": NAME}}],
        "current-context": "test",
    }


def _containerd_toml(root: Path, cni: Path) -> str:
    cri = 'plugins."io.containerd.grpc.v1.cri"'
    return textwrap.dedent(
        f"""\
        version = 2
        root = "{root}/root"
        state = "{root}/state"
        disabled_plugins = [
          "io.containerd.snapshotter.v1.aufs", "io.containerd.snapshotter.v1.btrfs",
          "io.containerd.snapshotter.v1.zfs", "io.containerd.snapshotter.v1.devmapper",
          "io.containerd.tracing.processor.v1.otlp", "io.containerd.internal.v1.tracing"]
        [grpc]
          address = "{root}/containerd.sock"
        [ttrpc]
          address = "{root}/containerd.sock.ttrpc"
        [plugins."io.containerd.internal.v1.opt"]
          path = "{root}/opt"
        [{cri}]
          sandbox_image = "{oci.PAUSE}"
          stream_server_address = "{IP}"
          stream_server_port = "0"
          enable_selinux = false
          disable_apparmor = true
          disable_hugetlb_controller = true
          tolerate_missing_hugetlb_controller = true
          restrict_oom_score_adj = true
        [{cri}.containerd]
          snapshotter = "overlayfs"
          default_runtime_name = "runc"
        [{cri}.containerd.runtimes.runc]
          runtime_type = "io.containerd.runc.v2"
        [{cri}.containerd.runtimes.runc.options]
          BinaryName = "{shutil.which("runc") or "/usr/sbin/runc"}"
          Root = "{root}/runc"
          SystemdCgroup = false
        [{cri}.cni]
          bin_dir = "{cni}/bin"
          conf_dir = "{cni}/net.d"
          max_conf_num = 1
        [{cri}.registry]
          config_path = "{root}/certs.d"
        """
    )
