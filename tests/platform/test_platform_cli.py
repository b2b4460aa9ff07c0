"""The platform commands through the real ``tau`` console script (a subprocess)."""

from __future__ import annotations

import json
import os
import pathlib
import shutil
import subprocess
import sys
import textwrap

import pytest
import yaml

from taugrid.cli import platform_cmds
from tests.render import render_builders as rb

TAU = shutil.which("tau") or str(pathlib.Path(sys.executable).parent / "tau")


def _tau(
    *args: str, env: dict[str, str] | None = None, cwd: pathlib.Path | None = None
) -> subprocess.CompletedProcess[str]:
    full_env = {k: v for k, v in os.environ.items() if k != "TAU_PLATFORM_FILE"}
    full_env.update(env or {})
    return subprocess.run(
        [TAU, *args],
        capture_output=True,
        text=True,
        env=full_env,
        cwd=cwd,
        timeout=120,
        check=False,
    )


@pytest.fixture
def platform_file(tmp_path: pathlib.Path) -> pathlib.Path:
    path = tmp_path / "platform.yaml"
    path.write_text(rb.PLATFORM_YAML)
    return path


TAU_YAML = textwrap.dedent(
    """\
    schema_version: 1
    name: demo
    run:
      entrypoint: train.py
    compute:
      workers: 2
      gpus: 2
    policy:
      workspace: cv
      priority: high
    """
)


@pytest.fixture
def tau_yaml(tmp_path: pathlib.Path) -> pathlib.Path:
    path = tmp_path / "tau.yaml"
    path.write_text(TAU_YAML)
    return path


def test_validate_default_and_file(platform_file: pathlib.Path) -> None:
    done = _tau("platform", "validate")
    assert done.returncode == 0, done.stderr
    assert "valid" in done.stdout and "8 gpus" in done.stdout
    done = _tau("platform", "validate", "-f", str(platform_file), "-o", "json")
    doc = json.loads(done.stdout)
    assert doc["valid"] and doc["summary"]["gpus_by_model"] == {"A100-80G": 32, "H100": 16, "L4": 6}


def test_validate_reports_problems_with_exit_2(tmp_path: pathlib.Path) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text("teams:\n  - name: a\n  - name: a\n")
    done = _tau("platform", "validate", "-f", str(bad))
    assert done.returncode == 2
    assert f"{bad}:3:11: error: duplicate name 'a'" in done.stderr
    assert "Traceback" not in done.stderr
    doc = json.loads(_tau("platform", "validate", "-f", str(bad), "-o", "json").stdout)
    assert doc["valid"] is False and doc["problems"][0]["line"] == 3


def test_env_var_selects_the_platform(platform_file: pathlib.Path) -> None:
    done = _tau("platform", "show", "-o", "json", env={"TAU_PLATFORM_FILE": str(platform_file)})
    doc = json.loads(done.stdout)
    assert [w["name"] for w in doc["platform"]["workspaces"]] == ["nlp", "cv"]


def test_show_text_and_yaml(platform_file: pathlib.Path) -> None:
    done = _tau("platform", "show", "-f", str(platform_file))
    assert done.returncode == 0, done.stderr
    for needle in (
        "us-east",
        "east-k8s",
        "a100",
        "32",
        "4.00",
        "gpu-small",
        "StrictFIFO",
        "ws-nlp",
    ):
        assert needle in done.stdout
    doc = yaml.safe_load(_tau("platform", "show", "-f", str(platform_file), "-o", "yaml").stdout)
    assert doc["summary"]["gpus"] == 54


def test_manifests(platform_file: pathlib.Path) -> None:
    done = _tau("platform", "manifests", "-f", str(platform_file))
    kinds = [d["kind"] for d in yaml.safe_load_all(done.stdout)]
    assert {"ResourceFlavor", "ClusterQueue", "LocalQueue", "TauTeam", "Namespace"} <= set(kinds)


def test_explain_config(platform_file: pathlib.Path, tau_yaml: pathlib.Path) -> None:
    done = _tau(
        "run", "explain-config", "-c", str(tau_yaml), "-f", str(platform_file), "-o", "json"
    )
    assert done.returncode == 0, done.stderr
    doc = json.loads(done.stdout)
    assert doc["spec"]["priority"] == "high" and doc["total_gpus"] == 4
    assert doc["provenance"]["priority"] == f"{tau_yaml}:10"
    assert doc["provenance"]["workers"] == f"{tau_yaml}:6"
    # the format is the file's: credited to its schema_version line, not a built-in
    assert doc["provenance"]["spec_version"] == f"{tau_yaml}:1 (schema_version: 1)"
    tau_yaml.write_text(TAU_YAML.replace("schema_version: 1\n", ""))
    unversioned = _tau(
        "run", "explain-config", "-c", str(tau_yaml), "-f", str(platform_file), "-o", "json"
    )
    prov = json.loads(unversioned.stdout)["provenance"]
    assert prov["spec_version"] == "built-in default (the file has no schema_version)"
    tau_yaml.write_text(TAU_YAML)
    text = _tau("run", "explain-config", "-c", str(tau_yaml), "-f", str(platform_file)).stdout
    assert f"{tau_yaml}:7" in text and "built-in default" in text


def test_explain_config_fails_closed(platform_file: pathlib.Path, tmp_path: pathlib.Path) -> None:
    path = tmp_path / "tau.yaml"
    path.write_text(TAU_YAML.replace("workspace: cv", "workspace: nope"))
    done = _tau("run", "explain-config", "-c", str(path), "-f", str(platform_file))
    assert done.returncode == 2
    assert f"{path}:9: unknown workspace 'nope'" in done.stderr
    assert "hint: use one of" in done.stderr and "Traceback" not in done.stderr


def test_dry_run_text(platform_file: pathlib.Path, tau_yaml: pathlib.Path) -> None:
    text = platform_cmds.dry_run_text(tau_yaml, "yaml", platform_path=platform_file, run_id="r1")
    (job,) = list(yaml.safe_load_all(text))
    assert job["kind"] == "RayJob" and job["metadata"]["name"] == "r1"
    doc = json.loads(platform_cmds.dry_run_text(tau_yaml, "json", platform_path=platform_file))
    assert doc["items"][0]["metadata"]["labels"]["kueue.x-k8s.io/priority-class"] == "high"
    with pytest.raises(ValueError, match="output"):
        platform_cmds.dry_run_text(tau_yaml, "xml")


def test_dry_run_workspace_override(platform_file: pathlib.Path, tau_yaml: pathlib.Path) -> None:
    text = platform_cmds.dry_run_text(
        tau_yaml, "yaml", platform_path=platform_file, run_id="r1", workspace="nlp"
    )
    (job,) = list(yaml.safe_load_all(text))
    assert job["metadata"]["namespace"] == "ws-nlp"
    assert '"workspace":"--workspace"' in job["metadata"]["annotations"]["taugrid.io/provenance"]
