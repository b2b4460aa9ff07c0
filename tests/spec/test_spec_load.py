"""spec.load: the quickstart, positions, every-problem reporting, files, reuse."""

from __future__ import annotations

import pathlib

import pydantic
import pytest

from taugrid import errors as root_errors
from taugrid.spec import errors, load, models
from tests.spec.spec_builders import QUICKSTART, problems_of


def test_quickstart_loads_exactly() -> None:
    config = load.parse_tau_yaml(QUICKSTART)
    assert config.schema_version == 1
    assert config.name == "aks-gpu-quickstart"
    assert config.run.entrypoint == "train.py"
    assert config.run.workload_kind is models.WorkloadKind.RAYJOB
    assert config.run.args == [] and config.run.working_dir == "."
    assert (config.compute.gpus, config.compute.workers) == (1, 1)
    assert config.compute.cpus == 16.0 and config.compute.memory == "64Gi"
    assert config.compute.gpu_model is None
    assert config.runtime.image == "mcr.microsoft.com/aks/ai-runtime/ray:py3.12-ray2.56.0-cuda13.0"
    assert config.runtime.pip == ["torch>=2.4.0"]
    assert config.serve is None
    assert config.execution.launcher is models.Launcher.PYTHON
    assert config.resilience.backoff.initial == "10s"


def test_load_tau_yaml_reads_a_file(tmp_path: pathlib.Path) -> None:
    path = tmp_path / "tau.yaml"
    path.write_text(QUICKSTART, encoding="utf-8")
    assert load.load_tau_yaml(path) == load.parse_tau_yaml(QUICKSTART)
    assert load.load_tau_yaml(str(path)).name == "aks-gpu-quickstart"


def test_missing_file_is_a_clear_spec_error(tmp_path: pathlib.Path) -> None:
    path = tmp_path / "tau.yaml"
    with pytest.raises(errors.SpecError) as info:
        load.load_tau_yaml(path)
    (problem,) = info.value.problems
    assert (problem.file, problem.line, problem.column) == (str(path), 1, 1)
    assert problem.message == "file not found"
    assert "-c FILE" in problem.hint
    assert isinstance(info.value, root_errors.UserError)


def test_directory_and_non_utf8_files(tmp_path: pathlib.Path) -> None:
    with pytest.raises(errors.SpecError, match="is a directory"):
        load.load_tau_yaml(tmp_path)
    bad = tmp_path / "bad.yaml"
    bad.write_bytes(b"name: \xff\xfe\n")
    with pytest.raises(errors.SpecError, match="is not UTF-8"):
        load.load_tau_yaml(bad)


def test_every_problem_is_reported_in_file_order() -> None:
    text = QUICKSTART.replace("gpus: 1", "gpu: 1").replace("cpus: 16", "cpus: lots")
    text = text.replace("workload_kind: rayjob", "workload_kind: batch")
    found = problems_of(text)
    assert [(p.line, p.path) for p in found] == [
        (5, "run.workload_kind"),
        (7, "compute.gpu"),
        (9, "compute.cpus"),
    ]


def test_spec_error_formats_file_line_col_and_hints() -> None:
    text = QUICKSTART.replace("gpus: 1", "gpu: 1").replace("memory: 64Gi", "memory: 64GB")
    with pytest.raises(errors.SpecError) as info:
        load.parse_tau_yaml(text, "jobs/tau.yaml")
    assert str(info.value) == (
        "jobs/tau.yaml:7:3: error: unknown key 'gpu' in compute; did you mean 'gpus'?\n"
        "  hint: allowed keys in compute: workers, gpus, gpu_model, cpus, memory, head\n"
        "jobs/tau.yaml:10:11: error: compute.memory: '64GB' is not a memory quantity\n"
        "  hint: write a number with a unit such as 512Mi, 64Gi or 1Ti"
    )
    assert info.value.message == str(info.value)
    assert info.value.file == "jobs/tau.yaml"


def test_spec_error_needs_problems() -> None:
    with pytest.raises(ValueError):
        errors.SpecError([])


def test_anchors_and_merge_keys_resolve_with_positions() -> None:
    text = (
        "schema_version: 1\nname: merged\nrun:\n  entrypoint: t.py\n"
        "x-defaults: &base\n  cpus: 4\n  gpus: 99\n"
        "compute:\n  <<: *base\n  gpus: 2\n"
    )
    found = problems_of(text)
    assert [(p.line, p.message) for p in found] == [
        (5, "unknown key 'x-defaults' in the top level"),
    ]
    ok = text.replace("x-defaults: &base\n  cpus: 4\n  gpus: 99\n", "").replace(
        "  <<: *base\n", "  <<: {cpus: 4, gpus: 99}\n"
    )
    config = load.parse_tau_yaml(ok)
    assert (config.compute.cpus, config.compute.gpus) == (4.0, 2)


def test_merged_value_errors_point_at_the_anchor() -> None:
    text = (
        "schema_version: 1\nname: merged\nrun: &r\n  entrypoint: t.py\ncompute:\n  <<: {cpus: -2}\n"
    )
    (problem,) = problems_of(text)
    assert (problem.line, problem.column, problem.path) == (6, 14, "compute.cpus")


class _Small(pydantic.BaseModel):
    model_config = pydantic.ConfigDict(extra="forbid")

    region: str
    replicas: int = pydantic.Field(default=1, ge=1)
    labels: dict[str, str] = pydantic.Field(default_factory=dict)


def test_load_model_works_for_any_model() -> None:
    loaded = load.load_model("region: west\nreplicas: 3\n", "platform.yaml", _Small)
    assert loaded == _Small(region="west", replicas=3)
    with pytest.raises(errors.SpecError) as info:
        load.load_model("regoin: west\nreplicas: 0\n", "platform.yaml", _Small)
    assert [p.format().splitlines()[0] for p in info.value.problems] == [
        "platform.yaml:1:1: error: missing required key 'region' in the top level",
        "platform.yaml:1:1: error: unknown key 'regoin' in the top level; did you mean 'region'?",
        "platform.yaml:2:11: error: replicas must be at least 1, got 0",
    ]


def test_load_file_for_any_model(tmp_path: pathlib.Path) -> None:
    path = tmp_path / "platform.yaml"
    path.write_text("region: east\nlabels: {a: b}\n", encoding="utf-8")
    assert load.load_file(path, _Small).labels == {"a": "b"}
    with pytest.raises(errors.SpecError, match="check the path"):
        load.load_file(tmp_path / "missing.yaml", _Small)


def test_problem_to_dict_is_json_ready() -> None:
    (problem,) = problems_of(QUICKSTART.replace("gpus: 1", "gpus: two"))
    assert problem.to_dict() == {
        "file": "tau.yaml",
        "line": 7,
        "column": 9,
        "message": "compute.gpus must be a number, got 'two'",
        "hint": "write e.g. 'gpus: 2'",
        "path": "compute.gpus",
    }
