"""fsspec replicas against a real S3-compatible server (SeaweedFS, tests/weed_s3.py, read
through s3fs): scan, sha256-verified copy, resume after interruption, corruption caught,
and replication of an s3:// dataset into a region through the real hub and data agents."""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import sqlalchemy as sa

from taugrid.agent.data import datasync
from taugrid.dataplane import manifest, objstore, transfer
from tests import weed_s3 as weed
from tests.dataplane import test_data_api as api
from tests.hub.harness import HubServer, make_hub

BUCKET = "corpora"


@pytest.fixture(scope="module")
def s3(weed_s3: weed.WeedS3) -> objstore.StorageOptions:
    return {"s3": weed_s3.storage_options()}


@pytest.fixture
def dataset(s3: objstore.StorageOptions, tmp_path: Path) -> tuple[str, Path]:
    """The same files locally (for comparison) and under s3://corpora/<unique>/ds."""
    import s3fs

    local = tmp_path / "ds"
    (local / "sub").mkdir(parents=True)
    (local / "a.bin").write_bytes(os.urandom(3 * 2**20))
    (local / "sub" / "b.bin").write_bytes(os.urandom(2**20 + 7))
    fs = s3fs.S3FileSystem(**s3["s3"])
    if not fs.exists(BUCKET):
        fs.mkdir(BUCKET)
    prefix = f"{BUCKET}/{tmp_path.name}/ds"
    fs.put(str(local), prefix, recursive=True)
    fs.invalidate_cache()
    return f"s3://{prefix}", local


def test_scan_matches_the_local_manifest(
    s3: objstore.StorageOptions, dataset: tuple[str, Path]
) -> None:
    url, local = dataset
    assert objstore.is_url(url) and not objstore.is_url("datasets/x")
    assert objstore.scan(url, s3) == manifest.scan(local)


def test_copy_resume_and_corruption(
    s3: objstore.StorageOptions, dataset: tuple[str, Path], tmp_path: Path
) -> None:
    url, local = dataset
    files = manifest.scan(local)
    stop = threading.Event()

    def progress(done: int, _rate: float) -> None:
        if done > 2**20:
            stop.set()

    with pytest.raises(transfer.TransferError):  # interrupted after about 1 MB
        objstore.fetch(
            url,
            "ds@v1",
            files,
            tmp_path / "dst",
            options=s3,
            rate_limit_bps=4e6,
            on_progress=progress,
            stop=stop,
        )
    assert list((tmp_path / "dst").rglob("*.part"))
    res = objstore.fetch(url, "ds@v1", files, tmp_path / "dst", options=s3)
    assert res.bytes_resumed > 0 and res.bytes_fetched < res.bytes_total
    assert manifest.scan(tmp_path / "dst") == files
    lied = [{**f, "sha256": "0" * 64} if f["path"] == "a.bin" else f for f in files]
    with pytest.raises(transfer.IntegrityError):
        objstore.fetch(url, "ds@v1", lied, tmp_path / "bad", options=s3)
    assert not list((tmp_path / "bad").rglob("*.part"))  # the bad part is dropped
    with pytest.raises(transfer.TransferError, match="read of s3://"):
        objstore.fetch(url + "-gone", "ds@v1", files, tmp_path / "gone", options=s3)


@pytest.fixture
def hub(engine: sa.Engine, tmp_path: Path) -> Iterator[HubServer]:
    (tmp_path / "platform.yaml").write_text(api.PLATFORM)
    server = HubServer(make_hub(engine, tmp_path / "home", tmp_path / "platform.yaml")).start()
    yield server
    server.stop()


@pytest.fixture
def regions(hub: HubServer, s3: objstore.StorageOptions, tmp_path: Path) -> Iterator[None]:
    """Regions a and b reporting, each with a data agent (data roots ``root-a``/``root-b``)."""
    running = []
    for name in ("a", "b"):
        api._agent(hub, name, {})
        http = httpx.Client(
            base_url=hub.url, headers={"Authorization": f"Bearer {hub.agent_token(name)}"}
        )
        root = tmp_path / f"root-{name}"
        agent = datasync.DataAgent(http, name, root, {}, None, 0.2, storage_options=s3).start()
        running.append((agent, http))
    yield
    for agent, http in running:
        agent.stop()
        http.close()


@pytest.mark.usefixtures("regions")
def test_replicate_an_s3_dataset_into_a_region(
    hub: HubServer, s3: objstore.StorageOptions, dataset: tuple[str, Path], tmp_path: Path
) -> None:
    url, local = dataset
    with hub.http() as c:
        r = c.post("/v1/datasets", json={"name": "corpus", "region": "a", "path": url})
        assert r.status_code == 201, r.text
        deadline = time.time() + 30
        while (ds := c.get("/v1/datasets/corpus").json())["state"] != "ready":
            assert ds["state"] == "scanning" and time.time() < deadline, ds
            time.sleep(0.2)
        assert ds["files"] == manifest.scan(local)
        t = c.post("/v1/datasets/corpus/replicate", json={"to_region": "b"}).json()
        while (row := _transfer(c, t["id"]))["state"] not in ("done", "failed"):
            assert time.time() < deadline + 30, row
            time.sleep(0.2)
        assert row["state"] == "done", row
        reps = {r["region"]: r for r in c.get("/v1/datasets/corpus/replicas").json()}
    assert reps["a"]["path"] == url and reps["b"]["state"] == "complete"
    assert manifest.scan(tmp_path / "root-b" / reps["b"]["path"]) == manifest.scan(local)


def _transfer(c: httpx.Client, tid: int) -> dict[str, Any]:
    return next(x for x in c.get("/v1/transfers").json() if x["id"] == tid)


@pytest.mark.usefixtures("regions")
def test_staging_from_an_s3_source_releases_the_held_run(
    hub: HubServer, s3: objstore.StorageOptions, dataset: tuple[str, Path], tmp_path: Path
) -> None:
    url, local = dataset
    api._agent(hub, "a", {}, gpus_free=0)  # the data's region is full: the run goes to b
    with hub.http() as c, hub.http(hub.agent_token("b")) as agent_b:
        r = c.post("/v1/datasets", json={"name": "corpus", "region": "a", "path": url})
        assert r.status_code == 201, r.text
        deadline = time.time() + 60
        while c.get("/v1/datasets/corpus").json()["state"] != "ready":
            assert time.time() < deadline
            time.sleep(0.2)
        r = c.post("/v1/runs", json={"tau_yaml": api.RUN.format(name="s3run", gpus=1)})
        assert r.status_code == 201, r.text
        while not (got := agent_b.post("/v1/agents/b/sync", json={}).json()["assignments"]):
            assert time.time() < deadline, c.get("/v1/runs/s3run").json()["reason"]
            time.sleep(0.2)
        run = c.get("/v1/runs/s3run").json()
    assert got[0]["run_id"] == run["id"] and run["cluster_id"] == "b"
    assert run["attempts"][0]["placement"]["staging"]["state"] == "ready"
    copy = tmp_path / "root-b" / "datasets" / "corpus" / "v1"
    assert manifest.scan(copy) == manifest.scan(local)  # verified before dispatch


@pytest.mark.usefixtures("regions")
def test_replicate_into_object_storage(
    hub: HubServer, s3: objstore.StorageOptions, dataset: tuple[str, Path], tmp_path: Path
) -> None:
    url, local = dataset
    target = url.rsplit("/", 1)[0] + "/copy-b"
    with hub.http() as c:
        r = c.post("/v1/datasets", json={"name": "corpus", "region": "a", "path": url})
        assert r.status_code == 201, r.text
        deadline = time.time() + 60
        while c.get("/v1/datasets/corpus").json()["state"] != "ready":
            assert time.time() < deadline
            time.sleep(0.2)
        body = {"to_region": "b", "to_url": target}
        t = c.post("/v1/datasets/corpus/replicate", json=body).json()
        while (row := _transfer(c, t["id"]))["state"] not in ("done", "failed"):
            assert time.time() < deadline, row
            time.sleep(0.2)
        assert row["state"] == "done", row
        bad = c.post("/v1/datasets/corpus/replicate", json={"to_region": "a", "to_url": "x"})
        assert bad.status_code == 422  # not a URL
        reps = {r["region"]: r for r in c.get("/v1/datasets/corpus/replicas").json()}
    assert reps["b"]["path"] == target and reps["b"]["state"] == "complete"
    assert objstore.scan(target, s3) == manifest.scan(local)  # verified objects
    assert not (tmp_path / "root-b" / "datasets" / "corpus" / "v1").exists()  # spool gone
