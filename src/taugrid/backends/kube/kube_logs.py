"""A run's driver log on a Kubernetes cluster, read through the API server's
``pods/log`` (the API server asks the node's kubelet; ``kubectl logs`` does the same).

The driver is one container of the attempt's pods (found by ``taugrid.io/submission``):

    RayJob                  the submitter pod's ``ray-job-submitter`` (``ray job submit``
                            follows the driver's output)
    Job                     its pod's ``main``
    RayCluster, RayService  the Ray head's ``ray-head``

Nothing is read until that pod has started (a pending pod has no log yet). The log is
read from its start up to a byte limit (``limitBytes``), cut after its last whole line.
"""

from __future__ import annotations

from typing import Any

from taugrid.backends.kube import kube_api

__all__ = ["DRIVER_CONTAINER", "LOG_CHUNK", "LOG_MAX", "driver_log"]

DRIVER_CONTAINER = {
    "RayJob": "ray-job-submitter",
    "Job": "main",
    "RayCluster": "ray-head",
    "RayService": "ray-head",
}
LOG_CHUNK = 1 << 20
"""At most this many new bytes per read (the agent reads every second)."""
LOG_MAX = 64 << 20
_STARTED = ("Running", "Succeeded", "Failed")


def driver_log(
    api: kube_api.KubeApi, kind: str, namespace: str, pods: list[dict[str, Any]], limit: int
) -> str:
    """The first ``limit`` bytes of the driver container's log ("" before it started)."""
    container = DRIVER_CONTAINER.get(kind, "")
    for pod in pods:
        started = (pod.get("status") or {}).get("phase") in _STARTED
        names = {c.get("name") for c in pod["spec"].get("containers", [])}
        if started and container in names and not pod["metadata"].get("deletionTimestamp"):
            return api.pod_log(namespace, pod["metadata"]["name"], container, limit)
    return ""
