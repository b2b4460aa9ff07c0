"""A real S3-compatible server for tests: SeaweedFS's ``weed server -s3`` on loopback.

The binary comes from ``s3/build.sh`` (built from the Go module, cached in
``~/.cache/taugrid/seaweedfs/<key>/bin/weed``); ``TAU_TEST_WEED`` names it explicitly.
Where it is missing the tests that need it skip, saying how to build it — except in CI
(``TAU_TEST_WEED`` set, as ``.ci/run`` does), where a missing binary is a failure. CI
builds it in the background during the tests: with ``TAU_TEST_WEED_STATUS`` set, the tests
that need it are ordered after all others while the build runs (``build_pending``), and the
first of them waits for that file to say ``ok`` (within its test timeout).

``WeedS3.start`` runs master, volume, filer and S3 gateway in one process on
``IP`` with ports of its own (each gRPC port is the HTTP port + 10000), with an S3
identities file: only ``KEY``/``SECRET`` may act, so wrong credentials are refused.
It returns once the gateway answers an authenticated ListBuckets (bounded wait).
``stop`` sends SIGTERM, waits ``GRACE_S`` (weed takes more than 15 s to stop on its
own), then SIGKILLs the process group and reaps it: no process is left behind.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import time
from pathlib import Path
from typing import Any

import pytest

from tests.backends import backend_helpers as bh

IP = "127.0.20.1"
KEY = "tau-test-key"
SECRET = "tau-test-secret-0123456789"
KEY_ENV = "TAU_TEST_S3_KEY"
SECRET_ENV = "TAU_TEST_S3_SECRET"
"""The variables platform files in tests name for ``KEY`` and ``SECRET``."""
GRACE_S = 3.0
READY_TIMEOUT_S = 120.0
BUILD_WAIT_S = 270.0
"""Longest wait for CI's background build of weed, inside a test's 300 s timeout (so the
failure says what it waited for). The tests that need weed run last while it builds
(``build_pending``): cold, it took 434 s alone and 1,673 s beside the test workers."""
REPO = Path(__file__).resolve().parents[1]
BUILD_SCRIPT = REPO / "s3" / "build.sh"


def weed_binary() -> Path:
    """The weed binary to use; skips (outside CI) or fails (CI) when it is not built."""
    named = os.environ.get("TAU_TEST_WEED")
    if named:
        _wait_for_build(named)
        if not os.access(named, os.X_OK):
            pytest.fail(f"TAU_TEST_WEED={named} is not an executable weed binary (s3/build.sh)")
        return Path(named)
    out = subprocess.run(
        [str(BUILD_SCRIPT), "--print-bin"], check=True, capture_output=True, text=True
    )
    path = Path(out.stdout.strip())
    if not os.access(path, os.X_OK):
        pytest.skip(
            f"the S3 test server is not built ({path} missing): run s3/build.sh "
            "(about 3-10 minutes; cached outside the repo), or make s3-build"
        )
    return path


def build_pending() -> bool:
    """Whether CI's background build of weed (``TAU_TEST_WEED_STATUS``) is still running:
    then the tests that need it are ordered last (``tests/workers.py``), so the build has
    the length of the rest of the run, not a test's timeout, to finish."""
    named, status = os.environ.get("TAU_TEST_WEED"), os.environ.get("TAU_TEST_WEED_STATUS")
    if not named or not status:
        return False
    return not os.access(named, os.X_OK) and not os.path.exists(status)


def _wait_for_build(named: str) -> None:
    """Wait for CI's background ``s3/build.sh`` (``TAU_TEST_WEED_STATUS``) to finish."""
    status = os.environ.get("TAU_TEST_WEED_STATUS")
    if not status or os.access(named, os.X_OK):
        return
    deadline = time.monotonic() + BUILD_WAIT_S
    while not os.path.exists(status) and time.monotonic() < deadline:
        time.sleep(2.0)
    log = os.environ.get("TAU_TEST_WEED_LOG", "its log")
    if not os.path.exists(status):
        pytest.fail(f"s3/build.sh still building weed after {BUILD_WAIT_S:.0f}s (see {log})")
    if Path(status).read_text().strip() != "ok":
        pytest.fail(f"s3/build.sh failed to build weed; see {log}")


def _ports() -> dict[str, int]:
    """HTTP ports whose gRPC twins (+10000) are free too."""
    names = ("master", "volume", "filer", "s3")
    ports: dict[str, int] = {}
    while len(ports) < len(names):
        port = bh.free_port(IP, 20000, 29999)
        if port not in ports.values() and _free(port + 10000):
            ports[names[len(ports)]] = port
    return ports


def _free(port: int) -> bool:
    try:
        return bh.free_port(IP, port, port) == port
    except RuntimeError:
        return False


class WeedS3:
    """One running ``weed server -s3``; ``endpoint`` is its S3 URL."""

    def __init__(self, binary: Path, workdir: Path) -> None:
        self.binary, self.workdir = binary, workdir
        self.ports = _ports()
        self.endpoint = f"http://{IP}:{self.ports['s3']}"
        self.proc: subprocess.Popen[bytes] | None = None
        self.log = workdir / "weed.log"

    def storage_options(self, key: str = KEY, secret: str = SECRET) -> dict[str, Any]:
        """s3fs keyword arguments for this server (``key``/``secret`` to try wrong ones)."""
        return {
            "endpoint_url": self.endpoint,
            "key": key,
            "secret": secret,
            "client_kwargs": {"region_name": "us-east-1"},
        }

    def records_yaml(self, url: str) -> str:
        """platform.yaml's ``records:`` block for a store at ``url`` on this server, its
        credentials named by ``KEY_ENV``/``SECRET_ENV`` (set them to ``KEY``/``SECRET``)."""
        return (
            f"records:\n  url: {url}\n  endpoint_url: {self.endpoint}\n  region: us-east-1\n"
            f"  access_key_env: {KEY_ENV}\n  secret_key_env: {SECRET_ENV}\n"
        )

    def filesystem(self) -> Any:
        import s3fs

        return s3fs.S3FileSystem(skip_instance_cache=True, **self.storage_options())

    def make_bucket(self, name: str) -> None:
        fs = self.filesystem()
        if not fs.exists(name):
            fs.mkdir(name)

    def start(self) -> None:
        data = self.workdir / "data"
        data.mkdir(parents=True, exist_ok=True)
        identities = self.workdir / "s3.json"
        identities.write_text(
            json.dumps(
                {
                    "identities": [
                        {
                            "name": "tau",
                            "credentials": [{"accessKey": KEY, "secretKey": SECRET}],
                            "actions": ["Admin", "Read", "Write", "List", "Tagging"],
                        }
                    ]
                }
            )
        )
        p = self.ports
        cmd = [
            str(self.binary),
            "server",
            f"-dir={data}",
            f"-ip={IP}",
            f"-ip.bind={IP}",
            f"-master.port={p['master']}",
            f"-volume.port={p['volume']}",
            f"-filer.port={p['filer']}",
            "-s3",
            f"-s3.port={p['s3']}",
            f"-s3.config={identities}",
            "-s3.port.iceberg=0",  # fixed default ports (8181, 9101): off, never shared
            "-s3.port.lance=0",
            # SeaweedFS gives every bucket its own collection and grows 7 volumes for it:
            # with a few volume slots the server answers "internal error" once a test
            # session has made a handful of buckets. Volumes grow as written (no
            # preallocation), so many small slots cost little disk.
            "-master.volumeSizeLimitMB=16",
            "-volume.max=1000",
        ]
        with self.log.open("ab") as log:
            self.proc = subprocess.Popen(
                cmd, stdout=log, stderr=subprocess.STDOUT, start_new_session=True
            )
        try:
            self._wait_ready()
        except BaseException:
            self.stop()
            raise

    def _wait_ready(self) -> None:
        import s3fs

        deadline = time.monotonic() + READY_TIMEOUT_S
        last = ""
        while time.monotonic() < deadline:
            assert self.proc is not None
            if self.proc.poll() is not None:
                raise RuntimeError(f"weed exited with {self.proc.returncode}:\n{self._tail()}")
            try:
                fs = s3fs.S3FileSystem(skip_instance_cache=True, **self.storage_options())
                fs.ls("")  # authenticated ListBuckets
                return
            except Exception as exc:  # not up yet (connection refused, 503, ...)
                last = f"{type(exc).__name__}: {exc}"
            time.sleep(0.5)
        raise RuntimeError(
            f"weed S3 at {self.endpoint} not ready in {READY_TIMEOUT_S:.0f} s ({last}):\n"
            f"{self._tail()}"
        )

    def _tail(self) -> str:
        return "\n".join(self.log.read_text(errors="replace").splitlines()[-20:])

    def stop(self) -> None:
        """SIGTERM, ``GRACE_S`` to exit, then SIGKILL the whole group; always reaped."""
        proc, self.proc = self.proc, None
        if proc is None:
            return
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGTERM)
            with contextlib.suppress(subprocess.TimeoutExpired):
                proc.wait(GRACE_S)
        with contextlib.suppress(ProcessLookupError):  # the group: nothing may outlive weed
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(30)
