"""Spanning placement: one Ray cluster across member clusters, when that is worth it.

A run whose workers do not synchronise every step (``placement.communication`` async or
none) may run as **one Ray cluster** whose head (and first workers) sit in one member
cluster and whose other workers sit in *worker groups* in other member clusters; those
nodes join the head over the inter-region links. ``sync`` runs never span.

The cycle asks for a span only when no single cluster holds the whole run now
(``cycle._place``), and only with a link budget set (``Policy.span_min_bps``; ``None``:
never span). ``plan`` decides, from the snapshot alone:

1. *members*: clusters that every filter but ``fit`` and ``data_move`` keeps (those two
   judge the whole run on one cluster; spanning is the answer to them) and whose agent
   can span (``ClusterView.spannable``: it runs its own Ray cluster);
2. *head*: the member with the most free worker slots (ties: the cycle's score, then
   cluster ID), so that the fewest workers sit across a link;
3. *worker groups*: the other members in order of the link between their region and the
   head's (the slower of its two measured directions, fastest first); a link never
   measured, or slower than the link budget, is not used;
4. *worth it*: expected finish times. Spanning starts now, after the transfer estimate
   of the run's data into each member region (the slowest counts), and runs at its
   slowest member's GPU speed; one cluster finishes at ``plugins_data.finish_time_s``
   (transfer + expected wait + run time at its speed), the best cluster the run may use
   counting. It spans only when that is sooner, and never when one cluster has room for
   every worker (a whole-run rule such as move-vs-wait dropped it, and that stands).

Pure: no clock, no I/O. The reasons are what ``explain-placement`` shows.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable, Sequence

from taugrid.scheduling import plugins_data
from taugrid.scheduling import snapshot as snap

__all__ = ["SPAN_MODES", "WHOLE_RUN_FILTERS", "Member", "Span", "link_bps", "plan"]

SPAN_MODES = frozenset({"async", "none"})
"""``placement.communication`` values that may span; ``sync`` (and undeclared) never do."""
WHOLE_RUN_FILTERS = frozenset({"fit", "data_move"})
"""Filters that judge the whole run on one cluster: a span answers them, so skips them."""


@dataclasses.dataclass(frozen=True)
class Member:
    """One member cluster of a span and how many of the run's workers it holds."""

    cluster_id: str
    region: str
    workers: int


@dataclasses.dataclass(frozen=True)
class Span:
    """A spanning placement: ``members[0]`` holds the head; the rest are worker groups."""

    members: tuple[Member, ...]
    start_s: float
    """Transfer estimate of the run's data into the slowest member region."""
    finish_s: float
    """Expected finish spanning: ``start_s`` + run time at the slowest member's speed."""
    single_finish_s: float
    """Expected finish on the best single cluster (``plugins_data.finish_time_s``)."""
    reason: str


def link_bps(a: snap.ClusterView, b: snap.ClusterView) -> float:
    """Bytes/s between two clusters' regions: the slower measured direction (0: unmeasured)."""
    if a.region == b.region:
        return math.inf
    ab, ba = b.link_from(a.region), a.link_from(b.region)
    rates = [link.throughput_bps for link in (ab, ba) if link is not None]
    return min(rates) if rates else 0.0


def _slots(run: snap.PendingRun, c: snap.ClusterView) -> int:
    return int(min(c.slots(run.shape), run.workers))


def _mbit(bps: float) -> str:
    return f"{bps * 8 / 1e6:.0f} Mbit/s"


def _fmt_s(seconds: float) -> str:
    if math.isinf(seconds):
        return "never (no release expected)"
    return f"~{seconds:.0f} s" if seconds < 3600 else f"~{seconds / 3600:.1f} h"


def _members(
    run: snap.PendingRun,
    head: snap.ClusterView,
    others: list[snap.ClusterView],
    min_bps: float,
) -> tuple[list[Member], list[str]]:
    """The head, then worker groups by link speed until every worker has a slot."""
    members = [Member(head.cluster_id, head.region, _slots(run, head))]
    notes, left = [], run.workers - members[0].workers
    for c in sorted(others, key=lambda c: (-link_bps(head, c), c.cluster_id)):
        if left <= 0:
            break
        bps = link_bps(head, c)
        if bps < min_bps:
            seen = f"{_mbit(bps)}, under the {_mbit(min_bps)} budget" if bps else "never measured"
            notes.append(f"{c.cluster_id}: link to {head.region} {seen}")
            continue
        take = min(_slots(run, c), left)
        members.append(Member(c.cluster_id, c.region, take))
        left -= take
    return members, notes


def plan(
    run: snap.PendingRun,
    clusters: Sequence[snap.ClusterView],
    keeps: Callable[[snap.ClusterView], bool],
    min_bps: float | None,
    order: Callable[[snap.ClusterView], float] = lambda c: 0.0,
) -> Span | str:
    """A span for ``run`` over ``clusters``, or why it does not span.

    ``keeps``: whether every filter but ``WHOLE_RUN_FILTERS`` keeps a cluster;
    ``order``: the cycle's score of a cluster (breaks ties between heads);
    ``min_bps``: the link budget (``None``: spanning is off).
    """
    if min_bps is None:
        return "spanning is off (scheduling.span_min_mbit not set)"
    if run.communication not in SPAN_MODES or run.workers < 2:
        return "only async/none runs of 2+ workers span clusters"
    kept = [c for c in clusters if keeps(c)]
    usable = [c for c in kept if c.spannable and _slots(run, c) > 0]
    if len(usable) < 2:
        return "fewer than two clusters that can span have room for one of its workers"
    head = max(usable, key=lambda c: (_slots(run, c), order(c), c.cluster_id))
    if _slots(run, head) >= run.workers:  # e.g. move-vs-wait dropped it: that rule stands
        return f"{head.cluster_id} has room for every worker; spanning is not needed"
    members, notes = _members(run, head, [c for c in usable if c is not head], min_bps)
    held = sum(m.workers for m in members)
    if held < run.workers:
        why = "; ".join(notes)
        return f"spanning holds {held} of {run.workers} workers" + (f" ({why})" if why else "")
    by_id = {c.cluster_id: c for c in clusters}
    ests = [plugins_data.estimate(run, by_id[m.cluster_id]) for m in members]
    if any(e.missing for e in ests):
        return "a dataset has no complete replica in any region"
    start_s = max(e.seconds for e in ests)
    speed = min(by_id[m.cluster_id].gpu_speed for m in members)
    span_s = start_s + (run.runtime_s or plugins_data.DEFAULT_RUNTIME_S) / speed
    one_s = min((plugins_data.finish_time_s(run, c) for c in kept), default=math.inf)
    after = f"after {_fmt_s(start_s)} of data transfer, GPUs at {speed:g}x"
    if span_s >= one_s:
        return (
            f"spanning would finish in {_fmt_s(span_s)} ({after}), "
            f"not sooner than on one cluster ({_fmt_s(one_s)})"
        )
    groups = ", ".join(f"{m.cluster_id} ({m.workers})" for m in members[1:])
    reason = (
        f"spans clusters: head {head.cluster_id} ({members[0].workers} workers), "
        f"worker groups {groups}; finishes in {_fmt_s(span_s)} ({after}) "
        f"instead of {_fmt_s(one_s)} on one cluster"
    )
    return Span(tuple(members), start_s, span_s, one_s, reason)
