"""Checkpoints: staging, atomic promotion, the marker, ``latest``, crashes and ranks."""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

import taugrid as tau


@pytest.fixture
def record(record: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The shared run record (tests/sdk/conftest.py), attempt 1 holding fencing token 5."""
    monkeypatch.setenv("TAU_FENCING_TOKEN", "5")
    return record


def _save(step: int, payload: str = "w") -> Path:
    with tau.checkpoint(step) as d:
        (d / "weights.txt").write_text(f"{payload}{step}")
        (d / "sub").mkdir()
        (d / "sub" / "opt.txt").write_text("adam")
    found = tau.latest_checkpoint()
    assert found is not None
    return found


def _latest_file(record: Path) -> str:
    return (record / "checkpoints" / "latest").read_text().strip()


def test_checkpoint_dir_is_fresh_staging_per_attempt(record: Path) -> None:
    first, second = tau.checkpoint_dir(), tau.checkpoint_dir()
    staging = record / "checkpoints" / ".staging"
    assert first != second and first.parent == staging == second.parent
    assert first.name.startswith("attempt-1-") and not any(first.iterdir())


def test_commit_promotes_writes_marker_and_latest(record: Path) -> None:
    staged = tau.checkpoint_dir()
    (staged / "weights.bin").write_bytes(b"\x00\x01" * 100)
    promoted = tau.commit_checkpoint(staged, step=42)
    assert promoted == record / "checkpoints" / "step-00000042"
    assert not staged.exists()
    marker = json.loads((promoted / "_CHECKPOINT.json").read_text())
    assert (marker["step"], marker["attempt"], marker["fencing_token"]) == (42, 1, 5)
    assert marker["run_id"] == "r-1"
    assert marker["files"] == {"weights.bin": hashlib.sha256(b"\x00\x01" * 100).hexdigest()}
    assert _latest_file(record) == "step-00000042"
    assert tau.latest_checkpoint() == promoted
    info = tau.checkpoint_info(promoted, verify=True)
    assert (info.step, info.attempt, info.fencing_token) == (42, 1, 5)


def test_context_manager_commits_on_success_only(record: Path) -> None:
    first = _save(10)
    assert (first / "sub" / "opt.txt").read_text() == "adam"
    with pytest.raises(RuntimeError), tau.checkpoint(20) as d:
        (d / "weights.txt").write_text("half")
        raise RuntimeError("boom while saving")
    assert tau.latest_checkpoint() == first
    assert not (record / "checkpoints" / "step-00000020").exists()
    assert list((record / "checkpoints" / ".staging").iterdir()) == []


def test_latest_checkpoint_skips_incomplete_directories(record: Path) -> None:
    assert tau.latest_checkpoint() is None
    good = _save(100)
    fake = record / "checkpoints" / "step-00000900"  # e.g. copied by hand, no marker
    fake.mkdir()
    (fake / "weights.txt").write_text("?")
    assert tau.latest_checkpoint() == good


def test_crash_mid_staging_leaves_latest_unchanged(record: Path) -> None:
    good = _save(100)
    script = textwrap.dedent(
        """
        import os, taugrid as tau
        d = tau.checkpoint_dir()
        (d / "weights.txt").write_text("partial")
        os._exit(3)  # the process dies before commit_checkpoint
        """
    )
    proc = subprocess.run([sys.executable, "-c", script], timeout=60)
    assert proc.returncode == 3
    staged = list((record / "checkpoints" / ".staging").iterdir())
    assert [p.name.startswith("attempt-1-") for p in staged] == [True]
    assert _latest_file(record) == "step-00000100"
    assert tau.latest_checkpoint() == good


def test_crash_during_promotion_keeps_previous(
    record: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    good = _save(100)

    def die(src: object, dst: object) -> None:
        raise OSError("simulated crash during rename")

    with monkeypatch.context() as patch, pytest.raises(OSError, match="simulated"):
        patch.setattr(os, "rename", die)  # the os module injob_checkpoint renames with
        _save(200)
    assert _latest_file(record) == "step-00000100"
    assert tau.latest_checkpoint() == good


def test_next_attempt_sweeps_staging_of_earlier_attempts(
    record: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    stale = tau.checkpoint_dir()
    (stale / "x").write_text("left by a dead attempt")
    monkeypatch.setenv("TAU_ATTEMPT", "2")
    fresh = tau.checkpoint_dir()
    assert not stale.exists() and fresh.name.startswith("attempt-2-")


def test_recommit_of_a_step_replaces_it(record: Path) -> None:
    _save(50, payload="old")
    again = _save(50, payload="new")
    assert (again / "weights.txt").read_text() == "new50"
    leftovers = list((record / "checkpoints" / ".staging").iterdir())
    assert leftovers == []


def test_latest_never_moves_backwards(record: Path) -> None:
    _save(200)
    staged = tau.checkpoint_dir()
    (staged / "w").write_text("older")
    tau.commit_checkpoint(staged, 100)
    assert _latest_file(record) == "step-00000200"
    assert tau.latest_checkpoint() == record / "checkpoints" / "step-00000200"


def test_commit_of_a_foreign_directory_copies_it(record: Path, tmp_path: Path) -> None:
    mine = tmp_path / "my-ckpt"
    mine.mkdir()
    (mine / "w").write_text("1")
    promoted = tau.commit_checkpoint(mine, 7)
    assert (promoted / "w").read_text() == "1" and (mine / "w").exists()


def test_commit_rejects_bad_input(record: Path, tmp_path: Path) -> None:
    with pytest.raises(tau.CheckpointError, match="non-negative int"):
        tau.commit_checkpoint(tau.checkpoint_dir(), -1)
    with pytest.raises(tau.CheckpointError, match="not a directory"):
        tau.commit_checkpoint(tmp_path / "missing", 1)
    with pytest.raises(tau.CheckpointError, match="not a complete checkpoint"):
        tau.checkpoint_info(tmp_path)


def test_checkpoint_info_verify_detects_tampering(record: Path) -> None:
    ckpt = _save(3)
    (ckpt / "weights.txt").write_text("tampered")
    assert tau.checkpoint_info(ckpt).step == 3
    with pytest.raises(tau.CheckpointError, match="does not match its marker"):
        tau.checkpoint_info(ckpt, verify=True)


def test_only_rank_zero_commits_in_context_manager(
    record: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("RANK", "1")
    with tau.checkpoint(5) as d:
        (d / "w").write_text("rank1")
    assert tau.latest_checkpoint() is None
    assert list((record / "checkpoints" / ".staging").iterdir()) == []
    monkeypatch.setenv("RANK", "0")
    with tau.checkpoint(5) as d:
        (d / "w").write_text("rank0")
    assert tau.latest_checkpoint() == record / "checkpoints" / "step-00000005"


def test_checkpoint_path_overrides_location(
    record: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    elsewhere = tmp_path / "ckpts"
    monkeypatch.setenv("CHECKPOINT_PATH", os.fspath(elsewhere))
    assert _save(1) == elsewhere / "step-00000001"
    assert (elsewhere / "latest").read_text().strip() == "step-00000001"
