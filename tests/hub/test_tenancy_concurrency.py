"""50 concurrent submitters against the real hub server with its scheduler running:
no submission is lost or duplicated, and the GPUs admitted (quota held) never exceed
the team's quota — sampled all along, while quota changes and cancellations happen."""

from __future__ import annotations

import threading
import time
from collections import Counter

import httpx
import pytest

from taugrid.hub.tenancy import tenancy
from tests.hub import tenancy_builders as tb
from tests.hub.harness import HubServer

pytestmark = pytest.mark.slow

SUBMITTERS = 50
PER_SUBMITTER = 2


class QuotaWatch:
    """Samples ``quota_usage`` against the effective quota until stopped."""

    def __init__(self, server: HubServer) -> None:
        self.hub = server.hub
        self.overruns: list[tuple[float, int]] = []
        self.peak = 0.0
        self.samples = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, daemon=True)

    def _loop(self) -> None:
        while not self._stop.is_set():
            team = tenancy.effective_platform(self.hub).team("research")
            assert team is not None
            # Read the quota before usage: a concurrent lowering can only make it stricter.
            nominal = team.quotas[0].nominal
            used = self.hub.runs.quota_usage().get(("research", "A100-80G"), 0.0)
            self.samples += 1
            self.peak = max(self.peak, used)
            if used > max(nominal, self.floor):
                self.overruns.append((used, nominal))
            time.sleep(0.01)

    floor = 0  # GPUs admitted under an earlier, higher quota may stay held

    def __enter__(self) -> QuotaWatch:
        self._thread.start()
        return self

    def __exit__(self, *_: object) -> None:
        self._stop.set()
        self._thread.join()


def _submit_all(server: HubServer, tokens: list[str]) -> tuple[list[str], list[str]]:
    ids: list[str] = []
    errors: list[str] = []
    barrier = threading.Barrier(SUBMITTERS)

    def worker(i: int) -> None:
        with httpx.Client(
            base_url=server.url,
            headers={"Authorization": f"Bearer {tokens[i % len(tokens)]}"},
            timeout=60,
        ) as c:
            barrier.wait()
            for k in range(PER_SUBMITTER):
                r = tb.submit(c, "default", f"s{i}-{k}", gpus=1 + (i + k) % 2)
                if r.status_code == 201:
                    ids.append(r.json()["id"])
                else:
                    errors.append(f"{r.status_code} {r.text[:200]}")

    threads = [threading.Thread(target=worker, args=(i,)) for i in range(SUBMITTERS)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return ids, errors


def _set_quota(server: HubServer, gpus: int) -> None:
    with server.http() as admin:
        body = {"gpu_model": "A100-80G", "gpus": gpus, "reason": "test"}
        req = tb.ok(admin.post("/v1/workspaces/default/quota-requests", json=body), 201)
        tb.ok(admin.post(f"/v1/admin/quota-requests/{req['id']}/approve"))


def test_fifty_submitters_no_loss_no_duplicates_no_overrun(hub_server: HubServer) -> None:
    hub = hub_server.hub
    tokens = [hub_server.admin_token] + [
        tb.token(hub_server, f"user{i}", workspaces=["default"]) for i in range(4)
    ]
    _set_quota(hub_server, 6)
    with QuotaWatch(hub_server) as watch:
        ids, errors = _submit_all(hub_server, tokens)
        assert errors == []
        assert len(ids) == len(set(ids)) == SUBMITTERS * PER_SUBMITTER
        stored = hub.runs.list_runs(None, None, 1000)
        assert sorted(r["id"] for r in stored) == sorted(ids)
        names = Counter(r["name"] for r in stored)
        assert set(names.values()) == {1}  # each submission stored exactly once

        def held() -> float:
            return hub.runs.quota_usage().get(("research", "A100-80G"), 0.0)

        assert tb.wait_for(lambda: held() >= 5, timeout=20)  # the scheduler admits up to 6
        with hub_server.http() as admin:  # free quota: more runs get admitted, still <= 6
            for r in hub.runs.list_runs(None, ["admitted"], 3):
                tb.ok(admin.post(f"/v1/runs/{r['id']}/cancel"))
        time.sleep(1.5)
        watch.floor = 6  # runs admitted under the old quota keep it when it is lowered
        _set_quota(hub_server, 2)
        before = held()
        time.sleep(1.5)
        assert held() <= before  # nothing new is admitted above the lowered quota
    assert watch.samples > 50 and watch.overruns == []
    assert 5 <= watch.peak <= 6
    states = Counter(r["state"] for r in hub.runs.list_runs(None, None, 1000))
    assert states["cancelled"] == 3 and sum(states.values()) == len(ids)
    with hub_server.http() as admin:
        queue = tb.ok(admin.get("/v1/queue"))
    assert len(queue) == states["queued"] + states["admitted"]
    assert all(q["reason"] for q in queue)
