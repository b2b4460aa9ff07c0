"""Issue 14: a job's record uploads survive a real agent restart (SIGKILL mid-upload).

A real hub, a real Ray node (127.0.41.20), the real SeaweedFS S3 server as record store,
and the agent as its own process (``python -m taugrid.agent.daemon``, attached to the
Ray cluster). The job logs a metric every 0.2 s and commits one 256 MiB checkpoint at
step 10. While the agent uploads that checkpoint (some files in the bucket, no marker
yet) the test SIGKILLs the agent; the job keeps running. The bucket then holds a cut
checkpoint, which is never offered (no marker) while no agent runs. A new agent process
on the same root re-attaches to the running job (no second execution) and resumes:

- the cut checkpoint is uploaded again completely (marker last, every file with the
  sha256 its marker lists);
- ``metrics.jsonl`` in the store ends with every step exactly once, including the lines
  the job wrote while no agent ran;
- the run succeeds with one attempt and its record is ``COMPLETE``.
"""

from __future__ import annotations

import hashlib
import json
import os
import secrets
import signal
import subprocess
import sys
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

pytestmark = [pytest.mark.ray, pytest.mark.slow, pytest.mark.timeout(600)]

BUCKET = "restart"
IP = "127.0.41.20"
STEPS = 120
POOL = (
    "[{name: a, gpu_model: A100-80G, gpus_per_node: 4, cpus_per_node: 16, "
    "memory_per_node: 128Gi, nodes: 1}]"
)
RUN = """\
schema_version: 1
name: restart
run:
  entrypoint: job.py
compute: {gpus: 1, cpus: 1, memory: 1Gi}
"""
JOB = f"""\
import os, time

import taugrid as tau

for step in range(1, {STEPS} + 1):
    tau.log({{"loss": 1.0 / step}}, step=step)
    if step == 10:
        with tau.checkpoint(step) as d:
            for i in range(4):
                (d / f"shard-{{i}}.bin").write_bytes(os.urandom(64 << 20))
    time.sleep(0.2)
"""


def _platform(server: ws.WeedS3, prefix: str) -> str:
    return f"""\
schema_version: 1
gpu_types: [{{name: A100-80G}}]
regions:
  - name: local
    clusters: [{{name: local, emulated_gpus: true, node_pools: {POOL}}}]
priority_classes: [{{name: normal, value: 1000}}]
profiles: [{{name: default}}]
teams: [{{name: research, quotas: [{{gpu_model: A100-80G, nominal: 4}}]}}]
workspaces: [{{name: default, team: research, defaults: {{priority: normal, profile: default}}}}]
default_workspace: default
records:
  url: s3://{prefix}
  endpoint_url: {server.endpoint}
  region: us-east-1
  access_key_env: TAU_TEST_S3_KEY
  secret_key_env: TAU_TEST_S3_SECRET
"""


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ray_local.LocalRayCluster]:
    c = rg.start_ray([IP], tmp_path_factory.mktemp("ray"))
    yield c
    c.stop()


class AgentProcess:
    """``python -m taugrid.agent.daemon`` for cluster ``local`` rooted at ``home``."""

    def __init__(self, home: Path, hub: HubServer, platform: Path, dashboard: str) -> None:
        (home / "agents").mkdir(parents=True, exist_ok=True)
        (home / "agents" / "local.token").write_text(hub.agent_token("local"))
        self.argv = [sys.executable, "-m", "taugrid.agent.daemon", "--home", str(home)]
        self.argv += ["--hub", hub.url, "--cluster", "local", "--platform", str(platform)]
        self.argv += ["--ray-ip", IP, "--ray-dashboard", dashboard, "--sync", "0.3"]
        self.argv += ["--report", "1", "--no-prewarm"]
        self.env = dict(os.environ, TAU_HOME=str(home), TAU_TEST_S3_KEY=ws.KEY)
        self.env["TAU_TEST_S3_SECRET"] = ws.SECRET
        self.log = home / "agent.log"
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self) -> AgentProcess:
        with self.log.open("ab") as log:
            self.proc = subprocess.Popen(
                self.argv, env=self.env, stdout=log, stderr=subprocess.STDOUT,
                start_new_session=True,
            )  # fmt: skip
        return self

    def kill(self) -> None:
        """SIGKILL: no clean-up of any kind (the Ray job lives on)."""
        if self.proc is not None and self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGKILL)
        if self.proc is not None:
            self.proc.wait(30)

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(30)
            except subprocess.TimeoutExpired:
                self.kill()


def _sha256(fs: Any, path: str) -> str:
    h = hashlib.sha256()
    with fs.open(path, "rb", block_size=1 << 22) as fh:
        while block := fh.read(1 << 22):
            h.update(block)
    return h.hexdigest()


def _cut_checkpoint(fs: Any, ckpt: str, timeout: float = 240) -> list[str]:
    """Wait until some of the checkpoint's files are stored and its marker is not."""
    deadline = time.time() + timeout
    while time.time() < deadline:
        fs.invalidate_cache()
        names = [p.rsplit("/", 1)[1] for p in fs.glob(f"{ckpt}/*")]
        if "_CHECKPOINT.json" in names:
            raise AssertionError("the checkpoint was stored whole before the agent was cut")
        if names:
            return names
        time.sleep(0.1)
    raise AssertionError(f"no file of {ckpt} was uploaded in {timeout:.0f} s")


def test_uploads_resume_after_the_agent_is_killed_mid_checkpoint(
    weed_s3: ws.WeedS3,
    cluster: ray_local.LocalRayCluster,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    weed_s3.make_bucket(BUCKET)
    prefix = f"{BUCKET}/{secrets.token_hex(4)}"
    monkeypatch.setenv("TAU_TEST_S3_KEY", ws.KEY)
    monkeypatch.setenv("TAU_TEST_S3_SECRET", ws.SECRET)
    (tmp_path / "platform.yaml").write_text(_platform(weed_s3, prefix))
    engine = db.open_engine(f"sqlite:///{tmp_path / 'hub.db'}")
    server = HubServer(make_hub(engine, tmp_path / "home", tmp_path / "platform.yaml")).start()
    code = tmp_path / "code"
    code.mkdir()
    (code / "job.py").write_text(JOB)
    platform = tmp_path / "platform.yaml"
    agent = AgentProcess(tmp_path / "agent", server, platform, cluster.dashboard_url)
    fs = weed_s3.filesystem()
    try:
        agent.start()
        with server.http() as c:
            run = rg.submit_run(c, RUN, code)
            base = f"{prefix}/default/runs/{run['id']}"
            ckpt = f"{base}/checkpoints/step-00000010"
            stored = _cut_checkpoint(fs, ckpt)
            agent.kill()  # mid-upload: some files stored, no marker
            time.sleep(3)  # the job runs on alone; nothing completes the checkpoint
            fs.invalidate_cache()
            assert not fs.exists(f"{ckpt}/_CHECKPOINT.json"), stored
            agent.start()  # a new agent process on the same root re-attaches
            done = rg.wait_run(c, run["id"], rg.finished, timeout=300)
            logs = c.get(f"/v1/runs/{run['id']}/logs").json()["text"]
    finally:
        agent.stop()
        server.stop()
        engine.dispose()
    tail = (tmp_path / "agent" / "agent.log").read_text()[-3000:]
    assert done["state"] == "succeeded", done["reason"] + tail
    assert len(done["attempts"]) == 1 and logs.count("Running entrypoint") == 1
    fs.invalidate_cache()
    assert fs.exists(f"{base}/COMPLETE")
    marker = json.loads(fs.cat_file(f"{ckpt}/_CHECKPOINT.json"))
    assert sorted(marker["files"]) == [f"shard-{i}.bin" for i in range(4)]
    for rel, sha in marker["files"].items():
        assert _sha256(fs, f"{ckpt}/{rel}") == sha, rel
    lines = fs.cat_file(f"{base}/metrics/metrics.jsonl").decode().splitlines()
    steps = [json.loads(ln)["step"] for ln in lines if json.loads(ln).get("name") == "loss"]
    assert sorted(steps) == list(range(1, STEPS + 1)), steps
