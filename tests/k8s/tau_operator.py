"""The TauGrid operator (``python -m taugrid.operator``) as a process against the test
control plane, and helpers for its custom resources (group taugrid.io)."""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from kubernetes import client

from taugrid.platform import crds as tau_crds
from tests import procs
from tests.k8s import controlplane

GROUP, VERSION = tau_crds.GROUP, tau_crds.VERSION
KUEUE = ("kueue.x-k8s.io", "v1beta2")
RESYNC_S = "2"


@contextlib.contextmanager
def running(
    kubeconfig: Path, log: Path, env: dict[str, str] | None = None
) -> Iterator[subprocess.Popen[bytes]]:
    """The operator as a child process (``stop``ped and waited for on the way out)."""
    with log.open("ab") as out:
        proc = subprocess.Popen(
            [sys.executable, "-m", "taugrid.operator", "--kubeconfig", str(kubeconfig)],
            stdout=out,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            env={**os.environ, "TAU_OPERATOR_RESYNC_S": RESYNC_S, **(env or {})},
            start_new_session=True,
        )
    try:
        yield proc
    finally:
        stop(proc)


def stop(proc: subprocess.Popen[bytes]) -> None:
    procs.stop(proc, grace_s=30)


def create(kube: client.ApiClient, obj: dict[str, Any]) -> dict[str, Any]:
    """Creates a Tau object (cluster-scoped, or in its metadata.namespace)."""
    custom = client.CustomObjectsApi(kube)
    plural = tau_crds.KINDS[obj["kind"]].plural
    ns = obj["metadata"].get("namespace")
    if ns:
        return dict(custom.create_namespaced_custom_object(GROUP, VERSION, ns, plural, obj))
    return dict(custom.create_cluster_custom_object(GROUP, VERSION, plural, obj))


def get(kube: client.ApiClient, kind: str, name: str) -> dict[str, Any]:
    plural = tau_crds.KINDS[kind].plural
    got = client.CustomObjectsApi(kube).get_cluster_custom_object(GROUP, VERSION, plural, name)
    return dict(got)


def patch_spec(kube: client.ApiClient, kind: str, name: str, spec: dict[str, Any]) -> None:
    plural = tau_crds.KINDS[kind].plural
    client.CustomObjectsApi(kube).patch_cluster_custom_object(
        GROUP, VERSION, plural, name, {"spec": spec}
    )


def delete(kube: client.ApiClient, kind: str, name: str) -> None:
    plural = tau_crds.KINDS[kind].plural
    client.CustomObjectsApi(kube).delete_cluster_custom_object(GROUP, VERSION, plural, name)


def phase(kube: client.ApiClient, kind: str, name: str, want: str = "Ready") -> dict[str, Any]:
    """Waits until the object's ``status.phase`` is ``want``; returns its status."""

    def status() -> dict[str, Any] | None:
        st = get(kube, kind, name).get("status") or {}
        return st if st.get("phase") == want else None

    found = controlplane.wait_until(f"{kind} {name} phase {want}", status, timeout_s=180)
    assert isinstance(found, dict)
    return found


def cluster_queue(kube: client.ApiClient, name: str) -> dict[str, Any] | None:
    try:
        return dict(
            client.CustomObjectsApi(kube).get_cluster_custom_object(*KUEUE, "clusterqueues", name)
        )
    except client.ApiException as exc:
        if exc.status == 404:
            return None
        raise


def gpu_nominal(cq: dict[str, Any] | None, flavor: str) -> int | None:
    """The ClusterQueue's nvidia.com/gpu nominal quota on ``flavor``."""
    for group in (cq or {}).get("spec", {}).get("resourceGroups", []):
        for fl in group["flavors"]:
            if fl["name"] == flavor:
                return int(fl["resources"][0]["nominalQuota"])
    return None


def can(kube: client.ApiClient, user: str, verb: str, resource: str, ns: str) -> bool:
    """What the API server's authorizer (RBAC) says about ``user`` doing ``verb``."""
    review = {
        "spec": {
            "user": user,
            "resourceAttributes": {
                "namespace": ns,
                "verb": verb,
                "group": "ray.io",
                "resource": resource,
            },
        }
    }
    got = client.AuthorizationV1Api(kube).create_subject_access_review(review)
    return bool(got.status.allowed)


def exists(fn: Any, *args: Any) -> bool:
    """Whether a ``read_*`` call of the kubernetes client finds the object."""
    try:
        fn(*args)
    except client.ApiException as exc:
        if exc.status == 404:
            return False
        raise
    return True
