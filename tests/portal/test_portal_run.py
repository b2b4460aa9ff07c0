"""The portal watching real runs: a real hub, a real Ray region and agent, headless Chromium.

The run page is opened while the run is still queued and never reloaded by the test:
phases, the loss chart and the log arrive through the page's live updates (SSE).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa

from taugrid.backends.ray import ray_local
from taugrid.sdk.client import submit
from tests.hub import region as rg
from tests.hub import tenancy_builders as tb
from tests.hub.harness import HubServer, make_hub
from tests.portal.conftest import follow, login, shot
from tests.portal.test_portal_submit import upload

pytestmark = [pytest.mark.ray, pytest.mark.slow]
WAIT_MS = 240_000  # a Ray job's first start is slow on a loaded machine
NOISY_JOB = """\
import time
import taugrid as tau
print("<b id=logbold>bold</b><script>document.title='pwned'</script>", flush=True)
for step in range(100000):
    tau.log({"heartbeat": float(step)}, step=step)
    time.sleep(0.5)
"""


@pytest.fixture(scope="module")
def ray_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ray_local.LocalRayCluster]:
    cluster = rg.start_ray(["127.0.0.171"], tmp_path_factory.mktemp("ray"))
    yield cluster
    cluster.stop()


@pytest.fixture
def platform(
    sqlite_engine: sa.Engine, tmp_path: Path, ray_cluster: ray_local.LocalRayCluster
) -> Iterator[HubServer]:
    server = HubServer(make_hub(sqlite_engine, tmp_path / "home")).start()
    agent = rg.AgentThread(server, ray_cluster, tmp_path / "agent").start()
    try:
        yield server
    finally:
        agent.stop()
        server.stop()


def _until(page: Any, server: HubServer, run_id: str) -> Callable[[str], None]:
    return lambda js: _wait(page, server, run_id, js)


def _wait(page: Any, server: HubServer, run_id: str, js: str) -> None:
    """Wait (bounded) until ``js`` holds in the page; on timeout say where the run was."""
    try:
        page.wait_for_function(js, timeout=WAIT_MS)
    except Exception as exc:
        with server.http() as c:
            run = c.get(f"/v1/runs/{run_id}").json()
            log = c.get(f"/v1/runs/{run_id}/logs", params={"tail": 20}).json()["text"]
        raise AssertionError(
            f"page never showed {js!r}; run {run['state']} {rg.phases(run)} {run['reason']}"
            f"\nlog tail: {log}\npage: {page.inner_text('main')[:2000]}"
        ) from exc


def _points(page: Any, metric: str) -> int:
    sel = f"figure[data-metric='{metric}'] polyline"
    if page.locator(sel).count() == 0:
        return 0
    return len(str(page.get_attribute(sel, "points")).split())


def test_quickstart_phases_chart_logs_and_artifact_live(platform: HubServer, page: Any) -> None:
    login(page, platform.url, platform.admin_token)
    yaml_text = rg.quickstart_yaml("--steps 60 --checkpoint-every 20 --step-sleep 0.3")
    code = submit.zip_dir(rg.QUICKSTART, [])
    upload(page, yaml_text, code)  # through the Submit page: tau.yaml + a zip of the code
    run = {"id": page.url.rsplit("/", 1)[-1]}
    assert "/ui/runs/quickstart-" in page.url
    until = _until(page, platform, run["id"])
    assert page.locator("figure[data-metric='loss']").count() == 0  # nothing logged yet
    until("() => document.querySelector(\"figure[data-metric='loss'] polyline\")")
    first = _points(page, "loss")
    # the chart grows without a reload
    until(f"""() => document.querySelector("figure[data-metric='loss'] polyline")
                 .getAttribute('points').split(' ').length > {first}""")
    for metric in ("train_accuracy", "val_accuracy"):
        assert page.locator(f"[data-metric='{metric}']").count() == 1  # chart or constant
    shot(page, "run-live")
    until("() => document.querySelector('#run-head .state').textContent === 'succeeded'")
    until(
        "() => document.getElementById('log').textContent.includes('val_accuracy')"
    )  # the job's last line, streamed into the open page
    timeline = page.inner_text("#timeline")
    assert "progressing" in timeline and "artifacts_saved" in timeline
    page.wait_for_selector("#files a:has-text('model.npz')", timeout=WAIT_MS)
    shot(page, "run")
    with page.expect_download() as dl:
        page.click("#files a:has-text('model.npz')")
    saved = Path(dl.value.path())
    with platform.http() as c:
        done = tb.ok(c.get(f"/v1/runs/{run['id']}"))
        cost = tb.ok(c.get(f"/v1/runs/{run['id']}/cost"))
    record = Path(done["record_dir"])
    assert saved.read_bytes() == (record / "artifacts" / "model.npz").read_bytes()
    _attempts_checkpoints_logs_and_cost(page, platform, done, cost)


def _attempts_checkpoints_logs_and_cost(
    page: Any, server: HubServer, run: dict[str, Any], cost: dict[str, Any]
) -> None:
    page.reload()  # the finished run as a fresh page shows it (no live update needed)
    (attempt,) = page.locator("#attempts tbody tr").all_inner_texts()
    assert attempt.split("\t")[:3] == ["1", "local", "succeeded"]
    assert attempt.split("\t")[6] != "-"  # the step of its last checkpoint
    assert page.locator("ul.checkpoints a[download]").count() > 0
    page.fill("#log-q", "val_accuracy")  # search: only matching lines stay
    lines = page.inner_text("#log").strip().splitlines()
    assert lines and all("val_accuracy" in ln for ln in lines)
    with page.expect_download() as dl:
        page.click("text=Download full log")
    full = Path(dl.value.path()).read_text()
    with server.http() as c:
        assert full == tb.ok(c.get(f"/v1/runs/{run['id']}/logs"))["text"]
    assert len(full.splitlines()) > len(lines)
    head = page.inner_text("#run-cost")
    assert f"${cost['total']:,.2f}" in head and "\u00d7 $2.50" in head  # the local pool's price
    follow(page, "nav >> text=Cost")
    row = page.locator("table.cost tbody tr", has_text="default").inner_text()
    assert f"${cost['total']:,.2f}" in row
    shot(page, "cost")


def test_log_html_is_text_and_cancel_from_the_page(
    platform: HubServer, page: Any, tmp_path: Path
) -> None:
    code = tmp_path / "noisy"
    code.mkdir()
    (code / "train.py").write_text(NOISY_JOB)
    with platform.http() as c:
        run = rg.submit_run(c, tb.tau_yaml("noisy"), code)
    login(page, platform.url, platform.admin_token)
    page.goto(f"{platform.url}/ui/runs/{run['id']}")
    until = _until(page, platform, run["id"])
    until("() => document.getElementById('log').textContent.includes('<b id=logbold>')")
    assert page.locator("#logbold").count() == 0 and page.title() != "pwned"
    until("() => document.querySelector('#run-head .state').textContent === 'running'")
    follow(page, "text=Cancel run")
    until("() => document.querySelector('#run-head .state').textContent === 'cancelled'")
    with platform.http() as c:
        assert tb.ok(c.get(f"/v1/runs/{run['id']}"))["state"] == "cancelled"


def test_admin_marks_and_clears_a_node(platform: HubServer, page: Any) -> None:
    with platform.http() as c:
        tb.wait_for(lambda: any(x["report"].get("nodes") for x in tb.ok(c.get("/v1/clusters"))))
    login(page, platform.url, platform.admin_token)
    follow(page, "nav >> text=Platform")
    assert "A100-80G" in page.inner_text("main")  # capacity by GPU model
    shot(page, "platform")
    page.fill("table.nodes input[name=reason]", "flaky NVLink")
    follow(page, "table.nodes button:has-text('Mark faulty')")
    assert "marked" in page.inner_text("table.nodes")
    with platform.http() as c:
        (cluster,) = tb.ok(c.get("/v1/clusters"))
        assert [m["reason"] for m in cluster["faulty_nodes"]] == ["flaky NVLink"]
    follow(page, "table.nodes button:has-text('Clear mark')")
    assert "marked" not in page.inner_text("table.nodes")
    with platform.http() as c:
        (cluster,) = tb.ok(c.get("/v1/clusters"))
        assert cluster["faulty_nodes"] == []
