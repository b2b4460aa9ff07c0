"""Fencing: a revoked attempt cannot write checkpoints or artifacts."""

from __future__ import annotations

from pathlib import Path

import pytest

import taugrid as tau
from taugrid import errors
from taugrid.record import checkpoints
from taugrid.sdk.job import injob_artifacts


@pytest.fixture
def record(record: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The shared run record (tests/sdk/conftest.py) as attempt 2, holding fencing token 7."""
    record.mkdir(parents=True)
    monkeypatch.setenv("TAU_ATTEMPT", "2")
    monkeypatch.setenv("TAU_FENCING_TOKEN", "7")
    return record


def _fence(record: Path, text: str) -> None:
    (record / "FENCE").write_text(text)


def _staged(content: str = "w") -> Path:
    d = tau.checkpoint_dir()
    (d / "weights.txt").write_text(content)
    return d


def test_no_fence_file_means_not_fenced(record: Path) -> None:
    assert tau.commit_checkpoint(_staged(), 1).is_dir()


def test_matching_token_may_write(record: Path, tmp_path: Path) -> None:
    _fence(record, "7\n")
    assert tau.commit_checkpoint(_staged(), 1).is_dir()
    (tmp_path / "m.npz").write_bytes(b"m")
    assert tau.save_artifact(tmp_path / "m.npz").is_file()


def test_revoked_attempt_cannot_commit(record: Path) -> None:
    _fence(record, "7")
    good = tau.commit_checkpoint(_staged(), 10)
    _fence(record, "8")  # the hub handed the run to another attempt
    with pytest.raises(tau.FencedError, match="token 7, authoritative token 8") as info:
        tau.commit_checkpoint(_staged(), 20)
    assert info.value.mine == 7 and info.value.fence == 8
    assert not (record / "checkpoints" / "step-00000020").exists()
    assert (record / "checkpoints" / "latest").read_text().strip() == "step-00000010"
    assert tau.latest_checkpoint() == good


def test_revoked_attempt_context_manager_refuses(record: Path) -> None:
    _fence(record, "8")
    with pytest.raises(tau.FencedError), tau.checkpoint(3) as d:
        (d / "w").write_text("x")
    assert tau.latest_checkpoint() is None


def test_revoked_attempt_cannot_save_artifacts(record: Path, tmp_path: Path) -> None:
    (tmp_path / "model.npz").write_bytes(b"weights")
    _fence(record, "6")
    with pytest.raises(tau.FencedError, match=r"save artifact 'model\.npz'"):
        tau.save_artifact(tmp_path / "model.npz")
    assert not (record / "artifacts" / "model.npz").exists()


def test_fenced_run_without_own_token_is_refused(
    record: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("TAU_FENCING_TOKEN")
    _fence(record, "7")
    with pytest.raises(tau.FencedError, match="no TAU_FENCING_TOKEN"):
        tau.commit_checkpoint(_staged(), 1)


def test_unreadable_fence_fails_closed(record: Path) -> None:
    _fence(record, "not-a-number")
    with pytest.raises(tau.FencedError, match="not an integer fencing token"):
        tau.commit_checkpoint(_staged(), 1)


def test_revocation_during_promotion_is_undone(
    record: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _fence(record, "7")
    old = tau.commit_checkpoint(_staged("old"), 10)
    real_promote = checkpoints.promote

    def promote_then_revoke(staged: Path, target: Path) -> Path | None:
        displaced = real_promote(staged, target)
        _fence(record, "8")  # revoked between the rename and the second check
        return displaced

    monkeypatch.setattr(checkpoints, "promote", promote_then_revoke)
    with pytest.raises(tau.FencedError):
        tau.commit_checkpoint(_staged("new"), 10)
    assert (old / "weights.txt").read_text() == "old"  # the displaced one came back
    with pytest.raises(tau.FencedError):
        tau.commit_checkpoint(_staged("newer"), 20)
    assert not (record / "checkpoints" / "step-00000020").exists()
    assert tau.latest_checkpoint() == old


def test_revocation_during_artifact_copy_leaves_nothing(
    record: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _fence(record, "7")
    (tmp_path / "model.npz").write_bytes(b"weights")
    real_copy = injob_artifacts._copy

    def copy_then_revoke(source: Path, tmp: Path) -> dict[str, object]:
        entry = real_copy(source, tmp)
        _fence(record, "9")
        return entry

    monkeypatch.setattr(injob_artifacts, "_copy", copy_then_revoke)
    with pytest.raises(tau.FencedError):
        tau.save_artifact(tmp_path / "model.npz")
    assert [p.name for p in (record / "artifacts").iterdir()] == []


def test_fenced_error_is_a_permanent_system_fault() -> None:
    err = tau.FencedError("revoked", mine=1, fence=2)
    assert isinstance(err, errors.SystemFault) and not err.retryable
    assert "another attempt" in err.hint
