"""Soak: 16 runs across two real Ray regions while agents restart and partitions come
and go (shorter and longer than the grace period). Never a duplicate execution, never
a lost checkpoint, every run's record whole.

As regions on separate machines (issue 14): each region's agent has its own root (jobs
write to its scratch there), the record store is an S3 bucket on the real SeaweedFS
server, and the hub's home never holds job output; the checks read the bucket.

Duplicate execution means two attempts of one run both taking effect: two successes,
a success reported by a revoked attempt, or a checkpoint committed by an attempt that
was no longer authoritative (checkpoint markers must carry non-decreasing fencing
tokens in step order). Lost checkpoint means a run whose final checkpoint is missing,
or a retry that did not resume from the checkpoint its predecessor committed.
"""

from __future__ import annotations

import itertools
import json
import random
import secrets
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from taugrid.backends.ray import ray_local
from taugrid.store import db
from tests import weed_s3 as ws
from tests.hub import region as rg
from tests.hub.harness import HubServer, make_hub
from tests.hub.test_failover_s3 import creds, platform_yaml  # noqa: F401 (fixture)

# Every run is a Ray job (seconds of start-up CPU each): 16 runs keep the chaos (a tick
# every 2 s, agents restarted or cut off for 1-6 s against a 4 s grace) on every run's
# lifetime and take a few minutes on a 2-core machine; 50 took 15 (docs/BENCHMARKS.md).
pytestmark = [pytest.mark.ray, pytest.mark.slow, pytest.mark.long, pytest.mark.timeout(900)]

RUNS = 16
CHAOS_S = 240.0
STEPS = 30


@pytest.fixture(scope="module")
def clusters(
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[dict[str, ray_local.LocalRayCluster]]:
    regions = rg.start_regions(
        {"east": "127.0.0.52", "west": "127.0.0.53"}, tmp_path_factory.mktemp("regions")
    )
    yield regions
    rg.stop_regions(regions)


class Chaos:
    """Restarts agents and cuts them off for random spans, seeded."""

    def __init__(
        self,
        hub: HubServer,
        clusters: dict[str, ray_local.LocalRayCluster],
        tmp: Path,
        chaos_s: float,
    ) -> None:
        self.hub, self.clusters, self.tmp = hub, clusters, tmp
        self.until = time.time() + chaos_s  # then it only ends the partitions it made
        self.rng = random.Random(7)
        self.agents = {name: self._start(name) for name in clusters}
        self.down_until: dict[str, float] = {}
        self.log: list[str] = []

    def _start(self, name: str) -> rg.AgentThread:
        return rg.AgentThread(
            self.hub, self.clusters[name], self.tmp / f"root-{name}", cluster_id=name
        ).start()

    def tick(self) -> None:
        now = time.time()
        for name, until in list(self.down_until.items()):
            if now >= until:
                self.agents[name] = self._start(name)
                del self.down_until[name]
        if now >= self.until:
            return
        name = self.rng.choice(sorted(self.clusters))
        if name in self.down_until or self.rng.random() < 0.5:
            return
        self.agents[name].stop()
        if self.rng.random() < 0.4:
            self.agents[name] = self._start(name)  # an agent restart
            self.log.append(f"restart {name}")
        else:
            span = self.rng.choice([1.0, 2.5, 6.0])  # lease 1.5 s, grace 4 s
            self.down_until[name] = now + span
            self.log.append(f"partition {name} {span}s")

    def stop(self) -> None:
        for name, agent in self.agents.items():
            if name not in self.down_until:
                agent.stop()


def _check_run(run: dict[str, Any], events: list[dict[str, Any]], fs: Any) -> None:
    attempts = run["attempts"]
    assert run["state"] == "succeeded", (run["id"], run["reason"])
    history = [
        (e["kind"], {k: v for k, v in e["payload"].items() if k in ("token", "state", "attempt")})
        for e in events
        if e["kind"].startswith(("attempt_", "retry", "fenced", "cluster"))
    ]  # what a failure needs to be understood from CI's output alone
    states = [(a["token"], a["cluster_id"], a["state"], a["failure_kind"]) for a in attempts]
    assert [a["state"] for a in attempts].count("succeeded") == 1, (states, history)
    revoked = {a["token"] for a in attempts if a["revoked"]}
    assert not [
        e
        for e in events
        if e["kind"] == "attempt_succeeded" and e["payload"].get("token") in revoked
    ]
    record = str(run["record_dir"]).removeprefix("s3://")
    markers = sorted(fs.glob(f"{record}/checkpoints/step-*/_CHECKPOINT.json"))
    tokens = [json.loads(fs.cat_file(m))["fencing_token"] for m in markers]
    assert tokens == sorted(tokens), f"a fenced attempt committed a checkpoint: {tokens}"
    assert markers and markers[-1].split("/")[-2] == f"step-{STEPS:08d}"
    assert fs.exists(f"{record}/COMPLETE"), f"{run['id']}: record not complete"
    for prev, nxt in itertools.pairwise(attempts):
        if prev["checkpoint_step"]:
            assert nxt["resumed_from"], (run["id"], "retry did not resume from a checkpoint")


@pytest.mark.long
def test_sixteen_runs_survive_restarts_and_partitions(
    creds: ws.WeedS3,  # noqa: F811 (the fixture imported above)
    tmp_path: Path,
    clusters: dict[str, ray_local.LocalRayCluster],
) -> None:
    prefix = f"failover/soak-{secrets.token_hex(4)}"
    (tmp_path / "platform.yaml").write_text(platform_yaml(creds, f"s3://{prefix}"))
    engine = db.open_engine(f"sqlite:///{tmp_path / 'hub.db'}")
    hub = HubServer(
        make_hub(engine, tmp_path / "home", tmp_path / "platform.yaml", lease_s=1.5, grace_s=4.0)
    )
    hub.start()
    # Faults for CHAOS_S, then none: with faults until every run finished, a loaded
    # machine (a cold CI's builds beside) started jobs slower than the faults ended them,
    # and four runs were still queued at the deadline
    chaos = Chaos(hub, clusters, tmp_path, CHAOS_S)
    try:
        with hub.http() as c:
            text = rg.quickstart_yaml(
                f"--steps {STEPS} --checkpoint-every 10 --step-sleep 0.1", retries=20
            )
            ids = [
                rg.submit_run(c, text.replace("name: quickstart", f"name: soak-{i}"))["id"]
                for i in range(RUNS)
            ]
            deadline = time.time() + 780
            while True:
                runs = [c.get(f"/v1/runs/{i}").json() for i in ids]
                if all(rg.finished(r) for r in runs):
                    break
                assert time.time() < deadline, (
                    f"not finished: {[r['state'] for r in runs]} after {chaos.log}"
                )
                chaos.tick()
                time.sleep(2.0)
            fs = creds.filesystem()
            for run in runs:
                _check_run(run, c.get(f"/v1/runs/{run['id']}/events").json(), fs)
        # each region wrote under its own root; the hub's home holds no job output
        assert not list((tmp_path / "home").rglob("metrics.jsonl"))
        assert not list((tmp_path / "home").rglob("_CHECKPOINT.json"))
        moved = sum(1 for r in runs if len(r["attempts"]) > 1)
        print(f"chaos: {chaos.log}; runs with more than one attempt: {moved}")
        assert any(x.startswith("partition") for x in chaos.log) and any(
            x.startswith("restart") for x in chaos.log
        )
    finally:
        chaos.stop()
        hub.stop()
        engine.dispose()
