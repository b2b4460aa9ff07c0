"""The 3-region lab end to end, through ``tau lab up`` and the SDK (kept small).

Topology: r0-r1 shaped to 100 Mbit/s with 10 ms RTT, every other link 400 Mbit/s / 2 ms;
GPUs cost 3/1/3 per hour in r0/r1/r2. Each region is a real Ray cluster (one node, two
emulated GPUs) with its agent; the data plane and probes live in network namespaces.

- the probes' link matrix matches the shaping (peers learnt from the hub, not configured);
- a ~200 MB dataset in r0: the placement of a run that reads it is the best total of
  scores recomputed here from the measured links (data = 100*60/(60+t)), and the
  transfer estimate is size / measured throughput;
- replicating it across the 100 Mbit/s link reaches >= 85 % of the shaped rate and
  takes about what the hub estimated;
- the run completes on the chosen region;
- a ``kill -9``ed agent and hub are started again by the lab's supervisor;
- ``tau lab down`` leaves nothing behind.
"""

from __future__ import annotations

import functools
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from taugrid.sdk.client import client, data, submit

pytestmark = [
    pytest.mark.ray,
    pytest.mark.slow,
    pytest.mark.skipif(
        os.geteuid() != 0 or not shutil.which("tc"), reason="needs root and iproute2"
    ),
]

TOPOLOGY = """\
regions: [r0, r1, r2]
gpu_cost: {r0: 3.0, r1: 1.0, r2: 3.0}
default_link: {mbit: 400, rtt_ms: 2}
links:
  - {a: r0, b: r1, mbit: 100, rtt_ms: 10, egress_per_gb: 0.02, loss_pct: 10}
"""
RUN = """\
schema_version: 1
name: reads-corpus
run:
  entrypoint: train.py
compute: {gpus: 1, cpus: 1, memory: 1Gi}
data:
  inputs: [{dataset: corpus}]
"""
SIZE = 200 * 10**6


def _tau(home: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ, TAU_HOME=str(home))
    env.pop("TAU_HUB_URL", None)
    return subprocess.run(
        [sys.executable, "-m", "taugrid.lab", *args],
        env=env,
        capture_output=True,
        text=True,
        timeout=400,
        check=False,
    )


@pytest.fixture(scope="module")
def lab(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    home = tmp_path_factory.mktemp("lab-home")
    (home / "topo.yaml").write_text(TOPOLOGY)
    up = _tau(home, "up", "--topology", str(home / "topo.yaml"), "-o", "json")
    try:
        assert up.returncode == 0, up.stderr
        yield {**json.loads(up.stdout), "home": home}
    finally:
        down = _tau(home, "down")
        assert down.returncode == 0, down.stderr
        names = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout
        assert up.returncode != 0 or json.loads(up.stdout)["tag"] not in names


@pytest.fixture(scope="module")
def sdk(lab: dict[str, Any]) -> Iterator[client.Client]:
    c = client.Client(client.HubConfig(lab["hub_url"], lab["token"]))
    yield c
    c.close()


def _until(what: str, fn: Callable[[], Any], timeout: float = 60) -> Any:
    deadline = time.time() + timeout
    while time.time() < deadline:
        out = fn()
        if out:
            return out
        time.sleep(1.0)
    raise AssertionError(f"timed out waiting for {what}")


def _all_links(sdk: client.Client) -> Callable[[], Any]:
    def check() -> Any:
        m = _links(sdk)
        return m if len(m) == 6 else None

    return check


def _links(sdk: client.Client) -> dict[tuple[str, str], dict[str, Any]]:
    rows = data.links(sdk)["links"]
    return {(r["src"], r["dst"]): r for r in rows if r["throughput_mbps"]}


def test_link_matrix_matches_the_shaping(sdk: client.Client) -> None:
    links = _until("six measured links", _all_links(sdk))
    for (src, dst), row in links.items():
        slow = {src, dst} == {"r0", "r1"}
        rate, rtt = (100, 10) if slow else (400, 2)
        assert 0.85 * rate <= row["throughput_mbps"] <= 1.05 * rate, row
        # The shaped RTT is a floor; above it a busy 2-core box adds scheduling jitter
        # (seen: 25 ms on a 2 ms link), so the ceiling only catches a wrong link.
        assert rtt <= row["rtt_ms"] <= rtt + 100, row
        # 10 % emulated loss on r0-r1, 50 datagrams a probe: a binomial reading
        assert (2 <= row["loss_pct"] <= 26) if slow else row["loss_pct"] == 0, row


def _score(t: float) -> float:
    """The default preset (finish 0.8, data 0.2) for a 1 h run on equal-speed GPUs."""
    run = 3600.0
    return 0.8 * 100 * run / (run + t + run) + 0.2 * 100 * 60 / (60 + t)


def test_200mb_dataset_placement_and_transfer(
    lab: dict[str, Any], sdk: client.Client, tmp_path: Path
) -> None:
    root = Path(lab["home"]) / "lab" / "regions" / "r0" / "data" / "corpus"
    root.mkdir(parents=True)
    with (root / "shard-0.bin").open("wb") as fh:
        for _ in range(SIZE // 10**6):
            fh.write(os.urandom(10**6))
    data.register(sdk, "corpus", "r0", "corpus")
    _until("the scan", lambda: data.dataset(sdk, "corpus")["state"] == "ready")
    links = _until("six measured links", _all_links(sdk))

    (tmp_path / "tau.yaml").write_text(RUN)
    (tmp_path / "train.py").write_text("print('read the corpus')\n")
    c = submit.zip_dir(tmp_path, [])
    run = sdk.submit(RUN, "tau.yaml", c)
    _until("placement", lambda: sdk.run(run["id"])["cluster_id"])
    doc = data.explain_placement(sdk, run["id"])
    est = {k: v["seconds"] for k, v in doc["data"].items()}
    # the estimate is size / measured throughput (+ RTT) of the link from r0
    for dst in ("r1", "r2"):
        row = links[("r0", dst)]
        expect = SIZE / (row["throughput_mbps"] * 1e6 / 8)
        assert est[dst] == pytest.approx(expect, rel=0.1), (dst, est, row)
    assert est["r0"] == 0.0
    costs = {"r0": 3.0, "r1": 1.0, "r2": 3.0}
    mine = {r: _score(est[r]) for r in costs}
    totals = {v["cluster_id"]: v["total"] for v in doc["verdicts"]}
    assert totals == pytest.approx(mine, abs=0.5)
    assert doc["cluster"] == max(mine, key=lambda r: mine[r])
    final = _until(
        "the run to finish",
        lambda: (r := sdk.run(run["id"]))["state"] in ("succeeded", "failed") and r,
        timeout=120,
    )
    assert final["state"] == "succeeded", final["reason"]

    # The estimate uses the link as measured when the copy is asked for: compare it with
    # the measurements just before and after that, not with the one read minutes ago
    # (under CI load the probes' throughput drifted 19 % over the run: a red CI).
    before = _links(sdk)[("r0", "r1")]["throughput_mbps"]
    t = data.replicate(sdk, "corpus", "r1")
    after = _links(sdk)[("r0", "r1")]["throughput_mbps"]
    seconds = sorted(SIZE / (mbps * 1e6 / 8) for mbps in (before, after))
    assert seconds[0] * 0.9 <= t["estimate_s"] <= seconds[1] * 1.1, (t, before, after)
    done = data.wait_transfer(sdk, t["id"], timeout_s=120)
    assert done["state"] == "done", done
    took = done["ended_at"] - done["started_at"]
    mbps = done["rate_bps"] * 8 / 1e6
    print(f"200 MB over 100 Mbit/s: {mbps:.1f} Mbit/s, {took:.1f} s (estimate {t['estimate_s']} s)")
    assert mbps >= 85.0
    assert took == pytest.approx(t["estimate_s"], rel=0.25)
    reps = {r["region"]: r["state"] for r in data.replicas(sdk, "corpus")}
    assert reps == {"r0": "complete", "r1": "complete"}
    copy = Path(lab["home"]) / "lab" / "regions" / "r1" / "data" / "datasets" / "corpus" / "v1"
    assert (copy / "shard-0.bin").stat().st_size == SIZE


def _restarted(pidfile: Path, dead: int) -> bool:
    pid = int(pidfile.read_text()) if pidfile.exists() else dead
    return pid != dead and Path(f"/proc/{pid}").exists()


def _reports_since(sdk: client.Client, region: str, since: float) -> bool:
    try:
        clusters = sdk.clusters()
    except client.HubUnreachable:
        return False
    return any(c["id"] == region and (c["last_heartbeat"] or 0) > since for c in clusters)


def test_a_killed_agent_and_hub_come_back_by_themselves(
    lab: dict[str, Any], sdk: client.Client
) -> None:
    """The lab's supervisor starts a ``kill -9``ed agent and hub again (no ``tau lab up``);
    the region reports through the hub that came back, on the same URL."""
    home = Path(lab["home"]) / "lab"
    for pidfile in (
        home / "regions" / "r2" / "run" / "lab-agent-r2.pid",
        home / "hub" / "run" / "lab-hub.pid",
    ):
        dead = int(pidfile.read_text())
        os.kill(dead, signal.SIGKILL)
        _until(f"{pidfile.name} started again", functools.partial(_restarted, pidfile, dead), 60)
    since = time.time()
    _until("r2 to report again", lambda: _reports_since(sdk, "r2", since), 120)
    log = (home / "hub" / "logs" / "lab-supervisor.log").read_text()
    assert "lab-agent-r2 was not running; started it again" in log
    assert "lab-hub was not running; started it again" in log
