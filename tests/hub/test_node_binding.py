"""The hub binds each worker to a node with the packer, and the agent pins it there.

Real Ray: a CPU-only head and two 4-GPU nodes (127.0.30.x), the embedded platform's hub
and a real agent. Before node binding, Ray spread a 2x2-GPU run over both nodes
(STRICT_SPREAD) while the hub counted it on one, so a 1x4-GPU run sent next sat
pending. Now the 2x2 run's workers are bound to one node (the packer keeps the other
whole for 4-GPU work) and land there, and the 1x4 run starts beside it on the other.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from typer.testing import CliRunner

from taugrid.backends.ray import ray_local
from taugrid.cli import main as cli_main
from tests.hub import region as rg
from tests.hub.harness import HubServer

pytestmark = [pytest.mark.ray, pytest.mark.slow]

HOLD = """\
import os, pathlib, time
print("holding", os.environ.get("RANK", "0"), flush=True)
flag = pathlib.Path(os.environ["TAU_HOLD_FLAG"])
deadline = time.time() + 240
while not flag.exists() and time.time() < deadline:
    time.sleep(0.2)
"""

RUN = """\
schema_version: 1
name: {name}
run:
  entrypoint: hold.py
compute:
  workers: {workers}
  gpus: {gpus}
  cpus: 1
  memory: 1Gi
runtime:
  env:
    TAU_HOLD_FLAG: "{flag}"
"""


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ray_local.LocalRayCluster]:
    ips = ["127.0.30.2", "127.0.30.3", "127.0.30.4"]
    c = rg.start_cpu_head(ips, tmp_path_factory.mktemp("ray"))
    try:
        yield c
    finally:
        c.stop()


@pytest.fixture
def hub(tmp_path: Path, cluster: ray_local.LocalRayCluster) -> Iterator[HubServer]:
    with rg.hub_and_agent(tmp_path, cluster) as server:
        yield server


def _submit(c: httpx.Client, code: Path, name: str, workers: int, gpus: float, flag: Path) -> str:
    text = RUN.format(name=name, workers=workers, gpus=gpus, flag=flag)
    return str(rg.submit_run(c, text, code)["id"])


def _landed(c: httpx.Client, run_id: str) -> dict[str, Any]:
    """The run's placement once the nodes its workers landed on include the bound ones
    (the agent looks the job's nodes up again every few seconds)."""
    deadline = time.time() + 60
    while True:
        doc: dict[str, Any] = c.get(f"/v1/runs/{run_id}/placement").json()
        if doc["nodes"] and set(doc["nodes"]) <= set(doc["landed"]):
            return doc
        assert time.time() < deadline, f"{run_id}: bound {doc['nodes']}, landed {doc['landed']}"
        time.sleep(0.5)


def _explain(hub: HubServer, run_id: str, monkeypatch: pytest.MonkeyPatch) -> str:
    """``tau run explain-placement RUN`` through the console app, as a researcher runs it."""
    monkeypatch.setenv("TAU_HUB_URL", hub.url)
    monkeypatch.setenv("TAU_TOKEN", hub.admin_token)
    out = CliRunner().invoke(cli_main.app, ["run", "explain-placement", run_id])
    assert out.exit_code == 0, out.output
    return str(out.output)


def _running(run: dict[str, Any]) -> bool:
    return rg.phases(run).get("scheduled") == "done"


def test_packed_run_leaves_a_whole_node_for_the_next(
    hub: HubServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    code, flag = tmp_path / "code", tmp_path / "release"
    code.mkdir()
    (code / "hold.py").write_text(HOLD)
    with hub.http() as c:
        pair = _submit(c, code, "pair", 2, 2, flag)
        rg.wait_run(c, pair, _running, timeout=240)
        whole = _submit(c, code, "whole", 1, 4, flag)
        rg.wait_run(c, whole, _running, timeout=240)  # before: pending behind "pair"
        pair_doc, whole_doc = _landed(c, pair), _landed(c, whole)
        shown = _explain(hub, pair, monkeypatch)
        flag.touch()
        for run_id in (pair, whole):
            done = rg.wait_run(c, run_id, rg.finished, timeout=240)
            assert done["state"] == "succeeded", rg.phases(done)
        events = c.get(f"/v1/runs/{pair}/events").json()
    bound = pair_doc["nodes"]
    assert len(bound) == 2 and bound[0] == bound[1], pair_doc  # packed on one node
    assert whole_doc["nodes"] != bound[:1]  # the other node, kept whole
    assert "node_binding_mismatch" not in [e["kind"] for e in events]
    shown = " ".join(shown.split())  # rich wraps long lines
    assert f"workers bound to nodes: {bound[0][:12]}, {bound[0][:12]}; landed on:" in shown


def _status_text(hub: HubServer, run_id: str, monkeypatch: pytest.MonkeyPatch) -> str:
    monkeypatch.setenv("TAU_HUB_URL", hub.url)
    monkeypatch.setenv("TAU_TOKEN", hub.admin_token)
    out = CliRunner().invoke(cli_main.app, ["run", "status", run_id])
    assert out.exit_code == 0, out.output
    return " ".join(str(out.output).split())


def test_two_runs_share_one_gpu(
    hub: HubServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``compute.gpus: 0.5``: the last free GPU of the cluster runs two runs at once.

    A 1x4 and a 1x3 run leave one GPU free (on the 3-GPU run's node); two half-GPU runs
    are bound there by the packer, both run on it at the same time through Ray's
    fractional GPU resource, are charged 0.5 each to the team's quota, and show as
    shared in ``tau run status``."""
    code, flag = tmp_path / "code", tmp_path / "release"
    code.mkdir()
    (code / "hold.py").write_text(HOLD)
    with hub.http() as c:
        four = _submit(c, code, "four", 1, 4, flag)
        three = _submit(c, code, "three", 1, 3, flag)
        for run_id in (four, three):
            rg.wait_run(c, run_id, _running, timeout=240)
        halves = [_submit(c, code, f"half{i}", 1, 0.5, flag) for i in (1, 2)]
        for run_id in halves:
            rg.wait_run(c, run_id, _running, timeout=240)  # both at once, one GPU
        docs = {r: _landed(c, r) for r in (three, *halves)}
        quota = c.get("/v1/workspaces/default/quota").json()
        shown = _status_text(hub, halves[0], monkeypatch)
        flag.touch()
        for run_id in (four, three, *halves):
            done = rg.wait_run(c, run_id, rg.finished, timeout=240)
            assert done["state"] == "succeeded", rg.phases(done)
    node_of_three = docs[three]["nodes"][0]
    assert [docs[r]["nodes"] for r in halves] == [[node_of_three], [node_of_three]], docs
    assert sum(q["team_held"] for q in quota["quotas"]) == 8.0, quota  # 4 + 3 + 0.5 + 0.5
    assert "gpus: 1 x 0.5 GPU (shared)" in shown, shown
