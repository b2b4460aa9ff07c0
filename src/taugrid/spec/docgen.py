"""Markdown reference of tau.yaml, generated from ``spec.models`` (docs/tau-yaml.md).

Owns the layout of the reference: one section per group (``run``, ``compute``, ...,
nested groups such as ``compute.head`` after their parent), each a table of key,
type, default and description followed by an example. Types, defaults and
descriptions come from the models, so the reference cannot drift from the code; the
examples live in ``EXAMPLES`` and tests load every one of them. ``spec.schema`` writes
the file; a test fails when the committed file differs from ``render()``.
"""

from __future__ import annotations

import enum
import re
import types
import typing
from typing import Any

import pydantic

from taugrid.spec import models

__all__ = ["EXAMPLES", "QUICKSTART", "RULES", "example_document", "render"]

QUICKSTART = """\
schema_version: 1
name: aks-gpu-quickstart
run:
  entrypoint: train.py
  workload_kind: rayjob
compute:
  gpus: 1
  workers: 1
  cpus: 16
  memory: 64Gi
runtime:
  image: mcr.microsoft.com/aks/ai-runtime/ray:py3.12-ray2.56.0-cuda13.0
  pip:
    - torch>=2.4.0
"""

# One example per top-level group; each is valid when prefixed by example_document().
EXAMPLES: dict[str, str] = {
    "run": "run:\n  entrypoint: train.py\n  args: [--epochs, '3']\n"
    "  working_dir: .\n  excludes: [data/, '*.ckpt']\n",
    "compute": "compute:\n  workers: 4\n  gpus: 8\n  gpu_model: H100-80G\n  cpus: 64\n"
    "  memory: 512Gi\n  head:\n    cpus: 4\n    memory: 16Gi\n",
    "runtime": "runtime:\n  image: rayproject/ray:2.60.0-py312-gpu\n  pip: [torch>=2.4.0]\n"
    "  env:\n    HF_HOME: /data/hf\n  secrets:\n    - name: hf-token\n      key: token\n"
    "      env: HF_TOKEN\n",
    "policy": "policy:\n  workspace: vision\n  queue: training\n  priority: high\n",
    "placement": "placement:\n  allowed_regions: [westeurope, eastus]\n"
    "  preferred_regions: [westeurope]\n  communication: sync\n  objective: cost\n",
    "data": "data:\n  inputs:\n    - dataset: imagenet@v2\n  outputs:\n"
    "    - name: model\n      path: model/\n",
    "storage": "storage:\n  checkpoint: s3://bucket/ckpt/\n",
    "resilience": "resilience:\n  max_retries: 3\n  retry_on: [node_failure, preemption]\n"
    "  checkpoint_path: /data/ckpt\n  max_runtime: 12h\n  backoff:\n    initial: 30s\n"
    "    max: 10m\n",
    "metrics": "metrics:\n  history: [metrics/train.jsonl]\n",
    "serve": "run:\n  entrypoint: serve_app.py\n  workload_kind: rayservice\nserve:\n"
    "  import_path: serve_app:app\n  route_prefix: /v1\n  autoscaling:\n"
    "    min_replicas: 1\n    max_replicas: 4\n",
    "execution": "compute:\n  workers: 2\n  gpus: 8\nexecution:\n  launcher: torchrun\n",
    "pipeline": "run:\n  entrypoint: python -m taugrid.sdk.job.pipeline_job\n"
    "  workload_kind: pipeline\npipeline:\n  source: stages:source\n"
    "  target_throughput: 200\n  stages:\n    - name: decode\n      fn: stages:decode\n"
    "      cpus: 1\n      batch_size: {min: 8, max: 64}\n      replicas: {min: 1, max: 16}\n"
    "    - name: embed\n      fn: stages:embed\n      gpus: 1\n"
    "      batch_size: {min: 16, max: 128}\n      replicas: {min: 1, max: 4}\n",
    "roles": "roles:\n  actor:\n    gpus: 1\n    max_restarts: 3\n  critic:\n    gpus: 1\n"
    "  reward:\n    cpus: 1\n    max_restarts: -1\n",
}

RULES = (
    "`schema_version` must be 1; a file without it is read as version 1, and "
    "`tau run validate` says it assumed so. The smallest valid file is `name` and "
    "`run.entrypoint`.",
    "`compute.memory` and `compute.head.memory` are at most 64Ti (one node).",
    "`run.entrypoint` is a script path (one word ending in `.py`, started with `python`) "
    "or a command split with shell rules (`python train.py`, `bash run.sh`); `run.args` "
    "follow it either way. At submit, the script it names (the path, or the command's "
    "first `.py` word) must exist under `run.working_dir`.",
    "`run.workload_kind: rayservice` needs a `serve` section; `serve` is only valid "
    "with `rayservice`, which takes no `run.args` and no `execution.launcher` other than "
    "`python`.",
    "`execution.launcher: torchrun` or `ray-train` needs `compute.workers`.",
    "`run.workload_kind: pipeline` needs a `pipeline` section and `pipeline` is only valid "
    "with it; its driver is `python -m taugrid.sdk.job.pipeline_job` (docs/pipelines.md). Stage "
    "names are unique; every `{min, max}` range has `min <= max`.",
    "`compute.gpu_model` needs `compute.gpus` of 1 or more.",
    "`serve.autoscaling.min_replicas` must be at most `max_replicas`; `serve.replicas` "
    "and `serve.autoscaling` exclude each other; `serve.route_prefix` starts with `/`.",
    "`run.excludes` patterns are relative to `working_dir`: not empty, no `..`, "
    "`/` as the separator.",
    "`placement.preferred_regions` must be among `allowed_regions` when that is set; "
    "no region twice.",
    "`resilience.retry_on` needs `max_retries` of 1 or more; `backoff.initial` is at "
    "most `backoff.max`.",
    "Output names, dataset mounts and secret env names are unique; a secret's env name "
    "is not also in `runtime.env`.",
)

_HEADER = "schema_version: 1\nname: example\n"
_DEFAULT_RUN = "run:\n  entrypoint: train.py\n"


def example_document(group: str) -> str:
    """A whole tau.yaml holding the example of ``group`` (what the tests load)."""
    body = EXAMPLES[group]
    return _HEADER + ("" if body.startswith("run:") else _DEFAULT_RUN) + body


def _groups() -> list[tuple[str, type[pydantic.BaseModel]]]:
    """Every model reachable from TauConfig, parents before children, by dotted name."""
    found: list[tuple[str, type[pydantic.BaseModel]]] = []

    def walk(prefix: str, model: type[pydantic.BaseModel]) -> None:
        for name, field in model.model_fields.items():
            child, kind = _nested_model(field.annotation)
            if child is not None:
                path = f"{prefix}{name}" + {"list": "[]", "dict": ".<name>"}.get(kind, "")
                found.append((path, child))
                walk(path + ".", child)

    walk("", models.TauConfig)
    return found


def _nested_model(tp: Any) -> tuple[type[pydantic.BaseModel] | None, str]:
    """The model nested in ``tp`` and how: ``""`` itself, ``list`` items, ``dict`` values."""
    for candidate in _unwrap(tp):
        if _is_model(candidate):
            return candidate, ""
        origin = typing.get_origin(candidate)
        if origin in (list, dict):
            inner = typing.get_args(candidate)[-1]
            if _is_model(inner):
                return inner, "list" if origin is list else "dict"
    return None, ""


def _is_model(tp: Any) -> bool:
    return isinstance(tp, type) and issubclass(tp, pydantic.BaseModel)


def _unwrap(tp: Any) -> list[Any]:
    origin = typing.get_origin(tp)
    if origin is typing.Union or origin is types.UnionType:
        return [a for a in typing.get_args(tp) if a is not type(None)]
    return [tp]


def _anchor(path: str) -> str:
    return re.sub(r"[^a-z0-9_-]", "", path.lower())


def _type_text(tp: Any) -> str:
    if typing.get_origin(tp) is typing.Annotated:
        return _type_text(typing.get_args(tp)[0]) + _constraint_text(typing.get_args(tp)[1:])
    parts = _unwrap(tp)
    if len(parts) > 1:
        return " or ".join(_type_text(p) for p in parts)
    if parts[0] is not tp:
        return _type_text(parts[0])
    origin = typing.get_origin(tp)
    if origin is list:
        return f"list of {_type_text(typing.get_args(tp)[0])}"
    if origin is dict:
        key, value = typing.get_args(tp)
        return f"mapping of {_type_text(key)} to {_type_text(value)}"
    if isinstance(tp, type) and issubclass(tp, enum.Enum):
        return "one of " + ", ".join(f"`{m.value}`" for m in tp)
    if _is_model(tp):
        return "mapping"
    names = {int: "integer", float: "number", str: "string", bool: "boolean"}
    return names.get(tp, getattr(tp, "__name__", str(tp)))


_PATTERN_WORDS = {
    r"^[a-z0-9]([-a-z0-9]{0,51}[a-z0-9])?$": "lowercase letters, digits and '-', at most 53",
    r"^[A-Za-z_][A-Za-z0-9_]*$": "letters, digits and '_', not starting with a digit",
    r"^[a-z0-9][-a-z0-9_.]*(@[A-Za-z0-9][-A-Za-z0-9_.]*)?$": "name or name@version",
    r"^[\w.]+:[\w.]+$": "module:attribute",
}
_BOUND_WORDS = (("ge", ">="), ("gt", ">"), ("le", "<="), ("lt", "<"))


def _constraint_text(metadata: Any) -> str:
    words: list[str] = []
    for item in metadata:
        for attr, symbol in _BOUND_WORDS:
            if getattr(item, attr, None) is not None:
                words.append(f"{symbol} {getattr(item, attr)}")
        if getattr(item, "min_length", None):
            words.append("not empty")
        pattern = getattr(item, "pattern", None)
        if pattern:
            words.append(_PATTERN_WORDS.get(pattern, f"matching `{pattern}`"))
    return f" ({', '.join(words)})" if words else ""


def _default_text(field: pydantic.fields.FieldInfo) -> str:
    if field.is_required():
        return "**required**"
    factory = field.default_factory
    value = factory() if factory is not None else field.default  # type: ignore[call-arg]
    if value is None:
        return "unset"
    if isinstance(value, pydantic.BaseModel):
        return "see below"
    if isinstance(value, enum.Enum):
        value = value.value
    return f"`{value!r}`" if isinstance(value, list | dict) else f"`{value}`"


def _cell(text: str) -> str:
    return text.replace("|", "\\|")


def _table(model: type[pydantic.BaseModel], path: str, children: set[str]) -> list[str]:
    rows = ["| Key | Type | Default | Description |", "|---|---|---|---|"]
    for name, field in model.model_fields.items():
        child = f"{path}.{name}" if path else name
        key = f"[`{name}`](#{_anchor(child)})" if child in children else f"`{name}`"
        kind = _cell(_type_text(field.annotation) + _constraint_text(field.metadata))
        text = _cell(field.description or "")
        rows.append(f"| {key} | {kind} | {_default_text(field)} | {text} |")
    return rows


def _section(path: str, model: type[pydantic.BaseModel], children: set[str]) -> list[str]:
    level = "###" if "." in path else "##"
    doc = (model.__doc__ or "").strip().splitlines()[0]
    lines = [f"{level} `{path}`", "", doc, "", *_table(model, path.replace("[]", ""), children)]
    if path in EXAMPLES:
        lines += ["", "Example:", "", "```yaml", EXAMPLES[path].rstrip(), "```"]
    return [*lines, ""]


def render() -> str:
    """The whole Markdown reference (the content of docs/tau-yaml.md)."""
    groups = _groups()
    children = {p.replace("[]", "") for p, _ in groups}
    lines = [
        "# tau.yaml reference",
        "",
        "<!-- Generated by `python -m taugrid.spec.schema --write docs/tau-yaml.md`"
        " from src/taugrid/spec/models.py; do not edit by hand. -->",
        "",
        "A `tau.yaml` next to your code describes one workload. Check it with",
        "`tau run validate` (every problem is reported as `file:line:column` with a hint)",
        "and get its JSON Schema, for editors, with `tau run schema`. The file is UTF-8",
        "text of at most 1 MiB; a larger file is refused before it is parsed, and a byte",
        "that is not UTF-8 is reported at its line and column.",
        "",
        "`tau run validate` makes the checks `tau run` makes, with the same messages:",
        "locally the file, `run.working_dir` (a directory) and the script the entrypoint",
        "names (`train.py`, or the `.py` word of `python train.py`: it must be in the",
        "working dir); then, when a platform is reachable (`TAU_HUB_URL`, the current",
        "context, or the running `tau up` platform; validate never starts one), the hub",
        "resolves the file without storing anything: workspace, profile, priority,",
        "regions, GPU model (the known ones listed), capacity, datasets, output store.",
        "Offline the file is still `valid (offline)`, with a note naming what was not",
        "checked and why; `-o json` carries `checked`, `unchecked` and `platform`.",
        "",
        "## Quickstart",
        "",
        "```yaml",
        QUICKSTART.rstrip(),
        "```",
        "",
        "## Top level",
        "",
        *_table(models.TauConfig, "", children),
        "",
    ]
    for path, model in groups:
        lines += _section(path, model, children)
    lines += ["## Rules across keys", "", *(f"- {rule}" for rule in RULES), ""]
    return "\n".join(lines)
