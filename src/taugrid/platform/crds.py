"""The platform models as Kubernetes custom resources (group ``taugrid.io``, v1alpha1).

Owns the mapping between ``platform.models`` and the TauGrid CRDs the operator serves:

    TauCluster        (cluster-scoped)  spec = ClusterSpec minus ``name``; label
                                        ``taugrid.io/region`` names its region
    TauWorkspace      (cluster-scoped)  spec = WorkspaceSpec minus ``name``
    TauTeam           (cluster-scoped)  spec = TeamSpec minus ``name``
    TauQuotaRequest   (namespaced)      spec = QuotaRequestSpec; status.state =
                                        QuotaRequestState (pending → approved | rejected)

Invariants: ``metadata.name`` is the model's ``name``; ``from_object(to_object(m)) == m``
for every model; ``crd_definition(kind)`` derives the CRD's structural OpenAPI schema
from the same pydantic model, so the CRD and platform.yaml can never disagree.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import pydantic

from taugrid.platform import models

__all__ = [
    "API_VERSION",
    "GROUP",
    "KINDS",
    "VERSION",
    "CrdKind",
    "crd_definition",
    "crd_definitions",
    "from_object",
    "platform_objects",
    "quota_request_object",
    "to_object",
]

GROUP = "taugrid.io"
VERSION = "v1alpha1"
API_VERSION = f"{GROUP}/{VERSION}"
LABEL_REGION = "taugrid.io/region"

CrdModel = models.ClusterSpec | models.WorkspaceSpec | models.TeamSpec | models.QuotaRequestSpec


@dataclasses.dataclass(frozen=True)
class CrdKind:
    """One custom resource kind and the model that is its ``spec``."""

    kind: str
    plural: str
    scope: str
    model: type[pydantic.BaseModel]
    named: bool = True  # the model has a ``name`` field that becomes metadata.name


KINDS: dict[str, CrdKind] = {
    k.kind: k
    for k in (
        CrdKind("TauCluster", "tauclusters", "Cluster", models.ClusterSpec),
        CrdKind("TauWorkspace", "tauworkspaces", "Cluster", models.WorkspaceSpec),
        CrdKind("TauTeam", "tauteams", "Cluster", models.TeamSpec),
        CrdKind(
            "TauQuotaRequest", "tauquotarequests", "Namespaced", models.QuotaRequestSpec, False
        ),
    )
}
_BY_MODEL = {k.model: k for k in KINDS.values()}


def to_object(
    model: CrdModel,
    *,
    name: str | None = None,
    namespace: str | None = None,
    labels: dict[str, str] | None = None,
) -> dict[str, Any]:
    """The custom resource of ``model`` (``name`` is required for a TauQuotaRequest)."""
    kind = _BY_MODEL[type(model)]
    obj_name = getattr(model, "name", None) if kind.named else name
    if not obj_name:
        raise ValueError(f"{kind.kind} needs a name")
    meta: dict[str, Any] = {"name": obj_name}
    if namespace is not None:
        meta["namespace"] = namespace
    if labels:
        meta["labels"] = dict(labels)
    spec = model.model_dump(mode="json", exclude={"name"} if kind.named else set())
    return {"apiVersion": API_VERSION, "kind": kind.kind, "metadata": meta, "spec": spec}


def from_object(obj: dict[str, Any]) -> CrdModel:
    """The model of a TauGrid custom resource (raises ``pydantic.ValidationError``)."""
    if obj.get("apiVersion") != API_VERSION or obj.get("kind") not in KINDS:
        raise ValueError(
            f"not a {API_VERSION} TauGrid object: {obj.get('apiVersion')}/{obj.get('kind')}"
        )
    kind = KINDS[obj["kind"]]
    data = dict(obj.get("spec") or {})
    if kind.named:
        data["name"] = obj["metadata"]["name"]
    parsed: CrdModel = kind.model.model_validate(data)  # type: ignore[assignment]
    return parsed


def quota_request_object(
    request: models.QuotaRequestSpec,
    name: str,
    namespace: str,
    state: models.QuotaRequestState = models.QuotaRequestState.PENDING,
) -> dict[str, Any]:
    """A TauQuotaRequest in ``namespace`` with ``status.state``."""
    obj = to_object(request, name=name, namespace=namespace)
    obj["status"] = {"state": state.value}
    return obj


def platform_objects(platform: models.Platform) -> list[dict[str, Any]]:
    """TauCluster, TauTeam and TauWorkspace objects of a whole platform."""
    objs = [
        to_object(cluster, labels={LABEL_REGION: region.name})
        for region in platform.regions
        for cluster in region.clusters
    ]
    objs += [to_object(team) for team in platform.teams]
    objs += [to_object(ws) for ws in platform.workspaces]
    return objs


_KEPT = ("type", "enum", "pattern", "minimum", "maximum", "minLength", "minItems", "description")


def _structural(schema: dict[str, Any], defs: dict[str, Any]) -> dict[str, Any]:
    """pydantic JSON Schema → Kubernetes structural OpenAPI v3 (refs inlined, nullables)."""
    if "$ref" in schema:
        return _structural(defs[schema["$ref"].rsplit("/", 1)[-1]], defs)
    if "anyOf" in schema:
        options = [o for o in schema["anyOf"] if o.get("type") != "null"]
        nullable = len(options) < len(schema["anyOf"])
        picked: dict[str, Any] = (
            _structural(options[0], defs)
            if len(options) == 1
            else {"x-kubernetes-int-or-string": True}
        )
        if nullable:
            picked["nullable"] = True
        return picked
    out: dict[str, Any] = {k: v for k, v in schema.items() if k in _KEPT}
    if "exclusiveMinimum" in schema:
        out.update(minimum=schema["exclusiveMinimum"], exclusiveMinimum=True)
    if "properties" in schema:
        out["type"] = "object"
        out["properties"] = {k: _structural(v, defs) for k, v in schema["properties"].items()}
        if schema.get("required"):
            out["required"] = list(schema["required"])
    if isinstance(schema.get("additionalProperties"), dict):
        out["additionalProperties"] = _structural(schema["additionalProperties"], defs)
    if "items" in schema:
        out["items"] = _structural(schema["items"], defs)
    if "enum" in schema and "type" not in out:
        out["type"] = "string"
    return out


_STATUS: dict[str, Any] = {
    "type": "object",
    "x-kubernetes-preserve-unknown-fields": True,
    "properties": {
        "phase": {"type": "string", "description": "Pending, Ready or Failed (operator)."},
        "message": {"type": "string", "description": "What the operator did or what is wrong."},
        "observedGeneration": {"type": "integer"},
    },
}
_AGE = {"name": "Age", "type": "date", "jsonPath": ".metadata.creationTimestamp"}
_PHASE = {"name": "Phase", "type": "string", "jsonPath": ".status.phase"}
_COLUMNS: dict[str, list[dict[str, str]]] = {
    "TauCluster": [
        {"name": "Backend", "type": "string", "jsonPath": ".spec.backend"},
        _PHASE,
    ],
    "TauWorkspace": [
        {"name": "Team", "type": "string", "jsonPath": ".spec.team"},
        {"name": "Namespace", "type": "string", "jsonPath": ".status.namespace"},
        {"name": "Queue", "type": "string", "jsonPath": ".status.queue"},
        _PHASE,
    ],
    "TauTeam": [
        {"name": "Cohort", "type": "string", "jsonPath": ".spec.cohort"},
        {"name": "ClusterQueue", "type": "string", "jsonPath": ".status.clusterQueue"},
        _PHASE,
    ],
    "TauQuotaRequest": [
        {"name": "Team", "type": "string", "jsonPath": ".spec.team"},
        {"name": "GPU", "type": "string", "jsonPath": ".spec.gpu_model"},
        {"name": "Nominal", "type": "integer", "jsonPath": ".spec.nominal"},
        {"name": "State", "type": "string", "jsonPath": ".status.state"},
    ],
}


def _status_schema(crd: CrdKind) -> dict[str, Any]:
    status: dict[str, Any] = {**_STATUS, "properties": dict(_STATUS["properties"])}
    if not crd.named:
        states = [s.value for s in models.QuotaRequestState]
        status["properties"]["state"] = {"type": "string", "enum": states}
    return status


def crd_definition(kind: str) -> dict[str, Any]:
    """The ``CustomResourceDefinition`` of ``kind`` (one of ``KINDS``): a structural
    schema derived from the model, ``spec`` required, a status subresource (``phase``,
    ``message``; ``state`` for a TauQuotaRequest) and printer columns."""
    crd = KINDS[kind]
    schema = crd.model.model_json_schema()
    spec = _structural(schema, schema.get("$defs", {}))
    if crd.named:
        spec["properties"].pop("name", None)
        spec["required"] = [r for r in spec.get("required", []) if r != "name"]
        if not spec["required"]:
            spec.pop("required")
    root: dict[str, Any] = {
        "type": "object",
        "required": ["spec"],
        "properties": {"spec": spec, "status": _status_schema(crd)},
    }
    version = {
        "name": VERSION,
        "served": True,
        "storage": True,
        "schema": {"openAPIV3Schema": root},
        "subresources": {"status": {}},
        "additionalPrinterColumns": [*_COLUMNS[kind], _AGE],
    }
    return {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {
            "name": f"{crd.plural}.{GROUP}",
            "labels": {"app.kubernetes.io/part-of": "taugrid"},
        },
        "spec": {
            "group": GROUP,
            "scope": crd.scope,
            "names": {
                "kind": crd.kind,
                "plural": crd.plural,
                "singular": crd.kind.lower(),
                "categories": ["taugrid"],
            },
            "versions": [version],
        },
    }


def crd_definitions() -> list[dict[str, Any]]:
    """Every TauGrid CRD, in ``KINDS`` order."""
    return [crd_definition(kind) for kind in KINDS]
