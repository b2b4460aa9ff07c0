"""Per-link bandwidth budget: reservations and FIFO queueing, answers by hand."""

from __future__ import annotations

from taugrid.dataplane import budget

AB, AC = ("a", "b"), ("a", "c")


def test_whole_link_reservations_queue_per_link_in_order() -> None:
    queued = [budget.Request(1, AB), budget.Request(2, AB), budget.Request(3, AC)]
    grants = budget.grant(queued, {}, {AB: 12.5e6}, default_bps=1e6)
    # 1 takes all of a->b, 2 waits behind it; a->c is unmeasured: the default 1 MB/s
    assert [(g.transfer_id, g.reserved_bps) for g in grants] == [(1, 12.5e6), (3, 1e6)]
    assert grants[0].rate_limit_bps is None  # the link itself is the limit


def test_half_shares_let_two_run_and_are_throttled() -> None:
    queued = [budget.Request(i, AB) for i in (1, 2, 3)]
    grants = budget.grant(queued, {}, {AB: 10e6}, default_bps=1e6, share=0.5)
    assert [(g.transfer_id, g.reserved_bps) for g in grants] == [(1, 5e6), (2, 5e6)]
    assert grants[0].rate_limit_bps == 5e6


def test_active_reservations_count_and_no_overtaking() -> None:
    # 6 of 10 MB/s in use: a half share (5) does not fit, so 1 waits and 2 may not pass it
    queued = [budget.Request(1, AB), budget.Request(2, AB)]
    assert budget.grant(queued, {AB: 6e6}, {AB: 10e6}, 1e6, share=0.5) == []
    assert [g.transfer_id for g in budget.grant(queued, {AB: 5e6}, {AB: 10e6}, 1e6, 0.5)] == [1]
