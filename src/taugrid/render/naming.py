"""Names, labels and paths every renderer agrees on (one place, so they always match).

Owns the label/annotation keys, how a run ID becomes a Kubernetes object name, the
per-workspace object names (data PVC, service accounts) and the storage-contract paths
(``/data/<workspace>/runs/<run-id>/...``: docs/ARCHITECTURE.md, "The run record").

Invariants: every name returned is a valid DNS-1123 label (object names at most
``MAX_NAME`` characters, so that KubeRay's derived names stay under 63); every label
value is a valid Kubernetes label value. Shortening appends a stable hash, so distinct
inputs never collide into one name.
"""

from __future__ import annotations

import hashlib
import re

from taugrid.record import layout

__all__ = [
    "AGENT_NAMESPACE",
    "AGENT_ROLE",
    "AGENT_SERVICE_ACCOUNT",
    "ANNOTATION_CONFIG_HASH",
    "ANNOTATION_PROFILE",
    "ANNOTATION_PROFILE_HASH",
    "ANNOTATION_PROVENANCE",
    "DATA_MOUNT",
    "DEFAULT_FLAVOR",
    "GPU_RESOURCE",
    "HUB_DATABASE_URL_KEY",
    "HUB_DATA_CLAIM",
    "HUB_NAME",
    "HUB_SECRETS_KEY_SECRET",
    "HUB_TOKENS_SECRET",
    "LABEL_MANAGED_BY",
    "LABEL_NAME",
    "LABEL_RUN_ID",
    "LABEL_TEAM",
    "LABEL_WORKSPACE",
    "MAX_NAME",
    "POOL_LABEL",
    "PRIORITY_LABEL",
    "QUEUE_LABEL",
    "WORKLOAD_SERVICE_ACCOUNT",
    "code_dir",
    "data_claim",
    "flavor_name",
    "label_value",
    "object_name",
    "run_dir",
]

LABEL_RUN_ID = "taugrid.io/run-id"
LABEL_WORKSPACE = "taugrid.io/workspace"
LABEL_TEAM = "taugrid.io/team"
LABEL_NAME = "taugrid.io/name"
POOL_LABEL = "taugrid.io/pool"
"""A node's platform.yaml node pool (a Kubernetes node label, a Ray node label): how the
hub knows which nodes are spot."""
LABEL_MANAGED_BY = "app.kubernetes.io/managed-by"
QUEUE_LABEL = "kueue.x-k8s.io/queue-name"
PRIORITY_LABEL = "kueue.x-k8s.io/priority-class"
ANNOTATION_CONFIG_HASH = "taugrid.io/config-hash"
ANNOTATION_PROFILE_HASH = "taugrid.io/profile-hash"
ANNOTATION_PROFILE = "taugrid.io/profile"
ANNOTATION_PROVENANCE = "taugrid.io/provenance"

GPU_RESOURCE = "nvidia.com/gpu"
DEFAULT_FLAVOR = "default-flavor"
DATA_MOUNT = "/data"
WORKLOAD_SERVICE_ACCOUNT = "tau-workload"
AGENT_SERVICE_ACCOUNT = "taugrid-agent"
AGENT_NAMESPACE = "taugrid-system"
AGENT_ROLE = "taugrid-agent"
AGENT_TOKEN_SECRET = "taugrid-agent-token"
"""The Secret (key ``token``) holding the installed agent's hub token."""
PLATFORM_CONFIGMAP = "taugrid-platform"
"""The ConfigMap (key ``platform.yaml``) holding the platform file the agent reads."""
HUB_NAME = "taugrid-hub"
"""``tau cluster install --with-hub``: the hub's Deployment, Service and ServiceAccount."""
HUB_TOKENS_SECRET = "taugrid-hub-tokens"
"""The Secret of the tokens the installed hub adopts (keys: ``home.TOKENS_ADMIN``,
``home.tokens_agent(cluster)``)."""
HUB_SECRETS_KEY_SECRET = "taugrid-hub-secrets-key"
"""The Secret (key ``key``) of the installed hub's secrets key (``TAU_SECRETS_KEY``): the
workspace secrets in its database are sealed with it."""
HUB_DATABASE_URL_KEY = "url"
"""The key of the platform engineer's Secret (``--hub-database-secret``) that holds the
installed hub's database URL."""
HUB_DATA_CLAIM = "taugrid-hub-data"
"""The installed hub's PersistentVolumeClaim: its ``TAU_HOME`` (SQLite database, code
archives, records kept on disk)."""
AGENT_RECORDS_SECRET = "taugrid-agent-records"
"""The Secret whose keys are the installed agent's environment: the record store's
credentials, by the variable names platform.yaml's ``records`` gives them."""

MAX_NAME = 47  # KubeRay rejects RayJob/RayService names longer than this
_INVALID = re.compile(r"[^a-z0-9-]+")
_LABEL_INVALID = re.compile(r"[^A-Za-z0-9._-]+")


def _digest(value: str) -> str:
    return hashlib.sha256(value.encode()).hexdigest()[:8]


def object_name(value: str, limit: int = MAX_NAME) -> str:
    """``value`` as a DNS-1123 label of at most ``limit`` chars (hash-suffixed if changed)."""
    name = _INVALID.sub("-", value.lower()).strip("-")
    if name == value and len(name) <= limit:
        return name
    head = name[: limit - 9].rstrip("-")
    return f"{head}-{_digest(value)}" if head else f"x{_digest(value)}"


def secrets_name(run_id: str) -> str:
    """The Kubernetes Secret holding run ``run_id``'s ``runtime.secrets`` values, keyed by
    env name (the agent creates it from the hub's workspace secrets; ``hub.core.vault``)."""
    return object_name(f"tau-secrets-{run_id}")


def label_value(value: str) -> str:
    """``value`` as a Kubernetes label value (≤ 63 chars, alphanumeric at both ends)."""
    cleaned = _LABEL_INVALID.sub("-", value).strip("-._")
    if cleaned == value and len(cleaned) <= 63:
        return cleaned
    head = cleaned[:54].strip("-._")
    return f"{head}-{_digest(value)}" if head else _digest(value)


def flavor_name(gpu_model: str) -> str:
    """The Kueue ResourceFlavor name of a GPU model (``A100-80G`` → ``a100-80g``)."""
    return object_name(gpu_model.lower(), 63)


def data_claim(workspace: str) -> str:
    """The workspace's data PersistentVolumeClaim, mounted at ``/data`` by every pod."""
    return object_name(f"{workspace}-data", 63)


def run_dir(workspace: str, run_id: str, data_root: str = DATA_MOUNT) -> str:
    """A run's record directory: ``<data_root>/<workspace>/runs/<run-id>``."""
    return f"{data_root.rstrip('/')}/{layout.record_prefix(workspace, run_id)}"


def code_dir(workspace: str, run_id: str, data_root: str = DATA_MOUNT) -> str:
    """Where the submitted code of a run lies on the data volume (``<run dir>/code``)."""
    return f"{run_dir(workspace, run_id, data_root)}/code"
