"""examples/span-data-parallel on the embedded platform (real tau script, hub, agent, Ray
with emulated GPUs): `tau run` trains with 4 workers to the end and `tau run get` fetches
its summary. Spanning regions is tests/lab/test_span_cluster.py."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.cli import platform_env as pe

IP = "127.0.29.21"
EXAMPLE = pe.ROOT / "examples" / "span-data-parallel"
tau = pe.tau


env = pe.platform_fixture(IP)


@pytest.mark.ray
@pytest.mark.slow
@pytest.mark.long
@pytest.mark.timeout(600)
def test_the_example_trains_with_every_worker_and_its_summary_comes_back(
    env: dict[str, str], tmp_path: Path
) -> None:
    args = ["--workers", "4", "--shards", "40"]
    work = pe.copy_example(EXAMPLE, tmp_path / "work", lambda doc: doc["run"].update(args=args))
    run = tau(env, "run", str(work), "--watch", cwd=tmp_path, timeout=500)
    assert run.returncode == 0, run.stderr + run.stdout
    run_id = next(w for w in run.stdout.split() if w.startswith("span-data-parallel-"))
    got = tau(env, "run", "get", run_id, "-d", str(tmp_path / "got"), cwd=tmp_path)
    assert got.returncode == 0, got.stderr + got.stdout
    result = json.loads((tmp_path / "got" / "result.json").read_text())
    assert result["shards"] == 40 and result["workers_end"] == 4
    assert result["loss_end"] < result["loss_start"] / 10
