"""Kueue's manager and KubeRay's ray-operator (built by ``k8s/build.sh kueue kuberay``)
started against the test control plane, as processes the control plane's ``stop`` ends.

Kueue runs its webhook server on the control plane's loopback address with certificates
of its own (internal cert management); its webhook configurations are not registered with
the API server yet (issue 12, item 3), so the webhooks are served but not called."""

from __future__ import annotations

import httpx
import yaml
from kubernetes import client

from tests.k8s import controlplane

KUEUE_NAMESPACE = "kueue-system"


def start_kueue(cp: controlplane.ControlPlane, kube: client.ApiClient) -> None:
    """Starts Kueue's manager (no leader election, ray and batch/job integrations) and
    waits for its readiness probe."""
    core = client.CoreV1Api(kube)
    core.create_namespace({"metadata": {"name": KUEUE_NAMESPACE}})
    # the (empty) Secret its cert rotator fills, as Kueue's release manifests create it
    secret = {"metadata": {"name": "kueue-webhook-server-cert"}, "type": "Opaque"}
    core.create_namespaced_secret(KUEUE_NAMESPACE, secret)
    certdir = cp.workdir / "kueue-certs"
    certdir.mkdir(exist_ok=True)
    probe = controlplane.free_port(cp.ip)
    cfg = {
        "apiVersion": "config.kueue.x-k8s.io/v1beta2",
        "kind": "Configuration",
        "namespace": KUEUE_NAMESPACE,
        "health": {"healthProbeBindAddress": f"{cp.ip}:{probe}"},
        "metrics": {"bindAddress": "0"},
        "webhook": {"port": controlplane.free_port(cp.ip), "host": cp.ip, "certDir": str(certdir)},
        "leaderElection": {"leaderElect": False},
        # with it off, v0.17.0's main insists on /etc/kueue/metrics/certs; on, it makes
        # its own certificates in certDir and a Secret in its namespace
        "internalCertManagement": {
            "enable": True,
            "webhookServiceName": "kueue-webhook-service",
            "webhookSecretName": "kueue-webhook-server-cert",
        },
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
