"""Lab networking: one network namespace per region, a veth pair per inter-region link,
kernel ``tbf`` shaping on both ends of each link.

Layout for regions r0..rN-1 of a lab named ``<tag>``: namespace ``<tag>-<region>`` (with
``lo`` up); link k between regions a and b is a veth pair ``<tag>k<k>a`` (in a's
namespace, 10.<octet>.<k>.1/30) ↔ ``<tag>k<k>b`` (in b's, 10.<octet>.<k>.2/30), each end
shaped with ``tbf rate <mbit>mbit``. A region reaches a peer at the peer's address on
their shared link, so every pair of regions has its own shaped path. Addresses live only
inside the lab's namespaces; nothing is routed to or from the host.

RTT is not added here (``netem`` is not available everywhere): it is emulated in user
space by the probe and data servers (``delays`` per local address; see ``agent.probes``).
``down`` deletes the namespaces, which deletes their veths; it is idempotent.
"""

from __future__ import annotations

import dataclasses
import subprocess

__all__ = ["LinkSpec", "Net", "NetError"]


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

    def up(self) -> None:
        try:
            for r in self.regions:
                _run("ip", "netns", "add", self.ns(r))
                _run("ip", "-n", self.ns(r), "link", "set", "lo", "up")
            for k, link in enumerate(self.links):
                self._link_up(k, link)
        except BaseException:
            self.down()
            raise

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

    def down(self) -> None:
        for k in range(len(self.links)):
            _run("ip", "link", "del", f"{self.tag}k{k}a", check=False)  # if never moved
        for r in self.regions:
            _run("ip", "netns", "del", self.ns(r), check=False)

    def exists(self) -> list[str]:
        out = subprocess.run(
            ["ip", "netns", "list"], capture_output=True, text=True, timeout=10, check=False
        ).stdout
        names = {line.split()[0] for line in out.splitlines() if line.strip()}
        return [self.ns(r) for r in self.regions if self.ns(r) in names]
