"""Sockets inside a Linux network namespace, from a process that lives outside it.

The lab separates regions by network namespaces; an agent runs in the root namespace
(it talks to the hub and its Ray cluster on loopback) but serves and fetches data and
probes *inside* its region's namespace. A socket belongs to the namespace of the
thread that created it, for its whole life, so ``in_netns`` creates it in a short-lived
thread that first joins the namespace (``setns(2)``, needs CAP_SYS_ADMIN). With
``ns=None`` everything happens in the caller's namespace.
"""

from __future__ import annotations

import ctypes
import os
import socket
import threading
from collections.abc import Callable
from typing import TypeVar

__all__ = ["NetnsError", "create_connection", "create_server", "create_udp", "in_netns"]

T = TypeVar("T")
_CLONE_NEWNET = 0x40000000


class NetnsError(OSError):
    """Joining a network namespace failed (missing, or no privilege)."""


def _join(ns: str) -> None:
    libc = ctypes.CDLL(None, use_errno=True)
    fd = os.open(f"/var/run/netns/{ns}", os.O_RDONLY)
    try:
        if libc.setns(fd, _CLONE_NEWNET) != 0:
            err = ctypes.get_errno()
            raise NetnsError(err, f"setns({ns}): {os.strerror(err)}")
    finally:
        os.close(fd)


def in_netns(ns: str | None, fn: Callable[[], T]) -> T:
    """``fn()`` run in a thread inside ``ns`` (or directly when ``ns`` is None)."""
    if ns is None:
        return fn()
    box: dict[str, T] = {}
    fail: list[BaseException] = []

    def _run() -> None:
        try:
            _join(ns)
            box["v"] = fn()
        except BaseException as exc:  # re-raised in the caller's thread below
            fail.append(exc)

    th = threading.Thread(target=_run, name=f"netns-{ns}")
    th.start()
    th.join()
    if fail:
        raise fail[0]
    return box["v"]


def create_connection(
    addr: tuple[str, int], timeout: float | None = 10.0, ns: str | None = None
) -> socket.socket:
    """A connected TCP socket to ``addr`` from inside ``ns``."""
    return in_netns(ns, lambda: socket.create_connection(addr, timeout=timeout))


def create_server(addr: tuple[str, int], ns: str | None = None) -> socket.socket:
    """A listening TCP socket on ``addr`` inside ``ns`` (SO_REUSEADDR)."""
    return in_netns(ns, lambda: socket.create_server(addr, reuse_port=False, backlog=64))


def create_udp(bind: tuple[str, int] | None = None, ns: str | None = None) -> socket.socket:
    """A UDP socket inside ``ns``, bound to ``bind`` when given (a server's socket)."""

    def _make() -> socket.socket:
        sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        if bind is not None:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            sock.bind(bind)
        return sock

    return in_netns(ns, _make)
