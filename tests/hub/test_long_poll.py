"""The agents' long-poll over the real hub API: it ends early with new work, and idle
long-polls hold no server thread (``hub.core.wakeups``), so a fleet of waiting agents never
starves the requests that compute.

Regions are played over HTTP with their real cluster tokens (``agent_builders``).
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Iterator
from concurrent import futures
from pathlib import Path
from typing import Any

import httpx
import pytest
import sqlalchemy as sa

from tests.dataplane.test_data_api import PLATFORM
from tests.hub import agent_builders as ab
from tests.hub import tenancy_builders as tb
from tests.hub.harness import HubServer, platform_hub

WAIT_S = 20.0
"""Longer than anything here should take: a poll that runs out has failed the test."""
IDLE_S = 6.0
"""The idle agents' long-poll: they are answered, with nothing new, after it."""


@pytest.fixture
def hub(engine: sa.Engine, tmp_path: Path) -> Iterator[HubServer]:
    with platform_hub(engine, tmp_path, PLATFORM) as server:
        yield server


def test_new_work_ends_the_long_poll_with_the_assignment(hub: HubServer) -> None:
    ab.sync(hub, "a", ab.report("a", 4))
    got: dict[str, Any] = {}

    def poll() -> None:
        with hub.http(hub.agent_token("a")) as c:
            c.timeout = httpx.Timeout(WAIT_S + 10)
            got.update(c.post("/v1/agents/a/sync", json={"wait_s": WAIT_S}).json())

    waiter = threading.Thread(target=poll)
    waiter.start()
    with hub.http() as admin:
        run = tb.ok(tb.submit(admin), 201)
    waiter.join(WAIT_S + 15)
    # a poll that ran out answers with what it computed before waiting: no assignment
    assert [a["run_id"] for a in got["assignments"]] == [run["id"]]


def test_a_hundred_idle_long_polls_leave_the_api_answering(hub: HubServer) -> None:
    """More waiting agents than the server's 40 worker threads: requests that compute
    are answered while every poll still waits (a poll held in a thread would queue
    them until polls run out, after ``WAIT_S``)."""
    clusters = [f"idle{i:03d}" for i in range(100)]
    with hub.http() as admin:  # the admin may act as any agent
        for cid in clusters:
            tb.ok(admin.post(f"/v1/agents/{cid}/register", json={"cluster_id": cid, "region": cid}))
    with futures.ThreadPoolExecutor(1) as pool:  # a loop of its own (Playwright's may run)
        found = pool.submit(asyncio.run, _status_while_polling(hub, clusters))
        answered, pending, polls = found.result()
    assert answered == [200] * 5
    assert pending == len(clusters)
    assert polls == [200] * len(clusters)


async def _status_while_polling(
    hub: HubServer, clusters: list[str]
) -> tuple[list[int], int, list[int]]:
    headers = {"Authorization": f"Bearer {hub.admin_token}"}
    limits = httpx.Limits(max_connections=len(clusters) + 10)
    async with httpx.AsyncClient(
        base_url=hub.url, headers=headers, timeout=WAIT_S + 10, limits=limits
    ) as c:
        polls = [
            asyncio.create_task(c.post(f"/v1/agents/{cid}/sync", json={"wait_s": IDLE_S}))
            for cid in clusters
        ]
        await asyncio.sleep(1.0)  # the polls reach the hub and wait
        answered = [(await c.get("/v1/runs")).status_code for _ in range(5)]
        pending = sum(not p.done() for p in polls)
        replies = await asyncio.gather(*polls)
        return answered, pending, [r.status_code for r in replies]
