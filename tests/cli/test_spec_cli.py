"""``tau run validate`` and ``tau run schema`` through the real console script."""

from __future__ import annotations

import json
import os
import pathlib
import shutil
import subprocess
import sys

import pytest

from tests.spec.spec_builders import QUICKSTART

BROKEN = QUICKSTART.replace("gpus: 1", "gpu: 1").replace("cpus: 16", "cpus: lots")
OFFLINE = (
    "  note: offline: workspace, profile, priority, regions, GPU model, capacity, datasets, "
    "output store not checked"
)
UNCHECKED = [
    "workspace",
    "profile",
    "priority",
    "regions",
    "gpu_model",
    "capacity",
    "datasets",
    "output_store",
]


def tau_script() -> str:
    """The installed ``tau`` console script (beside this interpreter, else on PATH)."""
    beside = pathlib.Path(sys.executable).parent / "tau"
    found = str(beside) if beside.exists() else shutil.which("tau")
    if found is None:
        pytest.fail("the tau console script is not installed (pip install -e .)")
    return found


def tau(
    *args: str, cwd: pathlib.Path, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    """``tau ARGS`` in ``cwd``; no platform unless ``env`` names one (``TAU_HOME`` is
    ``cwd/.tau-home``, which nothing creates: ``validate`` reads only)."""
    base = {k: v for k, v in os.environ.items() if k not in ("TAU_HUB_URL", "TAU_TOKEN")}
    home = str(cwd / ".tau-home")
    full = {**base, "TAU_HOME": home, "COLUMNS": "60", "NO_COLOR": "1", **(env or {})}
    return subprocess.run(
        [tau_script(), *args], cwd=cwd, env=full, capture_output=True, text=True, timeout=60
    )


@pytest.fixture
def workdir(tmp_path: pathlib.Path) -> pathlib.Path:
    (tmp_path / "tau.yaml").write_text(QUICKSTART, encoding="utf-8")
    (tmp_path / "broken.yaml").write_text(BROKEN, encoding="utf-8")
    (tmp_path / "train.py").write_text("print('hi')\n", encoding="utf-8")
    return tmp_path


def test_validate_offline_says_what_it_could_not_check(workdir: pathlib.Path) -> None:
    result = tau("run", "validate", cwd=workdir)
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert lines[:2] == [
        "tau.yaml: valid (offline) - aks-gpu-quickstart (rayjob, 1 worker, 1 GPU per worker, "
        "16 CPUs per worker, 64Gi memory per worker)",
        OFFLINE,
    ]
    assert lines[2].startswith("  note: no platform reachable: the TauGrid platform is not running")
    assert "start it with: tau up" in lines[2] and len(lines) == 3
    assert not (workdir / ".tau-home").exists()  # read-only: nothing started, nothing written
    assert result.stderr == ""


def test_validate_reports_every_problem_and_exits_2(workdir: pathlib.Path) -> None:
    result = tau("run", "validate", "-c", "broken.yaml", cwd=workdir)
    assert result.returncode == 2
    assert result.stdout == ""
    assert result.stderr.splitlines() == [
        "broken.yaml:7:3: error: unknown key 'gpu' in compute; did you mean 'gpus'?",
        "  hint: allowed keys in compute: workers, gpus, gpu_model, cpus, memory, head",
        "broken.yaml:9:9: error: compute.cpus must be a number, got 'lots'",
        "  hint: write e.g. 'cpus: 2'",
        "broken.yaml: 2 problems",
    ]
    assert "Traceback" not in result.stderr


def test_validate_json_success(workdir: pathlib.Path) -> None:
    result = tau("run", "validate", "-c", "tau.yaml", "-o", "json", cwd=workdir)
    assert result.returncode == 0
    document = json.loads(result.stdout)
    assert document["valid"] is True
    assert document["name"] == "aks-gpu-quickstart"
    assert document["config"]["compute"]["memory"] == "64Gi"
    assert document["config"]["runtime"]["pip"] == ["torch>=2.4.0"]
    assert document["checked"] == ["schema", "working_dir", "entrypoint"]
    assert document["unchecked"] == UNCHECKED
    assert document["platform"]["reachable"] is False
    assert "not running" in document["platform"]["reason"]
    assert "tau up" in document["platform"]["hint"]


def test_validate_offline_says_why_an_unanswering_hub_left_it_unchecked(
    workdir: pathlib.Path,
) -> None:
    env = {"TAU_HUB_URL": "http://127.0.0.1:9", "TAU_TOKEN": "tau_x"}
    result = tau("run", "validate", cwd=workdir, env=env)
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert lines[1] == OFFLINE and len(lines) == 3
    assert lines[2].startswith(
        "  note: no platform reachable: cannot reach the TauGrid hub at http://127.0.0.1:9: "
    )
    assert "start the embedded platform with `tau up`" in result.stdout


@pytest.mark.parametrize("command", [("run", "validate", "-c"), ("run",)])
def test_a_missing_entrypoint_script_is_refused_at_its_line_by_validate_and_submit(
    tmp_path: pathlib.Path, command: tuple[str, ...]
) -> None:
    (tmp_path / "tau.yaml").write_text(
        "schema_version: 1\nname: a\nrun:\n  entrypoint: python  src/train.py --lr 1\n"
    )
    result = tau(*command, "tau.yaml", cwd=tmp_path, env=_no_platform(tmp_path))
    assert result.returncode == 2, result.stdout + result.stderr
    assert result.stderr.splitlines()[:2] == [
        "tau.yaml:4:15: error: run.entrypoint 'python  src/train.py --lr 1' runs "
        f"src/train.py, which is not in {tmp_path.resolve()}",
        f"  hint: add src/train.py to {tmp_path.resolve()}, or fix run.entrypoint: a script "
        "path (train.py) or a command (python train.py), relative to run.working_dir",
    ]
    assert "Traceback" not in result.stderr and not (tmp_path / "home").exists()


def test_a_working_dir_that_is_no_directory_is_refused_at_its_line(tmp_path: pathlib.Path) -> None:
    (tmp_path / "tau.yaml").write_text(
        "name: a\nrun:\n  entrypoint: train.py\n  working_dir: code\n"
    )
    result = tau("run", "validate", "-o", "json", cwd=tmp_path)
    assert result.returncode == 2
    (problem,) = json.loads(result.stdout)["problems"]
    assert (problem["line"], problem["column"], problem["path"]) == (4, 16, "run.working_dir")
    assert problem["message"].startswith("run.working_dir 'code' is not a directory")


def test_validate_json_failure(workdir: pathlib.Path) -> None:
    result = tau("run", "validate", "--config", "broken.yaml", "--output", "json", cwd=workdir)
    assert result.returncode == 2
    document = json.loads(result.stdout)
    assert document["valid"] is False
    assert [(p["line"], p["column"], p["path"]) for p in document["problems"]] == [
        (7, 3, "compute.gpu"),
        (9, 9, "compute.cpus"),
    ]
    assert document["problems"][0]["hint"].startswith("allowed keys in compute")


def test_validate_missing_file(tmp_path: pathlib.Path) -> None:
    result = tau("run", "validate", cwd=tmp_path)
    assert result.returncode == 2
    assert result.stderr.startswith("tau.yaml:1:1: error: file not found\n  hint: run from")
    assert "Traceback" not in result.stderr


def test_platform_file_not_found_hint_names_no_other_option(tmp_path: pathlib.Path) -> None:
    result = tau("platform", "validate", "-f", "platform.yaml", cwd=tmp_path)
    assert result.returncode == 2 and "platform.yaml:1:1: error: file not found" in result.stderr
    assert "-c FILE" not in result.stderr, result.stderr  # `tau platform` takes -f, not -c


def test_validate_yaml_syntax_error(workdir: pathlib.Path) -> None:
    (workdir / "tau.yaml").write_text("name: [oops\nrun:\n", encoding="utf-8")
    result = tau("run", "validate", cwd=workdir)
    assert result.returncode == 2
    assert result.stderr.splitlines()[:2] == [
        "tau.yaml:2:4: error: invalid YAML: expected ',' or ']', but got ':'",
        "  hint: close the '[' or '{' opened at line 1, column 7",
    ]
    assert "Traceback" not in result.stderr


def test_validate_rejects_an_unknown_output_format(workdir: pathlib.Path) -> None:
    result = tau("run", "validate", "-o", "yaml", cwd=workdir)
    assert result.returncode == 2
    assert "yaml" in result.stderr


def test_schema_prints_the_json_schema(workdir: pathlib.Path) -> None:
    result = tau("run", "schema", cwd=workdir)
    assert result.returncode == 0
    document = json.loads(result.stdout)
    assert document["title"] == "tau.yaml"
    assert "ComputeSpec" in document["$defs"]
    assert document["properties"]["schema_version"]["description"] == "Always 1 for this format."


def _no_platform(tmp_path: pathlib.Path) -> dict[str, str]:
    """A hub that does not answer: a submit that got past validation fails, starts nothing."""
    return {
        "TAU_HOME": str(tmp_path / "home"),
        "TAU_HUB_URL": "http://127.0.0.1:9",
        "TAU_TOKEN": "tau_x",
    }


LATIN1 = "schema_version: 1\nname: a\nrun:\n  entrypoint: train.py\n  args: ['caf\xe9']\n"


@pytest.mark.parametrize("command", [("run", "validate", "-c"), ("run",)])
def test_non_utf8_tau_yaml_names_the_bad_line_on_validate_and_submit(
    tmp_path: pathlib.Path, command: tuple[str, ...]
) -> None:
    (tmp_path / "tau.yaml").write_bytes(LATIN1.encode("latin-1"))
    (tmp_path / "train.py").write_text("print('hi')\n")
    result = tau(*command, "tau.yaml", cwd=tmp_path, env=_no_platform(tmp_path))
    assert result.returncode == 2, result.stderr
    assert "Traceback" not in result.stderr
    assert "tau.yaml:5:14: error: is not UTF-8 text: byte 0xe9 at line 5" in result.stderr
    assert "save the file as UTF-8" in result.stderr
    assert not (tmp_path / "home").exists()


@pytest.mark.parametrize("command", [("run", "validate", "-c"), ("run",)])
def test_oversized_tau_yaml_is_refused_before_parsing(
    tmp_path: pathlib.Path, command: tuple[str, ...]
) -> None:
    padding = "# " + "x" * 1000 + "\n"
    (tmp_path / "tau.yaml").write_text(
        "schema_version: 1\nname: a\nrun:\n  entrypoint: train.py\n" + padding * 2100
    )
    (tmp_path / "train.py").write_text("print('hi')\n")
    result = tau(*command, "tau.yaml", cwd=tmp_path, env=_no_platform(tmp_path))
    assert result.returncode == 2, result.stderr
    assert "is 2.0 MiB; spec files may be at most 1 MiB" in result.stderr
    assert "alias" not in result.stderr and "Traceback" not in result.stderr


def test_minimal_tau_yaml_is_valid_and_validate_says_it_assumed_the_version(
    tmp_path: pathlib.Path,
) -> None:
    (tmp_path / "mini.yaml").write_text("name: mini\nrun:\n  entrypoint: train.py\n")
    (tmp_path / "train.py").write_text("print('hi')\n")
    result = tau("run", "validate", "mini.yaml", cwd=tmp_path)  # FILE as an argument
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines()[:3] == [
        "mini.yaml: valid (offline) - mini (rayjob)",
        "  note: no schema_version: assumed 1 (the current version); "
        "add 'schema_version: 1' to pin it",
        OFFLINE,
    ]
    document = json.loads(
        tau("run", "validate", "-c", "mini.yaml", "-o", "json", cwd=tmp_path).stdout
    )
    assert document["valid"] is True and document["config"]["schema_version"] == 1
    assert document["notes"] and "assumed 1" in document["notes"][0]


def test_validate_takes_the_file_positionally(workdir: pathlib.Path) -> None:
    result = tau("run", "validate", "broken.yaml", cwd=workdir)
    assert result.returncode == 2
    assert result.stderr.splitlines()[-1] == "broken.yaml: 2 problems"


def test_a_word_schema_version_suggests_the_current_version(tmp_path: pathlib.Path) -> None:
    (tmp_path / "tau.yaml").write_text(
        'schema_version: "one"\nname: a\nrun:\n  entrypoint: train.py\n'
    )
    result = tau("run", "validate", cwd=tmp_path)
    assert result.returncode == 2
    assert result.stderr.splitlines()[:2] == [
        "tau.yaml:1:17: error: schema_version must be a whole number, got 'one'",
        "  hint: write 'schema_version: 1' (the current version), or leave it out",
    ]


@pytest.mark.parametrize(("memory", "limit"), [("999999999Ti", "64Ti"), ("99999999Gi", "65536Gi")])
def test_absurd_memory_is_caught_by_validate_in_the_users_unit(
    tmp_path: pathlib.Path, memory: str, limit: str
) -> None:
    (tmp_path / "tau.yaml").write_text(
        f"schema_version: 1\nname: a\nrun:\n  entrypoint: train.py\ncompute:\n  memory: {memory}\n"
    )
    result = tau("run", "validate", cwd=tmp_path)
    assert result.returncode == 2
    assert result.stderr.splitlines()[0] == (
        f"tau.yaml:6:11: error: compute.memory: '{memory}' is more than the {limit} "
        "one node can have"
    )
    assert "e+" not in result.stderr


def test_run_help_shows_how_to_submit(tmp_path: pathlib.Path) -> None:
    result = tau("run", "--help", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert "tau run [TARGET] [-c FILE] [--watch]" in result.stdout
    assert "Example: tau run examples/quickstart --watch" in result.stdout


def test_a_mistyped_run_subcommand_is_a_typo_not_a_submission(tmp_path: pathlib.Path) -> None:
    typo = tau("run", "lst", cwd=tmp_path, env={"COLUMNS": "200"})
    assert typo.returncode == 2
    assert "Did you mean 'tau run list'?" in typo.stdout + typo.stderr
    missing = tau("run", "no-such-dir", cwd=tmp_path, env={"COLUMNS": "200"})
    assert missing.returncode == 2
    assert "no tau.yaml at no-such-dir" in missing.stdout + missing.stderr
