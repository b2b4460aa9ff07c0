"""The elastic controller: resize stage pools toward the target from live measurements.

Pure (no clock, no Ray). The Ray side (``ray_exec``) runs the pipeline in windows; after
each window it hands the controller what each stage did (``StageWindow``: items in and
out, replica-seconds spent in the stage's callable, batches) and gets the configuration
for the next window (``controller.observe``).

Each stage's cost model (``sizing.CostModel``, from the sample the driver measures) is
corrected by the ratio of measured to modelled seconds per batch: a change of more
than ``JUMP`` (a new data mix, a slower node) is taken at once, a smaller one is
smoothed (``ALPHA``) as noise, so a stage that became slower (larger images in the data mix, a
slow node) gets more replicas and one that became faster gives replicas back; the
same ``sizing.recommend`` that plans the run then picks the configuration. A window
in which a stage saw no batches leaves its model as it was.

Slow nodes (the second level of tuning): each window also says how many items each
node handled for a stage and the replica-seconds it took (``StageWindow.nodes``). A
node whose seconds per item exceed ``SLOW`` times the median of the stage's other nodes
is slow for that stage (a throttled GPU, a noisy neighbour, a failing disk): it joins
``Controller.avoid[stage]`` and the stage's replicas are started elsewhere from the next
window on (``ray_exec`` puts a node-ID label selector on the stage's actors). A node is
judged only against others of the same stage, so a stage on one node is never judged,
and a node is never avoided for being the only one. Avoidance lasts for the run.

The third level (moving the run) starts here too: ``cpus_wanted`` says when the
cluster's CPUs, and nothing else, keep the pipeline from its target, and how many CPUs
would meet it; the driver (``sdk.job.pipeline_job``) then asks the hub to move the run.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence

from taugrid.elastic import sizing

__all__ = ["ALPHA", "JUMP", "SLOW", "Controller", "StageWindow", "cpus_wanted", "slow_nodes"]

ALPHA = 0.7
"""Weight of the newest window in the smoothed correction (1: trust only the newest)."""
JUMP = 0.25
"""A measured/modelled ratio further than this from 1 replaces the model outright."""
SLOW = 2.0
"""A node slower per item than this times the median of a stage's other nodes is avoided."""


@dataclasses.dataclass(frozen=True)
class StageWindow:
    """What one stage did during one window."""

    items_in: int
    items_out: int
    busy_s: float
    batches: int
    nodes: Mapping[str, tuple[int, float]] = dataclasses.field(default_factory=dict)
    """Per node the stage ran on: (items in, replica-seconds in the callable)."""


class Controller:
    """Keeps per-stage models and the current configuration; one ``observe`` per window."""

    def __init__(
        self,
        profiles: Sequence[sizing.StageProfile],
        target: float,
        gpu_budget: float | None = None,
        cpu_budget: float | None = None,
    ) -> None:
        self._profiles = list(profiles)
        self.target = target
        self.gpu_budget = gpu_budget  # the GPUs the run holds: never sized past them
        self.cpu_budget = cpu_budget  # the CPUs its cluster has for the stage pools
        self.current = sizing.recommend(self._profiles, target, gpu_budget, cpu_budget)
        self.avoid: dict[str, frozenset[str]] = {}
        """Per stage, the nodes found slow for it (its replicas start elsewhere)."""

    @property
    def profiles(self) -> tuple[sizing.StageProfile, ...]:
        """The stage models as corrected so far."""
        return tuple(self._profiles)

    def observe(self, window: Mapping[str, StageWindow]) -> sizing.Recommendation:
        """Correct each stage's model by ``window`` and return the next configuration."""
        for index, profile in enumerate(self._profiles):
            seen = window.get(profile.name)
            if seen is None or seen.batches == 0 or seen.items_in == 0:
                continue
            self._profiles[index] = _corrected(profile, seen)
            slow = slow_nodes(seen.nodes)
            if slow:
                self.avoid[profile.name] = self.avoid.get(profile.name, frozenset()) | slow
        self.current = sizing.recommend(
            self._profiles, self.target, self.gpu_budget, self.cpu_budget
        )
        return self.current


def _corrected(profile: sizing.StageProfile, seen: StageWindow) -> sizing.StageProfile:
    mean_batch = max(round(seen.items_in / seen.batches), 1)
    measured = seen.busy_s / seen.batches
    modelled = profile.cost.seconds(mean_batch)
    ratio = measured / modelled
    factor = ratio if abs(ratio - 1) > JUMP else (1 - ALPHA) + ALPHA * ratio
    cost = sizing.CostModel(profile.cost.fixed_s * factor, profile.cost.per_item_s * factor)
    selectivity = (1 - ALPHA) * profile.selectivity + ALPHA * (seen.items_out / seen.items_in)
    return dataclasses.replace(profile, cost=cost, selectivity=selectivity)


def slow_nodes(nodes: Mapping[str, tuple[int, float]]) -> frozenset[str]:
    """The nodes whose seconds per item exceed ``SLOW`` x the median of the others'."""
    per_item = {n: busy / items for n, (items, busy) in nodes.items() if items > 0}
    slow = set()
    for node, seconds in per_item.items():
        others = sorted(v for n, v in per_item.items() if n != node)
        if others and seconds > SLOW * _median(others):
            slow.add(node)
    return frozenset(slow)


def _median(values: Sequence[float]) -> float:
    mid = len(values) // 2
    return values[mid] if len(values) % 2 else (values[mid - 1] + values[mid]) / 2


def cpus_wanted(control: Controller) -> float | None:
    """The CPUs the stage pools need to meet the target when the cluster's CPUs are all
    that keep them from it (the third level: a cluster with that many would do); None
    when the target is met, or when something else (a stage's bounds, the run's GPUs)
    would still cap it elsewhere."""
    limit = control.current.limit
    if limit is None or limit.cpu_budget is None:
        return None
    free = sizing.recommend(control.profiles, control.target, control.gpu_budget)
    return free.cpus if free.reachable else None
