"""Cluster DNS for the real node: the names of Services, answered from the API server.

A cluster's DNS (CoreDNS's ``kubernetes`` plugin) answers ``<service>.<namespace>.svc.
<domain>`` with the Service's cluster IP, or, for a headless Service, with the addresses
of its ready endpoints. KubeRay names the head by such a name (a worker's ``ray start
--address``, its ``wait-gcs-ready`` init container, the RayJob submitter's and the
operator's dashboard address), and the head Service is headless, so on the real node
(host-network pods, ``dnsPolicy: ClusterFirstWithHostNet``) the name resolves to the head
pod's address, the node's. The test control plane has no cluster DNS, so ``ClusterDNS``
is that part of CoreDNS, over UDP on the control plane's address (the kubelet's
``clusterDNS``; processes outside pods use it through ``ControlPlane.spawn(...,
cluster_names=True)``): A records of Services under ``svc.<domain>``; every other name is
NXDOMAIN, at once (a pod's resolver tries its search domains, then gives up). It reads
the API server on each query (the harness's pods look a name up a few times).

One difference from a cluster: the API server refuses EndpointSlices whose addresses are
loopback ("may not be in the loopback range"), and the real node's pods have a loopback
address, so no Service of theirs ever has endpoints. A headless Service is answered from
what the endpoint controller would have written: the running pods its selector picks
(the ready ones, unless it publishes not-ready addresses). Only loopback addresses are
answered: kwok's pods have made-up addresses of ranges this machine must never send to.
"""

from __future__ import annotations

import ipaddress
import socket
import struct
import threading
from collections.abc import Callable
from typing import Any

import httpx

__all__ = ["DOMAIN", "ClusterDNS", "answer"]

DOMAIN = "cluster.local"
TTL_S = 5
_A, _IN = 1, 1
_NXDOMAIN = 3
_FLAGS = 0x8000 | 0x0400 | 0x0080  # a response, authoritative, recursion "available"
_RD = 0x0100


def _qname(msg: bytes, at: int) -> tuple[str, int]:
    labels = []
    while (n := msg[at]) != 0:
        labels.append(msg[at + 1 : at + 1 + n].decode("ascii", "replace"))
        at += n + 1
    return ".".join(labels).lower(), at + 1


def answer(query: bytes, lookup: Callable[[str], list[str] | None]) -> bytes:
    """The response to one query: ``lookup(name)`` gives the name's IPv4 addresses, or
    None when no such name exists (NXDOMAIN); other record types get no answer."""
    qid, flags = struct.unpack("!HH", query[:4])
    name, end = _qname(query, 12)
    qtype = struct.unpack("!H", query[end : end + 2])[0]
    question = query[12 : end + 4]
    found = lookup(name)
    records = found if found and qtype == _A else []
    rcode = _NXDOMAIN if found is None else 0
    head = struct.pack("!6H", qid, _FLAGS | (flags & _RD) | rcode, 1, len(records), 0, 0)
    body = b"".join(
        b"\xc0\x0c" + struct.pack("!HHIH", _A, _IN, TTL_S, 4) + socket.inet_aton(ip)
        for ip in records
    )
    return head + question + body


class ClusterDNS:
    """Serves ``answer`` on ``ip``:53 (UDP) in a thread, reading Services through ``api``
    (an admin client of the control plane); ``start``/``stop``."""

    def __init__(self, api: Callable[[], httpx.Client], ip: str) -> None:
        self.api, self.ip = api, ip
        self._sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._serve, name="cluster-dns", daemon=True)

    def start(self) -> ClusterDNS:
        self._sock.bind((self.ip, 53))
        self._sock.settimeout(0.5)
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(timeout=5)
        self._sock.close()

    def _serve(self) -> None:
        with self.api() as client:
            while not self._stop.is_set():
                try:
                    query, peer = self._sock.recvfrom(512)
                except TimeoutError:
                    continue
                except OSError:
                    return
                try:
                    reply = answer(query, lambda name: self.lookup(client, name))
                except (IndexError, struct.error, httpx.HTTPError):
                    continue  # a malformed query, or the API server stopping
                self._sock.sendto(reply, peer)

    @staticmethod
    def lookup(client: httpx.Client, name: str) -> list[str] | None:
        """``<service>.<namespace>.svc.<DOMAIN>``'s addresses; None for any other name."""
        suffix = f".svc.{DOMAIN}"
        parts = name.removesuffix(suffix).split(".") if name.endswith(suffix) else []
        if len(parts) != 2:
            return None
        svc, ns = parts
        r = client.get(f"/api/v1/namespaces/{ns}/services/{svc}")
        if r.status_code == 404:
            return None
        r.raise_for_status()
        spec = r.json()["spec"]
        if spec.get("clusterIP") not in (None, "", "None"):
            return [spec["clusterIP"]]
        if not spec.get("selector"):
            return []
        pods = client.get(
            f"/api/v1/namespaces/{ns}/pods",
            params={"labelSelector": ",".join(f"{k}={v}" for k, v in spec["selector"].items())},
        )
        pods.raise_for_status()
        every = bool(spec.get("publishNotReadyAddresses"))
        return sorted(
            {
                p["status"]["podIP"]
                for p in pods.json()["items"]
                if p["status"].get("phase") == "Running" and _loopback(p["status"].get("podIP"))
                if every or _ready(p)
            }
        )


def _loopback(ip: str | None) -> bool:
    try:
        return ip is not None and ipaddress.ip_address(ip).is_loopback
    except ValueError:
        return False


def _ready(pod: dict[str, Any]) -> bool:
    conditions = pod["status"].get("conditions") or []
    return any(c["type"] == "Ready" and c["status"] == "True" for c in conditions)
