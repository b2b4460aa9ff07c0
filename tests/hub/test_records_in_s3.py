"""Run records in an S3 bucket (platform.yaml ``records``) on a real SeaweedFS server:
the hub writes a submitted run's record there in the run record's layout
(docs/ARCHITECTURE.md, "The run record") and serves it back
(``tau run get`` reads ``/files`` and ``/file``); a missing bucket or wrong credentials
are refused clearly at submit (HTTP 422, nothing stored) and by ``tau platform validate``
(exit 2) through the real console script."""

from __future__ import annotations

import json
import os
import secrets
from collections.abc import Iterator
from pathlib import Path

import pytest
import sqlalchemy as sa

from tests import weed_s3 as ws
from tests.cli import platform_env as pe
from tests.hub import agent_builders as ab
from tests.hub.harness import HubServer, platform_hub

BUCKET = "hub-records"
TAU_YAML = ab.ONE_GPU_RUN.format(name="tiny")


def platform_yaml(server: ws.WeedS3, url: str, key_env: str = "TAU_TEST_S3_KEY") -> str:
    return f"""\
schema_version: 1
gpu_types: [{{name: A100-80G}}]
regions:
  - name: east
    clusters:
      - name: east
        emulated_gpus: true
        node_pools: [{{name: a, gpu_model: A100-80G, gpus_per_node: 4, nodes: 1}}]
priority_classes: [{{name: normal, value: 1000}}]
profiles: [{{name: default}}]
teams: [{{name: research, quotas: [{{gpu_model: A100-80G, nominal: 4}}]}}]
workspaces: [{{name: default, team: research, defaults: {{priority: normal, profile: default}}}}]
default_workspace: default
records:
  url: {url}
  endpoint_url: {server.endpoint}
  region: us-east-1
  access_key_env: {key_env}
  secret_key_env: TAU_TEST_S3_SECRET
"""


@pytest.fixture
def creds(weed_s3: ws.WeedS3, monkeypatch: pytest.MonkeyPatch) -> ws.WeedS3:
    weed_s3.make_bucket(BUCKET)
    monkeypatch.setenv("TAU_TEST_S3_KEY", ws.KEY)
    monkeypatch.setenv("TAU_TEST_S3_SECRET", ws.SECRET)
    monkeypatch.setenv("TAU_TEST_S3_WRONG_KEY", "nobody")
    return weed_s3


@pytest.fixture
def s3_hub(creds: ws.WeedS3, tmp_path: Path, engine: sa.Engine) -> Iterator[tuple[HubServer, str]]:
    prefix = f"{BUCKET}/{secrets.token_hex(4)}"
    with platform_hub(engine, tmp_path, platform_yaml(creds, f"s3://{prefix}")) as server:
        yield server, prefix


def test_submitted_record_lands_in_the_bucket_and_is_served(
    s3_hub: tuple[HubServer, str], creds: ws.WeedS3
) -> None:
    server, prefix = s3_hub
    with server.http() as c:
        r = c.post("/v1/runs", json={"tau_yaml": TAU_YAML, "filename": "tau.yaml"})
        assert r.status_code == 201, r.text
        run_id = r.json()["id"]
        fs = creds.filesystem()
        base = f"{prefix}/default/runs/{run_id}"
        assert fs.cat_file(f"{base}/tau.yaml").decode() == TAU_YAML
        assert json.loads(fs.cat_file(f"{base}/run.json"))["id"] == run_id
        assert fs.exists(f"{base}/events.jsonl")
        detail = c.get(f"/v1/runs/{run_id}").json()
        assert detail["record_dir"] == f"s3://{base}"
        files = {f["path"] for f in c.get(f"/v1/runs/{run_id}/files").json()}
        assert {"tau.yaml", "run.json", "events.jsonl"} <= files
        got = c.get(f"/v1/runs/{run_id}/file", params={"path": "tau.yaml"})
        assert got.status_code == 200 and got.text == TAU_YAML
        missing = c.get(f"/v1/runs/{run_id}/file", params={"path": "nothing.txt"})
        assert missing.status_code == 404 and "tau run get" in missing.text
        escape = c.get(f"/v1/runs/{run_id}/file", params={"path": "../../other/run.json"})
        assert escape.status_code == 400


@pytest.mark.parametrize(
    ("url", "key_env", "says"),
    [
        ("s3://no-such-bucket-8/p", "TAU_TEST_S3_KEY", "bucket 'no-such-bucket-8' does not exist"),
        (f"s3://{BUCKET}/p", "TAU_TEST_S3_WRONG_KEY", "refused the credentials"),
    ],
)
def test_bad_store_is_refused_at_submit_and_by_validate(
    creds: ws.WeedS3, tmp_path: Path, engine: sa.Engine, url: str, key_env: str, says: str
) -> None:
    text = platform_yaml(creds, url, key_env)
    with platform_hub(engine, tmp_path, text) as server, server.http() as c:
        r = c.post("/v1/runs", json={"tau_yaml": TAU_YAML, "filename": "tau.yaml"})
        assert r.status_code == 400, r.text
        assert says in r.text and "platform.yaml" in r.text
        assert c.get("/v1/runs").json() == []  # nothing was stored
    path = str(tmp_path / "platform.yaml")
    result = pe.tau(dict(os.environ), "platform", "validate", "-f", path)
    assert result.returncode == 2, result.stdout + result.stderr
    assert says in result.stderr and "records" in result.stderr
    assert "Traceback" not in result.stderr


def test_validate_passes_with_a_usable_store(creds: ws.WeedS3, tmp_path: Path) -> None:
    path = tmp_path / "platform.yaml"
    path.write_text(platform_yaml(creds, f"s3://{BUCKET}/ok"))
    result = pe.tau(dict(os.environ), "platform", "validate", "-f", str(path))
    assert result.returncode == 0, result.stderr
    assert "valid" in result.stdout
