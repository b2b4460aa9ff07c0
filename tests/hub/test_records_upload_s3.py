"""Jobs write to their agent's scratch; the agent uploads into an S3 record store
(``agent.records.recordsync``), on real Ray (127.0.27.1), a real hub and agent, and the real
SeaweedFS server (``weed_s3``):

- a run whose record is in the bucket writes metrics, checkpoints (with their sha256),
  artifacts and ``COMPLETE`` there, and its retry resumes from the checkpoint the first
  attempt uploaded (downloaded into the new attempt's scratch);
- the store unreachable from the region (a TCP proxy on 127.0.27.2 between the agent
  and weed, cut while the job runs — the hub still reaches weed): the job keeps
  running, the run is Completed with *Artifacts saved* active and the reason, no
  ``COMPLETE``; once the proxy passes again the agent's held-back uploads land and the
  record completes;
- a checkpoint upload cut half-way (a store whose second upload fails: the fault seam)
  is never offered for resume; an attempt fenced in the store has its upload refused
  and the in-job SDK refuses its writes.
"""

from __future__ import annotations

import contextlib
import dataclasses
import hashlib
import json
import secrets
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from taugrid import payloads as wire
from taugrid.agent.records import recordsync
from taugrid.backends.ray import ray_local
from taugrid.platform import models as pm
from taugrid.record import checkpoints, layout, s3
from taugrid.record import store as recordstore
from taugrid.sdk.job import injob_checkpoint, injob_fence
from taugrid.store import db
from tests import weed_s3 as ws
from tests.hub import cut_proxy
from tests.hub import region as rg
from tests.hub.harness import HubServer, make_hub

pytestmark = [pytest.mark.ray, pytest.mark.slow]

BUCKET = "run-uploads"
RAY_IP = "127.0.27.1"
PROXY_IP = "127.0.27.2"
DEFAULT = Path(__file__).resolve().parents[2] / "src/taugrid/platform/default_local.yaml"


def platform_yaml(server: ws.WeedS3, url: str) -> str:
    text = DEFAULT.read_text().replace("nodes: 2", "nodes: 1")
    return text + server.records_yaml(url)


@pytest.fixture(scope="module")
def ray_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ray_local.LocalRayCluster]:
    cluster = rg.start_ray([RAY_IP], tmp_path_factory.mktemp("ray"))
    yield cluster
    cluster.stop()


@pytest.fixture
def creds(weed_s3: ws.WeedS3, monkeypatch: pytest.MonkeyPatch) -> ws.WeedS3:
    weed_s3.make_bucket(BUCKET)
    monkeypatch.setenv("TAU_TEST_S3_KEY", ws.KEY)
    monkeypatch.setenv("TAU_TEST_S3_SECRET", ws.SECRET)
    return weed_s3


@contextlib.contextmanager
def s3_platform(
    creds: ws.WeedS3,
    tmp_path: Path,
    cluster: ray_local.LocalRayCluster,
    endpoint: str | None = None,
) -> Iterator[tuple[HubServer, str]]:
    prefix = f"{BUCKET}/{secrets.token_hex(4)}"
    (tmp_path / "platform.yaml").write_text(platform_yaml(creds, f"s3://{prefix}"))
    engine = db.open_engine(f"sqlite:///{tmp_path / 'hub.db'}")
    server = HubServer(make_hub(engine, tmp_path / "home", tmp_path / "platform.yaml")).start()
    agent = rg.AgentThread(server, cluster, tmp_path / "agent")
    if endpoint is not None:  # how this region reaches the store
        agent.agent.config = dataclasses.replace(agent.agent.config, store_endpoint=endpoint)
    agent.start()
    try:
        yield server, prefix
    finally:
        agent.stop()
        server.stop()
        engine.dispose()


def test_an_s3_record_gets_every_output_and_the_retry_resumes_from_it(
    creds: ws.WeedS3, tmp_path: Path, ray_cluster: ray_local.LocalRayCluster
) -> None:
    text = rg.quickstart_yaml(
        "--steps 60 --checkpoint-every 20 --fail-at-step 45 --fail-attempts 1"
    )
    with s3_platform(creds, tmp_path, ray_cluster) as (server, prefix), server.http() as c:
        run = rg.submit_run(c, text)
        done = rg.wait_run(c, run["id"], rg.finished, timeout=240)
        metrics = c.get(f"/v1/runs/{run['id']}/metrics").json()
    assert done["state"] == "succeeded", done["reason"]
    assert rg.phases(done)["artifacts_saved"] == "done"
    _first, second = done["attempts"]
    assert second["resumed_from"] and second["resumed_from"].endswith("step-00000040")
    steps2 = [m["step"] for m in metrics if m["attempt"] == 2 and m["name"] == "loss"]
    assert min(steps2) == 41  # resumed from the uploaded checkpoint, not from step 0
    fs = creds.filesystem()
    base = f"{prefix}/default/runs/{run['id']}"
    assert done["record_dir"] == f"s3://{base}"
    lines = [json.loads(x) for x in fs.cat_file(f"{base}/metrics/metrics.jsonl").splitlines()]
    assert {m["attempt"] for m in lines} == {1, 2}  # every attempt's lines, in the record
    for step in ("step-00000040", "step-00000060"):
        marker = json.loads(fs.cat_file(f"{base}/checkpoints/{step}/_CHECKPOINT.json"))
        for rel, sha in marker["files"].items():
            data = fs.cat_file(f"{base}/checkpoints/{step}/{rel}")
            assert hashlib.sha256(data).hexdigest() == sha
    assert fs.exists(f"{base}/artifacts/model.npz") and fs.exists(f"{base}/COMPLETE")
    manifest = json.loads(fs.cat_file(f"{base}/artifacts/MANIFEST.json"))
    assert "model" in manifest["artifacts"] or "model.npz" in manifest["artifacts"]
    # the job never wrote into the hub's directory: the hub's data root holds no record
    assert not list((tmp_path / "home").rglob("metrics.jsonl"))


def test_store_unreachable_from_the_region_holds_artifacts_saved_until_it_returns(
    creds: ws.WeedS3, tmp_path: Path, ray_cluster: ray_local.LocalRayCluster
) -> None:
    host, port = creds.endpoint.removeprefix("http://").split(":")
    proxy = cut_proxy.Proxy(PROXY_IP, (host, int(port)))
    text = rg.quickstart_yaml("--steps 40 --checkpoint-every 10 --step-sleep 0.2", retries=0)
    try:
        with (
            s3_platform(creds, tmp_path, ray_cluster, proxy.endpoint) as (server, prefix),
            server.http() as c,
        ):
            run = rg.submit_run(c, text)
            rg.wait_run(c, run["id"], lambda r: r["state"] == "running", timeout=180)
            proxy.cut()  # the region loses the store; the hub still reaches it
            held = rg.wait_run(c, run["id"], _held, timeout=180)
            saved = next(p for p in held["phases"] if p["phase"] == "artifacts_saved")
            assert "not in the record store yet" in saved["reason"], saved
            fs = creds.filesystem()
            base = f"{prefix}/default/runs/{run['id']}"
            assert not fs.exists(f"{base}/COMPLETE")
            assert not fs.exists(f"{base}/artifacts/model.npz")
            proxy.open.set()  # the store is back: the held-back uploads land
            done = rg.wait_run(c, run["id"], _saved, timeout=180)
    finally:
        proxy.close()
    assert rg.phases(done)["artifacts_saved"] == "done", done["phases"]
    assert fs.exists(f"{base}/COMPLETE") and fs.exists(f"{base}/artifacts/model.npz")
    marker = json.loads(fs.cat_file(f"{base}/checkpoints/step-00000040/_CHECKPOINT.json"))
    assert marker["step"] == 40


def _saved(run: dict[str, Any]) -> bool:
    return rg.phases(run).get("artifacts_saved") == "done"


def _held(run: dict[str, Any]) -> bool:
    return run["state"] == "succeeded" and rg.phases(run).get("artifacts_saved") == "active"


class CutStore(s3.ObjectRecordStore):
    """The fault seam: the ``fail_at``-th upload fails (a connection cut mid-checkpoint)."""

    def __init__(self, inner: recordstore.RecordStore, fail_at: int) -> None:
        self.inner, self.url, self.puts, self.fail_at = inner, inner.url, 0, fail_at

    def __getattribute__(self, name: str) -> Any:
        if name in ("put_file", "inner", "url", "puts", "fail_at"):
            return object.__getattribute__(self, name)
        return getattr(object.__getattribute__(self, "inner"), name)

    def put_file(self, key: str, src: Path) -> str:
        self.puts += 1
        if self.puts == self.fail_at:
            raise recordstore.RecordStoreError(f"connection cut while uploading {key}")
        return self.inner.put_file(key, src)


class FenceMovesAtCommit(CutStore):
    """The race seam: the hub moves ``FENCE`` to ``fence`` right after a marker's upload
    (between the uploader's two reads of it)."""

    def __init__(self, inner: recordstore.RecordStore, fence: int) -> None:
        super().__init__(inner, fail_at=0)
        self.fail_at = fence  # reused as the fence the hub writes

    def put_file(self, key: str, src: Path) -> str:
        got = self.inner.put_file(key, src)
        if key.endswith(f"/{layout.MARKER_FILE}"):
            fence_key = key.split("/checkpoints/")[0] + "/FENCE"
            self.inner.write(fence_key, str(self.fail_at).encode())
        return got


def _assignment(attempt: int, token: int, url: str, server: ws.WeedS3) -> wire.Assignment:
    spec = pm.RecordStoreSpec(
        url=url,
        endpoint_url=server.endpoint,
        region="us-east-1",
        access_key_env="TAU_TEST_S3_KEY",
        secret_key_env="TAU_TEST_S3_SECRET",
    )
    return wire.Assignment(
        token=token,
        run_id="r-cut",
        attempt=attempt,
        workspace="default",
        spec={},
        run_dir="unused",
        records=spec.model_dump(mode="json"),
        record_key="default/runs/r-cut",
    )


def _commit(scratch: Path, step: int, monkeypatch: pytest.MonkeyPatch, token: int) -> None:
    monkeypatch.setenv("TAU_OUTPUT_DIR", str(scratch))
    monkeypatch.setenv("TAU_FENCING_TOKEN", str(token))
    with injob_checkpoint.checkpoint(step) as d:
        (d / "weights.bin").write_bytes(secrets.token_bytes(4096))
        (d / "optim.bin").write_bytes(secrets.token_bytes(2048))


def test_a_cut_checkpoint_is_never_offered_and_a_fenced_upload_is_refused(
    creds: ws.WeedS3, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    url = f"s3://{BUCKET}/{secrets.token_hex(4)}"
    a1 = _assignment(1, 7, url, creds)
    store = recordsync.open_for(a1, None)
    store.write("default/runs/r-cut/FENCE", b"7")
    s1 = tmp_path / "a1"
    sync1 = recordsync.RecordSync(a1, s1, store)
    sync1.stage()
    _commit(s1, 20, monkeypatch, 7)
    sync1._round(fenced=True)  # step 20: whole
    _commit(s1, 40, monkeypatch, 7)
    cut = recordsync.RecordSync(a1, s1, CutStore(store, fail_at=2))
    with pytest.raises(recordstore.RecordStoreError, match="connection cut"):
        cut._checkpoint(s1 / "checkpoints", True)  # one file of step 40 stored, then cut
    listed = [p for p, _ in store.list("default/runs/r-cut/checkpoints")]
    assert any(p.startswith("step-00000040/") for p in listed)  # half of it is there
    assert checkpoints.latest_listed(listed) == "step-00000020"  # the hub's view
    # the next attempt (another region) gets step 20, never the cut step 40
    store.write("default/runs/r-cut/FENCE", b"8")
    s2 = tmp_path / "a2"
    recordsync.RecordSync(_assignment(2, 8, url, creds), s2, store).stage()
    monkeypatch.setenv("TAU_OUTPUT_DIR", str(s2))
    monkeypatch.setenv("TAU_FENCING_TOKEN", "8")
    latest = injob_checkpoint.latest_checkpoint()
    assert latest is not None and latest.name == "step-00000020"
    injob_checkpoint.checkpoint_info(latest, verify=True)  # files match their sha256
    # attempt 1 is fenced now: its upload of step 60 is refused, its SDK writes too
    _commit(s1, 60, monkeypatch, 7)
    with pytest.raises(recordsync.Fenced):
        sync1._round(fenced=True)
    assert not store.exists("default/runs/r-cut/checkpoints/step-00000060/_CHECKPOINT.json")
    monkeypatch.setenv("TAU_OUTPUT_DIR", str(s1))
    monkeypatch.setenv("TAU_FENCING_TOKEN", "7")
    with pytest.raises(injob_fence.FencedError):
        injob_fence.check_fence("log metrics")


TRAIN_V2_JOB = '''\
"""Ray Train V2 with Ray Train's own checkpoints; the first attempt fails at step 7."""
import json, os, tempfile
import ray.train
from ray.train.v2.api.data_parallel_trainer import DataParallelTrainer

def loop(config):
    start = 0
    ckpt = ray.train.get_checkpoint()
    if ckpt is not None:
        with ckpt.as_directory() as d:
            start = json.load(open(os.path.join(d, "state.json")))["step"]
    print("resumed at step", start, flush=True)
    for step in range(start + 1, 11):
        out = None
        if step % 3 == 0:
            d = tempfile.mkdtemp()
            json.dump({"step": step}, open(os.path.join(d, "state.json"), "w"))
            out = ray.train.Checkpoint.from_directory(d)
        ray.train.report({"step": step}, checkpoint=out)
        if step == 7 and os.environ["TAU_ATTEMPT"] == "1":
            raise ValueError("loss is nan at step 7")

DataParallelTrainer(
    loop,
    scaling_config=ray.train.ScalingConfig(num_workers=1),
    run_config=ray.train.RunConfig(name="exp", storage_path=os.environ["CHECKPOINT_PATH"]),
).fit()
'''
TRAIN_V2_YAML = """\
schema_version: 1
name: train-v2
run: {entrypoint: job.py}
compute: {gpus: 0, workers: 1, cpus: 1, memory: 1Gi}
execution: {launcher: ray-train}
resilience: {max_retries: 1, retry_on: [exit_nonzero], backoff: {initial: 1s}}
"""


def test_a_ray_train_v2_job_resumes_from_its_own_checkpoint_after_a_crash(
    creds: ws.WeedS3, tmp_path: Path, ray_cluster: ray_local.LocalRayCluster
) -> None:
    """Ray Train writes ``exp/checkpoint_<time>/`` and its snapshot into
    ``$CHECKPOINT_PATH`` (the first attempt's scratch); the retry, in a fresh scratch,
    gets the run folder back and ``ray.train.get_checkpoint()`` returns step 6."""
    code = tmp_path / "code"
    code.mkdir()
    (code / "job.py").write_text(TRAIN_V2_JOB)
    with s3_platform(creds, tmp_path, ray_cluster) as (server, _), server.http() as c:
        run = rg.submit_run(c, TRAIN_V2_YAML, code)
        done = rg.wait_run(c, run["id"], rg.finished, timeout=300)
        logs = c.get(f"/v1/runs/{run['id']}/logs").json()["text"]
    first = done["attempts"][0]
    assert done["state"] == "succeeded", done["reason"]
    assert "resumed at step 0" in logs and "resumed at step 6" in logs, logs[-3000:]
    assert first["summary"] == "exit code 1: rank 0: ValueError: loss is nan at step 7"


@pytest.mark.parametrize(("fence", "kept"), [(0, True), (8, False)])
def test_a_marker_uploaded_as_the_fence_moved_stays_only_while_no_attempt_owns_it(
    creds: ws.WeedS3, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, fence: int, kept: bool
) -> None:
    """The hub revokes the attempt (``FENCE`` 0) between the uploader's two reads: the
    checkpoint is whole and the hub may list it as the retry's resume point, so it stays.
    A newer attempt owning the record (``FENCE`` 8) means it goes."""
    url = f"s3://{BUCKET}/{secrets.token_hex(4)}"
    a1 = _assignment(1, 7, url, creds)
    store = recordsync.open_for(a1, None)
    store.write("default/runs/r-cut/FENCE", b"7")
    s1 = tmp_path / "a1"
    sync = recordsync.RecordSync(a1, s1, FenceMovesAtCommit(store, fence))
    sync.stage()
    _commit(s1, 20, monkeypatch, 7)
    with pytest.raises(recordsync.Fenced):
        sync._round(fenced=True)
    marker = "default/runs/r-cut/checkpoints/step-00000020/_CHECKPOINT.json"
    assert store.exists(marker) is kept
