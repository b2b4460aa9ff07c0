"""tau.yaml ``pipeline`` section: a valid pipeline loads; each mistake is reported at its
line and column with a hint (spec.pipeline, rules.check_pipeline)."""

from __future__ import annotations

import pytest

from taugrid.spec import load
from tests.spec.spec_builders import problems_of

PIPELINE = """\
name: mm
run:
  entrypoint: python -m taugrid.sdk.job.pipeline_job
  workload_kind: pipeline
pipeline:
  source: stages:source
  target_throughput: 200
  stages:
    - name: decode
      fn: stages:decode
      batch_size: {min: 8, max: 64}
    - name: embed
      fn: stages:embed
      gpus: 1
      replicas: {min: 1, max: 4}
"""


def test_a_pipeline_loads_with_its_defaults() -> None:
    config = load.parse_tau_yaml(PIPELINE, "tau.yaml")
    pipe = config.pipeline
    assert pipe is not None and [s.name for s in pipe.stages] == ["decode", "embed"]
    assert pipe.on_error == "dead_letter" and pipe.elastic and pipe.sample_size == 64
    assert pipe.stages[0].gpus == 0 and pipe.stages[1].replicas.max == 4
    assert pipe.stages[0].batch_size.max == 64 and pipe.stages[1].batch_size.min == 1


CASES = {
    "no section": (
        PIPELINE.split("pipeline:\n")[0],
        4,
        "workload_kind pipeline needs a 'pipeline' section",
        "add 'pipeline:'",
    ),
    "section on a rayjob": (
        PIPELINE.replace("workload_kind: pipeline", "workload_kind: rayjob"),
        5,
        "'pipeline' is only valid with run.workload_kind: pipeline",
        "set run.workload_kind: pipeline",
    ),
    "bounds reversed": (
        PIPELINE.replace("{min: 8, max: 64}", "{min: 64, max: 8}"),
        11,
        "min 64 is more than max 8",
        "make min at most max",
    ),
    "duplicate stage": (
        PIPELINE.replace("name: embed", "name: decode"),
        12,
        "two stages are named decode",
        "its own name",
    ),
    "callable shape": (
        PIPELINE.replace("fn: stages:embed", "fn: stages.embed"),
        13,
        "pipeline.stages[1].fn",
        "",
    ),
    "zero target": (
        PIPELINE.replace("target_throughput: 200", "target_throughput: 0"),
        7,
        "pipeline.target_throughput",
        "",
    ),
    "unknown stage key": (
        PIPELINE.replace("      gpus: 1\n", "      gpu: 1\n"),
        14,
        "gpu",
        "gpus",
    ),
    "torchrun launcher": (
        PIPELINE + "execution:\n  launcher: torchrun\n",
        17,
        "launcher torchrun cannot start a pipeline",
        "remove execution.launcher",
    ),
}


@pytest.mark.parametrize("case", CASES.values(), ids=list(CASES))
def test_pipeline_mistakes_are_reported_at_their_line(case: tuple[str, int, str, str]) -> None:
    text, line, message, hint = case
    found = problems_of(text)
    matching = [p for p in found if message in p.message]
    assert matching, f"no problem containing {message!r} in {found}"
    assert matching[0].line == line, matching[0]
    assert hint in matching[0].hint and matching[0].hint


ROLES = """\
name: rl
run:
  entrypoint: driver.py
roles:
  actor:
    gpus: 1
    max_restarts: 3
  reward:
    cpus: 0.5
"""


def test_roles_load_and_their_mistakes_point_at_the_key() -> None:
    config = load.parse_tau_yaml(ROLES, "tau.yaml")
    assert config.roles["actor"].gpus == 1 and config.roles["reward"].max_task_retries == 3
    unknown = problems_of(ROLES.replace("    cpus: 0.5", "    cpu: 0.5"))
    assert unknown[0].line == 9 and "cpus" in unknown[0].hint, unknown
    negative = problems_of(ROLES.replace("gpus: 1", "gpus: -1"))
    assert negative[0].line == 6 and "roles.actor.gpus" in negative[0].message, negative
