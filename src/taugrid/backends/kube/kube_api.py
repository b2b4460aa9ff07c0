"""The Kubernetes API as the kubernetes backend uses it: server-side apply, get, list
and delete of the object kinds TauGrid renders, with errors turned into
``backends.errors`` (the server's own message kept).

The official ``kubernetes`` client is imported lazily (only a ``backend: kubernetes``
cluster needs it). Objects are plain dicts; server-side apply sends them as
``application/apply-patch+yaml`` (JSON is YAML) with field manager ``taugrid-agent``.
"""

from __future__ import annotations

import dataclasses
import importlib
import json
import os
from typing import Any

from taugrid.backends import errors as berr
from taugrid.platform import crds

__all__ = ["FIELD_MANAGER", "KubeApi", "Resource", "resource_of"]

FIELD_MANAGER = "taugrid-agent"
TIMEOUT_S = 10.0


@dataclasses.dataclass(frozen=True)
class Resource:
    """Where a kind lives in the API: group/version path, plural, namespaced or not."""

    api_version: str
    plural: str
    namespaced: bool = True

    def path(self, namespace: str | None = None, name: str | None = None) -> str:
        base = "/api/v1" if self.api_version == "v1" else f"/apis/{self.api_version}"
        ns = f"/namespaces/{namespace}" if self.namespaced and namespace else ""
        return f"{base}{ns}/{self.plural}" + (f"/{name}" if name else "")


_KUEUE = "kueue.x-k8s.io/v1beta2"
_RBAC = "rbac.authorization.k8s.io/v1"
_TAU = crds.API_VERSION
_RESOURCES: dict[str, Resource] = {
    "Namespace": Resource("v1", "namespaces", namespaced=False),
    "ServiceAccount": Resource("v1", "serviceaccounts"),
    "Secret": Resource("v1", "secrets"),
    "ConfigMap": Resource("v1", "configmaps"),
    "PersistentVolumeClaim": Resource("v1", "persistentvolumeclaims"),
    "Service": Resource("v1", "services"),
    "Pod": Resource("v1", "pods"),
    "Node": Resource("v1", "nodes", namespaced=False),
    "Event": Resource("v1", "events"),
    "RoleBinding": Resource(_RBAC, "rolebindings"),
    "Role": Resource(_RBAC, "roles"),
    "ClusterRole": Resource(_RBAC, "clusterroles", namespaced=False),
    "ClusterRoleBinding": Resource(_RBAC, "clusterrolebindings", namespaced=False),
    "Deployment": Resource("apps/v1", "deployments"),
    "DaemonSet": Resource("apps/v1", "daemonsets"),
    "CustomResourceDefinition": Resource(
        "apiextensions.k8s.io/v1", "customresourcedefinitions", namespaced=False
    ),
    "ValidatingWebhookConfiguration": Resource(
        "admissionregistration.k8s.io/v1", "validatingwebhookconfigurations", namespaced=False
    ),
    "Job": Resource("batch/v1", "jobs"),
    "RayJob": Resource("ray.io/v1", "rayjobs"),
    "RayCluster": Resource("ray.io/v1", "rayclusters"),
    "RayService": Resource("ray.io/v1", "rayservices"),
    "LocalQueue": Resource(_KUEUE, "localqueues"),
    "Workload": Resource(_KUEUE, "workloads"),
    "ClusterQueue": Resource(_KUEUE, "clusterqueues", namespaced=False),
    "ResourceFlavor": Resource(_KUEUE, "resourceflavors", namespaced=False),
    "WorkloadPriorityClass": Resource(_KUEUE, "workloadpriorityclasses", namespaced=False),
    "Cohort": Resource(_KUEUE, "cohorts", namespaced=False),
    "TauCluster": Resource(_TAU, "tauclusters", namespaced=False),
    "TauWorkspace": Resource(_TAU, "tauworkspaces", namespaced=False),
    "TauTeam": Resource(_TAU, "tauteams", namespaced=False),
    "TauQuotaRequest": Resource(_TAU, "tauquotarequests"),
}


def resource_of(kind: str) -> Resource:
    """The API location of ``kind`` (one TauGrid renders or watches)."""
    try:
        return _RESOURCES[kind]
    except KeyError:
        raise berr.KubernetesRejected(
            f"TauGrid does not know where Kubernetes kind '{kind}' lives",
            hint=f"known kinds: {', '.join(sorted(_RESOURCES))}",
        ) from None


def _server_message(exc: Any) -> str:
    """The API server's own ``Status.message`` from an ApiException."""
    try:
        return str(json.loads(exc.body).get("message") or exc.reason)
    except (TypeError, ValueError, AttributeError):
        return str(getattr(exc, "reason", exc))


class KubeApi:
    """One API server (a kubeconfig file and context)."""

    def __init__(
        self, kubeconfig: str | None, context: str | None, field_manager: str = FIELD_MANAGER
    ) -> None:
        self._k8s = importlib.import_module("kubernetes")
        self.field_manager = field_manager
        self.where = f"{kubeconfig or '~/.kube/config'} (context {context or 'current'})"
        try:
            self.client = self._client(kubeconfig, context)
        except Exception as exc:  # the client raises ConfigException and OSErrors
            raise berr.KubernetesRejected(
                f"cannot load kubeconfig {self.where}: {exc}",
                hint="set kubeconfig/context of the cluster in platform.yaml",
            ) from exc
        self.server = str(self.client.configuration.host)

    def _client(self, kubeconfig: str | None, context: str | None) -> Any:
        """The kubeconfig's client; in a pod with no kubeconfig, its service account's."""
        config = self._k8s.config
        in_pod = os.environ.get("KUBERNETES_SERVICE_HOST") and not os.environ.get("KUBECONFIG")
        if kubeconfig is None and in_pod:
            self.where = "the pod's service account"
            cfg = self._k8s.client.Configuration()
            config.load_incluster_config(client_configuration=cfg)
            return self._k8s.client.ApiClient(cfg)
        return config.new_client_from_config(config_file=kubeconfig, context=context)

    def close(self) -> None:
        self.client.close()

    def _call(self, method: str, path: str, body: Any = None, **kw: Any) -> dict[str, Any]:
        data = self._request(method, path, body, **kw)
        return dict(json.loads(data)) if data else {}

    def _request(self, method: str, path: str, body: Any = None, **kw: Any) -> bytes:
        """The response body of one request; errors as ``backends.errors``."""
        query = kw.pop("query", [])
        headers = {"Accept": "application/json", **kw.pop("headers", {})}
        try:
            resp = self.client.call_api(
                path,
                method,
                query_params=query,
                header_params=headers,
                body=body,
                auth_settings=["BearerToken"],
                _preload_content=False,
                _request_timeout=TIMEOUT_S,
            )
        except self._k8s.client.ApiException as exc:
            if exc.status == 404 or exc.status == 0 or exc.status >= 500:
                raise _classify(exc, method, path, self.server) from exc
            if exc.status == 409:
                raise _Conflict(
                    f"{method} {path} on {self.server}: {_server_message(exc)}",
                    hint="it changed meanwhile; the next sync tries again",
                ) from exc
            raise berr.KubernetesRejected(
                f"the API server at {self.server} refused {method} {path}: {_server_message(exc)}",
                hint=_hint(exc.status),
            ) from exc
        except Exception as exc:  # urllib3 connection errors, timeouts
            raise berr.KubernetesUnavailable(
                f"the Kubernetes API server at {self.server} does not answer: {exc}"
            ) from exc
        data = resp[0].data if isinstance(resp, tuple) else resp.data
        return bytes(data or b"")

    def pod_log(self, namespace: str, pod: str, container: str, limit_bytes: int) -> str:
        """The container's log (``pods/log``: the API server asks the node's kubelet),
        at most its first ``limit_bytes`` bytes."""
        path = resource_of("Pod").path(namespace, pod) + "/log"
        query = [("container", container), ("limitBytes", str(limit_bytes))]
        data = self._request("GET", path, query=query, headers={"Accept": "*/*"})
        if len(data) >= limit_bytes:  # cut at the limit: whole lines only
            data = data[: data.rfind(b"\n") + 1]
        return data.decode("utf-8", errors="replace")

    def apply(self, obj: dict[str, Any], dry_run: bool = False) -> dict[str, Any]:
        """Server-side apply of ``obj`` (created or updated, owned by TauGrid's manager;
        ``dry_run``: admission and validation only, nothing stored)."""
        meta = obj["metadata"]
        res = resource_of(obj["kind"])
        query = [("fieldManager", self.field_manager), ("force", "true")]
        return self._call(
            "PATCH",
            res.path(meta.get("namespace"), meta["name"]),
            body=obj,
            query=query + ([("dryRun", "All")] if dry_run else []),
            headers={"Content-Type": "application/apply-patch+yaml"},
        )

    def patch(
        self,
        kind: str,
        name: str,
        body: dict[str, Any],
        *,
        namespace: str | None = None,
        subresource: str = "",
        strategic: bool = False,
    ) -> dict[str, Any]:
        """A merge patch (``strategic``: strategic merge, e.g. node conditions by type)
        of ``name`` or of its ``subresource`` ("status")."""
        path = resource_of(kind).path(namespace, name) + (f"/{subresource}" if subresource else "")
        kind_of_patch = "strategic-merge-patch" if strategic else "merge-patch"
        return self._call(
            "PATCH",
            path,
            body=body,
            query=[("fieldManager", self.field_manager)],
            headers={"Content-Type": f"application/{kind_of_patch}+json"},
        )

    def get(self, kind: str, name: str, namespace: str | None = None) -> dict[str, Any] | None:
        """The object, or None when it does not exist."""
        try:
            return self._call("GET", resource_of(kind).path(namespace, name))
        except _NotFound:
            return None

    def list(
        self, kind: str, namespace: str | None = None, selector: str | None = None
    ) -> list[dict[str, Any]]:
        query = [("labelSelector", selector)] if selector else []
        try:
            got = self._call("GET", resource_of(kind).path(namespace), query=query)
        except _NotFound:  # the kind is not served (CRD missing) or the namespace is gone
            return []
        return list(got.get("items", []))

    def delete(
        self, kind: str, name: str, namespace: str | None = None, uid: str | None = None
    ) -> bool:
        """Deletes (background propagation); False when it was already gone, or (with
        ``uid``) when the object of that name is another one now."""
        body: dict[str, Any] = {
            "kind": "DeleteOptions",
            "apiVersion": "v1",
            "propagationPolicy": "Background",
        }
        if uid:
            body["preconditions"] = {"uid": uid}
        try:
            self._call("DELETE", resource_of(kind).path(namespace, name), body=body)
        except (_NotFound, _Conflict):
            return False
        return True


class _NotFound(berr.KubernetesRejected):
    """404: the object (or its kind) is not there."""


class _Conflict(berr.KubernetesRejected):
    """409: a precondition (resourceVersion, uid) no longer holds."""


def _classify(exc: Any, method: str, path: str, server: str) -> Exception:
    if exc.status == 404:
        return _NotFound(f"{method} {path}: not found on {server}")
    return berr.KubernetesUnavailable(
        f"the Kubernetes API server at {server} failed {method} {path}: {_server_message(exc)}"
    )


def _hint(status: int) -> str:
    if status == 403:
        return "grant the agent's service account that verb on that resource (RBAC)"
    if status == 401:
        return "the kubeconfig's credentials are not accepted; refresh them"
    return "fix the object (the server's message says what is wrong) and submit again"
