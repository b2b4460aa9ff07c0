"""Per-link bandwidth budget: a transfer reserves bandwidth on its link; others queue.

A link is ``(source region, destination region)``. Its capacity is the latest measured
probe throughput (or a configured budget). ``grant`` is a pure function: given the
active reservations and the queued requests in arrival order, it returns the requests
that may start now and the bandwidth each reserves (``share`` x capacity, default the
whole link). Per link, order is FIFO: once one request on a link must wait, later ones
on that link wait too (no overtaking).
"""

from __future__ import annotations

import dataclasses

__all__ = ["Grant", "Link", "Request", "grant"]

Link = tuple[str, str]
_EPS = 1e-9


@dataclasses.dataclass(frozen=True)
class Request:
    transfer_id: int
    link: Link


@dataclasses.dataclass(frozen=True)
class Grant:
    transfer_id: int
    reserved_bps: float
    capacity_bps: float

    @property
    def rate_limit_bps(self) -> float | None:
        """Throttle only a partial reservation; a whole-link one is limited by the link."""
        return self.reserved_bps if self.reserved_bps < self.capacity_bps - _EPS else None


def grant(
    queued: list[Request],
    active: dict[Link, float],
    capacity: dict[Link, float],
    default_bps: float,
    share: float = 1.0,
) -> list[Grant]:
    """Requests that may start now, with their reservations (bytes/s)."""
    used = dict(active)
    blocked: set[Link] = set()
    out = []
    for req in queued:
        cap = capacity.get(req.link) or default_bps
        want = cap * min(1.0, max(share, 0.0))
        if req.link in blocked or used.get(req.link, 0.0) + want > cap * (1 + 1e-6):
            blocked.add(req.link)
            continue
        used[req.link] = used.get(req.link, 0.0) + want
        out.append(Grant(req.transfer_id, want, cap))
    return out
