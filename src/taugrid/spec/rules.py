"""Cross-field rules of tau.yaml that the models in ``spec.models`` call.

Owns checks that involve several keys (or every item of a list). Each raises
``spec.errors.FieldError`` with the ``loc`` of the key the user should change,
relative to the model whose validator calls it, so the loader can point at it.
Kept apart from ``spec.models`` so that module stays a plain list of fields.
"""

from __future__ import annotations

import importlib.util
import itertools
import shlex
from collections.abc import Iterable
from typing import TYPE_CHECKING

from taugrid.spec import errors

if TYPE_CHECKING:
    from taugrid.spec import models

__all__ = [
    "check_entrypoint",
    "check_exclude",
    "check_launcher",
    "check_pipeline",
    "check_service",
    "first_duplicate",
]


def first_duplicate(values: Iterable[object]) -> int | None:
    """Index of the first value equal to an earlier one, or ``None``."""
    seen: set[object] = set()
    for index, value in enumerate(values):
        if value in seen:
            return index
        seen.add(value)
    return None


def check_exclude(pattern: str, index: int) -> None:
    where = ("excludes", index)
    if not pattern.strip():
        raise errors.FieldError(
            "run.excludes has an empty pattern", loc=where, hint="delete the empty item"
        )
    if "\\" in pattern:
        raise errors.FieldError(
            f"exclude pattern '{pattern}' uses '\\'",
            loc=where,
            hint="write paths with '/', e.g. 'data/raw/'",
        )
    if ".." in pattern.split("/"):
        raise errors.FieldError(
            f"exclude pattern '{pattern}' points outside run.working_dir",
            loc=where,
            hint="patterns are relative to working_dir; remove the '..'",
        )


def check_service(config: models.TauConfig) -> None:
    if config.serve is None:
        raise errors.FieldError(
            "workload_kind rayservice needs a 'serve' section",
            loc=("run", "workload_kind"),
            hint="add 'serve:' with 'import_path: module:app'",
        )
    if config.run.args:
        raise errors.FieldError(
            "run.args is not used by a rayservice",
            loc=("run", "args"),
            hint="remove args; pass settings through runtime.env or the app's config",
        )
    if config.execution.launcher != "python":
        raise errors.FieldError(
            f"launcher {config.execution.launcher} cannot start a rayservice",
            loc=("execution", "launcher"),
            hint="remove execution.launcher; Ray Serve starts the replicas",
        )


def check_pipeline(config: models.TauConfig) -> None:
    """A ``pipeline`` section exactly when ``workload_kind`` is ``pipeline``."""
    kind = config.run.workload_kind
    if kind == "pipeline" and config.pipeline is None:
        raise errors.FieldError(
            "workload_kind pipeline needs a 'pipeline' section",
            loc=("run", "workload_kind"),
            hint="add 'pipeline:' with 'source', 'target_throughput' and 'stages' "
            "(docs/pipelines.md)",
        )
    if kind != "pipeline" and config.pipeline is not None:
        raise errors.FieldError(
            f"'pipeline' is only valid with run.workload_kind: pipeline, not {kind}",
            loc=("pipeline",),
            hint="set run.workload_kind: pipeline, or remove the pipeline section",
        )
    if kind == "pipeline" and config.execution.launcher != "python":
        raise errors.FieldError(
            f"launcher {config.execution.launcher} cannot start a pipeline",
            loc=("execution", "launcher"),
            hint="remove execution.launcher; the pipeline driver places its own stages",
        )


def check_launcher(config: models.TauConfig) -> None:
    launcher = config.execution.launcher
    if launcher in ("torchrun", "ray-train") and config.compute.workers is None:
        raise errors.FieldError(
            f"launcher {launcher} needs compute.workers",
            loc=("execution", "launcher"),
            hint="set compute.workers to the number of worker nodes (and compute.gpus per node)",
        )


def check_entrypoint(entrypoint: str) -> None:
    """``run.entrypoint`` must split into words with shell rules (balanced quotes)."""
    try:
        words = shlex.split(entrypoint)
    except ValueError as exc:
        raise errors.FieldError(
            f"run.entrypoint {entrypoint!r} is not a valid command: {exc}",
            loc=("entrypoint",),
            hint="close the quote, or write a script path such as train.py",
        ) from None
    if not words:
        raise errors.FieldError(
            "run.entrypoint is blank",
            loc=("entrypoint",),
            hint="write a script path (train.py) or a command (python train.py)",
        )
    _check_own_module(words)


def _check_own_module(words: list[str]) -> None:
    """``python -m taugrid.X`` must name a module this TauGrid has: caught here, not as a
    job that fails on its cluster (the pipeline driver moved to ``sdk.job``)."""
    for flag, module in itertools.pairwise(words):
        if flag != "-m" or not module.startswith("taugrid."):
            continue
        try:
            found = importlib.util.find_spec(module) is not None
        except ModuleNotFoundError:
            found = False
        if not found:
            raise errors.FieldError(
                f"run.entrypoint runs {module}, which this TauGrid does not have",
                loc=("entrypoint",),
                hint="the pipeline driver is python -m taugrid.sdk.job.pipeline_job "
                "(docs/pipelines.md)",
            )
