"""Installs CustomResourceDefinitions that ``k8s/build.sh`` copied from Kueue's and
KubeRay's source modules (``<cache>/share/<name>-crd/``) and waits until the API server
serves them (condition Established)."""

from __future__ import annotations

import contextlib
import functools
from pathlib import Path
from typing import Any

import urllib3
import yaml
from kubernetes import client

from tests.k8s import controlplane

REQUEST_TIMEOUT_S = 30.0
"""Each call's bound. A warm CI's API server, on two cores shared with the unit tier,
timed out its own handler for a CRD read (60 s) and never answered; the read without a
timeout then waited until pytest's 300 s, and the session's CRD fixture failed every
test after it."""


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
        # no answer in time: the wait below says whether it was created
        with contextlib.suppress(urllib3.exceptions.HTTPError):
            ext.create_custom_resource_definition(doc, _request_timeout=REQUEST_TIMEOUT_S)
        names.append(doc["metadata"]["name"])
    for name in names:
        controlplane.wait_until(
            f"CRD {name} Established", functools.partial(_established, ext, name)
        )
    return names


def _established(ext: client.ApiextensionsV1Api, name: str) -> bool:
    try:
        crd = ext.read_custom_resource_definition(name, _request_timeout=REQUEST_TIMEOUT_S)
    except urllib3.exceptions.HTTPError:  # no answer in time: asked again
        return False
    conds = crd.status.conditions or []
    return any(c.type == "Established" and c.status == "True" for c in conds)
