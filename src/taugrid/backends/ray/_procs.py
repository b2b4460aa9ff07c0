"""Finding and killing the processes of one local Ray node, and only those (Linux /proc).

Owns process bookkeeping for ``ray_local``. ``ray stop`` is global to the host and
would kill other users' clusters, and Ray's own children escape a process group:
workers get their own group, job entrypoints their own *session*, and orphans are
re-parented to init. So every node is started with a *marker* environment variable
(``TAU_RAY_NODE=<cluster token>/<node index>``) that each Ray process inherits; a
node's processes are those whose ``/proc/PID/environ`` carries its marker, plus the
descendants of those (in case a program replaced its environment).

Also owns the host's *start slot*: with ``TAU_RAY_START_LOCK`` naming a file, one Ray
cluster at a time starts on this host (an exclusive ``flock`` held from the first
``ray start`` until every node is ALIVE). Starting a node is seconds of CPU; on a small
machine running several clusters (the tests' parallel workers), simultaneous starts
ran past Ray's fixed 30 s raylet registration, one at a time they do not.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import signal
import time
from collections.abc import Iterable, Iterator
from pathlib import Path

__all__ = ["MARKER_ENV", "START_LOCK_ENV", "alive", "marked", "start_slot", "terminate"]

MARKER_ENV = "TAU_RAY_NODE"
START_LOCK_ENV = "TAU_RAY_START_LOCK"
_PROC = Path("/proc")


def _pids() -> list[int]:
    return [int(p.name) for p in _PROC.iterdir() if p.name.isdigit()]


def _stat(pid: int) -> tuple[str, int] | None:
    """(state letter, ppid) of a process, or None when it is gone."""
    try:
        raw = (_PROC / str(pid) / "stat").read_text()
    except OSError:
        return None
    fields = raw[raw.rfind(")") + 2 :].split()  # comm may hold spaces and parens
    return fields[0], int(fields[1])


def alive(pid: int) -> bool:
    """The process exists and is not a zombie."""
    st = _stat(pid)
    return st is not None and st[0] not in ("Z", "X")


def _has_marker(pid: int, needle: bytes, prefix: bool) -> bool:
    try:
        env = (_PROC / str(pid) / "environ").read_bytes()
    except OSError:
        return False
    for entry in env.split(b"\0"):
        if entry == needle or (prefix and entry.startswith(needle)):
            return True
    return False


def marked(value: str, *, prefix: bool = False) -> set[int]:
    """Live pids carrying ``TAU_RAY_NODE=value`` (or a value starting with it), plus
    their descendants. Our own process is never included."""
    needle = f"{MARKER_ENV}={value}".encode()
    me = os.getpid()
    children: dict[int, list[int]] = {}
    found: set[int] = set()
    for pid in _pids():
        st = _stat(pid)
        if st is None or st[0] in ("Z", "X") or pid == me:
            continue
        children.setdefault(st[1], []).append(pid)
        if _has_marker(pid, needle, prefix):
            found.add(pid)
    todo = list(found)
    while todo:
        for child in children.get(todo.pop(), []):
            if child not in found and child != me:
                found.add(child)
                todo.append(child)
    return found


def _signal(pids: Iterable[int], sig: signal.Signals) -> None:
    for pid in pids:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(pid, sig)


def terminate(value: str, *, prefix: bool = False, grace_s: float = 5.0) -> set[int]:
    """SIGTERM the marked processes, SIGKILL what is left after ``grace_s``; repeat the
    scan until none remain (a dying raylet may still fork). Returns pids still alive
    after the last attempt (empty on success). ``grace_s=0`` kills at once."""
    if grace_s > 0:
        _signal(marked(value, prefix=prefix), signal.SIGTERM)
        deadline = time.monotonic() + grace_s
        while marked(value, prefix=prefix) and time.monotonic() < deadline:
            time.sleep(0.1)
    left: set[int] = set()
    for _ in range(20):
        left = marked(value, prefix=prefix)
        if not left:
            return set()
        _signal(left, signal.SIGKILL)
        time.sleep(0.1)
    return {p for p in left if alive(p)}


@contextlib.contextmanager
def start_slot() -> Iterator[None]:
    """Hold the host's Ray start slot (``$TAU_RAY_START_LOCK``) for the block; without
    that variable, no slot is taken."""
    path = os.environ.get(START_LOCK_ENV)
    if not path:
        yield
        return
    with open(path, "a") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)
