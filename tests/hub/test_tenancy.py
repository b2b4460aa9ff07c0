"""Tenancy through the real hub server on SQLite and PostgreSQL: seeding from
platform.yaml, workspaces and members, quota requests (approval changes the quota the
scheduler sees), the queue view, tokens and the audit log."""

from __future__ import annotations

import threading
from pathlib import Path

import sqlalchemy as sa

from taugrid.hub.placement import snapshot
from taugrid.hub.tenancy import tenancy
from taugrid.platform import load as platform_load
from taugrid.platform import models as pm
from taugrid.store import tenancy as store_tenancy
from tests.hub import tenancy_builders as tb
from tests.hub.harness import HubServer, make_hub


def _quota(server: HubServer, team: str = "research", model: str = "A100-80G") -> int:
    plat = tenancy.effective_platform(server.hub)
    t = plat.team(team)
    assert t is not None
    return next(q.nominal for q in t.quotas if q.gpu_model == model)


def test_seed_is_idempotent_and_platform_yaml_refreshes_untouched_objects(
    engine: sa.Engine, tmp_path: Path
) -> None:
    hub = make_hub(engine, tmp_path / "h1")
    hub2 = make_hub(engine, tmp_path / "h2")  # a second start on the same store
    assert [w.name for w in hub2.tenancy.workspaces()] == ["default"]
    assert [(t.name, [q.nominal for q in t.quotas]) for t in hub.tenancy.teams()] == [
        ("research", [8])
    ]
    base = platform_load.default_platform()
    bigger = base.model_copy(
        update={
            "teams": [
                pm.TeamSpec(name="research", quotas=[pm.Quota(gpu_model="A100-80G", nominal=6)])
            ]
        }
    )
    hub2.tenancy.seed(bigger)  # platform.yaml edited: an untouched team follows it
    assert hub2.tenancy.teams()[0].quotas[0].nominal == 6
    req = pm.QuotaRequestSpec(team="research", gpu_model="A100-80G", nominal=3, reason="x")
    row = hub2.tenancy.create_request("default", req, "alice")
    hub2.tenancy.decide(row["id"], pm.QuotaRequestState.APPROVED, "admin", "")
    hub2.tenancy.seed(base)  # changed through the hub: platform.yaml no longer overrides
    assert hub2.tenancy.teams()[0].quotas[0].nominal == 3
    assert hub2.tenancy.teams()[0].name == "research"


def test_created_workspace_is_seen_by_resolve_and_runs(hub_server: HubServer) -> None:
    tb.workspace(hub_server, "vision", members=["alice"])
    with hub_server.http() as admin:
        listed = tb.ok(admin.get("/v1/workspaces"))
        assert [w["name"] for w in listed] == ["default", "vision"]
        run = tb.ok(tb.submit(admin, "vision"), 201)
        assert run["workspace"] == "vision" and run["team"] == "research"
        ws = tb.ok(admin.get("/v1/workspaces/vision"))
        assert ws["members"] == ["alice"] and ws["team"] == "research"
        st = tb.ok(admin.get("/v1/workspaces/vision/status"))
    assert sum(st["runs"].values()) == 1
    assert st["quotas"][0]["gpu_model"] == "A100-80G" and st["quotas"][0]["nominal"] == 8
    assert (hub_server.hub.data_root / "vision" / "runs" / run["id"] / "tau.yaml").exists()


def test_workspace_create_errors_say_what_and_how(hub_server: HubServer) -> None:
    with hub_server.http() as admin:
        r = admin.post("/v1/workspaces", json={"name": "x1", "team": "nope"})
        assert r.status_code == 400 and "unknown team 'nope'" in r.json()["detail"]
        assert "research" in r.json()["hint"]
        r = admin.post("/v1/workspaces", json={"name": "Bad_Name", "team": "research"})
        assert r.status_code == 400 and "name" in r.json()["detail"]
        r = admin.post("/v1/workspaces", json={"name": "default", "team": "research"})
        assert r.status_code == 400 and "already exists" in r.json()["detail"]
        body = {"name": "dup-ns", "team": "research", "namespace": "default"}
        r = admin.post("/v1/workspaces", json=body)
        assert r.status_code == 400 and "namespace" in r.json()["detail"]
        r = admin.post(
            "/v1/workspaces",
            json={"name": "x2", "team": "research", "defaults": {"profile": "zzz"}},
        )
        assert r.status_code == 400 and "profile" in r.json()["detail"]
        assert admin.get("/v1/workspaces/nope").status_code == 404


def test_members_grant_and_withdraw_access_at_once(hub_server: HubServer) -> None:
    tb.workspace(hub_server, "nlp")
    alice = tb.token(hub_server, "alice")  # no explicit scope: membership decides
    with hub_server.http(alice) as c, hub_server.http() as admin:
        assert c.get("/v1/workspaces/nlp/status").status_code == 403
        assert tb.ok(c.get("/v1/workspaces")) == []
        ws = tb.ok(admin.post("/v1/workspaces/nlp/members", json={"add": ["alice", "bob"]}))
        assert ws["members"] == ["alice", "bob"]
        assert tb.ok(c.get("/v1/whoami"))["scope"]["workspaces"] == ["nlp"]
        assert c.get("/v1/workspaces/nlp/status").status_code == 200
        tb.ok(tb.submit(c, "nlp"), 201)
        tb.ok(admin.post("/v1/workspaces/nlp/members", json={"remove": ["alice"]}))
        assert c.get("/v1/workspaces/nlp/status").status_code == 403
        assert tb.ok(c.get("/v1/runs")) == []
        r = admin.post("/v1/workspaces/nlp/members", json={"add": ["x"], "remove": ["x"]})
        assert r.status_code == 400
    actions = [a["action"] for a in hub_server.hub.auth.audit_log()]
    assert actions.count("workspace.members") == 2 and "workspace.create" in actions


def test_quota_request_approval_changes_quota_for_real(hub_server: HubServer) -> None:
    alice = tb.token(hub_server, "alice", workspaces=["default"])
    with hub_server.http(alice) as c, hub_server.http() as admin:
        body = {"gpu_model": "A100-80G", "gpus": 2, "reason": "shrink for the test"}
        req = tb.ok(c.post("/v1/workspaces/default/quota-requests", json=body), 201)
        assert req["state"] == "pending" and req["team"] == "research"
        assert c.post(f"/v1/admin/quota-requests/{req['id']}/approve").status_code == 403
        assert _quota(hub_server) == 8
        pending = tb.ok(admin.get("/v1/quota-requests", params={"state": "pending"}))
        assert [p["id"] for p in pending] == [req["id"]]
        done = tb.ok(admin.post(f"/v1/admin/quota-requests/{req['id']}/approve", json={}))
        assert done["state"] == "approved" and done["previous_nominal"] == 8
        assert _quota(hub_server) == 2
        snap = snapshot.build(hub_server.hub, 0.0)
        assert [(q.team, q.nominal) for q in snap.quotas] == [("research", 2)]
        again = admin.post(f"/v1/admin/quota-requests/{req['id']}/approve")
        assert again.status_code == 400 and "already approved" in again.json()["detail"]
        shown = tb.ok(c.get("/v1/workspaces/default/quota"))
        assert shown["quotas"][0]["nominal"] == 2 and shown["requests"][0]["state"] == "approved"
    audit = {a["action"]: a for a in hub_server.hub.auth.audit_log()}
    assert audit["quota.request"]["actor"] == "alice"
    assert audit["quota.approve"]["actor"] == "embedded-admin"
    assert audit["quota.change"]["detail"] == {
        "gpu_model": "A100-80G",
        "from": 8,
        "to": 2,
        "request": req["id"],
    }


def test_approved_quota_admits_waiting_runs(hub_server: HubServer) -> None:
    with hub_server.http() as admin:
        body = {"gpu_model": "A100-80G", "gpus": 0, "reason": "freeze"}
        req = tb.ok(admin.post("/v1/workspaces/default/quota-requests", json=body), 201)
        tb.ok(admin.post(f"/v1/admin/quota-requests/{req['id']}/approve"))
        run = tb.ok(tb.submit(admin, gpus=2), 201)

        def state() -> str:
            return str(tb.ok(admin.get(f"/v1/runs/{run['id']}"))["state"])

        assert not tb.wait_for(lambda: state() == "admitted", timeout=2)
        queue = tb.ok(admin.get("/v1/queue"))
        assert [q["id"] for q in queue] == [run["id"]] and queue[0]["reason"]
        body["gpus"], body["reason"] = 4, "thaw"
        req = tb.ok(admin.post("/v1/workspaces/default/quota-requests", json=body), 201)
        tb.ok(admin.post(f"/v1/admin/quota-requests/{req['id']}/approve"))
        assert tb.wait_for(lambda: state() == "admitted", timeout=10)


def test_reject_needs_reason_and_unknown_request_is_404(hub_server: HubServer) -> None:
    with hub_server.http() as admin:
        body = {"gpu_model": "A100-80G", "gpus": 16, "reason": "bigger model"}
        req = tb.ok(admin.post("/v1/workspaces/default/quota-requests", json=body), 201)
        r = admin.post(f"/v1/admin/quota-requests/{req['id']}/reject", json={"reason": " "})
        assert r.status_code == 400 and "--reason" in r.json()["hint"]
        out = tb.ok(
            admin.post(f"/v1/admin/quota-requests/{req['id']}/reject", json={"reason": "no budget"})
        )
        assert out["state"] == "rejected" and out["decision_reason"] == "no budget"
        assert _quota(hub_server) == 8
        assert admin.post("/v1/admin/quota-requests/qr-nope/approve").status_code == 404
        bad = dict(body, gpu_model="H100")
        r = admin.post("/v1/workspaces/default/quota-requests", json=bad)
        assert r.status_code == 400 and "A100-80G" in r.json()["hint"]
        assert admin.get("/v1/quota-requests", params={"state": "nope"}).status_code == 400


def test_concurrent_approvals_decide_once(hub_server: HubServer) -> None:
    hub = hub_server.hub
    reqs = [
        hub.tenancy.create_request(
            "default",
            pm.QuotaRequestSpec(team="research", gpu_model="A100-80G", nominal=n, reason="r"),
            "a",
        )
        for n in (3, 5)
    ]
    results: list[int] = []

    def approve(rid: str) -> None:
        with hub_server.http() as admin:
            results.append(admin.post(f"/v1/admin/quota-requests/{rid}/approve").status_code)

    threads = [threading.Thread(target=approve, args=(r["id"],)) for r in reqs for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sorted(results) == [200, 200] + [400] * 6
    final = {r["id"]: r for r in hub.tenancy.list_requests()}
    assert {r["state"] for r in final.values()} == {"approved"}
    changes = [a for a in hub.auth.audit_log() if a["action"] == "quota.change"]
    assert len(changes) == 2 and _quota(hub_server) == changes[0]["detail"]["to"]


def test_queue_lists_waiting_runs_in_order_with_reasons(hub_server: HubServer) -> None:
    tb.workspace(hub_server, "ws-q")
    with hub_server.http() as admin:
        first = tb.ok(tb.submit(admin, "ws-q", "first", gpus=4), 201)
        body = {"tau_yaml": tb.tau_yaml("urgent", 4, priority="high"), "workspace": "ws-q"}
        urgent = tb.ok(admin.post("/v1/runs", json=body), 201)
        other = tb.ok(tb.submit(admin, "default", "other", gpus=4), 201)
        q = tb.ok(admin.get("/v1/queue"))
        assert [r["id"] for r in q][:1] == [urgent["id"]]
        assert {r["id"] for r in q} == {first["id"], urgent["id"], other["id"]}
        assert [r["position"] for r in q] == [1, 2, 3]
        assert all(r["reason"] for r in q)
        only = tb.ok(admin.get("/v1/queue", params={"workspace": "ws-q"}))
        assert [r["id"] for r in only] == [urgent["id"], first["id"]]


def test_tokens_create_list_revoke_and_audit(hub_server: HubServer) -> None:
    with hub_server.http() as admin:
        made = tb.ok(
            admin.post(
                "/v1/admin/tokens", json={"name": "ci", "role": "agent", "cluster": "local"}
            ),
            201,
        )
        assert made["secret"].startswith("tau_") and made["scope"] == {"cluster": "local"}
        listed = tb.ok(admin.get("/v1/admin/tokens"))
        assert made["id"] in {t["id"] for t in listed}
        assert all("hash" not in t and "secret" not in t for t in listed)
        for bad in (
            {"name": "x", "role": "agent"},
            {"name": "x", "role": "agent", "cluster": "mars"},
            {"name": "x", "role": "researcher", "workspaces": ["nope"]},
            {"name": "x", "role": "admin", "workspaces": ["default"]},
        ):
            assert admin.post("/v1/admin/tokens", json=bad).status_code == 400, bad
        assert admin.post("/v1/admin/tokens", json={"name": "x", "role": "root"}).status_code == 422
        with hub_server.http(made["secret"]) as agent:
            assert tb.ok(agent.get("/v1/whoami"))["role"] == "agent"
            tb.ok(admin.post(f"/v1/admin/tokens/{made['id']}/revoke"))
            assert agent.get("/v1/whoami").status_code == 401
        assert admin.post(f"/v1/admin/tokens/{made['id']}/revoke").status_code == 404
        audit = tb.ok(admin.get("/v1/admin/audit", params={"action": "token"}))
    assert [a["action"] for a in audit][:2] == ["token.revoke", "token.create"]
    assert audit[1]["detail"]["role"] == "agent" and "secret" not in str(audit)


def test_store_apply_keeps_platform_shape(engine: sa.Engine) -> None:
    store = store_tenancy.TenancyStore(engine)
    base = platform_load.default_platform()
    store.seed(base)
    applied = store.apply(base)
    assert applied == base  # seeding then applying changes nothing
