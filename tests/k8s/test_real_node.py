"""A real node in the test control plane runs containers (issue 31 item 1).

``RealNode`` (tests/k8s/realnode.py) joins a kubelet + containerd + runc node, tainted,
to the shared control plane for this module: a host-network pod asking for an emulated
GPU runs there on the busybox image built here, ends ``Succeeded``, and its log comes
back through the API server from the kubelet; a pod naming an image the node does not
have fails to start with the kubelet's reason, not a hung phase. Nothing is downloaded.
"""

from __future__ import annotations

import time
from typing import Any

import pytest

from tests.k8s import oci, project_image, realnode, registry

pytestmark = pytest.mark.k8s


def _pod(name: str, image: str, command: str, pull: str = "Never") -> dict[str, Any]:
    container = {
        "name": "main",
        "image": image,
        "imagePullPolicy": pull,
        "command": ["sh", "-c", command],
        "resources": {"limits": {realnode.GPU: "1"}},
    }
    toleration = {**realnode.TAINT, "operator": "Equal"}
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": "default"},
        "spec": {
            "nodeName": realnode.NAME,
            "hostNetwork": True,
            "restartPolicy": "Never",
            "tolerations": [toleration],
            "containers": [container],
        },
    }


def _wait_pod(node: realnode.RealNode, name: str, done: Any, timeout_s: float = 120) -> Any:
    deadline = time.monotonic() + timeout_s
    with node.api() as c:
        while True:
            pod = c.get(f"/api/v1/namespaces/default/pods/{name}").json()
            if done(pod):
                return pod
            assert time.monotonic() < deadline, (
                f"{name}: {pod.get('status')}\n{node.tail('kubelet')}"
            )
            time.sleep(0.3)


def test_a_gpu_pod_runs_on_the_real_node_and_its_log_comes_back(node: realnode.RealNode) -> None:
    with node.api() as c:
        allocatable = c.get(f"/api/v1/nodes/{realnode.NAME}").json()["status"]["allocatable"]
        assert allocatable[realnode.GPU] == "4"  # emulated: an extended resource, no device
        line = "hello from a real container"
        r = c.post(
            "/api/v1/namespaces/default/pods", json=_pod("hello", oci.BUSYBOX, f"echo {line}")
        )
        assert r.status_code == 201, r.text
    pod = _wait_pod(node, "hello", lambda p: p["status"].get("phase") in ("Succeeded", "Failed"))
    assert pod["status"]["phase"] == "Succeeded", pod["status"]
    (state,) = pod["status"]["containerStatuses"]
    assert state["state"]["terminated"]["exitCode"] == 0
    with node.api() as c:
        log = c.get("/api/v1/namespaces/default/pods/hello/log")
        assert log.status_code == 200 and log.text.strip() == line, log.text
        c.delete("/api/v1/namespaces/default/pods/hello")


def test_a_pod_whose_image_the_node_lacks_says_why(node: realnode.RealNode) -> None:
    with node.api() as c:
        pod = _pod("no-image", "taugrid.local/missing:test", "true")
        assert c.post("/api/v1/namespaces/default/pods", json=pod).status_code == 201

    def waiting(p: dict[str, Any]) -> bool:
        states = p["status"].get("containerStatuses") or []
        reasons = {s["state"].get("waiting", {}).get("reason") for s in states}
        return bool(reasons - {None, "ContainerCreating"})

    pod = _wait_pod(node, "no-image", waiting)
    (state,) = pod["status"]["containerStatuses"]
    assert state["state"]["waiting"]["reason"] == "ErrImageNeverPull", state
    assert "taugrid.local/missing:test" in state["state"]["waiting"]["message"]
    with node.api() as c:
        c.delete("/api/v1/namespaces/default/pods/no-image")


def test_the_project_image_is_pulled_from_the_registry_and_runs_taugrid(
    node: realnode.RealNode, images: registry.Registry
) -> None:
    """The image ``make image`` builds (Debian root, Python, the project's wheel and its
    dependencies) is pushed to the local registry; a pod names it by reference, the
    node pulls it over loopback and runs Ray and TauGrid from it."""
    archive = project_image.archive()
    ref = images.push(archive, project_image.name(archive).split("/", 1)[1])
    check = "import ray, taugrid, sys; print('taugrid', ray.__version__, sys.version_info[:2])"
    cmd = f'python -c "{check}" && tau --help | head -3'
    with node.api() as c:
        pod = _pod("tau-image", ref, cmd, pull="Always")
        assert c.post("/api/v1/namespaces/default/pods", json=pod).status_code == 201
    pod = _wait_pod(
        node, "tau-image", lambda p: p["status"].get("phase") in ("Succeeded", "Failed"), 240
    )
    with node.api() as c:
        log = c.get("/api/v1/namespaces/default/pods/tau-image/log").text
        c.delete("/api/v1/namespaces/default/pods/tau-image")
    assert pod["status"]["phase"] == "Succeeded", f"{pod['status']}\n{log}"
    assert "taugrid 2.60.0 (3, 11)" in log and "Usage: tau" in log, log


def test_a_reference_the_registry_lacks_says_why(
    node: realnode.RealNode, images: registry.Registry
) -> None:
    ref = f"{images.host}/taugrid/absent:0.0"
    with node.api() as c:
        pod = _pod("bad-ref", ref, "true", pull="Always")
        assert c.post("/api/v1/namespaces/default/pods", json=pod).status_code == 201

    def pull_failed(p: dict[str, Any]) -> bool:
        states = p["status"].get("containerStatuses") or []
        reasons = {s["state"].get("waiting", {}).get("reason") for s in states}
        return bool(reasons & {"ErrImagePull", "ImagePullBackOff"})

    pod = _wait_pod(node, "bad-ref", pull_failed)
    (state,) = pod["status"]["containerStatuses"]
    assert ref in state["state"]["waiting"].get("message", ""), state
    with node.api() as c:
        c.delete("/api/v1/namespaces/default/pods/bad-ref")
