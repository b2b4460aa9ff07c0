"""platform.load and platform.checks: loading, the packaged default, errors at file:line."""

from __future__ import annotations

import pathlib

import pytest

from taugrid.platform import crds, load, models
from taugrid.spec import errors
from tests.render import render_builders as rb


def test_default_platform_is_the_packaged_file() -> None:
    platform = load.default_platform()
    assert platform.default_workspace == "default"
    assert platform.total_gpus("A100-80G") == 8
    assert load.default_platform() is platform  # parsed once


def test_load_platform_from_a_file(tmp_path: pathlib.Path) -> None:
    path = tmp_path / "platform.yaml"
    path.write_text(rb.PLATFORM_YAML)
    assert load.load_platform(path) == rb.platform()


def test_env_var_selects_the_file(tmp_path: pathlib.Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "p.yaml"
    path.write_text(rb.PLATFORM_YAML)
    monkeypatch.setenv(load.ENV_VAR, str(path))
    assert load.platform_from_env().workspace("nlp") is not None
    monkeypatch.delenv(load.ENV_VAR)
    assert load.platform_from_env() == load.default_platform()


def test_missing_file_is_a_spec_error(tmp_path: pathlib.Path) -> None:
    with pytest.raises(errors.SpecError, match="file not found"):
        load.load_platform(tmp_path / "nope.yaml")


@pytest.mark.parametrize(
    ("text", "where", "message"),
    [
        (
            "regions:\n  - name: r\n    clusterz: []\n",
            "platform.yaml:3:5",
            "did you mean 'clusters'",
        ),
        (
            "gpu_types: [{name: A100}]\nteams:\n  - name: t\n    quotas:\n"
            "      - {gpu_model: H100, nominal: 1}\n",
            "platform.yaml:5:21",
            "unknown gpu_model 'H100'",
        ),
        ("teams:\n  - name: a\n  - name: a\n", "platform.yaml:3:11", "duplicate name 'a' in teams"),
        (
            "teams: [{name: t}]\nworkspaces:\n  - {name: w, team: t, defaults: {profile: p}}\n",
            "platform.yaml:3:44",
            "unknown profile 'p'",
        ),
        (
            "teams: [{name: t}]\nworkspaces:\n  - {name: a, team: t, namespace: ns}\n"
            "  - {name: b, team: t, namespace: ns}\n",
            "platform.yaml:4:35",
            "duplicate name 'ns' in workspace namespaces",
        ),
        ("profiles:\n  - name: p\n    teams: [ghost]\n", "platform.yaml:3:13", "unknown team"),
    ],
)
def test_problems_point_at_the_key(text: str, where: str, message: str) -> None:
    with pytest.raises(errors.SpecError) as info:
        load.parse_platform(text)
    found = [f"{p.file}:{p.line}:{p.column}" for p in info.value.problems if message in p.message]
    assert found == [where], info.value.message


def test_crd_objects_round_trip() -> None:
    platform = rb.platform()
    objs = crds.platform_objects(platform)
    assert {o["apiVersion"] for o in objs} == {crds.API_VERSION}
    kinds = [o["kind"] for o in objs]
    assert kinds.count("TauCluster") == 2 and kinds.count("TauTeam") == 2
    back = [crds.from_object(o) for o in objs]
    assert back[-2:] == platform.workspaces
    assert objs[0]["metadata"]["labels"] == {crds.LABEL_REGION: "us-east"}


def test_quota_request_object() -> None:
    request = models.QuotaRequestSpec(team="research", gpu_model="A100-80G", nominal=24, reason="x")
    obj = crds.quota_request_object(request, "more-a100", "ws-nlp")
    assert obj["kind"] == "TauQuotaRequest" and obj["status"] == {"state": "pending"}
    assert obj["metadata"]["namespace"] == "ws-nlp"
    assert crds.from_object(obj) == request
    with pytest.raises(ValueError, match="needs a name"):
        crds.to_object(request)


def test_crd_definitions() -> None:
    for kind, info in crds.KINDS.items():
        crd = crds.crd_definition(kind)
        assert crd["metadata"]["name"] == f"{info.plural}.taugrid.io"
        spec = crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"]
        assert "name" not in spec["properties"]
