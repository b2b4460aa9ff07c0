"""Lab networking: one network namespace per region, a veth pair per inter-region link,
kernel ``tbf`` shaping on both ends of each link.

Layout for regions r0..rN-1 of a lab named ``<tag>``: namespace ``<tag>-<region>`` (with
``lo`` up); link k between regions a and b is a veth pair ``<tag>k<k>a`` (in a's
namespace, 10.<octet>.<k>.1/30) ↔ ``<tag>k<k>b`` (in b's, 10.<octet>.<k>.2/30), each end
shaped with ``tbf rate <mbit>mbit``. A region reaches a peer at the peer's address on
their shared link, so every pair of regions has its own shaped path. With
``peer_routes`` every other address of that peer is routed over the same link too (a
Ray cluster spanning regions binds one address per node and moves its bytes only over
the shaped links). Addresses live inside the lab's namespaces; nothing is routed to or
from the host, unless ``mgmt``: then each region also gets an unshaped
*management* link to the host (``<tag>m<i>h``, 10.<octet>.<200+i>.1/30), over which
the host (hub, agents, Jobs API clients) reaches the region's link addresses, e.g. a
Ray head started inside the namespace.

RTT is not added here (``netem`` is not available everywhere): it is emulated in user
space by the probe and data servers (``delays`` per local address; see ``agent.data.probes``).
``down`` deletes the namespaces, which deletes their veths (and the host's routes through
them); it is idempotent.
"""

from __future__ import annotations

import contextlib
import dataclasses
import subprocess
from collections.abc import Iterator

__all__ = ["LinkSpec", "Net", "NetError"]


_MGMT_BASE = 200
"""Third octet of the first management link (inter-region links use 0, 1, ...)."""


class NetError(RuntimeError):
    """An ``ip``/``tc`` command failed (not root? names taken?)."""


@dataclasses.dataclass(frozen=True)
class LinkSpec:
    """A symmetric inter-region link: rate (Mbit/s), user-space RTT and probe loss,
    egress cost/GB."""

    a: str
    b: str
    mbit: float = 1000.0
    rtt_ms: float = 0.0
    egress_per_gb: float = 0.0
    loss_pct: float = 0.0


def _run(*cmd: str, check: bool = True) -> None:
    res = subprocess.run(cmd, capture_output=True, text=True, timeout=20, check=False)
    if check and res.returncode != 0:
        raise NetError(f"{' '.join(cmd)}: {res.stderr.strip()}")


@dataclasses.dataclass(frozen=True)
class Net:
    """The lab's namespaces and links (``up`` creates them, ``down`` removes them)."""

    tag: str
    regions: tuple[str, ...]
    links: tuple[LinkSpec, ...]
    octet: int = 213
    mgmt: bool = False
    """Add the host's management links (two labs with it need different octets)."""
    peer_routes: bool = False
    """Route every peer address over the link shared with that peer (a spanning Ray
    cluster needs it). Off in the agents' lab: their peer discovery takes the first
    reachable address, and the user-space RTT and loss are per local address."""

    def ns(self, region: str) -> str:
        return f"{self.tag}-{region}"

    def _index(self, a: str, b: str) -> tuple[int, LinkSpec, bool]:
        for k, link in enumerate(self.links):
            if (link.a, link.b) == (a, b):
                return k, link, True
            if (link.a, link.b) == (b, a):
                return k, link, False
        raise KeyError(f"no link between {a} and {b}")

    def address(self, region: str, peer: str) -> str:
        """``region``'s address on its link to ``peer``."""
        k, _, first = self._index(region, peer)
        return f"10.{self.octet}.{k}.{1 if first else 2}"

    def addresses(self, region: str) -> list[str]:
        return [
            self.address(region, p) for p in self.regions if p != region and self.has(region, p)
        ]

    def has(self, a: str, b: str) -> bool:
        return any({link.a, link.b} == {a, b} for link in self.links)

    def link(self, a: str, b: str) -> LinkSpec:
        return self._index(a, b)[1]

    def mgmt_address(self, region: str) -> str:
        """The host's address on its management link into ``region``'s namespace."""
        return f"10.{self.octet}.{_MGMT_BASE + self.regions.index(region)}.1"

    def up(self) -> None:
        try:
            for r in self.regions:
                _run("ip", "netns", "add", self.ns(r))
                _run("ip", "-n", self.ns(r), "link", "set", "lo", "up")
            for k, link in enumerate(self.links):
                self._link_up(k, link)
            for r in self.regions:
                if self.peer_routes:
                    self._peer_routes(r)
                if self.mgmt:
                    self._mgmt_up(r)
        except BaseException:
            self.down()
            raise

    def _peer_routes(self, region: str) -> None:
        """Every address of a peer is reached over the link shared with that peer."""
        for peer in self.regions:
            if peer == region or not self.has(region, peer):
                continue
            via = self.address(peer, region)
            for addr in self.addresses(peer):
                if addr != via and not addr.startswith(self._subnet(region, peer)):
                    _run("ip", "-n", self.ns(region), "route", "replace", f"{addr}/32", "via", via)

    def _subnet(self, a: str, b: str) -> str:
        return f"10.{self.octet}.{self._index(a, b)[0]}."

    def _mgmt_up(self, region: str) -> None:
        """An unshaped host ↔ region link for the control plane (hub, agents, Jobs API):
        the host reaches each of the region's link addresses over it, never a peer's path."""
        i = _MGMT_BASE + self.regions.index(region)
        host, ns = f"{self.tag}m{i}h", f"{self.tag}m{i}r"
        _run("ip", "link", "add", host, "type", "veth", "peer", "name", ns)
        _run("ip", "link", "set", ns, "netns", self.ns(region))
        _run("ip", "addr", "add", f"10.{self.octet}.{i}.1/30", "dev", host)
        _run("ip", "-n", self.ns(region), "addr", "add", f"10.{self.octet}.{i}.2/30", "dev", ns)
        _run("ip", "link", "set", host, "up")
        _run("ip", "-n", self.ns(region), "link", "set", ns, "up")
        for addr in self.addresses(region):
            # replace: a route a crashed lab of the same octet left behind is taken over
            _run("ip", "route", "replace", f"{addr}/32", "via", f"10.{self.octet}.{i}.2")

    def _link_up(self, k: int, link: LinkSpec) -> None:
        ends = ((f"{self.tag}k{k}a", link.a, 1), (f"{self.tag}k{k}b", link.b, 2))
        _run("ip", "link", "add", ends[0][0], "type", "veth", "peer", "name", ends[1][0])
        burst = max(16_000, int(link.mbit * 1e6 / 8 / 200))
        for dev, region, host in ends:
            ns = self.ns(region)
            _run("ip", "link", "set", dev, "netns", ns)
            _run("ip", "-n", ns, "addr", "add", f"10.{self.octet}.{k}.{host}/30", "dev", dev)
            _run("ip", "-n", ns, "link", "set", dev, "up")
            _run(
                "tc", "-n", ns, "qdisc", "add", "dev", dev, "root", "tbf",
                "rate", f"{link.mbit}mbit", "burst", str(burst), "latency", "50ms",
            )  # fmt: skip

    @contextlib.contextmanager
    def running(self) -> Iterator[Net]:
        """``up`` for the ``with`` block, ``down`` after it (whatever happens inside)."""
        self.up()
        try:
            yield self
        finally:
            self.down()

    def set_rate(self, a: str, b: str, mbit: float) -> None:
        """Shape the link between two regions to ``mbit`` on both ends (a link degrading)."""
        k, _, _ = self._index(a, b)
        burst = max(16_000, int(mbit * 1e6 / 8 / 200))
        for dev, region in (
            (f"{self.tag}k{k}a", self.links[k].a),
            (f"{self.tag}k{k}b", self.links[k].b),
        ):
            _run(
                "tc", "-n", self.ns(region), "qdisc", "change", "dev", dev, "root", "tbf",
                "rate", f"{mbit}mbit", "burst", str(burst), "latency", "50ms",
            )  # fmt: skip

    def set_link(self, a: str, b: str, *, up: bool) -> None:
        """Cut (``up=False``) or restore the link between two regions: both ends go down
        or up, as when a region is cut off (the routes over it come back with it)."""
        k, _, _ = self._index(a, b)
        for dev, region in (
            (f"{self.tag}k{k}a", self.links[k].a),
            (f"{self.tag}k{k}b", self.links[k].b),
        ):
            _run("ip", "-n", self.ns(region), "link", "set", dev, "up" if up else "down")
        if up and self.peer_routes:  # the kernel dropped the routes over the link at down
            for region in (a, b):
                self._peer_routes(region)

    def down(self) -> None:
        for k in range(len(self.links)):
            _run("ip", "link", "del", f"{self.tag}k{k}a", check=False)  # if never moved
        for i in range(len(self.regions)):
            # Deleted now, not when the kernel gets round to the namespace: a lab started
            # right after with the same octet would otherwise route through the dying veth.
            _run("ip", "link", "del", f"{self.tag}m{_MGMT_BASE + i}h", check=False)
        for r in self.regions:
            _run("ip", "netns", "del", self.ns(r), check=False)

    def exists(self) -> list[str]:
        out = subprocess.run(
            ["ip", "netns", "list"], capture_output=True, text=True, timeout=10, check=False
        ).stdout
        names = {line.split()[0] for line in out.splitlines() if line.strip()}
        return [self.ns(r) for r in self.regions if self.ns(r) in names]
