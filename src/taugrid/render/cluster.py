"""TauGrid's own objects on a cluster: what ``tau cluster install`` applies.

Owns, in apply order: the TauGrid CRDs (``platform.crds``), the ``taugrid-system``
Namespace, the ``taugrid-operator`` and ``taugrid-agent`` ServiceAccounts, their
ClusterRoles and ClusterRoleBindings (``taugrid-agent`` is the ClusterRole every
workspace's RoleBinding names), and the operator and agent Deployments. Every object is
labelled ``app.kubernetes.io/part-of=taugrid`` (``PART_OF``): uninstall finds them by it.
``agent_rbac`` is the part ``tau platform manifests`` prints so that its workspace
RoleBindings name a ClusterRole that exists.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from taugrid.platform import crds
from taugrid.platform import models as pm
from taugrid.render import naming, pods

__all__ = [
    "OPERATOR",
    "PART_OF",
    "AgentCredentials",
    "InstallOptions",
    "agent_credentials",
    "agent_rbac",
    "install_objects",
    "system_namespace",
]

PART_OF = {"app.kubernetes.io/part-of": "taugrid"}
OPERATOR = "taugrid-operator"
_RBAC = "rbac.authorization.k8s.io/v1"
_ALL = ["get", "list", "watch", "create", "update", "patch", "delete"]
_READ = ["get", "list", "watch"]
_AGENT_RULES = [
    {"apiGroups": [""], "resources": ["namespaces", "serviceaccounts"], "verbs": _ALL},
    {"apiGroups": [""], "resources": ["persistentvolumeclaims"], "verbs": _ALL},
    {"apiGroups": [""], "resources": ["pods"], "verbs": [*_READ, "delete"]},
    {"apiGroups": [""], "resources": ["pods/log"], "verbs": ["get"]},  # the runs' logs
    # the record store's credentials and a run's secrets, for its pods (kube_pods)
    {"apiGroups": [""], "resources": ["secrets"], "verbs": _ALL},
    {"apiGroups": [""], "resources": ["nodes", "nodes/status"], "verbs": [*_READ, "patch"]},
    {"apiGroups": [""], "resources": ["events"], "verbs": [*_READ, "create"]},
    {"apiGroups": ["rbac.authorization.k8s.io"], "resources": ["rolebindings"], "verbs": _ALL},
    {
        "apiGroups": ["rbac.authorization.k8s.io"],
        "resources": ["clusterroles"],
        "verbs": ["bind"],
        "resourceNames": [naming.AGENT_ROLE],
    },
    {
        "apiGroups": ["ray.io"],
        "resources": ["rayjobs", "rayclusters", "rayservices"],
        "verbs": _ALL,
    },
    {"apiGroups": ["batch"], "resources": ["jobs"], "verbs": _ALL},
    {
        "apiGroups": ["kueue.x-k8s.io"],
        "resources": [
            "resourceflavors",
            "clusterqueues",
            "localqueues",
            "workloadpriorityclasses",
            "workloads",
        ],
        "verbs": _ALL,
    },
    {"apiGroups": [crds.GROUP], "resources": ["*"], "verbs": _READ},
]
_OPERATOR_RULES = [
    {"apiGroups": [crds.GROUP], "resources": ["*"], "verbs": _ALL},
    {"apiGroups": [""], "resources": ["namespaces", "serviceaccounts"], "verbs": _ALL},
    {"apiGroups": [""], "resources": ["persistentvolumeclaims"], "verbs": _ALL},
    {"apiGroups": [""], "resources": ["events"], "verbs": [*_READ, "create", "patch"]},
    {
        "apiGroups": ["rbac.authorization.k8s.io"],
        "resources": ["roles", "rolebindings"],
        "verbs": _ALL,
    },
    {
        # the members' Role grants what the operator itself does not use
        "apiGroups": ["rbac.authorization.k8s.io"],
        "resources": ["roles", "clusterroles"],
        "verbs": ["escalate", "bind"],
    },
    {
        "apiGroups": ["kueue.x-k8s.io"],
        "resources": ["clusterqueues", "cohorts", "localqueues"],
        "verbs": _ALL,
    },
    {
        "apiGroups": ["apiextensions.k8s.io"],
        "resources": ["customresourcedefinitions"],
        "verbs": _READ,
    },
]


@dataclasses.dataclass(frozen=True)
class InstallOptions:
    """What ``tau cluster install`` asks for."""

    image: str = "ghcr.io/taugrid/taugrid:0.1.0"
    hub_url: str = "http://taugrid-hub.taugrid-system.svc:8000"
    cluster: str = "kubernetes"
    pods: pm.PodSettings = dataclasses.field(default_factory=pm.PodSettings)
    """The cluster's ``pods:`` settings (platform.yaml), on the operator's and agent's pods."""


def _obj(
    api: str, kind: str, name: str, namespace: str | None = None, **rest: Any
) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name, "labels": dict(PART_OF)}
    if namespace is not None:
        meta["namespace"] = namespace
    return {"apiVersion": api, "kind": kind, "metadata": meta, **rest}


def system_namespace() -> dict[str, Any]:
    return _obj("v1", "Namespace", naming.AGENT_NAMESPACE)


def _account(name: str, rules: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """A ServiceAccount in taugrid-system with a ClusterRole of ``rules``, bound."""
    ref = {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": name}
    subject = {"kind": "ServiceAccount", "name": name, "namespace": naming.AGENT_NAMESPACE}
    return [
        _obj("v1", "ServiceAccount", name, naming.AGENT_NAMESPACE),
        _obj(_RBAC, "ClusterRole", name, rules=rules),
        _obj(_RBAC, "ClusterRoleBinding", name, roleRef=ref, subjects=[subject]),
    ]


def agent_rbac() -> list[dict[str, Any]]:
    """taugrid-system, the agent's ServiceAccount, ClusterRole taugrid-agent (which the
    workspace RoleBindings name) and its cluster-wide binding."""
    return [system_namespace(), *_account(naming.AGENT_SERVICE_ACCOUNT, _AGENT_RULES)]


AGENT_HOME = "/var/lib/taugrid"
"""The installed agent's ``TAU_HOME`` (an emptyDir: its state is the hub's to keep)."""
AGENT_TOKEN_FILE = "/var/run/taugrid/token/token"
AGENT_PLATFORM_FILE = "/etc/taugrid/platform.yaml"
_AGENT_VOLUMES: list[tuple[str, str, dict[str, Any]]] = [
    ("home", AGENT_HOME, {"emptyDir": {}}),
    (
        "token",
        AGENT_TOKEN_FILE.rsplit("/", 1)[0],
        {"secret": {"secretName": naming.AGENT_TOKEN_SECRET}},
    ),
    (
        "platform",
        AGENT_PLATFORM_FILE.rsplit("/", 1)[0],
        {"configMap": {"name": naming.PLATFORM_CONFIGMAP}},
    ),
]


def _deployment(
    name: str,
    image: str,
    args: list[str],
    env: dict[str, str],
    volumes: list[tuple[str, str, dict[str, Any]]] | None = None,
) -> dict[str, Any]:
    labels = {"app.kubernetes.io/name": name, **PART_OF}
    container: dict[str, Any] = {
        "name": name,
        "image": image,
        "command": args,
        "env": [{"name": k, "value": v} for k, v in env.items()],
        "resources": {"requests": {"cpu": "100m", "memory": "256Mi"}},
    }
    pod: dict[str, Any] = {"serviceAccountName": name, "containers": [container]}
    if volumes:
        container["volumeMounts"] = [
            {"name": v, "mountPath": path, "readOnly": "emptyDir" not in src}
            for v, path, src in volumes
        ]
        pod["volumes"] = [{"name": v, **src} for v, _, src in volumes]
    spec = {
        "replicas": 1,
        "selector": {"matchLabels": {"app.kubernetes.io/name": name}},
        "template": {"metadata": {"labels": labels}, "spec": pod},
    }
    obj = _obj("apps/v1", "Deployment", name, naming.AGENT_NAMESPACE, spec=spec)
    obj["metadata"]["labels"]["app.kubernetes.io/name"] = name
    return obj


def install_objects(opts: InstallOptions) -> list[dict[str, Any]]:
    """Everything ``tau cluster install`` applies, in apply order."""
    objs = crds.crd_definitions()
    for crd in objs:
        crd["metadata"].setdefault("labels", {}).update(PART_OF)
    objs += agent_rbac()
    objs += _account(OPERATOR, _OPERATOR_RULES)
    operator = _deployment(OPERATOR, opts.image, ["python", "-m", "taugrid.operator"], {})
    args = ["python", "-m", "taugrid.agent.daemon", "--hub", opts.hub_url]
    args += ["--cluster", opts.cluster]
    env = {
        "TAU_HOME": AGENT_HOME,
        "TAU_AGENT_TOKEN_FILE": AGENT_TOKEN_FILE,
        "TAU_PLATFORM_FILE": AGENT_PLATFORM_FILE,
    }
    agent = _deployment(naming.AGENT_SERVICE_ACCOUNT, opts.image, args, env, _AGENT_VOLUMES)
    records = {"secretRef": {"name": naming.AGENT_RECORDS_SECRET, "optional": True}}
    agent["spec"]["template"]["spec"]["containers"][0]["envFrom"] = [records]
    for deployment in (operator, agent):
        pods.settle_spec(deployment["spec"]["template"]["spec"], opts.pods)
    return [*objs, operator, agent]


@dataclasses.dataclass(frozen=True)
class AgentCredentials:
    """What the installed agent reads besides its image: its hub token, the platform
    file, and the record store's credentials (variable name → value) that its pods'
    podsync and its own uploads need."""

    token: str
    platform_yaml: str
    records: dict[str, str] = dataclasses.field(default_factory=dict)


def agent_credentials(creds: AgentCredentials) -> list[dict[str, Any]]:
    """The Secrets with the agent's hub token and record store credentials and the
    ConfigMap with the platform file that the agent's Deployment mounts (the records
    Secret as its environment). Applied by ``tau cluster install --agent-token-file
    --platform``; never part of ``install_objects`` (nor of the Helm chart or
    ``--dry-run``), which print no credential."""
    ns = naming.AGENT_NAMESPACE
    secret = _obj("v1", "Secret", naming.AGENT_TOKEN_SECRET, ns, type="Opaque")
    secret["stringData"] = {"token": creds.token}
    records = _obj("v1", "Secret", naming.AGENT_RECORDS_SECRET, ns, type="Opaque")
    records["stringData"] = dict(creds.records)
    config = _obj("v1", "ConfigMap", naming.PLATFORM_CONFIGMAP, ns)
    config["data"] = {"platform.yaml": creds.platform_yaml}
    return [secret, records, config]
