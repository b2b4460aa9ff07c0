"""The embedded platform's supervisor: brings its hub and agent back when they die.

``tau up`` starts it (``python -m taugrid.sdk.supervise --home $TAU_HOME``) once the
platform is up; ``tau down`` stops it first, so nothing comes back behind it. Every
``CHECK_S`` it looks for the hub and the agent of its home (by pid file and command
line, ``sdk.embedded.Daemon``) and, when one is gone, runs what ``tau up`` runs: the
hub comes back on its recorded port; the agent adopts the Ray cluster its predecessor
left and re-attaches to the attempts still running there (their fencing tokens are
still valid), so a run goes on instead of starting again. A daemon that dies again
at once is retried with a growing pause (``BACKOFF_MAX_S`` at most), each try and its
cause written to ``$TAU_HOME/logs/supervisor.log``.
"""

from __future__ import annotations

import argparse
import logging
import signal
import threading
import time
from pathlib import Path
from types import FrameType

from taugrid import errors
from taugrid.sdk import embedded

__all__ = ["BACKOFF_MAX_S", "CHECK_S", "main"]

CHECK_S = 1.0
"""How often the daemons are looked for: a dead one is restarted within seconds."""
BACKOFF_MAX_S = 60.0
"""The longest pause between restarts of a daemon that keeps dying."""

log = logging.getLogger("taugrid.supervise")


def _missing(plat: embedded.EmbeddedPlatform) -> list[str]:
    return [d.name for d in (plat.hub, plat.agent) if d.pid() is None]


def supervise(plat: embedded.EmbeddedPlatform, stop: threading.Event) -> None:
    """Restart what is missing until ``stop`` is set."""
    failures, next_try = 0, 0.0
    while not stop.wait(CHECK_S):
        gone = _missing(plat)
        if not gone or time.monotonic() < next_try:
            continue
        log.warning("%s not running; restarting", " and ".join(gone))
        started = time.monotonic()
        try:
            plat.up(log.info, supervise=False)
        except errors.TauError as exc:
            failures += 1
            pause = min(BACKOFF_MAX_S, 2.0**failures)
            log.error("restart failed (%s); next try in %g s", exc.message, pause)
            next_try = time.monotonic() + pause
            continue
        log.info("%s back in %.1f s", " and ".join(gone), time.monotonic() - started)
        failures = 0


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--home", type=Path, required=True)
    args = ap.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(message)s")
    logging.getLogger("httpx").setLevel(logging.WARNING)  # not a line per status poll
    stop = threading.Event()

    def _stop(_sig: int, _frame: FrameType | None) -> None:
        stop.set()

    signal.signal(signal.SIGTERM, _stop)
    signal.signal(signal.SIGINT, _stop)
    log.info("supervising the hub and agent of %s", args.home)
    supervise(embedded.EmbeddedPlatform(args.home), stop)


if __name__ == "__main__":
    main()
