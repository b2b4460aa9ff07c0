"""Datasets are scoped to workspaces, through the real hub server: a researcher lists,
reads, replicates and runs on datasets of its own workspaces only (404 for another
workspace's dataset, 403 for naming another workspace); admins see all; datasets that
existed before migration 0004 belong to ``default``."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
import sqlalchemy as sa
from alembic import command
from alembic.config import Config

from taugrid.store import data as store_data
from taugrid.store import db
from taugrid.store import schema as t
from tests.hub import tenancy_builders as tb
from tests.hub.harness import HubServer, make_hub


@pytest.fixture
def server(engine: sa.Engine, tmp_path: Path) -> Iterator[HubServer]:
    srv = HubServer(make_hub(engine, tmp_path / "home")).start()
    try:
        tb.workspace(srv, "ws-a")
        tb.workspace(srv, "ws-b", members=["bob"])
        yield srv
    finally:
        srv.stop()


def _reg(c: httpx.Client, name: str, workspace: str | None = None) -> httpx.Response:
    body = {"name": name, "region": "local", "path": name}
    if workspace:
        body["workspace"] = workspace
    return c.post("/v1/datasets", json=body)


def _run(name: str, dataset: str) -> str:
    return tb.tau_yaml(name) + f"data:\n  inputs: [{{dataset: {dataset}}}]\n"


def test_researcher_sees_and_uses_only_its_workspaces_datasets(server: HubServer) -> None:
    alice = tb.token(server, "alice", workspaces=["ws-a"])
    bob = tb.token(server, "bob")  # member of ws-b
    with server.http(alice) as a, server.http(bob) as b, server.http() as admin:
        mine = tb.ok(_reg(a, "corpus"), 201)  # her only workspace is the default
        assert mine["workspace"] == "ws-a"
        assert tb.ok(_reg(b, "secret"), 201)["workspace"] == "ws-b"
        assert _reg(a, "sneaky", "ws-b").status_code == 403
        assert _reg(a, "lost", "nope").status_code == 403  # no existence oracle
        assert [d["id"] for d in tb.ok(a.get("/v1/datasets"))] == ["corpus@v1"]
        assert a.get("/v1/datasets", params={"workspace": "ws-b"}).status_code == 403
        for path in ("", "/replicas"):
            assert a.get(f"/v1/datasets/secret{path}").status_code == 404, path
        r = a.post("/v1/datasets/secret/replicate", json={"to_region": "local"})
        assert r.status_code == 404
        # a run may read only datasets of its own workspace
        body = {"tau_yaml": _run("steal", "secret"), "workspace": "ws-a"}
        r = a.post("/v1/runs", json=body)
        assert r.status_code == 404 and "no dataset 'secret' in workspace ws-a" in r.text
        body = {"tau_yaml": _run("reads", "corpus"), "workspace": "ws-a"}
        assert a.post("/v1/runs", json=body).status_code == 201
        # transfers of invisible datasets are not listed
        store = store_data.DataStore(server.hub.engine)
        tid = store.request_transfer("secret@v1", "local", "far", "x", "bob", 1.0)["id"]
        assert [x["id"] for x in tb.ok(b.get("/v1/transfers"))] == [tid]
        assert tb.ok(a.get("/v1/transfers")) == []
        # admins see every workspace and may name one
        assert {d["id"] for d in tb.ok(admin.get("/v1/datasets"))} == {"corpus@v1", "secret@v1"}
        got = tb.ok(admin.get("/v1/datasets", params={"workspace": "ws-b"}))
        assert [d["id"] for d in got] == ["secret@v1"]
        assert tb.ok(admin.get("/v1/datasets/secret"))["workspace"] == "ws-b"
        assert admin.get("/v1/datasets", params={"workspace": "ws-a"}).status_code == 200
    with server.http(server.agent_token("local")) as agent:
        assert agent.get("/v1/datasets").status_code == 403


def test_existing_datasets_move_to_default_workspace(tmp_path: Path) -> None:
    engine = db.create_engine(f"sqlite:///{tmp_path / 'old.db'}")
    cfg = Config()
    cfg.set_main_option("script_location", str(db._MIGRATIONS))
    with engine.connect() as conn:
        cfg.attributes["connection"] = conn
        command.upgrade(cfg, "0003")
        conn.execute(
            sa.text(
                "INSERT INTO datasets (id, name, version, state, origin_region, size_bytes,"
                " files, created_by, created_at, updated_at) VALUES ('old@v1', 'old', 'v1',"
                " 'ready', 'local', 0, '[]', 'admin', :now, :now)"
            ),
            {"now": time.time()},
        )
        conn.commit()
    db.migrate(engine)
    with engine.connect() as conn:
        ws = conn.execute(sa.select(t.datasets.c.workspace)).scalar_one()
    engine.dispose()
    assert ws == "default"
