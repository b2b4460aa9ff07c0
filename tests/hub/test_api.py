"""The hub's HTTP API through a real uvicorn server: submit, auth, errors, cancel, files."""

from __future__ import annotations

import re
import time

import httpx

from tests.hub import agent_builders as ab
from tests.hub import tenancy_builders as tb
from tests.hub.harness import HubServer

QUICK = ab.ONE_GPU_RUN.format(name="tiny")


def _submit(client: httpx.Client, text: str = QUICK) -> httpx.Response:
    return client.post("/v1/runs", json={"tau_yaml": text, "filename": "tau.yaml"})


def test_every_endpoint_needs_a_token(hub_server: HubServer) -> None:
    with httpx.Client(base_url=hub_server.url) as anon:
        assert anon.get("/healthz").status_code == 200
        assert anon.get("/v1/runs").status_code == 401
        assert anon.get("/metrics").status_code == 401
        assert anon.post("/v1/runs", json={"tau_yaml": QUICK}).status_code == 401
    with hub_server.http("tau_not-a-token") as bad:
        assert bad.get("/v1/runs").status_code == 401


def test_metrics_need_an_admin_or_a_scrape_only_token(hub_server: HubServer) -> None:
    """/metrics names every workspace's runs: a researcher is refused, a metrics token
    reads it and nothing else."""
    researcher = tb.token(hub_server, "ada", workspaces=["default"])
    scraper = tb.token(hub_server, "prom", role="metrics")
    with hub_server.http(researcher) as c:
        assert c.get("/metrics").status_code == 403
    with hub_server.http(scraper) as c:
        assert c.get("/metrics").status_code == 200
        assert c.get("/v1/runs").status_code == 403
    with hub_server.http() as admin:
        assert admin.get("/metrics").status_code == 200


def test_healthz_is_liveness_only(hub_server: HubServer) -> None:
    with hub_server.http() as c:
        assert _submit(c).status_code == 201
    with httpx.Client(base_url=hub_server.url) as anon:
        body = anon.get("/healthz").json()
    assert body["ok"] is True and set(body) == {"ok", "time", "version", "api_level"}


def test_an_image_no_region_can_use_is_refused_at_submit(hub_server: HubServer) -> None:
    """The embedded platform has Ray regions only: they run jobs in their nodes' Python
    environment, so an image tau.yaml names would be ignored; it is refused instead."""
    text = QUICK + "runtime:\n  image: registry.example/team/train:1\n"
    with hub_server.http() as c:
        r = _submit(c, text)
        assert r.status_code == 400, r.text
        body = r.json()
        assert "runtime.image registry.example/team/train:1" in body["detail"]
        assert "runtime.pip" in body["hint"]
        assert c.get("/v1/runs").json() == []


def test_docs_serve_swagger_ui_from_the_hub_not_a_cdn(hub_server: HubServer) -> None:
    with httpx.Client(base_url=hub_server.url) as anon:
        page = anon.get("/docs")
        assert page.status_code == 200 and "swagger" in page.text.lower()
        assets = re.findall(r"""(?:src|href)=["']([^"']+)["']""", page.text)
        assert assets and all(a.startswith("/") for a in assets), assets
        for asset in assets:
            r = anon.get(asset)
            assert r.status_code == 200 and r.content, asset
        assert anon.get("/redoc").status_code == 404


def test_agent_token_cannot_submit_or_read_runs(hub_server: HubServer) -> None:
    with hub_server.http(hub_server.agent_token()) as agent:
        assert _submit(agent).status_code == 403
        assert agent.get("/v1/runs").status_code == 403
        assert agent.post("/v1/agents/other/sync", json={}).status_code == 403


def test_submit_stores_run_and_record(hub_server: HubServer) -> None:
    with hub_server.http() as c:
        r = _submit(c)
        assert r.status_code == 201, r.text
        run = r.json()
        assert run["state"] == "queued" and run["gpus"] == 1 and run["workspace"] == "default"
        detail = c.get(f"/v1/runs/{run['id']}").json()
    phases = {p["phase"]: p["status"] for p in detail["phases"]}
    assert phases["submitted"] == "done" and phases["completed"] == "pending"
    record = hub_server.hub.data_root / "default" / "runs" / run["id"]
    assert (record / "tau.yaml").read_text() == QUICK
    assert (record / "run.json").exists()


def test_invalid_tau_yaml_is_422_with_line(hub_server: HubServer) -> None:
    with hub_server.http() as c:
        r = _submit(c, QUICK.replace("gpus: 1", "gpu: 1"))
    assert r.status_code == 422
    problem = r.json()["problems"][0]
    assert problem["line"] == 6 and "did you mean 'gpus'" in problem["message"]


def test_more_gpus_than_platform_is_rejected_with_numbers(hub_server: HubServer) -> None:
    big = QUICK.replace("gpus: 1", "gpus: 4\n  workers: 3")
    with hub_server.http() as c:
        r = _submit(c, big)
    assert r.status_code == 400
    body = r.json()
    assert "12 GPUs" in body["detail"] and "only 8" in body["detail"]


def test_unknown_run_is_404(hub_server: HubServer) -> None:
    with hub_server.http() as c:
        r = c.get("/v1/runs/nope-123")
    assert r.status_code == 404 and "tau run list" in r.json()["hint"]


def test_cancel_while_queued_releases_at_once(hub_server: HubServer) -> None:
    with hub_server.http() as c:
        run = _submit(c).json()
        out = c.post(f"/v1/runs/{run['id']}/cancel").json()
    assert out["state"] == "cancelled"
    phases = {p["phase"]: p["status"] for p in out["phases"]}
    assert phases["released"] == "done"
    assert phases["artifacts_saved"] == "skipped"  # never left pending
    assert (hub_server.hub.data_root / "default" / "runs" / run["id"] / "COMPLETE").exists()


def test_queued_run_is_admitted_but_waits_without_clusters(hub_server: HubServer) -> None:
    with hub_server.http() as c:
        run = _submit(c).json()
        deadline = time.time() + 10
        while time.time() < deadline:
            d = c.get(f"/v1/runs/{run['id']}").json()
            placed = next(p for p in d["phases"] if p["phase"] == "placed")
            if d["state"] == "admitted" and placed["status"] == "active":
                break
            time.sleep(0.1)
    assert d["state"] == "admitted"
    assert placed["status"] == "active" and "no clusters registered" in placed["reason"]


def test_file_access_cannot_escape_the_run(hub_server: HubServer) -> None:
    with hub_server.http() as c:
        run = _submit(c).json()
        ok = c.get(f"/v1/runs/{run['id']}/file", params={"path": "tau.yaml"})
        assert ok.status_code == 200 and ok.text == QUICK
        for bad in ("../../../etc/passwd", "/etc/passwd", "rendered/../../x"):
            r = c.get(f"/v1/runs/{run['id']}/file", params={"path": bad})
            assert r.status_code in (400, 404), bad
            assert "passwd" not in r.text or r.status_code != 200


def test_prometheus_metrics_endpoint(hub_server: HubServer) -> None:
    with hub_server.http() as c:
        _submit(c)
        text = c.get("/metrics").text
    assert re.search(r'tau_runs\{state="(queued|admitted)",workspace="[^"]+"\} 1\.0', text), text
    assert "# TYPE tau_scheduling_latency_seconds histogram" in text
