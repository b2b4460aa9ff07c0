"""tau.save_artifact: copies into artifacts/ with sha256 in MANIFEST.json."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest

import taugrid as tau
from taugrid.record import files


def _manifest(record: Path) -> dict[str, dict[str, object]]:
    doc = json.loads((record / "artifacts" / "MANIFEST.json").read_text())
    artifacts: dict[str, dict[str, object]] = doc["artifacts"]
    return artifacts


def test_file_artifact_is_copied_with_sha256(record: Path, tmp_path: Path) -> None:
    src = tmp_path / "model.npz"
    src.write_bytes(b"abc" * 1000)
    dest = tau.save_artifact(src)
    assert dest == record / "artifacts" / "model.npz"
    assert dest.read_bytes() == src.read_bytes()
    entry = _manifest(record)["model.npz"]
    assert entry["kind"] == "file" and entry["size"] == 3000
    assert entry["sha256"] == hashlib.sha256(b"abc" * 1000).hexdigest()
    assert (entry["attempt"], entry["fencing_token"], entry["run_id"]) == (1, 1, "r-1")


def test_directory_artifact_under_a_new_name(record: Path, tmp_path: Path) -> None:
    src = tmp_path / "export"
    (src / "nested").mkdir(parents=True)
    (src / "a.txt").write_text("a")
    (src / "nested" / "b.txt").write_text("b")
    dest = tau.save_artifact(src, name="model")
    assert (dest / "nested" / "b.txt").read_text() == "b"
    entry = _manifest(record)["model"]
    digests = {
        "a.txt": hashlib.sha256(b"a").hexdigest(),
        "nested/b.txt": hashlib.sha256(b"b").hexdigest(),
    }
    assert entry["kind"] == "dir" and entry["files"] == digests
    assert entry["sha256"] == files.tree_digest(digests)


def test_saving_again_replaces_and_keeps_other_entries(record: Path, tmp_path: Path) -> None:
    (tmp_path / "m.txt").write_text("v1")
    (tmp_path / "metrics.json").write_text("{}")
    tau.save_artifact(tmp_path / "m.txt")
    tau.save_artifact(tmp_path / "metrics.json")
    (tmp_path / "m.txt").write_text("v2")
    tau.save_artifact(tmp_path / "m.txt")
    assert (record / "artifacts" / "m.txt").read_text() == "v2"
    manifest = _manifest(record)
    assert set(manifest) == {"m.txt", "metrics.json"}
    assert manifest["m.txt"]["sha256"] == hashlib.sha256(b"v2").hexdigest()
    hidden = [p.name for p in (record / "artifacts").iterdir() if p.name.startswith(".tmp")]
    assert hidden == []


def test_a_directory_can_replace_a_file_artifact(record: Path, tmp_path: Path) -> None:
    (tmp_path / "f").write_text("file")
    tau.save_artifact(tmp_path / "f", name="out")
    (tmp_path / "d").mkdir()
    (tmp_path / "d" / "x").write_text("x")
    assert (tau.save_artifact(tmp_path / "d", name="out") / "x").read_text() == "x"
    assert _manifest(record)["out"]["kind"] == "dir"


def test_bad_names_and_missing_sources_are_user_errors(record: Path, tmp_path: Path) -> None:
    (tmp_path / "ok").write_text("x")
    for bad in ("MANIFEST.json", "../escape", ".hidden", ""):
        with pytest.raises(tau.ArtifactError, match="not allowed"):
            tau.save_artifact(tmp_path / "ok", name=bad)
    with pytest.raises(tau.ArtifactError, match="does not exist"):
        tau.save_artifact(tmp_path / "missing")
