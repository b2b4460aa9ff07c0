"""A model to serve from a run whose record is in an object store (a real SeaweedFS
bucket, tests/weed_s3.py), end to end up to the serving pod's scratch:

- ``hub.runs.registry.stored_source`` finds it by listing the record: the ``artifacts/``
  folder, one artifact, the latest *complete* checkpoint (a folder whose marker is not
  uploaded yet is never chosen) or a given one; what is missing is refused with what to
  do instead;
- ``python -m taugrid.agent.records.podsync --prepare`` (a serving pod's init container,
  run here as a real process) fetches the code and that model into the pod's scratch,
  where the app opens it (``model_path``); a model that is not in the store ends it with
  ``EXIT_NOT_STORED`` and the reason;
- the hub refuses to deploy such a model where no Kubernetes region could fetch it.

The Kubernetes tier serves one from pods on the real node
(``tests/k8s/test_serve_in_pods.py``).
"""

from __future__ import annotations

import os
import secrets
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa

from taugrid import payloads as wire
from taugrid.agent.records import podsync
from taugrid.errors import UserError
from taugrid.hub.runs import registry
from taugrid.platform import models as pm
from taugrid.record import jobenv, layout, s3
from taugrid.record.run import RunRecord
from taugrid.sdk.client import submit
from tests import weed_s3 as ws
from tests.hub import test_records_in_s3 as records_s3
from tests.hub.harness import HubServer, platform_hub

BUCKET = "model-source"
QUICKSTART = Path(__file__).resolve().parents[2] / "examples" / "quickstart"
WS = "ml"
RUN: dict[str, Any] = {
    "id": "r-src",
    "workspace": WS,
    "state": "succeeded",
    "spec": {"outputs": []},
}


@pytest.fixture
def spec(weed_s3: ws.WeedS3, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> pm.RecordStoreSpec:
    weed_s3.make_bucket(BUCKET)
    monkeypatch.setenv(ws.KEY_ENV, ws.KEY)
    monkeypatch.setenv(ws.SECRET_ENV, ws.SECRET)
    return pm.RecordStoreSpec(
        url=f"s3://{BUCKET}/{tmp_path.name}-{secrets.token_hex(3)}",
        endpoint_url=weed_s3.endpoint,
        region="us-east-1",
        access_key_env=ws.KEY_ENV,
        secret_key_env=ws.SECRET_ENV,
    )


@pytest.fixture
def record(spec: pm.RecordStoreSpec, tmp_path: Path) -> RunRecord:
    """A trained run's record: artifacts, a committed checkpoint at step 10 and one at
    step 20 whose marker is not there yet (an upload cut half-way)."""
    rec = RunRecord(s3.open_store(spec, tmp_path / "unused"), WS, str(RUN["id"]))
    rec.write_bytes(f"{layout.ARTIFACTS_DIR}/model.npz", b"weights")
    rec.write_bytes(f"{layout.ARTIFACTS_DIR}/{layout.MANIFEST_FILE}", b"{}")
    for step, marker in ((10, True), (20, False)):
        name = f"{layout.CHECKPOINTS_DIR}/{layout.step_name(step)}"
        rec.write_bytes(f"{name}/state.npz", f"state {step}".encode())
        if marker:
            rec.write_bytes(f"{name}/{layout.MARKER_FILE}", b"{}")
    return rec


def test_the_model_is_found_in_the_records_listing(record: RunRecord) -> None:
    whole = registry.stored_source(record, RUN, None, None)
    assert whole["record_path"] == record.key(layout.ARTIFACTS_DIR) and whole["stored"]
    assert whole["model_path"] == f"{record.location}/{layout.ARTIFACTS_DIR}"
    one = registry.stored_source(record, RUN, None, "model.npz")
    assert one["record_path"] == record.key("artifacts/model.npz")
    latest = registry.stored_source(record, RUN, "latest", None)
    assert latest["checkpoint"] == "step-00000010"  # step 20 has no marker: not complete
    assert registry.stored_source(record, RUN, "10", None)["record_path"] == record.key(
        "checkpoints/step-00000010"
    )


@pytest.mark.parametrize(
    ("checkpoint", "artifact", "run_spec", "said"),
    [
        ("20", None, {}, "no complete checkpoint at step 20"),
        (None, "missing.bin", {}, "has no artifact 'missing.bin'"),
        ("latest", None, {"checkpoint_path": "/elsewhere"}, "its own checkpoint_path"),
    ],
)
def test_what_is_not_in_the_record_is_refused_with_what_to_do(
    record: RunRecord,
    checkpoint: str | None,
    artifact: str | None,
    run_spec: dict[str, Any],
    said: str,
) -> None:
    run = {**RUN, "spec": {**RUN["spec"], **run_spec}}
    with pytest.raises(UserError) as err:
        registry.stored_source(record, run, checkpoint, artifact)
    assert said in err.value.message and err.value.hint, err.value


def _prepare(spec: pm.RecordStoreSpec, key: str, root: Path) -> subprocess.CompletedProcess[str]:
    """``podsync --prepare`` as a serving pod's init container runs it."""
    a = wire.Assignment(
        token=3,
        run_id="r-serve",
        attempt=1,
        workspace=RUN["workspace"],
        spec={"env": {jobenv.MODEL_RECORD: key}},
        run_dir="",
        records=spec.model_dump(),
        record_key=f"{RUN['workspace']}/runs/r-serve",
    )
    env = {**os.environ, podsync.ATTEMPT_ENV: a.model_dump_json(), podsync.ROOT_ENV: str(root)}
    cmd = [sys.executable, "-m", "taugrid.agent.records.podsync", "--prepare"]
    return subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=120)


def test_a_serving_pods_init_container_fetches_code_and_model_into_scratch(
    record: RunRecord, spec: pm.RecordStoreSpec, tmp_path: Path
) -> None:
    record.store.write(f"{RUN['workspace']}/runs/r-serve/{layout.CODE_ARCHIVE}", _code())
    root = tmp_path / "pod"
    source = registry.stored_source(record, RUN, None, None)
    done = _prepare(spec, source["record_path"], root)
    assert done.returncode == 0, done.stderr
    assert (root / "code" / "serve_app.py").is_file()  # the serving run's code
    assert (root / podsync.MODEL_DIR / "artifacts" / "model.npz").read_bytes() == b"weights"
    one = registry.stored_source(record, RUN, None, "model.npz")
    assert _prepare(spec, one["record_path"], root / "one").returncode == 0
    assert (root / "one" / podsync.MODEL_DIR / "model.npz").read_bytes() == b"weights"


def test_a_model_gone_from_the_store_ends_the_init_container_with_the_reason(
    record: RunRecord, spec: pm.RecordStoreSpec, tmp_path: Path
) -> None:
    done = _prepare(spec, record.key("artifacts/gone.npz"), tmp_path / "pod")
    assert done.returncode == podsync.EXIT_NOT_STORED, done.stderr
    assert "artifacts/gone.npz is not in the record store" in done.stderr, done.stderr


def _code() -> bytes:
    return submit.zip_dir(QUICKSTART, [])


@pytest.fixture
def s3_hub(
    weed_s3: ws.WeedS3, spec: pm.RecordStoreSpec, tmp_path: Path, engine: sa.Engine
) -> Iterator[HubServer]:
    """A hub whose records are in the bucket and whose only region runs Ray."""
    with platform_hub(engine, tmp_path, records_s3.platform_yaml(weed_s3, spec.url or "")) as hub:
        yield hub


def test_a_deploy_of_a_stored_model_without_a_kubernetes_region_is_refused(
    s3_hub: HubServer, spec: pm.RecordStoreSpec, tmp_path: Path
) -> None:
    with s3_hub.http() as c:
        run = c.post("/v1/runs", json={"tau_yaml": records_s3.TAU_YAML, "filename": "tau.yaml"})
        assert run.status_code == 201, run.text
        run_id = run.json()["id"]
        rec = RunRecord(s3.open_store(spec, tmp_path / "unused"), "default", run_id)
        rec.write_bytes(f"{layout.ARTIFACTS_DIR}/model.npz", b"weights")
        body = {
            "name": "digits",
            "source_run": run_id,
            "submit": {"tau_yaml": (QUICKSTART / "serve.yaml").read_text()},
        }
        r = c.post("/v1/serve", json=body)
        assert r.status_code == 400, r.text
        assert "served from Kubernetes regions only" in r.text, r.text
        assert c.get("/v1/serve").json() == [], "nothing deployed"
