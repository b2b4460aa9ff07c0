"""The Helm chart (deploy/helm/taugrid) with the real ``helm`` binary that
``k8s/build.sh helm`` builds from the Go module proxy: ``helm lint`` passes and
``helm template`` renders exactly the objects ``tau cluster install --dry-run`` prints
for the same settings. Skipped (saying how to build it) when helm is not built."""

from __future__ import annotations

import os
import subprocess
import warnings
from pathlib import Path
from typing import Any

import pytest
import yaml

from taugrid.backends.kube import kube_api
from taugrid.render import cluster
from tests.cli import platform_env
from tests.k8s import controlplane, kube_region

pytestmark = pytest.mark.k8s

CHART = platform_env.ROOT / "deploy" / "helm" / "taugrid"
CUSTOM = {
    "image": "registry.example/tau:9.9",
    "hubUrl": "https://hub.example:8443",
    "cluster": "gke-west",
}
POD_VALUES: dict[str, Any] = {
    "hostNetwork": True,
    "tolerations": [
        {"key": "dedicated", "operator": "Equal", "value": "gpu", "effect": "NoSchedule"}
    ],
    "nodeSelector": {"pool": "system"},
}


def run_helm(args: list[str], tmp: Path) -> str:
    """``args`` (helm or tau) with helm's homes under ``tmp``; its stdout (asserted 0)."""
    env = {
        **os.environ,
        "TAU_HOME": str(tmp / "home"),
        "HELM_CACHE_HOME": str(tmp / "hc"),
        "HELM_CONFIG_HOME": str(tmp / "hcfg"),
        "HELM_DATA_HOME": str(tmp / "hd"),
    }
    done = subprocess.run(args, env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, f"{args[:3]} failed:\n{done.stdout}\n{done.stderr}"
    return done.stdout


def _wait_deleted(api: kube_api.KubeApi, keys: list[tuple[str, str, Any]], cp: Any) -> None:
    """Every object is deleted: gone, or marked for deletion and finalized by Kubernetes.

    Finalizing is Kubernetes' own work: the namespace controller empties a namespace, the
    API server's CRD finalizer removes a CRD's instances, each retried with a backoff
    that grows to minutes, so on a loaded machine an object may stay terminating past any
    bound (seen twice in the whole tier, Dec 2026). An object helm left *not* marked for
    deletion is a defect of the chart and fails; one still terminating after the wait is
    reported as a warning with its state, which names the finalizer at work.
    """

    def state(key: tuple[str, str, Any]) -> str:
        obj = api.get(*key)
        if obj is None:
            return "gone"
        return "terminating" if obj["metadata"].get("deletionTimestamp") else "kept"

    try:
        controlplane.wait_until(
            "helm uninstall deleted every object of the chart",
            lambda: all(state(k) != "kept" for k in keys),
            timeout_s=60,
        )
    except TimeoutError as e:
        raise AssertionError(f"{e}\n{_left(api, keys, cp)}") from None
    try:
        controlplane.wait_until(
            "nothing of the chart left", lambda: all(state(k) == "gone" for k in keys), 120
        )
    except TimeoutError as e:
        warnings.warn(f"{e}; still terminating:\n{_left(api, keys, cp)}", stacklevel=1)


def _left(api: kube_api.KubeApi, keys: list[tuple[str, str, Any]], cp: Any) -> str:
    """What is still there and why (its deletion mark, finalizers, conditions), and
    whether the control plane's processes still run: a failure says its cause."""
    lines = [f"processes running: {cp.alive()}"]
    for key in keys:
        obj = api.get(*key)
        if obj is not None:
            meta, status = obj["metadata"], obj.get("status", {})
            lines.append(
                f"left: {key} deleting since {meta.get('deletionTimestamp')} "
                f"finalizers={meta.get('finalizers')} spec={obj.get('spec', {}).get('finalizers')} "
                f"conditions={status.get('conditions')}"
            )
    log = cp.logs / "kube-controller-manager.log"
    text = log.read_text(errors="replace").splitlines() if log.exists() else []
    about = [ln for ln in text if "namespace" in ln or "taugrid" in ln][-12:]
    return "\n".join([*lines, "kube-controller-manager log:", *about, "...", *text[-5:]])


def _objects(text: str) -> dict[tuple[str, str], dict[str, Any]]:
    docs = [d for d in yaml.safe_load_all(text) if d]
    keyed = {(d["kind"], d["metadata"]["name"]): d for d in docs}
    assert len(keyed) == len(docs), "an object rendered twice"
    return keyed


def _template(helm: Path, tmp: Path, *sets: str) -> dict[tuple[str, str], dict[str, Any]]:
    args = [str(helm), "template", "taugrid", str(CHART)]
    for s in sets:
        args += ["--set", s]
    return _objects(run_helm(args, tmp))


def _tau_dryrun_helm(tmp: Path, *flags: str) -> dict[tuple[str, str], dict[str, Any]]:
    return _objects(run_helm([platform_env.TAU, "cluster", "install", "--dry-run", *flags], tmp))


def test_helm_lint_passes(helm: Path, tmp_path: Path) -> None:
    out = run_helm([str(helm), "lint", "--strict", str(CHART)], tmp_path)
    assert "1 chart(s) linted, 0 chart(s) failed" in out


def test_helm_template_defaults_equal_tau_cluster_install(helm: Path, tmp_path: Path) -> None:
    rendered = _template(helm, tmp_path)
    expected = _tau_dryrun_helm(tmp_path)
    assert sorted(rendered) == sorted(expected)
    assert ("Namespace", "taugrid-system") in rendered
    assert ("ClusterRole", "taugrid-agent") in rendered
    for key, obj in expected.items():
        assert rendered[key] == obj, f"{key} differs between helm template and tau cluster install"


def test_helm_values_equal_tau_cluster_install_flags(helm: Path, tmp_path: Path) -> None:
    rendered = _template(helm, tmp_path, *(f"{k}={v}" for k, v in CUSTOM.items()))
    expected = _tau_dryrun_helm(
        tmp_path,
        "--image",
        CUSTOM["image"],
        "--hub-url",
        CUSTOM["hubUrl"],
        "--cluster",
        CUSTOM["cluster"],
    )
    assert rendered == expected
    agent = rendered[("Deployment", "taugrid-agent")]["spec"]["template"]["spec"]
    container = agent["containers"][0]
    assert container["image"] == CUSTOM["image"]
    assert container["command"][-4:] == ["--hub", CUSTOM["hubUrl"], "--cluster", "gke-west"]


def test_create_namespace_false_leaves_the_namespace_out(helm: Path, tmp_path: Path) -> None:
    rendered = _template(helm, tmp_path, "createNamespace=false")
    expected = _tau_dryrun_helm(tmp_path)
    del expected[("Namespace", "taugrid-system")]
    assert rendered == expected


def test_helm_install_then_uninstall_on_a_fresh_control_plane(
    helm: Path, tmp_path: Path, control_plane: controlplane.ControlPlane
) -> None:
    """helm install applies the chart to a real API server (TauGrid's part of
    ``tau cluster validate installation`` passes); helm uninstall deletes every object of
    ours (gone, or terminating while Kubernetes finalizes it)."""
    with controlplane.ControlPlane(bindir=control_plane.bindir, workdir=tmp_path / "cp") as cp:
        kubeconfig = ["--kubeconfig", str(cp.kubeconfig)]
        run_helm(
            [str(helm), "install", "taugrid", str(CHART), "--namespace", "default", *kubeconfig],
            tmp_path,
        )
        done = subprocess.run(
            [platform_env.TAU, "cluster", "validate", "installation", *kubeconfig],
            capture_output=True,
            text=True,
            timeout=120,
            env={**os.environ, "TAU_HOME": str(tmp_path / "home")},
        )
        out = done.stdout
        assert "ok    TauGrid: CRDs served (tauclusters, tauworkspaces" in out, out
        assert "ok    TauGrid: ClusterRole taugrid-agent bound" in out, out
        assert "ok    TauGrid: ClusterRole taugrid-operator bound" in out, out
        run_helm(
            [str(helm), "uninstall", "taugrid", "--namespace", "default", *kubeconfig], tmp_path
        )
        api = kube_api.KubeApi(str(cp.kubeconfig), None)
        try:
            keys = [
                (o["kind"], o["metadata"]["name"], o["metadata"].get("namespace"))
                for o in cluster.install_objects(cluster.InstallOptions())
            ]
            _wait_deleted(api, keys, cp)
        finally:
            api.close()
    assert cp.alive() == []


def test_helm_pod_values_equal_the_platform_files_pod_settings(helm: Path, tmp_path: Path) -> None:
    """The chart's ``hostNetwork``, ``tolerations`` and ``nodeSelector`` render what
    ``tau cluster install -f platform.yaml`` puts on the operator's and agent's pods from
    the cluster's ``pods:`` settings."""
    platform = tmp_path / "platform.yaml"
    platform.write_text(kube_region.platform_yaml(tmp_path / "kubeconfig"))
    pods = (
        "        pods: {host_network: true, tolerations: [{key: dedicated, value: gpu, "
        "effect: NoSchedule}], node_selector: {pool: system}}\n"
    )
    text = platform.read_text().replace(
        "        backend: kubernetes\n", "        backend: kubernetes\n" + pods
    )
    platform.write_text(text)
    values = tmp_path / "values.yaml"
    values.write_text(yaml.safe_dump(POD_VALUES | {"cluster": kube_region.CLUSTER}))
    rendered = _objects(
        run_helm([str(helm), "template", "taugrid", str(CHART), "-f", str(values)], tmp_path)
    )
    expected = _tau_dryrun_helm(tmp_path, "-f", str(platform), "--cluster", kube_region.CLUSTER)
    assert rendered == expected
    operator = rendered[("Deployment", "taugrid-operator")]["spec"]["template"]["spec"]
    assert operator["hostNetwork"] is True and operator["nodeSelector"] == {"pool": "system"}
