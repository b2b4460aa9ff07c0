"""This region's peer regions: configured ones and the ones the hub announces.

An agent with a data plane reports where its probe and data servers listen
(``StateReport.endpoint``); the hub answers every full report with the endpoints of the
other regions (``AgentSyncReply.peers``), so adding a region needs no change to the
others' configuration. An announced peer lists all its listen addresses; from its own
network namespace this agent can reach only some of them (in the lab a region reaches a
peer only at the peer's end of their shared link), so it uses the first address that
accepts a TCP connection on the peer's probe port and checks again when the
announcement changes.

Peers given on the command line (``--peer``) win over announcements of the same region;
``egress`` overrides (``--egress``) win over the cost the hub announces.
"""

from __future__ import annotations

import contextlib
import logging
import threading
from collections.abc import Callable

from taugrid import payloads as wire
from taugrid.agent.data import probes
from taugrid.dataplane import netns

__all__ = ["PeerBook", "reachable"]

log = logging.getLogger(__name__)


def reachable(
    addresses: list[str], port: int, ns: str | None, timeout_s: float = 1.0
) -> str | None:
    """The first of ``addresses`` that accepts a TCP connection on ``port`` from ``ns``."""
    for addr in addresses:
        try:
            sock = netns.create_connection((addr, port), timeout_s, ns)
        except OSError:
            continue
        with contextlib.closing(sock):
            return addr
    return None


class PeerBook:
    """Current peers of one region; ``peers()`` resolves new announcements lazily.

    ``on_resolved(peer)`` is called for every peer whose address is (re)resolved, so the
    data agent can point its transfer source there.
    """

    def __init__(
        self,
        static: list[probes.Peer],
        ns: str | None,
        egress: dict[str, float] | None = None,
        on_resolved: Callable[[probes.Peer], None] = lambda _peer: None,
    ) -> None:
        self.ns, self.egress, self.on_resolved = ns, egress or {}, on_resolved
        self._static = {p.region: p for p in static}
        self._announced: dict[str, wire.PeerEndpoint] = {}
        self._resolved: dict[str, tuple[wire.PeerEndpoint, probes.Peer]] = {}
        self._lock = threading.Lock()

    def announce(self, peers: list[wire.PeerEndpoint]) -> None:
        """Take the hub's latest list (regions missing from it are forgotten)."""
        with self._lock:
            self._announced = {p.region: p for p in peers if p.region not in self._static}

    def peers(self) -> list[probes.Peer]:
        """Configured peers plus every announced peer reachable from here."""
        with self._lock:
            announced = dict(self._announced)
        out = list(self._static.values())
        for _region, ann in sorted(announced.items()):
            peer = self._resolve(ann)
            if peer is not None:
                out.append(peer)
        return out

    def _resolve(self, ann: wire.PeerEndpoint) -> probes.Peer | None:
        known = self._resolved.get(ann.region)
        if known is not None and known[0] == ann:
            return known[1]
        host = reachable(ann.addresses, ann.probe_port, self.ns)
        if host is None:
            log.info("peer %s announced at %s: none reachable yet", ann.region, ann.addresses)
            return None
        cost = self.egress.get(ann.region, ann.egress_cost_per_gb)
        peer = probes.Peer(ann.region, host, ann.probe_port, ann.data_port, cost)
        self._resolved[ann.region] = (ann, peer)
        log.info("peer %s reachable at %s", ann.region, host)
        self.on_resolved(peer)
        return peer
