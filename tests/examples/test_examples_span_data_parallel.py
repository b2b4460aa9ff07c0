"""examples/span-data-parallel on the embedded platform (real tau script, hub, agent, Ray
with emulated GPUs): `tau run` trains with 4 workers to the end and `tau run get` fetches
its summary. Spanning regions is tests/lab/test_span_cluster.py."""

from __future__ import annotations

import json
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

from tests.cli import platform_env as pe

IP = "127.0.29.21"
EXAMPLE = pe.ROOT / "examples" / "span-data-parallel"
tau = pe.tau


@pytest.fixture(scope="module")
def env(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, str]]:
    home = tmp_path_factory.mktemp("tau-home")
    with pe.embedded_platform(home, IP, cwd=home) as e:
        yield e


@pytest.mark.ray
@pytest.mark.slow
@pytest.mark.long(expect_s=75)
@pytest.mark.timeout(600)
def test_the_example_trains_with_every_worker_and_its_summary_comes_back(
    env: dict[str, str], tmp_path: Path
) -> None:
    work = tmp_path / "work"
    shutil.copytree(EXAMPLE, work, ignore=shutil.ignore_patterns("__pycache__"))
    doc = yaml.safe_load((work / "tau.yaml").read_text())
    doc["run"]["args"] = ["--workers", "4", "--shards", "40"]
    (work / "tau.yaml").write_text(yaml.safe_dump(doc, sort_keys=False))
    run = tau(env, "run", str(work), "--watch", cwd=tmp_path, timeout=500)
    assert run.returncode == 0, run.stderr + run.stdout
    run_id = next(w for w in run.stdout.split() if w.startswith("span-data-parallel-"))
    got = tau(env, "run", "get", run_id, "-d", str(tmp_path / "got"), cwd=tmp_path)
    assert got.returncode == 0, got.stderr + got.stdout
    result = json.loads((tmp_path / "got" / "result.json").read_text())
    assert result["shards"] == 40 and result["workers_end"] == 4
    assert result["loss_end"] < result["loss_start"] / 10
