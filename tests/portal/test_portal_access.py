"""The portal in a real browser against a real hub (no Ray needed): sign-in, scoping,
roles, revocation, escaping, CSRF, and the admin quota flow."""

from __future__ import annotations

from typing import Any

import httpx

from tests.hub import tenancy_builders as tb
from tests.hub.harness import HubServer
from tests.portal.conftest import csrf_of, follow, login, shot


def _two_workspaces(hub: HubServer) -> tuple[str, dict[str, Any], dict[str, Any]]:
    """A researcher of ``vision`` and a run in ``vision`` and in ``speech``."""
    tb.workspace(hub, "vision")
    tb.workspace(hub, "speech")
    secret = tb.token(hub, "ana", workspaces=["vision"])
    with hub.http() as admin:
        mine = tb.ok(tb.submit(admin, "vision", "vision-run"), 201)
        other = tb.ok(tb.submit(admin, "speech", "speech-run"), 201)
    return secret, mine, other


def test_login_shows_runs_and_works_without_javascript(hub: HubServer, browser: Any) -> None:
    with hub.http() as admin:
        tb.ok(tb.submit(admin, name="first-run"), 201)
    ctx = browser.new_context(java_script_enabled=False)
    page = ctx.new_page()
    login(page, hub.url, "not-a-token")
    assert "does not know this token" in page.inner_text("main")
    login(page, hub.url, hub.admin_token)
    assert page.url.endswith("/ui/runs")
    assert "first-run" in page.inner_text("table.runs")
    cookie = next(c for c in ctx.cookies() if c["name"] == "tau_session")
    assert cookie["httpOnly"] and cookie["sameSite"] == "Strict"
    assert hub.admin_token not in page.url
    ctx.close()


def test_filters_and_sort(hub: HubServer, page: Any) -> None:
    with hub.http() as admin:
        for name in ("alpha-run", "beta-run", "gamma-run"):
            tb.ok(tb.submit(admin, name=name), 201)
    login(page, hub.url, hub.admin_token)
    page.fill("input[name=q]", "beta")
    follow(page, "form.filters button[type=submit]")
    table = page.inner_text("table.runs")
    assert "beta-run" in table and "alpha-run" not in table
    page.goto(f"{hub.url}/ui/runs?sort=name")
    names = page.locator("table.runs tbody tr td:nth-child(2) a").all_inner_texts()
    assert names == sorted(names) and len(names) == 3
    shot(page, "runs")
    page.set_viewport_size({"width": 390, "height": 844})  # a phone: nothing off-screen
    assert page.evaluate("document.documentElement.scrollWidth <= window.innerWidth")
    page.keyboard.press("Tab")  # the first stop is the skip link, then the content
    assert page.evaluate("document.activeElement.textContent") == "Skip to content"
    shot(page, "runs-narrow")


def test_researcher_sees_only_own_workspace(hub: HubServer, page: Any) -> None:
    secret, _mine, other = _two_workspaces(hub)
    login(page, hub.url, secret)
    table = page.inner_text("table.runs")
    assert "vision-run" in table and "speech-run" not in table
    resp = page.goto(f"{hub.url}/ui/runs/{other['id']}")
    assert resp.status == 404
    assert "Not found" in page.inner_text("h1")
    assert "no run named" in page.inner_text("main") and "workspace" not in page.inner_text("main")
    resp = page.goto(f"{hub.url}/ui/admin/queue")
    assert resp.status == 403
    assert "Not allowed" in page.inner_text("h1")
    assert "vision-run" not in page.inner_text("main")  # no queue data on the refusal page
    assert page.locator("nav a", has_text="Platform").count() == 0


def test_revoked_token_goes_back_to_login(hub: HubServer, page: Any) -> None:
    secret, mine, _ = _two_workspaces(hub)
    login(page, hub.url, secret)
    assert "vision-run" in page.inner_text("main")
    with hub.http() as admin:
        tok = next(t for t in tb.ok(admin.get("/v1/admin/tokens")) if t["name"] == "ana")
        tb.ok(admin.post(f"/v1/admin/tokens/{tok['id']}/revoke"))
    # The open page's live stream sees the refusal and goes to the login page by itself;
    # navigating while it does so would race that navigation (net::ERR_ABORTED).
    page.wait_for_url("**/ui/login", timeout=15_000)
    page.goto(f"{hub.url}/ui/runs/{mine['id']}")
    assert page.url.endswith("/ui/login")
    assert "vision-run" not in page.content()


def test_admin_approves_quota_request_and_html_is_text(hub: HubServer, page: Any) -> None:
    secret = tb.token(hub, "ben", workspaces=["default"])
    reason = "<b id=bold>more</b><script>document.title='pwned'</script>"
    with httpx.Client(base_url=hub.url, headers={"Authorization": f"Bearer {secret}"}) as c:
        body = {"gpu_model": "A100-80G", "gpus": 16, "reason": reason}
        req = tb.ok(c.post("/v1/workspaces/default/quota-requests", json=body), 201)
    login(page, hub.url, hub.admin_token)
    follow(page, "nav >> text=Quota requests")
    assert reason in page.inner_text("table")  # shown as text ...
    assert page.locator("#bold").count() == 0  # ... never as markup
    assert page.title() != "pwned"
    shot(page, "quota")
    follow(page, f"form[action='/ui/admin/quota/{req['id']}/approve'] button")
    assert "approved" in page.inner_text("table")
    with hub.http() as admin:
        (row,) = tb.ok(admin.get("/v1/quota-requests"))
        assert row["state"] == "approved" and row["decided_by"] == "embedded-admin"
    follow(page, "nav >> text=Audit")
    assert "quota.approve" in page.inner_text("table")


def test_post_without_csrf_or_from_another_origin_is_refused(hub: HubServer, page: Any) -> None:
    with hub.http() as admin:
        run = tb.ok(tb.submit(admin, name="keep-me"), 201)
    login(page, hub.url, hub.admin_token)
    page.goto(f"{hub.url}/ui/runs/{run['id']}")
    status = page.evaluate(
        """async (id) => (await fetch(`/ui/runs/${id}/cancel`, {method: 'POST',
            headers: {'Content-Type': 'application/x-www-form-urlencoded'}, body: ''})).status""",
        run["id"],
    )
    assert status == 403
    token = csrf_of(page.content())
    cookies = {c["name"]: c["value"] for c in page.context.cookies()}
    with httpx.Client(base_url=hub.url, cookies=cookies) as forger:
        r = forger.post(
            f"/ui/runs/{run['id']}/cancel",
            data={"csrf": token},
            headers={"Origin": "http://evil.example"},
        )
        assert r.status_code == 403
    with hub.http() as admin:
        state = tb.ok(admin.get(f"/v1/runs/{run['id']}"))["state"]
        assert state in ("queued", "admitted")
    follow(page, "text=Cancel run")  # the page's own form (token + same origin) works
    assert "cancelled" in page.inner_text("#run-head")


def test_compare_overlays_runs_metrics(hub: HubServer, page: Any) -> None:
    ids = []
    with hub.http() as admin:
        for name in ("lr-small", "lr-large"):
            ids.append(tb.ok(tb.submit(admin, name=name), 201)["id"])
    for k, run_id in enumerate(ids):  # what an agent's sync stores for a job's tau.log
        rows = [
            {"attempt": 1, "step": s, "name": "loss", "value": 1 / (s + 1 + k), "wall_time": 0.0}
            for s in range(20)
        ]
        hub.hub.runs.add_metrics(run_id, rows)
    evil = "<img id=evil src=x>"  # a metric name is the job's own string
    hub.hub.runs.add_metrics(ids[0], [{**rows[0], "name": evil}])
    login(page, hub.url, hub.admin_token)
    for run_id in ids:
        page.check(f"input[name=run][value='{run_id}']")
    follow(page, "text=Compare selected")
    assert page.locator("figure[data-metric='loss'] polyline").count() == 2
    assert evil in page.inner_text(".charts") and page.locator("#evil").count() == 0
    legend = page.inner_text("ul.legend")
    assert "lr-small" in legend and "lr-large" in legend
    shot(page, "compare")
