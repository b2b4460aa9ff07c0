"""``likely_cluster``: where a run waiting for GPUs will run, with hand-computed answers."""

from __future__ import annotations

import dataclasses

from taugrid.scheduling import cycle
from taugrid.scheduling import prewarm as likely
from taugrid.scheduling import snapshot as snap
from tests.scheduling.test_plugins_data import cluster, run


def test_a_full_cluster_is_still_the_likely_one_when_it_scores_best() -> None:
    # a: busy now (0/4 free) but cheap; b: idle but ten times the price. With every GPU
    # free, a scores .3*100 + .2*(1-1/10)*100 = 48 and b .3*100 + .2*0 = 30 -> a.
    a, b = cluster("a", free=0, cost=1.0), cluster("b", free=4, cost=10.0)
    s = snap.Snapshot(0.0, (a, b), ())
    waiting = run(gpus=2, admitted=False, not_before=50.0)
    assert likely.likely_cluster(waiting, s, cycle.default_policy()) == "a"
    (now,) = cycle.schedule(
        s, [dataclasses.replace(waiting, admitted=True, not_before=0.0)], cycle.default_policy()
    )
    assert now.cluster_id == "b"  # placed now it would go to b: only a hint moves


def test_no_cluster_when_it_never_fits_or_the_region_is_not_allowed() -> None:
    s = snap.Snapshot(0.0, (cluster("a", "eu"),), ())
    assert likely.likely_cluster(run(gpus=8), s, cycle.default_policy()) is None
    far = run(gpus=1, allowed_regions=("us",))
    assert likely.likely_cluster(far, s, cycle.default_policy()) is None
