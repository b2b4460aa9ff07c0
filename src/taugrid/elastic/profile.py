"""Measuring each stage of a pipeline on a sample of its source (``tau run plan``).

``measure`` takes the first ``sample_size`` items of the source, runs stage 1 on them
at its smallest and largest batch size (each batch timed), fits the stage's cost
model (``sizing.fit``), then feeds stage 1's output to stage 2, and so on. Items a
stage raises on are set aside as they would be in the run (``stages.run_batch``) and
counted. It runs in this process, on this machine: a GPU stage is measured on
whatever this process can use, so plan where the stage's device is (or, for the
emulated GPU stages of the examples, anywhere: their cost is fixed).
"""

from __future__ import annotations

import dataclasses
import itertools
from collections.abc import Callable, Iterable, Sequence

from taugrid.elastic import sizing, stages
from taugrid.spec import pipeline as spec_pipeline

__all__ = ["Measured", "measure"]


@dataclasses.dataclass(frozen=True)
class Measured:
    """One stage's measurement: its profile, timed batches and items set aside."""

    profile: sizing.StageProfile
    timings: tuple[tuple[int, float], ...]
    items_in: int
    items_out: int
    dead: int


def _sample(source: Callable[[], Iterable[stages.Item]], size: int) -> list[stages.Item]:
    items = list(itertools.islice(iter(source()), size))
    if not items:
        raise stages.StageError(
            "pipeline.source gave no items", "make the source return at least one item"
        )
    return items


def _batches(items: Sequence[stages.Item], size: int) -> list[list[stages.Item]]:
    return [list(items[i : i + size]) for i in range(0, len(items), size)]


def _measure_stage(
    spec: spec_pipeline.StageSpec, fn: stages.StageFn, items: list[stages.Item]
) -> tuple[Measured, list[stages.Item]]:
    timings: list[tuple[int, float]] = []
    retried: list[tuple[int, float]] = []  # batches retried item by item cost more
    out: list[stages.Item] = []
    dead = 0
    sizes = sorted({spec.batch_size.min, min(spec.batch_size.max, len(items))})
    for index, size in enumerate(sizes):
        for batch in _batches(items, size):
            result = stages.run_batch(spec.name, fn, batch, fail_fast=False)
            (retried if result.dead else timings).append((len(batch), result.busy_s))
            if index == 0:  # the output of one pass feeds the next stage
                out.extend(result.items)
                dead += len(result.dead)
    profile = sizing.StageProfile(
        name=spec.name,
        cost=sizing.fit(timings or retried),
        selectivity=len(out) / len(items),
        batch_min=spec.batch_size.min,
        batch_max=spec.batch_size.max,
        replicas_min=spec.replicas.min,
        replicas_max=spec.replicas.max,
        gpus=spec.gpus,
        cpus=spec.cpus,
    )
    return Measured(profile, tuple(timings + retried), len(items), len(out), dead), out


def measure(spec: spec_pipeline.PipelineSpec, *, search: str | None) -> list[Measured]:
    """Each stage measured on the sample (see the module docstring)."""
    source = stages.load(spec.source, where="pipeline.source", search=search)
    items = _sample(source, spec.sample_size)
    measured: list[Measured] = []
    for index, stage in enumerate(spec.stages):
        if not items:
            raise stages.StageError(
                f"no sample item reached stage {stage.name}: the stages before it kept none "
                f"of {spec.sample_size}",
                "raise pipeline.sample_size, or check the filters before this stage",
            )
        fn = stages.load(stage.fn, where=f"pipeline.stages[{index}].fn", search=search)
        one, items = _measure_stage(stage, fn, items)
        measured.append(one)
    return measured
