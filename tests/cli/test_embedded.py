"""The researcher path through the real ``tau`` console script and embedded platform.

``tau up`` starts the hub and the ``local`` agent (with its real Ray cluster) under a
temporary ``$TAU_HOME``; the quickstart runs to completion with ``--watch``; status,
metrics, logs, get, history and cancel work; ``tau down`` leaves no process behind.
"""

from __future__ import annotations

import json
import shutil
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.cli import platform_env as pe
from tests.hub.harness import free_port

pytestmark = [pytest.mark.ray, pytest.mark.slow]

ROOT, TAU, tau = pe.ROOT, pe.TAU, pe.tau
IP = "127.0.0.17"


@pytest.fixture(scope="module")
def env(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, str]]:
    with pe.embedded_platform(tmp_path_factory.mktemp("tau-home"), IP, columns="200") as e:
        yield e


def test_credentials_are_private(env: dict[str, str]) -> None:
    creds = Path(env["TAU_HOME"]) / "credentials.json"
    assert creds.stat().st_mode & 0o777 == 0o600
    assert json.loads(creds.read_text())["token"].startswith("tau_")


def test_up_status_reports_emulated_gpus(env: dict[str, str]) -> None:
    out = tau(env, "cluster", "list", "-o", "json")
    assert out.returncode == 0, out.stderr
    (cluster,) = json.loads(out.stdout)
    report = cluster["report"]
    assert cluster["state"] == "ready" and report["emulated_gpus"] is True
    assert report["gpu_models"] == {"A100-80G": 8} and len(report["nodes"]) == 2
    # each Ray node carries its platform.yaml pool (the label the hub reads spot from)
    assert [(n["pool"], n["spot"]) for n in report["nodes"]] == [("a100", False)] * 2


def test_quickstart_end_to_end(env: dict[str, str], tmp_path: Path) -> None:
    run = tau(env, "run", "examples/quickstart", "--watch")
    assert run.returncode == 0, run.stderr + run.stdout
    assert "loss" in run.stdout and "artifacts/model.npz" in run.stdout
    status = json.loads(tau(env, "run", "status", "quickstart", "-o", "json").stdout)
    assert status["state"] == "succeeded"
    assert [p["status"] for p in status["phases"]] == ["done"] * 9
    metrics = json.loads(tau(env, "run", "metrics", "quickstart", "-o", "json").stdout)
    assert len([m for m in metrics if m["name"] == "loss"]) == 300
    assert "Running entrypoint" in tau(env, "run", "logs", "quickstart", "--tail", "50").stdout
    got = tau(env, "run", "get", "quickstart", "--artifact", "model.npz", "-d", str(tmp_path))
    assert got.returncode == 0 and (tmp_path / "model.npz").stat().st_size > 1000
    hist = json.loads(tau(env, "run", "history", "quickstart", "-o", "json").stdout)
    assert hist["attempts"][0]["exit_code"] == 0 and hist["events"][0]["kind"] == "submitted"


def _quickstart_succeeded(env: dict[str, str]) -> dict[str, Any]:
    """The quickstart's run (run to the end first if no test of the module has yet)."""
    if tau(env, "run", "status", "quickstart").returncode != 0:
        assert tau(env, "run", "examples/quickstart", "--watch").returncode == 0
    run = json.loads(tau(env, "run", "status", "quickstart", "-o", "json").stdout)
    assert run["state"] == "succeeded", run
    return dict(run)


def test_results_by_declared_name_and_a_bad_destination_is_an_error(
    env: dict[str, str], tmp_path: Path
) -> None:
    _quickstart_succeeded(env)
    got = tau(env, "run", "get", "quickstart", "--artifact", "model", "-d", str(tmp_path))
    assert got.returncode == 0, got.stderr  # tau.yaml: outputs: [{name: model, path: model.npz}]
    assert (tmp_path / "model.npz").stat().st_size > 1000
    (tmp_path / "file").write_text("not a directory")
    bad = tau(env, "run", "get", "quickstart", "-d", str(tmp_path / "file" / "out"))
    assert bad.returncode == 2 and "Traceback" not in bad.stderr, bad.stderr
    assert "cannot write" in bad.stderr and "pass -d a directory" in bad.stderr
    wrong = tau(env, "run", "list", "-o", "yaml")  # -o is text or json; yaml is refused
    assert wrong.returncode == 2 and "'yaml' is not one of: text, json" in wrong.stderr


def test_the_store_tokens_and_run_records_are_private(env: dict[str, str]) -> None:
    home = Path(env["TAU_HOME"])
    assert home.stat().st_mode & 0o077 == 0
    record = Path(_quickstart_succeeded(env)["record_dir"])
    files = [home / "hub.db", record / "run.json", *record.rglob("*.npz")]
    files += [*record.glob("logs/*"), *record.glob("metrics/*")]
    assert len(files) > 4
    shared = {str(f): oct(f.stat().st_mode & 0o777) for f in files if f.stat().st_mode & 0o077}
    assert not shared, f"readable by others: {shared}"


def test_up_on_a_running_platform_says_it_is_up(env: dict[str, str]) -> None:
    out = tau(env, "up")
    assert out.returncode == 0, out.stderr
    assert "already up; nothing to start" in out.stderr and "starting" not in out.stderr


def test_cancel_running_returns_when_released(env: dict[str, str], tmp_path: Path) -> None:
    src = ROOT / "examples" / "quickstart"
    work = tmp_path / "slow"
    shutil.copytree(src, work)
    slow = '"--checkpoint-every", "50", "--step-sleep", "0.5"]'
    text = (work / "tau.yaml").read_text().replace('"--checkpoint-every", "50"]', slow)
    (work / "tau.yaml").write_text(text.replace("name: quickstart", "name: slow"))
    sub = tau(env, "run", str(work), "-o", "json")
    assert sub.returncode == 0, sub.stderr
    run_id = json.loads(sub.stdout)["id"]
    deadline = time.time() + 90
    while json.loads(tau(env, "run", "status", run_id, "-o", "json").stdout)["state"] != "running":
        assert time.time() < deadline
        time.sleep(1)
    out = tau(env, "run", "cancel", run_id)
    assert out.returncode == 0 and "cancelled (quota and GPUs released)" in out.stdout, (
        out.stdout + out.stderr
    )


def test_bad_input_is_a_clear_error(env: dict[str, str], tmp_path: Path) -> None:
    (tmp_path / "tau.yaml").write_text(
        "schema_version: 1\nname: x\nrun:\n  entrypoint: t.py\ncompute:\n  gpu: 1\n"
    )
    (tmp_path / "t.py").write_text("print(1)\n")
    bad = tau(env, "run", str(tmp_path))
    assert (
        bad.returncode == 2 and "tau.yaml:6:3" in bad.stderr and "did you mean 'gpus'" in bad.stderr
    )
    big = (tmp_path / "tau.yaml").read_text().replace("gpu: 1", "gpus: 4\n  workers: 3")
    (tmp_path / "tau.yaml").write_text(big)
    out = tau(env, "run", str(tmp_path))
    assert out.returncode == 2 and "12 GPUs" in out.stderr and "Traceback" not in out.stderr
    missing = tau(env, "run", "status", "does-not-exist")
    assert missing.returncode == 2 and "no run named" in missing.stderr


def test_unreachable_hub_is_a_clear_error(env: dict[str, str]) -> None:
    e = {**env, "TAU_HUB_URL": f"http://127.0.0.1:{free_port()}", "TAU_TOKEN": "tau_x"}
    out = tau(e, "run", "list")
    assert (
        out.returncode == 1
        and "cannot reach the TauGrid hub" in out.stderr
        and "Traceback" not in out.stderr
    )
