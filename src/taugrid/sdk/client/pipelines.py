"""``tau run plan``: measure a pipeline's stages on a sample and recommend a configuration.

Runs on the researcher's machine before anything is submitted: loads tau.yaml, makes
the working dir importable, sets ``runtime.env`` for the duration (the stages read it
as they would in the run), measures each stage (``elastic.profile``) and sizes it for
the target (``elastic.sizing``) within the GPUs ``compute`` holds
(``compute.workers`` x ``compute.gpus``, when set) — the same budget the run's driver
keeps to. The document it returns is the one the run's driver
prints and stores in ``pipeline.json`` (``sdk.job.pipeline_job.plan_document``), plus what
was measured per stage.

``stage_status`` (read by ``tau run status``) is pure; ``plan`` imports the profiler,
the sizing and the spec loader when it runs, so reading a run's status does not.
"""

from __future__ import annotations

import contextlib
import os
import tempfile
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

from taugrid import errors
from taugrid.record import jobenv

__all__ = ["plan", "stage_status"]


@contextlib.contextmanager
def _env(extra: Mapping[str, str]) -> Iterator[None]:
    saved = {k: os.environ.get(k) for k in extra}
    os.environ.update(extra)
    try:
        yield
    finally:
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value


def plan(target: str | None, config: str | None, throughput: float | None) -> dict[str, Any]:
    """The recommended configuration of the pipeline in tau.yaml (module docstring).

    ``throughput`` overrides ``pipeline.target_throughput``.
    """
    from taugrid.elastic import profile, sizing
    from taugrid.sdk.client import submit
    from taugrid.sdk.job import pipeline_job
    from taugrid.spec import load

    path = submit.find_config(target, config)
    spec = load.load_tau_yaml(path)
    if spec.pipeline is None:
        raise errors.UserError(
            f"{path} is not a pipeline (run.workload_kind is {spec.run.workload_kind})",
            "tau run plan sizes workload_kind: pipeline runs; see docs/pipelines.md",
        )
    workdir = (path.parent / spec.run.working_dir).resolve()
    # stages that write (a sink) write into a scratch directory, not into the project
    with (
        tempfile.TemporaryDirectory(prefix="tau-plan-") as scratch,
        _env({**spec.runtime.env, jobenv.OUTPUT_DIR: scratch}),
    ):
        measured = profile.measure(spec.pipeline, search=str(workdir))
    goal = throughput if throughput is not None else spec.pipeline.target_throughput
    held = (spec.compute.workers or 1) * (spec.compute.gpus or 0)
    rec = sizing.recommend([m.profile for m in measured], goal, float(held) if held else None)
    doc = pipeline_job.plan_document(rec)
    for stage, one in zip(doc["stages"], measured, strict=True):
        stage["measured"] = {
            "items_in": one.items_in,
            "items_out": one.items_out,
            "dead": one.dead,
            "fixed_s": round(one.profile.cost.fixed_s, 6),
            "per_item_s": round(one.profile.cost.per_item_s, 6),
            "selectivity": round(one.profile.selectivity, 4),
        }
    return {"file": str(Path(path)), "name": spec.name, **doc}


def stage_status(metrics: list[dict[str, Any]]) -> dict[str, Any] | None:
    """The latest per-stage pipeline metrics of a run (``tau run status``), or None.

    ``{"step", "throughput", "target", "stages": {stage: {"items_per_s", "replicas",
    "batch_size", "dropped"}}}`` from the ``pipeline/...`` metrics the driver logs.
    """
    latest: dict[str, dict[str, Any]] = {}
    for m in metrics:
        name = str(m.get("name", ""))
        if name.startswith("pipeline/") and (
            name not in latest or m["step"] >= latest[name]["step"]
        ):
            latest[name] = m
    if not latest:
        return None
    stages: dict[str, dict[str, Any]] = {}
    for name, m in sorted(latest.items()):
        parts = name.split("/")
        if len(parts) == 3:
            stages.setdefault(parts[1], {})[parts[2]] = m["value"]
    top = {k: latest.get(f"pipeline/{k}", {}).get("value") for k in ("throughput", "target")}
    step = max(int(m["step"]) for m in latest.values())
    return {"step": step, **top, "stages": stages}
