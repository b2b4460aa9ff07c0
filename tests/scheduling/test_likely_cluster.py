"""``likely_cluster``: where a run waiting for GPUs will run, with hand-computed answers."""

from __future__ import annotations

import dataclasses

from taugrid.scheduling import cycle
from taugrid.scheduling import prewarm as likely
from taugrid.scheduling import snapshot as snap
from tests.scheduling.test_plugins_data import cluster, run


def test_a_full_cluster_is_still_the_likely_one_when_it_scores_best() -> None:
    # a: busy now (0/4 free) but twice as fast; b: idle, reference speed. With every GPU
    # free, a 1 h run finishes on a in 1,800 s (finish score 66.7) and on b in 3,600 s
    # (50); both hold no data to move (data 100) -> a.
    a = dataclasses.replace(cluster("a", free=0), gpu_speed=2.0)
    b = cluster("b", free=4)
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
