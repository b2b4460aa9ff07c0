"""``tau run validate`` against a real hub (issue 36 item 5): what submit refuses, validate
refuses first, with submit's words; what the hub accepts is valid and stored nowhere.

Runs the real console script against a hub served by the test (``tests.hub.harness``,
the packaged default platform: workspace ``default``, GPU model ``A100-80G``, 8 GPUs;
``TAU_HUB_URL``/``TAU_TOKEN``; no Ray).
"""

from __future__ import annotations

import json
import pathlib

import pytest

from tests.cli.test_spec_cli import tau
from tests.hub.harness import HubServer
from tests.spec.spec_builders import QUICKSTART


def _env(server: HubServer) -> dict[str, str]:
    return {"TAU_HUB_URL": server.url, "TAU_TOKEN": server.admin_token, "COLUMNS": "200"}


def _project(tmp_path: pathlib.Path, text: str) -> pathlib.Path:
    work = tmp_path / "project"
    work.mkdir()
    (work / "tau.yaml").write_text(text, encoding="utf-8")
    (work / "train.py").write_text("print('hi')\n", encoding="utf-8")
    return work


REFUSED = [
    pytest.param(
        QUICKSTART + "policy:\n  workspace: nope\n",
        [
            "error: tau.yaml:16: unknown workspace 'nope'",
            "  hint: use one of ['default']",
        ],
        id="unknown-workspace",
    ),
    pytest.param(
        QUICKSTART.replace("gpus: 1", "gpus: 1\n  gpu_model: H100"),
        [
            "error: tau.yaml:8: GPU model 'H100' is not offered by this platform",
            "  hint: use one of ['A100-80G']",
        ],
        id="unknown-gpu-model",
    ),
]


@pytest.mark.parametrize(("text", "says"), REFUSED)
def test_validate_refuses_what_submit_refuses_with_the_same_message(
    server: HubServer, tmp_path: pathlib.Path, text: str, says: list[str]
) -> None:
    work = _project(tmp_path, text)
    checked = tau("run", "validate", cwd=work, env=_env(server))
    submitted = tau("run", "tau.yaml", cwd=work, env=_env(server))
    assert checked.returncode == 2, checked.stdout + checked.stderr
    assert checked.stderr.splitlines() == says
    assert (submitted.returncode, submitted.stderr) == (2, checked.stderr)
    doc = json.loads(tau("run", "validate", "-o", "json", cwd=work, env=_env(server)).stdout)
    assert doc["valid"] is False and doc["unchecked"] == []
    assert doc["error"]["message"] == says[0].removeprefix("error: ")
    assert server.hub.runs.list_runs(None, None, 10) == []


def test_validate_checks_a_valid_file_on_the_platform_and_stores_nothing(
    server: HubServer, tmp_path: pathlib.Path
) -> None:
    text = QUICKSTART.replace("gpus: 1", "gpus: 1\n  gpu_model: A100-80G")
    work = _project(tmp_path, text)  # its AKS image: no region here runs images
    refused = tau("run", "validate", cwd=work, env=_env(server))
    assert refused.returncode == 2 and "no region of this platform runs jobs in images" in (
        refused.stderr
    )
    (tmp_path / "no-image").mkdir()
    work = _project(
        tmp_path / "no-image",
        "\n".join(line for line in text.splitlines() if not line.startswith("  image:")) + "\n",
    )
    result = tau("run", "validate", cwd=work, env=_env(server))
    assert result.returncode == 0, result.stdout + result.stderr
    assert result.stdout.splitlines() == [
        "tau.yaml: valid - aks-gpu-quickstart (rayjob, 1 worker, 1 GPU A100-80G per worker, "
        "16 CPUs per worker, 64Gi memory per worker)",
        f"  checked on the platform at {server.url}: workspace 'default', profile, priority, "
        "regions, GPU model, capacity, datasets, output store",
    ]
    doc = json.loads(tau("run", "validate", "-o", "json", cwd=work, env=_env(server)).stdout)
    assert doc["platform"] == {"reachable": True, "url": server.url, "workspace": "default"}
    assert doc["unchecked"] == [] and "gpu_model" in doc["checked"]
    assert server.hub.runs.list_runs(None, None, 10) == []
    # --workspace overrides policy.workspace as it does for tau run
    overridden = tau("run", "validate", "--workspace", "nope", cwd=work, env=_env(server))
    submitted = tau("run", "--workspace", "nope", cwd=work, env=_env(server))
    assert overridden.returncode == 2 and "unknown workspace 'nope'" in overridden.stderr
    assert (submitted.returncode, submitted.stderr) == (2, overridden.stderr)
    assert server.hub.runs.list_runs(None, None, 10) == []
