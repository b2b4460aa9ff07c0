"""Negative access through the real hub server: researchers see only their workspaces'
runs, logs, metrics, events, files and queue; only admins approve quota, create
workspaces and tokens or read the audit log; agents cannot submit or read runs; a
revoked token fails its very next request; record access cannot escape the run."""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
import sqlalchemy as sa
from hypothesis import given, settings
from hypothesis import strategies as st

from taugrid.errors import UserError
from taugrid.record.run import resolve_inside
from tests.hub import tenancy_builders as tb
from tests.hub.harness import HubServer, make_hub


@dataclasses.dataclass
class Tenants:
    server: HubServer
    alice: str  # researcher of ws-a
    bob: str  # researcher of ws-b
    run_a: str
    run_b: str

    def run_dir(self, run_id: str, ws: str) -> Path:
        return self.server.hub.data_root / ws / "runs" / run_id


@pytest.fixture
def tenants(engine: sa.Engine, tmp_path: Path) -> Iterator[Tenants]:
    server = HubServer(make_hub(engine, tmp_path / "home")).start()
    try:
        tb.workspace(server, "ws-a")
        tb.workspace(server, "ws-b", members=["bob"])
        alice = tb.token(server, "alice", workspaces=["ws-a"])
        bob = tb.token(server, "bob")  # member of ws-b, no explicit scope
        with server.http(alice) as a, server.http(bob) as b:
            run_a = tb.ok(tb.submit(a, "ws-a", "mine"), 201)["id"]
            run_b = tb.ok(tb.submit(b, "ws-b", "secret"), 201)["id"]
        t = Tenants(server, alice, bob, run_a, run_b)
        logs = t.run_dir(run_b, "ws-b") / "logs"
        (logs / "driver.log").write_text("bob's secret log\n")
        (t.run_dir(run_b, "ws-b") / "artifacts" / "model.bin").write_text("bob's weights")
        yield t
    finally:
        server.stop()


def test_researcher_cannot_see_or_touch_another_workspace(tenants: Tenants) -> None:
    b = tenants.run_b
    with tenants.server.http(tenants.alice) as a:
        assert [r["id"] for r in tb.ok(a.get("/v1/runs"))] == [tenants.run_a]
        assert a.get("/v1/runs", params={"workspace": "ws-b"}).status_code == 403
        for path in ("", "/logs", "/metrics", "/events", "/files"):
            assert a.get(f"/v1/runs/{b}{path}").status_code == 404, path
        assert a.get("/v1/runs/secret").status_code == 404  # by name, too
        r = a.get(f"/v1/runs/{b}/file", params={"path": "artifacts/model.bin"})
        assert r.status_code == 404 and "weights" not in r.text
        assert a.post(f"/v1/runs/{b}/cancel").status_code == 404
        assert a.post(f"/v1/runs/{b}/resume").status_code == 404
        assert tb.submit(a, "ws-b").status_code == 403
        assert a.get("/v1/workspaces/ws-b/status").status_code == 403
        assert a.get("/v1/workspaces/ws-b/quota").status_code == 403
        assert a.get("/v1/workspaces/nope").status_code == 403  # no existence oracle
        body = {"gpu_model": "A100-80G", "gpus": 4, "reason": "more"}
        assert a.post("/v1/workspaces/ws-b/quota-requests", json=body).status_code == 403
        assert a.get("/v1/queue", params={"workspace": "ws-b"}).status_code == 403
        assert {r["workspace"] for r in tb.ok(a.get("/v1/queue"))} <= {"ws-a"}
        assert [w["name"] for w in tb.ok(a.get("/v1/workspaces"))] == ["ws-a"]
    with tenants.server.http() as admin:
        run = tb.ok(admin.get(f"/v1/runs/{b}"))
    assert run["state"] in ("queued", "admitted") and not run["cancel_requested"]


def test_owner_reads_its_own_run(tenants: Tenants) -> None:
    b = tenants.run_b
    with tenants.server.http(tenants.bob) as c:
        assert "secret log" in tb.ok(c.get(f"/v1/runs/{b}/logs"))["text"]
        r = c.get(f"/v1/runs/{b}/file", params={"path": "artifacts/model.bin"})
        assert r.status_code == 200 and r.text == "bob's weights"
        assert tb.ok(c.post(f"/v1/runs/{b}/cancel"))["state"] == "cancelled"


def test_quota_requests_are_scoped_and_only_admins_decide(tenants: Tenants) -> None:
    body = {"gpu_model": "A100-80G", "gpus": 4, "reason": "more"}
    with tenants.server.http(tenants.bob) as b, tenants.server.http(tenants.alice) as a:
        req = tb.ok(b.post("/v1/workspaces/ws-b/quota-requests", json=body), 201)
        assert tb.ok(a.get("/v1/quota-requests")) == []
        assert [r["id"] for r in tb.ok(b.get("/v1/quota-requests"))] == [req["id"]]
        for c in (a, b):
            assert c.post(f"/v1/admin/quota-requests/{req['id']}/approve").status_code == 403
            r = c.post(f"/v1/admin/quota-requests/{req['id']}/reject", json={"reason": "x"})
            assert r.status_code == 403
    assert tenants.server.hub.tenancy.get_request(req["id"])["state"] == "pending"  # type: ignore[index]


def test_admin_only_endpoints_refuse_researchers_and_agents(tenants: Tenants) -> None:
    agent = tenants.server.agent_token()
    calls: list[tuple[str, str, dict[str, object] | None]] = [
        ("POST", "/v1/workspaces", {"name": "evil", "team": "research"}),
        ("POST", "/v1/workspaces/ws-a/members", {"add": ["mallory"]}),
        ("POST", "/v1/admin/tokens", {"name": "me", "role": "admin"}),
        ("GET", "/v1/admin/tokens", None),
        ("POST", "/v1/admin/tokens/abc/revoke", None),
        ("GET", "/v1/admin/audit", None),
        ("POST", "/v1/admin/nodes/fault", {"cluster_id": "local", "node_id": "n", "kind": "ecc"}),
    ]
    for token in (tenants.alice, tenants.bob, agent):
        with tenants.server.http(token) as c:
            for method, path, body in calls:
                r = c.request(method, path, json=body)
                assert r.status_code == 403, (method, path, r.text)
    assert tenants.server.hub.platform.workspace("evil") is None


def test_agent_token_cannot_submit_or_read(tenants: Tenants) -> None:
    with tenants.server.http(tenants.server.agent_token()) as c:
        assert tb.submit(c, "ws-a").status_code == 403
        for path in (
            "/v1/runs",
            f"/v1/runs/{tenants.run_a}",
            f"/v1/runs/{tenants.run_a}/logs",
            "/v1/workspaces",
            "/v1/workspaces/ws-a/status",
            "/v1/queue",
            "/v1/quota-requests",
        ):
            assert c.get(path).status_code == 403, path
        assert c.post("/v1/agents/other/sync", json={}).status_code == 403
        assert tb.ok(c.get("/v1/whoami"))["scope"] == {"cluster": "local"}


def test_revoked_token_stops_working_at_once(tenants: Tenants) -> None:
    with tenants.server.http() as admin:
        made = tb.ok(admin.post("/v1/admin/tokens", json={"name": "carol", "role": "admin"}), 201)
        with tenants.server.http(made["secret"]) as carol:  # one keep-alive connection
            assert carol.get("/v1/runs").status_code == 200
            tb.ok(admin.post(f"/v1/admin/tokens/{made['id']}/revoke"))
            assert carol.get("/v1/runs").status_code == 401
            assert tb.submit(carol, "ws-a").status_code == 401
    with httpx.Client(base_url=tenants.server.url) as anon:
        assert anon.get("/v1/whoami").status_code == 401
        assert anon.get("/v1/queue", headers={"Authorization": "Basic x"}).status_code == 401


TRAVERSALS = [
    "../../../etc/passwd",
    "/etc/passwd",
    "..",
    "../",
    "artifacts/../../",
    "logs/../../../../etc/hostname",
    "./../other/tau.yaml",
    "artifacts/%2e%2e/%2e%2e/x",
    "..\\..\\etc\\passwd",
    "link-out/passwd",
    "link-file",
    "artifacts/link-up/tau.yaml",
]


def test_record_access_cannot_escape_the_run(tenants: Tenants) -> None:
    a_dir = tenants.run_dir(tenants.run_a, "ws-a")
    outside = a_dir.parents[3] / "outside"
    outside.mkdir()
    (outside / "passwd").write_text("root:x:0:0")
    os.symlink(outside, a_dir / "link-out")
    os.symlink(outside / "passwd", a_dir / "link-file")
    os.symlink(tenants.run_dir(tenants.run_b, "ws-b"), a_dir / "artifacts" / "link-up")
    sibling = f"../{tenants.run_b}/tau.yaml"
    with tenants.server.http(tenants.alice) as a:
        for bad in [*TRAVERSALS, sibling, "../../ws-b/runs/" + tenants.run_b + "/tau.yaml"]:
            r = a.get(f"/v1/runs/{tenants.run_a}/file", params={"path": bad})
            assert r.status_code in (400, 404), (bad, r.status_code)
            assert "root:x:0" not in r.text and "name: secret" not in r.text
            r = a.get(f"/v1/runs/{tenants.run_a}/files", params={"sub": bad})
            assert r.status_code in (400, 404) or r.json() == [], (bad, r.text)
        for bad in ("a\x00b", "x" * 5000):
            r = a.get(f"/v1/runs/{tenants.run_a}/file", params={"path": bad})
            assert r.status_code in (400, 404), (bad[:10], r.status_code)
        ok = a.get(f"/v1/runs/{tenants.run_a}/file", params={"path": "./artifacts/../tau.yaml"})
        assert ok.status_code == 200 and "name: mine" in ok.text
        listed = tb.ok(a.get(f"/v1/runs/{tenants.run_a}/files"))
        assert all("passwd" not in f["path"] and "link" not in f["path"] for f in listed)


_PART = st.sampled_from(["..", ".", "a", "b", "", "/", "//", "\\", "~", "%2e", "..."])


@settings(max_examples=300, deadline=None)
@given(parts=st.lists(_PART, max_size=8), lead=st.booleans())
def test_resolve_inside_never_escapes(
    tmp_path_factory: pytest.TempPathFactory, parts: list[str], lead: bool
) -> None:
    root = tmp_path_factory.getbasetemp() / "resolve-root" / "run"
    (root / "a" / "b").mkdir(parents=True, exist_ok=True)
    rel = ("/" if lead else "") + "/".join(parts)
    try:
        got = resolve_inside(root, rel)
    except UserError:
        return
    assert got == root.resolve() or root.resolve() in got.parents


def test_platform_view_shows_only_own_workspaces(tenants: Tenants) -> None:
    with tenants.server.http(tenants.bob) as b, tenants.server.http() as admin:
        mine = tb.ok(b.get("/v1/platform"))
        everything = tb.ok(admin.get("/v1/platform"))
    assert [w["name"] for w in mine["workspaces"]] == ["ws-b"]
    assert mine["default_workspace"] is None and [t["name"] for t in mine["teams"]] == ["research"]
    assert {w["name"] for w in everything["workspaces"]} == {"default", "ws-a", "ws-b"}
    with tenants.server.http(tenants.server.agent_token()) as agent:
        seen = tb.ok(agent.get("/v1/platform"))
    assert seen["workspaces"] == [] and seen["regions"]


def test_a_token_scoped_to_one_workspace_submits_there_by_default(tenants: Tenants) -> None:
    with tenants.server.http(tenants.alice) as a:
        run = tb.ok(tb.submit(a, None, "mine"), 201)  # no workspace in request or tau.yaml
        assert run["workspace"] == "ws-a"
        detail = tb.ok(a.get("/v1/runs/mine"))
    assert detail["id"] == run["id"]
    assert detail["same_name"] == [run["id"], tenants.run_a]  # newest first
    with tenants.server.http() as admin:  # an admin sees every workspace: platform default
        assert tb.ok(tb.submit(admin, None, "adm"), 201)["workspace"] == "default"
