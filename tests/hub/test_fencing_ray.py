"""Fencing and checkpoint adoption on real Ray, through a real hub and agent.

A dedicated cluster (a raylet gets killed): a CPU-only head on 127.0.0.140 and two
nodes of 4 emulated A100-80G on 127.0.0.141-142.

- Killing the raylet of the node running a job leaves its driver alive (the
  entrypoint runs in its own session). Nothing that stray driver writes after its
  attempt was declared ended may land; the agent kills it; the retry resumes from a
  checkpoint committed before the end, and its own log is kept.
- A job that writes framework-style checkpoint folders and never commits them fails;
  the retry resumes from the latest of them.
"""

from __future__ import annotations

import json
import os
import signal
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from taugrid.backends.ray import _procs, ray_local
from taugrid.hub.runs import runs
from tests.hub import region as rg
from tests.hub.harness import HubServer

pytestmark = [pytest.mark.ray, pytest.mark.slow]

IPS = ["127.0.0.140", "127.0.0.141", "127.0.0.142"]

STRAY_JOB = """\
import json, os, time
from pathlib import Path
import taugrid as tau

probe = Path(os.environ["PROBE_DIR"])
me = tau.attempt()
(probe / f"pid-a{me}").write_text(str(os.getpid()))
ck = tau.latest_checkpoint()
start = tau.checkpoint_info(ck).step if ck else 0
print(f"attempt {me}: resuming from {ck.name if ck else 'the start'}", flush=True)
for step in range(start + 1, 301):
    writes = [lambda: tau.log({"loss": 1.0 / step}, step=step)]
    if step % 10 == 0:
        def ckpt(step=step):
            with tau.checkpoint(step) as d:
                (d / "w.json").write_text(json.dumps({"step": step}))
        def art(step=step):
            (probe / "a.txt").write_text(str(step))
            tau.save_artifact(probe / "a.txt", f"progress-a{me}-s{step}.txt")
        writes += [ckpt, art]
    for write in writes:
        try:
            write()
        except tau.FencedError:  # a stubborn process: it keeps trying
            pass
    (probe / f"alive-a{me}").write_text(str(time.time()))
    if me == 1:
        time.sleep(0.1)
print(f"attempt {me}: done", flush=True)
"""

FRAMEWORK_JOB = """\
import json, os, sys
from pathlib import Path
import taugrid as tau

root = Path(os.environ["CHECKPOINT_PATH"])
ck = tau.latest_checkpoint()
if ck is None:
    d = tau.checkpoint_dir()
    for step in (100, 200):
        (d / f"step-{step}").mkdir()
        (d / f"step-{step}" / "state.json").write_text(json.dumps({"step": step}))
    (root / "checkpoint-300").mkdir()
    (root / "checkpoint-300" / "state.json").write_text(json.dumps({"step": 300}))
    (root / "epoch=1-step=250.ckpt").write_text(json.dumps({"step": 250}))
    print("attempt 1: crashing without committing", flush=True)
    sys.exit(1)
state = json.loads((ck / "state.json").read_text())
print(f"attempt {tau.attempt()}: resumed from {ck.name} at step {state['step']}", flush=True)
"""


def _yaml(name: str, probe: Path | None = None) -> str:
    env = f"runtime:\n  env:\n    PROBE_DIR: '{probe}'\n" if probe else ""
    return f"""\
schema_version: 1
name: {name}
run:
  entrypoint: job.py
compute:
  gpus: 1
  cpus: 1
  memory: 1Gi
resilience:
  max_retries: 1
  retry_on: [node_failure, exit_nonzero]
  backoff:
    initial: 5s
{env}""".replace("'", '"')


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ray_local.LocalRayCluster]:
    c = rg.start_cpu_head(IPS, tmp_path_factory.mktemp("ray-fencing"))
    yield c
    c.stop()


@pytest.fixture
def platform(tmp_path: Path, cluster: ray_local.LocalRayCluster) -> Iterator[HubServer]:
    with rg.hub_and_agent(tmp_path, cluster) as server:
        yield server


def _code(tmp_path: Path, script: str) -> Path:
    code = tmp_path / "code"
    code.mkdir()
    (code / "job.py").write_text(script)
    return code


def _kill_raylet(cluster: ray_local.LocalRayCluster, node_id: str) -> None:
    """SIGKILL only the raylet of ``node_id``: the job's driver there keeps running."""
    backend = cluster.backend()
    try:
        ip = next(n.ip for n in backend.inventory().nodes if n.node_id == node_id)
    finally:
        backend.close()
    pids = []
    for entry in Path("/proc").iterdir():
        try:
            argv = (entry / "cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        if argv[0].endswith(b"/raylet") and f"--node_ip_address={ip}".encode() in argv:
            pids.append(int(entry.name))
    assert len(pids) == 1, f"raylet of {ip}: {pids}"
    os.kill(pids[0], signal.SIGKILL)


def _record_dir(platform: HubServer, run: dict[str, Any]) -> Path:
    row = platform.hub.runs.get_run(run["id"])
    assert row is not None
    path = runs.record_of(platform.hub, row).dir
    assert path is not None
    return path


def _jsonl(path: Path) -> list[dict[str, Any]]:
    return [json.loads(x) for x in path.read_text().splitlines()] if path.exists() else []


def _running_with_checkpoint(run: dict[str, Any]) -> bool:
    a = run["attempts"][-1] if run["attempts"] else None
    return bool(a and a["state"] == "running" and a["nodes"] and (a["checkpoint_step"] or 0) >= 20)


def test_a_stray_driver_cannot_write_after_its_attempt_ended(
    platform: HubServer, cluster: ray_local.LocalRayCluster, tmp_path: Path
) -> None:
    probe = tmp_path / "probe"
    probe.mkdir()
    with platform.http() as c:
        run = rg.submit_run(c, _yaml("stray", probe), _code(tmp_path, STRAY_JOB))
        live = rg.wait_run(c, run["id"], _running_with_checkpoint, timeout=180)
        victim = live["attempts"][-1]["nodes"][0]
        killed_at = time.time()
        _kill_raylet(cluster, victim)
        done = rg.wait_run(c, run["id"], rg.finished, timeout=240)
        log = c.get(f"/v1/runs/{run['id']}/logs").json()["text"]
    assert done["state"] == "succeeded", done["reason"]
    first, second = done["attempts"]
    assert first["failure_kind"] == "node_failure", first["reason"]
    assert victim not in second["nodes"]
    ended = float(first["ended_at"])
    # The driver outlived its raylet (the scenario), and the agent killed it.
    assert float((probe / "alive-a1").read_text()) > killed_at + 1.0
    assert not _procs.alive(int((probe / "pid-a1").read_text()))
    # None of its writes after the end landed: metrics, checkpoints, artifacts.
    rec = _record_dir(platform, done)
    late = [m for m in _jsonl(rec / "metrics" / "metrics.jsonl") if m["attempt"] == 1]
    assert late and max(m["wall_time"] for m in late) <= ended
    markers = [json.loads(p.read_text()) for p in rec.glob("checkpoints/step-*/_CHECKPOINT.json")]
    assert all(m["created_at"] <= ended for m in markers if m["attempt"] == 1)
    manifest = json.loads((rec / "artifacts" / "MANIFEST.json").read_text())["artifacts"]
    assert all(e["saved_at"] <= ended for e in manifest.values() if e["attempt"] == 1)
    # The retry resumed from a checkpoint attempt 1 committed before it was ended.
    resumed = json.loads(
        (rec / "checkpoints" / second["resumed_from"] / "_CHECKPOINT.json").read_text()
    )
    assert resumed["attempt"] == 1 and resumed["created_at"] <= ended
    assert f"attempt 2: resuming from {second['resumed_from']}" in log
    assert "attempt 2: done" in log


def test_uncommitted_framework_checkpoints_are_resumed_from(
    platform: HubServer, tmp_path: Path
) -> None:
    with platform.http() as c:
        run = rg.submit_run(c, _yaml("framework"), _code(tmp_path, FRAMEWORK_JOB))
        done = rg.wait_run(c, run["id"], rg.finished, timeout=240)
        log = c.get(f"/v1/runs/{run['id']}/logs").json()["text"]
    assert done["state"] == "succeeded", done["reason"]
    first, second = done["attempts"]
    assert first["failure_kind"] == "exit_nonzero"
    assert second["resumed_from"] == "step-00000300"
    assert "attempt 2: resumed from step-00000300 at step 300" in log
