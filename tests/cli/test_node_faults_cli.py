"""Node faults and capacity through the real ``tau`` console script and embedded platform.

The README's tour marks the Ray *head* faulty (it holds GPUs, so first runs land
there): the region must keep running jobs, report its state truly, and take the node
back on ``tau admin node clear``. ``tau cluster list`` must agree with the runs at
once, and a Ray node that dies is started again by the agent.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.backends import backend_helpers as bh
from tests.cli import platform_env as pe

pytestmark = [pytest.mark.ray, pytest.mark.slow]

ROOT, tau = pe.ROOT, pe.tau
IP = "127.0.0.234"


@pytest.fixture(scope="module")
def env(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, str]]:
    with pe.embedded_platform(tmp_path_factory.mktemp("tau-home"), IP, columns="200") as e:
        yield e


def _cluster(env: dict[str, str]) -> dict[str, Any]:
    out = tau(env, "cluster", "list", "-o", "json")
    assert out.returncode == 0, out.stderr
    (cluster,) = json.loads(out.stdout)
    return dict(cluster)


def _gpus(env: dict[str, str]) -> tuple[float, float]:
    r = _cluster(env)["report"]
    return r["gpu_free"], r["gpu_busy"]


def _project(tmp: Path, name: str, args: str) -> Path:
    work = tmp / name
    shutil.copytree(ROOT / "examples" / "quickstart", work)
    text = (work / "tau.yaml").read_text().replace("name: quickstart", f"name: {name}")
    (work / "tau.yaml").write_text(
        text.replace('"--steps", "300", "--checkpoint-every", "50"', args)
    )
    return work


def test_fault_on_the_head_then_clear(env: dict[str, str], tmp_path: Path) -> None:
    head = _cluster(env)["report"]["nodes"][0]["node_id"]  # the head is listed first
    out = tau(env, "admin", "node", "fault", head[:12], "--kind", "ecc")
    assert out.returncode == 0, out.stderr + out.stdout
    assert _gpus(env) == (4, 0)  # cluster list agrees as soon as the command returns
    for i in range(2):
        work = _project(tmp_path, f"onfault{i}", '"--steps", "20", "--checkpoint-every", "10"')
        run = tau(env, "run", str(work), "--watch")
        assert run.returncode == 0, run.stderr + run.stdout
        hist = json.loads(tau(env, "run", "history", f"onfault{i}", "-o", "json").stdout)
        assert head not in hist["attempts"][-1]["nodes"]
    cluster = _cluster(env)
    assert cluster["state"] == "ready", cluster["report"].get("health_reason")
    assert cluster["report"]["gpu_faulty"] == 4 and _gpus(env) == (4, 0)
    listed = tau(env, "admin", "node", "list")
    assert "ecc (admin)" in listed.stdout, listed.stdout + listed.stderr
    out = tau(env, "admin", "node", "clear", head[:12])
    assert out.returncode == 0, out.stderr + out.stdout
    assert _gpus(env) == (8, 0)  # the head's GPUs are back when clear returns
    hist = json.loads(tau(env, "admin", "node", "history", head[:12], "-o", "json").stdout)
    assert [(e["event"], e["source"]) for e in hist] == [
        ("node_marked", "admin"),
        ("node_cleared", "all"),
    ]


def test_the_checker_marks_an_injected_fault_and_clears_it(env: dict[str, str]) -> None:
    """The embedded agent's checker reads the documented fault-injection file."""
    worker = _cluster(env)["report"]["nodes"][1]["node_id"]
    inject = Path(env["TAU_HOME"]) / "agents" / "local" / "health" / "nodes"
    inject.mkdir(parents=True, exist_ok=True)
    (inject / f"{worker}.json").write_text(json.dumps({"xid": [79]}))

    def marks() -> list[tuple[str, str]]:
        out = tau(env, "admin", "node", "list", "-o", "json")
        (row,) = [n for n in json.loads(out.stdout) if n["node_id"] == worker]
        return [(m["kind"], m["source"]) for m in row["marks"]]

    bh.wait_for(lambda: marks() == [("xid", "checker")], timeout=120, what="checker's mark")
    assert "Xid 79" in tau(env, "admin", "node", "list").stdout
    (inject / f"{worker}.json").unlink()
    bh.wait_for(lambda: marks() == [], timeout=120, what="the checker's clear")
    hist = tau(env, "admin", "node", "history", worker[:12])
    assert hist.returncode == 0 and "checker" in hist.stdout, hist.stdout + hist.stderr


def test_cluster_list_follows_a_run_and_its_cancel(env: dict[str, str], tmp_path: Path) -> None:
    work = _project(tmp_path, "hog", '"--steps", "100000", "--step-sleep", "0.1"')
    sub = tau(env, "run", str(work), "-o", "json")
    assert sub.returncode == 0, sub.stderr
    run_id = json.loads(sub.stdout)["id"]
    bh.wait_for(
        lambda: (
            json.loads(tau(env, "run", "status", run_id, "-o", "json").stdout)["state"] == "running"
        ),
        timeout=120,
        what="the run running",
    )
    assert _gpus(env) == (7, 1)
    out = tau(env, "run", "cancel", run_id)
    assert out.returncode == 0 and "released" in out.stdout, out.stdout + out.stderr
    assert _gpus(env) == (8, 0)


def test_a_dead_ray_node_is_started_again(env: dict[str, str]) -> None:
    state = json.loads(
        (Path(env["TAU_HOME"]) / "agents" / "local" / "ray" / "cluster.json").read_text()
    )
    worker = state["nodes"][1]["pid"]  # `ray start --block` of node 1
    before = {n["node_id"] for n in _cluster(env)["report"]["nodes"]}
    os.kill(worker, signal.SIGKILL)

    def back() -> bool:
        c = _cluster(env)
        nodes = c["report"]["nodes"]
        new = {n["node_id"] for n in nodes} - before
        return (
            c["state"] == "ready"
            and len(nodes) == 2
            and all(n["alive"] for n in nodes)
            and bool(new)
        )

    bh.wait_for(back, timeout=180, what="the worker node started again")
