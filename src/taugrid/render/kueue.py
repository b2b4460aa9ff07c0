"""Platform → Kueue objects (kueue.x-k8s.io/v1beta2) and per-workspace core objects.

Owns the mapping from platform.yaml to what Kueue enforces:

    gpu_types[]          → ResourceFlavor per GPU model (nodeLabels: its node label), plus
                           ``default-flavor`` for CPU and memory
    teams[]              → ClusterQueue per team: resource group 1 = cpu/memory on
                           default-flavor (cpu_quota, memory_quota); resource group 2 =
                           nvidia.com/gpu, one flavor per quota (nominalQuota;
                           borrowingLimit/lendingLimit only with a cohort, as Kueue
                           requires); cohortName; queueingStrategy; namespaceSelector
                           on the ``taugrid.io/team`` label
    workspaces[]         → Namespace (labels workspace/team), ServiceAccount for pods,
                           RoleBinding for the TauGrid agent, data PersistentVolumeClaim,
                           LocalQueue (its queue → its team's ClusterQueue)
    priority_classes[]   → WorkloadPriorityClass
    (operator)           → per workspace a Role ``taugrid-member`` and a RoleBinding
                           ``taugrid-members`` naming its members (Users); per cohort a
                           Cohort (``member_access``, ``cohort``)

v1beta2 is the version Kueue stores (see the CRDs' ``storage: true``). Output order
is apply order: cluster-scoped objects first, then each workspace's namespace and
its contents.
"""

from __future__ import annotations

from typing import Any

from taugrid.platform import models as pm
from taugrid.render import naming

__all__ = [
    "API_KUEUE",
    "cluster_queue",
    "cohort",
    "local_queue",
    "member_access",
    "priority_class",
    "render_platform",
    "resource_flavors",
    "workspace_objects",
]

API_KUEUE = "kueue.x-k8s.io/v1beta2"
_MANAGED = {naming.LABEL_MANAGED_BY: "taugrid"}


def _obj(
    api: str, kind: str, name: str, namespace: str | None = None, **rest: Any
) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name, "labels": dict(_MANAGED)}
    if namespace is not None:
        meta["namespace"] = namespace
    return {"apiVersion": api, "kind": kind, "metadata": meta, **rest}


def _cpu(value: float) -> int | str:
    return int(value) if value == int(value) else f"{round(value * 1000)}m"


def resource_flavors(platform: pm.Platform) -> list[dict[str, Any]]:
    """``default-flavor`` (CPU, memory) and one flavor per GPU model."""
    flavors = [_obj(API_KUEUE, "ResourceFlavor", naming.DEFAULT_FLAVOR, spec={})]
    for gpu in platform.gpu_types:
        labels = {gpu.node_label: gpu.node_label_value or gpu.name}
        flavors.append(
            _obj(
                API_KUEUE,
                "ResourceFlavor",
                naming.flavor_name(gpu.name),
                spec={"nodeLabels": labels},
            )
        )
    return flavors


def _gpu_group(team: pm.TeamSpec) -> dict[str, Any]:
    flavors = []
    for quota in team.quotas:
        resource: dict[str, Any] = {"name": naming.GPU_RESOURCE, "nominalQuota": quota.nominal}
        if team.cohort is not None:
            if quota.borrowing_limit is not None:
                resource["borrowingLimit"] = quota.borrowing_limit
            if quota.lending_limit is not None:
                resource["lendingLimit"] = quota.lending_limit
        flavors.append({"name": naming.flavor_name(quota.gpu_model), "resources": [resource]})
    return {"coveredResources": [naming.GPU_RESOURCE], "flavors": flavors}


def cluster_queue(team: pm.TeamSpec) -> dict[str, Any]:
    """The ClusterQueue of a team (see the module docstring for the mapping)."""
    cpu_group = {
        "coveredResources": ["cpu", "memory"],
        "flavors": [
            {
                "name": naming.DEFAULT_FLAVOR,
                "resources": [
                    {"name": "cpu", "nominalQuota": _cpu(team.cpu_quota)},
                    {"name": "memory", "nominalQuota": team.memory_quota},
                ],
            }
        ],
    }
    spec: dict[str, Any] = {
        "namespaceSelector": {"matchLabels": {naming.LABEL_TEAM: team.name}},
        "queueingStrategy": team.queueing_strategy.value,
        "resourceGroups": [cpu_group] + ([_gpu_group(team)] if team.quotas else []),
        "preemption": {
            "withinClusterQueue": "LowerPriority",
            "reclaimWithinCohort": "Any" if team.cohort else "Never",
        },
    }
    if team.cohort is not None:
        spec["cohortName"] = team.cohort
    return _obj(API_KUEUE, "ClusterQueue", naming.object_name(team.name, 63), spec=spec)


def local_queue(ws: pm.WorkspaceSpec, team: pm.TeamSpec) -> dict[str, Any]:
    """The workspace's LocalQueue, pointing at its team's ClusterQueue."""
    spec = {"clusterQueue": naming.object_name(team.name, 63)}
    return _obj(API_KUEUE, "LocalQueue", ws.effective_queue, ws.effective_namespace, spec=spec)


def priority_class(pc: pm.PriorityClass) -> dict[str, Any]:
    """A WorkloadPriorityClass (``kueue.x-k8s.io/priority-class`` label values)."""
    obj = _obj(API_KUEUE, "WorkloadPriorityClass", pc.name, value=pc.value)
    if pc.description:
        obj["description"] = pc.description
    return obj


def workspace_objects(ws: pm.WorkspaceSpec, team: pm.TeamSpec) -> list[dict[str, Any]]:
    """Namespace, ServiceAccount, RoleBinding, data PVC and LocalQueue of a workspace."""
    ns = ws.effective_namespace
    namespace = _obj("v1", "Namespace", ns)
    namespace["metadata"]["labels"].update(
        {naming.LABEL_WORKSPACE: ws.name, naming.LABEL_TEAM: ws.team}
    )
    binding = _obj(
        "rbac.authorization.k8s.io/v1",
        "RoleBinding",
        naming.AGENT_ROLE,
        ns,
        roleRef={
            "apiGroup": "rbac.authorization.k8s.io",
            "kind": "ClusterRole",
            "name": naming.AGENT_ROLE,
        },
        subjects=[
            {
                "kind": "ServiceAccount",
                "name": naming.AGENT_SERVICE_ACCOUNT,
                "namespace": naming.AGENT_NAMESPACE,
            }
        ],
    )
    return [
        namespace,
        _obj("v1", "ServiceAccount", naming.WORKLOAD_SERVICE_ACCOUNT, ns),
        binding,
        _obj("v1", "PersistentVolumeClaim", naming.data_claim(ws.name), ns, spec=_pvc_spec(ws)),
        local_queue(ws, team),
    ]


MEMBER_ROLE = "taugrid-member"
MEMBER_BINDING = "taugrid-members"
_RBAC = "rbac.authorization.k8s.io/v1"
_MEMBER_RULES = [
    {
        "apiGroups": ["ray.io"],
        "resources": ["rayjobs", "rayclusters", "rayservices"],
        "verbs": ["get", "list", "watch", "create", "update", "patch", "delete"],
    },
    {
        "apiGroups": ["batch"],
        "resources": ["jobs"],
        "verbs": ["get", "list", "watch", "create", "delete"],
    },
    {
        "apiGroups": [""],
        "resources": ["pods", "pods/log", "events", "persistentvolumeclaims"],
        "verbs": ["get", "list", "watch"],
    },
    {
        "apiGroups": ["kueue.x-k8s.io"],
        "resources": ["workloads", "localqueues"],
        "verbs": ["get", "list", "watch"],
    },
]


def member_access(ws: pm.WorkspaceSpec) -> list[dict[str, Any]]:
    """The Role members get in the workspace's namespace (run, watch and delete their
    Ray and batch workloads; read pods, logs, Kueue workloads) and the RoleBinding that
    grants it to every member (a User each; no members: no subjects)."""
    ns = ws.effective_namespace
    role = _obj(_RBAC, "Role", MEMBER_ROLE, ns, rules=_MEMBER_RULES)
    binding = _obj(
        _RBAC,
        "RoleBinding",
        MEMBER_BINDING,
        ns,
        roleRef={"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": MEMBER_ROLE},
        subjects=[
            {"kind": "User", "apiGroup": "rbac.authorization.k8s.io", "name": m} for m in ws.members
        ],
    )
    return [role, binding]


def cohort(name: str) -> dict[str, Any]:
    """A Kueue Cohort (the teams whose ClusterQueues name it borrow from each other)."""
    return _obj(API_KUEUE, "Cohort", name, spec={})


def _pvc_spec(ws: pm.WorkspaceSpec) -> dict[str, Any]:
    spec: dict[str, Any] = {
        "accessModes": [ws.data.access_mode],
        "resources": {"requests": {"storage": ws.data.size}},
    }
    if ws.data.storage_class is not None:
        spec["storageClassName"] = ws.data.storage_class
    return spec


def render_platform(platform: pm.Platform) -> list[dict[str, Any]]:
    """Every Kueue and workspace object of a platform, in apply order."""
    objs = resource_flavors(platform)
    objs += [priority_class(pc) for pc in platform.priority_classes]
    objs += [cluster_queue(team) for team in platform.teams]
    for ws in platform.workspaces:
        team = platform.team(ws.team)
        if team is not None:  # Platform validation guarantees it exists
            objs += workspace_objects(ws, team)
    return objs
