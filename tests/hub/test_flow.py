"""End to end through the real pieces: hub server, agent, Ray cluster, the quickstart.

One shared 2-node Ray cluster (127.0.0.11-12, 4 emulated A100-80G each) per module;
a fresh hub (SQLite; the happy path also on PostgreSQL) and agent per test.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa

from taugrid.backends.ray import ray_local
from taugrid.platform import load as platform_load
from taugrid.portal import session
from taugrid.store import db
from tests import mlflow_server
from tests.hub import region as rg
from tests.hub.harness import HubServer, make_hub
from tests.sdk import tensorboard_events

pytestmark = [pytest.mark.ray, pytest.mark.slow]


@pytest.fixture(scope="module")
def ray_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ray_local.LocalRayCluster]:
    cluster = rg.start_ray(["127.0.0.11", "127.0.0.12"], tmp_path_factory.mktemp("ray"))
    yield cluster
    cluster.stop()


@pytest.fixture
def sqlite_engine(tmp_path: Path) -> Iterator[sa.Engine]:
    eng = db.open_engine(f"sqlite:///{tmp_path / 'hub.db'}")
    yield eng
    eng.dispose()


def _platform(
    server_engine: sa.Engine, tmp_path: Path, cluster: ray_local.LocalRayCluster, **cfg: Any
) -> Iterator[tuple[HubServer, rg.AgentThread]]:
    server = HubServer(make_hub(server_engine, tmp_path / "home", **cfg)).start()
    agent = rg.AgentThread(server, cluster, tmp_path / "agent").start()
    try:
        yield server, agent
    finally:
        agent.stop()
        server.stop()


@pytest.fixture
def platform(
    sqlite_engine: sa.Engine, tmp_path: Path, ray_cluster: ray_local.LocalRayCluster
) -> Iterator[tuple[HubServer, rg.AgentThread]]:
    yield from _platform(sqlite_engine, tmp_path, ray_cluster)


def test_quickstart_runs_to_completion_on_both_databases(
    engine: sa.Engine, tmp_path: Path, ray_cluster: ray_local.LocalRayCluster
) -> None:
    for server, _agent in _platform(engine, tmp_path, ray_cluster):
        with server.http() as c:
            run = rg.submit_run(c, rg.quickstart_yaml() + "metrics:\n  tensorboard: true\n")
            done = rg.wait_run(c, run["id"], rg.finished)
            metrics = c.get(f"/v1/runs/{run['id']}/metrics").json()
            logs = c.get(f"/v1/runs/{run['id']}/logs").json()["text"]
        assert done["state"] == "succeeded", done["reason"]
        assert all(s in ("done", "skipped") for s in rg.phases(done).values()), rg.phases(done)
        assert rg.phases(done)["artifacts_saved"] == "done"
        losses = [m["value"] for m in metrics if m["name"] == "loss"]
        assert len(losses) >= 50 and losses[-1] < losses[0]
        assert "val_acc" in logs or "step" in logs
        record = Path(done["record_dir"])
        for part in (
            "run.json",
            "tau.yaml",
            "events.jsonl",
            "COMPLETE",
            "artifacts/model.npz",
            "metrics/metrics.jsonl",
            "logs/driver.log",
            "rendered/ray-job-submission-a1.json",
        ):
            assert (record / part).exists(), part
        sub = json.loads((record / "rendered/ray-job-submission-a1.json").read_text())
        assert (
            sub["entrypoint_num_gpus"] == 1
            and sub["runtime_env"]["env_vars"]["TAU_RUN_ID"] == run["id"]
        )
        assert json.loads((record / "run.json").read_text())["state"] == "succeeded"
        # metrics.tensorboard: the same losses as TensorBoard scalars among the artifacts
        scalars = tensorboard_events.scalars(record / "artifacts" / "tensorboard")
        assert [v for tag, _, v in scalars if tag == "loss"] == pytest.approx(losses)


def test_failing_entrypoint_reports_exit_code_and_log_tail(
    platform: tuple[HubServer, rg.AgentThread],
) -> None:
    server, _ = platform
    text = rg.quickstart_yaml("--steps 30 --fail-at-step 5 --fail-attempts 9", retries=0)
    with server.http() as c:
        run = rg.submit_run(c, text)
        done = rg.wait_run(c, run["id"], rg.finished)
    assert done["state"] == "failed"
    completed = next(p for p in done["phases"] if p["phase"] == "completed")
    assert completed["status"] == "failed" and "exit code 3" in completed["reason"]
    assert done["attempts"][0]["exit_code"] == 3


def test_exit_nonzero_is_retried_and_resumes_from_checkpoint(
    platform: tuple[HubServer, rg.AgentThread],
) -> None:
    server, _ = platform
    text = rg.quickstart_yaml(
        "--steps 60 --checkpoint-every 20 --fail-at-step 45 --fail-attempts 1"
    )
    with server.http() as c:
        run = rg.submit_run(c, text)
        done = rg.wait_run(c, run["id"], rg.finished, timeout=150)
        metrics = c.get(f"/v1/runs/{run['id']}/metrics").json()
    assert done["state"] == "succeeded", done["reason"]
    first, second = done["attempts"]
    assert first["state"] == "failed" and first["checkpoint_step"] == 40
    assert second["resumed_from"] and second["resumed_from"].endswith("step-00000040")
    steps2 = [m["step"] for m in metrics if m["attempt"] == 2 and m["name"] == "loss"]
    assert min(steps2) == 41  # continued after the checkpoint, not from step 0


def test_cancel_while_running_releases_quota_and_gpus(
    platform: tuple[HubServer, rg.AgentThread],
) -> None:
    server, _ = platform
    with server.http() as c:
        run = rg.submit_run(c, rg.quickstart_yaml("--steps 400 --step-sleep 0.2"))
        rg.wait_run(c, run["id"], lambda r: r["state"] == "running")
        c.post(f"/v1/runs/{run['id']}/cancel")
        done = rg.wait_run(c, run["id"], rg.finished)
        quota = server.hub.runs.quota_usage()
    assert done["state"] == "cancelled"
    assert done["attempts"][0]["state"] == "stopped" and done["attempts"][0]["released"]
    assert rg.phases(done)["artifacts_saved"] == "skipped"  # never left pending
    assert quota == {}


def test_hub_restart_while_running_keeps_the_run(
    sqlite_engine: sa.Engine, tmp_path: Path, ray_cluster: ray_local.LocalRayCluster
) -> None:
    server = HubServer(make_hub(sqlite_engine, tmp_path / "home")).start()
    agent = rg.AgentThread(server, ray_cluster, tmp_path / "agent").start()
    try:
        with server.http() as c:
            run = rg.submit_run(c, rg.quickstart_yaml("--steps 60 --step-sleep 0.1"))
            rg.wait_run(c, run["id"], lambda r: r["state"] == "running")
        server.stop()  # the hub goes away mid-run; the agent keeps the attempt
        server2 = HubServer(make_hub(sqlite_engine, tmp_path / "home"), port=server.port).start()
        with server2.http(server.admin_token) as c:
            done = rg.wait_run(c, run["id"], rg.finished)
        assert done["state"] == "succeeded" and len(done["attempts"]) == 1
        server2.stop()
    finally:
        agent.stop()


def test_ray_train_ddp_runs_two_workers(platform: tuple[HubServer, rg.AgentThread]) -> None:
    server, _ = platform
    ddp = rg.QUICKSTART.parent / "ray-train-ddp"
    text = (ddp / "tau.yaml").read_text().replace('"200"', '"40"').replace('"50"', '"20"')
    with server.http() as c:
        run = rg.submit_run(c, text, ddp.parent)
        done = rg.wait_run(c, run["id"], rg.finished, timeout=180)
        logs = c.get(f"/v1/runs/{run['id']}/logs").json()["text"]
    assert done["state"] == "succeeded", done["reason"] + logs[-2000:]
    assert '"backend": "ray-train"' in logs
    assert rg.phases(done)["artifacts_saved"] == "done"


def test_agent_restart_reattaches_without_duplicates(
    sqlite_engine: sa.Engine, tmp_path: Path, ray_cluster: ray_local.LocalRayCluster
) -> None:
    server = HubServer(make_hub(sqlite_engine, tmp_path / "home")).start()
    agent = rg.AgentThread(server, ray_cluster, tmp_path / "agent").start()
    try:
        with server.http() as c:
            run = rg.submit_run(c, rg.quickstart_yaml("--steps 80 --step-sleep 0.05"))
            rg.wait_run(
                c, run["id"], lambda r: r["state"] == "running" and r["attempts"][0]["last_step"]
            )
            agent.stop()  # the agent process dies; its Ray job keeps running
            agent = rg.AgentThread(server, ray_cluster, tmp_path / "agent").start()
            done = rg.wait_run(c, run["id"], rg.finished)
            metrics = c.get(f"/v1/runs/{run['id']}/metrics", params={"name": "loss"}).json()
            logs = c.get(f"/v1/runs/{run['id']}/logs").json()["text"]
        assert done["state"] == "succeeded" and len(done["attempts"]) == 1
        assert sorted(m["step"] for m in metrics) == list(range(1, 81))
        assert logs.count("Running entrypoint") == 1
    finally:
        agent.stop()
        server.stop()


def test_resume_a_failed_run_from_its_checkpoint(
    platform: tuple[HubServer, rg.AgentThread],
) -> None:
    server, _ = platform
    text = rg.quickstart_yaml(
        "--steps 60 --checkpoint-every 20 --fail-at-step 45 --fail-attempts 1", retries=0
    )
    with server.http() as c:
        run = rg.submit_run(c, text)
        failed = rg.wait_run(c, run["id"], rg.finished)
        assert failed["state"] == "failed"
        r = c.post(f"/v1/runs/{run['id']}/resume")
        assert r.status_code == 200, r.text
        done = rg.wait_run(c, run["id"], rg.finished)
        metrics = c.get(f"/v1/runs/{run['id']}/metrics", params={"name": "loss"}).json()
    assert done["state"] == "succeeded" and len(done["attempts"]) == 2
    assert done["attempts"][1]["resumed_from"].endswith("step-00000040")
    assert min(m["step"] for m in metrics if m["attempt"] == 2) == 41


PREEMPT_PLATFORM = """\
schema_version: 1
gpu_types: [{name: A100-80G}]
regions:
  - name: local
    clusters:
      - name: local
        emulated_gpus: true
        node_pools: [{name: a, gpu_model: A100-80G, gpus_per_node: 4, cpus_per_node: 16,
                      memory_per_node: 128Gi, nodes: 2}]
priority_classes: [{name: low, value: 100}, {name: high, value: 10000}]
profiles: [{name: default}]
teams: [{name: research, quotas: [{gpu_model: A100-80G, nominal: 4}]}]
workspaces: [{name: default, team: research, defaults: {priority: low, profile: default}}]
default_workspace: default
"""


def test_higher_priority_preempts_and_the_victim_resumes(
    sqlite_engine: sa.Engine, tmp_path: Path, ray_cluster: ray_local.LocalRayCluster
) -> None:
    (tmp_path / "platform.yaml").write_text(PREEMPT_PLATFORM)
    for server, _agent in _platform(
        sqlite_engine, tmp_path, ray_cluster, platform_file=tmp_path / "platform.yaml"
    ):
        low_yaml = rg.quickstart_yaml(
            "--steps 150 --checkpoint-every 20 --step-sleep 0.1", name="low"
        )
        low_yaml = low_yaml.replace("gpus: 1", "gpus: 4")
        high_yaml = rg.quickstart_yaml("--steps 30", name="high").replace("gpus: 1", "gpus: 4")
        high_yaml = high_yaml.replace("compute:", "policy:\n  priority: high\ncompute:")
        with server.http() as c:
            low = rg.submit_run(c, low_yaml)
            rg.wait_run(
                c,
                low["id"],
                lambda r: (
                    r["state"] == "running" and (r["attempts"][0]["checkpoint_step"] or 0) >= 20
                ),
            )
            high = rg.submit_run(c, high_yaml)
            high_done = rg.wait_run(c, high["id"], rg.finished, timeout=120)
            low_done = rg.wait_run(c, low["id"], rg.finished, timeout=180)
            events = c.get(f"/v1/runs/{low['id']}/events").json()
        assert high_done["state"] == "succeeded" and low_done["state"] == "succeeded"
        first = low_done["attempts"][0]
        assert first["failure_kind"] == "preemption" and "Preempted" in first["reason"]
        assert low_done["attempts"][1]["resumed_from"]
        assert any(e["kind"] == "preempting" for e in events)


SECRET = "hf_flow-s3cr3t-9f8e7d6c5b4a"
SECRET_JOB = """\
import hashlib, os, sys
value = os.environ.get("HF_TOKEN", "")
print("HF_TOKEN sha256", hashlib.sha256(value.encode()).hexdigest(), flush=True)
sys.exit(0 if value else 4)
"""
SECRET_YAML = """\
schema_version: 1
name: {name}
run:
  entrypoint: job.py
compute: {{gpus: 1, workers: 1, cpus: 1, memory: 1Gi}}
resilience: {{max_retries: 0}}
runtime:
  secrets:
    - {{name: hf, key: token, env: HF_TOKEN}}
"""


def _secret_job(tmp_path: Path) -> Path:
    code = tmp_path / "code"
    code.mkdir()
    (code / "job.py").write_text(SECRET_JOB)
    return code


def _files_holding(root: Path, value: str) -> list[str]:
    """Files under ``root`` holding ``value``; one removed while this looks (the agent
    cleans an ended attempt's scratch meanwhile, CI) holds nothing any more."""
    found = []
    for folder, _, names in os.walk(root):  # a folder gone meanwhile is skipped
        for name in names:
            path = Path(folder, name)
            with contextlib.suppress(FileNotFoundError):
                if path.is_file() and value.encode() in path.read_bytes():
                    found.append(str(path))
    return found


def test_a_secret_reaches_the_job_and_nothing_else(
    platform: tuple[HubServer, rg.AgentThread], tmp_path: Path
) -> None:
    """The job gets the value (it prints only its hash); the record, the agent's state,
    the hub's home and database, the run's JSON, events, logs and portal page do not."""
    server, _ = platform
    code = _secret_job(tmp_path)
    with server.http() as c:
        put = c.put("/v1/workspaces/default/secrets/hf", json={"data": {"token": SECRET}})
        assert put.status_code == 200, put.text
        run = rg.submit_run(c, SECRET_YAML.format(name="with-secret"), code)
        done = rg.wait_run(c, run["id"], rg.finished)
        logs = c.get(f"/v1/runs/{run['id']}/logs").json()["text"]
        seen = [c.get(f"/v1/runs/{run['id']}{p}").text for p in ("", "/events", "/logs")]
        c.cookies.set(session.COOKIE, session.cookie_value(server.admin_token), path="/ui")
        page = c.get(f"/ui/runs/{run['id']}")
    assert done["state"] == "succeeded", done["reason"]
    assert hashlib.sha256(SECRET.encode()).hexdigest() in logs
    assert page.status_code == 200 and run["id"] in page.text
    assert not any(SECRET in text for text in [*seen, page.text])
    for root in (Path(done["record_dir"]), tmp_path / "agent", tmp_path / "home"):
        assert _files_holding(root, SECRET) == [], root
    assert _files_holding(tmp_path, SECRET) == []  # hub.db too: sealed


def test_a_secret_deleted_before_its_run_starts_fails_the_run_with_the_reason(
    sqlite_engine: sa.Engine, tmp_path: Path, ray_cluster: ray_local.LocalRayCluster
) -> None:
    server = HubServer(make_hub(sqlite_engine, tmp_path / "home")).start()
    agent: rg.AgentThread | None = None
    try:
        with server.http() as c:
            put = c.put("/v1/workspaces/default/secrets/hf", json={"data": {"token": SECRET}})
            assert put.status_code == 200, put.text
            run = rg.submit_run(c, SECRET_YAML.format(name="deleted"), _secret_job(tmp_path))
            assert c.delete("/v1/workspaces/default/secrets/hf").status_code == 204
            agent = rg.AgentThread(server, ray_cluster, tmp_path / "agent").start()
            done = rg.wait_run(c, run["id"], rg.finished)
    finally:
        if agent is not None:
            agent.stop()
        server.stop()
    assert done["state"] == "failed"
    assert "secret hf (key token) no longer exists" in done["attempts"][0]["reason"]


def test_a_sweep_of_twelve_trials_under_a_quota_of_two_stops_laggards_and_registers_the_best(
    sqlite_engine: sa.Engine, tmp_path: Path, ray_cluster: ray_local.LocalRayCluster
) -> None:
    """``tau sweep submit`` of examples/quickstart/sweep.yaml (12 learning rates, the
    median rule, model ``digits-mlp``) with the workspace's quota at 2 GPUs: every trial
    is a Ray job, never more than 2 run at once, the diverging and the barely-moving
    learning rates are stopped early, and the best trial's model is registered."""
    platform_file = tmp_path / "platform.yaml"
    text = platform_load.default_platform_text()
    platform_file.write_text(text.replace("nominal: 8", "nominal: 2"))
    server = HubServer(make_hub(sqlite_engine, tmp_path / "home", platform_file)).start()
    agent = rg.AgentThread(server, ray_cluster, tmp_path / "agent").start()
    try:
        sub = server.tau("sweep", "submit", "-c", "sweep.yaml", "-o", "json", cwd=rg.QUICKSTART)
        assert sub.returncode == 0, sub.stderr + sub.stdout
        sweep_id = json.loads(sub.stdout)["id"]
        with server.http() as c:
            deadline = time.time() + 420
            while (sw := c.get(f"/v1/sweeps/{sweep_id}").json())["state"] == "running":
                assert time.time() < deadline, sw
                time.sleep(1)
            attempts = [
                a for t in sw["trials"] for a in c.get(f"/v1/runs/{t['run_id']}").json()["attempts"]
            ]
        board = server.tau("sweep", "status", sweep_id)
    finally:
        agent.stop()
        server.stop()
    assert sw["state"] == "succeeded" and sw["submitted"] == 12, sw["reason"]
    assert _most_at_once(attempts) <= 2, attempts
    stopped = {t["params"]["lr"] for t in sw["trials"] if t["stopped"]}
    assert {0.0001, 10.0} <= stopped, sw["trials"]
    best = sw["trials"][0]
    assert best["state"] == "succeeded" and 0.1 <= best["params"]["lr"] <= 0.4, best
    assert sw["model"]["name"] == "digits-mlp" and sw["model"]["run"] == best["run_id"], sw["model"]
    assert board.returncode == 0 and "stopped early" in board.stdout, board.stderr + board.stdout
    assert f"model: digits-mlp v{sw['model']['version']} from {best['run_id']}" in board.stdout


def _most_at_once(attempts: list[dict[str, Any]]) -> int:
    """The most attempts that held GPUs at the same moment (from their start and end)."""
    spans = [(a["created_at"], a["ended_at"] or time.time()) for a in attempts]
    return max(sum(1 for s, e in spans if s <= t < e) for t, _ in spans)


def test_a_tracked_workspace_mirrors_every_metric_to_mlflow_and_catches_up_after_an_outage(
    sqlite_engine: sa.Engine, tmp_path: Path, ray_cluster: ray_local.LocalRayCluster
) -> None:
    """Issue 35 item 4, the MLflow bridge, with a real MLflow server: the workspace names
    it in platform.yaml; the server is down while the run trains, so the run succeeds
    regardless and ``tau run history`` shows ``tracking_error``; once the server is back
    the hub catches up: one MLflow run tagged with the TauGrid run, every loss point the
    hub has at the same steps, the git-less run's end as FINISHED, and the link event."""
    with mlflow_server.mlflow_server(tmp_path / "mlflow") as tracker:
        platform_file = tmp_path / "platform.yaml"
        ws = "  - name: default\n    team: research\n"
        tracking = f"    tracking: {{mlflow_uri: '{tracker.url}', experiment: tau-test}}\n"
        text = platform_load.default_platform_text()
        assert ws in text
        platform_file.write_text(text.replace(ws, ws + tracking))
        server = HubServer(make_hub(sqlite_engine, tmp_path / "home", platform_file)).start()
        agent = rg.AgentThread(server, ray_cluster, tmp_path / "agent").start()
        try:
            tracker.stop()  # an outage: nothing may be lost
            with server.http() as c:
                run = rg.submit_run(c, rg.quickstart_yaml("--steps 40 --checkpoint-every 20"))
                done = rg.wait_run(c, run["id"], rg.finished)
                losses = [
                    (m["step"], m["value"])
                    for m in c.get(f"/v1/runs/{run['id']}/metrics").json()
                    if m["name"] == "loss"
                ]
                _wait_for_event(c, run["id"], "tracking_error")  # the bridge's next round
            history = server.tau("run", "history", run["id"], "-o", "json")
            assert done["state"] == "succeeded", done["reason"]
            kinds = [e["kind"] for e in json.loads(history.stdout)["events"]]
            assert "tracking_error" in kinds and "tracking_linked" not in kinds, kinds
            tracker.start()  # back: the hub catches up
            deadline = time.time() + 60
            while not (found := tracker.runs("tau-test")) or (
                found[0]["info"]["status"] != "FINISHED"
            ):
                assert time.time() < deadline, found
                time.sleep(0.5)
            with server.http() as c:
                events = c.get(f"/v1/runs/{run['id']}/events").json()
            (mirrored,) = found
            points = tracker.history(mirrored["info"]["run_id"], "loss")
        finally:
            agent.stop()
            server.stop()
    tags = {t["key"]: t["value"] for t in mirrored["data"]["tags"]}
    assert tags["taugrid.run_id"] == run["id"] and tags["taugrid.workspace"] == "default"
    assert len(losses) == 40
    assert [s for s, _ in points] == sorted(s for s, _ in losses)
    assert [v for _, v in points] == pytest.approx([v for _, v in sorted(losses)])
    link = next(e for e in events if e["kind"] == "tracking_linked")["payload"]
    assert link["mlflow_run_id"] == mirrored["info"]["run_id"]
    assert link["url"].startswith(tracker.url)


def _wait_for_event(c: Any, run_id: str, kind: str, timeout_s: float = 30) -> None:
    """Until the run has an event of ``kind`` (bounded)."""
    deadline = time.time() + timeout_s
    while kind not in [e["kind"] for e in c.get(f"/v1/runs/{run_id}/events").json()]:
        assert time.time() < deadline, f"no {kind} event in {timeout_s:g} s"
        time.sleep(0.3)
