"""tau.yaml ``pipeline`` section: stages of an elastic pipeline and its target throughput.

Owns the models of ``workload_kind: pipeline`` (``PipelineSpec``, ``StageSpec``,
``Bounds``). A pipeline is a chain of stages; each stage is a Python callable
(``module:function``, importable from ``run.working_dir``) that takes a list of items
(dicts) and returns the items that go on, on CPU or GPU replicas. The platform sizes
each stage (replicas, batch size within its bounds) from measured rates so that
``target_throughput`` items per second enter the pipeline (``taugrid.elastic``).

Invariants: stage names are unique; every bound is ``min <= max``; a ``module:function``
reference is checked for shape here and for existence when ``tau run plan`` imports it.
"""

from __future__ import annotations

import enum
from typing import Annotated

import pydantic

from taugrid.spec import errors

__all__ = ["Bounds", "OnError", "PipelineSpec", "StageSpec"]

_CALLABLE_RE = r"^[A-Za-z_][\w.]*:[A-Za-z_]\w*$"
CallableRef = Annotated[str, pydantic.StringConstraints(pattern=_CALLABLE_RE)]
StageName = Annotated[str, pydantic.StringConstraints(pattern=r"^[a-z][a-z0-9_-]{0,30}$")]


class _Model(pydantic.BaseModel):
    model_config = pydantic.ConfigDict(extra="forbid", frozen=True, use_attribute_docstrings=True)


class OnError(enum.StrEnum):
    """What a stage that raises on an item does: dead-letter the item, or fail the run."""

    DEAD_LETTER = "dead_letter"
    FAIL = "fail"


class Bounds(_Model):
    """An integer range ``{min, max}``."""

    min: int = pydantic.Field(default=1, ge=1, le=100_000)
    """Smallest value."""
    max: int = pydantic.Field(default=1, ge=1, le=100_000)
    """Largest value."""

    @pydantic.model_validator(mode="after")
    def _order(self) -> Bounds:
        if self.min > self.max:
            raise errors.FieldError(
                f"min {self.min} is more than max {self.max}",
                loc=("min",),
                hint="make min at most max",
            )
        return self


class StageSpec(_Model):
    """One stage: a callable run on replicas with their own resources."""

    name: StageName
    """Stage name (lowercase letters, digits, '-' and '_'); metrics are keyed by it."""
    fn: CallableRef
    """module:function taking a list of items (dicts) and returning the items that go on."""
    cpus: float = pydantic.Field(default=1.0, ge=0, le=256)
    """CPUs per replica."""
    gpus: float = pydantic.Field(default=0.0, ge=0, le=16)
    """GPUs per replica (0: a CPU stage; a fraction shares a GPU)."""
    batch_size: Bounds = pydantic.Field(default_factory=lambda: Bounds(min=1, max=64))
    """Range the batch size is chosen from (items per call)."""
    replicas: Bounds = pydantic.Field(default_factory=lambda: Bounds(min=1, max=8))
    """Range the number of replicas is chosen from."""


class PipelineSpec(_Model):
    """``pipeline``: stages and target throughput (``workload_kind: pipeline``)."""

    source: CallableRef
    """module:function returning an iterable of items (dicts) that enter the pipeline."""
    target_throughput: float = pydantic.Field(gt=0, le=10_000_000)
    """Items per second entering the pipeline that the platform sizes the stages for."""
    stages: list[StageSpec] = pydantic.Field(min_length=1, max_length=32)
    """The stages, in order; each stage's output is the next one's input."""
    on_error: OnError = OnError.DEAD_LETTER
    """dead_letter (failing items go to dead-letter/ with the error; the run goes on) or fail."""
    sample_size: int = pydantic.Field(default=64, ge=2, le=100_000)
    """Items of the source that `tau run plan` measures each stage on."""
    window_s: float = pydantic.Field(default=8.0, ge=1, le=3600)
    """Seconds of input (at the target rate) between two resizes by the controller."""
    elastic: bool = True
    """When false, the run keeps the planned configuration (no resizing while it runs)."""
    relocate: bool = True
    """When the cluster's CPUs keep the pipeline below its target, ask the hub to move the
    run to a cluster with room (it resumes there from the last window it finished)."""

    @pydantic.model_validator(mode="after")
    def _unique(self) -> PipelineSpec:
        seen: set[str] = set()
        for index, stage in enumerate(self.stages):
            if stage.name in seen:
                raise errors.FieldError(
                    f"two stages are named {stage.name}",
                    loc=("stages", index, "name"),
                    hint="give each stage its own name",
                )
            seen.add(stage.name)
        return self
