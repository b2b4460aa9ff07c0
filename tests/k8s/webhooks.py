"""Kueue's admission and CRD conversion webhooks registered the way its release
kustomizes them, except that each client config names the webhook server by URL
(``https://<loopback ip>:<port><path>``) with the harness's CA as ``caBundle`` instead of
an in-cluster Service (the test control plane has no Service network)."""

from __future__ import annotations

import base64
from pathlib import Path
from typing import Any

import yaml
from kubernetes import client

PREFIX = "kueue-"  # the release's kustomize namePrefix


def _client_config(service_ref: dict[str, Any], base_url: str, ca: bytes) -> dict[str, Any]:
    return {
        "url": f"{base_url}{service_ref.get('path', '')}",
        "caBundle": base64.b64encode(ca).decode(),
    }


def _kustomize_patches(kustomization: Path) -> dict[str, dict[str, Any]]:
    """The inline patches of the webhook kustomization: webhook name -> fields."""
    out: dict[str, dict[str, Any]] = {}
    for entry in yaml.safe_load(kustomization.read_text()).get("patches", []):
        patch = yaml.safe_load(entry.get("patch", "")) or {}
        for hook in patch.get("webhooks", []):
            out[hook["name"]] = {k: v for k, v in hook.items() if k != "name"}
    return out


def webhook_configurations(share: Path, base_url: str, ca: bytes) -> list[dict[str, Any]]:
    """Kueue's Mutating/ValidatingWebhookConfiguration objects, by URL."""
    patches = _kustomize_patches(share / "kustomization.yaml")
    out: list[dict[str, Any]] = []
    for doc in yaml.safe_load_all((share / "manifests.yaml").read_text()):
        if not doc:
            continue
        doc["metadata"]["name"] = PREFIX + doc["metadata"]["name"]
        for hook in doc["webhooks"]:
            service = hook["clientConfig"]["service"]
            hook["clientConfig"] = _client_config(service, base_url, ca)
            hook.update(patches.get(hook["name"], {}))
        out.append(doc)
    return out


def conversion_patches(share: Path, base_url: str, ca: bytes) -> dict[str, dict[str, Any]]:
    """CRD name -> ``spec.conversion`` for the CRDs the release's kustomization converts
    by webhook (its ``patches/webhook_in_*.yaml`` entries)."""
    crd_dir = share / "crd-patches"
    kustomization = yaml.safe_load((crd_dir / "kustomization.yaml").read_text())
    out: dict[str, dict[str, Any]] = {}
    for entry in kustomization.get("patches", []):
        doc = yaml.safe_load((crd_dir / Path(entry["path"]).name).read_text())
        conversion = doc["spec"]["conversion"]
        webhook = conversion["webhook"]
        webhook["clientConfig"] = _client_config(webhook["clientConfig"]["service"], base_url, ca)
        out[doc["metadata"]["name"]] = conversion
    return out


def register(kube: client.ApiClient, share: Path, base_url: str, ca: bytes) -> list[str]:
    """Creates the webhook configurations and patches the CRDs' conversion; returns the
    names the cert rotator will look for."""
    adm = client.AdmissionregistrationV1Api(kube)
    ext = client.ApiextensionsV1Api(kube)
    names: list[str] = []
    for doc in webhook_configurations(share, base_url, ca):
        if doc["kind"] == "MutatingWebhookConfiguration":
            adm.create_mutating_webhook_configuration(doc)
        else:
            adm.create_validating_webhook_configuration(doc)
        names.append(doc["metadata"]["name"])
    for crd, conversion in conversion_patches(share, base_url, ca).items():
        ext.patch_custom_resource_definition(crd, {"spec": {"conversion": conversion}})
        names.append(crd)
    return names
