"""``tau cluster install --agent-token-file --platform``, refused before any cluster is
contacted when what the agent would mount is wrong: the two go together, the token must
be readable, the platform file must name ``--cluster``, and the credentials of an object
store it keeps records in must be in install's environment (they become the agent's
Secret ``taugrid-agent-records``). The kubeconfig named does not
exist, so an error about it would mean the check came too late. The cluster's ``pods:``
settings in that file reach the operator's and agent's pods (``--dry-run`` prints them)."""

from __future__ import annotations

import os
from pathlib import Path

import yaml

from tests.cli import platform_env
from tests.k8s import kube_region


def _install(tmp_path: Path, *args: str, **env_vars: str) -> tuple[int, str]:
    env = {**os.environ, "TAU_HOME": str(tmp_path / "home"), **env_vars}
    kubeconfig = ["--kubeconfig", str(tmp_path / "no-such-kubeconfig")]
    done = platform_env.tau(env, "cluster", "install", *kubeconfig, *args)
    return done.returncode, done.stdout + done.stderr


def _files(tmp_path: Path) -> tuple[Path, Path]:
    token = tmp_path / "agent.token"
    token.write_text("t0k3n\n")
    platform = tmp_path / "platform.yaml"
    platform.write_text(kube_region.platform_yaml(tmp_path / "kubeconfig"))
    return token, platform


def test_a_token_without_a_platform_file_is_refused(tmp_path: Path) -> None:
    token, _ = _files(tmp_path)
    rc, out = _install(tmp_path, "--agent-token-file", str(token))
    assert rc == 2 and "--agent-token-file and --platform go together" in out, out
    assert "t0k3n" not in out


def test_a_platform_file_without_the_cluster_is_refused_naming_what_it_has(
    tmp_path: Path,
) -> None:
    token, platform = _files(tmp_path)
    args = ["--agent-token-file", str(token), "-f", str(platform), "--cluster", "gke-west"]
    rc, out = _install(tmp_path, *args)
    assert rc == 2 and f"cluster gke-west is not in {platform}" in out, out
    assert kube_region.CLUSTER in out  # what it has


def test_an_unreadable_token_file_is_refused(tmp_path: Path) -> None:
    _, platform = _files(tmp_path)
    args = ["--agent-token-file", str(tmp_path / "absent"), "-f", str(platform)]
    rc, out = _install(tmp_path, *args, "--cluster", kube_region.CLUSTER)
    assert rc == 2 and "cannot read" in out and "absent" in out, out


def test_records_in_an_object_store_need_their_credentials_in_the_environment(
    tmp_path: Path,
) -> None:
    token, platform = _files(tmp_path)
    records = "records: {url: s3://runs/p, access_key_env: REC_KEY, secret_key_env: REC_SECRET}\n"
    platform.write_text(platform.read_text() + records)
    args = ["--agent-token-file", str(token), "-f", str(platform), "--cluster", kube_region.CLUSTER]
    rc, out = _install(tmp_path, *args, REC_KEY="k3y")
    assert rc == 2 and "read from $REC_SECRET, not set here" in out, out
    assert "taugrid-agent-records" in out and "k3y" not in out  # what to do; no value shown
    rc, out = _install(tmp_path, *args, REC_KEY="k3y", REC_SECRET="s3cr3t")
    assert "no-such-kubeconfig" in out and "s3cr3t" not in out, out  # checked, then the cluster


def test_the_clusters_pod_settings_reach_taugrids_own_pods(tmp_path: Path) -> None:
    _, platform = _files(tmp_path)
    pods = "        pods: {host_network: true, tolerations: [{key: dedicated, value: gpu}]}\n"
    text = platform.read_text().replace(
        "        backend: kubernetes\n", "        backend: kubernetes\n" + pods
    )
    platform.write_text(text)
    args = ["--dry-run", "-f", str(platform), "--cluster", kube_region.CLUSTER]
    rc, out = _install(tmp_path, *args)
    assert rc == 0, out
    deployments = [d for d in yaml.safe_load_all(out) if d["kind"] == "Deployment"]
    assert len(deployments) == 2
    for d in deployments:
        spec = d["spec"]["template"]["spec"]
        assert spec["hostNetwork"] is True, d["metadata"]["name"]
        assert spec["tolerations"] == [{"key": "dedicated", "operator": "Equal", "value": "gpu"}]
    plain = [d for d in yaml.safe_load_all(_install(tmp_path, "--dry-run")[1]) if d]
    for d in (d for d in plain if d["kind"] == "Deployment"):
        assert not {"hostNetwork", "tolerations"} & set(d["spec"]["template"]["spec"])


def test_with_hub_refuses_an_agent_token_file_and_needs_the_platform_file(
    tmp_path: Path,
) -> None:
    token, platform = _files(tmp_path)
    args = ["--with-hub", "--cluster", kube_region.CLUSTER]
    rc, out = _install(tmp_path, *args, "--agent-token-file", str(token), "-f", str(platform))
    assert rc == 2 and "--with-hub makes the agent's token itself" in out, out
    rc, out = _install(tmp_path, *args)
    assert rc == 2 and "--with-hub needs the platform file" in out, out


def test_with_hub_adds_the_hub_listening_on_its_pods_address_with_its_claim_and_service(
    tmp_path: Path,
) -> None:
    """``--dry-run --with-hub``: the hub's Deployment (Recreate, its pod's address, the
    tokens Secret and the platform ConfigMap mounted, its claim as TAU_HOME), the claim
    with the StorageClass asked for, the Service the agent's default URL names; no
    credential printed (the tokens Secret is applied only by a real install)."""
    _, platform = _files(tmp_path)
    args = ["--dry-run", "--with-hub", "-f", str(platform), "--cluster", kube_region.CLUSTER]
    rc, out = _install(tmp_path, *args, "--hub-port", "8123", "--hub-storage-class", "fast")
    assert rc == 0, out
    objs = {(d["kind"], d["metadata"]["name"]): d for d in yaml.safe_load_all(out) if d}
    hub = objs[("Deployment", "taugrid-hub")]
    assert hub["spec"]["strategy"] == {"type": "Recreate"}
    (container,) = hub["spec"]["template"]["spec"]["containers"]
    cmd = container["command"]
    assert cmd[cmd.index("--host") + 1] == "$(POD_IP)" and cmd[cmd.index("--port") + 1] == "8123"
    assert container["readinessProbe"]["httpGet"] == {"path": "/healthz", "port": 8123}
    mounts = {m["name"]: m for m in container["volumeMounts"]}
    assert mounts["home"]["readOnly"] is False and mounts["tokens"]["readOnly"] is True
    claim = objs[("PersistentVolumeClaim", "taugrid-hub-data")]
    assert claim["spec"]["storageClassName"] == "fast"
    service = objs[("Service", "taugrid-hub")]
    assert service["spec"]["ports"][0]["targetPort"] == 8123
    agent = objs[("Deployment", "taugrid-agent")]["spec"]["template"]["spec"]["containers"][0]
    url = agent["command"][agent["command"].index("--hub") + 1]
    assert url == f"http://taugrid-hub.taugrid-system.svc:{service['spec']['ports'][0]['port']}"
    assert not any(k == "Secret" for k, _ in objs)


def test_a_hub_on_its_own_database_needs_with_hub_and_records_off_its_disk(
    tmp_path: Path,
) -> None:
    _, platform = _files(tmp_path)
    secret = ["--hub-database-secret", "hub-db", "-f", str(platform)]
    rc, out = _install(tmp_path, *secret, "--cluster", kube_region.CLUSTER)
    assert rc == 2 and "add --with-hub" in out, out
    rc, out = _install(tmp_path, "--with-hub", *secret, "--cluster", kube_region.CLUSTER)
    assert rc == 2 and "keeps run records on the hub's disk" in out, out
    assert "records: {url: s3://" in out  # the fix


def test_a_hub_on_its_own_database_reads_its_url_and_key_from_secrets_and_has_no_claim(
    tmp_path: Path,
) -> None:
    """``--hub-database-secret``: no PersistentVolumeClaim (the hub's home is its pod's
    scratch), the database URL from the platform engineer's Secret and the secrets key from
    the one install makes, as environment; nothing of either printed."""
    _, platform = _files(tmp_path)
    platform.write_text(platform.read_text() + "records: {url: s3://runs/p}\n")
    args = ["--dry-run", "--with-hub", "-f", str(platform), "--cluster", kube_region.CLUSTER]
    rc, out = _install(tmp_path, *args, "--hub-database-secret", "hub-db")
    assert rc == 0, out
    objs = {(d["kind"], d["metadata"]["name"]): d for d in yaml.safe_load_all(out) if d}
    assert not any(kind == "PersistentVolumeClaim" for kind, _ in objs)
    pod = objs[("Deployment", "taugrid-hub")]["spec"]["template"]["spec"]
    assert {"name": "home", "emptyDir": {}} in pod["volumes"]
    env = {
        e["name"]: e.get("valueFrom", {}).get("secretKeyRef") for e in pod["containers"][0]["env"]
    }
    assert env["TAU_DATABASE_URL"] == {"name": "hub-db", "key": "url"}
    assert env["TAU_SECRETS_KEY"] == {"name": "taugrid-hub-secrets-key", "key": "key"}
