"""Issue 14 item 5: in ``tau lab up`` every region has its own root, and the object store
(the real SeaweedFS S3 server) is the only storage the components share.

A 2-region lab (Ray on 127.0.41.10/11) with ``records`` on an S3 bucket. The hub and each
agent (with its Ray node and its jobs) run in a private mount namespace where the hub's
root and the other regions' roots are empty and read-only (``lab.roots``). A run whose
job logs metrics, commits a checkpoint, saves an artifact and probes those roots:

- the job sees the hub's root and the other region's root empty and cannot write there,
  while it sees its own region's root (the probe is not blind); every agent's mount
  table has the hub's root hidden (a regression where a component opens another's
  directory finds nothing there: the run or the agent fails);
- the run's whole record (metrics, checkpoint, artifact, ``COMPLETE``) is in the bucket,
  the hub names an ``s3://`` record location (no path on the hub's machine);
- audit after the run: no file of the run exists under the hub's root, the other
  region's root or the lab's shared ``records/`` directory; its files (code; the
  scratch, removed once uploaded) are only under the root of the region that ran it.
"""

from __future__ import annotations

import json
import os
import secrets
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from taugrid.lab import roots
from taugrid.sdk.client import client, submit
from tests import weed_s3 as ws

pytestmark = [
    pytest.mark.ray,
    pytest.mark.slow,
    pytest.mark.timeout(900),
    pytest.mark.skipif(
        os.geteuid() != 0 or not shutil.which("tc") or not shutil.which("unshare"),
        reason="needs root, iproute2 and unshare",
    ),
]

BUCKET = "labroots"
REGIONS = ("r0", "r1")
RUN = """\
schema_version: 1
name: roots
run:
  entrypoint: probe.py
compute: {gpus: 1, cpus: 1, memory: 1Gi}
runtime:
  env:
    PROBE_PATHS: "%s"
"""
PROBE = """\
import errno, json, os
from pathlib import Path

import taugrid as tau

seen = {}
for p in os.environ["PROBE_PATHS"].split(":"):
    try:
        listing = sorted(os.listdir(p))
    except OSError as exc:
        listing = ["error " + errno.errorcode.get(exc.errno, str(exc.errno))]
    try:
        Path(p, ".probe-write").write_text("x")
        wrote = "written"
        Path(p, ".probe-write").unlink()
    except OSError as exc:
        wrote = errno.errorcode.get(exc.errno, str(exc.errno))
    seen[p] = {"listing": listing, "write": wrote}
for step in range(1, 4):
    tau.log({"loss": 1.0 / step}, step=step)
with tau.checkpoint(3) as d:
    (d / "weights.txt").write_text("w")
Path("probe.json").write_text(json.dumps(seen))
tau.save_artifact("probe.json")
"""


def _topology(server: ws.WeedS3, prefix: str) -> str:
    return f"""\
regions: [{", ".join(REGIONS)}]
gpus_per_region: 1
ray_base: 127.0.41.10
records:
  url: s3://{prefix}
  endpoint_url: {server.endpoint}
  region: us-east-1
  access_key_env: TAU_TEST_S3_KEY
  secret_key_env: TAU_TEST_S3_SECRET
"""


def _lab(home: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ, TAU_HOME=str(home), TAU_TEST_S3_KEY=ws.KEY)
    env["TAU_TEST_S3_SECRET"] = ws.SECRET
    env.pop("TAU_HUB_URL", None)
    return subprocess.run(
        [sys.executable, "-m", "taugrid.lab", *args],
        env=env,
        capture_output=True,
        text=True,
        timeout=400,
        check=False,
    )


@pytest.fixture(scope="module")
def lab(weed_s3: ws.WeedS3, tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    weed_s3.make_bucket(BUCKET)
    prefix = f"{BUCKET}/{secrets.token_hex(4)}"
    home = tmp_path_factory.mktemp("lab-roots")
    (home / "topo.yaml").write_text(_topology(weed_s3, prefix))
    up = _lab(home, "up", "--topology", str(home / "topo.yaml"), "-o", "json")
    try:
        assert up.returncode == 0, up.stderr
        yield {**json.loads(up.stdout), "prefix": prefix, "lab": home / "lab"}
    finally:
        down = _lab(home, "down")
        assert down.returncode == 0, down.stderr


def _files(top: Path) -> list[Path]:
    return [p for p in top.rglob("*")] if top.exists() else []


def test_regions_share_only_the_object_store(
    lab: dict[str, Any], weed_s3: ws.WeedS3, tmp_path: Path
) -> None:
    r = roots.Roots(lab["lab"])
    for region in REGIONS:  # every agent runs with the hub's root hidden
        pid = int((r.region(region) / "run" / f"lab-agent-{region}.pid").read_text())
        mounts = Path(f"/proc/{pid}/mountinfo").read_text()
        hidden = [ln.split()[4] for ln in mounts.splitlines() if roots.HIDDEN_FS in ln]
        assert str(r.hub) in hidden, (region, hidden)
    assert (r.hub / "credentials.json").exists()  # outside the namespaces it is there
    probed = [r.hub, *(r.region(x) for x in REGIONS)]
    (tmp_path / "tau.yaml").write_text(RUN % ":".join(map(str, probed)))
    (tmp_path / "probe.py").write_text(PROBE)
    sdk = client.Client(client.HubConfig(lab["hub_url"], lab["token"]))
    try:
        code = submit.zip_dir(tmp_path, [])
        run = sdk.submit((tmp_path / "tau.yaml").read_text(), "tau.yaml", code)
        final = _wait(sdk, run["id"])
    finally:
        sdk.close()
    assert final["state"] == "succeeded", final["reason"]
    assert final["record_dir"].startswith("s3://"), final["record_dir"]
    ran = final["attempts"][0]["cluster_id"]
    other = next(x for x in REGIONS if x != ran)

    fs = weed_s3.filesystem()
    base = f"{lab['prefix']}/default/runs/{run['id']}"
    _until_complete(fs, base)
    assert fs.cat_file(f"{base}/metrics/metrics.jsonl").count(b"\n") >= 3
    assert fs.exists(f"{base}/checkpoints/step-00000003/_CHECKPOINT.json")
    seen = json.loads(fs.cat_file(f"{base}/artifacts/probe.json"))
    for root in (r.hub, r.region(other)):
        assert seen[str(root)] == {"listing": [], "write": "EROFS"}, (root, seen)
    own = seen[str(r.region(ran))]
    assert "agents" in own["listing"] and own["write"] == "written", own

    # the audit: nothing of the run outside the root of the region that ran it
    for top in (r.hub, r.region(other), r.records):
        strays = [p for p in _files(top) if run["id"] in p.as_posix()]
        assert not strays, strays
    mine = [p for p in _files(r.region(ran)) if run["id"] in p.as_posix()]
    assert r.region(ran) / "agents" / ran / "code" / f"{run['id']}-a1" / "probe.py" in mine


def _wait(sdk: client.Client, run_id: str, timeout: float = 300) -> dict[str, Any]:
    deadline = time.time() + timeout
    while time.time() < deadline:
        now = sdk.run(run_id)
        if now["state"] in ("succeeded", "failed", "cancelled"):
            return now
        time.sleep(1.0)
    raise AssertionError(f"run {run_id} did not finish in {timeout:.0f} s: {now}")


def _until_complete(fs: Any, base: str, timeout: float = 120) -> None:
    deadline = time.time() + timeout
    while not fs.exists(f"{base}/COMPLETE"):
        assert time.time() < deadline, f"{base}/COMPLETE never written"
        time.sleep(1.0)
        fs.invalidate_cache()
