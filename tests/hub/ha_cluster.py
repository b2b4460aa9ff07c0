"""Builders for the leader-kill scenario: hub replica processes, a Ray region, clients.

``Replicas`` starts real hub daemons (``python -m taugrid.hub.server.daemon``) on one
PostgreSQL database, each its own process on its own port, so the leader can be killed
with SIGKILL. ``kill_leader_run`` is the whole scenario shared by the test
(``test_hub_kill_leader``) and the benchmark (``benchmarks/bench_hub_failover``):
concurrent clients submit ``n`` runs through the URL list, the leader is killed once
half were accepted, and every run executes on a real Ray region whose job appends its
run ID and fencing token to one file, so a run executed twice shows as two lines. Runs
retry a Ray failure (a loaded machine can kill Ray's node); a retried run is executed
once per attempt, so "executed twice" counts a token run twice or more executions
than the run had attempts.
"""

from __future__ import annotations

import collections
import contextlib
import dataclasses
import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import sqlalchemy as sa

from taugrid.agent import daemon as agent_daemon
from taugrid.sdk.client import client, submit
from tests.hub import agent_builders as ab
from tests.hub import pg_server, region
from tests.hub.harness import free_port

TRAIN = """\
import os
with open({path!r}, "a") as fh:
    fh.write(os.environ["TAU_RUN_ID"] + " " + os.environ["TAU_FENCING_TOKEN"] + "\\n")
"""
TAU_YAML = (
    ab.ONE_GPU_RUN
    + """\
resilience:
  max_retries: 5
  retry_on: [node_failure, lost_contact]
  backoff:
    initial: 2s
"""
)


class Replicas:
    """``count`` hub daemons on ``database_url``; ``url`` lists them all (comma-separated)."""

    def __init__(self, base: Path, host: str, database_url: str, count: int, lease_s: float):
        self.base, self.host, self.lease_s = base, host, lease_s
        self.database_url = database_url
        self.procs: dict[str, subprocess.Popen[bytes]] = {}
        self.homes: dict[str, Path] = {}
        for i in range(count):
            self._start(i)
        first = self.homes[next(iter(self.homes))]
        self.admin_token = json.loads((first / "credentials.json").read_text())["token"]
        self.url = ",".join(self.procs)

    def _start(self, i: int) -> None:
        home, port = self.base / f"replica{i}", free_port(self.host)
        home.mkdir(parents=True, exist_ok=True)
        url = f"http://{self.host}:{port}"
        env = {**os.environ, "TAU_DATABASE_URL": self.database_url, "TAU_HUB_EXTENSIONS": ""}
        env["TAU_DATA_ROOT"] = str(self.base / "data")  # records: shared by every replica
        cmd = [sys.executable, "-m", "taugrid.hub.server.daemon", "--home", str(home)]
        cmd += ["--host", self.host, "--port", str(port), "--leader-lease", str(self.lease_s)]
        log = (home / "hub.log").open("wb")
        self.procs[url] = subprocess.Popen(cmd, env=env, stdout=log, stderr=subprocess.STDOUT)
        self.homes[url] = home
        pg_server.wait_for(lambda: _healthy(url), 120, f"hub replica {url}")

    def agent_token(self, cluster: str = "local") -> str:
        home = self.homes[next(iter(self.homes))]
        return (home / "agents" / f"{cluster}.token").read_text().strip()

    def client(self) -> client.Client:
        return client.Client(client.HubConfig(self.url, self.admin_token), timeout_s=60)

    def status(self) -> dict[str, Any]:
        doc: dict[str, Any] = self.client().request("GET", "/v1/admin/hub")
        return doc

    def leader_url(self) -> str | None:
        url: str | None = self.status()["leader"].get("url")
        return url

    def kill(self, url: str) -> None:
        self.procs[url].send_signal(signal.SIGKILL)
        self.procs[url].wait(timeout=30)

    def stop(self) -> None:
        for proc in self.procs.values():
            if proc.poll() is None:
                proc.terminate()
        for proc in self.procs.values():
            try:
                proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                proc.kill()


def _healthy(url: str) -> bool:
    try:
        return httpx.get(f"{url}/healthz", timeout=2).status_code == 200
    except httpx.HTTPError:
        return False


@dataclasses.dataclass
class Outcome:
    """What the scenario counted; ``leaderless_s`` from the kill to the next takeover."""

    submitted: int
    accepted: list[str]
    refused: int
    stored: dict[str, int]
    executions: dict[str, list[str]]
    attempts: dict[str, int]
    states: dict[str, str]
    leaderless_s: float
    killed: str
    new_leader: str
    submit_s: float

    @property
    def lost(self) -> int:
        return sum(1 for r in self.accepted if r not in self.stored)

    @property
    def duplicated(self) -> int:
        return sum(n - 1 for n in self.stored.values() if n > 1)

    @property
    def executed_twice(self) -> int:
        return sum(
            1
            for run, tokens in self.executions.items()
            if len(set(tokens)) < len(tokens) or len(tokens) > self.attempts.get(run, 0)
        )


def _submitter(
    reps: Replicas, code: bytes, names: list[str], accepted: list[str], refused: list[str]
) -> None:
    cli = reps.client()
    for name in names:
        try:
            run = cli.submit(TAU_YAML.format(name=name), "tau.yaml", code)
        except client.HubUnreachable:
            refused.append(name)  # reset mid-request: maybe stored, never resent
            continue
        accepted.append(run["id"])


@contextlib.contextmanager
def ray_region(base: Path, ip: str, reps: Replicas) -> Iterator[None]:
    """One real Ray node (4 emulated GPUs) and the real agent loop syncing to ``reps``;
    dead Ray nodes are started again as the agent daemon does (a loaded machine)."""
    cluster = region.start_ray([ip], base / "ray")
    stop = threading.Event()
    watch = threading.Thread(target=agent_daemon._watch_ray, args=(cluster, stop), daemon=True)
    try:
        watch.start()
        agent = region.AgentThread(reps, cluster, base / "agent", sync_s=0.3)  # type: ignore[arg-type]
        agent.start()
        try:
            yield
        finally:
            agent.stop()
    finally:
        stop.set()
        watch.join(timeout=120)
        cluster.stop()


def kill_leader_run(
    reps: Replicas, base: Path, n: int, clients: int, timeout_s: float, run_budget_s: float = 0
) -> Outcome:
    """The scenario of the module docstring; waits (bounded) until every run ended, or
    with ``run_budget_s`` only that long (the benchmark: 1,000 runs take hours here)."""
    log = base / "executions.log"
    code_dir = base / "code"
    code_dir.mkdir(parents=True, exist_ok=True)
    (code_dir / "train.py").write_text(TRAIN.format(path=str(log)))
    code = submit.zip_dir(code_dir, [])
    names = [f"k{i:04d}" for i in range(n)]
    accepted: list[str] = []
    refused: list[str] = []
    threads = [
        threading.Thread(target=_submitter, args=(reps, code, names[k::clients], accepted, refused))
        for k in range(clients)
    ]
    started = time.time()
    for t in threads:
        t.start()
    pg_server.wait_for(lambda: len(accepted) >= n // 2, timeout_s, "half of the submissions")
    killed = reps.leader_url() or ""
    killed_at = time.time()
    reps.kill(killed)
    for t in threads:
        t.join(timeout=timeout_s)
    submit_s = time.time() - started
    cli = reps.client()
    if run_budget_s:
        time.sleep(run_budget_s)
    else:
        pg_server.wait_for(lambda: _all_ended(reps, accepted), timeout_s, "every run to end")
    takeover = _takeover_after(cli, killed_at)
    rows = _runs(reps)
    by_name = collections.Counter(r["name"] for r in rows)
    return Outcome(
        submitted=n,
        accepted=accepted,
        refused=len(refused),
        stored={r["id"]: by_name[r["name"]] for r in rows},
        executions=_executions(log),
        states={r["id"]: r["state"] for r in rows},
        attempts={r["id"]: r["attempts_used"] for r in rows},
        leaderless_s=takeover[0] - killed_at,
        killed=killed,
        new_leader=takeover[1],
        submit_s=submit_s,
    )


def _all_ended(reps: Replicas, ids: list[str]) -> bool:
    states = {r["id"]: r["state"] for r in _runs(reps)}
    return all(states.get(i) in ("succeeded", "failed", "cancelled") for i in ids)


def _takeover_after(cli: client.Client, t: float) -> tuple[float, str]:
    """Time and URL of the first ``hub_leader`` event after ``t`` (the takeover)."""
    events: list[dict[str, Any]] = cli.request("GET", "/v1/admin/hub")["takeovers"]
    for e in events:
        if e["time"] > t:
            return float(e["time"]), str(e["url"])
    raise AssertionError(f"no leader took over after the kill: {events}")


def _runs(reps: Replicas) -> list[dict[str, Any]]:
    """Every run in the database, read there (a duplicate: two IDs with one name)."""
    engine = sa.create_engine(reps.database_url)
    try:
        with engine.connect() as c:
            rows = c.execute(sa.text("SELECT id, name, state, attempts_used FROM runs"))
            return [dict(r._mapping) for r in rows]
    finally:
        engine.dispose()


def _executions(log: Path) -> dict[str, list[str]]:
    """Run ID → the fencing tokens it was executed with, one per execution."""
    words = log.read_text().split() if log.exists() else []
    out: dict[str, list[str]] = collections.defaultdict(list)
    for run, token in zip(words[0::2], words[1::2], strict=True):
        out[run].append(token)
    return dict(out)
