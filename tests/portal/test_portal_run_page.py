"""A run's page as a new user meets it (issue 36 item 6), in a real browser against a
real hub; the attempt is played over the agent API with the cluster's real token (no
Ray), checkpoints are written into the run's record as an agent's upload leaves them.

- the log opens scrolled to its newest lines (with JavaScript and without) and follows
  new lines; text that never reached the hub is named on the page;
- many checkpoints: the newest in full, the others counted behind a closed <details>,
  the page stays short;
- a hole in the logged steps is a break in the line, not a straight line across it;
- a metric that never changes is one line of text, not a chart.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import sqlalchemy as sa

from taugrid.portal import runs_views
from tests.hub import agent_builders as ab
from tests.hub import platform_builders as pb
from tests.hub import tenancy_builders as tb
from tests.hub.harness import HubServer, platform_hub
from tests.portal.conftest import login

PLATFORM = pb.platform({"a": 1.0}, pb.TENANCY)
AT_END = """() => { const b = document.getElementById('log-box') || document.getElementById('log');
  return b.scrollHeight > b.clientHeight + 100
    && b.scrollTop + b.clientHeight >= b.scrollHeight - 4; }"""
# without JavaScript the box's scroll position reads differently (CSS column-reverse):
# ask whether the log's last line is inside the visible box instead
LAST_LINE_SHOWN = """() => { const p = document.getElementById('log').getBoundingClientRect();
  const b = (document.getElementById('log-box') || document.getElementById('log'))
    .getBoundingClientRect();
  return p.height > b.height + 100 && p.bottom <= b.bottom + 1 && p.bottom > b.top; }"""


@pytest.fixture
def lab(sqlite_engine: sa.Engine, tmp_path: Path) -> Iterator[HubServer]:
    with platform_hub(sqlite_engine, tmp_path, PLATFORM) as server:
        yield server


def _running(hub: HubServer, c: httpx.Client, name: str) -> dict[str, Any]:
    """Submit a run and play its attempt to ``running``; returns the assignment."""
    tb.ok(c.post("/v1/runs", json={"tau_yaml": ab.ONE_GPU_RUN.format(name=name)}), 201)
    deadline = time.time() + 30
    while not (got := ab.sync(hub, "a", ab.report("a", 4))["assignments"]):
        assert time.time() < deadline, "no assignment"
        time.sleep(0.1)
    a = dict(got[0])
    ab.sync(hub, "a", ab.report("a", 3), attempts=[_rep(a)])
    return a


def _rep(a: dict[str, Any], **kw: Any) -> dict[str, Any]:
    return {"token": a["token"], "state": "running", "submission_id": f"s{a['token']}", **kw}


def _lines(lo: int, hi: int) -> str:
    return "".join(f"line {i:05d} of the job's output\n" for i in range(lo, hi))


def test_log_opens_at_its_newest_lines_and_follows(lab: HubServer, browser: Any) -> None:
    with lab.http() as c:
        a = _running(lab, c, "chatty")
    text = _lines(0, 3000)
    ab.sync(lab, "a", attempts=[_rep(a, log_chunk=text, log_from=0)])
    page = browser.new_context(viewport={"width": 1280, "height": 800}).new_page()
    login(page, lab.url, lab.admin_token)
    page.goto(f"{lab.url}/ui/runs/{a['run_id']}")
    shown = page.inner_text("#log").splitlines()
    assert shown[-1] == "line 02999 of the job's output"  # the newest lines, in the HTML
    page.wait_for_function(AT_END, timeout=5000)  # opened scrolled to the end
    assert len(shown) == runs_views.LOG_LINES and "newest lines" in page.inner_text("main")
    ab.sync(lab, "a", attempts=[_rep(a, log_chunk=_lines(3000, 3040), log_from=len(text))])
    page.wait_for_function(
        "() => document.getElementById('log').textContent.includes('line 03039')",
        timeout=15_000,
    )
    page.wait_for_function(AT_END, timeout=5000)  # and followed the new lines
    # text that never reached the hub: the page says what is missing, live
    ab.sync(lab, "a", attempts=[_rep(a, log_chunk="late\n", log_from=len(text) + 5000)])
    page.wait_for_selector("#run-head .gap", timeout=15_000)
    gap = page.inner_text("#run-head .gap")
    assert gap.startswith("missing: ") and "attempt 1's driver log" in gap, gap
    page.context.close()


def test_log_opens_at_its_end_without_javascript(lab: HubServer, browser: Any) -> None:
    with lab.http() as c:
        a = _running(lab, c, "quiet")
    ab.sync(lab, "a", attempts=[_rep(a, log_chunk=_lines(0, 500), log_from=0)])
    ctx = browser.new_context(java_script_enabled=False, viewport={"width": 1280, "height": 800})
    page = ctx.new_page()
    login(page, lab.url, lab.admin_token)
    page.goto(f"{lab.url}/ui/runs/{a['run_id']}")
    assert page.inner_text("#log").splitlines()[-1] == "line 00499 of the job's output"
    assert page.evaluate(LAST_LINE_SHOWN)
    ctx.close()


def _checkpoints(record: Path, count: int) -> None:
    """``count`` committed checkpoints of 3 files, as an agent's upload leaves them."""
    for step in range(1, count + 1):
        folder = record / "checkpoints" / f"step-{step:08d}"
        folder.mkdir(parents=True)
        (folder / "model.pt").write_bytes(b"m" * 4000)
        (folder / "optim.pt").write_bytes(b"o" * 2000)
        marker = {"step": step, "files": {}, "created_at": 1_700_000_000.0 + step}
        (folder / "_CHECKPOINT.json").write_text(json.dumps(marker))
    (record / "checkpoints" / "latest").write_text(f"step-{count:08d}\n")


def test_many_checkpoints_show_the_newest_and_a_count(lab: HubServer, page: Any) -> None:
    with lab.http() as c:
        a = _running(lab, c, "saver")
        run = tb.ok(c.get(f"/v1/runs/{a['run_id']}"))
    _checkpoints(Path(run["record_dir"]), 60)  # 180 files
    login(page, lab.url, lab.admin_token)
    page.goto(f"{lab.url}/ui/runs/{run['id']}")
    # the page stays short: before, one link per file made it about 6,000 px tall
    assert page.evaluate("document.documentElement.scrollHeight") < 2000  # now about 1,400
    newest = page.inner_text(".newest-checkpoint")
    assert "step 60" in newest and "step-00000060" in newest, newest
    assert "2023-11-14 22:14:20" in newest and "3 files" in newest  # its marker's time
    links = page.locator("#files ul.checkpoints a[download]").all_inner_texts()
    assert len(links) == 3 and all("step-00000060/" in x for x in links), links
    older = page.locator("details#older-checkpoints")
    assert older.get_attribute("open") is None  # collapsed
    assert "60 checkpoints" in older.locator("summary").inner_text()
    older.locator("summary").click()
    rows = page.locator("table.checkpoints-older tbody tr").all_inner_texts()
    assert len(rows) == 59 and rows[0].split("\t")[:3] == ["step-00000059", "59", "3"]
    assert page.locator("table.checkpoints-older a").count() == 0  # no file lists in it


def test_a_step_gap_breaks_the_line_and_a_constant_metric_is_a_line_of_text(
    lab: HubServer, page: Any
) -> None:
    with lab.http() as c:
        run = tb.ok(tb.submit(c, name="holey"), 201)
    steps = [*range(0, 40), *range(100, 140)]  # steps 40..99 never reached the hub
    rows = [{"attempt": 1, "step": s, "name": "loss", "value": 1 / (s + 1)} for s in steps]
    rows += [{"attempt": 1, "step": s, "name": "lr", "value": 0.001} for s in range(50)]
    lab.hub.runs.add_metrics(run["id"], [{**r, "wall_time": 0.0} for r in rows])
    login(page, lab.url, lab.admin_token)
    page.goto(f"{lab.url}/ui/runs/{run['id']}")
    lines = page.locator("figure[data-metric='loss'] polyline")
    assert lines.count() == 2  # one segment each side of the hole
    first, second = (str(lines.nth(i).get_attribute("points")).split() for i in range(2))
    assert (len(first), len(second)) == (40, 40)
    assert float(second[0].split(",")[0]) - float(first[-1].split(",")[0]) > 200  # px apart
    assert "no points between step 39 and 100" in page.inner_text("figure[data-metric='loss']")
    assert page.locator("figure[data-metric='lr']").count() == 0  # no chart for it
    lr = page.inner_text("li.constant[data-metric='lr']")
    assert "lr = 0.001" in lr and "constant over 50 points" in lr, lr
