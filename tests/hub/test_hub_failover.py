"""A list of hub URLs: the SDK, the ``tau`` script and the agent fail over between them.

A real hub (SQLite) behind the last URL; before it, a URL nobody listens on
(connection refused) or a server that resets every connection after reading the
request (the transport seam: a replica killed while it handled the request). The 503
of a replica that lost its database is in ``test_hub_ha`` (it needs PostgreSQL).
"""

from __future__ import annotations

import contextlib
import json
import socket
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from taugrid import payloads as wire
from taugrid.agent import hubclient
from taugrid.hub.core import context
from taugrid.sdk.client import client
from taugrid.store import db
from tests.cli import platform_env
from tests.hub import agent_builders as ab
from tests.hub.harness import HubServer, free_port

HOST = "127.0.26.2"
QUICK = ab.ONE_GPU_RUN.format(name="failover")


@pytest.fixture
def hub(tmp_path: Path) -> Iterator[HubServer]:
    cfg = context.HubConfig(tau_home=tmp_path / "home", cycle_s=0.2)
    engine = db.open_engine(f"sqlite:///{tmp_path / 'hub.db'}")
    server = HubServer(context.Hub(cfg, engine=engine)).start()
    yield server
    server.stop()


def _dead_url() -> str:
    return f"http://{HOST}:{free_port(HOST)}"  # bound once, closed: refused


@contextlib.contextmanager
def _resetting_server() -> Iterator[str]:
    """Reads what a client sends, then closes the connection without an answer."""
    sock = socket.create_server((HOST, 0))
    stop = threading.Event()

    def serve() -> None:
        while not stop.is_set():
            try:
                conn, _ = sock.accept()
            except OSError:
                return
            with conn:
                conn.recv(65536)

    threading.Thread(target=serve, daemon=True).start()
    try:
        yield f"http://{HOST}:{sock.getsockname()[1]}"
    finally:
        stop.set()
        sock.close()


def test_sdk_and_tau_script_fail_over_past_a_refusing_url(hub: HubServer, tmp_path: Path) -> None:
    urls = f"{_dead_url()}, {hub.url}/"
    cli = client.Client(client.HubConfig(urls, hub.admin_token))
    run = cli.submit(QUICK, "tau.yaml", None)
    assert cli.run(run["id"])["id"] == run["id"]
    with pytest.raises(client.HubUnreachable, match="cannot reach the TauGrid hub"):
        client.Client(client.HubConfig(_dead_url(), hub.admin_token)).runs()
    env = {**platform_env.home_env(tmp_path / "cli", HOST), "TAU_HUB_URL": urls}
    env["TAU_TOKEN"] = hub.admin_token
    out = platform_env.tau(env, "admin", "hub", "status", "-o", "json")
    assert out.returncode == 0, out.stderr
    doc = json.loads(out.stdout)
    assert doc["mode"] == "single" and doc["leader"]["replica"] == doc["replica"]
    text = platform_env.tau(env, "admin", "hub", "status")
    assert text.returncode == 0, text.stderr
    assert "single replica" in text.stdout and "(this)" in text.stdout


def test_a_read_fails_over_after_a_reset_but_a_write_is_not_sent_twice(hub: HubServer) -> None:
    with _resetting_server() as resetting:
        urls = f"{resetting},{hub.url}"
        assert client.Client(client.HubConfig(urls, hub.admin_token)).runs() == []
        writer = client.Client(client.HubConfig(urls, hub.admin_token))
        with pytest.raises(client.HubUnreachable):
            writer.submit(QUICK, "tau.yaml", None)  # it may have been stored: not resent
    assert client.Client(client.HubConfig(hub.url, hub.admin_token)).runs() == []


def test_agent_fails_over_past_a_refusing_url(hub: HubServer) -> None:
    agent = hubclient.HubClient(f"{_dead_url()},{hub.url}", hub.agent_token(), "local")
    try:
        agent.register("local")
        reply = agent.sync(wire.AgentSync())
        assert reply.assignments == []
    finally:
        agent.close()
    assert hub.hub.clusters.get("local") is not None
