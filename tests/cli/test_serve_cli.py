"""``tau serve`` through the real console script, hub, agent and Ray Serve.

The quickstart is trained once on an embedded platform; its model is deployed with
the quickstart's ``serve_app.py`` and classifies digits over HTTP at the endpoint
``tau serve status -o json`` gives; the deployment scales, is updated to a checkpoint
under a steady stream of requests with none failing, and its delete releases the
quota. Bad input: a missing checkpoint or artifact fails before any run exists; an
app that cannot be imported ends Failed with the import error and releases its GPUs.
"""

from __future__ import annotations

import json
import shutil
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from sklearn.datasets import load_digits

from tests.cli import platform_env as pe
from tests.hub import serve_regions

pytestmark = [pytest.mark.ray, pytest.mark.slow, pytest.mark.long, pytest.mark.timeout(900)]

IP = "127.0.28.2"
QUICKSTART = pe.ROOT / "examples" / "quickstart"


@pytest.fixture(scope="module")
def env(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, str]]:
    with pe.embedded_platform(tmp_path_factory.mktemp("tau-home"), IP) as e:
        yield e


@pytest.fixture(scope="module")
def project(tmp_path_factory: pytest.TempPathFactory) -> Path:
    work = tmp_path_factory.mktemp("quickstart") / "quickstart"
    shutil.copytree(QUICKSTART, work, ignore=shutil.ignore_patterns(".tau-local"))
    return work


@pytest.fixture(scope="module")
def trained(env: dict[str, str], project: Path) -> str:
    out = pe.tau(env, "run", str(project), "--watch", "-o", "json", timeout=300)
    assert out.returncode == 0, out.stderr + out.stdout
    runs = json.loads(pe.tau(env, "run", "list", "-o", "json").stdout)
    (run,) = [r for r in runs if r["name"] == "quickstart"]
    return str(run["id"])


def _status(env: dict[str, str], name: str) -> dict[str, Any]:
    out = pe.tau(env, "serve", "status", name, "-o", "json")
    assert out.returncode == 0, out.stderr
    doc: dict[str, Any] = json.loads(out.stdout)
    return doc


def _run(env: dict[str, str], run_id: str) -> dict[str, Any]:
    doc: dict[str, Any] = json.loads(pe.tau(env, "run", "status", run_id, "-o", "json").stdout)
    return doc


def _released(env: dict[str, str], run_id: str, timeout_s: float = 120) -> dict[str, Any]:
    deadline = time.time() + timeout_s
    while True:
        run = _run(env, run_id)
        phases = {p["phase"]: p["status"] for p in run["phases"]}
        if phases["released"] == "done" or time.time() > deadline:
            return run
        time.sleep(1)


def _classify(endpoint: str, n: int = 20) -> int:
    """How many of the first ``n`` digits the endpoint classifies correctly."""
    x, y = load_digits(return_X_y=True)
    right = 0
    for i in range(n):
        r = httpx.post(endpoint, json={"pixels": x[i].tolist()}, timeout=30)
        assert r.status_code == 200, r.text
        right += int(r.json()["class"] == y[i])
    return right


@pytest.mark.long
def test_deploy_classify_scale_update_delete(
    env: dict[str, str], project: Path, trained: str
) -> None:
    out = pe.tau(env, "serve", "deploy", "digits", "--from-run", trained, "--wait", cwd=project)
    assert out.returncode == 0, out.stderr + out.stdout
    dep = _status(env, "digits")
    assert dep["phase"] == "Ready" and dep["source"]["run"] == trained
    assert dep["endpoint"] == f"http://{IP}:8000/digits"
    assert dep["replicas"]["ready"] == 1 and dep["gpus"] == 1
    assert _classify(dep["endpoint"]) >= 18
    first = dep["run_id"]

    out = pe.tau(env, "serve", "scale", "digits", "--replicas", "2", "--wait")
    assert out.returncode == 0, out.stderr + out.stdout
    dep = _status(env, "digits")
    assert dep["replicas"] == {"ready": 2, "desired": 2, "autoscaling": None}
    assert dep["gpus"] == 2 and dep["run_id"] != first
    assert _run(env, first)["state"] == "succeeded"  # replaced: its quota went back

    with serve_regions.Load(dep["endpoint"]) as load:
        upd = pe.tau(
            env,
            "serve",
            "update",
            "digits",
            "--from-run",
            trained,
            "--checkpoint",
            "latest",
            "-c",
            str(project / "serve.yaml"),
            "--wait",
        )
        assert upd.returncode == 0, upd.stderr + upd.stdout
        time.sleep(2)
    assert load.ok > 20 and load.failed == [], load.failed[:5]
    dep = _status(env, "digits")
    assert dep["phase"] == "Ready" and dep["source"]["checkpoint"] == "step-00000300"
    assert _classify(dep["endpoint"]) >= 18

    listed = json.loads(pe.tau(env, "serve", "list", "-o", "json").stdout)
    assert [(d["name"], d["phase"]) for d in listed] == [("digits", "Ready")]
    logs = pe.tau(env, "serve", "logs", "digits")
    assert "serve: deploying digits" in logs.stdout, logs.stdout[-2000:]

    out = pe.tau(env, "serve", "delete", "digits", "-o", "json")
    assert out.returncode == 0 and json.loads(out.stdout)["phase"] == "Deleted", out.stderr
    run = _released(env, dep["run_id"])
    assert run["state"] == "cancelled" and not run["quota_held"], run["reason"]
    assert _gone(dep["endpoint"])


def _gone(endpoint: str, timeout_s: float = 60) -> bool:
    """Whether the proxy stops routing ``endpoint`` (404) within ``timeout_s``."""
    deadline = time.time() + timeout_s
    while time.time() < deadline:
        if httpx.post(endpoint, json={"pixels": [0] * 64}, timeout=30).status_code == 404:
            return True
        time.sleep(1)
    return False


@pytest.mark.long
def test_missing_checkpoint_or_artifact_fails_before_anything_starts(
    env: dict[str, str], project: Path, trained: str
) -> None:
    before = len(json.loads(pe.tau(env, "run", "list", "-o", "json").stdout))
    cases = {
        ("--checkpoint", "999"): f"run {trained} has no complete checkpoint at step 999",
        ("--artifact", "nope.npz"): f"run {trained} has no artifact 'nope.npz'",
        ("--checkpoint", "newest"): "is not 'latest' or a step number",
    }
    for flag, message in cases.items():
        out = pe.tau(env, "serve", "deploy", "bad", "--from-run", trained, *flag, cwd=project)
        assert out.returncode == 2 and message in out.stderr, out.stderr
        assert "Traceback" not in out.stderr
    out = pe.tau(env, "serve", "deploy", "bad", "--from-run", "no-such-run", cwd=project)
    assert out.returncode == 2 and "no run named 'no-such-run'" in out.stderr, out.stderr
    after = json.loads(pe.tau(env, "run", "list", "-o", "json").stdout)
    assert len(after) == before
    assert pe.tau(env, "serve", "status", "bad").returncode == 2


@pytest.mark.long
def test_app_that_fails_to_import_is_failed_and_releases_quota(
    env: dict[str, str], project: Path, trained: str
) -> None:
    (project / "broken_app.py").write_text("import no_such_module_xyz\n")
    cfg = (project / "serve.yaml").read_text()
    cfg = cfg.replace("serve_app:app", "broken_app:app").replace("serve_app.py", "broken_app.py")
    (project / "broken.yaml").write_text(cfg.replace("name: digits", "name: broken"))
    out = pe.tau(
        env,
        "serve",
        "deploy",
        "broken",
        "--from-run",
        trained,
        "-c",
        str(project / "broken.yaml"),
        "--wait",
        cwd=project,
    )
    assert out.returncode == 1, out.stderr + out.stdout
    dep = _status(env, "broken")
    assert dep["phase"] == "Failed"
    assert "No module named 'no_such_module_xyz'" in dep["reason"], dep["reason"]
    run = _released(env, dep["run_id"])
    assert run["state"] == "failed" and not run["quota_held"]
    phases = {p["phase"]: p["status"] for p in run["phases"]}
    assert phases["released"] == "done"


@pytest.mark.long
def test_model_registry_best_by_aliases_lineage_and_deploy_by_alias(
    env: dict[str, str], project: Path, trained: str, tmp_path: Path
) -> None:
    short = tmp_path / "short"
    shutil.copytree(project, short)
    text = (short / "tau.yaml").read_text().replace('"--steps", "300"', '"--steps", "5"')
    (short / "tau.yaml").write_text(text)
    out = pe.tau(env, "run", str(short), "--watch", timeout=300)
    assert out.returncode == 0, out.stderr + out.stdout

    def register(*args: str) -> dict[str, Any]:
        out = pe.tau(env, "model", "register", "mnist-mlp", *args, "-o", "json")
        assert out.returncode == 0, out.stderr
        doc: dict[str, Any] = json.loads(out.stdout)
        return doc

    best = register("--from-run", "quickstart", "--best-by", "val_accuracy", "--alias", "staging")
    assert best["version"] == 1 and best["source"]["run"] == trained
    assert best["lineage"]["chosen_by"]["candidates"] == 2
    worst = register("--from-run", "quickstart", "--best-by", "min:val_accuracy")
    assert worst["version"] == 2 and worst["source"]["run"] != trained
    ckpt = register("--from-run", trained, "--checkpoint", "latest")
    assert ckpt["source"]["checkpoint"] == "step-00000300"

    moved = pe.tau(env, "model", "alias", "mnist-mlp", "staging", "--version", "3")
    assert moved.returncode == 0, moved.stderr
    pe.tau(env, "model", "alias", "mnist-mlp", "production", "--version", "1")
    shown = json.loads(pe.tau(env, "model", "show", "mnist-mlp@production", "-o", "json").stdout)
    assert [v["aliases"] for v in shown["versions"]] == [["production"], [], ["staging"]]
    lineage = shown["resolved"]["lineage"]
    assert lineage["run"] == trained and lineage["datasets"] == []
    assert lineage["config_hash"] == _run(env, trained)["spec"]["config_hash"]
    bad = pe.tau(env, "model", "show", "mnist-mlp@canary")
    assert bad.returncode == 2 and "has no version or alias 'canary'" in bad.stderr

    out = pe.tau(env, "serve", "deploy", "prod", "--model", "nope@production", cwd=project)
    assert out.returncode == 2 and "no model named 'nope'" in out.stderr, out.stderr
    out = pe.tau(
        env, "serve", "deploy", "prod", "--model", "mnist-mlp@production", "--wait", cwd=project
    )
    assert out.returncode == 0, out.stderr + out.stdout
    dep = _status(env, "prod")
    assert dep["source"]["model"] == "mnist-mlp@v1" and dep["source"]["run"] == trained
    assert _classify(dep["endpoint"]) >= 18
    assert pe.tau(env, "serve", "delete", "prod").returncode == 0
    assert _released(env, dep["run_id"])["state"] == "cancelled"
    # an output's declared name (tau.yaml: outputs: [{name: model, path: model.npz}])
    named = register("--from-run", trained, "--artifact", "model")
    assert named["version"] == 4 and named["source"]["artifact"] == "model.npz"
