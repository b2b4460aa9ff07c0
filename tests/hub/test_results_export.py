"""Results to ``storage.output: s3://...`` on real SeaweedFS servers (tests/weed_s3.py):
every artifact verified, then the manifest, and ``COMPLETE`` only after; an object store
that is down at the end leaves *Artifacts saved* active with the reason and no
``COMPLETE``, and the export completes when the store is back (``retry_pending``);
a missing output bucket is refused at submit."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa

from taugrid.errors import UserError
from taugrid.hub.core import context
from taugrid.hub.runs import results, runs
from taugrid.lifecycle import phases as ph
from taugrid.lifecycle import states as st
from taugrid.payloads import SubmitRequest
from tests import weed_s3 as ws
from tests.hub import agent_builders as ab
from tests.hub.harness import make_hub
from tests.hub.test_records_in_s3 import platform_yaml

BUCKET = "results"


def tau_yaml(output: str) -> str:
    return ab.ONE_GPU_RUN.format(name="tiny") + f"storage:\n  output: {output}\n"


@pytest.fixture
def env(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TAU_TEST_S3_KEY", ws.KEY)
    monkeypatch.setenv("TAU_TEST_S3_SECRET", ws.SECRET)


def _hub(server: ws.WeedS3, tmp_path: Path, engine: sa.Engine) -> context.Hub:
    # records stay local (the default); only the output is in the object store, which
    # takes the records section's endpoint and credential variables
    text = platform_yaml(server, "/unused").replace("  url: /unused\n", "")
    (tmp_path / "platform.yaml").write_text(text)
    return make_hub(engine, tmp_path / "home", tmp_path / "platform.yaml")


def _succeeded_run(hub: context.Hub, output: str) -> dict[str, Any]:
    req = SubmitRequest(tau_yaml=tau_yaml(output))
    results.check(hub, "default", runs.resolve_request(hub, req).model_dump(mode="json"))
    row = runs.submit(hub, req, "tester")
    rec = runs.record_of(hub, row)
    assert rec.dir is not None
    (rec.dir / "artifacts" / "model").mkdir(parents=True)
    (rec.dir / "artifacts" / "model" / "w.bin").write_bytes(b"w" * 300_000)
    (rec.dir / "artifacts" / "eval.json").write_text('{"acc": 0.9}')
    (rec.dir / "artifacts" / "MANIFEST.json").write_text('{"format": 1, "artifacts": {}}')
    hub.runs.update_run(row["id"], state=st.RunState.SUCCEEDED.value, quota_held=False)
    run = hub.runs.get_run(row["id"])
    assert run is not None
    return run


def test_artifacts_then_manifest_then_complete(
    weed_s3: ws.WeedS3, env: None, tmp_path: Path, engine: sa.Engine
) -> None:
    weed_s3.make_bucket(BUCKET)
    hub = _hub(weed_s3, tmp_path, engine)
    run = _succeeded_run(hub, f"s3://{BUCKET}/{tmp_path.name}")
    url = results.output_url(hub, "default", str(run["id"]), run["spec"])
    assert url == f"s3://{BUCKET}/{tmp_path.name}"
    assert results.save(hub, run, url)
    runs.finish_record(hub, str(run["id"]))
    fs = weed_s3.filesystem()
    manifest = json.loads(fs.cat_file(f"{BUCKET}/{tmp_path.name}/MANIFEST.json"))
    assert manifest["run_id"] == run["id"] and manifest["artifacts"] == {}
    by_path = {f["path"]: f for f in manifest["files"]}
    assert set(by_path) == {"eval.json", "model/w.bin"}
    body = fs.cat_file(f"{BUCKET}/{tmp_path.name}/model/w.bin")
    assert by_path["model/w.bin"]["sha256"] == hashlib.sha256(body).hexdigest()
    saved = hub.runs.phases(str(run["id"]))[ph.Phase.ARTIFACTS_SAVED]
    assert saved.status is ph.PhaseStatus.DONE and url in saved.reason
    assert runs.record_of(hub, run).is_complete()


@pytest.fixture
def own_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ws.WeedS3]:
    """A server of this test's own: it is stopped and started again mid-test."""
    server = ws.WeedS3(ws.weed_binary(), tmp_path_factory.mktemp("weed-own"))
    server.start()
    yield server
    server.stop()


@pytest.mark.slow  # about 45 s: waits out upload retries
def test_store_down_at_the_end_keeps_saved_pending_until_it_returns(
    own_server: ws.WeedS3, env: None, tmp_path: Path, engine: sa.Engine
) -> None:
    own_server.make_bucket(BUCKET)
    hub = _hub(own_server, tmp_path, engine)
    run = _succeeded_run(hub, f"s3://{BUCKET}/later")
    own_server.stop()  # the object store goes away before the run's end
    url = f"s3://{BUCKET}/later"
    assert not results.save(hub, run, url)
    runs.finish_record(hub, str(run["id"]))
    saved = hub.runs.phases(str(run["id"]))[ph.Phase.ARTIFACTS_SAVED]
    assert saved.status is ph.PhaseStatus.ACTIVE and "pending" in saved.reason
    assert not runs.record_of(hub, run).is_complete()
    assert (hub.runs.get_run(str(run["id"])) or {})["state"] == st.RunState.SUCCEEDED.value
    results.retry_pending(hub)  # still down: still pending, nothing raised
    assert results.waiting(hub) == [str(run["id"])]
    own_server.start()  # same ports, same data: the store is back
    results.retry_pending(hub)
    saved = hub.runs.phases(str(run["id"]))[ph.Phase.ARTIFACTS_SAVED]
    assert saved.status is ph.PhaseStatus.DONE and results.waiting(hub) == []
    assert runs.record_of(hub, run).is_complete()
    assert own_server.filesystem().exists(f"{BUCKET}/later/MANIFEST.json")


def test_missing_output_bucket_is_refused_at_submit(
    weed_s3: ws.WeedS3, env: None, tmp_path: Path, engine: sa.Engine
) -> None:
    hub = _hub(weed_s3, tmp_path, engine)
    spec = runs.resolve_request(hub, SubmitRequest(tau_yaml=tau_yaml("s3://no-bucket-out2/x")))
    with pytest.raises(UserError, match="bucket 'no-bucket-out2' does not exist"):
        results.check(hub, "default", spec.model_dump(mode="json"))
