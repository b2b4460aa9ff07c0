"""The Ray side of a pipeline run: Ray Data actor pools, sized window by window.

Thin on purpose: every decision is in ``controller``/``sizing`` (pure, tested without
Ray). ``run`` reads the source in **windows** of ``target_throughput * window_s``
items; each window is one Ray Data execution (``from_items`` → one ``map_batches``
actor pool per stage, with that stage's CPUs/GPUs per replica, its batch size and an
``ActorPoolStrategy`` of the replicas the controller chose). Stage actors report items in and
out, replica-seconds in the callable and batches to one ``_Stats`` actor; after the
window the controller turns that into the next window's configuration, and
``on_window`` gets a ``WindowReport`` (the in-job driver logs it as metrics).

Ray Data's own actor-pool autoscaler scales on queued blocks, not on a throughput
target, so the pool bounds are the controller's: a window runs its pools at exactly
the chosen sizes, and the next window's pools are resized. Each actor reports the
node it runs on, so the controller can find a node that is slow for a stage; that
stage's actors then carry a label selector that keeps them off it
(``ray.io/node-id: !in(...)``, Ray's node-ID label). Items a stage raises on
are appended, one JSON line each (``stages.DeadItem.record``), to
``<dead_dir>/<stage>.<pid>.jsonl``.

Ray is imported lazily: importing this module does not need it.
"""

from __future__ import annotations

import dataclasses
import itertools
import json
import math
import os
import time
from collections.abc import Callable, Iterable, Iterator, Mapping
from pathlib import Path
from typing import Any

from taugrid.elastic import controller, sizing, stages
from taugrid.spec import pipeline as spec_pipeline

__all__ = [
    "NODE_ID_LABEL",
    "StageActor",
    "WindowReport",
    "avoiding",
    "columns",
    "fitting",
    "ray_get",
    "rows",
    "run",
]


@dataclasses.dataclass(frozen=True)
class WindowReport:
    """One window: its items, wall time, what each stage did and the configuration."""

    index: int
    items_in: int
    items_out: int
    elapsed_s: float
    stages: Mapping[str, controller.StageWindow]
    config: sizing.Recommendation
    next_config: sizing.Recommendation
    avoided: Mapping[str, frozenset[str]] = dataclasses.field(default_factory=dict)
    """Per stage, the nodes its actors were kept off during this window."""
    next_avoided: Mapping[str, frozenset[str]] = dataclasses.field(default_factory=dict)
    """The same for the next window (a node found slow in this one is added)."""

    @property
    def throughput(self) -> float:
        """Items per second that entered the pipeline during the window."""
        return self.items_in / self.elapsed_s if self.elapsed_s > 0 else 0.0


def rows(batch: Mapping[str, Any]) -> list[stages.Item]:
    """A Ray Data numpy batch (column → array) as a list of items."""
    n = len(next(iter(batch.values()))) if batch else 0
    return [{key: _plain(col[i]) for key, col in batch.items()} for i in range(n)]


def _plain(value: Any) -> Any:
    item = getattr(value, "item", None)
    if callable(item) and getattr(value, "shape", None) == ():
        return item()
    return value


def columns(items: list[stages.Item], keys: Iterable[str]) -> dict[str, Any]:
    """Items as a numpy batch; ragged or mixed values become object arrays."""
    import numpy as np

    names = list(dict.fromkeys(k for item in items for k in item)) or list(keys)
    out: dict[str, Any] = {}
    for name in names:
        values = [item.get(name) for item in items]
        try:
            array = np.asarray(values)
            if array.dtype == object or array.ndim == 0:
                raise ValueError
            out[name] = array
        except ValueError:
            array = np.empty(len(values), dtype=object)
            array[:] = values if values else []
            for i, value in enumerate(values):  # keep arrays whole, never broadcast
                array[i] = value
            out[name] = array
    return out


def ray_get(ref: Any) -> Any:
    """``ray.get`` (Ray imported lazily)."""
    import ray

    return ray.get(ref)


class StageActor:
    """One replica of a stage (a Ray Data callable class)."""

    def __init__(
        self, stage: str, ref: str, search: str, fail_fast: bool, dead_dir: str, stats: Any
    ) -> None:
        import ray

        self._stage, self._fail_fast, self._stats = stage, fail_fast, stats
        self._node = ray.get_runtime_context().get_node_id()
        self._fn = stages.load(ref, where=f"stage {stage}", search=search)
        self._dead = Path(dead_dir) / f"{stage}.{os.getpid()}.jsonl"

    def __call__(self, batch: dict[str, Any]) -> dict[str, Any]:
        items = rows(batch)
        result = stages.run_batch(self._stage, self._fn, items, fail_fast=self._fail_fast)
        if result.dead:
            self._dead.parent.mkdir(parents=True, exist_ok=True)
            with self._dead.open("a") as f:
                f.write("".join(json.dumps(d.record()) + "\n" for d in result.dead))
        # waited for, so that every batch of a window is counted before the window ends
        counts = (len(items), len(result.items), result.busy_s)
        ray_get(self._stats.add.remote(self._stage, self._node, *counts))
        return columns(result.items, batch.keys())


class _Stats:
    """Per-stage and per-(stage, node) counters since the last ``take`` (a Ray actor)."""

    def __init__(self) -> None:
        self._seen: dict[str, list[float]] = {}
        self._nodes: dict[str, dict[str, list[float]]] = {}

    def add(self, stage: str, node: str, items_in: int, items_out: int, busy_s: float) -> None:
        seen = self._seen.setdefault(stage, [0, 0, 0.0, 0])
        seen[0] += items_in
        seen[1] += items_out
        seen[2] += busy_s
        seen[3] += 1
        on_node = self._nodes.setdefault(stage, {}).setdefault(node, [0, 0.0])
        on_node[0] += items_in
        on_node[1] += busy_s

    def take(self) -> tuple[dict[str, list[float]], dict[str, dict[str, list[float]]]]:
        out = (self._seen, self._nodes)
        self._seen, self._nodes = {}, {}
        return out


def _windows(items: Iterable[stages.Item], size: int) -> Iterator[list[stages.Item]]:
    it = iter(items)
    while chunk := list(itertools.islice(it, size)):
        yield chunk


NODE_ID_LABEL = "ray.io/node-id"
"""The label every Ray node carries with its node ID (Ray's default labels)."""


def avoiding(nodes: Iterable[str]) -> dict[str, Any]:
    """Ray remote args that keep an actor off ``nodes`` (none: no constraint)."""
    ids = sorted(nodes)
    if not ids:
        return {}
    return {"label_selector": {NODE_ID_LABEL: f"!in({','.join(ids)})"}}


def fitting(
    nodes: Iterable[Mapping[str, Any]], cpus: float, gpus: float, avoid: Iterable[str]
) -> int:
    """How many replicas of ``cpus``/``gpus`` the alive nodes outside ``avoid`` hold at
    most (on their total resources, as ``ray.nodes()`` lists them)."""
    out = 0
    skip = set(avoid)
    for node in nodes:
        if not node.get("Alive") or node.get("NodeID") in skip:
            continue
        have = node.get("Resources") or {}
        counts = [
            math.floor(have.get(name, 0.0) / need + 1e-9)
            for name, need in (("CPU", cpus), ("GPU", gpus))
            if need > 0
        ]
        out += min(counts) if counts else 1_000_000
    return out


def _placement(
    stage: spec_pipeline.StageSpec, replicas: int, avoid: frozenset[str]
) -> tuple[int, dict[str, Any]]:
    """The stage's pool size and remote args: off the avoided nodes, and no more replicas
    than the other nodes hold (a pool that cannot start would wait forever); avoiding is
    given up when no other node could hold even one replica."""
    import ray

    if not avoid:
        return replicas, {}
    nodes: list[dict[str, Any]] = ray.nodes()  # type: ignore[no-untyped-call]
    room = fitting(nodes, stage.cpus, stage.gpus, avoid)
    if room == 0:
        return replicas, {}
    return min(replicas, room), avoiding(avoid)


def _dataset(
    chunk: list[stages.Item],
    spec: spec_pipeline.PipelineSpec,
    control: controller.Controller,
    ctx: tuple[str, str, Any],
) -> Any:
    import ray.data

    search, dead_dir, stats = ctx
    ds: Any = ray.data.from_items(chunk)
    for stage, choice in zip(spec.stages, control.current.stages, strict=True):
        args = (stage.name, stage.fn, search, spec.on_error == "fail", dead_dir, stats)
        size, where = _placement(stage, choice.replicas, control.avoid.get(stage.name, frozenset()))
        ds = ds.map_batches(
            StageActor,
            fn_constructor_args=args,
            batch_size=choice.batch_size,
            compute=ray.data.ActorPoolStrategy(size=size),
            num_cpus=stage.cpus,
            num_gpus=stage.gpus,
            batch_format="numpy",
            **where,
        )
    return ds


def _stage_windows(
    raw: tuple[dict[str, list[float]], dict[str, dict[str, list[float]]]],
) -> dict[str, controller.StageWindow]:
    seen, nodes = raw
    return {
        name: controller.StageWindow(
            int(v[0]),
            int(v[1]),
            float(v[2]),
            int(v[3]),
            {n: (int(c[0]), float(c[1])) for n, c in nodes.get(name, {}).items()},
        )
        for name, v in seen.items()
    }


def run(
    spec: spec_pipeline.PipelineSpec,
    control: controller.Controller,
    *,
    search: str,
    dead_dir: str,
    on_window: Callable[[WindowReport], None],
    skip: int = 0,
    first_window: int = 0,
) -> int:
    """Run the source through the stages; returns the items that came out. ``skip``:
    items of the source an earlier attempt already took through (a resumed run), its
    windows numbered on from ``first_window``."""
    import ray

    ray.data.DataContext.get_current().enable_progress_bars = False
    source = stages.load(spec.source, where="pipeline.source", search=search)
    stats: Any = ray.remote(num_cpus=0)(_Stats).remote()
    size = max(math.ceil(spec.target_throughput * spec.window_s), 1)
    total = 0
    rest = itertools.islice(source(), skip, None)
    for index, chunk in enumerate(_windows(rest, size), start=first_window):
        config, avoided = control.current, dict(control.avoid)
        start = time.monotonic()
        ds = _dataset(chunk, spec, control, (search, dead_dir, stats))
        out = sum(len(next(iter(b.values()), [])) for b in ds.iter_batches(batch_format="numpy"))
        elapsed = time.monotonic() - start
        seen = _stage_windows(ray.get(stats.take.remote()))
        after = control.observe(seen) if spec.elastic else config
        total += out
        report = WindowReport(index, len(chunk), out, elapsed, seen, config, after)
        on_window(dataclasses.replace(report, avoided=avoided, next_avoided=dict(control.avoid)))
    return total
