"""Platform and run views in a real browser against a real hub (agents played over the
agent API, no Ray): the link matrix, GPU utilisation over time, quotas and borrowing
per team/cohort, cost per workspace, a run's resolved config with provenance, rendered
objects and explain-placement; an expired session; every page on a phone, by keyboard."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa

from taugrid.portal import session
from tests.hub import agent_builders as ab
from tests.hub import platform_builders as pb
from tests.hub import tenancy_builders as tb
from tests.hub.harness import HubServer, platform_hub
from tests.portal.conftest import follow, login, shot

PLATFORM = pb.platform(
    {"east": 2.0, "west": 1.5},
    """\
priority_classes: [{name: normal, value: 1000}]
profiles: [{name: default}]
teams:
  - {name: vision-team, cohort: lab,
     quotas: [{gpu_model: A100-80G, nominal: 1, borrowing_limit: 3}]}
  - {name: speech-team, cohort: lab, quotas: [{gpu_model: A100-80G, nominal: 4}]}
  - {name: solo, quotas: [{gpu_model: A100-80G, nominal: 2}]}
workspaces:
  - {name: vision, team: vision-team, defaults: {priority: normal, profile: default}}
  - {name: speech, team: speech-team, defaults: {priority: normal, profile: default}}
  - {name: lone, team: solo, defaults: {priority: normal, profile: default}}
default_workspace: vision
""",
    extra={"west": "egress_cost_per_gb: 0.05"},
)
PROBE = {"throughput_mbps": 940.0, "rtt_ms": 12.5, "loss_pct": 0.0, "measured_at": 0.0}


@pytest.fixture
def lab(sqlite_engine: sa.Engine, tmp_path: Path) -> Iterator[HubServer]:
    with platform_hub(sqlite_engine, tmp_path, PLATFORM) as server:
        for name, peer, busy in (("east", "west", 3), ("west", "east", 1)):
            probe = {**PROBE, "measured_at": time.time()}
            state = ab.report(name, 4 - busy, gpu_busy=busy, probes={peer: probe})
            ab.sync(server, name, state)
        yield server


def _narrow_and_keyboard(page: Any) -> None:
    """At 390 px nothing sticks out of the page, and Tab reaches every control."""
    page.set_viewport_size({"width": 390, "height": 844})
    page.reload()  # Tab starts from the top (not from the last control clicked)
    assert page.evaluate("document.documentElement.scrollWidth <= window.innerWidth"), page.url
    want = page.evaluate(
        """() => {
        const sel = 'a[href],button,input:not([type=hidden]),select,summary,[tabindex="0"]';
        const els = [...document.querySelectorAll(sel)]
          .filter(e => e.offsetParent !== null || e.classList.contains('skip'));
        els.forEach((e, i) => e.dataset.tabcheck = i); return els.length; }"""
    )
    order = []
    for _ in range(want + 3):
        page.keyboard.press("Tab")
        order.append(str(page.evaluate("document.activeElement.dataset.tabcheck")))
    seen = set(order)
    missing = sorted({str(i) for i in range(want)} - seen)
    what = [
        page.evaluate(f"document.querySelector('[data-tabcheck=\"{i}\"]')?.outerHTML")
        for i in missing
    ]
    assert not missing, (
        f"{page.url}: {len(missing)} of {want} controls not reached by Tab: {what} {order}"
    )
    page.set_viewport_size({"width": 1280, "height": 800})


@pytest.mark.slow  # about 30 s: a lab of regions and a browser
def test_links_utilisation_quotas_and_cost_views(lab: HubServer, page: Any) -> None:
    with lab.http() as admin:
        tb.ok(tb.submit(admin, "vision", "borrower", gpus=3), 201)
        tb.wait_for(lambda: "borrowing" in tb.ok(admin.get("/v1/runs"))[0]["reason"], 30)
    login(page, lab.url, lab.admin_token)
    follow(page, "nav >> text=Platform")
    links = page.inner_text("table.links")
    assert "940 Mbit/s" in links and "12.5 ms" in links  # both directions measured
    assert page.locator("table.links td", has_text="Mbit/s").count() == 2
    chart = page.locator("figure[data-metric='GPU utilisation % (allocation)']")
    assert chart.locator("polyline").count() == 2  # one line per region
    assert "allocation" in page.inner_text("#utilisation + p")
    shot(page, "platform-links")
    follow(page, "nav >> text=Quotas")
    text = page.inner_text("main")
    assert "Cohort lab" in text and "Teams without a cohort" in text
    row = page.locator("table.quotas tr", has_text="vision-team").inner_text()
    assert row.split("\t")[2:5] == ["1", "3", "2"]  # nominal 1, holds 3, borrows 2
    shot(page, "quotas")
    follow(page, "nav >> text=Cost")
    assert [r.split("\t")[0] for r in _rows(page, "table.cost")] == ["lone", "speech", "vision"]
    assert "Spot saved" in page.inner_text("table.cost thead")
    _narrow_and_keyboard(page)


def _rows(page: Any, table: str) -> list[str]:
    return [str(x) for x in page.locator(f"{table} tbody tr").all_inner_texts()]


def test_researcher_cost_view_is_scoped(lab: HubServer, page: Any) -> None:
    secret = tb.token(lab, "ana", workspaces=["speech"])
    login(page, lab.url, secret)
    follow(page, "nav >> text=Cost")
    assert [r.split("\t")[0] for r in _rows(page, "table.cost")] == ["speech"]
    assert [r.split("\t")[0] for r in _rows(page, "table.cost-teams")] == ["speech-team"]
    for admin_page in ("platform", "quotas"):
        assert page.goto(f"{lab.url}/ui/admin/{admin_page}").status == 403
        assert "speech-team" not in page.inner_text("main")


def test_run_page_config_provenance_rendered_and_explain(lab: HubServer, page: Any) -> None:
    with lab.http() as admin:
        run = tb.ok(tb.submit(admin, "lone", "explained", gpus=2), 201)
    login(page, lab.url, lab.admin_token)
    page.goto(f"{lab.url}/ui/runs/{run['id']}")
    page.click("#config summary")
    rows = {r.split("\t")[0]: r.split("\t")[1:] for r in _rows(page, "table.provenance")}
    assert rows["gpus_per_worker"] == ["2", "tau.yaml:6"]  # the line of `gpus: 2`
    assert rows["priority"] == ['"normal"', "workspace default (lone)"]
    assert rows["image"][1] == "built-in default"
    page.click("#rendered summary")
    manifests = page.inner_text("#rendered pre")
    assert "kind: RayJob" in manifests and run["id"] in manifests
    page.click("#explain summary")
    verdicts = page.inner_text("table.verdicts")
    assert "east" in verdicts and "west" in verdicts
    shot(page, "run-config")
    _narrow_and_keyboard(page)


def test_expired_or_altered_session_goes_back_to_login(hub: HubServer, page: Any) -> None:
    with hub.http() as admin:
        tb.ok(tb.submit(admin, name="secret-run"), 201)
    login(page, hub.url, hub.admin_token)
    assert "secret-run" in page.inner_text("main")
    for value in (
        session.cookie_value(hub.admin_token, time.time() - session.SESSION_S - 5),
        session.cookie_value(hub.admin_token).replace(".", ".0", 1),  # a forged stamp
    ):
        page.context.add_cookies([{"name": session.COOKIE, "value": value, "url": hub.url}])
        page.goto(f"{hub.url}/ui/runs")
        assert page.url.endswith("/ui/login")
        assert "secret-run" not in page.content()


def test_every_page_fits_a_phone_and_is_keyboard_reachable(hub: HubServer, page: Any) -> None:
    with hub.http() as admin:
        run = tb.ok(tb.submit(admin, name="phone-run"), 201)
        sweep = tb.ok(admin.post("/v1/sweeps", json={"tau_yaml": SWEEP}), 201)
    login(page, hub.url, hub.admin_token)
    for path in (
        "/ui/runs",
        f"/ui/runs/{run['id']}",
        "/ui/submit",
        "/ui/cost",
        "/ui/sweeps",
        f"/ui/sweeps/{sweep['id']}",
        "/ui/admin/platform",
        "/ui/admin/queue",
        "/ui/admin/quotas",
        "/ui/admin/quota",
        "/ui/admin/audit",
    ):
        assert page.goto(f"{hub.url}{path}").status == 200, path
        _narrow_and_keyboard(page)


SWEEP = tb.tau_yaml("lr-sweep") + "sweep:\n  parameters:\n    lr: {values: [0.1, 0.01, 0.001]}\n"


def test_the_sweep_pages_show_its_trials_and_only_to_its_workspace(
    hub: HubServer, page: Any
) -> None:
    tb.workspace(hub, "vision")
    tb.workspace(hub, "speech")
    other = tb.token(hub, "ana", workspaces=["speech"])
    with hub.http() as admin:
        body = {"tau_yaml": SWEEP, "workspace": "vision"}
        sweep = tb.ok(admin.post("/v1/sweeps", json=body), 201)
        deadline = time.time() + 20
        while admin.get(f"/v1/sweeps/{sweep['id']}").json()["submitted"] < 2:  # parallel: 2
            assert time.time() < deadline
            time.sleep(0.2)
    login(page, hub.url, hub.admin_token)
    page.goto(f"{hub.url}/ui/sweeps")
    assert "lr-sweep" in page.inner_text("table.sweeps")
    follow(page, "table.sweeps a")
    rows = _rows(page, "table.leaderboard")
    assert len(rows) == 2 and "lr=0.1" in rows[0] and "lr=0.01" in rows[1], rows
    assert "2 of 3 trials submitted" in page.inner_text("main")
    shot(page, "sweep")
    page.context.clear_cookies()
    login(page, hub.url, other)
    page.goto(f"{hub.url}/ui/sweeps")
    assert "lr-sweep" not in page.inner_text("table.sweeps")
    assert page.goto(f"{hub.url}/ui/sweeps/{sweep['id']}").status == 404
