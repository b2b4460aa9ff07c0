"""The supervisor of a platform's daemons: brings a hub or agent back when it dies.

``tau up`` (the embedded platform) and ``tau lab up`` start one once everything is up
(``python -m taugrid.sdk.local.supervise --home HOME --watch NAME=DAEMON_HOME ...``); ``tau
down`` / ``tau lab down`` stop it first, so nothing comes back behind them. Every
``CHECK_S`` it looks for each watched daemon (``sdk.local.embedded.Daemon``: pid file and
command line) and starts one that is gone again with the command and environment it
was started with (``Daemon.restart``): a hub comes back on its port, an agent adopts
the Ray cluster its predecessor left and re-attaches to the attempts still running
there (their fencing tokens are still valid), so a run goes on instead of starting
again. A daemon that dies again at once is retried with a doubling pause
(``BACKOFF_MAX_S`` at most). Each restart and its outcome goes to the supervisor's log
(``HOME/logs/<name>.log``).
"""

from __future__ import annotations

import argparse
import dataclasses
import logging
import signal
import threading
import time
from pathlib import Path
from types import FrameType

from taugrid import errors
from taugrid.sdk.local import embedded

__all__ = ["BACKOFF_MAX_S", "CHECK_S", "main", "supervise"]

CHECK_S = 1.0
"""How often the daemons are looked for: a dead one is started again within seconds."""
BACKOFF_MAX_S = 60.0
"""The longest pause between restarts of a daemon that keeps dying."""

log = logging.getLogger("taugrid.supervise")


@dataclasses.dataclass
class _Watched:
    daemon: embedded.Daemon
    failures: int = 0
    next_try: float = 0.0
    restarted_at: float | None = None


def _check(w: _Watched, now: float) -> None:
    d = w.daemon
    if d.pid() is not None:
        if w.restarted_at is not None and now - w.restarted_at > 3 * CHECK_S:
            log.info("%s is running again (pid %s)", d.name, d.pid())
            w.restarted_at, w.failures = None, 0
        return
    if now < w.next_try:
        return
    if w.restarted_at is not None:  # died again soon after the last restart
        w.failures += 1
    pause = min(BACKOFF_MAX_S, 2.0**w.failures) if w.failures else 0.0
    w.next_try = now + max(pause, CHECK_S)
    try:
        pid = d.restart()
    except (errors.TauError, OSError) as exc:
        log.error("%s could not be started again: %s", d.name, exc)
        w.failures += 1
        return
    w.restarted_at = now
    log.warning("%s was not running; started it again (pid %d)", d.name, pid)


def supervise(daemons: list[embedded.Daemon], stop: threading.Event) -> None:
    """Start again what is gone until ``stop`` is set."""
    watched = [_Watched(d) for d in daemons]
    while not stop.wait(CHECK_S):
        for w in watched:
            _check(w, time.monotonic())


def _daemon(spec: str) -> embedded.Daemon:
    name, sep, home = spec.partition("=")
    if not sep or not name or not home:
        raise SystemExit(f"--watch takes NAME=HOME, not {spec!r}")
    return embedded.Daemon.recorded(name, Path(home))


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--home", type=Path, required=True, help="the platform's home")
    ap.add_argument("--watch", action="append", default=[], help="NAME=HOME of a daemon")
    args = ap.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(message)s")
    stop = threading.Event()

    def _stop(_sig: int, _frame: FrameType | None) -> None:
        stop.set()

    signal.signal(signal.SIGTERM, _stop)
    signal.signal(signal.SIGINT, _stop)
    daemons = [_daemon(w) for w in args.watch]
    log.info("supervising %s", ", ".join(f"{d.name} ({d.home})" for d in daemons))
    supervise(daemons, stop)


if __name__ == "__main__":
    main()
