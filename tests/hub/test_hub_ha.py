"""Replicated hubs on PostgreSQL: one leader, step-down on partition, DB restart, schema.

Real hub HTTP servers (uvicorn) on a private PostgreSQL server per module
(``pg_server``: the shared cluster is never restarted); the network between a replica
and the database is the seam (``pg_server.TcpProxy``). SQLite stays single-replica.
"""

from __future__ import annotations

import itertools
import os
import shutil
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import sqlalchemy as sa

from taugrid.hub.core import context
from taugrid.sdk.client import client
from taugrid.store import db
from tests.hub import agent_builders as ab
from tests.hub import pg_server
from tests.hub.harness import HubServer, free_port

pytestmark = pytest.mark.skipif(not pg_server.available(), reason="PostgreSQL 15 not installed")

HOST = "127.0.26.1"
LEASE_S = 4.0  # a loaded CI machine starves a 0.5 s heartbeat now and then: 1.5 s lost the lease
QUICK = ab.ONE_GPU_RUN.format(name="ha")
_names = itertools.count()


@pytest.fixture(scope="module")
def pg() -> Iterator[pg_server.PgServer]:
    with pg_server.pg_server(HOST) as server:
        yield server


@pytest.fixture
def database(pg: pg_server.PgServer) -> str:
    return pg.new_database(f"ha{next(_names)}")


def replica(home: Path, url: str, lease_s: float = LEASE_S) -> HubServer:
    """A started hub replica on database ``url``."""
    port = free_port()
    cfg = context.HubConfig(
        tau_home=home, cycle_s=0.2, leader_lease_s=lease_s, advertise_url=f"http://127.0.0.1:{port}"
    )
    return HubServer(context.Hub(cfg, engine=db.open_engine(url)), port=port).start()


def status(server: HubServer) -> dict[str, Any]:
    with server.http() as c:
        r = c.get("/v1/admin/hub")
        assert r.status_code == 200, r.text
        body: dict[str, Any] = r.json()
        return body


def submit(server: HubServer) -> httpx.Response:
    with server.http() as c:
        return c.post("/v1/runs", json={"tau_yaml": QUICK, "filename": "tau.yaml"})


class Watch:
    """Samples both replicas' ``is_leader`` until stopped: were they ever both leading?"""

    def __init__(self, *servers: HubServer) -> None:
        self.servers, self.both, self._stop = servers, 0, threading.Event()
        self._t = threading.Thread(target=self._run, daemon=True)
        self._t.start()

    def _run(self) -> None:
        while not self._stop.wait(0.01):
            if sum(s.hub.is_leader() for s in self.servers) > 1:
                self.both += 1

    def stop(self) -> int:
        self._stop.set()
        self._t.join()
        return self.both


def test_sqlite_hub_is_its_own_single_leader(tmp_path: Path) -> None:
    cfg = context.HubConfig(tau_home=tmp_path, cycle_s=0.2)
    engine = db.open_engine(f"sqlite:///{tmp_path / 'hub.db'}")
    server = HubServer(context.Hub(cfg, engine=engine)).start()
    try:
        doc = status(server)
        assert doc["mode"] == "single" and doc["leader"]["replica"] == doc["replica"]
        assert [r["self"] for r in doc["replicas"]] == [True]
        assert doc["database"]["dialect"] == "sqlite"
        assert doc["database"]["schema_revision"] == db.head_revision()
        assert submit(server).status_code == 201
    finally:
        server.stop()


def test_partitioned_leader_steps_down_and_a_standby_takes_over(
    pg: pg_server.PgServer, database: str, tmp_path: Path
) -> None:
    proxy = pg_server.TcpProxy(HOST, (pg.host, pg.port))
    proxied = database.replace(f"{pg.host}:{pg.port}", f"{proxy.host}:{proxy.port}")
    a = replica(tmp_path / "a", proxied)
    try:
        pg_server.wait_for(a.hub.is_leader, 20, "replica a to lead")
        b = replica(tmp_path / "b", database)
        watch = Watch(a, b)
        try:
            epoch = status(b)["leader"]["epoch"]
            assert status(b)["leader"]["url"] == a.hub.config.advertise_url
            assert len([r for r in status(b)["replicas"] if r["alive"]]) == 2
            proxy.cut()
            # a cannot renew: it stops leading within the lease, then b takes over
            pg_server.wait_for(lambda: not a.hub.is_leader(), LEASE_S * 2, "a to step down")
            pg_server.wait_for(b.hub.is_leader, 30, "replica b to take over")
            lead = status(b)["leader"]
            assert lead["url"] == b.hub.config.advertise_url and lead["epoch"] == epoch + 1
            # a refuses writes with a 503 that says why; b accepts them
            pg_server.wait_for(lambda: submit(a).status_code == 503, 30, "a to refuse writes")
            refused = submit(a).json()
            assert "database" in refused["detail"] and "another hub" in refused["hint"]
            assert submit(b).status_code == 201
            # a client with both URLs fails over on a's 503; one with a alone says why
            both = client.Client(client.HubConfig(f"{a.url},{b.url}", a.admin_token))
            assert both.submit(QUICK, "tau.yaml", None)["state"] == "queued"
            with pytest.raises(client.HubUnreachable, match="database"):
                client.Client(client.HubConfig(a.url, a.admin_token)).submit(QUICK, "t.yaml", None)
            proxy.heal()
            pg_server.wait_for(lambda: submit(a).status_code == 201, 30, "a to accept again")
            assert not a.hub.is_leader() and b.hub.is_leader()  # b keeps the lease
        finally:
            assert watch.stop() == 0, "two replicas led at the same time"
            b.stop()
    finally:
        a.stop()
        proxy.close()


def _submitter(servers: list[HubServer], accepted: list[str], stop: threading.Event) -> None:
    for i in itertools.count():
        if stop.is_set():
            return
        try:
            r = submit(servers[i % len(servers)])
        except httpx.HTTPError:
            continue
        if r.status_code == 201:
            accepted.append(r.json()["id"])
        else:
            assert r.status_code == 503, r.text  # the database is away: refused, not lost


def test_database_restart_under_load_loses_no_accepted_submission(
    pg: pg_server.PgServer, tmp_path: Path
) -> None:
    url = pg.new_database("restart")
    servers = [replica(tmp_path / n, url) for n in ("a", "b")]
    accepted: list[str] = []
    stop = threading.Event()
    clients = [
        threading.Thread(target=_submitter, args=(servers, accepted, stop)) for _ in range(3)
    ]
    try:
        for t in clients:
            t.start()
        pg_server.wait_for(lambda: len(accepted) >= 10, 60, "submissions before the restart")
        pg.restart()
        before = len(accepted)
        pg_server.wait_for(lambda: len(accepted) >= before + 10, 60, "submissions after it")
        stop.set()
        for t in clients:
            t.join(timeout=60)
        pg_server.wait_for(
            lambda: any(s.hub.is_leader() for s in servers), 30, "a leader after the restart"
        )
        assert len(set(accepted)) == len(accepted)
        with servers[0].http() as c:
            for run_id in accepted:
                assert c.get(f"/v1/runs/{run_id}").status_code == 200, run_id
        engine = sa.create_engine(url)
        with engine.connect() as conn:
            stored = conn.execute(sa.text("SELECT count(*) FROM runs")).scalar_one()
        engine.dispose()
        assert stored >= len(accepted)  # a submit cut off before its reply may exist too
    finally:
        stop.set()
        for s in servers:
            s.stop()


def _newer_migrations(tmp_path: Path) -> Path:
    """This code's migrations plus one more: what a newer TauGrid ships."""
    here = Path(db.__file__).parent / "migrations"
    newer = tmp_path / "migrations"
    shutil.copytree(here, newer, ignore=shutil.ignore_patterns("__pycache__"))
    head = db.head_revision()
    (newer / "versions" / "9001_future.py").write_text(
        f'"""a newer TauGrid\'s table\n\nRevision ID: 9001\nRevises: {head}\n"""\n'
        "import sqlalchemy as sa\nfrom alembic import op\n\n"
        f'revision = "9001"\ndown_revision = "{head}"\nbranch_labels = None\n'
        "depends_on = None\n\n\ndef upgrade() -> None:\n"
        '    op.create_table("future", sa.Column("id", sa.Integer, primary_key=True))\n'
    )
    return newer


def test_older_replica_refuses_a_schema_a_newer_one_migrated(
    pg: pg_server.PgServer, database: str, tmp_path: Path
) -> None:
    old = replica(tmp_path / "old", database)
    try:
        assert submit(old).status_code == 201
        engine = db.create_engine(database)
        db.migrate(engine, _newer_migrations(tmp_path))  # the newer replica migrates
        with engine.connect() as c:
            assert db.database_revision(c) == "9001"
        engine.dispose()
        # the running older replica notices at its next heartbeat and stops serving
        pg_server.wait_for(lambda: submit(old).status_code == 503, 30, "old to refuse")
        body = submit(old).json()
        assert "newer than this hub knows" in body["detail"] and "9001" in body["detail"]
        assert "upgrade TauGrid" in body["hint"]
        assert not old.hub.is_leader()
        with old.http() as c:
            assert c.get("/v1/runs").status_code == 503
    finally:
        old.stop()
    # an older replica starting on it refuses to start, saying why (the real daemon)
    env = {**os.environ, "TAU_DATABASE_URL": database, "TAU_HUB_EXTENSIONS": ""}
    port = str(free_port())
    cmd = [sys.executable, "-m", "taugrid.hub.server.daemon", "--home", str(tmp_path / "h")]
    cmd += ["--port", port]
    proc = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 1
    assert "newer than this hub knows (its newest is" in proc.stderr
    assert "Traceback" not in proc.stderr
