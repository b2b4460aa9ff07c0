"""A driver's log read in pieces while it moves from the head's stub to its own node's
file (``ray_local._LocalLogsBackend``): no reader's offset into the stub may cut the
driver's first characters (seen in CI: "attempt 2: r" lost from a retry's log).

The Jobs API is faked at its seam (``RayBackend.logs``, an HTTP call); the node files
are real files where Ray writes them."""

from __future__ import annotations

from pathlib import Path

import pytest

from taugrid.backends.ray import ray_jobs, ray_local

STUB = "2026-12-02 16:43:18,911\tINFO job_manager.py:581 -- Runtime env is setting up.\n"
DRIVER = "Running entrypoint for job j-a2: python job.py\nattempt 2: resumed from step 300\n"


def test_the_head_stub_is_never_an_offset_into_the_drivers_own_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(ray_jobs.RayBackend, "logs", lambda self, job_id: STUB)
    backend = ray_local._LocalLogsBackend("http://127.0.0.9:1", tmp_path)
    first = backend.read_logs("j-a2", 0)  # the driver has not started on its node yet
    assert first.text == "" and first.next_offset == 0
    log = tmp_path / "n1" / "session_x" / "logs" / "job-driver-j-a2.log"
    log.parent.mkdir(parents=True)
    log.write_text(DRIVER)
    second = backend.read_logs("j-a2", first.next_offset)
    assert second.text == DRIVER


def test_a_driver_on_the_head_keeps_everything_after_the_stub(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(ray_jobs.RayBackend, "logs", lambda self, job_id: STUB + DRIVER)
    backend = ray_local._LocalLogsBackend("http://127.0.0.9:1", tmp_path)
    assert backend.logs("j-a2") == DRIVER
