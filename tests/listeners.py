"""Listening TCP sockets of a set of processes, from /proc (Linux; no psutil).

``listeners(pids)`` maps each listening socket owned by one of ``pids`` to
``(pid, ip, port)``; used to prove the platform binds only to loopback.
"""

from __future__ import annotations

import ipaddress
import os
import socket
import struct
from pathlib import Path

__all__ = ["Listener", "listeners"]

Listener = tuple[int, str, int]


def _addr(hexaddr: str, v6: bool) -> tuple[str, int]:
    host, port = hexaddr.split(":")
    raw = bytes.fromhex(host)
    if v6:
        words = struct.unpack("<4I", raw)
        packed = struct.pack(">4I", *words)
        ip = str(ipaddress.IPv6Address(packed))
    else:
        ip = socket.inet_ntoa(struct.pack("<I", int(host, 16)))
    return ip, int(port, 16)


def _listening_inodes() -> dict[int, tuple[str, int]]:
    out: dict[int, tuple[str, int]] = {}
    for name, v6 in (("tcp", False), ("tcp6", True)):
        path = Path("/proc/net") / name
        if not path.exists():
            continue
        for line in path.read_text().splitlines()[1:]:
            cols = line.split()
            if cols[3] == "0A":  # TCP_LISTEN
                out[int(cols[9])] = _addr(cols[1], v6)
    return out


def listeners(pids: set[int]) -> list[Listener]:
    """Every listening TCP socket held by one of ``pids``."""
    inodes = _listening_inodes()
    found: list[Listener] = []
    for pid in pids:
        fd_dir = Path(f"/proc/{pid}/fd")
        try:
            fds = os.listdir(fd_dir)
        except OSError:
            continue
        for fd in fds:
            try:
                target = os.readlink(fd_dir / fd)
            except OSError:
                continue
            if target.startswith("socket:["):
                inode = int(target[8:-1])
                if inode in inodes:
                    found.append((pid, *inodes[inode]))
    return sorted(set(found))


def is_loopback(ip: str) -> bool:
    return ipaddress.ip_address(ip).is_loopback
