"""The hub in a cluster adopts the tokens ``tau cluster install --with-hub`` made
(``hub.server.daemon.adopt_tokens``, ``--tokens-dir``): laid out as Kubernetes mounts a
Secret (each key a link into a ``..data`` folder), the admin token and each agent token
become the hub's own, once; a token an admin later revoked is not brought back by a
restart; the real daemon started with the flag on an empty home (as a new claim is)
answers both tokens with their roles and writes no credentials file of its own."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import httpx
import sqlalchemy as sa

from taugrid import home
from taugrid.hub.server import daemon
from tests.hub import harness, pg_server

ADMIN, AGENT = "tau_admin-secret-of-the-test", "tau_agent-secret-of-the-test"


def _secret_volume(root: Path, files: dict[str, str]) -> Path:
    """A folder as the kubelet mounts a Secret: ``..data/<key>`` and a link per key."""
    data = root / "..2026_12_07_00_00_00.000"
    data.mkdir(parents=True)
    (root / "..data").symlink_to(data.name)
    for key, value in files.items():
        (data / key).write_text(value)
        (root / key).symlink_to(f"..data/{key}")
    return root


def _volume(tmp_path: Path) -> Path:
    files = {home.TOKENS_ADMIN: ADMIN, home.tokens_agent("gke-east"): AGENT + "\n"}
    return _secret_volume(tmp_path / "tokens", {**files, "README": "not a token"})


def test_adopted_once_and_a_revoked_one_stays_revoked(engine: sa.Engine, tmp_path: Path) -> None:
    hub = harness.make_hub(engine, tmp_path / "home")
    tokens = _volume(tmp_path)
    assert daemon.adopt_tokens(hub, tokens) == [home.TOKENS_ADMIN, "agent-gke-east"]
    admin, agent = hub.auth.lookup(ADMIN), hub.auth.lookup(AGENT)
    assert admin is not None and admin["role"] == "admin"
    assert agent is not None and agent["role"] == "agent"
    assert agent["scope"] == {"cluster": "gke-east"}
    assert daemon.adopt_tokens(hub, tokens) == []  # a restart adds nothing
    assert hub.auth.revoke(admin["id"])
    assert daemon.adopt_tokens(hub, tokens) == []
    assert hub.auth.lookup(ADMIN) is None
    created = [a for a in hub.auth.audit_log() if a["action"] == "token.create"]
    assert len(created) == 2 and ADMIN not in str(created) and AGENT not in str(created)


def test_the_daemon_with_a_tokens_dir_answers_both_tokens(tmp_path: Path) -> None:
    port = harness.free_port()
    cmd = [sys.executable, "-m", "taugrid.hub.server.daemon", "--home", str(tmp_path / "home")]
    cmd += ["--port", str(port), "--tokens-dir", str(_volume(tmp_path))]
    env = {**os.environ, "TAU_HUB_EXTENSIONS": ""}
    log = (tmp_path / "hub.log").open("w")
    proc = subprocess.Popen(cmd, env=env, stdout=log, stderr=subprocess.STDOUT)
    try:
        url = f"http://127.0.0.1:{port}"

        def up() -> bool:
            assert proc.poll() is None, (tmp_path / "hub.log").read_text()
            try:
                return httpx.get(f"{url}/healthz", timeout=2).status_code == 200
            except httpx.TransportError:
                return False

        pg_server.wait_for(up, 60, "the hub daemon to answer")
        for secret, role in ((ADMIN, "admin"), (AGENT, "agent")):
            me = httpx.get(f"{url}/v1/whoami", headers={"Authorization": f"Bearer {secret}"})
            assert me.status_code == 200 and me.json()["role"] == role, me.text
        assert not (tmp_path / "home" / "credentials.json").exists()
        assert not home.agents(tmp_path / "home").exists()
    finally:
        proc.terminate()
        proc.wait(timeout=30)
        log.close()
