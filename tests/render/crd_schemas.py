"""Validation of rendered objects against upstream CRD schemas and Kubernetes core types.

CRD schemas come from ``$TAU_CRDS_DIR`` or ``../shared/crds`` next to the repository
(reference data, never copied into the repo; see its SOURCE.md). Per SOURCE.md the
schema ``default`` values are applied (recursively) before validating, or fields such
as ``minReplicas`` read as missing. Core objects (Namespace, PVC, Job, ...) are checked
with ``kubernetes_validate`` in strict mode.
"""

from __future__ import annotations

import copy
import functools
import os
import pathlib
from typing import Any

import jsonschema
import pytest
import yaml

REPO = pathlib.Path(__file__).resolve().parents[2]
CORE_GROUPS = {"v1", "batch/v1", "rbac.authorization.k8s.io/v1", "apiextensions.k8s.io/v1"}
K8S_VERSION = "1.33.0"


def crds_dir() -> pathlib.Path | None:
    """The CRD folder, or ``None`` when it is not there."""
    env = os.environ.get("TAU_CRDS_DIR")
    candidates = [pathlib.Path(env)] if env else []
    candidates.append(REPO.parent / "shared" / "crds")
    return next((c for c in candidates if c.is_dir()), None)


def require_crds() -> pathlib.Path:
    """The CRD folder, or skip the test with the reason."""
    found = crds_dir()
    if found is None:
        pytest.skip("upstream CRD schemas not found: set TAU_CRDS_DIR or provide ../shared/crds")
    return found


@functools.cache
def _crds(folder: str) -> list[dict[str, Any]]:
    loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
    docs = [
        yaml.load(p.read_text(), Loader=loader)
        for p in sorted(pathlib.Path(folder).glob("*/*.yaml"))
    ]
    return [d for d in docs if isinstance(d, dict) and d.get("kind") == "CustomResourceDefinition"]


@functools.cache
def _schemas(folder: str) -> dict[tuple[str, str], dict[str, Any]]:
    out: dict[tuple[str, str], dict[str, Any]] = {}
    for doc in _crds(folder):
        group, kind = doc["spec"]["group"], doc["spec"]["names"]["kind"]
        for version in doc["spec"]["versions"]:
            if version.get("served"):
                schema = version["schema"]["openAPIV3Schema"]
                out[(f"{group}/{version['name']}", kind)] = schema
    return out


def schema_for(api_version: str, kind: str) -> dict[str, Any]:
    """The served OpenAPI schema of ``kind`` at ``api_version`` (fails if not served)."""
    schemas = _schemas(str(require_crds()))
    key = (api_version, kind)
    assert key in schemas, (
        f"{kind} {api_version} is not served by the CRDs; served: {sorted(schemas)}"
    )
    return schemas[key]


def storage_version(group: str, kind: str) -> str:
    """The version a CRD stores (``storage: true``)."""
    for doc in _crds(str(require_crds())):
        spec = doc["spec"]
        if spec.get("group") == group and spec.get("names", {}).get("kind") == kind:
            return str(next(v["name"] for v in spec["versions"] if v.get("storage")))
    raise AssertionError(f"no CRD for {group} {kind}")


def apply_defaults(schema: dict[str, Any], value: Any) -> Any:
    """A copy of ``value`` with every schema ``default`` filled in, recursively."""
    value = copy.deepcopy(value)
    _fill(schema, value)
    return value


def _fill(schema: dict[str, Any], value: Any) -> None:
    if isinstance(value, dict):
        for key, sub in (schema.get("properties") or {}).items():
            if key not in value and "default" in sub:
                value[key] = copy.deepcopy(sub["default"])
            if key in value:
                _fill(sub, value[key])
        extra = schema.get("additionalProperties")
        if isinstance(extra, dict):
            for key in set(value) - set(schema.get("properties") or {}):
                _fill(extra, value[key])
    elif isinstance(value, list) and isinstance(schema.get("items"), dict):
        for item in value:
            _fill(schema["items"], item)


def closed(schema: Any) -> Any:
    """A copy of ``schema`` that rejects unknown fields, as the API server's pruning would
    drop them silently (a typo such as ``cohort`` for ``cohortName`` must fail here)."""
    if isinstance(schema, list):
        return [closed(s) for s in schema]
    if not isinstance(schema, dict):
        return schema
    out = {k: closed(v) for k, v in schema.items()}
    if (
        "properties" in schema
        and "additionalProperties" not in schema
        and not schema.get("x-kubernetes-preserve-unknown-fields")
    ):
        out["additionalProperties"] = False
    return out


@functools.cache
def _closed_schema(api_version: str, kind: str) -> Any:
    return closed(schema_for(api_version, kind))


def validate_custom(obj: dict[str, Any]) -> None:
    """Validate a custom resource against its upstream CRD schema (defaults applied)."""
    schema = schema_for(obj["apiVersion"], obj["kind"])
    strict = _closed_schema(obj["apiVersion"], obj["kind"])
    jsonschema.Draft7Validator(strict).validate(apply_defaults(schema, obj))


def validate_core(obj: dict[str, Any]) -> None:
    """Validate a core Kubernetes object with kubernetes_validate (strict)."""
    import kubernetes_validate

    kubernetes_validate.validate(obj, K8S_VERSION, strict=True)


def validate(obj: dict[str, Any]) -> None:
    """Validate any rendered object with the right validator."""
    if obj["apiVersion"] in CORE_GROUPS:
        validate_core(obj)
    else:
        validate_custom(obj)
