"""``tau cluster install`` with the project image on a cluster that runs containers
(issue 31 item 5, first part): the image ``make image`` builds is pushed to the tier's
registry, ``tau cluster install --image`` names it, the real node pulls it and the
operator runs as a pod there: in-cluster, through its service account and the
``kubernetes`` Service (relayed to the API server as kube-proxy would,
``tests/hub/cut_proxy.py``), it reconciles a TauWorkspace and writes its status.

A control plane of its own (the shared one has the operator tests' operator running as
a process; two operators would reconcile the same objects) with its own real node,
registry and Kueue. The agent's pod gets its hub token, the platform file and the record
store's credentials from what install applies (``--agent-token-file``, ``--platform``:
two Secrets and a ConfigMap; the credentials from install's environment, by the names
the platform's ``records`` gives), reaches a real hub on the worker's loopback, reports
its cluster and takes a run to completion: the quickstart as a Job in a pod, its code
from the record in S3 (the real SeaweedFS) and its outputs back there. The last test
installs again ``--with-hub``: the hub then runs in a pod too (SQLite on a claim the
test's PersistentVolume binds, as a platform team's storage would), adopts the tokens
install made, and takes a run to completion through the agent; ``tau cluster uninstall``
then leaves nothing, the hub's claim included. Installed once more on PostgreSQL
(``--hub-database-secret``) the hub keeps nothing in its pod: a new pod serves the same
runs and opens the same secrets. After it the Helm chart, with the platform
file's pod settings as values, installs the operator and agent onto the real node, the
agent reporting to the hub outside, and ``helm uninstall`` removes them. Nothing install
applies is patched: the platform file's ``pods:`` for the cluster (the host network, as
there is no CNI plugin here, a toleration of the real node's taint, the node's name)
reach the operator's and agent's pods through ``--platform``.
"""

from __future__ import annotations

import base64
import dataclasses
import os
import secrets
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from unittest import mock

import httpx
import pytest
import yaml
from kubernetes import client, config

from taugrid import home as tau_home
from taugrid.render import cluster as install_render
from taugrid.render import naming
from taugrid.store import db
from tests import pg_schema
from tests import weed_s3 as ws
from tests.cli import platform_env
from tests.hub import harness
from tests.hub import region as rg
from tests.k8s import (
    controlplane,
    crds,
    kube_region,
    operators,
    pod_region,
    project_image,
    realnode,
    registry,
    tau_operator,
)
from tests.k8s.test_helm_chart import CHART, run_helm

# The module's fixture (its own control plane, registry, real node and hub; the image
# pushed and installed) counts against the timeout of whichever test runs first: about a
# minute on an idle machine, four on a loaded one (the CI run of 40c2aea: 243 s), and the
# pods then take up to four more to pull the image and become Ready.
pytestmark = [pytest.mark.k8s, pytest.mark.timeout(600)]


@dataclasses.dataclass(frozen=True)
class Installed:
    """The installed cluster: its client, the image's reference, the hub and where the
    runs' records are (``<bucket>/<prefix>``)."""

    kube: client.ApiClient
    ref: str
    hub: harness.HubServer
    prefix: str
    kubeconfig: Path
    tmp: Path


@pytest.fixture(scope="module")
def installed(
    control_plane: controlplane.ControlPlane,
    weed_s3: ws.WeedS3,
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[Installed]:
    absent = realnode.missing(control_plane.bindir) + registry.missing()
    if absent:
        pytest.fail(f"the tier needs: {', '.join(absent)} (.ci/run installs and builds them)")
    tmp = Path(tmp_path_factory.mktemp("install-node"))
    archive = project_image.archive()
    (tmp / "hub").mkdir()
    engine = db.create_engine(f"sqlite:///{tmp / 'hub.db'}")
    db.migrate(engine)
    weed_s3.make_bucket(pod_region.BUCKET)
    prefix = f"{pod_region.BUCKET}/{secrets.token_hex(4)}"
    creds = {ws.KEY_ENV: ws.KEY, ws.SECRET_ENV: ws.SECRET}
    with (
        mock.patch.dict(os.environ, creds),  # the hub's, and what install hands the agent
        controlplane.ControlPlane(bindir=control_plane.bindir, workdir=tmp / "cp") as cp,
        registry.Registry(realnode.IP, tmp / "registry") as reg,
        realnode.RealNode(cp, tmp / "node", registries=(reg.host,)) as node,
        harness.platform_hub(
            engine, tmp / "hub", _in_cluster_platform(cp, weed_s3, f"s3://{prefix}")
        ) as hub,
    ):
        kube = config.new_client_from_config(config_file=str(cp.kubeconfig))
        try:
            for name in ("kueue", "kuberay"):  # what the agent reports on besides nodes
                crds.install(kube, crds.crd_dir(control_plane.bindir, name))
            operators.start_kueue(cp, kube)  # admits the run's Job
            labels = {"metadata": {"labels": {"nvidia.com/gpu.product": pod_region.PRODUCT}}}
            client.CoreV1Api(kube).patch_node(realnode.NAME, labels)
            kube_region.data_volume(kube)
            Path(f"/tmp/taugrid-test-pv-{kube_region.WORKSPACE}").mkdir(exist_ok=True)
            ref = reg.push(archive, project_image.name(archive).split("/", 1)[1])
            token = tmp / "agent.token"
            token.write_text(hub.agent_token(kube_region.CLUSTER))
            home = {**os.environ, "TAU_HOME": str(tmp / "home")}
            args = ["--image", ref, "--hub-url", hub.url, "--cluster", kube_region.CLUSTER]
            args += ["--agent-token-file", str(token), "-f", str(tmp / "hub" / "platform.yaml")]
            out = platform_env.tau(
                home, "cluster", "install", *args, "--kubeconfig", str(cp.kubeconfig)
            )
            assert out.returncode == 0, out.stderr
            yield Installed(kube, ref, hub, prefix, cp.kubeconfig, tmp)
        finally:
            _dump(kube, node)
            kube.close()
    engine.dispose()


def _in_cluster_platform(cp: controlplane.ControlPlane, weed: ws.WeedS3, url: str) -> str:
    """The region of ``pod_region`` (its pods on the host network of the real node,
    tolerating its taint; records in S3), as an agent in the cluster reads it: no
    kubeconfig (it uses its service account)."""
    text = pod_region.platform_yaml(cp.kubeconfig, weed, url)
    return "\n".join(ln for ln in text.splitlines() if "kubeconfig:" not in ln) + "\n"


def _pods(kube: client.ApiClient, name: str) -> list[Any]:
    selector = f"app.kubernetes.io/name={name}"
    core = client.CoreV1Api(kube)
    return list(core.list_namespaced_pod(naming.AGENT_NAMESPACE, label_selector=selector).items)


def _ready(pod: Any) -> bool:
    conds = pod.status.conditions or []
    return pod.metadata.deletion_timestamp is None and any(
        c.type == "Ready" and c.status == "True" for c in conds
    )


def _dump(kube: client.ApiClient, node: realnode.RealNode) -> None:
    """What a failure needs: the pods' states and logs (printed; pytest shows them)."""
    core = client.CoreV1Api(kube)
    for pod in core.list_namespaced_pod(naming.AGENT_NAMESPACE).items:
        print(
            pod.metadata.name, pod.spec.node_name, pod.status.phase, pod.status.container_statuses
        )
        try:
            log = core.read_namespaced_pod_log(pod.metadata.name, naming.AGENT_NAMESPACE)
            print(str(log or "(empty log)")[-3000:])
        except client.ApiException as exc:
            print(f"(no log: {exc.reason})")
    print(node.tail("kubelet"))


def test_the_operator_runs_from_the_pulled_image_and_reconciles_in_cluster(
    installed: Installed,
) -> None:
    kube, ref = installed.kube, installed.ref

    def operator_ready() -> Any:
        pods = [p for p in _pods(kube, install_render.OPERATOR) if _ready(p)]
        return pods[0] if pods else None

    pod = controlplane.wait_until("the operator pod Ready", operator_ready, timeout_s=240)
    assert pod.spec.node_name == realnode.NAME
    (status,) = pod.status.container_statuses
    assert status.image == ref  # pulled from the registry, by reference
    ws = {
        "apiVersion": f"{tau_operator.GROUP}/{tau_operator.VERSION}",
        "kind": "TauWorkspace",
        "metadata": {"name": "in-cluster"},
        "spec": {"team": "nobody-yet"},
    }
    tau_operator.create(kube, ws)
    status_doc = tau_operator.phase(kube, "TauWorkspace", "in-cluster", want="Failed")
    assert "team nobody-yet does not exist" in status_doc["message"]

    def log() -> str:
        core = client.CoreV1Api(kube)
        return str(core.read_namespaced_pod_log(pod.metadata.name, naming.AGENT_NAMESPACE))

    # kopf, in the pod, logs the handler's end after it wrote the status (CI saw the
    # status before the line)
    done = "Creation is processed: 1 succeeded"
    controlplane.wait_until("kopf's line in the pod's log", lambda: done in log(), timeout_s=60)


def test_the_agent_runs_from_the_image_with_its_token_and_platform_and_reports_to_the_hub(
    installed: Installed,
) -> None:
    """The agent's pod mounts the hub token (Secret) and the platform file (ConfigMap)
    that install applied, reaches the hub and reports its cluster: the real node is
    among the nodes the hub sees."""
    kube, ref, hub = installed.kube, installed.ref, installed.hub

    def agent_ready() -> Any:
        pods = [p for p in _pods(kube, naming.AGENT_SERVICE_ACCOUNT) if _ready(p)]
        return pods[0] if pods else None

    pod = controlplane.wait_until("the agent pod Ready", agent_ready, timeout_s=240)
    assert pod.spec.node_name == realnode.NAME and pod.status.container_statuses[0].image == ref
    with hub.http() as c:

        def reported() -> Any:
            rows = c.get("/v1/clusters").json()
            row = next((r for r in rows if r["id"] == kube_region.CLUSTER), None)
            nodes = {n["node_id"] for n in ((row or {}).get("report") or {}).get("nodes", [])}
            return row if realnode.NAME in nodes else None

        row = controlplane.wait_until("the agent's report at the hub", reported, timeout_s=180)
    assert row["report"]["nodes"]


def test_the_installed_agent_takes_a_run_to_completion(
    installed: Installed, weed_s3: ws.WeedS3
) -> None:
    """``tau run`` of the quickstart reaches the agent in its pod, which applies the Job;
    Kueue admits it, its pod runs on the real node under podsync with the record store's
    credentials the agent got from install, and the run succeeds with its artifacts in
    S3."""
    with installed.hub.http() as c:
        run = rg.submit_run(c, pod_region.tau_yaml(installed.ref, "--steps 20"))
        done = rg.wait_run(c, run["id"], rg.finished, timeout=420)
        log = c.get(f"/v1/runs/{run['id']}/logs").json()["text"]
    assert done["state"] == "succeeded", (done["reason"], done["attempts"], log[-2000:])
    assert rg.phases(done)["artifacts_saved"] == "done"
    base = f"{installed.prefix}/{kube_region.WORKSPACE}/runs/{run['id']}"
    assert weed_s3.filesystem().exists(f"{base}/artifacts/model.npz")


def test_with_hub_the_hub_runs_in_a_pod_takes_a_run_and_uninstall_leaves_nothing(
    installed: Installed,
) -> None:
    """``tau cluster install --with-hub`` over the install above (the agent now points at
    the hub's pod): the hub's pod becomes Ready on the real node with its database on the
    claim, answers the admin token install saved for ``tau login`` and the agent's token
    it handed the agent, and a run submitted to it succeeds in a pod. Uninstall then
    deletes every object install made and waits until they are gone."""
    kube, tmp = installed.kube, installed.tmp
    pv_dir = tmp / "hub-pv"
    pv_dir.mkdir()
    claim = {"namespace": naming.AGENT_NAMESPACE, "name": naming.HUB_DATA_CLAIM}
    pv = {
        "metadata": {"name": "pv-taugrid-hub"},
        "spec": {
            "capacity": {"storage": "1Gi"},
            "accessModes": ["ReadWriteOnce"],
            "hostPath": {"path": str(pv_dir)},
            "claimRef": claim,
            "persistentVolumeReclaimPolicy": "Retain",
        },
    }
    client.CoreV1Api(kube).create_persistent_volume(pv)
    port = harness.free_port(realnode.IP)
    url = f"http://{realnode.IP}:{port}"  # no kube-proxy here: the pod's address itself
    home = {**os.environ, "TAU_HOME": str(tmp / "home")}
    args = ["--image", installed.ref, "--with-hub", "--hub-port", str(port), "--hub-url", url]
    args += ["--cluster", kube_region.CLUSTER, "-f", str(tmp / "hub" / "platform.yaml")]
    kubeconfig = ["--kubeconfig", str(installed.kubeconfig)]
    out = platform_env.tau(home, "cluster", "install", *args, *kubeconfig)
    assert out.returncode == 0, out.stderr
    assert "applied Deployment taugrid-hub" in out.stdout and "tau login" in out.stdout
    admin = tau_home.installed_admin_token(tmp / "home", kube_region.CLUSTER).read_text()
    assert admin not in out.stdout + out.stderr

    def hub_ready() -> Any:
        pods = [p for p in _pods(kube, naming.HUB_NAME) if _ready(p)]
        return pods[0] if pods else None

    pod = controlplane.wait_until("the hub pod Ready", hub_ready, timeout_s=240)
    assert pod.spec.node_name == realnode.NAME
    with _hub_client(url, admin) as c:
        assert c.get("/v1/whoami").json()["role"] == "admin"

        def reported() -> Any:
            rows = c.get("/v1/clusters").json()
            row = next((r for r in rows if r["id"] == kube_region.CLUSTER), None)
            return row if row and row.get("report") else None

        controlplane.wait_until("the agent's report at the hub's pod", reported, timeout_s=240)
        run = rg.submit_run(c, pod_region.tau_yaml(installed.ref, "--steps 10"))
        done = rg.wait_run(c, run["id"], rg.finished, timeout=420)
        log = c.get(f"/v1/runs/{run['id']}/logs").json()["text"]
    assert done["state"] == "succeeded", (done["reason"], done["attempts"], log[-2000:])
    assert (pv_dir / "hub.db").exists()  # the hub's database is on the claim
    out = platform_env.tau(home, "cluster", "uninstall", *kubeconfig, timeout=300)
    assert out.returncode == 0, out.stdout + out.stderr
    assert f"deleted PersistentVolumeClaim {naming.HUB_DATA_CLAIM}" in out.stdout
    core = client.CoreV1Api(kube)
    assert not core.list_namespaced_pod(naming.AGENT_NAMESPACE).items


def test_with_hub_on_postgresql_the_hub_keeps_nothing_in_its_pod(installed: Installed) -> None:
    """``--with-hub --hub-database-secret``: the hub's pod reads PostgreSQL's URL (a fresh
    schema of the tier's server, over TCP from the host network) from the Secret the
    platform engineer made and its secrets key from the one install made; a workspace
    secret set through it opens with that key, its run succeeds, and a new pod (the
    first deleted) serves the same run from the database. A Secret that is not there is
    refused before anything is applied; uninstall leaves the database to its owner."""
    if not pg_schema.URL:
        pytest.skip("PostgreSQL not configured: set TAU_TEST_POSTGRES_URL (.ci/run does)")
    kube, tmp = installed.kube, installed.tmp
    port = harness.free_port(realnode.IP)
    url = f"http://{realnode.IP}:{port}"
    home = {**os.environ, "TAU_HOME": str(tmp / "home-pg")}
    args = ["--image", installed.ref, "--with-hub", "--hub-port", str(port), "--hub-url", url]
    args += ["--cluster", kube_region.CLUSTER, "-f", str(tmp / "hub" / "platform.yaml")]
    kubeconfig = ["--kubeconfig", str(installed.kubeconfig)]
    args += [*kubeconfig, "--hub-database-secret", "hub-db"]
    core = client.CoreV1Api(kube)
    with pg_schema.fresh(tcp=True) as database:
        _namespace(core)
        out = platform_env.tau(home, "cluster", "install", *args)
        assert out.returncode == 2 and "kubectl -n taugrid-system create secret" in out.stderr
        secret = {"metadata": {"name": "hub-db"}, "stringData": {"url": database}}
        core.create_namespaced_secret(naming.AGENT_NAMESPACE, secret)
        out = platform_env.tau(home, "cluster", "install", *args)
        assert out.returncode == 0, out.stderr
        assert "PersistentVolumeClaim" not in out.stdout and database not in out.stdout
        admin = tau_home.installed_admin_token(tmp / "home-pg", kube_region.CLUSTER).read_text()
        first = controlplane.wait_until("the hub pod Ready", lambda: _hub_pod(kube), 240)
        with _hub_client(url, admin) as c:
            put = c.put(f"/v1/workspaces/{kube_region.WORKSPACE}/secrets/hf", json=_SECRET)
            assert put.status_code == 200, put.text
            run = rg.submit_run(c, pod_region.tau_yaml(installed.ref, "--steps 10"))
            done = rg.wait_run(c, run["id"], rg.finished, timeout=420)
            assert done["state"] == "succeeded", (done["reason"], done["attempts"])
            core.delete_namespaced_pod(first.metadata.name, naming.AGENT_NAMESPACE)

            def replaced() -> Any:
                pod = _hub_pod(kube)
                return pod if pod and pod.metadata.uid != first.metadata.uid else None

            controlplane.wait_until("a new hub pod Ready", replaced, timeout_s=240)
            again = c.get(f"/v1/runs/{run['id']}").json()  # from the database, not the pod
        assert again["state"] == "succeeded" and again["attempts"] == done["attempts"]
        _check_sealed_with_installed_key(core, database)
        out = platform_env.tau(home, "cluster", "uninstall", *kubeconfig, timeout=300)
        assert out.returncode == 0, out.stdout + out.stderr


_SECRET = {"data": {"token": "hf-s3cr3t"}}


def _namespace(core: client.CoreV1Api) -> None:
    """taugrid-system, where the platform engineer puts the database's Secret before
    installing: made anew once an uninstall before this test has deleted it."""

    def active() -> bool:
        try:
            ns = core.read_namespace(naming.AGENT_NAMESPACE)
        except client.ApiException as exc:
            if exc.status != 404:
                raise
            core.create_namespace({"metadata": {"name": naming.AGENT_NAMESPACE}})
            return True
        return bool(ns.status.phase == "Active")

    controlplane.wait_until("taugrid-system Active", active, timeout_s=120)


def _hub_client(url: str, token: str) -> httpx.Client:
    """A client of the hub's pod: 30 s a request, as the SDK's (httpx's 5 s default
    timed out a submission to the pod with two cores busy beside it, in CI's setting)."""
    return httpx.Client(base_url=url, headers={"Authorization": f"Bearer {token}"}, timeout=30)


def _hub_pod(kube: client.ApiClient) -> Any:
    pods = [p for p in _pods(kube, naming.HUB_NAME) if _ready(p)]
    return pods[0] if pods else None


def _check_sealed_with_installed_key(core: client.CoreV1Api, database: str) -> None:
    """The workspace secret in the database opens with the key of install's Secret."""
    from taugrid.hub.core import vault
    from taugrid.store import secrets as secret_store

    ref = core.read_namespaced_secret(naming.HUB_SECRETS_KEY_SECRET, naming.AGENT_NAMESPACE)
    key = base64.b64decode(ref.data[install_render.HUB_SECRETS_KEY_KEY]).decode()
    engine = db.create_engine(database)
    try:
        with mock.patch.dict(os.environ, {vault.KEY_ENV: key}):
            box = vault.Vault(secret_store.SecretStore(engine), Path("/nonexistent"))
            refs = [{"name": "hf", "key": "token", "env": "HF_TOKEN"}]
            assert box.values(kube_region.WORKSPACE, refs) == {"HF_TOKEN": "hf-s3cr3t"}
    finally:
        engine.dispose()


def test_the_helm_chart_runs_the_operator_and_the_agent_on_the_real_node(
    installed: Installed, helm: Path
) -> None:
    """On the cluster uninstall left empty: ``helm install`` of the chart, the cluster's
    pod settings as values, the agent's Secrets and ConfigMap made as docs/kubernetes.md
    says for Helm: the operator's and the agent's pods become Ready on the real node from
    the pulled image and the agent reports to the hub outside; ``helm uninstall`` takes
    them away with their namespace."""
    kube, tmp, hub = installed.kube, installed.tmp, installed.hub
    toleration = {**realnode.TAINT, "operator": "Equal"}
    values = {
        "image": installed.ref,
        "hubUrl": hub.url,
        "cluster": kube_region.CLUSTER,
        "hostNetwork": True,
        "tolerations": [toleration],
        "nodeSelector": {"kubernetes.io/hostname": realnode.NAME},
    }
    (tmp / "values.yaml").write_text(yaml.safe_dump(values))
    helm_args = ["--namespace", "default", "--kubeconfig", str(installed.kubeconfig)]
    since = time.time()
    run_helm(
        [str(helm), "install", "taugrid", str(CHART), "-f", str(tmp / "values.yaml"), *helm_args],
        tmp,
    )
    core, ns = client.CoreV1Api(kube), naming.AGENT_NAMESPACE
    token = {"token": hub.agent_token(kube_region.CLUSTER)}
    core.create_namespaced_secret(
        ns, {"metadata": {"name": naming.AGENT_TOKEN_SECRET}, "stringData": token}
    )
    platform = {"platform.yaml": (tmp / "hub" / "platform.yaml").read_text()}
    core.create_namespaced_config_map(
        ns, {"metadata": {"name": naming.PLATFORM_CONFIGMAP}, "data": platform}
    )
    creds = {ws.KEY_ENV: ws.KEY, ws.SECRET_ENV: ws.SECRET}
    core.create_namespaced_secret(
        ns, {"metadata": {"name": naming.AGENT_RECORDS_SECRET}, "stringData": creds}
    )
    for name in (install_render.OPERATOR, naming.AGENT_SERVICE_ACCOUNT):

        def ready(name: str = name) -> Any:
            pods = [p for p in _pods(kube, name) if _ready(p)]
            return pods[0] if pods else None

        pod = controlplane.wait_until(f"the {name} pod Ready", ready, timeout_s=240)
        assert pod.spec.node_name == realnode.NAME
        assert pod.status.container_statuses[0].image == installed.ref
    with hub.http() as c:

        def reported() -> Any:
            rows = c.get("/v1/clusters").json()
            row = next((r for r in rows if r["id"] == kube_region.CLUSTER), None)
            report = (row or {}).get("report") or {}
            return report if report.get("last_heartbeat", 0) > since else None

        controlplane.wait_until("the Helm agent's report", reported, timeout_s=180)
    run_helm([str(helm), "uninstall", "taugrid", *helm_args], tmp)

    def gone() -> bool:
        return not core.list_namespace(field_selector=f"metadata.name={ns}").items

    controlplane.wait_until("taugrid-system deleted", gone, timeout_s=240)
