"""Kueue's manager and KubeRay's ray-operator (built by ``k8s/build.sh kueue kuberay``)
started against the test control plane, as processes the control plane's ``stop`` ends.

Kueue runs its webhook server on the control plane's loopback address. The harness does
what Kueue's release does around it, by URL instead of an in-cluster Service: its
webhook configurations and CRD conversion webhooks are registered
(``tests/k8s/webhooks.py``), and its ``kueue-webhook-server-cert`` Secret holds a CA and
serving certificate the harness makes (for the Service name and the loopback IP), which
Kueue's cert rotator keeps and injects as ``caBundle``; the certificate files are written
to the webhook server's cert directory, as the kubelet would mount the Secret."""

from __future__ import annotations

import base64
import socket

import httpx
import yaml
from kubernetes import client

from tests.k8s import certs, controlplane, webhooks

KUEUE_NAMESPACE = "kueue-system"
KUEUE_SERVICE = "kueue-webhook-service"
KUEUE_SECRET = "kueue-webhook-server-cert"


def _kueue_certs(cp: controlplane.ControlPlane, kube: client.ApiClient) -> bytes:
    """Creates Kueue's namespace and cert Secret, writes the cert dir; returns the CA."""
    core = client.CoreV1Api(kube)
    core.create_namespace({"metadata": {"name": KUEUE_NAMESPACE}})
    data = certs.make_webhook_secret("kueue-ca", f"{KUEUE_SERVICE}.{KUEUE_NAMESPACE}.svc", cp.ip)
    secret = {
        "metadata": {"name": KUEUE_SECRET},
        "type": "Opaque",
        "data": {k: base64.b64encode(v).decode() for k, v in data.items()},
    }
    core.create_namespaced_secret(KUEUE_NAMESPACE, secret)
    certdir = cp.workdir / "kueue-certs"
    certdir.mkdir(exist_ok=True)
    for name in ("tls.crt", "tls.key"):
        (certdir / name).write_bytes(data[name])
    return data["ca.crt"]


def start_kueue(cp: controlplane.ControlPlane, kube: client.ApiClient) -> None:
    """Registers Kueue's webhooks, starts its manager (no leader election, ray and
    batch/job integrations) and waits for its readiness probe (which waits for the cert
    rotator to have injected the CA into every webhook and conversion config)."""
    ca = _kueue_certs(cp, kube)
    port = controlplane.free_port(cp.ip)
    share = cp.bindir.parent / "share" / "kueue-webhook"
    webhooks.register(kube, share, f"https://{cp.ip}:{port}", ca)
    probe = controlplane.free_port(cp.ip)
    cfg = {
        "apiVersion": "config.kueue.x-k8s.io/v1beta2",
        "kind": "Configuration",
        "namespace": KUEUE_NAMESPACE,
        "health": {"healthProbeBindAddress": f"{cp.ip}:{probe}"},
        "metrics": {"bindAddress": "0"},
        "webhook": {"port": port, "host": cp.ip, "certDir": str(cp.workdir / "kueue-certs")},
        "leaderElection": {"leaderElect": False},
        "internalCertManagement": {
            "enable": True,
            "webhookServiceName": KUEUE_SERVICE,
            "webhookSecretName": KUEUE_SECRET,
        },
        "integrations": {"frameworks": ["batch/job", "ray.io/rayjob", "ray.io/raycluster"]},
    }
    path = cp.workdir / "kueue-config.yaml"
    path.write_text(yaml.safe_dump(cfg))
    proc = cp.spawn(
        "kueue",
        # the on-demand visibility API server needs in-cluster delegated authentication
        # (a pod's service-account mount), which the harness's processes do not have;
        # pending workloads are read from ClusterQueue/Workload status instead
        [f"--config={path}", "--feature-gates=VisibilityOnDemand=false"],
        env={"KUBECONFIG": str(cp.kubeconfig)},
    )
    url = f"http://{cp.ip}:{probe}/readyz"

    def ready() -> bool:
        # the certificate bootstrap runs a first manager whose probe says ready with no
        # checks; the real one's /readyz waits for the webhook server, so look for both
        with socket.socket() as s:
            if s.connect_ex((cp.ip, port)) != 0:
                return False
        return httpx.get(url, timeout=5).status_code == 200

    cp.wait_ready("Kueue webhook server and /readyz", ready, proc)


def start_kuberay(cp: controlplane.ControlPlane) -> None:
    """Starts KubeRay's ray-operator and waits for its readiness probe.

    It reaches a Ray head's dashboard (job status, HTTP submission) by the head Service's
    name, so it resolves names through the cluster's DNS as it would in a pod
    (``cluster_names``; the API server's Service proxy cannot help here: the real node's
    pods have loopback addresses, which no EndpointSlice may hold). Its probe injection is
    off: the probes name fixed ports on ``localhost``, which host-network Ray pods do not
    use (``render.pods.ray_on_host_network``)."""
    probe = controlplane.free_port(cp.ip)
    proc = cp.spawn(
        "kuberay",
        [
            f"--health-probe-bind-address={cp.ip}:{probe}",
            "--metrics-addr=0",
            "--enable-leader-election=false",
        ],
        env={"KUBECONFIG": str(cp.kubeconfig), "ENABLE_PROBES_INJECTION": "false"},
        cluster_names=True,
    )
    url = f"http://{cp.ip}:{probe}/readyz"
    cp.wait_ready(
        "ray-operator /readyz", lambda: httpx.get(url, timeout=5).status_code == 200, proc
    )
