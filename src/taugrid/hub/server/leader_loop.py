"""A singleton that runs every few seconds on the leader replica while the hub app is up.

The results exports' retries (``hub.runs.results``) and the MLflow bridge (``hub.runs.tracking``)
are such loops: one replica does the work (``hub.core.replica``), a failed round is logged and
tried again on the next one.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable

from taugrid.hub.core import context

__all__ = ["LeaderLoop"]

log = logging.getLogger(__name__)


class LeaderLoop:
    """Calls ``work(hub)`` every ``every_s`` seconds while this replica leads."""

    def __init__(
        self, hub: context.Hub, name: str, work: Callable[[context.Hub], None], every_s: float
    ) -> None:
        self.hub, self.work, self.every_s = hub, work, every_s
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name=f"tau-{name}", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=30)

    def _loop(self) -> None:
        while not self._stop.wait(self.every_s):
            if not self.hub.is_leader():
                continue
            try:
                self.work(self.hub)
            except Exception:  # never let one bad round end the loop
                log.exception(
                    "%s: round failed; tried again in %g s", self._thread.name, self.every_s
                )
