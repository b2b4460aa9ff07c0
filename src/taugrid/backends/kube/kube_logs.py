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

__all__ = ["DRIVER_CONTAINER", "LOG_CHUNK", "LOG_MAX", "driver_log", "driver_pod", "driver_pods"]

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


def driver_pod(kind: str, pods: list[dict[str, Any]]) -> dict[str, Any] | None:
    """The pod whose driver container's log is the run's log: the oldest started one that
    did not fail (a submitter that could not reach the dashboard failed, and the one its
    Job made again submitted the Ray job and follows it), else the newest that failed
    (a crashed job's pod); None before one started."""
    started = [
        p
        for p in sorted(driver_pods(kind, pods), key=_created)
        if (p.get("status") or {}).get("phase") in _STARTED
        and not p["metadata"].get("deletionTimestamp")
    ]
    ok = [p for p in started if p["status"]["phase"] != "Failed"]
    return ok[0] if ok else (started[-1] if started else None)


def driver_log(
    api: kube_api.KubeApi, kind: str, namespace: str, pod: dict[str, Any], limit: int
) -> str:
    """The first ``limit`` bytes of ``pod``'s driver container's log."""
    return api.pod_log(namespace, pod["metadata"]["name"], DRIVER_CONTAINER.get(kind, ""), limit)


def _created(pod: dict[str, Any]) -> str:
    return str(pod["metadata"].get("creationTimestamp", ""))


def driver_pods(kind: str, pods: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The pods among ``pods`` that run the driver container of a ``kind`` object."""
    container = DRIVER_CONTAINER.get(kind, "")
    return [p for p in pods if container in {c.get("name") for c in p["spec"]["containers"]}]
