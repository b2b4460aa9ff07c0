"""Fuzzing the tau.yaml parser: any text gives a TauConfig or a SpecError, nothing else.

Three generators: arbitrary text; YAML documents dumped from random structures whose
keys are mostly real tau.yaml keys (so validation, not just parsing, is exercised);
and the quickstart with random edits. Every SpecError must carry well-formed problems.
``TAU_FUZZ_EXAMPLES=5000`` runs a longer search.
"""

from __future__ import annotations

import io
import os
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from ruamel.yaml import YAML

from taugrid.spec import errors, load, models
from tests.spec.spec_builders import QUICKSTART

_SETTINGS = settings(
    max_examples=int(os.environ.get("TAU_FUZZ_EXAMPLES", "300")),
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)

_KEYS = sorted(
    {
        name
        for model in (
            models.TauConfig,
            models.RunSection,
            models.ComputeSpec,
            models.RuntimeSpec,
            models.ServeSpec,
            models.Autoscaling,
            models.ResilienceSpec,
            models.PlacementSpec,
            models.DataSpec,
            models.DataInput,
            models.ExecutionSpec,
        )
        for name in model.model_fields
    }
)
_WORDS = ["rayjob", "rayservice", "torchrun", "64Gi", "2h", "sync", "train.py", "a:b", "x"]

_scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(2**70), max_value=2**70),
    st.floats(allow_nan=True, allow_infinity=True),
    st.sampled_from(_WORDS),
    st.text(max_size=12),
)
_keys = st.one_of(st.sampled_from(_KEYS), st.text(min_size=1, max_size=8))
_trees = st.recursive(
    _scalars,
    lambda children: st.one_of(
        st.lists(children, max_size=4), st.dictionaries(_keys, children, max_size=6)
    ),
    max_leaves=30,
)


def _dump(value: Any, flow: bool) -> str:
    out = io.StringIO()
    yaml = YAML(typ="safe", pure=True)
    yaml.default_flow_style = flow
    yaml.dump(value, out)
    return out.getvalue()


def _check(text: str) -> None:
    try:
        result = load.parse_tau_yaml(text, "fuzz.yaml")
    except errors.SpecError as exc:
        assert exc.problems
        lines = text.count("\n") + text.count("\r") + 2
        for problem in exc.problems:
            assert problem.file == "fuzz.yaml"
            assert 1 <= problem.line <= lines, problem
            assert problem.column >= 1, problem
            assert problem.message.strip(), problem
        assert str(exc).startswith("fuzz.yaml:")
    else:
        assert isinstance(result, models.TauConfig)


@_SETTINGS
@given(st.text())
def test_arbitrary_text(text: str) -> None:
    _check(text)


@_SETTINGS
@given(st.dictionaries(_keys, _trees, max_size=8), st.booleans())
def test_yaml_structures(document: dict[str, Any], flow: bool) -> None:
    _check(_dump(document, flow))


@_SETTINGS
@given(_trees, st.booleans())
def test_any_top_level_value(value: Any, flow: bool) -> None:
    _check(_dump(value, flow))


@_SETTINGS
@given(
    st.lists(
        st.tuples(
            st.integers(min_value=0, max_value=len(QUICKSTART)),
            st.integers(min_value=0, max_value=3),
            st.sampled_from([":", " ", "\t", "-", "\n", "'", '"', "{", "[", "&a", "*a", "#", "x"]),
        ),
        max_size=4,
    )
)
def test_edited_quickstart(edits: list[tuple[int, int, str]]) -> None:
    text = QUICKSTART
    for position, deleted, inserted in edits:
        position = min(position, len(text))
        text = text[:position] + inserted + text[position + deleted :]
    _check(text)


@_SETTINGS
@given(
    st.dictionaries(
        st.sampled_from(sorted(models.TauConfig.model_fields)),
        _trees,
        max_size=6,
    )
)
def test_quickstart_with_overrides(overrides: dict[str, Any]) -> None:
    base = YAML(typ="safe", pure=True).load(QUICKSTART)
    base.update(overrides)
    _check(_dump(base, False))
