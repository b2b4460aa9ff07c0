"""TauGrid's own objects on a cluster: what ``tau cluster install`` applies.

Owns, in apply order: the TauGrid CRDs (``platform.crds``), the ``taugrid-system``
Namespace, the ``taugrid-operator`` and ``taugrid-agent`` ServiceAccounts, their
ClusterRoles and ClusterRoleBindings (``taugrid-agent`` is the ClusterRole every
workspace's RoleBinding names), and the operator and agent Deployments; with
``--with-hub`` (``HubInstall``) also the hub: a ServiceAccount without API access, the
PersistentVolumeClaim of its SQLite database (none when its database is PostgreSQL at the
URL of a Secret the platform engineer made, ``database_secret``), its Service
(``taugrid-hub:8000``, the agent's default hub URL) and Deployment, which adopts the
tokens of one Secret ``hub_tokens`` renders and seals workspace secrets with the key of
the other. Every object is labelled ``app.kubernetes.io/part-of=taugrid``
(``PART_OF``): uninstall finds them by it.
``agent_rbac`` is the part ``tau platform manifests`` prints so that its workspace
RoleBindings name a ClusterRole that exists.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from taugrid import home
from taugrid.platform import crds
from taugrid.platform import models as pm
from taugrid.render import naming, pods

__all__ = [
    "OPERATOR",
    "PART_OF",
    "AgentCredentials",
    "HubInstall",
    "HubTokens",
    "InstallOptions",
    "agent_credentials",
    "agent_rbac",
    "hub_tokens",
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


HUB_SERVICE_PORT = 8000


@dataclasses.dataclass(frozen=True)
class HubInstall:
    """``tau cluster install --with-hub``: the hub in the cluster, on SQLite in a PVC or
    on a PostgreSQL database."""

    port: int = HUB_SERVICE_PORT
    """The port the hub's container listens on (the node's, on the host network)."""
    storage: str = "1Gi"
    storage_class: str | None = None
    """The PVC's StorageClass; None: the cluster's default."""
    database_secret: str | None = None
    """A Secret in taugrid-system whose ``naming.HUB_DATABASE_URL_KEY`` is the hub's
    database URL (PostgreSQL); then no PVC: the hub keeps nothing on its pod's disk."""


@dataclasses.dataclass(frozen=True)
class InstallOptions:
    """What ``tau cluster install`` asks for."""

    image: str = "ghcr.io/taugrid/taugrid:0.1.0"
    hub_url: str = f"http://{naming.HUB_NAME}.{naming.AGENT_NAMESPACE}.svc:{HUB_SERVICE_PORT}"
    cluster: str = "kubernetes"
    pods: pm.PodSettings = dataclasses.field(default_factory=pm.PodSettings)
    """The cluster's ``pods:`` settings (platform.yaml), on TauGrid's own pods."""
    hub: HubInstall | None = None


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
HUB_HOME = "/var/lib/taugrid-hub"
"""The installed hub's ``TAU_HOME``: its PersistentVolumeClaim (an emptyDir when its
database is PostgreSQL)."""
HUB_TOKENS_DIR = "/var/run/taugrid/hub-tokens"
HUB_SECRETS_KEY_KEY = "key"
"""The key of Secret ``naming.HUB_SECRETS_KEY_SECRET`` that holds the secrets key."""
_Volume = tuple[str, str, dict[str, Any]]
_PLATFORM_VOLUME: _Volume = (
    "platform",
    AGENT_PLATFORM_FILE.rsplit("/", 1)[0],
    {"configMap": {"name": naming.PLATFORM_CONFIGMAP}},
)
_AGENT_VOLUMES: list[_Volume] = [
    ("home", AGENT_HOME, {"emptyDir": {}}),
    (
        "token",
        AGENT_TOKEN_FILE.rsplit("/", 1)[0],
        {"secret": {"secretName": naming.AGENT_TOKEN_SECRET}},
    ),
    _PLATFORM_VOLUME,
]
_HUB_CLAIM = {"persistentVolumeClaim": {"claimName": naming.HUB_DATA_CLAIM}}
_HUB_VOLUMES: list[_Volume] = [
    ("tokens", HUB_TOKENS_DIR, {"secret": {"secretName": naming.HUB_TOKENS_SECRET}}),
    _PLATFORM_VOLUME,
]
_RECORDS_ENV = {"secretRef": {"name": naming.AGENT_RECORDS_SECRET, "optional": True}}
"""The record store's credentials, as the agent's and the hub's environment."""


def _deployment(
    name: str,
    image: str,
    args: list[str],
    env: dict[str, str],
    volumes: list[_Volume] | None = None,
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
            {"name": v, "mountPath": path, "readOnly": "secret" in src or "configMap" in src}
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
    agent["spec"]["template"]["spec"]["containers"][0]["envFrom"] = [_RECORDS_ENV]
    deployments = [operator, agent]
    if opts.hub is not None:
        hub_objs, hub = _hub(opts.image, opts.hub)
        objs += hub_objs
        deployments.append(hub)
    for deployment in deployments:
        pods.settle_spec(deployment["spec"]["template"]["spec"], opts.pods)
    return [*objs, *deployments]


def _hub(image: str, opts: HubInstall) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """The hub's ServiceAccount, claim and Service; its Deployment (one replica, replaced
    by Recreate: SQLite has one writer), listening on its pod's address."""
    ns, name = naming.AGENT_NAMESPACE, naming.HUB_NAME
    account = _obj("v1", "ServiceAccount", name, ns, automountServiceAccountToken=False)
    selector = {"app.kubernetes.io/name": name}
    port = {"name": "http", "port": HUB_SERVICE_PORT, "targetPort": opts.port}
    service = _obj("v1", "Service", name, ns, spec={"selector": selector, "ports": [port]})
    args = ["python", "-m", "taugrid.hub.server.daemon", "--home", HUB_HOME]
    args += ["--host", "$(POD_IP)", "--port", str(opts.port), "--tokens-dir", HUB_TOKENS_DIR]
    args += ["--platform", AGENT_PLATFORM_FILE]
    on_disk = opts.database_secret is None
    home_volume: _Volume = ("home", HUB_HOME, _HUB_CLAIM if on_disk else {"emptyDir": {}})
    deployment = _deployment(name, image, args, {}, [home_volume, *_HUB_VOLUMES])
    # Recreate: one pod at a time (SQLite has one writer; on the host network a second
    # pod could not bind the port)
    deployment["spec"]["strategy"] = {"type": "Recreate"}
    container = deployment["spec"]["template"]["spec"]["containers"][0]
    container["env"] = [
        {"name": "POD_IP", "valueFrom": {"fieldRef": {"fieldPath": "status.podIP"}}},
        _secret_env(home.SECRETS_KEY_ENV, naming.HUB_SECRETS_KEY_SECRET, HUB_SECRETS_KEY_KEY),
    ]
    if opts.database_secret is not None:
        url_key = naming.HUB_DATABASE_URL_KEY
        container["env"].append(_secret_env(home.DATABASE_URL_ENV, opts.database_secret, url_key))
    container["envFrom"] = [_RECORDS_ENV]
    container["ports"] = [{"name": "http", "containerPort": opts.port}]
    container["readinessProbe"] = {
        "httpGet": {"path": "/healthz", "port": opts.port},
        "periodSeconds": 5,
    }
    return [account, *([_hub_claim(opts)] if on_disk else []), service], deployment


def _hub_claim(opts: HubInstall) -> dict[str, Any]:
    claim_spec: dict[str, Any] = {
        "accessModes": ["ReadWriteOnce"],
        "resources": {"requests": {"storage": opts.storage}},
    }
    if opts.storage_class is not None:
        claim_spec["storageClassName"] = opts.storage_class
    ns = naming.AGENT_NAMESPACE
    return _obj("v1", "PersistentVolumeClaim", naming.HUB_DATA_CLAIM, ns, spec=claim_spec)


def _secret_env(env: str, secret: str, key: str) -> dict[str, Any]:
    return {"name": env, "valueFrom": {"secretKeyRef": {"name": secret, "key": key}}}


@dataclasses.dataclass(frozen=True)
class HubTokens:
    """The credentials ``tau cluster install --with-hub`` makes for the hub it installs:
    the platform engineer's admin token, the installed agent's, and the key the hub
    seals workspace secrets with."""

    admin: str
    agent: str
    secrets_key: str = ""


def hub_tokens(tokens: HubTokens, cluster: str) -> list[dict[str, Any]]:
    """The Secrets the installed hub adopts its tokens from and reads its secrets key
    from (never in ``install_objects``, the Helm chart or ``--dry-run``, which print no
    credential)."""
    ns = naming.AGENT_NAMESPACE
    secret = _obj("v1", "Secret", naming.HUB_TOKENS_SECRET, ns, type="Opaque")
    secret["stringData"] = {
        home.TOKENS_ADMIN: tokens.admin,
        home.tokens_agent(cluster): tokens.agent,
    }
    key = _obj("v1", "Secret", naming.HUB_SECRETS_KEY_SECRET, ns, type="Opaque")
    key["stringData"] = {HUB_SECRETS_KEY_KEY: tokens.secrets_key}
    return [secret, key]


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
