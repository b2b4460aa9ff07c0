"""The controller's third level on real Ray: a pipeline its cluster's CPUs hold below the
target asks the hub to move it, and it finishes on a bigger cluster from where it was.

The two regions of ``relocation_lab``: on ``small`` the pools get 2 CPUs for a target
that wants 6. After two windows so capped the driver asks for the free CPUs that would
meet it (``tau.request_relocation``); the hub finds them on ``big``, stops the attempt,
and the next attempt starts there, resumes after the last window the first one
checkpointed, and every item comes out exactly once by count.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.elastic import relocation_lab as lab
from tests.hub import region as rg
from tests.hub.harness import HubServer

pytestmark = [pytest.mark.ray, pytest.mark.slow, pytest.mark.timeout(600)]

ITEMS = 300


@pytest.fixture
def hub(tmp_path: Path) -> Iterator[HubServer]:
    with lab.two_regions(tmp_path / "lab") as server:
        yield server


@pytest.mark.long
def test_a_pipeline_capped_by_its_clusters_cpus_moves_and_resumes(
    hub: HubServer, tmp_path: Path
) -> None:
    text = lab.tau_yaml("moves")
    with hub.http() as c:
        run = rg.submit_run(c, text, code_dir=lab.code_dir(tmp_path / "code", ITEMS, text))
        done = rg.wait_run(c, run["id"], rg.finished, timeout=420)
        events = c.get(f"/v1/runs/{run['id']}/events").json()
    assert done["state"] == "succeeded", done["reason"]
    first, last = done["attempts"][0], done["attempts"][-1]
    assert (first["cluster_id"], first["failure_kind"]) == ("small", "relocation"), first
    assert first["reason"].startswith("Relocating to big: stage ")
    assert "all the cluster's 2 CPUs allow" in first["reason"]
    assert last["cluster_id"] == "big" and last["resumed_from"], last
    accepted = [e["payload"] for e in events if e["kind"] == "relocation_accepted"]
    # 3 + 3 replicas and Ray Data's CPU at the rates planned; more where the sample ran slower
    assert accepted and accepted[0]["to"] == "big" and accepted[0]["cpus"] >= 7
    summary = lab.pipeline_json(Path(done["record_dir"]))
    assert summary["items_out"] == ITEMS  # the moved run neither lost nor redid an item
    assert summary["windows"][0]["index"] >= 2  # it resumed after the first attempt's
    assert summary["final"]["limit"] is None  # big meets the target
    replicas = [sum(w["replicas"].values()) for w in summary["windows"]]
    assert max(replicas) > 2, replicas
