"""Invalid tau.yaml files: each problem's message, hint, line and column.

Each case is a whole file (the quickstart with one change, or a small file) and the
one problem it must produce: exact 1-based line, column (``None`` where the column is
not meaningful) and text the message and hint contain.
"""

from __future__ import annotations

import dataclasses

import pytest

from tests.spec.spec_builders import QUICKSTART, problems_of


@dataclasses.dataclass(frozen=True)
class Case:
    text: str
    line: int
    column: int | None
    message: str
    hint: str = ""


def q(old: str, new: str) -> str:
    """The quickstart with ``old`` replaced by ``new`` (which must be in it)."""
    assert old in QUICKSTART
    return QUICKSTART.replace(old, new, 1)


def add(extra: str) -> str:
    """The quickstart with ``extra`` appended (its first line is line 15)."""
    return QUICKSTART + extra


MINIMAL = "schema_version: 1\nname: t\nrun:\n  entrypoint: t.py\n"  # 4 lines

CASES: dict[str, Case] = {
    "empty file": Case("", 1, 1, "the file is empty", "'name' and 'run'"),
    "only comments": Case("# nothing\n\n", 1, 1, "the file is empty"),
    "top level list": Case("- a\n- b\n", 1, 1, "the top level must be a mapping", "start"),
    "top level scalar": Case("hello\n", 1, 1, "not the string 'hello'"),
    "yaml syntax": Case(q("name: aks-gpu-quickstart", "name: [oops"), 3, None, "invalid YAML"),
    "colon in value": Case(q("entrypoint: train.py", "entrypoint: a: b"), 4, 16, "invalid YAML"),
    "tab indent": Case(
        q("  gpus: 1", "\tgpus: 1"),
        7,
        1,
        "tab character in indentation",
        "replace the tab with spaces",
    ),
    "two documents": Case(
        QUICKSTART + "---\nname: x\n", 15, 1, "invalid YAML", "remove the extra '---'"
    ),
    "duplicate key": Case(
        q("  workers: 1", "  workers: 1\n  gpus: 2"),
        9,
        3,
        "duplicate key 'gpus' in compute (first defined at line 7)",
        "remove one of them",
    ),
    "unknown key typo": Case(
        q("  gpus: 1", "  gpu: 1"),
        7,
        3,
        "unknown key 'gpu' in compute; did you mean 'gpus'?",
        "allowed keys in compute: workers, gpus",
    ),
    "unknown top key": Case(
        add("resources:\n  a: 1\n"),
        15,
        1,
        "unknown key 'resources' in the top level",
        "allowed keys",
    ),
    "unknown key in list item": Case(
        add("data:\n  inputs:\n    - datset: imagenet\n"),
        17,
        7,
        "unknown key 'datset' in data.inputs[0]; did you mean 'dataset'?",
    ),
    "missing name": Case(
        q("name: aks-gpu-quickstart\n", ""),
        1,
        1,
        "missing required key 'name' in the top level",
        "add 'name: ...'",
    ),
    "missing entrypoint": Case(
        q("  entrypoint: train.py\n", ""),
        3,
        1,
        "missing required key 'entrypoint' in run",
        "add '  entrypoint: ...' (A script path (train.py: run with python) or a command",
    ),
    "missing secret key": Case(
        add("  secrets:\n    - name: hf\n      env: HF\n"),
        16,
        7,
        "missing required key 'key' in runtime.secrets[0]",
    ),
    "gpus word": Case(
        q("gpus: 1", "gpus: two"), 7, 9, "compute.gpus must be a number, got 'two'", "gpus: 2"
    ),
    "gpus fraction above one": Case(
        q("gpus: 1", "gpus: 1.5"), 7, 9, "1.5 GPUs: above 1 a worker takes whole GPUs", "0.5"
    ),
    "workers fraction": Case(
        q("workers: 1", "workers: 1.5"), 8, 12, "compute.workers must be a whole number, got 1.5"
    ),
    "cpus word": Case(q("cpus: 16", "cpus: many"), 9, 9, "compute.cpus must be a number"),
    "gpus too many": Case(
        q("gpus: 1", "gpus: 20"), 7, 9, "compute.gpus must be at most 16, got 20", "at most 16"
    ),
    "cpus zero": Case(q("cpus: 16", "cpus: 0"), 9, 9, "compute.cpus must be greater than 0"),
    "workers zero": Case(q("workers: 1", "workers: 0"), 8, 12, "must be at least 1, got 0"),
    "bad enum": Case(
        q("workload_kind: rayjob", "workload_kind: rayjobs"),
        5,
        18,
        "invalid value 'rayjobs' for run.workload_kind; did you mean 'rayjob'?",
        "allowed values: rayjob, job, raycluster, rayservice",
    ),
    "bad enum in list": Case(
        add("resilience:\n  retry_on: [oom]\n"),
        16,
        14,
        "invalid value 'oom' for resilience.retry_on[0]",
        "node_failure, preemption, lost_contact, exit_nonzero, data_staging",
    ),
    "enum near miss": Case(
        add("placement:\n  communication: synch\n"),
        16,
        18,
        "did you mean 'sync'?",
        "sync, async, none",
    ),
    "memory unit": Case(
        q("memory: 64Gi", "memory: 64GB"),
        10,
        11,
        "compute.memory: '64GB' is not a memory quantity",
        "64Gi",
    ),
    "head memory": Case(
        q("  memory: 64Gi", "  memory: 64Gi\n  head: {memory: lots}"),
        11,
        18,
        "compute.head.memory: 'lots' is not a memory quantity",
    ),
    "duration": Case(
        add("resilience:\n  max_runtime: 2 hours\n"),
        16,
        16,
        "'2 hours' is not a duration",
        "30s, 15m, 2h or 1d",
    ),
    "schema version": Case(
        q("schema_version: 1", "schema_version: 2"),
        1,
        17,
        "schema_version 2 is not supported",
        "set schema_version: 1",
    ),
    "bad name": Case(
        q("name: aks-gpu-quickstart", "name: My_Run"),
        2,
        7,
        "name 'My_Run' is not a valid name",
        "lowercase letters",
    ),
    "name too long": Case(
        q("name: aks-gpu-quickstart", "name: " + "a" * 60),
        2,
        7,
        "is not a valid name",
        "at most 53 characters",
    ),
    "empty entrypoint": Case(
        q("entrypoint: train.py", "entrypoint: ''"), 4, 15, "run.entrypoint must not be empty"
    ),
    "a TauGrid module that does not exist": Case(
        q("entrypoint: train.py", "entrypoint: python -m taugrid.sdk.pipeline_job"),
        4,
        15,
        "runs taugrid.sdk.pipeline_job, which this TauGrid does not have",
        "python -m taugrid.sdk.job.pipeline_job",
    ),
    "number as string": Case(
        q("entrypoint: train.py", "entrypoint: 123"),
        4,
        15,
        "run.entrypoint must be a string, got 123",
        "quote it",
    ),
    "arg number": Case(
        q("  workload_kind: rayjob", "  args: [--epochs, 3]"),
        5,
        20,
        "run.args[1] must be a string, got 3",
        "quote it",
    ),
    "pip not list": Case(
        q("  pip:\n    - torch>=2.4.0", "  pip: torch"),
        13,
        8,
        "runtime.pip must be a list, got 'torch'",
        "'- '",
    ),
    "group is list": Case(
        add("policy: [a]\n"), 15, 1, "policy must be a mapping of keys, got a list"
    ),
    "group empty": Case(add("placement:\n"), 15, 1, "placement is empty", "delete the line"),
    "env key": Case(
        add("  env:\n    1TOKEN: x\n"),
        16,
        5,
        "runtime.env key '1TOKEN' is not valid",
        "do not start with a digit",
    ),
    "env value number": Case(
        add("  env:\n    EPOCHS: 3\n"), 16, 13, "runtime.env.EPOCHS must be a string, got 3"
    ),
    "bool word": Case(
        add("data:\n  outputs:\n    - name: m\n      path: m/\n      required: maybe\n"),
        19,
        17,
        "must be true or false",
    ),
    "dataset name": Case(
        add("data:\n  inputs:\n    - dataset: Image Net\n"),
        17,
        16,
        "data.inputs[0].dataset 'Image Net' is not valid",
        "imagenet@v2",
    ),
    "import path": Case(
        q("workload_kind: rayjob", "workload_kind: rayservice") + "serve:\n  import_path: app\n",
        16,
        16,
        "serve.import_path 'app' is not valid",
        "module.path:attribute",
    ),
    "python tag": Case(
        add("metrics: !!python/object:os.system {}\n"),
        15,
        10,
        "unsupported YAML tag",
        "remove the tag",
    ),
    "complex key": Case(add("? [a, b]\n: 1\n"), 15, 3, "a key in the top level is a list"),
    "recursive alias": Case(add("metrics: &m {history: *m}\n"), 15, 10, "recursive YAML alias"),
    "undefined alias": Case(
        add("metrics: *nothing\n"), 15, 10, "invalid YAML", "define the anchor"
    ),
    # Cross-field rules (spec.rules / models validators) point at the key to change.
    "rayservice without serve": Case(
        q("workload_kind: rayjob", "workload_kind: rayservice"),
        5,
        18,
        "workload_kind rayservice needs a 'serve' section",
        "import_path",
    ),
    "serve without rayservice": Case(
        add("serve:\n  import_path: app:app\n"),
        15,
        1,
        "'serve' is only valid with run.workload_kind: rayservice, not rayjob",
    ),
    "rayservice args": Case(
        q("  workload_kind: rayjob", "  workload_kind: rayservice\n  args: [--port]")
        + "serve:\n  import_path: a:b\n",
        6,
        3,
        "run.args is not used by a rayservice",
        "remove args",
    ),
    "rayservice launcher": Case(
        q("workload_kind: rayjob", "workload_kind: rayservice")
        + "serve:\n  import_path: a:b\nexecution:\n  launcher: "
        "torchrun\n",
        18,
        13,
        "launcher torchrun cannot start a rayservice",
    ),
    "torchrun without workers": Case(
        q("  workers: 1\n", "") + "execution:\n  launcher: torchrun\n",
        15,
        13,
        "launcher torchrun needs compute.workers",
        "set compute.workers",
    ),
    "the removed ray-tune launcher": Case(
        q("  workers: 1\n", "") + "execution:\n  launcher: ray-tune\n",
        15,
        13,
        "launcher ray-tune was removed",
        "tau sweep submit",
    ),
    "autoscaling bounds": Case(
        MINIMAL.replace("t.py", "t.py\n  workload_kind: rayservice")
        + "serve:\n  import_path: a:b\n  autoscaling:\n"
        "    min_replicas: 5\n    max_replicas: 2\n",
        9,
        19,
        "autoscaling min_replicas 5 is more than max_replicas 2",
        "at most max_replicas",
    ),
    "replicas and autoscaling": Case(
        MINIMAL.replace("t.py", "t.py\n  workload_kind: rayservice")
        + "serve:\n  import_path: a:b\n"
        "  replicas: 2\n  autoscaling: {max_replicas: 3}\n",
        8,
        13,
        "serve.replicas and serve.autoscaling are both set",
    ),
    "route prefix": Case(
        MINIMAL.replace("t.py", "t.py\n  workload_kind: rayservice")
        + "serve:\n  import_path: a:b\n  route_prefix: v1\n",
        8,
        17,
        "does not start with '/'",
        "write '/v1'",
    ),
    "exclude escapes": Case(
        q("  workload_kind: rayjob", "  excludes: [data/, ../secrets]"),
        5,
        21,
        "exclude pattern '../secrets' points outside run.working_dir",
        "remove the '..'",
    ),
    "exclude empty": Case(
        q("  workload_kind: rayjob", "  excludes:\n    - ''"),
        6,
        7,
        "run.excludes has an empty pattern",
    ),
    "exclude backslash": Case(
        q("  workload_kind: rayjob", "  excludes: ['data\\raw']"),
        5,
        14,
        "uses '\\'",
        "write paths with '/'",
    ),
    "empty working dir": Case(
        q("  workload_kind: rayjob", "  working_dir: ' '"),
        5,
        16,
        "run.working_dir is empty",
        "use '.'",
    ),
    "preferred region": Case(
        add("placement:\n  allowed_regions: [west]\n  preferred_regions: [west, east]\n"),
        17,
        29,
        "preferred region east is not in placement.allowed_regions",
    ),
    "region twice": Case(
        add("placement:\n  allowed_regions: [west, west]\n"),
        16,
        27,
        "placement.allowed_regions lists west twice",
    ),
    "backoff order": Case(
        add("resilience:\n  backoff:\n    initial: 10m\n    max: 1m\n"),
        17,
        14,
        "backoff initial 10m is longer than backoff max 1m",
    ),
    "stall order": Case(
        add("resilience:\n  stall:\n    interval: 10s\n    warn_after: 5\n    restart_after: 2\n"),
        19,
        20,
        "resilience.stall.restart_after (2) is smaller than warn_after (5)",
        "make restart_after at least warn_after",
    ),
    "stall interval": Case(
        add("resilience:\n  stall:\n    interval: soon\n"),
        17,
        15,
        "resilience.stall.interval: 'soon' is not a duration",
    ),
    "retry without retries": Case(
        add("resilience:\n  max_retries: 0\n  retry_on: [preemption]\n"),
        17,
        3,
        "resilience.retry_on is set but max_retries is 0",
    ),
    "gpu model without gpus": Case(
        q("gpus: 1", "gpus: 0\n  gpu_model: A100"),
        8,
        14,
        "compute.gpu_model is A100 but compute.gpus is 0",
    ),
    "duplicate outputs": Case(
        add("data:\n  outputs:\n    - {name: m, path: a}\n    - {name: m, path: b}\n"),
        18,
        14,
        "two outputs are named m",
    ),
    "secret env clash": Case(
        add(
            "  env: {HF_TOKEN: x}\n  secrets:\n    - name: hf\n      key: t\n      env: HF_TOKEN\n"
        ),
        19,
        12,
        "HF_TOKEN is set both in runtime.env and by a secret",
    ),
}


@pytest.mark.parametrize("case", CASES.values(), ids=list(CASES))
def test_invalid_config_reports_problem_at_its_place(case: Case) -> None:
    found = problems_of(case.text)
    matching = [p for p in found if case.message in p.message]
    assert matching, f"no problem containing {case.message!r} in {found}"
    problem = matching[0]
    assert problem.file == "tau.yaml"
    assert problem.line == case.line, problem
    if case.column is not None:
        assert problem.column == case.column, problem
    assert case.hint in problem.hint, problem
    assert problem.hint, "every problem says how to fix it"


def test_there_are_at_least_thirty_distinct_cases() -> None:
    assert len({c.text for c in CASES.values()}) >= 30


@pytest.mark.parametrize("text", ['a: !!int ""', "a: !!float .", "a: !!int _"])
def test_an_explicit_number_tag_on_text_is_a_problem_not_a_crash(text: str) -> None:
    found = problems_of(f"name: x\nrun:\n  entrypoint: t.py\n{text}\n")
    assert any("is not a valid" in p.message and p.line == 4 for p in found), found
