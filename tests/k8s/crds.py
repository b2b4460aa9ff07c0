"""Installs CustomResourceDefinitions that ``k8s/build.sh`` copied from Kueue's and
KubeRay's source modules (``<cache>/share/<name>-crd/``) and waits until the API server
serves them (condition Established)."""

from __future__ import annotations

import functools
from pathlib import Path
from typing import Any

import yaml
from kubernetes import client

from tests.k8s import controlplane


def crd_dir(bindir: Path, name: str) -> Path:
    """``share/<name>-crd`` beside ``bindir`` (``name``: kueue or kuberay)."""
    return bindir.parent / "share" / f"{name}-crd"


def install(kube: client.ApiClient, directory: Path) -> list[str]:
    """Creates every CRD in ``directory``'s YAML files; returns their names once all are
    Established."""
    docs = [
        doc
        for path in sorted(directory.glob("*.yaml"))
        for doc in yaml.safe_load_all(path.read_text())
        if doc and doc.get("kind") == "CustomResourceDefinition"
    ]
    return create(kube, docs)


def create(kube: client.ApiClient, docs: list[dict[str, Any]]) -> list[str]:
    """Creates the CRDs ``docs``; returns their names once all are Established."""
    ext = client.ApiextensionsV1Api(kube)
    names: list[str] = []
    for doc in docs:
        ext.create_custom_resource_definition(doc)
        names.append(doc["metadata"]["name"])
    for name in names:
        controlplane.wait_until(
            f"CRD {name} Established", functools.partial(_established, ext, name)
        )
    return names


def _established(ext: client.ApiextensionsV1Api, name: str) -> bool:
    crd = ext.read_custom_resource_definition(name)
    conds = crd.status.conditions or []
    return any(c.type == "Established" and c.status == "True" for c in conds)
