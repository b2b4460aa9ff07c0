"""The agent's lender (``agent.attempts.guests.Lender``) on real Ray: a guest order becomes a node
of the head's Ray cluster, the head's agent does not count it as its own, and the node
is stopped when the order is withdrawn; a node that cannot join is reported ``failed``.

One real Ray cluster on 127.0.35.1 with token auth plays the head; the lender runs
``ray start --address`` as the guest agent would, with the token the order carries. The
whole path through a hub is ``tests/agent/test_span_guests.py`` (long tier).

This process reads the head's state over HTTP only (the dashboard, with the token in its
environment for the test's length), never through Ray's in-process GCS client: that
client keeps token authentication on for the rest of the process once it used it, and a
later test's ``ray.init()`` of a cluster without a token then fails.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from taugrid import payloads as wire
from taugrid.agent.attempts import guests
from taugrid.backends.ray import _procs, ray_guest, ray_local
from tests import ray_auth
from tests.backends import backend_helpers as bh

# Guest nodes are swept by their marker prefix host-wide: one module at a time.
pytestmark = [
    pytest.mark.ray,
    pytest.mark.slow,
    pytest.mark.timeout(300),
    pytest.mark.xdist_group("guest-nodes"),
]

HEAD_IP, GUEST_IP = "127.0.35.1", "127.0.35.2"


@pytest.fixture
def head(tmp_path: Path) -> Iterator[ray_local.LocalRayCluster]:
    token = ray_local.write_auth_token(tmp_path / "ray-token")
    shape = ray_local.NodeShape(ip=HEAD_IP, num_gpus=1, num_cpus=2)
    cluster = ray_local.LocalRayCluster(
        HEAD_IP,
        bh.free_port(HEAD_IP, 6600, 6699),
        bh.free_port(HEAD_IP, 8600, 8699),
        [shape],
        tmp_path / "head",
        auth_token_file=token,
    )
    with ray_auth.token_env(token):  # this process reads the head's state
        try:
            yield cluster.start(timeout_s=180)
        finally:
            cluster.stop()


def _order(head: ray_local.LocalRayCluster, token: str | None) -> wire.GuestOrder:
    return wire.GuestOrder(
        token=7,
        run_id="r-1",
        head_cluster="head",
        workers=2,
        gpus_per_worker=1,
        cpus_per_worker=1,
        memory_per_worker=2**30,
        gpu_model="A100-80G",
        address=head.gcs_address,
        auth_token=token,
    )


def _two_nodes(head: ray_local.LocalRayCluster) -> list[dict[str, Any]]:
    rows = head._node_rows()
    return rows if len(rows) == 2 else []


def _state(lender: guests.Lender) -> str:
    return {s.token: s.state for s in lender.statuses()}.get(7, "")


def test_an_order_joins_a_node_that_the_head_does_not_count_and_stops_with_the_order(
    head: ray_local.LocalRayCluster, tmp_path: Path
) -> None:
    cfg = guests.SpanConfig(GUEST_IP, "unused:1")
    lender = guests.Lender("guest", "far", cfg, tmp_path / "guests")
    secret = head.auth_token_file.read_text().strip() if head.auth_token_file else None
    try:
        lender.reconcile([_order(head, secret)])
        bh.wait_for(lambda: _state(lender) == "joined", timeout=90, what="the join")
        backend = head.backend(gcs_address=None)  # HTTP only: see the module docstring
        try:
            rows = bh.wait_for(lambda: _two_nodes(head), timeout=30, what="the guest node")
            guest = next(r for r in rows if r.get("node_ip") == GUEST_IP)
            assert guest["labels"][ray_guest.GUEST_LABEL] == "7"
            assert guest["resources_total"]["GPU"] == 2  # 2 workers x 1 GPU
            assert guest["resources_total"]["region:far"] == 2
            # the head cluster's own inventory leaves the lent node out
            assert [n.ip for n in backend.inventory().nodes] == [HEAD_IP]
        finally:
            backend.close()
        lender.reconcile([])  # the attempt ended: the order is no longer listed
        assert not _procs.marked("tau-guest/guest/", prefix=True)
        assert lender.statuses() == []
    finally:
        lender.close()


def test_a_node_without_the_heads_token_fails_and_is_not_started_again(
    head: ray_local.LocalRayCluster, tmp_path: Path
) -> None:
    lender = guests.Lender("guest", "far", guests.SpanConfig(GUEST_IP, "unused:1"), tmp_path)
    try:
        order = _order(head, None)  # no token relayed: the head refuses the node
        lender.reconcile([order])
        bh.wait_for(lambda: _state(lender) == "failed", timeout=120, what="the failure")
        (status,) = lender.statuses()
        assert status.message.startswith("ray start exited with")
        lender.reconcile([order])  # still listed: it is not started again
        assert lender.nodes == {} and _state(lender) == "failed"
    finally:
        lender.close()
