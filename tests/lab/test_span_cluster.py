"""One Ray cluster across two lab regions (``lab.span``): a data-parallel job whose
workers sit in both regions trains in both, and cutting one region off mid-run shrinks
the job instead of killing it; every shard is still trained on. A link that degrades
mid-run slows the far region's share without stopping the job, and the job's
per-region shard counts show it (issue 19, item 2).

Real pieces: two network namespaces joined by a veth pair shaped with kernel ``tbf``
(200 Mbit/s), a Ray head inside region ``a``'s namespace and a Ray node inside ``b``'s
joined over that link (token auth on), the job submitted through the Jobs API over the
host's management link, and ``examples/span-data-parallel/train.py`` as the job.
"""

from __future__ import annotations

import os
import secrets
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from taugrid.backends.ray import ray_local
from taugrid.lab import net, span
from tests import ray_auth
from tests.lab import span_jobs

pytestmark = [
    pytest.mark.skipif(
        os.geteuid() != 0 or not shutil.which("tc"), reason="needs root and iproute2 (netns, tbf)"
    ),
    pytest.mark.ray,
    pytest.mark.slow,
    pytest.mark.timeout(480),
]
TRAIN = Path(__file__).parents[2] / "examples" / "span-data-parallel" / "train.py"
SHAPE = ray_local.NodeShape(num_cpus=3, num_gpus=2, accelerator="A100", memory=4 * 2**30)


@pytest.fixture(scope="module")
def lab(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[net.Net, Any]]:
    """Regions a (head, 2 GPUs) and b (2 GPUs), 200 Mbit/s apart, one Ray cluster."""
    tmp = tmp_path_factory.mktemp("span")
    link = net.LinkSpec("a", "b", 200.0)
    n = net.Net(
        f"ts{secrets.token_hex(2)}", ("a", "b"), (link,), octet=217, mgmt=True, peer_routes=True
    )
    cluster = span.span_cluster(n, "a", {"a": SHAPE, "b": SHAPE}, tmp / "ray", tmp / "token")
    assert cluster.auth_token_file is not None
    with n.running():
        try:
            cluster.start(timeout_s=90)
            with ray_auth.token_env(cluster.auth_token_file):  # the Jobs API client's
                yield n, cluster
        finally:
            cluster.stop()
    assert not n.exists()


@pytest.fixture(autouse=True)
def whole(lab: tuple[net.Net, Any]) -> None:
    """Both regions in the cluster before each test: one the GCS declared dead in the test
    before (its link cut, or slowed until its health checks failed on a loaded machine)
    is started again, or the job would wait for GPUs that are gone."""
    lab[1].heal()


@pytest.mark.long
def test_a_degraded_link_slows_the_far_region_and_its_metrics_show_it(
    lab: tuple[net.Net, Any], tmp_path: Path
) -> None:
    n, cluster = lab
    args = ["--workers", "4", "--shards", "100"]
    try:
        slow = lambda: n.set_rate("a", "b", 10)  # noqa: E731  # 2 MiB shards: ~1.7 s each
        res = span_jobs.train(cluster, tmp_path / "r.json", args, during=slow)
    finally:
        n.set_rate("a", "b", 200)
    assert res["shards"] == 100  # it kept going to the end
    first, last = res["timeline"][0], res["timeline"][-1]
    before = first["shards"].get("b", 0) / sum(first["shards"].values())
    after_b = last["shards"].get("b", 0) - first["shards"].get("b", 0)
    after = after_b / (sum(last["shards"].values()) - sum(first["shards"].values()))
    assert after < before  # b's share of the work fell with its link: the metric says why


@pytest.mark.long
def test_cutting_a_region_off_shrinks_the_job_instead_of_killing_it(
    lab: tuple[net.Net, Any], tmp_path: Path
) -> None:
    n, cluster = lab
    args = ["--workers", "4", "--shards", "120"]
    try:
        cut = lambda: n.set_link("a", "b", up=False)  # noqa: E731
        res = span_jobs.train(cluster, tmp_path / "r.json", args, during=cut)
    finally:
        n.set_link("a", "b", up=True)  # b's raylet exits once it hears it was declared dead
    assert res["shards"] == 120  # every shard, the lost workers' included, was trained on
    assert (res["workers_start"], res["workers_end"], res["workers_lost"]) == (4, 2, 2)
    by = res["by_region"]
    assert by.get("b", 0) > 0 and by["a"] > by["b"]  # both trained; b stopped when cut off
    first, last = res["timeline"][0], res["timeline"][-1]
    assert (first["workers"], last["workers"]) == (4, 2)  # the run's metrics show the shrink
    assert last["shards"]["b"] == by["b"]
    assert res["loss_end"] < res["loss_start"] / 10
