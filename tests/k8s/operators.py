"""Kueue's manager and KubeRay's ray-operator (built by ``k8s/build.sh kueue kuberay``)
started against the test control plane, as processes the control plane's ``stop`` ends.

Kueue runs its webhook server on the control plane's loopback address with the
harness's serving certificate; its webhook configurations are not registered with the
API server yet (issue 12, item 3), so the webhooks are served but not called."""

from __future__ import annotations

import shutil

import httpx
import yaml
from kubernetes import client

from tests.k8s import controlplane

KUEUE_NAMESPACE = "kueue-system"


def start_kueue(cp: controlplane.ControlPlane, kube: client.ApiClient) -> None:
    """Starts Kueue's manager (no leader election, ray and batch/job integrations) and
    waits for its readiness probe."""
    client.CoreV1Api(kube).create_namespace({"metadata": {"name": KUEUE_NAMESPACE}})
    certdir = cp.workdir / "kueue-certs"
    certdir.mkdir(exist_ok=True)
    shutil.copy(cp.pki.serving_cert, certdir / "tls.crt")
    shutil.copy(cp.pki.serving_key, certdir / "tls.key")
    probe = controlplane.free_port(cp.ip)
    cfg = {
        "apiVersion": "config.kueue.x-k8s.io/v1beta2",
        "kind": "Configuration",
        "namespace": KUEUE_NAMESPACE,
        "health": {"healthProbeBindAddress": f"{cp.ip}:{probe}"},
        "metrics": {"bindAddress": "0"},
        "webhook": {"port": controlplane.free_port(cp.ip), "host": cp.ip, "certDir": str(certdir)},
        "leaderElection": {"leaderElect": False},
        "internalCertManagement": {"enable": False},
        "integrations": {"frameworks": ["batch/job", "ray.io/rayjob", "ray.io/raycluster"]},
    }
    path = cp.workdir / "kueue-config.yaml"
    path.write_text(yaml.safe_dump(cfg))
    proc = cp.spawn(
        "kueue",
        [f"--config={path}", f"--visibility-server-port={controlplane.free_port(cp.ip)}"],
        env={"KUBECONFIG": str(cp.kubeconfig)},
    )
    url = f"http://{cp.ip}:{probe}/readyz"
    cp.wait_ready("Kueue /readyz", lambda: httpx.get(url, timeout=5).status_code == 200, proc)


def start_kuberay(cp: controlplane.ControlPlane) -> None:
    """Starts KubeRay's ray-operator and waits for its readiness probe."""
    probe = controlplane.free_port(cp.ip)
    proc = cp.spawn(
        "kuberay",
        [
            f"--health-probe-bind-address={cp.ip}:{probe}",
            "--metrics-addr=0",
            "--enable-leader-election=false",
        ],
        env={"KUBECONFIG": str(cp.kubeconfig)},
    )
    url = f"http://{cp.ip}:{probe}/readyz"
    cp.wait_ready(
        "ray-operator /readyz", lambda: httpx.get(url, timeout=5).status_code == 200, proc
    )
