"""spec.schema / spec.docgen: the JSON Schema and the generated docs/tau-yaml.md."""

from __future__ import annotations

import pathlib

import jsonschema
import pytest
from ruamel.yaml import YAML

from taugrid.spec import docgen, load, models, schema
from tests.spec.spec_builders import QUICKSTART

_DOC = pathlib.Path(__file__).resolve().parents[2] / "docs" / "tau-yaml.md"


def test_docs_are_up_to_date_with_the_generator() -> None:
    assert _DOC.read_text(encoding="utf-8") == schema.markdown(), (
        "docs/tau-yaml.md is stale; run: python -m taugrid.spec.schema --write docs/tau-yaml.md"
    )


def test_check_mode_detects_a_stale_file(tmp_path: pathlib.Path) -> None:
    path = tmp_path / "tau-yaml.md"
    assert schema.main(["--check", str(path)]) == 1
    assert schema.main(["--write", str(path)]) == 0
    assert schema.main(["--check", str(path)]) == 0
    path.write_text(path.read_text() + "edited\n")
    assert schema.main(["--check", str(path)]) == 1


def test_docs_cover_every_group_and_field() -> None:
    text = schema.markdown()
    for heading in (
        "`run`",
        "`compute`",
        "`compute.head`",
        "`runtime.secrets[]`",
        "`data.inputs[]`",
        "`serve.autoscaling`",
        "`resilience.backoff`",
    ):
        assert f"## {heading}" in text or f"### {heading}" in text, heading
    for model in (models.TauConfig, models.ComputeSpec, models.ServeSpec, models.DataOutput):
        for name, field in model.model_fields.items():
            assert f"`{name}`" in text
            assert field.description, f"{model.__name__}.{name} has no description"
    assert docgen.QUICKSTART.rstrip() in text
    assert "| `gpus` | number (>= 0, <= 16) | unset | GPUs per worker: a whole number," in text


def test_docs_quickstart_is_the_quickstart() -> None:
    assert docgen.QUICKSTART == QUICKSTART


@pytest.mark.parametrize("group", sorted(docgen.EXAMPLES))
def test_every_docs_example_loads(group: str) -> None:
    config = load.parse_tau_yaml(docgen.example_document(group))
    assert group in config.model_fields_set or group == "execution"


def test_every_model_field_has_a_description() -> None:
    seen = [models.TauConfig]
    for model in seen:
        for name, field in model.model_fields.items():
            assert field.description, f"{model.__name__}.{name}"
    assert len(schema.json_schema()["$defs"]) >= 15


def test_json_schema_is_valid_and_accepts_the_quickstart() -> None:
    document = schema.json_schema()
    jsonschema.Draft202012Validator.check_schema(document)
    assert document["$schema"].endswith("2020-12/schema")
    assert document["title"] == "tau.yaml"
    assert set(document["required"]) == {"name", "run"}
    compute = document["$defs"]["ComputeSpec"]["properties"]
    assert compute["gpus"]["description"].startswith("GPUs per worker: a whole number")
    validator = jsonschema.Draft202012Validator(document)
    assert not list(validator.iter_errors(YAML(typ="safe").load(QUICKSTART)))
    bad = YAML(typ="safe").load(QUICKSTART.replace("gpus: 1", "gpu: 1"))
    assert list(validator.iter_errors(bad))
