"""The record store contract, run alike against both implementations: a local directory
and an S3 bucket on a real SeaweedFS server (tests/weed_s3.py) read through s3fs.

Also: the run record (``record.run.RunRecord``) keeps its layout (docs/ARCHITECTURE.md,
"The run record") in both, and
``check`` turns a missing bucket, refused credentials and an unreachable endpoint into
clear errors (``RecordStoreConfigError`` is a UserError; unreachable is retryable)."""

from __future__ import annotations

import json
import secrets
from collections.abc import Iterator
from pathlib import Path

import pytest

from taugrid.errors import UserError
from taugrid.platform import models as pm
from taugrid.record import layout, s3
from taugrid.record import store as recordstore
from taugrid.record.run import RunRecord
from tests import weed_s3 as ws

BUCKET = "records"


@pytest.fixture(params=["local", "s3"])
def store(
    request: pytest.FixtureRequest, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> Iterator[recordstore.RecordStore]:
    if request.param == "local":
        yield s3.open_store(pm.RecordStoreSpec(), tmp_path / "data")
        return
    server: ws.WeedS3 = request.getfixturevalue("weed_s3")
    server.make_bucket(BUCKET)
    monkeypatch.setenv("TAU_TEST_S3_KEY", ws.KEY)
    monkeypatch.setenv("TAU_TEST_S3_SECRET", ws.SECRET)
    spec = _spec(server, f"s3://{BUCKET}/{tmp_path.name}-{secrets.token_hex(3)}")
    st = s3.open_store(spec, tmp_path / "unused")
    assert isinstance(st, s3.ObjectRecordStore)
    yield st


def _spec(server: ws.WeedS3, url: str) -> pm.RecordStoreSpec:
    return pm.RecordStoreSpec(
        url=url,
        endpoint_url=server.endpoint,
        region="us-east-1",
        access_key_env="TAU_TEST_S3_KEY",
        secret_key_env="TAU_TEST_S3_SECRET",
    )


def test_write_read_append_delete(store: recordstore.RecordStore) -> None:
    store.check()
    key = "ws/runs/r-1/run.json"
    assert store.read(key) is None and not store.exists(key)
    store.write(key, b'{"a": 1}')
    store.write(key, b'{"a": 2}')  # replaced whole
    assert store.read(key) == b'{"a": 2}' and store.exists(key)
    store.append("ws/runs/r-1/logs/driver.log", b"one\n")
    store.append("ws/runs/r-1/logs/driver.log", b"two\n")
    assert store.read_text("ws/runs/r-1/logs/driver.log") == "one\ntwo\n"
    store.delete(key)
    store.delete(key)  # missing: nothing happens
    assert store.read(key) is None and not store.exists(key)


def test_list_is_relative_sorted_and_hides_dot_names(store: recordstore.RecordStore) -> None:
    store.write("ws/runs/r-2/artifacts/b.txt", b"bb")
    store.write("ws/runs/r-2/artifacts/sub/a.bin", b"a")
    store.write("ws/runs/r-2/artifacts/.lock", b"")
    store.write("ws/runs/r-2/run.json", b"{}")
    assert store.list("ws/runs/r-2/artifacts") == [("b.txt", 2), ("sub/a.bin", 1)]
    assert [p for p, _ in store.list("ws/runs/r-2")] == [
        "artifacts/b.txt",
        "artifacts/sub/a.bin",
        "run.json",
    ]
    assert store.list("ws/runs/nothing-here") == []


def test_put_and_get_file_verify_sha256(store: recordstore.RecordStore, tmp_path: Path) -> None:
    import hashlib

    src = tmp_path / "model.bin"
    src.write_bytes(secrets.token_bytes(3 * 2**20 + 5))
    digest = store.put_file("ws/runs/r-3/artifacts/model.bin", src)
    assert digest == hashlib.sha256(src.read_bytes()).hexdigest()
    dest = tmp_path / "back" / "model.bin"
    assert store.get_file("ws/runs/r-3/artifacts/model.bin", dest)
    assert dest.read_bytes() == src.read_bytes()
    assert not store.get_file("ws/runs/r-3/artifacts/none.bin", tmp_path / "none.bin")
    assert not (tmp_path / "none.bin").exists()


@pytest.mark.parametrize("bad", ["../escape", "a/../../b", "a\x00b"])
def test_keys_never_escape_the_root(store: recordstore.RecordStore, bad: str) -> None:
    with pytest.raises(UserError):
        store.write(bad, b"x")
    with pytest.raises(UserError):
        store.read(bad)


def test_run_record_keeps_the_layout(store: recordstore.RecordStore) -> None:
    rec = RunRecord(store, "team-a", "train-abc123")
    rec.create("name: train\n")
    rec.write_json("run.json", {"id": "train-abc123"})
    rec.write_rendered("code.zip", "zip")
    rec.append_log("driver.log", "step 1\n")
    rec.write_events([{"kind": "submitted"}])
    rec.set_fence(7)
    store.write(rec.key("artifacts/model/weights.npz"), b"w")
    assert rec.missing_outputs([{"path": "model"}, {"path": "model/weights.npz"}]) == []
    assert rec.missing_outputs([{"path": "other.bin"}, {"path": "x", "required": False}]) == [
        "other.bin"
    ]
    assert not rec.is_complete()
    rec.complete()
    assert rec.is_complete()
    got = {f["path"] for f in rec.files()}
    assert got == {
        "COMPLETE",
        "FENCE",
        "artifacts/model/weights.npz",
        "events.jsonl",
        "logs/driver.log",
        "rendered/code.zip",
        "run.json",
        "tau.yaml",
    }
    assert rec.files("artifacts") == [{"path": "artifacts/model/weights.npz", "size": 1}]
    assert json.loads(store.read_text("team-a/runs/train-abc123/run.json") or "") == {
        "id": "train-abc123"
    }
    assert rec.read_log() == "step 1\n" and store.read(rec.key("FENCE")) == b"7"
    rec.reopen()
    assert not rec.is_complete()


def test_local_store_is_the_data_root_layout(tmp_path: Path) -> None:
    """The embedded default: files exactly where the record's layout (and every tool) expects."""
    st = s3.open_store(pm.RecordStoreSpec(), tmp_path)
    rec = RunRecord(st, "ws", "r-9")
    rec.create("x: 1\n")
    rec.complete()
    assert rec.dir == tmp_path / "ws" / "runs" / "r-9"
    assert (rec.dir / "tau.yaml").read_text() == "x: 1\n" and (rec.dir / "COMPLETE").exists()
    assert all((rec.dir / sub).is_dir() for sub in layout.SUBDIRS)


def test_check_missing_bucket_is_a_user_error(
    weed_s3: ws.WeedS3, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("TAU_TEST_S3_KEY", ws.KEY)
    monkeypatch.setenv("TAU_TEST_S3_SECRET", ws.SECRET)
    st = s3.open_store(_spec(weed_s3, "s3://no-such-bucket-x2/p"), tmp_path)
    with pytest.raises(recordstore.RecordStoreConfigError, match="no-such-bucket-x2"):
        st.check()


def test_check_wrong_credentials_is_a_user_error(
    weed_s3: ws.WeedS3, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    weed_s3.make_bucket(BUCKET)
    monkeypatch.setenv("TAU_TEST_S3_KEY", ws.KEY)
    monkeypatch.setenv("TAU_TEST_S3_SECRET", "not-the-secret")
    st = s3.open_store(_spec(weed_s3, f"s3://{BUCKET}/p"), tmp_path)
    with pytest.raises(recordstore.RecordStoreConfigError, match="credentials") as err:
        st.check()
    assert "secret_key_env" in err.value.hint


def test_check_unreachable_is_retryable(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("TAU_TEST_S3_KEY", ws.KEY)
    monkeypatch.setenv("TAU_TEST_S3_SECRET", ws.SECRET)
    spec = pm.RecordStoreSpec(
        url=f"s3://{BUCKET}/p",
        endpoint_url=f"http://{ws.IP}:1",  # nothing listens on port 1
        access_key_env="TAU_TEST_S3_KEY",
        secret_key_env="TAU_TEST_S3_SECRET",
    )
    st = s3.open_store(spec, tmp_path)
    with pytest.raises(recordstore.RecordStoreError, match="does not answer") as err:
        st.check()
    assert err.value.retryable


def test_records_spec_per_workspace() -> None:
    plat = pm.Platform(
        records=pm.RecordStoreSpec(url="s3://shared/records"),
        teams=[pm.TeamSpec(name="t")],
        workspaces=[
            pm.WorkspaceSpec(name="a", team="t"),
            pm.WorkspaceSpec(name="b", team="t", records=pm.RecordStoreSpec(url="/srv/b")),
        ],
    )
    assert plat.records_for("a").url == "s3://shared/records"
    assert plat.records_for("b").url == "/srv/b"
    with pytest.raises(ValueError, match="names no bucket"):
        pm.RecordStoreSpec(url="s3:///x")
    with pytest.raises(ValueError, match="use a directory"):
        pm.RecordStoreSpec(url="ftp://host/x")


def test_weed_binary_skips_outside_ci_and_fails_in_ci(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """No binary: a skip that says how to build it; CI (TAU_TEST_WEED) fails instead."""
    monkeypatch.delenv("TAU_TEST_WEED", raising=False)
    monkeypatch.setenv("TAU_S3_CACHE", str(tmp_path / "empty-cache"))
    with pytest.raises(pytest.skip.Exception, match=r"s3/build\.sh"):
        ws.weed_binary()
    monkeypatch.setenv("TAU_TEST_WEED", str(tmp_path / "no-weed"))
    with pytest.raises(pytest.fail.Exception, match="TAU_TEST_WEED"):
        ws.weed_binary()
