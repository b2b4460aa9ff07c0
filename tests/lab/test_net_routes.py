"""The lab's routes (``lab.net``): every peer address over the link shared with that
peer, the host's management links, and links cut, restored and re-shaped. Real
namespaces, veths and ``tc``; no Ray."""

from __future__ import annotations

import os
import secrets
import shutil
import subprocess
from collections.abc import Iterator

import pytest

from taugrid.lab import net

pytestmark = pytest.mark.skipif(
    os.geteuid() != 0 or not shutil.which("tc"), reason="needs root and iproute2 (netns, tbf)"
)


@pytest.fixture
def mesh() -> Iterator[net.Net]:
    links = (net.LinkSpec("a", "b", 100), net.LinkSpec("a", "c", 100), net.LinkSpec("b", "c", 100))
    n = net.Net(
        f"tr{secrets.token_hex(2)}", ("a", "b", "c"), links, octet=218, mgmt=True, peer_routes=True
    )
    with n.running():
        yield n
    assert not n.exists()


def _dev(addr: str, ns: str | None = None) -> str:
    """The device the kernel sends to ``addr`` on (in ``ns``, or on the host)."""
    cmd = ["ip", *(["-n", ns] if ns else []), "route", "get", addr]
    words = subprocess.run(cmd, capture_output=True, text=True, check=True).stdout.split()
    return words[words.index("dev") + 1]


def test_peer_addresses_go_over_the_shared_link_and_the_host_over_management(
    mesh: net.Net,
) -> None:
    b_on_ab = mesh.address("b", "a")
    # from c, b's address on the a-b link goes over the b-c link (k=2, c is its b end)
    assert _dev(b_on_ab, mesh.ns("c")) == f"{mesh.tag}k2b"
    assert _dev(b_on_ab, mesh.ns("a")) == f"{mesh.tag}k0a"  # directly connected
    assert _dev(b_on_ab) == f"{mesh.tag}m201h"  # the host: b's management link
    assert mesh.mgmt_address("b") == "10.218.201.1"


def test_a_cut_link_comes_back_with_its_routes_and_a_new_rate(mesh: net.Net) -> None:
    b_on_ab = mesh.address("b", "a")
    mesh.set_link("b", "c", up=False)
    gone = subprocess.run(["ip", "-n", mesh.ns("c"), "route", "get", b_on_ab], capture_output=True)
    assert gone.returncode != 0  # c has no path to b but the cut link
    mesh.set_link("b", "c", up=True)
    assert _dev(b_on_ab, mesh.ns("c")) == f"{mesh.tag}k2b"
    mesh.set_rate("a", "b", 20)
    shown = subprocess.run(
        ["tc", "-n", mesh.ns("a"), "qdisc", "show", "dev", f"{mesh.tag}k0a"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    assert "rate 20Mbit" in shown
