"""The Kubernetes plan of one run: which objects, by workload kind, and their YAML/JSON.

Owns the choice of renderer per ``run.workload_kind`` and the serialisation every
caller shares (``tau run --dry-run=client -o yaml|json``, the run record's
``rendered/``, the kubernetes backend):

    rayjob      → [RayJob]            (render.kuberay.render_rayjob)
    raycluster  → [RayCluster]        (render.kuberay.render_raycluster)
    rayservice  → [RayService]        (render.kuberay.render_rayservice)
    job         → [batch/v1 Job]      (render.kuberay.render_job)
    pipeline    → [RayJob]            (its driver places the stages' actors itself)

Serialisation is deterministic: keys in insertion order, block style, multi-document
YAML separated by ``---``.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from typing import Any

import yaml

from taugrid.render import kuberay, runspec
from taugrid.spec import models as sm

__all__ = ["render_manifests", "to_json", "to_yaml"]

_RENDERERS: dict[sm.WorkloadKind, Callable[[runspec.RunSpec, str], dict[str, Any]]] = {
    sm.WorkloadKind.RAYJOB: kuberay.render_rayjob,
    sm.WorkloadKind.RAYCLUSTER: kuberay.render_raycluster,
    sm.WorkloadKind.RAYSERVICE: kuberay.render_rayservice,
    sm.WorkloadKind.JOB: kuberay.render_job,
    sm.WorkloadKind.PIPELINE: kuberay.render_rayjob,
}


def render_manifests(spec: runspec.RunSpec, run_id: str) -> list[dict[str, Any]]:
    """Every Kubernetes object run ``run_id`` of ``spec`` creates, in apply order."""
    return [_RENDERERS[spec.workload_kind](spec, run_id)]


# libyaml's emitter when present (about 10x faster); same output as the pure one.
_BaseDumper: type[yaml.SafeDumper] = getattr(yaml, "CSafeDumper", yaml.SafeDumper)


class _Dumper(_BaseDumper):  # type: ignore[valid-type,misc]
    """Block style; multi-line strings (runtimeEnvYAML, serveConfigV2) as ``|`` blocks."""


def _str(dumper: yaml.SafeDumper, value: str) -> yaml.ScalarNode:
    style = "|" if "\n" in value else None
    return dumper.represent_scalar("tag:yaml.org,2002:str", value, style=style)


_Dumper.add_representer(str, _str)


def to_yaml(objs: Sequence[dict[str, Any]]) -> str:
    """Objects as one multi-document YAML text (``---`` between documents)."""
    return "---\n".join(
        yaml.dump(o, Dumper=_Dumper, sort_keys=False, default_flow_style=False, width=2**16)
        for o in objs
    )


def to_json(objs: Sequence[dict[str, Any]]) -> str:
    """Objects as a JSON ``List`` (``kubectl apply -f`` accepts it)."""
    doc = {"apiVersion": "v1", "kind": "List", "items": list(objs)}
    return json.dumps(doc, indent=2) + "\n"
