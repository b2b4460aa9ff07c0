"""Ending an attempt: its token is revoked at once, and what it wrote as checkpoints stays.

A real hub server; cluster ``a`` is played over HTTP with its real agent token (no Ray
here: tests/hub/test_fencing_ray.py does the same on real Ray). The in-job SDK runs in
this process with the environment an attempt gets, against the record the hub wrote.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import sqlalchemy as sa

import taugrid as tau
from taugrid.hub.runs import attempts
from taugrid.lifecycle import states as st
from taugrid.record import checkpoints
from tests.dataplane.test_data_api import PLATFORM
from tests.hub import agent_builders as ab
from tests.hub.harness import HubServer, platform_hub

RETRY = """\
resilience:
  max_retries: 1
  retry_on: [node_failure, exit_nonzero]
  backoff:
    initial: 5m
"""


@pytest.fixture
def hub(engine: sa.Engine, tmp_path: Path) -> Iterator[HubServer]:
    with platform_hub(engine, tmp_path, PLATFORM) as server:
        yield server


def _running_attempt(
    hub: HubServer, c: httpx.Client, *, retry: bool, backoff: str = "5m"
) -> dict[str, Any]:
    """Submit a run, take its assignment as agent ``a`` and report it running."""
    ab.sync(hub, "a", ab.report("a", 4))
    text = ab.ONE_GPU_RUN.format(name="r") + (RETRY.replace("5m", backoff) if retry else "")
    run = c.post("/v1/runs", json={"tau_yaml": text}).json()
    ab.wait(c, run["id"], lambda r: r["state"] == "placed", "placed")
    (assignment,) = ab.sync(hub, "a", ab.report("a", 4))["assignments"]
    running = {"token": assignment["token"], "state": "running", "nodes": ["a-n0"]}
    ab.sync(hub, "a", ab.report("a", 4), attempts=[running])
    ab.wait(c, run["id"], lambda r: r["state"] == "running", "running")
    return dict(assignment)


def _as_attempt(monkeypatch: pytest.MonkeyPatch, a: dict[str, Any]) -> Path:
    run_dir = Path(a["run_dir"])
    monkeypatch.setenv("TAU_OUTPUT_DIR", str(run_dir))
    monkeypatch.setenv("TAU_RUN_ID", a["run_id"])
    monkeypatch.setenv("TAU_ATTEMPT", str(a["attempt"]))
    monkeypatch.setenv("TAU_FENCING_TOKEN", str(a["token"]))
    monkeypatch.delenv("CHECKPOINT_PATH", raising=False)
    monkeypatch.delenv("RANK", raising=False)
    return run_dir


def test_ending_an_attempt_revokes_its_token_before_any_retry_is_placed(
    hub: HubServer, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    with hub.http() as c:
        a = _running_attempt(hub, c, retry=True)
        run_dir = _as_attempt(monkeypatch, a)
        with tau.checkpoint(10) as d:  # committed while the attempt is authoritative
            (d / "w.txt").write_text("10")
        failed = {
            "token": a["token"],
            "state": "failed",
            "failure_kind": "node_failure",
            "message": "node died",
            "released": True,
        }
        ab.sync(hub, "a", ab.report("a", 4), attempts=[failed])
        run = ab.wait(c, a["run_id"], lambda r: r["state"] == "queued", "requeued")
    # The retry waits out a 5 minute backoff: no new attempt exists, yet the ended
    # one can no longer write anything.
    assert len(run["attempts"]) == 1 and run["resume_from"] == "step-00000010"
    assert (run_dir / "FENCE").read_text() == "0"
    (tmp_path / "late").mkdir()
    (tmp_path / "late" / "w.txt").write_text("stray")
    (tmp_path / "out.txt").write_text("stray")
    lines_before = (
        (run_dir / "metrics" / "metrics.jsonl").read_bytes()
        if (run_dir / "metrics" / "metrics.jsonl").exists()
        else b""
    )
    with pytest.raises(tau.FencedError, match="ended by the hub"):
        tau.commit_checkpoint(tmp_path / "late", 20)
    with pytest.raises(tau.FencedError):
        tau.save_artifact(tmp_path / "out.txt")
    with pytest.raises(tau.FencedError):
        tau.log({"loss": 1.0}, step=20)
    with pytest.raises(tau.FencedError):
        tau.heartbeat(20)
    assert tau.latest_checkpoint() == run_dir / "checkpoints" / "step-00000010"
    assert not (run_dir / "artifacts" / "out.txt").exists()
    after = run_dir / "metrics" / "metrics.jsonl"
    assert (after.read_bytes() if after.exists() else b"") == lines_before


def _write_framework_checkpoints(run_dir: Path) -> None:
    """What frameworks leave behind without ever calling commit_checkpoint."""
    d = tau.checkpoint_dir()  # .staging/attempt-1-<k>/
    for step in (10, 20):
        (d / f"step-{step}").mkdir()
        (d / f"step-{step}" / "state.json").write_text(json.dumps({"step": step}))
    loose = tau.checkpoint_dir()  # files but no step: cannot be used
    (loose / "model.bin").write_bytes(b"weights")
    root = run_dir / "checkpoints"
    (root / "checkpoint-30").mkdir()  # HF Trainer
    (root / "checkpoint-30" / "trainer_state.json").write_text('{"global_step": 30}')
    (root / "exp" / "checkpoint_000004").mkdir(parents=True)  # Ray Train
    (root / "exp" / "checkpoint_000004" / "state.json").write_text('{"step": 4}')
    (root / "epoch=3-step=40.ckpt").write_text('{"step": 40}')  # Lightning
    (root / "checkpoint-50").mkdir()  # an empty folder: unusable


def test_uncommitted_framework_checkpoints_are_adopted_and_unusable_ones_reported(
    hub: HubServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    with hub.http() as c:
        a = _running_attempt(hub, c, retry=False)
        run_dir = _as_attempt(monkeypatch, a)
        _write_framework_checkpoints(run_dir)
        failed = {"token": a["token"], "state": "failed", "exit_code": 1, "released": True}
        ab.sync(hub, "a", ab.report("a", 4), attempts=[failed])
        run = ab.wait(c, a["run_id"], lambda r: r["state"] == "failed", "failed")
        events = c.get(f"/v1/runs/{a['run_id']}/events").json()
    adopted = {
        e["payload"]["from"]: e["payload"]["committed_as"]
        for e in events
        if e["kind"] == "checkpoint_adopted"
    }
    stage = next(k for k in adopted if k.endswith("/step-10")).rsplit("/", 1)[0]
    assert adopted == {
        f"{stage}/step-10": "step-00000010",
        f"{stage}/step-20": "step-00000020",
        "checkpoint-30": "step-00000030",
        "exp/checkpoint_000004": "step-00000004",
        "epoch=3-step=40.ckpt": "step-00000040",
    }
    unusable = {
        e["payload"]["path"]: e["payload"]["why"]
        for e in events
        if e["kind"] == "checkpoint_unusable"
    }
    assert unusable["checkpoint-50"] == "is empty"
    assert any(w == "has no step number in its name" for w in unusable.values()), unusable
    progressing = next(p for p in run["phases"] if p["phase"] == "progressing")
    assert progressing["status"] == "warning" and "checkpoint-50 is empty" in progressing["reason"]
    # The next attempt (a `tau run resume`) finds them through the ordinary SDK call.
    latest = tau.latest_checkpoint()
    assert latest == run_dir / "checkpoints" / "step-00000040"
    assert (latest / "epoch=3-step=40.ckpt").read_text() == '{"step": 40}'
    for name in adopted.values():
        info = tau.checkpoint_info(run_dir / "checkpoints" / name, verify=True)
        assert info.attempt == 1 and info.fencing_token == a["token"]
    assert (run_dir / "checkpoints" / "checkpoint-30" / "trainer_state.json").exists()


def test_a_checkpoint_written_after_the_attempt_ended_is_not_used(tmp_path: Path) -> None:
    root = tmp_path / "checkpoints"
    (root / "checkpoint-5").mkdir(parents=True)
    (root / "checkpoint-5" / "w").write_text("before")
    (root / "checkpoint-9").mkdir()
    (root / "checkpoint-9" / "w").write_text("by a stray")
    ended = time.time()
    os.utime(root / "checkpoint-9" / "w", (ended + 5, ended + 5))
    got = checkpoints.adopt(root, attempt=1, run_id="r", token=7, since=ended - 60, until=ended)
    assert got.adopted == [("checkpoint-5", "step-00000005")]
    assert got.unusable == [
        ("checkpoint-9", "was written after its attempt was declared ended (a stray process)")
    ]
    assert checkpoints.latest_name(root) == "step-00000005"


def test_a_step_folder_without_a_marker_is_adopted_in_place(tmp_path: Path) -> None:
    root = tmp_path / "checkpoints"
    (root / "step-00000100").mkdir(parents=True)  # named like a commit, never committed
    (root / "step-00000100" / "w").write_text("100")
    now = time.time()
    got = checkpoints.adopt(root, attempt=2, run_id="r", token=3, since=now - 60, until=now + 1)
    assert got.adopted == [("step-00000100", "step-00000100")]
    assert checkpoints.latest_name(root) == "step-00000100"
    assert (root / "step-00000100" / "w").read_text() == "100"


def test_a_ray_train_v2_run_folder_is_committed_whole_and_restored_in_a_fresh_root(
    tmp_path: Path,
) -> None:
    """Ray Train V2's own layout (``exp/checkpoint_<time>/`` and its snapshot; the real
    thing runs in tests/hub/test_records_upload_s3.py): committed as one step named by
    its report count, put back at ``exp/`` in another root, never over an existing one."""
    root = tmp_path / "scratch-a1"
    exp = root / "exp"
    (exp / "checkpoint_2026-12-05_16-01-32.526315").mkdir(parents=True)
    (exp / "checkpoint_2026-12-05_16-01-32.526315" / "state.json").write_text('{"step": 6}')
    (exp / "checkpoint_2026-12-05_16-01-32.526315" / ".metadata.json").write_text("{}")
    snapshot = {"current_report_index": 6, "checkpoint_results": [{"dir": "x"}]}
    (exp / checkpoints.TRAIN_V2_SNAPSHOT).write_text(json.dumps(snapshot))
    now = time.time()
    got = checkpoints.adopt(root, attempt=1, run_id="r", token=5, since=now - 60, until=now + 1)
    assert got.adopted == [("exp", "step-00000006")] and got.unusable == []
    assert (exp / checkpoints.TRAIN_V2_SNAPSHOT).exists()  # copied: Ray Train's stays
    fresh = tmp_path / "scratch-a2"
    fresh.mkdir()
    os.rename(root / "step-00000006", fresh / "step-00000006")  # what the download does
    assert checkpoints.restore_layout(fresh, "step-00000006") == "exp"
    restored = fresh / "exp" / "checkpoint_2026-12-05_16-01-32.526315" / ".metadata.json"
    assert restored.exists() and (fresh / "exp" / checkpoints.TRAIN_V2_SNAPSHOT).exists()
    assert checkpoints.restore_layout(fresh, "step-00000006") is None  # never over it
    (exp / checkpoints.TRAIN_V2_SNAPSHOT).write_text(json.dumps({"current_report_index": 2}))
    assert (
        checkpoints.adopt(
            root, attempt=1, run_id="r", token=5, since=now - 60, until=now + 1
        ).adopted
        == []
    )


def test_the_attempt_resumes_from_what_its_agent_staged_not_from_the_hubs_guess(
    hub: HubServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The hub guesses the resume point when it places the retry (the newest checkpoint
    it lists); the agent stages the newest one left when it submits, which is older when
    a fenced attempt took its last marker back meanwhile (``recordsync``): the attempt
    then says what it really resumed from, and an event says it changed."""
    with hub.http() as c:
        a = _running_attempt(hub, c, retry=True, backoff="0s")
        _as_attempt(monkeypatch, a)
        with tau.checkpoint(10) as d:
            (d / "w.txt").write_text("10")
        ended = {"token": a["token"], "state": "failed", "failure_kind": "node_failure"}
        ab.sync(hub, "a", ab.report("a", 4), attempts=[{**ended, "released": True}])
        placed = ab.wait(c, a["run_id"], lambda r: len(r["attempts"]) == 2, "placed again")
        (second,) = ab.sync(hub, "a", ab.report("a", 4))["assignments"]
        assert second["resumed_from"] == "step-00000010", second
        starting = {"token": second["token"], "state": "starting", "submission": {}}
        ab.sync(hub, "a", ab.report("a", 4), attempts=[{**starting, "staged_checkpoint": ""}])
        run = c.get(f"/v1/runs/{placed['id']}").json()
        events = c.get(f"/v1/runs/{placed['id']}/events").json()
    assert run["attempts"][1]["resumed_from"] is None, run["attempts"][1]
    (changed,) = [e for e in events if e["kind"] == "resume_point_changed"]
    assert changed["payload"]["resumed_from"] is None, changed


def test_an_attempt_ends_once_when_its_success_and_lost_contact_race(hub: HubServer) -> None:
    """The agent's success report and the leader's lost-contact check both read the
    attempt running; whichever ends it first wins and the other does nothing (found by
    the soak: a run succeeded, then was failed as lost and ran again)."""
    with hub.http() as c:
        a = _running_attempt(hub, c, retry=True)
        seen = hub.hub.runs.get_attempt(a["token"])  # what the lost-contact check read
        assert seen is not None and seen["state"] == "running"
        done = {"token": a["token"], "state": "succeeded", "exit_code": 0, "released": True}
        ab.sync(hub, "a", ab.report("a", 4), attempts=[done])
        ab.wait(c, a["run_id"], lambda r: r["state"] == "succeeded", "succeeded")
        lost = "cluster lost contact beyond the grace period"
        attempts.end(
            hub.hub,
            seen,
            st.AttemptState.FAILED,
            lost,
            kind=st.FailureKind.LOST_CONTACT,
            revoke=True,
        )
        run = c.get(f"/v1/runs/{a['run_id']}").json()
        events = [e["kind"] for e in c.get(f"/v1/runs/{a['run_id']}/events").json()]
    (only,) = run["attempts"]
    assert run["state"] == "succeeded" and only["state"] == "succeeded", run
    assert not only["revoked"] and "attempt_failed" not in events and "retry" not in events


def test_a_late_success_never_overwrites_an_end_the_hub_decided_meanwhile(
    hub: HubServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The agent's sync reads the attempt running; before it reads the run, the leader
    ends the attempt (lost contact, a node failure) and places the retry. The report is
    then not authoritative and its success is rejected: the attempt stays failed (found
    by the soak: two attempts of one run recorded as succeeded)."""
    with hub.http() as c:
        a = _running_attempt(hub, c, retry=True, backoff="0s")
        seen = hub.hub.runs.get_attempt(a["token"])  # what the agent's sync read first
        assert seen is not None and seen["state"] == "running"
        attempts.end(
            hub.hub,
            seen,
            st.AttemptState.FAILED,
            "node died",
            kind=st.FailureKind.NODE_FAILURE,
        )
        ab.wait(c, a["run_id"], lambda r: len(r["attempts"]) == 2, "retry placed")
        read = hub.hub.runs.get_attempt
        monkeypatch.setattr(
            hub.hub.runs, "get_attempt", lambda t: dict(seen) if t == a["token"] else read(t)
        )
        done = {"token": a["token"], "state": "succeeded", "exit_code": 0, "released": True}
        ab.sync(hub, "a", ab.report("a", 4), attempts=[done])
        monkeypatch.undo()
        run = c.get(f"/v1/runs/{a['run_id']}").json()
        events = [e["kind"] for e in c.get(f"/v1/runs/{a['run_id']}/events").json()]
    first, retry = run["attempts"]
    assert first["state"] == "failed" and first["failure_kind"] == "node_failure", first
    assert retry["state"] != "succeeded" and run["state"] != "succeeded", run
    assert "fenced_report_rejected" in events


def test_a_report_read_while_the_hub_ends_the_attempt_never_reopens_or_re_ends_it(
    hub: HubServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The hub ends an attempt with a compare-and-set of its state, then writes the rest
    of its row (revoked, reason). A sync that reads the attempt between the two sees it
    failed but not revoked, the run still on it: its ``running`` report must not reopen
    the attempt, and a later success must not end it again (the soak in CI: an attempt
    ended for lost contact went back to running, then was recorded succeeded)."""
    with hub.http() as c:
        a = _running_attempt(hub, c, retry=False)
        seen = hub.hub.runs.get_attempt(a["token"])
        assert seen is not None
        lost = "cluster lost contact beyond the grace period"
        attempts.end(hub.hub, seen, st.AttemptState.FAILED, lost, kind=st.FailureKind.LOST_CONTACT)
        window = {**seen, "state": "failed", "revoked": False}  # read between the writes
        read = hub.hub.runs.get_attempt
        monkeypatch.setattr(
            hub.hub.runs, "get_attempt", lambda t: dict(window) if t == a["token"] else read(t)
        )
        running = {"token": a["token"], "state": "running", "nodes": ["a-n0"]}
        ab.sync(hub, "a", ab.report("a", 4), attempts=[running])
        monkeypatch.undo()
        done = {"token": a["token"], "state": "succeeded", "exit_code": 0, "released": True}
        ab.sync(hub, "a", ab.report("a", 4), attempts=[done])
        run = c.get(f"/v1/runs/{a['run_id']}").json()
    (only,) = run["attempts"]
    assert only["state"] == "failed" and only["reason"] == lost, only
    assert run["state"] != "succeeded", run  # lost contact is retried: queued again
