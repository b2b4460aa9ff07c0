"""``tau cluster install / uninstall / validate``: TauGrid's objects on a cluster and the
checks a platform team runs before trusting it.

``install`` applies ``render.cluster.install_objects`` by server-side apply (field
manager ``taugrid-operator``), the credentials before the Deployments that mount them,
and waits until the CRDs are Established; ``hub_tokens`` reuses the tokens and the
secrets key of an earlier ``--with-hub`` install (the hub adopted them) or makes new ones;
``check_database_secret`` refuses a database Secret the hub could not read; ``uninstall``
deletes the same objects (everything labelled ``app.kubernetes.io/part-of=taugrid``),
newest first, and waits until they are gone. Deleting the CRDs deletes every Tau object
and, through their owner references, what the operator made for them.

``validate_installation`` and ``validate_nodes`` return findings (ok, warn, fail), each
with how to fix it: TauGrid's CRDs, RBAC and Deployments; Kueue (CRDs Established and
its admission webhook answering a dry-run apply) and KubeRay (CRDs, the
``kuberay-operator`` Deployment when it runs in the cluster); GPU nodes labelled with
their GPU model; the DCGM exporter and node-problem-detector seen or reported missing.
"""

from __future__ import annotations

import base64
import dataclasses
import os
import time
from typing import Any

from taugrid import errors, home, private
from taugrid.backends import errors as berr
from taugrid.backends.kube import kube_api
from taugrid.render import cluster, naming

__all__ = [
    "Api",
    "Finding",
    "api",
    "check_database_secret",
    "hub_tokens",
    "install",
    "uninstall",
    "validate_installation",
    "validate_nodes",
]

KUEUE_CRDS = ("clusterqueues", "localqueues", "workloads", "resourceflavors", "cohorts")
KUEUE_FIX = (
    "install Kueue v0.17: kubectl apply --server-side -f "
    "https://github.com/kubernetes-sigs/kueue/releases/download/v0.17.0/manifests.yaml"
)
KUBERAY_CRDS = ("rayjobs", "rayclusters", "rayservices")
KUBERAY_FIX = (
    "install KubeRay v1.5: helm install kuberay-operator kuberay/kuberay-operator "
    "--version 1.5.0 (https://ray-project.github.io/kuberay/)"
)
Api = kube_api.KubeApi
_ApiError = (berr.KubernetesRejected, berr.KubernetesUnavailable)


@dataclasses.dataclass(frozen=True)
class Finding:
    """One check: ``level`` ok, warn (reported, not fatal) or fail."""

    level: str
    subject: str
    message: str
    hint: str = ""


def api(kubeconfig: str | None, context: str | None) -> kube_api.KubeApi:
    """The API client install and validate use (field manager ``taugrid-operator``)."""
    try:
        return kube_api.KubeApi(kubeconfig, context, field_manager="taugrid-operator")
    except berr.KubernetesRejected as exc:
        raise berr.KubernetesRejected(
            exc.message, hint="pass --kubeconfig FILE (and --context NAME), or set KUBECONFIG"
        ) from exc


def _established(api: kube_api.KubeApi, name: str) -> bool:
    crd = api.get("CustomResourceDefinition", name)
    conds = ((crd or {}).get("status") or {}).get("conditions") or []
    return any(c.get("type") == "Established" and c.get("status") == "True" for c in conds)


def hub_tokens(
    api: kube_api.KubeApi, cluster_name: str, saved_key: str | None = None
) -> cluster.HubTokens:
    """The tokens of the hub an earlier ``--with-hub`` install left on this cluster (it
    adopted them; new ones would lock out whoever holds them), else new ones; its
    secrets key likewise, else ``saved_key`` (what an install saved before an uninstall:
    a database outside the cluster still holds secrets sealed with it), else a new one."""
    secret = api.get("Secret", naming.HUB_TOKENS_SECRET, naming.AGENT_NAMESPACE) or {}
    data = {k: base64.b64decode(v).decode() for k, v in (secret.get("data") or {}).items()}
    key = api.get("Secret", naming.HUB_SECRETS_KEY_SECRET, naming.AGENT_NAMESPACE) or {}
    sealing = (key.get("data") or {}).get(cluster.HUB_SECRETS_KEY_KEY)
    return cluster.HubTokens(
        admin=data.get(home.TOKENS_ADMIN) or private.new_token(),
        agent=data.get(home.tokens_agent(cluster_name)) or private.new_token(),
        secrets_key=base64.b64decode(sealing).decode() if sealing else saved_key or _new_key(),
    )


def check_database_secret(api: kube_api.KubeApi, name: str) -> None:
    """Refuse ``--hub-database-secret`` naming a Secret the hub's pod could not read its
    database URL from (it would wait in ``CreateContainerConfigError``)."""
    ns, key = naming.AGENT_NAMESPACE, naming.HUB_DATABASE_URL_KEY
    secret = api.get("Secret", name, ns)
    if secret is None or not (secret.get("data") or {}).get(key):
        what = "no Secret" if secret is None else "a Secret without the key " + repr(key)
        raise errors.UserError(
            f"--hub-database-secret {name}: there is {what} {ns}/{name} on {api.server}",
            hint=f"kubectl create namespace {ns}; kubectl -n {ns} create secret generic "
            f"{name} --from-literal={key}=postgresql+psycopg://USER:PASSWORD@HOST:5432/DB",
        )


def _new_key() -> str:
    """32 random bytes, URL-safe base64: what the hub's vault takes."""
    return base64.urlsafe_b64encode(os.urandom(32)).decode()


def install(
    api: kube_api.KubeApi,
    opts: cluster.InstallOptions,
    timeout_s: float = 60,
    credentials: cluster.AgentCredentials | None = None,
    tokens: cluster.HubTokens | None = None,
) -> list[str]:
    """Applies every object (and, given ``credentials``, the Secrets and ConfigMap the
    agent mounts; given ``tokens``, the Secret the hub adopts); returns ``Kind name`` of
    each once the CRDs are served."""
    done = []
    objs = cluster.install_objects(opts)
    secrets = [] if credentials is None else cluster.agent_credentials(credentials)
    if tokens is not None:
        secrets += cluster.hub_tokens(tokens, opts.cluster)
    first = next(i for i, o in enumerate(objs) if o["kind"] == "Deployment")
    objs[first:first] = secrets  # before the pods that mount them start
    for obj in objs:
        api.apply(obj)
        done.append(f"{obj['kind']} {obj['metadata']['name']}")
    names = [d.split(" ", 1)[1] for d in done if d.startswith("CustomResourceDefinition ")]
    deadline = time.monotonic() + timeout_s
    while not all(_established(api, n) for n in names):
        if time.monotonic() > deadline:
            raise berr.KubernetesUnavailable(
                f"TauGrid's CRDs are not Established after {timeout_s:.0f}s on {api.server}"
            )
        time.sleep(0.5)
    return done


def _key(obj: dict[str, Any]) -> tuple[str, str, str | None]:
    return obj["kind"], obj["metadata"]["name"], obj["metadata"].get("namespace")


def uninstall(api: kube_api.KubeApi, timeout_s: float = 180) -> list[str]:
    """Deletes what ``install`` applies (newest first); returns what was there."""
    opts = cluster.InstallOptions(hub=cluster.HubInstall())  # whatever install made
    objs = cluster.install_objects(opts)
    objs += cluster.agent_credentials(cluster.AgentCredentials("", ""))
    objs += cluster.hub_tokens(cluster.HubTokens("", ""), opts.cluster)
    keys = [_key(o) for o in objs]
    deleted = [f"{k} {n}" for k, n, ns in reversed(keys) if api.delete(k, n, ns)]
    deadline = time.monotonic() + timeout_s
    while left := [k for k in keys if api.get(k[0], k[1], k[2]) is not None]:
        if time.monotonic() > deadline:
            raise berr.KubernetesUnavailable(
                f"still there {timeout_s:.0f}s after uninstall: "
                + ", ".join(f"{k} {n}" for k, n, _ in left)
            )
        time.sleep(1)
    return deleted


def _crd_findings(
    api: kube_api.KubeApi, what: str, group: str, plurals: tuple[str, ...], fix: str
) -> list[Finding]:
    missing = [p for p in plurals if not _established(api, f"{p}.{group}")]
    if missing:
        names = ", ".join(f"{p}.{group}" for p in missing)
        return [Finding("fail", what, f"CRDs not installed: {names}", fix)]
    return [Finding("ok", what, f"CRDs served ({', '.join(plurals)})")]


def _deployment(
    api: kube_api.KubeApi, subject: str, dep: dict[str, Any] | None, fix: str
) -> Finding:
    if dep is None:
        return Finding("fail", subject, "Deployment not found", fix)
    meta, status = dep["metadata"], dep.get("status") or {}
    where = f"Deployment {meta['namespace']}/{meta['name']}"
    if int(status.get("availableReplicas") or 0) < 1:
        return Finding(
            "fail",
            subject,
            f"{where} has no available replica",
            f"kubectl -n {meta['namespace']} describe deployment {meta['name']}",
        )
    return Finding("ok", subject, f"{where} available")


def _kueue_webhook(api: kube_api.KubeApi) -> Finding:
    """Kueue's validating webhooks registered, and answering a dry-run apply."""
    groups = {
        group
        for cfg in api.list("ValidatingWebhookConfiguration")
        for hook in cfg.get("webhooks") or []
        for rule in hook.get("rules") or []
        for group in rule.get("apiGroups") or []
    }
    if "kueue.x-k8s.io" not in groups:
        return Finding(
            "fail",
            "Kueue",
            "Kueue's CRDs are there but its admission webhooks are not registered "
            "(the Kueue manager is not installed)",
            KUEUE_FIX,
        )
    probe = {
        "apiVersion": "kueue.x-k8s.io/v1beta2",
        "kind": "ResourceFlavor",
        "metadata": {"name": "taugrid-validate-probe"},
        "spec": {},
    }
    try:
        api.apply(probe, dry_run=True)
    except _ApiError as exc:
        return Finding(
            "fail",
            "Kueue",
            f"Kueue's admission webhook does not answer: {exc}",
            "check kueue-controller-manager (kubectl -n kueue-system get pods); " + KUEUE_FIX,
        )
    return Finding("ok", "Kueue", "admission webhook answers (dry-run ResourceFlavor)")


def _kuberay_operator(api: kube_api.KubeApi) -> Finding:
    deps = api.list("Deployment", selector="app.kubernetes.io/name=kuberay-operator")
    if not deps:
        return Finding(
            "warn",
            "KubeRay",
            "no kuberay-operator Deployment seen in the cluster",
            "fine if the operator runs outside the cluster; else " + KUBERAY_FIX,
        )
    return _deployment(api, "KubeRay", deps[0], KUBERAY_FIX)


def validate_installation(api: kube_api.KubeApi) -> list[Finding]:
    """TauGrid, Kueue and KubeRay on this cluster (see the module docstring)."""
    install_fix = "run tau cluster install --kubeconfig …"
    found = _crd_findings(
        api,
        "TauGrid",
        "taugrid.io",
        ("tauclusters", "tauworkspaces", "tauteams", "tauquotarequests"),
        install_fix,
    )
    for role in (naming.AGENT_ROLE, cluster.OPERATOR):
        ok = api.get("ClusterRole", role) and api.get("ClusterRoleBinding", role)
        found.append(
            Finding("ok", "TauGrid", f"ClusterRole {role} bound")
            if ok
            else Finding(
                "fail", "TauGrid", f"ClusterRole {role} or its binding missing", install_fix
            )
        )
    found += _agent_credentials(api)
    for name in (cluster.OPERATOR, naming.AGENT_SERVICE_ACCOUNT):
        dep = api.get("Deployment", name, naming.AGENT_NAMESPACE)
        found.append(_deployment(api, "TauGrid", dep, install_fix))
    kueue = _crd_findings(api, "Kueue", "kueue.x-k8s.io", KUEUE_CRDS, KUEUE_FIX)
    found += kueue + ([_kueue_webhook(api)] if kueue[0].level == "ok" else [])
    ray = _crd_findings(api, "KubeRay", "ray.io", KUBERAY_CRDS, KUBERAY_FIX)
    found += ray + ([_kuberay_operator(api)] if ray[0].level == "ok" else [])
    return found


def _agent_credentials(api: kube_api.KubeApi) -> list[Finding]:
    """The Secret and ConfigMap the agent's pod mounts: without them it never starts."""
    ns = naming.AGENT_NAMESPACE
    wanted = [
        ("Secret", naming.AGENT_TOKEN_SECRET, "token", "--from-file=token=AGENT_TOKEN"),
        ("ConfigMap", naming.PLATFORM_CONFIGMAP, "platform.yaml", "--from-file=platform.yaml"),
    ]
    found = []
    for kind, name, key, source in wanted:
        obj = api.get(kind, name, ns)
        if obj is not None and key in (obj.get("data") or {}):
            found.append(Finding("ok", "TauGrid", f"{kind} {ns}/{name} has {key}"))
            continue
        create = "secret generic" if kind == "Secret" else "configmap"
        found.append(
            Finding(
                "fail",
                "TauGrid",
                f"{kind} {ns}/{name} {'lacks ' + key if obj else 'missing'}: "
                "the agent's pod cannot start",
                f"tau cluster install --agent-token-file FILE --platform platform.yaml, or "
                f"kubectl -n {ns} create {create} {name} {source}",
            )
        )
    return found


def _seen(api: kube_api.KubeApi, word: str) -> list[str]:
    """Namespaced names of DaemonSets and Pods whose name contains ``word``."""
    return [
        f"{kind} {o['metadata']['namespace']}/{o['metadata']['name']}"
        for kind in ("DaemonSet", "Pod")
        for o in api.list(kind)
        if word in o["metadata"]["name"]
    ]


def validate_nodes(api: kube_api.KubeApi) -> list[Finding]:
    """GPU nodes labelled with their model; GPU health agents seen or reported missing."""
    found: list[Finding] = []
    gpu_nodes = [
        n
        for n in api.list("Node")
        if int(((n.get("status") or {}).get("capacity") or {}).get(naming.GPU_RESOURCE, 0) or 0)
    ]
    if not gpu_nodes:
        found.append(
            Finding(
                "warn",
                "nodes",
                f"no node offers {naming.GPU_RESOURCE}",
                "install the NVIDIA device plugin (gpu-operator) on the GPU nodes",
            )
        )
    for node in gpu_nodes:
        name, labels = node["metadata"]["name"], node["metadata"].get("labels") or {}
        model = labels.get("nvidia.com/gpu.product")
        found.append(
            Finding("ok", "nodes", f"{name}: GPU model {model}")
            if model
            else Finding(
                "fail",
                "nodes",
                f"{name} has GPUs but no nvidia.com/gpu.product label",
                f"run NVIDIA GPU feature discovery, or kubectl label node {name} "
                "nvidia.com/gpu.product=<model> (the platform's gpu_types[].node_label_value)",
            )
        )
    for word, what, fix in (
        ("dcgm-exporter", "DCGM exporter", "install NVIDIA's dcgm-exporter (gpu-operator)"),
        ("node-problem-detector", "node-problem-detector", "install node-problem-detector"),
    ):
        seen = _seen(api, word)
        found.append(
            Finding("ok", what, "seen: " + ", ".join(seen[:3]))
            if seen
            else Finding("warn", what, "not seen in any namespace (GPU faults go unreported)", fix)
        )
    return found
